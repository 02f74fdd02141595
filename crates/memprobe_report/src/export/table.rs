use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{ContentArrangement, Table};

use super::*;

/// Terminal table (comfy-table) with a header naming device and versions.
#[derive(Debug, Clone, Copy)]
pub struct TableExporter {
    /// Maximum table width in columns; None lets comfy-table detect the terminal.
    pub width: Option<u16>,
}

/// The width the terminal output is laid out for when the terminal's is not
/// known (output to a file or a pipe), and at most.
pub const TERMINAL_WIDTH: usize = 100;

/// `text` wrapped at word boundaries to `width` columns: the first line
/// after `first`, the others after `rest` (a word longer than a line stays
/// whole).
pub(crate) fn wrap(text: &str, width: usize, first: &str, rest: &str) -> String {
    let mut out = String::new();
    let mut line = first.to_string();
    let mut empty = true;
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        let len = line.chars().count();
        if !empty && len + 1 + word.chars().count() > width {
            out.push_str(line.trim_end());
            out.push('\n');
            line = rest.to_string();
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line.push_str(word);
        empty = false;
    }
    out.push_str(line.trim_end());
    out.push('\n');
    out
}

impl Exporter for TableExporter {
    fn name(&self) -> &'static str {
        "table"
    }

    fn render(&self, r: &Report) -> Result<String, ReportError> {
        let width = self.width.map_or(TERMINAL_WIDTH, usize::from).min(TERMINAL_WIDTH);
        let metrics = present_metrics(r);
        let primary = primary_metric(r);
        // The terminal shows what a decision needs and fits in 100 columns:
        // throughput follows from the step time (the markdown and JSON have
        // it), an MFU column only where a device peak is known, and the
        // correctness checks as ok/FAIL with their figures below the table.
        let with_mfu = r.variants.iter().any(|v| v.summary.as_ref().is_some_and(|s| s.mfu.is_some()));
        let mut t = Table::new();
        t.load_preset(UTF8_FULL_CONDENSED);
        t.set_content_arrangement(ContentArrangement::Dynamic);
        t.set_width(width as u16);
        let mut head = vec!["variant".to_string(), "step time\nmedian ± IQR".into(), "speedup".into(), "verdict\ntime · memory".into()];
        head.extend(metrics.iter().map(|m| m.label().to_string()));
        head.push(format!("Δ {}", primary.label()));
        if with_mfu {
            head.push("MFU".into());
        }
        head.push("checks".into());
        t.set_header(head);
        let (marks, footnotes) = status_notes(r);
        let mut checks = Vec::new();
        for (v, note) in r.variants.iter().zip(marks) {
            let label = match &v.info.compared_to {
                Some(c) if *c != VariantId::Baseline => format!("{} (vs {c})", v.info.label),
                _ => v.info.label.clone(),
            };
            let mut row = vec![label, step_cell(v, note), speedup_cell(v), verdict_cell(v)];
            row.extend(metrics.iter().map(|m| memory_cell(v, *m)));
            row.push(delta_cell(v, primary));
            if with_mfu {
                row.push(mfu_cell(v));
            }
            row.push(if v.correctness.is_empty() {
                "-".into()
            } else {
                let cell = v.correctness.iter().map(|c| if c.passed { "ok" } else { "FAIL" }).collect::<Vec<_>>().join(", ");
                checks.push(format!("{}: {}", v.info.label, v.correctness.iter().map(check_text).collect::<Vec<_>>().join("; ")));
                format!("{cell} [c{}]", checks.len())
            });
            t.add_row(row);
        }
        let mut out = String::new();
        for l in header_lines(r) {
            // The header's fields, as many to a line as fit.
            let mut line = String::new();
            for field in l.split(" | ") {
                if !line.is_empty() && line.chars().count() + 3 + field.chars().count() > width {
                    out.push_str(&wrap(&line, width, "", "  "));
                    line.clear();
                }
                if !line.is_empty() {
                    line.push_str(" | ");
                }
                line.push_str(field);
            }
            out.push_str(&wrap(&line, width, "", "  "));
        }
        out.push_str(&t.to_string());
        out.push('\n');
        for (i, c) in checks.iter().enumerate() {
            out.push_str(&wrap(c, width, &format!("  [c{}] ", i + 1), "      "));
        }
        for l in footnotes.iter().chain(&verdict_lines(r)) {
            out.push_str(&wrap(l, width, "  ", "    "));
        }
        // What the markdown lists per variant, the terminal says too (too
        // few runs is said once, above).
        for v in &r.variants {
            for c in v.correctness.iter().filter(|c| c.detail.contains("batch norm")) {
                let text = format!(
                    "check ({}): {}: in training mode the two differ (each micro-batch normalizes with its own batch statistics)",
                    v.info.label, c.detail
                );
                out.push_str(&wrap(&text, width, "  ", "    "));
            }
            let Some(s) = &v.summary else { continue };
            for c in s.time_verdict.iter().chain(&s.memory_verdict) {
                for w in c.warnings.iter().filter(|w| !w.contains("cannot reach")) {
                    out.push_str(&wrap(&format!("warning ({}, {}): {w}", v.info.label, c.what), width, "  ", "    "));
                }
            }
        }
        for l in source_lines(r) {
            out.push_str(&wrap(&l, width, "  ", "    "));
        }
        for n in &r.notes {
            out.push_str(&wrap(&format!("note: {n}"), width, "  ", "    "));
        }
        Ok(out)
    }
}
