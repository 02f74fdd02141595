//! Charts drawn with plotters (SVG backend): a bench report as bar charts of
//! step time and memory per variant, `run` reports as a memory timeline with
//! one series per node, process group and GPU.

use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::run::{AbReport, MemorySeries, RunReport};
use crate::stats::Stats;
use crate::{MemoryMetric, Report, ReportError, VariantStatus};

const MIB: f64 = 1024.0 * 1024.0;

/// Font families as an SVG list: renderers without the first fall back.
const FONT: &str = "DejaVu Sans, Helvetica, Arial, sans-serif";

fn chart_err<E: std::fmt::Display>(e: E) -> ReportError {
    ReportError::Chart(e.to_string())
}

struct Bar {
    label: String,
    value: Option<f64>,
    lo: Option<f64>,
    hi: Option<f64>,
    note: Option<String>,
}

fn bar_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    x_desc: &str,
    bars: &[Bar],
    color: RGBColor,
) -> Result<(), ReportError>
where
    DB::ErrorType: 'static,
{
    let n = bars.len().max(1);
    let top = bars.iter().filter_map(|b| b.hi.or(b.value)).fold(0.0f64, f64::max).max(1e-9);
    let bottom = bars.iter().filter_map(|b| b.lo.or(b.value)).fold(f64::INFINITY, f64::min);
    // Bars of sizes that differ by a few percent over a large common
    // baseline (every worker's libraries and allocator pool) would look
    // equal from zero: the axis then starts below the smallest, and the
    // caption says where.
    let from = if bottom.is_finite() && bottom > 0.5 * top {
        let span = (top - bottom).max(top * 0.02);
        (bottom - span).max(0.0).floor()
    } else {
        0.0
    };
    let max = top + (top - from) * 0.15;
    let title = if from > 0.0 { format!("{title} (axis from {from:.0} {x_desc})") } else { title.to_string() };
    let title = title.as_str();
    // First bar at the top.
    let labels: Vec<String> = bars.iter().rev().map(|b| b.label.clone()).collect();
    let mut chart = ChartBuilder::on(area)
        .caption(title, (FONT, 18))
        .margin(10)
        .x_label_area_size(36)
        .y_label_area_size(150)
        .build_cartesian_2d(from..max, (0..n).into_segmented())
        .map_err(chart_err)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .label_style((FONT, 12))
        .axis_desc_style((FONT, 13))
        .x_desc(x_desc)
        .y_label_formatter(&|v: &SegmentValue<usize>| match v {
            SegmentValue::CenterOf(i) => labels.get(*i).cloned().unwrap_or_default(),
            _ => String::new(),
        })
        .y_labels(n)
        .draw()
        .map_err(chart_err)?;
    for (k, b) in bars.iter().enumerate() {
        let i = n - 1 - k;
        match b.value {
            Some(v) => {
                let mut rect =
                    Rectangle::new([(from, SegmentValue::Exact(i)), (v, SegmentValue::Exact(i + 1))], color.mix(0.75).filled());
                rect.set_margin(5, 5, 0, 0);
                chart.draw_series(std::iter::once(rect)).map_err(chart_err)?;
                if let (Some(lo), Some(hi)) = (b.lo, b.hi) {
                    chart
                        .draw_series(std::iter::once(PathElement::new(
                            vec![(lo, SegmentValue::CenterOf(i)), (hi, SegmentValue::CenterOf(i))],
                            BLACK.stroke_width(2),
                        )))
                        .map_err(chart_err)?;
                }
            }
            None => {
                let text = b.note.clone().unwrap_or_else(|| "not measured".into());
                chart
                    .draw_series(std::iter::once(Text::new(
                        text,
                        (from + (max - from) * 0.02, SegmentValue::CenterOf(i)),
                        TextStyle::from((FONT, 13).into_font())
                            .color(&RGBColor(110, 110, 110))
                            .pos(Pos::new(HPos::Left, VPos::Center)),
                    )))
                    .map_err(chart_err)?;
            }
        }
    }
    Ok(())
}

/// A bench report as two bar charts: median step time per variant (whiskers:
/// interquartile range of all steps) and median peak memory per variant.
pub fn bench_svg(r: &Report) -> Result<String, ReportError> {
    let metric = if r.environment.device_kind == "cuda" { MemoryMetric::AllocatorPeakAllocated } else { MemoryMetric::PeakRss };
    let mut time_bars = Vec::new();
    let mut mem_bars = Vec::new();
    for v in &r.variants {
        let note = match &v.status {
            VariantStatus::Ok => None,
            VariantStatus::Skipped { .. } => Some("skipped".to_string()),
            other => Some(other.short()),
        };
        let step = v.summary.as_ref().map(|s| &s.step_time_ms);
        time_bars.push(Bar {
            label: v.info.label.clone(),
            value: step.map(|s| s.median),
            lo: step.map(|s: &Stats| s.p25),
            hi: step.map(|s: &Stats| s.p75),
            note: note.clone(),
        });
        let m = v.summary.as_ref().and_then(|s| s.memory.iter().find(|m| m.metric == metric));
        mem_bars.push(Bar {
            label: v.info.label.clone(),
            value: m.map(|m| m.median_bytes as f64 / MIB),
            lo: m.map(|m| m.min_bytes as f64 / MIB),
            hi: m.map(|m| m.max_bytes as f64 / MIB),
            note,
        });
    }
    let rows = r.variants.len().max(1) as u32;
    let (w, h) = (1100u32, 110 + 34 * rows);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (w, h)).into_drawing_area();
        root.fill(&WHITE).map_err(chart_err)?;
        let root = root
            .titled(
                &format!("memprobe bench: {} ({}) on {}, torch {}", r.workload.name, r.workload.size, r.environment.device_name, r.environment.torch_version),
                (FONT, 20),
            )
            .map_err(chart_err)?;
        let (left, right) = root.split_horizontally(w / 2);
        bar_panel(&left, "step time, median (whiskers: IQR of steps)", "ms", &time_bars, RGBColor(31, 119, 180))?;
        bar_panel(&right, &format!("{}, median (whiskers: min–max of runs)", metric.label()), "MiB", &mem_bars, RGBColor(255, 127, 14))?;
        root.present().map_err(chart_err)?;
    }
    Ok(svg)
}

/// An `ab` report as bar charts, one panel per compared metric: the median
/// of each side, whiskers from its fastest (smallest) to its slowest
/// (largest) run, and the verdict in the panel's caption.
pub fn ab_svg(r: &AbReport) -> Result<String, ReportError> {
    let panels: Vec<&crate::verdict::Comparison> = r.comparisons.iter().take(3).collect();
    let k = panels.len().max(1) as u32;
    let (w, h) = (1100u32, 220u32);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (w, h)).into_drawing_area();
        root.fill(&WHITE).map_err(chart_err)?;
        let title = format!("memprobe ab: A `{}` vs B `{}`", shorten(&r.a.join(" "), 40), shorten(&r.b.join(" "), 40));
        let root = root.titled(&title, (FONT, 18)).map_err(chart_err)?;
        let areas = root.split_evenly((1, k as usize));
        for (area, c) in areas.iter().zip(&panels) {
            let (unit, scale) = match c.metric {
                crate::verdict::Metric::Time => ("s", 1.0),
                crate::verdict::Metric::Memory => ("MiB", MIB),
            };
            let bar = |label: &str, s: &Option<crate::verdict::SideStats>| Bar {
                label: label.to_string(),
                value: s.map(|s| s.median / scale),
                lo: s.map(|s| s.min / scale),
                hi: s.map(|s| s.max / scale),
                note: s.is_none().then(|| "no runs".to_string()),
            };
            let bars = [bar("A", &c.base), bar("B", &c.new)];
            let caption = format!("{}: B {}", c.what, c.verdict_text());
            bar_panel(area, &caption, unit, &bars, RGBColor(31, 119, 180))?;
        }
        root.present().map_err(chart_err)?;
    }
    Ok(svg)
}

struct Line {
    label: String,
    series: MemorySeries,
    dashed: bool,
}

/// `run` reports as one memory timeline. With several reports (the nodes of
/// one job, `report --merge`) every series is prefixed with its node.
pub fn run_svg(reports: &[RunReport]) -> Result<String, ReportError> {
    let mut lines = Vec::new();
    let many = reports.len() > 1;
    for r in reports {
        let node = if many { format!("{}: ", r.host.hostname) } else { String::new() };
        if !r.tree_pss.bytes.is_empty() {
            lines.push(Line { label: format!("{node}host PSS, tree: its footprint"), series: r.tree_pss.clone(), dashed: false });
        }
        lines.push(Line { label: format!("{node}host RSS, tree ({})", super::run::processes(r.processes.len())), series: r.tree_rss.clone(), dashed: false });
        // The largest processes of a big tree get their own line.
        if r.processes.len() > 1 {
            let mut procs: Vec<_> = r.processes.iter().filter_map(|p| p.rss.summary().map(|s| (s.peak_bytes, p))).collect();
            procs.sort_by_key(|p| std::cmp::Reverse(p.0));
            for (_, p) in procs.into_iter().take(4) {
                let mut cmd = p.command.clone();
                if cmd.chars().count() > 40 {
                    cmd = cmd.chars().take(39).collect::<String>() + "…";
                }
                lines.push(Line { label: format!("{node}PID {} {cmd}", p.pid), series: p.rss.clone(), dashed: true });
            }
        }
        for g in &r.gpus {
            if !g.tree_process.bytes.is_empty() {
                lines.push(Line { label: format!("{node}GPU {} NVML, tree processes", g.index), series: g.tree_process.clone(), dashed: false });
            } else {
                lines.push(Line { label: format!("{node}GPU {} NVML device used", g.index), series: g.device_used.clone(), dashed: true });
            }
        }
        if let Some(t) = &r.torch {
            for d in &t.devices {
                lines.push(Line { label: format!("{node}PID {} cuda:{} torch allocated", d.pid, d.device), series: d.allocated.clone(), dashed: false });
                lines.push(Line { label: format!("{node}PID {} cuda:{} torch reserved", d.pid, d.device), series: d.reserved.clone(), dashed: true });
            }
        }
    }
    let t_max = lines.iter().filter_map(|l| l.series.t_s.last().copied()).fold(0.0f64, f64::max).max(1e-3);
    // Headroom for the legend in the upper left (about 20 px a line of a
    // 480 px plot), so that it does not cover the data.
    let legend = (lines.len() as f64 * 20.0 + 16.0) / 480.0;
    let peak = lines.iter().flat_map(|l| l.series.bytes.iter()).fold(0u64, |a, &b| a.max(b)) as f64 / MIB;
    let y_max = peak * 1.05 / (1.0 - legend.min(0.6)) + 1.0;
    let title = match reports {
        [one] => format!("memprobe run: {}", shorten(&one.command.join(" "), 80)),
        _ => format!("memprobe run, {} nodes merged: {}", reports.len(), reports.first().map(|r| shorten(&r.command.join(" "), 60)).unwrap_or_default()),
    };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1100, 560)).into_drawing_area();
        root.fill(&WHITE).map_err(chart_err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, (FONT, 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..t_max, 0f64..y_max)
            .map_err(chart_err)?;
        chart
            .configure_mesh()
            .label_style((FONT, 12))
            .axis_desc_style((FONT, 13))
            .x_desc("seconds since start")
            .y_desc("MiB")
            .draw()
            .map_err(chart_err)?;
        for (i, l) in lines.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let pts: Vec<(f64, f64)> = l.series.t_s.iter().zip(&l.series.bytes).map(|(t, b)| (*t, *b as f64 / MIB)).collect();
            let style = color.stroke_width(if l.dashed { 1 } else { 2 });
            let s = if l.dashed {
                chart.draw_series(DashedLineSeries::new(pts, 6, 4, style)).map_err(chart_err)?
            } else {
                chart.draw_series(LineSeries::new(pts, style)).map_err(chart_err)?
            };
            s.label(l.label.clone()).legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .label_font((FONT, 13))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .draw()
            .map_err(chart_err)?;
        root.present().map_err(chart_err)?;
    }
    Ok(svg)
}

fn shorten(s: &str, n: usize) -> String {
    if s.chars().count() > n {
        s.chars().take(n - 1).collect::<String>() + "…"
    } else {
        s.to_string()
    }
}
