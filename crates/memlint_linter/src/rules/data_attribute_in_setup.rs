use memlint_semantic::api::nn;
use memlint_semantic::ir::{Expr, ExprKind, Stmt, StmtKind};

use super::data_attribute::{data_span, data_use, DataUse};
use crate::{declare_rule, Checker, Rule, RuleMeta};

declare_rule! {
    /// ## What it does
    /// Flags `.data` read or written on a tensor in construction,
    /// initialisation, conversion or loading code, the places
    /// ML103 `data-attribute` leaves out because no graph needs the tensor there:
    /// `m.weight.data.normal_(0, 0.02)` in a `weights_init` passed to
    /// `model.apply`, `self.bias.data.zero_()` in `reset_parameters`,
    /// `b.data[:, 4] += 1.0` in a bias init, under `torch.no_grad()`
    /// anywhere, and in a training step after a `backward()` freed the
    /// graph (`p.data.clamp_(-c, c)` after `optimizer.step()`, a target
    /// network's soft update). Not on the running statistics of norm layers
    /// (`bn.running_var.data = ...` when converting a frozen batch norm):
    /// they never require grad. Off by default: turn it on
    /// (`--select ML107`) when modernising such code.
    ///
    /// ## Why is this bad?
    /// Harmless at run time, but an idiom PyTorch discourages: `.data`
    /// hides the change from autograd's version counter, and the same line
    /// copied into step code computes wrong gradients silently. The
    /// `torch.nn.init` functions (or the op under `torch.no_grad()`) say what
    /// is meant and are safe anywhere.
    ///
    /// ## Example
    /// ```python
    /// def weights_init(m):
    ///     if isinstance(m, nn.Linear):
    ///         m.weight.data.normal_(0.0, 0.02)
    ///         m.bias.data.zero_()
    ///
    /// model.apply(weights_init)
    /// ```
    ///
    /// In Rust with `tch`:
    /// ```rust,ignore
    /// for p in vs.trainable_variables() {
    ///     let _ = p.data().normal_(0.0, 0.02);
    /// }
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// def weights_init(m):
    ///     if isinstance(m, nn.Linear):
    ///         nn.init.normal_(m.weight, 0.0, 0.02)
    ///         nn.init.zeros_(m.bias)
    /// ```
    /// ```rust,ignore
    /// let w = vs.root().var("w", &[out_dim, in_dim], nn::Init::Randn { mean: 0.0, stdev: 0.02 });
    /// ```
    ///
    /// ## Known false positives
    /// A `.data =` swap that changes the tensor's dtype, device or class
    /// (quantization, layer swaps: `m.weight.data = m.weight.data.half()`)
    /// has no `torch.nn.init` equivalent and is not reported. Unit tests are
    /// not reported. As for ML103, only objects known to be tensors count,
    /// and a batch of a data loader (`target.data` of `for data, target in
    /// loader`) is not reported: it requires no grad.
    ///
    /// ## References
    /// - [torch.nn.init](https://pytorch.org/docs/stable/nn.init.html)
    /// - [Autograd mechanics: in-place correctness checks](https://pytorch.org/docs/stable/notes/autograd.html#in-place-correctness-checks)
    pub struct DataAttributeInSetup {
        code: "ML107",
        name: "data-attribute-in-setup",
        severity: Info,
        default: false,
        languages: [Python, Rust],
    }
}

const HELP: &str =
    "use a `torch.nn.init` function (`nn.init.normal_(m.weight, 0.0, 0.02)`, `nn.init.zeros_(m.bias)`) or do the op on the tensor itself under `with torch.no_grad():`";

const RUST_HELP: &str = "use an `nn::Init` when the variable is created, or do the op on the tensor itself inside `tch::no_grad(|| ...)`";

impl Rule for DataAttributeInSetup {
    fn meta(&self) -> &'static RuleMeta {
        &Self::META
    }

    fn check_stmt(&self, stmt: &Stmt, checker: &mut Checker<'_>) {
        if !checker.cx.torch_imported() {
            return;
        }
        let StmtKind::Assign { targets, .. } = &stmt.kind else { return };
        if checker.cx.current_data_swap().is_some() {
            return;
        }
        for t in targets {
            let ExprKind::Attribute { value, attr, attr_span } = &t.kind else { continue };
            if attr != nn::DATA || !matches!(data_use(checker, value), Some(DataUse::Setup)) {
                continue;
            }
            let name = checker.text(value.span).to_string();
            checker.report(
                Self::META
                    .diagnostic(data_span(*attr_span), format!("`{name}.data = ...` where no graph needs it: an idiom PyTorch discourages"))
                    .with_help(if checker.is_rust() {
                        format!("write `tch::no_grad(|| {name}.copy_(...))` instead")
                    } else {
                        format!("write `with torch.no_grad(): {name}.copy_(...)` instead")
                    }),
            );
        }
    }

    fn check_expr(&self, expr: &Expr, checker: &mut Checker<'_>) {
        if !checker.cx.torch_imported() {
            return;
        }
        let ExprKind::Attribute { value, attr, attr_span } = &expr.kind else { return };
        if attr != nn::DATA || checker.cx.is_assign_target(expr.id) || checker.cx.current_data_swap().is_some() {
            return;
        }
        if !matches!(data_use(checker, value), Some(DataUse::Setup)) || only_its_shape(expr, checker) {
            return;
        }
        let name = checker.text(value.span).to_string();
        checker.report(
            Self::META
                .diagnostic(data_span(*attr_span), format!("`.data` on `{name}` where no graph needs it: an idiom PyTorch discourages"))
                .with_help(if checker.is_rust() {
                    RUST_HELP
                } else {
                    HELP
                }),
        );
    }
}

/// Whether `.data` is read only for the tensor's shape, type or device
/// (`layer.weight.data.size()[0]`, `w.data.shape`): nothing there touches
/// the values, and nothing is worth changing.
fn only_its_shape(data: &Expr, checker: &Checker<'_>) -> bool {
    checker.statement_has(data, &mut |x| {
        matches!(&x.kind, ExprKind::Attribute { value, attr, .. } if value.id == data.id && nn::SHAPE_ACCESSORS.contains(&attr.as_str()))
    })
}
