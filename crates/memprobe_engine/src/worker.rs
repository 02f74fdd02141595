//! Worker processes: each measured run and each correctness check executes in
//! a fresh process (the memprobe binary re-invoked with a hidden subcommand),
//! so one variant's allocator state, peak RSS or cuDNN cache never leaks into
//! another's. The plan arrives as JSON on stdin; one JSON [`WorkerOutput`]
//! goes to stdout.

use std::io::{Read, Write};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use memprobe_report::{CorrectnessCheck, MemoryFigure, MemoryMetric};
use tch::{Device, Kind, Tensor};

use crate::ffi;
use crate::plan::{AmpDtype, DeviceChoice, MeasureResult, VariantConfig, WorkerOutput, WorkerPlan, WorkerTask};
use crate::sampler::sample_during;
use crate::timing::StepTimer;
use crate::trainer::{relative_error, Trainer};
use crate::workloads::{self, Batch};
use crate::EngineError;

/// Hidden subcommand name the parent uses to start a worker.
pub const WORKER_SUBCOMMAND: &str = "__worker";

/// Environment variable for fault injection in tests: `VARIANT_ID:oom` makes
/// that variant's measuring workers request an impossible allocation (a real
/// allocator failure), `VARIANT_ID:crash` makes them abort.
pub const FAULT_ENV: &str = "MEMPROBE_FAULT";

/// Entry point of a worker process: reads the plan from stdin, runs it and
/// prints the outcome. Returns the process exit code (0 ok, 3 reported error).
pub fn worker_main() -> i32 {
    let mut input = String::new();
    let out = match std::io::stdin().read_to_string(&mut input) {
        Err(e) => WorkerOutput::Failed { message: format!("reading plan from stdin: {e}") },
        Ok(_) => match serde_json::from_str::<WorkerPlan>(&input) {
            Err(e) => WorkerOutput::Failed { message: format!("bad worker plan: {e}") },
            Ok(plan) => run_guarded(&plan),
        },
    };
    let code = match out {
        WorkerOutput::Measured(_) | WorkerOutput::Checked { .. } => 0,
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
        return Err(EngineError::DeviceUnavailable("worker: CUDA is not available".into()));
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

/// Variant id passed to workers through the environment for fault injection.
pub const VARIANT_ENV: &str = "MEMPROBE_VARIANT_ID";

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

/// What the parent learned from one worker process.
#[derive(Debug)]
pub enum WorkerRun {
    /// The worker printed an outcome.
    Output(WorkerOutput, f64, u32),
    /// The worker died without printing an outcome.
    Crashed {
        /// Exit status text.
        exit_status: String,
        /// Last lines of its stderr.
        stderr_tail: String,
    },
}

/// Starts a worker process running `plan` and waits for it.
pub fn spawn_worker(exe: &Path, plan: &WorkerPlan, variant_id: &str) -> Result<WorkerRun, EngineError> {
    let started = Instant::now();
    let mut child = Command::new(exe)
        .arg(WORKER_SUBCOMMAND)
        .env(VARIANT_ENV, variant_id)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| EngineError::Worker(format!("starting {}: {e}", exe.display())))?;
    let pid = child.id();
    let json = serde_json::to_vec(plan)?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(&json).map_err(|e| EngineError::Worker(format!("sending plan: {e}")))?;
    }
    let output = child.wait_with_output().map_err(|e| EngineError::Worker(format!("waiting for worker: {e}")))?;
    let wall = started.elapsed().as_secs_f64();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let parsed = stdout
        .lines()
        .rev()
        .filter(|l| l.trim_start().starts_with('{'))
        .find_map(|l| serde_json::from_str::<WorkerOutput>(l).ok());
    match parsed {
        Some(out) => Ok(WorkerRun::Output(out, wall, pid)),
        None => {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let tail: Vec<&str> = stderr.lines().rev().take(12).collect();
            let tail = tail.into_iter().rev().collect::<Vec<_>>().join("\n");
            let mut status = output.status.to_string();
            if status.contains("signal: 9") {
                status.push_str(", possibly the kernel OOM killer");
            }
            Ok(WorkerRun::Crashed { exit_status: status, stderr_tail: tail })
        }
    }
}
