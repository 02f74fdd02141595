//! Jupyter notebooks (`.ipynb`).
//!
//! A notebook's code cells share one namespace when it runs (a model defined
//! in cell 1 and evaluated in cell 5 is one program), so a notebook is
//! checked as one Python module made of its code cells in order: the
//! *virtual source*. Diagnostics' spans index that text like any file's, and
//! a [`CellMap`] turns an offset into `cell N, line L, column C` when
//! rendering.
//!
//! [`read_notebook`] builds the virtual source; [`lint_notebook`] checks it.
//! What is read, and how:
//!
//! - nbformat 4 (`cells`) and nbformat 3 (`worksheets[].cells`, code in
//!   `input`); a cell's source is a string or a list of strings, joined as
//!   they are. Markdown, raw and heading cells are left out of the virtual
//!   source, but they count in the cell numbers: `cell 3` is the third cell
//!   from the top, whatever its neighbours are.
//! - Each code cell ends with `\n` in the virtual source (added when its
//!   source does not end with one), so cells are whole lines.
//! - IPython syntax is never given to the parser: line magics (`%pip ...`,
//!   `%time expr`), shell lines (`!pip install`, `files = !ls`), help lines
//!   (`obj?`, `??obj`) are replaced by `pass` at the same indentation,
//!   padded with spaces to the same byte length (a magic may be the only
//!   statement of a block); the first line of a cell magic and the lines of
//!   skipped cells are replaced by spaces. The virtual source keeps the original
//!   text for frames, and the blanked copy ([`Notebook::python`]) has the
//!   same offsets, so no span needs translating. A line counts as a magic only
//!   where a Python logical line starts (not inside brackets, strings or
//!   after a backslash), as in IPython.
//! - Cell magics: `%%time`, `%%timeit`, `%%capture`, `%%prun`, `%%debug` and
//!   `%%memit` run their body as Python in the notebook's namespace, so the
//!   body is checked with the rest. `%%writefile x.py` writes a module that
//!   runs elsewhere: the body is checked as a module of its own. Every other
//!   cell magic (`%%bash`, `%%html`, `%%sql`, `%%script`, `%%python`, ...)
//!   is not Python in this namespace and the cell is skipped.
//! - Cells are compiled one at a time at run time, so each code cell is
//!   parsed on its own for syntax errors: a cell whose only errors are
//!   exercise blanks (`loss = `, `lr = # TODO`, `x = pass`, `a = <YOUR
//!   CODE>`, a line beside `# your code`, a `def` whose body is a comment)
//!   is not reported, nor is a cell whose first line is
//!   indented and that parses once that indentation is taken off (IPython
//!   does so before it compiles a cell); the other cells that do not parse
//!   give one `ML000` for the notebook, located in the first of them and
//!   naming them all; each is left out of the joined module (an unclosed
//!   bracket must not swallow the cells after it), and is checked alone
//!   after the cells above it, so its recovered parts are still checked with
//!   the names defined before it.
//! - The notebook's module is named after its path, as a `.py` file's is
//!   (`docs/08_profiling.ipynb` is `docs.08_profiling`): what a name says
//!   of the code (a benchmark, profiling) counts as it does for a module.
//! - Suppression comments work per line in a cell; `# memlint:
//!   ignore-file[...]` in any cell applies to the whole notebook.
//! - A notebook whose kernel language (`metadata.language_info.name` or
//!   `metadata.kernelspec.language`) is given and is not Python is not
//!   checked.
//! - A file that is not a notebook (not JSON, no `cells` list, a cell without
//!   `source`, wrong types) is one `ML000` naming the problem. An empty file
//!   (or only white space: a placeholder) is a notebook without cells.

use memlint_diagnostics::{CellMap, CellSpan, Diagnostic, SourceFile, Span};
use serde_json::Value;

use crate::registry::PARSE_ERROR;
use crate::suppression::Suppressions;
use crate::{lint_source, LintOptions};

/// Cell magics whose body runs as Python in the notebook's namespace.
const PYTHON_CELL_MAGICS: &[&str] = &["time", "timeit", "capture", "prun", "debug", "memit"];

/// How a code cell takes part in the check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CellRole {
    /// Part of the notebook's module (the shared namespace).
    Module,
    /// Checked as a module of its own (`%%writefile x.py`).
    Standalone,
    /// Not Python in this namespace (`%%bash`, `%%html`, ...): not checked.
    Skipped,
}

/// One code cell of a [`Notebook`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeCell {
    /// 1-based index among all the notebook's cells.
    pub cell: u32,
    /// Where the cell lies in the virtual source (ends with its `\n`).
    pub span: Span,
    /// How it is checked.
    pub role: CellRole,
    /// The reader appended the final `\n` (the cell's source did not end
    /// with one): a writer putting edited text back drops it.
    pub newline_added: bool,
}

/// A notebook read into a virtual Python source.
#[derive(Debug, Clone)]
pub struct Notebook {
    /// The code cells joined, as written: what diagnostics' spans index and
    /// frames show.
    pub text: String,
    /// [`Notebook::text`] with IPython syntax and skipped cells replaced by
    /// spaces (newlines kept): what the parser reads. Same length, same
    /// offsets.
    pub python: String,
    /// Offsets to cells, for rendering.
    pub cells: CellMap,
    /// The non-empty code cells, in order.
    pub code_cells: Vec<CodeCell>,
    /// Whether the kernel is Python (or unspecified); other notebooks are
    /// not checked.
    pub is_python: bool,
    /// The kernel is Python 2 (`kernelspec.name` `python2`, or
    /// `language_info.version` 2.x): its cells are not meant to parse as
    /// Python 3.
    pub python2: bool,
}

/// Why a file is not a notebook; the message is the `ML000` message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a notebook: {0}")]
pub struct NotebookError(pub String);

/// The outcome of [`lint_notebook`].
#[derive(Debug, Clone)]
pub struct NotebookResult {
    /// The virtual source the diagnostics' spans index (empty when the file
    /// is not a notebook).
    pub text: String,
    /// The cell map; `None` when the file is not a notebook (its `ML000` then
    /// has an empty span and says where the problem is in its message).
    pub cells: Option<CellMap>,
    /// Sorted by position, suppressions applied.
    pub diagnostics: Vec<Diagnostic>,
}

impl NotebookResult {
    /// The file to render the diagnostics against, and the diagnostics.
    pub fn into_source_file(self, path: impl Into<String>) -> (SourceFile, Vec<Diagnostic>) {
        let file = match self.cells {
            Some(cells) => SourceFile::notebook(path, self.text, cells),
            None => SourceFile::new(path, self.text),
        };
        (file, self.diagnostics)
    }
}

/// Whether a path names a notebook (`.ipynb`, any case).
pub fn is_notebook_path(path: &std::path::Path) -> bool {
    path.extension().is_some_and(|e| e.eq_ignore_ascii_case("ipynb"))
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "object",
    }
}

fn bad(msg: impl Into<String>) -> NotebookError {
    NotebookError(msg.into())
}

/// A cell's text: a string, or a list of strings joined as they are.
fn cell_text(v: Option<&Value>, cell: usize, key: &str) -> Result<String, NotebookError> {
    match v {
        None => Err(bad(format!("cell {cell} has no `{key}`"))),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(parts)) => {
            let mut s = String::new();
            for (i, p) in parts.iter().enumerate() {
                match p {
                    Value::String(p) => s.push_str(p),
                    other => {
                        return Err(bad(format!(
                            "`{key}` of cell {cell} has a {} at index {i}, expected strings",
                            kind(other)
                        )))
                    }
                }
            }
            Ok(s)
        }
        Some(other) => Err(bad(format!("`{key}` of cell {cell} is a {}, expected a string or a list of strings", kind(other)))),
    }
}

/// The notebook's kernel language, when it says.
/// Whether the notebook's metadata names a Python 2 kernel.
fn python2_kernel(root: &Value) -> bool {
    let Some(meta) = root.get("metadata") else { return false };
    let kernel = meta.get("kernelspec").and_then(|k| k.get("name")).and_then(Value::as_str);
    let version = meta.get("language_info").and_then(|l| l.get("version")).and_then(Value::as_str);
    kernel.is_some_and(|k| k.eq_ignore_ascii_case("python2")) || version.is_some_and(|v| v.starts_with("2."))
}

fn language(root: &Value) -> Option<&str> {
    let meta = root.get("metadata")?;
    meta.get("language_info")
        .and_then(|l| l.get("name"))
        .or_else(|| meta.get("kernelspec").and_then(|k| k.get("language")))
        .and_then(Value::as_str)
}

/// One cell as read: whether it is code, and its text.
struct RawCell {
    code: bool,
    text: String,
}

fn read_cells(root: &Value) -> Result<(Vec<RawCell>, bool), NotebookError> {
    let expected = "expected a JSON object with a `cells` list (line 1, column 1)";
    let Value::Object(obj) = root else {
        return Err(bad(format!("{expected}, found a {}", kind(root))));
    };
    // nbformat 3 keeps cells in worksheets, and code in `input`.
    let (cells, code_key, v3): (Vec<&Value>, &str, bool) = match (obj.get("cells"), obj.get("worksheets")) {
        (Some(Value::Array(cells)), _) => (cells.iter().collect(), "source", false),
        (Some(other), _) => return Err(bad(format!("`cells` is a {}, expected a list", kind(other)))),
        (None, Some(Value::Array(sheets))) => {
            let mut cells = Vec::new();
            for (i, sheet) in sheets.iter().enumerate() {
                match sheet.get("cells") {
                    Some(Value::Array(c)) => cells.extend(c.iter()),
                    _ => return Err(bad(format!("worksheet {} has no `cells` list", i + 1))),
                }
            }
            (cells, "input", true)
        }
        (None, _) => return Err(bad(expected)),
    };
    let mut out = Vec::with_capacity(cells.len());
    let mut python = language(root).is_none_or(|l| l.eq_ignore_ascii_case("python"));
    for (i, cell) in cells.iter().enumerate() {
        let n = i + 1;
        let Value::Object(c) = cell else {
            return Err(bad(format!("cell {n} is a {}, expected an object", kind(cell))));
        };
        let code = match c.get("cell_type") {
            Some(Value::String(t)) => t == "code",
            Some(other) => return Err(bad(format!("`cell_type` of cell {n} is a {}, expected a string", kind(other)))),
            None => return Err(bad(format!("cell {n} has no `cell_type`"))),
        };
        if v3 && code {
            // nbformat 3 names the language per code cell.
            if let Some(lang) = c.get("language").and_then(Value::as_str) {
                python &= lang.eq_ignore_ascii_case("python");
            }
        }
        let key = if code { code_key } else { "source" };
        let text = cell_text(c.get(key), n, key)?;
        out.push(RawCell { code, text });
    }
    Ok((out, python))
}

/// Reads a notebook's JSON into its virtual source.
pub fn read_notebook(json: &str) -> Result<Notebook, NotebookError> {
    // An empty file (a placeholder for a chapter to come) holds no code:
    // a notebook without cells, not a broken one.
    let json = if json.trim().is_empty() { "{\"cells\": []}" } else { json };
    let root: Value = serde_json::from_str(json).map_err(|e| {
        // serde_json's message ends with " at line L column C"; say it our way.
        let full = e.to_string();
        let msg = full.rfind(" at line ").map_or(full.as_str(), |i| &full[..i]);
        bad(format!("invalid JSON: {msg} (line {}, column {})", e.line(), e.column()))
    })?;
    let (cells, is_python) = read_cells(&root)?;
    let python2 = python2_kernel(&root);
    let mut text = String::new();
    let mut python = String::new();
    let mut spans = Vec::new();
    let mut code_cells = Vec::new();
    for (i, cell) in cells.into_iter().enumerate() {
        if !cell.code || cell.text.is_empty() {
            continue;
        }
        let number = u32::try_from(i + 1).unwrap_or(u32::MAX);
        let start = offset(text.len());
        let newline_added = !cell.text.ends_with('\n');
        let mut source = cell.text;
        if newline_added {
            source.push('\n');
        }
        let (blanked, role) = python_view(&source);
        text.push_str(&source);
        python.push_str(&blanked);
        let span = Span::new(start, offset(text.len()));
        spans.push(CellSpan { cell: number, start: span.start, end: span.end });
        code_cells.push(CodeCell { cell: number, span, role, newline_added });
    }
    let mut cells = CellMap::new(spans);
    // Where each cell's lines are in the file, for formats that annotate it.
    if let Some(ranges) = source_ranges(json) {
        let index = memlint_diagnostics::LineIndex::new(json);
        // Columns count characters from the line's start; a compact
        // notebook is one line, so they are counted on from the previous
        // offset (the cells' offsets increase), not from the start each time.
        let mut last: Option<(usize, usize, usize)> = None; // (line, offset, column)
        let mut locate = |o: usize| {
            let line = index.line_of(offset(o));
            let col = match last {
                Some((l, prev, col)) if l == line && prev <= o => col + json.get(prev..o).map_or(0, |t| t.chars().count()),
                _ => {
                    let start = index.line_range(line, json).0;
                    json.get(start..o).map_or(0, |t| t.chars().count())
                }
            };
            last = Some((line, o, col));
            (offset(line + 1), offset(col + 1))
        };
        for c in &code_cells {
            let Some(r) = ranges.get(c.cell as usize - 1) else { continue };
            let starts = string_starts(&json[r.clone()]);
            let lines = match json.as_bytes().get(r.start) {
                Some(b'[') => starts.iter().map(|&o| r.start + o).collect::<Vec<_>>(),
                // One string holds every line: they all point at it.
                _ => vec![r.start + 1; text[c.span.start as usize..c.span.end as usize].lines().count().max(1)],
            };
            let located = lines.into_iter().map(&mut locate).collect();
            cells.set_file_lines(c.cell, located);
        }
    }
    Ok(Notebook { text, python, cells, code_cells, is_python, python2 })
}

/// Offsets (after the opening quote) of the strings of a JSON list value.
fn string_starts(value: &str) -> Vec<usize> {
    let mut sc = Scan { b: value.as_bytes(), i: 0 };
    let mut out = Vec::new();
    if sc.eat(b'[').is_none() {
        return out;
    }
    loop {
        sc.ws();
        match sc.b.get(sc.i) {
            Some(b'"') => {
                out.push(sc.i + 1);
                if sc.string().is_none() {
                    break;
                }
            }
            Some(b',') => sc.i += 1,
            _ => break,
        }
    }
    out
}

fn offset(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Replaces every byte of `s` but line terminators by a space.
fn blank(s: &str) -> String {
    s.bytes().map(|b| if b == b'\n' || b == b'\r' { b as char } else { ' ' }).collect()
}

/// A module's source with its IPython lines (`!pip install x`, `%time
/// f()`) replaced as in a notebook cell, same length; `None` when it has
/// none or opens with a cell magic.
pub(crate) fn ipython_view_of_module(source: &str) -> Option<String> {
    match python_view(source) {
        (view, CellRole::Module) if view != source => Some(view),
        _ => None,
    }
}

/// A cell's source with IPython syntax replaced (same length), and how the
/// cell is checked.
fn python_view(source: &str) -> (String, CellRole) {
    let lines: Vec<&str> = source.split_inclusive('\n').collect();
    let mut out: Vec<String> = Vec::with_capacity(lines.len());
    let mut role = CellRole::Module;
    let mut rest = 0;
    // A cell magic is the cell's first non-blank line.
    if let Some(first) = lines.iter().position(|l| !l.trim().is_empty()) {
        // Yandex DataSphere's cell header: `#!S:bash` (or `#!:bash`) runs
        // the cell in a shell; `#!L`, `#!S` run Python.
        if lines[first].starts_with("#!") && lines[first].split_once(':').is_some_and(|(_, kernel)| !kernel.trim().is_empty()) {
            return (blank(source), CellRole::Skipped);
        }
        if let Some(magic) = lines[first].strip_prefix("%%") {
            let mut words = magic.split_whitespace();
            let name = words.next().unwrap_or("");
            if PYTHON_CELL_MAGICS.contains(&name) {
                role = CellRole::Module;
            } else if name == "writefile" && words.last().is_some_and(|f| f.ends_with(".py")) {
                role = CellRole::Standalone;
            } else {
                return (blank(source), CellRole::Skipped);
            }
            out.extend(lines[..first].iter().map(|l| l.to_string()));
            out.push(blank(lines[first]));
            rest = first + 1;
        }
    }
    let mut scan = Scanner::default();
    let mut continued_magic = false;
    for line in &lines[rest..] {
        let body = line.trim_end_matches(['\n', '\r']);
        if continued_magic {
            // A magic continues on the next line after a trailing backslash.
            continued_magic = body.ends_with('\\');
            out.push(blank(line));
        } else if scan.at_logical_start() && is_ipython_line(body) {
            continued_magic = body.ends_with('\\');
            out.push(placeholder(line));
        } else {
            scan.line(body);
            out.push(line.to_string());
        }
    }
    (out.concat(), role)
}

/// A statement in place of an IPython line, same length and indentation:
/// `pass` padded with spaces (`...` or `0` when the line is shorter), so a
/// magic that is the only statement of a block leaves the block valid, as
/// IPython's own rewrite does.
fn placeholder(line: &str) -> String {
    let indent = line.len() - line.trim_start_matches([' ', '\t', '\x0c']).len();
    let body = line.trim_end_matches(['\n', '\r']);
    let width = body.len().saturating_sub(indent);
    let stmt = ["pass", "...", "0"].into_iter().find(|s| s.len() <= width).unwrap_or("");
    let mut out = String::with_capacity(line.len());
    out.push_str(&line[..indent]);
    out.push_str(stmt);
    out.push_str(&" ".repeat(width - stmt.len()));
    out.push_str(&line[body.len()..]);
    out
}

/// Whether a line that starts a logical line is IPython syntax.
fn is_ipython_line(line: &str) -> bool {
    let t = line.trim();
    if t.starts_with('%') || t.starts_with('!') || t.starts_with('?') {
        return true;
    }
    // Automagic, on by default: a line magic runs without its `%` (`pip
    // install -r requirements.txt`, `conda install x`, `cd data`). Two
    // names side by side are never Python.
    let mut words = t.split_whitespace();
    if let (Some(first), Some(second)) = (words.next(), words.next()) {
        let word = second.starts_with(|c: char| c.is_ascii_alphabetic());
        let path = second.starts_with(|c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '/' | '~' | '$'));
        if matches!(first, "pip" | "conda") && word || first == "cd" && path && !second.starts_with("..=") {
            return true;
        }
    }
    // `obj?`, `obj??`: Python has no `?`, so a trailing one (outside a
    // comment) is the help syntax.
    let code = t.split('#').next().unwrap_or("").trim_end();
    if code.ends_with('?') && !code.contains(['"', '\'']) {
        return true;
    }
    // `files = !ls`, `a, b = %sx cmd`: a plain target list assigned from a
    // shell command or magic.
    if let Some((lhs, rhs)) = t.split_once('=') {
        let rhs = rhs.trim_start();
        let lhs_plain =
            !lhs.trim().is_empty() && lhs.chars().all(|c| c.is_alphanumeric() || c == '_' || c == ',' || c == ' ' || c == '.');
        if lhs_plain && (rhs.starts_with('!') || rhs.starts_with('%')) && !rhs.starts_with("!=") {
            return true;
        }
    }
    false
}

/// Just enough of Python's tokenizer to know where logical lines start:
/// open brackets, strings (triple-quoted ones span lines), comments and
/// backslash continuations.
#[derive(Debug, Default)]
struct Scanner {
    depth: u32,
    /// The open string's quote character and whether it is triple-quoted.
    string: Option<(char, bool)>,
    backslash: bool,
}

impl Scanner {
    fn at_logical_start(&self) -> bool {
        self.depth == 0 && self.string.is_none() && !self.backslash
    }

    fn line(&mut self, line: &str) {
        self.backslash = false;
        let chars: Vec<char> = line.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            if let Some((q, triple)) = self.string {
                if c == '\\' {
                    i += 2;
                    if i > chars.len() {
                        // A backslash ending a line inside a string continues it.
                        self.backslash = !triple;
                    }
                    continue;
                }
                if c == q {
                    if !triple {
                        self.string = None;
                    } else if chars.get(i + 1) == Some(&q) && chars.get(i + 2) == Some(&q) {
                        self.string = None;
                        i += 2;
                    }
                }
                i += 1;
                continue;
            }
            match c {
                '#' => break,
                '\'' | '"' => {
                    let triple = chars.get(i + 1) == Some(&c) && chars.get(i + 2) == Some(&c);
                    self.string = Some((c, triple));
                    i += if triple { 3 } else { 1 };
                    continue;
                }
                '(' | '[' | '{' => self.depth += 1,
                ')' | ']' | '}' => self.depth = self.depth.saturating_sub(1),
                '\\' if i + 1 == chars.len() => self.backslash = true,
                _ => {}
            }
            i += 1;
        }
        // A single-quoted string cannot span lines unless continued.
        if matches!(self.string, Some((_, false))) && !self.backslash {
            self.string = None;
        }
    }
}

/// The `ML000` of a file that is not a notebook.
fn not_a_notebook(err: &NotebookError) -> Diagnostic {
    PARSE_ERROR
        .diagnostic(Span::new(0, 0), err.to_string())
        .with_help("save the file as a Jupyter notebook (nbformat 4), or exclude it in the configuration")
}

/// Lints a notebook's JSON text: diagnostics index the virtual source in
/// [`NotebookResult::text`], sorted by position, suppressions applied.
pub fn lint_notebook(json: &str, options: &LintOptions) -> NotebookResult {
    lint_notebook_in(json, options, None)
}

/// [`lint_notebook`] for a notebook of a project: `file` carries the
/// project index (the notebook's own summary among the others, from
/// [`notebook_module`]), the torch the project declares and its roots, so
/// the cells see the helpers they import from the project's modules.
pub fn lint_notebook_in(json: &str, options: &LintOptions, file: Option<&crate::FileContext>) -> NotebookResult {
    let nb = match read_notebook(json) {
        Ok(nb) => nb,
        Err(e) => {
            let diagnostics =
                if options.rules.contains(PARSE_ERROR.code) { vec![not_a_notebook(&e)] } else { Vec::new() };
            return NotebookResult { text: String::new(), cells: None, diagnostics };
        }
    };
    let diagnostics = if nb.is_python { lint_cells(&nb, options, file) } else { Vec::new() };
    NotebookResult { text: nb.text, cells: Some(nb.cells), diagnostics }
}

/// The Python module a notebook's code cells make, for the project index:
/// the cells that run in its namespace, the cells checked on their own
/// (`%%writefile`) blanked; `None` for a file that is not a Python
/// notebook.
pub fn notebook_module(json: &str) -> Option<String> {
    let nb = read_notebook(json).ok().filter(|nb| nb.is_python)?;
    let mut module = nb.python;
    for cell in nb.code_cells.iter().filter(|c| c.role == CellRole::Standalone) {
        blank_range(&mut module, cell.span);
    }
    Some(module)
}

/// Whether every parse error of a cell is an exercise blank: a value left
/// out after `=` (`loss = `, `criterion = # TODO`, `Adam(lr=, ...)`) or a
/// `pass` standing for one (`one_hot = pass`), on the error's line or, for
/// an error at the start of a line, the last non-blank line before it; a
/// placeholder in angle brackets (`<YOUR CODE: ...>`, in any script) or a
/// comment that marks the blank (`# your code`, `# TODO`) on the error's
/// line or the line before; an argument left out (`DenseLayer( , , act)`)
/// or a `?` standing for one; or a body left out (`def forward(self, x):`
/// followed by comments only).
fn exercise_blanks(source: &str, errors: &[memlint_python::SyntaxError]) -> bool {
    blanks(source, errors.iter().map(|e| (e.message.as_str(), e.span.start)), true)
}

/// [`exercise_blanks`] for a module (a `.py` file of a course's homework:
/// `for i in range(n):` then `# TODO(student): implement CEM`): only a
/// marked blank counts (a placeholder, a comment that marks it; a block
/// left empty when one of its comments does); an unmarked `loss = ` or
/// empty block may be a mistake.
pub(crate) fn exercise_blanks_in_module(source: &str, errors: &[crate::frontend::SyntaxError]) -> bool {
    blanks(source, errors.iter().map(|e| (e.message.as_str(), e.span.start)), false)
}

/// The errors as `(message, offset)`.
fn blanks<'e>(source: &str, errors: impl Iterator<Item = (&'e str, u32)>, any_empty_block: bool) -> bool {
    // `x = x.view(# COMPLETE HERE)`, `print( # complete here )`: the
    // blank's comment holds the closing bracket, so everything after that
    // line is read inside the call (errors there, up to the end of the
    // cell, come from the blank).
    // So does a line that opens a bracket it does not close right after a
    // comment that marks the blank (`# YOUR CODE: Linear + GELU` then
    // `nn.Linear(..`).
    let mut offset = 0;
    let mut swallowed_from = usize::MAX;
    let mut marked_above = false;
    for line in source.split_inclusive('\n') {
        let code = line.split('#').next().unwrap_or("");
        let opened = code.matches(['(', '[', '{']).count() > code.matches([')', ']', '}']).count();
        if opened && (marks_a_blank(line) || marked_above) {
            swallowed_from = offset;
            break;
        }
        if !line.trim().is_empty() {
            marked_above = code.trim().is_empty() && marks_a_blank(line);
        }
        offset += line.len();
    }
    let mut errors = errors.peekable();
    // Where the lines that hold a blank start: the block under `if ?:` is
    // indented where the parser saw no header.
    let mut blank_lines: Vec<usize> = Vec::new();
    errors.peek().is_some()
        && errors.all(|(message, start)| {
            let at = (start as usize).min(source.len());
            if at >= swallowed_from {
                return true;
            }
            let Some(before) = source.get(..at) else { return false };
            let line_start = before.rfind(['\n', '\r']).map_or(0, |i| i + 1);
            if message.starts_with("Unexpected indentation") {
                let above = before[..line_start].trim_end_matches(['\n', '\r']);
                let above_start = above.rfind(['\n', '\r']).map_or(0, |i| i + 1);
                if blank_lines.contains(&above_start) {
                    return true;
                }
            }
            let is_blank = blank_at(source, message, at, before, line_start, any_empty_block);
            if is_blank {
                blank_lines.push(line_start);
            }
            is_blank
        })
}

/// Whether the error `message` at `at` (on the line starting at
/// `line_start`; `before` is the source before it) comes from a blank.
fn blank_at(source: &str, message: &str, at: usize, before: &str, line_start: usize, any_empty_block: bool) -> bool {
    if message.starts_with("Expected an indented block") {
        // The comments that stand for the block: after the header
        // (where the parser reports the error) or before the line
        // that ends it.
        let only_comments = |l: &&str| l.trim().is_empty() || l.trim_start().starts_with('#');
        let after = source[at..].lines().skip(1).take_while(only_comments);
        let above = before[..line_start].lines().rev().take_while(only_comments);
        return any_empty_block || after.chain(above).any(marks_a_blank);
    }
    let prefix = &before[line_start..];
    let line = if prefix.trim().is_empty() {
        // The error opens a line: the blank is on the line before.
        before[..line_start].lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("")
    } else {
        let end = source[at..].find(['\n', '\r']).map_or(source.len(), |i| at + i);
        &source[line_start..end]
    };
    let code = line.split('#').next().unwrap_or("");
    // In a module, only a marked blank counts: `loss = ` alone may
    // be a line left half-written.
    if any_empty_block && blank_after_equals(code) {
        return true;
    }
    // A placeholder (`a = <YOUR CODE: sample an action>`, a line
    // `<YOUR CODE: stack layers>`) or a comment that marks the
    // blank (`# your code`, `# TODO`), on the error's line or the
    // line before.
    let end = source[at..].find(['\n', '\r']).map_or(source.len(), |i| at + i);
    let here = &source[line_start..end];
    let previous = before[..line_start].lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
    // `???` alone on a line: the arguments of a call left to the student.
    let only_questions = |l: &str| {
        let t = l.split('#').next().unwrap_or("").trim().trim_end_matches(',');
        !t.is_empty() && t.bytes().all(|b| b == b'?')
    };
    [here, previous].iter().any(|l| has_placeholder(l) || marks_a_blank(l))
        || any_empty_block && (has_question_blank(code) || has_empty_argument(code) || has_dots_blank(code) || only_questions(here))
}

/// Four dots or more where a value starts (`emb = ....`, `f(x, ....)`):
/// a value the student fills in (three are `Ellipsis`, which parses).
fn has_dots_blank(code: &str) -> bool {
    code.match_indices("....").any(|(i, _)| {
        let before = code[..i].trim_end().chars().last();
        let after = code[i..].trim_start_matches('.').trim_start().chars().next();
        matches!(before, Some('(' | ',' | '=' | '[' | ':'))
            && matches!(after, None | Some(',' | ')' | ']'))
    })
}

/// `loss = `, `f(x=)`, `x = pass`: a value left out after `=`.
fn blank_after_equals(code: &str) -> bool {
    let bytes = code.as_bytes();
    bytes.iter().enumerate().any(|(i, &b)| {
        if b != b'=' || bytes.get(i + 1) == Some(&b'=') || (i > 0 && matches!(bytes[i - 1], b'=' | b'!' | b'<' | b'>')) {
            return false;
        }
        let rest = code[i + 1..].trim_start();
        rest.is_empty() || rest.starts_with(',') || rest.starts_with(')') || rest == "pass" || rest.starts_with("pass ")
    })
}

/// A `?` standing for an argument or a value the student fills in:
/// `mc_control(env, ?, ?)`, `alpha = ?`, `[?, ?]`. (IPython's help syntax,
/// `obj?`, follows a name and is not one.)
fn has_question_blank(code: &str) -> bool {
    code.match_indices('?').any(|(i, _)| {
        let before = code[..i].trim_end().chars().last();
        // `MAX_LEN = ?!`, `??`: the marks of a blank.
        let after = code[i + 1..].trim_start_matches(['?', '!']).trim_start().chars().next();
        // `if ?:`, `while ?:`: a condition left out.
        let head = code[..i].trim_end();
        let condition = ["if", "elif", "while"].iter().any(|k| {
            head.strip_suffix(k).is_some_and(|h| h.is_empty() || h.ends_with(char::is_whitespace))
        }) && after == Some(':');
        condition
            || matches!(before, Some('(' | ',' | '=' | '[' | ':' | '{')) && matches!(after, None | Some(',' | ')' | ']' | '}'))
    })
}

/// An argument left out: `DenseLayer( , , act)`, `f(x, , y)`.
fn has_empty_argument(code: &str) -> bool {
    code.match_indices(',').any(|(i, _)| {
        let before = code[..i].trim_end().chars().last();
        matches!(before, Some('(' | ','))
    })
}

/// `<YOUR CODE>`, `< your code here >`, `<YOUR_CODE>`, `<...>`, `<>`,
/// `<???>`: angle brackets around words for the student (or nothing),
/// which Python cannot parse; or around code where a value starts
/// (`= <gen(noise)>`).
fn has_placeholder(line: &str) -> bool {
    let mut rest = line;
    while let Some(open) = rest.find('<') {
        let after = &rest[open + 1..];
        // `<YOUR CODE: restore the words ...` closed on a later line.
        let Some(close) = after.find(['<', '>']) else { return after.to_ascii_lowercase().starts_with("your code") };
        let inner = after[..close].trim();
        // Words in any script (`<вычислите mse>`).
        let words = inner.starts_with(char::is_alphabetic)
            && (inner.contains([' ', ':'])
                || inner.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_'));
        // `<???>`, or a call in brackets where a value starts (`=
        // <gen(noise)>`, `return <student.implement_me()>`): no expression
        // starts with `<`, so on a line that does not parse it is a blank
        // (`print(<b>)`, a tag, is not).
        let value_starts = {
            let head = line[..line.len() - rest.len() + open].trim_end();
            head.is_empty() || head.ends_with(['=', '(', ',', '[', ':']) || head.ends_with("return")
        };
        let question = !inner.is_empty() && inner.bytes().all(|b| b == b'?');
        if after.as_bytes()[close] == b'>' && (inner.is_empty() || inner == "..." || words || question || (value_starts && inner.contains('('))) {
            return true;
        }
        rest = after;
    }
    false
}

/// A comment that tells the student to write the code there.
fn marks_a_blank(line: &str) -> bool {
    let Some((code, comment)) = line.split_once('#') else { return false };
    let comment = comment.to_ascii_lowercase();
    // `# COMPLETE HERE`, `# complete the loop`, `# code here`.
    // `# To Do`, `####To Do! Create a Loop`.
    ["your code", "todo", "to do", "fill in", "fill this", "complete here", "to complete", "code here"].iter().any(|m| comment.contains(m))
        || comment.trim_start().starts_with("complete")
        // A question where the operand should be: `lr = lr_0 / ((i + 1) **
        // # What should the power be? )`.
        || (comment.contains('?') && code.trim_end().ends_with(['(', '[', '=', '+', '-', '*', '/', '%', '@']))
}

/// Whether a cell whose first line is indented parses once that
/// indentation is taken off every line that starts with it: IPython does
/// that before it compiles a cell (its `leading_indent` transform), so the
/// cell runs.
fn runs_dedented(source: &str) -> bool {
    let Some(first) = source.lines().find(|l| !l.trim().is_empty()) else { return false };
    let indent = &first[..first.len() - first.trim_start_matches([' ', '\t']).len()];
    if indent.is_empty() {
        return false;
    }
    let dedented: String =
        source.split_inclusive('\n').map(|l| l.strip_prefix(indent).unwrap_or(l)).collect();
    memlint_python::parse(&dedented).errors.is_empty()
}

fn lint_cells(nb: &Notebook, options: &LintOptions, file: Option<&crate::FileContext>) -> Vec<Diagnostic> {
    let lint = |text: &str| match file {
        Some(f) => crate::lint_file(text, options, f),
        None => lint_source(text, options),
    };
    let mut diagnostics = Vec::new();
    let mut comments = Vec::new();
    // Cells checked on their own: broken ones and standalone modules.
    let mut alone: Vec<&CodeCell> = Vec::new();
    // The cells that do not parse: (cell number, error span, message).
    let mut broken: Vec<(u32, Span, String)> = Vec::new();
    for cell in nb.code_cells.iter().filter(|c| c.role != CellRole::Skipped) {
        let range = cell.span.start as usize..cell.span.end as usize;
        let Some(source) = nb.python.get(range) else { continue };
        let parsed = memlint_python::parse(source);
        let shift = |s: Span| Span::new(s.start + cell.span.start, s.end + cell.span.start);
        comments.extend(parsed.comments.iter().copied().map(shift));
        if let Some(first) = parsed.errors.first() {
            // A course notebook's blanks for the student (`loss = `,
            // `lr = # TODO`, `x = pass`) are not mistakes to report: the
            // cell's recovered parts are still checked. Nor are the cells
            // of a Python 2 notebook (`print x`).
            if options.rules.contains(PARSE_ERROR.code) && !nb.python2 && !exercise_blanks(source, &parsed.errors) && !runs_dedented(source) {
                // An error at the end of the cell points at its last newline,
                // so it is shown in this cell and not the next.
                let last = cell.span.end.saturating_sub(1);
                let s = shift(first.span);
                let span = Span::new(s.start.min(last), s.end.min(cell.span.end));
                let more = parsed.errors.len() - 1;
                let mut message = format!("syntax error: {}", first.message);
                if more > 0 {
                    message.push_str(&format!(" (and {more} more)"));
                }
                broken.push((cell.cell, span, message));
            }
            alone.push(cell);
        } else if cell.role == CellRole::Standalone {
            alone.push(cell);
        }
    }

    // One finding for all the cells that do not parse, at the first: an
    // exercise notebook's blanks (`loss = `, `criterion = # TODO`) must
    // not bury the findings of the cells that do.
    if let Some((_, span, first)) = broken.first() {
        let (message, help) = if broken.len() == 1 {
            (first.clone(), "fix the syntax error; findings for the rest of this cell come from what the parser recovered")
        } else {
            let cells: Vec<String> = broken.iter().map(|(c, _, _)| c.to_string()).collect();
            (
                format!("{first}; {} cells do not parse: cells {}", broken.len(), cells.join(", ")),
                "fix the syntax errors; the other cells are checked, and these cells' recovered parts too",
            )
        };
        diagnostics.push(PARSE_ERROR.diagnostic(*span, message).with_help(help));
    }

    // The notebook's module: every cell that parses and runs in its namespace.
    let mut module = nb.python.clone();
    for cell in &alone {
        blank_range(&mut module, cell.span);
    }
    let keep = |d: &Diagnostic| d.code != PARSE_ERROR.code;
    // Functions of the notebook that nothing in it calls (their call
    // commented out, or never written): code that does not run.
    let dead = uncalled_functions(&module, &nb.text);
    diagnostics.extend(lint(&module).into_iter().filter(|d| keep(d) && !dead.iter().any(|s| s.start <= d.span.start && d.span.start < s.end)));

    for cell in alone {
        let (start, end) = (cell.span.start as usize, cell.span.end as usize);
        // What runs before the cell: the module's cells above it, or nothing
        // for a file written by `%%writefile`.
        let prefix = match cell.role {
            CellRole::Standalone => blank(&nb.python[..start]),
            _ => module[..start].to_string(),
        };
        let text = prefix + &nb.python[start..end];
        diagnostics.extend(
            lint(&text)
                .into_iter()
                .filter(|d| keep(d) && d.span.start >= cell.span.start && d.span.start < cell.span.end),
        );
    }

    // `ignore-file` in any cell covers the whole notebook, and line
    // suppressions in a cell checked alone apply to the findings of the module.
    let suppressions = Suppressions::from_comments(&nb.python, &comments, "#");
    diagnostics.retain(|d| !suppressions.is_suppressed(d));
    diagnostics.sort_by(|a, b| (a.span, a.code).cmp(&(b.span, b.code)));
    diagnostics.dedup_by(|a, b| a.span == b.span && a.code == b.code);
    diagnostics
}

/// The spans of the top-level functions of a notebook's module (`python`,
/// the cells that run in its namespace) whose name appears nowhere else in
/// its code cells (`text`, as written: magics and cells that do not parse
/// included), outside comments: nothing in the notebook can call them, and
/// a notebook is not imported. A decorated function may be registered by
/// its decorator and is kept.
fn uncalled_functions(python: &str, text: &str) -> Vec<Span> {
    let parsed = memlint_python::parse(python);
    let mut dead = Vec::new();
    for stmt in &parsed.module.body {
        let memlint_semantic::ir::StmtKind::Function(f) = &stmt.kind else { continue };
        if !f.decorators.is_empty() || mentioned_elsewhere(text, &f.name, stmt.span) {
            continue;
        }
        dead.push(stmt.span);
    }
    dead
}

/// Whether the identifier `name` occurs in `text` as a whole word outside
/// `within` and outside a comment.
fn mentioned_elsewhere(text: &str, name: &str, within: Span) -> bool {
    let ident = |c: u8| c == b'_' || c.is_ascii_alphanumeric();
    let bytes = text.as_bytes();
    text.match_indices(name).any(|(at, _)| {
        let end = at + name.len();
        let whole = (at == 0 || !ident(bytes[at - 1])) && (end == bytes.len() || !ident(bytes[end]));
        let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
        let commented = text[line_start..at].contains('#');
        whole && !commented && !(within.start as usize <= at && at < within.end as usize)
    })
}

/// One round of fixes on a notebook: the fixes of `diagnostics` (spans in
/// the virtual source of `nb`, read from `json`) that `mode` allows and
/// whose every edit lies inside one checked code cell, away from its IPython
/// lines, are applied to the cells' sources, and the JSON is rewritten with
/// only those `source` values changed: outputs, metadata, key order and the
/// file's formatting stay as they are. Returns the new JSON and the indices
/// of the diagnostics whose fixes were applied; `None` when nothing applied
/// (or the notebook is nbformat 3, whose cells are not rewritten).
pub fn apply_cell_fixes(
    json: &str,
    nb: &Notebook,
    diagnostics: &[Diagnostic],
    mode: memlint_diagnostics::fix::FixMode,
) -> Option<(String, Vec<usize>)> {
    let ranges = source_ranges(json)?;
    let cell_of = |s: Span| {
        nb.code_cells.iter().find(|c| {
            c.role != CellRole::Skipped
                // The appended newline is not the cell's text.
                && s.start >= c.span.start
                && s.end <= c.span.end - u32::from(c.newline_added)
        })
    };
    // Edits on IPython lines would rewrite text the parser never saw.
    let plain = |s: Span| nb.text.get(s.start as usize..s.end as usize) == nb.python.get(s.start as usize..s.end as usize);
    let in_cells: Vec<usize> = (0..diagnostics.len())
        .filter(|&i| diagnostics[i].fix.as_ref().is_some_and(|f| f.edits.iter().all(|e| cell_of(e.span).is_some() && plain(e.span))))
        .collect();
    let candidates: Vec<Diagnostic> = in_cells.iter().map(|&i| diagnostics[i].clone()).collect();
    // The same selection as for a Python file: overlaps wait for a later round.
    let result = memlint_diagnostics::fix::apply_fixes(&nb.text, &candidates, mode);
    if result.fixed.is_empty() {
        return None;
    }
    let applied: Vec<usize> = result.fixed.iter().map(|&k| in_cells[k]).collect();
    let mut taken: Vec<(Span, String)> = Vec::new();
    for &k in &result.fixed {
        for e in candidates[k].fix.iter().flat_map(|f| &f.edits) {
            if !taken.iter().any(|(s, c)| *s == e.span && *c == e.content) {
                taken.push((e.span, e.content.clone()));
            }
        }
    }
    taken.sort_by_key(|(s, _)| (s.start, s.end));
    // Each touched cell's new source.
    let mut new_sources: Vec<(u32, String)> = Vec::new();
    for cell in &nb.code_cells {
        // Each edit belongs to the one cell `cell_of` chose for it: an
        // insertion where one cell ends and the next begins is not in both
        // (it used to be, and ran past the first cell's text).
        let edits: Vec<&(Span, String)> =
            taken.iter().filter(|(s, _)| cell_of(*s).is_some_and(|c| c.cell == cell.cell)).collect();
        if edits.is_empty() {
            continue;
        }
        let end = cell.span.end - u32::from(cell.newline_added);
        let mut text = String::new();
        let mut at = cell.span.start;
        for (span, content) in edits {
            text.push_str(&nb.text[at as usize..span.start as usize]);
            text.push_str(content);
            at = span.end;
        }
        text.push_str(&nb.text[at as usize..end as usize]);
        new_sources.push((cell.cell, text));
    }
    let mut out = String::with_capacity(json.len());
    let mut at = 0;
    for (cell, text) in new_sources {
        let r = ranges.get(cell as usize - 1)?;
        out.push_str(&json[at..r.start]);
        out.push_str(&source_json(&json[r.start..r.end], &text));
        at = r.end;
    }
    out.push_str(&json[at..]);
    Some((out, applied))
}

/// A cell source as JSON, in the shape and indentation of the value it
/// replaces: a list of lines (nbformat's usual form) or one string.
fn source_json(old: &str, text: &str) -> String {
    let quote = |s: &str| serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_string());
    if !old.starts_with('[') {
        return quote(text);
    }
    // The whitespace before the first item and before the closing bracket.
    let inner = &old[1..old.len() - 1];
    let lead = &inner[..inner.len() - inner.trim_start().len()];
    let trail = &inner[inner.trim_end().len()..];
    let items: Vec<String> = text.split_inclusive('\n').map(quote).collect();
    if items.is_empty() {
        return "[]".to_string();
    }
    format!("[{lead}{}{trail}]", items.join(&format!(",{lead}")))
}

/// Byte ranges of every cell's `source` value in an nbformat 4 notebook's
/// JSON, by cell index; `None` for other shapes.
fn source_ranges(json: &str) -> Option<Vec<std::ops::Range<usize>>> {
    let mut sc = Scan { b: json.as_bytes(), i: 0 };
    let mut out = Vec::new();
    sc.ws();
    sc.eat(b'{')?;
    loop {
        sc.ws();
        if sc.eat(b'}').is_some() {
            break;
        }
        let key = sc.string()?;
        sc.ws();
        sc.eat(b':')?;
        sc.ws();
        if key == "cells" {
            sc.eat(b'[')?;
            loop {
                sc.ws();
                if sc.eat(b']').is_some() {
                    break;
                }
                sc.eat(b'{')?;
                let mut range = None;
                loop {
                    sc.ws();
                    if sc.eat(b'}').is_some() {
                        break;
                    }
                    let k = sc.string()?;
                    sc.ws();
                    sc.eat(b':')?;
                    sc.ws();
                    let start = sc.i;
                    sc.value()?;
                    if k == "source" {
                        range = Some(start..sc.i);
                    }
                    sc.ws();
                    sc.eat(b',');
                }
                out.push(range?);
                sc.ws();
                sc.eat(b',');
            }
        } else {
            sc.value()?;
        }
        sc.ws();
        sc.eat(b',');
    }
    Some(out)
}

/// A scanner over JSON the parser already accepted: it finds where values
/// are, it does not validate.
struct Scan<'a> {
    b: &'a [u8],
    i: usize,
}

impl Scan<'_> {
    fn ws(&mut self) {
        while self.b.get(self.i).is_some_and(u8::is_ascii_whitespace) {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        (self.b.get(self.i) == Some(&c)).then(|| self.i += 1)
    }

    /// A string's raw content (escapes kept: keys here are plain).
    fn string(&mut self) -> Option<String> {
        self.eat(b'"')?;
        let start = self.i;
        while *self.b.get(self.i)? != b'"' {
            self.i += if self.b[self.i] == b'\\' { 2 } else { 1 };
        }
        let s = String::from_utf8(self.b[start..self.i].to_vec()).ok();
        self.i += 1;
        s
    }

    fn value(&mut self) -> Option<()> {
        match *self.b.get(self.i)? {
            b'"' => self.string().map(|_| ()),
            b'{' | b'[' => {
                let mut depth = 0usize;
                loop {
                    match *self.b.get(self.i)? {
                        b'"' => {
                            self.string()?;
                            continue;
                        }
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => {
                            depth -= 1;
                            if depth == 0 {
                                self.i += 1;
                                return Some(());
                            }
                        }
                        _ => {}
                    }
                    self.i += 1;
                }
            }
            _ => {
                while self.b.get(self.i).is_some_and(|c| !matches!(c, b',' | b'}' | b']') && !c.is_ascii_whitespace()) {
                    self.i += 1;
                }
                Some(())
            }
        }
    }
}

/// Blanks `span` of `text` in place (same length, newlines kept).
fn blank_range(text: &mut String, span: Span) {
    let (start, end) = (span.start as usize, span.end as usize);
    if let Some(part) = text.get(start..end) {
        let blanked = blank(part);
        text.replace_range(start..end, &blanked);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RuleSet;

    /// Each finding of the notebook as `"CODE cell N:L:C"`.
    fn positions(json: &str) -> Vec<String> {
        let (file, diags) = lint_notebook(json, &options()).into_source_file("nb.ipynb");
        diags.iter().map(|d| format!("{} {}", d.code, file.position(d.span.start))).collect()
    }

    fn options() -> LintOptions {
        LintOptions { rules: RuleSet::defaults(), is_test_file: false, module: None }
    }

    fn nb(cells: &[(&str, &str)]) -> String {
        let cells: Vec<Value> = cells
            .iter()
            .map(|(t, s)| serde_json::json!({"cell_type": t, "metadata": {}, "source": s}))
            .collect();
        serde_json::json!({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}).to_string()
    }

    #[test]
    fn joins_code_cells_and_maps_cells() {
        let json = nb(&[("code", "import torch"), ("markdown", "# Title"), ("code", "x = 1\ny = 2\n")]);
        let n = read_notebook(&json).unwrap();
        assert_eq!(n.text, "import torch\nx = 1\ny = 2\n");
        assert_eq!(n.python, n.text);
        let cells: Vec<(u32, u32, u32)> = n.cells.cells().iter().map(|c| (c.cell, c.start, c.end)).collect();
        assert_eq!(cells, [(1, 0, 13), (3, 13, 25)]);
        assert!(n.code_cells[0].newline_added && !n.code_cells[1].newline_added);
        let file = SourceFile::notebook("nb.ipynb", n.text, n.cells);
        assert_eq!(file.position(19).to_string(), "cell 3:2:1");
    }

    #[test]
    fn list_and_string_sources_read_the_same() {
        let list = serde_json::json!({"cells": [{"cell_type": "code", "source": ["a = 1\n", "b = 2"]}]}).to_string();
        let string = serde_json::json!({"cells": [{"cell_type": "code", "source": "a = 1\nb = 2"}]}).to_string();
        assert_eq!(read_notebook(&list).unwrap().text, read_notebook(&string).unwrap().text);
    }

    #[test]
    fn nbformat_3_worksheets() {
        let json = serde_json::json!({"nbformat": 3, "worksheets": [{"cells": [
            {"cell_type": "heading", "level": 1, "source": ["Title"]},
            {"cell_type": "code", "language": "python", "input": ["import torch\n", "x = 1"]}
        ]}]})
        .to_string();
        let n = read_notebook(&json).unwrap();
        assert_eq!(n.text, "import torch\nx = 1\n");
        assert_eq!(n.code_cells[0].cell, 2);
        assert!(n.is_python);
    }

    #[test]
    fn magics_shell_and_help_lines_are_blanked_in_place() {
        let src = "%matplotlib inline\n!pip install x \\\n  y\nfiles = !ls\nmodel?\n??torch.nn\nfor i in range(3):\n    %time f(i)\nz = (a\n     % b)\ns = '''\n%not a magic\n'''\n";
        let (py, role) = python_view(src);
        assert_eq!(role, CellRole::Module);
        assert_eq!(py.len(), src.len());
        let replaced: Vec<usize> =
            py.lines().zip(src.lines()).enumerate().filter(|(_, (p, s))| p != s).map(|(i, _)| i).collect();
        assert_eq!(replaced, [0, 1, 2, 3, 4, 5, 7]);
        let lines: Vec<&str> = py.lines().collect();
        assert_eq!(lines[0], format!("pass{}", " ".repeat(14)));
        // The backslash continuation of a shell line is blank.
        assert_eq!(lines[2], "   ");
        assert_eq!(lines[4], "pass  ");
        assert_eq!(lines[7], format!("    pass{}", " ".repeat(6)));
        assert!(memlint_python::parse(&py).errors.is_empty());
    }

    #[test]
    fn automagic_lines_are_blanked() {
        for line in ["pip install -r requirements.txt", "conda install -c conda-forge x", "cd data", "cd ../src"] {
            assert!(is_ipython_line(line), "{line}");
        }
        for line in ["pip = 3", "pip(install)", "cd = path", "cd.x", "pip", "cd"] {
            assert!(!is_ipython_line(line), "{line}");
        }
    }

    #[test]
    fn short_magics_and_magics_alone_in_a_block() {
        assert_eq!(placeholder("!ls\n"), "...\n");
        assert_eq!(placeholder("  ?x\r\n"), "  0 \r\n");
        assert_eq!(placeholder("\t!cd"), "\t...");
        let (py, _) = python_view("for i in range(3):\n    !echo {i}\nif True:\n    %ls\n");
        assert_eq!(py, "for i in range(3):\n    pass     \nif True:\n    ...\n");
        assert!(memlint_python::parse(&py).errors.is_empty());
    }

    #[test]
    fn cell_magics() {
        assert_eq!(python_view("%%bash\necho hi\n"), ("      \n       \n".to_string(), CellRole::Skipped));
        assert_eq!(python_view("#!S:bash\nwget x -O y\n").1, CellRole::Skipped);
        assert_eq!(python_view("#!:bash\nls\n").1, CellRole::Skipped);
        assert_eq!(python_view("#!L\nx = 1\n"), ("#!L\nx = 1\n".to_string(), CellRole::Module));
        assert_eq!(python_view("%%time\nx = 1\n"), ("      \nx = 1\n".to_string(), CellRole::Module));
        assert_eq!(python_view("%%writefile -a train.py\nx = 1\n").1, CellRole::Standalone);
        assert_eq!(python_view("%%writefile notes.txt\nhello\n").1, CellRole::Skipped);
    }

    #[test]
    fn malformed_notebooks_name_the_problem() {
        let err = |s: &str| read_notebook(s).unwrap_err().to_string();
        assert_eq!(err("{\"cells\": [}"), "not a notebook: invalid JSON: expected value (line 1, column 12)");
        assert_eq!(
            err("[1, 2]"),
            "not a notebook: expected a JSON object with a `cells` list (line 1, column 1), found a list"
        );
        assert_eq!(err("{}"), "not a notebook: expected a JSON object with a `cells` list (line 1, column 1)");
        // A placeholder file is a notebook without cells.
        for empty in ["", " \n"] {
            let nb = read_notebook(empty).expect("an empty file is a notebook");
            assert!(nb.code_cells.is_empty() && nb.text.is_empty());
        }
        assert_eq!(err("{\"cells\": 3}"), "not a notebook: `cells` is a number, expected a list");
        assert_eq!(err("{\"cells\": [{\"cell_type\": \"code\"}]}"), "not a notebook: cell 1 has no `source`");
        assert_eq!(err("{\"cells\": [{\"source\": \"x\"}]}"), "not a notebook: cell 1 has no `cell_type`");
        assert_eq!(
            err("{\"cells\": [{\"cell_type\": \"markdown\", \"source\": \"\"}, {\"cell_type\": \"code\", \"source\": 7}]}"),
            "not a notebook: `source` of cell 2 is a number, expected a string or a list of strings"
        );
        assert_eq!(
            err("{\"cells\": [{\"cell_type\": \"code\", \"source\": [\"x\", null]}]}"),
            "not a notebook: `source` of cell 1 has a null at index 1, expected strings"
        );
        assert_eq!(err("{\"cells\": [5]}"), "not a notebook: cell 1 is a number, expected an object");
    }

    #[test]
    fn a_model_from_one_cell_evaluated_in_another() {
        let json = nb(&[
            ("code", "import torch\nmodel = torch.nn.Linear(2, 2)\n"),
            ("markdown", "Evaluate"),
            ("code", "model.eval()\nfor x in val_loader:\n    out = model(x)\n"),
        ]);
        assert_eq!(positions(&json), ["ML201 cell 3:3:11"]);
    }

    /// A function nothing in the notebook calls (its call commented out)
    /// does not run; one called in a cell that does not parse, in a magic
    /// or passed by name does.
    #[test]
    fn functions_nothing_calls_are_not_checked() {
        let evaluate = "import torch\nmodel = torch.nn.Linear(2, 2)\ndef evaluate(loader):\n    model.eval()\n    for x in loader:\n        out = model(x)\n";
        let uncalled = nb(&[("code", evaluate), ("code", "# evaluate(val_loader)\n")]);
        assert!(positions(&uncalled).is_empty());
        let called = nb(&[("code", evaluate), ("code", "evaluate(val_loader)\n")]);
        assert_eq!(positions(&called), ["ML201 cell 1:6:15"]);
        let from_a_broken_cell = nb(&[("code", evaluate), ("code", "lr = # TODO\nevaluate(val_loader)\n")]);
        assert_eq!(positions(&from_a_broken_cell), ["ML201 cell 1:6:15"]);
        let in_a_magic = nb(&[("code", evaluate), ("code", "%time evaluate(val_loader)\n")]);
        assert_eq!(positions(&in_a_magic), ["ML201 cell 1:6:15"]);
        let passed = nb(&[("code", evaluate), ("code", "run(evaluate)\n")]);
        assert_eq!(positions(&passed), ["ML201 cell 1:6:15"]);
    }

    #[test]
    fn exercise_blanks_are_told_from_mistakes() {
        let blank = |src: &str| exercise_blanks(src, &memlint_python::parse(src).errors);
        assert!(blank("loss = \n"));
        assert!(blank("criterion = # TODO\n"));
        assert!(blank("one_hot = pass\n"));
        assert!(blank("opt = Adam(params, lr=)\n"));
        assert!(blank("def forward(self, x):\n    # TODO\n"));
        let in_module = |src: &str| {
            let parsed = crate::frontend::frontend_of(memlint_semantic::ir::Language::Python).parse(src);
            exercise_blanks_in_module(src, &parsed.errors)
        };
        assert!(in_module("for i in range(n):\n    # TODO(student): implement CEM\n    # HINT: start from the mean\nelse:\n    pass\n"));
        assert!(!in_module("for i in range(n):\n    # the elite mean\nx = 1\n"));
        assert!(!in_module("def f(:\n    pass\n"));
        assert!(!in_module("loss = \n"));
        assert!(in_module("loss =  # TODO: your code\n"));
        // Blanks marked `# COMPLETE HERE` in a header or inside a call.
        assert!(blank("for # COMPLETE HERE\n    pass\n"));
        assert!(blank("if # COMPLETE HERE\n    x = 1\n"));
        assert!(blank("print( # complete here )\n"));
        assert!(blank("def f(x):\n    x = x.view(# COMPLETE HERE)\n    x = # COMPLETE HERE\n    return x\n"));
        // Written "To Do", in a call or standing for a block's header.
        assert!(blank("loss_log.append(# To Do)\n"));
        assert!(blank("w = ####To Do!\n####To Do! Create a Loop\n    c = ####To Do!\n    if ####To Do! Check it\n        w += ####To Do!\n"));
        // A condition left out (the block under it is indented where the
        // parser saw no header), and four dots for a value.
        assert!(blank("for i in range(9):\n    # TODO: stop once satisfied\n    if ?:\n        break\n"));
        assert!(blank("while ?:\n    x = 1\n"));
        assert!(blank("model = Model(\n    ???\n)\nclasses = {???}\n"));
        assert!(!blank("model = Model(\n    ?? x\n)\n"));
        assert!(blank("# L2-normalize embeddings\nemb_norm = ....\n"));
        assert!(blank("y = f(x, ....)\n"));
        assert!(!blank("y = ....real +\n"));
        assert!(!blank("notify ?:\n"));
        assert!(!in_module("emb_norm = ....\n"));
        // A real error beside an ordinary comment is no blank.
        assert!(!blank("x = f(1,\ny = 2  # the training is completed\n"));
        assert!(!blank("y = (1,\n"));
        assert!(!blank("def f(:\n    pass\n"));
        assert!(!blank("if a == :\n    pass\n"));
        assert!(blank("a = <YOUR CODE: sample action from policy>\n"));
        assert!(blank("network = nn.Sequential()\n<YOUR CODE: stack layers!!!1>\n"));
        assert!(blank("model = nn.Sequential(\n  <your code here>\n)\n"));
        assert!(blank("layers = (\n    nn.Conv2d(...),\n    ...\n    # your code,\n    nn.Flatten(),\n)\n"));
        assert!(!blank("y = x < 1 and z >\n"));
        assert!(!blank("print(<b>)\n"));
        assert!(blank("model = <>\n"));
        assert!(blank("loss = <YOUR_CODE>\n"));
        assert!(blank("class P:\n    def f(self, x):\n        < insert your code here >\n        return x\n"));
        assert!(!blank("raise ValueError, \"wrong\"\n"));
        assert!(blank("words = <YOUR CODE: restore words (a list of strings)\n   from words_ix>\n"));
        assert!(blank("policy, Q = mc_control(env, ?, ?)\n"));
        assert!(blank("layer = DenseLayer( , , lambda x: x, init)\n"));
        assert!(blank("def compute(y):\n    return <вычислите mse для входов>\n"));
        assert!(blank("f(x, , y)\n"));
        assert!(!in_module("layer = DenseLayer( , , act)\n"));
        assert!(blank("alpha = ?\n"));
        assert!(!blank("model?\n"));
        assert!(blank("MAX_LEN = ?!\n"));
        assert!(blank("disc.add_module('logit', nn.Linear(<???>, 1))\n"));
        assert!(blank("generated_data = <gen(noise)>\n"));
        assert!(blank("def f(x):\n    return <student.implement_me()>\n"));
        assert!(!blank("y = a <f(x)> b\n"));
        // An unclosed call right below the comment that marks it.
        assert!(blank("def mlp(d):\n    return nn.Sequential(\n        # YOUR CODE: Linear + GELU\n        nn.Linear(..\n    )\n"));
        assert!(!blank("def mlp(d):\n    return nn.Sequential(\n        # two layers\n        nn.Linear(..\n    )\n"));
        // A question where the operand should be.
        assert!(blank("for i in range(10):\n    lr = lr_0 / ((i + 1) ** # What should the power be? )\n    w -= lr * w\n"));
        assert!(!blank("x = f(1,  # why?\ny = 2\n"));
    }

    #[test]
    fn an_indented_cell_that_ipython_runs_is_not_a_syntax_error() {
        assert!(runs_dedented(" x = 1\n y = [x,\n      2]\n"));
        assert!(runs_dedented("\n\tfor i in y:\n\t    print(i)\n"));
        assert!(!runs_dedented("x = 1\n  y = 2\n"));
        assert!(!runs_dedented(" x = (1,\n"));
        let json = nb(&[("code", "import torch\n"), ("code", "  model = torch.nn.Linear(2, 2)\n  model.eval()\n"), ("code", "  y = (\n")]);
        let found = positions(&json);
        assert_eq!(found.iter().filter(|f| f.starts_with("ML000")).collect::<Vec<_>>(), ["ML000 cell 3:1:1"]);
    }

    #[test]
    fn a_python2_notebook_is_not_a_syntax_error() {
        let cells = serde_json::json!([{"cell_type": "code", "metadata": {}, "source": "import torch\nprint torch.__version__\n"}]);
        let with = |metadata: Value| serde_json::json!({"cells": cells, "metadata": metadata, "nbformat": 4, "nbformat_minor": 2}).to_string();
        let codes = |json: &str| positions(json).into_iter().filter(|p| p.starts_with("ML000")).count();
        assert_eq!(codes(&with(serde_json::json!({}))), 1);
        assert_eq!(codes(&with(serde_json::json!({"kernelspec": {"name": "python2", "language": "python"}}))), 0);
        assert_eq!(codes(&with(serde_json::json!({"language_info": {"name": "python", "version": "2.7.13"}}))), 0);
        assert_eq!(codes(&with(serde_json::json!({"language_info": {"name": "python", "version": "3.10.4"}}))), 1);
    }

    #[test]
    fn a_notebook_named_for_profiling_is_benchmark_code() {
        let json = nb(&[(
            "code",
            "import torch\nfor x, y in loader:\n    loss = model(x.cuda(non_blocking=True)).sum()\n    opt.zero_grad()\n    loss.backward()\n    opt.step()\n    print(loss.item())\n",
        )]);
        let rules = RuleSet::from_selection(Some(&[crate::Selector::parse("ML305").expect("ML305")]), &[], &[]);
        let codes = |module: Option<&str>| -> Vec<&str> {
            let options = LintOptions { rules: rules.clone(), is_test_file: false, module: module.map(str::to_string) };
            lint_notebook(&json, &options).diagnostics.iter().map(|d| d.code).collect()
        };
        assert_eq!(codes(None), ["ML305"]);
        assert_eq!(codes(Some("notebooks.train_mnist")), ["ML305"]);
        assert!(codes(Some("docs.08_pytorch_profiling")).is_empty());
    }

    #[test]
    fn a_broken_cell_does_not_hide_the_others() {
        let json = nb(&[
            ("code", "import torch\nmodel = torch.nn.Linear(2, 2)\n"),
            ("code", "x = (1,\nmodel.eval()\nout = model(x)"),
            ("code", "model.eval()\nfor x in val_loader:\n    out = model(x)\n"),
        ]);
        let found = positions(&json);
        assert_eq!(found[0], "ML000 cell 2:3:1", "{found:?}");
        assert_eq!(found[1..], ["ML201 cell 3:3:11"]);
    }

    #[test]
    fn a_broken_cell_is_still_checked_with_the_cells_above() {
        let json = nb(&[
            ("code", "import torch\nmodel = torch.nn.Linear(2, 2)\n"),
            ("code", "model.eval()\nfor x in val_loader:\n    out = model(x)\ndef oops(:\n    pass\n"),
        ]);
        let found = positions(&json);
        assert_eq!(found, ["ML201 cell 2:3:11", "ML000 cell 2:4:10"]);
    }

    #[test]
    fn suppressions_per_line_and_ignore_file_in_any_cell() {
        let cells = [
            ("code", "import torch\nmodel = torch.nn.Linear(2, 2)\n"),
            ("code", "model.eval()\nfor x in val_loader:\n    out = model(x)  # memlint: ignore[ML201]\n    out2 = model(x)\n"),
        ];
        let diags = lint_notebook(&nb(&cells), &options()).diagnostics;
        assert_eq!(diags.iter().map(|d| d.code).collect::<Vec<_>>(), ["ML201"]);
        let mut with_file = cells.to_vec();
        with_file.push(("code", "# memlint: ignore-file[ML2]\n"));
        assert!(lint_notebook(&nb(&with_file), &options()).diagnostics.is_empty());
        // In a cell checked alone (it has a syntax error) too.
        with_file[1].1 = "model.eval()\nfor x in val_loader:\n    out = model(x)\n(\n";
        let codes: Vec<&str> = lint_notebook(&nb(&with_file), &options()).diagnostics.iter().map(|d| d.code).collect();
        assert_eq!(codes, ["ML000"]);
    }

    #[test]
    fn writefile_cells_are_modules_of_their_own() {
        let json = nb(&[
            ("code", "import torch\nmodel = torch.nn.Linear(2, 2)\n"),
            // Runs elsewhere: `model` and `torch` are not this namespace's.
            ("code", "%%writefile evaluate.py\nmodel.eval()\nfor x in val_loader:\n    out = model(x)\n"),
            ("code", "%%writefile train.py\nimport torch\ndef evaluate(model, val_loader):\n    model.eval()\n    for x in val_loader:\n        out = model(x)\n"),
        ]);
        let found = positions(&json);
        assert_eq!(found, ["ML201 cell 3:6:15"]);
    }

    #[test]
    fn other_kernels_are_not_checked() {
        let json = serde_json::json!({"cells": [{"cell_type": "code", "source": "x <- c(1, 2"}],
            "metadata": {"kernelspec": {"language": "R", "name": "ir"}}})
        .to_string();
        assert!(lint_notebook(&json, &options()).diagnostics.is_empty());
    }

    #[test]
    fn not_a_notebook_is_one_ml000_without_a_map() {
        let r = lint_notebook("print('hi')\n", &options());
        assert!(r.cells.is_none() && r.text.is_empty());
        assert_eq!(r.diagnostics.len(), 1);
        assert_eq!(r.diagnostics[0].code, "ML000");
        assert_eq!(r.diagnostics[0].message, "not a notebook: invalid JSON: expected value (line 1, column 1)");
    }
}
