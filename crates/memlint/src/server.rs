//! `memlint server`: a Language Server over stdio.
//!
//! The main loop reads LSP messages and keeps the open documents; linting
//! runs on a worker thread, so a large file never blocks the loop. Each
//! document's newest version wins: a job whose version is no longer the
//! newest when it starts or finishes is dropped without publishing.
//!
//! Published diagnostics carry the code, severity, `name: message`, the
//! help line as related information, and a link to the rule's page. Code
//! actions: each finding's fix ("Fix ML401: ..."), "Fix all safe" (also as
//! `source.fixAll.memlint`), and a `# memlint: ignore[CODE]` quick fix.
//! Every document is checked with the configuration discovered for its path
//! (`memlint.toml` / `pyproject.toml` above it), read anew for each lint so
//! edits to the configuration apply without a restart.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, Context, Result};
use crossbeam_channel::{unbounded, Receiver, Sender};
use lsp_server::{Connection, Message, Notification, Request, RequestId, Response};
use lsp_types::notification::{
    DidChangeTextDocument, DidCloseTextDocument, DidOpenTextDocument, DidSaveTextDocument, Notification as _,
    PublishDiagnostics, ShowMessage,
};
use lsp_types::request::{CodeActionRequest, Request as _};
use lsp_types::{
    CodeAction, CodeActionKind, CodeActionOptions, CodeActionOrCommand, CodeActionParams, CodeActionProviderCapability,
    CodeDescription, Diagnostic as LspDiagnostic, DiagnosticRelatedInformation, DiagnosticSeverity,
    DidChangeTextDocumentParams, DidCloseTextDocumentParams, DidOpenTextDocumentParams, DidSaveTextDocumentParams,
    InitializeParams, InitializeResult, Location, MessageType, NumberOrString, Position, PositionEncodingKind,
    PublishDiagnosticsParams, Range, SaveOptions, ServerCapabilities, ServerInfo, ShowMessageParams,
    TextDocumentSyncCapability, TextDocumentSyncKind, TextDocumentSyncOptions, TextDocumentSyncSaveOptions, TextEdit,
    Uri, WorkspaceEdit,
};
use memlint_diagnostics::fix::{apply_fixes, FixMode};
use memlint_diagnostics::{Applicability, Diagnostic, LineIndex, Severity, Span};
use memlint_linter::{is_test_file, lint_file, lint_source, summarize_source, FileContext, LintOptions, ProjectIndex};

const SOURCE: &str = "memlint";
const FIX_ALL_KIND: &str = "source.fixAll.memlint";

/// How positions count characters in a line, as negotiated with the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Encoding {
    Utf8,
    Utf16,
    Utf32,
}

/// One open document.
#[derive(Debug, Clone)]
struct Document {
    version: i32,
    text: Arc<String>,
}

/// A lint of one version of a document, kept for code actions.
#[derive(Debug, Clone)]
struct Linted {
    version: i32,
    text: Arc<String>,
    diagnostics: Arc<Vec<Diagnostic>>,
}

/// State shared by the main loop and the worker.
#[derive(Default)]
struct Shared {
    /// The newest version of each open document.
    latest: Mutex<HashMap<String, i32>>,
    /// The newest finished lint of each open document.
    linted: Mutex<HashMap<String, Linted>>,
}

impl Shared {
    fn is_latest(&self, uri: &str, version: i32) -> bool {
        self.latest.lock().map(|m| m.get(uri) == Some(&version)).unwrap_or(false)
    }
}

struct Job {
    uri: Uri,
    version: i32,
    text: Arc<String>,
}

/// Runs the server until the client shuts it down; exit status 0.
pub fn run() -> Result<u8> {
    let (connection, io_threads) = crate::transport::stdio().context("cannot start the LSP transport")?;
    let (id, params) = connection.initialize_start().context("LSP initialize")?;
    let params: InitializeParams = serde_json::from_value(params).context("invalid initialize parameters")?;
    let encoding = negotiate(&params);
    let result = InitializeResult {
        capabilities: capabilities(encoding),
        server_info: Some(ServerInfo { name: SOURCE.into(), version: Some(env!("CARGO_PKG_VERSION").into()) }),
    };
    connection.initialize_finish(id, serde_json::to_value(result)?).context("LSP initialize")?;

    let shared = Arc::new(Shared::default());
    let (jobs_tx, jobs_rx) = unbounded::<Job>();
    let worker = {
        let shared = shared.clone();
        let sender = connection.sender.clone();
        std::thread::Builder::new()
            .name("memlint-lint".into())
            .stack_size(crate::WORKER_STACK)
            .spawn(move || worker_loop(&jobs_rx, &shared, &sender, encoding))
            .context("cannot start the lint thread")?
    };
    let mut server = Server { connection: &connection, shared, jobs: jobs_tx, documents: HashMap::new(), encoding };
    let outcome = server.main_loop();
    drop(server);
    worker.join().map_err(|_| anyhow!("the lint thread panicked"))?;
    drop(connection);
    io_threads.join().context("LSP stdio")?;
    outcome.map(|_| 0)
}

fn negotiate(params: &InitializeParams) -> Encoding {
    let offered = params.capabilities.general.as_ref().and_then(|g| g.position_encodings.as_ref());
    match offered {
        Some(list) if list.contains(&PositionEncodingKind::UTF8) => Encoding::Utf8,
        Some(list) if list.contains(&PositionEncodingKind::UTF32) && !list.contains(&PositionEncodingKind::UTF16) => {
            Encoding::Utf32
        }
        _ => Encoding::Utf16,
    }
}

fn capabilities(encoding: Encoding) -> ServerCapabilities {
    ServerCapabilities {
        position_encoding: Some(match encoding {
            Encoding::Utf8 => PositionEncodingKind::UTF8,
            Encoding::Utf16 => PositionEncodingKind::UTF16,
            Encoding::Utf32 => PositionEncodingKind::UTF32,
        }),
        text_document_sync: Some(TextDocumentSyncCapability::Options(TextDocumentSyncOptions {
            open_close: Some(true),
            change: Some(TextDocumentSyncKind::INCREMENTAL),
            save: Some(TextDocumentSyncSaveOptions::SaveOptions(SaveOptions { include_text: Some(false) })),
            ..Default::default()
        })),
        code_action_provider: Some(CodeActionProviderCapability::Options(CodeActionOptions {
            code_action_kinds: Some(vec![CodeActionKind::QUICKFIX, CodeActionKind::new(FIX_ALL_KIND)]),
            resolve_provider: Some(false),
            work_done_progress_options: Default::default(),
        })),
        ..Default::default()
    }
}

struct Server<'c> {
    connection: &'c Connection,
    shared: Arc<Shared>,
    jobs: Sender<Job>,
    documents: HashMap<String, Document>,
    encoding: Encoding,
}

impl Server<'_> {
    fn main_loop(&mut self) -> Result<()> {
        for msg in &self.connection.receiver {
            match msg {
                Message::Request(req) => {
                    if self.connection.handle_shutdown(&req).context("LSP shutdown")? {
                        return Ok(());
                    }
                    self.request(req)?;
                }
                Message::Notification(n) => self.notification(n)?,
                Message::Response(_) => {}
            }
        }
        Ok(())
    }

    fn respond(&self, resp: Response) -> Result<()> {
        self.connection.sender.send(Message::Response(resp)).map_err(|_| anyhow!("the client connection closed"))
    }

    fn request(&mut self, req: Request) -> Result<()> {
        if req.method == CodeActionRequest::METHOD {
            let id = req.id.clone();
            match serde_json::from_value::<CodeActionParams>(req.params) {
                Ok(params) => {
                    let actions = self.code_actions(&params);
                    self.respond(Response::new_ok(id, actions))
                }
                Err(e) => self.respond(invalid_params(id, e)),
            }
        } else {
            self.respond(Response::new_err(
                req.id,
                lsp_server::ErrorCode::MethodNotFound as i32,
                format!("memlint does not handle `{}`", req.method),
            ))
        }
    }

    fn notification(&mut self, n: Notification) -> Result<()> {
        match n.method.as_str() {
            DidOpenTextDocument::METHOD => {
                if let Ok(p) = serde_json::from_value::<DidOpenTextDocumentParams>(n.params) {
                    self.update(p.text_document.uri, p.text_document.version, p.text_document.text);
                }
            }
            DidChangeTextDocument::METHOD => {
                if let Ok(p) = serde_json::from_value::<DidChangeTextDocumentParams>(n.params) {
                    // Incremental sync: each change replaces a range (or, without
                    // one, the whole text), in order.
                    let Some(doc) = self.documents.get(p.text_document.uri.as_str()) else { return Ok(()) };
                    let mut text = doc.text.as_str().to_string();
                    for change in p.content_changes {
                        match change.range {
                            Some(r) => {
                                let index = LineIndex::new(&text);
                                let start = offset(&text, &index, r.start, self.encoding);
                                let end = offset(&text, &index, r.end, self.encoding).max(start);
                                text.replace_range(start..end, &change.text);
                            }
                            None => text = change.text,
                        }
                    }
                    self.update(p.text_document.uri, p.text_document.version, text);
                }
            }
            DidSaveTextDocument::METHOD => {
                if let Ok(p) = serde_json::from_value::<DidSaveTextDocumentParams>(n.params) {
                    // The configuration may have changed: lint the current text again.
                    if let Some(doc) = self.documents.get(p.text_document.uri.as_str()).cloned() {
                        self.schedule(p.text_document.uri, doc);
                    }
                }
            }
            DidCloseTextDocument::METHOD => {
                if let Ok(p) = serde_json::from_value::<DidCloseTextDocumentParams>(n.params) {
                    let key = p.text_document.uri.as_str().to_string();
                    self.documents.remove(&key);
                    if let Ok(mut m) = self.shared.latest.lock() {
                        m.remove(&key);
                    }
                    if let Ok(mut m) = self.shared.linted.lock() {
                        m.remove(&key);
                    }
                    publish(&self.connection.sender, p.text_document.uri, Vec::new(), None);
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn update(&mut self, uri: Uri, version: i32, text: String) {
        let doc = Document { version, text: Arc::new(text) };
        self.documents.insert(uri.as_str().to_string(), doc.clone());
        self.schedule(uri, doc);
    }

    fn schedule(&self, uri: Uri, doc: Document) {
        if let Ok(mut m) = self.shared.latest.lock() {
            m.insert(uri.as_str().to_string(), doc.version);
        }
        let _ = self.jobs.send(Job { uri, version: doc.version, text: doc.text });
    }

    /// The worker's lint of the document's current version. None while that
    /// version is still being linted: the main loop never lints itself, and
    /// clients ask for code actions again once the diagnostics arrive.
    fn linted(&self, uri: &Uri) -> Option<Linted> {
        let doc = self.documents.get(uri.as_str())?;
        let linted = self.shared.linted.lock().ok()?.get(uri.as_str()).cloned()?;
        (linted.version == doc.version).then_some(linted)
    }

    fn code_actions(&self, params: &CodeActionParams) -> Vec<CodeActionOrCommand> {
        let uri = &params.text_document.uri;
        let Some(linted) = self.linted(uri) else { return Vec::new() };
        let text = linted.text.as_str();
        let index = LineIndex::new(text);
        let only = params.context.only.as_ref();
        let wants = |kind: &CodeActionKind| {
            only.is_none_or(|o| o.iter().any(|k| kind.as_str() == k.as_str() || kind.as_str().starts_with(&format!("{}.", k.as_str()))))
        };
        let mut actions = Vec::new();
        if wants(&CodeActionKind::QUICKFIX) {
            for d in linted.diagnostics.iter() {
                let range = range(text, &index, d.span, self.encoding);
                if !intersects(range, params.range) {
                    continue;
                }
                let lsp = to_lsp(uri, text, &index, d, self.encoding);
                if let Some(fix) = &d.fix {
                    let edits = fix
                        .edits
                        .iter()
                        .map(|e| TextEdit { range: range_of(text, &index, e.span, self.encoding), new_text: e.content.clone() })
                        .collect();
                    let unsafe_note = if fix.applicability == Applicability::Unsafe { " (unsafe: review it)" } else { "" };
                    actions.push(CodeActionOrCommand::CodeAction(CodeAction {
                        title: format!("Fix {}: {}{unsafe_note}", d.code, fix.message),
                        kind: Some(CodeActionKind::QUICKFIX),
                        diagnostics: Some(vec![lsp.clone()]),
                        edit: Some(workspace_edit(uri, edits)),
                        is_preferred: Some(fix.applicability == Applicability::Safe),
                        ..Default::default()
                    }));
                }
                if let Some(edit) = ignore_edit(text, &index, d, self.encoding) {
                    actions.push(CodeActionOrCommand::CodeAction(CodeAction {
                        title: format!("Ignore {} on this line (# memlint: ignore[{}])", d.code, d.code),
                        kind: Some(CodeActionKind::QUICKFIX),
                        diagnostics: Some(vec![lsp]),
                        edit: Some(workspace_edit(uri, vec![edit])),
                        ..Default::default()
                    }));
                }
            }
        }
        let fix_all = apply_fixes(text, &linted.diagnostics, FixMode::Safe);
        if fix_all.changed() {
            let whole = range_of(text, &index, Span::new(0, u32::try_from(text.len()).unwrap_or(u32::MAX)), self.encoding);
            for kind in [CodeActionKind::QUICKFIX, CodeActionKind::new(FIX_ALL_KIND)] {
                if wants(&kind) {
                    actions.push(CodeActionOrCommand::CodeAction(CodeAction {
                        title: format!("Fix all safe ({} in this file)", fix_all.fixed.len()),
                        kind: Some(kind),
                        edit: Some(workspace_edit(uri, vec![TextEdit { range: whole, new_text: fix_all.text.clone() }])),
                        ..Default::default()
                    }));
                }
            }
        }
        actions
    }
}

fn invalid_params(id: RequestId, e: serde_json::Error) -> Response {
    Response::new_err(id, lsp_server::ErrorCode::InvalidParams as i32, e.to_string())
}

fn workspace_edit(uri: &Uri, edits: Vec<TextEdit>) -> WorkspaceEdit {
    WorkspaceEdit { changes: Some(HashMap::from([(uri.clone(), edits)])), ..Default::default() }
}

fn worker_loop(jobs: &Receiver<Job>, shared: &Shared, sender: &Sender<Message>, encoding: Encoding) {
    while let Ok(job) = jobs.recv() {
        let key = job.uri.as_str().to_string();
        if !shared.is_latest(&key, job.version) {
            continue;
        }
        match lint_document(&job.uri, &job.text) {
            Ok(diagnostics) => {
                if !shared.is_latest(&key, job.version) {
                    continue;
                }
                let text = job.text.as_str();
                let index = LineIndex::new(text);
                let lsp = diagnostics.iter().map(|d| to_lsp(&job.uri, text, &index, d, encoding)).collect();
                if let Ok(mut m) = shared.linted.lock() {
                    m.insert(
                        key,
                        Linted { version: job.version, text: job.text.clone(), diagnostics: Arc::new(diagnostics) },
                    );
                }
                publish(sender, job.uri, lsp, Some(job.version));
            }
            Err(e) => {
                let params = ShowMessageParams { typ: MessageType::ERROR, message: format!("memlint: {e:#}") };
                let _ = sender.send(Message::Notification(Notification::new(ShowMessage::METHOD.into(), params)));
            }
        }
    }
}

fn publish(sender: &Sender<Message>, uri: Uri, diagnostics: Vec<LspDiagnostic>, version: Option<i32>) {
    let params = PublishDiagnosticsParams { uri, diagnostics, version };
    let _ = sender.send(Message::Notification(Notification::new(PublishDiagnostics::METHOD.into(), params)));
}

/// The local path of a `file:` URI (percent-decoded).
fn file_path(uri: &Uri) -> Option<PathBuf> {
    let rest = uri.as_str().strip_prefix("file://")?;
    let rest = rest.strip_prefix("localhost").unwrap_or(rest);
    let bytes = rest.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = (bytes[i] == b'%').then(|| bytes.get(i + 1..i + 3)).flatten();
        if let Some(b) = hex.and_then(|h| std::str::from_utf8(h).ok()).and_then(|h| u8::from_str_radix(h, 16).ok()) {
            out.push(b);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok().map(PathBuf::from)
}

/// The edit that adds `# memlint: ignore[CODE]` to the finding's first
/// line (suppressions apply to the line a finding starts on), or adds the
/// code to the line's existing `# memlint: ignore[...]`.
fn ignore_edit(text: &str, index: &LineIndex, d: &Diagnostic, encoding: Encoding) -> Option<TextEdit> {
    let line = index.line_of(d.span.start);
    let (start, end) = index.line_range(line, text);
    let line_text = text.get(start..end)?;
    if line_text.trim_end().ends_with('\\') {
        // A comment cannot follow a line continuation.
        return None;
    }
    let (at, new_text) = match line_text.find("# memlint: ignore[") {
        Some(p) => {
            let close = line_text[p..].find(']')?;
            (start + p + close, format!(", {}", d.code))
        }
        None => (end, format!("  # memlint: ignore[{}]", d.code)),
    };
    let at = u32::try_from(at).ok()?;
    Some(TextEdit { range: range_of(text, index, Span::new(at, at), encoding), new_text })
}

/// Lints a document's text with the rules configured for its path.
fn lint_document(uri: &Uri, text: &str) -> Result<Vec<Diagnostic>> {
    let path = file_path(uri);
    let (rules, excluded) = match &path {
        Some(p) => crate::check::rules_for(p)?,
        None => (crate::check::rules_for_unsaved(), false),
    };
    if excluded {
        return Ok(Vec::new());
    }
    let is_test_file = path.as_deref().is_some_and(|p| is_test_file(Path::new(p), text));
    let options = LintOptions { rules, is_test_file, module: None };
    // The document is its own project (the editor shows one file), with
    // the module path and the torch minimum its place on disk gives it.
    let Some(path) = path else { return Ok(lint_source(text, &options)) };
    let path = Path::new(&path);
    let facts = crate::project::ProjectFacts::default();
    let mut file = FileContext {
        language: memlint_linter::frontend::language_of(path),
        module: facts.module_of(path),
        torch_minimum: path.parent().and_then(|d| facts.torch_versions(d).0),
        torch_below: path.parent().and_then(|d| facts.torch_versions(d).1),
        ..FileContext::default()
    };
    if memlint_linter::is_frozen_code(&file.module, text) {
        return Ok(Vec::new());
    }
    let summary = summarize_source(text, &file, is_test_file).summary;
    file.index = std::sync::Arc::new(ProjectIndex::build(vec![summary]));
    Ok(lint_file(text, &options, &file))
}

/// Column of `offset` in its line, in the negotiated encoding.
fn position(text: &str, index: &LineIndex, offset: u32, encoding: Encoding) -> Position {
    let offset = (offset as usize).min(text.len());
    let line = index.line_of(offset as u32);
    let (start, _) = index.line_range(line, text);
    let mut end = offset.max(start);
    while end > start && !text.is_char_boundary(end) {
        end -= 1;
    }
    let seg = text.get(start..end).unwrap_or("");
    let character = match encoding {
        Encoding::Utf8 => seg.len(),
        Encoding::Utf16 => seg.encode_utf16().count(),
        Encoding::Utf32 => seg.chars().count(),
    };
    Position { line: u32::try_from(line).unwrap_or(u32::MAX), character: u32::try_from(character).unwrap_or(u32::MAX) }
}

/// The byte offset of a position (clamped to the line and the text, and
/// to a character boundary).
fn offset(text: &str, index: &LineIndex, pos: Position, encoding: Encoding) -> usize {
    let line = pos.line as usize;
    let (start, end) = index.line_range(line, text);
    if line > index.line_of(u32::try_from(text.len()).unwrap_or(u32::MAX)) {
        return text.len();
    }
    let mut units = 0usize;
    let want = pos.character as usize;
    for (i, c) in text[start..end].char_indices() {
        let width = match encoding {
            Encoding::Utf8 => c.len_utf8(),
            Encoding::Utf16 => c.len_utf16(),
            Encoding::Utf32 => 1,
        };
        // A position inside a character (half a surrogate pair) means its start.
        if units + width > want {
            return start + i;
        }
        units += width;
    }
    end
}

fn range_of(text: &str, index: &LineIndex, span: Span, encoding: Encoding) -> Range {
    Range { start: position(text, index, span.start, encoding), end: position(text, index, span.end, encoding) }
}

/// A diagnostic's range; an empty span (a file that cannot be read) covers
/// the first line's first character so editors show it.
fn range(text: &str, index: &LineIndex, span: Span, encoding: Encoding) -> Range {
    let mut r = range_of(text, index, span, encoding);
    if r.start == r.end && !text.is_empty() {
        let next = text.get(span.start as usize..).and_then(|t| t.chars().next()).filter(|c| *c != '\n' && *c != '\r');
        if let Some(c) = next {
            r.end = position(text, index, span.start + c.len_utf8() as u32, encoding);
        }
    }
    r
}

fn intersects(a: Range, b: Range) -> bool {
    let key = |p: Position| (p.line, p.character);
    key(a.start) <= key(b.end) && key(b.start) <= key(a.end)
}

fn severity(s: Severity) -> DiagnosticSeverity {
    match s {
        Severity::Error => DiagnosticSeverity::ERROR,
        Severity::Warning => DiagnosticSeverity::WARNING,
        Severity::Info => DiagnosticSeverity::INFORMATION,
    }
}

fn to_lsp(uri: &Uri, text: &str, index: &LineIndex, d: &Diagnostic, encoding: Encoding) -> LspDiagnostic {
    let r = range(text, index, d.span, encoding);
    // Related information needs a location; the help line points at the finding itself.
    let related = d.help.as_ref().map(|h| {
        vec![DiagnosticRelatedInformation {
            location: Location { uri: uri.clone(), range: r },
            message: format!("help: {h}"),
        }]
    });
    LspDiagnostic {
        range: r,
        severity: Some(severity(d.severity)),
        code: Some(NumberOrString::String(d.code.to_string())),
        code_description: Uri::from_str(&crate::rule_uri(d.code)).ok().map(|href| CodeDescription { href }),
        source: Some(SOURCE.into()),
        message: format!("{}: {}", d.name, d.message),
        related_information: related,
        tags: None,
        data: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_round_trip_in_every_encoding() {
        let text = "a = 'é😀'\r\nb = 1\n";
        let index = LineIndex::new(text);
        for enc in [Encoding::Utf8, Encoding::Utf16, Encoding::Utf32] {
            for (off, _) in text.char_indices() {
                let p = position(text, &index, off as u32, enc);
                assert_eq!(offset(text, &index, p, enc), off.min(index.line_range(p.line as usize, text).1), "{enc:?} {off}");
            }
        }
        let p = position(text, &index, text.find('b').unwrap_or(0) as u32, Encoding::Utf16);
        assert_eq!((p.line, p.character), (1, 0));
        // `😀` is two UTF-16 units: the position after it is 8, half-way is its start.
        assert_eq!(position(text, &index, 11, Encoding::Utf16).character, 8);
        assert_eq!(offset(text, &index, Position { line: 0, character: 7 }, Encoding::Utf16), 7);
        assert_eq!(offset(text, &index, Position { line: 9, character: 0 }, Encoding::Utf16), text.len());
    }

    #[test]
    fn file_uris_are_decoded() {
        let uri = Uri::from_str("file:///tmp/a%20b/c.py").expect("uri");
        assert_eq!(file_path(&uri), Some(PathBuf::from("/tmp/a b/c.py")));
        let other = Uri::from_str("untitled:Untitled-1").expect("uri");
        assert_eq!(file_path(&other), None);
    }
}
