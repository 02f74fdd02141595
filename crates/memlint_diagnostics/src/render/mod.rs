//! Output formats. Each format is one file implementing [`Renderer`].

use std::io::{self, Write};

use crate::{Report, Severity};

mod concise;
mod full;
mod github;
mod gitlab;
mod grouped;
mod json;
mod json_lines;
mod junit;
mod sarif;

pub use concise::ConciseRenderer;
pub use full::FullRenderer;
pub use github::GithubRenderer;
pub use gitlab::GitlabRenderer;
pub use grouped::GroupedRenderer;
pub use json::{JsonRenderer, JSON_SCHEMA_VERSION};
pub use json_lines::JsonLinesRenderer;
pub use junit::JunitRenderer;
pub use sarif::{SarifRenderer, SARIF_VERSION};

/// Writes a whole [`Report`] in one format.
pub trait Renderer {
    /// Renders `report` to `out`.
    fn render(&self, report: &Report, out: &mut dyn Write) -> io::Result<()>;
}

/// The closing summary line shared by the human-readable formats, e.g.
/// `Found 3 problems (1 error, 2 warnings) in 12 files`.
pub fn summary_line(report: &Report) -> String {
    let files = plural(report.files_checked, "file", "files");
    let total = report.len();
    if total == 0 {
        return format!("No problems found in {files}");
    }
    let parts: Vec<String> = [
        (Severity::Error, "error", "errors"),
        (Severity::Warning, "warning", "warnings"),
        (Severity::Info, "info", "infos"),
    ]
    .iter()
    .filter_map(|(sev, one, many)| {
        let n = report.count(*sev);
        (n > 0).then(|| plural(n, one, many))
    })
    .collect();
    format!(
        "Found {} ({}) in {files}",
        plural(total, "problem", "problems"),
        parts.join(", ")
    )
}

fn plural(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("{n} {one}")
    } else {
        format!("{n} {many}")
    }
}
