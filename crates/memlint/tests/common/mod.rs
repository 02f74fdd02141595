//! Helpers shared by the end-to-end tests of the `memlint` binary.
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
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn write(dir: &Path, rel: &str, text: impl AsRef<[u8]>) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    std::fs::write(p, text).expect("write");
}

pub fn memlint(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_memlint"))
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env_remove("CLICOLOR_FORCE")
        .output()
        .expect("memlint runs")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).expect("utf-8 stdout")
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).expect("utf-8 stderr")
}

/// The codes of a `--format json` run.
pub fn codes(o: &Output) -> Vec<String> {
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json output");
    v["diagnostics"].as_array().expect("diagnostics").iter().map(|d| d["code"].as_str().expect("code").to_string()).collect()
}
