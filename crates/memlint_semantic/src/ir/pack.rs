//! A compact byte form of a lowered module, for keeping many modules
//! between two walks without keeping their node trees.
//!
//! The driver walks every file twice (its summary for the project index,
//! then its rules with the index). Parsing a file again for the second walk
//! costs about as much as the first parse; keeping its [`Module`] costs
//! about seven bytes of memory per byte of source, because every node is a
//! separate allocation of 64 bytes or more. The packed form is a pre-order
//! stream of the same nodes that keeps what the nodes hold and nothing of
//! their layout:
//!
//! - integers are LEB128 varints, signed ones zigzag-encoded;
//! - a span is its start as a signed delta from the previous span's start
//!   (nodes come in source order, so most deltas take one byte) and its
//!   length;
//! - an identifier is written once per module, where it first occurs, and
//!   by its number after that;
//! - ids and the statement tree are not stored: [`Module::new`] numbers the
//!   unpacked body the same way (ids follow source order), and the tree is
//!   derived from the body.
//!
//! [`unpack`] of [`pack`] gives a module equal to the packed one. A stream
//! that does not decode gives `None` (callers parse the source again);
//! nothing here panics on bad input.

use std::sync::Arc;

use memlint_diagnostics::Span;
use rustc_hash::FxHashMap;

use super::{
    BinOp, Block, BoolOpKind, Class, Closure, CmpOp, Comprehension, Expr, ExprKind, Function, Generator, Handler, Ident,
    ImportBinding, Keyword, Language, Literal, MacroCall, Module, Param, Stmt, StmtKind, StructLit, Try, UnaryOp, WithItem,
    Words,
};

/// The packed form of `module` and of `comments`, the spans of the
/// file's comments (see the module documentation).
pub fn pack(module: &Module, comments: &[Span]) -> Vec<u8> {
    let mut w = Writer { out: Vec::with_capacity(4096), names: FxHashMap::default(), at: 0 };
    w.byte(match module.language {
        Language::Python => 0,
        Language::Rust => 1,
    });
    w.uint(u64::from(module.words.0));
    w.stmts(&module.body);
    w.uint(comments.len() as u64);
    for c in comments {
        w.span(*c);
    }
    w.out.shrink_to_fit();
    w.out
}

/// The module and the comment spans `bytes` was packed from, the module
/// numbered by [`Module::new`]; `None` when `bytes` is not a whole packed
/// module.
pub fn unpack(bytes: &[u8]) -> Option<(Module, Vec<Span>)> {
    let mut r = Reader { bytes, pos: 0, names: Vec::new(), at: 0 };
    let language = match r.byte()? {
        0 => Language::Python,
        1 => Language::Rust,
        _ => return None,
    };
    let words = Words(u32::try_from(r.uint()?).ok()?);
    let body = r.stmts()?;
    let comments = r.many(Reader::span)?;
    (r.pos == bytes.len()).then(|| (Module::new(language, body, words), comments))
}

struct Writer<'a> {
    out: Vec<u8>,
    names: FxHashMap<&'a str, u32>,
    at: u32,
}

impl<'a> Writer<'a> {
    fn byte(&mut self, b: u8) {
        self.out.push(b);
    }

    fn uint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.out.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.out.push(v as u8);
    }

    fn int(&mut self, v: i64) {
        self.uint(((v << 1) ^ (v >> 63)) as u64);
    }

    fn flag(&mut self, b: bool) {
        self.byte(u8::from(b));
    }

    fn span(&mut self, s: Span) {
        self.int(i64::from(s.start) - i64::from(self.at));
        self.at = s.start;
        self.int(i64::from(s.end) - i64::from(s.start));
    }

    fn name(&mut self, s: &'a str) {
        if let Some(&n) = self.names.get(s) {
            self.uint(u64::from(n) + 1);
        } else {
            let n = self.names.len() as u32;
            self.names.insert(s, n);
            self.uint(0);
            self.uint(s.len() as u64);
            self.out.extend_from_slice(s.as_bytes());
        }
    }

    fn opt_name(&mut self, s: Option<&'a str>) {
        self.flag(s.is_some());
        if let Some(s) = s {
            self.name(s);
        }
    }

    fn stmts(&mut self, body: &'a [Stmt]) {
        self.uint(body.len() as u64);
        for s in body {
            self.stmt(s);
        }
    }

    fn exprs(&mut self, es: &'a [Expr]) {
        self.uint(es.len() as u64);
        for e in es {
            self.expr(e);
        }
    }

    fn opt_expr(&mut self, e: Option<&'a Expr>) {
        self.flag(e.is_some());
        if let Some(e) = e {
            self.expr(e);
        }
    }

    fn params(&mut self, ps: &'a [Param]) {
        self.uint(ps.len() as u64);
        for p in ps {
            self.name(&p.name);
            self.opt_expr(p.annotation.as_ref());
            self.opt_expr(p.default.as_ref());
        }
    }

    fn stmt(&mut self, s: &'a Stmt) {
        self.span(s.span);
        match &s.kind {
            StmtKind::Expr(e) => {
                self.byte(0);
                self.expr(e);
            }
            StmtKind::Assign { targets, value, annotation } => {
                self.byte(1);
                self.exprs(targets);
                self.expr(value);
                self.opt_expr(annotation.as_deref());
            }
            StmtKind::Declare { target, annotation } => {
                self.byte(2);
                self.expr(target);
                self.opt_expr(annotation.as_deref());
            }
            StmtKind::AugAssign { target, op, value } => {
                self.byte(3);
                self.expr(target);
                self.byte(*op as u8);
                self.expr(value);
            }
            StmtKind::For { target, iter, body, orelse } => {
                self.byte(4);
                self.expr(target);
                self.expr(iter);
                self.stmts(body);
                self.stmts(orelse);
            }
            StmtKind::While { test, body, orelse } => {
                self.byte(5);
                self.expr(test);
                self.stmts(body);
                self.stmts(orelse);
            }
            StmtKind::If { test, body, orelse } => {
                self.byte(6);
                self.expr(test);
                self.stmts(body);
                self.stmts(orelse);
            }
            StmtKind::With { items, body } => {
                self.byte(7);
                self.uint(items.len() as u64);
                for i in items {
                    self.expr(&i.context);
                    self.opt_expr(i.target.as_ref());
                }
                self.stmts(body);
            }
            StmtKind::Function(f) => {
                self.byte(8);
                self.name(&f.name);
                self.span(f.name_span);
                self.exprs(&f.decorators);
                self.params(&f.params);
                self.uint(u64::from(f.positional));
                self.byte(u8::from(f.var_positional) | (u8::from(f.var_keywords) << 1));
                self.stmts(&f.body);
                self.uint(u64::from(f.words.0));
                self.uint(f.locals.len() as u64);
                for l in f.locals.iter() {
                    self.name(l);
                }
            }
            StmtKind::Class(c) => {
                self.byte(9);
                self.name(&c.name);
                self.exprs(&c.bases);
                self.exprs(&c.decorators);
                self.stmts(&c.body);
            }
            StmtKind::Return(e) => {
                self.byte(10);
                self.opt_expr(e.as_ref());
            }
            StmtKind::Delete(es) => {
                self.byte(11);
                self.exprs(es);
            }
            StmtKind::Import(bindings) => {
                self.byte(12);
                self.uint(bindings.len() as u64);
                for b in bindings {
                    self.name(&b.local);
                    self.name(&b.qualified);
                    self.span(b.span);
                }
            }
            StmtKind::Block(body) => {
                self.byte(13);
                self.stmts(body);
            }
            StmtKind::Try(t) => {
                self.byte(14);
                self.stmts(&t.body);
                self.uint(t.handlers.len() as u64);
                for h in t.handlers.iter() {
                    self.span(h.span);
                    self.opt_expr(h.types.as_ref());
                    self.opt_name(h.name.as_deref());
                    self.stmts(&h.body);
                }
                self.stmts(&t.orelse);
                self.stmts(&t.finalbody);
            }
            StmtKind::Break => self.byte(15),
            StmtKind::Continue => self.byte(16),
            StmtKind::Raise(es) => {
                self.byte(17);
                self.exprs(es);
            }
            StmtKind::Other(es) => {
                self.byte(18);
                self.exprs(es);
            }
        }
    }

    fn opt_box(&mut self, e: &'a Option<Box<Expr>>) {
        self.opt_expr(e.as_deref());
    }

    fn expr(&mut self, e: &'a Expr) {
        self.span(e.span);
        match &e.kind {
            ExprKind::Name(n) => {
                self.byte(0);
                self.name(n);
            }
            ExprKind::Attribute { value, attr, attr_span } => {
                self.byte(1);
                self.expr(value);
                self.name(attr);
                self.span(*attr_span);
            }
            ExprKind::Call { func, args, keywords, args_start } => {
                self.byte(2);
                self.int(i64::from(*args_start) - i64::from(e.span.start));
                self.expr(func);
                self.exprs(args);
                self.uint(keywords.len() as u64);
                for k in keywords.iter() {
                    self.opt_name(k.name.as_deref());
                    self.expr(&k.value);
                }
            }
            ExprKind::Subscript { value, index } => {
                self.byte(3);
                self.expr(value);
                self.expr(index);
            }
            ExprKind::Slice { lower, upper, step } => {
                self.byte(4);
                self.opt_box(lower);
                self.opt_box(upper);
                self.opt_box(step);
            }
            ExprKind::BinOp { left, op, right } => {
                self.byte(5);
                self.byte(*op as u8);
                self.expr(left);
                self.expr(right);
            }
            ExprKind::Unary { op, operand } => {
                self.byte(6);
                self.byte(*op as u8);
                self.expr(operand);
            }
            ExprKind::Literal(l) => {
                self.byte(7);
                match l {
                    Literal::Int(v) => {
                        self.byte(0);
                        self.int(*v);
                    }
                    Literal::Float(v) => {
                        self.byte(1);
                        self.out.extend_from_slice(&v.to_bits().to_le_bytes());
                    }
                    Literal::Str(s) => {
                        self.byte(2);
                        self.name(s);
                    }
                    Literal::Bool(b) => self.byte(if *b { 3 } else { 4 }),
                    Literal::None => self.byte(5),
                    Literal::Other => self.byte(6),
                }
            }
            ExprKind::Sequence(es) => {
                self.byte(8);
                self.exprs(es);
            }
            ExprKind::Dict(items) => {
                self.byte(9);
                self.uint(items.len() as u64);
                for (k, v) in items {
                    self.opt_expr(k.as_ref());
                    self.expr(v);
                }
            }
            ExprKind::Starred(x) => {
                self.byte(10);
                self.expr(x);
            }
            ExprKind::Nested(es) => {
                self.byte(11);
                self.exprs(es);
            }
            ExprKind::Closure(c) => {
                self.byte(12);
                self.params(&c.params);
                self.expr(&c.body);
            }
            ExprKind::Comprehension(c) => {
                self.byte(13);
                self.uint(c.generators.len() as u64);
                for g in &c.generators {
                    self.expr(&g.target);
                    self.expr(&g.iter);
                    self.exprs(&g.ifs);
                }
                self.opt_expr(c.key.as_ref());
                self.expr(&c.elt);
            }
            ExprKind::Block(b) => {
                self.byte(14);
                self.stmts(&b.stmts);
                self.opt_expr(b.tail.as_ref());
            }
            ExprKind::Try(x) => {
                self.byte(15);
                self.expr(x);
            }
            ExprKind::Cast { value, ty } => {
                self.byte(16);
                self.expr(value);
                self.expr(ty);
            }
            ExprKind::Range { start, end, inclusive } => {
                self.byte(17);
                self.opt_box(start);
                self.opt_box(end);
                self.flag(*inclusive);
            }
            ExprKind::Struct(s) => {
                self.byte(18);
                self.expr(&s.path);
                self.uint(s.fields.len() as u64);
                for (name, value) in &s.fields {
                    self.name(name);
                    self.expr(value);
                }
                self.opt_expr(s.rest.as_ref());
            }
            ExprKind::Macro(m) => {
                self.byte(19);
                self.expr(&m.path);
                self.exprs(&m.args);
                self.flag(m.parsed);
            }
            ExprKind::Compare { left, ops, comparators } => {
                self.byte(20);
                self.expr(left);
                self.uint(ops.len() as u64);
                for op in ops.iter() {
                    self.byte(*op as u8);
                }
                self.exprs(comparators);
            }
            ExprKind::BoolOp { op, values } => {
                self.byte(21);
                self.byte(*op as u8);
                self.exprs(values);
            }
            ExprKind::IfExp { test, body, orelse } => {
                self.byte(22);
                self.expr(test);
                self.expr(body);
                self.expr(orelse);
            }
            ExprKind::Named { target, value } => {
                self.byte(23);
                self.expr(target);
                self.expr(value);
            }
            ExprKind::Yield(x) => {
                self.byte(24);
                self.opt_box(x);
            }
            ExprKind::Other(es) => {
                self.byte(25);
                self.exprs(es);
            }
        }
    }
}

struct Reader<'b> {
    bytes: &'b [u8],
    pos: usize,
    names: Vec<&'b str>,
    at: u32,
}

impl<'b> Reader<'b> {
    fn byte(&mut self) -> Option<u8> {
        let b = *self.bytes.get(self.pos)?;
        self.pos += 1;
        Some(b)
    }

    fn uint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Some(v);
            }
        }
        None
    }

    fn int(&mut self) -> Option<i64> {
        let v = self.uint()?;
        Some(((v >> 1) as i64) ^ -((v & 1) as i64))
    }

    fn flag(&mut self) -> Option<bool> {
        match self.byte()? {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        }
    }

    /// A length, no larger than what is left to read (every item takes at
    /// least one byte), so a bad stream cannot ask for a huge allocation.
    fn len(&mut self) -> Option<usize> {
        let n = usize::try_from(self.uint()?).ok()?;
        (n <= self.bytes.len() - self.pos).then_some(n)
    }

    fn offset(&mut self, base: u32) -> Option<u32> {
        u32::try_from(i64::from(base).checked_add(self.int()?)?).ok()
    }

    fn span(&mut self) -> Option<Span> {
        let start = self.offset(self.at)?;
        self.at = start;
        let end = self.offset(start)?;
        Some(Span::new(start, end))
    }

    fn str(&mut self) -> Option<&'b str> {
        match self.uint()? {
            0 => {
                let n = self.len()?;
                let s = std::str::from_utf8(&self.bytes[self.pos..self.pos + n]).ok()?;
                self.pos += n;
                self.names.push(s);
                Some(s)
            }
            k => self.names.get(usize::try_from(k - 1).ok()?).copied(),
        }
    }

    fn ident(&mut self) -> Option<Ident> {
        self.str().map(Ident::from)
    }

    fn string(&mut self) -> Option<String> {
        self.str().map(String::from)
    }

    fn opt_string(&mut self) -> Option<Option<String>> {
        Some(if self.flag()? { Some(self.string()?) } else { None })
    }

    fn opt_ident(&mut self) -> Option<Option<Ident>> {
        Some(if self.flag()? { Some(self.ident()?) } else { None })
    }

    fn many<T>(&mut self, mut item: impl FnMut(&mut Self) -> Option<T>) -> Option<Vec<T>> {
        let n = self.len()?;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(item(self)?);
        }
        Some(out)
    }

    fn stmts(&mut self) -> Option<Vec<Stmt>> {
        self.many(Self::stmt)
    }

    fn exprs(&mut self) -> Option<Vec<Expr>> {
        self.many(Self::expr)
    }

    fn boxed(&mut self) -> Option<Box<Expr>> {
        self.expr().map(Box::new)
    }

    fn opt_expr(&mut self) -> Option<Option<Expr>> {
        Some(if self.flag()? { Some(self.expr()?) } else { None })
    }

    fn opt_box(&mut self) -> Option<Option<Box<Expr>>> {
        Some(self.opt_expr()?.map(Box::new))
    }

    fn params(&mut self) -> Option<Vec<Param>> {
        self.many(|r| Some(Param { name: r.string()?, annotation: r.opt_expr()?, default: r.opt_expr()? }))
    }

    fn stmt(&mut self) -> Option<Stmt> {
        let span = self.span()?;
        let kind = match self.byte()? {
            0 => StmtKind::Expr(self.expr()?),
            1 => StmtKind::Assign { targets: self.exprs()?, value: self.boxed()?, annotation: self.opt_box()? },
            2 => StmtKind::Declare { target: self.boxed()?, annotation: self.opt_box()? },
            3 => StmtKind::AugAssign { target: self.boxed()?, op: bin_op(self.byte()?)?, value: self.boxed()? },
            4 => StmtKind::For { target: self.boxed()?, iter: self.boxed()?, body: self.stmts()?, orelse: self.stmts()? },
            5 => StmtKind::While { test: self.boxed()?, body: self.stmts()?, orelse: self.stmts()? },
            6 => StmtKind::If { test: self.boxed()?, body: self.stmts()?, orelse: self.stmts()? },
            7 => StmtKind::With {
                items: self.many(|r| Some(WithItem { context: r.expr()?, target: r.opt_expr()? }))?,
                body: self.stmts()?,
            },
            8 => {
                let (name, name_span, decorators, params) = (self.string()?, self.span()?, self.exprs()?, self.params()?);
                let positional = u16::try_from(self.uint()?).ok()?;
                let star = self.byte()?;
                StmtKind::Function(Box::new(Function {
                    name,
                    name_span,
                    decorators,
                    params,
                    positional,
                    var_positional: star & 1 != 0,
                    var_keywords: star & 2 != 0,
                    body: self.stmts()?,
                    words: Words(u32::try_from(self.uint()?).ok()?),
                    locals: Arc::from(self.many(Self::ident)?),
                }))
            }
            9 => StmtKind::Class(Box::new(Class {
                name: self.string()?,
                bases: self.exprs()?.into_boxed_slice(),
                decorators: self.exprs()?.into_boxed_slice(),
                body: self.stmts()?,
            })),
            10 => StmtKind::Return(self.opt_expr()?),
            11 => StmtKind::Delete(self.exprs()?),
            12 => StmtKind::Import(
                self.many(|r| Some(ImportBinding { local: r.string()?, qualified: r.string()?, span: r.span()? }))?,
            ),
            13 => StmtKind::Block(self.stmts()?),
            14 => StmtKind::Try(Box::new(Try {
                body: self.stmts()?,
                handlers: self
                    .many(|r| Some(Handler { span: r.span()?, types: r.opt_expr()?, name: r.opt_string()?, body: r.stmts()? }))?
                    .into_boxed_slice(),
                orelse: self.stmts()?,
                finalbody: self.stmts()?.into_boxed_slice(),
            })),
            15 => StmtKind::Break,
            16 => StmtKind::Continue,
            17 => StmtKind::Raise(self.exprs()?),
            18 => StmtKind::Other(self.exprs()?),
            _ => return None,
        };
        Some(Stmt::new(span, kind))
    }

    fn expr(&mut self) -> Option<Expr> {
        let span = self.span()?;
        let kind = match self.byte()? {
            0 => ExprKind::Name(self.ident()?),
            1 => ExprKind::Attribute { value: self.boxed()?, attr: self.ident()?, attr_span: self.span()? },
            2 => {
                let args_start = self.offset(span.start)?;
                ExprKind::Call {
                    func: self.boxed()?,
                    args: self.exprs()?.into_boxed_slice(),
                    keywords: self.many(|r| Some(Keyword { name: r.opt_ident()?, value: r.expr()? }))?.into_boxed_slice(),
                    args_start,
                }
            }
            3 => ExprKind::Subscript { value: self.boxed()?, index: self.boxed()? },
            4 => ExprKind::Slice { lower: self.opt_box()?, upper: self.opt_box()?, step: self.opt_box()? },
            5 => {
                let op = bin_op(self.byte()?)?;
                ExprKind::BinOp { left: self.boxed()?, op, right: self.boxed()? }
            }
            6 => {
                let op = unary_op(self.byte()?)?;
                ExprKind::Unary { op, operand: self.boxed()? }
            }
            7 => ExprKind::Literal(match self.byte()? {
                0 => Literal::Int(self.int()?),
                1 => {
                    let raw = self.bytes.get(self.pos..self.pos + 8)?;
                    self.pos += 8;
                    Literal::Float(f64::from_bits(u64::from_le_bytes(raw.try_into().ok()?)))
                }
                2 => Literal::Str(self.ident()?),
                3 => Literal::Bool(true),
                4 => Literal::Bool(false),
                5 => Literal::None,
                6 => Literal::Other,
                _ => return None,
            }),
            8 => ExprKind::Sequence(self.exprs()?),
            9 => ExprKind::Dict(self.many(|r| Some((r.opt_expr()?, r.expr()?)))?),
            10 => ExprKind::Starred(self.boxed()?),
            11 => ExprKind::Nested(self.exprs()?),
            12 => ExprKind::Closure(Box::new(Closure { params: self.params()?, body: self.expr()? })),
            13 => ExprKind::Comprehension(Box::new(Comprehension {
                generators: self.many(|r| Some(Generator { target: r.expr()?, iter: r.expr()?, ifs: r.exprs()? }))?,
                key: self.opt_expr()?,
                elt: self.expr()?,
            })),
            14 => ExprKind::Block(Box::new(Block { stmts: self.stmts()?, tail: self.opt_expr()? })),
            15 => ExprKind::Try(self.boxed()?),
            16 => ExprKind::Cast { value: self.boxed()?, ty: self.boxed()? },
            17 => ExprKind::Range { start: self.opt_box()?, end: self.opt_box()?, inclusive: self.flag()? },
            18 => ExprKind::Struct(Box::new(StructLit {
                path: self.expr()?,
                fields: self.many(|r| Some((r.ident()?, r.expr()?)))?,
                rest: self.opt_expr()?,
            })),
            19 => ExprKind::Macro(Box::new(MacroCall { path: self.expr()?, args: self.exprs()?, parsed: self.flag()? })),
            20 => ExprKind::Compare {
                left: self.boxed()?,
                ops: self.many(|r| cmp_op(r.byte()?))?.into_boxed_slice(),
                comparators: self.exprs()?.into_boxed_slice(),
            },
            21 => {
                let op = match self.byte()? {
                    0 => BoolOpKind::And,
                    1 => BoolOpKind::Or,
                    _ => return None,
                };
                ExprKind::BoolOp { op, values: self.exprs()?.into_boxed_slice() }
            }
            22 => ExprKind::IfExp { test: self.boxed()?, body: self.boxed()?, orelse: self.boxed()? },
            23 => ExprKind::Named { target: self.boxed()?, value: self.boxed()? },
            24 => ExprKind::Yield(self.opt_box()?),
            25 => ExprKind::Other(self.exprs()?),
            _ => return None,
        };
        Some(Expr::new(span, kind))
    }
}

fn bin_op(b: u8) -> Option<BinOp> {
    use BinOp::*;
    [Add, Sub, Mult, Div, FloorDiv, Mod, Pow, MatMult, Other].into_iter().find(|op| *op as u8 == b)
}

fn unary_op(b: u8) -> Option<UnaryOp> {
    use UnaryOp::*;
    [Neg, Pos, Not, Invert, Ref, RefMut, Deref].into_iter().find(|op| *op as u8 == b)
}

fn cmp_op(b: u8) -> Option<CmpOp> {
    use CmpOp::*;
    [Eq, NotEq, Lt, LtE, Gt, GtE, Is, IsNot, In, NotIn].into_iter().find(|op| *op as u8 == b)
}
