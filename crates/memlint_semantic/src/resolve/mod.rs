//! Qualified names of library APIs, the words of identifiers, and import
//! bindings ([`imports`]).

pub mod imports;

/// A dotted, fully qualified name such as `torch.cuda.amp.autocast`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct QualifiedName(pub String);

impl QualifiedName {
    /// The dotted text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether the name is exactly `s`.
    pub fn is(&self, s: &str) -> bool {
        self.0 == s
    }

    /// Whether the name is `s` or starts with `s.`.
    pub fn starts_with_module(&self, module: &str) -> bool {
        self.0 == module || (self.0.starts_with(module) && self.0.as_bytes().get(module.len()) == Some(&b'.'))
    }

    /// The last segment.
    pub fn last(&self) -> &str {
        self.0.rsplit('.').next().unwrap_or(&self.0)
    }

    /// Whether the name is one of `names`, e.g.
    /// `is_any(&["torch.no_grad", "torch.autograd.no_grad"])`.
    pub fn is_any(&self, names: &[&str]) -> bool {
        names.iter().any(|n| self.0 == *n)
    }
}

/// Words that name evaluation code in a function name (`validate`,
/// `eval_split`, `run_test`).
const EVAL_FUNCTION_WORDS: &[&str] =
    &["validate", "validation", "evaluate", "evaluation", "eval", "test", "predict", "inference", "accuracy"];

/// Whether a function's name says it evaluates (a word of it is one of
/// `validate`, `evaluate`, `eval`, `test`, `predict`, `inference`,
/// `accuracy`: `compute_accuracy(model, loader)`).
pub fn names_evaluation(function: &str) -> bool {
    word_slices(function).any(|w| EVAL_FUNCTION_WORDS.iter().any(|e| w.eq_ignore_ascii_case(e)))
}

/// Splits an identifier into lowercase words at `_`, digits and camelCase
/// boundaries: `valLoader2` -> `["val", "loader"]`.
pub fn words(ident: &str) -> Vec<String> {
    word_slices(ident).map(str::to_ascii_lowercase).collect()
}

/// The words of [`words`] as slices of `ident`, in its own case, without
/// allocating: compare them with `eq_ignore_ascii_case`.
pub fn word_slices(ident: &str) -> impl Iterator<Item = &str> {
    let mut chars = ident.char_indices();
    let mut start: Option<usize> = None;
    let mut prev_lower = false;
    std::iter::from_fn(move || {
        for (i, ch) in chars.by_ref() {
            if !ch.is_ascii_alphabetic() {
                prev_lower = false;
                if let Some(s) = start.take() {
                    return Some(&ident[s..i]);
                }
                continue;
            }
            if ch.is_ascii_uppercase() && prev_lower {
                if let Some(s) = start.replace(i) {
                    prev_lower = false;
                    return Some(&ident[s..i]);
                }
            }
            prev_lower = ch.is_ascii_lowercase();
            if start.is_none() {
                start = Some(i);
            }
        }
        start.take().map(|s| &ident[s..])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_words() {
        assert_eq!(words("valLoader2"), vec!["val", "loader"]);
        assert_eq!(words("test_loader"), vec!["test", "loader"]);
        assert_eq!(words("__init__"), vec!["init"]);
    }

    #[test]
    fn slices_split_like_lowercased_words() {
        // The splitting rule written out char by char, lowercasing as it goes.
        fn reference(ident: &str) -> Vec<String> {
            let (mut out, mut cur, mut prev_lower) = (Vec::new(), String::new(), false);
            for ch in ident.chars() {
                if !ch.is_ascii_alphabetic() {
                    if !cur.is_empty() {
                        out.push(std::mem::take(&mut cur));
                    }
                    prev_lower = false;
                    continue;
                }
                if ch.is_ascii_uppercase() && prev_lower && !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
                prev_lower = ch.is_ascii_lowercase();
                cur.push(ch.to_ascii_lowercase());
            }
            if !cur.is_empty() {
                out.push(cur);
            }
            out
        }
        for ident in ["valLoader2", "getHTTPResponse", "ABCDef", "net_G", "_x__Y", "modèle_net", "a", "", "__", "xY_zW9q", "NetD"] {
            assert_eq!(words(ident), reference(ident), "{ident}");
            assert_eq!(word_slices(ident).count(), reference(ident).len(), "{ident}");
        }
    }

    #[test]
    fn module_prefix() {
        let q = QualifiedName("torch.cuda.amp.autocast".into());
        assert!(q.starts_with_module("torch.cuda"));
        assert!(!q.starts_with_module("torch.cu"));
        assert_eq!(q.last(), "autocast");
    }
}
