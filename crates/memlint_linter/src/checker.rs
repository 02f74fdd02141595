//! Dispatches the semantic walk's callbacks to the enabled rules.

use memlint_diagnostics::{Diagnostic, Span};
use std::cell::OnceCell;
use std::rc::Rc;

use memlint_semantic::facts::pipeline::LoaderSite;
use memlint_semantic::ir::{Expr, Module, Stmt, StmtKind};
use memlint_semantic::step::{step_events, StepEvent};
use memlint_semantic::{Context, Visitor};

use crate::registry::Rule;

/// What a rule sees while checking one node: the semantic model at that
/// point, the source text, and where to report.
pub struct Checker<'c> {
    /// The semantic model at the current node.
    pub cx: &'c Context,
    source: &'c str,
    module: &'c Module,
    diagnostics: &'c mut Vec<Diagnostic>,
    /// The body of the loop being checked, and its training-step events,
    /// computed on first use and shared by the rules of this loop.
    loop_body: Option<&'c [Stmt]>,
    loop_events: OnceCell<Rc<Vec<StepEvent<'c>>>>,
    file: &'c FileMemo,
}

/// Answers about the whole file that rules would otherwise recompute at
/// every node that asks (a scan of the module per finding is quadratic in
/// the file's size), kept for one file's walk.
#[derive(Default)]
pub struct FileMemo {
    answers: std::cell::RefCell<rustc_hash::FxHashMap<(&'static str, String), Answer>>,
}

/// One memoized answer (`None`: there is none).
type Answer = Option<Rc<dyn std::any::Any>>;

impl FileMemo {
    /// The answer of `compute` for the question `(what, key)`, computed
    /// on first use in this file.
    pub fn get_or<T: 'static>(&self, what: &'static str, key: &str, compute: impl FnOnce() -> Option<T>) -> Option<Rc<T>> {
        let probe = (what, key.to_string());
        if let Some(hit) = self.answers.borrow().get(&probe) {
            return hit.clone().and_then(|a| a.downcast::<T>().ok());
        }
        let value: Option<Rc<T>> = compute().map(Rc::new);
        self.answers.borrow_mut().insert(probe, value.clone().map(|v| v as Rc<dyn std::any::Any>));
        value
    }

    /// Whether this is the first time `(what, key)` is asked in this file
    /// (a rule that reports once per loop or per name).
    pub fn first(&self, what: &'static str, key: &str) -> bool {
        let mut first = false;
        self.get_or(what, key, || {
            first = true;
            Some(())
        });
        first
    }
}

impl<'c> Checker<'c> {
    fn new(
        cx: &'c Context,
        source: &'c str,
        module: &'c Module,
        diagnostics: &'c mut Vec<Diagnostic>,
        file: &'c FileMemo,
    ) -> Self {
        Checker { cx, source, module, diagnostics, loop_body: None, loop_events: OnceCell::new(), file }
    }

    /// The statements of the file's module.
    pub fn module_body(&self) -> &'c [Stmt] {
        &self.module.body
    }

    /// Per-file answers that do not depend on the node at hand.
    pub fn file_memo(&self) -> &'c FileMemo {
        self.file
    }

    /// The training-step events of the loop being checked (see
    /// [`memlint_semantic::step`]); empty outside `check_loop`.
    pub fn loop_events(&self) -> Rc<Vec<StepEvent<'c>>> {
        self.loop_events.get_or_init(|| Rc::new(self.loop_body.map(|b| step_events(b, self.cx)).unwrap_or_default())).clone()
    }

    /// The source text of a span (empty if out of range).
    pub fn text(&self, span: Span) -> &str {
        self.source.get(span.start as usize..span.end as usize).unwrap_or("")
    }

    /// The 1-based line of byte `offset`.
    pub fn line_of(&self, offset: u32) -> usize {
        let end = (offset as usize).min(self.source.len());
        self.source.as_bytes()[..end].iter().filter(|&&b| b == b'\n').count() + 1
    }

    /// How the file uses `volatile=True` ([`memlint_semantic::facts::volatile_use`]),
    /// asked once per file whichever rule asks.
    pub fn volatile_use(&self) -> memlint_semantic::facts::Volatile {
        self.file
            .get_or("volatile-torch", "", || Some(memlint_semantic::facts::volatile_use(&self.module.body)))
            .map_or(memlint_semantic::facts::Volatile::Unused, |v| *v)
    }

    /// Whether the file is written for PyTorch before 0.4 and cannot run on
    /// a later one ([`memlint_semantic::facts::Volatile::OldTorch`]), or
    /// its project declares such a PyTorch (`PyTorch 0.2.0` in its README:
    /// [`memlint_semantic::Context::torch_below`]).
    pub fn written_for_volatile_torch(&self) -> bool {
        self.volatile_use() == memlint_semantic::facts::Volatile::OldTorch || self.cx.torch_below().is_some_and(|b| b <= (0, 4))
    }

    /// The value a flag has where `e` runs, by the innermost `if` that
    /// tests it (`if flag:` or `if not flag:`, `is_flag` telling the
    /// flag): `Some(true)` in the body of `if flag:` or the `else` of `if
    /// not flag:`, `None` outside any such `if`.
    pub fn flag_value_where(&self, e: &Expr, is_flag: impl Fn(&Expr) -> bool) -> Option<bool> {
        use memlint_semantic::ir::{Arm, ExprKind, UnaryOp};
        let module = self.module;
        let id = module.tree.owner(e.id)?;
        module.tree.guards(id).find_map(|(guard, arm)| {
            let StmtKind::If { test, .. } = &module.stmt(guard)?.kind else { return None };
            let value_in_body = match &test.kind {
                ExprKind::Unary { op: UnaryOp::Not, operand } if is_flag(operand) => false,
                _ if is_flag(test) => true,
                _ => return None,
            };
            Some(if arm == Arm::Body { value_in_body } else { !value_in_body })
        })
    }

    /// Whether `e` sits in an arm of an `if` on the module's train mode
    /// that runs only in eval mode (the `else` of `if self.training:`, the
    /// body of `if not self.training:`): no `backward()` reads what it
    /// computes.
    pub fn in_eval_mode_arm(&self, e: &Expr) -> bool {
        self.flag_value_where(e, |t| t.dotted().is_some_and(|d| d == "self.training")) == Some(false)
    }

    /// Whether `e` runs on a loop's first iteration only: the body of an
    /// `if` testing the loop's counter against 0 (`if i == 0:` in `for i,
    /// (x, y) in enumerate(loader):` or `for i in range(n):`), typically
    /// an accumulator set up on the first batch.
    pub fn in_first_iteration_arm(&self, e: &Expr) -> bool {
        use memlint_semantic::ir::{Arm, CmpOp, ExprKind, Literal};
        let module = self.module;
        let Some(id) = module.tree.owner(e.id) else { return false };
        let zero = |x: &Expr| matches!(x.kind, ExprKind::Literal(Literal::Int(0)));
        let counter_of = |lp: memlint_semantic::ir::StmtId| -> Option<&str> {
            let StmtKind::For { target, iter, .. } = &module.stmt(lp)?.kind else { return None };
            let (func, args, _) = iter.as_call()?;
            match (func.as_name()?, &target.kind) {
                ("range", _) => target.as_name(),
                ("enumerate", ExprKind::Sequence(items)) if args.len() == 1 || args.get(1).is_some_and(zero) => items.first()?.as_name(),
                _ => None,
            }
        };
        module.tree.guards(id).any(|(guard, arm)| {
            let Some(StmtKind::If { test, .. }) = module.stmt(guard).map(|s| &s.kind) else { return false };
            let ExprKind::Compare { left, ops, comparators } = &test.kind else { return false };
            let ([CmpOp::Eq], [right]) = (&ops[..], &comparators[..]) else { return false };
            let name = match (left.as_name(), right.as_name()) {
                (Some(n), None) if zero(right) => n,
                (None, Some(n)) if zero(left) => n,
                _ => return false,
            };
            arm == Arm::Body && module.tree.ancestors(guard).any(|a| counter_of(a) == Some(name))
        })
    }

    /// Whether some expression of the statement that holds `e` (its own
    /// expressions, not those of nested blocks) satisfies `pred`: how `e`
    /// is used where it stands (`w.data.size()`, `m.cpu().parameters()`).
    pub fn statement_has(&self, e: &Expr, pred: &mut dyn FnMut(&Expr) -> bool) -> bool {
        let module = self.module;
        let Some(stmt) = module.tree.owner(e.id).and_then(|id| module.stmt(id)) else { return false };
        let mut found = false;
        stmt.for_each_expr(|x| found = found || x.any(&mut *pred));
        found
    }

    /// How large the samples of the loader `site` of `module` are
    /// ([`memlint_semantic::facts::datasets::loader_samples`]).
    pub fn loader_samples(&self, module: &Module, site: &LoaderSite) -> memlint_semantic::facts::datasets::Samples {
        memlint_semantic::facts::pipeline::call_at(module, site.span)
            .map_or(memlint_semantic::facts::datasets::Samples::Unknown, |call| memlint_semantic::facts::datasets::loader_samples(call, module))
    }

    /// The file's `DataLoader(...)` calls with their options
    /// ([`memlint_semantic::facts::pipeline::Pipeline::loaders`]), resolved once per file for every rule that
    /// asks; call it once the walk is done (`check_file`).
    pub fn loader_sites(&self) -> Rc<Vec<LoaderSite>> {
        self.file
            .get_or("loader-sites", "", || {
                let cx = self.cx;
                let in_memory_class =
                    |f: &memlint_semantic::ir::Expr| cx.qualified_name(f).and_then(|q| cx.index().dataset_items(q.as_str()));
                Some(cx.pipeline().loaders(self.module, &in_memory_class))
            })
            .unwrap_or_default()
    }

    /// Whether a loader of the file feeds training on an accelerator
    /// ([`memlint_semantic::facts::pipeline::Pipeline::feeds_training`]),
    /// and is not returned by a helper that nothing in the run calls.
    pub fn loader_feeds_training(&self, site: &LoaderSite) -> bool {
        let index = self.cx.index();
        let unused = site.returned && site.function.as_deref().is_some_and(|f| index.is_uncalled_function(f));
        // Batches another file of the run moves count only for a loader
        // that can reach that file: its module is imported there, or the
        // loader is passed to a project function. Independent scripts and
        // notebooks of one repository do not feed each other.
        let run_moves = index.moves_batches()
            && (index.is_imported_module(&self.cx.module_info().path) || self.passed_to_project_function(site));
        !unused && !self.cx.cpu_only_program() && self.cx.pipeline().feeds_training(site, run_moves)
    }

    /// Whether the name `site` is bound to is passed to a function of
    /// another module of the project (`train_one_epoch(model, train_loader,
    /// ...)` imported from `engine`).
    fn passed_to_project_function(&self, site: &LoaderSite) -> bool {
        let Some(name) = site.bound_to.as_deref() else { return false };
        // A function of this file moves batches in this file's pipeline:
        // only another module's can carry the loader to the run's moves.
        let module = &self.cx.module_info().path;
        let own = |q: &str| q.strip_prefix(module.as_str()).is_some_and(|rest| rest.starts_with('.'));
        let mut found = false;
        memlint_semantic::ir::for_each_stmt_in_module(&self.module.body, &mut |s| {
            s.for_each_expr(|e| {
                found |= e.any(&mut |x| {
                    x.as_call().is_some_and(|(_, args, kws)| {
                        (args.iter().any(|a| a.dotted().as_deref() == Some(name))
                            || kws.iter().any(|k| k.value.dotted().as_deref() == Some(name)))
                            && self.cx.project_callee(x).is_some_and(|f| !own(&f.qualname))
                    })
                });
            });
        });
        found
    }

    /// The span of keyword argument `name` of the call at `call`.
    pub fn keyword_span(&self, module: &Module, call: Span, name: &str) -> Option<Span> {
        memlint_semantic::facts::pipeline::keyword_span(module, call, name)
    }

    /// Whether the file is Rust code using `tch`: advice is spelled for it
    /// (`tch::no_grad(|| ...)`, not `with torch.no_grad():`) and Python
    /// fixes are not offered.
    pub fn is_rust(&self) -> bool {
        self.module.language == memlint_semantic::ir::Language::Rust
    }

    /// The whole file's source text.
    pub fn source(&self) -> &'c str {
        self.source
    }

    /// The whole file's IR (for fixes that rewrite more than the node at hand).
    pub fn module(&self) -> &'c Module {
        self.module
    }

    /// Whether the current point is torch code outside a test module: what
    /// the training-program rules check (unit tests are not training code).
    pub fn in_torch_program(&self) -> bool {
        self.cx.torch_imported() && !self.cx.in_test_module()
    }

    /// [`Checker::in_torch_program`] with grad enabled: where a graph may be built.
    pub fn in_grad_code(&self) -> bool {
        self.in_torch_program() && self.cx.grad_enabled()
    }

    /// Reports a diagnostic.
    pub fn report(&mut self, diagnostic: Diagnostic) {
        self.diagnostics.push(diagnostic);
    }
}

pub(crate) struct RuleVisitor<'r> {
    rules: &'r [&'static dyn Rule],
    source: &'r str,
    module: &'r Module,
    diagnostics: &'r mut Vec<Diagnostic>,
    memo: FileMemo,
}

impl<'r> RuleVisitor<'r> {
    pub(crate) fn new(
        rules: &'r [&'static dyn Rule],
        source: &'r str,
        module: &'r Module,
        diagnostics: &'r mut Vec<Diagnostic>,
    ) -> Self {
        RuleVisitor { rules, source, module, diagnostics, memo: FileMemo::default() }
    }
}

impl Visitor for RuleVisitor<'_> {
    fn visit_stmt(&mut self, stmt: &Stmt, cx: &Context) {
        let mut checker = Checker::new(cx, self.source, self.module, self.diagnostics, &self.memo);
        if let StmtKind::For { body, .. } | StmtKind::While { body, .. } = &stmt.kind {
            checker.loop_body = Some(body);
        }
        // The rules were filtered for the file's language once, by the driver.
        for rule in self.rules {
            rule.check_stmt(stmt, &mut checker);
        }
    }

    /// Loop and function checks run once the body has been walked: the
    /// facts of the body (what its names hold) exist then.
    fn leave_stmt(&mut self, stmt: &Stmt, cx: &Context) {
        let mut checker = Checker::new(cx, self.source, self.module, self.diagnostics, &self.memo);
        if let StmtKind::For { body, .. } | StmtKind::While { body, .. } = &stmt.kind {
            checker.loop_body = Some(body);
        }
        for rule in self.rules {
            match &stmt.kind {
                StmtKind::For { body, .. } | StmtKind::While { body, .. } => rule.check_loop(stmt, body, &mut checker),
                StmtKind::Function(f) => rule.check_function(f, &mut checker),
                _ => {}
            }
        }
    }

    fn finish(&mut self, cx: &Context) {
        let mut checker = Checker::new(cx, self.source, self.module, self.diagnostics, &self.memo);
        for rule in self.rules {
            rule.check_file(self.module, &mut checker);
        }
    }

    fn visit_expr(&mut self, expr: &Expr, cx: &Context) {
        let mut checker = Checker::new(cx, self.source, self.module, self.diagnostics, &self.memo);
        for rule in self.rules {
            rule.check_expr(expr, &mut checker);
        }
    }
}
