//! `--write-baseline` and `--baseline` end to end.

use tests::*;

fn tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "src/train.py", TRAIN);
    dir
}

#[test]
fn baseline_hides_known_findings_survives_shifted_lines_and_reports_new_ones() {
    let dir = tree();
    let o = memlint(dir.path(), &["check", "src", "--write-baseline", "memlint-baseline.json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(o.stdout.is_empty());
    assert!(stderr(&o).contains("wrote 2 findings to memlint-baseline.json"), "{}", stderr(&o));
    let written: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("memlint-baseline.json")).expect("baseline")).expect("json");
    assert_eq!(written["schema_version"], 1);
    assert_eq!(written["findings"][0]["path"], "src/train.py");

    let o = memlint(dir.path(), &["check", "src", "--baseline", "memlint-baseline.json", "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "nothing new: {}", stdout(&o));
    assert_eq!(codes(&o), Vec::<String>::new());
    assert!(stderr(&o).contains("2 findings in the baseline"), "{}", stderr(&o));

    // A line inserted above every finding (and a path spelled differently, from
    // another directory) changes nothing.
    write(dir.path(), "src/train.py", format!("# a new header line\n\n{TRAIN}"));
    let o = memlint(&dir.path().join("src"), &["check", "./train.py", "--baseline", "../memlint-baseline.json", "--format", "json"]);
    assert_eq!(codes(&o), Vec::<String>::new(), "{}", stderr(&o));

    // A newly added hazard is reported, the old ones stay hidden.
    let added = format!("# a new header line\n\n{TRAIN}\n\ndef more(model, loader):\n    losses = 0\n    for x, y in loader:\n        loss = model(x).sum()\n        loss.backward()\n        losses += loss\n");
    write(dir.path(), "src/train.py", &added);
    let o = memlint(dir.path(), &["check", "src", "--baseline", "memlint-baseline.json", "--format", "json"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(codes(&o), ["ML202"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["diagnostics"][0]["line"], 30);

    // A finding whose line changed is new.
    write(dir.path(), "src/train.py", TRAIN.replace("total += loss", "total += loss * 1"));
    let o = memlint(dir.path(), &["check", "src", "--baseline", "memlint-baseline.json", "--format", "json"]);
    assert_eq!(codes(&o), ["ML202"]);

    // A fixed finding is mentioned as gone from the code.
    write(dir.path(), "src/train.py", TRAIN.replace("total += loss", "total += loss.item()"));
    let o = memlint(dir.path(), &["check", "src", "--baseline", "memlint-baseline.json", "--format", "json"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(stderr(&o).contains("1 finding of the baseline no longer found"), "{}", stderr(&o));
}

#[test]
fn equal_lines_are_told_apart_by_occurrence() {
    let dir = tempfile::tempdir().expect("tempdir");
    let one = "import torch\n\n\ndef train(model, loader):\n    total = 0\n    for x in loader:\n        loss = model(x).sum()\n        loss.backward()\n        total += loss\n    return total\n";
    write(dir.path(), "a.py", one);
    memlint(dir.path(), &["check", "a.py", "--write-baseline", "b.json"]);
    let two = one.replace("    return total\n", "    for x in loader:\n        loss = model(x).sum()\n        loss.backward()\n        total += loss\n    return total\n");
    write(dir.path(), "a.py", &two);
    let o = memlint(dir.path(), &["check", "a.py", "--baseline", "b.json", "--format", "json"]);
    assert_eq!(codes(&o), ["ML202"], "the second identical line is new");
}

#[test]
fn bad_baselines_are_errors_naming_the_file() {
    let dir = tree();
    memlint(dir.path(), &["check", "src", "--write-baseline", "base.json"]);
    let text = std::fs::read_to_string(dir.path().join("base.json")).expect("read");

    write(dir.path(), "truncated.json", &text[..text.len() / 2]);
    let o = memlint(dir.path(), &["check", "src", "--baseline", "truncated.json"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("truncated.json") && stderr(&o).contains("not a valid memlint baseline"), "{}", stderr(&o));
    assert!(o.stdout.is_empty(), "nothing reported before the error");

    write(dir.path(), "v2.json", text.replace("\"schema_version\": 1", "\"schema_version\": 2"));
    let o = memlint(dir.path(), &["check", "src", "--baseline", "v2.json"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("v2.json: baseline schema version 2 is not supported"), "{}", stderr(&o));

    write(dir.path(), "other.json", "{\"version\": \"2.1.0\", \"runs\": []}");
    let o = memlint(dir.path(), &["check", "src", "--baseline", "other.json"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("other.json: not a memlint baseline"), "{}", stderr(&o));

    let o = memlint(dir.path(), &["check", "src", "--baseline", "missing.json"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("cannot read baseline missing.json"), "{}", stderr(&o));

    let o = memlint(dir.path(), &["check", "src", "--baseline", "base.json", "--write-baseline", "x.json"]);
    assert_eq!(o.status.code(), Some(2), "conflicting flags");
}
