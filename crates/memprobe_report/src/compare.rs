//! `memprobe compare BASE NEW`: matches the rows of two reports of the same
//! kind (bench variants by id, `run` reports as one row, `ab` reports side by
//! side), compares each with a verdict (see [`crate::verdict`]) and says
//! which rows regressed: significantly worse and above the allowed
//! regression. Reports that cannot be compared (other kinds, workloads or
//! devices) are an error naming the difference.

use serde::{Deserialize, Serialize};

use crate::export::fmt_mib;
use crate::export::run::one_line;
use crate::run::{AnyReport, RunReport};
use crate::stats::median;
use crate::verdict::{compare, Comparison, Metric, Verdict, VerdictConfig};
use crate::{MemoryMetric, Report, VariantId, VariantStatus};

/// Allowed regressions: each is also the noise threshold of its verdict.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CompareOptions {
    /// Time verdicts (threshold = `--max-time-regression`).
    pub time: VerdictConfig,
    /// Memory verdicts (threshold = `--max-memory-regression`).
    pub memory: VerdictConfig,
    /// Compare reports of different machines or settings anyway
    /// (`--allow-different-hosts`); the differences become notes.
    #[serde(default)]
    pub allow_different_hosts: bool,
    /// The most a NEW `run --torch` report's memory may grow per step
    /// (`--max-growth-per-step`, bytes): a significant growth above it is a
    /// regression.
    #[serde(default)]
    pub max_growth_per_step: Option<f64>,
    /// Which figures of two `run` reports are compared (`--metric`); all
    /// when empty.
    #[serde(default)]
    pub run_metrics: RunMetrics,
}

/// The figures of a `run` report `compare` may judge (`--metric wall,memory,
/// step-time,peak`), as a set.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunMetrics(pub u8);

impl RunMetrics {
    /// Whole-process duration.
    pub const WALL: u8 = 1;
    /// Peak memory of the tree (PSS or RSS, NVML).
    pub const MEMORY: u8 = 2;
    /// Steady-state step times (`run --torch`).
    pub const STEP_TIME: u8 = 4;
    /// The largest peak within a step (`run --torch`).
    pub const PEAK: u8 = 8;

    /// Whether `metric` is compared (everything when none was named).
    pub fn has(self, metric: u8) -> bool {
        self.0 == 0 || self.0 & metric != 0
    }
}

impl Default for CompareOptions {
    fn default() -> Self {
        CompareOptions {
            time: VerdictConfig::time(),
            memory: VerdictConfig::memory(),
            allow_different_hosts: false,
            max_growth_per_step: None,
            run_metrics: RunMetrics::default(),
        }
    }
}

/// Steady-state step times (ms) of a `run --torch` report's main process.
fn steady_step_times(r: &RunReport) -> Option<Vec<f64>> {
    let series = r.torch.as_ref()?.main_steps()?;
    // In ms, as bench step times are: the table shows "step ..." rows in ms.
    let v: Vec<f64> = series.steady_step_times(r.step_settings.warmup_steps).iter().map(|s| s * 1000.0).collect();
    (v.len() >= 2).then_some(v)
}

/// `what: BASE x, NEW y` when the two differ.
fn differ<T: PartialEq + std::fmt::Debug>(what: &str, base: &T, new: &T, out: &mut Vec<String>) {
    if base != new {
        out.push(format!("{what}: BASE {base:?}, NEW {new:?}"));
    }
}

/// The CPU's identity: its model and instruction-set flags (flags only
/// when both reports recorded them).
fn cpu_differences(base: (&str, &[String]), new: (&str, &[String]), out: &mut Vec<String>) {
    differ("CPU", &base.0, &new.0, out);
    if !base.1.is_empty() && !new.1.is_empty() && base.1 != new.1 {
        let only = |a: &[String], b: &[String]| a.iter().filter(|f| !b.contains(f)).cloned().collect::<Vec<_>>().join(" ");
        out.push(format!(
            "CPU instruction sets: only BASE has [{}], only NEW has [{}]",
            only(base.1, new.1),
            only(new.1, base.1)
        ));
    }
}

/// Refuses (or, allowed, notes) reports measured on different machines or
/// with different settings: their differences are not the code's.
fn check_same_conditions(differences: Vec<String>, o: &CompareOptions, notes: &mut Vec<String>) -> Result<(), Mismatch> {
    if differences.is_empty() {
        return Ok(());
    }
    if o.allow_different_hosts {
        notes.extend(differences.into_iter().map(|d| format!("measured differently (allowed): {d}")));
        return Ok(());
    }
    Err(Mismatch(format!(
        "the reports were measured differently: {}; compare reports of one machine and one set of settings, or pass --allow-different-hosts",
        differences.join("; ")
    )))
}

/// One matched row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompareRow {
    /// Variant id, `run`, or `A`/`B`.
    pub id: String,
    /// Display label.
    pub label: String,
    /// One comparison per metric.
    pub comparisons: Vec<Comparison>,
    /// Whether this row regressed.
    pub regression: bool,
    /// Why, when it did; other remarks otherwise.
    pub notes: Vec<String>,
}

/// The whole comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompareResult {
    /// `bench`, `run` or `ab`.
    pub kind: String,
    /// What the two reports are (workload, device, command).
    pub subject: String,
    /// Matched rows.
    pub rows: Vec<CompareRow>,
    /// Ids of the regressed rows.
    pub regressions: Vec<String>,
    /// Rows present on one side only, and other remarks.
    pub notes: Vec<String>,
    /// The settings.
    pub options: CompareOptions,
}

/// Why two reports cannot be compared.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Mismatch(pub String);

fn is_regression(c: &Comparison) -> bool {
    c.verdict == Verdict::Worse
}

/// How a run ended, in words, when it did not exit 0 (`None` when it did).
fn failure(e: &crate::run::ExitInfo) -> Option<String> {
    match (e.code, &e.signal_name, e.signal) {
        (Some(0), _, _) => None,
        (Some(c), _, _) => Some(format!("exited {c}")),
        (None, Some(name), _) => Some(format!("killed by {name}")),
        (None, None, Some(s)) => Some(format!("killed by signal {s}")),
        (None, None, None) => Some("did not finish".into()),
    }
}

fn bench_values(r: &Report, id: VariantId) -> (Vec<f64>, Vec<f64>, MemoryMetric) {
    let metric = if r.environment.device_kind == "cuda" { MemoryMetric::AllocatorPeakAllocated } else { MemoryMetric::PeakRss };
    let Some(v) = r.variant(id) else { return (Vec::new(), Vec::new(), metric) };
    let times = v.runs.iter().filter_map(|run| median(&run.step_times_ms)).collect();
    let mem = v
        .runs
        .iter()
        .filter_map(|run| run.memory.iter().find(|m| m.metric == metric).and_then(|m| m.bytes).map(|b| b as f64))
        .collect();
    (times, mem, metric)
}

fn compare_bench(base: &Report, new: &Report, o: &CompareOptions) -> Result<CompareResult, Mismatch> {
    let (bw, nw) = (&base.workload, &new.workload);
    if (bw.name.as_str(), bw.size.as_str()) != (nw.name.as_str(), nw.size.as_str()) {
        return Err(Mismatch(format!(
            "different workloads: BASE is {} ({}, batch {}), NEW is {} ({}, batch {})",
            bw.name, bw.size, bw.batch_size, nw.name, nw.size, nw.batch_size
        )));
    }
    let (be, ne) = (&base.environment, &new.environment);
    let mut differences = Vec::new();
    differ("device", &format!("{} ({})", be.device_kind, be.device_name), &format!("{} ({})", ne.device_kind, ne.device_name), &mut differences);
    cpu_differences((&be.cpu_model, &be.cpu_flags), (&ne.cpu_model, &ne.cpu_flags), &mut differences);
    differ("torch", &be.torch_version, &ne.torch_version, &mut differences);
    if be.device_kind == "cuda" || ne.device_kind == "cuda" {
        differ("NVIDIA driver", &be.driver_version, &ne.driver_version, &mut differences);
        differ("torch's CUDA", &be.torch_cuda_version, &ne.torch_cuda_version, &mut differences);
    }
    differ("batch size", &bw.batch_size, &nw.batch_size, &mut differences);
    differ("measured steps", &base.settings.measured_steps, &new.settings.measured_steps, &mut differences);
    differ("warm-up steps", &base.settings.warmup_steps, &new.settings.warmup_steps, &mut differences);
    differ("intra-op threads", &be.torch_threads, &ne.torch_threads, &mut differences);
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    check_same_conditions(differences, o, &mut notes)?;
    for bv in &base.variants {
        let Some(nv) = new.variant(bv.info.id) else {
            notes.push(format!("{}: only in BASE", bv.info.id));
            continue;
        };
        if matches!(bv.status, VariantStatus::Skipped { .. }) && matches!(nv.status, VariantStatus::Skipped { .. }) {
            continue;
        }
        let mut row = CompareRow { id: bv.info.id.to_string(), label: bv.info.label.clone(), comparisons: Vec::new(), regression: false, notes: Vec::new() };
        let ok = |s: &VariantStatus| matches!(s, VariantStatus::Ok);
        if ok(&bv.status) && !ok(&nv.status) {
            row.regression = true;
            row.notes.push(format!("{} in BASE, {} in NEW", bv.status.short(), nv.status.short()));
        } else if !ok(&bv.status) && ok(&nv.status) {
            row.notes.push(format!("{} in BASE, ok in NEW", bv.status.short()));
        }
        let (bt, bm, metric) = bench_values(base, bv.info.id);
        let (nt, nm, _) = bench_values(new, bv.info.id);
        if !bt.is_empty() && !nt.is_empty() {
            row.comparisons.push(compare(Metric::Time, "step time (median per run)", &bt, &nt, &o.time));
        }
        if !bm.is_empty() && !nm.is_empty() {
            row.comparisons.push(compare(Metric::Memory, metric.label(), &bm, &nm, &o.memory));
        }
        row.regression |= row.comparisons.iter().any(is_regression);
        rows.push(row);
    }
    for nv in &new.variants {
        if base.variant(nv.info.id).is_none() {
            notes.push(format!("{}: only in NEW", nv.info.id));
        }
    }
    Ok(finish("bench", format!("{} ({}) on {}", bw.name, bw.size, be.device_name), rows, notes, o))
}

fn single_run(c: &mut Comparison) -> bool {
    // One run per side: no test is possible. The row is judged on the
    // threshold alone, and says so.
    if c.verdict == Verdict::Inconclusive {
        if let Some(ch) = c.change {
            if ch > c.threshold {
                c.warnings.push(format!(
                    "one run per side: no significance test; {:+.1}% is above the allowed {:.1}%, counted as a regression",
                    ch * 100.0,
                    c.threshold * 100.0
                ));
                return true;
            }
        }
    }
    false
}

fn host_differences(base: &crate::run::HostInfo, new: &crate::run::HostInfo) -> Vec<String> {
    let mut out = Vec::new();
    cpu_differences((&base.cpu_model, &base.cpu_flags), (&new.cpu_model, &new.cpu_flags), &mut out);
    differ("logical CPUs", &base.cpu_logical_cores, &new.cpu_logical_cores, &mut out);
    differ("NVIDIA driver", &base.driver_version, &new.driver_version, &mut out);
    out
}

fn compare_run(base: &RunReport, new: &RunReport, o: &CompareOptions) -> Result<CompareResult, Mismatch> {
    let mut notes = Vec::new();
    check_same_conditions(host_differences(&base.host, &new.host), o, &mut notes)?;
    let mut row = CompareRow { id: "run".into(), label: new.command.join(" "), comparisons: Vec::new(), regression: false, notes: Vec::new() };
    // A NEW run that crashed, was killed (the OOM killer sends SIGKILL) or
    // failed is a regression whatever its figures: a crash is fast and small.
    if let Some(how) = failure(&new.exit) {
        row.regression = true;
        row.notes.push(format!("NEW {how}: a failed run is a regression"));
    }
    let m = o.run_metrics;
    if m.has(RunMetrics::WALL) {
        let mut t = compare(Metric::Time, "duration", &[base.duration_s], &[new.duration_s], &o.time);
        row.regression |= single_run(&mut t);
        row.comparisons.push(t);
    }
    // The tree's footprint (PSS) when both reports have it, else RSS.
    let both_pss = base.peak_pss_bytes().is_some() && new.peak_pss_bytes().is_some();
    let (what, peak): (&str, fn(&RunReport) -> Option<u64>) =
        if both_pss { ("peak PSS (tree)", RunReport::peak_pss_bytes) } else { ("peak RSS (tree)", RunReport::peak_rss_bytes) };
    let peaks = if m.has(RunMetrics::MEMORY) { (peak(base), peak(new)) } else { (None, None) };
    if let (Some(b), Some(n)) = peaks {
        let mut m = compare(Metric::Memory, what, &[b as f64], &[n as f64], &o.memory);
        row.regression |= single_run(&mut m);
        row.comparisons.push(m);
    }
    let gpu = |r: &RunReport| -> Option<f64> {
        let v: Vec<u64> = r.gpus.iter().filter_map(|g| g.tree_process.summary().map(|s| s.peak_bytes)).collect();
        (!v.is_empty()).then(|| v.iter().sum::<u64>() as f64)
    };
    let gpus = if m.has(RunMetrics::MEMORY) { (gpu(base), gpu(new)) } else { (None, None) };
    if let (Some(b), Some(n)) = gpus {
        let mut m = compare(Metric::Memory, "peak GPU memory (NVML, tree)", &[b], &[n], &o.memory);
        row.regression |= single_run(&mut m);
        row.comparisons.push(m);
    }
    // Steady-state steps (`run --torch` on both sides): the step times, one
    // sample per step, free of start-up time.
    let steps = if m.has(RunMetrics::STEP_TIME) { (steady_step_times(base), steady_step_times(new)) } else { (None, None) };
    if let (Some(b), Some(n)) = steps {
        let mut c = compare(Metric::Time, "step time (steady state)", &b, &n, &o.time);
        c.warnings.push("unit = one training step of one run: steps of a run are not independent, so the interval is optimistic".into());
        row.regression |= is_regression(&c);
        row.comparisons.push(c);
    }
    let step_peak = |r: &RunReport| r.step_summary().and_then(|s| s.peak_max_bytes.map(|p| (p as f64, s.cuda)));
    let step_peaks = if m.has(RunMetrics::PEAK) { (step_peak(base), step_peak(new)) } else { (None, None) };
    if let (Some((b, bc)), Some((n, nc))) = step_peaks {
        if bc == nc {
            let what = if nc { "peak within a step (CUDA allocator)" } else { "peak within a step (host RSS)" };
            let mut m = compare(Metric::Memory, what, &[b], &[n], &o.memory);
            row.regression |= single_run(&mut m);
            row.comparisons.push(m);
        }
    }
    if let Some(max) = o.max_growth_per_step {
        match new.step_summary() {
            Some(st) => {
                let g = &st.growth;
                if g.verdict == crate::steps::GrowthVerdict::Grows && g.slope_bytes_per_step.is_some_and(|s| s > max) {
                    row.regression = true;
                    row.notes.push(format!(
                        "NEW: memory left after each step {}, above the allowed {} per step",
                        g.describe(),
                        crate::export::fmt_size(max)
                    ));
                } else {
                    row.notes.push(format!("NEW: memory left after each step: {}", g.describe()));
                }
            }
            None => notes.push(
                "--max-growth-per-step: NEW has no training steps (record it with `memprobe run --torch`); growth not checked".into(),
            ),
        }
    }
    if base.command != new.command {
        notes.push(format!("the commands differ: BASE `{}`, NEW `{}`", base.command.join(" "), new.command.join(" ")));
    }
    if base.exit.code != Some(0) || new.exit.code != Some(0) {
        notes.push(format!("exit status: BASE {}, NEW {}", base.exit.shell_status(), new.exit.shell_status()));
    }
    Ok(finish("run", format!("`{}` on {}", new.command.join(" "), new.host.hostname), vec![row], notes, o))
}

fn compare_ab(base: &crate::run::AbReport, new: &crate::run::AbReport, o: &CompareOptions) -> Result<CompareResult, Mismatch> {
    let mut notes = Vec::new();
    check_same_conditions(host_differences(&base.host, &new.host), o, &mut notes)?;
    let mut rows = Vec::new();
    for side in ["a", "b"] {
        let vals = |r: &crate::run::AbReport, f: &dyn Fn(&crate::run::AbRun) -> f64| -> Vec<f64> { r.side(side).map(f).collect() };
        let mut row = CompareRow {
            id: side.to_uppercase(),
            label: (if side == "a" { &new.a } else { &new.b }).join(" "),
            comparisons: vec![
                compare(Metric::Time, "wall time", &vals(base, &|r| r.wall_s), &vals(new, &|r| r.wall_s), &o.time),
                {
                    let pss = base.results.iter().chain(&new.results).all(|r| r.peak_pss_bytes.is_some());
                    let memory = |r: &crate::run::AbRun| if pss { r.peak_pss_bytes.unwrap_or(0) as f64 } else { r.peak_rss_bytes as f64 };
                    compare(
                        Metric::Memory,
                        if pss { "peak PSS (tree)" } else { "peak RSS (tree)" },
                        &vals(base, &memory),
                        &vals(new, &memory),
                        &o.memory,
                    )
                },
            ],
            regression: false,
            notes: Vec::new(),
        };
        row.regression = row.comparisons.iter().any(is_regression);
        let failed: Vec<String> = new.side(side).filter_map(|r| failure(&r.exit)).collect();
        if !failed.is_empty() {
            row.regression = true;
            row.notes.push(format!(
                "NEW: {} of {} runs failed ({}): a failed run is a regression",
                failed.len(),
                new.side(side).count(),
                failed.join(", ")
            ));
        }
        rows.push(row);
    }
    Ok(finish("ab", format!("A `{}` / B `{}`", new.a.join(" "), new.b.join(" ")), rows, notes, o))
}

fn finish(kind: &str, subject: String, rows: Vec<CompareRow>, notes: Vec<String>, o: &CompareOptions) -> CompareResult {
    let regressions = rows.iter().filter(|r| r.regression).map(|r| r.id.clone()).collect();
    CompareResult { kind: kind.into(), subject, rows, regressions, notes, options: *o }
}

/// Compares NEW with BASE.
pub fn compare_reports(base: &AnyReport, new: &AnyReport, o: &CompareOptions) -> Result<CompareResult, Mismatch> {
    match (base, new) {
        (AnyReport::Bench(b), AnyReport::Bench(n)) => compare_bench(b, n, o),
        (AnyReport::Run(b), AnyReport::Run(n)) => compare_run(b, n, o),
        (AnyReport::Ab(b), AnyReport::Ab(n)) => compare_ab(b, n, o),
        (b, n) => Err(Mismatch(format!("BASE is a {} report, NEW is a {} report", b.kind(), n.kind()))),
    }
}

impl CompareResult {
    /// Terminal table or markdown (for `$GITHUB_STEP_SUMMARY`).
    pub fn render(&self, markdown: bool) -> String {
        use comfy_table::presets::{ASCII_MARKDOWN, UTF8_FULL_CONDENSED};
        use comfy_table::{ContentArrangement, Table};
        let mut t = Table::new();
        t.load_preset(if markdown { ASCII_MARKDOWN } else { UTF8_FULL_CONDENSED });
        t.set_content_arrangement(if markdown { ContentArrangement::Disabled } else { ContentArrangement::Dynamic });
        if markdown {
            t.set_header(vec!["row", "metric", "BASE (median, n)", "NEW (median, n)", "change", "verdict", ""]);
        } else {
            // The terminal fits 100 columns: a regression is marked in the
            // verdict cell, the verdict's details follow the table.
            t.set_header(vec!["row", "metric", "BASE\nmedian (n)", "NEW\nmedian (n)", "change", "verdict"]);
        }
        let fmt = |c: &Comparison, s: &Option<crate::verdict::SideStats>| match (s, c.metric) {
            (Some(s), Metric::Time) if c.what.starts_with("step") => format!("{:.2} ms (n={})", s.median, s.n),
            (Some(s), Metric::Time) => format!("{:.3} s (n={})", s.median, s.n),
            (Some(s), Metric::Memory) => format!("{} (n={})", fmt_mib(s.median.max(0.0) as u64), s.n),
            (None, _) => "-".into(),
        };
        for r in &self.rows {
            if r.comparisons.is_empty() {
                let mut row = vec![if markdown { r.label.clone() } else { one_line(&r.label, 20) }, "-".into(), "-".into(), "-".into(), "-".into()];
                if markdown {
                    row.extend([r.notes.join("; "), mark(r.regression)]);
                } else {
                    row.push(if r.regression { "REGRESSION".into() } else { "-".into() });
                }
                t.add_row(row);
            }
            for c in &r.comparisons {
                let change = c.change.map(|x| format!("{:+.1}%", x * 100.0)).unwrap_or_else(|| "-".into());
                let regressed = r.regression && (is_regression(c) || c.warnings.iter().any(|w| w.contains("counted as a regression")));
                if markdown {
                    t.add_row(vec![r.label.clone(), c.what.clone(), fmt(c, &c.base), fmt(c, &c.new), change, c.describe(), mark(regressed)]);
                } else {
                    let verdict = if regressed { format!("{}\nREGRESSION", c.verdict_short()) } else { c.verdict_short().to_string() };
                    t.add_row(vec![one_line(&r.label, 20), c.what.clone(), fmt(c, &c.base), fmt(c, &c.new), change, verdict]);
                }
            }
        }
        let mut out = String::new();
        if markdown {
            out.push_str(&format!("## memprobe compare: {}\n\n", self.subject));
        } else {
            out.push_str(&format!("memprobe compare ({}): {}\n", self.kind, one_line(&self.subject, 75)));
        }
        out.push_str(&t.to_string());
        out.push('\n');
        if !markdown {
            for r in &self.rows {
                for c in &r.comparisons {
                    let text = format!("{}, {}: {}", r.label, c.what, c.describe());
                    out.push_str(&crate::export::table::wrap(&text, crate::export::table::TERMINAL_WIDTH, "  ", "    "));
                }
            }
        }
        let b = if markdown { "\n- " } else { "\n  " };
        if self.regressions.is_empty() {
            out.push_str(&format!(
                "{}no regression (allowed: time {:.1}%, memory {:.1}%)",
                b.trim_start_matches('\n'),
                self.options.time.threshold * 100.0,
                self.options.memory.threshold * 100.0
            ));
        } else {
            out.push_str(&format!("{}REGRESSION in {}", b.trim_start_matches('\n'), self.regressions.join(", ")));
        }
        if let Some(c) = self.rows.iter().flat_map(|r| r.comparisons.first()).next() {
            out.push_str(&format!("{b}verdicts: {}; a regression is significantly worse by more than the allowed amount", c.method()));
        }
        for r in &self.rows {
            for n in &r.notes {
                out.push_str(&format!("{b}{}: {n}", r.id));
            }
            for c in &r.comparisons {
                for w in &c.warnings {
                    out.push_str(&format!("{b}{} {}: {w}", r.id, c.what));
                }
            }
        }
        for n in &self.notes {
            out.push_str(&format!("{b}{n}"));
        }
        out.push('\n');
        if markdown {
            return out;
        }
        // The terminal: every line after the table wrapped at 100 columns.
        let (head, tail) = out.split_at(out.find("\n  ").map_or(out.len(), |i| i + 1));
        let mut wrapped = head.to_string();
        for line in tail.lines() {
            let indent = if line.starts_with("    ") { "    " } else { "  " };
            wrapped.push_str(&crate::export::table::wrap(line.trim_start(), crate::export::table::TERMINAL_WIDTH, indent, "    "));
        }
        wrapped
    }
}


fn mark(regressed: bool) -> String {
    if regressed { "REGRESSION".into() } else { String::new() }
}
