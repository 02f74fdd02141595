//! The project index: what one run knows about the functions and classes
//! of all its files, so a finding in one file can rest on facts from
//! another.
//!
//! It is built in two steps. [`summarize`] runs once per file (in
//! parallel, independent of every other file) and records the file's
//! definitions and call sites with what was visible locally: the grad mode
//! at each call site, the enclosing function, whether the site sits in a
//! training or evaluation loop. [`ProjectIndex::build`] joins the
//! summaries: it resolves callees through the project's own imports
//! (relative ones included) and computes, to a fixpoint over the call
//! graph, which functions
//!
//! - disable grad when used as a decorator or context manager
//!   (`smart_inference_mode()` defined in the project),
//! - run only with grad disabled (every call site is under `no_grad`, a
//!   grad-disabling decorator, or in such a function),
//! - are step code (reachable from a training/evaluation loop, a `forward`,
//!   an optimizer's `step`),
//! - call `backward()` (themselves or through what they call).
//!
//! What the index does not see: callees reached by dynamic dispatch
//! (`getattr`, callbacks stored in containers, methods of an object whose
//! class is unknown) and code outside the run. Queries answer "unknown"
//! there, and the rules treat unknown as "no evidence".

use rayon::prelude::*;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use crate::step::StepKinds;

/// Where a file sits in the project's module tree.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModuleInfo {
    /// Dotted module path (`timm.models.resnet`, or `train` for a script).
    pub path: String,
    /// The file is a package's `__init__`: relative imports resolve
    /// against the module itself, not its parent.
    pub is_package: bool,
}

impl ModuleInfo {
    /// Resolves a relative import target (`.utils.helper`, `..x`) to an
    /// absolute dotted name; absolute names are returned as they are.
    pub fn resolve_relative(&self, name: &str) -> String {
        let level = name.chars().take_while(|c| *c == '.').count();
        if level == 0 {
            return name.to_string();
        }
        let mut parts: Vec<&str> = if self.path.is_empty() { Vec::new() } else { self.path.split('.').collect() };
        // One dot is the current package.
        let up = if self.is_package { level - 1 } else { level };
        for _ in 0..up {
            parts.pop();
        }
        let rest = &name[level..];
        if !rest.is_empty() {
            parts.push(rest);
        }
        parts.join(".")
    }
}

/// The part a function plays in a training program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Runs while a graph may be live: a training or evaluation step, a
    /// `forward`, an optimizer's `step`, or something those call.
    Step,
    /// Construction, initialisation, conversion or loading code: no graph
    /// is live (`__init__`, `reset_parameters`, `_init_weights`, functions
    /// passed to `model.apply`, fuse/convert/quantize/load helpers).
    Setup,
    /// A unit test (or a helper in a test module).
    Test,
    /// Nothing is known.
    Other,
}

/// What one function looks like from its own file.
#[derive(Debug, Clone, Default)]
pub struct FunctionSummary {
    /// Fully qualified name: `module.Class.method`, `module.func`.
    pub qualname: String,
    /// The bare name.
    pub name: String,
    /// Qualified name of the class it is a method of.
    pub class: Option<String>,
    /// The body calls `backward()` or `torch.autograd.grad`.
    pub calls_backward: bool,
    /// The body calls `backward()` outside its own loops: one call is one step.
    pub backward_per_call: bool,
    /// A decorator of the function disables grad (torch's own, seen locally).
    pub decorated_no_grad: bool,
    /// Qualified names of the decorators that are not torch's (resolved
    /// against the project at join time).
    pub project_decorators: Vec<String>,
    /// Using the function as a decorator or context manager disables grad:
    /// it applies or returns `torch.no_grad`/`torch.inference_mode`, or is
    /// a `@contextmanager` that yields under one.
    pub disables_grad: bool,
    /// A returned value carries an autograd graph (a loss or model output
    /// not detached), and for tuple returns which positions do.
    pub returns_graph: bool,
    /// Positions of a returned tuple that carry a graph.
    pub returns_graph_at: Vec<usize>,
    /// Positions of arguments (after `self`) accumulated into `self.<attr>`
    /// (`self.sum += val`, `self.vals.append(val)`): a meter's `update`.
    pub accumulates_args: Vec<usize>,
    /// Position (after `self`) of a parameter that sets the train/eval
    /// mode (`net.train(mode=train_model)`).
    pub train_flag_param: Option<usize>,
    /// That parameter's name.
    pub train_flag_name: Option<String>,
    /// The name says construction/initialisation/conversion/loading.
    pub setup_named: bool,
    /// The name says construction or weight initialisation (`__init__`,
    /// `reset_parameters`, `_init_weights`): setup even when a step calls it.
    pub init_named: bool,
    /// A unit test or a helper in a test module.
    pub unit_test: bool,
    /// A `forward`, an optimizer's `step`, or a framework step hook.
    pub step_root: bool,
    /// The training-step events the body itself runs (see [`crate::step`]).
    pub step_kinds: StepKinds,
    /// The body changes its first argument (after `self`) in place
    /// (`x.clamp_(0)`, `x += 1`, `F.relu(x, inplace=True)`): a module whose
    /// `forward` does this overwrites what the module before it returned.
    /// Recorded for `forward` methods only (the one use).
    pub mutates_first_arg: bool,
    /// The body divides or multiplies a value by a non-literal
    /// (`loss / self.accum_steps`): a loss it returns may be scaled.
    pub scales_values: bool,
}

/// One call of a (possibly project) function.
#[derive(Debug, Clone, Default)]
pub struct CallSite {
    /// Qualified name of the enclosing function (`None` at module level).
    pub caller: Option<String>,
    /// The callee's qualified name as resolved in the calling file.
    pub callee: String,
    /// Grad is disabled at the site by what the file shows.
    pub grad_off: bool,
    /// Qualified names of enclosing `with` contexts that are not torch's
    /// (a project context manager may disable grad).
    pub contexts: Vec<String>,
    /// The site is inside a training or evaluation loop.
    pub in_step_loop: bool,
    /// The site is inside any loop of the caller.
    pub in_loop: bool,
    /// Argument positions (after `self` for methods) and keyword names
    /// passed the literal `False`.
    pub false_positions: Vec<usize>,
    /// Keyword names passed the literal `False`.
    pub false_keywords: Vec<String>,
    /// A call of `self.method(...)`: it may run an override of the method
    /// in any subclass.
    pub via_self: bool,
}

/// What one class looks like from its own file.
#[derive(Debug, Clone, Default)]
pub struct ClassSummary {
    /// Fully qualified name.
    pub qualname: String,
    /// Qualified names of the bases as resolved in the file.
    pub bases: Vec<String>,
    /// A base is a torch module class, or the class defines `forward` or
    /// owns parameters.
    pub is_module_locally: bool,
    /// A base is a torch optimizer.
    pub is_optimizer_locally: bool,
    /// `self.<attr>` assigned an `nn.Parameter` somewhere in the class.
    pub parameter_attrs: Vec<String>,
    /// `__enter__` disables grad.
    pub disables_grad: bool,
}

/// Everything one file contributes to the index.
#[derive(Debug, Clone, Default)]
pub struct FileSummary {
    /// The module.
    pub module: ModuleInfo,
    /// Functions and methods defined in the file.
    pub functions: Vec<FunctionSummary>,
    /// Classes defined in the file.
    pub classes: Vec<ClassSummary>,
    /// Calls to names that may be project functions.
    pub calls: Vec<CallSite>,
    /// `local name -> qualified name` of the module's imports (re-exports
    /// of package `__init__`s are followed through these).
    pub imports: Vec<(String, String)>,
    /// Qualified names of functions passed to `.apply(...)` (weight init).
    pub applied: Vec<String>,
    /// The file imports torch: without it no rule has anything to check.
    pub imports_torch: bool,
}

/// The joined facts of all files of a run.
#[derive(Debug, Default)]
pub struct ProjectIndex {
    functions: HashMap<String, FunctionSummary>,
    classes: HashMap<String, ClassSummary>,
    /// `module.name -> qualified target` for every import of every module.
    aliases: HashMap<String, String>,
    module_classes: HashSet<String>,
    optimizer_classes: HashSet<String>,
    grad_disabling: HashSet<String>,
    no_grad_only: HashSet<String>,
    step_code: HashSet<String>,
    reaches_backward: HashSet<String>,
    /// Functions one call of which runs `backward()` about once (not in a
    /// loop of their own): a per-batch step helper, not a `train_one_epoch`.
    backward_per_call: HashSet<String>,
    applied: HashSet<String>,
    /// Functions with a train-mode flag parameter that some caller passes `False`.
    eval_by_flag: HashSet<String>,
    /// What calling each function does to a training step, its callees included.
    performs: HashMap<String, StepKinds>,
    /// [`ProjectIndex::method_of`]'s answers by class and method, kept as
    /// they are asked: many call sites look up one inherited method, each
    /// time through the same chain of bases. Asked only once the
    /// definitions are all in.
    method_cache: std::sync::RwLock<hashbrown::HashTable<(Box<str>, Box<str>, Option<String>)>>,
}

const TORCH_MODULE_BASES: &[&str] = &["torch.nn.Module", "torch.nn.modules.module.Module"];

impl ProjectIndex {
    /// An index that knows nothing (single-file use).
    pub fn empty() -> ProjectIndex {
        ProjectIndex::default()
    }

    /// Joins per-file summaries.
    pub fn build(files: Vec<FileSummary>) -> ProjectIndex {
        IndexBuilder::fill(files).finish()
    }

    /// Follows import aliases (re-exports) until a defined name is found.
    fn canonical(&self, name: &str) -> String {
        self.canonical_str(name).to_string()
    }

    /// [`ProjectIndex::canonical`] without allocating: the name itself or
    /// an alias target the index holds.
    fn canonical_str<'a>(&'a self, name: &'a str) -> &'a str {
        let mut cur = name;
        for _ in 0..8 {
            if self.functions.contains_key(cur) || self.classes.contains_key(cur) {
                return cur;
            }
            match self.aliases.get(cur) {
                Some(next) if next != cur => cur = next,
                _ => break,
            }
        }
        cur
    }

    /// The qualified name of the project function `name` refers to: a
    /// function, a method through the class's project bases, or a class
    /// (its `__init__` is not followed; a class used as a context manager
    /// is answered by [`ProjectIndex::disables_grad`]).
    pub fn resolve_function(&self, name: &str) -> Option<String> {
        let c = self.canonical_str(name);
        if self.functions.contains_key(c) {
            return Some(c.to_string());
        }
        // `module.Class.method` where the method is inherited.
        let (class, method) = c.rsplit_once('.')?;
        self.method_of(self.canonical_str(class), method)
    }

    /// Finds `method` on the project bases of `class` (what `super().method`
    /// calls), not on the class itself.
    pub fn method_of_bases(&self, class: &str, method: &str) -> Option<String> {
        let cs = self.classes.get(self.canonical_str(class))?;
        cs.bases.iter().find_map(|b| self.method_of(self.canonical_str(b), method))
    }

    /// Finds `method` on `class` or its project bases.
    pub fn method_of(&self, class: &str, method: &str) -> Option<String> {
        use std::hash::BuildHasher;
        let hash = rustc_hash::FxBuildHasher.hash_one((class, method));
        let eq = |(c, m, _): &(Box<str>, Box<str>, Option<String>)| &**c == class && &**m == method;
        if let Ok(cache) = self.method_cache.read() {
            if let Some((_, _, found)) = cache.find(hash, eq) {
                return found.clone();
            }
        }
        let found = self.find_method(class, method);
        if let Ok(mut cache) = self.method_cache.write() {
            if cache.find(hash, eq).is_none() {
                cache.insert_unique(hash, (class.into(), method.into(), found.clone()), |(c, m, _)| {
                    rustc_hash::FxBuildHasher.hash_one((&**c, &**m))
                });
            }
        }
        found
    }

    /// [`ProjectIndex::method_of`], walking the bases.
    fn find_method(&self, class: &str, method: &str) -> Option<String> {
        let mut q = String::new();
        self.class_and_bases(class).find_map(|c| {
            q.clear();
            q.push_str(c);
            q.push('.');
            q.push_str(method);
            self.functions.contains_key(q.as_str()).then(|| q.clone())
        })
    }

    /// `class`, then every name reached through the project bases (through
    /// re-exports), depth first, each once.
    fn class_and_bases<'a>(&'a self, class: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        let mut seen: Vec<&str> = Vec::new();
        let mut stack: Vec<&str> = vec![class];
        std::iter::from_fn(move || {
            while let Some(c) = stack.pop() {
                if seen.contains(&c) {
                    continue;
                }
                seen.push(c);
                if let Some(cs) = self.classes.get(c) {
                    stack.extend(cs.bases.iter().map(|b| self.canonical_str(b)));
                }
                return Some(c);
            }
            None
        })
    }

    /// The module classes and the optimizer classes.
    fn classify_classes(&self) -> (HashSet<String>, HashSet<String>) {
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
    fn find_grad_disabling(&self) -> HashSet<String> {
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

    fn decorated_off(&self, f: &FunctionSummary) -> bool {
        f.decorated_no_grad || f.project_decorators.iter().any(|d| self.grad_disabling.contains(&self.canonical(d)))
    }

    /// Methods that override `class.method` in the project's subclasses:
    /// a call of `self.method()` in the base class may run any of them.
    /// Keyed by the overridden method's id, in [`Names`] ids.
    fn overrides(&self, names: &Names<'_>) -> HashMap<u32, Vec<u32>> {
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
                        if let Some(over) = names.function(&m) {
                            out.push((over, id));
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

    /// The project classes `class` derives from, directly or not (itself excluded).
    fn ancestors<'a>(&'a self, class: &'a str) -> Vec<&'a str> {
        self.class_and_bases(class).skip(1).filter(|c| self.classes.contains_key(*c)).collect()
    }

    /// The call-graph facts, each a fixpoint computed with a worklist over
    /// integer ids of the names that appear as callers and callees.
    fn propagate(&mut self, calls: &[CallSite]) {
        let mut names = Names::default();
        names.ids.reserve(self.functions.len() + calls.len());
        // The summaries by id, so that no fact below looks a name up again.
        let mut summaries: Vec<&FunctionSummary> = Vec::with_capacity(self.functions.len());
        for (q, f) in &self.functions {
            names.intern(q);
            summaries.push(f);
        }
        names.functions = names.list.len();
        let edges: Vec<Edge> = calls
            .iter()
            .map(|c| Edge {
                caller: c.caller.as_deref().map(|x| names.intern(x)),
                callee: names.intern(&c.callee),
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
            if !is_function(e.callee) {
                return (None, &[]);
            }
            let over = if calls[i].via_self { overrides.get(&e.callee).unwrap_or(&no_overrides) } else { &no_overrides };
            (Some(e.callee), over.as_slice())
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
            let mut off: Vec<bool> = (0..n).map(|id| decorated[id] || !sites.of(id as u32).is_empty()).collect();
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
        let step_code = || {
            // Step code: roots, then whatever they (or step loops) call.
            let mut step = vec![false; n];
            let mut work: Vec<u32> = Vec::new();
            for id in 0..names.functions as u32 {
                let f = fsum(id);
                let optimizer_step = f.name == "step" && f.class.as_ref().is_some_and(|c| this.optimizer_classes.contains(c));
                let forward = f.name == "forward" && f.class.as_ref().is_some_and(|c| this.module_classes.contains(c));
                // A function that merely contains a step loop is not step code
                // itself: what it calls before or after the loop runs once.
                if f.step_root || optimizer_step || forward {
                    step[id as usize] = true;
                    work.push(id);
                }
            }
            // Only project functions have call sites.
            for id in 0..names.functions as u32 {
                if !step[id as usize] && !fsum(id).unit_test && sites.of(id).iter().any(|&i| calls[i as usize].in_step_loop) {
                    step[id as usize] = true;
                    work.push(id);
                }
            }
            let mut next = Vec::new();
            while let Some(id) = work.pop() {
                next.clear();
                callees_of(id, &mut next);
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
            (names.set(&upwards(seed(|f| f.calls_backward), false)), names.set(&upwards(seed(|f| f.backward_per_call), true)))
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
                if sites.of(id)
                    .iter()
                    .map(|&i| &calls[i as usize])
                    .any(|s| s.false_positions.contains(&pos) || s.false_keywords.contains(&name))
                {
                    eval_by_flag.insert(names.list[id as usize].to_string());
                }
            }
            eval_by_flag
        };
        let ((no_grad_only, step_code), ((reaches_backward, backward_per_call), (performs, eval_by_flag))) =
            rayon::join(|| rayon::join(grad_off_only, step_code), || rayon::join(backward, || (performs(), eval_by_flag())));
        self.no_grad_only = no_grad_only;
        self.step_code = step_code;
        self.reaches_backward = reaches_backward;
        self.backward_per_call = backward_per_call;
        self.performs = performs;
        self.eval_by_flag = eval_by_flag;
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

    /// Whether the function evaluates when a caller passes `False` to its
    /// train-mode flag parameter.
    pub fn evaluates_by_flag(&self, qualname: &str) -> bool {
        self.eval_by_flag.contains(qualname)
    }

    /// Whether a project class (through re-exports) is an `nn.Module`:
    /// `Some(false)` for a project class that is not one, `None` when the
    /// class is not the project's.
    pub fn class_is_module(&self, qualified: &str) -> Option<bool> {
        let c = self.canonical(qualified);
        self.classes.contains_key(&c).then(|| self.module_classes.contains(&c))
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
        if f.init_named || self.applied.contains(qualname) {
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

    /// Number of functions indexed (for tests and progress output).
    pub fn len(&self) -> usize {
        self.functions.len()
    }

    /// Whether nothing is indexed.
    pub fn is_empty(&self) -> bool {
        self.functions.is_empty() && self.classes.is_empty()
    }
}

/// The definitions of all files joined, and their call sites, before the
/// call-graph facts are computed.
#[derive(Debug)]
struct IndexBuilder {
    ix: ProjectIndex,
    calls: Vec<CallSite>,
}

impl IndexBuilder {
    /// The maps of all files' definitions, filled side by side: the
    /// functions on one core, the classes, import aliases and call sites on
    /// another. Each map is filled in file order, so of two definitions of
    /// one name the later file's is kept, as when they are added one by one.
    fn fill(files: Vec<FileSummary>) -> IndexBuilder {
        let sizes = |count: fn(&FileSummary) -> usize| files.iter().map(count).sum::<usize>();
        let (n_functions, n_classes, n_aliases, n_calls) =
            (sizes(|f| f.functions.len()), sizes(|f| f.classes.len()), sizes(|f| f.imports.len()), sizes(|f| f.calls.len()));
        let mut functions = Vec::with_capacity(files.len());
        let mut rest = Vec::with_capacity(files.len());
        for f in files {
            let FileSummary { module, functions: fs, classes, calls, imports, applied, .. } = f;
            functions.push(fs);
            rest.push((module, classes, calls, imports, applied));
        }
        let (functions, (classes, aliases, applied, calls)) = rayon::join(
            || {
                let mut map: HashMap<String, FunctionSummary> = HashMap::default();
                map.reserve(n_functions);
                for func in functions.into_iter().flatten() {
                    map.insert(func.qualname.clone(), func);
                }
                map
            },
            || {
                let mut classes: HashMap<String, ClassSummary> = HashMap::default();
                classes.reserve(n_classes);
                let mut aliases: HashMap<String, String> = HashMap::default();
                aliases.reserve(n_aliases);
                let mut applied: HashSet<String> = HashSet::default();
                let mut calls = Vec::with_capacity(n_calls);
                for (module, cs, file_calls, imports, file_applied) in rest {
                    for (local, q) in imports {
                        let mut key = String::with_capacity(module.path.len() + 1 + local.len());
                        key.push_str(&module.path);
                        key.push('.');
                        key.push_str(&local);
                        aliases.insert(key, q);
                    }
                    for c in cs {
                        classes.insert(c.qualname.clone(), c);
                    }
                    applied.extend(file_applied);
                    calls.extend(file_calls);
                }
                (classes, aliases, applied, calls)
            },
        );
        let ix = ProjectIndex { functions, classes, aliases, applied, ..ProjectIndex::default() };
        IndexBuilder { ix, calls }
    }

    /// The index: callees resolved through the project's imports, then
    /// the classes classified and the call-graph facts computed.
    fn finish(self) -> ProjectIndex {
        let IndexBuilder { mut ix, mut calls } = self;
        // Resolve every call's callee once (in parallel: the maps are
        // complete), while the classes are classified.
        let ((module_classes, optimizer_classes), grad_disabling) = {
            let ix = &ix;
            let resolve = || {
                calls.par_iter_mut().with_min_len(1024).for_each(|c| {
                    if let Some(q) = ix.resolve_function(&c.callee) {
                        c.callee = q;
                    }
                    for x in &mut c.contexts {
                        let canonical = ix.canonical_str(x);
                        if canonical != x.as_str() {
                            *x = canonical.to_string();
                        }
                    }
                })
            };
            rayon::join(resolve, || (ix.classify_classes(), ix.find_grad_disabling())).1
        };
        ix.module_classes = module_classes;
        ix.optimizer_classes = optimizer_classes;
        ix.grad_disabling = grad_disabling;
        ix.applied = ix.applied.iter().map(|a| ix.resolve_function(a).unwrap_or_else(|| a.clone())).collect();
        ix.propagate(&calls);
        ix
    }
}

/// Interned names of the call graph: every function's qualified name
/// (ids `0..functions`), then the other callers and callees.
#[derive(Default)]
struct Names<'a> {
    ids: HashMap<&'a str, u32>,
    list: Vec<&'a str>,
    functions: usize,
}

impl<'a> Names<'a> {
    fn intern(&mut self, name: &'a str) -> u32 {
        let next = self.list.len() as u32;
        let id = *self.ids.entry(name).or_insert(next);
        if id == next {
            self.list.push(name);
        }
        id
    }

    /// The id of a project function.
    fn function(&self, name: &str) -> Option<u32> {
        self.ids.get(name).copied().filter(|id| (*id as usize) < self.functions)
    }

    /// The names whose flag is set.
    fn set(&self, flags: &[bool]) -> HashSet<String> {
        flags.iter().zip(&self.list).filter(|(f, _)| **f).map(|(_, n)| (*n).to_string()).collect()
    }
}

/// Adjacency lists in two arrays: the items of key `k` are
/// `items[start[k]..start[k + 1]]`, in the order they were given.
struct Csr {
    start: Vec<u32>,
    items: Vec<u32>,
}

impl Csr {
    /// Lists of `n` keys from `(key, item)` pairs.
    fn new(n: usize, pairs: &[(u32, u32)]) -> Csr {
        let mut start = vec![0u32; n + 1];
        for (k, _) in pairs {
            start[*k as usize + 1] += 1;
        }
        for k in 0..n {
            start[k + 1] += start[k];
        }
        let mut fill = start.clone();
        let mut items = vec![0u32; pairs.len()];
        for (k, item) in pairs {
            items[fill[*k as usize] as usize] = *item;
            fill[*k as usize] += 1;
        }
        Csr { start, items }
    }

    fn of(&self, k: u32) -> &[u32] {
        &self.items[self.start[k as usize] as usize..self.start[k as usize + 1] as usize]
    }
}

/// One call between interned names.
struct Edge {
    caller: Option<u32>,
    callee: u32,
    /// Grad is off at the site itself (`no_grad`, a grad-disabling context).
    off_here: bool,
}

/// Words that name construction, initialisation, conversion or loading.
const SETUP_FIRST_WORDS: &[&str] = &[
    "init", "initialize", "initialise", "reset", "fuse", "reparameterize", "reparameterise", "reparam", "convert",
    "quantize", "quantise", "load", "from", "build", "create", "make", "setup", "prepare", "switch", "deploy",
    "remap", "prune", "export", "copy", "transfer", "migrate", "resize", "tie", "untie", "merge", "unmerge",
    "checkpoint", "restore", "import", "port", "replace", "inflate", "expand", "freeze", "unfreeze", "set",
];

/// Whether a function name says construction or weight initialisation,
/// which no step makes step code.
pub fn is_init_name(name: &str) -> bool {
    if matches!(name, "__init__" | "__post_init__" | "__setstate__" | "reset_parameters" | "reset_running_stats") {
        return true;
    }
    let has = |set: &[&str]| has_word(name, set);
    has(&["init", "initialize", "initialise"])
        || (has(&["weights"]) && has(&["init", "reset", "normal", "uniform", "xavier", "kaiming"]))
}

/// Whether one of the words of `name` ([`crate::names::words`]) is in `set`
/// (lowercase), without allocating them.
fn has_word(name: &str, set: &[&str]) -> bool {
    crate::names::word_slices(name).any(|w| set.iter().any(|s| w.eq_ignore_ascii_case(s)))
}

/// Whether a function name says it is setup code (see [`Role::Setup`]).
pub fn is_setup_name(name: &str) -> bool {
    if matches!(name, "__init__" | "__post_init__" | "__setstate__" | "reset_parameters" | "reset_running_stats")
    {
        return true;
    }
    if has_word(name, &["init", "initialize", "initialise", "weights", "reparameterize", "fuse", "fused"])
        && !has_word(name, &["forward"])
    {
        return true;
    }
    crate::names::word_slices(name).next().is_some_and(|w| SETUP_FIRST_WORDS.iter().any(|s| w.eq_ignore_ascii_case(s)))
        || name.ends_with("_state_dict")
        || name.ends_with("_pretrained")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_imports_resolve_against_the_package() {
        let m = ModuleInfo { path: "pkg.sub.mod".into(), is_package: false };
        assert_eq!(m.resolve_relative(".utils.f"), "pkg.sub.utils.f");
        assert_eq!(m.resolve_relative("..a.b"), "pkg.a.b");
        assert_eq!(m.resolve_relative("torch.nn"), "torch.nn");
        let init = ModuleInfo { path: "pkg.sub".into(), is_package: true };
        assert_eq!(init.resolve_relative(".mod.f"), "pkg.sub.mod.f");
    }

    #[test]
    fn setup_names() {
        for n in ["__init__", "_init_weights", "init_weights", "reset_parameters", "fuse_model", "load_pretrained", "weights_init", "switch_to_deploy", "convert_sync_batchnorm"] {
            assert!(is_setup_name(n), "{n}");
        }
        for n in ["forward", "train_one_epoch", "step", "validate", "update"] {
            assert!(!is_setup_name(n), "{n}");
        }
    }

    #[test]
    fn grad_off_propagates_through_callers_in_other_files() {
        let a = FileSummary {
            module: ModuleInfo { path: "pkg.eval".into(), is_package: false },
            functions: vec![
                FunctionSummary { qualname: "pkg.eval.run".into(), name: "run".into(), ..Default::default() },
                FunctionSummary { qualname: "pkg.eval.inner".into(), name: "inner".into(), ..Default::default() },
            ],
            calls: vec![CallSite { caller: Some("pkg.eval.run".into()), callee: "pkg.eval.inner".into(), ..Default::default() }],
            ..Default::default()
        };
        let b = FileSummary {
            module: ModuleInfo { path: "main".into(), is_package: false },
            imports: vec![("run".into(), "pkg.eval.run".into())],
            calls: vec![CallSite { caller: None, callee: "pkg.eval.run".into(), grad_off: true, ..Default::default() }],
            ..Default::default()
        };
        let ix = ProjectIndex::build(vec![a, b]);
        assert!(ix.only_called_without_grad("pkg.eval.run"));
        assert!(ix.only_called_without_grad("pkg.eval.inner"));
    }
}
