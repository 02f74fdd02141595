use std::io::{self, Write};

use super::Renderer;
use crate::{Report, Severity};

/// GitHub Actions workflow commands: one `::error`/`::warning`/`::notice`
/// line per finding, which GitHub shows as an annotation on the pull
/// request's diff.
#[derive(Debug, Default)]
pub struct GithubRenderer;

/// Escapes a workflow command's message.
fn escape_data(s: &str) -> String {
    s.replace('%', "%25").replace('\r', "%0D").replace('\n', "%0A")
}

/// Escapes a workflow command's property value.
fn escape_property(s: &str) -> String {
    escape_data(s).replace(':', "%3A").replace(',', "%2C")
}

impl Renderer for GithubRenderer {
    fn render(&self, report: &Report, out: &mut dyn Write) -> io::Result<()> {
        for (file, d) in report.diagnostics() {
            let command = match d.severity {
                Severity::Error => "error",
                Severity::Warning => "warning",
                Severity::Info => "notice",
            };
            let (line, col) = file.file_location(d.span.start);
            let (end_line, end_col) = file.file_end_location(d.span);
            let mut message = format!("{}: {}", d.name, d.message);
            if let Some(h) = &d.help {
                message.push_str(&format!("\nhelp: {h}"));
            }
            // GitHub reads `col`/`endColumn` only on single-line annotations.
            let columns =
                if line == end_line { format!(",col={col},endColumn={end_col}") } else { String::new() };
            writeln!(
                out,
                "::{command} title={},file={},line={line},endLine={end_line}{columns}::{}",
                escape_property(&format!("memlint {}", d.code)),
                escape_property(&crate::fingerprint::normalize_path(file.path())),
                escape_data(&message),
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes() {
        assert_eq!(escape_data("50% a\nb"), "50%25 a%0Ab");
        assert_eq!(escape_property("a,b:c"), "a%2Cb%3Ac");
    }
}
