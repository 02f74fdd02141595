//! `memprobe`: measure what each PyTorch training optimization buys on this
//! machine, and measure your own training jobs. Thin binary: argument
//! parsing, progress bar, rendering, exit codes. It does not link libtorch:
//! `bench` starts `memprobe-worker` (found next to this executable) for every
//! run; the orchestration is in `memprobe_host`, the report format in
//! `memprobe_report`.

mod lint;
mod mirror;

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use memprobe_host::bench::{self, BenchOptions, Observer};
use memprobe_host::plan::{AmpDtype, BuiltinWorkload, DeviceRequest, LossKind, SizePreset, WorkloadSpec};
use memprobe_host::variants::Flags;
use memprobe_host::{worker_proc, HostError};
use memprobe_report::export::{Exporter, JsonExporter, MarkdownExporter, TableExporter};
use memprobe_report::write_atomic;

#[derive(Parser)]
#[command(name = "memprobe", version, about = "Measure PyTorch training on this machine: what each optimization buys (bench), and your own jobs (run, ab, compare, report)")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run real training steps and print an A/B table of optimizations vs a plain baseline.
    Bench(Box<BenchArgs>),
    /// Run your command and sample its whole process tree until it exits.
    ///
    /// Host RSS per process from /proc (summed over the tree and per process),
    /// GPU memory per process from NVML on every GPU of the node when an
    /// NVIDIA driver is present, and with --torch the PyTorch caching
    /// allocator's view. stdin/stdout/stderr, the exit status and signals pass
    /// through; the summary goes to stderr and the report is written even when
    /// the command is interrupted.
    #[command(after_help = "Examples:\n  memprobe run --json run.json -- python train.py --epochs 1\n  memprobe run --torch --interval 50ms --svg mem.svg -- torchrun --nproc-per-node 8 train.py")]
    Run(RunArgs),
    /// Run two commands alternately N times and compare B with A.
    ///
    /// Both run under the same sampler as `memprobe run`; the table gives the
    /// median and spread of wall time and peak memory, and a verdict per
    /// metric: faster/slower (smaller/larger) only when the Mann-Whitney U test over
    /// runs is significant and the change exceeds the noise threshold,
    /// otherwise "no significant difference" with the confidence interval.
    #[command(after_help = "Example:\n  memprobe ab --runs 5 -- python train.py --- python train.py --amp")]
    Ab(AbArgs),
    /// Compare two reports (bench, run or ab) and fail on a regression.
    ///
    /// Exit status: 0 no regression, 1 a regression (significantly worse and
    /// above the allowed amount; the rows are named), 2 unreadable or
    /// mismatched reports (schema version, kind, workload or device).
    #[command(after_help = "Example (CI):\n  memprobe compare base.json new.json --format markdown >> \"$GITHUB_STEP_SUMMARY\"")]
    Compare(CompareArgs),
    /// Render reports: a bench report as bar charts of time and memory per
    /// variant, a run report as a memory timeline.
    ///
    /// --merge combines the per-node `run` reports of one multi-node job (one
    /// `memprobe run` per node under srun/torchrun) into one report with a
    /// series per node and GPU. Charts are SVG; markdown gives the tables.
    #[command(after_help = "Examples:\n  memprobe report bench.json --format svg -o bench.svg\n  memprobe report node*.json --merge --format svg -o job.svg")]
    Report(ReportArgs),
}

#[derive(Clone, Copy, ValueEnum)]
enum DeviceArg {
    /// CUDA when available, else CPU.
    Auto,
    Cpu,
    Cuda,
}

#[derive(Clone, Copy, ValueEnum)]
enum WorkloadArg {
    Mlp,
    Convnet,
    Transformer,
}

#[derive(Clone, Copy, ValueEnum)]
enum SizeArg {
    Small,
    Medium,
    Large,
}

#[derive(Clone, Copy, ValueEnum)]
enum AmpArg {
    Bf16,
    Fp16,
}

#[derive(Clone, Copy, ValueEnum)]
enum LossArg {
    Mse,
    CrossEntropy,
}

#[derive(clap::Args)]
struct BenchArgs {
    /// Built-in workload.
    #[arg(long, value_enum, default_value = "mlp", conflicts_with = "model")]
    workload: WorkloadArg,
    /// Size preset of the built-in workload (small finishes in seconds on 2 CPU cores).
    #[arg(long, value_enum, default_value = "small")]
    size: SizeArg,
    /// Override the preset's batch size.
    #[arg(long)]
    batch_size: Option<i64>,
    /// TorchScript model saved from Python (torch.jit.script(m).save(PATH)).
    #[arg(long, value_name = "PATH.pt", requires = "input_shape")]
    model: Option<PathBuf>,
    /// Input shape for --model, batch first, e.g. 64,3,32,32.
    #[arg(long, value_delimiter = ',', num_args = 1..)]
    input_shape: Option<Vec<i64>>,
    /// Loss for --model.
    #[arg(long, value_enum, default_value = "mse")]
    loss: LossArg,
    /// Device.
    #[arg(long, value_enum, default_value = "auto")]
    device: DeviceArg,
    /// Autocast (mixed precision); fp16 uses a GradScaler.
    #[arg(long, value_enum, num_args = 0..=1, default_missing_value = "bf16")]
    amp: Option<AmpArg>,
    /// Gradient accumulation over N micro-batches (same effective batch).
    #[arg(long, value_name = "N")]
    accum: Option<usize>,
    /// cuDNN benchmark mode.
    #[arg(long)]
    cudnn_benchmark: bool,
    /// With --cudnn-benchmark: also compare with an input size changing every step.
    #[arg(long)]
    dynamic_shapes: bool,
    /// Channels-last input and weights.
    #[arg(long)]
    channels_last: bool,
    /// Activation checkpointing (recompute segments in backward).
    #[arg(long)]
    checkpoint: bool,
    /// In-place activations.
    #[arg(long)]
    inplace: bool,
    /// Evaluation forward with grad vs under no_grad.
    #[arg(long)]
    no_grad_eval: bool,
    /// Batch copied from pinned memory, non_blocking.
    #[arg(long)]
    pin_memory: bool,
    /// Gradients set to none instead of zero-filled.
    #[arg(long)]
    set_to_none: bool,
    /// Freeze the first K blocks.
    #[arg(long, value_name = "K")]
    freeze: Option<usize>,
    /// Every optimization (bf16 autocast, accum 4, freeze 1 unless given).
    #[arg(long)]
    all: bool,
    /// Repeats per variant (fresh worker process each, interleaved); 4 is
    /// the fewest with which the test can reach 95% confidence.
    #[arg(long, default_value_t = 4)]
    runs: u32,
    /// Warm-up steps per run (not measured).
    #[arg(long, default_value_t = 2)]
    warmup: u32,
    /// Measured steps per run.
    #[arg(long, default_value_t = 5)]
    steps: u32,
    /// Seed for weights and synthetic data.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// libtorch intra-op threads in workers, at least 1 (default: libtorch's choice).
    #[arg(long, value_parser = clap::value_parser!(i32).range(1..))]
    threads: Option<i32>,
    /// NVML sampling period in milliseconds (CUDA).
    #[arg(long, default_value_t = 10)]
    sample_interval_ms: u64,
    /// Write the JSON report here (atomically).
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
    /// Write a markdown report here (atomically).
    #[arg(long, value_name = "PATH")]
    markdown: Option<PathBuf>,
    /// Do not draw the progress bar.
    #[arg(long)]
    quiet: bool,
}

/// Parses `10ms`, `0.5s`, `250us` or a plain number of milliseconds.
fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let s = s.trim();
    let (num, scale) = if let Some(n) = s.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = s.strip_suffix("us") {
        (n, 1e-6)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1.0)
    } else {
        (s, 1e-3)
    };
    let v: f64 = num.trim().parse().map_err(|_| format!("{s:?} is not a duration (e.g. 10ms, 0.5s)"))?;
    if !(v.is_finite() && v > 0.0) {
        return Err(format!("{s:?}: the interval must be positive"));
    }
    Ok(std::time::Duration::from_secs_f64(v * scale))
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum AbMetricArg {
    /// Steady-state step time (median per run).
    StepTime,
    /// The largest peak within a step.
    Peak,
    /// The memory left after each step: each side's leak verdict.
    Growth,
    /// Whole-process wall time.
    Wall,
    /// Peak memory of the process tree (PSS, RSS, NVML).
    Memory,
}

#[derive(clap::Args)]
struct RunArgs {
    /// Sampling period (10ms, 0.5s, 250us; a plain number is milliseconds).
    #[arg(long, default_value = "10ms", value_parser = parse_duration)]
    interval: std::time::Duration,
    /// Write the JSON report here (atomically).
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
    /// Write the summary as markdown here.
    #[arg(long, value_name = "PATH")]
    markdown: Option<PathBuf>,
    /// Put a start-up hook on the child's PYTHONPATH that reports the
    /// allocator's figures per device and every training step (an optimizer
    /// step(), else a backward(), else a top-level module forward): its
    /// time, its peak and what it leaves allocated, with a steady-state
    /// summary and a leak verdict. No change to the script.
    #[arg(long)]
    torch: bool,
    /// Leading steps left out of the steady-state summary (default: a tenth
    /// of the steps, at least 3).
    #[arg(long, value_name = "N", requires = "torch")]
    warmup_steps: Option<usize>,
    /// Smallest growth per step of the memory left after each step that is
    /// called a leak (64KiB, 1MiB, 1.5GiB; a plain number is bytes).
    #[arg(long, value_name = "SIZE", default_value = "64KiB", value_parser = parse_size, requires = "torch")]
    growth_threshold: f64,
    /// Do not reset torch's CUDA peak counters at each step's end: the
    /// script's own torch.cuda.max_memory_allocated() then stays its
    /// lifetime peak, and each step's peak is the peak so far.
    #[arg(long, requires = "torch")]
    keep_peak_stats: bool,
    /// Check the project the command runs with memlint's memory rules
    /// (ML103, ML201, ML202, ML203, ML205) and list the findings beside the
    /// figures, those that best explain what was measured first (a growing
    /// run and an ML202 site). Best with --torch.
    #[arg(long)]
    lint: bool,
    /// Draw the memory timeline as SVG here.
    #[arg(long, value_name = "PATH")]
    svg: Option<PathBuf>,
    /// Do not print the summary table.
    #[arg(long)]
    quiet: bool,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    command: Vec<String>,
}

/// Parses `64KiB`, `1MiB`, `1.5GiB`, `2MB` or a plain number of bytes.
fn parse_size(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let split = t.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let scale = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kib" => 1024.0,
        "kb" => 1e3,
        "m" | "mib" => 1024.0 * 1024.0,
        "mb" => 1e6,
        "g" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "gb" => 1e9,
        other => return Err(format!("{s:?}: unknown unit {other:?} (use B, KiB, MiB, GiB, KB, MB, GB)")),
    };
    let v: f64 = num.trim().parse().map_err(|_| format!("{s:?} is not a size (e.g. 64KiB, 1MiB)"))?;
    if !(v.is_finite() && v >= 0.0) {
        return Err(format!("{s:?}: the size must be zero or more"));
    }
    Ok(v * scale)
}

/// Parses `5%` or `5` (percent) into 0.05.
fn parse_percent(s: &str) -> Result<f64, String> {
    let t = s.trim().trim_end_matches('%');
    let v: f64 = t.parse().map_err(|_| format!("{s:?} is not a percentage (e.g. 5%)"))?;
    if !(v.is_finite() && v >= 0.0) {
        return Err(format!("{s:?}: must be a non-negative percentage"));
    }
    Ok(v / 100.0)
}

fn parse_confidence(s: &str) -> Result<f64, String> {
    let v = parse_percent(s)?;
    if v <= 0.5 || v >= 1.0 {
        return Err(format!("{s:?}: the confidence must lie between 50% and 100%"));
    }
    Ok(v)
}

#[derive(clap::Args)]
struct AbArgs {
    /// Measured runs per command (they alternate A B A B ...).
    #[arg(long, default_value_t = 5)]
    runs: u32,
    /// Unmeasured runs per command first.
    #[arg(long, default_value_t = 0)]
    warmup: u32,
    /// Sampling period of the memory sampler.
    #[arg(long, default_value = "10ms", value_parser = parse_duration)]
    interval: std::time::Duration,
    /// Time changes below this are not called (noise threshold).
    #[arg(long, default_value = "5%", value_parser = parse_percent)]
    time_threshold: f64,
    /// Memory changes below this are not called (noise threshold).
    #[arg(long, default_value = "2%", value_parser = parse_percent)]
    memory_threshold: f64,
    /// Confidence of the test and the interval.
    #[arg(long, default_value = "95%", value_parser = parse_confidence)]
    confidence: f64,
    /// Run each side under the `run --torch` hook and compare the training
    /// steps too: steady-state step time, the peak within a step, and each
    /// side's leak verdict, free of start-up time.
    #[arg(long)]
    torch: bool,
    /// What to compare, in order (comma-separated): step-time, peak, growth
    /// (these imply --torch), wall, memory. Default: wall,memory; with
    /// --torch: step-time,peak,growth,wall,memory.
    #[arg(long, value_enum, value_delimiter = ',', value_name = "METRIC")]
    metric: Vec<AbMetricArg>,
    /// Leading steps of each run left out of its steady state (default: a
    /// tenth, at least 3).
    #[arg(long, value_name = "N")]
    warmup_steps: Option<usize>,
    /// Measure what memlint's fix for this rule buys: B is the one command
    /// given, run on a copy of its project with the rule's fixes applied
    /// (unsafe ones too; the diff is shown first); A is the command as it
    /// is. The user's files are not touched. Implies --torch.
    #[arg(long, value_name = "CODE")]
    fix: Option<String>,
    /// Pass the commands' stdout/stderr through (discarded by default).
    #[arg(long)]
    show_output: bool,
    /// Keep going when a run exits non-zero.
    #[arg(long)]
    ignore_failure: bool,
    /// Write the JSON report here (atomically).
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
    /// Write the table as markdown here.
    #[arg(long, value_name = "PATH")]
    markdown: Option<PathBuf>,
    /// Command A, `---`, command B (after `--`).
    #[arg(last = true, required = true, value_name = "CMD_A --- CMD_B")]
    commands: Vec<String>,
}

#[derive(Clone, Copy, ValueEnum)]
enum ReportFormat {
    Markdown,
    Svg,
}

#[derive(clap::Args)]
struct ReportArgs {
    /// Reports written by bench, run or ab (--json).
    #[arg(required = true, value_name = "IN.json")]
    inputs: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "markdown")]
    format: ReportFormat,
    /// Combine the run reports of the nodes of one job.
    #[arg(long)]
    merge: bool,
    /// Write here (atomically) instead of stdout.
    #[arg(long, short = 'o', value_name = "PATH")]
    output: Option<PathBuf>,
}

#[derive(Clone, Copy, ValueEnum)]
enum CompareFormat {
    Table,
    Markdown,
    Json,
}

#[derive(clap::Args)]
struct CompareArgs {
    /// The reference report.
    #[arg(value_name = "BASE.json")]
    base: PathBuf,
    /// The report to judge.
    #[arg(value_name = "NEW.json")]
    new: PathBuf,
    /// Allowed slow-down (also the noise threshold of time verdicts).
    #[arg(long, default_value = "5%", value_parser = parse_percent)]
    max_time_regression: f64,
    /// Allowed memory growth (also the noise threshold of memory verdicts).
    #[arg(long, default_value = "2%", value_parser = parse_percent)]
    max_memory_regression: f64,
    /// Confidence of the tests.
    #[arg(long, default_value = "95%", value_parser = parse_confidence)]
    confidence: f64,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    format: CompareFormat,
    /// Compare reports measured on different machines (CPU model and
    /// instruction sets, GPU, driver, torch) or with different settings
    /// (batch, steps, warm-up, threads); refused otherwise (exit 2), since
    /// the difference would not be the code's.
    #[arg(long)]
    allow_different_hosts: bool,
    /// Fail when NEW (a `run --torch` report) leaks: its memory left after
    /// each step grows significantly by more than this per step (64KiB,
    /// 1MiB; a plain number is bytes).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    max_growth_per_step: Option<f64>,
    /// Which figures of two `run` reports are judged (comma-separated):
    /// wall (duration), memory (peak of the tree, NVML), step-time and peak
    /// (the steady-state steps of `run --torch` reports). Default: all that
    /// both reports have. Growth is judged by --max-growth-per-step.
    #[arg(long, value_enum, value_delimiter = ',', value_name = "METRIC")]
    metric: Vec<CompareMetricArg>,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum CompareMetricArg {
    /// Whole-process duration.
    Wall,
    /// Peak memory of the process tree (PSS or RSS, NVML).
    Memory,
    /// Steady-state step time, step by step.
    StepTime,
    /// The largest peak within a step.
    Peak,
}

struct Progress {
    bar: Option<ProgressBar>,
}

impl Observer for Progress {
    fn planned(&mut self, total: usize) {
        if let Some(b) = &self.bar {
            b.set_length(total as u64);
        }
    }
    fn starting(&mut self, label: &str, what: &str) {
        if let Some(b) = &self.bar {
            b.set_message(format!("{label}: {what}"));
        }
    }
    fn finished(&mut self, label: &str, outcome: &str) {
        if let Some(b) = &self.bar {
            if outcome != "ok" && outcome != "checked" {
                b.println(format!("{label}: {outcome}"));
            }
            b.inc(1);
        }
    }
}

fn fail(e: anyhow::Error) -> ExitCode {
    let usage = e.downcast_ref::<HostError>().is_some_and(HostError::is_usage);
    eprintln!("memprobe: error: {e:#}");
    ExitCode::from(if usage { 2 } else { 1 })
}

/// Every file the command will write, with its flag.
fn outputs(cmd: &Cmd) -> Vec<(&'static str, &PathBuf)> {
    let list: Vec<(&'static str, &Option<PathBuf>)> = match cmd {
        Cmd::Bench(a) => vec![("--json", &a.json), ("--markdown", &a.markdown)],
        Cmd::Run(a) => vec![("--json", &a.json), ("--markdown", &a.markdown), ("--svg", &a.svg)],
        Cmd::Ab(a) => vec![("--json", &a.json), ("--markdown", &a.markdown)],
        Cmd::Report(a) => vec![("--output", &a.output)],
        Cmd::Compare(_) => vec![],
    };
    list.into_iter().filter_map(|(flag, p)| p.as_ref().map(|p| (flag, p))).collect()
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Output paths are checked before any work: a job of hours must not
    // end with a report that cannot be written.
    for (flag, path) in outputs(&cli.command) {
        if let Err(e) = safe_io::check_output(path) {
            eprintln!("memprobe: error: {flag} {}: cannot write there: {e}", path.display());
            return ExitCode::from(2);
        }
    }
    match cli.command {
        Cmd::Run(args) => run_cmd(args).unwrap_or_else(fail),
        Cmd::Ab(args) => ab_cmd(args).unwrap_or_else(fail),
        Cmd::Compare(args) => compare_cmd(args),
        Cmd::Report(args) => report_cmd(args).unwrap_or_else(|e| {
            eprintln!("memprobe: error: {e:#}");
            ExitCode::from(2)
        }),
        Cmd::Bench(args) => match bench_cmd(*args) {
            Ok(code) => code,
            Err(e) => {
                let usage = e.downcast_ref::<HostError>().is_some_and(HostError::is_usage);
                eprintln!("memprobe: error: {e:#}");
                ExitCode::from(if usage { 2 } else { 1 })
            }
        },
    }
}

fn bench_cmd(a: BenchArgs) -> anyhow::Result<ExitCode> {
    let device = match a.device {
        DeviceArg::Cpu => DeviceRequest::Cpu,
        DeviceArg::Cuda => DeviceRequest::Cuda,
        DeviceArg::Auto => DeviceRequest::Auto,
    };
    let workload = match (&a.model, &a.input_shape) {
        (Some(path), Some(shape)) => WorkloadSpec::TorchScript {
            path: path.clone(),
            input_shape: shape.clone(),
            loss: match a.loss {
                LossArg::Mse => LossKind::Mse,
                LossArg::CrossEntropy => LossKind::CrossEntropy,
            },
        },
        _ => WorkloadSpec::Builtin {
            workload: match a.workload {
                WorkloadArg::Mlp => BuiltinWorkload::Mlp,
                WorkloadArg::Convnet => BuiltinWorkload::Convnet,
                WorkloadArg::Transformer => BuiltinWorkload::Transformer,
            },
            size: match a.size {
                SizeArg::Small => SizePreset::Small,
                SizeArg::Medium => SizePreset::Medium,
                SizeArg::Large => SizePreset::Large,
            },
            batch_size: a.batch_size,
        },
    };
    if a.batch_size.is_some_and(|b| b <= 0) {
        return Err(HostError::Usage("--batch-size must be positive".into()).into());
    }
    let flags = Flags {
        amp: a.amp.map(|x| match x {
            AmpArg::Bf16 => AmpDtype::Bf16,
            AmpArg::Fp16 => AmpDtype::Fp16,
        }),
        accum: a.accum,
        cudnn_benchmark: a.cudnn_benchmark,
        dynamic_shapes: a.dynamic_shapes,
        channels_last: a.channels_last,
        checkpoint: a.checkpoint,
        inplace: a.inplace,
        no_grad_eval: a.no_grad_eval,
        pin_memory: a.pin_memory,
        set_to_none: a.set_to_none,
        freeze: a.freeze,
        all: a.all,
    };
    // Installed before any work (finding the worker asks Python for its
    // torch, which takes seconds) so a Ctrl-C at any point yields a partial
    // report rather than killing memprobe.
    let interrupted = Arc::new(AtomicBool::new(false));
    {
        let flag = interrupted.clone();
        ctrlc::set_handler(move || flag.store(true, Ordering::SeqCst)).context("installing the Ctrl-C handler")?;
    }
    let worker = worker_proc::locate_worker()?;
    let opts = BenchOptions {
        workload,
        device,
        flags,
        runs: a.runs,
        warmup_steps: a.warmup,
        measured_steps: a.steps,
        seed: a.seed,
        threads: a.threads,
        sample_interval_ms: a.sample_interval_ms,
        worker,
        command: std::env::args().collect(),
    };
    let prepared = bench::prepare(opts)?;
    if let Some(note) = prepared.device_note() {
        eprintln!("memprobe: {note}");
    }
    let bar = (!a.quiet && std::io::stderr().is_terminal()).then(|| {
        let b = ProgressBar::new(0);
        b.set_style(
            ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} workers  {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        b
    });
    let mut progress = Progress { bar };
    let report = bench::run(prepared, &mut progress, &interrupted)?;
    if let Some(b) = &progress.bar {
        b.finish_and_clear();
    }

    let table = TableExporter { width: None }.render(&report)?;
    let mut out = std::io::stdout().lock();
    // A closed pipe (memprobe ... | head) is not an error worth a message.
    let _ = out.write_all(table.as_bytes());
    let mut saved = true;
    if let Some(p) = &a.json {
        saved &= save_report(p, &JsonExporter.render(&report)?, "JSON report");
    }
    if let Some(p) = &a.markdown {
        saved &= save_report(p, &MarkdownExporter.render(&report)?, "markdown report");
    }
    if !saved {
        return Ok(ExitCode::FAILURE);
    }
    if !report.complete {
        eprintln!("memprobe: interrupted: partial report written");
        return Ok(ExitCode::from(130));
    }
    Ok(ExitCode::SUCCESS)
}

fn write_report(path: &std::path::Path, text: &str, what: &str) -> anyhow::Result<()> {
    write_atomic(path, text.as_bytes()).with_context(|| format!("writing {what} {}", path.display()))
}

/// Writes a report after the work is done; when that fails (the disk
/// filled, the directory went away), the report is written to the
/// temporary directory instead and both places are named. `false` when
/// the report did not reach `path`.
fn save_report(path: &std::path::Path, text: &str, what: &str) -> bool {
    let Err(e) = write_atomic(path, text.as_bytes()) else { return true };
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("txt");
    let rescue = std::env::temp_dir().join(format!("memprobe-{}-{}.{ext}", what.replace(' ', "-"), std::process::id()));
    match safe_io::write_output(&rescue, text.as_bytes()) {
        Ok(()) => eprintln!("memprobe: error: {e}; the {what} is in {} instead", rescue.display()),
        Err(e2) => eprintln!("memprobe: error: {e}; writing it to {} failed too ({e2}): the {what} is lost", rescue.display()),
    }
    false
}

fn run_cmd(a: RunArgs) -> anyhow::Result<ExitCode> {
    let opts = memprobe_host::run::RunOptions {
        command: a.command,
        interval: a.interval,
        torch: a.torch,
        discard_output: false,
        step_settings: memprobe_report::run::StepSettings {
            warmup_steps: a.warmup_steps,
            growth_threshold_bytes: a.growth_threshold,
            keep_peak_stats: a.keep_peak_stats,
        },
        cwd: None,
    };
    // Linted before the job: a finding is of the code as it was run.
    let lint = a.lint.then(|| lint::lint_command(&opts.command));
    let mut report = match memprobe_host::run::run(&opts) {
        Ok(r) => r,
        Err(HostError::Command(m)) if m.starts_with("cannot start") => {
            eprintln!("memprobe: error: {m}");
            return Ok(ExitCode::from(memprobe_host::run::NOT_FOUND_STATUS as u8));
        }
        Err(e) => return Err(e.into()),
    };
    if let Some(mut view) = lint {
        lint::rank(&mut view, &report);
        report.lint = Some(view);
    }
    if !a.quiet {
        eprint!("{}", memprobe_report::export::run::render_run_stderr(&report));
    }
    // The job has run: whatever happens to the files, the exit status is
    // the job's, and a report that cannot go where asked goes elsewhere.
    if let Some(p) = &a.json {
        save_report(p, &serde_json::to_string_pretty(&report)?, "JSON report");
    }
    if let Some(p) = &a.markdown {
        save_report(p, &memprobe_report::export::run::render_run(&report, true), "markdown report");
    }
    if let Some(p) = &a.svg {
        let svg = memprobe_report::export::svg::run_svg(std::slice::from_ref(&report))?;
        save_report(p, &svg, "SVG timeline");
    }
    Ok(ExitCode::from((report.exit.shell_status() & 0xff) as u8))
}

/// B's side of `ab --fix`: the fixed copy of the project, the command
/// pointed at it, and what was fixed.
struct PreparedFix {
    command: Vec<String>,
    cwd: Option<PathBuf>,
    summary: memprobe_report::run::AbFix,
    #[allow(dead_code)] // held so the copy lives until the A/B is done
    mirror: mirror::Mirror,
}

fn prepare_fix(code: &str, command: &[String]) -> anyhow::Result<PreparedFix> {
    let code = code.to_ascii_uppercase();
    if memlint_linter::rule_by_code(&code).is_none() {
        return Err(HostError::Usage(format!("--fix {code}: no such memlint rule (see `memlint rules`)")).into());
    }
    if command.iter().any(|a| a == memprobe_host::ab::SEPARATOR) {
        return Err(HostError::Usage(format!(
            "--fix takes one command (B is that command on a fixed copy of its project), not two separated by {}",
            memprobe_host::ab::SEPARATOR
        ))
        .into());
    }
    let Some(script) = lint::scripts(command).into_iter().next() else {
        return Err(HostError::Usage("--fix: the command names no Python script (.py, .ipynb, or -m module)".into()).into());
    };
    let root = lint::project_root(&script);
    let mirror = mirror::Mirror::new(&root).with_context(|| format!("--fix: copying {}", root.display()))?;
    let outcome = memlint::fix(std::slice::from_ref(&mirror.root), &[code.as_str()], true)
        .with_context(|| format!("--fix {code}: applying memlint's fixes to the copy of {}", root.display()))?;
    if outcome.fixed == 0 {
        let why = if outcome.remaining > 0 {
            format!("{} {code} finding(s), none with a fix memlint can apply: {code} has no automatic fix", outcome.remaining)
        } else {
            format!("no {code} finding: nothing to fix")
        };
        return Err(HostError::Usage(format!("--fix {code} on {}: {why}", root.display())).into());
    }
    // The diff first, its paths relative to the project (`a/train.py`).
    let copy = mirror.root.display().to_string();
    let diff = outcome.diff.replace(&format!("a/{copy}/"), "a/").replace(&format!("b/{copy}/"), "b/");
    eprint!("{diff}");
    eprintln!(
        "memprobe ab --fix {code}: B runs on a copy of {} with {} fix(es) in {} file(s){}",
        root.display(),
        outcome.fixed,
        outcome.files,
        if outcome.refused.is_empty() { String::new() } else { format!("; not applied: {}", outcome.refused.join("; ")) }
    );
    // Arguments that name files of the project point into the copy; the
    // working directory too when it lies inside the project.
    let b: Vec<String> = command
        .iter()
        .enumerate()
        .map(|(i, arg)| {
            let p = std::path::Path::new(arg);
            match (i > 0 && p.exists()).then(|| mirror.map(p)).flatten() {
                Some(m) => m.display().to_string(),
                None => arg.clone(),
            }
        })
        .collect();
    let cwd = std::env::current_dir().ok().and_then(|d| mirror.map(&d));
    Ok(PreparedFix {
        command: b,
        cwd,
        summary: memprobe_report::run::AbFix {
            code,
            root: root.display().to_string(),
            fixed: outcome.fixed,
            files: outcome.files,
            diff,
        },
        mirror,
    })
}

fn ab_cmd(a: AbArgs) -> anyhow::Result<ExitCode> {
    use memprobe_report::verdict::VerdictConfig;
    // --fix: one command; B runs it on a fixed copy of its project.
    let fixed = match &a.fix {
        Some(code) => Some(prepare_fix(code, &a.commands)?),
        None => None,
    };
    let (cmd_a, cmd_b, b_cwd) = match &fixed {
        Some(f) => (a.commands.clone(), f.command.clone(), f.cwd.clone()),
        None => {
            let (x, y) = memprobe_host::ab::split_commands(&a.commands)?;
            (x, y, None)
        }
    };
    let torch = a.torch || fixed.is_some();
    let opts = memprobe_host::ab::AbOptions {
        a: cmd_a,
        b: cmd_b,
        b_cwd,
        runs: a.runs,
        warmup: a.warmup,
        interval: a.interval,
        show_output: a.show_output,
        ignore_failure: a.ignore_failure,
        time: VerdictConfig { confidence: a.confidence, threshold: a.time_threshold, ..VerdictConfig::time() },
        memory: VerdictConfig { confidence: a.confidence, threshold: a.memory_threshold, ..VerdictConfig::memory() },
        metrics: if a.metric.is_empty() {
            memprobe_host::ab::AbMetric::defaults(torch)
        } else {
            use memprobe_host::ab::AbMetric;
            a.metric
                .iter()
                .map(|m| match m {
                    AbMetricArg::StepTime => AbMetric::StepTime,
                    AbMetricArg::Peak => AbMetric::Peak,
                    AbMetricArg::Growth => AbMetric::Growth,
                    AbMetricArg::Wall => AbMetric::Wall,
                    AbMetricArg::Memory => AbMetric::Memory,
                })
                .collect()
        },
        step_settings: memprobe_report::run::StepSettings { warmup_steps: a.warmup_steps, ..Default::default() },
    };
    let total = a.runs + a.warmup;
    let mut progress = |side: &str, repeat: u32, warm: bool| {
        eprintln!(
            "memprobe ab: {} run {}/{}{}",
            side.to_uppercase(),
            repeat + 1,
            total,
            if warm { " (warm-up)" } else { "" }
        );
    };
    let mut report = memprobe_host::ab::ab(&opts, &mut progress)?;
    if let Some(f) = fixed {
        report.fix = Some(f.summary);
        // The copy goes with `f.mirror` here; the report keeps the diff.
    }
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(memprobe_report::export::run::render_ab(&report, false).as_bytes());
    let mut saved = true;
    if let Some(p) = &a.json {
        saved &= save_report(p, &serde_json::to_string_pretty(&report)?, "JSON report");
    }
    if let Some(p) = &a.markdown {
        saved &= save_report(p, &memprobe_report::export::run::render_ab(&report, true), "markdown report");
    }
    if !saved {
        return Ok(ExitCode::FAILURE);
    }
    if !report.complete {
        eprintln!("memprobe: interrupted: partial report written");
        return Ok(ExitCode::from(130));
    }
    Ok(ExitCode::SUCCESS)
}

fn read_report(p: &std::path::Path) -> Result<memprobe_report::run::AnyReport, String> {
    let text = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
    memprobe_report::run::AnyReport::from_json(&text).map_err(|e| format!("{}: {e}", p.display()))
}

fn compare_cmd(a: CompareArgs) -> ExitCode {
    use memprobe_report::compare::{compare_reports, CompareOptions};
    use memprobe_report::verdict::VerdictConfig;
    let reports = read_report(&a.base).and_then(|b| read_report(&a.new).map(|n| (b, n)));
    let (base, new) = match reports {
        Ok(x) => x,
        Err(e) => {
            eprintln!("memprobe: error: {e}");
            return ExitCode::from(2);
        }
    };
    let o = CompareOptions {
        time: VerdictConfig { confidence: a.confidence, threshold: a.max_time_regression, ..VerdictConfig::time() },
        memory: VerdictConfig { confidence: a.confidence, threshold: a.max_memory_regression, ..VerdictConfig::memory() },
        allow_different_hosts: a.allow_different_hosts,
        max_growth_per_step: a.max_growth_per_step,
        run_metrics: memprobe_report::compare::RunMetrics(a.metric.iter().fold(0, |m, x| {
            use memprobe_report::compare::RunMetrics as R;
            m | match x {
                CompareMetricArg::Wall => R::WALL,
                CompareMetricArg::Memory => R::MEMORY,
                CompareMetricArg::StepTime => R::STEP_TIME,
                CompareMetricArg::Peak => R::PEAK,
            }
        })),
    };
    let result = match compare_reports(&base, &new, &o) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("memprobe: error: cannot compare {} with {}: {e}", a.base.display(), a.new.display());
            return ExitCode::from(2);
        }
    };
    let text = match a.format {
        CompareFormat::Table => result.render(false),
        CompareFormat::Markdown => result.render(true),
        CompareFormat::Json => match serde_json::to_string_pretty(&result) {
            Ok(s) => s + "\n",
            Err(e) => {
                eprintln!("memprobe: error: {e}");
                return ExitCode::from(2);
            }
        },
    };
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
    if result.regressions.is_empty() {
        ExitCode::SUCCESS
    } else {
        eprintln!("memprobe: regression in {}", result.regressions.join(", "));
        ExitCode::from(1)
    }
}

fn report_cmd(a: ReportArgs) -> anyhow::Result<ExitCode> {
    use memprobe_report::export::run::{render_ab, render_run};
    use memprobe_report::export::svg::{bench_svg, run_svg};
    use memprobe_report::run::AnyReport;
    let mut reports = Vec::new();
    for p in &a.inputs {
        reports.push(read_report(p).map_err(anyhow::Error::msg)?);
    }
    if reports.len() > 1 && !a.merge {
        anyhow::bail!("{} reports given: --merge combines the per-node run reports of one job", reports.len());
    }
    let text = if a.merge {
        let mut runs = Vec::new();
        for (p, r) in a.inputs.iter().zip(reports) {
            match r {
                AnyReport::Run(r) => runs.push(*r),
                other => anyhow::bail!("{}: --merge combines run reports, this is a {} report", p.display(), other.kind()),
            }
        }
        match a.format {
            ReportFormat::Svg => run_svg(&runs)?,
            ReportFormat::Markdown => {
                let mut s = format!("# memprobe run, {} nodes\n\n", runs.len());
                for r in &runs {
                    s.push_str(&render_run(r, true).replacen("# memprobe run", &format!("## {}", r.host.hostname), 1));
                    s.push('\n');
                }
                s
            }
        }
    } else {
        match (reports.remove(0), a.format) {
            (AnyReport::Bench(r), ReportFormat::Svg) => bench_svg(&r)?,
            (AnyReport::Bench(r), ReportFormat::Markdown) => MarkdownExporter.render(&r)?,
            (AnyReport::Run(r), ReportFormat::Svg) => run_svg(std::slice::from_ref(&r))?,
            (AnyReport::Run(r), ReportFormat::Markdown) => render_run(&r, true),
            (AnyReport::Ab(r), ReportFormat::Markdown) => render_ab(&r, true),
            (AnyReport::Ab(r), ReportFormat::Svg) => memprobe_report::export::svg::ab_svg(&r)?,
        }
    };
    match &a.output {
        Some(p) => write_report(p, &text, "report")?,
        None => {
            let _ = std::io::stdout().lock().write_all(text.as_bytes());
        }
    }
    Ok(ExitCode::SUCCESS)
}
