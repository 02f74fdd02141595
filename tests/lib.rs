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

/// A training loop that also computes a validation loss each step on
/// `device` ("cpu" or "cuda"); with `--leak` it sums that loss as a tensor,
/// keeping each step's graph (memlint's ML202), else as `.item()`.
/// `--steps N` (default 30). The graph it keeps per step holds the ReLU
/// output (2048 x 4096 float32, 32 MiB, saved by ReLU and by the second
/// Linear) and the log-softmax output (2048 x 8 float32): 32.06 MiB. On CUDA
/// it prints `max_memory_allocated` at the end.
pub fn validation_leak_script(device: &str) -> String {
    format!(
        r#"import sys, torch, torch.nn as nn
torch.manual_seed(0)
leak = "--leak" in sys.argv
B, BV, H = 256, 2048, 4096
STEPS = int(sys.argv[sys.argv.index("--steps") + 1]) if "--steps" in sys.argv else 30
dev = "{device}"
model = nn.Sequential(nn.Linear(64, H), nn.ReLU(), nn.Linear(H, 8)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x, y = torch.randn(B, 64, device=dev), torch.randint(0, 8, (B,), device=dev)
xv, yv = torch.randn(BV, 64, device=dev), torch.randint(0, 8, (BV,), device=dev)
val_total = 0.0
for _ in range(STEPS):
    opt.zero_grad(set_to_none=True)
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    val = nn.functional.cross_entropy(model(xv), yv)
    val_total = val_total + (val if leak else val.item())
print("mean validation loss", float(val_total) / STEPS)
if dev == "cuda":
    print("max_memory_allocated", torch.cuda.max_memory_allocated())
"#
    )
}

/// Bytes the graph of one step of [`validation_leak_script`] keeps.
pub const VALIDATION_LEAK_BYTES_PER_STEP: f64 = (2048.0 * 4096.0 + 2048.0 * 8.0) * 4.0;

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
