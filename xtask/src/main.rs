//! Project automation. `cargo xtask generate` writes `docs/rules/*.md` from the
//! rules' doc comments; `cargo xtask generate --check` fails when they are stale.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use memlint_linter::docs::{rule_markdown, rules_index};
use memlint_linter::registry::all_metas;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("generate") => generate(args.iter().any(|a| a == "--check")),
        _ => bail!("usage: cargo xtask generate [--check]"),
    }
}

fn generate(check: bool) -> Result<()> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/rules");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let metas = all_metas();
    let mut pages: Vec<(PathBuf, String)> =
        metas.iter().map(|m| (dir.join(format!("{}.md", m.code)), rule_markdown(m))).collect();
    pages.push((dir.join("README.md"), rules_index(&metas)));
    let mut stale = Vec::new();
    for (path, content) in pages {
        let current = std::fs::read_to_string(&path).unwrap_or_default();
        if current == content {
            continue;
        }
        if check {
            stale.push(path.display().to_string());
        } else {
            std::fs::write(&path, content).with_context(|| format!("writing {}", path.display()))?;
            println!("wrote {}", path.display());
        }
    }
    if !stale.is_empty() {
        bail!("generated docs are stale (run `cargo xtask generate`): {}", stale.join(", "));
    }
    Ok(())
}
