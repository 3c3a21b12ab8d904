//! The decision rules a finding is judged by, on fixed data: the paired sign test, the Wilcoxon
//! signed-rank test and a bootstrap confidence interval of the per-pair ratio, with censored runs
//! (a run that hit its time limit) and failed runs handled as the findings format states.
//!
//! Conventions. A pair is one repetition of one setting, the claim's side A against side B, both
//! run with the same seed. "A better" follows the metric's direction. A censored run took at least
//! its limit: for a lower-is-better metric it loses its pairing to a finished run and two censored
//! runs tie (for a higher-is-better metric a censored run's value is unknown, and the pair is left
//! out and counted). Failed runs never enter a pair; they are counted, and above
//! [`MAX_FAILED_SHARE`] of the runs a finding is inconclusive.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

/// Above this share of failed runs no verdict is given (the 5 %).
pub const MAX_FAILED_SHARE: f64 = 0.05;

/// One run's value of the finding's metric.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub enum Observed {
    Value(f64),
    /// Stopped by its time limit: the run would have taken at least this long.
    Censored {
        at_least: f64,
    },
    /// Failed (or not measured): no value.
    Failed,
}

/// Which values are better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Better {
    Lower,
    Higher,
}

/// How a pair came out for A.
#[derive(Debug, Clone, Copy, PartialEq)]
enum PairOutcome {
    /// Both finished: A's value, B's value.
    Both(f64, f64),
    /// A finished, B censored (A better for lower-is-better).
    AOnly,
    /// B finished, A censored.
    BOnly,
    /// Both censored: a tie.
    BothCensored,
}

/// The pairs that can be compared, and what was left out.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Counts {
    /// Pairs compared (ties included).
    pub pairs: usize,
    /// Pairs where A was better / worse / equal.
    pub a_better: usize,
    pub a_worse: usize,
    pub ties: usize,
    /// Runs (of either side) that failed, and that were censored.
    pub failed_runs: usize,
    pub censored_runs: usize,
    /// Pairs left out: a failed run, or a censored run of a higher-is-better metric.
    pub left_out: usize,
    /// Runs on both sides.
    pub runs: usize,
}

impl Counts {
    pub fn failed_share(&self) -> f64 {
        if self.runs == 0 {
            return 0.0;
        }
        self.failed_runs as f64 / self.runs as f64
    }
}

fn classify(pairs: &[(Observed, Observed)], better: Better) -> (Vec<PairOutcome>, Counts) {
    let mut c = Counts {
        runs: pairs.len() * 2,
        ..Counts::default()
    };
    let mut out = Vec::new();
    for &(a, b) in pairs {
        for o in [a, b] {
            match o {
                Observed::Failed => c.failed_runs += 1,
                Observed::Censored { .. } => c.censored_runs += 1,
                Observed::Value(_) => {}
            }
        }
        let outcome = match (a, b, better) {
            (Observed::Value(x), Observed::Value(y), _) if x.is_finite() && y.is_finite() => {
                PairOutcome::Both(x, y)
            }
            (Observed::Value(x), Observed::Censored { .. }, Better::Lower) if x.is_finite() => {
                PairOutcome::AOnly
            }
            (Observed::Censored { .. }, Observed::Value(y), Better::Lower) if y.is_finite() => {
                PairOutcome::BOnly
            }
            (Observed::Censored { .. }, Observed::Censored { .. }, Better::Lower) => {
                PairOutcome::BothCensored
            }
            _ => {
                c.left_out += 1;
                continue;
            }
        };
        let sign = match outcome {
            PairOutcome::Both(x, y) => {
                let d = match better {
                    Better::Lower => y - x,
                    Better::Higher => x - y,
                };
                d.partial_cmp(&0.0).unwrap_or(std::cmp::Ordering::Equal)
            }
            PairOutcome::AOnly => std::cmp::Ordering::Greater,
            PairOutcome::BOnly => std::cmp::Ordering::Less,
            PairOutcome::BothCensored => std::cmp::Ordering::Equal,
        };
        match sign {
            std::cmp::Ordering::Greater => c.a_better += 1,
            std::cmp::Ordering::Less => c.a_worse += 1,
            std::cmp::Ordering::Equal => c.ties += 1,
        }
        c.pairs += 1;
        out.push(outcome);
    }
    (out, c)
}

/// Two-sided exact sign test of the pairs (ties dropped), with the counts.
pub fn sign_test(pairs: &[(Observed, Observed)], better: Better) -> (f64, Counts) {
    let (_, c) = classify(pairs, better);
    (
        quiclab_experiment::stats::sign_test_p(c.a_better, c.a_worse),
        c,
    )
}

/// Two-sided Wilcoxon signed-rank test of the pairs' differences (A better = positive), zero
/// differences dropped, tied magnitudes given their mean rank. A pair with a censored side has a
/// difference of unknown size in a known direction: it ranks above every finished pair (the
/// largest magnitudes, as a run that hit its limit is the slowest of all); censored pairs tie among
/// themselves. Exact p (by the distribution of the rank sum) up to 30 non-zero pairs without ties,
/// else the normal approximation with the tie correction.
pub fn wilcoxon(pairs: &[(Observed, Observed)], better: Better) -> (f64, Counts) {
    let (outcomes, c) = classify(pairs, better);
    // (magnitude class, magnitude, sign): class 1 ranks above class 0.
    let mut diffs: Vec<(u8, f64, f64)> = Vec::new();
    for o in outcomes {
        match o {
            PairOutcome::Both(x, y) => {
                let d = match better {
                    Better::Lower => y - x,
                    Better::Higher => x - y,
                };
                if d != 0.0 {
                    diffs.push((0, d.abs(), d.signum()));
                }
            }
            PairOutcome::AOnly => diffs.push((1, 0.0, 1.0)),
            PairOutcome::BOnly => diffs.push((1, 0.0, -1.0)),
            PairOutcome::BothCensored => {}
        }
    }
    let n = diffs.len();
    if n == 0 {
        return (1.0, c);
    }
    diffs.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
    // Mean ranks over runs of equal magnitude.
    let mut ranks = vec![0.0; n];
    let mut tie_groups = Vec::new();
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && diffs[j + 1].0 == diffs[i].0 && diffs[j + 1].1 == diffs[i].1 {
            j += 1;
        }
        let mean = (i + j + 2) as f64 / 2.0;
        ranks[i..=j].iter_mut().for_each(|r| *r = mean);
        tie_groups.push(j - i + 1);
        i = j + 1;
    }
    let w_plus: f64 = diffs
        .iter()
        .zip(&ranks)
        .filter(|(d, _)| d.2 > 0.0)
        .map(|(_, r)| r)
        .sum();
    let total = (n * (n + 1)) as f64 / 2.0;
    let no_ties = tie_groups.iter().all(|&t| t == 1);
    let p = if n <= 30 && no_ties {
        exact_wilcoxon_p(n, w_plus.min(total - w_plus).round() as usize)
    } else {
        let mean = total / 2.0;
        let tie_term: f64 = tie_groups
            .iter()
            .map(|&t| (t * t * t - t) as f64)
            .sum::<f64>()
            / 48.0;
        let var = (n * (n + 1) * (2 * n + 1)) as f64 / 24.0 - tie_term;
        if var <= 0.0 {
            1.0
        } else {
            // Continuity correction of 0.5.
            let z = ((w_plus - mean).abs() - 0.5).max(0.0) / var.sqrt();
            (2.0 * normal_upper_tail(z)).min(1.0)
        }
    };
    (p, c)
}

/// P(W ≤ w) × 2 for the signed-rank statistic of `n` pairs (all 2^n sign patterns equally likely).
fn exact_wilcoxon_p(n: usize, w: usize) -> f64 {
    let max = n * (n + 1) / 2;
    // counts[s] = number of subsets of {1..n} with rank sum s, as f64 (2^30 fits exactly).
    let mut counts = vec![0.0f64; max + 1];
    counts[0] = 1.0;
    for k in 1..=n {
        for s in (k..=max).rev() {
            counts[s] += counts[s - k];
        }
    }
    let tail: f64 = counts[..=w.min(max)].iter().sum();
    (2.0 * tail / 2f64.powi(n as i32)).min(1.0)
}

/// 1 − Φ(z) (Abramowitz–Stegun 7.1.26 through erfc; |error| < 1.5e-7).
fn normal_upper_tail(z: f64) -> f64 {
    let x = z / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * x.abs());
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736
                + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let erfc = poly * (-x * x).exp();
    let erfc = if x >= 0.0 { erfc } else { 2.0 - erfc };
    erfc / 2.0
}

/// A bootstrap confidence interval of the median of the per-pair ratios A/B (finished pairs
/// only; censored and failed pairs are counted and left out), `resamples` draws from a seeded
/// generator so the interval is reproducible.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RatioInterval {
    /// The median of the pairs' ratios.
    pub median: f64,
    pub low: f64,
    pub high: f64,
    /// The interval's level, e.g. 0.95.
    pub level: f64,
    pub n: usize,
}

pub fn ratio_interval(
    pairs: &[(Observed, Observed)],
    level: f64,
    resamples: usize,
    seed: u64,
) -> Option<RatioInterval> {
    let ratios: Vec<f64> = pairs
        .iter()
        .filter_map(|p| match *p {
            (Observed::Value(a), Observed::Value(b)) if b != 0.0 => Some(a / b),
            _ => None,
        })
        .filter(|r| r.is_finite())
        .collect();
    values_interval(&ratios, level, resamples, seed)
}

/// The same for one side's values (a threshold finding: e.g. Jain's index ≥ 0.9).
pub fn values_interval(
    values: &[f64],
    level: f64,
    resamples: usize,
    seed: u64,
) -> Option<RatioInterval> {
    let n = values.len();
    if n == 0 {
        return None;
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        let m = v.len();
        if m % 2 == 1 {
            v[m / 2]
        } else {
            (v[m / 2 - 1] + v[m / 2]) / 2.0
        }
    };
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut medians = Vec::with_capacity(resamples);
    let mut draw = Vec::with_capacity(n);
    for _ in 0..resamples.max(1) {
        draw.clear();
        draw.extend((0..n).map(|_| values[rng.random_range(0..n)]));
        medians.push(median(&mut draw));
    }
    medians.sort_by(f64::total_cmp);
    let q = |p: f64| medians[((medians.len() - 1) as f64 * p).round() as usize];
    let alpha = 1.0 - level;
    Some(RatioInterval {
        median: median(&mut values.to_vec()),
        low: q(alpha / 2.0),
        high: q(1.0 - alpha / 2.0),
        level,
        n,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use Observed::*;

    fn pairs(v: &[(f64, f64)]) -> Vec<(Observed, Observed)> {
        v.iter().map(|&(a, b)| (Value(a), Value(b))).collect()
    }

    #[test]
    fn sign_test_counts_by_the_metrics_direction() {
        let p = pairs(&[(1.0, 2.0), (1.0, 3.0), (2.0, 2.0), (5.0, 4.0)]);
        let (_, c) = sign_test(&p, Better::Lower);
        assert_eq!((c.a_better, c.a_worse, c.ties, c.pairs), (2, 1, 1, 4));
        let (_, c) = sign_test(&p, Better::Higher);
        assert_eq!((c.a_better, c.a_worse), (1, 2));
        // 10 of 10: p = 2 / 1024.
        let all = pairs(&[(1.0, 2.0); 10]);
        let (p, _) = sign_test(&all, Better::Lower);
        assert!((p - 2.0 / 1024.0).abs() < 1e-12, "{p}");
    }

    #[test]
    fn a_censored_run_loses_to_a_finished_one_and_two_tie() {
        let c = |t| Censored { at_least: t };
        let p = vec![
            (Value(5.0), c(60.0)),
            (c(60.0), Value(50.0)),
            (c(60.0), c(60.0)),
            (Failed, Value(1.0)),
        ];
        let (_, k) = sign_test(&p, Better::Lower);
        assert_eq!((k.a_better, k.a_worse, k.ties, k.left_out), (1, 1, 1, 1));
        assert_eq!((k.failed_runs, k.censored_runs, k.runs), (1, 4, 8));
        assert!((k.failed_share() - 0.125).abs() < 1e-12);
        // For a higher-is-better metric a censored value is unknown: left out, not guessed.
        let (_, k) = sign_test(&p, Better::Higher);
        assert_eq!((k.pairs, k.left_out), (0, 4));
    }

    #[test]
    fn wilcoxon_matches_tables_and_the_normal_approximation() {
        // n = 6, all positive: W- = 0, exact two-sided p = 2/64.
        let p6 = pairs(&[
            (1.0, 2.0),
            (1.0, 3.0),
            (1.0, 4.0),
            (1.0, 5.0),
            (1.0, 6.0),
            (1.0, 7.0),
        ]);
        let (p, _) = wilcoxon(&p6, Better::Lower);
        assert!((p - 2.0 / 64.0).abs() < 1e-12, "{p}");
        // n = 10 with the 2nd and 8th smallest magnitudes negative: W- = 10; 43 of the 1024 sign
        // patterns have a rank sum ≤ 10 (counted by brute force), so p = 2 · 43 / 1024.
        let d = [0.5, -1.0, 1.5, 2.0, 2.5, 3.0, 3.5, -4.0, 4.5, 5.0];
        let p10: Vec<_> = d.iter().map(|&d| (Value(0.0), Value(d))).collect();
        let (p, _) = wilcoxon(&p10, Better::Lower);
        assert!((p - 86.0 / 1024.0).abs() < 1e-12, "{p}");
        // Beyond 30 pairs the normal approximation: 40 positive differences → p ≈ 3.6e-8.
        let many = pairs(&(1..=40).map(|i| (0.0, i as f64)).collect::<Vec<_>>());
        let (p, _) = wilcoxon(&many, Better::Lower);
        assert!(p < 1e-6, "{p}");
        // No differences: p = 1.
        let (p, _) = wilcoxon(&pairs(&[(1.0, 1.0); 5]), Better::Lower);
        assert_eq!(p, 1.0);
        assert!((normal_upper_tail(1.96) - 0.025).abs() < 1e-4);
    }

    #[test]
    fn censored_pairs_rank_above_finished_ones() {
        // Five small wins for A and one censored loss: the loss has the top rank (6), W- = 6.
        let mut p = pairs(&[(1.0, 1.1), (1.0, 1.2), (1.0, 1.3), (1.0, 1.4), (1.0, 1.5)]);
        p.push((Censored { at_least: 60.0 }, Value(2.0)));
        let (p_w, c) = wilcoxon(&p, Better::Lower);
        assert_eq!((c.a_better, c.a_worse), (5, 1));
        // W = min(15, 6) = 6 with n = 6: P(W ≤ 6) = 14/64 → two-sided 0.4375.
        assert!((p_w - 0.4375).abs() < 1e-12, "{p_w}");
    }

    #[test]
    fn bootstrap_intervals_are_reproducible_and_cover_the_ratio() {
        let p = pairs(
            &(0..20)
                .map(|i| (3.0 + 0.01 * i as f64, 1.0))
                .collect::<Vec<_>>(),
        );
        let a = ratio_interval(&p, 0.95, 2000, 7).unwrap();
        let b = ratio_interval(&p, 0.95, 2000, 7).unwrap();
        assert_eq!(a, b);
        assert!(a.low <= a.median && a.median <= a.high, "{a:?}");
        assert!(a.low > 3.0 && a.high < 3.2, "{a:?}");
        assert_eq!(a.n, 20);
        assert!(ratio_interval(&[(Failed, Value(1.0))], 0.95, 100, 1).is_none());
    }
}
