//! Training steps seen by the `--torch` hook of `memprobe run`: one series per
//! process, a steady-state summary (warm-up steps excluded) and the leak
//! verdict, the slope of the memory left after each step.

use serde::{Deserialize, Serialize};

use crate::stats::{median, quantile_sorted, Stats};

/// What marks the end of a step in a process: the hook picks the highest
/// kind the process does (an optimizer step over a backward over a forward).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepKind {
    /// A top-level module forward (evaluation or inference only).
    Forward,
    /// A `backward()` (no optimizer steps).
    Backward,
    /// A `step()` of the first optimizer that stepped.
    Optimizer,
}

impl StepKind {
    /// Parses the hook's name.
    pub fn parse(s: &str) -> Option<StepKind> {
        match s {
            "forward" => Some(StepKind::Forward),
            "backward" => Some(StepKind::Backward),
            "optimizer" => Some(StepKind::Optimizer),
            _ => None,
        }
    }

    /// In words, for tables.
    pub fn describe(self) -> &'static str {
        match self {
            StepKind::Forward => "top-level module forward",
            StepKind::Backward => "backward()",
            StepKind::Optimizer => "optimizer step()",
        }
    }
}

/// The steps of one process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepSeries {
    /// Process id.
    pub pid: u32,
    /// What ends a step.
    pub kind: StepKind,
    /// Whether the memory figures are the CUDA caching allocator's (else the
    /// process's host RSS).
    pub cuda: bool,
    /// Seconds from the command's start to each step's end.
    pub t_s: Vec<f64>,
    /// Each step's duration, from the previous step's end (the first step
    /// has none).
    pub step_s: Vec<Option<f64>>,
    /// Each step's peak: CUDA bytes allocated at most within the step (all
    /// devices), or the host RSS high-water mark since the previous step.
    pub peak_bytes: Vec<Option<u64>>,
    /// What each step left: CUDA bytes still allocated after it, or the
    /// host RSS at its end.
    pub left_bytes: Vec<Option<u64>>,
    /// Whether each peak is the step's own: the host high-water mark could
    /// be reset per step, or the CUDA allocator's peak counters were (not
    /// with `--keep-peak-stats`); else a peak is the process's peak so far.
    #[serde(alias = "host_peak_per_step")]
    pub peak_per_step: bool,
}

impl StepSeries {
    /// An empty series.
    pub fn new(pid: u32, kind: StepKind, cuda: bool) -> StepSeries {
        StepSeries {
            pid,
            kind,
            cuda,
            t_s: Vec::new(),
            step_s: Vec::new(),
            peak_bytes: Vec::new(),
            left_bytes: Vec::new(),
            peak_per_step: true,
        }
    }

    /// Number of steps.
    pub fn len(&self) -> usize {
        self.t_s.len()
    }

    /// Whether no step was seen.
    pub fn is_empty(&self) -> bool {
        self.t_s.is_empty()
    }

    /// How many leading steps count as warm-up: a tenth of the steps, at
    /// least 3 (the first steps allocate optimizer state, gradients, cuDNN
    /// workspaces and the allocator's pools).
    pub fn default_warmup(&self) -> usize {
        (self.len() / 10).max(3).min(self.len())
    }

    /// The warm-up steps left out: `asked`, else [`StepSeries::default_warmup`],
    /// at most every step.
    pub fn warmup(&self, asked: Option<usize>) -> usize {
        asked.unwrap_or_else(|| self.default_warmup()).min(self.len())
    }

    /// The durations of the steady-state steps (after [`StepSeries::warmup`]),
    /// seconds.
    pub fn steady_step_times(&self, warmup: Option<usize>) -> Vec<f64> {
        self.step_s[self.warmup(warmup)..].iter().flatten().copied().collect()
    }

    /// The steady-state summary with `warmup` leading steps excluded
    /// (`None`: [`StepSeries::default_warmup`]) and the growth verdict at
    /// `threshold_bytes` per step.
    pub fn summarize(&self, warmup: Option<usize>, threshold_bytes: f64) -> StepSummary {
        let times = self.steady_step_times(warmup);
        let warmup = self.warmup(warmup);
        let time_stats = Stats::from_samples(&times);
        let peaks: Vec<f64> = self.peak_bytes[warmup..].iter().flatten().map(|&b| b as f64).collect();
        // Host RSS keeps rising for several steps after the first ones while
        // the C allocator's heap settles (30 MiB over 10 steps of a loop that
        // keeps nothing, on this project's machine): its slope is fitted over
        // the later half of the steady state. The CUDA allocator's figures
        // are exact from the first steps on. (With too few steps for that,
        // all of the steady state.)
        let later_half = warmup + (self.len() - warmup) / 2;
        let from = if self.cuda || self.len() - later_half < Growth::MIN_STEPS { warmup } else { later_half };
        let left: Vec<(f64, f64)> = self.left_bytes[from..]
            .iter()
            .enumerate()
            .filter_map(|(i, b)| b.map(|b| ((from + i) as f64, b as f64)))
            .collect();
        StepSummary {
            kind: self.kind,
            pid: self.pid,
            cuda: self.cuda,
            steps: self.len(),
            warmup_steps: warmup,
            step_median_s: time_stats.as_ref().map(|t| t.median),
            step_iqr_s: time_stats.as_ref().map(|t| t.iqr),
            steps_per_s: time_stats.as_ref().map(|t| t.median).filter(|&m| m > 0.0).map(|m| 1.0 / m),
            peak_max_bytes: self.peak_bytes[warmup..].iter().flatten().max().copied(),
            peak_median_bytes: median(&peaks).map(|x| x as u64),
            left_first_bytes: self.left_bytes.get(warmup).copied().flatten(),
            left_last_bytes: left.last().map(|&(_, b)| b as u64),
            // Host RSS moves in steps of megabytes as the C allocator grows
            // and trims its heap: growth there must also add up.
            growth: Growth::estimate(&left, threshold_bytes, if self.cuda { 0.0 } else { Growth::HOST_MIN_TOTAL }),
        }
    }
}

/// The steady-state figures of one process's steps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepSummary {
    /// What ends a step.
    pub kind: StepKind,
    /// Process id.
    pub pid: u32,
    /// CUDA allocator figures (else host RSS).
    pub cuda: bool,
    /// Steps seen.
    pub steps: usize,
    /// Leading steps excluded as warm-up.
    pub warmup_steps: usize,
    /// Median step time after warm-up, seconds.
    pub step_median_s: Option<f64>,
    /// Interquartile range of the step time, seconds.
    pub step_iqr_s: Option<f64>,
    /// Steps per second at the median step time.
    pub steps_per_s: Option<f64>,
    /// Largest per-step peak after warm-up.
    pub peak_max_bytes: Option<u64>,
    /// Median per-step peak after warm-up.
    pub peak_median_bytes: Option<u64>,
    /// Memory left after the first steady-state step.
    pub left_first_bytes: Option<u64>,
    /// Memory left after the last step.
    pub left_last_bytes: Option<u64>,
    /// The leak verdict.
    pub growth: Growth,
}

/// Whether the memory left after each step grows: the Theil–Sen slope of
/// left bytes over the step index, with its distribution-free interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Growth {
    /// Bytes per step (median of pairwise slopes); `None` with fewer than
    /// [`Growth::MIN_STEPS`] steady-state steps.
    pub slope_bytes_per_step: Option<f64>,
    /// Lower end of the interval.
    pub low_bytes_per_step: Option<f64>,
    /// Upper end of the interval.
    pub high_bytes_per_step: Option<f64>,
    /// Confidence of the interval (0.95).
    pub confidence: f64,
    /// Smallest slope called growth, bytes per step.
    pub threshold_bytes_per_step: f64,
    /// Least fitted growth over the steady state called growth, bytes (host
    /// RSS: [`Growth::HOST_MIN_TOTAL`]; 0 for the CUDA allocator's figures).
    #[serde(default)]
    pub min_total_bytes: f64,
    /// Steps the slope was estimated from.
    pub steps: usize,
    /// The verdict.
    pub verdict: GrowthVerdict,
}

/// The leak verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GrowthVerdict {
    /// The interval lies above zero and the slope above the threshold.
    Grows,
    /// Not shown to grow: the interval reaches zero or the slope is below
    /// the threshold.
    Flat,
    /// Too few steady-state steps to tell.
    TooFewSteps,
}

impl Growth {
    /// Fewest steady-state steps for a verdict.
    pub const MIN_STEPS: usize = 8;
    /// At most this many points enter the pairwise slopes (evenly spaced):
    /// n points give n(n-1)/2 slopes.
    const MAX_POINTS: usize = 500;
    /// On host RSS, the least growth over the steady state that is called a
    /// leak: glibc grows and trims its heap by several MiB at a time, so a
    /// lone jump of that size is not one; on a loaded machine a loop that
    /// keeps nothing drifted 16.7 MiB over 14 steps (a 900 MiB process).
    pub const HOST_MIN_TOTAL: f64 = 64.0 * 1024.0 * 1024.0;

    /// The growth of `points` (step index, bytes left): called growth when
    /// the interval lies above zero, the slope reaches `threshold_bytes` per
    /// step and the fitted growth over the points reaches `min_total_bytes`.
    pub fn estimate(points: &[(f64, f64)], threshold_bytes: f64, min_total_bytes: f64) -> Growth {
        let mut g = Growth {
            slope_bytes_per_step: None,
            low_bytes_per_step: None,
            high_bytes_per_step: None,
            confidence: 0.95,
            threshold_bytes_per_step: threshold_bytes,
            min_total_bytes,
            steps: points.len(),
            verdict: GrowthVerdict::TooFewSteps,
        };
        if points.len() < Self::MIN_STEPS {
            return g;
        }
        let pts: Vec<(f64, f64)> = if points.len() > Self::MAX_POINTS {
            (0..Self::MAX_POINTS).map(|i| points[i * (points.len() - 1) / (Self::MAX_POINTS - 1)]).collect()
        } else {
            points.to_vec()
        };
        let n = pts.len();
        let mut slopes = Vec::with_capacity(n * (n - 1) / 2);
        for i in 0..n {
            for j in i + 1..n {
                let dx = pts[j].0 - pts[i].0;
                if dx > 0.0 {
                    slopes.push((pts[j].1 - pts[i].1) / dx);
                }
            }
        }
        if slopes.is_empty() {
            return g;
        }
        slopes.sort_by(f64::total_cmp);
        let m = slopes.len();
        let slope = quantile_sorted(&slopes, 0.5);
        // Sen (1968): with Kendall's S variance n(n-1)(2n+5)/18 (no ties
        // correction), C = z * sqrt(var); the interval runs from the
        // ((m - C)/2)-th to the ((m + C)/2 + 1)-th ordered slope.
        let nf = n as f64;
        let c = 1.959_963_984_540_054 * (nf * (nf - 1.0) * (2.0 * nf + 5.0) / 18.0).sqrt();
        let lo_rank = ((m as f64 - c) / 2.0).floor().max(0.0) as usize;
        let hi_rank = (((m as f64 + c) / 2.0).ceil() as usize).min(m - 1);
        let (lo, hi) = (slopes[lo_rank.min(m - 1)], slopes[hi_rank]);
        g.slope_bytes_per_step = Some(slope);
        g.low_bytes_per_step = Some(lo);
        g.high_bytes_per_step = Some(hi);
        let span = pts[n - 1].0 - pts[0].0;
        g.verdict = if lo > 0.0 && slope >= threshold_bytes && slope * span >= min_total_bytes {
            GrowthVerdict::Grows
        } else {
            GrowthVerdict::Flat
        };
        g
    }

    /// "grows 38.1 MiB per step (95% CI 37.9-38.4 MiB)" / "flat (+12 KiB per
    /// step, 95% CI -3 KiB to +30 KiB)" / "too few steps (5 after warm-up; 8
    /// needed)".
    pub fn describe(&self) -> String {
        let fmt = crate::export::fmt_signed_size;
        match (self.verdict, self.slope_bytes_per_step, self.low_bytes_per_step, self.high_bytes_per_step) {
            (GrowthVerdict::Grows, Some(s), Some(lo), Some(hi)) => format!(
                "grows {} per step ({:.0}% CI {} to {})",
                crate::export::fmt_size(s),
                self.confidence * 100.0,
                fmt(lo),
                fmt(hi)
            ),
            (GrowthVerdict::Flat, Some(s), Some(lo), Some(hi)) => format!(
                "flat ({} per step, {:.0}% CI {} to {}; growth is called from {} per step{})",
                fmt(s),
                self.confidence * 100.0,
                fmt(lo),
                fmt(hi),
                crate::export::fmt_size(self.threshold_bytes_per_step),
                if self.min_total_bytes > 0.0 {
                    format!(" and {} over the steady state", crate::export::fmt_size(self.min_total_bytes))
                } else {
                    String::new()
                }
            ),
            _ => format!("too few steps ({} after warm-up; {} needed)", self.steps, Self::MIN_STEPS),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(left: &[u64]) -> StepSeries {
        let mut s = StepSeries::new(1, StepKind::Optimizer, true);
        for (i, &b) in left.iter().enumerate() {
            s.t_s.push(i as f64);
            s.step_s.push((i > 0).then_some(0.1));
            s.peak_bytes.push(Some(b + 1000));
            s.left_bytes.push(Some(b));
        }
        s
    }

    #[test]
    fn a_steady_leak_grows_by_its_slope() {
        let left: Vec<u64> = (0..40).map(|i| 1_000_000 + i * 40_000_000 + (i * 7919 % 13) * 1000).collect();
        let s = series(&left).summarize(None, 65536.0);
        assert_eq!(s.warmup_steps, 4);
        assert_eq!(s.growth.verdict, GrowthVerdict::Grows, "{:?}", s.growth);
        let slope = s.growth.slope_bytes_per_step.unwrap();
        assert!((slope - 40e6).abs() < 0.01 * 40e6, "{slope}");
        assert!(s.growth.low_bytes_per_step.unwrap() <= slope && slope <= s.growth.high_bytes_per_step.unwrap());
        assert!(s.growth.describe().starts_with("grows 38.1 MiB per step"), "{}", s.growth.describe());
    }

    #[test]
    fn noise_without_a_trend_is_flat() {
        let left: Vec<u64> = (0..60u64).map(|i| 500_000_000 + (i * 7919 % 101) * 10_000).collect();
        let s = series(&left).summarize(None, 65536.0);
        assert_eq!(s.growth.verdict, GrowthVerdict::Flat, "{:?}", s.growth);
        assert!(s.growth.low_bytes_per_step.unwrap() <= 0.0 || s.growth.slope_bytes_per_step.unwrap() < 65536.0);
    }

    #[test]
    fn a_slope_below_the_threshold_is_flat_even_when_significant() {
        let left: Vec<u64> = (0..40u64).map(|i| 1_000_000 + i * 100).collect();
        let g = series(&left).summarize(None, 65536.0).growth;
        assert_eq!(g.verdict, GrowthVerdict::Flat);
        assert!(g.low_bytes_per_step.unwrap() > 0.0);
    }

    #[test]
    fn one_heap_jump_of_host_rss_is_not_a_leak() {
        // 4 MiB up twice in 20 steps, as glibc grows its heap: flat on host
        // RSS, while the same bytes from the CUDA allocator would be growth.
        let mib = 1u64 << 20;
        let left: Vec<u64> = (0..20u64).map(|i| 600 * mib + if i >= 8 { 4 * mib } else { 0 } + if i >= 12 { 4 * mib } else { 0 }).collect();
        let mut s = series(&left);
        s.cuda = false;
        assert_eq!(s.summarize(None, 65536.0).growth.verdict, GrowthVerdict::Flat);
        s.cuda = true;
        assert_eq!(s.summarize(None, 65536.0).growth.verdict, GrowthVerdict::Grows);
    }

    #[test]
    fn too_few_steps_give_no_verdict() {
        let s = series(&[1, 2, 3, 4, 5, 6, 7, 8, 9]).summarize(None, 1.0);
        assert_eq!(s.warmup_steps, 3);
        assert_eq!(s.growth.verdict, GrowthVerdict::TooFewSteps);
        assert!(s.growth.describe().contains("6 after warm-up"), "{}", s.growth.describe());
    }

    #[test]
    fn steady_state_times_exclude_warmup() {
        let mut s = series(&[0; 20]);
        s.step_s[1] = Some(5.0);
        s.step_s[2] = Some(5.0);
        let sum = s.summarize(None, 1.0);
        assert_eq!(sum.step_median_s, Some(0.1));
        assert_eq!(sum.step_iqr_s, Some(0.0));
        assert!((sum.steps_per_s.unwrap() - 10.0).abs() < 1e-9);
    }

    #[test]
    fn many_steps_are_thinned_not_squared() {
        let left: Vec<u64> = (0..20_000u64).map(|i| i * 1000).collect();
        let g = series(&left).summarize(None, 100.0).growth;
        assert_eq!(g.verdict, GrowthVerdict::Grows);
        assert!((g.slope_bytes_per_step.unwrap() - 1000.0).abs() < 1.0);
    }
}
