//! What values are: kinds of bindings and expressions (tensor, parameter,
//! module, loader, ...), requires-grad leaves, values that carry an autograd
//! graph or are saved for backward, views, and the class attributes they
//! come from.

use super::*;

impl Context {
    /// The known kind of a binding (`x`, `self.w`) in the current function.
    pub fn kind_of_binding(&self, dotted: &str) -> Option<ValueKind> {
        if let Some(b) = self.comp_binding(dotted) {
            return if b.name.len() == dotted.len() { b.kind } else { None };
        }
        self.frame()
            .kinds
            .get(dotted)
            .copied()
            .or_else(|| dotted.strip_prefix("self.").and_then(|attr| self.class_attr(attr)))
            .or_else(|| self.module_level(dotted, |f| f.kinds.get(dotted).copied()))
    }

    /// `get` of the scope that binds `dotted`'s root for the current
    /// function, when that is not the function itself: the innermost
    /// enclosing function that binds it (a closure sees its enclosing
    /// function's locals), else the module. `None` when the function binds
    /// the root itself (its facts are the current frame's), for `self`,
    /// and at the module level.
    pub(super) fn module_level<T>(&self, dotted: &str, get: impl Fn(&Frame) -> Option<T>) -> Option<T> {
        let n = self.frames.len();
        if n < 2 {
            return None;
        }
        let root = dotted.split('.').next().unwrap_or(dotted);
        if root == "self" {
            return None;
        }
        let binds = |f: &Frame| {
            f.locals.as_ref().is_some_and(|l| l.binary_search_by(|x| x.as_str().cmp(root)).is_ok())
                || f.params.contains(root)
                || f.kinds.contains_key(root)
                || f.imports.contains_key(root)
        };
        if binds(&self.frames[n - 1]) {
            return None;
        }
        // Enclosing functions, innermost first; class bodies are not
        // scopes their methods see.
        for f in self.frames[1..n - 1].iter().rev().filter(|f| !f.is_class) {
            if binds(f) {
                return get(f);
            }
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
        if let Some(b) = self.comp_binding(dotted) {
            return b.requires_grad && b.name.len() == dotted.len();
        }
        let f = self.frame();
        if f.grad_off.contains(dotted) {
            return false;
        }
        if f.requires_grad.contains(dotted) {
            return true;
        }
        if self.module_level(dotted, |m| m.requires_grad.contains(dotted).then_some(())).is_some() {
            return true;
        }
        // `self.mean = torch.randn(3, d)` earlier in this function: until
        // `self.mean = nn.Parameter(self.mean)`, a plain tensor, whatever
        // the class makes of the attribute later.
        if f.kinds.contains_key(dotted) {
            return false;
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
    pub(super) fn class_attr(&self, attr: &str) -> Option<ValueKind> {
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
                // `self.act(h)` with `self.act = nn.Sigmoid()`: the layer's
                // op, on its input alone (a layer's weight is implicit).
                if let Some(op) = self.layer_of(func).and_then(|class| crate::api::nn::layer_op(&class)) {
                    if self.is_frozen(&func.dotted().unwrap_or_default()) {
                        return None;
                    }
                    return Some((op, args.iter().take(1).collect()));
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

    /// The comprehension binding of `dotted`'s root, when a comprehension
    /// around the expression being visited binds it.
    pub(super) fn comp_binding(&self, dotted: &str) -> Option<CompBinding> {
        let scope = self.comp_scope.borrow();
        if scope.is_empty() {
            return None;
        }
        let root = dotted.split('.').next().unwrap_or(dotted);
        scope.iter().rev().find(|b| b.name == root).cloned()
    }

    /// The bindings a comprehension's generators make (see [`CompBinding`]).
    pub(super) fn comp_bindings(&self, c: &crate::ir::Comprehension) -> Vec<CompBinding> {
        let mut out = Vec::new();
        for g in &c.generators {
            let mut names = Vec::new();
            collect_target_names(&g.target, &mut names);
            let inner = unwrap_iter_call(&g.iter);
            let params = is_parameter_iterable(&g.iter) && !matches!(inner.as_method_call(), Some((_, "named_parameters")));
            let named = matches!(inner.as_method_call(), Some((_, "named_parameters")));
            // Over data, or over the parts of a batch (`for k, v in batch.items()`).
            let batch_parts = match inner.as_method_call() {
                Some((recv, "items" | "values")) => self.is_batch_value(recv),
                _ => self.is_batch_value(inner),
            };
            let data = !params && !named && (self.is_data_iterable(&g.iter) || batch_parts);
            let loader = if !data {
                None
            } else if batch_parts {
                match inner.as_method_call() {
                    Some((recv, "items" | "values")) => self.batch_loader_of(recv),
                    _ => self.batch_loader_of(inner),
                }
            } else {
                inner.dotted().map(|d| d.to_string())
            };
            let param_name = match (&g.target.kind, named) {
                (ExprKind::Sequence(elts), true) => elts.get(1).and_then(|e| e.as_name()).map(str::to_string),
                (_, false) if params => g.target.as_name().map(str::to_string),
                _ => None,
            };
            // The counter of `enumerate(loader)` is not a batch.
            let mut batch_names = Vec::new();
            if data {
                collect_target_names(super::loops::batch_target(&g.target, &g.iter), &mut batch_names);
            }
            for n in names {
                let is_param = param_name.as_deref() == Some(n.as_str());
                out.push(CompBinding {
                    kind: if is_param { Some(ValueKind::Parameter) } else { None },
                    requires_grad: is_param,
                    batch: batch_names.contains(&n),
                    loader: loader.clone(),
                    name: n,
                });
            }
        }
        out
    }

    /// The `torch.nn` layer class `self.<attr>` was assigned in its class
    /// (`self.act = nn.Sigmoid()` -> `Sigmoid`).
    pub fn layer_of(&self, func: &Expr) -> Option<String> {
        self.self_attr_layer(&func.dotted()?).cloned()
    }

    /// [`Context::layer_of`] of a dotted path (`self.loss` -> `CrossEntropyLoss`).
    fn self_attr_layer(&self, dotted: &str) -> Option<&String> {
        let attr = dotted.strip_prefix("self.")?;
        if attr.contains('.') {
            return None;
        }
        self.class_layers.get(self.current_class()?)?.get(attr)
    }

    /// What `value` saves of the tensor `dotted` for backward, by the span
    /// of the op that saves it: `x += self.conv(x)` saves `x` before the
    /// addition writes into it.
    pub fn saves_in(&self, value: &Expr, dotted: &str) -> Option<memlint_diagnostics::Span> {
        self.saved_by(value).into_iter().find(|(name, _, output)| !output && name == dotted).map(|(_, span, _)| span)
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
    pub(super) fn saved_by(&self, v: &Expr) -> Vec<(String, memlint_diagnostics::Span, bool)> {
        use crate::api::{saved_for_backward, Saves};
        let mut out = Vec::new();
        // A cheap look at the spelling first: most values apply no op of the table.
        let named_op = |name: &str| crate::api::SAVED_FOR_BACKWARD.iter().any(|(n, s)| *n == name && *s != Saves::Nothing);
        let may_save = v.any(&mut |x| match &x.kind {
            ExprKind::BinOp { op, .. } => {
                matches!(op, crate::ir::BinOp::Mult | crate::ir::BinOp::Div | crate::ir::BinOp::MatMult | crate::ir::BinOp::Pow)
            }
            ExprKind::Call { func, .. } => match &func.kind {
                ExprKind::Attribute { attr, .. } => named_op(attr) || self.layer_of(func).is_some(),
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
                // A layer's call (`self.conv(x)`): its weight requires grad,
                // so the input is saved.
                Some(Saves::Inputs) if operands.len() == 1 => save(operands[0]),
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
    pub(super) fn backward_may_follow(&self) -> bool {
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

    /// Whether the last segment of a callee is named like a model (`model`,
    /// `self.net_g`, `encoder`): a cheap test before [`Context::is_model`].
    pub(crate) fn named_like_model(last: &str) -> bool {
        let ends_with = |suffix: &str| {
            last.len() >= suffix.len() && last.as_bytes()[last.len() - suffix.len()..].eq_ignore_ascii_case(suffix.as_bytes())
        };
        MODEL_SUFFIXES.iter().any(|s| ends_with(s)) || last.eq_ignore_ascii_case("net_g") || last.eq_ignore_ascii_case("net_d")
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
        // A CamelCase name is a class, even one passed in as a parameter
        // annotated `nn.Module` (`def evaluate(Model: nn.Module): m =
        // Model(envs)`): calling it constructs a model, it runs none.
        // A local bound to a module (`NSA_Layer = Attention(args).cuda()`)
        // is one, whatever its case.
        if !dotted.contains('.')
            && dotted.starts_with(|c: char| c.is_ascii_uppercase())
            && dotted.chars().any(|c| c.is_ascii_lowercase())
        {
            return !self.is_function_param(&dotted) && self.frame().kinds.get(dotted.as_str()) == Some(&ValueKind::Module);
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
        let mut ws = crate::resolve::word_slices(last);
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
        if self.frame().grad_off.contains(dotted) {
            return false;
        }
        // `fused.weight` of a module frozen whole (`fused =
        // nn.Conv2d(...).requires_grad_(False)`): no leaf that requires grad.
        let mut owner = dotted;
        while let Some((o, _)) = owner.rsplit_once('.') {
            if self.is_frozen(o) {
                return false;
            }
            owner = o;
        }
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
        self.qualified_name(&e).is_none() && self.is_module_path(&e) && !self.from_scratch_attr(&e, attr)
    }

    /// `model.bias` where `model` is a model by its name only, and every
    /// class of the file walked so far that binds `self.bias` binds a plain
    /// tensor (`self.bias = torch.zeros(1)`: a model written from scratch,
    /// trained by hand-computed gradients): no parameter.
    pub(super) fn from_scratch_attr(&self, owner: &Expr, attr: &str) -> bool {
        if self.kind_of(owner) == Some(ValueKind::Module) {
            return false;
        }
        let mut bound = false;
        for attrs in self.class_params.values() {
            match attrs.get(attr) {
                Some(ValueKind::Tensor) => bound = true,
                Some(_) => return false,
                None => {}
            }
        }
        bound
    }

    /// Whether `expr` is a loss module (`criterion`, `loss_fn`, an
    /// `nn.*Loss()` instance).
    pub fn is_loss_module(&self, expr: &Expr) -> bool {
        expr.dotted().is_some_and(|d| self.is_loss_path(&d))
    }

    /// [`Context::is_loss_module`] of a dotted path.
    pub(super) fn is_loss_path(&self, dotted: &str) -> bool {
        let last = dotted.rsplit('.').next().unwrap_or(dotted);
        LOSS_NAMES.iter().any(|n| last.eq_ignore_ascii_case(n))
            || self.frame().losses.contains(dotted)
            || self.module_level(dotted, |f| f.losses.contains(dotted).then_some(())).is_some()
            || self.self_attr_layer(dotted).is_some_and(|l| l.ends_with("Loss"))
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

    pub(super) fn carries_graph_inner(&self, expr: &Expr) -> bool {
        match &expr.kind {
            ExprKind::Name(_) | ExprKind::Attribute { .. } => {
                let Some(d) = expr.dotted() else { return false };
                if self.comp_binding(&d).is_some() {
                    return false;
                }
                if self.frame().graph.contains(d.as_str()) {
                    return true;
                }
                // `out.logits` of a graph-carrying `out`.
                if let ExprKind::Attribute { value, attr, .. } = &expr.kind {
                    return !matches!(attr.as_str(), "data" | "shape" | "grad" | "indices") && self.carries_graph_inner(value);
                }
                false
            }
            // `torch.max(x, dim)[1]`, `x.topk(k)[1]`: the indices of a
            // (values, indices) result carry no history.
            ExprKind::Subscript { value, index, .. } => {
                !(matches!(index.kind, ExprKind::Literal(crate::ir::Literal::Int(1))) && returns_values_and_indices(value))
                    && self.carries_graph_inner(value)
            }
            ExprKind::BinOp { left, right, .. } => self.builds_graph(left) || self.builds_graph(right),
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
                        if crate::api::nn::is_forward_method(attr) && self.is_model(value) {
                            return true;
                        }
                        return self.builds_graph(value);
                    }
                }
                if let ExprKind::Name(n) = &func.kind {
                    if self.lookup_import(n).is_none() && SCALAR_BUILTINS.contains(&n.as_str()) {
                        return false;
                    }
                }
                if let Some(q) = self.qualified_name(func) {
                    if q.starts_with_module("torch") {
                        // `torch.eq(pred, y)`, `torch.argmax(out, 1)`: bool
                        // and integer results carry no history.
                        if DETACHING_METHODS.contains(&q.last()) || crate::api::INTEGER_RESULT_FUNCTIONS.contains(&q.last()) {
                            return false;
                        }
                        return args.iter().chain(keywords.iter().map(|k| &k.value)).any(|a| self.carries_graph_inner(a));
                    }
                    return false;
                }
                self.is_model(func) || self.is_loss_module(func)
            }
            _ => false,
        }
    }

    /// Whether an op with `operand` records a graph: the operand carries
    /// one, or is a leaf that requires grad (`w` of `(x * w).sum()`, `&w`
    /// in Rust), whose ops autograd records.
    fn builds_graph(&self, operand: &Expr) -> bool {
        let mut e = operand;
        while let ExprKind::Unary { op: crate::ir::UnaryOp::Ref | crate::ir::UnaryOp::RefMut, operand } = &e.kind {
            e = operand;
        }
        self.carries_graph_inner(e) || e.dotted().is_some_and(|d| self.is_requires_grad_leaf(&d))
    }

    /// Whether a `with` context expression disables grad (`Some(false)`),
    /// enables it (`Some(true)`), or is unrelated (`None`). An undecidable
    /// mode (`set_grad_enabled(flag)`) yields `Some(false)`.
    pub(super) fn grad_mode_of_context(&self, ctx: &Expr) -> Option<Option<bool>> {
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
    pub(super) fn context_callee(&self, callee: &Expr) -> Option<String> {
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

    /// The class whose instance a call makes, for resolving the methods
    /// later called on it: [`Context::project_class_of_call`], and in the
    /// summary walk, before the index exists, a project name called like a
    /// class (`model = VisionTransformer(cfg)`, CamelCase), so that
    /// `model.load_from(w)` is recorded as a call of
    /// `VisionTransformer.load_from`, which the index resolves.
    pub(crate) fn instance_class_of_call(&self, func: &Expr) -> Option<String> {
        // `Encoder.from_pretrained(path)`, `Vision._from_config(cfg)`: a
        // class method that builds an instance of its class.
        let func = match &func.kind {
            ExprKind::Attribute { value, attr, .. } if crate::api::nn::ALTERNATE_CONSTRUCTORS.contains(&attr.as_str()) => value,
            _ => func,
        };
        if !(self.index.is_empty() && self.options.summary_only) {
            return self.project_class_of_call(func);
        }
        let q = self.project_name(func)?;
        let last = q.rsplit('.').next()?;
        last.starts_with(|c: char| c.is_ascii_uppercase()).then_some(q)
    }

    /// In the summary walk, a call of a project function that may build
    /// the instance an attribute holds (`self.embedding =
    /// get_embedding_module(kind, ...)`, not CamelCase): the function's
    /// name followed by `()`. A method called on the attribute is then
    /// recorded as `get_embedding_module().compute_embedding`, which the
    /// index follows to each class the function returns
    /// ([`crate::index::FileSummary::factories`]).
    pub(crate) fn factory_of_call(&self, func: &Expr) -> Option<String> {
        if !(self.index.is_empty() && self.options.summary_only) {
            return None;
        }
        let q = self.project_name(func)?;
        let last = q.rsplit('.').next()?;
        (!last.starts_with(|c: char| c.is_ascii_uppercase())).then(|| format!("{q}()"))
    }

    /// Whether a decorator disables grad for the whole function.
    pub fn is_no_grad_decorator(&self, dec: &Expr) -> bool {
        matches!(self.grad_mode_of_context(dec), Some(Some(false)) | Some(None))
    }

    // ----- walk ----------------------------------------------------------

}

/// Whether the call `e` returns a `(values, indices)` pair: `sort`,
/// `topk`, and `max`/`min`/`median`/`mode`/`kthvalue`/`cummax`/`cummin`
/// given a dimension (`torch.max(x, 1)`, `x.max(dim=1)`), as a tensor
/// method or a torch function.
fn returns_values_and_indices(e: &Expr) -> bool {
    let Some((func, args, keywords)) = e.as_call() else { return false };
    let ExprKind::Attribute { value, attr, .. } = &func.kind else { return false };
    // The tensor's position among the arguments: 0 for `torch.max(x, 1)`,
    // none for `x.max(1)`.
    let function_form = value.as_name() == Some("torch");
    let dims_at = usize::from(function_form);
    let int_dim = args.get(dims_at).is_some_and(|a| matches!(a.kind, ExprKind::Literal(crate::ir::Literal::Int(_))))
        || keywords.iter().any(|k| k.name.as_deref() == Some("dim"));
    match attr.as_str() {
        "sort" | "topk" | "kthvalue" | "cummax" | "cummin" => true,
        "max" | "min" | "median" | "mode" | "nanmedian" => int_dim,
        _ => false,
    }
}
