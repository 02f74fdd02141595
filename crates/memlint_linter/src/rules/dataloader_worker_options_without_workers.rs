use memlint_semantic::api::{classify, Callee, Event};
use memlint_semantic::ir::{Expr, ExprKind};

use crate::{declare_rule, Checker, Rule, RuleMeta};

declare_rule! {
    /// ## What it does
    /// Flags a `torch.utils.data.DataLoader(...)` built with
    /// `persistent_workers=True` or a `prefetch_factor=` other than `None`
    /// while it has no worker processes: `num_workers` not passed, or
    /// passed as `0`. Only what the call shows is judged: a `num_workers`
    /// from a variable, a sixth positional argument or a `**kwargs` spread
    /// may be non-zero, and is not reported.
    ///
    /// ## Why is this bad?
    /// Both options only mean something for worker processes, and
    /// `DataLoader` refuses them without workers: the constructor raises
    /// `ValueError: persistent_workers option needs num_workers > 0`, or
    /// `ValueError: prefetch_factor option could only be specified in
    /// multiprocessing.let num_workers > 0 to enable multiprocessing,
    /// otherwise set prefetch_factor to None.` (torch 2.11). The script
    /// stops where the loader is built, often after minutes of setup, and
    /// in an evaluation loader it stops only when evaluation starts.
    ///
    /// ## Example
    /// ```python
    /// loader = DataLoader(dataset, batch_size=64, persistent_workers=True)
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// loader = DataLoader(dataset, batch_size=64, num_workers=4, persistent_workers=True)
    /// ```
    ///
    /// ## Known false positives
    /// None known: the options raise whenever the call itself shows no
    /// workers. Whether the loader is ever built (a branch that never runs)
    /// is not judged. Keyword values that are not literals
    /// (`persistent_workers=args.persistent`) are not reported.
    ///
    /// ## References
    /// - [torch.utils.data.DataLoader](https://pytorch.org/docs/stable/data.html#torch.utils.data.DataLoader)
    pub struct DataloaderWorkerOptionsWithoutWorkers {
        code: "ML304",
        name: "dataloader-worker-options-without-workers",
        severity: Error,
        default: true,
        languages: [Python],
    }
}

impl Rule for DataloaderWorkerOptionsWithoutWorkers {
    fn meta(&self) -> &'static RuleMeta {
        &Self::META
    }

    fn check_expr(&self, expr: &Expr, checker: &mut Checker<'_>) {
        let cx = checker.cx;
        if !checker.in_torch_program() {
            return;
        }
        let ExprKind::Call { func, .. } = &expr.kind else { return };
        let Some(q) = cx.qualified_name(func) else { return };
        let Some(Event::LoaderNew { num_workers, num_workers_given, persistent_workers, prefetch_factor, .. }) =
            classify(expr, Callee::Library(q.as_str()))
        else {
            return;
        };
        if num_workers_given && num_workers != Some(0) {
            return;
        }
        let workers = if num_workers_given { "`num_workers=0`" } else { "no `num_workers`" };
        // In the order DataLoader checks them: its error names the first.
        let (option, error) = if prefetch_factor == Some(true) {
            ("prefetch_factor", "prefetch_factor option could only be specified in multiprocessing")
        } else if persistent_workers == Some(true) {
            ("persistent_workers", "persistent_workers option needs num_workers > 0")
        } else {
            return;
        };
        let span = expr.keyword(option).map_or(expr.span, |v| v.span);
        checker.report(
            Self::META
                .diagnostic(span, format!("`{option}=` with {workers}: `DataLoader` raises ValueError ({error})"))
                .with_help(format!("pass `num_workers=` greater than 0 (`{option}` only applies to worker processes), or drop `{option}=`")),
        );
    }
}
