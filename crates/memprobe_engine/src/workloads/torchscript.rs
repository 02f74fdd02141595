use std::path::{Path, PathBuf};

use tch::{nn, Device, Kind, Reduction, Tensor, TrainableCModule};

use super::{seeded, Batch, Fwd, Workload};
use crate::plan::LossKind;
use crate::EngineError;

/// A TorchScript module saved from Python (`torch.jit.script(model).save(path)`),
/// trained through `TrainableCModule`: its parameters are registered in a
/// `VarStore` and optimized like the built-ins'. The module is opaque, so it is
/// one segment and FLOPs are not counted.
pub struct TorchScriptModel {
    vs: nn::VarStore,
    module: TrainableCModule,
    path: PathBuf,
    input_shape: Vec<i64>,
    output_shape: Vec<i64>,
    loss: LossKind,
}

impl TorchScriptModel {
    /// Loads `path` on `device` and runs one forward pass to validate the input
    /// shape and learn the output shape (needed to synthesize targets).
    pub fn load(path: &Path, input_shape: Vec<i64>, loss: LossKind, device: Device, seed: u64) -> Result<Self, EngineError> {
        let model_err = |message: String| EngineError::Model { path: path.to_path_buf(), message };
        if input_shape.is_empty() || input_shape.iter().any(|&d| d <= 0) {
            return Err(EngineError::Usage(format!(
                "--input-shape must be positive dimensions with the batch first, got {input_shape:?}"
            )));
        }
        let vs = nn::VarStore::new(device);
        let mut module = TrainableCModule::load(path, vs.root()).map_err(|e| model_err(first_line(&e.to_string())))?;
        module.f_set_train().map_err(|e| model_err(first_line(&e.to_string())))?;
        seeded(seed, 0);
        let probe = Tensor::randn(input_shape.as_slice(), (Kind::Float, device));
        let out = tch::no_grad(|| module.forward_ts(&[probe]))
            .map_err(|e| model_err(format!("forward with input shape {input_shape:?} failed: {}", first_line(&e.to_string()))))?;
        let output_shape = out.size();
        if output_shape.first() != input_shape.first() {
            return Err(model_err(format!(
                "output shape {output_shape:?} does not keep the batch dimension of input {input_shape:?}"
            )));
        }
        if loss == LossKind::CrossEntropy && output_shape.len() != 2 {
            return Err(model_err(format!(
                "--loss cross-entropy needs a [batch, classes] output, got {output_shape:?}"
            )));
        }
        if vs.trainable_variables().is_empty() {
            return Err(model_err("the module has no trainable parameters".into()));
        }
        Ok(TorchScriptModel { vs, module, path: path.to_path_buf(), input_shape, output_shape, loss })
    }
}

/// The informative part of a libtorch error: TorchScript interpreter errors
/// put the real cause on a trailing `RuntimeError: ...` line.
fn first_line(s: &str) -> String {
    let first = s.lines().find(|l| !l.trim().is_empty()).unwrap_or(s).trim();
    match s.lines().rev().find(|l| l.contains("Error: ")) {
        Some(cause) if !first.contains(cause.trim()) => format!("{first} {}", cause.trim()),
        _ => first.to_string(),
    }
}

impl Workload for TorchScriptModel {
    fn name(&self) -> &'static str {
        "torchscript"
    }
    fn size_label(&self) -> String {
        self.path.display().to_string()
    }
    fn description(&self) -> String {
        format!("TorchScript module, output {:?}", self.output_shape)
    }
    fn loss_name(&self) -> &'static str {
        match self.loss {
            LossKind::Mse => "mse",
            LossKind::CrossEntropy => "cross-entropy",
        }
    }
    fn batch_size(&self) -> i64 {
        self.input_shape[0]
    }
    fn input_shape(&self, _step: usize, _dynamic: bool) -> Vec<i64> {
        self.input_shape.clone()
    }
    fn make_batch(&self, step: usize, _dynamic: bool, seed: u64) -> Batch {
        seeded(seed, step);
        let input = Tensor::randn(self.input_shape.as_slice(), (Kind::Float, Device::Cpu));
        let target = match self.loss {
            LossKind::Mse => Tensor::randn(self.output_shape.as_slice(), (Kind::Float, Device::Cpu)),
            LossKind::CrossEntropy => {
                Tensor::randint(self.output_shape[1], [self.output_shape[0]], (Kind::Int64, Device::Cpu))
            }
        };
        Batch { input, target }
    }
    fn num_segments(&self) -> usize {
        1
    }
    fn segment(&self, _i: usize, x: &Tensor, _f: Fwd) -> Tensor {
        // Shapes were validated at load; a failure here is a libtorch error
        // (e.g. out of memory), which the worker reports.
        match self.module.forward_ts(&[x]) {
            Ok(t) => t,
            Err(e) => panic!("{e}"),
        }
    }
    fn loss(&self, out: &Tensor, target: &Tensor) -> Tensor {
        match self.loss {
            LossKind::Mse => out.to_kind(Kind::Float).mse_loss(target, Reduction::Mean),
            LossKind::CrossEntropy => out.cross_entropy_loss::<Tensor>(target, None, Reduction::Mean, -100, 0.0),
        }
    }
    fn var_store(&self) -> &nn::VarStore {
        &self.vs
    }
    fn num_blocks(&self) -> usize {
        0
    }
    fn forward_flops_per_sample(&self) -> Option<f64> {
        None
    }
    fn has_batch_norm(&self) -> bool {
        // Unknown: treat as coupled so correctness checks run in eval mode.
        true
    }
    fn has_conv(&self) -> bool {
        self.input_shape.len() == 4
    }
    fn inplace_unsupported(&self) -> Option<String> {
        Some("a TorchScript module's activations are fixed in the saved graph".into())
    }
    fn checkpoint_unsupported(&self) -> Option<String> {
        Some("a TorchScript module is opaque: it cannot be split into recompute segments".into())
    }
    fn freeze_unsupported(&self) -> Option<String> {
        Some("TorchScript parameter names do not give a block order".into())
    }
    fn dynamic_unsupported(&self) -> Option<String> {
        Some("--input-shape fixes the TorchScript input shape".into())
    }
    fn set_train(&mut self, train: bool) {
        // Mode switches only fail on a broken module, which load() rejected.
        let _ = if train { self.module.f_set_train() } else { self.module.f_set_eval() };
    }
}
