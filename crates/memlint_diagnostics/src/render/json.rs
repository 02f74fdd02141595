use std::collections::BTreeMap;
use std::io::{self, Write};

use serde_json::{json, Value};

use super::Renderer;
use crate::{Diagnostic, Report, SourceFile};

/// Version of the JSON output contract; bump on any incompatible change.
pub const JSON_SCHEMA_VERSION: u32 = 1;

/// The machine-readable contract read by CI gates and other tools.
///
/// Lines and columns are 1-based; columns count characters; `end_column` is
/// exclusive (one past the last character of the span).
#[derive(Debug)]
pub struct JsonRenderer {
    /// The tool's version, written under `tool.version`.
    pub tool_version: String,
}

fn location(file: &SourceFile, start: u32, end: u32) -> (usize, usize, usize, usize) {
    let (l, c) = file.location(start);
    let (el, ec) = file.location(end);
    (l, c, el, ec)
}

pub(crate) fn diagnostic_json(file: &SourceFile, d: &Diagnostic) -> Value {
    let (line, column, end_line, end_column) = location(file, d.span.start, d.span.end);
    let fix = d.fix.as_ref().map(|f| {
        let edits: Vec<Value> = f
            .edits
            .iter()
            .map(|e| {
                let (l, c, el, ec) = location(file, e.span.start, e.span.end);
                json!({"content": e.content, "line": l, "column": c, "end_line": el, "end_column": ec})
            })
            .collect();
        json!({"applicability": f.applicability, "message": f.message, "edits": edits})
    });
    json!({
        "code": d.code,
        "name": d.name,
        "severity": d.severity,
        "path": file.path(),
        "line": line,
        "column": column,
        "end_line": end_line,
        "end_column": end_column,
        "message": d.message,
        "help": d.help,
        "fix": fix,
    })
}

impl JsonRenderer {
    /// The whole report as a JSON value.
    pub fn to_value(&self, report: &Report) -> Value {
        let diagnostics: Vec<Value> = report.diagnostics().map(|(f, d)| diagnostic_json(f, d)).collect();
        let mut by_code: BTreeMap<&str, usize> = BTreeMap::new();
        for (_, d) in report.diagnostics() {
            *by_code.entry(d.code).or_default() += 1;
        }
        json!({
            "schema_version": JSON_SCHEMA_VERSION,
            "tool": {"name": "memlint", "version": self.tool_version},
            "diagnostics": diagnostics,
            "summary": {
                "files": report.files_checked,
                "diagnostics": report.len(),
                "by_code": by_code,
            }
        })
    }
}

impl Renderer for JsonRenderer {
    fn render(&self, report: &Report, out: &mut dyn Write) -> io::Result<()> {
        let value = self.to_value(report);
        serde_json::to_writer_pretty(&mut *out, &value)?;
        writeln!(out)
    }
}
