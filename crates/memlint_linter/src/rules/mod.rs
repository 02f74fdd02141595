//! One module per rule. Adding a rule touches its file, one line in
//! [`crate::registry`], its fixtures and its accepted snapshot.

/// ML103 data-attribute.
pub mod data_attribute;
/// ML107 data-attribute-in-setup.
pub mod data_attribute_in_setup;
/// ML401 deprecated-cuda-amp.
pub mod deprecated_cuda_amp;
/// ML201 eval-without-no-grad.
pub mod eval_without_no_grad;
/// ML101 inplace-on-leaf.
pub mod inplace_on_leaf;
/// ML202 loss-accumulated-with-graph.
pub mod loss_accumulated_with_graph;
/// ML203 view-retains-base.
pub mod view_retains_base;
/// ML204 zero-grad-set-to-none-false.
pub mod zero_grad_set_to_none_false;
/// ML205 empty-cache-in-loop.
pub mod empty_cache_in_loop;
/// ML104 accumulation-loss-not-scaled.
pub mod accumulation_loss_not_scaled;
/// ML105 missing-zero-grad.
pub mod missing_zero_grad;
/// ML106 grad-scaler-misuse.
pub mod grad_scaler_misuse;
/// ML102 inplace-on-saved-tensor.
pub mod inplace_on_saved_tensor;
/// ML304 dataloader-worker-options-without-workers.
pub mod dataloader_worker_options_without_workers;
/// ML308 frozen-params-in-optimizer.
pub mod frozen_params_in_optimizer;
/// ML402 apex-amp.
pub mod apex_amp;
/// ML306 tensor-created-then-moved.
pub mod tensor_created_then_moved;
