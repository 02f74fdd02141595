//! The statement-order walk that maintains the semantic facts.

use std::cell::Cell;
use std::sync::Arc;

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use crate::index::{is_setup_name, ModuleInfo, ProjectIndex, Role};
use crate::ir::{
    for_each_expr_in_function, for_each_stmt_in_function, Expr, ExprId, StmtId, ExprKind, Function, Language, Module, Param, Stmt,
    StmtKind, Words,
};
use crate::facts::data_reads::*;
use crate::facts::guards::*;
use crate::facts::backward::backward_roots;
use crate::facts::scan::*;
use crate::facts::views::{chain_detaches, is_tensor_indexing, view_chain, ViewOf};
use crate::resolve::imports::{name_hash, ImportMap};
pub use crate::resolve::imports::ModuleFacts;
pub use sync::HostRead;
use crate::resolve::{words, QualifiedName};

mod bind;
mod freeze;
mod query;
mod resolve;
mod kinds;
mod loops;
mod values;
mod pipeline;
mod sync;
mod waiting;
mod walk;
mod version;

pub(crate) use kinds::{class_attr_kinds, holds_no_parameters, init_param_attrs, self_calls_under_options, OptionArm};
use kinds::class_attr_facts;

/// What kind of value a binding is known to hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueKind {
    /// A tensor.
    Tensor,
    /// A parameter (a leaf tensor that requires grad).
    Parameter,
    /// An `nn.Module` (a model or a loss module).
    Module,
    /// What calling a model returned: a tensor, or a tuple/dict/ModelOutput
    /// of tensors (so `out[0]` may be a tuple element, not a view).
    Output,
    /// A `DataLoader`.
    DataLoader,
    /// An optimizer.
    Optimizer,
    /// Known not to be a tensor (an argparse namespace, a number, a string...).
    NonTensor,
    /// An instance of a project class that is not an `nn.Module` (a
    /// trainer, a predictor wrapping a model): calling it is not a forward.
    Object,
}

/// Classification of a loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LoopKind {
    /// The loop body reaches `backward()`.
    Train,
    /// The loop iterates a validation/test loader.
    Eval,
    /// Any other loop.
    #[default]
    Other,
}

/// Callbacks a linter implements to see every statement and expression with
/// the facts in force at that point.
pub trait Visitor {
    /// Called for each statement before its effects are applied.
    fn visit_stmt(&mut self, stmt: &Stmt, cx: &Context);
    /// Called for each expression (pre-order) of a statement, before the
    /// statement's effects are applied.
    fn visit_expr(&mut self, expr: &Expr, cx: &Context);
    /// Called for a loop or a function definition once its body has been
    /// walked, with the facts in force at the end of the body, still inside
    /// it (the loop's frame, the function's scope): checks of the whole
    /// body run here, after its facts exist.
    fn leave_stmt(&mut self, _stmt: &Stmt, _cx: &Context) {}
    /// Called once after the whole file was walked, with the module-level
    /// facts in force at its end.
    fn finish(&mut self, _cx: &Context) {}
}

/// Facts about the file that the walk cannot see in the source.
#[derive(Debug, Clone, Default)]
pub struct ContextOptions {
    /// The file is a test module (`test_*.py`, `*_test.py`, under `tests/`):
    /// its `test_*` functions are unit tests, not evaluation code.
    pub is_test_file: bool,
    /// Where the file sits in the project's module tree.
    pub module: ModuleInfo,
    /// What the other files of the run contribute (empty for one file).
    pub index: Arc<ProjectIndex>,
    /// The lowest torch version the project declares, when it does.
    pub torch_minimum: Option<(u32, u32)>,
    /// A torch version (major, minor) every torch the project runs on is
    /// below, when its declarations pin or cap torch (`torch==1.7.1`:
    /// (1, 8); `torch<2.0`: (2, 0)).
    pub torch_below: Option<(u32, u32)>,
    /// First segments of the module paths of the run (`timm`, `train`):
    /// names outside them are libraries, never looked up in the index.
    /// Empty: every name may be the project's.
    pub project_roots: Arc<HashSet<String>>,
    /// The walk only summarizes the file for the project index: facts that
    /// only rules read (views, kept-alive names, per-iteration resets,
    /// frozen models, backward outside loops) are not computed.
    pub summary_only: bool,
    /// The pre-scan of this same module by an earlier walk
    /// ([`Context::module_facts`]); `None`: the walk pre-scans it.
    pub module_facts: Option<Arc<ModuleFacts>>,
}

/// What a comprehension's target holds: `q` of `[... for q in
/// m.parameters()]` is a parameter that requires grad; `x` of `for x, y in
/// loader` a batch; any other target is a fresh name with no facts.
#[derive(Debug, Clone)]
struct CompBinding {
    name: String,
    kind: Option<ValueKind>,
    requires_grad: bool,
    batch: bool,
    /// For a batch: the dotted name of the loader it comes from, when known.
    loader: Option<String>,
}

#[derive(Debug, Default)]
struct LoopFrame {
    kind: LoopKind,
    /// The body calls `backward()` (itself or through a project helper).
    calls_backward: bool,
    /// One iteration is one step: an evaluation loop, or a training loop
    /// whose own body (not only a nested loop) calls `backward()`.
    direct_step: bool,
    /// Dotted names (re)assigned in the body from a value that does not read
    /// them: they are per-iteration values.
    resets: HashSet<String>,
    /// Per name, the statements (by span) at which the name is re-created
    /// in the same iteration: every path from the body's start to the
    /// statement, or from the statement to the end of the iteration, binds
    /// it anew. (Old wording: the subset of `resets` assigned unconditionally (at the top level of
    /// the body, not under an `if`/`try`): re-created every iteration.
    unconditional: HashMap<String, HashSet<StmtId>>,
    /// Names that `backward()` is called on (or through) in the body.
    backward_roots: HashSet<String>,
    /// The body steps an environment (`env.step(action)`): an interaction
    /// loop of reinforcement learning, where a forward picks each action.
    steps_env: bool,
    /// The body runs an adversarial attack
    /// ([`crate::facts::scan::runs_an_attack`]): it needs autograd on.
    runs_attack: bool,
    /// The loop iterates over data: a loader, a dataset or batches (and
    /// does not leave after its first iteration by an unconditional `break`).
    over_data: bool,
    /// The loop iterates over files found on disk (`glob.glob(...)`,
    /// `os.listdir(d)`, `path.iterdir()`): an inference script's images.
    over_files: bool,
    /// The loop iterates over a model's (or an optimizer group's) parameters.
    over_parameters: bool,
    /// The loop iterates a few fixed items (`range(3)`, `[0.0, 0.5,
    /// 2.0]`, a name bound to such a list): its body runs about as often
    /// as the code around the loop.
    few: bool,
    /// The loop's count, where the code gives it (`range(30)`,
    /// `range(grad_steps)` with `grad_steps = 30`).
    count: Option<i64>,
    /// For a loop over phases (`for phase in ["train", "val"]:`) whose
    /// body trains under a test of its variable (`if phase == "train":
    /// loss.backward()`): that variable.
    phase: Option<String>,
    /// The loop statement.
    id: StmtId,
    /// For a loop that calls `backward()`: the end of the last statement
    /// of its body that does (itself or through a project helper). Past it,
    /// the iteration trains no more.
    backward_before: u32,
}

#[derive(Debug, Default)]
struct Frame {
    /// How many `if` arms and `try` statements of this function are around
    /// the current point: 0 where a statement runs on every call.
    cond_depth: u32,
    /// How many `if` arms around the current point run only in train mode
    /// (`if model.training:`, the `else` of `if not self.training:`).
    train_mode_depth: u32,
    name: Option<String>,
    /// Fully qualified name of the function (`module.Class.method`).
    qualname: Option<String>,
    /// A class body: its bindings are not visible in its methods.
    is_class: bool,
    /// What the function is for in the program.
    role: Option<Role>,
    /// `backward()` is called outside every loop of the function (and not
    /// only under the train-mode flag).
    backward_outside_loops: bool,
    /// Functions defined in this one whose body takes gradients (a local
    /// `def hvp(y, w, v):` around `autograd.grad`): calling one is a backward.
    backward_helpers: HashSet<String>,
    /// A caller passes `False` to the function's train-mode flag.
    eval_by_flag: bool,
    /// That flag parameter: `backward()` under `if <flag>:` runs only when training.
    flag_param: Option<String>,
    /// `True` passed to that flag says evaluation (`cross_valid=True`).
    flag_negated: bool,
    /// Project class of instance bindings (`meter = AverageMeter()`).
    instances: HashMap<String, String>,
    /// Models whose parameters were all frozen.
    frozen: HashSet<String>,
    /// Names bound to a torch layer that owns no parameters (`softmax =
    /// nn.Softmax(dim=-1)`).
    parameterless: HashSet<String>,
    /// Summary walk only: names bound to a construction of a project class
    /// (`model = FeatureNet([idx])`), which the index reads for a class
    /// that freezes itself ([`Context::frozen_args_at`]).
    constructions: HashMap<String, crate::index::Construction>,
    /// Summary walk only: the function's parameters in order (after `self`
    /// for a method), for the calls that pass one on.
    positional: Vec<String>,
    /// Models frozen whole and then given back a trainable part (a loop
    /// setting `requires_grad = True` over `model.head.parameters()`, a
    /// fresh `model.head = nn.Linear(...)`): the model, and the first such
    /// part. The rest of the model stays frozen.
    unfrozen_parts: HashMap<String, String>,
    /// Qualified name of the class this function is a method of (nested
    /// classes included: `module.f.Net`).
    class_qualname: Option<String>,
    /// Locals that save a tensor's `.data` only to put it back later
    /// (`saved = p.data` ... `p.data = saved`): a swap-and-restore.
    data_restores: HashSet<String>,
    /// Locals that only feed an index reduction
    /// ([`crate::facts::data_reads::index_only_locals`]; rules' walk only,
    /// in functions that read `.data`).
    index_locals: HashSet<String>,
    /// Locals the function binds only to `None` (rules' walk only): a
    /// branch that tests one for being set never runs.
    unset_locals: Vec<String>,
    /// Locals the function binds only to `True` or a non-zero integer
    /// (rules' walk only): the `else` of a test of one never runs.
    set_locals: Vec<String>,
    /// Every name the function binds anywhere in its body (Python makes
    /// them local for the whole function): they hide module-level facts.
    locals: Option<Arc<[crate::ir::Ident]>>,
    /// Enclosing `with` contexts that are not torch's (qualified names).
    with_contexts: Vec<String>,
    /// Locals holding what a project function returned (`ctx =
    /// self.get_inference_context()`), by the function's qualified name: a
    /// later `with ctx():` uses that function's context.
    factories: HashMap<String, String>,
    /// Locals bound to an interval test (`g_regularize = i % k == 0`): an
    /// `if` on one is an interval guard.
    interval_names: HashSet<String>,
    /// Names bound to a literal list or tuple of a few items (`ws =
    /// [0.0, 0.5, 2.0]`): a loop over one runs its body a few times.
    few_items: HashSet<String>,
    /// Names bound to a check of the installed torch's version or API
    /// (`AMP_AVAILABLE = hasattr(torch.cuda.amp, "autocast")`): a test of
    /// one is compatibility code. Not cleared by a rebinding (the fallback
    /// `AMP_AVAILABLE = False` of the `except ImportError:` arm).
    version_flags: HashSet<String>,
    /// Names bound to an integer literal (`grad_steps = 10`): a `range`
    /// over one runs a count known from the code.
    counts: HashMap<String, i64>,
    /// Names bound to the CPU as a device (`DEVICE = torch.device("cpu")`),
    /// and names bound to another device anywhere in the frame
    /// (`device = torch.device("cuda:0")` in one arm, `"cpu"` in the other):
    /// a move to a name of the first and not the second copies nothing.
    /// Kept across `if` arms (not among the joined facts): the CPU must be
    /// the only device the name is ever given.
    cpu_devices: HashSet<String>,
    other_devices: HashSet<String>,
    /// Names bound to a CUDA tensor type in any arm (`dtypeFloat =
    /// torch.cuda.FloatTensor`): `x.type(dtypeFloat)` copies `x` to the GPU.
    cuda_types: HashSet<String>,
    eval_named: bool,
    /// A unit test function in a test module: never evaluation code.
    unit_test: bool,
    /// Grad disabled by a decorator of the function.
    decorator_no_grad: bool,
    /// Grad disabled/enabled by a bare `torch.set_grad_enabled(...)` call.
    set_grad: Option<bool>,
    /// Grad state pushed by `with` blocks (`None`: unknown, treated as off).
    with_grad: Vec<Option<bool>>,
    /// `model.eval()` was seen (and no `model.train()` since).
    eval_mode: bool,
    /// How many loops enclosed the last `model.eval()`: the loops it was
    /// called in were entered before evaluation began.
    eval_depth: usize,
    loops: Vec<LoopFrame>,
    kinds: HashMap<String, ValueKind>,
    params: HashSet<String>,
    requires_grad: HashSet<String>,
    graph: HashSet<String>,
    kept_alive: HashSet<String>,
    /// Variables holding a view of another binding.
    views: HashMap<String, ViewOf>,
    /// Bindings holding a loss module (`criterion = nn.CrossEntropyLoss()`).
    losses: HashSet<String>,
    /// The class whose method this frame is (its `self.<attr>` kinds apply).
    class: Option<String>,
    /// Local names shadowing imports in this function.
    imports: ImportMap,
    /// Tensors autograd saved for the backward pass, with the span of the
    /// op that saved them (`y = x.sigmoid()` saves `y`; `z = a * b` saves
    /// `a` and `b`).
    saved: HashMap<String, memlint_diagnostics::Span>,
    /// Names bound to a value that requires grad (a module's output, a
    /// product with a parameter), for the saved-tensor facts.
    grad_values: HashSet<String>,
    /// Start offsets of the `backward()` calls of the body (nested
    /// functions excluded).
    backward_at: Vec<u32>,
    /// The identifiers of [`Words`] the function mentions.
    words: Words,
    /// On some path to the statement being visited, a graph was built (a
    /// value carrying one bound with grad on) and no `backward()` without
    /// `retain_graph=True` has freed it since: a may-fact, joined over the
    /// arms of an `if` and over a loop's iterations. True at the entry of
    /// step code (a caller's graph may be live), false at the top of a
    /// training loop's body (the previous iteration's `backward()` freed
    /// its graph).
    graph_built: bool,
    /// An optimizer stepped (`opt.step()`, `scaler.step(opt)`) since the
    /// last statement that built a graph: it changed in place the
    /// parameters any live graph saved, so that graph cannot run
    /// `backward()` again (autograd's version check would raise). A
    /// must-fact, joined like `eval_mode`.
    stepped: bool,
    /// Places set `requires_grad = False` (`layer.weight.requires_grad =
    /// False`): not leaves that require grad, whatever they are.
    grad_off: HashSet<String>,
    /// Names bound to the batches of a data loader (`x`, `y` of `for x, y
    /// in loader`): tensors built from data, which require no grad.
    batches: HashSet<String>,
    /// For batch names bound by a loop over a named loader: that loader's
    /// dotted name.
    batch_loader: HashMap<String, String>,
    /// Names bound to an iterator over a loader (`data_iter =
    /// iter(train_loader)`), with the loader's dotted name.
    loader_iters: HashMap<String, String>,
}

/// The semantic state at one point of the walk. Rules read it through its
/// query methods.
pub struct Context {
    language: Language,
    options: ContextOptions,
    module_imports: ImportMap,
    frames: Vec<Frame>,
    torch_imported: bool,
    /// The file has a star import (`from utils import *`): names no import
    /// binds may come from it.
    star_imports: bool,
    module_classes: HashSet<String>,
    /// The pre-scan's facts of the file ([`ModuleFacts`]): the names of
    /// its functions (calling one is not a forward pass, whatever its
    /// name), its top-level definitions and its imports.
    facts: Arc<ModuleFacts>,
    /// Classes' `self.<attr>` assigned an `nn.Parameter` or a module, by class name.
    class_params: HashMap<String, HashMap<String, ValueKind>>,
    class_stack: Vec<String>,
    module: ModuleInfo,
    index: Arc<ProjectIndex>,
    /// Depth of compatibility code: branches under a version guard and
    /// `except` handlers.
    compat_depth: usize,
    /// Compatibility depth of the expression being visited (a conditional
    /// expression under a version guard, an `isinstance` check).
    compat_expr: Cell<usize>,
    /// Depth of `tch::no_grad(...)` calls around the expression being
    /// visited (Rust): grad is off inside their closures.
    no_grad_expr: Cell<usize>,
    /// The targets of the comprehensions around the expression being
    /// visited, innermost last: they shadow the function's names.
    comp_scope: std::cell::RefCell<Vec<CompBinding>>,
    /// Comprehensions over data around the expression being visited
    /// (`[model(x) for x in loader]`).
    data_comprehension: Cell<usize>,
    /// Receivers of copying or reducing methods among the enclosing
    /// expressions (`x` in `x.detach()`, `x.clone()`, `x.norm()`).
    copied_reads: std::cell::RefCell<Vec<ExprId>>,
    /// Index reductions around the expression being visited
    /// (`torch.argmin(...)`, `x.argmax()`): no gradient flows out of them.
    index_expr: Cell<usize>,
    /// The statement being visited assigns or changes in place a local
    /// that only feeds an index reduction (`index_locals`).
    index_stmt: bool,
    /// Values written through by the expression or statement being visited:
    /// receivers of in-place methods (`x` in `x.add_(1)`) and bases of item
    /// assignments (`x` in `x[0] = v`, `x[0] += v`).
    written: std::cell::RefCell<Vec<ExprId>>,
    /// Per class (qualified): `self.<attr>` frozen, and `self.<attr>` instance classes.
    class_frozen: HashMap<String, HashSet<String>>,
    /// Per class of the file (qualified) that freezes all its parameters
    /// in `__init__`: maybe unless a parameter is passed
    /// ([`crate::facts::scan::freezes_itself`]).
    class_self_frozen: HashMap<String, Option<(usize, String)>>,
    /// Per class (qualified, lint walk only): its accessor methods, each
    /// with the `self.<attr>` it returns ([`self_accessors`]).
    class_accessors: HashMap<String, HashMap<String, String>>,
    /// Per class: the `self.<attr>` options its `__init__` sets from a
    /// parameter that defaults to `False` or `None` and nothing else in
    /// the class assigns ([`off_by_default_options`]).
    class_off_options: HashMap<String, HashSet<String>>,
    /// Per class, the attributes its `__init__` sets from a flag parameter
    /// (`self.ln = ln`), attribute to parameter ([`kinds::flag_options`]).
    class_flag_options: HashMap<String, HashMap<String, String>>,
    class_instances: HashMap<String, HashMap<String, String>>,
    /// Per class, its attributes that hold instances of several project
    /// classes ([`kinds::ClassAttrFacts::alternatives`]).
    class_alternatives: kinds::ClassAlternatives,
    /// Per class (qualified): `self.<attr>` assigned a `torch.nn` layer,
    /// by the layer's class name (`self.act = nn.Sigmoid()` -> `Sigmoid`).
    class_layers: HashMap<String, HashMap<String, String>>,
    /// The assignment targets of the statement being visited.
    assign_targets: Vec<ExprId>,
    /// The statement being visited is a `.data =` swap changing this.
    data_swap: Option<&'static str>,
    /// Span of the statement being visited.
    current_stmt: memlint_diagnostics::Span,
    /// The statement being visited.
    current_stmt_id: StmtId,
    /// The plain local an assignment statement being visited binds.
    assign_local: Option<String>,
    /// Depth of branches that run only for another framework
    /// (`if self.framework == "tf":`, the `else` of `== "pt"`).
    non_torch_depth: usize,
    /// Depth of `if` bodies under an interval guard (`if step % k == 0:`).
    interval_depth: usize,
    /// Depth of `if` bodies under a user option (`if args.empty_cache:`,
    /// `if self.config.x >= 1:`).
    option_depth: usize,
    /// Depth of `if` bodies that run only now and then: under an option of
    /// the class that is off by default (`if self.individual:` with
    /// `individual=False` in `__init__`), or a test for NaN or infinite
    /// values (a recovery path).
    rare_branch_depth: usize,
    /// Depth of `if` bodies that run once: the body sets the attribute its
    /// test reads (`if not self.initialized: ...; self.initialized = True`,
    /// a data-dependent initialisation in `forward`).
    once_depth: usize,
    /// Depth of `if` bodies under a logging, debugging or profiling
    /// condition (`if args.verbose:`, `if log_this_step:`, `if cfg.profile:`).
    logging_depth: usize,
    /// `if` nesting under a logging, debugging or profiling condition
    /// ([`crate::facts::guards::is_debug_guard`]), a part of `logging_depth`.
    debug_depth: usize,
    /// Last segments of the exception types caught by the enclosing
    /// `except` handlers (`["Exception"]` for a bare `except:`).
    handlers: Vec<Vec<String>>,
    /// Classes of the file that subclass `torch.autograd.Function`: their
    /// `forward` runs with grad disabled.
    autograd_functions: HashSet<String>,
    /// For a class statement being visited: its `self.<attr>` kinds
    /// ([`class_attr_kinds`]), computed once for the visitor and the walk.
    class_attrs: Option<HashMap<String, ValueKind>>,
    /// The file's input pipeline as walked so far: loaders built, loops
    /// over loaders, batches moved to an accelerator.
    pipeline: std::cell::RefCell<crate::facts::pipeline::Pipeline>,
}

const LOADER_EVAL_WORDS: &[&str] = &["val", "valid", "validate", "validation", "test", "eval", "evaluation"];
const MODEL_SUFFIXES: &[&str] =
    &["model", "net", "network", "encoder", "decoder", "backbone", "classifier", "discriminator", "generator"];
/// First words of function and method names that act on a model rather
/// than being one (`wrap_model`, `for_model`, `load_net`).
const ACTION_VERBS: &[&str] = &[
    "create", "build", "make", "get", "gen", "load", "save", "init", "new", "setup", "construct", "wrap", "unwrap",
    "prepare", "preprocess", "postprocess", "dispatch", "for", "from", "to", "set", "update", "convert", "register",
    "apply", "check", "compile", "freeze", "unfreeze", "copy", "clone", "export", "move", "patch", "resize", "tie",
    "print", "log", "run", "is", "has", "replace", "fuse", "quantize", "validate", "evaluate", "eval", "test",
    "train", "predict", "infer", "compute", "fit", "instantiate", "download", "push", "merge", "shard", "cast",
];
const LOSS_NAMES: &[&str] = &["criterion", "loss_fn", "lossfn", "loss_func", "loss_function", "loss_module"];
/// Methods whose result shares nothing with the receiver that a later
/// in-place change could corrupt: copies and reductions.
const COPYING_METHODS: &[&str] = &[
    "detach", "clone", "item", "tolist", "numpy", "norm", "min", "max", "sum", "mean", "std", "var", "amax", "amin",
    "argmax", "argmin", "abs", "numel", "size", "dim", "float", "double", "half", "cpu", "allclose", "equal", "isnan",
    "isinf", "any", "all", "nonzero", "count_nonzero",
    // What the receiver is, not its values: a new tensor of its type and
    // device (`w.data.new(n, 1)`), its size or layout.
    "new", "new_zeros", "new_ones", "new_empty", "new_full", "new_tensor", "get_device", "nelement", "element_size",
    "stride", "is_contiguous", "data_ptr",
];
/// Attributes that say what a tensor is, not what it holds
/// (`w.data.shape`, `w.data.device`).
pub(crate) const METADATA_ATTRIBUTES: &[&str] = &["shape", "device", "dtype", "is_cuda", "ndim", "layout", "is_sparse"];


impl Context {
    /// Walks `module`, calling `visitor` on every statement and expression.
    pub fn walk(module: &Module, options: ContextOptions, visitor: &mut dyn Visitor) {
        Context::new(module, options).run(&module.body, visitor);
    }

    fn new(module: &Module, options: ContextOptions) -> Context {
        let mut cx = Context {
            language: module.language,
            module: options.module.clone(),
            index: options.index.clone(),
            options,
            module_imports: ImportMap::default(),
            frames: vec![Frame::default()],
            torch_imported: false,
            star_imports: false,
            module_classes: HashSet::default(),
            facts: Arc::default(),
            class_params: HashMap::default(),
            class_stack: Vec::new(),
            compat_depth: 0,
            compat_expr: Cell::new(0),
            no_grad_expr: Cell::new(0),
            comp_scope: std::cell::RefCell::new(Vec::new()),
            data_comprehension: Cell::new(0),
            copied_reads: std::cell::RefCell::new(Vec::new()),
            index_expr: Cell::new(0),
            index_stmt: false,
            written: std::cell::RefCell::new(Vec::new()),
            class_frozen: HashMap::default(),
            class_self_frozen: HashMap::default(),
            class_accessors: HashMap::default(),
            class_off_options: HashMap::default(),
            class_flag_options: HashMap::default(),
            class_instances: HashMap::default(),
            class_alternatives: HashMap::default(),
            class_layers: HashMap::default(),
            assign_targets: Vec::new(),
            data_swap: None,
            current_stmt: memlint_diagnostics::Span::new(0, 0),
            current_stmt_id: StmtId::DETACHED,
            assign_local: None,
            non_torch_depth: 0,
            interval_depth: 0,
            option_depth: 0,
            rare_branch_depth: 0,
            once_depth: 0,
            logging_depth: 0,
            debug_depth: 0,
            handlers: Vec::new(),
            autograd_functions: HashSet::default(),
            class_attrs: None,
            pipeline: std::cell::RefCell::default(),
        };
        match cx.options.module_facts.take() {
            Some(facts) => {
                cx.module_classes = facts.module_classes.clone();
                cx.torch_imported = facts.torch_imported;
                cx.facts = facts;
            }
            None => cx.prescan_module(&module.body),
        }
        cx.star_imports = cx.facts.import_targets(name_hash("*"), "*").is_some();
        // `from module import *` of a module of the run that imports torch,
        // or of a library the file takes `torch` from (`from fastai.text
        // import *` and `torch.zeros(...)` with no import of torch): only a
        // star import can bind it there.
        cx.torch_imported |= cx.star_imports
            && (crate::takes_torch_from_a_star_import(module) || cx.index.star_imports_torch(&cx.module.path));
        let summary_only = cx.options.summary_only;
        let backward = module.words.contains(Words::BACKWARD);
        if let Some(f) = cx.frames.last_mut() {
            f.words = module.words;
            f.backward_outside_loops = backward && backward_outside_loops(&module.body, None);
            f.kept_alive = kept_alive(&module.body, module.words);
            if !summary_only && backward {
                f.backward_at = backward_offsets(&module.body);
            }
        }
        cx
    }

    fn run(mut self, body: &[Stmt], visitor: &mut dyn Visitor) {
        self.walk_body(body, visitor);
        visitor.finish(&self);
    }

    // ----- queries -------------------------------------------------------

    /// For a class statement being visited, the `self.<attr>` kinds its
    /// methods assign (parameters and modules).
    pub(crate) fn class_attrs(&self) -> Option<&HashMap<String, ValueKind>> {
        self.class_attrs.as_ref()
    }

    /// Source language of the file.
    pub fn language(&self) -> Language {
        self.language
    }

    /// Whether `torch` (or any `torch.*` module) is imported anywhere in the
    /// file: rules about PyTorch return early when it is not.
    pub fn torch_imported(&self) -> bool {
        self.torch_imported
    }

    fn frame(&self) -> &Frame {
        // The module frame is pushed first and never popped.
        &self.frames[self.frames.len() - 1]
    }

    fn frame_mut(&mut self) -> &mut Frame {
        let n = self.frames.len() - 1;
        &mut self.frames[n]
    }

    /// The frames whose bindings are visible here: the current one, then
    /// the enclosing functions; a class body's bindings are visible only in
    /// the class body itself, never in its methods.
    fn visible_frames(&self) -> impl Iterator<Item = &Frame> {
        let n = self.frames.len();
        self.frames.iter().enumerate().rev().filter(move |(i, f)| !f.is_class || *i == n - 1).map(|(_, f)| f)
    }

    /// The qualified name a local name is imported as at this point, if it
    /// is an import (the root of [`Context::qualified_name`]).
    pub(crate) fn lookup_import(&self, name: &str) -> Option<&str> {
        // The name is hashed once for all scopes. Only a name that some
        // import of the file binds (all of them are in the pre-scan's
        // `import_targets`) can resolve to one: one lookup for the locals
        // that make most of the queries.
        let hash = name_hash(name);
        if self.facts.import_targets(hash, name).is_none() {
            debug_assert!(self.lookup_import_in_scopes(hash, name).is_none());
            // Rust: a crate's name is in scope without a `use`
            // (`tch::no_grad_guard()`), unless a local binds it.
            if self.language == Language::Rust && !self.frame().params.contains(name) {
                // And so are this crate's root and this module's parent
                // (`crate::util::f()`, `super::f()`).
                return match name {
                    "tch" => Some("tch"),
                    "crate" => self.module.crate_root.as_deref(),
                    "super" => self.module.rust_parent(),
                    _ => None,
                };
            }
            return None;
        }
        self.lookup_import_in_scopes(hash, name)
    }

    fn lookup_import_in_scopes(&self, hash: u64, name: &str) -> Option<&str> {
        for f in self.visible_frames() {
            if let Some(b) = f.imports.find(hash, name) {
                return b.as_deref();
            }
        }
        if let Some(b) = self.module_imports.find(hash, name) {
            return b.as_deref();
        }
        // A function body (not a class body, which runs where it stands).
        if self.frames.len() > 1 && !self.frame().is_class {
            return self.facts.module_level_imports.find(hash, name).and_then(|b| b.as_deref());
        }
        None
    }

}
