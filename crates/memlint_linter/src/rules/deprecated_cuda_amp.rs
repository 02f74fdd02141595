use memlint_diagnostics::{Applicability, Edit, Fix, Span};
use memlint_semantic::api::amp::{self, is_deprecated_module, replacement, Replacement};
use memlint_semantic::ir::{Expr, ExprKind, Language, Stmt, StmtKind, Words};

use crate::{declare_rule, Checker, Rule, RuleMeta};

declare_rule! {
    /// ## What it does
    /// Flags the AMP APIs deprecated since PyTorch 2.4:
    /// `torch.cuda.amp.autocast(...)`, `torch.cuda.amp.GradScaler(...)`,
    /// `torch.cuda.amp.custom_fwd`/`custom_bwd`, and their `torch.cpu.amp`
    /// twins, however they are imported (`from torch.cuda.amp import
    /// autocast`, `from torch.cuda import amp`).
    ///
    /// ## Why is this bad?
    /// Each call emits a `FutureWarning` and the APIs are scheduled for
    /// removal; the device-generic `torch.amp` API also covers bf16 on CPU
    /// and other accelerators.
    ///
    /// ## Example
    /// ```python
    /// scaler = torch.cuda.amp.GradScaler()
    /// with torch.cuda.amp.autocast(dtype=torch.float16):
    ///     loss = model(x)
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// scaler = torch.amp.GradScaler("cuda")
    /// with torch.amp.autocast("cuda", dtype=torch.float16):
    ///     loss = model(x)
    /// ```
    ///
    /// A fix is attached when the call can be rewritten mechanically:
    /// `autocast` and `custom_fwd`/`custom_bwd` called with keyword arguments
    /// only (or `@custom_fwd` bare), `GradScaler` with any arguments. Spelled
    /// through the module (`torch.cuda.amp.autocast(...)`, `amp.autocast()`),
    /// the call becomes `torch.amp.autocast("cuda", ...)` when the file
    /// imports `torch`. Imported by name (`from torch.cuda.amp import
    /// GradScaler, autocast`), the import becomes `from torch.amp import
    /// ...` and every use of those names in the file gets its device
    /// (`GradScaler("cuda", ...)`, `@custom_fwd(device_type="cuda")`) in
    /// one fix; when a use cannot be rewritten (the name passed as a value,
    /// `autocast(True)`, the name bound again), none is.
    ///
    /// ## Known false positives
    /// Compatibility code is not reported: a branch guarded by a torch
    /// version or API check (`if TORCH_2_4: ... else: ...`,
    /// `if version.parse(torch.__version__) >= ...`, `hasattr(torch, "amp")`,
    /// and conditional expressions on such checks, also through a name
    /// bound to one: `AMP_AVAILABLE = hasattr(torch.cuda.amp, "autocast")`
    /// then `if AMP_AVAILABLE:`), an `except` handler (a
    /// fallback, typically after the new API failed; any handler counts), a
    /// name imported both from `torch.amp` and
    /// (as a fallback) from `torch.cuda.amp`, and `isinstance` checks. Its
    /// fix would break the old-torch path those projects still support. A
    /// guard whose name says nothing of versions (`if legacy:`) is not
    /// recognised. Superseded copies of the code kept beside it are not
    /// checked: files under a directory named `old`, `legacy`, `archive(d)`,
    /// `obsolete` or `outdated` below the one checked (a file named on the
    /// command line is checked wherever it lies). Only these exact qualified names are matched. Positional
    /// arguments to `torch.cuda.amp.autocast` (`autocast(True)`) get no fix,
    /// because `torch.amp.autocast`'s second positional parameter is `dtype`.
    /// A project that runs only on a torch older than 2.4 is not reported:
    /// one that pins or caps torch below it (`torch==1.7.1`, `torch<2.0`,
    /// the compatible release `torch~=2.1.0`
    /// in its requirements, a pin in a conda `environment.yml`, or a pin in
    /// its README's install commands,
    /// `pip install torch==1.8.1`, "PyTorch version 1.7.1", the newest of
    /// a list of tested versions, "tested on Pytorch 0.4.0/1.0.0", an item
    /// of a list of requirements, `* pytorch 1.10`, `* pytorch1.2.0`; not
    /// one the README says other versions work beside, "should work with
    /// other versions", nor one it names a newer torch after, "update your
    /// pytorch to 2.0"), or whose code
    /// imports a module torch removed before (`from torch._six import
    /// inf`, gone in 2.0, at the top of a file of the run, not under `try:`).
    /// There the old API is the one its torch has. A pin in a side
    /// requirements file (`requirements-*.txt`, `requirements/*.txt`) counts
    /// only when the main manifests name no torch: an export tool's
    /// `requirements_onnx.txt` does not pin the project.
    /// The fix is safe only when the project declares a torch minimum that
    /// has the new API (`torch>=2.4` in pyproject.toml, setup.cfg, setup.py or
    /// a requirements file; `GradScaler("cuda")` needs 2.3); otherwise it is
    /// unsafe and its message names the torch version it needs.
    ///
    /// ## References
    /// - [Automatic Mixed Precision package - torch.amp](https://pytorch.org/docs/stable/amp.html)
    /// - [PyTorch 2.4 release notes: deprecation of torch.cuda.amp](https://github.com/pytorch/pytorch/releases/tag/v2.4.0)
    pub struct DeprecatedCudaAmp {
        code: "ML401",
        name: "deprecated-cuda-amp",
        severity: Warning,
        default: true,
        languages: [Python],
    }
}

impl DeprecatedCudaAmp {
    fn resolve(checker: &Checker<'_>, e: &Expr) -> Option<(String, Replacement)> {
        if !matches!(e.kind, ExprKind::Name(_) | ExprKind::Attribute { .. }) {
            return None;
        }
        // Compatibility code keeps the old API for old torch on purpose.
        if checker.cx.in_compat_code() {
            return None;
        }
        let q = checker.cx.qualified_name(e)?;
        let rep = replacement(q.as_str())?;
        // `try: from torch.amp import X / except ImportError: from torch.cuda.amp import X`:
        // the name is also bound to the current API, so it is an alias, not a use of the old one.
        let root = e.dotted()?;
        let root = root.split('.').next().unwrap_or(&root);
        let targets = checker.cx.import_targets(root);
        if targets.len() > 1 && targets.iter().any(|t| replacement(t).is_none() && !is_deprecated_module(t)) {
            return None;
        }
        Some((q.as_str().to_string(), rep))
    }

    fn report(checker: &mut Checker<'_>, reference: &Expr, qualified: &str, rep: Replacement, fix: Option<Fix>) {
        let mut d = Self::META
            .diagnostic(reference.span, format!("`{qualified}` is deprecated since PyTorch 2.4"))
            .with_help(format!("use `{}`", rep.suggestion()));
        if let Some(f) = fix {
            d = d.with_fix(f);
        }
        checker.report(d);
    }

    /// The fix for a call `callee(args)` (or a bare decorator when `call`
    /// is None) spelled through the module (`torch.cuda.amp.autocast(...)`,
    /// `amp.autocast(...)`): the callee becomes `torch.amp.<name>` and the
    /// device is added.
    fn fix(checker: &Checker<'_>, callee: &Expr, call: Option<&Expr>, rep: Replacement) -> Option<Fix> {
        let torch = checker.cx.import_alias_of(amp::TORCH)?;
        let (name, _) = rep.text();
        let new_callee = format!("{torch}.amp.{name}");
        let mut edits = device_edits(checker, &new_callee, callee, call, rep)?;
        if !edits.iter().any(|e| e.span == callee.span) {
            edits.push(Edit { span: callee.span, content: new_callee });
        }
        Some(Self::with_applicability(checker, edits, rep.suggestion(), rep.needed_torch()))
    }

    /// The fix for a use of a name bound by `from torch.cuda.amp import ...`:
    /// the import becomes `from torch.amp import ...` and every use of every
    /// name it binds gets its device, all in one fix: rewriting the import
    /// alone would leave `autocast()` calls without the device argument
    /// `torch.amp.autocast` requires. `None` when some use cannot be
    /// rewritten (a bare reference, positional arguments of `autocast`), a
    /// name is bound again in the file, or the import binds other names.
    fn from_import_fix(checker: &Checker<'_>, local: &str) -> Option<Fix> {
        // The same for every use of `local` in the file: computed once (it
        // scans the whole module).
        checker
            .file_memo()
            .get_or("ML401 from-import fix", local, || Self::compute_from_import_fix(checker, local))
            .map(|f| (*f).clone())
    }

    fn compute_from_import_fix(checker: &Checker<'_>, local: &str) -> Option<Fix> {
        let module = checker.module();
        let mut imports = Vec::new();
        find_imports(&module.body, &mut imports);
        let binds = |s: &&&Stmt| match &s.kind {
            StmtKind::Import(bs) => bs.iter().any(|b| b.local == local),
            _ => false,
        };
        let mut found = imports.iter().filter(binds);
        let stmt = found.next()?;
        if found.next().is_some() {
            return None;
        }
        let StmtKind::Import(bindings) = &stmt.kind else { return None };
        let old_module = amp::DEPRECATED_MODULES.iter().copied().find(|m| {
            bindings.iter().all(|b| b.qualified.strip_prefix(m).and_then(|r| r.strip_prefix('.')).is_some_and(|n| !n.contains('.')))
        })?;
        let names: Vec<(&str, Replacement)> =
            bindings.iter().map(|b| replacement(&b.qualified).map(|r| (b.local.as_str(), r))).collect::<Option<_>>()?;
        // `from torch.cuda.amp import X`: the module path in the statement's text.
        let text = checker.text(stmt.span);
        let at = text.find(old_module)?;
        let start = stmt.span.start + at as u32;
        let mut edits = vec![Edit { span: Span::new(start, start + old_module.len() as u32), content: amp::MODULE.to_string() }];
        let mut uses = Vec::new();
        let mut ok = true;
        collect_uses(&module.body, &names, &mut uses, &mut ok);
        if !ok {
            return None;
        }
        for (callee, call, rep) in uses {
            edits.extend(device_edits(checker, checker.text(callee.span), callee, call, rep)?);
        }
        let needed = names.iter().map(|(_, r)| r.needed_torch()).max()?;
        let what = format!("`from torch.amp import ...` and {}", names.iter().map(|(_, r)| format!("`{}`", r.suggestion())).collect::<Vec<_>>().join(", "));
        Some(Self::with_applicability(checker, edits, what, needed))
    }

    /// Safe only when the project cannot run on a torch without the new API.
    fn with_applicability(checker: &Checker<'_>, mut edits: Vec<Edit>, what: String, needed: (u32, u32)) -> Fix {
        edits.sort_by_key(|e| (e.span.start, e.span.end));
        let (applicability, message) = match checker.cx.declared_torch_minimum() {
            Some(min) if min >= needed => (Applicability::Safe, format!("use {what}")),
            Some((ma, mi)) => (
                Applicability::Unsafe,
                format!("use {what} (needs torch >= {}.{}; the project declares torch >= {ma}.{mi})", needed.0, needed.1),
            ),
            None => (
                Applicability::Unsafe,
                format!("use {what} (needs torch >= {}.{}; the project declares no minimum torch version)", needed.0, needed.1),
            ),
        };
        Fix { applicability, message, edits }
    }
}

/// The edits that give a use of the new API its device: `"cuda"` first in
/// `autocast(...)`/`GradScaler(...)`, `device_type="cuda"` in
/// `custom_fwd(...)`, and a bare `@custom_fwd` becomes
/// `@<callee_text>(device_type="cuda")`.
fn device_edits(checker: &Checker<'_>, callee_text: &str, callee: &Expr, call: Option<&Expr>, rep: Replacement) -> Option<Vec<Edit>> {
    let (_, device) = rep.text();
    match (rep, call) {
        (Replacement::DeviceFirst(..), Some(call)) => {
            let ExprKind::Call { args, keywords, .. } = &call.kind else { return None };
            let args_span = call.args_span()?;
            if rep.is_autocast() && !args.is_empty() {
                return None;
            }
            let sep = if args.is_empty() && keywords.is_empty() { "" } else { ", " };
            Some(vec![Edit { span: Span::new(args_span.start + 1, args_span.start + 1), content: format!("\"{device}\"{sep}") }])
        }
        (Replacement::DeviceFirst(..), None) => None,
        (Replacement::DeviceKeyword(..), Some(call)) => {
            let ExprKind::Call { args, keywords, .. } = &call.kind else { return None };
            let args_span = call.args_span()?;
            if !args.is_empty() || keywords.iter().any(|k| k.name.is_none()) {
                return None;
            }
            let inner = checker.text(Span::new(args_span.start + 1, args_span.end.saturating_sub(1)));
            let sep = if inner.trim().is_empty() || inner.trim_end().ends_with(',') { "" } else { ", " };
            let at = args_span.end.saturating_sub(1);
            Some(vec![Edit { span: Span::new(at, at), content: format!("{sep}device_type=\"{device}\"") }])
        }
        (Replacement::DeviceKeyword(..), None) => {
            Some(vec![Edit { span: callee.span, content: format!("{callee_text}(device_type=\"{device}\")") }])
        }
    }
}

/// Whether every torch the project runs on predates the deprecation: it
/// pins or caps torch below 2.4 (`torch==1.7.1`, `torch<2.0`, a pin in
/// its README's install commands) or imports a module torch removed
/// before (`torch._six`). There the old API is the only one, or the one
/// the code was written for, and warns about nothing.
fn runs_only_before_deprecation(checker: &Checker<'_>) -> bool {
    checker.cx.torch_below().is_some_and(|below| below <= amp::DEPRECATED_IN)
}

/// Every import statement of the body, nested blocks and functions included.
fn find_imports<'a>(body: &'a [Stmt], out: &mut Vec<&'a Stmt>) {
    for s in body {
        match &s.kind {
            StmtKind::Import(_) => out.push(s),
            StmtKind::Function(f) => find_imports(&f.body, out),
            StmtKind::Class(c) => find_imports(&c.body, out),
            _ => {
                for b in s.child_blocks() {
                    find_imports(b, out);
                }
            }
        }
    }
}

/// The uses of `names` in the body: `(callee, the call or None for a bare
/// decorator, replacement)`. Clears `ok` on a use that is neither (a
/// reference passed as a value) or on a rebinding of a name.
fn collect_uses<'a>(body: &'a [Stmt], names: &[(&str, Replacement)], uses: &mut Vec<(&'a Expr, Option<&'a Expr>, Replacement)>, ok: &mut bool) {
    fn rep_of(e: &Expr, names: &[(&str, Replacement)]) -> Option<Replacement> {
        let n = e.as_name()?;
        names.iter().find(|(l, _)| *l == n).map(|(_, r)| *r)
    }
    fn walk<'a>(e: &'a Expr, names: &[(&str, Replacement)], uses: &mut Vec<(&'a Expr, Option<&'a Expr>, Replacement)>, ok: &mut bool) {
        if let ExprKind::Call { func, args, keywords, .. } = &e.kind {
            if let Some(r) = rep_of(func, names) {
                uses.push((func, Some(e), r));
                args.iter().for_each(|a| walk(a, names, uses, ok));
                keywords.iter().for_each(|k| walk(&k.value, names, uses, ok));
                return;
            }
        }
        if rep_of(e, names).is_some() {
            *ok = false;
        }
        e.for_each_child(|c| walk(c, names, uses, ok));
    }
    for s in body {
        match &s.kind {
            StmtKind::Import(_) => {}
            StmtKind::Function(f) => {
                if names.iter().any(|(l, _)| *l == f.name || f.params.iter().any(|p| p.name == *l)) {
                    *ok = false;
                }
                for d in &f.decorators {
                    match rep_of(d, names) {
                        Some(r) => uses.push((d, None, r)),
                        None => walk(d, names, uses, ok),
                    }
                }
                for p in &f.params {
                    if let Some(d) = &p.default {
                        walk(d, names, uses, ok);
                    }
                }
                collect_uses(&f.body, names, uses, ok);
            }
            StmtKind::Class(c) => {
                let memlint_semantic::ir::Class { name, bases, decorators, body } = &**c;
                if names.iter().any(|(l, _)| l == name) {
                    *ok = false;
                }
                bases.iter().chain(decorators).for_each(|e| walk(e, names, uses, ok));
                collect_uses(body, names, uses, ok);
            }
            _ => {
                s.for_each_expr(|e| walk(e, names, uses, ok));
                for b in s.child_blocks() {
                    collect_uses(b, names, uses, ok);
                }
            }
        }
    }
}


impl Rule for DeprecatedCudaAmp {
    fn meta(&self) -> &'static RuleMeta {
        &Self::META
    }

    fn check_stmt(&self, stmt: &Stmt, checker: &mut Checker<'_>) {
        if checker.cx.language() != Language::Python || !checker.cx.torch_imported() || runs_only_before_deprecation(checker) {
            return;
        }
        // Bare references owned directly by the statement: decorators and
        // right-hand sides (`ac = torch.cuda.amp.autocast`).
        let bare: Vec<&Expr> = match &stmt.kind {
            StmtKind::Function(f) => f.decorators.iter().collect(),
            StmtKind::Class(c) => c.decorators.iter().collect(),
            StmtKind::Assign { value, .. } => vec![value],
            StmtKind::Expr(e) | StmtKind::Return(Some(e)) => vec![e],
            _ => vec![],
        };
        let is_decorator = matches!(stmt.kind, StmtKind::Function(_));
        for e in bare {
            if let Some((q, rep)) = Self::resolve(checker, e) {
                let fix = match (is_decorator, e.as_name()) {
                    (true, Some(local)) => Self::from_import_fix(checker, local),
                    (true, None) => Self::fix(checker, e, None, rep),
                    _ => None,
                };
                Self::report(checker, e, &q, rep, fix);
            }
        }
    }

    fn check_expr(&self, expr: &Expr, checker: &mut Checker<'_>) {
        if checker.cx.language() != Language::Python || !checker.cx.torch_imported() || runs_only_before_deprecation(checker) {
            return;
        }
        // Every deprecated name has an `amp` segment, in the import or the chain.
        if !checker.cx.file_words().contains(Words::AMP) {
            return;
        }
        if let ExprKind::Call { func, .. } = &expr.kind {
            if let Some((q, rep)) = Self::resolve(checker, func) {
                let fix = match func.as_name() {
                    Some(local) => Self::from_import_fix(checker, local),
                    None => Self::fix(checker, func, Some(expr), rep),
                };
                Self::report(checker, func, &q, rep, fix);
            }
        }
        // References passed around as values (`partial(torch.cuda.amp.autocast)`).
        let func_span = expr.as_call().map(|(f, _, _)| f.span);
        let mut refs = Vec::new();
        expr.for_each_child(|c| {
            if Some(c.span) != func_span && !matches!(expr.kind, ExprKind::Attribute { .. }) {
                refs.push(c);
            }
        });
        for c in refs {
            if let Some((q, rep)) = Self::resolve(checker, c) {
                Self::report(checker, c, &q, rep, None);
            }
        }
    }
}
