//! Per-flow throughput over time and fairness, on one clock (nanoseconds, the caller's).
//!
//! A flow's received application bytes are counted in bins of `bin_ns` from the mix's start. The
//! goodput of a flow is taken over the window [start + cutoff, end − cutoff], as Flent's `cutoff`
//! does, so slow start and the stop do not count; only whole bins inside the window are used.
//! Jain's fairness index J = (Σx)² / (n · Σx²) is 1 when all n flows get the same and 1/n when one
//! gets everything.

use serde::{Deserialize, Serialize};

/// Bytes of one flow per bin.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bins {
    /// Time of bin 0's start (ns, the caller's clock).
    pub start_ns: u64,
    pub bin_ns: u64,
    /// Bytes received in each bin.
    pub bytes: Vec<u64>,
}

impl Bins {
    /// Counts `(t_ns, bytes)` receptions into bins from `start_ns` up to `end_ns` (receptions
    /// outside are not counted).
    pub fn count(
        receptions: impl IntoIterator<Item = (u64, u64)>,
        start_ns: u64,
        end_ns: u64,
        bin_ns: u64,
    ) -> Bins {
        let bin_ns = bin_ns.max(1);
        let n = end_ns.saturating_sub(start_ns).div_ceil(bin_ns) as usize;
        let mut bytes = vec![0u64; n];
        for (t, b) in receptions {
            if t < start_ns || t >= end_ns {
                continue;
            }
            let i = ((t - start_ns) / bin_ns) as usize;
            if let Some(slot) = bytes.get_mut(i) {
                *slot += b;
            }
        }
        Bins {
            start_ns,
            bin_ns,
            bytes,
        }
    }

    /// Indices of the whole bins inside [start + cutoff, end − cutoff], where end is the end of
    /// the last bin.
    pub fn window(&self, cutoff_ns: u64) -> std::ops::Range<usize> {
        let end = self.start_ns + self.bytes.len() as u64 * self.bin_ns;
        self.window_in(
            self.start_ns.saturating_add(cutoff_ns),
            end.saturating_sub(cutoff_ns),
        )
    }

    /// Indices of the whole bins inside [from_ns, to_ns] (times on the bins' clock); empty when
    /// none fits.
    pub fn window_in(&self, from_ns: u64, to_ns: u64) -> std::ops::Range<usize> {
        let first = from_ns.saturating_sub(self.start_ns).div_ceil(self.bin_ns) as usize;
        let last = (to_ns.saturating_sub(self.start_ns) / self.bin_ns) as usize;
        let last = last.min(self.bytes.len());
        first..last.max(first)
    }

    /// Mean throughput in bit/s over the bins `range`; None for an empty range.
    pub fn mean_bps(&self, range: std::ops::Range<usize>) -> Option<f64> {
        if range.is_empty() {
            return None;
        }
        let bytes: u64 = self.bytes[range.clone()].iter().sum();
        Some(bytes as f64 * 8.0 / (range.len() as f64 * self.bin_ns as f64 / 1e9))
    }

    /// The coefficient of variation (population standard deviation over mean) of the bytes per
    /// bin over the bins `range`: 0 for a perfectly steady flow, larger the more it swings from
    /// bin to bin (a saw-tooth, stalls). None for fewer than two bins or a mean of 0.
    pub fn cv(&self, range: std::ops::Range<usize>) -> Option<f64> {
        let xs: Vec<f64> = self.bytes.get(range)?.iter().map(|&b| b as f64).collect();
        let n = xs.len() as f64;
        let mean = xs.iter().sum::<f64>() / n;
        if xs.len() < 2 || mean <= 0.0 {
            return None;
        }
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
        Some(var.sqrt() / mean)
    }

    /// Throughput of each bin in bit/s.
    pub fn rates_bps(&self) -> Vec<f64> {
        let s = self.bin_ns as f64 / 1e9;
        self.bytes.iter().map(|&b| b as f64 * 8.0 / s).collect()
    }
}

/// Mean throughput in bit/s over the whole bins inside the cutoff window; None when the window
/// holds no whole bin.
pub fn window_goodput_bps(bins: &Bins, cutoff_ns: u64) -> Option<f64> {
    bins.mean_bps(bins.window(cutoff_ns))
}

/// Jain's fairness index of `xs`; None for no values or when all are 0 (undefined).
pub fn jain(xs: &[f64]) -> Option<f64> {
    let n = xs.len() as f64;
    let sum: f64 = xs.iter().sum();
    let sq: f64 = xs.iter().map(|x| x * x).sum();
    (n > 0.0 && sq > 0.0).then(|| sum * sum / (n * sq))
}

/// The mean over the bins of the cutoff window of Jain's index across flows (bins in which no flow
/// received anything are left out); None without such a bin. All `flows` must share start and
/// bin size.
pub fn jain_per_bin(flows: &[Bins], cutoff_ns: u64) -> Option<f64> {
    jain_per_bin_in(flows, flows.first()?.window(cutoff_ns))
}

/// [`jain_per_bin`] over the bins `w` (e.g. the window in which every flow of a mix ran).
pub fn jain_per_bin_in(flows: &[Bins], w: std::ops::Range<usize>) -> Option<f64> {
    let per_bin: Vec<f64> = w
        .filter_map(|i| {
            let xs: Vec<f64> = flows
                .iter()
                .map(|f| f.bytes.get(i).copied().unwrap_or(0) as f64)
                .collect();
            jain(&xs)
        })
        .collect();
    (!per_bin.is_empty()).then(|| per_bin.iter().sum::<f64>() / per_bin.len() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn cv_on_hand_computed_values() {
        let b = Bins {
            start_ns: 0,
            bin_ns: 100 * MS,
            bytes: vec![9, 10, 10, 10, 10, 0, 20, 10, 10],
        };
        // Steady bins: no variation.
        assert_eq!(b.cv(1..5), Some(0.0));
        // 0, 20, 10, 10: mean 10, population sd √50.
        assert!((b.cv(5..9).unwrap() - 50f64.sqrt() / 10.0).abs() < 1e-12);
        // Fewer than two bins, a mean of 0, a range past the end: undefined.
        assert_eq!(b.cv(1..2), None);
        assert_eq!(b.cv(5..6), None);
        assert_eq!(b.cv(8..12), None);
        let idle = Bins {
            start_ns: 0,
            bin_ns: 1,
            bytes: vec![0, 0, 0],
        };
        assert_eq!(idle.cv(0..3), None);
    }

    #[test]
    fn jain_on_hand_computed_values() {
        assert_eq!(jain(&[5.0, 5.0]), Some(1.0));
        // (3 + 1)² / (2 · (9 + 1)) = 16 / 20.
        assert_eq!(jain(&[3.0, 1.0]), Some(0.8));
        // One of three gets everything: 1/n.
        assert!((jain(&[7.0, 0.0, 0.0]).unwrap() - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(jain(&[0.0, 0.0]), None);
        assert_eq!(jain(&[]), None);
    }

    #[test]
    fn bins_count_receptions_on_the_callers_clock() {
        // Start at 1 s; 100 ms bins; 1 s long.
        let start = 1_000 * MS;
        let b = Bins::count(
            [
                (start, 100),
                (start + 99 * MS, 50),
                (start + 100 * MS, 7),
                (start + 999 * MS, 1),
                (start + 1_000 * MS, 1_000), // at the end: outside
                (start - 1, 1_000),          // before the start: outside
            ],
            start,
            start + 1_000 * MS,
            100 * MS,
        );
        assert_eq!(b.bytes, [150, 7, 0, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(b.rates_bps()[0], 150.0 * 8.0 / 0.1);
    }

    #[test]
    fn the_cutoff_window_keeps_whole_bins_only() {
        let b = Bins {
            start_ns: 0,
            bin_ns: 100 * MS,
            bytes: vec![0, 10, 20, 30, 40, 50, 60, 70, 80, 0],
        };
        // 1 s of bins, cutoff 250 ms: [250, 750] ms → whole bins 3..7 (300–700 ms).
        assert_eq!(b.window(250 * MS), 3..7);
        let g = window_goodput_bps(&b, 250 * MS).unwrap();
        assert!(
            (g - (30 + 40 + 50 + 60) as f64 * 8.0 / 0.4).abs() < 1e-9,
            "{g}"
        );
        assert_eq!(b.window(0), 0..10);
        // A cutoff of half the run or more leaves nothing.
        assert_eq!(window_goodput_bps(&b, 500 * MS), None);
    }

    #[test]
    fn flents_jain_on_a_fixed_series() {
        // Two flows over 10 bins of 1 s with a 2 s cutoff: flow A 3 Mbit/s, flow B 1 Mbit/s in the
        // window → J over the means = 0.8, as Flent computes it on the means of the series.
        let mk = |v: [u64; 10]| Bins {
            start_ns: 0,
            bin_ns: 1_000 * MS,
            bytes: v.to_vec(),
        };
        let a = mk([
            9, 9, 375_000, 375_000, 375_000, 375_000, 375_000, 375_000, 0, 0,
        ]);
        let b = mk([
            0, 0, 125_000, 125_000, 125_000, 125_000, 125_000, 125_000, 9, 9,
        ]);
        let cutoff = 2_000 * MS;
        let means: Vec<f64> = [&a, &b]
            .iter()
            .map(|f| window_goodput_bps(f, cutoff).unwrap())
            .collect();
        assert_eq!(means, [3e6, 1e6]);
        assert_eq!(jain(&means), Some(0.8));
        let per_bin = jain_per_bin(&[a.clone(), b.clone()], cutoff).unwrap();
        assert!((per_bin - 0.8).abs() < 1e-12, "{per_bin}");
        // Per-bin J differs from J of the means when shares alternate: 1 vs 0 then 0 vs 1.
        let c = mk([1, 0, 1, 0, 1, 0, 1, 0, 1, 0]);
        let d = mk([0, 1, 0, 1, 0, 1, 0, 1, 0, 1]);
        assert_eq!(jain_per_bin(&[c.clone(), d.clone()], 0), Some(0.5));
        let m: Vec<f64> = [&c, &d]
            .iter()
            .map(|f| window_goodput_bps(f, 0).unwrap())
            .collect();
        assert_eq!(jain(&m), Some(1.0));
    }

    #[test]
    fn windows_between_two_times_on_the_bins_clock() {
        let b = Bins {
            start_ns: 1_000 * MS,
            bin_ns: 100 * MS,
            bytes: vec![1; 10],
        };
        // [1.25 s, 1.75 s] → bins starting at 1.3, 1.4, 1.5, 1.6 s.
        assert_eq!(b.window_in(1_250 * MS, 1_750 * MS), 3..7);
        // Bounds on bin edges are included; beyond the bins is clipped.
        assert_eq!(b.window_in(1_000 * MS, 5_000 * MS), 0..10);
        // Before the start, or an empty interval.
        assert_eq!(b.window_in(0, 1_100 * MS), 0..1);
        assert!(b.window_in(1_500 * MS, 1_450 * MS).is_empty());
        assert_eq!(b.mean_bps(0..0), None);
        assert_eq!(b.mean_bps(0..2), Some(2.0 * 8.0 / 0.2));
    }
}
