//! Link set-up for the memprobe-worker binary (the only memprobe executable
//! that links libtorch).
//!
//! Only libtorch's CPU half is linked (named after `--no-as-needed`, so the
//! linker keeps it); the worker loads `libtorch_cuda.so` with `dlopen` at
//! start-up when the torch it runs against has one. One binary so runs
//! against a CUDA build of torch and a CPU-only one. (Linking libtorch_cuda
//! with the default `--as-needed` would drop it silently, tch-rs issues #907,
//! #980; naming it would make the binary fail to start on a CPU-only torch.)
//!
//! An rpath to the build machine's torch lets a development build start
//! without help; `memprobe` itself points the worker at the active Python's
//! torch (or `LIBTORCH`) through `LD_LIBRARY_PATH`, which takes precedence.
//! `MEMPROBE_WORKER_RPATH=0` leaves the rpath out (the wheel build does).
//!
//! The torch version the worker is built against is exported to the crate as
//! `MEMPROBE_WORKER_TORCH` (from torch's `version.py`, next to its lib dir).

use std::env;
use std::path::Path;

fn main() {
    println!("cargo:rerun-if-env-changed=DEP_TCH_LIBTORCH_LIB");
    println!("cargo:rerun-if-env-changed=MEMPROBE_WORKER_RPATH");
    let Ok(lib_dir) = env::var("DEP_TCH_LIBTORCH_LIB") else {
        panic!("DEP_TCH_LIBTORCH_LIB not set: torch-sys did not export the libtorch lib dir");
    };
    let dir = Path::new(&lib_dir);
    if env::var("MEMPROBE_WORKER_RPATH").map_or(true, |v| v != "0") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{lib_dir}");
    }
    println!("cargo:rustc-link-arg=-L{lib_dir}");
    println!("cargo:rustc-link-arg=-Wl,--no-as-needed");
    for lib in ["torch_cpu", "torch", "c10"] {
        if dir.join(format!("lib{lib}.so")).exists() {
            println!("cargo:rustc-link-arg=-l{lib}");
        }
    }
    println!("cargo:rustc-link-arg=-Wl,--as-needed");
    println!("cargo:rustc-env=MEMPROBE_WORKER_TORCH={}", torch_version(dir).unwrap_or_else(|| "unknown".into()));
}

/// `__version__` of the torch package whose lib dir is `lib_dir`
/// (`<site-packages>/torch/lib` -> `<site-packages>/torch/version.py`), or
/// the `build-version` file of an unpacked libtorch (`<libtorch>/lib`).
fn torch_version(lib_dir: &Path) -> Option<String> {
    let root = lib_dir.parent()?;
    let py = root.join("version.py");
    println!("cargo:rerun-if-changed={}", py.display());
    if let Ok(text) = std::fs::read_to_string(&py) {
        for line in text.lines() {
            if let Some(rest) = line.trim().strip_prefix("__version__") {
                // `__version__ = '2.11.0+cu130'` (or with a `: str` annotation):
                // the first quoted string.
                let Some(open) = rest.find(['\'', '"']) else { continue };
                let quote = &rest[open..=open];
                let value = &rest[open + 1..];
                if let Some(end) = value.find(quote) {
                    return Some(value[..end].to_string());
                }
            }
        }
    }
    std::fs::read_to_string(root.join("build-version")).ok().map(|s| s.trim().to_string())
}
