#![allow(clippy::unwrap_used)]

use super::*;

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().expect("temporary directory")
}

#[cfg(unix)]
fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo").arg(path).status().expect("mkfifo runs");
    assert!(status.success());
}

#[test]
fn reads_a_regular_file_within_the_limit() {
    let d = tmp();
    let p = d.path().join("a.py");
    fs::write(&p, b"x = 1\n").unwrap();
    assert_eq!(read_regular(&p, 6).unwrap(), b"x = 1\n");
    assert!(matches!(read_regular(&p, 5), Err(ReadError::TooLarge { limit: 5 })));
}

#[test]
fn refuses_directories() {
    let d = tmp();
    assert!(matches!(read_regular(d.path(), 100), Err(ReadError::NotRegular("a directory"))));
}

#[cfg(unix)]
#[test]
fn refuses_a_fifo_without_blocking_and_a_device_without_reading_it() {
    let d = tmp();
    let fifo = d.path().join("x.py");
    mkfifo(&fifo);
    let e = read_regular(&fifo, 100).unwrap_err();
    assert_eq!(e.to_string(), "not a regular file (it is a FIFO)");
    let zero = d.path().join("zero.py");
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    assert_eq!(read_regular(&zero, 100).unwrap_err().to_string(), "not a regular file (it is a character device)");
}

#[test]
fn creates_and_replaces_a_report() {
    let d = tmp();
    let p = d.path().join("r.json");
    check_output(&p).unwrap();
    write_output(&p, b"one").unwrap();
    write_output(&p, b"two").unwrap();
    assert_eq!(fs::read(&p).unwrap(), b"two");
    assert_eq!(fs::read_dir(d.path()).unwrap().count(), 1, "no temporary file left");
}

#[test]
fn a_missing_directory_is_found_before_any_work() {
    let d = tmp();
    let p = d.path().join("missing/r.json");
    let e = check_output(&p).unwrap_err();
    assert!(e.to_string().contains("does not exist"), "{e}");
    assert!(matches!(check_output(d.path()), Err(WriteError::NotRegular("a directory"))));
}

#[cfg(unix)]
#[test]
fn a_symbolic_link_stays_a_link() {
    let d = tmp();
    let target = d.path().join("real.json");
    fs::write(&target, b"old").unwrap();
    let link = d.path().join("link.json");
    std::os::unix::fs::symlink("real.json", &link).unwrap();
    write_output(&link, b"new").unwrap();
    assert!(fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    assert_eq!(fs::read(&target).unwrap(), b"new");
    // A dangling link: its target is created.
    let dangling = d.path().join("dangling.json");
    std::os::unix::fs::symlink("made.json", &dangling).unwrap();
    write_output(&dangling, b"made").unwrap();
    assert!(fs::symlink_metadata(&dangling).unwrap().file_type().is_symlink());
    assert_eq!(fs::read(d.path().join("made.json")).unwrap(), b"made");
}

#[cfg(unix)]
#[test]
fn a_fifo_is_written_in_place_never_replaced() {
    let d = tmp();
    let fifo = d.path().join("out.fifo");
    mkfifo(&fifo);
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || fs::read(fifo).unwrap())
    };
    check_output(&fifo).unwrap();
    write_output(&fifo, b"through the pipe").unwrap();
    assert_eq!(reader.join().unwrap(), b"through the pipe");
    use std::os::unix::fs::FileTypeExt;
    assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
}

#[cfg(unix)]
#[test]
fn hard_links_and_mode_are_kept() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let d = tmp();
    let a = d.path().join("a.py");
    let b = d.path().join("b.py");
    fs::write(&a, b"old").unwrap();
    fs::set_permissions(&a, fs::Permissions::from_mode(0o640)).unwrap();
    fs::hard_link(&a, &b).unwrap();
    let read = read_regular(&a, 100).unwrap();
    replace_unchanged(&a, &read, b"new").unwrap();
    assert_eq!(fs::read(&b).unwrap(), b"new", "the other link sees the change");
    assert_eq!(fs::metadata(&a).unwrap().nlink(), 2);
    assert_eq!(fs::metadata(&a).unwrap().permissions().mode() & 0o777, 0o640);
    let c = d.path().join("c.py");
    fs::write(&c, b"old").unwrap();
    fs::set_permissions(&c, fs::Permissions::from_mode(0o600)).unwrap();
    let read = read_regular(&c, 100).unwrap();
    replace_unchanged(&c, &read, b"new").unwrap();
    assert_eq!(fs::metadata(&c).unwrap().permissions().mode() & 0o777, 0o600);
}

#[cfg(unix)]
#[test]
fn a_read_only_file_is_left_alone() {
    use std::os::unix::fs::PermissionsExt;
    let d = tmp();
    let p = d.path().join("ro.py");
    fs::write(&p, b"old").unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(0o444)).unwrap();
    let read = read_regular(&p, 100).unwrap();
    assert!(matches!(replace_unchanged(&p, &read, b"new"), Err(WriteError::ReadOnly)));
    assert!(matches!(check_output(&p), Err(WriteError::ReadOnly)));
    assert_eq!(fs::read(&p).unwrap(), b"old");
}

#[test]
fn a_file_changed_since_it_was_read_is_left_alone() {
    let d = tmp();
    let p = d.path().join("a.py");
    fs::write(&p, b"old").unwrap();
    let read = read_regular(&p, 100).unwrap();
    fs::write(&p, b"edited by someone else").unwrap();
    assert!(matches!(replace_unchanged(&p, &read, b"new"), Err(WriteError::Changed)));
    assert_eq!(fs::read(&p).unwrap(), b"edited by someone else");
    // Same length, same content: unchanged.
    let read = read_regular(&p, 100).unwrap();
    replace_unchanged(&p, &read, b"new").unwrap();
    assert_eq!(fs::read(&p).unwrap(), b"new");
}

#[cfg(unix)]
#[test]
fn names_that_are_not_utf8_are_written_as_they_are() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let d = tmp();
    let raw = d.path().join(OsStr::from_bytes(b"a\xff.py"));
    let lossy = d.path().join("a\u{fffd}.py");
    fs::write(&raw, b"raw").unwrap();
    fs::write(&lossy, b"unrelated").unwrap();
    let read = read_regular(&raw, 100).unwrap();
    replace_unchanged(&raw, &read, b"fixed").unwrap();
    assert_eq!(fs::read(&raw).unwrap(), b"fixed");
    assert_eq!(fs::read(&lossy).unwrap(), b"unrelated");
}

#[test]
fn sizes_in_words() {
    assert_eq!(human_bytes(64 << 20), "64 MiB");
    assert_eq!(human_bytes(2048), "2 KiB");
    assert_eq!(human_bytes(1500), "1500 bytes");
}
