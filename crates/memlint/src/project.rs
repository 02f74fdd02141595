//! Project facts read from the file system: a file's module path (from
//! the packages' `__init__.py` files above it) and the lowest torch
//! version the project declares.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use memlint_linter::ModuleInfo;

/// Caches per directory what the file system says.
#[derive(Default)]
pub struct ProjectFacts {
    packages: Mutex<HashMap<PathBuf, Option<String>>>,
    cargo: Mutex<HashMap<PathBuf, bool>>,
    torch: Mutex<HashMap<PathBuf, TorchVersions>>,
}

impl ProjectFacts {
    /// The module path of `file` (absolute): the dotted path below the
    /// topmost directory of consecutive packages, or the file stem for a
    /// script outside any package.
    pub fn module_of(&self, file: &Path) -> ModuleInfo {
        if file.extension().is_some_and(|e| e == "rs") {
            if let Some(m) = self.rust_module_of(file) {
                return m;
            }
        }
        let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or("").to_string();
        let is_package = stem == "__init__";
        let dir = file.parent().unwrap_or(Path::new(""));
        let package = self.package_of(dir);
        let path = match (package, is_package) {
            (Some(p), true) => p,
            (Some(p), false) => format!("{p}.{stem}"),
            (None, _) => stem,
        };
        ModuleInfo::python(path, is_package)
    }

    /// The module path of a Rust file (absolute) in its Cargo package (the
    /// nearest directory above with a `Cargo.toml`), named after the
    /// package (`[package] name`, `-` read as `_`, as `use` spells it; the
    /// directory's name without one): `src/lib.rs` is the crate root
    /// `pkg`, `src/a/b.rs` and `src/a/b/mod.rs` are `pkg.a.b`, and
    /// `src/main.rs` is `pkg` too, or `pkg.main`, a crate of its own, when
    /// a `src/lib.rs` is beside it (it reaches the library as `pkg::`). A
    /// file outside `src/` (an example, a test, a benchmark) belongs to the
    /// crate whose root is the nearest `main.rs`/`lib.rs` beside or above
    /// it, else is a crate root itself: `examples/vae/main.rs` is
    /// `pkg.examples.vae`. `None` outside any package.
    fn rust_module_of(&self, file: &Path) -> Option<ModuleInfo> {
        let package = file.ancestors().skip(1).find(|d| self.is_cargo_package(d))?;
        let manifest = crate::fsutil::read_text(&package.join("Cargo.toml"), crate::fsutil::CONFIG_LIMIT).ok();
        let declared = manifest
            .and_then(|t| t.parse::<toml::Table>().ok())
            .and_then(|t| t.get("package")?.get("name")?.as_str().map(str::to_string));
        let name = match declared {
            Some(n) => n,
            None => package.file_name()?.to_str()?.to_string(),
        }
        .replace(['-', '.'], "_");
        let rel: Vec<String> = file.strip_prefix(package).ok()?.with_extension("").iter().map(|c| c.to_string_lossy().into_owned()).collect();
        let binary_beside_library = rel.len() == 2 && rel[1] == "main" && package.join("src/lib.rs").is_file();
        let (root_len, root) = match rel.first().map(String::as_str) {
            Some("src") if binary_beside_library => (2, format!("{name}.main")),
            Some("src") => (1, name.clone()),
            _ => {
                // The nearest directory (below the package) holding a crate root file.
                let dirs = rel.len().saturating_sub(1);
                let root_dir = (1..=dirs).rev().find(|&n| {
                    let dir = rel[..n].iter().fold(package.to_path_buf(), |p, c| p.join(c));
                    dir.join("main.rs").is_file() || dir.join("lib.rs").is_file()
                });
                let n = root_dir.unwrap_or(rel.len());
                (n, std::iter::once(name.clone()).chain(rel[..n].iter().cloned()).collect::<Vec<_>>().join("."))
            }
        };
        let mut parts: Vec<&str> = rel[root_len..].iter().map(String::as_str).collect();
        if parts.last().is_some_and(|l| *l == "mod") || (parts.len() == 1 && matches!(parts[0], "lib" | "main")) {
            parts.pop();
        }
        let path = std::iter::once(root.as_str()).chain(parts).collect::<Vec<_>>().join(".");
        Some(ModuleInfo { path, crate_root: Some(root), ..ModuleInfo::default() })
    }

    /// Whether `dir` holds a `Cargo.toml` (cached).
    fn is_cargo_package(&self, dir: &Path) -> bool {
        if let Ok(cache) = self.cargo.lock() {
            if let Some(hit) = cache.get(dir) {
                return *hit;
            }
        }
        let found = dir.join("Cargo.toml").is_file();
        if let Ok(mut cache) = self.cargo.lock() {
            cache.insert(dir.to_path_buf(), found);
        }
        found
    }

    /// The dotted package path of `dir`, `None` when it is not a package.
    fn package_of(&self, dir: &Path) -> Option<String> {
        if let Ok(cache) = self.packages.lock() {
            if let Some(hit) = cache.get(dir) {
                return hit.clone();
            }
        }
        let name = dir.file_name().and_then(|n| n.to_str()).map(str::to_string);
        let result = match name {
            Some(name) if dir.join("__init__.py").is_file() => {
                match dir.parent().and_then(|p| self.package_of(p)) {
                    Some(parent) => Some(format!("{parent}.{name}")),
                    None => Some(name),
                }
            }
            _ => None,
        };
        if let Ok(mut cache) = self.packages.lock() {
            cache.insert(dir.to_path_buf(), result.clone());
        }
        result
    }

    /// What the closest project above `dir` (absolute) declares of torch:
    /// the lowest version it allows (`torch>=X.Y`, or `==`, `~=`, `>`) and
    /// a version every torch it allows is below (`torch==1.7.1`,
    /// `torch<2.0`), from pyproject.toml, setup.cfg, setup.py (a
    /// packaging script, not a module of helpers so named),
    /// requirements*.txt and `requirements/`, and, for the second, a pin in
    /// the install commands of its README (`pip install torch==1.8.1`,
    /// `conda install pytorch=1.7.1`, "PyTorch version 1.7.1").
    pub fn torch_versions(&self, dir: &Path) -> TorchVersions {
        if let Ok(cache) = self.torch.lock() {
            if let Some(hit) = cache.get(dir) {
                return *hit;
            }
        }
        let mut found: TorchVersions = (None, None);
        let mut is_root = false;
        // Whether the main manifests require torch at all (pinned or not):
        // then they decide, and a side file's pin (`requirements_onnx.txt`
        // with `torch==1.13.1` for an export tool) is not the project's.
        let mut main_requires_torch = false;
        let add = |text: &str, found: &mut TorchVersions| {
            let (min, below) = declared_torch(text);
            found.0 = lower(found.0, min);
            found.1 = lower(found.1, below);
        };
        for name in ["pyproject.toml", "setup.cfg", "setup.py", "requirements.txt"] {
            let p = dir.join(name);
            if let Ok(text) = crate::fsutil::read_text(&p, crate::fsutil::CONFIG_LIMIT) {
                // A `setup.py` that builds nothing is a module of the code
                // (`eval/setup.py` of helpers that set a model up), not a
                // project's manifest.
                if name == "setup.py" && !is_packaging_script(&text) {
                    continue;
                }
                is_root = true;
                main_requires_torch |= names_torch(&text);
                add(&text, &mut found);
            }
        }
        // `requirements-*.txt` beside them, and `requirements/**/*.txt`.
        let mut txts = Vec::new();
        if let Ok(entries) = std::fs::read_dir(dir) {
            for e in entries.flatten() {
                let n = e.file_name().to_string_lossy().to_string();
                if n.starts_with("requirements") && n.ends_with(".txt") && n != "requirements.txt" {
                    txts.push(e.path());
                }
            }
        }
        let mut stack = vec![(dir.join("requirements"), 0)];
        while let Some((d, depth)) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&d) else { continue };
            for e in entries.flatten() {
                let p = e.path();
                if p.is_dir() && depth < 2 {
                    stack.push((p, depth + 1));
                } else if p.extension().is_some_and(|x| x == "txt") {
                    txts.push(p);
                }
            }
        }
        for p in txts {
            if let Ok(text) = crate::fsutil::read_text(&p, crate::fsutil::CONFIG_LIMIT) {
                is_root = true;
                if !main_requires_torch {
                    add(&text, &mut found);
                }
            }
        }
        // A conda environment file pins the environment the code ran in
        // (`- pytorch=1.9.0`, or `- torch==1.9.0` under `pip:`).
        for name in ["environment.yml", "environment.yaml"] {
            if let Ok(text) = crate::fsutil::read_text(&dir.join(name), crate::fsutil::CONFIG_LIMIT) {
                is_root = true;
                found.1 = lower(found.1, readme_torch_pin(&text));
            }
        }
        // A research repository with no packaging names its environment
        // in its README.
        for name in ["README.md", "README.rst", "README.txt", "README"] {
            if let Ok(text) = crate::fsutil::read_text(&dir.join(name), crate::fsutil::CONFIG_LIMIT) {
                found.1 = lower(found.1, readme_torch_pin(&text));
                break;
            }
        }
        // The closest project root decides; above it, nothing is declared.
        // A README pin without requirement files beside it adds to what
        // the project above declares.
        let result = if is_root {
            found
        } else {
            let (min, below) = dir.parent().map_or((None, None), |p| self.torch_versions(p));
            (min, lower(found.1, below))
        };
        if let Ok(mut cache) = self.torch.lock() {
            cache.insert(dir.to_path_buf(), result);
        }
        result
    }
}

/// Whether a `setup.py` is a packaging script: it uses setuptools,
/// distutils or scikit-build.
fn is_packaging_script(text: &str) -> bool {
    ["setuptools", "distutils", "skbuild"].iter().any(|m| text.contains(m))
}

/// What a project declares of torch: the lowest version it allows, and a
/// version (major, minor) every version it allows is below.
pub type TorchVersions = (Option<(u32, u32)>, Option<(u32, u32)>);

fn lower(a: Option<(u32, u32)>, b: Option<(u32, u32)>) -> Option<(u32, u32)> {
    a.into_iter().chain(b).min()
}

/// The version pinned in a README's install commands: `torch==1.8.1` or
/// `pytorch==1.8.1` (pip), `pytorch=1.7.1` (conda), or prose naming the
/// version the code was developed with, `PyTorch version 1.7.1`, or a
/// release named in full, `Install Python 3.6, PyTorch 1.9.0` (not `PyTorch
/// 1.9.0 or later`), or an item of a list, `* pytorch 1.10`, or a cap, `Pytorch before 0.4`. As an
/// exclusive bound on (major, minor): `(1, 8)` for 1.7.1, `(0, 4)` for
/// before 0.4. A minimum
/// (`torch>=1.8`, `PyTorch 1.8+`) is not a pin.
pub fn readme_torch_pin(text: &str) -> Option<(u32, u32)> {
    let folded = text.to_ascii_lowercase();
    let mut best: Option<(u32, u32)> = None;
    for (word, seps) in
        [("torch==", &[""][..]), ("pytorch=", &[""][..]), ("pytorch version", &[" ", " is ", " of "][..]), ("pytorch ", &[""][..]), ("pytorch", &[""][..])]
    {
        let mut i = 0;
        while let Some(pos) = folded[i..].find(word) {
            let start = i + pos;
            i = start + word.len();
            // `torch==` inside `pytorch==` is the same pin; `torchvision==` is not torch.
            let before = folded[..start].chars().next_back();
            if word == "torch==" && before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') && !folded[..start].ends_with("py") {
                continue;
            }
            let rest = &folded[i..];
            // `* pytorch1.2.0`: glued to its version, in a list item only
            // (the other spellings are read by the words above).
            if word == "pytorch" && !rest.starts_with(|c: char| c.is_ascii_digit()) {
                continue;
            }
            let rest = rest.strip_prefix('=').unwrap_or(rest);
            let Some(rest) = seps.iter().find_map(|s| rest.strip_prefix(s)) else { continue };
            let mut version: String = rest.chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
            let after = rest[version.len()..].chars().next();
            if after == Some('+') || version.is_empty() {
                continue;
            }
            // `Pytorch 0.3.0/0.4.0/1.0.0`: the versions it was tested on,
            // the newest of them the last.
            let mut tail = &rest[version.len()..];
            while let Some(next) = tail.strip_prefix('/') {
                let v: String = next.chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
                if v.is_empty() {
                    break;
                }
                tail = &next[v.len()..];
                version = v;
            }
            // "developed for PyTorch version 1.8.1 ..., but should work
            // with other versions": the version of the authors' machine,
            // not a requirement.
            let sentence_end = tail.find(". ").or_else(|| tail.find('\n')).unwrap_or(tail.len());
            if ["should work", "other versions", "newer versions", "later versions", "any version"]
                .iter()
                .any(|w| tail[..sentence_end].contains(w))
            {
                continue;
            }
            // `PyTorch 1.9.0`: a release named in full, and not as a
            // minimum (`PyTorch 1.9.0 or later`); `PyTorch 2` is a name.
            if word == "pytorch " || word == "pytorch" {
                let tail = rest[version.len()..].trim_start_matches([' ', ',', ')']);
                let minimum = tail
                    .split_whitespace()
                    .take(2)
                    .any(|t| ["later", "higher", "newer", "above", "greater"].iter().any(|w| t.starts_with(w)));
                // `* pytorch 1.10 (pip package)`: an item of a list of
                // requirements names its version, in full or not.
                let line_start = folded[..start].rfind('\n').map_or(0, |n| n + 1);
                let item = matches!(folded[line_start..start].trim(), "*" | "-" | "+");
                let parts = version.split('.').filter(|p| !p.is_empty()).count();
                if parts < 3 && !(item && parts == 2) || minimum || (word == "pytorch" && !item) {
                    continue;
                }
            }
            if let Some((major, minor)) = major_minor(&version) {
                best = lower(best, Some((major, minor + 1)));
            }
        }
    }
    // `Pytorch before 0.4`: a cap, exclusive; also through a Markdown link
    // (`[Pytorch](http://pytorch.org/) before 0.4`).
    let mut unlinked = String::with_capacity(folded.len());
    let mut rest = folded.as_str();
    while let Some(open) = rest.find("](") {
        unlinked.push_str(&rest[..open]);
        rest = rest[open + 2..].split_once(')').map_or("", |(_, after)| after);
    }
    unlinked.push_str(rest);
    let unlinked = unlinked.replace("[pytorch", "pytorch").replace("[torch", "torch");
    for (pos, _) in unlinked.match_indices("torch before ") {
        let rest = &unlinked[pos + "torch before ".len()..];
        let version: String = rest.chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
        best = lower(best, major_minor(&version));
    }
    // A README that also names a newer torch ("You need to update your
    // pytorch to 2.0", "PyTorch 2.1 is supported") was updated after the
    // pin was written: the pin is history, not the code's environment.
    let newest = newest_torch_mentioned(&unlinked);
    best.filter(|pin| newest.is_none_or(|n| n < *pin))
}

/// The newest (major, minor) a text names right after "torch" or
/// "pytorch", within a few characters (`pytorch to 2.0`, `PyTorch >=
/// 1.10`, `torch 2.1+`, `PyTorch version 1.7.1`).
fn newest_torch_mentioned(folded: &str) -> Option<(u32, u32)> {
    let mut newest = None;
    for (pos, _) in folded.match_indices("torch") {
        let rest = &folded[pos + "torch".len()..];
        // Not `torchvision 0.9.1`.
        if rest.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
            continue;
        }
        let near: String = rest.chars().take(16).collect();
        let Some(start) = near.find(|c: char| c.is_ascii_digit()) else { continue };
        let skipped = &near[..start];
        if !skipped.chars().all(|c| " =<>~:,v(".contains(c)) && !["version", " to ", " is "].iter().any(|w| skipped.contains(w)) {
            continue;
        }
        let version: String = rest[start..].chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
        newest = newest.max(major_minor(&version));
    }
    newest
}

/// The (major, minor) of a version number (`(1, 7)` of `1.7.1`), when it
/// names both.
fn major_minor(version: &str) -> Option<(u32, u32)> {
    let mut parts = version.split('.').filter_map(|p| p.parse::<u32>().ok());
    Some((parts.next()?, parts.next()?))
}

/// The torch versions a requirements text declares ([`TorchVersions`]):
/// `torch>=2.4` gives a minimum, `torch<2.0` and `torch<=1.13` a bound
/// below, `torch==1.7.1` both, and so does a compatible release:
/// `torch~=2.1.0` is `>=2.1.0, ==2.1.*` (below 2.2), `torch~=2.4` is
/// `>=2.4, ==2.*` (below 3.0).
pub fn declared_torch(text: &str) -> TorchVersions {
    let mut min = None;
    let mut below = None;
    for_each_torch_specifier(text, |op, (major, minor), parts| match op {
        "==" => {
            min = lower(min, Some((major, minor)));
            below = lower(below, Some((major, minor + 1)));
        }
        "~=" => {
            min = lower(min, Some((major, minor)));
            below = lower(below, Some(if parts >= 3 { (major, minor + 1) } else { (major + 1, 0) }));
        }
        ">=" | ">" => min = lower(min, Some((major, minor))),
        "<" => below = lower(below, Some((major, minor))),
        "<=" => below = lower(below, Some((major, minor + 1))),
        _ => {}
    });
    (min, below)
}

/// Whether a manifest names `torch` as a whole word (`torch`, `torch>=2.1`,
/// `"torch",`; not `torchvision` or `pytorch-lightning`).
fn names_torch(text: &str) -> bool {
    torch_words(text).next().is_some()
}

/// What follows each `torch` of `text` that is a whole word: not
/// `pytorch-lightning`, `torchvision`, `torch_geometric`.
fn torch_words(text: &str) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    text.match_indices("torch").filter_map(move |(start, _)| {
        let before_ok = start == 0 || !(bytes[start - 1].is_ascii_alphanumeric() || matches!(bytes[start - 1], b'-' | b'_' | b'.'));
        let after = &text[start + 5..];
        (before_ok && !after.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_')).then_some(after)
    })
}

/// Calls `f(operator, (major, minor), components)` for each specifier of
/// `torch` in a requirements text (`torch >= 2.1.0, <3` gives `>=` 2.1
/// with 3 components and `<` 3.0 with 1).
fn for_each_torch_specifier(text: &str, mut f: impl FnMut(&str, (u32, u32), usize)) {
    for after in torch_words(text) {
        let spec = after.trim_start_matches([' ', '\t']);
        let mut spec = spec.strip_prefix('[').map(|s| s.split_once(']').map(|(_, r)| r).unwrap_or("")).unwrap_or(spec).trim_start();
        // Comma-separated clauses: `>= 2.1.0, <3`.
        while let Some(op) = ["==", ">=", "~=", "<=", ">", "<"].into_iter().find(|op| spec.starts_with(op)) {
            let rest = spec[op.len()..].trim_start();
            let version: String = rest.chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
            let components = version.split('.').filter(|p| !p.is_empty()).count();
            let mut parts = version.split('.').filter_map(|p| p.parse::<u32>().ok());
            if let Some(major) = parts.next() {
                f(op, (major, parts.next().unwrap_or(0)), components);
            }
            let rest = rest[version.len()..].trim_start();
            match rest.strip_prefix(',') {
                Some(r) => spec = r.trim_start(),
                None => break,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_torch_specifiers() {
        assert_eq!(declared_torch("torch>=2.4\nnumpy").0, Some((2, 4)));
        assert_eq!(declared_torch("install_requires=['torch==2.5.1']").0, Some((2, 5)));
        assert_eq!(declared_torch("torchvision>=0.20\npytorch-lightning>=2"), (None, None));
        assert_eq!(declared_torch("torch\n"), (None, None));
        assert_eq!(declared_torch("torch[cuda]>=2.3").0, Some((2, 3)));
        assert_eq!(declared_torch("dependencies = [\"torch >= 2.1.0, <3\"]"), (Some((2, 1)), Some((3, 0))));
        assert_eq!(declared_torch("torch==1.7.1\ntorchvision==0.8.2"), (Some((1, 7)), Some((1, 8))));
        assert_eq!(declared_torch("torch<=1.13"), (None, Some((1, 14))));
        assert_eq!(declared_torch("torch>=2.4"), (Some((2, 4)), None));
        assert_eq!(declared_torch("torch~=2.1.0"), (Some((2, 1)), Some((2, 2))));
        assert_eq!(declared_torch("torch~=2.4"), (Some((2, 4)), Some((3, 0))));
    }

    #[test]
    fn a_readme_pin_adds_to_the_project_above() {
        let dir = tempfile::tempdir().expect("tempdir");
        let sub = dir.path().join("examples/demo");
        std::fs::create_dir_all(&sub).expect("mkdir");
        std::fs::write(dir.path().join("requirements.txt"), "torch>=2.4\n").expect("write");
        std::fs::write(sub.join("README.md"), "pip install torch==2.5.0\n").expect("write");
        let facts = ProjectFacts::default();
        assert_eq!(facts.torch_versions(&sub), (Some((2, 4)), Some((2, 6))));
        assert_eq!(facts.torch_versions(dir.path()), (Some((2, 4)), None));
    }

    #[test]
    fn a_side_requirements_file_does_not_pin_a_project_that_names_torch() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("requirements_onnx_encoder.txt"), "torch==1.13.1
onnx
").expect("write");
        std::fs::write(dir.path().join("requirements.txt"), "torchvision
torch
").expect("write");
        assert_eq!(ProjectFacts::default().torch_versions(dir.path()), (None, None));
        // With no torch in the main manifest, the side file is all there is.
        std::fs::write(dir.path().join("requirements.txt"), "torchvision
numpy
").expect("write");
        assert_eq!(ProjectFacts::default().torch_versions(dir.path()), (Some((1, 13)), Some((1, 14))));
        assert!(!names_torch("pytorch-lightning
torchaudio
torch_geometric
"));
        assert!(names_torch("dependencies = [\"torch>=2.1\"]"));
    }

    #[test]
    fn a_conda_environment_pins_torch() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("requirements.txt"), "torch\n").expect("write");
        std::fs::write(dir.path().join("environment.yml"), "dependencies:\n  - python=3.7\n  - pip:\n    - torch==1.9.0\n").expect("write");
        assert_eq!(ProjectFacts::default().torch_versions(dir.path()), (None, Some((1, 10))));
        std::fs::write(dir.path().join("environment.yml"), "dependencies:\n  - pytorch=1.12.1\n  - torchvision\n").expect("write");
        assert_eq!(ProjectFacts::default().torch_versions(dir.path()), (None, Some((1, 13))));
    }

    #[test]
    fn a_setup_module_of_helpers_is_no_manifest() {
        let dir = tempfile::tempdir().expect("tempdir");
        let eval = dir.path().join("pkg/eval");
        std::fs::create_dir_all(&eval).expect("mkdir");
        std::fs::write(dir.path().join("requirements.txt"), "torch==2.0.0\n").expect("write");
        std::fs::write(eval.join("setup.py"), "import torch\ndef setup_and_build_model(args):\n    pass\n").expect("write");
        let facts = ProjectFacts::default();
        assert_eq!(facts.torch_versions(&eval), (Some((2, 0)), Some((2, 1))));
        let lib = dir.path().join("lib");
        std::fs::create_dir_all(&lib).expect("mkdir");
        std::fs::write(lib.join("setup.py"), "from setuptools import setup\nsetup(name='lib')\n").expect("write");
        assert_eq!(facts.torch_versions(&lib), (None, None));
    }

    #[test]
    fn reads_torch_pins_in_readmes() {
        let dino = "This codebase has been developed with python version 3.6, PyTorch version 1.7.1, CUDA 11.0";
        assert_eq!(readme_torch_pin(dino), Some((1, 8)));
        assert_eq!(readme_torch_pin("conda install pytorch=1.8.1 torchvision -c pytorch"), Some((1, 9)));
        assert_eq!(readme_torch_pin("pip install torch==2.5.0 torchvision==0.20.0"), Some((2, 6)));
        assert_eq!(readme_torch_pin("pip install torchvision==0.8.2"), None);
        assert_eq!(readme_torch_pin("Requires PyTorch version 1.8+ and python 3.8"), None);
        assert_eq!(readme_torch_pin("## Requirements\n* python3.6/3.7/3.8\n* pytorch 1.10 (pip package)\n"), Some((1, 11)));
        assert_eq!(readme_torch_pin("- PyTorch 1.8 or later\n"), None);
        assert_eq!(readme_torch_pin("## Environment\n* python3.6\n* pytorch1.2.0\n* apex\n"), Some((1, 3)));
        assert_eq!(readme_torch_pin("Trained with pytorch1.2.0 on 8 GPUs.\n"), None);
        assert_eq!(readme_torch_pin("We use PyTorch 1.8 for this.\n"), None);
        assert_eq!(readme_torch_pin("pip install torch>=1.8"), None);
        assert_eq!(readme_torch_pin(" - [Pytorch](http://pytorch.org/) before 0.4 (for newer vesion, see #3)"), Some((0, 4)));
        assert_eq!(readme_torch_pin("Requires Pytorch before 0.4"), Some((0, 4)));
        assert_eq!(readme_torch_pin("We use PyTorch. See pytorch.org."), None);
        assert_eq!(readme_torch_pin("Install Python 3.6, PyTorch 1.9.0."), Some((1, 10)));
        assert_eq!(readme_torch_pin("Tested with PyTorch 1.9.0 or later."), None);
        assert_eq!(readme_torch_pin("Needs PyTorch 2.1.0 or higher"), None);
        assert_eq!(readme_torch_pin("A PyTorch 2 port of the model"), None);
        assert_eq!(readme_torch_pin("PyTorch 1.12 is supported"), None);
        let reid = "You need to update your pytorch to 2.0.\n\nOur code is tested based on Pytorch 0.3.0/0.4.0/0.5.0/1.0.0 and Torchvision 0.2.0/0.2.1 .";
        assert_eq!(readme_torch_pin(reid), None);
        assert_eq!(readme_torch_pin("Tested on Pytorch 0.3.0/0.4.0/1.0.0 and Torchvision 0.2.1."), Some((1, 1)));
        let vicreg = "The code has been developed for PyTorch version 1.8.1 and torchvision version 0.9.1, but should work with other versions just as well. Set the path.";
        assert_eq!(readme_torch_pin(vicreg), None);
        assert_eq!(readme_torch_pin("pip install torch==1.8.1\nSee torchvision 0.20.0 for the models."), Some((1, 9)));
    }

    #[test]
    fn module_paths_follow_packages() {
        let dir = tempfile::tempdir().expect("tempdir");
        let pkg = dir.path().join("pkg/sub");
        std::fs::create_dir_all(&pkg).expect("mkdir");
        std::fs::write(dir.path().join("pkg/__init__.py"), "").expect("write");
        std::fs::write(pkg.join("__init__.py"), "").expect("write");
        let facts = ProjectFacts::default();
        assert_eq!(facts.module_of(&pkg.join("mod.py")).path, "pkg.sub.mod");
        let init = facts.module_of(&pkg.join("__init__.py"));
        assert_eq!((init.path.as_str(), init.is_package), ("pkg.sub", true));
        assert_eq!(facts.module_of(&dir.path().join("train.py")).path, "train");
    }

    #[test]
    fn rust_module_paths_follow_the_cargo_package() {
        let dir = tempfile::tempdir().expect("tempdir");
        // The directory's name is not the package's (a registry copy).
        let root = dir.path().join("my-agent-0.1.0");
        for d in ["src/ppo", "examples/cartpole"] {
            std::fs::create_dir_all(root.join(d)).expect("mkdir");
        }
        std::fs::write(root.join("Cargo.toml"), "[package]\nname = \"my-agent\"\n").expect("write");
        std::fs::write(root.join("src/lib.rs"), "").expect("write");
        std::fs::write(root.join("examples/cartpole/main.rs"), "").expect("write");
        let facts = ProjectFacts::default();
        let of = |rel: &str| {
            let m = facts.module_of(&root.join(rel));
            (m.path, m.crate_root.unwrap_or_default())
        };
        let pair = |a: &str, b: &str| (a.to_string(), b.to_string());
        assert_eq!(of("src/lib.rs"), pair("my_agent", "my_agent"));
        assert_eq!(of("src/main.rs"), pair("my_agent.main", "my_agent.main"), "a binary beside the library");
        assert_eq!(of("src/ppo/mod.rs"), pair("my_agent.ppo", "my_agent"));
        assert_eq!(of("src/ppo/loss.rs"), pair("my_agent.ppo.loss", "my_agent"));
        assert_eq!(of("examples/cartpole/main.rs"), pair("my_agent.examples.cartpole", "my_agent.examples.cartpole"));
        assert_eq!(of("examples/cartpole/model.rs"), pair("my_agent.examples.cartpole.model", "my_agent.examples.cartpole"));
        assert_eq!(of("examples/simple.rs"), pair("my_agent.examples.simple", "my_agent.examples.simple"));
        // Outside a package: the stem, as a script.
        let loose = facts.module_of(&dir.path().join("train.rs"));
        assert_eq!((loose.path.as_str(), loose.crate_root), ("train", None));
    }
}
