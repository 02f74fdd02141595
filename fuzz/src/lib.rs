//! What the fuzz targets check for one input, shared with the regression
//! test that replays saved inputs (`tests/fuzz_regressions.rs`).
//!
//! For every input: memlint's per-file entry point with every rule, every
//! output format (the JSON ones must be valid JSON), and the fix loop with
//! the unsafe fixes (a file that parsed still parses after it; a fixed
//! notebook is still JSON). A panic, a stack overflow or a timeout is a
//! failure.

use std::sync::Arc;

use memlint_diagnostics::fix::FixMode;
use memlint_diagnostics::render::{
    ConciseRenderer, FullRenderer, GithubRenderer, GitlabRenderer, GroupedRenderer, JsonLinesRenderer, JsonRenderer,
    JunitRenderer, Renderer, SarifRenderer,
};
use memlint_diagnostics::{Diagnostic, FileReport, Report, SourceFile};
use memlint_linter::fix_loop::{fix_notebook, fix_text};
use memlint_linter::notebook::lint_notebook;
use memlint_linter::{lint_source, LintOptions, RuleSet, Selector, PARSE_ERROR};

/// Every rule.
pub fn all_rules() -> LintOptions {
    let all = Selector::parse("ALL").expect("ALL is a selector");
    LintOptions { rules: RuleSet::from_selection(Some(&[all]), &[], &[]), is_test_file: false, module: None }
}

/// Renders `diagnostics` of `file` in every format; the JSON formats must parse.
pub fn render_all(file: SourceFile, diagnostics: Vec<Diagnostic>) {
    let report = Report { files: vec![FileReport { file: Arc::new(file), diagnostics }], files_checked: 1 };
    let renderers: Vec<(Box<dyn Renderer>, bool)> = vec![
        (Box::new(FullRenderer { color: true, quiet: false }), false),
        (Box::new(ConciseRenderer { quiet: false }), false),
        (Box::new(GroupedRenderer { quiet: false }), false),
        (Box::new(JsonRenderer { tool_version: "fuzz".into() }), true),
        (Box::new(JsonLinesRenderer), false),
        (
            Box::new(SarifRenderer { tool_version: "fuzz".into(), information_uri: "https://example.invalid".into(), rules: Vec::new() }),
            true,
        ),
        (Box::new(GithubRenderer), false),
        (Box::new(GitlabRenderer), true),
        (Box::new(JunitRenderer { checked_paths: vec!["fuzz.py".into()] }), false),
    ];
    for (renderer, is_json) in renderers {
        let mut out = Vec::new();
        renderer.render(&report, &mut out).expect("rendering into memory does not fail");
        if is_json {
            serde_json::from_slice::<serde_json::Value>(&out).expect("the JSON formats give JSON");
        }
    }
}

/// One Python file through the rules, the renderers and the fix loop.
pub fn check_python(text: &str) {
    let options = all_rules();
    let diagnostics = lint_source(text, &options);
    let parsed = !diagnostics.iter().any(|d| d.code == PARSE_ERROR.code);
    render_all(SourceFile::new("fuzz.py", text.to_string()), diagnostics.clone());
    if diagnostics.iter().any(|d| d.fix.is_some()) {
        let fixed = fix_text(text, diagnostics, &options, FixMode::Unsafe);
        if parsed && fixed.text != text {
            let after = lint_source(&fixed.text, &options);
            assert!(!after.iter().any(|d| d.code == PARSE_ERROR.code), "a fix broke a file that parsed:\n{}", fixed.text);
        }
    }
}

/// One notebook through the rules, the renderers and the fix loop.
pub fn check_notebook(json: &str) {
    let options = all_rules();
    let (file, diagnostics) = lint_notebook(json, &options).into_source_file("fuzz.ipynb");
    let fixable = diagnostics.iter().any(|d| d.fix.is_some());
    render_all(file, diagnostics);
    if fixable {
        let fixed = fix_notebook(json, "fuzz.ipynb", &options, None, FixMode::Unsafe);
        if fixed.text != json {
            serde_json::from_str::<serde_json::Value>(&fixed.text).expect("a fixed notebook is JSON");
        }
    }
}
