//! Exporters: one file per format behind the [`Exporter`] trait.

mod json;
mod markdown;
pub mod run;
pub mod svg;
pub(crate) mod table;

pub use json::JsonExporter;
pub use markdown::MarkdownExporter;
pub use table::TableExporter;

use crate::{CorrectnessCheck, MemoryMetric, Report, ReportError, Variant, VariantId, VariantStatus};

/// Renders a report into one output format.
pub trait Exporter {
    /// Short format name (`table`, `json`, `markdown`).
    fn name(&self) -> &'static str;
    /// Renders the whole report.
    fn render(&self, report: &Report) -> Result<String, ReportError>;
}

/// Memory metrics present in any variant, in display order.
pub(crate) fn present_metrics(report: &Report) -> Vec<MemoryMetric> {
    MemoryMetric::ORDER
        .into_iter()
        .filter(|m| {
            report.variants.iter().any(|v| {
                v.summary.as_ref().is_some_and(|s| s.memory.iter().any(|x| x.metric == *m))
            })
        })
        .collect()
}

/// The metric used for the Δ memory column: peak RSS on CPU, allocator peak
/// allocated on CUDA (the figure the optimizations act on directly).
pub(crate) fn primary_metric(report: &Report) -> MemoryMetric {
    if report.environment.device_kind == "cuda" {
        MemoryMetric::AllocatorPeakAllocated
    } else {
        MemoryMetric::PeakRss
    }
}

/// Bytes as MiB with one decimal.
pub fn fmt_mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

/// Bytes in the largest unit that keeps the figure at or above 1 (B, KiB,
/// MiB, GiB), three significant figures at most.
pub fn fmt_size(bytes: f64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes.abs();
    let mut u = 0;
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    let digits = if u == 0 || v >= 100.0 { 0 } else if v >= 10.0 { 1 } else { 2 };
    let sign = if bytes < 0.0 { "-" } else { "" };
    format!("{sign}{v:.digits$} {}", units[u])
}

/// [`fmt_size`] with its sign always shown.
pub fn fmt_signed_size(bytes: f64) -> String {
    if bytes < 0.0 {
        fmt_size(bytes)
    } else {
        format!("+{}", fmt_size(bytes))
    }
}

/// Signed byte delta as MiB plus percentage.
pub fn fmt_delta(delta: i64, ratio: Option<f64>) -> String {
    let mib = delta as f64 / (1024.0 * 1024.0);
    match ratio {
        Some(r) => format!("{mib:+.1} MiB ({:+.0}%)", r * 100.0),
        None => format!("{mib:+.1} MiB"),
    }
}

/// Milliseconds with a precision suited to the magnitude.
pub fn fmt_ms(ms: f64) -> String {
    if ms >= 100.0 {
        format!("{ms:.0}")
    } else if ms >= 10.0 {
        format!("{ms:.1}")
    } else {
        format!("{ms:.2}")
    }
}

pub(crate) fn step_cell(v: &Variant, note: Option<usize>) -> String {
    let mark = note.map(|n| format!(" [{n}]")).unwrap_or_default();
    match (&v.status, &v.summary) {
        (VariantStatus::Ok, Some(s)) => format!(
            "{} ± {} ms",
            fmt_ms(s.step_time_ms.median),
            fmt_ms(s.step_time_ms.iqr)
        ),
        (VariantStatus::Interrupted, Some(s)) => format!(
            "{} ± {} ms (partial)",
            fmt_ms(s.step_time_ms.median),
            fmt_ms(s.step_time_ms.iqr)
        ),
        (VariantStatus::Skipped { .. }, _) => format!("skipped{mark}"),
        (VariantStatus::Oom { .. }, _) => format!("OOM{mark}"),
        (VariantStatus::Crashed { .. }, _) => format!("crashed{mark}"),
        (VariantStatus::Failed { .. }, _) => format!("failed{mark}"),
        (status, _) => status.short(),
    }
}

/// Footnotes for rows that did not measure (skipped, OOM, crashed, failed):
/// the variant index and the footnote number, and the footnote lines. The
/// table stays narrow; the reasons go below it.
pub(crate) fn status_notes(r: &Report) -> (Vec<Option<usize>>, Vec<String>) {
    let mut marks = Vec::new();
    let mut lines = Vec::new();
    for v in &r.variants {
        match &v.status {
            VariantStatus::Ok | VariantStatus::Interrupted | VariantStatus::Pending => marks.push(None),
            status => {
                lines.push(format!("[{}] {}: {}", lines.len() + 1, v.info.label, status.short()));
                marks.push(Some(lines.len()));
            }
        }
    }
    (marks, lines)
}

pub(crate) fn verdict_cell(v: &Variant) -> String {
    let Some(s) = &v.summary else { return "-".into() };
    if v.info.compared_to.is_none() {
        return "(reference)".into();
    }
    let t = s.time_verdict.as_ref().map(|c| c.verdict_short()).unwrap_or("-");
    let m = s.memory_verdict.as_ref().map(|c| c.verdict_short()).unwrap_or("-");
    format!("{t} · {m}")
}

/// How the verdict column is reached, and its warnings.
pub(crate) fn verdict_lines(r: &Report) -> Vec<String> {
    let mut out = Vec::new();
    let first = r.variants.iter().filter_map(|v| v.summary.as_ref()).find_map(|s| s.time_verdict.as_ref());
    if let Some(c) = first {
        out.push(format!(
            "verdict (time · memory) against the compared row: {}; memory threshold ±{:.0}%; n.s. = no significant difference, inconcl. = too few runs",
            c.method(),
            crate::verdict::VerdictConfig::memory().threshold * 100.0
        ));
        let few = r.variants.iter().filter_map(|v| v.summary.as_ref()).filter_map(|s| s.time_verdict.as_ref()).any(|c| {
            c.verdict == crate::verdict::Verdict::Inconclusive
        });
        if few {
            out.push(format!(
                "with {} run(s) per row the test cannot reach {:.0}% confidence: use --runs 4 or more for verdicts",
                r.settings.runs,
                c.confidence * 100.0
            ));
        }
    }
    out
}

pub(crate) fn memory_cell(v: &Variant, metric: MemoryMetric) -> String {
    let Some(s) = &v.summary else { return "-".into() };
    s.memory
        .iter()
        .find(|m| m.metric == metric)
        .map(|m| fmt_mib(m.median_bytes))
        .unwrap_or_else(|| "n/a".into())
}

pub(crate) fn delta_cell(v: &Variant, metric: MemoryMetric) -> String {
    let Some(s) = &v.summary else { return "-".into() };
    match s.memory.iter().find(|m| m.metric == metric) {
        Some(m) => match m.delta_bytes {
            Some(d) => fmt_delta(d, m.delta_ratio),
            None if v.info.compared_to.is_none() => "(reference)".into(),
            None => "-".into(),
        },
        None => "n/a".into(),
    }
}

pub(crate) fn speedup_cell(v: &Variant) -> String {
    match (&v.summary, &v.info.compared_to) {
        (Some(s), Some(_)) => s.speedup.map(|x| format!("{x:.2}x")).unwrap_or_else(|| "-".into()),
        (Some(_), None) => "1.00x".into(),
        _ => "-".into(),
    }
}

pub(crate) fn mfu_cell(v: &Variant) -> String {
    match &v.summary {
        Some(s) => match (s.mfu, s.achieved_tflops) {
            (Some(m), _) => format!("{:.1}%", m * 100.0),
            (None, Some(t)) => format!("n/a ({t:.3} TFLOP/s)"),
            _ => "n/a".into(),
        },
        None => "-".into(),
    }
}

pub(crate) fn check_text(c: &CorrectnessCheck) -> String {
    let verdict = if c.passed { "ok" } else { "FAIL" };
    format!("{} {:.1e} {verdict} (tol {:.0e})", short_kind(&c.kind), c.value, c.tolerance)
}

fn short_kind(kind: &str) -> &str {
    match kind {
        "amp-loss-rel-diff" => "loss Δrel",
        "accum-grad-rel-err" => "grad Δrel",
        "checkpoint-grad-rel-err" => "grad Δrel",
        "inplace-grad-rel-err" => "grad Δrel",
        "channels-last-loss-rel-diff" => "loss Δrel",
        "no-grad-eval-max-abs-diff" => "output max|Δ|",
        other => other,
    }
}

pub(crate) fn correctness_cell(v: &Variant) -> String {
    if v.correctness.is_empty() {
        return "-".into();
    }
    v.correctness.iter().map(check_text).collect::<Vec<_>>().join("; ")
}

/// The A/B table's column headers (shared by the table and markdown exporters).
pub(crate) fn column_headers(metrics: &[MemoryMetric], primary: MemoryMetric) -> Vec<String> {
    let mut head = vec![
        "variant".to_string(),
        "step time (median ± IQR)".into(),
        "samples/s".into(),
        "speedup".into(),
        "verdict".into(),
    ];
    head.extend(metrics.iter().map(|m| m.label().to_string()));
    head.push(format!("Δ {}", primary.label()));
    head.push("MFU".into());
    head.push("correctness".into());
    head
}

/// One variant's cells after its label, in [`column_headers`] order.
pub(crate) fn row_cells(v: &Variant, note: Option<usize>, metrics: &[MemoryMetric], primary: MemoryMetric) -> Vec<String> {
    let mut row = vec![
        step_cell(v, note),
        v.summary.as_ref().map(|s| format!("{:.1}", s.samples_per_s)).unwrap_or("-".into()),
        speedup_cell(v),
        verdict_cell(v),
    ];
    row.extend(metrics.iter().map(|m| memory_cell(v, *m)));
    row.push(delta_cell(v, primary));
    row.push(mfu_cell(v));
    row.push(correctness_cell(v));
    row
}

pub(crate) fn header_lines(r: &Report) -> Vec<String> {
    let e = &r.environment;
    let w = &r.workload;
    let mut lines = vec![
        format!(
            "device: {} ({}) | driver: {} | CUDA: {} | torch: {} | CPU: {} ({} logical cores, {} torch threads{})",
            e.device_name,
            e.device_kind,
            e.driver_version.as_deref().unwrap_or("none"),
            match (&e.cuda_driver_version, &e.torch_cuda_version) {
                (Some(d), Some(t)) => format!("driver {d}, torch built with {t}"),
                (None, Some(t)) => format!("torch built with {t}, no driver"),
                (Some(d), None) => format!("driver {d}"),
                (None, None) => "none".to_string(),
            },
            e.torch_version,
            e.cpu_model,
            e.cpu_logical_cores,
            e.torch_threads,
            if e.cpu_flags.is_empty() { String::new() } else { format!("; {}", e.cpu_flags.join(" ")) }
        ),
        format!(
            "workload: {} [{}] {} | batch {} | input {:?} | {} params | loss {} | {} | train FLOPs/step: {}",
            w.name,
            w.size,
            w.description,
            w.batch_size,
            w.input_shape,
            w.parameters,
            w.loss,
            w.optimizer,
            w.train_flops_per_step
                .map(|f| format!("{:.3} GFLOP", f / 1e9))
                .unwrap_or_else(|| "n/a".into())
        ),
        format!(
            "runs: {} per variant (fresh worker process each, interleaved), warm-up {} steps excluded, {} measured steps per run, seed {}",
            r.settings.runs, r.settings.warmup_steps, r.settings.measured_steps, r.settings.seed
        ),
    ];
    if let Some(s) = &r.sampler {
        lines.push(format!(
            "sampler: {} every {:.0} ms, {:.1} µs per sample, {:.3}% of one core",
            s.what,
            s.interval_ms,
            s.mean_sample_us,
            s.cpu_fraction * 100.0
        ));
    }
    if !r.complete {
        lines.push("INTERRUPTED: partial report, not every run finished".into());
    }
    lines
}

/// Lines describing each memory figure's and the timing's source.
pub(crate) fn source_lines(r: &Report) -> Vec<String> {
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for v in &r.variants {
        for run in &v.runs {
            if seen.insert(format!("timing:{}", run.timing_source)) {
                out.push(format!("step time: {}", run.timing_source));
            }
            for m in &run.memory {
                if seen.insert(format!("{:?}", m.metric)) {
                    let note = m.note.as_deref().map(|n| format!(" ({n})")).unwrap_or_default();
                    out.push(format!("{}: {}{note}", m.metric.label(), m.source));
                }
            }
        }
    }
    out
}
