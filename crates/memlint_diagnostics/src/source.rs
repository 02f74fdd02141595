/// Start offsets of every line of a text, for offset -> (line, column).
#[derive(Debug, Clone)]
pub struct LineIndex {
    starts: Vec<u32>,
    text_len: u32,
}

impl LineIndex {
    /// Indexes `text`; lines end at `\n` (a preceding `\r` stays in the line).
    pub fn new(text: &str) -> LineIndex {
        let mut starts = vec![0u32];
        for (i, b) in text.bytes().enumerate() {
            if b == b'\n' {
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

/// A checked file: the path as shown to the user and its text.
#[derive(Debug, Clone)]
pub struct SourceFile {
    path: String,
    text: String,
    index: LineIndex,
}

impl SourceFile {
    /// Creates a source file; `path` is shown verbatim in output.
    pub fn new(path: impl Into<String>, text: impl Into<String>) -> SourceFile {
        let text = text.into();
        let index = LineIndex::new(&text);
        SourceFile { path: path.into(), text, index }
    }

    /// The path as shown to the user.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The file's text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The line index of the text.
    pub fn line_index(&self) -> &LineIndex {
        &self.index
    }

    /// 1-based (line, character column) of a byte offset.
    pub fn location(&self, offset: u32) -> (usize, usize) {
        self.index.location_in(offset, Some(&self.text))
    }
}
