use std::path::Path;

use crate::ReportError;

/// Writes `contents` to `path` through the file-system boundary shared
/// with memlint ([`safe_io::write_output`]): `-` is standard output, a
/// character device or FIFO is written in place (never replaced), a
/// regular file is replaced atomically (temporary file in the same
/// directory, synced, renamed) keeping its mode and owner, a symbolic
/// link's target is written, a read-only file is refused.
pub fn write_atomic(path: &Path, contents: &[u8]) -> Result<(), ReportError> {
    safe_io::write_output(path, contents).map_err(|e| ReportError::Write { path: path.to_path_buf(), source: io_error(e) })
}

fn io_error(e: safe_io::WriteError) -> std::io::Error {
    match e {
        safe_io::WriteError::Io(io) => io,
        other => std::io::Error::other(other.to_string()),
    }
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
