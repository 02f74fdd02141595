//! The pre-commit hooks of `.pre-commit-hooks.yaml`, run the way pre-commit
//! runs them: the hook's `entry` followed by the staged file names.

use tests::*;

/// `(id, entry)` of each hook (the file is a flat list of mappings).
fn hooks() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(root().join(".pre-commit-hooks.yaml")).expect("hooks file");
    let mut out = Vec::new();
    let mut id = None;
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("- id: ") {
            id = Some(v.trim().to_string());
        } else if let Some(v) = line.trim_start().strip_prefix("entry: ") {
            out.push((id.clone().expect("entry after id"), v.trim().to_string()));
        }
        if line.trim_start().starts_with("types_or:") {
            assert!(line.contains("python"), "hooks run on Python files: {line}");
        }
    }
    out
}

fn run_hook(dir: &std::path::Path, entry: &str, files: &[&str]) -> std::process::Output {
    let mut parts = entry.split_whitespace();
    assert_eq!(parts.next(), Some("memlint"));
    let mut args: Vec<&str> = parts.collect();
    args.extend_from_slice(files);
    memlint(dir, &args)
}

#[test]
fn hooks_check_the_staged_files_and_honour_exclude() {
    let hooks = hooks();
    let ids: Vec<&str> = hooks.iter().map(|(i, _)| i.as_str()).collect();
    assert_eq!(ids, ["memlint", "memlint-fix"]);
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "memlint.toml", "exclude = [\"vendored\"]\n");
    // The project requires torch >= 2.4, so the ML401 fix is safe.
    write(dir.path(), "requirements.txt", "torch>=2.4\n");
    write(dir.path(), "src/train.py", TRAIN);
    write(dir.path(), "vendored/old.py", TRAIN);
    write(dir.path(), "src/amp.py", "import torch\nscaler = torch.cuda.amp.GradScaler()\n");

    let (_, check) = &hooks[0];
    let o = run_hook(dir.path(), check, &["src/train.py", "vendored/old.py"]);
    assert_eq!(o.status.code(), Some(1));
    let out = stdout(&o);
    assert!(out.contains("src/train.py") && !out.contains("vendored/old.py"), "{out}");
    // Only excluded files staged: nothing to report.
    let o = run_hook(dir.path(), check, &["vendored/old.py"]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));

    let (_, fix) = &hooks[1];
    let o = run_hook(dir.path(), fix, &["src/amp.py"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let fixed = std::fs::read_to_string(dir.path().join("src/amp.py")).expect("read");
    assert!(fixed.contains("torch.amp.GradScaler(\"cuda\")"), "{fixed}");
}
