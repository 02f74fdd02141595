//! Loops and their data: what a loop iterates (a loader, a dataset, batches,
//! files, parameters, a range), whether its body runs `backward()`, the
//! frame it pushes, and what its target and the batches drawn from it bind.

use super::*;

impl Context {
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
            few: false,
            count: None,
            phase: None,
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
        // `for w in ws_test:` over `ws_test = [0.0, 0.5, 2.0]`: a few
        // settings, whatever the name says.
        if self.iterates_few_items(iter) {
            return LoopKind::Other;
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
        if self.kind_of_binding(d) == Some(ValueKind::DataLoader) {
            return true;
        }
        // `train_iter`, `data_iter`: the d2l books' name for a loader
        // (not a count: `n_iter`, `max_iter`).
        let w = words(d);
        w.iter().any(|w| w.ends_with("loader") || w == "dl" || w == "iterator")
            || (w.len() >= 2
                && w.last().is_some_and(|l| l == "iter")
                && !w.iter().any(|x| matches!(x.as_str(), "n" | "num" | "max" | "min" | "total" | "cur" | "start" | "end")))
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
        // `next(it)`, or Python 2's `it.next()` that old notebooks keep.
        let arg = match value.as_method_call() {
            Some((recv, "next")) if args.is_empty() => recv,
            _ if f.as_name() == Some("next") => match args.first() {
                Some(a) => a,
                None => return,
            },
            _ => return,
        };
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

    /// Binds a `for` loop's target over `iter`. A loop that `peeks` (it
    /// leaves after its first batches, `for x, y in loader: break`) does
    /// not count as the loop that iterates a loader: the training loop
    /// that follows, or the helper the loader is passed to, decides where
    /// its batches go.
    pub(super) fn bind_loop_target(&mut self, target: &Expr, iter: &Expr, peeks: bool) {
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
            // `for k, v in batch.items():` over a loader's batch: its parts.
            if let (Some(base), Some(n)) = (self.batch_base(c).map(str::to_string), e.as_name()) {
                let loader = self.frame().batch_loader.get(&base).cloned();
                let f = self.frame_mut();
                f.batches.insert(n.to_string());
                if let Some(l) = loader {
                    f.batch_loader.insert(n.to_string(), l);
                }
            }
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
            if !peeks {
                self.pipeline.borrow_mut().iterated.push(d.clone());
            }
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
    /// collection named for data (`val_loader`, `test_set`, `testloader`,
    /// `batches`, `enumerate(tqdm(dataset))`).
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
        let plain = |w: &str| DATA_WORDS.contains(&w) && !(counts && matches!(w, "iter" | "iterator"));
        // One word of two (`testloader`, `trainset`, `valdata`).
        let data_word = |w: &str| {
            plain(w)
                || ["train", "test", "val", "valid", "eval", "dev"]
                    .iter()
                    .any(|p| w.strip_prefix(p).is_some_and(|rest| !rest.is_empty() && plain(rest)))
        };
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

/// The variable of a loop over phases: a literal list or tuple of strings,
/// one naming training and one evaluation (`["train", "val"]`), whose body
/// calls `backward()` only under a test of the variable (`if phase ==
/// "train":`, `if phase == 'train' and ...`).
pub(super) fn phase_variable(target: &Expr, iter: &Expr, body: &[Stmt]) -> Option<String> {
    let var = target.as_name()?;
    let ExprKind::Sequence(items) = &iter.kind else { return None };
    let words: Vec<&str> = items.iter().filter_map(|i| match &i.kind {
        ExprKind::Literal(crate::ir::Literal::Str(s)) => Some(s.as_str()),
        _ => None,
    }).collect();
    let train = words.iter().any(|w| w.eq_ignore_ascii_case("train") || w.eq_ignore_ascii_case("training"));
    let eval = words.iter().any(|w| matches!(w.to_ascii_lowercase().as_str(), "val" | "valid" | "validation" | "test" | "eval" | "dev"));
    if words.len() != items.len() || !train || !eval {
        return None;
    }
    let mut guarded = false;
    crate::ir::for_each_stmt_in_function(body, &mut |s| {
        if let StmtKind::If { test, body: arm, orelse } = &s.kind {
            let tests_var = test.any(&mut |x| x.as_name() == Some(var));
            guarded |= tests_var && (crate::facts::scan::calls_backward(arm) || crate::facts::scan::calls_backward(orelse));
        }
    });
    guarded.then(|| var.to_string())
}

/// A literal list or tuple of at most 16 constants (`[0.0, 0.5, 2.0]`,
/// `("val", "test")`, pairs of constants): settings, not data.
pub(super) fn few_literal_items(e: &Expr) -> bool {
    fn constant(e: &Expr) -> bool {
        match &e.kind {
            ExprKind::Literal(_) => true,
            ExprKind::Unary { operand, .. } => constant(operand),
            ExprKind::Sequence(items) => items.iter().all(constant),
            _ => false,
        }
    }
    matches!(&e.kind, ExprKind::Sequence(items) if items.len() as i64 <= crate::facts::FEW_ITERATIONS && items.iter().all(constant))
}

impl Context {
    /// Whether a `for` loop over `iter` runs a few fixed iterations:
    /// `range(k)` or `range(a, b)` with literals at most 16 apart, a
    /// literal list or tuple of at most 16 constants, or a name the function
    /// (or the module) binds to one, maybe under `enumerate`, `reversed`
    /// or `zip` (one of whose arguments is few: it stops at the shortest).
    pub(super) fn iterates_few_items(&self, iter: &Expr) -> bool {
        if few_literal_items(iter) {
            return true;
        }
        if let Some(n) = iter.as_name() {
            return self.frame().few_items.contains(n) || (self.frames.len() > 1 && self.module_level(n, |f| f.few_items.contains(n).then_some(())).is_some());
        }
        let Some((func, args, _)) = iter.as_call() else { return false };
        match (func.as_name(), &args[..]) {
            (Some("range"), _) => self.loop_count(iter).is_some_and(|k| k <= crate::facts::FEW_ITERATIONS),
            (Some("enumerate" | "reversed"), [inner]) => self.iterates_few_items(inner),
            (Some("zip"), items) if !items.is_empty() => items.iter().any(|i| self.iterates_few_items(i)),
            _ => false,
        }
    }

    /// How many times a loop over `iter` runs, where the code says:
    /// `range(k)` or `range(a, b)` of integer literals or of names the
    /// function (or the module) binds to one, maybe under `enumerate` or
    /// `reversed`.
    pub(super) fn loop_count(&self, iter: &Expr) -> Option<i64> {
        let (func, args, _) = iter.as_call()?;
        let int = |e: &Expr| match &e.kind {
            ExprKind::Literal(crate::ir::Literal::Int(k)) => Some(*k),
            ExprKind::Name(n) => self.frame().counts.get(n.as_str()).copied().or_else(|| self.module_level(n, |f| f.counts.get(n.as_str()).copied())),
            _ => None,
        };
        match (func.as_name(), &args[..]) {
            (Some("range"), [n]) => int(n),
            (Some("range"), [a, b]) => Some(int(b)?.saturating_sub(int(a)?)),
            (Some("enumerate" | "reversed"), [inner]) => self.loop_count(inner),
            _ => None,
        }
    }
}
