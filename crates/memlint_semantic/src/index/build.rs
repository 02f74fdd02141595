//! Joining the files' summaries: name tables, the call graph as a
//! compressed adjacency list, and the builder that computes the facts.

use super::*;

/// The definitions of all files joined, and their call sites, before the
/// call-graph facts are computed.
#[derive(Debug)]
pub(super) struct IndexBuilder {
    pub(super) ix: ProjectIndex,
    pub(super) calls: Vec<CallSite>,
    /// [`FileSummary::constructions`] of every file.
    pub(super) constructions: Vec<(String, Box<[(String, String)]>)>,
}

impl IndexBuilder {
    /// The maps of all files' definitions, filled side by side: the
    /// functions on one core, the classes, import aliases and call sites on
    /// another. Each map is filled in file order, so of two definitions of
    /// one name the later file's is kept, as when they are added one by one.
    pub(super) fn fill(files: Vec<FileSummary>) -> IndexBuilder {
        let sizes = |count: fn(&FileSummary) -> usize| files.iter().map(count).sum::<usize>();
        let (n_functions, n_classes, n_aliases, n_calls) =
            (sizes(|f| f.functions.len()), sizes(|f| f.classes.len()), sizes(|f| f.imports.len()), sizes(|f| f.calls.len()));
        let moves_batches = files.iter().any(|f| f.moves_batches);
        let optimizers_scale_invariant = files.iter().any(|f| f.optimizers.0) && !files.iter().any(|f| f.optimizers.1);
        // Star-imported modules that import torch (`from module import *`
        // with `import torch as t` in `module`): names of torch reach the
        // importer through them.
        let starred: HashSet<&str> = files
            .iter()
            .flat_map(|f| f.imports.iter().filter(|(l, _)| l == "*").filter_map(|(_, q)| q.strip_suffix(".*")))
            .collect();
        let star_torch: HashSet<String> =
            files.iter().filter(|f| f.imports_torch && starred.contains(f.module.path.as_str())).map(|f| f.module.path.clone()).collect();
        drop(starred);
        let (mut dynamic_on, mut dynamic_off): (HashSet<String>, HashSet<String>) = Default::default();
        for (name, off) in files.iter().flat_map(|f| &f.dynamic_calls) {
            let set = if *off { &mut dynamic_off } else { &mut dynamic_on };
            if !set.contains(name) {
                set.insert(name.clone());
            }
        }
        let torch_below = files.iter().filter_map(|f| f.torch_below).min();
        let constructs_by_name = files.iter().any(|f| f.constructs_by_name);
        let builder_refs: HashSet<u64> = files.iter().flat_map(|f| f.builder_refs.iter().copied()).collect();
        let mut class_refs: HashSet<u64> = files.iter().flat_map(|f| f.class_refs.iter().copied()).collect();
        // A class named as another's base is built with it.
        class_refs.extend(files.iter().flat_map(|f| &f.classes).flat_map(|c| &c.bases).map(|b| last_segment_hash(b)));
        // Each imported name's prefixes, and their dotted suffixes (a
        // namespace package's `src.data` is the run's module `data`), that
        // are modules of the run.
        let modules: HashSet<String> = files.iter().flat_map(|f| module_names(&f.module.path)).collect();
        let mut imported: HashSet<String> = HashSet::default();
        for f in &files {
            for q in &f.imported {
                let ends = q.match_indices('.').map(|(i, _)| i).chain(std::iter::once(q.len()));
                for end in ends {
                    let prefix = &q[..end];
                    let starts = std::iter::once(0).chain(prefix.match_indices('.').map(|(i, _)| i + 1));
                    for start in starts {
                        let candidate = &prefix[start..];
                        if modules.contains(candidate) && !imported.contains(candidate) {
                            imported.insert(candidate.to_string());
                        }
                    }
                }
            }
        }
        let mut functions = Vec::with_capacity(files.len());
        let mut rest = Vec::with_capacity(files.len());
        let mut constructions = Vec::new();
        let mut factories: HashMap<String, Box<[String]>> = HashMap::default();
        for f in files {
            let FileSummary { module, functions: fs, classes, calls, imports, applied, constructions: made, factories: built, .. } = f;
            constructions.extend(made);
            factories.extend(built);
            functions.push(fs);
            rest.push((module, classes, calls, imports, applied));
        }
        let (functions, (classes, aliases, applied, calls, stars)) = rayon::join(
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
                let mut stars: HashMap<String, Vec<String>> = HashMap::default();
                let mut calls = Vec::with_capacity(n_calls);
                for (module, cs, file_calls, imports, file_applied) in rest {
                    for (local, q) in imports {
                        if local == "*" {
                            if let Some(target) = q.strip_suffix(".*") {
                                stars.entry(module.path.clone()).or_default().push(target.to_string());
                            }
                            continue;
                        }
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
                (classes, aliases, applied, calls, stars)
            },
        );
        let mover_names = functions.values().filter(|f| f.moves_param.is_some()).map(|f| f.name.clone()).collect();
        let star_reach = stars.keys().map(|m| (m.clone(), super::resolve::star_order(&stars, m, 4))).collect();
        let ix = ProjectIndex {
            functions,
            classes,
            aliases,
            stars,
            star_reach,
            star_torch,
            applied,
            moves_batches,
            optimizers_scale_invariant,
            torch_below,
            imported,
            mover_names,
            dynamic_on,
            dynamic_off,
            factories,
            class_refs,
            builder_refs,
            // Decided in `finish`, once the module classes are known.
            builds_modules: !constructs_by_name,
            ..ProjectIndex::default()
        };
        IndexBuilder { ix, calls, constructions }
    }

    /// The index: callees resolved through the project's imports, then
    /// the classes classified and the call-graph facts computed.
    pub(super) fn finish(self) -> ProjectIndex {
        let IndexBuilder { mut ix, mut calls, constructions } = self;
        let keys = ix.functions.keys().chain(ix.classes.keys()).chain(ix.aliases.keys());
        ix.last_segments = keys.map(|k| last_segment_hash(k)).collect();
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
        ix.builds_modules = ix.builds_modules && ix.module_classes.iter().any(|c| ix.builder_refs.contains(&last_segment_hash(c)));
        ix.builder_refs = HashSet::default();
        ix.grad_disabling = grad_disabling;
        ix.applied = ix.applied.iter().map(|a| ix.resolve_function(a).unwrap_or_else(|| a.clone())).collect();
        // Calls of module instances inform `forward`'s optional arguments only.
        let instance_calls: Vec<CallSite> = calls.extract_if(.., |c| c.instance).collect();
        ix.constructed_attrs = ix.constructed_attrs(&calls, &constructions);
        drop(constructions);
        let maybe = ix.factory_calls(&calls);
        // A submodule's call runs its class's `forward` (any of them, for
        // an attribute built as one of several): (caller, forward) pairs,
        // each class's `forward` looked up once.
        let submodule_calls = || instance_calls.iter().filter(|c| c.every_call).filter_map(|c| Some((c.caller.as_deref()?, c)));
        let mut forwards: HashMap<&str, Option<String>> = HashMap::default();
        for (_, c) in submodule_calls() {
            for class in c.classes() {
                if !forwards.contains_key(class.as_str()) {
                    forwards.insert(class, ix.method_of(ix.canonical_str(class), crate::api::nn::FORWARD));
                }
            }
        }
        let submodules: Vec<(&str, &str)> = submodule_calls()
            .flat_map(|(caller, c)| {
                let forwards = &forwards;
                c.classes().iter().filter_map(move |class| Some((caller, forwards.get(class.as_str())?.as_deref()?)))
            })
            .collect();
        ix.propagate_waits(&calls, &maybe, &submodules);
        ix.record_optional_arguments(&calls, &instance_calls);
        ix.propagate(&calls);
        ix
    }
}

/// What the calls seen so far give a flag parameter.
#[derive(Clone, Copy)]
enum Flag {
    Unseen,
    Same(bool),
    Mixed,
}

/// The literal value the call `c` gives the flag parameter at `position`
/// named `name` (its default when it passes none), `None` when it passes
/// a value that is not a literal or may pass one through a splat.
fn flag_given(c: &CallSite, position: usize, name: &str, default: bool) -> Option<bool> {
    if c.positional == u8::MAX || c.keywords.iter().any(|k| k == "**") {
        return None;
    }
    if usize::from(c.positional) > position {
        return if c.true_positions.contains(&position) {
            Some(true)
        } else if c.false_positions.contains(&position) {
            Some(false)
        } else {
            None
        };
    }
    if c.keywords.iter().any(|k| k == name) {
        return if c.true_keywords.iter().any(|k| k == name) {
            Some(true)
        } else if c.false_keywords.iter().any(|k| k == name) {
            Some(false)
        } else {
            None
        };
    }
    Some(default)
}

impl ProjectIndex {
    /// Whether the project's calls of each function pass its parameters
    /// that default to `None` ([`FunctionSummary::none_params_passed`]),
    /// leaving out the calls that run once at module level when others
    /// run repeatedly.
    fn record_optional_arguments(&mut self, calls: &[CallSite], instance_calls: &[CallSite]) {
        // A call at module level outside any loop runs once (a prediction
        // after training): when the function has other calls, they decide.
        let once = |c: &CallSite| c.caller.is_none() && !c.in_loop;
        let passes = |c: &CallSite, position: usize, name: &str| {
            usize::from(c.positional) > position || c.keywords.iter().any(|k| k == name || k == "**")
        };
        // A submodule called in a method of its parent (`self.dp(x, x_mask,
        // reverse=True)`, with `self.dp = DurationPredictor(...)`) calls its
        // class's `forward` each time the method runs: counted as a call
        // of that `forward`.
        // An attribute that holds one of several classes (chosen by a
        // configuration test the call is not under) is called as the one
        // whose `forward` takes what the call passes (`reverse=True`); a
        // call more than one would take is not known to call any.
        let submodule_calls: Vec<(String, &CallSite)> = instance_calls
            .iter()
            .filter(|c| c.caller.is_some())
            .filter_map(|c| {
                let Some(alternatives) = &c.alternatives else {
                    return Some((self.method_of(self.canonical_str(&c.callee), crate::api::nn::FORWARD)?, c));
                };
                let mut takes = alternatives.iter().filter_map(|class| {
                    let q = self.method_of(self.canonical_str(class), crate::api::nn::FORWARD)?;
                    let f = self.functions.get(&q)?;
                    f.signature.as_ref().is_none_or(|s| s.accepts(c.positional, &c.keywords)).then_some(q)
                });
                let one = takes.next()?;
                takes.next().is_none().then_some((one, c))
            })
            .collect();
        let all = || calls.iter().map(|c| (c.callee.as_str(), c)).chain(submodule_calls.iter().map(|(q, c)| (q.as_str(), *c)));
        let mut repeated: HashSet<&str> = HashSet::default();
        for (callee, _) in all().filter(|(_, c)| !once(c)) {
            repeated.insert(callee);
        }
        let mut seen: HashMap<&str, Vec<(usize, usize)>> = HashMap::default();
        for (callee, c) in all() {
            let Some(f) = self.functions.get(callee) else { continue };
            if f.none_params.is_empty() || (once(c) && repeated.contains(callee)) {
                continue;
            }
            let counts = seen.entry(callee).or_insert_with(|| vec![(0, 0); f.none_params.len()]);
            for ((position, name), (passed, skipped)) in f.none_params.iter().zip(counts.iter_mut()) {
                if passes(c, *position, name) {
                    *passed += 1;
                } else {
                    *skipped += 1;
                }
            }
        }
        // A module instance's `forward` is mostly called where the model is
        // a parameter (`def train(model, loader)`), which no call site
        // resolves: its known calls are not all its calls. An argument only
        // one-off calls pass (`model(x, 1)`, a prediction after training)
        // leaves the arm it selects rarely taken; nothing else is concluded.
        let mut once_only: Vec<(String, Vec<usize>)> = Vec::new();
        for c in instance_calls.iter().filter(|c| c.caller.is_none()) {
            let Some(q) = self.method_of(self.canonical_str(&c.callee), crate::api::nn::FORWARD) else { continue };
            let Some(f) = self.functions.get(&q) else { continue };
            let counts = seen.get(q.as_str());
            let at: Vec<usize> = f
                .none_params
                .iter()
                .enumerate()
                .filter(|(i, (position, name))| {
                    passes(c, *position, name)
                        && !(repeated.contains(q.as_str()) && counts.is_some_and(|n| n.get(*i).is_some_and(|(p, _)| *p > 0)))
                })
                .map(|(i, _)| i)
                .collect();
            if !at.is_empty() {
                once_only.push((q, at));
            }
        }
        // Flags: the value each call gives (a class's constructions give
        // its `__init__`'s).
        let mut flags: HashMap<String, Vec<Flag>> = HashMap::default();
        for (callee, c) in all() {
            let target = if self.functions.contains_key(callee) {
                callee.to_string()
            } else if !c.instance && self.classes.contains_key(callee) {
                match self.method_of(callee, "__init__") {
                    Some(init) => init,
                    None => continue,
                }
            } else {
                continue;
            };
            let Some(f) = self.functions.get(&target) else { continue };
            if f.flag_params.is_empty() || (once(c) && repeated.contains(callee)) {
                continue;
            }
            let n = f.flag_params.len();
            let values: Vec<Option<bool>> = f.flag_params.iter().map(|(position, name, default)| flag_given(c, *position, name, *default)).collect();
            let seen = flags.entry(target).or_insert_with(|| vec![Flag::Unseen; n]);
            for (s, v) in seen.iter_mut().zip(values) {
                *s = match (*s, v) {
                    (Flag::Unseen, Some(v)) => Flag::Same(v),
                    (Flag::Same(a), Some(v)) if a == v => Flag::Same(a),
                    _ => Flag::Mixed,
                };
            }
        }
        for (q, seen) in flags {
            if let Some(f) = self.functions.get_mut(&q) {
                f.flag_values = seen.into_iter().map(|s| if let Flag::Same(v) = s { Some(v) } else { None }).collect();
            }
        }
        for (q, counts) in seen {
            if let Some(f) = self.functions.get_mut(q) {
                f.none_params_passed = counts
                    .into_iter()
                    .map(|(passed, skipped)| match (passed, skipped) {
                        (_, 0) => Some(true),
                        (0, _) => Some(false),
                        _ => None,
                    })
                    .collect();
            }
        }
        for (q, at) in once_only {
            if let Some(f) = self.functions.get_mut(&q) {
                f.none_params_passed.resize(f.none_params.len(), None);
                for i in at {
                    f.none_params_passed[i] = Some(false);
                }
            }
        }
    }

    /// A function waits for the device on each call when a call it makes
    /// on every call ([`CallSite::every_call`]) runs a project function
    /// that waits, or one that moves to the device a value built on the
    /// host that it is given (`generate_input()` returning
    /// `gpu(torch.from_numpy(x))`, with `gpu` a helper that calls
    /// `.cuda()`): a few rounds, for helpers of helpers.
    ///
    /// A method called on an attribute a factory function filled (`maybe`,
    /// [`ProjectIndex::factory_calls`]) counts when the method of any class
    /// the factory returns waits: a configuration picks one, and every
    /// read the caller adds is then one wait of several.
    fn propagate_waits(&mut self, calls: &[CallSite], maybe: &[CallSite], submodules: &[(&str, &str)]) {
        for _ in 0..4 {
            let waits = |q: &str| self.functions.get(q).is_some_and(|f| f.waits_for_device);
            let waiting: Vec<&str> = calls
                .iter()
                .chain(maybe)
                .filter(|c| c.every_call)
                .filter_map(|c| {
                    let caller = c.caller.as_deref()?;
                    let g = self.functions.get(&c.callee)?;
                    (g.waits_for_device || (c.host_arg && g.moves_param.is_some())).then_some(caller)
                })
                .chain(submodules.iter().filter(|(_, forward)| waits(forward)).map(|(caller, _)| *caller))
                .filter(|caller| self.functions.get(*caller).is_some_and(|f| !f.waits_for_device))
                .collect();
            if waiting.is_empty() {
                break;
            }
            for q in waiting {
                if let Some(f) = self.functions.get_mut(q) {
                    f.waits_for_device = true;
                }
            }
        }
    }
}

impl ProjectIndex {
    /// [`ProjectIndex::constructed_attr`] for every class: an attribute
    /// `__init__` binds to a parameter counts when every construction of
    /// the class passes that parameter an instance of one project class.
    fn constructed_attrs(&self, calls: &[CallSite], constructions: &[(String, Box<[(String, String)]>)]) -> HashMap<String, Vec<(String, String)>> {
        if constructions.is_empty() {
            return HashMap::default();
        }
        // (class, attribute) -> the one class given and how many
        // constructions give it, or `None` once two differ.
        let mut given: HashMap<(&str, &str), Option<(String, usize)>> = HashMap::default();
        for (callee, args) in constructions {
            let Some(class) = self.classes.get(self.canonical_str(callee)).filter(|k| !k.init_param_attrs.is_empty()) else { continue };
            for (attr, position, name) in &class.init_param_attrs {
                let Some((_, k)) = args.iter().find(|(key, _)| *key == position.to_string() || key == name) else { continue };
                let k = self.canonical_str(k);
                let entry = given.entry((class.qualname.as_str(), attr.as_str())).or_insert_with(|| Some((k.to_string(), 0)));
                match entry {
                    Some((known, n)) if known == k => *n += 1,
                    _ => *entry = None,
                }
            }
        }
        // Every call of the class that passes the parameter must be one of
        // those: a call that passes what its file cannot tell spoils it.
        for c in calls {
            let Some(class) = self.classes.get(self.canonical_str(&c.callee)).filter(|k| !k.init_param_attrs.is_empty()) else { continue };
            for (attr, position, name) in &class.init_param_attrs {
                let passed = usize::from(c.positional) > *position || c.keywords.iter().any(|k| k == name);
                if let (true, Some(Some((_, n)))) = (passed, given.get_mut(&(class.qualname.as_str(), attr.as_str()))) {
                    match n.checked_sub(1) {
                        Some(left) => *n = left,
                        None => {
                            given.insert((class.qualname.as_str(), attr.as_str()), None);
                        }
                    }
                }
            }
        }
        let mut out: HashMap<String, Vec<(String, String)>> = HashMap::default();
        for ((class, attr), instance) in given {
            if let Some((instance, _)) = instance.filter(|(k, n)| *n == 0 && self.classes.contains_key(k)) {
                out.entry(class.to_string()).or_default().push((attr.to_string(), instance));
            }
        }
        out
    }

    /// The calls of a method on an instance a project factory function
    /// built (`self.embedding = get_embedding_module(...)`, then
    /// `self.embedding.compute_embedding(...)`, recorded as
    /// `...get_embedding_module().compute_embedding`), one per class the
    /// factory returns ([`FileSummary::factories`]) that has the
    /// method. Each may be the one that runs: only the wait facts read them.
    pub(super) fn factory_calls(&self, calls: &[CallSite]) -> Vec<CallSite> {
        let mut out = Vec::new();
        for c in calls {
            let Some((factory, method)) = c.callee.split_once("().") else { continue };
            let Some(classes) = self.resolve_function(factory).and_then(|q| self.factories.get(&q)).map(|c| &**c)
            else {
                continue;
            };
            for class in classes {
                if let Some(q) = self.method_of(self.canonical_str(class), method) {
                    out.push(CallSite { callee: q, ..c.clone() });
                }
            }
        }
        out
    }
}

/// The hash [`ProjectIndex::last_segments`] keeps of a dotted name's last
/// segment.
pub(super) fn last_segment_hash(name: &str) -> u64 {
    use std::hash::BuildHasher;
    let last = name.rsplit_once('.').map_or(name, |(_, l)| l);
    rustc_hash::FxBuildHasher.hash_one(last)
}

/// Interned names of the call graph: every function's qualified name
/// (ids `0..functions`), then the other callers and callees.
#[derive(Default)]
pub(super) struct Names<'a> {
    pub(super) ids: HashMap<&'a str, u32>,
    pub(super) list: Vec<&'a str>,
    pub(super) functions: usize,
}

impl<'a> Names<'a> {
    pub(super) fn intern(&mut self, name: &'a str) -> u32 {
        let next = self.list.len() as u32;
        let id = *self.ids.entry(name).or_insert(next);
        if id == next {
            self.list.push(name);
        }
        id
    }

    /// The id of a project function.
    pub(super) fn function(&self, name: &str) -> Option<u32> {
        self.ids.get(name).copied().filter(|id| (*id as usize) < self.functions)
    }

    /// The names whose flag is set.
    pub(super) fn set(&self, flags: &[bool]) -> HashSet<String> {
        flags.iter().zip(&self.list).filter(|(f, _)| **f).map(|(_, n)| (*n).to_string()).collect()
    }
}

/// Adjacency lists in two arrays: the items of key `k` are
/// `items[start[k]..start[k + 1]]`, in the order they were given.
pub(super) struct Csr {
    pub(super) start: Vec<u32>,
    pub(super) items: Vec<u32>,
}

impl Csr {
    /// Lists of `n` keys from `(key, item)` pairs.
    pub(super) fn new(n: usize, pairs: &[(u32, u32)]) -> Csr {
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

    pub(super) fn of(&self, k: u32) -> &[u32] {
        &self.items[self.start[k as usize] as usize..self.start[k as usize + 1] as usize]
    }
}

/// One call between interned names.
pub(super) struct Edge {
    pub(super) caller: Option<u32>,
    pub(super) callee: u32,
    /// Grad is off at the site itself (`no_grad`, a grad-disabling context).
    pub(super) off_here: bool,
}

/// The names an import may reach module `path` by: the path itself, and,
/// for a file whose module path collided with another's and was replaced
/// by its file path (`<./a/src/data.py>`, which its neighbours' imports
/// name: [`ModuleInfo::nearby`]), its dotted tails (`data`, `src.data`,
/// `a.src.data`).
pub(super) fn module_names(path: &str) -> Vec<String> {
    let Some(file) = path.strip_prefix('<').and_then(|p| p.strip_suffix('>')) else { return vec![path.to_string()] };
    let file = file.strip_suffix(".py").or_else(|| file.strip_suffix(".rs")).unwrap_or(file);
    let parts: Vec<&str> = file.split(['/', '\\']).filter(|p| !p.is_empty() && *p != ".").collect();
    let mut parts: Vec<&str> = parts;
    if parts.last() == Some(&"__init__") {
        parts.pop();
    }
    std::iter::once(path.to_string()).chain((0..parts.len()).map(|i| parts[i..].join("."))).collect()
}

