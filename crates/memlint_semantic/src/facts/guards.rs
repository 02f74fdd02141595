//! What the test of an `if` says about how often, where or for what its
//! body runs: another framework's branch, a logging or debug interval, a
//! run-once initialisation, an option that is off by default, a NaN check,
//! the device a flag picks, a local the function never sets. They read the
//! IR only, not the walk's state.

use rustc_hash::FxHashSet as HashSet;

use crate::ir::{for_each_stmt_in_function, Expr, ExprKind, Stmt, StmtKind, Words};
use crate::resolve::words;

/// The parameter a test selects training by: `flag` (`if train:`) or a
/// string mode compared with a training value (`if mode == "train":`,
/// `if phase in ("train", "train+log"):`), the annotated transformer's
/// `run_epoch(..., mode="train")`.
pub(crate) fn training_test_name(test: &Expr) -> Option<&str> {
    if let Some(n) = test.as_name() {
        return Some(n);
    }
    let ExprKind::Compare { left, ops, comparators } = &test.kind else { return None };
    let (&[op], [right]) = (&ops[..], &comparators[..]) else { return None };
    let trains = |e: &Expr| matches!(&e.kind, ExprKind::Literal(crate::ir::Literal::Str(v)) if v.starts_with("train"));
    let selects = match (op, &right.kind) {
        (crate::ir::CmpOp::Eq, _) => trains(right),
        (crate::ir::CmpOp::In, ExprKind::Sequence(items)) => !items.is_empty() && items.iter().all(trains),
        _ => false,
    };
    if selects { left.as_name() } else { None }
}

/// For `if <module>.training:`, 1 for the arm that runs in train mode
/// (the body; the `else` of `if not <module>.training:`), as (body, else).
pub(crate) fn train_mode_arms(test: &Expr) -> (u32, u32) {
    let is_mode = |e: &Expr| matches!(&e.kind, ExprKind::Attribute { attr, .. } if attr == "training");
    match &test.kind {
        ExprKind::Unary { op: crate::ir::UnaryOp::Not, operand } if is_mode(operand) => (0, 1),
        _ if is_mode(test) => (1, 0),
        _ => (0, 0),
    }
}

/// Whether `e` is a string literal naming an evaluation mode (`"eval"`,
/// `"val"`, `"test"`, ...), passed where a function selects training by
/// its mode ([`training_test_name`]).
pub(crate) fn is_eval_mode_literal(e: &Expr) -> bool {
    const EVAL_MODES: &[&str] =
        &["eval", "evaluate", "evaluation", "val", "valid", "validate", "validation", "test", "testing", "dev", "inference", "predict"];
    matches!(&e.kind, ExprKind::Literal(crate::ir::Literal::Str(v)) if EVAL_MODES.iter().any(|m| v.eq_ignore_ascii_case(m)))
}

/// For `if <...framework> == "tf":` (or `"jax"`, `"flax"`, `"np"`), the
/// body runs for another framework; for `== "pt"`, the `else` does.
pub(crate) fn framework_branches(test: &Expr) -> (bool, bool) {
    let ExprKind::Compare { left, ops, comparators } = &test.kind else { return (false, false) };
    let names_framework = left.dotted().is_some_and(|d| d.rsplit('.').next().is_some_and(|l| l.contains("framework")));
    let (Some(op), Some(right)) = (ops.first(), comparators.first()) else { return (false, false) };
    let ExprKind::Literal(crate::ir::Literal::Str(value)) = &right.kind else { return (false, false) };
    if !names_framework || !matches!(op, crate::ir::CmpOp::Eq | crate::ir::CmpOp::NotEq) {
        return (false, false);
    }
    let other = matches!(value.as_str(), "tf" | "jax" | "flax" | "np" | "numpy" | "mlx");
    let torch = value == "pt";
    let eq = *op == crate::ir::CmpOp::Eq;
    match (other, torch, eq) {
        (true, _, true) | (_, true, false) => (true, false),
        (_, true, true) | (true, _, false) => (false, true),
        _ => (false, false),
    }
}

/// `x % k == c` in a condition (`if step % 100 == 0`, `(i + 1) % n == 0`,
/// `step % k == k - 1`, `not step % k`): the body runs every k-th time.
pub(crate) fn is_interval_guard(test: &Expr) -> bool {
    test.any(&mut |e| match &e.kind {
        // `==` only: `step % k != 0` runs k - 1 steps out of k.
        ExprKind::Compare { left, ops, comparators } if ops.iter().all(|o| *o == crate::ir::CmpOp::Eq) => {
            matches!(&left.kind, ExprKind::BinOp { op: crate::ir::BinOp::Mod, .. })
                || comparators.iter().any(|c| matches!(&c.kind, ExprKind::BinOp { op: crate::ir::BinOp::Mod, .. }))
        }
        ExprKind::Unary { operand: inner, .. } => matches!(&inner.kind, ExprKind::BinOp { op: crate::ir::BinOp::Mod, .. }),
        _ => false,
    })
}

/// Whether an `if` selects a function's initialisation mode: the test is
/// a parameter named for it (`if init:`, `if init is True:`,
/// `if data_init:`), as weight-normalised layers take a data-dependent
/// initialisation pass through their `forward` once before training.
pub(crate) fn tests_an_init_mode(test: &Expr, is_param: &dyn Fn(&str) -> bool) -> bool {
    let Some((subject, false)) = flag_test(test) else { return false };
    subject.as_name().is_some_and(|n| {
        is_param(n) && crate::resolve::word_slices(n).any(|w| w.eq_ignore_ascii_case("init") || w.eq_ignore_ascii_case("initialize"))
    })
}

/// What an `if` test reads as a flag, and whether it holds when the flag
/// is false: `flag`, `not flag`, `flag is True`, `flag == False`, `flag
/// is not True`. `None` for any other comparison.
pub(crate) fn flag_test(test: &Expr) -> Option<(&Expr, bool)> {
    match &test.kind {
        ExprKind::Unary { op: crate::ir::UnaryOp::Not, operand } => Some((&**operand, true)),
        ExprKind::Compare { left, ops, comparators } if ops.len() == 1 => {
            let is = matches!(ops[0], crate::ir::CmpOp::Is | crate::ir::CmpOp::Eq);
            let is_not = matches!(ops[0], crate::ir::CmpOp::IsNot | crate::ir::CmpOp::NotEq);
            match (is || is_not, comparators[0].is_true(), comparators[0].is_false()) {
                (true, true, _) => Some((&**left, is_not)),
                (true, _, true) => Some((&**left, is)),
                _ => None,
            }
        }
        _ => Some((test, false)),
    }
}

/// Whether an `if` runs its body once per object: the test reads a
/// `self.<flag>` that the body sets (`if not self.initialized: ...;
/// self.initialized = True`, or a buffer flag `self.inited.fill_(1)`).
pub(crate) fn is_run_once_guard(test: &Expr, body: &[Stmt]) -> bool {
    let mut flags: Vec<String> = Vec::new();
    test.any(&mut |e| {
        if let Some(d) = e.dotted().filter(|d| d.starts_with("self.") && !d[5..].contains('.')) {
            flags.push(d.to_string());
        }
        false
    });
    if flags.is_empty() {
        return false;
    }
    let mut sets = false;
    for s in body {
        match &s.kind {
            // A flag set to `True` or `False` (a counter reset, `self.step
            // = 0`, runs again).
            StmtKind::Assign { targets, value, .. } if matches!(value.kind, ExprKind::Literal(crate::ir::Literal::Bool(_))) => {
                sets |= targets.iter().any(|t| t.dotted().is_some_and(|d| flags.iter().any(|f| *f == d.as_str())));
            }
            StmtKind::Expr(e) => {
                if let Some((recv, "fill_" | "copy_" | "zero_")) = e.as_method_call() {
                    let recv = match &recv.kind {
                        ExprKind::Attribute { value, attr, .. } if attr == "data" => value,
                        _ => recv,
                    };
                    sets |= recv.dotted().is_some_and(|d| flags.iter().any(|f| *f == d.as_str()));
                }
            }
            _ => {}
        }
    }
    sets
}

/// A condition that reads a memory option of a configuration object
/// (`args.empty_unused_memory_level`, `cfg.clear_cache`,
/// `self.config.free_memory`): `if args.local_rank == 0:` is not one.
pub(crate) fn is_option_guard(test: &Expr) -> bool {
    const OPTION_OBJECTS: &[&str] = &["args", "cfg", "config", "conf", "opt", "opts", "options", "hparams", "flags", "settings"];
    const MEMORY_WORDS: &[&str] = &["empty", "cache", "memory", "mem", "free", "clear", "release", "gc", "oom"];
    test.any(&mut |e| match &e.kind {
        ExprKind::Attribute { value, attr, .. } => {
            let owner = value.dotted().unwrap_or_default();
            let last = owner.rsplit('.').next().unwrap_or(&owner).to_ascii_lowercase();
            let config = OPTION_OBJECTS.contains(&last.as_str()) || last.ends_with("_config") || last.ends_with("_args");
            config && words(attr).iter().any(|w| MEMORY_WORDS.contains(&w.as_str()))
        }
        _ => false,
    })
}

/// Whether an `if` test looks for NaN or infinite values (`if
/// torch.isnan(k).any():`, `if math.isinf(v):`, or such a test in an
/// `and`, or every operand of an `or` one): its body is a recovery path
/// that runs when values go bad. Not a negated test (`if not
/// torch.isnan(loss):` guards the usual path).
pub(crate) fn tests_for_nan(test: &Expr) -> bool {
    fn nan_test(e: &Expr) -> bool {
        let Some((func, args, _)) = e.as_call() else { return false };
        match &func.kind {
            // `torch.isnan(k).any()`, `loss.isinf().all()`: the test below.
            ExprKind::Attribute { value, attr, .. } if args.is_empty() && matches!(attr.as_str(), "any" | "all" | "item") => {
                nan_test(value)
            }
            ExprKind::Attribute { attr, .. } => crate::api::NAN_TESTS.contains(&attr.as_str()),
            ExprKind::Name(n) => crate::api::NAN_TESTS.contains(&n.as_str()),
            _ => false,
        }
    }
    match &test.kind {
        ExprKind::BoolOp { op: crate::ir::BoolOpKind::And, values } => values.iter().any(nan_test),
        ExprKind::BoolOp { op: crate::ir::BoolOpKind::Or, values } => values.iter().all(nan_test),
        _ => nan_test(test),
    }
}

/// Whether an `if` test is a logging, debugging or profiling condition or
/// a user option: it names a word like `log`, `verbose`, `debug`,
/// `profile`, `print`, `display` (`if log_now:`, `if self.verbose > 1:`),
/// or reads an attribute of an options object (`args.x`, `cfg.x`,
/// `self.config.x`).
pub(crate) fn is_logging_guard(test: &Expr) -> bool {
    const OPTION_OBJECTS: &[&str] = &["args", "cfg", "config", "conf", "opt", "opts", "options", "hparams", "flags", "settings"];
    test.any(&mut |e| match &e.kind {
        ExprKind::Attribute { value, .. } => {
            let owner = value.dotted().unwrap_or_default();
            let last = owner.rsplit('.').next().unwrap_or(&owner).to_ascii_lowercase();
            OPTION_OBJECTS.contains(&last.as_str()) || last.ends_with("_config") || last.ends_with("_args")
        }
        _ => false,
    }) || is_debug_guard(test)
}

/// Whether an `if` test is a logging, debugging or profiling condition:
/// it names a word like `log`, `verbose`, `debug`, `profile`, `print`
/// (`if log_now:`, `if self.debug_mode:`), not just any user option.
pub(crate) fn is_debug_guard(test: &Expr) -> bool {
    const LOGGING_WORDS: &[&str] = &[
        "log", "logging", "verbose", "verbosity", "debug", "debugging", "profile", "profiling", "profiler", "print",
        "display", "show", "timing", "benchmark", "monitor", "track", "tensorboard", "wandb", "writer",
    ];
    test.any(&mut |e| match &e.kind {
        ExprKind::Name(n) => words(n).iter().any(|w| LOGGING_WORDS.contains(&w.as_str())),
        ExprKind::Attribute { attr, .. } => words(attr).iter().any(|w| LOGGING_WORDS.contains(&w.as_str())),
        _ => false,
    })
}

/// Whether an `if` test asks whether the program runs on the GPU
/// (`x.is_cuda`, `torch.cuda.is_available()`, `args.cuda`, `use_gpu`).
pub fn tests_for_the_device(test: &Expr) -> bool {
    test.any(&mut |e| match &e.kind {
        ExprKind::Name(n) | ExprKind::Attribute { attr: n, .. } => {
            words(n).iter().any(|w| w == "gpu" || Words::of(w).contains(Words::CUDA))
        }
        _ => false,
    })
}

/// Which arm of `if test:` runs on the GPU: `Some(true)` the body (`if
/// cuda:`, `if not args.use_cpu:`, `if torch.cuda.is_available():`),
/// `Some(false)` the `else` arm (`if args.no_cuda:`, `if args.cpu:`),
/// `None` when the test says neither.
pub fn gpu_arm(test: &Expr) -> Option<bool> {
    let (negated, inner) = match &test.kind {
        ExprKind::Unary { op: crate::ir::UnaryOp::Not, operand } => (true, &**operand),
        _ => (false, test),
    };
    if let Some(d) = inner.dotted() {
        // A flag: its name says which device it chooses.
        let ws = words(d.rsplit('.').next().unwrap_or(&d));
        let gpu = ws.iter().any(|w| w == "gpu" || Words::of(w).contains(Words::CUDA));
        let off = ws.iter().any(|w| matches!(w.as_str(), "no" | "disable" | "disabled" | "without"));
        let cpu = ws.iter().any(|w| w == "cpu") || (gpu && off);
        return if cpu {
            Some(negated)
        } else if gpu {
            Some(!negated)
        } else {
            None
        };
    }
    (!negated && tests_for_the_device(inner)).then_some(true)
}

/// The locals a function sets to a constant in its top-level statements
/// and binds in no other way, as (unset, set): those only ever `None`
/// (`custom_shape = None`, a setting left unset in a demo helper: a test
/// of one, `if custom_shape is not None:`, `if custom_shape:`, is never
/// true) and those only ever `True` or a non-zero integer (`intra_list =
/// 1`, then `if intra_list:`: the `else` never runs). Both empty when the
/// function has nested functions or classes (a `nonlocal` may bind the
/// name there).
pub(crate) fn fixed_locals(body: &[Stmt], params: &[crate::ir::Param]) -> (Vec<String>, Vec<String>) {
    use crate::ir::Literal;
    // The setting is made where the function starts, in its top-level
    // statements: most functions make none, and are not scanned.
    fn set_to_constant(s: &Stmt) -> Option<(&str, bool)> {
        match &s.kind {
            StmtKind::Assign { targets, value, .. } => {
                let set = match &value.kind {
                    ExprKind::Literal(Literal::Bool(true)) => true,
                    ExprKind::Literal(Literal::Int(i)) if *i != 0 => true,
                    _ if value.is_none() => false,
                    _ => return None,
                };
                match targets.as_slice() {
                    [t] => Some((t.as_name()?, set)),
                    _ => None,
                }
            }
            _ => None,
        }
    }
    let mut fixed: Vec<(String, bool)> = body.iter().filter_map(set_to_constant).map(|(n, v)| (n.to_string(), v)).collect();
    if fixed.is_empty() {
        return (Vec::new(), Vec::new());
    }
    let mut bound: HashSet<String> = HashSet::default();
    let mut nested = false;
    fn names(t: &Expr, out: &mut HashSet<String>) {
        t.any(&mut |e| {
            if let Some(n) = e.as_name() {
                out.insert(n.to_string());
            }
            false
        });
    }
    let mut constant: Vec<(&str, bool)> = Vec::new();
    for_each_stmt_in_function(body, &mut |s| {
        // Bound to a constant again: still fixed, when always the same one.
        if let Some(c) = set_to_constant(s) {
            constant.push(c);
            return;
        }
        match &s.kind {
            StmtKind::Assign { targets, .. } => targets.iter().for_each(|t| names(t, &mut bound)),
            StmtKind::AugAssign { target, .. } => names(target, &mut bound),
            StmtKind::For { target, .. } => names(target, &mut bound),
            StmtKind::With { items, .. } => items.iter().filter_map(|i| i.target.as_ref()).for_each(|t| names(t, &mut bound)),
            StmtKind::Import(bindings) => bound.extend(bindings.iter().map(|b| b.local.to_string())),
            StmtKind::Try(t) => bound.extend(t.handlers.iter().filter_map(|h| h.name.as_deref().map(str::to_string))),
            StmtKind::Delete(targets) => targets.iter().for_each(|t| names(t, &mut bound)),
            StmtKind::Function(_) | StmtKind::Class(_) => nested = true,
            _ => {}
        }
        // `(x := f())` binds `x` too.
        s.for_each_expr(|e| {
            e.any(&mut |x| {
                if let ExprKind::Named { target, .. } = &x.kind {
                    names(target, &mut bound);
                }
                false
            });
        });
    });
    if nested {
        return (Vec::new(), Vec::new());
    }
    fixed.retain(|(n, v)| {
        !bound.contains(n)
            && !params.iter().any(|p| p.name == *n)
            && constant.iter().all(|(m, w)| *m != n.as_str() || w == v)
    });
    fixed.sort_unstable();
    fixed.dedup();
    let (set, unset): (Vec<_>, Vec<_>) = fixed.into_iter().partition(|(_, v)| *v);
    (unset.into_iter().map(|(n, _)| n).collect(), set.into_iter().map(|(n, _)| n).collect())
}

/// Whether `if test:` can never run its `else`: it tests one of `set`
/// (locals only ever bound to `True` or a non-zero integer) alone.
pub(crate) fn tests_a_set_local(test: &Expr, set: &[String]) -> bool {
    test.as_name().is_some_and(|n| set.iter().any(|s| s == n))
}

/// Whether `if test:` can never run its body: it tests one of `unset`
/// (locals only ever bound to `None`) for being set: `x`, `x is not
/// None`, `x != None`, alone or in an `and`.
pub(crate) fn tests_an_unset_local(test: &Expr, unset: &[String]) -> bool {
    if unset.is_empty() {
        return false;
    }
    let is_unset = |e: &Expr| e.as_name().is_some_and(|n| unset.iter().any(|u| u == n));
    match &test.kind {
        ExprKind::Name(_) => is_unset(test),
        ExprKind::Compare { left, ops, comparators } if ops.len() == 1 => {
            matches!(ops[0], crate::ir::CmpOp::IsNot | crate::ir::CmpOp::NotEq)
                && comparators[0].is_none()
                && is_unset(left)
        }
        ExprKind::BoolOp { op: crate::ir::BoolOpKind::And, values } => values.iter().any(|v| tests_an_unset_local(v, unset)),
        _ => false,
    }
}

/// The statements of a loop body that run in every iteration: not under
/// an `if` or a nested loop, but inside a `with`, a `try` body, and the
/// arm of an `if` that chooses the GPU (`if cuda:`, `if
/// self.gpu_mode:`, `if not args.use_cpu:`, the `else` of `if
/// args.no_cuda:`: on the GPU, where a wait matters, it always runs).
pub(crate) fn every_iteration(body: &[Stmt]) -> Vec<&Stmt> {
    let mut out = Vec::new();
    every_iteration_into(body, &mut out);
    out
}

pub(crate) fn every_iteration_into<'s>(body: &'s [Stmt], out: &mut Vec<&'s Stmt>) {
    for s in body {
        match &s.kind {
            StmtKind::With { body, .. } | StmtKind::Block(body) => {
                out.push(s);
                every_iteration_into(body, out);
            }
            // `if cuda:` / `if self.gpu_mode:` / `if not args.use_cpu:`: on
            // the GPU, where a wait matters, the arm that chooses it runs
            // every time (the other is the CPU's).
            // An `if` with an `else` (its test runs every time; one of its
            // arms does: [`Context::copies_to_device_every_iteration`] asks
            // both).
            StmtKind::If { test, body, orelse } => match gpu_arm(test) {
                Some(true) => every_iteration_into(body, out),
                Some(false) => every_iteration_into(orelse, out),
                None if !orelse.is_empty() => out.push(s),
                None => {}
            },
            // A `try` body runs every time, unless it raises.
            StmtKind::Try(t) => every_iteration_into(&t.body, out),
            // A loop over micro-batches or time steps (`for j in
            // range(args.backprop_every):`) runs its body at least once
            // per step: a count of zero would train on nothing.
            // So does one over the parts of a batch (`for k, v in batch.items():`).
            StmtKind::For { iter, body, .. } if counts_up(iter) || matches!(iter.as_method_call(), Some((_, "items" | "values"))) => {
                out.push(s);
                every_iteration_into(body, out);
            }
            StmtKind::For { .. } | StmtKind::While { .. } | StmtKind::Function(_) | StmtKind::Class(_) => {}
            _ => out.push(s),
        }
    }
}

/// `range(n)` or `range(a, b)` with no literal `0` count: a loop over it
/// runs at least once where the program does any work.
fn counts_up(iter: &Expr) -> bool {
    let Some((func, args, _)) = iter.as_call() else { return false };
    func.as_name() == Some("range")
        && matches!(args.len(), 1 | 2)
        && !matches!(args, [n] if matches!(n.kind, ExprKind::Literal(crate::ir::Literal::Int(0))))
}
