//! memprobe's engine, the part that links libtorch: built-in workloads and
//! TorchScript models trained through tch, the training step per variant
//! configuration, the C++ shim, samplers, and the worker entry point behind
//! the `memprobe-worker` executable. The plans it executes and the
//! orchestrator that starts it live in `memprobe_host` (no tch).
//!
//! Invariants:
//! - Every measured run happens in a fresh worker process, variants
//!   interleaved over repeats by the parent; warm-up steps are never measured.
//! - Every variant starts from the same weights and data (same seed), so rows
//!   differ only in the optimization.
//! - No figure is invented: what cannot be measured on this device is a
//!   skipped row or an unavailable figure with a reason.
//! - Nothing here panics without a GPU: CUDA, NVML and cudarc are probed
//!   behind guards (`env::cuda_driver_present`).
#![deny(missing_docs)]

pub mod env;
mod error;
pub mod ffi;
pub mod sampler;
pub mod timing;
pub mod trainer;
pub mod worker;
pub mod workloads;

pub use error::EngineError;
pub use memprobe_host::{plan, variants};

/// Conversions from the plan's tch-free types to tch's.
pub trait ToTch {
    /// The tch type.
    type Out;
    /// Converts.
    fn tch(self) -> Self::Out;
}

impl ToTch for plan::DeviceChoice {
    type Out = tch::Device;
    fn tch(self) -> tch::Device {
        match self {
            plan::DeviceChoice::Cpu => tch::Device::Cpu,
            plan::DeviceChoice::Cuda => tch::Device::Cuda(0),
        }
    }
}

impl ToTch for plan::AmpDtype {
    type Out = tch::Kind;
    fn tch(self) -> tch::Kind {
        match self {
            plan::AmpDtype::Bf16 => tch::Kind::BFloat16,
            plan::AmpDtype::Fp16 => tch::Kind::Half,
        }
    }
}
