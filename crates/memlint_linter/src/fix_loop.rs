//! `--fix`, `--unsafe-fixes` and `--diff`: the fix loop of one file.
//!
//! Fixes are applied in rounds: apply every fix that does not overlap
//! another ([`memlint_diagnostics::fix::apply_fixes`]), re-lint, repeat
//! while something changed (a fix left out for an overlap is applied in a
//! later round, against the updated text). A round whose result does not
//! parse is tried fix by fix: the fixes that keep the file parseable are
//! kept, the others are refused and reported. A file that does not parse to
//! begin with is not fixed.

use memlint_diagnostics::fix::{apply_fixes, FixMode};
use memlint_diagnostics::Diagnostic;
use crate::{lint_source, LintOptions, RuleSet, Selector, PARSE_ERROR};

/// At most this many rounds per file (a fix that keeps re-appearing stops here).
const MAX_ROUNDS: usize = 10;

/// A fix that was not applied, for the report on stderr.
#[derive(Debug, Clone)]
pub struct Refused {
    /// The diagnostic's code.
    pub code: &'static str,
    /// 1-based line in the text the fix was tried on.
    pub line: usize,
    /// Why.
    pub reason: String,
}

/// The outcome of fixing one file.
#[derive(Debug)]
pub struct FileFix {
    /// The fixed text (the original when nothing applied).
    pub text: String,
    /// How many findings were fixed.
    pub fixed: usize,
    /// The findings of the fixed text.
    pub remaining: Vec<Diagnostic>,
    /// Fixes refused because the result would not parse, or the file has syntax errors.
    pub refused: Vec<Refused>,
    /// For a notebook: `text` is its new JSON, and this is what the
    /// findings are rendered against.
    pub notebook: Option<NotebookFixed>,
}

/// What a fixed notebook needs besides its new JSON.
#[derive(Debug)]
pub struct NotebookFixed {
    /// The JSON as read (for `--diff`).
    pub original: String,
    /// The new virtual source with its cell map: `remaining` indexes it.
    pub file: memlint_diagnostics::SourceFile,
}

/// Fixes a notebook's JSON in rounds like [`fix_text_with`]: each round
/// applies the fixes that lie inside one code cell
/// ([`crate::notebook::apply_cell_fixes`]) and re-lints the
/// notebook. A round that leaves a cell with a syntax error it did not have
/// is refused as a whole. Outputs, metadata and formatting are kept; only
/// the `source` of a fixed cell changes.
pub fn fix_notebook(json: &str, path: &str, options: &LintOptions, file: Option<&crate::FileContext>, mode: FixMode) -> FileFix {
    use crate::notebook::{apply_cell_fixes, lint_notebook_in, read_notebook};
    let errors = |d: &[Diagnostic]| d.iter().filter(|d| d.code == PARSE_ERROR.code).count();
    let mut current = json.to_string();
    let mut result = lint_notebook_in(&current, options, file);
    let mut fixed = 0;
    let mut refused = Vec::new();
    for _ in 0..MAX_ROUNDS {
        let Ok(nb) = read_notebook(&current) else { break };
        let Some((next, applied)) = apply_cell_fixes(&current, &nb, &result.diagnostics, mode) else {
            break;
        };
        let next_result = lint_notebook_in(&next, options, file);
        if errors(&next_result.diagnostics) > errors(&result.diagnostics) {
            for &i in &applied {
                let d = &result.diagnostics[i];
                refused.push(Refused {
                    code: d.code,
                    line: line_of(&result.text, d.span.start),
                    reason: "a cell of the fixed notebook would not parse".into(),
                });
            }
            break;
        }
        fixed += applied.len();
        current = next;
        result = next_result;
    }
    let (file, remaining) = result.into_source_file(path);
    FileFix { text: current, fixed, remaining, refused, notebook: Some(NotebookFixed { original: json.to_string(), file }) }
}

fn parses(text: &str) -> bool {
    let Ok(sel) = Selector::parse(PARSE_ERROR.code) else { return true };
    let only_parse = LintOptions { rules: RuleSet::from_selection(Some(&[sel]), &[], &[]), is_test_file: false, module: None };
    !lint_source(text, &only_parse).iter().any(|d| d.code == PARSE_ERROR.code)
}

fn line_of(text: &str, offset: u32) -> usize {
    memlint_diagnostics::LineIndex::new(text).location(offset).0
}

/// Fixes `text` whose diagnostics under `options` are `diagnostics`,
/// re-checking the file on its own (one file as its own project).
pub fn fix_text(text: &str, diagnostics: Vec<Diagnostic>, options: &LintOptions, mode: FixMode) -> FileFix {
    fix_text_with(text, diagnostics, &|t: &str| lint_source(t, options), mode)
}

/// [`fix_text`] with the lint that re-checks each round's result (the
/// project-aware one of `memlint check`).
pub fn fix_text_with(text: &str, diagnostics: Vec<Diagnostic>, lint: &dyn Fn(&str) -> Vec<Diagnostic>, mode: FixMode) -> FileFix {
    let fixable = |ds: &[Diagnostic]| ds.iter().any(|d| d.fix.as_ref().is_some_and(|f| mode.allows(f.applicability)));
    let mut refused = Vec::new();
    if !fixable(&diagnostics) {
        return FileFix { text: text.to_string(), fixed: 0, remaining: diagnostics, refused, notebook: None };
    }
    if !parses(text) {
        for d in diagnostics.iter().filter(|d| d.fix.is_some()) {
            refused.push(Refused {
                code: d.code,
                line: line_of(text, d.span.start),
                reason: "the file has syntax errors; fix them first".into(),
            });
        }
        return FileFix { text: text.to_string(), fixed: 0, remaining: diagnostics, refused, notebook: None };
    }
    let mut current = text.to_string();
    let mut diagnostics = diagnostics;
    let mut fixed = 0;
    for _ in 0..MAX_ROUNDS {
        if !fixable(&diagnostics) {
            break;
        }
        let applied = apply_fixes(&current, &diagnostics, mode);
        if !applied.changed() {
            break;
        }
        let (next, n, stop) = if parses(&applied.text) {
            (applied.text, applied.fixed.len(), false)
        } else {
            // Find the fixes that break the file, one at a time.
            let mut good = Vec::new();
            for &i in &applied.fixed {
                let alone = apply_fixes(&current, std::slice::from_ref(&diagnostics[i]), mode);
                if alone.changed() && parses(&alone.text) {
                    good.push(diagnostics[i].clone());
                } else {
                    refused.push(Refused {
                        code: diagnostics[i].code,
                        line: line_of(&current, diagnostics[i].span.start),
                        reason: "the fixed file would not parse".into(),
                    });
                }
            }
            let together = apply_fixes(&current, &good, mode);
            if together.changed() && parses(&together.text) {
                (together.text, together.fixed.len(), true)
            } else {
                (current.clone(), 0, true)
            }
        };
        fixed += n;
        let changed = next != current;
        current = next;
        if changed {
            diagnostics = lint(&current);
        }
        if stop || !changed {
            break;
        }
    }
    FileFix { text: current, fixed, remaining: diagnostics, refused, notebook: None }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memlint_diagnostics::{Applicability, Edit, Fix, Severity, Span};

    fn synthetic(span: (u32, u32), content: &str, applicability: Applicability) -> Diagnostic {
        Diagnostic::new("ML202", "loss-accumulated-with-graph", Severity::Warning, Span::new(span.0, span.1), "m").with_fix(
            Fix { applicability, message: "m".into(), edits: vec![Edit { span: Span::new(span.0, span.1), content: content.into() }] },
        )
    }

    fn options() -> LintOptions {
        LintOptions { rules: RuleSet::defaults(), is_test_file: false, module: None }
    }

    #[test]
    fn a_fix_that_breaks_the_syntax_is_refused_and_the_others_kept() {
        let text = "total = 0\ntotal += loss\nx = y.data\n";
        let good = synthetic((19, 23), "loss.item()", Applicability::Unsafe);
        let bad = synthetic((30, 34), "detach(", Applicability::Unsafe);
        let r = fix_text(text, vec![good, bad], &options(), FixMode::Unsafe);
        assert_eq!(r.text, "total = 0\ntotal += loss.item()\nx = y.data\n");
        assert_eq!(r.fixed, 1);
        assert_eq!(r.refused.len(), 1);
        assert_eq!((r.refused[0].line, r.refused[0].reason.as_str()), (3, "the fixed file would not parse"));
    }

    #[test]
    fn unsafe_fixes_only_in_unsafe_mode() {
        let text = "total = 0\ntotal += loss\n";
        let d = synthetic((19, 23), "loss.item()", Applicability::Unsafe);
        let r = fix_text(text, vec![d.clone()], &options(), FixMode::Safe);
        assert_eq!((r.text.as_str(), r.fixed), (text, 0));
        let r = fix_text(text, vec![d], &options(), FixMode::Unsafe);
        assert_eq!(r.text, "total = 0\ntotal += loss.item()\n");
    }
}
