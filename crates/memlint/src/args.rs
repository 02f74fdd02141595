//! Command-line arguments.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Finds GPU memory and throughput hazards in PyTorch training code.
#[derive(Debug, Parser)]
#[command(name = "memlint", version, about, arg_required_else_help = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check files and directories (default: the current directory).
    ///
    /// Directories are walked in parallel for Python files (`.py`, `.pyi`) and
    /// Jupyter notebooks (`.ipynb`), honouring .gitignore and skipping hidden
    /// directories (`.ipynb_checkpoints` among them), virtualenvs and build
    /// directories unless they are given explicitly. A notebook is checked as
    /// one module of its code cells; findings are located by cell
    /// (`nb.ipynb:cell 3:4:9`). Configuration comes from the closest `memlint.toml`
    /// or `[tool.memlint]` in `pyproject.toml` above each file; flags override it.
    ///
    /// Exit status: 0 when nothing at or above the fail level was found,
    /// 1 when something was, 2 on a usage error or a bad configuration or
    /// baseline file (the message names the file).
    ///
    /// With `--fix`, the fixes are applied in place and the findings that
    /// remain are reported; with `--diff`, the fixes are printed as a unified
    /// diff, nothing is written, and the exit status is 1 when there is
    /// something to fix.
    Check(CheckArgs),
    /// Print the documentation of one rule (by code or name, e.g. ML201).
    Rule {
        /// Rule code (`ML201`) or name (`eval-without-no-grad`).
        code: String,
    },
    /// List every rule: code, name, severity, whether it is on by default, languages.
    Rules,
    /// Run the language server over stdio (diagnostics as you type, fixes as code actions).
    ///
    /// Editors start it as `memlint server`; see docs/editors.md. Each file is
    /// checked with the configuration discovered for its path.
    Server,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// Source frames with the span underlined, help lines and a summary.
    Full,
    /// One line per finding.
    Concise,
    /// Findings grouped under each file's path.
    Grouped,
    /// The machine-readable contract (schema_version 1).
    Json,
    /// One JSON object per finding per line (the `json` format's diagnostics).
    JsonLines,
    /// SARIF 2.1.0, for GitHub code scanning and other SARIF viewers.
    Sarif,
    /// GitHub Actions annotations (`::warning file=...::message`).
    Github,
    /// GitLab Code Quality report (JSON).
    Gitlab,
    /// JUnit XML: one test case per checked file.
    Junit,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FailOn {
    /// Fail only on errors.
    Error,
    /// Fail on warnings and errors.
    Warning,
    /// Fail on any finding.
    Info,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    /// Colour when stdout is a terminal and NO_COLOR is unset.
    Auto,
    /// Always colour.
    Always,
    /// Never colour.
    Never,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Files or directories to check.
    #[arg(default_value = ".")]
    pub paths: Vec<PathBuf>,
    /// Rules to enable instead of the defaults: codes, prefixes (ML2), names or ALL. Comma-separated or repeated.
    #[arg(long, value_delimiter = ',', value_name = "RULES")]
    pub select: Option<Vec<String>>,
    /// Rules to disable: codes, prefixes, names or ALL.
    #[arg(long, value_delimiter = ',', value_name = "RULES")]
    pub ignore: Vec<String>,
    /// Rules to enable on top of the selection (e.g. off-by-default info rules).
    #[arg(long, value_delimiter = ',', value_name = "RULES")]
    pub extend_select: Vec<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Full)]
    pub format: OutputFormat,
    /// Lowest severity that makes the exit status 1 [default: warning, or `fail-on` from the configuration].
    #[arg(long, value_enum)]
    pub fail_on: Option<FailOn>,
    /// Exit with status 0 even when findings were reported.
    #[arg(long)]
    pub exit_zero: bool,
    /// Print the findings only, no summary line.
    #[arg(long, short)]
    pub quiet: bool,
    /// When to use colour in the full format.
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,
    /// Write the output to PATH instead of stdout. A regular file is
    /// replaced atomically (a reader never sees a half-written file) and
    /// keeps its mode and owner; `-` is stdout; a device or FIFO
    /// (`/dev/null`, a named pipe) is written, never replaced. The path is
    /// checked before any file is.
    #[arg(long, short, value_name = "PATH")]
    pub output_file: Option<PathBuf>,
    /// The name to check standard input (`-`) as: its configuration, its
    /// kind (`.ipynb` is a notebook), whether it is a test file, and the
    /// path findings show. It need not exist.
    #[arg(long, value_name = "PATH")]
    pub stdin_filename: Option<PathBuf>,
    /// Files larger than this are not read: each is reported as ML000.
    /// Bytes, or with a unit: 512K, 64M, 1G.
    #[arg(long, value_name = "SIZE", default_value = "64M", value_parser = parse_size)]
    pub max_file_size: u64,
    /// Report only findings that are not in this baseline file (written by `--write-baseline`).
    #[arg(long, value_name = "FILE", conflicts_with = "write_baseline")]
    pub baseline: Option<PathBuf>,
    /// Record the current findings in FILE, print nothing else and exit 0;
    /// later runs with `--baseline FILE` report only new findings.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["fix", "diff"])]
    pub write_baseline: Option<PathBuf>,
    /// Apply the safe fixes in place, then report what remains.
    #[arg(long, conflicts_with = "diff")]
    pub fix: bool,
    /// With `--fix` or `--diff`, also apply the unsafe fixes (they may change behaviour: review them).
    #[arg(long)]
    pub unsafe_fixes: bool,
    /// Print the fixes as a unified diff and write nothing (exit 1 when there is something to fix).
    #[arg(long)]
    pub diff: bool,
    /// Apply the configuration's `exclude` to files named on the command line too
    /// (for pre-commit and editors, which pass every file explicitly).
    #[arg(long)]
    pub force_exclude: bool,
}

/// A size on the command line: bytes, or a number with `K`, `M` or `G`
/// (powers of 1024; `KiB`, `MiB`, `GiB` and `B` are accepted too).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, unit) = t.split_at(digits);
    let n: u64 = number.parse().map_err(|_| format!("`{text}` is not a size (bytes, or a number with K, M or G)"))?;
    let shift = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        u => return Err(format!("unknown size unit `{u}` (use K, M or G)")),
    };
    n.checked_mul(1 << shift).ok_or_else(|| format!("`{text}` is too large"))
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("64M"), Ok(64 << 20));
        assert_eq!(parse_size("512k"), Ok(512 << 10));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("100"), Ok(100));
        assert!(parse_size("ten").is_err());
        assert!(parse_size("5T").is_err());
    }
}
