//! The bench orchestrator: validates input, plans variants, runs workers
//! interleaved over repeats, and assembles the report.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use memprobe_report::{
    summarize, Environment, Report, RunRecord, SamplerCost, Settings, ToolInfo, Variant, VariantStatus, WorkloadInfo,
};

use crate::plan::{DescribeRequest, DeviceChoice, DeviceRequest, WorkerOutput, WorkerPlan, WorkerTask, WorkloadSpec};
use crate::variants::{self, Flags, VariantSpec};
use crate::worker_proc::{describe, spawn_worker, Worker, WorkerRun};
use crate::HostError as EngineError;

/// Everything `memprobe bench` needs.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// Model.
    pub workload: WorkloadSpec,
    /// Device asked for (`auto` is resolved by the describing worker).
    pub device: DeviceRequest,
    /// Optimization flags.
    pub flags: Flags,
    /// Repeats per variant.
    pub runs: u32,
    /// Warm-up steps per run.
    pub warmup_steps: u32,
    /// Measured steps per run.
    pub measured_steps: u32,
    /// Seed.
    pub seed: u64,
    /// Intra-op threads for workers.
    pub threads: Option<i32>,
    /// NVML sampling period, ms.
    pub sample_interval_ms: u64,
    /// The worker executable (`memprobe-worker`).
    pub worker: Worker,
    /// Command line, for the record.
    pub command: Vec<String>,
}

/// Progress callbacks (the binary draws a progress bar).
pub trait Observer {
    /// Total number of worker processes planned.
    fn planned(&mut self, total: usize);
    /// A worker is starting.
    fn starting(&mut self, label: &str, what: &str);
    /// A worker finished.
    fn finished(&mut self, label: &str, outcome: &str);
}

/// Validated, planned bench ready to run.
pub struct Prepared {
    opts: BenchOptions,
    device: DeviceChoice,
    device_note: Option<String>,
    specs: Vec<VariantSpec>,
    workload_info: WorkloadInfo,
    environment: Environment,
}

impl Prepared {
    /// The device the bench runs on.
    pub fn device(&self) -> DeviceChoice {
        self.device
    }

    /// Said when `--device auto` fell back to the CPU.
    pub fn device_note(&self) -> Option<&str> {
        self.device_note.as_deref()
    }

    /// The planned variants.
    pub fn specs(&self) -> &[VariantSpec] {
        &self.specs
    }
}

/// Validates the options (exit 2 errors) and plans the variants. A worker
/// builds the model once on the CPU to learn its shape, size and FLOPs (which
/// also checks that a TorchScript file loads) and probes the machine.
pub fn prepare(opts: BenchOptions) -> Result<Prepared, EngineError> {
    if opts.runs == 0 || opts.measured_steps == 0 {
        return Err(EngineError::Usage("--runs and --steps must be at least 1".into()));
    }
    if let WorkloadSpec::TorchScript { path, .. } = &opts.workload {
        if !path.is_file() {
            return Err(EngineError::Model { path: path.clone(), message: "no such file".into() });
        }
        if saved_with_torch_save(path) {
            return Err(EngineError::Model {
                path: path.clone(),
                message: "this file was saved with torch.save (a state_dict or a pickled model), not as a TorchScript \
                          archive: save the model with torch.jit.script(model).save(path) (or torch.jit.trace) and pass that"
                    .into(),
            });
        }
    }
    let described = describe(
        &opts.worker,
        &DescribeRequest { workload: opts.workload.clone(), device: opts.device, seed: opts.seed, threads: opts.threads },
    )?;
    let traits = described.traits;
    variants::validate(&opts.flags, &traits)?;
    let specs = variants::plan(&opts.flags, &traits, described.device);
    Ok(Prepared {
        opts,
        device: described.device,
        device_note: described.device_note,
        specs,
        workload_info: described.workload,
        environment: described.environment,
    })
}

/// Whether `path` holds what `torch.save` writes (a zip archive with a
/// `data.pkl` and no TorchScript code, or a legacy pickle) rather than a
/// TorchScript archive (`constants.pkl`, `code/`), which libtorch would
/// only call corrupted. Judged by the archive's central directory at the
/// end of the file (its last 4 MiB), so a large model is not read whole.
fn saved_with_torch_save(path: &std::path::Path) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = std::fs::File::open(path) else { return false };
    let mut head = [0u8; 4];
    if f.read_exact(&mut head).is_err() {
        return false;
    }
    // A legacy torch.save file is a pickle (protocol 2 and later start with 0x80).
    if head[0] == 0x80 {
        return true;
    }
    if &head != b"PK\x03\x04" {
        return false;
    }
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let tail = len.min(4 << 20);
    let mut buf = Vec::with_capacity(tail as usize);
    if f.seek(SeekFrom::Start(len - tail)).is_err() || f.take(tail).read_to_end(&mut buf).is_err() {
        return false;
    }
    let has = |needle: &[u8]| buf.windows(needle.len()).any(|w| w == needle);
    has(b"data.pkl") && !has(b"constants.pkl") && !has(b"/code/")
}

fn plan_for(opts: &BenchOptions, device: DeviceChoice, spec: &VariantSpec, task: WorkerTask, repeat: u32) -> WorkerPlan {
    WorkerPlan {
        task,
        workload: opts.workload.clone(),
        device,
        config: spec.config.clone(),
        warmup_steps: opts.warmup_steps,
        measured_steps: opts.measured_steps,
        seed: opts.seed,
        repeat,
        sample_interval_ms: opts.sample_interval_ms,
        threads: opts.threads,
    }
}

/// Runs the prepared bench. Returns the report, partial (`complete: false`)
/// when `interrupted` was raised; summaries are computed either way.
pub fn run(prepared: Prepared, observer: &mut dyn Observer, interrupted: &AtomicBool) -> Result<Report, EngineError> {
    let Prepared { opts, device, specs, workload_info, environment, .. } = prepared;
    let mut variants: Vec<Variant> = specs
        .iter()
        .map(|s| Variant {
            info: s.info.clone(),
            status: match &s.skip {
                Some(reason) => VariantStatus::Skipped { reason: reason.clone() },
                None => VariantStatus::Pending,
            },
            runs: Vec::new(),
            correctness: Vec::new(),
            summary: None,
        })
        .collect();

    let runnable: Vec<usize> = (0..specs.len()).filter(|&i| specs[i].skip.is_none()).collect();
    let checks: Vec<usize> = runnable.iter().copied().filter(|&i| specs[i].has_checks).collect();
    observer.planned(checks.len() + runnable.len() * opts.runs as usize);
    let mut schedule = Vec::new();
    let mut notes = Vec::new();

    // Correctness checks: one worker per variant, separate from the measured
    // runs so their extra forward/backward passes do not touch the peaks.
    for &i in &checks {
        if interrupted.load(Ordering::SeqCst) {
            break;
        }
        let s = &specs[i];
        observer.starting(&s.info.label, "correctness check");
        let plan = plan_for(&opts, device, s, WorkerTask::Check, 0);
        let outcome = match spawn_worker(&opts.worker, &plan, &s.info.id.to_string())? {
            WorkerRun::Output(WorkerOutput::Checked { checks }, _, _) => {
                variants[i].correctness = checks;
                "checked".to_string()
            }
            WorkerRun::Output(WorkerOutput::Oom { message }, _, _) => {
                notes.push(format!("{}: correctness check ran out of memory: {message}", s.info.id));
                "check OOM".into()
            }
            WorkerRun::Output(WorkerOutput::Failed { message }, _, _) => {
                notes.push(format!("{}: correctness check failed: {message}", s.info.id));
                "check failed".into()
            }
            WorkerRun::Output(other, _, _) => {
                notes.push(format!("{}: unexpected check output {other:?}", s.info.id));
                "check failed".into()
            }
            WorkerRun::Crashed { exit_status, .. }
                if interrupted.load(Ordering::SeqCst) || exit_status.contains("(SIGINT)") =>
            {
                interrupted.store(true, Ordering::SeqCst);
                "interrupted".into()
            }
            WorkerRun::Crashed { exit_status, stderr_tail } => {
                notes.push(format!("{}: correctness-check worker crashed ({exit_status}): {stderr_tail}", s.info.id));
                "check crashed".into()
            }
        };
        observer.finished(&s.info.label, &outcome);
    }

    // Measured runs, interleaved: repeat r runs every variant once.
    'outer: for repeat in 0..opts.runs {
        for &i in &runnable {
            if interrupted.load(Ordering::SeqCst) {
                break 'outer;
            }
            if !matches!(variants[i].status, VariantStatus::Pending) {
                continue; // an OOM/crash/failure stops this variant; others go on
            }
            let s = &specs[i];
            observer.starting(&s.info.label, &format!("run {}/{}", repeat + 1, opts.runs));
            schedule.push(s.info.id);
            let plan = plan_for(&opts, device, s, WorkerTask::Measure, repeat);
            let outcome = match spawn_worker(&opts.worker, &plan, &s.info.id.to_string())? {
                WorkerRun::Output(WorkerOutput::Measured(m), wall, pid) => {
                    variants[i].runs.push(RunRecord {
                        repeat,
                        pid,
                        step_times_ms: m.step_times_ms,
                        timing_source: m.timing_source,
                        losses: m.losses,
                        samples_per_step: m.samples_per_step,
                        memory: m.memory,
                        worker_wall_s: wall,
                        sampler: m.sampler,
                    });
                    "ok".to_string()
                }
                WorkerRun::Output(WorkerOutput::Oom { message }, _, _) => {
                    variants[i].status = VariantStatus::Oom { message };
                    "OOM".into()
                }
                WorkerRun::Output(WorkerOutput::Failed { message }, _, _) => {
                    variants[i].status = VariantStatus::Failed { message };
                    "failed".into()
                }
                WorkerRun::Output(other, _, _) => {
                    variants[i].status = VariantStatus::Failed { message: format!("unexpected worker output {other:?}") };
                    "failed".into()
                }
                // A terminal's Ctrl-C reaches the worker too; its SIGINT death can be
                // seen before the parent's handler has raised the flag.
                WorkerRun::Crashed { exit_status, .. }
                    if interrupted.load(Ordering::SeqCst) || exit_status.contains("(SIGINT)") =>
                {
                    interrupted.store(true, Ordering::SeqCst);
                    variants[i].status = VariantStatus::Interrupted;
                    "interrupted".into()
                }
                WorkerRun::Crashed { exit_status, stderr_tail } => {
                    variants[i].status = VariantStatus::Crashed { exit_status, stderr_tail };
                    "crashed".into()
                }
            };
            observer.finished(&s.info.label, &outcome);
        }
    }
    let complete = !interrupted.load(Ordering::SeqCst);
    // Resolve the rows still pending: every run done is ok; fewer (Ctrl-C) is interrupted.
    for v in variants.iter_mut() {
        if matches!(v.status, VariantStatus::Pending) {
            v.status = if (v.runs.len() as u32) < opts.runs { VariantStatus::Interrupted } else { VariantStatus::Ok };
        }
    }

    let samplers: Vec<&SamplerCost> = variants.iter().flat_map(|v| v.runs.iter()).filter_map(|r| r.sampler.as_ref()).collect();
    let sampler = (!samplers.is_empty()).then(|| {
        let n = samplers.len() as f64;
        SamplerCost {
            what: samplers[0].what.clone(),
            interval_ms: samplers[0].interval_ms,
            samples: samplers.iter().map(|s| s.samples).sum(),
            mean_sample_us: samplers.iter().map(|s| s.mean_sample_us).sum::<f64>() / n,
            cpu_fraction: samplers.iter().map(|s| s.cpu_fraction).sum::<f64>() / n,
        }
    });
    if device == DeviceChoice::Cpu {
        notes.push("no background sampler on CPU: peak RSS is the kernel's high-water mark read once per worker (getrusage), so nothing runs beside the steps".into());
        notes.push("peak RSS includes the process baseline (libtorch and CUDA runtime libraries mapped, batch pool); compare rows by their Δ".into());
    }
    if environment.peak_flops.is_empty() {
        notes.push(format!("MFU unavailable: no known dense peak for {}", environment.device_name));
    }

    let mut report = Report {
        schema_version: memprobe_report::SCHEMA_VERSION,
        tool: ToolInfo { name: "memprobe".into(), version: env!("CARGO_PKG_VERSION").into() },
        created_unix_s: SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0),
        command: opts.command.clone(),
        environment,
        workload: workload_info,
        settings: Settings {
            runs: opts.runs,
            warmup_steps: opts.warmup_steps,
            measured_steps: opts.measured_steps,
            seed: opts.seed,
            schedule,
        },
        sampler,
        variants,
        complete,
        notes,
    };
    summarize(&mut report);
    Ok(report)
}
