//! The torch API layer: what a call means for a training program, written
//! once so rules match events, not spellings.
//!
//! [`classify`] turns a call into an [`Event`] (the vocabulary in
//! `events.rs`), given its callee: a library function's resolved qualified
//! name, or a method's name and what its receiver is.
//! [`saved_for_backward`] is the table of what autograd saves for the
//! backward pass of an op, after the semantics of PyTorch's
//! `tools/autograd/derivatives.yaml`: it is data, not code, so a rule that
//! asks "did this op save its output?" reads one row.

pub mod amp;
mod events;
pub mod nn;
mod kinds;
pub mod tch;

pub use events::{
    classify, computed_from, optimizer_scale_invariance, is_filling_method, is_inplace_method, is_legacy_cpu_constructor, may_be_library_event,
    may_be_method_event, Callee, Event, Receiver, Via,
    CLIP_GRAD_APIS, GRAD_OFF_APIS, OOM_EXCEPTIONS,
};
pub use kinds::StepKinds;

use memlint_diagnostics::Span;

use crate::ir::{Expr, ExprKind, Stmt, StmtKind};

/// Every torch API name the vocabulary holds (events, clipping and
/// grad-mode functions, the saved-tensor table, norm buffers, the AMP
/// names, tensor and module attributes). Rules are written against the
/// vocabulary, never these spellings: a test checks that no rule holds one
/// as a string literal.
pub fn vocabulary() -> Vec<&'static str> {
    let mut out: Vec<&'static str> = events::vocabulary().collect();
    out.extend(SAVED_FOR_BACKWARD.iter().map(|(op, _)| *op));
    out.extend(NORM_BUFFERS);
    out.extend(amp::DEPRECATED_MODULES);
    out.extend([amp::MODULE, amp::TORCH, amp::APEX_AMP]);
    out.extend([nn::DATA, nn::GRAD, nn::ITEM, nn::DETACH, nn::FORWARD, nn::FORWARD_T, nn::INPLACE, nn::NN, nn::SEQUENTIAL, "weight", "bias"]);
    out.extend(nn::SEQUENTIAL_NAMES);
    out.extend([tch::TRAINABLE_VARIABLES, tch::VARIABLES, tch::SET_REQUIRES_GRAD, tch::NO_GRAD_GUARD]);
    out.extend(tch::PATH_VARIABLE_METHODS);
    out.extend(tch::BACKWARD_STEP_METHODS);
    out.sort_unstable();
    out.dedup();
    out
}

/// What autograd saves of an op's operands for its backward pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Saves {
    /// The op's result (`sigmoid`, `tanh`, `exp`, `softmax`, `relu`...):
    /// changing the result in place invalidates the backward.
    Output,
    /// The inputs, when the other operand requires grad (`a * b` of two
    /// tensors, `matmul`, `linear`); multiplying by a Python scalar saves
    /// nothing.
    Inputs,
    /// The first input, when it requires grad (`pow`, `log`, `sin`: the
    /// derivative is a function of `self`).
    SelfInput,
    /// `a / b`: the divisor whenever either operand requires grad, the
    /// dividend when the divisor does.
    Quotient,
    /// Nothing that an in-place change of the operands could invalidate
    /// (`add`, `sub`, `view`, `clone`).
    Nothing,
}

/// `(op, what it saves)`, from derivatives.yaml: ops whose formula uses
/// `result` save their output; ops whose formula uses `self`/`other` save
/// their inputs.
pub const SAVED_FOR_BACKWARD: &[(&str, Saves)] = &[
    ("sigmoid", Saves::Output),
    ("tanh", Saves::Output),
    ("exp", Saves::Output),
    ("exp2", Saves::Output),
    ("expm1", Saves::Output),
    ("softmax", Saves::Output),
    ("log_softmax", Saves::Output),
    ("relu", Saves::Output),
    ("sqrt", Saves::Output),
    ("rsqrt", Saves::Output),
    ("elu", Saves::SelfInput),
    ("silu", Saves::SelfInput),
    ("gelu", Saves::SelfInput),
    ("hardtanh", Saves::Inputs),
    ("mul", Saves::Inputs),
    ("div", Saves::Quotient),
    ("matmul", Saves::Inputs),
    ("mm", Saves::Inputs),
    ("bmm", Saves::Inputs),
    ("mv", Saves::Inputs),
    ("linear", Saves::Inputs),
    ("conv1d", Saves::Inputs),
    ("conv2d", Saves::Inputs),
    ("conv3d", Saves::Inputs),
    ("pow", Saves::SelfInput),
    ("log", Saves::SelfInput),
    ("sin", Saves::SelfInput),
    ("cos", Saves::SelfInput),
    ("abs", Saves::SelfInput),
    ("add", Saves::Nothing),
    ("sub", Saves::Nothing),
    ("neg", Saves::Nothing),
    ("clone", Saves::Nothing),
    ("view", Saves::Nothing),
    ("reshape", Saves::Nothing),
];

/// Whether the torch function `qualified` returns a tuple of outputs that
/// its backward reads (`torch.linalg.eigh`: eigenvalues and eigenvectors),
/// so changing one in place makes `backward()` raise.
pub fn saves_its_outputs(qualified: &str) -> bool {
    const DECOMPOSITIONS: &[&str] = &[
        "torch.linalg.eigh",
        "torch.linalg.eig",
        "torch.linalg.svd",
        "torch.linalg.qr",
        "torch.svd",
        "torch.qr",
    ];
    DECOMPOSITIONS.contains(&qualified)
}

/// What `op` saves for backward; `None` for ops not in the table.
pub fn saved_for_backward(op: &str) -> Option<Saves> {
    SAVED_FOR_BACKWARD.iter().find(|(name, _)| *name == op).map(|(_, s)| *s)
}

/// An in-place write a call does: `(tensor written, span to report, what)`.
/// Forms: a method (`y.add_(1)`, reported at `.add_(1)`), `out=` of a
/// torch function (at the `out=` value), a functional with
/// `inplace=True` (`F.relu(y, inplace=True)`) or an in-place torch
/// function (`torch.relu_(y)`), both at the call. `qualified` is the
/// callee's resolved library name.
pub fn inplace_call<'e>(call: &'e Expr, qualified: Option<&str>) -> Vec<(&'e Expr, Span, String)> {
    debug_assert!(may_write_in_place(call) || inplace_call_unchecked(call, qualified).is_empty());
    inplace_call_unchecked(call, qualified)
}

/// Whether [`inplace_call`] can find a write in `call` whatever its callee
/// resolves to: an in-place method name or an `out=`/`inplace=` keyword on
/// an attribute callee, or a bare name (an import alias may hide the
/// library name). Cheap, before resolving the callee.
pub fn may_write_in_place(call: &Expr) -> bool {
    let ExprKind::Call { func, keywords, .. } = &call.kind else { return false };
    match &func.kind {
        ExprKind::Attribute { attr, .. } => {
            is_inplace_method(attr) || keywords.iter().any(|k| matches!(k.name.as_deref(), Some("out" | "inplace")))
        }
        ExprKind::Name(_) => true,
        _ => false,
    }
}

fn inplace_call_unchecked<'e>(call: &'e Expr, qualified: Option<&str>) -> Vec<(&'e Expr, Span, String)> {
    let mut out = Vec::new();
    let ExprKind::Call { func, args, keywords, .. } = &call.kind else { return out };
    let Some(q) = qualified else {
        if let ExprKind::Attribute { value, attr, attr_span } = &func.kind {
            if is_inplace_method(attr) {
                out.push((&**value, attr_span.cover(Span::new(call.span.end, call.span.end)), format!("`{attr}()`")));
            }
        }
        return out;
    };
    if !(q == "torch" || q.starts_with("torch.")) {
        return out;
    }
    for k in keywords {
        if k.name.as_deref() == Some("out") {
            out.push((&k.value, k.value.span, "`out=` write".to_string()));
        }
    }
    let last = q.rsplit('.').next().unwrap_or(q);
    if let Some(first) = args.first() {
        if q.starts_with("torch.nn.functional.") && call.keyword("inplace").is_some_and(Expr::is_true) {
            out.push((first, call.span, format!("`{last}(..., inplace=True)`")));
        } else if is_inplace_method(last) && !q.starts_with("torch.nn.") {
            out.push((first, call.span, format!("`torch.{last}()`")));
        }
    }
    out
}

/// The in-place writes a statement does itself: `y += x` (the whole
/// statement) and `y[i] = v` (the target). The tensor written is the
/// base of a subscript (`b` of `b[:, 4] += 1.0`).
pub fn inplace_stmt(stmt: &Stmt) -> Vec<(&Expr, Span, &'static str)> {
    let base = |t: &'_ Expr| -> bool { matches!(t.kind, ExprKind::Subscript { .. }) };
    match &stmt.kind {
        StmtKind::AugAssign { target, .. } => {
            let on = match &target.kind {
                ExprKind::Subscript { value, .. } => &**value,
                _ => target,
            };
            vec![(on, stmt.span, "augmented assignment")]
        }
        StmtKind::Assign { targets, .. } => targets
            .iter()
            .filter(|t| base(t))
            .filter_map(|t| match &t.kind {
                ExprKind::Subscript { value, .. } => Some((&**value, t.span, "item assignment")),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// Torch functions whose result is integer or bool, with no autograd
/// history whatever their inputs (beside the tensor methods of the same
/// names that detach: `torch.eq`, `torch.argmax`).
pub const INTEGER_RESULT_FUNCTIONS: &[&str] = &[
    "argsort", "nonzero", "count_nonzero", "bucketize", "searchsorted", "equal", "isclose", "allclose", "logical_and",
    "logical_or", "logical_not", "logical_xor", "isneginf", "isposinf", "isreal", "greater", "greater_equal", "less",
    "less_equal", "not_equal",
];

/// Buffers of torch's normalisation layers: tensors that never require grad,
/// so `.data` on them bypasses nothing (`bn.running_var.data = ...`).
pub const NORM_BUFFERS: &[&str] = &["running_mean", "running_var", "num_batches_tracked"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saved_tensors_follow_derivatives_yaml() {
        assert_eq!(saved_for_backward("sigmoid"), Some(Saves::Output));
        assert_eq!(saved_for_backward("matmul"), Some(Saves::Inputs));
        assert_eq!(saved_for_backward("add"), Some(Saves::Nothing));
        assert_eq!(saved_for_backward("frobnicate"), None);
    }

    #[test]
    fn blocking_last_names_cover_the_blocking_calls() {
        for q in BLOCKING_CALLS {
            assert!(BLOCKING_LAST_NAMES.contains(&q.rsplit('.').next().unwrap()), "{q}");
        }
    }
}

/// The flag that turns on cuDNN's benchmark mode (`torch.backends.cudnn.benchmark = True`).
pub const CUDNN_BENCHMARK: &str = "torch.backends.cudnn.benchmark";

/// Whether a callee (its dotted text) draws a random value:
/// `random.choice`, `np.random.randint`, `torch.randint`.
pub fn is_random_draw(dotted: &str) -> bool {
    dotted.starts_with("random.")
        || dotted.contains("np.random.")
        || dotted.starts_with("numpy.random.")
        || dotted == "torch.randint"
        // Rust's `rand`: `rng.gen_range(a..b)`, `rand::random()`.
        || dotted.ends_with(".gen_range")
        || dotted == "rand.random"
}

/// Whether `e` gives a tensor a leading dimension of size 1:
/// `x.unsqueeze(0)`, `x.unsqueeze(dim=0)`, `x[None]`, `x[None, ...]`.
pub fn adds_a_leading_unit_dim(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Subscript { index, .. } => match &index.kind {
            ExprKind::Sequence(items) => items.first().is_some_and(Expr::is_none),
            _ => index.is_none(),
        },
        _ => {
            e.as_method_call().is_some_and(|(_, m)| m == "unsqueeze")
                && e.as_call()
                    .and_then(|(_, args, _)| args.first().or_else(|| e.keyword("dim")))
                    .is_some_and(|a| matches!(a.kind, ExprKind::Literal(crate::ir::Literal::Int(0))))
        }
    }
}

/// Whether `e` is the CPU as a device: `"cpu"`, `torch.device("cpu")`.
pub fn is_cpu_device(e: &Expr) -> bool {
    let cpu = |a: &Expr| matches!(&a.kind, ExprKind::Literal(crate::ir::Literal::Str(s)) if s.as_str() == "cpu");
    cpu(e)
        || e.as_call().is_some_and(|(f, args, _)| {
            f.dotted().is_some_and(|d| d.as_str() == "torch.device") && args.first().or_else(|| e.keyword("type")).is_some_and(cpu)
        })
}

/// Whether `e` names a device other than by a variable: a string literal
/// (`"cuda:0"`), a `torch.device(...)`, or a choice between such
/// (`"cuda" if cuda else "cpu"`).
pub fn is_device_value(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Literal(crate::ir::Literal::Str(_)) => true,
        ExprKind::IfExp { .. } => true,
        _ => e.as_call().is_some_and(|(f, _, _)| f.dotted().is_some_and(|d| d.as_str() == "torch.device")),
    }
}

/// Calls that make the host wait for the device each time they run,
/// though they read no value back: a NCCL `barrier()` synchronizes the
/// stream, Horovod's blocking collectives wait for the op to finish, and
/// apex's `amp.scale_loss` reads its overflow flag back as it exits (with
/// the dynamic loss scale of its default opt levels). A step that runs one
/// already waits there.
pub const BLOCKING_CALLS: &[&str] = &[
    "torch.distributed.barrier",
    "horovod.torch.allreduce",
    "horovod.torch.allgather",
    "horovod.torch.broadcast",
    "horovod.torch.synchronize",
    "apex.amp.scale_loss",
];

/// The last segments of [`BLOCKING_CALLS`]: the test made on every call
/// before its callee is resolved.
pub const BLOCKING_LAST_NAMES: &[&str] = &["barrier", "allreduce", "allgather", "broadcast", "synchronize", "scale_loss"];

/// Calls that list files on disk (`glob.glob(pattern)`, `os.listdir(d)`):
/// a loop over what they give is a script's loop over input files.
pub const FILE_LISTING_FUNCTIONS: &[&str] = &["glob.glob", "glob.iglob", "os.listdir", "os.scandir", "os.walk"];

/// `pathlib.Path` methods that list files (`root.glob("*.png")`).
pub const FILE_LISTING_METHODS: &[&str] = &["glob", "rglob", "iterdir"];

/// matplotlib calls that draw or show a figure (`plt.show()`,
/// `plt.subplots(...)`): a loop that runs one each iteration is a display
/// loop, as many iterations as there are pictures.
pub const FIGURE_FUNCTIONS: &[&str] = &[
    "matplotlib.pyplot.show",
    "matplotlib.pyplot.subplots",
    "matplotlib.pyplot.figure",
    "matplotlib.pyplot.imshow",
    "matplotlib.pyplot.savefig",
];

/// torchvision datasets of small images held in memory (28x28 to 32x32,
/// STL10 96x96): a batch of them
/// is a copy of a megabyte or two, however it is made.
pub const SMALL_IMAGE_DATASETS: &[&str] = &["MNIST", "FashionMNIST", "KMNIST", "EMNIST", "QMNIST", "CIFAR10", "CIFAR100", "SVHN", "USPS", "STL10"];

/// torchvision datasets of photographs, read from image files at their
/// own size (a few hundred pixels a side) unless a transform makes them
/// smaller: a batch is tens of megabytes.
pub const LARGE_IMAGE_DATASETS: &[&str] = &[
    "ImageFolder", "DatasetFolder", "ImageNet", "CelebA", "LSUN", "Places365", "STL10", "Cityscapes", "CocoDetection",
    "CocoCaptions", "VOCDetection", "VOCSegmentation", "SBDataset", "Flowers102", "Food101", "OxfordIIITPet",
    "StanfordCars", "Caltech101", "Caltech256", "WIDERFace", "Kitti", "INaturalist", "SUN397", "DTD", "FGVCAircraft",
];

/// torchvision transforms that set an image's size (`Resize(224)`).
pub const RESIZING_TRANSFORMS: &[&str] = &["Resize", "RandomResizedCrop", "Scale", "RandomSizedCrop"];

/// torchvision transforms that crop an image to a size, which it must be
/// at least (`CenterCrop(224)`, `RandomCrop(32, padding=4)`).
pub const CROPPING_TRANSFORMS: &[&str] = &["CenterCrop", "RandomCrop", "FiveCrop", "TenCrop"];

/// Tensor methods that scale a value by a factor (`loss.mul(k / n)`,
/// `loss.div(n)`): the method spelling of `*` and `/`.
pub const SCALING_METHODS: &[&str] = &["mul", "mul_", "div", "div_", "true_divide", "multiply", "divide"];

/// Whether a call reduces a loss by summing it over the samples:
/// `reduction="sum"` (`nn.MSELoss(reduction="sum")`, `F.cross_entropy(...,
/// reduction="sum")`), or the legacy `size_average=False`.
pub fn sums_over_samples(call: &Expr) -> bool {
    call.keyword("reduction").is_some_and(|v| matches!(&v.kind, ExprKind::Literal(crate::ir::Literal::Str(s)) if s.as_str() == "sum"))
        || call.keyword("size_average").is_some_and(Expr::is_false)
}

/// Whether a call averages: `reduction="mean"`, `x.mean()`, `torch.mean(x)`.
pub fn averages(call: &Expr) -> bool {
    let Some((func, _, _)) = call.as_call() else { return false };
    let named_mean = match &func.kind {
        ExprKind::Attribute { attr, .. } => matches!(attr.as_str(), "mean" | "nanmean"),
        ExprKind::Name(n) => matches!(n.as_str(), "mean" | "nanmean"),
        _ => false,
    };
    named_mean
        || call.keyword("reduction").is_some_and(|v| {
            matches!(&v.kind, ExprKind::Literal(crate::ir::Literal::Str(s)) if matches!(s.as_str(), "mean" | "elementwise_mean"))
        })
}

/// Functions and tensor methods that test for NaN or infinite values
/// (`torch.isnan(k)`, `loss.isinf()`, `math.isnan(v)`).
pub const NAN_TESTS: &[&str] = &["isnan", "isinf", "isneginf", "isposinf"];

/// Library functions that convert their argument to a tensor or array and
/// draw nothing: given the same data, they give the same tensor.
pub const CONVERSION_FUNCTIONS: &[&str] = &[
    "torch.from_numpy",
    "torch.tensor",
    "torch.as_tensor",
    "torch.Tensor",
    "torch.FloatTensor",
    "torch.DoubleTensor",
    "torch.LongTensor",
    "torch.autograd.Variable",
    "numpy.array",
    "numpy.asarray",
];

/// Tensor methods that convert, reshape or move a tensor and draw nothing.
pub const CONVERSION_METHODS: &[&str] = &[
    "float", "double", "long", "half", "to", "cuda", "type", "view", "reshape", "unsqueeze", "squeeze", "t",
    "contiguous", "detach", "requires_grad_", "astype",
];
