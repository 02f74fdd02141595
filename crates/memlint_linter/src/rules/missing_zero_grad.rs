use memlint_semantic::ir::Stmt;
use memlint_semantic::step::{is_optimizer_name, StepKind, StepKinds};

use crate::{declare_rule, Checker, Rule, RuleMeta};

declare_rule! {
    /// ## What it does
    /// Flags a loop that calls `backward()` and steps an optimizer but never
    /// zeroes the gradients: no `zero_grad()` (on the optimizer or the
    /// model) and no `p.grad = None` runs anywhere in the loop, itself or in
    /// a project helper the loop calls (any file of the run). Zeroing may be
    /// at the top or the bottom of the step, or under the step's guard in an
    /// accumulation loop. `backward()` and `step()` in per-batch helpers
    /// count. Each optimizer is checked on its own: in a GAN loop that
    /// zeroes only the generator's optimizer, the discriminator's
    /// `opt_d.step()` is reported. A weight average stepped beside the
    /// optimizer is none (`ema_optimizer.step()`, `swa_optimizer`, or an
    /// instance of a project class that is not a torch optimizer): it has
    /// no gradients to clear.
    ///
    /// ## Why is this bad?
    /// `backward()` adds into `.grad`; it never overwrites it. Without a
    /// zeroing, the gradient at step `k` is the sum of the gradients of all
    /// `k` steps so far, so every update applies every earlier gradient
    /// again and training diverges or crawls. PyTorch raises nothing.
    ///
    /// ## Example
    /// ```python
    /// optimizer.zero_grad()
    /// for x, y in loader:
    ///     loss = criterion(model(x), y)
    ///     loss.backward()
    ///     optimizer.step()
    /// ```
    ///
    /// ```rust,ignore
    /// for (x, y) in batches.iter() {
    ///     let loss = net.forward(x).mse_loss(y, tch::Reduction::Mean);
    ///     loss.backward();
    ///     opt.step();
    /// }
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// for x, y in loader:
    ///     optimizer.zero_grad()
    ///     loss = criterion(model(x), y)
    ///     loss.backward()
    ///     optimizer.step()
    /// ```
    ///
    /// ```rust,ignore
    /// for (x, y) in batches.iter() {
    ///     let loss = net.forward(x).mse_loss(y, tch::Reduction::Mean);
    ///     opt.backward_step(&loss); // zero_grad, backward, step
    /// }
    /// ```
    ///
    /// ## Known false positives
    /// An optimizer is recognised by how it was built (`torch.optim.*`) or
    /// by its name (`optimizer`, `opt_d`, `self.optim`); a step through a
    /// wrapper that zeroes for you under another name (`engine.step()`) is
    /// not an optimizer step, and `optimizer.step(closure)` is not checked
    /// (the closure zeroes). Zeroing in code the run does not include, or
    /// reached by dynamic dispatch, is not seen, and a helper that zeroes
    /// some optimizer is taken to zero the one stepped.
    /// Test modules are not checked, nor a benchmark of the step: a loop
    /// that trains on the same inputs every iteration in a function named
    /// for a test, benchmark or profile that reads a clock (`def
    /// test_attention(): start = time.time(); for i in range(1000): ...`),
    /// whose weights are thrown away. Nor is a loop that leaves after a few
    /// steps (`if ii == 3: break`, at most 16), a notebook's timing demo
    /// or a smoke run. Nor is the step of an optimizer a function is given
    /// in a loop that zeroes a module-level one (`opt.zero_grad()` ...
    /// `optimizer.step()` in `def train_model(model, optimizer, data)`):
    /// the callers may pass that same `opt`.
    ///
    /// ## References
    /// - [Zeroing out gradients in PyTorch](https://pytorch.org/tutorials/recipes/recipes/zeroing_out_gradients.html)
    /// - [torch.optim.Optimizer.zero_grad](https://pytorch.org/docs/stable/generated/torch.optim.Optimizer.zero_grad.html)
    pub struct MissingZeroGrad {
        code: "ML105",
        name: "missing-zero-grad",
        severity: Error,
        default: true,
        languages: [Python, Rust],
    }
}

impl Rule for MissingZeroGrad {
    fn meta(&self) -> &'static RuleMeta {
        &Self::META
    }

    fn check_loop(&self, stmt: &Stmt, body: &[Stmt], checker: &mut Checker<'_>) {
        let cx = checker.cx;
        // A loop that leaves after a few steps (`if i == 3: break`): a
        // timing or smoke run whose updates are thrown away.
        if !checker.in_grad_code() || memlint_semantic::facts::stops_after_a_few(body) {
            return;
        }
        let events = checker.loop_events();
        let backward = events.iter().any(|e| e.kinds().contains(StepKinds::BACKWARD));
        if !backward {
            return;
        }
        // A benchmark of the step (`test_attention()` timing 1000 steps on
        // one constant batch): its weights are thrown away.
        let module = checker.module();
        let function = module.tree.enclosing_function(stmt.id).and_then(|f| match &module.stmt(f)?.kind {
            memlint_semantic::ir::StmtKind::Function(f) => Some(&**f),
            _ => None,
        });
        if function.is_some_and(|f| cx.benchmarks_the_step(stmt, f)) {
            return;
        }
        // Zeroing that covers every optimizer: on a model, a parameter's
        // `.grad`, or inside a helper.
        let zeroes_all = events.iter().any(|e| match e.kind {
            StepKind::GradReset => true,
            StepKind::ZeroGrad => !e.receiver.as_ref().is_some_and(|r| is_optimizer_name(r, cx)),
            StepKind::Helper(k) => k.contains(StepKinds::ZERO),
            _ => false,
        });
        if zeroes_all {
            return;
        }
        let mut zeroed: Vec<&str> =
            events.iter().filter(|e| e.kind == StepKind::ZeroGrad).filter_map(|e| e.receiver.as_deref()).collect();
        zeroed.sort_unstable();
        zeroed.dedup();
        // `opt.zero_grad()` of a module-level optimizer in a function that
        // steps the `optimizer` it is given: the caller may well pass that
        // same `opt` (a notebook's `train_model(model, opt, ...)`).
        let is_param = |n: &str| function.is_some_and(|f| f.params.iter().any(|p| p.name == n));
        let bound_here = |n: &str| is_param(n) || function.is_some_and(|f| f.locals.binary_search_by(|x| x.as_str().cmp(n)).is_ok());
        let zeroes_a_global = function.is_some() && zeroed.iter().any(|z| !z.contains('.') && !bound_here(z));
        for e in events.iter().filter(|e| e.is_direct()) {
            let what = match e.kind {
                StepKind::OptimizerStep { closure: false } | StepKind::ScalerStep => match &e.receiver {
                    Some(r) if zeroed.contains(&r.as_str()) => continue,
                    Some(r) if zeroes_a_global && is_param(r) => continue,
                    Some(r) => format!("`{r}`"),
                    None if !zeroed.is_empty() => continue,
                    None => "the optimizer".to_string(),
                },
                StepKind::Helper(k) if k.contains(StepKinds::OPT_STEP) && zeroed.is_empty() => {
                    format!("`{}` steps an optimizer and", checker.text(e.span))
                }
                _ => continue,
            };
            let message = if zeroed.is_empty() {
                if what.ends_with(" and") {
                    format!("{what} nothing in this loop zeroes the gradients: every step adds in all earlier gradients")
                } else {
                    format!("{what} is stepped but nothing in this loop zeroes the gradients: every step adds in all earlier gradients")
                }
            } else {
                format!(
                    "{what} is stepped but only `{}` runs in this loop: its gradients add up across steps",
                    zeroed.iter().map(|z| format!("{z}.zero_grad()")).collect::<Vec<_>>().join("`, `")
                )
            };
            let opt = e.receiver.clone().unwrap_or_else(|| "optimizer".to_string());
            checker.report(
                Self::META
                    .diagnostic(e.span, message)
                    .with_help(if checker.is_rust() {
                        format!("call `{opt}.zero_grad()` once per step, before `backward()` or after `{opt}.step()`, or use `{opt}.backward_step(&loss)`, which zeroes")
                    } else {
                        format!("call `{opt}.zero_grad()` once per step, before `backward()` or after `{opt}.step()`")
                    }),
            );
        }
    }
}

