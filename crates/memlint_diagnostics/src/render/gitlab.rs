use std::io::{self, Write};

use serde_json::{json, Value};

use super::Renderer;
use crate::fingerprint::{fingerprints, normalize_path};
use crate::{Report, Severity};

/// GitLab Code Quality report: a JSON array of issues with `description`,
/// `check_name`, `fingerprint`, `severity` and `location.path` /
/// `location.lines.begin`, the fields GitLab reads to show findings in merge
/// requests. Paths are as given on the command line, so run memlint from the
/// repository root.
#[derive(Debug, Default)]
pub struct GitlabRenderer;

fn severity(s: Severity) -> &'static str {
    match s {
        Severity::Error => "critical",
        Severity::Warning => "major",
        Severity::Info => "minor",
    }
}

impl GitlabRenderer {
    /// The report as a JSON value.
    pub fn to_value(&self, report: &Report) -> Value {
        let mut issues = Vec::with_capacity(report.len());
        for f in &report.files {
            let fps = fingerprints(&f.file, f.file.path(), &f.diagnostics);
            for (d, fp) in f.diagnostics.iter().zip(fps) {
                let (begin, _) = f.file.file_location(d.span.start);
                let (end, _) = f.file.file_end_location(d.span);
                let mut issue = json!({
                    "type": "issue",
                    "check_name": d.code,
                    "description": format!("{} {}: {}", d.code, d.name, d.message),
                    "categories": ["Bug Risk"],
                    "severity": severity(d.severity),
                    "fingerprint": fp,
                    "location": {"path": normalize_path(f.file.path()), "lines": {"begin": begin, "end": end}},
                });
                if let Some(h) = &d.help {
                    issue["content"] = json!({"body": h});
                }
                issues.push(issue);
            }
        }
        Value::Array(issues)
    }
}

impl Renderer for GitlabRenderer {
    fn render(&self, report: &Report, out: &mut dyn Write) -> io::Result<()> {
        serde_json::to_writer_pretty(&mut *out, &self.to_value(report))?;
        writeln!(out)
    }
}
