//! A finding over more than one cell (every setting but the compared axis and the repetition):
//! the replication unit, each cell's verdict, and the finding's verdict from its scope.
//!
//! - **The replication unit.** A cell whose repetitions do not differ beyond a tenth of the
//!   smallest difference that matters (its pairs' ratios, or its values, within that share of
//!   each other) is one observation, not n: on a loss-free, jitter-free link the repetitions are
//!   the same run. The test counts units; a comparison whose every cell is such a copy is
//!   *deterministic*: judged by its values against the margin, with no p value.
//! - **Cells.** Each cell is judged by the finding's rule (its minimum n lowered to what a cell
//!   can reach); the cells' p values get Benjamini–Hochberg q values within the finding, and a
//!   cell's holds or reversed needs q < α.
//! - **Scope.** `each`: holds only where every cell holds (the finding's p is the largest cell
//!   p: an intersection–union test); `overall`: the pooled units decide — a stratified paired
//!   test: every pair lies within its cell, so the cells' levels cancel, and copies count once —
//!   and a cell significantly the other way while the claim is significant somewhere (pooled or
//!   in a cell) makes the verdict *mixed*, naming the cells. The pooled median weighs a cell by
//!   its units: a cell of copies weighs one, a noisy cell its repetitions; the cells' table
//!   shows each.

use std::collections::BTreeMap;

use crate::judge::{
    self, CellJudgement, CellPairs, Claim, Judgement, Rule, RunValue, Scope, Verdict,
};
use crate::outcome::p_text;
use crate::rules::{self, Better, MAX_FAILED_SHARE, Observed};

/// Repetitions whose outcomes lie within this share of the smallest difference that matters of
/// each other are copies.
pub const COPY_SHARE_OF_MARGIN: f64 = 0.1;

/// The margin copies are measured against when a rule states none (thresholds, bands).
const MARGIN_FOR_COPIES: f64 = 0.05;

/// One cell's data: pairs of a comparison, or one side's values.
#[derive(Debug, Clone, PartialEq)]
pub enum CellData {
    Pairs(Vec<(Observed, Observed)>),
    Values(Vec<Observed>),
}

impl CellData {
    fn len(&self) -> usize {
        match self {
            CellData::Pairs(p) => p.len(),
            CellData::Values(v) => v.len(),
        }
    }

    fn runs_per_unit(&self) -> usize {
        match self {
            CellData::Pairs(_) => 2,
            CellData::Values(_) => 1,
        }
    }

    fn extend(&mut self, other: &CellData) {
        match (self, other) {
            (CellData::Pairs(a), CellData::Pairs(b)) => a.extend_from_slice(b),
            (CellData::Values(a), CellData::Values(b)) => a.extend_from_slice(b),
            _ => {}
        }
    }
}

/// The relative spread below which repetitions are copies, for `rule`.
pub fn copy_resolution(rule: Rule) -> f64 {
    let margin = if rule.min_effect > 0.0 {
        rule.min_effect
    } else {
        MARGIN_FOR_COPIES
    };
    margin * COPY_SHARE_OF_MARGIN
}

/// Whether positive `xs` (at least two) lie within `resolution` of each other (max/min).
fn within(xs: &[f64], resolution: f64) -> bool {
    if xs.len() < 2 || xs.iter().any(|x| !x.is_finite()) {
        return false;
    }
    let lo = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if lo == hi {
        return true;
    }
    lo > 0.0 && hi / lo <= 1.0 + resolution
}

/// A cell's units: one (its median outcome) when its repetitions are copies, else every one;
/// and whether it was folded.
pub fn fold_copies(data: &CellData, better: Better, resolution: f64) -> (CellData, bool) {
    match data {
        CellData::Pairs(pairs) => {
            let mut with_ratio: Vec<(f64, (Observed, Observed))> = Vec::new();
            for &(a, b) in pairs {
                match rules::ratio_of(a, b, better) {
                    Some(r) => with_ratio.push((r, (a, b))),
                    None => return (data.clone(), false),
                }
            }
            let rs: Vec<f64> = with_ratio.iter().map(|(r, _)| *r).collect();
            if !within(&rs, resolution) {
                return (data.clone(), false);
            }
            with_ratio.sort_by(|x, y| x.0.total_cmp(&y.0));
            let mid = with_ratio[with_ratio.len() / 2].1;
            (CellData::Pairs(vec![mid]), true)
        }
        CellData::Values(values) => {
            let mut xs = Vec::new();
            for v in values {
                match v {
                    Observed::Value(x) => xs.push(*x),
                    _ => return (data.clone(), false),
                }
            }
            if !within(&xs, resolution) {
                return (data.clone(), false);
            }
            xs.sort_by(f64::total_cmp);
            (
                CellData::Values(vec![Observed::Value(xs[xs.len() / 2])]),
                true,
            )
        }
    }
}

/// Labels naming only the parameters that differ between cells (`loss = 2%, rate = 10mbit`).
fn label_cells(cells: Vec<(BTreeMap<String, String>, CellData)>) -> Vec<(String, CellData)> {
    let varying: Vec<String> = match cells.first() {
        None => Vec::new(),
        Some((first, _)) => {
            let mut keys: std::collections::BTreeSet<String> = Default::default();
            for (c, _) in &cells {
                keys.extend(c.keys().cloned());
            }
            keys.into_iter()
                .filter(|k| cells.iter().any(|(c, _)| c.get(k) != first.get(k)))
                .collect()
        }
    };
    cells
        .into_iter()
        .map(|(c, d)| {
            let label: Vec<String> = varying
                .iter()
                .map(|k| format!("{k} = {}", c.get(k).map_or("—", String::as_str)))
                .collect();
            let label = if label.is_empty() {
                "all".to_string()
            } else {
                label.join(", ")
            };
            (label, d)
        })
        .collect()
}

/// The runs `filter` selects grouped by cell (every parameter; the repetition apart).
pub fn value_cells(
    runs: &[RunValue],
    filter: &BTreeMap<String, String>,
) -> Vec<(String, CellData)> {
    let mut cells: BTreeMap<BTreeMap<String, String>, Vec<Observed>> = BTreeMap::new();
    for r in runs
        .iter()
        .filter(|r| filter.iter().all(|(k, v)| r.params.get(k) == Some(v)))
    {
        cells.entry(r.params.clone()).or_default().push(r.value);
    }
    label_cells(
        cells
            .into_iter()
            .map(|(c, v)| (c, CellData::Values(v)))
            .collect(),
    )
}

/// Paired cells with their labels.
pub fn labelled(cells: Vec<CellPairs>) -> Vec<(String, CellData)> {
    label_cells(
        cells
            .into_iter()
            .map(|c| (c.cell, CellData::Pairs(c.pairs)))
            .collect(),
    )
}

/// The judgement of one set of units by the claim's kind.
fn judge_data(
    data: &CellData,
    unpaired: usize,
    claim: &Claim,
    better: Better,
    rule: Rule,
) -> Judgement {
    match data {
        CellData::Pairs(p) => judge::judge_paired(p, unpaired, claim, better, rule),
        CellData::Values(v) => judge::judge_values(v, claim, rule),
    }
}

/// A deterministic comparison (copies only) judged by its value against the margin: the
/// verdict the rule gives an interval that is the value itself.
fn by_value(unit: &CellData, claim: &Claim, better: Better, rule: Rule) -> Verdict {
    // Ten copies of the value: an interval of one point, with every test's n reached.
    let many = |d: &CellData| -> CellData {
        match d {
            CellData::Pairs(p) => CellData::Pairs(vec![p[0]; 64]),
            CellData::Values(v) => CellData::Values(vec![v[0]; 64]),
        }
    };
    let loose = Rule {
        min_n: 1,
        test: match rule.test {
            judge::Test::Wilcoxon => judge::Test::Sign,
            t => t,
        },
        ..rule
    };
    judge_data(&many(unit), 0, claim, better, loose).verdict
}

/// Whether a judgement is significantly toward the claim, and significantly against it.
fn direction(j: &Judgement, claim: &Claim, better: Better, rule: Rule) -> (bool, bool) {
    let significant = j.q.or(j.p).is_none_or(|q| q < rule.alpha);
    match claim {
        Claim::Better { .. } => {
            let Some(e) = &j.estimate else {
                return (false, false);
            };
            if j.deterministic {
                // Copies differ from 1 for real when they differ by more than they differ
                // among themselves.
                let r = copy_resolution(rule);
                let lower = better == Better::Lower;
                let (below, above) = (e.median < 1.0 / (1.0 + r), e.median > 1.0 + r);
                return if lower {
                    (below, above)
                } else {
                    (above, below)
                };
            }
            if !e.reaches(1.0 - rule.alpha) || !significant {
                return (false, false);
            }
            let lower = better == Better::Lower;
            (
                if lower { e.high < 1.0 } else { e.low > 1.0 },
                if lower { e.low > 1.0 } else { e.high < 1.0 },
            )
        }
        _ => (
            j.verdict == Verdict::Holds,
            matches!(j.verdict, Verdict::DoesNotHold { .. }),
        ),
    }
}

/// Judges a claim on its cells (see the module's text). `unpaired` runs count as missing.
pub fn judge_cells(
    cells: Vec<(String, CellData)>,
    unpaired: usize,
    claim: &Claim,
    better: Better,
    rule: Rule,
    scope: Scope,
) -> Judgement {
    let resolution = copy_resolution(rule);
    let Some(first) = cells.first() else {
        return judge_data(&CellData::Pairs(Vec::new()), unpaired, claim, better, rule);
    };
    let mut all = match &first.1 {
        CellData::Pairs(_) => CellData::Pairs(Vec::new()),
        CellData::Values(_) => CellData::Values(Vec::new()),
    };
    let mut units = all.clone();
    let mut copies = 0;
    let mut folded_all = true;
    let mut folded: Vec<(String, CellData, bool, CellData)> = Vec::new();
    for (label, data) in &cells {
        let (u, f) = fold_copies(data, better, resolution);
        folded_all &= f;
        let unit = u.clone();
        copies += data.len() - unit.len();
        all.extend(data);
        units.extend(&unit);
        folded.push((label.clone(), u, f, data.clone()));
    }
    let mut j = judge_data(&units, unpaired, claim, better, rule);
    // The runs folded into units still ran: they count in the failure share's base.
    j.counts.runs += copies * all.runs_per_unit();
    j.counts.copies = copies;
    let needed = rule.min_n.max(rules::fewest_informative(rule.alpha));
    let failed = j.counts.failed_share() > MAX_FAILED_SHARE;
    if folded_all && !failed && units.len() < needed {
        // Deterministic: the estimate is every run's (its interval shows how little they
        // differ), the verdict the values' against the margin.
        let estimate = judge_data(&all, unpaired, claim, better, rule).estimate;
        let verdicts: Vec<Verdict> = folded
            .iter()
            .map(|(_, u, _, _)| by_value(u, claim, better, rule))
            .collect();
        j.p = None;
        j.estimate = estimate;
        j.deterministic = true;
        j.detail = None;
        j.verdict = if verdicts.iter().all(|v| *v == verdicts[0]) {
            verdicts[0].clone()
        } else {
            Verdict::Inconclusive {
                why: "deterministic cells disagree (see the cells)".into(),
            }
        };
    }
    if cells.len() < 2 {
        return j;
    }
    // Each cell by the same rule, its minimum n what one cell can reach.
    let cell_rule = Rule {
        min_n: rule.min_n.min(rules::fewest_informative(rule.alpha)),
        ..rule
    };
    let mut judged: Vec<CellJudgement> = folded
        .iter()
        .map(|(label, u, f, data)| {
            let mut cj = if *f {
                let mut c = judge_data(data, 0, claim, better, cell_rule);
                c.p = None;
                c.detail = None;
                c.deterministic = true;
                c.verdict = by_value(u, claim, better, rule);
                c.counts.copies = data.len() - 1;
                c
            } else {
                judge_data(data, 0, claim, better, cell_rule)
            };
            cj.cells.clear();
            CellJudgement {
                cell: label.clone(),
                judgement: cj,
                against: false,
                toward: false,
            }
        })
        .collect();
    // Benjamini–Hochberg within the finding.
    let ps: Vec<Option<f64>> = judged.iter().map(|c| c.judgement.p).collect();
    for (c, q) in judged.iter_mut().zip(bh(&ps)) {
        c.judgement.q = q;
        demote_unless_q(&mut c.judgement, rule.alpha, "the finding's cells");
    }
    for c in judged.iter_mut() {
        (c.toward, c.against) = direction(&c.judgement, claim, better, rule);
    }
    let names = |pick: &dyn Fn(&CellJudgement) -> bool| -> Vec<String> {
        judged
            .iter()
            .filter(|c| pick(c))
            .map(|c| c.cell.clone())
            .collect()
    };
    match scope {
        Scope::Each => {
            let n = judged.len();
            let held = names(&|c| c.judgement.verdict == Verdict::Holds);
            let failing = names(&|c| matches!(c.judgement.verdict, Verdict::DoesNotHold { .. }));
            let all_reversed = judged
                .iter()
                .all(|c| c.judgement.verdict == (Verdict::DoesNotHold { reversed: true }));
            // The intersection–union test: every cell must be significant.
            j.p = judged
                .iter()
                .filter_map(|c| c.judgement.p)
                .fold(None, |m: Option<f64>, p| Some(m.map_or(p, |m| m.max(p))));
            j.detail = None;
            if !failed {
                j.verdict = if held.len() == n {
                    j.detail = Some(format!("holds in every one of the {n} cells"));
                    Verdict::Holds
                } else if !failing.is_empty() {
                    j.detail = Some(format!(
                        "every cell must hold; does not hold in {} of {n}: {}",
                        failing.len(),
                        failing.join("; ")
                    ));
                    Verdict::DoesNotHold {
                        reversed: all_reversed,
                    }
                } else {
                    let open = names(&|c| c.judgement.verdict != Verdict::Holds);
                    let why = format!(
                        "holds in {} of {n} cells; open in {}",
                        held.len(),
                        open.join("; ")
                    );
                    if judged
                        .iter()
                        .any(|c| matches!(c.judgement.verdict, Verdict::NotShown { .. }))
                    {
                        Verdict::NotShown { why }
                    } else {
                        Verdict::Inconclusive { why }
                    }
                };
            }
        }
        Scope::Overall => {
            let (pooled_toward, pooled_against) = direction(&j, claim, better, rule);
            let toward = names(&|c| c.toward);
            let against = names(&|c| c.against);
            let mixed = (!against.is_empty() && (pooled_toward || !toward.is_empty()))
                || (pooled_against && !toward.is_empty());
            if mixed && !failed {
                let (named, other) = if pooled_against {
                    (toward, against)
                } else {
                    (against, toward)
                };
                j.detail = Some(format!(
                    "pooled: {}; toward the claim: {}; against it: {}",
                    crate::outcome::verdict_word(&j.verdict),
                    if pooled_against {
                        named.join("; ")
                    } else {
                        other.join("; ")
                    },
                    if pooled_against {
                        other.join("; ")
                    } else {
                        named.join("; ")
                    },
                ));
                j.verdict = Verdict::Mixed { cells: named };
            }
        }
    }
    j.cells = judged;
    j
}

/// The study's multiplicity correction: Benjamini–Hochberg q values over its findings' p values,
/// reproductions and calibrations apart (and the judgements shown beside them apart again); a
/// holds or reversed needs q < α.
pub fn adjust_study(verdicts: &mut [crate::FindingVerdict]) {
    use crate::findings::Class;
    for class in [Class::Reproduction, Class::Calibration] {
        let idx: Vec<usize> = (0..verdicts.len())
            .filter(|&i| verdicts[i].class == class)
            .collect();
        let ps: Vec<Option<f64>> = idx.iter().map(|&i| verdicts[i].judgement.p).collect();
        let family = format!(
            "the study's {} {} p values",
            ps.iter().flatten().count(),
            class.name()
        );
        for (&i, q) in idx.iter().zip(bh(&ps)) {
            let v = &mut verdicts[i];
            v.judgement.q = q;
            if let Some(rule) = v.rule {
                demote_unless_q(&mut v.judgement, rule.alpha, &family);
            }
        }
        let ps: Vec<Option<f64>> = idx
            .iter()
            .map(|&i| verdicts[i].beside.as_ref().and_then(|b| b.judgement.p))
            .collect();
        let family = format!(
            "the {} judgements shown beside the study's {}s",
            ps.iter().flatten().count(),
            class.name()
        );
        for (&i, q) in idx.iter().zip(bh(&ps)) {
            let alpha = verdicts[i].rule.map_or(0.05, |r| r.alpha);
            if let Some(b) = verdicts[i].beside.as_mut() {
                b.judgement.q = q;
                demote_unless_q(&mut b.judgement, alpha, &family);
            }
        }
    }
}

/// Holds or reversed need q < α: else not shown, saying so.
pub fn demote_unless_q(j: &mut Judgement, alpha: f64, family: &str) {
    let (Some(p), Some(q)) = (j.p, j.q) else {
        return;
    };
    let significant_verdict = matches!(
        j.verdict,
        Verdict::Holds | Verdict::DoesNotHold { reversed: true }
    );
    if significant_verdict && q >= alpha {
        j.verdict = Verdict::NotShown {
            why: format!(
                "p = {} < α but q = {} ≥ α (Benjamini–Hochberg over {family})",
                p_text(p),
                p_text(q)
            ),
        };
    }
}

/// Benjamini–Hochberg q values of the p values given (None stays None): q₍ᵢ₎ = min over j ≥ i
/// of p₍ⱼ₎ · m / j, capped at 1.
pub fn bh(ps: &[Option<f64>]) -> Vec<Option<f64>> {
    let mut idx: Vec<(usize, f64)> = ps
        .iter()
        .enumerate()
        .filter_map(|(i, p)| p.map(|p| (i, p)))
        .collect();
    let m = idx.len();
    idx.sort_by(|a, b| a.1.total_cmp(&b.1));
    let mut out = vec![None; ps.len()];
    let mut running = 1.0f64;
    for (rank, &(i, p)) in idx.iter().enumerate().rev() {
        running = running.min(p * m as f64 / (rank + 1) as f64).min(1.0);
        out[i] = Some(running);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::Test;
    use Observed::*;

    const SIGN: Rule = Rule {
        test: Test::Sign,
        alpha: 0.05,
        min_n: 6,
        min_effect: 0.05,
    };

    fn better() -> Claim {
        Claim::Better {
            axis: "protocol".into(),
            a: "h3".into(),
            b: "h1".into(),
        }
    }

    fn cell(label: &str, pairs: &[(f64, f64)]) -> (String, CellData) {
        (
            label.into(),
            CellData::Pairs(pairs.iter().map(|&(a, b)| (Value(a), Value(b))).collect()),
        )
    }

    /// Reference: R's p.adjust(c(0.01, 0.04, 0.03, 0.2), "BH") = 0.04, 0.0533, 0.0533, 0.2.
    #[test]
    fn bh_matches_r() {
        let q = bh(&[Some(0.01), Some(0.04), None, Some(0.03), Some(0.2)]);
        let want = [0.04, 0.04 * 4.0 / 3.0, 0.04 * 4.0 / 3.0, 0.2];
        let got: Vec<f64> = q.iter().flatten().copied().collect();
        assert_eq!(q[2], None);
        for (g, w) in got.iter().zip([want[0], want[1], want[2], want[3]]) {
            assert!((g - w).abs() < 1e-12, "{got:?}");
        }
    }

    #[test]
    fn copies_count_once_and_a_copy_only_comparison_is_deterministic() {
        // One cell of 20 identical pairs: one unit, judged by its value with no p.
        let c = vec![cell("all", &[(6.35, 10.0); 20])];
        let j = judge_cells(c, 0, &better(), Better::Lower, SIGN, Scope::Overall);
        assert!(j.deterministic && j.p.is_none());
        assert_eq!(
            (j.verdict.clone(), j.counts.copies, j.counts.runs),
            (Verdict::Holds, 19, 40)
        );
        // Within the margin: does not hold, still without a p.
        let c = vec![cell("all", &[(9.8, 10.0); 20])];
        let j = judge_cells(c, 0, &better(), Better::Lower, SIGN, Scope::Overall);
        assert_eq!(j.verdict, Verdict::DoesNotHold { reversed: false });
        // Repetitions that differ by more than a tenth of the margin are units each.
        let pairs: Vec<(f64, f64)> = (0..10).map(|i| (6.0 + i as f64 * 0.1, 10.0)).collect();
        let j = judge_cells(
            vec![cell("all", &pairs)],
            0,
            &better(),
            Better::Lower,
            SIGN,
            Scope::Overall,
        );
        assert!(!j.deterministic);
        assert_eq!((j.counts.pairs, j.verdict), (10, Verdict::Holds));
    }

    #[test]
    fn a_cell_significantly_the_other_way_makes_a_pooled_claim_mixed() {
        let fast: Vec<(f64, f64)> = (0..10).map(|i| (5.0 + i as f64 * 0.3, 10.0)).collect();
        let slow: Vec<(f64, f64)> = (0..10).map(|i| (15.0 + i as f64 * 0.3, 10.0)).collect();
        let cells = vec![
            cell("loss = 0%", &fast),
            cell("loss = 1%", &fast),
            cell("loss = 2%", &slow),
        ];
        let j = judge_cells(
            cells.clone(),
            0,
            &better(),
            Better::Lower,
            SIGN,
            Scope::Overall,
        );
        assert_eq!(
            j.verdict,
            Verdict::Mixed {
                cells: vec!["loss = 2%".into()]
            }
        );
        assert_eq!(j.cells.len(), 3);
        assert!(j.cells[2].against && j.cells[0].toward);
        assert!(j.cells.iter().all(|c| c.judgement.q.is_some()));
        // Claimed of each cell: does not hold, naming the cell.
        let j = judge_cells(cells, 0, &better(), Better::Lower, SIGN, Scope::Each);
        assert_eq!(j.verdict, Verdict::DoesNotHold { reversed: false });
        assert!(j.detail.unwrap().contains("loss = 2%"));
        // Every cell the claimed way: holds, with the largest cell p.
        let cells = vec![cell("a", &fast), cell("b", &fast)];
        let j = judge_cells(cells, 0, &better(), Better::Lower, SIGN, Scope::Each);
        assert_eq!(j.verdict, Verdict::Holds);
        assert!((j.p.unwrap() - 2.0 / 1024.0).abs() < 1e-12);
    }
}
