//! Walking the IR: the sub-expressions of an expression, the expressions
//! and blocks of a statement, and the statements and expressions of a
//! function body (nested definitions excluded).

use super::{Expr, ExprKind, Handler, Ident, Stmt, StmtKind};

/// The direct sub-expressions of an expression, in source order, each
/// passed to `$f`; `mut` for mutable access. One body for both walks, so
/// they cannot disagree.
macro_rules! expr_children {
    ($e:expr, $f:ident $(, $m:tt)?) => {
        match & $($m)? $e.kind {
            ExprKind::Name(_) | ExprKind::Literal(_) => {}
            ExprKind::Attribute { value, .. } => $f(value),
            ExprKind::Call { func, args, keywords, .. } => {
                $f(func);
                for a in args {
                    $f(a);
                }
                for k in keywords {
                    $f(& $($m)? k.value);
                }
            }
            ExprKind::Subscript { value, index } => {
                $f(value);
                $f(index);
            }
            ExprKind::Slice { lower, upper, step } => {
                for e in [lower, upper, step].into_iter().flatten() {
                    $f(e);
                }
            }
            ExprKind::BinOp { left, right, .. } => {
                $f(left);
                $f(right);
            }
            ExprKind::Unary { operand: e, .. } | ExprKind::Starred(e) | ExprKind::Try(e) => $f(e),
            ExprKind::Closure(c) => {
                for p in & $($m)? c.params {
                    if let Some(d) = & $($m)? p.default {
                        $f(d);
                    }
                }
                $f(& $($m)? c.body);
            }
            // The statements of a block are numbered with its statement
            // ([`Tree`]); walks over expressions see its value.
            ExprKind::Block(b) => {
                if let Some(t) = & $($m)? b.tail {
                    $f(t);
                }
            }
            ExprKind::Cast { value, .. } => $f(value),
            ExprKind::Range { start, end, .. } => {
                for e in [start, end].into_iter().flatten() {
                    $f(e);
                }
            }
            ExprKind::Struct(st) => {
                for (_, v) in & $($m)? st.fields {
                    $f(v);
                }
                if let Some(r) = & $($m)? st.rest {
                    $f(r);
                }
            }
            ExprKind::Macro(mc) => {
                for a in & $($m)? mc.args {
                    $f(a);
                }
            }
            ExprKind::Yield(v) => {
                if let Some(v) = v {
                    $f(v);
                }
            }
            ExprKind::Compare { left, comparators, .. } => {
                $f(left);
                for c in comparators {
                    $f(c);
                }
            }
            ExprKind::BoolOp { values: es, .. } => {
                for e in es {
                    $f(e);
                }
            }
            ExprKind::IfExp { test, body, orelse } => {
                $f(test);
                $f(body);
                $f(orelse);
            }
            ExprKind::Named { target, value } => {
                $f(target);
                $f(value);
            }
            ExprKind::Comprehension(c) => {
                for g in & $($m)? c.generators {
                    $f(& $($m)? g.iter);
                    $f(& $($m)? g.target);
                    for i in & $($m)? g.ifs {
                        $f(i);
                    }
                }
                if let Some(k) = & $($m)? c.key {
                    $f(k);
                }
                $f(& $($m)? c.elt);
            }
            ExprKind::Sequence(es) | ExprKind::Nested(es) | ExprKind::Other(es) => {
                for e in es {
                    $f(e);
                }
            }
            ExprKind::Dict(items) => {
                for (k, v) in items {
                    if let Some(k) = k {
                        $f(k);
                    }
                    $f(v);
                }
            }
        }
    };
}

/// The expressions a statement owns directly (not those of nested
/// statements), in source order, each passed to `$f`; `mut` for mutable
/// access.
macro_rules! stmt_exprs {
    ($s:expr, $f:ident $(, $m:tt)?) => {
        match & $($m)? $s.kind {
            StmtKind::Expr(e) => $f(e),
            StmtKind::Assign { targets, value, .. } => {
                for t in targets {
                    $f(t);
                }
                $f(value);
            }
            StmtKind::AugAssign { target, value, .. } => {
                $f(target);
                $f(value);
            }
            StmtKind::For { target, iter, .. } => {
                $f(target);
                $f(iter);
            }
            StmtKind::While { test, .. } | StmtKind::If { test, .. } => $f(test),
            StmtKind::With { items, .. } => {
                for it in items {
                    $f(& $($m)? it.context);
                    if let Some(t) = & $($m)? it.target {
                        $f(t);
                    }
                }
            }
            StmtKind::Function(func) => {
                for d in & $($m)? func.decorators {
                    $f(d);
                }
                for p in & $($m)? func.params {
                    if let Some(d) = & $($m)? p.default {
                        $f(d);
                    }
                }
            }
            StmtKind::Class(c) => {
                for d in & $($m)? c.decorators {
                    $f(d);
                }
                for b in & $($m)? c.bases {
                    $f(b);
                }
            }
            StmtKind::Return(Some(e)) => $f(e),
            StmtKind::Delete(es) | StmtKind::Other(es) | StmtKind::Raise(es) => {
                for e in es {
                    $f(e);
                }
            }
            StmtKind::Try(t) => {
                for h in & $($m)? t.handlers {
                    if let Some(t) = & $($m)? h.types {
                        $f(t);
                    }
                }
            }
            StmtKind::Return(None)
            | StmtKind::Declare { .. }
            | StmtKind::Import(_)
            | StmtKind::Block(_)
            | StmtKind::Break
            | StmtKind::Continue => {}
        }
    };
}

impl Expr {
    /// Calls `f` on each direct sub-expression.
    pub fn for_each_child<'a>(&'a self, mut f: impl FnMut(&'a Expr)) {
        expr_children!(self, f);
    }

    /// [`Expr::for_each_child`], mutably (for numbering).
    pub(crate) fn for_each_child_mut(&mut self, mut f: impl FnMut(&mut Expr)) {
        expr_children!(self, f, mut);
    }

    /// Whether `pred` holds for this expression or any sub-expression.
    pub fn any(&self, pred: &mut dyn FnMut(&Expr) -> bool) -> bool {
        if pred(self) {
            return true;
        }
        let mut found = false;
        self.for_each_child(|c| {
            if !found && c.any(pred) {
                found = true;
            }
        });
        found
    }
}

impl Stmt {
    /// Calls `f` on each expression directly owned by this statement (not
    /// those of nested statements).
    pub fn for_each_expr<'a>(&'a self, mut f: impl FnMut(&'a Expr)) {
        stmt_exprs!(self, f);
    }

    /// [`Stmt::for_each_expr`], mutably (for numbering).
    pub(crate) fn for_each_expr_mut(&mut self, mut f: impl FnMut(&mut Expr)) {
        stmt_exprs!(self, f, mut);
    }

    /// The nested statement blocks of this statement that run in the same
    /// function (function and class bodies are excluded), in source order.
    /// Blocks a statement lacks come as empty slices; nothing is allocated
    /// (every walk of a function asks this of each statement).
    pub fn child_blocks(&self) -> impl Iterator<Item = &[Stmt]> + '_ {
        const NONE: &[Stmt] = &[];
        let (head, handlers, tail): ([&[Stmt]; 2], &[Handler], [&[Stmt]; 2]) = match &self.kind {
            StmtKind::For { body, orelse, .. }
            | StmtKind::While { body, orelse, .. }
            | StmtKind::If { body, orelse, .. } => ([body, orelse], &[], [NONE, NONE]),
            StmtKind::With { body, .. } | StmtKind::Block(body) => ([body, NONE], &[], [NONE, NONE]),
            StmtKind::Try(t) => ([&t.body, NONE], &t.handlers, [&t.orelse, &t.finalbody]),
            _ => ([NONE, NONE], &[], [NONE, NONE]),
        };
        head.into_iter().chain(handlers.iter().map(|h| h.body.as_slice())).chain(tail)
    }

    /// Every nested statement block of this statement, function and class
    /// bodies included, in source order.
    pub fn all_blocks(&self) -> impl Iterator<Item = &[Stmt]> + '_ {
        let own: Option<&[Stmt]> = match &self.kind {
            StmtKind::Function(f) => Some(&f.body),
            StmtKind::Class(c) => Some(&c.body),
            _ => None,
        };
        own.into_iter().chain(self.child_blocks())
    }
}


/// The statement blocks of block expressions in `e` (closure bodies
/// included), outermost first; not those inside the blocks' statements.
pub(super) fn expr_blocks<'a>(e: &'a Expr, out: &mut Vec<&'a [Stmt]>) {
    if let ExprKind::Block(b) = &e.kind {
        out.push(&b.stmts);
    }
    e.for_each_child(|c| expr_blocks(c, out));
}

/// The names a function body binds (assignments, loop and `with` targets,
/// `def`/`class`, imports, `except ... as`, `del`), not descending into
/// nested functions and classes; sorted, each once (search them with
/// `binary_search`).
pub fn bound_names(body: &[Stmt]) -> std::sync::Arc<[Ident]> {
    // The plain names of a target (`a` and `b` in `a, *b = ...`), not
    // attributes or items.
    fn add(t: &Expr, out: &mut Vec<Ident>) {
        match &t.kind {
            ExprKind::Sequence(elts) => elts.iter().for_each(|e| add(e, out)),
            ExprKind::Starred(e) => add(e, out),
            ExprKind::Name(n) => out.push(n.clone()),
            _ => {}
        }
    }
    let mut out = Vec::new();
    for_each_stmt_in_function(body, &mut |s| match &s.kind {
        StmtKind::Assign { targets, .. } => targets.iter().for_each(|t| add(t, &mut out)),
        StmtKind::AugAssign { target, .. } => add(target, &mut out),
        StmtKind::For { target, .. } => add(target, &mut out),
        StmtKind::With { items, .. } => items.iter().filter_map(|i| i.target.as_ref()).for_each(|t| add(t, &mut out)),
        StmtKind::Function(f) => out.push(Ident::from(f.name.as_str())),
        StmtKind::Class(c) => out.push(Ident::from(c.name.as_str())),
        StmtKind::Import(bindings) => out.extend(bindings.iter().map(|b| Ident::from(b.local.as_str()))),
        StmtKind::Try(t) => out.extend(t.handlers.iter().filter_map(|h| h.name.as_deref().map(Ident::from))),
        StmtKind::Delete(targets) => targets.iter().for_each(|t| add(t, &mut out)),
        _ => {}
    });
    out.sort_unstable();
    out.dedup();
    out.into()
}

/// Calls `f` on every statement of `body`, recursively through control flow
/// but not into nested function or class definitions.
pub fn for_each_stmt_in_function<'a>(body: &'a [Stmt], f: &mut dyn FnMut(&'a Stmt)) {
    for s in body {
        f(s);
        for block in s.child_blocks() {
            for_each_stmt_in_function(block, f);
        }
    }
}

/// Calls `f` on every statement of `body`, nested function and class
/// bodies included.
pub fn for_each_stmt_in_module<'a>(body: &'a [Stmt], f: &mut dyn FnMut(&'a Stmt)) {
    for s in body {
        f(s);
        match &s.kind {
            StmtKind::Function(func) => for_each_stmt_in_module(&func.body, f),
            StmtKind::Class(c) => for_each_stmt_in_module(&c.body, f),
            _ => {
                for block in s.child_blocks() {
                    for_each_stmt_in_module(block, f);
                }
            }
        }
    }
}

/// Calls `f` on every expression (recursively) of the statements in `body`,
/// not descending into nested function or class definitions.
pub fn for_each_expr_in_function<'a>(body: &'a [Stmt], f: &mut dyn FnMut(&'a Expr)) {
    fn rec<'a>(e: &'a Expr, f: &mut dyn FnMut(&'a Expr)) {
        f(e);
        e.for_each_child(|c| rec(c, f));
    }
    for_each_stmt_in_function(body, &mut |s| {
        if !matches!(s.kind, StmtKind::Function(_) | StmtKind::Class(_)) {
            s.for_each_expr(|e| rec(e, f));
        }
    });
}
