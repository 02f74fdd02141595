//! Transfer functions of the walk: entering functions and loops, binding
//! assignment targets, forgetting rebound places, and the effects of calls
//! (grad mode, freezing, leaves).

use super::*;

impl Context {
    pub(super) fn enter_function(&mut self, func: &Function) {
        let qualname = self.qualname_for(&func.name);
        let mut frame = Frame { name: Some(func.name.clone()), ..Frame::default() };
        // Unit tests (and their helpers) are not evaluation code.
        let unit_test = self.options.is_test_file;
        frame.unit_test = unit_test;
        // Lightning runs these hooks under no_grad itself.
        let lightning_hook = matches!(func.name.as_str(), "validation_step" | "test_step" | "predict_step")
            && !self.class_stack.is_empty();
        // A method of an nn.Module is model code: its caller decides the grad
        // mode, whatever the method is called (`predict`, `test_step`).
        let module_method = self.class_stack.last().is_some_and(|c| self.module_classes.contains(c));
        frame.eval_named = !unit_test
            && !lightning_hook
            && !module_method
            && crate::resolve::names_evaluation(&func.name);
        // `forward` of a custom `torch.autograd.Function` runs with grad off.
        let autograd_forward =
            func.name == "forward" && self.class_stack.last().is_some_and(|c| self.autograd_functions.contains(c));
        frame.decorator_no_grad = func.decorators.iter().any(|d| self.is_no_grad_decorator(d))
            || autograd_forward
            || self.index.only_called_without_grad(&qualname);
        frame.eval_by_flag = !unit_test && self.index.evaluates_by_flag(&qualname);
        let flag = if frame.eval_by_flag {
            let f = self.index.function(&qualname);
            frame.flag_negated = f.is_some_and(|f| f.train_flag_negated);
            f.and_then(|f| f.train_flag_name.clone())
        } else {
            None
        };
        let summary_only = self.options.summary_only;
        let backward = func.words.contains(Words::BACKWARD);
        frame.words = func.words;
        if !summary_only && backward {
            frame.backward_outside_loops = backward_outside_loops(&func.body, flag.as_deref());
        }
        if backward {
            frame.backward_helpers = local_backward_helpers(&func.body);
        }
        if func.words.contains(Words::GRAD) {
            frame.backward_helpers.extend(self.gradient_imports());
        }
        frame.flag_param = flag;
        frame.role = Some(if unit_test { Role::Test } else { self.index.role(&qualname) });
        // Without an index entry (a nested function), the name still says setup.
        if frame.role == Some(Role::Other) && is_setup_name(&func.name) {
            frame.role = Some(Role::Setup);
        }
        frame.qualname = Some(qualname);
        // Step code that runs no backward of its own (a `forward`, a helper
        // called from a training step) may run while its caller's graph is
        // live; a function with its own backward starts with none.
        frame.graph_built = func.name == "forward" || frame.role == Some(Role::Step) && !backward;
        if !summary_only {
            frame.kept_alive = kept_alive(&func.body, func.words);
            if backward {
                frame.backward_at = backward_offsets(&func.body);
            }
        }
        frame.class = self.class_stack.last().cloned();
        // The enclosing class frame (a method), else the enclosing method's class.
        frame.class_qualname = if self.frame().is_class { self.frame().qualname.clone() } else { self.frame().class_qualname.clone() };
        frame.locals = Some(func.locals.clone());
        if func.words.contains(Words::DATA) {
            frame.data_restores = data_restores(&func.body);
            if !summary_only {
                frame.index_locals = index_only_locals(&func.body);
            }
        }
        if !summary_only {
            (frame.unset_locals, frame.set_locals) = crate::facts::guards::fixed_locals(&func.body, &func.params);
        }
        // A model every caller passes frozen (`def embed(model, loader)`
        // after `freeze_model(model)` at each call) is frozen here.
        let offset = usize::from(self.frame().is_class);
        if summary_only {
            frame.positional = func.params.iter().skip(offset).map(|p| p.name.clone()).collect();
        }
        for &i in self.index.frozen_args(frame.qualname.as_deref().unwrap_or_default()) {
            if let Some(p) = func.params.get(offset + i) {
                frame.frozen.insert(p.name.to_string());
            }
        }
        for p in &func.params {
            frame.params.insert(p.name.clone());
            if let Some(k) = self.param_kind(p) {
                frame.kinds.insert(p.name.clone(), k);
            }
        }
        self.frames.push(frame);
        // A parameter hides an import of its name; other parameters are
        // answered by `params` (an import lookup never reaches a name no
        // import binds).
        for p in &func.params {
            if self.facts.import_targets(name_hash(&p.name), &p.name).is_some() {
                self.frame_mut().imports.insert(p.name.clone(), None);
            }
        }
    }

    /// The names the file imports torch's gradient functions as (`from
    /// torch.autograd import grad`): a bare `grad(nll, params)` takes
    /// gradients.
    pub(crate) fn gradient_imports(&self) -> impl Iterator<Item = String> + '_ {
        self.facts.module_level_imports.iter().filter_map(|(local, target)| {
            matches!(target.as_deref(), Some("torch.autograd.grad" | "torch.autograd.backward")).then(|| local.clone())
        })
    }

    pub(super) fn param_kind(&self, p: &Param) -> Option<ValueKind> {
        self.annotation_kind(p.annotation.as_ref()?)
    }

    /// The kind of value a type annotation declares.
    pub(super) fn annotation_kind(&self, mut ann: &Expr) -> Option<ValueKind> {
        // Rust: `xs: &Tensor`, `w: &mut Tensor`.
        while let ExprKind::Unary { op: crate::ir::UnaryOp::Ref | crate::ir::UnaryOp::RefMut, operand } = &ann.kind {
            ann = operand;
        }
        let q = self.qualified_name(ann)?;
        match q.as_str() {
            "torch.Tensor" | "torch.FloatTensor" | "torch.LongTensor" | "tch.Tensor" => Some(ValueKind::Tensor),
            "torch.nn.Parameter" => Some(ValueKind::Parameter),
            "torch.nn.Module" => Some(ValueKind::Module),
            "torch.utils.data.DataLoader" => Some(ValueKind::DataLoader),
            // tch: `opt: &mut nn::Optimizer`, `let opt: nn::Optimizer = ...`.
            "tch.nn.Optimizer" => Some(ValueKind::Optimizer),
            _ => None,
        }
    }

    pub(super) fn forget(&mut self, dotted: &str) {
        // A removal hashes the key even from an empty map, and most of a
        // frame's maps are empty.
        macro_rules! remove {
            ($($m:ident),*) => {{
                let f = self.frame_mut();
                $(if !f.$m.is_empty() {
                    f.$m.remove(dotted);
                })*
            }};
        }
        remove!(factories, instances, frozen, constructions, parameterless, unfrozen_parts, kinds, graph, requires_grad, views, losses, saved, grad_values, batches, grad_off, batch_loader, loader_iters, interval_names, few_items, counts, cpu_devices);
        // What hangs below the rebound place belongs to the old object:
        // `obj = Box()` forgets `obj.t`.
        let below = |k: &str| is_below(k, dotted);
        let f = self.frame_mut();
        macro_rules! sets {
            ($($m:ident),*) => {{
                $(if f.$m.iter().any(|k| below(k)) {
                    f.$m.retain(|k| !below(k));
                })*
            }};
        }
        macro_rules! maps {
            ($($m:ident),*) => {{
                $(if f.$m.keys().any(|k| below(k)) {
                    f.$m.retain(|k, _| !below(k));
                })*
            }};
        }
        sets!(frozen, graph, requires_grad, losses, grad_values, grad_off);
        maps!(factories, instances, unfrozen_parts, kinds, views, saved);
        // Only a name that resolves to an import needs shadowing; the
        // fallback of an optional import (`except ImportError: amp =
        // None`) leaves the import: the code that uses the name runs
        // with the module.
        if !dotted.contains('.') && self.lookup_import(dotted).is_some() && !self.in_import_fallback() {
            self.frame_mut().imports.insert(dotted.to_string(), None);
        }
    }

    /// Applies an assignment to `target` from `value` (`None`: unknown value).
    pub(super) fn bind(&mut self, target: &Expr, value: Option<&Expr>) {
        match &target.kind {
            ExprKind::Sequence(elts) => {
                let carries = value.is_some_and(|v| self.carries_graph(v));
                let values: Option<&Vec<Expr>> = match value.map(|v| &v.kind) {
                    Some(ExprKind::Sequence(vs)) if vs.len() == elts.len() => Some(vs),
                    _ => None,
                };
                // `loss, out = self.step(batch)`: which positions the
                // project function returns with a graph.
                let positions: Option<Vec<usize>> = value.and_then(|v| {
                    let f = self.project_callee(v)?;
                    self.grad_enabled().then(|| f.returns_graph_at.clone())
                });
                // `w, v = torch.linalg.eigh(a)`: a decomposition whose
                // backward reads its outputs.
                let saved_outputs = match value {
                    Some(v) if values.is_none() && !self.options.summary_only && self.grad_enabled() && self.backward_may_follow() => {
                        self.callee_name(v).is_some_and(|q| crate::api::saves_its_outputs(q.as_str()))
                            && v.as_call().is_some_and(|(_, args, _)| args.first().is_some_and(|a| self.requires_grad_value(a)))
                    }
                    _ => false,
                };
                for (i, e) in elts.iter().enumerate() {
                    match values {
                        Some(vs) => self.bind(e, vs.get(i)),
                        None => {
                            let seeded = match (value, e.dotted()) {
                                (Some(v), Some(d)) => self.seeded_by_backward(&d, v),
                                _ => false,
                            };
                            self.bind(e, None);
                            // `inputs, labels = data` of a batch: its parts are batches.
                            if let (Some(v), Some(d)) = (value, e.as_name()) {
                                if self.is_batch_value(v) {
                                    let loader = self.batch_loader_of(v);
                                    let f = self.frame_mut();
                                    f.batches.insert(d.to_string());
                                    if let Some(l) = loader {
                                        f.batch_loader.insert(d.to_string(), l);
                                    }
                                }
                            }
                            // `loss, log = model.forward(...)` of an
                            // unknown callee: a part named as a log record
                            // is a dict of numbers, not a tensor.
                            let graph = match &positions {
                                Some(p) => p.contains(&i) || seeded,
                                None => (carries && !e.as_name().is_some_and(|n| LOG_RECORD_NAMES.contains(&n))) || seeded,
                            };
                            if graph {
                                if let Some(d) = e.dotted() {
                                    self.frame_mut().graph.insert(d.into());
                                }
                            }
                            if let (true, Some(d), Some(v)) = (saved_outputs, e.dotted(), value) {
                                self.frame_mut().saved.insert(d.into(), v.span);
                            }
                        }
                    }
                }
            }
            ExprKind::Starred(inner) => self.bind(inner, None),
            ExprKind::Name(_) | ExprKind::Attribute { .. } => {
                let Some(d) = target.dotted() else { return };
                let (kind, carries, leaf) = match value {
                    Some(v) => {
                        let kind = self.kind_of(v);
                        (kind, self.carries_graph(v) || self.seeded_by_backward(&d, v), self.makes_leaf(v, kind))
                    }
                    None => (None, false, false),
                };
                let is_loss = value.is_some_and(|v| self.is_loss_constructor(v));
                let view = if self.options.summary_only {
                    None
                } else {
                    value.and_then(|v| self.view_of(v)).filter(|v| v.base != d)
                };
                // What the graph facts do not cover already: a leaf's or a
                // module's product (`h = self.fc(x)`, `y = x * 2`).
                let (saved, grad_value) = match value {
                    Some(v) if !self.options.summary_only && self.grad_enabled() && self.backward_may_follow() => {
                        (self.saved_by(v), !carries && self.requires_grad_value(v))
                    }
                    _ => (Vec::new(), false),
                };
                // A module's `.cuda()`, `.to(device)`, `.eval()` return the module.
                // So does `model = model.to(device)`.
                let instance = value.map(crate::api::nn::strip_module_moves).and_then(|v| match v.as_call() {
                    Some((func, _, _)) => self.instance_class_of_call(func),
                    None if !std::ptr::eq(v, value?) => v.as_name().and_then(|n| self.instance_class(n)),
                    None => None,
                });
                // Only argument-less calls return a context to enter later
                // (`ctx = self.get_inference_context()`).
                let factory = value
                    .and_then(|v| v.as_call())
                    .filter(|(_, args, kws)| args.is_empty() && kws.is_empty())
                    .and_then(|(func, _, _)| self.project_name(func));
                let batch = value.is_some_and(|v| self.is_batch_value(v));
                // Read before `forget` clears it: `img = img.view(n, -1)`
                // keeps the loader its batch came from.
                let batch_loader = if batch { value.and_then(|v| self.batch_loader_of(v)) } else { None };
                let frozen = value.is_some_and(|v| self.is_frozen_value(v));
                let parameterless = value.is_some_and(|v| self.builds_parameterless_layer(v));
                let construction = match value {
                    Some(v) if !frozen && self.options.summary_only && self.index.is_empty() => self.bound_construction(v),
                    _ => None,
                };
                // tch: `let _guard = tch::no_grad_guard();` turns grad off
                // for the rest of the function (its block, approximated);
                // `let _ = ...` drops the guard at once and is no binding.
                if value.and_then(|v| self.callee_name(v)).is_some_and(|q| q.is(crate::api::tch::NO_GRAD_GUARD)) && d.as_str() != "_" {
                    self.frame_mut().set_grad = Some(false);
                }
                // `net = get_net(device)` (maybe moved, `.cuda()`), a project
                // function that returns a model frozen whole or in parts.
                let frozen_parts = match value.and_then(|v| self.project_callee(crate::api::nn::strip_module_moves(v))) {
                    Some(f) if !frozen => f.returns_frozen.iter().map(|p| if p.is_empty() { d.to_string() } else { format!("{d}.{p}") }).collect(),
                    _ => Vec::new(),
                };
                self.forget(&d);
                if frozen {
                    self.frame_mut().frozen.insert(d.to_string());
                } else if !frozen_parts.is_empty() {
                    self.frame_mut().frozen.extend(frozen_parts);
                } else if let Some(c) = construction {
                    self.frame_mut().constructions.insert(d.to_string(), c);
                } else if parameterless {
                    self.frame_mut().parameterless.insert(d.to_string());
                } else if !self.options.summary_only && kind == Some(ValueKind::Module) && d.contains('.') {
                    // `model.head = nn.Linear(...)` on a frozen model: a
                    // trainable part.
                    self.note_unfrozen(&d);
                }
                if batch {
                    self.frame_mut().batches.insert(d.to_string());
                    if let Some(l) = batch_loader {
                        self.frame_mut().batch_loader.insert(d.to_string(), l);
                    }
                }
                if let Some(q) = factory {
                    self.frame_mut().factories.insert(d.to_string(), q);
                }
                if value.is_some_and(super::loops::few_literal_items) {
                    self.frame_mut().few_items.insert(d.to_string());
                }
                if let Some(ExprKind::Literal(crate::ir::Literal::Int(k))) = value.map(|v| &v.kind) {
                    self.frame_mut().counts.insert(d.to_string(), *k);
                }
                if value.is_some_and(|v| !d.contains('.') && self.is_version_guard(v)) {
                    self.frame_mut().version_flags.insert(d.to_string());
                }
                if let Some(c) = instance {
                    self.frame_mut().instances.insert(d.to_string(), c);
                }
                if let Some(v) = view {
                    self.frame_mut().views.insert(d.to_string(), v);
                }
                let f = self.frame_mut();
                if grad_value {
                    f.grad_values.insert(d.to_string());
                }
                for (name, span, output) in saved {
                    // `y = y * w` saves the old `y`, which the name no longer holds.
                    if output || name != d {
                        f.saved.insert(if output { d.to_string() } else { name }, span);
                    }
                }
                if let Some(k) = kind {
                    f.kinds.insert(d.to_string(), k);
                }
                if is_loss {
                    f.losses.insert(d.to_string());
                }
                if carries {
                    f.graph.insert(d.to_string());
                }
                if leaf {
                    f.requires_grad.insert(d.into());
                }
            }
            // `model.classifier[6] = nn.Linear(...)` on a frozen model: a
            // trainable part, as `model.fc = ...` is.
            ExprKind::Subscript { value: base, index } if !self.options.summary_only => {
                let (Some(v), ExprKind::Literal(crate::ir::Literal::Int(i))) = (value, &index.kind) else { return };
                if let Some(d) = base.dotted().filter(|_| self.kind_of(v) == Some(ValueKind::Module)) {
                    self.note_unfrozen(&format!("{d}[{i}]"));
                }
            }
            _ => {}
        }
    }

    /// `dotted` requires grad again: a model frozen whole is no longer
    /// frozen, and when `dotted` is a part of one (`model.head`), that
    /// model keeps the rest frozen ([`Context::frozen_except`]).
    pub(super) fn note_unfrozen(&mut self, dotted: &str) {
        let f = self.frame_mut();
        // Made trainable whole (on some path: `elif args.layers == "all":`).
        if !f.unfrozen_parts.is_empty() {
            f.unfrozen_parts.remove(dotted);
        }
        if f.frozen.is_empty() || f.frozen.remove(dotted) {
            return;
        }
        if let Some(model) = f.frozen.iter().find(|m| is_below(dotted, m)).cloned() {
            f.frozen.remove(&model);
            f.unfrozen_parts.entry(model).or_insert_with(|| dotted.to_string());
        }
    }

    /// Whether `iter` is `m.parameters()` of a model whose parameters were
    /// all frozen: frozen here, or a parameter of the function named like
    /// one that a loop of this file freezes (an EMA copy frozen where it is
    /// made and updated in another function: `def update(ema, model)` with
    /// `for p in ema.parameters(): p.requires_grad = False` elsewhere).
    pub(super) fn parameters_of_frozen(&self, iter: &Expr) -> bool {
        let Some((model, "parameters" | "named_parameters")) = unwrap_iter_call(iter).as_method_call() else {
            return false;
        };
        // `self.get_ema().parameters()`: an accessor of the class.
        let Some(d) = model.dotted().map(|d| d.to_string()).or_else(|| self.accessed_attr(model)) else { return false };
        // By name only for a model this function is given: a local copy
        // made here (`ema = deepcopy(model)`) is frozen only where it is.
        self.is_frozen(&d)
            || (self.frame().params.contains(d.as_str()) && self.facts.frozen_names.contains(d.as_str()))
    }

    /// The `self.<attr>` a call of an accessor of the current class
    /// returns (`self.getOriginalAvgG()`, [`super::kinds::self_accessors`]).
    fn accessed_attr(&self, call: &Expr) -> Option<String> {
        let (func, [], []) = call.as_call()? else { return None };
        let name = func.dotted()?;
        let method = name.strip_prefix("self.")?;
        let attr = self.class_accessors.get(self.current_class()?)?.get(method)?;
        Some(format!("self.{attr}"))
    }

    pub(super) fn is_loss_constructor(&self, v: &Expr) -> bool {
        // `nn.CrossEntropyLoss().to(device)`, `.cuda()`: the module moved is
        // the same loss.
        let mut v = v;
        while let Some((inner, "to" | "cuda" | "cpu" | "half" | "float")) = v.as_method_call() {
            v = inner;
        }
        self.callee_name(v).is_some_and(|q| q.starts_with_module("torch.nn") && q.last().ends_with("Loss"))
            // A loss module of the project (`CircleLoss(m=0.25, gamma=32)`):
            // called for a loss value, not a model's forward.
            || v.as_call().is_some_and(|(func, _, _)| {
                matches!(&func.kind, ExprKind::Name(n) | ExprKind::Attribute { attr: n, .. } if n.ends_with("Loss"))
                    && self.project_class_of_call(func).is_some_and(|q| q.ends_with("Loss"))
            })
    }

    /// A name that `backward()` is later called on in this training loop holds
    /// a loss even when its producer is not recognised (a user function).
    pub(super) fn seeded_by_backward(&self, dotted: &str, value: &Expr) -> bool {
        if !self.grad_enabled() {
            return false;
        }
        // Only before the last backward of the innermost such loop's
        // iteration: a name rebound after it (`loss = mlogloss(y_test,
        // pred)` once a fold's training is over) holds whatever its
        // producer gives.
        let at = self.current_stmt.start;
        let in_roots = self
            .frame()
            .loops
            .iter()
            .rev()
            .find(|l| l.kind == LoopKind::Train && l.backward_roots.contains(dotted))
            .is_some_and(|l| at < l.backward_before);
        in_roots
            && matches!(value.kind, ExprKind::Call { .. } | ExprKind::BinOp { .. })
            && !is_detached(value)
            && !crate::facts::scan::is_env_call(value, &["step", "reset"])
    }

    /// Whether assigning `v` creates a leaf tensor that requires grad.
    pub(super) fn makes_leaf(&self, v: &Expr, kind: Option<ValueKind>) -> bool {
        // `y = x` of a leaf: the same tensor under a second name.
        if matches!(v.kind, ExprKind::Name(_) | ExprKind::Attribute { .. }) {
            if let Some(d) = v.dotted() {
                if self.is_requires_grad_leaf(&d) {
                    return true;
                }
            }
        }
        if kind == Some(ValueKind::Parameter) {
            if let ExprKind::Call { .. } = v.kind {
                return true;
            }
        }
        if let Some(q) = self.callee_name(v) {
            if q.starts_with_module("torch") && v.keyword("requires_grad").is_some_and(Expr::is_true) {
                return true;
            }
        }
        if let Some((recv, method)) = v.as_method_call() {
            // tch: `Tensor::randn(...).set_requires_grad(true)`, and the
            // variables an `nn::Path` creates (`vs.root().var(...)`,
            // `(&vs.root() / "l1").zeros("b", &[3])`).
            if method == crate::api::tch::SET_REQUIRES_GRAD {
                return v.as_call().is_some_and(|(_, args, _)| args.first().is_some_and(Expr::is_true));
            }
            // (In Python, `g.var(dim=0)` is a variance.)
            if self.language == Language::Rust && !self.is_imported_path(recv) {
                let on_path = matches!(recv.as_method_call(), Some((_, "root")))
                    || matches!(&recv.kind, ExprKind::BinOp { op: crate::ir::BinOp::Div, .. });
                if crate::api::tch::PATH_VARIABLE_METHODS.contains(&method)
                    || (on_path && crate::api::tch::PATH_FACTORY_METHODS.contains(&method))
                {
                    return true;
                }
            }
        }
        if let Some((recv, "requires_grad_")) = v.as_method_call() {
            let (_, args, _) = v.as_call().unwrap_or((v, &[], &[]));
            let on = args.first().map(|a| !a.is_false()).unwrap_or(true) && v.keyword("requires_grad").map(|a| !a.is_false()).unwrap_or(true);
            let _ = recv;
            return on;
        }
        false
    }

    /// Effects of a call statement: `x.requires_grad_()`, `model.eval()`,
    /// `torch.set_grad_enabled(False)`, `x.requires_grad = ...` handled in bind.
    pub(super) fn apply_call_effects(&mut self, e: &Expr) {
        // `freeze_model(alex)`, a function of this file that freezes the
        // parameters of what it is given.
        if let Some((func, args, _)) = e.as_call().filter(|_| !self.facts.freezers.is_empty()) {
            if let Some(positions) = func.as_name().filter(|n| self.lookup_import(n).is_none()).and_then(|n| self.facts.freezers.get(n)) {
                let frozen: Vec<String> = positions.iter().filter_map(|&i| args.get(i)?.dotted().map(|d| d.to_string())).collect();
                self.frame_mut().frozen.extend(frozen);
            }
        }
        if let Some((recv, method)) = e.as_method_call() {
            if !self.is_imported_path(recv) {
                let (_, args, _) = e.as_call().unwrap_or((e, &[], &[]));
                match method {
                    "requires_grad_" => {
                        let on = args.first().map(|a| !a.is_false()).unwrap_or(true)
                            && e.keyword("requires_grad").map(|a| !a.is_false()).unwrap_or(true);
                        // `model.eval().requires_grad_(False)` freezes `model`.
                        let target = match recv.as_method_call() {
                            Some((inner, "eval" | "to" | "cuda" | "half" | "float")) => inner,
                            _ => recv,
                        };
                        if let Some(d) = target.dotted() {
                            let is_model = self.is_model(target) || self.kind_of_binding(&d) == Some(ValueKind::Module);
                            let f = self.frame_mut();
                            if on {
                                f.requires_grad.insert(d.to_string());
                                self.note_unfrozen(&d);
                            } else {
                                f.requires_grad.remove(d.as_str());
                                if is_model {
                                    f.frozen.insert(d.into());
                                }
                            }
                        }
                    }
                    "eval" if args.is_empty() && recv.dotted().is_some() => {
                        let depth = self.frame().loops.len();
                        let f = self.frame_mut();
                        f.eval_mode = true;
                        f.eval_depth = depth;
                    }
                    "train" if recv.dotted().is_some() => {
                        let flag = args.first().or_else(|| e.keyword("mode"));
                        let off = flag.is_some_and(Expr::is_false);
                        self.frame_mut().eval_mode = off;
                    }
                    _ => {}
                }
            }
        }
        if let Some(q) = self.callee_name(e) {
            if q.is_any(&["torch.set_grad_enabled", "torch.autograd.set_grad_enabled"]) {
                let (_, args, _) = e.as_call().unwrap_or((e, &[], &[]));
                let mode = match args.first() {
                    Some(a) if a.is_true() => Some(true),
                    _ => Some(false),
                };
                self.frame_mut().set_grad = mode;
            }
        }
    }

    /// After a simple statement: a `backward()` without `retain_graph=True`
    /// frees the graph; a statement that builds a graph (its value carries
    /// one, with grad on) and keeps it (not only into `.data`) makes one
    /// live.
    pub(super) fn update_graph_state(&mut self, stmt: &Stmt) {
        // Phase one's summaries and files without torch ask nothing of it.
        if self.options.summary_only || !self.torch_imported {
            return;
        }
        let value = match &stmt.kind {
            StmtKind::Expr(e) | StmtKind::Return(Some(e)) => e,
            StmtKind::Assign { value, .. } | StmtKind::AugAssign { value, .. } => value,
            _ => return,
        };
        let mut frees = false;
        let mut retained = false;
        let may_call_backward = self.frame().words.contains(Words::BACKWARD);
        stmt.for_each_expr(|e| {
            if !may_call_backward {
                return;
            }
            e.any(&mut |x| {
                if is_backward_call(x) {
                    let keeps = x.keyword("retain_graph").is_some_and(|v| !v.is_false());
                    retained |= keeps;
                    frees |= !keeps;
                }
                false
            });
        });
        // `opt.step()`, `scaler.step(opt)`: the parameters change in place.
        let steps = match &stmt.kind {
            StmtKind::Expr(e) => {
                e.as_method_call().is_some_and(|(_, m)| m == "step")
                    && crate::step::classify(e, self).is_some_and(|(k, _, _)| k.kinds().contains(crate::step::StepKinds::OPT_STEP))
            }
            _ => false,
        };
        if steps {
            self.frame_mut().stepped = true;
        } else if frees && !retained {
            self.frame_mut().graph_built = false;
        } else if !frees
            && !only_data_written(stmt)
            && (!self.frame().graph_built || self.frame().stepped)
            && self.grad_enabled()
            && self.carries_graph(value)
        {
            self.frame_mut().graph_built = true;
            self.frame_mut().stepped = false;
        }
    }
}

/// The facts a frame holds about its places (names and what hangs below
/// them), saved at an `if` so that its `else` arm starts from the state
/// before the `if` arm: the arms are exclusive, and `if sig: m = F.sigmoid(m)
/// else: m += 0.5` saves nothing the `else` arm writes.
macro_rules! frame_facts {
    (sets: [$($s:ident),*], maps: [$($m:ident: $t:ty),*]) => {
        #[derive(Clone, Default)]
        pub(super) struct FrameFacts {
            $($s: HashSet<String>,)*
            $($m: HashMap<String, $t>,)*
        }

        impl Context {
            /// The current frame's facts about its places, `None` when it
            /// holds none (nothing to put back).
            pub(super) fn frame_facts(&self) -> Option<FrameFacts> {
                let f = self.frame();
                if true $(&& f.$s.is_empty())* $(&& f.$m.is_empty())* {
                    return None;
                }
                Some(FrameFacts { $($s: f.$s.clone(),)* $($m: f.$m.clone(),)* })
            }

            /// Puts back the facts `frame_facts` saved (`None`: there were none).
            pub(super) fn restore_frame_facts(&mut self, facts: Option<&FrameFacts>) {
                let f = self.frame_mut();
                match facts {
                    Some(facts) => { $(f.$s.clone_from(&facts.$s);)* $(f.$m.clone_from(&facts.$m);)* }
                    None => { $(f.$s.clear();)* $(f.$m.clear();)* }
                }
            }

            /// After the `else` arm: what the `if` arm changed (from `before`
            /// to `after_if`) about places the `else` arm neither binds nor
            /// changes holds after the `if`; where both arms change a place,
            /// the `else` arm's fact holds, as when the arms were walked in a
            /// row.
            pub(super) fn join_if_arm(&mut self, before: Option<&FrameFacts>, after_if: Option<&FrameFacts>, else_binds: &[String]) {
                let empty = FrameFacts::default();
                let (before, after_if) = (before.unwrap_or(&empty), after_if.unwrap_or(&empty));
                let f = self.frame_mut();
                // The places the `else` arm changed a fact of, in any table
                // (`frozen` and `unfrozen_parts` describe one model together).
                let mut changed: HashSet<String> = HashSet::default();
                $(
                    changed.extend(f.$s.symmetric_difference(&before.$s).cloned());
                )*
                $(
                    changed.extend(f.$m.iter().filter(|(k, v)| before.$m.get(*k) != Some(*v)).map(|(k, _)| k.clone()));
                    changed.extend(before.$m.keys().filter(|k| !f.$m.contains_key(*k)).cloned());
                )*
                let free = |k: &str| !changed.contains(k) && !else_binds.iter().any(|b| k == b || is_below(k, b));
                $(
                    for k in after_if.$s.difference(&before.$s) {
                        if free(k) {
                            f.$s.insert(k.clone());
                        }
                    }
                    for k in before.$s.difference(&after_if.$s) {
                        if free(k) {
                            f.$s.remove(k);
                        }
                    }
                )*
                $(
                    for (k, v) in &after_if.$m {
                        if free(k) && before.$m.get(k) != Some(v) {
                            f.$m.insert(k.clone(), v.clone());
                        }
                    }
                    for k in before.$m.keys() {
                        if free(k) && !after_if.$m.contains_key(k) {
                            f.$m.remove(k);
                        }
                    }
                )*
            }
        }
    };
}

frame_facts! {
    sets: [frozen, graph, requires_grad, losses, grad_values, grad_off, batches, interval_names, few_items],
    maps: [factories: String, instances: String, unfrozen_parts: String, kinds: ValueKind, views: ViewOf, saved: memlint_diagnostics::Span, batch_loader: String, loader_iters: String, counts: i64]
}

/// The places an arm binds (assignment, loop and `with` targets, `del`),
/// nested blocks included, nested functions not: an augmented assignment
/// binds nothing new.
pub(super) fn bound_places(body: &[Stmt]) -> Vec<String> {
    let mut out = Vec::new();
    for_each_stmt_in_function(body, &mut |s| match &s.kind {
        StmtKind::Assign { targets, .. } => targets.iter().for_each(|t| collect_target_names(t, &mut out)),
        StmtKind::For { target, .. } => collect_target_names(target, &mut out),
        StmtKind::With { items, .. } => items.iter().filter_map(|i| i.target.as_ref()).for_each(|t| collect_target_names(t, &mut out)),
        StmtKind::Delete(targets) => targets.iter().for_each(|t| collect_target_names(t, &mut out)),
        _ => {}
    });
    out
}

/// `t.data = <expr>` (or `t.data[i] = <expr>`): `t` takes the result's
/// values, not its autograd history, so the graph the expression built
/// dies with the statement (`delta.data = torch.clamp(delta + alpha *
/// g.sign(), -eps, eps)` after the step's `backward()` leaves no graph
/// live).
fn only_data_written(stmt: &Stmt) -> bool {
    let data = |t: &Expr| {
        let mut t = t;
        while let ExprKind::Subscript { value, .. } = &t.kind {
            t = value;
        }
        matches!(&t.kind, ExprKind::Attribute { attr, .. } if attr == "data")
    };
    match &stmt.kind {
        StmtKind::Assign { targets, .. } => !targets.is_empty() && targets.iter().all(data),
        _ => false,
    }
}

/// Names of the log record a step returns beside its loss (`loss, log =
/// model(batch)`, fairseq's `logging_output`): dicts of numbers, read back
/// already.
const LOG_RECORD_NAMES: &[&str] = &["log", "logs", "log_dict", "logging_output", "logging_outputs", "info", "infos", "stats", "metrics"];
