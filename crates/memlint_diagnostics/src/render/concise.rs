use std::io::{self, Write};

use super::{summary_line, Renderer};
use crate::Report;

/// One line per diagnostic: `path:line:col: CODE [severity] message`.
#[derive(Debug, Default)]
pub struct ConciseRenderer {
    /// Omit the closing summary line.
    pub quiet: bool,
}

impl Renderer for ConciseRenderer {
    fn render(&self, report: &Report, out: &mut dyn Write) -> io::Result<()> {
        for (file, d) in report.diagnostics() {
            let (line, col) = file.location(d.span.start);
            writeln!(
                out,
                "{}:{}:{}: {} [{}] {}: {}",
                file.path(),
                line,
                col,
                d.code,
                d.severity,
                d.name,
                d.message
            )?;
        }
        if !self.quiet {
            writeln!(out, "{}", summary_line(report))?;
        }
        Ok(())
    }
}
