//! Parameters given back grad later in a function: gradual unfreezing.

use crate::ir::{for_each_stmt_in_function, Expr, Module, StmtKind};

use super::scan::{is_below, unfrozen_by_loop};

/// Whether code after `at` (an expression) in its function, or in the
/// module's top-level code, gives grad back to `part` or to a module it is
/// part of or that is part of it (`for p in model.backbone.parameters():
/// p.requires_grad = True` in the epoch loop, `model.backbone.
/// requires_grad_(True)`, `model.requires_grad_()`): the parameters frozen
/// before are trained later, so an optimizer built over all of them holds
/// what it will need.
pub fn unfrozen_after(module: &Module, at: &Expr, part: &str) -> bool {
    let body = module.tree.owner(at.id).and_then(|s| module.enclosing_function_body(s)).unwrap_or(&module.body);
    let related = |x: &str| x == part || is_below(x, part) || is_below(part, x);
    let mut found = false;
    for_each_stmt_in_function(body, &mut |s| {
        if found || s.span.start < at.span.end {
            return;
        }
        found = match &s.kind {
            StmtKind::For { target, iter, body, .. } => unfrozen_by_loop(target, iter, body).is_some_and(|m| related(&m)),
            StmtKind::Expr(e) => e.as_method_call().is_some_and(|(recv, method)| {
                method == "requires_grad_"
                    && recv.dotted().is_some_and(|d| related(&d))
                    && e.as_call().is_some_and(|(_, args, _)| args.first().is_none_or(Expr::is_true))
            }),
            _ => false,
        };
    });
    found
}
