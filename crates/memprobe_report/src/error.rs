use std::path::PathBuf;

/// Errors raised while summarizing, rendering or writing a report.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// JSON (de)serialization failed.
    #[error("report JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// Writing the report file failed.
    #[error("writing report to {path}: {source}")]
    Write {
        /// Destination path.
        path: PathBuf,
        /// Underlying I/O error.
        source: std::io::Error,
    },
    /// A report with an unsupported schema version was read.
    #[error("unsupported report schema version {found} (this build reads {supported})")]
    SchemaVersion {
        /// Version found in the file.
        found: u32,
        /// Version this build understands.
        supported: u32,
    },
    /// The file is JSON but not a memprobe report.
    #[error("not a memprobe report: {0}")]
    NotAReport(String),
    /// Drawing a chart failed.
    #[error("drawing chart: {0}")]
    Chart(String),
    /// Formatting into a string failed.
    #[error("formatting report: {0}")]
    Fmt(#[from] std::fmt::Error),
}
