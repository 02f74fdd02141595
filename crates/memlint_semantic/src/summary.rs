//! The per-file half of the project index: one walk of a file with the
//! semantic model, recording its definitions and call sites.

use rustc_hash::FxHashMap as HashMap;

use std::sync::Arc;

use crate::context::{class_attr_kinds, init_param_attrs, self_calls_under_options, Context, ContextOptions, ModuleFacts, OptionArm, Visitor};
use crate::facts::scan::{calls_backward, train_flag};
use crate::index::calls::{passed, LiteralFlags};
use crate::index::{is_init_name, is_setup_name, CallSite, ClassSummary, FileSummary, FunctionSummary};
use crate::ir::{for_each_stmt_in_function, BinOp, Expr, ExprKind, Module, Stmt, StmtKind, Words};
use crate::ValueKind;


/// Names of methods and functions that frameworks call for a step.
const STEP_ROOTS: &[&str] =
    &["forward", "training_step", "train_step", "validation_step", "val_step", "eval_step", "test_step", "predict_step"];

/// Summarizes one file for the project index. The walk sees only this
/// file: what depends on other files (project decorators, callers'
/// grad mode) is recorded as names and resolved by
/// [`crate::ProjectIndex::build`].
pub fn summarize(module: &Module, options: ContextOptions) -> FileSummary {
    summarize_with_facts(module, options).0
}

/// [`summarize`], and the pre-scan's facts of the module for a later walk
/// of it ([`ContextOptions::module_facts`]).
pub fn summarize_with_facts(module: &Module, options: ContextOptions) -> (FileSummary, Arc<ModuleFacts>) {
    let mut v = SummaryVisitor {
        summary: FileSummary {
            module: options.module.clone(),
            imports_torch: crate::imports_torch(module),
            torch_below: crate::api::amp::removed_module_imported(module),
            ..FileSummary::default()
        },
        functions: HashMap::default(),
        order: Vec::new(),
        is_test_file: options.is_test_file,
        facts: None,
        dynamic: Default::default(),
        volatile: Default::default(),
        option_arms: HashMap::default(),
        class_refs: Default::default(),
    };
    Context::walk(module, options, &mut v);
    let SummaryVisitor { mut summary, mut functions, order, facts, dynamic: [on, off], volatile, class_refs, .. } = v;
    summary.class_refs = class_refs.into_iter().collect();
    summary.class_refs.sort_unstable();
    summary.builder_refs.sort_unstable();
    summary.builder_refs.dedup();
    for q in &volatile {
        if let Some(f) = functions.get_mut(q) {
            f.runs_model_once = false;
        }
    }
    summary.functions = order.into_iter().filter_map(|q| functions.remove(&q)).collect();
    for f in module.body.iter().filter_map(|s| if let StmtKind::Function(f) = &s.kind { Some(f) } else { None }) {
        if crate::facts::datasets::returns_in_memory_dataset(module, f) {
            let q = if summary.module.path.is_empty() { f.name.clone() } else { format!("{}.{}", summary.module.path, f.name) };
            summary.functions.iter_mut().filter(|x| x.qualname == q).for_each(|x| x.returns_in_memory_dataset = true);
        }
    }
    summary.dynamic_calls = on.into_iter().map(|n| (n, false)).chain(off.into_iter().map(|n| (n, true))).collect();
    (summary, facts.unwrap_or_default())
}

struct SummaryVisitor {
    summary: FileSummary,
    functions: HashMap<String, FunctionSummary>,
    order: Vec<String>,
    is_test_file: bool,
    /// The walk's pre-scan of the module, taken when the walk ends.
    facts: Option<Arc<ModuleFacts>>,
    /// Methods called on receivers the file cannot resolve: with grad on
    /// (`[0]`), with grad off (`[1]`).
    dynamic: [rustc_hash::FxHashSet<String>; 2],
    /// Functions that pass `volatile=` (`Variable(x, volatile=True)`):
    /// written for PyTorch before 0.4, where that turned grad off.
    volatile: rustc_hash::FxHashSet<String>,
    /// In the methods of a class whose attribute holds one of several
    /// classes: the configuration test arm each `self.<attr>(...)` call
    /// is under, by the call's start.
    option_arms: HashMap<u32, OptionArm>,
    /// Hashes of the names the file mentions ([`FileSummary::class_refs`]).
    class_refs: rustc_hash::FxHashSet<u64>,
}

impl SummaryVisitor {
    /// `model(x, 1)` at module level outside any loop, with `model` bound
    /// to an instance of a project class: a one-off call of its `forward`
    /// (a prediction after training), kept for which optional arguments
    /// it passes.
    fn instance_call(&mut self, func: &Expr, args: &[Expr], keywords: &[crate::ir::Keyword], cx: &Context) {
        if cx.function_qualname().is_some() || cx.in_loop() {
            return;
        }
        let Some(class) = func.as_name().and_then(|n| cx.instance_class(n)) else { return };
        let (positional, keywords) = passed(args, keywords);
        self.summary.calls.push(CallSite { callee: class, positional, keywords, instance: true, ..CallSite::default() });
    }

    /// Records a submodule called in a method of its parent (`self.dp(x,
    /// x_mask, reverse=True)` with `self.dp = DurationPredictor(...)`): a
    /// call of its class's `forward` each time the method runs, kept with
    /// the instance calls. Whether `func` is one: it is recorded then.
    fn submodule_call(&mut self, func: &Expr, args: &[Expr], keywords: &[crate::ir::Keyword], cx: &Context) -> bool {
        // `self.cells[i](x)`: a module of an `nn.ModuleList` attribute.
        let (attribute, element) = match &func.kind {
            ExprKind::Subscript { value, .. } => (&**value, true),
            _ => (func, false),
        };
        let ExprKind::Attribute { value, attr, .. } = &attribute.kind else { return false };
        if value.as_name() != Some("self") {
            return false;
        }
        let Some(caller) = cx.function_qualname() else { return false };
        let key = if element { format!("self.{attr}[]") } else { format!("self.{attr}") };
        let Some(mut class) = cx.instance_class(&key) else { return false };
        // One of several classes (`if config.stochastic: self.dp = A()
        // else: self.dp = B()`): under the arm of the same test that
        // built one, it is that one; otherwise the index tells them apart
        // by what the call passes.
        let choices = cx.instance_alternatives(attr);
        let built_here = self.option_arms.get(&func.span.start).and_then(|arm| {
            let mut built = choices.iter().filter(|(_, a)| a.as_ref() == Some(arm));
            let one = built.next()?;
            built.next().is_none().then(|| one.0.clone())
        });
        let alternatives = match built_here {
            Some(c) => {
                class = c;
                None
            }
            None => (!choices.is_empty()).then(|| choices.iter().map(|(c, _)| c.clone()).collect()),
        };
        let flags = LiteralFlags::of(args, keywords);
        let (positional, keywords) = passed(args, keywords);
        self.summary.calls.push(CallSite {
            callee: class,
            caller: Some(caller.to_string()),
            positional,
            keywords,
            instance: true,
            in_loop: cx.in_loop(),
            false_positions: flags.false_positions,
            false_keywords: flags.false_keywords,
            true_positions: flags.true_positions,
            true_keywords: flags.true_keywords,
            alternatives,
            every_call: cx.runs_on_every_call(),
            ..CallSite::default()
        });
        true
    }

    /// Records a method called on a receiver the file cannot resolve: a
    /// local or parameter (`unit.load_from(w)`), not `self`, not an import.
    fn dynamic_call(&mut self, func: &Expr, cx: &Context) {
        let ExprKind::Attribute { value, attr, .. } = &func.kind else { return };
        let Some((root, _)) = value.dotted_root() else { return };
        if matches!(root, "self" | "cls") || cx.lookup_import(root).is_some() {
            return;
        }
        let seen = &mut self.dynamic[usize::from(!cx.grad_enabled())];
        if !seen.contains(attr.as_str()) {
            seen.insert(attr.to_string());
        }
    }

    fn function(&mut self, f: &crate::ir::Function, cx: &Context) {
        if cx.in_class_body() && cx.class_has_alternatives() {
            self_calls_under_options(&f.body, &mut self.option_arms);
        }
        let qualname = cx.qualname_for(&f.name);
        let class = if cx.in_class_body() { cx.current_class_qualname() } else { None };
        let offset = usize::from(class.is_some());
        let params: Vec<String> = f.params.iter().map(|p| p.name.clone()).collect();
        let mut project_decorators = Vec::new();
        for d in &f.decorators {
            let callee = match &d.kind {
                ExprKind::Call { func, .. } => func,
                _ => d,
            };
            if let Some(q) = cx.project_name(callee) {
                project_decorators.push(q);
            }
        }
        let is_contextmanager = f.decorators.iter().any(|d| {
            cx.qualified_name(d).is_some_and(|q| q.last() == "contextmanager")
        });
        let flag = if f.words.contains(Words::TRAIN) || f.words.contains(Words::BACKWARD) { train_flag(&f.body, &params) } else { None };
        let backward = f.words.contains(Words::BACKWARD);
        let (accumulates_args, accumulates_into) =
            if offset == 1 { accumulated_args(&f.body, &params[1.min(params.len())..]) } else { (Vec::new(), Vec::new()) };
        let summary = FunctionSummary {
            qualname: qualname.clone(),
            name: f.name.clone(),
            class,
            calls_backward: backward && calls_backward(&f.body)
                || f.words.contains(Words::GRAD) && crate::facts::scan::calls_one_of(&f.body, &cx.gradient_imports().collect()),
            returns_in_memory_dataset: false,
            backward_per_call: backward && crate::facts::scan::backward_outside_loops(&f.body, None),
            decorated_no_grad: f.decorators.iter().any(|d| cx.is_no_grad_decorator(d)),
            project_decorators,
            disables_grad: f.words.contains(Words::GRAD_OFF)
                && mentions_grad_off(&f.body)
                && applies_grad_off(&f.body, cx, is_contextmanager),
            returns_graph: false,
            returns_graph_at: Vec::new(),
            returns_frozen: Vec::new(),
            accumulates_args,
            accumulates_into,
            empties: emptied(&f.body),
            train_flag_param: flag.and_then(|(i, _)| i.checked_sub(offset)),
            train_flag_name: flag.and_then(|(i, _)| params.get(i).cloned()),
            train_flag_negated: flag.is_some_and(|(_, negated)| negated),
            setup_named: is_setup_name(&f.name),
            init_named: is_init_name(&f.name),
            unit_test: self.is_test_file,
            // A `def forward(self, x)` outside any class (a method pasted
            // into a notebook cell to explain it) is no method nothing
            // could call as a step.
            step_root: STEP_ROOTS.contains(&f.name.as_str()) && (offset == 1 || params.first().is_none_or(|p| p != "self")),
            step_kinds: crate::step::StepKinds::empty(),
            steps_once: false,
            scales_values: f.words.contains(Words::DIV_MUL) && scales_values(&f.body),
            sums_losses: (matches!(f.name.as_str(), "forward" | "__call__") || f.name.contains("loss"))
                && crate::facts::scan::sums_losses(&f.body),
            mutates_first_arg: f.name == "forward" && params.get(offset).is_some_and(|p| mutates(&f.body, p, cx)),
            waits_for_device: cx.waits_for_device_in(&f.body),
            none_params: f.params[offset.min(f.params.len())..]
                .iter()
                .enumerate()
                .filter(|(_, p)| p.default.as_ref().is_some_and(Expr::is_none))
                .map(|(i, p)| (i, p.name.clone()))
                .collect(),
            none_params_passed: Vec::new(),
            flag_params: f.params[offset.min(f.params.len())..]
                .iter()
                .enumerate()
                .filter_map(|(i, p)| match p.default.as_ref()?.kind {
                    ExprKind::Literal(crate::ir::Literal::Bool(b)) => Some((i, p.name.clone(), b)),
                    _ => None,
                })
                .collect(),
            flag_values: Vec::new(),
            signature: (f.name == crate::api::nn::FORWARD && offset == 1).then(|| {
                let named = f.params.len() - usize::from(f.var_positional) - usize::from(f.var_keywords);
                Box::new(crate::index::calls::Signature::new(
                    f.params[1.min(named)..named].iter().map(|p| (p.name.as_str(), p.default.is_some())),
                    usize::from(f.positional).saturating_sub(1),
                    f.var_positional,
                    f.var_keywords,
                ))
            }),
            // A helper that moves its argument is a few lines long.
            moves_param: if f.body.len() <= 8 { crate::facts::moves::moved_param(&f.body, &params[offset.min(params.len())..], cx) } else { None },
            // A helper that draws a tensor is a few lines long.
            returns_host_factory: f.body.len() <= 8 && returns_host_factory(&f.body, cx),
            runs_model_once: false,
        };
        if let Some(classes) = returns_classes(&f.body, cx) {
            self.summary.factories.push((qualname.clone(), classes));
        }
        self.order.push(qualname.clone());
        self.functions.insert(qualname, summary);
    }

    fn class(&mut self, name: &str, bases: &[Expr], body: &[Stmt], cx: &Context) {
        let qualname = cx.qualname_for(name);
        let resolved: Vec<String> = bases.iter().filter_map(|b| cx.resolve_callee(b)).collect();
        let torch_module = resolved.iter().any(|q| {
            (q.starts_with("torch.nn.") && q.rsplit('.').next().is_some_and(|l| l.starts_with(|c: char| c.is_ascii_uppercase())))
                || q.ends_with("LightningModule")
        });
        let computed;
        let attrs = match cx.class_attrs() {
            Some(a) => a,
            None => {
                computed = class_attr_kinds(body, cx);
                &computed
            }
        };
        let parameter_attrs: Vec<String> =
            attrs.iter().filter(|(_, k)| **k == ValueKind::Parameter).map(|(a, _)| a.clone()).collect();
        // A custom autograd function (`class F(torch.autograd.Function)`)
        // defines a static `forward` run by `F.apply(...)`: not a module.
        let autograd_function =
            resolved.iter().any(|q| matches!(q.as_str(), "torch.autograd.Function" | "torch.autograd.function.Function"));
        let defines_forward =
            !autograd_function && body.iter().any(|s| matches!(&s.kind, StmtKind::Function(f) if f.name == "forward"));
        let disables_grad = body.iter().any(|s| match &s.kind {
            StmtKind::Function(f) if f.name == "__enter__" => mentions_grad_off(&f.body) && applies_grad_off(&f.body, cx, false),
            _ => false,
        }) || resolved.iter().any(|q| matches!(q.as_str(), "torch.no_grad" | "torch.inference_mode" | "torch.autograd.no_grad"));
        let parameter_free = parameter_attrs.is_empty() && crate::context::holds_no_parameters(&resolved, body, cx);
        self.summary.classes.push(ClassSummary {
            qualname,
            is_module_locally: torch_module || defines_forward || !parameter_attrs.is_empty(),
            is_optimizer_locally: resolved.iter().any(|q| q.starts_with("torch.optim.") && !q.starts_with("torch.optim.lr_scheduler.") && !q.starts_with("torch.optim.swa_utils.")),
            autograd_function,
            bases: resolved,
            parameter_attrs,
            disables_grad,
            dataset_items: crate::facts::datasets::dataset_items(body),
            parameter_free,
            self_frozen: crate::facts::scan::freezes_itself(body),
            init_param_attrs: init_param_attrs(body),
        });
    }
}

impl Visitor for SummaryVisitor {
    fn finish(&mut self, cx: &Context) {
        self.facts = Some(cx.module_facts());
        self.summary.moves_batches = !cx.pipeline().moves.is_empty();
    }

    fn visit_stmt(&mut self, stmt: &Stmt, cx: &Context) {
        if crate::step::resets_grad(stmt) {
            if let Some(f) = cx.function_qualname().and_then(|q| self.functions.get_mut(q)) {
                f.step_kinds |= crate::step::StepKinds::ZERO;
            }
        }
        match &stmt.kind {
            StmtKind::Function(f) => self.function(f, cx),
            StmtKind::Class(c) => self.class(&c.name, &c.bases, &c.body, cx),
            StmtKind::Import(bindings) if cx.function_qualname().is_none() && !cx.in_class_body() => {
                // Only imports of the project's own names can be re-exports
                // the index must follow, and torch's, which a module that
                // star-imports this one gets (`from utils import *` brings
                // `torch` to a file that uses `@torch.no_grad()`).
                for b in bindings {
                    let q = cx.module_info().resolve_relative(&b.qualified);
                    self.summary.imported.push(q.clone());
                    if cx.is_project_qualified(&q) || q == "torch" || q.starts_with("torch.") {
                        self.summary.imports.push((b.local.clone(), q));
                    }
                }
            }
            StmtKind::Import(bindings) => {
                // An import inside a function (`from data import get_loader`
                // in `main`) uses the module too.
                for b in bindings {
                    self.summary.imported.push(cx.module_info().resolve_relative(&b.qualified));
                }
            }
            StmtKind::Return(Some(v)) => {
                let Some(q) = cx.function_qualname() else { return };
                let (any, at) = match &v.kind {
                    ExprKind::Sequence(items) => {
                        let at: Vec<usize> =
                            items.iter().enumerate().filter(|(_, i)| cx.carries_graph(i)).map(|(i, _)| i).collect();
                        (false, at)
                    }
                    _ => (cx.carries_graph(v), Vec::new()),
                };
                if let Some(f) = self.functions.get_mut(q) {
                    f.returns_frozen.extend(cx.frozen_parts_returned(v));
                    f.returns_graph |= any;
                    for i in at {
                        if !f.returns_graph_at.contains(&i) {
                            f.returns_graph_at.push(i);
                        }
                    }
                }
            }
            _ => {}
        }
    }

    fn visit_expr(&mut self, expr: &Expr, cx: &Context) {
        // Not a class's mentions of itself (`super(PRM, self)` inside
        // `PRM` builds nothing).
        if let Some(name) = crate::index::mentioned_name(expr) {
            let own = cx.enclosing_class_name();
            if own != Some(name) {
                let h = crate::index::mention_hash(name);
                self.class_refs.insert(h);
                // Outside every class: code that builds a model, not a
                // model building its parts.
                if own.is_none() && !cx.in_class_body() {
                    self.summary.builder_refs.push(h);
                }
            }
        }
        let ExprKind::Call { func, args, keywords, .. } = &expr.kind else { return };
        if !self.summary.constructs_by_name && constructs_by_name(func, args, cx) {
            self.summary.constructs_by_name = true;
        }
        match crate::api::optimizer_scale_invariance(expr, &|f| cx.qualified_name(f).map(|q| q.as_str().to_string())) {
            Some(true) => self.summary.optimizers.0 = true,
            Some(false) => self.summary.optimizers.1 = true,
            None => {}
        }
        if let Some(q) = cx.function_qualname() {
            if expr.keyword("volatile").is_some() && !self.volatile.contains(q) {
                self.volatile.insert(q.to_string());
            }
            // A call named like a model first (most calls are of library
            // functions; `is_model` resolves names), outside loops, with grad
            // on, not in a module's own methods (a `forward` runs its
            // submodules).
            let last = |e: &Expr| match &e.kind {
                ExprKind::Name(n) | ExprKind::Attribute { attr: n, .. } => Context::named_like_model(n),
                _ => false,
            };
            let callee = match &func.kind {
                ExprKind::Attribute { value, attr, .. } if crate::api::nn::is_forward_method(attr) => value,
                _ => func,
            };
            if last(callee) && !cx.in_loop() && cx.grad_enabled() && !cx.in_model_code() && !cx.in_train_mode_arm() {
                if let Some(f) = self.functions.get_mut(q).filter(|f| !f.runs_model_once) {
                    f.runs_model_once = cx.is_model(callee);
                }
            }
            if let Some((kind, _, _)) = crate::step::classify(expr, cx) {
                if let Some(f) = self.functions.get_mut(q) {
                    let kinds = kind.kinds();
                    f.step_kinds |= kinds;
                    f.steps_once |= !cx.in_loop()
                        && (kinds.contains(crate::step::StepKinds::OPT_STEP) || kinds.contains(crate::step::StepKinds::SCALER_STEP));
                }
            }
        }
        // `model.apply(init_weights)`: the function initialises weights.
        if let ExprKind::Attribute { attr, .. } = &func.kind {
            if attr == "apply" && args.len() == 1 {
                if let Some(q) = cx.project_name(&args[0]) {
                    self.summary.applied.push(q);
                }
            }
        }
        // A call in another framework's branch is not a torch caller.
        if cx.in_non_torch_branch() {
            return;
        }
        // `self.dp(...)` with `self.dp = DurationPredictor(...)`: a
        // submodule's forward, not a method named `dp`.
        if self.submodule_call(func, args, keywords, cx) {
            return;
        }
        let Some(callee) = cx.project_name(func) else {
            self.dynamic_call(func, cx);
            self.instance_call(func, args, keywords, cx);
            return;
        };
        let (positional, keyword_names) = passed(args, keywords);
        let LiteralFlags { false_positions, false_keywords, true_positions, true_keywords } = LiteralFlags::of(args, keywords);
        let every_call = cx.function_qualname().is_some() && cx.runs_on_every_call();
        // `Trainer(model, ...)` after `model = Net(args)`: what a class's
        // construction is given.
        let constructs = callee.rsplit('.').next().is_some_and(|l| l.starts_with(|c: char| c.is_ascii_uppercase()));
        let instance = |e: &Expr| e.as_name().and_then(|n| cx.instance_class(n));
        let arg_instances: Vec<(String, String)> = if constructs {
            let by_position = args.iter().enumerate().filter_map(|(i, a)| Some((i.to_string(), instance(a)?)));
            by_position.chain(keywords.iter().filter_map(|k| Some((k.name.clone()?.to_string(), instance(&k.value)?)))).collect()
        } else {
            Vec::new()
        };
        if !arg_instances.is_empty() {
            self.summary.constructions.push((callee.clone(), arg_instances.into_boxed_slice()));
        }
        self.summary.calls.push(CallSite {
            caller: cx.function_qualname().map(str::to_string),
            callee,
            grad_off: !cx.grad_enabled(),
            contexts: cx.with_contexts(),
            in_step_loop: cx.in_step_iteration(),
            in_loop: cx.in_loop(),
            logged: cx.guarded_by_interval() || cx.guarded_by_debug_condition() || cx.in_exception_handler(),
            per_epoch: cx.in_epoch_loop_only(),
            false_positions,
            false_keywords,
            true_positions,
            true_keywords,
            frozen: cx.frozen_args_at(args),
            positional,
            keywords: keyword_names,
            every_call,
            // Read only with `every_call`.
            host_arg: every_call && args.iter().any(|a| cx.host_built(a)),
            via_self: matches!(&func.kind, ExprKind::Attribute { value, .. } if value.as_name() == Some("self")),
            instance: false,
            alternatives: None,
        });
    }

}

/// A cheap syntactic filter before [`applies_grad_off`] resolves names:
/// whether any name or attribute in the body (nested functions included)
/// is `no_grad`, `inference_mode` or `set_grad_enabled`.
fn mentions_grad_off(body: &[Stmt]) -> bool {
    fn rec(body: &[Stmt]) -> bool {
        body.iter().any(|s| {
            let mut found = false;
            s.for_each_expr(|e| {
                found |= e.any(&mut |x| match &x.kind {
                    ExprKind::Name(n) | ExprKind::Attribute { attr: n, .. } => {
                        matches!(n.as_str(), "no_grad" | "inference_mode" | "set_grad_enabled")
                    }
                    _ => false,
                })
            });
            found
                || match &s.kind {
                    StmtKind::Function(f) => rec(&f.body),
                    StmtKind::Class(c) => rec(&c.body),
                    _ => s.child_blocks().any(rec),
                }
        })
    }
    rec(body)
}

/// Whether the body (nested functions included) applies or returns
/// `torch.no_grad`/`torch.inference_mode` outside a `with` of its own, or
/// calls `torch.set_grad_enabled(False)`; for a `@contextmanager`, whether
/// it yields inside such a `with`.
fn applies_grad_off(body: &[Stmt], cx: &Context, contextmanager: bool) -> bool {
    fn is_off_api(cx: &Context, e: &Expr) -> bool {
        cx.qualified_name(e).is_some_and(|q| crate::api::GRAD_OFF_APIS.contains(&q.as_str()))
    }
    fn expr_applies(cx: &Context, e: &Expr) -> bool {
        e.any(&mut |x| {
            if is_off_api(cx, x) {
                return true;
            }
            if let Some((func, args, _)) = x.as_call() {
                if cx.qualified_name(func).is_some_and(|q| q.is_any(&["torch.set_grad_enabled", "torch.autograd.set_grad_enabled"])) {
                    return args.first().is_some_and(Expr::is_false);
                }
            }
            false
        })
    }
    fn yields(body: &[Stmt]) -> bool {
        let mut found = false;
        for_each_stmt_in_function(body, &mut |s| {
            s.for_each_expr(|e| found |= e.any(&mut |x| matches!(&x.kind, ExprKind::Yield(_))));
        });
        found
    }
    let mut found = false;
    fn rec(body: &[Stmt], cx: &Context, cm: bool, found: &mut bool) {
        for s in body {
            if *found {
                return;
            }
            match &s.kind {
                StmtKind::With { items, body } => {
                    if cm && items.iter().any(|i| expr_applies(cx, &i.context)) && yields(body) {
                        *found = true;
                        return;
                    }
                    rec(body, cx, cm, found);
                }
                StmtKind::Function(f) => rec(&f.body, cx, false, found),
                _ => {
                    s.for_each_expr(|e| *found |= expr_applies(cx, e));
                    for b in s.child_blocks() {
                        rec(b, cx, cm, found);
                    }
                }
            }
        }
    }
    rec(body, cx, contextmanager, &mut found);
    found
}

/// The position of a parameter the body moves to an accelerator (`x =
/// x.cuda()`, `Variable(arg).cuda(i)`, `x.to(device)`) and that every
/// `return` gives back, moved or wrapped (`return x`, `return Variable(x)`,
/// `return arg.cuda()`): a helper like `to_var(x)`. Nested functions are
/// not read.
/// The project classes a factory function returns instances of, when every
/// `return` builds one ([`crate::index::FileSummary::factories`]).
fn returns_classes(body: &[Stmt], cx: &Context) -> Option<Box<[String]>> {
    let (mut classes, mut all) = (Vec::new(), true);
    for_each_stmt_in_function(body, &mut |s| {
        let StmtKind::Return(value) = &s.kind else { return };
        match value.as_ref().and_then(Expr::as_call).and_then(|(func, _, _)| cx.instance_class_of_call(func)) {
            Some(c) => classes.extend((!classes.contains(&c)).then_some(c)),
            None => all = false,
        }
    });
    (all && !classes.is_empty()).then(|| classes.into_boxed_slice())
}

/// Whether every `return` of `body` gives back a tensor a factory filled
/// on the host: the factory itself (arithmetic on it included), or a local
/// that only such factories bind.
fn returns_host_factory(body: &[Stmt], cx: &Context) -> bool {
    let mut returns: Vec<&Expr> = Vec::new();
    let mut bare = false;
    let mut binds: Vec<(&str, &Expr)> = Vec::new();
    for_each_stmt_in_function(body, &mut |s| match &s.kind {
        StmtKind::Return(Some(v)) => returns.push(v),
        StmtKind::Return(None) => bare = true,
        StmtKind::Assign { targets, value, .. } => {
            for t in targets {
                if let Some(n) = t.as_name() {
                    binds.push((n, value));
                }
            }
        }
        _ => {}
    });
    let factory = |e: &Expr| cx.is_host_factory(e);
    // A bare `return` gives back `None`.
    !returns.is_empty()
        && !bare
        && returns.iter().all(|r| match r.as_name() {
            Some(n) => {
                let mut bound = binds.iter().filter(|(b, _)| *b == n).peekable();
                bound.peek().is_some() && bound.all(|(_, v)| factory(v))
            }
            None => factory(r),
        })
}

/// Positions of `params` (after `self`) accumulated into `self.<attr>`.
fn accumulated_args(body: &[Stmt], params: &[String]) -> (Vec<usize>, Vec<String>) {
    let mut out = Vec::new();
    let mut into: Vec<String> = Vec::new();
    // Read as the value itself or through arithmetic (`val`, `val * n`),
    // not through a call (`val.item()`, `float(val)` keep no graph).
    fn direct(e: &Expr, name: &str) -> bool {
        match &e.kind {
            ExprKind::Name(n) => n == name,
            ExprKind::BinOp { left, right, .. } => direct(left, name) || direct(right, name),
            ExprKind::Unary { operand: x, .. } => direct(x, name),
            _ => false,
        }
    }
    // A parameter the method rebinds to anything but arithmetic on itself
    // (`v = v.data.sum()`, `v = v.detach()`, `v = float(v)`) holds a
    // detached value from there on: what is kept is not the caller's
    // tensor.
    let mut rebound: Vec<&str> = Vec::new();
    for_each_stmt_in_function(body, &mut |s| {
        if let StmtKind::Assign { targets, value, .. } = &s.kind {
            for p in params {
                if targets.iter().any(|t| t.as_name() == Some(p.as_str())) && !direct(value, p) && !rebound.contains(&p.as_str()) {
                    rebound.push(p);
                }
            }
        }
    });
    let reads_param = |e: &Expr, out: &mut Vec<usize>| {
        let mut any = false;
        for (i, p) in params.iter().enumerate() {
            if direct(e, p) && !rebound.contains(&p.as_str()) {
                any = true;
                if !out.contains(&i) {
                    out.push(i);
                }
            }
        }
        any
    };
    let attr = |e: &Expr| e.dotted().and_then(|d| d.strip_prefix("self.").map(|a| a.split('.').next().unwrap_or(a).to_string()));
    for_each_stmt_in_function(body, &mut |s| match &s.kind {
        StmtKind::AugAssign { target, op: BinOp::Add, value } => {
            if let Some(a) = attr(target) {
                if reads_param(value, &mut out) && !into.contains(&a) {
                    into.push(a);
                }
            }
        }
        StmtKind::Expr(e) => {
            if let Some((recv, "append" | "extend")) = e.as_method_call() {
                if let (Some(a), Some((_, args, _))) = (attr(recv), e.as_call()) {
                    let mut read = false;
                    for arg in args {
                        read |= reads_param(arg, &mut out);
                    }
                    if read && !into.contains(&a) {
                        into.push(a);
                    }
                }
            }
        }
        _ => {}
    });
    (out, into)
}

/// The attributes and globals a function empties: `self.data = []` (or
/// `{}`, `list()`, `dict()`), `del policy.rewards[:]`, `self.data.clear()`.
/// Only dotted names (`self.data`, `policy.rewards`): a plain name
/// assigned is the function's own local.
fn emptied(body: &[Stmt]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let attr = |e: &Expr| e.dotted().filter(|d| d.contains('.')).map(|d| d.to_string());
    let empty = |v: &Expr| match &v.kind {
        ExprKind::Sequence(items) => items.is_empty(),
        ExprKind::Dict(items) => items.is_empty(),
        ExprKind::Call { func, args, keywords, .. } => {
            args.is_empty() && keywords.is_empty() && matches!(func.as_name(), Some("list" | "dict"))
        }
        _ => false,
    };
    for_each_stmt_in_function(body, &mut |s| {
        let emptied = match &s.kind {
            StmtKind::Assign { targets, value, .. } if targets.len() == 1 && empty(value) => attr(&targets[0]),
            StmtKind::Delete(targets) => targets.iter().find_map(|t| match &t.kind {
                ExprKind::Subscript { value, .. } => attr(value),
                _ => None,
            }),
            StmtKind::Expr(e) => match e.as_method_call() {
                Some((recv, "clear")) => attr(recv),
                _ => None,
            },
            _ => None,
        };
        if let Some(a) = emptied {
            if !out.contains(&a) {
                out.push(a);
            }
        }
    });
    out
}

/// Whether the body (nested functions excluded) divides or multiplies by a
/// non-literal: `loss / n`, `loss *= scale`.
fn scales_values(body: &[Stmt]) -> bool {
    let non_literal = |e: &Expr| !matches!(e.kind, ExprKind::Literal(_));
    let mut found = false;
    for_each_stmt_in_function(body, &mut |s| {
        if let StmtKind::AugAssign { op: BinOp::Div | BinOp::Mult, value, .. } = &s.kind {
            found |= non_literal(value);
        }
        s.for_each_expr(|e| {
            found |= e.any(&mut |x| {
                matches!(&x.kind, ExprKind::BinOp { op: BinOp::Div | BinOp::Mult, right, .. } if non_literal(right))
            });
        });
    });
    found
}

/// Whether the body (nested functions excluded) changes `name` in place.
fn mutates(body: &[Stmt], name: &str, cx: &Context) -> bool {
    let mut found = false;
    for_each_stmt_in_function(body, &mut |s| {
        let is_name = |e: &Expr| e.as_name() == Some(name);
        found |= crate::api::inplace_stmt(s).iter().any(|(on, _, _)| is_name(on));
        if matches!(s.kind, StmtKind::Function(_) | StmtKind::Class { .. }) {
            return;
        }
        s.for_each_expr(|e| {
            found |= e.any(&mut |x| {
                let Some((func, _, _)) = x.as_call() else { return false };
                if !crate::api::may_write_in_place(x) {
                    return false;
                }
                let q = cx.qualified_name(func);
                crate::api::inplace_call(x, q.as_ref().map(|q| q.as_str())).iter().any(|(on, _, _)| is_name(on))
            });
        });
    });
    found
}

/// Whether a call picks a class or function by a name computed at run
/// time ([`crate::index::FileSummary::constructs_by_name`]): `eval(...)`,
/// `importlib.import_module(...)`, `getattr(module, name)` on an imported
/// module with a name that is not a literal, Hydra's `instantiate` or
/// `get_class`, `pydoc.locate`.
fn constructs_by_name(func: &Expr, args: &[Expr], cx: &Context) -> bool {
    match func.as_name() {
        Some("eval") if cx.lookup_import("eval").is_none() => return true,
        Some("getattr") => {
            return args.len() >= 2
                && !matches!(args[1].kind, ExprKind::Literal(_))
                && args[0].dotted_root().is_some_and(|(root, _)| cx.lookup_import(root).is_some());
        }
        _ => {}
    }
    let last = match &func.kind {
        ExprKind::Name(n) | ExprKind::Attribute { attr: n, .. } => n.as_str(),
        _ => return false,
    };
    matches!(last, "import_module" | "instantiate" | "get_class" | "locate" | "get_obj_from_str")
        && cx.qualified_name(func).is_some_and(|q| {
            q.is_any(&["importlib.import_module", "hydra.utils.instantiate", "hydra.utils.get_class", "pydoc.locate"])
        })
}
