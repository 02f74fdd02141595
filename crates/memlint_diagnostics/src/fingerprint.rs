//! Stable fingerprints of findings, shared by the baseline, SARIF's
//! `partialFingerprints` and GitLab's `fingerprint`.
//!
//! A fingerprint hashes the rule code, the file's path (normalised: `./`
//! prefixes dropped, `/` separators), the flagged line's text with its
//! whitespace collapsed, and the finding's occurrence index among the
//! findings of the same file with the same code and line text. Lines added
//! or removed elsewhere in the file leave it unchanged; editing the flagged
//! line changes it, so that finding counts as new.

use std::collections::HashMap;

use sha2::{Digest, Sha256};

use crate::{Diagnostic, SourceFile};

/// Version of the fingerprint scheme, part of every fingerprint's key name.
pub const FINGERPRINT_VERSION: u32 = 1;

/// The path form used in fingerprints and in machine reports read by CI
/// (`./src/a.py` and `src/a.py` are the same file; `\` becomes `/`).
pub fn normalize_path(path: &str) -> String {
    let mut p = path.replace('\\', "/");
    while let Some(rest) = p.strip_prefix("./") {
        p = rest.to_string();
    }
    p
}

/// The flagged line's text with runs of whitespace collapsed to one space
/// and the ends trimmed, so re-indenting a block keeps its fingerprints.
pub fn normalized_line(file: &SourceFile, offset: u32) -> String {
    let index = file.line_index();
    let line = index.line_of(offset);
    let (s, e) = index.line_range(line, file.text());
    file.text().get(s..e).unwrap_or("").split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The fingerprints of `diagnostics` (all of one file, in position order),
/// one per diagnostic, as 32 hex digits. `path` is the path to record;
/// it is normalised with [`normalize_path`].
pub fn fingerprints(file: &SourceFile, path: &str, diagnostics: &[Diagnostic]) -> Vec<String> {
    let path = normalize_path(path);
    let mut seen: HashMap<(&str, String), usize> = HashMap::new();
    diagnostics
        .iter()
        .map(|d| {
            let line = normalized_line(file, d.span.start);
            let n = seen.entry((d.code, line.clone())).or_default();
            let occurrence = *n;
            *n += 1;
            let mut h = Sha256::new();
            for part in [d.code, path.as_str(), line.as_str(), &occurrence.to_string()] {
                h.update(part.as_bytes());
                h.update([0u8]);
            }
            h.finalize().iter().take(16).map(|b| format!("{b:02x}")).collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Severity, Span};

    fn diag(code: &'static str, start: u32) -> Diagnostic {
        Diagnostic::new(code, "x", Severity::Warning, Span::new(start, start + 1), "m")
    }

    #[test]
    fn survives_shifted_lines_and_reindent_but_not_an_edited_line() {
        let a = SourceFile::new("a.py", "x = 1\ntotal += loss\n");
        let b = SourceFile::new("a.py", "import os\n\nx = 1\n    total  +=  loss\n");
        let c = SourceFile::new("a.py", "x = 1\ntotal += loss * 2\n");
        let fa = fingerprints(&a, "./a.py", &[diag("ML202", 6)]);
        let fb = fingerprints(&b, "a.py", &[diag("ML202", 21)]);
        let fc = fingerprints(&c, "a.py", &[diag("ML202", 6)]);
        assert_eq!(fa, fb);
        assert_ne!(fa, fc);
        assert_eq!(fa[0].len(), 32);
    }

    #[test]
    fn equal_lines_get_distinct_fingerprints_by_occurrence() {
        let f = SourceFile::new("a.py", "y = x.data\ny = x.data\n");
        let fp = fingerprints(&f, "a.py", &[diag("ML103", 4), diag("ML103", 15)]);
        assert_ne!(fp[0], fp[1]);
        let other_code = fingerprints(&f, "a.py", &[diag("ML201", 4)]);
        assert_ne!(fp[0], other_code[0]);
    }

    #[test]
    fn paths_are_normalised() {
        assert_eq!(normalize_path("./././src\\a.py"), "src/a.py");
        assert_eq!(normalize_path("/abs/a.py"), "/abs/a.py");
    }
}
