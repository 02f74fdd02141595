use std::path::PathBuf;

/// Errors of the engine. `Usage` errors are the caller's bad input (exit 2).
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
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
    /// An error raised by libtorch.
    #[error("libtorch: {0}")]
    Torch(String),
    /// Spawning or talking to a worker process failed.
    #[error("worker process: {0}")]
    Worker(String),
    /// JSON plan/result encoding.
    #[error("worker protocol JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// I/O.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl EngineError {
    /// Whether this error is the user's bad input (maps to exit status 2).
    pub fn is_usage(&self) -> bool {
        matches!(self, EngineError::Usage(_) | EngineError::Model { .. } | EngineError::DeviceUnavailable(_))
    }
}

impl From<tch::TchError> for EngineError {
    fn from(e: tch::TchError) -> Self {
        EngineError::Torch(e.to_string())
    }
}

impl From<memprobe_host::HostError> for EngineError {
    fn from(e: memprobe_host::HostError) -> Self {
        use memprobe_host::HostError as H;
        match e {
            H::Usage(m) => EngineError::Usage(m),
            H::Model { path, message } => EngineError::Model { path, message },
            H::DeviceUnavailable(m) => EngineError::DeviceUnavailable(m),
            H::Json(j) => EngineError::Json(j),
            H::Io(io) => EngineError::Io(io),
            other => EngineError::Worker(other.to_string()),
        }
    }
}
