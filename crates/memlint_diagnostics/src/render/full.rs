use std::io::{self, Write};

use annotate_snippets::{Level, Renderer as SnippetRenderer, Snippet};

use super::{summary_line, Renderer};
use crate::{Diagnostic, Report, Severity, SourceFile};

/// rustc/ruff-style output: location, code and name, message, a source frame
/// with the span underlined, a `help:` line, and a closing summary.
#[derive(Debug, Default)]
pub struct FullRenderer {
    /// Use ANSI colours (the caller decides: terminal, `NO_COLOR`).
    pub color: bool,
    /// Omit the closing summary line.
    pub quiet: bool,
}

fn level(sev: Severity) -> Level {
    match sev {
        Severity::Error => Level::Error,
        Severity::Warning => Level::Warning,
        Severity::Info => Level::Info,
    }
}

impl FullRenderer {
    fn render_one(&self, file: &SourceFile, d: &Diagnostic) -> String {
        let renderer = if self.color { SnippetRenderer::styled() } else { SnippetRenderer::plain() };
        let title = format!("{}: {}", d.name, d.message);
        let lvl = level(d.severity);
        let index = file.line_index();
        let text = file.text();
        // The frame's header adds `:line:col` itself; in a notebook the
        // origin names the cell and the frame's lines count from the cell's
        // first line.
        let origin = file.origin(d.span.start);
        let mut message = lvl.title(&title).id(d.code);
        if text.is_empty() {
            // Nothing to frame (unreadable file): the path alone.
            message = message.footer(Level::Note.title(&origin));
        } else {
            // Frame only the lines the span covers, so the cost does not grow
            // with the file's size.
            let first = index.line_of(d.span.start);
            let mut last = index.line_of(d.span.end.saturating_sub(1).max(d.span.start));
            let position = file.position(d.span.start);
            let first_shown = position.line;
            if let Some(cell) = file.cells().and_then(|m| m.cell_at(d.span.start)) {
                // A frame never runs into the next cell.
                last = last.min(index.line_of(cell.end.saturating_sub(1)).max(first));
            }
            let (frame_start, _) = index.line_range(first, text);
            let (_, frame_end) = index.line_range(last, text);
            let source = &text[frame_start..frame_end];
            let rel_start = (d.span.start as usize).saturating_sub(frame_start).min(source.len());
            let mut rel_end = (d.span.end as usize).saturating_sub(frame_start).min(source.len());
            if rel_end <= rel_start {
                rel_end = (rel_start + 1).min(source.len().max(rel_start));
            }
            let snippet = Snippet::source(source)
                .line_start(first_shown)
                .origin(&origin)
                .annotation(lvl.span(rel_start..rel_end));
            message = message.snippet(snippet);
        }
        if let Some(h) = d.help.as_deref() {
            message = message.footer(Level::Help.title(h));
        }
        let rendered = renderer.render(message).to_string();
        rendered
    }
}

impl Renderer for FullRenderer {
    fn render(&self, report: &Report, out: &mut dyn Write) -> io::Result<()> {
        for (file, d) in report.diagnostics() {
            writeln!(out, "{}\n", self.render_one(file, d))?;
        }
        if !self.quiet {
            writeln!(out, "{}", summary_line(report))?;
        }
        Ok(())
    }
}
