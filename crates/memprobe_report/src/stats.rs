//! Order statistics used for every summary: median and interquartile range,
//! which stay meaningful with few runs and are robust to a single slow step.

use serde::{Deserialize, Serialize};

/// Summary statistics over a set of samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// Number of samples.
    pub n: usize,
    /// Median (linear interpolation between order statistics).
    pub median: f64,
    /// 25th percentile.
    pub p25: f64,
    /// 75th percentile.
    pub p75: f64,
    /// p75 - p25.
    pub iqr: f64,
    /// Smallest sample.
    pub min: f64,
    /// Largest sample.
    pub max: f64,
    /// Arithmetic mean.
    pub mean: f64,
    /// Samples outside [p25 - 1.5 IQR, p75 + 1.5 IQR] (Tukey's fences).
    pub outliers: usize,
}

impl Stats {
    /// Computes statistics; `None` for an empty slice or any non-finite sample.
    pub fn from_samples(samples: &[f64]) -> Option<Stats> {
        if samples.is_empty() || samples.iter().any(|v| !v.is_finite()) {
            return None;
        }
        let mut v = samples.to_vec();
        v.sort_by(f64::total_cmp);
        let p25 = quantile_sorted(&v, 0.25);
        let median = quantile_sorted(&v, 0.5);
        let p75 = quantile_sorted(&v, 0.75);
        let iqr = p75 - p25;
        let (lo, hi) = (p25 - 1.5 * iqr, p75 + 1.5 * iqr);
        Some(Stats {
            n: v.len(),
            median,
            p25,
            p75,
            iqr,
            min: v[0],
            max: v[v.len() - 1],
            mean: v.iter().sum::<f64>() / v.len() as f64,
            outliers: v.iter().filter(|&&x| x < lo || x > hi).count(),
        })
    }
}

/// Quantile `q` in [0, 1] of sorted, non-empty data (type 7, as numpy's default).
pub fn quantile_sorted(sorted: &[f64], q: f64) -> f64 {
    debug_assert!(!sorted.is_empty());
    let pos = q.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    let frac = pos - lo as f64;
    sorted[lo] + (sorted[hi] - sorted[lo]) * frac
}

/// Median of arbitrary data; `None` when empty or non-finite.
pub fn median(samples: &[f64]) -> Option<f64> {
    Stats::from_samples(samples).map(|s| s.median)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quartiles_match_numpy_linear() {
        // numpy.percentile([1,2,3,4,5,6,7,8], [25,50,75]) -> 2.75, 4.5, 6.25
        let s = Stats::from_samples(&[8.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]).unwrap();
        assert_eq!((s.p25, s.median, s.p75), (2.75, 4.5, 6.25));
        assert_eq!(s.iqr, 3.5);
        assert_eq!(s.outliers, 0);
    }

    #[test]
    fn outlier_counted_and_median_robust() {
        let s = Stats::from_samples(&[10.0, 10.0, 11.0, 10.0, 100.0]).unwrap();
        assert_eq!(s.median, 10.0);
        assert_eq!(s.outliers, 1);
    }

    #[test]
    fn empty_or_nan_is_none() {
        assert!(Stats::from_samples(&[]).is_none());
        assert!(Stats::from_samples(&[1.0, f64::NAN]).is_none());
    }
}
