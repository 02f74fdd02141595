use std::io::{self, Write};

use super::{summary_line, Renderer};
use crate::Report;

/// One line per diagnostic: `path:line:col: CODE [severity] message`
/// (`nb.ipynb:cell 3:4:9: ...` in a notebook).
#[derive(Debug, Default)]
pub struct ConciseRenderer {
    /// Omit the closing summary line.
    pub quiet: bool,
}

impl Renderer for ConciseRenderer {
    fn render(&self, report: &Report, out: &mut dyn Write) -> io::Result<()> {
        for (file, d) in report.diagnostics() {
            writeln!(
                out,
                "{}:{}: {} [{}] {}: {}",
                file.path(),
                file.position(d.span.start),
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
