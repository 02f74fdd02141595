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

fn row(t: &mut Table, what: String, s: &MemorySeries, extra: String) {
    match s.summary() {
        Some(x) => t.add_row(vec![
            what,
            fmt_mib(x.peak_bytes),
            mib_f(x.mean_bytes),
            format!("{:.2} s", x.time_to_peak_s),
            extra,
        ]),
        None => t.add_row(vec![what, "-".into(), "-".into(), "-".into(), extra]),
    };
}

/// The summary of a `run` report: peak and mean memory per device and per
/// process, time to peak, duration, energy, the sampler's own cost.
pub fn render_run(r: &RunReport, markdown: bool) -> String {
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
            r.command.join(" "),
            r.host.hostname,
            r.duration_s,
            r.interval_ms
        ));
    }
    let mut t = table(markdown);
    t.set_header(vec!["memory", "peak", "mean", "time to peak", "note"]);
    if !r.tree_pss.bytes.is_empty() {
        row(
            &mut t,
            format!("host PSS, whole tree ({}): its footprint", processes(r.processes.len())),
            &r.tree_pss,
            "shared pages counted once".into(),
        );
    }
    row(
        &mut t,
        format!("host RSS, whole tree ({})", processes(r.processes.len())),
        &r.tree_rss,
        if r.tree_pss.bytes.is_empty() { String::new() } else { "shared pages counted per process".into() },
    );
    for g in &r.gpus {
        let energy = g.energy_j.map(|e| format!("energy {e:.1} J")).unwrap_or_default();
        if !g.tree_process.bytes.is_empty() {
            row(&mut t, format!("GPU {} {} · NVML, the tree's processes", g.index, g.name), &g.tree_process, energy.clone());
        }
        row(&mut t, format!("GPU {} {} · NVML device used (all processes)", g.index, g.name), &g.device_used, energy);
    }
    if let Some(tv) = &r.torch {
        for d in &tv.devices {
            row(
                &mut t,
                format!("PID {} cuda:{} · torch allocated", d.pid, d.device),
                &d.allocated,
                format!("max {}", fmt_mib(d.peak_allocated_bytes)),
            );
            row(
                &mut t,
                format!("PID {} cuda:{} · torch reserved", d.pid, d.device),
                &d.reserved,
                format!("max {}", fmt_mib(d.peak_reserved_bytes)),
            );
        }
    }
    for p in &r.processes {
        let hwm = p.hwm_bytes.map(|h| format!("VmHWM {}", fmt_mib(h))).unwrap_or_default();
        let pss = p.pss.summary().map(|s| format!("peak PSS {}", fmt_mib(s.peak_bytes)));
        let note = [Some(hwm).filter(|h| !h.is_empty()), pss].into_iter().flatten().collect::<Vec<_>>().join(", ");
        row(&mut t, format!("PID {} {} · RSS", p.pid, p.command), &p.rss, note);
    }
    out.push_str(&t.to_string());
    out.push('\n');
    let bullet = if markdown { "- " } else { "  " };
    if markdown {
        out.push('\n');
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
        out.push_str(&format!("memprobe ab: {} runs each, alternating A B A B\n  A: {}\n  B: {}\n", r.runs, r.a.join(" "), r.b.join(" ")));
    }
    let mut t = table(markdown);
    t.set_header(vec!["metric", "A median", "A spread (min–max)", "B median", "B spread (min–max)", "B vs A", "verdict"]);
    for c in &r.comparisons {
        let fmt = |x: f64| match c.metric {
            crate::verdict::Metric::Time => format!("{x:.3} s"),
            crate::verdict::Metric::Memory => mib_f(x),
        };
        let side = |s: &Option<crate::verdict::SideStats>| match s {
            Some(s) => (fmt(s.median), format!("{}–{} (n={})", fmt(s.min), fmt(s.max), s.n)),
            None => ("-".into(), "-".into()),
        };
        let (am, asp) = side(&c.base);
        let (bm, bsp) = side(&c.new);
        let change = c.change.map(|x| format!("{:+.1}%", x * 100.0)).unwrap_or_else(|| "-".into());
        t.add_row(vec![c.what.clone(), am, asp, bm, bsp, change, c.describe()]);
    }
    out.push_str(&t.to_string());
    out.push('\n');
    let bullet = if markdown { "- " } else { "  " };
    if markdown {
        out.push('\n');
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
        out.push_str(&format!("{bullet}verdict: {m}\n"));
    }
    for c in &r.comparisons {
        for w in &c.warnings {
            out.push_str(&format!("{bullet}warning ({}): {w}\n", c.what));
        }
    }
    for n in &r.notes {
        out.push_str(&format!("{bullet}note: {n}\n"));
    }
    out
}
