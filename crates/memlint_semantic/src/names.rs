//! Qualified names of library APIs.

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

/// Splits an identifier into lowercase words at `_`, digits and camelCase
/// boundaries: `valLoader2` -> `["val", "loader"]`.
pub fn words(ident: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut prev_lower = false;
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
    fn module_prefix() {
        let q = QualifiedName("torch.cuda.amp.autocast".into());
        assert!(q.starts_with_module("torch.cuda"));
        assert!(!q.starts_with_module("torch.cu"));
        assert_eq!(q.last(), "autocast");
    }
}
