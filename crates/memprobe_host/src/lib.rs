//! memprobe's parent side, built without libtorch: the bench orchestrator
//! (plans variants, starts one `memprobe-worker` process per run, assembles
//! the [`memprobe_report::Report`]) and the process-tree sampler behind
//! `memprobe run` and `memprobe ab`.
//!
//! Only the worker executable (`memprobe-worker`, crate `memprobe_worker`)
//! links libtorch; this crate talks to it through JSON on stdin/stdout
//! ([`plan::WorkerRequest`], [`plan::WorkerOutput`]), so `run`, `ab`,
//! `compare` and `report` start on machines without torch.
#![deny(missing_docs)]

pub mod ab;
pub mod bench;
mod error;
pub mod gpu;
pub mod plan;
pub mod proctree;
pub mod run;
pub mod variants;
pub mod torch_lib;
pub mod worker_proc;

pub use error::HostError;
