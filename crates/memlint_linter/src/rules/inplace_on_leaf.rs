use memlint_semantic::api::{inplace_call, inplace_stmt, may_write_in_place};
use memlint_semantic::ir::{Expr, Stmt};

use crate::{declare_rule, Checker, Rule, RuleMeta};

declare_rule! {
    /// ## What it does
    /// Flags an in-place operation (`w.add_(...)`, `w += ...`, `w[i] = v`,
    /// `w.zero_()`, `out=w`) on a leaf tensor that requires grad, or on a view
    /// of one (`b = conv.bias.view(3, -1); b[:, 4] += 1.0`), outside
    /// `torch.no_grad()`. Leaves are tensors created with
    /// `requires_grad=True`, `nn.Parameter`s (also reached through attribute
    /// paths: `model.emb.weight`, `self.fc.bias`, `model.logit_scale` where
    /// the model's class in the project defines it as a parameter), tensors
    /// marked with `requires_grad_()` or `.requires_grad = True`, and loop
    /// variables over `model.parameters()`, `named_parameters()`, an
    /// optimizer's `group["params"]` and `zip(a.parameters(), b.parameters())`
    /// (in Rust: `vs.trainable_variables()`, `vs.variables()`,
    /// `vs.root().var(...)`/`zeros(...)`, `t.set_requires_grad(true)`, outside
    /// `tch::no_grad(...)` and a live `let _guard = tch::no_grad_guard();`),
    /// and the `weight`/`bias` of layers reached through a loop
    /// (`for m in model.modules()`, or `for mi in m.m` whose body reads
    /// `mi.bias`).
    ///
    /// ## Why is this bad?
    /// PyTorch raises `RuntimeError: a leaf Variable that requires grad is
    /// being used in an in-place operation` as soon as the line runs: a
    /// manual SGD update or a weight re-initialisation written this way
    /// crashes the training run. The `out=` form raises `RuntimeError:
    /// add(): functions with out=... arguments don't support automatic
    /// differentiation, but one of the arguments requires grad` instead.
    ///
    /// ## Example
    /// ```python
    /// w = torch.randn(10, requires_grad=True)
    /// for p in model.parameters():
    ///     p -= lr * p.grad
    /// w.zero_()
    /// ```
    ///
    /// In Rust with `tch` (libtorch panics with the same error; `p -= ...`
    /// is `g_sub_` in place):
    /// ```rust,ignore
    /// for mut p in vs.trainable_variables() {
    ///     let g = p.grad();
    ///     p -= g * lr;
    /// }
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// w = torch.randn(10, requires_grad=True)
    /// with torch.no_grad():
    ///     for p in model.parameters():
    ///         p -= lr * p.grad
    ///     w.zero_()
    /// ```
    ///
    /// ```rust,ignore
    /// tch::no_grad(|| {
    ///     for mut p in vs.trainable_variables() {
    ///         let g = p.grad();
    ///         p -= g * lr;
    ///     }
    /// });
    /// ```
    ///
    /// ## Known false positives
    /// Parameters of a model frozen first (`for p in ema.parameters():
    /// p.requires_grad_(False)` or `p.detach_()`, `ema.requires_grad_(False)`,
    /// a layer frozen as it is built, `fused =
    /// nn.Conv2d(...).requires_grad_(False)`, then `fused.weight.copy_(...)`,
    /// and a deep copy of a frozen model, `G_ema = copy.deepcopy(G).eval()`)
    /// are not leaves that require grad: an EMA copy updated in place is not
    /// reported when it was frozen in the same function, in its class
    /// (`self.ema`, in any method, also reached through an accessor method
    /// of the class that returns it, `self.getOriginalAvgG().parameters()`),
    /// or, for a model the function is given
    /// (`def update(ema, model)`), by a loop of the same file that freezes a
    /// model of that name. A model frozen in another file is still taken as
    /// requiring grad. An attribute the function bound to a plain tensor
    /// (`self.mean = torch.randn(3, d); self.mean[0] += 1`) is not a
    /// parameter there until the function wraps it (`self.mean =
    /// nn.Parameter(self.mean)`), whatever the class makes of it.
    /// A function whose every known caller (in any file of the run) runs it
    /// under `torch.no_grad()` is analysed with grad off; so is a method no
    /// call resolves to whose name the run calls only with grad off on
    /// receivers it cannot resolve (`unit.load_from(w)` for each `unit` of
    /// `block.named_children()`, under `torch.no_grad()`). A call on an
    /// instance of a project class (`model = ViT(cfg); model.load_from(w)`)
    /// is resolved to the class's method. Callers outside the run are not
    /// seen, so such updates are reported. Tensors that are not in-place operands of a known leaf (e.g.
    /// `w.data.add_()`, see ML103; a view through `detach()`) are not
    /// reported, nor is code in test modules.
    ///
    /// ## References
    /// - [Autograd mechanics: in-place operations](https://pytorch.org/docs/stable/notes/autograd.html#in-place-operations-with-autograd)
    /// - [torch.no_grad](https://pytorch.org/docs/stable/generated/torch.no_grad.html)
    pub struct InplaceOnLeaf {
        code: "ML101",
        name: "inplace-on-leaf",
        severity: Error,
        default: true,
        languages: [Python, Rust],
    }
}

const HELP: &str = "do the update inside `with torch.no_grad():`, or use an out-of-place op if the tensor should not stay a leaf";
const HELP_RS: &str = "do the update inside `tch::no_grad(|| ...)`, or use an out-of-place op if the tensor should not stay a leaf";

impl InplaceOnLeaf {
    fn report(checker: &mut Checker<'_>, span: memlint_diagnostics::Span, what: &str, target: &str) {
        checker.report(
            Self::META
                .diagnostic(
                    span,
                    format!("in-place {what} on `{target}`, a leaf tensor that requires grad: PyTorch raises at run time"),
                )
                .with_help(if checker.is_rust() { HELP_RS } else { HELP }),
        );
    }

    /// The leaf an in-place op on `target` modifies: the target itself
    /// (`w`, `model.emb.weight`, `self.fc.bias`, a `.parameters()` loop
    /// variable), or the leaf it is a view of (`b = conv.bias.view(3, -1)`).
    fn target_leaf(checker: &Checker<'_>, target: &Expr) -> Option<String> {
        let cx = checker.cx;
        if cx.qualified_name(target).is_some() {
            return None;
        }
        if let Some(d) = target.dotted() {
            if cx.is_parameter_path(&d) {
                return Some(d.into());
            }
        }
        let view = cx.view_of(target)?;
        if view.detached || !cx.is_parameter_path(&view.base) {
            return None;
        }
        Some(match target.dotted() {
            Some(d) => format!("{d}`, a view of `{}", view.base),
            None => view.base,
        })
    }
}

impl Rule for InplaceOnLeaf {
    fn meta(&self) -> &'static RuleMeta {
        &Self::META
    }

    fn check_stmt(&self, stmt: &Stmt, checker: &mut Checker<'_>) {
        if !checker.in_grad_code() {
            return;
        }
        for (on, span, what) in inplace_stmt(stmt) {
            if let Some(d) = Self::target_leaf(checker, on) {
                Self::report(checker, span, what, &d);
            }
        }
    }

    fn check_expr(&self, expr: &Expr, checker: &mut Checker<'_>) {
        if !checker.in_grad_code() {
            return;
        }
        let Some((func, _, _)) = expr.as_call() else { return };
        // Most calls cannot write in place: no callee name to build.
        let q = if may_write_in_place(expr) { checker.cx.qualified_name(func) } else { None };
        for (on, span, what) in inplace_call(expr, q.as_ref().map(|q| q.as_str())) {
            if let Some(d) = Self::target_leaf(checker, on) {
                Self::report(checker, span, &what, &d);
            }
        }
    }
}
