//! Identity and position of the nodes of a module.
//!
//! [`Module::new`](super::Module::new) numbers every statement and every
//! expression in source order (pre-order: a statement before its
//! expressions and its nested statements) and records, per statement, its
//! parent, the block of the parent it sits in and the last statement of its
//! subtree. Facts and rules refer to nodes by these ids, never by pointer or
//! span: a statement and its expression share a span (`f()` on a line of
//! its own), and a pointer is only good while one borrow lives.
//!
//! Because ids follow source order, "comes before" is `<` on ids, and the
//! statements of a subtree are the contiguous range `id..=tree.last_in(id)`.

use super::{Expr, ExprKind, Stmt, StmtKind};

/// The identity of a statement in its module.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StmtId(u32);

/// The identity of an expression in its module.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ExprId(u32);

const NONE: u32 = u32::MAX;

impl Default for StmtId {
    /// [`StmtId::DETACHED`].
    fn default() -> Self {
        StmtId::DETACHED
    }
}

impl StmtId {
    /// A statement that belongs to no module (built by hand, not numbered).
    pub const DETACHED: StmtId = StmtId(NONE);

    /// The id as an index into per-statement tables.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl ExprId {
    /// An expression that belongs to no module (built by a query, not
    /// numbered).
    pub const DETACHED: ExprId = ExprId(NONE);

    /// The id as an index into per-expression tables.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Which block of its parent a statement sits in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arm {
    /// The module's top level.
    Top,
    /// The body of a function, class, loop, `with`, `try` or the `then` arm
    /// of an `if`.
    Body,
    /// The `else` arm of an `if`, a loop or a `try`.
    Else,
    /// An `except` clause.
    Handler,
    /// A `finally` block.
    Finally,
    /// A block expression inside one of the parent's expressions, run where
    /// it stands (Rust's `let x = { ... };`).
    Inline,
    /// The body of a closure inside one of the parent's expressions: it runs
    /// when the closure is called (loops and guards around the parent do
    /// not reach into it).
    Closure,
}

/// What a statement is, as far as the tree's queries care.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tag {
    Function,
    Class,
    Loop,
    If,
    Other,
}

#[derive(Debug, Clone, Copy)]
struct Node {
    parent: u32,
    last: u32,
    /// The expressions the statement owns: `first_expr..exprs_end` (those
    /// of statements nested in block expressions included, those of its
    /// blocks not).
    first_expr: u32,
    exprs_end: u32,
    arm: Arm,
    tag: Tag,
}

/// The tree of a module's statements and the owner of each expression,
/// indexed by id.
#[derive(Debug, Clone, Default)]
pub struct Tree {
    nodes: Vec<Node>,
    /// How many expressions are numbered.
    exprs: u32,
}

impl Tree {
    /// Numbers `body` (ids in source order) and records its tree.
    pub(super) fn number(body: &mut [Stmt]) -> Tree {
        let mut tree = Tree::default();
        tree.block(body, NONE, Arm::Top);
        tree
    }

    fn block(&mut self, body: &mut [Stmt], parent: u32, arm: Arm) {
        for s in body {
            self.stmt(s, parent, arm);
        }
    }

    fn stmt(&mut self, s: &mut Stmt, parent: u32, arm: Arm) {
        let id = u32::try_from(self.nodes.len()).unwrap_or(NONE - 1);
        s.id = StmtId(id);
        let tag = match &s.kind {
            StmtKind::Function(_) => Tag::Function,
            StmtKind::Class(_) => Tag::Class,
            StmtKind::For { .. } | StmtKind::While { .. } => Tag::Loop,
            StmtKind::If { .. } => Tag::If,
            _ => Tag::Other,
        };
        self.nodes.push(Node { parent, last: id, first_expr: self.exprs, exprs_end: self.exprs, arm, tag });
        s.for_each_expr_mut(|e| self.expr(e, id));
        // Types are not evaluated (walks skip them) but are numbered too.
        match &mut s.kind {
            StmtKind::Assign { annotation: Some(t), .. } => self.expr(t, id),
            StmtKind::Declare { target, annotation } => {
                self.expr(target, id);
                if let Some(t) = annotation {
                    self.expr(t, id);
                }
            }
            StmtKind::Function(f) => {
                for a in f.params.iter_mut().filter_map(|p| p.annotation.as_mut()) {
                    self.expr(a, id);
                }
            }
            _ => {}
        }
        if let Some(n) = self.nodes.get_mut(id as usize) {
            n.exprs_end = self.exprs;
        }
        // The blocks in the order of `Stmt::all_blocks`.
        match &mut s.kind {
            StmtKind::Function(f) => self.block(&mut f.body, id, Arm::Body),
            StmtKind::Class(c) => self.block(&mut c.body, id, Arm::Body),
            StmtKind::With { body, .. } | StmtKind::Block(body) => self.block(body, id, Arm::Body),
            StmtKind::For { body, orelse, .. } | StmtKind::While { body, orelse, .. } | StmtKind::If { body, orelse, .. } => {
                self.block(body, id, Arm::Body);
                self.block(orelse, id, Arm::Else);
            }
            StmtKind::Try(t) => {
                self.block(&mut t.body, id, Arm::Body);
                for h in t.handlers.iter_mut() {
                    self.block(&mut h.body, id, Arm::Handler);
                }
                self.block(&mut t.orelse, id, Arm::Else);
                self.block(&mut t.finalbody, id, Arm::Finally);
            }
            _ => {}
        }
        let last = u32::try_from(self.nodes.len() - 1).unwrap_or(NONE - 1);
        if let Some(n) = self.nodes.get_mut(id as usize) {
            n.last = last;
        }
    }

    fn expr(&mut self, e: &mut Expr, owner: u32) {
        e.id = ExprId(self.exprs);
        self.exprs = self.exprs.saturating_add(1).min(NONE - 1);
        match &mut e.kind {
            // Statements nested in an expression belong to the statement
            // that owns it, in source order before the block's value.
            ExprKind::Block(b) => {
                self.block(&mut b.stmts, owner, Arm::Inline);
                if let Some(t) = &mut b.tail {
                    self.expr(t, owner);
                }
            }
            ExprKind::Closure(c) => {
                for p in c.params.iter_mut() {
                    for x in p.annotation.iter_mut().chain(p.default.iter_mut()) {
                        self.expr(x, owner);
                    }
                }
                match &mut c.body.kind {
                    ExprKind::Block(b) => {
                        c.body.id = ExprId(self.exprs);
                        self.exprs = self.exprs.saturating_add(1).min(NONE - 1);
                        self.block(&mut b.stmts, owner, Arm::Closure);
                        if let Some(t) = &mut b.tail {
                            self.expr(t, owner);
                        }
                    }
                    _ => self.expr(&mut c.body, owner),
                }
            }
            _ => {
                // Type and path positions, which walks do not visit.
                match &mut e.kind {
                    ExprKind::Cast { ty, .. } => self.expr(ty, owner),
                    ExprKind::Struct(st) => self.expr(&mut st.path, owner),
                    ExprKind::Macro(mc) => self.expr(&mut mc.path, owner),
                    _ => {}
                }
                e.for_each_child_mut(|c| self.expr(c, owner));
            }
        }
    }

    fn node(&self, id: StmtId) -> Option<&Node> {
        self.nodes.get(id.index())
    }

    fn id(raw: u32) -> Option<StmtId> {
        (raw != NONE).then_some(StmtId(raw))
    }

    /// How many statements the module has.
    pub fn stmt_count(&self) -> usize {
        self.nodes.len()
    }

    /// Every statement id, in source order.
    pub fn ids(&self) -> impl Iterator<Item = StmtId> + '_ {
        (0..self.nodes.len()).map(|i| StmtId(u32::try_from(i).unwrap_or(NONE - 1)))
    }

    /// How many expressions the module has.
    pub fn expr_count(&self) -> usize {
        self.exprs as usize
    }

    /// The statement whose block holds `id` (`None` at the top level).
    pub fn parent(&self, id: StmtId) -> Option<StmtId> {
        Tree::id(self.node(id)?.parent)
    }

    /// Which block of its parent `id` sits in.
    pub fn arm(&self, id: StmtId) -> Arm {
        self.node(id).map_or(Arm::Top, |n| n.arm)
    }

    /// The last statement of `id`'s subtree (`id` itself for a simple
    /// statement): the subtree is `id..=last_in(id)`.
    pub fn last_in(&self, id: StmtId) -> StmtId {
        self.node(id).map_or(id, |n| StmtId(n.last))
    }

    /// Whether `inner` is `outer` or nested in it (in a block of it, at any
    /// depth, function bodies included).
    pub fn contains(&self, outer: StmtId, inner: StmtId) -> bool {
        outer <= inner && inner <= self.last_in(outer)
    }

    /// The statement that owns expression `e` directly (`None` for an
    /// expression of no module).
    pub fn owner(&self, e: ExprId) -> Option<StmtId> {
        // A statement's own expressions are numbered right after it, before
        // those of its blocks: the owner is the last statement numbered at
        // or before the expression whose range holds it, or, when that one
        // is nested in a block expression of its parent, an ancestor.
        if e.0 >= self.exprs {
            return None;
        }
        let after = self.nodes.partition_point(|n| n.first_expr <= e.0);
        let mut at = StmtId(u32::try_from(after.checked_sub(1)?).ok()?);
        loop {
            let n = self.node(at)?;
            if n.first_expr <= e.0 && e.0 < n.exprs_end {
                return Some(at);
            }
            at = self.parent(at)?;
        }
    }

    /// The statements enclosing `id`, innermost first, `id` excluded.
    pub fn ancestors(&self, id: StmtId) -> impl Iterator<Item = StmtId> + '_ {
        std::iter::successors(self.parent(id), move |&p| self.parent(p))
    }

    /// The innermost function definition that contains `id` (classes are
    /// passed through: a method's statements belong to the method, a class
    /// body's to the function around the class, if any).
    pub fn enclosing_function(&self, id: StmtId) -> Option<StmtId> {
        self.ancestors(id).find(|&a| self.is_function(a))
    }

    /// The innermost loop that contains `id` in the same function.
    pub fn enclosing_loop(&self, id: StmtId) -> Option<StmtId> {
        self.scope_ancestors(id).find(|&(a, _)| self.node(a).is_some_and(|n| n.tag == Tag::Loop)).map(|(a, _)| a)
    }

    /// The `if` statements that guard `id` in its function, innermost
    /// first, each with the arm `id` is in ([`Arm::Body`]: the test held,
    /// [`Arm::Else`]: it did not).
    pub fn guards(&self, id: StmtId) -> impl Iterator<Item = (StmtId, Arm)> + '_ {
        self.scope_ancestors(id).filter(|&(a, _)| self.node(a).is_some_and(|n| n.tag == Tag::If))
    }

    /// Whether `id` is a function definition.
    pub fn is_function(&self, id: StmtId) -> bool {
        self.node(id).is_some_and(|n| n.tag == Tag::Function)
    }

    /// The ancestors of `id` up to (not including) its function or class,
    /// each with the arm of the child on the path to `id`.
    fn scope_ancestors(&self, id: StmtId) -> impl Iterator<Item = (StmtId, Arm)> + '_ {
        let mut child = id;
        std::iter::from_fn(move || {
            if self.arm(child) == Arm::Closure {
                return None;
            }
            let parent = self.parent(child)?;
            let tag = self.node(parent)?.tag;
            if matches!(tag, Tag::Function | Tag::Class) {
                return None;
            }
            let arm = self.arm(child);
            child = parent;
            Some((parent, arm))
        })
    }
}
