//! Models trained by the bench: built-ins with counted FLOPs, and TorchScript.
//!
//! A workload is a chain of *segments* (the unit of activation checkpointing)
//! followed by a loss. Its parameters live in a `VarStore`; built-in parameter
//! names start with `b{k}.` for freezable block `k`, so `--freeze K` can find
//! the first K blocks.

mod convnet;
mod mlp;
mod torchscript;
mod transformer;

use tch::{nn, Device, Tensor};

use crate::plan::{BuiltinWorkload, WorkloadSpec};
use crate::EngineError;

pub use convnet::ConvNet;
pub use mlp::Mlp;
pub use torchscript::TorchScriptModel;
pub use transformer::Transformer;

/// Forward options.
#[derive(Debug, Clone, Copy)]
pub struct Fwd {
    /// Training mode (batch norm uses batch statistics).
    pub train: bool,
    /// Use in-place activations.
    pub inplace: bool,
}

/// One batch (on the host until the runner moves it).
pub struct Batch {
    /// Model input.
    pub input: Tensor,
    /// Loss target.
    pub target: Tensor,
}

/// A trainable model on synthetic data.
pub trait Workload {
    /// Name (`mlp`, ...).
    fn name(&self) -> &'static str;
    /// Size label (preset or path).
    fn size_label(&self) -> String;
    /// One-line architecture description.
    fn description(&self) -> String;
    /// Loss name.
    fn loss_name(&self) -> &'static str;
    /// Samples per optimizer step.
    fn batch_size(&self) -> i64;
    /// Input shape of the batch used for step `step` (changes when `dynamic`).
    fn input_shape(&self, step: usize, dynamic: bool) -> Vec<i64>;
    /// A deterministic synthetic batch on the CPU for `step`.
    fn make_batch(&self, step: usize, dynamic: bool, seed: u64) -> Batch;
    /// Number of checkpoint segments.
    fn num_segments(&self) -> usize;
    /// Runs segment `i`.
    fn segment(&self, i: usize, x: &Tensor, f: Fwd) -> Tensor;
    /// Mean loss of `out` against `target`.
    fn loss(&self, out: &Tensor, target: &Tensor) -> Tensor;
    /// The parameters.
    fn var_store(&self) -> &nn::VarStore;
    /// Number of freezable blocks.
    fn num_blocks(&self) -> usize;
    /// Model FLOPs of one forward pass over one sample at the default shape.
    fn forward_flops_per_sample(&self) -> Option<f64>;
    /// Whether the model has batch norm (couples the samples of a batch).
    fn has_batch_norm(&self) -> bool {
        false
    }
    /// Whether the model has 2-D convolutions (channels-last, cuDNN benchmark).
    fn has_conv(&self) -> bool {
        false
    }
    /// Why in-place activations do not apply, if they do not.
    fn inplace_unsupported(&self) -> Option<String> {
        None
    }
    /// Why checkpointing does not apply, if it does not.
    fn checkpoint_unsupported(&self) -> Option<String> {
        None
    }
    /// Why freezing does not apply, if it does not.
    fn freeze_unsupported(&self) -> Option<String> {
        None
    }
    /// Why dynamic shapes do not apply, if they do not.
    fn dynamic_unsupported(&self) -> Option<String> {
        None
    }
    /// Switches train/eval mode for models that keep it internally.
    fn set_train(&mut self, _train: bool) {}

    /// Full forward pass.
    fn forward(&self, x: &Tensor, f: Fwd) -> Tensor {
        let mut h = self.segment(0, x, f);
        for i in 1..self.num_segments() {
            h = self.segment(i, &h, f);
        }
        h
    }

    /// Parameters sorted by name (a stable order for comparing gradients).
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        let mut v: Vec<(String, Tensor)> = self.var_store().variables().into_iter().collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    /// Number of parameter elements.
    fn parameter_count(&self) -> u64 {
        self.named_parameters().iter().map(|(_, t)| t.numel() as u64).sum()
    }

    /// Parameters of the first `k` blocks (names starting `b{i}.`, i < k).
    fn block_parameters(&self, k: usize) -> Vec<Tensor> {
        self.named_parameters()
            .into_iter()
            .filter(|(n, _)| {
                n.strip_prefix('b')
                    .and_then(|r| r.split('.').next())
                    .and_then(|i| i.parse::<usize>().ok())
                    .is_some_and(|i| i < k)
            })
            .map(|(_, t)| t)
            .collect()
    }
}

/// Builds the workload of `spec` on `device`, weights drawn from `seed`.
pub fn build(spec: &WorkloadSpec, device: Device, seed: u64) -> Result<Box<dyn Workload>, EngineError> {
    tch::manual_seed(seed as i64);
    Ok(match spec {
        WorkloadSpec::Builtin { workload, size, batch_size } => match workload {
            BuiltinWorkload::Mlp => Box::new(Mlp::new(*size, *batch_size, device)),
            BuiltinWorkload::Convnet => Box::new(ConvNet::new(*size, *batch_size, device)),
            BuiltinWorkload::Transformer => Box::new(Transformer::new(*size, *batch_size, device)),
        },
        WorkloadSpec::TorchScript { path, input_shape, loss } => {
            Box::new(TorchScriptModel::load(path, input_shape.clone(), *loss, device, seed)?)
        }
    })
}

/// A seeded generator so data does not depend on how many random numbers the
/// model initialisation consumed.
pub(crate) fn seeded(seed: u64, step: usize) {
    tch::manual_seed((seed.wrapping_mul(1_000_003).wrapping_add(step as u64 + 1) & 0x7fff_ffff_ffff) as i64);
}

/// Applies ReLU, in place when asked (autograd keeps the result, not the input).
pub(crate) fn relu(mut x: Tensor, inplace: bool) -> Tensor {
    if inplace {
        let _ = x.relu_();
        x
    } else {
        x.relu()
    }
}
