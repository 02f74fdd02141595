//! The event vocabulary: what a call means for a training program, decided
//! in one place. Every consumer (the walk's pre-scans, the training-step
//! events, the rules) asks [`classify`] and reads an [`Event`]; none matches
//! a torch spelling of its own.
//!
//! A call is classified by its callee: a library function by its resolved
//! qualified name ([`Callee::Library`]), a method by its name and what its
//! receiver is known to be ([`Callee::Method`]), which the caller works out
//! from the walk's facts (a receiver's kind depends on where the walk is).

use crate::ir::{Expr, ExprKind, Literal};

/// What a method call's receiver is, as far as classifying the call needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Receiver {
    /// `scaler.scale(loss)`: a loss scaled by a `GradScaler`.
    ScaledLoss,
    /// A `GradScaler`.
    Scaler,
    /// A parameter's gradient (`p.grad`, `p.grad.data`).
    GradAttr,
    /// An optimizer.
    Optimizer,
    /// A tensor, or a value carrying an autograd graph.
    Tensor,
    /// Anything else, or not known.
    Other,
}

/// The callee of a call, as [`classify`] reads it.
#[derive(Debug, Clone, Copy)]
pub enum Callee<'a> {
    /// A library function or class, by its resolved qualified name.
    Library(&'a str),
    /// A method, by name, on a receiver.
    Method {
        /// The method's name.
        name: &'a str,
        /// What the receiver is.
        receiver: Receiver,
        /// The receiver is a name or an attribute chain (`accelerator`,
        /// `self.engine`), not a call or a subscript.
        receiver_is_path: bool,
    },
}

/// How a `backward()` is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// `loss.backward()`.
    Tensor,
    /// `torch.autograd.backward(loss)`.
    Function,
    /// `torch.autograd.grad(outputs, inputs)`: gradients returned, not
    /// accumulated into `.grad`.
    Grad,
    /// `scaler.scale(loss).backward()`.
    Scaled,
    /// A wrapper that takes the loss as an argument and may scale it itself
    /// (`accelerator.backward(loss)`, `engine.backward(loss)`).
    Wrapper,
}

/// What a call does to a training program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A backward pass.
    Backward {
        /// How it is reached.
        via: Via,
        /// `retain_graph=` when written as a literal (`None`: not written
        /// or not a literal; PyTorch frees the graph by default).
        retain_graph: Option<bool>,
    },
    /// `optimizer.zero_grad(...)` / `model.zero_grad(...)`.
    ZeroGrad {
        /// The `set_to_none=` argument when it is a literal (`None`: not
        /// written, PyTorch's default `True`).
        set_to_none: Option<bool>,
    },
    /// `p.grad.zero_()`, `p.grad.fill_(0)`: one gradient reset.
    GradReset,
    /// `torch.optim.<Optimizer>(...)`.
    OptimizerNew,
    /// `optimizer.step()`.
    OptimizerStep {
        /// Called with a closure (`LBFGS`), which zeroes and calls
        /// `backward()` itself.
        closure: bool,
    },
    /// `GradScaler(...)` (`torch.amp` or the deprecated `torch.cuda.amp`).
    ScalerNew,
    /// `scaler.scale(loss)`.
    ScalerScale,
    /// `scaler.step(optimizer)`.
    ScalerStep,
    /// `scaler.update()`.
    ScalerUpdate,
    /// `scaler.unscale_(optimizer)`.
    ScalerUnscale,
    /// `torch.nn.utils.clip_grad_norm_` / `clip_grad_value_`.
    ClipGrad,
    /// A grad-mode region or switch: `torch.no_grad()`,
    /// `torch.inference_mode()`, `torch.enable_grad()`,
    /// `torch.set_grad_enabled(flag)`.
    GradMode {
        /// Whether grad is on in it (`None`: a flag that is not a literal).
        enabled: Option<bool>,
    },
    /// `torch.autocast(...)`, `torch.amp.autocast(...)` and the deprecated
    /// `torch.cuda.amp.autocast(...)`.
    Autocast,
    /// `x.requires_grad_(False)`: a tensor or module frozen.
    Freeze,
    /// `torch.utils.data.DataLoader(...)`: a loader built. Its options
    /// (`num_workers`, `pin_memory`, ..., also through a `**kwargs` dict)
    /// are [`crate::facts::pipeline::loader_options`]'s to read.
    LoaderNew,
    /// `x.to(...)`, `x.cuda(...)`, `x.cpu()`: a move between devices.
    ToDevice {
        /// `non_blocking=` when written as a literal.
        non_blocking: Option<bool>,
        /// To the host: `.cpu()`, `.to("cpu")`.
        to_host: bool,
        /// To an accelerator as far as the call shows: `.cuda()`, or `.to()`
        /// of a `"cuda…"`/`"mps"`/`"xpu"` string, a `torch.device(...)` not of
        /// `"cpu"`, an `x.device`, or a name like `device`, `dev`, `gpu`
        /// (not a dtype or another tensor).
        to_device: bool,
    },
    /// A tensor factory (`torch.zeros`, `torch.randn`, `torch.tensor`...).
    Factory {
        /// `device=` is written (tch: the options tuple names a device
        /// other than `Device::Cpu`, or is not written out).
        device: bool,
        /// The factory makes its values itself (`zeros`, `randn`, `arange`
        /// ...): with `device=` it allocates and fills them on the device.
        /// Not `tensor` (copies host data) nor the `*_like` factories (follow
        /// their input's device), nor one given a literal `0` size
        /// (`torch.empty(0)`: no elements).
        fills: bool,
    },
    /// An in-place tensor method (`x.add_(1)`).
    InPlace,
    /// A method returning a view of its receiver (`view`, `narrow`,
    /// `transpose`, ...).
    View,
    /// A value read back to the host, which waits for the device
    /// (`.item()`, `.tolist()`, `.numpy()`), or `torch.cuda.synchronize()`.
    HostSync,
    /// An op whose result's size depends on the tensor's values
    /// (`x.nonzero()`, `torch.masked_select(x, m)`, `torch.unique(x)`,
    /// `torch.where(cond)` with one argument): the host waits for the
    /// device to learn the size before it can allocate the result. Not a
    /// read the user asked for, but a wait all the same.
    ShapeFromData,
    /// `x.detach()`.
    Detach,
    /// `torch.cuda.empty_cache()`.
    EmptyCache,
    /// `apex.amp.initialize(...)`: apex's deprecated mixed precision.
    ApexAmp,
}

/// Qualified names of the gradient-clipping APIs.
pub const CLIP_GRAD_APIS: &[&str] = &[
    "torch.nn.utils.clip_grad_norm_",
    "torch.nn.utils.clip_grad_value_",
    "torch.nn.utils.clip_grad.clip_grad_norm_",
    "torch.nn.utils.clip_grad.clip_grad_value_",
];

/// Qualified names of the grad-disabling APIs.
pub const GRAD_OFF_APIS: &[&str] = &[
    "torch.no_grad",
    "torch.inference_mode",
    "torch.autograd.no_grad",
    "torch.autograd.inference_mode",
    "torch.autograd.grad_mode.no_grad",
    "torch.autograd.grad_mode.inference_mode",
];

/// The exception types an out-of-memory error is caught as (by their last
/// segment): `torch.cuda.OutOfMemoryError`, the `RuntimeError` torch
/// raised before 1.13, and the host's `MemoryError`.
pub const OOM_EXCEPTIONS: &[&str] = &["OutOfMemoryError", "RuntimeError", "MemoryError"];

/// The optimizers of `torch.optim`.
const OPTIMIZERS: &[&str] = &[
    "SGD", "Adam", "AdamW", "Adamax", "Adadelta", "Adagrad", "Adafactor", "ASGD", "LBFGS", "NAdam", "RAdam", "RMSprop",
    "Rprop", "SparseAdam",
];

/// Optimizers whose update does not change when every gradient is scaled
/// by one constant (Adam's `m / sqrt(v)`, RMSprop's and Adagrad's
/// normalisations), when no weight decay is added to the gradient.
const SCALE_INVARIANT_OPTIMIZERS: &[&str] = &["Adam", "AdamW", "Adamax", "NAdam", "RAdam", "RMSprop", "Adagrad", "Adadelta", "SparseAdam"];

/// What a call builds, as an optimizer: `Some(true)` for one of torch's
/// whose update is invariant to a constant scale of the gradients
/// (`torch.optim.Adam(params)`, with no `weight_decay` or `0`; `AdamW`,
/// whose decay is decoupled), `Some(false)` for any other optimizer or an
/// optimizer chosen at run time (`torch.optim.SGD`, Adam with
/// `weight_decay=1e-4`, `FusedLAMB(...)`, `create_optimizer(...)`,
/// `getattr(torch.optim, name)(...)`), `None` for a call that builds none.
/// `qualified` resolves a callee's qualified name.
pub fn optimizer_scale_invariance(call: &Expr, qualified: &dyn Fn(&Expr) -> Option<String>) -> Option<bool> {
    let (func, _, _) = call.as_call()?;
    let last = match &func.kind {
        ExprKind::Name(n) | ExprKind::Attribute { attr: n, .. } => n.as_str(),
        // `getattr(torch.optim, name)(...)`.
        ExprKind::Call { func: inner, args, .. } => {
            let dynamic = inner.as_name() == Some("getattr") && args.first().and_then(|a| a.dotted()).is_some_and(|d| d.as_str().ends_with("optim"));
            return dynamic.then_some(false);
        }
        _ => return None,
    };
    // Asked of every call of a file: no allocation for the names of calls
    // that build no optimizer.
    let named = OPTIMIZERS.contains(&last) || last.as_bytes().windows(9).any(|w| w.eq_ignore_ascii_case(b"optimizer")) || matches!(last, "FusedAdam" | "FusedLAMB" | "FusedSGD" | "Lamb" | "LAMB" | "Lion" | "LARS" | "Lars");
    if !named {
        return None;
    }
    // Hugging Face's own AdamW (deprecated, removed in transformers 4.46)
    // decouples its weight decay as torch's does.
    let torch = qualified(func).and_then(|q| match q.as_str() {
        "transformers.AdamW" | "transformers.optimization.AdamW" => Some("AdamW".to_string()),
        _ => q.strip_prefix("torch.optim.").map(str::to_string),
    });
    let no_decay = || call.keyword("weight_decay").is_none_or(|w| matches!(w.kind, ExprKind::Literal(crate::ir::Literal::Int(0))) || matches!(&w.kind, ExprKind::Literal(crate::ir::Literal::Float(f)) if *f == 0.0));
    Some(match torch.as_deref() {
        Some("AdamW") => true,
        Some(c) => SCALE_INVARIANT_OPTIMIZERS.contains(&c) && no_decay(),
        None => false,
    })
}

/// Tensor factories that take `device=`.
const FACTORIES: &[&str] = &[
    "zeros", "ones", "empty", "full", "rand", "randn", "randint", "randperm", "arange", "linspace", "eye", "tensor",
    "zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like",
];

/// tch's tensor factories that fill their values (`Tensor::zeros(size,
/// (kind, device))`): their last argument is the options tuple that names
/// the device.
const TCH_FACTORIES: &[&str] = &[
    "zeros", "ones", "empty", "full", "rand", "randn", "randint", "randperm", "arange", "arange_start",
    "arange_start_step", "linspace", "eye",
];

/// The legacy typed constructors of CPU tensors (`torch.FloatTensor(n,
/// d)`): given sizes, they allocate like `torch.empty` (then usually
/// `.zero_()` or `.fill_(v)`); given data, they copy it.
const LEGACY_CPU_CONSTRUCTORS: &[&str] = &[
    "Tensor", "FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "LongTensor", "IntTensor", "ShortTensor",
    "CharTensor", "ByteTensor", "BoolTensor",
];

/// Methods that fill their receiver's values in place.
const FILLING_METHODS: &[&str] = &["zero_", "fill_", "normal_", "uniform_", "random_", "bernoulli_", "exponential_"];

/// Library functions whose result is computed from the tensors of their
/// first argument, a list of them (`torch.cat([a, b])`), on their device.
const JOINING_FUNCTIONS: &[&str] = &["cat", "concat", "concatenate", "stack", "hstack", "vstack", "dstack"];

/// Library functions whose result is computed from their first argument
/// alone (`torch.triu(x)`, `torch.exp(x)`), on its device.
const UNARY_FUNCTIONS: &[&str] = &[
    "triu", "tril", "diag", "diag_embed", "flip", "roll", "t", "transpose", "repeat_interleave",
    // Element-wise math (a sinusoidal embedding's `torch.exp(-log(p) * torch.arange(h) / h)`).
    "exp", "exp2", "log", "log2", "log10", "sqrt", "rsqrt", "sin", "cos", "sigmoid", "tanh", "abs", "neg", "reciprocal", "square",
];

/// The old `Variable` wrapper (before PyTorch 0.4): the same tensor.
const VARIABLE: &[&str] = &["torch.autograd.Variable", "torch.autograd.variable.Variable"];

/// Methods that return a view of their receiver.
const VIEW_METHODS: &[&str] = &[
    "view", "view_as", "narrow", "select", "transpose", "permute", "expand", "expand_as", "unsqueeze", "squeeze", "t",
    "T", "unfold", "diagonal", "as_strided", "chunk", "split", "unbind", "flatten", "reshape", "movedim",
];

/// Methods that read a value back to the host.
const HOST_SYNC_METHODS: &[&str] = &["item", "tolist", "numpy", "double_value", "int64_value"];

/// Ops whose result's size depends on the values ([`Event::ShapeFromData`]),
/// as methods and as `torch.` functions.
const SHAPE_FROM_DATA: &[&str] = &["nonzero", "masked_select", "unique", "unique_consecutive", "argwhere", "nonzero_static"];

/// The method names [`classify`] gives a meaning to.
const EVENT_METHODS: &[&str] = &[
    "backward", "zero_grad", "zero_", "fill_", "step", "scale", "update", "unscale_", "requires_grad_", "to", "cuda", "cpu",
    "detach", "to_device",
];

/// The library last segments [`classify`] gives a meaning to (besides
/// clipping, factories and optimizers).
const EVENT_FUNCTIONS: &[&str] = &[
    "backward", "grad", "empty_cache", "no_grad", "inference_mode", "enable_grad", "set_grad_enabled", "autocast",
    "GradScaler", "DataLoader", "initialize", "synchronize",
];

/// Every name the event vocabulary knows: the method names, the library
/// functions' last segments and the tables' entries.
pub(super) fn vocabulary() -> impl Iterator<Item = &'static str> {
    EVENT_METHODS
        .iter()
        .chain(EVENT_FUNCTIONS)
        .chain(CLIP_GRAD_APIS)
        .chain(GRAD_OFF_APIS)
        .chain(OOM_EXCEPTIONS)
        .chain(OPTIMIZERS)
        .chain(FACTORIES)
        .chain(TCH_FACTORIES)
        .chain(VIEW_METHODS)
        .chain(HOST_SYNC_METHODS)
        .chain(SHAPE_FROM_DATA)
        .chain(LEGACY_CPU_CONSTRUCTORS)
        .chain(FILLING_METHODS)
        .chain(JOINING_FUNCTIONS)
        .chain(UNARY_FUNCTIONS)
        .chain(&["Variable"])
        .copied()
}

/// Whether `qualified` is a legacy typed constructor of CPU tensors
/// (`torch.FloatTensor`, `torch.LongTensor`, `torch.Tensor`).
pub fn is_legacy_cpu_constructor(qualified: &str) -> bool {
    qualified.strip_prefix("torch.").is_some_and(|rest| LEGACY_CPU_CONSTRUCTORS.contains(&rest))
}

/// Whether a method fills its receiver's values in place (`zero_`, `fill_`,
/// `normal_`...).
pub fn is_filling_method(name: &str) -> bool {
    FILLING_METHODS.contains(&name)
}

/// The tensors a library call computes a new tensor from, on their device,
/// when it is one that reads nothing else: the items of `torch.cat([a,
/// b])` and `torch.stack((a, b))`, the first argument of `torch.triu(x)`,
/// `torch.flip(x, dims)` and of the old `Variable(x)`. `None` for any other
/// call.
pub fn computed_from<'e>(call: &'e Expr, qualified: &str) -> Option<Vec<&'e Expr>> {
    let (_, args, _) = call.as_call()?;
    let first = args.first()?;
    let last = qualified.rsplit('.').next()?;
    let torch = qualified.strip_prefix("torch.").is_some_and(|rest| !rest.contains('.'));
    let variable = VARIABLE.contains(&qualified);
    if torch && JOINING_FUNCTIONS.contains(&last) {
        return match &first.kind {
            ExprKind::Sequence(items) if !items.is_empty() => Some(items.iter().collect()),
            _ => None,
        };
    }
    ((torch && UNARY_FUNCTIONS.contains(&last)) || variable).then(|| vec![first])
}

/// Whether a library callee whose last segment is `last` can be an event:
/// a cheap test before its qualified name is built.
pub fn may_be_library_event(last: &str) -> bool {
    EVENT_FUNCTIONS.contains(&last)
        || CLIP_GRAD_APIS.iter().any(|a| a.rsplit('.').next() == Some(last))
        || FACTORIES.contains(&last)
        || TCH_FACTORIES.contains(&last)
        || OPTIMIZERS.contains(&last)
        || SHAPE_FROM_DATA.contains(&last)
        || last == "where"
        || last == "normal"
}

/// Whether a method named `name` can be an event on some receiver: a
/// cheap test before the receiver's kind is worked out.
pub fn may_be_method_event(name: &str) -> bool {
    EVENT_METHODS.contains(&name)
        || VIEW_METHODS.contains(&name)
        || HOST_SYNC_METHODS.contains(&name)
        || SHAPE_FROM_DATA.contains(&name)
        || is_inplace_method(name)
}

/// In-place tensor methods end in one `_`; these change flags or the
/// graph, not the values.
pub fn is_inplace_method(name: &str) -> bool {
    name.ends_with('_')
        && !name.ends_with("__")
        && !name.starts_with('_')
        && !matches!(name, "requires_grad_" | "share_memory_" | "retain_grad_" | "detach_")
}

/// A literal boolean (`None` for anything else).
fn literal_bool(e: &Expr) -> Option<bool> {
    match e.kind {
        ExprKind::Literal(Literal::Bool(b)) => Some(b),
        _ => None,
    }
}

/// A keyword argument's literal boolean.
fn kw_bool(call: &Expr, name: &str) -> Option<bool> {
    call.keyword(name).and_then(literal_bool)
}

fn first_arg(call: &Expr) -> Option<&Expr> {
    call.as_call().and_then(|(_, args, _)| args.first())
}

/// Classifies a call.
pub fn classify(call: &Expr, callee: Callee<'_>) -> Option<Event> {
    let (_, args, _) = call.as_call()?;
    match callee {
        Callee::Library(q) => library(call, q),
        Callee::Method { name, receiver, receiver_is_path } => Some(match name {
            "backward" => {
                let via = match receiver {
                    Receiver::ScaledLoss => Via::Scaled,
                    Receiver::Tensor => Via::Tensor,
                    _ if !args.is_empty() && receiver_is_path => Via::Wrapper,
                    _ => Via::Tensor,
                };
                Event::Backward { via, retain_graph: kw_bool(call, "retain_graph") }
            }
            // `zero_grad(set_to_none=False)` or `zero_grad(False)`.
            "zero_grad" => Event::ZeroGrad {
                set_to_none: call.keyword("set_to_none").or_else(|| first_arg(call)).and_then(literal_bool),
            },
            "zero_" | "fill_" if receiver == Receiver::GradAttr => Event::GradReset,
            "step" if receiver == Receiver::Scaler => Event::ScalerStep,
            "step" if receiver == Receiver::Optimizer => {
                Event::OptimizerStep { closure: !args.is_empty() || call.keyword("closure").is_some() }
            }
            "scale" if receiver == Receiver::Scaler => Event::ScalerScale,
            "update" if receiver == Receiver::Scaler => Event::ScalerUpdate,
            "unscale_" if receiver == Receiver::Scaler => Event::ScalerUnscale,
            "requires_grad_" if args.first().or_else(|| call.keyword("requires_grad")).is_some_and(Expr::is_false) => {
                Event::Freeze
            }
            // tch: `t.to_device(device)` as well as `t.to(device)`.
            "to" | "cuda" | "cpu" | "to_device" => {
                let target = first_arg(call).or_else(|| call.keyword("device"));
                Event::ToDevice {
                    non_blocking: kw_bool(call, "non_blocking"),
                    to_host: name == "cpu"
                        || target.is_some_and(|d| {
                            matches!(&d.kind, ExprKind::Literal(Literal::Str(s)) if s == "cpu") || is_tch_cpu(d)
                        }),
                    to_device: name == "cuda"
                        || (matches!(name, "to" | "to_device") && target.is_some_and(names_an_accelerator)),
                }
            }
            "detach" => Event::Detach,
            n if HOST_SYNC_METHODS.contains(&n) => Event::HostSync,
            n if SHAPE_FROM_DATA.contains(&n) && receiver == Receiver::Tensor => Event::ShapeFromData,
            n if VIEW_METHODS.contains(&n) => Event::View,
            n if is_inplace_method(n) => Event::InPlace,
            _ => return None,
        }),
    }
}

/// tch's `Device::Cpu`.
fn is_tch_cpu(d: &Expr) -> bool {
    d.dotted().is_some_and(|p| p == "Device.Cpu" || p == "tch.Device.Cpu")
}

/// Whether tch factory options (`(Kind::Float, Device::Cpu)`,
/// `kind::FLOAT_CPU`) put the tensor on the CPU.
fn tch_options_on_cpu(options: &Expr) -> bool {
    match &options.kind {
        ExprKind::Sequence(items) => items.get(1).is_some_and(is_tch_cpu),
        _ => options.dotted().is_some_and(|d| d.ends_with("_CPU")),
    }
}

/// Whether a `.to(...)` target names an accelerator: a `"cuda…"`, `"mps"`
/// or `"xpu"` string, a `torch.device(...)` not of `"cpu"`, `x.device`, or
/// a name or attribute like `device`, `dev`, `gpu`; tch's `Device::Cuda(i)`,
/// `Device::cuda_if_available()`, `vs.device()`.
fn names_an_accelerator(target: &Expr) -> bool {
    let devicey = |n: &str| {
        let n = n.to_ascii_lowercase();
        n.ends_with("device") || n == "dev" || n.contains("gpu")
    };
    match &target.kind {
        ExprKind::Literal(Literal::Str(s)) => ["cuda", "mps", "xpu"].iter().any(|p| s.starts_with(p)),
        ExprKind::Call { func, args, .. } => {
            let tch = match &func.kind {
                ExprKind::Attribute { attr, value, .. } => {
                    (attr.as_str() == "device" && args.is_empty())
                        || (matches!(attr.as_str(), "Cuda" | "cuda_if_available")
                            && value.dotted().is_some_and(|d| d.as_str() == "Device" || d.as_str() == "tch.Device"))
                }
                _ => false,
            };
            tch || (func.dotted().is_some_and(|d| d.as_str() == "torch.device" || d.as_str() == "device")
                && !args.first().is_some_and(|a| matches!(&a.kind, ExprKind::Literal(Literal::Str(s)) if s == "cpu")))
        }
        ExprKind::Name(n) => devicey(n) || n.to_ascii_lowercase().contains("device"),
        ExprKind::Attribute { attr, .. } => devicey(attr),
        _ => false,
    }
}

fn library(call: &Expr, q: &str) -> Option<Event> {
    let last = q.rsplit('.').next().unwrap_or(q);
    Some(match q {
        "torch.autograd.backward" => Event::Backward { via: Via::Function, retain_graph: kw_bool(call, "retain_graph") },
        "torch.autograd.grad" => Event::Backward { via: Via::Grad, retain_graph: kw_bool(call, "retain_graph") },
        "torch.cuda.empty_cache" | "torch.cuda.memory.empty_cache" => Event::EmptyCache,
        "torch.cuda.synchronize" => Event::HostSync,
        // `torch.where(cond)`: the indices where `cond` holds.
        "torch.where" if call.as_call().is_some_and(|(_, args, kws)| args.len() == 1 && kws.is_empty()) => Event::ShapeFromData,
        q if q.strip_prefix("torch.").is_some_and(|rest| SHAPE_FROM_DATA.contains(&rest)) => Event::ShapeFromData,
        q if CLIP_GRAD_APIS.contains(&q) => Event::ClipGrad,
        q if GRAD_OFF_APIS.contains(&q) => Event::GradMode { enabled: Some(false) },
        "torch.enable_grad" | "torch.autograd.enable_grad" | "torch.autograd.grad_mode.enable_grad" => {
            Event::GradMode { enabled: Some(true) }
        }
        "torch.set_grad_enabled" | "torch.autograd.set_grad_enabled" | "torch.autograd.grad_mode.set_grad_enabled" => {
            Event::GradMode { enabled: first_arg(call).and_then(literal_bool) }
        }
        "torch.autocast"
        | "torch.amp.autocast"
        | "torch.amp.autocast_mode.autocast"
        | "torch.cuda.amp.autocast"
        | "torch.cuda.amp.autocast_mode.autocast"
        | "torch.cpu.amp.autocast" => Event::Autocast,
        "torch.amp.GradScaler"
        | "torch.amp.grad_scaler.GradScaler"
        | "torch.cuda.amp.GradScaler"
        | "torch.cuda.amp.grad_scaler.GradScaler"
        | "torch.cpu.amp.GradScaler" => Event::ScalerNew,
        "torch.utils.data.DataLoader" | "torch.utils.data.dataloader.DataLoader" => Event::LoaderNew,
        "apex.amp.initialize" => Event::ApexAmp,
        q if q.starts_with("torch.optim.") && OPTIMIZERS.contains(&last) => Event::OptimizerNew,
        // tch: `Tensor::zeros(size, (Kind::Float, Device::Cpu))`.
        q if q.strip_prefix("tch.Tensor.").is_some_and(|rest| TCH_FACTORIES.contains(&rest)) => {
            let (_, args, _) = call.as_call()?;
            Event::Factory { device: !args.last().is_some_and(tch_options_on_cpu), fills: true }
        }
        // `torch.normal(0, 1, size=(b, d))`: drawn from numbers, with a size
        // (given tensors, it follows their device).
        "torch.normal" if call.keyword("size").is_some() || call.as_call().is_some_and(|(_, args, _)| args.len() >= 3) => {
            Event::Factory { device: call.keyword("device").is_some(), fills: !zero_sized(call, last) }
        }
        q if q.strip_prefix("torch.").is_some_and(|rest| FACTORIES.contains(&rest)) => {
            Event::Factory {
                device: call.keyword("device").is_some(),
                fills: !last.ends_with("_like") && last != "tensor" && !zero_sized(call, last),
            }
        }
        _ => return None,
    })
}

/// Whether a torch factory call is given a literal `0` among its sizes
/// (`torch.empty(0)`, `torch.zeros((0, 3))`, `torch.randint(0, 9, (0,))`):
/// a tensor of no elements, nothing to fill. Bare integers are sizes only
/// for the factories that take nothing else (`torch.randint(0, 10, (4,))`
/// starts at 0).
fn zero_sized(call: &Expr, last: &str) -> bool {
    let Some((_, args, _)) = call.as_call() else { return false };
    let sizes_only = matches!(last, "empty" | "zeros" | "ones" | "rand" | "randn");
    let zero = |e: &Expr| matches!(e.kind, ExprKind::Literal(Literal::Int(0)));
    args.iter().any(|a| match &a.kind {
        ExprKind::Sequence(items) => items.iter().any(zero),
        _ => sizes_only && zero(a),
    }) || call.keyword("size").is_some_and(|a| matches!(&a.kind, ExprKind::Sequence(items) if items.iter().any(zero)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{ExprKind, Keyword, Literal};
    use memlint_diagnostics::Span;

    fn call(args: Vec<Expr>, kws: Vec<(&str, Expr)>) -> Expr {
        let name = |n: &str| Expr::new(Span::new(0, 0), ExprKind::Name(n.into()));
        Expr::new(
            Span::new(0, 0),
            ExprKind::Call {
                func: Box::new(name("f")),
                args: args.into_boxed_slice(),
                keywords: kws.into_iter().map(|(k, v)| Keyword { name: Some(k.into()), value: v }).collect(),
                args_start: 0,
            },
        )
    }

    fn lit(l: Literal) -> Expr {
        Expr::new(Span::new(0, 0), ExprKind::Literal(l))
    }

    fn method(name: &str, receiver: Receiver) -> Callee<'_> {
        Callee::Method { name, receiver, receiver_is_path: true }
    }

    #[test]
    fn backward_by_receiver_and_retain_graph() {
        let plain = call(vec![], vec![]);
        let with_arg = call(vec![lit(Literal::Other)], vec![]);
        let retained = call(vec![], vec![("retain_graph", lit(Literal::Bool(true)))]);
        let b = |via, retain_graph| Some(Event::Backward { via, retain_graph });
        assert_eq!(classify(&plain, method("backward", Receiver::Tensor)), b(Via::Tensor, None));
        assert_eq!(classify(&plain, method("backward", Receiver::ScaledLoss)), b(Via::Scaled, None));
        assert_eq!(classify(&with_arg, method("backward", Receiver::Other)), b(Via::Wrapper, None));
        assert_eq!(classify(&with_arg, method("backward", Receiver::Tensor)), b(Via::Tensor, None));
        assert_eq!(classify(&retained, method("backward", Receiver::Tensor)), b(Via::Tensor, Some(true)));
        assert_eq!(classify(&plain, Callee::Library("torch.autograd.grad")), b(Via::Grad, None));
    }

    #[test]
    fn receivers_decide_step_and_scaler_calls() {
        let plain = call(vec![], vec![]);
        assert_eq!(classify(&plain, method("step", Receiver::Optimizer)), Some(Event::OptimizerStep { closure: false }));
        assert_eq!(classify(&plain, method("step", Receiver::Scaler)), Some(Event::ScalerStep));
        assert_eq!(classify(&plain, method("step", Receiver::Other)), None, "a scheduler's step is no event");
        assert_eq!(classify(&plain, method("update", Receiver::Other)), None, "dict.update");
        assert_eq!(classify(&plain, method("zero_", Receiver::GradAttr)), Some(Event::GradReset));
        assert_eq!(classify(&plain, method("zero_", Receiver::Tensor)), Some(Event::InPlace));
    }

    #[test]
    fn options_as_written() {
        let zg = call(vec![lit(Literal::Bool(false))], vec![]);
        assert_eq!(classify(&zg, method("zero_grad", Receiver::Optimizer)), Some(Event::ZeroGrad { set_to_none: Some(false) }));
        let loader = call(vec![], vec![("num_workers", lit(Literal::Int(0)))]);
        assert_eq!(classify(&loader, Callee::Library("torch.utils.data.DataLoader")), Some(Event::LoaderNew));
        let to = call(vec![lit(Literal::Str("cpu".into()))], vec![("non_blocking", lit(Literal::Bool(true)))]);
        assert_eq!(
            classify(&to, method("to", Receiver::Tensor)),
            Some(Event::ToDevice { non_blocking: Some(true), to_host: true, to_device: false })
        );
        let zeros = call(vec![], vec![("device", lit(Literal::Str("cuda".into())))]);
        assert_eq!(classify(&zeros, Callee::Library("torch.zeros")), Some(Event::Factory { device: true, fills: true }));
        let like = call(vec![], vec![]);
        assert_eq!(classify(&like, Callee::Library("torch.zeros_like")), Some(Event::Factory { device: false, fills: false }));
        // A literal 0 size: no elements to fill; `randint`'s bare 0 is its low end.
        let empty = call(vec![lit(Literal::Int(0))], vec![]);
        assert_eq!(classify(&empty, Callee::Library("torch.empty")), Some(Event::Factory { device: false, fills: false }));
        assert_eq!(classify(&empty, Callee::Library("torch.randint")), Some(Event::Factory { device: false, fills: true }));
        let sizes = call(vec![Expr::new(Span::new(0, 0), ExprKind::Sequence(vec![lit(Literal::Int(0)), lit(Literal::Int(3))].into()))], vec![]);
        assert_eq!(classify(&sizes, Callee::Library("torch.randn")), Some(Event::Factory { device: false, fills: false }));
        for (target, to_device) in [
            (lit(Literal::Str("cuda:1".into())), true),
            (Expr::new(Span::new(0, 0), ExprKind::Name("device".into())), true),
            (Expr::new(Span::new(0, 0), ExprKind::Name("dtype".into())), false),
            (lit(Literal::Str("cpu".into())), false),
        ] {
            let to = call(vec![target], vec![]);
            assert!(
                matches!(classify(&to, method("to", Receiver::Tensor)), Some(Event::ToDevice { to_device: t, .. }) if t == to_device),
                "{to_device}"
            );
        }
        assert_eq!(classify(&zeros, Callee::Library("torch.optim.AdamW")), Some(Event::OptimizerNew));
        assert_eq!(classify(&zeros, Callee::Library("torch.optim.lr_scheduler.StepLR")), None);
        let off = call(vec![lit(Literal::Bool(false))], vec![]);
        assert_eq!(classify(&off, Callee::Library("torch.set_grad_enabled")), Some(Event::GradMode { enabled: Some(false) }));
        assert_eq!(classify(&plain_call(), Callee::Library("torch.cuda.memory.empty_cache")), Some(Event::EmptyCache));
        assert!(may_be_library_event("empty_cache") && !may_be_library_event("cat"));
        assert!(may_be_method_event("add_") && !may_be_method_event("forward"));
    }

    fn plain_call() -> Expr {
        call(vec![], vec![])
    }
}
