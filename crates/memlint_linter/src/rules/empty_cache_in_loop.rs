use memlint_semantic::api::{classify, Callee, Event, Receiver, OOM_EXCEPTIONS};
use memlint_semantic::ir::{for_each_stmt_in_function, Expr, ExprKind, StmtKind};

use crate::{declare_rule, Checker, Rule, RuleMeta};

declare_rule! {
    /// ## What it does
    /// Flags `torch.cuda.empty_cache()` that runs once per training or
    /// evaluation step: in the body of a loop whose iteration is a step (it
    /// calls `backward()` itself, or iterates a validation/test loader), also
    /// nested deeper, or in a step function of the project (a `train_step`, a
    /// helper the step loop calls, a model's `forward` and what it calls:
    /// also in such a function's own loop over the batch's items, `for i
    /// in range(outputs.shape[0]):` in a loss helper). An epoch loop around the step loop is not
    /// a step: once per epoch is harmless; nor is a loop over evaluation
    /// passes around the loop over batches (`for valid_data in passes:`,
    /// the call after `for batch in valid_data: model(batch)`; after a
    /// decoder's loop over time steps, a `range`, it runs once per batch). Not when it only runs in
    /// an out-of-memory handler (`except torch.cuda.OutOfMemoryError:`,
    /// `except RuntimeError:`) or in a helper the step calls only from an
    /// `except` handler (a cleanup after a failed step), under an interval guard
    /// (`if step % 1000 == 0:`), or under a user option
    /// (`if args.empty_unused_memory_level >= 1:`): a deliberate choice the
    /// user turns on. Nor in an inference script's loop over files found on
    /// disk (`for path in sorted(glob.glob(...))`, `os.listdir(d)`): inputs
    /// of varying sizes, often beside another library holding GPU memory,
    /// where giving the cache back between inputs is a choice.
    ///
    /// ## Why is this bad?
    /// `empty_cache()` returns the caching allocator's free blocks to the
    /// driver. The next step needs the same blocks again and has to
    /// `cudaMalloc` them, a synchronising call, so every step gets slower;
    /// and it frees nothing that is still referenced, so it does not lower
    /// the peak either. Memory that other processes need is better left to
    /// `PYTORCH_CUDA_ALLOC_CONF`, or released once after training.
    ///
    /// ## Example
    /// ```python
    /// for x, y in loader:
    ///     loss = criterion(model(x), y)
    ///     loss.backward()
    ///     optimizer.step()
    ///     torch.cuda.empty_cache()
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// for x, y in loader:
    ///     loss = criterion(model(x), y)
    ///     loss.backward()
    ///     optimizer.step()
    /// torch.cuda.empty_cache()  # once, if another process needs the memory
    /// ```
    ///
    /// ## Known false positives
    /// A loop is a training loop when its body reaches `backward()` (also
    /// through a project helper) and an evaluation loop when it iterates a
    /// validation/test loader; `empty_cache()` in a helper is reported only
    /// when the helper is step code for the project index (dynamic dispatch
    /// and callers outside the run are not seen). A guard the rule does not
    /// recognise as an interval (`if time.time() - last > 60:`) is reported.
    /// Nor beside a move to the host in the same block (`feats =
    /// feats.cpu()`, `x.to("cpu")`): code that offloads tensors to the CPU
    /// for long inputs gives the freed blocks back on purpose.
    /// Test modules are not checked, nor benchmarking and profiling code (a
    /// function or module named like `bench`, `profile`, `timing`, or a
    /// loop that waits for the device and reads a clock every iteration),
    /// which empties the cache between measurements on purpose.
    ///
    /// ## References
    /// - [CUDA memory management](https://pytorch.org/docs/stable/notes/cuda.html#memory-management)
    /// - [torch.cuda.empty_cache](https://pytorch.org/docs/stable/generated/torch.cuda.empty_cache.html)
    pub struct EmptyCacheInLoop {
        code: "ML205",
        name: "empty-cache-in-loop",
        severity: Warning,
        default: true,
        languages: [Python],
    }
}

impl Rule for EmptyCacheInLoop {
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
        if classify(expr, Callee::Library(q.as_str())) != Some(Event::EmptyCache) {
            return;
        }
        // Step code (a forward, a loss helper) runs once per step, and a
        // loop of its own over the batch's items (`for i in
        // range(outputs.shape[0]):`) as many times more.
        let in_step = cx.in_step_iteration()
            || (!cx.in_data_loop() && !cx.in_training_loop() && cx.function_role() == memlint_semantic::Role::Step);
        // A benchmark empties the cache between measurements on purpose.
        let timed = || cx.training_loop().and_then(|id| checker.module().stmt(id)).is_some_and(|s| cx.times_every_iteration(s));
        if !in_step
            || cx.in_benchmark_code()
            || timed()
            || cx.guarded_by_interval()
            || cx.guarded_by_option()
            || cx.in_handler_catching(OOM_EXCEPTIONS)
            || cx.in_loop_over_files()
            || offloads_beside(checker)
            || after_an_inner_batch_loop(checker)
        {
            return;
        }
        let (place, next) = if cx.in_data_loop() && !cx.in_training_loop() {
            ("an evaluation loop", "next batch")
        } else {
            ("the training step", "next step")
        };
        checker.report(
            Self::META
                .diagnostic(expr.span, format!("`torch.cuda.empty_cache()` in {place} makes every {next} `cudaMalloc` its blocks again"))
                .with_help("call it once outside the loop (or only in an out-of-memory handler); it frees nothing that is still referenced"),
        );
    }
}

/// Whether the loop around the call holds a loop of its own over a
/// collection (not a `range`: a decoder's time steps) that runs a model
/// (`for valid_data in passes:` around `for idx in clusters:
/// model(...)`): that inner loop is the one over batches, and the call,
/// outside it, runs once per pass.
fn after_an_inner_batch_loop(checker: &Checker<'_>) -> bool {
    let module = checker.module();
    let cx = checker.cx;
    let Some(lp) = module.tree.enclosing_loop(cx.current_stmt_id()).and_then(|id| module.stmt(id)) else { return false };
    let body = match &lp.kind {
        StmtKind::For { body, .. } | StmtKind::While { body, .. } => body,
        _ => return false,
    };
    let mut found = false;
    for_each_stmt_in_function(body, &mut |s| {
        let StmtKind::For { body: inner, iter, .. } = &s.kind else { return };
        let counted = iter.as_call().and_then(|(f, _, _)| f.as_name()).is_some_and(|n| n == "range");
        if !counted {
            for_each_stmt_in_function(inner, &mut |t| {
                if !found {
                    t.for_each_expr(|e| found = found || cx.calls_a_model(e));
                }
            });
        }
    });
    found
}

/// Whether the block holding the current statement also moves a tensor to
/// the host (`x.cpu()`, `x.to("cpu")`): an offload path, which empties the
/// cache on purpose once the tensors have left the device.
fn offloads_beside(checker: &Checker<'_>) -> bool {
    let module = checker.module();
    let id = checker.cx.current_stmt_id();
    let block = match module.tree.parent(id).and_then(|p| module.stmt(p)) {
        Some(parent) => parent.child_blocks().find(|b| b.iter().any(|s| s.id == id)),
        None => Some(module.body.as_slice()),
    };
    let to_host = |e: &Expr| {
        e.as_method_call().is_some_and(|(_, name)| {
            let callee = Callee::Method { name, receiver: Receiver::Tensor, receiver_is_path: false };
            matches!(classify(e, callee), Some(Event::ToDevice { to_host: true, .. }))
        })
    };
    block.is_some_and(|b| {
        b.iter().any(|s| {
            let mut found = false;
            s.for_each_expr(|e| found |= e.any(&mut |x| to_host(x)));
            found
        })
    })
}
