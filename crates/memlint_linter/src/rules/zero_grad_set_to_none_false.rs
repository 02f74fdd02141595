use memlint_diagnostics::{Applicability, Edit, Fix};
use memlint_semantic::api::{classify, Callee, Event, Receiver};
use memlint_semantic::ir::{Expr, ExprKind};

use crate::{declare_rule, Checker, Rule, RuleMeta};

declare_rule! {
    /// ## What it does
    /// Flags `zero_grad(set_to_none=False)` (or `zero_grad(False)`) on an
    /// optimizer or a model.
    /// Off by default (info).
    ///
    /// ## Why is this bad?
    /// With `set_to_none=False` every gradient stays allocated between steps
    /// and is filled with zeros by a memset kernel per parameter each step.
    /// The default (`set_to_none=True`, since PyTorch 2.0) frees them: the
    /// next backward allocates them fresh and writes instead of adding, so
    /// gradient memory is not held during the forward pass.
    ///
    /// ## Example
    /// ```python
    /// optimizer.zero_grad(set_to_none=False)
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// optimizer.zero_grad()
    /// ```
    ///
    /// ## Known false positives
    /// Code that reads `p.grad` between `zero_grad()` and the next
    /// `backward()` (expecting zeros, not `None`) needs `set_to_none=False`;
    /// the fix is therefore unsafe. Test modules are not checked.
    ///
    /// ## References
    /// - [torch.optim.Optimizer.zero_grad](https://pytorch.org/docs/stable/generated/torch.optim.Optimizer.zero_grad.html)
    /// - [Performance tuning guide: zero_grad(set_to_none=True)](https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html)
    pub struct ZeroGradSetToNoneFalse {
        code: "ML204",
        name: "zero-grad-set-to-none-false",
        severity: Info,
        default: false,
        languages: [Python],
    }
}

impl Rule for ZeroGradSetToNoneFalse {
    fn meta(&self) -> &'static RuleMeta {
        &Self::META
    }

    fn check_expr(&self, expr: &Expr, checker: &mut Checker<'_>) {
        let cx = checker.cx;
        if !checker.in_torch_program() {
            return;
        }
        let Some((recv, method)) = expr.as_method_call() else { return };
        if cx.qualified_name(recv).is_some() {
            return;
        }
        let callee = Callee::Method { name: method, receiver: Receiver::Other, receiver_is_path: false };
        if classify(expr, callee) != Some(Event::ZeroGrad { set_to_none: Some(false) }) {
            return;
        }
        let ExprKind::Call { args, keywords, .. } = &expr.kind else { return };
        let Some(args_span) = expr.args_span() else { return };
        let mut d = Self::META
            .diagnostic(expr.span, "`zero_grad(set_to_none=False)` keeps every gradient allocated and zero-fills it each step")
            .with_help("call `zero_grad()`: since PyTorch 2.0 it sets gradients to `None`");
        // The only argument: drop it.
        if args.len() + keywords.len() == 1 {
            d = d.with_fix(Fix {
                applicability: Applicability::Unsafe,
                message: "drop `set_to_none=False` (code reading `.grad` after zero_grad sees `None`)".to_string(),
                edits: vec![Edit { span: args_span, content: "()".to_string() }],
            });
        }
        checker.report(d);
    }
}
