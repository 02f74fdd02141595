//! The names each file mentions, to tell a module class nothing of the
//! run builds ([`super::ProjectIndex::is_unreferenced_module`]).

use super::build;

/// The name `e` mentions, for [`super::FileSummary::class_refs`]: a
/// name (not `self`, the most frequent and never a class), an attribute,
/// or the last segment of a string that is a dotted identifier
/// (`"CLHead"`, `class_name="training.contrastive_head.CLHead"`). Class
/// names are any case (`mixprop`, `RNN`).
pub(crate) fn mentioned_name(e: &crate::ir::Expr) -> Option<&str> {
    use crate::ir::ExprKind;
    match &e.kind {
        ExprKind::Name(n) if n != "self" => Some(n.as_str()),
        ExprKind::Attribute { attr: n, .. } => Some(n.as_str()),
        ExprKind::Literal(crate::ir::Literal::Str(s))
            if s.len() <= 128
                && s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                && s.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'.') =>
        {
            s.rsplit('.').next()
        }
        _ => None,
    }
}

/// The hash [`super::FileSummary::class_refs`] keeps of a mentioned name.
pub(crate) fn mention_hash(name: &str) -> u64 {
    build::last_segment_hash(name)
}
