use memlint_semantic::api::amp;
use memlint_semantic::ir::{Expr, ExprKind};

use crate::{declare_rule, Checker, Rule, RuleMeta};

declare_rule! {
    /// ## What it does
    /// Flags NVIDIA apex's mixed precision in training code: `amp.initialize`,
    /// `amp.scale_loss` and `amp.master_params` of `from apex import amp`,
    /// each with its `torch.amp` replacement. Not where apex is one backend
    /// among others: in a file that also uses native AMP (`torch.autocast`,
    /// `torch.amp`, `torch.cuda.amp`, a `GradScaler`: a trainer's
    /// `half_precision_backend == "apex"` option; in code, a comment naming
    /// the native API does not count), or in a function or class
    /// named after apex (`class ApexScaler`). Training code whose only mixed
    /// precision is apex is reported whatever its flag is named (`if
    /// args.fp16:`, `if args.using_apex:`), also when apex is imported only
    /// if installed (`try: from apex import amp` / `except ImportError: amp =
    /// None`): that is the code that moved to native AMP. Not in a project
    /// whose declarations keep torch below 1.6 (`torch==1.0` in its
    /// requirements), which has no native AMP.
    ///
    /// ## Why is this bad?
    /// apex's `amp` is deprecated and unmaintained; NVIDIA recommends
    /// PyTorch's native AMP (`torch.autocast` and `torch.amp.GradScaler`,
    /// since PyTorch 1.6), which needs no extension build, works with
    /// `torch.compile`, FSDP and current CUDA releases, and keeps fp32
    /// weights without apex's opt levels. apex no longer builds against
    /// recent PyTorch releases without patches.
    ///
    /// ## Example
    /// ```python
    /// from apex import amp
    ///
    /// model, optimizer = amp.initialize(model, optimizer, opt_level="O1")
    /// for x, y in loader:
    ///     loss = criterion(model(x), y)
    ///     optimizer.zero_grad()
    ///     with amp.scale_loss(loss, optimizer) as scaled_loss:
    ///         scaled_loss.backward()
    ///     torch.nn.utils.clip_grad_norm_(amp.master_params(optimizer), 1.0)
    ///     optimizer.step()
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// scaler = torch.amp.GradScaler("cuda")
    /// for x, y in loader:
    ///     with torch.autocast("cuda", dtype=torch.float16):
    ///         loss = criterion(model(x), y)
    ///     optimizer.zero_grad()
    ///     scaler.scale(loss).backward()
    ///     scaler.unscale_(optimizer)
    ///     torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    ///     scaler.step(optimizer)
    ///     scaler.update()
    /// ```
    ///
    /// ## Known false positives
    /// A file that offers apex beside native AMP is left out even when its
    /// apex path is the default; a helper module that holds only the apex
    /// path of a project whose native path is in another file is reported.
    /// The import alone is not
    /// reported, nor apex's other modules (`apex.optimizers`,
    /// `apex.normalization`, `apex.parallel`). Test modules are not checked,
    /// nor superseded copies of the code kept beside it: files under a
    /// directory named `old`, `legacy`, `archive(d)`, `obsolete` or
    /// `outdated` below the one checked (a file named on the command line is
    /// checked wherever it lies).
    /// No fix is offered: the replacement moves code (the scaler, the
    /// autocast region) and is done by hand.
    ///
    /// ## References
    /// - [Automatic Mixed Precision package - torch.amp](https://pytorch.org/docs/stable/amp.html)
    /// - [apex.amp (deprecated; "use PyTorch AMP")](https://nvidia.github.io/apex/amp.html)
    /// - [CUDA Automatic Mixed Precision examples](https://pytorch.org/docs/stable/notes/amp_examples.html)
    pub struct ApexAmp {
        code: "ML402",
        name: "apex-amp",
        severity: Warning,
        default: true,
        languages: [Python],
    }
}

impl Rule for ApexAmp {
    fn meta(&self) -> &'static RuleMeta {
        &Self::META
    }

    fn check_expr(&self, expr: &Expr, checker: &mut Checker<'_>) {
        let cx = checker.cx;
        if !checker.in_torch_program() || !matches!(expr.kind, ExprKind::Call { .. }) {
            return;
        }
        let Some(q) = cx.callee_name(expr) else { return };
        let Some((what, help)) = amp::apex_replacement(q.as_str()) else { return };
        // A project pinned to a torch before native AMP: apex is its only
        // mixed precision.
        if apex_is_an_option(checker) || cx.torch_below().is_some_and(|below| below <= amp::NATIVE_AMP_SINCE) {
            return;
        }
        checker.report(
            Self::META
                .diagnostic(expr.span, format!("`amp.{what}` is NVIDIA apex's mixed precision, unmaintained: use native `torch.amp`"))
                .with_help(help),
        );
    }
}

/// Whether the current point is apex used as one backend among others:
/// the file also uses native AMP (`torch.autocast`, `torch.amp`,
/// `torch.cuda.amp`, a `GradScaler`), or the function or class around it is
/// named after apex (`class ApexScaler` beside `class NativeScaler`).
fn apex_is_an_option(checker: &Checker<'_>) -> bool {
    let named = |n: &str| n.to_ascii_lowercase().contains("apex");
    if checker.cx.function_name().is_some_and(named) || checker.cx.current_class_qualname().is_some_and(|c| named(&c)) {
        return true;
    }
    // In code, not in a comment (`# TODO: port to torch.amp`).
    checker.source().lines().any(|l| {
        let code = l.split('#').next().unwrap_or("");
        amp::NATIVE_AMP_SPELLINGS.iter().any(|s| code.contains(s))
    })
}
