//! Versioned report schema, statistics and exporters for `memprobe`.
//!
//! This crate never depends on libtorch: `memprobe compare`, CI gates and other
//! readers of a report must build without torch.
//!
//! Invariants:
//! - A [`Report`] carries every run's raw figures ([`RunRecord`]); summaries are
//!   derived from them by [`summarize`] and can always be recomputed, so future
//!   commands (compare, ab, report) read raw data rather than trusting summaries.
//! - Every memory or timing figure names its source (`source` fields); a figure
//!   that could not be measured is `None` together with a reason, never zero.
//! - [`SCHEMA_VERSION`] is bumped whenever a field changes meaning or is removed;
//!   adding optional fields keeps the version.
//! - Files are written atomically ([`write_atomic`]): a reader never sees a
//!   half-written report.
//!
//! ```
//! use memprobe_report::{stats::Stats};
//! let s = Stats::from_samples(&[3.0, 1.0, 2.0]).unwrap();
//! assert_eq!(s.median, 2.0);
//! ```
#![deny(missing_docs)]

pub mod compare;
mod error;
pub mod export;
pub mod host;
pub mod run;
mod schema;
pub mod stats;
pub mod steps;
mod summary;
pub mod verdict;
mod write;

pub use error::ReportError;
pub use schema::*;
pub use summary::summarize;
pub use write::write_atomic;
