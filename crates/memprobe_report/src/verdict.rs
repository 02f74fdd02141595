//! Verdicts on a change, as criterion and hyperfine give them: the unit of
//! measurement is a *run* (a fresh process; the steps of one run share its
//! allocator, caches and clock state, so they are not independent), the test
//! is the Mann-Whitney U test on the per-run values (rank-based, so one run
//! slowed by a busy machine does not swamp the others, as it would a t-test
//! on means), the change is the Hodges-Lehmann estimate of the ratio (median
//! of all pairwise ratios) with its distribution-free interval, and a change is called
//! only when it is both significant at the configured confidence and larger
//! than a noise threshold. Otherwise the verdict is "no significant
//! difference" with the confidence interval of the change. A spread too large
//! to conclude, or too few runs, is said as such.
//!
//! ```
//! use memprobe_report::verdict::{compare, Metric, VerdictConfig, Verdict};
//! let base = [10.0, 10.2, 9.9, 10.1, 10.0];
//! let slow = [20.1, 19.8, 20.0, 20.3, 19.9];
//! let c = compare(Metric::Time, "step time", &base, &slow, &VerdictConfig::time());
//! assert_eq!(c.verdict, Verdict::Worse);
//! assert_eq!(c.verdict_text(), "slower");
//! ```

use serde::{Deserialize, Serialize};
use statrs::distribution::ContinuousCDF;

/// What is compared: the direction words depend on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Metric {
    /// A duration: lower is better (faster / slower).
    Time,
    /// Memory: lower is better (smaller / larger).
    Memory,
}

/// How a verdict is reached.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct VerdictConfig {
    /// Two-sided confidence of the test and the interval (0.95).
    pub confidence: f64,
    /// Relative change below which nothing is called, whatever the test says
    /// (0.05 = 5 %).
    pub threshold: f64,
    /// A coefficient of variation of the runs above this is reported as too
    /// much spread to conclude reliably.
    pub max_cv: f64,
}

impl VerdictConfig {
    /// Defaults for times: 95 % confidence, 5 % noise threshold.
    pub fn time() -> Self {
        VerdictConfig { confidence: 0.95, threshold: 0.05, max_cv: 0.10 }
    }

    /// Defaults for memory: 95 % confidence, 2 % noise threshold.
    pub fn memory() -> Self {
        VerdictConfig { confidence: 0.95, threshold: 0.02, max_cv: 0.10 }
    }
}

/// The outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Significantly lower and above the threshold (faster / smaller).
    Better,
    /// Significantly higher and above the threshold (slower / larger).
    Worse,
    /// Not significant, or within the noise threshold.
    NoSignificantDifference,
    /// Fewer than two runs on a side: no test is possible.
    Inconclusive,
}

/// Median, mean, standard deviation and count of one side.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SideStats {
    /// Number of runs.
    pub n: usize,
    /// Median of the runs.
    pub median: f64,
    /// Mean of the runs.
    pub mean: f64,
    /// Sample standard deviation (n - 1); 0 for one run.
    pub stddev: f64,
    /// Smallest run.
    pub min: f64,
    /// Largest run.
    pub max: f64,
}

impl SideStats {
    /// Statistics of finite values; `None` when there are none.
    pub fn of(values: &[f64]) -> Option<SideStats> {
        let v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        let n = v.len();
        let mean = v.iter().sum::<f64>() / n as f64;
        let var = if n > 1 { v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64 } else { 0.0 };
        Some(SideStats {
            n,
            median: crate::stats::median(&v).unwrap_or(mean),
            mean,
            stddev: var.sqrt(),
            min: v.iter().copied().fold(f64::INFINITY, f64::min),
            max: v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        })
    }

    /// Coefficient of variation (stddev / mean).
    pub fn cv(&self) -> f64 {
        if self.mean == 0.0 {
            0.0
        } else {
            self.stddev / self.mean.abs()
        }
    }
}

/// One compared metric, with everything needed to state the verdict honestly.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// What is compared (e.g. `wall time`, `peak RSS`).
    pub what: String,
    /// Time or memory.
    pub metric: Metric,
    /// Base side (A).
    pub base: Option<SideStats>,
    /// New side (B).
    pub new: Option<SideStats>,
    /// Relative change, new / base - 1 (Hodges-Lehmann estimate: the median
    /// of all pairwise ratios).
    pub change: Option<f64>,
    /// Confidence interval of the relative change, (low, high); never
    /// below -100% (a time or a size cannot fall below zero).
    pub interval: Option<(f64, f64)>,
    /// The confidence the interval actually has: lower than `confidence`
    /// when there are too few runs for it (3 vs 3 runs reach at most 90%).
    /// Absent in older reports, where it was `confidence`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_confidence: Option<f64>,
    /// Two-sided p-value of the test.
    pub p_value: Option<f64>,
    /// The test used.
    pub test: String,
    /// Confidence of the test and interval.
    pub confidence: f64,
    /// Noise threshold (relative).
    pub threshold: f64,
    /// The outcome.
    pub verdict: Verdict,
    /// Warnings: too much spread, too few runs.
    pub warnings: Vec<String>,
}

impl Comparison {
    /// A short word for narrow tables: `faster`, `slower`, `smaller`,
    /// `larger`, `n.s.` (no significant difference) or `inconcl.`.
    pub fn verdict_short(&self) -> &'static str {
        match self.verdict {
            Verdict::NoSignificantDifference => "n.s.",
            Verdict::Inconclusive => "inconcl.",
            _ => self.verdict_text(),
        }
    }

    /// `faster`, `slower`, `smaller`, `larger`, `no significant difference`
    /// or `inconclusive`.
    pub fn verdict_text(&self) -> &'static str {
        match (self.verdict, self.metric) {
            (Verdict::Better, Metric::Time) => "faster",
            (Verdict::Worse, Metric::Time) => "slower",
            (Verdict::Better, Metric::Memory) => "smaller",
            (Verdict::Worse, Metric::Memory) => "larger",
            (Verdict::NoSignificantDifference, _) => "no significant difference",
            (Verdict::Inconclusive, _) => "inconclusive",
        }
    }

    /// One line: verdict, change, interval, test, confidence, threshold.
    pub fn describe(&self) -> String {
        let pct = |x: f64| format!("{:+.1}%", x * 100.0);
        let mut s = self.verdict_text().to_string();
        if let Some(c) = self.change {
            s.push_str(&format!(" ({}", pct(c)));
            if let Some((lo, hi)) = self.interval {
                let level = self.interval_confidence.unwrap_or(self.confidence);
                s.push_str(&format!(", {:.0}% CI [{}, {}]", level * 100.0, pct(lo), pct(hi)));
            }
            if let Some(p) = self.p_value {
                s.push_str(&format!(", p={}", fmt_p(p)));
            }
            s.push(')');
        }
        s
    }

    /// The method, for a footnote.
    pub fn method(&self) -> String {
        format!(
            "{}, {:.0}% confidence, noise threshold ±{}%, unit = one run",
            self.test,
            self.confidence * 100.0,
            trim_float(self.threshold * 100.0)
        )
    }
}

fn trim_float(x: f64) -> String {
    let s = format!("{x:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn fmt_p(p: f64) -> String {
    if p < 0.001 {
        "<0.001".into()
    } else {
        format!("{p:.3}")
    }
}

/// Name of the test, as printed.
pub const TEST_NAME: &str = "Mann-Whitney U test (two-sided), Hodges-Lehmann estimate and interval";

/// Exact two-sided p-value of U for sizes (m, n) without ties, by counting
/// the arrangements (feasible for the run counts memprobe uses).
fn exact_p(u: f64, m: usize, n: usize) -> f64 {
    // counts[i][j][k]: arrangements of i and j values with statistic k.
    let mut prev: Vec<Vec<f64>> = (0..=n).map(|_| vec![1.0]).collect(); // i = 0
    for i in 1..=m {
        let mut cur: Vec<Vec<f64>> = Vec::with_capacity(n + 1);
        cur.push(vec![1.0]); // j = 0
        for j in 1..=n {
            let mut v = vec![0.0; i * j + 1];
            // last value from the first sample: it exceeds all j of the other
            for (k, c) in prev[j].iter().enumerate() {
                v[k + j] += c;
            }
            // last value from the second sample
            for (k, c) in cur[j - 1].iter().enumerate() {
                v[k] += c;
            }
            cur.push(v);
        }
        prev = cur;
    }
    let dist = &prev[n];
    let total: f64 = dist.iter().sum();
    let k = u.round() as usize;
    let lower: f64 = dist[..=k.min(dist.len() - 1)].iter().sum::<f64>() / total;
    let upper: f64 = dist[k.min(dist.len() - 1)..].iter().sum::<f64>() / total;
    (2.0 * lower.min(upper)).min(1.0)
}

fn normal_cdf(z: f64) -> f64 {
    use statrs::distribution::Normal;
    Normal::new(0.0, 1.0).map(|d| d.cdf(z)).unwrap_or(0.5)
}

fn normal_quantile(p: f64) -> f64 {
    use statrs::distribution::Normal;
    Normal::new(0.0, 1.0).map(|d| d.inverse_cdf(p)).unwrap_or(1.96)
}

/// U statistic of `x` over `y` (ties count one half) and whether ties occurred.
fn u_statistic(x: &[f64], y: &[f64]) -> (f64, bool) {
    let mut all: Vec<(f64, usize)> = x.iter().map(|&v| (v, 0)).chain(y.iter().map(|&v| (v, 1))).collect();
    all.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut ranks = vec![0.0; all.len()];
    let mut ties = false;
    let mut i = 0;
    while i < all.len() {
        let mut j = i;
        while j + 1 < all.len() && all[j + 1].0 == all[i].0 {
            j += 1;
        }
        if j > i {
            ties = true;
        }
        let r = (i + j) as f64 / 2.0 + 1.0;
        for rank in ranks.iter_mut().take(j + 1).skip(i) {
            *rank = r;
        }
        i = j + 1;
    }
    let rx: f64 = all.iter().zip(&ranks).filter(|(a, _)| a.1 == 0).map(|(_, r)| r).sum();
    let m = x.len() as f64;
    (rx - m * (m + 1.0) / 2.0, ties)
}

/// Two-sided p-value of the Mann-Whitney U test of `new` against `base`:
/// exact without ties (up to 40 runs a side), else the normal approximation
/// with tie and continuity corrections.
pub fn mann_whitney_p(base: &[f64], new: &[f64]) -> f64 {
    let (m, n) = (new.len(), base.len());
    let (u, ties) = u_statistic(new, base);
    if !ties && m <= 40 && n <= 40 {
        return exact_p(u, m, n);
    }
    let (mf, nf) = (m as f64, n as f64);
    let big_n = mf + nf;
    let mut all: Vec<f64> = base.iter().chain(new).copied().collect();
    all.sort_by(f64::total_cmp);
    let mut tie_term = 0.0;
    let mut i = 0;
    while i < all.len() {
        let mut j = i;
        while j + 1 < all.len() && all[j + 1] == all[i] {
            j += 1;
        }
        let t = (j - i + 1) as f64;
        tie_term += t * t * t - t;
        i = j + 1;
    }
    let var = mf * nf / 12.0 * ((big_n + 1.0) - tie_term / (big_n * (big_n - 1.0)));
    if var <= 0.0 {
        return 1.0; // every value equal
    }
    let mean = mf * nf / 2.0;
    let z = ((u - mean).abs() - 0.5).max(0.0) / var.sqrt();
    (2.0 * (1.0 - normal_cdf(z))).clamp(0.0, 1.0)
}

fn binomial(n: usize, k: usize) -> f64 {
    (0..k).fold(1.0, |acc, i| acc * (n - i) as f64 / (i + 1) as f64)
}

/// Compares `new` with `base` (one value per run).
pub fn compare(metric: Metric, what: &str, base: &[f64], new: &[f64], cfg: &VerdictConfig) -> Comparison {
    let b = SideStats::of(base);
    let n = SideStats::of(new);
    let mut c = Comparison {
        what: what.to_string(),
        metric,
        base: b,
        new: n,
        change: None,
        interval: None,
        interval_confidence: None,
        p_value: None,
        test: TEST_NAME.into(),
        confidence: cfg.confidence,
        threshold: cfg.threshold,
        verdict: Verdict::Inconclusive,
        warnings: Vec::new(),
    };
    let (Some(bs), Some(ns)) = (b, n) else {
        c.warnings.push("no finite values on one side".into());
        return c;
    };
    if bs.median == 0.0 {
        c.warnings.push("base is zero: no relative change".into());
        return c;
    }
    let base: Vec<f64> = base.iter().copied().filter(|x| x.is_finite()).collect();
    let new: Vec<f64> = new.iter().copied().filter(|x| x.is_finite()).collect();
    // The change as a ratio: pairwise log ratios when every value is
    // positive, else pairwise differences relative to the base median.
    let logs = base.iter().chain(&new).all(|&x| x > 0.0);
    let mut pairs: Vec<f64> = Vec::with_capacity(base.len() * new.len());
    for &y in &new {
        for &x in &base {
            pairs.push(if logs { (y / x).ln() } else { (y - x) / bs.median });
        }
    }
    pairs.sort_by(f64::total_cmp);
    // Times and sizes are not negative: no change is below -100%.
    let to_change = |d: f64| if logs { d.exp() - 1.0 } else { d.max(-1.0) };
    let hl = crate::stats::quantile_sorted(&pairs, 0.5);
    c.change = Some(to_change(hl));
    if bs.n < 2 || ns.n < 2 {
        c.change = Some(ns.median / bs.median - 1.0);
        c.warnings.push(format!("{} run(s) vs {}: at least 2 per side are needed for a test", bs.n, ns.n));
        return c;
    }
    for (side, s) in [("base", bs), ("new", ns)] {
        if s.cv() > cfg.max_cv {
            c.warnings.push(format!(
                "the {side} runs spread too much to conclude reliably (CV {:.0}% > {:.0}%): more runs or a quieter machine",
                s.cv() * 100.0,
                cfg.max_cv * 100.0
            ));
        }
    }
    let p = mann_whitney_p(&base, &new);
    c.p_value = Some(p);
    // Distribution-free interval: order statistics of the pairwise ratios
    // (normal approximation of the U critical value).
    let (mf, nf) = (base.len() as f64, new.len() as f64);
    let z = normal_quantile(1.0 - (1.0 - cfg.confidence) / 2.0);
    let k = (mf * nf / 2.0 - z * (mf * nf * (mf + nf + 1.0) / 12.0).sqrt()).floor();
    let k = if k < 1.0 { 0 } else { k as usize - 1 };
    let lo = pairs[k.min(pairs.len() - 1)];
    let hi = pairs[pairs.len() - 1 - k.min(pairs.len() - 1)];
    c.interval = Some((to_change(lo), to_change(hi)));
    // With few runs even a complete separation is not significant: the
    // smallest two-sided p of the exact test is 2 / C(m + n, m).
    let smallest_p = 2.0 / binomial(bs.n + ns.n, bs.n);
    // The widest interval (the extreme pairs, k = 0) covers with
    // probability 1 - 2 / C(m + n, m), which may be below the asked level.
    c.interval_confidence = Some(if k == 0 { (1.0 - smallest_p).min(cfg.confidence) } else { cfg.confidence });
    if smallest_p >= 1.0 - cfg.confidence {
        c.warnings.push(format!(
            "{} vs {} runs cannot reach {:.0}% confidence with this test (smallest possible p = {:.2}): use at least 4 runs per side",
            bs.n,
            ns.n,
            cfg.confidence * 100.0,
            smallest_p
        ));
        c.verdict = Verdict::Inconclusive;
        return c;
    }
    let rel = to_change(hl);
    let significant = p < 1.0 - cfg.confidence;
    c.verdict = if significant && rel.abs() > cfg.threshold {
        if rel > 0.0 {
            Verdict::Worse
        } else {
            Verdict::Better
        }
    } else {
        Verdict::NoSignificantDifference
    };
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_p_values_match_the_tables() {
        // Complete separation of 5 vs 5: p = 2 / C(10, 5) = 2/252.
        let p = mann_whitney_p(&[1.0, 2.0, 3.0, 4.0, 5.0], &[6.0, 7.0, 8.0, 9.0, 10.0]);
        assert!((p - 2.0 / 252.0).abs() < 1e-12, "{p}");
        // [2.5, 4.5, 6, 8, 10] over [1..5]: U = 2 + 4 + 15 = 21 of 25; arrangements with
        // U >= 21 number 1 + 1 + 2 + 3 + 5 = 12 of 252, so p = 2 * 12/252.
        let p = mann_whitney_p(&[1.0, 2.0, 3.0, 4.0, 5.0], &[2.5, 4.5, 6.0, 8.0, 10.0]);
        assert!((p - 24.0 / 252.0).abs() < 1e-12, "{p}");
        // Interleaved samples: nothing to see.
        assert!((mann_whitney_p(&[1.0, 3.0, 5.0], &[2.0, 4.0, 6.0]) - 0.7).abs() < 1e-9);
    }

    #[test]
    fn a_slow_outlier_run_does_not_hide_a_20_percent_slowdown() {
        let base = [10.0, 10.3, 9.8, 10.1, 14.5, 10.0, 9.9, 10.2];
        let slow: Vec<f64> = base.iter().map(|x| x * 1.2).collect();
        let c = compare(Metric::Time, "t", &base, &slow, &VerdictConfig::time());
        assert_eq!(c.verdict, Verdict::Worse, "{c:?}");
        assert!((c.change.unwrap() - 0.2).abs() < 0.03, "{:?}", c.change);
        let (lo, hi) = c.interval.unwrap();
        assert!(lo > 0.05 && hi < 0.5 && lo <= 0.2 && hi >= 0.2, "{lo} {hi}");
        assert!(c.warnings.iter().any(|w| w.contains("spread too much")), "the outlier is warned about");
    }

    #[test]
    fn significant_but_below_threshold_is_no_difference() {
        let base = [100.0, 100.1, 99.9, 100.0, 100.05, 100.02];
        let new: Vec<f64> = base.iter().map(|x| x * 1.01).collect();
        let c = compare(Metric::Time, "t", &base, &new, &VerdictConfig::time());
        assert!(c.p_value.unwrap() < 0.01);
        assert_eq!(c.verdict, Verdict::NoSignificantDifference);
        let c = compare(Metric::Memory, "m", &new, &base, &VerdictConfig { threshold: 0.005, ..VerdictConfig::memory() });
        assert_eq!(c.verdict_text(), "smaller");
    }

    #[test]
    fn one_run_is_inconclusive_and_constant_sides_are_handled() {
        let c = compare(Metric::Time, "t", &[1.0], &[2.0], &VerdictConfig::time());
        assert_eq!(c.verdict, Verdict::Inconclusive);
        assert!(c.warnings[0].contains("at least 2"));
        let c = compare(Metric::Memory, "m", &[5.0; 4], &[6.0; 4], &VerdictConfig::memory());
        assert_eq!(c.verdict_text(), "larger");
        assert!((c.change.unwrap() - 0.2).abs() < 1e-12);
        let c = compare(Metric::Memory, "m", &[5.0; 3], &[5.0; 3], &VerdictConfig::memory());
        assert_eq!(c.verdict, Verdict::Inconclusive, "3 vs 3 runs can never reach 95%");
        assert!(c.warnings.iter().any(|w| w.contains("use at least 4 runs")), "{:?}", c.warnings);
        let c = compare(Metric::Memory, "m", &[5.0; 4], &[5.0; 4], &VerdictConfig::memory());
        assert_eq!(c.verdict, Verdict::NoSignificantDifference);
        assert!(c.describe().starts_with("no significant difference (+0.0%"), "{}", c.describe());
    }

    #[test]
    fn three_runs_a_side_label_the_interval_with_the_confidence_it_has() {
        let c = compare(Metric::Time, "t", &[1.0, 1.1, 1.2], &[2.0, 2.1, 2.2], &VerdictConfig::time());
        assert_eq!(c.interval_confidence, Some(0.9), "1 - 2 / C(6, 3)");
        assert!(c.describe().contains("90% CI"), "{}", c.describe());
        let c = compare(Metric::Time, "t", &[1.0, 1.1, 1.2, 1.3, 1.0], &[2.0, 2.1, 2.2, 2.0, 2.1], &VerdictConfig::time());
        assert_eq!(c.interval_confidence, Some(0.95));
    }

    #[test]
    fn no_change_is_below_minus_100_percent() {
        // A zero on one side takes the differences path.
        let c = compare(Metric::Memory, "m", &[100.0, 300.0, 200.0, 250.0], &[0.0, 1.0, 0.0, 2.0], &VerdictConfig::memory());
        let (lo, _) = c.interval.expect("interval");
        assert!(lo >= -1.0, "{lo}");
        assert!(c.change.expect("change") >= -1.0);
    }
}
