use std::path::PathBuf;

/// Errors of the parent side. `Usage` errors are the caller's bad input (exit 2).
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// Bad input: an option combination that cannot run.
    #[error("{0}")]
    Usage(String),
    /// The TorchScript model could not be loaded or run.
    #[error("model {path}: {message}")]
    Model {
        /// The model file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// `--device cuda` without a usable GPU.
    #[error("{0}")]
    DeviceUnavailable(String),
    /// The `memprobe-worker` executable (the part that links libtorch) is
    /// missing or cannot start.
    #[error("{0}")]
    WorkerMissing(String),
    /// Spawning or talking to a worker process failed.
    #[error("worker process: {0}")]
    Worker(String),
    /// Starting or watching a command under `memprobe run` failed.
    #[error("{0}")]
    Command(String),
    /// JSON plan/result encoding.
    #[error("worker protocol JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// I/O.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl HostError {
    /// Whether this error is the user's bad input (maps to exit status 2).
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            HostError::Usage(_) | HostError::Model { .. } | HostError::DeviceUnavailable(_) | HostError::WorkerMissing(_)
        )
    }
}
