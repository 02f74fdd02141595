//! `lint_source` and `lint_notebook` must never panic, whatever the text: truncated files,
//! stray brackets, unbalanced indentation. Deterministic mutations of every
//! fixture (a small linear congruential generator, so a failure reproduces).

use memlint_linter::{lint_source, LintOptions, RuleSet, Selector};

struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const PIECES: &[&str] = &["(", ")", "[", "]", ":", "\n", "    ", "with torch.no_grad():\n", ".add_(", "+= ", "=", "\"", "#", "\\", "lambda", "def ", "for x in y:\n"];

fn mutate(text: &str, rng: &mut Lcg) -> String {
    let mut s: Vec<char> = text.chars().collect();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(s.len() + 1);
        match rng.below(3) {
            0 if !s.is_empty() => {
                let end = (at + rng.below(40)).min(s.len());
                s.drain(at.min(s.len())..end);
            }
            1 => {
                let piece = PIECES[rng.below(PIECES.len())];
                for (i, c) in piece.chars().enumerate() {
                    s.insert((at + i).min(s.len()), c);
                }
            }
            _ => s.truncate(at),
        }
    }
    s.into_iter().collect()
}

#[test]
fn mutated_fixtures_never_panic() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/python");
    let rules = RuleSet::from_selection(Some(&[Selector::parse("ALL").unwrap()]), &[], &[]);
    let options = LintOptions { rules, is_test_file: false, module: None };
    let mut rng = Lcg(0x5eed);
    let mut checked = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        for _ in 0..150 {
            let mutated = mutate(&text, &mut rng);
            let diags = lint_source(&mutated, &options);
            for d in diags {
                assert!(d.span.start <= d.span.end && d.span.end as usize <= mutated.len(), "span out of range");
            }
            checked += 1;
        }
    }
    assert!(checked >= 150 * 6);
}

/// IPython syntax on top of Python's.
const IPYTHON_PIECES: &[&str] = &["%", "%%", "!", "?", "%%bash\n", "%%time\n", "%%writefile x.py\n", "\\\n", "'''", "= !ls\n"];

#[test]
fn mutated_notebooks_never_panic_and_every_finding_is_in_a_cell() {
    use memlint_linter::notebook::lint_notebook;

    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    let rules = RuleSet::from_selection(Some(&[Selector::parse("ALL").unwrap()]), &[], &[]);
    let options = LintOptions { rules, is_test_file: false, module: None };
    let mut rng = Lcg(0x0b00c);
    let mut checked = 0;
    for entry in std::fs::read_dir(root.join("python")).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        for _ in 0..40 {
            // The fixture cut into cells at its blank-line pairs, each cell
            // mutated, some of them given IPython syntax.
            let cells: Vec<serde_json::Value> = text
                .split("\n\n\n")
                .map(|part| {
                    let mut src = mutate(part, &mut rng);
                    if rng.below(3) == 0 {
                        let piece = IPYTHON_PIECES[rng.below(IPYTHON_PIECES.len())];
                        let at = src.char_indices().nth(rng.below(src.chars().count() + 1)).map_or(src.len(), |(i, _)| i);
                        src.insert_str(at, piece);
                    }
                    let kind = if rng.below(6) == 0 { "markdown" } else { "code" };
                    let lines: Vec<&str> = src.split_inclusive('\n').collect();
                    serde_json::json!({"cell_type": kind, "metadata": {}, "source": lines})
                })
                .collect();
            let json = serde_json::json!({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}).to_string();
            let (file, diags) = lint_notebook(&json, &options).into_source_file("nb.ipynb");
            for d in diags {
                assert!(d.span.start <= d.span.end && d.span.end as usize <= file.text().len(), "span out of range");
                assert!(file.position(d.span.start).cell.is_some(), "{} outside every cell", d.code);
            }
            // The JSON itself cut short or damaged: when it is no longer a
            // notebook, exactly one ML000.
            let broken = mutate(&json, &mut rng);
            let r = lint_notebook(&broken, &options);
            if r.cells.is_none() {
                assert_eq!(r.diagnostics.len(), 1);
            }
            checked += 1;
        }
    }
    assert!(checked >= 40 * 6);
}
