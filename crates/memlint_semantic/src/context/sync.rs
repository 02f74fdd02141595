//! Reads of a tensor's value back to the host (host syncs), and the
//! training-step loops that make one every step
//! ([`crate::facts::pipeline::Pipeline::synced_loops`]).

use crate::api::{classify, Callee, Event, Receiver};
use crate::facts::guards::{is_interval_guard, is_logging_guard, is_option_guard};
use crate::ir::{BoolOpKind, CmpOp, Expr, ExprKind, Language, Stmt, StmtKind, UnaryOp};
use crate::ValueKind;

use super::Context;

/// How a call reads a tensor's value back to the host: the host waits
/// until every kernel queued before it has run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostRead<'e> {
    /// A tensor method: `.item()`, `.tolist()`, `.numpy()`, `.cpu()`,
    /// `.to("cpu")`, tch's `double_value`, `int64_value`, `to(Device::Cpu)`.
    Method(&'e str),
    /// `float(t)`, `int(t)`, `bool(t)` of a tensor (Python).
    Convert(&'e str),
    /// tch's `f64::try_from(&t)`, `Vec::<f32>::try_from(&t)`: the
    /// conversion's path, `f64::try_from`.
    TryFrom(String),
    /// A library function that waits for the device
    /// (`torch.cuda.synchronize`): its qualified name.
    Library(String),
    /// `print(...)` of a device tensor, or of an f-string that formats one
    /// (`print(loss)`, `print(f"{loss}")`): formatting copies its values.
    Print,
    /// A metrics logger handed a device tensor, which it converts on the
    /// host: TensorBoard's `writer.add_scalar("loss", loss, step)` (and
    /// `add_scalars`), `wandb.log({"loss": loss})`. The method or function.
    Logged(&'e str),
}

/// Logger methods that convert a scalar value on the host (TensorBoard's
/// `SummaryWriter`, tensorboardX): the value is their second argument
/// (`scalar_value=`), or the values of the dict there (`add_scalars`).
const SCALAR_LOGGERS: &[&str] = &["add_scalar", "add_scalars"];

/// Logging functions whose dict argument's values are converted on the
/// host.
const DICT_LOGGERS: &[&str] = &["wandb.log"];

/// Tensor methods whose result a Python condition reads back
/// (`if loss.isnan().any():`): predicates and reductions that stay on the
/// device until then.
const CONDITION_METHODS: &[&str] =
    &["any", "all", "isnan", "isinf", "isfinite", "eq", "ne", "lt", "le", "gt", "ge", "sum", "mean", "max", "min", "abs", "norm", "equal", "allclose", "isclose"];

/// The same, as torch functions of a tensor argument (`torch.isnan(loss)`).
const CONDITION_FUNCTIONS: &[&str] = &[
    "torch.any",
    "torch.all",
    "torch.isnan",
    "torch.isinf",
    "torch.isfinite",
    "torch.eq",
    "torch.ne",
    "torch.lt",
    "torch.le",
    "torch.gt",
    "torch.ge",
    "torch.sum",
    "torch.mean",
    "torch.max",
    "torch.min",
    "torch.abs",
    "torch.norm",
    "torch.equal",
    "torch.allclose",
    "torch.isclose",
    "torch.count_nonzero",
];

/// Library functions that build a tensor from host data, on the host
/// (besides the factories of [`Event::Factory`]).
const HOST_CONSTRUCTORS: &[&str] = &[
    "torch.from_numpy",
    "torch.as_tensor",
    "torch.Tensor",
    "torch.FloatTensor",
    "torch.DoubleTensor",
    "torch.HalfTensor",
    "torch.LongTensor",
    "torch.IntTensor",
    "torch.ByteTensor",
    "torch.BoolTensor",
    // tch: `Tensor::from_slice(&[s]).to_device(device)`.
    "tch.Tensor.from_slice",
    "tch.Tensor.of_slice",
    "tch.Tensor.from",
];

/// Where the data of an expression comes from, for a move of it.
pub(super) enum Root<'e> {
    /// A name (`x` of `x[0].float()`, `batch` of `batch.text`).
    Name(&'e str),
    /// What `next(it)` draws from an iterator.
    Next,
    Other,
}

/// The name the data of `e` is part of or made from: through indexing,
/// attributes (`batch.text`), references (Rust `&xs`) and tensor methods
/// other than moves, which keep the data where it is (`.float()`,
/// `.narrow(1, 0, n)`).
pub(super) fn drawn_root(e: &Expr) -> Root<'_> {
    let mut e = e;
    loop {
        match &e.kind {
            ExprKind::Subscript { value, .. } | ExprKind::Attribute { value, .. } => e = value,
            ExprKind::Unary { op: UnaryOp::Ref | UnaryOp::RefMut, operand } => e = operand,
            ExprKind::Call { func, .. } => match &func.kind {
                // `it.next()` (Python 2's spelling, kept by old scripts), `it.__next__()`.
                ExprKind::Attribute { attr, .. } if matches!(attr.as_str(), "next" | "__next__") => return Root::Next,
                ExprKind::Attribute { value, attr, .. } if !matches!(attr.as_str(), "to" | "cuda" | "to_device" | "type") => e = value,
                ExprKind::Name(n) if n == "next" => return Root::Next,
                // `Variable(x)`: the drawn tensor wrapped (PyTorch before 0.4).
                ExprKind::Name(n) if n == "Variable" => match e.as_call() {
                    Some((_, [inner, ..], _)) => e = inner,
                    _ => return Root::Other,
                },
                _ => return Root::Other,
            },
            ExprKind::Name(n) => return Root::Name(n),
            _ => return Root::Other,
        }
    }
}

/// Whether `e` is (a part of) what a loop draws: rooted at one of the
/// `drawn` names, or at what `next(...)` draws from an iterator.
pub(super) fn is_drawn(e: &Expr, drawn: &[String]) -> bool {
    match drawn_root(e) {
        Root::Name(n) => drawn.iter().any(|d| d == n),
        Root::Next => true,
        Root::Other => false,
    }
}

/// The last names of the calls [`Context::waits_for_device_in`] looks at:
/// host reads, conversions, `synchronize`, and moves.
const WAITING_CALLS: &[&str] = &[
    "item", "tolist", "numpy", "cpu", "double_value", "int64_value", "try_from", "from", "synchronize", "to", "cuda", "to_device",
    "type", "nonzero", "masked_select", "unique", "unique_consecutive", "argwhere", "where",
];

/// Visits the expressions of `s` that it evaluates for their value: for an
/// assignment, its value only (`x[x < 0] = 0` writes through a mask, a
/// masked fill that does not wait), with `f` returning `true` to stop.
pub(super) fn any_read_expr(s: &Stmt, f: &mut dyn FnMut(&Expr) -> bool) -> bool {
    if let StmtKind::Assign { value, .. } = &s.kind {
        return value.any(f);
    }
    let mut found = false;
    s.for_each_expr(|e| found = found || e.any(f));
    found
}

/// A boolean mask read: `x[x > 0]`, `out[pred == target]` (a comparison as
/// the index). The result's size depends on the mask's values.
fn is_mask_read(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Subscript { index, .. } => matches!(&index.kind, ExprKind::Compare { ops, .. }
            if ops.iter().all(|o| !matches!(o, CmpOp::Is | CmpOp::IsNot | CmpOp::In | CmpOp::NotIn))),
        _ => false,
    }
}

impl Context {
    /// How `call` reads a tensor's value back to the host, if it does.
    pub fn host_read<'e>(&self, call: &'e Expr) -> Option<HostRead<'e>> {
        let ExprKind::Call { func, args, .. } = &call.kind else { return None };
        if let Some((_, method)) = call.as_method_call() {
            let callee = Callee::Method { name: method, receiver: Receiver::Tensor, receiver_is_path: false };
            let sync = match classify(call, callee) {
                Some(Event::HostSync) => true,
                Some(Event::ToDevice { to_host: true, .. }) => args.len() <= 1,
                _ => false,
            };
            if sync {
                return Some(HostRead::Method(method));
            }
            if SCALAR_LOGGERS.contains(&method) && self.language() == Language::Python {
                let value = call.keyword("scalar_value").or(call.keyword("tag_scalar_dict")).or(args.get(1));
                if value.is_some_and(|v| self.holds_device_tensor(v)) {
                    return Some(HostRead::Logged(method));
                }
            }
        }
        if self.language() == Language::Python
            && self.qualified_name(func).is_some_and(|q| DICT_LOGGERS.contains(&q.as_str()))
            && args.first().is_some_and(|v| self.holds_device_tensor(v))
        {
            return Some(HostRead::Logged(DICT_LOGGERS[0]));
        }
        let d = func.dotted()?;
        match d.as_str() {
            "print" if self.language() == Language::Python => {
                let formats = |a: &Expr| match &a.kind {
                    // An f-string: its interpolations, formatted.
                    ExprKind::Other(items) => items.iter().any(|i| self.device_tensor(i)),
                    _ => self.device_tensor(a),
                };
                args.iter().any(formats).then_some(HostRead::Print)
            }
            "float" | "int" | "bool" => {
                let arg = args.first()?;
                let name = match d.as_str() {
                    "float" => "float",
                    "int" => "int",
                    _ => "bool",
                };
                (self.language() == Language::Python && self.is_tensor_value(arg)).then_some(HostRead::Convert(name))
            }
            "f64.try_from" | "f64.from" | "f32.try_from" | "f32.from" | "i64.try_from" | "i64.from" | "Vec.try_from" | "Vec.from" => {
                let arg = args.first()?;
                let inner = match &arg.kind {
                    ExprKind::Unary { op: UnaryOp::Ref | UnaryOp::RefMut, operand } => operand,
                    _ => arg,
                };
                self.is_tensor_value(inner).then(|| HostRead::TryFrom(d.as_str().replace('.', "::")))
            }
            _ => {
                let q = self.qualified_name(func)?;
                (classify(call, Callee::Library(q.as_str())) == Some(Event::HostSync)).then(|| HostRead::Library(q.as_str().to_string()))
            }
        }
    }

    /// A loss, a model output, or another value known to be a tensor.
    pub fn is_tensor_value(&self, e: &Expr) -> bool {
        self.carries_graph(e)
            || matches!(self.kind_of(e), Some(ValueKind::Tensor | ValueKind::Output))
            || e.dotted().is_some_and(|d| self.is_backward_root(&d))
    }

    /// The part of an `if` or `while` test that Python reads back from the
    /// device to decide (`torch.isnan(loss).any()`, `loss < best`,
    /// `not torch.isfinite(grad_norm)`), if any: `bool()` of a device
    /// tensor waits for every kernel queued before it. A host read of its
    /// own in the test (`loss.item() > 5`) is not returned (it is reported
    /// as that read), nor a batch the function never moves to a device.
    pub fn condition_read<'e>(&self, test: &'e Expr) -> Option<&'e Expr> {
        if self.language() != Language::Python {
            return None;
        }
        match &test.kind {
            ExprKind::Unary { op: UnaryOp::Not, operand } => self.condition_read(operand),
            // `step % k == 0 and torch.isnan(loss)`: what follows an
            // interval, an option or a logging test in an `and` runs only
            // when that holds.
            ExprKind::BoolOp { op: BoolOpKind::And, values } => values
                .iter()
                .take_while(|v| !(is_interval_guard(v) || is_option_guard(v) || is_logging_guard(v)))
                .find_map(|v| self.condition_read(v)),
            ExprKind::BoolOp { values, .. } => values.iter().find_map(|v| self.condition_read(v)),
            ExprKind::Compare { left, ops, comparators } => (ops.iter().all(|o| !matches!(o, CmpOp::Is | CmpOp::IsNot | CmpOp::In | CmpOp::NotIn))
                && std::iter::once(&**left).chain(comparators.iter()).any(|e| self.device_tensor(e)))
            .then_some(test),
            _ => self.device_tensor(test).then_some(test),
        }
    }

    /// Whether `e` evaluates to a tensor on the device: a value known to be
    /// a tensor (a loss, a model output), or a predicate or reduction of
    /// one ([`CONDITION_METHODS`], [`CONDITION_FUNCTIONS`]). A loader's batch
    /// the function never moves is on the host.
    fn device_tensor(&self, e: &Expr) -> bool {
        match &e.kind {
            ExprKind::Call { func, args, .. } => {
                if let Some(q) = self.qualified_name(func) {
                    return CONDITION_FUNCTIONS.contains(&q.as_str()) && args.iter().any(|a| self.device_tensor(a));
                }
                match e.as_method_call() {
                    Some((recv, method)) => CONDITION_METHODS.contains(&method) && self.device_tensor(recv),
                    None => false,
                }
            }
            ExprKind::BinOp { left, right, .. } => self.device_tensor(left) || self.device_tensor(right),
            ExprKind::Unary { operand, .. } => self.device_tensor(operand),
            ExprKind::Name(_) | ExprKind::Attribute { .. } | ExprKind::Subscript { .. } => {
                let mut base = e;
                while let ExprKind::Subscript { value, .. } = &base.kind {
                    base = value;
                }
                // Not a backward root's other names (`accum_steps` of
                // `(loss / accum_steps).backward()`).
                (self.carries_graph(e) || matches!(self.kind_of(e), Some(ValueKind::Tensor | ValueKind::Output)))
                    && !base.as_name().is_some_and(|n| self.is_unmoved_batch(n))
            }
            _ => false,
        }
    }

    /// Whether `e` is a device tensor, or a dict literal with one among its
    /// values (`{"loss": loss, "lr": lr}`).
    fn holds_device_tensor(&self, e: &Expr) -> bool {
        match &e.kind {
            ExprKind::Dict(items) => items.iter().any(|(_, v)| self.device_tensor(v)),
            _ => self.device_tensor(e),
        }
    }

    /// Whether `name` holds a loader's batch that the current function
    /// never moves to a device: a CPU tensor.
    pub(super) fn is_unmoved_batch(&self, name: &str) -> bool {
        if !self.is_batch(name) {
            return false;
        }
        let function = self.function_qualname();
        !self.pipeline().moves.iter().any(|m| m.function.as_deref() == function && m.batch == name)
    }

    /// Whether a method read of `call` reads a loader's batch that was
    /// never moved to a device in this function (`labels.numpy()` of `for
    /// imgs, labels in loader`): a CPU tensor, nothing to wait for.
    pub fn reads_host_batch(&self, call: &Expr) -> bool {
        let Some((recv, _)) = call.as_method_call() else { return false };
        let mut base = recv;
        while let ExprKind::Subscript { value, .. } = &base.kind {
            base = value;
        }
        base.as_name().is_some_and(|name| self.is_unmoved_batch(name))
    }

    /// Whether the current point reads `call` back to the host every
    /// training step: a host read ([`Context::host_read`]) of a device
    /// value, in a training-step loop, not under a logging interval, a
    /// user option or a logging condition, nor in an `except` handler.
    pub fn syncs_every_step(&self, call: &Expr) -> bool {
        self.runs_every_step() && self.host_read(call).is_some() && !self.reads_host_batch(call)
    }

    /// Whether the current point runs once every training step: in a
    /// training-step loop, not under a logging interval, a user option or
    /// a logging condition, nor in an `except` handler.
    fn runs_every_step(&self) -> bool {
        self.in_training_step()
            && !(self.guarded_by_interval()
                || self.guarded_by_option()
                || self.guarded_by_logging_condition()
                || !self.handlers.is_empty())
    }

    /// Whether a function body waits for the device on each call: outside
    /// any `if`, `try` or nested function (loops included: their bodies
    /// run for each item, here tokens or micro-batches), it reads a value
    /// back to the host ([`Context::host_read`]: a method, a conversion of
    /// tch, `torch.cuda.synchronize()`) or copies data built on the host
    /// to the device with a blocking copy. A read of a CPU tensor cannot be
    /// told apart, and counts.
    pub fn waits_for_device_in(&self, body: &[Stmt]) -> bool {
        fn unconditional<'s>(body: &'s [Stmt], out: &mut Vec<&'s Stmt>) {
            for s in body {
                match &s.kind {
                    // An `if`'s test runs; its arms may not.
                    StmtKind::If { .. } => out.push(s),
                    StmtKind::Try { .. } | StmtKind::Function(_) | StmtKind::Class(_) => {}
                    StmtKind::For { body, .. }
                    | StmtKind::While { body, .. }
                    | StmtKind::With { body, .. }
                    | StmtKind::Block(body) => {
                        out.push(s);
                        unconditional(body, out);
                    }
                    _ => out.push(s),
                }
            }
        }
        let mut stmts = Vec::new();
        unconditional(body, &mut stmts);
        // Names bound so far to indices built on the host (`index =
        // np.random.choice(n, b)`): a tensor indexed with one copies them
        // to its device, a blocking copy (`self.states[index]`).
        let mut indices: Vec<String> = Vec::new();
        // `float(loss)` of a name bound before to a tensor reads it back;
        // the names are looked for only once a conversion is seen.
        let tensors = std::cell::OnceCell::new();
        let python = self.language() == Language::Python;
        // Also `math.isnan(loss)` of a loss the function is given (a NaN
        // check in a helper the step calls): a loss is a tensor.
        let converts_a_tensor = |x: &Expr, before: u32| {
            x.as_call().is_some_and(|(func, args, _)| {
                let math = matches!(&func.kind, ExprKind::Attribute { value, attr, .. }
                    if value.as_name() == Some("math") && matches!(attr.as_str(), "isnan" | "isinf" | "isfinite"));
                python
                    && (math || matches!(func.as_name(), Some("float" | "int" | "bool")))
                    && args.first().and_then(Expr::as_name).is_some_and(|n| {
                        let bound = tensors.get_or_init(|| self.tensor_names(body));
                        bound.iter().any(|(t, at): &(String, u32)| t == n && *at < before)
                            || (math && !bound.iter().any(|(t, _)| t == n) && crate::resolve::words(n).iter().any(|w| w == "loss"))
                    })
            })
        };
        stmts.iter().any(|s| {
            if let StmtKind::Assign { targets, value, .. } = &s.kind {
                if self.is_host_index(value, &indices) {
                    indices.extend(targets.iter().filter_map(Expr::as_name).map(str::to_string));
                    return false;
                }
            }
            if any_read_expr(s, &mut |x| converts_a_tensor(x, s.span.start)) {
                return true;
            }
            if !indices.is_empty() && any_read_expr(s, &mut |x| self.indexes_with_host_indices(x, &indices)) {
                return true;
            }
            let mut found = false;
            s.for_each_expr(|e| {
                found = found
                    || e.any(&mut |x| {
                        // A cheap test of the callee's last name first: the
                        // summary pass asks this of every function.
                        let ExprKind::Call { func, .. } = &x.kind else { return false };
                        let last = match &func.kind {
                            ExprKind::Attribute { attr, .. } => attr.as_str(),
                            ExprKind::Name(n) => n.as_str(),
                            _ => return false,
                        };
                        if !WAITING_CALLS.contains(&last) {
                            return last.ends_with("Tensor") && self.copies_numpy_by_cuda_type(x) || self.blocks_the_host(x);
                        }
                        matches!(self.host_read(x), Some(HostRead::Method(_) | HostRead::TryFrom(_) | HostRead::Library(_)))
                            || self.moves_blocking(x, false, &[])
                            || self.waits_for_shape(x)
                    })
            });
            found || any_read_expr(s, &mut is_mask_read)
        })
    }

    /// The names a function body binds to tensors, each with where it is
    /// bound: what a torch function returns (`loss = F.mse_loss(y_hat,
    /// x)`), and arithmetic on such a name (`loss += loss_l2 * w`). Arms
    /// of an `if` count (`if opts.l2_lambda > 0: loss_l2 = ...`): a loss
    /// summed over the terms a configuration turns on, then converted
    /// outside them (`float(loss)`), is a tensor whenever the caller can
    /// call `backward()` on it.
    fn tensor_names(&self, body: &[Stmt]) -> Vec<(String, u32)> {
        // Not the host-side helpers (`torch.cuda.device_count()`,
        // `torch.load(path)`, `torch.is_tensor(x)`).
        let returns_a_tensor = |q: &crate::resolve::QualifiedName| {
            q.starts_with_module("torch")
                && !["torch.cuda", "torch.backends", "torch.distributed", "torch.utils", "torch.hub", "torch.jit", "torch.load"]
                    .iter()
                    .any(|m| q.starts_with_module(m))
                && !q.last().starts_with("is_")
                && !q.last().starts_with("get_")
        };
        fn arithmetic_of(e: &Expr, tensors: &[(String, u32)]) -> bool {
            match &e.kind {
                ExprKind::Name(n) => tensors.iter().any(|(t, _)| t == n.as_str()),
                ExprKind::BinOp { left, right, .. } => arithmetic_of(left, tensors) || arithmetic_of(right, tensors),
                _ => false,
            }
        }
        let mut tensors: Vec<(String, u32)> = Vec::new();
        crate::ir::for_each_stmt_in_function(body, &mut |s| {
            let (targets, value): (&[Expr], &Expr) = match &s.kind {
                StmtKind::Assign { targets, value, .. } => (targets, value),
                StmtKind::AugAssign { target, value, .. } => (std::slice::from_ref(&**target), value),
                _ => return,
            };
            let made = value.as_call().and_then(|(func, _, _)| self.qualified_name(func)).is_some_and(|q| returns_a_tensor(&q))
                || (matches!(value.kind, ExprKind::BinOp { .. }) || matches!(s.kind, StmtKind::AugAssign { .. })) && arithmetic_of(value, &tensors);
            if made {
                tensors.extend(targets.iter().filter_map(Expr::as_name).map(|n| (n.to_string(), s.span.start)));
            }
        });
        tensors
    }

    /// The project function a call runs, with its summary: a project
    /// function or method ([`Context::project_callee`]), or the `forward` of
    /// an instance of a project module class that is called
    /// (`criterion(out, y)` with `criterion = SSDLoss(...)`).
    pub(super) fn called_summary(&self, call: &Expr) -> Option<&crate::index::FunctionSummary> {
        if let Some(f) = self.project_callee(call) {
            return Some(f);
        }
        let (func, _, _) = call.as_call()?;
        let class = self.instance_class(func.dotted()?.as_str())?;
        let forward = self.index.method_of(&class, "forward")?;
        self.index.function(&forward)
    }

    /// Whether evaluating `x` makes the host wait for the device without
    /// reading a value: an op whose result's size depends on the values
    /// ([`Event::ShapeFromData`]: `x.nonzero()`, `torch.unique(x)`), or a
    /// boolean mask read (`x[x > 0]`).
    pub(super) fn waits_for_shape(&self, x: &Expr) -> bool {
        if is_mask_read(x) {
            return true;
        }
        let ExprKind::Call { func, .. } = &x.kind else { return false };
        let callee = match self.qualified_name(func) {
            Some(q) => return classify(x, Callee::Library(q.as_str())) == Some(Event::ShapeFromData),
            None => match x.as_method_call() {
                Some((_, name)) => Callee::Method { name, receiver: Receiver::Tensor, receiver_is_path: false },
                None => return false,
            },
        };
        classify(x, callee) == Some(Event::ShapeFromData)
    }

    /// Whether `e` may be a tensor: one known ([`Context::is_tensor_value`])
    /// or a value of unknown kind (`self.states` of a replay buffer). A
    /// host array indexed instead is usually copied to the device next,
    /// which waits as well.
    pub(super) fn may_be_tensor(&self, e: &Expr) -> bool {
        self.is_tensor_value(e) || self.kind_of(e).is_none()
    }

    /// Whether `x` indexes a tensor (or a value of unknown kind) with
    /// indices computed on the host ([`Context::is_host_index`], `names`
    /// bound to such): PyTorch copies the indices to the tensor's device
    /// first, a blocking copy (`states[np.random.choice(n, b)]`).
    pub(super) fn indexes_with_host_indices(&self, x: &Expr, names: &[String]) -> bool {
        matches!(&x.kind, ExprKind::Subscript { value, index }
            if self.is_host_index(index, names) && !self.is_host_index(value, names) && self.may_be_tensor(value))
    }

    /// Whether `e` is indices computed on the host: `list(range(n))`, a
    /// call of `numpy.random`, `np.arange(n)`, `random.sample(...)`,
    /// `torch.randperm(n)` or `torch.randint(...)` without `device=`, one of `names` (bound to
    /// such), a slice of one (`perm[i:i + b]`), or a host tensor made of
    /// one (`torch.from_numpy(np.random.choice(n, b))`).
    pub(super) fn is_host_index(&self, e: &Expr, names: &[String]) -> bool {
        match &e.kind {
            ExprKind::Name(n) => names.iter().any(|x| x == n),
            // `x[ids0, ids1]`: one of the indices is enough for the copy.
            ExprKind::Sequence(items) => items.iter().any(|i| self.is_host_index(i, names)),
            ExprKind::Subscript { value, index } => matches!(index.kind, ExprKind::Slice { .. }) && self.is_host_index(value, names),
            ExprKind::Call { func, args, .. } => {
                // A cheap test of the callee's last name first: the summary
                // pass asks this of every assignment.
                let last = match &func.kind {
                    ExprKind::Attribute { attr, value, .. } => {
                        if value.as_name().is_some_and(|n| n == "random") || matches!(value.kind, ExprKind::Attribute { ref attr, .. } if attr == "random") {
                            ""
                        } else {
                            attr.as_str()
                        }
                    }
                    ExprKind::Name(n) => n.as_str(),
                    _ => return false,
                };
                if !matches!(last, "" | "list" | "arange" | "sample" | "randperm" | "choice" | "permutation" | "randint" | "from_numpy" | "tensor" | "as_tensor" | "LongTensor") {
                    return false;
                }
                if matches!(last, "from_numpy" | "tensor" | "as_tensor" | "LongTensor") {
                    return e.keyword("device").is_none()
                        && args.first().is_some_and(|a| self.is_host_index(a, names))
                        && self.qualified_name(func).is_some_and(|q| q.is_any(&["torch.from_numpy", "torch.tensor", "torch.as_tensor", "torch.LongTensor"]));
                }
                if func.as_name() == Some("list") {
                    return args.first().is_some_and(|a| {
                        a.as_call().is_some_and(|(f, _, _)| f.as_name() == Some("range")) || self.is_host_index(a, names)
                    });
                }
                self.qualified_name(func).is_some_and(|q| {
                    q.as_str().starts_with("numpy.random.")
                        || q.is_any(&["numpy.arange", "random.sample"])
                        || (q.is_any(&["torch.randperm", "torch.randint"]) && e.keyword("device").is_none())
                })
            }
            _ => false,
        }
    }

    /// Whether `e` copies host data to an accelerator and waits for it: a
    /// move without `non_blocking=True` of a loader's batch, of one of the
    /// `drawn` names (a loop's targets), of what `next(...)` draws from an
    /// iterator, or of a tensor a library factory builds on the host; with
    /// `any_receiver`, of whatever it moves (tch's `.to_device(device)` of
    /// a batch iterator).
    pub(super) fn moves_blocking(&self, e: &Expr, any_receiver: bool, drawn: &[String]) -> bool {
        let Some((recv, non_blocking)) = self.accelerator_move(e) else { return false };
        if non_blocking == Some(true) {
            return false;
        }
        if any_receiver || self.batch_base(recv).is_some() || self.host_built(recv) {
            return true;
        }
        // A list a helper moves item by item (`utils.cuda([imgs, z])`).
        if let ExprKind::Sequence(items) = &recv.kind {
            return items.iter().any(|i| self.batch_base(i).is_some() || self.host_built(i) || is_drawn(i, drawn));
        }
        is_drawn(recv, drawn) || (!drawn.is_empty() && self.built_from_drawn(recv, drawn))
    }

    /// Whether `e` computes a new host value from what the loop draws:
    /// arithmetic on it with constants or other drawn data (`(label -
    /// 1)`), or a call of a function that is not a model on it
    /// (`transform(tokenize(text))`, a collate step). Moving the result
    /// copies host data as moving the batch does.
    fn built_from_drawn(&self, e: &Expr, drawn: &[String]) -> bool {
        let part = |x: &Expr| is_drawn(x, drawn) || self.built_from_drawn(x, drawn);
        match &e.kind {
            ExprKind::BinOp { left, right, .. } => {
                let constant = |x: &Expr| matches!(x.kind, ExprKind::Literal(_));
                (part(left) && (constant(right) || part(right))) || (constant(left) && part(right))
            }
            ExprKind::Call { func, args, .. } => {
                matches!(func.kind, ExprKind::Name(_))
                    && !args.is_empty()
                    && args.iter().all(|a| part(a) || matches!(a.kind, ExprKind::Literal(_)))
                    && !self.is_model(func)
                    && !self.is_loss_module(func)
                    && self.project_callee(e).is_none_or(|f| !f.returns_graph)
                    // `torch.cat([g.y for g in data])`: the items joined on the host.
                    || args.first().is_some_and(|a| matches!(a.kind, ExprKind::Comprehension(_)) && part(a))
                        && self.qualified_name(func).is_some_and(|q| q.as_str().starts_with("torch."))
            }
            // `[g.y for g in data]` over the drawn batch.
            ExprKind::Comprehension(c) => c.key.is_none() && c.generators.first().is_some_and(|g| is_drawn(&g.iter, drawn)),
            _ => false,
        }
    }

    /// Whether the call `e` makes the host wait for the device without
    /// reading a value back ([`crate::api::BLOCKING_CALLS`]: a NCCL
    /// `barrier()`, a Horovod collective, apex's `amp.scale_loss`). The
    /// callee's last name is tested before it is resolved.
    pub(super) fn blocks_the_host(&self, e: &Expr) -> bool {
        let Some((func, _, _)) = e.as_call() else { return false };
        let last = match &func.kind {
            ExprKind::Attribute { attr, .. } => attr.as_str(),
            ExprKind::Name(n) => n.as_str(),
            _ => return false,
        };
        crate::api::BLOCKING_LAST_NAMES.contains(&last)
            && self.qualified_name(func).is_some_and(|q| q.is_any(crate::api::BLOCKING_CALLS))
    }

    /// Whether the call `e` builds a device tensor from host data, a
    /// blocking copy: `torch.tensor(obs, device=device)`,
    /// `torch.as_tensor(obs, device=device)`, `x.new_tensor(obs)` (on
    /// `x`'s device).
    pub(super) fn copies_host_data(&self, e: &Expr) -> bool {
        let ExprKind::Call { func, .. } = &e.kind else { return false };
        if let ExprKind::Attribute { attr, .. } = &func.kind {
            if attr.as_str() == "new_tensor" {
                return true;
            }
        }
        let to_device = e.keyword("device").is_some_and(|d| {
            !matches!(&d.kind, ExprKind::Literal(crate::ir::Literal::Str(s)) if s.as_str() == "cpu")
        });
        to_device && self.qualified_name(func).is_some_and(|q| q.is_any(&["torch.tensor", "torch.as_tensor"]))
    }

    /// Whether `e` is a tensor a library factory builds on the host
    /// (`torch.tensor(obs)`, `torch.FloatTensor(x)`, `torch.zeros(n)`),
    /// through methods that keep it there (`.float()`, `.unsqueeze(0)`).
    pub(crate) fn host_built(&self, e: &Expr) -> bool {
        self.built_on_the_host(e, &["to", "cuda", "to_device"], &|e, q| {
            // `Variable(torch.ones(n))`, `torch.cat([torch.ones(b), torch.zeros(b)])`.
            if let Some(inputs) = crate::api::computed_from(e, q) {
                return inputs.iter().all(|i| self.host_built(i));
            }
            HOST_CONSTRUCTORS.contains(&q) && e.keyword("device").is_none()
                || matches!(classify(e, Callee::Library(q)), Some(Event::Factory { device: false, .. }))
        })
    }

    /// Whether `e` is a tensor a torch factory fills on the host, given no
    /// device (`torch.rand(b, z)`, `torch.randn(b, z) * 2 - 1`,
    /// `torch.zeros(n).uniform_()`), not drawn from a seeded generator.
    pub fn is_host_factory(&self, e: &Expr) -> bool {
        self.built_on_the_host(e, &["to", "cuda", "to_device", "pin_memory"], &|e, q| {
            e.keyword(crate::api::nn::GENERATOR).is_none()
                && classify(e, Callee::Library(q)) == Some(Event::Factory { device: false, fills: true })
        })
    }

    /// Follows `e` through host arithmetic (`torch.ones(n) * i`) and
    /// methods other than `moves` (`.float()`, `.unsqueeze(0)`) to the
    /// library calls at its roots, and asks `root` of each (with its
    /// qualified name) whether it makes a tensor on the host.
    fn built_on_the_host(&self, e: &Expr, moves: &[&str], root: &dyn Fn(&Expr, &str) -> bool) -> bool {
        let mut e = e;
        loop {
            if let ExprKind::BinOp { left, right, .. } = &e.kind {
                return self.built_on_the_host(left, moves, root) || self.built_on_the_host(right, moves, root);
            }
            let ExprKind::Call { func, .. } = &e.kind else { return false };
            if let Some(q) = self.qualified_name(func) {
                return root(e, q.as_str());
            }
            match &func.kind {
                ExprKind::Attribute { value, attr, .. } if !moves.contains(&attr.as_str()) => e = value,
                _ => return false,
            }
        }
    }

    /// Whether `call` runs a project function that returns a tensor a
    /// factory filled on the host ([`crate::index::FunctionSummary::returns_host_factory`]):
    /// `create_noise(b, z)`, then `.to(device)` at the call.
    pub fn returns_host_factory(&self, call: &Expr) -> bool {
        self.project_callee(call).is_some_and(|f| f.returns_host_factory)
    }

    /// `Tensor(np.random.randint(...))` with `Tensor = torch.cuda.FloatTensor`
    /// (PyTorch-GAN's idiom): host data copied by a CUDA tensor type's
    /// constructor, a blocking copy.
    fn copies_numpy_by_cuda_type(&self, call: &Expr) -> bool {
        call.as_call().is_some_and(|(func, args, _)| {
            self.names_cuda_tensor_type(func)
                && args
                    .first()
                    .and_then(|a| a.as_call())
                    .and_then(|(f, _, _)| f.dotted())
                    .is_some_and(|d| d.as_str().starts_with("np.") || d.as_str().starts_with("numpy."))
        })
    }

    /// Records the training-step loop around `call` when `call` reads a
    /// value back to the host every step ([`Context::syncs_every_step`]).
    /// A blocking copy of a tensor built on the host (`Variable(torch.ones(b)).cuda()`,
    /// not a loader's batch) every step waits for the device too: CUDA
    /// waits for the queued kernels before a copy from pageable memory, and
    /// PyTorch for the copy after it.
    pub(super) fn note_sync(&self, call: &Expr) {
        let Some(id) = self.training_step_loop() else { return };
        if self.pipeline.borrow().synced_loops.contains(&id) {
            return;
        }
        let copies_host_built = || {
            (self.accelerator_move(call).is_some_and(|(recv, non_blocking)| {
                non_blocking != Some(true) && self.batch_base(recv).is_none() && self.host_built(recv)
            }) || self.copies_numpy_by_cuda_type(call)
                || self.waits_for_shape(call)
                || self.called_summary(call).is_some_and(|f| f.waits_for_device))
                && self.runs_every_step()
        };
        if self.syncs_every_step(call) || copies_host_built() {
            self.pipeline.borrow_mut().synced_loops.push(id);
        }
    }

    /// The same for the test of an `if` or `while` statement that reads a
    /// device tensor back to decide ([`Context::condition_read`]).
    pub(super) fn note_condition_sync(&self, test: &Expr) {
        let Some(id) = self.training_step_loop() else { return };
        if self.pipeline.borrow().synced_loops.contains(&id) || !self.runs_every_step() || self.condition_read(test).is_none() {
            return;
        }
        self.pipeline.borrow_mut().synced_loops.push(id);
    }
}
