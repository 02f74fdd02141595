//! Diagnostics and their renderers.
//!
//! A [`Diagnostic`] is what a rule reports: a code and kebab-case name from the
//! rule catalogue, a severity, a byte [`Span`] into one source file, a message,
//! a `help` line and an optional [`Fix`]. Diagnostics never hold line numbers:
//! those are derived from the file's [`LineIndex`] when rendering, so a
//! diagnostic stays valid however it is later presented.
//!
//! A notebook is one [`SourceFile`] whose text is its code cells joined, with
//! a [`CellMap`]; output formats show [`SourceFile::position`] (cell, line
//! within the cell, column) rather than [`SourceFile::location`] (line in
//! the joined text), and plain files get the same values from both.
//!
//! Renderers ([`render::Renderer`]) take a [`Report`] (every checked file with
//! its diagnostics) and write one output format each: `full`, `concise`,
//! `grouped`, `json`, `json-lines`, `sarif`, `github`, `gitlab`, `junit`.
//! Machine formats carry a schema version. [`fingerprint`] gives each
//! finding a stable identity (baselines, SARIF, GitLab); [`fix`] applies
//! fixes to a text.
//!
//! ```
//! use memlint_diagnostics::{Diagnostic, Severity, Span, SourceFile};
//! let file = SourceFile::new("train.py", "x = 1\ny = x.data\n");
//! let d = Diagnostic::new("ML103", "data-attribute", Severity::Warning, Span::new(10, 16), "`.data` bypasses autograd");
//! assert_eq!(file.line_index().location(d.span.start), (2, 5));
//! ```

use std::fmt;
use std::sync::Arc;

pub mod fingerprint;
pub mod fix;
pub mod render;
mod rule_info;
mod source;

pub use rule_info::RuleInfo;
pub use source::{CellMap, CellSpan, LineIndex, Position, SourceFile};

/// How serious a finding is; ordered so that `Info < Warning < Error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Advice that is right most of the time (off by default).
    Info,
    /// Wastes memory or time in a way users almost always want to know.
    Warning,
    /// The code will raise at run time or compute wrong gradients.
    Error,
}

impl Severity {
    /// The lowercase name used in output and configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }

    /// Parses `error`, `warning` or `info`.
    pub fn parse(s: &str) -> Option<Severity> {
        match s {
            "info" => Some(Severity::Info),
            "warning" => Some(Severity::Warning),
            "error" => Some(Severity::Error),
            _ => None,
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A half-open byte range `[start, end)` into a source file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Span {
    /// Byte offset of the first byte.
    pub start: u32,
    /// Byte offset one past the last byte.
    pub end: u32,
}

impl Span {
    /// Creates a span; `end` is clamped to be at least `start`.
    pub fn new(start: u32, end: u32) -> Span {
        Span { start, end: end.max(start) }
    }

    /// The smallest span covering both.
    pub fn cover(self, other: Span) -> Span {
        Span::new(self.start.min(other.start), self.end.max(other.end))
    }
}

/// Whether applying a fix is guaranteed to keep the program's meaning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Applicability {
    /// Keeps the behaviour; may be applied without review.
    Safe,
    /// May change behaviour; needs review.
    Unsafe,
}

/// One text replacement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit {
    /// The replaced range (empty for an insertion).
    pub span: Span,
    /// The new text.
    pub content: String,
}

/// A suggested change that resolves a diagnostic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fix {
    /// Whether it is safe to apply without review.
    pub applicability: Applicability,
    /// What the fix does, e.g. "use `torch.amp.autocast(\"cuda\", ...)`".
    pub message: String,
    /// Non-overlapping edits, sorted by position.
    pub edits: Vec<Edit>,
}

/// One finding of one rule in one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// Rule code, e.g. `ML201`.
    pub code: &'static str,
    /// Rule name, e.g. `eval-without-no-grad`.
    pub name: &'static str,
    /// Severity of the rule.
    pub severity: Severity,
    /// The smallest span that shows the hazard.
    pub span: Span,
    /// What is wrong, lowercase start, no trailing period.
    pub message: String,
    /// What to do instead.
    pub help: Option<String>,
    /// An automatic fix, when one is known.
    pub fix: Option<Fix>,
}

impl Diagnostic {
    /// Creates a diagnostic without help or fix.
    pub fn new(
        code: &'static str,
        name: &'static str,
        severity: Severity,
        span: Span,
        message: impl Into<String>,
    ) -> Diagnostic {
        Diagnostic { code, name, severity, span, message: message.into(), help: None, fix: None }
    }

    /// Adds the `help:` line.
    pub fn with_help(mut self, help: impl Into<String>) -> Diagnostic {
        self.help = Some(help.into());
        self
    }

    /// Adds a fix.
    pub fn with_fix(mut self, fix: Fix) -> Diagnostic {
        self.fix = Some(fix);
        self
    }
}

/// The diagnostics of one checked file, with its source for rendering.
#[derive(Debug, Clone)]
pub struct FileReport {
    /// The file (path as shown to the user, plus its text).
    pub file: Arc<SourceFile>,
    /// Its diagnostics, sorted by position.
    pub diagnostics: Vec<Diagnostic>,
}

/// Everything one run found.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Files with at least one diagnostic, sorted by path.
    pub files: Vec<FileReport>,
    /// How many files were checked in all.
    pub files_checked: usize,
}

impl Report {
    /// Iterates over every diagnostic with its file.
    pub fn diagnostics(&self) -> impl Iterator<Item = (&SourceFile, &Diagnostic)> {
        self.files.iter().flat_map(|f| f.diagnostics.iter().map(move |d| (&*f.file, d)))
    }

    /// Total number of diagnostics.
    pub fn len(&self) -> usize {
        self.files.iter().map(|f| f.diagnostics.len()).sum()
    }

    /// Whether there are no diagnostics.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of diagnostics at exactly `severity`.
    pub fn count(&self, severity: Severity) -> usize {
        self.diagnostics().filter(|(_, d)| d.severity == severity).count()
    }
}
