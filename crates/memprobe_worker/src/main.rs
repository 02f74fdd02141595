//! `memprobe-worker`: the half of memprobe that links libtorch. `memprobe
//! bench` starts it once per measured run, correctness check and workload
//! description, with one JSON request on stdin; it prints one JSON outcome
//! on stdout. It is not meant to be run by hand.

use std::process::ExitCode;

fn main() -> ExitCode {
    if std::env::args().nth(1).is_some_and(|a| a == "--help" || a == "-h" || a == "--version" || a == "-V") {
        println!(
            "memprobe-worker {} (built for torch {}): the libtorch part of memprobe, started by `memprobe bench` (one JSON request on stdin, one JSON outcome on stdout)",
            env!("CARGO_PKG_VERSION"),
            env!("MEMPROBE_WORKER_TORCH")
        );
        return ExitCode::SUCCESS;
    }
    ExitCode::from(memprobe_engine::worker::worker_main() as u8)
}

#[cfg(test)]
mod tests {
    /// The parent refuses a torch of another release than this one before
    /// starting the worker, so the two must agree.
    #[test]
    fn the_parent_expects_the_torch_this_worker_is_built_for() {
        let built = env!("MEMPROBE_WORKER_TORCH");
        assert_eq!(memprobe_host::torch_lib::release(built), memprobe_host::torch_lib::WORKER_TORCH_VERSION, "built against {built}");
    }
}
