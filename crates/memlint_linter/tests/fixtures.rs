//! Runs every rule on its fixtures in `fixtures/python/` (and, for the
//! rules that read Rust, `fixtures/rust/`): the lines it flags must be
//! exactly those the fixture's header lists, and the rendered findings must
//! match the accepted snapshot.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::PathBuf;

use memlint_diagnostics::SourceFile;
use memlint_linter::docs::{rule_markdown, rules_index, REQUIRED_HEADINGS};
use memlint_linter::registry::all_metas;
use memlint_linter::{all_rules, lint_source_in, LintOptions, RuleSet, Selector};
use memlint_semantic::ir::Language;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn fixtures_in(dir: &str, ext: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(root().join(dir))
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .map(|e| e.expect("readable entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    out.sort();
    out
}

/// The Python fixtures (every rule has one).
fn fixtures() -> Vec<PathBuf> {
    fixtures_in("fixtures/python", "py")
}

/// Every fixture, Python and Rust.
fn all_fixtures() -> Vec<PathBuf> {
    let mut out = fixtures();
    out.extend(fixtures_in("fixtures/rust", "rs"));
    out
}

fn language(path: &std::path::Path) -> Language {
    if path.extension().is_some_and(|e| e == "rs") { Language::Rust } else { Language::Python }
}

/// `# memlint-fixture: ML101 must flag lines 7, 8; ...` -> ("ML101", {7, 8})
/// (`// memlint-fixture:` in Rust).
fn header(text: &str) -> (String, BTreeSet<usize>) {
    let first = text.lines().next().unwrap_or("");
    let rest = first
        .strip_prefix("# memlint-fixture: ")
        .or_else(|| first.strip_prefix("// memlint-fixture: "))
        .expect("fixture header on line 1");
    let (code, rest) = rest.split_once(' ').expect("code in header");
    let list = rest.strip_prefix("must flag lines ").expect("`must flag lines` in header");
    let list = list.split(';').next().unwrap_or("");
    let lines = list.split(',').filter_map(|n| n.trim().parse().ok()).collect();
    (code.to_string(), lines)
}

#[test]
fn every_fixture_flags_exactly_its_header_lines() {
    let fixtures = all_fixtures();
    assert!(!fixtures.is_empty());
    let mut mismatches = Vec::new();
    for path in fixtures {
        let text = std::fs::read_to_string(&path).expect("fixture is UTF-8");
        let (code, expected) = header(&text);
        let select = [Selector::parse(&code).expect("header code is a rule")];
        let rules = RuleSet::from_selection(Some(&select), &[], &[]);
        let diags = lint_source_in(&text, &LintOptions { rules, is_test_file: false, module: None }, language(&path));
        let file = SourceFile::new(path.file_name().unwrap().to_string_lossy(), text.clone());
        let got: BTreeSet<usize> = diags.iter().map(|d| file.location(d.span.start).0).collect();
        if got != expected {
            mismatches.push(format!(
                "{}: flagged {:?}, header lists {:?}",
                path.file_name().unwrap().to_string_lossy(),
                got,
                expected
            ));
        }
        let mut rendered = String::new();
        for d in &diags {
            assert_eq!(d.code, code);
            let (l, c) = file.location(d.span.start);
            let (el, ec) = file.location(d.span.end);
            let _ = writeln!(
                rendered,
                "{l}:{c}-{el}:{ec} {} {}: {}\n    `{}`\n    help: {}{}",
                d.code,
                d.name,
                d.message,
                &text[d.span.start as usize..d.span.end as usize],
                d.help.as_deref().unwrap_or("-"),
                d.fix.as_ref().map(|f| {
                    let edits: Vec<String> = f.edits.iter().map(|e| format!("{}..{} -> {:?}", e.span.start, e.span.end, e.content)).collect();
                    format!("\n    fix ({:?}): {}", f.applicability, edits.join("; "))
                }).unwrap_or_default()
            );
        }
        let stem = path.file_stem().unwrap().to_string_lossy().to_string();
        let name = if language(&path) == Language::Rust { format!("rust_{stem}") } else { stem };
        insta::assert_snapshot!(name, rendered);
    }
    assert!(mismatches.is_empty(), "fixtures flagged other lines than their headers list:\n{}", mismatches.join("\n"));
}

#[test]
fn every_rule_has_fixture_snapshot_and_documented_headings() {
    let fixture_codes: BTreeSet<String> = fixtures().iter().map(|p| header(&std::fs::read_to_string(p).unwrap()).0).collect();
    let snapshots = root().join("crates/memlint_linter/tests/snapshots");
    for rule in all_rules() {
        let meta = rule.meta();
        assert!(fixture_codes.contains(meta.code), "{} has no fixture in fixtures/python", meta.code);
        let has_snapshot = std::fs::read_dir(&snapshots)
            .map(|rd| rd.filter_map(Result::ok).any(|e| {
                let n = e.file_name().to_string_lossy().to_string();
                n.contains(meta.code) && n.ends_with(".snap")
            }))
            .unwrap_or(false);
        assert!(has_snapshot, "{} has no accepted snapshot", meta.code);
    }
    let rust_codes: BTreeSet<String> =
        fixtures_in("fixtures/rust", "rs").iter().map(|p| header(&std::fs::read_to_string(p).unwrap()).0).collect();
    for rule in all_rules() {
        let meta = rule.meta();
        if meta.languages.contains(&Language::Rust) {
            assert!(rust_codes.contains(meta.code), "{} reads Rust but has no fixture in fixtures/rust", meta.code);
        }
    }
    for meta in all_metas() {
        for h in REQUIRED_HEADINGS {
            assert!(meta.doc.lines().any(|l| l.trim() == *h), "{} doc lacks heading `{h}`", meta.code);
        }
        assert!(meta.name.chars().all(|c| c.is_ascii_lowercase() || c == '-'), "{}: name must be kebab-case", meta.code);
    }
}

/// scripts/prove-fixtures.py runs the fixtures of these rules and expects
/// the error their docs name: the docs must keep naming it.
#[test]
fn raising_rules_name_the_error_their_fixtures_raise() {
    let errors = [
        ("ML101", "a leaf Variable that requires grad is being used in an in-place operation"),
        ("ML101", "functions with out=... arguments don't support automatic differentiation"),
        ("ML102", "one of the variables needed for gradient computation has been modified by an inplace operation"),
        ("ML106", "step() has already been called since the last update()"),
        ("ML106", "No inf checks were recorded prior to update"),
        ("ML106", "unscale_() has already been called on this optimizer since the last update()"),
    ];
    for (code, error) in errors {
        let meta = all_metas().into_iter().find(|m| m.code == code).expect("rule exists");
        let doc: String = meta.doc.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(doc.contains(error), "{code}'s doc does not name `{error}`");
    }
}

#[test]
fn messages_are_lowercase_without_trailing_period() {
    for path in all_fixtures() {
        let text = std::fs::read_to_string(&path).unwrap();
        let diags = lint_source_in(
            &text,
            &LintOptions { rules: RuleSet::from_selection(Some(&[Selector::parse("ALL").unwrap()]), &[], &[]), is_test_file: false, module: None },
            language(&path),
        );
        for d in diags {
            let first = d.message.chars().next().unwrap();
            assert!(!first.is_uppercase(), "{}: message starts uppercase: {}", d.code, d.message);
            assert!(!d.message.ends_with('.'), "{}: message ends with a period: {}", d.code, d.message);
            assert!(d.help.is_some(), "{}: every finding says what to do instead", d.code);
        }
    }
}

#[test]
fn generated_rule_docs_are_fresh() {
    let dir = root().join("docs/rules");
    let metas = all_metas();
    for meta in &metas {
        let path = dir.join(format!("{}.md", meta.code));
        let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
        assert_eq!(on_disk, rule_markdown(meta), "{} is stale: run `cargo xtask generate`", path.display());
    }
    let index = std::fs::read_to_string(dir.join("README.md")).unwrap_or_default();
    assert_eq!(index, rules_index(&metas), "docs/rules/README.md is stale: run `cargo xtask generate`");
}
