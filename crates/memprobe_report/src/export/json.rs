use super::Exporter;
use crate::{Report, ReportError};

/// Pretty-printed JSON of the whole report (schema in [`crate::Report`]).
#[derive(Debug, Default, Clone, Copy)]
pub struct JsonExporter;

impl Exporter for JsonExporter {
    fn name(&self) -> &'static str {
        "json"
    }

    fn render(&self, report: &Report) -> Result<String, ReportError> {
        let mut s = serde_json::to_string_pretty(report)?;
        s.push('\n');
        Ok(s)
    }
}
