//! The names of tensors' and modules' attributes and methods that rules
//! read: one vocabulary, so a rule says `nn::DATA`, not a spelling of its
//! own.

/// A tensor's `.data`: the same storage, outside autograd.
pub const DATA: &str = "data";
/// A parameter's `.grad`.
pub const GRAD: &str = "grad";
/// `x.item()`: a Python number, read back to the host.
pub const ITEM: &str = "item";
/// `x.detach()`: the same values, without the graph.
pub const DETACH: &str = "detach";
/// `Tensor.pin_memory()`: a copy into page-locked host memory.
pub const PIN_MEMORY: &str = "pin_memory";
/// The keyword of a random factory that draws from a given generator.
pub const GENERATOR: &str = "generator";
/// What a tensor tells of its shape, type and place without its values
/// (`w.data.size()`, `x.data.shape`).
pub const SHAPE_ACCESSORS: &[&str] = &["size", "shape", "dim", "ndim", "ndimension", "numel", "nelement", "dtype", "device", "is_cuda"];
/// An `nn.Module`'s `forward`.
pub const FORWARD: &str = "forward";
/// tch's `ModuleT::forward_t(xs, train)`: a forward with the train flag.
pub const FORWARD_T: &str = "forward_t";

/// Whether a method runs a model's forward pass (`forward`, tch's
/// `forward_t`).
pub fn is_forward_method(attr: &str) -> bool {
    attr == FORWARD || attr == FORWARD_T
}

/// Whether `call` is tch's `model.forward_t(xs, false)`: a forward in
/// evaluation mode, the train flag off.
pub fn is_eval_mode_forward(call: &crate::ir::Expr) -> bool {
    matches!(call.as_method_call(), Some((_, FORWARD_T)))
        && call.as_call().is_some_and(|(_, args, _)| args.get(1).is_some_and(crate::ir::Expr::is_false))
}
/// The keyword of activations that work in place (`nn.ReLU(inplace=True)`).
pub const INPLACE: &str = "inplace";
/// The module of torch's layers.
pub const NN: &str = "torch.nn";
/// The last segment of `nn.Sequential`, to test a callee before it is
/// resolved.
pub const SEQUENTIAL: &str = "Sequential";
/// `nn.Sequential`, by every qualified name it has.
pub const SEQUENTIAL_NAMES: &[&str] = &["torch.nn.Sequential", "torch.nn.modules.container.Sequential"];

/// Wrappers whose parameters are those of the modules they are given
/// (`nn.Sequential(backbone, nn.Flatten())`, `nn.DataParallel(model)`):
/// a wrapper of frozen models and parameterless layers is frozen too.
pub const PARAMETER_SHARING_WRAPPERS: &[&str] = &[
    "torch.nn.Sequential",
    "torch.nn.modules.container.Sequential",
    "torch.nn.DataParallel",
    "torch.nn.parallel.DataParallel",
    "torch.nn.parallel.DistributedDataParallel",
    "torch.compile",
];

/// `nn.Parameter` under its two names: a leaf that requires grad.
pub const PARAMETER_CLASSES: &[&str] = &["torch.nn.Parameter", "torch.nn.parameter.Parameter"];

/// `copy.deepcopy`: a module's copy (an EMA model, a target network), whose
/// parameters keep the original's `requires_grad`.
pub const COPY_DEEPCOPY: &str = "copy.deepcopy";

/// Methods that return the same module (`model.to(device)`,
/// `model.eval()`): its frozen parameters stay frozen.
pub const SAME_MODULE_METHODS: &[&str] = &["to", "cuda", "cpu", "eval", "train", "half", "float", "double", "bfloat16"];

/// Methods only a module has (`m.parameters()`, `m.state_dict()`): what
/// they are called on is a module, not a tensor.
pub const MODULE_ONLY_METHODS: &[&str] = &[
    "parameters",
    "named_parameters",
    "buffers",
    "named_buffers",
    "state_dict",
    "load_state_dict",
    "modules",
    "named_modules",
    "children",
    "named_children",
];

/// Whether a `torch.nn` layer class holds no parameters (`ReLU`,
/// `Flatten`, pooling, `Dropout`).
pub fn is_parameterless_layer(class: &str) -> bool {
    const EXACT: &[&str] = &[
        "Identity", "ReLU", "ReLU6", "GELU", "SiLU", "Mish", "ELU", "LeakyReLU", "Sigmoid", "Tanh", "Softmax",
        "LogSoftmax", "Hardswish", "Hardsigmoid", "Softplus", "Flatten", "Unflatten", "Upsample", "PixelShuffle",
    ];
    EXACT.contains(&class)
        || class.starts_with("Dropout")
        || ["MaxPool", "AvgPool", "AdaptiveAvgPool", "AdaptiveMaxPool"].iter().any(|p| class.starts_with(p))
}

/// Whether `attr` names a layer's parameter (`weight`, `bias`).
pub fn is_param_attr(attr: &str) -> bool {
    matches!(attr, "weight" | "bias")
}

/// The op of the saved-tensor table a `torch.nn` layer runs: `Sigmoid`
/// runs `sigmoid` (saves its output), `Linear` and `Conv2d` run `linear`
/// and `conv2d` (save their input, the weight requiring grad).
pub fn layer_op(class: &str) -> Option<&'static str> {
    const LAYER_OPS: &[(&str, &str)] = &[
        ("Linear", "linear"),
        ("Conv1d", "conv1d"),
        ("Conv2d", "conv2d"),
        ("Conv3d", "conv3d"),
        ("ELU", "elu"),
        ("SiLU", "silu"),
        ("GELU", "gelu"),
    ];
    output_saving_op(class).or_else(|| LAYER_OPS.iter().find(|(m, _)| *m == class).map(|(_, op)| *op))
}

/// For a `torch.nn` module class whose forward saves its output for
/// backward, the functional op it runs (`Sigmoid` runs `sigmoid`).
pub fn output_saving_op(class: &str) -> Option<&'static str> {
    const OUTPUT_SAVING_MODULES: &[(&str, &str)] =
        &[("Sigmoid", "sigmoid"), ("Tanh", "tanh"), ("Softmax", "softmax"), ("LogSoftmax", "log_softmax"), ("ReLU", "relu")];
    OUTPUT_SAVING_MODULES.iter().find(|(m, _)| *m == class).map(|(_, op)| *op)
}

/// Methods of `nn.Module` that return the module itself.
const SELF_RETURNING: &[&str] = &["cuda", "to", "cpu", "float", "double", "half", "bfloat16", "train", "eval"];

/// `Net(...)` out of `Net(...).cuda()`, `Net(...).to(device).eval()` (or
/// `model` out of `model.to(device)`): the module a chain of
/// self-returning module methods gives back.
pub fn strip_module_moves(e: &crate::ir::Expr) -> &crate::ir::Expr {
    match e.as_method_call() {
        Some((recv, m)) if SELF_RETURNING.contains(&m) && (recv.as_call().is_some() || recv.as_name().is_some()) => {
            strip_module_moves(recv)
        }
        _ => e,
    }
}

/// Class methods of model classes that build an instance of their class
/// (Hugging Face's `PreTrainedModel`, diffusers' `ModelMixin`).
pub const ALTERNATE_CONSTRUCTORS: &[&str] = &["from_pretrained", "from_config", "_from_config"];
