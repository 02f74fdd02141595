use memlint_diagnostics::Span;
use memlint_semantic::ir::{Expr, ExprKind, Literal, Stmt, StmtKind};
use memlint_semantic::{Part, ValueKind};

use crate::{declare_rule, Checker, Rule, RuleMeta};

declare_rule! {
    /// ## What it does
    /// Flags a small view of a tensor (basic slicing `x[:, 0]`, `x[0]`,
    /// `narrow`, `select`, `diagonal`, a piece of `chunk`/`split`/`unbind`,
    /// possibly followed by `view`/`reshape`/`transpose`/`permute`/`squeeze`/
    /// `unsqueeze`/`expand`/`detach`) that is stored where it outlives the
    /// statement's scope, while its base would otherwise be freed: appended
    /// to a list or put in a dict that lives across loop iterations or on
    /// `self`, assigned to `self.attr`, or returned from the function that
    /// created the base.
    ///
    /// ## Why is this bad?
    /// A view shares its base's storage. Keeping a one-row view of a
    /// `[batch, seq, hidden]` activation keeps the whole activation allocated:
    /// a cache of "small" per-step features silently holds every step's full
    /// tensors.
    ///
    /// ## Example
    /// ```python
    /// feats = []
    /// for x in loader:
    ///     out = model(x)
    ///     feats.append(out[:, 0])
    /// ```
    ///
    /// In Rust with `tch` (`Vec::push`, `HashMap::insert`; views by
    /// `narrow`, `select`, `slice`, `i(...)` and the others above):
    /// ```rust,ignore
    /// let mut feats = Vec::new();
    /// for b in batches {
    ///     let out = net.forward(b);
    ///     feats.push(out.select(1, 0));
    /// }
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// feats = []
    /// for x in loader:
    ///     out = model(x)
    ///     feats.append(out[:, 0].clone())
    ///     del out
    /// ```
    /// ```rust,ignore
    ///     feats.push(out.select(1, 0).copy());
    /// ```
    ///
    /// ## Known false positives
    /// Sizes are not known statically: a view of a base that is itself small
    /// is reported too. A returned value is reported only when it drops a
    /// dimension or takes a piece (`x[0]`, `select`, `chunk()[i]`) and the
    /// function is not model code (a method of an `nn.Module`, or step code
    /// reached from a `forward`): there the view feeds the next computation
    /// and autograd keeps what backward needs of the base anyway. A returned
    /// variable holding a view is not reported (it is often one of several
    /// pieces returned together), nor are views returned together with
    /// another view of their base (`return b[:, :4], b[:, 4]`: between them
    /// they keep the base, most of it wanted). A local list that is neither returned nor
    /// stored and is filled outside a training or evaluation loop dies with
    /// the function (typically right after a `torch.stack`), and a copy into
    /// a tensor (`buf[i] = x[0]`) or into a slice of an array (`self.obs[s:e]
    /// = x[0]`) pins nothing: neither is reported. The rule
    /// stays quiet when the base stays alive anyway (it is itself stored,
    /// returned or an attribute), when the base's tensor type is not visible
    /// (an unannotated parameter), for indexing with a variable (`x[i]` may
    /// be advanced indexing, which copies) or with a list among the
    /// dimensions (`x[:, [-2]]`, advanced indexing too), for an element of the tuple
    /// `torch.autograd.grad` returns (`grads[1]`, a tensor of its own),
    /// for slices that only drop a
    /// margin (`x[1:]`, `x[:-1]`) or cut the base to a multiple of a size
    /// (`x[:n * bs]`, `x.narrow(0, 0, n * bs)`: a batchify), for a single index into a model's output
    /// (`outputs[0]` may pick a tuple element), and in test modules. Nor when the function
    /// stores other views of the same base on `self` (`self.lo = ar[:, 0];
    /// self.hi = ar[:, 1]`): the base is kept in parts, all of them used.
    /// Attributes of a model's output (`out.logits[:, -1]`) are taken as
    /// tensors. Nor is `out[0]` where `out` is computed in the function from
    /// a tensor given a leading dimension of size 1 there
    /// (`x.unsqueeze(0)`, `x[None]`: a batch of one, whose `[0]` is all of
    /// it; `[0, 0]` likewise, of `x[None, None]`). Dropping a dimension of size 1 (`x[:, :, 0]` of a `[b, d, 1]`
    /// tensor) is reported although it pins nothing extra. `reshape` of a
    /// non-contiguous tensor copies, but is still treated as a view.
    ///
    /// ## References
    /// - [Tensor views](https://pytorch.org/docs/stable/tensor_view.html)
    /// - [torch.Tensor.clone](https://pytorch.org/docs/stable/generated/torch.Tensor.clone.html)
    pub struct ViewRetainsBase {
        code: "ML203",
        name: "view-retains-base",
        severity: Warning,
        default: true,
        languages: [Python, Rust],
    }
}

impl ViewRetainsBase {
    /// Reports `value` if it is a partial view of a tensor that would
    /// otherwise be freed.
    fn check_stored(checker: &mut Checker<'_>, value: &Expr, where_: &str, report_span: Span, returned: bool) {
        let cx = checker.cx;
        // A returned variable that holds a view is often one of several
        // pieces returned together (`return x_min, y_min, w, h`): only a view
        // written in the return itself is reported.
        if returned && value.dotted().is_some() {
            return;
        }
        // In model code a returned view feeds the next computation, and
        // autograd keeps what backward needs of the base anyway.
        if returned && cx.in_model_code() {
            return;
        }
        let Some(view) = cx.view_of(value) else { return };
        // A returned slice is most often a crop of padding (`o[..., :h, :w]`),
        // nearly all of the base: only a dropped dimension or a piece counts.
        let needed = if returned { Part::Piece } else { Part::Slice };
        if view.part < needed {
            return;
        }
        let b = view.base;
        // `out.logits[:, -1]`: the base is a tensor attribute of a model's
        // output, which lives and dies with the output binding.
        let root = b.split('.').next().unwrap_or(&b).to_string();
        if b.starts_with("self.") || cx.is_kept_alive(&b) || cx.is_kept_alive(&root) || cx.is_import(&b) {
            return;
        }
        let tensor_view = match cx.kind_of_binding(&b) {
            Some(ValueKind::Tensor | ValueKind::Parameter) => true,
            Some(ValueKind::Output) => view.tensor_op,
            None if root != b => cx.kind_of_binding(&root) == Some(ValueKind::Output),
            _ => false,
        };
        if !tensor_view {
            return;
        }
        // `self.lo = ar[:, 0]; self.hi = ar[:, 1]`: a base split into parts
        // that are kept together pins little or nothing more than them.
        if !returned && Self::kept_in_parts(checker, value, &b) {
            return;
        }
        // `out[0]` of an `out` computed from a batch of one the function
        // made (`x.unsqueeze(0)`, `x[None]`): the index drops a dimension of
        // size 1, the view is all of the base.
        if Self::drops_a_batch_of_one(checker, value, &b) {
            return;
        }
        let freed_otherwise = if cx.in_loop() && !returned {
            cx.is_iteration_local(&root)
        } else {
            !cx.is_function_param(&root) && cx.function_name().is_some()
        };
        if !freed_otherwise {
            return;
        }
        let view_text = checker.text(value.span).to_string();
        checker.report(
            ViewRetainsBase::META
                .diagnostic(report_span, format!("{where_} keeps `{view_text}`, a view that pins all of `{b}`'s storage"))
                .with_help(format!("store `{view_text}.clone()` instead, so `{b}` can be freed")),
        );
    }

    /// Whether another statement of the function stores another view of
    /// `base` on `self` (the base kept in parts).
    fn kept_in_parts(checker: &Checker<'_>, value: &Expr, base: &str) -> bool {
        let module = checker.module();
        let Some(id) = module.tree.owner(value.id) else { return false };
        let Some(body) = module.enclosing_function_body(id) else { return false };
        let mut found = false;
        memlint_semantic::ir::for_each_stmt_in_function(body, &mut |s| {
            if found || s.id == id {
                return;
            }
            if let StmtKind::Assign { targets, value: v, .. } = &s.kind {
                found = targets.iter().any(|t| t.dotted().is_some_and(|d| d.starts_with("self.")))
                    && checker.cx.view_of(v).is_some_and(|w| w.base == base);
            }
        });
        found
    }

    /// Whether `value` is `base[0]` (or `base[0, 0]`) and `base` is computed in the function
    /// from a tensor given a leading dimension of size 1 there
    /// (`ct = torch.tensor(chunk).unsqueeze(0)`, then `out =
    /// F.grid_sample(ct, grid)`, then `return out[0]`).
    fn drops_a_batch_of_one(checker: &Checker<'_>, value: &Expr, base: &str) -> bool {
        let ExprKind::Subscript { index, .. } = &value.kind else { return false };
        // `[0]`, or `[0, 0]` of a tensor given two such dimensions.
        let zero = |e: &Expr| matches!(e.kind, ExprKind::Literal(Literal::Int(0)));
        let zeros = match &index.kind {
            ExprKind::Sequence(items) => !items.is_empty() && items.iter().all(zero),
            _ => zero(index),
        };
        if !zeros {
            return false;
        }
        let module = checker.module();
        let Some(id) = module.tree.owner(value.id) else { return false };
        let Some(body) = module.enclosing_function_body(id) else { return false };
        let mut bound: Vec<(String, &Expr)> = Vec::new();
        memlint_semantic::ir::for_each_stmt_in_function(body, &mut |s| {
            if let StmtKind::Assign { targets, value: v, .. } = &s.kind {
                for t in targets {
                    if let Some(d) = t.dotted() {
                        bound.push((d.to_string(), v));
                    }
                }
            }
        });
        let adds_unit_dim = |e: &Expr| e.any(&mut |x| memlint_semantic::api::adds_a_leading_unit_dim(x));
        let made_from_one = |name: &str| bound.iter().any(|(n, v)| n == name && adds_unit_dim(v));
        bound.iter().filter(|(n, _)| n == base).any(|(_, v)| {
            adds_unit_dim(v) || v.any(&mut |x| x.as_name().is_some_and(|n| n != base && made_from_one(n)))
        })
    }

    fn container_outlives(checker: &Checker<'_>, container: &Expr) -> bool {
        let Some(c) = container.dotted() else { return false };
        if checker.cx.qualified_name(container).is_some() {
            return false;
        }
        // `buf[i] = view` into a tensor copies the values: nothing is pinned.
        if matches!(checker.cx.kind_of_binding(&c), Some(ValueKind::Tensor | ValueKind::Parameter)) {
            return false;
        }
        if c.starts_with("self.") {
            return true;
        }
        // A local list that is neither returned nor stored, filled outside a
        // training or evaluation loop, dies with the function (typically
        // right after a `torch.stack`/`torch.cat`): the pin is transient.
        let cx = checker.cx;
        if !c.contains('.') && !cx.is_kept_alive(&c) && !cx.in_step_loop() {
            return false;
        }
        cx.in_loop() && cx.outlives_iteration(&c)
    }
}

/// Whether a subscript's index slices (`a:b`, or a tuple holding one):
/// only arrays and tensors are indexed so, and a store into one copies.
fn is_slicing(index: &Expr) -> bool {
    match &index.kind {
        ExprKind::Slice { .. } => true,
        ExprKind::Sequence(items) => items.iter().any(|i| matches!(i.kind, ExprKind::Slice { .. })),
        _ => false,
    }
}

impl Rule for ViewRetainsBase {
    fn meta(&self) -> &'static RuleMeta {
        &Self::META
    }

    fn check_stmt(&self, stmt: &Stmt, checker: &mut Checker<'_>) {
        if checker.cx.in_test_module() {
            return;
        }
        if !checker.cx.torch_imported() {
            return;
        }
        match &stmt.kind {
            StmtKind::Assign { targets, value, .. } => {
                for t in targets {
                    match &t.kind {
                        ExprKind::Attribute { .. } if t.dotted().is_some_and(|d| d.starts_with("self.")) => {
                            let name = checker.text(t.span).to_string();
                            Self::check_stored(checker, value, &format!("`{name}`"), stmt.span, false);
                        }
                        // `self.obs[start:end] = x[0]`, `buf[:, i] = x[0]`: a slice
                        // of an array is written in place, a copy that pins nothing.
                        ExprKind::Subscript { index, .. } if is_slicing(index) => {}
                        ExprKind::Subscript { value: container, .. } if Self::container_outlives(checker, container) => {
                            let name = checker.text(container.span).to_string();
                            Self::check_stored(checker, value, &format!("`{name}`"), stmt.span, false);
                        }
                        _ => {}
                    }
                }
            }
            StmtKind::Return(Some(value)) => {
                let items: Vec<&Expr> = match &value.kind {
                    ExprKind::Sequence(items) => items.iter().collect(),
                    _ => vec![value],
                };
                // `return b[:, :4], b[:, 4]`: the views returned together
                // keep their base between them, and one is most of it.
                let base = |e: &Expr| match &e.kind {
                    ExprKind::Subscript { value, .. } => value.dotted(),
                    _ => e.dotted(),
                };
                let bases: Vec<_> = items.iter().map(|v| base(v)).collect();
                for (i, v) in items.iter().enumerate() {
                    let shared = bases[i].as_ref().is_some_and(|b| bases.iter().enumerate().any(|(j, o)| j != i && o.as_ref() == Some(b)));
                    if !shared {
                        Self::check_stored(checker, v, "the returned value", v.span, true);
                    }
                }
            }
            _ => {}
        }
    }

    fn check_expr(&self, expr: &Expr, checker: &mut Checker<'_>) {
        if checker.cx.in_test_module() {
            return;
        }
        if !checker.cx.torch_imported() {
            return;
        }
        let Some((container, method)) = expr.as_method_call() else { return };
        let Some((_, args, _)) = expr.as_call() else { return };
        // Rust: `Vec::push`, `HashMap::insert(k, v)`.
        let value = match (method, args) {
            ("append" | "push", [v]) | ("insert", [_, v]) => v,
            _ => return,
        };
        if Self::container_outlives(checker, container) {
            let name = checker.text(container.span).to_string();
            Self::check_stored(checker, value, &format!("`{name}`"), expr.span, false);
        }
    }
}
