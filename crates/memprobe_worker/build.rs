//! Link set-up for the memprobe-worker binary (the only memprobe executable
//! that links libtorch).
//!
//! With the default `--as-needed`, the linker drops libtorch_cuda.so because
//! no symbol of it is referenced directly, and libtorch then reports no CUDA
//! even on a GPU machine (tch-rs issues #907, #980). So the torch libraries are
//! named again after `--no-as-needed`, and an rpath to the torch lib dir lets
//! the binary start without LD_LIBRARY_PATH.

use std::env;
use std::path::Path;

fn main() {
    println!("cargo:rerun-if-env-changed=DEP_TCH_LIBTORCH_LIB");
    let Ok(lib_dir) = env::var("DEP_TCH_LIBTORCH_LIB") else {
        panic!("DEP_TCH_LIBTORCH_LIB not set: torch-sys did not export the libtorch lib dir");
    };
    let dir = Path::new(&lib_dir);
    println!("cargo:rustc-link-arg=-Wl,-rpath,{lib_dir}");
    println!("cargo:rustc-link-arg=-L{lib_dir}");
    println!("cargo:rustc-link-arg=-Wl,--no-as-needed");
    for lib in ["torch_cuda", "torch_cpu", "torch", "c10_cuda", "c10"] {
        if dir.join(format!("lib{lib}.so")).exists() {
            println!("cargo:rustc-link-arg=-l{lib}");
        }
    }
    println!("cargo:rustc-link-arg=-Wl,--as-needed");
}
