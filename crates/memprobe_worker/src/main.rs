//! `memprobe-worker`: the half of memprobe that links libtorch. `memprobe
//! bench` starts it once per measured run, correctness check and workload
//! description, with one JSON request on stdin; it prints one JSON outcome
//! on stdout. It is not meant to be run by hand.

use std::process::ExitCode;

fn main() -> ExitCode {
    if std::env::args().nth(1).is_some_and(|a| a == "--help" || a == "-h" || a == "--version" || a == "-V") {
        println!(
            "memprobe-worker {}: the libtorch part of memprobe, started by `memprobe bench` (one JSON request on stdin, one JSON outcome on stdout)",
            env!("CARGO_PKG_VERSION")
        );
        return ExitCode::SUCCESS;
    }
    ExitCode::from(memprobe_engine::worker::worker_main() as u8)
}
