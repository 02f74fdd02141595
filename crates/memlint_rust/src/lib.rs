//! The Rust frontend: `syn` parses a `.rs` file and this crate lowers its
//! syntax tree into memlint's language-neutral IR
//! ([`memlint_semantic::ir`]), the same IR the Python frontend fills.
//!
//! How Rust maps onto the IR:
//!
//! - paths are attribute chains (`nn::Linear` is `nn.Linear`), generic
//!   arguments of expressions are dropped (`Vec::<f32>::try_from` is
//!   `Vec.try_from`), and `use` items are import bindings
//!   (`use tch::{nn, Tensor}` binds `nn` to `tch.nn`; `crate::`, `self::`
//!   and `super::` stay as written, for the module's facts to resolve), as
//!   is `mod util;` (`util` bound to `self.util`);
//! - types are type expressions (`&mut nn::VarStore` is a `ref-mut` of
//!   `nn.VarStore`, `Vec<Tensor>` is `Vec` indexed by `Tensor`), kept as
//!   annotations of `let`, parameters, casts and struct fields;
//! - a method call is a call of an attribute (`opt.step()`), `&x`, `&mut x`
//!   and `*x` are unary operators, `x?` is a `Try`, `a as T` a `Cast`;
//! - `let` with a value is an assignment with its annotation, without one a
//!   `Declare`; `if let` / `while let` test a walrus (`(:= pattern value)`);
//!   `loop` is `while true`; `match` is a block of its arms, its scrutinee
//!   first, as Python's `match` lowers;
//! - control flow in statement position is a statement; in value position a
//!   [`Block`] expression holding the statement (an `if` with an `else`
//!   that yields values is an `IfExp` of blocks);
//! - a function body's tail is its `return`, and so is the tail of each
//!   branch in tail position; a block expression keeps its tail as the
//!   block's value; closures keep their parameters with their types;
//! - `impl [Trait for] Type` is a class named after the type, the trait its
//!   base (`impl nn::Module for Net` gives `Net` the base `nn.Module`); a
//!   `struct` is a class whose fields are declarations with their types;
//! - macro arguments are read as comma-separated expressions where they
//!   parse as such (`println!`, `format!`, `assert!`, `vec![a, b]`); other
//!   macros keep only their path.
//!
//! [`line_comments`] finds the `//` comments syn drops, for suppressions.
//! `memlint_linter::frontend::RustFrontend` reads `.rs` files with both.

use memlint_diagnostics::Span;
use memlint_semantic::ir::{
    BinOp, Block, BoolOpKind, Class, Closure, CmpOp, Expr, ExprKind, Function, Ident, ImportBinding, Language,
    Literal, MacroCall, Module, Param, Stmt, StmtKind, StructLit, UnaryOp, Words,
};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;

/// A syntax error: where and what.
#[derive(Debug, Clone)]
pub struct SyntaxError {
    /// Where syn gave up.
    pub span: Span,
    /// syn's message.
    pub message: String,
}

/// Parses and lowers Rust source: the module, or the syntax error syn
/// reports (syn does not recover: a file with an error lowers to nothing).
pub fn parse(source: &str) -> Result<Module, SyntaxError> {
    let parsed = syn::parse_file(source);
    let result = match parsed {
        Ok(file) => {
            let mut lower = Lower { depth: 0 };
            let body = lower.items(&file.items);
            Ok(Module::new(Language::Rust, body, file_words(source)))
        }
        Err(e) => Err(SyntaxError { span: span(e.span()), message: e.to_string() }),
    };
    // Spans index a per-thread source map that grows with every file
    // parsed; the offsets are read, so it is cleared.
    proc_macro2::extra::invalidate_current_thread_spans();
    result
}

/// The words a Rust file mentions. Every word is assumed (functions and
/// files of Rust are not filtered by them), `cuda` too, since tch code may
/// pick its device in another file and pass it in; except in a file that
/// names the CPU (`Device::Cpu`, `kind::FLOAT_CPU`), never `cuda`, `Cuda`
/// or `cuda_if_available`, and never moves a tensor to the CPU
/// (`.to_device(Device::Cpu)`, which says the tensor was elsewhere): it runs
/// on the CPU.
fn file_words(source: &str) -> Words {
    let (mut cuda, mut cpu) = (false, false);
    for w in source.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
        cuda |= Words::of(w).contains(Words::CUDA);
        cpu |= w == "Cpu" || w.ends_with("_CPU");
    }
    if cpu && !cuda && !source_moves_to_cpu(source) {
        Words::ALL.without(Words::CUDA)
    } else {
        Words::ALL
    }
}

/// Whether the source moves a tensor to the CPU: `to_device(` or `to(`
/// with `Device::Cpu` (or an imported `Cpu`) as its argument.
fn source_moves_to_cpu(source: &str) -> bool {
    let compact: String = source.chars().filter(|c| !c.is_whitespace()).collect();
    ["to_device(Device::Cpu)", "to(Device::Cpu)", "to_device(tch::Device::Cpu)", "to(tch::Device::Cpu)", "to(Cpu)", "to_device(Cpu)"]
        .iter()
        .any(|p| compact.contains(p))
}

/// The spans of the line comments (`// ...`, doc comments included) of
/// Rust source, which syn drops: suppressions are read from them. String,
/// raw string, byte string and character literals and block comments
/// (nested, as Rust nests them) are skipped, so `"//"` in a string is no
/// comment.
pub fn line_comments(source: &str) -> Vec<Span> {
    let b = source.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let at = |i: usize| u32::try_from(i).unwrap_or(u32::MAX);
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                let end = b[i..].iter().position(|&c| c == b'\n').map_or(b.len(), |n| i + n);
                out.push(Span::new(at(i), at(end)));
                i = end;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let mut depth = 1;
                i += 2;
                while i < b.len() && depth > 0 {
                    if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                        depth += 1;
                        i += 2;
                    } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                        depth -= 1;
                        i += 2;
                    } else {
                        i += 1;
                    }
                }
            }
            b'r' | b'b' if !b[..i].last().is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_') => {
                // `r"..."`, `r#"..."#`, `br"..."`, `b"..."`, `b'x'`.
                let mut j = i + 1;
                if b[i] == b'b' && b.get(j) == Some(&b'r') {
                    j += 1;
                }
                let raw = b[i] == b'r' || (j > i + 1);
                let hashes = b[j..].iter().take_while(|&&c| c == b'#').count();
                if raw && b.get(j + hashes) == Some(&b'"') {
                    let close: Vec<u8> = std::iter::once(b'"').chain(std::iter::repeat_n(b'#', hashes)).collect();
                    let start = j + hashes + 1;
                    i = b[start..].windows(close.len()).position(|w| w == close.as_slice()).map_or(b.len(), |n| start + n + close.len());
                } else {
                    i += 1;
                }
            }
            b'"' => i = skip_quoted(b, i, b'"'),
            b'\'' => {
                // A character literal (`'x'`, `'\n'`) or a lifetime (`'a`).
                let is_char = matches!((b.get(i + 1), b.get(i + 2)), (Some(b'\\'), _) | (Some(_), Some(b'\'')));
                i = if is_char { skip_quoted(b, i, b'\'') } else { i + 1 };
            }
            _ => i += 1,
        }
    }
    out
}

/// The offset past the literal that opens at `i` with `quote`, escapes
/// skipped.
fn skip_quoted(b: &[u8], mut i: usize, quote: u8) -> usize {
    i += 1;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            c if c == quote => return i + 1,
            _ => i += 1,
        }
    }
    b.len()
}

/// The deepest nesting lowered; deeper expressions become placeholders.
const MAX_NESTING: u32 = 1000;

fn span(s: proc_macro2::Span) -> Span {
    let r = s.byte_range();
    Span::new(u32::try_from(r.start).unwrap_or(u32::MAX), u32::try_from(r.end).unwrap_or(u32::MAX))
}

fn spanned(node: &impl Spanned) -> Span {
    span(node.span())
}

fn name(n: &str, at: Span) -> Expr {
    Expr::new(at, ExprKind::Name(Ident::from(n)))
}

fn attr(value: Expr, a: &str, at: Span) -> Expr {
    let whole = Span::new(value.span.start, at.end);
    Expr::new(whole, ExprKind::Attribute { value: Box::new(value), attr: Ident::from(a), attr_span: at })
}

fn block_expr(stmts: Vec<Stmt>, tail: Option<Expr>, at: Span) -> Expr {
    Expr::new(at, ExprKind::Block(Box::new(Block { stmts, tail })))
}

fn other(es: Vec<Expr>, at: Span) -> Expr {
    Expr::new(at, ExprKind::Other(es))
}

struct Lower {
    depth: u32,
}

impl Lower {
    fn items(&mut self, items: &[syn::Item]) -> Vec<Stmt> {
        items.iter().filter_map(|i| self.item(i)).collect()
    }

    fn item(&mut self, item: &syn::Item) -> Option<Stmt> {
        let at = spanned(item);
        let kind = match item {
            syn::Item::Use(u) => {
                let mut out = Vec::new();
                use_tree(&u.tree, &mut Vec::new(), &mut out);
                StmtKind::Import(out)
            }
            syn::Item::Fn(f) => StmtKind::Function(Box::new(self.function(&f.attrs, &f.sig, Some(&f.block)))),
            syn::Item::Impl(i) => {
                let name = type_name(&i.self_ty);
                let bases = i.trait_.iter().map(|(_, p, _)| self.path(p)).collect();
                let body = i
                    .items
                    .iter()
                    .filter_map(|it| match it {
                        syn::ImplItem::Fn(f) => Some(Stmt::new(
                            spanned(f),
                            StmtKind::Function(Box::new(self.function(&f.attrs, &f.sig, Some(&f.block)))),
                        )),
                        syn::ImplItem::Const(c) => Some(self.constant(&c.ident, &c.ty, &c.expr, spanned(c))),
                        _ => None,
                    })
                    .collect();
                StmtKind::Class(Box::new(Class { name, bases, decorators: Box::new([]), body }))
            }
            syn::Item::Trait(t) => {
                let body = t
                    .items
                    .iter()
                    .filter_map(|it| match it {
                        syn::TraitItem::Fn(f) => Some(Stmt::new(
                            spanned(f),
                            StmtKind::Function(Box::new(self.function(&f.attrs, &f.sig, f.default.as_ref()))),
                        )),
                        _ => None,
                    })
                    .collect();
                StmtKind::Class(Box::new(Class { name: t.ident.to_string(), bases: Box::new([]), decorators: Box::new([]), body }))
            }
            syn::Item::Struct(s) => {
                let body = s
                    .fields
                    .iter()
                    .enumerate()
                    .map(|(i, f)| {
                        let field = f.ident.as_ref().map_or_else(|| i.to_string(), ToString::to_string);
                        let at = spanned(f);
                        Stmt::new(
                            at,
                            StmtKind::Declare { target: Box::new(name(&field, at)), annotation: Some(Box::new(self.ty(&f.ty))) },
                        )
                    })
                    .collect();
                StmtKind::Class(Box::new(Class { name: s.ident.to_string(), bases: Box::new([]), decorators: Box::new([]), body }))
            }
            syn::Item::Mod(m) => match &m.content {
                Some((_, items)) => StmtKind::Block(self.items(items)),
                // `mod util;`: the module `self::util`, in scope by its name.
                None => StmtKind::Import(vec![ImportBinding {
                    local: m.ident.to_string(),
                    qualified: format!("self.{}", m.ident),
                    span: spanned(&m.ident),
                }]),
            },
            syn::Item::Const(c) => return Some(self.constant(&c.ident, &c.ty, &c.expr, at)),
            syn::Item::Static(s) => return Some(self.constant(&s.ident, &s.ty, &s.expr, at)),
            _ => return None,
        };
        Some(Stmt::new(at, kind))
    }

    fn constant(&mut self, ident: &syn::Ident, ty: &syn::Type, value: &syn::Expr, at: Span) -> Stmt {
        Stmt::new(
            at,
            StmtKind::Assign {
                targets: vec![name(&ident.to_string(), spanned(ident))],
                value: Box::new(self.expr(value)),
                annotation: Some(Box::new(self.ty(ty))),
            },
        )
    }

    fn function(&mut self, attrs: &[syn::Attribute], sig: &syn::Signature, body: Option<&syn::Block>) -> Function {
        let params: Vec<Param> = sig
            .inputs
            .iter()
            .map(|a| match a {
                syn::FnArg::Receiver(r) => {
                    Param { name: "self".to_string(), annotation: Some(self.ty(&r.ty)), default: None }
                }
                syn::FnArg::Typed(t) => {
                    Param { name: pat_name(&t.pat), annotation: Some(self.ty(&t.ty)), default: None }
                }
            })
            .collect();
        let body = body.map(|b| self.fn_body(b)).unwrap_or_default();
        Function {
            name: sig.ident.to_string(),
            name_span: spanned(&sig.ident),
            decorators: attrs.iter().map(|a| self.path(a.path())).collect(),
            positional: u16::try_from(params.len()).unwrap_or(u16::MAX),
            var_positional: false,
            var_keywords: false,
            params,
            locals: memlint_semantic::ir::bound_names(&body),
            body,
            words: Words::ALL,
        }
    }

    /// A function body: its tail is what it returns.
    fn fn_body(&mut self, b: &syn::Block) -> Vec<Stmt> {
        self.block_as_stmts(b, true)
    }

    /// The statement for a value in tail position: `return value`, with
    /// control flow lowered as statements whose branches return.
    fn returned(&mut self, tail: &syn::Expr) -> Stmt {
        let at = spanned(tail);
        match tail {
            syn::Expr::If(i) => {
                let kind = self.if_stmt(i, true);
                Stmt::new(at, kind)
            }
            syn::Expr::Match(m) => Stmt::new(at, self.match_stmt(m, true)),
            syn::Expr::ForLoop(_) | syn::Expr::While(_) | syn::Expr::Loop(_) | syn::Expr::Return(_) | syn::Expr::Macro(_) => {
                self.stmt_expr(tail)
            }
            syn::Expr::Block(b) if b.label.is_none() => Stmt::new(at, StmtKind::Block(self.fn_body(&b.block))),
            _ => Stmt::new(at, StmtKind::Return(Some(self.expr(tail)))),
        }
    }

    /// The statements of a block and its tail expression (the last
    /// expression without a semicolon), unlowered.
    fn block<'b>(&mut self, b: &'b syn::Block) -> (Vec<Stmt>, Option<&'b syn::Expr>) {
        let mut out = Vec::new();
        let mut tail = None;
        for (i, s) in b.stmts.iter().enumerate() {
            match s {
                syn::Stmt::Local(l) => out.push(self.local(l)),
                syn::Stmt::Item(item) => out.extend(self.item(item)),
                syn::Stmt::Expr(e, semi) => {
                    if semi.is_none() && i + 1 == b.stmts.len() && !is_unit_control(e) {
                        tail = Some(e);
                    } else {
                        out.push(self.stmt_expr(e));
                    }
                }
                syn::Stmt::Macro(m) => {
                    let at = spanned(m);
                    out.push(Stmt::new(at, StmtKind::Expr(self.mac(&m.mac, at))));
                }
            }
        }
        (out, tail)
    }

    /// A block as a block expression (its tail its value).
    fn block_value(&mut self, b: &syn::Block) -> Expr {
        let (stmts, tail) = self.block(b);
        let tail = tail.map(|t| self.expr(t));
        block_expr(stmts, tail, spanned(b))
    }

    /// A block's statements, its tail as a statement of its own.
    fn block_stmts(&mut self, b: &syn::Block) -> Vec<Stmt> {
        self.block_as_stmts(b, false)
    }

    /// A block's statements and its tail: returned when the block is in
    /// tail position (`returns`), else a statement of its own.
    fn block_as_stmts(&mut self, b: &syn::Block, returns: bool) -> Vec<Stmt> {
        let (mut stmts, tail) = self.block(b);
        if let Some(t) = tail {
            stmts.push(if returns { self.returned(t) } else { self.stmt_expr(t) });
        }
        stmts
    }

    fn local(&mut self, l: &syn::Local) -> Stmt {
        let at = spanned(l);
        let (pat, ty) = match &l.pat {
            syn::Pat::Type(t) => (&*t.pat, Some(Box::new(self.ty(&t.ty)))),
            p => (p, None),
        };
        let target = self.pat(pat);
        match &l.init {
            Some(init) => {
                let assign = Stmt::new(
                    at,
                    StmtKind::Assign { targets: vec![target], value: Box::new(self.expr(&init.expr)), annotation: ty },
                );
                match &init.diverge {
                    // `let P = v else { ... };`: the `else` runs when the
                    // pattern does not match.
                    Some((_, els)) => {
                        let els = Stmt::new(spanned(els), StmtKind::Expr(self.expr(els)));
                        Stmt::new(at, StmtKind::Block(vec![assign, els]))
                    }
                    None => assign,
                }
            }
            None => Stmt::new(at, StmtKind::Declare { target: Box::new(target), annotation: ty }),
        }
    }

    /// An expression in statement position.
    fn stmt_expr(&mut self, e: &syn::Expr) -> Stmt {
        let at = spanned(e);
        let kind = match e {
            syn::Expr::If(i) => self.if_stmt(i, false),
            syn::Expr::ForLoop(f) => StmtKind::For {
                target: Box::new(self.pat(&f.pat)),
                iter: Box::new(self.expr(&f.expr)),
                body: self.block_stmts(&f.body),
                orelse: Vec::new(),
            },
            syn::Expr::While(w) => {
                StmtKind::While { test: Box::new(self.expr(&w.cond)), body: self.block_stmts(&w.body), orelse: Vec::new() }
            }
            syn::Expr::Loop(l) => StmtKind::While {
                test: Box::new(Expr::new(at, ExprKind::Literal(Literal::Bool(true)))),
                body: self.block_stmts(&l.body),
                orelse: Vec::new(),
            },
            syn::Expr::Match(m) => self.match_stmt(m, false),
            syn::Expr::Block(b) => StmtKind::Block(self.block_stmts(&b.block)),
            syn::Expr::Unsafe(u) => StmtKind::Block(self.block_stmts(&u.block)),
            syn::Expr::Return(r) => StmtKind::Return(r.expr.as_deref().map(|v| self.expr(v))),
            syn::Expr::Break(b) => match &b.expr {
                Some(v) => StmtKind::Other(vec![self.expr(v)]),
                None => StmtKind::Break,
            },
            syn::Expr::Continue(_) => StmtKind::Continue,
            // `t.set_data(&v);` is tch's `t.data = v`.
            syn::Expr::MethodCall(m) if m.method == "set_data" && m.args.len() == 1 => {
                let receiver = self.expr(&m.receiver);
                let target = attr(receiver, "data", spanned(&m.method));
                let value = match &m.args[0] {
                    syn::Expr::Reference(r) => self.expr(&r.expr),
                    v => self.expr(v),
                };
                StmtKind::Assign { targets: vec![target], value: Box::new(value), annotation: None }
            }
            syn::Expr::Assign(a) => StmtKind::Assign {
                targets: vec![self.expr(&a.left)],
                value: Box::new(self.expr(&a.right)),
                annotation: None,
            },
            syn::Expr::Binary(b) if compound(&b.op).is_some() => StmtKind::AugAssign {
                target: Box::new(self.expr(&b.left)),
                op: compound(&b.op).unwrap_or(BinOp::Other),
                value: Box::new(self.expr(&b.right)),
            },
            _ => StmtKind::Expr(self.expr(e)),
        };
        Stmt::new(at, kind)
    }

    /// An `if` (or `if let`) as a statement; `tail`: its branches are in
    /// tail position and return their values.
    fn if_stmt(&mut self, i: &syn::ExprIf, tail: bool) -> StmtKind {
        let test = Box::new(self.expr(&i.cond));
        let body = self.block_as_stmts(&i.then_branch, tail);
        let orelse = match &i.else_branch {
            None => Vec::new(),
            Some((_, e)) => match &**e {
                syn::Expr::If(inner) => vec![Stmt::new(spanned(inner), self.if_stmt(inner, tail))],
                syn::Expr::Block(b) => self.block_as_stmts(&b.block, tail),
                other => vec![if tail { self.returned(other) } else { self.stmt_expr(other) }],
            },
        };
        StmtKind::If { test, body, orelse }
    }

    /// A `match`: a block of its arms, the scrutinee first; each arm a
    /// block of its pattern (bound from the scrutinee), its guard and its
    /// body.
    fn match_stmt(&mut self, m: &syn::ExprMatch, tail: bool) -> StmtKind {
        let subject = Stmt::new(spanned(&m.expr), StmtKind::Expr(self.expr(&m.expr)));
        let mut blocks = vec![subject];
        for arm in &m.arms {
            let at = spanned(arm);
            let mut stmts = Vec::new();
            let pat = self.pat(&arm.pat);
            if let Some((_, guard)) = &arm.guard {
                let g = self.expr(guard);
                stmts.push(Stmt::new(at, StmtKind::Expr(other(vec![pat, g], at))));
            } else if !matches!(pat.kind, ExprKind::Name(ref n) if n == "_") {
                stmts.push(Stmt::new(at, StmtKind::Expr(pat)));
            }
            match &*arm.body {
                syn::Expr::Block(b) if b.label.is_none() => {
                    stmts.extend(self.block_as_stmts(&b.block, tail))
                }
                body if tail => stmts.push(self.returned(body)),
                body => stmts.push(self.stmt_expr(body)),
            }
            blocks.push(Stmt::new(at, StmtKind::Block(stmts)));
        }
        StmtKind::Block(blocks)
    }

    fn exprs<'a>(&mut self, es: impl IntoIterator<Item = &'a syn::Expr>) -> Vec<Expr> {
        es.into_iter().map(|e| self.expr(e)).collect()
    }

    fn expr(&mut self, e: &syn::Expr) -> Expr {
        let at = spanned(e);
        if self.depth >= MAX_NESTING {
            return Expr::new(at, ExprKind::Literal(Literal::Other));
        }
        self.depth += 1;
        let out = self.expr_inner(e, at);
        self.depth -= 1;
        out
    }

    fn expr_inner(&mut self, e: &syn::Expr, at: Span) -> Expr {
        let kind = match e {
            syn::Expr::Path(p) => return self.path(&p.path),
            syn::Expr::Lit(l) => ExprKind::Literal(literal(&l.lit)),
            syn::Expr::Call(c) => ExprKind::Call {
                func: Box::new(self.expr(&c.func)),
                args: self.exprs(&c.args).into_boxed_slice(),
                keywords: Box::new([]),
                args_start: span(c.paren_token.span.open()).start,
            },
            // `t.data()` is tch's `.data`: the attribute, spanning `data()`.
            syn::Expr::MethodCall(m) if m.method == nn_data() && m.args.is_empty() && m.turbofish.is_none() => {
                let receiver = self.expr(&m.receiver);
                let data = Span::new(spanned(&m.method).start, span(m.paren_token.span.close()).end);
                let mut out = attr(receiver, "data", data);
                out.span = at;
                return out;
            }
            syn::Expr::MethodCall(m) => {
                let receiver = self.expr(&m.receiver);
                let func = attr(receiver, &m.method.to_string(), spanned(&m.method));
                ExprKind::Call {
                    func: Box::new(func),
                    args: self.exprs(&m.args).into_boxed_slice(),
                    keywords: Box::new([]),
                    args_start: span(m.paren_token.span.open()).start,
                }
            }
            syn::Expr::Field(f) => {
                let base = self.expr(&f.base);
                let member = member_name(&f.member);
                return attr(base, &member, spanned(&f.member));
            }
            syn::Expr::Binary(b) => {
                let left = Box::new(self.expr(&b.left));
                let right = Box::new(self.expr(&b.right));
                match binary(&b.op) {
                    Bin::Arith(op) => ExprKind::BinOp { left, op, right },
                    Bin::Cmp(op) => ExprKind::Compare { left, ops: Box::new([op]), comparators: Box::new([*right]) },
                    Bin::Bool(op) => ExprKind::BoolOp { op, values: Box::new([*left, *right]) },
                    // `a += b` as a value (rare): kept as both operands.
                    Bin::Compound => ExprKind::Other(vec![*left, *right]),
                }
            }
            syn::Expr::Unary(u) => {
                let op = match u.op {
                    syn::UnOp::Deref(_) => UnaryOp::Deref,
                    syn::UnOp::Not(_) => UnaryOp::Not,
                    _ => UnaryOp::Neg,
                };
                ExprKind::Unary { op, operand: Box::new(self.expr(&u.expr)) }
            }
            syn::Expr::Reference(r) => ExprKind::Unary {
                op: if r.mutability.is_some() { UnaryOp::RefMut } else { UnaryOp::Ref },
                operand: Box::new(self.expr(&r.expr)),
            },
            syn::Expr::Try(t) => ExprKind::Try(Box::new(self.expr(&t.expr))),
            syn::Expr::Cast(c) => ExprKind::Cast { value: Box::new(self.expr(&c.expr)), ty: Box::new(self.ty(&c.ty)) },
            syn::Expr::Range(r) => ExprKind::Range {
                start: r.start.as_deref().map(|s| Box::new(self.expr(s))),
                end: r.end.as_deref().map(|s| Box::new(self.expr(s))),
                inclusive: matches!(r.limits, syn::RangeLimits::Closed(_)),
            },
            syn::Expr::Struct(s) => ExprKind::Struct(Box::new(StructLit {
                path: self.path(&s.path),
                fields: s
                    .fields
                    .iter()
                    .map(|f| {
                        let member = member_name(&f.member);
                        (Ident::from(member), self.expr(&f.expr))
                    })
                    .collect(),
                rest: s.rest.as_deref().map(|r| self.expr(r)),
            })),
            syn::Expr::Macro(m) => return self.mac(&m.mac, at),
            syn::Expr::Closure(c) => {
                let params = c
                    .inputs
                    .iter()
                    .map(|p| match p {
                        syn::Pat::Type(t) => Param { name: pat_name(&t.pat), annotation: Some(self.ty(&t.ty)), default: None },
                        p => Param { name: pat_name(p), annotation: None, default: None },
                    })
                    .collect();
                ExprKind::Closure(Box::new(Closure { params, body: self.expr(&c.body) }))
            }
            syn::Expr::Block(b) => return self.block_value(&b.block),
            syn::Expr::Unsafe(u) => return self.block_value(&u.block),
            syn::Expr::If(i) => match &i.else_branch {
                // Both arms yield a value.
                Some((_, els)) => ExprKind::IfExp {
                    test: Box::new(self.expr(&i.cond)),
                    body: Box::new(self.block_value(&i.then_branch)),
                    orelse: Box::new(self.expr(els)),
                },
                None => return block_expr(vec![self.stmt_expr(e)], None, at),
            },
            syn::Expr::Let(l) => ExprKind::Named { target: Box::new(self.pat(&l.pat)), value: Box::new(self.expr(&l.expr)) },
            syn::Expr::ForLoop(_)
            | syn::Expr::While(_)
            | syn::Expr::Loop(_)
            | syn::Expr::Match(_)
            | syn::Expr::Return(_)
            | syn::Expr::Break(_)
            | syn::Expr::Continue(_)
            | syn::Expr::Assign(_) => return block_expr(vec![self.stmt_expr(e)], None, at),
            syn::Expr::Index(i) => ExprKind::Subscript { value: Box::new(self.expr(&i.expr)), index: Box::new(self.expr(&i.index)) },
            syn::Expr::Tuple(t) => ExprKind::Sequence(self.exprs(&t.elems)),
            syn::Expr::Array(a) => ExprKind::Sequence(self.exprs(&a.elems)),
            syn::Expr::Repeat(r) => ExprKind::Sequence(vec![self.expr(&r.expr), self.expr(&r.len)]),
            syn::Expr::Paren(p) => return self.expr(&p.expr),
            syn::Expr::Group(g) => return self.expr(&g.expr),
            syn::Expr::Await(a) => ExprKind::Other(vec![self.expr(&a.base)]),
            _ => ExprKind::Other(Vec::new()),
        };
        Expr::new(at, kind)
    }

    fn mac(&mut self, m: &syn::Macro, at: Span) -> Expr {
        let path = self.path(&m.path);
        let args = m.parse_body_with(Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated).ok();
        let parsed = args.is_some();
        let args = args.map(|a| self.exprs(&a)).unwrap_or_default();
        Expr::new(at, ExprKind::Macro(Box::new(MacroCall { path, args, parsed })))
    }

    /// A path as a name or attribute chain; generic arguments dropped.
    fn path(&mut self, p: &syn::Path) -> Expr {
        let mut segments = p.segments.iter();
        let Some(first) = segments.next() else { return other(Vec::new(), spanned(p)) };
        let mut out = name(&first.ident.to_string(), spanned(&first.ident));
        for s in segments {
            out = attr(out, &s.ident.to_string(), spanned(&s.ident));
        }
        out
    }

    /// A type as a type expression.
    fn ty(&mut self, t: &syn::Type) -> Expr {
        let at = spanned(t);
        match t {
            syn::Type::Path(p) => {
                let mut base = self.path(&p.path);
                // The generic arguments of the last segment: `Vec<Tensor>`.
                let generics: Vec<Expr> = match p.path.segments.last().map(|s| &s.arguments) {
                    Some(syn::PathArguments::AngleBracketed(a)) => a
                        .args
                        .iter()
                        .filter_map(|g| match g {
                            syn::GenericArgument::Type(t) => Some(self.ty(t)),
                            _ => None,
                        })
                        .collect(),
                    _ => Vec::new(),
                };
                if !generics.is_empty() {
                    let index = if generics.len() == 1 {
                        generics.into_iter().next().unwrap_or_else(|| other(Vec::new(), at))
                    } else {
                        Expr::new(at, ExprKind::Sequence(generics))
                    };
                    base = Expr::new(at, ExprKind::Subscript { value: Box::new(base), index: Box::new(index) });
                }
                base
            }
            syn::Type::Reference(r) => Expr::new(
                at,
                ExprKind::Unary {
                    op: if r.mutability.is_some() { UnaryOp::RefMut } else { UnaryOp::Ref },
                    operand: Box::new(self.ty(&r.elem)),
                },
            ),
            syn::Type::Tuple(tu) => Expr::new(at, ExprKind::Sequence(tu.elems.iter().map(|t| self.ty(t)).collect())),
            syn::Type::Slice(s) => Expr::new(at, ExprKind::Sequence(vec![self.ty(&s.elem)])),
            syn::Type::Array(a) => Expr::new(at, ExprKind::Sequence(vec![self.ty(&a.elem)])),
            // `impl nn::Module`, `dyn Iterator<Item = Tensor>`: the first
            // trait bound.
            syn::Type::ImplTrait(syn::TypeImplTrait { bounds, .. })
            | syn::Type::TraitObject(syn::TypeTraitObject { bounds, .. }) => bounds
                .iter()
                .find_map(|b| match b {
                    syn::TypeParamBound::Trait(t) => Some(self.path(&t.path)),
                    _ => None,
                })
                .unwrap_or_else(|| other(Vec::new(), at)),
            syn::Type::Paren(p) => self.ty(&p.elem),
            syn::Type::Group(g) => self.ty(&g.elem),
            _ => other(Vec::new(), at),
        }
    }

    /// A pattern as an assignment target.
    fn pat(&mut self, p: &syn::Pat) -> Expr {
        let at = spanned(p);
        match p {
            syn::Pat::Ident(i) => name(&i.ident.to_string(), spanned(&i.ident)),
            syn::Pat::Wild(_) => name("_", at),
            syn::Pat::Tuple(t) => Expr::new(at, ExprKind::Sequence(t.elems.iter().map(|p| self.pat(p)).collect())),
            syn::Pat::Slice(s) => Expr::new(at, ExprKind::Sequence(s.elems.iter().map(|p| self.pat(p)).collect())),
            syn::Pat::TupleStruct(t) => Expr::new(
                at,
                ExprKind::Call {
                    func: Box::new(self.path(&t.path)),
                    args: t.elems.iter().map(|p| self.pat(p)).collect(),
                    keywords: Box::new([]),
                    args_start: span(t.paren_token.span.open()).start,
                },
            ),
            syn::Pat::Struct(s) => Expr::new(
                at,
                ExprKind::Struct(Box::new(StructLit {
                    path: self.path(&s.path),
                    fields: s
                        .fields
                        .iter()
                        .map(|f| {
                            let member = member_name(&f.member);
                            (Ident::from(member), self.pat(&f.pat))
                        })
                        .collect(),
                    rest: None,
                })),
            ),
            syn::Pat::Reference(r) => {
                Expr::new(at, ExprKind::Unary { op: UnaryOp::Ref, operand: Box::new(self.pat(&r.pat)) })
            }
            syn::Pat::Type(t) => self.pat(&t.pat),
            syn::Pat::Paren(p) => self.pat(&p.pat),
            syn::Pat::Path(p) => self.path(&p.path),
            syn::Pat::Lit(l) => Expr::new(at, ExprKind::Literal(literal(&l.lit))),
            syn::Pat::Or(o) => Expr::new(at, ExprKind::Other(o.cases.iter().map(|p| self.pat(p)).collect())),
            _ => other(Vec::new(), at),
        }
    }
}

/// Whether an expression without a semicolon at the end of a block is
/// control flow that yields no value (`for`, `while`, `loop`, `if`
/// without `else`): a statement, not the block's tail.
fn is_unit_control(e: &syn::Expr) -> bool {
    match e {
        syn::Expr::ForLoop(_) | syn::Expr::While(_) | syn::Expr::Loop(_) => true,
        syn::Expr::If(i) => i.else_branch.is_none(),
        _ => false,
    }
}

/// A field's name: `x` of `a.x`, `0` of `a.0`.
/// The method tch's `.data` is spelled as.
fn nn_data() -> &'static str {
    memlint_semantic::api::nn::DATA
}

fn member_name(m: &syn::Member) -> String {
    match m {
        syn::Member::Named(i) => i.to_string(),
        syn::Member::Unnamed(i) => i.index.to_string(),
    }
}

fn pat_name(p: &syn::Pat) -> String {
    match p {
        syn::Pat::Ident(i) => i.ident.to_string(),
        syn::Pat::Type(t) => pat_name(&t.pat),
        syn::Pat::Reference(r) => pat_name(&r.pat),
        syn::Pat::Wild(_) => "_".to_string(),
        _ => "_".to_string(),
    }
}

/// The name of an `impl`'s type (`Net` for `impl nn::Module for Net`,
/// `Net` for `impl<'a> Net<'a>`).
fn type_name(t: &syn::Type) -> String {
    match t {
        syn::Type::Path(p) => p.path.segments.last().map_or_else(String::new, |s| s.ident.to_string()),
        syn::Type::Reference(r) => type_name(&r.elem),
        _ => String::new(),
    }
}

fn literal(l: &syn::Lit) -> Literal {
    match l {
        syn::Lit::Int(i) => i.base10_parse::<i64>().map(Literal::Int).unwrap_or(Literal::Other),
        syn::Lit::Float(f) => f.base10_parse::<f64>().map(Literal::Float).unwrap_or(Literal::Other),
        syn::Lit::Bool(b) => Literal::Bool(b.value),
        syn::Lit::Str(s) => {
            let v = s.value();
            if v.len() <= 64 {
                Literal::Str(Ident::from(v))
            } else {
                Literal::Other
            }
        }
        _ => Literal::Other,
    }
}

enum Bin {
    Arith(BinOp),
    Cmp(CmpOp),
    Bool(BoolOpKind),
    Compound,
}

fn binary(op: &syn::BinOp) -> Bin {
    use syn::BinOp as B;
    match op {
        B::Add(_) => Bin::Arith(BinOp::Add),
        B::Sub(_) => Bin::Arith(BinOp::Sub),
        B::Mul(_) => Bin::Arith(BinOp::Mult),
        B::Div(_) => Bin::Arith(BinOp::Div),
        B::Rem(_) => Bin::Arith(BinOp::Mod),
        B::And(_) => Bin::Bool(BoolOpKind::And),
        B::Or(_) => Bin::Bool(BoolOpKind::Or),
        B::Eq(_) => Bin::Cmp(CmpOp::Eq),
        B::Ne(_) => Bin::Cmp(CmpOp::NotEq),
        B::Lt(_) => Bin::Cmp(CmpOp::Lt),
        B::Le(_) => Bin::Cmp(CmpOp::LtE),
        B::Gt(_) => Bin::Cmp(CmpOp::Gt),
        B::Ge(_) => Bin::Cmp(CmpOp::GtE),
        op if compound(op).is_some() => Bin::Compound,
        _ => Bin::Arith(BinOp::Other),
    }
}

/// The operator of a compound assignment (`+=` is `Add`).
fn compound(op: &syn::BinOp) -> Option<BinOp> {
    use syn::BinOp as B;
    Some(match op {
        B::AddAssign(_) => BinOp::Add,
        B::SubAssign(_) => BinOp::Sub,
        B::MulAssign(_) => BinOp::Mult,
        B::DivAssign(_) => BinOp::Div,
        B::RemAssign(_) => BinOp::Mod,
        B::BitXorAssign(_) | B::BitAndAssign(_) | B::BitOrAssign(_) | B::ShlAssign(_) | B::ShrAssign(_) => BinOp::Other,
        _ => return None,
    })
}

/// The bindings of a `use` tree: `use tch::{nn, Tensor as T}` binds `nn`
/// to `tch.nn` and `T` to `tch.Tensor`; `self` in a group binds the
/// group's path; a glob binds `*` to the path it imports from.
fn use_tree(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<ImportBinding>) {
    let qualified = |prefix: &[String], last: &str| {
        let mut parts: Vec<&str> = prefix.iter().map(String::as_str).collect();
        if last != "self" {
            parts.push(last);
        }
        parts.join(".")
    };
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            use_tree(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let ident = n.ident.to_string();
            let local = if ident == "self" { prefix.last().cloned().unwrap_or_default() } else { ident.clone() };
            out.push(ImportBinding { local, qualified: qualified(prefix, &ident), span: spanned(n) });
        }
        syn::UseTree::Rename(r) => out.push(ImportBinding {
            local: r.rename.to_string(),
            qualified: qualified(prefix, &r.ident.to_string()),
            span: spanned(r),
        }),
        syn::UseTree::Glob(g) => {
            out.push(ImportBinding { local: "*".to_string(), qualified: prefix.join("."), span: spanned(g) })
        }
        syn::UseTree::Group(g) => {
            for t in &g.items {
                use_tree(t, prefix, out);
            }
        }
    }
}

#[cfg(test)]
mod comment_tests {
    use super::line_comments;

    fn texts(src: &str) -> Vec<&str> {
        line_comments(src).iter().map(|s| &src[s.start as usize..s.end as usize]).collect()
    }

    #[test]
    fn line_comments_outside_literals() {
        let src = "let a = \"// not\"; // one\nlet b = r#\"// \"raw\" \"#; /* // block /* nested */ */ let c = '/'; // two\nfn f<'a>(x: &'a str) {} // three\nlet d = b\"//\"; let e = '\\''; // four\n";
        assert_eq!(texts(src), ["// one", "// two", "// three", "// four"]);
    }

    #[test]
    fn a_comment_at_the_end_without_newline() {
        assert_eq!(texts("fn main() {} // memlint: ignore[ML105]"), ["// memlint: ignore[ML105]"]);
    }
}
