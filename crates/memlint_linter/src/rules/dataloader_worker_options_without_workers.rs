use memlint_semantic::api::{classify, Callee, Event};
use memlint_semantic::facts::pipeline::{loader_options, scope_at, Opt};
use memlint_semantic::ir::{Expr, ExprKind};

use crate::{declare_rule, Checker, Rule, RuleMeta};

declare_rule! {
    /// ## What it does
    /// Flags a `torch.utils.data.DataLoader(...)` built with
    /// `persistent_workers=True` or a `prefetch_factor=` other than `None`
    /// while it has no worker processes: `num_workers` not passed, or
    /// passed as `0` (a literal, or a name bound once to one). The options
    /// are read from the call and from a `**kwargs` dict it spreads when
    /// that dict is bound once, to a literal or `dict(...)`, and never
    /// changed (`loader_kwargs = dict(batch_size=64, persistent_workers=True)`).
    /// A `num_workers` from anything else (an argument, a dict built in
    /// branches or updated later) may be non-zero and is not reported.
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
        let ExprKind::Call { func, keywords, .. } = &expr.kind else { return };
        let Some(q) = cx.qualified_name(func) else { return };
        if !matches!(classify(expr, Callee::Library(q.as_str())), Some(Event::LoaderNew)) {
            return;
        }
        // The options as the call and a `**kwargs` dict it spreads show them.
        let module = checker.module();
        let site = loader_options(expr, scope_at(module, expr.span.start), &module.body);
        let workers = match site.num_workers {
            Opt::Absent => "no `num_workers`",
            Opt::Literal(0) => "`num_workers=0`",
            _ => return,
        };
        // In the order DataLoader checks them: its error names the first.
        let (option, error) = if site.prefetch_factor == Opt::Literal(true) {
            ("prefetch_factor", "prefetch_factor option could only be specified in multiprocessing")
        } else if site.persistent_workers == Opt::Literal(true) {
            ("persistent_workers", "persistent_workers option needs num_workers > 0")
        } else {
            return;
        };
        // The keyword, else the `**kwargs` spread that passes it.
        let spread = keywords.iter().find(|k| k.name.is_none()).map(|k| k.value.span);
        let span = expr.keyword(option).map(|v| v.span).or(spread).unwrap_or(expr.span);
        checker.report(
            Self::META
                .diagnostic(span, format!("`{option}=` with {workers}: `DataLoader` raises ValueError ({error})"))
                .with_help(format!("pass `num_workers=` greater than 0 (`{option}` only applies to worker processes), or drop `{option}=`")),
        );
    }
}
