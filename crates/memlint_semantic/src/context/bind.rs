//! Transfer functions of the walk: entering functions and loops, binding
//! assignment targets, forgetting rebound places, and the effects of calls
//! (grad mode, freezing, leaves).

use super::*;
use crate::api::nn;

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
            self.index.function(&qualname).and_then(|f| f.train_flag_name.clone())
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
        }
        if !summary_only {
            frame.unset_locals = crate::facts::scan::unset_locals(&func.body, &func.params);
        }
        // A model every caller passes frozen (`def embed(model, loader)`
        // after `freeze_model(model)` at each call) is frozen here.
        let offset = usize::from(self.frame().is_class);
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

    /// Whether a loop body calls `backward()`, itself or through a project
    /// function (in any file of the run) that reaches it.
    pub(super) fn body_calls_backward(&self, body: &[Stmt]) -> bool {
        if let Some(flag) = &self.frame().flag_param {
            if !backward_unguarded(body, flag) {
                return false;
            }
        }
        if self.function_words().contains(Words::BACKWARD) && calls_backward(body) {
            return true;
        }
        let helpers = &self.frame().backward_helpers;
        if !helpers.is_empty() && calls_one_of(body, helpers) {
            return true;
        }
        // Without an index (one file's first pass) there is nothing to follow.
        if self.index.is_empty() {
            return false;
        }
        let mut found = false;
        for_each_expr_in_function(body, &mut |e| {
            if !found {
                if let Some((func, _, _)) = e.as_call() {
                    if let Some(q) = self.project_name(func).and_then(|q| self.index.resolve_function(&q)) {
                        found = self.index.reaches_backward(&q);
                    }
                }
            }
        });
        found
    }

    /// The facts of a `for`/`while` loop about to be walked. Only loops in
    /// or under a training loop are asked whether a name is re-created
    /// every iteration (the CFG is built for them), and only when rules run.
    pub(super) fn loop_frame(&self, kind: LoopKind, calls_backward: bool, body: &[Stmt]) -> LoopFrame {
        let in_train = kind == LoopKind::Train || self.in_training_loop();
        let rules = !self.options.summary_only;
        LoopFrame {
            kind,
            calls_backward,
            direct_step: kind == LoopKind::Eval || (kind == LoopKind::Train && self.direct_backward(body)),
            resets: if rules { assigned_names(body) } else { HashSet::default() },
            unconditional: if in_train && rules { unconditional_assigned(body) } else { HashMap::default() },
            backward_roots: if self.function_words().contains(Words::BACKWARD) { backward_roots(body) } else { HashSet::default() },
            steps_env: rules && steps_an_environment(body),
            runs_attack: rules && kind != LoopKind::Train && crate::facts::scan::runs_an_attack(body),
            over_data: false,
            over_files: false,
            over_parameters: false,
            id: StmtId::DETACHED,
            backward_before: if calls_backward && rules {
                body.iter()
                    .rev()
                    .find(|s| self.body_calls_backward(std::slice::from_ref(*s)))
                    .map_or(u32::MAX, |s| s.span.end)
            } else {
                u32::MAX
            },
        }
    }

    /// Whether a loop body calls `backward()` outside its nested loops,
    /// itself or through a project helper.
    pub(super) fn direct_backward(&self, body: &[Stmt]) -> bool {
        if self.function_words().contains(Words::BACKWARD) && backward_outside_loops(body, None) {
            return true;
        }
        if self.index.is_empty() {
            return false;
        }
        let mut outside: Vec<&Stmt> = Vec::new();
        fn collect<'b>(body: &'b [Stmt], out: &mut Vec<&'b Stmt>) {
            for s in body {
                match &s.kind {
                    StmtKind::For { .. } | StmtKind::While { .. } | StmtKind::Function(_) | StmtKind::Class { .. } => {}
                    _ => {
                        out.push(s);
                        for b in s.child_blocks() {
                            collect(b, out);
                        }
                    }
                }
            }
        }
        collect(body, &mut outside);
        outside.iter().any(|s| {
            let mut found = false;
            s.for_each_expr(|e| {
                found |= e.any(&mut |x| {
                    x.as_call().is_some_and(|(func, _, _)| {
                        self.project_name(func)
                            .and_then(|q| self.index.resolve_function(&q))
                            .is_some_and(|q| self.index.backward_per_call(&q))
                    })
                })
            });
            found
        })
    }

    pub(super) fn classify_loop(&self, iter: &Expr, _body: &[Stmt], calls_backward: bool) -> LoopKind {
        if calls_backward {
            return LoopKind::Train;
        }
        let mut names = Vec::new();
        loader_names(iter, &mut names);
        let is_eval = names.iter().any(|n| {
            words(n).iter().any(|w| {
                LOADER_EVAL_WORDS.contains(&w.as_str())
                    || LOADER_EVAL_WORDS.iter().any(|e| {
                        w.strip_prefix(e).is_some_and(|rest| {
                            matches!(rest, "loader" | "dataloader" | "dl" | "set" | "data" | "dataset" | "iter" | "batches")
                        })
                    })
            })
        });
        if is_eval {
            LoopKind::Eval
        } else {
            LoopKind::Other
        }
    }

    /// Whether the dotted name `d` holds a data loader: its kind, or a
    /// name like `train_loader`, `dl`.
    fn names_loader(&self, d: &str) -> bool {
        // `iterator`: what `train(model, iterator, optimizer)` of the
        // torchtext-era tutorials loops over (a `DataLoader` or a
        // `BucketIterator`, both yield batches).
        self.kind_of_binding(d) == Some(ValueKind::DataLoader)
            || words(d).iter().any(|w| w.ends_with("loader") || w == "dl" || w == "iterator")
    }

    /// After `target = value`: an iterator over a loader (`data_iter =
    /// iter(train_loader)`) is remembered, and what `next(data_iter)` or
    /// `next(iter(train_loader))` gives is a batch of that loader, as the
    /// variables of a loop over it are (`images, labels = next(data_iter)`).
    pub(super) fn bind_loader_iteration(&mut self, target: &Expr, value: &Expr) {
        // `iter(loader)`, and `tqdm(loader)`, which yields the same batches.
        let iter_of = |cx: &Context, e: &Expr| -> Option<String> {
            let (f, args, _) = e.as_call()?;
            let l = args.first()?.dotted()?;
            (matches!(f.as_name(), Some("iter" | "tqdm")) && cx.names_loader(&l)).then(|| l.to_string())
        };
        if let (Some(name), Some(loader)) = (target.as_name(), iter_of(self, value)) {
            self.frame_mut().loader_iters.insert(name.to_string(), loader);
            return;
        }
        let Some((f, args, _)) = value.as_call() else { return };
        if f.as_name() != Some("next") {
            return;
        }
        let Some(arg) = args.first() else { return };
        // `next(loader)` of a name for a loader: a `DataLoader` itself is no
        // iterator, so the name holds one over it (`loader =
        // sample_data(loader)`, a generator that yields its batches).
        let loader = iter_of(self, arg)
            .or_else(|| arg.as_name().and_then(|n| self.frame().loader_iters.get(n).cloned()))
            .or_else(|| arg.as_name().filter(|n| self.names_loader(n)).map(str::to_string));
        let Some(loader) = loader else { return };
        let mut flat = Vec::new();
        flatten_tuple_names(target, &mut flat);
        self.pipeline.borrow_mut().iterated.push(loader.clone());
        let f = self.frame_mut();
        for n in &flat {
            f.batches.insert(n.clone());
            f.batch_loader.insert(n.clone(), loader.clone());
        }
        if flat.len() > 1 {
            for n in flat {
                f.kinds.insert(n, ValueKind::Tensor);
            }
        }
    }

    pub(super) fn bind_loop_target(&mut self, target: &Expr, iter: &Expr) {
        let mut names = Vec::new();
        collect_target_names(target, &mut names);
        for n in &names {
            self.forget(n);
        }
        let mark_param = |cx: &mut Context, e: &Expr, frozen: bool| {
            if let Some(n) = e.as_name() {
                if frozen {
                    cx.frame_mut().grad_off.insert(n.to_string());
                } else {
                    cx.frame_mut().requires_grad.insert(n.to_string());
                }
                cx.frame_mut().kinds.insert(n.to_string(), ValueKind::Parameter);
            }
        };
        // `for p_a, p_b in zip(a.parameters(), b.parameters())`.
        if let (Some((func, args, _)), ExprKind::Sequence(elts)) = (iter.as_call(), &target.kind) {
            if func.as_name() == Some("zip") && args.len() == elts.len() {
                for (t, a) in elts.iter().zip(args) {
                    if is_parameter_iterable(a) {
                        let frozen = self.parameters_of_frozen(a);
                        mark_param(self, t, frozen);
                    }
                }
                return;
            }
        }
        // `for p in group["params"]` over an optimizer's parameter groups.
        if is_parameter_iterable(iter) && !matches!(iter.as_method_call(), Some((_, "named_parameters"))) {
            let frozen = self.parameters_of_frozen(iter);
            mark_param(self, target, frozen);
            return;
        }
        // `for k, v in losses.items()` / `for v in losses.values()` / `for l in losses`
        // of a container of graph-carrying values.
        let (container, elem) = match (iter.as_method_call(), &target.kind) {
            (Some((recv, "items")), ExprKind::Sequence(elts)) if elts.len() == 2 => (Some(recv), elts.get(1)),
            (Some((recv, "values")), _) => (Some(recv), Some(target)),
            (None, ExprKind::Name(_)) if iter.dotted().is_some() => (Some(iter), Some(target)),
            _ => (None, None),
        };
        if let (Some(c), Some(e)) = (container, elem) {
            if self.carries_graph(c) {
                if let Some(d) = e.dotted() {
                    self.frame_mut().graph.insert(d.into());
                }
            }
        }
        // `for p in model.parameters()` / `for name, p in model.named_parameters()`.
        let inner = unwrap_iter_call(iter);
        if let Some((_, method)) = inner.as_method_call() {
            if method == "parameters" {
                let frozen = self.parameters_of_frozen(inner);
                mark_param(self, target, frozen);
                return;
            }
            if method == "named_parameters" {
                let frozen = self.parameters_of_frozen(inner);
                if let ExprKind::Sequence(elts) = &target.kind {
                    if let Some(p) = elts.get(1) {
                        mark_param(self, p, frozen);
                    }
                }
                return;
            }
        }
        // tch: `for (name, t) in vs.variables()`.
        if let (Some((_, crate::api::tch::VARIABLES)), ExprKind::Sequence(elts)) = (unwrap_iter_call(iter).as_method_call(), &target.kind) {
            if let Some(t) = elts.get(1) {
                mark_param(self, t, false);
            }
            return;
        }
        // Batches of a data loader: the tuple elements are tensors. The
        // loader may be iterated through a name bound to `tqdm(loader)` or
        // `iter(loader)` (`batch_iterator = tqdm(train_dataloader)`).
        let loader = inner
            .dotted()
            .filter(|d| self.names_loader(d))
            .map(|d| d.to_string())
            .or_else(|| inner.as_name().and_then(|n| self.frame().loader_iters.get(n).cloned()));
        if let Some(d) = loader {
            let mut flat = Vec::new();
            flatten_tuple_names(batch_target(target, iter), &mut flat);
            self.frame_mut().batches.extend(flat.iter().cloned());
            self.pipeline.borrow_mut().iterated.push(d.clone());
            for n in &flat {
                self.frame_mut().batch_loader.insert(n.clone(), d.clone());
            }
            if flat.len() > 1 {
                for n in flat {
                    self.frame_mut().kinds.insert(n, ValueKind::Tensor);
                }
            }
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
        remove!(factories, instances, frozen, unfrozen_parts, kinds, graph, requires_grad, views, losses, saved, grad_values, batches, grad_off, batch_loader, loader_iters, interval_names);
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
                            let graph = match &positions {
                                Some(p) => p.contains(&i) || seeded,
                                None => carries || seeded,
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
                let instance = value.and_then(|v| v.as_call()).and_then(|(func, _, _)| self.instance_class_of_call(func));
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
                // tch: `let _guard = tch::no_grad_guard();` turns grad off
                // for the rest of the function (its block, approximated);
                // `let _ = ...` drops the guard at once and is no binding.
                if value.and_then(|v| self.callee_name(v)).is_some_and(|q| q.is(crate::api::tch::NO_GRAD_GUARD)) && d.as_str() != "_" {
                    self.frame_mut().set_grad = Some(false);
                }
                self.forget(&d);
                if frozen {
                    self.frame_mut().frozen.insert(d.to_string());
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
    fn parameters_of_frozen(&self, iter: &Expr) -> bool {
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
    /// returns (`self.getOriginalAvgG()`, [`super::values::self_accessors`]).
    fn accessed_attr(&self, call: &Expr) -> Option<String> {
        let (func, [], []) = call.as_call()? else { return None };
        let name = func.dotted()?;
        let method = name.strip_prefix("self.")?;
        let attr = self.class_accessors.get(self.current_class()?)?.get(method)?;
        Some(format!("self.{attr}"))
    }

    /// Whether `v` is a module whose parameters are all frozen: a frozen
    /// model itself, moved or switched (`frozen.to(device)`, `.eval()`), or
    /// wrapped (`nn.Sequential(frozen, nn.Flatten())`,
    /// `nn.DataParallel(frozen)`) with nothing that holds parameters beside
    /// it, or frozen as it is built (`nn.Conv2d(...).requires_grad_(False)`).
    fn is_frozen_value(&self, v: &Expr) -> bool {
        if let Some(d) = v.dotted() {
            return self.is_frozen(&d);
        }
        match v.as_method_call() {
            // `nn.Conv2d(...).requires_grad_(False)`: frozen as it is built.
            Some((_, "requires_grad_")) => {
                return v.as_call().is_some_and(|(_, args, _)| args.first().is_some_and(Expr::is_false))
                    || v.keyword("requires_grad").is_some_and(Expr::is_false);
            }
            Some((recv, method)) if nn::SAME_MODULE_METHODS.contains(&method) => return self.is_frozen_value(recv),
            _ => {}
        }
        if let Some(q) = self.callee_name(v) {
            // A deep copy keeps each parameter's `requires_grad`.
            if q.is(nn::COPY_DEEPCOPY) {
                return v.as_call().and_then(|(_, args, _)| args.first()).is_some_and(|a| self.is_frozen_value(a));
            }
            if !q.is_any(nn::PARAMETER_SHARING_WRAPPERS) {
                return false;
            }
            let (_, args, _) = v.as_call().unwrap_or((v, &[], &[]));
            let parameterless = |a: &Expr| {
                self.callee_name(a).is_some_and(|q| q.starts_with_module(nn::NN) && nn::is_parameterless_layer(q.last()))
            };
            return args.iter().any(|a| self.is_frozen_value(a))
                && args.iter().all(|a| self.is_frozen_value(a) || parameterless(a));
        }
        false
    }

    pub(super) fn is_loss_constructor(&self, v: &Expr) -> bool {
        // `nn.CrossEntropyLoss().to(device)`, `.cuda()`: the module moved is
        // the same loss.
        let mut v = v;
        while let Some((inner, "to" | "cuda" | "cpu" | "half" | "float")) = v.as_method_call() {
            v = inner;
        }
        self.callee_name(v).is_some_and(|q| q.starts_with_module("torch.nn") && q.last().ends_with("Loss"))
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

    /// Whether `iter` lists files found on disk: `sorted(glob.glob(p))`,
    /// `os.listdir(d)`, `Path(d).glob("*.jpg")`.
    pub(super) fn lists_files(&self, iter: &Expr) -> bool {
        iter.any(&mut |e: &Expr| {
            let Some((func, _, _)) = e.as_call() else { return false };
            match &func.kind {
                ExprKind::Attribute { attr, .. } if crate::api::FILE_LISTING_METHODS.contains(&attr.as_str()) => {
                    self.qualified_name(func).is_none_or(|q| q.is_any(crate::api::FILE_LISTING_FUNCTIONS))
                }
                _ => self.qualified_name(func).is_some_and(|q| q.is_any(crate::api::FILE_LISTING_FUNCTIONS)),
            }
        })
    }

    /// Whether `iter` iterates over data: a data loader (by kind), or a
    /// collection named for data (`val_loader`, `test_set`, `batches`,
    /// `enumerate(tqdm(dataset))`).
    pub(super) fn is_data_iterable(&self, iter: &Expr) -> bool {
        const DATA_WORDS: &[&str] = &[
            "loader", "loaders", "dataloader", "dataloaders", "dl", "dls", "dataset", "datasets", "ds", "data", "batches",
            "set", "sets", "iter", "iterator",
            "samples", "examples", "images", "queue", "split", "val", "valid", "validation", "test", "eval",
        ];
        let mut names = Vec::new();
        loader_names(iter, &mut names);
        // `range(n_iter)`, `range(iter)`: a count of iterations, not a
        // data iterator (`for x in train_iter`).
        let counts = iter.as_call().and_then(|(f, _, _)| f.as_name()).is_some_and(|f| f == "range");
        let data_word = |w: &str| DATA_WORDS.contains(&w) && !(counts && matches!(w, "iter" | "iterator"));
        if names.iter().any(|n| words(n).iter().any(|w| data_word(w))) {
            return true;
        }
        let loader = |e: &Expr| self.kind_of(e) == Some(ValueKind::DataLoader);
        // `tqdm(enumerate(test_loader, 0))`: what the wrappers iterate.
        loader(iter) || iter.as_call().is_some_and(|(_, args, _)| args.iter().any(loader)) || loader(unwrap_iter_call(iter))
    }

    /// Whether `v` is a loader's batch, moved or converted (`x.to(device)`,
    /// `x.cuda().float()`, `batch[0]`, `Variable(x)`): data that requires no
    /// grad.
    pub(super) fn is_batch_value(&self, v: &Expr) -> bool {
        self.batch_base(v).is_some()
    }

    /// The dotted name of the loader whose loop bound the batch `v` is
    /// made from ([`Context::is_batch_value`]), when the loop iterated a
    /// named loader.
    pub(super) fn batch_loader_of(&self, v: &Expr) -> Option<String> {
        let base = self.batch_base(v)?;
        if let Some(b) = self.comp_binding(base).filter(|b| b.name.len() == base.len()) {
            return b.loader;
        }
        self.frame().batch_loader.get(base).cloned()
    }

    /// Whether a batch is pinned on its way in `v` (`x.pin_memory()`).
    pub(super) fn pins_batch(v: &Expr) -> bool {
        match &v.kind {
            ExprKind::Subscript { value, .. } => Self::pins_batch(value),
            ExprKind::Call { func, args, .. } => match &func.kind {
                ExprKind::Attribute { attr, .. } if attr.as_str() == "pin_memory" => true,
                ExprKind::Attribute { value, .. } => Self::pins_batch(value),
                _ => args.first().is_some_and(Self::pins_batch),
            },
            _ => false,
        }
    }

    /// The batch name `v` is made from, as [`Context::is_batch_value`]
    /// reads it.
    pub(super) fn batch_base<'e>(&self, v: &'e Expr) -> Option<&'e str> {
        const SAME_DATA: &[&str] = &[
            "to", "cuda", "cpu", "float", "half", "double", "long", "int", "bfloat16", "type", "contiguous", "view",
            "reshape", "permute", "squeeze", "unsqueeze", "detach", "clone", "pin_memory",
        ];
        match &v.kind {
            ExprKind::Name(n) => (self.frame().batches.contains(n.as_str())
                || self.comp_binding(n).is_some_and(|b| b.batch && b.name.len() == n.len()))
            .then_some(n.as_str()),
            ExprKind::Subscript { value, .. } => self.batch_base(value),
            ExprKind::Call { func, args, .. } => match &func.kind {
                ExprKind::Attribute { value, attr, .. } if SAME_DATA.contains(&attr.as_str()) => self.batch_base(value),
                // `Variable(x)` (PyTorch before 0.4) wraps the same data.
                _ if func.dotted().is_some_and(|d| d == "Variable" || d.ends_with(".Variable"))
                    && !v.keyword("requires_grad").is_some_and(Expr::is_true) =>
                {
                    args.first().and_then(|a| self.batch_base(a))
                }
                _ => None,
            },
            _ => None,
        }
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
}

/// The part of a loop target that holds the batch: `(x, y)` of `for i, (x,
/// y) in enumerate(loader)` (the counter is an int), through `tqdm`,
/// `iter` and nested `enumerate` calls.
pub(super) fn batch_target<'e>(target: &'e Expr, iter: &Expr) -> &'e Expr {
    let Some((func, args, _)) = iter.as_call() else { return target };
    let Some(inner) = args.first() else { return target };
    match (func.as_name(), &target.kind) {
        (Some("enumerate"), ExprKind::Sequence(elts)) if elts.len() == 2 => batch_target(&elts[1], inner),
        (Some("tqdm" | "iter"), _) => batch_target(target, inner),
        _ => target,
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
    sets: [frozen, graph, requires_grad, losses, grad_values, grad_off, batches, interval_names],
    maps: [factories: String, instances: String, unfrozen_parts: String, kinds: ValueKind, views: ViewOf, saved: memlint_diagnostics::Span, batch_loader: String, loader_iters: String]
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
