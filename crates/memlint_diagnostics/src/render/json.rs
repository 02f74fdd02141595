use std::collections::BTreeMap;
use std::io::{self, Write};

use serde_json::{json, Map, Value};

use super::Renderer;
use crate::{Diagnostic, Report, SourceFile, Span};

/// Version of the JSON output contract; bump on any incompatible change.
pub const JSON_SCHEMA_VERSION: u32 = 1;

/// The machine-readable contract read by CI gates and other tools.
///
/// Lines and columns are 1-based; columns count characters; `end_column` is
/// exclusive (one past the last character of the span). In a notebook,
/// diagnostics and fix edits carry a `cell` key after `path` (1-based among
/// all the notebook's cells) and their lines count from that cell's first
/// line; other files have no `cell` key, so their objects are unchanged.
#[derive(Debug)]
pub struct JsonRenderer {
    /// The tool's version, written under `tool.version`.
    pub tool_version: String,
}

/// The cell (notebooks only) and 1-based start and end lines and columns.
fn location(file: &SourceFile, span: Span) -> (Option<u32>, usize, usize, usize, usize) {
    let start = file.position(span.start);
    let end = file.end_position(span);
    (start.cell, start.line, start.column, end.line, end.column)
}

pub(crate) fn diagnostic_json(file: &SourceFile, d: &Diagnostic) -> Value {
    let (cell, line, column, end_line, end_column) = location(file, d.span);
    let fix = d.fix.as_ref().map(|f| {
        let edits: Vec<Value> = f
            .edits
            .iter()
            .map(|e| {
                let (cell, l, c, el, ec) = location(file, e.span);
                let mut edit = Map::new();
                edit.insert("content".into(), json!(e.content));
                if let Some(cell) = cell {
                    edit.insert("cell".into(), json!(cell));
                }
                edit.insert("line".into(), json!(l));
                edit.insert("column".into(), json!(c));
                edit.insert("end_line".into(), json!(el));
                edit.insert("end_column".into(), json!(ec));
                Value::Object(edit)
            })
            .collect();
        json!({"applicability": f.applicability, "message": f.message, "edits": edits})
    });
    let mut v = Map::new();
    v.insert("code".into(), json!(d.code));
    v.insert("name".into(), json!(d.name));
    v.insert("severity".into(), json!(d.severity));
    v.insert("path".into(), json!(file.path()));
    if let Some(cell) = cell {
        v.insert("cell".into(), json!(cell));
    }
    v.insert("line".into(), json!(line));
    v.insert("column".into(), json!(column));
    v.insert("end_line".into(), json!(end_line));
    v.insert("end_column".into(), json!(end_column));
    v.insert("message".into(), json!(d.message));
    v.insert("help".into(), json!(d.help));
    v.insert("fix".into(), json!(fix));
    Value::Object(v)
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
