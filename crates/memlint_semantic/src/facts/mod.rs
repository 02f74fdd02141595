//! Facts derived from the IR alone, below the walk: the view chains of
//! expressions and the pre-walk scans of bodies.

pub(crate) mod data_reads;
pub mod datasets;
pub mod pipeline;
pub(crate) mod guards;
pub(crate) mod scan;
pub mod views;

pub use guards::tests_for_the_device;
pub use scan::{sum_reduced_names, volatile_use, Volatile};
