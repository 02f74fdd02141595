//! Gives this crate's test binaries an rpath to the torch lib dir that
//! torch-sys linked against, so they start without LD_LIBRARY_PATH.

fn main() {
    println!("cargo:rerun-if-env-changed=DEP_TCH_LIBTORCH_LIB");
    let Ok(lib_dir) = std::env::var("DEP_TCH_LIBTORCH_LIB") else {
        panic!("DEP_TCH_LIBTORCH_LIB not set: torch-sys did not export the libtorch lib dir");
    };
    println!("cargo:rustc-link-arg=-Wl,-rpath,{lib_dir}");
}
