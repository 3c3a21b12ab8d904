//! From a finding's runs to its verdict: the runs it covers (scenario settings matching its
//! filter), paired by repetition and every other setting across the compared axis, judged by its
//! rule.
//!
//! One standard for every path (a reviewer's, issue 37):
//! - n is what informs the test: pairs (or runs) on one side of the claim, ties left out; a rule
//!   whose n could not reach p < α even if every pair agreed (fewer than 6 at α = 0.05) is
//!   inconclusive, never "does not hold".
//! - Intervals of a median are exact (order statistics, [`rules::median_interval`]) and must
//!   reach 1 − α; at n = 5 none does (the range covers 93.75 %).
//! - A comparison states the smallest difference that matters ([`Rule::min_effect`]): a
//!   significant difference whose median ratio is closer to 1 is not "holds" or "reversed".
//! - Failed runs and runs whose partner is missing count against the 5 % failure limit; censored
//!   runs keep their bound; runs whose metric is undefined by definition are counted apart.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::outcome::p_text;
use crate::rules::{self, Better, Counts, MAX_FAILED_SHARE, Observed, RatioInterval};

/// What a finding claims about its metric.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "claim", rename_all = "snake_case")]
pub enum Claim {
    /// A is better than B along `axis` (by the metric's direction), pair by pair, by at least the
    /// rule's minimum effect.
    Better {
        axis: String,
        a: String,
        b: String,
    },
    /// The metric is at least / at most `value` (e.g. a share ≥ 2/3), by a one-sample sign test.
    AtLeast {
        value: f64,
    },
    AtMost {
        value: f64,
    },
    /// The metric is `value` within ±`tolerance` × value (e.g. a utilisation of about 0.99):
    /// holds when the exact interval of its median lies inside that band, does not hold when it
    /// lies outside, else inconclusive (an equivalence test).
    Approx {
        value: f64,
        tolerance: f64,
        /// The metric is itself a ratio (`bitrate_ratio_first_rest`): a band wholly on one side
        /// of 1 claims a direction, and an interval beyond 1 on the other side is reversed.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        of_ratio: bool,
    },
    /// The per-pair ratio A/B along `axis` is `value` within ±`tolerance` × value: judged like
    /// [`Claim::Approx`] on the exact interval of the median ratio. The band excludes 1 unless
    /// `value` is 1 (then it is a claim of no effect: equivalence).
    Ratio {
        axis: String,
        a: String,
        b: String,
        value: f64,
        tolerance: f64,
    },
    /// The per-pair ratio A/B is at least / at most `value` ("more than three times"): a
    /// one-sample sign test of the ratios against `value`.
    RatioAtLeast {
        axis: String,
        a: String,
        b: String,
        value: f64,
    },
    RatioAtMost {
        axis: String,
        a: String,
        b: String,
        value: f64,
    },
    /// Megyesi et al. 2016's rule decides each setting (every parameter but `axis`, over the
    /// repetitions; [`quiclab_experiment::stats::winners`]): A wins it, alone or shared, in at
    /// least `at_least` of the settings.
    WinsShare {
        axis: String,
        a: String,
        at_least: f64,
    },
    /// By the same rule, no value of `axis` is better than the others: every value wins (alone or
    /// shared) at least one setting, and none wins every setting alone (reversed).
    NoBestEverywhere {
        axis: String,
    },
}

impl Claim {
    /// The compared axis and sides of a paired claim.
    pub fn sides(&self) -> Option<(&str, &str, &str)> {
        match self {
            Claim::Better { axis, a, b }
            | Claim::Ratio { axis, a, b, .. }
            | Claim::RatioAtLeast { axis, a, b, .. }
            | Claim::RatioAtMost { axis, a, b, .. } => Some((axis, a, b)),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Test {
    /// Exact two-sided sign test (paired, or one-sample against a threshold).
    Sign,
    /// Wilcoxon signed-rank test (two-sided, paired).
    Wilcoxon,
    /// The exact order-statistic interval at 1 − α of the median (of the per-pair ratio A/B for
    /// a ratio): for magnitude bands.
    Interval,
    /// Megyesi et al. 2016's wins rule per setting (descriptive: a count of settings, no p).
    Wins,
}

/// The decision rule: the test, its level, the fewest informative pairs (or runs) it needs and,
/// for a comparison, the smallest difference that matters (a share of B: 0.05 = 5 %).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Rule {
    pub test: Test,
    pub alpha: f64,
    pub min_n: usize,
    pub min_effect: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    /// The interval lies beyond no effect in the claimed direction and the estimate beyond the
    /// smallest difference that matters (a band: the interval inside it; a threshold: beyond it).
    Holds,
    /// The interval excludes the claimed effect: inside the margin, short of a threshold or
    /// outside a band (`reversed`: the direction flipped, interval beyond no effect on the other
    /// side and the estimate beyond the margin there).
    DoesNotHold {
        reversed: bool,
    },
    /// Enough units for the test, which did not show the claim (p ≥ α, or q ≥ α after the
    /// study's multiplicity correction), and an interval that does not exclude it either:
    /// absence of evidence, counted apart from "does not hold".
    NotShown {
        why: String,
    },
    /// A pooled claim whose cells go both ways: the claim (pooled, or in a cell) is significant,
    /// and these cells are significantly the other way.
    Mixed {
        cells: Vec<String>,
    },
    Inconclusive {
        why: String,
    },
    NotRunnable {
        why: String,
    },
}

/// What a finding claims of its cells (`scope` in the study file): `each` — the seed says "in
/// every case", "always", "for both": judged per cell, holding only where every cell holds;
/// `overall` — a pooled effect: judged on the pooled units, and mixed when a cell goes
/// significantly the other way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    Each,
    #[default]
    Overall,
}

/// A finding's judgement: the verdict and everything it rests on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Judgement {
    pub verdict: Verdict,
    pub counts: Counts,
    /// The test's p value (sign, Wilcoxon).
    pub p: Option<f64>,
    /// The Benjamini–Hochberg q value of `p` among the study's p values (for a cell: among the
    /// finding's cells).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub q: Option<f64>,
    /// The median (of the per-pair ratio A/B, or of the metric) with its exact interval.
    pub estimate: Option<RatioInterval>,
    /// What a count-of-settings claim counted (`h3 wins 10 of 24 settings`), or why a
    /// significant difference is not a verdict.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Every cell's repetitions were copies (they did not differ beyond a tenth of the margin):
    /// judged by the values against the margin, with no p value.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub deterministic: bool,
    /// A finding over more than one cell: each cell judged by the same rule.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cells: Vec<CellJudgement>,
}

/// One cell of a pooled finding (every setting but the compared axis and the repetition).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CellJudgement {
    /// `loss = 2%, rate = 10mbit`.
    pub cell: String,
    pub judgement: Judgement,
    /// Significantly the other way from the claim (reversed, or beyond no effect on the other
    /// side; for a threshold or band, wholly on the wrong side).
    pub against: bool,
    /// Significantly the claimed way (for a threshold or band: it holds).
    pub toward: bool,
}

impl Judgement {
    /// A judgement without runs.
    pub fn bare(verdict: Verdict) -> Judgement {
        Judgement {
            verdict,
            counts: Counts::default(),
            p: None,
            q: None,
            estimate: None,
            detail: None,
            deterministic: false,
            cells: Vec::new(),
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

/// The values of the runs that match `filter`.
pub fn select(runs: &[RunValue], filter: &BTreeMap<String, String>) -> Vec<Observed> {
    runs.iter()
        .filter(|r| matches(r, filter))
        .map(|r| r.value)
        .collect()
}

/// A second setting that differs between the two sides of a paired claim: side A's runs have
/// `param = a`, side B's `param = b` (`per = { axis = "server", b = "quiclab" }`: each server's
/// HTTP/3 against quiclab's own TCP). Runs pair across both settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Pin {
    pub param: String,
    pub a: String,
    pub b: String,
}

impl Pin {
    /// Whether a run with these parameters can be on a side: `param` is the pinned value of the
    /// side its `axis` value names (either pinned value when it names neither).
    pub fn admits(&self, params: &BTreeMap<String, String>, axis: &str, a: &str, b: &str) -> bool {
        let have = params.get(&self.param);
        match params.get(axis) {
            Some(v) if v == a => have == Some(&self.a),
            Some(v) if v == b => have == Some(&self.b),
            _ => have == Some(&self.a) || have == Some(&self.b),
        }
    }
}

/// The pairs of `runs` (already the finding's scenario) that match `filter`, A's run against B's
/// along `axis`, matched by repetition and every other parameter. A run without a partner is
/// left out and counted in `unpaired` (the judgement counts it as missing).
pub fn pair(
    runs: &[RunValue],
    filter: &BTreeMap<String, String>,
    axis: &str,
    a: &str,
    b: &str,
) -> (Vec<(Observed, Observed)>, usize) {
    let (cells, unpaired) = pair_cells(runs, filter, axis, a, b, None);
    (cells.into_iter().flat_map(|c| c.pairs).collect(), unpaired)
}

/// A setting of every parameter a finding does not compare (its cell).
pub type Cell = BTreeMap<String, String>;

/// The pairs of one cell, in repetition order.
#[derive(Debug, Clone, PartialEq)]
pub struct CellPairs {
    pub cell: Cell,
    pub pairs: Vec<(Observed, Observed)>,
}

/// The pairs of `runs` along `axis` (the two sides also differing in `pin`'s setting), grouped by cell (every parameter but the axis, the pinned one and
/// the repetition).
pub fn pair_cells(
    runs: &[RunValue],
    filter: &BTreeMap<String, String>,
    axis: &str,
    a: &str,
    b: &str,
    pin: Option<&Pin>,
) -> (Vec<CellPairs>, usize) {
    type Key = (BTreeMap<String, String>, u32);
    let mut sides: BTreeMap<Key, (Option<Observed>, Option<Observed>)> = BTreeMap::new();
    for r in runs.iter().filter(|r| matches(r, filter)) {
        let Some(side) = r.params.get(axis) else {
            continue;
        };
        let mut rest = r.params.clone();
        rest.remove(axis);
        if let Some(p) = pin {
            if !p.admits(&r.params, axis, a, b) {
                continue;
            }
            rest.remove(&p.param);
        }
        let entry = sides.entry((rest, r.repetition)).or_default();
        if side == a {
            entry.0 = Some(r.value);
        } else if side == b {
            entry.1 = Some(r.value);
        }
    }
    let mut cells: Vec<CellPairs> = Vec::new();
    let mut unpaired = 0;
    for ((cell, _), (x, y)) in sides {
        match (x, y) {
            (Some(x), Some(y)) => match cells.last_mut() {
                Some(c) if c.cell == cell => c.pairs.push((x, y)),
                _ => cells.push(CellPairs {
                    cell,
                    pairs: vec![(x, y)],
                }),
            },
            (None, None) => {}
            _ => unpaired += 1,
        }
    }
    (cells, unpaired)
}

/// Judges a paired claim ([`Claim::Better`], [`Claim::Ratio`], [`Claim::RatioAtLeast`],
/// [`Claim::RatioAtMost`]) on its pairs; `unpaired` runs (partner missing) count as missing.
pub fn judge_paired(
    pairs: &[(Observed, Observed)],
    unpaired: usize,
    claim: &Claim,
    better: Better,
    rule: Rule,
) -> Judgement {
    let mut j = match *claim {
        Claim::Better { .. } => judge_pairs(pairs, better, rule),
        Claim::Ratio {
            value, tolerance, ..
        } => judge_ratio(pairs, better, value, tolerance, rule),
        Claim::RatioAtLeast { value, .. } | Claim::RatioAtMost { value, .. } => {
            let (_, counts) = rules::sign_test(pairs, better);
            let ratios: Vec<Observed> = rules::ratios(pairs, better)
                .into_iter()
                .map(Observed::Value)
                .collect();
            let at_least = matches!(claim, Claim::RatioAtLeast { .. });
            let threshold = if at_least {
                Claim::AtLeast { value }
            } else {
                Claim::AtMost { value }
            };
            let mut j = judge_values(&ratios, &threshold, rule);
            // The runs behind the ratios: failed, censored and undefined ones included.
            j.counts.runs = counts.runs;
            j.counts.failed_runs = counts.failed_runs;
            j.counts.censored_runs = counts.censored_runs;
            j.counts.undefined_runs = counts.undefined_runs;
            j.counts.left_out = pairs.len() - ratios.len();
            if let Some(v) = too_little(&j.counts, j.counts.pairs, rule) {
                j.verdict = v;
            }
            // A threshold beyond 1 claims a direction ("more than three times"): reversed only
            // when the direction flipped beyond the margin; short of the threshold on the
            // claimed side it does not hold.
            if let (Verdict::DoesNotHold { .. }, Some(e)) = (&j.verdict, &j.estimate) {
                let m = rule.min_effect;
                let reversed = if at_least && value > 1.0 {
                    e.high < 1.0 && e.median <= 1.0 - m
                } else if !at_least && value < 1.0 {
                    e.low > 1.0 && e.median >= 1.0 + m
                } else {
                    false
                };
                j.verdict = Verdict::DoesNotHold { reversed };
            }
            j
        }
        _ => Judgement::bare(Verdict::Inconclusive {
            why: "not a paired claim".into(),
        }),
    };
    if unpaired > 0 {
        j.counts.unpaired = unpaired;
        if let Some(v) = too_little(&j.counts, usize::MAX, rule) {
            j.verdict = v;
        }
    }
    j
}

/// Where a comparison's interval (of the median ratio A/B) and estimate lie, read in the
/// claim's direction, with `m` the smallest difference that matters.
#[derive(Debug, Clone, Copy)]
struct Reading {
    /// The interval lies beyond no effect (1) on the claimed side.
    toward: bool,
    /// The interval lies beyond no effect on the other side.
    away: bool,
    /// The estimate is a lead that matters (beyond 1 ∓ m on the claimed side).
    lead: bool,
    /// The estimate is beyond the margin on the other side.
    lag: bool,
    /// The interval excludes every lead that matters.
    excluded: bool,
    /// The interval lies within 1 ± m.
    inside: bool,
}

impl Reading {
    fn of(e: &RatioInterval, better: Better, m: f64) -> Reading {
        let lower = better == Better::Lower;
        let (lo, hi, med) = (e.low, e.high, e.median);
        Reading {
            toward: if lower { hi < 1.0 } else { lo > 1.0 },
            away: if lower { lo > 1.0 } else { hi < 1.0 },
            lead: if lower {
                med <= 1.0 - m
            } else {
                med >= 1.0 + m
            },
            lag: if lower {
                med >= 1.0 + m
            } else {
                med <= 1.0 - m
            },
            excluded: if lower { lo > 1.0 - m } else { hi < 1.0 + m },
            inside: lo >= 1.0 - m && hi <= 1.0 + m,
        }
    }
}

/// Judges a [`Claim::Better`] on its pairs by one symmetric rule on the exact interval of the
/// median ratio A/B (ties and zero denominators as [`rules::ratio_of`] has them) and its dual
/// sign test: holds when the interval lies beyond 1 on the claimed side and the median beyond
/// the smallest difference that matters; reversed the same way on the other side; does not hold
/// when the interval excludes every lead that matters (inside the margin, or on the other side
/// by less than it); not shown when it reaches both no effect and a lead that matters; else
/// (significant, the median within the margin and the interval beyond it) inconclusive. With the
/// Wilcoxon test the signed-rank p must be below α too.
pub fn judge_pairs(pairs: &[(Observed, Observed)], better: Better, rule: Rule) -> Judgement {
    let (p_rank, counts) = match rule.test {
        Test::Wilcoxon => rules::wilcoxon(pairs, better),
        Test::Sign | Test::Interval | Test::Wins => rules::sign_test(pairs, better),
    };
    let p_sign = rules::dual_sign_p(counts.a_better, counts.a_worse, counts.ties);
    let wilcoxon = rule.test == Test::Wilcoxon;
    let p = if wilcoxon { p_rank } else { p_sign };
    let estimate = rules::ratio_interval(pairs, better, 1.0 - rule.alpha);
    let mut j = Judgement {
        p: Some(p),
        estimate,
        counts,
        ..Judgement::bare(Verdict::Holds)
    };
    if let Some(v) = too_little(&j.counts, j.counts.pairs, rule) {
        j.verdict = v;
        return j;
    }
    let Some(e) = j.estimate.clone() else {
        j.verdict = Verdict::Inconclusive {
            why: "no pair has a ratio".into(),
        };
        return j;
    };
    if let Some(v) = thin_interval(&e, rule) {
        j.verdict = v;
        return j;
    }
    let r = Reading::of(&e, better, rule.min_effect);
    let margin = format!("{:.0} %", rule.min_effect * 100.0);
    let significant = !wilcoxon || p_rank < rule.alpha;
    if wilcoxon && p_rank < rule.alpha && !r.toward && !r.away {
        // The signed-rank test can be significant while the median's interval reaches 1 (large
        // wins, small losses): the two readings of the same pairs disagree.
        j.verdict = Verdict::Inconclusive {
            why: format!(
                "the signed-rank test is significant (p = {}) but the exact interval of the median \
                 ratio, {:.3}–{:.3}, reaches 1 (the sign test gives p = {}): the pairs' sizes and \
                 directions disagree",
                p_text(p_rank),
                e.low,
                e.high,
                p_text(p_sign)
            ),
        };
        return j;
    }
    (j.verdict, j.detail) = if significant && r.toward && r.lead {
        (Verdict::Holds, None)
    } else if significant && r.away && r.lag {
        (Verdict::DoesNotHold { reversed: true }, None)
    } else if r.excluded {
        let why = if r.inside {
            format!(
                "no difference that matters: the median ratio {:.3} and its interval {:.3}–{:.3} \
                 lie within 1 ± {margin}",
                e.median, e.low, e.high
            )
        } else if r.away {
            format!(
                "the other way, by less than the {margin} that matters: the median ratio {:.3}, \
                 its interval {:.3}–{:.3}",
                e.median, e.low, e.high
            )
        } else {
            format!(
                "the interval {:.3}–{:.3} excludes a lead of {margin} (median {:.3})",
                e.low, e.high, e.median
            )
        };
        (Verdict::DoesNotHold { reversed: false }, Some(why))
    } else if significant && r.toward {
        (
            Verdict::Inconclusive {
                why: format!(
                    "significant (p = {}) but the median ratio {:.3} is within the {margin} that \
                     matters (its interval {:.3}–{:.3} reaches beyond it)",
                    p_text(p),
                    e.median,
                    e.low,
                    e.high
                ),
            },
            None,
        )
    } else {
        (
            Verdict::NotShown {
                why: format!(
                    "{} of {} pairs on the claimed side ({} tied, counted against), p = {}; the \
                     interval {:.3}–{:.3} reaches both no difference and a lead of {margin}",
                    j.counts.a_better,
                    j.counts.pairs,
                    j.counts.ties,
                    p_text(p),
                    e.low,
                    e.high
                ),
            },
            None,
        )
    };
    j
}

/// Judges a [`Claim::Ratio`] on its pairs: the exact interval of the median ratio A/B against
/// the band `value` ± `tolerance` × value.
pub fn judge_ratio(
    pairs: &[(Observed, Observed)],
    better: Better,
    value: f64,
    tolerance: f64,
    rule: Rule,
) -> Judgement {
    let (_, counts) = rules::sign_test(pairs, better);
    let estimate = rules::ratio_interval(pairs, better, 1.0 - rule.alpha);
    let finished = estimate.as_ref().map_or(0, |e| e.n);
    let verdict = match too_little(&counts, finished, rule) {
        Some(v) => v,
        None => band_verdict(
            estimate.as_ref().expect("pairs finished"),
            value,
            tolerance,
            true,
            rule,
        ),
    };
    Judgement {
        estimate,
        counts,
        ..Judgement::bare(verdict)
    }
}

/// Holds when the interval (reaching 1 − α) lies inside `value` ± `tolerance` × value, does not
/// hold when it lies outside, else inconclusive (an equivalence test). A band of a ratio that
/// lies wholly on one side of 1 claims a direction: an interval beyond 1 on the other side with
/// its median beyond the margin there is reversed.
fn band_verdict(e: &RatioInterval, value: f64, tolerance: f64, ratio: bool, rule: Rule) -> Verdict {
    if let Some(v) = thin_interval(e, rule) {
        return v;
    }
    let (lo, hi) = (value * (1.0 - tolerance), value * (1.0 + tolerance));
    let m = rule.min_effect;
    if e.low >= lo && e.high <= hi {
        Verdict::Holds
    } else if e.high < lo || e.low > hi {
        let reversed = ratio
            && ((lo > 1.0 && e.high < 1.0 && e.median <= 1.0 - m)
                || (hi < 1.0 && e.low > 1.0 && e.median >= 1.0 + m));
        Verdict::DoesNotHold { reversed }
    } else {
        Verdict::Inconclusive {
            why: format!(
                "the {:.1} % interval {:.3}–{:.3} overlaps the band {lo:.3}–{hi:.3} without lying in it",
                e.level * 100.0,
                e.low,
                e.high
            ),
        }
    }
}

/// Inconclusive when n is too small for any interval of the median to reach 1 − α.
fn thin_interval(e: &RatioInterval, rule: Rule) -> Option<Verdict> {
    (!e.reaches(1.0 - rule.alpha)).then(|| Verdict::Inconclusive {
        why: format!(
            "n = {}: the widest interval of a median (the range) covers {:.2} %, below {:.0} % \
             (an exact interval needs n ≥ {})",
            e.n,
            e.level * 100.0,
            (1.0 - rule.alpha) * 100.0,
            rules::fewest_informative(rule.alpha)
        ),
    })
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
            Observed::Undefined => counts.undefined_runs += 1,
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
    // Whether each table entry has `min_n` finished runs of every side: only those decide.
    let mut decided = Vec::new();
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
            quiclab_experiment::stats::Winners::Best(w) => w,
            quiclab_experiment::stats::Winners::Equal => Vec::new(),
        };
        decided.push(fewest >= rule.min_n);
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
        counts,
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
        ..Judgement::bare(Verdict::Holds)
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
    let undecided = || Verdict::Inconclusive {
        why: format!(
            "{too_few} of {} settings have fewer than {} finished runs of each {axis} \
                 (the wins rule compares distributions), and what they would show could change \
                 the verdict",
            settings.len(),
            rule.min_n
        ),
    };
    if settings.is_empty() {
        j.verdict = undecided();
        return (j, table);
    }
    // A setting short of `min_n` finished runs of a side (a run failed, or was still flagged
    // after its retries) is undecided. The claim is judged on the decided settings only when no
    // outcome of the undecided ones could change the verdict; else it is inconclusive. (One
    // failed load among 1 440 no longer silences a 48-setting claim; it cannot tip one either.)
    let decided_won = |side: &str| {
        table
            .iter()
            .zip(&decided)
            .filter(|(t, d)| **d && t.winners.iter().any(|w| w == side))
            .count()
    };
    let all = settings.len();
    j.verdict = match claim {
        Claim::WinsShare { a, at_least, .. } => {
            // The share at worst (every undecided setting lost) and at best (every one won).
            let worst = decided_won(a) as f64 / all as f64;
            let best = (decided_won(a) + too_few) as f64 / all as f64;
            if worst >= *at_least {
                Verdict::Holds
            } else if best < *at_least {
                Verdict::DoesNotHold { reversed: false }
            } else {
                undecided()
            }
        }
        // Every side best somewhere (alone or shared); reversed when one side wins every
        // setting alone (it is better than the others everywhere). A side that wins a decided
        // setting keeps it whatever the undecided ones show, and with two or more sides winning
        // somewhere none wins everywhere: that verdict stands; any other needs every setting.
        _ if sides.iter().all(|s| decided_won(s) > 0) => Verdict::Holds,
        _ if too_few > 0 => undecided(),
        _ => verdict_of(
            sides.iter().all(|s| won(s) > 0),
            sides.iter().any(|s| alone(s) == n),
        ),
    };
    if too_few > 0 && !matches!(j.verdict, Verdict::Inconclusive { .. }) {
        // Say which settings the verdict was given without, and why that is allowed.
        let decided_wins = sides
            .iter()
            .map(|s| format!("{s} {}", decided_won(s)))
            .collect::<Vec<_>>()
            .join(", ");
        let note = format!(
            "{too_few} of {all} settings undecided (fewer than {} finished runs of each {axis}; \
             wins in the {} decided: {decided_wins}); no outcome there could change the verdict",
            rule.min_n,
            all - too_few
        );
        j.detail = Some(match j.detail.take() {
            Some(d) => format!("{d}; {note}"),
            None => note,
        });
    }
    (j, table)
}

/// Judges `claim` on the runs `filter` selects, by the claim's kind (an exhaustive match: a new
/// kind of claim is a compile error here, never a silent default): paired claims pair the runs
/// along their axis, the wins rule decides each setting (its table is returned), the others take
/// the values as they are. `pin` (paired claims only) sets a second setting per side. `better`
/// is the metric's declared direction.
pub fn judge_claim(
    runs: &[RunValue],
    filter: &BTreeMap<String, String>,
    claim: &Claim,
    pin: Option<&Pin>,
    better: Better,
    rule: Rule,
    scope: Scope,
) -> (Judgement, Option<Vec<SettingWinners>>) {
    use crate::cells;
    match claim {
        Claim::Better { axis, a, b }
        | Claim::Ratio { axis, a, b, .. }
        | Claim::RatioAtLeast { axis, a, b, .. }
        | Claim::RatioAtMost { axis, a, b, .. } => {
            let (by_cell, unpaired) = pair_cells(runs, filter, axis, a, b, pin);
            let labelled = cells::labelled(by_cell);
            (
                cells::judge_cells(labelled, unpaired, claim, better, rule, scope),
                None,
            )
        }
        Claim::WinsShare { .. } | Claim::NoBestEverywhere { .. } => {
            let (j, table) = judge_wins(runs, filter, claim, better, rule);
            (j, Some(table))
        }
        Claim::AtLeast { .. } | Claim::AtMost { .. } | Claim::Approx { .. } => {
            let by_cell = cells::value_cells(runs, filter);
            (
                cells::judge_cells(by_cell, 0, claim, better, rule, scope),
                None,
            )
        }
    }
}

/// What a verdict's estimate is of, in words (`h3/h1 per pair`, the metric itself, …).
pub fn estimate_of(claim: &Claim, metric: &str) -> String {
    match claim {
        Claim::Better { a, b, .. }
        | Claim::Ratio { a, b, .. }
        | Claim::RatioAtLeast { a, b, .. }
        | Claim::RatioAtMost { a, b, .. } => format!("{a}/{b} per pair"),
        Claim::WinsShare { a, .. } => format!("share of settings {a} wins"),
        Claim::NoBestEverywhere { .. } => String::new(),
        Claim::AtLeast { .. } | Claim::AtMost { .. } | Claim::Approx { .. } => metric.to_string(),
    }
}

/// Judges a threshold or magnitude claim on the runs' values. A threshold is judged by the
/// one-sample sign test (runs equal to the threshold count on neither side; a censored run counts
/// above any threshold up to its bound and is left out above it); its exact interval is the dual
/// estimate. A magnitude band is judged on the exact interval (censored runs enter as +∞: every
/// finished run of a scenario took less than its limit).
pub fn judge_values(values: &[Observed], claim: &Claim, rule: Rule) -> Judgement {
    let mut counts = Counts {
        runs: values.len(),
        failed_runs: values.iter().filter(|v| **v == Observed::Failed).count(),
        censored_runs: values
            .iter()
            .filter(|v| matches!(v, Observed::Censored { .. }))
            .count(),
        undefined_runs: values.iter().filter(|v| **v == Observed::Undefined).count(),
        ..Counts::default()
    };
    let known: Vec<f64> = values
        .iter()
        .filter_map(|v| match *v {
            Observed::Value(x) if x.is_finite() => Some(x),
            Observed::Censored { at_least } if at_least.is_finite() => Some(f64::INFINITY),
            _ => None,
        })
        .collect();
    counts.pairs = known.len();
    counts.left_out = values.len() - known.len() - counts.failed_runs - counts.undefined_runs;
    let estimate = rules::median_interval(&known, 1.0 - rule.alpha);
    let mut j = Judgement {
        counts,
        estimate,
        ..Judgement::bare(Verdict::Inconclusive { why: String::new() })
    };
    j.verdict = match *claim {
        Claim::AtLeast { value } | Claim::AtMost { value } => {
            let at_least = matches!(claim, Claim::AtLeast { .. });
            // Above / below the threshold; a censored run is above anything up to its bound.
            let (mut above, mut below) = (0, 0);
            for v in values {
                match *v {
                    Observed::Value(x) if x.is_finite() && x > value => above += 1,
                    Observed::Value(x) if x.is_finite() && x < value => below += 1,
                    Observed::Censored { at_least: bound } if bound >= value => above += 1,
                    _ => {}
                }
            }
            let (ok, not) = if at_least {
                (above, below)
            } else {
                (below, above)
            };
            j.counts.a_better = ok;
            j.counts.a_worse = not;
            j.counts.ties = known.len().saturating_sub(ok + not);
            if let Some(v) = too_little(&j.counts, known.len(), rule) {
                j.verdict = v;
                return j;
            }
            // Runs equal to the threshold count against the claim, as in the median's interval
            // (its dual).
            let p = rules::dual_sign_p(ok, not, j.counts.ties);
            j.p = Some(p);
            if p < rule.alpha && ok > not {
                Verdict::Holds
            } else if p < rule.alpha {
                j.detail = Some(format!(
                    "{} the claimed {value}: {not} of {} runs on the other side, p = {}",
                    if at_least { "below" } else { "above" },
                    known.len(),
                    p_text(p)
                ));
                Verdict::DoesNotHold { reversed: false }
            } else {
                Verdict::NotShown {
                    why: format!(
                        "{ok} of {} runs on the claimed side ({} equal to {value}, counted \
                         against), p = {} ≥ α = {}",
                        known.len(),
                        j.counts.ties,
                        p_text(p),
                        rule.alpha
                    ),
                }
            }
        }
        Claim::Approx {
            value,
            tolerance,
            of_ratio,
        } => {
            if let Some(v) = too_little(&j.counts, known.len(), rule) {
                v
            } else {
                let e = j.estimate.as_ref().expect("values exist");
                band_verdict(e, value, tolerance, of_ratio, rule)
            }
        }
        _ => Verdict::Inconclusive {
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

/// Inconclusive for too many failed or missing runs, for fewer informative pairs (or runs) than
/// the rule's minimum, or for fewer than any test at α could need to reach significance.
fn too_little(c: &Counts, n: usize, rule: Rule) -> Option<Verdict> {
    if c.failed_share() > MAX_FAILED_SHARE {
        let missing = if c.unpaired > 0 {
            format!(" and {} without their partner", c.unpaired)
        } else {
            String::new()
        };
        return Some(Verdict::Inconclusive {
            why: format!(
                "{} of {} runs failed{missing} (more than {:.0} %)",
                c.failed_runs,
                c.runs,
                MAX_FAILED_SHARE * 100.0
            ),
        });
    }
    if n == usize::MAX {
        return None;
    }
    let needed = rule.min_n.max(rules::fewest_informative(rule.alpha));
    if n < needed {
        return Some(Verdict::Inconclusive {
            why: if n < rule.min_n {
                format!(
                    "n = {n} (pairs or runs compared, copies once) < the rule's minimum {}",
                    rule.min_n
                )
            } else {
                format!(
                    "n = {n}: even all on one side could not reach p < {} \
                     (needs n ≥ {needed})",
                    rule.alpha
                )
            },
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
        min_effect: 0.0,
    };
    const INTERVAL: Rule = Rule {
        test: Test::Interval,
        ..SIGN
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

    fn flat((cells, unpaired): (Vec<CellPairs>, usize)) -> (Vec<(Observed, Observed)>, usize) {
        (cells.into_iter().flat_map(|c| c.pairs).collect(), unpaired)
    }

    #[test]
    fn a_pinned_setting_pairs_each_side_with_its_own_value() {
        // fec stands in for a server: side A (h3) from fec = 2, side B (h1) from fec = 0.
        let mut runs = Vec::new();
        for rep in 1..=6 {
            runs.push(run("h3", "2", rep, Value(5.0)));
            runs.push(run("h3", "0", rep, Value(50.0)));
            runs.push(run("h1", "0", rep, Value(10.0)));
            runs.push(run("h1", "2", rep, Value(1.0)));
        }
        let pin = Pin {
            param: "fec".into(),
            a: "2".into(),
            b: "0".into(),
        };
        let (pairs, unpaired) = flat(pair_cells(
            &runs,
            &BTreeMap::new(),
            "protocol",
            "h3",
            "h1",
            Some(&pin),
        ));
        assert_eq!((pairs.len(), unpaired), (6, 0));
        assert!(pairs.iter().all(|p| *p == (Value(5.0), Value(10.0))));
        let params = |proto: &str, fec: &str| run(proto, fec, 1, Value(0.0)).params;
        assert!(pin.admits(&params("h3", "2"), "protocol", "h3", "h1"));
        assert!(!pin.admits(&params("h3", "0"), "protocol", "h3", "h1"));
        assert!(pin.admits(&params("h1", "0"), "protocol", "h3", "h1"));
        assert!(!pin.admits(&params("h1", "2"), "protocol", "h3", "h1"));
        // A side's run without its partner counts as missing.
        runs.retain(|r| !(r.repetition == 6 && r.params["protocol"] == "h1"));
        let (pairs, unpaired) = flat(pair_cells(
            &runs,
            &BTreeMap::new(),
            "protocol",
            "h3",
            "h1",
            Some(&pin),
        ));
        assert_eq!((pairs.len(), unpaired), (5, 1));
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
        // Mixed results with enough pairs: not shown (the interval reaches both ways).
        let mixed: Vec<_> = (0..10)
            .map(|i| (Value(1.0 + (i % 2) as f64 * 2.0), Value(2.0)))
            .collect();
        assert!(matches!(
            judge_pairs(&mixed, Better::Lower, SIGN).verdict,
            Verdict::NotShown { .. }
        ));
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
    }

    #[test]
    fn thresholds_and_magnitudes_are_judged_on_the_values() {
        let jain: Vec<_> = [0.95, 0.97, 0.99, 0.96, 0.98, 0.99].map(Value).to_vec();
        let j = judge_values(&jain, &Claim::AtLeast { value: 0.9 }, SIGN);
        assert_eq!(j.verdict, Verdict::Holds);
        // A plain value short of its threshold does not hold: it has no direction to reverse.
        let j = judge_values(&jain, &Claim::AtMost { value: 0.9 }, SIGN);
        assert_eq!(j.verdict, Verdict::DoesNotHold { reversed: false });
        let boot = INTERVAL;
        let ratio: Vec<_> = [2.7, 2.8, 2.75, 2.9, 2.6, 2.8, 2.85].map(Value).to_vec();
        let approx = |value| Claim::Approx {
            value,
            tolerance: 0.25,
            of_ratio: true,
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
        // Five of five on the claimed side cannot reach p < 0.05 (p = 0.0625): said so, and the
        // exact interval (the range, 93.75 %) does not decide a band either.
        let five: Vec<_> = [0.95; 5].map(Value).to_vec();
        assert!(matches!(
            judge_values(&five, &Claim::AtLeast { value: 0.9 }, SIGN).verdict,
            Verdict::Inconclusive { why } if why.contains("n = 5") && why.contains("needs n ≥ 6")
        ));
        let five_ratios: Vec<_> = [2.9, 3.0, 3.1, 2.95, 3.05].map(Value).to_vec();
        assert!(matches!(
            judge_values(&five_ratios, &approx(3.0), boot).verdict,
            Verdict::Inconclusive { why } if why.contains("needs n ≥ 6")
        ));
    }

    #[test]
    fn a_ratio_claim_holds_inside_its_band_and_not_outside() {
        let rule = INTERVAL;
        let three = vec![(Value(30.0), Value(10.0)); 8];
        assert_eq!(
            judge_ratio(&three, Better::Lower, 3.0, 0.25, rule).verdict,
            Verdict::Holds
        );
        assert_eq!(
            judge_ratio(&three, Better::Lower, 1.5, 0.25, rule).verdict,
            Verdict::DoesNotHold { reversed: false }
        );
        // Too few finished pairs: a censored pair has no ratio.
        let mut few = vec![(Value(30.0), Value(10.0)); 4];
        few.push((Censored { at_least: 60.0 }, Value(10.0)));
        assert!(matches!(
            judge_ratio(&few, Better::Lower, 3.0, 0.25, rule).verdict,
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
            min_effect: 0.0,
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
        // h2 wins no setting: it is not "as good as the others somewhere", so the claim that none
        // is better than the other two does not hold (before issue 37 one setting not won alone
        // sufficed, and this held).
        let (j, _) = judge_wins(&runs, &none, &nobody, Better::Lower, rule);
        assert_eq!(j.verdict, Verdict::DoesNotHold { reversed: false });
        // A third setting that h2 wins: every protocol is best somewhere, none everywhere.
        for rep in 1..=3 {
            runs.push(setting("118ms", "h1", rep, Value(300.0)));
            runs.push(setting("118ms", "h2", rep, Value(100.0)));
            runs.push(setting("118ms", "h3", rep, Value(300.0)));
        }
        let (j, _) = judge_wins(&runs, &none, &nobody, Better::Lower, rule);
        assert_eq!(j.verdict, Verdict::Holds, "{j:?}");
        // Only the 218 ms setting: h3 wins everywhere alone, the claim is reversed.
        let f = BTreeMap::from([("rtt".to_string(), "218ms".to_string())]);
        let (j, _) = judge_wins(&runs, &f, &nobody, Better::Lower, rule);
        assert_eq!(j.verdict, Verdict::DoesNotHold { reversed: true });
        // Too few runs per side: inconclusive, not a verdict from one load.
        // The table (and the tree drawn from it) still shows what ran.
        let few = Rule { min_n: 4, ..rule };
        let (j, table) = judge_wins(&runs, &none, &nobody, Better::Lower, few);
        assert!(matches!(j.verdict, Verdict::Inconclusive { .. }), "{j:?}");
        assert_eq!(table.len(), 3);
        assert!(j.detail.unwrap().contains("h3 wins 1 of 3 settings"));
        // One failed run (1 of 27, under 5 %) leaves its setting (18 ms) undecided. The
        // verdicts no outcome there could change stand; the others wait.
        runs[0].value = Failed;
        let (j, _) = judge_wins(&runs, &none, &share("h3", 0.3), Better::Lower, rule);
        assert_eq!(
            j.verdict,
            Verdict::Holds,
            "h3 wins 1 of 3 whatever 18 ms shows: {j:?}"
        );
        assert!(
            j.detail.as_deref().is_some_and(|d| d.ends_with(
                "1 of 3 settings undecided (fewer than 3 finished runs of each protocol; \
                 wins in the 2 decided: h1 0, h2 1, h3 1); no outcome there could change the verdict"
            )),
            "{j:?}"
        );
        let (j, _) = judge_wins(&runs, &none, &share("h2", 0.9), Better::Lower, rule);
        assert_eq!(
            j.verdict,
            Verdict::DoesNotHold { reversed: false },
            "h2 wins at most 2 of 3: {j:?}"
        );
        let (j, _) = judge_wins(&runs, &none, &share("h3", 0.5), Better::Lower, rule);
        assert!(
            matches!(&j.verdict, Verdict::Inconclusive { why } if why.contains("1 of 3 settings")),
            "h3 wins 1 or 2 of 3: {j:?}"
        );
        // h1's only win is the undecided setting: whether every protocol wins somewhere waits.
        let (j, _) = judge_wins(&runs, &none, &nobody, Better::Lower, rule);
        assert!(matches!(j.verdict, Verdict::Inconclusive { .. }), "{j:?}");
        // The failed run in a setting h1 does not need (218 ms, h1's side): every protocol
        // still wins a decided setting, so no protocol can be best everywhere.
        runs[0].value = Value(50.0);
        let at_218_h1 = runs
            .iter()
            .position(|r| r.params["rtt"] == "218ms" && r.params["protocol"] == "h1")
            .unwrap();
        runs[at_218_h1].value = Failed;
        let (j, _) = judge_wins(&runs, &none, &nobody, Better::Lower, rule);
        assert!(
            matches!(j.verdict, Verdict::Inconclusive { .. }),
            "h3's only win is at 218 ms, now undecided: {j:?}"
        );
        // A fourth setting h3 wins: every protocol wins a decided setting, so none can be best
        // everywhere whatever 218 ms would show.
        for rep in 1..=3 {
            runs.push(setting("318ms", "h1", rep, Value(400.0)));
            runs.push(setting("318ms", "h2", rep, Value(400.0)));
            runs.push(setting("318ms", "h3", rep, Value(100.0)));
        }
        let (j, _) = judge_wins(&runs, &none, &nobody, Better::Lower, rule);
        assert_eq!(j.verdict, Verdict::Holds, "{j:?}");
        // Above 5 % failed: inconclusive whatever the settings show.
        for r in runs
            .iter_mut()
            .filter(|r| r.params["rtt"] == "118ms")
            .take(2)
        {
            r.value = Failed;
        }
        let (j, _) = judge_wins(&runs, &none, &share("h3", 0.0), Better::Lower, rule);
        assert!(
            matches!(&j.verdict, Verdict::Inconclusive { why } if why.contains("runs failed")),
            "{j:?}"
        );
    }

    /// 004-5c-h1's pairs mostly tie (the ABR chooses the same bitrates over QUIC and TCP): more
    /// repetitions add ties, never informative pairs. Twelve pairs, ten tied, whose median ratio's
    /// interval lies within 1 ± 5 %: no lead that matters. The same pairs with a wider spread, or
    /// without a smallest difference that matters, stay "too few".
    #[test]
    fn mostly_tied_pairs_within_the_margin_do_not_hold() {
        let rule = Rule {
            min_effect: 0.05,
            min_n: 6,
            ..SIGN
        };
        let mut pairs = vec![(Value(1.0), Value(1.0)); 10];
        pairs.push((Value(1.02), Value(1.0)));
        pairs.push((Value(1.0), Value(1.01)));
        let j = judge_pairs(&pairs, Better::Higher, rule);
        assert_eq!(j.verdict, Verdict::DoesNotHold { reversed: false }, "{j:?}");
        assert!(
            j.detail
                .as_deref()
                .unwrap()
                .contains("no difference that matters"),
            "{j:?}"
        );
        // Without a smallest difference that matters, no interval can lie inside a margin:
        // the ties show no difference, which is not shown either way.
        let j = judge_pairs(&pairs, Better::Higher, SIGN);
        assert!(matches!(&j.verdict, Verdict::NotShown { .. }), "{j:?}");
        // Six pairs apart by 30 % or more among the ties: the interval leaves the margin.
        let mut wide = vec![(Value(1.0), Value(1.0)); 4];
        wide.extend([(Value(1.3), Value(1.0)); 3]);
        wide.extend([(Value(1.0), Value(1.3)); 2]);
        let j = judge_pairs(&wide, Better::Higher, rule);
        assert!(matches!(&j.verdict, Verdict::NotShown { .. }), "{j:?}");
        // Fewer pairs than the rule's minimum, all tied: too few, whatever they show.
        let few = vec![(Value(1.0), Value(1.0)); 5];
        let j = judge_pairs(&few, Better::Higher, rule);
        assert!(matches!(j.verdict, Verdict::Inconclusive { .. }), "{j:?}");
    }

    /// Issue 37, §3: n counts informative pairs. 004-3c's quick form had six pairs of which five
    /// tied at 0 % rebuffering: one informative pair is no evidence either way.
    #[test]
    fn ties_do_not_count_towards_n() {
        let mut pairs = vec![(Value(0.0), Value(0.0)); 5];
        pairs.push((Value(0.03), Value(0.02)));
        // Issue 56: ties count against the claim (the interval's dual) — five ties and one
        // pair the other way cannot show it, and the interval reaches no difference.
        let j = judge_pairs(&pairs, Better::Lower, SIGN);
        assert!(
            matches!(
                &j.verdict,
                Verdict::NotShown { .. } | Verdict::DoesNotHold { .. }
            ),
            "{j:?}"
        );
        assert_eq!(j.counts.pairs, 6);
        // Five of five on one side (p = 0.0625) cannot reach α = 0.05 even with min_n = 5:
        // inconclusive, as the exact interval at n = 5 is, never "does not hold".
        let five = vec![(Value(1.0), Value(2.0)); 5];
        let j = judge_pairs(&five, Better::Lower, SIGN);
        assert!(
            matches!(&j.verdict, Verdict::Inconclusive { why } if why.contains("needs n ≥ 6")),
            "{j:?}"
        );
        // Six agree: p = 2/64, holds.
        let six = vec![(Value(1.0), Value(2.0)); 6];
        assert_eq!(
            judge_pairs(&six, Better::Lower, SIGN).verdict,
            Verdict::Holds
        );
    }

    /// Issue 37, §3: a significant difference smaller than the one that matters is no lead
    /// (the bufferbloat pack's 0.1 % differences were "holds" and "reversed").
    #[test]
    fn a_significant_but_tiny_difference_is_not_a_verdict() {
        let rule = Rule {
            min_effect: 0.05,
            ..SIGN
        };
        // 20 pairs, A 0.1 % faster in every one: p = 2/2^20.
        let tiny: Vec<_> = (0..20)
            .map(|i| {
                (
                    Value(999.0 + i as f64 * 0.01),
                    Value(1000.0 + i as f64 * 0.01),
                )
            })
            .collect();
        let j = judge_pairs(&tiny, Better::Lower, rule);
        assert_eq!(j.verdict, Verdict::DoesNotHold { reversed: false }, "{j:?}");
        assert!(
            j.detail
                .as_deref()
                .unwrap()
                .contains("no difference that matters")
        );
        // Without the margin the same pairs "hold".
        assert_eq!(
            judge_pairs(&tiny, Better::Lower, SIGN).verdict,
            Verdict::Holds
        );
        // A 3 % median lead whose interval reaches beyond 5 %: inconclusive, saying why.
        let mixed: Vec<_> = (0..20)
            .map(|i| (Value(999.0 - 4.0 * i as f64), Value(1000.0)))
            .collect();
        let j = judge_pairs(&mixed, Better::Lower, rule);
        assert!(
            matches!(&j.verdict, Verdict::Inconclusive { why } if why.contains("within the 5 %")),
            "{j:?}"
        );
        // A 20 % lead holds with the margin.
        let big = vec![(Value(800.0), Value(1000.0)); 10];
        assert_eq!(
            judge_pairs(&big, Better::Lower, rule).verdict,
            Verdict::Holds
        );
    }

    /// Issue 37, §5: a threshold claim keeps censored runs (a time over its limit is above any
    /// threshold up to that limit) instead of dropping them, and a straddle reads "not shown"
    /// on both paths (the sign test and its dual interval agree).
    #[test]
    fn thresholds_keep_censored_runs_and_straddles_are_not_shown() {
        // at_most 5 s: four runs under, six censored at a 60 s limit — the claim is reversed,
        // where dropping the censored runs left four of four "under".
        let mut v = vec![Value(4.0); 4];
        v.extend(vec![Censored { at_least: 60.0 }; 6]);
        let j = judge_values(&v, &Claim::AtMost { value: 5.0 }, SIGN);
        assert_eq!((j.counts.a_better, j.counts.a_worse), (4, 6));
        assert!(matches!(j.verdict, Verdict::NotShown { .. }), "{j:?}");
        // Nine of ten over the limit: above the claimed at-most, a plain value never reversed.
        let mut w = vec![Value(4.0); 1];
        w.extend(vec![Censored { at_least: 60.0 }; 9]);
        let j = judge_values(&w, &Claim::AtMost { value: 5.0 }, SIGN);
        assert_eq!(j.verdict, Verdict::DoesNotHold { reversed: false }, "{j:?}");
        assert_eq!(j.estimate.unwrap().median, f64::INFINITY);
        // A censored run without a bound in the metric's unit is left out, not guessed.
        let u = vec![Censored { at_least: f64::NAN }; 3];
        let j = judge_values(&u, &Claim::AtMost { value: 5.0 }, SIGN);
        assert_eq!(j.counts.left_out, 3);
        // Straddling: 6 above and 4 below 0.9 — p = 0.75; the exact interval straddles too.
        let s: Vec<_> = [0.95, 0.96, 0.97, 0.98, 0.99, 0.97, 0.85, 0.86, 0.87, 0.88]
            .map(Value)
            .to_vec();
        let j = judge_values(&s, &Claim::AtLeast { value: 0.9 }, SIGN);
        assert!(matches!(j.verdict, Verdict::NotShown { .. }), "{j:?}");
        let e = j.estimate.unwrap();
        assert!(e.low < 0.9 && e.high > 0.9, "{e:?}");
    }

    /// Issue 37, §5: a run without its partner is counted as missing, not dropped silently.
    #[test]
    fn unpaired_runs_count_as_missing() {
        let mut runs = Vec::new();
        for rep in 1..=10 {
            runs.push(run("h3", "0", rep, Value(1.0)));
            if rep > 1 {
                runs.push(run("h1", "0", rep, Value(2.0)));
            }
        }
        let claim = Claim::Better {
            axis: "protocol".into(),
            a: "h3".into(),
            b: "h1".into(),
        };
        let (pairs, unpaired) = pair(&runs, &BTreeMap::new(), "protocol", "h3", "h1");
        assert_eq!((pairs.len(), unpaired), (9, 1));
        let j = judge_paired(&pairs, unpaired, &claim, Better::Lower, SIGN);
        assert_eq!(j.counts.unpaired, 1);
        // 1 missing of 19 runs: above 5 %.
        assert!(
            matches!(&j.verdict, Verdict::Inconclusive { why } if why.contains("1 without their partner")),
            "{j:?}"
        );
    }

    /// Issue 37, §1: "more than three times" is one-sided: a ratio of 4 holds (the old band
    /// 2.25–3.75 rejected it), 2.3 does not.
    #[test]
    fn a_ratio_bound_is_one_sided() {
        let claim = |value| Claim::RatioAtLeast {
            axis: "protocol".into(),
            a: "h3".into(),
            b: "h2".into(),
            value,
        };
        let four = vec![(Value(40.0), Value(10.0)); 10];
        let j = judge_paired(&four, 0, &claim(3.0), Better::Lower, SIGN);
        assert_eq!(j.verdict, Verdict::Holds, "{j:?}");
        // Below the claimed 3× on the claimed side of 1: does not hold, not reversed.
        let low = vec![(Value(23.0), Value(10.0)); 10];
        let j = judge_paired(&low, 0, &claim(3.0), Better::Lower, SIGN);
        assert_eq!(j.verdict, Verdict::DoesNotHold { reversed: false });
        // The direction flipped beyond the margin: reversed.
        let flipped = vec![(Value(8.0), Value(10.0)); 10];
        let j = judge_paired(&flipped, 0, &claim(3.0), Better::Lower, SIGN);
        assert_eq!(j.verdict, Verdict::DoesNotHold { reversed: true });
        // A censored A of a time has the ratio +∞ (issue 56: as the sign test has it): counted,
        // above any threshold.
        let mut c = four.clone();
        c.push((Censored { at_least: 60.0 }, Value(10.0)));
        let j = judge_paired(&c, 0, &claim(3.0), Better::Lower, SIGN);
        assert_eq!((j.counts.left_out, j.counts.censored_runs), (0, 1));
        assert_eq!(j.verdict, Verdict::Holds);
    }

    /// Issue 37: sign, Wilcoxon and interval paths agree on the same evidence — a signed-rank
    /// test made significant by a few large wins among many small losses gives no verdict while
    /// the median's interval (the sign test's dual) reaches 1.
    #[test]
    fn a_wilcoxon_verdict_needs_the_medians_interval_on_its_side() {
        let rule = Rule {
            test: Test::Wilcoxon,
            ..SIGN
        };
        // 12 wins of 30 %, 8 losses of 0.1 %: W- small (p < 0.01), the sign test 12/8 (p = 0.50).
        let mut pairs = vec![(Value(700.0), Value(1000.0)); 12];
        pairs.extend(vec![(Value(1001.0), Value(1000.0)); 8]);
        let j = judge_pairs(&pairs, Better::Lower, rule);
        assert!(j.p.unwrap() < 0.01, "{j:?}");
        assert!(
            matches!(&j.verdict, Verdict::Inconclusive { why } if why.contains("reaches 1")),
            "{j:?}"
        );
        // Wins in every pair: both agree, holds.
        let all = vec![(Value(700.0), Value(1000.0)); 20];
        assert_eq!(
            judge_pairs(&all, Better::Lower, rule).verdict,
            Verdict::Holds
        );
    }
}
