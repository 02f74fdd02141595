//! The training-step events of a loop or function body: `backward()`
//! (plain or through a `GradScaler`), `optimizer.step()`, zeroing of
//! gradients, the scaler's `step`/`update`/`unscale_`, gradient clipping,
//! and calls of project helpers that do any of these (from the project
//! index, so a helper in another file counts).
//!
//! The training-step rules (ML104, ML105, ML106) ask questions of this
//! list: "is an optimizer stepped here without a zeroing anywhere in the
//! loop", "is this step under an accumulation guard". Each event keeps its
//! statement (for [`crate::ir::cfg::Cfg`] path queries), how many loops of the
//! body it sits in, and the `if` tests around it.

use memlint_diagnostics::Span;

use crate::ir::{BinOp, CmpOp, Expr, ExprKind, Literal, Stmt, StmtKind};
use crate::{Context, ValueKind};

pub use crate::api::StepKinds;
use crate::api::{self, Callee, Event, Receiver, Via};

/// What one event is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepKind {
    /// `loss.backward()`, `torch.autograd.backward(loss)`.
    Backward {
        /// Through a scaler: `scaler.scale(loss).backward()`.
        scaled: bool,
        /// Through a wrapper that takes the loss as an argument and may
        /// scale it itself (`accelerator.backward(loss)`, `engine.backward(loss)`).
        wrapper: bool,
    },
    /// `x.zero_grad(...)`; the receiver says whose.
    ZeroGrad,
    /// `p.grad = None`, `p.grad.zero_()`: one parameter's gradient reset.
    GradReset,
    /// `optimizer.step()`.
    OptimizerStep {
        /// Called with a closure (`LBFGS`): the closure zeroes and calls
        /// `backward()` itself.
        closure: bool,
    },
    /// `scaler.step(optimizer)`; the receiver is the optimizer.
    ScalerStep,
    /// `scaler.update()`.
    ScalerUpdate,
    /// `scaler.unscale_(optimizer)`; the receiver is the optimizer.
    ScalerUnscale,
    /// `torch.nn.utils.clip_grad_norm_` / `clip_grad_value_`.
    Clip,
    /// A project function that does these (transitively).
    Helper(StepKinds),
}

/// One event in a body.
#[derive(Debug, Clone)]
pub struct StepEvent<'a> {
    /// What happens.
    pub kind: StepKind,
    /// The statement of the body (at any depth) that holds the event.
    pub stmt: &'a Stmt,
    /// The call (or assignment) that is the event.
    pub span: Span,
    /// The optimizer stepped, unscaled or zeroed (dotted), the scaler for
    /// `ScalerUpdate`.
    pub receiver: Option<String>,
    /// For `Backward`: the loss expression (inside `scaler.scale(...)`, or
    /// the wrapper's argument).
    pub loss: Option<&'a Expr>,
    /// Loops of the body around the event (0: directly in the body).
    pub depth: u32,
    /// Inside a function defined in the body (a closure).
    pub in_def: bool,
    /// Tests of the `if`s of the body around the event, outermost first.
    pub guards: Vec<&'a Expr>,
}

impl StepEvent<'_> {
    /// Directly in the body: not in a nested loop or closure.
    pub fn is_direct(&self) -> bool {
        self.depth == 0 && !self.in_def
    }

    /// The kinds this event stands for in a summary.
    pub fn kinds(&self) -> StepKinds {
        self.kind.kinds()
    }
}

impl StepKind {
    /// The kinds this event stands for in a summary.
    pub fn kinds(self) -> StepKinds {
        match self {
            StepKind::Backward { .. } => StepKinds::BACKWARD,
            StepKind::ZeroGrad | StepKind::GradReset => StepKinds::ZERO,
            StepKind::OptimizerStep { .. } => StepKinds::OPT_STEP,
            StepKind::ScalerStep => StepKinds::OPT_STEP | StepKinds::SCALER_STEP,
            StepKind::ScalerUpdate => StepKinds::SCALER_UPDATE,
            StepKind::ScalerUnscale => StepKinds::SCALER_UNSCALE,
            StepKind::Clip => StepKinds::empty(),
            StepKind::Helper(k) => k,
        }
    }
}

/// The last segment of a dotted receiver, lowercased.
fn last_word(e: &Expr) -> Option<String> {
    match &e.kind {
        ExprKind::Name(n) => Some(n.as_str().to_ascii_lowercase()),
        ExprKind::Attribute { attr, .. } => Some(attr.as_str().to_ascii_lowercase()),
        ExprKind::Subscript { value, .. } => last_word(value),
        _ => None,
    }
}

/// Whether a receiver holds an optimizer: its kind is known, or its name
/// says so (`optimizer`, `self.opt_g`, `optimizers[i]`), and not a
/// scheduler or a scaler.
pub fn is_optimizer(e: &Expr, cx: &Context) -> bool {
    match cx.kind_of(e) {
        Some(ValueKind::Optimizer) => true,
        // An instance of a project class that is neither a module nor an
        // optimizer (`ema_optimizer = WeightEMA(model, ema_model)`, whose
        // `step()` averages weights): its name does not make it one.
        Some(ValueKind::Object) => false,
        _ => last_word(e).is_some_and(|w| optimizer_word(&w)),
    }
}

/// [`is_optimizer`] for a dotted name (`self.opt_d`).
pub fn is_optimizer_name(dotted: &str, cx: &Context) -> bool {
    cx.kind_of_binding(dotted) == Some(ValueKind::Optimizer)
        || optimizer_word(&dotted.rsplit('.').next().unwrap_or(dotted).to_ascii_lowercase())
}

fn optimizer_word(w: &str) -> bool {
    if w.contains("sched") || w.contains("scaler") || w.contains("lr") && !w.contains("optim") {
        return false;
    }
    // `ema_optimizer`, `optimizer_ema`: a weight average stepped beside
    // the optimizer, which has no gradients to clear.
    if w.split('_').any(|p| p == "ema" || p == "swa") {
        return false;
    }
    w.contains("optim")
        || w == "opt"
        || w.starts_with("opt_")
        || w.ends_with("_opt")
        || w.ends_with("_optim")
        || w.strip_prefix("opt").is_some_and(|rest| !rest.is_empty() && rest.chars().all(|c| c.is_ascii_digit() || c == '_'))
}

/// Whether a receiver holds a `GradScaler` (`scaler`, `self.grad_scaler`).
pub fn is_scaler(e: &Expr) -> bool {
    last_word(e).is_some_and(|w| w.contains("scaler") && !w.contains("sched"))
}

/// Classifies one call (or `p.grad = ...` assignment target) as a step
/// event: `(kind, receiver, loss)`. The call's meaning comes from
/// [`api::classify`]; this adds what the walk knows of the receiver and
/// which expressions are the loss and the optimizer.
pub fn classify<'a>(e: &'a Expr, cx: &Context) -> Option<(StepKind, Option<String>, Option<&'a Expr>)> {
    let (func, args, _) = e.as_call()?;
    // An imported name: torch's API, or an imported project helper below.
    // Whether the callee is torch's is known from its root's import; its
    // name is built only when its last segment can match.
    let torch_root = func
        .dotted_root()
        .and_then(|(root, _)| cx.lookup_import(root))
        .filter(|t| *t == "torch" || t.starts_with("torch."));
    if let Some(target) = torch_root {
        let last = match &func.kind {
            ExprKind::Attribute { attr, .. } => attr.as_str(),
            _ => target.rsplit('.').next().unwrap_or(target),
        };
        if !api::may_be_library_event(last) {
            return None;
        }
        let q = cx.qualified_name(func)?;
        return match api::classify(e, Callee::Library(q.as_str())) {
            Some(Event::Backward { via: Via::Function, .. }) => {
                Some((StepKind::Backward { scaled: false, wrapper: false }, None, args.first().or_else(|| e.keyword("tensors"))))
            }
            Some(Event::ClipGrad) => Some((StepKind::Clip, None, None)),
            _ => None,
        };
    }
    if let Some((recv, method)) = e.as_method_call() {
        if api::may_be_method_event(method) {
            let receiver_is_path = recv.as_name().is_some() || matches!(recv.kind, ExprKind::Attribute { .. });
            let receiver = receiver_of(method, recv, !args.is_empty() && receiver_is_path, cx);
            let dotted = |x: &Expr| x.dotted().map(String::from);
            let first = || args.first().and_then(dotted);
            match api::classify(e, Callee::Method { name: method, receiver, receiver_is_path }) {
                Some(Event::Backward { via: Via::Scaled, .. }) => {
                    let srecv = recv.as_method_call().map(|(s, _)| s);
                    let loss = recv.as_call().and_then(|(_, a, _)| a.first());
                    return Some((StepKind::Backward { scaled: true, wrapper: false }, srecv.and_then(dotted), loss));
                }
                Some(Event::Backward { via: Via::Wrapper, .. }) => {
                    return Some((StepKind::Backward { scaled: false, wrapper: true }, dotted(recv), args.first()));
                }
                Some(Event::Backward { .. }) => return Some((StepKind::Backward { scaled: false, wrapper: false }, None, Some(recv))),
                Some(Event::ZeroGrad { .. }) => return Some((StepKind::ZeroGrad, dotted(recv), None)),
                Some(Event::GradReset) => return Some((StepKind::GradReset, None, None)),
                Some(Event::ScalerStep) => return Some((StepKind::ScalerStep, first(), None)),
                Some(Event::ScalerUpdate) => return Some((StepKind::ScalerUpdate, dotted(recv), None)),
                Some(Event::ScalerUnscale) => return Some((StepKind::ScalerUnscale, first(), None)),
                Some(Event::OptimizerStep { closure }) => return Some((StepKind::OptimizerStep { closure }, dotted(recv), None)),
                _ => {}
            }
        }
    }
    let f = cx.project_callee(e)?;
    let kinds = cx.index().performs(&f.qualname);
    (!kinds.is_empty()).then_some((StepKind::Helper(kinds), None, None))
}

/// What the receiver of `recv.method(...)` is, as far as classifying the
/// method needs; the walk's facts are consulted only where the answer
/// depends on them (`wrapper_shaped`: the call could be a wrapper's
/// `backward(loss)`).
fn receiver_of(method: &str, recv: &Expr, wrapper_shaped: bool, cx: &Context) -> Receiver {
    match method {
        "backward" => {
            if recv.as_method_call().is_some_and(|(s, m)| m == "scale" && is_scaler(s)) {
                Receiver::ScaledLoss
            } else if wrapper_shaped && !cx.is_tensor(recv) && !cx.carries_graph(recv) {
                Receiver::Other
            } else {
                Receiver::Tensor
            }
        }
        "zero_" | "fill_" if is_grad_attr(recv) => Receiver::GradAttr,
        _ if is_scaler(recv) => Receiver::Scaler,
        "step" if is_optimizer(recv, cx) => Receiver::Optimizer,
        _ => Receiver::Other,
    }
}

/// `p.grad`, `p.grad.data`.
fn is_grad_attr(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Attribute { value, attr, .. } if attr == "data" => is_grad_attr(value),
        ExprKind::Attribute { attr, .. } => attr == "grad",
        _ => false,
    }
}

/// Whether a statement assigns a parameter's gradient (`p.grad = None`).
pub fn resets_grad(s: &Stmt) -> bool {
    match &s.kind {
        StmtKind::Assign { targets, .. } => targets.iter().any(is_grad_attr),
        _ => false,
    }
}

/// The step events of `body`, in source order.
pub fn step_events<'a>(body: &'a [Stmt], cx: &Context) -> Vec<StepEvent<'a>> {
    let mut out = Vec::new();
    let mut guards = Vec::new();
    let mut scaled = Vec::new();
    collect(body, cx, 0, false, &mut guards, &mut scaled, &mut out);
    out
}

/// `scaled = scaler.scale(loss)`: `(name, scaler)`.
fn scaled_binding(s: &Stmt) -> Option<(String, Option<String>)> {
    let StmtKind::Assign { targets, value, .. } = &s.kind else { return None };
    let [target] = targets.as_slice() else { return None };
    let (recv, "scale") = value.as_method_call()? else { return None };
    is_scaler(recv).then(|| (target.dotted().map(String::from), recv.dotted().map(String::from))).and_then(|(t, r)| Some((t?, r)))
}

fn collect<'a>(
    body: &'a [Stmt],
    cx: &Context,
    depth: u32,
    in_def: bool,
    guards: &mut Vec<&'a Expr>,
    scaled: &mut Vec<(String, Option<String>)>,
    out: &mut Vec<StepEvent<'a>>,
) {
    for s in body {
        let push = |out: &mut Vec<StepEvent<'a>>, kind, span, receiver, loss, guards: &Vec<&'a Expr>| {
            out.push(StepEvent { kind, stmt: s, span, receiver, loss, depth, in_def, guards: guards.clone() })
        };
        if resets_grad(s) {
            push(out, StepKind::GradReset, s.span, None, None, guards);
        }
        if !matches!(s.kind, StmtKind::Function(_) | StmtKind::Class { .. }) {
            fn rec<'a>(e: &'a Expr, f: &mut dyn FnMut(&'a Expr)) {
                f(e);
                e.for_each_child(|c| rec(c, f));
            }
            s.for_each_expr(|e| {
                rec(e, &mut |x| {
                    if let Some((mut kind, mut receiver, loss)) = classify(x, cx) {
                        // `scaled = scaler.scale(loss); scaled.backward()`.
                        if let (StepKind::Backward { scaled: false, wrapper: false }, Some(l)) = (kind, loss) {
                            if let Some((_, scaler)) = l.dotted().and_then(|d| scaled.iter().find(|(n, _)| *n == d)) {
                                kind = StepKind::Backward { scaled: true, wrapper: false };
                                receiver = scaler.clone();
                            }
                        }
                        push(out, kind, x.span, receiver, loss, guards);
                    }
                });
            });
            // A rebinding forgets the scaled value; `scaled = scaler.scale(...)` records it.
            if let StmtKind::Assign { targets, .. } = &s.kind {
                scaled.retain(|(n, _)| !targets.iter().any(|t| t.dotted().as_deref() == Some(n.as_str())));
            }
            if let Some(b) = scaled_binding(s) {
                scaled.push(b);
            }
        }
        match &s.kind {
            StmtKind::If { test, body, orelse } => {
                guards.push(test);
                collect(body, cx, depth, in_def, guards, scaled, out);
                collect(orelse, cx, depth, in_def, guards, scaled, out);
                guards.pop();
            }
            StmtKind::For { body, orelse, .. } | StmtKind::While { body, orelse, .. } => {
                collect(body, cx, depth + 1, in_def, guards, scaled, out);
                collect(orelse, cx, depth, in_def, guards, scaled, out);
            }
            StmtKind::Function(f) => collect(&f.body, cx, depth, true, &mut Vec::new(), &mut Vec::new(), out),
            StmtKind::Class { .. } => {}
            _ => {
                for b in s.child_blocks() {
                    collect(b, cx, depth, in_def, guards, scaled, out);
                }
            }
        }
    }
}

/// The accumulation count `n` of a step guard: `(i + 1) % n == 0`,
/// `step % n == n - 1`, `not (i + 1) % n`, either side of an `or`/`and`
/// (`... or i + 1 == len(loader)`), or a counter compared to a count
/// named for accumulation (`micro == accum_steps`, `k >= grad_accum`).
/// Literal counts other than 1 are kept as written (`4`).
pub fn accumulation_count(test: &Expr) -> Option<&Expr> {
    fn modulo_count(e: &Expr) -> Option<&Expr> {
        match &e.kind {
            ExprKind::BinOp { op: BinOp::Mod, right, .. } => {
                let trivial = matches!(right.kind, ExprKind::Literal(Literal::Int(0 | 1)));
                (!trivial).then_some(&**right)
            }
            _ => None,
        }
    }
    fn named_for_accumulation(e: &Expr) -> bool {
        e.dotted().is_some_and(|d| {
            let last = d.rsplit('.').next().unwrap_or(&d).to_ascii_lowercase();
            last.contains("accum") || last.contains("accumulation")
        })
    }
    match &test.kind {
        ExprKind::BoolOp { values, .. } => values.iter().find_map(accumulation_count),
        ExprKind::Unary { operand: inner, .. } => modulo_count(inner),
        ExprKind::Compare { left, ops, comparators } if ops.len() == 1 => {
            let right = &comparators[0];
            if ops[0] == CmpOp::Eq {
                if let Some(n) = modulo_count(left) {
                    return Some(n);
                }
            }
            if matches!(ops[0], CmpOp::Eq | CmpOp::GtE) && named_for_accumulation(right) {
                return Some(right);
            }
            None
        }
        _ => None,
    }
}

/// The micro-step count `n` of a gradient-accumulation inner loop, `for
/// micro_step in range(n)` (or `range(0, n)`), when the count or the loop
/// variable is named for it (`accum`, `micro`): a loop over heads or losses
/// (`for k in range(n_heads)`) sums gradients on purpose and is not one.
pub fn micro_step_count(stmt: &Stmt) -> Option<&Expr> {
    let StmtKind::For { target, iter, .. } = &stmt.kind else { return None };
    let (func, args, kws) = iter.as_call()?;
    if func.as_name() != Some("range") || !kws.is_empty() {
        return None;
    }
    let n = match args {
        [n] => n,
        [start, n] if matches!(start.kind, ExprKind::Literal(Literal::Int(0))) => n,
        _ => return None,
    };
    if matches!(n.kind, ExprKind::Literal(_)) {
        return None;
    }
    let named = |e: &Expr| {
        e.dotted().is_some_and(|d| {
            let last = d.rsplit('.').next().unwrap_or(&d).to_ascii_lowercase();
            last.contains("accum") || last.contains("micro")
        })
    };
    (named(n) || named(target)).then_some(n)
}

/// Whether `dotted` (an optimizer) is bound in `body` from a call that is
/// neither a torch optimizer's constructor nor a project function
/// (`model, optimizer = msamp.initialize(model, optimizer)`,
/// `optimizer = accelerator.prepare(optimizer)`): a wrapper that may do the
/// scaler's work itself.
pub fn bound_by_wrapper(body: &[Stmt], dotted: &str, cx: &Context) -> bool {
    let mut found = false;
    crate::ir::for_each_stmt_in_function(body, &mut |s| {
        if let StmtKind::Assign { targets, value, .. } = &s.kind {
            if value.as_call().is_some()
                && targets.iter().any(|t| t.binds(dotted))
                && cx.kind_of(value) != Some(ValueKind::Optimizer)
                && cx.project_callee(value).is_none()
            {
                found = true;
            }
        }
    });
    found
}
