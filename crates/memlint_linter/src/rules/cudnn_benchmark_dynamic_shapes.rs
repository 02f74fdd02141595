use memlint_diagnostics::Span;
use memlint_semantic::api::is_random_draw;
use memlint_semantic::ir::{for_each_stmt_in_module, Expr, ExprKind, Literal, Stmt, StmtKind};

use crate::{declare_rule, Checker, Rule, RuleMeta};

declare_rule! {
    /// ## What it does
    /// Flags `torch.backends.cudnn.benchmark = True` (tch:
    /// `tch::Cuda::cudnn_set_benchmark(true)`) in a file whose inputs
    /// change shape from batch to batch. The file shows it by:
    /// `pad_sequence` / `pack_padded_sequence` (batches padded to their
    /// longest sequence) or a tokenizer call with `padding="longest"` or
    /// `padding=True`, in a file with a convolution; a
    /// `torchvision.models.detection` or `segmentation`
    /// model (they resize each image keeping its aspect ratio), an
    /// `F.interpolate(...)` to a random size (multi-scale training; tch:
    /// `upsample_*` to a size drawn with `rng.gen_range(...)`), or a
    /// `batch_sampler`/iterator that buckets by length (with a convolution,
    /// as for padding).
    ///
    /// ## Why is this bad?
    /// With benchmark mode cuDNN times every convolution algorithm the first
    /// time it sees an input shape and caches the fastest for that shape.
    /// With a few fixed shapes that search pays off (about +15-20% on a
    /// ResNet-50); when every batch has a new shape the search runs again
    /// and again, and training gets slower instead (about -30% on a
    /// detector fed variable-size images). (memprobe has not measured it
    /// yet: it needs a GPU.)
    ///
    /// ## Example
    /// ```python
    /// torch.backends.cudnn.benchmark = True
    /// model = torchvision.models.detection.fasterrcnn_resnet50_fpn(weights="DEFAULT")
    /// ```
    ///
    /// In Rust with `tch` (batches padded to their longest sequence, then
    /// convolved):
    /// ```rust,ignore
    /// tch::Cuda::cudnn_set_benchmark(true);
    /// let conv = nn::conv1d(vs.root(), 80, 256, 5, Default::default());
    /// let batch = Tensor::pad_sequence(&seqs, true, 0.0, "right");
    /// let out = batch.transpose(1, 2).apply(&conv);
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// torch.backends.cudnn.benchmark = False  # input sizes vary per batch
    /// model = torchvision.models.detection.fasterrcnn_resnet50_fpn(weights="DEFAULT")
    /// ```
    /// Or pad or bucket inputs to a few fixed shapes and keep benchmark on.
    ///
    /// ## Known false positives
    /// Only the file that sets the flag is read for signs of varying
    /// shapes: a collate function in another module is not seen (a missed
    /// finding). The signs of padded or bucketed sequences count only in
    /// a file that builds or calls a convolution (`nn.Conv1d`,
    /// `F.conv2d`; tch: `nn::conv1d`, `x.conv2d(...)`): a padded batch
    /// that feeds an RNN or a transformer, beside a CNN over fixed-size
    /// images, leaves benchmark mode nothing to re-tune; a convolution
    /// defined in another module is not seen (a missed finding). Which
    /// tensor a convolution reads is not followed either. A
    /// `drop_last=False` last batch is one more shape, tuned once, and is
    /// not reported.
    ///
    /// ## References
    /// - [torch.backends.cudnn.benchmark](https://pytorch.org/docs/stable/backends.html#torch.backends.cudnn.benchmark)
    /// - [Performance tuning guide: enable cuDNN auto-tuner](https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html#enable-cudnn-auto-tuner)
    pub struct CudnnBenchmarkDynamicShapes {
        code: "ML301",
        name: "cudnn-benchmark-dynamic-shapes",
        severity: Warning,
        default: true,
        languages: [Python, Rust],
    }
}

impl Rule for CudnnBenchmarkDynamicShapes {
    fn meta(&self) -> &'static RuleMeta {
        &Self::META
    }

    fn check_stmt(&self, stmt: &Stmt, checker: &mut Checker<'_>) {
        if !checker.in_torch_program() || checker.cx.in_compat_code() {
            return;
        }
        let StmtKind::Assign { targets, value, .. } = &stmt.kind else { return };
        if !value.is_true() || targets.len() != 1 {
            return;
        }
        let target = &targets[0];
        let is_flag = checker.cx.qualified_name(target).is_some_and(|q| q.as_str() == memlint_semantic::api::CUDNN_BENCHMARK);
        if is_flag {
            report(target.span, "`cudnn.benchmark = True`", checker);
        }
    }

    fn check_expr(&self, expr: &Expr, checker: &mut Checker<'_>) {
        if !checker.is_rust() || !checker.in_torch_program() {
            return;
        }
        let Some((func, args, _)) = expr.as_call() else { return };
        // `Cuda::cudnn_set_benchmark`, also through an alias (`use tch::Cuda as C`).
        let is_setter = func.dotted().is_some_and(|d| d.as_str().ends_with("Cuda.cudnn_set_benchmark"))
            || checker.cx.qualified_name(func).is_some_and(|q| q.as_str() == "tch.Cuda.cudnn_set_benchmark");
        if is_setter && args.first().is_some_and(Expr::is_true) {
            report(expr.span, "`Cuda::cudnn_set_benchmark(true)`", checker);
        }
    }
}

fn report(span: Span, what: &str, checker: &mut Checker<'_>) {
    let module = checker.module();
    let Some(signal) = checker.file_memo().get_or("ML301-signal", "", || dynamic_shape_signal(&module.body)) else {
        return;
    };
    let (at, name) = &*signal;
    let line = checker.line_of(*at);
    checker.report(
        CudnnBenchmarkDynamicShapes::META
            .diagnostic(span, format!("{what} while input shapes vary ({name} at line {line}): cuDNN re-runs its algorithm search for every new shape"))
            .with_help("leave benchmark mode off here, or pad or bucket the inputs to a few fixed shapes and keep it on"),
    );
}

/// The first sign in the file that input shapes vary between batches:
/// where it is, and how the message names it. Sequences padded or
/// bucketed to their batch's longest length vary in length only, which
/// matters to benchmark mode where a convolution runs over them: such a
/// sign counts in a file that builds or calls one (`nn.Conv1d`,
/// `F.conv2d`, tch's `nn::conv1d`, `x.conv2d(...)`). A padded batch that
/// feeds an RNN or a transformer, beside a CNN over fixed-size images
/// (image captioning, vision-language models), leaves nothing to re-tune.
fn dynamic_shape_signal(body: &[Stmt]) -> Option<(u32, String)> {
    let mut image: Option<(u32, String)> = None;
    let mut sequence: Option<(u32, String)> = None;
    let mut convolution = false;
    let random_names = random_bound_names(body);
    for_each_stmt_in_module(body, &mut |s| {
        if image.is_some() {
            return;
        }
        s.for_each_expr(|e| {
            e.any(&mut |x| {
                if let Some((name, padded)) = signal_of(x, &random_names) {
                    let slot = if padded { &mut sequence } else { &mut image };
                    if slot.is_none() {
                        *slot = Some((x.span.start, name));
                    }
                }
                convolution |= is_convolution(x);
                image.is_some()
            });
        });
    });
    image.or(sequence.filter(|_| convolution))
}

/// A convolution built or called: `nn.Conv2d(...)`, `F.conv1d(...)`,
/// `nn::conv2d(...)` (tch), `x.conv_transpose2d(...)`.
fn is_convolution(e: &Expr) -> bool {
    let Some((func, _, _)) = e.as_call() else { return false };
    let last = match &func.kind {
        ExprKind::Name(n) | ExprKind::Attribute { attr: n, .. } => n.as_str(),
        _ => return false,
    };
    let rest = last.strip_prefix("Conv").or_else(|| last.strip_prefix("conv"));
    rest.is_some_and(|r| {
        let r = r.strip_prefix("Transpose").or_else(|| r.strip_prefix("_transpose")).unwrap_or(r);
        matches!(r, "1d" | "2d" | "3d")
    })
}

/// Detection and segmentation model builders of torchvision (by prefix).
const VARIABLE_SIZE_MODELS: &[&str] = &[
    "fasterrcnn_", "maskrcnn_", "keypointrcnn_", "retinanet_", "fcos_", "ssd300_", "ssdlite320_", "deeplabv3_", "fcn_resnet",
    "lraspp_",
];

/// A sign that input shapes vary, and whether it is one of sequences
/// padded or bucketed by length (see [`dynamic_shape_signal`]).
fn signal_of(e: &Expr, random_names: &[String]) -> Option<(String, bool)> {
    match &e.kind {
        ExprKind::Call { func, .. } => {
            let dotted = func.dotted()?;
            let d = dotted.as_str();
            let last = d.rsplit('.').next().unwrap_or(d);
            if matches!(last, "pad_sequence" | "pack_padded_sequence" | "pack_sequence" | "BucketIterator") {
                return Some((format!("`{last}`"), true));
            }
            // Through the models package (`models.detection.FasterRCNN`), not
            // any name that says so (`segmentation.astype(np.uint8)`, a mask).
            if VARIABLE_SIZE_MODELS.iter().any(|p| last.starts_with(p))
                || d.contains("models.detection.")
                || d.contains("models.segmentation.")
            {
                return Some((format!("the variable-size model `{last}`"), false));
            }
            // A tokenizer padding each batch to its longest sequence.
            if let Some(p) = e.keyword("padding") {
                let varies = match &p.kind {
                    ExprKind::Literal(Literal::Str(s)) => s.as_str() == "longest",
                    ExprKind::Literal(Literal::Bool(b)) => *b,
                    _ => false,
                };
                if varies && last != "Conv2d" && last != "Conv1d" && !last.starts_with("pad") {
                    return Some((format!("`{last}(padding=...)` padding to the longest sequence"), true));
                }
            }
            // `F.interpolate(x, size=random.choice(sizes))`: multi-scale;
            // tch: `x.upsample_bilinear2d([s, s], ...)` with `s` drawn.
            if last == "interpolate" || last == "upsample" {
                let sized = e.keyword("size").or_else(|| e.keyword("scale_factor")).or_else(|| e.as_call().and_then(|(_, a, _)| a.get(1)));
                if sized.is_some_and(|v| is_random(v, random_names)) {
                    return Some(("an `interpolate` to a random size".to_string(), false));
                }
            }
            if last.starts_with("upsample_") && e.as_call().and_then(|(_, a, _)| a.first()).is_some_and(|v| is_random(v, random_names)) {
                return Some((format!("an `{last}` to a random size"), false));
            }
            // A length-bucketing batch sampler.
            if let Some(s) = e.keyword("batch_sampler") {
                let bucket = s.any(&mut |x| {
                    x.dotted().is_some_and(|n| n.as_str().to_ascii_lowercase().contains("bucket"))
                });
                if bucket {
                    return Some(("a bucketing `batch_sampler`".to_string(), true));
                }
            }
            None
        }
        _ => None,
    }
}

/// Whether `v` draws a random value (`random.choice(...)`,
/// `np.random.randint(...)`, `torch.randint(...)`) or is a name bound to one.
fn is_random(v: &Expr, random_names: &[String]) -> bool {
    v.any(&mut |x| match &x.kind {
        ExprKind::Call { func, .. } => func.dotted().is_some_and(|d| is_random_draw(d.as_str())),
        ExprKind::Name(n) => random_names.iter().any(|r| r == n.as_str()),
        _ => false,
    })
}

/// Names the file binds to a random draw (`size = random.choice(scales)`).
fn random_bound_names(body: &[Stmt]) -> Vec<String> {
    let mut out = Vec::new();
    for_each_stmt_in_module(body, &mut |s| {
        if let StmtKind::Assign { targets, value, .. } = &s.kind {
            let random = value.any(&mut |x| x.as_call().and_then(|(f, _, _)| f.dotted()).is_some_and(|d| is_random_draw(d.as_str())));
            if random {
                out.extend(targets.iter().filter_map(|t| t.as_name().map(str::to_string)));
            }
        }
    });
    out
}
