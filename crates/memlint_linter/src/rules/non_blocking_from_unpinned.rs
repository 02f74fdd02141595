use memlint_semantic::facts::datasets::Samples;
use memlint_semantic::facts::pipeline::LoaderSite;
use memlint_semantic::ir::{Module, StmtKind};

use crate::{declare_rule, Checker, Rule, RuleMeta};

declare_rule! {
    /// ## What it does
    /// Flags `.to(device, non_blocking=True)` / `.cuda(non_blocking=True)`
    /// on a batch of a loop over a `DataLoader` built without
    /// `pin_memory=True` (not passed, or `False`). The loader must be known
    /// in the same file: the loop iterates a name bound to a
    /// `DataLoader(...)` call, or to the call of a function of the file
    /// that returns one. A batch pinned on its way (`x.pin_memory()`) is
    /// not reported.
    ///
    /// ## Why is this bad?
    /// An asynchronous host-to-device copy needs page-locked (pinned)
    /// memory. From an unpinned batch the driver copies through a staging
    /// buffer and the call returns only when the copy is done:
    /// `non_blocking=True` promises an overlap that does not happen. Pinning
    /// in the loader's pin thread makes the copy asynchronous. (The effect
    /// needs a GPU to measure and has not been measured by memprobe yet.)
    ///
    /// ## Example
    /// ```python
    /// loader = DataLoader(dataset, batch_size=128, num_workers=4)
    /// for x, y in loader:
    ///     x = x.to(device, non_blocking=True)
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// loader = DataLoader(dataset, batch_size=128, num_workers=4, pin_memory=True)
    /// for x, y in loader:
    ///     x = x.to(device, non_blocking=True)
    /// ```
    ///
    /// ## Known false positives
    /// A loader whose `pin_memory` comes from a variable or an unreadable
    /// `**kwargs` dict, a loader passed in as an argument, and one built in
    /// another file are not reported; neither is a copy next to a blocking
    /// copy of another part of the same batch in the same iteration
    /// (`inputs.cuda(), targets.cuda(non_blocking=True)`): the stream
    /// waits at that one, and pinning alone would not change it. Nor, as
    /// for ML303, a loader of small samples (MNIST or CIFAR, a table,
    /// token ids) or one whose every loop reads a value back each step
    /// (`loss.item()`): a pinned copy would overlap nothing that matters. Off by
    /// default.
    ///
    /// ## References
    /// - [CUDA semantics: use pinned memory buffers](https://pytorch.org/docs/stable/notes/cuda.html#use-pinned-memory-buffers)
    /// - [torch.Tensor.to](https://pytorch.org/docs/stable/generated/torch.Tensor.to.html)
    pub struct NonBlockingFromUnpinned {
        code: "ML307",
        name: "non-blocking-from-unpinned",
        severity: Info,
        default: false,
        languages: [Python],
    }
}

impl Rule for NonBlockingFromUnpinned {
    fn meta(&self) -> &'static RuleMeta {
        &Self::META
    }

    fn check_file(&self, module: &Module, checker: &mut Checker<'_>) {
        let cx = checker.cx;
        if !checker.in_torch_program() {
            return;
        }
        if cx.pipeline().moves.is_empty() {
            return;
        }
        let sites = checker.loader_sites();
        let pipeline = cx.pipeline();
        for mv in &pipeline.moves {
            if mv.non_blocking != Some(true) || mv.pinned {
                continue;
            }
            let Some(loader) = &mv.loader else { continue };
            // Another part of the same batch copied with a blocking copy in
            // the same iteration (`inputs.cuda(), targets.cuda(non_blocking=True)`):
            // the stream waits there anyway, and pinning alone changes
            // nothing for this copy.
            let line = checker.line_of(mv.span.start);
            // The loop around a move (an evaluation loop has no step loop).
            let loop_of = |span: memlint_diagnostics::Span| module.stmt_at(span.start).and_then(|id| module.tree.enclosing_loop(id));
            let mv_loop = loop_of(mv.span);
            let blocking_sibling = pipeline.moves.iter().any(|o| {
                o.loader.as_deref() == Some(loader.as_str())
                    && o.function == mv.function
                    && o.non_blocking != Some(true)
                    && !o.pinned
                    && (o.step_loop.is_some() && o.step_loop == mv.step_loop
                        || checker.line_of(o.span.start) == line
                        || mv_loop.is_some() && loop_of(o.span) == mv_loop)
            });
            if blocking_sibling {
                continue;
            }
            let found = sites_of(loader, &sites, module);
            if found.is_empty() || !found.iter().all(|s| s.pin_memory.absent_or(false)) {
                continue;
            }
            // As for ML303: where the step reads a value back every step,
            // or the batches are small (MNIST, a table, token ids), a
            // pinned copy would overlap nothing that matters.
            if found.iter().any(|s| pipeline.moves_only_in_synced_loops(s) || checker.loader_samples(module, s) == Samples::Small) {
                continue;
            }
            let line = checker.line_of(found[0].span.start);
            checker.report(
                Self::META
                    .diagnostic(mv.span, format!("`non_blocking=True` on a batch of `{loader}`, which is not pinned: the copy is synchronous anyway"))
                    .with_help(format!("pass `pin_memory=True` to the `DataLoader` of line {line}")),
            );
        }
    }
}

/// The loaders of the file `loader` (a dotted name) is bound to: a
/// `DataLoader(...)` assigned to it, or one returned by a function of the
/// file whose call is assigned to it.
fn sites_of<'s>(loader: &str, sites: &'s [LoaderSite], module: &Module) -> Vec<&'s LoaderSite> {
    let direct: Vec<&LoaderSite> = sites.iter().filter(|s| s.bound_to.as_deref() == Some(loader)).collect();
    if !direct.is_empty() {
        return direct;
    }
    // `train_loader = make_loader(...)` with `make_loader` of this file.
    let mut callees: Vec<String> = Vec::new();
    memlint_semantic::ir::for_each_stmt_in_module(&module.body, &mut |s| {
        if let StmtKind::Assign { targets, value, .. } = &s.kind {
            if targets.len() == 1 && targets[0].dotted().as_deref() == Some(loader) {
                if let Some(name) = value.as_call().and_then(|(f, _, _)| f.dotted()) {
                    callees.push(name.as_str().rsplit('.').next().unwrap_or_default().to_string());
                }
            }
        }
    });
    if callees.is_empty() {
        return Vec::new();
    }
    sites
        .iter()
        .filter(|s| {
            s.returned
                && s.function.as_deref().is_some_and(|f| callees.iter().any(|c| f.rsplit('.').next() == Some(c.as_str())))
        })
        .collect()
}
