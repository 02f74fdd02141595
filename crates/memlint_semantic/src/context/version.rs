//! Compatibility code: conditions on the installed torch's version or
//! API, and the names bound to them.

use super::*;

impl Context {
    /// Whether a condition checks the installed torch's version or API
    /// (`TORCH_2_4`, `torch.__version__ >= ...`, `is_torch_greater_or_equal("2.4")`,
    /// `hasattr(torch, "amp")`): its branches are compatibility code.
    pub fn is_version_guard(&self, test: &Expr) -> bool {
        // Most bindings of most files bind no flag: one look at the
        // frames instead of a scope search for every name read.
        let flags = self.frames.iter().any(|f| !f.version_flags.is_empty());
        test.any(&mut |e| match &e.kind {
            ExprKind::Name(n) if flags && self.is_version_flag(n) => true,
            // A name that matches has "version", "torch" or "pt": one
            // without a `v`, `t` or `p` is not searched for the words.
            ExprKind::Name(n) | ExprKind::Attribute { attr: n, .. }
                if n.bytes().any(|c| matches!(c | 0x20, b'v' | b't' | b'p')) =>
            {
                // Case-insensitive, without lowering a copy of every name of every test.
                let has = |w: &str| n.as_bytes().windows(w.len()).any(|s| s.eq_ignore_ascii_case(w.as_bytes()));
                has("version")
                    || ((has("torch") || n.get(..3).is_some_and(|p| p.eq_ignore_ascii_case("pt_")) || has("_pt_"))
                        && (n.bytes().any(|c| c.is_ascii_digit())
                            || ["greater", "less", "newer", "older", "_ge", "_gt", "_lt", "_le", "has_", "available"]
                                .iter()
                                .any(|w| has(w))))
            }
            ExprKind::Call { func, args, .. } if matches!(func.as_name(), Some("hasattr" | "getattr")) => {
                args.first().is_some_and(|a| self.qualified_name(a).is_some_and(|q| q.starts_with_module("torch")))
            }
            _ => false,
        })
    }

    /// Whether `name` was bound, in this function or at module level, to a
    /// check of the installed torch's version or API (`Frame::version_flags`).
    pub(super) fn is_version_flag(&self, name: &str) -> bool {
        self.frame().version_flags.contains(name) || self.module_level(name, |f| f.version_flags.contains(name).then_some(())).is_some()
    }
}
