//! Distributions of the shell's own measurements (kept in nanoseconds, reported in microseconds).

use hdrhistogram::Histogram;
pub use quiclab_link::stats::Distribution;

/// Summarises a histogram of nanoseconds as a distribution in microseconds.
pub fn distribution_us(h: &Histogram<u64>) -> Distribution {
    let us = |ns: u64| ns as f64 / 1000.0;
    if h.is_empty() {
        return Distribution {
            count: 0,
            mean: 0.0,
            p50: 0.0,
            p90: 0.0,
            p99: 0.0,
            max: 0.0,
        };
    }
    Distribution {
        count: h.len(),
        mean: h.mean() / 1000.0,
        p50: us(h.value_at_quantile(0.5)),
        p90: us(h.value_at_quantile(0.9)),
        p99: us(h.value_at_quantile(0.99)),
        max: us(h.max()),
    }
}
