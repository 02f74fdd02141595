//! Language frontends, chosen by file extension. A frontend parses source
//! text into the language-neutral IR and says how comments look, so the
//! driver, suppressions and rules stay the same for every language.
//!
//! Python (`.py`, `.pyi`, `ruff_python_parser`) and Rust (`.rs`, `syn`,
//! for code that uses the `tch` crate).

use std::path::Path;

use memlint_diagnostics::Span;
use memlint_semantic::ir::{Language, Module};

/// A syntax error with its span.
#[derive(Debug, Clone)]
pub struct SyntaxError {
    /// Where the parser stopped understanding.
    pub span: Span,
    /// The parser's message.
    pub message: String,
}

/// A parsed file: the IR of what the parser recovered, its errors, and the
/// spans of its comments (for suppressions).
#[derive(Debug, Clone)]
pub struct Parsed {
    /// The lowered module.
    pub module: Module,
    /// Syntax errors, in order.
    pub errors: Vec<SyntaxError>,
    /// Comment spans, in order.
    pub comments: Vec<Span>,
    /// The pre-scan of `module` by its first walk, when it had one: the
    /// second walk reuses it.
    pub module_facts: Option<std::sync::Arc<memlint_semantic::ModuleFacts>>,
}

impl Parsed {
    /// The packed form of the module and its comments (about a tenth of
    /// the memory of the nodes, see [`memlint_semantic::ir::pack`]), for
    /// keeping the file until a later walk. The pre-scan is not kept: the
    /// walk of the unpacked module makes it again.
    pub fn pack(&self) -> PackedParse {
        PackedParse {
            bytes: memlint_semantic::ir::pack::pack(&self.module, &self.comments).into_boxed_slice(),
            errors: self.errors.clone(),
        }
    }
}

/// A [`Parsed`] packed by [`Parsed::pack`].
#[derive(Debug, Clone)]
pub struct PackedParse {
    bytes: Box<[u8]>,
    errors: Vec<SyntaxError>,
}

impl PackedParse {
    /// The parse it was packed from (`None`: the bytes do not decode, which
    /// only a bug can cause; parse the source again).
    pub fn unpack(&self) -> Option<Parsed> {
        let (module, comments) = memlint_semantic::ir::pack::unpack(&self.bytes)?;
        Some(Parsed { module, errors: self.errors.clone(), comments, module_facts: None })
    }

    /// Bytes held by the packed module.
    pub fn size(&self) -> usize {
        self.bytes.len()
    }
}

/// One source language.
pub trait Frontend: Sync {
    /// The language of the IR it produces.
    fn language(&self) -> Language;
    /// File extensions it reads (without the dot).
    fn extensions(&self) -> &'static [&'static str];
    /// The line-comment prefix suppressions are written after (`#`, `//`).
    fn comment_prefix(&self) -> &'static str;
    /// Parses source text, recovering from errors.
    fn parse(&self, source: &str) -> Parsed;
    /// Whether a path of this language is a test module (unit tests are not
    /// training code: the training-program rules stay quiet there).
    fn is_test_path(&self, path: &Path) -> bool;
    /// The import roots that make a file PyTorch code: `torch` (Python),
    /// `tch` (Rust). A file importing none of them has nothing to check.
    fn torch_roots(&self) -> &'static [&'static str];
}

/// The Python frontend (`ruff_python_parser`).
#[derive(Debug, Default)]
pub struct PythonFrontend;

impl Frontend for PythonFrontend {
    fn language(&self) -> Language {
        Language::Python
    }

    fn extensions(&self) -> &'static [&'static str] {
        &["py", "pyi"]
    }

    fn comment_prefix(&self) -> &'static str {
        "#"
    }

    fn is_test_path(&self, path: &Path) -> bool {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        name.starts_with("test_")
            || name.ends_with("_test.py")
            || name == "conftest.py"
            || name == "testing_utils.py"
            || path.components().any(|c| matches!(c.as_os_str().to_str(), Some("tests" | "test" | "test_utils" | "testing")))
    }

    fn torch_roots(&self) -> &'static [&'static str] {
        &["torch"]
    }

    fn parse(&self, source: &str) -> Parsed {
        let mut p = memlint_python::parse(source);
        // A notebook exported to a `.py` file (`!pip install torch`, `%matplotlib
        // inline` kept as lines of their own) is IPython, not broken Python:
        // when the IPython lines are its only errors, it is read as a
        // notebook cell is, the lines blanked in place (same offsets).
        if !p.errors.is_empty() {
            if let Some(view) = crate::notebook::ipython_view_of_module(source) {
                let q = memlint_python::parse(&view);
                if q.errors.is_empty() {
                    p = q;
                }
            }
        }
        Parsed {
            module: p.module,
            errors: p.errors.into_iter().map(|e| SyntaxError { span: e.span, message: e.message }).collect(),
            comments: p.comments,
            module_facts: None,
        }
    }
}

/// The Python frontend.
pub static PYTHON: PythonFrontend = PythonFrontend;

/// The Rust frontend (`syn`), for code that uses the `tch` crate.
#[derive(Debug, Default)]
pub struct RustFrontend;

impl Frontend for RustFrontend {
    fn language(&self) -> Language {
        Language::Rust
    }

    fn extensions(&self) -> &'static [&'static str] {
        &["rs"]
    }

    fn comment_prefix(&self) -> &'static str {
        "//"
    }

    /// Integration tests (`tests/`), benchmarks (`benches/`) and
    /// `*_test.rs`/`tests.rs` modules.
    fn is_test_path(&self, path: &Path) -> bool {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        name.ends_with("_test.rs")
            || name == "tests.rs"
            || path.components().any(|c| matches!(c.as_os_str().to_str(), Some("tests" | "benches")))
    }

    fn torch_roots(&self) -> &'static [&'static str] {
        &["tch"]
    }

    /// syn does not recover from a syntax error: a file that does not
    /// parse lowers to an empty module and its one error.
    fn parse(&self, source: &str) -> Parsed {
        let (module, errors) = match memlint_rust::parse(source) {
            Ok(m) => (m, Vec::new()),
            Err(e) => (
                Module::new(Language::Rust, Vec::new(), memlint_semantic::ir::Words::ALL),
                vec![SyntaxError { span: e.span, message: e.message }],
            ),
        };
        Parsed { module, errors, comments: memlint_rust::line_comments(source), module_facts: None }
    }
}

/// The Rust frontend.
pub static RUST: RustFrontend = RustFrontend;

static FRONTENDS: &[&dyn Frontend] = &[&PYTHON, &RUST];

/// The frontend for a path, by its extension.
pub fn frontend_for(path: &Path) -> Option<&'static dyn Frontend> {
    let ext = path.extension()?.to_str()?;
    FRONTENDS.iter().copied().find(|f| f.extensions().iter().any(|e| e.eq_ignore_ascii_case(ext)))
}

/// The language of a path's frontend; Python for what no frontend reads
/// (a notebook's cells, standard input without a name).
pub fn language_of(path: &Path) -> Language {
    frontend_for(path).map_or(Language::Python, |f| f.language())
}

/// The frontend of a language (every language of the IR has one).
pub fn frontend_of(language: Language) -> &'static dyn Frontend {
    FRONTENDS.iter().copied().find(|f| f.language() == language).unwrap_or(&PYTHON)
}

/// Every file extension a frontend reads (without the dot).
pub fn source_extensions() -> impl Iterator<Item = &'static str> {
    FRONTENDS.iter().flat_map(|f| f.extensions().iter().copied())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chosen_by_extension() {
        assert_eq!(frontend_for(Path::new("a/train.py")).map(|f| f.language()), Some(Language::Python));
        assert_eq!(frontend_for(Path::new("stubs.PYI")).map(|f| f.comment_prefix()), Some("#"));
        assert_eq!(frontend_for(Path::new("src/main.rs")).map(|f| f.comment_prefix()), Some("//"));
        assert!(frontend_for(Path::new("README")).is_none());
    }

    #[test]
    fn the_seam_answers_per_language() {
        assert_eq!(frontend_of(Language::Python).comment_prefix(), "#");
        assert_eq!(source_extensions().collect::<Vec<_>>(), ["py", "pyi", "rs"]);
        assert_eq!(frontend_of(Language::Rust).torch_roots(), ["tch"]);
        assert!(RUST.is_test_path(Path::new("crate/tests/train.rs")));
        assert!(!RUST.is_test_path(Path::new("crate/src/train.rs")));
        let parsed = RUST.parse("use tch::{nn, Tensor};\nfn main() {} // memlint: ignore\n");
        assert!(memlint_semantic::imports_any(&parsed.module, RUST.torch_roots()));
        assert_eq!(parsed.comments.len(), 1);
        let parsed = RUST.parse("fn main( {}\n");
        assert_eq!(parsed.errors.len(), 1);
        assert!(PYTHON.is_test_path(Path::new("pkg/tests/train.py")));
        assert!(PYTHON.is_test_path(Path::new("test_model.py")));
        assert!(!PYTHON.is_test_path(Path::new("train.py")));
        // Named for a test, holding none: an evaluation script.
        let script = "import torch\nif __name__ == '__main__':\n    main()\n";
        assert!(!crate::is_test_file(Path::new("u2net_test.py"), script));
        assert!(!crate::is_test_file(Path::new("tools/test_net.py"), script));
        assert!(crate::is_test_file(Path::new("tests/eval.py"), script));
        assert!(crate::is_test_file(Path::new("model_test.py"), "import torch\ndef test_shapes():\n    pass\n"));
        assert!(crate::is_test_file(Path::new("test_model.py"), "import unittest\n"));
        assert_eq!(PYTHON.torch_roots(), ["torch"]);
        let parsed = PYTHON.parse("import torchvision\n");
        assert!(!memlint_semantic::imports_any(&parsed.module, PYTHON.torch_roots()), "torchvision is not torch");
        let parsed = PYTHON.parse("def f():\n    from torch.nn import functional\n");
        assert!(memlint_semantic::imports_any(&parsed.module, PYTHON.torch_roots()));
    }

    #[test]
    fn a_notebook_exported_to_a_module_is_read_as_ipython() {
        // Only the IPython lines were errors: they are blanked in place.
        let src = "\"\"\"Automatically generated by Colaboratory.\"\"\"\n!pip install torch\n%matplotlib inline\nimport torch\nx = torch.zeros(3)\n";
        let parsed = PYTHON.parse(src);
        assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
        assert!(memlint_semantic::imports_any(&parsed.module, PYTHON.torch_roots()));
        assert_eq!(parsed.module.body.last().map(|s| s.span.start as usize), src.find("x = "));
        // A real error beside them keeps the file's own errors.
        let parsed = PYTHON.parse("!pip install torch\nloss = \n");
        assert_eq!(parsed.errors.first().map(|e| e.span.start), Some(0), "{:?}", parsed.errors);
        assert!(parsed.errors.iter().any(|e| e.span.start >= 19), "{:?}", parsed.errors);
        // A module without IPython lines is parsed once, as it is.
        assert_eq!(PYTHON.parse("x = (\n").errors.len(), 1);
    }
}
