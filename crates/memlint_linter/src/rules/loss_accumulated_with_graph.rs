use memlint_diagnostics::{Applicability, Edit, Fix, Span};
use memlint_semantic::api::nn;
use memlint_semantic::ir::{BinOp, Expr, ExprKind, Stmt, StmtKind};

use crate::{declare_rule, Checker, Rule, RuleMeta};

declare_rule! {
    /// ## What it does
    /// Flags a value that carries autograd history (a loss, a model output,
    /// arithmetic on them, a loss returned by the project's own step
    /// function, alone or in a tuple) accumulated across the iterations of a
    /// training loop without `.item()`, `.detach()` or `float()`:
    /// `total_loss += loss`, `total = total + loss`, a moving average
    /// `ema = 0.9 * ema + 0.1 * loss`, `totals["loss"] += loss`,
    /// `losses.append(loss)`, `outputs.append(model(x))`, the values of a loss
    /// dict (`for v in losses.values(): total += v`), and a call of the
    /// project's own accumulator (`meter.update(loss)` whose `update` does
    /// `self.sum += val`). A training loop is one whose body reaches
    /// `backward()`, itself or through a per-batch helper of the project (a
    /// gradient taken with `create_graph=True`, as an IRM or gradient
    /// penalty does, or with `create_graph` set by a flag, as MAML's inner
    /// loop does, builds graph for a later backward and makes no loop a
    /// training loop); the
    /// accumulator must outlive the iteration: it is not re-created on every
    /// path through the loop body (`if i % 100 == 0: total = 0` is not a
    /// reset). Outputs kept for a figure by a top-level loop of at most 50
    /// steps counted in the code, whose own body runs the backward through
    /// them (`for i in range(grad_steps):` with `grad_steps = 10`,
    /// optimizing a latent: `history += [fake]`, then
    /// `classifier(fake).mean().backward()`), are not reported: the count
    /// bounds what they keep, and each backward freed what their graphs
    /// saved. A loss kept there still is (it is wanted as a number), and
    /// so is a value no backward runs through (a validation loss). The part
    /// of a tuple an unknown callee returns that is named as a log record
    /// (`loss, log = model.forward(batch)`, `logging_output`, `stats`,
    /// `metrics`) is a dict of numbers and is not taken for a graph.
    ///
    /// ## Why is this bad?
    /// The accumulated tensor references each iteration's graph, so no
    /// step's activations and graph can be freed: memory grows every step
    /// until the run dies out of memory, usually hours in. The `total` is also
    /// a tensor, so logging it later forces a device sync.
    ///
    /// ## Example
    /// ```python
    /// total_loss = 0
    /// for x, y in loader:
    ///     loss = criterion(model(x), y)
    ///     loss.backward()
    ///     optimizer.step()
    ///     total_loss += loss
    /// ```
    ///
    /// ```rust,ignore
    /// let mut total = Tensor::zeros([], tch::kind::FLOAT_CPU);
    /// for (x, y) in batches.iter() {
    ///     let loss = net.forward(x).mse_loss(y, tch::Reduction::Mean);
    ///     opt.backward_step(&loss);
    ///     total += &loss;
    /// }
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// total_loss = 0.0
    /// for x, y in loader:
    ///     loss = criterion(model(x), y)
    ///     loss.backward()
    ///     optimizer.step()
    ///     total_loss += loss.item()
    /// ```
    ///
    /// ```rust,ignore
    /// let mut total = 0.0;
    /// for (x, y) in batches.iter() {
    ///     let loss = net.forward(x).mse_loss(y, tch::Reduction::Mean);
    ///     opt.backward_step(&loss);
    ///     total += loss.double_value(&[]);
    /// }
    /// ```
    ///
    /// ## Known false positives
    /// Accumulating on purpose to call `backward()` once on the sum after the
    /// loop is reported when the loop itself also calls `backward()`. The
    /// project's own functions are followed through the project index: a
    /// helper reached by dynamic dispatch (`getattr`, a callback in a list, a
    /// method of an object whose class is unknown) or defined outside the run
    /// is not, and its losses are known to carry a graph only when
    /// `backward()` is called on them in the loop. Test modules are not
    /// checked, nor a file written for PyTorch before 0.4 (it wraps tensors
    /// in `Variable(...)` and reads a loss as `loss.data[0]`, which raises
    /// from PyTorch 0.5 on: see ML201). A loss added after its own `backward()` (no graph built since),
    /// or just before it with the `backward()` following in the same loop
    /// body unconditionally, into a sum that the training loop resets
    /// (`running_loss = 0.0` at each optimizer step or logging interval) is
    /// not reported: backward freed the saved activations and only the
    /// autograd nodes of one window stay alive. The same sum never reset is
    /// reported, and so is one added before a `backward()` that runs on some
    /// iterations only. Nor is a sum whose own `backward()` follows in the
    /// same block (`loss += term; loss.backward()`, without
    /// `retain_graph`): it is the loss being trained. Nor is a list of
    /// micro-batch values rebuilt by an outer loop every step (`outputs =
    /// []`) when a `backward()` follows the append in the inner loop's
    /// iteration: it frees what each graph saved, and the list lives one
    /// step. A total that an epoch loop resets around a loop over the
    /// loader (`train_loss = 0` each epoch, `train_loss += loss` each
    /// batch) spans every step of the epoch and is reported, also when the
    /// backward follows the sum. A buffer that a
    /// function the loop calls empties (`finish_episode()` doing `del
    /// policy.saved_log_probs[:]`, `pi.train_net()` doing `self.data = []`)
    /// is an episode buffer whose graphs the update backpropagates through
    /// (REINFORCE, actor-critic): not reported. A tuple, list or dict
    /// stored gets no fix: which of its items to detach is the author's
    /// call.
    ///
    /// ## References
    /// - [PyTorch FAQ: my model reports "cuda runtime error(2): out of memory"](https://pytorch.org/docs/stable/notes/faq.html#my-model-reports-cuda-runtime-error-2-out-of-memory)
    /// - [torch.Tensor.item](https://pytorch.org/docs/stable/generated/torch.Tensor.item.html)
    pub struct LossAccumulatedWithGraph {
        code: "ML202",
        name: "loss-accumulated-with-graph",
        severity: Warning,
        default: true,
        languages: [Python, Rust],
    }
}

impl LossAccumulatedWithGraph {
    fn check(checker: &mut Checker<'_>, acc: &Expr, value: &Expr, span: memlint_diagnostics::Span) {
        let cx = checker.cx;
        // `totals["loss"] += loss`: the accumulator is the container.
        let acc = match &acc.kind {
            ExprKind::Subscript { value: container, .. } => container.as_ref(),
            _ => acc,
        };
        let Some(acc_name) = acc.dotted() else { return };
        if cx.qualified_name(acc).is_some() || !cx.outlives_training_iteration(&acc_name) || !cx.carries_graph(value) {
            return;
        }
        // Code for PyTorch before 0.4 (`loss.data[0]`), which cannot run on a later one.
        if checker.written_for_volatile_torch() {
            return;
        }
        // Micro-batch outputs collected for one step (`outputs = []` each
        // step, a backward per chunk after the append): the backward frees
        // what each graph saved, and the list dies with the step.
        if cx.kept_for_one_outer_step(&acc_name) {
            return;
        }
        // Outputs kept for a figure from a training loop of a few steps
        // counted in the code, whose own body runs the backward on what
        // they feed (`for i in range(grad_steps):` with `grad_steps = 10`,
        // optimizing a latent: `fake = gen(z)` kept, `classifier(fake)`
        // backpropagated): what they keep is bounded by that count, and
        // each step's `backward()` freed what their graphs saved. A loss
        // kept so is still reported (it is wanted as a number), and so is
        // a value no backward frees (a validation loss).
        let kept = match &value.kind {
            ExprKind::Sequence(items) if items.len() == 1 => &items[0],
            _ => value,
        };
        if let (Some((lp, k)), Some(d)) = (cx.counted_training_steps(), kept.dotted()) {
            let body = match checker.module().stmt(lp).map(|s| &s.kind) {
                Some(StmtKind::For { body, .. }) => body.as_slice(),
                _ => &[],
            };
            if k <= memlint_semantic::facts::DEMO_STEPS && !cx.is_backward_root(&d) && memlint_semantic::facts::backward_inputs(body).contains(d.as_str()) {
                return;
            }
        }
        // A buffer the loop empties through a project function
        // (`finish_episode()` doing `del policy.saved_log_probs[:]`): its
        // graphs are kept on purpose, for the update to backpropagate.
        if cx.loop_empties(checker.module(), std::slice::from_ref(&acc_name.to_string())) {
            return;
        }
        // `loss += term` with `loss.backward()` after it in the same block
        // (without `retain_graph`): the sum is the loss being trained, and
        // its own backward frees each graph it holds.
        if sum_backpropagated(value, &acc_name, checker) {
            return;
        }
        // `running_loss += loss` after `loss.backward()`, the sum reset at
        // each optimizer step or logging interval: backward freed what the
        // graph saved, and only the autograd nodes of one window stay alive.
        // So is one added just before its own `backward()` in the same
        // block (`train_loss += out.loss` then `out.loss.backward()`).
        if value.dotted().is_some_and(|d| (cx.is_backward_root(&d) && !cx.graph_may_be_live()) || backward_follows(value, &d, checker))
            && cx.reset_in_training_loop(&acc_name)
        {
            return;
        }
        let value_text = checker.text(value.span).to_string();
        if checker.is_rust() {
            let shown = value_text.trim_start_matches('&');
            checker.report(
                Self::META
                    .diagnostic(span, format!("`{acc_name}` accumulates `{value_text}` with its autograd graph across training iterations"))
                    .with_help(format!("accumulate `{shown}.double_value(&[])` (or `{shown}.detach()`) so each step's graph can be freed")),
            );
            return;
        }
        let suggestion = if value.dotted().is_some() {
            format!("accumulate `{value_text}.item()` (or `{value_text}.detach()`) so each step's graph can be freed")
        } else {
            "accumulate `.item()` (or `.detach()`) of the value so each step's graph can be freed".to_string()
        };
        Self::report(
            checker,
            Self::META
                .diagnostic(
                    span,
                    format!("`{acc_name}` accumulates `{value_text}` with its autograd graph across training iterations"),
                )
                .with_help(suggestion),
            Self::fix(checker, value),
        );
    }

    /// Reports `diagnostic` with `fix` when there is one.
    fn report(checker: &mut Checker<'_>, diagnostic: memlint_diagnostics::Diagnostic, fix: Option<Fix>) {
        checker.report(match fix {
            Some(f) => diagnostic.with_fix(f),
            None => diagnostic,
        });
    }

    /// The part of `value` to detach, as the help names it: the value, or
    /// the first item of a tuple, list or dict of values that carries a
    /// graph (`prob[a]` of `(r, prob[a])`).
    fn detach_text(checker: &Checker<'_>, value: &Expr) -> String {
        let items: Vec<&Expr> = match &value.kind {
            ExprKind::Sequence(items) => items.iter().collect(),
            ExprKind::Dict(items) => items.iter().map(|(_, v)| v).collect(),
            _ => return checker.text(value.span).to_string(),
        };
        items
            .into_iter()
            .find(|e| checker.cx.carries_graph(e))
            .map_or_else(|| checker.text(value.span).to_string(), |e| checker.text(e.span).to_string())
    }

    /// `loss` -> `loss.item()` for a loss (what `backward()` is called on: a
    /// scalar), `x` -> `x.detach()` otherwise (`.item()` raises on more than
    /// one element). Unsafe: the accumulator becomes a number or a
    /// detached tensor, which code after the loop may not expect.
    fn fix(checker: &Checker<'_>, value: &Expr) -> Option<Fix> {
        // A tuple, list or dict of values has no `.detach()`: which of its
        // items to detach is the author's call.
        if matches!(value.kind, ExprKind::Sequence(_) | ExprKind::Dict(_)) {
            return None;
        }
        let scalar = value.dotted().is_some_and(|d| checker.cx.is_backward_root(&d));
        let method = if scalar { nn::ITEM } else { nn::DETACH };
        let simple = matches!(
            value.kind,
            ExprKind::Name(_) | ExprKind::Attribute { .. } | ExprKind::Call { .. } | ExprKind::Subscript { .. }
        );
        let edits = if simple {
            vec![Edit { span: Span::new(value.span.end, value.span.end), content: format!(".{method}()") }]
        } else {
            vec![
                Edit { span: Span::new(value.span.start, value.span.start), content: "(".to_string() },
                Edit { span: Span::new(value.span.end, value.span.end), content: format!(").{method}()") },
            ]
        };
        Some(Fix { applicability: Applicability::Unsafe, message: format!("accumulate `.{method}()` of the value"), edits })
    }
}

impl Rule for LossAccumulatedWithGraph {
    fn meta(&self) -> &'static RuleMeta {
        &Self::META
    }

    fn check_stmt(&self, stmt: &Stmt, checker: &mut Checker<'_>) {
        if checker.cx.in_test_module() {
            return;
        }
        if !checker.cx.torch_imported() || !checker.cx.in_training_loop() {
            return;
        }
        match &stmt.kind {
            StmtKind::AugAssign { target, op: BinOp::Add | BinOp::Sub, value } => {
                Self::check(checker, target, value, stmt.span);
            }
            StmtKind::Assign { targets, value, .. } if targets.len() == 1 => {
                let target = &targets[0];
                let Some(t) = target.dotted() else { return };
                // `total = total + loss`, `ema = 0.9 * ema + 0.1 * loss`: the
                // new value is built from the old one and a graph-carrying term.
                let mut terms = Vec::new();
                sum_terms(value, &mut terms);
                if terms.len() < 2 || !terms.iter().any(|e| reads_name(e, &t)) {
                    return;
                }
                if let Some(other) = terms.iter().find(|e| !reads_name(e, &t) && checker.cx.carries_graph(e)) {
                    Self::check(checker, target, other, stmt.span);
                }
            }
            _ => {}
        }
    }

    fn check_expr(&self, expr: &Expr, checker: &mut Checker<'_>) {
        if checker.cx.in_test_module() {
            return;
        }
        if !checker.cx.torch_imported() || !checker.cx.in_training_loop() {
            return;
        }
        let Some((recv, method)) = expr.as_method_call() else { return };
        let Some((_, args, _)) = expr.as_call() else { return };
        let push = if checker.is_rust() { "push" } else { "append" };
        if let ([value], true) = (args, method == push) {
            Self::check(checker, recv, value, expr.span);
            return;
        }
        if checker.is_rust() {
            return;
        }
        // `meter.update(loss)` where the project's `update` does `self.sum += val`.
        let Some(f) = checker.cx.project_callee(expr) else { return };
        let positions = f.accumulates_args.clone();
        // A buffer the loop also empties through a method of the object
        // (`pi.put_data(...)` and `pi.train_net()` doing `self.data = []`):
        // its graphs are kept on purpose, to backpropagate through them at
        // the update (REINFORCE, actor-critic episode buffers).
        if let Some(r) = recv.dotted() {
            let buffers: Vec<String> = f.accumulates_into.iter().map(|a| format!("{}.{a}", r.as_str())).collect();
            if checker.cx.loop_empties(checker.module(), &buffers) {
                return;
            }
        }
        let method_name = f.qualname.rsplit('.').take(2).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join(".");
        for i in positions {
            let Some(value) = args.get(i) else { continue };
            let cx = checker.cx;
            let Some(acc_name) = recv.dotted() else { return };
            if cx.qualified_name(recv).is_some() || !cx.outlives_training_iteration(&acc_name) || !cx.carries_graph(value) {
                continue;
            }
            let value_text = checker.text(value.span).to_string();
            let part = Self::detach_text(checker, value);
            let help = if part == value_text {
                format!("pass `{value_text}.item()` (or `{value_text}.detach()`) so each step's graph can be freed")
            } else {
                format!("pass `{part}.item()` (or `{part}.detach()`) in it so each step's graph can be freed")
            };
            let fix = Self::fix(checker, value);
            Self::report(
                checker,
                Self::META
                    .diagnostic(
                        expr.span,
                        format!("`{method_name}` accumulates `{value_text}` into `{acc_name}` with its autograd graph across training iterations"),
                    )
                    .with_help(help),
                fix,
            );
            return;
        }
    }
}

/// The terms of a sum (`a + b * c - d` -> `a`, `b * c`, `d`).
fn sum_terms<'e>(e: &'e Expr, out: &mut Vec<&'e Expr>) {
    match &e.kind {
        ExprKind::BinOp { left, op: BinOp::Add | BinOp::Sub, right } => {
            sum_terms(left, out);
            sum_terms(right, out);
        }
        _ => out.push(e),
    }
}

/// Whether a term reads `name` outside any call (`0.9 * ema`, `ema`).
fn reads_name(e: &Expr, name: &str) -> bool {
    if e.dotted().as_deref() == Some(name) {
        return true;
    }
    match &e.kind {
        ExprKind::BinOp { left, right, .. } => reads_name(left, name) || reads_name(right, name),
        ExprKind::Unary { operand: x, .. } => reads_name(x, name),
        _ => false,
    }
}

/// Whether a later statement of the block that holds `value`'s statement
/// calls `backward()` on the sum `acc` itself, unconditionally and
/// without keeping the graph (`retain_graph`).
fn sum_backpropagated(value: &Expr, acc: &str, checker: &Checker<'_>) -> bool {
    let module = checker.module();
    let Some((block, at)) = module.tree.owner(value.id).and_then(|stmt| module.block_of(stmt)) else { return false };
    let rest = &block[at + 1..];
    let mut retains = false;
    for s in rest {
        s.for_each_expr(|e| retains = retains || e.any(&mut |x| x.keyword("retain_graph").is_some()));
    }
    !retains && memlint_semantic::facts::surely_backpropagates(rest, acc)
}

/// Whether a later statement of the loop body that holds `value`'s
/// statement calls `backward()` on `root` unconditionally.
fn backward_follows(value: &Expr, root: &str, checker: &Checker<'_>) -> bool {
    let module = checker.module();
    let Some(stmt) = module.tree.owner(value.id) else { return false };
    let body = match module.tree.parent(stmt).and_then(|p| module.stmt(p)).map(|s| &s.kind) {
        Some(StmtKind::For { body, .. } | StmtKind::While { body, .. }) => body.as_slice(),
        _ => return false,
    };
    match module.block_of(stmt) {
        Some((block, at)) if std::ptr::eq(block, body) => memlint_semantic::facts::surely_backpropagates(&block[at + 1..], root),
        _ => false,
    }
}
