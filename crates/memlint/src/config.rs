//! Configuration files: `memlint.toml`, or `[tool.memlint]` in
//! `pyproject.toml`, found by walking up from each checked file (the
//! closest wins; in one directory `memlint.toml` wins over `pyproject.toml`).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, Result};
use globset::{Glob, GlobMatcher};
use memlint_diagnostics::{LineIndex, Severity};
use memlint_linter::Selector;
use serde::Deserialize;
use toml::Spanned;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawOptions {
    select: Option<Vec<Spanned<String>>>,
    ignore: Option<Vec<Spanned<String>>>,
    extend_select: Option<Vec<Spanned<String>>>,
    per_file_ignores: Option<BTreeMap<String, Vec<Spanned<String>>>>,
    exclude: Option<Vec<Spanned<String>>>,
    fail_on: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
struct Pyproject {
    tool: Option<PyprojectTool>,
}

#[derive(Debug, Deserialize)]
struct PyprojectTool {
    memlint: Option<toml::Value>,
}

/// One resolved configuration file.
#[derive(Debug)]
pub struct Config {
    /// The file it came from.
    pub path: PathBuf,
    /// Its directory: relative patterns are matched against paths below it.
    pub root: PathBuf,
    pub select: Option<Vec<Selector>>,
    pub ignore: Vec<Selector>,
    pub extend_select: Vec<Selector>,
    pub per_file_ignores: Vec<(GlobMatcher, Vec<Selector>)>,
    pub exclude: Vec<GlobMatcher>,
    pub fail_on: Option<Severity>,
}

fn located(path: &Path, text: &str, span: std::ops::Range<usize>, msg: impl std::fmt::Display) -> anyhow::Error {
    let index = LineIndex::new(text);
    let (line, col) = index.location_in(u32::try_from(span.start).unwrap_or(u32::MAX), Some(text));
    anyhow!("{}:{line}:{col}: {msg}", path.display())
}

fn selectors(path: &Path, text: &str, list: Option<Vec<Spanned<String>>>) -> Result<Option<Vec<Selector>>> {
    let Some(list) = list else { return Ok(None) };
    list.into_iter()
        .map(|s| {
            let span = s.span();
            Selector::parse(s.get_ref()).map_err(|e| located(path, text, span, e))
        })
        .collect::<Result<Vec<_>>>()
        .map(Some)
}

fn glob(path: &Path, text: &str, pattern: &Spanned<String>) -> Result<GlobMatcher> {
    Glob::new(pattern.get_ref())
        .map(|g| g.compile_matcher())
        .map_err(|e| located(path, text, pattern.span(), format!("invalid glob `{}`: {e}", pattern.get_ref())))
}

impl Config {
    /// Parses a `memlint.toml` (whole file) or a `pyproject.toml` (only its
    /// `[tool.memlint]` table). `Ok(None)`: a pyproject without that table.
    pub fn load(path: &Path) -> Result<Option<Config>> {
        let text = crate::fsutil::read_text(path, crate::fsutil::CONFIG_LIMIT)
            .map_err(|e| anyhow!("cannot read {}: {e}", path.display()))?;
        let is_pyproject = path.file_name().is_some_and(|n| n == "pyproject.toml");
        let raw: RawOptions = if is_pyproject {
            let doc: Pyproject = toml::from_str(&text).map_err(|e| anyhow!("{}: {e}", path.display()))?;
            if doc.tool.and_then(|t| t.memlint).is_none() {
                return Ok(None);
            }
            // Re-parse the table itself so errors carry spans into the file.
            #[derive(Deserialize)]
            struct P {
                tool: T,
            }
            #[derive(Deserialize)]
            struct T {
                memlint: RawOptions,
            }
            let p: P = toml::from_str(&text).map_err(|e| anyhow!("{}: {e}", path.display()))?;
            p.tool.memlint
        } else {
            toml::from_str(&text).map_err(|e| anyhow!("{}: {e}", path.display()))?
        };
        let root = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let fail_on = match raw.fail_on {
            Some(f) => Some(Severity::parse(f.get_ref()).ok_or_else(|| {
                located(path, &text, f.span(), format!("`fail-on` must be error, warning or info, not `{}`", f.get_ref()))
            })?),
            None => None,
        };
        let mut per_file_ignores = Vec::new();
        for (pattern, codes) in raw.per_file_ignores.unwrap_or_default() {
            let matcher = Glob::new(&pattern)
                .map_err(|e| anyhow!("{}: invalid glob `{pattern}` in per-file-ignores: {e}", path.display()))?
                .compile_matcher();
            per_file_ignores.push((matcher, selectors(path, &text, Some(codes))?.unwrap_or_default()));
        }
        let exclude = raw.exclude.unwrap_or_default().iter().map(|p| glob(path, &text, p)).collect::<Result<_>>()?;
        Ok(Some(Config {
            path: path.to_path_buf(),
            root,
            select: selectors(path, &text, raw.select)?,
            ignore: selectors(path, &text, raw.ignore)?.unwrap_or_default(),
            extend_select: selectors(path, &text, raw.extend_select)?.unwrap_or_default(),
            per_file_ignores,
            exclude,
            fail_on,
        }))
    }

    fn relative<'p>(&self, file: &'p Path) -> &'p Path {
        file.strip_prefix(&self.root).unwrap_or(file)
    }

    /// Whether `file` (absolute) matches `exclude`, itself or any directory above it.
    pub fn is_excluded(&self, file: &Path) -> bool {
        let rel = self.relative(file);
        rel.ancestors().filter(|a| !a.as_os_str().is_empty()).any(|a| {
            self.exclude.iter().any(|g| g.is_match(a) || a.file_name().is_some_and(|n| g.is_match(n)))
        })
    }

    /// Selectors of the `per-file-ignores` entries matching `file` (absolute).
    pub fn ignores_for(&self, file: &Path) -> Vec<Selector> {
        let rel = self.relative(file);
        let name = file.file_name().map(Path::new);
        self.per_file_ignores
            .iter()
            .filter(|(g, _)| g.is_match(rel) || name.is_some_and(|n| g.is_match(n)))
            .flat_map(|(_, s)| s.iter().cloned())
            .collect()
    }
}

/// Finds and caches the closest configuration of each directory.
#[derive(Default)]
pub struct Discovery {
    cache: Mutex<HashMap<PathBuf, Option<Arc<Config>>>>,
}

impl Discovery {
    /// The configuration closest to `dir` (absolute), walking up.
    pub fn for_dir(&self, dir: &Path) -> Result<Option<Arc<Config>>> {
        if let Some(hit) = self.cache.lock().map_err(|_| anyhow!("configuration cache poisoned"))?.get(dir) {
            return Ok(hit.clone());
        }
        let mut found = None;
        for candidate in ["memlint.toml", "pyproject.toml"] {
            let p = dir.join(candidate);
            if p.is_file() {
                if let Some(c) = Config::load(&p)? {
                    found = Some(Arc::new(c));
                    break;
                }
            }
        }
        if found.is_none() {
            if let Some(parent) = dir.parent() {
                found = self.for_dir(parent)?;
            }
        }
        self.cache.lock().map_err(|_| anyhow!("configuration cache poisoned"))?.insert(dir.to_path_buf(), found.clone());
        Ok(found)
    }
}
