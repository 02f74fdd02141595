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
    // tempfile creates 0600; a report is an ordinary file: keep the mode of the
    // file being replaced, else rw-r--r--.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path).map(|m| m.permissions().mode() & 0o7777).unwrap_or(0o644);
        tmp.as_file().set_permissions(std::fs::Permissions::from_mode(mode)).map_err(err)?;
    }
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
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o644, "report must not stay 0600");
        }
    }

    #[test]
    fn missing_directory_is_an_error_naming_the_path() {
        let e = write_atomic(Path::new("/nonexistent-dir-memprobe/x.json"), b"x").unwrap_err();
        assert!(e.to_string().contains("/nonexistent-dir-memprobe/x.json"));
    }
}
