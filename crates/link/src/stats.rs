//! Percentile summaries of recorded values, shared by the link model (queueing delay,
//! sojourn time, queue occupancy) and the I/O shell (release lateness).
//!
//! Values are recorded in HdrHistograms with 3 significant digits: constant memory per
//! distribution, mergeable, and accurate to 0.1% at every magnitude, which is what a
//! report needs (nobody reads the fourth digit of a p99).

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::Nanos;

/// Significant decimal digits kept by [`new_histogram`].
pub const SIGNIFICANT_DIGITS: u8 = 3;

/// Reads an `f64` that may have been written as `null`: serde_json writes a NaN (a figure that
/// could not be measured, e.g. CPU time whose /proc entry was gone) as `null`, and a stored result
/// must read back as it was written. Put on every plain `f64` field of a stored document.
pub fn f64_or_nan<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// A summary of a distribution, in the unit the values were recorded in.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct Distribution {
    /// Number of recorded values.
    pub count: u64,
    /// Mean (to histogram precision).
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    pub mean: f64,
    /// Median.
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    pub p50: f64,
    /// 90th percentile.
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    pub p90: f64,
    /// 99th percentile.
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    pub p99: f64,
    /// Largest recorded value (to histogram precision).
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    pub max: f64,
}

impl Distribution {
    /// Summarises `histogram`; all fields are 0 when it is empty.
    pub fn from_histogram(histogram: &Histogram<u64>) -> Distribution {
        if histogram.is_empty() {
            return Distribution::default();
        }
        Distribution {
            count: histogram.len(),
            mean: histogram.mean(),
            p50: histogram.value_at_quantile(0.50) as f64,
            p90: histogram.value_at_quantile(0.90) as f64,
            p99: histogram.value_at_quantile(0.99) as f64,
            max: histogram.max() as f64,
        }
    }
}

/// An empty auto-resizing histogram with [`SIGNIFICANT_DIGITS`] significant digits.
pub fn new_histogram() -> Histogram<u64> {
    // Cannot fail: 3 significant digits is within the supported 0..=5.
    Histogram::new(SIGNIFICANT_DIGITS).unwrap_or_else(|_| unreachable!("3 sigfigs is valid"))
}

/// Records `value`, growing the histogram as needed; a value too large to track even
/// after growing is clamped to the largest trackable value rather than lost or panicking.
pub fn record(histogram: &mut Histogram<u64>, value: u64) {
    if histogram.record(value).is_err() {
        histogram.saturating_record(value);
    }
}

/// Records a time given in nanoseconds at microsecond resolution (rounded to nearest).
pub fn record_micros(histogram: &mut Histogram<u64>, nanos: Nanos) {
    record(histogram, nanos_to_micros(nanos));
}

/// Nanoseconds to whole microseconds, rounded to nearest.
pub fn nanos_to_micros(nanos: Nanos) -> u64 {
    nanos / 1000 + u64::from(nanos % 1000 >= 500)
}

/// The `q`-quantile of `values` (any order; non-finite values ignored) by the rank
/// `round((n − 1) · q)` of the sorted values; None when there are none. The one percentile of
/// quiclab's own summaries (calibrate, benchmarks); the emulator's distributions come from
/// HdrHistograms instead.
pub fn percentile(values: &[f64], q: f64) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let idx = ((v.len() - 1) as f64 * q.clamp(0.0, 1.0)).round() as usize;
    Some(v[idx])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_histogram_gives_zeros() {
        assert_eq!(
            Distribution::from_histogram(&new_histogram()),
            Distribution::default()
        );
    }

    #[test]
    fn summarises_within_three_digits() {
        let mut histogram = new_histogram();
        for value in 1..=1000u64 {
            record(&mut histogram, value);
        }
        let summary = Distribution::from_histogram(&histogram);
        assert_eq!(summary.count, 1000);
        assert!((summary.mean - 500.5).abs() < 0.5, "{summary:?}");
        assert_eq!(summary.p50, 500.0);
        assert_eq!(summary.p90, 900.0);
        assert_eq!(summary.p99, 990.0);
        assert_eq!(summary.max, 1000.0);
    }

    #[test]
    fn large_values_grow_the_histogram() {
        let mut histogram = new_histogram();
        record(&mut histogram, 0);
        record(&mut histogram, 3_600_000_000);
        record(&mut histogram, u64::MAX);
        let summary = Distribution::from_histogram(&histogram);
        assert_eq!(summary.count, 3);
        assert!(summary.max >= 3.6e9);
    }

    #[test]
    fn micros_rounding() {
        assert_eq!(nanos_to_micros(0), 0);
        assert_eq!(nanos_to_micros(499), 0);
        assert_eq!(nanos_to_micros(500), 1);
        assert_eq!(nanos_to_micros(1_234_567), 1235);
    }
}
