//! Facts derived from the IR alone, below the walk: the view chains of
//! expressions and the pre-walk scans of bodies.

pub(crate) mod backward;
pub mod data_reads;
pub mod datasets;
mod items;
pub(crate) mod moves;
pub mod pipeline;
pub(crate) mod guards;
pub(crate) mod scan;
pub mod unfreeze;
pub mod views;

pub use guards::tests_for_the_device;
pub use scan::stops_after_a_few;

/// The most iterations a loop counted or listed as a literal (`range(10)`,
/// `[0.0, 0.5, 2.0]`, `if j >= 9: break`) runs and still counts as a few:
/// its body runs about as often as the code around it.
pub const FEW_ITERATIONS: i64 = 16;

/// The most steps a training loop counted in the code (`for i in
/// range(grad_steps):` with `grad_steps = 30`) runs and still counts as a
/// demo (a few gradient steps on a latent, a short warm-up): what it keeps
/// or waits for each step is paid at most that many times.
pub const DEMO_STEPS: i64 = 50;
pub use backward::{backward_inputs, clips_gradients, surely_backpropagates};
pub use scan::{sum_reduced_names, volatile_use, Volatile};
