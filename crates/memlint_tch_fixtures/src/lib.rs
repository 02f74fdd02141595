//! memlint's Rust fixtures, compiled against the pinned tch (0.24.0).
//!
//! Each fixture in `fixtures/rust/` is linted by memlint's snapshot tests
//! as it stands; here the same file is a module of this crate, so a
//! fixture that stops compiling against tch fails the build, and
//! `tests/prove.rs` runs its cases on the CPU: a flagged case shows the
//! hazard its rule describes, a near miss runs clean.
#![allow(dead_code, missing_docs, clippy::unwrap_used)]

#[path = "../../../fixtures/rust/ML101_inplace_on_leaf.rs"]
pub mod ml101;
#[path = "../../../fixtures/rust/ML105_missing_zero_grad.rs"]
pub mod ml105;
#[path = "../../../fixtures/rust/ML201_eval_without_no_grad.rs"]
pub mod ml201;
#[path = "../../../fixtures/rust/ML202_loss_accumulated_with_graph.rs"]
pub mod ml202;
#[path = "../../../fixtures/rust/ML301_cudnn_benchmark_dynamic_shapes.rs"]
pub mod ml301;
#[path = "../../../fixtures/rust/ML305_host_sync_in_loop.rs"]
pub mod ml305;
#[path = "../../../fixtures/rust/ML306_tensor_created_then_moved.rs"]
pub mod ml306;
#[path = "../../../fixtures/rust/ML103_data_attribute.rs"]
pub mod ml103;
#[path = "../../../fixtures/rust/ML203_view_retains_base.rs"]
pub mod ml203;
#[path = "../../../fixtures/rust/ML107_data_attribute_in_setup.rs"]
pub mod ml107;
#[path = "../../../fixtures/rust/ML301_fixed_shapes.rs"]
pub mod ml301_fixed_shapes;
#[path = "../../../fixtures/rust/ML301_multi_scale.rs"]
pub mod ml301_multi_scale;
