//! The `memlint` command line: argument parsing, configuration discovery,
//! the file walk, the choice of renderer and the exit code (the `memlint`
//! library crate). All analysis lives in `memlint_linter`.

use std::io::{self, Write};
use std::process::ExitCode;

use clap::Parser;
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use memlint::args::{Cli, Command};
use memlint::{check, server, EXIT_ERROR, WORKER_STACK};
use memlint_linter::docs::rule_doc;
use memlint_linter::registry::{all_metas, rule_by_code};

// The analysis allocates many small, short-lived values (IR nodes, names):
// mimalloc serves them in about half the time of the system allocator
// (transformers: 10.2 s of CPU with glibc's malloc, 5.6 s with mimalloc),
// for about 60 MiB more peak RSS.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

// mimalloc commits its first arena (1 GiB reserved) eagerly on systems
// that overcommit, and then keeps what a phase freed out of reach of the
// next: peak RSS on transformers is 206 MiB that way, 147 MiB with commits
// on demand, for about 2% more CPU. The option is read when the allocator
// initialises, before `main` (a constructor of priority 101), so it is set
// from a constructor that runs before that one; `MIMALLOC_ARENA_EAGER_COMMIT`
// in the environment no longer overrides it.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
#[used]
#[link_section = ".init_array.00099"]
static ALLOCATOR_OPTIONS: extern "C" fn() = allocator_options;

// Freed pages go back to the system after 5 ms instead of mimalloc's
// default 10: the summaries of phase one and the parses of phase two come
// and go in waves, and a page kept a little longer is counted in the peak.
// Peak RSS on transformers: about 190 MiB at 10 ms, 174 MiB at 5 ms, for
// about 2% more wall time (`scripts/bench-memlint.sh`).
#[cfg(target_os = "linux")]
extern "C" fn allocator_options() {
    /// `mi_option_arena_eager_commit` in mimalloc 3's `mi_option_e`.
    const ARENA_EAGER_COMMIT: libmimalloc_sys::mi_option_t = 4;
    /// `mi_option_purge_delay` (milliseconds) in mimalloc 3's `mi_option_e`.
    const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
    // SAFETY: sets two integers of mimalloc's option table; nothing else
    // runs yet.
    #[allow(unsafe_code)]
    unsafe {
        libmimalloc_sys::mi_option_set(ARENA_EAGER_COMMIT, 0);
        libmimalloc_sys::mi_option_set(PURGE_DELAY, 5);
    }
}

fn main() -> ExitCode {
    // rayon's threads (the file walk's are separate) check the files.
    // A failure here leaves rayon's default pool, which still works.
    let _ = rayon::ThreadPoolBuilder::new().stack_size(WORKER_STACK).build_global();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Check(args) => check::run(&args),
        Command::Rule { code } => print_rule(&code),
        Command::Rules => print_rules(),
        Command::Server => server::run(),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            // A closed pipe (`memlint check | head`) is not an error.
            if err.chain().any(|c| c.downcast_ref::<io::Error>().is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)) {
                return ExitCode::SUCCESS;
            }
            eprintln!("memlint: error: {err:#}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}

fn print_rule(code: &str) -> anyhow::Result<u8> {
    let Some(meta) = rule_by_code(code) else {
        anyhow::bail!("unknown rule `{code}` (see `memlint rules`)");
    };
    let langs: Vec<&str> = meta.languages.iter().map(|l| l.short()).collect();
    let mut out = io::stdout().lock();
    writeln!(
        out,
        "# {} {}\n\nSeverity: {} · Default: {} · Languages: {}\n\n{}",
        meta.code,
        meta.name,
        meta.severity,
        if meta.default_enabled { "on" } else { "off" },
        langs.join(", "),
        rule_doc(meta)
    )?;
    Ok(0)
}

fn print_rules() -> anyhow::Result<u8> {
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED);
    table.set_header(vec!["code", "name", "severity", "default", "languages"]);
    for m in all_metas() {
        let langs: Vec<&str> = m.languages.iter().map(|l| l.short()).collect();
        table.add_row(vec![
            m.code.to_string(),
            m.name.to_string(),
            m.severity.to_string(),
            if m.default_enabled { "on".into() } else { "off".into() },
            langs.join(" "),
        ]);
    }
    writeln!(io::stdout().lock(), "{table}")?;
    Ok(0)
}
