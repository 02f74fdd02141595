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
use std::sync::Arc;

use crate::api::StepKinds;

/// Where a file sits in the project's module tree.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModuleInfo {
    /// Dotted module path (`timm.models.resnet`, or `train` for a script).
    pub path: String,
    /// The file is a package's `__init__`: relative imports resolve
    /// against the module itself, not its parent.
    pub is_package: bool,
    /// Rust: the module path of the crate root the file belongs to, which
    /// `crate::` names (`None` for Python, and for a Rust file outside any
    /// Cargo package).
    pub crate_root: Option<String>,
    /// Python, when this file's path collided with another file's and was
    /// replaced by its file path (`<./b/main.py>`): the dotted path it had,
    /// which relative imports resolve against.
    pub renamed_from: Option<String>,
    /// Modules whose paths collided, as this file's imports reach them:
    /// those of its own tree (the directory its imports start from, or one
    /// above it), nearest first: dotted name -> replaced path
    /// (`helpers` -> `<./b/helpers.py>` for `b/main.py`).
    pub nearby: Vec<Arc<[(String, String)]>>,
}

impl ModuleInfo {
    /// A Python module's facts.
    pub fn python(path: impl Into<String>, is_package: bool) -> Self {
        ModuleInfo { path: path.into(), is_package, ..ModuleInfo::default() }
    }

    /// `name` (absolute) as this file's import reaches it: a module of a
    /// collided path in this file's tree by its replaced path
    /// (`helpers.make_loader` -> `<./b/helpers.py>.make_loader`).
    fn nearby_name(&self, name: String) -> String {
        for list in &self.nearby {
            let hit = list
                .iter()
                .filter(|(n, _)| name.strip_prefix(n.as_str()).is_some_and(|rest| rest.is_empty() || rest.starts_with('.')))
                .max_by_key(|(n, _)| n.len());
            if let Some((n, new)) = hit {
                return format!("{new}{}", &name[n.len()..]);
            }
        }
        name
    }

    /// The module `super` names in a Rust file: the parent of this module
    /// (the crate root has none).
    pub fn rust_parent(&self) -> Option<&str> {
        let root = self.crate_root.as_deref()?;
        (self.path != root).then(|| self.path.rsplit_once('.').map_or("", |(parent, _)| parent))
    }

    /// Resolves a relative import target (`.utils.helper`, `..x`; Rust's
    /// `crate::x`, `self::x`, `super::x`) to an absolute dotted name;
    /// absolute names are returned as they are.
    pub fn resolve_relative(&self, name: &str) -> String {
        if let Some(root) = &self.crate_root {
            let (first, rest) = name.split_once('.').unwrap_or((name, ""));
            let join = |base: &str, rest: &str| match (base.is_empty(), rest.is_empty()) {
                (_, true) => base.to_string(),
                (true, false) => rest.to_string(),
                (false, false) => format!("{base}.{rest}"),
            };
            match first {
                "crate" => return join(root, rest),
                "self" => return join(&self.path, rest),
                "super" => {
                    let mut base = self.path.as_str();
                    let mut rest = name;
                    // Each whole `super` segment goes one module up.
                    while let Some(r) = rest.strip_prefix("super").filter(|r| r.is_empty() || r.starts_with('.')) {
                        base = base.rsplit_once('.').map_or("", |(parent, _)| parent);
                        rest = r.strip_prefix('.').unwrap_or(r);
                    }
                    return join(base, rest);
                }
                _ => return name.to_string(),
            }
        }
        let level = name.chars().take_while(|c| *c == '.').count();
        if level == 0 {
            return if self.nearby.is_empty() { name.to_string() } else { self.nearby_name(name.to_string()) };
        }
        let base = self.renamed_from.as_deref().unwrap_or(&self.path);
        let mut parts: Vec<&str> = if base.is_empty() { Vec::new() } else { base.split('.').collect() };
        // One dot is the current package.
        let up = if self.is_package { level - 1 } else { level };
        for _ in 0..up {
            parts.pop();
        }
        let rest = &name[level..];
        if !rest.is_empty() {
            parts.push(rest);
        }
        let absolute = parts.join(".");
        if self.nearby.is_empty() { absolute } else { self.nearby_name(absolute) }
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
    /// A plain function of its module every `return` of which gives an
    /// in-memory dataset ([`crate::facts::datasets::returns_in_memory_dataset`]).
    pub returns_in_memory_dataset: bool,
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
    /// The parts of a returned model frozen in the function
    /// ([`crate::context::Context::frozen_parts_returned`]): `""` for the
    /// whole model, `"features"` for `net.features` of `return net`.
    pub returns_frozen: Vec<String>,
    /// Positions of arguments (after `self`) accumulated into `self.<attr>`
    /// (`self.sum += val`, `self.vals.append(val)`): a meter's `update`.
    pub accumulates_args: Vec<usize>,
    /// The attributes of `self` those arguments are accumulated into
    /// (`sum`, `vals`).
    pub accumulates_into: Vec<String>,
    /// The attributes (`self.data`) and globals' attributes
    /// (`policy.rewards`) the function empties (`self.data = []`, `del
    /// policy.rewards[:]`, `self.data.clear()`): a buffer consumed and
    /// cleared, as a policy's episode buffer is at each update.
    pub empties: Vec<String>,
    /// Position (after `self`) of a parameter that sets the train/eval
    /// mode (`net.train(mode=train_model)`) or decides whether the function
    /// runs `backward()` (`if train:`, `if mode == "train":`).
    pub train_flag_param: Option<usize>,
    /// That parameter's name.
    pub train_flag_name: Option<String>,
    /// The parameter says evaluation when true: `backward()` runs under
    /// `if not cross_valid:`.
    pub train_flag_negated: bool,
    /// The name says construction/initialisation/conversion/loading.
    pub setup_named: bool,
    /// The name says construction or weight initialisation (`__init__`,
    /// `reset_parameters`, `_init_weights`): setup even when a step calls it.
    pub init_named: bool,
    /// A unit test or a helper in a test module.
    pub unit_test: bool,
    /// A `forward`, an optimizer's `step`, or a framework step hook.
    pub step_root: bool,
    /// The training-step events the body itself runs (see [`crate::step`], which finds them).
    pub step_kinds: StepKinds,
    /// The body steps an optimizer (itself or through a scaler) outside
    /// its own loops: once per call.
    pub steps_once: bool,
    /// The body changes its first argument (after `self`) in place
    /// (`x.clamp_(0)`, `x += 1`, `F.relu(x, inplace=True)`): a module whose
    /// `forward` does this overwrites what the module before it returned.
    /// Recorded for `forward` methods only (the one use).
    pub mutates_first_arg: bool,
    /// The body divides or multiplies a value by a non-literal
    /// (`loss / self.accum_steps`): a loss it returns may be scaled.
    pub scales_values: bool,
    /// A loss function (a `forward`, `__call__` or a function named for a
    /// loss) that sums its losses over the samples and averages nothing
    /// ([`crate::facts::scan::sums_losses`]).
    pub sums_losses: bool,
    /// Each call waits for the device: outside any `if` or `try`, the body
    /// reads a value back to the host (`.item()`, `.cpu()`,
    /// `i64::try_from(&t)`, `torch.cuda.synchronize()`) or copies host
    /// data to the device without `non_blocking=True`
    /// ([`crate::Context::waits_for_device_in`]); or, as the index sets it
    /// once every file is summarized, calls there a project function that
    /// waits, or that moves a value built on the host it is given.
    pub waits_for_device: bool,
    /// The parameters whose default is `None`: position (after `self` for
    /// a method) and name.
    pub none_params: Vec<(usize, String)>,
    /// For each of [`FunctionSummary::none_params`], as the index sets it
    /// from the project's call sites: `Some(true)` when every call passes
    /// it, `Some(false)` when none does, `None` when some do or no call is
    /// seen.
    pub none_params_passed: Vec<Option<bool>>,
    /// The parameters whose default is `True` or `False` (flags): position
    /// (after `self` for a method), name and default.
    pub flag_params: Vec<(usize, String, bool)>,
    /// For each of [`FunctionSummary::flag_params`], as the index sets it
    /// from the project's call sites (a class's constructions for its
    /// `__init__`): `Some(v)` when every call gives it the literal `v` (or
    /// leaves the default `v`), `None` when calls differ, pass a value
    /// that is not a literal, or no call is seen.
    pub flag_values: Vec<Option<bool>>,
    /// For a method named `forward`: how it takes its arguments, so that a
    /// call of a submodule that may be one of several classes (`self.dp`
    /// built as `A(...)` or `B(...)` by a configuration test) is told
    /// apart by what it passes.
    pub signature: Option<Box<calls::Signature>>,
    /// The position (after `self`) of a parameter the function returns
    /// moved to an accelerator: a helper like `to_var(x)` (`if
    /// torch.cuda.is_available(): x = x.cuda()`, then `return Variable(x)`)
    /// or `get_torch_variable(self, arg)` (`return Variable(arg).cuda()`).
    pub moves_param: Option<usize>,
    /// The function returns a tensor a factory fills on the host
    /// (`create_noise(b, z)` returning `torch.rand(b, z) * 2 - 1`, or a
    /// local bound only to such a draw): its caller's `.to(device)` copies
    /// it ([`crate::Context::returns_host_factory`]).
    pub returns_host_factory: bool,
    /// The body runs a model's forward (`self.model(x)`) with grad on,
    /// outside its loops: once per call, a per-batch helper shared by
    /// training and evaluation (`_process_one_batch(batch_x, batch_y)`).
    pub runs_model_once: bool,
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
    /// The site runs only under a logging interval or condition (`if step
    /// % 100 == 0:`, `if self.debug_mode:`) or in an `except` handler:
    /// what it calls is not run every step.
    pub logged: bool,
    /// The site runs once per epoch: the innermost loop around it is an
    /// epoch loop ([`crate::Context::in_epoch_loop_only`]).
    pub per_epoch: bool,
    /// The site runs on every call of its caller: outside any `if` arm or
    /// `try` of it ([`crate::Context::runs_on_every_call`]).
    pub every_call: bool,
    /// A value built on the host (`torch.from_numpy(x)`, `torch.ones(n)`)
    /// is passed.
    pub host_arg: bool,
    /// How many positional arguments are passed (`u8::MAX` with a
    /// `*args` splat: any number).
    pub positional: u8,
    /// The names of the keyword arguments passed (`**` for a `**kwargs`
    /// splat, which may pass any).
    pub keywords: Vec<String>,
    /// Argument positions (after `self` for methods) passed what turns a
    /// training flag or mode off: the literal `False`, or an evaluation
    /// mode's name (`"eval"`, `"val"`, `"test"`).
    pub false_positions: Vec<usize>,
    /// Keyword names passed the same.
    pub false_keywords: Vec<String>,
    /// Argument positions (after `self` for methods) passed the literal
    /// `True`.
    pub true_positions: Vec<usize>,
    /// Keyword names passed the same.
    pub true_keywords: Vec<String>,
    /// Argument positions (after `self` for methods) passed a model whose
    /// parameters are all frozen at the site (`freeze_model(alex)` or a
    /// loop over `alex.parameters()` before `extract(alex, loader)`), or
    /// that may be: a construction, a parameter passed on.
    pub frozen: FrozenArgs,
    /// A call of `self.method(...)`: it may run an override of the method
    /// in any subclass.
    pub via_self: bool,
    /// A call of a project module instance, `callee` being its class: at
    /// module level outside any loop (`model(x, 1)` after `model = Net()`),
    /// or a submodule's in a method of its parent (`self.dp(x, x_mask)` with
    /// `self.dp = DurationPredictor(...)`, `caller` set). Only the optional
    /// arguments of its `forward` read these
    /// ([`ProjectIndex::record_optional_arguments`]); the call graph does not.
    pub instance: bool,
    /// For a submodule's call, every class the attribute may hold when
    /// its class assigns several (`callee` is one of them): the index
    /// keeps the call only for the one class whose `forward` accepts what
    /// is passed, and drops it when more than one does.
    pub alternatives: Option<Box<[String]>>,
}

impl CallSite {
    /// The classes a submodule's call may run the `forward` of: its
    /// [`CallSite::alternatives`], or the callee.
    pub fn classes(&self) -> &[String] {
        self.alternatives.as_deref().unwrap_or(std::slice::from_ref(&self.callee))
    }
}

/// What a call site passes of frozen models, by argument position (after
/// `self` for methods).
#[derive(Debug, Clone, Default)]
pub struct FrozenArgs {
    /// A model frozen at the site.
    pub positions: Vec<usize>,
    /// A construction of a project class (`model = FeatureNet([idx])`
    /// before `statistics(images, model)`): frozen when the class freezes
    /// itself ([`ClassSummary::self_frozen`]) and the call keeps it so.
    pub built: Vec<(usize, Construction)>,
    /// A parameter of the caller passed on as given (`get_activations(x,
    /// model)` in `def statistics(x, model)`), with the parameter's
    /// position: frozen when every call of the caller passes it frozen.
    pub forwarded: Vec<(usize, usize)>,
}

/// A construction of a project class as a call site sees it: the class,
/// and the arguments given other than a literal `False` (positions,
/// keyword names).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Construction {
    /// The class's qualified name.
    pub class: String,
    /// Positions given a value other than `False`.
    pub passed: Vec<usize>,
    /// Keyword names given a value other than `False`.
    pub passed_keywords: Vec<String>,
}

impl Construction {
    /// Whether a class that freezes its parameters as it is built, unless
    /// the parameter `unless` (position, name) is given, stays frozen here.
    pub fn keeps_freeze(&self, unless: &Option<(usize, String)>) -> bool {
        unless.as_ref().is_none_or(|(i, name)| !self.passed.contains(i) && !self.passed_keywords.contains(name))
    }
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
    /// A base is `torch.autograd.Function`: its static `forward` runs
    /// through `apply(...)`, where a caller asks for it, and is no step of
    /// its own.
    pub autograd_function: bool,
    /// `self.<attr>` assigned an `nn.Parameter` somewhere in the class.
    pub parameter_attrs: Vec<String>,
    /// `__enter__` disables grad.
    pub disables_grad: bool,
    /// What a dataset's `__getitem__` does per sample
    /// ([`crate::facts::datasets::dataset_items`]): return items of its
    /// attributes (its samples are in memory), maybe through a transform
    /// given at construction, or anything else.
    pub dataset_items: crate::facts::datasets::Items,
    /// A module that owns no parameters: its direct base is `nn.Module` and
    /// it builds no layer, parameter or submodule, only buffers and plain
    /// attributes (a mel-spectrogram front end). A forward of it records no
    /// graph ([`crate::context::holds_no_parameters`]).
    pub parameter_free: bool,
    /// Its `__init__` freezes all its parameters, maybe unless a parameter
    /// (position after `self`, name) is passed ([`crate::facts::scan::freezes_itself`]).
    pub self_frozen: Option<Option<(usize, String)>>,
    /// Attributes `__init__` binds to one of its parameters as given
    /// (`self.model = model`): the attribute, the parameter's position
    /// (after `self`) and name. The calls of the class say what they hold
    /// ([`ProjectIndex::constructed_attr`]).
    pub init_param_attrs: Vec<(String, usize, String)>,
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
    /// Calls of project classes given instances of project classes
    /// (`Trainer(model, ...)` after `model = Net(args)`): the callee, and
    /// each such argument by position (digits) or keyword name with its
    /// class as the file resolves it. Kept beside the call sites, not in
    /// them: few calls have any.
    pub constructions: Vec<(String, Box<[(String, String)]>)>,
    /// The functions that return instances of project classes, every
    /// `return` building one (`get_embedding_module(kind)` returning
    /// `GraphAttentionEmbedding(...)` or `GraphSumEmbedding(...)`), with
    /// those classes as the file resolves them: an attribute a factory
    /// fills (`self.embedding = get_embedding_module(...)`) holds one of
    /// them ([`ProjectIndex::factory_calls`]). Kept beside the function
    /// summaries: few functions are factories.
    pub factories: Vec<(String, Box<[String]>)>,
    /// `local name -> qualified name` of the module's imports (re-exports
    /// of package `__init__`s are followed through these).
    pub imports: Vec<(String, String)>,
    /// Qualified names of functions passed to `.apply(...)` (weight init).
    pub applied: Vec<String>,
    /// The names the file imports, at any level (`data.get_loader`,
    /// `src.data.get_data` of a namespace package, `torch.nn`).
    pub imported: Vec<String>,
    /// Methods the file calls on a receiver it cannot resolve
    /// (`unit.load_from(w)` with `unit` from `block.named_children()`):
    /// each name once with grad on at some such call, once with grad off
    /// at some such call.
    pub dynamic_calls: Vec<(String, bool)>,
    /// The file imports torch: without it no rule has anything to check.
    pub imports_torch: bool,
    /// A loop of the file moves a loader's batches to an accelerator.
    pub moves_batches: bool,
    /// The optimizers the file builds ([`crate::api::optimizer_scale_invariance`]):
    /// some whose update is invariant to a constant scale of the
    /// gradients, and some others (or one chosen at run time).
    pub optimizers: (bool, bool),
    /// The file imports a module torch has since removed
    /// ([`crate::api::amp::removed_in`]) at its top level, unguarded: it
    /// runs only on a torch below this release.
    pub torch_below: Option<(u32, u32)>,
    /// Hashes of the names the file mentions outside the class of that
    /// name: as a name, an attribute or a string (`MODELS = {"PRM":
    /// PRM}`, `"BertModel"` in a mapping), sorted ([`mentioned_name`]): what
    /// tells a module class nothing builds.
    pub class_refs: Vec<u64>,
    /// Those of [`FileSummary::class_refs`] made outside every class (a
    /// script's `model = Net()`, a `build_model()` function).
    pub builder_refs: Vec<u64>,
    /// The file picks classes by a name it computes: `eval(...)`,
    /// `importlib.import_module(...)`, `getattr(models, config["arch"])`
    /// on an imported module, Hydra's `instantiate`.
    pub constructs_by_name: bool,
}

/// The joined facts of all files of a run.
#[derive(Debug, Default)]
pub struct ProjectIndex {
    functions: HashMap<String, FunctionSummary>,
    classes: HashMap<String, ClassSummary>,
    /// `module.name -> qualified target` for every import of every module.
    aliases: HashMap<String, String>,
    /// The modules each module star-imports (`from utils import *` in
    /// `train`: `train` -> `[utils]`), in order.
    stars: HashMap<String, Vec<String>>,
    /// Per module of [`ProjectIndex::stars`], every module its star
    /// imports reach through up to four levels, each once, in the order a
    /// depth-first search first meets it ([`star_order`]).
    star_reach: HashMap<String, Box<[String]>>,
    /// The modules some module star-imports that import torch themselves.
    star_torch: HashSet<String>,
    module_classes: HashSet<String>,
    optimizer_classes: HashSet<String>,
    grad_disabling: HashSet<String>,
    no_grad_only: HashSet<String>,
    /// Functions every known call of which passes a frozen model at some
    /// positions (after `self`): qualified name -> those positions.
    frozen_args: HashMap<String, Vec<usize>>,
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
    /// Some file of the run moves a loader's batches to an accelerator.
    moves_batches: bool,
    /// The run builds optimizers, and each is invariant to a constant
    /// scale of the gradients ([`FileSummary::optimizers`]).
    optimizers_scale_invariant: bool,
    /// The lowest [`FileSummary::torch_below`] of the run.
    torch_below: Option<(u32, u32)>,
    /// The modules of the run some file imports (or imports a name
    /// from): `data` for `from data import get_loader`, and for
    /// `from src.data import get_data` when `src` has no `__init__.py`.
    imported: HashSet<String>,
    /// The project functions some call site of the run calls (by the name
    /// the index defines them under).
    called: HashSet<String>,
    /// Functions every known call of which runs outside loops or once per
    /// epoch (`calculate_map(...)` after the evaluation loop,
    /// `cluster_memory(...)` in the epoch loop).
    rarely_called: HashSet<String>,
    /// Functions reached only once per epoch ([`ProjectIndex::is_reached_once_per_epoch`]).
    epoch_only: HashSet<String>,
    /// The bare names of the functions with a [`FunctionSummary::moves_param`]:
    /// a cheap test before a call is resolved.
    mover_names: HashSet<String>,
    /// Method names some call of the run makes on a receiver its file
    /// cannot resolve, with grad on ([`FileSummary::dynamic_calls`]).
    dynamic_on: HashSet<String>,
    /// The same, with grad off.
    dynamic_off: HashSet<String>,
    /// [`ProjectIndex::method_of`]'s answers by class and method, kept as
    /// they are asked: many call sites look up one inherited method, each
    /// time through the same chain of bases. Asked only once the
    /// definitions are all in.
    method_cache: MethodCache,
    /// [`ProjectIndex::through_stars`]' answers by name, kept as they are
    /// asked.
    star_cache: std::sync::RwLock<HashMap<Box<str>, Option<Box<str>>>>,
    /// Per class, the attributes `__init__` binds to a parameter that every
    /// construction of the class in the run gives an instance of one
    /// project class ([`ClassSummary::init_param_attrs`]): class -> (attribute,
    /// that class).
    constructed_attrs: HashMap<String, Vec<(String, String)>>,
    /// [`FileSummary::factories`] of every file, by qualified name.
    factories: HashMap<String, Box<[String]>>,
    /// [`FileSummary::class_refs`] of every file, and every class's bases.
    class_refs: HashSet<u64>,
    /// [`FileSummary::builder_refs`] of every file, until `finish`.
    builder_refs: HashSet<u64>,
    /// Some file of the run mentions a module class of the run outside
    /// every class, and none picks classes by a computed name
    /// ([`FileSummary::constructs_by_name`]): the run holds the code that
    /// builds its models, and it names what it builds.
    builds_modules: bool,
    /// Hashes of the last segment of every name the index defines or
    /// aliases (`f` of `utils.f`): a name whose last segment is not among
    /// them (most calls of torch and the standard library) is no alias of
    /// a definition, under any prefix or star import, and is its own
    /// canonical name without a search.
    last_segments: HashSet<u64>,
}

/// A class, a method name, and the qualified name of the method found for
/// them on the class or its bases (`None`: none).
type MethodCache = std::sync::RwLock<hashbrown::HashTable<(Box<str>, Box<str>, Option<String>)>>;

mod build;
mod refs;
pub(crate) use refs::{mention_hash, mentioned_name};
pub(crate) mod calls;
mod project;
mod resolve;

use build::{Csr, Edge, IndexBuilder, Names};

const TORCH_MODULE_BASES: &[&str] = &["torch.nn.Module", "torch.nn.modules.module.Module"];

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
    // `init_hidden(batch_size)`, `init_state()`: a recurrent model's state
    // for the next sequence, made at every step, not weights.
    if has(&["hidden", "state", "states", "memory", "mems", "cell", "carry"]) {
        return false;
    }
    has(&["init", "initialize", "initialise"])
        || (has(&["weights"]) && has(&["init", "reset", "normal", "uniform", "xavier", "kaiming"]))
}

/// Whether one of the words of `name` ([`crate::resolve::words`]) is in `set`
/// (lowercase), without allocating them.
fn has_word(name: &str, set: &[&str]) -> bool {
    crate::resolve::word_slices(name).any(|w| set.iter().any(|s| w.eq_ignore_ascii_case(s)))
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
    crate::resolve::word_slices(name).next().is_some_and(|w| SETUP_FIRST_WORDS.iter().any(|s| w.eq_ignore_ascii_case(s)))
        || name.ends_with("_state_dict")
        || name.ends_with("_pretrained")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A module imported under its name, through a namespace package, or
    /// after its path collided with another file's.
    #[test]
    fn imported_modules_are_found_by_the_names_imports_use() {
        let file = |path: &str, imported: &[&str]| FileSummary {
            module: ModuleInfo { path: path.into(), ..ModuleInfo::default() },
            imported: imported.iter().map(|s| s.to_string()).collect(),
            ..FileSummary::default()
        };
        let ix = ProjectIndex::build(vec![
            file("<./translation/src/data.py>", &[]),
            file("<./super_resolution/data.py>", &[]),
            file("<./translation/main.py>", &["src.data.get_data", "torch.nn"]),
            file("<./super_resolution/main.py>", &[]),
            file("utils", &[]),
            file("train", &["utils.AverageMeter"]),
            file("plot", &[]),
        ]);
        assert!(ix.is_imported_module("<./translation/src/data.py>"));
        assert!(ix.is_imported_module("<./super_resolution/data.py>"), "an import of `data` may be either");
        assert!(ix.is_imported_module("utils"));
        assert!(!ix.is_imported_module("plot"));
        assert!(!ix.is_imported_module("train"));
        assert!(!ix.is_imported_module("<./translation/main.py>"));
    }

    #[test]
    fn rust_paths_resolve_against_the_crate_and_module() {
        let m = ModuleInfo { path: "agent.ppo.loss".into(), crate_root: Some("agent".into()), ..ModuleInfo::default() };
        assert_eq!(m.resolve_relative("crate.util.f"), "agent.util.f");
        assert_eq!(m.resolve_relative("self.f"), "agent.ppo.loss.f");
        assert_eq!(m.resolve_relative("super.f"), "agent.ppo.f");
        assert_eq!(m.resolve_relative("super.super.f"), "agent.f");
        assert_eq!(m.resolve_relative("super.superb.f"), "agent.ppo.superb.f");
        assert_eq!(m.resolve_relative("tch.nn"), "tch.nn");
        assert_eq!(m.rust_parent(), Some("agent.ppo"));
        let root = ModuleInfo { path: "agent".into(), crate_root: Some("agent".into()), ..ModuleInfo::default() };
        assert_eq!(root.rust_parent(), None);
        assert_eq!(root.resolve_relative("self.util"), "agent.util");
    }

    #[test]
    fn relative_imports_resolve_against_the_package() {
        let m = ModuleInfo::python("pkg.sub.mod", false);
        assert_eq!(m.resolve_relative(".utils.f"), "pkg.sub.utils.f");
        assert_eq!(m.resolve_relative("..a.b"), "pkg.a.b");
        assert_eq!(m.resolve_relative("torch.nn"), "torch.nn");
        let init = ModuleInfo::python("pkg.sub", true);
        assert_eq!(init.resolve_relative(".mod.f"), "pkg.sub.mod.f");
    }

    /// A file whose path collided with another's resolves relative imports
    /// against the path it had; its imports reach the collided modules of
    /// its own tree by their new paths, the nearest tree first.
    #[test]
    fn imports_reach_collided_modules_of_their_own_tree() {
        let near: Arc<[(String, String)]> = vec![("helpers".to_string(), "<./b/helpers.py>".to_string()), ("pkg.m".to_string(), "<./b/pkg/m.py>".to_string())].into();
        let far: Arc<[(String, String)]> = vec![("helpers".to_string(), "<./helpers.py>".to_string()), ("pkg".to_string(), "<./pkg/__init__.py>".to_string())].into();
        let m = ModuleInfo { path: "<./b/pkg/x.py>".into(), renamed_from: Some("pkg.x".into()), nearby: vec![near, far], ..ModuleInfo::default() };
        assert_eq!(m.resolve_relative("helpers.make_loader"), "<./b/helpers.py>.make_loader");
        assert_eq!(m.resolve_relative("helpers_extra.f"), "helpers_extra.f", "whole segments only");
        assert_eq!(m.resolve_relative(".m.f"), "<./b/pkg/m.py>.f");
        assert_eq!(m.resolve_relative("pkg.m.f"), "<./b/pkg/m.py>.f");
        assert_eq!(m.resolve_relative("pkg.other"), "<./pkg/__init__.py>.other");
        assert_eq!(m.resolve_relative("torch.nn"), "torch.nn");
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
            module: ModuleInfo::python("pkg.eval", false),
            functions: vec![
                FunctionSummary { qualname: "pkg.eval.run".into(), name: "run".into(), ..Default::default() },
                FunctionSummary { qualname: "pkg.eval.inner".into(), name: "inner".into(), ..Default::default() },
            ],
            calls: vec![CallSite { caller: Some("pkg.eval.run".into()), callee: "pkg.eval.inner".into(), ..Default::default() }],
            ..Default::default()
        };
        let b = FileSummary {
            module: ModuleInfo::python("main", false),
            imports: vec![("run".into(), "pkg.eval.run".into())],
            calls: vec![CallSite { caller: None, callee: "pkg.eval.run".into(), grad_off: true, ..Default::default() }],
            ..Default::default()
        };
        let ix = ProjectIndex::build(vec![a, b]);
        assert!(ix.only_called_without_grad("pkg.eval.run"));
        assert!(ix.only_called_without_grad("pkg.eval.inner"));
    }

    #[test]
    fn a_method_called_only_by_name_with_grad_off_runs_with_grad_off() {
        let method = |q: &str| FunctionSummary {
            qualname: q.into(),
            name: q.rsplit('.').next().unwrap().into(),
            class: Some(q.rsplit_once('.').unwrap().0.into()),
            ..Default::default()
        };
        let units = FileSummary {
            module: ModuleInfo::python("units", false),
            functions: vec![method("units.Unit.load_from"), method("units.Unit.restore"), method("units.Unit.reset")],
            ..Default::default()
        };
        // `unit.load_from(w)` under no_grad only; `unit.restore(w)` with
        // grad on somewhere; nothing calls `reset` by any name.
        let model = FileSummary {
            module: ModuleInfo::python("model", false),
            dynamic_calls: vec![("load_from".into(), true), ("restore".into(), true), ("restore".into(), false)],
            ..Default::default()
        };
        let ix = ProjectIndex::build(vec![units, model]);
        assert!(ix.only_called_without_grad("units.Unit.load_from"));
        assert!(!ix.only_called_without_grad("units.Unit.restore"));
        assert!(!ix.only_called_without_grad("units.Unit.reset"));
    }

    #[test]
    fn names_through_star_imports_and_namespace_packages() {
        let function = |q: &str| FunctionSummary { qualname: q.into(), name: q.rsplit('.').next().unwrap().into(), ..Default::default() };
        // `util/util.py` outside any package: its module path is `util`.
        let util = FileSummary { module: ModuleInfo::python("util", false), functions: vec![function("util.metric")], ..Default::default() };
        let helpers = FileSummary {
            module: ModuleInfo::python("helpers", false),
            functions: vec![function("helpers.decode")],
            classes: vec![ClassSummary { qualname: "helpers.Net".into(), is_module_locally: true, ..Default::default() }],
            ..Default::default()
        };
        // `from helpers import *` in `utils`, `from utils import *` in `train`.
        let utils = FileSummary {
            module: ModuleInfo::python("utils", false),
            imports: vec![("*".into(), "helpers.*".into())],
            functions: vec![function("utils.calculate_map")],
            ..Default::default()
        };
        let train = FileSummary { module: ModuleInfo::python("train", false), imports: vec![("*".into(), "utils.*".into())], ..Default::default() };
        let ix = ProjectIndex::build(vec![util, helpers, utils, train]);
        assert_eq!(ix.resolve_function("train.calculate_map").as_deref(), Some("utils.calculate_map"));
        assert_eq!(ix.resolve_function("train.decode").as_deref(), Some("helpers.decode"), "two levels of star imports");
        assert_eq!(ix.class_is_module("train.Net"), Some(true));
        assert_eq!(ix.resolve_function("train.missing"), None);
        assert_eq!(ix.resolve_function("util.util.metric").as_deref(), Some("util.metric"), "a namespace package's module");
    }
}
