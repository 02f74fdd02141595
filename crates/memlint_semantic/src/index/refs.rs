//! The names each file mentions, to tell a module class nothing of the
//! run builds ([`super::ProjectIndex::is_unreferenced_module`]).

use super::build;

/// The hash [`super::FileSummary::class_refs`] keeps of `e` when it mentions a
/// name (a name, an attribute, or a string that is an identifier) other
/// than `own` (the class whose method mentions it: `super(PRM, self)`
/// inside `PRM` builds nothing). Class names are any case (`mixprop`,
/// `RNN`).
pub(crate) fn class_ref(e: &crate::ir::Expr, own: Option<&str>) -> Option<u64> {
    use crate::ir::ExprKind;
    let name = match &e.kind {
        ExprKind::Name(n) | ExprKind::Attribute { attr: n, .. } => n.as_str(),
        // `"CLHead"`, `class_name="training.contrastive_head.CLHead"`.
        ExprKind::Literal(crate::ir::Literal::Str(s))
            if s.len() <= 128
                && s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                && s.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'.') =>
        {
            s.rsplit('.').next().unwrap_or(s)
        }
        _ => return None,
    };
    (own != Some(name)).then(|| build::last_segment_hash(name))
}
