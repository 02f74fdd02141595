use std::io::{self, Write};

use super::{summary_line, Renderer};
use crate::Report;

/// Findings grouped by file: the path once, then one indented
/// `line:col CODE [severity] name: message` line per finding, the help
/// line under it, and the closing summary.
#[derive(Debug, Default)]
pub struct GroupedRenderer {
    /// Omit the closing summary line.
    pub quiet: bool,
}

impl Renderer for GroupedRenderer {
    fn render(&self, report: &Report, out: &mut dyn Write) -> io::Result<()> {
        for f in &report.files {
            writeln!(out, "{}:", f.file.path())?;
            let locations: Vec<String> = f
                .diagnostics
                .iter()
                // `4:9`, or `cell 3:4:9` in a notebook.
                .map(|d| f.file.position(d.span.start).to_string())
                .collect();
            let width = locations.iter().map(String::len).max().unwrap_or(0);
            for (d, loc) in f.diagnostics.iter().zip(&locations) {
                writeln!(out, "  {loc:<width$} {} [{}] {}: {}", d.code, d.severity, d.name, d.message)?;
                if let Some(h) = &d.help {
                    writeln!(out, "  {:<width$} help: {h}", "")?;
                }
            }
            writeln!(out)?;
        }
        if !self.quiet {
            writeln!(out, "{}", summary_line(report))?;
        }
        Ok(())
    }
}
