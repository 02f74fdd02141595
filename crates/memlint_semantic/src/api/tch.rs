//! The `tch` crate's API (Rust): the names that make a value a leaf that
//! requires grad, the loops over a `VarStore`'s variables, and the grad
//! mode guards. The Rust frontend lowers `tch::no_grad_guard()` to the
//! call of `tch.no_grad_guard`, `vs.root().var(...)` to a method chain.

/// `vs.trainable_variables()`: the variables an optimizer trains, leaves
/// that require grad.
pub const TRAINABLE_VARIABLES: &str = "trainable_variables";

/// `vs.variables()`: every variable by name (`for (name, t) in
/// vs.variables()`), trainable ones requiring grad.
pub const VARIABLES: &str = "variables";

/// `t.set_requires_grad(true)`: the tensor becomes a leaf that requires
/// grad (tch's `requires_grad_`).
pub const SET_REQUIRES_GRAD: &str = "set_requires_grad";

/// Methods of an `nn::Path` that create a trainable variable in its
/// `VarStore` (`vs.root().var("w", &[3], init)`): names no tensor has.
pub const PATH_VARIABLE_METHODS: &[&str] = &["var", "var_copy", "f_var", "f_var_copy", "kaiming_uniform", "randn_standard"];

/// `nn::Path` methods named like tensor factories that create a trainable
/// variable when called on a path (`vs.root().zeros("b", &[3])`); on a
/// path only, since `Tensor::zeros` is a factory.
pub const PATH_FACTORY_METHODS: &[&str] = &["zeros", "ones", "randn", "uniform"];

/// The guard that turns grad off while it lives (`let _guard =
/// tch::no_grad_guard();`); `let _ = ...` drops it at once.
pub const NO_GRAD_GUARD: &str = "tch.no_grad_guard";

/// `opt.backward_step(&loss)` and its clipping forms: the optimizer zeroes
/// the gradients, runs the loss's backward and steps, in one call. A loop
/// that calls one is a training loop like one that calls `backward()`.
pub const BACKWARD_STEP_METHODS: &[&str] = &["backward_step", "backward_step_clip", "backward_step_clip_norm"];
