//! `--fix`, `--unsafe-fixes` and `--diff` end to end on copies of the
//! fixtures in `fixtures/fix/`.

use tests::*;

use std::path::Path;


fn copy_fixture(dir: &Path, name: &str) -> String {
    let text = std::fs::read_to_string(root().join("fixtures/fix").join(name)).expect("fixture");
    write(dir, name, &text);
    // The project requires a torch with `torch.amp`: the ML401 fixes are safe.
    write(dir, "requirements.txt", "torch>=2.4\n");
    text
}

#[test]
fn ml401_fixes_are_unsafe_without_a_declared_torch_minimum() {
    let dir = tempfile::tempdir().expect("tempdir");
    copy_fixture(dir.path(), "ml401_amp.py");
    std::fs::remove_file(dir.path().join("requirements.txt")).expect("rm");
    let before = std::fs::read_to_string(dir.path().join("ml401_amp.py")).expect("read");
    let o = memlint(dir.path(), &["check", "ml401_amp.py", "--fix", "--format", "concise"]);
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    assert_eq!(std::fs::read_to_string(dir.path().join("ml401_amp.py")).expect("read"), before, "safe --fix leaves them");
    let o = memlint(dir.path(), &["check", "ml401_amp.py", "--fix", "--unsafe-fixes", "--format", "concise"]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert_parses_and_clean(dir.path(), "ml401_amp.py", &["ML401"]);
}

/// The result parses and re-linting shows none of the fixed codes.
fn assert_parses_and_clean(dir: &Path, name: &str, fixed_codes: &[&str]) {
    let o = memlint(dir, &["check", name, "--select", "ALL", "--format", "json", "--exit-zero"]);
    let codes = codes(&o);
    assert!(!codes.iter().any(|c| c == "ML000"), "the fixed file parses: {}", stdout(&o));
    for c in fixed_codes {
        assert!(!codes.iter().any(|x| x == c), "{c} is fixed: {}", stdout(&o));
    }
}

#[test]
fn fix_ml401_in_place_with_two_fixes_on_one_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let original = copy_fixture(dir.path(), "ml401_amp.py");
    assert!(original.contains("torch.cuda.amp.GradScaler(), torch.cuda.amp.GradScaler("), "two fixes on one line");
    let o = memlint(dir.path(), &["check", "ml401_amp.py", "--fix", "--format", "concise"]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert!(stderr(&o).contains("fixed 5 findings in 1 file, 0 remaining"), "{}", stderr(&o));
    let fixed = std::fs::read_to_string(dir.path().join("ml401_amp.py")).expect("read");
    assert!(fixed.contains("torch.amp.GradScaler(\"cuda\"), torch.amp.GradScaler(\"cuda\", init_scale=2.0**8)"));
    assert_parses_and_clean(dir.path(), "ml401_amp.py", &["ML401"]);
    insta::assert_snapshot!("ml401_amp_fixed", fixed);

    // Nothing left to fix: a second run changes nothing.
    let o = memlint(dir.path(), &["check", "ml401_amp.py", "--fix"]);
    assert!(stderr(&o).contains("fixed 0 findings"), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(dir.path().join("ml401_amp.py")).expect("read"), fixed);
}

/// `from torch.cuda.amp import ...`: the import and every use of its
/// names are rewritten together (a use left without its device would break
/// under `torch.amp`); with a bare reference among the uses, nothing is.
#[test]
fn fix_ml401_from_import_rewrites_the_import_and_its_uses_together() {
    let dir = tempfile::tempdir().expect("tempdir");
    copy_fixture(dir.path(), "ml401_from_import.py");
    write(dir.path(), "pyproject.toml", "[project]\nname = \"x\"\ndependencies = [\"torch>=2.4\"]\n");
    let o = memlint(dir.path(), &["check", "ml401_from_import.py", "--fix", "--format", "concise"]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    let fixed = std::fs::read_to_string(dir.path().join("ml401_from_import.py")).expect("read");
    assert_parses_and_clean(dir.path(), "ml401_from_import.py", &["ML401"]);
    insta::assert_snapshot!("ml401_from_import_fixed", fixed);

    let with_ref = std::fs::read_to_string(root().join("fixtures/fix/ml401_from_import.py")).expect("fixture")
        + "\n\nmake_scaler = GradScaler\n";
    write(dir.path(), "ref.py", &with_ref);
    let o = memlint(dir.path(), &["check", "ref.py", "--fix", "--format", "concise"]);
    assert_eq!(std::fs::read_to_string(dir.path().join("ref.py")).expect("read"), with_ref, "{}", stdout(&o));
    assert!(stdout(&o).contains("ML401"), "{}", stdout(&o));
}

#[test]
fn fix_keeps_crlf_permissions_bom_and_symlinks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let original = std::fs::read_to_string(root().join("fixtures/fix/ml401_amp.py")).expect("fixture");
    let crlf = format!("\u{feff}{}", original.replace('\n', "\r\n"));
    write(dir.path(), "real/crlf.py", &crlf);
    write(dir.path(), "requirements.txt", "torch>=2.4\n");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path().join("real/crlf.py"), std::fs::Permissions::from_mode(0o750)).expect("chmod");
        std::os::unix::fs::symlink("real/crlf.py", dir.path().join("link.py")).expect("symlink");
    }
    let target = if cfg!(unix) { "link.py" } else { "real/crlf.py" };
    let o = memlint(dir.path(), &["check", target, "--fix"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let bytes = std::fs::read(dir.path().join("real/crlf.py")).expect("read");
    let fixed = String::from_utf8(bytes).expect("utf-8");
    assert!(fixed.starts_with('\u{feff}'), "the BOM is kept");
    assert_eq!(fixed.matches('\n').count(), fixed.matches("\r\n").count(), "every line still ends with CRLF");
    assert_eq!(fixed.matches("\r\n").count(), original.matches('\n').count());
    let expected = std::fs::read_to_string(root().join("fixtures/fix/ml401_amp.py")).expect("fixture");
    let o = {
        write(dir.path(), "lf.py", &expected);
        memlint(dir.path(), &["check", "lf.py", "--fix"])
    };
    assert_eq!(o.status.code(), Some(0));
    let lf = std::fs::read_to_string(dir.path().join("lf.py")).expect("read");
    assert_eq!(fixed.trim_start_matches('\u{feff}').replace("\r\n", "\n"), lf, "same fixes as with LF");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::metadata(dir.path().join("real/crlf.py")).expect("meta");
        assert_eq!(meta.permissions().mode() & 0o777, 0o750, "permissions kept");
        assert!(std::fs::symlink_metadata(dir.path().join("link.py")).expect("meta").file_type().is_symlink(), "the link stays a link");
    }
    assert_parses_and_clean(dir.path(), "real/crlf.py", &["ML401"]);
}

#[test]
fn human_formats_say_how_many_findings_are_fixable() {
    let dir = tempfile::tempdir().expect("tempdir");
    copy_fixture(dir.path(), "ml401_amp.py");
    write(dir.path(), "train.py", TRAIN);
    for format in ["full", "concise", "grouped"] {
        let o = memlint(dir.path(), &["check", ".", "--format", format]);
        // train.py's ML202 has an unsafe fix (`loss` -> `loss.item()`).
        let end = "5 fixable with `memlint check --fix`, 1 more with `--unsafe-fixes` (review them: they may change behaviour)\n";
        assert!(stdout(&o).ends_with(end), "{format}: {}", stdout(&o));
    }
    let o = memlint(dir.path(), &["check", ".", "--format", "concise", "--quiet"]);
    assert!(!stdout(&o).contains("fixable"));
    let o = memlint(dir.path(), &["check", "ml401_amp.py"]);
    assert!(stdout(&o).ends_with("5 fixable with `memlint check --fix`\n"), "{}", stdout(&o));
}

#[test]
fn diff_prints_and_writes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let original = copy_fixture(dir.path(), "ml401_amp.py");
    let o = memlint(dir.path(), &["check", "ml401_amp.py", "--diff"]);
    assert_eq!(o.status.code(), Some(1), "something to fix");
    let diff = stdout(&o);
    assert!(diff.starts_with("--- a/ml401_amp.py\n+++ b/ml401_amp.py\n@@ "), "{diff}");
    assert!(diff.contains("-    @torch.cuda.amp.custom_bwd\n+    @torch.amp.custom_bwd(device_type=\"cuda\")\n"), "{diff}");
    assert!(stderr(&o).contains("would fix 5 findings in 1 file"), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(dir.path().join("ml401_amp.py")).expect("read"), original, "nothing written");
    insta::assert_snapshot!("ml401_amp_diff", diff);

    // The diff applies with `git apply` and gives what --fix writes.
    std::fs::write(dir.path().join("fix.diff"), &diff).expect("write diff");
    let applied = std::process::Command::new("git").args(["apply", "fix.diff"]).current_dir(dir.path()).output().expect("git apply runs");
    assert!(applied.status.success(), "{}", String::from_utf8_lossy(&applied.stderr));
    let via_diff = std::fs::read_to_string(dir.path().join("ml401_amp.py")).expect("read");
    write(dir.path(), "ml401_amp.py", &original);
    memlint(dir.path(), &["check", "ml401_amp.py", "--fix"]);
    assert_eq!(via_diff, std::fs::read_to_string(dir.path().join("ml401_amp.py")).expect("read"));
    write(dir.path(), "ml401_amp.py", &original);

    write(dir.path(), "train.py", TRAIN);
    let o = memlint(dir.path(), &["check", "train.py", "--diff"]);
    assert_eq!(o.status.code(), Some(0), "findings without fixes: nothing to fix");
    assert!(o.stdout.is_empty());

    let o = memlint(dir.path(), &["check", "ml401_amp.py", "--unsafe-fixes"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--unsafe-fixes"));
    let o = memlint(dir.path(), &["check", "ml401_amp.py", "--fix", "--diff"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn unsafe_fixes_flag_applies_safe_ones_too_and_reports_the_rest() {
    let dir = tempfile::tempdir().expect("tempdir");
    copy_fixture(dir.path(), "ml401_amp.py");
    let o = memlint(dir.path(), &["check", ".", "--fix", "--unsafe-fixes", "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_parses_and_clean(dir.path(), "ml401_amp.py", &["ML401"]);
    write(dir.path(), "train.py", TRAIN);
    let o = memlint(dir.path(), &["check", ".", "--fix", "--unsafe-fixes", "--format", "json"]);
    assert_eq!(o.status.code(), Some(1), "findings without fixes remain");
    // ML202's unsafe fix applied (`total += loss.item()`); ML201 has none.
    assert_eq!(codes(&o), ["ML201"]);
    assert!(std::fs::read_to_string(dir.path().join("train.py")).expect("read").contains("total += loss.item()"));
}

#[test]
fn files_with_syntax_errors_are_not_fixed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = "import torch\nscaler = torch.cuda.amp.GradScaler()\ndef oops(:\n    pass\n";
    write(dir.path(), "broken.py", text);
    write(dir.path(), "requirements.txt", "torch>=2.4\n");
    let o = memlint(dir.path(), &["check", "broken.py", "--fix"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("broken.py:2: ML401 fix not applied: the file has syntax errors"), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(dir.path().join("broken.py")).expect("read"), text);
}

#[test]
fn only_python_source_files_are_rewritten() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = "import torch\nscaler = torch.cuda.amp.GradScaler()\n";
    write(dir.path(), "train_script", text);
    let o = memlint(dir.path(), &["check", "train_script", "--fix"]);
    assert_eq!(o.status.code(), Some(1), "the finding remains");
    assert!(stderr(&o).contains("train_script: 1 fix not applied: only .py, .pyi and .ipynb files are fixed"), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(dir.path().join("train_script")).expect("read"), text);
    let o = memlint(dir.path(), &["check", "train_script", "--diff"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(o.stdout.is_empty());
}

#[test]
fn unsafe_fixes_of_ml202_and_ml103_leave_a_parsing_file_without_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, code) in [("ML202_loss_accumulated_with_graph.py", "ML202"), ("ML103_data_attribute.py", "ML103")] {
        let text = std::fs::read_to_string(root().join("fixtures/python").join(name)).expect("fixture");
        write(dir.path(), name, &text);
        let o = memlint(dir.path(), &["check", name, "--select", code, "--fix", "--unsafe-fixes", "--format", "concise"]);
        assert!(stderr(&o).contains("fixed "), "{}{}", stdout(&o), stderr(&o));
        let fixed = std::fs::read_to_string(dir.path().join(name)).expect("read");
        assert_ne!(fixed, text, "{code} fixes applied");
        let o = memlint(dir.path(), &["check", name, "--select", &format!("ML000,{code}"), "--format", "json", "--exit-zero"]);
        let left = codes(&o);
        assert!(!left.iter().any(|c| c == "ML000"), "{code}: the fixed file parses: {}", stdout(&o));
        // What remains has no fix (writes through `.data`, dtype swaps).
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
        for d in v["diagnostics"].as_array().expect("array") {
            assert!(d["fix"].is_null(), "{code}: a fixable finding remains: {d}");
        }
    }
}
