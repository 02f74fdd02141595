//! What a file shows of a `DataLoader`'s dataset: how large its samples
//! are (for ML303, whose pinned copies only pay for large batches) and
//! whether they are already in memory (tensors indexed in `__getitem__`,
//! for ML302, whose workers only pay for per-sample work).

use crate::facts::pipeline::{bound_values, scope_at};
use crate::ir::{Expr, ExprKind, Literal, Module, Stmt, StmtKind};

/// How large the samples of a loader's dataset are, as far as the file
/// shows ([`loader_samples`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Samples {
    /// Images of 64 pixels or more a side: a torchvision dataset of
    /// photographs, or a transform that resizes or crops to that size.
    Large,
    /// Small, or nothing in view shows them large: a torchvision dataset of
    /// 28x28 or 32x32 images not resized to 64 pixels, a transform that
    /// makes images smaller, a dataset class built here without a transform
    /// that sets a size (arrays in memory, token ids, a text), or with one
    /// that sets none (`Compose([ToTensor()])`).
    Small,
    /// The dataset is made out of sight: a parameter, an attribute, a
    /// helper's result, a transform the file does not show.
    Unknown,
}

/// How large the samples of the `DataLoader(...)` call `call` are: its
/// dataset (the first argument or `dataset=`), followed through the names
/// it is bound to in the scope or at module level and through `Subset` and
/// `random_split`.
pub fn loader_samples<'m>(call: &'m Expr, module: &'m Module) -> Samples {
    let Some((_, args, _)) = call.as_call() else { return Samples::Unknown };
    let Some(dataset) = args.first().or_else(|| call.keyword("dataset")) else { return Samples::Unknown };
    let scope = scope_at(module, call.span.start);
    let values = |e: &'m Expr| -> Vec<&'m Expr> {
        match e.as_name() {
            Some(n) => bound_values(n, scope, &module.body),
            None => Vec::new(),
        }
    };
    let mut sizing = Sizing { values: &values, visiting: Vec::new() };
    sizing.of(dataset, 3).unwrap_or(Samples::Unknown)
}

/// Follows a dataset expression to the calls that make it.
struct Sizing<'a, 'v> {
    values: &'v dyn Fn(&'a Expr) -> Vec<&'a Expr>,
    /// The names being followed: `ds, val = random_split(ds, ...)` binds
    /// `ds` from its own earlier binding, which decides alone.
    visiting: Vec<&'a str>,
}

impl<'a> Sizing<'a, '_> {
    /// A call that makes the dataset, or a name bound to such calls (all of
    /// them small: small; any large: large); `None` for a name already being
    /// followed.
    fn of(&mut self, e: &'a Expr, depth: u8) -> Option<Samples> {
        if e.as_call().is_some() {
            return self.made(e, depth);
        }
        let Some(name) = e.as_name() else { return Some(Samples::Unknown) };
        if self.visiting.contains(&name) {
            return None;
        }
        let made = (self.values)(e);
        if made.is_empty() || depth == 0 {
            return Some(Samples::Unknown);
        }
        self.visiting.push(name);
        let mut out: Option<Samples> = None;
        for m in made {
            let s = if m.as_call().is_some() { self.made(m, depth - 1) } else { Some(Samples::Unknown) };
            out = match (out, s) {
                (Some(Samples::Large), _) | (_, Some(Samples::Large)) => Some(Samples::Large),
                (Some(Samples::Unknown), _) | (_, Some(Samples::Unknown)) => Some(Samples::Unknown),
                (a, b) => a.or(b),
            };
        }
        self.visiting.pop();
        out
    }

    /// The samples of a call that makes a dataset; `None` for a part of a
    /// dataset bound to a name already being followed.
    fn made(&mut self, made: &'a Expr, depth: u8) -> Option<Samples> {
        let Some((func, args, _)) = made.as_call() else { return Some(Samples::Unknown) };
        let Some(name) = func.dotted() else { return Some(Samples::Unknown) };
        let last = name.as_str().rsplit('.').next().unwrap_or_default();
        // A part of a dataset (`Subset(ds, idx)`, `random_split(ds, ...)`).
        if matches!(last, "Subset" | "random_split") {
            return match args.first() {
                Some(whole) if depth > 0 => self.of(whole, depth - 1),
                _ => Some(Samples::Unknown),
            };
        }
        let values = self.values;
        // The transform: `transform=`, or a positional `Compose(...)`
        // (`ImageFolder(root, transforms.Compose([...]))`).
        let transform = made
            .keyword("transform")
            .filter(|t| !t.is_none())
            .or_else(|| args.iter().skip(1).find(|a| composed(a) || values(a).iter().any(|v| composed(v))));
        // `None`: no transform; `Some(None)`: one that sets no size.
        // One channel (MNIST's digits): a 64-pixel image is a third of a
        // colour one; large from about 112 pixels.
        let gray = matches!(last, "MNIST" | "FashionMNIST" | "KMNIST" | "EMNIST" | "QMNIST" | "USPS");
        let size = transform.map(|t| transform_size(t, values, if gray { 112 } else { 64 }));
        if crate::api::SMALL_IMAGE_DATASETS.contains(&last) {
            return Some(if size == Some(Some(Samples::Large)) { Samples::Large } else { Samples::Small });
        }
        if crate::api::LARGE_IMAGE_DATASETS.contains(&last) {
            return Some(if size == Some(Some(Samples::Small)) { Samples::Small } else { Samples::Large });
        }
        Some(match size {
            Some(Some(s)) => s,
            // `Compose([ToTensor()])`: the images keep a size the code
            // does not show.
            Some(None) => Samples::Small,
            // A dataset class built here with no transform (`MyDataset(X, y)`,
            // `TensorDataset(x, y)`, `TextDataset(arr)`): nothing shows large
            // samples. A helper's dataset (`build_dataset(cfg)`) is out of sight.
            None if last.starts_with(|c: char| c.is_ascii_uppercase()) => Samples::Small,
            None => Samples::Unknown,
        })
    }
}

/// The size a transform gives images: large when the last size it sets
/// (by a resize or a crop) is `large_from` pixels or more or not written as a
/// literal, small when it is under 64, unknown when the transform is not in
/// view; `None` when it sets no size (`ToTensor()` alone).
fn transform_size<'a>(t: &'a Expr, values: &dyn Fn(&'a Expr) -> Vec<&'a Expr>, large_from: i64) -> Option<Samples> {
    // `data_transforms["train"]` of a dict literal bound once.
    let resolved: Vec<&Expr> = match &t.kind {
        ExprKind::Name(_) => values(t),
        ExprKind::Subscript { value, index, .. } => {
            let key = match &index.kind {
                ExprKind::Literal(Literal::Str(k)) => Some(k.as_str()),
                _ => None,
            };
            values(value)
                .into_iter()
                .filter_map(|d| match (&d.kind, key) {
                    (ExprKind::Dict(items), Some(key)) => items.iter().find_map(|(k, v)| match k.as_ref().map(|k| &k.kind) {
                        Some(ExprKind::Literal(Literal::Str(s))) if s.as_str() == key => Some(v),
                        _ => None,
                    }),
                    _ => None,
                })
                .collect()
        }
        ExprKind::Call { .. } => vec![t],
        _ => Vec::new(),
    };
    // A transform a helper builds (`build_transform(args)`) is out of
    // sight; `Compose(...)` and the transform classes are in view.
    let in_view = |r: &&Expr| {
        r.as_call().and_then(|(f, _, _)| f.dotted()).is_some_and(|d| {
            d.as_str().rsplit('.').next().is_some_and(|l| l.starts_with(|c: char| c.is_ascii_uppercase()))
        })
    };
    if resolved.is_empty() || !resolved.iter().all(in_view) {
        return Some(Samples::Unknown);
    }
    // `Compose(transform_list)`: the list the name is bound to.
    let mut parts: Vec<&Expr> = Vec::new();
    for r in &resolved {
        parts.push(r);
        if let Some((_, args, _)) = r.as_call() {
            for a in args.iter().filter(|a| a.as_name().is_some()) {
                parts.extend(values(a));
            }
        }
    }
    // A literal, or a name bound to one (`X_DIM = 64`).
    let literal = |x: &'a Expr| match &x.kind {
        ExprKind::Literal(Literal::Int(n)) => Some(*n),
        ExprKind::Name(_) => match values(x).as_slice() {
            [v] => match v.kind {
                ExprKind::Literal(Literal::Int(n)) => Some(n),
                _ => None,
            },
            _ => None,
        },
        _ => None,
    };
    fn walk<'a>(e: &'a Expr, f: &mut dyn FnMut(&'a Expr)) {
        f(e);
        e.for_each_child(|c| walk(c, f));
    }
    let mut sizes = Vec::new();
    for r in &parts {
        walk(r, &mut |e: &'a Expr| {
            let Some((func, args, _)) = e.as_call() else { return };
            let Some(d) = func.dotted() else { return };
            let last = d.as_str().rsplit('.').next().unwrap_or_default();
            if !crate::api::RESIZING_TRANSFORMS.contains(&last) && !crate::api::CROPPING_TRANSFORMS.contains(&last) {
                return;
            }
            let size = args.first().or_else(|| e.keyword("size"));
            sizes.push(size.and_then(|s| match &s.kind {
                ExprKind::Sequence(items) => items.iter().map(literal).min().flatten(),
                _ => literal(s),
            }));
        });
    }
    // The last size set decides; a crop after a resize (`Resize(32)`,
    // `RandomCrop(28)`) makes the images smaller still.
    match sizes.last() {
        None => None,
        Some(None) => Some(Samples::Large),
        Some(Some(n)) if *n >= large_from => Some(Samples::Large),
        Some(Some(_)) => Some(Samples::Small),
    }
}

/// Whether the dataset a `DataLoader(...)` call is given holds its samples
/// ready in memory, so that loading a batch is indexing:
/// `TensorDataset(...)`, a dataset class whose `__getitem__` only returns
/// items of its attributes (`return self.x[i], self.y[i]`: a class of the
/// file, or one `in_memory_class` says is such a class of another module
/// of the run), or a Hugging Face dataset prepared ahead and formatted
/// (`ds.map(tokenize).with_format("torch")`, items of one: `ds["train"]`);
/// in the call, bound to the name passed (in the call's function, in
/// another method for `self.<attr>`, or at module level; also from what a
/// function of the file returns, `ds =
/// make_data()`, `ds, model, opt = load_train_objs()`), or, for a
/// parameter of a loader helper (`def get_loader(dataset, ...)`), passed
/// as such by every call of the helper in the file.
pub fn dataset_in_memory(call: &Expr, module: &Module, in_memory_class: &dyn Fn(&Expr) -> Option<Items>) -> bool {
    let Some((_, args, _)) = call.as_call() else { return false };
    let Some(dataset) = args.first().or_else(|| call.keyword("dataset")) else { return false };
    let values = InMemory { module: &module.body, in_memory_class, depth: std::cell::Cell::new(0) };
    if values.value(dataset, scope_at(module, call.span.start)) {
        return true;
    }
    // A parameter of the function the loader is built in: what its callers pass.
    let Some(name) = dataset.as_name() else { return false };
    let Some(helper) = enclosing_function(&module.body, call.span.start) else { return false };
    let Some(position) = helper.params.iter().filter(|p| p.name != "self").position(|p| p.name == name) else {
        return false;
    };
    let mut passed: Vec<bool> = Vec::new();
    crate::ir::for_each_stmt_in_module(&module.body, &mut |s| {
        s.for_each_expr(|e| {
            e.any(&mut |x| {
                if let Some((func, args, _)) = x.as_call() {
                    let callee = func.dotted();
                    if callee.as_deref().is_some_and(|d| d.rsplit('.').next() == Some(helper.name.as_str())) {
                        let arg = x.keyword(name).or_else(|| args.get(position));
                        passed.push(arg.is_some_and(|a| values.value(a, scope_at(module, a.span.start))));
                    }
                }
                false
            });
        });
    });
    !passed.is_empty() && passed.iter().all(|&p| p)
}

/// Whether `x` is a `Compose(...)` of transforms.
fn composed(x: &Expr) -> bool {
    x.as_call().and_then(|(f, _, _)| f.dotted()).is_some_and(|d| d.as_str().ends_with("Compose"))
}

/// Calls that make a tensor of host data at once.
const TENSOR_FROM_DATA: &[&str] = &["torch.from_numpy", "torch.tensor", "torch.as_tensor", "torch.Tensor", "torch.FloatTensor", "torch.LongTensor"];

/// The reader of in-memory datasets of one module ([`dataset_in_memory`]).
struct InMemory<'m> {
    module: &'m [Stmt],
    in_memory_class: &'m dyn Fn(&Expr) -> Option<Items>,
    /// How many splits deep [`InMemory::value`] follows (`a = Subset(b)`,
    /// `b = Subset(a)` must not recurse for ever).
    depth: std::cell::Cell<u8>,
}

impl InMemory<'_> {
    /// Whether `e`, where it stands, makes an in-memory dataset.
    fn made(&self, e: &Expr, scope: &[Stmt]) -> bool {
        // `ds["train"]` of a prepared dataset dict.
        let mut e = e;
        while let ExprKind::Subscript { value, .. } = &e.kind {
            e = value;
        }
        let prepared = e.any(&mut |x| x.as_method_call().is_some_and(|(_, m)| PREPARED_DATASET_METHODS.contains(&m)));
        // A tensor served as the dataset (`torch.from_numpy(X).float()`):
        // each item is a slice of it.
        let mut base = e;
        while let Some((recv, "float" | "long" | "double" | "half" | "contiguous")) = base.as_method_call() {
            base = recv;
        }
        let tensor = base.as_call().and_then(|(f, _, _)| f.dotted()).is_some_and(|d| TENSOR_FROM_DATA.contains(&d.as_str()));
        prepared
            || tensor
            || is_python_list(e)
            || e.as_call().is_some_and(|(f, args, _)| {
                f.dotted().is_some_and(|d| {
                    let last = d.as_str().rsplit('.').next().unwrap_or_default();
                    last == "TensorDataset"
                        || indexing_only_dataset(self.module, last, e, scope)
                        // torchvision's MNIST or CIFAR keeps its images in
                        // memory: with a transform that only converts
                        // (`ToTensor()`, `Normalize(...)`), an item is an
                        // index and a conversion.
                        || (crate::api::SMALL_IMAGE_DATASETS.contains(&last) && {
                            let transform = e.keyword("transform").or_else(|| args.iter().skip(1).find(|a| composed(a) || is_transform(a, scope, self.module)));
                            transform.is_none_or(|t| t.is_none() || light_transform(t, scope, self.module))
                        })
                }) || (self.in_memory_class)(f).is_some_and(|items| items_at(items, e, scope, self.module))
            })
    }

    /// Whether `e` is an in-memory dataset: made so where it stands, or a
    /// name bound to one in `scope` or at module level.
    fn value(&self, e: &Expr, scope: &[Stmt]) -> bool {
        if self.made(e, scope) {
            return true;
        }
        let mut base = e;
        while let ExprKind::Subscript { value, .. } = &base.kind {
            base = value;
        }
        let Some(name) = base.dotted() else { return false };
        let name = name.as_str();
        if self.formatted_in_place(name) {
            return true;
        }
        let mut found = false;
        crate::ir::for_each_stmt_in_function(scope, &mut |s| found |= self.binds(s, name, scope));
        // An attribute set in another method (`self.trainset =
        // ABSADataset(...)` in `__init__`, read in `run()`).
        if !found && name.starts_with("self.") {
            crate::ir::for_each_stmt_in_module(self.module, &mut |s| found |= self.binds(s, name, scope));
        }
        // A name of the module (a notebook's earlier cell) seen from a function.
        found || (!std::ptr::eq(scope, self.module) && self.module.iter().any(|s| self.binds(s, name, self.module)))
    }

    /// Whether the module formats the dataset `name` (or an item of it) in
    /// place anywhere (`self.dataset[split].set_format(type="torch")` in a
    /// `setup()` method): a prepared Hugging Face dataset.
    fn formatted_in_place(&self, name: &str) -> bool {
        let mut found = false;
        crate::ir::for_each_stmt_in_module(self.module, &mut |s| {
            let StmtKind::Expr(e) = &s.kind else { return };
            let Some((recv, m)) = e.as_method_call() else { return };
            if !PREPARED_DATASET_METHODS.contains(&m) {
                return;
            }
            let mut base = recv;
            while let ExprKind::Subscript { value, .. } = &base.kind {
                base = value;
            }
            found |= base.dotted().as_deref() == Some(name);
        });
        found
    }

    /// Whether `s` binds `name` to an in-memory dataset: `name = <made>`,
    /// or `name = f(...)` / `a, name, c = f(...)` of a function of the file
    /// every `return` of which gives one there.
    fn binds(&self, s: &Stmt, name: &str, scope: &[Stmt]) -> bool {
        let StmtKind::Assign { targets, value, .. } = &s.kind else { return false };
        // `train, val = random_split(dataset, [n, m])`, `Subset(dataset,
        // idx)`: parts of an in-memory dataset are in memory.
        let split_of = value.as_call().filter(|(f, _, _)| {
            f.dotted().is_some_and(|d| matches!(d.as_str().rsplit('.').next(), Some("random_split" | "Subset")))
        });
        if let Some(whole) = split_of.and_then(|(_, args, _)| args.first()) {
            let binds_name = |t: &Expr| match &t.kind {
                ExprKind::Sequence(items) => items.iter().any(|i| i.as_name() == Some(name)),
                _ => t.dotted().as_deref() == Some(name),
            };
            if targets.iter().any(binds_name) && whole.dotted().as_deref() != Some(name) && self.depth.get() < 4 {
                self.depth.set(self.depth.get() + 1);
                let whole_in_memory = self.value(whole, scope);
                self.depth.set(self.depth.get() - 1);
                return whole_in_memory;
            }
        }
        targets.iter().any(|t| {
            if t.dotted().as_deref() == Some(name) {
                return self.made(value, scope) || self.returned(value, None);
            }
            match &t.kind {
                ExprKind::Sequence(items) => items
                    .iter()
                    .position(|i| i.as_name() == Some(name))
                    .is_some_and(|k| self.returned(value, Some(k))),
                _ => false,
            }
        })
    }

    /// Whether `call` calls a plain function of the module whose every
    /// `return` gives an in-memory dataset (its item `position` of a
    /// returned tuple), made there or bound to one in it.
    fn returned(&self, call: &Expr, position: Option<usize>) -> bool {
        let Some((func, _, _)) = call.as_call() else { return false };
        let Some(f) = func.as_name().and_then(|n| module_function(self.module, n)) else { return false };
        self.returns_made(f, position)
    }

    /// Whether every `return` of `f` gives an in-memory dataset (its item
    /// `position` of a returned tuple), made there or bound to one in it.
    fn returns_made(&self, f: &crate::ir::Function, position: Option<usize>) -> bool {
        let mut returns: Vec<&Expr> = Vec::new();
        crate::ir::for_each_stmt_in_function(&f.body, &mut |s| {
            if let StmtKind::Return(Some(v)) = &s.kind {
                returns.push(v);
            }
        });
        let given = |v: &Expr| {
            let item = match (position, &v.kind) {
                (None, _) => Some(v),
                (Some(k), ExprKind::Sequence(items)) => items.get(k),
                _ => None,
            };
            item.is_some_and(|i| {
                self.made(i, &f.body)
                    || i.as_name().is_some_and(|n| {
                        let mut found = false;
                        crate::ir::for_each_stmt_in_function(&f.body, &mut |s| {
                            found |= matches!(&s.kind, StmtKind::Assign { targets, value, .. }
                                if targets.iter().any(|t| t.as_name() == Some(n)) && self.made(value, &f.body));
                        });
                        found
                    })
            })
        };
        !returns.is_empty() && returns.into_iter().all(given)
    }
}

/// The function `name` defined at the top level of `module`.
fn module_function<'m>(module: &'m [Stmt], name: &str) -> Option<&'m crate::ir::Function> {
    module.iter().find_map(|s| match &s.kind {
        StmtKind::Function(f) if f.name.as_str() == name => Some(&**f),
        _ => None,
    })
}

/// Whether every `return` of the plain function `f` of `module` gives an
/// in-memory dataset made there (`return datasets.MNIST(..., transform=t)`
/// with `t` converting only): a module that imports it binds one.
pub fn returns_in_memory_dataset(module: &Module, f: &crate::ir::Function) -> bool {
    let none = |_: &Expr| None;
    InMemory { module: &module.body, in_memory_class: &none, depth: std::cell::Cell::new(0) }.returns_made(f, None)
}

/// Methods of Hugging Face `datasets` that leave a dataset whose items
/// need no work but conversion: formatted as tensors (or arrays).
const PREPARED_DATASET_METHODS: &[&str] = &["with_format", "set_format"];

/// The innermost function of `body` containing `offset`.
fn enclosing_function(body: &[Stmt], offset: u32) -> Option<&crate::ir::Function> {
    for s in body {
        if s.span.start > offset || s.span.end < offset {
            continue;
        }
        return match &s.kind {
            StmtKind::Function(f) => Some(enclosing_function(&f.body, offset).unwrap_or(f)),
            _ => s.child_blocks().find_map(|b| enclosing_function(b, offset)),
        };
    }
    None
}

/// Whether `module` defines class `name` with a `__getitem__` that does
/// no work per sample ([`dataset_items`]), `made` being the call that
/// builds the dataset: one that applies a transform given at construction
/// is in memory when the call gives none, or one that only converts
/// ([`light_transform`]).
fn indexing_only_dataset(module: &[Stmt], name: &str, made: &Expr, scope: &[Stmt]) -> bool {
    let mut found = false;
    crate::ir::for_each_stmt_in_module(module, &mut |s| {
        if let StmtKind::Class(c) = &s.kind {
            if c.name.as_str() == name {
                found |= items_at(dataset_items(&c.body), made, scope, module);
            }
        }
    });
    found
}

/// Whether a dataset class whose `__getitem__` does `items` per sample,
/// built by the call `made`, keeps its samples in memory: one that applies
/// a transform given at construction is when the call gives none, or one
/// that only converts ([`light_transform`]).
fn items_at(items: Items, made: &Expr, scope: &[Stmt], module: &[Stmt]) -> bool {
    match items {
        Items::InMemory => true,
        Items::Transformed => {
            // The transform: a keyword naming one, or a positional
            // argument that is one (`SimDataset(n, trans)`).
            let Some((_, args, kws)) = made.as_call() else { return false };
            let named = kws.iter().filter(|k| k.name.as_deref().is_some_and(|n| n.contains("transform")));
            named.map(|k| &k.value).all(|t| t.is_none() || light_transform(t, scope, module))
                && args.iter().filter(|a| is_transform(a, scope, module)).all(|t| light_transform(t, scope, module))
        }
        Items::Computed => false,
    }
}

/// Transforms that only convert or normalise a sample: no per-sample
/// work a loader's workers would take off the training process.
const LIGHT_TRANSFORMS: &[&str] =
    &["ToTensor", "Normalize", "ConvertImageDtype", "PILToTensor", "ToDtype", "ToImage", "ToPureTensor"];

/// Tensor methods that only reshape or convert a sample.
const RESHAPES: &[&str] = &["view", "reshape", "flatten", "squeeze", "unsqueeze", "float", "double", "long", "contiguous"];

/// Whether the transform `t` (a transform, a `Compose([...])` of them, or
/// a name bound to one in `scope` or the module) only converts or
/// normalises.
fn light_transform(t: &Expr, scope: &[Stmt], module: &[Stmt]) -> bool {
    fn light(t: &Expr, scope: &[Stmt], module: &[Stmt], depth: u8) -> bool {
        if depth == 0 {
            return false;
        }
        if let Some(n) = t.as_name() {
            let values = bound_values(n, scope, module);
            return !values.is_empty() && values.iter().all(|v| light(v, scope, module, depth - 1));
        }
        if let ExprKind::Sequence(items) = &t.kind {
            return items.iter().all(|i| light(i, scope, module, depth - 1));
        }
        // `lambda x: x.view(-1)`, `lambda x: ToTensor()(x).view(28 ** 2)`:
        // a conversion and a reshape.
        if let ExprKind::Closure(c) = &t.kind {
            let [p] = c.params.as_slice() else { return false };
            let mut base = &c.body;
            while let Some((recv, m)) = base.as_method_call() {
                if !RESHAPES.contains(&m) {
                    return false;
                }
                base = recv;
            }
            return base.as_name() == Some(p.name.as_str())
                || base.as_call().is_some_and(|(f, args, kws)| {
                    matches!(args, [a] if a.as_name() == Some(p.name.as_str()))
                        && kws.is_empty()
                        && light(f, scope, module, depth - 1)
                });
        }
        let Some((func, args, _)) = t.as_call() else { return false };
        // `get_transform()`: a function of the file whose every return is light.
        if let Some(helper) = func.as_name().and_then(|n| module_function(module, n)) {
            let mut returns = Vec::new();
            crate::ir::for_each_stmt_in_function(&helper.body, &mut |s| returns.push(s));
            let mut values = returns.iter().filter_map(|s| match &s.kind {
                StmtKind::Return(v) => Some(v.as_ref()),
                _ => None,
            });
            return values.clone().next().is_some() && values.all(|v| v.is_some_and(|v| light(v, &helper.body, module, depth - 1)));
        }
        let Some(d) = func.dotted() else { return false };
        match d.as_str().rsplit('.').next().unwrap_or_default() {
            "Compose" | "Lambda" => args.len() == 1 && light(&args[0], scope, module, depth - 1),
            last => LIGHT_TRANSFORMS.contains(&last),
        }
    }
    light(t, scope, module, 6)
}

/// Whether a positional argument of a dataset's construction is a
/// transform: a `Compose(...)` or a transform class's instance, or a name
/// bound to one (the arrays and sizes beside it are not).
fn is_transform(a: &Expr, scope: &[Stmt], module: &[Stmt]) -> bool {
    let made = |e: &Expr| {
        e.as_call().and_then(|(f, _, _)| f.dotted()).is_some_and(|d| {
            let last = d.as_str().rsplit('.').next().unwrap_or_default();
            last == "Compose" || LIGHT_TRANSFORMS.contains(&last) || d.as_str().contains("transforms.")
        })
    };
    made(a) || a.as_name().is_some_and(|n| bound_values(n, scope, module).iter().any(|v| made(v)))
}

pub use super::items::{dataset_items, Items};

/// A Python list of samples (`[(x, y) for x, y in zip(feats, labels)]`,
/// `list(zip(inputs, labels))`, a list literal): its items exist before
/// the loader runs, so loading a batch is indexing and collating.
fn is_python_list(e: &Expr) -> bool {
    match &e.kind {
        // The IR keeps lists, tuples and sets as one sequence; a dataset is
        // a list (a generator has no length).
        ExprKind::Sequence(_) => true,
        ExprKind::Comprehension(c) => c.key.is_none(),
        // `range(n)`: the loader batches indices (`for idx in
        // DataLoader(range(n), b, shuffle=True)`), its workers would have
        // nothing to load.
        ExprKind::Call { func, args, keywords, .. } => {
            (func.as_name() == Some("list") && args.len() == 1 && keywords.is_empty()) || func.as_name() == Some("range")
        }
        _ => false,
    }
}
