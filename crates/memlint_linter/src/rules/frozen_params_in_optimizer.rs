use memlint_semantic::api::{classify, Callee, Event};
use memlint_semantic::ir::{Expr, ExprKind};

use crate::{declare_rule, Checker, Rule, RuleMeta};

declare_rule! {
    /// ## What it does
    /// Flags an optimizer built over all of `model.parameters()` after part
    /// of `model` was frozen in the same function
    /// (`model.backbone.requires_grad_(False)`, `for p in
    /// model.backbone.parameters(): p.requires_grad = False`,
    /// `model.fc.weight.requires_grad = False`), or after all of `model`
    /// was frozen and a part given back grad (`for p in
    /// model.head.parameters(): p.requires_grad = True`, also of an item,
    /// `model.blocks[-1].parameters()`; `model.head.requires_grad_(True)`;
    /// a fresh `model.head = nn.Linear(...)` or `model.classifier[6] = ...`; or, by name, `for name, p in
    /// model.named_parameters(): if name not in ["fc.weight", "fc.bias"]:
    /// p.requires_grad = False`), as fine-tuning code does.
    ///
    /// ## Why is this bad?
    /// The optimizer holds every parameter: its state (`exp_avg`,
    /// `exp_avg_sq` for Adam, momentum buffers) is allocated only for
    /// parameters that receive a gradient, and current PyTorch skips those
    /// whose `.grad` is `None`, so the cost is small: a loop over the frozen
    /// parameters at each step, and weight decay or a learning-rate schedule
    /// that silently covers parameters meant to stay fixed if they are ever
    /// unfrozen or given a gradient. Passing only the trainable parameters
    /// says what is trained. The measured effect is below.
    ///
    /// ## Example
    /// ```python
    /// for p in model.backbone.parameters():
    ///     p.requires_grad = False
    /// optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// for p in model.backbone.parameters():
    ///     p.requires_grad = False
    /// optimizer = torch.optim.AdamW((p for p in model.parameters() if p.requires_grad), lr=1e-4)
    /// ```
    ///
    /// ## Known false positives
    /// Freezing seen in the same function only: a model frozen in a helper
    /// or in its constructor, then given whole to the optimizer elsewhere, is
    /// not reported. Code that unfreezes the parts later in training
    /// (gradual unfreezing) wants them in the optimizer: a function that
    /// gives the frozen part (or the whole model) back grad after the
    /// optimizer is built (`for p in model.backbone.parameters():
    /// p.requires_grad = True` under `if epoch >= freeze_epochs:`,
    /// `model.requires_grad_(True)`) is not reported; one that unfreezes
    /// through a helper is, so suppress it there. Parameter groups and filtered iterables are never
    /// reported. Test modules are not checked.
    ///
    /// ## References
    /// - [torch.optim: per-parameter options](https://pytorch.org/docs/stable/optim.html#per-parameter-options)
    /// - [Finetuning torchvision models](https://pytorch.org/tutorials/beginner/finetuning_torchvision_models_tutorial.html)
    pub struct FrozenParamsInOptimizer {
        code: "ML308",
        name: "frozen-params-in-optimizer",
        severity: Info,
        default: false,
        languages: [Python],
    }
}

impl Rule for FrozenParamsInOptimizer {
    fn meta(&self) -> &'static RuleMeta {
        &Self::META
    }

    fn check_expr(&self, expr: &Expr, checker: &mut Checker<'_>) {
        let cx = checker.cx;
        if !checker.in_torch_program() {
            return;
        }
        let ExprKind::Call { func, args, .. } = &expr.kind else { return };
        let Some(q) = cx.qualified_name(func) else { return };
        if classify(expr, Callee::Library(q.as_str())) != Some(Event::OptimizerNew) {
            return;
        }
        // `torch.optim.X(model.parameters(), ...)`, not a filter or groups.
        let params = args.first().or_else(|| expr.keyword("params"));
        let Some((model, "parameters")) = params.and_then(Expr::as_method_call) else { return };
        let Some(name) = model.dotted() else { return };
        if cx.is_frozen(&name) {
            return;
        }
        let opt = checker.text(func.span).to_string();
        let part = cx.frozen_part_of(&name);
        // Gradual unfreezing: what is frozen now is given back grad later
        // in the function (`if epoch >= 5:` then a loop setting
        // `requires_grad = True`), and the optimizer must hold it.
        if memlint_semantic::facts::unfreeze::unfrozen_after(checker.module(), expr, part.as_deref().unwrap_or(&name)) {
            return;
        }
        let message = if let Some(part) = part {
            format!("`{opt}` is given all of `{name}.parameters()` though `{part}` was frozen above")
        } else if let Some(trained) = cx.frozen_except(&name) {
            format!("`{opt}` is given all of `{name}.parameters()` though `{name}` was frozen above and only parts of it made trainable again (first `{trained}`)")
        } else {
            return;
        };
        checker.report(
            Self::META
                .diagnostic(expr.span, message)
                .with_help(format!("pass only the trainable parameters: `(p for p in {name}.parameters() if p.requires_grad)`")),
        );
    }
}
