//! End-to-end tests of `memprobe ab` with real Python commands.

use tests::*;
use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

static BIN: std::sync::LazyLock<std::path::PathBuf> = std::sync::LazyLock::new(memprobe_bin);

fn python() -> String {
    std::env::var("MEMPROBE_PYTHON").ok().filter(|p| Path::new(p).exists()).unwrap_or_else(|| "/usr/bin/python3".into())
}

fn ab(args: &[&str]) -> Output {
    Command::new(&*BIN).arg("ab").args(args).output().expect("run memprobe ab")
}

fn sleeper(seconds: f64) -> String {
    format!("import time; time.sleep({seconds})")
}

fn comparison<'a>(r: &'a Value, what: &str) -> &'a Value {
    r["comparisons"].as_array().unwrap().iter().find(|c| c["what"] == what).unwrap_or_else(|| panic!("no {what}"))
}

#[test]
fn twice_the_run_time_is_slower_and_identical_commands_are_no_difference() {
    let dir = tempfile::tempdir().unwrap();
    let py = python();
    let (fast, slow) = (sleeper(0.3), sleeper(0.6));
    let json = dir.path().join("ab.json");
    let o = ab(&["--runs", "5", "--json", json.to_str().unwrap(), "--", &py, "-c", &fast, "---", &py, "-c", &slow]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(table.contains("slower ("), "{table}");
    // The method is stated (wrapped at 100 columns in the terminal).
    let flat = table.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flat.contains("Mann-Whitney U test (two-sided), Hodges-Lehmann estimate and interval, 95% confidence, noise threshold ±5%"), "{table}");
    assert!(table.lines().all(|l| l.chars().count() <= 100), "{table}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(r["kind"], "ab");
    assert_eq!(r["results"].as_array().unwrap().len(), 10);
    let order: Vec<&str> = r["results"].as_array().unwrap().iter().map(|x| x["side"].as_str().unwrap()).collect();
    assert_eq!(order, ["a", "b", "a", "b", "a", "b", "a", "b", "a", "b"], "runs alternate");
    let t = comparison(&r, "wall time");
    assert_eq!(t["verdict"], "worse");
    let change = t["change"].as_f64().unwrap();
    assert!(change > 0.6 && change < 1.2, "B takes about twice as long: {change}");
    assert!(t["p_value"].as_f64().unwrap() < 0.05);
    assert!(t["test"].as_str().unwrap().starts_with("Mann-Whitney U test"));

    let json = dir.path().join("same.json");
    let o = ab(&["--runs", "5", "--json", json.to_str().unwrap(), "--", &py, "-c", &fast, "---", &py, "-c", &fast]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let t = comparison(&r, "wall time");
    assert_eq!(t["verdict"], "no-significant-difference", "{t}");
    let (lo, hi) = (t["interval"][0].as_f64().unwrap(), t["interval"][1].as_f64().unwrap());
    assert!(lo < 0.05 && hi > -0.05, "the interval is reported: [{lo}, {hi}]");
    assert!(String::from_utf8_lossy(&o.stdout).contains("no significant difference ("));
}

#[test]
fn bad_separators_and_failing_commands_are_errors() {
    let o = ab(&["--", "true", "false"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("separated by ---"));
    let o = ab(&["--runs", "2", "--", "true", "---", "sh", "-c", "exit 4"]);
    assert_eq!(o.status.code(), Some(1));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("command B failed in run 1 (exit code 4)") && e.contains("--ignore-failure"), "{e}");
    let o = ab(&["--runs", "2", "--ignore-failure", "--", "true", "---", "sh", "-c", "exit 4"]);
    assert!(o.status.success());
}

/// With `--ignore-failure`, a side whose runs failed gets no verdict (a
/// crash is fast and small), and the table says why.
#[test]
fn failed_runs_get_no_verdict_and_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let py = python();
    let json = dir.path().join("ab.json");
    let slow = sleeper(0.4);
    let o = ab(&["--runs", "4", "--ignore-failure", "--json", json.to_str().unwrap(), "--", &py, "-c", &slow, "---", "sh", "-c", "exit 1"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(!table.contains("faster"), "{table}");
    assert!(table.contains("B: 4 of 4 runs failed (exit code 1)"), "{table}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(comparison(&r, "wall time")["verdict"], "inconclusive");
}
