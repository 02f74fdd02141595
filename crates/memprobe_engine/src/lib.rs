//! memprobe's engine: built-in workloads and TorchScript models trained
//! through tch, one configuration per optimization variant, worker processes
//! that measure them, samplers, and the orchestrator that assembles a
//! [`memprobe_report::Report`].
//!
//! Invariants:
//! - Every measured run happens in a fresh worker process (the memprobe binary
//!   re-invoked with [`worker::WORKER_SUBCOMMAND`]), variants interleaved over
//!   repeats; warm-up steps are never measured.
//! - Every variant starts from the same weights and data (same seed), so rows
//!   differ only in the optimization.
//! - No figure is invented: what cannot be measured on this device is a
//!   skipped row or an unavailable figure with a reason.
//! - Nothing here panics without a GPU: CUDA, NVML and cudarc are probed
//!   behind guards (`env::cuda_driver_present`).
#![deny(missing_docs)]

pub mod bench;
pub mod env;
mod error;
pub mod ffi;
pub mod plan;
pub mod sampler;
pub mod timing;
pub mod trainer;
pub mod variants;
pub mod worker;
pub mod workloads;

pub use error::EngineError;
