//! The statement-order walk: the module pre-scan, statements and their
//! expressions in order, with the visitor called before each statement's
//! effects are applied.

use super::*;

impl Context {
    pub(super) fn prescan_module(&mut self, body: &[Stmt]) {
        // Classes deriving (transitively, within the file) from nn.Module.
        let mut classes: Vec<(&str, &[Expr])> = Vec::new();
        fn collect<'b>(
            body: &'b [Stmt],
            out: &mut Vec<(&'b str, &'b [Expr])>,
            imports: &mut Vec<(String, Option<String>)>,
            functions: &mut Vec<String>,
            frozen: &mut Vec<String>,
        ) {
            for s in body {
                match &s.kind {
                    StmtKind::Class(c) => {
                        let crate::ir::Class { name, bases, body, .. } = &**c;
                        out.push((name, bases));
                        collect(body, out, imports, functions, frozen);
                    }
                    StmtKind::Import(bindings) => {
                        for b in bindings {
                            imports.push((b.local.clone(), Some(b.qualified.clone())));
                        }
                    }
                    StmtKind::Function(f) => {
                        functions.push(f.name.clone());
                        collect(&f.body, out, imports, functions, frozen);
                    }
                    _ => {
                        if let StmtKind::For { target, iter, body, .. } = &s.kind {
                            if let Some(model) = frozen_by_loop(target, iter, body) {
                                frozen.push(model.rsplit('.').next().unwrap_or(&model).to_string());
                            }
                        }
                        for block in s.child_blocks() {
                            collect(block, out, imports, functions, frozen);
                        }
                    }
                }
            }
        }
        let mut imports = Vec::new();
        let mut functions = Vec::new();
        let mut frozen = Vec::new();
        collect(body, &mut classes, &mut imports, &mut functions, &mut frozen);
        let mut facts = ModuleFacts::default();
        for (l, q) in &mut imports {
            if let Some(q) = q {
                *q = self.module.resolve_relative(q);
                let (_, targets) = facts
                    .import_targets
                    .entry(name_hash(l), |(k, _)| k == l, |(k, _)| name_hash(k))
                    .or_insert_with(|| (l.clone(), Vec::new()))
                    .into_mut();
                if !targets.contains(q) {
                    targets.push(q.clone());
                }
            }
        }
        // Top-level definitions (also inside top-level `if`/`try` blocks).
        fn top_defs(body: &[Stmt], out: &mut Vec<String>) {
            for s in body {
                match &s.kind {
                    StmtKind::Function(f) => out.push(f.name.clone()),
                    StmtKind::Class(c) => out.push(c.name.clone()),
                    StmtKind::If { .. } | StmtKind::Try(_) | StmtKind::Block(_) => {
                        s.child_blocks().for_each(|b| top_defs(b, out))
                    }
                    _ => {}
                }
            }
        }
        let mut defs = Vec::new();
        top_defs(body, &mut defs);
        for d in defs {
            let q = self.qualify(&d);
            facts.module_defs.insert(d, q);
        }
        for s in body {
            if let StmtKind::Function(f) = &s.kind {
                let frozen = frozen_params(f);
                if !frozen.is_empty() {
                    facts.freezers.insert(f.name.clone(), frozen);
                }
            }
        }
        // Module-level imports (not those of functions and classes), for
        // function bodies that run after the module did.
        fn module_level(body: &[Stmt], module: &crate::index::ModuleInfo, out: &mut ImportMap) {
            for s in body {
                match &s.kind {
                    StmtKind::Import(bindings) => {
                        for b in bindings {
                            out.insert_if_absent(b.local.clone(), Some(module.resolve_relative(&b.qualified)));
                        }
                    }
                    StmtKind::Function(_) | StmtKind::Class(_) => {}
                    _ => s.child_blocks().for_each(|b| module_level(b, module, out)),
                }
            }
        }
        module_level(body, &self.module, &mut facts.module_level_imports);
        facts.functions = functions.into_iter().collect();
        facts.frozen_names = frozen.into_iter().collect();
        facts.torch_imported = imports.iter().any(|(_, q)| {
            q.as_deref().is_some_and(|q| q == "torch" || q.starts_with("torch.") || q == "tch" || q.starts_with("tch."))
        });
        self.torch_imported = facts.torch_imported;
        self.facts = Arc::new(facts);
        // Module-level imports are visible to classes defined before them in
        // the file only at run time; resolve bases with all imports seen.
        let mut all = ImportMap::default();
        for (l, q) in imports {
            all.insert_if_absent(l, q);
        }
        let saved = std::mem::replace(&mut self.module_imports, all);
        let mut changed = true;
        while changed {
            changed = false;
            for (name, bases) in &classes {
                if self.module_classes.contains(*name) {
                    continue;
                }
                let is_module = bases.iter().any(|b| {
                    if let Some(q) = self.qualified_name(b) {
                        return q.is_any(&["torch.nn.Module", "torch.nn.modules.module.Module"])
                            || (q.starts_with_module("torch.nn") && q.last().starts_with(|c: char| c.is_ascii_uppercase()))
                            || q.as_str().contains("LightningModule");
                    }
                    b.as_name().is_some_and(|n| self.module_classes.contains(n))
                });
                if is_module {
                    self.module_classes.insert((*name).to_string());
                    changed = true;
                }
            }
        }
        self.module_imports = saved;
        if let Some(facts) = Arc::get_mut(&mut self.facts) {
            facts.module_classes = self.module_classes.clone();
        }
    }

    /// The pre-scan's facts of the module being walked, for a later walk of
    /// the same parsed module ([`ContextOptions::module_facts`]).
    pub fn module_facts(&self) -> Arc<ModuleFacts> {
        self.facts.clone()
    }

    /// Rust: the statements of the block expressions and closure bodies a
    /// statement holds (`let y = { ... };`, `tch::no_grad(|| { ... })`),
    /// walked after its expressions, in source order. A closure passed to
    /// `tch::no_grad` runs with grad off, to `tch::with_grad` with grad on.
    fn walk_nested_blocks(&mut self, stmt: &Stmt, visitor: &mut dyn Visitor) {
        // The outermost blocks and closures of the statement's expressions,
        // with the grad mode a `tch::no_grad(...)` call around them sets.
        fn collect<'e>(e: &'e Expr, cx: &Context, mode: Option<bool>, out: &mut Vec<(&'e Expr, Option<bool>)>) {
            match &e.kind {
                ExprKind::Block(_) | ExprKind::Closure(_) => out.push((e, mode)),
                ExprKind::Call { .. } => {
                    let set = cx.callee_name(e).and_then(|q| match q.as_str() {
                        "tch.no_grad" => Some(false),
                        "tch.with_grad" => Some(true),
                        _ => None,
                    });
                    e.for_each_child(|c| collect(c, cx, set.or(mode), out));
                }
                _ => e.for_each_child(|c| collect(c, cx, mode, out)),
            }
        }
        let mut nested = Vec::new();
        stmt.for_each_expr(|e| collect(e, self, None, &mut nested));
        for (e, mode) in nested {
            let stmts = match &e.kind {
                ExprKind::Block(b) => &b.stmts,
                ExprKind::Closure(c) => match &c.body.kind {
                    ExprKind::Block(b) => &b.stmts,
                    _ => continue,
                },
                _ => continue,
            };
            if stmts.is_empty() {
                continue;
            }
            if let Some(m) = mode {
                self.frame_mut().with_grad.push(Some(m));
            }
            self.walk_body(stmts, visitor);
            if mode.is_some() {
                self.frame_mut().with_grad.pop();
            }
        }
    }

    pub(super) fn walk_body(&mut self, body: &[Stmt], visitor: &mut dyn Visitor) {
        for stmt in body {
            self.walk_stmt(stmt, visitor);
        }
    }

    pub(super) fn visit_exprs(&self, stmt: &Stmt, visitor: &mut dyn Visitor) {
        if let (StmtKind::If { test, .. } | StmtKind::While { test, .. }, true) = (&stmt.kind, self.torch_imported) {
            self.note_condition_sync(test);
        }
        fn rec(e: &Expr, cx: &Context, v: &mut dyn Visitor) {
            if matches!(e.kind, ExprKind::Call { .. }) && cx.torch_imported {
                cx.note_pipeline(e);
                cx.note_sync(e);
            }
            // Compatibility, copied reads and writes through are for the
            // rules' queries only.
            if cx.options.summary_only {
                v.visit_expr(e, cx);
                e.for_each_child(|c| rec(c, cx, v));
                return;
            }
            // The node itself already counts: a rule checking the operands
            // of `a if TORCH_2_4 else b` from the node sees compatibility code.
            let compat = match &e.kind {
                ExprKind::IfExp { test, .. } => cx.is_version_guard(test),
                ExprKind::Call { func, .. } => {
                    matches!(func.as_name(), Some("isinstance" | "issubclass" | "hasattr" | "getattr"))
                }
                _ => false,
            };
            if compat {
                cx.compat_expr.set(cx.compat_expr.get() + 1);
            }
            let copied = match (e.as_method_call(), &e.kind) {
                (Some((recv, m)), _) if COPYING_METHODS.contains(&m) => Some(recv.id),
                (None, ExprKind::Attribute { value, attr, .. }) if METADATA_ATTRIBUTES.contains(&attr.as_str()) => Some(value.id),
                _ => None,
            };
            // A comprehension over data: its first expression is what it
            // iterates.
            let over_data =
                matches!(&e.kind, ExprKind::Comprehension(c) if c.generators.first().is_some_and(|g| cx.is_data_iterable(&g.iter)));
            if over_data {
                cx.data_comprehension.set(cx.data_comprehension.get() + 1);
            }
            // A comprehension's targets bind in its own scope.
            let comp = match &e.kind {
                ExprKind::Comprehension(c) => {
                    let bindings = cx.comp_bindings(c);
                    let n = bindings.len();
                    cx.comp_scope.borrow_mut().extend(bindings);
                    n
                }
                _ => 0,
            };
            let written = match e.as_method_call() {
                Some((recv, m)) if m.ends_with('_') && !m.ends_with("__") => Some(recv.id),
                _ => None,
            };
            // Rust: `tch::no_grad(|| net.forward(x))` runs its closure with grad off.
            let no_grad = cx.language == Language::Rust
                && matches!(e.kind, ExprKind::Call { .. })
                && cx.callee_name(e).is_some_and(|q| q.is("tch.no_grad"));
            if no_grad {
                cx.no_grad_expr.set(cx.no_grad_expr.get() + 1);
            }
            let index = is_index_call(e);
            if index {
                cx.index_expr.set(cx.index_expr.get() + 1);
            }
            v.visit_expr(e, cx);
            if let Some(id) = copied {
                cx.copied_reads.borrow_mut().push(id);
            }
            if let Some(id) = written {
                cx.written.borrow_mut().push(id);
            }
            e.for_each_child(|c| rec(c, cx, v));
            if copied.is_some() {
                cx.copied_reads.borrow_mut().pop();
            }
            if written.is_some() {
                cx.written.borrow_mut().pop();
            }
            if compat {
                cx.compat_expr.set(cx.compat_expr.get() - 1);
            }
            if over_data {
                cx.data_comprehension.set(cx.data_comprehension.get() - 1);
            }
            if no_grad {
                cx.no_grad_expr.set(cx.no_grad_expr.get() - 1);
            }
            if index {
                cx.index_expr.set(cx.index_expr.get() - 1);
            }
            if comp > 0 {
                let mut scope = cx.comp_scope.borrow_mut();
                let keep = scope.len() - comp;
                scope.truncate(keep);
            }
        }
        stmt.for_each_expr(|e| rec(e, self, visitor));
    }

    /// Whether an `if` test reads a local bound to an interval test
    /// (`if g_regularize:` after `g_regularize = i % k == 0`).
    fn names_an_interval(&self, test: &Expr) -> bool {
        let names = &self.frame().interval_names;
        !names.is_empty() && test.any(&mut |e| e.as_name().is_some_and(|n| names.contains(n)))
    }

    pub(super) fn walk_stmt(&mut self, stmt: &Stmt, visitor: &mut dyn Visitor) {
        self.assign_targets.clear();
        self.data_swap = None;
        self.current_stmt = stmt.span;
        self.current_stmt_id = stmt.id;
        self.assign_local = match &stmt.kind {
            StmtKind::Assign { targets, .. } if targets.len() == 1 => targets[0].as_name().map(str::to_string),
            _ => None,
        };
        self.index_stmt = !self.frame().index_locals.is_empty() && {
            let locals = &self.frame().index_locals;
            match &stmt.kind {
                StmtKind::Assign { .. } => self.assign_local.as_ref().is_some_and(|n| locals.contains(n)),
                StmtKind::Expr(e) => e
                    .as_method_call()
                    .is_some_and(|(recv, m)| m.ends_with('_') && recv.as_name().is_some_and(|n| locals.contains(n))),
                _ => false,
            }
        };
        if let StmtKind::Assign { targets, value, .. } = &stmt.kind {
            self.assign_targets.extend(targets.iter().map(|t| t.id));
            if targets.iter().any(|t| matches!(&t.kind, ExprKind::Attribute { attr, .. } if attr == "data")) {
                self.data_swap = self.swap_kind(value);
            }
        }
        if let StmtKind::Class(c) = &stmt.kind {
            self.class_attrs = Some(class_attr_kinds(&c.body, self));
        }
        visitor.visit_stmt(stmt, self);
        // `buf[i] = x.data` copies the values into `buf`: no alias survives.
        let copied = match &stmt.kind {
            StmtKind::Assign { targets, value, .. } if targets.iter().all(|t| matches!(t.kind, ExprKind::Subscript { .. })) => {
                Some(value.id)
            }
            _ => None,
        };
        if let Some(id) = copied {
            self.copied_reads.borrow_mut().push(id);
        }
        // `x[0] = v` / `x[0] += v` write through `x`.
        let stores: Vec<ExprId> = match &stmt.kind {
            StmtKind::Assign { targets, .. } => targets
                .iter()
                .filter_map(|t| match &t.kind {
                    ExprKind::Subscript { value, .. } => Some(value.id),
                    _ => None,
                })
                .collect(),
            StmtKind::AugAssign { target, .. } => match &target.kind {
                ExprKind::Subscript { value, .. } => vec![value.id],
                _ => vec![target.id],
            },
            StmtKind::Delete(targets) => targets.iter().map(|t| t.id).collect(),
            _ => Vec::new(),
        };
        let n_stores = stores.len();
        self.written.borrow_mut().extend(stores);
        self.visit_exprs(stmt, visitor);
        if copied.is_some() {
            self.copied_reads.borrow_mut().pop();
        }
        {
            let mut w = self.written.borrow_mut();
            let keep = w.len() - n_stores;
            w.truncate(keep);
        }
        if self.language == Language::Rust {
            self.walk_nested_blocks(stmt, visitor);
        }
        match &stmt.kind {
            StmtKind::Import(bindings) => {
                for b in bindings {
                    if b.qualified == "torch" || b.qualified.starts_with("torch.") || b.qualified == "tch" || b.qualified.starts_with("tch.") {
                        self.torch_imported = true;
                    }
                    let qualified = self.module.resolve_relative(&b.qualified);
                    if self.frames.len() == 1 {
                        self.module_imports.insert(b.local.clone(), Some(qualified));
                    } else {
                        self.frame_mut().imports.insert(b.local.clone(), Some(qualified));
                    }
                }
            }
            StmtKind::Expr(e) => self.apply_call_effects(e),
            StmtKind::Assign { targets, value, annotation } => {
                self.apply_call_effects(value);
                // `let x: Tensor = ...` (Rust), `x: torch.Tensor = ...`: the
                // type says what the value may not show.
                let declared = annotation.as_deref().and_then(|a| self.annotation_kind(a));
                for t in targets {
                    if let ExprKind::Attribute { value: obj, attr, .. } = &t.kind {
                        if attr == "requires_grad" {
                            if let Some(d) = obj.dotted() {
                                let f = self.frame_mut();
                                if value.is_true() {
                                    f.grad_off.remove(d.as_str());
                                    f.requires_grad.insert(d.into());
                                } else {
                                    f.requires_grad.remove(d.as_str());
                                    f.grad_off.insert(d.into());
                                }
                            }
                            continue;
                        }
                    }
                    self.bind(t, Some(value));
                    if self.torch_imported {
                        self.bind_loader_iteration(t, value);
                    }
                    if let (Some(k), Some(d)) = (declared, t.as_name()) {
                        self.frame_mut().kinds.entry(d.to_string()).or_insert(k);
                    }
                    // `g_regularize = i % args.g_reg_every == 0`.
                    if let Some(d) = t.as_name().filter(|_| is_interval_guard(value)) {
                        self.frame_mut().interval_names.insert(d.to_string());
                    }
                    // `DEVICE = torch.device("cpu")`; `device = "cuda:0"`, `device = accelerator()`.
                    if let Some(d) = t.as_name() {
                        if crate::api::is_cpu_device(value) {
                            self.frame_mut().cpu_devices.insert(d.to_string());
                        } else if crate::api::is_device_value(value) || d.as_bytes().windows(6).any(|w| w.eq_ignore_ascii_case(b"device")) {
                            self.frame_mut().other_devices.insert(d.to_string());
                        } else if self.is_cuda_tensor_type(value) {
                            self.frame_mut().cuda_types.insert(d.to_string());
                        }
                    }
                }
            }
            StmtKind::AugAssign { target, value, .. } => {
                if let Some(d) = target.dotted() {
                    if self.carries_graph(value) {
                        self.frame_mut().graph.insert(d.into());
                    }
                }
            }
            StmtKind::For { target, iter, body, orelse } => {
                let calls_backward = self.body_calls_backward(body);
                let kind = self.classify_loop(iter, body, calls_backward);
                // Frozen models are known to the summaries too (a call site records which arguments it passes frozen).
                if let Some(model) = frozen_by_loop(target, iter, body) {
                    self.frame_mut().frozen.insert(model);
                } else if let Some(model) = unfrozen_by_loop(target, iter, body) {
                    self.note_unfrozen(&model);
                } else if let Some((model, kept)) = frozen_but_named_by_loop(target, iter, body) {
                    self.frame_mut().frozen.insert(model);
                    self.note_unfrozen(&kept);
                }
                let mut frame = self.loop_frame(kind, calls_backward, body);
                // `for x, y in loader: ...; break` (`if j >= 9: break`): a few batches.
                let stops = crate::facts::scan::stops_after_a_few(body);
                frame.over_data = self.is_data_iterable(iter) && !stops;
                frame.over_files = self.lists_files(iter);
                (frame.few, frame.count) = (self.iterates_few_items(iter) || stops, self.loop_count(iter));
                frame.phase = super::loops::phase_variable(target, iter, body);
                frame.over_parameters = is_parameter_iterable(iter)
                    || matches!(unwrap_iter_call(iter).as_method_call(), Some((_, "named_parameters")))
                    || (self.function_words().contains(crate::ir::Words::GRAD) && crate::facts::scan::reads_grad_of(target, body));
                let mut targets = Vec::new();
                collect_target_names(target, &mut targets);
                frame.resets.extend(targets.iter().cloned());
                // The loop variable is new in every iteration, everywhere in the body.
                let mut everywhere: HashSet<StmtId> = HashSet::default();
                for_each_stmt_in_function(body, &mut |s| {
                    everywhere.insert(s.id);
                });
                for t in &targets {
                    frame.unconditional.insert(t.clone(), everywhere.clone());
                }
                self.bind_loop_target(target, iter, stops);
                if let Some(layer) = layer_loop_variable(target, iter, body) {
                    self.frame_mut().kinds.insert(layer.into(), ValueKind::Module);
                }
                self.walk_loop(stmt, frame, calls_backward, body, orelse, visitor);
            }
            StmtKind::While { test: _, body, orelse } => {
                let calls_backward = self.body_calls_backward(body);
                let kind = if calls_backward { LoopKind::Train } else { LoopKind::Other };
                let frame = self.loop_frame(kind, calls_backward, body);
                self.walk_loop(stmt, frame, calls_backward, body, orelse, visitor);
            }
            StmtKind::If { test, body, orelse } => {
                let guard = usize::from(self.is_version_guard(test));
                let (body_other, else_other) = framework_branches(test);
                // An interval around a backward of its own (`if step % n_critic == 0:`) is a training cadence.
                let interval = usize::from((is_interval_guard(test) || self.names_an_interval(test)) && !self.body_calls_backward(body));
                let option = usize::from(is_option_guard(test));
                let logging = usize::from(is_logging_guard(test));
                let debug = usize::from(logging > 0 && crate::facts::guards::is_debug_guard(test));
                // Only rules ask whether a branch is rarely taken: the
                // summary walk skips the tests.
                let (never_body, never_else, flag_known) = if self.options.summary_only {
                    (false, false, false)
                } else {
                    match self.fixed_flag_arms(test) {
                        Some((body, orelse)) => (body, orelse, true),
                        None => {
                            let (body, orelse) = self.optional_argument_arms(test);
                            (body, orelse, false)
                        }
                    }
                };
                let rare = usize::from(
                    !self.options.summary_only
                        && (never_body
                            || (!flag_known && self.tests_an_off_option(test))
                            || crate::facts::guards::tests_for_nan(test)
                            || crate::facts::guards::tests_an_unset_local(test, &self.frame().unset_locals)),
                );
                let rare_else = usize::from(never_else || crate::facts::guards::tests_a_set_local(test, &self.frame().set_locals));
                self.rare_branch_depth += rare;
                let once = usize::from(!self.options.summary_only && (crate::facts::guards::is_run_once_guard(test, body) || crate::facts::guards::tests_an_init_mode(test, &|n| self.is_function_param(n))));
                self.once_depth += once;
                self.option_depth += option;
                self.logging_depth += logging;
                self.debug_depth += debug;
                self.compat_depth += guard;
                self.non_torch_depth += usize::from(body_other);
                self.interval_depth += interval;
                // Must-facts join: after the `if`, a fact holds when it
                // holds at the end of every arm that falls through.
                let before = self.frame().eval_mode;
                let built_before = self.frame().graph_built;
                let stepped_before = self.frame().stepped;
                // The `else` arm starts from the facts before the `if` arm
                // (for the rules: the summaries read no fact an arm could
                // leak into the other).
                let isolate = !orelse.is_empty() && !self.options.summary_only;
                let facts_before = if isolate { self.frame_facts() } else { None };
                let (train_body, train_else) = crate::facts::guards::train_mode_arms(test);
                self.frame_mut().cond_depth += 1;
                self.frame_mut().train_mode_depth += train_body;
                self.walk_body(body, visitor);
                self.frame_mut().train_mode_depth -= train_body;
                self.frame_mut().train_mode_depth += train_else;
                let facts_after_if = if isolate { self.frame_facts() } else { None };
                if isolate {
                    self.restore_frame_facts(facts_before.as_ref());
                }
                let after_body = self.frame().eval_mode;
                let built_body = self.frame().graph_built;
                let stepped_body = self.frame().stepped;
                self.frame_mut().stepped = stepped_before;
                self.frame_mut().eval_mode = before;
                self.frame_mut().graph_built = built_before;
                self.interval_depth -= interval;
                self.rare_branch_depth -= rare;
                self.once_depth -= once;
                self.option_depth -= option;
                self.logging_depth -= logging;
                self.debug_depth -= debug;
                self.non_torch_depth -= usize::from(body_other);
                self.non_torch_depth += usize::from(else_other);
                self.rare_branch_depth += rare_else;
                self.walk_body(orelse, visitor);
                self.rare_branch_depth -= rare_else;
                self.frame_mut().train_mode_depth -= train_else;
                self.frame_mut().cond_depth -= 1;
                // An `if` arm that returns, raises or leaves the loop adds
                // nothing after the `if`; an `else` arm that does leaves the
                // `if` arm's facts alone.
                let (body_through, else_through) = (falls_through(body), falls_through(orelse));
                if isolate && body_through {
                    if else_through {
                        self.join_if_arm(facts_before.as_ref(), facts_after_if.as_ref(), &super::bind::bound_places(orelse));
                    } else {
                        self.restore_frame_facts(facts_after_if.as_ref());
                    }
                }
                let after_else = self.frame().eval_mode;
                let built_else = self.frame().graph_built;
                let stepped_else = self.frame().stepped;
                let through = (body_through, else_through);
                self.frame_mut().stepped = join_arms(through, stepped_before, stepped_body, stepped_else, |a, b| a && b);
                self.frame_mut().eval_mode = join_arms(through, before, after_body, after_else, |a, b| a && b);
                // May-fact join: a graph may be live after the `if` when it
                // may be at the end of an arm that falls through.
                self.frame_mut().graph_built = join_arms(through, built_before, built_body, built_else, |a, b| a || b);
                self.non_torch_depth -= usize::from(else_other);
                self.compat_depth -= guard;
            }
            StmtKind::Block(body) => self.walk_body(body, visitor),
            StmtKind::Try(t) => {
                let crate::ir::Try { body, handlers, orelse, finalbody } = &**t;
                self.frame_mut().cond_depth += 1;
                self.walk_body(body, visitor);
                for h in handlers {
                    // An `except` handler is a fallback: compatibility code.
                    self.compat_depth += 1;
                    self.handlers.push(handler_type_names(h));
                    if let Some(n) = &h.name {
                        let name = Expr::new(h.span, ExprKind::Name(n.as_str().into()));
                        self.bind(&name, None);
                    }
                    self.walk_body(&h.body, visitor);
                    self.handlers.pop();
                    self.compat_depth -= 1;
                }
                self.walk_body(orelse, visitor);
                self.walk_body(finalbody, visitor);
                self.frame_mut().cond_depth -= 1;
            }
            StmtKind::Break | StmtKind::Continue | StmtKind::Raise(_) => {}
            StmtKind::With { items, body } => {
                let mut pushed = 0;
                let mut contexts = 0;
                for it in items {
                    let callee = match &it.context.kind {
                        ExprKind::Call { func, .. } => func.as_ref(),
                        _ => &it.context,
                    };
                    if let Some(q) = self.context_callee(callee) {
                        self.frame_mut().with_contexts.push(q);
                        contexts += 1;
                    }
                    if let Some(mode) = self.grad_mode_of_context(&it.context) {
                        self.frame_mut().with_grad.push(mode);
                        pushed += 1;
                    }
                    if let Some(t) = &it.target {
                        self.bind(t, None);
                    }
                }
                self.walk_body(body, visitor);
                for _ in 0..pushed {
                    self.frame_mut().with_grad.pop();
                }
                for _ in 0..contexts {
                    self.frame_mut().with_contexts.pop();
                }
            }
            StmtKind::Function(func) => {
                // Where a function is defined says nothing of how often it
                // runs: interval and option guards and `except` handlers
                // around the `def` do not apply to its body. Compatibility
                // and other-framework branches do (the function exists only
                // on that path).
                let saved = (
                    std::mem::take(&mut self.interval_depth),
                    std::mem::take(&mut self.option_depth),
                    std::mem::take(&mut self.logging_depth),
                    std::mem::take(&mut self.debug_depth),
                    std::mem::take(&mut self.handlers),
                    std::mem::take(&mut self.rare_branch_depth),
                    std::mem::take(&mut self.once_depth),
                );
                self.enter_function(func);
                self.walk_body(&func.body, visitor);
                visitor.leave_stmt(stmt, self);
                self.frames.pop();
                (self.interval_depth, self.option_depth, self.logging_depth, self.debug_depth, self.handlers, self.rare_branch_depth, self.once_depth) =
                    saved;
                // The function name now binds a function, not an import.
                self.shadow(&func.name);
            }
            StmtKind::Class(c) => {
                let crate::ir::Class { name, bases, body, .. } = &**c;
                if bases.iter().any(|b| {
                    self.qualified_name(b).is_some_and(|q| q.is_any(&["torch.autograd.Function", "torch.autograd.function.Function"]))
                }) {
                    self.autograd_functions.insert(name.clone());
                }
                self.class_stack.push(name.clone());
                let qualname = self.qualname_for(name);
                let attrs = self.class_attrs.take().unwrap_or_else(|| class_attr_kinds(body, self));
                let super::kinds::ClassAttrFacts { frozen, instances, alternatives, layers } = class_attr_facts(body, self);
                if !alternatives.is_empty() {
                    self.class_alternatives.insert(qualname.clone(), alternatives);
                }
                self.class_frozen.insert(qualname.clone(), frozen);
                crate::facts::scan::freezes_itself(body).map(|f| self.class_self_frozen.insert(qualname.clone(), f));
                if !self.options.summary_only {
                    let accessors = super::kinds::self_accessors(body);
                    if !accessors.is_empty() {
                        self.class_accessors.insert(qualname.clone(), accessors);
                    }
                    let off = super::kinds::off_by_default_options(body);
                    if !off.is_empty() {
                        self.class_off_options.insert(qualname.clone(), off);
                    }
                    let flags = super::kinds::flag_options(body);
                    if !flags.is_empty() {
                        self.class_flag_options.insert(qualname.clone(), flags);
                    }
                }
                self.class_instances.insert(qualname.clone(), instances);
                self.class_layers.insert(qualname.clone(), layers);
                // A class with a `forward` method or its own parameters is
                // model code even when its base (`PreTrainedModel`) is
                // imported from elsewhere; merely holding a model (a trainer)
                // does not count.
                let defines_forward =
                    body.iter().any(|s| matches!(&s.kind, StmtKind::Function(f) if f.name == "forward"));
                if defines_forward || attrs.values().any(|k| *k == ValueKind::Parameter) {
                    self.module_classes.insert(name.clone());
                }
                self.class_params.insert(name.clone(), attrs);
                // The class body is a scope of its own: `amp = False` in it
                // does not hide a module-level `amp` from the rest of the file.
                self.frames.push(Frame { is_class: true, name: Some(name.clone()), qualname: Some(qualname), ..Frame::default() });
                self.walk_body(body, visitor);
                self.frames.pop();
                self.class_stack.pop();
                self.shadow(name);
            }
            StmtKind::Delete(targets) => {
                for t in targets {
                    if let Some(d) = t.dotted() {
                        let f = self.frame_mut();
                        f.kinds.remove(d.as_str());
                        f.graph.remove(d.as_str());
                        f.requires_grad.remove(d.as_str());
                    }
                }
            }
            StmtKind::Return(_) | StmtKind::Other(_) | StmtKind::Declare { .. } => {}
        }
        self.update_graph_state(stmt);
    }

    /// A loop's body in its frame, then its `else` block. A training
    /// loop's iteration starts with no graph of its own built; after the
    /// loop a graph may be live if one was before it (no iteration ran) or
    /// one is at the end of its body. The loop's checks run once the body
    /// is walked, inside the frame.
    fn walk_loop(
        &mut self,
        stmt: &Stmt,
        mut frame: LoopFrame,
        training: bool,
        body: &[Stmt],
        orelse: &[Stmt],
        visitor: &mut dyn Visitor,
    ) {
        frame.id = stmt.id;
        self.frame_mut().loops.push(frame);
        let before = self.frame().graph_built;
        let stepped_before = self.frame().stepped;
        if training {
            self.frame_mut().graph_built = false;
        }
        self.walk_body(body, visitor);
        visitor.leave_stmt(stmt, self);
        self.frame_mut().graph_built |= before;
        self.frame_mut().stepped &= stepped_before;
        self.frame_mut().loops.pop();
        self.walk_body(orelse, visitor);
    }

}

/// A flag after an `if`: `both` of the arms' values when both arms fall
/// through (`through`: the `if` arm's, the `else` arm's), the value of the
/// one that does, or the value before the `if` when neither does.
fn join_arms(through: (bool, bool), before: bool, body: bool, orelse: bool, both: fn(bool, bool) -> bool) -> bool {
    match through {
        (true, true) => both(body, orelse),
        (true, false) => body,
        (false, true) => orelse,
        (false, false) => before,
    }
}

/// Whether control can leave `body` at its end: its last statement is not
/// a `return`, `raise`, `break` or `continue`.
fn falls_through(body: &[Stmt]) -> bool {
    !matches!(
        body.last().map(|s| &s.kind),
        Some(StmtKind::Return(_) | StmtKind::Raise(_) | StmtKind::Break | StmtKind::Continue)
    )
}
