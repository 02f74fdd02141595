//! What a dataset class's `__getitem__` does per sample: returns items of
//! attributes it holds in memory, maybe through a transform, or computes.

use crate::ir::{Expr, ExprKind, Stmt, StmtKind};

/// What a dataset class's `__getitem__` does per sample ([`dataset_items`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Items {
    /// `__getitem__` does no work per sample: its body is a `return` of items (or a tuple of items) of its
    /// attributes, `self.data[i]`, maybe bound to names first (`x =
    /// self.x[i]; y = self.y[i]; return x, y`), maybe made tensors
    /// (`torch.tensor(self.labels[i])`), or a dict of them (the tokenized-text
    /// pattern: `item = {k: torch.tensor(v[i]) for k, v in
    /// self.encodings.items()}; item["labels"] = torch.tensor(self.labels[i]);
    /// return item`). Such a dataset holds its samples in memory.
    InMemory,
    /// The same, after applying a transform kept from `__init__` (`if
    /// self.transform: image = self.transform(image)`): in memory when
    /// that transform only converts.
    Transformed,
    /// Anything else: reads, decodes or computes.
    #[default]
    Computed,
}

/// What a class body's `__getitem__` does per sample: returns items of its
/// attributes ([`Items::InMemory`]), maybe after applying a transform of
/// `self` to them, or something else.
pub fn dataset_items(class_body: &[Stmt]) -> Items {
    // `image = self.transform(image)`, maybe under `if self.transform:` or
    // `if self.transform is not None:`.
    fn applies_transform(s: &Stmt) -> bool {
        let applies = |s: &Stmt| match &s.kind {
            StmtKind::Assign { targets, value, .. } if targets.len() == 1 => {
                let Some(n) = targets[0].as_name() else { return false };
                value.as_call().is_some_and(|(f, args, _)| {
                    f.dotted().is_some_and(|d| d.starts_with("self.")) && args.len() == 1 && args[0].as_name() == Some(n)
                })
            }
            _ => false,
        };
        match &s.kind {
            StmtKind::If { test, body, orelse } => {
                orelse.is_empty()
                    && !body.is_empty()
                    && body.iter().all(applies)
                    && test.any(&mut |e| e.dotted().is_some_and(|d| d.starts_with("self.")))
            }
            _ => applies(s),
        }
    }
    let mut transformed = false;
    let kept: Vec<Stmt>;
    let mut body = class_body;
    for m in class_body {
        let StmtKind::Function(f) = &m.kind else { continue };
        if f.name.as_str() == "__getitem__" && f.body.iter().any(applies_transform) {
            transformed = true;
            let mut g = m.clone();
            if let StmtKind::Function(f) = &mut g.kind {
                f.body.retain(|s| !applies_transform(s));
            }
            kept = vec![g];
            body = &kept;
            break;
        }
    }
    match (items_only(body), transformed) {
        (true, false) => Items::InMemory,
        (true, true) => Items::Transformed,
        _ => Items::Computed,
    }
}

fn items_only(class_body: &[Stmt]) -> bool {
    /// `torch.tensor(x)`, `torch.as_tensor(x)`, `torch.from_numpy(x)`,
    /// `torch.LongTensor(x)`, numpy's conversions and casts
    /// (`np.float32(x)`, `np.asarray(x)`): the one argument, else the
    /// expression.
    fn unwrap_tensor(e: &Expr) -> &Expr {
        match e.as_call() {
            Some((func, [arg], _))
                if func.dotted().is_some_and(|d| {
                    let last = d.as_str().rsplit('.').next().unwrap_or_default();
                    (d.starts_with("torch.") && matches!(last, "tensor" | "as_tensor" | "from_numpy" | "LongTensor" | "FloatTensor"))
                        || ((d.starts_with("np.") || d.starts_with("numpy."))
                            && matches!(last, "array" | "asarray" | "float32" | "float64" | "float16" | "int64" | "int32"))
                }) =>
            {
                arg
            }
            _ => e,
        }
    }
    let mut found = false;
    for m in class_body {
        let StmtKind::Function(f) = &m.kind else { continue };
        if f.name.as_str() != "__getitem__" {
            continue;
        }
        let body: Vec<&Stmt> =
            f.body.iter().filter(|s| !matches!(&s.kind, StmtKind::Expr(e) if matches!(e.kind, ExprKind::Literal(_)))).collect();
        // `self.data[idx]`, or a part of it, `self.data[idx][0]`.
        let item = |e: &Expr| {
            let ExprKind::Subscript { value, .. } = &unwrap_tensor(e).kind else { return false };
            let mut base = &**value;
            while let ExprKind::Subscript { value, .. } = &base.kind {
                base = value;
            }
            base.dotted().is_some_and(|d| d.starts_with("self."))
        };
        // `{k: torch.tensor(v[i]) for k, v in self.encodings.items()}`.
        let dict_of_items = |e: &Expr| match &e.kind {
            ExprKind::Comprehension(c) => {
                let [g] = c.generators.as_slice() else { return false };
                let over_attr = g.iter.as_method_call().is_some_and(|(recv, m)| {
                    m == "items" && recv.dotted().is_some_and(|d| d.starts_with("self."))
                });
                let value_name = match &g.target.kind {
                    ExprKind::Sequence(names) if names.len() == 2 => names[1].as_name(),
                    _ => None,
                };
                let indexed = matches!(&unwrap_tensor(&c.elt).kind, ExprKind::Subscript { value, .. } if value.as_name().is_some() && value.as_name() == value_name);
                c.key.is_some() && g.ifs.is_empty() && over_attr && indexed
            }
            _ => false,
        };
        // `index = index * self.step`: an index computed from the index.
        fn arithmetic(e: &Expr) -> bool {
            match &e.kind {
                ExprKind::BinOp { left, right, .. } => arithmetic(left) && arithmetic(right),
                ExprKind::Name(_) | ExprKind::Literal(crate::ir::Literal::Int(_)) => true,
                _ => e.dotted().is_some_and(|d| d.starts_with("self.")),
            }
        }
        let mut body = body;
        let index_math = body.first().is_some_and(|s| {
            matches!(&s.kind, StmtKind::Assign { targets, value, .. } if targets.len() == 1 && targets[0].as_name().is_some() && arithmetic(value) && matches!(value.kind, ExprKind::BinOp { .. }))
        });
        if index_math {
            body.remove(0);
        }
        // `if self.mode == "train": return ... elif ...`: each arm returns
        // items of the attributes (its last statement).
        if let [only] = &body[..] {
            if let StmtKind::If { .. } = &only.kind {
                fn arms<'a>(s: &'a Stmt, out: &mut Vec<&'a Stmt>) -> bool {
                    let StmtKind::If { test, body, orelse } = &s.kind else { return false };
                    let attr_test = test.any(&mut |e| e.dotted().is_some_and(|d| d.starts_with("self.")));
                    let one = |b: &'a [Stmt], out: &mut Vec<&'a Stmt>| match b {
                        [r] if matches!(r.kind, StmtKind::Return(Some(_))) => {
                            out.push(r);
                            true
                        }
                        [nested] => arms(nested, out),
                        _ => false,
                    };
                    attr_test && one(body, out) && (orelse.is_empty() || one(orelse, out))
                }
                let mut returns = Vec::new();
                if arms(only, &mut returns) {
                    let all = returns.iter().all(|r| {
                        let f = crate::ir::Function { body: vec![(*r).clone()], ..(**f).clone() };
                        items_only(&[Stmt { kind: StmtKind::Function(Box::new(f)), ..m.clone() }])
                    });
                    found = all;
                    continue;
                }
            }
        }
        let Some((ret, binds)) = body.split_last() else { continue };
        // Names bound to items first: `x = self.x[i]`, `x, y = self.pairs[i]`.
        let mut bound: Vec<&str> = Vec::new();
        let binds_items = binds.iter().all(|s| match &s.kind {
            StmtKind::Assign { targets, value, .. } if targets.len() == 1 => match &targets[0].kind {
                ExprKind::Name(n) if item(value) || dict_of_items(value) || read_from(unwrap_tensor(value), &bound) => {
                    bound.push(n.as_str());
                    true
                }
                ExprKind::Sequence(names) if item(value) => names.iter().all(|t| t.as_name().map(|n| bound.push(n)).is_some()),
                // `image, label = self.images[i], self.labels[i]`.
                ExprKind::Sequence(names)
                    if matches!(&value.kind, ExprKind::Sequence(values) if values.len() == names.len() && values.iter().all(|v| item(v))) =>
                {
                    names.iter().all(|t| t.as_name().map(|n| bound.push(n)).is_some())
                }
                // `item["labels"] = torch.tensor(self.labels[i])` on a dict bound above.
                ExprKind::Subscript { value: d, .. } if item(value) => d.as_name().is_some_and(|n| bound.contains(&n)),
                _ => false,
            },
            _ => false,
        });
        // An item, a name bound to one, a slice of either (`chunk[:-1]`,
        // `chunk[1:]`: a language model's input and target) or one cast to
        // another dtype (`.long()`).
        fn given(e: &Expr, item: &dyn Fn(&Expr) -> bool, bound: &[&str]) -> bool {
            if item(e) || e.as_name().is_some_and(|n| bound.contains(&n)) || read_from(e, bound) {
                return true;
            }
            match (&e.kind, e.as_method_call()) {
                (_, Some((recv, m))) if CASTS.contains(&m) => given(recv, item, bound),
                (ExprKind::Subscript { value, index }, _) if matches!(index.kind, ExprKind::Slice { .. }) => given(value, item, bound),
                _ => false,
            }
        }
        let given = |e: &Expr| given(e, &item, &bound);
        found = binds_items
            && match &ret.kind {
                StmtKind::Return(Some(v)) => match &v.kind {
                    ExprKind::Sequence(items) => !items.is_empty() && items.iter().all(given),
                    _ => given(v) || dict_of_items(v),
                },
                _ => false,
            };
    }
    found
}

/// Whether `e` reads a part of a name bound to an item, maybe converted:
/// `rows.values`, `rows.index.day.to_numpy()` of `rows =
/// self.frame.iloc[i:i + n]` (a slice of a DataFrame held in memory).
fn read_from(e: &Expr, bound: &[&str]) -> bool {
    let mut e = e;
    let mut read = false;
    loop {
        match (&e.kind, e.as_method_call()) {
            (_, Some((recv, m))) if CASTS.contains(&m) || CONVERSIONS.contains(&m) => e = recv,
            (ExprKind::Attribute { value, .. }, None) => e = value,
            (ExprKind::Name(n), _) => return read && bound.contains(&n.as_str()),
            _ => return false,
        }
        read = true;
    }
}

/// Methods that convert data already in memory (pandas and numpy).
const CONVERSIONS: &[&str] = &["to_numpy", "astype", "tolist", "copy", "numpy"];

/// Tensor methods that change an item's dtype only.
const CASTS: &[&str] = &["long", "float", "int", "double", "half", "bool", "byte"];
