//! `memlint check`.

use std::collections::HashMap;
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use memlint_diagnostics::render::{ConciseRenderer, FullRenderer, JsonRenderer, Renderer};
use memlint_diagnostics::{FileReport, Report, Severity, SourceFile, Span};
use memlint_linter::notebook::{is_notebook_path, lint_notebook};
use memlint_linter::{
    is_test_path, lint_file, summarize_source, FileContext, LintOptions, ModuleInfo, ProjectIndex, RuleSet, Selector,
    PARSE_ERROR,
};
use rayon::prelude::*;

use crate::args::{CheckArgs, FailOn, OutputFormat};
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
}

pub fn run(args: &CheckArgs) -> Result<u8> {
    let cli_select = match &args.select {
        Some(s) => Some(parse_selectors("--select", s)?),
        None => None,
    };
    let cli_ignore = parse_selectors("--ignore", &args.ignore)?;
    let cli_extend = parse_selectors("--extend-select", &args.extend_select)?;

    let cwd = std::env::current_dir().context("cannot determine the current directory")?;
    let discovery = Discovery::default();
    let facts = ProjectFacts::default();
    let candidates = collect(&args.paths)?;

    // Resolve each file's configuration first, so a broken config stops the
    // run before any output is written.
    let mut rule_sets: HashMap<Option<PathBuf>, RuleSet> = HashMap::new();
    let mut jobs = Vec::with_capacity(candidates.len());
    for c in candidates {
        let abs = cwd.join(&c.path);
        let dir = abs.parent().unwrap_or(&cwd);
        let config = discovery.for_dir(dir)?;
        if let Some(cfg) = &config {
            if !c.explicit && cfg.is_excluded(&abs) {
                continue;
            }
        }
        let key = config.as_ref().map(|c| c.path.clone());
        let base = rule_sets
            .entry(key)
            .or_insert_with(|| selection(config.as_deref(), cli_select.as_deref(), &cli_extend, &cli_ignore))
            .clone();
        let rules = match &config {
            Some(cfg) => base.without(&cfg.ignores_for(&abs)),
            None => base,
        };
        let module = facts.module_of(&abs);
        let torch_minimum = facts.torch_minimum(dir);
        jobs.push(Job { candidate: c, rules, module, torch_minimum });
    }

    let fail_on = match args.fail_on {
        Some(FailOn::Error) => Severity::Error,
        Some(FailOn::Warning) => Severity::Warning,
        Some(FailOn::Info) => Severity::Info,
        None => {
            // The configuration that applies to the first path decides.
            let first = args.paths.first().map(|p| cwd.join(p)).unwrap_or_else(|| cwd.clone());
            let dir = if first.is_dir() { first.as_path() } else { first.parent().unwrap_or(&cwd) };
            discovery.for_dir(dir)?.and_then(|c| c.fail_on).unwrap_or(Severity::Warning)
        }
    };

    // Two phases over the files of the run: each file's summary (in
    // parallel), joined into the project index; then each file's rules
    // with the index (in parallel). Files are read and parsed in both
    // phases rather than kept in memory between them.
    let roots: Arc<rustc_hash::FxHashSet<String>> =
        Arc::new(jobs.iter().map(|j| j.module.path.split('.').next().unwrap_or("").to_string()).collect());
    let phase_one: Vec<Option<memlint_linter::Summarized>> = jobs.par_iter().map(|j| summarize_file(j, &roots)).collect();
    let skip: Vec<bool> = phase_one.iter().map(|s| s.as_ref().is_some_and(|s| s.nothing_to_report)).collect();
    let index = Arc::new(ProjectIndex::build(phase_one.into_iter().flatten().map(|s| s.summary).collect()));
    let mut files: Vec<FileReport> = jobs
        .par_iter()
        .zip(skip.par_iter())
        .filter(|(_, skip)| !**skip)
        .filter_map(|(j, _)| check_file(j, &index, &roots))
        .collect();
    files.sort_by(|a, b| a.file.path().cmp(b.file.path()));
    let report = Report { files, files_checked: jobs.len() };

    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let renderer: Box<dyn Renderer> = match args.format {
        OutputFormat::Full => Box::new(FullRenderer { color: crate::use_color(args.color), quiet: args.quiet }),
        OutputFormat::Concise => Box::new(ConciseRenderer { quiet: args.quiet }),
        OutputFormat::Json => Box::new(JsonRenderer { tool_version: env!("CARGO_PKG_VERSION").to_string() }),
    };
    renderer.render(&report, &mut out)?;
    out.flush()?;

    let failing = report.diagnostics().any(|(_, d)| d.severity >= fail_on);
    Ok(if failing && !args.exit_zero { crate::EXIT_FINDINGS } else { 0 })
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

/// Why a file's bytes cannot be checked as source text.
fn decode(bytes: Vec<u8>) -> Result<String, String> {
    if bytes.contains(&0) {
        return Err("binary file (contains NUL bytes)".to_string());
    }
    match String::from_utf8(bytes) {
        Ok(mut s) => {
            if s.starts_with('\u{feff}') {
                s.drain(..3);
            }
            Ok(s)
        }
        Err(e) => Err(format!("not valid UTF-8 (invalid byte at offset {})", e.utf8_error().valid_up_to())),
    }
}

/// The file's text, or why it cannot be checked.
fn read_source(path: &std::path::Path) -> Result<String, String> {
    std::fs::read(path)
        .map_err(|e| format!("cannot read file: {e}"))
        .and_then(|b| decode(b).map_err(|e| format!("cannot check file: {e}")))
}

/// The first phase: what the file contributes to the project index
/// (`None` for a file that cannot be read; the second phase reports it).
fn summarize_file(job: &Job, roots: &Arc<rustc_hash::FxHashSet<String>>) -> Option<memlint_linter::Summarized> {
    let path = &job.candidate.path;
    // A notebook is its own program: nothing imports it.
    if is_notebook_path(path) {
        return None;
    }
    let text = read_source(path).ok()?;
    let file = FileContext { module: job.module.clone(), project_roots: roots.clone(), ..FileContext::default() };
    Some(summarize_source(&text, &file, is_test_path(path)))
}

/// Checks one file; `None` when it has no diagnostics (its text is then
/// dropped without indexing its lines).
fn check_file(job: &Job, index: &Arc<ProjectIndex>, roots: &Arc<rustc_hash::FxHashSet<String>>) -> Option<FileReport> {
    let path = &job.candidate.path;
    let display = path.display().to_string();
    let text = read_source(path);
    let (text, diagnostics) = match text {
        Ok(text) if is_notebook_path(path) => return check_notebook(job, display, &text),
        Ok(text) => {
            let options = LintOptions { rules: job.rules.clone(), is_test_file: is_test_path(path) };
            let file = FileContext {
                module: job.module.clone(),
                index: index.clone(),
                torch_minimum: job.torch_minimum,
                project_roots: roots.clone(),
            };
            let diagnostics = lint_file(&text, &options, &file);
            (text, diagnostics)
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
            (String::new(), diagnostics)
        }
    };
    (!diagnostics.is_empty()).then(|| FileReport { file: Arc::new(SourceFile::new(display, text)), diagnostics })
}

/// Checks a notebook's JSON text: its code cells as one module, findings
/// located by cell (see `memlint_linter::notebook`).
fn check_notebook(job: &Job, display: String, json: &str) -> Option<FileReport> {
    let options = LintOptions { rules: job.rules.clone(), is_test_file: is_test_path(&job.candidate.path) };
    let (file, diagnostics) = lint_notebook(json, &options).into_source_file(display);
    (!diagnostics.is_empty()).then(|| FileReport { file: Arc::new(file), diagnostics })
}
