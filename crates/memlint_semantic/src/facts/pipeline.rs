//! The input pipeline of a file: where `DataLoader`s are built, with the
//! options that decide how fast they feed the device, and where the
//! batches of loops over loaders are moved to an accelerator. The walk
//! records both ([`crate::Context::pipeline`]); rules join them once the
//! file has been walked.

use memlint_diagnostics::Span;

use crate::facts::datasets::dataset_in_memory;
use crate::ir::{Expr, ExprKind, Literal, Module, Stmt, StmtId, StmtKind};

/// What a call shows of one `DataLoader` option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opt<T> {
    /// Not passed, and no `*args`/`**kwargs` spread could pass it.
    Absent,
    /// Passed as this literal.
    Literal(T),
    /// Passed as something else (a variable, an expression), or a spread
    /// may pass it.
    Unknown,
}

impl<T: PartialEq> Opt<T> {
    /// Absent, or passed as `value`.
    pub fn absent_or(&self, value: T) -> bool {
        match self {
            Opt::Absent => true,
            Opt::Literal(v) => *v == value,
            Opt::Unknown => false,
        }
    }
}

/// One `torch.utils.data.DataLoader(...)` call.
#[derive(Debug, Clone)]
pub struct LoaderSite {
    /// The call.
    pub span: Span,
    /// `num_workers` (the keyword or the sixth positional argument).
    pub num_workers: Opt<i64>,
    /// `pin_memory`.
    pub pin_memory: Opt<bool>,
    /// `persistent_workers`.
    pub persistent_workers: Opt<bool>,
    /// `prefetch_factor`: `Literal(true)` when passed a value other than
    /// `None`, `Literal(false)` for `None`.
    pub prefetch_factor: Opt<bool>,
    /// The dotted name the call is assigned to (`train_loader`,
    /// `self.loader`), when its statement is a plain assignment of it.
    pub bound_to: Option<String>,
    /// The qualified name of the function the call is in (`None`: module
    /// level).
    pub function: Option<String>,
    /// The call is returned (`return DataLoader(...)`) or bound to a name
    /// the function returns: callers get the loader.
    pub returned: bool,
    /// The dataset holds tensors already (a `TensorDataset`, or a dataset
    /// class of the file whose `__getitem__` only returns items of its
    /// attributes, built in the call or bound to the name passed): batches
    /// are slices of memory, with nothing for worker processes to do.
    pub in_memory: bool,
    /// The batch is the whole dataset (`batch_size=len(dataset)`): one
    /// batch per epoch, which workers cannot split.
    pub whole_dataset: bool,
    /// The batch is one sample, as written (`batch_size=1`, or a name
    /// bound to `1`): each copy is one image, not a batch.
    pub one_sample: bool,
    /// For a loader bound at module level: the functions that build a
    /// loader of their own under the same name (`batcher` printed once in
    /// a notebook cell, then `batcher = DataLoader(...)` in `train()`):
    /// their loops move theirs, not this one's batches.
    pub shadowed_in: Vec<String>,
    /// The file reads one batch of it and nothing more: every use of the
    /// name it is bound to is `next(iter(name))` (a sample to plot, a
    /// shape to print). It feeds no loop.
    pub one_batch: bool,
    /// A loop draws its batches with `next(iter(name))`: a new iterator
    /// (and, with workers, new worker processes) at every step.
    pub redrawn: bool,
    /// For a loader bound at module level: where the next module-level
    /// `DataLoader(...)` bound to the same name starts. A notebook reuses
    /// `train_loader` from cell to cell; the module-level loops between
    /// the two bindings iterate this one.
    pub until: Option<u32>,
    /// For a loader not bound to a name of its own: the name of the dict
    /// or list that holds it (`test_loaders = {res: DataLoader(...)}`,
    /// `loaders["val"] = DataLoader(...)`).
    pub held_in: Option<String>,
}

impl LoaderSite {
    /// Whether the loader is for evaluation: the name it is bound to says so
    /// (`val_loader`, `test_dataloader`, `self.eval_dl`), or it is built in
    /// an evaluation function (`def eval_split(...)`). It runs once per
    /// epoch or to draw samples, not every training step.
    pub fn for_evaluation(&self) -> bool {
        const EVAL_WORDS: &[&str] = &["val", "valid", "validate", "validation", "test", "testing", "eval", "evaluation", "dev"];
        // Built in an evaluation function (`def eval_split(...)`, `def
        // validate(...)`, Lightning's `def val_dataloader(self)`).
        if self.function.as_deref().and_then(|f| f.rsplit('.').next()).is_some_and(|f| {
            crate::resolve::names_evaluation(f) || crate::resolve::words(f).iter().any(|w| EVAL_WORDS.contains(&w.as_str()))
        }) {
            return true;
        }
        let Some(b) = self.bound_to.as_ref().or(self.held_in.as_ref()) else { return false };
        let last = b.rsplit('.').next().unwrap_or(b);
        crate::resolve::words(last).iter().any(|w| {
            EVAL_WORDS.contains(&w.as_str())
                || EVAL_WORDS.iter().any(|e| w.strip_prefix(e).is_some_and(|rest| matches!(rest, "loader" | "dataloader" | "dl" | "data")))
        })
    }
}

/// A loader's batch moved to an accelerator (`x.to(device)`, `x.cuda()`,
/// `x.type(torch.cuda.FloatTensor)`).
#[derive(Debug, Clone)]
pub struct BatchMove {
    /// The move call.
    pub span: Span,
    /// `non_blocking=` as a literal.
    pub non_blocking: Option<bool>,
    /// The dotted name of the loader the loop iterates (`train_loader` of
    /// `for x, y in enumerate(train_loader)`), when the batch came from a
    /// loop over a named loader.
    pub loader: Option<String>,
    /// The batch was pinned on its way (`x.pin_memory().to(...)`).
    pub pinned: bool,
    /// The name of the batch moved (`x` of `x[0].to(device)`).
    pub batch: String,
    /// The qualified name of the function the move is in.
    pub function: Option<String>,
    /// The training-step loop the move is in.
    pub step_loop: Option<StmtId>,
    /// The move is in a training loop (one that runs `backward()`, itself
    /// or through helpers), not in an inference or feature-extraction loop.
    pub in_training: bool,
}

/// What the walk records of a file's input pipeline.
#[derive(Debug, Clone, Default)]
pub struct Pipeline {
    /// Every `DataLoader(...)` call (its span), in source order, with the
    /// qualified name of the function it is in.
    pub loader_calls: Vec<(Span, Option<String>)>,
    /// Every move of a loader's batch to an accelerator.
    pub moves: Vec<BatchMove>,
    /// The dotted names of the loaders that loops of the file iterate.
    pub iterated: Vec<String>,
    /// The training-step loops that read a value back to the host every
    /// step ([`crate::Context::syncs_every_step`]).
    pub synced_loops: Vec<StmtId>,
}

impl Pipeline {
    /// Whether the file iterates `loader` in a loop.
    pub fn iterates(&self, loader: &str) -> bool {
        self.iterated.iter().any(|l| l == loader)
    }

    /// The moves of the batches of `site`: from loops over the name it is
    /// bound to, and for a loader bound at module level, module-level loops
    /// between its binding and the next one of the same name
    /// ([`LoaderSite::until`]).
    fn moves_of<'a>(&'a self, site: &'a LoaderSite) -> impl Iterator<Item = &'a BatchMove> + 'a {
        let bound = site.bound_to.as_deref();
        // A local of a function that does not return it and iterates it
        // itself is that function's (two functions may each build and
        // iterate their own `train_loader`); one it passes on is moved
        // where it goes (`fit(net, train_iter)`, a parameter so named).
        let local = site.function.is_some()
            && !site.returned
            && bound.is_some_and(|b| !b.contains('.'))
            && self.moves.iter().any(|m| m.loader.as_deref() == bound && m.function == site.function);
        self.moves.iter().filter(move |m| {
            bound.is_some()
                && m.loader.as_deref() == bound
                && (!local || m.function == site.function)
                && !m.function.as_ref().is_some_and(|f| site.shadowed_in.contains(f))
                && (site.function.is_some()
                    || m.function.is_some()
                    || (m.span.start > site.span.start && site.until.is_none_or(|u| m.span.start < u)))
        })
    }

    /// Whether some training loop of the file moves the batches of `site`
    /// to an accelerator (a loop that only extracts features or runs
    /// inference, under `no_grad`, feeds no training).
    pub fn moves_batches_of(&self, site: &LoaderSite) -> bool {
        self.moves_of(site).any(|m| m.in_training)
    }

    /// Whether the batches of `site` go to an accelerator. When a loop of
    /// the file iterates the name the loader is bound to, that loop
    /// decides: a training loop moves the batches (`x.to(device)`, also
    /// through a comprehension over a batch's parts). Otherwise (the loader is passed on or
    /// returned) the program decides: this file or another file of the run
    /// (`run_moves`) moves some loader's batches to an accelerator.
    pub fn feeds_accelerator(&self, site: &LoaderSite, run_moves: bool) -> bool {
        match &site.bound_to {
            Some(b) if self.iterates(b) => self.moves_batches_of(site),
            _ => !self.moves.is_empty() || run_moves,
        }
    }

    /// Whether every move of the batches of `site` in training that the
    /// file makes (from a loop over the name it is bound to) is in a
    /// training-step loop that already reads a value back to the host
    /// every step: there the host waits for the device each step anyway.
    /// Moves outside training (one batch peeked at, an evaluation) do not
    /// decide. `false` when the file moves none of its batches in training.
    pub fn moves_only_in_synced_loops(&self, site: &LoaderSite) -> bool {
        let mut moves = self.moves_of(site).filter(|m| m.in_training).peekable();
        moves.peek().is_some() && moves.all(|m| m.step_loop.is_some_and(|l| self.synced_loops.contains(&l)))
    }

    /// Whether `site` feeds an accelerator during training: not a loader
    /// read for one batch only ([`LoaderSite::one_batch`]), not a loader
    /// for evaluation ([`LoaderSite::for_evaluation`]), and its batches go
    /// to an accelerator ([`Pipeline::feeds_accelerator`]).
    pub fn feeds_training(&self, site: &LoaderSite, run_moves: bool) -> bool {
        !site.for_evaluation() && !site.one_batch && self.feeds_accelerator(site, run_moves)
    }

    /// The `DataLoader(...)` calls of `module` (the file walked), with
    /// their options and where they go.
    /// `in_memory_class` answers for a dataset class of another module
    /// ([`dataset_in_memory`]).
    pub fn loaders(&self, module: &Module, in_memory_class: &dyn Fn(&Expr) -> Option<crate::facts::datasets::Items>) -> Vec<LoaderSite> {
        let mut sites = self
            .loader_calls
            .iter()
            .filter_map(|(span, function)| {
                let call = call_at(module, *span)?;
                let scope = scope_at(module, span.start);
                let LoaderOptions { num_workers, pin_memory, persistent_workers, prefetch_factor } =
                    loader_options(call, scope, &module.body);
                let stmt = module.stmt_at(span.start).and_then(|id| module.stmt(id));
                let bound_to = stmt.and_then(|s| match &s.kind {
                    StmtKind::Assign { targets, value, .. } if value.span == *span && targets.len() == 1 => {
                        targets[0].dotted().map(|d| d.to_string())
                    }
                    _ => None,
                });
                // `next(iter(DataLoader(ds, ...)))`: a loader built for one
                // batch (a shape check); workers would start for it alone.
                let inline_peek = stmt.is_some_and(|s| {
                    let mut found = false;
                    s.for_each_expr(&mut |e: &Expr| found |= e.any(&mut |x: &Expr| next_of_iter(x, &mut |inner: &Expr| inner.span == *span)));
                    found
                });
                let held_in = stmt.filter(|_| bound_to.is_none()).and_then(|s| match &s.kind {
                    StmtKind::Assign { targets, value, .. } if targets.len() == 1 => {
                        let mut base = &targets[0];
                        while let ExprKind::Subscript { value, .. } = &base.kind {
                            base = value;
                        }
                        let holds = matches!(value.kind, ExprKind::Dict(_) | ExprKind::Sequence(_) | ExprKind::Comprehension(_));
                        (holds || !std::ptr::eq(base, &targets[0])).then(|| base.dotted().map(|d| d.to_string())).flatten()
                    }
                    _ => None,
                });
                let (one_batch, redrawn) = match bound_to.as_deref() {
                    Some(b) => batch_reads(module, b),
                    None => (inline_peek, false),
                };
                let batch_size = call.keyword("batch_size").or_else(|| call.as_call().and_then(|(_, args, _)| args.get(1)));
                let returned = stmt.is_some_and(|s| matches!(&s.kind, StmtKind::Return(Some(v)) if v.span == *span))
                    || (function.is_some() && bound_to.as_deref().is_some_and(|b| returns_name(scope, b)));
                Some(LoaderSite {
                    span: *span,
                    num_workers,
                    pin_memory,
                    persistent_workers,
                    prefetch_factor,
                    bound_to,
                    function: function.clone(),
                    returned,
                    in_memory: dataset_in_memory(call, module, in_memory_class),
                    whole_dataset: batch_size.and_then(Expr::as_call).is_some_and(|(func, _, _)| func.as_name() == Some("len")),
                    one_sample: batch_size.and_then(|b| match &b.kind {
                        ExprKind::Literal(Literal::Int(n)) => Some(*n),
                        _ => int_constant(b, scope, &module.body),
                    }) == Some(1),
                    one_batch,
                    redrawn,
                    until: None,
                    shadowed_in: Vec::new(),
                    held_in,
                })
            })
            .collect::<Vec<_>>();
        // A module-level loader name is the loader's until the module
        // binds the name again: another loader, or whatever a later cell
        // assigns (`train_loader, test_loader = make_loaders(features)`).
        let module_level: Vec<(u32, Option<String>)> =
            sites.iter().filter(|s| s.function.is_none()).map(|s| (s.span.start, s.bound_to.clone())).collect();
        let local: Vec<(String, Option<String>)> =
            sites.iter().filter(|s| s.function.is_some()).map(|s| (s.function.clone().unwrap_or_default(), s.bound_to.clone())).collect();
        for site in sites.iter_mut().filter(|s| s.function.is_none() && s.bound_to.is_some()) {
            site.shadowed_in = local.iter().filter(|(_, b)| *b == site.bound_to).map(|(f, _)| f.clone()).collect();
            let name = site.bound_to.as_deref().unwrap_or_default();
            let rebound = first_module_level_binding_after(&module.body, name, site.span.end);
            site.until = module_level
                .iter()
                .filter(|(start, b)| *start > site.span.start && *b == site.bound_to)
                .map(|(start, _)| *start)
                .chain(rebound)
                .min();
        }
        sites
    }
}

/// The start of the first statement outside functions and classes,
/// after `after`, that assigns `name` (also as part of a tuple target).
fn first_module_level_binding_after(body: &[Stmt], name: &str, after: u32) -> Option<u32> {
    body.iter()
        .filter(|s| s.span.end > after)
        .find_map(|s| match &s.kind {
            StmtKind::Function(_) | StmtKind::Class(_) => None,
            StmtKind::Assign { targets, .. } if s.span.start > after && targets.iter().any(|t| t.binds(name)) => Some(s.span.start),
            _ => s.child_blocks().find_map(|b| first_module_level_binding_after(b, name, after)),
        })
}

/// How `module` reads the loader bound to `name`: whether every use of it
/// (apart from assignments to it) is `next(iter(name))`, and there is one,
/// none of them in a loop of its scope (one batch, a peek), or a loop over
/// it that leaves after its first batches (`for x, y in name: break`); and whether
/// some `next(iter(name))` is in such a loop (each iteration draws its
/// batch from a new iterator).
fn batch_reads(module: &Module, name: &str) -> (bool, bool) {
    let (mut uses, mut one_batch, mut repeated) = (0usize, 0usize, false);
    // `peek`: `e` is the iterable of a loop that leaves after its first
    // batches, a read of one batch when it is the name itself (maybe
    // under `enumerate(...)`).
    let mut count = |e: &Expr, in_loop: bool, peek: bool| {
        one_batch += usize::from(peek && crate::facts::scan::unwrap_iter_call(e).dotted().as_deref() == Some(name));
        e.any(&mut |x| {
            if x.dotted().as_deref() == Some(name) {
                uses += 1;
            }
            let next_of_iter = next_of_iter(x, &mut |inner| inner.dotted().as_deref() == Some(name));
            one_batch += usize::from(next_of_iter);
            repeated |= next_of_iter && in_loop;
            false
        });
    };
    fn walk(body: &[Stmt], in_loop: bool, count: &mut dyn FnMut(&Expr, bool, bool)) {
        for s in body {
            match &s.kind {
                StmtKind::Assign { value, .. } => count(value, in_loop, false),
                // A peek: `for x, y in name: ...; break`.
                StmtKind::For { iter, body, .. } if crate::facts::scan::stops_after_a_few(body) => count(iter, in_loop, true),
                _ => s.for_each_expr(&mut |e| count(e, in_loop, false)),
            }
            match &s.kind {
                StmtKind::Function(f) => walk(&f.body, false, count),
                StmtKind::Class(c) => walk(&c.body, false, count),
                StmtKind::For { .. } | StmtKind::While { .. } => s.child_blocks().for_each(|b| walk(b, true, count)),
                _ => s.child_blocks().for_each(|b| walk(b, in_loop, count)),
            }
        }
    }
    walk(&module.body, false, &mut count);
    (one_batch > 0 && uses == one_batch && !repeated, repeated)
}

/// Whether `x` is `next(iter(inner))` with `inner` one `is_loader` accepts.
fn next_of_iter(x: &Expr, is_loader: &mut dyn FnMut(&Expr) -> bool) -> bool {
    x.as_call().is_some_and(|(f, args, _)| {
        f.as_name() == Some("next")
            && args.first().and_then(Expr::as_call).is_some_and(|(g, inner, _)| g.as_name() == Some("iter") && inner.first().is_some_and(|i| is_loader(i)))
    })
}

/// Whether a `return` of `scope` (not of nested functions) returns `name`.
fn returns_name(scope: &[Stmt], name: &str) -> bool {
    let mut found = false;
    crate::ir::for_each_stmt_in_function(scope, &mut |s| {
        if let StmtKind::Return(Some(v)) = &s.kind {
            found |= v.dotted().as_deref() == Some(name);
        }
    });
    found
}

/// The span of keyword argument `name` of the call at `call` in `module`.
pub fn keyword_span(module: &Module, call: Span, name: &str) -> Option<Span> {
    call_at(module, call)?.keyword(name).map(|v| v.span)
}

/// The call expression of `module` with exactly `span`.
pub fn call_at(module: &Module, span: Span) -> Option<&Expr> {
    let stmt = module.stmt(module.stmt_at(span.start)?)?;
    fn find(e: &Expr, span: Span) -> Option<&Expr> {
        if e.span == span && matches!(e.kind, ExprKind::Call { .. }) {
            return Some(e);
        }
        if e.span.start > span.start || e.span.end < span.end {
            return None;
        }
        let mut found = None;
        e.for_each_child(|c| {
            if found.is_none() {
                found = find(c, span);
            }
        });
        found
    }
    let mut found = None;
    stmt.for_each_expr(|e| {
        if found.is_none() {
            found = find(e, span);
        }
    });
    found
}

/// The options of a `DataLoader(...)` call as far as the call shows them.
/// `DataLoader(dataset, batch_size, shuffle, sampler, batch_sampler,
/// num_workers, collate_fn, pin_memory, ...)`. A `**kwargs` spread is
/// resolved when its name is bound, in `scope`, to a dict literal or
/// `dict(...)` that nothing updates afterwards; otherwise it may pass any
/// option.
pub fn loader_options(call: &Expr, scope: &[Stmt], module_body: &[Stmt]) -> LoaderOptions {
    let Some((_, args, kws)) = call.as_call() else {
        return LoaderOptions {
            num_workers: Opt::Unknown,
            pin_memory: Opt::Unknown,
            persistent_workers: Opt::Unknown,
            prefetch_factor: Opt::Unknown,
        };
    };
    let positional_spread = args.iter().any(|a| matches!(a.kind, ExprKind::Starred(_)));
    let mut spread_keys: Vec<(String, Option<Expr>)> = Vec::new();
    let mut spread_unknown = positional_spread;
    for k in kws.iter().filter(|k| k.name.is_none()) {
        match resolve_kwargs(&k.value, scope) {
            Some(keys) => spread_keys.extend(keys),
            None => spread_unknown = true,
        }
    }
    let find = |name: &str, position: usize| -> Option<Option<&Expr>> {
        if let Some(v) = call.keyword(name) {
            return Some(Some(v));
        }
        if let Some(v) = args.get(position) {
            return Some(Some(v));
        }
        spread_keys.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_ref())
    };
    let workers = match find("num_workers", 5) {
        Some(Some(v)) => match (&v.kind, int_constant(v, scope, module_body)) {
            (ExprKind::Literal(Literal::Int(n)), _) => Opt::Literal(*n),
            (_, Some(n)) => Opt::Literal(n),
            _ => Opt::Unknown,
        },
        Some(None) => Opt::Unknown,
        None if spread_unknown => Opt::Unknown,
        None => Opt::Absent,
    };
    let flag = |name: &str, position: usize| match find(name, position) {
        Some(Some(v)) => match v.kind {
            ExprKind::Literal(Literal::Bool(b)) => Opt::Literal(b),
            _ => Opt::Unknown,
        },
        Some(None) => Opt::Unknown,
        None if spread_unknown => Opt::Unknown,
        None => Opt::Absent,
    };
    // `prefetch_factor` and `persistent_workers` are keyword-only.
    let prefetch_factor = match find("prefetch_factor", usize::MAX) {
        Some(Some(v)) => match v.kind {
            ExprKind::Literal(Literal::None) => Opt::Literal(false),
            ExprKind::Literal(Literal::Int(_)) => Opt::Literal(true),
            _ => Opt::Unknown,
        },
        Some(None) => Opt::Unknown,
        None if spread_unknown => Opt::Unknown,
        None => Opt::Absent,
    };
    LoaderOptions {
        num_workers: workers,
        pin_memory: flag("pin_memory", 7),
        persistent_workers: flag("persistent_workers", usize::MAX),
        prefetch_factor,
    }
}

/// The options of a `DataLoader(...)` call that decide how it loads, as
/// far as the call and the `**kwargs` dict it spreads show them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoaderOptions {
    /// `num_workers`.
    pub num_workers: Opt<i64>,
    /// `pin_memory`.
    pub pin_memory: Opt<bool>,
    /// `persistent_workers`.
    pub persistent_workers: Opt<bool>,
    /// `prefetch_factor`: `Literal(true)` for an integer, `Literal(false)`
    /// for `None`.
    pub prefetch_factor: Opt<bool>,
}

/// The integer a name stands for: bound once, to an integer literal, in
/// `scope` (the function) or else at module level (`num_workers = 0`
/// in a notebook's first cell).
fn int_constant(v: &Expr, scope: &[Stmt], module_body: &[Stmt]) -> Option<i64> {
    let name = v.as_name()?;
    let lookup = |body: &[Stmt], nested: bool| -> Option<Option<i64>> {
        let mut values = Vec::new();
        let mut visit = |s: &Stmt| match &s.kind {
            StmtKind::Assign { targets, value, .. } if targets.iter().any(|t| t.binds(name)) => values.push(match (&value.kind, targets.len()) {
                (ExprKind::Literal(Literal::Int(n)), 1) if targets[0].as_name() == Some(name) => Some(*n),
                _ => None,
            }),
            StmtKind::AugAssign { target, .. } if target.as_name() == Some(name) => values.push(None),
            _ => {}
        };
        if nested {
            crate::ir::for_each_stmt_in_function(body, &mut visit);
        } else {
            for s in body {
                visit(s);
            }
        }
        match values.as_slice() {
            [] => None,
            [one] => Some(*one),
            _ => Some(None),
        }
    };
    match lookup(scope, true) {
        Some(found) => found,
        None => lookup(module_body, false).flatten(),
    }
}

/// The values `name` is assigned (alone on the left) in `scope`, nested
/// blocks included, or, when `scope` binds it nowhere, at module level.
pub(crate) fn bound_values<'a>(name: &str, scope: &'a [Stmt], module_body: &'a [Stmt]) -> Vec<&'a Expr> {
    let lookup = |body: &'a [Stmt]| {
        let mut values: Vec<&'a Expr> = Vec::new();
        crate::ir::for_each_stmt_in_function(body, &mut |s| {
            if let StmtKind::Assign { targets, value, .. } = &s.kind {
                // `train, val = random_split(ds, [n, m])` binds a part of
                // what the call gives.
                let part = |t: &Expr| matches!(&t.kind, ExprKind::Sequence(items) if items.iter().any(|i| i.as_name() == Some(name)));
                if targets.len() == 1 && (targets[0].as_name() == Some(name) || part(&targets[0])) {
                    values.push(value.as_ref());
                }
            }
        });
        values
    };
    let local = lookup(scope);
    if local.is_empty() && !std::ptr::eq(scope, module_body) {
        lookup(module_body)
    } else {
        local
    }
}

/// The keys of a `**name` spread (each with its value when the dict
/// literal shows one): `name` assigned once in `scope` (statements of the
/// function or module, nested blocks included) to a dict literal,
/// `dict(k=v, ...)`, or a conditional of two such (`{...} if cuda else
/// {}`: the keys of both arms, values unknown where the arms differ), and
/// never changed afterwards (`name.update(...)`, `name[k] = v`).
fn resolve_kwargs(value: &Expr, scope: &[Stmt]) -> Option<Vec<(String, Option<Expr>)>> {
    let name = value.as_name()?;
    let mut bound: Option<&Expr> = None;
    let mut count = 0usize;
    let mut changed = false;
    crate::ir::for_each_stmt_in_function(scope, &mut |s| match &s.kind {
        StmtKind::Assign { targets, value, .. } => {
            for t in targets.iter() {
                if t.as_name() == Some(name) {
                    count += 1;
                    bound = Some(value);
                }
                if let ExprKind::Subscript { value: base, .. } = &t.kind {
                    if base.as_name() == Some(name) {
                        changed = true;
                    }
                }
            }
        }
        StmtKind::AugAssign { target, .. } if target.as_name() == Some(name) => changed = true,
        StmtKind::Expr(e) => {
            if let Some((recv, "update" | "setdefault" | "pop" | "__setitem__")) = e.as_method_call() {
                if recv.as_name() == Some(name) {
                    changed = true;
                }
            }
        }
        _ => {}
    });
    if count != 1 || changed {
        return None;
    }
    dict_keys(bound?)
}

fn dict_keys(e: &Expr) -> Option<Vec<(String, Option<Expr>)>> {
    match &e.kind {
        ExprKind::Dict(items) => {
            let mut out = Vec::with_capacity(items.len());
            for (k, v) in items {
                match k.as_ref().map(|k| &k.kind) {
                    Some(ExprKind::Literal(Literal::Str(s))) => out.push((s.to_string(), Some(v.clone()))),
                    // `**other` inside the literal, or a computed key.
                    _ => return None,
                }
            }
            Some(out)
        }
        ExprKind::Call { func, args, keywords: kws, .. } if func.as_name() == Some("dict") && args.is_empty() => {
            let mut out = Vec::with_capacity(kws.len());
            for k in kws.iter() {
                out.push((k.name.as_ref()?.to_string(), Some(k.value.clone())));
            }
            Some(out)
        }
        ExprKind::IfExp { body, orelse, .. } => {
            let a = dict_keys(body)?;
            let b = dict_keys(orelse)?;
            let mut out: Vec<(String, Option<Expr>)> = Vec::new();
            for (k, v) in a.iter().chain(b.iter()) {
                match out.iter_mut().find(|(o, _)| o == k) {
                    Some(slot) => {
                        let same = matches!((&slot.1, v), (Some(x), Some(y)) if literal_eq(x, y));
                        if !same {
                            slot.1 = None;
                        }
                    }
                    None => out.push((k.clone(), v.clone())),
                }
            }
            // A key only one arm passes is unknown: the other arm leaves
            // the default.
            for (k, v) in out.iter_mut() {
                let in_both = a.iter().any(|(x, _)| x == k) && b.iter().any(|(x, _)| x == k);
                if !in_both {
                    *v = None;
                }
            }
            Some(out)
        }
        _ => None,
    }
}

fn literal_eq(a: &Expr, b: &Expr) -> bool {
    match (&a.kind, &b.kind) {
        (ExprKind::Literal(Literal::Int(x)), ExprKind::Literal(Literal::Int(y))) => x == y,
        (ExprKind::Literal(Literal::Bool(x)), ExprKind::Literal(Literal::Bool(y))) => x == y,
        _ => false,
    }
}

/// The statements a name used at `offset` is looked up in: the body of
/// the innermost function of `module` containing `offset`, or the module.
pub fn scope_at(module: &Module, offset: u32) -> &[Stmt] {
    fn inner(body: &[Stmt], offset: u32) -> Option<&[Stmt]> {
        for s in body {
            if s.span.start > offset || s.span.end < offset {
                continue;
            }
            match &s.kind {
                StmtKind::Function(f) => return Some(inner(&f.body, offset).unwrap_or(&f.body)),
                StmtKind::Class(c) => return inner(&c.body, offset),
                _ => {
                    for b in s.child_blocks() {
                        if let Some(found) = inner(b, offset) {
                            return Some(found);
                        }
                    }
                    return None;
                }
            }
        }
        None
    }
    inner(&module.body, offset).unwrap_or(&module.body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::Keyword;

    fn call(args: Vec<Expr>, kws: Vec<(&str, Expr)>) -> Expr {
        Expr::new(
            Span::new(0, 0),
            ExprKind::Call {
                func: Box::new(Expr::new(Span::new(0, 0), ExprKind::Name("DataLoader".into()))),
                args: args.into_boxed_slice(),
                keywords: kws.into_iter().map(|(k, v)| Keyword { name: Some(k.into()), value: v }).collect(),
                args_start: 0,
            },
        )
    }

    fn lit(l: Literal) -> Expr {
        Expr::new(Span::new(0, 0), ExprKind::Literal(l))
    }

    /// The options as written: literals read, absent ones absent, the
    /// sixth positional argument is `num_workers`, `prefetch_factor=None`
    /// is none.
    #[test]
    fn loader_options_as_written() {
        let options = |c: &Expr| loader_options(c, &[], &[]);
        let loader = call(vec![], vec![("num_workers", lit(Literal::Int(0))), ("pin_memory", lit(Literal::Bool(true)))]);
        assert_eq!(
            options(&loader),
            LoaderOptions {
                num_workers: Opt::Literal(0),
                pin_memory: Opt::Literal(true),
                persistent_workers: Opt::Absent,
                prefetch_factor: Opt::Absent,
            }
        );
        let bare = call(vec![], vec![("persistent_workers", lit(Literal::Bool(true))), ("prefetch_factor", lit(Literal::Int(2)))]);
        assert_eq!(
            options(&bare),
            LoaderOptions {
                num_workers: Opt::Absent,
                pin_memory: Opt::Absent,
                persistent_workers: Opt::Literal(true),
                prefetch_factor: Opt::Literal(true),
            }
        );
        let positional = call((0..6).map(|i| lit(Literal::Int(i))).collect(), vec![("prefetch_factor", lit(Literal::None))]);
        let o = options(&positional);
        assert_eq!((o.num_workers, o.prefetch_factor), (Opt::Literal(5), Opt::Literal(false)));
        // A `**kwargs` spread the call cannot read may pass anything.
        let spread = Expr::new(
            Span::new(0, 0),
            ExprKind::Call {
                func: Box::new(Expr::new(Span::new(0, 0), ExprKind::Name("DataLoader".into()))),
                args: Box::new([]),
                keywords: vec![Keyword { name: None, value: Expr::new(Span::new(0, 0), ExprKind::Name("kw".into())) }].into_boxed_slice(),
                args_start: 0,
            },
        );
        assert_eq!(options(&spread).num_workers, Opt::Unknown);
    }
}
