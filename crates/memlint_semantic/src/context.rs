//! The statement-order walk that maintains the semantic facts.

use std::cell::Cell;
use std::sync::Arc;

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use crate::index::{is_setup_name, ModuleInfo, ProjectIndex, Role};
use crate::ir::{
    for_each_expr_in_function, for_each_stmt_in_function, Expr, ExprId, StmtId, ExprKind, Function, Language, Module, Param, Stmt,
    StmtKind, Words,
};
use crate::names::{words, QualifiedName};
use crate::views::{chain_detaches, is_tensor_indexing, view_chain, ViewOf};

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
}

#[derive(Debug, Default)]
struct Frame {
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
    /// A caller passes `False` to the function's train-mode flag.
    eval_by_flag: bool,
    /// That flag parameter: `backward()` under `if <flag>:` runs only when training.
    flag_param: Option<String>,
    /// Project class of instance bindings (`meter = AverageMeter()`).
    instances: HashMap<String, String>,
    /// Models whose parameters were all frozen.
    frozen: HashSet<String>,
    /// Qualified name of the class this function is a method of (nested
    /// classes included: `module.f.Net`).
    class_qualname: Option<String>,
    /// Locals that save a tensor's `.data` only to put it back later
    /// (`saved = p.data` ... `p.data = saved`): a swap-and-restore.
    data_restores: HashSet<String>,
    /// Every name the function binds anywhere in its body (Python makes
    /// them local for the whole function): they hide module-level facts.
    locals: Option<Arc<[crate::ir::Ident]>>,
    /// Enclosing `with` contexts that are not torch's (qualified names).
    with_contexts: Vec<String>,
    /// Locals holding what a project function returned (`ctx =
    /// self.get_inference_context()`), by the function's qualified name: a
    /// later `with ctx():` uses that function's context.
    factories: HashMap<String, String>,
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
}

/// The semantic state at one point of the walk. Rules read it through its
/// query methods.
pub struct Context {
    language: Language,
    options: ContextOptions,
    module_imports: ImportMap,
    frames: Vec<Frame>,
    torch_imported: bool,
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
    /// Receivers of copying or reducing methods among the enclosing
    /// expressions (`x` in `x.detach()`, `x.clone()`, `x.norm()`).
    copied_reads: std::cell::RefCell<Vec<ExprId>>,
    /// Values written through by the expression or statement being visited:
    /// receivers of in-place methods (`x` in `x.add_(1)`) and bases of item
    /// assignments (`x` in `x[0] = v`, `x[0] += v`).
    written: std::cell::RefCell<Vec<ExprId>>,
    /// Per class (qualified): `self.<attr>` frozen, and `self.<attr>` instance classes.
    class_frozen: HashMap<String, HashSet<String>>,
    class_instances: HashMap<String, HashMap<String, String>>,
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
    /// Last segments of the exception types caught by the enclosing
    /// `except` handlers (`["Exception"]` for a bare `except:`).
    handlers: Vec<Vec<String>>,
    /// Classes of the file that subclass `torch.autograd.Function`: their
    /// `forward` runs with grad disabled.
    autograd_functions: HashSet<String>,
    /// For a class statement being visited: its `self.<attr>` kinds
    /// ([`class_attr_kinds`]), computed once for the visitor and the walk.
    class_attrs: Option<HashMap<String, ValueKind>>,
}

const EVAL_WORDS: &[&str] = &["validate", "validation", "evaluate", "evaluation", "eval", "test", "predict", "inference"];
const LOADER_EVAL_WORDS: &[&str] = &["val", "valid", "validation", "test", "eval", "evaluation"];
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
];

/// Tensor methods whose result carries no autograd history.
const DETACHING_METHODS: &[&str] = &[
    "item", "detach", "tolist", "numpy", "size", "dim", "numel", "argmax", "argmin", "eq", "ne", "lt", "le", "gt",
    "ge", "long", "int", "bool", "nelement", "element_size", "data_ptr", "is_contiguous", "isnan", "isinf",
    "isfinite", "__float__", "__int__", "sign", "topk_indices",
];
/// Builtins whose result is a Python scalar or non-tensor.
const SCALAR_BUILTINS: &[&str] = &["float", "int", "bool", "len", "str", "round", "repr", "abs_int", "isinstance"];

/// What the pre-scan of a module finds: facts of the file alone (its
/// imports anywhere, its top-level definitions, the names of its
/// functions, the classes deriving from `nn.Module` within it). They do
/// not depend on the project index, so the first phase's pre-scan serves
/// the second walk of the same parsed module ([`ContextOptions::module_facts`]).
#[derive(Debug, Default)]
pub struct ModuleFacts {
    /// Names of functions defined anywhere in the file.
    functions: HashSet<String>,
    /// Top-level functions and classes: local name -> qualified.
    module_defs: HashMap<String, String>,
    /// Every qualified name each local name is imported as, anywhere;
    /// looked up by [`name_hash`] ([`ModuleFacts::import_targets`]).
    import_targets: hashbrown::HashTable<(String, Vec<String>)>,
    /// Classes deriving (within the file) from `nn.Module`.
    module_classes: HashSet<String>,
    /// The file imports torch (or tch) somewhere.
    torch_imported: bool,
}

impl ModuleFacts {
    /// The qualified names `name` is imported as anywhere in the file
    /// (`None`: no import binds it), by its [`name_hash`].
    fn import_targets(&self, hash: u64, name: &str) -> Option<&[String]> {
        self.import_targets.find(hash, |(k, _)| k == name).map(|(_, t)| t.as_slice())
    }
}

/// The hash of a name in an [`ImportMap`] and [`ModuleFacts`]' imports.
fn name_hash(name: &str) -> u64 {
    use std::hash::BuildHasher;
    rustc_hash::FxBuildHasher.hash_one(name)
}

/// Local names to what they are bound to for import resolution: the
/// qualified name of an import, or `None` for a local that shadows one.
/// [`Context::lookup_import`] asks every scope for one name, so the name
/// is hashed once ([`name_hash`]) rather than once per scope.
#[derive(Debug, Default, Clone)]
struct ImportMap(hashbrown::HashTable<(String, Option<String>)>);

impl ImportMap {
    fn find(&self, hash: u64, name: &str) -> Option<&Option<String>> {
        if self.0.is_empty() {
            return None;
        }
        self.0.find(hash, |(k, _)| k == name).map(|(_, v)| v)
    }

    fn contains_key(&self, name: &str) -> bool {
        self.find(name_hash(name), name).is_some()
    }

    /// Binds `name` to `value`, replacing an earlier binding.
    fn insert(&mut self, name: String, value: Option<String>) {
        let hash = name_hash(&name);
        match self.0.entry(hash, |(k, _)| *k == name, |(k, _)| name_hash(k)) {
            hashbrown::hash_table::Entry::Occupied(mut e) => e.get_mut().1 = value,
            hashbrown::hash_table::Entry::Vacant(e) => {
                e.insert((name, value));
            }
        }
    }

    /// Binds `name` to `value` unless it is bound already.
    fn insert_if_absent(&mut self, name: String, value: Option<String>) {
        let hash = name_hash(&name);
        if let hashbrown::hash_table::Entry::Vacant(e) = self.0.entry(hash, |(k, _)| *k == name, |(k, _)| name_hash(k)) {
            e.insert((name, value));
        }
    }

    fn iter(&self) -> impl Iterator<Item = (&String, &Option<String>)> {
        self.0.iter().map(|(k, v)| (k, v))
    }
}

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
            module_classes: HashSet::default(),
            facts: Arc::default(),
            class_params: HashMap::default(),
            class_stack: Vec::new(),
            compat_depth: 0,
            compat_expr: Cell::new(0),
            copied_reads: std::cell::RefCell::new(Vec::new()),
            written: std::cell::RefCell::new(Vec::new()),
            class_frozen: HashMap::default(),
            class_instances: HashMap::default(),
            assign_targets: Vec::new(),
            data_swap: None,
            current_stmt: memlint_diagnostics::Span::new(0, 0),
            current_stmt_id: StmtId::DETACHED,
            assign_local: None,
            non_torch_depth: 0,
            interval_depth: 0,
            option_depth: 0,
            handlers: Vec::new(),
            autograd_functions: HashSet::default(),
            class_attrs: None,
        };
        match cx.options.module_facts.take() {
            Some(facts) => {
                cx.module_classes = facts.module_classes.clone();
                cx.torch_imported = facts.torch_imported;
                cx.facts = facts;
            }
            None => cx.prescan_module(&module.body),
        }
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
        self.module_imports.find(hash, name).and_then(|b| b.as_deref())
    }

    /// Every qualified name the local name is imported as anywhere in the
    /// file (more than one for compatibility aliases).
    pub fn import_targets(&self, local: &str) -> &[String] {
        self.facts.import_targets(name_hash(local), local).unwrap_or(&[])
    }

    /// Whether the current point is compatibility code: a branch under a
    /// torch-version guard (`if TORCH_2_4:`, `if version.parse(torch.__version__) >= ...`,
    /// `hasattr(torch, "amp")`), an `except` handler, or, for the
    /// expression being visited, an operand of a conditional expression
    /// under such a guard or of an `isinstance`/`issubclass` check.
    pub fn in_compat_code(&self) -> bool {
        self.compat_depth > 0 || self.compat_expr.get() > 0
    }

    /// Whether `expr` is a target of the assignment statement being visited
    /// (`p.data` in `p.data = ...`).
    pub fn is_assign_target(&self, expr: ExprId) -> bool {
        self.assign_targets.contains(&expr)
    }

    /// When the statement being visited is a `.data =` assignment that
    /// changes the tensor's dtype, device or class (`p.data = p.data.half()`,
    /// `m.weight.data = Int8Params(...)`), which of those it changes.
    pub fn current_data_swap(&self) -> Option<&'static str> {
        self.data_swap
    }

    fn swap_kind(&self, value: &Expr) -> Option<&'static str> {
        if let Some((_, m)) = value.as_method_call() {
            return match m {
                "half" | "float" | "double" | "bfloat16" | "long" | "int" | "bool" | "type" => Some("dtype"),
                "to" => Some("dtype or device"),
                "cuda" | "cpu" | "pin_memory" => Some("device"),
                _ => None,
            };
        }
        let (func, _, _) = value.as_call()?;
        let d = func.dotted()?;
        let last = d.rsplit('.').next().unwrap_or(&d);
        let is_class = last.starts_with(|c: char| c.is_ascii_uppercase());
        is_class.then_some("class")
    }

    /// Whether the value `expr` is only read through a method that copies
    /// or reduces it (`.detach()`, `.clone()`, `.item()`, `.norm()`,
    /// `.min()`...): no alias of it survives the expression.
    pub fn is_copied_read(&self, expr: ExprId) -> bool {
        self.copied_reads.borrow().last() == Some(&expr)
    }

    /// Whether the statement being visited saves a `.data` into a local that
    /// the function later assigns back through `.data =` (swap-and-restore).
    pub fn saves_data_for_restore(&self) -> bool {
        self.assign_local.as_ref().is_some_and(|n| self.frame().data_restores.contains(n))
    }

    /// Whether the value `expr` is written through where it stands: the
    /// receiver of an in-place method, the base of an item assignment, an
    /// augmented-assignment or `del` target.
    pub fn is_written_through(&self, expr: ExprId) -> bool {
        self.written.borrow().contains(&expr)
    }

    /// Whether `dotted` has `backward()` called on it in an enclosing loop
    /// of the current function: a loss, a scalar.
    pub fn is_backward_root(&self, dotted: &str) -> bool {
        self.frame().loops.iter().any(|l| l.backward_roots.contains(dotted))
    }

    /// Whether `dotted` is rooted at a module constructed in the current
    /// function (`new = nn.Embedding(...)`): its parameters carry no graph yet.
    pub fn is_fresh_module(&self, dotted: &str) -> bool {
        let root = dotted.split('.').next().unwrap_or(dotted);
        let f = self.frame();
        self.frames.len() > 1 && !f.params.contains(root) && f.kinds.get(root) == Some(&ValueKind::Module)
    }

    /// Whether the current function is model code: a method of an
    /// `nn.Module` class (of this file or the run), or step code reached
    /// from a `forward`/training step.
    pub fn in_model_code(&self) -> bool {
        let f = self.frame();
        if f.role == Some(Role::Step) {
            return true;
        }
        let Some(class) = &f.class else { return false };
        self.module_classes.contains(class)
            || f.class_qualname.as_ref().is_some_and(|q| self.index.class_is_module(q) == Some(true))
    }

    /// Whether the current point runs once per step: inside (possibly
    /// nested in) a loop one iteration of which is one training or
    /// evaluation step, not only in an epoch loop around it.
    pub fn in_step_iteration(&self) -> bool {
        self.frame().loops.iter().any(|l| l.direct_step)
    }

    /// Whether the current point runs only every k-th time: inside the body
    /// of `if step % k == 0:` (or `(i + 1) % k == 0`, `step % k == k - 1`).
    pub fn guarded_by_interval(&self) -> bool {
        self.interval_depth > 0
    }

    /// Whether the current point runs only when a user option enables it
    /// (the body of `if args.empty_unused_memory_level >= 1:`, `if
    /// self.config.clear_cache:`): a deliberate, configurable choice.
    pub fn guarded_by_option(&self) -> bool {
        self.option_depth > 0
    }

    /// Whether the current point is in an `except` handler catching one of
    /// the named exception classes (by last segment; a bare `except:` and
    /// `Exception` catch everything).
    pub fn in_handler_catching(&self, names: &[&str]) -> bool {
        self.handlers.iter().any(|h| {
            h.iter().any(|t| names.contains(&t.as_str()) || t == "Exception" || t == "BaseException")
        })
    }

    /// Whether the file is a test module (its code is unit tests and their
    /// helpers: hazards there do not reach training runs).
    pub fn in_test_module(&self) -> bool {
        self.options.is_test_file
    }

    /// Whether the walk is directly in a class body.
    pub fn in_class_body(&self) -> bool {
        self.frame().is_class
    }

    /// Where the file sits in the module tree.
    pub fn module_info(&self) -> &ModuleInfo {
        &self.module
    }

    /// Qualified names of the enclosing `with` contexts that are not torch's.
    pub fn with_contexts(&self) -> Vec<String> {
        self.frame().with_contexts.clone()
    }

    /// Whether the current point is inside a training or evaluation loop
    /// of the current function.
    pub fn in_step_loop(&self) -> bool {
        self.frame().loops.iter().any(|l| matches!(l.kind, LoopKind::Train | LoopKind::Eval))
    }

    /// The lowest torch version the project declares (`None`: undeclared).
    pub fn declared_torch_minimum(&self) -> Option<(u32, u32)> {
        self.options.torch_minimum
    }

    /// The project index of the run.
    pub fn index(&self) -> &ProjectIndex {
        &self.index
    }

    /// The identifiers of [`Words`] the function being walked mentions (the
    /// whole file's at module level): a rule looking for `scaler.scale(...)`
    /// has nothing to find where `scale` is never named.
    pub fn function_words(&self) -> Words {
        self.frame().words
    }

    /// The identifiers of [`Words`] the whole file mentions.
    pub fn file_words(&self) -> Words {
        self.frames[0].words
    }

    /// The qualified name of the function being walked (`module.Class.method`).
    pub fn function_qualname(&self) -> Option<&str> {
        self.frame().qualname.as_deref()
    }

    /// The role of the current function (module level: `Other`).
    pub fn function_role(&self) -> Role {
        self.frame().role.unwrap_or(Role::Other)
    }

    /// Whether the current point is step code, where a graph may be live:
    /// inside a training or evaluation loop, or in a function that is a
    /// step (a `forward`, an optimizer's `step`, a function with a step
    /// loop, or one called from step code in any file of the run). Never in
    /// unit tests, and never in always-setup code (`__init__`,
    /// `reset_parameters`, weight init passed to `.apply`).
    pub fn in_step_code(&self) -> bool {
        let f = self.frame();
        match f.role {
            Some(Role::Test) => false,
            Some(Role::Setup) => false,
            Some(Role::Step) => true,
            _ => f.loops.iter().any(|l| matches!(l.kind, LoopKind::Train | LoopKind::Eval)),
        }
    }

    /// Resolves a callee to the qualified name of a project definition (or
    /// any imported name): a function or class of this file, an import,
    /// `self.method` in a class, `obj.method` on an instance of a project
    /// class, `module.func`.
    pub fn resolve_callee(&self, func: &Expr) -> Option<String> {
        match &func.kind {
            ExprKind::Name(n) => {
                if let Some(q) = self.lookup_import(n) {
                    return Some(q.to_string());
                }
                if self.is_shadowed_locally(n) {
                    return None;
                }
                self.facts.module_defs.get(n.as_str()).cloned()
            }
            ExprKind::Attribute { value, attr, .. } => {
                if let Some(q) = self.qualified_name(func) {
                    return Some(q.0);
                }
                if let Some("self" | "cls") = value.as_name() {
                    let class = self.current_class()?;
                    return Some(format!("{class}.{attr}"));
                }
                if let ExprKind::Call { func: sup, args, .. } = &value.kind {
                    if sup.as_name() == Some("super") && args.is_empty() {
                        // The method of a base, not the class's own.
                        let class = self.current_class()?;
                        return self.index.method_of_bases(class, attr);
                    }
                }
                let recv = value.dotted()?;
                let class = self.instance_class(&recv)?;
                Some(format!("{class}.{attr}"))
            }
            _ => None,
        }
    }

    /// Whether a qualified name may belong to the project (its first
    /// segment is a root of the run, or the run's roots are unknown).
    pub fn is_project_qualified(&self, q: &str) -> bool {
        self.is_project_name(q)
    }

    fn is_project_name(&self, q: &str) -> bool {
        let roots = &self.options.project_roots;
        if q.starts_with("torch.") || q == "torch" {
            return false;
        }
        roots.is_empty() || roots.contains(q.split('.').next().unwrap_or(q))
    }

    /// [`Context::resolve_callee`] for project definitions only: `None`,
    /// without building a name, for library callees (`torch.cat`,
    /// `np.zeros`, `logger.info`).
    pub fn project_name(&self, func: &Expr) -> Option<String> {
        match &func.kind {
            ExprKind::Name(n) => {
                if let Some(q) = self.lookup_import(n) {
                    return self.is_project_name(q).then(|| q.to_string());
                }
                if self.is_shadowed_locally(n) {
                    return None;
                }
                self.facts.module_defs.get(n.as_str()).cloned()
            }
            ExprKind::Attribute { value, .. } => {
                // The root of the chain decides before any name is built.
                let mut root = value.as_ref();
                while let ExprKind::Attribute { value, .. } = &root.kind {
                    root = value;
                }
                if let ExprKind::Name(r) = &root.kind {
                    if let Some(q) = self.lookup_import(r) {
                        if !self.is_project_name(q) {
                            return None;
                        }
                    }
                }
                self.resolve_callee(func)
            }
            _ => None,
        }
    }

    /// Whether a local binding (parameter, assignment) hides a module-level name.
    fn is_shadowed_locally(&self, name: &str) -> bool {
        let n = self.frames.len();
        self.frames.iter().enumerate().skip(1).any(|(i, f)| {
            (!f.is_class || i == n - 1)
                && (f.locals.as_ref().is_some_and(|l| l.binary_search_by(|x| x.as_str().cmp(name)).is_ok())
                    || f.params.contains(name)
                    || f.kinds.contains_key(name)
                    || f.imports.contains_key(name))
        })
    }

    /// Qualified name of the class whose method is being walked.
    pub fn current_class_qualname(&self) -> Option<String> {
        self.current_class().map(str::to_string)
    }

    /// [`Context::current_class_qualname`], borrowed.
    fn current_class(&self) -> Option<&str> {
        let f = self.frame();
        if f.is_class {
            return f.qualname.as_deref();
        }
        f.class_qualname.as_deref()
    }

    fn qualify(&self, name: &str) -> String {
        if self.module.path.is_empty() {
            name.to_string()
        } else {
            format!("{}.{name}", self.module.path)
        }
    }

    /// The project class an instance binding holds (`meter = AverageMeter()`,
    /// `self.meter` assigned one in the class).
    pub fn instance_class(&self, dotted: &str) -> Option<String> {
        for f in self.visible_frames() {
            if let Some(c) = f.instances.get(dotted) {
                return Some(c.clone());
            }
        }
        let attr = dotted.strip_prefix("self.")?;
        self.class_instances.get(self.current_class()?)?.get(attr).cloned()
    }

    /// The project function a call resolves to, with its summary.
    pub fn project_callee(&self, call: &Expr) -> Option<&crate::index::FunctionSummary> {
        if self.index.is_empty() {
            return None;
        }
        let (func, _, _) = call.as_call()?;
        let q = self.project_name(func)?;
        let resolved = self.index.resolve_function(&q)?;
        self.index.function(&resolved)
    }

    /// Whether `dotted` names a model whose parameters were all frozen
    /// (`model.requires_grad_(False)`, `p.requires_grad = False` over its
    /// `parameters()`): its forward records no graph.
    pub fn is_frozen(&self, dotted: &str) -> bool {
        if self.visible_frames().any(|f| f.frozen.contains(dotted)) {
            return true;
        }
        let Some(attr) = dotted.strip_prefix("self.") else { return false };
        let Some(class) = self.current_class() else { return false };
        self.class_frozen.get(class).is_some_and(|s| s.contains(attr))
    }

    /// The local name (or alias) under which module `qualified` is imported,
    /// e.g. `"t"` after `import torch as t`.
    pub fn import_alias_of(&self, qualified: &str) -> Option<&str> {
        self.module_imports
            .iter()
            .find(|(_, q)| q.as_deref() == Some(qualified))
            .map(|(local, _)| local.as_str())
    }

    /// Resolves a name or attribute chain to the qualified name of the
    /// imported object it refers to, through import aliases. `None` for
    /// local values (`model.eval`) and anything not rooted in an import.
    pub fn qualified_name(&self, expr: &Expr) -> Option<QualifiedName> {
        let (root, _) = expr.dotted_root()?;
        let q = self.lookup_import(root)?;
        expr.dotted_with_root(q).map(QualifiedName)
    }

    /// Qualified name of a call's callee.
    pub fn callee_name(&self, call: &Expr) -> Option<QualifiedName> {
        let (func, _, _) = call.as_call()?;
        self.qualified_name(func)
    }

    /// Whether autograd records operations at this point: not inside
    /// `torch.no_grad()`/`torch.inference_mode()` (as a `with` block or a
    /// decorator of the current function) nor after `torch.set_grad_enabled(False)`.
    /// A grad mode that cannot be decided (`set_grad_enabled(flag)`) counts as off.
    pub fn grad_enabled(&self) -> bool {
        let f = self.frame();
        if let Some(top) = f.with_grad.last() {
            return top.unwrap_or(false);
        }
        if let Some(g) = f.set_grad {
            return g;
        }
        !f.decorator_no_grad
    }

    /// Whether the current point is evaluation code: after `model.eval()` in
    /// the same function, in a function named like validate/evaluate/test/
    /// predict/inference, or in a loop over a validation/test loader.
    pub fn in_eval_code(&self) -> bool {
        let f = self.frame();
        !f.unit_test
            && (f.eval_mode || f.eval_named || f.eval_by_flag || f.loops.iter().any(|l| l.kind == LoopKind::Eval))
    }

    /// Whether a `backward()` belongs to the code around the current point,
    /// making it training (or adversarial evaluation) rather than plain
    /// evaluation: inside loops, the enclosing loops up to the innermost
    /// evaluation loop call it; outside every loop, the function calls it
    /// outside its loops. An evaluation loop that follows a training loop
    /// in the same function is therefore still evaluation.
    pub fn backward_in_scope(&self) -> bool {
        let f = self.frame();
        for l in f.loops.iter().rev() {
            if l.calls_backward {
                return true;
            }
            if l.kind == LoopKind::Eval {
                return false;
            }
        }
        // No enclosing loop decides: the function's own backward does.
        f.backward_outside_loops
    }

    /// The name of the innermost function, `None` at module level.
    pub fn function_name(&self) -> Option<&str> {
        self.frame().name.as_deref()
    }

    /// Whether the current point is inside a training loop (one whose body
    /// reaches `backward()`), within the current function.
    pub fn in_training_loop(&self) -> bool {
        self.frame().loops.iter().any(|l| l.kind == LoopKind::Train)
    }

    /// Whether the current point is inside any loop of the current function.
    pub fn in_loop(&self) -> bool {
        !self.frame().loops.is_empty()
    }

    /// Whether `dotted` (a name or `self.attr`) keeps its value across the
    /// iterations of the innermost training loop: it is not reassigned (from
    /// a value that does not read it) in that loop or any loop inside it.
    pub fn outlives_training_iteration(&self, dotted: &str) -> bool {
        let loops = &self.frame().loops;
        let Some(train) = loops.iter().rposition(|l| l.kind == LoopKind::Train) else {
            return false;
        };
        let at = self.current_stmt_id;
        loops[train..].iter().all(|l| !l.unconditional.get(dotted).is_some_and(|stmts| stmts.contains(&at)))
    }

    /// Whether `dotted` keeps its value across iterations of the innermost loop.
    pub fn outlives_iteration(&self, dotted: &str) -> bool {
        match self.frame().loops.last() {
            Some(l) => !l.resets.contains(dotted),
            None => false,
        }
    }

    /// Whether `dotted` is a per-iteration value of the innermost loop
    /// (assigned in its body, or its loop variable).
    pub fn is_iteration_local(&self, dotted: &str) -> bool {
        match self.frame().loops.last() {
            Some(l) => l.resets.contains(dotted),
            None => false,
        }
    }

    /// The known kind of a binding (`x`, `self.w`) in the current function.
    pub fn kind_of_binding(&self, dotted: &str) -> Option<ValueKind> {
        self.frame()
            .kinds
            .get(dotted)
            .copied()
            .or_else(|| dotted.strip_prefix("self.").and_then(|attr| self.class_attr(attr)))
            .or_else(|| self.module_level(dotted, |f| f.kinds.get(dotted).copied()))
    }

    /// A fact about a module-level binding, seen from inside a function
    /// that does not bind the name itself.
    fn module_level<T>(&self, dotted: &str, get: impl Fn(&Frame) -> Option<T>) -> Option<T> {
        if self.frames.len() < 2 {
            return None;
        }
        let root = dotted.split('.').next().unwrap_or(dotted);
        if root == "self" || self.is_shadowed_locally(root) {
            return None;
        }
        get(&self.frames[0])
    }

    /// Whether `dotted` is a parameter of the current function.
    pub fn is_function_param(&self, dotted: &str) -> bool {
        self.frame().params.contains(dotted)
    }

    /// If `expr` is a view of a binding (directly, `out[:, 0]`, or through a
    /// variable assigned a view), the base binding and how much it selects.
    pub fn view_of(&self, expr: &Expr) -> Option<ViewOf> {
        if let Some(d) = expr.dotted() {
            return self.frame().views.get(d.as_str()).cloned();
        }
        let (base, part) = view_chain(expr)?;
        let base_name = base.dotted()?;
        let tensor_op = is_tensor_indexing(expr);
        let detached = chain_detaches(expr);
        match self.frame().views.get(base_name.as_str()) {
            Some(inner) => Some(ViewOf {
                base: inner.base.clone(),
                part: part.max(inner.part),
                tensor_op: tensor_op || inner.tensor_op,
                detached: detached || inner.detached,
            }),
            None => Some(ViewOf { base: base_name.into(), part, tensor_op, detached }),
        }
    }

    /// Whether `dotted` names an import (a module or library object).
    pub fn is_import(&self, dotted: &str) -> bool {
        self.lookup_import(dotted.split('.').next().unwrap_or(dotted)).is_some()
    }

    /// Whether `dotted` is stored or returned somewhere in the current
    /// function (so it stays alive whatever else holds a view of it).
    pub fn is_kept_alive(&self, dotted: &str) -> bool {
        self.frame().kept_alive.contains(dotted)
    }

    /// Whether `dotted` is a leaf tensor that requires grad at this point:
    /// created with `requires_grad=True`, an `nn.Parameter`, marked with
    /// `requires_grad_()`, or a loop variable over `.parameters()`.
    pub fn is_requires_grad_leaf(&self, dotted: &str) -> bool {
        let f = self.frame();
        if f.requires_grad.contains(dotted) {
            return true;
        }
        if self.module_level(dotted, |m| m.requires_grad.contains(dotted).then_some(())).is_some() {
            return true;
        }
        if dotted.strip_prefix("self.").is_some_and(|attr| self.class_attr(attr) == Some(ValueKind::Parameter)) {
            return true;
        }
        // `model.logit_scale` where the model's project class defines it as an `nn.Parameter`.
        if let Some((owner, attr)) = dotted.rsplit_once('.') {
            if let Some(class) = self.instance_class(owner) {
                return self.index.class_has_parameter(&class, attr);
            }
        }
        false
    }

    /// The kind of `self.<attr>` in the current method's class, from the
    /// class's assignments in any of its methods.
    fn class_attr(&self, attr: &str) -> Option<ValueKind> {
        let class = self.frame().class.as_ref()?;
        self.class_params.get(class)?.get(attr).copied()
    }

    /// The op of the autograd saved-tensor table ([`crate::api::SAVED_FOR_BACKWARD`])
    /// an expression applies, and its operands in order: `a * b` ->
    /// `("mul", [a, b])`, `x.sigmoid()` -> `("sigmoid", [x])`,
    /// `F.linear(x, w)` -> `("linear", [x, w])`. In-place forms
    /// (`inplace=True`) are not ops that save.
    pub fn tensor_op<'e>(&self, e: &'e Expr) -> Option<(&'static str, Vec<&'e Expr>)> {
        let (name, operands): (&str, Vec<&Expr>) = match &e.kind {
            ExprKind::BinOp { op, left, right } => {
                let name = match op {
                    crate::ir::BinOp::Mult => "mul",
                    crate::ir::BinOp::Div => "div",
                    crate::ir::BinOp::MatMult => "matmul",
                    crate::ir::BinOp::Pow => "pow",
                    _ => return None,
                };
                (name, vec![&**left, &**right])
            }
            ExprKind::Call { func, args, .. } => {
                if e.keyword("inplace").is_some_and(Expr::is_true) {
                    return None;
                }
                match self.qualified_name(func) {
                    Some(q) if q.starts_with_module("torch") => {
                        let last = q.last();
                        let op = crate::api::SAVED_FOR_BACKWARD.iter().find(|(n, _)| *n == last)?.0;
                        (op, args.iter().collect())
                    }
                    Some(_) => return None,
                    None => match &func.kind {
                        // A tensor method: the receiver is the first operand.
                        ExprKind::Attribute { value, attr, .. } if self.is_tensor(value) || self.requires_grad_value(value) => {
                            (attr.as_str(), std::iter::once(&**value).chain(args.iter()).collect())
                        }
                        _ => return None,
                    },
                }
            }
            _ => return None,
        };
        let op = crate::api::SAVED_FOR_BACKWARD.iter().find(|(n, _)| *n == name)?.0;
        Some((op, operands))
    }

    /// Whether the value of `e` requires grad: it carries a graph, or is
    /// (or is computed by torch from) a leaf that requires grad.
    pub fn requires_grad_value(&self, e: &Expr) -> bool {
        if !self.grad_enabled() {
            return false;
        }
        match &e.kind {
            ExprKind::Name(_) | ExprKind::Attribute { .. } => {
                self.carries_graph_inner(e)
                    || e.dotted().is_some_and(|d| {
                        self.frame().grad_values.contains(d.as_str())
                            || self.is_requires_grad_leaf(&d)
                            || self.kind_of_binding(&d) == Some(ValueKind::Parameter)
                            || self.is_parameter_path(&d)
                    })
            }
            ExprKind::Subscript { value, .. } | ExprKind::Unary { operand: value, .. } => self.requires_grad_value(value),
            ExprKind::BinOp { left, right, .. } => self.requires_grad_value(left) || self.requires_grad_value(right),
            ExprKind::Call { func, args, .. } => {
                // A module's forward (`self.fc(x)`): its parameters require grad.
                if self.kind_of(func) == Some(ValueKind::Module) || self.carries_graph_inner(e) {
                    return true;
                }
                match &func.kind {
                    ExprKind::Attribute { value, attr, .. } if !self.is_imported_path(func) => {
                        !DETACHING_METHODS.contains(&attr.as_str()) && self.requires_grad_value(value)
                    }
                    _ => {
                        self.qualified_name(func).is_some_and(|q| q.starts_with_module("torch"))
                            && args.iter().any(|a| self.requires_grad_value(a))
                    }
                }
            }
            _ => false,
        }
    }

    /// What assigning `v` makes autograd save: `(name, op span, output)`;
    /// `output` means the assigned name itself (the op saves its result).
    fn saved_by(&self, v: &Expr) -> Vec<(String, memlint_diagnostics::Span, bool)> {
        use crate::api::{saved_for_backward, Saves};
        let mut out = Vec::new();
        // A cheap look at the spelling first: most values apply no op of the table.
        let named_op = |name: &str| crate::api::SAVED_FOR_BACKWARD.iter().any(|(n, s)| *n == name && *s != Saves::Nothing);
        let may_save = v.any(&mut |x| match &x.kind {
            ExprKind::BinOp { op, .. } => {
                matches!(op, crate::ir::BinOp::Mult | crate::ir::BinOp::Div | crate::ir::BinOp::MatMult | crate::ir::BinOp::Pow)
            }
            ExprKind::Call { func, .. } => match &func.kind {
                ExprKind::Attribute { attr, .. } => named_op(attr),
                ExprKind::Name(n) => named_op(n),
                _ => false,
            },
            _ => false,
        });
        if !may_save {
            return out;
        }
        if let Some((op, operands)) = self.tensor_op(v) {
            if saved_for_backward(op) == Some(Saves::Output) && operands.iter().any(|o| self.requires_grad_value(o)) {
                out.push((String::new(), v.span, true));
            }
        }
        let tensor = |o: &Expr| self.requires_grad_value(o) || self.is_tensor(o);
        v.any(&mut |x| {
            let Some((op, operands)) = self.tensor_op(x) else { return false };
            let mut save = |o: &Expr| {
                if let Some(d) = o.dotted() {
                    out.push((d.into(), x.span, false));
                }
            };
            match saved_for_backward(op) {
                Some(Saves::Inputs) if operands.len() >= 2 => {
                    for i in 0..2 {
                        if self.requires_grad_value(operands[1 - i]) && tensor(operands[i]) {
                            save(operands[i]);
                        }
                    }
                }
                Some(Saves::Quotient) if operands.len() == 2 => {
                    let (a, b) = (operands[0], operands[1]);
                    if (self.requires_grad_value(a) || self.requires_grad_value(b)) && tensor(b) {
                        save(b);
                    }
                    if self.requires_grad_value(b) && tensor(a) {
                        save(a);
                    }
                }
                Some(Saves::SelfInput) => {
                    if let Some(first) = operands.first().filter(|o| self.requires_grad_value(o)) {
                        save(first);
                    }
                }
                _ => {}
            }
            false
        });
        out
    }

    /// The span of the op that saved `dotted` for backward, if autograd
    /// holds it (and it was not rebound since).
    pub fn saved_for_backward(&self, dotted: &str) -> Option<memlint_diagnostics::Span> {
        self.frame().saved.get(dotted).copied()
    }

    /// Whether [`Context::backward_follows`] can hold anywhere in the
    /// current function: only then are saved-for-backward facts recorded.
    fn backward_may_follow(&self) -> bool {
        !self.frame().backward_at.is_empty() || self.function_name() == Some("forward") && self.function_role() == Role::Step
    }

    /// Whether a `backward()` call of the current function (or module)
    /// comes after the statement being visited; in a model's `forward`
    /// (step code), the caller's `backward()` always does.
    pub fn backward_follows(&self) -> bool {
        let end = self.current_stmt.end;
        self.frame().backward_at.iter().any(|&at| at >= end)
            || self.function_name() == Some("forward") && self.function_role() == Role::Step
    }

    /// Whether the expression is known to evaluate to a tensor.
    pub fn is_tensor(&self, expr: &Expr) -> bool {
        matches!(self.kind_of(expr), Some(ValueKind::Tensor | ValueKind::Parameter))
    }

    /// Whether `expr` is a model-like module (called for a forward pass):
    /// bound to an `nn.Module` constructor that is not a loss, or named like
    /// a model (`model`, `net`, `self.encoder`, `resnet`...).
    pub fn is_model(&self, expr: &Expr) -> bool {
        let Some(dotted) = expr.dotted() else { return false };
        if self.is_imported_path(expr) {
            return false;
        }
        if self.is_loss_path(&dotted) {
            return false;
        }
        match self.kind_of_binding(&dotted) {
            Some(ValueKind::Module) => return true,
            Some(_) => return false,
            None => {}
        }
        let last = dotted.rsplit('.').next().unwrap_or(&dotted);
        if !dotted.contains('.') && (self.facts.functions.contains(last) || last.starts_with(|c: char| c.is_ascii_uppercase())) {
            // A function of this file, or a class being constructed.
            return false;
        }
        // `create_model(...)`, `self._wrap_model(...)`, `prepare_model(...)`:
        // methods and factories named after what they act on.
        let mut ws = crate::names::word_slices(last);
        let first = ws.next();
        if first.is_some_and(|w| ACTION_VERBS.iter().any(|v| w.eq_ignore_ascii_case(v))) || ws.nth(2).is_some() {
            return false;
        }
        let ends_with = |suffix: &str| {
            last.len() >= suffix.len() && last.as_bytes()[last.len() - suffix.len()..].eq_ignore_ascii_case(suffix.as_bytes())
        };
        MODEL_SUFFIXES.iter().any(|s| ends_with(s)) && !ends_with("subnet")
            || last.eq_ignore_ascii_case("net_g")
            || last.eq_ignore_ascii_case("net_d")
    }

    /// Whether `expr` is a module reached through attributes of a model:
    /// `model`, `model.emb`, `self.fc` (a module attribute of the class),
    /// `self.encoder.layer`.
    pub fn is_module_path(&self, expr: &Expr) -> bool {
        let mut cur = expr;
        loop {
            if self.is_model(cur) || self.kind_of(cur) == Some(ValueKind::Module) {
                return true;
            }
            match &cur.kind {
                ExprKind::Attribute { value, .. } => cur = value,
                _ => return false,
            }
        }
    }

    /// Whether a dotted path is a parameter: a leaf that requires grad, or
    /// the `weight`/`bias` of a module path.
    pub fn is_parameter_path(&self, dotted: &str) -> bool {
        if self.is_requires_grad_leaf(dotted) || self.kind_of_binding(dotted) == Some(ValueKind::Parameter) {
            return true;
        }
        let Some((owner, attr)) = dotted.rsplit_once('.') else { return false };
        if !matches!(attr, "weight" | "bias") {
            return false;
        }
        let mut parts = owner.split('.');
        let Some(root) = parts.next() else { return false };
        let mut e = Expr::new(memlint_diagnostics::Span::new(0, 0), ExprKind::Name(root.into()));
        for p in parts {
            e = Expr::new(
                memlint_diagnostics::Span::new(0, 0),
                ExprKind::Attribute { value: Box::new(e), attr: p.into(), attr_span: memlint_diagnostics::Span::new(0, 0) },
            );
        }
        self.qualified_name(&e).is_none() && self.is_module_path(&e)
    }

    /// Whether `expr` is a loss module (`criterion`, `loss_fn`, an
    /// `nn.*Loss()` instance).
    pub fn is_loss_module(&self, expr: &Expr) -> bool {
        expr.dotted().is_some_and(|d| self.is_loss_path(&d))
    }

    /// [`Context::is_loss_module`] of a dotted path.
    fn is_loss_path(&self, dotted: &str) -> bool {
        let last = dotted.rsplit('.').next().unwrap_or(dotted);
        LOSS_NAMES.iter().any(|n| last.eq_ignore_ascii_case(n)) || self.frame().losses.contains(dotted)
    }

    /// Whether a name or attribute chain starts at an import
    /// ([`Context::qualified_name`] is `Some`), without building the name.
    pub fn is_imported_path(&self, expr: &Expr) -> bool {
        expr.dotted_root().is_some_and(|(root, _)| self.lookup_import(root).is_some())
    }

    /// Whether evaluating `expr` yields a value that carries autograd
    /// history (a model output, a loss, arithmetic on those), judged at this
    /// point of the walk. Always false while grad is disabled.
    pub fn carries_graph(&self, expr: &Expr) -> bool {
        if !self.grad_enabled() {
            return false;
        }
        self.carries_graph_inner(expr)
    }

    fn carries_graph_inner(&self, expr: &Expr) -> bool {
        match &expr.kind {
            ExprKind::Name(_) | ExprKind::Attribute { .. } => {
                let Some(d) = expr.dotted() else { return false };
                if self.frame().graph.contains(d.as_str()) {
                    return true;
                }
                // `out.logits` of a graph-carrying `out`.
                if let ExprKind::Attribute { value, attr, .. } = &expr.kind {
                    return attr != "data" && attr != "shape" && attr != "grad" && self.carries_graph_inner(value);
                }
                false
            }
            ExprKind::Subscript { value, .. } => self.carries_graph_inner(value),
            ExprKind::BinOp { left, right, .. } => self.carries_graph_inner(left) || self.carries_graph_inner(right),
            ExprKind::Unary { operand: e, .. } => self.carries_graph_inner(e),
            ExprKind::IfExp { body, orelse, .. } => self.carries_graph_inner(body) || self.carries_graph_inner(orelse),
            ExprKind::Sequence(items) => items.iter().any(|i| self.carries_graph_inner(i)),
            ExprKind::Dict(items) => items.iter().any(|(_, v)| self.carries_graph_inner(v)),
            ExprKind::Call { func, args, keywords, .. } => {
                // A project function that returns a loss or model output.
                if let Some(f) = self.project_callee(expr) {
                    return f.returns_graph;
                }
                if let ExprKind::Attribute { value, attr, .. } = &func.kind {
                    if !self.is_imported_path(func) {
                        if DETACHING_METHODS.contains(&attr.as_str()) {
                            return false;
                        }
                        if attr == "forward" && self.is_model(value) {
                            return true;
                        }
                        return self.carries_graph_inner(value);
                    }
                }
                if let ExprKind::Name(n) = &func.kind {
                    if self.lookup_import(n).is_none() && SCALAR_BUILTINS.contains(&n.as_str()) {
                        return false;
                    }
                }
                if let Some(q) = self.qualified_name(func) {
                    if q.starts_with_module("torch") {
                        return args.iter().chain(keywords.iter().map(|k| &k.value)).any(|a| self.carries_graph_inner(a));
                    }
                    return false;
                }
                self.is_model(func) || self.is_loss_module(func)
            }
            _ => false,
        }
    }

    /// The known kind of an expression's value.
    pub fn kind_of(&self, expr: &Expr) -> Option<ValueKind> {
        match &expr.kind {
            ExprKind::Name(_) | ExprKind::Attribute { .. } => {
                let d = expr.dotted()?;
                if let Some(k) = self.kind_of_binding(&d) {
                    return Some(k);
                }
                if self.is_requires_grad_leaf(&d) {
                    return Some(ValueKind::Parameter);
                }
                if let ExprKind::Attribute { value, attr, .. } = &expr.kind {
                    if matches!(attr.as_str(), "weight" | "bias") && !self.is_imported_path(expr) && self.is_module_path(value) {
                        return Some(ValueKind::Parameter);
                    }
                    if attr == "grad" && self.is_tensor(value) {
                        return Some(ValueKind::Tensor);
                    }
                    if matches!(attr.as_str(), "T" | "mT" | "H" | "real" | "imag") && self.is_tensor(value) {
                        return Some(ValueKind::Tensor);
                    }
                }
                None
            }
            ExprKind::Literal(_) => Some(ValueKind::NonTensor),
            ExprKind::Subscript { value, .. } => match self.kind_of(value) {
                Some(ValueKind::Tensor | ValueKind::Parameter) => Some(ValueKind::Tensor),
                _ => None,
            },
            ExprKind::BinOp { left, right, .. } => {
                if self.is_tensor(left) || self.is_tensor(right) {
                    Some(ValueKind::Tensor)
                } else {
                    None
                }
            }
            ExprKind::Call { func, .. } => self.kind_of_call(func),
            _ => None,
        }
    }

    fn kind_of_call(&self, func: &Expr) -> Option<ValueKind> {
        if let Some(q) = self.qualified_name(func) {
            let s = q.as_str();
            if q.is_any(&["torch.nn.Parameter", "torch.nn.parameter.Parameter"]) {
                return Some(ValueKind::Parameter);
            }
            if q.starts_with_module("torch.utils.data") && q.last() == "DataLoader" {
                return Some(ValueKind::DataLoader);
            }
            // Schedulers and weight averagers live in `torch.optim` too.
            if q.starts_with_module("torch.optim")
                && !q.starts_with_module("torch.optim.lr_scheduler")
                && !q.starts_with_module("torch.optim.swa_utils")
                && q.last().starts_with(|c: char| c.is_ascii_uppercase())
            {
                return Some(ValueKind::Optimizer);
            }
            if q.starts_with_module("torch.nn") && !q.starts_with_module("torch.nn.functional") {
                if q.last().starts_with(|c: char| c.is_ascii_uppercase()) {
                    return Some(ValueKind::Module);
                }
                return None;
            }
            if q.starts_with_module("torchvision.models") || s == "timm.create_model" {
                return Some(ValueKind::Module);
            }
            if q.starts_with_module("torch") {
                let last = q.last();
                if last.starts_with(|c: char| c.is_ascii_lowercase())
                    && !matches!(last, "is_tensor" | "numel" | "is_grad_enabled" | "device" | "dtype" | "no_grad" | "manual_seed")
                    && !q.starts_with_module("torch.cuda")
                    && !q.starts_with_module("torch.backends")
                    && !q.starts_with_module("torch.distributed")
                {
                    return Some(ValueKind::Tensor);
                }
                return None;
            }
            if s == "argparse.ArgumentParser" {
                return Some(ValueKind::NonTensor);
            }
            return match self.index.class_is_module(s) {
                Some(true) => Some(ValueKind::Module),
                Some(false) => Some(ValueKind::Object),
                None => None,
            };
        }
        match &func.kind {
            ExprKind::Name(n) if self.module_classes.contains(n.as_str()) && !self.is_shadowed_locally(n) => Some(ValueKind::Module),
            ExprKind::Name(_) | ExprKind::Attribute { .. } if self.project_class_of_call(func).is_some() => {
                let class = self.project_class_of_call(func)?;
                match self.index.class_is_module(&class) {
                    Some(true) => Some(ValueKind::Module),
                    _ => Some(ValueKind::Object),
                }
            }
            ExprKind::Name(n) if SCALAR_BUILTINS.contains(&n.as_str()) => Some(ValueKind::NonTensor),
            ExprKind::Attribute { value, attr, .. } => {
                if attr == "parse_args" || attr == "parse_known_args" {
                    return Some(ValueKind::NonTensor);
                }
                match self.kind_of(value) {
                    Some(ValueKind::Tensor | ValueKind::Parameter) => {
                        if DETACHING_METHODS.contains(&attr.as_str())
                            && matches!(attr.as_str(), "item" | "tolist" | "size" | "dim" | "numel" | "nelement")
                        {
                            Some(ValueKind::NonTensor)
                        } else {
                            Some(ValueKind::Tensor)
                        }
                    }
                    Some(ValueKind::Module) if attr == "forward" => Some(ValueKind::Output),
                    _ => (attr == "forward" && self.is_model(value)).then_some(ValueKind::Output),
                }
            }
            _ => None,
        }
        .or_else(|| {
            if self.is_loss_module(func) {
                Some(ValueKind::Tensor)
            } else {
                self.is_model(func).then_some(ValueKind::Output)
            }
        })
    }

    /// Whether a `with` context expression disables grad (`Some(false)`),
    /// enables it (`Some(true)`), or is unrelated (`None`). An undecidable
    /// mode (`set_grad_enabled(flag)`) yields `Some(false)`.
    fn grad_mode_of_context(&self, ctx: &Expr) -> Option<Option<bool>> {
        // A decorator or context manager of the project whose definition
        // enters no_grad/inference_mode (`@smart_inference_mode()`).
        let callee = match &ctx.kind {
            ExprKind::Call { func, .. } => func,
            _ => ctx,
        };
        if let Some(q) = self.context_callee(callee) {
            if !q.starts_with("torch.") && self.index.disables_grad(&q) {
                return Some(Some(false));
            }
        }
        let (q, args) = match &ctx.kind {
            ExprKind::Call { func, args, .. } => (self.qualified_name(func)?, Some(args)),
            _ => (self.qualified_name(ctx)?, None),
        };
        let first_arg = || args.and_then(|a| a.first()).or_else(|| ctx.keyword("mode"));
        match q.as_str() {
            "torch.no_grad" | "torch.autograd.no_grad" | "torch.autograd.grad_mode.no_grad" => Some(Some(false)),
            "torch.inference_mode" | "torch.autograd.inference_mode" | "torch.autograd.grad_mode.inference_mode" => {
                match first_arg() {
                    Some(a) if a.is_false() => None,
                    _ => Some(Some(false)),
                }
            }
            "torch.enable_grad" | "torch.autograd.enable_grad" => Some(Some(true)),
            "torch.set_grad_enabled" | "torch.autograd.set_grad_enabled" => match first_arg() {
                Some(a) if a.is_true() => Some(Some(true)),
                Some(a) if a.is_false() => Some(Some(false)),
                _ => Some(None),
            },
            _ => None,
        }
    }

    /// The project function a `with` context comes from: its callee, or,
    /// for a local holding what a project function returned, that function.
    fn context_callee(&self, callee: &Expr) -> Option<String> {
        if let Some(n) = callee.dotted() {
            for f in self.visible_frames() {
                if let Some(q) = f.factories.get(n.as_str()) {
                    return Some(q.clone());
                }
            }
        }
        self.project_name(callee)
    }

    /// Whether the current point is in a branch that runs only for another
    /// framework (`if self.framework == "tf":`).
    pub fn in_non_torch_branch(&self) -> bool {
        self.non_torch_depth > 0
    }

    /// The qualified name of the project class a call constructs.
    pub fn project_class_of_call(&self, func: &Expr) -> Option<String> {
        if self.index.is_empty() {
            return None;
        }
        let q = self.project_name(func)?;
        self.index.class_is_module(&q)?;
        Some(q)
    }

    /// Whether a decorator disables grad for the whole function.
    pub fn is_no_grad_decorator(&self, dec: &Expr) -> bool {
        matches!(self.grad_mode_of_context(dec), Some(Some(false)) | Some(None))
    }

    // ----- walk ----------------------------------------------------------

    fn prescan_module(&mut self, body: &[Stmt]) {
        // Classes deriving (transitively, within the file) from nn.Module.
        let mut classes: Vec<(&str, &[Expr])> = Vec::new();
        fn collect<'b>(
            body: &'b [Stmt],
            out: &mut Vec<(&'b str, &'b [Expr])>,
            imports: &mut Vec<(String, Option<String>)>,
            functions: &mut Vec<String>,
        ) {
            for s in body {
                match &s.kind {
                    StmtKind::Class(c) => {
                        let crate::ir::Class { name, bases, body, .. } = &**c;
                        out.push((name, bases));
                        collect(body, out, imports, functions);
                    }
                    StmtKind::Import(bindings) => {
                        for b in bindings {
                            imports.push((b.local.clone(), Some(b.qualified.clone())));
                        }
                    }
                    StmtKind::Function(f) => {
                        functions.push(f.name.clone());
                        collect(&f.body, out, imports, functions);
                    }
                    _ => {
                        for block in s.child_blocks() {
                            collect(block, out, imports, functions);
                        }
                    }
                }
            }
        }
        let mut imports = Vec::new();
        let mut functions = Vec::new();
        collect(body, &mut classes, &mut imports, &mut functions);
        let mut facts = ModuleFacts::default();
        for (l, q) in &mut imports {
            if let Some(q) = q {
                *q = self.module.resolve_relative(q);
                let (_, targets) = facts
                    .import_targets
                    .entry(name_hash(l), |(k, _)| k == l, |(k, _)| name_hash(k))
                    .or_insert_with(|| (l.clone(), Vec::new()))
                    .into_mut();
                if !targets.contains(q) {
                    targets.push(q.clone());
                }
            }
        }
        // Top-level definitions (also inside top-level `if`/`try` blocks).
        fn top_defs(body: &[Stmt], out: &mut Vec<String>) {
            for s in body {
                match &s.kind {
                    StmtKind::Function(f) => out.push(f.name.clone()),
                    StmtKind::Class(c) => out.push(c.name.clone()),
                    StmtKind::If { .. } | StmtKind::Try(_) | StmtKind::Block(_) => {
                        s.child_blocks().for_each(|b| top_defs(b, out))
                    }
                    _ => {}
                }
            }
        }
        let mut defs = Vec::new();
        top_defs(body, &mut defs);
        for d in defs {
            let q = self.qualify(&d);
            facts.module_defs.insert(d, q);
        }
        facts.functions = functions.into_iter().collect();
        facts.torch_imported = imports.iter().any(|(_, q)| {
            q.as_deref().is_some_and(|q| q == "torch" || q.starts_with("torch.") || q == "tch")
        });
        self.torch_imported = facts.torch_imported;
        self.facts = Arc::new(facts);
        // Module-level imports are visible to classes defined before them in
        // the file only at run time; resolve bases with all imports seen.
        let mut all = ImportMap::default();
        for (l, q) in imports {
            all.insert_if_absent(l, q);
        }
        let saved = std::mem::replace(&mut self.module_imports, all);
        let mut changed = true;
        while changed {
            changed = false;
            for (name, bases) in &classes {
                if self.module_classes.contains(*name) {
                    continue;
                }
                let is_module = bases.iter().any(|b| {
                    if let Some(q) = self.qualified_name(b) {
                        return q.is_any(&["torch.nn.Module", "torch.nn.modules.module.Module"])
                            || (q.starts_with_module("torch.nn") && q.last().starts_with(|c: char| c.is_ascii_uppercase()))
                            || q.as_str().contains("LightningModule");
                    }
                    b.as_name().is_some_and(|n| self.module_classes.contains(n))
                });
                if is_module {
                    self.module_classes.insert((*name).to_string());
                    changed = true;
                }
            }
        }
        self.module_imports = saved;
        if let Some(facts) = Arc::get_mut(&mut self.facts) {
            facts.module_classes = self.module_classes.clone();
        }
    }

    /// The pre-scan's facts of the module being walked, for a later walk of
    /// the same parsed module ([`ContextOptions::module_facts`]).
    pub fn module_facts(&self) -> Arc<ModuleFacts> {
        self.facts.clone()
    }

    fn walk_body(&mut self, body: &[Stmt], visitor: &mut dyn Visitor) {
        for stmt in body {
            self.walk_stmt(stmt, visitor);
        }
    }

    fn visit_exprs(&self, stmt: &Stmt, visitor: &mut dyn Visitor) {
        fn rec(e: &Expr, cx: &Context, v: &mut dyn Visitor) {
            // Compatibility, copied reads and writes through are for the
            // rules' queries only.
            if cx.options.summary_only {
                v.visit_expr(e, cx);
                e.for_each_child(|c| rec(c, cx, v));
                return;
            }
            // The node itself already counts: a rule checking the operands
            // of `a if TORCH_2_4 else b` from the node sees compatibility code.
            let compat = match &e.kind {
                ExprKind::IfExp { test, .. } => cx.is_version_guard(test),
                ExprKind::Call { func, .. } => {
                    matches!(func.as_name(), Some("isinstance" | "issubclass" | "hasattr" | "getattr"))
                }
                _ => false,
            };
            if compat {
                cx.compat_expr.set(cx.compat_expr.get() + 1);
            }
            let copied = match e.as_method_call() {
                Some((recv, m)) if COPYING_METHODS.contains(&m) => Some(recv.id),
                _ => None,
            };
            let written = match e.as_method_call() {
                Some((recv, m)) if m.ends_with('_') && !m.ends_with("__") => Some(recv.id),
                _ => None,
            };
            v.visit_expr(e, cx);
            if let Some(id) = copied {
                cx.copied_reads.borrow_mut().push(id);
            }
            if let Some(id) = written {
                cx.written.borrow_mut().push(id);
            }
            e.for_each_child(|c| rec(c, cx, v));
            if copied.is_some() {
                cx.copied_reads.borrow_mut().pop();
            }
            if written.is_some() {
                cx.written.borrow_mut().pop();
            }
            if compat {
                cx.compat_expr.set(cx.compat_expr.get() - 1);
            }
        }
        stmt.for_each_expr(|e| rec(e, self, visitor));
    }

    /// Whether a condition checks the installed torch's version or API
    /// (`TORCH_2_4`, `torch.__version__ >= ...`, `is_torch_greater_or_equal("2.4")`,
    /// `hasattr(torch, "amp")`): its branches are compatibility code.
    pub fn is_version_guard(&self, test: &Expr) -> bool {
        test.any(&mut |e| match &e.kind {
            ExprKind::Name(n) | ExprKind::Attribute { attr: n, .. } => {
                let lower = n.to_ascii_lowercase();
                lower.contains("version")
                    || ((lower.contains("torch") || lower.starts_with("pt_") || lower.contains("_pt_"))
                        && (lower.chars().any(|c| c.is_ascii_digit())
                            || ["greater", "less", "newer", "older", "_ge", "_gt", "_lt", "_le", "has_", "available"]
                                .iter()
                                .any(|w| lower.contains(w))))
            }
            ExprKind::Call { func, args, .. } if matches!(func.as_name(), Some("hasattr" | "getattr")) => {
                args.first().is_some_and(|a| self.qualified_name(a).is_some_and(|q| q.starts_with_module("torch")))
            }
            _ => false,
        })
    }

    fn walk_stmt(&mut self, stmt: &Stmt, visitor: &mut dyn Visitor) {
        self.assign_targets.clear();
        self.data_swap = None;
        self.current_stmt = stmt.span;
        self.current_stmt_id = stmt.id;
        self.assign_local = match &stmt.kind {
            StmtKind::Assign { targets, .. } if targets.len() == 1 => targets[0].as_name().map(str::to_string),
            _ => None,
        };
        if let StmtKind::Assign { targets, value, .. } = &stmt.kind {
            self.assign_targets.extend(targets.iter().map(|t| t.id));
            if targets.iter().any(|t| matches!(&t.kind, ExprKind::Attribute { attr, .. } if attr == "data")) {
                self.data_swap = self.swap_kind(value);
            }
        }
        if let StmtKind::Class(c) = &stmt.kind {
            self.class_attrs = Some(class_attr_kinds(&c.body, self));
        }
        visitor.visit_stmt(stmt, self);
        // `buf[i] = x.data` copies the values into `buf`: no alias survives.
        let copied = match &stmt.kind {
            StmtKind::Assign { targets, value, .. } if targets.iter().all(|t| matches!(t.kind, ExprKind::Subscript { .. })) => {
                Some(value.id)
            }
            _ => None,
        };
        if let Some(id) = copied {
            self.copied_reads.borrow_mut().push(id);
        }
        // `x[0] = v` / `x[0] += v` write through `x`.
        let stores: Vec<ExprId> = match &stmt.kind {
            StmtKind::Assign { targets, .. } => targets
                .iter()
                .filter_map(|t| match &t.kind {
                    ExprKind::Subscript { value, .. } => Some(value.id),
                    _ => None,
                })
                .collect(),
            StmtKind::AugAssign { target, .. } => match &target.kind {
                ExprKind::Subscript { value, .. } => vec![value.id],
                _ => vec![target.id],
            },
            StmtKind::Delete(targets) => targets.iter().map(|t| t.id).collect(),
            _ => Vec::new(),
        };
        let n_stores = stores.len();
        self.written.borrow_mut().extend(stores);
        self.visit_exprs(stmt, visitor);
        if copied.is_some() {
            self.copied_reads.borrow_mut().pop();
        }
        {
            let mut w = self.written.borrow_mut();
            let keep = w.len() - n_stores;
            w.truncate(keep);
        }
        match &stmt.kind {
            StmtKind::Import(bindings) => {
                for b in bindings {
                    if b.qualified == "torch" || b.qualified.starts_with("torch.") {
                        self.torch_imported = true;
                    }
                    let qualified = self.module.resolve_relative(&b.qualified);
                    if self.frames.len() == 1 {
                        self.module_imports.insert(b.local.clone(), Some(qualified));
                    } else {
                        self.frame_mut().imports.insert(b.local.clone(), Some(qualified));
                    }
                }
            }
            StmtKind::Expr(e) => self.apply_call_effects(e),
            StmtKind::Assign { targets, value, .. } => {
                self.apply_call_effects(value);
                for t in targets {
                    if let ExprKind::Attribute { value: obj, attr, .. } = &t.kind {
                        if attr == "requires_grad" {
                            if let Some(d) = obj.dotted() {
                                if value.is_true() {
                                    self.frame_mut().requires_grad.insert(d.into());
                                } else {
                                    self.frame_mut().requires_grad.remove(d.as_str());
                                }
                            }
                            continue;
                        }
                    }
                    self.bind(t, Some(value));
                }
            }
            StmtKind::AugAssign { target, value, .. } => {
                if let Some(d) = target.dotted() {
                    if self.carries_graph(value) {
                        self.frame_mut().graph.insert(d.into());
                    }
                }
            }
            StmtKind::For { target, iter, body, orelse } => {
                let calls_backward = self.body_calls_backward(body);
                let kind = self.classify_loop(iter, body, calls_backward);
                if !self.options.summary_only {
                    if let Some(model) = frozen_by_loop(target, iter, body) {
                        self.frame_mut().frozen.insert(model);
                    }
                }
                let mut frame = self.loop_frame(kind, calls_backward, body);
                let mut targets = Vec::new();
                collect_target_names(target, &mut targets);
                frame.resets.extend(targets.iter().cloned());
                // The loop variable is new in every iteration, everywhere in the body.
                let everywhere: HashSet<StmtId> = {
                    let mut stmts = HashSet::default();
                    for_each_stmt_in_function(body, &mut |s| {
                        stmts.insert(s.id);
                    });
                    stmts
                };
                for t in &targets {
                    frame.unconditional.insert(t.clone(), everywhere.clone());
                }
                self.bind_loop_target(target, iter);
                self.frame_mut().loops.push(frame);
                self.walk_body(body, visitor);
                self.frame_mut().loops.pop();
                self.walk_body(orelse, visitor);
            }
            StmtKind::While { test: _, body, orelse } => {
                let calls_backward = self.body_calls_backward(body);
                let kind = if calls_backward { LoopKind::Train } else { LoopKind::Other };
                let frame = self.loop_frame(kind, calls_backward, body);
                self.frame_mut().loops.push(frame);
                self.walk_body(body, visitor);
                self.frame_mut().loops.pop();
                self.walk_body(orelse, visitor);
            }
            StmtKind::If { test, body, orelse } => {
                let guard = usize::from(self.is_version_guard(test));
                let (body_other, else_other) = framework_branches(test);
                let interval = usize::from(is_interval_guard(test));
                let option = usize::from(is_option_guard(test));
                self.option_depth += option;
                self.compat_depth += guard;
                self.non_torch_depth += usize::from(body_other);
                self.interval_depth += interval;
                self.walk_body(body, visitor);
                self.interval_depth -= interval;
                self.option_depth -= option;
                self.non_torch_depth -= usize::from(body_other);
                self.non_torch_depth += usize::from(else_other);
                self.walk_body(orelse, visitor);
                self.non_torch_depth -= usize::from(else_other);
                self.compat_depth -= guard;
            }
            StmtKind::Block(body) => self.walk_body(body, visitor),
            StmtKind::Try(t) => {
                let crate::ir::Try { body, handlers, orelse, finalbody } = &**t;
                self.walk_body(body, visitor);
                for h in handlers {
                    // An `except` handler is a fallback: compatibility code.
                    self.compat_depth += 1;
                    self.handlers.push(handler_type_names(h));
                    if let Some(n) = &h.name {
                        let name = Expr::new(h.span, ExprKind::Name(n.as_str().into()));
                        self.bind(&name, None);
                    }
                    self.walk_body(&h.body, visitor);
                    self.handlers.pop();
                    self.compat_depth -= 1;
                }
                self.walk_body(orelse, visitor);
                self.walk_body(finalbody, visitor);
            }
            StmtKind::Break | StmtKind::Continue | StmtKind::Raise(_) => {}
            StmtKind::With { items, body } => {
                let mut pushed = 0;
                let mut contexts = 0;
                for it in items {
                    let callee = match &it.context.kind {
                        ExprKind::Call { func, .. } => func.as_ref(),
                        _ => &it.context,
                    };
                    if let Some(q) = self.context_callee(callee) {
                        self.frame_mut().with_contexts.push(q);
                        contexts += 1;
                    }
                    if let Some(mode) = self.grad_mode_of_context(&it.context) {
                        self.frame_mut().with_grad.push(mode);
                        pushed += 1;
                    }
                    if let Some(t) = &it.target {
                        self.bind(t, None);
                    }
                }
                self.walk_body(body, visitor);
                for _ in 0..pushed {
                    self.frame_mut().with_grad.pop();
                }
                for _ in 0..contexts {
                    self.frame_mut().with_contexts.pop();
                }
            }
            StmtKind::Function(func) => {
                // Where a function is defined says nothing of how often it
                // runs: interval and option guards and `except` handlers
                // around the `def` do not apply to its body. Compatibility
                // and other-framework branches do (the function exists only
                // on that path).
                let saved = (
                    std::mem::take(&mut self.interval_depth),
                    std::mem::take(&mut self.option_depth),
                    std::mem::take(&mut self.handlers),
                );
                self.enter_function(func);
                self.walk_body(&func.body, visitor);
                self.frames.pop();
                (self.interval_depth, self.option_depth, self.handlers) = saved;
                // The function name now binds a function, not an import.
                self.shadow(&func.name);
            }
            StmtKind::Class(c) => {
                let crate::ir::Class { name, bases, body, .. } = &**c;
                if bases.iter().any(|b| {
                    self.qualified_name(b).is_some_and(|q| q.is_any(&["torch.autograd.Function", "torch.autograd.function.Function"]))
                }) {
                    self.autograd_functions.insert(name.clone());
                }
                self.class_stack.push(name.clone());
                let qualname = self.qualname_for(name);
                let attrs = self.class_attrs.take().unwrap_or_else(|| class_attr_kinds(body, self));
                let (frozen, instances) = class_attr_facts(body, self);
                self.class_frozen.insert(qualname.clone(), frozen);
                self.class_instances.insert(qualname.clone(), instances);
                // A class with a `forward` method or its own parameters is
                // model code even when its base (`PreTrainedModel`) is
                // imported from elsewhere; merely holding a model (a trainer)
                // does not count.
                let defines_forward =
                    body.iter().any(|s| matches!(&s.kind, StmtKind::Function(f) if f.name == "forward"));
                if defines_forward || attrs.values().any(|k| *k == ValueKind::Parameter) {
                    self.module_classes.insert(name.clone());
                }
                self.class_params.insert(name.clone(), attrs);
                // The class body is a scope of its own: `amp = False` in it
                // does not hide a module-level `amp` from the rest of the file.
                self.frames.push(Frame { is_class: true, name: Some(name.clone()), qualname: Some(qualname), ..Frame::default() });
                self.walk_body(body, visitor);
                self.frames.pop();
                self.class_stack.pop();
                self.shadow(name);
            }
            StmtKind::Delete(targets) => {
                for t in targets {
                    if let Some(d) = t.dotted() {
                        let f = self.frame_mut();
                        f.kinds.remove(d.as_str());
                        f.graph.remove(d.as_str());
                        f.requires_grad.remove(d.as_str());
                    }
                }
            }
            StmtKind::Return(_) | StmtKind::Other(_) | StmtKind::Declare { .. } => {}
        }
    }

    fn shadow(&mut self, name: &str) {
        if self.frames.len() == 1 {
            if self.module_imports.contains_key(name) {
                self.module_imports.insert(name.to_string(), None);
            }
        } else {
            self.frame_mut().imports.insert(name.to_string(), None);
        }
    }

    /// The qualified name a definition named `name` gets at this point.
    pub fn qualname_for(&self, name: &str) -> String {
        match &self.frame().qualname {
            Some(outer) => format!("{outer}.{name}"),
            None => self.qualify(name),
        }
    }

    fn enter_function(&mut self, func: &Function) {
        let qualname = self.qualname_for(&func.name);
        let mut frame = Frame { name: Some(func.name.clone()), ..Frame::default() };
        // Unit tests (and their helpers) are not evaluation code.
        let unit_test = self.options.is_test_file;
        frame.unit_test = unit_test;
        // Lightning runs these hooks under no_grad itself.
        let lightning_hook = matches!(func.name.as_str(), "validation_step" | "test_step" | "predict_step")
            && !self.class_stack.is_empty();
        // A method of an nn.Module is model code: its caller decides the grad
        // mode, whatever the method is called (`predict`, `test_step`).
        let module_method = self.class_stack.last().is_some_and(|c| self.module_classes.contains(c));
        frame.eval_named = !unit_test
            && !lightning_hook
            && !module_method
            && crate::names::word_slices(&func.name).any(|w| EVAL_WORDS.iter().any(|e| w.eq_ignore_ascii_case(e)));
        // `forward` of a custom `torch.autograd.Function` runs with grad off.
        let autograd_forward =
            func.name == "forward" && self.class_stack.last().is_some_and(|c| self.autograd_functions.contains(c));
        frame.decorator_no_grad = func.decorators.iter().any(|d| self.is_no_grad_decorator(d))
            || autograd_forward
            || self.index.only_called_without_grad(&qualname);
        frame.eval_by_flag = !unit_test && self.index.evaluates_by_flag(&qualname);
        let flag = if frame.eval_by_flag {
            self.index.function(&qualname).and_then(|f| f.train_flag_name.clone())
        } else {
            None
        };
        let summary_only = self.options.summary_only;
        let backward = func.words.contains(Words::BACKWARD);
        frame.words = func.words;
        if !summary_only && backward {
            frame.backward_outside_loops = backward_outside_loops(&func.body, flag.as_deref());
        }
        frame.flag_param = flag;
        frame.role = Some(if unit_test { Role::Test } else { self.index.role(&qualname) });
        // Without an index entry (a nested function), the name still says setup.
        if frame.role == Some(Role::Other) && is_setup_name(&func.name) {
            frame.role = Some(Role::Setup);
        }
        frame.qualname = Some(qualname);
        if !summary_only {
            frame.kept_alive = kept_alive(&func.body, func.words);
            if backward {
                frame.backward_at = backward_offsets(&func.body);
            }
        }
        frame.class = self.class_stack.last().cloned();
        // The enclosing class frame (a method), else the enclosing method's class.
        frame.class_qualname = if self.frame().is_class { self.frame().qualname.clone() } else { self.frame().class_qualname.clone() };
        frame.locals = Some(func.locals.clone());
        if func.words.contains(Words::DATA) {
            frame.data_restores = data_restores(&func.body);
        }
        for p in &func.params {
            frame.params.insert(p.name.clone());
            if let Some(k) = self.param_kind(p) {
                frame.kinds.insert(p.name.clone(), k);
            }
        }
        self.frames.push(frame);
        // A parameter hides an import of its name; other parameters are
        // answered by `params` (an import lookup never reaches a name no
        // import binds).
        for p in &func.params {
            if self.facts.import_targets(name_hash(&p.name), &p.name).is_some() {
                self.frame_mut().imports.insert(p.name.clone(), None);
            }
        }
    }

    fn param_kind(&self, p: &Param) -> Option<ValueKind> {
        let ann = p.annotation.as_ref()?;
        let q = self.qualified_name(ann)?;
        match q.as_str() {
            "torch.Tensor" | "torch.FloatTensor" | "torch.LongTensor" => Some(ValueKind::Tensor),
            "torch.nn.Parameter" => Some(ValueKind::Parameter),
            "torch.nn.Module" => Some(ValueKind::Module),
            "torch.utils.data.DataLoader" => Some(ValueKind::DataLoader),
            _ => None,
        }
    }

    /// Whether a loop body calls `backward()`, itself or through a project
    /// function (in any file of the run) that reaches it.
    fn body_calls_backward(&self, body: &[Stmt]) -> bool {
        if let Some(flag) = &self.frame().flag_param {
            if !backward_unguarded(body, flag) {
                return false;
            }
        }
        if self.function_words().contains(Words::BACKWARD) && calls_backward(body) {
            return true;
        }
        // Without an index (one file's first pass) there is nothing to follow.
        if self.index.is_empty() {
            return false;
        }
        let mut found = false;
        for_each_expr_in_function(body, &mut |e| {
            if !found {
                if let Some((func, _, _)) = e.as_call() {
                    if let Some(q) = self.project_name(func).and_then(|q| self.index.resolve_function(&q)) {
                        found = self.index.reaches_backward(&q);
                    }
                }
            }
        });
        found
    }

    /// The facts of a `for`/`while` loop about to be walked. Only loops in
    /// or under a training loop are asked whether a name is re-created
    /// every iteration (the CFG is built for them), and only when rules run.
    fn loop_frame(&self, kind: LoopKind, calls_backward: bool, body: &[Stmt]) -> LoopFrame {
        let in_train = kind == LoopKind::Train || self.in_training_loop();
        let rules = !self.options.summary_only;
        LoopFrame {
            kind,
            calls_backward,
            direct_step: kind == LoopKind::Eval || (kind == LoopKind::Train && self.direct_backward(body)),
            resets: if rules { assigned_names(body) } else { HashSet::default() },
            unconditional: if in_train && rules { unconditional_assigned(body) } else { HashMap::default() },
            backward_roots: if self.function_words().contains(Words::BACKWARD) { backward_roots(body) } else { HashSet::default() },
        }
    }

    /// Whether a loop body calls `backward()` outside its nested loops,
    /// itself or through a project helper.
    fn direct_backward(&self, body: &[Stmt]) -> bool {
        if self.function_words().contains(Words::BACKWARD) && backward_outside_loops(body, None) {
            return true;
        }
        if self.index.is_empty() {
            return false;
        }
        let mut outside: Vec<&Stmt> = Vec::new();
        fn collect<'b>(body: &'b [Stmt], out: &mut Vec<&'b Stmt>) {
            for s in body {
                match &s.kind {
                    StmtKind::For { .. } | StmtKind::While { .. } | StmtKind::Function(_) | StmtKind::Class { .. } => {}
                    _ => {
                        out.push(s);
                        for b in s.child_blocks() {
                            collect(b, out);
                        }
                    }
                }
            }
        }
        collect(body, &mut outside);
        outside.iter().any(|s| {
            let mut found = false;
            s.for_each_expr(|e| {
                found |= e.any(&mut |x| {
                    x.as_call().is_some_and(|(func, _, _)| {
                        self.project_name(func)
                            .and_then(|q| self.index.resolve_function(&q))
                            .is_some_and(|q| self.index.backward_per_call(&q))
                    })
                })
            });
            found
        })
    }

    fn classify_loop(&self, iter: &Expr, _body: &[Stmt], calls_backward: bool) -> LoopKind {
        if calls_backward {
            return LoopKind::Train;
        }
        let mut names = Vec::new();
        loader_names(iter, &mut names);
        let is_eval = names.iter().any(|n| {
            words(n).iter().any(|w| {
                LOADER_EVAL_WORDS.contains(&w.as_str())
                    || LOADER_EVAL_WORDS.iter().any(|e| {
                        w.strip_prefix(e).is_some_and(|rest| {
                            matches!(rest, "loader" | "dataloader" | "dl" | "set" | "data" | "dataset" | "iter" | "batches")
                        })
                    })
            })
        });
        if is_eval {
            LoopKind::Eval
        } else {
            LoopKind::Other
        }
    }

    fn bind_loop_target(&mut self, target: &Expr, iter: &Expr) {
        let mut names = Vec::new();
        collect_target_names(target, &mut names);
        for n in &names {
            self.forget(n);
        }
        let mark_param = |cx: &mut Context, e: &Expr| {
            if let Some(n) = e.as_name() {
                cx.frame_mut().requires_grad.insert(n.to_string());
                cx.frame_mut().kinds.insert(n.to_string(), ValueKind::Parameter);
            }
        };
        // `for p_a, p_b in zip(a.parameters(), b.parameters())`.
        if let (Some((func, args, _)), ExprKind::Sequence(elts)) = (iter.as_call(), &target.kind) {
            if func.as_name() == Some("zip") && args.len() == elts.len() {
                for (t, a) in elts.iter().zip(args) {
                    if is_parameter_iterable(a) {
                        mark_param(self, t);
                    }
                }
                return;
            }
        }
        // `for p in group["params"]` over an optimizer's parameter groups.
        if is_parameter_iterable(iter) && !matches!(iter.as_method_call(), Some((_, "named_parameters"))) {
            mark_param(self, target);
            return;
        }
        // `for k, v in losses.items()` / `for v in losses.values()` / `for l in losses`
        // of a container of graph-carrying values.
        let (container, elem) = match (iter.as_method_call(), &target.kind) {
            (Some((recv, "items")), ExprKind::Sequence(elts)) if elts.len() == 2 => (Some(recv), elts.get(1)),
            (Some((recv, "values")), _) => (Some(recv), Some(target)),
            (None, ExprKind::Name(_)) if iter.dotted().is_some() => (Some(iter), Some(target)),
            _ => (None, None),
        };
        if let (Some(c), Some(e)) = (container, elem) {
            if self.carries_graph(c) {
                if let Some(d) = e.dotted() {
                    self.frame_mut().graph.insert(d.into());
                }
            }
        }
        // `for p in model.parameters()` / `for name, p in model.named_parameters()`.
        let inner = unwrap_iter_call(iter);
        if let Some((_, method)) = inner.as_method_call() {
            if method == "parameters" {
                if let Some(n) = target.as_name() {
                    self.frame_mut().requires_grad.insert(n.to_string());
                    self.frame_mut().kinds.insert(n.to_string(), ValueKind::Parameter);
                }
                return;
            }
            if method == "named_parameters" {
                if let ExprKind::Sequence(elts) = &target.kind {
                    if let Some(n) = elts.get(1).and_then(|e| e.as_name()) {
                        self.frame_mut().requires_grad.insert(n.to_string());
                        self.frame_mut().kinds.insert(n.to_string(), ValueKind::Parameter);
                    }
                }
                return;
            }
        }
        // Batches of a data loader: the tuple elements are tensors.
        let is_loader = match inner.dotted() {
            Some(d) => {
                self.kind_of_binding(&d) == Some(ValueKind::DataLoader)
                    || words(&d).iter().any(|w| w.ends_with("loader") || w == "dl")
            }
            None => false,
        };
        if is_loader {
            let mut flat = Vec::new();
            flatten_tuple_names(target, &mut flat);
            if flat.len() > 1 {
                for n in flat {
                    self.frame_mut().kinds.insert(n, ValueKind::Tensor);
                }
            }
        }
    }

    fn forget(&mut self, dotted: &str) {
        // A removal hashes the key even from an empty map, and most of a
        // frame's maps are empty.
        macro_rules! remove {
            ($($m:ident),*) => {{
                let f = self.frame_mut();
                $(if !f.$m.is_empty() {
                    f.$m.remove(dotted);
                })*
            }};
        }
        remove!(factories, instances, frozen, kinds, graph, requires_grad, views, losses, saved, grad_values);
        // Only a name that resolves to an import needs shadowing.
        if !dotted.contains('.') && self.lookup_import(dotted).is_some() {
            self.frame_mut().imports.insert(dotted.to_string(), None);
        }
    }

    /// Applies an assignment to `target` from `value` (`None`: unknown value).
    fn bind(&mut self, target: &Expr, value: Option<&Expr>) {
        match &target.kind {
            ExprKind::Sequence(elts) => {
                let carries = value.is_some_and(|v| self.carries_graph(v));
                let values: Option<&Vec<Expr>> = match value.map(|v| &v.kind) {
                    Some(ExprKind::Sequence(vs)) if vs.len() == elts.len() => Some(vs),
                    _ => None,
                };
                // `loss, out = self.step(batch)`: which positions the
                // project function returns with a graph.
                let positions: Option<Vec<usize>> = value.and_then(|v| {
                    let f = self.project_callee(v)?;
                    self.grad_enabled().then(|| f.returns_graph_at.clone())
                });
                for (i, e) in elts.iter().enumerate() {
                    match values {
                        Some(vs) => self.bind(e, vs.get(i)),
                        None => {
                            let seeded = match (value, e.dotted()) {
                                (Some(v), Some(d)) => self.seeded_by_backward(&d, v),
                                _ => false,
                            };
                            self.bind(e, None);
                            let graph = match &positions {
                                Some(p) => p.contains(&i) || seeded,
                                None => carries || seeded,
                            };
                            if graph {
                                if let Some(d) = e.dotted() {
                                    self.frame_mut().graph.insert(d.into());
                                }
                            }
                        }
                    }
                }
            }
            ExprKind::Starred(inner) => self.bind(inner, None),
            ExprKind::Name(_) | ExprKind::Attribute { .. } => {
                let Some(d) = target.dotted() else { return };
                let (kind, carries, leaf) = match value {
                    Some(v) => {
                        let kind = self.kind_of(v);
                        (kind, self.carries_graph(v) || self.seeded_by_backward(&d, v), self.makes_leaf(v, kind))
                    }
                    None => (None, false, false),
                };
                let is_loss = value.is_some_and(|v| self.is_loss_constructor(v));
                let view = if self.options.summary_only {
                    None
                } else {
                    value.and_then(|v| self.view_of(v)).filter(|v| v.base != d)
                };
                // What the graph facts do not cover already: a leaf's or a
                // module's product (`h = self.fc(x)`, `y = x * 2`).
                let (saved, grad_value) = match value {
                    Some(v) if !self.options.summary_only && self.grad_enabled() && self.backward_may_follow() => {
                        (self.saved_by(v), !carries && self.requires_grad_value(v))
                    }
                    _ => (Vec::new(), false),
                };
                let instance = value.and_then(|v| v.as_call()).and_then(|(func, _, _)| self.project_class_of_call(func));
                // Only argument-less calls return a context to enter later
                // (`ctx = self.get_inference_context()`).
                let factory = value
                    .and_then(|v| v.as_call())
                    .filter(|(_, args, kws)| args.is_empty() && kws.is_empty())
                    .and_then(|(func, _, _)| self.project_name(func));
                self.forget(&d);
                if let Some(q) = factory {
                    self.frame_mut().factories.insert(d.to_string(), q);
                }
                if let Some(c) = instance {
                    self.frame_mut().instances.insert(d.to_string(), c);
                }
                if let Some(v) = view {
                    self.frame_mut().views.insert(d.to_string(), v);
                }
                let f = self.frame_mut();
                if grad_value {
                    f.grad_values.insert(d.to_string());
                }
                for (name, span, output) in saved {
                    // `y = y * w` saves the old `y`, which the name no longer holds.
                    if output || name != d {
                        f.saved.insert(if output { d.to_string() } else { name }, span);
                    }
                }
                if let Some(k) = kind {
                    f.kinds.insert(d.to_string(), k);
                }
                if is_loss {
                    f.losses.insert(d.to_string());
                }
                if carries {
                    f.graph.insert(d.to_string());
                }
                if leaf {
                    f.requires_grad.insert(d.into());
                }
            }
            _ => {}
        }
    }

    fn is_loss_constructor(&self, v: &Expr) -> bool {
        self.callee_name(v).is_some_and(|q| q.starts_with_module("torch.nn") && q.last().ends_with("Loss"))
    }

    /// A name that `backward()` is later called on in this training loop holds
    /// a loss even when its producer is not recognised (a user function).
    fn seeded_by_backward(&self, dotted: &str, value: &Expr) -> bool {
        if !self.grad_enabled() {
            return false;
        }
        let in_roots = self.frame().loops.iter().any(|l| l.kind == LoopKind::Train && l.backward_roots.contains(dotted));
        in_roots && matches!(value.kind, ExprKind::Call { .. } | ExprKind::BinOp { .. }) && !is_detached(value)
    }

    /// Whether assigning `v` creates a leaf tensor that requires grad.
    fn makes_leaf(&self, v: &Expr, kind: Option<ValueKind>) -> bool {
        if kind == Some(ValueKind::Parameter) {
            if let ExprKind::Call { .. } = v.kind {
                return true;
            }
        }
        if let Some(q) = self.callee_name(v) {
            if q.starts_with_module("torch") && v.keyword("requires_grad").is_some_and(Expr::is_true) {
                return true;
            }
        }
        if let Some((recv, "requires_grad_")) = v.as_method_call() {
            let (_, args, _) = v.as_call().unwrap_or((v, &[], &[]));
            let on = args.first().map(|a| !a.is_false()).unwrap_or(true) && v.keyword("requires_grad").map(|a| !a.is_false()).unwrap_or(true);
            let _ = recv;
            return on;
        }
        false
    }

    /// Effects of a call statement: `x.requires_grad_()`, `model.eval()`,
    /// `torch.set_grad_enabled(False)`, `x.requires_grad = ...` handled in bind.
    fn apply_call_effects(&mut self, e: &Expr) {
        if let Some((recv, method)) = e.as_method_call() {
            if !self.is_imported_path(recv) {
                let (_, args, _) = e.as_call().unwrap_or((e, &[], &[]));
                match method {
                    "requires_grad_" => {
                        let on = args.first().map(|a| !a.is_false()).unwrap_or(true)
                            && e.keyword("requires_grad").map(|a| !a.is_false()).unwrap_or(true);
                        // `model.eval().requires_grad_(False)` freezes `model`.
                        let target = match recv.as_method_call() {
                            Some((inner, "eval" | "to" | "cuda" | "half" | "float")) => inner,
                            _ => recv,
                        };
                        if let Some(d) = target.dotted() {
                            let is_model = self.is_model(target) || self.kind_of_binding(&d) == Some(ValueKind::Module);
                            let f = self.frame_mut();
                            if on {
                                f.requires_grad.insert(d.into());
                            } else {
                                f.requires_grad.remove(d.as_str());
                                if is_model {
                                    f.frozen.insert(d.into());
                                }
                            }
                        }
                    }
                    "eval" if args.is_empty() && recv.dotted().is_some() => self.frame_mut().eval_mode = true,
                    "train" if recv.dotted().is_some() => {
                        let flag = args.first().or_else(|| e.keyword("mode"));
                        let off = flag.is_some_and(Expr::is_false);
                        self.frame_mut().eval_mode = off;
                    }
                    _ => {}
                }
            }
        }
        if let Some(q) = self.callee_name(e) {
            if q.is_any(&["torch.set_grad_enabled", "torch.autograd.set_grad_enabled"]) {
                let (_, args, _) = e.as_call().unwrap_or((e, &[], &[]));
                let mode = match args.first() {
                    Some(a) if a.is_true() => Some(true),
                    _ => Some(false),
                };
                self.frame_mut().set_grad = mode;
            }
        }
    }
}

fn assigned_names(body: &[Stmt]) -> HashSet<String> {
    let mut out = HashSet::default();
    for_each_stmt_in_function(body, &mut |s| match &s.kind {
        StmtKind::Assign { targets, value, .. } => {
            for t in targets {
                let mut names = Vec::new();
                collect_target_names(t, &mut names);
                for n in names {
                    if !reads(value, &n) {
                        out.insert(n);
                    }
                }
            }
        }
        StmtKind::For { target, .. } => {
            let mut names = Vec::new();
            collect_target_names(target, &mut names);
            out.extend(names);
        }
        StmtKind::With { items, .. } => {
            for it in items {
                if let Some(t) = &it.target {
                    let mut names = Vec::new();
                    collect_target_names(t, &mut names);
                    out.extend(names);
                }
            }
        }
        _ => {}
    });
    out
}

/// Per name assigned in a loop body (from a value that does not read it),
/// the statements at which it is re-created in the same iteration: every
/// path of the body's control-flow graph from its start to the statement,
/// or from the statement to the end of the iteration (`continue`
/// included), passes an assignment of it. `if i % 100 == 0: total = 0` is
/// not a reset; `if bad: continue` before `outs = []` does not hide one.
fn unconditional_assigned(body: &[Stmt]) -> HashMap<String, HashSet<StmtId>> {
    let candidates = assigned_names(body);
    let mut out = HashMap::default();
    if candidates.is_empty() {
        return out;
    }
    let cfg = crate::cfg::Cfg::build(body);
    let binds = |node: crate::cfg::NodeId, name: &str| -> bool {
        let Some(s) = cfg.stmt(node) else { return false };
        let mut names = Vec::new();
        match &s.kind {
            StmtKind::Assign { targets, value, .. } => {
                for t in targets {
                    collect_target_names(t, &mut names);
                }
                names.iter().any(|n| n == name) && !reads(value, name)
            }
            StmtKind::With { items, .. } => {
                for it in items {
                    if let Some(t) = &it.target {
                        collect_target_names(t, &mut names);
                    }
                }
                names.iter().any(|n| n == name)
            }
            _ => false,
        }
    };
    for n in candidates {
        let from_start = cfg.reachable_avoiding(cfg.entry(), &|node| binds(node, &n));
        let to_end = cfg.reaching_avoiding(cfg.exit(), &|node| binds(node, &n));
        let stmts: HashSet<StmtId> = cfg
            .nodes()
            .filter(|&node| !from_start[node] || !to_end[node])
            .filter_map(|node| cfg.stmt(node).map(|s| s.id))
            .collect();
        out.insert(n, stmts);
    }
    out
}

fn reads(value: &Expr, dotted: &str) -> bool {
    value.any(&mut |e| e.dotted().as_deref() == Some(dotted))
}

fn collect_target_names(target: &Expr, out: &mut Vec<String>) {
    match &target.kind {
        ExprKind::Sequence(elts) => elts.iter().for_each(|e| collect_target_names(e, out)),
        ExprKind::Starred(e) => collect_target_names(e, out),
        _ => {
            if let Some(d) = target.dotted() {
                out.push(d.into());
            }
        }
    }
}

fn flatten_tuple_names(target: &Expr, out: &mut Vec<String>) {
    match &target.kind {
        ExprKind::Sequence(elts) => elts.iter().for_each(|e| flatten_tuple_names(e, out)),
        ExprKind::Name(n) => out.push(n.to_string()),
        _ => {}
    }
}

/// `enumerate(x)`, `tqdm(x)`, `iter(x)`, `zip(x, ...)` -> `x`.
fn unwrap_iter_call(iter: &Expr) -> &Expr {
    if let Some((func, args, _)) = iter.as_call() {
        if let ExprKind::Name(n) = &func.kind {
            if matches!(n.as_str(), "enumerate" | "tqdm" | "iter" | "zip" | "list" | "sorted" | "reversed") {
                if let Some(a) = args.first() {
                    return unwrap_iter_call(a);
                }
            }
        }
    }
    iter
}

/// Dotted names that name the iterated collection: arguments and the
/// method name of a call, never a plain function's name.
fn loader_names(iter: &Expr, out: &mut Vec<String>) {
    match &iter.kind {
        ExprKind::Name(_) | ExprKind::Attribute { .. } => {
            if let Some(d) = iter.dotted() {
                out.push(d.rsplit('.').next().unwrap_or(&d).to_string());
            }
        }
        ExprKind::Call { func, args, .. } => {
            if let ExprKind::Attribute { attr, .. } = &func.kind {
                out.push(attr.to_string());
            }
            args.iter().for_each(|a| loader_names(a, out));
        }
        ExprKind::Subscript { value, .. } => loader_names(value, out),
        _ => {}
    }
}

/// `loss.backward()`, `torch.autograd.grad(...)`, `torch.autograd.backward(...)`
/// (matched by their dotted spelling: no resolution is needed for these).
fn is_backward_call(e: &Expr) -> bool {
    let method = e.as_method_call().map(|(_, m)| m);
    if crate::api::event_of(e, None, method) == Some(crate::api::Event::Backward) {
        return true;
    }
    e.as_call()
        .and_then(|(func, _, _)| func.dotted())
        .is_some_and(|d| d.ends_with("autograd.grad") || d.ends_with("autograd.backward"))
}

/// Whether the body calls `.backward()` (or `torch.autograd.backward/grad`).
pub(crate) fn calls_backward(body: &[Stmt]) -> bool {
    let mut found = false;
    for_each_expr_in_function(body, &mut |e| {
        if is_backward_call(e) {
            found = true;
        }
        if let Some((func, _, _)) = e.as_call() {
            if let Some(d) = func.dotted() {
                if d.ends_with("autograd.grad") || d.ends_with("autograd.backward") {
                    found = true;
                }
            }
        }
    });
    found
}

/// Names whose value `backward()` is called on: `loss.backward()`,
/// `(loss / n).backward()`, `scaler.scale(loss).backward()`.
fn backward_roots(body: &[Stmt]) -> HashSet<String> {
    let mut out = HashSet::default();
    for_each_expr_in_function(body, &mut |e| {
        if let Some((recv, "backward")) = e.as_method_call() {
            let mut rec = |x: &Expr| -> bool {
                if let Some(d) = x.dotted() {
                    out.insert(d.into());
                }
                false
            };
            recv.any(&mut rec);
        }
    });
    out
}

fn is_detached(v: &Expr) -> bool {
    if let Some((_, m)) = v.as_method_call() {
        return DETACHING_METHODS.contains(&m);
    }
    if let Some((func, _, _)) = v.as_call() {
        if let Some(n) = func.as_name() {
            return SCALAR_BUILTINS.contains(&n);
        }
    }
    false
}

/// Names stored where they outlive the function: returned, yielded, assigned
/// to an attribute or item, appended to a container.
fn kept_alive(body: &[Stmt], words: Words) -> HashSet<String> {
    let mut out = HashSet::default();
    let add_names = |e: &Expr, out: &mut HashSet<String>| {
        let mut stack = vec![e];
        while let Some(x) = stack.pop() {
            match &x.kind {
                ExprKind::Sequence(es) => stack.extend(es.iter()),
                ExprKind::Dict(items) => stack.extend(items.iter().map(|(_, v)| v)),
                _ => {
                    if let Some(d) = x.dotted() {
                        out.insert(d.into());
                    }
                }
            }
        }
    };
    for_each_stmt_in_function(body, &mut |s| match &s.kind {
        StmtKind::Return(Some(v)) => add_names(v, &mut out),
        StmtKind::Assign { targets, value, .. }
            if targets.iter().any(|t| matches!(t.kind, ExprKind::Attribute { .. } | ExprKind::Subscript { .. })) => {
                add_names(value, &mut out);
            }
        _ => {}
    });
    // Only a body that names one of these methods can store through them.
    if !words.contains(Words::STORE) {
        return out;
    }
    for_each_expr_in_function(body, &mut |e| {
        if let Some((_, m)) = e.as_method_call() {
            if Words::of(m) == Words::STORE {
                if let Some((_, args, _)) = e.as_call() {
                    for a in args {
                        add_names(a, &mut out);
                    }
                }
            }
        }
    });
    out
}

/// Whether an expression is an attribute chain on `self` (`self.fc`, `self.enc.fc`).
fn is_self_attribute(e: &Expr) -> bool {
    let mut cur = e;
    let mut depth = 0;
    while let ExprKind::Attribute { value, .. } = &cur.kind {
        cur = value;
        depth += 1;
    }
    depth > 0 && cur.as_name() == Some("self")
}

/// `self.<attr>` assigned an `nn.Parameter` or a module anywhere in a class
/// body, with that kind.
pub(crate) fn class_attr_kinds(body: &[Stmt], cx: &Context) -> HashMap<String, ValueKind> {
    let mut out = HashMap::default();
    for s in body {
        if let StmtKind::Function(f) = &s.kind {
            for_each_stmt_in_function(&f.body, &mut |s| {
                if let StmtKind::Assign { targets, value, .. } = &s.kind {
                    // `self.<attr> = ...` first: the value's kind is the costly part.
                    if !matches!(value.kind, ExprKind::Call { .. }) || !targets.iter().any(is_self_attribute) {
                        return;
                    }
                    if let Some(k @ (ValueKind::Parameter | ValueKind::Module)) = cx.kind_of(value) {
                        for t in targets {
                            if let Some(attr) = t.dotted().as_deref().and_then(|d| d.strip_prefix("self.")) {
                                out.insert(attr.to_string(), k);
                            }
                        }
                    }
                }
            });
        }
    }
    out
}

/// `model.parameters()`, `group["params"]`, `opt.param_groups[0]["params"]`.
fn is_parameter_iterable(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Call { .. } => matches!(e.as_method_call(), Some((_, "parameters"))),
        ExprKind::Subscript { index, .. } => {
            matches!(&index.kind, ExprKind::Literal(crate::ir::Literal::Str(s)) if s == "params")
        }
        _ => false,
    }
}

/// `for p in model.parameters(): p.requires_grad = False` (or
/// `p.requires_grad_(False)`) freezes `model`.
fn frozen_by_loop(target: &Expr, iter: &Expr, body: &[Stmt]) -> Option<String> {
    let p = target.as_name()?;
    let (model, "parameters") = iter.as_method_call()? else { return None };
    let model = model.dotted()?;
    let freezes = body.iter().any(|s| match &s.kind {
        StmtKind::Assign { targets, value, .. } => {
            value.is_false()
                && targets.iter().any(|t| t.dotted().as_deref() == Some(&format!("{p}.requires_grad")))
        }
        StmtKind::Expr(e) => match e.as_method_call() {
            Some((recv, "requires_grad_")) => {
                recv.as_name() == Some(p) && e.as_call().is_some_and(|(_, args, _)| args.first().is_some_and(Expr::is_false))
            }
            _ => false,
        },
        _ => false,
    });
    freezes.then_some(model.into())
}

/// Whether `backward()` is called outside every loop of the body, not
/// counting calls under `if <flag>:` (the train-mode flag of a function
/// that also evaluates).
pub(crate) fn backward_outside_loops(body: &[Stmt], flag: Option<&str>) -> bool {
    body.iter().any(|s| match &s.kind {
        StmtKind::For { .. } | StmtKind::While { .. } | StmtKind::Function(_) | StmtKind::Class { .. } => false,
        StmtKind::If { test, body, orelse } => {
            if flag.is_some_and(|f| test.any(&mut |e| e.as_name() == Some(f))) {
                return false;
            }
            backward_outside_loops(body, flag) || backward_outside_loops(orelse, flag)
        }
        _ => {
            let mut found = false;
            s.for_each_expr(|e| {
                found |= e.any(&mut |x| is_backward_call(x));
            });
            found || s.child_blocks().any(|b| backward_outside_loops(b, flag))
        }
    })
}

/// Per class: `self.<attr>` frozen in any method, and `self.<attr>`
/// assigned an instance of a project class.
fn class_attr_facts(body: &[Stmt], cx: &Context) -> (HashSet<String>, HashMap<String, String>) {
    let mut frozen = HashSet::default();
    let mut instances = HashMap::default();
    for s in body {
        if let StmtKind::Function(f) = &s.kind {
            for_each_stmt_in_function(&f.body, &mut |s| match &s.kind {
                StmtKind::Expr(e) => {
                    if let Some((recv, "requires_grad_")) = e.as_method_call() {
                        let off = e.as_call().is_some_and(|(_, args, _)| args.first().is_some_and(Expr::is_false));
                        let recv = match recv.as_method_call() {
                            Some((inner, "eval")) => inner,
                            _ => recv,
                        };
                        if let (true, Some(attr)) = (off, recv.dotted().as_deref().and_then(|d| d.strip_prefix("self."))) {
                            frozen.insert(attr.to_string());
                        }
                    }
                }
                StmtKind::For { target, iter, body, .. } => {
                    if let Some(m) = frozen_by_loop(target, iter, body) {
                        if let Some(attr) = m.strip_prefix("self.") {
                            frozen.insert(attr.to_string());
                        }
                    }
                }
                StmtKind::Assign { targets, value, .. } => {
                    if let Some((func, _, _)) = value.as_call() {
                        if let Some(class) = cx.project_class_of_call(func) {
                            for t in targets {
                                if let Some(attr) = t.dotted().as_deref().and_then(|d| d.strip_prefix("self.")) {
                                    instances.insert(attr.to_string(), class.clone());
                                }
                            }
                        }
                    }
                }
                _ => {}
            });
        }
    }
    (frozen, instances)
}

/// Whether `backward()` is called in the body (loops included) other than
/// under `if <flag>:`.
fn backward_unguarded(body: &[Stmt], flag: &str) -> bool {
    body.iter().any(|s| match &s.kind {
        StmtKind::Function(_) | StmtKind::Class { .. } => false,
        StmtKind::If { test, body, orelse } => {
            if test.any(&mut |e| e.as_name() == Some(flag)) {
                return backward_unguarded(orelse, flag);
            }
            backward_unguarded(body, flag) || backward_unguarded(orelse, flag)
        }
        _ => {
            let mut found = false;
            s.for_each_expr(|e| found |= e.any(&mut |x| is_backward_call(x)));
            found || s.child_blocks().any(|b| backward_unguarded(b, flag))
        }
    })
}

/// For `if <...framework> == "tf":` (or `"jax"`, `"flax"`, `"np"`), the
/// body runs for another framework; for `== "pt"`, the `else` does.
fn framework_branches(test: &Expr) -> (bool, bool) {
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
fn is_interval_guard(test: &Expr) -> bool {
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

/// The last segments of the exception types an `except` clause names.
fn handler_type_names(h: &crate::ir::Handler) -> Vec<String> {
    let Some(t) = &h.types else { return vec!["BaseException".to_string()] };
    let one = |e: &Expr| e.dotted().map(|d| d.rsplit('.').next().unwrap_or(&d).to_string());
    match &t.kind {
        ExprKind::Sequence(items) => items.iter().filter_map(one).collect(),
        _ => one(t).into_iter().collect(),
    }
}

/// A condition that reads a memory option of a configuration object
/// (`args.empty_unused_memory_level`, `cfg.clear_cache`,
/// `self.config.free_memory`): `if args.local_rank == 0:` is not one.
fn is_option_guard(test: &Expr) -> bool {
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

/// Locals assigned a `.data` read (`saved = p.data`) and later assigned
/// back through `.data =` (`p.data = saved`).
fn data_restores(body: &[Stmt]) -> HashSet<String> {
    let mut saved = HashSet::default();
    let mut restored = HashSet::default();
    for_each_stmt_in_function(body, &mut |s| {
        if let StmtKind::Assign { targets, value, .. } = &s.kind {
            let reads_data = matches!(&value.kind, ExprKind::Attribute { attr, .. } if attr == "data");
            for t in targets {
                if let (Some(n), true) = (t.as_name(), reads_data) {
                    saved.insert(n.to_string());
                }
                if matches!(&t.kind, ExprKind::Attribute { attr, .. } if attr == "data") {
                    if let Some(n) = value.as_name() {
                        restored.insert(n.to_string());
                    }
                }
            }
        }
    });
    saved.intersection(&restored).cloned().collect()
}

/// Start offsets of the `backward()` calls in `body` (nested functions excluded).
fn backward_offsets(body: &[Stmt]) -> Vec<u32> {
    let mut out = Vec::new();
    crate::ir::for_each_expr_in_function(body, &mut |e| {
        if is_backward_call(e) {
            out.push(e.span.start);
        }
    });
    out
}
