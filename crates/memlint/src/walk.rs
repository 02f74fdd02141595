//! Finding the files to check.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{bail, Result};
use ignore::{DirEntry, WalkBuilder, WalkState};

/// A file to check.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Candidate {
    /// The path as shown to the user: the argument joined with the file's
    /// path below it.
    pub path: PathBuf,
    /// The file was named on the command line (never excluded).
    pub explicit: bool,
    /// Why the path could not be walked (an unreadable directory): it is
    /// reported as `ML000` with this message instead of being checked.
    pub error: Option<String>,
}

/// The path an error of the walk is about, and the error without it.
fn error_path(e: &ignore::Error) -> Option<(&Path, &ignore::Error)> {
    match e {
        ignore::Error::WithPath { path, err } => Some((path.as_path(), err.as_ref())),
        ignore::Error::WithDepth { err, .. } | ignore::Error::WithLineNumber { err, .. } => error_path(err),
        _ => None,
    }
}

/// Directory names never descended into unless given explicitly.
/// (`.ipynb_checkpoints`, Jupyter's autosaved copies, is hidden anyway; it is
/// named so that the rule does not rest on the hidden-file setting.)
const SKIPPED_DIRS: &[&str] = &[
    "venv",
    "site-packages",
    "__pycache__",
    "__pypackages__",
    "node_modules",
    "build",
    "dist",
    "_build",
    "buck-out",
    ".ipynb_checkpoints",
];

fn skip_dir(entry: &DirEntry) -> bool {
    if entry.depth() == 0 || !entry.file_type().is_some_and(|t| t.is_dir()) {
        return false;
    }
    let name = entry.file_name().to_string_lossy();
    SKIPPED_DIRS.contains(&name.as_ref())
        || name.ends_with(".egg-info")
        // Any virtualenv, whatever its name.
        || entry.path().join("pyvenv.cfg").is_file()
}

/// Python modules, stubs and Jupyter notebooks.
fn is_checked_file(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "py" || e == "pyi" || e.eq_ignore_ascii_case("ipynb"))
}

/// Expands the command-line paths into the files to check, sorted.
pub fn collect(paths: &[PathBuf]) -> Result<Vec<Candidate>> {
    let mut files = Vec::new();
    let mut dirs = Vec::new();
    for p in paths {
        match std::fs::metadata(p) {
            Ok(m) if m.is_dir() => dirs.push(p.clone()),
            Ok(_) => files.push(Candidate { path: p.clone(), explicit: true, error: None }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!("path `{}` does not exist", p.display()),
            // Unreadable but present: reported per file as ML000.
            Err(_) => files.push(Candidate { path: p.clone(), explicit: true, error: None }),
        }
    }
    if let Some((first, rest)) = dirs.split_first() {
        let mut builder = WalkBuilder::new(first);
        for d in rest {
            builder.add(d);
        }
        builder.hidden(true).git_ignore(true).git_exclude(true).require_git(false).filter_entry(|e| !skip_dir(e));
        let found = Mutex::new(Vec::new());
        builder.build_parallel().run(|| {
            let found = &found;
            Box::new(move |entry| {
                let candidate = match entry {
                    Ok(entry) if entry.file_type().is_some_and(|t| t.is_file()) && is_checked_file(entry.path()) => {
                        Some(Candidate { path: entry.into_path(), explicit: false, error: None })
                    }
                    Ok(_) => None,
                    // A directory that cannot be listed is reported (its
                    // files are not checked), never skipped in silence.
                    Err(e) => error_path(&e).map(|(path, err)| Candidate {
                        path: path.to_path_buf(),
                        explicit: false,
                        error: Some(format!("cannot read directory: {}", io_message(err))),
                    }),
                };
                if let (Some(c), Ok(mut f)) = (candidate, found.lock()) {
                    f.push(c);
                }
                WalkState::Continue
            })
        });
        files.extend(found.into_inner().unwrap_or_default());
    }
    files.sort();
    files.dedup_by(|a, b| a.path == b.path);
    Ok(files)
}

/// The operating system's message for an error of the walk.
fn io_message(e: &ignore::Error) -> String {
    match e.io_error() {
        Some(io) => io.to_string(),
        None => e.to_string(),
    }
}
