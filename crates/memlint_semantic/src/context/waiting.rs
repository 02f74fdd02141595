//! Training-step loops whose every iteration already waits for the
//! device (a blocking copy, a read the loop needs, data indexed on the
//! host), or that run on the host: a read of a value there costs little
//! more, and host-sync-in-loop leaves it alone. Each fact is asked of a
//! loop statement once, when the first read in it is found.

use crate::api::{classify, Callee, Event};
use crate::ir::{Expr, ExprKind, Language, Stmt, StmtKind};

use super::sync::{any_read_expr, drawn_root, is_drawn, HostRead, Root};
use super::{Context, ValueKind};
use crate::facts::guards::every_iteration;

/// The method of a CUDA event (`torch.cuda.Event(enable_timing=True)`)
/// that reads the time between two recorded events.
const EVENT_CLOCK: &str = "elapsed_time";

/// Functions that read a clock, to time code.
const CLOCKS: &[&str] = &["time.time", "time.perf_counter", "time.monotonic", "time.time_ns", "time.perf_counter_ns", "timeit.default_timer"];

/// The names a `for` loop binds to what it draws, without the counter of
/// `enumerate(...)` (`i` of `for i, (x, y) in enumerate(loader)`).
fn drawn_names(target: &Expr, iter: &Expr) -> Vec<String> {
    let mut names = Vec::new();
    let counted = iter.as_call().is_some_and(|(f, _, _)| f.as_name() == Some("enumerate"));
    match (&target.kind, counted) {
        (ExprKind::Sequence(items), true) if items.len() == 2 => crate::facts::scan::flatten_tuple_names(&items[1], &mut names),
        _ => crate::facts::scan::flatten_tuple_names(target, &mut names),
    }
    names
}

/// What a loop binds in every iteration: the names of its counter, of
/// augmented assignments and of nested loops' targets, and its plain
/// assignments (targets and value), for the caller to read.
fn loop_bindings<'s>(target: Option<&Expr>, body: &'s [Stmt]) -> (Vec<String>, Vec<(&'s [Expr], &'s Expr)>) {
    let mut names = Vec::new();
    if let Some(t) = target {
        crate::facts::scan::flatten_tuple_names(t, &mut names);
    }
    let mut assigns = Vec::new();
    crate::ir::for_each_stmt_in_function(body, &mut |s| match &s.kind {
        StmtKind::Assign { targets, value, .. } => assigns.push((&targets[..], &**value)),
        StmtKind::AugAssign { target, .. } | StmtKind::For { target, .. } => crate::facts::scan::flatten_tuple_names(target, &mut names),
        _ => {}
    });
    (names, assigns)
}

/// Whether the call `x` writes a part of what the loop draws into a tensor
/// made before it (`im_data.resize_(data[0].size()).copy_(data[0])`, a
/// buffer on the device refilled each step): a copy from the host without
/// `non_blocking=True`, which waits as a move does.
fn writes_drawn_into_buffer(x: &Expr, drawn: &[String]) -> bool {
    let Some((recv, "copy_")) = x.as_method_call() else { return false };
    let Some((_, [source], _)) = x.as_call() else { return false };
    is_drawn(source, drawn) && !is_drawn(recv, drawn) && x.keyword("non_blocking").is_none_or(|v| v.is_false())
}

impl Context {
    /// Whether the loop statement `lp` times its iterations and waits for
    /// the device on purpose to do it: its body (not under an `if`) calls
    /// a library function that waits for the device
    /// (`torch.cuda.synchronize()`; also inside a `with` or a `try`), and
    /// the loop reads a clock (`time.time()`, `time.perf_counter()`, a
    /// CUDA event's `start.elapsed_time(end)` in its body) or iterates a
    /// logger that times each item (`metric_logger.log_every(loader, ...)`).
    /// Reads of values in such a loop cost nothing more.
    pub fn times_every_iteration(&self, lp: &Stmt) -> bool {
        fn synchronizes(cx: &Context, body: &[Stmt]) -> bool {
            body.iter().any(|s| match &s.kind {
                StmtKind::Expr(e) => matches!(cx.host_read(e), Some(HostRead::Library(_))),
                StmtKind::With { body, .. } => synchronizes(cx, body),
                StmtKind::Try(t) => synchronizes(cx, &t.body),
                _ => false,
            })
        }
        let (body, iter) = match &lp.kind {
            StmtKind::For { body, iter, .. } => (body, Some(iter)),
            StmtKind::While { body, .. } => (body, None),
            _ => return false,
        };
        if !synchronizes(self, body) {
            return false;
        }
        let logger = iter.is_some_and(|it| {
            it.any(&mut |e| {
                e.as_method_call().is_some_and(|(_, m)| crate::resolve::words(m).iter().any(|w| w == "log"))
            })
        });
        let mut clock = false;
        crate::ir::for_each_stmt_in_function(body, &mut |s| {
            s.for_each_expr(|e| {
                clock |= e.any(&mut |x| {
                    x.as_call().is_some_and(|(f, _, _)| {
                        self.qualified_name(f).is_some_and(|q| CLOCKS.contains(&q.as_str()))
                    }) || x.as_method_call().is_some_and(|(_, m)| m == EVENT_CLOCK)
                });
            });
        });
        logger || clock
    }

    /// Whether the loop statement `lp` benchmarks a training step rather
    /// than training: it trains on the same inputs every iteration
    /// ([`Context::trains_on_fixed_inputs`]), the function around it is
    /// named for a test, benchmark or profile (`test_attention`,
    /// `benchmark_layer`, `profile_step`) and reads a clock
    /// (`time.time()`). Its weights are thrown away; only the time and the
    /// memory it prints count.
    pub fn benchmarks_the_step(&self, lp: &Stmt, function: &crate::ir::Function) -> bool {
        const BENCH_WORDS: &[&str] = &["test", "bench", "benchmark", "profile", "profiling", "speed", "timing", "measure"];
        if !crate::resolve::word_slices(&function.name).any(|w| BENCH_WORDS.iter().any(|b| w.eq_ignore_ascii_case(b))) {
            return false;
        }
        let mut clock = false;
        crate::ir::for_each_stmt_in_function(&function.body, &mut |s| {
            s.for_each_expr(|e| {
                clock |= e.any(&mut |x| {
                    x.as_call().is_some_and(|(f, _, _)| self.qualified_name(f).is_some_and(|q| CLOCKS.contains(&q.as_str())))
                });
            });
        });
        clock && self.trains_on_fixed_inputs(lp)
    }

    /// Whether every iteration of the loop statement `lp` copies host data
    /// to an accelerator with a blocking copy: `x.to(device)`, `x.cuda()`
    /// or `x.type(torch.cuda.FloatTensor)` without `non_blocking=True`, of
    /// a loader's batch or of a tensor built on the host
    /// (`torch.tensor(obs).to(device)`), in a statement of the body that
    /// runs every iteration (not under an `if`, a nested loop or an
    /// `except`, but in the arm of an `if` that chooses the GPU, `if
    /// cuda:`, `if not args.use_cpu:`); in tch, a batch iterator moved with
    /// `.to_device(device)` (each batch is copied as it is drawn); host data
    /// made a device tensor there (`torch.tensor(obs, device=device)`,
    /// `x.new_tensor(obs)`); `scaler.step(optimizer)` of AMP's
    /// `GradScaler`, which reads its inf check back every step; or a call
    /// there of a project function that waits for the device on each call
    /// ([`crate::index::FunctionSummary::waits_for_device`]).
    ///
    /// PyTorch waits for the stream after such a copy (`non_blocking=False`
    /// synchronises; from pageable memory CUDA also waits before it), so
    /// the host already waits for the device once per iteration there: a
    /// read of a value in the same iteration costs only the overlap of the
    /// host's work before the next copy.
    pub fn copies_to_device_every_iteration(&self, lp: &Stmt) -> bool {
        let (body, iter, target) = match &lp.kind {
            StmtKind::For { body, iter, target, .. } => (body, Some(iter), Some(target)),
            StmtKind::While { body, .. } => (body, None, None),
            _ => return false,
        };
        if self.language == Language::Rust && iter.is_some_and(|it| self.moves_blocking(it, true, &[])) {
            return true;
        }
        let stmts = every_iteration(body);

        // What the loop draws (`for x, y in tqdm(loader):`) comes from the
        // host when the step moves it.
        let mut drawn = Vec::new();
        if let Some(t) = target {
            crate::facts::scan::flatten_tuple_names(t, &mut drawn);
        }
        for s in stmts {
            // `{k: v.to(device) for k, v in batch.items()}`: the targets of
            // a comprehension over drawn data are drawn too.
            s.for_each_expr(|e| {
                e.any(&mut |x| {
                    if let ExprKind::Comprehension(c) = &x.kind {
                        for g in &c.generators {
                            if matches!(drawn_root(&g.iter), Root::Name(n) if drawn.iter().any(|d| d == n)) {
                                crate::facts::scan::flatten_tuple_names(&g.target, &mut drawn);
                            }
                        }
                    }
                    // `map(lambda t: t.float().to(device), batch)`: the
                    // lambda's parameter is each part of what the loop draws.
                    if let Some((f, [fun, iterable], _)) = x.as_call() {
                        if let (Some("map"), ExprKind::Closure(c)) = (f.as_name(), &fun.kind) {
                            if matches!(drawn_root(iterable), Root::Name(n) if drawn.iter().any(|d| d == n)) {
                                drawn.extend(c.params.iter().map(|p| p.name.to_string()));
                            }
                        }
                    }
                    false
                });
            });
            if let StmtKind::For { target, iter, .. } = &s.kind {
                if is_drawn(iter, &drawn) {
                    crate::facts::scan::flatten_tuple_names(target, &mut drawn);
                }
            }
            // `if noise is not None: x = noise(batch).to(device) ... else:
            // batch = batch.to(device)`: a blocking copy of what the loop
            // draws in either arm.
            if let StmtKind::If { body, orelse, .. } = &s.kind {
                let copies = |arm: &[Stmt]| {
                    every_iteration(arm).iter().any(|s| {
                        let mut found = false;
                        s.for_each_expr(|e| found = found || e.any(&mut |x| x.as_call().is_some() && self.moves_blocking(x, false, &drawn)));
                        found
                    })
                };
                if copies(body) && copies(orelse) {
                    return true;
                }
            }
            let mut found = false;
            // A blocking copy, or a call of a project function that waits
            // for the device on each call (the step's helper).
            s.for_each_expr(|e| {
                found = found
                    || e.any(&mut |x| {
                        x.as_call().is_some()
                            && (self.moves_blocking(x, false, &drawn)
                                // `feats[batch[0]].to(device)`: host data the
                                // loop's indices pick, copied in one expression.
                                || self.accelerator_move(x).is_some_and(|(recv, non_blocking)| {
                                    non_blocking != Some(true)
                                        && matches!(recv.kind, ExprKind::Subscript { .. })
                                        && self.drawn_by_hand(recv, &drawn)
                                })
                                || writes_drawn_into_buffer(x, &drawn)
                                || self.copies_host_data(x)
                                || self.called_summary(x).is_some_and(|f| f.waits_for_device)
                                || crate::step::classify(x, self)
                                    .is_some_and(|(k, _, _)| k.kinds().contains(crate::step::StepKinds::SCALER_STEP))
                                || self.blocks_the_host(x))
                    })
            });
            found = found || any_read_expr(s, &mut |x| self.waits_for_shape(x));
            if found {
                return true;
            }
            // Names made from what the loop draws are drawn too:
            // `xs = batch.narrow(1, 0, n)`, `src, trg = batch.src, batch.trg`,
            // and what it draws by hand: `x, y = next(source_iter)`, or
            // builds on the host to move on a later line: `inputs =
            // torch.from_numpy(a)`, then `inputs = inputs.to(device)`.
            if let StmtKind::Assign { targets, value, .. } = &s.kind {
                let parts: Vec<&Expr> = match &value.kind {
                    ExprKind::Sequence(items) => items.iter().collect(),
                    _ => vec![value],
                };
                if parts.iter().all(|p| is_drawn(p, &drawn) || self.host_built(p) || self.drawn_by_hand(p, &drawn)) {
                    for t in targets {
                        crate::facts::scan::flatten_tuple_names(t, &mut drawn);
                    }
                }
            }
        }
        self.waits_in_a_configuration(body, target.map(|t| &**t), &drawn)
    }

    /// Whether an arm of an `if` in the loop body that tests the run's configuration, not the iteration (`if args.half:`,
    /// `if distributed:`: no call, no name the loop binds), makes the host wait for the device every iteration:
    /// apex's `amp.scale_loss`, a collective that blocks ([`Context::blocks_the_host`]), AMP's `scaler.step`, a
    /// blocking copy of what the loop draws (`if num_gpus == 1: imgs = imgs.cuda()`, where the loop moves nothing
    /// without blocking). In that configuration, often the one a run uses, a read costs nothing more.
    fn waits_in_a_configuration(&self, body: &[Stmt], target: Option<&Expr>, drawn: &[String]) -> bool {
        fn collect<'s>(body: &'s [Stmt], ifs: &mut Vec<(&'s Expr, Vec<&'s Stmt>)>) {
            for s in body {
                match &s.kind {
                    StmtKind::With { body, .. } | StmtKind::Block(body) => collect(body, ifs),
                    StmtKind::Try(t) => collect(&t.body, ifs),
                    // A test of the configuration: not the GPU's, no interval, no call.
                    StmtKind::If { test, body, orelse }
                        if crate::facts::guards::gpu_arm(test).is_none()
                            && !crate::facts::guards::is_interval_guard(test)
                            && !test.any(&mut |x| x.as_call().is_some()) =>
                    {
                        let mut arms = every_iteration(body);
                        arms.extend(every_iteration(orelse));
                        ifs.push((test, arms));
                    }
                    _ => {}
                }
            }
        }
        let mut ifs = Vec::new();
        collect(body, &mut ifs);
        if ifs.is_empty() {
            return false;
        }
        let mut overlaps = false;
        let non_blocking = |x: &Expr| self.accelerator_move(x).is_some_and(|(_, nb)| nb == Some(true));
        crate::ir::for_each_stmt_in_function(body, &mut |s| s.for_each_expr(|e| overlaps = overlaps || e.any(&mut |x| non_blocking(x))));
        let waits = |s: &Stmt| {
            let mut found = false;
            s.for_each_expr(|e| {
                found = found
                    || e.any(&mut |x| {
                        self.blocks_the_host(x)
                            || (!overlaps && self.moves_blocking(x, false, drawn))
                            || crate::step::classify(x, self)
                                .is_some_and(|(k, _, _)| k.kinds().contains(crate::step::StepKinds::SCALER_STEP))
                    })
            });
            found
        };
        ifs.retain(|(_, arms)| arms.iter().any(|s| waits(s)));
        if ifs.is_empty() {
            return false;
        }
        // A test that names nothing the loop binds.
        let (mut bound, assigns) = loop_bindings(target, body);
        for (targets, _) in assigns {
            targets.iter().for_each(|t| crate::facts::scan::flatten_tuple_names(t, &mut bound));
        }
        ifs.iter().any(|(t, _)| !t.any(&mut |x| x.as_name().is_some_and(|n| bound.iter().any(|b| b == n))))
    }

    /// Whether `e` draws the iteration's batch by hand, where the loop
    /// statement shows no loader: an item of a sequence at the loop's
    /// counter (`X_train[k]`, `data[i:i + bs]`), or what a plain function
    /// of the project returns (`sample_batch(data, n)`, not a method nor a
    /// model's forward): moved with a blocking copy on a later line, it is
    /// the step's wait.
    fn drawn_by_hand(&self, e: &Expr, drawn: &[String]) -> bool {
        match &e.kind {
            ExprKind::Subscript { index, .. } => index.any(&mut |x| x.as_name().is_some_and(|n| drawn.iter().any(|d| d == n))),
            ExprKind::Call { func, .. } => {
                matches!(func.kind, ExprKind::Name(_))
                    && self.kind_of(func).is_none()
                    && self.project_callee(e).is_some_and(|f| f.class.is_none())
            }
            _ => false,
        }
    }

    /// Whether every iteration of the loop statement `lp` waits for the
    /// device through the data it feeds the step, where no copy of its own
    /// shows it:
    /// - it passes the model (`model(image, caption)`) a part of what it
    ///   draws that the loop never moves to the device while it moves
    ///   others (`image` is moved, `caption` is not: a list of strings or a
    ///   host tensor the model converts and copies itself, with a blocking
    ///   copy);
    /// - it indexes a tensor with indices built on the host
    ///   (`s[np.random.choice(n, b)]`, `x[idx]` with `idx = perm[i:i + b]`
    ///   of `perm = torch.randperm(n)`): PyTorch copies the indices to the
    ///   tensor's device, a blocking copy; or passes a slice of such indices
    ///   to a call (`trainer(model, x, y, idx[i:i + b])`), which indexes the
    ///   data with them.
    ///
    /// `scope` is the body of the function around the loop (the module's
    /// body at the top level), where the indices are built.
    pub fn waits_through_its_data(&self, lp: &Stmt, scope: &[Stmt]) -> bool {
        let (body, drawn) = match &lp.kind {
            StmtKind::For { body, iter, target, .. } => (body, drawn_names(target, iter)),
            StmtKind::While { body, .. } => (body, Vec::new()),
            _ => return false,
        };
        let mut indices = self.host_index_names(scope);
        // `for idx in DataLoader(range(n), b, shuffle=True):` draws index
        // tensors on the host.
        if let StmtKind::For { iter, .. } = &lp.kind {
            let over_range = iter.as_call().and_then(|(_, args, _)| args.first()).and_then(Expr::as_call).is_some_and(|(f, _, _)| f.as_name() == Some("range"));
            if over_range && self.kind_of(iter) == Some(ValueKind::DataLoader) {
                indices.extend(drawn.iter().cloned());
            }
        }
        // The drawn names the loop moves somewhere (`image.to(device)`).
        let mut moved: Vec<&str> = Vec::new();
        crate::ir::for_each_expr_in_function(body, &mut |x| {
            if let Some((recv, _)) = self.accelerator_move(x) {
                if let Root::Name(n) = drawn_root(recv) {
                    if drawn.iter().any(|d| d == n) {
                        moved.push(n);
                    }
                }
            }
        });
        let unmoved_part = |a: &Expr| {
            let mut base = a;
            while let ExprKind::Subscript { value, .. } | ExprKind::Attribute { value, .. } = &base.kind {
                base = value;
            }
            base.as_name().is_some_and(|n| drawn.iter().any(|d| d == n) && !moved.contains(&n))
        };
        let index_slice = |e: &Expr| {
            matches!(&e.kind, ExprKind::Subscript { value, index } if matches!(index.kind, ExprKind::Slice { .. }) && self.is_host_index(value, &indices))
        };
        every_iteration(body).into_iter().any(|s| {
            // `memory_index[start:end] = idx`: a part of the batch never
            // moved written into a tensor, a blocking copy when the tensor
            // lives on the device.
            if let StmtKind::Assign { targets, value, .. } = &s.kind {
                let into_tensor = |t: &Expr| matches!(&t.kind, ExprKind::Subscript { value, .. } if self.may_be_tensor(value));
                if targets.iter().any(into_tensor) && unmoved_part(value) {
                    return true;
                }
            }
            any_read_expr(s, &mut |x| match &x.kind {
                ExprKind::Call { func, args, keywords, .. } => {
                    let values = || args.iter().chain(keywords.iter().map(|k| &k.value));
                    (!moved.is_empty() && self.is_model(func) && values().any(&unmoved_part)) || values().any(&index_slice)
                }
                ExprKind::Subscript { .. } => self.indexes_with_host_indices(x, &indices),
                _ => false,
            })
        })
    }

    /// Whether every iteration of the loop statement `lp` (a loop over a
    /// model's parameters) copies a value other than the loop's own back to
    /// the device with a blocking copy (`param.data -= lr *
    /// grad_mean.cuda()`, the mean a host-side collective returned): each
    /// parameter's read then is a leg of a host round trip the loop makes
    /// anyway, not a value read for its own sake.
    pub fn moves_back_every_iteration(&self, lp: &Stmt) -> bool {
        let StmtKind::For { body, target, .. } = &lp.kind else { return false };
        let mut own = Vec::new();
        crate::facts::scan::flatten_tuple_names(target, &mut own);
        every_iteration(body).into_iter().any(|s| {
            any_read_expr(s, &mut |x| {
                self.accelerator_move(x).is_some_and(|(recv, non_blocking)| {
                    non_blocking != Some(true)
                        && match drawn_root(recv) {
                            Root::Name(n) => !own.iter().any(|o| o == n),
                            _ => true,
                        }
                })
            })
        })
    }

    /// The names `body` binds (outside nested functions) to indices
    /// computed on the host ([`Context::is_host_index`]).
    fn host_index_names(&self, body: &[Stmt]) -> Vec<String> {
        let mut names = Vec::new();
        crate::ir::for_each_stmt_in_function(body, &mut |s| {
            if let StmtKind::Assign { targets, value, .. } = &s.kind {
                // Or computed from such indices on the host (`ids0 =
                // torch.fmod(ids, n)`), with no move to a device.
                let derived = || {
                    value.any(&mut |x| x.as_name().is_some_and(|n| names.iter().any(|m| m == n)))
                        && !value.any(&mut |x| self.accelerator_move(x).is_some())
                };
                if self.is_host_index(value, &names) || derived() {
                    targets.iter().for_each(|t| crate::facts::scan::collect_target_names(t, &mut names));
                }
            }
        });
        names
    }

    /// Whether the `for` loop `lp` draws its data from an iterable (not a
    /// `range`) and its body moves nothing to an accelerator: the batches
    /// arrive on the device from the iterable itself (a legacy torchtext
    /// iterator built with `device=`, a prefetcher) or through a helper,
    /// and whether that copy already waits for the device is not known.
    ///
    /// So does a loop over a counter (or a `while`) that draws a batch by
    /// hand every iteration (`batch = next(train_iterator)` of a loader's
    /// iterator) and moves nothing itself.
    pub fn draws_data_it_never_moves(&self, lp: &Stmt) -> bool {
        let (body, counts) = match &lp.kind {
            // `range(n)`, Rust's `0..n`: a counter, not data.
            StmtKind::For { body, iter, .. } => (
                body,
                iter.any(&mut |e| {
                    matches!(e.kind, ExprKind::Range { .. })
                        || e.as_call().is_some_and(|(func, _, _)| {
                            func.as_name().is_some_and(|n| n == "range") || self.qualified_name(func).is_some_and(|q| q.is("itertools.count"))
                        })
                }),
            ),
            StmtKind::While { body, .. } => (body, true),
            _ => return false,
        };
        let draws_by_hand = || {
            every_iteration(body).iter().any(|s| {
                matches!(&s.kind, StmtKind::Assign { targets, value, .. }
                    if value.as_call().is_some_and(|(f, _, _)| f.as_name() == Some("next"))
                        && targets.iter().any(|t| t.any(&mut |x| x.as_name().is_some() && self.is_batch_value(x))))
            })
        };
        if counts && !draws_by_hand() {
            return false;
        }
        // `buf.resize_(data[0].size()).copy_(data[0])`: a copy into a
        // device buffer moves it too.
        let copies_into_a_buffer = || {
            let mut found = false;
            crate::ir::for_each_expr_in_function(body, &mut |x| found = found || matches!(x.as_method_call(), Some((_, "copy_"))));
            found
        };
        !self.moves_anything(body) && !(counts && copies_into_a_buffer())
    }

    /// Whether `body` (nested blocks included, not nested functions) moves
    /// anything to an accelerator.
    fn moves_anything(&self, body: &[Stmt]) -> bool {
        let mut moves = false;
        crate::ir::for_each_expr_in_function(body, &mut |x| moves = moves || self.accelerator_move(x).is_some());
        moves
    }

    /// Whether the loop statement `lp` trains on the host: its body moves
    /// nothing to an accelerator and computes with a leaf tensor that
    /// `scope` (the function around the loop, or the module) builds on the
    /// host and never moves (`w = torch.rand(1, 1, requires_grad=True)`,
    /// no `device=`): a tensor of the CPU, so the loop runs there (a
    /// notebook's from-scratch regression in a file that shows `.cuda()`
    /// elsewhere). Its reads wait for nothing.
    pub fn trains_on_the_host(&self, lp: &Stmt, scope: &[Stmt]) -> bool {
        let (StmtKind::For { body, .. } | StmtKind::While { body, .. }) = &lp.kind else { return false };
        if self.moves_anything(body) {
            return false;
        }
        let mut leaves: Vec<&str> = Vec::new();
        let mut moved: Vec<String> = Vec::new();
        crate::ir::for_each_stmt_in_function(scope, &mut |s| {
            if let StmtKind::Assign { targets, value, .. } = &s.kind {
                if self.builds_host_leaf(value) {
                    leaves.extend(targets.iter().filter_map(Expr::as_name));
                }
            }
            s.for_each_expr(|e| {
                e.any(&mut |x| {
                    if let Some(Root::Name(n)) = self.accelerator_move(x).map(|(recv, _)| drawn_root(recv)) {
                        moved.push(n.to_string());
                    }
                    false
                });
            });
        });
        leaves.retain(|l| !moved.iter().any(|m| m == l));
        if leaves.is_empty() {
            return false;
        }
        let mut uses = false;
        crate::ir::for_each_expr_in_function(body, &mut |x| uses = uses || x.as_name().is_some_and(|n| leaves.contains(&n)));
        uses
    }

    /// Whether the loop statement `lp` trains on the same inputs every
    /// iteration: full-batch training (`for epoch in range(n): out =
    /// model(X_train)`), a demo's few steps on one fixed batch. It counts
    /// (`range(...)`, `while`) rather than iterating data, and every model
    /// it calls takes only values bound before the loop. One iteration is
    /// one epoch, and a read per iteration is a read per epoch. In tch, a
    /// range loop (`for epoch in 1..=epochs`), `while` or `loop` whose
    /// `net.forward(&xs)` / `xs.apply_t(&net, true)` takes only values
    /// bound before it.
    pub fn trains_on_fixed_inputs(&self, lp: &Stmt) -> bool {
        let (body, target) = match &lp.kind {
            StmtKind::For { body, iter, target, .. } => {
                // `range(n)`; in Rust, `1..=epochs`.
                let counts = |e: &Expr| {
                    matches!(e.kind, ExprKind::Range { .. })
                        || e.as_call().and_then(|(f, _, _)| f.as_name()).is_some_and(|f| matches!(f, "range" | "trange"))
                };
                // `tqdm(range(n))`, `enumerate(range(n))`.
                let wrapped = iter.as_call().is_some_and(|(_, args, _)| args.first().is_some_and(counts));
                if !(counts(iter) || wrapped) {
                    return false;
                }
                (body, Some(target))
            }
            StmtKind::While { body, .. } => (body, None),
            _ => return false,
        };
        // The names that change from one iteration to the next: the
        // counter, what is added to or drawn, and what is computed from
        // such names or by a call not known to convert its argument
        // (`x, y = get_batch()`). A name bound in the loop to a conversion
        // of fixed data (`inputs = torch.from_numpy(x_train)`) is the same
        // every time.
        let (mut bound, assigns) = loop_bindings(target.map(|t| &**t), body);
        // Written in place (`im_data.copy_(data[0])`): new data each time.
        let mut draws = false;
        crate::ir::for_each_expr_in_function(body, &mut |x| {
            if let Some((recv, m)) = x.as_method_call() {
                if m.ends_with('_') && !m.starts_with("__") {
                    if let Root::Name(n) = drawn_root(recv) {
                        bound.push(n.to_string());
                    }
                }
            }
            draws |= matches!(drawn_root(x), Root::Next) && x.as_call().is_some();
        });
        if draws {
            return false;
        }
        // Until nothing changes: a later line may feed an earlier one in
        // the next iteration.
        loop {
            let before = bound.len();
            for (targets, value) in &assigns {
                if !self.same_every_iteration(value, &bound) {
                    for t in targets.iter() {
                        let mut names = Vec::new();
                        crate::facts::scan::flatten_tuple_names(t, &mut names);
                        for n in names {
                            if !bound.contains(&n) {
                                bound.push(n);
                            }
                        }
                    }
                }
            }
            if bound.len() == before {
                break;
            }
        }
        // `model(X)`, `model(torch.from_numpy(x_train))`: no name the loop
        // binds, no draw (`G(torch.randn(b, z))` is new data).
        let drawing = |x: &Expr| {
            x.as_call().and_then(|(f, _, _)| f.dotted()).is_some_and(|d| {
                let last = d.rsplit('.').next().unwrap_or(&d).to_ascii_lowercase();
                last.contains("rand") || last.contains("normal") || last.contains("sample") || last == "next"
            })
        };
        let (mut models, mut fixed) = (0, true);
        let rust = self.language == Language::Rust;
        crate::ir::for_each_expr_in_function(body, &mut |x| {
            let Some((func, args, keywords)) = x.as_call() else { return };
            // In tch: `net.forward(&xs)`, `net.forward_t(&xs, true)`, and
            // `xs.apply(&net)`, `xs.apply_t(&net, true)`, whose input is
            // the receiver.
            let inputs: Vec<&Expr> = match x.as_method_call() {
                Some((_, m)) if rust && matches!(m, "forward" | "forward_t" | "forward_mt") => args.iter().collect(),
                Some((recv, m)) if rust && matches!(m, "apply" | "apply_t") => vec![recv],
                _ if !rust && self.is_model(func) => args.iter().chain(keywords.iter().map(|k| &k.value)).collect(),
                _ => return,
            };
            models += 1;
            fixed &= inputs.iter().all(|a| !a.any(&mut |x| x.as_name().is_some_and(|n| bound.iter().any(|b| b == n)) || drawing(x)));
        });
        models > 0 && fixed
    }

    /// Whether `e` has the same value in every iteration of a loop in which
    /// the names `changing` change: names not among them, literals, their
    /// parts and arithmetic, and conversions of them that draw nothing
    /// (`torch.from_numpy(x_train).float()`, `Variable(X).to(device)`).
    fn same_every_iteration(&self, e: &Expr, changing: &[String]) -> bool {
        let same = |x: &Expr| self.same_every_iteration(x, changing);
        match &e.kind {
            ExprKind::Name(n) => !changing.iter().any(|c| c == n.as_str()),
            ExprKind::Literal(_) => true,
            ExprKind::Attribute { value, .. } | ExprKind::Unary { operand: value, .. } => same(value),
            ExprKind::Subscript { value, index } => same(value) && same(index),
            ExprKind::BinOp { left, right, .. } => same(left) && same(right),
            ExprKind::Sequence(items) => items.iter().all(same),
            ExprKind::Call { func, args, keywords, .. } => {
                let converts = match &func.kind {
                    ExprKind::Attribute { value, attr, .. } if self.qualified_name(func).is_none() => {
                        crate::api::CONVERSION_METHODS.contains(&attr.as_str()) && same(value)
                    }
                    _ => self.qualified_name(func).is_some_and(|q| q.is_any(crate::api::CONVERSION_FUNCTIONS)),
                };
                converts && args.iter().all(same) && keywords.iter().all(|k| same(&k.value))
            }
            _ => false,
        }
    }

    /// Whether `e` builds a leaf tensor that requires grad on the host: a
    /// torch factory without `device=` given `requires_grad=True`
    /// (`torch.rand(1, 1, requires_grad=True)`), such a factory's
    /// `.requires_grad_()`, or an `nn.Parameter` of a host tensor.
    fn builds_host_leaf(&self, e: &Expr) -> bool {
        // `nn.Parameter(torch.FloatTensor(n, m))`: a parameter made of a
        // host tensor, by a factory or a legacy CPU constructor.
        if let Some((func, [inner], _)) = e.as_call() {
            if self.qualified_name(func).is_some_and(|q| q.is_any(crate::api::nn::PARAMETER_CLASSES)) {
                let Some((f, _, _)) = inner.as_call() else { return false };
                return self.qualified_name(f).is_some_and(|q| {
                    crate::api::is_legacy_cpu_constructor(q.as_str())
                        || matches!(classify(inner, Callee::Library(q.as_str())), Some(Event::Factory { device: false, .. }))
                });
            }
        }
        let (call, requires) = match e.as_method_call() {
            Some((recv, "requires_grad_")) if e.as_call().is_some_and(|(_, args, _)| args.first().is_none_or(|a| !a.is_false())) => {
                (recv, true)
            }
            _ => (e, e.keyword("requires_grad").is_some_and(|v| matches!(v.kind, ExprKind::Literal(crate::ir::Literal::Bool(true))))),
        };
        if !requires {
            return false;
        }
        let Some((func, _, _)) = call.as_call() else { return false };
        self.qualified_name(func)
            .is_some_and(|q| matches!(classify(call, Callee::Library(q.as_str())), Some(Event::Factory { device: false, .. })))
    }

    /// Whether every iteration of the loop statement `lp` decides on a value
    /// read from the device whether to leave the loop: an `if` that runs
    /// every iteration, whose test reads a device tensor (`if (m -
    /// prev).norm() < tol:`) or a value the iteration read back (`v =
    /// loss.item()` or `v = -out.item()`, then `if math.isnan(v):`), and
    /// whose body leaves (`break`, `return`, `raise`, `sys.exit()`); or a
    /// `while` whose test reads such a value (`while value < 0.99:`). Such a
    /// loop must wait
    /// for the device every iteration: a convergence test or an abort on a
    /// diverged loss is the point of the read, and other reads there cost
    /// nothing more.
    pub fn decides_exit_every_iteration(&self, lp: &Stmt) -> bool {
        fn leaves(body: &[Stmt]) -> bool {
            body.iter().any(|s| match &s.kind {
                StmtKind::Break | StmtKind::Return(_) | StmtKind::Raise(_) => true,
                StmtKind::Expr(e) => e.as_call().and_then(|(f, _, _)| f.dotted()).is_some_and(|d| {
                    matches!(d.as_str(), "sys.exit" | "exit" | "quit" | "os._exit")
                }),
                _ => false,
            })
        }
        let (StmtKind::For { body, .. } | StmtKind::While { body, .. }) = &lp.kind else { return false };
        let mut read: Vec<&str> = Vec::new();
        let mut stmts: Vec<&Stmt> = Vec::new();
        // The statements that run every iteration, and the `if`s among
        // them (whose tests run every iteration).
        fn collect<'s>(body: &'s [Stmt], out: &mut Vec<&'s Stmt>) {
            for s in body {
                match &s.kind {
                    StmtKind::With { body, .. } | StmtKind::Block(body) => collect(body, out),
                    StmtKind::For { .. } | StmtKind::While { .. } | StmtKind::Try { .. } | StmtKind::Function(_) | StmtKind::Class(_) => {}
                    _ => out.push(s),
                }
            }
        }
        collect(body, &mut stmts);
        // A value read back (`value = -out.item()`) and bound to a name.
        let reads_back = |value: &Expr| value.any(&mut |x| self.host_read(x).is_some());
        // `while value < 0.99:` tests, every iteration, what the body reads back.
        if let StmtKind::While { test, .. } = &lp.kind {
            let bound: Vec<&str> = stmts
                .iter()
                .filter_map(|s| match &s.kind {
                    StmtKind::Assign { targets, value, .. } if reads_back(value) => Some(targets),
                    _ => None,
                })
                .flatten()
                .filter_map(Expr::as_name)
                .collect();
            if test.any(&mut |x| x.as_name().is_some_and(|n| bound.contains(&n))) {
                return true;
            }
        }
        stmts.into_iter().any(|s| match &s.kind {
            StmtKind::Assign { targets, value, .. } => {
                if reads_back(value) {
                    read.extend(targets.iter().filter_map(Expr::as_name));
                }
                false
            }
            StmtKind::If { test, body, .. } => {
                leaves(body)
                    && (self.condition_read(test).is_some()
                        || test.any(&mut |x| x.as_name().is_some_and(|n| read.contains(&n)) || self.host_read(x).is_some()))
            }
            _ => false,
        })
    }

    /// Whether every iteration of the loop statement `lp` redraws a
    /// notebook's output (`display.clear_output(wait=True)` in a statement
    /// that runs every iteration): a live display of the training, whose
    /// per-step reads are the point of the cell.
    pub fn redraws_every_iteration(&self, lp: &Stmt) -> bool {
        let (StmtKind::For { body, .. } | StmtKind::While { body, .. }) = &lp.kind else { return false };
        every_iteration(body).iter().any(|s| match &s.kind {
            StmtKind::Expr(e) => e.as_call().is_some_and(|(func, _, _)| {
                func.dotted().is_some_and(|d| d.as_str().rsplit('.').next() == Some("clear_output"))
            }),
            _ => false,
        })
    }

    /// Whether every iteration of the loop statement `lp` draws or shows a
    /// figure (`plt.subplots(...)`, `plt.show()` in a statement that runs
    /// every iteration): a loop over pictures to look at, as many as a
    /// person looks at.
    pub fn shows_a_figure_every_iteration(&self, lp: &Stmt) -> bool {
        let (StmtKind::For { body, .. } | StmtKind::While { body, .. }) = &lp.kind else { return false };
        let figure = |e: &Expr| {
            e.as_call().is_some_and(|(func, _, _)| self.qualified_name(func).is_some_and(|q| q.is_any(crate::api::FIGURE_FUNCTIONS)))
        };
        every_iteration(body).iter().any(|s| match &s.kind {
            StmtKind::Expr(e) => figure(e),
            StmtKind::Assign { value, .. } => figure(value),
            _ => false,
        })
    }
}
