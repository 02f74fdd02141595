//! Small text files memlint reads besides the checked ones (configuration,
//! baselines, project metadata), through `safe_io`: regular files only,
//! never blocking on a FIFO, never more than a limit.

use std::path::Path;

/// The most a configuration file or a project's metadata file
/// (`pyproject.toml`, `setup.cfg`, `requirements.txt`) may hold.
pub const CONFIG_LIMIT: u64 = 16 << 20;

/// The most a baseline may hold (about 300 bytes a finding).
pub const BASELINE_LIMIT: u64 = 256 << 20;

/// The UTF-8 text of the regular file at `path`, of at most `limit` bytes.
pub fn read_text(path: &Path, limit: u64) -> Result<String, String> {
    let bytes = safe_io::read_regular(path, limit).map_err(|e| e.to_string())?;
    String::from_utf8(bytes).map_err(|e| format!("not valid UTF-8 (invalid byte at offset {})", e.utf8_error().valid_up_to()))
}
