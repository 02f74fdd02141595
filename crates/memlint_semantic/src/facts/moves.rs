//! Helpers that move what they are given to an accelerator and return it
//! (`to_var(x)`, `batch_to_gpu(batch, device)`): a call of one is a move
//! of its argument ([`crate::index::FunctionSummary::moves_param`]).

use crate::context::Context;
use crate::ir::{for_each_stmt_in_function, Expr, ExprKind, Stmt, StmtKind};

/// The position among `params` of the parameter a function moves to an
/// accelerator and returns: moved whole (`x.cuda()`, `Variable(x).cuda()`,
/// `[t.cuda() for t in xs]`) or item by item in place (`batch[k] =
/// batch[k].to(device)`), and every `return` gives it back.
pub(crate) fn moved_param(body: &[Stmt], params: &[String], cx: &Context) -> Option<usize> {
    /// The name under the value's wrappers: `x`, `Variable(x)`, `x.cuda().float()`,
    /// and `xs` of `[x.cuda() for x in xs]`.
    fn root(e: &Expr) -> Option<&str> {
        match &e.kind {
            ExprKind::Name(n) => Some(n),
            ExprKind::Comprehension(c) if c.key.is_none() && c.generators.len() == 1 => {
                let g = &c.generators[0];
                (g.target.as_name().is_some() && root(&c.elt) == g.target.as_name()).then(|| g.iter.as_name()).flatten()
            }
            ExprKind::Call { func, args, .. } => match &func.kind {
                ExprKind::Attribute { value, .. } => root(value),
                ExprKind::Name(n) if n == "Variable" => args.first().and_then(root),
                _ => None,
            },
            _ => None,
        }
    }
    let mut returns: Vec<&Expr> = Vec::new();
    let mut bare_return = false;
    let mut moved: Vec<String> = Vec::new();
    for_each_stmt_in_function(body, &mut |s| {
        match &s.kind {
            StmtKind::Return(Some(v)) => returns.push(v),
            StmtKind::Return(None) => bare_return = true,
            _ => {}
        }
        if matches!(s.kind, StmtKind::Function(_) | StmtKind::Class(_)) {
            return;
        }
        // `batch[k] = batch[k].to(device)` (in a loop over the batch's
        // keys): the container's items moved in place.
        if let StmtKind::Assign { targets, value, .. } = &s.kind {
            if let [Expr { kind: ExprKind::Subscript { value: container, .. }, .. }] = &targets[..] {
                if let (Some(c), true) = (container.as_name(), cx.accelerator_move(value).is_some()) {
                    if !moved.iter().any(|m| m == c) {
                        moved.push(c.to_string());
                    }
                }
            }
        }
        s.for_each_expr(|e| {
            e.any(&mut |x| {
                if let Some(r) = cx.accelerator_move(x).and_then(|(recv, _)| root(recv)) {
                    if !moved.iter().any(|m| m == r) {
                        moved.push(r.to_string());
                    }
                }
                false
            });
        });
    });
    if returns.is_empty() || bare_return {
        return None;
    }
    // The elements of a list moved one by one (`[x.cuda() for x in xs]`)
    // move the list.
    let moved_all = |p: &str| {
        moved.iter().any(|m| m == p)
            || returns.iter().any(|r| matches!(&r.kind, ExprKind::Comprehension(c) if c.generators[0].target.as_name().is_some_and(|t| moved.iter().any(|m| m == t))))
    };
    params.iter().position(|p| moved_all(p) && returns.iter().all(|r| root(r) == Some(p.as_str())))
}
