//! The joined index's queries and the call-graph facts (roles, grad mode,
//! step events) computed once when the files are joined; resolving names
//! across files is `resolve.rs`'s.

use super::*;

impl ProjectIndex {
    /// An index that knows nothing (single-file use).
    pub fn empty() -> ProjectIndex {
        ProjectIndex::default()
    }

    /// Joins per-file summaries.
    pub fn build(files: Vec<FileSummary>) -> ProjectIndex {
        IndexBuilder::fill(files).finish()
    }

    /// The module classes and the optimizer classes.
    pub(super) fn classify_classes(&self) -> (HashSet<String>, HashSet<String>) {
        // Each base resolved once; then rounds until nothing changes (the
        // least fixpoint: a class is a module or an optimizer when a base is).
        let classes: Vec<(&str, &ClassSummary, Vec<&str>)> = self
            .classes
            .iter()
            .map(|(q, c)| (q.as_str(), c, c.bases.iter().map(|b| self.canonical_str(b)).collect()))
            .collect();
        let mut modules: HashSet<&str> = HashSet::default();
        let mut optimizers: HashSet<&str> = HashSet::default();
        let mut changed = true;
        while changed {
            changed = false;
            for (q, c, bases) in &classes {
                if !modules.contains(q)
                    && (c.is_module_locally
                        || bases.iter().any(|b| TORCH_MODULE_BASES.contains(b) || modules.contains(b)))
                {
                    modules.insert(q);
                    changed = true;
                }
                if !optimizers.contains(q) && (c.is_optimizer_locally || bases.iter().any(|b| optimizers.contains(b))) {
                    optimizers.insert(q);
                    changed = true;
                }
            }
        }
        let module_classes = modules.into_iter().map(str::to_string).collect();
        let optimizer_classes = optimizers.into_iter().map(str::to_string).collect();
        (module_classes, optimizer_classes)
    }

    /// The functions and classes that disable grad themselves.
    pub(super) fn find_grad_disabling(&self) -> HashSet<String> {
        let mut out = HashSet::default();
        for (q, f) in &self.functions {
            if f.disables_grad {
                out.insert(q.clone());
            }
        }
        for (q, c) in &self.classes {
            if c.disables_grad {
                out.insert(q.clone());
            }
        }
        out
    }

    pub(super) fn decorated_off(&self, f: &FunctionSummary) -> bool {
        f.decorated_no_grad || f.project_decorators.iter().any(|d| self.grad_disabling.contains(&self.canonical(d)))
    }

    /// Methods that override `class.method` in the project's subclasses:
    /// a call of `self.method()` in the base class may run any of them.
    /// Keyed by the overridden method's id, in [`Names`] ids; a method the
    /// base calls but does not define is keyed by the id of the name its
    /// calls give (`Base.evaluate_mt`).
    pub(super) fn overrides(&self, names: &Names<'_>) -> HashMap<u32, Vec<u32>> {
        // Walked upwards from each method's class (a class has few
        // ancestors, while a base like `PreTrainedModel` has thousands of
        // descendants), one class per task.
        let mut by_class: HashMap<&str, Vec<&FunctionSummary>> = HashMap::default();
        for f in self.functions.values() {
            if let Some(class) = &f.class {
                by_class.entry(class.as_str()).or_default().push(f);
            }
        }
        let by_class: Vec<(&str, Vec<&FunctionSummary>)> = by_class.into_iter().collect();
        let pairs: Vec<(u32, u32)> = by_class
            .par_iter()
            .flat_map_iter(|(class, methods)| {
                let above = self.ancestors(class);
                let mut out = Vec::new();
                let mut m = String::new();
                for f in methods {
                    let Some(id) = names.function(&f.qualname) else { continue };
                    for a in &above {
                        m.clear();
                        m.push_str(a);
                        m.push('.');
                        m.push_str(&f.name);
                        // Also a method the base only calls (`self.evaluate_mt()`
                        // in a base that leaves it to its subclasses): the
                        // name its calls resolve to.
                        if let Some(over) = names.ids.get(m.as_str()) {
                            out.push((*over, id));
                        }
                    }
                }
                out
            })
            .collect();
        let mut out: HashMap<u32, Vec<u32>> = HashMap::default();
        for (m, q) in pairs {
            out.entry(m).or_default().push(q);
        }
        for v in out.values_mut() {
            v.sort_unstable();
        }
        out
    }

    /// The call-graph facts, each a fixpoint computed with a worklist over
    /// integer ids of the names that appear as callers and callees.
    pub(super) fn propagate(&mut self, calls: &[CallSite]) {
        // Each callee's canonical name, once (in parallel): the facts
        // below ask it of every call.
        let canon: Vec<&str> = {
            use rayon::prelude::*;
            calls.par_iter().with_min_len(1024).map(|c| self.canonical_str(&c.callee)).collect()
        };
        let called: HashSet<String> = canon.iter().map(|q| q.to_string()).collect();
        // Functions called only outside loops or once per epoch: a callee
        // any site calls in a loop drops out.
        let mut rarely: HashSet<String> = HashSet::default();
        let mut often: HashSet<&str> = HashSet::default();
        for (c, q) in calls.iter().zip(&canon) {
            if c.in_loop && !c.per_epoch {
                often.insert(q);
            }
        }
        for &q in &canon {
            if !often.contains(q) && self.functions.contains_key(q) && !rarely.contains(q) {
                rarely.insert(q.to_string());
            }
        }
        // Functions reached only once per epoch: every call site runs once
        // per epoch of a training loop, or is in such a function (a decode
        // helper of a validation run at the end of each epoch), or less
        // often: under a logging interval (`if step % k == 0:
        // debug_image(...)`). The least fixpoint from those sites, in rounds.
        let mut epoch_only: HashSet<String> = HashSet::default();
        if calls.iter().any(|c| c.per_epoch || c.logged) {
            // Each function's sites: per epoch, or the caller's name.
            let mut sites: HashMap<&str, Vec<(bool, Option<&str>)>> = HashMap::default();
            for (c, &q) in calls.iter().zip(&canon) {
                let Some(f) = self.functions.get(q) else { continue };
                // `if T % replay_frequency == 0: dqn.learn(mem)`: an interval
                // around a function that trains once per call (its own
                // `backward()` or optimizer step outside its loops) is the
                // training cadence of an RL loop, not a logging interval.
                let trains = f.backward_per_call || f.steps_once;
                let rare = c.per_epoch || (c.logged && !trains);
                sites.entry(q).or_default().push((rare, c.caller.as_deref().map(|caller| self.canonical_str(caller))));
            }
            let mut changed = true;
            while changed {
                changed = false;
                for (q, ss) in &sites {
                    if epoch_only.contains(*q) {
                        continue;
                    }
                    let all = ss.iter().all(|(per_epoch, caller)| *per_epoch || caller.is_some_and(|c| epoch_only.contains(c)));
                    if all {
                        epoch_only.insert(q.to_string());
                        changed = true;
                    }
                }
            }
        }
        drop(canon);
        self.called = called;
        self.rarely_called = rarely;
        self.epoch_only = epoch_only;
        let mut names = Names::default();
        names.ids.reserve(self.functions.len() + calls.len());
        // The summaries by id, so that no fact below looks a name up again.
        let mut summaries: Vec<&FunctionSummary> = Vec::with_capacity(self.functions.len());
        for (q, f) in &self.functions {
            names.intern(q);
            summaries.push(f);
        }
        names.functions = names.list.len();
        // Building an instance of a project class runs its `__init__`: a
        // mask or buffer helper built in `forward` (`TriangularCausalMask(B,
        // L, device=...)`) runs every step. Not modules' nor optimizers'
        // (built once, then called).
        let constructor = |callee: &str| {
            let class = self.canonical_str(callee);
            let plain = self.classes.contains_key(class)
                && !self.module_classes.contains(class)
                && !self.optimizer_classes.contains(class);
            if !plain {
                return None;
            }
            self.functions.get_key_value(format!("{class}.__init__").as_str()).map(|(k, _)| k.as_str())
        };
        let edges: Vec<Edge> = calls
            .iter()
            .map(|c| Edge {
                caller: c.caller.as_deref().map(|x| names.intern(x)),
                callee: match constructor(&c.callee) {
                    Some(init) => names.intern(init),
                    None => names.intern(&c.callee),
                },
                off_here: c.grad_off || c.contexts.iter().any(|x| self.grad_disabling.contains(x)),
            })
            .collect();
        let n = names.list.len();
        let is_function = |id: u32| (id as usize) < names.functions;
        let fsum = |id: u32| summaries[id as usize];
        let overrides = self.overrides(&names);
        let no_overrides: Vec<u32> = Vec::new();
        // What a call may run: the callee, and for `self.m()` the
        // overrides of `m` (project functions only).
        let targets = |i: usize| -> (Option<u32>, &[u32]) {
            let e = &edges[i];
            let over = if calls[i].via_self { overrides.get(&e.callee).unwrap_or(&no_overrides) } else { &no_overrides };
            (is_function(e.callee).then_some(e.callee), over.as_slice())
        };
        let mut site_pairs = Vec::with_capacity(edges.len());
        let mut caller_pairs = Vec::with_capacity(edges.len());
        for (i, e) in edges.iter().enumerate() {
            let (callee, over) = targets(i);
            site_pairs.extend(callee.iter().chain(over).map(|t| (*t, i as u32)));
            if let Some(caller) = e.caller {
                caller_pairs.push((caller, i as u32));
            }
        }
        // The calls that may run each function, and the calls each caller makes.
        let sites = Csr::new(n, &site_pairs);
        let by_caller = Csr::new(n, &caller_pairs);
        // The functions a change of `caller` may change, through its calls.
        let callees_of = |caller: u32, out: &mut Vec<u32>| {
            for &i in by_caller.of(caller) {
                let (callee, over) = targets(i as usize);
                out.extend(callee.iter().chain(over));
            }
        };

        // The facts below are independent of each other: computed side by side.
        let this = &*self;
        let grad_off_only = || {
            // Grad off at every call site: the greatest fixpoint, so that a
            // recursive helper called only under no_grad from outside counts.
            // A function with no known caller runs with grad on as far as we know.
            let decorated: Vec<bool> = (0..n as u32).map(|id| is_function(id) && this.decorated_off(fsum(id))).collect();
            // A method no call resolves to, whose name is called only with
            // grad off on receivers their files cannot resolve
            // (`unit.load_from(w)` over `block.named_children()` under
            // `torch.no_grad()`): those calls are the ones that run it.
            let dynamic_off = |id: u32| {
                is_function(id) && sites.of(id).is_empty() && fsum(id).class.is_some() && {
                    let name = fsum(id).name.as_str();
                    this.dynamic_off.contains(name) && !this.dynamic_on.contains(name)
                }
            };
            let mut off: Vec<bool> =
                (0..n).map(|id| decorated[id] || !sites.of(id as u32).is_empty() || dynamic_off(id as u32)).collect();
            let mut work: Vec<u32> = (0..n as u32).filter(|id| !sites.of(*id).is_empty()).collect();
            while let Some(id) = work.pop() {
                let id_ = id as usize;
                if !off[id_] || decorated[id_] {
                    continue;
                }
                let all_off =
                    sites.of(id).iter().all(|&i| edges[i as usize].off_here || edges[i as usize].caller.is_some_and(|c| off[c as usize]));
                if !all_off {
                    off[id_] = false;
                    callees_of(id, &mut work);
                }
            }
            names.set(&off)
        };
        let step_code = |step_helpers: &[bool]| {
            // Step code: roots, then whatever they (or step loops) call.
            let mut step = vec![false; n];
            let mut work: Vec<u32> = Vec::new();
            // A step helper called in a loop (`self.run_step(batch)` in
            // `run_loop`, its backward in a helper of its own): one call is
            // one training step, so what it calls runs every step.
            for id in 0..names.functions as u32 {
                if step_helpers[id as usize] && !fsum(id).unit_test && sites.of(id).iter().any(|&i| calls[i as usize].in_loop) {
                    step[id as usize] = true;
                    work.push(id);
                }
            }
            for id in 0..names.functions as u32 {
                let f = fsum(id);
                let optimizer_step = f.name == "step" && f.class.as_ref().is_some_and(|c| this.optimizer_classes.contains(c));
                let forward = f.name == "forward" && f.class.as_ref().is_some_and(|c| this.module_classes.contains(c));
                // A function that merely contains a step loop is not step code
                // itself: what it calls before or after the loop runs once.
                // A custom autograd function's `forward` runs where its
                // `apply` is called, not as a step of its own.
                let autograd =
                    f.class.as_ref().and_then(|c| this.classes.get(c.as_str())).is_some_and(|c| c.autograd_function);
                if (f.step_root && !autograd) || optimizer_step || forward {
                    step[id as usize] = true;
                    work.push(id);
                }
            }
            // Only project functions have call sites.
            // A call under a logging interval or condition does not run
            // every step.
            let every_step = |i: u32| !calls[i as usize].logged;
            for id in 0..names.functions as u32 {
                if !step[id as usize]
                    && !fsum(id).unit_test
                    && sites.of(id).iter().any(|&i| calls[i as usize].in_step_loop && every_step(i))
                {
                    step[id as usize] = true;
                    work.push(id);
                }
            }
            let mut next = Vec::new();
            while let Some(id) = work.pop() {
                next.clear();
                for &i in by_caller.of(id) {
                    if every_step(i) {
                        let (callee, over) = targets(i as usize);
                        next.extend(callee.iter().chain(over));
                    }
                }
                for &t in &next {
                    if !step[t as usize] && !fsum(t).unit_test {
                        step[t as usize] = true;
                        work.push(t);
                    }
                }
            }
            names.set(&step)
        };
        let backward = || {
            // Reaches backward through its callees, and once per call (backward
            // outside the function's loops, itself or through such a function
            // called outside its loops): callers of a callee that does.
            let callee_pairs: Vec<(u32, u32)> =
                edges.iter().enumerate().filter(|(_, e)| e.caller.is_some()).map(|(i, e)| (e.callee, i as u32)).collect();
            let callers = Csr::new(n, &callee_pairs);
            let upwards = |seed: Vec<bool>, outside_loops_only: bool| -> Vec<bool> {
                let mut set = seed;
                let mut work: Vec<u32> = (0..n as u32).filter(|id| set[*id as usize]).collect();
                while let Some(id) = work.pop() {
                    for &i in callers.of(id) {
                        let Some(caller) = edges[i as usize].caller else { continue };
                        let skipped = outside_loops_only && calls[i as usize].in_loop;
                        if !skipped && !set[caller as usize] {
                            set[caller as usize] = true;
                            work.push(caller);
                        }
                    }
                }
                set
            };
            let seed = |pick: fn(&FunctionSummary) -> bool| -> Vec<bool> {
                (0..n as u32).map(|id| is_function(id) && pick(fsum(id))).collect()
            };
            let reaches = upwards(seed(|f| f.calls_backward), false);
            let per_call = upwards(seed(|f| f.backward_per_call), true);
            // Steps an optimizer once per call (outside its own loops,
            // itself or through callees called outside its loops) and
            // reaches backward: a training-step helper.
            let steps_once = upwards(seed(|f| f.steps_once), true);
            let step_helpers: Vec<bool> = reaches.iter().zip(&steps_once).map(|(r, s)| *r && *s).collect();
            (names.set(&reaches), names.set(&per_call), step_helpers)
        };
        let performs = || {
            // Step events through callees (and, for `self.m()`, overrides of `m`).
            let mut performs: Vec<StepKinds> =
                (0..n as u32).map(|id| if is_function(id) { fsum(id).step_kinds } else { StepKinds::empty() }).collect();
            // Who learns from whom: each call's caller from its callee and,
            // for `self.m()`, from the overrides of `m`.
            let mut learner_pairs = Vec::with_capacity(edges.len());
            for (i, e) in edges.iter().enumerate() {
                let Some(caller) = e.caller else { continue };
                learner_pairs.push((e.callee, caller));
                if calls[i].via_self {
                    learner_pairs.extend(overrides.get(&e.callee).unwrap_or(&no_overrides).iter().map(|o| (*o, caller)));
                }
            }
            let learners = Csr::new(n, &learner_pairs);
            let mut work: Vec<u32> = (0..n as u32).filter(|id| !performs[*id as usize].is_empty()).collect();
            while let Some(id) = work.pop() {
                let k = performs[id as usize];
                for &caller in learners.of(id) {
                    let cur = &mut performs[caller as usize];
                    if !cur.contains(k) {
                        *cur |= k;
                        work.push(caller);
                    }
                }
            }
            let performs: HashMap<String, StepKinds> = (0..n)
                .filter(|id| !performs[*id].is_empty())
                .map(|id| (names.list[id].to_string(), performs[id]))
                .collect();
            performs
        };
        let eval_by_flag = || {
            let mut eval_by_flag = HashSet::default();
            for id in 0..names.functions as u32 {
                let f = fsum(id);
                let Some(pos) = f.train_flag_param else { continue };
                let name = f.train_flag_name.clone().unwrap_or_default();
                // `cross_valid=True` for a flag that says evaluation.
                let evaluates = |s: &CallSite| match f.train_flag_negated {
                    false => s.false_positions.contains(&pos) || s.false_keywords.contains(&name),
                    true => s.true_positions.contains(&pos) || s.true_keywords.contains(&name),
                };
                // Only a call that evaluates with grad on: `with
                // torch.no_grad(): self._run_one_epoch(cross_valid=True)`
                // evaluates as it should.
                if sites.of(id).iter().any(|&i| evaluates(&calls[i as usize]) && !edges[i as usize].off_here) {
                    eval_by_flag.insert(names.list[id as usize].to_string());
                }
            }
            eval_by_flag
        };
        // Positions at which every known call passes a frozen model: one
        // frozen at the site, a construction of a class that freezes
        // itself, or a parameter of the caller that every call of the
        // caller passes frozen (`calculate_fid(paths)` building the model,
        // `statistics(x, model)`, `get_activations(x, model)`). The sets
        // only grow, so the rounds stop at a fixed point.
        let frozen_args = || {
            let mut frozen: Vec<Vec<usize>> = vec![Vec::new(); names.functions];
            let mut changed = true;
            while changed {
                changed = false;
                for id in 0..names.functions as u32 {
                    let mut common: Option<Vec<usize>> = None;
                    for &i in sites.of(id) {
                        let s = &calls[i as usize].frozen;
                        let caller = edges[i as usize].caller.filter(|c| is_function(*c));
                        let at = |p: usize| {
                            s.positions.contains(&p)
                                || s.built.iter().any(|(q, c)| *q == p && self.self_frozen(&c.class).is_some_and(|u| c.keeps_freeze(u)))
                                || s.forwarded.iter().any(|(q, j)| *q == p && caller.is_some_and(|c| frozen[c as usize].contains(j)))
                        };
                        let cur = common.get_or_insert_with(|| {
                            s.positions.iter().copied().chain(s.built.iter().map(|b| b.0)).chain(s.forwarded.iter().map(|f| f.0)).collect()
                        });
                        cur.retain(|&p| at(p));
                        if cur.is_empty() {
                            break;
                        }
                    }
                    let now = common.unwrap_or_default();
                    if now.len() > frozen[id as usize].len() {
                        frozen[id as usize] = now;
                        changed = true;
                    }
                }
            }
            let out: HashMap<String, Vec<usize>> =
                frozen.into_iter().enumerate().filter(|(_, f)| !f.is_empty()).map(|(id, f)| (names.list[id].to_string(), f)).collect();
            out
        };
        let ((no_grad_only, (reaches_backward, backward_per_call, step_code)), (performs, (eval_by_flag, frozen_args))) = rayon::join(
            || {
                rayon::join(grad_off_only, || {
                    let (reaches, per_call, step_helpers) = backward();
                    (reaches, per_call, step_code(&step_helpers))
                })
            },
            || (performs(), (eval_by_flag(), frozen_args())),
        );
        self.no_grad_only = no_grad_only;
        self.step_code = step_code;
        self.reaches_backward = reaches_backward;
        self.backward_per_call = backward_per_call;
        self.performs = performs;
        self.eval_by_flag = eval_by_flag;
        self.frozen_args = frozen_args;
    }

    /// The summary of a project function.
    pub fn function(&self, qualname: &str) -> Option<&FunctionSummary> {
        self.functions.get(qualname)
    }

    /// Whether `qualified` (a function or class, through re-exports)
    /// disables grad when used as a decorator or context manager.
    pub fn disables_grad(&self, qualified: &str) -> bool {
        self.grad_disabling.contains(&self.canonical(qualified))
    }

    /// Whether every known call of the function runs with grad disabled.
    pub fn only_called_without_grad(&self, qualname: &str) -> bool {
        self.no_grad_only.contains(qualname)
    }

    /// Whether the function is step code (see [`Role::Step`]).
    pub fn is_step_code(&self, qualname: &str) -> bool {
        self.step_code.contains(qualname)
    }

    /// Whether calling the function reaches `backward()`.
    pub fn reaches_backward(&self, qualname: &str) -> bool {
        self.reaches_backward.contains(qualname)
    }

    /// Whether one call of the function runs about one `backward()`: it
    /// calls it outside its own loops (itself or through such a helper).
    pub fn backward_per_call(&self, qualname: &str) -> bool {
        self.backward_per_call.contains(qualname)
    }

    /// What calling the function does to a training step (its callees
    /// included): `backward()`, optimizer steps, zeroing, scaler calls.
    pub fn performs(&self, qualname: &str) -> StepKinds {
        self.performs.get(qualname).copied().unwrap_or_default()
    }

    /// The argument positions (after `self`) at which every known call of
    /// the function passes a model whose parameters are all frozen.
    pub fn frozen_args(&self, qualname: &str) -> &[usize] {
        self.frozen_args.get(qualname).map_or(&[], Vec::as_slice)
    }

    /// Whether the function evaluates when a caller passes `False` to its
    /// train-mode flag parameter.
    pub fn evaluates_by_flag(&self, qualname: &str) -> bool {
        self.eval_by_flag.contains(qualname)
    }

    /// The project class of the instance `self.<attr>` of `class` holds
    /// when `__init__` binds it to a parameter that every construction
    /// of the class in the run gives an instance of that class
    /// (`self.model = model`, `Trainer(model, ...)` after `model =
    /// Net(args)`).
    pub fn constructed_attr(&self, class: &str, attr: &str) -> Option<&str> {
        self.constructed_attrs.get(self.canonical_str(class))?.iter().find(|(a, _)| a == attr).map(|(_, k)| k.as_str())
    }

    /// Whether a project class (through re-exports) is an `nn.Module`:
    /// `Some(false)` for a project class that is not one, `None` when the
    /// class is not the project's.
    pub fn class_is_module(&self, qualified: &str) -> Option<bool> {
        let c = self.canonical(qualified);
        self.classes.contains_key(&c).then(|| self.module_classes.contains(&c))
    }

    /// Whether `qualified` is a module class of the run that no file
    /// mentions outside its own body (no construction, no reference, no
    /// subclass, not named in a string), in a run that mentions some of
    /// its module classes: code nothing runs. A run of the class's file
    /// alone, which builds none, says nothing of it.
    pub fn is_unreferenced_module(&self, qualified: &str) -> bool {
        self.builds_modules
            && self.module_classes.contains(qualified)
            && !self.class_refs.contains(&build::last_segment_hash(qualified))
    }

    /// Whether a project class (through re-exports) is an optimizer: a
    /// torch optimizer's subclass, directly or through project bases.
    pub fn class_is_optimizer(&self, qualified: &str) -> bool {
        self.optimizer_classes.contains(self.canonical_str(qualified))
    }

    /// Whether a project class (through re-exports) is a module that owns
    /// no parameters ([`super::ClassSummary::parameter_free`]).
    pub fn is_parameter_free(&self, qualified: &str) -> bool {
        self.classes.get(self.canonical_str(qualified)).is_some_and(|c| c.parameter_free)
    }

    /// Whether a project class freezes all its parameters as it is built
    /// ([`super::ClassSummary::self_frozen`]).
    pub fn self_frozen(&self, qualified: &str) -> Option<&Option<(usize, String)>> {
        self.classes.get(self.canonical_str(qualified)).and_then(|c| c.self_frozen.as_ref())
    }

    /// What a project class (through re-exports) does per sample as a
    /// dataset ([`super::ClassSummary::dataset_items`]): `None` for one
    /// that computes its samples, and a function that returns an in-memory
    /// dataset ([`super::FunctionSummary::returns_in_memory_dataset`])
    /// gives one.
    pub fn dataset_items(&self, qualified: &str) -> Option<crate::facts::datasets::Items> {
        use crate::facts::datasets::Items;
        let q = self.canonical_str(qualified);
        if self.functions.get(q).is_some_and(|f| f.returns_in_memory_dataset) {
            return Some(Items::InMemory);
        }
        self.classes.get(q).map(|c| c.dataset_items).filter(|&i| i != Items::Computed)
    }

    /// Whether `attr` is an `nn.Parameter` attribute of the project class
    /// (or one of its project bases).
    pub fn class_has_parameter(&self, class: &str, attr: &str) -> bool {
        let mut seen = HashSet::default();
        let mut stack = vec![self.canonical(class)];
        while let Some(c) = stack.pop() {
            if !seen.insert(c.clone()) {
                continue;
            }
            if let Some(cs) = self.classes.get(&c) {
                if cs.parameter_attrs.iter().any(|a| a == attr) {
                    return true;
                }
                stack.extend(cs.bases.iter().map(|b| self.canonical(b)));
            }
        }
        false
    }

    /// The role of a project function.
    pub fn role(&self, qualname: &str) -> Role {
        let Some(f) = self.functions.get(qualname) else { return Role::Other };
        if f.unit_test {
            return Role::Test;
        }
        // An `__init__` run every step: a plain class built in step code.
        if (f.init_named && !(f.name == "__init__" && self.step_code.contains(qualname))) || self.applied.contains(qualname) {
            return Role::Setup;
        }
        if self.step_code.contains(qualname) {
            return Role::Step;
        }
        if f.setup_named {
            return Role::Setup;
        }
        Role::Other
    }

    /// Whether `qualname` is a plain function of the project (not a
    /// method: a framework may call those by name) that no call site of
    /// the run calls: a helper left unused, or only passed around as a
    /// value. `false` for a name the index does not define.
    pub fn is_uncalled_function(&self, qualname: &str) -> bool {
        let Some((owner, _)) = qualname.rsplit_once('.') else { return false };
        self.functions.contains_key(qualname) && !self.classes.contains_key(owner) && !self.called.contains(qualname)
    }

    /// Number of functions indexed (for tests and progress output).
    pub fn len(&self) -> usize {
        self.functions.len()
    }

    /// Whether some file of the run moves a data loader's batches to an
    /// accelerator (`x.to(device)` in a loop over a loader).
    pub fn moves_batches(&self) -> bool {
        self.moves_batches
    }

    /// Whether the run builds optimizers and each one's update is invariant
    /// to a constant scale of the gradients (`torch.optim.Adam` without
    /// weight decay, `AdamW`), none other and none chosen at run time.
    pub fn optimizers_scale_invariant(&self) -> bool {
        self.optimizers_scale_invariant
    }

    /// Whether some file of the run imports module `path` (or a name in
    /// it): what it defines may be used elsewhere in the run.
    pub fn is_imported_module(&self, path: &str) -> bool {
        build::module_names(path).iter().any(|m| self.imported.contains(m))
    }

    /// A torch release every torch the run's code can run on is below: some
    /// file imports a module torch removed in it (`torch._six`, 2.0).
    pub fn torch_below(&self) -> Option<(u32, u32)> {
        self.torch_below
    }

    /// Whether every known call of the function runs outside loops or
    /// once per epoch; `false` for a function nothing in the run calls.
    pub fn is_rarely_called(&self, qualname: &str) -> bool {
        self.rarely_called.contains(qualname)
    }

    /// Whether every known call of the function runs once per epoch of a
    /// training loop or less often (under a logging interval or a
    /// debugging condition), directly or through functions that are so
    /// reached (`greedy_decode` called by `run_validation` at the end of
    /// each epoch, `translate_using_latent` called by a `debug_image` run
    /// every `sample_every` steps); `false` for a function nothing in the
    /// run calls.
    pub fn is_reached_once_per_epoch(&self, qualname: &str) -> bool {
        self.epoch_only.contains(qualname)
    }

    /// Whether some project function named `name` returns a parameter
    /// moved to an accelerator ([`FunctionSummary::moves_param`]).
    pub fn may_move_an_argument(&self, name: &str) -> bool {
        !self.mover_names.is_empty() && self.mover_names.contains(name)
    }

    /// Whether nothing is indexed.
    pub fn is_empty(&self) -> bool {
        self.functions.is_empty() && self.classes.is_empty()
    }
}
