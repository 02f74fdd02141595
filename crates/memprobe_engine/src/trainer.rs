//! One variant's training step (and evaluation forward), built on tch.
//!
//! The baseline is the plain PyTorch loop: zero-filled gradients, fp32, one
//! backward per step, stored activations, out-of-place activations, Adam over
//! every parameter. Each [`VariantConfig`] field switches one thing.

use tch::{COptimizer, Device, Kind, Tensor};

use crate::ffi;
use crate::plan::{AmpDtype, VariantConfig};
use crate::workloads::{Batch, Fwd, Workload};
use crate::{EngineError, ToTch};

/// PyTorch `torch.amp.GradScaler` defaults.
const INIT_SCALE: f64 = 65536.0;
const GROWTH_FACTOR: f64 = 2.0;
const BACKOFF_FACTOR: f64 = 0.5;
const GROWTH_INTERVAL: i64 = 2000;

/// Dynamic loss scaling for fp16, on the same ATen ops as PyTorch's GradScaler
/// (`_amp_foreach_non_finite_check_and_unscale_`, `_amp_update_scale_`).
pub struct GradScaler {
    scale: Tensor,
    growth_tracker: Tensor,
    /// Steps skipped because a gradient was inf/NaN.
    pub skipped_steps: u64,
}

impl GradScaler {
    fn new(device: Device) -> GradScaler {
        GradScaler {
            scale: Tensor::full([1], INIT_SCALE, (Kind::Float, device)),
            growth_tracker: Tensor::zeros([1], (Kind::Int, device)),
            skipped_steps: 0,
        }
    }

    /// Current scale factor.
    pub fn scale_value(&self) -> f64 {
        self.scale.double_value(&[0])
    }

    /// Unscales `grads` in place; returns the found-inf flag tensor.
    fn unscale(&self, grads: &mut [Tensor]) -> Result<Tensor, EngineError> {
        let mut found_inf = Tensor::zeros([1], (Kind::Float, self.scale.device()));
        // As PyTorch: reciprocal in double, then back to float.
        let inv = self.scale.to_kind(Kind::Double).reciprocal().to_kind(Kind::Float);
        if !grads.is_empty() {
            ffi::amp_unscale(grads, &mut found_inf, &inv)?;
        }
        Ok(found_inf)
    }

    fn update(&mut self, found_inf: &Tensor) {
        let _ = self.scale.internal_amp_update_scale_(
            &self.growth_tracker,
            found_inf,
            GROWTH_FACTOR,
            BACKOFF_FACTOR,
            GROWTH_INTERVAL,
        );
    }
}

/// A model, its optimizer and one variant's settings.
pub struct Trainer {
    model: Box<dyn Workload>,
    opt: COptimizer,
    /// Parameters handed to the optimizer (all, or only trainable with --freeze).
    opt_params: Vec<Tensor>,
    cfg: VariantConfig,
    device: Device,
    scaler: Option<GradScaler>,
}

/// A batch moved to the device.
pub struct DeviceBatch {
    /// Input.
    pub input: Tensor,
    /// Target.
    pub target: Tensor,
}

impl Trainer {
    /// Prepares the model for the variant: freezing, channels-last weights,
    /// optimizer, GradScaler for fp16.
    pub fn new(model: Box<dyn Workload>, cfg: VariantConfig, device: Device) -> Result<Trainer, EngineError> {
        if cfg.freeze > 0 {
            for p in model.block_parameters(cfg.freeze) {
                let _ = p.set_requires_grad(false);
            }
        }
        if cfg.channels_last {
            tch::no_grad(|| -> Result<(), EngineError> {
                for (_, mut p) in model.named_parameters() {
                    if p.dim() == 4 {
                        let cl = ffi::to_channels_last(&p)?;
                        p.set_data(&cl);
                    }
                }
                Ok(())
            })?;
        }
        let mut opt = COptimizer::adam(1e-3, 0.9, 0.999, 0.0, 1e-8, false)?;
        let mut opt_params = Vec::new();
        for (_, p) in model.named_parameters() {
            // Baseline: the optimizer gets every parameter. --freeze: only trainable ones.
            if cfg.freeze == 0 || p.requires_grad() {
                opt.add_parameters(&p, 0)?;
                opt_params.push(p);
            }
        }
        let scaler = (cfg.amp == Some(AmpDtype::Fp16)).then(|| GradScaler::new(device));
        Ok(Trainer { model, opt, opt_params, cfg, device, scaler })
    }

    /// The workload.
    pub fn model(&self) -> &dyn Workload {
        self.model.as_ref()
    }

    /// The GradScaler, for fp16.
    pub fn scaler(&self) -> Option<&GradScaler> {
        self.scaler.as_ref()
    }

    /// Moves a host batch to the device the way the variant prescribes:
    /// pageable blocking copy (baseline) or pinned non_blocking copy.
    pub fn to_device(&self, b: &Batch) -> DeviceBatch {
        let mv = |t: &Tensor| {
            if self.device == Device::Cpu {
                t.shallow_clone()
            } else if self.cfg.pin_memory {
                t.to_device_(self.device, t.kind(), true, false)
            } else {
                t.to_device(self.device)
            }
        };
        let mut input = mv(&b.input);
        if self.cfg.channels_last && input.dim() == 4 {
            // Same values, NHWC strides, as x.to(memory_format=torch.channels_last).
            if let Ok(cl) = ffi::to_channels_last(&input) {
                input = cl;
            }
        }
        DeviceBatch { input, target: mv(&b.target) }
    }

    /// Pins a host batch when the variant asks for it (CUDA only).
    pub fn prepare_host(&self, b: Batch) -> Batch {
        if self.cfg.pin_memory && self.device.is_cuda() {
            Batch { input: b.input.pin_memory(self.device), target: b.target.pin_memory(self.device) }
        } else {
            b
        }
    }

    fn fwd(&self, train: bool) -> Fwd {
        Fwd { train, inplace: self.cfg.inplace }
    }

    fn autocast(&self) -> Result<Option<ffi::AutocastGuard>, EngineError> {
        self.cfg.amp.map(|d| ffi::AutocastGuard::enter(self.device, d.tch())).transpose()
    }

    /// Forward + loss under the variant's autocast setting.
    pub fn loss(&self, x: &Tensor, y: &Tensor, train: bool) -> Result<Tensor, EngineError> {
        let _ac = self.autocast()?;
        let out = self.model.forward(x, self.fwd(train));
        Ok(self.model.loss(&out, y))
    }

    /// Backward of `loss / divisor`, scaled when a GradScaler is active.
    fn backward(&self, loss: &Tensor, divisor: f64) {
        let l = if divisor != 1.0 { loss / divisor } else { loss.shallow_clone() };
        match &self.scaler {
            Some(s) => (l * &s.scale).backward(),
            None => l.backward(),
        }
    }

    /// Forward and backward of one micro-batch; returns the detached loss.
    fn forward_backward(&self, x: &Tensor, y: &Tensor, divisor: f64, train: bool) -> Result<Tensor, EngineError> {
        let n = self.model.num_segments();
        if !self.cfg.checkpoint || n < 2 {
            let loss = self.loss(x, y, train)?;
            self.backward(&loss, divisor);
            return Ok(loss.detach());
        }
        // Activation checkpointing by hand, as torch.utils.checkpoint_sequential:
        // the body segments are grouped into ⌈√m⌉-segment chunks; the forward
        // runs under no_grad keeping only each chunk's input, then every chunk
        // is recomputed with grad in reverse order and backpropagates the
        // incoming gradient (y.backward(dy)). The head runs with grad.
        let m = n - 1;
        let g = ((m as f64).sqrt().ceil() as usize).max(1);
        let starts: Vec<usize> = (0..m).step_by(g).collect();
        let f = self.fwd(train);
        let run = |a: usize, b: usize, h: &Tensor| -> Tensor {
            let mut h = h.shallow_clone();
            for i in a..b {
                h = self.model.segment(i, &h, f);
            }
            h
        };
        let mut inputs: Vec<Tensor> = Vec::with_capacity(starts.len());
        let mut h = x.shallow_clone();
        {
            let _ac = self.autocast()?;
            let _ng = tch::no_grad_guard();
            for &a in &starts {
                inputs.push(h.shallow_clone());
                h = run(a, (a + g).min(m), &h);
            }
        }
        let last_in = h.detach().set_requires_grad(true);
        drop(h);
        let loss = {
            let _ac = self.autocast()?;
            let out = self.model.segment(m, &last_in, f);
            self.model.loss(&out, y)
        };
        self.backward(&loss, divisor);
        let mut grad = last_in.grad();
        // The head's input is no longer needed; only its gradient flows on.
        drop(last_in);
        for &a in starts.iter().rev() {
            let b = (a + g).min(m);
            // Segment k holds block k's parameters in every built-in, so with
            // --freeze K a chunk ending at or before K needs no gradient.
            if !grad.defined() || b <= self.cfg.freeze {
                break;
            }
            let chunk_in = inputs.pop().unwrap_or_else(|| x.shallow_clone());
            let needs_input_grad = a > self.cfg.freeze && a > 0 && chunk_in.is_floating_point();
            let chunk_in = chunk_in.detach().set_requires_grad(needs_input_grad);
            let y_chunk = {
                let _ac = self.autocast()?;
                run(a, b, &chunk_in)
            };
            if !y_chunk.requires_grad() {
                break;
            }
            ffi::backward_with_grad(&y_chunk, &grad)?;
            drop(y_chunk);
            grad = if needs_input_grad { chunk_in.grad() } else { Tensor::new() };
        }
        Ok(loss.detach())
    }

    /// Clears gradients: zero-filled (baseline) or set to none.
    pub fn zero_grad(&mut self) -> Result<(), EngineError> {
        for p in self.opt_params.iter_mut() {
            if self.cfg.set_to_none {
                ffi::grad_set_none(p)?;
            } else {
                p.zero_grad();
            }
        }
        Ok(())
    }

    /// Forward/backward over the batch (split into `accum` micro-batches),
    /// leaving gradients in `.grad`; returns the mean loss (detached).
    pub fn accumulate(&mut self, b: &DeviceBatch, train: bool) -> Result<Tensor, EngineError> {
        let n = self.cfg.accum.max(1);
        if n == 1 {
            return self.forward_backward(&b.input, &b.target, 1.0, train);
        }
        let xs = b.input.chunk(n as i64, 0);
        let ys = b.target.chunk(n as i64, 0);
        let mut total: Option<Tensor> = None;
        for (x, y) in xs.iter().zip(ys.iter()) {
            let l = self.forward_backward(x, y, n as f64, train)?;
            total = Some(match total {
                Some(t) => t + l,
                None => l,
            });
        }
        Ok(total.map(|t| t / n as f64).unwrap_or_default())
    }

    /// One training step: zero grads, forward/backward (accumulated), optimizer
    /// step (through the GradScaler for fp16). Returns the detached loss; the
    /// caller reads it after timing so the step is not synchronised for it.
    pub fn train_step(&mut self, b: &DeviceBatch) -> Result<Tensor, EngineError> {
        self.zero_grad()?;
        let loss = self.accumulate(b, true)?;
        if self.scaler.is_some() {
            let mut grads: Vec<Tensor> =
                self.opt_params.iter().map(|p| p.grad()).filter(|g| g.defined()).collect();
            let found_inf = match &self.scaler {
                Some(s) => s.unscale(&mut grads)?,
                None => return Err(EngineError::Torch("GradScaler vanished".into())),
            };
            // As GradScaler.step: skip the update when any gradient overflowed.
            if found_inf.double_value(&[0]) == 0.0 {
                self.opt.step()?;
            } else if let Some(s) = self.scaler.as_mut() {
                s.skipped_steps += 1;
            }
            if let Some(s) = self.scaler.as_mut() {
                s.update(&found_inf);
            }
        } else {
            self.opt.step()?;
        }
        Ok(loss)
    }

    /// Evaluation forward (eval mode), with grad enabled or under no_grad.
    /// Returns the model output.
    pub fn eval_forward(&mut self, b: &DeviceBatch, no_grad: bool) -> Result<Tensor, EngineError> {
        self.model.set_train(false);
        let out = if no_grad {
            let _g = tch::no_grad_guard();
            let _ac = self.autocast()?;
            self.model.forward(&b.input, self.fwd(false))
        } else {
            let _ac = self.autocast()?;
            self.model.forward(&b.input, self.fwd(false))
        };
        Ok(out)
    }

    /// Gradients of every parameter (sorted by name), detached copies in f64;
    /// undefined gradients become zeros.
    pub fn gradients(&self) -> Vec<Tensor> {
        self.model
            .named_parameters()
            .into_iter()
            .map(|(_, p)| {
                let g = p.grad();
                if g.defined() {
                    g.detach().to_kind(Kind::Double).copy()
                } else {
                    p.zeros_like().to_kind(Kind::Double)
                }
            })
            .collect()
    }

    /// Switches train/eval for models keeping the mode internally.
    pub fn set_train(&mut self, train: bool) {
        self.model.set_train(train);
    }

    /// Converts weights to channels-last in place (for the correctness check).
    pub fn set_channels_last(&mut self, on: bool) {
        self.cfg.channels_last = on;
    }

    /// Replaces the variant settings (keeps model and optimizer).
    pub fn set_config(&mut self, cfg: VariantConfig) {
        self.scaler = (cfg.amp == Some(AmpDtype::Fp16)).then(|| GradScaler::new(self.device));
        self.cfg = cfg;
    }

    /// Clears every parameter's gradient (set to none), for checks.
    pub fn clear_all_grads(&mut self) -> Result<(), EngineError> {
        for (_, mut p) in self.model.named_parameters() {
            ffi::grad_set_none(&mut p)?;
        }
        Ok(())
    }
}

/// sqrt(Σ|a-b|²) / sqrt(Σ|b|²) over lists of tensors (f64).
pub fn relative_error(a: &[Tensor], b: &[Tensor]) -> f64 {
    let mut num = 0.0;
    let mut den = 0.0;
    for (x, y) in a.iter().zip(b.iter()) {
        num += (x - y).square().sum(Kind::Double).double_value(&[]);
        den += y.square().sum(Kind::Double).double_value(&[]);
    }
    if den == 0.0 {
        if num == 0.0 {
            0.0
        } else {
            f64::INFINITY
        }
    } else {
        (num / den).sqrt()
    }
}
