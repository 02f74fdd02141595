//! A stable text form of the IR, for golden tests of frontends and for
//! reading what a frontend made of a file: one statement per line, nested
//! blocks indented by two spaces, expressions as S-expressions
//! (`(call (. opt zero_grad))`). Spans and ids are left out, so a dump
//! changes only when the lowering does.

use std::fmt::Write;

use super::{BinOp, BoolOpKind, CmpOp, Expr, ExprKind, Literal, Module, Param, Stmt, StmtKind, UnaryOp};

/// The dump of a module.
pub fn dump(module: &Module) -> String {
    let mut out = String::new();
    block(&mut out, &module.body, 0);
    out
}

fn line(out: &mut String, depth: usize, text: &str) {
    for _ in 0..depth {
        out.push_str("  ");
    }
    out.push_str(text);
    out.push('\n');
}

fn block(out: &mut String, body: &[Stmt], depth: usize) {
    for s in body {
        stmt(out, s, depth);
    }
}

fn labelled(out: &mut String, label: &str, body: &[Stmt], depth: usize) {
    if !body.is_empty() {
        line(out, depth, label);
        block(out, body, depth + 1);
    }
}

fn params(ps: &[Param], depth: usize) -> String {
    let mut out = String::new();
    for (i, p) in ps.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(&p.name);
        if let Some(a) = &p.annotation {
            let _ = write!(out, ": {}", expr(a, depth));
        }
        if let Some(d) = &p.default {
            let _ = write!(out, " = {}", expr(d, depth));
        }
    }
    out
}

fn list(es: &[Expr], depth: usize) -> String {
    es.iter().map(|e| expr(e, depth)).collect::<Vec<_>>().join(" ")
}

/// `head` followed by the expressions, space-separated (no trailing space
/// when there are none).
fn spaced(head: &str, es: &[Expr], depth: usize) -> String {
    let mut out = head.to_string();
    for e in es {
        out.push(' ');
        out.push_str(&expr(e, depth));
    }
    out
}

fn annotated(text: String, annotation: Option<&Expr>, depth: usize) -> String {
    match annotation {
        Some(a) => format!("{text} : {}", expr(a, depth)),
        None => text,
    }
}

fn stmt(out: &mut String, s: &Stmt, depth: usize) {
    match &s.kind {
        StmtKind::Expr(e) => line(out, depth, &format!("expr {}", expr(e, depth))),
        StmtKind::Assign { targets, value, annotation } => {
            let text = format!("assign {} = {}", list(targets, depth), expr(value, depth));
            line(out, depth, &annotated(text, annotation.as_deref(), depth));
        }
        StmtKind::Declare { target, annotation } => {
            line(out, depth, &annotated(format!("declare {}", expr(target, depth)), annotation.as_deref(), depth));
        }
        StmtKind::AugAssign { target, op, value } => {
            line(out, depth, &format!("augassign {} {}= {}", expr(target, depth), binop(*op), expr(value, depth)));
        }
        StmtKind::For { target, iter, body, orelse } => {
            line(out, depth, &format!("for {} in {}", expr(target, depth), expr(iter, depth)));
            block(out, body, depth + 1);
            labelled(out, "else", orelse, depth);
        }
        StmtKind::While { test, body, orelse } => {
            line(out, depth, &format!("while {}", expr(test, depth)));
            block(out, body, depth + 1);
            labelled(out, "else", orelse, depth);
        }
        StmtKind::If { test, body, orelse } => {
            line(out, depth, &format!("if {}", expr(test, depth)));
            block(out, body, depth + 1);
            labelled(out, "else", orelse, depth);
        }
        StmtKind::With { items, body } => {
            let items: Vec<String> = items
                .iter()
                .map(|i| match &i.target {
                    Some(t) => format!("{} as {}", expr(&i.context, depth), expr(t, depth)),
                    None => expr(&i.context, depth),
                })
                .collect();
            line(out, depth, &format!("with {}", items.join(", ")));
            block(out, body, depth + 1);
        }
        StmtKind::Function(f) => {
            for d in &f.decorators {
                line(out, depth, &format!("@{}", expr(d, depth)));
            }
            line(out, depth, &format!("fn {}({})", f.name, params(&f.params, depth)));
            block(out, &f.body, depth + 1);
        }
        StmtKind::Class(c) => {
            for d in c.decorators.iter() {
                line(out, depth, &format!("@{}", expr(d, depth)));
            }
            line(out, depth, &format!("class {}({})", c.name, list(&c.bases, depth)));
            block(out, &c.body, depth + 1);
        }
        StmtKind::Return(v) => match v {
            Some(v) => line(out, depth, &format!("return {}", expr(v, depth))),
            None => line(out, depth, "return"),
        },
        StmtKind::Delete(es) => line(out, depth, &format!("del {}", list(es, depth))),
        StmtKind::Import(bs) => {
            let bs: Vec<String> = bs
                .iter()
                .map(|b| if b.local == b.qualified { b.local.clone() } else { format!("{}={}", b.local, b.qualified) })
                .collect();
            line(out, depth, &format!("import {}", bs.join(" ")));
        }
        StmtKind::Block(body) => {
            line(out, depth, "block");
            block(out, body, depth + 1);
        }
        StmtKind::Try(t) => {
            line(out, depth, "try");
            block(out, &t.body, depth + 1);
            for h in t.handlers.iter() {
                let mut head = String::from("except");
                if let Some(ty) = &h.types {
                    let _ = write!(head, " {}", expr(ty, depth));
                }
                if let Some(n) = &h.name {
                    let _ = write!(head, " as {n}");
                }
                line(out, depth, &head);
                block(out, &h.body, depth + 1);
            }
            labelled(out, "else", &t.orelse, depth);
            labelled(out, "finally", &t.finalbody, depth);
        }
        StmtKind::Break => line(out, depth, "break"),
        StmtKind::Continue => line(out, depth, "continue"),
        StmtKind::Raise(es) => line(out, depth, &spaced("raise", es, depth)),
        StmtKind::Other(es) => line(out, depth, &spaced("other", es, depth)),
    }
}

fn binop(op: BinOp) -> &'static str {
    match op {
        BinOp::Add => "+",
        BinOp::Sub => "-",
        BinOp::Mult => "*",
        BinOp::Div => "/",
        BinOp::FloorDiv => "//",
        BinOp::Mod => "%",
        BinOp::Pow => "**",
        BinOp::MatMult => "@",
        BinOp::Other => "op",
    }
}

fn opt(e: Option<&Expr>, depth: usize) -> String {
    e.map_or_else(|| "_".to_string(), |e| expr(e, depth))
}

/// An expression as an S-expression; a block inside it spans lines,
/// indented below `depth`.
fn expr(e: &Expr, depth: usize) -> String {
    match &e.kind {
        ExprKind::Name(n) => n.to_string(),
        ExprKind::Attribute { value, attr, .. } => format!("(. {} {attr})", expr(value, depth)),
        ExprKind::Call { func, args, keywords, .. } => {
            let mut out = format!("(call {}", expr(func, depth));
            for a in args.iter() {
                let _ = write!(out, " {}", expr(a, depth));
            }
            for k in keywords.iter() {
                match &k.name {
                    Some(n) => {
                        let _ = write!(out, " {n}={}", expr(&k.value, depth));
                    }
                    None => {
                        let _ = write!(out, " **{}", expr(&k.value, depth));
                    }
                }
            }
            out.push(')');
            out
        }
        ExprKind::Subscript { value, index } => format!("(index {} {})", expr(value, depth), expr(index, depth)),
        ExprKind::Slice { lower, upper, step } => {
            format!("(slice {} {} {})", opt(lower.as_deref(), depth), opt(upper.as_deref(), depth), opt(step.as_deref(), depth))
        }
        ExprKind::BinOp { left, op, right } => format!("({} {} {})", binop(*op), expr(left, depth), expr(right, depth)),
        ExprKind::Unary { op, operand } => {
            let op = match op {
                UnaryOp::Neg => "neg",
                UnaryOp::Pos => "pos",
                UnaryOp::Not => "not",
                UnaryOp::Invert => "invert",
                UnaryOp::Ref => "ref",
                UnaryOp::RefMut => "ref-mut",
                UnaryOp::Deref => "deref",
            };
            format!("({op} {})", expr(operand, depth))
        }
        ExprKind::Literal(l) => match l {
            Literal::Int(i) => i.to_string(),
            Literal::Float(f) => format!("{f:?}"),
            Literal::Str(s) => format!("{s:?}"),
            Literal::Bool(b) => b.to_string(),
            Literal::None => "none".to_string(),
            Literal::Other => "?literal".to_string(),
        },
        ExprKind::Sequence(es) => format!("({})", spaced("seq", es, depth)),
        ExprKind::Dict(items) => {
            let items: Vec<String> =
                items.iter().map(|(k, v)| format!("({} {})", opt(k.as_ref(), depth), expr(v, depth))).collect();
            format!("(dict {})", items.join(" "))
        }
        ExprKind::Starred(v) => format!("(* {})", expr(v, depth)),
        ExprKind::Nested(es) => format!("({})", spaced("nested", es, depth)),
        ExprKind::Comprehension(c) => {
            let gens: Vec<String> = c
                .generators
                .iter()
                .map(|g| {
                    let ifs: String = g.ifs.iter().map(|i| format!(" if {}", expr(i, depth))).collect();
                    format!("for {} in {}{ifs}", expr(&g.target, depth), expr(&g.iter, depth))
                })
                .collect();
            format!("(comp {} {} {})", opt(c.key.as_ref(), depth), expr(&c.elt, depth), gens.join(" "))
        }
        ExprKind::Closure(c) => format!("(closure ({}) {})", params(&c.params, depth), expr(&c.body, depth)),
        ExprKind::Block(b) => {
            let mut out = String::from("(block\n");
            block(&mut out, &b.stmts, depth + 2);
            for _ in 0..depth + 1 {
                out.push_str("  ");
            }
            match &b.tail {
                Some(t) => {
                    let _ = write!(out, "=> {})", expr(t, depth + 1));
                }
                None => out.push_str("=> _)"),
            }
            out
        }
        ExprKind::Compare { left, ops, comparators } => {
            let mut out = format!("(cmp {}", expr(left, depth));
            for (op, c) in ops.iter().zip(comparators.iter()) {
                let op = match op {
                    CmpOp::Eq => "==",
                    CmpOp::NotEq => "!=",
                    CmpOp::Lt => "<",
                    CmpOp::LtE => "<=",
                    CmpOp::Gt => ">",
                    CmpOp::GtE => ">=",
                    CmpOp::Is => "is",
                    CmpOp::IsNot => "is not",
                    CmpOp::In => "in",
                    CmpOp::NotIn => "not in",
                };
                let _ = write!(out, " {op} {}", expr(c, depth));
            }
            out.push(')');
            out
        }
        ExprKind::BoolOp { op, values } => {
            let op = match op {
                BoolOpKind::And => "and",
                BoolOpKind::Or => "or",
            };
            format!("({})", spaced(op, values, depth))
        }
        ExprKind::IfExp { test, body, orelse } => {
            format!("(if {} {} {})", expr(test, depth), expr(body, depth), expr(orelse, depth))
        }
        ExprKind::Named { target, value } => format!("(:= {} {})", expr(target, depth), expr(value, depth)),
        ExprKind::Yield(v) => format!("(yield {})", opt(v.as_deref(), depth)),
        ExprKind::Try(v) => format!("(? {})", expr(v, depth)),
        ExprKind::Cast { value, ty } => format!("(as {} {})", expr(value, depth), expr(ty, depth)),
        ExprKind::Range { start, end, inclusive } => format!(
            "({} {} {})",
            if *inclusive { "range=" } else { "range" },
            opt(start.as_deref(), depth),
            opt(end.as_deref(), depth)
        ),
        ExprKind::Struct(st) => {
            let mut out = format!("(struct {}", expr(&st.path, depth));
            for (f, v) in &st.fields {
                let _ = write!(out, " ({f} {})", expr(v, depth));
            }
            if let Some(r) = &st.rest {
                let _ = write!(out, " (.. {})", expr(r, depth));
            }
            out.push(')');
            out
        }
        ExprKind::Macro(mc) => {
            if mc.parsed {
                format!("({})", spaced(&format!("macro {}", expr(&mc.path, depth)), &mc.args, depth))
            } else {
                format!("(macro {} ?tokens)", expr(&mc.path, depth))
            }
        }
        ExprKind::Other(es) => format!("({})", spaced("other", es, depth)),
    }
}
