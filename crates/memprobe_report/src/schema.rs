//! The report schema. Field names are part of the public JSON format.

use serde::{Deserialize, Serialize};

use crate::stats::Stats;
use crate::ReportError;

/// Version of the JSON schema written by this build.
pub const SCHEMA_VERSION: u32 = 1;

/// A complete `memprobe bench` report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Always [`SCHEMA_VERSION`] when written by this build.
    pub schema_version: u32,
    /// Producer name and version.
    pub tool: ToolInfo,
    /// Seconds since the Unix epoch when the bench started.
    pub created_unix_s: u64,
    /// Command line that produced the report.
    pub command: Vec<String>,
    /// Machine, device and library versions.
    pub environment: Environment,
    /// What was trained.
    pub workload: WorkloadInfo,
    /// How it was measured.
    pub settings: Settings,
    /// Cost of the background memory sampler, when one ran.
    pub sampler: Option<SamplerCost>,
    /// One entry per variant, baseline first.
    pub variants: Vec<Variant>,
    /// False when the bench was interrupted (Ctrl-C) before every run finished.
    pub complete: bool,
    /// Free-form remarks on the measurement (e.g. why a figure is unavailable).
    pub notes: Vec<String>,
}

impl Report {
    /// Parses a report, rejecting other schema versions with a clear error.
    pub fn from_json(text: &str) -> Result<Report, ReportError> {
        #[derive(Deserialize)]
        struct Probe {
            schema_version: u32,
        }
        let probe: Probe = serde_json::from_str(text)?;
        if probe.schema_version != SCHEMA_VERSION {
            return Err(ReportError::SchemaVersion {
                found: probe.schema_version,
                supported: SCHEMA_VERSION,
            });
        }
        Ok(serde_json::from_str(text)?)
    }

    /// The variant with `id`, if any.
    pub fn variant(&self, id: VariantId) -> Option<&Variant> {
        self.variants.iter().find(|v| v.info.id == id)
    }
}

/// Producer of the report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolInfo {
    /// `memprobe`.
    pub name: String,
    /// Crate version.
    pub version: String,
}

/// Where the bench ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Environment {
    /// `cpu` or `cuda`.
    pub device_kind: String,
    /// Human-readable device name (GPU name from NVML, or the CPU model).
    pub device_name: String,
    /// NVIDIA driver version, when a driver is present.
    pub driver_version: Option<String>,
    /// CUDA version the driver supports (from the driver API), when present.
    pub cuda_driver_version: Option<String>,
    /// CUDA version torch was built with.
    pub torch_cuda_version: Option<String>,
    /// cuDNN version torch reports, when CUDA is used.
    pub cudnn_version: Option<String>,
    /// libtorch version.
    pub torch_version: String,
    /// CPU model name from /proc/cpuinfo.
    pub cpu_model: String,
    /// The CPU's instruction-set extensions that decide which kernels run
    /// ([`crate::host::RECORDED_FLAGS`]); empty in reports from before they
    /// were recorded.
    #[serde(default)]
    pub cpu_flags: Vec<String>,
    /// Logical CPUs available to the process.
    pub cpu_logical_cores: usize,
    /// Intra-op threads libtorch uses in the workers.
    pub torch_threads: i64,
    /// Kernel and OS.
    pub os: String,
    /// Dense peak throughput of the device per precision, when known.
    pub peak_flops: Vec<PeakFlops>,
}

/// A device's dense peak throughput for one precision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeakFlops {
    /// `fp32`, `tf32`, `bf16` or `fp16`.
    pub precision: String,
    /// Peak in TFLOP/s.
    pub tflops: f64,
    /// Where the figure comes from.
    pub source: String,
}

/// The trained model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadInfo {
    /// `mlp`, `convnet`, `transformer` or `torchscript`.
    pub name: String,
    /// Size preset, or the model path for TorchScript.
    pub size: String,
    /// One-line description of the architecture.
    pub description: String,
    /// Samples per optimizer step.
    pub batch_size: u64,
    /// Shape of one input batch.
    pub input_shape: Vec<i64>,
    /// Number of parameters.
    pub parameters: u64,
    /// Loss function.
    pub loss: String,
    /// Optimizer.
    pub optimizer: String,
    /// Model FLOPs of one training step (forward + backward), when counted.
    pub train_flops_per_step: Option<f64>,
    /// How FLOPs were counted, or why they were not.
    pub flops_source: String,
}

/// Measurement settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// Repeats per variant; each repeat is a fresh worker process.
    pub runs: u32,
    /// Steps run before measuring, excluded from figures.
    pub warmup_steps: u32,
    /// Measured steps per run.
    pub measured_steps: u32,
    /// Seed for weights and synthetic data.
    pub seed: u64,
    /// Order in which worker processes ran (variant ids), showing interleaving.
    pub schedule: Vec<VariantId>,
}

/// Measured cost of the background memory sampler.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SamplerCost {
    /// What was sampled.
    pub what: String,
    /// Sampling period in milliseconds.
    pub interval_ms: f64,
    /// Number of samples taken.
    pub samples: u64,
    /// Mean wall time of one sample, microseconds.
    pub mean_sample_us: f64,
    /// Fraction of one CPU core the sampler thread used over the run.
    pub cpu_fraction: f64,
}

/// Kind of measurement a variant makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Forward, backward and optimizer step.
    Train,
    /// Evaluation forward only.
    Eval,
}

/// Mixed-precision dtype of an autocast variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AmpDtype {
    /// bfloat16 (no loss scaling needed).
    Bf16,
    /// float16 with the GradScaler.
    Fp16,
}

impl AmpDtype {
    /// `bf16` / `fp16`.
    pub fn name(self) -> &'static str {
        match self {
            AmpDtype::Bf16 => "bf16",
            AmpDtype::Fp16 => "fp16",
        }
    }
}

/// A variant's identity. Written as its kebab-case name (`baseline`,
/// `amp-bf16`, `accum-4`, `freeze-1`, `combined`, ...), compared as a value
/// of this type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum VariantId {
    /// The plain training step.
    Baseline,
    /// Autocast.
    Amp(AmpDtype),
    /// Gradient accumulation over N micro-batches.
    Accum(u32),
    /// cuDNN benchmark mode.
    CudnnBenchmark,
    /// Input size changing every step, benchmark off (reference of the next).
    DynamicShapes,
    /// Input size changing every step, benchmark on.
    CudnnBenchmarkDynamic,
    /// Channels-last layout.
    ChannelsLast,
    /// Activation checkpointing.
    Checkpoint,
    /// In-place activations.
    Inplace,
    /// Pinned host batch.
    PinMemory,
    /// Gradients set to none.
    SetToNone,
    /// First K blocks frozen.
    Freeze(u32),
    /// Every applicable training optimization at once.
    Combined,
    /// Evaluation forward with autograd recording (reference of the next).
    EvalGrad,
    /// Evaluation forward under no_grad.
    NoGradEval,
}

impl std::fmt::Display for VariantId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VariantId::Baseline => f.write_str("baseline"),
            VariantId::Amp(d) => write!(f, "amp-{}", d.name()),
            VariantId::Accum(n) => write!(f, "accum-{n}"),
            VariantId::CudnnBenchmark => f.write_str("cudnn-benchmark"),
            VariantId::DynamicShapes => f.write_str("dynamic-shapes"),
            VariantId::CudnnBenchmarkDynamic => f.write_str("cudnn-benchmark-dynamic"),
            VariantId::ChannelsLast => f.write_str("channels-last"),
            VariantId::Checkpoint => f.write_str("checkpoint"),
            VariantId::Inplace => f.write_str("inplace"),
            VariantId::PinMemory => f.write_str("pin-memory"),
            VariantId::SetToNone => f.write_str("set-to-none"),
            VariantId::Freeze(k) => write!(f, "freeze-{k}"),
            VariantId::Combined => f.write_str("combined"),
            VariantId::EvalGrad => f.write_str("eval-grad"),
            VariantId::NoGradEval => f.write_str("no-grad-eval"),
        }
    }
}

impl std::str::FromStr for VariantId {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let num = |rest: &str| rest.parse::<u32>().map_err(|_| format!("unknown variant id {s:?}"));
        Ok(match s {
            "baseline" => VariantId::Baseline,
            "amp-bf16" => VariantId::Amp(AmpDtype::Bf16),
            "amp-fp16" => VariantId::Amp(AmpDtype::Fp16),
            "cudnn-benchmark" => VariantId::CudnnBenchmark,
            "dynamic-shapes" => VariantId::DynamicShapes,
            "cudnn-benchmark-dynamic" => VariantId::CudnnBenchmarkDynamic,
            "channels-last" => VariantId::ChannelsLast,
            "checkpoint" => VariantId::Checkpoint,
            "inplace" => VariantId::Inplace,
            "pin-memory" => VariantId::PinMemory,
            "set-to-none" => VariantId::SetToNone,
            "combined" => VariantId::Combined,
            "eval-grad" => VariantId::EvalGrad,
            "no-grad-eval" => VariantId::NoGradEval,
            _ => {
                if let Some(n) = s.strip_prefix("accum-") {
                    VariantId::Accum(num(n)?)
                } else if let Some(k) = s.strip_prefix("freeze-") {
                    VariantId::Freeze(num(k)?)
                } else {
                    return Err(format!("unknown variant id {s:?}"));
                }
            }
        })
    }
}

impl Serialize for VariantId {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        ser.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for VariantId {
    fn deserialize<D: serde::Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        let s = String::deserialize(de)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// What a row is, shared by the planner's rows and the report's variants.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VariantInfo {
    /// Identity.
    pub id: VariantId,
    /// Short label shown in tables.
    pub label: String,
    /// The CLI flag that produced it (None for baselines).
    pub flag: Option<String>,
    /// What differs from the variant it is compared to.
    pub description: String,
    /// The variant this row is compared against (None for references).
    pub compared_to: Option<VariantId>,
    /// Train step or evaluation forward.
    pub mode: Mode,
    /// Model FLOPs per measured step (excluding recomputation), when counted.
    pub flops_per_step: Option<f64>,
    /// Precision used to pick the device peak for MFU (`fp32`, `bf16`, `fp16`).
    pub precision: String,
}

/// One row of the A/B table: what it is ([`VariantInfo`], flattened into the
/// same JSON object) and what was measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Variant {
    /// Identity, label, comparison, mode, FLOPs, precision.
    #[serde(flatten)]
    pub info: VariantInfo,
    /// Outcome.
    pub status: VariantStatus,
    /// Raw figures of every completed run.
    pub runs: Vec<RunRecord>,
    /// Checks that the optimization preserved the computation.
    pub correctness: Vec<CorrectnessCheck>,
    /// Derived from `runs` by [`crate::summarize`].
    pub summary: Option<VariantSummary>,
}

/// Outcome of a variant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum VariantStatus {
    /// Planned, runs still to come. Only seen while a bench runs: a written
    /// report has every pending row resolved to `ok` or `interrupted`.
    Pending,
    /// All runs completed.
    Ok,
    /// Not run because it cannot apply here.
    Skipped {
        /// Why.
        reason: String,
    },
    /// A run ran out of device or host memory.
    Oom {
        /// The allocator's message.
        message: String,
    },
    /// A worker died (signal or unexpected exit).
    Crashed {
        /// Exit status as reported by the OS.
        exit_status: String,
        /// Last lines of the worker's stderr.
        stderr_tail: String,
    },
    /// The worker reported an error.
    Failed {
        /// The error.
        message: String,
    },
    /// Ctrl-C arrived before every run of this variant finished.
    Interrupted,
}

impl VariantStatus {
    /// Short text for table cells.
    pub fn short(&self) -> String {
        match self {
            VariantStatus::Pending => "pending".into(),
            VariantStatus::Ok => "ok".into(),
            VariantStatus::Skipped { reason } => format!("skipped: {reason}"),
            VariantStatus::Oom { .. } => "OOM".into(),
            VariantStatus::Crashed { exit_status, .. } => format!("crashed ({exit_status})"),
            VariantStatus::Failed { message } => format!("failed: {message}"),
            VariantStatus::Interrupted => "interrupted".into(),
        }
    }
}

/// Raw figures of one worker process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// Repeat index (0-based).
    pub repeat: u32,
    /// Worker process id.
    pub pid: u32,
    /// Time of each measured step, milliseconds.
    pub step_times_ms: Vec<f64>,
    /// How step times were taken.
    pub timing_source: String,
    /// Loss of each measured step (mean over micro-batches for accumulation).
    pub losses: Vec<f64>,
    /// Samples processed per measured step.
    pub samples_per_step: u64,
    /// Peak memory figures of this run.
    pub memory: Vec<MemoryFigure>,
    /// Wall time of the whole worker, seconds (start-up included).
    pub worker_wall_s: f64,
    /// Cost of this worker's sampler thread, when one ran.
    pub sampler: Option<SamplerCost>,
}

/// Which memory figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MemoryMetric {
    /// Peak resident set size of the worker process (CPU).
    PeakRss,
    /// Caching allocator peak allocated bytes (tensors alive).
    AllocatorPeakAllocated,
    /// Caching allocator peak reserved bytes (held from the driver).
    AllocatorPeakReserved,
    /// NVML per-process used memory, peak of background samples (includes the CUDA context).
    NvmlProcessPeak,
    /// NVML device used memory, peak of background samples (all processes).
    NvmlDevicePeak,
}

impl MemoryMetric {
    /// Column label.
    pub fn label(self) -> &'static str {
        match self {
            MemoryMetric::PeakRss => "peak RSS",
            MemoryMetric::AllocatorPeakAllocated => "alloc peak",
            MemoryMetric::AllocatorPeakReserved => "reserved peak",
            MemoryMetric::NvmlProcessPeak => "NVML proc peak",
            MemoryMetric::NvmlDevicePeak => "NVML dev peak",
        }
    }

    /// Display order of columns.
    pub const ORDER: [MemoryMetric; 5] = [
        MemoryMetric::PeakRss,
        MemoryMetric::AllocatorPeakAllocated,
        MemoryMetric::AllocatorPeakReserved,
        MemoryMetric::NvmlProcessPeak,
        MemoryMetric::NvmlDevicePeak,
    ];
}

/// One memory figure with its source.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryFigure {
    /// Which figure.
    pub metric: MemoryMetric,
    /// Bytes; None when unavailable (see `note`).
    pub bytes: Option<u64>,
    /// Where the number comes from.
    pub source: String,
    /// Why it is unavailable, or a caveat.
    pub note: Option<String>,
}

/// A check that an optimization preserved the computation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CorrectnessCheck {
    /// Machine-readable kind, e.g. `amp-loss-rel-diff`, `accum-grad-rel-err`.
    pub kind: String,
    /// Measured value.
    pub value: f64,
    /// Largest acceptable value.
    pub tolerance: f64,
    /// value <= tolerance.
    pub passed: bool,
    /// What was compared with what.
    pub detail: String,
}

/// Summary of one variant's runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VariantSummary {
    /// Statistics over every measured step of every run, milliseconds.
    pub step_time_ms: Stats,
    /// Statistics over the per-run medians (run-to-run spread).
    pub run_median_ms: Stats,
    /// Samples per second at the median step time.
    pub samples_per_s: f64,
    /// Median step time of the compared variant divided by this one's.
    pub speedup: Option<f64>,
    /// Memory figures, median over runs, with the delta to the compared variant.
    pub memory: Vec<MemorySummary>,
    /// Model FLOP/s at the median step time, in TFLOP/s.
    pub achieved_tflops: Option<f64>,
    /// achieved / device peak for the variant's precision.
    pub mfu: Option<f64>,
    /// Why MFU is unavailable, when it is.
    pub mfu_note: Option<String>,
    /// Step time against the compared variant: per-run medians, Mann-Whitney
    /// U test and noise threshold (see [`crate::verdict`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_verdict: Option<crate::verdict::Comparison>,
    /// The primary memory figure (peak RSS on CPU, allocator peak allocated
    /// on CUDA) against the compared variant, per run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_verdict: Option<crate::verdict::Comparison>,
}

/// A memory figure summarized over runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemorySummary {
    /// Which figure.
    pub metric: MemoryMetric,
    /// Median over runs, bytes.
    pub median_bytes: u64,
    /// Smallest run, bytes.
    pub min_bytes: u64,
    /// Largest run, bytes.
    pub max_bytes: u64,
    /// This median minus the compared variant's median.
    pub delta_bytes: Option<i64>,
    /// This median divided by the compared variant's median, minus one.
    pub delta_ratio: Option<f64>,
    /// Where the number comes from.
    pub source: String,
}
