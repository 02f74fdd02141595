use memlint_semantic::api::nn;
use memlint_semantic::ir::{Expr, ExprKind, StmtKind};

use crate::{declare_rule, Checker, Rule, RuleMeta};

declare_rule! {
    /// ## What it does
    /// Flags forward passes (`model(x)`, `model.forward(x)`, or a call of
    /// a project helper that runs the model once per call and trains
    /// nothing: `self._process_one_batch(x, y)`, shared with the training
    /// loop; not one that runs it with grad only under `if
    /// model.training:`) with autograd enabled in evaluation over data: in a loop over a loader, a dataset or
    /// batches, or a comprehension over one, or in a decoding loop that
    /// feeds a model's output back into it (`h = self.decoder(enc, h)` in
    /// `for t in range(steps):`, a graph that grows with every step), in
    /// evaluation code. Evaluation code is: what follows
    /// `model.eval()` in the same function, a function named like
    /// validate/validation/evaluate/eval/test/predict/inference, a loop over
    /// a loader whose name says val/valid/test/eval, or a function that
    /// sets the train mode from a flag (`net.train(mode=train_model)`), or
    /// runs its `backward()` only under one (`if train: loss.backward()`,
    /// or a mode, `if mode == "train":`), that a caller passes `False` (or
    /// an evaluation mode, `mode="eval"`, `"val"`, `"test"`; or `True` to a
    /// flag that says evaluation, `if not cross_valid: loss.backward()`
    /// with `cross_valid=True`); in Rust, a `model.forward_t(xs, false)` (the
    /// train flag off) is evaluation by itself. So is the evaluation phase
    /// of a loop over phases (`for phase in ["train", "val"]:` whose body
    /// calls `backward()` only under `if phase == "train":`): a forward
    /// over `loaders[phase]` outside every test of `phase`, grad not set
    /// from the phase (`with torch.set_grad_enabled(phase == "train"):`),
    /// runs with grad on when validating. A `backward()` in the same region makes it
    /// training (or adversarial evaluation) and the forward is not reported:
    /// in the enclosing loops up to the evaluation loop, or, outside every
    /// loop, in the function outside its loops. So does a loop that runs an
    /// adversarial attack from a library or helper (`adversary.perturb(x,
    /// y)`, `pgd_attack(model, x, y)`: a call named for perturbing or
    /// attacking), whose gradients need autograd on. An evaluation loop that
    /// follows a training loop in the same function is still evaluation,
    /// and so is the code from `model.eval()` to `model.train()` in an
    /// epoch loop whose batch loop trained before it (sampling a GAN's
    /// generator each epoch), unless a `backward()` follows in the same
    /// iteration (features computed in eval mode and then trained on).
    ///
    /// ## Why is this bad?
    /// With grad enabled, every forward pass records the autograd graph and
    /// keeps the activations that backward would need, although evaluation
    /// never calls backward: activation memory of a whole forward pass stays
    /// allocated for each batch, and the recording itself costs time.
    /// `model.eval()` does not turn autograd off; it only switches dropout and
    /// batch-norm behaviour (tch: `forward_t(xs, false)`). memprobe's `--no-grad-eval` variant measures the
    /// difference on a real model.
    ///
    /// ## Example
    /// ```python
    /// def evaluate(model, val_loader):
    ///     model.eval()
    ///     for x, y in val_loader:
    ///         out = model(x)
    /// ```
    ///
    /// ```rust,ignore
    /// for (xs, ys) in m.test_iter(256) {
    ///     let acc = net.forward_t(&xs, false).accuracy_for_logits(&ys);
    /// }
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// @torch.no_grad()
    /// def evaluate(model, val_loader):
    ///     model.eval()
    ///     for x, y in val_loader:
    ///         out = model(x)
    /// ```
    ///
    /// ```rust,ignore
    /// tch::no_grad(|| {
    ///     for (xs, ys) in m.test_iter(256) {
    ///         let acc = net.forward_t(&xs, false).accuracy_for_logits(&ys);
    ///     }
    /// });
    /// ```
    ///
    /// ## Known false positives
    /// Only evaluation over data is reported: a forward in a loop over a
    /// loader, a dataset or batches (`for x, y in val_loader`, `for batch in
    /// tqdm(test_set)`), or in a comprehension over one. A single forward in
    /// straight-line code (one sample, one display batch, a prediction for
    /// one sentence) frees its graph at the next statement and is not
    /// reported, nor a loop over a loader that leaves at the end of its
    /// first iteration (`...; break`, or `return`: one batch to show) or
    /// after a few counted to a literal of at most 16 (`if j >= 9: break`,
    /// `if i == 0: return images, outputs`: samples to show), nor a forward
    /// under an interval guard in a training step (`if (i + 1) % 100 == 0:
    /// G.eval(); sample = G(z_fixed)`: one display batch every hundred
    /// steps; a validation loop under the guard is still reported); nor a loop that steps an environment (`env.step(action)`,
    /// or an agent's own `next_state, reward, done = self.step(action)`:
    /// reinforcement learning's interaction loop, one observation per
    /// forward, its graph dropped every step), nor a Hugging Face
    /// `pipeline(...)`, which runs its model under `no_grad` itself, nor a call of a CamelCase
    /// name (a class constructed, even a parameter annotated `nn.Module`),
    /// nor a loss module (`self.loss = nn.CrossEntropyLoss()`, also moved:
    /// `nn.MSELoss(reduction="sum").cuda()`, or a module class of the
    /// project named as one, `CircleLoss(m=0.25, gamma=32)`), which
    /// computes a loss value, not a model's forward, nor a
    /// project module that owns none (its only base `nn.Module`, its
    /// `__init__` registers buffers or keeps plain settings and builds no
    /// layer: a mel-spectrogram front end, a PSNR or an edge-accuracy
    /// metric, also bound as `self.psnr = PSNR(255.0).to(device)`), nor a
    /// model whose class freezes all its parameters in `__init__`
    /// (pytorch-fid's `InceptionV3`, `requires_grad=False` by default, in
    /// the file that builds it) unless the construction passes that flag. `range(iter)` counts iterations: it is no loop over
    /// data. A loss handed to a local helper that takes gradients (`def
    /// hvp(y, w, v): ... torch.autograd.grad(y, w, create_graph=True)`)
    /// needs its graph, as a `backward()` does.
    /// Grad is off under `torch.no_grad()`/`torch.inference_mode()` (as a
    /// block or decorator), under a decorator or context manager of the
    /// project whose definition enters one of them (`@smart_inference_mode()`,
    /// in any file of the run), and in a function every known caller of
    /// which runs with grad off (callers in other files of the run
    /// included, and a base class's `self.evaluate_mt()` for a method only
    /// its subclasses define). A forward of a model whose parameters were all frozen
    /// (`model.requires_grad_(False)`, `p.requires_grad = False` over its
    /// parameters) or all but a part (a head given back grad, or kept by
    /// name: `if name not in ["fc.weight", "fc.bias"]:`), or whose
    /// pretrained backbone part was frozen (`net.features`,
    /// `model.backbone`: only the head beside it records a graph), also
    /// when a project function froze it and returned the model (`net =
    /// get_net(device)`), or of a wrapper of one (`nn.Sequential(backbone,
    /// nn.Flatten())`, `nn.DataParallel(backbone)`, `backbone.to(device)`)
    /// with no layer of its own that holds parameters, is not reported, nor a call of an instance of a project
    /// class that is not an `nn.Module` (a trainer or predictor wrapping a
    /// model). Callers outside the run, and calls by `getattr` or through a
    /// callback, are not seen: an evaluation function whose only callers
    /// are there is reported (a method called by name on receivers the run
    /// cannot resolve, all with grad off, counts as called with grad off). A file written for PyTorch before 0.4 (it passes
    /// `volatile=True`, which turned grad off then, or wraps tensors in
    /// `Variable(...)`, and reads a loss as `loss.data[0]`, which raises
    /// from PyTorch 0.5 on, or passes
    /// `retain_variables=`, a `TypeError` from PyTorch 0.4 on) is not checked:
    /// on the PyTorch it runs on, its volatile inputs record no graph. Models are recognised by their constructor (`nn.*`, a
    /// class deriving from `nn.Module` in the run, `torchvision.models.*`)
    /// or by a model-like name (`model`, `net`, `encoder`,
    /// `self.backbone`...), never by a call of a class or of a function
    /// named after an action on a model (`wrap_model`, `load_net`). Test
    /// modules (under `tests/`, or `test_*.py` and `*_test.py` with a test
    /// in them: `def test...`, `unittest`, `pytest`; `u2net_test.py`, an
    /// inference script, is not one) and methods of
    /// `nn.Module` subclasses (model code: the caller picks the grad mode)
    /// are not taken as evaluation code by their names; Lightning's
    /// `validation_step`/`test_step`/`predict_step` methods run under
    /// no_grad already and are skipped. `a if c else b` with two forwards
    /// is one finding.
    ///
    /// ## References
    /// - [torch.no_grad](https://pytorch.org/docs/stable/generated/torch.no_grad.html)
    /// - [torch.inference_mode](https://pytorch.org/docs/stable/generated/torch.inference_mode.html)
    /// - [Autograd mechanics: locally disabling gradient computation](https://pytorch.org/docs/stable/notes/autograd.html#locally-disabling-gradient-computation)
    pub struct EvalWithoutNoGrad {
        code: "ML201",
        name: "eval-without-no-grad",
        severity: Warning,
        default: true,
        languages: [Python, Rust],
    }
}

impl Rule for EvalWithoutNoGrad {
    fn meta(&self) -> &'static RuleMeta {
        &Self::META
    }

    fn check_expr(&self, expr: &Expr, checker: &mut Checker<'_>) {
        let cx = checker.cx;
        // tch: `model.forward_t(xs, false)` says evaluation by itself.
        let eval_mode_forward = nn::is_eval_mode_forward(expr);
        // `for phase in ["train", "val"]:` training under `if phase ==
        // "train":`: a forward outside that test runs in the evaluation
        // phase too.
        let phase = cx.phase_loop().filter(|(id, var)| !under_phase_test(expr, *id, var, checker));
        if !cx.torch_imported()
            || !(cx.in_eval_code() || eval_mode_forward || phase.is_some())
            || !cx.grad_enabled()
            || (cx.backward_in_scope() && phase.is_none())
            || cx.in_attack_loop()
            || cx.in_non_torch_branch()
        {
            return;
        }
        // Evaluation over data: a single forward in straight-line code (one
        // sample, one display batch) frees its graph at the next statement;
        // an environment's interaction loop runs one observation per
        // forward, its graph dropped each step.
        // So is one every hundred steps of training (`if (i + 1) % 100 ==
        // 0: G.eval(); sample = G(z_fixed)`).
        // Reported besides: a decoding loop that feeds a model's output
        // back into it (`for t in range(steps): h = self.decoder(enc, h)`),
        // whose graph grows with every step, whatever the loop iterates. Not
        // through a project helper, which may detach the state it returns
        // (`h = tuple(each.data for each in h)`).
        let over_data = cx.in_data_loop();
        if !(over_data || (cx.in_long_loop() && feeds_itself(expr, checker)))
            || cx.in_interaction_loop()
            || cx.periodic_in_training_step()
        {
            return;
        }
        // `if not cross_valid: noisy = self.augment(noisy)` in a function
        // that evaluates by a flag: the arm runs only when training.
        if cx.eval_flag().is_some_and(|(flag, true_says_eval)| in_training_arm(expr, flag, true_says_eval, checker)) {
            return;
        }
        let ExprKind::Call { func, .. } = &expr.kind else { return };
        let model = match &func.kind {
            ExprKind::Attribute { value, attr, .. } if nn::is_forward_method(attr) && cx.is_model(value) => Some(&**value),
            _ if cx.is_model(func) => Some(&**func),
            _ => None,
        };
        let message = match model {
            // A model whose parameters were all frozen records no graph; one
            // frozen but for a part (a head) records only that part's.
            Some(m) if m.dotted().is_some_and(|d| cx.is_frozen_but_a_head(&d)) => return,
            // A module that owns no parameters (a mel-spectrogram front end
            // with buffers only, `nn.Softmax(dim=-1)`) records no graph either.
            Some(m) if m.dotted().is_some_and(|d| cx.owns_no_parameters(&d)) => return,
            Some(m) => {
                let place = match cx.function_name() {
                    Some(f) => format!(" in `{f}`"),
                    None => String::new(),
                };
                match phase {
                    Some((_, var)) => format!(
                        "forward pass of `{}`{place} runs with autograd enabled when `{var}` is the evaluation phase",
                        checker.text(m.span)
                    ),
                    None => format!("forward pass of `{}` in evaluation code{place} runs with autograd enabled", checker.text(m.span)),
                }
            }
            // A per-batch helper that runs the model once per call and
            // trains nothing (`self._process_one_batch(x, y)`, shared with
            // the training loop).
            None if over_data
                && cx
                .project_callee(expr)
                .is_some_and(|f| f.runs_model_once && !f.calls_backward && !cx.index().reaches_backward(&f.qualname)) =>
            {
                format!("`{}(...)` runs a forward pass in evaluation code with autograd enabled", checker.text(func.span))
            }
            None => return,
        };
        // Code for PyTorch before 0.4, which turns grad off with
        // `Variable(x, volatile=True)` and cannot run on a later PyTorch.
        if checker.written_for_volatile_torch() {
            return;
        }
        // A helper's finding gives the plain Python advice, whatever the
        // language or `volatile` use of the file.
        checker.report(
            Self::META.diagnostic(expr.span, message).with_help(if let Some((_, var)) = phase {
                format!("run the phase's forward under `with torch.set_grad_enabled({var} == \"train\"):`")
            } else if model.is_none() {
                NO_GRAD_HELP.to_string()
            } else if checker.is_rust() {
                "run evaluation inside `tch::no_grad(|| ...)`, or hold `let _guard = tch::no_grad_guard();` for the scope".to_string()
            } else if checker.volatile_use() == memlint_semantic::facts::Volatile::NoOp {
                "run evaluation under `with torch.no_grad():` or `torch.inference_mode()`: `volatile=True` has turned nothing off since PyTorch 0.4".to_string()
            } else {
                NO_GRAD_HELP.to_string()
            }),
        );
    }
}

/// Whether `expr` sits under an `if` (between it and the phase loop
/// `lp`) whose test reads the phase variable `var`: it runs in some
/// phases only.
/// Whether `expr` is the value of an assignment to a name it reads
/// (`h = self.decoder(enc, h)`): state carried from one call to the next.
fn feeds_itself(expr: &Expr, checker: &Checker<'_>) -> bool {
    let module = checker.module();
    let Some(StmtKind::Assign { targets, value, .. }) = module.tree.owner(expr.id).and_then(|id| module.stmt(id)).map(|s| &s.kind) else {
        return false;
    };
    let Some((_, args, keywords)) = expr.as_call().filter(|_| value.id == expr.id) else { return false };
    let bound = |name: &str| {
        targets.iter().any(|t| match &t.kind {
            ExprKind::Sequence(elts) => elts.iter().any(|e| e.as_name() == Some(name)),
            _ => t.as_name() == Some(name),
        })
    };
    args.iter().chain(keywords.iter().map(|k| &k.value)).any(|a| a.as_name().is_some_and(bound))
}

/// Whether `expr` sits in an arm of an `if` on the train-mode flag
/// (`if flag:`, `if not flag:`, or their `else`) that runs only when the
/// flag says training.
fn in_training_arm(expr: &Expr, flag: &str, true_says_eval: bool, checker: &Checker<'_>) -> bool {
    checker.flag_value_where(expr, |t| t.as_name() == Some(flag)).is_some_and(|value| value != true_says_eval)
}

fn under_phase_test(expr: &Expr, lp: memlint_semantic::ir::StmtId, var: &str, checker: &Checker<'_>) -> bool {
    let module = checker.module();
    let mut at = module.tree.owner(expr.id);
    while let Some(id) = at.filter(|id| *id != lp) {
        if let Some(StmtKind::If { test, .. }) = module.stmt(id).map(|s| &s.kind) {
            if test.any(&mut |x| x.as_name() == Some(var)) {
                return true;
            }
        }
        at = module.tree.parent(id);
    }
    false
}

/// The advice for Python evaluation code.
const NO_GRAD_HELP: &str =
    "run evaluation under `with torch.no_grad():` or `torch.inference_mode()`, or decorate the function with `@torch.no_grad()`";
