//! Snapshot tests of every output format on one synthetic report, and the
//! SARIF output validated against the OASIS SARIF 2.1.0 schema.

use std::sync::Arc;

use memlint_diagnostics::render::{
    ConciseRenderer, FullRenderer, GithubRenderer, GitlabRenderer, GroupedRenderer, JsonLinesRenderer, JsonRenderer,
    JunitRenderer, Renderer, SarifRenderer,
};
use memlint_diagnostics::{Applicability, Diagnostic, Edit, FileReport, Fix, Report, RuleInfo, Severity, SourceFile, Span};

const AMP: &str = "import torch\nscaler = torch.cuda.amp.GradScaler()\nx = w.data  # 50%, a<b & \"c\"\n";
const EVAL: &str = "def evaluate(model, x):\n    model.eval()\n    return model(\n        x)\n";

fn span_of(text: &str, needle: &str) -> Span {
    let start = text.find(needle).expect("needle in text") as u32;
    Span::new(start, start + needle.len() as u32)
}

fn report() -> Report {
    let amp = Arc::new(SourceFile::new("./src/amp tools.py", AMP));
    let callee = span_of(AMP, "torch.cuda.amp.GradScaler");
    let paren = callee.end + 1;
    let ml401 = Diagnostic::new("ML401", "deprecated-cuda-amp", Severity::Warning, callee, "`torch.cuda.amp.GradScaler` is deprecated since PyTorch 2.4")
        .with_help("use `torch.amp.GradScaler(\"cuda\", ...)`")
        .with_fix(Fix {
            applicability: Applicability::Safe,
            message: "use `torch.amp.GradScaler(\"cuda\", ...)`".into(),
            edits: vec![
                Edit { span: callee, content: "torch.amp.GradScaler".into() },
                Edit { span: Span::new(paren, paren), content: "\"cuda\"".into() },
            ],
        });
    let ml103 = Diagnostic::new("ML103", "data-attribute", Severity::Warning, span_of(AMP, "w.data"), "`.data` bypasses autograd, 50% of the time: a<b")
        .with_help("use `.detach()`");
    let eval = Arc::new(SourceFile::new("src/eval.py", EVAL));
    let ml201 = Diagnostic::new("ML201", "eval-without-no-grad", Severity::Error, span_of(EVAL, "model(\n        x)"), "forward pass in evaluation code")
        .with_help("run it under `torch.no_grad()`");
    let info = Diagnostic::new("ML305", "host-sync-in-loop", Severity::Info, span_of(EVAL, "model.eval()"), "an info finding");
    Report {
        files: vec![
            FileReport { file: amp, diagnostics: vec![ml401, ml103] },
            FileReport { file: eval, diagnostics: vec![info, ml201] },
        ],
        files_checked: 3,
    }
}

fn rules() -> Vec<RuleInfo> {
    [("ML103", "data-attribute", Severity::Warning), ("ML201", "eval-without-no-grad", Severity::Warning), ("ML401", "deprecated-cuda-amp", Severity::Warning)]
        .iter()
        .map(|(code, name, sev)| {
            RuleInfo::from_doc(
                code,
                name,
                *sev,
                true,
                &format!("## What it does\nFlags {name}: the hazard.\n\n## Why is this bad?\nIt costs memory.\n"),
                format!("https://example.invalid/memlint/blob/main/docs/rules/{code}.md"),
            )
        })
        .collect()
}

fn render(r: &dyn Renderer) -> String {
    let mut out = Vec::new();
    r.render(&report(), &mut out).expect("renders");
    String::from_utf8(out).expect("utf-8")
}

fn sarif() -> SarifRenderer {
    SarifRenderer { tool_version: "0.1.0".into(), information_uri: "https://example.invalid/memlint".into(), rules: rules() }
}

#[test]
fn full() {
    insta::assert_snapshot!(render(&FullRenderer { color: false, quiet: false }));
}

#[test]
fn concise() {
    insta::assert_snapshot!(render(&ConciseRenderer { quiet: false }));
}

#[test]
fn grouped() {
    insta::assert_snapshot!(render(&GroupedRenderer { quiet: false }));
}

#[test]
fn json() {
    insta::assert_snapshot!(render(&JsonRenderer { tool_version: "0.1.0".into() }));
}

#[test]
fn json_lines() {
    let text = render(&JsonLinesRenderer);
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("each line is one JSON object");
        assert!(v.is_object());
    }
    assert_eq!(text.lines().count(), 4);
    insta::assert_snapshot!(text);
}

#[test]
fn github() {
    insta::assert_snapshot!(render(&GithubRenderer));
}

#[test]
fn gitlab() {
    let text = render(&GitlabRenderer);
    assert_gitlab_code_quality(&serde_json::from_str(&text).expect("json"));
    insta::assert_snapshot!(text);
}

#[test]
fn junit() {
    let r = JunitRenderer { checked_paths: vec!["./src/amp tools.py".into(), "src/clean.py".into(), "src/eval.py".into()] };
    let text = render(&r);
    assert!(text.contains("tests=\"3\" failures=\"4\""), "{text}");
    assert!(text.contains("<testcase name=\"src/clean.py\" classname=\"src/clean.py\" file=\"src/clean.py\"/>"));
    insta::assert_snapshot!(text);
}

#[test]
fn sarif_snapshot() {
    insta::assert_snapshot!("sarif", render(&sarif()));
}

#[test]
fn sarif_validates_against_the_sarif_2_1_0_schema() {
    let value: serde_json::Value = serde_json::from_str(&render(&sarif())).expect("json");
    assert_valid_sarif(&value);
    let run = &value["runs"][0];
    assert_eq!(run["results"].as_array().map(Vec::len), Some(4));
    let r = &run["results"][0];
    assert_eq!(r["ruleId"], "ML401");
    assert_eq!(run["tool"]["driver"]["rules"][r["ruleIndex"].as_u64().expect("ruleIndex") as usize]["id"], "ML401");
    assert_eq!(r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"], "src/amp%20tools.py");
    assert_eq!(r["locations"][0]["physicalLocation"]["region"]["startLine"], 2);
    assert!(r["partialFingerprints"]["memlint/v1"].as_str().is_some_and(|f| f.len() == 32));
    assert_eq!(r["fixes"][0]["artifactChanges"][0]["replacements"][1]["insertedContent"]["text"], "\"cuda\"");
    let info = &run["results"][2];
    assert_eq!(info["level"], "note");
    // A schema that rejects a broken log is really being checked.
    let mut broken = value.clone();
    broken["runs"][0]["results"][0]["level"] = "fatal".into();
    assert!(!schema().is_valid(&broken));
}

fn schema() -> jsonschema::Validator {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/schemas/sarif-schema-2.1.0.json");
    let text = std::fs::read_to_string(path).expect("the vendored SARIF schema");
    let schema: serde_json::Value = serde_json::from_str(&text).expect("schema is JSON");
    jsonschema::validator_for(&schema).expect("schema compiles")
}

fn assert_valid_sarif(value: &serde_json::Value) {
    let errors: Vec<String> = schema().iter_errors(value).map(|e| format!("{} at {}", e, e.instance_path())).collect();
    assert!(errors.is_empty(), "SARIF schema errors:\n{}", errors.join("\n"));
}

/// The fields GitLab reads from a Code Quality report, with their types.
fn assert_gitlab_code_quality(value: &serde_json::Value) {
    let issues = value.as_array().expect("a JSON array of issues");
    assert!(!issues.is_empty());
    let mut fingerprints = std::collections::HashSet::new();
    for i in issues {
        assert!(i["description"].as_str().is_some_and(|s| !s.is_empty()), "{i}");
        assert!(i["check_name"].as_str().is_some_and(|s| !s.is_empty()), "{i}");
        let fp = i["fingerprint"].as_str().expect("fingerprint");
        assert!(fingerprints.insert(fp.to_string()), "fingerprints are unique");
        assert!(["info", "minor", "major", "critical", "blocker"].contains(&i["severity"].as_str().expect("severity")));
        let path = i["location"]["path"].as_str().expect("location.path");
        assert!(!path.starts_with("./") && !path.starts_with('/'), "relative path: {path}");
        assert!(i["location"]["lines"]["begin"].as_u64().is_some_and(|l| l >= 1), "{i}");
    }
}
