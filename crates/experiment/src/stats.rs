//! Statistics over repeated measurements of one setting.

pub use quiclab_link::stats::percentile;
use std::collections::BTreeMap;

use serde::Serialize;

/// Summary of a sample.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub n: usize,
    pub mean: f64,
    pub median: f64,
    /// Sample standard deviation (divisor n − 1); 0 when n = 1.
    pub std_dev: f64,
    /// 95 % confidence interval of the mean, Student's t with n − 1 degrees
    /// of freedom; `[mean, mean]` when n = 1.
    pub ci95_low: f64,
    pub ci95_high: f64,
    pub min: f64,
    pub max: f64,
}

/// Two-sided 97.5 % quantiles of Student's t for df 1..=30.
const T_975: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
    2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
    2.052, 2.048, 2.045, 2.042,
];

/// Tabulated points above 30; between them we interpolate linearly in df.
const T_975_SPARSE: [(f64, f64); 4] = [(30.0, 2.042), (40.0, 2.021), (60.0, 2.000), (120.0, 1.980)];

/// Normal quantile, the limit of t as df → ∞.
const Z_975: f64 = 1.960;

/// t(0.975, df) for a two-sided 95 % interval. Exact table values for df
/// 1..=30, 40, 60, 120; linear interpolation in df between them; above 120,
/// interpolation in 1/df towards 1.96 (t − z is roughly proportional to 1/df,
/// so this stays accurate all the way to ∞). df = 0 has no interval: NaN.
pub fn t_975(df: usize) -> f64 {
    if df == 0 {
        return f64::NAN;
    }
    if df <= 30 {
        return T_975[df - 1];
    }
    let x = df as f64;
    for w in T_975_SPARSE.windows(2) {
        let ((d0, t0), (d1, t1)) = (w[0], w[1]);
        if x <= d1 {
            return t0 + (t1 - t0) * (x - d0) / (d1 - d0);
        }
    }
    let (d, t) = T_975_SPARSE[T_975_SPARSE.len() - 1];
    Z_975 + (t - Z_975) * d / x
}

fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len() as f64
}

/// The median of `values` (the mean of the middle two for an even count); `None` when empty.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut sorted = values.to_vec();
    // total_cmp: a total order, so a stray NaN cannot panic the sort.
    sorted.sort_by(f64::total_cmp);
    (!sorted.is_empty()).then(|| median_of_sorted(&sorted))
}

fn median_of_sorted(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

/// Summarises `values`; `None` when empty.
pub fn summarize(values: &[f64]) -> Option<Summary> {
    if values.is_empty() {
        return None;
    }
    let n = values.len();
    let mut sorted = values.to_vec();
    // total_cmp: a total order, so a stray NaN cannot panic the sort.
    sorted.sort_by(f64::total_cmp);
    let m = mean(values);
    let median = median_of_sorted(&sorted);
    let (std_dev, half) = if n == 1 {
        (0.0, 0.0)
    } else {
        let var = values.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / (n - 1) as f64;
        let s = var.sqrt();
        (s, t_975(n - 1) * s / (n as f64).sqrt())
    };
    Some(Summary {
        n,
        mean: m,
        median,
        std_dev,
        ci95_low: m - half,
        ci95_high: m + half,
        min: sorted[0],
        max: sorted[n - 1],
    })
}

/// Empirical CDF: the sorted values, each with the fraction i/n of values at
/// or below it (i = 1..=n).
pub fn cdf(values: &[f64]) -> Vec<(f64, f64)> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len() as f64;
    sorted
        .into_iter()
        .enumerate()
        .map(|(i, v)| (v, (i + 1) as f64 / n))
        .collect()
}

/// Improvement of `x` over `base` in percent, `(base − x) / base × 100`
/// (Carlucci et al. 2015, eq. 2). For times (lower is better) a positive
/// result means `x` is faster.
pub fn improvement(base: f64, x: f64) -> f64 {
    (base - x) / base * 100.0
}

/// A paired comparison of protocol `x` with a baseline: each pair is one repetition of one setting,
/// the two runs made back to back (interleaved order) with the same seed, so they met the same
/// drawn losses and nearly the same state of the machine. Differences within a pair are free of
/// the drift between repetitions that the comparison of two means carries.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Paired {
    /// Pairs compared.
    pub n: usize,
    /// Median over pairs of the per-pair improvement, in percent, positive = `x` better.
    pub median_improvement: f64,
    /// Pairs where `x` was better / worse than the baseline (equal ones count in neither).
    pub better: usize,
    pub worse: usize,
    /// Two-sided exact sign test of "x is as often better as worse" (ties dropped); 1 when
    /// every pair is a tie.
    pub sign_test_p: f64,
}

/// Compares `x` with `base` pair by pair; each pair is `(base value, x value)`. `improvement`
/// gives the per-pair improvement in percent with positive = better (e.g. [`improvement`] for
/// lower-is-better metrics); pairs where it is not finite are left out. `None` without pairs.
pub fn paired(pairs: &[(f64, f64)], improvement: impl Fn(f64, f64) -> f64) -> Option<Paired> {
    let diffs: Vec<f64> = pairs
        .iter()
        .map(|&(b, x)| improvement(b, x))
        .filter(|d| d.is_finite())
        .collect();
    let summary = summarize(&diffs)?;
    let better = diffs.iter().filter(|&&d| d > 0.0).count();
    let worse = diffs.iter().filter(|&&d| d < 0.0).count();
    Some(Paired {
        n: diffs.len(),
        median_improvement: summary.median,
        better,
        worse,
        sign_test_p: sign_test_p(better, worse),
    })
}

/// Two-sided exact binomial sign test: the probability, if either outcome of a pair were equally
/// likely, of a split at least as uneven as `a` against `b`. 1 when `a + b = 0`.
pub fn sign_test_p(a: usize, b: usize) -> f64 {
    let n = a + b;
    if n == 0 {
        return 1.0;
    }
    let k = a.min(b);
    // Sum of C(n, i) / 2^n for i = 0..=k, term by term in log space so n in the thousands
    // neither overflows nor underflows to a wrong 0.
    let mut ln_term = -(n as f64) * std::f64::consts::LN_2; // i = 0: C(n, 0) / 2^n
    let mut tail = ln_term.exp();
    for i in 1..=k {
        ln_term += ((n - i + 1) as f64).ln() - (i as f64).ln();
        tail += ln_term.exp();
    }
    (2.0 * tail).min(1.0)
}

/// The winning rule of Megyesi et al. 2016 (Fig. 6), for metrics where lower
/// is better (e.g. page load time).
///
/// `a` beats `b` when at least 70 % of `a`'s runs are at least 10 % lower
/// than `b`'s mean, i.e. when the count of values `v` in `a` with
/// `v ≤ 0.9 × mean(b)` is ≥ 0.7 × `a.len()`. Empty inputs never win.
pub fn beats(a: &[f64], b: &[f64]) -> bool {
    if a.is_empty() || b.is_empty() {
        return false;
    }
    let threshold = 0.9 * mean(b);
    let count = a.iter().filter(|&&v| v <= threshold).count();
    // Integer comparison: 70 % of 10 runs is exactly 7, no float rounding.
    count * 10 >= a.len() * 7
}

/// Outcome of [`winners`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Winners {
    /// The winning protocol(s), sorted by name.
    Best(Vec<String>),
    /// No protocol (or pair) wins.
    Equal,
}

/// The fewest runs of each protocol a setting needs before [`winners`] is applied to it. The
/// rule asks that ≥ 70 % of a protocol's runs be ≥ 10 % faster than the other's mean: below 4
/// runs one run moves that share by more than the rule's 30-point margin (1/3 > 0.3), so a
/// single noisy run would decide the verdict. (The studies' findings use Megyesi et al.'s own
/// 10 runs.)
pub const WINS_MIN_RUNS: usize = 4;

/// Which protocols win one setting, by [`beats`] (Megyesi et al. 2016):
///
/// * `Best([p])` when `p` beats every other protocol;
/// * otherwise `Best([a, b])` when `a` and `b` each beat every protocol
///   other than each other, and neither beats the other (with three
///   protocols: both beat the third);
/// * otherwise `Equal`. Fewer than two protocols is also `Equal`: there is
///   nothing to compare.
pub fn winners(results: &BTreeMap<String, Vec<f64>>) -> Winners {
    let names: Vec<&String> = results.keys().collect();
    if names.len() < 2 {
        return Winners::Equal;
    }
    let b = |x: &str, y: &str| beats(&results[x], &results[y]);
    for &p in &names {
        if names.iter().all(|&q| q == p || b(p, q)) {
            return Winners::Best(vec![p.clone()]);
        }
    }
    for (i, &p) in names.iter().enumerate() {
        for &q in &names[i + 1..] {
            let pair_beats_rest = names
                .iter()
                .filter(|&&r| r != p && r != q)
                .all(|&r| b(p, r) && b(q, r));
            if names.len() > 2 && pair_beats_rest && !b(p, q) && !b(q, p) {
                return Winners::Best(vec![p.clone(), q.clone()]);
            }
        }
    }
    Winners::Equal
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, eps: f64) -> bool {
        (a - b).abs() < eps
    }

    #[test]
    fn summary_of_one_to_five() {
        let s = summarize(&[5.0, 1.0, 4.0, 2.0, 3.0]).unwrap();
        assert_eq!(s.n, 5);
        assert_eq!(s.mean, 3.0);
        assert_eq!(s.median, 3.0);
        assert!(close(s.std_dev, 1.5811, 1e-4));
        // 2.776 × 1.5811 / √5 = 1.963
        assert!(close(s.ci95_low, 3.0 - 1.963, 1e-3), "{s:?}");
        assert!(close(s.ci95_high, 3.0 + 1.963, 1e-3), "{s:?}");
        assert_eq!((s.min, s.max), (1.0, 5.0));
    }

    #[test]
    fn summary_edge_cases() {
        assert_eq!(summarize(&[]), None);
        let s = summarize(&[7.0]).unwrap();
        assert_eq!((s.ci95_low, s.ci95_high, s.std_dev), (7.0, 7.0, 0.0));
        assert_eq!(summarize(&[1.0, 2.0, 3.0, 10.0]).unwrap().median, 2.5);
    }

    #[test]
    fn t_table() {
        assert_eq!(t_975(4), 2.776);
        assert_eq!(t_975(30), 2.042);
        assert_eq!(t_975(40), 2.021);
        assert!(close(t_975(50), 2.0105, 1e-9));
        assert_eq!(t_975(120), 1.980);
        assert!(t_975(1000) < 1.980 && t_975(1000) > 1.960);
        assert!(close(t_975(usize::MAX), 1.96, 1e-9));
        assert!(t_975(0).is_nan());
    }

    #[test]
    fn cdf_fractions() {
        assert_eq!(
            cdf(&[3.0, 1.0, 2.0, 4.0]),
            vec![(1.0, 0.25), (2.0, 0.5), (3.0, 0.75), (4.0, 1.0)]
        );
        assert!(cdf(&[]).is_empty());
    }

    #[test]
    fn improvement_sign() {
        assert_eq!(improvement(10.0, 8.0), 20.0);
        assert_eq!(improvement(10.0, 12.0), -20.0);
        assert_eq!(improvement(10.0, 10.0), 0.0);
    }

    #[test]
    fn sign_test_matches_binomial_tables() {
        assert_eq!(sign_test_p(0, 0), 1.0);
        // 10 of 10: 2 / 1024.
        assert!(close(sign_test_p(10, 0), 2.0 / 1024.0, 1e-12));
        assert!(close(sign_test_p(0, 10), 2.0 / 1024.0, 1e-12));
        // 8 of 10: 2 × (1 + 10 + 45) / 1024 = 0.109375.
        assert!(close(sign_test_p(8, 2), 0.109375, 1e-12));
        // 5 of 10 is no evidence at all.
        assert_eq!(sign_test_p(5, 5), 1.0);
        // Large n stays finite and tiny instead of NaN or 0 from overflow.
        let p = sign_test_p(2000, 0);
        assert!((0.0..1e-300).contains(&p), "{p}");
        // 600 of 1000: 2.72846e-10 (exact, Python's integer arithmetic).
        let p = sign_test_p(600, 400);
        assert!(close(p, 2.728_464_156e-10, 1e-18), "{p}");
    }

    #[test]
    fn paired_counts_and_median() {
        // Lower is better: x beats the baseline in pairs 1-3, loses pair 4, ties pair 5.
        let pairs = [
            (100.0, 90.0),
            (100.0, 80.0),
            (200.0, 100.0),
            (100.0, 110.0),
            (50.0, 50.0),
        ];
        let p = paired(&pairs, improvement).unwrap();
        assert_eq!((p.n, p.better, p.worse), (5, 3, 1));
        // Per-pair improvements 10, 20, 50, -10, 0: median 10.
        assert!(close(p.median_improvement, 10.0, 1e-12));
        assert!(close(p.sign_test_p, 0.625, 1e-12));
        // A zero baseline gives no finite improvement: that pair is left out.
        let p = paired(&[(0.0, 1.0), (10.0, 5.0)], improvement).unwrap();
        assert_eq!(p.n, 1);
        assert!(paired(&[], improvement).is_none());
    }

    #[test]
    fn beats_seventy_percent_rule() {
        let b = [100.0, 100.0]; // mean 100, threshold 90
        // 7 of 10 (exactly 70 %) at or below 90: wins.
        let a: Vec<f64> = [80.0; 7].iter().chain(&[95.0; 3]).copied().collect();
        assert!(beats(&a, &b));
        // Just above 70 %: 3 of 4.
        assert!(beats(&[80.0, 80.0, 80.0, 99.0], &b));
        // Just below 70 %: 2 of 3 (66.7 %), and 6 of 10.
        assert!(!beats(&[80.0, 80.0, 99.0], &b));
        let a6: Vec<f64> = [80.0; 6].iter().chain(&[95.0; 4]).copied().collect();
        assert!(!beats(&a6, &b));
        // Exactly 10 % lower counts; a hair less than 10 % does not.
        assert!(beats(&[90.0], &b));
        assert!(!beats(&[90.001], &b));
        assert!(!beats(&[], &b) && !beats(&[1.0], &[]));
    }

    fn results(v: &[(&str, &[f64])]) -> BTreeMap<String, Vec<f64>> {
        v.iter().map(|(k, x)| (k.to_string(), x.to_vec())).collect()
    }

    #[test]
    fn winners_one_two_none() {
        let one = results(&[("h1", &[100.0; 5]), ("h2", &[100.0; 5]), ("h3", &[50.0; 5])]);
        assert_eq!(winners(&one), Winners::Best(vec!["h3".into()]));

        let two = results(&[("h1", &[100.0; 5]), ("h2", &[60.0; 5]), ("h3", &[62.0; 5])]);
        assert_eq!(winners(&two), Winners::Best(vec!["h2".into(), "h3".into()]));

        let none = results(&[("h1", &[100.0; 5]), ("h2", &[98.0; 5]), ("h3", &[101.0; 5])]);
        assert_eq!(winners(&none), Winners::Equal);

        // Only one protocol beats one other, none beats both: Equal.
        let partial = results(&[("h1", &[100.0; 5]), ("h2", &[88.0; 5]), ("h3", &[96.0; 5])]);
        assert_eq!(winners(&partial), Winners::Equal);

        let two_protocols = results(&[("h2", &[50.0; 3]), ("h3", &[100.0; 3])]);
        assert_eq!(winners(&two_protocols), Winners::Best(vec!["h2".into()]));
        assert_eq!(winners(&results(&[("h3", &[1.0])])), Winners::Equal);
    }

    #[test]
    fn percentile_picks_the_nearest_rank() {
        let mut v: Vec<f64> = (0..=100).map(f64::from).collect();
        v.reverse();
        v.push(f64::NAN);
        assert_eq!(percentile(&v, 0.5), Some(50.0));
        assert_eq!(percentile(&v, 0.99), Some(99.0));
        assert_eq!(percentile(&v, 1.0), Some(100.0));
        assert_eq!(percentile(&[], 0.5), None);
    }
}
