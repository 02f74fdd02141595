use std::fmt::Write;

use super::*;

/// GitHub-flavoured markdown: environment list, A/B table, sources, notes.
#[derive(Debug, Default, Clone, Copy)]
pub struct MarkdownExporter;

fn esc(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

impl Exporter for MarkdownExporter {
    fn name(&self) -> &'static str {
        "markdown"
    }

    fn render(&self, r: &Report) -> Result<String, ReportError> {
        let metrics = present_metrics(r);
        let primary = primary_metric(r);
        let mut out = String::new();
        writeln!(out, "# memprobe bench: {} ({})", r.workload.name, r.workload.size)?;
        writeln!(out)?;
        for l in header_lines(r) {
            writeln!(out, "- {}", esc(&l))?;
        }
        writeln!(out)?;
        let head = column_headers(&metrics, primary);
        writeln!(out, "| {} |", head.join(" | "))?;
        writeln!(out, "|{}", "---|".repeat(head.len()))?;
        let (marks, footnotes) = status_notes(r);
        for (v, note) in r.variants.iter().zip(marks) {
            let mut row = vec![esc(&v.info.label)];
            row.extend(row_cells(v, note, &metrics, primary).iter().map(|c| esc(c)));
            writeln!(out, "| {} |", row.join(" | "))?;
        }
        writeln!(out)?;
        for l in footnotes.iter().chain(&verdict_lines(r)) {
            writeln!(out, "{}  ", esc(l))?;
        }
        writeln!(out)?;
        writeln!(out, "Variants:")?;
        writeln!(out)?;
        for v in &r.variants {
            let vs = v.info.compared_to.map(|c| format!(" (compared with `{c}`)")).unwrap_or_default();
            writeln!(out, "- `{}`{}: {}", v.info.id, vs, esc(&v.info.description))?;
            match &v.status {
                VariantStatus::Ok => {}
                VariantStatus::Pending => writeln!(out, "  - pending: no run finished yet")?,
                VariantStatus::Oom { message } => writeln!(out, "  - out of memory: {}", esc(message))?,
                VariantStatus::Crashed { exit_status, stderr_tail } => {
                    writeln!(out, "  - worker crashed ({}): {}", esc(exit_status), esc(stderr_tail))?
                }
                VariantStatus::Failed { message } => writeln!(out, "  - failed: {}", esc(message))?,
                VariantStatus::Skipped { reason } => writeln!(out, "  - skipped: {}", esc(reason))?,
                VariantStatus::Interrupted => writeln!(out, "  - interrupted before every run finished")?,
            }
            for c in &v.correctness {
                writeln!(out, "  - {}: {}", esc(&check_text(c)), esc(&c.detail))?;
            }
            if let Some(s) = &v.summary {
                for c in s.time_verdict.iter().chain(&s.memory_verdict) {
                    writeln!(out, "  - {}: {}", esc(&c.what), esc(&c.describe()))?;
                    for w in &c.warnings {
                        writeln!(out, "    - {}", esc(w))?;
                    }
                }
            }
        }
        writeln!(out)?;
        writeln!(out, "Sources:")?;
        writeln!(out)?;
        for l in source_lines(r) {
            writeln!(out, "- {}", esc(&l))?;
        }
        if !r.notes.is_empty() {
            writeln!(out)?;
            writeln!(out, "Notes:")?;
            writeln!(out)?;
            for n in &r.notes {
                writeln!(out, "- {}", esc(n))?;
            }
        }
        Ok(out)
    }
}
