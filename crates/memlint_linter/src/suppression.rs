//! Suppression comments.
//!
//! - `# memlint: ignore[ML201, ML2]` or `# noqa: ML201` at the end of the line
//!   a finding starts on suppresses the listed codes/prefixes on that line;
//!   a bare `# memlint: ignore` or `# noqa` suppresses every code there.
//! - `# memlint: ignore-file[ML2]` anywhere in a file suppresses the listed
//!   codes in the whole file (bare `# memlint: ignore-file`: every code).

use std::collections::HashMap;

use memlint_diagnostics::{Diagnostic, LineIndex, Span};

/// Which codes a suppression covers.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Codes {
    All,
    Some(Vec<String>),
}

impl Codes {
    fn covers(&self, code: &str) -> bool {
        match self {
            Codes::All => true,
            Codes::Some(list) => list.iter().any(|c| {
                c.len() >= 2 && code.len() >= c.len() && code[..c.len()].eq_ignore_ascii_case(c)
            }),
        }
    }
}

/// The suppressions of one file.
#[derive(Debug, Default)]
pub struct Suppressions {
    file: Vec<Codes>,
    lines: HashMap<usize, Vec<Codes>>,
    index: Option<LineIndex>,
}

fn parse_code_list(s: &str) -> Vec<String> {
    s.split(|c: char| c == ',' || c.is_whitespace()).filter(|c| !c.is_empty()).map(str::to_string).collect()
}

/// `ML201`, `ML2`, `E501`: letters then at least one digit.
fn looks_like_code(s: &str) -> bool {
    let letters = s.chars().take_while(char::is_ascii_alphabetic).count();
    letters > 0 && letters < s.len() && s[letters..].chars().all(|c| c.is_ascii_digit())
}

/// Parses one comment (`# ...`, or after another language's `prefix`):
/// `(is_file_level, codes)`.
fn parse_comment(text: &str, prefix: &str) -> Option<(bool, Codes)> {
    let body = text.trim_start_matches(prefix).trim();
    if let Some(rest) = body.strip_prefix("memlint:") {
        let rest = rest.trim();
        let (file_level, rest) = if let Some(r) = rest.strip_prefix("ignore-file") {
            (true, r)
        } else if let Some(r) = rest.strip_prefix("ignore") {
            (false, r)
        } else {
            return None;
        };
        let rest = rest.trim();
        if rest.is_empty() {
            return Some((file_level, Codes::All));
        }
        let inner = rest.strip_prefix('[')?.split(']').next()?;
        return Some((file_level, Codes::Some(parse_code_list(inner))));
    }
    // `# noqa` may follow other comment text: `# type: ignore  # noqa: ML201`.
    let lower = body.to_ascii_lowercase();
    let pos = lower.find("noqa")?;
    let after = body[pos + 4..].trim_start();
    match after.strip_prefix(':') {
        Some(list) => {
            let codes: Vec<String> = parse_code_list(list.split(prefix).next().unwrap_or(""))
                .into_iter()
                .take_while(|c| looks_like_code(c))
                .collect();
            if codes.is_empty() {
                Some((false, Codes::All))
            } else {
                Some((false, Codes::Some(codes)))
            }
        }
        None => Some((false, Codes::All)),
    }
}

impl Suppressions {
    /// Collects the suppressions from the file's comments, written after
    /// the language's line-comment `prefix` (`#`, `//`).
    pub fn from_comments(source: &str, comments: &[Span], prefix: &str) -> Suppressions {
        let mut s = Suppressions::default();
        let mut line_level = Vec::new();
        for c in comments {
            let Some(text) = source.get(c.start as usize..c.end as usize) else { continue };
            match parse_comment(text, prefix) {
                Some((true, codes)) => s.file.push(codes),
                Some((false, codes)) => line_level.push((c.start, codes)),
                None => {}
            }
        }
        // Index lines only when some comment needs it (most files have none).
        if !line_level.is_empty() {
            let index = LineIndex::new(source);
            for (start, codes) in line_level {
                s.lines.entry(index.line_of(start)).or_default().push(codes);
            }
            s.index = Some(index);
        }
        s
    }

    /// Whether a diagnostic is suppressed.
    pub fn is_suppressed(&self, d: &Diagnostic) -> bool {
        if self.file.iter().any(|c| c.covers(d.code)) {
            return true;
        }
        let Some(index) = &self.index else { return false };
        let line = index.line_of(d.span.start);
        self.lines.get(&line).is_some_and(|cs| cs.iter().any(|c| c.covers(d.code)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_comment_py(text: &str) -> Option<(bool, Codes)> {
        parse_comment(text, "#")
    }

    #[test]
    fn another_languages_comment_prefix() {
        assert_eq!(parse_comment("// memlint: ignore[ML202]", "//"), Some((false, Codes::Some(vec!["ML202".into()]))));
        assert_eq!(parse_comment("// noqa: ML201 // why", "//"), Some((false, Codes::Some(vec!["ML201".into()]))));
    }

    #[test]
    fn parses_forms() {
        assert_eq!(parse_comment_py("# memlint: ignore[ML201, ML2]"), Some((false, Codes::Some(vec!["ML201".into(), "ML2".into()]))));
        assert_eq!(parse_comment_py("# memlint: ignore"), Some((false, Codes::All)));
        assert_eq!(parse_comment_py("# memlint: ignore-file[ML2]"), Some((true, Codes::Some(vec!["ML2".into()]))));
        assert_eq!(parse_comment_py("# noqa: ML201,ML202 explanation"), Some((false, Codes::Some(vec!["ML201".into(), "ML202".into()]))));
        assert_eq!(parse_comment_py("# noqa"), Some((false, Codes::All)));
        assert_eq!(parse_comment_py("# a plain comment"), None);
    }

    #[test]
    fn prefix_covers() {
        let c = Codes::Some(vec!["ML2".into()]);
        assert!(c.covers("ML201") && !c.covers("ML101"));
    }
}
