//! From a finding's runs to its verdict: the runs it covers (scenario settings matching its
//! filter), paired by repetition and every other setting across the compared axis, judged by its
//! rule.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::rules::{self, Better, Counts, MAX_FAILED_SHARE, Observed, RatioInterval};

/// What a finding claims about its metric.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "claim", rename_all = "snake_case")]
pub enum Claim {
    /// A is better than B along `axis` (by the metric's direction), pair by pair.
    Better {
        axis: String,
        a: String,
        b: String,
    },
    /// The metric is at least / at most `value` (e.g. Jain's index ≥ 0.9).
    AtLeast {
        value: f64,
    },
    AtMost {
        value: f64,
    },
    /// The metric is `value` within ±`tolerance` × value (e.g. a goodput ratio of about 3): holds
    /// when the bootstrap interval of its median lies inside that band, does not hold when it
    /// lies outside, else inconclusive (an equivalence test).
    Approx {
        value: f64,
        tolerance: f64,
    },
    /// The per-pair ratio A/B along `axis` is `value` within ±`tolerance` × value (e.g. QUIC's
    /// page load time ≈ 3× SPDY's): judged like [`Claim::Approx`] on the bootstrap interval of
    /// the median ratio.
    Ratio {
        axis: String,
        a: String,
        b: String,
        value: f64,
        tolerance: f64,
    },
    /// Megyesi et al. 2016's rule decides each setting (every parameter but `axis`, over the
    /// repetitions; [`quiclab_experiment::stats::winners`]): A wins it, alone or shared, in at
    /// least `at_least` of the settings.
    WinsShare {
        axis: String,
        a: String,
        at_least: f64,
    },
    /// By the same rule, no value of `axis` wins every setting alone.
    NoBestEverywhere {
        axis: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Test {
    /// Exact two-sided sign test.
    Sign,
    /// Wilcoxon signed-rank test (two-sided).
    Wilcoxon,
    /// A bootstrap interval at 1 − α of the median (of the per-pair ratio A/B for comparisons).
    Bootstrap,
    /// Megyesi et al. 2016's wins rule per setting (descriptive: a count of settings, no p).
    Wins,
}

/// The decision rule: the test, its level and the fewest pairs (or runs) it needs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Rule {
    pub test: Test,
    pub alpha: f64,
    pub min_n: usize,
}

/// Bootstrap draws, and their seed: intervals are reproducible.
const RESAMPLES: usize = 4000;
const BOOTSTRAP_SEED: u64 = 2026;

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    Holds,
    /// Reversed (the opposite is significant), or absent (no significant difference with
    /// enough pairs; for a threshold or magnitude, the interval lies on the other side).
    DoesNotHold {
        reversed: bool,
    },
    Inconclusive {
        why: String,
    },
    NotRunnable {
        why: String,
    },
}

/// A finding's judgement: the verdict and everything it rests on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Judgement {
    pub verdict: Verdict,
    pub counts: Counts,
    /// The test's p value (sign, Wilcoxon).
    pub p: Option<f64>,
    /// The median (of the per-pair ratio A/B, or of the metric) with its interval.
    pub estimate: Option<RatioInterval>,
    /// What a count-of-settings claim counted (`h3 wins 10 of 24 settings`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl Judgement {
    /// A judgement without runs.
    pub fn bare(verdict: Verdict) -> Judgement {
        Judgement {
            verdict,
            counts: Counts::default(),
            p: None,
            estimate: None,
            detail: None,
        }
    }
}

/// One stored run as a finding sees it: its parameters (as the run key writes them), its
/// repetition and its value of the finding's metric.
#[derive(Debug, Clone, PartialEq)]
pub struct RunValue {
    pub params: BTreeMap<String, String>,
    pub repetition: u32,
    pub value: Observed,
}

fn matches(run: &RunValue, filter: &BTreeMap<String, String>) -> bool {
    filter.iter().all(|(k, v)| run.params.get(k) == Some(v))
}

/// The pairs of `runs` (already the finding's scenario) that match `filter`, A's run against B's
/// along `axis`, matched by repetition and every other parameter. A run without a partner is
/// left out (counted in `unpaired`).
pub fn pair(
    runs: &[RunValue],
    filter: &BTreeMap<String, String>,
    axis: &str,
    a: &str,
    b: &str,
) -> (Vec<(Observed, Observed)>, usize) {
    type Key = (BTreeMap<String, String>, u32);
    let mut sides: BTreeMap<Key, (Option<Observed>, Option<Observed>)> = BTreeMap::new();
    for r in runs.iter().filter(|r| matches(r, filter)) {
        let Some(side) = r.params.get(axis) else {
            continue;
        };
        let mut rest = r.params.clone();
        rest.remove(axis);
        let entry = sides.entry((rest, r.repetition)).or_default();
        if side == a {
            entry.0 = Some(r.value);
        } else if side == b {
            entry.1 = Some(r.value);
        }
    }
    let mut pairs = Vec::new();
    let mut unpaired = 0;
    for (_, (x, y)) in sides {
        match (x, y) {
            (Some(x), Some(y)) => pairs.push((x, y)),
            (None, None) => {}
            _ => unpaired += 1,
        }
    }
    (pairs, unpaired)
}

/// Judges a comparison claim on its pairs.
pub fn judge_pairs(pairs: &[(Observed, Observed)], better: Better, rule: Rule) -> Judgement {
    let (p, counts) = match rule.test {
        Test::Sign | Test::Bootstrap | Test::Wins => rules::sign_test(pairs, better),
        Test::Wilcoxon => rules::wilcoxon(pairs, better),
    };
    let estimate = rules::ratio_interval(pairs, 1.0 - rule.alpha, RESAMPLES, BOOTSTRAP_SEED);
    if let Some(v) = too_little(&counts, counts.pairs, rule) {
        return Judgement {
            verdict: v,
            counts,
            p: None,
            estimate,
            detail: None,
        };
    }
    let verdict = match rule.test {
        Test::Sign | Test::Wilcoxon | Test::Wins => {
            if p < rule.alpha {
                if counts.a_better > counts.a_worse {
                    Verdict::Holds
                } else {
                    Verdict::DoesNotHold { reversed: true }
                }
            } else {
                Verdict::DoesNotHold { reversed: false }
            }
        }
        Test::Bootstrap => match &estimate {
            // The ratio A/B: below 1 is A better for a lower-is-better metric.
            Some(e) => {
                let (a_better, b_better) = match better {
                    Better::Lower => (e.high < 1.0, e.low > 1.0),
                    Better::Higher => (e.low > 1.0, e.high < 1.0),
                };
                if a_better {
                    Verdict::Holds
                } else {
                    Verdict::DoesNotHold { reversed: b_better }
                }
            }
            None => Verdict::Inconclusive {
                why: "no pair where both runs finished (a ratio needs two values)".into(),
            },
        },
    };
    Judgement {
        verdict,
        counts,
        p: (rule.test != Test::Bootstrap).then_some(p),
        estimate,
        detail: None,
    }
}

/// Judges a [`Claim::Ratio`] on its pairs: the bootstrap interval of the median ratio A/B
/// against the band `value` ± `tolerance` × value.
pub fn judge_ratio(
    pairs: &[(Observed, Observed)],
    value: f64,
    tolerance: f64,
    rule: Rule,
) -> Judgement {
    let (_, counts) = rules::sign_test(pairs, Better::Lower);
    let estimate = rules::ratio_interval(pairs, 1.0 - rule.alpha, RESAMPLES, BOOTSTRAP_SEED);
    let finished = estimate.as_ref().map_or(0, |e| e.n);
    let verdict = match too_little(&counts, finished, rule) {
        Some(v) => v,
        None => band_verdict(estimate.as_ref().expect("pairs finished"), value, tolerance),
    };
    Judgement {
        verdict,
        counts,
        p: None,
        estimate,
        detail: None,
    }
}

/// Holds when the interval lies inside `value` ± `tolerance` × value, does not hold when it
/// lies outside, else inconclusive (an equivalence test).
fn band_verdict(e: &RatioInterval, value: f64, tolerance: f64) -> Verdict {
    let (lo, hi) = (value * (1.0 - tolerance), value * (1.0 + tolerance));
    if e.low >= lo && e.high <= hi {
        Verdict::Holds
    } else if e.high < lo || e.low > hi {
        Verdict::DoesNotHold { reversed: false }
    } else {
        Verdict::Inconclusive {
            why: format!(
                "the {:.0} % interval {:.3}–{:.3} overlaps the band {lo:.3}–{hi:.3} without lying in it",
                e.level * 100.0,
                e.low,
                e.high
            ),
        }
    }
}

/// One setting of a wins claim and who won it (empty: equal, by Megyesi et al.'s rule).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SettingWinners {
    pub setting: BTreeMap<String, String>,
    pub winners: Vec<String>,
}

impl SettingWinners {
    /// The label a decision tree shows: `h3`, `h2+h3` (both beat the third), `equal`.
    pub fn label(&self) -> String {
        if self.winners.is_empty() {
            "equal".into()
        } else {
            self.winners.join("+")
        }
    }
}

/// Judges a [`Claim::WinsShare`] or [`Claim::NoBestEverywhere`]: each setting (the runs
/// matching `filter`, grouped by every parameter but `axis`) is decided by Megyesi et al.'s rule
/// on the values of each side (a lower-is-better metric: a time), which needs at least
/// `rule.min_n` runs per side. A run that hit its limit enters with its limit (a lower bound:
/// it can only make the censored side look faster than it was); failed runs are counted, and
/// above 5 % the claim is inconclusive.
pub fn judge_wins(
    runs: &[RunValue],
    filter: &BTreeMap<String, String>,
    claim: &Claim,
    better: Better,
    rule: Rule,
) -> (Judgement, Vec<SettingWinners>) {
    let axis = match claim {
        Claim::WinsShare { axis, .. } | Claim::NoBestEverywhere { axis } => axis,
        _ => {
            return (
                Judgement::bare(Verdict::Inconclusive {
                    why: "not a wins claim".into(),
                }),
                Vec::new(),
            );
        }
    };
    let mut counts = Counts::default();
    let mut sides: std::collections::BTreeSet<String> = Default::default();
    let mut settings: BTreeMap<BTreeMap<String, String>, BTreeMap<String, Vec<f64>>> =
        BTreeMap::new();
    for r in runs.iter().filter(|r| matches(r, filter)) {
        let Some(side) = r.params.get(axis) else {
            continue;
        };
        counts.runs += 1;
        sides.insert(side.clone());
        let mut rest = r.params.clone();
        rest.remove(axis);
        let values = settings
            .entry(rest)
            .or_default()
            .entry(side.clone())
            .or_default();
        match r.value {
            Observed::Value(x) if x.is_finite() => values.push(x),
            Observed::Value(_) | Observed::Failed => counts.failed_runs += 1,
            Observed::Censored { at_least } => {
                counts.censored_runs += 1;
                if at_least.is_finite() {
                    values.push(at_least);
                } else {
                    counts.left_out += 1;
                }
            }
        }
    }
    if better == Better::Higher {
        // The rule's "10 % faster than B's mean" has no higher-is-better reading.
        return (
            Judgement::bare(Verdict::Inconclusive {
                why: "Megyesi et al.'s rule is for lower-is-better metrics (times)".into(),
            }),
            Vec::new(),
        );
    }
    counts.pairs = settings.len();
    let mut table = Vec::new();
    let mut too_few = 0;
    for (setting, by_side) in &settings {
        let fewest = sides
            .iter()
            .map(|s| by_side.get(s).map_or(0, Vec::len))
            .min()
            .unwrap_or(0);
        if fewest < rule.min_n {
            too_few += 1;
        }
        // Settings with a run of every side still enter the table (and the tree drawn from it):
        // what ran, shown; the verdict below waits for `min_n`.
        if fewest == 0 {
            continue;
        }
        let winners = match quiclab_experiment::stats::winners(by_side) {
            quiclab_experiment::stats::Verdict::Best(w) => w,
            quiclab_experiment::stats::Verdict::Equal => Vec::new(),
        };
        table.push(SettingWinners {
            setting: setting.clone(),
            winners,
        });
    }
    let n = table.len();
    let won = |side: &str| {
        table
            .iter()
            .filter(|t| t.winners.iter().any(|w| w == side))
            .count()
    };
    let alone = |side: &str| table.iter().filter(|t| t.winners == [side]).count();
    let mut j = Judgement {
        verdict: Verdict::Holds,
        counts,
        p: None,
        estimate: None,
        // What the table says, even when it is too thin for a verdict.
        detail: (n > 0).then(|| {
            sides
                .iter()
                .map(|s| format!("{s} wins {} of {n} settings ({} alone)", won(s), alone(s)))
                .chain(std::iter::once(format!(
                    "equal in {}",
                    table.iter().filter(|t| t.winners.is_empty()).count()
                )))
                .collect::<Vec<_>>()
                .join("; ")
        }),
    };
    if let (Claim::WinsShare { a, .. }, true) = (claim, n > 0) {
        let share = won(a) as f64 / n as f64;
        j.estimate = Some(RatioInterval {
            median: share,
            low: share,
            high: share,
            level: 1.0,
            n,
        });
    }
    if j.counts.failed_share() > MAX_FAILED_SHARE {
        j.verdict = Verdict::Inconclusive {
            why: format!(
                "{} of {} runs failed (more than {:.0} %)",
                j.counts.failed_runs,
                j.counts.runs,
                MAX_FAILED_SHARE * 100.0
            ),
        };
        return (j, table);
    }
    if settings.is_empty() || too_few > 0 {
        j.verdict = Verdict::Inconclusive {
            why: format!(
                "{too_few} of {} settings have fewer than {} finished runs of each {axis} \
                 (the wins rule compares distributions)",
                settings.len(),
                rule.min_n
            ),
        };
        return (j, table);
    }
    j.verdict = match claim {
        Claim::WinsShare { a, at_least, .. } => {
            verdict_of(won(a) as f64 / n as f64 >= *at_least, false)
        }
        _ => verdict_of(sides.iter().all(|s| alone(s) < n), false),
    };
    (j, table)
}

/// Judges a threshold or magnitude claim on the runs' values.
pub fn judge_values(values: &[Observed], claim: &Claim, rule: Rule) -> Judgement {
    let counts = Counts {
        runs: values.len(),
        pairs: values
            .iter()
            .filter(|v| matches!(v, Observed::Value(x) if x.is_finite()))
            .count(),
        failed_runs: values.iter().filter(|v| **v == Observed::Failed).count(),
        censored_runs: values
            .iter()
            .filter(|v| matches!(v, Observed::Censored { .. }))
            .count(),
        ..Counts::default()
    };
    let finished: Vec<f64> = values
        .iter()
        .filter_map(|v| match v {
            Observed::Value(x) if x.is_finite() => Some(*x),
            _ => None,
        })
        .collect();
    let estimate = rules::values_interval(&finished, 1.0 - rule.alpha, RESAMPLES, BOOTSTRAP_SEED);
    let mut j = Judgement {
        verdict: Verdict::Inconclusive { why: String::new() },
        counts,
        p: None,
        estimate,
        detail: None,
    };
    if let Some(v) = too_little(&j.counts, finished.len(), rule) {
        j.verdict = v;
        return j;
    }
    // Runs above and below a value (equal ones count in neither).
    let split = |v: f64| {
        (
            finished.iter().filter(|&&x| x > v).count(),
            finished.iter().filter(|&&x| x < v).count(),
        )
    };
    j.verdict = match *claim {
        Claim::AtLeast { value } | Claim::AtMost { value } => {
            let at_least = matches!(claim, Claim::AtLeast { .. });
            let (hi, lo) = split(value);
            let (ok, not) = if at_least { (hi, lo) } else { (lo, hi) };
            match rule.test {
                Test::Bootstrap => {
                    let e = j.estimate.as_ref().expect("values exist");
                    let (inside, outside) = if at_least {
                        (e.low >= value, e.high < value)
                    } else {
                        (e.high <= value, e.low > value)
                    };
                    verdict_of(inside, outside)
                }
                _ => {
                    let p = quiclab_experiment::stats::sign_test_p(ok, not);
                    j.p = Some(p);
                    j.counts.a_better = ok;
                    j.counts.a_worse = not;
                    if p < rule.alpha {
                        verdict_of(ok > not, ok < not)
                    } else if not == 0 && ok >= rule.min_n {
                        // Every run on the claimed side but too few to be significant by the
                        // sign test's smallest p: said as it is.
                        Verdict::Inconclusive {
                            why: format!("all {ok} runs on the claimed side, p = {p:.3} ≥ α"),
                        }
                    } else {
                        Verdict::DoesNotHold { reversed: false }
                    }
                }
            }
        }
        Claim::Approx { value, tolerance } => {
            band_verdict(j.estimate.as_ref().expect("values exist"), value, tolerance)
        }
        Claim::Better { .. }
        | Claim::Ratio { .. }
        | Claim::WinsShare { .. }
        | Claim::NoBestEverywhere { .. } => Verdict::Inconclusive {
            why: "a comparison is judged on pairs or settings, not on one side's values".into(),
        },
    };
    j
}

fn verdict_of(holds: bool, reversed: bool) -> Verdict {
    if holds {
        Verdict::Holds
    } else {
        Verdict::DoesNotHold { reversed }
    }
}

/// Inconclusive for too many failures or too few pairs.
fn too_little(c: &Counts, n: usize, rule: Rule) -> Option<Verdict> {
    if c.failed_share() > MAX_FAILED_SHARE {
        return Some(Verdict::Inconclusive {
            why: format!(
                "{} of {} runs failed (more than {:.0} %)",
                c.failed_runs,
                c.runs,
                MAX_FAILED_SHARE * 100.0
            ),
        });
    }
    if n < rule.min_n {
        return Some(Verdict::Inconclusive {
            why: format!("n = {n} < the rule's minimum {}", rule.min_n),
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use Observed::*;

    const SIGN: Rule = Rule {
        test: Test::Sign,
        alpha: 0.05,
        min_n: 5,
    };

    fn run(proto: &str, fec: &str, rep: u32, v: Observed) -> RunValue {
        RunValue {
            params: BTreeMap::from([
                ("protocol".to_string(), proto.to_string()),
                ("fec".to_string(), fec.to_string()),
                ("loss".to_string(), "2%".to_string()),
            ]),
            repetition: rep,
            value: v,
        }
    }

    #[test]
    fn runs_pair_across_any_axis_by_repetition_and_the_other_settings() {
        let mut runs = Vec::new();
        for rep in 1..=6 {
            runs.push(run("h3", "0", rep, Value(10.0)));
            runs.push(run("h3", "2", rep, Value(8.0)));
            runs.push(run("h1", "0", rep, Value(20.0)));
        }
        runs.push(run("h3", "2", 7, Value(1.0))); // no partner
        let filter = BTreeMap::from([("protocol".to_string(), "h3".to_string())]);
        let (pairs, unpaired) = pair(&runs, &filter, "fec", "2", "0");
        assert_eq!((pairs.len(), unpaired), (6, 1));
        assert!(pairs.iter().all(|p| *p == (Value(8.0), Value(10.0))));
        let j = judge_pairs(&pairs, Better::Lower, SIGN);
        assert_eq!(j.verdict, Verdict::Holds);
        assert!((j.p.unwrap() - 2.0 / 64.0).abs() < 1e-12);
        assert!((j.estimate.unwrap().median - 0.8).abs() < 1e-12);
        // The other way round the same pairs say it is reversed.
        let (pairs, _) = pair(&runs, &filter, "fec", "0", "2");
        let j = judge_pairs(&pairs, Better::Lower, SIGN);
        assert_eq!(j.verdict, Verdict::DoesNotHold { reversed: true });
        // Across protocols at fec = 0.
        let f0 = BTreeMap::from([("fec".to_string(), "0".to_string())]);
        let (pairs, _) = pair(&runs, &f0, "protocol", "h3", "h1");
        assert_eq!(pairs.len(), 6);
    }

    #[test]
    fn verdicts_hold_reverse_vanish_or_stay_open() {
        let better = vec![(Value(1.0), Value(2.0)); 8];
        assert_eq!(
            judge_pairs(&better, Better::Lower, SIGN).verdict,
            Verdict::Holds
        );
        // Mixed results with enough pairs: absent.
        let mixed: Vec<_> = (0..10)
            .map(|i| (Value(1.0 + (i % 2) as f64 * 2.0), Value(2.0)))
            .collect();
        assert_eq!(
            judge_pairs(&mixed, Better::Lower, SIGN).verdict,
            Verdict::DoesNotHold { reversed: false }
        );
        // Too few pairs.
        let few = vec![(Value(1.0), Value(2.0)); 3];
        assert!(matches!(
            judge_pairs(&few, Better::Lower, SIGN).verdict,
            Verdict::Inconclusive { why } if why.contains("n = 3")
        ));
        // More than 5 % failures: 1 failed run of 2 × 8.
        let mut failing = better.clone();
        failing[0].0 = Failed;
        assert!(matches!(
            judge_pairs(&failing, Better::Lower, SIGN).verdict,
            Verdict::Inconclusive { why } if why.contains("1 of 16 runs failed")
        ));
        // Censored runs count as losses of their pair: A hits the limit every time.
        let censored = vec![(Censored { at_least: 60.0 }, Value(2.0)); 8];
        assert_eq!(
            judge_pairs(&censored, Better::Lower, SIGN).verdict,
            Verdict::DoesNotHold { reversed: true }
        );
        // The bootstrap of the ratio.
        let boot = Rule {
            test: Test::Bootstrap,
            ..SIGN
        };
        assert_eq!(
            judge_pairs(&better, Better::Lower, boot).verdict,
            Verdict::Holds
        );
        assert_eq!(
            judge_pairs(&better, Better::Higher, boot).verdict,
            Verdict::DoesNotHold { reversed: true }
        );
    }

    #[test]
    fn thresholds_and_magnitudes_are_judged_on_the_values() {
        let jain: Vec<_> = [0.95, 0.97, 0.99, 0.96, 0.98, 0.99].map(Value).to_vec();
        let j = judge_values(&jain, &Claim::AtLeast { value: 0.9 }, SIGN);
        assert_eq!(j.verdict, Verdict::Holds);
        let j = judge_values(&jain, &Claim::AtMost { value: 0.9 }, SIGN);
        assert_eq!(j.verdict, Verdict::DoesNotHold { reversed: true });
        let boot = Rule {
            test: Test::Bootstrap,
            ..SIGN
        };
        let ratio: Vec<_> = [2.7, 2.8, 2.75, 2.9, 2.6, 2.8, 2.85].map(Value).to_vec();
        let approx = |value| Claim::Approx {
            value,
            tolerance: 0.25,
        };
        assert_eq!(
            judge_values(&ratio, &approx(3.0), boot).verdict,
            Verdict::Holds
        );
        assert_eq!(
            judge_values(&ratio, &approx(1.5), boot).verdict,
            Verdict::DoesNotHold { reversed: false }
        );
        assert!(matches!(
            judge_values(&ratio, &approx(2.2), boot).verdict,
            Verdict::Inconclusive { .. }
        ));
        // Five of five on the claimed side cannot reach p < 0.05 (p = 0.0625): said so.
        let five: Vec<_> = [0.95; 5].map(Value).to_vec();
        assert!(matches!(
            judge_values(&five, &Claim::AtLeast { value: 0.9 }, SIGN).verdict,
            Verdict::Inconclusive { why } if why.contains("all 5")
        ));
    }

    #[test]
    fn a_ratio_claim_holds_inside_its_band_and_not_outside() {
        let rule = Rule {
            test: Test::Bootstrap,
            alpha: 0.05,
            min_n: 5,
        };
        let three = vec![(Value(30.0), Value(10.0)); 8];
        assert_eq!(judge_ratio(&three, 3.0, 0.25, rule).verdict, Verdict::Holds);
        assert_eq!(
            judge_ratio(&three, 1.5, 0.25, rule).verdict,
            Verdict::DoesNotHold { reversed: false }
        );
        // Too few finished pairs: a censored pair has no ratio.
        let mut few = vec![(Value(30.0), Value(10.0)); 4];
        few.push((Censored { at_least: 60.0 }, Value(10.0)));
        assert!(matches!(
            judge_ratio(&few, 3.0, 0.25, rule).verdict,
            Verdict::Inconclusive { .. }
        ));
    }

    fn setting(rtt: &str, proto: &str, rep: u32, v: Observed) -> RunValue {
        RunValue {
            params: BTreeMap::from([
                ("protocol".to_string(), proto.to_string()),
                ("rtt".to_string(), rtt.to_string()),
            ]),
            repetition: rep,
            value: v,
        }
    }

    #[test]
    fn wins_are_decided_per_setting_by_megyesis_rule() {
        let rule = Rule {
            test: Test::Wins,
            alpha: 0.05,
            min_n: 3,
        };
        let mut runs = Vec::new();
        for rep in 1..=3 {
            // At 18 ms h1 wins; at 218 ms h3 wins; h2 never.
            runs.push(setting("18ms", "h1", rep, Value(50.0)));
            runs.push(setting("18ms", "h2", rep, Value(100.0)));
            runs.push(setting("18ms", "h3", rep, Value(100.0)));
            runs.push(setting("218ms", "h1", rep, Value(300.0)));
            runs.push(setting("218ms", "h2", rep, Value(300.0)));
            runs.push(setting("218ms", "h3", rep, Value(100.0)));
        }
        let none = BTreeMap::new();
        let share = |a: &str, at_least: f64| Claim::WinsShare {
            axis: "protocol".into(),
            a: a.into(),
            at_least,
        };
        let (j, table) = judge_wins(&runs, &none, &share("h3", 0.5), Better::Lower, rule);
        assert_eq!(j.verdict, Verdict::Holds, "{j:?}");
        assert_eq!(table.len(), 2);
        assert_eq!(table[0].label(), "h1"); // 18ms
        assert_eq!(table[1].label(), "h3"); // 218ms
        let (j, _) = judge_wins(&runs, &none, &share("h2", 0.1), Better::Lower, rule);
        assert_eq!(j.verdict, Verdict::DoesNotHold { reversed: false });
        let nobody = Claim::NoBestEverywhere {
            axis: "protocol".into(),
        };
        let (j, _) = judge_wins(&runs, &none, &nobody, Better::Lower, rule);
        assert_eq!(j.verdict, Verdict::Holds);
        // Only the 218 ms setting: h3 wins everywhere.
        let f = BTreeMap::from([("rtt".to_string(), "218ms".to_string())]);
        let (j, _) = judge_wins(&runs, &f, &nobody, Better::Lower, rule);
        assert_eq!(j.verdict, Verdict::DoesNotHold { reversed: false });
        // Too few runs per side: inconclusive, not a verdict from one load.
        // The table (and the tree drawn from it) still shows what ran.
        let few = Rule { min_n: 4, ..rule };
        let (j, table) = judge_wins(&runs, &none, &nobody, Better::Lower, few);
        assert!(matches!(j.verdict, Verdict::Inconclusive { .. }), "{j:?}");
        assert_eq!(table.len(), 2);
        assert!(j.detail.unwrap().contains("h3 wins 1 of 2 settings"));
        // A failed run above 5 %: inconclusive.
        runs[0].value = Failed;
        let (j, _) = judge_wins(&runs, &none, &nobody, Better::Lower, rule);
        assert!(matches!(j.verdict, Verdict::Inconclusive { .. }), "{j:?}");
    }
}
