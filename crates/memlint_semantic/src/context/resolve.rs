//! Names on the walk: qualified names through the imports in scope,
//! project callees, shadowing and the qualified names of definitions.

use super::*;

/// Names of the part of a model that holds a pretrained backbone
/// (`net.features`, `model.backbone`): frozen, it leaves a head to train.
const BACKBONE_PARTS: &[&str] = &["features", "backbone", "base_model", "feature_extractor", "pretrained", "trunk"];

impl Context {
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
                self.facts.module_defs.get(n.as_str()).cloned().or_else(|| self.star_imported(n))
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

    /// A name no import, local or definition of this file binds, in a file
    /// that star-imports a project module (`from utils import *`): this
    /// module's name for it (`train.f`), which the project index follows
    /// through the module's star imports to the definition.
    fn star_imported(&self, name: &str) -> Option<String> {
        const BUILTINS: &[&str] = &[
            "print", "len", "range", "enumerate", "zip", "list", "dict", "set", "tuple", "int", "float", "str", "bool",
            "isinstance", "super", "iter", "next", "min", "max", "sum", "abs", "sorted", "open", "getattr", "setattr",
            "hasattr", "type", "map", "filter", "any", "all", "round", "format", "repr", "vars", "id", "callable",
            "reversed", "divmod", "pow", "input", "exit", "quit", "object", "slice", "frozenset", "bytes", "issubclass",
        ];
        let star = self.lookup_import("*")?;
        let module = star.strip_suffix(".*")?;
        if BUILTINS.contains(&name) || !self.is_project_name(module) || self.module.path.is_empty() {
            return None;
        }
        Some(format!("{}.{name}", self.module.path))
    }

    /// Whether a qualified name may belong to the project (its first
    /// segment is a root of the run, or the run's roots are unknown).
    pub fn is_project_qualified(&self, q: &str) -> bool {
        self.is_project_name(q)
    }

    pub(super) fn is_project_name(&self, q: &str) -> bool {
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
                self.facts.module_defs.get(n.as_str()).cloned().or_else(|| self.star_imported(n))
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
    pub(super) fn is_shadowed_locally(&self, name: &str) -> bool {
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
    pub(super) fn current_class(&self) -> Option<&str> {
        let f = self.frame();
        if f.is_class {
            return f.qualname.as_deref();
        }
        f.class_qualname.as_deref()
    }

    pub(super) fn qualify(&self, name: &str) -> String {
        if self.module.path.is_empty() {
            name.to_string()
        } else {
            format!("{}.{name}", self.module.path)
        }
    }

    /// Whether a move's target is the CPU: `"cpu"`, `torch.device("cpu")`,
    /// or a name bound to one where it is read (`DEVICE =
    /// torch.device("cpu")` in a notebook's first cells).
    pub fn names_the_cpu(&self, device: &Expr) -> bool {
        crate::api::is_cpu_device(device)
            || device.as_name().is_some_and(|n| {
                self.visible_frames().any(|f| f.cpu_devices.contains(n)) && !self.visible_frames().any(|f| f.other_devices.contains(n))
            })
            || self.device_of_host_batch(device)
    }

    /// `batch_y.device` with `batch_y` a loader's batch the function never
    /// moves (`batch_y = batch_y.float()` only): the CPU.
    fn device_of_host_batch(&self, device: &Expr) -> bool {
        let ExprKind::Attribute { value, attr, .. } = &device.kind else { return false };
        let mut base = &**value;
        while let ExprKind::Subscript { value, .. } = &base.kind {
            base = value;
        }
        attr.as_str() == "device" && base.as_name().is_some_and(|n| self.is_unmoved_batch(n))
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
        let class = self.current_class()?;
        if let Some(c) = self.class_instances.get(class).and_then(|m| m.get(attr)) {
            return Some(c.clone());
        }
        // `self.model = model` in `__init__`, every `Trainer(model, ...)`
        // of the run giving a `Net`.
        if self.index.is_empty() {
            return None;
        }
        self.index.constructed_attr(class, attr).map(str::to_string)
    }

    /// The project classes `self.<attr>` may hold when its class assigns it
    /// instances of several (chosen by a configuration test), in order,
    /// each with the test arm that builds it when there is one; empty when
    /// it holds one or none.
    pub fn instance_alternatives(&self, attr: &str) -> &[(String, Option<super::OptionArm>)] {
        self.current_class()
            .and_then(|c| self.class_alternatives.get(c))
            .and_then(|m| m.get(attr))
            .map_or(&[], Vec::as_slice)
    }

    /// Whether the current class has an attribute that holds one of
    /// several project classes ([`Context::instance_alternatives`]).
    pub fn class_has_alternatives(&self) -> bool {
        self.current_class().is_some_and(|c| self.class_alternatives.contains_key(c))
    }

    /// Whether a call returns a loss summed over the samples: a torch loss
    /// with `reduction="sum"`, a project loss function that sums its
    /// losses, or an instance of a project loss module whose `forward`
    /// does ([`crate::index::FunctionSummary::sums_losses`]).
    pub fn sums_losses(&self, call: &Expr) -> bool {
        if crate::api::sums_over_samples(call) || self.project_callee(call).is_some_and(|f| f.sums_losses) {
            return true;
        }
        let Some((func, _, _)) = call.as_call() else { return false };
        let Some(class) = func.dotted().and_then(|d| self.instance_class(&d)) else { return false };
        self.index.method_of(&class, crate::api::nn::FORWARD).and_then(|q| self.index.function(&q)).is_some_and(|f| f.sums_losses)
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

    /// Whether the model `dotted` names records no graph in its forward, or
    /// only a head's: it is frozen ([`Context::is_frozen`]), frozen but for
    /// a part given back grad ([`Context::frozen_except`]), or a part of a
    /// model frozen so (`model.classifier` after a loop froze every
    /// parameter of `model`) other than the trainable part itself, or one
    /// whose pretrained backbone part was frozen ([`BACKBONE_PARTS`]).
    pub fn is_frozen_but_a_head(&self, dotted: &str) -> bool {
        if self.is_frozen(dotted) || self.frozen_except(dotted).is_some() {
            return true;
        }
        // `net.features` frozen, a pretrained backbone, with a new head
        // beside it: the forward records the head's graph only.
        if self.frozen_part_of(dotted).is_some_and(|p| BACKBONE_PARTS.contains(&p.rsplit('.').next().unwrap_or_default())) {
            return true;
        }
        dotted.match_indices('.').any(|(i, _)| {
            let whole = &dotted[..i];
            match self.frozen_except(whole) {
                Some(part) => dotted != part && !is_below(dotted, part),
                None => self.is_frozen(whole),
            }
        })
    }

    /// The frozen part of the model `dotted` names, when some of its
    /// parameters were frozen in this function and it was not frozen whole:
    /// a submodule frozen (`model.backbone.requires_grad_(False)`, a loop
    /// over `model.backbone.parameters()`) or a parameter's
    /// `requires_grad = False` (`model.fc.weight.requires_grad = False`).
    pub fn frozen_part_of(&self, dotted: &str) -> Option<String> {
        self.frozen_below(dotted).min().map(str::to_string)
    }

    /// The parts below `dotted` frozen in this function (`model.backbone`
    /// for `model`), in no order.
    pub(super) fn frozen_below<'a>(&'a self, dotted: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        let f = self.frame();
        f.frozen.iter().chain(f.grad_off.iter()).map(String::as_str).filter(move |k| is_below(k, dotted))
    }

    /// For a model frozen whole in this function and then given a
    /// trainable part (`for p in model.head.parameters(): p.requires_grad =
    /// True`, `model.head = nn.Linear(...)`): that part. The rest of the
    /// model's parameters stay frozen.
    pub fn frozen_except(&self, dotted: &str) -> Option<&str> {
        self.frame().unfrozen_parts.get(dotted).map(String::as_str)
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
        let q = match self.lookup_import(root) {
            Some(q) => q,
            None if self.star_imports => self.star_imported_module(root)?,
            None => return None,
        };
        expr.dotted_with_root(q).map(QualifiedName)
    }

    /// A name no import, local or definition of this file binds, that a
    /// project module this file star-imports imports (`torch` of `from
    /// utils import *` when `utils` does `import torch`): what it names.
    /// `torch` itself, when no project module gives it, comes from a
    /// library's star import (`from torch_snippets import *`, `from
    /// fastai.vision.all import *`), which can only give torch by it.
    fn star_imported_module(&self, name: &str) -> Option<&str> {
        if self.is_shadowed_locally(name) || self.facts.module_defs.contains_key(name) || self.module.path.is_empty() {
            return None;
        }
        self.index.star_imported_alias(&self.module.path, name).or((name == "torch").then_some("torch"))
    }

    /// Qualified name of a call's callee.
    pub fn callee_name(&self, call: &Expr) -> Option<QualifiedName> {
        let (func, _, _) = call.as_call()?;
        self.qualified_name(func)
    }


    pub(super) fn shadow(&mut self, name: &str) {
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

}
