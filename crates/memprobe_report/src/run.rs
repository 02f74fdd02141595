//! Reports of `memprobe run` (one command's process tree sampled over time)
//! and `memprobe ab` (two commands run alternately). They share
//! [`SCHEMA_VERSION`] with bench reports and are told apart by `kind`.

use serde::{Deserialize, Serialize};

use crate::verdict::Comparison;
use crate::{ReportError, SamplerCost, ToolInfo, SCHEMA_VERSION};

/// The machine a `run` or `ab` report was taken on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostInfo {
    /// Node name (`uname -n`): tells per-node reports of one job apart.
    pub hostname: String,
    /// CPU model name from /proc/cpuinfo.
    pub cpu_model: String,
    /// The CPU's instruction-set extensions that decide which kernels run
    /// ([`crate::host::RECORDED_FLAGS`]); empty in older reports.
    #[serde(default)]
    pub cpu_flags: Vec<String>,
    /// Logical CPUs.
    pub cpu_logical_cores: usize,
    /// Physical memory, bytes.
    pub memory_total_bytes: Option<u64>,
    /// Kernel and OS.
    pub os: String,
    /// NVIDIA driver version, when NVML answered.
    pub driver_version: Option<String>,
}

/// How the command ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitInfo {
    /// Exit code, when it exited normally.
    pub code: Option<i32>,
    /// Signal number, when a signal killed it.
    pub signal: Option<i32>,
    /// `SIGINT`, `SIGKILL`, ...
    pub signal_name: Option<String>,
}

impl ExitInfo {
    /// The status memprobe exits with: the code, or 128 + signal as a shell does.
    pub fn shell_status(&self) -> i32 {
        match (self.code, self.signal) {
            (Some(c), _) => c,
            (None, Some(s)) => 128 + s,
            (None, None) => 1,
        }
    }
}

/// A series of memory samples: time since the command started, bytes.
///
/// A series keeps at most [`MAX_POINTS`] points: past that, it is thinned
/// (each point then stands for 2, 4, 8 ... consecutive samples and holds
/// the largest of them, at its time), so a day-long job gives a report of
/// bounded size. Peaks and their times stay exact; the count and the
/// time-weighted mean of all samples are kept in [`Thinned`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MemorySeries {
    /// Seconds since the command started.
    pub t_s: Vec<f64>,
    /// Bytes at each time.
    pub bytes: Vec<u64>,
    /// Present once the series was thinned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinned: Option<Thinned>,
    /// Running figures over every sample (not serialized).
    #[serde(skip)]
    running: Running,
}

/// How a thinned series was thinned, and the exact figures of its samples.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Thinned {
    /// Consecutive samples per point (the point holds their largest).
    pub samples_per_point: u32,
    /// Samples taken in all.
    pub samples: u64,
    /// Time-weighted mean of every sample (each holds until the next).
    pub mean_bytes: f64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Running {
    samples: u64,
    first_t: f64,
    last_t: f64,
    last_bytes: u64,
    integral: f64,
    sum: f64,
    /// Samples folded into the last point so far.
    in_point: u32,
}

/// The most points a series keeps (see [`MemorySeries`]).
pub const MAX_POINTS: usize = 10_000;

/// Peak, mean and time to peak of a series.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SeriesSummary {
    /// Largest sample.
    pub peak_bytes: u64,
    /// Time of the first largest sample, seconds since start.
    pub time_to_peak_s: f64,
    /// Time-weighted mean (each sample holds until the next).
    pub mean_bytes: f64,
    /// Number of samples.
    pub samples: usize,
}

impl MemorySeries {
    /// Appends a sample.
    pub fn push(&mut self, t_s: f64, bytes: u64) {
        let r = &mut self.running;
        if r.samples == 0 {
            r.first_t = t_s;
        } else {
            r.integral += r.last_bytes as f64 * (t_s - r.last_t);
        }
        r.samples += 1;
        r.sum += bytes as f64;
        r.last_t = t_s;
        r.last_bytes = bytes;
        let per_point = self.thinned.map_or(1, |t| t.samples_per_point);
        if per_point > 1 && r.in_point > 0 && r.in_point < per_point {
            // Into the last point: it keeps the largest sample of its run.
            r.in_point += 1;
            if let (Some(b), Some(t)) = (self.bytes.last_mut(), self.t_s.last_mut()) {
                if bytes > *b {
                    *b = bytes;
                    *t = t_s;
                }
            }
        } else {
            r.in_point = 1;
            self.t_s.push(t_s);
            self.bytes.push(bytes);
            if self.bytes.len() > MAX_POINTS {
                self.thin();
            }
        }
        if let Some(th) = &mut self.thinned {
            let r = &self.running;
            th.samples = r.samples;
            let span = r.last_t - r.first_t;
            th.mean_bytes = if span > 0.0 { r.integral / span } else { r.sum / r.samples as f64 };
        }
    }

    /// Halves the points: each pair becomes its larger sample.
    fn thin(&mut self) {
        let n = self.bytes.len().min(self.t_s.len());
        let (mut t, mut b) = (Vec::with_capacity(n / 2 + 1), Vec::with_capacity(n / 2 + 1));
        let mut i = 0;
        while i < n {
            let j = if i + 1 < n && self.bytes[i + 1] > self.bytes[i] { i + 1 } else { i };
            t.push(self.t_s[j]);
            b.push(self.bytes[j]);
            i += 2;
        }
        // A last point that stood alone keeps counting samples into it.
        let last_pair_full = n.is_multiple_of(2);
        self.t_s = t;
        self.bytes = b;
        let per_point = self.thinned.map_or(1, |t| t.samples_per_point) * 2;
        self.running.in_point = if last_pair_full { per_point } else { self.running.in_point };
        self.thinned = Some(Thinned { samples_per_point: per_point, samples: self.running.samples, mean_bytes: 0.0 });
    }

    /// Peak, mean, time to peak; `None` without samples.
    pub fn summary(&self) -> Option<SeriesSummary> {
        let n = self.bytes.len().min(self.t_s.len());
        if n == 0 {
            return None;
        }
        let mut peak = 0;
        let mut at = self.t_s[0];
        for i in 0..n {
            if self.bytes[i] > peak {
                peak = self.bytes[i];
                at = self.t_s[i];
            }
        }
        if let Some(th) = &self.thinned {
            return Some(SeriesSummary {
                peak_bytes: peak,
                time_to_peak_s: at,
                mean_bytes: th.mean_bytes,
                samples: usize::try_from(th.samples).unwrap_or(usize::MAX),
            });
        }
        let span = self.t_s[n - 1] - self.t_s[0];
        let mean = if n == 1 || span <= 0.0 {
            self.bytes[..n].iter().map(|&b| b as f64).sum::<f64>() / n as f64
        } else {
            (0..n - 1).map(|i| self.bytes[i] as f64 * (self.t_s[i + 1] - self.t_s[i])).sum::<f64>() / span
        };
        Some(SeriesSummary { peak_bytes: peak, time_to_peak_s: at, mean_bytes: mean, samples: n })
    }
}

/// One process of the sampled tree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessSeries {
    /// Process id.
    pub pid: u32,
    /// Parent process id.
    pub ppid: u32,
    /// Command line (from /proc/PID/cmdline, shortened).
    pub command: String,
    /// Host resident set size over time (/proc/PID/statm).
    pub rss: MemorySeries,
    /// The kernel's RSS high-water mark (VmHWM) at the last sample: catches a
    /// peak that fell between two samples.
    pub hwm_bytes: Option<u64>,
    /// Proportional set size over time (/proc/PID/smaps_rollup): shared
    /// pages divided among the processes sharing them. Empty in older
    /// reports and where the kernel does not give it.
    #[serde(default)]
    pub pss: MemorySeries,
    /// Unique set size (private pages) over time.
    #[serde(default)]
    pub uss: MemorySeries,
    /// CPU time used (user + system, its threads, not its children) at its
    /// last sample, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_s: Option<f64>,
}

impl ProcessSeries {
    /// Seconds between its first and last sample (plus one interval).
    pub fn lived_s(&self, interval_s: f64) -> f64 {
        match (self.rss.t_s.first(), self.rss.t_s.last()) {
            (Some(a), Some(b)) => b - a + interval_s,
            _ => 0.0,
        }
    }

    /// CPU time over its lifetime: 1.0 is one core busy all the time.
    pub fn cpu_share(&self, interval_s: f64) -> Option<f64> {
        let lived = self.lived_s(interval_s);
        self.cpu_s.filter(|_| lived > 0.0).map(|c| c / lived)
    }
}

/// One GPU of the node, sampled through NVML.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuSeries {
    /// NVML index.
    pub index: u32,
    /// Device name.
    pub name: String,
    /// Total device memory, bytes.
    pub memory_total_bytes: Option<u64>,
    /// Memory of the tree's processes on this GPU (NVML per-PID figures,
    /// summed); empty when NVML cannot attribute memory to PIDs.
    pub tree_process: MemorySeries,
    /// Per-process memory on this GPU, by PID.
    pub processes: Vec<GpuProcessSeries>,
    /// Device-level used memory (every process on the device, and the driver).
    pub device_used: MemorySeries,
    /// GPU utilisation, percent, at the device-used sample times.
    pub utilization_pct: Vec<u32>,
    /// Power draw, milliwatts, at the same times.
    pub power_mw: Vec<u32>,
    /// Energy the device used while the command ran, joules (NVML total
    /// energy counter difference).
    pub energy_j: Option<f64>,
    /// What could not be measured and why.
    pub notes: Vec<String>,
}

/// One process's memory on one GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuProcessSeries {
    /// Process id.
    pub pid: u32,
    /// NVML's used GPU memory for the PID (includes its CUDA context).
    pub used: MemorySeries,
}

/// The PyTorch caching allocator's view of one device, reported by the
/// `--torch` start-up hook in the child.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TorchDeviceSeries {
    /// Process that reported it.
    pub pid: u32,
    /// CUDA device index inside that process.
    pub device: u32,
    /// `torch.cuda.memory_allocated`.
    pub allocated: MemorySeries,
    /// `torch.cuda.memory_reserved`.
    pub reserved: MemorySeries,
    /// `torch.cuda.max_memory_allocated` at the last report.
    pub peak_allocated_bytes: u64,
    /// `torch.cuda.max_memory_reserved` at the last report.
    pub peak_reserved_bytes: u64,
}

/// What the `--torch` hook saw.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TorchView {
    /// Per process and device.
    pub devices: Vec<TorchDeviceSeries>,
    /// Processes that loaded the hook, with their torch version and what
    /// they could not see (e.g. no CUDA).
    pub processes: Vec<TorchProcessInfo>,
    /// The training steps of each process that took any (empty in older
    /// reports).
    #[serde(default)]
    pub steps: Vec<crate::steps::StepSeries>,
}

impl TorchView {
    /// The process whose steps the summary describes: the one with the most
    /// steps of the highest kind (the trainer, not a DataLoader worker or a
    /// side evaluation process).
    pub fn main_steps(&self) -> Option<&crate::steps::StepSeries> {
        self.steps.iter().filter(|s| !s.is_empty()).max_by_key(|s| (s.kind, s.len(), std::cmp::Reverse(s.pid)))
    }
}

/// One Python process that ran the hook.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TorchProcessInfo {
    /// Process id.
    pub pid: u32,
    /// `torch.__version__`, once the process imported torch.
    pub torch_version: Option<String>,
    /// Whether CUDA was initialised in the process.
    pub cuda: bool,
    /// What the hook could not see.
    pub note: Option<String>,
}

/// A `memprobe run` report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Always `"run"`.
    pub kind: String,
    /// Producer.
    pub tool: ToolInfo,
    /// Seconds since the Unix epoch when the command started.
    pub created_unix_s: u64,
    /// The machine.
    pub host: HostInfo,
    /// The command that was run.
    pub command: Vec<String>,
    /// Requested sampling period, ms.
    pub interval_ms: f64,
    /// Wall time from start to exit, seconds.
    pub duration_s: f64,
    /// How it ended.
    pub exit: ExitInfo,
    /// Signals memprobe received and forwarded to the command.
    pub forwarded_signals: Vec<String>,
    /// Host RSS summed over every live process of the tree (a page shared
    /// by n processes counts n times).
    pub tree_rss: MemorySeries,
    /// Host PSS summed over every live process of the tree: the tree's real
    /// footprint, each shared page counted once. Empty in older reports.
    #[serde(default)]
    pub tree_pss: MemorySeries,
    /// Every process seen in the tree, in order of appearance.
    pub processes: Vec<ProcessSeries>,
    /// Every GPU of the node (empty without NVML).
    pub gpus: Vec<GpuSeries>,
    /// Why there are no GPU series, when there are none.
    pub gpu_note: Option<String>,
    /// The allocator view from the `--torch` hook.
    pub torch: Option<TorchView>,
    /// The sampler's own cost.
    pub sampler: SamplerCost,
    /// Remarks.
    pub notes: Vec<String>,
    /// How steps are summarised (warm-up, growth threshold).
    #[serde(default)]
    pub step_settings: StepSettings,
    /// memlint's memory findings on the project the command ran
    /// (`run --lint`), ranked by how well each explains the figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lint: Option<LintView>,
    /// What the summary table shows, as figures ([`RunReport::summarize`]).
    /// Absent in older reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<RunSummary>,
}

impl RunReport {
    /// Peak host RSS of the tree: the largest sampled sum, or the largest
    /// single process's kernel high-water mark (VmHWM) if that is higher.
    /// Both are lower bounds of the true tree peak; VmHWM catches a
    /// short-lived peak that fell between two samples.
    pub fn peak_rss_bytes(&self) -> Option<u64> {
        let sampled = self.tree_rss.summary().map(|s| s.peak_bytes);
        let hwm = self.processes.iter().filter_map(|p| p.hwm_bytes).max();
        match (sampled, hwm) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }

    /// Fills [`RunReport::summary`] from the series.
    pub fn summarize(&mut self) {
        self.summary = Some(RunSummary {
            duration_s: self.duration_s,
            exit_status: self.exit.shell_status(),
            peak_pss_bytes: self.peak_pss_bytes(),
            peak_rss_bytes: self.peak_rss_bytes(),
            rows: crate::export::run::run_rows(self),
            steps: self.step_summary(),
        });
    }

    /// The steady-state summary of the main process's steps, with the
    /// settings the run was made with.
    pub fn step_summary(&self) -> Option<crate::steps::StepSummary> {
        let series = self.torch.as_ref()?.main_steps()?;
        Some(series.summarize(self.step_settings.warmup_steps, self.step_settings.growth_threshold_bytes))
    }

    /// Peak host PSS of the tree (the largest sampled sum): its memory
    /// footprint with shared pages counted once. `None` when PSS was not
    /// sampled (an older report, a kernel without smaps_rollup).
    pub fn peak_pss_bytes(&self) -> Option<u64> {
        self.tree_pss.summary().map(|s| s.peak_bytes)
    }

    /// The headline memory figure and its name: peak tree PSS when it was
    /// sampled, else peak tree RSS.
    pub fn peak_memory(&self) -> Option<(u64, &'static str)> {
        match self.peak_pss_bytes() {
            Some(p) => Some((p, "peak PSS (tree)")),
            None => self.peak_rss_bytes().map(|r| (r, "peak RSS (tree)")),
        }
    }
}

/// memlint's findings beside a run's figures (`run --lint`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LintView {
    /// The directory that was linted (the project around the script).
    pub root: String,
    /// The scripts the command runs.
    pub scripts: Vec<String>,
    /// The rules asked for.
    pub rules: Vec<String>,
    /// The findings, best explanation first.
    pub findings: Vec<LintFinding>,
    /// Why nothing was linted, or what went wrong.
    pub note: Option<String>,
}

/// One memlint finding, with what in the run it would explain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LintFinding {
    /// Rule code (`ML202`).
    pub code: String,
    /// Rule name.
    pub name: String,
    /// File, as memlint shows it.
    pub path: String,
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// The finding's message.
    pub message: String,
    /// What measured in this run the finding would explain, when it
    /// explains anything.
    pub explains: Option<String>,
    /// How well: 3 the finding's hazard is what the figures show (an ML202
    /// site and a growing run), 2 it may be, 1 nothing measured points at it.
    pub strength: u8,
}

/// How a run's steps are summarised.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepSettings {
    /// Leading steps excluded as warm-up (`None`: a tenth, at least 3).
    pub warmup_steps: Option<usize>,
    /// Smallest growth of the memory left after each step that is called a
    /// leak, bytes per step.
    pub growth_threshold_bytes: f64,
    /// Leave torch's CUDA peak counters alone (`--keep-peak-stats`).
    #[serde(default)]
    pub keep_peak_stats: bool,
}

impl Default for StepSettings {
    fn default() -> StepSettings {
        StepSettings { warmup_steps: None, growth_threshold_bytes: StepSettings::DEFAULT_GROWTH_THRESHOLD, keep_peak_stats: false }
    }
}

impl StepSettings {
    /// 64 KiB per step: below it, a host RSS series moves with allocator
    /// noise; a loss kept with its graph retains megabytes per step.
    pub const DEFAULT_GROWTH_THRESHOLD: f64 = 65536.0;
}

/// One row of the `run` summary table, as figures (`None`: not measured).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SummaryRow {
    /// What the row measures.
    pub what: String,
    /// Largest sample, bytes.
    pub peak_bytes: Option<u64>,
    /// Time-weighted mean, bytes.
    pub mean_bytes: Option<f64>,
    /// Seconds from the start to the first largest sample.
    pub time_to_peak_s: Option<f64>,
    /// The row's remark.
    pub note: String,
}

/// The figures the `run` summary shows, so that a script does not have to
/// recompute them from the series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// Wall time, seconds.
    pub duration_s: f64,
    /// The status memprobe exits with.
    pub exit_status: i32,
    /// Peak tree PSS (the headline figure), when sampled.
    pub peak_pss_bytes: Option<u64>,
    /// Peak tree RSS (with the largest single VmHWM).
    pub peak_rss_bytes: Option<u64>,
    /// Every row of the table.
    pub rows: Vec<SummaryRow>,
    /// The training steps of the main process (`--torch`), steady state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<crate::steps::StepSummary>,
}

/// Which kind of report a file holds.
#[derive(Debug, Clone, PartialEq)]
pub enum AnyReport {
    /// `memprobe bench`.
    Bench(Box<crate::Report>),
    /// `memprobe run`.
    Run(Box<RunReport>),
    /// `memprobe ab`.
    Ab(Box<AbReport>),
}

impl AnyReport {
    /// Parses any memprobe report, rejecting other schema versions and
    /// unknown kinds with a clear error.
    pub fn from_json(text: &str) -> Result<AnyReport, ReportError> {
        #[derive(Deserialize)]
        struct Probe {
            schema_version: Option<u32>,
            kind: Option<String>,
        }
        let probe: Probe = serde_json::from_str(text)?;
        let Some(found) = probe.schema_version else {
            return Err(ReportError::NotAReport("no schema_version field".into()));
        };
        if found != SCHEMA_VERSION {
            return Err(ReportError::SchemaVersion { found, supported: SCHEMA_VERSION });
        }
        match probe.kind.as_deref() {
            None | Some("bench") => Ok(AnyReport::Bench(Box::new(serde_json::from_str(text)?))),
            Some("run") => Ok(AnyReport::Run(Box::new(serde_json::from_str(text)?))),
            Some("ab") => Ok(AnyReport::Ab(Box::new(serde_json::from_str(text)?))),
            Some(other) => Err(ReportError::NotAReport(format!("unknown report kind {other:?}"))),
        }
    }

    /// `bench`, `run` or `ab`.
    pub fn kind(&self) -> &'static str {
        match self {
            AnyReport::Bench(_) => "bench",
            AnyReport::Run(_) => "run",
            AnyReport::Ab(_) => "ab",
        }
    }
}

/// One run of one side of an A/B.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AbRun {
    /// `a` or `b`.
    pub side: String,
    /// Repeat index.
    pub repeat: u32,
    /// Wall time, seconds.
    pub wall_s: f64,
    /// Peak host RSS of the tree ([`RunReport::peak_rss_bytes`]).
    pub peak_rss_bytes: u64,
    /// Peak host PSS of the tree ([`RunReport::peak_pss_bytes`]), when sampled.
    #[serde(default)]
    pub peak_pss_bytes: Option<u64>,
    /// Peak of the tree's summed NVML process memory over all GPUs, when measured.
    pub peak_gpu_bytes: Option<u64>,
    /// How it ended.
    pub exit: ExitInfo,
    /// The run's steady-state steps (`ab --torch`), when it took any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<crate::steps::StepSummary>,
}

/// A `memprobe ab` report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AbReport {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Always `"ab"`.
    pub kind: String,
    /// Producer.
    pub tool: ToolInfo,
    /// Seconds since the Unix epoch.
    pub created_unix_s: u64,
    /// The machine.
    pub host: HostInfo,
    /// Command A.
    pub a: Vec<String>,
    /// Command B.
    pub b: Vec<String>,
    /// Runs per side requested.
    pub runs: u32,
    /// Sampling period, ms.
    pub interval_ms: f64,
    /// Every run, in the order it ran (A B A B ...).
    pub results: Vec<AbRun>,
    /// B compared with A, one entry per metric.
    pub comparisons: Vec<Comparison>,
    /// False when interrupted before every run finished.
    pub complete: bool,
    /// Remarks.
    pub notes: Vec<String>,
    /// Each side's leak verdict over its runs (`A: grows 35.1 MiB per step
    /// in 4 of 4 runs (median slope)`), with the growth metric.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub growth: Vec<String>,
    /// `ab --fix`: B is A run on a copy of its project with these fixes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fix: Option<AbFix>,
}

/// The fixes `ab --fix` applied to B's copy of the project.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AbFix {
    /// The rule whose fixes were applied.
    pub code: String,
    /// The project that was copied.
    pub root: String,
    /// Findings fixed.
    pub fixed: usize,
    /// Files changed.
    pub files: usize,
    /// The unified diff of the copy against the project.
    pub diff: String,
}

impl AbReport {
    /// Runs of one side.
    pub fn side(&self, side: &str) -> impl Iterator<Item = &AbRun> {
        let side = side.to_string();
        self.results.iter().filter(move |r| r.side == side)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_summary_is_time_weighted() {
        let mut s = MemorySeries::default();
        s.push(0.0, 100);
        s.push(1.0, 300);
        s.push(3.0, 300);
        let x = s.summary().unwrap();
        assert_eq!(x.peak_bytes, 300);
        assert_eq!(x.time_to_peak_s, 1.0);
        // 100 for 1 s, 300 for 2 s, over 3 s
        assert!((x.mean_bytes - 700.0 / 3.0).abs() < 1e-9);
        assert!(MemorySeries::default().summary().is_none());
    }

    #[test]
    fn a_long_series_is_thinned_with_its_peak_and_mean_exact() {
        let mut s = MemorySeries::default();
        let n = 1_000_000u64;
        let (mut integral, mut last) = (0.0, 0u64);
        for i in 0..n {
            let b = if i == 777_777 { 5_000 } else { 1_000 + (i % 100) };
            if i > 0 {
                integral += last as f64 * 0.01;
            }
            last = b;
            s.push(i as f64 * 0.01, b);
        }
        assert!(s.bytes.len() <= MAX_POINTS, "{} points", s.bytes.len());
        let x = s.summary().unwrap();
        assert_eq!(x.peak_bytes, 5_000);
        assert!((x.time_to_peak_s - 7_777.77).abs() < 1e-6, "{}", x.time_to_peak_s);
        assert_eq!(x.samples, n as usize);
        let exact = integral / ((n - 1) as f64 * 0.01);
        assert!((x.mean_bytes - exact).abs() < 1e-6 * exact, "{} vs {exact}", x.mean_bytes);
        // The report keeps what the summary needs.
        let back: MemorySeries = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(back.summary().unwrap(), x);
        assert!(back.thinned.unwrap().samples_per_point >= 128);
    }

    #[test]
    fn tree_peak_takes_a_process_high_water_mark_between_samples() {
        let mut s = MemorySeries::default();
        s.push(0.0, 100);
        s.push(0.01, 120);
        let p = |hwm| ProcessSeries {
            pid: 1,
            ppid: 0,
            command: "x".into(),
            rss: s.clone(),
            hwm_bytes: hwm,
            pss: MemorySeries::default(),
            uss: MemorySeries::default(),
            cpu_s: None,
        };
        let mut r: RunReport = serde_json::from_str(include_str!("../tests/golden/run-minimal.json")).unwrap();
        r.tree_rss = s.clone();
        r.processes = vec![p(Some(500))];
        assert_eq!(r.peak_rss_bytes(), Some(500));
        r.processes = vec![p(None)];
        assert_eq!(r.peak_rss_bytes(), Some(120));
    }

    #[test]
    fn exit_status_follows_the_shell() {
        assert_eq!(ExitInfo { code: Some(3), signal: None, signal_name: None }.shell_status(), 3);
        assert_eq!(ExitInfo { code: None, signal: Some(2), signal_name: Some("SIGINT".into()) }.shell_status(), 130);
    }

    #[test]
    fn other_schema_versions_and_kinds_are_rejected() {
        let e = AnyReport::from_json(r#"{"schema_version": 7, "kind": "run"}"#).unwrap_err();
        assert!(e.to_string().contains("schema version 7"), "{e}");
        let e = AnyReport::from_json(r#"{"schema_version": 1, "kind": "flamegraph"}"#).unwrap_err();
        assert!(e.to_string().contains("flamegraph"), "{e}");
        let e = AnyReport::from_json(r#"{"hello": 1}"#).unwrap_err();
        assert!(e.to_string().contains("schema_version"), "{e}");
    }
}
