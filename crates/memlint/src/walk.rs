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
    /// The file lies in a superseded copy of the code below the directory
    /// it was found in ([`memlint_linter::is_superseded_path`]).
    pub superseded: bool,
    /// Why the path could not be walked (an unreadable directory): it is
    /// reported as `ML000` with this message instead of being checked.
    pub error: Option<String>,
    /// For `-`: the text read from standard input (`path` is then the
    /// `--stdin-filename`, or `-`).
    pub stdin: Option<std::sync::Arc<Vec<u8>>>,
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
        // Cargo's build directory, beside its manifest.
        || (name == "target" && entry.path().parent().is_some_and(|p| p.join("Cargo.toml").is_file()))
        || name.ends_with(".egg-info")
        // Any virtualenv, whatever its name.
        || entry.path().join("pyvenv.cfg").is_file()
}

/// Files a frontend reads (Python modules and stubs, Rust sources) and
/// Jupyter notebooks.
fn is_checked_file(path: &Path) -> bool {
    memlint_linter::frontend::frontend_for(path).is_some() || memlint_linter::notebook::is_notebook_path(path)
}

/// Expands the command-line paths into the files to check, sorted. `-`
/// is standard input, checked as `stdin_name` (read once, at most `limit`
/// bytes; a larger input is reported as `ML000`).
pub fn collect(paths: &[PathBuf], stdin_name: Option<&Path>, limit: u64) -> Result<Vec<Candidate>> {
    let mut files = Vec::new();
    let mut dirs = Vec::new();
    let stdin_args = paths.iter().filter(|p| p.as_os_str() == "-").count();
    if stdin_args > 1 {
        bail!("`-` (standard input) is named {stdin_args} times");
    }
    for p in paths {
        if p.as_os_str() == "-" {
            let mut text = Vec::new();
            let read = std::io::Read::read_to_end(&mut std::io::Read::take(std::io::stdin().lock(), limit + 1), &mut text);
            let error = match read {
                Err(e) => Some(format!("cannot read standard input: {e}")),
                Ok(_) if text.len() as u64 > limit => {
                    Some(format!("cannot check standard input: larger than the limit of {limit} bytes (raise it with `--max-file-size`)"))
                }
                Ok(_) => None,
            };
            let path = stdin_name.map_or_else(|| PathBuf::from("-"), Path::to_path_buf);
            files.push(Candidate { path, explicit: true, superseded: false, error, stdin: Some(std::sync::Arc::new(text)) });
            continue;
        }
        match std::fs::metadata(p) {
            Ok(m) if m.is_dir() => dirs.push(p.clone()),
            Ok(_) => files.push(Candidate { path: p.clone(), explicit: true, superseded: false, error: None, stdin: None }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!("path `{}` does not exist", p.display()),
            // Unreadable but present: reported per file as ML000.
            Err(_) => files.push(Candidate { path: p.clone(), explicit: true, superseded: false, error: None, stdin: None }),
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
            let (found, dirs) = (&found, &dirs);
            Box::new(move |entry| {
                let candidate = match entry {
                    Ok(entry) if entry.file_type().is_some_and(|t| t.is_file()) && is_checked_file(entry.path()) => {
                        let path = entry.into_path();
                        let superseded = dirs
                            .iter()
                            .find_map(|d| path.strip_prefix(d).ok())
                            .is_some_and(memlint_linter::is_superseded_path);
                        Some(Candidate { path, explicit: false, superseded, error: None, stdin: None })
                    }
                    Ok(_) => None,
                    // A directory that cannot be listed is reported (its
                    // files are not checked), never skipped in silence.
                    Err(e) => error_path(&e).map(|(path, err)| Candidate {
                        path: path.to_path_buf(),
                        explicit: false,
                        superseded: false,
                        error: Some(format!("cannot read directory: {}", io_message(err))),
                        stdin: None,
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
    drop_run_snapshots(&mut files, &dirs);
    Ok(files)
}

/// Directories where training runs keep their outputs: logs, checkpoints,
/// experiment trackers' run folders.
const RUN_OUTPUT_DIRS: &[&str] = &["log", "logs", "runs", "outputs", "checkpoints", "wandb", "mlruns"];

/// Drops the copies of the project's sources that training scripts save
/// beside their checkpoints (`shutil.copy("models/utils.py", log_dir)`,
/// experiment trackers' `files/code/`): a file found by walking, under a
/// run-output directory below the walked root, in a directory that is no
/// package, whose name is also the name of a file of the run outside such
/// directories. Nothing imports them, and their findings repeat the
/// original's once per saved run. Named on the command line, a copy is
/// checked.
fn drop_run_snapshots(files: &mut Vec<Candidate>, roots: &[PathBuf]) {
    let in_run_output = |c: &Candidate| -> bool {
        if c.explicit || c.error.is_some() {
            return false;
        }
        let Some(rel) = roots.iter().find_map(|r| c.path.strip_prefix(r).ok()) else { return false };
        let Some(parent) = rel.parent() else { return false };
        parent.components().any(|d| d.as_os_str().to_str().is_some_and(|d| RUN_OUTPUT_DIRS.contains(&d)))
    };
    let snapshot: Vec<bool> = files.iter().map(in_run_output).collect();
    if !snapshot.contains(&true) {
        return;
    }
    let originals: std::collections::HashSet<&std::ffi::OsStr> =
        files.iter().zip(&snapshot).filter(|(_, s)| !**s).filter_map(|(c, _)| c.path.file_name()).collect();
    let packages: std::collections::HashSet<&Path> =
        files.iter().filter(|c| c.path.file_name().is_some_and(|n| n == "__init__.py")).filter_map(|c| c.path.parent()).collect();
    let drop: Vec<bool> = files
        .iter()
        .zip(&snapshot)
        .map(|(c, s)| {
            *s && c.path.file_name().is_some_and(|n| n != "__init__.py" && originals.contains(n))
                && c.path.parent().is_some_and(|p| !packages.contains(p))
        })
        .collect();
    let mut dropped = drop.into_iter();
    files.retain(|_| !dropped.next().unwrap_or(false));
}

/// The operating system's message for an error of the walk.
fn io_message(e: &ignore::Error) -> String {
    match e.io_error() {
        Some(io) => io.to_string(),
        None => e.to_string(),
    }
}
