//! Rules read events and facts, not spellings: no rule holds a torch API
//! name (one of `memlint_semantic::api::vocabulary()`, or any `torch.*`
//! name) as a string literal. Comments and prose (literals with spaces,
//! messages) are not looked at.

use std::path::Path;

/// The identifier-like string literals of `source` outside comments, with
/// their line numbers.
fn identifier_literals(source: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, line) in source.lines().enumerate() {
        let code = line.trim_start();
        if code.starts_with("//") {
            continue;
        }
        let code = code.split(" // ").next().unwrap_or(code);
        let mut rest = code;
        while let Some(start) = rest.find('"') {
            let after = &rest[start + 1..];
            let Some(end) = after.find('"') else { break };
            let lit = &after[..end];
            if !lit.is_empty()
                && lit.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && lit.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
            {
                out.push((n + 1, lit.to_string()));
            }
            rest = &after[end + 1..];
        }
    }
    out
}

fn is_torch_name(lit: &str, vocabulary: &[&str]) -> bool {
    lit == "torch" || lit.starts_with("torch.") || vocabulary.contains(&lit)
}

#[test]
fn the_scanner_sees_a_spelling() {
    let vocabulary = memlint_semantic::api::vocabulary();
    let found = identifier_literals("// \"torch.cuda.empty_cache\"\nif q == \"torch.cuda.empty_cache\" && m == \"zero_grad\" { f(\"a message\") }\n");
    let spelled: Vec<_> = found.iter().filter(|(_, l)| is_torch_name(l, &vocabulary)).map(|(n, l)| format!("{n}:{l}")).collect();
    assert_eq!(spelled, ["2:torch.cuda.empty_cache", "2:zero_grad"]);
}

#[test]
fn no_rule_spells_a_torch_api_name() {
    let vocabulary = memlint_semantic::api::vocabulary();
    assert!(vocabulary.len() > 100, "the vocabulary is the api's tables ({} names)", vocabulary.len());
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/rules");
    let mut spelled = Vec::new();
    let mut files = 0;
    for entry in std::fs::read_dir(&dir).expect("rules directory") {
        let path = entry.expect("entry").path();
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        files += 1;
        let source = std::fs::read_to_string(&path).expect("rule source");
        for (line, lit) in identifier_literals(&source) {
            if is_torch_name(&lit, &vocabulary) {
                spelled.push(format!("{}:{line}: \"{lit}\"", path.file_name().unwrap_or_default().to_string_lossy()));
            }
        }
    }
    assert!(files >= 10, "rules found: {files}");
    assert!(spelled.is_empty(), "rules spell torch API names; use memlint_semantic::api instead:\n{}", spelled.join("\n"));
}
