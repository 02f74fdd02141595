use memlint_semantic::cfg::Cfg;
use memlint_semantic::ir::{Expr, Function, Stmt};
use memlint_semantic::ir::Words;
use memlint_semantic::step::{accumulation_count, bound_by_wrapper, step_events, StepEvent, StepKind, StepKinds};

use crate::{declare_rule, Checker, Rule, RuleMeta};

declare_rule! {
    /// ## What it does
    /// With a `GradScaler` (`scaler.scale(loss).backward()` in a loop or a
    /// step function), flags:
    /// - an optimizer stepped directly (`optimizer.step()`) after the scaled
    ///   backward, where `scaler.step(optimizer)` belongs;
    /// - a loop that calls `scaler.step(optimizer)` but never
    ///   `scaler.update()` (itself or in a helper it calls);
    /// - `clip_grad_norm_`/`clip_grad_value_` on the scaled gradients: a path
    ///   from the scaled backward reaches the clip without
    ///   `scaler.unscale_(optimizer)`;
    /// - in an accumulation loop, `scaler.unscale_(optimizer)` every
    ///   iteration while `scaler.update()` runs only under the accumulation
    ///   guard.
    ///
    /// The scaled backward may be chained (`scaler.scale(loss).backward()`)
    /// or bound first (`scaled = scaler.scale(loss); scaled.backward()`).
    ///
    /// ## Why is this bad?
    /// The scaled gradients are the true ones times the scale factor
    /// (65536 to start). `optimizer.step()` applies them as they are and
    /// skips the scaler's inf/NaN check, and the `scaler.update()` after it
    /// raises `AssertionError: No inf checks were recorded prior to
    /// update.` Without `scaler.update()`, the second `scaler.step()`
    /// raises `RuntimeError: step() has already been called since the last
    /// update().` A second `unscale_` before an update raises `RuntimeError:
    /// unscale_() has already been called on this optimizer since the last
    /// update().` A clip on scaled gradients compares the threshold with a
    /// norm 65536 times too large, so it clips every step to a tiny update.
    ///
    /// ## Example
    /// ```python
    /// for x, y in loader:
    ///     optimizer.zero_grad()
    ///     scaler.scale(loss_fn(model(x), y)).backward()
    ///     torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    ///     optimizer.step()
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// for x, y in loader:
    ///     optimizer.zero_grad()
    ///     scaler.scale(loss_fn(model(x), y)).backward()
    ///     scaler.unscale_(optimizer)
    ///     torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    ///     scaler.step(optimizer)
    ///     scaler.update()
    /// ```
    ///
    /// ## Known false positives
    /// A scaler is recognised by its name (`scaler`, `self.grad_scaler`)
    /// and an optimizer by how it was built or its name. When the loop has
    /// `scaler.step(optimizer)` somewhere, a direct `optimizer.step()` is
    /// taken to be the unscaled branch; when `scaler.unscale_` appears
    /// before a clip anywhere in the loop, the clip is taken to be covered
    /// (branches on an AMP flag are not followed). An optimizer bound from a
    /// call that is neither a torch optimizer nor a project function
    /// (`model, optimizer = msamp.initialize(model, optimizer)`,
    /// `accelerator.prepare(...)`) is taken to do the scaler's work and its
    /// direct `step()` is not reported. Helpers that scale the loss
    /// themselves are not seen. Test modules are not checked.
    ///
    /// ## References
    /// - [Automatic mixed precision: gradient scaling](https://pytorch.org/docs/stable/amp.html#gradient-scaling)
    /// - [AMP examples: gradient clipping](https://pytorch.org/docs/stable/notes/amp_examples.html#gradient-clipping)
    pub struct GradScalerMisuse {
        code: "ML106",
        name: "grad-scaler-misuse",
        severity: Error,
        default: true,
        languages: [Python],
    }
}

impl Rule for GradScalerMisuse {
    fn meta(&self) -> &'static RuleMeta {
        &Self::META
    }

    fn check_loop(&self, _stmt: &Stmt, body: &[Stmt], checker: &mut Checker<'_>) {
        let words = checker.cx.function_words();
        check_body(body, true, words, checker);
    }

    fn check_function(&self, func: &Function, checker: &mut Checker<'_>) {
        check_body(&func.body, false, func.words, checker);
    }
}

fn check_body(body: &[Stmt], is_loop: bool, words: Words, checker: &mut Checker<'_>) {
    let cx = checker.cx;
    if !checker.in_torch_program() {
        return;
    }
    // Every finding rests on a `scaler.scale(loss).backward()`.
    if !words.contains(Words::BACKWARD.union(Words::SCALE)) {
        return;
    }
    // A loop's events are shared with the other rules of the loop.
    let events = if is_loop { checker.loop_events() } else { std::rc::Rc::new(step_events(body, cx)) };
    let scaled = |e: &&StepEvent<'_>| matches!(e.kind, StepKind::Backward { scaled: true, .. }) && !e.in_def;
    // In a function, only what runs once per call: its loops are checked as loops.
    let scaled_bw: Vec<&StepEvent<'_>> = events.iter().filter(scaled).filter(|e| is_loop || e.depth == 0).collect();
    if scaled_bw.is_empty() {
        return;
    }
    let scaler = scaled_bw[0].receiver.clone().unwrap_or_else(|| "scaler".to_string());
    let cfg = Cfg::build(body);
    let after_scaled = |e: &StepEvent<'_>| {
        cfg.node_of(e.stmt.id)
            .is_some_and(|to| scaled_bw.iter().filter_map(|b| cfg.node_of(b.stmt.id)).any(|from| from != to && cfg.reaches(from, to)))
    };
    let scaler_steps: Vec<Option<&str>> =
        events.iter().filter(|e| e.kind == StepKind::ScalerStep).map(|e| e.receiver.as_deref()).collect();
    let updates = events.iter().any(|e| e.kinds().contains(StepKinds::SCALER_UPDATE));
    let unscales: Vec<&StepEvent<'_>> = events.iter().filter(|e| e.kinds().contains(StepKinds::SCALER_UNSCALE)).collect();
    // An optimizer from a wrapper (`msamp.initialize`, `accelerator.prepare`)
    // may unscale and check for infs itself.
    let module = checker.module();
    let memo = checker.file_memo();
    let wrapped = |opt: &str| {
        let function = body.first().and_then(|s| module.enclosing_function_body(s.id));
        function.is_some_and(|b| bound_by_wrapper(b, opt, cx))
            // The module's answer is the same for every loop of the file.
            || memo
                .get_or("ML106 module binds by wrapper", opt, || bound_by_wrapper(&module.body, opt, cx).then_some(()))
                .is_some()
    };
    // The `scaler.update()`s one iteration reaches after `event`, and the
    // accumulation guard of each (`None`: not under one).
    let updates_after = |event: &StepEvent<'_>| -> Vec<Option<&Expr>> {
        let Some(from) = cfg.node_of(event.stmt.id) else { return Vec::new() };
        events
            .iter()
            .filter(|u| u.kinds().contains(StepKinds::SCALER_UPDATE))
            .filter(|u| cfg.node_of(u.stmt.id).is_some_and(|to| to != from && cfg.reaches(from, to)))
            .map(|u| u.guards.iter().copied().find(|g| accumulation_count(g).is_some()))
            .collect()
    };
    for e in events.iter().filter(|e| e.is_direct()) {
        match e.kind {
            StepKind::OptimizerStep { .. } => {
                let opt = e.receiver.as_deref().unwrap_or("optimizer");
                let covered = scaler_steps.iter().any(|r| r.is_none() || *r == Some(opt));
                if covered || !after_scaled(e) || wrapped(opt) {
                    continue;
                }
                checker.report(
                    GradScalerMisuse::META
                        .diagnostic(
                            e.span,
                            format!(
                                "`{opt}.step()` after `{scaler}.scale(loss).backward()` applies the scaled gradients and skips the inf/NaN check"
                            ),
                        )
                        .with_help(format!("call `{scaler}.step({opt})` and then `{scaler}.update()` instead of `{opt}.step()`")),
                );
            }
            // `unscale_` every micro-step, `update()` only every n-th.
            StepKind::ScalerUnscale if is_loop => {
                let after = updates_after(e);
                let Some(Some(guard)) = after.first().copied() else { continue };
                let all_guarded = after.iter().all(Option::is_some);
                if !all_guarded || e.guards.iter().any(|g| after.iter().flatten().any(|u| g.id == u.id)) {
                    continue;
                }
                let opt = e.receiver.as_deref().unwrap_or("optimizer");
                checker.report(
                    GradScalerMisuse::META
                        .diagnostic(
                            e.span,
                            format!(
                                "`{scaler}.unscale_({opt})` runs every iteration but `{scaler}.update()` only under `if {}:`: the second `unscale_` before an update raises",
                                checker.text(guard.span)
                            ),
                        )
                        .with_help(format!("move `{scaler}.unscale_({opt})` (and the clipping) under the same guard as `{scaler}.step({opt})`")),
                );
            }
            StepKind::ScalerStep if is_loop && !updates => {
                checker.report(
                    GradScalerMisuse::META
                        .diagnostic(
                            e.span,
                            format!("`{scaler}.update()` never runs in this loop: the next `{scaler}.step()` raises"),
                        )
                        .with_help(format!("call `{scaler}.update()` right after `{scaler}.step(...)` every step")),
                );
            }
            StepKind::Clip => {
                if unscales.iter().any(|u| u.span.start < e.span.start) {
                    continue;
                }
                let Some(clip) = cfg.node_of(e.stmt.id) else { continue };
                let reached = scaled_bw.iter().filter_map(|b| cfg.node_of(b.stmt.id)).any(|from| {
                    from != clip
                        && cfg.reaches_avoiding(from, clip, &|n| {
                            cfg.stmt(n).is_some_and(|s| unscales.iter().any(|u| u.stmt.id == s.id))
                        })
                });
                if !reached {
                    continue;
                }
                let opt = scaler_steps.iter().flatten().next().copied().unwrap_or("optimizer");
                let message = if unscales.is_empty() {
                    format!("gradient clipping after `{scaler}.scale(loss).backward()` without `{scaler}.unscale_({opt})` clips the scaled gradients")
                } else {
                    format!("gradient clipping runs before `{scaler}.unscale_({opt})`: it clips the scaled gradients")
                };
                checker.report(
                    GradScalerMisuse::META
                        .diagnostic(e.span, message)
                        .with_help(format!("call `{scaler}.unscale_({opt})` before clipping")),
                );
            }
            _ => {}
        }
    }
}
