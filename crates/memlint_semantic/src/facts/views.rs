//! View-of relations: which expressions (and which variables) are views of
//! which base tensor, and how much of the base they select.

use crate::ir::{Expr, ExprKind, Literal};

/// Methods returning a view with as many or more elements.
const SHAPE_VIEWS: &[&str] = &[
    "view", "view_as", "reshape", "reshape_as", "expand", "expand_as", "transpose", "t", "permute", "squeeze",
    "unsqueeze", "flatten", "unflatten", "movedim", "moveaxis", "swapaxes", "swapdims", "detach", "as_strided",
];
/// Methods returning a view of part of the base.
const PART_VIEWS: &[&str] = &["narrow", "select", "diagonal"];
/// tch's indexing method (`IndexOp::i`).
const TCH_INDEX: &str = "i";
/// tch's `t.slice(dim, start, end, step)`: a range of one dimension.
const TCH_SLICE: &str = "slice";
/// Methods returning a tuple of views.
const PIECE_VIEWS: &[&str] = &["chunk", "split", "unbind", "tensor_split", "hsplit", "vsplit"];

/// How much of its base a view chain selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Part {
    /// All of it, reshaped (`view`, `transpose`...) or minus a margin (`x[1:]`).
    Whole,
    /// A slice range (`x[:2]`, `x[..., :h]`), possibly almost all of it.
    Slice,
    /// A dimension dropped or a piece taken (`x[0]`, `select`, `chunk()[i]`).
    Piece,
}

fn index_part(e: &Expr) -> Part {
    match &e.kind {
        // `x[k:]` and `x[:-k]` drop a margin and keep most of the base.
        ExprKind::Slice { lower: Some(_), upper: None, .. } => Part::Whole,
        ExprKind::Slice { upper: Some(u), .. } if matches!(u.kind, ExprKind::Unary { operand: _, .. }) => Part::Whole,
        // `x[:n * bs]`: all of it cut to a multiple of a size (a batchify).
        ExprKind::Slice { lower: None, upper: Some(u), .. } if is_truncation(u) => Part::Whole,
        ExprKind::Slice { lower: None, upper: None, .. } => Part::Whole,
        ExprKind::Slice { .. } => Part::Slice,
        ExprKind::Literal(Literal::None | Literal::Other) => Part::Whole,
        ExprKind::Sequence(items) => items.iter().map(index_part).max().unwrap_or(Part::Whole),
        // Rust (tch's `t.i(..)`): `..` and `k..` keep most of the base.
        ExprKind::Range { end: None, .. } => Part::Whole,
        ExprKind::Range { .. } => Part::Slice,
        _ => Part::Piece,
    }
}

/// Whether a slice's end is a product of sizes, no literal among them
/// (`n_batch * bs`, `len(x) // bs * bs`): the base cut to a multiple of a
/// size, less than one multiple dropped.
fn is_truncation(end: &Expr) -> bool {
    let size = |e: &Expr| !matches!(e.kind, ExprKind::Literal(_));
    matches!(&end.kind, ExprKind::BinOp { left, op: crate::ir::BinOp::Mult, right } if size(left) && size(right))
}

/// Whether indexing `e` is unambiguously tensor indexing: a model's output may
/// be a tuple, where `out[0]` is an element, not a view.
fn is_multi_dim(e: &Expr) -> bool {
    matches!(&e.kind, ExprKind::Sequence(items) if items.len() > 1)
}

fn is_basic_index(e: &Expr) -> bool {
    match &e.kind {
        // The dimensions of `x[:, 0]`; a list among them (`x[:, [-2]]`) is
        // advanced indexing, which gathers a copy.
        ExprKind::Sequence(items) => !items.is_empty() && items.iter().all(|i| !matches!(i.kind, ExprKind::Sequence(_)) && is_basic_index(i)),
        _ => is_basic_item(e),
    }
}

/// One dimension's basic index: a slice, an integer, `None`, `...`.
fn is_basic_item(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Slice { .. } | ExprKind::Range { .. } => true,
        ExprKind::Literal(Literal::Int(_) | Literal::None | Literal::Other) => true,
        ExprKind::Unary { operand: inner, .. } => matches!(inner.kind, ExprKind::Literal(Literal::Int(_))),
        _ => false,
    }
}

/// If `e` is a view chain, its base and how much of the base it selects.
pub(crate) fn view_chain(e: &Expr) -> Option<(&Expr, Part)> {
    match &e.kind {
        ExprKind::Subscript { value, index } => {
            if let Some((recv, m)) = value.as_method_call() {
                if PIECE_VIEWS.contains(&m) && is_basic_index(index) {
                    return Some(base_of(recv, Part::Piece));
                }
            }
            if is_basic_index(index) {
                return Some(base_of(value, index_part(index)));
            }
            None
        }
        ExprKind::Call { .. } => {
            let (recv, m) = e.as_method_call()?;
            // tch's indexing, `t.i(0)`, `t.i((.., 0..3))`: a subscript.
            if m == TCH_INDEX {
                let (_, args, _) = e.as_call()?;
                let [index] = args else { return None };
                return is_basic_index(index).then(|| base_of(recv, index_part(index)));
            }
            // A string argument names keys, not dimensions: `td.select("a",
            // "b")` of a TensorDict, a data frame's columns.
            let (_, args, _) = e.as_call()?;
            if args.iter().any(|a| matches!(a.kind, ExprKind::Literal(Literal::Str(_)))) {
                return None;
            }
            if m == "narrow" || m == TCH_SLICE {
                // `data.narrow(0, 0, nbatch * bsz)`: a batchify's truncation.
                let cut = m == "narrow"
                    && matches!(args, [_, start, end] if matches!(start.kind, ExprKind::Literal(Literal::Int(0))) && is_truncation(end));
                Some(base_of(recv, if cut { Part::Whole } else { Part::Slice }))
            } else if PART_VIEWS.contains(&m) {
                Some(base_of(recv, Part::Piece))
            } else if SHAPE_VIEWS.contains(&m) {
                Some(base_of(recv, Part::Whole))
            } else {
                None
            }
        }
        ExprKind::Attribute { value, attr, .. } if matches!(attr.as_str(), "T" | "mT" | "real" | "imag") => {
            Some(base_of(value, Part::Whole))
        }
        _ => None,
    }
}

/// Whether the outermost step of the chain on its base is certainly a tensor
/// operation (a multi-dimensional index or a tensor method).
pub(crate) fn is_tensor_indexing(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Subscript { value, index } => match view_chain(value) {
            Some(_) => is_tensor_indexing(value),
            None => is_multi_dim(index) || value.as_method_call().is_some(),
        },
        ExprKind::Call { .. } => match e.as_method_call() {
            Some((recv, _)) => view_chain(recv).is_none() || is_tensor_indexing(recv),
            None => false,
        },
        ExprKind::Attribute { value, .. } => view_chain(value).is_none() || is_tensor_indexing(value),
        _ => false,
    }
}

fn base_of(e: &Expr, part: Part) -> (&Expr, Part) {
    match view_chain(e) {
        Some((b, p)) => (b, p.max(part)),
        None => (e, part),
    }
}


/// A view and its base.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewOf {
    /// The base's dotted name (`out`, `self.cache`).
    pub base: String,
    /// How much of the base the view selects.
    pub part: Part,
    /// Whether some step is certainly a tensor operation (a multi-dimensional
    /// index or a tensor method), so the base cannot be a tuple.
    pub tensor_op: bool,
    /// Whether the chain goes through `detach()`: the view shares the
    /// base's storage but not its autograd identity.
    pub detached: bool,
}

/// Whether a view chain calls `detach()` somewhere.
pub(crate) fn chain_detaches(e: &Expr) -> bool {
    let mut cur = e;
    loop {
        match &cur.kind {
            ExprKind::Subscript { value, .. } | ExprKind::Attribute { value, .. } => cur = value,
            ExprKind::Call { .. } => match cur.as_method_call() {
                Some((_, "detach")) => return true,
                Some((recv, _)) => cur = recv,
                None => return false,
            },
            _ => return false,
        }
    }
}
