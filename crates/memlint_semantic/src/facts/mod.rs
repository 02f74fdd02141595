//! Facts derived from the IR alone, below the walk: the view chains of
//! expressions and the pre-walk scans of bodies.

pub mod pipeline;
pub(crate) mod scan;
pub mod views;

pub use scan::{sum_reduced_names, tests_for_the_device, volatile_use, Volatile};
