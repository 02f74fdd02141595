//! The rule registry: every rule's metadata and checks, in code order.

use memlint_diagnostics::{Diagnostic, Severity, Span};
use memlint_semantic::ir::{Expr, Function, Language, Module, Stmt};

use crate::checker::Checker;
use crate::rules;

/// A rule's identity and documentation.
#[derive(Debug)]
pub struct RuleMeta {
    /// Code, e.g. `ML201`; never changes, never reused.
    pub code: &'static str,
    /// Kebab-case name describing the hazard, e.g. `eval-without-no-grad`.
    pub name: &'static str,
    /// Severity of every finding.
    pub severity: Severity,
    /// Whether the rule runs without being selected.
    pub default_enabled: bool,
    /// Languages the rule applies to.
    pub languages: &'static [Language],
    /// The rule's documentation (markdown), from its doc comment.
    pub doc: &'static str,
}

impl RuleMeta {
    /// A diagnostic of this rule.
    pub fn diagnostic(&self, span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic::new(self.code, self.name, self.severity, span, message)
    }

    /// The CamelCase form of the name (`EvalWithoutNoGrad`).
    pub fn camel_name(&self) -> String {
        self.name
            .split('-')
            .map(|w| {
                let mut c = w.chars();
                match c.next() {
                    Some(f) => f.to_ascii_uppercase().to_string() + c.as_str(),
                    None => String::new(),
                }
            })
            .collect()
    }
}

/// A rule: metadata plus checks called for every statement and expression.
pub trait Rule: Sync + Send {
    /// The rule's metadata.
    fn meta(&self) -> &'static RuleMeta;
    /// Checks one statement (before its effects apply).
    fn check_stmt(&self, _stmt: &Stmt, _checker: &mut Checker<'_>) {}
    /// Checks one expression.
    fn check_expr(&self, _expr: &Expr, _checker: &mut Checker<'_>) {}
    /// Checks a `for`/`while` loop once, before its body is walked (the
    /// body's control-flow graph: [`memlint_semantic::cfg::Cfg::build`]).
    fn check_loop(&self, _stmt: &Stmt, _body: &[Stmt], _checker: &mut Checker<'_>) {}
    /// Checks a function definition once, at its `def`.
    fn check_function(&self, _func: &Function, _checker: &mut Checker<'_>) {}
    /// Checks the whole file once, after its walk.
    fn check_file(&self, _module: &Module, _checker: &mut Checker<'_>) {}
}

/// Declares a rule struct whose `///` doc comment becomes its documentation.
#[macro_export]
macro_rules! declare_rule {
    (
        $(#[doc = $doc:literal])*
        $vis:vis struct $ty:ident {
            code: $code:literal,
            name: $name:literal,
            severity: $sev:ident,
            default: $default:literal,
            languages: [$($lang:ident),* $(,)?] $(,)?
        }
    ) => {
        $(#[doc = $doc])*
        #[derive(Debug, Default)]
        $vis struct $ty;

        impl $ty {
            /// This rule's metadata.
            pub const META: $crate::RuleMeta = $crate::RuleMeta {
                code: $code,
                name: $name,
                severity: memlint_diagnostics::Severity::$sev,
                default_enabled: $default,
                languages: &[$(memlint_semantic::ir::Language::$lang),*],
                doc: concat!($($doc, "\n"),*),
            };
        }
    };
}

declare_rule! {
    /// ## What it does
    /// Reports a file that cannot be checked: it does not parse as Python,
    /// or as Rust for a `.rs` file (syn does not recover: the file is this
    /// one finding), or nests deeper than 1000 levels, it cannot be read (permissions,
    /// not UTF-8, binary, not a regular file, over `--max-file-size`), a
    /// directory cannot be listed, or a `.ipynb` file is not a notebook (not
    /// JSON, no `cells` list, a cell without `source`, wrong types). In a
    /// notebook, the code cells that do not parse are one finding, in the
    /// first of them, naming them all (an exercise notebook's blanks do not
    /// bury the other findings). A Python 2 script, declared so by its
    /// first line (`#!/usr/bin/env python2`), or a notebook whose metadata
    /// names a Python 2 kernel, is not reported: it is not meant to parse
    /// as Python 3 (the rules still check what the parser recovered). Nor
    /// is a blank a course leaves for the student: a placeholder (`<YOUR
    /// CODE>`, `<???>`, `= <gen(noise)>`) or a line a comment marks (`#
    /// your code`, `# TODO`) in any file, and in a notebook also a value
    /// or argument left out (`loss = `, `f(x, ?)`, `= ?!`) or a body of
    /// comments only.
    ///
    /// ## Why is this bad?
    /// Findings in the rest of a file that does not parse come only from the
    /// parts the parser recovered, so some hazards may be missed; a file that
    /// cannot be read, or a notebook that cannot be read as one, is not
    /// checked at all. A notebook cell that does not parse does not hide the
    /// findings of the other cells.
    ///
    /// ## Example
    /// ```python
    /// def train(model:
    ///     ...
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// def train(model):
    ///     ...
    /// ```
    ///
    /// ## Known false positives
    /// Syntax newer than the parser understands is reported as an error. In
    /// notebooks, IPython syntax other than magics (`%`, `%%`), shell lines
    /// (`!`) and help (`?`), such as autocall (`/func x`), is reported too.
    ///
    /// ## References
    /// - [Python grammar](https://docs.python.org/3/reference/grammar.html)
    pub struct ParseError {
        code: "ML000",
        name: "parse-error",
        severity: Error,
        default: true,
        languages: [Python, Rust],
    }
}

/// Metadata of `ML000 parse-error`, reported by the driver, not by a check.
pub static PARSE_ERROR: RuleMeta = ParseError::META;

static RULES: &[&dyn Rule] = &[
    &rules::inplace_on_leaf::InplaceOnLeaf,
    &rules::inplace_on_saved_tensor::InplaceOnSavedTensor,
    &rules::data_attribute::DataAttribute,
    &rules::accumulation_loss_not_scaled::AccumulationLossNotScaled,
    &rules::missing_zero_grad::MissingZeroGrad,
    &rules::grad_scaler_misuse::GradScalerMisuse,
    &rules::data_attribute_in_setup::DataAttributeInSetup,
    &rules::eval_without_no_grad::EvalWithoutNoGrad,
    &rules::loss_accumulated_with_graph::LossAccumulatedWithGraph,
    &rules::view_retains_base::ViewRetainsBase,
    &rules::zero_grad_set_to_none_false::ZeroGradSetToNoneFalse,
    &rules::empty_cache_in_loop::EmptyCacheInLoop,
    &rules::cudnn_benchmark_dynamic_shapes::CudnnBenchmarkDynamicShapes,
    &rules::dataloader_single_process::DataloaderSingleProcess,
    &rules::dataloader_unpinned_memory::DataloaderUnpinnedMemory,
    &rules::dataloader_worker_options_without_workers::DataloaderWorkerOptionsWithoutWorkers,
    &rules::host_sync_in_loop::HostSyncInLoop,
    &rules::tensor_created_then_moved::TensorCreatedThenMoved,
    &rules::non_blocking_from_unpinned::NonBlockingFromUnpinned,
    &rules::frozen_params_in_optimizer::FrozenParamsInOptimizer,
    &rules::deprecated_cuda_amp::DeprecatedCudaAmp,
    &rules::apex_amp::ApexAmp,
];

/// Every rule with checks, in code order (`ML000` is not among them: see
/// [`all_metas`]).
pub fn all_rules() -> &'static [&'static dyn Rule] {
    RULES
}

/// Metadata of every code, `ML000` first.
pub fn all_metas() -> Vec<&'static RuleMeta> {
    std::iter::once(&PARSE_ERROR).chain(RULES.iter().map(|r| r.meta())).collect()
}

/// Looks up a code (case-insensitive) or kebab-case name.
pub fn rule_by_code(code: &str) -> Option<&'static RuleMeta> {
    all_metas().into_iter().find(|m| m.code.eq_ignore_ascii_case(code) || m.name == code)
}

#[cfg(test)]
mod tests {
    use super::all_metas;

    #[test]
    fn codes_are_listed_in_order() {
        let codes: Vec<&str> = all_metas().iter().map(|m| m.code).collect();
        let mut sorted = codes.clone();
        sorted.sort_unstable();
        assert_eq!(codes, sorted, "`memlint rules`, the docs index and SARIF list rules in this order");
    }
}
