//! Two result sets judged run for run (`quiclab compare A B`): a before and after (a stack
//! upgrade, a kernel, a key changed) as the same engine judges a seed's finding. Each run of B is
//! paired with the run of A that has the same settings (its run key's parameters) and repetition
//! — the same seed — and each metric is a claim "B is better than A": holds (B better), reversed
//! (A better), does not hold (no difference beyond the margin), not shown, mixed (cells go both
//! ways) or inconclusive. Repetitions that cannot differ count once ([`crate::cells`]), failed,
//! flagged and timed-out runs are counted as a finding counts them, and the metrics' p values
//! are corrected together (Benjamini–Hochberg). Pure: records in, verdicts out.

use std::collections::{BTreeMap, BTreeSet};

use quiclab_experiment::metric::MetricDef;

use crate::cells::{bh, demote_unless_q};
use crate::findings::Class;
use crate::judge::{self, Claim, Rule, Scope, Verdict};
use crate::outcome::{FindingVerdict, Scale};
use crate::rules::Better;
use crate::study::{RunRecord, run_values};

/// The parameter that tells the two sets apart in the pairing (no run key has it: a key is
/// `name=value` of scenario keys, and no key is called this).
pub const SET_AXIS: &str = "compared set";

/// Each metric of `metrics` judged on `a` against `b`: one verdict per metric, its id the
/// metric's name, its estimate the median per-pair ratio B/A with its exact interval, its cells
/// every setting the runs share. `rule` is the test, its level, the fewest informative pairs and
/// the margin (the smallest difference that matters).
pub fn compare(
    a: &[RunRecord],
    b: &[RunRecord],
    metrics: &[MetricDef],
    rule: Rule,
) -> Vec<FindingVerdict> {
    // The change itself (one value in all of A, another in all of B) is what is compared, not a
    // setting to pair by.
    let changed = changed_params(a, b);
    let tag = |runs: &[RunRecord], set: &str| -> Vec<RunRecord> {
        runs.iter()
            .map(|r| {
                let mut r = r.clone();
                r.params.retain(|k, _| !changed.contains(k));
                r.params.insert(SET_AXIS.to_string(), set.to_string());
                r
            })
            .collect()
    };
    let mut runs = tag(a, "A");
    runs.extend(tag(b, "B"));
    let claim = Claim::Better {
        axis: SET_AXIS.to_string(),
        a: "B".to_string(),
        b: "A".to_string(),
    };
    let mut out: Vec<FindingVerdict> = metrics
        .iter()
        .map(|def| {
            let lower = def.lower_is_better();
            let better = if lower { Better::Lower } else { Better::Higher };
            let values = run_values(&runs, def);
            let (judgement, _) = judge::judge_claim(
                &values,
                &BTreeMap::new(),
                &claim,
                None,
                better,
                rule,
                Scope::Overall,
            );
            FindingVerdict {
                study: "compare".to_string(),
                id: def.name.to_string(),
                source: String::new(),
                claim: format!(
                    "B's {} ({}) is better than A's: {} by more than {:.0} %",
                    def.name,
                    def.label,
                    if lower { "lower" } else { "higher" },
                    rule.min_effect * 100.0
                ),
                class: Class::Reproduction,
                scenario: None,
                metric: Some(def.name.to_string()),
                seed_value: None,
                test_of: format!(
                    "B vs A ({} is better)",
                    if lower { "lower" } else { "higher" }
                ),
                estimate_of: "B/A per pair".to_string(),
                rule: Some(rule),
                judgement,
                form: Some("as stored".to_string()),
                wins_table: None,
                tree: None,
                beside: None,
                scale: Scale::of(&claim, lower, rule.min_effect),
                per: None,
                scope: Some(Scope::Overall),
                explanations: Vec::new(),
                no_explanation: None,
            }
        })
        .collect();
    // One family: every metric compared (a "B better" needs its q below α too).
    let ps: Vec<Option<f64>> = out.iter().map(|v| v.judgement.p).collect();
    let family = format!(
        "the comparison's {} p values (one per metric)",
        ps.iter().flatten().count()
    );
    for (v, q) in out.iter_mut().zip(bh(&ps)) {
        v.judgement.q = q;
        demote_unless_q(&mut v.judgement, rule.alpha, &family);
    }
    out
}

/// The parameters that tell A from B as a whole: one value in every run of A and another in every
/// run of B, or set on one side only. A parameter that varies within a set (a grid axis) stays a
/// setting to pair by: only its values both sets ran pair.
pub fn changed_params(a: &[RunRecord], b: &[RunRecord]) -> BTreeSet<String> {
    let single = |runs: &[RunRecord]| -> BTreeMap<String, Option<String>> {
        let mut out: BTreeMap<String, Option<String>> = BTreeMap::new();
        for r in runs {
            for (k, v) in &r.params {
                out.entry(k.clone())
                    .and_modify(|seen| {
                        if seen.as_ref() != Some(v) {
                            *seen = None;
                        }
                    })
                    .or_insert_with(|| Some(v.clone()));
            }
        }
        // A key some runs lack is not one value throughout.
        out.retain(|k, _| runs.iter().all(|r| r.params.contains_key(k)));
        out
    };
    let (sa, sb) = (single(a), single(b));
    let keys: BTreeSet<&String> = a.iter().chain(b).flat_map(|r| r.params.keys()).collect();
    keys.into_iter()
        .filter(|k| match (sa.get(*k), sb.get(*k)) {
            (Some(Some(x)), Some(Some(y))) => x != y,
            // On one side only, in every run of it.
            (Some(Some(_)), None) => !b.iter().any(|r| r.params.contains_key(*k)),
            (None, Some(Some(_))) => !a.iter().any(|r| r.params.contains_key(*k)),
            _ => false,
        })
        .cloned()
        .collect()
}

/// A comparison's verdict in its own words: which set is better, or that neither is by more
/// than the margin.
pub fn outcome_word(v: &Verdict) -> &'static str {
    match v {
        Verdict::Holds => "B better",
        Verdict::DoesNotHold { reversed: true } => "A better",
        Verdict::DoesNotHold { reversed: false } => "no difference that matters",
        Verdict::NotShown { .. } => "not shown",
        Verdict::Mixed { .. } => "mixed",
        Verdict::Inconclusive { .. } => "inconclusive",
        Verdict::NotRunnable { .. } => "not comparable",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::Test;
    use crate::study::RunStatus;

    const GOODPUT: MetricDef = MetricDef::higher("goodput_mbps", "Goodput", "Mbit/s");
    const TIME: MetricDef = MetricDef::completion_time("total_ms", "Download time", "ms");

    fn rule() -> Rule {
        Rule {
            test: Test::Sign,
            alpha: 0.05,
            min_n: 6,
            min_effect: 0.05,
        }
    }

    /// Runs of two protocols × `reps`, each metric from `f(protocol, rep)`.
    fn set(reps: u32, f: impl Fn(&str, u32) -> (f64, f64)) -> Vec<RunRecord> {
        let mut out = Vec::new();
        for proto in ["h1", "h3"] {
            for rep in 1..=reps {
                let (goodput, total) = f(proto, rep);
                out.push(RunRecord {
                    params: BTreeMap::from([("protocol".to_string(), proto.to_string())]),
                    repetition: rep,
                    status: RunStatus::Ok { flagged: false },
                    metrics: BTreeMap::from([
                        ("goodput_mbps".to_string(), goodput),
                        ("total_ms".to_string(), total),
                    ]),
                });
            }
        }
        out
    }

    fn jitter(rep: u32) -> f64 {
        // Small, distinct per repetition: the repetitions are not copies.
        1.0 + f64::from(rep % 5) * 0.003 - 0.006
    }

    #[test]
    fn a_change_that_matters_is_b_better_and_its_mirror_a_better() {
        let a = set(6, |_, r| (10.0 * jitter(r), 800.0 * jitter(r)));
        let b = set(6, |_, r| (15.0 * jitter(r + 1), 530.0 * jitter(r + 1)));
        let v = compare(&a, &b, &[GOODPUT, TIME], rule());
        for m in &v {
            assert_eq!(outcome_word(&m.judgement.verdict), "B better", "{m:#?}");
            assert!(m.judgement.q.is_some_and(|q| q < 0.05));
        }
        assert!(v[0].judgement.estimate.as_ref().unwrap().median > 1.4);
        assert!(v[1].judgement.estimate.as_ref().unwrap().median < 0.7);
        let back = compare(&b, &a, &[GOODPUT, TIME], rule());
        for m in &back {
            assert_eq!(outcome_word(&m.judgement.verdict), "A better", "{m:#?}");
        }
    }

    #[test]
    fn a_change_that_does_not_matter_is_no_difference() {
        let a = set(8, |_, r| (10.0 * jitter(r), 800.0 * jitter(r)));
        let b = set(8, |_, r| (10.0 * jitter(r + 2), 800.0 * jitter(r + 3)));
        let v = compare(&a, &b, &[GOODPUT, TIME], rule());
        for m in &v {
            assert_eq!(
                outcome_word(&m.judgement.verdict),
                "no difference that matters",
                "{m:#?}"
            );
        }
    }

    #[test]
    fn cells_that_go_both_ways_are_mixed_not_pooled_away() {
        // h3 gains 40 %, h1 loses 40 %: the pooled median says little, the cells say both.
        let a = set(6, |_, r| (10.0 * jitter(r), 800.0 * jitter(r)));
        let b = set(6, |p, r| {
            let f = if p == "h3" { 1.4 } else { 0.6 };
            (10.0 * f * jitter(r + 1), 800.0 * jitter(r + 1))
        });
        let v = compare(&a, &b, &[GOODPUT], rule());
        let j = &v[0].judgement;
        assert_eq!(j.cells.len(), 2, "{j:#?}");
        assert!(j.cells.iter().any(|c| c.toward) && j.cells.iter().any(|c| c.against));
        assert_ne!(outcome_word(&j.verdict), "B better", "{j:#?}");
    }

    #[test]
    fn copies_count_once_and_unmatched_runs_are_counted() {
        // Every repetition the same value: one informative pair per cell, too few for a verdict
        // by counting, judged by the values against the margin instead.
        let a = set(6, |_, _| (10.0, 800.0));
        let b = set(6, |_, _| (10.0, 800.0));
        let v = compare(&a, &b, &[GOODPUT], rule());
        assert!(v[0].judgement.deterministic, "{:#?}", v[0].judgement);
        assert_eq!(
            outcome_word(&v[0].judgement.verdict),
            "no difference that matters"
        );
        // B ran fewer repetitions: A's extra runs have no partner and are counted, not dropped.
        let b = set(4, |_, r| (10.0 * jitter(r), 800.0));
        let v = compare(
            &set(6, |_, r| (10.0 * jitter(r + 1), 800.0)),
            &b,
            &[GOODPUT],
            rule(),
        );
        assert_eq!(v[0].judgement.counts.unpaired, 4, "{:#?}", v[0].judgement);
    }

    #[test]
    fn the_changed_setting_is_compared_not_paired_by() {
        let with = |runs: Vec<RunRecord>, k: &str, v: &str| -> Vec<RunRecord> {
            runs.into_iter()
                .map(|mut r| {
                    r.params.insert(k.into(), v.into());
                    r
                })
                .collect()
        };
        let a = with(set(6, |_, r| (10.0 * jitter(r), 800.0)), "rate", "10mbit");
        let b = with(set(6, |_, r| (20.0 * jitter(r), 400.0)), "rate", "20mbit");
        // A key set in B only (its default in A) is a change too.
        let b = with(b, "up-rate", "50mbit");
        assert_eq!(
            changed_params(&a, &b),
            BTreeSet::from(["rate".to_string(), "up-rate".to_string()])
        );
        let v = compare(&a, &b, &[GOODPUT], rule());
        assert_eq!(v[0].judgement.counts.unpaired, 0, "{:#?}", v[0].judgement);
        assert_eq!(outcome_word(&v[0].judgement.verdict), "B better");
        // The grid's own axis (protocol, two values on each side) is never a change.
        assert!(!changed_params(&a, &b).contains("protocol"));
    }

    #[test]
    fn failed_runs_are_counted_never_paired_as_values() {
        let a = set(6, |_, r| (10.0 * jitter(r), 800.0));
        let mut b = set(6, |_, r| (15.0 * jitter(r), 800.0));
        for r in b.iter_mut().take(3) {
            r.status = RunStatus::Failed;
            r.metrics.clear();
        }
        let v = compare(&a, &b, &[GOODPUT], rule());
        assert_eq!(
            v[0].judgement.counts.failed_runs, 3,
            "{:#?}",
            v[0].judgement
        );
    }
}
