//! `memlint check`.

use std::collections::HashMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use memlint_diagnostics::fix::FixMode;
use memlint_diagnostics::render::{
    ConciseRenderer, FullRenderer, GithubRenderer, GitlabRenderer, GroupedRenderer, JsonLinesRenderer, JsonRenderer,
    JunitRenderer, Renderer, SarifRenderer,
};
use memlint_diagnostics::{Applicability, FileReport, Report, Severity, SourceFile, Span};
use memlint_linter::fix_loop::{fix_text_with, FileFix};
use memlint_linter::notebook::{is_notebook_path, lint_notebook_in};
use memlint_linter::{
    is_test_file, lint_file, lint_parsed, summarize_source, FileContext, LintOptions, ModuleInfo,
    ProjectIndex, RuleSet, Selector, PARSE_ERROR,
};
use rayon::prelude::*;

use crate::args::{CheckArgs, FailOn, OutputFormat};
use crate::baseline::{self, Baseline};
use crate::config::{Config, Discovery};
use crate::project::ProjectFacts;
use crate::walk::{collect, Candidate};

fn parse_selectors(flag: &str, list: &[String]) -> Result<Vec<Selector>> {
    list.iter().map(|s| Selector::parse(s).with_context(|| format!("invalid `{flag}`"))).collect()
}

/// One file with the rules that apply to it.
struct Job {
    candidate: Candidate,
    rules: RuleSet,
    module: ModuleInfo,
    torch_minimum: Option<(u32, u32)>,
    torch_below: Option<(u32, u32)>,
}

/// The checked files and their rules, after configuration discovery.
struct Plan {
    jobs: Vec<Job>,
    fail_on: Severity,
}

fn plan(args: &CheckArgs, cwd: &Path) -> Result<Plan> {
    let cli_select = match &args.select {
        Some(s) => Some(parse_selectors("--select", s)?),
        None => None,
    };
    let cli_ignore = parse_selectors("--ignore", &args.ignore)?;
    let cli_extend = parse_selectors("--extend-select", &args.extend_select)?;

    let discovery = Discovery::default();
    let facts = ProjectFacts::default();
    let candidates = collect(&args.paths, args.stdin_filename.as_deref(), args.max_file_size)?;

    // Resolve each file's configuration first, so a broken config stops the
    // run before any output is written.
    let mut rule_sets: HashMap<Option<PathBuf>, RuleSet> = HashMap::new();
    let mut jobs = Vec::with_capacity(candidates.len());
    for c in candidates {
        let abs = cwd.join(&c.path);
        let dir = abs.parent().unwrap_or(cwd);
        let config = discovery.for_dir(dir)?;
        if let Some(cfg) = &config {
            if (!c.explicit || args.force_exclude) && cfg.is_excluded(&abs) {
                continue;
            }
        }
        let key = config.as_ref().map(|c| c.path.clone());
        let base = rule_sets
            .entry(key)
            .or_insert_with(|| selection(config.as_deref(), cli_select.as_deref(), &cli_extend, &cli_ignore))
            .clone();
        let mut rules = match &config {
            Some(cfg) => base.without(&cfg.ignores_for(&abs)),
            None => base,
        };
        if c.superseded {
            rules = rules.without(&[Selector::parse(memlint_linter::OBSOLETE_API_RULES).expect("ML4 names rules")]);
        }
        let mut module = facts.module_of(&abs);
        // Nothing imports a notebook: a name no Python module can have
        // keeps `train.ipynb` from taking `train.py`'s place.
        if is_notebook_path(&abs) {
            module.path.push_str("-ipynb");
        }
        let (torch_minimum, torch_below) = facts.torch_versions(dir);
        jobs.push(Job { candidate: c, rules, module, torch_minimum, torch_below });
    }

    // Two files with one module path (`a/train.py` and `b/train.py`, two
    // copies of a package) cannot both be what an import names: each gets
    // a path of its own that no import matches, so neither lends its facts
    // to the other's callers.
    let count = |jobs: &[Job]| {
        let mut seen: HashMap<String, usize> = HashMap::new();
        for j in jobs {
            *seen.entry(j.module.path.clone()).or_default() += 1;
        }
        seen
    };
    // A module of a directory without `__init__.py` (`model/tgn.py`, named
    // `tgn` as a script beside it imports it) that collides with another
    // (the package `tgn/__init__.py` above it) takes the name the
    // project's root imports it by (`from model.tgn import TGN`), when
    // that is free.
    let seen = count(&jobs);
    let free = |name: &str| !seen.contains_key(name);
    // Where the imports of each renamed Python module's importers start
    // (`b/` for `b/helpers.py` named `helpers`, `b/` for `b/pkg/m.py` named
    // `pkg.m`): its dotted name and new path, by that directory.
    let mut roots: HashMap<PathBuf, Vec<(String, String)>> = HashMap::new();
    let mut note = |j: &Job, old: &str, new: &str| {
        if j.module.crate_root.is_some() || is_notebook_path(&j.candidate.path) {
            return;
        }
        let up = old.split('.').count() + usize::from(j.module.is_package);
        if let Some(root) = cwd.join(&j.candidate.path).ancestors().nth(up) {
            roots.entry(root.to_path_buf()).or_default().push((old.to_string(), new.to_string()));
        }
    };
    let mut renamed = false;
    for j in &mut jobs {
        let (false, None, true) = (j.module.is_package, &j.module.crate_root, seen.get(&j.module.path).is_some_and(|n| *n > 1)) else { continue };
        if j.module.path.contains('.') {
            continue;
        }
        let abs = cwd.join(&j.candidate.path);
        let Some(dir) = abs.parent().filter(|d| !d.join("__init__.py").is_file()).and_then(|d| d.file_name()).and_then(|n| n.to_str()) else {
            continue;
        };
        let longer = format!("{dir}.{}", j.module.path);
        if free(&longer) {
            note(j, &j.module.path, &longer);
            j.module.renamed_from = Some(std::mem::replace(&mut j.module.path, longer));
            renamed = true;
        }
    }
    let seen = if renamed { count(&jobs) } else { seen };
    for j in &mut jobs {
        if seen.get(&j.module.path).is_some_and(|n| *n > 1) {
            let path = format!("<{}>", j.candidate.path.display());
            note(j, &j.module.path, &path);
            // A Rust file keeps `crate::` naming its own (renamed) path.
            let crate_root = j.module.crate_root.as_ref().map(|_| path.clone());
            let old = std::mem::replace(&mut j.module.path, path);
            j.module.crate_root = crate_root;
            j.module.renamed_from.get_or_insert(old);
        }
    }
    // Each Python file reaches the renamed modules of its own directory and
    // of those above it first, nearest first, as `sys.path` starting at a
    // script's directory finds them.
    if !roots.is_empty() {
        let roots: HashMap<PathBuf, Arc<[(String, String)]>> = roots.into_iter().map(|(d, list)| (d, list.into())).collect();
        for j in &mut jobs {
            if j.module.crate_root.is_some() {
                continue;
            }
            let abs = cwd.join(&j.candidate.path);
            j.module.nearby = abs.ancestors().skip(1).filter_map(|d| roots.get(d).cloned()).collect();
        }
    }
    let seen = count(&jobs);
    beside_in_packages(&mut jobs, &seen, cwd);

    let fail_on = match args.fail_on {
        Some(FailOn::Error) => Severity::Error,
        Some(FailOn::Warning) => Severity::Warning,
        Some(FailOn::Info) => Severity::Info,
        None => {
            // The configuration that applies to the first path decides.
            let first = args.paths.first().map(|p| cwd.join(p)).unwrap_or_else(|| cwd.to_path_buf());
            let dir = if first.is_dir() { first.as_path() } else { first.parent().unwrap_or(cwd) };
            discovery.for_dir(dir)?.and_then(|c| c.fail_on).unwrap_or(Severity::Warning)
        }
    };
    Ok(Plan { jobs, fail_on })
}

/// Modules of Python's standard library and of the libraries training
/// code imports most, which a package's module of the same name
/// (`pkg/logging.py`, `d2l/torch.py`) does not replace for the modules
/// beside it: package code imports them absolutely.
const SHADOWED_LIBRARIES: &[&str] = &[
    "abc", "argparse", "array", "ast", "asyncio", "base64", "bisect", "builtins", "calendar", "cmd", "code", "codecs",
    "collections", "concurrent", "configparser", "contextlib", "copy", "csv", "ctypes", "dataclasses", "datetime", "decimal",
    "difflib", "dis", "email", "enum", "errno", "fnmatch", "fractions", "functools", "gc", "getpass", "glob", "gzip",
    "hashlib", "heapq", "hmac", "html", "http", "importlib", "inspect", "io", "itertools", "json", "keyword", "locale",
    "logging", "lzma", "math", "mmap", "multiprocessing", "numbers", "operator", "os", "parser", "pathlib", "pickle",
    "platform", "pprint", "profile", "queue", "random", "re", "resource", "secrets", "select", "shutil", "signal", "site",
    "socket", "sqlite3", "ssl", "stat", "statistics", "string", "struct", "subprocess", "sys", "tarfile", "tempfile", "test",
    "textwrap", "threading", "time", "timeit", "token", "tokenize", "trace", "traceback", "types", "typing", "unittest",
    "urllib", "uuid", "warnings", "wave", "weakref", "xml", "zipfile", "zlib", "jax", "matplotlib", "mxnet", "numpy",
    "pandas", "scipy", "sklearn", "tensorflow", "torch", "torchvision", "transformers", "wandb", "yaml",
];

/// A script in a package's directory (`src/train.py` beside
/// `src/__init__.py`), run as `python train.py`, imports the modules beside
/// it by their bare names (`from model import Net` for `src/model.py`,
/// module `src.model`): `sys.path` starts at its directory. Each module of
/// a package reaches its siblings so, after the collided names of
/// [`plan`], when no module of the run has the bare name itself and the
/// name is not one of [`SHADOWED_LIBRARIES`].
fn beside_in_packages(jobs: &mut [Job], seen: &HashMap<String, usize>, cwd: &Path) {
    let mut beside: HashMap<PathBuf, Vec<(String, String)>> = HashMap::new();
    for j in jobs.iter() {
        if j.module.crate_root.is_some() || j.module.renamed_from.is_some() || is_notebook_path(&j.candidate.path) {
            continue;
        }
        let Some((_, name)) = j.module.path.rsplit_once('.') else { continue };
        // `d2l/torch.py`, a package's module named after the library it
        // wraps, or `utils/logging.py`: its own `import torch` (and its
        // siblings' `import logging`) is the library.
        if seen.contains_key(name) || SHADOWED_LIBRARIES.contains(&name) {
            continue;
        }
        // A package's `__init__.py` is its directory, beside the others
        // of the directory above.
        let abs = cwd.join(&j.candidate.path);
        let Some(dir) = abs.ancestors().nth(1 + usize::from(j.module.is_package)) else { continue };
        beside.entry(dir.to_path_buf()).or_default().push((name.to_string(), j.module.path.clone()));
    }
    if beside.is_empty() {
        return;
    }
    let beside: HashMap<PathBuf, Arc<[(String, String)]>> = beside.into_iter().map(|(d, list)| (d, list.into())).collect();
    for j in jobs.iter_mut() {
        if j.module.crate_root.is_some() || j.module.is_package || !j.module.path.contains('.') {
            continue;
        }
        let abs = cwd.join(&j.candidate.path);
        if let Some(list) = abs.parent().and_then(|d| beside.get(d)) {
            j.module.nearby.push(list.clone());
        }
    }
}

/// Where the rendered output goes.
fn emit(args: &CheckArgs, bytes: &[u8]) -> Result<()> {
    match &args.output_file {
        Some(path) => safe_io::write_output(path, bytes)
            .map_err(|e| anyhow::anyhow!("cannot write the report to {}: {e}", path.display())),
        None => {
            let mut out = io::stdout().lock();
            out.write_all(bytes)?;
            out.flush()?;
            Ok(())
        }
    }
}

fn renderer(args: &CheckArgs, jobs: &[Job]) -> Box<dyn Renderer> {
    let version = env!("CARGO_PKG_VERSION").to_string();
    match args.format {
        OutputFormat::Full => Box::new(FullRenderer {
            // A file gets colour only when asked for explicitly.
            color: match (&args.output_file, args.color) {
                (None, choice) => crate::use_color(choice),
                (Some(_), choice) => choice == crate::args::ColorChoice::Always,
            },
            quiet: args.quiet,
        }),
        OutputFormat::Concise => Box::new(ConciseRenderer { quiet: args.quiet }),
        OutputFormat::Grouped => Box::new(GroupedRenderer { quiet: args.quiet }),
        OutputFormat::Json => Box::new(JsonRenderer { tool_version: version }),
        OutputFormat::JsonLines => Box::new(JsonLinesRenderer),
        OutputFormat::Sarif => Box::new(SarifRenderer {
            tool_version: version,
            information_uri: env!("CARGO_PKG_REPOSITORY").to_string(),
            rules: crate::rule_infos(),
        }),
        OutputFormat::Github => Box::new(GithubRenderer),
        OutputFormat::Gitlab => Box::new(GitlabRenderer),
        OutputFormat::Junit => Box::new(JunitRenderer {
            checked_paths: jobs.iter().map(|j| j.candidate.path.display().to_string()).collect(),
        }),
    }
}

/// Runs `memlint check`: plans, checks, renders, fixes; returns the exit code.
pub fn run(args: &CheckArgs) -> Result<u8> {
    if args.unsafe_fixes && !args.fix && !args.diff {
        anyhow::bail!("`--unsafe-fixes` needs `--fix` or `--diff`");
    }
    if args.fix && args.paths.iter().any(|p| p.as_os_str() == "-") {
        anyhow::bail!("`--fix` cannot write standard input back: use `--diff` to see the fixes");
    }
    if args.stdin_filename.is_some() && !args.paths.iter().any(|p| p.as_os_str() == "-") {
        anyhow::bail!("`--stdin-filename` names standard input: give `-` among the paths");
    }
    let cwd = std::env::current_dir().context("cannot determine the current directory")?;
    // Output paths are checked before any work: a report that cannot be
    // written is known before the files are read.
    for (flag, path) in [("--output-file", &args.output_file), ("--write-baseline", &args.write_baseline)] {
        if let Some(path) = path {
            safe_io::check_output(path).map_err(|e| anyhow::anyhow!("{flag} {}: cannot write there: {e}", path.display()))?;
        }
    }
    let Plan { jobs, fail_on } = plan(args, &cwd)?;
    // A bad baseline stops the run before anything is checked or written.
    let mut baseline = match &args.baseline {
        Some(p) => Some(Baseline::load(&cwd, p)?),
        None => None,
    };

    let mode = if args.unsafe_fixes { FixMode::Unsafe } else { FixMode::Safe };
    let fixing = args.fix || args.diff;
    let (checked, index) = check_jobs(&jobs, fixing.then_some(mode), args.max_file_size);
    // Nothing reads the index any more, and the process ends once the
    // report is written: freeing its maps name by name would cost about
    // 10 ms on transformers for nothing.
    std::mem::forget(index);

    if fixing {
        return finish_fixes(args, &jobs, checked, baseline.as_mut(), fail_on, &cwd);
    }

    let mut files: Vec<FileReport> = checked.into_iter().map(|c| c.report).collect();
    files.sort_by(|a, b| a.file.path().cmp(b.file.path()));

    if let Some(path) = &args.write_baseline {
        let n = baseline::write(&cwd, path, &files)?;
        eprintln!("memlint: wrote {} to {}", plural(n, "finding"), path.display());
        return Ok(0);
    }
    if let (Some(b), Some(path)) = (baseline.as_mut(), &args.baseline) {
        let hidden = b.filter(&cwd, &mut files);
        note_baseline(args, b, hidden, path);
    }

    let report = Report { files, files_checked: jobs.len() };
    let mut buf = Vec::new();
    renderer(args, &jobs).render(&report, &mut buf)?;
    if let Some(hint) = fix_hint(args, &report) {
        buf.extend_from_slice(hint.as_bytes());
    }
    emit(args, &buf)?;

    let failing = report.diagnostics().any(|(_, d)| d.severity >= fail_on);
    Ok(if failing && !args.exit_zero { crate::EXIT_FINDINGS } else { 0 })
}

/// Checks the planned files: each file's summary (in parallel), joined into
/// the project index; then each file's rules with the index (in parallel).
/// The first segments of the names `job`'s module can be imported by:
/// its module path's, and for a Python file outside any package, the
/// directories above it (up to three, while they are identifiers): with
/// the project's root on `sys.path`, `util/util.py` is the namespace
/// package module `util.util` (PEP 420) as well as the script `util`.
fn module_roots(job: &Job) -> Vec<String> {
    let path = &job.module.path;
    let mut roots = vec![path.split('.').next().unwrap_or("").to_string()];
    let outside_packages = job.module.crate_root.is_none() && (!path.contains('.') || path.starts_with('<'));
    if outside_packages {
        let dirs = job.candidate.path.parent().into_iter().flat_map(Path::ancestors).take(3);
        for d in dirs {
            match d.file_name().and_then(|n| n.to_str()) {
                Some(n) if is_identifier(n) => roots.push(n.to_string()),
                _ => break,
            }
        }
    }
    roots
}

/// Whether `s` can be a Python module name.
fn is_identifier(s: &str) -> bool {
    s.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_') && s.chars().all(|c| c.is_alphanumeric() || c == '_')
}

fn check_jobs(jobs: &[Job], fix: Option<FixMode>, limit: u64) -> (Vec<Checked>, Arc<ProjectIndex>) {
    // Two phases over the files of the run: each file's summary (in
    // parallel), joined into the project index; then each file's rules
    // with the index (in parallel). The first phase keeps the parse of the
    // files the second will check, packed, up to `KEEP_PACKED_BYTES`; the
    // second reads their text again and unpacks it, and parses the rest
    // again.
    let roots: Arc<rustc_hash::FxHashSet<String>> = Arc::new(jobs.iter().flat_map(module_roots).collect());
    let budget = std::sync::atomic::AtomicUsize::new(KEEP_PACKED_BYTES);
    let phase_one: Vec<Option<PhaseOne>> = jobs.par_iter().map(|j| summarize_file(j, &roots, &budget, limit)).collect();
    let mut summaries = Vec::with_capacity(phase_one.len());
    let mut second: Vec<(&Job, Option<Kept>)> = Vec::with_capacity(jobs.len());
    // Files that import no torch themselves but star-import a module:
    // checked when that module imports torch (known once the index is built).
    let mut starred: Vec<&Job> = Vec::new();
    for (job, one) in jobs.iter().zip(phase_one) {
        match one {
            Some(one) => {
                if !one.nothing_to_report {
                    second.push((job, one.kept));
                } else if one.starred {
                    starred.push(job);
                }
                summaries.push(one.summary);
            }
            None => second.push((job, None)),
        }
    }
    let index = Arc::new(ProjectIndex::build(summaries));
    second.extend(starred.into_iter().filter(|j| index.star_imports_torch(&j.module.path)).map(|j| (j, None)));
    let checked: Vec<Checked> = second
        .into_par_iter()
        .filter_map(|(j, kept)| check_file(j, kept, fix, &index, &roots, limit))
        .collect();
    (checked, index)
}

/// The findings `memlint check ARGS` would report, as values (no output, no
/// baseline, no fixes): what [`crate::lint`] returns.
pub fn findings(args: &CheckArgs) -> Result<Vec<FileReport>> {
    let cwd = std::env::current_dir().context("cannot determine the current directory")?;
    let Plan { jobs, .. } = plan(args, &cwd)?;
    let mut files: Vec<FileReport> =
        check_jobs(&jobs, None, args.max_file_size).0.into_iter().map(|c| c.report).filter(|f| !f.diagnostics.is_empty()).collect();
    files.sort_by(|a, b| a.file.path().cmp(b.file.path()));
    Ok(files)
}

/// What [`fix`] did.
#[derive(Debug, Clone, Default)]
pub struct FixOutcome {
    /// Unified diff of every file changed (paths as memlint shows them).
    pub diff: String,
    /// Findings fixed.
    pub fixed: usize,
    /// Files written.
    pub files: usize,
    /// Findings of the selected rules left (no fix, or a fix refused).
    pub remaining: usize,
    /// Fixes not applied, with why.
    pub refused: Vec<String>,
}

/// Applies the fixes of the rules `args` selects to its files, as
/// `memlint check --fix` does (unsafe fixes too when `args.unsafe_fixes`),
/// and returns the diff instead of printing it. A file changed on disk
/// since it was read is left as it is and named in the error.
pub fn fix(args: &CheckArgs) -> Result<FixOutcome> {
    let cwd = std::env::current_dir().context("cannot determine the current directory")?;
    let Plan { jobs, .. } = plan(args, &cwd)?;
    let mode = if args.unsafe_fixes { FixMode::Unsafe } else { FixMode::Safe };
    let (mut checked, _) = check_jobs(&jobs, Some(mode), args.max_file_size);
    checked.sort_by(|a, b| a.report.file.path().cmp(b.report.file.path()));
    let mut out = FixOutcome::default();
    for c in checked {
        let path = c.report.file.path().to_string();
        let Some(fix) = c.fix else {
            out.remaining += c.report.diagnostics.len();
            continue;
        };
        out.refused.extend(fix.refused.iter().map(|r| format!("{path}:{}: {} fix not applied: {}", r.line, r.code, r.reason)));
        out.remaining += fix.remaining.len();
        let original = fix.notebook.as_ref().map_or(c.report.file.text(), |n| n.original.as_str());
        if fix.fixed == 0 || fix.text == original {
            continue;
        }
        let bytes = |text: &str| {
            let mut b = Vec::with_capacity(text.len() + 3);
            if c.bom {
                b.extend_from_slice("\u{feff}".as_bytes());
            }
            b.extend_from_slice(text.as_bytes());
            b
        };
        let (before, after) = (bytes(original), bytes(&fix.text));
        safe_io::replace_unchanged(&c.path, &before, &after)
            .map_err(|e| anyhow::anyhow!("{}: not written: {e} ({} file(s) fixed before it)", c.path.display(), out.files))?;
        let display = memlint_diagnostics::fingerprint::normalize_path(&path);
        let text_diff = similar::TextDiff::from_lines(original, fix.text.as_str());
        out.diff
            .push_str(&text_diff.unified_diff().context_radius(3).header(&format!("a/{display}"), &format!("b/{display}")).to_string());
        out.fixed += fix.fixed;
        out.files += 1;
    }
    Ok(out)
}

/// For the human formats: how many findings `--fix` (and `--unsafe-fixes`) would fix.
fn fix_hint(args: &CheckArgs, report: &Report) -> Option<String> {
    if args.quiet || !matches!(args.format, OutputFormat::Full | OutputFormat::Concise | OutputFormat::Grouped) {
        return None;
    }
    // Python source files and notebooks are rewritten.
    let count = |a: Applicability| {
        report
            .diagnostics()
            .filter(|(f, d)| is_fixable_file(Path::new(f.path())) && d.fix.as_ref().is_some_and(|x| x.applicability == a))
            .count()
    };
    let (safe, unsafe_) = (count(Applicability::Safe), count(Applicability::Unsafe));
    match (safe, unsafe_) {
        (0, 0) => None,
        (s, 0) => Some(format!("{s} fixable with `memlint check --fix`\n")),
        (0, u) => Some(format!("{u} fixable with `memlint check --fix --unsafe-fixes` (review them: they may change behaviour)\n")),
        (s, u) => Some(format!(
            "{s} fixable with `memlint check --fix`, {u} more with `--unsafe-fixes` (review them: they may change behaviour)\n"
        )),
    }
}

fn note_baseline(args: &CheckArgs, b: &Baseline, hidden: usize, path: &Path) {
    if args.quiet {
        return;
    }
    if hidden > 0 {
        eprintln!("memlint: {} in the baseline {} not shown", plural(hidden, "finding"), path.display());
    }
    let gone = b.unmatched();
    if gone > 0 {
        eprintln!(
            "memlint: {} of the baseline no longer found (re-write it with --write-baseline to drop them)",
            plural(gone, "finding")
        );
    }
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// `--fix` and `--diff`: write (or print) the fixed files, then report what remains.
fn finish_fixes(
    args: &CheckArgs,
    jobs: &[Job],
    mut checked: Vec<Checked>,
    baseline: Option<&mut Baseline>,
    fail_on: Severity,
    cwd: &Path,
) -> Result<u8> {
    checked.sort_by(|a, b| a.report.file.path().cmp(b.report.file.path()));
    let mut fixed_total = 0;
    let mut fixed_files = 0;
    let mut refused_total = 0;
    let mut diff = String::new();
    let mut files = Vec::new();
    let mut written = 0usize;
    let mut not_written: Vec<(PathBuf, safe_io::WriteError)> = Vec::new();
    for c in checked {
        let path = c.report.file.path().to_string();
        for r in &c.fix.as_ref().map(|f| f.refused.clone()).unwrap_or_default() {
            eprintln!("memlint: {path}:{}: {} fix not applied: {}", r.line, r.code, r.reason);
            refused_total += 1;
        }
        let Some(fix) = c.fix else {
            let fixable = c.report.diagnostics.iter().filter(|d| d.fix.is_some()).count();
            if fixable > 0 && !is_fixable_file(Path::new(&path)) {
                let fixes = if fixable == 1 { "1 fix".to_string() } else { format!("{fixable} fixes") };
                eprintln!("memlint: {path}: {fixes} not applied: only .py, .pyi and .ipynb files are fixed");
                refused_total += fixable;
            }
            if !c.report.diagnostics.is_empty() {
                files.push(c.report);
            }
            continue;
        };
        let original = fix.notebook.as_ref().map_or(c.report.file.text(), |n| n.original.as_str());
        if fix.fixed > 0 && fix.text != original {
            fixed_total += fix.fixed;
            fixed_files += 1;
            if args.diff {
                let text_diff = similar::TextDiff::from_lines(original, fix.text.as_str());
                let display = memlint_diagnostics::fingerprint::normalize_path(&path);
                diff.push_str(
                    &text_diff.unified_diff().context_radius(3).header(&format!("a/{display}"), &format!("b/{display}")).to_string(),
                );
            } else {
                // Written only while the file still holds what was read:
                // an edit made meanwhile (an editor, a formatter) is kept.
                let with_bom = |text: &str| {
                    let mut bytes = Vec::with_capacity(text.len() + 3);
                    if c.bom {
                        bytes.extend_from_slice("\u{feff}".as_bytes());
                    }
                    bytes.extend_from_slice(text.as_bytes());
                    bytes
                };
                if let Err(e) = safe_io::replace_unchanged(&c.path, &with_bom(original), &with_bom(&fix.text)) {
                    // Nothing of this file was fixed: its findings stand.
                    fixed_total -= fix.fixed;
                    fixed_files -= 1;
                    not_written.push((c.path, e));
                    files.push(c.report);
                    continue;
                }
                written += 1;
            }
        }
        if !fix.remaining.is_empty() {
            let file = match fix.notebook {
                Some(n) => n.file,
                None => SourceFile::new(path, fix.text),
            };
            files.push(FileReport { file: Arc::new(file), diagnostics: fix.remaining });
        }
    }
    if args.diff {
        emit(args, diff.as_bytes())?;
        if !args.quiet {
            eprintln!("memlint: would fix {} in {}", plural(fixed_total, "finding"), plural(fixed_files, "file"));
        }
        let code = if fixed_total > 0 || refused_total > 0 { crate::EXIT_FINDINGS } else { 0 };
        return Ok(if args.exit_zero { 0 } else { code });
    }
    if let (Some(b), Some(path)) = (baseline, &args.baseline) {
        let hidden = b.filter(cwd, &mut files);
        note_baseline(args, b, hidden, path);
    }
    files.sort_by(|a, b| a.file.path().cmp(b.file.path()));
    let report = Report { files, files_checked: jobs.len() };
    let mut buf = Vec::new();
    renderer(args, jobs).render(&report, &mut buf)?;
    emit(args, &buf)?;
    if !args.quiet {
        eprintln!(
            "memlint: fixed {} in {}, {} remaining",
            plural(fixed_total, "finding"),
            plural(fixed_files, "file"),
            report.len()
        );
    }
    if !not_written.is_empty() {
        // Every file is accounted for: those written, and each one not
        // written with the reason (it is as it was before the run).
        for (path, e) in &not_written {
            eprintln!("memlint: {}: not written: {e}", path.display());
        }
        eprintln!(
            "memlint: error: {} written, {} not written (unchanged on disk; their findings are reported above)",
            plural(written, "fixed file"),
            plural(not_written.len(), "file"),
        );
        return Ok(crate::EXIT_ERROR);
    }
    let failing = report.diagnostics().any(|(_, d)| d.severity >= fail_on);
    Ok(if failing && !args.exit_zero { crate::EXIT_FINDINGS } else { 0 })
}

/// The rules for one file (absolute path) from its configuration, and
/// whether the configuration excludes it; used by the language server.
pub fn rules_for(path: &Path) -> Result<(RuleSet, bool)> {
    let dir = path.parent().unwrap_or(path);
    let config = Discovery::default().for_dir(dir)?;
    let base = selection(config.as_deref(), None, &[], &[]);
    Ok(match &config {
        Some(cfg) => (base.without(&cfg.ignores_for(path)), cfg.is_excluded(path)),
        None => (base, false),
    })
}

/// The rules for a document with no path (an unsaved buffer): the defaults.
pub fn rules_for_unsaved() -> RuleSet {
    RuleSet::defaults()
}

/// The file's rules: the configuration's selection, then the command line's
/// on top. `--select` replaces the configuration's whole selection;
/// `--extend-select` and `--ignore` refine it.
fn selection(config: Option<&Config>, cli_select: Option<&[Selector]>, cli_extend: &[Selector], cli_ignore: &[Selector]) -> RuleSet {
    if let Some(select) = cli_select {
        return RuleSet::from_selection(Some(select), cli_extend, cli_ignore);
    }
    let base = match config {
        Some(c) => RuleSet::from_selection(c.select.as_deref(), &c.extend_select, &c.ignore),
        None => RuleSet::defaults(),
    };
    base.refine(cli_extend, cli_ignore)
}

/// The text of a file's bytes and whether it started with a UTF-8 BOM, or
/// why it cannot be checked as source text.
fn decode(bytes: Vec<u8>) -> Result<(String, bool), String> {
    if bytes.contains(&0) {
        return Err("binary file (contains NUL bytes)".to_string());
    }
    match String::from_utf8(bytes) {
        Ok(mut s) => {
            let bom = s.starts_with('\u{feff}');
            if bom {
                s.drain(..3);
            }
            Ok((s, bom))
        }
        Err(e) => Err(format!("not valid UTF-8 (invalid byte at offset {})", e.utf8_error().valid_up_to())),
    }
}


/// Whether `--fix` may rewrite the file: `.py` and `.pyi` only, and
/// standard input with no `--stdin-filename` (`-`, Python).
fn is_python_source(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "py" || e == "pyi") || path.as_os_str() == "-"
}

/// Files `--fix` rewrites: Python sources and notebooks.
fn is_fixable_file(path: &Path) -> bool {
    is_python_source(path) || is_notebook_path(path)
}

/// One checked file.
struct Checked {
    /// The file's path as it is on disk (the report shows it as text).
    path: PathBuf,
    report: FileReport,
    bom: bool,
    /// With `--fix`/`--diff`: the fixed text and what remains.
    fix: Option<FileFix>,
}

/// Checks one file (and fixes it in memory when `fix` is given); `None`
/// when it has no diagnostics (its text is then dropped without indexing
/// its lines).
/// The candidate's text: standard input as read, else the file's.
fn read_candidate(c: &Candidate, limit: u64) -> Result<(String, bool), String> {
    match &c.stdin {
        Some(bytes) => decode(bytes.as_ref().clone()).map_err(|e| format!("cannot check standard input: {e}")),
        None => read_source(&c.path, limit),
    }
}

/// The file's text (and whether it had a UTF-8 BOM), or why it cannot be
/// checked: only regular files of at most `limit` bytes are read.
fn read_source(path: &Path, limit: u64) -> Result<(String, bool), String> {
    match safe_io::read_regular(path, limit) {
        Ok(bytes) => decode(bytes).map_err(|e| format!("cannot check file: {e}")),
        Err(e @ safe_io::ReadError::TooLarge { .. }) => {
            Err(format!("cannot check file: {e} (raise it with `--max-file-size`)"))
        }
        Err(e) => Err(format!("cannot read file: {e}")),
    }
}

/// Packed bytes of the parses the first phase keeps for the second, so
/// that those files are parsed once. A packed parse takes 0.45 bytes per
/// byte of source on transformers 4.57.1 (15.4 MB for its 34.5 MB of
/// torch-importing source; dense code without docstrings takes about one),
/// and packing, unpacking, freeing and reading the text again cost about
/// half of parsing again (0.24 s against 0.53 s of CPU on transformers);
/// past this budget, files are parsed twice. Kept unpacked, the same parses took 7.4 bytes of
/// peak RSS per byte of source.
const KEEP_PACKED_BYTES: usize = 64 << 20;

/// What the first phase keeps of a file for the second: its parse,
/// packed, and a hash of its text. The text is read again (from the page
/// cache: cheaper than keeping it); a file whose text changed in between
/// is parsed again, so the findings always belong to the text reported.
struct Kept {
    packed: memlint_linter::frontend::PackedParse,
    text_hash: u64,
}

/// A hash of a file's text, to tell that a second read gave the same text.
fn text_hash(text: &str) -> u64 {
    use std::hash::Hasher;
    let mut h = rustc_hash::FxHasher::default();
    h.write(text.as_bytes());
    h.write_usize(text.len());
    h.finish()
}

/// The first phase's result for one file.
struct PhaseOne {
    summary: memlint_linter::FileSummary,
    nothing_to_report: bool,
    /// Nothing to report as far as the file shows, but it star-imports a
    /// module (`from module import *`) that may bring torch.
    starred: bool,
    kept: Option<Kept>,
}

/// The first phase: what the file contributes to the project index
/// (`None` for a file that cannot be read; the second phase reports it),
/// and, while `budget` (packed bytes) lasts, the file's packed parse for
/// the second phase.
fn summarize_file(
    job: &Job,
    roots: &Arc<rustc_hash::FxHashSet<String>>,
    budget: &std::sync::atomic::AtomicUsize,
    limit: u64,
) -> Option<PhaseOne> {
    use std::sync::atomic::Ordering;
    let path = &job.candidate.path;
    if job.candidate.error.is_some() {
        return None;
    }
    let (text, _) = read_candidate(&job.candidate, limit).ok()?;
    // A notebook's cells are one module: its functions join the index, so
    // its own calls of them resolve as a script's do (nothing imports it).
    if is_notebook_path(path) {
        let module = memlint_linter::notebook::notebook_module(&text)?;
        let file = FileContext { module: job.module.clone(), project_roots: roots.clone(), ..FileContext::default() };
        let one = summarize_source(&module, &file, is_test_file(path, &text));
        // Checked whatever the module imports: its `%%writefile` cells are
        // modules of their own, left out of this one.
        return Some(PhaseOne { summary: one.summary, nothing_to_report: false, starred: false, kept: None });
    }
    let file = FileContext {
        language: memlint_linter::frontend::language_of(path),
        module: job.module.clone(),
        project_roots: roots.clone(),
        ..FileContext::default()
    };
    let one = summarize_source(&text, &file, is_test_file(path, &text));
    let nothing_to_report = one.nothing_to_report || memlint_linter::is_frozen_code(&job.module, &text);
    // Once what is left of the budget is under a quarter of the file's
    // text, its packed parse would almost never fit (they take 0.45 of
    // the text on transformers): it is not packed only to be dropped.
    let kept = if nothing_to_report || budget.load(Ordering::Relaxed) < text.len() / 4 {
        None
    } else {
        let packed = one.parsed.pack();
        budget
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| left.checked_sub(packed.size()))
            .is_ok()
            .then(|| Kept { packed, text_hash: text_hash(&text) })
    };
    let starred = one.nothing_to_report
        && !one.summary.imports_torch
        && one.summary.imports.iter().any(|(local, _)| local == "*")
        && !memlint_linter::is_frozen_code(&job.module, &text);
    Some(PhaseOne { summary: one.summary, nothing_to_report, starred, kept })
}

/// Checks a notebook's JSON text: its code cells as one module, findings
/// located by cell (see `memlint_linter::notebook`), and fixes its cells
/// when `fix` is given.
fn check_notebook(job: &Job, display: String, json: &str, bom: bool, fix: Option<FixMode>, context: &FileContext) -> Option<Checked> {
    let options = LintOptions { rules: job.rules.clone(), is_test_file: is_test_file(&job.candidate.path, json), module: Some(job.module.path.clone()) };
    let (file, diagnostics) = lint_notebook_in(json, &options, Some(context)).into_source_file(display.clone());
    let fixed = match fix {
        Some(mode) if !diagnostics.is_empty() => {
            Some(memlint_linter::fix_loop::fix_notebook(json, &display, &options, Some(context), mode))
        }
        _ => None,
    };
    (!diagnostics.is_empty())
        .then(|| Checked { path: job.candidate.path.clone(), report: FileReport { file: Arc::new(file), diagnostics }, bom, fix: fixed })
}

fn check_file(
    job: &Job,
    kept: Option<Kept>,
    fix: Option<FixMode>,
    index: &Arc<ProjectIndex>,
    roots: &Arc<rustc_hash::FxHashSet<String>>,
    limit: u64,
) -> Option<Checked> {
    let path = &job.candidate.path;
    let display = path.display().to_string();
    let (text, parsed) = match &job.candidate.error {
        Some(error) => (Err(error.clone()), None),
        None => {
            let text = read_candidate(&job.candidate, limit);
            let parsed = match (&text, kept) {
                (Ok((t, _)), Some(k)) if text_hash(t) == k.text_hash => k.packed.unpack(),
                _ => None,
            };
            (text, parsed)
        }
    };
    let (text, bom, diagnostics, fixed) = match text {
        Ok((text, bom)) => {
            let options = LintOptions { rules: job.rules.clone(), is_test_file: is_test_file(path, &text), module: None };
            let file = FileContext {
                language: memlint_linter::frontend::language_of(path),
                module: job.module.clone(),
                index: index.clone(),
                torch_minimum: job.torch_minimum,
                torch_below: job.torch_below,
                project_roots: roots.clone(),
            };
            if is_notebook_path(path) {
                return check_notebook(job, display, &text, bom, fix, &file);
            }
            let diagnostics = match &parsed {
                Some(p) => lint_parsed(&text, p, &options, &file),
                None => lint_file(&text, &options, &file),
            };
            let fixed = match fix {
                // Notebooks are fixed by `check_notebook`; other files are not.
                Some(mode) if !diagnostics.is_empty() && is_python_source(path) => {
                    Some(fix_text_with(&text, diagnostics.clone(), &|t: &str| lint_file(t, &options, &file), mode))
                }
                _ => None,
            };
            (text, bom, diagnostics, fixed)
        }
        Err(reason) => {
            let mut diagnostics = Vec::new();
            if job.rules.contains(PARSE_ERROR.code) {
                diagnostics.push(
                    PARSE_ERROR
                        .diagnostic(Span::new(0, 0), reason)
                        .with_help("make the file readable UTF-8 text, or exclude it in the configuration"),
                );
            }
            (String::new(), false, diagnostics, None)
        }
    };
    (!diagnostics.is_empty()).then(|| Checked {
        path: path.clone(),
        report: FileReport { file: Arc::new(SourceFile::new(display, text)), diagnostics },
        bom,
        fix: fixed,
    })
}
