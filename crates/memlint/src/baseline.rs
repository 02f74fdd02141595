//! Baselines: `--write-baseline FILE` records the current findings,
//! `--baseline FILE` hides the recorded ones.
//!
//! A finding is recorded by its fingerprint
//! ([`memlint_diagnostics::fingerprint`]) computed with the file's path
//! relative to the baseline's directory, so the baseline does not depend on
//! the directory memlint runs from or on how the paths were spelled.

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use memlint_diagnostics::fingerprint::fingerprints;
use memlint_diagnostics::FileReport;
use serde::{Deserialize, Serialize};

/// Version of the baseline file format; bump on any incompatible change.
pub const BASELINE_SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct BaselineFile {
    schema_version: u32,
    tool: String,
    findings: Vec<Entry>,
}

/// One recorded finding; everything but the fingerprint is for people
/// reading the file.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    fingerprint: String,
    code: String,
    path: String,
    line: usize,
    message: String,
}

/// A loaded baseline.
#[derive(Debug)]
pub struct Baseline {
    dir: PathBuf,
    remaining: HashMap<String, usize>,
}

/// `path` made absolute against `cwd`, with `.` and `..` resolved lexically.
fn absolute(cwd: &Path, path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in cwd.join(path).components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

fn baseline_dir(cwd: &Path, file: &Path) -> PathBuf {
    let abs = absolute(cwd, file);
    abs.parent().map(Path::to_path_buf).unwrap_or(abs)
}

/// The path recorded for a checked file: relative to `dir` when below it.
fn recorded_path(cwd: &Path, dir: &Path, shown: &str) -> String {
    let abs = absolute(cwd, Path::new(shown));
    match abs.strip_prefix(dir) {
        Ok(rel) => rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/"),
        Err(_) => abs.to_string_lossy().into_owned(),
    }
}

fn file_fingerprints(cwd: &Path, dir: &Path, f: &FileReport) -> Vec<String> {
    fingerprints(&f.file, &recorded_path(cwd, dir, f.file.path()), &f.diagnostics)
}

/// Writes every finding of `files` to `path` (atomically); returns how many.
pub fn write(cwd: &Path, path: &Path, files: &[FileReport]) -> Result<usize> {
    let dir = baseline_dir(cwd, path);
    let mut findings = Vec::new();
    for f in files {
        for (d, fp) in f.diagnostics.iter().zip(file_fingerprints(cwd, &dir, f)) {
            findings.push(Entry {
                fingerprint: fp,
                code: d.code.to_string(),
                path: recorded_path(cwd, &dir, f.file.path()),
                line: f.file.location(d.span.start).0,
                message: d.message.clone(),
            });
        }
    }
    let n = findings.len();
    let doc = BaselineFile { schema_version: BASELINE_SCHEMA_VERSION, tool: "memlint".into(), findings };
    let mut text = serde_json::to_string_pretty(&doc).context("cannot serialise the baseline")?;
    text.push('\n');
    safe_io::write_output(path, text.as_bytes()).map_err(|e| anyhow!("cannot write baseline {}: {e}", path.display()))?;
    Ok(n)
}

impl Baseline {
    /// Reads a baseline; any problem is an error naming the file.
    pub fn load(cwd: &Path, path: &Path) -> Result<Baseline> {
        let shown = path.display();
        let text = crate::fsutil::read_text(path, crate::fsutil::BASELINE_LIMIT)
            .map_err(|e| anyhow!("cannot read baseline {shown}: {e}"))?;
        let value: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| anyhow!("{shown}: not a valid memlint baseline: {e} (re-create it with --write-baseline)"))?;
        match value.get("schema_version") {
            Some(v) if v.as_u64() == Some(u64::from(BASELINE_SCHEMA_VERSION)) => {}
            Some(v) => bail!(
                "{shown}: baseline schema version {v} is not supported: this memlint reads version {BASELINE_SCHEMA_VERSION} (re-create it with --write-baseline)"
            ),
            None => bail!("{shown}: not a memlint baseline: no `schema_version` (re-create it with --write-baseline)"),
        }
        let doc: BaselineFile = serde_json::from_value(value)
            .map_err(|e| anyhow!("{shown}: not a valid memlint baseline: {e} (re-create it with --write-baseline)"))?;
        if doc.tool != "memlint" {
            bail!("{shown}: a baseline of `{}`, not of memlint", doc.tool);
        }
        let mut remaining = HashMap::new();
        for e in doc.findings {
            *remaining.entry(e.fingerprint).or_insert(0) += 1;
        }
        Ok(Baseline { dir: baseline_dir(cwd, path), remaining })
    }

    /// Drops the findings the baseline records (each entry hides one
    /// finding); returns how many were hidden.
    pub fn filter(&mut self, cwd: &Path, files: &mut Vec<FileReport>) -> usize {
        let mut hidden = 0;
        for f in files.iter_mut() {
            let fps = file_fingerprints(cwd, &self.dir, f);
            let mut keep = fps.iter().map(|fp| match self.remaining.get_mut(fp) {
                Some(n) if *n > 0 => {
                    *n -= 1;
                    hidden += 1;
                    false
                }
                _ => true,
            });
            f.diagnostics.retain(|_| keep.next().unwrap_or(true));
        }
        files.retain(|f| !f.diagnostics.is_empty());
        hidden
    }

    /// How many recorded findings were not found again (fixed since).
    pub fn unmatched(&self) -> usize {
        self.remaining.values().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorded_paths_are_relative_to_the_baseline() {
        let cwd = Path::new("/repo/sub");
        let dir = baseline_dir(cwd, Path::new("../memlint-baseline.json"));
        assert_eq!(dir, Path::new("/repo"));
        assert_eq!(recorded_path(cwd, &dir, "./src/a.py"), "sub/src/a.py");
        assert_eq!(recorded_path(Path::new("/repo"), &dir, "sub/src/a.py"), "sub/src/a.py");
        assert_eq!(recorded_path(cwd, &dir, "/elsewhere/b.py"), "/elsewhere/b.py");
    }
}
