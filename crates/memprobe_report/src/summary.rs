use std::collections::HashMap;

use crate::stats::{median, Stats};
use crate::verdict::{compare, Metric, VerdictConfig};
use crate::{MemoryMetric, MemorySummary, Report, VariantId, VariantSummary};

/// Recomputes every variant's [`VariantSummary`] from its raw runs.
///
/// Variants are summarized first on their own, then compared with the variant
/// named by `compared_to` (speedup, memory deltas). A variant without a
/// successful run gets no summary.
pub fn summarize(report: &mut Report) {
    let peaks: HashMap<String, f64> = report
        .environment
        .peak_flops
        .iter()
        .map(|p| (p.precision.clone(), p.tflops))
        .collect();
    let device_name = report.environment.device_name.clone();

    for v in &mut report.variants {
        v.summary = None;
        let all: Vec<f64> = v.runs.iter().flat_map(|r| r.step_times_ms.iter().copied()).collect();
        let per_run: Vec<f64> = v.runs.iter().filter_map(|r| median(&r.step_times_ms)).collect();
        let (Some(step), Some(run_med)) = (Stats::from_samples(&all), Stats::from_samples(&per_run))
        else {
            continue;
        };
        let samples = v.runs.first().map(|r| r.samples_per_step).unwrap_or(0) as f64;
        let samples_per_s = if step.median > 0.0 { samples / (step.median / 1e3) } else { 0.0 };

        let mut memory = Vec::new();
        for metric in MemoryMetric::ORDER {
            let figs: Vec<(u64, String)> = v
                .runs
                .iter()
                .flat_map(|r| r.memory.iter())
                .filter(|m| m.metric == metric)
                .filter_map(|m| m.bytes.map(|b| (b, m.source.clone())))
                .collect();
            if figs.is_empty() {
                continue;
            }
            let vals: Vec<f64> = figs.iter().map(|(b, _)| *b as f64).collect();
            let Some(s) = Stats::from_samples(&vals) else { continue };
            memory.push(MemorySummary {
                metric,
                median_bytes: s.median.round() as u64,
                min_bytes: s.min as u64,
                max_bytes: s.max as u64,
                delta_bytes: None,
                delta_ratio: None,
                source: figs[0].1.clone(),
            });
        }

        let (achieved_tflops, mfu, mfu_note) = match v.info.flops_per_step {
            None => (None, None, Some("FLOPs not counted for this workload".to_string())),
            Some(f) if step.median > 0.0 => {
                let achieved = f / (step.median / 1e3) / 1e12;
                match peaks.get(&v.info.precision) {
                    Some(&peak) if peak > 0.0 => (Some(achieved), Some(achieved / peak), None),
                    _ => (
                        Some(achieved),
                        None,
                        Some(format!("no known {} peak for {device_name}", v.info.precision)),
                    ),
                }
            }
            Some(_) => (None, None, Some("zero step time".to_string())),
        };

        v.summary = Some(VariantSummary {
            step_time_ms: step,
            run_median_ms: run_med,
            samples_per_s,
            speedup: None,
            memory,
            achieved_tflops,
            mfu,
            mfu_note,
            time_verdict: None,
            memory_verdict: None,
        });
    }

    // Per-run values for the verdicts: the unit is a run.
    let primary = if report.environment.device_kind == "cuda" { MemoryMetric::AllocatorPeakAllocated } else { MemoryMetric::PeakRss };
    let per_run: HashMap<VariantId, (Vec<f64>, Vec<f64>)> = report
        .variants
        .iter()
        .map(|v| {
            let t = v.runs.iter().filter_map(|r| median(&r.step_times_ms)).collect();
            let m = v
                .runs
                .iter()
                .filter_map(|r| r.memory.iter().find(|m| m.metric == primary).and_then(|m| m.bytes).map(|b| b as f64))
                .collect();
            (v.info.id, (t, m))
        })
        .collect();

    // Second pass: relations to the compared variant.
    let reference: HashMap<VariantId, VariantSummary> = report
        .variants
        .iter()
        .filter_map(|v| v.summary.clone().map(|s| (v.info.id, s)))
        .collect();
    for v in &mut report.variants {
        let Some(base_id) = v.info.compared_to else { continue };
        let Some(base) = reference.get(&base_id) else { continue };
        let Some(s) = v.summary.as_mut() else { continue };
        if s.step_time_ms.median > 0.0 {
            s.speedup = Some(base.step_time_ms.median / s.step_time_ms.median);
        }
        if let (Some((bt, bm)), Some((t, m))) = (per_run.get(&base_id), per_run.get(&v.info.id)) {
            s.time_verdict = Some(compare(Metric::Time, "step time", bt, t, &VerdictConfig::time()));
            if !bm.is_empty() && !m.is_empty() {
                s.memory_verdict = Some(compare(Metric::Memory, primary.label(), bm, m, &VerdictConfig::memory()));
            }
        }
        for m in &mut s.memory {
            if let Some(b) = base.memory.iter().find(|b| b.metric == m.metric) {
                m.delta_bytes = Some(m.median_bytes as i64 - b.median_bytes as i64);
                if b.median_bytes > 0 {
                    m.delta_ratio = Some(m.median_bytes as f64 / b.median_bytes as f64 - 1.0);
                }
            }
        }
    }
}
