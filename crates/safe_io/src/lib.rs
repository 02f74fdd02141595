//! The file-system boundary of memlint and memprobe.
//!
//! Everything either tool reads from or writes to a user's disk goes
//! through here, so that the rules hold everywhere:
//!
//! - **Reads** ([`read_regular`]) open without blocking and accept regular
//!   files only: a FIFO named `x.py` or a link to `/dev/zero` is refused at
//!   once instead of hanging or growing without bound, and a file over the
//!   caller's size limit is refused without reading it all.
//! - **Report writes** ([`write_output`], checked beforehand with
//!   [`check_output`]): `-` is standard output; a character device or FIFO
//!   (`/dev/null`, `/dev/stdout` through its link, a named pipe) is written
//!   in place and never replaced; a regular file is replaced atomically
//!   (temporary file in its directory, then rename) keeping its mode and
//!   owner, or written in place when it has other hard links; a symbolic
//!   link stays a link and its target is written; a read-only file is
//!   refused.
//! - **Rewrites of checked files** ([`replace_unchanged`], `--fix`): the
//!   same, and the file is left alone when its bytes on disk are no longer
//!   the ones read (an editor saved, a formatter ran).
//!
//! Paths stay [`Path`]s throughout: nothing goes through a lossy string.

use std::fmt;
use std::fs::{self, File, Metadata, OpenOptions};
use std::io::{self, Read as _, Write};
use std::path::{Path, PathBuf};

/// The path that names standard input or output.
pub const STDIO: &str = "-";

/// How many symbolic links are followed before a path is called a loop
/// (the kernel's own limit).
const MAX_LINKS: usize = 40;

/// What kind of file `ft` is, in words for a message ("a FIFO").
pub fn kind_name(ft: &fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if ft.is_fifo() {
            return "a FIFO";
        }
        if ft.is_char_device() {
            return "a character device";
        }
        if ft.is_block_device() {
            return "a block device";
        }
        if ft.is_socket() {
            return "a socket";
        }
    }
    if ft.is_dir() {
        "a directory"
    } else if ft.is_symlink() {
        "a symbolic link"
    } else if ft.is_file() {
        "a regular file"
    } else {
        "not a regular file"
    }
}

/// Why a file was not read.
#[derive(Debug)]
pub enum ReadError {
    /// The path names something other than a regular file.
    NotRegular(&'static str),
    /// The file is larger than the limit (bytes).
    TooLarge {
        /// The limit that was exceeded, in bytes.
        limit: u64,
    },
    /// The operating system refused.
    Io(io::Error),
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::NotRegular(kind) => write!(f, "not a regular file (it is {kind})"),
            ReadError::TooLarge { limit } => write!(f, "larger than the limit of {}", human_bytes(*limit)),
            ReadError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ReadError {}

impl From<io::Error> for ReadError {
    fn from(e: io::Error) -> Self {
        ReadError::Io(e)
    }
}

/// `n` bytes in words: "64 MiB", "1500 bytes".
pub fn human_bytes(n: u64) -> String {
    const MIB: u64 = 1 << 20;
    const KIB: u64 = 1 << 10;
    if n >= MIB && n.is_multiple_of(MIB) {
        format!("{} MiB", n / MIB)
    } else if n >= KIB && n.is_multiple_of(KIB) {
        format!("{} KiB", n / KIB)
    } else {
        format!("{n} bytes")
    }
}

/// Opens `path` for reading without blocking on a FIFO or a terminal.
fn open_nonblocking(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
    }
    options.open(path)
}

/// Reads the regular file at `path` (symbolic links followed), at most
/// `limit` bytes of it.
///
/// The file is opened without blocking and its type checked on the open
/// descriptor, so a FIFO, device or directory is refused at once, and one
/// swapped in between a check and the open cannot slip through.
pub fn read_regular(path: &Path, limit: u64) -> Result<Vec<u8>, ReadError> {
    let file = open_nonblocking(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(ReadError::NotRegular(kind_name(&meta.file_type())));
    }
    if meta.len() > limit {
        return Err(ReadError::TooLarge { limit });
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    // The file may grow while it is read: never past the limit.
    (&file).take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(ReadError::TooLarge { limit });
    }
    Ok(bytes)
}

/// Why a file was not written.
#[derive(Debug)]
pub enum WriteError {
    /// The file's bytes on disk are no longer those that were read.
    Changed,
    /// The file has no write permission bit (or the user may not write it).
    ReadOnly,
    /// The path names something that is neither a regular file nor a
    /// character device or FIFO (which are written in place).
    NotRegular(&'static str),
    /// The directory the file would be created in does not exist.
    NoDirectory(PathBuf),
    /// Symbolic links loop, or nest deeper than the kernel follows.
    LinkLoop,
    /// The operating system refused.
    Io(io::Error),
}

impl fmt::Display for WriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WriteError::Changed => f.write_str("it changed on disk since it was read; left as it is"),
            WriteError::ReadOnly => f.write_str("it is read-only; left as it is"),
            WriteError::NotRegular(kind) => write!(f, "it is {kind}, not a regular file"),
            WriteError::NoDirectory(d) => write!(f, "the directory {} does not exist", d.display()),
            WriteError::LinkLoop => f.write_str("too many levels of symbolic links"),
            WriteError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for WriteError {}

impl From<io::Error> for WriteError {
    fn from(e: io::Error) -> Self {
        WriteError::Io(e)
    }
}

/// The path a write to `path` lands on: symbolic links followed to the
/// last one's target (which need not exist yet), so a link stays a link.
fn follow_links(path: &Path) -> Result<PathBuf, WriteError> {
    let mut p = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        match fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = fs::read_link(&p)?;
                p = if target.is_absolute() {
                    target
                } else {
                    p.parent().map_or_else(|| target.clone(), |d| d.join(&target))
                };
            }
            Ok(_) => return Ok(p),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(p),
            Err(e) => return Err(e.into()),
        }
    }
    Err(WriteError::LinkLoop)
}

/// Where a report written to a path goes.
#[derive(Debug)]
enum Dest {
    /// `-`: standard output.
    Stdout,
    /// A character device or FIFO: opened and written, never replaced.
    InPlace(PathBuf),
    /// A regular file (existing or to be created), replaced atomically.
    File(PathBuf, Option<Metadata>),
}

fn destination(path: &Path) -> Result<Dest, WriteError> {
    if path.as_os_str() == STDIO {
        return Ok(Dest::Stdout);
    }
    let target = follow_links(path)?;
    match fs::metadata(&target) {
        Ok(m) if m.is_file() => Ok(Dest::File(target, Some(m))),
        Ok(m) => {
            let ft = m.file_type();
            #[cfg(unix)]
            {
                use std::os::unix::fs::FileTypeExt;
                if ft.is_char_device() || ft.is_fifo() {
                    return Ok(Dest::InPlace(target));
                }
            }
            Err(WriteError::NotRegular(kind_name(&ft)))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Dest::File(target, None)),
        Err(e) => Err(e.into()),
    }
}

/// The directory a new file at `target` is created in.
fn parent_dir(target: &Path) -> PathBuf {
    match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Whether the file's permission bits forbid writing it. (As root every
/// file can be opened for writing; a file nobody may write is still left
/// alone.)
fn is_read_only(m: &Metadata, target: &Path) -> bool {
    if m.permissions().readonly() {
        return true;
    }
    OpenOptions::new().write(true).open(target).is_err_and(|e| e.kind() == io::ErrorKind::PermissionDenied)
}

/// Checks, before any work is done, that a report can be written to
/// `path` with [`write_output`]: its directory exists and accepts a new
/// file, and what is there is not a directory, a read-only file or another
/// kind of file that is not written.
pub fn check_output(path: &Path) -> Result<(), WriteError> {
    match destination(path)? {
        Dest::Stdout | Dest::InPlace(_) => Ok(()),
        Dest::File(target, existing) => {
            if let Some(m) = &existing {
                if is_read_only(m, &target) {
                    return Err(WriteError::ReadOnly);
                }
            }
            let dir = parent_dir(&target);
            if !dir.is_dir() {
                return Err(WriteError::NoDirectory(dir));
            }
            // The only sure test that the directory takes a new file.
            tempfile::Builder::new().prefix(".write-check-").tempfile_in(&dir)?;
            Ok(())
        }
    }
}

/// Writes a report to `path`: `-` is standard output, a character device
/// or FIFO is written in place, a regular file is replaced atomically
/// (keeping mode, owner and hard links), a symbolic link's target is
/// written. On error nothing at `path` has changed, except for a device
/// or FIFO that took part of the bytes.
pub fn write_output(path: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    match destination(path)? {
        Dest::Stdout => {
            let mut out = io::stdout().lock();
            out.write_all(bytes)?;
            out.flush()?;
            Ok(())
        }
        Dest::InPlace(target) => {
            let mut f = OpenOptions::new().write(true).open(&target)?;
            f.write_all(bytes)?;
            f.flush()?;
            Ok(())
        }
        Dest::File(target, existing) => replace(&target, existing.as_ref(), bytes, None),
    }
}

/// Rewrites the regular file at `path` with `bytes`, but only while its
/// content on disk is still `original` ([`WriteError::Changed`]
/// otherwise, and the file is left alone). Mode, owner and hard links are
/// kept; a read-only file is refused; a symbolic link's target is written.
pub fn replace_unchanged(path: &Path, original: &[u8], bytes: &[u8]) -> Result<(), WriteError> {
    let target = follow_links(path)?;
    let meta = fs::metadata(&target)?;
    if !meta.is_file() {
        return Err(WriteError::NotRegular(kind_name(&meta.file_type())));
    }
    if !unchanged(&target, original)? {
        return Err(WriteError::Changed);
    }
    replace(&target, Some(&meta), bytes, Some(original))
}

/// Whether the file at `target` still holds exactly the bytes that were read.
fn unchanged(target: &Path, original: &[u8]) -> Result<bool, WriteError> {
    match read_regular(target, original.len() as u64) {
        Ok(now) => Ok(now == original),
        Err(ReadError::TooLarge { .. }) => Ok(false),
        Err(ReadError::NotRegular(kind)) => Err(WriteError::NotRegular(kind)),
        Err(ReadError::Io(e)) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(ReadError::Io(e)) => Err(e.into()),
    }
}

/// Replaces the regular file `target` (or creates it) with `bytes`.
/// With `original`, the file is checked once more to be unchanged just
/// before the rename.
fn replace(target: &Path, existing: Option<&Metadata>, bytes: &[u8], original: Option<&[u8]>) -> Result<(), WriteError> {
    if let Some(m) = existing {
        if is_read_only(m, target) {
            return Err(WriteError::ReadOnly);
        }
        if has_other_links(m) {
            // A rename would split the links: write the file itself.
            return write_in_place(target, bytes);
        }
    }
    let dir = parent_dir(target);
    if !dir.is_dir() {
        return Err(WriteError::NoDirectory(dir));
    }
    let mut tmp = tempfile::Builder::new().prefix(".partial-").suffix(".tmp").tempfile_in(&dir)?;
    tmp.write_all(bytes)?;
    tmp.flush()?;
    match existing {
        Some(m) => {
            tmp.as_file().set_permissions(m.permissions())?;
            if !keep_owner(tmp.as_file(), m)? {
                // Only root can give a file away: keep the owner by
                // writing the file itself.
                drop(tmp);
                if let Some(o) = original {
                    if !unchanged(target, o)? {
                        return Err(WriteError::Changed);
                    }
                }
                return write_in_place(target, bytes);
            }
        }
        None => set_default_mode(tmp.as_file())?,
    }
    tmp.as_file().sync_all()?;
    if let Some(o) = original {
        if !unchanged(target, o)? {
            return Err(WriteError::Changed);
        }
    }
    tmp.persist(target).map_err(|e| e.error)?;
    Ok(())
}

/// Writes `bytes` into the existing file `target` (same inode).
fn write_in_place(target: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    let mut f = OpenOptions::new().write(true).open(target)?;
    f.write_all(bytes)?;
    f.set_len(bytes.len() as u64)?;
    f.sync_all()?;
    Ok(())
}

#[cfg(unix)]
fn has_other_links(m: &Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    m.nlink() > 1
}

#[cfg(not(unix))]
fn has_other_links(_: &Metadata) -> bool {
    false
}

/// Gives the temporary file the replaced file's owner and group; `false`
/// when that is not allowed (not root, another owner).
#[cfg(unix)]
fn keep_owner(tmp: &File, m: &Metadata) -> Result<bool, WriteError> {
    use std::os::unix::fs::MetadataExt;
    let now = tmp.metadata()?;
    if now.uid() == m.uid() && now.gid() == m.gid() {
        return Ok(true);
    }
    match std::os::unix::fs::fchown(tmp, Some(m.uid()), Some(m.gid())) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => Ok(false),
        Err(e) => Err(e.into()),
    }
}

#[cfg(not(unix))]
fn keep_owner(_: &File, _: &Metadata) -> Result<bool, WriteError> {
    Ok(true)
}

/// A new file is an ordinary one, rw-r--r-- (a temporary file is made
/// rw-------).
#[cfg(unix)]
fn set_default_mode(f: &File) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    f.set_permissions(fs::Permissions::from_mode(0o644))
}

#[cfg(not(unix))]
fn set_default_mode(_: &File) -> io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests;
