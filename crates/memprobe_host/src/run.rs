//! `memprobe run`: starts a command, samples its whole process tree until it
//! exits (host RSS per process from /proc, GPU memory per process from NVML
//! on every GPU of the node, the PyTorch allocator through the `--torch`
//! hook), passes stdin/stdout/stderr and the exit status through, forwards
//! SIGINT/SIGTERM/SIGHUP to the command and still returns a complete report.

use std::collections::HashMap;
use std::ffi::CString;
use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use memprobe_report::run::{
    ExitInfo, HostInfo, MemorySeries, ProcessSeries, RunReport, TorchDeviceSeries, TorchProcessInfo, TorchView,
};
use memprobe_report::run::StepSettings;
use memprobe_report::steps::{StepKind, StepSeries};
use memprobe_report::{SamplerCost, ToolInfo, SCHEMA_VERSION};

use crate::gpu::GpuSampler;
use crate::proctree;
use crate::HostError;

/// What `memprobe run` does.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Program and arguments.
    pub command: Vec<String>,
    /// Sampling period.
    pub interval: Duration,
    /// Install the PyTorch allocator hook in Python children.
    pub torch: bool,
    /// Send the command's stdout/stderr to /dev/null (`ab`), instead of
    /// passing them through.
    pub discard_output: bool,
    /// How the `--torch` steps are summarised.
    pub step_settings: StepSettings,
    /// Working directory of the command (memprobe's own when `None`).
    pub cwd: Option<PathBuf>,
}

/// Exit status used when the command cannot be started (as a shell: 127).
pub const NOT_FOUND_STATUS: i32 = 127;

// Last signal received and whether another process sent it (kill, SLURM)
// rather than the terminal, which delivers to the whole foreground group.
static PENDING_SIGNAL: AtomicI32 = AtomicI32::new(0);
static PENDING_FROM_PROCESS: AtomicI32 = AtomicI32::new(0);
static PENDING_SENDER: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // SI_USER (0), SI_QUEUE (-1), SI_TKILL (-6): sent by a process. The
    // terminal's Ctrl-C comes from the kernel (SI_KERNEL > 0).
    #[allow(unsafe_code)] // reading the kernel-provided siginfo in a handler.
    let code = if info.is_null() { 0 } else { unsafe { (*info).si_code } };
    #[allow(unsafe_code)] // the sender's PID, set by the kernel for SI_USER and SI_QUEUE.
    let sender = if info.is_null() || code > 0 { 0 } else { unsafe { (*info).si_pid() } };
    PENDING_SENDER.store(sender, Ordering::SeqCst);
    PENDING_FROM_PROCESS.store(i32::from(code <= 0), Ordering::SeqCst);
    PENDING_SIGNAL.store(sig, Ordering::SeqCst);
}

const FORWARDED: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// Installs the forwarding handlers; the previous ones come back on drop.
struct SignalGuard {
    old: Vec<(libc::c_int, libc::sigaction)>,
}

impl SignalGuard {
    #[allow(unsafe_code)] // sigaction with a handler that only stores atomics.
    fn install() -> SignalGuard {
        PENDING_SIGNAL.store(0, Ordering::SeqCst);
        let mut old = Vec::new();
        for sig in FORWARDED {
            unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = on_signal as *const () as usize;
                sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
                libc::sigemptyset(&mut sa.sa_mask);
                let mut prev: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(sig, &sa, &mut prev) == 0 {
                    old.push((sig, prev));
                }
            }
        }
        SignalGuard { old }
    }
}

impl Drop for SignalGuard {
    #[allow(unsafe_code)] // restoring the saved dispositions.
    fn drop(&mut self) {
        for (sig, prev) in &self.old {
            unsafe {
                libc::sigaction(*sig, prev, std::ptr::null_mut());
            }
        }
    }
}

/// The controlling terminal while memprobe's process group is its
/// foreground group.
struct ForegroundTerminal {
    fd: std::os::fd::OwnedFd,
}

impl ForegroundTerminal {
    #[allow(unsafe_code)] // open(2) of /dev/tty and tcgetpgrp(3) on it.
    fn open() -> Option<ForegroundTerminal> {
        use std::os::fd::{FromRawFd, OwnedFd};
        let fd = unsafe { libc::open(c"/dev/tty".as_ptr(), libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC) };
        if fd < 0 {
            return None;
        }
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let foreground = unsafe { libc::tcgetpgrp(std::os::fd::AsRawFd::as_raw_fd(&fd)) };
        (foreground == unsafe { libc::getpgrp() }).then_some(ForegroundTerminal { fd })
    }

    /// Makes the command's group (its PID) the terminal's foreground group,
    /// and wakes it in case it stopped reading the terminal before that.
    #[allow(unsafe_code)] // tcsetpgrp(3) and kill(2) on our own child's group.
    fn hand_to(&self, pgid: u32) -> bool {
        let fd = std::os::fd::AsRawFd::as_raw_fd(&self.fd);
        let ok = unsafe { libc::tcsetpgrp(fd, pgid as libc::pid_t) } == 0;
        if ok {
            unsafe {
                libc::kill(-(pgid as libc::pid_t), libc::SIGCONT);
            }
        }
        ok
    }

    /// Makes memprobe's group the foreground group again (SIGTTOU, which a
    /// background group gets for this, is ignored meanwhile).
    #[allow(unsafe_code)] // signal(2) and tcsetpgrp(3).
    fn take_back(&self) {
        let fd = std::os::fd::AsRawFd::as_raw_fd(&self.fd);
        unsafe {
            let previous = libc::signal(libc::SIGTTOU, libc::SIG_IGN);
            libc::tcsetpgrp(fd, libc::getpgrp());
            libc::signal(libc::SIGTTOU, previous);
        }
    }
}

/// `SIGINT` etc.
pub fn signal_name(sig: i32) -> String {
    let n = match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGTERM => "SIGTERM",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGUSR2 => "SIGUSR2",
        _ => return format!("signal {sig}"),
    };
    n.to_string()
}

/// The node: hostname, CPU, memory, OS.
pub fn host_info(driver_version: Option<String>) -> HostInfo {
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").map(|s| s.trim().to_string()).unwrap_or_default();
    let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("model name")).and_then(|l| l.split_once(':').map(|(_, v)| v.trim().to_string())))
        .unwrap_or_else(|| std::env::consts::ARCH.to_string());
    let memory_total_bytes = std::fs::read_to_string("/proc/meminfo").ok().and_then(|s| {
        s.lines()
            .find(|l| l.starts_with("MemTotal:"))
            .and_then(|l| l.split_ascii_whitespace().nth(1).and_then(|k| k.parse::<u64>().ok()))
            .map(|k| k * 1024)
    });
    let os = match std::fs::read_to_string("/proc/sys/kernel/osrelease") {
        Ok(r) => format!("{} {}", std::env::consts::OS, r.trim()),
        Err(_) => std::env::consts::OS.to_string(),
    };
    HostInfo {
        hostname,
        cpu_model,
        cpu_flags: memprobe_report::host::cpu_flags(),
        cpu_logical_cores: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        memory_total_bytes,
        os,
        driver_version,
    }
}

/// How many times as long as one read of every process's PSS the sampler
/// waits before the next (about 5% of a core at most).
const PSS_COST_FACTOR: u32 = 20;

/// The kernel's count of OOM kills that could have hit this process tree,
/// and where it was read: `oom_kill` of this cgroup's memory.events
/// (cgroup v2), else of memory.oom_control (v1), else the system-wide one
/// of /proc/vmstat.
fn oom_kills() -> Option<(u64, &'static str)> {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let (v2, v1) = parse_cgroup_paths(&cgroups);
    let candidates = [
        (v2.map(|p| format!("/sys/fs/cgroup{p}/memory.events")), "the cgroup's memory.events"),
        (v1.map(|p| format!("/sys/fs/cgroup/memory{p}/memory.oom_control")), "the cgroup's memory.oom_control"),
        (Some("/proc/vmstat".to_string()), "/proc/vmstat"),
    ];
    candidates.into_iter().find_map(|(path, source)| {
        let text = std::fs::read_to_string(path?).ok()?;
        oom_kill_count(&text).map(|n| (n, source))
    })
}

/// The cgroup v2 path and the v1 memory controller's path of a
/// /proc/PID/cgroup text.
fn parse_cgroup_paths(text: &str) -> (Option<&str>, Option<&str>) {
    let mut v2 = None;
    let mut v1 = None;
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next()) else { continue };
        if id == "0" && controllers.is_empty() {
            v2 = Some(path);
        } else if controllers.split(',').any(|c| c == "memory") {
            v1 = Some(path);
        }
    }
    (v2, v1)
}

/// The `oom_kill N` line of memory.events, memory.oom_control or /proc/vmstat.
fn oom_kill_count(text: &str) -> Option<u64> {
    text.lines().find_map(|l| l.strip_prefix("oom_kill ").and_then(|n| n.trim().parse().ok()))
}

#[allow(unsafe_code)] // clock_gettime with a zeroed out-struct.
fn thread_cpu_seconds() -> f64 {
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc == 0 {
        ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
    } else {
        0.0
    }
}

/// The `--torch` hook: a directory holding `sitecustomize.py` and the named
/// pipe the Python processes write to.
struct TorchHook {
    dir: tempfile::TempDir,
    fifo: std::fs::File,
    // Keeps the FIFO open for writing so a reader never sees end-of-file
    // between two Python processes.
    _keep: std::fs::File,
    buf: Vec<u8>,
}

const HOOK_SOURCE: &str = include_str!("sitecustomize.py");

impl TorchHook {
    #[allow(unsafe_code)] // mkfifo on a path we own.
    fn create() -> Result<TorchHook, HostError> {
        let dir = tempfile::Builder::new()
            .prefix("memprobe-torch-")
            .tempdir()
            .map_err(|e| HostError::Command(format!("--torch: creating the hook directory: {e}")))?;
        std::fs::write(dir.path().join("sitecustomize.py"), HOOK_SOURCE)
            .map_err(|e| HostError::Command(format!("--torch: writing sitecustomize.py: {e}")))?;
        let fifo_path = dir.path().join("allocator.fifo");
        let c = CString::new(fifo_path.as_os_str().as_encoded_bytes())
            .map_err(|_| HostError::Command("--torch: temporary path contains NUL".into()))?;
        if unsafe { libc::mkfifo(c.as_ptr(), 0o600) } != 0 {
            return Err(HostError::Command(format!("--torch: mkfifo {}: {}", fifo_path.display(), std::io::Error::last_os_error())));
        }
        use std::os::unix::fs::OpenOptionsExt;
        let fifo = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo_path)
            .map_err(|e| HostError::Command(format!("--torch: opening {}: {e}", fifo_path.display())))?;
        let keep = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo_path)
            .map_err(|e| HostError::Command(format!("--torch: opening {}: {e}", fifo_path.display())))?;
        Ok(TorchHook { dir, fifo, _keep: keep, buf: Vec::new() })
    }

    fn fifo_path(&self) -> PathBuf {
        self.dir.path().join("allocator.fifo")
    }

    fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Complete lines received so far.
    fn drain(&mut self) -> Vec<serde_json::Value> {
        let mut chunk = [0u8; 65536];
        loop {
            match self.fifo.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(_) => break, // WouldBlock: nothing more now
            }
        }
        let mut out = Vec::new();
        while let Some(pos) = self.buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.buf.drain(..=pos).collect();
            if let Ok(v) = serde_json::from_slice(&line) {
                out.push(v);
            }
        }
        out
    }
}

#[derive(Default)]
struct TorchCollector {
    devices: HashMap<(u32, u32), TorchDeviceSeries>,
    processes: HashMap<u32, TorchProcessInfo>,
    steps: HashMap<u32, StepSeries>,
}

impl TorchCollector {
    fn add(&mut self, msg: &serde_json::Value, start_unix: f64) {
        let Some(pid) = msg["pid"].as_u64().map(|p| p as u32) else { return };
        let t = msg["t"].as_f64().map(|t| (t - start_unix).max(0.0)).unwrap_or(0.0);
        if let Some(step) = msg.get("step") {
            self.add_step(pid, t, step);
            return;
        }
        let info = self.processes.entry(pid).or_insert(TorchProcessInfo { pid, torch_version: None, cuda: false, note: None });
        if let Some(v) = msg["torch"].as_str() {
            info.torch_version = Some(v.to_string());
        }
        info.cuda |= msg["cuda"].as_bool().unwrap_or(false);
        for d in msg["devices"].as_array().into_iter().flatten() {
            let f = |i: usize| d.get(i).and_then(|x| x.as_u64()).unwrap_or(0);
            let dev = f(0) as u32;
            let s = self.devices.entry((pid, dev)).or_insert(TorchDeviceSeries {
                pid,
                device: dev,
                allocated: MemorySeries::default(),
                reserved: MemorySeries::default(),
                peak_allocated_bytes: 0,
                peak_reserved_bytes: 0,
            });
            s.allocated.push(t, f(1));
            s.reserved.push(t, f(2));
            s.peak_allocated_bytes = s.peak_allocated_bytes.max(f(3));
            s.peak_reserved_bytes = s.peak_reserved_bytes.max(f(4));
        }
    }

    /// One step's end. A step of a higher kind than the process's series
    /// (its first backward after forwards, its first optimizer step after
    /// backwards) starts the series anew: the hook counts those from then on.
    fn add_step(&mut self, pid: u32, t: f64, step: &serde_json::Value) {
        let Some(kind) = step["kind"].as_str().and_then(StepKind::parse) else { return };
        // Per device: [index, peak allocated, allocated, peak reserved].
        let cuda_figures: Vec<[u64; 4]> = step["cuda"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|d| std::array::from_fn(|i| d.get(i).and_then(|x| x.as_u64()).unwrap_or(0)))
            .collect();
        let cuda = !cuda_figures.is_empty();
        let series = self.steps.entry(pid).or_insert_with(|| StepSeries::new(pid, kind, cuda));
        if kind < series.kind {
            return;
        }
        if kind > series.kind || (cuda && !series.cuda) {
            // A higher kind, or CUDA initialised after host-only steps: the
            // figures so far are not comparable with what follows.
            *series = StepSeries::new(pid, kind, cuda);
        }
        if series.cuda && !cuda {
            return;
        }
        series.t_s.push(t);
        series.step_s.push(step["dt"].as_f64());
        if cuda {
            series.peak_per_step &= step["cuda_peak_reset"].as_bool().unwrap_or(true);
            series.peak_bytes.push(Some(cuda_figures.iter().map(|f| f[1]).sum()));
            series.left_bytes.push(Some(cuda_figures.iter().map(|f| f[2]).sum()));
            // The hook reset the allocator's peak: keep the run's true peak.
            for [index, peak, _, reserved] in cuda_figures {
                if let Some(dev) = self.devices.get_mut(&(pid, index as u32)) {
                    dev.peak_allocated_bytes = dev.peak_allocated_bytes.max(peak);
                    dev.peak_reserved_bytes = dev.peak_reserved_bytes.max(reserved);
                }
            }
        } else {
            let reset = step["hwm_reset"].as_bool().unwrap_or(false);
            series.peak_per_step &= reset;
            series.peak_bytes.push(step["hwm"].as_u64());
            series.left_bytes.push(step["rss"].as_u64());
        }
    }

    fn finish(self) -> TorchView {
        let mut processes: Vec<TorchProcessInfo> = self.processes.into_values().collect();
        processes.sort_by_key(|p| p.pid);
        for p in &mut processes {
            p.note = match (&p.torch_version, p.cuda) {
                (None, _) => Some("this Python process never imported torch".into()),
                (Some(_), false) => Some(
                    "torch was imported but CUDA was never initialised: no allocator figures (CPU tensors live in host RSS)".into(),
                ),
                (Some(_), true) => None,
            };
        }
        let mut devices: Vec<TorchDeviceSeries> = self.devices.into_values().collect();
        devices.sort_by_key(|d| (d.pid, d.device));
        let mut steps: Vec<StepSeries> = self.steps.into_values().filter(|s| !s.is_empty()).collect();
        steps.sort_by_key(|s| s.pid);
        TorchView { devices, processes, steps }
    }
}

/// Runs the command to completion under the sampler and returns its report.
/// An error only when the command cannot be started at all.
pub fn run(opts: &RunOptions) -> Result<RunReport, HostError> {
    let Some(program) = opts.command.first() else {
        return Err(HostError::Usage("no command given: memprobe run [OPTIONS] -- CMD [ARGS...]".into()));
    };
    if opts.interval.is_zero() {
        return Err(HostError::Usage("--interval must be positive".into()));
    }
    let mut hook = if opts.torch { Some(TorchHook::create()?) } else { None };
    let gpu = GpuSampler::new();
    let (mut gpu, gpu_note) = match gpu {
        Ok(g) => (Some(g), None),
        Err(reason) => (None, Some(reason)),
    };
    let host = host_info(gpu.as_ref().and_then(GpuSampler::driver_version));

    let mut cmd = Command::new(program);
    cmd.args(&opts.command[1..]);
    if let Some(dir) = &opts.cwd {
        cmd.current_dir(dir);
    }
    if opts.discard_output {
        cmd.stdout(Stdio::null()).stderr(Stdio::null()).stdin(Stdio::null());
    }
    if let Some(h) = &hook {
        let mut pp = h.dir().as_os_str().to_os_string();
        if let Some(old) = std::env::var_os("PYTHONPATH").filter(|v| !v.is_empty()) {
            pp.push(":");
            pp.push(old);
        }
        cmd.env("PYTHONPATH", pp);
        cmd.env("MEMPROBE_TORCH_FIFO", h.fifo_path());
        cmd.env("MEMPROBE_TORCH_INTERVAL", format!("{}", opts.interval.as_secs_f64()));
        if opts.step_settings.keep_peak_stats {
            cmd.env("MEMPROBE_TORCH_RESET_PEAK", "0");
        }
    }
    // The command runs in a process group of its own, so a signal sent to
    // memprobe's group (`timeout -s INT`, `kill -INT -PGID`, a scheduler's
    // killpg) reaches memprobe alone and is forwarded once; before, it
    // reached the command twice (directly, then forwarded), which many
    // trainers read as "abort now". On a terminal where memprobe is in the
    // foreground, the command's group is made the foreground one, so Ctrl-C
    // and reads from the terminal reach the command directly.
    // Under SLURM the command stays in memprobe's group: the step daemon
    // signals the step's processes (each of them, or their group, by its
    // configuration), so the command gets its signals directly either way,
    // and memprobe does not forward them (below).
    let under_slurm = std::env::var_os("SLURM_JOB_ID").is_some() || std::env::var_os("SLURM_STEP_ID").is_some();
    {
        use std::os::unix::process::CommandExt;
        if !under_slurm {
            cmd.process_group(0);
        }
        // Out of memprobe's group, the command would outlive a memprobe
        // killed with its group (`timeout -k`, `kill -9 -PGID`): it is
        // killed when memprobe dies.
        let parent = std::process::id() as libc::pid_t;
        #[allow(unsafe_code)] // prctl(2), getppid(2) and kill(2) only, between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // memprobe died before the line above: do not run orphaned.
                if libc::getppid() != parent {
                    libc::kill(libc::getpid(), libc::SIGKILL);
                }
                Ok(())
            });
        }
    }
    let terminal = if under_slurm { None } else { ForegroundTerminal::open() };
    let signals = SignalGuard::install();
    let created_unix = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0);
    let start = Instant::now();
    let oom_before = oom_kills();
    let mut child = cmd.spawn().map_err(|e| HostError::Command(format!("cannot start {program}: {e}")))?;
    let root = child.id();
    let handed = terminal.as_ref().is_some_and(|t| t.hand_to(root));

    let mut tree_rss = MemorySeries::default();
    let mut tree_pss = MemorySeries::default();
    let mut next_pss = Instant::now();
    let mut procs: Vec<ProcessSeries> = Vec::new();
    let mut index: HashMap<u32, usize> = HashMap::new();
    let mut torch = TorchCollector::default();
    let mut forwarded = Vec::new();
    let mut last_forwarded: Option<(i32, Instant)> = None;
    let mut samples = 0u64;
    let mut sample_time = Duration::ZERO;
    let cpu0 = thread_cpu_seconds();

    let status = loop {
        // Forward a signal memprobe received; the terminal's Ctrl-C already
        // reached the command (same foreground process group).
        let sig = PENDING_SIGNAL.swap(0, Ordering::SeqCst);
        if sig != 0 {
            let from_process = PENDING_FROM_PROCESS.load(Ordering::SeqCst) == 1;
            let sender = PENDING_SENDER.load(Ordering::SeqCst);
            // SLURM's step daemon signals every process of the step (its
            // cgroup): the command has it already.
            let from_slurm = sender > 0
                && std::fs::read_to_string(format!("/proc/{sender}/comm")).is_ok_and(|c| c.trim() == "slurmstepd");
            // `timeout` sends its signal to memprobe and to its group, one
            // right after the other: one signal, forwarded once.
            let repeat = last_forwarded.is_some_and(|(s, at): (i32, Instant)| s == sig && at.elapsed() < Duration::from_millis(200));
            if from_slurm {
                forwarded.push(format!("{} (from slurmstepd, which signals every process of the step: not forwarded)", signal_name(sig)));
            } else if repeat {
                forwarded.push(format!("{} (again within 200 ms: not forwarded twice)", signal_name(sig)));
            } else {
                last_forwarded = Some((sig, Instant::now()));
                #[allow(unsafe_code)] // kill(2) on our own child's PID.
                unsafe {
                    libc::kill(root as libc::pid_t, sig);
                }
                let source = if from_process { "" } else { "from the terminal, " };
                forwarded.push(format!("{} ({source}forwarded to PID {root})", signal_name(sig)));
            }
        }
        let t0 = Instant::now();
        let t = start.elapsed().as_secs_f64();
        let pids = proctree::descendants(root);
        let mut total = 0u64;
        let mut total_pss = 0u64;
        let mut pss_complete = true;
        let mut counted = Vec::with_capacity(pids.len());
        // PSS costs a page-table walk per process: it is read at most every
        // PSS_COST_FACTOR times as long as its last read took (and never
        // more often than the interval), so it stays a small share of a
        // core on a large job; RSS is read every tick.
        let read_pss = Instant::now() >= next_pss;
        let pss_started = Instant::now();
        for &pid in &pids {
            let Some(m) = proctree::proc_mem(pid) else { continue };
            total += m.rss_bytes;
            let (pss, uss) = if read_pss { proctree::smaps_rollup(pid) } else { (None, None) };
            if read_pss {
                match pss {
                    Some(p) => {
                        total_pss += p;
                        counted.push(pid);
                    }
                    None => pss_complete = false,
                }
            }
            let i = *index.entry(pid).or_insert_with(|| {
                procs.push(ProcessSeries {
                    pid,
                    ppid: m.ppid,
                    command: proctree::cmdline(pid, 160),
                    rss: MemorySeries::default(),
                    hwm_bytes: None,
                    pss: MemorySeries::default(),
                    uss: MemorySeries::default(),
                    cpu_s: None,
                });
                procs.len() - 1
            });
            let p = &mut procs[i];
            // The same PID after exec (a launcher, a pyenv shim) runs another
            // program: re-read the command line now and then.
            if p.rss.bytes.len() % 25 == 1 {
                p.command = proctree::cmdline(pid, 160);
            }
            p.rss.push(t, m.rss_bytes);
            p.hwm_bytes = m.hwm_bytes.or(p.hwm_bytes);
            p.cpu_s = proctree::cpu_seconds(pid).or(p.cpu_s);
            if let Some(v) = pss {
                p.pss.push(t, v);
            }
            if let Some(v) = uss {
                p.uss.push(t, v);
            }
        }
        if read_pss {
            next_pss = Instant::now() + (pss_started.elapsed() * PSS_COST_FACTOR).max(opts.interval);
        }
        if !pids.is_empty() && total > 0 {
            tree_rss.push(t, total);
            // A tree sum only when every live process gave its PSS, and
            // none of them exited while the others were read: an exit
            // hands its share of the shared pages to the survivors, so one
            // read before and another after it would count those pages
            // twice.
            if read_pss && pss_complete && total_pss > 0 && counted.iter().all(|&pid| proctree::is_alive(pid)) {
                tree_pss.push(t, total_pss);
            }
        }
        if let Some(g) = gpu.as_mut() {
            g.sample(t, &pids);
        }
        if let Some(h) = hook.as_mut() {
            for msg in h.drain() {
                torch.add(&msg, created_unix);
            }
        }
        samples += 1;
        sample_time += t0.elapsed();

        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(e) => return Err(HostError::Command(format!("waiting for {program}: {e}"))),
        }
        let spent = t0.elapsed();
        if spent < opts.interval {
            std::thread::sleep(opts.interval - spent);
        }
    };
    let duration_s = start.elapsed().as_secs_f64();
    let cpu = thread_cpu_seconds() - cpu0;
    if let (true, Some(t)) = (handed, &terminal) {
        t.take_back();
    }
    drop(signals);
    // A signal that arrived in the last interval.
    let sig = PENDING_SIGNAL.swap(0, Ordering::SeqCst);
    if sig != 0 {
        forwarded.push(format!("{} (arrived as the command exited)", signal_name(sig)));
    }
    if let Some(h) = hook.as_mut() {
        // The exit-time reports of the Python processes.
        for msg in h.drain() {
            torch.add(&msg, created_unix);
        }
    }
    let exit = ExitInfo {
        code: status.code(),
        signal: status.signal(),
        signal_name: status.signal().map(signal_name),
    };
    let mut notes = vec![
        "host memory is PSS from /proc/PID/smaps_rollup per process (a page shared by n processes counts 1/n in each), summed over the live processes of the tree: the tree's footprint, read at most every 20 times as long as one read takes (a page-table walk), and dropped when a process exits during the read; RSS (VmRSS, /proc/PID/status, every sample) is the second figure, where shared pages count once per process".to_string(),
        "per-process peaks also read the kernel's high-water mark (VmHWM), which catches a peak between two samples".to_string(),
    ];
    if status.signal() == Some(libc::SIGKILL) {
        if let (Some((before, source)), Some((after, _))) = (oom_before, oom_kills()) {
            if after > before {
                notes.push(format!(
                    "killed by SIGKILL while the kernel's OOM killer acted ({source} oom_kill {before} -> {after}): most likely out of memory"
                ));
            }
        }
    }
    if tree_pss.bytes.is_empty() && !tree_rss.bytes.is_empty() {
        notes.push("PSS could not be read (/proc/PID/smaps_rollup: kernel before 4.14, or not permitted): memory figures are RSS, where shared pages count once per process".into());
    }
    if tree_rss.bytes.len() < 3 {
        notes.push(format!("the command ran {duration_s:.3} s: only {} sample(s); lower --interval for short commands", tree_rss.bytes.len()));
    }
    let torch_view = hook.map(|_| torch.finish());
    if let Some(v) = &torch_view {
        if v.processes.is_empty() {
            notes.push("--torch: no Python process loaded the hook (not a Python command, or PYTHONPATH reset by the command)".into());
        } else if v.steps.is_empty() && v.processes.iter().any(|p| p.torch_version.is_some()) {
            notes.push("--torch: no training steps seen (no optimizer step(), backward() or module forward ran)".into());
        }
        if let Some(main) = v.main_steps() {
            if !main.cuda && !main.peak_per_step {
                notes.push("--torch: the peak RSS per step could not be reset (/proc/self/clear_refs not writable): each step's host peak is the process's peak so far".into());
            }
            if main.cuda && main.peak_per_step {
                notes.push("--torch: the allocator's peak counters are reset at each step's end, so the script's own torch.cuda.max_memory_allocated() reads the peak since the last step (--keep-peak-stats leaves them alone)".into());
            }
            if main.cuda && !main.peak_per_step {
                notes.push("--torch --keep-peak-stats: each step's peak is the allocator's peak so far, not within the step".into());
            }
            let other = v.steps.iter().filter(|s| s.pid != main.pid && !s.is_empty()).count();
            if other > 0 {
                notes.push(format!(
                    "--torch: {other} other process(es) took steps too; the summary shows PID {} ({} steps); the JSON has every series",
                    main.pid,
                    main.len()
                ));
            }
        }
    }
    let mut report = RunReport {
        schema_version: SCHEMA_VERSION,
        kind: "run".into(),
        tool: ToolInfo { name: "memprobe".into(), version: env!("CARGO_PKG_VERSION").into() },
        created_unix_s: created_unix as u64,
        host,
        command: opts.command.clone(),
        interval_ms: opts.interval.as_secs_f64() * 1000.0,
        duration_s,
        exit,
        forwarded_signals: forwarded,
        tree_rss,
        tree_pss,
        processes: procs,
        gpus: gpu.map(GpuSampler::finish).unwrap_or_default(),
        gpu_note,
        torch: torch_view,
        sampler: SamplerCost {
            what: "/proc/PID/status and smaps_rollup of every process of the tree, NVML when present, the --torch pipe".into(),
            interval_ms: opts.interval.as_secs_f64() * 1000.0,
            samples,
            mean_sample_us: if samples > 0 { sample_time.as_secs_f64() * 1e6 / samples as f64 } else { 0.0 },
            cpu_fraction: if duration_s > 0.0 { cpu / duration_s } else { 0.0 },
        },
        notes,
        step_settings: opts.step_settings.clone(),
        lint: None,
        summary: None,
    };
    report.summarize();
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oom_kill_counters_and_cgroup_paths() {
        assert_eq!(oom_kill_count("low 0\nhigh 0\nmax 3\noom 2\noom_kill 2\noom_group_kill 0\n"), Some(2));
        assert_eq!(oom_kill_count("oom_kill_disable 0\nunder_oom 0\noom_kill 7\n"), Some(7));
        assert_eq!(oom_kill_count("pgfault 10\n"), None);
        let v1 = "4:memory:/job/42\n1:cpu:/\n0::/\n";
        assert_eq!(parse_cgroup_paths(v1), (Some("/"), Some("/job/42")));
        assert_eq!(parse_cgroup_paths("0::/user.slice/x.scope\n"), (Some("/user.slice/x.scope"), None));
        assert!(oom_kills().is_some(), "/proc/vmstat has the counter on Linux 4.13 and later");
    }
}
