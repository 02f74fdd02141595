use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{ContentArrangement, Table};

use super::*;

/// Terminal table (comfy-table) with a header naming device and versions.
#[derive(Debug, Clone, Copy)]
pub struct TableExporter {
    /// Maximum table width in columns; None lets comfy-table detect the terminal.
    pub width: Option<u16>,
}

impl Exporter for TableExporter {
    fn name(&self) -> &'static str {
        "table"
    }

    fn render(&self, r: &Report) -> Result<String, ReportError> {
        let metrics = present_metrics(r);
        let primary = primary_metric(r);
        let mut t = Table::new();
        t.load_preset(UTF8_FULL_CONDENSED);
        t.set_content_arrangement(ContentArrangement::Dynamic);
        if let Some(w) = self.width {
            t.set_width(w);
        }
        t.set_header(column_headers(&metrics, primary));
        let (marks, footnotes) = status_notes(r);
        for (v, note) in r.variants.iter().zip(marks) {
            let label = match &v.info.compared_to {
                Some(c) if *c != VariantId::Baseline => format!("{} (vs {c})", v.info.label),
                _ => v.info.label.clone(),
            };
            let mut row = vec![label];
            row.extend(row_cells(v, note, &metrics, primary));
            t.add_row(row);
        }
        let mut out = String::new();
        for l in header_lines(r) {
            out.push_str(&l);
            out.push('\n');
        }
        out.push_str(&t.to_string());
        out.push('\n');
        for l in footnotes.iter().chain(&verdict_lines(r)) {
            out.push_str("  ");
            out.push_str(l);
            out.push('\n');
        }
        // What the markdown lists per variant, the terminal says too (too
        // few runs is said once, above).
        for v in &r.variants {
            for c in v.correctness.iter().filter(|c| c.detail.contains("batch norm")) {
                out.push_str(&format!(
                    "  check ({}): {}: in training mode the two differ (each micro-batch normalizes with its own batch statistics)\n",
                    v.info.label, c.detail
                ));
            }
            let Some(s) = &v.summary else { continue };
            for c in s.time_verdict.iter().chain(&s.memory_verdict) {
                for w in c.warnings.iter().filter(|w| !w.contains("cannot reach")) {
                    out.push_str(&format!("  warning ({}, {}): {w}\n", v.info.label, c.what));
                }
            }
        }
        for l in source_lines(r) {
            out.push_str("  ");
            out.push_str(&l);
            out.push('\n');
        }
        for n in &r.notes {
            out.push_str("  note: ");
            out.push_str(n);
            out.push('\n');
        }
        Ok(out)
    }
}
