//! Atomic file writes.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// The file a write to `path` should replace: a symbolic link's target, so
/// the link itself stays a link.
fn resolve(path: &Path) -> PathBuf {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()),
        _ => path.to_path_buf(),
    }
}

/// Writes `bytes` to `path` atomically: into a temporary file in the same
/// directory, flushed, then renamed over `path`. An existing file keeps its
/// permissions; a new one gets 0644.
/// On any error nothing at `path` has changed.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let target = resolve(path);
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let existing = std::fs::metadata(&target).ok();
    if existing.as_ref().is_some_and(|m| m.is_dir()) {
        anyhow::bail!("cannot write {}: it is a directory", path.display());
    }
    let mut tmp = tempfile::Builder::new()
        .prefix(".memlint-")
        .suffix(".tmp")
        .tempfile_in(&dir)
        .with_context(|| format!("cannot write {}: cannot create a file in {}", path.display(), dir.display()))?;
    tmp.write_all(bytes).and_then(|_| tmp.flush()).with_context(|| format!("cannot write {}", path.display()))?;
    let permissions = match &existing {
        Some(m) => Some(m.permissions()),
        None => default_permissions(),
    };
    if let Some(p) = permissions {
        std::fs::set_permissions(tmp.path(), p).with_context(|| format!("cannot write {}", path.display()))?;
    }
    tmp.as_file().sync_all().with_context(|| format!("cannot write {}", path.display()))?;
    tmp.persist(&target).map_err(|e| e.error).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

#[cfg(unix)]
fn default_permissions() -> Option<std::fs::Permissions> {
    use std::os::unix::fs::PermissionsExt;
    Some(std::fs::Permissions::from_mode(0o644))
}

#[cfg(not(unix))]
fn default_permissions() -> Option<std::fs::Permissions> {
    None
}
