//! Facts derived from the IR alone, below the walk: the view chains of
//! expressions and the pre-walk scans of bodies.

pub(crate) mod data_reads;
pub mod datasets;
pub mod pipeline;
pub(crate) mod guards;
pub(crate) mod scan;
pub mod views;

pub use guards::tests_for_the_device;

/// The most iterations a loop counted or listed as a literal (`range(10)`,
/// `[0.0, 0.5, 2.0]`, `if j >= 9: break`) runs and still counts as a few:
/// its body runs about as often as the code around it.
pub const FEW_ITERATIONS: i64 = 16;
pub use scan::{sum_reduced_names, volatile_use, Volatile};
