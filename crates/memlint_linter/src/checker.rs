//! Dispatches the semantic walk's callbacks to the enabled rules.

use memlint_diagnostics::{Diagnostic, Span};
use memlint_semantic::ir::{Expr, Stmt};
use memlint_semantic::{Context, Visitor};

use crate::registry::Rule;

/// What a rule sees while checking one node: the semantic model at that
/// point, the source text, and where to report.
pub struct Checker<'c> {
    /// The semantic model at the current node.
    pub cx: &'c Context,
    source: &'c str,
    diagnostics: &'c mut Vec<Diagnostic>,
}

impl Checker<'_> {
    /// The source text of a span (empty if out of range).
    pub fn text(&self, span: Span) -> &str {
        self.source.get(span.start as usize..span.end as usize).unwrap_or("")
    }

    /// Reports a diagnostic.
    pub fn report(&mut self, diagnostic: Diagnostic) {
        self.diagnostics.push(diagnostic);
    }
}

pub(crate) struct RuleVisitor<'r> {
    rules: &'r [&'static dyn Rule],
    source: &'r str,
    diagnostics: &'r mut Vec<Diagnostic>,
}

impl<'r> RuleVisitor<'r> {
    pub(crate) fn new(rules: &'r [&'static dyn Rule], source: &'r str, diagnostics: &'r mut Vec<Diagnostic>) -> Self {
        RuleVisitor { rules, source, diagnostics }
    }
}

impl Visitor for RuleVisitor<'_> {
    fn visit_stmt(&mut self, stmt: &Stmt, cx: &Context) {
        let mut checker = Checker { cx, source: self.source, diagnostics: self.diagnostics };
        for rule in self.rules {
            if rule.meta().languages.contains(&cx.language()) {
                rule.check_stmt(stmt, &mut checker);
            }
        }
    }

    fn visit_expr(&mut self, expr: &Expr, cx: &Context) {
        let mut checker = Checker { cx, source: self.source, diagnostics: self.diagnostics };
        for rule in self.rules {
            if rule.meta().languages.contains(&cx.language()) {
                rule.check_expr(expr, &mut checker);
            }
        }
    }
}
