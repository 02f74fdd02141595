//! The Python frontend: parses with `ruff_python_parser` and lowers the AST
//! into memlint's language-neutral IR ([`memlint_semantic::ir`]).
//!
//! This crate is the only one that names the parser's types, so a parser
//! upgrade (its 0.0.x API moves) touches this crate alone.
//!
//! Parsing is error-tolerant: a file with syntax errors still yields the
//! statements the parser recovered, plus the errors with their spans.
//!
//! ```
//! let parsed = memlint_python::parse("import torch\nx = torch.zeros(3)\n");
//! assert!(parsed.errors.is_empty());
//! assert_eq!(parsed.module.body.len(), 2);
//! ```

use memlint_diagnostics::Span;
use memlint_semantic::ir::{
    BinOp, BoolOpKind, Class, Closure, CmpOp, Comprehension, Expr, Generator, ExprKind, Function, Handler, ImportBinding, Keyword, Language, Literal, Module,
    Ident, Param, Stmt, StmtKind, Try, UnaryOp, WithItem, Words,
};
use ruff_python_ast as ast;
use ruff_python_parser::{parse_unchecked, Mode, ParseOptions};
use ruff_text_size::{Ranged, TextRange};

/// A syntax error found while parsing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError {
    /// Where the parser gave up on this construct.
    pub span: Span,
    /// The parser's message.
    pub message: String,
}

/// The result of parsing one Python file.
#[derive(Debug, Clone)]
pub struct ParsedPython {
    /// The lowered module (what the parser recovered, when there are errors).
    pub module: Module,
    /// Syntax errors, in source order.
    pub errors: Vec<SyntaxError>,
    /// Spans of every `#` comment, in source order (for suppressions).
    pub comments: Vec<Span>,
}

/// Parses and lowers Python source.
pub fn parse(source: &str) -> ParsedPython {
    let parsed = parse_unchecked(source, ParseOptions::from(Mode::Module));
    let errors = parsed
        .errors()
        .iter()
        .map(|e| SyntaxError { span: span(e.location), message: e.error.to_string() })
        .collect();
    let comments = parsed
        .tokens()
        .iter()
        .filter(|t| t.kind() == ast::token::TokenKind::Comment)
        .map(|t| span(t.range()))
        .collect();
    WORDS.set(Words::NONE);
    DEPTH.set(0);
    TOO_DEEP.set(None);
    let mut body = match parsed.syntax() {
        ast::Mod::Module(m) => lower_body(&m.body),
        ast::Mod::Expression(e) => vec![Stmt::new(span(e.range), StmtKind::Expr(lower_expr(&e.body)))],
    };
    let mut errors: Vec<SyntaxError> = errors;
    if let Some(at) = TOO_DEEP.take() {
        // Nothing of such a file is checked: an error at the first node
        // past the limit, and an empty module. The parser's tree is not
        // freed: dropping it recurses once per level, as deep as the input
        // nests (its memory is bounded by the file-size limit).
        std::mem::forget(parsed);
        body = Vec::new();
        errors.insert(
            0,
            SyntaxError {
                span: Span::new(at, at),
                message: format!("nested too deeply (more than {MAX_NESTING} levels of statements and expressions): not checked"),
            },
        );
    }
    let body = marimo_cells(body);
    ParsedPython { module: Module::new(Language::Python, body, WORDS.get()), errors, comments }
}

/// A marimo notebook (`app = marimo.App(...)`, each cell a function
/// decorated `@app.cell` that takes the names other cells define as its
/// parameters and returns the names it defines) is a notebook: each cell's
/// body is lowered at module level, in file order, without its final
/// `return`, so that `torch` in a cell is the module another cell imported,
/// not an unknown parameter. Other code is left as it is.
fn marimo_cells(body: Vec<Stmt>) -> Vec<Stmt> {
    let is_app = |s: &Stmt| match &s.kind {
        StmtKind::Assign { targets, value, .. } => {
            targets.len() == 1
                && targets[0].as_name() == Some("app")
                && value.as_call().and_then(|(f, _, _)| f.dotted()).is_some_and(|d| d.as_str() == "marimo.App")
        }
        _ => false,
    };
    if !body.iter().any(is_app) {
        return body;
    }
    let is_cell = |d: &Expr| {
        let d = d.as_call().map_or(d, |(f, _, _)| f);
        d.dotted().is_some_and(|d| d.as_str() == "app.cell")
    };
    let mut out = Vec::with_capacity(body.len());
    for s in body {
        match s.kind {
            StmtKind::Function(f) if f.decorators.iter().any(is_cell) => {
                let mut cell = f.body;
                if matches!(cell.last().map(|s| &s.kind), Some(StmtKind::Return(_))) {
                    cell.pop();
                }
                out.extend(cell);
            }
            kind => out.push(Stmt { kind, ..s }),
        }
    }
    out
}

/// The deepest nesting of statements and expressions lowered (a block
/// inside a block, an operand inside an operator, an attribute of an
/// attribute). Python itself refuses far less: 100 levels of indentation,
/// 200 nested brackets, 20 nested loops. A file nested deeper is one
/// syntax error and is not checked, so that the walks over the IR, which
/// recurse once per level, are bounded on any input.
pub const MAX_NESTING: u32 = 1000;

thread_local! {
    /// The nesting depth of the node being lowered.
    static DEPTH: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    /// Where the nesting first went past [`MAX_NESTING`].
    static TOO_DEEP: std::cell::Cell<Option<u32>> = const { std::cell::Cell::new(None) };
}

/// One level of nesting while it is lowered; `None` past [`MAX_NESTING`]
/// (the node at `range` is then lowered as a placeholder).
struct Nesting;

impl Nesting {
    fn enter(range: TextRange) -> Option<Nesting> {
        let depth = DEPTH.get();
        if depth >= MAX_NESTING || TOO_DEEP.get().is_some() {
            if TOO_DEEP.get().is_none() {
                TOO_DEEP.set(Some(range.start().to_u32()));
            }
            return None;
        }
        DEPTH.set(depth + 1);
        Some(Nesting)
    }
}

impl Drop for Nesting {
    fn drop(&mut self) {
        DEPTH.set(DEPTH.get().saturating_sub(1));
    }
}

/// What stands for a node past the nesting limit (the file is then not checked).
fn placeholder(range: TextRange) -> Expr {
    Expr::new(span(range), ExprKind::Literal(Literal::Other))
}

/// Longer string literals are lowered as [`Literal::Other`].
const MAX_STRING_LITERAL: usize = 64;

thread_local! {
    /// The [`Words`] mentioned so far in the definition being lowered.
    static WORDS: std::cell::Cell<Words> = const { std::cell::Cell::new(Words::NONE) };
}

/// Records an identifier for the enclosing definitions' [`Words`].
fn mention(ident: &str) {
    let w = Words::of(ident);
    if w != Words::NONE {
        WORDS.set(WORDS.get().union(w));
    }
}

fn span(r: TextRange) -> Span {
    Span::new(r.start().to_u32(), r.end().to_u32())
}

fn lower_body(body: &[ast::Stmt]) -> Vec<Stmt> {
    body.iter().map(lower_stmt).collect()
}

fn op(o: ast::Operator) -> BinOp {
    let op = match o {
        ast::Operator::Add => BinOp::Add,
        ast::Operator::Sub => BinOp::Sub,
        ast::Operator::Mult => BinOp::Mult,
        ast::Operator::Div => BinOp::Div,
        ast::Operator::FloorDiv => BinOp::FloorDiv,
        ast::Operator::Mod => BinOp::Mod,
        ast::Operator::Pow => BinOp::Pow,
        ast::Operator::MatMult => BinOp::MatMult,
        _ => BinOp::Other,
    };
    if matches!(op, BinOp::Div | BinOp::Mult) {
        WORDS.set(WORDS.get().union(Words::DIV_MUL));
    }
    op
}

fn params(p: &ast::Parameters) -> Vec<Param> {
    let mut out = Vec::new();
    for pd in p.posonlyargs.iter().chain(p.args.iter()).chain(p.kwonlyargs.iter()) {
        out.push(Param {
            name: pd.parameter.name.id.to_string(),
            annotation: pd.parameter.annotation.as_deref().map(lower_expr),
            default: pd.default.as_deref().map(lower_expr),
        });
    }
    for v in p.vararg.iter().chain(p.kwarg.iter()) {
        out.push(Param {
            name: v.name.id.to_string(),
            annotation: v.annotation.as_deref().map(lower_expr),
            default: None,
        });
    }
    out
}

fn lower_stmt(s: &ast::Stmt) -> Stmt {
    let Some(_level) = Nesting::enter(s.range()) else {
        return Stmt::new(span(s.range()), StmtKind::Expr(placeholder(s.range())));
    };
    let kind = match s {
        ast::Stmt::FunctionDef(f) => {
            // The function's own words, then the enclosing definitions'.
            let outer = WORDS.replace(Words::NONE);
            let mut function = Function {
                name: f.name.id.to_string(),
                name_span: span(f.name.range),
                decorators: f.decorator_list.iter().map(|d| lower_expr(&d.expression)).collect(),
                params: params(&f.parameters),
                positional: u16::try_from(f.parameters.posonlyargs.len() + f.parameters.args.len()).unwrap_or(u16::MAX),
                var_positional: f.parameters.vararg.is_some(),
                var_keywords: f.parameters.kwarg.is_some(),
                body: lower_body(&f.body),
                words: Words::NONE,
                locals: std::sync::Arc::from([]),
            };
            function.words = WORDS.get();
            function.locals = memlint_semantic::ir::bound_names(&function.body);
            WORDS.set(outer.union(function.words));
            StmtKind::Function(Box::new(function))
        }
        ast::Stmt::ClassDef(c) => StmtKind::Class(Box::new(Class {
            name: c.name.id.to_string(),
            bases: c.arguments.as_ref().map(|a| a.args.iter().map(lower_expr).collect()).unwrap_or_default(),
            decorators: c.decorator_list.iter().map(|d| lower_expr(&d.expression)).collect(),
            body: lower_body(&c.body),
        })),
        ast::Stmt::Return(r) => StmtKind::Return(r.value.as_deref().map(lower_expr)),
        ast::Stmt::Delete(d) => StmtKind::Delete(d.targets.iter().map(lower_expr).collect()),
        ast::Stmt::Assign(a) => {
            StmtKind::Assign { targets: a.targets.iter().map(lower_expr).collect(), value: boxed(&a.value), annotation: None }
        }
        ast::Stmt::AugAssign(a) => {
            StmtKind::AugAssign { target: boxed(&a.target), op: op(a.op), value: boxed(&a.value) }
        }
        ast::Stmt::AnnAssign(a) => match &a.value {
            Some(v) => StmtKind::Assign {
                targets: vec![lower_expr(&a.target)],
                value: boxed(v),
                annotation: Some(boxed(&a.annotation)),
            },
            None => StmtKind::Declare { target: boxed(&a.target), annotation: Some(boxed(&a.annotation)) },
        },
        ast::Stmt::TypeAlias(_) => StmtKind::Other(vec![]),
        ast::Stmt::For(f) => StmtKind::For {
            target: boxed(&f.target),
            iter: boxed(&f.iter),
            body: lower_body(&f.body),
            orelse: lower_body(&f.orelse),
        },
        ast::Stmt::While(w) => {
            StmtKind::While { test: boxed(&w.test), body: lower_body(&w.body), orelse: lower_body(&w.orelse) }
        }
        ast::Stmt::If(i) => lower_if(&i.test, &i.body, &i.elif_else_clauses),
        ast::Stmt::With(w) => StmtKind::With {
            items: w
                .items
                .iter()
                .map(|it| WithItem {
                    context: lower_expr(&it.context_expr),
                    target: it.optional_vars.as_deref().map(lower_expr),
                })
                .collect(),
            body: lower_body(&w.body),
        },
        ast::Stmt::Match(m) => {
            let mut blocks = Vec::new();
            for case in &m.cases {
                blocks.push(Stmt::new(span(case.range), StmtKind::Block(lower_body(&case.body))));
            }
            let subject = Stmt::new(span(m.subject.range()), StmtKind::Expr(lower_expr(&m.subject)));
            blocks.insert(0, subject);
            StmtKind::Block(blocks)
        }
        ast::Stmt::Raise(r) => StmtKind::Raise(r.exc.iter().chain(r.cause.iter()).map(|e| lower_expr(e)).collect()),
        ast::Stmt::Try(t) => StmtKind::Try(Box::new(Try {
            body: lower_body(&t.body),
            handlers: t
                .handlers
                .iter()
                .map(|h| {
                    let ast::ExceptHandler::ExceptHandler(h) = h;
                    Handler {
                        span: span(h.range),
                        types: h.type_.as_deref().map(lower_expr),
                        name: h.name.as_ref().map(|n| n.id.to_string()),
                        body: lower_body(&h.body),
                    }
                })
                .collect(),
            orelse: lower_body(&t.orelse),
            finalbody: lower_body(&t.finalbody).into_boxed_slice(),
        })),
        ast::Stmt::Assert(a) => {
            StmtKind::Other(std::iter::once(&*a.test).chain(a.msg.as_deref()).map(lower_expr).collect())
        }
        ast::Stmt::Import(i) => StmtKind::Import(
            i.names
                .iter()
                .map(|a| {
                    a.name.id.split('.').for_each(mention);
                    let full = a.name.id.to_string();
                    match &a.asname {
                        Some(asname) => ImportBinding { local: asname.id.to_string(), qualified: full, span: span(a.range) },
                        None => {
                            // `import a.b` binds `a`, which refers to module `a`.
                            let root = full.split('.').next().unwrap_or(&full).to_string();
                            ImportBinding { local: root.clone(), qualified: root, span: span(a.range) }
                        }
                    }
                })
                .collect(),
        ),
        ast::Stmt::ImportFrom(i) => {
            if let Some(m) = &i.module {
                m.id.split('.').for_each(mention);
            }
            i.names.iter().for_each(|a| mention(&a.name.id));
            // Relative imports name the project's own modules, never torch.
            let module = if i.level > 0 {
                format!("{}{}", ".".repeat(i.level as usize), i.module.as_ref().map(|m| m.id.as_str()).unwrap_or(""))
            } else {
                i.module.as_ref().map(|m| m.id.to_string()).unwrap_or_default()
            };
            // `from utils import *` is kept as the binding `*` of
            // `utils.*`: the names it brings in are resolved through the
            // project index.
            StmtKind::Import(
                i.names
                    .iter()
                    .map(|a| ImportBinding {
                        local: a.asname.as_ref().unwrap_or(&a.name).id.to_string(),
                        qualified: format!("{module}.{}", a.name.id),
                        span: span(a.range),
                    })
                    .collect(),
            )
        }
        // A docstring (or any string statement) is never read by a rule:
        // its text is not copied.
        ast::Stmt::Expr(e) if e.value.is_string_literal_expr() => {
            StmtKind::Expr(Expr::new(span(e.value.range()), ExprKind::Literal(Literal::Other)))
        }
        ast::Stmt::Expr(e) => StmtKind::Expr(lower_expr(&e.value)),
        ast::Stmt::Global(_)
        | ast::Stmt::Nonlocal(_)
        | ast::Stmt::Pass(_)
        | ast::Stmt::IpyEscapeCommand(_) => StmtKind::Other(vec![]),
        ast::Stmt::Break(_) => StmtKind::Break,
        ast::Stmt::Continue(_) => StmtKind::Continue,
    };
    Stmt::new(span(s.range()), kind)
}

fn lower_if(test: &ast::Expr, body: &[ast::Stmt], clauses: &[ast::ElifElseClause]) -> StmtKind {
    // Each `elif` is an `if` nested in the one before.
    let Some(_level) = Nesting::enter(test.range()) else {
        return StmtKind::Expr(placeholder(test.range()));
    };
    let orelse = match clauses.split_first() {
        None => vec![],
        Some((first, rest)) => match &first.test {
            Some(t) => vec![Stmt::new(span(first.range), lower_if(t, &first.body, rest))],
            None => lower_body(&first.body),
        },
    };
    StmtKind::If { test: boxed(test), body: lower_body(body), orelse }
}

/// The expressions an f-string's elements interpolate, nested format
/// specifications (`{x:{width}}`) included, in source order.
fn interpolations<'a>(elements: impl Iterator<Item = &'a ast::InterpolatedStringElement>, out: &mut Vec<Expr>) {
    for element in elements {
        if let ast::InterpolatedStringElement::Interpolation(i) = element {
            out.push(lower_expr(&i.expression));
            if let Some(spec) = &i.format_spec {
                interpolations(spec.elements.iter(), out);
            }
        }
    }
}

fn boxed(e: &ast::Expr) -> Box<Expr> {
    Box::new(lower_expr(e))
}

fn lower_expr(e: &ast::Expr) -> Expr {
    let Some(_level) = Nesting::enter(e.range()) else {
        return placeholder(e.range());
    };
    let kind = match e {
        ast::Expr::Name(n) => {
            mention(&n.id);
            ExprKind::Name(Ident::from(n.id.as_str()))
        }
        ast::Expr::Attribute(a) => {
            if a.attr.id.as_str() != "torch" {
                mention(&a.attr.id);
            }
            ExprKind::Attribute { value: boxed(&a.value), attr: Ident::from(a.attr.id.as_str()), attr_span: span(a.attr.range) }
        }
        ast::Expr::Call(c) => ExprKind::Call {
            func: boxed(&c.func),
            args: c.arguments.args.iter().map(lower_expr).collect(),
            keywords: c
                .arguments
                .keywords
                .iter()
                .map(|k| Keyword { name: k.arg.as_ref().map(|a| Ident::from(a.id.as_str())), value: lower_expr(&k.value) })
                .collect(),
            args_start: span(c.arguments.range).start,
        },
        ast::Expr::Subscript(s) => ExprKind::Subscript { value: boxed(&s.value), index: boxed(&s.slice) },
        ast::Expr::Slice(s) => ExprKind::Slice {
            lower: s.lower.as_deref().map(boxed),
            upper: s.upper.as_deref().map(boxed),
            step: s.step.as_deref().map(boxed),
        },
        ast::Expr::BinOp(b) => ExprKind::BinOp { left: boxed(&b.left), op: op(b.op), right: boxed(&b.right) },
        ast::Expr::UnaryOp(u) => ExprKind::Unary {
            op: match u.op {
                ast::UnaryOp::USub => UnaryOp::Neg,
                ast::UnaryOp::UAdd => UnaryOp::Pos,
                ast::UnaryOp::Not => UnaryOp::Not,
                ast::UnaryOp::Invert => UnaryOp::Invert,
            },
            operand: boxed(&u.operand),
        },
        ast::Expr::NumberLiteral(n) => ExprKind::Literal(match &n.value {
            ast::Number::Int(i) => i.as_i64().map(Literal::Int).unwrap_or(Literal::Other),
            ast::Number::Float(f) => Literal::Float(*f),
            ast::Number::Complex { .. } => Literal::Other,
        }),
        // Rules compare strings with short keys (`"params"`, `"tf"`); a
        // message or a template is not copied.
        ast::Expr::StringLiteral(s) => ExprKind::Literal(match s.value.to_str() {
            v if v.len() <= MAX_STRING_LITERAL => {
                // `device = "cuda"` / `"cuda:0"` says the program runs on a GPU.
                if v.starts_with("cuda") {
                    mention("cuda");
                }
                Literal::Str(Ident::from(v))
            }
            _ => Literal::Other,
        }),
        ast::Expr::BooleanLiteral(b) => ExprKind::Literal(Literal::Bool(b.value)),
        ast::Expr::NoneLiteral(_) => ExprKind::Literal(Literal::None),
        ast::Expr::BytesLiteral(_) | ast::Expr::EllipsisLiteral(_) => ExprKind::Literal(Literal::Other),
        ast::Expr::Tuple(t) => ExprKind::Sequence(t.elts.iter().map(lower_expr).collect()),
        ast::Expr::List(l) => ExprKind::Sequence(l.elts.iter().map(lower_expr).collect()),
        ast::Expr::Set(s) => ExprKind::Sequence(s.elts.iter().map(lower_expr).collect()),
        ast::Expr::Dict(d) => {
            ExprKind::Dict(d.items.iter().map(|it| (it.key.as_ref().map(lower_expr), lower_expr(&it.value))).collect())
        }
        ast::Expr::Starred(s) => ExprKind::Starred(boxed(&s.value)),
        ast::Expr::Lambda(l) => ExprKind::Closure(Box::new(Closure {
            params: l.parameters.as_deref().map(params).unwrap_or_default(),
            body: lower_expr(&l.body),
        })),
        ast::Expr::ListComp(c) => ExprKind::Comprehension(Box::new(comprehension(&c.elt, None, &c.generators))),
        ast::Expr::SetComp(c) => ExprKind::Comprehension(Box::new(comprehension(&c.elt, None, &c.generators))),
        ast::Expr::Generator(c) => ExprKind::Comprehension(Box::new(comprehension(&c.elt, None, &c.generators))),
        ast::Expr::DictComp(c) => {
            ExprKind::Comprehension(Box::new(comprehension(&c.value, c.key.as_deref(), &c.generators)))
        }
        ast::Expr::BoolOp(b) => ExprKind::BoolOp {
            op: match b.op {
                ast::BoolOp::And => BoolOpKind::And,
                ast::BoolOp::Or => BoolOpKind::Or,
            },
            values: b.values.iter().map(lower_expr).collect(),
        },
        ast::Expr::Named(n) => ExprKind::Named { target: boxed(&n.target), value: boxed(&n.value) },
        ast::Expr::If(i) => ExprKind::IfExp { test: boxed(&i.test), body: boxed(&i.body), orelse: boxed(&i.orelse) },
        ast::Expr::Await(a) => ExprKind::Other(vec![lower_expr(&a.value)]),
        ast::Expr::Yield(y) => ExprKind::Yield(y.value.as_deref().map(boxed)),
        ast::Expr::YieldFrom(y) => ExprKind::Yield(Some(boxed(&y.value))),
        ast::Expr::Compare(c) => ExprKind::Compare {
            left: boxed(&c.left),
            ops: c
                .ops
                .iter()
                .map(|o| match o {
                    ast::CmpOp::Eq => CmpOp::Eq,
                    ast::CmpOp::NotEq => CmpOp::NotEq,
                    ast::CmpOp::Lt => CmpOp::Lt,
                    ast::CmpOp::LtE => CmpOp::LtE,
                    ast::CmpOp::Gt => CmpOp::Gt,
                    ast::CmpOp::GtE => CmpOp::GtE,
                    ast::CmpOp::In => CmpOp::In,
                    ast::CmpOp::NotIn => CmpOp::NotIn,
                    ast::CmpOp::Is => CmpOp::Is,
                    ast::CmpOp::IsNot => CmpOp::IsNot,
                })
                .collect(),
            comparators: c.comparators.iter().map(lower_expr).collect(),
        },
        // An f-string evaluates its interpolations (`f"{loss.item():.3f}"`),
        // and formats their values.
        ast::Expr::FString(f) => {
            let mut out = Vec::new();
            interpolations(f.value.elements(), &mut out);
            ExprKind::Other(out)
        }
        ast::Expr::TString(_) | ast::Expr::IpyEscapeCommand(_) => ExprKind::Other(vec![]),
    };
    Expr::new(span(e.range()), kind)
}

fn comprehension(elt: &ast::Expr, key: Option<&ast::Expr>, gens: &[ast::Comprehension]) -> Comprehension {
    Comprehension {
        generators: gens
            .iter()
            .map(|g| Generator {
                target: lower_expr(&g.target),
                iter: lower_expr(&g.iter),
                ifs: g.ifs.iter().map(lower_expr).collect(),
            })
            .collect(),
        key: key.map(lower_expr),
        elt: lower_expr(elt),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memlint_semantic::ir::{Arm, ExprId};

    #[test]
    fn lowers_imports_with_aliases() {
        let p = parse("import torch.nn as nn\nimport torch.cuda.amp\nfrom torch.cuda.amp import autocast as ac\n");
        let StmtKind::Import(b) = &p.module.body[0].kind else { panic!("not an import") };
        assert_eq!((b[0].local.as_str(), b[0].qualified.as_str()), ("nn", "torch.nn"));
        let StmtKind::Import(b) = &p.module.body[1].kind else { panic!("not an import") };
        assert_eq!((b[0].local.as_str(), b[0].qualified.as_str()), ("torch", "torch"));
        let StmtKind::Import(b) = &p.module.body[2].kind else { panic!("not an import") };
        assert_eq!((b[0].local.as_str(), b[0].qualified.as_str()), ("ac", "torch.cuda.amp.autocast"));
    }

    #[test]
    fn marimo_cells_are_lowered_at_module_level() {
        let src = "import marimo\napp = marimo.App()\n\n@app.cell\ndef _():\n    import torch\n    return (torch,)\n\n@app.cell(hide_code=True)\ndef _(torch):\n    x = torch.zeros(3)\n    return (x,)\n\n@app.function\ndef helper(y):\n    return y\n";
        let p = parse(src);
        let kinds: Vec<&str> = p
            .module
            .body
            .iter()
            .map(|s| match &s.kind {
                StmtKind::Import(_) => "import",
                StmtKind::Assign { .. } => "assign",
                StmtKind::Function(_) => "function",
                _ => "other",
            })
            .collect();
        // The cells' bodies without their `return`; `@app.function` stays a function.
        assert_eq!(kinds, ["import", "assign", "import", "assign", "function"]);
        // The same decorators without `marimo.App` are ordinary functions.
        let p = parse("@app.cell\ndef _(torch):\n    return torch\n");
        assert!(matches!(p.module.body[0].kind, StmtKind::Function(_)));
    }

    #[test]
    fn recovers_after_syntax_error() {
        let p = parse("import torch\ndef f(:\n    pass\nx = torch.zeros(3)\n");
        assert!(!p.errors.is_empty());
        assert!(p.module.body.iter().any(|s| matches!(s.kind, StmtKind::Assign { .. })));
    }

    #[test]
    fn collects_comments() {
        let src = "x = 1  # noqa: ML201\ns = '# not a comment'\n";
        let p = parse(src);
        assert_eq!(p.comments.len(), 1);
        let c = p.comments[0];
        assert_eq!(&src[c.start as usize..c.end as usize], "# noqa: ML201");
    }

    /// The statement whose source starts with `prefix` (after indentation).
    fn find<'m>(m: &'m Module, src: &str, prefix: &str) -> &'m Stmt {
        let mut found = None;
        fn walk<'m>(body: &'m [Stmt], src: &str, prefix: &str, found: &mut Option<&'m Stmt>) {
            for s in body {
                if src[s.span.start as usize..].starts_with(prefix) && found.is_none() {
                    *found = Some(s);
                }
                for b in s.all_blocks() {
                    walk(b, src, prefix, found);
                }
            }
        }
        walk(&m.body, src, prefix, &mut found);
        found.unwrap_or_else(|| panic!("no statement `{prefix}`"))
    }

    #[test]
    fn numbers_nodes_in_source_order_with_their_tree() {
        let src = "\
import torch
def train(loader):
    for batch in loader:
        if batch.ok:
            loss = f(batch)
        else:
            loss = g(batch)
        loss.backward()
    class Box:
        x = h(1)
        def m(self):
            y = k(2)
";
        let m = parse(src).module;
        let t = &m.tree;
        let train = find(&m, src, "def train");
        let for_ = find(&m, src, "for batch");
        let if_ = find(&m, src, "if batch.ok");
        let then = find(&m, src, "loss = f");
        let else_ = find(&m, src, "loss = g");
        let bw = find(&m, src, "loss.backward");
        let class_x = find(&m, src, "x = h");
        let y = find(&m, src, "y = k");
        let method = find(&m, src, "def m");
        // Source order, and every id finds its statement.
        let ids = [train.id, for_.id, if_.id, then.id, else_.id, bw.id, class_x.id, method.id, y.id];
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
        // Dense from 0 in pre-order, and every id finds its statement.
        let mut all = Vec::new();
        fn pre<'m>(body: &'m [Stmt], out: &mut Vec<&'m Stmt>) {
            for s in body {
                out.push(s);
                s.all_blocks().for_each(|b| pre(b, out));
            }
        }
        pre(&m.body, &mut all);
        assert_eq!(all.len(), t.stmt_count());
        for (i, s) in all.iter().enumerate() {
            assert_eq!(s.id.index(), i);
            assert!(std::ptr::eq(m.stmt(s.id).expect("every id is found"), *s));
        }
        // Parents, arms, subtrees.
        assert_eq!(t.parent(if_.id), Some(for_.id));
        assert_eq!(t.parent(train.id), None);
        assert_eq!(t.arm(else_.id), Arm::Else);
        assert!(t.contains(for_.id, else_.id) && !t.contains(if_.id, bw.id));
        assert_eq!(t.last_in(for_.id), bw.id);
        // Function, loop, guards.
        assert_eq!(t.enclosing_function(then.id), Some(train.id));
        assert_eq!(t.enclosing_function(class_x.id), Some(train.id), "a class body belongs to the function around it");
        assert_eq!(t.enclosing_function(y.id), Some(method.id));
        assert_eq!(t.enclosing_loop(else_.id), Some(for_.id));
        assert_eq!(t.enclosing_loop(y.id), None, "a loop does not reach into a nested definition");
        assert_eq!(t.guards(then.id).collect::<Vec<_>>(), vec![(if_.id, Arm::Body)]);
        assert_eq!(t.guards(else_.id).collect::<Vec<_>>(), vec![(if_.id, Arm::Else)]);
        assert_eq!(t.guards(bw.id).count(), 0);
        assert_eq!(m.enclosing_function_body(y.id).map(|b| b.len()), Some(1));
        // Expressions: numbered, each owned by its statement.
        let StmtKind::Assign { value, .. } = &then.kind else { panic!() };
        assert_eq!(t.owner(value.id), Some(then.id));
        let StmtKind::If { test, .. } = &if_.kind else { panic!() };
        assert!(test.id < value.id);
        assert_eq!(t.owner(test.id), Some(if_.id));
        let StmtKind::Expr(call) = &bw.kind else { panic!() };
        let (recv, _) = call.as_method_call().expect("a method call");
        assert_eq!(t.owner(recv.id), Some(bw.id), "after a compound statement");
        assert_eq!(t.owner(ExprId::DETACHED), None);
    }

    #[test]
    fn lowers_closures_annotations_and_unary_operators() {
        let src = "\
import torch
scale: float = -1.0
count: int
fn = lambda p, lr=0.1: p.add_(-lr * p.grad)
ok = not torch.cuda.is_available()
";
        let expected = "\
import torch
assign scale = (neg 1.0) : float
declare count : int
assign fn = (closure (p, lr = 0.1) (call (. p add_) (* (neg lr) (. p grad))))
assign ok = (not (call (. (. torch cuda) is_available)))
";
        assert_eq!(memlint_semantic::ir::dump(&parse(src).module), expected);
    }

    #[test]
    fn f_strings_keep_their_interpolations() {
        let src = "print(f\"step {i}: {loss.item():.{digits}f}\", f\"plain\")\n";
        let expected = "expr (call print (other i (call (. loss item)) digits) (other))\n";
        assert_eq!(memlint_semantic::ir::dump(&parse(src).module), expected);
    }

    #[test]
    fn previous_sibling_stays_in_the_block() {
        let module = parse("a = 1\nfor x in y:\n    b = 2\n    c = 3\nd = 4\n").module;
        let StmtKind::For { body, .. } = &module.body[1].kind else { panic!() };
        let prev = |id| module.previous_sibling(id).map(|s| s.id);
        assert_eq!(prev(body[1].id), Some(body[0].id));
        assert_eq!(prev(body[0].id), None, "first of the loop's body");
        assert_eq!(prev(module.body[2].id), Some(module.body[1].id));
        assert_eq!(prev(module.body[0].id), None);
    }
}
