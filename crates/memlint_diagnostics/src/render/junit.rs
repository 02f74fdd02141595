use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{self, Write};

use super::Renderer;
use crate::{Diagnostic, Report, SourceFile};

/// JUnit XML, as read by CI test-report views: one `<testsuite>`, one
/// `<testcase>` per checked file (passing when the file has no findings),
/// one `<failure>` per finding.
#[derive(Debug, Default)]
pub struct JunitRenderer {
    /// Every checked file's path as shown to the user, including the files
    /// without findings (the report itself lists only files with findings).
    pub checked_paths: Vec<String>,
}

/// Escapes text for an XML attribute or element; characters XML 1.0 cannot
/// hold are dropped.
fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' => out.push_str("&#10;"),
            '\t' | '\r' => out.push_str(&format!("&#{};", c as u32)),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => {}
            c => out.push(c),
        }
    }
    out
}

fn failure(file: &SourceFile, d: &Diagnostic) -> String {
    let (line, col) = file.file_location(d.span.start);
    let mut body = format!("{}:{line}:{col}: {} [{}] {}", file.path(), d.code, d.severity, d.message);
    if let Some(h) = &d.help {
        let _ = write!(body, "\nhelp: {h}");
    }
    format!(
        "      <failure type=\"{}\" message=\"{}\">{}</failure>\n",
        xml_escape(d.code),
        xml_escape(&format!("{line}:{col}: {} {}: {}", d.code, d.name, d.message)),
        xml_escape(&body)
    )
}

impl Renderer for JunitRenderer {
    fn render(&self, report: &Report, out: &mut dyn Write) -> io::Result<()> {
        let by_path: HashMap<&str, _> = report.files.iter().map(|f| (f.file.path(), f)).collect();
        // Every checked file, plus any reported file the list lacks.
        let mut paths: Vec<&str> = self.checked_paths.iter().map(String::as_str).collect();
        for f in &report.files {
            if !self.checked_paths.iter().any(|p| p == f.file.path()) {
                paths.push(f.file.path());
            }
        }
        paths.sort_unstable();
        paths.dedup();
        let failures = report.len();
        let mut xml = String::new();
        xml.push_str("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        let _ = writeln!(xml, "<testsuites name=\"memlint\" tests=\"{}\" failures=\"{failures}\" errors=\"0\">", paths.len());
        let _ = writeln!(
            xml,
            "  <testsuite name=\"memlint\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" skipped=\"0\">",
            paths.len()
        );
        for p in paths {
            let name = xml_escape(p);
            match by_path.get(p) {
                Some(f) if !f.diagnostics.is_empty() => {
                    let _ = writeln!(xml, "    <testcase name=\"{name}\" classname=\"{name}\" file=\"{name}\">");
                    for d in &f.diagnostics {
                        xml.push_str(&failure(&f.file, d));
                    }
                    xml.push_str("    </testcase>\n");
                }
                _ => {
                    let _ = writeln!(xml, "    <testcase name=\"{name}\" classname=\"{name}\" file=\"{name}\"/>");
                }
            }
        }
        xml.push_str("  </testsuite>\n</testsuites>\n");
        out.write_all(xml.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping() {
        assert_eq!(xml_escape("a<b & \"c\"\n\u{1}"), "a&lt;b &amp; &quot;c&quot;&#10;");
    }
}
