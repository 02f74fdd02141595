//! What a body's `backward()` calls run through: their roots, and the
//! names those roots are computed from.

use rustc_hash::FxHashSet as HashSet;

use crate::ir::{for_each_expr_in_function, Expr, Stmt, StmtKind};

use super::scan::collect_target_names;

/// Names whose value `backward()` is called on: `loss.backward()`,
/// `(loss / n).backward()`, `scaler.scale(loss).backward()`, tch's
/// `opt.backward_step(&loss)`.
pub(crate) fn backward_roots(body: &[Stmt]) -> HashSet<String> {
    let mut out = HashSet::default();
    for_each_expr_in_function(body, &mut |e| {
        let mut rec = |x: &Expr| -> bool {
            if let Some(d) = x.dotted() {
                out.insert(d.into());
            }
            false
        };
        match e.as_method_call() {
            Some((recv, "backward")) => {
                recv.any(&mut rec);
            }
            Some((_, m)) if crate::api::tch::BACKWARD_STEP_METHODS.contains(&m) => {
                if let Some(loss) = e.as_call().and_then(|(_, args, _)| args.first()) {
                    loss.any(&mut rec);
                }
            }
            _ => {}
        }
    });
    out
}

/// Whether one of `stmts`, run in order, surely calls `backward()` on
/// `root`: `loss.backward()` as a statement, or an `if` whose every arm
/// does (`accelerator.backward(loss)` in one, `loss.backward()` in the
/// other).
pub fn surely_backpropagates(stmts: &[Stmt], root: &str) -> bool {
    stmts.iter().any(|s| match &s.kind {
        StmtKind::Expr(e) => {
            let mut found = false;
            e.any(&mut |x| {
                if let Some((recv, "backward")) = x.as_method_call() {
                    let args = x.as_call().map_or(&[][..], |(_, args, _)| args);
                    found |= recv.any(&mut |r| r.dotted().is_some_and(|d| d == root))
                        || args.first().is_some_and(|a| a.dotted().is_some_and(|d| d == root));
                }
                found
            });
            found
        }
        StmtKind::If { body, orelse, .. } => !orelse.is_empty() && surely_backpropagates(body, root) && surely_backpropagates(orelse, root),
        _ => false,
    })
}

/// The names `body`'s `backward()` roots are computed from
/// ([`backward_roots`], and every name an assignment of the body to one of
/// them reads, transitively): the values whose graphs the backward runs
/// through and frees.
pub fn backward_inputs(body: &[Stmt]) -> HashSet<String> {
    let mut out = backward_roots(body);
    let mut assigns: Vec<(Vec<String>, &Expr)> = Vec::new();
    crate::ir::for_each_stmt_in_function(body, &mut |s| {
        if let StmtKind::Assign { targets, value, .. } = &s.kind {
            let mut names = Vec::new();
            targets.iter().for_each(|t| collect_target_names(t, &mut names));
            assigns.push((names, value));
        }
    });
    loop {
        let before = out.len();
        for (targets, value) in &assigns {
            if targets.iter().any(|t| out.contains(t.as_str())) {
                value.any(&mut |x| {
                    if let Some(d) = x.dotted() {
                        out.insert(d.into());
                    }
                    false
                });
            }
        }
        if out.len() == before {
            return out;
        }
    }
}

/// Whether `body` clips gradients (`clip_grad_norm_(...)`,
/// `accelerator.clip_grad_norm_(...)`, `clip_grad_value_`): a threshold
/// that a constant scale of the gradients changes.
pub fn clips_gradients(body: &[Stmt]) -> bool {
    let mut found = false;
    for_each_expr_in_function(body, &mut |e| {
        found |= e.any(&mut |x| {
            x.as_call().is_some_and(|(f, _, _)| match &f.kind {
                crate::ir::ExprKind::Name(n) | crate::ir::ExprKind::Attribute { attr: n, .. } => n.starts_with("clip_grad"),
                _ => false,
            })
        });
    });
    found
}
