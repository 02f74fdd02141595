//! `memprobe run --lint`: memlint's memory rules on the project the command
//! runs, each finding ranked by how well it explains what the run measured.

use std::path::{Path, PathBuf};

use memprobe_report::run::{LintFinding, LintView, RunReport};
use memprobe_report::steps::{GrowthVerdict, StepKind};

/// The rules whose hazards show in memory or step figures.
pub const RULES: [&str; 5] = ["ML103", "ML201", "ML202", "ML203", "ML205"];

/// The Python files the command runs: its arguments that name an existing
/// `.py` or `.ipynb` file (`python train.py`, `torchrun ... train.py`), or
/// the working directory for `python -m package.module`.
pub fn scripts(command: &[String]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = command
        .iter()
        .skip(1)
        .map(PathBuf::from)
        .filter(|p| p.extension().is_some_and(|e| e == "py" || e == "ipynb") && p.is_file())
        .collect();
    if out.is_empty() && command.iter().any(|a| a == "-m") {
        if let Ok(cwd) = std::env::current_dir() {
            out.push(cwd);
        }
    }
    out
}

/// The project around a script: the nearest enclosing directory that holds
/// a `pyproject.toml`, `setup.py`, `setup.cfg` or `.git`, else the script's
/// own directory.
pub fn project_root(script: &Path) -> PathBuf {
    let abs = std::path::absolute(script).unwrap_or_else(|_| script.to_path_buf());
    let start = if abs.is_dir() { abs.clone() } else { abs.parent().map(Path::to_path_buf).unwrap_or_default() };
    for dir in start.ancestors() {
        if ["pyproject.toml", "setup.py", "setup.cfg", ".git"].iter().any(|m| dir.join(m).exists()) {
            return dir.to_path_buf();
        }
    }
    start
}

/// Lints the project of the command's first script.
pub fn lint_command(command: &[String]) -> LintView {
    let rules: Vec<String> = RULES.iter().map(|r| r.to_string()).collect();
    let scripts = scripts(command);
    let Some(first) = scripts.first() else {
        return LintView {
            root: String::new(),
            scripts: Vec::new(),
            rules,
            findings: Vec::new(),
            note: Some("--lint: the command names no Python script (.py, .ipynb, or -m module): nothing linted".into()),
        };
    };
    let root = project_root(first);
    let shown: Vec<String> = scripts.iter().map(|s| s.display().to_string()).collect();
    match memlint::lint(std::slice::from_ref(&root), &RULES) {
        Ok(files) => {
            let mut findings = Vec::new();
            for f in &files {
                for d in &f.diagnostics {
                    let (line, column) = f.file.location(d.span.start);
                    findings.push(LintFinding {
                        code: d.code.to_string(),
                        name: d.name.to_string(),
                        path: f.file.path().to_string(),
                        line,
                        column,
                        message: d.message.clone(),
                        explains: None,
                        strength: 1,
                    });
                }
            }
            LintView { root: root.display().to_string(), scripts: shown, rules, findings, note: None }
        }
        Err(e) => LintView {
            root: root.display().to_string(),
            scripts: shown,
            rules,
            findings: Vec::new(),
            note: Some(format!("--lint: memlint could not check {}: {e:#}", root.display())),
        },
    }
}

/// Says what each finding would explain in `report`'s figures and orders
/// them: the strongest explanation first, then findings in the scripts the
/// command runs, then by place.
pub fn rank(view: &mut LintView, report: &RunReport) {
    let steps = report.step_summary();
    let grows = steps.as_ref().filter(|s| s.growth.verdict == GrowthVerdict::Grows).map(|s| s.growth.describe());
    let evaluating = steps.as_ref().is_some_and(|s| s.kind == StepKind::Forward);
    let peak = steps.as_ref().and_then(|s| s.peak_max_bytes).map(|b| memprobe_report::export::fmt_size(b as f64));
    for f in &mut view.findings {
        let (strength, explains) = match (f.code.as_str(), &grows) {
            ("ML202", Some(g)) => (3, Some(format!("memory left after each step {g}: each step's graph is kept"))),
            ("ML203", Some(g)) => (2, Some(format!("memory left after each step {g}: a small view keeps its large base alive"))),
            ("ML103", Some(g)) => (1, Some(format!("possibly memory left after each step ({g})"))),
            ("ML201", _) if evaluating => (
                3,
                Some(format!(
                    "the peak within each forward{}: activations are kept for a backward that never comes",
                    peak.as_ref().map(|p| format!(" ({p})")).unwrap_or_default()
                )),
            ),
            ("ML201", _) => (2, Some("a higher peak while evaluating: activations kept for a backward that never comes".into())),
            ("ML205", _) if steps.is_some() => (2, Some("step time: emptying the allocator's cache each iteration forces new cudaMalloc calls".into())),
            _ => (1, None),
        };
        f.strength = strength;
        f.explains = explains;
    }
    // memlint shows a path as it was given (the absolute root) or relative
    // to the working directory, as the command's script arguments are.
    let scripts: Vec<PathBuf> = view.scripts.iter().filter_map(|s| std::path::absolute(s).ok()).collect();
    let in_script = |f: &LintFinding| std::path::absolute(&f.path).is_ok_and(|p| scripts.contains(&p));
    view.findings.sort_by_cached_key(|f| (std::cmp::Reverse(f.strength), !in_script(f), f.path.clone(), f.line));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_are_the_python_files_the_command_names() {
        let dir = tempfile::tempdir().unwrap();
        let s = dir.path().join("train.py");
        std::fs::write(&s, "").unwrap();
        let cmd = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let p = s.to_str().unwrap();
        assert_eq!(scripts(&cmd(&["python", "-u", p, "--epochs", "1"])), vec![s.clone()]);
        assert_eq!(scripts(&cmd(&["torchrun", "--nproc-per-node", "2", p])), vec![s.clone()]);
        assert!(scripts(&cmd(&["python", "missing.py"])).is_empty());
        assert_eq!(scripts(&cmd(&["python", "-m", "pkg.train"])).len(), 1);
    }

    #[test]
    fn the_project_is_the_nearest_directory_with_a_marker() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("src/pkg");
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::write(dir.path().join("pyproject.toml"), "").unwrap();
        std::fs::write(sub.join("train.py"), "").unwrap();
        assert_eq!(project_root(&sub.join("train.py")), std::path::absolute(dir.path()).unwrap());
    }
}
