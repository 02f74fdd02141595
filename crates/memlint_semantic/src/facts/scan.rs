//! Pre-walk scans over a function or loop body: names assigned (and
//! where unconditionally), `backward()` calls and roots, values kept
//! alive, frozen parameters, guards and the `.data` swap-and-restore
//! pattern. They read the IR only, not the walk's state.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use crate::ir::{for_each_expr_in_function, for_each_stmt_in_function, Expr, ExprKind, Stmt, StmtId, StmtKind, Words};
use crate::resolve::words;

/// Tensor methods whose result carries no autograd history.
pub(crate) const DETACHING_METHODS: &[&str] = &[
    "item", "detach", "tolist", "numpy", "size", "dim", "numel", "argmax", "argmin", "eq", "ne", "lt", "le", "gt",
    "ge", "long", "int", "bool", "nelement", "element_size", "data_ptr", "is_contiguous", "isnan", "isinf",
    "isfinite", "__float__", "__int__", "sign", "topk_indices",
    // tch: a value read back to the host (`loss.double_value(&[])`).
    "double_value", "int64_value",
];
/// Builtins whose result is a Python scalar or non-tensor.
pub(crate) const SCALAR_BUILTINS: &[&str] = &["float", "int", "bool", "len", "str", "round", "repr", "abs_int", "isinstance"];

pub(crate) fn assigned_names(body: &[Stmt]) -> HashSet<String> {
    let mut out = HashSet::default();
    for_each_stmt_in_function(body, &mut |s| match &s.kind {
        StmtKind::Assign { targets, value, .. } => {
            for t in targets {
                let mut names = Vec::new();
                collect_target_names(t, &mut names);
                for n in names {
                    if !reads(value, &n) {
                        out.insert(n);
                    }
                }
            }
        }
        StmtKind::For { target, .. } => {
            let mut names = Vec::new();
            collect_target_names(target, &mut names);
            out.extend(names);
        }
        StmtKind::With { items, .. } => {
            for it in items {
                if let Some(t) = &it.target {
                    let mut names = Vec::new();
                    collect_target_names(t, &mut names);
                    out.extend(names);
                }
            }
        }
        _ => {}
    });
    out
}

/// Per name assigned in a loop body (from a value that does not read it),
/// the statements at which it is re-created in the same iteration: every
/// path of the body's control-flow graph from its start to the statement,
/// or from the statement to the end of the iteration (`continue`
/// included), passes an assignment of it. `if i % 100 == 0: total = 0` is
/// not a reset; `if bad: continue` before `outs = []` does not hide one.
pub(crate) fn unconditional_assigned(body: &[Stmt]) -> HashMap<String, HashSet<StmtId>> {
    let candidates = assigned_names(body);
    let mut out = HashMap::default();
    if candidates.is_empty() {
        return out;
    }
    let cfg = crate::ir::cfg::Cfg::build(body);
    let binds = |node: crate::ir::cfg::NodeId, name: &str| -> bool {
        let Some(s) = cfg.stmt(node) else { return false };
        let mut names = Vec::new();
        match &s.kind {
            StmtKind::Assign { targets, value, .. } => {
                for t in targets {
                    collect_target_names(t, &mut names);
                }
                names.iter().any(|n| n == name) && !reads(value, name)
            }
            StmtKind::With { items, .. } => {
                for it in items {
                    if let Some(t) = &it.target {
                        collect_target_names(t, &mut names);
                    }
                }
                names.iter().any(|n| n == name)
            }
            _ => false,
        }
    };
    for n in candidates {
        let from_start = cfg.reachable_avoiding(cfg.entry(), &|node| binds(node, &n));
        let to_end = cfg.reaching_avoiding(cfg.exit(), &|node| binds(node, &n));
        let stmts: HashSet<StmtId> = cfg
            .nodes()
            .filter(|&node| !from_start[node] || !to_end[node])
            .filter_map(|node| cfg.stmt(node).map(|s| s.id))
            .collect();
        out.insert(n, stmts);
    }
    out
}

pub(crate) fn reads(value: &Expr, dotted: &str) -> bool {
    value.any(&mut |e| e.dotted().as_deref() == Some(dotted))
}

pub(crate) fn collect_target_names(target: &Expr, out: &mut Vec<String>) {
    match &target.kind {
        ExprKind::Sequence(elts) => elts.iter().for_each(|e| collect_target_names(e, out)),
        ExprKind::Starred(e) => collect_target_names(e, out),
        _ => {
            if let Some(d) = target.dotted() {
                out.push(d.into());
            }
        }
    }
}

pub(crate) fn flatten_tuple_names(target: &Expr, out: &mut Vec<String>) {
    match &target.kind {
        ExprKind::Sequence(elts) => elts.iter().for_each(|e| flatten_tuple_names(e, out)),
        ExprKind::Name(n) => out.push(n.to_string()),
        _ => {}
    }
}

/// `enumerate(x)`, `tqdm(x)`, `iter(x)`, `zip(x, ...)` -> `x`.
pub(crate) fn unwrap_iter_call(iter: &Expr) -> &Expr {
    // Rust: `vs.trainable_variables().iter_mut()`, `&mut params`.
    if let Some((recv, "iter" | "iter_mut" | "into_iter")) = iter.as_method_call() {
        return unwrap_iter_call(recv);
    }
    if let ExprKind::Unary { operand, op: crate::ir::UnaryOp::Ref | crate::ir::UnaryOp::RefMut } = &iter.kind {
        return unwrap_iter_call(operand);
    }
    if let Some((func, args, _)) = iter.as_call() {
        if let ExprKind::Name(n) = &func.kind {
            if matches!(n.as_str(), "enumerate" | "tqdm" | "iter" | "zip" | "list" | "sorted" | "reversed") {
                if let Some(a) = args.first() {
                    return unwrap_iter_call(a);
                }
            }
        }
    }
    iter
}

/// Dotted names that name the iterated collection: arguments and the
/// method name of a call, never a plain function's name.
pub(crate) fn loader_names(iter: &Expr, out: &mut Vec<String>) {
    match &iter.kind {
        ExprKind::Name(_) | ExprKind::Attribute { .. } => {
            if let Some(d) = iter.dotted() {
                out.push(d.rsplit('.').next().unwrap_or(&d).to_string());
            }
        }
        ExprKind::Call { func, args, .. } => {
            if let ExprKind::Attribute { value, attr, .. } = &func.kind {
                // Rust's iterator methods (`data.iter().enumerate()`) name
                // no data: what they iterate is their receiver.
                const ITERATOR_METHODS: &[&str] =
                    &["iter", "iter_mut", "into_iter", "enumerate", "zip", "take", "skip", "rev", "cloned", "copied", "step_by", "chain"];
                if ITERATOR_METHODS.contains(&attr.as_str()) {
                    loader_names(value, out);
                } else {
                    out.push(attr.to_string());
                }
            }
            args.iter().for_each(|a| loader_names(a, out));
        }
        ExprKind::Subscript { value, .. } => loader_names(value, out),
        _ => {}
    }
}

/// `loss.backward()`, `torch.autograd.grad(...)`, `torch.autograd.backward(...)`,
/// tch's `opt.backward_step(&loss)`
/// (matched by their dotted spelling: no resolution is needed for these).
pub(crate) fn is_backward_call(e: &Expr) -> bool {
    if let Some((_, name)) = e.as_method_call() {
        if crate::api::tch::BACKWARD_STEP_METHODS.contains(&name) {
            return true;
        }
        let callee = crate::api::Callee::Method { name, receiver: crate::api::Receiver::Other, receiver_is_path: false };
        if matches!(crate::api::classify(e, callee), Some(crate::api::Event::Backward { .. })) {
            return true;
        }
    }
    e.as_call()
        .and_then(|(func, _, _)| func.dotted())
        .is_some_and(|d| d.ends_with("autograd.grad") || d.ends_with("autograd.backward"))
}

/// Whether the body runs a backward pass that consumes a graph:
/// `.backward()`, `torch.autograd.backward(...)`, or `torch.autograd.grad(...)`
/// without `create_graph`. A gradient taken with `create_graph=True`
/// (a gradient penalty, an IRM penalty, a Hessian-vector product), or with
/// `create_graph` set by a flag (MAML's inner loop, `create_graph=
/// use_second_order`: written for the second-order case), is part of a
/// forward: it builds more graph for a later backward, and a loop that
/// calls it is not a training loop.
pub(crate) fn calls_backward(body: &[Stmt]) -> bool {
    let mut found = false;
    for_each_expr_in_function(body, &mut |e| {
        found |= is_backward_call(e) && e.keyword("create_graph").is_none_or(Expr::is_false);
    });
    found
}

/// Whether the body takes gradients of a graph in any way, `create_graph=True`
/// included: what it differentiates needs its graph.
pub(crate) fn takes_gradients(body: &[Stmt]) -> bool {
    let mut found = false;
    for_each_expr_in_function(body, &mut |e| found |= is_backward_call(e));
    found
}

/// The functions defined in `body` (not inside a nested function) whose
/// own body takes gradients: a Hessian-vector product `def hvp(y, w, v):`
/// local to the function that calls it with a loss.
pub(crate) fn local_backward_helpers(body: &[Stmt]) -> HashSet<String> {
    let mut out = HashSet::default();
    for_each_stmt_in_function(body, &mut |s| {
        if let StmtKind::Function(f) = &s.kind {
            if takes_gradients(&f.body) {
                out.insert(f.name.to_string());
            }
        }
    });
    out
}

/// Whether `body` calls one of `helpers` by name.
pub(crate) fn calls_one_of(body: &[Stmt], helpers: &HashSet<String>) -> bool {
    let mut found = false;
    for_each_expr_in_function(body, &mut |e| {
        if let Some((func, _, _)) = e.as_call() {
            found |= func.as_name().is_some_and(|n| helpers.contains(n));
        }
    });
    found
}

pub(crate) fn is_detached(v: &Expr) -> bool {
    if let Some((_, m)) = v.as_method_call() {
        return DETACHING_METHODS.contains(&m);
    }
    if let Some((func, _, _)) = v.as_call() {
        if let Some(n) = func.as_name() {
            return SCALAR_BUILTINS.contains(&n);
        }
    }
    false
}

/// Names stored where they outlive the function: returned, yielded, assigned
/// to an attribute or item, appended to a container.
pub(crate) fn kept_alive(body: &[Stmt], words: Words) -> HashSet<String> {
    let mut out = HashSet::default();
    let add_names = |e: &Expr, out: &mut HashSet<String>| {
        let mut stack = vec![e];
        while let Some(x) = stack.pop() {
            match &x.kind {
                ExprKind::Sequence(es) => stack.extend(es.iter()),
                ExprKind::Dict(items) => stack.extend(items.iter().map(|(_, v)| v)),
                _ => {
                    if let Some(d) = x.dotted() {
                        out.insert(d.into());
                    }
                }
            }
        }
    };
    for_each_stmt_in_function(body, &mut |s| match &s.kind {
        StmtKind::Return(Some(v)) => add_names(v, &mut out),
        StmtKind::Assign { targets, value, .. }
            if targets.iter().any(|t| matches!(t.kind, ExprKind::Attribute { .. } | ExprKind::Subscript { .. })) => {
                add_names(value, &mut out);
            }
        _ => {}
    });
    // Only a body that names one of these methods can store through them.
    if !words.contains(Words::STORE) {
        return out;
    }
    for_each_expr_in_function(body, &mut |e| {
        if let Some((_, m)) = e.as_method_call() {
            if Words::of(m) == Words::STORE {
                if let Some((_, args, _)) = e.as_call() {
                    for a in args {
                        add_names(a, &mut out);
                    }
                }
            }
        }
    });
    out
}

/// Whether an expression is an attribute chain on `self` (`self.fc`, `self.enc.fc`).
pub(crate) fn is_self_attribute(e: &Expr) -> bool {
    let mut cur = e;
    let mut depth = 0;
    while let ExprKind::Attribute { value, .. } = &cur.kind {
        cur = value;
        depth += 1;
    }
    depth > 0 && cur.as_name() == Some("self")
}

/// `model.parameters()`, `group["params"]`, `opt.param_groups[0]["params"]`.
pub(crate) fn is_parameter_iterable(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Call { .. } => matches!(
            unwrap_iter_call(e).as_method_call(),
            Some((_, "parameters" | crate::api::tch::TRAINABLE_VARIABLES))
        ),
        ExprKind::Subscript { index, .. } => {
            matches!(&index.kind, ExprKind::Literal(crate::ir::Literal::Str(s)) if s == "params")
        }
        _ => false,
    }
}

/// Whether a loop body reads the gradient of its loop variable (`for p in
/// self.master_params: ... p.grad ...`): the loop runs over parameters,
/// whatever holds them (a list copied from `model.parameters()`, an
/// attribute).
pub(crate) fn reads_grad_of(target: &Expr, body: &[Stmt]) -> bool {
    let Some(name) = target.as_name() else { return false };
    let mut found = false;
    crate::ir::for_each_stmt_in_function(body, &mut |s| {
        s.for_each_expr(|e| {
            found |= e.any(&mut |x| {
                matches!(&x.kind, ExprKind::Attribute { value, attr, .. } if attr.as_str() == crate::api::nn::GRAD && value.as_name() == Some(name))
            });
        });
    });
    found
}

/// The loop variable that holds a layer: `for m in model.modules()` /
/// `.children()`, or a loop over an attribute (`for mi in m.m`, `for mi, s
/// in zip(m.m, m.stride)`) whose body reads the variable's `.weight` or
/// `.bias`.
pub(crate) fn layer_loop_variable<'e>(target: &'e Expr, iter: &Expr, body: &[Stmt]) -> Option<&'e str> {
    let (target, iter) = match (iter.as_call(), &target.kind) {
        (Some((func, args, _)), ExprKind::Sequence(elts)) if func.as_name() == Some("zip") => (elts.first()?, args.first()?),
        _ => (target, iter),
    };
    let name = target.as_name()?;
    if matches!(iter.as_method_call(), Some((_, "modules" | "children"))) {
        return Some(name);
    }
    if !matches!(iter.kind, ExprKind::Attribute { .. }) || iter.dotted().is_none() {
        return None;
    }
    let reads_param = |e: &Expr| {
        e.any(&mut |x| matches!(&x.kind, ExprKind::Attribute { value, attr, .. } if matches!(attr.as_str(), "weight" | "bias") && value.as_name() == Some(name)))
    };
    let mut found = false;
    crate::ir::for_each_stmt_in_function(body, &mut |s| {
        if !found {
            s.for_each_expr(|e| found |= reads_param(e));
        }
    });
    found.then_some(name)
}

/// `for p in model.parameters(): p.requires_grad = False` (or
/// `p.requires_grad_(False)`, `p.detach_()`; or over
/// `model.named_parameters()`) freezes `model`.
pub(crate) fn frozen_by_loop(target: &Expr, iter: &Expr, body: &[Stmt]) -> Option<String> {
    grad_switched_by_loop(target, iter, body, false)
}

/// The parameters (by position) that a function freezes whole, in its
/// top-level statements: `def freeze_model(model): for p in
/// model.parameters(): p.requires_grad = False`, or
/// `model.requires_grad_(False)`. A freeze under a condition (`if
/// feature_extracting:`) is not counted.
pub(crate) fn frozen_params(f: &crate::ir::Function) -> Vec<usize> {
    let mut out = Vec::new();
    for s in &f.body {
        let frozen = match &s.kind {
            StmtKind::For { target, iter, body, .. } => frozen_by_loop(target, iter, body),
            StmtKind::Expr(e) => match e.as_method_call() {
                Some((recv, "requires_grad_")) if e.as_call().is_some_and(|(_, args, _)| args.first().is_some_and(Expr::is_false)) => {
                    recv.dotted().map(|d| d.to_string())
                }
                _ => None,
            },
            _ => None,
        };
        if let Some(i) = frozen.and_then(|m| f.params.iter().position(|p| p.name == m)) {
            if !out.contains(&i) {
                out.push(i);
            }
        }
    }
    out
}

/// `for name, p in model.named_parameters(): if name not in ["fc.weight",
/// "fc.bias"]: p.requires_grad = False` freezes all of `model` but the
/// part the test keeps (`fc`): the model and that part's dotted name. The
/// test must keep what it names (`name not in [...]`, `not
/// name.startswith("fc")`); one that freezes what it names freezes a part.
pub(crate) fn frozen_but_named_by_loop(target: &Expr, iter: &Expr, body: &[Stmt]) -> Option<(String, String)> {
    let ExprKind::Sequence(elts) = &target.kind else { return None };
    let (Some(name), Some(p)) = (elts.first().and_then(Expr::as_name), elts.get(1).and_then(Expr::as_name)) else { return None };
    let (model, "named_parameters") = iter.as_method_call()? else { return None };
    let model = model.dotted()?;
    let [s] = body else { return None };
    let StmtKind::If { test, body, orelse } = &s.kind else { return None };
    let freezes = body.iter().any(|s| {
        matches!(&s.kind, StmtKind::Assign { targets, value, .. }
            if value.is_false() && targets.iter().any(|t| t.dotted().as_deref() == Some(&format!("{p}.requires_grad"))))
    });
    let keeps = match &test.kind {
        ExprKind::Unary { op: crate::ir::UnaryOp::Not, operand } => operand.any(&mut |e| e.as_name() == Some(name)),
        ExprKind::Compare { left, ops, .. } => left.as_name() == Some(name) && ops.len() == 1 && ops[0] == crate::ir::CmpOp::NotIn,
        _ => false,
    };
    if !orelse.is_empty() || !freezes || !keeps {
        return None;
    }
    let mut kept = None;
    test.any(&mut |e| {
        if let ExprKind::Literal(crate::ir::Literal::Str(s)) = &e.kind {
            kept = s.split('.').next().filter(|k| !k.is_empty()).map(str::to_string);
        }
        kept.is_some()
    });
    Some((model.to_string(), format!("{model}.{}", kept?)))
}

/// `for p in model.parameters(): p.requires_grad = True` (or
/// `p.requires_grad_()`, `p.requires_grad_(True)`) unfreezes `model`.
pub(crate) fn unfrozen_by_loop(target: &Expr, iter: &Expr, body: &[Stmt]) -> Option<String> {
    grad_switched_by_loop(target, iter, body, true)
}

/// The model whose parameters a loop over `model.parameters()` sets to
/// require grad (`on`) or not.
fn grad_switched_by_loop(target: &Expr, iter: &Expr, body: &[Stmt], on: bool) -> Option<String> {
    // `for p in model.parameters()`, or `for name, p in
    // model.named_parameters()` (a switch under a test of the name is not
    // a top-level statement of the body).
    let (p, mut model) = match (&target.kind, iter.as_method_call()?) {
        (ExprKind::Name(p), (model, "parameters")) => (p.as_str(), model),
        (ExprKind::Sequence(elts), (model, "named_parameters")) if elts.len() == 2 => (elts[1].as_name()?, model),
        _ => return None,
    };
    // What is given back grad may be an item of a part
    // (`model.blocks[-1].parameters()`): the part counts.
    while let (true, ExprKind::Subscript { value, .. }) = (on, &model.kind) {
        model = value;
    }
    let model = model.dotted()?;
    let flag = |e: &Expr| if on { e.is_true() } else { e.is_false() };
    let switches = body.iter().any(|s| match &s.kind {
        StmtKind::Assign { targets, value, .. } => {
            flag(value) && targets.iter().any(|t| t.dotted().as_deref() == Some(&format!("{p}.requires_grad")))
        }
        StmtKind::Expr(e) => match e.as_method_call() {
            Some((recv, "requires_grad_")) => {
                // `p.requires_grad_()` turns it on.
                recv.as_name() == Some(p)
                    && e.as_call().is_some_and(|(_, args, _)| args.first().map_or(on, &flag))
            }
            // `p.detach_()`: the parameter leaves autograd for good.
            Some((recv, "detach_")) => !on && recv.as_name() == Some(p),
            _ => false,
        },
        _ => false,
    });
    switches.then_some(model.into())
}

/// Whether `backward()` is called outside every loop of the body, not
/// counting calls under `if <flag>:` (the train-mode flag of a function
/// that also evaluates).
pub(crate) fn backward_outside_loops(body: &[Stmt], flag: Option<&str>) -> bool {
    body.iter().any(|s| match &s.kind {
        StmtKind::For { .. } | StmtKind::While { .. } | StmtKind::Function(_) | StmtKind::Class { .. } => false,
        StmtKind::If { test, body, orelse } => {
            if flag.is_some_and(|f| test.any(&mut |e| e.as_name() == Some(f))) {
                return false;
            }
            backward_outside_loops(body, flag) || backward_outside_loops(orelse, flag)
        }
        _ => {
            let mut found = false;
            s.for_each_expr(|e| {
                found |= e.any(&mut |x| is_backward_call(x));
            });
            found || s.child_blocks().any(|b| backward_outside_loops(b, flag))
        }
    })
}

/// Whether `backward()` is called in the body (loops included) other than
/// under `if <flag>:`.
pub(crate) fn backward_unguarded(body: &[Stmt], flag: &str) -> bool {
    body.iter().any(|s| match &s.kind {
        StmtKind::Function(_) | StmtKind::Class { .. } => false,
        StmtKind::If { test, body, orelse } => {
            if test.any(&mut |e| e.as_name() == Some(flag)) {
                return backward_unguarded(orelse, flag);
            }
            backward_unguarded(body, flag) || backward_unguarded(orelse, flag)
        }
        _ => {
            let mut found = false;
            s.for_each_expr(|e| found |= e.any(&mut |x| is_backward_call(x)));
            found || s.child_blocks().any(|b| backward_unguarded(b, flag))
        }
    })
}

/// The last segments of the exception types an `except` clause names.
pub(crate) fn handler_type_names(h: &crate::ir::Handler) -> Vec<String> {
    let Some(t) = &h.types else { return vec!["BaseException".to_string()] };
    let one = |e: &Expr| e.dotted().map(|d| d.rsplit('.').next().unwrap_or(&d).to_string());
    match &t.kind {
        ExprKind::Sequence(items) => items.iter().filter_map(one).collect(),
        _ => one(t).into_iter().collect(),
    }
}

/// Whether a loss function sums over the samples: it reduces some loss
/// with `reduction="sum"` (or `size_average=False`) and averages nothing
/// (YOLO's losses, summed over the batch, with the learning rate divided
/// by the batch size instead). Accumulating such a loss over micro-batches
/// gives the sum over the large batch, as one step of it would.
pub(crate) fn sums_losses(body: &[Stmt]) -> bool {
    let (mut sums, mut averages) = (false, false);
    for_each_expr_in_function(body, &mut |e| {
        if e.as_call().is_some() {
            sums |= crate::api::sums_over_samples(e);
            averages |= crate::api::averages(e);
        }
    });
    sums && !averages
}

/// The names the module binds to a loss reduced by summing over the
/// samples (`criterion = nn.MSELoss(reduction="sum")`), in any function.
pub fn sum_reduced_names(body: &[Stmt]) -> HashSet<String> {
    let mut out = HashSet::default();
    crate::ir::for_each_stmt_in_module(body, &mut |s| {
        if let StmtKind::Assign { targets, value, .. } = &s.kind {
            if value.as_call().is_some() && crate::api::sums_over_samples(value) {
                out.extend(targets.iter().filter_map(|t| t.dotted().map(|d| d.to_string())));
            }
        }
    });
    out
}

/// Start offsets of the `backward()` calls in `body` (nested functions excluded).
pub(crate) fn backward_offsets(body: &[Stmt]) -> Vec<u32> {
    let mut out = Vec::new();
    crate::ir::for_each_expr_in_function(body, &mut |e| {
        if is_backward_call(e) {
            out.push(e.span.start);
        }
    });
    out
}

/// Whether `body` runs an adversarial attack: it calls a function or
/// method named for one (`adversary.perturb(x, y)`, `pgd_attack(model, x,
/// y)`, `fgsm(...)`; not `adversarial_loss(...)`, a GAN's loss). An attack takes
/// gradients of the model's output with respect to its input, so the
/// loop runs with autograd on by design.
pub(crate) fn runs_an_attack(body: &[Stmt]) -> bool {
    const ATTACK_WORDS: &[&str] = &["perturb", "attack", "fgsm", "pgd", "adversary"];
    let mut found = false;
    for_each_expr_in_function(body, &mut |e| {
        if found {
            return;
        }
        let name = match e.as_call().map(|(f, _, _)| &f.kind) {
            Some(ExprKind::Attribute { attr, .. }) => attr.as_str(),
            Some(ExprKind::Name(n)) => n.as_str(),
            _ => return,
        };
        found = words(name).iter().any(|w| ATTACK_WORDS.contains(&w.as_str()));
    });
    found
}

/// Whether `body` steps an environment: a `.step(...)` call on a receiver
/// named for one (`env`, `envs`, `self.test_env`, `vec_env`), or a step
/// method whose results name a reward.
pub(crate) fn steps_an_environment(body: &[Stmt]) -> bool {
    let mut found = false;
    for_each_expr_in_function(body, &mut |e| {
        if found {
            return;
        }
        found = is_env_call(e, &["step"]);
    });
    // An agent's own wrapper of the environment's step, known by what it
    // gives back: `next_state, reward, done = self.step(action)`.
    for_each_stmt_in_function(body, &mut |s| {
        if found {
            return;
        }
        if let StmtKind::Assign { targets, value, .. } = &s.kind {
            let rewards = |t: &Expr| match &t.kind {
                ExprKind::Sequence(elts) => {
                    elts.iter().any(|e| e.as_name().is_some_and(|n| words(n).iter().any(|w| matches!(w.as_str(), "reward" | "rewards" | "rew"))))
                }
                _ => false,
            };
            found = matches!(value.as_method_call(), Some((_, "step"))) && targets.iter().any(rewards);
        }
    });
    found
}

/// `env.step(action)`, `self.envs.reset()`: a call of one of `methods` on
/// an environment (a receiver named for one). What it returns comes from
/// the environment (arrays, numbers), never from autograd.
pub(crate) fn is_env_call(e: &Expr, methods: &[&str]) -> bool {
    let Some((recv, m)) = e.as_method_call() else { return false };
    if !methods.contains(&m) {
        return false;
    }
    let last = match &recv.kind {
        ExprKind::Name(n) => Some(n.as_str()),
        ExprKind::Attribute { attr, .. } => Some(attr.as_str()),
        _ => None,
    };
    last.is_some_and(|w| w.to_ascii_lowercase().contains("env"))
}

/// How a module uses `volatile=True`, PyTorch's way before 0.4 to turn
/// grad off (`Variable(x, volatile=True)`), a no-op since.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Volatile {
    /// The module never passes `volatile=True`.
    Unused,
    /// It does (or it wraps tensors in `Variable(...)`), and it also reads
    /// a loss by indexing its data (`loss.data[0]`, which raises on a 0-dim
    /// tensor from PyTorch 0.5 on); or, with or without it, it passes
    /// `retain_variables=` (to
    /// `backward()`, a `TypeError` from PyTorch 0.4 on): it is written for
    /// PyTorch before 0.4 and cannot run on a later one. On the PyTorch it
    /// runs on, `volatile=True` inputs record no graph.
    OldTorch,
    /// It does, in code that runs on a current PyTorch, where the argument
    /// does nothing.
    NoOp,
}

/// [`Volatile`] of the module `body`.
pub fn volatile_use(body: &[Stmt]) -> Volatile {
    let mut volatile = false;
    let mut indexes_loss = false;
    let mut retain_variables = false;
    let mut variable = false;
    crate::ir::for_each_stmt_in_module(body, &mut |s| {
        if (volatile || variable) && indexes_loss || retain_variables {
            return;
        }
        s.for_each_expr(|e| {
            e.any(&mut |x| {
                match &x.kind {
                    ExprKind::Call { func, .. } => {
                        volatile |= x.keyword("volatile").is_some_and(Expr::is_true);
                        retain_variables |= x.keyword("retain_variables").is_some();
                        variable |= func.dotted().is_some_and(|d| d.rsplit('.').next() == Some("Variable"));
                    }
                    ExprKind::Subscript { value, index, .. } => {
                        indexes_loss |= matches!(index.kind, ExprKind::Literal(crate::ir::Literal::Int(0)))
                            && matches!(&value.kind, ExprKind::Attribute { value: base, attr, .. } if attr == "data" && names_a_loss(base));
                    }
                    _ => {}
                }
                false
            });
        });
    });
    match (volatile, indexes_loss) {
        _ if retain_variables || (variable && indexes_loss) => Volatile::OldTorch,
        (false, _) => Volatile::Unused,
        (true, true) => Volatile::OldTorch,
        (true, false) => Volatile::NoOp,
    }
}

/// `loss`, `self.d_loss`, `F.nll_loss(...)`, `criterion(...)`.
fn names_a_loss(e: &Expr) -> bool {
    let e = match &e.kind {
        ExprKind::Call { func, .. } => func,
        _ => e,
    };
    e.dotted().is_some_and(|d| {
        let last = d.rsplit('.').next().unwrap_or("");
        words(last).iter().any(|w| w == "loss" || w == "criterion")
    })
}

/// Whether the dotted name `path` lies strictly below `prefix`
/// (`model.head.weight` below `model.head` and `model`, not below
/// `model.he`).
pub(crate) fn is_below(path: &str, prefix: &str) -> bool {
    path.len() > prefix.len() && path.starts_with(prefix) && path.as_bytes()[prefix.len()] == b'.'
}

/// Index of a parameter passed as the mode of `x.train(...)`, or tested by
/// an `if` whose arm calls `backward()`, and whether the test is negated
/// (`if not cross_valid:`: true says evaluation).
pub(crate) fn train_flag(body: &[Stmt], params: &[String]) -> Option<(usize, bool)> {
    let mut found = None;
    for_each_stmt_in_function(body, &mut |s| {
        // `if train: ...; loss.backward()`: a parameter that decides whether
        // the function trains (BERT-pytorch's `iteration(..., train=True)`);
        // `if not cross_valid:`, one that says it evaluates.
        if let StmtKind::If { test, body: arm, .. } = &s.kind {
            let (test, negated) = match &test.kind {
                ExprKind::Unary { op: crate::ir::UnaryOp::Not, operand } if operand.as_name().is_some() => (&**operand, true),
                _ => (&**test, false),
            };
            if let Some(i) = crate::facts::guards::training_test_name(test).and_then(|n| params.iter().position(|p| p == n)) {
                if calls_backward(arm) {
                    found = Some((i, negated));
                }
            }
        }
        s.for_each_expr(|e| {
            e.any(&mut |x| {
                if let Some((_, "train")) = x.as_method_call() {
                    if let Some((_, args, kws)) = x.as_call() {
                        let flag = args.first().or_else(|| kws.iter().find(|k| k.name.as_deref() == Some("mode")).map(|k| &k.value));
                        if let Some(n) = flag.and_then(Expr::as_name) {
                            if let Some(i) = params.iter().position(|p| p == n) {
                                found = Some((i, false));
                            }
                        }
                    }
                }
                false
            });
        });
    });
    found
}

/// Whether a loop body leaves after its first iteration (a `break` or
/// `return` of its own) or after a few, counted by a literal of at most 16
/// (`if j >= 9: break`, `if i == 4: break`, `if i == 0: return images,
/// outputs`).
pub fn stops_after_a_few(body: &[Stmt]) -> bool {
    let leaves = |s: &Stmt| matches!(s.kind, StmtKind::Break | StmtKind::Return(_));
    body.iter().any(|s| match &s.kind {
        StmtKind::Break | StmtKind::Return(_) => true,
        StmtKind::If { test, body, orelse } if orelse.is_empty() && matches!(&body[..], [b] if leaves(b)) => {
            matches!(&test.kind, ExprKind::Compare { ops, comparators, .. }
                if matches!(&ops[..], [crate::ir::CmpOp::GtE | crate::ir::CmpOp::Gt | crate::ir::CmpOp::Eq])
                    && matches!(&comparators[..], [c] if matches!(c.kind, ExprKind::Literal(crate::ir::Literal::Int(k)) if (0..=crate::facts::FEW_ITERATIONS).contains(&k))))
        }
        _ => false,
    })
}

/// Whether a class's `__init__` freezes all its own parameters at its top
/// level (pytorch-fid's `InceptionV3`): `for p in self.parameters():
/// p.requires_grad = False`, or `self.requires_grad_(False)`: `Some(None)`;
/// or the same with a parameter of `__init__` whose default is `False`
/// (`p.requires_grad = requires_grad`): `Some(Some((i, name)))`, `i` its
/// position after `self`, frozen unless a construction passes it.
pub(crate) fn freezes_itself(class_body: &[Stmt]) -> Option<Option<(usize, String)>> {
    let init = class_body.iter().find_map(|s| match &s.kind {
        StmtKind::Function(f) if f.name == "__init__" => Some(f),
        _ => None,
    })?;
    // `self` frozen whole, as a function freezes a parameter.
    if init.params.first().is_some_and(|p| p.name == "self") && frozen_params(init).contains(&0) {
        return Some(None);
    }
    let off_by_default = |n: &str| init.params.iter().skip(1).position(|p| p.name == n && p.default.as_ref().is_some_and(Expr::is_false));
    init.body.iter().find_map(|s| match &s.kind {
        StmtKind::For { target: t, iter, body, .. } if iter.as_method_call().is_some_and(|(m, name)| name == "parameters" && m.as_name() == Some("self")) => {
            let (p, [one]) = (t.as_name()?, &body[..]) else { return None };
            let StmtKind::Assign { targets, value, .. } = &one.kind else { return None };
            if !targets.iter().any(|t| t.dotted().as_deref() == Some(&format!("{p}.requires_grad"))) {
                return None;
            }
            let n = value.as_name()?;
            off_by_default(n).map(|i| Some((i, n.to_string())))
        }
        _ => None,
    })
}
