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
        let mut header = vec![
            "variant".to_string(),
            "step time (median ± IQR)".into(),
            "samples/s".into(),
            "speedup".into(),
        ];
        header.extend(metrics.iter().map(|m| m.label().to_string()));
        header.push(format!("Δ {}", primary.label()));
        header.push("MFU".into());
        header.push("correctness".into());
        t.set_header(header);
        for v in &r.variants {
            let mut row = vec![
                match &v.compared_to {
                    Some(c) if c != "baseline" => format!("{} (vs {c})", v.label),
                    _ => v.label.clone(),
                },
                step_cell(v),
                v.summary.as_ref().map(|s| format!("{:.1}", s.samples_per_s)).unwrap_or("-".into()),
                speedup_cell(v),
            ];
            row.extend(metrics.iter().map(|m| memory_cell(v, *m)));
            row.push(delta_cell(v, primary));
            row.push(mfu_cell(v));
            row.push(correctness_cell(v));
            t.add_row(row);
        }
        let mut out = String::new();
        for l in header_lines(r) {
            out.push_str(&l);
            out.push('\n');
        }
        out.push_str(&t.to_string());
        out.push('\n');
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
