//! The CI formats end to end: every format runs on a tree, SARIF of the
//! fixture tree validates against the SARIF 2.1.0 schema, the GitLab report
//! has the fields GitLab reads, and `--output-file` writes atomically.

use tests::*;

fn tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "src/train.py", TRAIN);
    write(dir.path(), "src/clean.py", "import torch\n");
    dir
}

fn sarif_schema() -> jsonschema::Validator {
    let text = std::fs::read_to_string(root().join("fixtures/schemas/sarif-schema-2.1.0.json")).expect("schema file");
    jsonschema::validator_for(&serde_json::from_str(&text).expect("schema json")).expect("schema compiles")
}

#[test]
fn sarif_of_the_fixture_tree_validates_against_the_schema() {
    let o = memlint(&root(), &["check", "fixtures/python", "--select", "ALL", "--format", "sarif"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("sarif is json");
    let errors: Vec<String> = sarif_schema().iter_errors(&v).map(|e| format!("{e} at {}", e.instance_path())).collect();
    assert!(errors.is_empty(), "{}", errors.join("\n"));
    let run = &v["runs"][0];
    let rules = run["tool"]["driver"]["rules"].as_array().expect("rules");
    assert!(rules.iter().any(|r| r["id"] == "ML201" && r["helpUri"].as_str().is_some_and(|u| u.ends_with("docs/rules/ML201.md"))));
    let results = run["results"].as_array().expect("results");
    assert!(results.len() > 10, "fixtures have many findings");
    for r in results {
        let i = r["ruleIndex"].as_u64().expect("ruleIndex") as usize;
        assert_eq!(rules[i]["id"], r["ruleId"]);
        assert!(r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].as_str().is_some_and(|u| u.starts_with("fixtures/python/")));
    }
}

#[test]
fn gitlab_report_has_the_fields_gitlab_reads() {
    let dir = tree();
    let o = memlint(dir.path(), &["check", "--format", "gitlab"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    let issues = v.as_array().expect("array");
    assert_eq!(issues.len(), 2);
    for i in issues {
        assert!(i["description"].as_str().is_some_and(|s| s.contains(i["check_name"].as_str().unwrap_or("?"))));
        assert!(["ML201", "ML202"].contains(&i["check_name"].as_str().expect("check_name")));
        assert_eq!(i["fingerprint"].as_str().map(str::len), Some(32));
        assert_eq!(i["severity"], "major");
        assert_eq!(i["location"]["path"], "src/train.py", "no ./ prefix");
        assert!(i["location"]["lines"]["begin"].as_u64().is_some());
    }
    assert_ne!(issues[0]["fingerprint"], issues[1]["fingerprint"]);
}

#[test]
fn every_format_runs_and_keeps_the_exit_status() {
    let dir = tree();
    for format in ["full", "concise", "grouped", "json", "json-lines", "sarif", "github", "gitlab", "junit"] {
        let o = memlint(dir.path(), &["check", "src", "--format", format]);
        assert_eq!(o.status.code(), Some(1), "{format}: {}", stderr(&o));
        assert!(!o.stdout.is_empty(), "{format}");
        let clean = memlint(dir.path(), &["check", "src/clean.py", "--format", format]);
        assert_eq!(clean.status.code(), Some(0), "{format}");
    }
    let junit = stdout(&memlint(dir.path(), &["check", "src", "--format", "junit"]));
    assert!(junit.contains("tests=\"2\" failures=\"2\""), "{junit}");
    assert!(junit.contains("<testcase name=\"src/clean.py\" classname=\"src/clean.py\" file=\"src/clean.py\"/>"), "{junit}");
    let github = stdout(&memlint(dir.path(), &["check", "src", "--format", "github"]));
    assert!(github.starts_with("::warning title=memlint ML201,file=src/train.py,line=8,"), "{github}");
    let lines = stdout(&memlint(dir.path(), &["check", "src", "--format", "json-lines"]));
    assert_eq!(lines.lines().count(), 2);
}

#[test]
fn output_file_is_written_atomically_and_errors_name_the_file() {
    let dir = tree();
    let o = memlint(dir.path(), &["check", "src", "--format", "sarif", "--output-file", "out/report.sarif"]);
    assert_eq!(o.status.code(), Some(2), "the directory does not exist");
    assert!(stderr(&o).contains("out/report.sarif"), "{}", stderr(&o));

    std::fs::create_dir(dir.path().join("out")).expect("mkdir");
    let o = memlint(dir.path(), &["check", "src", "--format", "sarif", "--output-file", "out/report.sarif"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(o.stdout.is_empty(), "nothing on stdout");
    let written: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("out/report.sarif")).expect("written")).expect("json");
    assert_eq!(written["version"], "2.1.0");
    let leftovers: Vec<_> = std::fs::read_dir(dir.path().join("out")).expect("ls").map(|e| e.expect("entry").file_name()).collect();
    assert_eq!(leftovers.len(), 1, "no temporary file left behind: {leftovers:?}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join("out/report.sarif")).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o644);
    }
    // Replacing an existing report, and the full format without colour codes.
    let o = memlint(dir.path(), &["check", "src", "-o", "out/report.sarif"]);
    assert_eq!(o.status.code(), Some(1));
    let text = std::fs::read_to_string(dir.path().join("out/report.sarif")).expect("read");
    assert!(text.contains("eval-without-no-grad") && !text.contains('\u{1b}'), "{text}");
    // A directory is not a file.
    let o = memlint(dir.path(), &["check", "src", "-o", "out"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("out"));
}
