//! What a function does with the values it reads through `.data`: a
//! swap-and-restore, or distances fed only to an index.

use rustc_hash::FxHashSet as HashSet;

use crate::ir::{for_each_stmt_in_function, Expr, ExprKind, Stmt, StmtKind};

/// Locals assigned a `.data` read (`saved = p.data`) and later assigned
/// back through `.data =` (`p.data = saved`).
pub(crate) fn data_restores(body: &[Stmt]) -> HashSet<String> {
    let mut saved = HashSet::default();
    let mut restored = HashSet::default();
    for_each_stmt_in_function(body, &mut |s| {
        if let StmtKind::Assign { targets, value, .. } = &s.kind {
            let reads_data = matches!(&value.kind, ExprKind::Attribute { attr, .. } if attr == "data");
            for t in targets {
                if let (Some(n), true) = (t.as_name(), reads_data) {
                    saved.insert(n.to_string());
                }
                if matches!(&t.kind, ExprKind::Attribute { attr, .. } if attr == "data") {
                    if let Some(n) = value.as_name() {
                        restored.insert(n.to_string());
                    }
                }
            }
        }
    });
    saved.intersection(&restored).cloned().collect()
}

/// Torch reductions whose result is an index (`torch.argmin(d, 1)`,
/// `d.argmax(-1)`): no gradient reaches their input through them.
pub(crate) const INDEX_RESULTS: &[&str] = &["argmin", "argmax", "argsort"];

/// Whether `e` is a call of an index reduction, as a function or a method.
pub(crate) fn is_index_call(e: &Expr) -> bool {
    let ExprKind::Call { func, .. } = &e.kind else { return false };
    match &func.kind {
        ExprKind::Attribute { attr, .. } | ExprKind::Name(attr) => INDEX_RESULTS.contains(&attr.as_str()),
        _ => false,
    }
}

/// Locals whose every use is an input of an index reduction or the
/// receiver of an in-place change (a distance matrix `d = ... ; d.addmm_(x,
/// w.data.T); idx = torch.argmin(d, 1)`, a codebook lookup): what they hold
/// reaches no gradient, so reading a parameter's `.data` into them cuts
/// nothing from the graph.
pub(crate) fn index_only_locals(body: &[Stmt]) -> HashSet<String> {
    // Per name: used as an index input, used otherwise.
    let mut assigned: HashSet<&str> = HashSet::default();
    let mut indexed: HashSet<&str> = HashSet::default();
    let mut other: HashSet<&str> = HashSet::default();
    fn uses<'a>(e: &'a Expr, in_index: bool, indexed: &mut HashSet<&'a str>, other: &mut HashSet<&'a str>) {
        if let ExprKind::Name(n) = &e.kind {
            if in_index {
                indexed.insert(n);
            } else {
                other.insert(n);
            }
            return;
        }
        let inner = in_index || is_index_call(e);
        e.for_each_child(|c| uses(c, inner, indexed, other));
    }
    for_each_stmt_in_function(body, &mut |s| match &s.kind {
        StmtKind::Assign { targets, value, .. } => {
            for t in targets {
                match t.as_name() {
                    Some(n) => {
                        assigned.insert(n);
                    }
                    None => uses(t, false, &mut indexed, &mut other),
                }
            }
            uses(value, false, &mut indexed, &mut other);
        }
        // `d.addmm_(x, w.T)`: a change of the local, not a use of its values
        // elsewhere.
        StmtKind::Expr(e) => match (e.as_method_call(), e.as_call()) {
            (Some((recv, m)), Some((_, args, keywords))) if m.ends_with('_') && recv.as_name().is_some() => {
                for a in args {
                    uses(a, false, &mut indexed, &mut other);
                }
                for k in keywords {
                    uses(&k.value, false, &mut indexed, &mut other);
                }
            }
            _ => uses(e, false, &mut indexed, &mut other),
        },
        StmtKind::Function(_) | StmtKind::Class(_) => {}
        _ => s.for_each_expr(|e| uses(e, false, &mut indexed, &mut other)),
    });
    assigned.into_iter().filter(|n| indexed.contains(n) && !other.contains(n)).map(str::to_string).collect()
}
