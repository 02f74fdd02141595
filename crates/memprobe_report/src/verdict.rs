//! Verdicts on a change, as criterion and hyperfine give them: the unit of
//! measurement is a *run* (a fresh process; the steps of one run share its
//! allocator, caches and clock state, so they are not independent), the test
//! is Welch's two-sample t-test on the per-run values, and a change is called
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
use statrs::distribution::{ContinuousCDF, StudentsT};

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

/// Mean, standard deviation and count of one side.
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
    /// Relative change of the mean, new / base - 1.
    pub change: Option<f64>,
    /// Confidence interval of the relative change, (low, high).
    pub interval: Option<(f64, f64)>,
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
                s.push_str(&format!(", {:.0}% CI [{}, {}]", self.confidence * 100.0, pct(lo), pct(hi)));
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
pub const WELCH: &str = "Welch's two-sample t-test";

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
        p_value: None,
        test: WELCH.into(),
        confidence: cfg.confidence,
        threshold: cfg.threshold,
        verdict: Verdict::Inconclusive,
        warnings: Vec::new(),
    };
    let (Some(b), Some(n)) = (b, n) else {
        c.warnings.push("no finite values on one side".into());
        return c;
    };
    if b.mean == 0.0 {
        c.warnings.push("base is zero: no relative change".into());
        return c;
    }
    c.change = Some(n.mean / b.mean - 1.0);
    if b.n < 2 || n.n < 2 {
        c.warnings.push(format!("{} run(s) vs {}: at least 2 per side are needed for a test", b.n, n.n));
        return c;
    }
    for (side, s) in [("base", b), ("new", n)] {
        if s.cv() > cfg.max_cv {
            c.warnings.push(format!(
                "the {side} runs spread too much to conclude reliably (CV {:.0}% > {:.0}%): more runs or a quieter machine",
                s.cv() * 100.0,
                cfg.max_cv * 100.0
            ));
        }
    }
    let (vb, vn) = (b.stddev.powi(2) / b.n as f64, n.stddev.powi(2) / n.n as f64);
    let se = (vb + vn).sqrt();
    let diff = n.mean - b.mean;
    let (p, half) = if se == 0.0 {
        // Both sides constant: any difference is exact.
        (if diff == 0.0 { 1.0 } else { 0.0 }, 0.0)
    } else {
        // Welch–Satterthwaite degrees of freedom.
        let df = (vb + vn).powi(2)
            / (vb.powi(2) / (b.n as f64 - 1.0) + vn.powi(2) / (n.n as f64 - 1.0)).max(f64::MIN_POSITIVE);
        match StudentsT::new(0.0, 1.0, df.max(1.0)) {
            Ok(t) => {
                let p = 2.0 * (1.0 - t.cdf((diff / se).abs()));
                let q = t.inverse_cdf(1.0 - (1.0 - cfg.confidence) / 2.0);
                (p.clamp(0.0, 1.0), q * se)
            }
            Err(_) => {
                c.warnings.push("t distribution unavailable".into());
                return c;
            }
        }
    };
    c.p_value = Some(p);
    c.interval = Some(((diff - half) / b.mean, (diff + half) / b.mean));
    let rel = diff / b.mean;
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
    fn welch_matches_scipy() {
        // t = 3 / sqrt(2.5/5 + 10/5) = 1.897, Welch–Satterthwaite df = 6.25 / 1.0625 = 5.88,
        // two-sided p = 0.1075 (scipy.stats.ttest_ind(..., equal_var=False) gives the same).
        let c = compare(Metric::Time, "t", &[1.0, 2.0, 3.0, 4.0, 5.0], &[2.0, 4.0, 6.0, 8.0, 10.0], &VerdictConfig::time());
        assert!((c.p_value.unwrap() - 0.1075).abs() < 5e-4, "{:?}", c.p_value);
        assert_eq!(c.verdict, Verdict::NoSignificantDifference);
        assert!((c.change.unwrap() - 1.0).abs() < 1e-12);
        let (lo, hi) = c.interval.unwrap();
        assert!(lo < 0.0 && hi > 1.0, "the interval spans zero: {lo} {hi}");
        assert!(c.warnings.iter().any(|w| w.contains("spread too much")));
    }

    #[test]
    fn significant_but_below_threshold_is_no_difference() {
        let base = [100.0, 100.1, 99.9, 100.0, 100.05];
        let new = [101.0, 101.1, 100.9, 101.0, 101.05]; // +1%, very significant
        let c = compare(Metric::Time, "t", &base, &new, &VerdictConfig::time());
        assert!(c.p_value.unwrap() < 0.001);
        assert_eq!(c.verdict, Verdict::NoSignificantDifference);
        let c = compare(Metric::Memory, "m", &new, &base, &VerdictConfig { threshold: 0.005, ..VerdictConfig::memory() });
        assert_eq!(c.verdict_text(), "smaller");
    }

    #[test]
    fn one_run_is_inconclusive_and_constant_sides_are_exact() {
        let c = compare(Metric::Time, "t", &[1.0], &[2.0], &VerdictConfig::time());
        assert_eq!(c.verdict, Verdict::Inconclusive);
        assert!(c.warnings[0].contains("at least 2"));
        let c = compare(Metric::Memory, "m", &[5.0, 5.0, 5.0], &[6.0, 6.0, 6.0], &VerdictConfig::memory());
        assert_eq!(c.verdict_text(), "larger");
        let c = compare(Metric::Memory, "m", &[5.0, 5.0], &[5.0, 5.0], &VerdictConfig::memory());
        assert_eq!(c.verdict, Verdict::NoSignificantDifference);
        assert!(c.describe().starts_with("no significant difference (+0.0%"));
    }
}
