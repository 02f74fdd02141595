//! Dispatches the semantic walk's callbacks to the enabled rules.

use memlint_diagnostics::{Diagnostic, Span};
use memlint_semantic::ir::{Expr, Module, Stmt, StmtKind};
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
}

impl<'c> Checker<'c> {
    /// The source text of a span (empty if out of range).
    pub fn text(&self, span: Span) -> &str {
        self.source.get(span.start as usize..span.end as usize).unwrap_or("")
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
}

impl<'r> RuleVisitor<'r> {
    pub(crate) fn new(
        rules: &'r [&'static dyn Rule],
        source: &'r str,
        module: &'r Module,
        diagnostics: &'r mut Vec<Diagnostic>,
    ) -> Self {
        RuleVisitor { rules, source, module, diagnostics }
    }
}

impl Visitor for RuleVisitor<'_> {
    fn visit_stmt(&mut self, stmt: &Stmt, cx: &Context) {
        let mut checker = Checker { cx, source: self.source, module: self.module, diagnostics: self.diagnostics };
        // The rules were filtered for the file's language once, by the driver.
        for rule in self.rules {
            rule.check_stmt(stmt, &mut checker);
            match &stmt.kind {
                StmtKind::For { body, .. } | StmtKind::While { body, .. } => rule.check_loop(stmt, body, &mut checker),
                StmtKind::Function(f) => rule.check_function(f, &mut checker),
                _ => {}
            }
        }
    }

    fn finish(&mut self, cx: &Context) {
        let mut checker = Checker { cx, source: self.source, module: self.module, diagnostics: self.diagnostics };
        for rule in self.rules {
            rule.check_file(self.module, &mut checker);
        }
    }

    fn visit_expr(&mut self, expr: &Expr, cx: &Context) {
        let mut checker = Checker { cx, source: self.source, module: self.module, diagnostics: self.diagnostics };
        for rule in self.rules {
            rule.check_expr(expr, &mut checker);
        }
    }
}
