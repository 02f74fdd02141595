//! Summary tables of `run` and `ab` reports (terminal and markdown).

use comfy_table::presets::{ASCII_MARKDOWN, UTF8_FULL_CONDENSED};
use comfy_table::{ContentArrangement, Table};

use super::fmt_mib;
use crate::run::{AbReport, MemorySeries, RunReport};

/// `1 process`, `3 processes`.
pub fn processes(n: usize) -> String {
    if n == 1 {
        "1 process".into()
    } else {
        format!("{n} processes")
    }
}

fn mib_f(b: f64) -> String {
    format!("{:.1} MiB", b / (1024.0 * 1024.0))
}

fn table(markdown: bool) -> Table {
    let mut t = Table::new();
    t.load_preset(if markdown { ASCII_MARKDOWN } else { UTF8_FULL_CONDENSED });
    t.set_content_arrangement(if markdown { ContentArrangement::Disabled } else { ContentArrangement::Dynamic });
    t
}

fn row(t: &mut Table, r: &crate::run::SummaryRow) {
    match r.peak_bytes {
        Some(peak) => t.add_row(vec![
            r.what.clone(),
            fmt_mib(peak),
            r.mean_bytes.map(mib_f).unwrap_or_else(|| "-".into()),
            r.time_to_peak_s.map(|t| format!("{t:.2} s")).unwrap_or_else(|| "-".into()),
            r.note.clone(),
        ]),
        None => t.add_row(vec![r.what.clone(), "-".into(), "-".into(), "-".into(), r.note.clone()]),
    };
}

/// A process that lived for less than this share of the run, and never
/// held more than [`SHORT_LIVED_SHARE`] of the tree's peak, is counted in
/// one row with the others like it (a launcher, a shell, a pyenv shim's
/// helpers); the JSON keeps each.
const SHORT_LIVED_TIME: f64 = 0.05;
const SHORT_LIVED_SHARE: f64 = 0.05;

/// The longest command shown in a row of the table (the JSON has it whole).
const COMMAND_WIDTH: usize = 60;

/// A command on one line, at most `max` characters.
pub(crate) fn one_line(command: &str, max: usize) -> String {
    let flat: String = command.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() > max {
        flat.chars().take(max.saturating_sub(1)).collect::<String>() + "…"
    } else {
        flat
    }
}

/// One line of notes under a table: whole in markdown (`first` then the
/// text), wrapped at the terminal's 100 columns with `rest` before each
/// continuation otherwise.
fn note_line(text: &str, markdown: bool, first: &str, rest: &str) -> String {
    if markdown {
        format!("{first}{text}\n")
    } else {
        super::table::wrap(text, super::table::TERMINAL_WIDTH, first, rest)
    }
}

fn summary_row(what: String, s: &MemorySeries, note: String) -> crate::run::SummaryRow {
    let x = s.summary();
    crate::run::SummaryRow {
        what,
        peak_bytes: x.map(|x| x.peak_bytes),
        mean_bytes: x.map(|x| x.mean_bytes),
        time_to_peak_s: x.map(|x| x.time_to_peak_s),
        note,
    }
}

/// Every row of the `run` table, as figures: the JSON `summary` holds the
/// same rows.
pub fn run_rows(r: &RunReport) -> Vec<crate::run::SummaryRow> {
    let mut rows = Vec::new();
    if !r.tree_pss.bytes.is_empty() {
        rows.push(summary_row(
            format!("host PSS, whole tree ({}): its footprint", processes(r.processes.len())),
            &r.tree_pss,
            "shared pages counted once".into(),
        ));
    }
    rows.push(summary_row(
        format!("host RSS, whole tree ({})", processes(r.processes.len())),
        &r.tree_rss,
        if r.tree_pss.bytes.is_empty() { String::new() } else { "shared pages counted per process".into() },
    ));
    for g in &r.gpus {
        let energy = g.energy_j.map(|e| format!("energy {e:.1} J")).unwrap_or_default();
        if !g.tree_process.bytes.is_empty() {
            rows.push(summary_row(format!("GPU {} {} · NVML, the tree's processes", g.index, g.name), &g.tree_process, energy.clone()));
        }
        rows.push(summary_row(format!("GPU {} {} · NVML device used (all processes)", g.index, g.name), &g.device_used, energy));
    }
    if let Some(tv) = &r.torch {
        for d in &tv.devices {
            rows.push(summary_row(
                format!("PID {} cuda:{} · torch allocated", d.pid, d.device),
                &d.allocated,
                format!("max {}", fmt_mib(d.peak_allocated_bytes)),
            ));
            rows.push(summary_row(
                format!("PID {} cuda:{} · torch reserved", d.pid, d.device),
                &d.reserved,
                format!("max {}", fmt_mib(d.peak_reserved_bytes)),
            ));
        }
    }
    let tree_peak = r.tree_rss.summary().map_or(0, |s| s.peak_bytes) as f64;
    let (mut short, mut short_peak) = (0usize, 0u64);
    for p in &r.processes {
        let peak = p.rss.summary().map_or(0, |s| s.peak_bytes).max(p.hwm_bytes.unwrap_or(0));
        let lived = p.lived_s(r.interval_ms / 1000.0);
        if lived < SHORT_LIVED_TIME * r.duration_s && (peak as f64) <= SHORT_LIVED_SHARE * tree_peak {
            short += 1;
            short_peak = short_peak.max(peak);
            continue;
        }
        let hwm = p.hwm_bytes.map(|h| format!("VmHWM {}", fmt_mib(h))).unwrap_or_default();
        let pss = p.pss.summary().map(|s| format!("peak PSS {}", fmt_mib(s.peak_bytes)));
        // CPU time and share: what tuning DataLoader workers needs.
        let cpu = p.cpu_s.map(|c| match p.cpu_share(r.interval_ms / 1000.0) {
            Some(share) => format!("CPU {c:.1} s ({:.0}% of a core)", share * 100.0),
            None => format!("CPU {c:.1} s"),
        });
        let note = [Some(hwm).filter(|h| !h.is_empty()), pss, cpu].into_iter().flatten().collect::<Vec<_>>().join(", ");
        // A command line with line breaks (`python -c "..."`) stays on one row.
        rows.push(summary_row(format!("PID {} {} · RSS", p.pid, one_line(&p.command, COMMAND_WIDTH)), &p.rss, note));
    }
    if short > 0 {
        rows.push(crate::run::SummaryRow {
            what: format!("{} short-lived (under {:.0}% of the run, small)", processes(short), SHORT_LIVED_TIME * 100.0),
            peak_bytes: Some(short_peak),
            mean_bytes: None,
            time_to_peak_s: None,
            note: "the largest one's peak RSS; each is in the JSON".into(),
        });
    }
    rows
}

/// The summary of a `run` report: peak and mean memory per device and per
/// process, time to peak, duration, energy, the sampler's own cost.
pub fn render_run(r: &RunReport, markdown: bool) -> String {
    render_run_on(r, markdown, false)
}

/// [`render_run`] for the terminal summary that `run` prints on stderr: the
/// table fits stderr's terminal (not stdout's, which the job may have
/// redirected), or is not wrapped when stderr is not a terminal.
pub fn render_run_stderr(r: &RunReport) -> String {
    render_run_on(r, false, true)
}

fn render_run_on(r: &RunReport, markdown: bool, on_stderr: bool) -> String {
    let mut out = String::new();
    let status = match (&r.exit.code, &r.exit.signal_name) {
        (Some(c), _) => format!("exit code {c}"),
        (None, Some(s)) => format!("killed by {s}"),
        _ => "unknown exit".into(),
    };
    if markdown {
        out.push_str(&format!("# memprobe run: `{}`\n\n", r.command.join(" ")));
        out.push_str(&format!(
            "{} on {} ({}), {:.2} s, {status}, sampled every {} ms\n\n",
            r.host.hostname, r.host.cpu_model, r.host.os, r.duration_s, r.interval_ms
        ));
    } else {
        out.push_str(&format!(
            "memprobe run: {}\n{} · {:.2} s · {status} · sampled every {} ms\n",
            one_line(&r.command.join(" "), 200),
            r.host.hostname,
            r.duration_s,
            r.interval_ms
        ));
    }
    let mut t = table(markdown);
    if on_stderr {
        t.use_stderr();
    }
    t.set_header(vec!["memory", "peak", "mean", "time to peak", "note"]);
    for r in &run_rows(r) {
        row(&mut t, r);
    }
    out.push_str(&t.to_string());
    out.push('\n');
    let bullet = if markdown { "- " } else { "  " };
    if markdown {
        out.push('\n');
    }
    if let Some(st) = r.summary.as_ref().and_then(|s| s.steps.as_ref()).cloned().or_else(|| r.step_summary()) {
        out.push_str(&render_steps(&st, markdown));
    }
    if let Some(l) = &r.lint {
        out.push_str(&render_lint(l, markdown));
    }
    if let Some(n) = &r.gpu_note {
        out.push_str(&format!("{bullet}GPU: {n}\n"));
    }
    for g in &r.gpus {
        for n in &g.notes {
            out.push_str(&format!("{bullet}GPU {}: {n}\n", g.index));
        }
    }
    if let Some(tv) = &r.torch {
        for p in &tv.processes {
            if let Some(n) = &p.note {
                out.push_str(&format!("{bullet}--torch, PID {}: {n}\n", p.pid));
            }
        }
    }
    for s in &r.forwarded_signals {
        out.push_str(&format!("{bullet}signal: {s}\n"));
    }
    out.push_str(&format!(
        "{bullet}sampler: {} samples, {:.0} µs per sample, {:.1}% of one core ({})\n",
        r.sampler.samples,
        r.sampler.mean_sample_us,
        r.sampler.cpu_fraction * 100.0,
        r.sampler.what
    ));
    for n in &r.notes {
        out.push_str(&format!("{bullet}note: {n}\n"));
    }
    out
}

/// The summary of an `ab` report: medians, spread and verdict per metric.
pub fn render_ab(r: &AbReport, markdown: bool) -> String {
    let mut out = String::new();
    if markdown {
        out.push_str("# memprobe ab\n\n");
        out.push_str(&format!("- A: `{}`\n- B: `{}`\n\n", r.a.join(" "), r.b.join(" ")));
    } else {
        out.push_str(&format!(
            "memprobe ab: {} runs each, alternating A B A B\n  A: {}\n  B: {}\n",
            r.runs,
            one_line(&r.a.join(" "), 95),
            one_line(&r.b.join(" "), 95)
        ));
    }
    if let Some(f) = &r.fix {
        let text = format!(
            "B is A on a copy of {} with memlint's {} fix ({} finding(s) in {} file(s); the diff is in the JSON)",
            f.root, f.code, f.fixed, f.files
        );
        out.push_str(&if markdown { format!("{text}\n\n") } else { super::table::wrap(&text, super::table::TERMINAL_WIDTH, "  ", "    ") });
    }
    let mut t = table(markdown);
    if markdown {
        t.set_header(vec!["metric", "A median", "A spread (min–max)", "B median", "B spread (min–max)", "B vs A", "verdict"]);
    } else {
        t.set_header(vec!["metric", "A median", "A min–max", "B median", "B min–max", "B vs A", "verdict"]);
    }
    for c in &r.comparisons {
        // A step takes milliseconds, a process seconds.
        let per_step = c.what.starts_with("step time");
        let fmt = |x: f64| match c.metric {
            crate::verdict::Metric::Time if per_step => format!("{} ms", super::fmt_ms(x * 1000.0)),
            crate::verdict::Metric::Time => format!("{x:.3} s"),
            crate::verdict::Metric::Memory => mib_f(x),
        };
        let side = |s: &Option<crate::verdict::SideStats>| match s {
            Some(s) if markdown => (fmt(s.median), format!("{}–{} (n={})", fmt(s.min), fmt(s.max), s.n)),
            // The terminal: the unit once, the run count in the title.
            Some(s) => {
                let (lo, hi) = (fmt(s.min), fmt(s.max));
                let unit = hi.rsplit(' ').next().unwrap_or("").to_string();
                (fmt(s.median), format!("{}–{hi}", lo.trim_end_matches(unit.as_str()).trim_end()))
            }
            None => ("-".into(), "-".into()),
        };
        let (am, asp) = side(&c.base);
        let (bm, bsp) = side(&c.new);
        let change = c.change.map(|x| format!("{:+.1}%", x * 100.0)).unwrap_or_else(|| "-".into());
        // In the terminal the verdict's interval and p-value go below the
        // table, so that it fits 100 columns.
        let verdict = if markdown { c.describe() } else { c.verdict_short().to_string() };
        t.add_row(vec![c.what.clone(), am, asp, bm, bsp, change, verdict]);
    }
    out.push_str(&t.to_string());
    out.push('\n');
    let bullet = if markdown { "- " } else { "  " };
    if markdown {
        out.push('\n');
    } else {
        for c in &r.comparisons {
            out.push_str(&super::table::wrap(&format!("{}: {}", c.what, c.describe()), super::table::TERMINAL_WIDTH, bullet, "    "));
        }
    }
    // Markdown keeps its lines whole; the terminal wraps them at 100 columns.
    let line = |text: String| note_line(&text, markdown, bullet, "    ");
    for g in &r.growth {
        out.push_str(&line(format!("memory left after each step, {g}")));
    }
    if let Some(f) = &r.fix {
        let headline = fix_headline(&f.code, r);
        out.push_str(&line(if markdown { format!("**{headline}**") } else { headline }));
    }
    let mut methods: Vec<String> = Vec::new();
    for c in &r.comparisons {
        let m = format!("{} ({})", c.method(), match c.metric {
            crate::verdict::Metric::Time => "time",
            crate::verdict::Metric::Memory => "memory",
        });
        if !methods.contains(&m) {
            methods.push(m);
        }
    }
    for m in methods {
        out.push_str(&line(format!("verdict: {m}")));
    }
    for c in &r.comparisons {
        for w in &c.warnings {
            out.push_str(&line(format!("warning ({}): {w}", c.what)));
        }
    }
    for n in &r.notes {
        out.push_str(&line(format!("note: {n}")));
    }
    out
}

/// The steady-state steps of a run: time, peak, what each step leaves, the
/// leak verdict.
fn render_steps(st: &crate::steps::StepSummary, markdown: bool) -> String {
    use super::{fmt_ms, fmt_size};
    let (bullet, indent) = if markdown { ("- ", "  ") } else { ("  ", "    ") };
    let source = if st.cuda { "CUDA caching allocator" } else { "host RSS" };
    let mut out = String::new();
    let head = format!(
        "steps: PID {} · a step ends at each {} · {} steps, the first {} left out as warm-up · memory: {source}",
        st.pid,
        st.kind.describe(),
        st.steps,
        st.warmup_steps
    );
    let mut lines = vec![head];
    if let (Some(m), Some(iqr)) = (st.step_median_s, st.step_iqr_s) {
        lines.push(format!(
            "step time {} ms median (IQR {} ms){}",
            fmt_ms(m * 1000.0),
            fmt_ms(iqr * 1000.0),
            st.steps_per_s.map(|r| format!(", {r:.2} steps/s")).unwrap_or_default()
        ));
    }
    if let (Some(max), Some(med)) = (st.peak_max_bytes, st.peak_median_bytes) {
        lines.push(format!("peak within a step {} (median {})", fmt_size(max as f64), fmt_size(med as f64)));
    }
    if let (Some(a), Some(b)) = (st.left_first_bytes, st.left_last_bytes) {
        lines.push(format!("left after a step: {} after warm-up, {} after the last", fmt_size(a as f64), fmt_size(b as f64)));
    }
    lines.push(format!("memory left after each step: {}", st.growth.describe()));
    let rest = format!("{indent}  ");
    for (i, l) in lines.iter().enumerate() {
        out.push_str(&note_line(l, markdown, if i == 0 { bullet } else { indent }, &rest));
    }
    if markdown {
        out.push('\n');
    }
    out
}

/// memlint's findings beside the figures, best explanation first.
fn render_lint(l: &crate::run::LintView, markdown: bool) -> String {
    let (bullet, indent) = if markdown { ("- ", "  ") } else { ("  ", "    ") };
    let mut out = String::new();
    let line = |text: &str, first: &str, rest: &str| note_line(text, markdown, first, rest);
    if let Some(n) = &l.note {
        out.push_str(&line(n, bullet, indent));
        return out;
    }
    let head = format!(
        "memlint ({}) on {}: {}",
        l.rules.join(", "),
        l.root,
        match l.findings.len() {
            0 => "no findings".to_string(),
            1 => "1 finding".to_string(),
            n => format!("{n} findings, the best explanation of the figures first"),
        }
    );
    out.push_str(&line(&head, bullet, indent));
    for (i, f) in l.findings.iter().enumerate() {
        let text = format!(
            "{}. {}:{}:{} {} {}: {}{}",
            i + 1,
            f.path,
            f.line,
            f.column,
            f.code,
            f.name,
            f.message,
            f.explains.as_ref().map(|e| format!(" -> explains: {e}")).unwrap_or_default()
        );
        out.push_str(&line(&text, indent, &format!("{indent}   ")));
    }
    if markdown {
        out.push('\n');
    }
    out
}

/// "ML202 fix: growth 34.7 MiB per step -> flat; peak within a step (host
/// RSS) -44.2% (smaller, p=0.029); ...": what the fix changed, metric by
/// metric, with each verdict.
fn fix_headline(code: &str, r: &AbReport) -> String {
    let mut parts = Vec::new();
    let side = |s: &str| r.growth.iter().find_map(|g| g.strip_prefix(&format!("{s}: ")).map(str::to_string));
    if let (Some(a), Some(b)) = (side("A"), side("B")) {
        parts.push(format!("growth {a} -> {b}"));
    }
    for c in &r.comparisons {
        let change = c.change.map(|x| format!("{:+.1}%", x * 100.0)).unwrap_or_else(|| "-".into());
        let p = c.p_value.map(|p| if p < 0.001 { ", p<0.001".to_string() } else { format!(", p={p:.3}") }).unwrap_or_default();
        parts.push(format!("{} {change} ({}{p})", c.what, c.verdict_short()));
    }
    format!("{code} fix: {}", parts.join("; "))
}
