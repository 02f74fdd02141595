//! memlint as a library: the `memlint` command line's parts (argument
//! parsing, configuration discovery, the file walk, the renderers, the
//! language server) and [`lint`], the entry point for programs that want the
//! findings of a directory or file as values (memprobe's `run --lint`). All
//! analysis lives in `memlint_linter`.

// clap derives its help text from doc comments: the argument types carry
// the help their users read, not API documentation.
#[allow(missing_docs)]
pub mod args;
mod baseline;
pub mod check;
mod config;
mod fsutil;
mod project;
pub mod server;
mod transport;
mod walk;

use std::io::{self, IsTerminal};
use std::path::PathBuf;

use memlint_linter::docs::rule_doc;
use memlint_linter::registry::all_metas;

pub use memlint_diagnostics::{Diagnostic, FileReport, Severity};

use args::ColorChoice;

/// Exit status for findings at or above the fail level.
pub const EXIT_FINDINGS: u8 = 1;
/// Exit status for usage and configuration errors.
pub const EXIT_ERROR: u8 = 2;

/// The stack of every thread that parses, lowers or walks a file. The
/// walks recurse once per level of nesting, which lowering bounds
/// (`memlint_python::MAX_NESTING`); this is room for that bound with a
/// wide margin (it is address space: only the pages used are memory).
pub const WORKER_STACK: usize = 256 << 20;

/// The documentation page of a rule.
pub fn rule_uri(code: &str) -> String {
    format!("{}/blob/main/docs/rules/{code}.md", env!("CARGO_PKG_REPOSITORY"))
}

/// Every rule as machine formats describe it.
pub fn rule_infos() -> Vec<memlint_diagnostics::RuleInfo> {
    all_metas()
        .into_iter()
        .map(|m| {
            memlint_diagnostics::RuleInfo::from_doc(
                m.code,
                m.name,
                m.severity,
                m.default_enabled,
                &rule_doc(m),
                rule_uri(m.code),
            )
        })
        .collect()
}

/// Whether to colour output written to stdout.
pub fn use_color(choice: ColorChoice) -> bool {
    match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => {
            std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) && io::stdout().is_terminal()
        }
    }
}

/// The arguments of `memlint check FLAGS --select SELECT -- PATHS`.
fn check_args(flags: &[&str], paths: &[PathBuf], select: &[&str]) -> anyhow::Result<args::CheckArgs> {
    use clap::Parser;
    let mut argv: Vec<std::ffi::OsString> = vec!["memlint".into(), "check".into()];
    argv.extend(flags.iter().map(|f| f.into()));
    if !select.is_empty() {
        argv.push("--select".into());
        argv.push(select.join(",").into());
    }
    argv.push("--".into());
    argv.extend(paths.iter().map(|p| p.clone().into_os_string()));
    match args::Cli::try_parse_from(argv).map_err(|e| anyhow::anyhow!("{e}"))?.command {
        args::Command::Check(a) => Ok(a),
        _ => unreachable!("the argument list above is a check"),
    }
}

/// The findings of memlint's rules on `paths` (files or directories,
/// walked as `memlint check` walks them, with the configuration files it
/// would read), restricted to the rules `select` names (codes or prefixes,
/// as `--select`; all default rules when empty). Files in the order of
/// their paths; a file without findings is left out.
pub fn lint(paths: &[PathBuf], select: &[&str]) -> anyhow::Result<Vec<FileReport>> {
    let args = check_args(&[], paths, select)?;
    in_worker_pool(|| check::findings(&args))
}

/// Runs `f` in a thread pool of its own whose threads have
/// [`WORKER_STACK`], as the `memlint` binary's global pool has: the checks
/// recurse once per level of nesting, more than a default thread stack
/// holds on deeply nested input.
fn in_worker_pool<T: Send>(f: impl FnOnce() -> anyhow::Result<T> + Send) -> anyhow::Result<T> {
    let pool = rayon::ThreadPoolBuilder::new()
        .stack_size(WORKER_STACK)
        .build()
        .map_err(|e| anyhow::anyhow!("starting memlint's worker threads: {e}"))?;
    pool.install(f)
}

/// Applies the fixes of the rules `select` names (unsafe fixes too when
/// `unsafe_fixes`) to the files under `paths`, as `memlint check --fix`
/// does, and returns what changed.
pub fn fix(paths: &[PathBuf], select: &[&str], unsafe_fixes: bool) -> anyhow::Result<check::FixOutcome> {
    let flags: &[&str] = if unsafe_fixes { &["--fix", "--unsafe-fixes"] } else { &["--fix"] };
    let args = check_args(flags, paths, select)?;
    in_worker_pool(|| check::fix(&args))
}
