//! A working copy of a project for `ab --fix`: the fixes are applied to the
//! copy, never to the user's files.
//!
//! Directories are made anew; source files (`.py`, `.pyi`, `.ipynb`) and
//! other files up to [`COPY_LIMIT`] are copied; larger files (datasets,
//! checkpoints) are symbolic links to the originals, so the copy costs
//! little and the job still finds its data. Hidden directories (`.git`,
//! `.venv`), virtual environments (a `pyvenv.cfg` inside) and
//! `node_modules` are linked whole; `__pycache__` is left out (Python
//! writes the copy's own). A symbolic link is recreated as it is.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// Files up to this size are copied; larger ones are linked.
pub const COPY_LIMIT: u64 = 1 << 20;

/// Deepest directory level copied (a deeper tree is linked there).
const MAX_DEPTH: usize = 64;

/// The copy: its temporary directory (removed on drop) and the copied root.
pub struct Mirror {
    _dir: tempfile::TempDir,
    /// Where the project's root is in the copy.
    pub root: PathBuf,
    /// The original root.
    pub original: PathBuf,
}

impl Mirror {
    /// Copies `root` (see the module's documentation).
    pub fn new(root: &Path) -> io::Result<Mirror> {
        let original = fs::canonicalize(root)?;
        let dir = tempfile::Builder::new().prefix("memprobe-fix-").tempdir()?;
        let name = original.file_name().map(|n| n.to_os_string()).unwrap_or_else(|| "project".into());
        let copy = dir.path().join(name);
        copy_dir(&original, &copy, 0)?;
        Ok(Mirror { _dir: dir, root: copy, original })
    }

    /// `path` (absolute, or relative to the working directory) in the copy,
    /// when it lies under the original root.
    pub fn map(&self, path: &Path) -> Option<PathBuf> {
        let abs = std::path::absolute(path).ok()?;
        let abs = fs::canonicalize(&abs).unwrap_or(abs);
        abs.strip_prefix(&self.original).ok().map(|rest| self.root.join(rest))
    }
}

fn link_whole(dir: &Path) -> bool {
    let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("");
    name.starts_with('.') || name == "node_modules" || dir.join("pyvenv.cfg").exists()
}

fn copy_dir(from: &Path, to: &Path, depth: usize) -> io::Result<()> {
    fs::create_dir(to)?;
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let src = entry.path();
        let dst = to.join(entry.file_name());
        let kind = entry.file_type()?;
        if kind.is_symlink() {
            std::os::unix::fs::symlink(fs::read_link(&src)?, &dst)?;
        } else if kind.is_dir() {
            if entry.file_name() == "__pycache__" {
                continue;
            }
            if depth >= MAX_DEPTH || link_whole(&src) {
                std::os::unix::fs::symlink(&src, &dst)?;
            } else {
                copy_dir(&src, &dst, depth + 1)?;
            }
        } else if kind.is_file() {
            let source = src.extension().is_some_and(|e| e == "py" || e == "pyi" || e == "ipynb");
            if source || entry.metadata()?.len() <= COPY_LIMIT {
                fs::copy(&src, &dst)?;
            } else {
                std::os::unix::fs::symlink(&src, &dst)?;
            }
        }
        // Sockets, FIFOs and devices are not part of a project's code.
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_are_copied_large_files_and_hidden_dirs_linked() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("proj");
        fs::create_dir_all(root.join("pkg/__pycache__")).unwrap();
        fs::create_dir_all(root.join(".git")).unwrap();
        fs::write(root.join("train.py"), "print(1)\n").unwrap();
        fs::write(root.join("pkg/__pycache__/x.pyc"), "").unwrap();
        fs::write(root.join("data.bin"), vec![0u8; (COPY_LIMIT + 1) as usize]).unwrap();
        fs::write(root.join("config.yaml"), "lr: 1\n").unwrap();
        let m = Mirror::new(&root).unwrap();
        let meta = |p: &str| fs::symlink_metadata(m.root.join(p)).unwrap();
        assert!(meta("train.py").is_file());
        assert!(meta("config.yaml").is_file());
        assert!(meta("data.bin").file_type().is_symlink());
        assert!(meta(".git").file_type().is_symlink());
        assert!(!m.root.join("pkg/__pycache__").exists());
        assert_eq!(m.map(&root.join("train.py")), Some(m.root.join("train.py")));
        assert_eq!(m.map(Path::new("/elsewhere/x.py")), None);
        // The copy is the copy: writing it leaves the original as it was.
        fs::write(m.root.join("train.py"), "print(2)\n").unwrap();
        assert_eq!(fs::read_to_string(root.join("train.py")).unwrap(), "print(1)\n");
    }
}
