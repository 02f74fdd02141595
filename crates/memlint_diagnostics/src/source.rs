/// Start offsets of every line of a text, for offset -> (line, column).
#[derive(Debug, Clone)]
pub struct LineIndex {
    starts: Vec<u32>,
    text_len: u32,
}

impl LineIndex {
    /// Indexes `text`; lines end at `\n`, `\r\n` or a lone `\r`, as
    /// Python's tokenizer reads them.
    pub fn new(text: &str) -> LineIndex {
        let mut starts = vec![0u32];
        let bytes = text.as_bytes();
        for (i, b) in bytes.iter().enumerate() {
            if *b == b'\n' || (*b == b'\r' && bytes.get(i + 1) != Some(&b'\n')) {
                starts.push(u32::try_from(i + 1).unwrap_or(u32::MAX));
            }
        }
        LineIndex { starts, text_len: u32::try_from(text.len()).unwrap_or(u32::MAX) }
    }

    /// 0-based line number containing `offset`.
    pub fn line_of(&self, offset: u32) -> usize {
        match self.starts.binary_search(&offset.min(self.text_len)) {
            Ok(i) => i,
            Err(i) => i - 1,
        }
    }

    /// Byte range of 0-based line `line`, without its line terminator.
    pub fn line_range(&self, line: usize, text: &str) -> (usize, usize) {
        let start = self.starts.get(line).copied().unwrap_or(self.text_len) as usize;
        let mut end = self.starts.get(line + 1).map(|s| *s as usize - 1).unwrap_or(text.len());
        if end > start && text.as_bytes().get(end - 1) == Some(&b'\r') {
            end -= 1;
        }
        (start, end.max(start))
    }

    /// 1-based (line, column) of a byte offset; columns count characters.
    pub fn location(&self, offset: u32) -> (usize, usize) {
        self.location_in(offset, None)
    }

    /// Like [`LineIndex::location`], counting characters with the text at hand.
    pub fn location_in(&self, offset: u32, text: Option<&str>) -> (usize, usize) {
        let line = self.line_of(offset);
        let start = self.starts[line];
        let col = match text {
            Some(t) => {
                let s = start as usize;
                let e = (offset as usize).min(t.len());
                t.get(s..e).map(|seg| seg.chars().count()).unwrap_or(e.saturating_sub(s))
            }
            None => (offset.min(self.text_len) - start) as usize,
        };
        (line + 1, col + 1)
    }
}

/// Where one code cell of a notebook lies in the notebook's virtual source
/// (its code cells joined in order, see [`CellMap`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CellSpan {
    /// 1-based index of the cell among *all* the notebook's cells (markdown
    /// and raw cells count), so `cell 3` is the third cell from the top.
    pub cell: u32,
    /// Byte offset of the cell's first byte in the virtual source.
    pub start: u32,
    /// Byte offset one past the cell's last byte (its closing `\n`).
    pub end: u32,
}

/// The cells of a notebook, for mapping offsets in its virtual source to
/// `cell N, line L, column C`.
///
/// A notebook is checked as one Python module made of its code cells in
/// order; diagnostics' spans index that virtual source like any other file's.
/// Every non-empty cell ends with `\n` there, so a cell's lines are whole
/// lines of the virtual source and a cell-relative line is the virtual line
/// minus the cell's first line. Output formats call
/// [`SourceFile::position`] instead of [`SourceFile::location`] to show
/// the user's view.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CellMap {
    /// Sorted by `start`, non-overlapping; empty cells are left out.
    cells: Vec<CellSpan>,
    /// Per cell (by its number), where each of its lines starts in the
    /// notebook file itself: 1-based (line, column) of the first character
    /// after the opening quote of the JSON string that holds it.
    file_lines: std::collections::BTreeMap<u32, Vec<(u32, u32)>>,
}

impl CellMap {
    /// Builds the map; cells are sorted by `start` and empty ones dropped.
    pub fn new(mut cells: Vec<CellSpan>) -> CellMap {
        cells.retain(|c| c.end > c.start);
        cells.sort_by_key(|c| c.start);
        CellMap { cells, file_lines: std::collections::BTreeMap::new() }
    }

    /// Records where the lines of `cell` are in the notebook's JSON.
    pub fn set_file_lines(&mut self, cell: u32, lines: Vec<(u32, u32)>) {
        self.file_lines.insert(cell, lines);
    }

    /// Where line `line` (1-based) of `cell` starts in the notebook file.
    pub fn file_line(&self, cell: u32, line: usize) -> Option<(u32, u32)> {
        let lines = self.file_lines.get(&cell)?;
        lines.get(line.checked_sub(1)?).copied()
    }

    /// The cells, in source order.
    pub fn cells(&self) -> &[CellSpan] {
        &self.cells
    }

    /// The cell holding byte `offset`; an offset at or past the end of the
    /// last cell belongs to the last cell (end-of-file errors).
    pub fn cell_at(&self, offset: u32) -> Option<&CellSpan> {
        let i = self.cells.partition_point(|c| c.end <= offset);
        self.cells.get(i).filter(|c| c.start <= offset).or_else(|| self.cells.last().filter(|c| offset >= c.end))
    }
}

/// A user-facing location: 1-based line and character column, relative to
/// the cell for notebooks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    /// The notebook cell (1-based among all cells), `None` for plain files.
    pub cell: Option<u32>,
    /// 1-based line (within the cell for notebooks).
    pub line: usize,
    /// 1-based column, counting characters.
    pub column: usize,
}

impl std::fmt::Display for Position {
    /// `4:9`, or `cell 3:4:9` in a notebook: what follows `path:`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.cell {
            Some(cell) => write!(f, "cell {cell}:{}:{}", self.line, self.column),
            None => write!(f, "{}:{}", self.line, self.column),
        }
    }
}

/// A checked file: the path as shown to the user and its text.
#[derive(Debug, Clone)]
pub struct SourceFile {
    path: String,
    text: String,
    index: LineIndex,
    cells: Option<CellMap>,
}

impl SourceFile {
    /// Creates a source file; `path` is shown verbatim in output.
    pub fn new(path: impl Into<String>, text: impl Into<String>) -> SourceFile {
        let text = text.into();
        let index = LineIndex::new(&text);
        SourceFile { path: path.into(), text, index, cells: None }
    }

    /// A notebook: `text` is its virtual source (the code cells joined),
    /// `cells` says which cell each part came from.
    pub fn notebook(path: impl Into<String>, text: impl Into<String>, cells: CellMap) -> SourceFile {
        SourceFile { cells: Some(cells), ..SourceFile::new(path, text) }
    }

    /// The path as shown to the user.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The file's text (a notebook's virtual source).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The line index of the text.
    pub fn line_index(&self) -> &LineIndex {
        &self.index
    }

    /// The cell map, for notebooks.
    pub fn cells(&self) -> Option<&CellMap> {
        self.cells.as_ref()
    }

    /// 1-based (line, character column) of a byte offset in [`SourceFile::text`]
    /// (for a notebook, in its virtual source: see [`SourceFile::position`]).
    pub fn location(&self, offset: u32) -> (usize, usize) {
        self.index.location_in(offset, Some(&self.text))
    }

    /// 1-based (line, column) of a byte offset in the file on disk: for a
    /// notebook, the line of its JSON that holds the source line (the column
    /// counts from the string's opening quote, exact when the line has no
    /// escaped characters before it); for other files
    /// [`SourceFile::location`]. For formats that annotate the file itself
    /// (SARIF, GitHub, GitLab, JUnit).
    pub fn file_location(&self, offset: u32) -> (usize, usize) {
        let p = self.position(offset);
        match (p.cell, self.cells.as_ref()) {
            (Some(cell), Some(map)) => match map.file_line(cell, p.line) {
                Some((line, column)) => (line as usize, column as usize + p.column - 1),
                None => self.location(offset),
            },
            _ => self.location(offset),
        }
    }

    /// [`SourceFile::file_location`] of the end of `span` (exclusive), like
    /// [`SourceFile::end_position`].
    pub fn file_end_location(&self, span: crate::Span) -> (usize, usize) {
        let p = self.end_position(span);
        match (p.cell, self.cells.as_ref()) {
            (Some(cell), Some(map)) => match map.file_line(cell, p.line) {
                Some((line, column)) => (line as usize, column as usize + p.column - 1),
                None => self.location(span.end),
            },
            _ => self.location(span.end),
        }
    }

    /// Where a byte offset is, as the user sees the file: for a notebook the
    /// cell and the line within it, otherwise the same as
    /// [`SourceFile::location`].
    pub fn position(&self, offset: u32) -> Position {
        let (line, column) = self.location(offset);
        let Some(cell) = self.cells.as_ref().and_then(|m| m.cell_at(offset)) else {
            return Position { cell: None, line, column };
        };
        let first = self.index.line_of(cell.start);
        if offset >= cell.end {
            // Past the cell (an error at end of input): its last line's end.
            let last = self.index.line_of(cell.end.saturating_sub(1));
            let (s, e) = self.index.line_range(last, &self.text);
            let column = self.text.get(s..e).map_or(e - s, |t| t.chars().count()) + 1;
            return Position { cell: Some(cell.cell), line: last - first + 1, column };
        }
        Position { cell: Some(cell.cell), line: line - first, column }
    }

    /// The position of the end of `span` (exclusive): like
    /// [`SourceFile::position`] of `span.end`, except that a non-empty span
    /// ending exactly at its cell's end stays in that cell.
    pub fn end_position(&self, span: crate::Span) -> Position {
        if span.end > span.start {
            if let Some(cell) = self.cells.as_ref().and_then(|m| m.cell_at(span.end - 1)) {
                if span.end == cell.end {
                    return self.position(span.end.saturating_sub(1)).next_column();
                }
            }
        }
        self.position(span.end)
    }

    /// The path shown before `:line:col` in frames: `nb.ipynb:cell 3` for a
    /// notebook offset, the path otherwise.
    pub fn origin(&self, offset: u32) -> String {
        match self.position(offset).cell {
            Some(cell) => format!("{}:cell {cell}", self.path),
            None => self.path.clone(),
        }
    }
}

impl Position {
    fn next_column(self) -> Position {
        Position { column: self.column + 1, ..self }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Span;

    // Cells 1 and 3 are code, cell 2 is markdown (not in the text).
    fn nb() -> SourceFile {
        let text = "import torch\nx = 1\ny = é + 2\n";
        let cells = CellMap::new(vec![
            CellSpan { cell: 3, start: 19, end: 30 },
            CellSpan { cell: 1, start: 0, end: 19 },
            CellSpan { cell: 2, start: 19, end: 19 },
        ]);
        SourceFile::notebook("nb.ipynb", text, cells)
    }

    #[test]
    fn positions_are_cell_relative() {
        let f = nb();
        assert_eq!(f.position(0), Position { cell: Some(1), line: 1, column: 1 });
        assert_eq!(f.position(13), Position { cell: Some(1), line: 2, column: 1 });
        assert_eq!(f.position(19), Position { cell: Some(3), line: 1, column: 1 });
        // Columns count characters: `é` is two bytes.
        assert_eq!(f.position(26), Position { cell: Some(3), line: 1, column: 7 });
        assert_eq!(f.position(26).to_string(), "cell 3:1:7");
        assert_eq!(f.origin(20), "nb.ipynb:cell 3");
        // The virtual location is still there for frames.
        assert_eq!(f.location(19), (3, 1));
    }

    #[test]
    fn offsets_past_the_end_belong_to_the_last_cell() {
        let f = nb();
        assert_eq!(f.position(30), Position { cell: Some(3), line: 1, column: 10 });
        assert_eq!(f.position(500).cell, Some(3));
    }

    #[test]
    fn a_span_ending_at_its_cells_end_stays_in_it() {
        let f = nb();
        assert_eq!(f.end_position(Span::new(13, 19)), Position { cell: Some(1), line: 2, column: 7 });
        assert_eq!(f.end_position(Span::new(13, 18)), Position { cell: Some(1), line: 2, column: 6 });
        assert_eq!(f.end_position(Span::new(19, 19)), Position { cell: Some(3), line: 1, column: 1 });
    }

    #[test]
    fn plain_files_have_no_cell() {
        let f = SourceFile::new("a.py", "x = 1\ny = 2\n");
        assert_eq!(f.position(6), Position { cell: None, line: 2, column: 1 });
        assert_eq!(f.position(6).to_string(), "2:1");
        assert_eq!(f.origin(6), "a.py");
        assert!(f.cells().is_none());
    }
}
