//! Compiles the C++ shim against the same libtorch headers torch-sys uses and
//! gives this crate's own test binaries an rpath to the torch lib dir, so they
//! start without LD_LIBRARY_PATH.

use std::env;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=shim/shim.cpp");
    println!("cargo:rerun-if-env-changed=DEP_TCH_LIBTORCH_LIB");
    println!("cargo:rerun-if-env-changed=MEMPROBE_CXX11_ABI");
    let Ok(lib_dir) = env::var("DEP_TCH_LIBTORCH_LIB") else {
        // torch-sys always exports it on Linux/macOS; without it we cannot find headers.
        panic!("DEP_TCH_LIBTORCH_LIB not set: torch-sys did not export the libtorch lib dir");
    };
    let lib_dir = PathBuf::from(lib_dir);
    let torch_root = lib_dir.parent().map(PathBuf::from).unwrap_or_else(|| lib_dir.clone());
    let include = torch_root.join("include");
    let api_include = include.join("torch/csrc/api/include");

    cc::Build::new()
        .cpp(true)
        .pic(true)
        .warnings(false)
        .include(&include)
        .include(&api_include)
        .flag("-std=c++17")
        .flag(format!("-D_GLIBCXX_USE_CXX11_ABI={}", cxx11_abi()))
        .flag("-DGLOG_USE_GLOG_EXPORT")
        .file("shim/shim.cpp")
        .compile("memprobe_shim");

    // Unit/integration test executables of this crate link libtorch too.
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib_dir.display());
    // Re-export for dependents (DEP_MEMPROBE_ENGINE_LIBTORCH_LIB).
    println!("cargo:libtorch_lib={}", lib_dir.display());
}

/// The C++ ABI flag must match the one libtorch was built with, or std::string
/// symbols in the shim will not resolve. Ask torch when a Python torch is in use.
fn cxx11_abi() -> String {
    if let Ok(v) = env::var("MEMPROBE_CXX11_ABI") {
        return v;
    }
    let python = env::var("VIRTUAL_ENV")
        .map(|v| PathBuf::from(v).join("bin/python"))
        .ok()
        .filter(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from("python3"));
    let out = Command::new(python)
        .args(["-c", "import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))"])
        .output();
    match out {
        Ok(o) if o.status.success() => {
            let s = String::from_utf8_lossy(&o.stdout).trim().to_string();
            if s == "0" || s == "1" {
                s
            } else {
                "1".to_string()
            }
        }
        // PyTorch wheels and libtorch builds use the new ABI since 2.6.
        _ => "1".to_string(),
    }
}
