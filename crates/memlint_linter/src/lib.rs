//! memlint's rules and the machinery that runs them.
//!
//! - [`registry`]: every rule's metadata (code, name, severity, default,
//!   languages, documentation) in one list; the rule's `///` doc comment is
//!   the single source of its documentation.
//! - [`rules`]: one file per rule; a rule reads the semantic model
//!   ([`memlint_semantic::Context`]) and reports [`Diagnostic`]s.
//! - [`selection`]: `--select`/`--ignore`/`--extend-select` by code, prefix
//!   (`ML2`), name or `ALL`.
//! - [`suppression`]: `# memlint: ignore[...]`, `# noqa: ...` and
//!   `# memlint: ignore-file[...]` comments.
//! - [`notebook`]: Jupyter notebooks read as one module of their code cells
//!   ([`notebook::lint_notebook`]).
//! - [`fix_loop`]: `--fix`/`--diff` on one file or notebook: fixes applied
//!   in rounds, re-linted, and refused when the result would not parse.
//!
//! [`lint_source`] is the per-file entry point. It never panics on any input
//! text: a file that does not parse yields the findings of the recovered
//! parts plus one `ML000` diagnostic.
//!
//! ```
//! use memlint_linter::{lint_source, LintOptions, RuleSet};
//! let src = "import torch\nx = torch.zeros(3, requires_grad=True)\nx.add_(1)\n";
//! let diags = lint_source(src, &LintOptions { rules: RuleSet::defaults(), is_test_file: false, module: None });
//! assert_eq!(diags[0].code, "ML101");
//! ```

pub mod docs;
pub mod frontend;
pub mod notebook;
pub mod registry;
pub mod rules;
pub mod selection;
pub mod fix_loop;
pub mod suppression;

mod checker;

pub use checker::Checker;
pub use registry::{all_rules, rule_by_code, Rule, RuleMeta, PARSE_ERROR};
pub use memlint_semantic::ir::Language;
pub use memlint_semantic::{ModuleInfo, ProjectIndex};
pub use selection::{RuleSet, Selector, SelectorError};

use std::sync::Arc;

use memlint_diagnostics::{Diagnostic, Span};
use memlint_semantic::{Context, ContextOptions};
pub use memlint_semantic::FileSummary;

/// What to check in one file.
#[derive(Debug, Clone)]
pub struct LintOptions {
    /// The enabled rules.
    pub rules: RuleSet,
    /// The file is a test module (see [`ContextOptions::is_test_file`]).
    pub is_test_file: bool,
    /// The module path of source linted on its own ([`lint_source`], a
    /// notebook): its name says what it is (`bench_attention`,
    /// `08_profiling`). `None`: `__main__`.
    pub module: Option<String>,
}

/// Whether a path is a test module, by the rules of its language's
/// frontend (Python: `test_*.py`, `*_test.py`, `conftest.py`,
/// `testing_utils.py`, or anything under a `tests`/`test`/`test_utils`/
/// `testing` directory). A notebook is judged as Python.
pub fn is_test_path(path: &std::path::Path) -> bool {
    use frontend::Frontend;
    match frontend::frontend_for(path) {
        Some(f) => f.is_test_path(path),
        None => frontend::PYTHON.is_test_path(path),
    }
}

/// Whether the file at `path` with text `source` is a test module:
/// [`is_test_path`], except a Python file (or notebook) that only its name
/// marks (`u2net_test.py`, `test_net.py`, not under a `tests` directory)
/// and whose text has no test in it (no `def test`, no `unittest` or
/// `pytest`): an evaluation or inference script, named for the test split.
pub fn is_test_file(path: &std::path::Path, source: &str) -> bool {
    if !is_test_path(path) {
        return false;
    }
    let python = path.extension().is_some_and(|e| e == "py" || e == "ipynb");
    // Under a `tests`/`test`/`testing` directory: a file there of any name is a test.
    let by_directory = path.parent().is_some_and(|d| is_test_path(&d.join("x.py")));
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let by_name_only = python && !by_directory && name != "conftest.py" && name != "testing_utils.py";
    !by_name_only || ["def test", "unittest", "pytest"].iter().any(|t| source.contains(t))
}

/// Whether a file holds code its maintainers keep frozen, where no finding
/// is reported (the file still joins the project index): a module of a
/// `deprecated` package of the project (its dotted module path, so that a
/// directory of that name above the project's roots does not count:
/// transformers' `models/deprecated/`, kept in
/// maintenance mode with no changes accepted), or one generated from
/// another file, whose leading comments say so and forbid editing it
/// ("This file was automatically generated from ... modular_evolla.py. Do
/// NOT edit this file manually", protobuf's "DO NOT EDIT!"): a change goes
/// to the source it is made from, which is checked on its own.
pub fn is_frozen_code(module: &ModuleInfo, source: &str) -> bool {
    let mut packages = module.path.split(['.', ':']).filter(|s| !s.is_empty());
    packages.next_back();
    packages.any(|p| p == "deprecated") || is_generated(source)
}

/// Whether a file is a superseded copy its project keeps beside the
/// current code, by its path below the directory the run walked: under a
/// directory named `old`, `legacy`, `archive`, `archived`, `obsolete` or
/// `outdated` (BiSeNet's `old/fp16/train.py`). Its calls of obsolete APIs
/// are history, not something a maintainer migrates: the rules of
/// [`OBSOLETE_API_RULES`] leave it. A file named on the command line is
/// checked whatever its directory.
pub fn is_superseded_path(below_root: &std::path::Path) -> bool {
    const SUPERSEDED: [&str; 6] = ["old", "legacy", "archive", "archived", "obsolete", "outdated"];
    let Some(dirs) = below_root.parent() else { return false };
    dirs.components().any(|c| c.as_os_str().to_str().is_some_and(|d| SUPERSEDED.iter().any(|s| d.eq_ignore_ascii_case(s))))
}

/// The selector of the rules for obsolete APIs (ML4xx: `torch.cuda.amp`,
/// apex amp), which superseded copies of the code are not checked by
/// ([`is_superseded_path`]).
pub const OBSOLETE_API_RULES: &str = "ML4";

/// Whether the comments that open `source` (the first 20 lines, up to its
/// first line of code) say it is generated and must not be edited.
fn is_generated(source: &str) -> bool {
    let mut generated = false;
    let mut do_not_edit = false;
    for line in source.lines().take(20) {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let Some(comment) = line.strip_prefix('#').or_else(|| line.strip_prefix("//")) else { break };
        let lower = comment.to_ascii_lowercase();
        generated |= lower.contains("generated");
        do_not_edit |= lower.contains("do not edit") || lower.contains("don't edit");
    }
    generated && do_not_edit
}

/// What a file's findings may rest on beyond its own text: where it sits
/// in the project, the index of all files of the run, and the torch
/// version the project declares.
#[derive(Debug, Clone, Default)]
pub struct FileContext {
    /// The file's language: which frontend parses it.
    pub language: Language,
    /// The file's module path.
    pub module: ModuleInfo,
    /// The run's project index.
    pub index: Arc<ProjectIndex>,
    /// The lowest torch version the project declares (`torch>=2.4` in
    /// pyproject.toml, setup.cfg, setup.py or a requirements file).
    pub torch_minimum: Option<(u32, u32)>,
    /// A torch version every torch the project runs on is below, when its
    /// declarations pin or cap torch (`torch==1.7.1`, `torch<2.0`, a pin in
    /// the README's install commands).
    pub torch_below: Option<(u32, u32)>,
    /// First segments of the run's module paths (empty: unknown).
    pub project_roots: Arc<std::collections::HashSet<String, rustc_hash::FxBuildHasher>>,
}

/// The first phase of a project-wide lint: what one file contributes to
/// the project index. Runs independently per file (in parallel).
pub fn summarize_source(source: &str, file: &FileContext, is_test_file: bool) -> Summarized {
    let mut parsed = frontend::frontend_of(file.language).parse(source);
    let (summary, facts) = memlint_semantic::summarize_with_facts(
        &parsed.module,
        ContextOptions {
            is_test_file,
            module: file.module.clone(),
            index: Arc::new(ProjectIndex::empty()),
            torch_minimum: None,
            torch_below: None,
            project_roots: file.project_roots.clone(),
            summary_only: true,
            module_facts: None,
        },
    );
    parsed.module_facts = Some(facts);
    // No torch import and no syntax error: the second phase could report
    // nothing (no rule runs, no ML000), so it can skip the file.
    let nothing_to_report = !summary.imports_torch && parsed.errors.is_empty();
    Summarized { summary, nothing_to_report, parsed }
}

/// The first phase's result for one file.
#[derive(Debug)]
pub struct Summarized {
    /// What the file contributes to the index.
    pub summary: FileSummary,
    /// The second phase would report nothing for the file.
    pub nothing_to_report: bool,
    /// The parsed file: the caller may keep it for [`lint_parsed`] (no
    /// second parse) or drop it.
    pub parsed: frontend::Parsed,
}

/// Lints Python source text on its own (the file is its own project) and
/// returns its diagnostics, sorted by position, with suppression comments
/// applied.
pub fn lint_source(source: &str, options: &LintOptions) -> Vec<Diagnostic> {
    lint_source_in(source, options, memlint_semantic::ir::Language::Python)
}

/// [`lint_source`] for source of another language (`.rs` with `tch`).
pub fn lint_source_in(source: &str, options: &LintOptions, language: memlint_semantic::ir::Language) -> Vec<Diagnostic> {
    let module = ModuleInfo::python(options.module.as_deref().unwrap_or("__main__"), false);
    let mut file = FileContext { module, language, ..FileContext::default() };
    let summary = summarize_source(source, &file, options.is_test_file).summary;
    file.index = Arc::new(ProjectIndex::build(vec![summary]));
    lint_file(source, options, &file)
}

/// Lints one file of a project: the second phase, after every file's
/// [`summarize_source`] was joined into the [`ProjectIndex`].
pub fn lint_file(source: &str, options: &LintOptions, file: &FileContext) -> Vec<Diagnostic> {
    lint_parsed(source, &frontend::frontend_of(file.language).parse(source), options, file)
}

/// [`lint_file`] for a file the first phase already parsed: `parsed` must
/// come from `source` ([`Summarized::parsed`]).
pub fn lint_parsed(source: &str, parsed: &frontend::Parsed, options: &LintOptions, file: &FileContext) -> Vec<Diagnostic> {
    let frontend = frontend::frontend_of(parsed.module.language);
    let mut diagnostics = Vec::new();
    if let Some(first) = parsed.errors.first() {
        // A course's homework left for students to fill in (`# TODO(student)`
        // over an empty block): the file is meant not to run yet.
        let homework = || {
            frontend.language() == memlint_semantic::ir::Language::Python && notebook::exercise_blanks_in_module(source, &parsed.errors)
        };
        // A script its first line declares Python 2 (`#!/usr/bin/env
        // python2`): it is not meant to parse as Python 3.
        let python2 = || {
            frontend.language() == memlint_semantic::ir::Language::Python
                && source.starts_with("#!")
                && source.lines().next().is_some_and(|l| l.contains("python2"))
        };
        if options.rules.contains(PARSE_ERROR.code) && !homework() && !python2() {
            let more = parsed.errors.len() - 1;
            let mut message = format!("syntax error: {}", first.message);
            if more > 0 {
                message.push_str(&format!(" (and {more} more)"));
            }
            let span = if first.span.end > first.span.start { first.span } else { Span::new(first.span.start, first.span.start) };
            let help = match frontend.language() {
                memlint_semantic::ir::Language::Rust => "fix the syntax error; syn does not recover, so the rest of the file is not checked",
                memlint_semantic::ir::Language::Python => {
                    "fix the syntax error; findings for the rest of the file come from what the parser recovered"
                }
            };
            diagnostics.push(PARSE_ERROR.diagnostic(span, message).with_help(help));
        }
    }
    // Rules are filtered once per file: selected, and for this language.
    let rules: Vec<&'static dyn Rule> = all_rules()
        .iter()
        .copied()
        .filter(|r| options.rules.contains(r.meta().code) && r.meta().languages.contains(&frontend.language()))
        .collect();
    // Every rule is about PyTorch: a file that never imports it has nothing
    // to walk (the rules would all return at their `torch_imported` check).
    let torch = memlint_semantic::imports_any(&parsed.module, frontend.torch_roots())
        || memlint_semantic::takes_torch_from_a_star_import(&parsed.module)
        || file.index.star_imports_torch(&file.module.path);
    if !rules.is_empty() && torch {
        let mut visitor = checker::RuleVisitor::new(&rules, source, &parsed.module, &mut diagnostics);
        let cx_options = ContextOptions {
            is_test_file: options.is_test_file,
            module: file.module.clone(),
            index: file.index.clone(),
            torch_minimum: file.torch_minimum,
            torch_below: file.torch_below,
            project_roots: file.project_roots.clone(),
            summary_only: false,
            module_facts: parsed.module_facts.clone(),
        };
        Context::walk(&parsed.module, cx_options, &mut visitor);
    }
    let suppressions = suppression::Suppressions::from_comments(source, &parsed.comments, frontend.comment_prefix());
    diagnostics.retain(|d| !suppressions.is_suppressed(d));
    diagnostics.sort_by(|a, b| (a.span, a.code).cmp(&(b.span, b.code)));
    diagnostics.dedup_by(|a, b| a.span == b.span && a.code == b.code);
    one_per_line(source, &mut diagnostics);
    one_per_statement(&parsed.module, &mut diagnostics);
    diagnostics
}

/// Rules that report a hazard once per line: `a.data = b.data` is one
/// `.data` finding, `model(a) if c else model(b)` one forward; and once
/// per statement, for a statement over several lines.
const ONE_PER_LINE: &[&str] = &["ML103", "ML107", "ML201", "ML305", "ML307"];

fn one_per_statement(module: &memlint_semantic::ir::Module, diagnostics: &mut Vec<Diagnostic>) {
    let mut seen = std::collections::HashSet::new();
    diagnostics.retain(|d| {
        if !ONE_PER_LINE.contains(&d.code) {
            return true;
        }
        match module.stmt_at(d.span.start) {
            Some(id) => seen.insert((d.code, id)),
            None => true,
        }
    });
}

fn one_per_line(source: &str, diagnostics: &mut Vec<Diagnostic>) {
    // Diagnostics are sorted by position: count newlines incrementally.
    let bytes = source.as_bytes();
    let (mut pos, mut line) = (0usize, 0usize);
    let mut seen = std::collections::HashSet::new();
    diagnostics.retain(|d| {
        let at = (d.span.start as usize).min(bytes.len());
        if at >= pos {
            // Lines end at `\n`, `\r\n` or a lone `\r`.
            line += bytes[pos..at]
                .iter()
                .enumerate()
                .filter(|(i, b)| **b == b'\n' || (**b == b'\r' && bytes.get(pos + i + 1) != Some(&b'\n')))
                .count();
            pos = at;
        }
        !ONE_PER_LINE.contains(&d.code) || seen.insert((d.code, line))
    });
}
