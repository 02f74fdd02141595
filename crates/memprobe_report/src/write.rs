use std::io::Write;
use std::path::Path;

use crate::ReportError;

/// Writes `contents` to `path` atomically: a temporary file in the same
/// directory (same filesystem, so rename is atomic) is written, flushed, synced
/// and renamed over the destination.
pub fn write_atomic(path: &Path, contents: &[u8]) -> Result<(), ReportError> {
    let err = |source| ReportError::Write { path: path.to_path_buf(), source };
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".memprobe-")
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(err)?;
    tmp.write_all(contents).map_err(err)?;
    tmp.flush().map_err(err)?;
    tmp.as_file().sync_all().map_err(err)?;
    tmp.persist(path).map_err(|e| err(e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_and_replaces_without_leaving_temp_files() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.json");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "two");
        let n = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(n, 1, "temporary file left behind");
    }

    #[test]
    fn missing_directory_is_an_error_naming_the_path() {
        let e = write_atomic(Path::new("/nonexistent-dir-memprobe/x.json"), b"x").unwrap_err();
        assert!(e.to_string().contains("/nonexistent-dir-memprobe/x.json"));
    }
}
