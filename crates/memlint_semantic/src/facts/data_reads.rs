//! What a function does with the values it reads through `.data`: a
//! swap-and-restore, or distances fed only to an index.

use rustc_hash::FxHashSet as HashSet;

use crate::context::METADATA_ATTRIBUTES;
use crate::ir::{for_each_stmt_in_function, Expr, ExprId, ExprKind, Function, Stmt, StmtKind};

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

/// Whether `call` passes its argument `arg` to a function defined at the
/// top of `body` (the module's) whose parameter for it is only read for
/// what a tensor is: a template (`dropout_mask(w.data, size, p)` with
/// `return x.new(*sz).bernoulli_(1 - p)`, or `x.size()`, `x.dtype`).
pub fn passed_as_template(body: &[Stmt], call: &Expr, arg: ExprId) -> bool {
    let Some((func, args, keywords)) = call.as_call() else { return false };
    let Some(name) = func.as_name() else { return false };
    let Some(f) = body.iter().rev().find_map(|s| match &s.kind {
        StmtKind::Function(f) if f.name == name => Some(f),
        _ => None,
    }) else {
        return false;
    };
    let param = match args.iter().position(|a| a.id == arg) {
        Some(i) if i < f.positional as usize => f.params.get(i).map(|p| p.name.as_str()),
        Some(_) => None,
        None => keywords.iter().find(|k| k.value.id == arg).and_then(|k| k.name.as_ref()).map(|n| n.as_str()),
    };
    param.is_some_and(|p| only_describes(f, p))
}

/// Tensor methods that read only what their one argument is, not its
/// values: its dtype and device (`x.to(w.data)`, `x.type_as(w.data)`) or
/// its shape (`x.view_as(w.data)`).
const TEMPLATE_ARGUMENT_METHODS: &[&str] = &["to", "type_as", "view_as", "reshape_as", "expand_as"];

/// Whether the method call `call` takes `arg`, its one positional
/// argument, for what a tensor is ([`TEMPLATE_ARGUMENT_METHODS`]):
/// `scores.to(self.values.weight.data)` reads no value of the weight.
pub fn takes_as_template(call: &Expr, arg: ExprId) -> bool {
    let Some((_, method)) = call.as_method_call() else { return false };
    let Some((_, args, keywords)) = call.as_call() else { return false };
    TEMPLATE_ARGUMENT_METHODS.contains(&method) && keywords.is_empty() && matches!(args, [a] if a.id == arg)
}

/// Methods that read what their receiver is, not its values: a new
/// tensor of its type and device, its size or layout.
const DESCRIBING_METHODS: &[&str] = &[
    "new", "new_zeros", "new_ones", "new_empty", "new_full", "new_tensor", "size", "dim", "numel", "nelement",
    "element_size", "get_device", "stride", "is_contiguous",
];

/// Whether every use of `param` in `f` reads what the tensor is (the
/// receiver of `new`, `size`..., or `.shape`, `.dtype`...; not a copy of
/// its values such as `clone`) and the body never binds the name again.
fn only_describes(f: &Function, param: &str) -> bool {
    fn uses(e: &Expr, param: &str, ok: &mut bool, seen: &mut bool) {
        if !*ok {
            return;
        }
        let described = match (e.as_method_call(), &e.kind) {
            (Some((recv, m)), _) if DESCRIBING_METHODS.contains(&m) => Some(recv),
            (None, ExprKind::Attribute { value, attr, .. }) if METADATA_ATTRIBUTES.contains(&attr.as_str()) => Some(&**value),
            _ => None,
        };
        if described.is_some_and(|r| r.as_name() == Some(param)) {
            *seen = true;
            // The call's arguments may still use it otherwise.
            if let Some((_, args, keywords)) = e.as_call() {
                args.iter().chain(keywords.iter().map(|k| &k.value)).for_each(|a| uses(a, param, ok, seen));
            }
            return;
        }
        if e.as_name() == Some(param) {
            *ok = false;
            return;
        }
        e.for_each_child(|c| uses(c, param, ok, seen));
    }
    let (mut ok, mut seen) = (true, false);
    for_each_stmt_in_function(&f.body, &mut |s| {
        if let StmtKind::Assign { targets, .. } = &s.kind {
            if targets.iter().any(|t| t.binds(param)) {
                ok = false;
            }
        }
        s.for_each_expr(|e| uses(e, param, &mut ok, &mut seen));
    });
    ok && seen
}
