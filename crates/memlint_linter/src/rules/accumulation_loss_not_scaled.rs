use memlint_semantic::ir::{Arm, BinOp, Expr, ExprKind, Stmt, StmtKind};
use memlint_semantic::step::{accumulation_count, micro_step_count, StepEvent, StepKind, StepKinds};
use memlint_semantic::Context;
use rustc_hash::FxHashSet as HashSet;

use crate::{declare_rule, Checker, Rule, RuleMeta};

declare_rule! {
    /// ## What it does
    /// Flags `loss.backward()` in a gradient-accumulation loop when the loss
    /// is not scaled by the accumulation count. The loop calls `backward()`
    /// every iteration and steps the optimizer under an accumulation guard:
    /// `if (i + 1) % n == 0:`, `if step % n == n - 1:`,
    /// `if (i + 1) % n == 0 or i + 1 == len(loader):`, or a counter compared
    /// to a count named for accumulation (`if micro == accum_steps:`); or the
    /// loop holds an inner micro-step loop, `for micro_step in range(n):`
    /// (the count or the variable named for accumulation or micro-steps),
    /// that calls `backward()` and neither steps nor zeroes, and the
    /// optimizer steps after it (nanoGPT's shape). The
    /// loss counts as scaled when it is divided or multiplied by a factor on
    /// its way to `backward()` (`loss = loss / n`, `(loss * scale).backward()`,
    /// `loss /= n`, `loss.sum().mul(scale / total).backward()`), also inside
    /// the project's loss helper that returns it. Not reported when every
    /// optimizer the run builds is invariant to a constant scale of the
    /// gradients (`torch.optim.Adam`, `RMSprop` or `Adagrad` without
    /// `weight_decay`, or `AdamW`, torch's or `transformers.AdamW`: `m / sqrt(v)` is the same for the sum as
    /// for the mean) and the function does not clip gradients; an optimizer
    /// of another kind, a weight decay that is not a literal 0, or one
    /// chosen at run time keeps it reported.
    ///
    /// ## Why is this bad?
    /// `backward()` adds each micro-batch's gradient into `.grad`, so after
    /// `n` micro-batches the gradient is the *sum* of `n` mean-loss
    /// gradients: `n` times the gradient of the large batch the loop
    /// stands for. The learning rate is effectively `n` times too high,
    /// and gradient clipping and loss-scale schedules see the wrong norm.
    ///
    /// ## Example
    /// ```python
    /// for i, (x, y) in enumerate(loader):
    ///     loss = criterion(model(x), y)
    ///     loss.backward()
    ///     if (i + 1) % accum_steps == 0:
    ///         optimizer.step()
    ///         optimizer.zero_grad()
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// for i, (x, y) in enumerate(loader):
    ///     loss = criterion(model(x), y) / accum_steps
    ///     loss.backward()
    ///     if (i + 1) % accum_steps == 0:
    ///         optimizer.step()
    ///         optimizer.zero_grad()
    /// ```
    ///
    /// ## Known false positives
    /// Any division or multiplication of the loss by a non-literal factor
    /// is taken as the scaling (the rule does not prove the factor is `n`),
    /// and so is a project loss helper that divides or multiplies
    /// anything; a loss that comes from outside the loop is not checked.
    /// `accelerator.backward(loss)` and other wrappers that scale for you
    /// are not checked, nor loops whose `backward()` runs only in a helper.
    /// A loss summed over the samples is not reported: a torch loss with
    /// `reduction="sum"` (or `size_average=False`), a name bound to one
    /// (`criterion = nn.MSELoss(reduction="sum")`), a project loss function
    /// or loss module whose `forward` reduces with `reduction="sum"` and
    /// averages nothing (YOLO's loss, with the learning rate divided by
    /// the batch size). Accumulated, its micro-batch gradients add up to the
    /// gradient of the large batch's sum, as one step over that batch would
    /// give.
    /// Test modules are not checked. An inner loop over `range(n)` whose
    /// names say nothing of accumulation (`for k in range(n_heads)`: one
    /// backward per head, summed on purpose) is not taken as micro-steps.
    ///
    /// ## References
    /// - [Gradient accumulation (PyTorch forums, with the `loss / n` idiom)](https://discuss.pytorch.org/t/why-do-we-need-to-set-the-gradients-manually-to-zero-in-pytorch/4903/20)
    /// - [Hugging Face: gradient accumulation](https://huggingface.co/docs/accelerate/usage_guides/gradient_accumulation)
    pub struct AccumulationLossNotScaled {
        code: "ML104",
        name: "accumulation-loss-not-scaled",
        severity: Warning,
        default: true,
        languages: [Python],
    }
}

impl AccumulationLossNotScaled {
    /// The micro-step shape: `for micro in range(accum_steps): loss =
    /// model(x); loss.backward()` directly in the training loop's body, with
    /// the optimizer stepped after that inner loop and neither stepped nor
    /// zeroed inside it.
    fn check_micro_steps(body: &[Stmt], events: &[StepEvent<'_>], checker: &mut Checker<'_>) {
        for stmt in body {
            let StmtKind::For { body: inner, .. } = &stmt.kind else { continue };
            let Some(n) = micro_step_count(stmt) else { continue };
            let within = |e: &StepEvent<'_>| stmt.span.start <= e.span.start && e.span.start < stmt.span.end;
            let steps_after =
                events.iter().any(|e| e.is_direct() && e.kinds().contains(StepKinds::OPT_STEP) && e.span.start >= stmt.span.end);
            let resets_inside = events.iter().any(|e| within(e) && (e.kinds().contains(StepKinds::OPT_STEP) || e.kinds().contains(StepKinds::ZERO)));
            if !steps_after || resets_inside {
                continue;
            }
            let n_text = checker.text(n.span).to_string();
            let why = format!("the optimizer steps once after the `{n_text}` micro-steps of this loop, so");
            for e in events.iter().filter(|e| within(e) && e.depth == 1 && !e.in_def) {
                Self::report_unscaled(checker, e, inner, &n_text, &why);
            }
        }
    }

    /// Reports the `backward()` of event `e` when its loss is not scaled on
    /// its way there (in `body`): `why` says how the steps accumulate.
    fn report_unscaled(checker: &mut Checker<'_>, e: &StepEvent<'_>, body: &[Stmt], n_text: &str, why: &str) {
        let StepKind::Backward { wrapper: false, .. } = e.kind else { return };
        let Some(loss) = e.loss else { return };
        let sums = checker
            .file_memo()
            .get_or("sum-reduced-names", "", || Some(memlint_semantic::facts::sum_reduced_names(checker.module_body())))
            .unwrap_or_default();
        if scaled(loss, body, e.span.start, checker.cx, &sums, 0) {
            return;
        }
        let loss_text = checker.text(loss.span).to_string();
        let shown = if loss_text.len() <= 40 { loss_text.as_str() } else { "loss" };
        checker.report(
            Self::META
                .diagnostic(
                    e.span,
                    format!("`{shown}` is not divided by `{n_text}` before `backward()`: {why} the accumulated gradient is `{n_text}` times too large"),
                )
                .with_help(format!("scale the loss before `backward()`: `loss = loss / {n_text}`")),
        );
    }
}

impl Rule for AccumulationLossNotScaled {
    fn meta(&self) -> &'static RuleMeta {
        &Self::META
    }

    fn check_loop(&self, stmt: &Stmt, body: &[Stmt], checker: &mut Checker<'_>) {
        if !checker.in_grad_code() {
            return;
        }
        // Every optimizer of the run is Adam-like (no weight decay added to
        // the gradient) and nothing clips: the summed gradient takes the
        // same step as the mean.
        if checker.cx.index().optimizers_scale_invariant() {
            let module = checker.module();
            let scope = module.enclosing_function_body(stmt.id).unwrap_or(&module.body);
            if !memlint_semantic::facts::clips_gradients(scope) {
                return;
            }
        }
        let events = checker.loop_events();
        Self::check_micro_steps(body, &events, checker);
        // The step under an accumulation guard, and that guard.
        let Some((guard, n)) = events.iter().filter(|e| e.is_direct() && e.kinds().contains(StepKinds::OPT_STEP)).find_map(|e| {
            e.guards.iter().find_map(|g| accumulation_count(g).map(|n| (*g, n)))
        }) else {
            return;
        };
        let under_guard = |guards: &[&Expr]| guards.iter().any(|g| g.id == guard.id);
        // An optimizer that steps in the guard's `else` arm too steps every
        // iteration (`if step % 2 == 0: opt_b.step()` / `else: for opt in
        // optimizers: opt.step()`, an alternating schedule): nothing
        // accumulates.
        let tree = &checker.module().tree;
        if let Some(guard_if) = tree.owner(guard.id) {
            let steps_otherwise = events.iter().any(|e| {
                !e.in_def
                    && e.kinds().contains(StepKinds::OPT_STEP)
                    && tree.guards(e.stmt.id).any(|(g, arm)| g == guard_if && arm == Arm::Else)
            });
            if steps_otherwise {
                return;
            }
        }
        // Zeroing every iteration: nothing accumulates (another bug).
        if events.iter().any(|e| e.is_direct() && e.kinds().contains(StepKinds::ZERO) && !under_guard(&e.guards)) {
            return;
        }
        let n_text = checker.text(n.span).to_string();
        let why = format!("with the step under `if {}:`", checker.text(guard.span));
        for e in events.iter().filter(|e| e.is_direct() && !under_guard(&e.guards)) {
            Self::report_unscaled(checker, e, body, &n_text, &why);
        }
    }
}

/// Whether `e` is (or may be) scaled on its way to `backward()`: divided or
/// multiplied by a factor, or made by a project function that scales, or
/// out of sight (not assigned in the loop before `before`). Doubt counts as
/// scaled.
fn scaled(e: &Expr, body: &[Stmt], before: u32, cx: &Context, sums: &HashSet<String>, depth: u32) -> bool {
    if depth > 8 {
        return true;
    }
    match &e.kind {
        ExprKind::BinOp { op: BinOp::Div | BinOp::Mult | BinOp::FloorDiv, .. } => true,
        ExprKind::BinOp { left, right, .. } => scaled(left, body, before, cx, sums, depth + 1) || scaled(right, body, before, cx, sums, depth + 1),
        ExprKind::Unary { operand: x, .. } => scaled(x, body, before, cx, sums, depth + 1),
        ExprKind::Subscript { value, .. } => scaled(value, body, before, cx, sums, depth + 1),
        ExprKind::Name(_) | ExprKind::Attribute { .. } => {
            let Some(d) = e.dotted() else {
                // `model(x).loss`: the base.
                let ExprKind::Attribute { value, .. } = &e.kind else { return true };
                return scaled(value, body, before, cx, sums, depth + 1);
            };
            let mut values = Vec::new();
            let mut aug_scaled = false;
            assignments(body, &d, before, &mut values, &mut aug_scaled);
            if aug_scaled {
                return true;
            }
            if values.is_empty() {
                // `outputs.loss` with `outputs` assigned in the loop.
                if let ExprKind::Attribute { value, .. } = &e.kind {
                    if value.dotted().is_some_and(|b| {
                        let mut v = Vec::new();
                        let mut a = false;
                        assignments(body, &b, before, &mut v, &mut a);
                        !v.is_empty() || a
                    }) {
                        return scaled(value, body, before, cx, sums, depth + 1);
                    }
                }
                return true;
            }
            values.iter().any(|(at, v)| scaled(v, body, *at, cx, sums, depth + 1))
        }
        ExprKind::Call { func, args, .. } => {
            // A loss summed over the samples (`reduction="sum"`, YOLO's
            // loss module): accumulated, it is the large batch's sum.
            if cx.sums_losses(e) || func.dotted().is_some_and(|d| sums.contains(d.as_str())) {
                return true;
            }
            if let Some(f) = cx.project_callee(e) {
                return f.scales_values;
            }
            // `loss.sum().mul(scale / total)`: `*` and `/` spelled as methods.
            if matches!(&func.kind, ExprKind::Attribute { attr, .. } if memlint_semantic::api::SCALING_METHODS.contains(&attr.as_str()))
                && !args.is_empty()
            {
                return true;
            }
            // `loss.mean()`, `losses.sum()`: the receiver.
            match &func.kind {
                ExprKind::Attribute { value, .. } if cx.qualified_name(func).is_none() && !cx.is_model(value) => {
                    scaled(value, body, before, cx, sums, depth + 1)
                }
                _ => false,
            }
        }
        ExprKind::IfExp { body: b, orelse, .. } => scaled(b, body, before, cx, sums, depth + 1) || scaled(orelse, body, before, cx, sums, depth + 1),
        _ => false,
    }
}

/// The values (with the offsets of their statements) assigned to `dotted`
/// in `body` before offset `before` (nested
/// blocks included, nested functions not), and whether an augmented
/// `/=`/`*=` scales it there.
fn assignments<'a>(body: &'a [Stmt], dotted: &str, before: u32, values: &mut Vec<(u32, &'a Expr)>, aug_scaled: &mut bool) {
    for s in body {
        if s.span.start >= before {
            return;
        }
        match &s.kind {
            StmtKind::Assign { targets, value, .. } => {
                if targets.iter().any(|t| t.binds(dotted)) {
                    values.push((s.span.start, value));
                }
            }
            StmtKind::AugAssign { target, op, value } if target.dotted().as_deref() == Some(dotted) => match op {
                BinOp::Div | BinOp::Mult | BinOp::FloorDiv => *aug_scaled = true,
                _ => values.push((s.span.start, value)),
            },
            StmtKind::Function(_) | StmtKind::Class { .. } => {}
            _ => {
                for b in s.child_blocks() {
                    assignments(b, dotted, before, values, aug_scaled);
                }
            }
        }
    }
}
