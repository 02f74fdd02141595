//! A control-flow graph of one function or loop body, built on demand, for
//! the path questions rules ask: does `a` run before `b`
//! ([`Cfg::reaches`]), does every path from `a` to `b` pass through some
//! node of a set ([`Cfg::every_path_through`]), does every iteration of a
//! loop run an event ([`Cfg::every_iteration_through`]).
//!
//! Nodes are the statements of the body (compound statements included:
//! the node of an `if` is its test, of a loop its header), plus an entry
//! and an exit. Edges follow Python's semantics: both arms of an `if`, a
//! loop's back edge and its exit (to the `else` block when there is one),
//! `break`/`continue`, `return`/`raise` to the exit, and from the start of
//! a `try` body to each handler (any statement of the body may raise).
//! Nested function and class bodies are not entered: they run when called.

use crate::ir::{Stmt, StmtId, StmtKind};

/// A node of the graph.
pub type NodeId = usize;

/// The graph of one body.
#[derive(Debug)]
pub struct Cfg<'a> {
    stmts: Vec<&'a Stmt>,
    /// The node of each statement id from `first` on (`NONE` for the
    /// statements of nested definitions, which are not nodes).
    by_id: Vec<u32>,
    first: usize,
    succ: Vec<Vec<NodeId>>,
    entry: NodeId,
    exit: NodeId,
}

struct Loop {
    head: NodeId,
    breaks: Vec<NodeId>,
}

struct Builder<'a> {
    stmts: Vec<&'a Stmt>,
    succ: Vec<Vec<NodeId>>,
    loops: Vec<Loop>,
    exit: NodeId,
}

impl<'a> Builder<'a> {
    fn node(&mut self, s: &'a Stmt) -> NodeId {
        let id = self.succ.len();
        self.stmts.push(s);
        self.succ.push(Vec::new());
        id
    }

    fn edge(&mut self, from: NodeId, to: NodeId) {
        if !self.succ[from].contains(&to) {
            self.succ[from].push(to);
        }
    }

    /// Lowers `body` after the nodes in `preds`; returns the nodes that
    /// fall through to what follows.
    fn body(&mut self, body: &'a [Stmt], mut preds: Vec<NodeId>) -> Vec<NodeId> {
        for s in body {
            preds = self.stmt(s, preds);
        }
        preds
    }

    fn stmt(&mut self, s: &'a Stmt, preds: Vec<NodeId>) -> Vec<NodeId> {
        let n = self.node(s);
        for p in preds {
            self.edge(p, n);
        }
        match &s.kind {
            StmtKind::If { body, orelse, .. } => {
                let mut out = self.body(body, vec![n]);
                out.extend(self.body(orelse, vec![n]));
                out
            }
            StmtKind::For { body, orelse, .. } | StmtKind::While { body, orelse, .. } => {
                self.loops.push(Loop { head: n, breaks: Vec::new() });
                let tails = self.body(body, vec![n]);
                for t in tails {
                    self.edge(t, n);
                }
                let lp = self.loops.pop().map(|l| l.breaks).unwrap_or_default();
                let mut out = self.body(orelse, vec![n]);
                out.extend(lp);
                out
            }
            StmtKind::With { body, .. } | StmtKind::Block(body) => self.body(body, vec![n]),
            StmtKind::Try(t) => {
                let crate::ir::Try { body, handlers, orelse, finalbody } = &**t;
                let first_handler_preds = vec![n];
                let tails = self.body(body, vec![n]);
                // Any statement of the body may raise: the handlers are
                // reachable from the `try` and from every statement in it.
                let raising: Vec<NodeId> = (n..self.succ.len()).collect();
                let mut out = self.body(orelse, tails);
                for h in handlers {
                    let mut preds = first_handler_preds.clone();
                    preds.extend(raising.iter().copied());
                    preds.dedup();
                    out.extend(self.body(&h.body, preds));
                }
                if finalbody.is_empty() {
                    out
                } else {
                    self.body(finalbody, out)
                }
            }
            // Outside a loop of the graph (the graph of a loop body),
            // `break` and `continue` end the iteration: they go to the exit.
            StmtKind::Break => {
                match self.loops.last_mut() {
                    Some(l) => l.breaks.push(n),
                    None => {
                        let exit = self.exit;
                        self.edge(n, exit);
                    }
                }
                Vec::new()
            }
            StmtKind::Continue => {
                let to = self.loops.last().map(|l| l.head).unwrap_or(self.exit);
                self.edge(n, to);
                Vec::new()
            }
            StmtKind::Return(_) | StmtKind::Raise(_) => {
                let exit = self.exit;
                self.edge(n, exit);
                Vec::new()
            }
            _ => vec![n],
        }
    }
}

impl<'a> Cfg<'a> {
    /// Builds the graph of a function or loop body.
    pub fn build(body: &'a [Stmt]) -> Cfg<'a> {
        let mut b = Builder { stmts: Vec::new(), succ: Vec::new(), loops: Vec::new(), exit: 1 };
        // Reserve entry (0) and exit (1) before the statements.
        b.succ.push(Vec::new());
        b.succ.push(Vec::new());
        let tails = b.body(body, vec![0]);
        for t in tails {
            b.edge(t, 1);
        }
        // `stmts[i]` belongs to node `i + 2`. Numbered statements of a body
        // have ids in one range (source order), indexed from the first.
        let first = b.stmts.iter().map(|s| s.id).min().map_or(0, StmtId::index);
        let mut by_id = Vec::new();
        for (i, s) in b.stmts.iter().enumerate() {
            if s.id == StmtId::DETACHED {
                continue;
            }
            let at = s.id.index() - first;
            if by_id.len() <= at {
                by_id.resize(at + 1, u32::MAX);
            }
            by_id[at] = u32::try_from(i + 2).unwrap_or(u32::MAX);
        }
        Cfg { stmts: b.stmts, by_id, first, succ: b.succ, entry: 0, exit: 1 }
    }

    /// The entry node.
    pub fn entry(&self) -> NodeId {
        self.entry
    }

    /// The exit node (after the last statement, `return` and `raise`).
    pub fn exit(&self) -> NodeId {
        self.exit
    }

    /// The node of a statement of the body (`None` for a statement of
    /// another body or of a nested definition).
    pub fn node_of(&self, stmt: StmtId) -> Option<NodeId> {
        let at = stmt.index().checked_sub(self.first)?;
        self.by_id.get(at).filter(|&&n| n != u32::MAX).map(|&n| n as NodeId)
    }

    /// The statement of a node (`None` for entry and exit).
    pub fn stmt(&self, node: NodeId) -> Option<&'a Stmt> {
        node.checked_sub(2).and_then(|i| self.stmts.get(i).copied())
    }

    /// Every node holding a statement, in source order.
    pub fn nodes(&self) -> impl Iterator<Item = NodeId> + '_ {
        2..self.succ.len()
    }

    /// Whether some path leads from `from` to `to` without entering a node
    /// for which `avoid` holds (`from` and `to` themselves are not tested).
    pub fn reaches_avoiding(&self, from: NodeId, to: NodeId, avoid: &dyn Fn(NodeId) -> bool) -> bool {
        let mut seen = vec![false; self.succ.len()];
        let mut stack = vec![from];
        while let Some(n) = stack.pop() {
            for &m in &self.succ[n] {
                if m == to {
                    return true;
                }
                if !seen[m] && !avoid(m) {
                    seen[m] = true;
                    stack.push(m);
                }
            }
        }
        false
    }

    /// The nodes reachable from `from` without entering a node for which
    /// `avoid` holds (`from` itself included).
    pub fn reachable_avoiding(&self, from: NodeId, avoid: &dyn Fn(NodeId) -> bool) -> Vec<bool> {
        let mut seen = vec![false; self.succ.len()];
        seen[from] = true;
        let mut stack = vec![from];
        while let Some(n) = stack.pop() {
            for &m in &self.succ[n] {
                if !seen[m] && !avoid(m) {
                    seen[m] = true;
                    stack.push(m);
                }
            }
        }
        seen
    }

    /// The nodes from which `to` is reachable without entering a node for
    /// which `avoid` holds (`to` itself included).
    pub fn reaching_avoiding(&self, to: NodeId, avoid: &dyn Fn(NodeId) -> bool) -> Vec<bool> {
        let mut pred = vec![Vec::new(); self.succ.len()];
        for (n, ms) in self.succ.iter().enumerate() {
            for &m in ms {
                pred[m].push(n);
            }
        }
        let mut seen = vec![false; self.succ.len()];
        seen[to] = true;
        let mut stack = vec![to];
        while let Some(n) = stack.pop() {
            for &m in &pred[n] {
                if !seen[m] && !avoid(m) {
                    seen[m] = true;
                    stack.push(m);
                }
            }
        }
        seen
    }

    /// Whether some path leads from `from` to `to` (`a` can run before `b`).
    pub fn reaches(&self, from: NodeId, to: NodeId) -> bool {
        self.reaches_avoiding(from, to, &|_| false)
    }

    /// Whether every path from `from` to `to` passes through a node for
    /// which `through` holds (vacuously true when `to` is unreachable).
    pub fn every_path_through(&self, from: NodeId, to: NodeId, through: &dyn Fn(NodeId) -> bool) -> bool {
        !self.reaches_avoiding(from, to, through)
    }

    /// For the graph of a loop body: whether every iteration (every path
    /// from the body's entry to its end, `continue` included) passes
    /// through a node for which `through` holds.
    pub fn every_iteration_through(&self, through: &dyn Fn(NodeId) -> bool) -> bool {
        self.every_path_through(self.entry, self.exit, through)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Expr, ExprKind, Language, Module, Words};
    use memlint_diagnostics::Span;

    /// The body numbered, as a frontend's module would be.
    fn numbered(body: Vec<Stmt>) -> Vec<Stmt> {
        Module::new(Language::Python, body, Words::ALL).body
    }

    fn call(name: &str, at: u32) -> Stmt {
        let e = Expr::new(Span::new(at, at + 1), ExprKind::Name(name.into()));
        Stmt::new(Span::new(at, at + 1), StmtKind::Expr(e))
    }

    fn name_of(s: &Stmt) -> Option<&str> {
        match &s.kind {
            StmtKind::Expr(e) => e.as_name(),
            _ => None,
        }
    }

    fn is(cfg: &Cfg<'_>, n: NodeId, name: &str) -> bool {
        cfg.stmt(n).and_then(name_of) == Some(name)
    }

    #[test]
    fn both_arms_of_an_if_and_every_path() {
        // zero(); if c: step() else: pass(); backward()
        let test = Expr::new(Span::new(0, 1), ExprKind::Name("c".into()));
        let body = vec![
            call("zero", 1),
            Stmt::new(Span::new(2, 3), StmtKind::If { test: Box::new(test), body: vec![call("step", 3)], orelse: vec![call("other", 4)] }),
            call("backward", 5),
        ];
        let body = numbered(body);
        let cfg = Cfg::build(&body);
        let zero = cfg.node_of(body[0].id).unwrap();
        let back = cfg.node_of(body[2].id).unwrap();
        assert!(cfg.reaches(zero, back));
        assert!(!cfg.reaches(back, zero));
        // Not every path to backward passes through step (the else arm).
        assert!(!cfg.every_path_through(cfg.entry(), back, &|n| is(&cfg, n, "step")));
        assert!(cfg.every_path_through(cfg.entry(), back, &|n| is(&cfg, n, "zero")));
    }

    #[test]
    fn loops_break_continue_and_back_edges() {
        // for ...: a(); if c: continue; b()   -> b() runs before a() of the next iteration
        let test = Expr::new(Span::new(0, 1), ExprKind::Name("c".into()));
        let cont = Stmt::new(Span::new(9, 10), StmtKind::Continue);
        let inner = vec![
            call("a", 1),
            Stmt::new(Span::new(2, 3), StmtKind::If { test: Box::new(test), body: vec![cont], orelse: vec![] }),
            call("b", 4),
        ];
        let target = Expr::new(Span::new(0, 1), ExprKind::Name("x".into()));
        let iter = Expr::new(Span::new(0, 1), ExprKind::Name("xs".into()));
        let body = numbered(vec![Stmt::new(Span::new(0, 9), StmtKind::For { target: Box::new(target), iter: Box::new(iter), body: inner, orelse: vec![] })]);
        let cfg = Cfg::build(&body);
        let StmtKind::For { body: inner, .. } = &body[0].kind else { unreachable!() };
        let a = cfg.node_of(inner[0].id).unwrap();
        let b = cfg.node_of(inner[2].id).unwrap();
        assert!(cfg.reaches(b, a), "back edge");
        // In the loop body's own graph, `continue` skips b().
        let body_cfg = Cfg::build(inner);
        assert!(!body_cfg.every_iteration_through(&|n| is(&body_cfg, n, "b")));
        assert!(body_cfg.every_iteration_through(&|n| is(&body_cfg, n, "a")));
    }

    #[test]
    fn return_leaves_and_handlers_are_reachable() {
        let ret = Stmt::new(Span::new(1, 2), StmtKind::Return(None));
        let body = numbered(vec![ret, call("dead", 3)]);
        let cfg = Cfg::build(&body);
        let dead = cfg.node_of(body[1].id).unwrap();
        assert!(!cfg.reaches(cfg.entry(), dead));
        let handler = crate::ir::Handler { span: Span::new(5, 6), types: None, name: None, body: vec![call("fallback", 6)] };
        let t = numbered(vec![Stmt::new(
            Span::new(4, 9),
            StmtKind::Try(Box::new(crate::ir::Try { body: vec![call("risky", 5)], handlers: Box::new([handler]), orelse: vec![], finalbody: Box::new([]) })),
        )]);
        let cfg = Cfg::build(&t);
        let StmtKind::Try(t) = &t[0].kind else { unreachable!() };
        let risky = cfg.node_of(t.body[0].id).unwrap();
        let fb = cfg.node_of(t.handlers[0].body[0].id).unwrap();
        assert!(cfg.reaches(risky, fb));
    }
}
