use memlint_diagnostics::Span;
use memlint_semantic::api::{inplace_call, inplace_stmt, may_write_in_place, nn, saved_for_backward, Saves};
use memlint_semantic::ir::{Expr, ExprKind, Stmt};

use crate::{declare_rule, Checker, Rule, RuleMeta};

declare_rule! {
    /// ## What it does
    /// Flags an in-place op on a tensor that autograd saved for the backward
    /// pass, when a `backward()` (or `torch.autograd.grad`) of the same
    /// function comes after it. Saved means: the *output* of an op that
    /// saves its result (`sigmoid`, `tanh`, `exp`, `softmax`,
    /// `log_softmax`, `relu`, `sqrt`, `rsqrt`), or an *input* of an op that
    /// saves its inputs when the other operand requires grad (`a * b` and
    /// `a / b` of tensors, `a @ b`, `mm`, `bmm`, `linear`) or its own input
    /// (`pow`, `log`, `sin`). The table is data in the API layer, after
    /// PyTorch's `derivatives.yaml`. In-place forms: methods (`y.mul_(2)`),
    /// operators (`y += 1`, `y[idx] = v`), functionals
    /// (`F.relu(y, inplace=True)`, `torch.sigmoid_(y)`) and `out=y`; and in
    /// `nn.Sequential(...)`, an in-place activation
    /// (`nn.ReLU(inplace=True)`, or a project module whose `forward` changes
    /// its input in place) right after a module that saves its output
    /// (`nn.Sigmoid()`, `nn.Tanh()`, `nn.Softmax()`). A layer the class
    /// assigned (`self.act = nn.Sigmoid()`, `self.conv = nn.Conv2d(...)`)
    /// runs its op when called: `h = self.act(...)` saves `h`, and
    /// `self.conv(x)` saves `x` for its weight's gradient, so the residual
    /// `x += self.conv(x)` changes what it saved. The outputs of
    /// `torch.linalg.eigh`/`eig`/`svd`/`qr` are saved by their backward
    /// (`w, v = torch.linalg.eigh(a); w.clamp_(min=0)`). Not under `no_grad`,
    /// not inside a custom `torch.autograd.Function.forward`, and never on
    /// `y = x * 2; y.add_(1)`: multiplying by a Python scalar saves nothing.
    ///
    /// ## Why is this bad?
    /// The backward formula of the saving op reads the saved tensor; the
    /// in-place op bumps its version counter, and `backward()` raises
    /// `RuntimeError: one of the variables needed for gradient computation
    /// has been modified by an inplace operation`. Code that changes it
    /// through `.data` instead silences the check and gets wrong gradients.
    ///
    /// ## Example
    /// ```python
    /// y = torch.sigmoid(x)
    /// y.mul_(2)
    /// y.sum().backward()
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// y = torch.sigmoid(x)
    /// y = y * 2
    /// y.sum().backward()
    /// ```
    ///
    /// ## Known false positives
    /// A tensor is known to require grad when it is a leaf created with
    /// `requires_grad=True`, a parameter, a model output or computed from
    /// one in the same function; tensors that arrive as plain arguments are
    /// not known and not checked. The `backward()` is any later one in the
    /// same function or module: one whose loss does not depend on the
    /// saving op is not told apart, and a `backward()` in a caller is not
    /// seen. A write in a forward's eval-mode arm (the `else` of `if
    /// self.training:`, the body of `if not self.training:`) is not
    /// reported: no backward runs through it. Layers are known by their `torch.nn` class where the class
    /// assigns them to `self`; a layer passed in, held in a list or built
    /// by a project class is not (`x += self.block(x)` with a project
    /// block is not reported). Test modules are not checked.
    ///
    /// ## References
    /// - [Autograd mechanics: in-place operations](https://pytorch.org/docs/stable/notes/autograd.html#in-place-operations-with-autograd)
    /// - [derivatives.yaml](https://github.com/pytorch/pytorch/blob/main/tools/autograd/derivatives.yaml)
    pub struct InplaceOnSavedTensor {
        code: "ML102",
        name: "inplace-on-saved-tensor",
        severity: Error,
        default: true,
        languages: [Python],
    }
}

const HELP: &str = "use the out-of-place op (`y = y.mul(2)`), or change a `.clone()` of the tensor";

impl InplaceOnSavedTensor {
    /// `value`: the right-hand side of an augmented assignment, which
    /// runs before the write (`x += self.conv(x)` saves `x`, then changes it).
    fn check(checker: &mut Checker<'_>, on: &Expr, span: Span, what: &str, value: Option<&Expr>) {
        let cx = checker.cx;
        // `y[0].add_(1)` writes into `y`.
        let on = match &on.kind {
            memlint_semantic::ir::ExprKind::Subscript { value, .. } => value,
            _ => on,
        };
        let Some(d) = on.dotted() else { return };
        let saved_at = cx.saved_for_backward(&d).or_else(|| {
            value.filter(|_| cx.grad_enabled()).and_then(|v| cx.saves_in(v, &d))
        });
        let Some(saved_at) = saved_at else { return };
        // Leaves are ML101's; without a later backward nothing reads the saved value.
        if cx.is_requires_grad_leaf(&d) || cx.is_parameter_path(&d) || !cx.backward_follows() {
            return;
        }
        // A forward's eval-mode arm (`else` of `if self.training:`): no
        // backward runs through it.
        if checker.in_eval_mode_arm(on) {
            return;
        }
        // `out=` into a tensor that requires grad raises in the op itself.
        if what.starts_with("`out=`") && cx.requires_grad_value(on) {
            return;
        }
        let op = checker.text(saved_at).to_string();
        let op = if op.len() <= 40 { op } else { "an earlier op".to_string() };
        checker.report(
            Self::META
                .diagnostic(
                    span,
                    format!("in-place {what} on `{d}`, which `{op}` saved for backward: the `backward()` after it raises"),
                )
                .with_help(HELP),
        );
    }

    /// `nn.Sequential(nn.Sigmoid(), nn.ReLU(inplace=True))`.
    fn check_sequential(expr: &Expr, checker: &mut Checker<'_>) {
        let cx = checker.cx;
        let Some((func, args, _)) = expr.as_call() else { return };
        // Two modules at least, and a callee that can be `Sequential`
        // (a bare name may be an alias), before its name is built.
        let may_be_sequential = match &func.kind {
            ExprKind::Attribute { attr, .. } => attr == nn::SEQUENTIAL,
            ExprKind::Name(_) => true,
            _ => false,
        };
        if args.len() < 2 || !may_be_sequential {
            return;
        }
        if !cx.qualified_name(func).is_some_and(|q| q.is_any(nn::SEQUENTIAL_NAMES)) {
            return;
        }
        let module = |e: &Expr| -> Option<String> {
            let (f, _, _) = e.as_call()?;
            let q = cx.qualified_name(f)?;
            q.starts_with_module(nn::NN).then(|| q.last().to_string())
        };
        for pair in args.windows(2) {
            let Some(first) = module(&pair[0]) else { continue };
            let Some(op) = nn::output_saving_op(&first) else { continue };
            if pair[0].keyword(nn::INPLACE).is_some_and(Expr::is_true) || saved_for_backward(op) != Some(Saves::Output) {
                continue;
            }
            let inplace = pair[1].keyword(nn::INPLACE).is_some_and(Expr::is_true)
                || pair[1].as_call().is_some_and(|(_, a, _)| a.first().is_some_and(Expr::is_true));
            // A project module whose `forward` changes its input in place.
            let project_inplace = pair[1].as_call().and_then(|(f, _, _)| cx.project_class_of_call(f)).is_some_and(|class| {
                let index = cx.index();
                index.method_of(&class, nn::FORWARD).and_then(|m| index.function(&m)).is_some_and(|f| f.mutates_first_arg)
            });
            if module(&pair[1]).is_some() && inplace || project_inplace {
                checker.report(
                    Self::META
                        .diagnostic(
                            pair[1].span,
                            format!("`{}` modifies in place the output that `nn.{first}` saved for backward: `backward()` raises", checker.text(pair[1].span)),
                        )
                        .with_help("drop `inplace=True` after a module that saves its output"),
                );
            }
        }
    }
}

impl Rule for InplaceOnSavedTensor {
    fn meta(&self) -> &'static RuleMeta {
        &Self::META
    }

    fn check_stmt(&self, stmt: &Stmt, checker: &mut Checker<'_>) {
        if !checker.in_grad_code() {
            return;
        }
        let value = match &stmt.kind {
            memlint_semantic::ir::StmtKind::AugAssign { value, .. } => Some(&**value),
            _ => None,
        };
        for (on, span, what) in inplace_stmt(stmt) {
            Self::check(checker, on, span, what, value);
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
            Self::check(checker, on, span, &what, None);
        }
        Self::check_sequential(expr, checker);
    }
}
