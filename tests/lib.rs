//! The end-to-end tests of the two binaries (`memlint`, `memprobe`), and
//! the helpers they share. The binaries are built on demand with
//! `escargot` (a no-op when `cargo test --workspace` built them already),
//! once per test process.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A training script with one ML201 and one ML202 finding.
pub const TRAIN: &str = r#"import torch
from torch import nn


def evaluate(model, val_loader):
    model.eval()
    for x, y in val_loader:
        out = model(x)
    return out


def train(model, loader, optimizer):
    total = 0
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        total += loss
    return total
"#;

/// The repository root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The path of binary `name` of workspace package `package`, built first
/// (in the profile of this test executable) when it is not up to date.
pub fn bin(package: &str, name: &str) -> PathBuf {
    static BUILT: std::sync::Mutex<Vec<(String, PathBuf)>> = std::sync::Mutex::new(Vec::new());
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, p)) = built.iter().find(|(n, _)| n == name) {
        return p.clone();
    }
    let run = escargot::CargoBuild::new()
        .manifest_path(root().join("Cargo.toml"))
        .package(package)
        .bin(name)
        .current_release()
        .run()
        .unwrap_or_else(|e| panic!("cannot build `{name}` of package `{package}`: {e}"));
    let path = run.path().to_path_buf();
    built.push((name.to_string(), path.clone()));
    path
}

/// The `memlint` binary.
pub fn memlint_bin() -> PathBuf {
    bin("memlint", "memlint")
}

/// The `memprobe` binary.
pub fn memprobe_bin() -> PathBuf {
    bin("memprobe", "memprobe")
}

/// Writes `text` to `dir/rel`, creating the parent directories.
pub fn write(dir: &Path, rel: &str, text: impl AsRef<[u8]>) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    std::fs::write(p, text).expect("write");
}

/// Runs `memlint args` in `dir` without colours.
pub fn memlint(dir: &Path, args: &[&str]) -> Output {
    Command::new(memlint_bin())
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env_remove("CLICOLOR_FORCE")
        .output()
        .expect("memlint runs")
}

/// A run's stdout as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).expect("utf-8 stdout")
}

/// A run's stderr as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).expect("utf-8 stderr")
}

/// The codes of a `--format json` run.
pub fn codes(o: &Output) -> Vec<String> {
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json output");
    v["diagnostics"].as_array().expect("diagnostics").iter().map(|d| d["code"].as_str().expect("code").to_string()).collect()
}
