//! Rule selection: which codes run.

use std::collections::BTreeSet;
use std::fmt;

use crate::registry::{all_metas, RuleMeta};

/// A rule selector: `ALL`, a code (`ML201`), a code prefix (`ML2`) or a
/// rule name (`eval-without-no-grad`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    text: String,
}

/// A selector that matches no rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown rule code or prefix `{0}` (see `memlint rules`)")]
pub struct SelectorError(pub String);

impl Selector {
    /// Parses a selector; fails when it matches no rule.
    pub fn parse(text: &str) -> Result<Selector, SelectorError> {
        let s = Selector { text: text.trim().to_string() };
        if s.text.is_empty() || !all_metas().iter().any(|m| s.matches(m)) {
            return Err(SelectorError(text.to_string()));
        }
        Ok(s)
    }

    /// Whether the selector matches a rule.
    pub fn matches(&self, meta: &RuleMeta) -> bool {
        let t = self.text.as_str();
        t.eq_ignore_ascii_case("ALL")
            || meta.name == t
            || (t.len() >= 2 && meta.code.len() >= t.len() && meta.code[..t.len()].eq_ignore_ascii_case(t))
    }

    /// Whether the selector matches a code.
    pub fn matches_code(&self, code: &str) -> bool {
        all_metas().iter().any(|m| m.code == code && self.matches(m))
    }

    /// Specificity used to order conflicting select/ignore (longer wins).
    pub fn specificity(&self) -> usize {
        if self.text.eq_ignore_ascii_case("ALL") {
            0
        } else if self.text.contains('-') {
            usize::MAX
        } else {
            self.text.len()
        }
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// The set of enabled codes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleSet {
    codes: BTreeSet<&'static str>,
}

impl RuleSet {
    /// The rules enabled by default (every `error` and `warning` rule;
    /// `info` rules are opt-in).
    pub fn defaults() -> RuleSet {
        RuleSet { codes: all_metas().iter().filter(|m| m.default_enabled).map(|m| m.code).collect() }
    }

    /// Applies a selection: `select` replaces the defaults when given, then
    /// `extend_select` adds and `ignore` removes. Between a select and an
    /// ignore that both match a rule, the more specific selector wins
    /// (`--select ML2 --ignore ML203` keeps ML201, drops ML203).
    pub fn from_selection(select: Option<&[Selector]>, extend_select: &[Selector], ignore: &[Selector]) -> RuleSet {
        let base = match select {
            Some(sel) => {
                RuleSet { codes: all_metas().iter().filter(|m| sel.iter().any(|s| s.matches(m))).map(|m| m.code).collect() }
            }
            None => RuleSet::defaults(),
        };
        let spec = |m: &RuleMeta| match select {
            Some(sel) => sel.iter().filter(|s| s.matches(m)).map(Selector::specificity).max(),
            None => m.default_enabled.then_some(0),
        };
        base.refine_with(spec, extend_select, ignore)
    }

    /// Adds `extend_select` and removes `ignore` on top of this set (a later
    /// layer, e.g. command-line flags over a configuration file). Rules
    /// already in the set count as selected at the lowest specificity.
    pub fn refine(&self, extend_select: &[Selector], ignore: &[Selector]) -> RuleSet {
        self.refine_with(|m: &RuleMeta| self.contains(m.code).then_some(0), extend_select, ignore)
    }

    fn refine_with(&self, spec: impl Fn(&RuleMeta) -> Option<usize>, extend_select: &[Selector], ignore: &[Selector]) -> RuleSet {
        let mut codes = BTreeSet::new();
        for m in all_metas() {
            let selected = spec(m);
            let extended = extend_select.iter().filter(|s| s.matches(m)).map(Selector::specificity).max();
            let on = selected.max(extended);
            let off = ignore.iter().filter(|s| s.matches(m)).map(Selector::specificity).max();
            match (on, off) {
                (Some(on), Some(off)) if on > off => {
                    codes.insert(m.code);
                }
                (Some(_), None) => {
                    codes.insert(m.code);
                }
                _ => {}
            }
        }
        RuleSet { codes }
    }

    /// Removes the rules matched by `selectors` (per-file ignores).
    pub fn without(&self, selectors: &[Selector]) -> RuleSet {
        RuleSet { codes: self.codes.iter().copied().filter(|c| !selectors.iter().any(|s| s.matches_code(c))).collect() }
    }

    /// Whether `code` is enabled.
    pub fn contains(&self, code: &str) -> bool {
        self.codes.contains(code)
    }

    /// The enabled codes, sorted.
    pub fn codes(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.codes.iter().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sel(s: &[&str]) -> Vec<Selector> {
        s.iter().map(|t| Selector::parse(t).unwrap()).collect()
    }

    #[test]
    fn defaults_exclude_nothing_known() {
        let d = RuleSet::defaults();
        assert!(d.contains("ML000") && d.contains("ML201") && d.contains("ML401"));
    }

    #[test]
    fn prefix_and_specific_ignore() {
        let s = RuleSet::from_selection(Some(&sel(&["ML2"])), &[], &sel(&["ML203"]));
        assert!(s.contains("ML201") && s.contains("ML202") && !s.contains("ML203") && !s.contains("ML101"));
    }

    #[test]
    fn specific_select_beats_prefix_ignore() {
        let s = RuleSet::from_selection(None, &sel(&["ML201"]), &sel(&["ML2"]));
        assert!(s.contains("ML201") && !s.contains("ML202"));
    }

    #[test]
    fn unknown_selector_is_an_error() {
        assert!(Selector::parse("ML9").is_err());
        assert!(Selector::parse("XYZ123").is_err());
        assert!(Selector::parse("eval-without-no-grad").is_ok());
    }
}
