//! The decision rules a finding is judged by, on fixed data: the paired sign test, the Wilcoxon
//! signed-rank test and the exact (order-statistic) confidence interval of a median or of the
//! per-pair ratio, with censored runs (a run that hit its time limit), failed and undefined runs
//! handled as the findings format states.
//!
//! Conventions. A pair is one repetition of one setting, the claim's side A against side B (with
//! the same seed along the scenario's contender axis; along another axis, or with a pinned
//! server, matched by repetition number only). "A better" follows the metric's direction. A censored run took at least
//! its limit: for a lower-is-better metric it loses its pairing to a finished run and two censored
//! runs tie (for a higher-is-better metric a censored run's value is unknown, and the pair is left
//! out and counted). A censored run of a metric that is not a time to completion has no bound in
//! the metric's unit (`at_least` is NaN): its pair is left out and counted. Failed runs never enter
//! a pair; they are counted, and above [`MAX_FAILED_SHARE`] of the runs (runs whose partner is
//! missing count as failed) a finding is inconclusive. A run whose metric is legitimately
//! undefined ([`Observed::Undefined`], e.g. a rebuilt share when nothing was dropped) is counted
//! apart and is not a failure.

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
    /// The run finished, and its metric has no value by definition (the metric declares when:
    /// [`quiclab_experiment::metric::MetricDef::undefined_when`]): left out, not a failure.
    Undefined,
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
    /// Pairs left out: a failed or undefined run, or a censored run of a higher-is-better metric
    /// or of a metric that is not a time.
    pub left_out: usize,
    /// Runs on both sides.
    pub runs: usize,
    /// Runs whose metric is undefined by its own definition (not failures).
    #[serde(default)]
    pub undefined_runs: usize,
    /// Runs of one side whose partner (same setting and repetition, other side) is not in the
    /// results: counted as missing, like failures.
    #[serde(default)]
    pub unpaired: usize,
    /// Repetitions folded into their cell's one unit because they did not differ (copies):
    /// their runs count in `runs`, not in the test's n.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub copies: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Counts {
    /// The share of runs without a value that should have one: failed runs and runs whose
    /// partner is missing.
    pub fn failed_share(&self) -> f64 {
        let all = self.runs + self.unpaired;
        if all == 0 {
            return 0.0;
        }
        (self.failed_runs + self.unpaired) as f64 / all as f64
    }

    /// Pairs (or runs) that say something: one side better, ties left out.
    pub fn informative(&self) -> usize {
        self.a_better + self.a_worse
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
                Observed::Undefined => c.undefined_runs += 1,
                Observed::Value(_) => {}
            }
        }
        let outcome = match (a, b, better) {
            (Observed::Value(x), Observed::Value(y), _) if x.is_finite() && y.is_finite() => {
                PairOutcome::Both(x, y)
            }
            (Observed::Value(x), Observed::Censored { at_least }, Better::Lower)
                if x.is_finite() && at_least.is_finite() =>
            {
                PairOutcome::AOnly
            }
            (Observed::Censored { at_least }, Observed::Value(y), Better::Lower)
                if y.is_finite() && at_least.is_finite() =>
            {
                PairOutcome::BOnly
            }
            (
                Observed::Censored { at_least: x },
                Observed::Censored { at_least: y },
                Better::Lower,
            ) if x.is_finite() && y.is_finite() => PairOutcome::BothCensored,
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

/// The median of a set of values (censored ones enter as +∞) and its exact distribution-free
/// confidence interval from order statistics: `[x₍ₖ₎, x₍ₙ₋ₖ₊₁₎]` covers the true median with
/// probability `1 − 2·P(B ≤ k − 1)`, B ~ Binomial(n, ½), whatever the distribution (the
/// interval that is dual to the sign test: a value outside it is rejected by the sign test at the
/// same level). `level` is the coverage actually reached: the widest interval, `[min, max]`,
/// covers `1 − 2/2ⁿ`, so at n = 5 no interval reaches 95 % (it covers 93.75 %) and a rule that
/// asks for 95 % says the evidence is too thin instead of printing a shorter interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RatioInterval {
    /// The median (of the pairs' ratios A/B, or of the values).
    pub median: f64,
    pub low: f64,
    pub high: f64,
    /// The interval's coverage: at least the level asked for when n allows it, else the most
    /// that n allows (below the level asked for).
    pub level: f64,
    pub n: usize,
}

impl RatioInterval {
    /// Whether the interval reaches `level` (e.g. 0.95).
    pub fn reaches(&self, level: f64) -> bool {
        self.level + 1e-12 >= level
    }
}

/// P(B ≤ j) for B ~ Binomial(n, ½), summed in log space (n in the thousands neither overflows
/// nor underflows).
pub fn binomial_half_cdf(n: usize, j: usize) -> f64 {
    if j >= n {
        return 1.0;
    }
    let mut ln_term = -(n as f64) * std::f64::consts::LN_2;
    let mut sum = ln_term.exp();
    for i in 1..=j {
        ln_term += ((n - i + 1) as f64).ln() - (i as f64).ln();
        sum += ln_term.exp();
    }
    sum.min(1.0)
}

/// The median's exact interval at `level` (see [`RatioInterval`]); None for no values.
pub fn median_interval(values: &[f64], level: f64) -> Option<RatioInterval> {
    let n = values.len();
    if n == 0 {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    // The largest k (narrowest interval) whose coverage still reaches the level; k = 1 (the
    // range) when none does, with the coverage it has.
    let coverage = |k: usize| 1.0 - 2.0 * binomial_half_cdf(n, k - 1);
    let mut k = 1;
    while k < n.div_ceil(2) && coverage(k + 1) + 1e-12 >= level {
        k += 1;
    }
    Some(RatioInterval {
        median,
        low: v[k - 1],
        high: v[n - k],
        level: coverage(k),
        n,
    })
}

/// The ratio A/B of one pair, by the convention the sign test uses too (so that the interval of
/// the median ratio is the test's dual): two equal values are a tie (0/0 = 1), x/0 = +∞; for a
/// lower-is-better metric a censored run took at least its limit and enters as +∞ (finished
/// against censored 0, censored against finished +∞, both censored a tie); a censored run of a
/// higher-is-better metric, or one without a bound, a failed or undefined run has no ratio.
pub fn ratio_of(a: Observed, b: Observed, better: Better) -> Option<f64> {
    let finite = |o: Observed| match o {
        Observed::Value(x) if x.is_finite() => Some(x),
        _ => None,
    };
    let bounded =
        |o: Observed| matches!(o, Observed::Censored { at_least } if at_least.is_finite());
    match (finite(a), finite(b)) {
        (Some(x), Some(y)) if x == y => Some(1.0),
        (Some(x), Some(0.0)) => Some(if x > 0.0 { f64::INFINITY } else { 0.0 }),
        (Some(x), Some(y)) => Some(x / y),
        (Some(_), None) if better == Better::Lower && bounded(b) => Some(0.0),
        (None, Some(_)) if better == Better::Lower && bounded(a) => Some(f64::INFINITY),
        (None, None) if better == Better::Lower && bounded(a) && bounded(b) => Some(1.0),
        _ => None,
    }
}

/// The per-pair ratios A/B ([`ratio_of`]): every pair the sign test compares, ties included.
pub fn ratios(pairs: &[(Observed, Observed)], better: Better) -> Vec<f64> {
    pairs
        .iter()
        .filter_map(|&(a, b)| ratio_of(a, b, better))
        .collect()
}

/// The median per-pair ratio A/B and its exact interval.
pub fn ratio_interval(
    pairs: &[(Observed, Observed)],
    better: Better,
    level: f64,
) -> Option<RatioInterval> {
    median_interval(&ratios(pairs, better), level)
}

/// The two-sided exact sign test that is the dual of the median's order-statistic interval:
/// values equal to the tested one (ties) count against rejecting it on either side, so the
/// interval at 1 − α excludes the value exactly when p ≤ α. `below` and `above` are the values on
/// each side, `ties` those equal to it.
pub fn dual_sign_p(below: usize, above: usize, ties: usize) -> f64 {
    let n = below + above + ties;
    if n == 0 {
        return 1.0;
    }
    (2.0 * binomial_half_cdf(n, below.min(above) + ties)).min(1.0)
}

/// The smallest two-sided p the sign test (or the exact signed-rank test) can give with `n`
/// informative pairs: every pair on one side, 2/2ⁿ.
pub fn smallest_p(n: usize) -> f64 {
    quiclab_experiment::stats::sign_test_p(n, 0)
}

/// The fewest informative pairs (or runs) with which a two-sided sign test can reach p < `alpha`
/// (6 at α = 0.05: 2/2⁵ = 0.0625, 2/2⁶ = 0.031).
pub fn fewest_informative(alpha: f64) -> usize {
    (1..=64).find(|&n| smallest_p(n) < alpha).unwrap_or(64)
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

    /// Reference: scipy 1.17.1, `scipy.stats.wilcoxon(d, zero_method="wilcox", correction=True,
    /// method="approx")` (Python 3.11, 2026-11-26): tied magnitudes and zero differences, n > 30.
    #[test]
    fn wilcoxon_normal_approximation_with_ties_matches_scipy() {
        // d1 = [((i % 7) - 2) + (0.5 if i % 3 == 0 else 0) for i in 1..=40]: 4 zeros, many ties.
        let d1: Vec<f64> = (1..=40)
            .map(|i| ((i % 7) - 2) as f64 + if i % 3 == 0 { 0.5 } else { 0.0 })
            .collect();
        let p1: Vec<_> = d1.iter().map(|&d| (Value(0.0), Value(d))).collect();
        let (p, c) = wilcoxon(&p1, Better::Lower);
        assert_eq!(c.ties, 4);
        assert!((p - 0.0014960739699902295).abs() < 2e-6, "{p}");
        // d2: 35 differences in tied groups of up to three.
        let d2 = [
            1.0, 1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 3.0, 3.0, -1.0, -1.0, -2.0, 4.0, 4.0, 5.0, -3.0,
            6.0, 6.0, 6.0, -6.0, 7.0, 8.0, 8.0, 9.0, -9.0, 10.0, 10.0, 11.0, 12.0, -12.0, 13.0,
            13.0, 14.0, 15.0, -15.0,
        ];
        let p2: Vec<_> = d2.iter().map(|&d| (Value(0.0), Value(d))).collect();
        let (p, _) = wilcoxon(&p2, Better::Lower);
        assert!((p - 0.0026240987150914917).abs() < 2e-6, "{p}");
    }

    /// Reference: `1 - 2 * scipy.stats.binom.cdf(k - 1, n, 0.5)` (scipy 1.17.1), the coverage of
    /// the order-statistic interval [x(k), x(n-k+1)] of a median; the textbook 95 % intervals are
    /// [x(2), x(9)] at n = 10 and [x(6), x(15)] at n = 20.
    #[test]
    fn exact_median_intervals_match_the_binomial_coverage() {
        for (n, k, coverage) in [
            (5, 1, 0.9375),
            (6, 1, 0.96875),
            (6, 2, 0.78125),
            (10, 2, 0.978515625),
            (10, 3, 0.890625),
            (20, 6, 0.9586105346679688),
            (20, 7, 0.8846817016601562),
        ] {
            let got = 1.0 - 2.0 * binomial_half_cdf(n, k - 1);
            assert!((got - coverage).abs() < 1e-12, "n {n} k {k}: {got}");
        }
        let v = |n: usize| (1..=n).map(|i| i as f64).rev().collect::<Vec<_>>();
        // n = 5: no interval reaches 95 %; the range is given with its 93.75 %.
        let e = median_interval(&v(5), 0.95).unwrap();
        assert_eq!((e.low, e.high, e.median), (1.0, 5.0, 3.0));
        assert!((e.level - 0.9375).abs() < 1e-12 && !e.reaches(0.95));
        let e = median_interval(&v(6), 0.95).unwrap();
        assert_eq!((e.low, e.high, e.median), (1.0, 6.0, 3.5));
        assert!(e.reaches(0.95));
        let e = median_interval(&v(10), 0.95).unwrap();
        assert_eq!((e.low, e.high), (2.0, 9.0));
        assert!((e.level - 0.978515625).abs() < 1e-12);
        let e = median_interval(&v(20), 0.95).unwrap();
        assert_eq!((e.low, e.high), (6.0, 15.0));
        // Censored runs enter as +∞: the upper end is unbounded when they reach it.
        let mut c = v(6);
        c[0] = f64::INFINITY;
        let e = median_interval(&c, 0.95).unwrap();
        assert_eq!(e.high, f64::INFINITY);
        assert!(median_interval(&[], 0.95).is_none());
        // The sign test is the interval's dual: 6 of 6 above a value, p = 2/64 < 0.05.
        assert_eq!(fewest_informative(0.05), 6);
        assert!((smallest_p(5) - 0.0625).abs() < 1e-12);
    }

    #[test]
    fn ratios_and_their_interval_leave_out_pairs_without_two_values() {
        let mut p = pairs(&(0..10).map(|i| (3.0 + i as f64, 1.0)).collect::<Vec<_>>());
        p.push((Censored { at_least: 60.0 }, Value(1.0)));
        p.push((Failed, Value(1.0)));
        p.push((Undefined, Value(1.0)));
        let e = ratio_interval(&p, Better::Higher, 0.95).unwrap();
        assert_eq!(e.n, 10);
        assert_eq!((e.low, e.high, e.median), (4.0, 11.0, 7.5));
        assert!(ratio_interval(&[(Failed, Value(1.0))], Better::Lower, 0.95).is_none());
        // For a time, the censored run is slower than any finished one: +∞, in the interval.
        let e = ratio_interval(&p, Better::Lower, 0.95).unwrap();
        assert_eq!(e.n, 11);
        let mut r = ratios(&p, Better::Lower);
        r.sort_by(f64::total_cmp);
        assert_eq!(r.last(), Some(&f64::INFINITY));
    }

    #[test]
    fn ties_and_zero_denominators_are_the_same_in_the_ratio_and_the_test() {
        let l = Better::Lower;
        assert_eq!(ratio_of(Value(0.0), Value(0.0), l), Some(1.0));
        assert_eq!(ratio_of(Value(0.004), Value(0.0), l), Some(f64::INFINITY));
        assert_eq!(ratio_of(Value(0.0), Value(0.004), l), Some(0.0));
        let c = Censored { at_least: 60.0 };
        assert_eq!(ratio_of(Value(5.0), c, l), Some(0.0));
        assert_eq!(ratio_of(c, Value(5.0), l), Some(f64::INFINITY));
        assert_eq!(ratio_of(c, c, l), Some(1.0));
        assert_eq!(ratio_of(c, Value(5.0), Better::Higher), None);
        assert_eq!(ratio_of(Failed, Value(5.0), l), None);
        // 6 of 6 on one side, no ties: 2/64; three ties count against: 2·P(B(9) ≤ 3) = 0.508.
        assert!((dual_sign_p(6, 0, 0) - 2.0 / 64.0).abs() < 1e-12);
        assert!((dual_sign_p(6, 0, 3) - 2.0 * 130.0 / 512.0).abs() < 1e-12);
        // Duality: the 95 % interval of these nine ratios reaches 1 exactly when p > 0.05.
        let r = [1.0, 1.0, 1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6];
        let e = median_interval(&r, 0.95).unwrap();
        assert!(e.low <= 1.0);
        let r = [1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8, 1.0];
        let e = median_interval(&r, 0.95).unwrap();
        // 8 above, 1 tie: p = 2·P(B(9) ≤ 1) = 0.039 < 0.05 and the interval's lower end is above 1.
        assert!(dual_sign_p(0, 8, 1) < 0.05 && e.low > 1.0, "{e:?}");
    }

    #[test]
    fn undefined_runs_are_counted_apart_from_failures() {
        let p = vec![(Undefined, Value(1.0)), (Value(1.0), Value(2.0))];
        let (_, c) = sign_test(&p, Better::Lower);
        assert_eq!(
            (c.undefined_runs, c.failed_runs, c.pairs, c.left_out),
            (1, 0, 1, 1)
        );
        assert_eq!(c.failed_share(), 0.0);
        // A censored run of a metric that is not a time has no bound: left out, not a loss.
        let p = vec![(Censored { at_least: f64::NAN }, Value(1.0))];
        let (_, c) = sign_test(&p, Better::Lower);
        assert_eq!((c.pairs, c.left_out, c.censored_runs), (0, 1, 1));
    }
}
