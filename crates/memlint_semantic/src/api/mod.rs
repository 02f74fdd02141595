//! The torch API layer: what a call means for a training program, written
//! once so rules match events, not spellings.
//!
//! [`event_of`] turns a call into a [`Event`] (backward, zero-grad, cache
//! flush, gradient clipping; optimizer and scaler events come with the
//! training-step rules that need them), given the callee's resolved
//! qualified name (if it is a library function) and the method name.
//! [`saved_for_backward`] is the table of what autograd saves for the
//! backward pass of an op, after the semantics of PyTorch's
//! `tools/autograd/derivatives.yaml`: it is data, not code, so a rule that
//! asks "did this op save its output?" reads one row.

mod kinds;

pub use kinds::StepKinds;

use memlint_diagnostics::Span;

use crate::ir::{Expr, ExprKind, Stmt, StmtKind};

/// What a call does to a training program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// `loss.backward()`, `torch.autograd.backward(...)`, `torch.autograd.grad(...)`.
    Backward,
    /// `optimizer.zero_grad(...)` / `model.zero_grad(...)`; `set_to_none`
    /// as written (`None`: not written, PyTorch's default `True`).
    ZeroGrad {
        /// The `set_to_none=` argument when it is a literal.
        set_to_none: Option<bool>,
    },
    /// `torch.cuda.empty_cache()`.
    EmptyCache,
    /// `torch.nn.utils.clip_grad_norm_/clip_grad_value_`.
    ClipGrad,
}

/// Classifies a call. `qualified` is the callee's resolved library name
/// when it has one (`torch.cuda.empty_cache`); `method` the attribute name
/// of a method call on a local value (`backward` in `loss.backward()`).
pub fn event_of(call: &Expr, qualified: Option<&str>, method: Option<&str>) -> Option<Event> {
    if let Some(q) = qualified {
        return match q {
            "torch.autograd.backward" | "torch.autograd.grad" => Some(Event::Backward),
            "torch.cuda.empty_cache" => Some(Event::EmptyCache),
            q if CLIP_GRAD_APIS.contains(&q) => Some(Event::ClipGrad),
            _ => None,
        };
    }
    match method? {
        "backward" => Some(Event::Backward),
        "zero_grad" => Some(Event::ZeroGrad {
            // `zero_grad(set_to_none=False)` or `zero_grad(False)`.
            set_to_none: call.keyword("set_to_none").or_else(|| call.as_call().and_then(|(_, args, _)| args.first())).and_then(|v| {
                if v.is_true() {
                    Some(true)
                } else if v.is_false() {
                    Some(false)
                } else {
                    None
                }
            }),
        }),
        _ => None,
    }
}

/// What autograd saves of an op's operands for its backward pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Saves {
    /// The op's result (`sigmoid`, `tanh`, `exp`, `softmax`, `relu`...):
    /// changing the result in place invalidates the backward.
    Output,
    /// The inputs, when the other operand requires grad (`a * b` of two
    /// tensors, `matmul`, `linear`); multiplying by a Python scalar saves
    /// nothing.
    Inputs,
    /// The first input, when it requires grad (`pow`, `log`, `sin`: the
    /// derivative is a function of `self`).
    SelfInput,
    /// `a / b`: the divisor whenever either operand requires grad, the
    /// dividend when the divisor does.
    Quotient,
    /// Nothing that an in-place change of the operands could invalidate
    /// (`add`, `sub`, `view`, `clone`).
    Nothing,
}

/// `(op, what it saves)`, from derivatives.yaml: ops whose formula uses
/// `result` save their output; ops whose formula uses `self`/`other` save
/// their inputs.
pub const SAVED_FOR_BACKWARD: &[(&str, Saves)] = &[
    ("sigmoid", Saves::Output),
    ("tanh", Saves::Output),
    ("exp", Saves::Output),
    ("exp2", Saves::Output),
    ("expm1", Saves::Output),
    ("softmax", Saves::Output),
    ("log_softmax", Saves::Output),
    ("relu", Saves::Output),
    ("sqrt", Saves::Output),
    ("rsqrt", Saves::Output),
    ("elu", Saves::SelfInput),
    ("silu", Saves::SelfInput),
    ("gelu", Saves::SelfInput),
    ("hardtanh", Saves::Inputs),
    ("mul", Saves::Inputs),
    ("div", Saves::Quotient),
    ("matmul", Saves::Inputs),
    ("mm", Saves::Inputs),
    ("bmm", Saves::Inputs),
    ("mv", Saves::Inputs),
    ("linear", Saves::Inputs),
    ("conv1d", Saves::Inputs),
    ("conv2d", Saves::Inputs),
    ("conv3d", Saves::Inputs),
    ("pow", Saves::SelfInput),
    ("log", Saves::SelfInput),
    ("sin", Saves::SelfInput),
    ("cos", Saves::SelfInput),
    ("abs", Saves::SelfInput),
    ("add", Saves::Nothing),
    ("sub", Saves::Nothing),
    ("neg", Saves::Nothing),
    ("clone", Saves::Nothing),
    ("view", Saves::Nothing),
    ("reshape", Saves::Nothing),
];

/// What `op` saves for backward; `None` for ops not in the table.
pub fn saved_for_backward(op: &str) -> Option<Saves> {
    SAVED_FOR_BACKWARD.iter().find(|(name, _)| *name == op).map(|(_, s)| *s)
}

/// In-place tensor methods end in one `_`; these change flags or the
/// graph, not the values.
pub fn is_inplace_method(name: &str) -> bool {
    name.ends_with('_')
        && !name.ends_with("__")
        && !name.starts_with('_')
        && !matches!(name, "requires_grad_" | "share_memory_" | "retain_grad_" | "detach_")
}

/// An in-place write a call does: `(tensor written, span to report, what)`.
/// Forms: a method (`y.add_(1)`, reported at `.add_(1)`), `out=` of a
/// torch function (at the `out=` value), a functional with
/// `inplace=True` (`F.relu(y, inplace=True)`) or an in-place torch
/// function (`torch.relu_(y)`), both at the call. `qualified` is the
/// callee's resolved library name.
pub fn inplace_call<'e>(call: &'e Expr, qualified: Option<&str>) -> Vec<(&'e Expr, Span, String)> {
    debug_assert!(may_write_in_place(call) || inplace_call_unchecked(call, qualified).is_empty());
    inplace_call_unchecked(call, qualified)
}

/// Whether [`inplace_call`] can find a write in `call` whatever its callee
/// resolves to: an in-place method name or an `out=`/`inplace=` keyword on
/// an attribute callee, or a bare name (an import alias may hide the
/// library name). Cheap, before resolving the callee.
pub fn may_write_in_place(call: &Expr) -> bool {
    let ExprKind::Call { func, keywords, .. } = &call.kind else { return false };
    match &func.kind {
        ExprKind::Attribute { attr, .. } => {
            is_inplace_method(attr) || keywords.iter().any(|k| matches!(k.name.as_deref(), Some("out" | "inplace")))
        }
        ExprKind::Name(_) => true,
        _ => false,
    }
}

fn inplace_call_unchecked<'e>(call: &'e Expr, qualified: Option<&str>) -> Vec<(&'e Expr, Span, String)> {
    let mut out = Vec::new();
    let ExprKind::Call { func, args, keywords, .. } = &call.kind else { return out };
    let Some(q) = qualified else {
        if let ExprKind::Attribute { value, attr, attr_span } = &func.kind {
            if is_inplace_method(attr) {
                out.push((&**value, attr_span.cover(Span::new(call.span.end, call.span.end)), format!("`{attr}()`")));
            }
        }
        return out;
    };
    if !(q == "torch" || q.starts_with("torch.")) {
        return out;
    }
    for k in keywords {
        if k.name.as_deref() == Some("out") {
            out.push((&k.value, k.value.span, "`out=` write".to_string()));
        }
    }
    let last = q.rsplit('.').next().unwrap_or(q);
    if let Some(first) = args.first() {
        if q.starts_with("torch.nn.functional.") && call.keyword("inplace").is_some_and(Expr::is_true) {
            out.push((first, call.span, format!("`{last}(..., inplace=True)`")));
        } else if is_inplace_method(last) && !q.starts_with("torch.nn.") {
            out.push((first, call.span, format!("`torch.{last}()`")));
        }
    }
    out
}

/// The in-place writes a statement does itself: `y += x` (the whole
/// statement) and `y[i] = v` (the target). The tensor written is the
/// base of a subscript (`b` of `b[:, 4] += 1.0`).
pub fn inplace_stmt(stmt: &Stmt) -> Vec<(&Expr, Span, &'static str)> {
    let base = |t: &'_ Expr| -> bool { matches!(t.kind, ExprKind::Subscript { .. }) };
    match &stmt.kind {
        StmtKind::AugAssign { target, .. } => {
            let on = match &target.kind {
                ExprKind::Subscript { value, .. } => &**value,
                _ => target,
            };
            vec![(on, stmt.span, "augmented assignment")]
        }
        StmtKind::Assign { targets, .. } => targets
            .iter()
            .filter(|t| base(t))
            .filter_map(|t| match &t.kind {
                ExprKind::Subscript { value, .. } => Some((&**value, t.span, "item assignment")),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// Buffers of torch's normalisation layers: tensors that never require grad,
/// so `.data` on them bypasses nothing (`bn.running_var.data = ...`).
pub const NORM_BUFFERS: &[&str] = &["running_mean", "running_var", "num_batches_tracked"];

/// Qualified names of the gradient-clipping APIs.
pub const CLIP_GRAD_APIS: &[&str] = &[
    "torch.nn.utils.clip_grad_norm_",
    "torch.nn.utils.clip_grad_value_",
    "torch.nn.utils.clip_grad.clip_grad_norm_",
    "torch.nn.utils.clip_grad.clip_grad_value_",
];

/// Qualified names of the grad-disabling APIs.
pub const GRAD_OFF_APIS: &[&str] = &[
    "torch.no_grad",
    "torch.inference_mode",
    "torch.autograd.no_grad",
    "torch.autograd.inference_mode",
    "torch.autograd.grad_mode.no_grad",
    "torch.autograd.grad_mode.inference_mode",
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{ExprKind, Keyword, Literal};

    fn call(kw: Option<(&str, bool)>) -> Expr {
        let name = |n: &str| Expr::new(Span::new(0, 0), ExprKind::Name(n.into()));
        Expr::new(
            Span::new(0, 0),
            ExprKind::Call {
                func: Box::new(name("f")),
                args: Box::new([]),
                keywords: kw
                    .map(|(k, v)| Keyword {
                        name: Some(k.into()),
                        value: Expr::new(Span::new(0, 0), ExprKind::Literal(Literal::Bool(v))),
                    })
                    .into_iter()
                    .collect(),
                args_start: 0,
            },
        )
    }

    #[test]
    fn classifies_events() {
        assert_eq!(event_of(&call(None), None, Some("backward")), Some(Event::Backward));
        assert_eq!(event_of(&call(None), Some("torch.cuda.empty_cache"), None), Some(Event::EmptyCache));
        assert_eq!(
            event_of(&call(Some(("set_to_none", false))), None, Some("zero_grad")),
            Some(Event::ZeroGrad { set_to_none: Some(false) })
        );
        assert_eq!(event_of(&call(None), None, Some("append")), None);
    }

    #[test]
    fn saved_tensors_follow_derivatives_yaml() {
        assert_eq!(saved_for_backward("sigmoid"), Some(Saves::Output));
        assert_eq!(saved_for_backward("matmul"), Some(Saves::Inputs));
        assert_eq!(saved_for_backward("add"), Some(Saves::Nothing));
        assert_eq!(saved_for_backward("frobnicate"), None);
    }
}
