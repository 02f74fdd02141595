//! What a call passes and what a method takes: the facts of a call site
//! the index compares with the signature of its callee.

use crate::ir::{Expr, ExprKind};

/// How a method takes its arguments (after `self`), kept in one
/// allocation: every `forward` of a library has one.
#[derive(Debug, Clone, Default)]
pub struct Signature {
    /// The named parameters (not `*args` nor `**kwargs`) in order, each
    /// followed by `=` when it has a default, joined by commas:
    /// `x,x_mask,w=,g=`.
    params: Box<str>,
    /// How many of them, from the first, may be passed by position.
    positional: u16,
    /// It takes `*args`.
    var_positional: bool,
    /// It takes `**kwargs`.
    var_keywords: bool,
}

impl Signature {
    /// The signature of named parameters `(name, has_default)`, the first
    /// `positional` of which may be passed by position.
    pub fn new<'a>(params: impl IntoIterator<Item = (&'a str, bool)>, positional: usize, var_positional: bool, var_keywords: bool) -> Signature {
        let mut joined = String::new();
        for (name, has_default) in params {
            if !joined.is_empty() {
                joined.push(',');
            }
            joined.push_str(name);
            if has_default {
                joined.push('=');
            }
        }
        Signature {
            params: joined.into_boxed_str(),
            positional: u16::try_from(positional).unwrap_or(u16::MAX),
            var_positional,
            var_keywords,
        }
    }

    /// The named parameters, each with whether it has a default.
    fn params(&self) -> impl Iterator<Item = (&str, bool)> + '_ {
        self.params.split(',').filter(|p| !p.is_empty()).map(|p| match p.strip_suffix('=') {
            Some(name) => (name, true),
            None => (p, false),
        })
    }

    /// Whether a call passing `positional` arguments by position
    /// (`u8::MAX`: a `*` splat, any number) and the keyword arguments
    /// `keywords` (`**`: a `**` splat, any) binds to these parameters
    /// without a `TypeError`: not too many by position, no keyword it
    /// lacks or that a positional argument already gave, and every
    /// parameter without a default given.
    pub fn accepts(&self, positional: u8, keywords: &[String]) -> bool {
        let splat = positional == u8::MAX || keywords.iter().any(|k| k == "**");
        let by_position = if positional == u8::MAX { 0 } else { usize::from(positional) };
        let most = usize::from(self.positional);
        if positional != u8::MAX && by_position > most && !self.var_positional {
            return false;
        }
        let filled = by_position.min(most);
        for k in keywords.iter().filter(|k| *k != "**") {
            match self.params().position(|(name, _)| name == k) {
                Some(i) if i < filled => return false,
                Some(_) => {}
                None if !self.var_keywords => return false,
                None => {}
            }
        }
        splat || self.params().enumerate().all(|(i, (name, has_default))| has_default || i < filled || keywords.iter().any(|k| k == name))
    }
}

/// The arguments of a call given a literal flag: `False` (or an
/// evaluation mode's name, `"eval"`: what turns training off) and `True`,
/// by position and by keyword.
pub(crate) struct LiteralFlags {
    pub false_positions: Vec<usize>,
    pub false_keywords: Vec<String>,
    pub true_positions: Vec<usize>,
    pub true_keywords: Vec<String>,
}

impl LiteralFlags {
    pub fn of(args: &[Expr], keywords: &[crate::ir::Keyword]) -> LiteralFlags {
        let off = |a: &Expr| a.is_false() || crate::facts::guards::is_eval_mode_literal(a);
        let on = |a: &Expr| matches!(a.kind, ExprKind::Literal(crate::ir::Literal::Bool(true)));
        let positions = |f: &dyn Fn(&Expr) -> bool| args.iter().enumerate().filter(|(_, a)| f(a)).map(|(i, _)| i).collect();
        let names = |f: &dyn Fn(&Expr) -> bool| {
            keywords.iter().filter(|k| f(&k.value)).filter_map(|k| k.name.as_deref().map(str::to_string)).collect()
        };
        LiteralFlags { false_positions: positions(&off), false_keywords: names(&off), true_positions: positions(&on), true_keywords: names(&on) }
    }
}

/// How many positional arguments a call passes (`u8::MAX` with a `*args`
/// splat: any number) and the names of its keywords (`**` for a splat).
pub(crate) fn passed(args: &[Expr], keywords: &[crate::ir::Keyword]) -> (u8, Vec<String>) {
    let positional = if args.iter().any(|a| matches!(a.kind, ExprKind::Starred(_))) {
        u8::MAX
    } else {
        u8::try_from(args.len()).unwrap_or(u8::MAX)
    };
    (positional, keywords.iter().map(|k| k.name.as_deref().unwrap_or("**").to_string()).collect())
}

#[cfg(test)]
mod tests {
    use super::Signature;

    fn sig(params: &[(&str, bool)], positional: usize, var_positional: bool, var_keywords: bool) -> Signature {
        Signature::new(params.iter().copied(), positional, var_positional, var_keywords)
    }

    fn kw(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn a_call_binds_only_where_python_would_bind_it() {
        // `def forward(self, x, x_mask, w=None, g=None, reverse=False)` and
        // `def forward(self, x, x_mask, g=None)`.
        let stochastic = sig(&[("x", false), ("x_mask", false), ("w", true), ("g", true), ("reverse", true)], 5, false, false);
        let plain = sig(&[("x", false), ("x_mask", false), ("g", true)], 3, false, false);
        // `self.dp(x, x_mask, w, g=g)`: `g` twice for the plain one.
        assert!(stochastic.accepts(3, &kw(&["g"])));
        assert!(!plain.accepts(3, &kw(&["g"])));
        // `self.dp(x, x_mask, g=g, reverse=True)`: no `reverse` in the plain one.
        assert!(stochastic.accepts(2, &kw(&["g", "reverse"])));
        assert!(!plain.accepts(2, &kw(&["g", "reverse"])));
        // `self.dp(x, x_mask, g=g)`: both.
        assert!(stochastic.accepts(2, &kw(&["g"])) && plain.accepts(2, &kw(&["g"])));
        // Too many by position, or a parameter without default not given.
        assert!(!plain.accepts(4, &[]));
        assert!(!plain.accepts(1, &[]));
        assert!(plain.accepts(1, &kw(&["x_mask"])));
        // Splats may pass anything; `*args` and `**kwargs` take anything.
        assert!(plain.accepts(u8::MAX, &[]));
        assert!(plain.accepts(1, &kw(&["**"])));
        let open = sig(&[("x", false)], 1, true, true);
        assert!(open.accepts(5, &kw(&["anything"])));
        // A keyword-only parameter is not filled by position.
        let kw_only = sig(&[("x", false), ("scale", false)], 1, false, false);
        assert!(!kw_only.accepts(2, &[]));
        assert!(kw_only.accepts(1, &kw(&["scale"])));
    }
}
