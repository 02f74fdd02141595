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
/// An `nn.Module`'s `forward`.
pub const FORWARD: &str = "forward";
/// The keyword of activations that work in place (`nn.ReLU(inplace=True)`).
pub const INPLACE: &str = "inplace";
/// The module of torch's layers.
pub const NN: &str = "torch.nn";
/// The last segment of `nn.Sequential`, to test a callee before it is
/// resolved.
pub const SEQUENTIAL: &str = "Sequential";
/// `nn.Sequential`, by every qualified name it has.
pub const SEQUENTIAL_NAMES: &[&str] = &["torch.nn.Sequential", "torch.nn.modules.container.Sequential"];

/// Whether `attr` names a layer's parameter (`weight`, `bias`).
pub fn is_param_attr(attr: &str) -> bool {
    matches!(attr, "weight" | "bias")
}

/// For a `torch.nn` module class whose forward saves its output for
/// backward, the functional op it runs (`Sigmoid` runs `sigmoid`).
pub fn output_saving_op(class: &str) -> Option<&'static str> {
    const OUTPUT_SAVING_MODULES: &[(&str, &str)] =
        &[("Sigmoid", "sigmoid"), ("Tanh", "tanh"), ("Softmax", "softmax"), ("LogSoftmax", "log_softmax"), ("ReLU", "relu")];
    OUTPUT_SAVING_MODULES.iter().find(|(m, _)| *m == class).map(|(_, op)| *op)
}
