//! Plans and results exchanged between the parent and worker processes (JSON).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use memprobe_report::{CorrectnessCheck, Environment, MemoryFigure, SamplerCost, WorkloadInfo};

use crate::variants::WorkloadTraits;

/// Device a bench runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeviceChoice {
    /// Host CPU.
    Cpu,
    /// CUDA device 0.
    Cuda,
}

impl DeviceChoice {
    /// `cpu` / `cuda`.
    pub fn name(self) -> &'static str {
        match self {
            DeviceChoice::Cpu => "cpu",
            DeviceChoice::Cuda => "cuda",
        }
    }
}

/// Built-in workload names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BuiltinWorkload {
    /// Multi-layer perceptron with ReLU, cross-entropy on synthetic classes.
    Mlp,
    /// ResNet-style convnet with batch norm.
    Convnet,
    /// Decoder-only transformer (SDPA, layer norm, GELU), next-token loss.
    Transformer,
}

/// Size preset of a built-in workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SizePreset {
    /// Finishes in seconds on 2 CPU cores.
    Small,
    /// A few times small.
    Medium,
    /// Sized for a GPU.
    Large,
}

impl SizePreset {
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            SizePreset::Small => "small",
            SizePreset::Medium => "medium",
            SizePreset::Large => "large",
        }
    }
}

/// Loss for a TorchScript model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LossKind {
    /// Mean squared error against a random target shaped like the output.
    Mse,
    /// Cross-entropy against random class indices over the output's last dimension.
    CrossEntropy,
}

impl LossKind {
    /// Name.
    pub fn name(self) -> &'static str {
        match self {
            LossKind::Mse => "mse",
            LossKind::CrossEntropy => "cross-entropy",
        }
    }
}

/// What to train.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum WorkloadSpec {
    /// A built-in model.
    Builtin {
        /// Which.
        workload: BuiltinWorkload,
        /// Size preset.
        size: SizePreset,
        /// Batch size override.
        batch_size: Option<i64>,
    },
    /// A TorchScript module saved from Python.
    TorchScript {
        /// Path to the `.pt` file.
        path: PathBuf,
        /// Shape of one input batch, batch dimension first.
        input_shape: Vec<i64>,
        /// Loss.
        loss: LossKind,
    },
}

pub use memprobe_report::AmpDtype;

/// Everything one variant changes relative to the plain baseline.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct VariantConfig {
    /// Autocast dtype; None = fp32.
    pub amp: Option<AmpDtype>,
    /// Micro-batches per optimizer step (1 = no accumulation).
    pub accum: usize,
    /// cuDNN benchmark mode.
    pub cudnn_benchmark: bool,
    /// Input spatial size / sequence length changes every step.
    pub dynamic_shapes: bool,
    /// Channels-last input and weights.
    pub channels_last: bool,
    /// Recompute segments in backward instead of storing activations.
    pub checkpoint: bool,
    /// In-place activations.
    pub inplace: bool,
    /// Evaluation forward instead of a training step; `Some(true)` under no_grad.
    pub eval_no_grad: Option<bool>,
    /// Host batch in pinned memory, copied non_blocking.
    pub pin_memory: bool,
    /// Gradients set to none instead of zero-filled.
    pub set_to_none: bool,
    /// First K blocks frozen (and left out of the optimizer).
    pub freeze: usize,
}

impl VariantConfig {
    /// The plain baseline.
    pub fn baseline() -> Self {
        VariantConfig { accum: 1, ..Default::default() }
    }
}

/// What a worker process does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WorkerTask {
    /// Warm-up, then measured steps.
    Measure,
    /// Correctness checks of the variant against the baseline computation.
    Check,
}

/// The serialized plan a worker receives on stdin.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerPlan {
    /// Measure or check.
    pub task: WorkerTask,
    /// Model.
    pub workload: WorkloadSpec,
    /// Device.
    pub device: DeviceChoice,
    /// Variant settings.
    pub config: VariantConfig,
    /// Warm-up steps (excluded).
    pub warmup_steps: u32,
    /// Measured steps.
    pub measured_steps: u32,
    /// Seed for weights and data (the same for every variant).
    pub seed: u64,
    /// Repeat index, for the record.
    pub repeat: u32,
    /// NVML sampling period (CUDA only).
    pub sample_interval_ms: u64,
    /// Intra-op threads; None keeps libtorch's default.
    pub threads: Option<i32>,
}

/// Figures one measuring worker returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeasureResult {
    /// Step times, ms.
    pub step_times_ms: Vec<f64>,
    /// How they were taken.
    pub timing_source: String,
    /// Losses of the measured steps.
    pub losses: Vec<f64>,
    /// Samples per step.
    pub samples_per_step: u64,
    /// Memory figures.
    pub memory: Vec<MemoryFigure>,
    /// Sampler cost, when a sampler ran.
    pub sampler: Option<SamplerCost>,
}

/// Device asked for on the command line, before the worker resolves `auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeviceRequest {
    /// CUDA when libtorch sees a device, else the CPU.
    Auto,
    /// Host CPU.
    Cpu,
    /// CUDA device 0 (an error without one).
    Cuda,
}

/// Asks a worker to build the workload once on the CPU and describe it, and
/// to probe the machine for the (resolved) device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DescribeRequest {
    /// Model.
    pub workload: WorkloadSpec,
    /// Device asked for.
    pub device: DeviceRequest,
    /// Seed.
    pub seed: u64,
    /// Intra-op threads; None keeps libtorch's default.
    pub threads: Option<i32>,
}

/// The answer to a [`DescribeRequest`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Description {
    /// The device the bench runs on (`auto` resolved).
    pub device: DeviceChoice,
    /// Said when `auto` fell back to the CPU.
    pub device_note: Option<String>,
    /// What the planner needs.
    pub traits: WorkloadTraits,
    /// What the report says about the workload.
    pub workload: WorkloadInfo,
    /// The machine.
    pub environment: Environment,
}

/// What the parent sends a worker on stdin (one JSON document).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "request", rename_all = "kebab-case")]
pub enum WorkerRequest {
    /// Measure or check one variant.
    Run(WorkerPlan),
    /// Describe the workload and the machine.
    Describe(DescribeRequest),
}

/// What a worker prints on stdout (one JSON document).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub enum WorkerOutput {
    /// Measurement finished.
    Measured(MeasureResult),
    /// Checks finished.
    Checked {
        /// The checks.
        checks: Vec<CorrectnessCheck>,
    },
    /// Out of memory.
    Oom {
        /// Allocator message.
        message: String,
    },
    /// The workload and machine, answering a describe request.
    Described(Box<Description>),
    /// The request cannot run: the user's input is wrong (a model file that
    /// does not load, `--device cuda` without a GPU). Exit status 2.
    Rejected {
        /// What is wrong.
        message: String,
    },
    /// Any other error.
    Failed {
        /// The error.
        message: String,
    },
}
