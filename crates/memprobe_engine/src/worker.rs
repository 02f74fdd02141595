//! The worker side of a worker process (`memprobe-worker`): each measured run
//! and each correctness check executes in a fresh process, so one variant's
//! allocator state, peak RSS or cuDNN cache never leaks into another's. The
//! request arrives as JSON on stdin ([`WorkerRequest`]); one JSON
//! [`WorkerOutput`] goes to stdout.

use std::io::{Read, Write};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use memprobe_report::{CorrectnessCheck, MemoryFigure, MemoryMetric};
use tch::{Device, Kind, Tensor};

use crate::ffi;
use crate::plan::{
    AmpDtype, DescribeRequest, Description, DeviceChoice, DeviceRequest, MeasureResult, VariantConfig, WorkerOutput,
    WorkerPlan, WorkerRequest, WorkerTask, WorkloadSpec,
};
use crate::variants::WorkloadTraits;
use crate::sampler::sample_during;
use crate::timing::StepTimer;
use crate::trainer::{relative_error, Trainer};
use crate::workloads::{self, Batch};
use crate::{EngineError, ToTch};
use memprobe_host::worker_proc::{FAULT_ENV, VARIANT_ENV};
use memprobe_report::WorkloadInfo;

/// Entry point of a worker process: reads the request from stdin, runs it and
/// prints the outcome. Returns the process exit code (0 ok, 2 rejected input,
/// 3 reported error).
pub fn worker_main() -> i32 {
    crate::env::load_torch_cuda();
    let mut input = String::new();
    let out = match std::io::stdin().read_to_string(&mut input) {
        Err(e) => WorkerOutput::Failed { message: format!("reading plan from stdin: {e}") },
        Ok(_) => match serde_json::from_str::<WorkerRequest>(&input) {
            Err(e) => WorkerOutput::Failed {
                message: format!("bad worker request (memprobe-worker is started by `memprobe bench`): {e}"),
            },
            Ok(WorkerRequest::Run(plan)) => run_guarded(&plan),
            Ok(WorkerRequest::Describe(req)) => describe_guarded(&req),
        },
    };
    let code = match out {
        WorkerOutput::Measured(_) | WorkerOutput::Checked { .. } | WorkerOutput::Described(_) => 0,
        WorkerOutput::Rejected { .. } => 2,
        _ => 3,
    };
    let text = serde_json::to_string(&out).unwrap_or_else(|e| format!("{{\"outcome\":\"failed\",\"message\":\"{e}\"}}"));
    let mut so = std::io::stdout().lock();
    let _ = writeln!(so, "{text}");
    let _ = so.flush();
    code
}

fn is_oom(msg: &str) -> bool {
    let m = msg.to_ascii_lowercase();
    m.contains("out of memory") || m.contains("not enough memory") || m.contains("can't allocate memory")
}

fn classify(message: String) -> WorkerOutput {
    if is_oom(&message) {
        WorkerOutput::Oom { message }
    } else {
        WorkerOutput::Failed { message }
    }
}

/// Answers a describe request: resolves the device, builds the workload once
/// on the CPU, probes the machine. Bad input comes back as `Rejected`.
pub fn describe_guarded(req: &DescribeRequest) -> WorkerOutput {
    std::panic::set_hook(Box::new(|_| {}));
    let r = catch_unwind(AssertUnwindSafe(|| describe(req)));
    let _ = std::panic::take_hook();
    match r {
        Ok(Ok(d)) => WorkerOutput::Described(Box::new(d)),
        Ok(Err(e)) if e.is_usage() => WorkerOutput::Rejected { message: e.to_string() },
        Ok(Err(e)) => WorkerOutput::Failed { message: e.to_string() },
        Err(payload) => {
            let msg = payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "worker panicked".into());
            WorkerOutput::Failed { message: first_lines(&msg, 3) }
        }
    }
}

fn describe(req: &DescribeRequest) -> Result<Description, EngineError> {
    if let Some(t) = req.threads {
        tch::set_num_threads(t);
    }
    let (device, device_note) = match req.device {
        DeviceRequest::Cpu => (DeviceChoice::Cpu, None),
        DeviceRequest::Cuda => {
            if !crate::env::torch_cuda_available() {
                let why = crate::env::cuda_unavailable_reason();
                return Err(EngineError::DeviceUnavailable(format!("--device cuda: {why}; use --device cpu")));
            }
            (DeviceChoice::Cuda, None)
        }
        DeviceRequest::Auto => {
            if crate::env::torch_cuda_available() {
                (DeviceChoice::Cuda, None)
            } else {
                (DeviceChoice::Cpu, Some("no NVIDIA driver/CUDA device found, using CPU".to_string()))
            }
        }
    };
    if let WorkloadSpec::TorchScript { path, .. } = &req.workload {
        if !path.is_file() {
            return Err(EngineError::Model { path: path.clone(), message: "no such file".into() });
        }
    }
    let model = workloads::build(&req.workload, tch::Device::Cpu, req.seed)?;
    let traits = WorkloadTraits {
        batch_size: model.batch_size(),
        num_blocks: model.num_blocks(),
        has_conv: model.has_conv(),
        inplace_unsupported: model.inplace_unsupported(),
        checkpoint_unsupported: model.checkpoint_unsupported(),
        freeze_unsupported: model.freeze_unsupported(),
        dynamic_unsupported: model.dynamic_unsupported(),
        forward_flops_per_sample: model.forward_flops_per_sample(),
    };
    let train_flops = traits.forward_flops_per_sample.map(|f| 3.0 * f * traits.batch_size as f64);
    let workload = WorkloadInfo {
        name: model.name().into(),
        size: model.size_label(),
        description: model.description(),
        batch_size: model.batch_size() as u64,
        input_shape: model.input_shape(0, false),
        parameters: model.parameter_count(),
        loss: model.loss_name().into(),
        optimizer: "Adam (libtorch C++, lr 1e-3)".into(),
        train_flops_per_step: train_flops,
        flops_source: match train_flops {
            Some(_) => "counted analytically: 2 FLOPs per multiply-add of every matmul/conv (attention scores over the full T×T), training step = 3× forward; elementwise ops not counted".into(),
            None => "not counted: TorchScript modules are opaque".into(),
        },
    };
    let environment = crate::env::probe(device);
    Ok(Description { device, device_note, traits, workload, environment })
}

/// Runs a plan, turning libtorch panics (tch's infallible ops panic on C++
/// exceptions, e.g. allocation failures) into reported outcomes.
pub fn run_guarded(plan: &WorkerPlan) -> WorkerOutput {
    // Keep the default hook's backtrace noise off stderr; the message goes to stdout.
    std::panic::set_hook(Box::new(|_| {}));
    let r = catch_unwind(AssertUnwindSafe(|| run_plan(plan)));
    let _ = std::panic::take_hook();
    match r {
        Ok(Ok(out)) => out,
        Ok(Err(e)) => classify(e.to_string()),
        Err(payload) => {
            let msg = payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "worker panicked".into());
            classify(first_lines(&msg, 3))
        }
    }
}

fn first_lines(s: &str, n: usize) -> String {
    s.lines().filter(|l| !l.trim().is_empty()).take(n).collect::<Vec<_>>().join(" ")
}

fn run_plan(plan: &WorkerPlan) -> Result<WorkerOutput, EngineError> {
    if let Some(t) = plan.threads {
        tch::set_num_threads(t);
    }
    let device = plan.device.tch();
    if plan.device == DeviceChoice::Cuda && !crate::env::torch_cuda_available() {
        return Err(EngineError::DeviceUnavailable(format!("worker: CUDA is not available: {}", crate::env::cuda_unavailable_reason())));
    }
    match plan.task {
        WorkerTask::Measure => measure(plan, device).map(WorkerOutput::Measured),
        WorkerTask::Check => checks(plan, device).map(|checks| WorkerOutput::Checked { checks }),
    }
}

fn inject_fault(plan: &WorkerPlan, variant_id: &str) {
    let Ok(spec) = std::env::var(FAULT_ENV) else { return };
    let Some((id, kind)) = spec.split_once(':') else { return };
    if id != variant_id || plan.task != WorkerTask::Measure {
        return;
    }
    match kind {
        // A genuine allocator failure: 2^50 floats cannot be allocated anywhere.
        "oom" => {
            let _t = Tensor::empty([1i64 << 50], (Kind::Float, plan.device.tch()));
        }
        "crash" => std::process::abort(),
        _ => {}
    }
}


fn synchronize(device: Device) {
    if let Device::Cuda(i) = device {
        tch::Cuda::synchronize(i as i64);
    }
}

fn measure(plan: &WorkerPlan, device: Device) -> Result<MeasureResult, EngineError> {
    let variant_id = std::env::var(VARIANT_ENV).unwrap_or_default();
    inject_fault(plan, &variant_id);
    let cfg = &plan.config;
    if cfg.cudnn_benchmark {
        tch::Cuda::cudnn_set_benchmark(true);
    }
    let model = workloads::build(&plan.workload, device, plan.seed)?;
    let mut trainer = Trainer::new(model, cfg.clone(), device)?;
    let total = (plan.warmup_steps + plan.measured_steps) as usize;
    // Distinct batches, generated before timing. With dynamic shapes every step
    // gets its own shape; otherwise a small pool is cycled.
    let pool_len = if cfg.dynamic_shapes { total } else { total.min(4) };
    let batches: Vec<Batch> = (0..pool_len)
        .map(|s| trainer.prepare_host(trainer.model().make_batch(s, cfg.dynamic_shapes, plan.seed)))
        .collect();
    let samples_per_step = trainer.model().batch_size() as u64;
    let eval = cfg.eval_no_grad;
    if eval.is_some() {
        trainer.set_train(false);
    }

    let step = |trainer: &mut Trainer, s: usize| -> Result<Tensor, EngineError> {
        let b = trainer.to_device(&batches[s % batches.len()]);
        match eval {
            None => trainer.train_step(&b),
            Some(no_grad) => {
                let out = trainer.eval_forward(&b, no_grad)?;
                // A scalar summary keeps the output comparable without holding the graph.
                Ok(out.detach().to_kind(Kind::Float).mean(Kind::Float))
            }
        }
    };

    for s in 0..plan.warmup_steps as usize {
        let _ = step(&mut trainer, s)?;
    }
    synchronize(device);
    let is_cuda = device.is_cuda();
    if is_cuda {
        ffi::reset_peak_stats(0)?;
    }
    let mut timer = if is_cuda { StepTimer::cuda()? } else { StepTimer::host() };
    let timing_source = timer.source().to_string();
    let warm = plan.warmup_steps as usize;
    let run_steps = |timer: &mut StepTimer, trainer: &mut Trainer| -> Result<Vec<Tensor>, EngineError> {
        let mut losses = Vec::with_capacity(plan.measured_steps as usize);
        for s in warm..warm + plan.measured_steps as usize {
            timer.start()?;
            let l = step(trainer, s)?;
            timer.stop()?;
            losses.push(l);
        }
        synchronize(device);
        Ok(losses)
    };

    let mut memory = Vec::new();
    let mut sampler_cost = None;
    let losses = if is_cuda {
        let interval = Duration::from_millis(plan.sample_interval_ms.max(1));
        let (r, peaks, note) = sample_during(interval, || run_steps(&mut timer, &mut trainer));
        let losses = r?;
        let stats = ffi::device_stats(0)?;
        memory.push(MemoryFigure {
            metric: MemoryMetric::AllocatorPeakAllocated,
            bytes: Some(stats.allocated_peak.max(0) as u64),
            source: "CUDA caching allocator peak allocated bytes (at::accelerator::getDeviceStats via shim), reset after warm-up".into(),
            note: None,
        });
        memory.push(MemoryFigure {
            metric: MemoryMetric::AllocatorPeakReserved,
            bytes: Some(stats.reserved_peak.max(0) as u64),
            source: "CUDA caching allocator peak reserved bytes (getDeviceStats), reset after warm-up".into(),
            note: None,
        });
        memory.push(MemoryFigure {
            metric: MemoryMetric::NvmlProcessPeak,
            bytes: peaks.process_peak,
            source: "NVML running_compute_processes, this PID, peak of background samples (includes the CUDA context)".into(),
            note: peaks.process_note.clone().or(note.clone()),
        });
        memory.push(MemoryFigure {
            metric: MemoryMetric::NvmlDevicePeak,
            bytes: peaks.device_peak,
            source: "NVML memory_info().used, whole device, peak of background samples".into(),
            note,
        });
        sampler_cost = peaks.cost;
        losses
    } else {
        run_steps(&mut timer, &mut trainer)?
    };
    let step_times_ms = timer.finish()?;
    if !is_cuda {
        memory.push(MemoryFigure {
            metric: MemoryMetric::PeakRss,
            bytes: crate::env::peak_rss_bytes(),
            source: "getrusage(RUSAGE_SELF).ru_maxrss of the worker process (kernel high-water mark over its lifetime)".into(),
            note: None,
        });
    }
    let losses: Vec<f64> = losses.iter().map(|l| if l.defined() { l.double_value(&[]) } else { f64::NAN }).collect();
    Ok(MeasureResult { step_times_ms, timing_source, losses, samples_per_step, memory, sampler: sampler_cost })
}

fn check(kind: &str, value: f64, tolerance: f64, detail: String) -> CorrectnessCheck {
    CorrectnessCheck { kind: kind.into(), value, tolerance, passed: value.is_finite() && value <= tolerance, detail }
}

fn rel(a: f64, b: f64) -> f64 {
    if b == 0.0 {
        (a - b).abs()
    } else {
        ((a - b) / b).abs()
    }
}

/// Loss tolerance for an autocast dtype: bf16 keeps 8 mantissa bits, fp16 11.
fn amp_tolerance(d: AmpDtype) -> f64 {
    match d {
        AmpDtype::Bf16 => 2e-2,
        AmpDtype::Fp16 => 1e-2,
    }
}

/// Correctness checks of the variant against the baseline computation, on the
/// same initial weights (same seed) and the same batch.
fn checks(plan: &WorkerPlan, device: Device) -> Result<Vec<CorrectnessCheck>, EngineError> {
    let cfg = &plan.config;
    // cuDNN's default TF32 convolutions differ from fp32 by about 1e-3 (the
    // convnet's accumulation check read 2.7e-3 on an H200 with it): the
    // checks compare fp32 arithmetic. Measured runs are other processes and
    // keep torch's defaults.
    if device != Device::Cpu {
        ffi::set_cudnn_allow_tf32(false)?;
    }
    let model = workloads::build(&plan.workload, device, plan.seed)?;
    let coupled = model.has_batch_norm();
    let base = VariantConfig::baseline();
    let mut t = Trainer::new(model, base.clone(), device)?;
    let host = t.model().make_batch(0, false, plan.seed);
    let b = t.to_device(&host);
    let mut out = Vec::new();

    if let Some(no_grad) = cfg.eval_no_grad {
        if no_grad {
            let with_grad = t.eval_forward(&b, false)?.detach();
            let without = t.eval_forward(&b, true)?;
            let diff = (&with_grad - &without).abs().max().double_value(&[]);
            out.push(check(
                "no-grad-eval-max-abs-diff",
                diff,
                0.0,
                "eval-mode output with grad enabled vs under no_grad, same weights and batch".into(),
            ));
        }
        return Ok(out);
    }

    // Gradient checks compare one forward/backward of the baseline with the
    // variant's. Batch norm couples the samples of a batch, so for models with
    // it the gradient comparisons run in eval mode (running statistics).
    let grad_mode_train = !coupled;
    let mode_note = if coupled { " (batch norm in eval mode so samples are independent)" } else { "" };
    let grads_with = |t: &mut Trainer, c: VariantConfig| -> Result<Vec<Tensor>, EngineError> {
        t.set_config(c);
        t.set_train(grad_mode_train);
        t.clear_all_grads()?;
        let _ = t.accumulate(&b, grad_mode_train)?;
        Ok(t.gradients())
    };
    let needs_grads = cfg.accum > 1 || cfg.checkpoint || cfg.inplace;
    let reference = if needs_grads { Some(grads_with(&mut t, base.clone())?) } else { None };
    if let Some(g_ref) = &reference {
        if cfg.accum > 1 && cfg.amp.is_none() {
            let g = grads_with(&mut t, VariantConfig { accum: cfg.accum, ..base.clone() })?;
            out.push(check(
                "accum-grad-rel-err",
                relative_error(&g, g_ref),
                1e-5,
                format!("gradient accumulated over {} micro-batches vs one full batch, same weights/data{mode_note}", cfg.accum),
            ));
        }
        if cfg.checkpoint && cfg.amp.is_none() {
            let g = grads_with(&mut t, VariantConfig { checkpoint: true, ..base.clone() })?;
            out.push(check(
                "checkpoint-grad-rel-err",
                relative_error(&g, g_ref),
                1e-5,
                format!("gradient with recomputed segments vs stored activations{mode_note}"),
            ));
        }
        if cfg.inplace && cfg.amp.is_none() {
            let g = grads_with(&mut t, VariantConfig { inplace: true, ..base.clone() })?;
            out.push(check(
                "inplace-grad-rel-err",
                relative_error(&g, g_ref),
                1e-6,
                format!("gradient with in-place activations vs out-of-place{mode_note}"),
            ));
        }
    }

    // Loss checks: forward only, under no_grad, in training mode.
    let base_loss = || -> Result<f64, EngineError> {
        let _g = tch::no_grad_guard();
        Ok(t.loss(&b.input, &b.target, !coupled)?.double_value(&[]))
    };
    let l_ref = base_loss()?;
    if let Some(d) = cfg.amp {
        let mut t2 = t;
        t2.set_config(VariantConfig { amp: Some(d), ..base.clone() });
        let l = {
            let _g = tch::no_grad_guard();
            t2.loss(&b.input, &b.target, !coupled)?.double_value(&[])
        };
        out.push(check(
            "amp-loss-rel-diff",
            rel(l, l_ref),
            amp_tolerance(d),
            format!("loss under {} autocast vs fp32, same weights and batch (fp32 loss {l_ref:.6})", d.name()),
        ));
        t = t2;
    }
    if cfg.channels_last && b.input.dim() == 4 {
        let model = workloads::build(&plan.workload, device, plan.seed)?;
        let t_cl = Trainer::new(model, VariantConfig { channels_last: true, ..base.clone() }, device)?;
        let b_cl = t_cl.to_device(&host);
        let laid_out = ffi::is_channels_last(&b_cl.input);
        let l = {
            let _g = tch::no_grad_guard();
            t_cl.loss(&b_cl.input, &b_cl.target, !coupled)?.double_value(&[])
        };
        out.push(check(
            "channels-last-loss-rel-diff",
            rel(l, l_ref),
            1e-4,
            format!("loss with channels-last input/weights (input NHWC strides: {laid_out}) vs NCHW"),
        ));
    }
    let _ = t;
    Ok(out)
}
