use memlint_semantic::ir::{Expr, ExprKind, Language};

use crate::{declare_rule, Checker, Rule, RuleMeta};

declare_rule! {
    /// ## What it does
    /// Flags reads and assignments of `.data` on a tensor: `p.data`,
    /// `m.weight.data.normal_()`, `p.data = p.data.clamp(0, 1)`.
    ///
    /// ## Why is this bad?
    /// `.data` returns the tensor's storage without autograd's version
    /// counter. An in-place change through it is invisible to autograd: where
    /// PyTorch would raise a loud error ("one of the variables needed for
    /// gradient computation has been modified by an inplace operation"), the
    /// backward pass silently uses the modified values and computes wrong
    /// gradients.
    ///
    /// ## Example
    /// ```python
    /// for p in model.parameters():
    ///     p.data.clamp_(-1, 1)
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// with torch.no_grad():
    ///     for p in model.parameters():
    ///         p.clamp_(-1, 1)
    /// # or, to read the values without history: p.detach()
    /// ```
    ///
    /// ## Known false positives
    /// The rule fires only where the object is known to be a tensor: a
    /// parameter (`.parameters()` loop variable, `nn.Parameter`), `.weight`,
    /// `.bias`, `.grad`, `.running_mean` or `.running_var` of an object, or a
    /// value built by a `torch` function.
    /// `.data` of anything else (`args.data`, `self.dataset.data`, a pandas
    /// frame) is never reported, so tensors whose origin is not visible in the
    /// file are missed.
    ///
    /// ## References
    /// - [Autograd mechanics: in-place correctness checks](https://pytorch.org/docs/stable/notes/autograd.html#in-place-correctness-checks)
    /// - [torch.Tensor.detach](https://pytorch.org/docs/stable/generated/torch.Tensor.detach.html)
    pub struct DataAttribute {
        code: "ML103",
        name: "data-attribute",
        severity: Warning,
        default: true,
        languages: [Python],
    }
}

impl DataAttribute {
    fn is_tensor_like(checker: &Checker<'_>, value: &Expr) -> bool {
        if checker.cx.qualified_name(value).is_some() {
            return false;
        }
        if let ExprKind::Attribute { attr, .. } = &value.kind {
            if matches!(attr.as_str(), "weight" | "bias" | "grad" | "running_mean" | "running_var") {
                return true;
            }
        }
        if let Some(d) = value.dotted() {
            if checker.cx.is_requires_grad_leaf(&d) {
                return true;
            }
        }
        checker.cx.is_tensor(value)
    }
}

impl Rule for DataAttribute {
    fn meta(&self) -> &'static RuleMeta {
        &Self::META
    }

    fn check_expr(&self, expr: &Expr, checker: &mut Checker<'_>) {
        if checker.cx.language() != Language::Python || !checker.cx.torch_imported() {
            return;
        }
        let ExprKind::Attribute { value, attr, attr_span } = &expr.kind else { return };
        if attr != "data" || !Self::is_tensor_like(checker, value) {
            return;
        }
        let name = checker.text(value.span).to_string();
        let span = memlint_diagnostics::Span::new(attr_span.start.saturating_sub(1), attr_span.end);
        checker.report(
            Self::META
                .diagnostic(span, format!("`.data` on `{name}` bypasses autograd's version tracking"))
                .with_help(format!(
                    "use `{name}.detach()` to read the values, or change them inside `with torch.no_grad():`"
                )),
        );
    }
}
