use std::io::{self, Write};

use super::json::diagnostic_json;
use super::Renderer;
use crate::Report;

/// One JSON object per line per finding, with the fields of the `json`
/// format's `diagnostics` entries; no summary. Suited to streaming and
/// `grep`/`jq -c` pipelines.
#[derive(Debug, Default)]
pub struct JsonLinesRenderer;

impl Renderer for JsonLinesRenderer {
    fn render(&self, report: &Report, out: &mut dyn Write) -> io::Result<()> {
        for (file, d) in report.diagnostics() {
            serde_json::to_writer(&mut *out, &diagnostic_json(file, d))?;
            writeln!(out)?;
        }
        Ok(())
    }
}
