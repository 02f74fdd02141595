//! `memprobe ab`: two commands run alternately (A B A B ...) under the same
//! sampler as `memprobe run`; B is compared with A on wall time and peak
//! memory with a verdict per metric (Mann-Whitney U test over runs, a noise
//! threshold, see [`memprobe_report::verdict`]).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use memprobe_report::run::{AbReport, AbRun, RunReport};
use memprobe_report::verdict::{compare, Metric, VerdictConfig};
use memprobe_report::{ToolInfo, SCHEMA_VERSION};

use crate::run::{host_info, run, RunOptions};
use crate::HostError;

/// The separator between command A and command B on the command line.
pub const SEPARATOR: &str = "---";

/// What `memprobe ab` does.
#[derive(Debug, Clone)]
pub struct AbOptions {
    /// Command A (the base).
    pub a: Vec<String>,
    /// Command B (compared with A).
    pub b: Vec<String>,
    /// Measured runs per side.
    pub runs: u32,
    /// Unmeasured runs per side first.
    pub warmup: u32,
    /// Sampling period.
    pub interval: Duration,
    /// Pass the commands' output through instead of discarding it.
    pub show_output: bool,
    /// Keep going when a run exits non-zero.
    pub ignore_failure: bool,
    /// Verdict settings for time.
    pub time: VerdictConfig,
    /// Verdict settings for memory.
    pub memory: VerdictConfig,
    /// What to compare, in this order (`--metric`).
    pub metrics: Vec<AbMetric>,
    /// How each run's steps are summarised (with the step metrics).
    pub step_settings: memprobe_report::run::StepSettings,
    /// Working directory of command B (`ab --fix`: the fixed copy), else
    /// memprobe's own.
    pub b_cwd: Option<std::path::PathBuf>,
}

/// What `ab` compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AbMetric {
    /// Whole-process wall time.
    Wall,
    /// Peak memory of the tree (PSS, RSS, NVML).
    Memory,
    /// Steady-state step time, the median of each run (needs the `--torch` hook).
    StepTime,
    /// The largest peak within a step of each run (the CUDA allocator's, or host RSS).
    Peak,
    /// The memory left after each step: each side's leak verdict.
    Growth,
}

impl AbMetric {
    /// Whether the metric needs the `--torch` hook's steps.
    pub fn needs_steps(self) -> bool {
        matches!(self, AbMetric::StepTime | AbMetric::Peak | AbMetric::Growth)
    }

    /// The default: wall time and memory, and with steps first the step
    /// metrics.
    pub fn defaults(steps: bool) -> Vec<AbMetric> {
        if steps {
            vec![AbMetric::StepTime, AbMetric::Peak, AbMetric::Growth, AbMetric::Wall, AbMetric::Memory]
        } else {
            vec![AbMetric::Wall, AbMetric::Memory]
        }
    }
}

/// Splits `A... --- B...`; each side must be non-empty.
pub fn split_commands(args: &[String]) -> Result<(Vec<String>, Vec<String>), HostError> {
    let seps: Vec<usize> = args.iter().enumerate().filter(|(_, a)| a.as_str() == SEPARATOR).map(|(i, _)| i).collect();
    match seps.as_slice() {
        [i] if *i > 0 && *i + 1 < args.len() => Ok((args[..*i].to_vec(), args[*i + 1..].to_vec())),
        [] => Err(HostError::Usage(format!("expected two commands separated by {SEPARATOR}: memprobe ab -- CMD_A {SEPARATOR} CMD_B"))),
        [_] => Err(HostError::Usage(format!("one side of {SEPARATOR} is empty: memprobe ab -- CMD_A {SEPARATOR} CMD_B"))),
        _ => Err(HostError::Usage(format!("{SEPARATOR} appears {} times; it must separate exactly two commands", seps.len()))),
    }
}

/// Progress callback: side, repeat, whether it is a warm-up.
pub type AbProgress<'a> = &'a mut dyn FnMut(&str, u32, bool);

fn peak_gpu(r: &RunReport) -> Option<u64> {
    let mut any = false;
    let mut total = 0;
    for g in &r.gpus {
        if let Some(s) = g.tree_process.summary() {
            any = true;
            total += s.peak_bytes;
        }
    }
    any.then_some(total)
}

/// Runs the A/B. Interrupted (a signal reached a run): the partial report
/// with `complete: false`.
pub fn ab(opts: &AbOptions, progress: AbProgress<'_>) -> Result<AbReport, HostError> {
    if opts.runs == 0 {
        return Err(HostError::Usage("--runs must be at least 1".into()));
    }
    let created = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let mut results = Vec::new();
    let mut notes = Vec::new();
    let mut complete = true;
    let mut driver = None;
    let steps = opts.metrics.iter().any(|m| m.needs_steps());
    'outer: for repeat in 0..opts.warmup + opts.runs {
        let warm = repeat < opts.warmup;
        for (side, cmd) in [("a", &opts.a), ("b", &opts.b)] {
            progress(side, repeat, warm);
            let r = run(&RunOptions {
                command: cmd.clone(),
                interval: opts.interval,
                torch: steps,
                discard_output: !opts.show_output,
                step_settings: opts.step_settings.clone(),
                cwd: if side == "b" { opts.b_cwd.clone() } else { None },
            })?;
            driver = driver.or(r.host.driver_version.clone());
            if !r.forwarded_signals.is_empty() || matches!(r.exit.signal, Some(2) | Some(15)) {
                complete = false;
                notes.push(format!("interrupted during run {} of {}: {}", repeat + 1, side.to_uppercase(), r.forwarded_signals.join(", ")));
                break 'outer;
            }
            if r.exit.code != Some(0) && !opts.ignore_failure {
                return Err(HostError::Command(format!(
                    "command {} failed in run {} ({}): {}; rerun with --ignore-failure to compare anyway",
                    side.to_uppercase(),
                    repeat + 1,
                    match (r.exit.code, &r.exit.signal_name) {
                        (Some(c), _) => format!("exit code {c}"),
                        (None, Some(s)) => format!("killed by {s}"),
                        _ => "unknown status".into(),
                    },
                    cmd.join(" ")
                )));
            }
            if warm {
                continue;
            }
            results.push(AbRun {
                side: side.into(),
                repeat: repeat - opts.warmup,
                wall_s: r.duration_s,
                peak_rss_bytes: r.peak_rss_bytes().unwrap_or(0),
                peak_pss_bytes: r.peak_pss_bytes(),
                peak_gpu_bytes: peak_gpu(&r),
                exit: r.exit.clone(),
                steps: r.step_summary(),
            });
        }
    }
    let vals = |side: &str, f: &dyn Fn(&AbRun) -> Option<f64>| -> Vec<f64> {
        results.iter().filter(|r| r.side == side).filter_map(f).collect()
    };
    // Memory is the tree's footprint (PSS) when every run has it, else RSS.
    let pss = results.iter().all(|r| r.peak_pss_bytes.is_some());
    let memory = |r: &AbRun| Some(if pss { r.peak_pss_bytes.unwrap_or(0) } else { r.peak_rss_bytes } as f64);
    let mut comparisons = Vec::new();
    let mut growth = Vec::new();
    for metric in &opts.metrics {
        match metric {
            AbMetric::Wall => comparisons.push(compare(
                Metric::Time,
                "wall time",
                &vals("a", &|r| Some(r.wall_s)),
                &vals("b", &|r| Some(r.wall_s)),
                &opts.time,
            )),
            AbMetric::Memory => {
                comparisons.push(compare(
                    Metric::Memory,
                    if pss { "peak PSS (tree)" } else { "peak RSS (tree)" },
                    &vals("a", &memory),
                    &vals("b", &memory),
                    &opts.memory,
                ));
                if pss {
                    comparisons.push(compare(
                        Metric::Memory,
                        "peak RSS (tree)",
                        &vals("a", &|r| Some(r.peak_rss_bytes as f64)),
                        &vals("b", &|r| Some(r.peak_rss_bytes as f64)),
                        &opts.memory,
                    ));
                }
                let ga = vals("a", &|r| r.peak_gpu_bytes.map(|b| b as f64));
                let gb = vals("b", &|r| r.peak_gpu_bytes.map(|b| b as f64));
                if !ga.is_empty() || !gb.is_empty() {
                    comparisons.push(compare(Metric::Memory, "peak GPU memory (NVML, tree)", &ga, &gb, &opts.memory));
                }
            }
            AbMetric::StepTime => {
                let f = |r: &AbRun| r.steps.as_ref().and_then(|s| s.step_median_s);
                let mut c = compare(Metric::Time, "step time (steady-state median)", &vals("a", &f), &vals("b", &f), &opts.time);
                step_gaps(&results, &f, &mut c);
                comparisons.push(c);
            }
            AbMetric::Peak => {
                let cuda = results.iter().any(|r| r.steps.as_ref().is_some_and(|s| s.cuda));
                let f = |r: &AbRun| r.steps.as_ref().and_then(|s| s.peak_max_bytes).map(|b| b as f64);
                let what = if cuda { "peak within a step (CUDA allocator)" } else { "peak within a step (host RSS)" };
                let mut c = compare(Metric::Memory, what, &vals("a", &f), &vals("b", &f), &opts.memory);
                step_gaps(&results, &f, &mut c);
                comparisons.push(c);
            }
            AbMetric::Growth => {
                for side in ["a", "b"] {
                    growth.push(format!("{}: {}", side.to_uppercase(), growth_line(&results, side)));
                }
            }
        }
    }
    // With --ignore-failure, figures of failed runs measure a crash, not
    // the command: the verdicts are withdrawn and the failures named.
    let mut failed_sides = Vec::new();
    for side in ["a", "b"] {
        let ran: Vec<&AbRun> = results.iter().filter(|r| r.side == side).collect();
        let failed: Vec<String> = ran
            .iter()
            .filter(|r| r.exit.code != Some(0))
            .map(|r| match (r.exit.code, &r.exit.signal_name) {
                (Some(c), _) => format!("exit code {c}"),
                (None, Some(s)) => format!("killed by {s}"),
                _ => "unknown status".into(),
            })
            .collect();
        if !failed.is_empty() {
            let mut kinds = failed.clone();
            kinds.dedup();
            failed_sides.push(format!("{}: {} of {} runs failed ({})", side.to_uppercase(), failed.len(), ran.len(), kinds.join(", ")));
        }
    }
    if !failed_sides.is_empty() {
        let why = format!("{}; the verdict is withheld: failed runs are not comparable", failed_sides.join("; "));
        for c in &mut comparisons {
            c.verdict = memprobe_report::verdict::Verdict::Inconclusive;
            c.warnings.push(why.clone());
        }
        notes.push(failed_sides.join("; "));
    }
    notes.push(format!(
        "each run is one process tree started fresh; runs alternate A B A B so drift of the machine hits both; {} warm-up run(s) per side not counted",
        opts.warmup
    ));
    Ok(AbReport {
        schema_version: SCHEMA_VERSION,
        kind: "ab".into(),
        tool: ToolInfo { name: "memprobe".into(), version: env!("CARGO_PKG_VERSION").into() },
        created_unix_s: created,
        host: host_info(driver),
        a: opts.a.clone(),
        b: opts.b.clone(),
        runs: opts.runs,
        interval_ms: opts.interval.as_secs_f64() * 1000.0,
        results,
        comparisons,
        complete,
        notes,
        growth,
        fix: None,
    })
}

/// Runs without steps leave a comparison short: say so.
fn step_gaps(results: &[AbRun], f: &dyn Fn(&AbRun) -> Option<f64>, c: &mut memprobe_report::verdict::Comparison) {
    let missing = results.iter().filter(|r| f(r).is_none()).count();
    if missing > 0 {
        c.warnings.push(format!(
            "{missing} of {} runs took no steps the --torch hook saw (no optimizer step(), backward() or module forward)",
            results.len()
        ));
    }
}

/// One side's leak verdicts over its runs: "grows 34.4 MiB per step in 4 of
/// 4 runs (median slope)", "flat in 4 of 4 runs", or why there is none.
fn growth_line(results: &[AbRun], side: &str) -> String {
    use memprobe_report::steps::GrowthVerdict;
    let runs: Vec<&AbRun> = results.iter().filter(|r| r.side == side).collect();
    let verdicts: Vec<&memprobe_report::steps::Growth> = runs.iter().filter_map(|r| r.steps.as_ref().map(|s| &s.growth)).collect();
    if verdicts.is_empty() {
        return "no steps seen".into();
    }
    let grows: Vec<f64> = verdicts
        .iter()
        .filter(|g| g.verdict == GrowthVerdict::Grows)
        .filter_map(|g| g.slope_bytes_per_step)
        .collect();
    let flat = verdicts.iter().filter(|g| g.verdict == GrowthVerdict::Flat).count();
    let n = runs.len();
    if grows.len() * 2 > verdicts.len() {
        let median = memprobe_report::stats::median(&grows).unwrap_or(0.0);
        format!("grows {} per step in {} of {n} runs (median slope)", memprobe_report::export::fmt_size(median), grows.len())
    } else if flat * 2 > verdicts.len() {
        format!("flat in {flat} of {n} runs")
    } else {
        format!(
            "no clear verdict ({} grow, {flat} flat, {} with too few steps, of {n} runs)",
            grows.len(),
            verdicts.len() - grows.len() - flat
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn the_separator_splits_two_commands() {
        let (a, b) = split_commands(&v(&["python", "t.py", "---", "python", "t.py", "--amp"])).unwrap();
        assert_eq!(a, v(&["python", "t.py"]));
        assert_eq!(b, v(&["python", "t.py", "--amp"]));
        for bad in [v(&["a", "b"]), v(&["---", "b"]), v(&["a", "---"]), v(&["a", "---", "b", "---", "c"])] {
            let e = split_commands(&bad).unwrap_err();
            assert!(e.to_string().contains("---"), "{e}");
        }
    }
}
