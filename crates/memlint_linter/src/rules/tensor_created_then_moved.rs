use memlint_semantic::api::{
    classify, computed_from, is_filling_method, is_inplace_method, is_legacy_cpu_constructor, nn, Callee, Event, Receiver,
};
use memlint_semantic::ir::{Arm, BoolOpKind, CmpOp, Expr, ExprKind, Literal, Stmt, StmtKind, UnaryOp};
use memlint_semantic::Role;

use crate::{declare_rule, Checker, Rule, RuleMeta};

declare_rule! {
    /// ## What it does
    /// Flags a tensor made by a factory on the host and moved to an
    /// accelerator at once, where that runs again and again: in a loop, or
    /// in step code (a `forward`, a training or evaluation step, the
    /// `__init__` of a plain class that step code builds, a mask helper
    /// such as `TriangularCausalMask(B, L, device=x.device)` in `forward`):
    /// `torch.zeros(n).cuda()`, `torch.randn(b, d).to(device)`,
    /// `torch.arange(t).to(x.device)`, `torch.FloatTensor(b,
    /// n).zero_().cuda()` (a legacy constructor given sizes, also read
    /// from a tensor, `torch.BoolTensor(x.size())`, and filled), also when it is shaped or filled on
    /// the host on the way (`torch.arange(t).unsqueeze(0).repeat(b,
    /// 1).to(device)`, or computed on the host from it, `torch.exp(-log(p) *
    /// torch.arange(h) / h).to(t.device)`, a sinusoidal timestep embedding,
    /// or compared there, `(torch.rand(x.shape) < p).to(x.device)`, a random
    /// mask; not when pinned first, `.pin_memory().to(...)`), or
    /// bound to a name by the statement just before one that moves it (or
    /// just before an `if` that tests for the device and moves it there,
    /// after moves of other names: `if USE_CUDA: x = x.cuda(); outs =
    /// outs.cuda()`) and
    /// rebinds or returns the name (`h = torch.zeros(n)` then `h =
    /// h.to(device)`, also through in-place ops, `onehot =
    /// onehot.scatter_(1, y, 1).to(device)`, or the old `Variable(z).to(device)`, also in a tuple of moves, `X, Z = X.to(device),
    /// Z.to(device)`, maybe after constants written at fixed places, `h[:,
    /// 0] = 4`, and cast on the way, `.to(device).to(dtype)`; `hidden = torch.zeros(...)`, `cell =
    /// torch.zeros(...)`, then `return hidden.to(device), cell.to(device)`),
    /// or returned by a project helper of a few lines that draws it
    /// (`create_noise(b, z).to(device)`, with `return torch.rand(b, z) * 2
    /// - 1`).
    /// The factories are `zeros`, `ones`,
    /// `empty`, `full`, `rand`, `randn`, `randint`, `randperm`, `arange`,
    /// `linspace`, `eye` and `normal` given a size (`torch.normal(0, 1,
    /// size=(b, d))`); the move is `.cuda()` or `.to(...)` with a
    /// device (a `"cuda..."` string, `torch.device(...)`, `x.device`, or a
    /// name like `device`/`dev`), or a call of a project helper that
    /// returns its argument moved (`to_var(x)`, `get_torch_variable(arg)`). In tch: `Tensor::zeros`, `randn`,
    /// `arange`... with `(kind, Device::Cpu)` or `kind::FLOAT_CPU`-style
    /// options, then `.to_device(d)` or `.to(d)` with `d` a `device`-named
    /// value, `Device::Cuda(i)`, `Device::cuda_if_available()` or
    /// `vs.device()`.
    /// Not reported in the methods of a module class nothing of the run
    /// builds (its name appears nowhere outside its own body, not even as
    /// a base or in a string) when the run holds code that builds other
    /// module classes outside any class and picks none by a computed name
    /// (`eval`, `importlib`, `getattr(models, name)`, Hydra): a class left
    /// over from an experiment never runs.
    ///
    /// ## Why is this bad?
    /// The tensor is allocated and filled on the host, then copied: two
    /// allocations, a host-side fill (for random tensors, the CPU
    /// generator), and a host-to-device copy that waits for pageable memory,
    /// every time the line runs. With `device=` the factory allocates and
    /// fills the tensor on the device directly. (The time this costs per
    /// step has not been measured by memprobe yet: it needs a GPU.)
    ///
    /// ## Example
    /// ```python
    /// for step in range(steps):
    ///     noise = torch.randn(batch, latent_dim).to(device)
    ///     fake = generator(noise)
    /// ```
    ///
    /// In Rust (tch), a factory whose options name the CPU, then moved:
    /// ```rust,ignore
    /// for _ in 0..steps {
    ///     let noise = Tensor::randn([batch, latent_dim], (Kind::Float, Device::Cpu)).to_device(device);
    /// }
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// for step in range(steps):
    ///     noise = torch.randn(batch, latent_dim, device=device)
    ///     fake = generator(noise)
    /// ```
    /// ```rust,ignore
    /// for _ in 0..steps {
    ///     let noise = Tensor::randn([batch, latent_dim], (Kind::Float, device));
    /// }
    /// ```
    /// A random factory on the device draws from the device's generator:
    /// the values of a seeded run change.
    ///
    /// ## Known false positives
    /// A `device` that is the CPU at run time makes the move a no-op (then
    /// `device=` is as good); a name the file binds to the CPU and to no
    /// other device (`DEVICE = torch.device("cpu")`, hard-coded in a
    /// course notebook) is not reported, nor is a move to the device of a
    /// loader's batch the function never moves (`.to(batch_y.device)` after
    /// `batch_y = batch_y.float()`: a copy from the CPU to the CPU). `torch.tensor(data)` and the `*_like`
    /// factories are not reported (nor code written for PyTorch before 0.4,
    /// `volatile=True` or `Variable(...)` with `loss.data[0]`, or
    /// `retain_variables=`, whose
    /// factories took no `device=`): the first copies from host data either
    /// way, the others follow their input's device. Nor is a random draw
    /// from a generator passed as `generator=` (seeded, on the host:
    /// drawing on the device would need a generator there). Nor is a factory given
    /// a literal `0` size (`torch.empty(0).to(device)`, the seed of a
    /// `torch.cat`): it has nothing to copy. Once-only code (module
    /// level, `__init__`, setup), a loop that neither iterates data nor
    /// runs a model in module-level code or in a function called only
    /// outside loops or once per epoch (a metric's loop over classes), or
    /// one there that shows a figure each iteration (`plt.subplots(...)`,
    /// `plt.show()`: ten pictures of samples in a notebook) or that counts
    /// a few iterations as a literal (`for i in range(10):`, at most 16:
    /// ten draws for a mean style; at module level also when it takes a
    /// step, a module's `__main__` self-test), code under an interval or logging test
    /// (`if step % 1000 == 0:`), code on a loop's first iteration only (`if
    /// i == 0:` on the counter of `enumerate(loader)` or `range(n)`: an
    /// accumulator set up on the first batch), code that runs once per epoch (in the
    /// epoch loop, outside the loop over batches), a cache built when it is
    /// missing (after `if self.cache is not None: return`, or under `if
    /// self.cache is None:`, also `if not self.cache or self.norm == None:`
    /// with an option of the object that keeps it) or rebuilt when a longer input than any before
    /// outgrows it (`if seq_len > self.max_position_embeddings:` around code
    /// that stores to `self` or calls `self.register_buffer`), unit tests and helpers named for drawing or
    /// showing results (`visualize_results`, `plot_samples`: once per
    /// epoch or report) are not reported. The `forward` of a custom
    /// `torch.autograd.Function` is not step code of its own (it runs where
    /// its `apply` is called, which is not followed): a factory there is
    /// reported only inside a hot loop. Nor is a tensor that two nested
    /// loops of the function then fill element by element (`scores[b, i] =
    /// self.score(...)`), or that a loop fills slot by slot from the parts
    /// of items of host data (`starts[k], labels[k] = dataset[i]`, each
    /// write a copy of its own): vectorising that loop is the fix, and it
    /// removes the line.
    /// Nor is code reached only once per epoch of a training loop
    /// (a decode helper of the validation run after each epoch, through any
    /// number of calls) outside a loop over data, unless a `for` loop over a
    /// `range` there runs a model each step (a diffusion sampler's
    /// denoising steps, hundreds per call). A loop over a few constants
    /// (`for w in ws_test:` with `ws_test = [0.0, 0.5, 2.0]`, a sample per
    /// guidance weight after each epoch) is neither an evaluation loop,
    /// whatever its name says, nor a loop of its own around the calls in
    /// it; nor is a few-step loop counted in the code (`for i in
    /// range(n_steps):` with `n_steps = 10`, `for sig in reversed([5.,
    /// 10., 20., 40.])` in a notebook's sampling cell), even one that runs
    /// a model each step, nor a loop that leaves after a few iterations
    /// (`if b >= 5: break`). An interval around a function
    /// that trains once per call (`if t % replay_frequency == 0:
    /// agent.learn(batch)`: its own `backward()` and optimizer step), or
    /// around a `backward()` of its own (a GAN's generator step under `if
    /// step % n_critic == 0:`), is a training cadence, not a logging
    /// interval: what it builds runs every training step. Nor is a branch a step
    /// never takes: the `else` of `if flag:` where the function sets the
    /// local `flag = 1` (or `True`) where it starts and never again. Nor is a branch a step
    /// rarely takes: under an option of the class that is off by default
    /// (`if self.individual:`, where `__init__` keeps `individual=False` as
    /// `self.individual`, or sets `self.stratified = False` itself, and
    /// nothing else in the class assigns it), the arm of `if mask is
    /// None:` (or `is not None`) that no call of the project takes, every
    /// one passing the argument or none (a call at module level outside
    /// any loop, run once, counts only when there is no other), or, in a
    /// module's `forward`, the arm an argument selects that only such one-off
    /// calls of an instance pass (`model(x, 1)` after `model = Net()`, a
    /// prediction after training), the arm of `if flag:` / `if not flag:`
    /// that no call takes where every call of the project gives a flag
    /// parameter the same literal or leaves its default (`reverse=True`
    /// from a parent's only call of a submodule; `if self.ln:` with
    /// `self.ln = ln` kept by `__init__` and every construction giving
    /// `ln` the same value; a submodule built by `Vision._from_config(cfg)`
    /// or `from_pretrained` is an instance of its class; an attribute built
    /// as one of two classes by a configuration test is called as the one
    /// whose `forward` takes the keywords passed, `reverse=True` naming the
    /// stochastic predictor, and a call both would take counts for neither), or under a test for
    /// NaN or infinite values (`if torch.isnan(k).any():`, a recovery
    /// path). A `def forward(self, x)` outside any class (a method pasted
    /// into a notebook cell to explain it) is not step code.
    ///
    /// ## Known false negatives
    /// A caller may turn an off-by-default option on for every step with a
    /// value that is not a literal (`Model(configs, individual=args.ind)`);
    /// the branch is still skipped. Given the literal `True` by every
    /// construction, it is not.
    ///
    /// ## References
    /// - [Tensor creation ops](https://pytorch.org/docs/stable/torch.html#creation-ops)
    /// - [CUDA semantics: best practices](https://pytorch.org/docs/stable/notes/cuda.html#best-practices)
    pub struct TensorCreatedThenMoved {
        code: "ML306",
        name: "tensor-created-then-moved",
        severity: Info,
        default: false,
        languages: [Python, Rust],
    }
}

impl Rule for TensorCreatedThenMoved {
    fn meta(&self) -> &'static RuleMeta {
        &Self::META
    }

    fn check_expr(&self, expr: &Expr, checker: &mut Checker<'_>) {
        let cx = checker.cx;
        if !checker.in_torch_program() {
            return;
        }
        // The move: `x.cuda()`, `x.to(device)`, or a project helper that
        // moves its argument (`to_var(x)`, `self.get_torch_variable(z)`).
        let moved = match expr.as_method_call() {
            Some((recv, method)) => {
                let callee = Callee::Method { name: method, receiver: Receiver::Tensor, receiver_is_path: false };
                matches!(classify(expr, callee), Some(Event::ToDevice { to_device: true, .. })).then_some((recv, false))
            }
            None => None,
        };
        let Some((recv, by_helper)) = moved.or_else(|| cx.moved_argument(expr).map(|a| (a, true))) else { return };
        // A module class nothing of the run builds: its code never runs.
        if cx.in_unreferenced_module() {
            return;
        }
        // `x.to(DEVICE)` with `DEVICE = torch.device("cpu")`: nothing moves.
        if !by_helper && expr.as_call().and_then(|(_, args, _)| args.first().or_else(|| expr.keyword("device"))).is_some_and(|d| cx.names_the_cpu(d)) {
            return;
        }
        // The receiver: a factory that fills its values, called without
        // `device=`, maybe shaped or filled on the host before the move
        // (`torch.arange(n).unsqueeze(0).repeat(b, 1).to(device)`), or
        // the name the statement before bound to one (`h = torch.zeros(n)`
        // then `h = h.to(device)`).
        // Or a project helper that returns such a factory's tensor
        // (`create_noise(b, z).to(device)`).
        let Some((recv, helper)) = host_factory(recv, checker)
            .or_else(|| factory_of_previous_statement(expr, recv, checker))
            .map(|r| (r, false))
            .or_else(|| cx.returns_host_factory(recv).then_some((recv, true)))
        else {
            return;
        };
        let ExprKind::Call { func: factory, .. } = &recv.kind else { return };
        // Outside step code, a loop in code that runs a few times per
        // program, epoch or evaluation (module level, a function called
        // outside loops) is hot when it iterates data or runs a model
        // (sampling, a rollout): a metric's loop over classes or k-means
        // over prototypes is not.
        // A loop of a function reached only once per epoch (a decode
        // helper of the validation run after each epoch) is not hot either,
        // unless it iterates data.
        // A sampler's denoising steps (`for i in reversed(range(T)):` that
        // runs the model each step) repeat hundreds of times per call, even
        // when the sampler runs once per epoch.
        // Loops over a few items (`range(n_steps)` with `n_steps = 10`,
        // four noise levels) run about as often as the code around them.
        let hot_loop = cx.in_data_loop()
            || (cx.in_long_loop()
                && !cx.in_code_reached_once_per_epoch()
                && (!cx.in_rarely_run_code() || a_loop_around_runs_a_model(expr, checker, false)))
            || (cx.in_long_loop() && cx.in_code_reached_once_per_epoch() && a_loop_around_runs_a_model(expr, checker, true));
        // Once per epoch (`states = torch.zeros(...).cuda()` in the epoch
        // loop, before the loop over batches) is not what costs.
        // Step code reached only once per epoch (a helper of the validation
        // run after each epoch, step code because that run loops over
        // batches) repeats only as often as its own loops say.
        // Module-level code whose every loop runs a few times (`for i in
        // range(10):`, a module's `__main__` self-test) runs as many
        // steps as it counts, once per program.
        let per_step = cx.in_step_code() && !cx.in_code_reached_once_per_epoch() && (cx.function_name().is_some() || cx.in_long_loop());
        let repeated = (per_step || hot_loop) && !cx.in_epoch_loop_only();
        // Under `if step % 1000 == 0:` or a logging test: a sample now and then.
        // Under an option of the class that is off by default (`if
        // self.individual:`): a variant that runs only when asked for.
        let now_and_then = cx.guarded_by_interval()
            || cx.guarded_by_logging_condition()
            || cx.in_rarely_taken_branch()
            || checker.in_first_iteration_arm(expr);
        if !repeated || now_and_then || matches!(cx.function_role(), Role::Test | Role::Setup) || under_a_first_time_guard(expr, checker) {
            return;
        }
        // A helper that draws or shows results (`visualize_results`,
        // `plot_samples`) runs once per epoch or report, not per step.
        let reports = |name: &str| {
            memlint_semantic::resolve::words(name)
                .iter()
                .any(|w| w.starts_with("visuali") || w.starts_with("plot") || w == "show" || w == "display")
        };
        if cx.function_name().is_some_and(reports) {
            return;
        }
        // Code for PyTorch before 0.4, whose factories take no `device=`.
        if filled_element_by_element(expr, checker) || checker.written_for_volatile_torch() {
            return;
        }
        let name = checker.text(factory.span).to_string();
        let target = if by_helper { None } else { device_text(expr, checker) };
        if helper {
            checker.report(
                Self::META
                    .diagnostic(expr.span, format!("`{name}(...)` returns a tensor filled on the host, then copied to the device, each time this runs"))
                    .with_help(format!("give `{name}` the device and pass it to its factory as `device=`")),
            );
            return;
        }
        let legacy = cx.qualified_name(factory).is_some_and(|q| is_legacy_cpu_constructor(q.as_str()));
        let help = match (checker.is_rust(), target) {
            (false, Some(t)) if legacy => format!("create it there with a factory: `torch.zeros(..., device={t})`, `torch.full(..., value, device={t})`"),
            (false, None) if legacy => "create it there with a factory given `device=`: `torch.zeros`, `torch.full`".to_string(),
            (true, Some(t)) => format!("create it there: give `{name}` the device in its options, `(kind, {t})`"),
            (true, None) => format!("create it there: give `{name}` the device in its options"),
            (_, Some(t)) => format!("create it there: `{name}(..., device={t})`"),
            (_, None) => format!("create it there: pass `device=` to `{name}`"),
        };
        checker.report(
            Self::META
                .diagnostic(expr.span, format!("`{name}(...)` is filled on the host and then copied to the device, each time this runs"))
                .with_help(help),
        );
    }
}

/// The factory call at the root of `recv`, a chain of host-side methods
/// on a factory that fills its values and is given no device; `None`
/// when the chain is moved or pinned on the way, or is not a factory's.
/// The root may also be host arithmetic on such a factory
/// (`torch.ones(n) * i`), a library function that computes from such
/// factories alone (`torch.cat([torch.ones(b), torch.zeros(b)])`,
/// `torch.triu(torch.ones(t, t))`, element-wise math such as `torch.exp(...)`,
/// the old `Variable(torch.zeros(n))`), or a legacy typed
/// constructor given sizes and filled on the way
/// (`torch.FloatTensor(b, n).zero_()`).
fn host_factory<'e>(recv: &'e Expr, checker: &Checker<'_>) -> Option<&'e Expr> {
    let cx = checker.cx;
    let mut recv = recv;
    let mut filled = false;
    while let Some((inner, m)) = recv.as_method_call() {
        // `torch.zeros(...)` reads as a method of `torch`: a library
        // function is the end of the chain.
        if recv.as_call().is_some_and(|(f, _, _)| cx.qualified_name(f).is_some()) {
            break;
        }
        let callee = Callee::Method { name: m, receiver: Receiver::Tensor, receiver_is_path: false };
        match classify(recv, callee) {
            // Moved or pinned on the way: that step is the one to read.
            Some(Event::ToDevice { to_device: true, .. } | Event::ToDevice { to_host: true, .. }) => return None,
            _ if m == nn::PIN_MEMORY => return None,
            _ => {
                filled |= is_filling_method(m);
                recv = inner;
            }
        }
    }
    if let ExprKind::BinOp { left, right, .. } = &recv.kind {
        return host_factory(left, checker).or_else(|| host_factory(right, checker));
    }
    // `(torch.rand(shape) < p).to(device)`: a mask drawn on the host.
    if let ExprKind::Compare { left, comparators, .. } = &recv.kind {
        return host_factory(left, checker).or_else(|| comparators.iter().find_map(|c| host_factory(c, checker)));
    }
    let ExprKind::Call { func, args, .. } = &recv.kind else { return None };
    let q = cx.qualified_name(func)?;
    // A draw from a seeded generator (`generator=self._rng`) is made on
    // the generator's device: `device=` would need a generator there too.
    if recv.keyword(nn::GENERATOR).is_some() {
        return None;
    }
    if classify(recv, Callee::Library(q.as_str())) == Some(Event::Factory { device: false, fills: true }) {
        return Some(recv);
    }
    // Sizes, not data: `torch.FloatTensor(b, n)`, not `torch.LongTensor([1, 2])`.
    // Two or more arguments are sizes also when read from a shape
    // (`torch.Tensor(f0.shape[0], 1)`); one item of a list may be data.
    let sizes = || {
        args.iter().all(|a| {
            matches!(a.kind, ExprKind::Name(_) | ExprKind::Attribute { .. } | ExprKind::Literal(Literal::Int(_)) | ExprKind::BinOp { .. })
                || (args.len() >= 2 && matches!(a.kind, ExprKind::Subscript { .. }))
                // `torch.BoolTensor(x.size())`, `torch.FloatTensor(x.size(0),
                // 10)`: read from the shape of another tensor.
                || (a.as_method_call().is_some_and(|(_, m)| m == "size") && a.as_call().is_some_and(|(_, a, _)| a.len() <= 1))
        })
    };
    if filled && is_legacy_cpu_constructor(q.as_str()) && !args.is_empty() && sizes() {
        return Some(recv);
    }
    let inputs = computed_from(recv, q.as_str())?;
    let mut found = inputs.iter().map(|i| host_factory(i, checker));
    let first = found.next()??;
    found.all(|f| f.is_some()).then_some(first)
}

/// The name a move reads the host tensor of: `x` in `x.to(device)`, also
/// through in-place ops on the way (`onehot.scatter_(1, label,
/// 1).to(device)`) and the old `Variable(z).to(device)`.
fn host_name<'e>(recv: &'e Expr, checker: &Checker<'_>) -> Option<&'e str> {
    if let Some(n) = recv.as_name() {
        return Some(n);
    }
    if let Some((inner, m)) = recv.as_method_call() {
        return if is_inplace_method(m) { host_name(inner, checker) } else { None };
    }
    let (func, _, _) = recv.as_call()?;
    let q = checker.cx.qualified_name(func)?;
    match computed_from(recv, q.as_str())?.as_slice() {
        [only] => host_name(only, checker),
        _ => None,
    }
}

/// For `x = x.to(device)` (the move `expr` of the name `recv`, rebinding
/// it), the host factory the statement just before bound `x` to (`x =
/// torch.zeros(n)`): nothing used the host tensor in between, and nothing
/// can after.
fn factory_of_previous_statement<'e>(expr: &Expr, recv: &Expr, checker: &Checker<'e>) -> Option<&'e Expr> {
    let name = host_name(recv, checker)?;
    let module = checker.module();
    fn binds<'s>(s: &'s Stmt, name: &str) -> Option<&'s Expr> {
        match &s.kind {
            StmtKind::Assign { targets, value, .. } if targets.len() == 1 && targets[0].as_name() == Some(name) => Some(value),
            _ => None,
        }
    }
    let id = module.tree.owner(expr.id)?;
    // The move rebinds the name (`h = h.to(device)`) or returns it
    // (`return hidden.to(device), cell.to(device)`): no host copy is left.
    let stmt = module.stmt(id)?;
    // (also cast on the way: `x = x.to(device).to(dtype)`)
    let moved_here = |mut v: &Expr| {
        while v.id != expr.id {
            let Some((recv, _)) = v.as_method_call() else { return false };
            v = recv;
        }
        true
    };
    // (or in a tuple with other moves: `X, Z = X.to(device), Z.to(device)`)
    let in_tuple = match &stmt.kind {
        StmtKind::Assign { targets, value, .. } => match (&targets[..], &value.kind) {
            ([t], ExprKind::Sequence(values)) => matches!(&t.kind, ExprKind::Sequence(names)
                if names.len() == values.len() && names.iter().zip(values).any(|(n, v)| n.as_name() == Some(name) && moved_here(v))),
            _ => false,
        },
        _ => false,
    };
    let rebinds = in_tuple || binds(stmt, name).is_some_and(moved_here);
    let returns = match &stmt.kind {
        StmtKind::Return(Some(v)) => v.id == expr.id || matches!(&v.kind, ExprKind::Sequence(items) if items.iter().any(|i| i.id == expr.id)),
        _ => false,
    };
    if !rebinds && !returns {
        return None;
    }
    // `zeros = torch.zeros(n)` then `if x.is_cuda: zeros = zeros.cuda()`:
    // the move is in an `if` without `else` that tests for the device,
    // after statements there that do not touch the name (`if USE_CUDA: x =
    // x.cuda(); outs = outs.cuda()`).
    let parent_if = || {
        let parent = module.tree.parent(id)?;
        let StmtKind::If { test, body, orelse } = &module.stmt(parent)?.kind else { return None };
        if !orelse.is_empty() || !memlint_semantic::facts::tests_for_the_device(test) {
            return None;
        }
        let at = body.iter().position(|s| s.id == id)?;
        let mut touched = false;
        for s in &body[..at] {
            s.for_each_expr(|e| touched = touched || e.any(&mut |x| x.as_name() == Some(name)));
        }
        if touched {
            return None;
        }
        module.previous_sibling(parent)
    };
    // Back over the other factories bound just before (`hidden =
    // torch.zeros(...)`, `cell = torch.zeros(...)`, then the move), and
    // over constants written into it (`t[:, 0] = 4`).
    let bound_before = |mut before: &'e Stmt| {
        for _ in 0..4 {
            if let Some(v) = binds(before, name) {
                return host_factory(v, checker);
            }
            let StmtKind::Assign { targets, value, .. } = &before.kind else { return None };
            // `t[:, 0] = 4`: the host tensor filled with a constant on the
            // way, at a place the code spells (not `t[idx] = 1` at host indices).
            fn literal_place(e: &Expr) -> bool {
                match &e.kind {
                    ExprKind::Literal(_) => true,
                    ExprKind::Slice { lower, upper, step } => [lower, upper, step].into_iter().flatten().all(|b| literal_place(b)),
                    ExprKind::Sequence(items) => items.iter().all(literal_place),
                    _ => false,
                }
            }
            let fills = matches!(&targets[..], [t] if matches!(&t.kind, ExprKind::Subscript { value: base, index } if base.as_name() == Some(name) && literal_place(index)))
                && matches!(value.kind, ExprKind::Literal(_));
            if !fills && (targets.len() != 1 || targets[0].as_name().is_none() || host_factory(value, checker).is_none()) {
                return None;
            }
            before = module.previous_sibling(before.id)?;
        }
        None
    };
    module.previous_sibling(id).and_then(bound_before).or_else(|| parent_if().and_then(bound_before))
}

/// Whether the statement of the move binds a name (`scores =
/// torch.zeros(b, s).cuda()`) that two nested loops of the same function
/// then fill element by element (`scores[b, i] = self.score(...)`, an
/// index of two or more parts): a Python loop of many small kernels whose
/// cost dwarfs the one copy; vectorising it is the fix, and it removes the
/// line. So does a loop that fills it slot by slot from the parts of items
/// of host data (`buf[k], labels[k] = dataset[i]`, each write a copy of
/// its own). A
/// decoder that writes one step's output per iteration (`outputs[t] =
/// output`) is not such a loop.
fn filled_element_by_element(expr: &Expr, checker: &Checker<'_>) -> bool {
    // `loop_locals`: what the innermost loop around binds (a decoder's
    // `out = self.decoder(...)` then `outputs[t] = out[:, 0]` writes what
    // the device computed, not host data).
    fn writes(body: &[Stmt], name: &str, depth: usize, loop_locals: &[memlint_semantic::ir::Ident]) -> bool {
        let element = |t: &Expr| {
            matches!(&t.kind, ExprKind::Subscript { value, index }
                if value.as_name() == Some(name) && matches!(&index.kind, ExprKind::Sequence(parts) if parts.len() >= 2))
        };
        // `buf[k], labels[k] = dataset[i]` in a loop: slot by slot from the
        // parts of an item of host data (a dataset's sample and label),
        // each write its own copy to the device. (A slice written from a
        // device tensor, `output[:, i] = preds[i]`, is not.)
        let slot = |t: &Expr| match &t.kind {
            ExprKind::Sequence(parts) => {
                parts.len() >= 2
                    && parts.iter().all(|p| matches!(p.kind, ExprKind::Subscript { .. }))
                    && parts.iter().any(|p| matches!(&p.kind, ExprKind::Subscript { value, .. } if value.as_name() == Some(name)))
            }
            _ => false,
        };
        body.iter().any(|s| match &s.kind {
            StmtKind::For { body, .. } | StmtKind::While { body, .. } => {
                writes(body, name, depth + 1, &memlint_semantic::ir::bound_names(body))
            }
            StmtKind::Assign { targets, value, .. } => {
                let host_item = match &value.kind {
                    ExprKind::Subscript { value: items, .. } => {
                        items.dotted().is_some_and(|d| !loop_locals.iter().any(|l| l == d.split('.').next().unwrap_or_default()))
                    }
                    _ => false,
                };
                (depth >= 2 && targets.iter().any(element)) || (depth >= 1 && host_item && targets.iter().any(slot))
            }
            StmtKind::AugAssign { target, .. } => depth >= 2 && element(target),
            StmtKind::Function(_) | StmtKind::Class(_) => false,
            _ => s.child_blocks().any(|b| writes(b, name, depth, loop_locals)),
        })
    }
    let module = checker.module();
    let Some(id) = module.tree.owner(expr.id) else { return false };
    let Some(StmtKind::Assign { targets, .. }) = module.stmt(id).map(|s| &s.kind) else { return false };
    let [target] = targets.as_slice() else { return false };
    let Some(name) = target.as_name() else { return false };
    writes(module.enclosing_function_body(id).unwrap_or(&module.body), name, 0, &[])
}

/// The source text of the `.to(...)` call's device argument (its first
/// positional argument or `device=`), when short enough for a help line.
fn device_text(call: &Expr, checker: &Checker<'_>) -> Option<String> {
    let (_, args, _) = call.as_call()?;
    let arg = args.first().or_else(|| call.keyword("device"))?;
    Some(checker.text(arg.span).to_string()).filter(|t| t.len() <= 40)
}

/// Whether `expr` runs only the first time through: in the body of an `if`
/// that tests for state not made yet (`if len(state) == 0:`, `if not
/// hasattr(self, "buf"):`, `if self.cache is None:`, `if key not in
/// cache:`), as an optimizer's lazy state or a cached buffer is built. A
/// local or an argument tested for `None` is not state: `if mask is None:
/// mask = torch.ones(...)` runs on every call.
fn under_a_first_time_guard(expr: &Expr, checker: &Checker<'_>) -> bool {
    let module = checker.module();
    let Some(id) = module.stmt_at(expr.span.start) else { return false };
    let guarded = module.tree.guards(id).any(|(guard, arm)| {
        arm == Arm::Body
            && module.stmt(guard).is_some_and(|s| match &s.kind {
                StmtKind::If { test, body, .. } => {
                    tests_for_missing_state(test, checker) || (tests_for_outgrown_state(test) && stores_state(body))
                }
                _ => false,
            })
    });
    // `if self.cos_cached is not None and t <= self.cos_cached.shape[0]:
    // return` earlier in the function: what follows builds a cache that
    // is missing or too small.
    let returns_when_cached = |s: &Stmt| match &s.kind {
        StmtKind::If { test, body, orelse } => {
            orelse.is_empty() && matches!(body.as_slice(), [r] if matches!(r.kind, StmtKind::Return(_))) && tests_for_present_state(test)
        }
        _ => false,
    };
    let mut at = Some(id);
    while let Some(s) = at.filter(|&s| !module.tree.is_function(s)) {
        if std::iter::successors(module.previous_sibling(s), |p| module.previous_sibling(p.id)).any(returns_when_cached) {
            return true;
        }
        at = module.tree.parent(s);
    }
    guarded
}

/// Whether a loop of the function around `expr` calls a model in its body
/// (`model(x)`, `self.G(z)`, `policy.act(obs)` on a model).
fn a_loop_around_runs_a_model(expr: &Expr, checker: &Checker<'_>, counted: bool) -> bool {
    let module = checker.module();
    let Some(id) = module.stmt_at(expr.span.start) else { return false };
    let mut at = module.tree.enclosing_loop(id);
    while let Some(l) = at {
        let Some(stmt) = module.stmt(l) else { return false };
        let body = match &stmt.kind {
            // A few iterations counted as a literal (`for i in range(10):`,
            // ten draws for a mean style once per run) are not a hot loop.
            StmtKind::For { iter, .. } if few_fixed_iterations(iter) => {
                at = module.tree.enclosing_loop(l);
                continue;
            }
            // With `counted`, only a `for` over a `range` (steps counted
            // up front, not a decode that stops at its end token).
            StmtKind::For { body, iter, .. } if !counted || iterates_a_range(iter) => body,
            StmtKind::For { .. } | StmtKind::While { .. } if counted => {
                at = module.tree.enclosing_loop(l);
                continue;
            }
            StmtKind::For { body, .. } | StmtKind::While { body, .. } => body,
            _ => return false,
        };
        // A loop that shows a figure each iteration runs as often as
        // someone looks at one (`for i in range(10): ... plt.show()`).
        if checker.cx.shows_a_figure_every_iteration(stmt) {
            return false;
        }
        let mut found = false;
        memlint_semantic::ir::for_each_stmt_in_function(body, &mut |s| {
            if !found {
                s.for_each_expr(|e| found = found || checker.cx.calls_a_model(e));
            }
        });
        if found {
            return true;
        }
        at = module.tree.enclosing_loop(l);
    }
    false
}

/// `range(k)` with a literal `k` of at most 16.
fn few_fixed_iterations(iter: &Expr) -> bool {
    let Some((func, args, _)) = iter.as_call() else { return false };
    func.as_name() == Some("range") && matches!(args, [n] if matches!(n.kind, ExprKind::Literal(Literal::Int(k)) if k <= memlint_semantic::facts::FEW_ITERATIONS))
}

/// Whether a loop's iterable counts steps with `range` (`range(T)`,
/// `tqdm(reversed(range(1, T)))`).
fn iterates_a_range(iter: &Expr) -> bool {
    iter.any(&mut |x| x.as_call().is_some_and(|(func, _, _)| func.as_name() == Some("range")))
}

/// `self.cache is not None`, `hasattr(self, "cache")`, `key in self.cache`,
/// alone or in an `and`: the state a first call creates is there.
fn tests_for_present_state(test: &Expr) -> bool {
    match &test.kind {
        ExprKind::BoolOp { op: BoolOpKind::And, values } => values.iter().any(tests_for_present_state),
        ExprKind::Call { .. } => is_state(test),
        ExprKind::Compare { left, ops, comparators } if ops.len() == 1 => {
            (ops[0] == CmpOp::IsNot && is_state(left) && comparators[0].is_none())
                || (ops[0] == CmpOp::In && is_state(&comparators[0]))
        }
        _ => false,
    }
}

/// `seq_len > self.max_seq_len_cached`, `self.cached_len < t`, alone or
/// in an `and`: the input has outgrown what a cache holds, which happens
/// when a longer input than any before arrives, not on every call.
fn tests_for_outgrown_state(test: &Expr) -> bool {
    // `self.max_len`, `self.cos_cached.shape[0]`: the object's own state.
    let state = |e: &Expr| {
        let e = match &e.kind {
            ExprKind::Subscript { value, .. } => value,
            _ => e,
        };
        e.dotted().is_some_and(|d| d.starts_with("self."))
    };
    match &test.kind {
        ExprKind::BoolOp { op: BoolOpKind::And, values } => values.iter().any(tests_for_outgrown_state),
        ExprKind::Compare { left, ops, comparators } if ops.len() == 1 => match ops[0] {
            CmpOp::Gt | CmpOp::GtE => state(&comparators[0]) && !state(left),
            CmpOp::Lt | CmpOp::LtE => state(left) && !state(&comparators[0]),
            _ => false,
        },
        _ => false,
    }
}

/// Whether a body stores what it builds in the object (`self.inv_freq =
/// ...`, `self.register_buffer("inv_freq", ...)`): a cache refilled.
fn stores_state(body: &[Stmt]) -> bool {
    let mut found = false;
    memlint_semantic::ir::for_each_stmt_in_function(body, &mut |s| {
        found = found
            || match &s.kind {
                StmtKind::Assign { targets, .. } => targets.iter().any(|t| t.dotted().is_some_and(|d| d.starts_with("self."))),
                StmtKind::Expr(e) => e
                    .as_method_call()
                    .is_some_and(|(recv, method)| recv.as_name() == Some("self") && method == "register_buffer"),
                _ => false,
            };
    });
    found
}

/// State that outlives a call: an attribute (`self.cache`), or what
/// `getattr`/`hasattr` read.
fn is_state(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Attribute { .. } => true,
        ExprKind::Call { func, .. } => func.dotted().is_some_and(|d| d.as_str() == "getattr" || d.as_str() == "hasattr"),
        _ => false,
    }
}

fn tests_for_missing_state(test: &Expr, checker: &Checker<'_>) -> bool {
    match &test.kind {
        ExprKind::Unary { op: UnaryOp::Not, operand } => is_state(operand),
        // `if rank == 0 and features is None:`
        ExprKind::BoolOp { op: BoolOpKind::And, values } => values.iter().any(|v| tests_for_missing_state(v, checker)),
        // `if not self.cache or self.in_norm == None:`: built once unless
        // an option of the object turns the cache off.
        // (`not self.cache` reads as missing state itself.)
        ExprKind::BoolOp { op: BoolOpKind::Or, values } => values.iter().all(|v| tests_for_missing_state(v, checker)),
        ExprKind::Compare { left, ops, comparators } if ops.len() == 1 => {
            let zero = matches!(comparators[0].kind, ExprKind::Literal(Literal::Int(0)));
            let len_of = matches!(&left.kind, ExprKind::Call { func, .. } if func.dotted().is_some_and(|d| d.as_str() == "len"));
            let none = matches!(ops[0], CmpOp::Is | CmpOp::Eq) && comparators[0].is_none();
            (ops[0] == CmpOp::Eq && zero && len_of)
                || (none && is_state(left))
                // A local bound to `None` before a loop fills it once
                // (`features = None`, then `if features is None:` in the
                // loop); a parameter's `None` is the caller's default, met
                // on every call.
                || (none && left.as_name().is_some_and(|n| !checker.cx.is_function_param(n)))
                || ops[0] == CmpOp::NotIn
        }
        _ => false,
    }
}
