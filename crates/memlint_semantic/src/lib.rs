//! The language-neutral semantic model of a training program.
//!
//! Frontends (Python via `ruff_python_parser`, later Rust via `syn`) lower
//! source into the [`ir`] and the [`Context`] walks it in statement order,
//! maintaining the facts rules read:
//!
//! - qualified names through import aliases ([`Context::qualified_name`]),
//!   so `import torch as t; t.cuda.amp.autocast` resolves to
//!   `torch.cuda.amp.autocast` and rules never match bare identifier text;
//! - scopes (module, class, function) and what kind of value a binding holds
//!   (tensor, parameter, module, data loader, ...);
//! - loops, and which are training loops (they reach `backward()`) or
//!   evaluation loops (they iterate a validation/test loader);
//! - grad-mode regions (`with torch.no_grad()`, `@torch.inference_mode()`,
//!   `torch.set_grad_enabled(False)`), and evaluation code after
//!   `model.eval()`;
//! - tensors known to require grad (leaves), values that carry an autograd
//!   graph, view-of relations, and values that outlive an iteration.
//!
//! Invariant: the facts a rule sees at a statement describe the program state
//! *before* that statement runs; the statement's own effects are applied after
//! every rule has seen it.
//!
//! Layers, each using only those above it:
//!
//! - [`ir`]: the IR, its ids and tree, walks over it, the CFG, the dump;
//! - [`resolve`]: qualified names, identifier words, import maps;
//! - [`api`]: the torch API vocabulary (events, in-place ops, what autograd
//!   saves, sets of step events);
//! - [`facts`]: facts of the IR alone (view chains, pre-walk scans of bodies);
//! - [`index`]: the project index (per-file summaries joined, the call graph);
//! - `context`: the walk and the query façade rules read ([`Context`]),
//!   split by concern (`walk`, `bind`, `values`, `resolve`, `query`);
//! - [`step`] (training-step events of a body) and `summary` (phase one's
//!   per-file summaries), which read the walk's facts.

pub mod api;
pub mod facts;
pub mod index;
pub mod ir;
pub mod resolve;
pub mod step;
mod context;
mod summary;

pub use context::{Context, ContextOptions, HostRead, LoopKind, ModuleFacts, ValueKind, Visitor};
pub use facts::views::{Part, ViewOf};
pub use index::{FileSummary, ModuleInfo, ProjectIndex, Role};
pub use ir::cfg;
pub use resolve::QualifiedName;
pub use summary::{summarize, summarize_with_facts};

/// Whether the module imports PyTorch anywhere, nested blocks and
/// functions included: `torch` (or a `torch.*` module) in Python, the
/// `tch` crate in Rust. Every rule is about PyTorch, so a file without such
/// an import needs no walk at all.
pub fn imports_torch(module: &ir::Module) -> bool {
    match module.language {
        ir::Language::Python => imports_any(module, &["torch"]) || takes_torch_from_a_star_import(module),
        ir::Language::Rust => imports_any(module, &["tch"]),
    }
}

/// Whether a Python module uses the name `torch` without importing it,
/// beside a star import (`from fastai.text import *`, whose library
/// re-exports torch): only that import can bind the name.
pub fn takes_torch_from_a_star_import(module: &ir::Module) -> bool {
    fn star(body: &[ir::Stmt]) -> bool {
        body.iter().any(|s| match &s.kind {
            ir::StmtKind::Import(bindings) => bindings.iter().any(|b| b.local.as_str() == "*"),
            ir::StmtKind::Function(_) | ir::StmtKind::Class(_) => false,
            _ => s.child_blocks().any(star),
        })
    }
    module.language == ir::Language::Python && module.words.contains(ir::Words::TORCH) && star(&module.body)
}

/// Whether the module imports one of `roots` (or a module below one),
/// anywhere in it.
pub fn imports_any(module: &ir::Module, roots: &[&str]) -> bool {
    fn any(body: &[ir::Stmt], roots: &[&str]) -> bool {
        body.iter().any(|s| match &s.kind {
            ir::StmtKind::Import(bindings) => bindings.iter().any(|b| {
                roots.iter().any(|r| b.qualified.strip_prefix(r).is_some_and(|rest| rest.is_empty() || rest.starts_with('.')))
            }),
            ir::StmtKind::Function(f) => any(&f.body, roots),
            ir::StmtKind::Class(c) => any(&c.body, roots),
            _ => s.child_blocks().any(|b| any(b, roots)),
        })
    }
    any(&module.body, roots)
}
