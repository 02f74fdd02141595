//! memlint against hostile input and a hostile file system: one test per
//! defect of the file-system boundary, depth and size (special files, lost
//! edits, nesting, lone CR line endings, unreadable directories). Cases
//! that need root (a device node made with `mknod`, another owner) run
//! when the tests run as root, as in CI, and say so when skipped.

use tests::*;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A file with findings that `--fix` fixes (safe ML401 fixes: the project
/// declares a torch with `torch.amp`).
fn fixable(dir: &Path, name: &str) -> String {
    let text = std::fs::read_to_string(root().join("fixtures/fix/ml401_amp.py")).expect("fixture");
    write(dir, name, &text);
    write(dir, "requirements.txt", "torch>=2.4\n");
    text
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.starts_with(b"0\n"))
}

/// Runs memlint with a deadline: a hang is a failure, not a stuck suite.
fn memlint_within(dir: &Path, args: &[&str], limit: Duration) -> Output {
    let mut child = Command::new(memlint_bin())
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("memlint starts");
    let start = Instant::now();
    loop {
        if child.try_wait().expect("wait").is_some() {
            return child.wait_with_output().expect("output");
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let o = child.wait_with_output().expect("output");
            panic!("memlint {args:?} still running after {limit:?}: {}{}", stdout(&o), stderr(&o));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("json output ({e}): {}{}", stdout(o), stderr(o)))
}

/// `(path, code, line, message)` of every finding.
fn findings(o: &Output) -> Vec<(String, String, u64, String)> {
    json(o)["diagnostics"]
        .as_array()
        .expect("diagnostics")
        .iter()
        .map(|d| {
            (
                d["path"].as_str().unwrap_or_default().to_string(),
                d["code"].as_str().unwrap_or_default().to_string(),
                d["line"].as_u64().unwrap_or_default(),
                d["message"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

const LEAF: &str = "import torch\nx = torch.zeros(3, requires_grad=True)\nx.add_(1)\n";

// 1. A name that is not UTF-8 is fixed under its own name, and the file
//    with the U+FFFD spelling of that name is left alone.
#[cfg(unix)]
#[test]
fn fix_writes_a_non_utf8_name_not_its_lossy_spelling() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let text = fixable(dir.path(), "template.py");
    let raw = dir.path().join(std::ffi::OsStr::from_bytes(b"a\xff.py"));
    std::fs::rename(dir.path().join("template.py"), &raw).expect("rename");
    write(dir.path(), "a\u{fffd}.py", "unrelated = 1\n");
    let o = memlint(dir.path(), &["check", ".", "--fix", "--format", "concise"]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert_ne!(std::fs::read_to_string(&raw).expect("read"), text, "the file itself is fixed");
    assert_eq!(std::fs::read_to_string(dir.path().join("a\u{fffd}.py")).expect("read"), "unrelated = 1\n");
}

// 2. `-o` onto a device node, a FIFO, `-` and a symbolic link: written,
//    never replaced.
#[cfg(unix)]
#[test]
fn output_to_a_device_node_writes_it_and_keeps_it_a_device() {
    use std::os::unix::fs::FileTypeExt;
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "train.py", LEAF);
    let node = dir.path().join("null");
    let made = Command::new("mknod").arg(&node).args(["c", "1", "3"]).status().is_ok_and(|s| s.success());
    if !made {
        assert!(!is_root(), "root can make a device node");
        eprintln!("skipped: mknod needs root");
        return;
    }
    let o = memlint(dir.path(), &["check", ".", "-o", "null", "--format", "json"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(std::fs::symlink_metadata(&node).expect("node").file_type().is_char_device(), "still a device");
    // Through a symbolic link, as /dev/stdout is one.
    std::os::unix::fs::symlink("null", dir.path().join("out")).expect("symlink");
    let o = memlint(dir.path(), &["check", ".", "-o", "out"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(std::fs::symlink_metadata(dir.path().join("out")).expect("link").file_type().is_symlink());
    assert!(std::fs::symlink_metadata(&node).expect("node").file_type().is_char_device());
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .expect("ls")
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().to_string()))
        .filter(|n| n.starts_with(".partial-") || n.starts_with(".write-check-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[cfg(unix)]
#[test]
fn output_dash_is_stdout_and_a_fifo_is_written_in_place() {
    use std::os::unix::fs::FileTypeExt;
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "train.py", LEAF);
    let o = memlint(dir.path(), &["check", ".", "-o", "-", "--format", "json"]);
    assert_eq!(findings(&o).len(), 1, "{}", stdout(&o));
    assert!(!dir.path().join("-").exists(), "no file named -");
    let fifo = dir.path().join("report.fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().expect("mkfifo").success());
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(fifo).expect("read fifo"))
    };
    let o = memlint_within(dir.path(), &["check", ".", "-o", "report.fifo", "--format", "json"], Duration::from_secs(60));
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_slice(&reader.join().expect("reader")).expect("json through the fifo");
    assert_eq!(report["summary"]["diagnostics"], 1);
    assert!(std::fs::symlink_metadata(&fifo).expect("fifo").file_type().is_fifo());
}

#[test]
fn output_paths_are_checked_before_any_file_is() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "train.py", LEAF);
    for flag in ["-o", "--write-baseline"] {
        let o = memlint(dir.path(), &["check", ".", flag, "missing/report.json"]);
        assert_eq!(o.status.code(), Some(2), "{flag}: {}", stderr(&o));
        assert!(stderr(&o).contains("missing") && stderr(&o).contains("does not exist"), "{}", stderr(&o));
        assert!(stdout(&o).is_empty(), "nothing checked: {}", stdout(&o));
    }
}

// 3. Deep nesting is one ML000 naming the line, and the run goes on.
#[test]
fn deep_nesting_is_one_finding_not_a_crash() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "ok.py", LEAF);
    write(dir.path(), "minus.py", format!("x = {}1\n", "-".repeat(10_000)));
    write(dir.path(), "plus.py", format!("x = {}\n", vec!["a"; 10_000].join("+")));
    write(dir.path(), "chain.py", format!("x = a{}\n", ".b".repeat(10_000)));
    let mut blocks = String::from("import torch\n\n");
    for i in 0..2000 {
        blocks.push_str(&format!("{}if x:\n", " ".repeat(i)));
    }
    blocks.push_str(&format!("{}pass\n", " ".repeat(2000)));
    write(dir.path(), "blocks.py", blocks);
    let o = memlint_within(dir.path(), &["check", ".", "--format", "json", "--select", "ALL"], Duration::from_secs(120));
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let found = findings(&o);
    for name in ["minus.py", "plus.py", "chain.py", "blocks.py"] {
        let mine: Vec<_> = found.iter().filter(|f| f.0.ends_with(name)).collect();
        assert_eq!(mine.len(), 1, "{name}: {mine:?}");
        assert_eq!(mine[0].1, "ML000");
        assert!(mine[0].3.contains("nested too deeply"), "{mine:?}");
    }
    assert!(found.iter().any(|f| f.0.ends_with("ok.py") && f.1 == "ML101"), "the other file is checked: {found:?}");
    let blocks = found.iter().find(|f| f.0.ends_with("blocks.py")).expect("blocks");
    assert!(blocks.2 > 2, "the line where it gets too deep: {blocks:?}");
}

// 4. `--fix` leaving a file alone that changed since it was read is tested
//    where the change can be made between the read and the write:
//    `safe_io`'s `a_file_changed_since_it_was_read_is_left_alone`. The
//    report of a file not written is the one of 8. and 9. below.

// 5. and 6. A link to /dev/zero and a FIFO, as checked files and as the
//    project files memlint reads on its own: refused at once.
#[cfg(unix)]
#[test]
fn special_files_are_refused_without_reading_or_blocking() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "ok.py", LEAF);
    std::os::unix::fs::symlink("/dev/zero", dir.path().join("zero.py")).expect("symlink");
    std::os::unix::fs::symlink("/dev/zero", dir.path().join("setup.cfg")).expect("symlink");
    for fifo in ["x.py", "requirements.txt"] {
        assert!(Command::new("mkfifo").arg(dir.path().join(fifo)).status().expect("mkfifo").success());
    }
    // A directory walk passes over what is not a regular file; named on
    // the command line, each is reported.
    let o = memlint_within(dir.path(), &["check", ".", "--format", "json"], Duration::from_secs(60));
    assert_eq!(findings(&o).len(), 1, "{}", stdout(&o));
    let o = memlint_within(dir.path(), &["check", ".", "zero.py", "x.py", "--format", "json"], Duration::from_secs(60));
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let found = findings(&o);
    let message = |name: &str| found.iter().find(|f| f.0.ends_with(name)).map(|f| f.3.clone()).unwrap_or_default();
    assert!(message("zero.py").contains("not a regular file (it is a character device)"), "{found:?}");
    assert!(message("x.py").contains("not a regular file (it is a FIFO)"), "{found:?}");
    assert!(found.iter().any(|f| f.0.ends_with("ok.py") && f.1 == "ML101"), "{found:?}");
    // A FIFO as the configuration file or the project's pyproject.toml:
    // not a configuration (discovery looks for regular files), no wait.
    for name in ["memlint.toml", "pyproject.toml"] {
        assert!(Command::new("mkfifo").arg(dir.path().join(name)).status().expect("mkfifo").success());
    }
    let o = memlint_within(dir.path(), &["check", ".", "--format", "json"], Duration::from_secs(60));
    assert_eq!(findings(&o).len(), 1, "{}{}", stdout(&o), stderr(&o));
}

#[test]
fn files_over_the_size_limit_are_reported_not_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "big.py", format!("x = 1\n{}", "# padding\n".repeat(200)));
    write(dir.path(), "ok.py", LEAF);
    let o = memlint(dir.path(), &["check", ".", "--format", "json", "--max-file-size", "1K"]);
    let found = findings(&o);
    let big = found.iter().find(|f| f.0.ends_with("big.py")).expect("big.py reported");
    assert_eq!(big.1, "ML000");
    assert!(big.3.contains("larger than the limit of 1 KiB"), "{big:?}");
    assert!(found.iter().any(|f| f.0.ends_with("ok.py") && f.1 == "ML101"));
    let o = memlint(dir.path(), &["check", ".", "--max-file-size", "lots"]);
    assert_eq!(o.status.code(), Some(2));
}

// 7. An unreadable directory is a finding and counts as checked.
#[cfg(unix)]
#[test]
fn an_unreadable_directory_is_reported() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    // Readable by the unprivileged user the test may switch to.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    write(dir.path(), "ok.py", "x = 1\n");
    write(dir.path(), "secret/train.py", LEAF);
    std::fs::set_permissions(dir.path().join("secret"), std::fs::Permissions::from_mode(0o000)).expect("chmod");
    // Root reads every directory: run as nobody, from a copy of the binary
    // that nobody can reach (the checkout may be under a private home).
    let bin_dir = tempfile::tempdir().expect("tempdir");
    let mut cmd = if is_root() {
        std::fs::set_permissions(bin_dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let copy = bin_dir.path().join("memlint");
        std::fs::copy(memlint_bin(), &copy).expect("copy the binary");
        std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"]).arg(&copy);
        c
    } else {
        Command::new(memlint_bin())
    };
    let o = cmd.args(["check", ".", "--format", "json"]).current_dir(dir.path()).output().expect("memlint runs");
    std::fs::set_permissions(dir.path().join("secret"), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    let found = findings(&o);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].0.ends_with("secret") && found[0].1 == "ML000", "{found:?}");
    assert!(found[0].3.contains("cannot read directory") && found[0].3.contains("ermission denied"), "{found:?}");
    assert_eq!(json(&o)["summary"]["files"], 2, "the directory counts");
}

// 8. and 9. `--fix` keeps a read-only file, the owner, and hard links, and
//    reports every file it did not write.
#[cfg(unix)]
#[test]
fn fix_keeps_read_only_files_owners_and_hard_links() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let dir = tempfile::tempdir().expect("tempdir");
    let text = fixable(dir.path(), "ro.py");
    fixable(dir.path(), "linked.py");
    fixable(dir.path(), "owned.py");
    std::fs::set_permissions(dir.path().join("ro.py"), std::fs::Permissions::from_mode(0o444)).expect("chmod");
    std::fs::hard_link(dir.path().join("linked.py"), dir.path().join("other_link.txt")).expect("link");
    let root = is_root();
    if root {
        assert!(Command::new("chown").args(["65534:65534"]).arg(dir.path().join("owned.py")).status().expect("chown").success());
    }
    let o = memlint(dir.path(), &["check", "ro.py", "linked.py", "owned.py", "--fix", "--format", "concise"]);
    assert_eq!(o.status.code(), Some(2), "{}{}", stdout(&o), stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("ro.py: not written: it is read-only"), "{err}");
    assert!(err.contains("2 fixed files written, 1 file not written"), "{err}");
    assert!(stdout(&o).contains("ro.py"), "its findings stand: {}", stdout(&o));
    assert_eq!(std::fs::read_to_string(dir.path().join("ro.py")).expect("read"), text);
    let linked = std::fs::read_to_string(dir.path().join("linked.py")).expect("read");
    assert_ne!(linked, text, "fixed");
    assert_eq!(std::fs::read_to_string(dir.path().join("other_link.txt")).expect("read"), linked, "one file, two links");
    assert_eq!(std::fs::metadata(dir.path().join("linked.py")).expect("meta").nlink(), 2);
    let owned = std::fs::metadata(dir.path().join("owned.py")).expect("meta");
    assert_ne!(std::fs::read_to_string(dir.path().join("owned.py")).expect("read"), text, "fixed");
    if root {
        assert_eq!((owned.uid(), owned.gid()), (65534, 65534), "owner kept");
    } else {
        eprintln!("owner check skipped: chown needs root");
    }
}

// 10. A lone CR ends a line: lines, suppressions and fixes.
#[test]
fn lone_cr_line_endings_are_lines() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = "import torch\rx = torch.zeros(3, requires_grad=True)\rx.add_(1)\rx.mul_(2)  # memlint: ignore[ML101]\rx.sub_(3)\r";
    write(dir.path(), "mac.py", text);
    let o = memlint(dir.path(), &["check", "mac.py", "--format", "json"]);
    let lines: Vec<u64> = findings(&o).iter().filter(|f| f.1 == "ML101").map(|f| f.2).collect();
    assert_eq!(lines, vec![3, 5], "{}", stdout(&o));
    // A fix inserts the file's own line ending.
    let dir = tempfile::tempdir().expect("tempdir");
    let text = fixable(dir.path(), "amp.py").replace('\n', "\r");
    write(dir.path(), "amp.py", &text);
    let o = memlint(dir.path(), &["check", "amp.py", "--fix", "--format", "concise"]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    let fixed = std::fs::read_to_string(dir.path().join("amp.py")).expect("read");
    assert_ne!(fixed, text);
    assert!(!fixed.contains('\n'), "only lone CR line endings: {fixed:?}");
}

// 11. Nesting and chains near the limit are checked in linear time, and
//     past it refused at once (1,000 nested loops took 16 s, 20,000
//     attributes 14 s).
#[test]
fn deep_loops_and_long_chains_take_linear_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut loops = String::from("import torch\nx = torch.zeros(3, requires_grad=True)\ndef f():\n");
    for i in 1..450 {
        loops.push_str(&format!("{}for i in x:\n", " ".repeat(i)));
    }
    loops.push_str(&format!("{}x.add_(1)\n", " ".repeat(450)));
    write(dir.path(), "loops.py", loops);
    let mut deeper = String::from("def f():\n");
    for i in 1..1000 {
        deeper.push_str(&format!("{}for i in x:\n", " ".repeat(i)));
    }
    deeper.push_str(&format!("{}pass\n", " ".repeat(1000)));
    write(dir.path(), "deeper.py", deeper);
    write(dir.path(), "chain.py", format!("import torch\ny = torch.zeros(3){}\n", ".t()".repeat(20_000)));
    let o = memlint_within(dir.path(), &["check", ".", "--format", "json", "--select", "ALL"], Duration::from_secs(60));
    let found = findings(&o);
    assert!(found.iter().any(|f| f.0.ends_with("loops.py") && f.1 == "ML101"), "{found:?}");
    assert!(found.iter().any(|f| f.0.ends_with("deeper.py") && f.3.contains("nested too deeply")), "{found:?}");
    assert!(found.iter().any(|f| f.0.ends_with("chain.py") && f.3.contains("nested too deeply")), "{found:?}");
}

// 11. A compact notebook of 100,000 cells (one JSON line) in linear time:
//     column counting from the start of the line and a list lookup per
//     cell made it quadratic (200,000 cells took 119 s).
#[test]
fn a_compact_notebook_of_many_cells_takes_linear_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cells: Vec<serde_json::Value> = (0..100_000)
        .map(|i| {
            let source = if i % 1000 == 0 { LEAF.to_string() } else { format!("y = {i}\n") };
            serde_json::json!({"cell_type": "code", "source": source, "metadata": {}, "outputs": [], "execution_count": null})
        })
        .collect();
    let nb = serde_json::json!({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5});
    write(dir.path(), "many.ipynb", nb.to_string());
    let o = memlint_within(dir.path(), &["check", "many.ipynb", "--format", "json"], Duration::from_secs(90));
    let found = findings(&o);
    assert_eq!(found.iter().filter(|f| f.1 == "ML101").count(), 100, "{}", stderr(&o));
}

/// `-` is standard input (read once, within the size limit), named by
/// `--stdin-filename`; `--fix` cannot write it back, `--diff` shows the fixes.
#[test]
fn standard_input_is_checked_as_named() {
    use std::io::Write as _;
    let dir = tempfile::tempdir().expect("tempdir");
    let run = |args: &[&str], input: &str| {
        let mut child = Command::new(memlint_bin())
            .args(args)
            .current_dir(dir.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("memlint starts");
        child.stdin.take().expect("stdin").write_all(input.as_bytes()).expect("write");
        child.wait_with_output().expect("output")
    };
    let o = run(&["check", "-", "--stdin-filename", "src/train.py", "--format", "json"], LEAF);
    let found = findings(&o);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!((found[0].0.as_str(), found[0].1.as_str(), found[0].2), ("src/train.py", "ML101", 3));
    let o = run(&["check", "-", "--format", "json", "--max-file-size", "10"], LEAF);
    assert!(findings(&o)[0].3.contains("larger than the limit"), "{}", stdout(&o));
    let o = run(&["check", "-", "--fix"], LEAF);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("use `--diff`"), "{}", stderr(&o));
    let o = run(&["check", "-", "--diff", "--unsafe-fixes"], "import torch\nscaler = torch.cuda.amp.GradScaler()\n");
    assert!(stdout(&o).contains("+scaler = torch.amp.GradScaler(\"cuda\")"), "{}", stdout(&o));
}
