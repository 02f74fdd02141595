use std::io::{self, Write};

use serde_json::{json, Value};

use super::Renderer;
use crate::fingerprint::{fingerprints, normalize_path, FINGERPRINT_VERSION};
use crate::{Diagnostic, Report, RuleInfo, Severity, SourceFile, Span};

/// The SARIF version written.
pub const SARIF_VERSION: &str = "2.1.0";
const SARIF_SCHEMA: &str = "https://json.schemastore.org/sarif-2.1.0.json";

/// SARIF 2.1.0 (Static Analysis Results Interchange Format), as read by
/// GitHub code scanning and other result viewers.
///
/// One run; `tool.driver.rules` lists every rule with its descriptions, help
/// and help URI, and each result points at its rule by `ruleIndex`. Regions
/// are 1-based with columns counted in Unicode code points
/// (`columnKind: unicodeCodePoints`) and an exclusive `endColumn`. Each
/// result carries `partialFingerprints` (see [`crate::fingerprint`]) and its
/// fix, when it has one, as a SARIF `fix`.
#[derive(Debug)]
pub struct SarifRenderer {
    /// The tool's version (`tool.driver.version`).
    pub tool_version: String,
    /// The tool's home page (`tool.driver.informationUri`).
    pub information_uri: String,
    /// Every rule, in code order.
    pub rules: Vec<RuleInfo>,
}

fn level(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "note",
    }
}

/// A path as a SARIF URI reference: relative paths stay relative (resolved
/// against `%SRCROOT%`), absolute ones become `file://` URIs; characters
/// outside RFC 3986's unreserved set are percent-encoded.
pub(crate) fn path_uri(path: &str) -> (String, bool) {
    let p = normalize_path(path);
    let mut out = String::with_capacity(p.len());
    for b in p.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => out.push(b as char),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    if p.starts_with('/') {
        (format!("file://{out}"), true)
    } else {
        (out, false)
    }
}

fn artifact_location(path: &str) -> Value {
    let (uri, absolute) = path_uri(path);
    if absolute {
        json!({"uri": uri})
    } else {
        json!({"uri": uri, "uriBaseId": "%SRCROOT%"})
    }
}

fn region(file: &SourceFile, span: Span) -> Value {
    let (sl, sc) = file.file_location(span.start);
    let (el, ec) = file.file_end_location(span);
    json!({"startLine": sl, "startColumn": sc, "endLine": el, "endColumn": ec})
}

impl SarifRenderer {
    fn rule_json(r: &RuleInfo) -> Value {
        json!({
            "id": r.code,
            "name": r.name,
            "shortDescription": {"text": r.short_description},
            "fullDescription": {"text": r.full_description},
            "help": {"text": format!("{}\n\nSee {}", r.full_description, r.help_uri), "markdown": r.help_markdown},
            "helpUri": r.help_uri,
            "defaultConfiguration": {"level": level(r.default_level), "enabled": r.default_enabled},
            "properties": {"tags": ["pytorch", r.name.as_str()]},
        })
    }

    fn result_json(&self, file: &SourceFile, d: &Diagnostic, fingerprint: &str) -> Value {
        let mut message = d.message.clone();
        if let Some(h) = &d.help {
            message.push_str(&format!("\nhelp: {h}"));
        }
        let mut result = json!({
            "ruleId": d.code,
            "level": level(d.severity),
            "message": {"text": message},
            "locations": [{
                "physicalLocation": {
                    "artifactLocation": artifact_location(file.path()),
                    "region": region(file, d.span),
                }
            }],
            "partialFingerprints": {format!("memlint/v{FINGERPRINT_VERSION}"): fingerprint},
        });
        if let Some(i) = self.rules.iter().position(|r| r.code == d.code) {
            result["ruleIndex"] = json!(i);
        }
        if let Some(fix) = &d.fix {
            let replacements: Vec<Value> = fix
                .edits
                .iter()
                .map(|e| json!({"deletedRegion": region(file, e.span), "insertedContent": {"text": e.content}}))
                .collect();
            result["fixes"] = json!([{
                "description": {"text": format!("{} ({})", fix.message, match fix.applicability {
                    crate::Applicability::Safe => "safe",
                    crate::Applicability::Unsafe => "unsafe",
                })},
                "artifactChanges": [{"artifactLocation": artifact_location(file.path()), "replacements": replacements}],
            }]);
        }
        result
    }

    /// The whole log as a JSON value.
    pub fn to_value(&self, report: &Report) -> Value {
        let mut results = Vec::with_capacity(report.len());
        for f in &report.files {
            let fps = fingerprints(&f.file, f.file.path(), &f.diagnostics);
            for (d, fp) in f.diagnostics.iter().zip(&fps) {
                results.push(self.result_json(&f.file, d, fp));
            }
        }
        json!({
            "$schema": SARIF_SCHEMA,
            "version": SARIF_VERSION,
            "runs": [{
                "tool": {"driver": {
                    "name": "memlint",
                    "version": self.tool_version,
                    "semanticVersion": self.tool_version,
                    "informationUri": self.information_uri,
                    "rules": self.rules.iter().map(Self::rule_json).collect::<Vec<_>>(),
                }},
                "columnKind": "unicodeCodePoints",
                "results": results,
            }]
        })
    }
}

impl Renderer for SarifRenderer {
    fn render(&self, report: &Report, out: &mut dyn Write) -> io::Result<()> {
        serde_json::to_writer_pretty(&mut *out, &self.to_value(report))?;
        writeln!(out)
    }
}
