//! Replays the saved fuzz inputs (`fuzz/regressions/`) and the fixtures
//! through the fuzz targets' checks (`fuzz/src/lib.rs`): every rule, every
//! output format, the fix loop. Runs on stable, without the fuzzer.

#[path = "../fuzz/src/lib.rs"]
#[allow(missing_docs)]
mod harness;

use std::path::{Path, PathBuf};

use tests::root;

fn files(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|e| e == ext)).collect())
        .unwrap_or_default();
    out.sort();
    out
}

/// Runs `check` on each file, on a thread with the stack the memlint
/// binary gives its workers (deep inputs recurse up to the nesting limit).
fn replay(paths: &[PathBuf], check: fn(&str)) {
    assert!(!paths.is_empty(), "no inputs");
    for p in paths {
        let Ok(text) = std::fs::read_to_string(p) else { continue };
        let shown = p.display().to_string();
        std::thread::Builder::new()
            .stack_size(256 << 20)
            .spawn(move || check(&text))
            .expect("thread")
            .join()
            .unwrap_or_else(|_| panic!("{shown}"));
    }
}

#[test]
fn saved_python_inputs() {
    replay(&files(&root().join("fuzz/regressions/python"), "py"), harness::check_python);
}

#[test]
fn python_fixtures() {
    let mut all = files(&root().join("fixtures/python"), "py");
    all.extend(files(&root().join("fixtures/fix"), "py"));
    replay(&all, harness::check_python);
}

#[test]
fn notebook_fixtures_and_saved_inputs() {
    let mut all = files(&root().join("fixtures/notebooks"), "ipynb");
    all.extend(files(&root().join("fuzz/regressions/notebook"), "ipynb"));
    replay(&all, harness::check_notebook);
}
