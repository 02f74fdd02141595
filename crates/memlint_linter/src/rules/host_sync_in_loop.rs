use memlint_semantic::api::{nn, OOM_EXCEPTIONS};
use memlint_semantic::ir::{Expr, ExprKind, Stmt, StmtKind, Words};
use memlint_semantic::{HostRead, Role};

use crate::{declare_rule, Checker, Rule, RuleMeta};

declare_rule! {
    /// ## What it does
    /// Flags the first read of a tensor's value back to the host in each
    /// training step (one finding per loop: once the host has waited for
    /// the device, the reads that follow in the step wait for little): `.item()`, `.tolist()`, `.numpy()`, `.cpu()`, `float(t)` /
    /// `int(t)` of a loss or model output, `torch.cuda.synchronize()`,
    /// `print()` of a device tensor or of an f-string that formats one
    /// (`print(f"loss {loss}")`), a Python `if`/`while` test on a device
    /// tensor (`if torch.isnan(loss).any():`, `if loss < best:`: `bool()`
    /// of a tensor reads it back), reads inside f-strings
    /// (`pbar.set_description(f"{loss.item():.3f}")`), a metrics logger
    /// handed a device tensor (`writer.add_scalar("loss", loss, step)`,
    /// `wandb.log({"loss": loss})`: they convert it on the host), and
    /// tch's `double_value`, `int64_value`, `f64::try_from(&t)`,
    /// `Vec::<f32>::try_from(&t)` and
    /// `t.to(Device::Cpu)` / `t.to_device(Device::Cpu)`. It reports them in
    /// the body of a training loop (one iteration of which calls
    /// `backward()`, or tch's `opt.backward_step(&loss)`), and in a loop over a
    /// model's parameters in step code (a helper that logs or clips
    /// gradients): there the read runs once per parameter, every step.
    /// Only files of programs that run on a GPU (they mention `cuda`) are
    /// checked, and step helpers over the parameters in a module of their
    /// own when the run moves its batches to a GPU (`commons.clip_grad_value_`
    /// called by `train.py`); a Rust file may get its device from another file and is
    /// checked unless it names only the CPU (`Device::Cpu`,
    /// `kind::FLOAT_CPU`, and no move to the CPU). A read of a loader's
    /// batch that the function never moves to a device (a CPU tensor) is
    /// not reported.
    ///
    /// A step that copies its input to the device with a blocking copy
    /// every iteration (also in a `try` body, in the GPU arm of `if
    /// torch.cuda.is_available(): ... else: ...`, or in both arms of an
    /// `if`/`else`) (`x.to(device)`,
    /// `x.cuda()`, `Variable(x).cuda()` or
    /// `x.type(torch.cuda.FloatTensor)` or `x.type(dtypeFloat)` with
    /// `dtypeFloat` bound to one, without `non_blocking=True`, of what
    /// the loop draws (also its parts: `batch.text`, `xs =
    /// batch.narrow(...)`, `{k: v.to(device) for k, v in batch.items()}`,
    /// `map(lambda t: t.to(device), batch)`),
    /// of a value computed from it on the host (`(label - 1).to(device)`,
    /// `transform(tokenize(text)).to(device)`),
    /// of `next(it)`, of host data the loop's indices pick
    /// (`feats[batch[0]].to(device)`), of a list of them a helper moves item
    /// by item (`utils.cuda([imgs, z])`; a helper that moves a batch's items
    /// in place and returns it, `batch[k] = batch[k].to(device)`) or of a
    /// tensor built on the host; in
    /// tch, a batch iterator moved with `.to_device(device)`), that makes
    /// host data a device tensor (`torch.tensor(obs, device=device)`,
    /// `x.new_tensor(obs)`), that steps AMP's `GradScaler`
    /// (`scaler.step(optimizer)` reads its inf check back every step), or
    /// that calls a project function which waits for the device on each call
    /// (it copies host data to the device that way, or reads a value back,
    /// outside any `if`, or calls a function that does, or hands a value
    /// built on the host to a helper that moves it: `sample()` returning
    /// `to_gpu(torch.tensor(seq))`; also the `forward` of a project module
    /// instance it calls, `criterion(out, y)` with `criterion = SSDLoss()`,
    /// or `self.model(x)` with `self.model = model` in `__init__` and every
    /// `Trainer(model, ...)` of the run giving one class, its submodules'
    /// `forward`s and the classes a factory function returns included), that
    /// runs an op whose result's size depends on the values
    /// (`x.nonzero()`, `torch.unique(x)`, a mask read `x[x > 0]`, there or
    /// in such a helper), that indexes a tensor with indices drawn on the
    /// host (`states[np.random.choice(n, b)]`, a host tensor of them,
    /// `y[torch.from_numpy(np.random.choice(n, b))]`, `torch.randint(...)`
    /// without `device=` and what the host computes from it, the index batches of
    /// `for idx in DataLoader(range(n), b):`, or hands a slice of a host
    /// permutation to a step function), or that passes the model a part of
    /// the batch it never moves while it moves others
    /// (`model(image, caption)` with only `image` moved: the model copies
    /// the rest itself) or writes one into a tensor (`bank[a:b] = idx`,
    /// a device buffer refilled by `im_data.resize_(...).copy_(data[0])`),
    /// is not
    /// reported: PyTorch waits for the stream after such a copy, so the
    /// host already waits for the device once per step, and a read adds
    /// only the overlap of the host's work before the next copy (loading
    /// the next batch: ML302 is the advice when that is slow). Pin the
    /// loader and copy with `non_blocking=True` first; the read then is
    /// the step's only wait, and it is reported. A read once per parameter
    /// is reported either way, unless each iteration of the loop over
    /// parameters copies a value back to the device with a blocking copy
    /// (`param.data -= lr * mean.cuda()` after a host-side all-reduce of
    /// `param.grad.cpu()`): there the read is a leg of a round trip the
    /// loop makes anyway.
    ///
    /// ## Why is this bad?
    /// CUDA runs kernels asynchronously: the Python loop normally runs
    /// ahead, queuing the next step's work while the GPU computes. A read
    /// back to the host waits until every queued kernel has finished, so the
    /// GPU then idles while Python loads the next batch and launches its
    /// kernels again. Once per step this costs the launch latency of the
    /// step; once per parameter (a grad-norm helper with `.item()` on each
    /// of hundreds of tensors) it serialises the step. On the CPU it costs
    /// almost nothing, which is why it goes unnoticed.
    ///
    /// ## Example
    /// ```python
    /// loader = DataLoader(dataset, batch_size=256, num_workers=4, pin_memory=True)
    /// for step, (x, y) in enumerate(loader):
    ///     x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
    ///     loss = criterion(model(x), y)
    ///     loss.backward()
    ///     optimizer.step()
    ///     optimizer.zero_grad()
    ///     running_loss += loss.item()
    /// ```
    ///
    /// In Rust with `tch` (the data already on the device):
    /// ```rust,ignore
    /// let (xs, ys) = (xs.to_device(device), ys.to_device(device));
    /// for step in 1..=steps {
    ///     let noisy = &xs + xs.randn_like() * 0.1;
    ///     let loss = net.forward(&noisy).cross_entropy_for_logits(&ys);
    ///     opt.backward_step(&loss);
    ///     sum_loss += f64::try_from(&loss)?;
    /// }
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// running_loss = torch.zeros((), device=device)
    /// for step, (x, y) in enumerate(loader):
    ///     x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
    ///     loss = criterion(model(x), y)
    ///     loss.backward()
    ///     optimizer.step()
    ///     optimizer.zero_grad()
    ///     running_loss += loss.detach()
    ///     if step % log_every == 0:
    ///         print(running_loss.item() / log_every)
    ///         running_loss.zero_()
    /// ```
    /// ```rust,ignore
    /// let mut sum_loss = Tensor::zeros([], (Kind::Float, device));
    /// for step in 1..=steps {
    ///     let noisy = &xs + xs.randn_like() * 0.1;
    ///     let loss = net.forward(&noisy).cross_entropy_for_logits(&ys);
    ///     opt.backward_step(&loss);
    ///     sum_loss += loss.detach();
    /// }
    /// println!("loss {}", f64::try_from(&sum_loss)?);
    /// ```
    ///
    /// ## Known false positives
    /// Code written for PyTorch before 0.4 (`Variable(x, volatile=True)`,
    /// `loss.data[0]`, or a project whose README declares such a PyTorch)
    /// is not checked: it does not run on a current torch as written.
    /// A test that compares a validation value with the best so far (`if
    /// val_loss < best_loss:`: keeping the best model, early stopping) is
    /// not reported, even where each iteration is one full-batch step: the
    /// choice needs the value each time it is measured.
    /// A read under a logging condition (`if step % k == 0:`, also after
    /// one in an `and`: `if step % k == 0 and torch.isnan(loss):`) or a user
    /// option (`if args.verbose:`, or an option of the class that is off
    /// by default, `if self.individual:`), nor one in a recovery branch
    /// that runs when values go bad (`if torch.isnan(k).any():`), nor one in an
    /// environment-interaction loop (reinforcement learning: the action
    /// goes to a CPU environment every step, so the step synchronises
    /// anyway), nor one in an `except` handler, nor one in a top-level loop
    /// of at most 50 steps counted in the code that trains in its own body
    /// (`for i in range(grad_steps):` with `grad_steps = 30`: a demo
    /// optimizing a latent waits that many times at most; in a function,
    /// which a caller may run every step, it is reported). A loop that decides every
    /// iteration, on a value read from the device, whether to leave (a
    /// convergence test `if (m - prev).norm() < tol: break`, an abort on
    /// a diverged loss `if math.isnan(loss.item()): sys.exit(1)`, a
    /// `while value < 0.99:` on `value = -out.item()` of the body) must
    /// wait there, and none of its reads is reported. A read a
    /// data-dependent branch tests that does not leave the loop is
    /// reported: move it under an interval when it allows. A loop that
    /// trains leaf tensors built on the host and never moved (`w =
    /// torch.rand(1, 1, requires_grad=True)`, `P =
    /// nn.Parameter(torch.FloatTensor(n, m))`) runs on the CPU and is not
    /// reported, nor is a helper's loop when the step calls it only under a
    /// logging or debugging condition (`if self.debug_mode:`).
    /// Benchmarking and profiling code (a function or file named like
    /// `bench`, `profile`, `timing`) synchronises on purpose and is not
    /// reported, nor is a loop that times its steps and calls
    /// `torch.cuda.synchronize()` every step outside any `if` (also inside
    /// a `try`) to do it (it reads `time.time()`/`time.perf_counter()` or
    /// a CUDA event's `elapsed_time`, or iterates a logger that
    /// times each batch, `metric_logger.log_every(loader, ...)`, as many
    /// research repositories do): there the host waits for the device on
    /// purpose and other reads cost nothing more. A `synchronize()` every
    /// step with no timing is reported. Nor is a loop that redraws a
    /// notebook's output every step (`display.clear_output(wait=True)`): a
    /// live display of the training, whose reads are the point. Nor is a
    /// loop that draws batches from an iterable (not a `range`) and moves
    /// nothing to the device in its body: its batches arrive on the device
    /// from the iterable (a legacy torchtext iterator built with
    /// `device=`) or through a helper, and whether that copy already waits
    /// cannot be seen; so is a loop over steps that draws its batch by hand
    /// (`batch = next(train_iterator)` of a loader's iterator) and moves
    /// nothing itself. A Python `range` loop that trains on the same
    /// inputs every iteration (full-batch training, `out = model(X_train)`
    /// with `X_train` bound before the loop, or converted again from it in
    /// the loop, `inputs = torch.from_numpy(x_train)`, or a demo's steps on
    /// one fixed batch) is not reported: one iteration is one epoch, and a read per
    /// iteration is the per-epoch log (in tch too: `for epoch in
    /// 1..=epochs { net.forward(&xs) ... }` with `xs` bound before it). Nor is a step that already waits every iteration at a
    /// blocking copy of the batch it draws, drawn by hand too (an item of a
    /// list at the loop's counter, `X_train[k].to(device)`, or what a plain
    /// function of the project returns, `x, y = sample_batch(data)` then
    /// `x.cuda()`), or at a call that blocks the host: a NCCL
    /// `dist.barrier()`, Horovod's blocking `hvd.allreduce` (in a helper
    /// too), apex's `amp.scale_loss` (it reads its overflow flag back);
    /// also when such a call runs under a test of the run's configuration
    /// rather than of the iteration (`if args.half:` around
    /// `amp.scale_loss`, `if sync: dist.barrier()`, `if num_gpus == 1:`
    /// around the batch's blocking copy: no call, no name the
    /// loop binds, not an interval): in that configuration the step waits
    /// anyway, and which one a run uses is not known. Under an interval
    /// (`if i % 100 == 0: dist.barrier()`) the read is still reported.
    /// A Rust method called on a value of the project's own
    /// type (`model.train_loss(...)`) is not followed, and leaves a read
    /// reported.
    /// `float(t)`/`int(t)` are reported only for a loss or model output;
    /// `.cpu()` of a tensor that lives on the CPU costs nothing but is
    /// reported in a GPU program. `.cpu()` of a model used as one in the
    /// same statement (`m.cpu().parameters()`, `m.cpu().state_dict()`: a
    /// model shipped over RPC or saved) is not a read and is not reported.
    ///
    /// ## References
    /// - [CUDA semantics: asynchronous execution](https://pytorch.org/docs/stable/notes/cuda.html#asynchronous-execution)
    /// - [Performance tuning guide: avoid unnecessary CPU-GPU synchronization](https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html#avoid-unnecessary-cpu-gpu-synchronization)
    pub struct HostSyncInLoop {
        code: "ML305",
        name: "host-sync-in-loop",
        severity: Info,
        default: false,
        languages: [Python, Rust],
    }
}

impl Rule for HostSyncInLoop {
    fn meta(&self) -> &'static RuleMeta {
        &Self::META
    }

    fn check_expr(&self, expr: &Expr, checker: &mut Checker<'_>) {
        if !checker.in_torch_program() {
            return;
        }
        let Some(sync) = sync_of(expr, checker) else { return };
        if checker.cx.reads_host_batch(expr) || moves_a_module(expr, checker) {
            return;
        }
        report_read(expr.span, &sync, false, checker);
    }

    /// A Python `if`/`while` whose test is a device tensor reads it back
    /// (`bool()` of it) to decide.
    fn check_stmt(&self, stmt: &Stmt, checker: &mut Checker<'_>) {
        let (StmtKind::If { test, .. } | StmtKind::While { test, .. }) = &stmt.kind else { return };
        if !checker.in_torch_program() {
            return;
        }
        let Some(read) = checker.cx.condition_read(test) else { return };
        // `if val_loss < best_loss:`: keeping the best model so far, or
        // early stopping, needs the value each time it is measured.
        if compares_with_best(test) {
            return;
        }
        let text = short_text(read, checker).unwrap_or("the condition").to_string();
        report_read(read.span, &text, true, checker);
    }
}

/// Reports the read of `sync` at `span`, when it runs every training step
/// (or once per parameter in step code) and nothing excuses it; one
/// finding per loop.
fn report_read(span: memlint_diagnostics::Span, sync: &str, condition: bool, checker: &mut Checker<'_>) {
    let cx = checker.cx;
    let per_parameter = cx.in_parameter_loop() && (cx.in_step_code() || cx.in_training_step());
    let per_step = cx.in_training_step();
    if !(per_step || per_parameter)
        || cx.guarded_by_interval()
        || cx.guarded_by_option()
        || cx.in_rarely_taken_branch()
        || cx.guarded_by_logging_condition()
        || cx.in_interaction_loop()
        || cx.in_handler_catching(OOM_EXCEPTIONS)
        || matches!(cx.function_role(), Role::Test | Role::Setup)
    {
        return;
    }
    // Benchmarking and profiling code synchronises on purpose, to time.
    // A training loop of a few steps counted in the code (`for i in
    // range(grad_steps):` with `grad_steps = 30`, a demo optimizing a
    // latent) waits at most that many times.
    if cx.in_benchmark_code() || cx.counted_training_steps().is_some_and(|(_, k)| k <= memlint_semantic::facts::DEMO_STEPS) {
        return;
    }
    // Code for torch 0.3 (`volatile=True`, `loss.data[0]`) reads every
    // loss back each step and does not run on a current torch.
    if checker.written_for_volatile_torch() {
        return;
    }
    // A GPU program: the file says `cuda` (Rust: unless it names only
    // the CPU; tch code may pick its device in another file), or, for a
    // step's helper over the parameters in a module of its own (vits'
    // `commons.clip_grad_value_`), the run moves its batches to one.
    let helper_of_a_gpu_run = per_parameter && cx.function_role() == Role::Step && cx.index().moves_batches();
    if !cx.file_words().contains(Words::CUDA) && !helper_of_a_gpu_run {
        return;
    }
    // One finding per loop: after the first read in an iteration the
    // device has caught up, and the reads that follow wait for little.
    let Some(loop_id) = (if per_parameter { cx.parameter_loop() } else { cx.training_step_loop() }) else { return };
    let key = format!("{loop_id:?}");
    if !checker.file_memo().first("ML305-loop", &key) {
        return;
    }
    // A loop that times its steps and waits for the device on purpose
    // to do it: its reads cost nothing more.
    let deliberate = checker
        .file_memo()
        .get_or("ML305-synchronized-loop", &key, || Some(checker.module().stmt(loop_id).is_some_and(|s| cx.times_every_iteration(s))))
        .is_some_and(|d| *d);
    if deliberate {
        return;
    }
    // A step that copies its input to the device with a blocking copy
    // already waits for the device there every iteration: another read
    // costs little more (once per parameter is still many waits). A loop
    // that redraws a notebook's output every step shows its reads live.
    let waits = !per_parameter
        && checker
            .file_memo()
            .get_or("ML305-waiting-loop", &key, || {
                let module = checker.module();
                let scope = module.enclosing_function_body(loop_id).unwrap_or(&module.body);
                Some(module.stmt(loop_id).is_some_and(|s| {
                    cx.copies_to_device_every_iteration(s)
                        || cx.waits_through_its_data(s, scope)
                        || cx.trains_on_the_host(s, scope)
                        || cx.redraws_every_iteration(s)
                        || cx.decides_exit_every_iteration(s)
                        || cx.draws_data_it_never_moves(s)
                        // Full-batch training: an iteration is an epoch.
                        || cx.trains_on_fixed_inputs(s)
                }))
            })
            .is_some_and(|c| *c);
    if waits {
        return;
    }
    // Once per parameter, where each iteration copies a value back to the
    // device (a host-side all-reduce of each gradient): the reads are legs
    // of a round trip the loop makes anyway.
    let round_trip = per_parameter
        && checker
            .file_memo()
            .get_or("ML305-round-trip", &key, || Some(checker.module().stmt(loop_id).is_some_and(|s| cx.moves_back_every_iteration(s))))
            .is_some_and(|r| *r);
    if round_trip {
        return;
    }
    let rust = checker.is_rust();
    let (message, help) = if per_parameter {
        (
            format!("`{sync}` waits for the device once per parameter, every training step"),
            if rust {
                "reduce on the device (`Tensor::stack(&norms, 0).sum(Kind::Float)`) and read the one value back".to_string()
            } else {
                "reduce on the device (`torch.stack([...]).sum()`, `torch.nn.utils.clip_grad_norm_` returns the total norm as a tensor) and read one value, under a logging interval".to_string()
            },
        )
    } else if condition {
        (
            format!("`{sync}` is read back to decide the branch: the host waits for the device every training step"),
            "test it every k steps (`if step % check_every == 0 and ...`), or keep the choice on the device (`torch.where`, a masked update)".to_string(),
        )
    } else if sync.ends_with("synchronize()") {
        (
            format!("`{sync}` makes the host wait for the device every training step"),
            "remove it from the step, or run it only while timing (under `if profiling:` or a logging interval)".to_string(),
        )
    } else {
        (
            format!("`{sync}` waits for the device every training step"),
            if rust {
                "keep the value on the device (`total += loss.detach()`) and read it back every k steps (`if step % log_every == 0`)".to_string()
            } else {
                "accumulate on the device (`total += loss.detach()`) and read it back every k steps, under `if step % log_every == 0:`".to_string()
            },
        )
    };
    checker.report(HostSyncInLoop::META.diagnostic(span, message).with_help(help));
}

/// How `call` reads a value back to the host, as the message names it.
/// Whether the value of `call` (`m.cpu()`) is used as a module in its
/// statement (`m.cpu().parameters()`, `m.cpu().state_dict()`): a model
/// moved to the host, to ship or save it, not a tensor read back.
fn moves_a_module(call: &Expr, checker: &Checker<'_>) -> bool {
    checker.statement_has(call, &mut |x| x.as_method_call().is_some_and(|(recv, m)| recv.id == call.id && nn::MODULE_ONLY_METHODS.contains(&m)))
}

fn sync_of(call: &Expr, checker: &Checker<'_>) -> Option<String> {
    Some(match checker.cx.host_read(call)? {
        // The whole call when short (`loss.item()`), else the method.
        HostRead::Method(method) => {
            short_text(call, checker).unwrap_or_else(|| checker.text(func_tail(call, method, checker))).to_string()
        }
        HostRead::Convert(name) => short_text(call, checker).map_or_else(|| format!("{name}(...)"), str::to_string),
        HostRead::TryFrom(path) => format!("{path}(...)"),
        HostRead::Library(q) => format!("{q}()"),
        HostRead::Print => short_text(call, checker).unwrap_or("print(...)").to_string(),
        HostRead::Logged(name) => short_text(call, checker).map_or_else(|| format!("{name}(...)"), str::to_string),
    })
}

/// The source of `call` when it fits a message: one line, 40 bytes at most.
fn short_text<'a>(call: &Expr, checker: &'a Checker<'_>) -> Option<&'a str> {
    let text = checker.text(call.span);
    (text.len() <= 40 && !text.contains('\n')).then_some(text)
}

/// The span from a method call's `.method(` to its end (`.item()`).
fn func_tail(call: &Expr, method: &str, checker: &Checker<'_>) -> memlint_diagnostics::Span {
    let text = checker.text(call.span);
    match text.rfind(&format!(".{method}(")) {
        Some(i) => memlint_diagnostics::Span::new(call.span.start + i as u32, call.span.end),
        None => call.span,
    }
}

/// Whether a test compares a validation value with a best-so-far one
/// (`val_loss < best_loss`, `valid_acc > self.best_acc - min_delta`): model
/// selection or early stopping. A training loss compared with the best
/// training loss (`if loss < best:` each step) is not.
fn compares_with_best(test: &Expr) -> bool {
    let ExprKind::Compare { left, comparators, .. } = &test.kind else { return false };
    let names = |pred: &dyn Fn(&str) -> bool| {
        std::iter::once(left.as_ref()).chain(comparators.iter()).any(|e| {
            e.any(&mut |x| {
                x.dotted().is_some_and(|d| {
                    let last = d.as_str().rsplit('.').next().unwrap_or_default();
                    memlint_semantic::resolve::words(last).iter().any(|w| pred(w))
                })
            })
        })
    };
    names(&|w| w == "best") && names(&|w| matches!(w, "val" | "valid" | "validation" | "test" | "eval" | "dev"))
}
