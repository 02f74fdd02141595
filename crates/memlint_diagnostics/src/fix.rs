//! Applying fixes to a text.
//!
//! [`apply_fixes`] applies the fixes of a file's diagnostics in one pass:
//! fixes are taken in position order, and a fix whose edits overlap an edit
//! already accepted (or that is malformed: edits out of range, unsorted,
//! overlapping each other, or not on character boundaries) is left out and
//! reported, never merged. Two diagnostics carrying the same fix apply it
//! once. Callers that want the left-out fixes re-lint the result and apply
//! again. Whether the result still parses is the caller's check: this crate
//! knows nothing of Python.

use crate::{Applicability, Diagnostic, Edit, Fix, Span};

/// Which fixes to apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FixMode {
    /// Safe fixes only.
    Safe,
    /// Safe and unsafe fixes.
    Unsafe,
}

impl FixMode {
    /// Whether a fix of this applicability is applied in this mode.
    pub fn allows(self, a: Applicability) -> bool {
        matches!((self, a), (FixMode::Unsafe, _) | (FixMode::Safe, Applicability::Safe))
    }
}

/// Why a fix was not applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skipped {
    /// Its edits overlap an edit of a fix applied before it.
    Overlap,
    /// Its edits are out of range, unsorted, overlap each other, or split a character.
    Invalid,
}

/// The outcome of [`apply_fixes`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// The fixed text.
    pub text: String,
    /// Indices (into the diagnostics given) of the diagnostics whose fix was applied.
    pub fixed: Vec<usize>,
    /// Indices of the diagnostics whose fix was left out, and why.
    pub skipped: Vec<(usize, Skipped)>,
}

impl Applied {
    /// Whether the text changed.
    pub fn changed(&self) -> bool {
        !self.fixed.is_empty()
    }
}

fn overlaps(a: Span, b: Span) -> bool {
    if a.start == a.end && b.start == b.end {
        // Two insertions at one point: their order would be arbitrary.
        return a.start == b.start;
    }
    if a.start == a.end {
        return b.start < a.start && a.start < b.end;
    }
    if b.start == b.end {
        return a.start < b.start && b.start < a.end;
    }
    a.start < b.end && b.start < a.end
}

fn valid(text: &str, fix: &Fix) -> bool {
    let mut last_end = 0u32;
    for (i, e) in fix.edits.iter().enumerate() {
        let (s, end) = (e.span.start as usize, e.span.end as usize);
        if end > text.len() || !text.is_char_boundary(s) || !text.is_char_boundary(end) {
            return false;
        }
        if i > 0 && (e.span.start < last_end || fix.edits[..i].iter().any(|o| overlaps(o.span, e.span))) {
            return false;
        }
        last_end = e.span.end;
    }
    !fix.edits.is_empty()
}

/// The edit's content with the file's line endings: every `\n` of the
/// content becomes the file's own line ending (`\r\n` or a lone `\r`).
fn with_line_endings(content: &str, ending: LineEnding) -> String {
    let eol = match ending {
        LineEnding::Lf => return content.to_string(),
        LineEnding::CrLf => "\r\n",
        LineEnding::Cr => "\r",
    };
    if !content.contains('\n') {
        return content.to_string();
    }
    let mut out = String::with_capacity(content.len() + 8);
    let mut prev = '\0';
    for c in content.chars() {
        match c {
            '\n' if prev == '\r' => {}
            '\n' => out.push_str(eol),
            '\r' => out.push_str(eol),
            c => out.push(c),
        }
        prev = c;
    }
    out
}

/// How a text's lines end, decided by its first line end (`\n` when it
/// has none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineEnding {
    /// `\n`.
    Lf,
    /// `\r\n`.
    CrLf,
    /// A lone `\r` (classic Mac OS).
    Cr,
}

impl LineEnding {
    /// The line ending of `text`.
    pub fn of(text: &str) -> LineEnding {
        let bytes = text.as_bytes();
        match bytes.iter().position(|b| *b == b'\n' || *b == b'\r') {
            Some(i) if bytes[i] == b'\r' && bytes.get(i + 1) == Some(&b'\n') => LineEnding::CrLf,
            Some(i) if bytes[i] == b'\r' => LineEnding::Cr,
            _ => LineEnding::Lf,
        }
    }
}

/// Whether a text's lines end with `\r\n` (decided by its first line end).
pub fn uses_crlf(text: &str) -> bool {
    LineEnding::of(text) == LineEnding::CrLf
}

/// Applies the fixes of `diagnostics` allowed by `mode` to `text`.
pub fn apply_fixes(text: &str, diagnostics: &[Diagnostic], mode: FixMode) -> Applied {
    let mut candidates: Vec<(usize, &Fix)> = diagnostics
        .iter()
        .enumerate()
        .filter_map(|(i, d)| d.fix.as_ref().filter(|f| mode.allows(f.applicability)).map(|f| (i, f)))
        .collect();
    candidates.sort_by_key(|(i, f)| (f.edits.first().map(|e| e.span).unwrap_or_default(), *i));

    let mut accepted: Vec<&Fix> = Vec::new();
    let mut edits: Vec<&Edit> = Vec::new();
    let mut fixed = Vec::new();
    let mut skipped = Vec::new();
    for (i, fix) in candidates {
        if accepted.iter().any(|a| a.edits == fix.edits) {
            fixed.push(i);
            continue;
        }
        if !valid(text, fix) {
            skipped.push((i, Skipped::Invalid));
            continue;
        }
        if fix.edits.iter().any(|e| edits.iter().any(|o| overlaps(o.span, e.span))) {
            skipped.push((i, Skipped::Overlap));
            continue;
        }
        accepted.push(fix);
        edits.extend(fix.edits.iter());
        fixed.push(i);
    }
    // Non-overlapping: apply from the end so earlier offsets stay valid.
    // Among edits starting at one offset, an insertion goes before a
    // replacement that starts there.
    edits.sort_by_key(|e| (e.span.start, e.span.end));
    let ending = LineEnding::of(text);
    let mut out = text.to_string();
    for e in edits.iter().rev() {
        out.replace_range(e.span.start as usize..e.span.end as usize, &with_line_endings(&e.content, ending));
    }
    fixed.sort_unstable();
    skipped.sort_by_key(|(i, _)| *i);
    Applied { text: out, fixed, skipped }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Severity;

    fn diag(edits: &[(u32, u32, &str)], applicability: Applicability) -> Diagnostic {
        Diagnostic::new("ML999", "test", Severity::Warning, Span::new(edits[0].0, edits[0].1), "m").with_fix(Fix {
            applicability,
            message: "fix".into(),
            edits: edits.iter().map(|(s, e, c)| Edit { span: Span::new(*s, *e), content: c.to_string() }).collect(),
        })
    }

    #[test]
    fn two_fixes_on_one_line() {
        let text = "a = x.data + y.data\n";
        let d = [diag(&[(6, 10, "detach()")], Applicability::Safe), diag(&[(15, 19, "detach()")], Applicability::Safe)];
        let r = apply_fixes(text, &d, FixMode::Safe);
        assert_eq!(r.text, "a = x.detach() + y.detach()\n");
        assert_eq!(r.fixed, [0, 1]);
        assert!(r.skipped.is_empty());
    }

    #[test]
    fn overlapping_fix_is_left_out_not_merged() {
        let text = "abcdef";
        let d = [diag(&[(1, 4, "X")], Applicability::Safe), diag(&[(3, 5, "Y")], Applicability::Safe)];
        let r = apply_fixes(text, &d, FixMode::Safe);
        assert_eq!(r.text, "aXef");
        assert_eq!(r.fixed, [0]);
        assert_eq!(r.skipped, [(1, Skipped::Overlap)]);
    }

    #[test]
    fn insertions_at_one_point_conflict_but_touching_edits_do_not() {
        let d = [diag(&[(2, 2, "1")], Applicability::Safe), diag(&[(2, 2, "2")], Applicability::Safe)];
        let r = apply_fixes("abcd", &d, FixMode::Safe);
        assert_eq!(r.text, "ab1cd");
        assert_eq!(r.skipped, [(1, Skipped::Overlap)]);
        let d = [diag(&[(0, 2, "X")], Applicability::Safe), diag(&[(2, 2, "+"), (2, 4, "Y")], Applicability::Safe)];
        let r = apply_fixes("abcd", &d, FixMode::Safe);
        assert_eq!(r.text, "X+Y");
    }

    #[test]
    fn identical_fixes_apply_once() {
        let d = [diag(&[(0, 1, "Z")], Applicability::Safe), diag(&[(0, 1, "Z")], Applicability::Safe)];
        let r = apply_fixes("abc", &d, FixMode::Safe);
        assert_eq!(r.text, "Zbc");
        assert_eq!(r.fixed, [0, 1]);
    }

    #[test]
    fn unsafe_fixes_need_unsafe_mode() {
        let d = [diag(&[(0, 1, "Z")], Applicability::Unsafe)];
        assert!(!apply_fixes("abc", &d, FixMode::Safe).changed());
        assert_eq!(apply_fixes("abc", &d, FixMode::Unsafe).text, "Zbc");
    }

    #[test]
    fn invalid_fixes_are_refused() {
        let d = [
            diag(&[(0, 10, "Z")], Applicability::Safe),
            diag(&[(2, 3, "A"), (0, 1, "B")], Applicability::Safe),
            diag(&[(1, 2, "C")], Applicability::Safe),
        ];
        let r = apply_fixes("é", &d, FixMode::Safe);
        assert_eq!(r.text, "é");
        assert_eq!(r.skipped.iter().map(|(_, s)| *s).collect::<Vec<_>>(), [Skipped::Invalid; 3]);
    }

    #[test]
    fn crlf_stays_crlf() {
        let text = "if a:\r\n    x = 1\r\n";
        let d = [diag(&[(7, 7, "    # note\n")], Applicability::Safe)];
        let r = apply_fixes(text, &d, FixMode::Safe);
        assert_eq!(r.text, "if a:\r\n    # note\r\n    x = 1\r\n");
        assert!(uses_crlf(text) && !uses_crlf("a\nb\r\n"));
    }
}
