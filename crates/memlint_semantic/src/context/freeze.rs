//! Frozen models: which values hold a module whose parameters are all
//! frozen, and what a call passes on of them, for the index to follow
//! across calls and files ([`crate::index::FrozenArgs`]).

use super::*;
use crate::api::nn;
use crate::index::{Construction, FrozenArgs};

impl Context {
    /// Whether `v` is a module whose parameters are all frozen: a frozen
    /// model itself, moved or switched (`frozen.to(device)`, `.eval()`), or
    /// wrapped (`nn.Sequential(frozen, nn.Flatten())`,
    /// `nn.DataParallel(frozen)`) with nothing that holds parameters beside
    /// it, or frozen as it is built (`nn.Conv2d(...).requires_grad_(False)`).
    pub(super) fn is_frozen_value(&self, v: &Expr) -> bool {
        if let Some(d) = v.dotted() {
            return self.is_frozen(&d);
        }
        match v.as_method_call() {
            // `nn.Conv2d(...).requires_grad_(False)`: frozen as it is built.
            Some((_, "requires_grad_")) => {
                return v.as_call().is_some_and(|(_, args, _)| args.first().is_some_and(Expr::is_false))
                    || v.keyword("requires_grad").is_some_and(Expr::is_false);
            }
            Some((recv, method)) if nn::SAME_MODULE_METHODS.contains(&method) => return self.is_frozen_value(recv),
            _ => {}
        }
        // `FeatureNet()` of a class that freezes itself as it is built,
        // unless the call passes the parameter that would not.
        if let Some(c) = self.construction(v) {
            let local = self.class_self_frozen.get(&c.class);
            if let Some(unless) = local.or_else(|| (!self.index.is_empty()).then(|| self.index.self_frozen(&c.class)).flatten()) {
                return c.keeps_freeze(unless);
            }
        }
        if let Some(q) = self.callee_name(v) {
            // A deep copy keeps each parameter's `requires_grad`.
            if q.is(nn::COPY_DEEPCOPY) {
                return v.as_call().and_then(|(_, args, _)| args.first()).is_some_and(|a| self.is_frozen_value(a));
            }
            if !q.is_any(nn::PARAMETER_SHARING_WRAPPERS) {
                return false;
            }
            let (_, args, _) = v.as_call().unwrap_or((v, &[], &[]));
            return args.iter().any(|a| self.is_frozen_value(a))
                && args.iter().all(|a| self.is_frozen_value(a) || self.builds_parameterless_layer(a));
        }
        false
    }

    /// The frozen parts of the model a `return` gives, for the index
    /// ([`crate::index::FunctionSummary::returns_frozen`]): `""` for a
    /// model frozen whole, `"features"` for `return net` after `for p in
    /// net.features.parameters(): p.requires_grad = False`.
    pub(crate) fn frozen_parts_returned(&self, v: &Expr) -> Vec<String> {
        if self.is_frozen_value(v) {
            return vec![String::new()];
        }
        let Some(name) = v.as_name() else { return Vec::new() };
        self.frozen_below(name).map(|k| k[name.len() + 1..].to_string()).collect()
    }

    /// Whether `v` builds a torch layer that owns no parameters
    /// (`nn.Softmax(dim=-1)`, moved or not).
    pub(super) fn builds_parameterless_layer(&self, v: &Expr) -> bool {
        self.callee_name(nn::strip_module_moves(v)).is_some_and(|q| q.starts_with_module(nn::NN) && nn::is_parameterless_layer(q.last()))
    }

    /// Whether the module `dotted` names owns no parameters: a torch layer
    /// without any (`softmax = nn.Softmax(dim=-1)`), or an instance of a
    /// project module that builds none
    /// ([`crate::index::ClassSummary::parameter_free`]). Its forward records
    /// no graph of its own.
    pub fn owns_no_parameters(&self, dotted: &str) -> bool {
        self.visible_frames().any(|f| f.parameterless.contains(dotted))
            || self.instance_class(dotted).is_some_and(|c| !self.index.is_empty() && self.index.is_parameter_free(&c))
    }

    /// A construction of a project class (`FeatureNet([idx])`, CamelCase):
    /// the class and what the call passes ([`Construction`]). None for a
    /// call with a splat, which may pass anything.
    pub(super) fn construction(&self, v: &Expr) -> Option<Construction> {
        let (func, args, keywords) = v.as_call()?;
        let last = match &func.kind {
            ExprKind::Name(n) => n.as_str(),
            ExprKind::Attribute { attr, .. } => attr.as_str(),
            _ => "",
        };
        if !last.starts_with(|c: char| c.is_ascii_uppercase()) {
            return None;
        }
        let class = self.instance_class_of_call(func)?;
        if args.iter().any(|a| matches!(a.kind, ExprKind::Starred(_))) || keywords.iter().any(|k| k.name.is_none()) {
            return None;
        }
        let passed = args.iter().enumerate().filter(|(_, a)| !a.is_false()).map(|(i, _)| i).collect();
        let passed_keywords = keywords.iter().filter(|k| !k.value.is_false()).filter_map(|k| k.name.as_deref().map(str::to_string)).collect();
        Some(Construction { class, passed, passed_keywords })
    }

    /// In the summary walk, the construction a binding's value is
    /// (`model = FeatureNet([idx]).cuda()`; `model = model.to(device)`
    /// and `m = model` of one), kept for the calls that pass the name on: whether its class
    /// freezes itself is known only once every file is summarised.
    pub(super) fn bound_construction(&self, value: &Expr) -> Option<Construction> {
        let v = nn::strip_module_moves(value);
        match v.as_name() {
            Some(n) => self.frame().constructions.get(n).cloned(),
            None => self.construction(v),
        }
    }

    /// What a call passes of frozen models, by argument position: a model
    /// frozen here ([`Context::is_frozen_but_a_head`]), a construction of
    /// a project class, and a parameter of the calling function passed on
    /// as it was given (the index decides the last two).
    pub(crate) fn frozen_args_at(&self, args: &[Expr]) -> FrozenArgs {
        let mut out = FrozenArgs::default();
        let f = self.frame();
        for (i, a) in args.iter().enumerate() {
            if a.dotted().is_some_and(|d| self.is_frozen_but_a_head(&d)) {
                out.positions.push(i);
                continue;
            }
            let Some(n) = a.as_name() else {
                // `extract(FeatureNet().cuda(), loader)`.
                out.built.extend(self.bound_construction(a).map(|c| (i, c)));
                continue;
            };
            if let Some(c) = f.constructions.get(n) {
                out.built.push((i, c.clone()));
            } else if let Some(j) = f.positional.iter().position(|p| p == n) {
                if !f.locals.as_ref().is_some_and(|l| l.binary_search_by(|x| x.as_str().cmp(n)).is_ok()) {
                    out.forwarded.push((i, j));
                }
            }
        }
        out
    }
}
