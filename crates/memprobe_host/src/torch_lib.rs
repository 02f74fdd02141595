//! Which libtorch `memprobe-worker` runs against.
//!
//! The worker links libtorch dynamically and is built for one torch release
//! ([`WORKER_TORCH_VERSION`]). `memprobe bench` resolves the libtorch to use
//! before any work, in this order:
//!
//! 1. `LIBTORCH`: an unpacked libtorch (its `lib/` directory; its
//!    `build-version` file gives the version), as tch's build uses it;
//! 2. the torch package of the active Python: `$VIRTUAL_ENV/bin/python`,
//!    then `$CONDA_PREFIX/bin/python`, then the `python` beside the memprobe
//!    executable (memprobe installed with pip into the environment that holds
//!    torch, not activated), then `python3` and `python` on `PATH`;
//! 3. none found: the worker starts with the libtorch it was linked against
//!    (a development build carries an rpath to it); if that fails too, the
//!    error says what to install.
//!
//! A version other than the worker's is refused before any work, with the
//! command that installs the right one. The directory found is handed to the
//! worker through `LD_LIBRARY_PATH` (which takes precedence over the
//! worker's rpath) and `MEMPROBE_TORCH_LIB_DIR` (from which it loads the
//! CUDA half of libtorch, when that torch has one).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::HostError;

/// The torch release `memprobe-worker` is built against (tch 0.24).
pub const WORKER_TORCH_VERSION: &str = "2.11.0";

/// Environment variable through which the worker learns the lib directory.
pub const TORCH_LIB_DIR_ENV: &str = "MEMPROBE_TORCH_LIB_DIR";

/// A libtorch found on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LibTorch {
    /// The directory holding `libtorch_cpu.so`.
    pub lib_dir: PathBuf,
    /// Its version as it reports it (`2.11.0+cu130`), when known.
    pub version: Option<String>,
    /// Where it came from, in words ("LIBTORCH=/opt/libtorch", "the torch of
    /// /venv/bin/python").
    pub source: String,
}

/// What [`resolve`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolved {
    /// A libtorch of the right version (or of unknown version).
    Found(LibTorch),
    /// None found; the worker runs with the libtorch it was linked against.
    NotFound {
        /// Where memprobe looked, for the error if that fails.
        looked: String,
        /// The active Python, when one runs (it has no torch).
        python: Option<PathBuf>,
    },
}

/// The release part of a torch version: `2.11.0+cu130` -> `2.11.0`.
pub fn release(version: &str) -> &str {
    version.split('+').next().unwrap_or(version).trim()
}

/// Resolves the libtorch for the worker from the process environment.
pub fn resolve() -> Result<Resolved, HostError> {
    let exe_dir = std::env::current_exe().ok().and_then(|e| e.parent().map(Path::to_path_buf));
    resolve_with(&|k| std::env::var_os(k), exe_dir.as_deref())
}

/// [`resolve`] with the environment and the executable's directory given.
pub fn resolve_with(env: &dyn Fn(&str) -> Option<OsString>, exe_dir: Option<&Path>) -> Result<Resolved, HostError> {
    if let Some(root) = env("LIBTORCH").filter(|v| !v.is_empty()) {
        let root = PathBuf::from(root);
        let lib_dir = root.join("lib");
        if !lib_dir.join("libtorch_cpu.so").is_file() {
            return Err(HostError::Usage(format!(
                "LIBTORCH={}: no lib/libtorch_cpu.so there; point LIBTORCH at an unpacked libtorch {WORKER_TORCH_VERSION} \
                 (or unset it to use the active Python's torch)",
                root.display()
            )));
        }
        let version = std::fs::read_to_string(root.join("build-version")).ok().map(|s| s.trim().to_string());
        let found = LibTorch { lib_dir, version, source: format!("LIBTORCH={}", root.display()) };
        check_version(&found, None)?;
        return Ok(Resolved::Found(found));
    }
    let mut looked = Vec::new();
    let mut active = None;
    for python in candidate_pythons(env, exe_dir) {
        match torch_of(&python) {
            PythonTorch::NoPython => continue,
            PythonTorch::NoTorch => {
                looked.push(format!("{} has no torch", python.display()));
                active = Some(python);
            }
            PythonTorch::Torch { version, lib_dir } => {
                let found = LibTorch { lib_dir, version: Some(version), source: format!("the torch of {}", python.display()) };
                check_version(&found, Some(&python))?;
                return Ok(Resolved::Found(found));
            }
        }
        // The first Python that runs is the active one: a later one on PATH is
        // not what the user is working in.
        break;
    }
    if looked.is_empty() {
        looked.push("no Python found (VIRTUAL_ENV, CONDA_PREFIX, python3 and python on PATH)".into());
    }
    Ok(Resolved::NotFound { looked: looked.join("; "), python: active })
}

fn check_version(found: &LibTorch, python: Option<&Path>) -> Result<(), HostError> {
    let Some(v) = &found.version else { return Ok(()) };
    if release(v) == WORKER_TORCH_VERSION {
        return Ok(());
    }
    let what_to_do = match python {
        Some(py) => format!(
            "install it with `{} -m pip install torch=={WORKER_TORCH_VERSION}` (a virtual environment keeps it apart \
             from other work), or set LIBTORCH to an unpacked libtorch {WORKER_TORCH_VERSION}",
            py.display()
        ),
        None => format!("point LIBTORCH at a libtorch {WORKER_TORCH_VERSION}, or unset it to use the active Python's torch"),
    };
    Err(HostError::Usage(format!(
        "memprobe-worker is built for torch {WORKER_TORCH_VERSION}, and {} is torch {v}: {what_to_do}",
        found.source
    )))
}

/// The Pythons that may be the active one, most specific first.
fn candidate_pythons(env: &dyn Fn(&str) -> Option<OsString>, exe_dir: Option<&Path>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for var in ["VIRTUAL_ENV", "CONDA_PREFIX"] {
        if let Some(prefix) = env(var).filter(|v| !v.is_empty()) {
            let p = Path::new(&prefix).join("bin").join("python");
            if p.is_file() {
                out.push(p);
            }
        }
    }
    if let Some(p) = exe_dir.map(|d| d.join("python")).filter(|p| is_executable(p)) {
        out.push(p);
    }
    if let Some(path) = env("PATH") {
        for name in ["python3", "python"] {
            if let Some(p) = std::env::split_paths(&path).map(|d| d.join(name)).find(|p| is_executable(p)) {
                out.push(p);
            }
        }
    }
    out
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

enum PythonTorch {
    NoPython,
    NoTorch,
    Torch { version: String, lib_dir: PathBuf },
}

/// Asks `python` for its torch's version and lib directory. Importing torch
/// takes a second or two; nothing else is run.
fn torch_of(python: &Path) -> PythonTorch {
    const SCRIPT: &str = "import os, sys\n\
        try:\n    import torch\nexcept Exception:\n    print('memprobe:no-torch'); sys.exit(0)\n\
        print('memprobe:' + torch.__version__)\n\
        print(os.path.join(os.path.dirname(torch.__file__), 'lib'))\n";
    // Run from `/` so a `torch` folder in the user's working directory cannot
    // stand in for the package; PYTHONPATH and user site are kept, as the
    // user's own Python sees them.
    let Ok(out) = Command::new(python)
        .args(["-c", SCRIPT])
        .current_dir("/")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
    else {
        return PythonTorch::NoPython;
    };
    if !out.status.success() {
        return PythonTorch::NoPython;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines().skip_while(|l| !l.starts_with("memprobe:"));
    match lines.next().and_then(|l| l.strip_prefix("memprobe:")) {
        Some("no-torch") => PythonTorch::NoTorch,
        Some(v) => match lines.next() {
            Some(dir) if !dir.is_empty() => PythonTorch::Torch { version: v.trim().to_string(), lib_dir: PathBuf::from(dir) },
            _ => PythonTorch::NoTorch,
        },
        None => PythonTorch::NoPython,
    }
}

/// The environment the worker process gets for `found`.
pub fn worker_env(found: &LibTorch) -> Vec<(OsString, OsString)> {
    let mut ld = found.lib_dir.clone().into_os_string();
    if let Some(old) = std::env::var_os("LD_LIBRARY_PATH").filter(|v| !v.is_empty()) {
        ld.push(":");
        ld.push(old);
    }
    vec![("LD_LIBRARY_PATH".into(), ld), (TORCH_LIB_DIR_ENV.into(), found.lib_dir.clone().into_os_string())]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_drops_the_local_tag() {
        assert_eq!(release("2.11.0+cu130"), "2.11.0");
        assert_eq!(release("2.11.0"), "2.11.0");
    }

    fn fake_libtorch(version: Option<&str>) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("lib")).unwrap();
        std::fs::write(d.path().join("lib/libtorch_cpu.so"), b"").unwrap();
        if let Some(v) = version {
            std::fs::write(d.path().join("build-version"), format!("{v}\n")).unwrap();
        }
        d
    }

    #[test]
    fn libtorch_env_of_the_right_version_is_used() {
        let d = fake_libtorch(Some("2.11.0+cpu"));
        let root = d.path().as_os_str().to_owned();
        let r = resolve_with(&|k| (k == "LIBTORCH").then(|| root.clone()), None).unwrap();
        let Resolved::Found(found) = r else { panic!("{r:?}") };
        assert_eq!(found.lib_dir, d.path().join("lib"));
        assert_eq!(found.version.as_deref(), Some("2.11.0+cpu"));
    }

    #[test]
    fn libtorch_env_of_another_version_is_refused_naming_both() {
        let d = fake_libtorch(Some("2.9.1+cpu"));
        let root = d.path().as_os_str().to_owned();
        let e = resolve_with(&|k| (k == "LIBTORCH").then(|| root.clone()), None).unwrap_err().to_string();
        assert!(e.contains("built for torch 2.11.0") && e.contains("2.9.1+cpu"), "{e}");
    }

    #[test]
    fn libtorch_env_without_the_library_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().as_os_str().to_owned();
        let e = resolve_with(&|k| (k == "LIBTORCH").then(|| root.clone()), None).unwrap_err().to_string();
        assert!(e.contains("no lib/libtorch_cpu.so"), "{e}");
    }

    /// A fake `python3` that prints what a Python with torch `version` would.
    fn fake_python(dir: &Path, version: Option<&str>) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let p = dir.join("python3");
        let body = match version {
            Some(v) => format!("#!/bin/sh\necho memprobe:{v}\necho /opt/torch/lib\n"),
            None => "#!/bin/sh\necho memprobe:no-torch\n".to_string(),
        };
        std::fs::write(&p, body).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    #[test]
    fn the_active_pythons_torch_is_found_or_refused_by_version() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().as_os_str().to_owned();
        fake_python(d.path(), Some("2.11.0+cu130"));
        let r = resolve_with(&|k| (k == "PATH").then(|| path.clone()), None).unwrap();
        let Resolved::Found(found) = r else { panic!("{r:?}") };
        assert_eq!(found.lib_dir, PathBuf::from("/opt/torch/lib"));
        assert!(found.source.contains("python3"), "{found:?}");

        fake_python(d.path(), Some("2.10.0+cu128"));
        let e = resolve_with(&|k| (k == "PATH").then(|| path.clone()), None).unwrap_err().to_string();
        assert!(e.contains("-m pip install torch==2.11.0") && e.contains("2.10.0+cu128"), "{e}");

        fake_python(d.path(), None);
        let r = resolve_with(&|k| (k == "PATH").then(|| path.clone()), None).unwrap();
        let Resolved::NotFound { looked, python } = r else { panic!("{r:?}") };
        assert!(looked.contains("has no torch"), "{looked}");
        assert_eq!(python, Some(d.path().join("python3")));
    }

    #[test]
    fn worker_env_puts_the_lib_dir_first() {
        let found = LibTorch { lib_dir: "/x/lib".into(), version: None, source: String::new() };
        let env = worker_env(&found);
        assert!(env[0].1.to_string_lossy().starts_with("/x/lib"));
        assert_eq!(env[1], (OsString::from(TORCH_LIB_DIR_ENV), OsString::from("/x/lib")));
    }
}
