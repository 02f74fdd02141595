//! Worker processes seen from the parent: finding the `memprobe-worker`
//! executable, starting one per request, reading its one JSON answer.
//!
//! Every measured run and every correctness check executes in a fresh worker
//! process, so one variant's allocator state, peak RSS or cuDNN cache never
//! leaks into another's. The request arrives as JSON on the worker's stdin;
//! one JSON [`WorkerOutput`] comes back on its stdout.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::plan::{DescribeRequest, Description, WorkerOutput, WorkerPlan, WorkerRequest};
use crate::torch_lib::{self, Resolved, WORKER_TORCH_VERSION};
use crate::HostError;

/// File name of the worker executable, looked up next to the parent.
pub const WORKER_EXE: &str = "memprobe-worker";

/// Environment variable naming the worker executable explicitly.
pub const WORKER_ENV: &str = "MEMPROBE_WORKER";

/// Environment variable for fault injection in tests: `VARIANT_ID:oom` makes
/// that variant's measuring workers request an impossible allocation (a real
/// allocator failure), `VARIANT_ID:crash` makes them abort.
pub const FAULT_ENV: &str = "MEMPROBE_FAULT";

/// Variant id passed to workers through the environment for fault injection.
pub const VARIANT_ENV: &str = "MEMPROBE_VARIANT_ID";

/// The worker executable and the libtorch it is to run against.
#[derive(Debug, Clone)]
pub struct Worker {
    /// Path of `memprobe-worker`.
    pub exe: PathBuf,
    /// The libtorch resolved for it ([`torch_lib::resolve`]).
    pub libtorch: Resolved,
}

impl Worker {
    /// A worker at `exe` with the libtorch resolved from the environment
    /// (refused when its version is not the worker's).
    pub fn new(exe: PathBuf) -> Result<Worker, HostError> {
        Ok(Worker { exe, libtorch: torch_lib::resolve()? })
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new(&self.exe);
        if let Resolved::Found(t) = &self.libtorch {
            cmd.envs(torch_lib::worker_env(t));
        }
        cmd
    }
}

/// Finds `memprobe-worker`: `$MEMPROBE_WORKER` when set, else the file next
/// to the running executable, and resolves its libtorch. The error says
/// where it looked and how to build it.
pub fn locate_worker() -> Result<Worker, HostError> {
    if let Some(p) = std::env::var_os(WORKER_ENV) {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Worker::new(p)
        } else {
            Err(HostError::WorkerMissing(format!("{WORKER_ENV}={}: no such file", p.display())))
        };
    }
    let exe = std::env::current_exe().map_err(|e| HostError::WorkerMissing(format!("locating the memprobe executable: {e}")))?;
    let dir = exe.parent().map(Path::to_path_buf).unwrap_or_default();
    let p = dir.join(WORKER_EXE);
    if p.is_file() {
        Worker::new(p)
    } else {
        Err(HostError::WorkerMissing(format!(
            "`memprobe bench` needs {WORKER_EXE}, the part of memprobe that links libtorch, and it was not found at {} \
             (build it with `. scripts/torch-env.sh && cargo build --release -p memprobe_worker`, or set {WORKER_ENV}); \
             run, ab, compare and report work without it",
            p.display()
        )))
    }
}

/// What the parent learned from one worker process.
#[derive(Debug)]
pub enum WorkerRun {
    /// The worker printed an outcome: the outcome, the process's wall time
    /// in seconds and its PID.
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
pub fn spawn_worker(worker: &Worker, plan: &WorkerPlan, variant_id: &str) -> Result<WorkerRun, HostError> {
    spawn_request(worker, &WorkerRequest::Run(plan.clone()), Some(variant_id))
}

fn spawn_request(worker: &Worker, req: &WorkerRequest, variant_id: Option<&str>) -> Result<WorkerRun, HostError> {
    let exe = &worker.exe;
    let started = Instant::now();
    let mut cmd = worker.command();
    if let Some(id) = variant_id {
        cmd.env(VARIANT_ENV, id);
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| HostError::WorkerMissing(format!("starting {}: {e}", exe.display())))?;
    let pid = child.id();
    let json = serde_json::to_vec(req)?;
    if let Some(mut stdin) = child.stdin.take() {
        // A worker that dies at start-up (missing libtorch) closes its stdin:
        // the exit status and stderr below say why, not this broken pipe.
        let _ = stdin.write_all(&json);
    }
    let output = child.wait_with_output().map_err(|e| HostError::Worker(format!("waiting for worker: {e}")))?;
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

/// Asks a worker to build the workload on the CPU and probe the machine.
/// A worker that cannot start (its libtorch missing) or rejects the input is
/// an error that says so.
pub fn describe(worker: &Worker, req: &DescribeRequest) -> Result<Description, HostError> {
    let exe = &worker.exe;
    match spawn_request(worker, &WorkerRequest::Describe(req.clone()), None)? {
        WorkerRun::Output(WorkerOutput::Described(d), _, _) => Ok(*d),
        WorkerRun::Output(WorkerOutput::Rejected { message }, _, _) => Err(HostError::Usage(message)),
        WorkerRun::Output(WorkerOutput::Failed { message }, _, _) | WorkerRun::Output(WorkerOutput::Oom { message }, _, _) => {
            Err(HostError::Worker(format!("describing the workload: {message}")))
        }
        WorkerRun::Output(other, _, _) => Err(HostError::Worker(format!("unexpected answer to describe: {other:?}"))),
        WorkerRun::Crashed { exit_status, stderr_tail } => {
            if stderr_tail.contains("error while loading shared libraries") {
                let python = match &worker.libtorch {
                    Resolved::NotFound { python: Some(p), .. } => p.display().to_string(),
                    _ => "python3".to_string(),
                };
                let install = format!(
                    "install torch {WORKER_TORCH_VERSION} into the Python you work in \
                     (`{python} -m pip install torch=={WORKER_TORCH_VERSION}`) and run memprobe with that Python active, \
                     or set LIBTORCH to an unpacked libtorch {WORKER_TORCH_VERSION}"
                );
                Err(HostError::WorkerMissing(match &worker.libtorch {
                    Resolved::Found(t) => format!(
                        "{} cannot start with the libtorch at {} ({}): {}. That torch looks incomplete: reinstall it, or {install}",
                        exe.display(),
                        t.lib_dir.display(),
                        t.source,
                        stderr_tail.trim()
                    ),
                    Resolved::NotFound { looked, .. } => format!(
                        "{} needs libtorch {WORKER_TORCH_VERSION} and cannot load one ({}; {looked}): {install}",
                        exe.display(),
                        stderr_tail.trim()
                    ),
                }))
            } else {
                Err(HostError::Worker(format!("{} died describing the workload ({exit_status}): {stderr_tail}", exe.display())))
            }
        }
    }
}
