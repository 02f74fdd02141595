use memlint_diagnostics::{Applicability, Edit, Fix, Span};
use memlint_semantic::api::nn;
use memlint_semantic::ir::{BinOp, Expr, ExprKind, Stmt, StmtKind};
use memlint_semantic::{Role, ValueKind};

use crate::{declare_rule, Checker, Rule, RuleMeta};

declare_rule! {
    /// ## What it does
    /// Flags reads and assignments of `.data` on a tensor (`p.data`,
    /// `p.data.clamp_(0, 1)`, `p.data = p.data.clamp(0, 1)`) in code that
    /// runs while an autograd graph may be live: the body of a training or
    /// evaluation loop, a `forward` method, an optimizer's `step`, a
    /// framework step hook (`training_step`), or a function called from one
    /// of those (in the same file or another file of the run); and anywhere
    /// on a value that carries autograd history (`layer(x).data`,
    /// `loss.data`). One finding per statement (`a.data = b.data` is one, and
    /// so is a statement over several lines). Not on
    /// the running statistics of norm layers (`bn.running_mean.data`,
    /// `running_var`, `num_batches_tracked`): they never require grad; nor
    /// on a gradient (`p.grad.data.zero_()` before `backward()`), which is
    /// no input of the graph being built (ML107 covers the idiom).
    /// Not reported in the methods of a module class nothing of the run
    /// builds (its name appears nowhere outside its own body, not even as
    /// a base or in a string) when the run holds code that builds other
    /// module classes outside any class and picks none by a computed name
    /// (`eval`, `importlib`, `getattr(models, name)`, Hydra): a class left
    /// over from an experiment never runs.
    ///
    /// ## Why is this bad?
    /// `.data` returns the tensor's storage without autograd's version
    /// counter. An in-place change through it is invisible to autograd: where
    /// PyTorch would raise a loud error ("one of the variables needed for
    /// gradient computation has been modified by an inplace operation"), the
    /// backward pass silently uses the modified values and computes wrong
    /// gradients. On a value with history it also silently cuts the graph.
    ///
    /// ## Example
    /// ```python
    /// for x, y in loader:
    ///     loss = criterion(model(x), y)
    ///     for p in model.parameters():
    ///         p.data.clamp_(-1, 1)   # the graph saved p: its backward sees the clamped values
    ///     loss.backward()
    /// ```
    ///
    /// In Rust with `tch` (`t.data()` is `.data`, `t.set_data(&v)` is
    /// `t.data = v`):
    /// ```rust,ignore
    /// for _ in 0..steps {
    ///     let loss = net.forward(&xs).mse_loss(&ys, tch::Reduction::Mean);
    ///     for p in vs.trainable_variables() {
    ///         let _ = p.data().clamp_(-1.0, 1.0);
    ///     }
    ///     opt.backward_step(&loss);
    /// }
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// for x, y in loader:
    ///     loss = criterion(model(x), y)
    ///     loss.backward()
    ///     with torch.no_grad():
    ///         for p in model.parameters():
    ///             p.clamp_(-1, 1)
    /// # or, to read the values without history: p.detach()
    /// ```
    /// ```rust,ignore
    /// opt.backward_step(&loss);
    /// tch::no_grad(|| {
    ///     for mut p in vs.trainable_variables() {
    ///         let _ = p.clamp_(-1.0, 1.0);
    ///     }
    /// });
    /// ```
    ///
    /// ## Known false positives
    /// Not reported in code for PyTorch before 0.4 (it wraps tensors in
    /// `Variable(...)` and reads a loss as `loss.data[0]`, or its project
    /// declares such a PyTorch), where `.data` was how a `Variable` gave its
    /// tensor. Not reported for `w.data *= mask` with a multiplier named as a mask
    /// (`self.mask`: the masked layers of PixelCNN or MADE, pruning): a
    /// fixed 0/1 mask applied again changes no value a graph saved.
    /// Not reported under `torch.no_grad()` (autograd records nothing
    /// there: the advice is already followed), after a `backward()` (without
    /// `retain_graph=True`) that every path of the loop iteration or
    /// function reached, until a forward builds a graph again (a target
    /// network's soft update, clipping or all-reducing gradients after the
    /// backward: no graph is live to corrupt), after an optimizer's
    /// `step()` that follows the graph's forward (WGAN weight clipping after
    /// `loss_d.backward(retain_graph=keep)` and `opt_d.step()`: the step
    /// already changed in place the parameters a kept graph saved, so no
    /// backward can run through it again), before the forward of a
    /// training loop's iteration, where no `backward()` is to come
    /// (sampling, logging, metrics after the last `backward()`), in an
    /// optimizer's `step` or a helper that runs no `backward()` of its own
    /// (a caller's graph is not followed), for reads of an intermediate
    /// value (`fake.data` into a gradient penalty, `loss.data` into a
    /// threshold: a deliberate detach; a parameter's or leaf's `.data` read
    /// into the graph is reported, as it trains nothing), for reads through a copy or a
    /// reduction (`p.grad.data.norm()`, `w.data.clone()`, `x.data.min()`),
    /// for reads that only feed an index (a codebook's distances for
    /// `argmin`: `d.addmm_(x, emb.weight.data.T)` with `d` read by
    /// `torch.argmin(d, 1)` alone: an index takes no gradient),
    /// nor in a branch that runs once per object (`if not self.initialized:
    /// ...; self.initialized = True`, a data-dependent initialisation in
    /// `forward`, or the arm of an initialisation parameter, `if init is
    /// True:`, a weight-normalised layer's initialisation pass), nor in a
    /// branch no call of the project takes (a flag every call leaves at its
    /// default), nor for reads of what a tensor is rather than what it
    /// holds (`w.data.new(n, 1)`, `w.data.shape`, `w.data.size()`, also
    /// through a function of the file that reads only that of its
    /// argument: `dropout_mask(w.data, size, p)` with `x.new(*sz)`, or a
    /// tensor method that takes the dtype, device or shape of its
    /// argument: `scores.to(self.emb.weight.data)`), nor for a value
    /// copied in place into state no graph reads (`self.g_avg.copy_(self.g.data)`,
    /// a buffer: an attribute of `self` neither a parameter nor a value
    /// carrying a graph),
    /// nor on a module built in the same function, nor for a write to a
    /// plain tensor the class keeps (`self.backup.data = ...` of an
    /// attribute only ever assigned `torch.zeros(n)`: its state, no
    /// parameter), nor for a swap-and-restore
    /// (`saved = p.data` ... `p.data = saved`). Not reported in
    /// construction, initialisation, conversion or loading
    /// code where no graph is live (`__init__`, `reset_parameters`,
    /// `_init_weights`, functions passed to `model.apply`, fuse /
    /// reparameterize / convert / quantize / load helpers that no step
    /// calls) nor in unit tests: ML107 `data-attribute-in-setup` (off by
    /// default) covers those. Step code is found through the project index;
    /// a helper reached only by dynamic dispatch (`getattr`, a callback kept
    /// in a list, a method of an object whose class is unknown) or from code
    /// outside the run is not known to be step code and is not reported.
    /// The rule fires only where the object is known to be a tensor: a
    /// parameter (`.parameters()` loop variable, `nn.Parameter`), `.weight`,
    /// `.bias`, `.grad`, `.running_mean` or `.running_var` of an object, or a
    /// value built by a `torch` function. `.data` of anything else
    /// (`args.data`, `self.dataset.data`, a pandas frame) is never reported.
    ///
    /// A `backward()` frees the graph behind its own loss only: in a GAN
    /// step, `.data` on the generator after the discriminator's
    /// `backward()` is not reported even while the generator's graph is
    /// still live.
    ///
    /// ## References
    /// - [Autograd mechanics: in-place correctness checks](https://pytorch.org/docs/stable/notes/autograd.html#in-place-correctness-checks)
    /// - [torch.Tensor.detach](https://pytorch.org/docs/stable/generated/torch.Tensor.detach.html)
    pub struct DataAttribute {
        code: "ML103",
        name: "data-attribute",
        severity: Warning,
        default: true,
        languages: [Python, Rust],
    }
}

/// How a `.data` use relates to the step code around it.
pub(crate) enum DataUse {
    /// In step code, or on a value that carries a graph: ML103.
    Live,
    /// Where no graph is live (setup, conversion, tests): ML107.
    Setup,
}

/// Classifies a `.data` use on `value` (the object before `.data`), or
/// `None` when `value` is not known to be a tensor.
pub(crate) fn data_use(checker: &Checker<'_>, value: &Expr) -> Option<DataUse> {
    let found = data_use_of(checker, value)?;
    // A batch of a data loader (`labels.data` of `for texts, labels in
    // data_iter`) requires no grad: where no graph needs it, `.data` on it
    // is no idiom worth changing. (Changed in place after a forward that
    // saved it, it is ML103's.)
    if matches!(found, DataUse::Setup) && value.as_name().is_some_and(|n| checker.cx.is_batch(n)) {
        return None;
    }
    Some(found)
}

fn data_use_of(checker: &Checker<'_>, value: &Expr) -> Option<DataUse> {
    let cx = checker.cx;
    let graph = cx.carries_graph(value);
    let output = graph && matches!(cx.kind_of(value), Some(ValueKind::Output | ValueKind::Tensor));
    if !DataAttribute::is_tensor_like(checker, value) && !output {
        return None;
    }
    if cx.function_role() == Role::Test {
        return None;
    }
    // A norm layer's running statistics never require grad: nothing to bypass.
    if let ExprKind::Attribute { attr, .. } = &value.kind {
        if memlint_semantic::api::NORM_BUFFERS.contains(&attr.as_str()) {
            return None;
        }
        // A gradient is no input of the graph being built: zeroing or
        // clipping `p.grad.data` before `backward()` corrupts nothing it
        // saved (the idiom is ML107's).
        if attr == nn::GRAD && cx.grad_enabled() {
            return Some(DataUse::Setup);
        }
    }
    // A data-dependent initialisation that runs once (`if not
    // self.initialized: self.weight.data.copy_(...); self.initialized =
    // True`, ActNorm, or an initialisation pass through `forward`, `if
    // init:`): initialisation code, ML107's.
    if cx.in_run_once_branch() {
        return Some(DataUse::Setup);
    }
    // Inside `torch.no_grad()` autograd records nothing: the advice
    // (no_grad) is already followed.
    if !cx.grad_enabled() {
        return Some(DataUse::Setup);
    }
    // The hazard needs a graph that may be live here and a `backward()` to
    // come: a change corrupts what the graph saved, a read of a parameter
    // leaves it out of the graph being built. After the `backward()` that
    // freed the graph (a target-network update, the clipping or all-reduce
    // of gradients), before a forward built one (the top of a training
    // loop), or with no `backward()` to come (sampling, logging, metrics),
    // neither happens.
    let window = cx.backward_follows() && cx.graph_may_run_backward();
    if (cx.in_step_code() || graph) && window {
        Some(DataUse::Live)
    } else {
        Some(DataUse::Setup)
    }
}

/// The `.data` span of `value.data`.
pub(crate) fn data_span(attr_span: Span) -> Span {
    Span::new(attr_span.start.saturating_sub(1), attr_span.end)
}

impl DataAttribute {
    /// A parameter or a leaf that requires grad (`self.weight`, `p` of
    /// `.parameters()`, `w` built with `requires_grad=True`).
    fn is_leaf_like(checker: &Checker<'_>, value: &Expr) -> bool {
        // `self.weight` that the class only ever assigns a plain tensor
        // (`Variable(torch.ones(n))`): no parameter, whatever its name.
        if value.dotted().is_some_and(|d| d.starts_with("self.") && checker.cx.kind_of_binding(&d) == Some(ValueKind::Tensor)) {
            return false;
        }
        if let ExprKind::Attribute { attr, .. } = &value.kind {
            if nn::is_param_attr(attr) {
                return true;
            }
        }
        value.dotted().is_some_and(|d| checker.cx.is_requires_grad_leaf(&d) || checker.cx.is_parameter_path(&d))
            || checker.cx.kind_of(value) == Some(ValueKind::Parameter)
    }

    /// Whether `data` (a `.data` read) is an argument of a call to a
    /// function of the file that reads only what it is
    /// ([`memlint_semantic::facts::data_reads::passed_as_template`]), or
    /// of a tensor method that does (`x.to(w.data)`,
    /// [`memlint_semantic::facts::data_reads::takes_as_template`]).
    fn passed_as_template(checker: &Checker<'_>, data: &Expr) -> bool {
        let body = &checker.module().body;
        Self::passed_to(checker, data, |x| {
            memlint_semantic::facts::data_reads::passed_as_template(body, x, data.id)
                || memlint_semantic::facts::data_reads::takes_as_template(x, data.id)
        })
    }

    /// Whether `data` (a `.data` read) is an argument of an in-place
    /// method (`copy_`, `add_`, `lerp_`) of an attribute of `self` that is
    /// neither a parameter nor a value carrying a graph: state such as a
    /// buffer.
    fn copied_into_state(checker: &Checker<'_>, data: &Expr) -> bool {
        Self::passed_to(checker, data, |x| {
            x.as_method_call().is_some_and(|(recv, method)| {
                method.ends_with('_')
                    && recv.dotted().is_some_and(|d| d.starts_with("self."))
                    && !Self::is_leaf_like(checker, recv)
                    && !checker.cx.carries_graph(recv)
                    && !checker.cx.is_model(recv)
            })
        })
    }

    /// Whether a call of `data`'s statement takes `data` as an argument
    /// (positional or keyword) and is one `call` accepts.
    fn passed_to(checker: &Checker<'_>, data: &Expr, call: impl Fn(&Expr) -> bool) -> bool {
        let mut found = false;
        checker.statement_has(data, &mut |x| {
            found = found
                || (x.as_call().is_some_and(|(_, args, kws)| {
                    args.iter().any(|a| a.id == data.id) || kws.iter().any(|k| k.value.id == data.id)
                }) && call(x));
            found
        });
        found
    }

    pub(crate) fn is_tensor_like(checker: &Checker<'_>, value: &Expr) -> bool {
        if checker.cx.qualified_name(value).is_some() {
            return false;
        }
        if let ExprKind::Attribute { attr, .. } = &value.kind {
            if nn::is_param_attr(attr) || attr == nn::GRAD {
                return true;
            }
        }
        if let Some(d) = value.dotted() {
            if checker.cx.is_requires_grad_leaf(&d) {
                return true;
            }
        }
        checker.cx.is_tensor(value)
    }
}

impl Rule for DataAttribute {
    fn meta(&self) -> &'static RuleMeta {
        &Self::META
    }

    fn check_stmt(&self, stmt: &Stmt, checker: &mut Checker<'_>) {
        if !checker.cx.torch_imported() {
            return;
        }
        // `p.data = ...`: when the swap changes dtype, device or class, say so.
        let StmtKind::Assign { targets, .. } = &stmt.kind else { return };
        if checker.written_for_volatile_torch() {
            return;
        }
        for t in targets {
            let ExprKind::Attribute { value, attr, attr_span } = &t.kind else { continue };
            if attr != nn::DATA || !matches!(data_use(checker, value), Some(DataUse::Live)) {
                continue;
            }
            if value.dotted().is_some_and(|d| checker.cx.is_fresh_module(&d)) {
                continue;
            }
            // `self.backup.data = ...` of a plain tensor the class keeps
            // (only ever `torch.zeros(n)`, no parameter): its state, which no
            // step's graph trains or, in practice, saves.
            if value.dotted().is_some_and(|d| d.starts_with("self.") && checker.cx.kind_of_binding(&d) == Some(ValueKind::Tensor)) {
                continue;
            }
            let name = checker.text(value.span).to_string();
            let d = match checker.cx.current_data_swap() {
                Some(kind) => Self::META
                    .diagnostic(data_span(*attr_span), format!("`{name}.data = ...` swaps the tensor's {kind} behind autograd's back while a graph may be live"))
                    .with_help(format!("do the swap outside the training step (or assign a new `nn.Parameter`); a `{name}` in a live graph keeps the old {kind}")),
                None => Self::META
                    .diagnostic(data_span(*attr_span), format!("`.data` on `{name}` bypasses autograd's version tracking while a graph may be live"))
                    .with_help(if checker.is_rust() {
                        format!("write the values inside `tch::no_grad(|| {name}.copy_(...))`")
                    } else {
                        format!("write the values inside `with torch.no_grad(): {name}.copy_(...)`")
                    }),
            };
            checker.report(d);
        }
    }

    fn check_expr(&self, expr: &Expr, checker: &mut Checker<'_>) {
        if !checker.cx.torch_imported() {
            return;
        }
        let ExprKind::Attribute { value, attr, attr_span } = &expr.kind else { return };
        if attr != nn::DATA || checker.cx.is_assign_target(expr.id) {
            return;
        }
        // A module class nothing of the run builds: its code never runs.
        if checker.cx.in_unreferenced_module() {
            return;
        }
        // Code for PyTorch before 0.4: `.data` was how a `Variable` gave its
        // tensor, and neither `torch.no_grad()` nor `detach()`'s advice ran there.
        if checker.written_for_volatile_torch() {
            return;
        }
        // `p.grad.data.norm()`, `w.data.detach()`: a copy or a reduction
        // keeps no alias an in-place change could corrupt.
        if checker.cx.is_copied_read(expr.id) {
            return;
        }
        // `saved = p.data` ... `p.data = saved`: a deliberate swap-and-restore.
        if checker.cx.saves_data_for_restore() {
            return;
        }
        // The parameters of a module built in this function have no graph yet.
        if value.dotted().is_some_and(|d| checker.cx.is_fresh_module(&d)) {
            return;
        }
        let write = checker.cx.is_written_through(expr.id);
        // A branch no step of the project takes (`if self.mask is not
        // None:` that no call sets up, a flag every call leaves off).
        if !matches!(data_use(checker, value), Some(DataUse::Live)) || checker.cx.in_rarely_taken_branch() {
            return;
        }
        // `self.conv.weight.data *= self.mask` in a `forward` (PixelCNN's and
        // MADE's masked layers, pruning masks): applying a fixed 0/1 mask
        // again leaves the values it already masked as they are, so no value
        // a graph saved changes.
        if write && multiplies_by_a_mask(checker, expr) {
            return;
        }
        // A read of a graph's intermediate value (`fake.data` into a
        // gradient penalty, `loss.data` into a threshold) is a deliberate
        // detach: only a parameter or leaf read through `.data` leaves the
        // graph silently (`x * self.weight.data` trains no weight).
        if !write && !Self::is_leaf_like(checker, value) {
            return;
        }
        // A codebook's distances read for `argmin` (`d.addmm_(x,
        // emb.weight.data.T)`; `idx = torch.argmin(d, 1)`): an index takes no
        // gradient, so the read trains nothing it would have trained.
        if !write && checker.cx.reads_into_an_index() {
            return;
        }
        // `dropout_mask(w.data, size, p)` to a function of the file that only
        // reads what its argument is (`x.new(*sz)`), or `x.to(w.data)`: a
        // template, no values.
        if !write && Self::passed_as_template(checker, expr) {
            return;
        }
        // `self.g_avg.copy_(self.g.data)`: the value written in place into
        // state no graph reads (a buffer, a running average); the use
        // wants no gradient.
        if !write && Self::copied_into_state(checker, expr) {
            return;
        }
        let name = checker.text(value.span).to_string();
        let mut d = if write {
            Self::META
                .diagnostic(data_span(*attr_span), format!("`.data` on `{name}` bypasses autograd's version tracking while a graph may be live"))
                .with_help(if checker.is_rust() {
                    format!("change the values inside `tch::no_grad(|| ...)` on `{name}` itself")
                } else {
                    format!("change the values inside `with torch.no_grad():` on `{name}` itself")
                })
        } else {
            Self::META
                .diagnostic(data_span(*attr_span), format!("`.data` reads the parameter `{name}` outside autograd: the `backward()` that follows gives this use no gradient"))
                .with_help(format!("use `{name}` to train it through this use, or `{name}.detach()` to make the cut explicit"))
        };
        // A read only: `.detach()` shares the storage but keeps the version
        // counter, so a later in-place change raises instead of corrupting.
        if !write {
            d = d.with_fix(Fix {
                applicability: Applicability::Unsafe,
                message: format!("use `{name}.detach()`"),
                edits: vec![Edit { span: *attr_span, content: "detach()".to_string() }],
            });
        }
        checker.report(d);
    }
}

/// Whether `data` (an `x.data` expression) is the target of `x.data *=
/// m` with `m` named as a mask (`self.mask`, `weight_mask`).
fn multiplies_by_a_mask(checker: &Checker<'_>, data: &Expr) -> bool {
    let module = checker.module();
    let Some(stmt) = module.stmt_at(data.span.start).and_then(|id| module.stmt(id)) else { return false };
    match &stmt.kind {
        StmtKind::AugAssign { target, op: BinOp::Mult, value } => {
            target.span == data.span
                && value.dotted().is_some_and(|d| {
                    let last = d.as_str().rsplit('.').next().unwrap_or_default();
                    memlint_semantic::resolve::words(last).iter().any(|w| w == "mask")
                })
        }
        _ => false,
    }
}

