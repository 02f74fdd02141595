//! Turns the user's flags into the list of A/B rows.

use memprobe_report::{Mode, VariantId, VariantInfo};

use crate::plan::{AmpDtype, DeviceChoice, VariantConfig};
use crate::HostError as EngineError;

/// Which optimizations the user asked for.
#[derive(Debug, Clone, Default)]
pub struct Flags {
    /// `--amp [bf16|fp16]`.
    pub amp: Option<AmpDtype>,
    /// `--accum N`.
    pub accum: Option<usize>,
    /// `--cudnn-benchmark`.
    pub cudnn_benchmark: bool,
    /// `--dynamic-shapes`.
    pub dynamic_shapes: bool,
    /// `--channels-last`.
    pub channels_last: bool,
    /// `--checkpoint`.
    pub checkpoint: bool,
    /// `--inplace`.
    pub inplace: bool,
    /// `--no-grad-eval`.
    pub no_grad_eval: bool,
    /// `--pin-memory`.
    pub pin_memory: bool,
    /// `--set-to-none`.
    pub set_to_none: bool,
    /// `--freeze K`.
    pub freeze: Option<usize>,
    /// `--all`.
    pub all: bool,
}

/// What the variant planner needs to know about the workload.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct WorkloadTraits {
    /// Samples per step.
    pub batch_size: i64,
    /// Freezable blocks.
    pub num_blocks: usize,
    /// Has 2-D convolutions.
    pub has_conv: bool,
    /// Reasons flags do not apply.
    pub inplace_unsupported: Option<String>,
    /// Reason checkpointing does not apply.
    pub checkpoint_unsupported: Option<String>,
    /// Reason freezing does not apply.
    pub freeze_unsupported: Option<String>,
    /// Reason dynamic shapes do not apply.
    pub dynamic_unsupported: Option<String>,
    /// Forward FLOPs per sample.
    pub forward_flops_per_sample: Option<f64>,
}

/// One planned row: what it is (shared with the report's [`memprobe_report::Variant`])
/// and how to run it.
#[derive(Debug, Clone)]
pub struct VariantSpec {
    /// Identity, label, comparison, mode, FLOPs, precision.
    pub info: VariantInfo,
    /// Settings.
    pub config: VariantConfig,
    /// Why it cannot run here.
    pub skip: Option<String>,
    /// Whether a correctness-check worker runs for it.
    pub has_checks: bool,
}

/// The change a single training optimization makes to a configuration; the
/// combined row applies every applicable one, so it is derived from the
/// same definitions as the single rows.
pub fn apply(id: VariantId, c: &mut VariantConfig) {
    match id {
        VariantId::Amp(d) => c.amp = Some(d),
        VariantId::Accum(n) => c.accum = n as usize,
        VariantId::CudnnBenchmark => c.cudnn_benchmark = true,
        VariantId::ChannelsLast => c.channels_last = true,
        VariantId::Checkpoint => c.checkpoint = true,
        VariantId::Inplace => c.inplace = true,
        VariantId::PinMemory => c.pin_memory = true,
        VariantId::SetToNone => c.set_to_none = true,
        VariantId::Freeze(k) => c.freeze = k as usize,
        VariantId::DynamicShapes => c.dynamic_shapes = true,
        VariantId::CudnnBenchmarkDynamic => {
            c.dynamic_shapes = true;
            c.cudnn_benchmark = true;
        }
        VariantId::EvalGrad => c.eval_no_grad = Some(false),
        VariantId::NoGradEval => c.eval_no_grad = Some(true),
        VariantId::Baseline | VariantId::Combined => {}
    }
}

fn spec(id: VariantId, label: &str, flag: Option<&str>, description: &str) -> VariantSpec {
    let mut config = VariantConfig::baseline();
    apply(id, &mut config);
    VariantSpec {
        info: VariantInfo {
            id,
            label: label.into(),
            flag: flag.map(Into::into),
            description: description.into(),
            compared_to: Some(VariantId::Baseline),
            precision: config.amp.map(|a| a.name().to_string()).unwrap_or_else(|| "fp32".into()),
            mode: Mode::Train,
            flops_per_step: None,
        },
        config,
        skip: None,
        has_checks: false,
    }
}

/// Validates flags that are the user's error (exit 2) rather than skips.
pub fn validate(flags: &Flags, traits: &WorkloadTraits) -> Result<(), EngineError> {
    if let Some(n) = flags.accum {
        if n == 0 {
            return Err(EngineError::Usage("--accum 0: the number of micro-batches must be at least 1".into()));
        }
        if traits.batch_size % n as i64 != 0 {
            return Err(EngineError::Usage(format!(
                "--accum {n} does not divide the batch size {} (micro-batches must be equal)",
                traits.batch_size
            )));
        }
    }
    if let Some(k) = flags.freeze {
        if k == 0 {
            return Err(EngineError::Usage("--freeze 0: freeze at least one block".into()));
        }
        if traits.freeze_unsupported.is_none() && k >= traits.num_blocks {
            return Err(EngineError::Usage(format!(
                "--freeze {k}: the workload has {} freezable blocks; at least one must stay trainable",
                traits.num_blocks
            )));
        }
    }
    if flags.dynamic_shapes && !flags.cudnn_benchmark && !flags.all {
        return Err(EngineError::Usage("--dynamic-shapes only applies together with --cudnn-benchmark".into()));
    }
    Ok(())
}

/// Plans every row: the baseline, one row per flag (or pair for comparisons
/// with their own reference), and a combined row when several training
/// optimizations apply.
pub fn plan(flags: &Flags, traits: &WorkloadTraits, device: DeviceChoice) -> Vec<VariantSpec> {
    let train_flops = traits.forward_flops_per_sample.map(|f| 3.0 * f * traits.batch_size as f64);
    let eval_flops = traits.forward_flops_per_sample.map(|f| f * traits.batch_size as f64);
    let all = flags.all;
    let cpu = device == DeviceChoice::Cpu;
    let mut v = Vec::new();
    let mut b = spec(VariantId::Baseline, "baseline", None, "fp32, full batch, stored activations, zero-filled grads, Adam over all parameters");
    b.info.compared_to = None;
    v.push(b);

    let amp = flags.amp.or(all.then_some(AmpDtype::Bf16));
    if let Some(d) = amp {
        let mut s = spec(
            VariantId::Amp(d),
            &format!("amp {}", d.name()),
            Some("--amp"),
            &match d {
                AmpDtype::Bf16 => "autocast to bfloat16 for forward and loss".to_string(),
                AmpDtype::Fp16 => "autocast to float16 with a GradScaler (init 2^16, growth 2, backoff 0.5, interval 2000)".to_string(),
            },
        );
        s.has_checks = true;
        v.push(s);
    }

    let accum = flags.accum.or_else(|| all.then(|| [4usize, 2].into_iter().find(|n| traits.batch_size % *n as i64 == 0)).flatten());
    if let Some(n) = accum {
        let mut s = spec(
            VariantId::Accum(n as u32),
            &format!("accum {n}"),
            Some("--accum"),
            &format!("{n} micro-batches of {} with one optimizer step (same effective batch)", traits.batch_size / n as i64),
        );
        s.has_checks = true;
        v.push(s);
    }

    if flags.cudnn_benchmark || all {
        let mut s = spec(VariantId::CudnnBenchmark, "cudnn benchmark", Some("--cudnn-benchmark"), "cuDNN benchmark mode on (autotuned convolution algorithms)");
        if cpu {
            s.skip = Some("cuDNN is CUDA-only".into());
        } else if !traits.has_conv {
            s.info.description.push_str("; this workload has no convolutions, so little to tune");
        }
        v.push(s);
        if flags.dynamic_shapes || all {
            let mut a = spec(VariantId::DynamicShapes, "dynamic shapes", Some("--dynamic-shapes"), "input size changes every step, benchmark off");
            let mut bb = spec(VariantId::CudnnBenchmarkDynamic, "cudnn benchmark + dynamic", Some("--dynamic-shapes"), "input size changes every step, benchmark on (re-tunes for each new shape)");
            bb.info.compared_to = Some(VariantId::DynamicShapes);
            let reason = if cpu { Some("cuDNN is CUDA-only".to_string()) } else { traits.dynamic_unsupported.clone() };
            a.skip = reason.clone();
            bb.skip = reason;
            v.push(a);
            v.push(bb);
        }
    }

    if flags.channels_last || all {
        let mut s = spec(VariantId::ChannelsLast, "channels-last", Some("--channels-last"), "channels-last (NHWC) input and conv weights");
        if !traits.has_conv {
            s.skip = Some("no 4-D convolution inputs in this workload".into());
        }
        s.has_checks = true;
        v.push(s);
    }

    if flags.checkpoint || all {
        let mut s = spec(VariantId::Checkpoint, "checkpoint", Some("--checkpoint"), "activations recomputed in backward from ⌈√n⌉-block chunks (checkpoint_sequential) instead of stored");
        s.skip = traits.checkpoint_unsupported.clone();
        s.has_checks = true;
        v.push(s);
    }

    if flags.inplace || all {
        let mut s = spec(VariantId::Inplace, "inplace", Some("--inplace"), "in-place ReLU (and residual add)");
        s.skip = traits.inplace_unsupported.clone();
        s.has_checks = true;
        v.push(s);
    }

    if flags.pin_memory || all {
        let mut s = spec(VariantId::PinMemory, "pin memory", Some("--pin-memory"), "batch copied from pinned host memory, non_blocking");
        if cpu {
            s.skip = Some("no CUDA device: the batch is never copied, so there is nothing to pin".into());
        }
        v.push(s);
    }

    if flags.set_to_none || all {
        v.push(spec(VariantId::SetToNone, "set to none", Some("--set-to-none"), "gradients set to none instead of zero-filled"));
    }

    let freeze = flags.freeze.or(all.then_some(1));
    if let Some(k) = freeze {
        let mut s = spec(VariantId::Freeze(k as u32), &format!("freeze {k}"), Some("--freeze"), &format!("first {k} blocks frozen, optimizer given only trainable parameters"));
        s.skip = traits.freeze_unsupported.clone().or_else(|| (k >= traits.num_blocks).then(|| format!("the workload has only {} blocks", traits.num_blocks)));
        v.push(s);
    }

    // Combined: every applicable training optimization at once, each applied
    // through the same definition as its own row.
    let train_rows: Vec<(VariantId, String)> = v
        .iter()
        .filter(|s| s.info.id != VariantId::Baseline && s.skip.is_none() && !s.config.dynamic_shapes)
        .map(|s| (s.info.id, s.info.label.clone()))
        .collect();
    if train_rows.len() >= 2 {
        let names: Vec<&str> = train_rows.iter().map(|(_, l)| l.as_str()).collect();
        let mut s = spec(VariantId::Combined, "combined", None, &format!("all of: {}", names.join(", ")));
        for (id, _) in &train_rows {
            apply(*id, &mut s.config);
        }
        s.info.precision = s.config.amp.map(|a| a.name().to_string()).unwrap_or_else(|| "fp32".into());
        s.has_checks = s.config.amp.is_some();
        v.push(s);
    }

    if flags.no_grad_eval || all {
        let mut a = spec(VariantId::EvalGrad, "eval (grad on)", Some("--no-grad-eval"), "evaluation forward in eval mode with autograd recording");
        a.info.compared_to = None;
        a.info.mode = Mode::Eval;
        let mut bb = spec(VariantId::NoGradEval, "no-grad eval", Some("--no-grad-eval"), "evaluation forward under no_grad");
        bb.info.compared_to = Some(VariantId::EvalGrad);
        bb.info.mode = Mode::Eval;
        bb.has_checks = true;
        v.push(a);
        v.push(bb);
    }

    for s in &mut v {
        s.info.flops_per_step = match s.info.mode {
            Mode::Train => train_flops,
            Mode::Eval => eval_flops,
        };
        if s.config.dynamic_shapes {
            // Shapes vary per step; the count is for the default shape only.
            s.info.flops_per_step = None;
        }
    }
    v
}
