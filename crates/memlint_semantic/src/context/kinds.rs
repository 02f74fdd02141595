//! The kinds of values: what a name, attribute or call holds (tensor,
//! parameter, module, loader, optimizer, ...) as far as the walk knows it,
//! and the kinds of a class's `self.<attr>` attributes.

use super::*;


/// `self.<attr>` assigned an `nn.Parameter` or a module anywhere in a class
/// body, with that kind; or only plain tensors, as [`ValueKind::Tensor`].
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
                    // `self.w = torch.zeros(n, requires_grad=True)`: a leaf that
                    // requires grad, a parameter of the class in all but name.
                    let leaf = value.keyword("requires_grad").is_some_and(Expr::is_true)
                        && cx.kind_of(value) == Some(ValueKind::Tensor);
                    let kind = match if leaf { Some(ValueKind::Parameter) } else { cx.kind_of(value).or_else(|| plain_variable(value, cx).then_some(ValueKind::Tensor)) } {
                        Some(k @ (ValueKind::Parameter | ValueKind::Module | ValueKind::Tensor)) => k,
                        _ => return,
                    };
                    for t in targets {
                        let Some(attr) = t.dotted().as_deref().and_then(|d| d.strip_prefix("self.")).map(str::to_string) else { continue };
                        // A plain tensor (`self.weight = Variable(torch.ones(n))`,
                        // a constant) is not a parameter, unless another
                        // assignment makes it one.
                        if kind == ValueKind::Tensor {
                            out.entry(attr).or_insert(kind);
                        } else {
                            out.insert(attr, kind);
                        }
                    }
                }
            });
        }
    }
    out
}

/// `Variable(t)` (PyTorch before 0.4) without `requires_grad=True`: a
/// tensor nothing differentiates.
fn plain_variable(value: &Expr, cx: &Context) -> bool {
    value.as_call().is_some_and(|(func, _, _)| {
        cx.qualified_name(func).is_some_and(|q| q.is_any(&["torch.autograd.Variable", "torch.autograd.variable.Variable"]))
    }) && value.keyword("requires_grad").is_none_or(Expr::is_false)
}

/// `nn.Module` methods that return the module itself.
const MODULE_SELF_METHODS: &[&str] = &[
    "cuda", "cpu", "to", "float", "half", "double", "bfloat16", "type", "train", "eval", "requires_grad_", "share_memory",
    "apply", "to_empty", "xpu", "mps",
];

/// The `self.<attr>` a class's `__init__` sets once and nothing in the
/// class sets again, each with the value `__init__` gives it; `None` when
/// the class has no `__init__`. An attribute assigned more than once (or
/// augmented) is left out.
fn set_once_by_init(body: &[Stmt]) -> Option<(&crate::ir::Function, Vec<(String, &Expr)>)> {
    let init = body.iter().find_map(|s| match &s.kind {
        StmtKind::Function(f) if f.name == "__init__" => Some(&**f),
        _ => None,
    })?;
    let mut assigned: HashMap<String, usize> = HashMap::default();
    let mut by_init: Vec<(String, &Expr)> = Vec::new();
    for s in body {
        let StmtKind::Function(f) = &s.kind else { continue };
        let is_init = std::ptr::eq(&**f, init);
        for_each_stmt_in_function(&f.body, &mut |s| {
            let (targets, value): (&[Expr], Option<&Expr>) = match &s.kind {
                StmtKind::Assign { targets, value, .. } => (targets, Some(value)),
                StmtKind::AugAssign { target, .. } => (std::slice::from_ref(target), None),
                _ => return,
            };
            for t in targets {
                let Some(attr) = t.dotted().as_deref().and_then(|d| d.strip_prefix("self.")).map(str::to_string) else { continue };
                *assigned.entry(attr.clone()).or_default() += 1;
                if let (true, Some(v)) = (is_init, value) {
                    by_init.push((attr, v));
                }
            }
        });
    }
    by_init.retain(|(a, _)| assigned.get(a) == Some(&1));
    Some((init, by_init))
}

/// The options of a class that are off by default: `self.<attr>` set in
/// `__init__` from a parameter whose default is `False` or `None`
/// (`def __init__(self, configs, individual=False): self.individual =
/// individual`) or to `False` or `None` itself (`self.stratified =
/// False`), and assigned nowhere else in the class. A branch under one
/// runs only for a caller that turns it on.
pub(super) fn off_by_default_options(body: &[Stmt]) -> HashSet<String> {
    let Some((init, set)) = set_once_by_init(body) else { return HashSet::default() };
    let off_value = |d: &Expr| matches!(d.kind, ExprKind::Literal(crate::ir::Literal::Bool(false) | crate::ir::Literal::None));
    let off_param = |n: &str| init.params.iter().any(|p| p.name == n && p.default.as_ref().is_some_and(off_value));
    set.into_iter().filter(|(_, v)| off_value(v) || v.as_name().is_some_and(off_param)).map(|(a, _)| a).collect()
}

/// The attributes a class's `__init__` sets from one of its flag
/// parameters (default `True` or `False`) and nothing sets again: `self.ln
/// = ln` with `def __init__(self, model, ln=True)`, attribute to parameter.
pub(super) fn flag_options(body: &[Stmt]) -> HashMap<String, String> {
    let is_flag = |p: &crate::ir::Param| p.default.as_ref().is_some_and(|d| matches!(d.kind, ExprKind::Literal(crate::ir::Literal::Bool(_))));
    // Most classes have no flag parameter: nothing to scan.
    let has_flag = body.iter().any(|s| matches!(&s.kind, StmtKind::Function(f) if f.name == "__init__" && f.params.iter().any(is_flag)));
    if !has_flag {
        return HashMap::default();
    }
    let Some((init, set)) = set_once_by_init(body) else { return HashMap::default() };
    set.into_iter()
        .filter_map(|(a, v)| {
            let n = v.as_name()?;
            init.params.iter().any(|p| p.name == n && is_flag(p)).then(|| (a, n.to_string()))
        })
        .collect()
}

/// A class's accessor methods: `def m(self)` whose every return gives
/// `self.<attr>` or, for a wrapped model, `self.<attr>.module` (`def
/// getOriginalG(self): if isinstance(self.netG, nn.DataParallel): return
/// self.netG.module; return self.netG`), the same attribute each time. A
/// call `self.m()` reaches the attribute's parameters.
pub(super) fn self_accessors(body: &[Stmt]) -> HashMap<String, String> {
    let mut out = HashMap::default();
    for s in body {
        let StmtKind::Function(f) = &s.kind else { continue };
        if f.params.len() != 1 {
            continue;
        }
        let mut attr: Option<String> = None;
        let mut ok = true;
        for_each_stmt_in_function(&f.body, &mut |s| {
            let StmtKind::Return(value) = &s.kind else { return };
            let returned = value.as_ref().and_then(|v| v.dotted()).and_then(|d| {
                let d = d.strip_prefix("self.")?;
                let d = d.strip_suffix(".module").unwrap_or(d);
                (!d.is_empty() && !d.contains('.')).then(|| d.to_string())
            });
            match (returned, &attr) {
                (Some(r), None) => attr = Some(r),
                (Some(r), Some(a)) if r == *a => {}
                _ => ok = false,
            }
        });
        if let (true, Some(a)) = (ok, attr) {
            out.insert(f.name.to_string(), a);
        }
    }
    out
}

/// Per class: `self.<attr>` frozen in any method, `self.<attr>`
/// assigned an instance of a project class, and `self.<attr>` assigned a
/// `torch.nn` layer (by its class name).
pub(super) fn class_attr_facts(
    body: &[Stmt],
    cx: &Context,
) -> ClassAttrFacts {
    let mut frozen = HashSet::default();
    let mut instances: HashMap<String, String> = HashMap::default();
    let mut alternatives: HashMap<String, Vec<String>> = HashMap::default();
    let mut layers = HashMap::default();
    // The class of the modules an `nn.ModuleList` attribute holds
    // (`self.cells = nn.ModuleList([Cell(...) for _ in range(n)])`,
    // `self.cells.append(Cell(...))`), kept as `cells[]`.
    let element_class = |e: &Expr| -> Option<String> {
        let elt = match &e.kind {
            ExprKind::Comprehension(c) => &c.elt,
            ExprKind::Sequence(items) => items.first()?,
            _ => e,
        };
        cx.instance_class_of_call(elt.as_call()?.0)
    };
    for s in body {
        if let StmtKind::Function(f) = &s.kind {
            for_each_stmt_in_function(&f.body, &mut |s| match &s.kind {
                StmtKind::Expr(e) if e.as_method_call().is_some_and(|(_, m)| m == "append") => {
                    let Some((recv, _)) = e.as_method_call() else { return };
                    let arg = e.as_call().and_then(|(_, args, _)| args.first());
                    if let (Some(attr), Some(class)) = (recv.dotted().as_deref().and_then(|d| d.strip_prefix("self.")), arg.and_then(element_class)) {
                        instances.entry(format!("{attr}[]")).or_insert(class);
                    }
                }
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
                    // `M(0.5).to(device)`, `nn.MSELoss().cuda()`: what is moved.
                    let mut value: &Expr = value;
                    while let Some((recv, _)) = value.as_method_call().filter(|(_, m)| crate::api::nn::SAME_MODULE_METHODS.contains(m)) {
                        value = recv;
                    }
                    if let Some((func, _, _)) = value.as_call() {
                        if let Some(class) = cx.instance_class_of_call(func) {
                            for t in targets {
                                if let Some(attr) = t.dotted().as_deref().and_then(|d| d.strip_prefix("self.")) {
                                    if let Some(before) = instances.insert(attr.to_string(), class.clone()).filter(|b| *b != class) {
                                        let all = alternatives.entry(attr.to_string()).or_default();
                                        for c in [before, class.clone()] {
                                            if !all.contains(&c) {
                                                all.push(c);
                                            }
                                        }
                                    }
                                }
                            }
                        } else if let Some(factory) = cx.factory_of_call(func) {
                            for t in targets {
                                if let Some(attr) = t.dotted().as_deref().and_then(|d| d.strip_prefix("self.")) {
                                    instances.entry(attr.to_string()).or_insert_with(|| factory.clone());
                                }
                            }
                        } else if let Some(q) = cx.qualified_name(func).filter(|q| q.starts_with_module(crate::api::nn::NN)) {
                            let elements = if q.last() == "ModuleList" { value.as_call().and_then(|(_, args, _)| args.first()).and_then(element_class) } else { None };
                            for t in targets {
                                if let Some(attr) = t.dotted().as_deref().and_then(|d| d.strip_prefix("self.")) {
                                    layers.insert(attr.to_string(), q.last().to_string());
                                    if let Some(class) = &elements {
                                        instances.insert(format!("{attr}[]"), class.clone());
                                    }
                                }
                            }
                        }
                    }
                }
                _ => {}
            });
        }
    }
    // Which arm of a configuration test built each class (`if
    // config.stochastic: self.dp = A(...) else: self.dp = B(...)`).
    let mut alternatives: HashMap<String, Vec<(String, Option<OptionArm>)>> =
        alternatives.into_iter().map(|(attr, classes)| (attr, classes.into_iter().map(|c| (c, None)).collect())).collect();
    if !alternatives.is_empty() {
        for s in body {
            let StmtKind::Function(f) = &s.kind else { continue };
            for_each_under_option(&f.body, None, &mut |s, arm| {
                let (Some(arm), StmtKind::Assign { targets, value, .. }) = (arm, &s.kind) else { return };
                let Some(class) = value.as_call().and_then(|(func, _, _)| cx.instance_class_of_call(func)) else { return };
                for t in targets {
                    let Some(attr) = t.dotted().as_deref().and_then(|d| d.strip_prefix("self.")).map(str::to_string) else { continue };
                    if let Some(entry) = alternatives.get_mut(&attr).and_then(|all| all.iter_mut().find(|(c, _)| *c == class)) {
                        entry.1 = Some(arm.clone());
                    }
                }
            });
        }
    }
    ClassAttrFacts { frozen, instances, alternatives, layers }
}

/// What a class's methods assign to its attributes
/// ([`class_attr_facts`]).
pub(super) struct ClassAttrFacts {
    /// Attributes frozen (`self.enc.requires_grad_(False)`).
    pub frozen: HashSet<String>,
    /// The project class of the instance each attribute holds (the last
    /// assigned, when several are).
    pub instances: HashMap<String, String>,
    /// Attributes assigned instances of several project classes (`if
    /// config.stochastic: self.dp = A(config) else: self.dp = B(config)`):
    /// every class, in order, each with the configuration test arm that
    /// builds it when there is one.
    pub alternatives: HashMap<String, Vec<(String, Option<OptionArm>)>>,
    /// The `torch.nn` layer class each attribute holds (`self.fc =
    /// nn.Linear(...)`: `Linear`).
    pub layers: HashMap<String, String>,
}

/// Whether a class is a module that owns no parameters: its only base is
/// `torch.nn.Module`, and no method assigns `self.<attr>` anything but
/// plain values (literals, arithmetic, a parameter of the method with a
/// literal default, what a torch function outside `torch.nn` returns) or
/// calls a method of `self` other than `register_buffer`, nothing in it
/// builds a `torch.nn` layer or parameter, and its `__init__` registers a
/// buffer (`Audio2Mel`: a window and a mel basis kept as buffers).
pub(crate) fn holds_no_parameters(bases: &[String], body: &[Stmt], cx: &Context) -> bool {
    if bases.len() != 1 || bases[0] != "torch.nn.Module" {
        return false;
    }
    let torch_nn = |q: &crate::resolve::QualifiedName| q.starts_with_module("torch.nn") && !q.starts_with_module("torch.nn.functional");
    // It keeps buffers: a class with no `__init__` of its own, or one
    // whose `__init__` is a `# TODO` (an exercise's skeleton), is a model
    // left to write.
    // Or plain settings: `self.threshold = threshold` (a metric module;
    // the parameter's default a literal, as `plain_value` asks below).
    let keeps_buffers = body.iter().any(|s| {
        matches!(&s.kind, StmtKind::Function(f) if f.name == "__init__" && f.body.iter().any(|s| match &s.kind {
            StmtKind::Expr(e) => e.as_method_call().is_some_and(|(recv, m)| recv.as_name() == Some("self") && m == "register_buffer"),
            StmtKind::Assign { targets, .. } => targets.iter().any(|t| t.dotted().is_some_and(|d| d.starts_with("self."))),
            _ => false,
        }))
    });
    let mut plain = keeps_buffers;
    for s in body {
        let StmtKind::Function(f) = &s.kind else { continue };
        let init = f.name == "__init__";
        let literal_default = |n: &str| {
            f.params.iter().any(|p| p.name == n && p.default.as_ref().is_some_and(|d| matches!(d.kind, ExprKind::Literal(_))))
        };
        fn plain_value(e: &Expr, cx: &Context, literal_default: &dyn Fn(&str) -> bool) -> bool {
            match &e.kind {
                ExprKind::Literal(_) => true,
                ExprKind::Name(n) => literal_default(n),
                ExprKind::Attribute { .. } => e.dotted().is_some_and(|d| d.starts_with("self.")),
                ExprKind::BinOp { left, right, .. } => plain_value(left, cx, literal_default) && plain_value(right, cx, literal_default),
                ExprKind::Unary { operand, .. } => plain_value(operand, cx, literal_default),
                // Not a leaf that requires grad (`torch.randn(d,
                // requires_grad=True)`): a forward would record a graph.
                ExprKind::Call { func, .. } => {
                    cx.qualified_name(func).is_some_and(|q| q.starts_with_module("torch")) && !e.keyword("requires_grad").is_some_and(Expr::is_true)
                }
                _ => false,
            }
        }
        for_each_stmt_in_function(&f.body, &mut |s| {
            if !plain {
                return;
            }
            s.for_each_expr(|e| {
                plain = plain
                    && !e.any(&mut |x| {
                        let Some((func, _, _)) = x.as_call() else { return false };
                        // `self.add_module(...)`, `self.build()`, a project
                        // factory: they may make layers.
                        let on_self = matches!(&func.kind, ExprKind::Attribute { value, attr, .. }
                            if value.as_name() == Some("self") && attr.as_str() != "register_buffer");
                        cx.qualified_name(func).is_some_and(|q| torch_nn(&q)) || (init && (on_self || cx.project_name(func).is_some()))
                    });
            });
            if let (true, StmtKind::Assign { targets, value, .. }) = (init, &s.kind) {
                if targets.iter().any(|t| t.dotted().is_some_and(|d| d.starts_with("self."))) {
                    plain = plain && plain_value(value, cx, &literal_default);
                }
            }
        });
    }
    plain
}

/// An arm of a test of a configuration option: the option as read
/// without `self.` (`config.stochastic` for `self.config.stochastic`) and
/// whether the option holds there (`false` in the `else` arm, or under
/// `not`).
pub(crate) type OptionArm = (String, bool);

/// Per class, its attributes that hold one of several project classes
/// ([`ClassAttrFacts::alternatives`]).
pub(super) type ClassAlternatives = HashMap<String, HashMap<String, Vec<(String, Option<OptionArm>)>>>;

/// The option an `if` tests, `config.stochastic` for `if
/// self.config.stochastic:` or `if not config.stochastic:`, and whether
/// its body runs when the option holds.
fn option_test(test: &Expr) -> Option<OptionArm> {
    match &test.kind {
        ExprKind::Unary { op: crate::ir::UnaryOp::Not, operand } => option_test(operand).map(|(o, holds)| (o, !holds)),
        ExprKind::Attribute { .. } | ExprKind::Name(_) => {
            let d = test.dotted()?;
            Some((d.strip_prefix("self.").unwrap_or(&d).to_string(), true))
        }
        _ => None,
    }
}

/// Records, by each call's start, the configuration test arm
/// ([`OptionArm`]) every `self.<attr>(...)` call of a method body is
/// under.
pub(crate) fn self_calls_under_options(body: &[Stmt], out: &mut HashMap<u32, OptionArm>) {
    fn calls_of_self(e: &Expr, arm: &OptionArm, out: &mut HashMap<u32, OptionArm>) {
        if let ExprKind::Call { func, .. } = &e.kind {
            if matches!(&func.kind, ExprKind::Attribute { value, .. } if value.as_name() == Some("self")) {
                out.insert(func.span.start, arm.clone());
            }
        }
        e.for_each_child(|c| calls_of_self(c, arm, out));
    }
    for_each_under_option(body, None, &mut |s, arm| {
        if let (Some(arm), false) = (arm, matches!(s.kind, StmtKind::Function(_) | StmtKind::Class(_))) {
            s.for_each_expr(|e| calls_of_self(e, arm, out));
        }
    });
}

/// Visits every statement of a function body (not nested definitions)
/// with the innermost configuration test arm it is under
/// ([`OptionArm`]), `None` outside any.
fn for_each_under_option<'a>(body: &'a [Stmt], arm: Option<&OptionArm>, f: &mut dyn FnMut(&'a Stmt, Option<&OptionArm>)) {
    for s in body {
        f(s, arm);
        match &s.kind {
            StmtKind::Function(_) | StmtKind::Class(_) => {}
            StmtKind::If { test, body, orelse } => match option_test(test) {
                Some((option, holds)) => {
                    for_each_under_option(body, Some(&(option.clone(), holds)), f);
                    for_each_under_option(orelse, Some(&(option, !holds)), f);
                }
                None => s.child_blocks().for_each(|b| for_each_under_option(b, arm, f)),
            },
            _ => s.child_blocks().for_each(|b| for_each_under_option(b, arm, f)),
        }
    }
}

impl Context {
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
                    if matches!(attr.as_str(), "weight" | "bias")
                        && !self.is_imported_path(expr)
                        && self.is_module_path(value)
                        && !self.from_scratch_attr(value, attr)
                    {
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
                // `torch.autograd.grad(y, x)[0]`: one of the gradients.
                _ if self.callee_name(value).is_some_and(|q| q.is("torch.autograd.grad")) => Some(ValueKind::Tensor),
                _ => None,
            },
            ExprKind::BinOp { left, right, .. } => {
                if self.is_tensor(left) || self.is_tensor(right) {
                    Some(ValueKind::Tensor)
                } else {
                    None
                }
            }
            // `nn.Parameter(t, requires_grad=False)`: a buffer kept with
            // the module's parameters, a tensor nothing differentiates.
            // `copy.deepcopy(model)`: another module (an EMA copy, a target network).
            ExprKind::Call { func, args, .. }
                if self.qualified_name(func).is_some_and(|q| q.is(crate::api::nn::COPY_DEEPCOPY))
                    && args.first().is_some_and(|a| self.kind_of(a) == Some(ValueKind::Module)) =>
            {
                Some(ValueKind::Module)
            }
            ExprKind::Call { func, .. } => match self.kind_of_call(func) {
                Some(ValueKind::Parameter) if expr.keyword("requires_grad").is_some_and(Expr::is_false) => Some(ValueKind::Tensor),
                k => k,
            },
            _ => None,
        }
    }

    /// What an instance of the project class `q` is: a module, an
    /// optimizer, or another object; `None` when the run defines no such
    /// class.
    fn class_kind(&self, q: &str) -> Option<ValueKind> {
        Some(match self.index.class_is_module(q)? {
            true => ValueKind::Module,
            false if self.index.class_is_optimizer(q) => ValueKind::Optimizer,
            false => ValueKind::Object,
        })
    }

    pub(super) fn kind_of_call(&self, func: &Expr) -> Option<ValueKind> {
        if let Some(q) = self.qualified_name(func) {
            let s = q.as_str();
            if q.is_any(crate::api::nn::PARAMETER_CLASSES) {
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
            // `torch.autograd.grad(...)`: a tuple of gradients, each a
            // tensor of its own (`g[1]` picks one; it is no view).
            if q.is("torch.autograd.grad") {
                return None;
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
            // tch: `Tensor::randn(...)`, `Tensor::cat(...)`, `Tensor::from_slice(...)`.
            if s.strip_prefix("tch.Tensor.").is_some_and(|f| f.starts_with(|c: char| c.is_ascii_lowercase())) {
                return Some(ValueKind::Tensor);
            }
            if s == "argparse.ArgumentParser" {
                return Some(ValueKind::NonTensor);
            }
            // A Hugging Face pipeline runs its model under `no_grad` itself:
            // calling it is no forward with autograd on.
            if matches!(s, "transformers.pipeline" | "transformers.pipelines.pipeline") {
                return Some(ValueKind::Object);
            }
            return self.class_kind(s);
        }
        match &func.kind {
            ExprKind::Name(n) if self.module_classes.contains(n.as_str()) && !self.is_shadowed_locally(n) => Some(ValueKind::Module),
            ExprKind::Name(_) | ExprKind::Attribute { .. } if self.project_class_of_call(func).is_some() => {
                let class = self.project_class_of_call(func)?;
                self.class_kind(&class)
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
                    Some(ValueKind::Module) if crate::api::nn::is_forward_method(attr) => Some(ValueKind::Output),
                    // `G = G.cuda()`, `model.to(device).eval()`: the same
                    // module, moved, cast or switched.
                    Some(ValueKind::Module) if MODULE_SELF_METHODS.contains(&attr.as_str()) => Some(ValueKind::Module),
                    _ => (crate::api::nn::is_forward_method(attr) && self.is_model(value)).then_some(ValueKind::Output),
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
}

/// What `__init__` binds to its parameters as given (`self.model = model`)
/// ([`crate::index::ClassSummary::init_param_attrs`]).
pub(crate) fn init_param_attrs(body: &[Stmt]) -> Vec<(String, usize, String)> {
    let Some(init) = body.iter().find_map(|s| match &s.kind {
        StmtKind::Function(f) if f.name == "__init__" => Some(f),
        _ => None,
    }) else {
        return Vec::new();
    };
    let params: Vec<&str> = init.params.iter().skip(1).map(|p| p.name.as_str()).collect();
    let mut out = Vec::new();
    for s in &init.body {
        let StmtKind::Assign { targets, value, .. } = &s.kind else { continue };
        // `self.model = model`, `self.model, self.opt = model, opt`.
        let pairs: Vec<(&Expr, &Expr)> = match (&targets[..], &value.kind) {
            ([t], _) if value.as_name().is_some() => vec![(t, &**value)],
            ([t], ExprKind::Sequence(values)) => match &t.kind {
                ExprKind::Sequence(ts) if ts.len() == values.len() => ts.iter().zip(values.iter()).collect(),
                _ => continue,
            },
            _ => continue,
        };
        for (t, v) in pairs {
            let Some(n) = v.as_name() else { continue };
            if let (Some(i), Some(attr)) = (params.iter().position(|p| *p == n), t.dotted().as_deref().and_then(|d| d.strip_prefix("self."))) {
                out.push((attr.to_string(), i, n.to_string()));
            }
        }
    }
    if out.is_empty() {
        return out;
    }
    // Only attributes some method calls (`self.model(x)`,
    // `self.model.encode(x)`): a configuration class keeps dozens of
    // values no call reads.
    let mut called: Vec<String> = Vec::new();
    for m in body {
        let StmtKind::Function(f) = &m.kind else { continue };
        crate::ir::for_each_expr_in_function(&f.body, &mut |e| {
            let Some((func, _, _)) = e.as_call() else { return };
            let mut root = func;
            while let ExprKind::Attribute { value, attr, .. } = &root.kind {
                if value.as_name() == Some("self") {
                    if !called.iter().any(|c| c == attr.as_str()) {
                        called.push(attr.to_string());
                    }
                    break;
                }
                root = value;
            }
        });
    }
    out.retain(|(attr, _, _)| called.iter().any(|c| c == attr));
    out
}
