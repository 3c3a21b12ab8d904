//! A finding's outcome as the outputs carry it (`verdicts.json`, `verdicts.csv`,
//! reproduction.html, the terminal line): the finding, what was tested, the judgement, and for a
//! wins claim the wins table and its decision tree.

use serde::Serialize;

use crate::judge::{Judgement, Verdict};

/// One finding's verdict, with what it rests on: the `verdicts.json` row.
#[derive(Debug, Clone, Serialize)]
pub struct FindingVerdict {
    pub study: String,
    pub id: String,
    pub source: String,
    pub claim: String,
    /// A seed's result, or a check of the testbed that holds by construction: counted apart.
    pub class: crate::findings::Class,
    pub scenario: Option<String>,
    pub metric: Option<String>,
    pub seed_value: Option<f64>,
    /// What was compared or required, in words (`h3 vs h1 on protocol`, `≥ 0.9`, `≈ 3 ± 25 %`).
    pub test_of: String,
    /// What the estimate is the median of (`h3/h1 per pair`, `plt_ms`, `share of settings`).
    pub estimate_of: String,
    pub rule: Option<crate::Rule>,
    pub judgement: Judgement,
    /// The form its runs were: `quick` or `full` (None: no runs).
    pub form: Option<String>,
    /// For a wins claim: who won each setting, and the decision tree grown from that table
    /// (Megyesi et al. 2016, Fig. 6).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wins_table: Option<Vec<crate::SettingWinners>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tree: Option<crate::Tree>,
    /// The same claim judged with other setting values (the finding's `beside`), shown beside
    /// the verdict and never counted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub beside: Option<Beside>,
    /// What the estimate is read against (the forest plot's row), None for a claim without a
    /// reference value (no protocol best everywhere) or a finding that cannot run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scale: Option<Scale>,
    /// For a finding judged once per value of a setting: which finding and value (the matrix
    /// of reproduction.html: finding × value → verdict).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per: Option<crate::findings::PerValue>,
    /// Whether the claim is of every cell or of the pooled effect (None: not judged on runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<crate::Scope>,
    /// The study's explanations of this finding, each judged ([`crate::explain`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub explanations: Vec<crate::explain::ExplanationVerdict>,
    /// Why it has no explanation, where its study says so (`[[no_explanation]]`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub no_explanation: Option<crate::explain::NoExplanation>,
}

/// What a finding's estimate is read against: the claim's reference value in the estimate's
/// unit — a threshold, a band's centre, 1 for a per-pair ratio of a comparison — and the region
/// the claim asks the estimate to lie in (None: unbounded that side).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Scale {
    pub reference: f64,
    pub claimed_low: Option<f64>,
    pub claimed_high: Option<f64>,
}

impl Scale {
    /// The scale of `claim` on a metric where lower is better or not, with the smallest effect
    /// that matters in a comparison.
    pub fn of(
        claim: &crate::judge::Claim,
        lower_is_better: bool,
        min_effect: f64,
    ) -> Option<Scale> {
        use crate::judge::Claim;
        let band = |value: f64, tolerance: f64| Scale {
            reference: value,
            claimed_low: Some(value * (1.0 - tolerance)),
            claimed_high: Some(value * (1.0 + tolerance)),
        };
        let at_least = |value: f64| Scale {
            reference: value,
            claimed_low: Some(value),
            claimed_high: None,
        };
        let at_most = |value: f64| Scale {
            reference: value,
            claimed_low: None,
            claimed_high: Some(value),
        };
        Some(match claim {
            Claim::Better { .. } if lower_is_better => at_most(1.0 - min_effect),
            Claim::Better { .. } => at_least(1.0 + min_effect),
            Claim::AtLeast { value } | Claim::RatioAtLeast { value, .. } => at_least(*value),
            Claim::AtMost { value } | Claim::RatioAtMost { value, .. } => at_most(*value),
            Claim::Approx {
                value, tolerance, ..
            }
            | Claim::Ratio {
                value, tolerance, ..
            } => band(*value, *tolerance),
            Claim::WinsShare { at_least: a, .. } => at_least(*a),
            Claim::NoBestEverywhere { .. } => return None,
        })
        .map(|s| match claim {
            // A comparison's estimate is the ratio A/B: read against no difference (1).
            Claim::Better { .. } => Scale {
                reference: 1.0,
                ..s
            },
            _ => s,
        })
    }
}

/// A finding's claim judged again with other values of settings it fixes (the built-in loader
/// beside Chromium).
#[derive(Debug, Clone, Serialize)]
pub struct Beside {
    /// The values in place of the finding's (`browser` → `builtin`).
    pub values: std::collections::BTreeMap<String, String>,
    pub judgement: Judgement,
}

impl Beside {
    /// `browser = builtin`.
    pub fn label(&self) -> String {
        self.values
            .iter()
            .map(|(k, v)| format!("{k} = {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Whether its verdict differs from `main`'s (in word: holds, reversed, …).
    pub fn disagrees_with(&self, main: &Judgement) -> bool {
        verdict_word(&self.judgement.verdict) != verdict_word(&main.verdict)
    }
}

/// A p value as tables print it: three decimals, or two significant digits below 0.001 (a p of
/// 8e-5 is not "0.000").
pub fn p_text(p: f64) -> String {
    if p < 0.001 {
        format!("{p:.1e}")
    } else {
        format!("{p:.3}")
    }
}

/// The n a verdict rests on: informative pairs (or runs) for a test with a p value, else the
/// values the interval or the count was taken over.
pub fn shown_n(j: &Judgement) -> usize {
    if j.p.is_some() || j.deterministic {
        j.counts.pairs
    } else {
        j.estimate.as_ref().map_or(j.counts.pairs, |e| e.n)
    }
}

/// The verdicts counted per class: `reproductions: 3 holds, 1 does not hold, 0 reversed, 2
/// inconclusive, 1 not runnable; calibrations: 2 holds, …` (a calibration holds by construction
/// and is never counted as a reproduction).
pub fn tally(verdicts: &[&FindingVerdict]) -> String {
    let mut parts = Vec::new();
    for (class, label) in [
        (crate::findings::Class::Reproduction, "reproductions"),
        (crate::findings::Class::Calibration, "calibrations"),
    ] {
        let mine: Vec<_> = verdicts.iter().filter(|v| v.class == class).collect();
        if mine.is_empty() {
            continue;
        }
        let count = |w: &str| {
            mine.iter()
                .filter(|v| verdict_word(&v.judgement.verdict) == w)
                .count()
        };
        parts.push(format!(
            "{label}: {} holds, {} does not hold, {} reversed, {} not shown, {} mixed, {} \
             inconclusive, {} not runnable",
            count("holds"),
            count("does not hold"),
            count("reversed"),
            count("not shown"),
            count("mixed"),
            count("inconclusive"),
            count("not runnable")
        ));
    }
    parts.join("; ")
}

/// The one word of a verdict, as tables show it.
pub fn verdict_word(v: &Verdict) -> &'static str {
    match v {
        Verdict::Holds => "holds",
        Verdict::DoesNotHold { reversed: true } => "reversed",
        Verdict::DoesNotHold { reversed: false } => "does not hold",
        Verdict::NotShown { .. } => "not shown",
        Verdict::Mixed { .. } => "mixed",
        Verdict::Inconclusive { .. } => "inconclusive",
        Verdict::NotRunnable { .. } => "not runnable",
    }
}

impl std::fmt::Display for FindingVerdict {
    /// One line: the verdict, n, p and the estimate with its interval, the claim.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let j = &self.judgement;
        write!(
            f,
            "{}/{:<16} {:<14} {:<12} n = {}",
            self.study,
            self.id,
            verdict_word(&j.verdict),
            self.class.name(),
            shown_n(j)
        )?;
        if let Some(p) = j.p {
            write!(f, ", p = {}", p_text(p))?;
        }
        if let Some(e) = &j.estimate
            && e.level >= 1.0
        {
            // A count, not an estimate (a wins claim's share of settings).
            write!(f, ", share {:.3} of {}", e.median, e.n)?;
        } else if let Some(e) = &j.estimate {
            write!(
                f,
                ", median of {} {:.3} ({:.1} % CI {:.3}–{:.3})",
                self.estimate_of,
                e.median,
                e.level * 100.0,
                e.low,
                e.high
            )?;
        }
        if let Some(d) = &j.detail {
            write!(f, ", {d}")?;
        }
        write!(f, "  {}", self.claim)?;
        if let Verdict::Inconclusive { why } | Verdict::NotRunnable { why } = &j.verdict {
            write!(f, " [{why}]")?;
        }
        if let Some(n) = &self.no_explanation {
            write!(f, "\n    explanation: {}", n.text())?;
        }
        for e in &self.explanations {
            write!(
                f,
                "\n    explanation {}: {} — with {}: {}; control ({}): {}",
                e.id,
                e.outcome.word(),
                e.setting_text(),
                brief(&e.with_setting, &self.estimate_of),
                e.control_text(),
                brief(&e.control_judgement, &self.estimate_of)
            )?;
        }
        Ok(())
    }
}

/// A judgement's estimate as tables show it: `h3/h1 per pair: 0.637 (0.636–0.637, 95.9 %)`, or
/// a count of settings; empty without one.
pub fn estimate_text(j: &Judgement, estimate_of: &str) -> String {
    match &j.estimate {
        Some(e) if e.level >= 1.0 => format!("{:.3} of {} settings", e.median, e.n),
        Some(e) => format!(
            "{estimate_of}: {:.3} ({:.3}–{:.3}, {:.1} %)",
            e.median,
            e.low,
            e.high,
            e.level * 100.0
        ),
        None => String::new(),
    }
}

/// The p column: the test's p, or `deterministic` for a comparison of copies (no p).
pub fn p_column(j: &Judgement) -> String {
    match j.p {
        Some(p) => p_text(p),
        None if j.deterministic => "deterministic".into(),
        None => String::new(),
    }
}

/// A pooled finding's cells as a Markdown table: each cell's n, p, q (within the finding),
/// estimate and verdict, and which way it goes. Empty for a finding of one cell.
pub fn cells_markdown(v: &FindingVerdict) -> String {
    let j = &v.judgement;
    if j.cells.is_empty() {
        return String::new();
    }
    let scope = match v.scope {
        Some(crate::Scope::Each) => "claimed of each cell: holds only where every cell holds",
        _ => "a pooled claim: mixed when a cell goes significantly the other way",
    };
    let mut out = format!(
        "Cells of {} ({scope}; q within the finding):\n\n| cell | n | p | q | estimate (exact CI) | verdict | way |\n|---|---:|---:|---:|---|---|---|\n",
        v.id
    );
    for c in &j.cells {
        let cj = &c.judgement;
        let way = if c.toward {
            "toward the claim"
        } else if c.against {
            "**against the claim**"
        } else {
            ""
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {way} |\n",
            c.cell.replace('|', "\\|"),
            shown_n(cj),
            p_column(cj),
            cj.q.map_or(String::new(), p_text),
            estimate_text(cj, &v.estimate_of),
            verdict_text(cj).replace('|', "\\|"),
        ));
    }
    out.push('\n');
    out
}

/// A judgement's verdict as tables show it: the word in bold, why (inconclusive, not runnable),
/// the detail, and the runs that did not count.
pub fn verdict_text(j: &Judgement) -> String {
    let mut verdict = format!("**{}**", verdict_word(&j.verdict));
    if let Verdict::Inconclusive { why }
    | Verdict::NotRunnable { why }
    | Verdict::NotShown { why } = &j.verdict
    {
        verdict.push_str(&format!(" — {why}"));
    }
    if let Verdict::Mixed { cells } = &j.verdict {
        verdict.push_str(&format!(" — the other way in {}", cells.join("; ")));
    }
    if j.deterministic {
        verdict.push_str(
            " (deterministic: the repetitions were copies, judged by their value against the margin)",
        );
    }
    if j.counts.copies > 0 && !j.deterministic {
        verdict.push_str(&format!(
            "; {} repetition{} folded as copies of their cell",
            j.counts.copies,
            if j.counts.copies == 1 { "" } else { "s" }
        ));
    }
    if let Some(d) = &j.detail {
        verdict.push_str(&format!(" ({d})"));
    }
    let c = &j.counts;
    if c.failed_runs + c.censored_runs + c.undefined_runs + c.unpaired > 0 {
        verdict.push_str(&format!(
            "; {} failed, {} censored, {} undefined, {} unpaired runs",
            c.failed_runs, c.censored_runs, c.undefined_runs, c.unpaired
        ));
    }
    verdict
}

/// For a finding left inconclusive by a whole full form, the n it would need, as a sentence —
/// an extrapolation, said as one: for a test of signs, the fewest informative pairs (or runs)
/// at which the share observed on the leading side would reach p < α; for an interval (a band, a
/// margin), the n at which the interval's half-width, shrinking as 1/√n, would fit between the
/// median and the nearest edge. None when the verdict is not inconclusive, the form is not whole,
/// or no n would do (as many on each side; a median on an edge) — and for a wins claim, whose
/// n is the repetitions per setting its rule states.
pub fn needed_n(v: &FindingVerdict) -> Option<String> {
    let j = &v.judgement;
    let Verdict::Inconclusive { why } = &j.verdict else {
        return None;
    };
    if v.form.as_deref() != Some("full") || why.contains("failed") {
        return None;
    }
    let rule = v.rule?;
    if rule.test == crate::Test::Wins {
        return None;
    }
    let c = &j.counts;
    // When ties make up half the pairs, more repetitions add ties: no extrapolation is meaningful.
    if c.pairs > 0 && 2 * c.ties >= c.pairs {
        return None;
    }
    let n = c.informative();
    let interval_bound = why.contains("interval") || why.contains("within the");
    if j.p.is_some() && !interval_bound && n > 0 {
        // A test of signs: the share on the leading side, held as n grows.
        let lead = c.a_better.max(c.a_worse) as f64 / n as f64;
        if lead <= 0.5 {
            return None;
        }
        let needed = (n..=100_000).find(|&m| {
            let k = ((lead * m as f64).ceil() as usize).min(m);
            quiclab_experiment::stats::sign_test_p(k, m - k) < rule.alpha
        })?;
        let needed = needed
            .max(rule.min_n)
            .max(crate::rules::fewest_informative(rule.alpha));
        if needed > 10 * n.max(1) {
            return Some(format!("no realistic n (more than 10× the {n} it has)"));
        }
        return Some(format!(
            "would need ≈ {needed} informative pairs or runs (has {n}) if the split it shows ({} of {n} on one side) held",
            c.a_better.max(c.a_worse)
        ));
    }
    // An interval: on the side of each edge it must clear, its reach from the median against the
    // median's distance to that edge. A median inside a band must clear both edges; outside it,
    // the nearest one.
    let e = j.estimate.as_ref()?;
    // A significant difference whose median ratio lies within 1 ± min_effect, its interval
    // reaching beyond: settled ("smaller than the difference that matters") when the interval lies
    // inside that margin, so both of the margin's edges are to clear from within, not the claim's.
    let within_margin = rule.min_effect > 0.0
        && why.contains("that matters")
        && (e.median - 1.0).abs() < rule.min_effect;
    let scale = v.scale?;
    let (claimed_low, claimed_high) = if within_margin {
        (Some(1.0 - rule.min_effect), Some(1.0 + rule.min_effect))
    } else {
        (scale.claimed_low, scale.claimed_high)
    };
    let edges: Vec<f64> = match (claimed_low, claimed_high) {
        (Some(lo), Some(hi)) if e.median > lo && e.median < hi => vec![lo, hi],
        (Some(lo), Some(hi)) => vec![if (e.median - lo).abs() < (e.median - hi).abs() {
            lo
        } else {
            hi
        }],
        (Some(x), None) | (None, Some(x)) => vec![x],
        (None, None) => return None,
    };
    let mut worst: Option<(f64, f64)> = None;
    for edge in edges {
        let reach = if e.median < edge {
            e.high - e.median
        } else {
            e.median - e.low
        };
        let distance = (e.median - edge).abs();
        if !(reach > 0.0 && distance > 0.0 && distance.is_finite()) {
            return None;
        }
        if worst.is_none_or(|(r, d)| reach / distance > r / d) {
            worst = Some((reach, distance));
        }
    }
    let (half, distance) = worst?;
    // Said as the interval's n: it can differ from the table's n column, which counts a sign
    // test's informative pairs (ties left out) where the interval holds every pair's ratio.
    let needed = ((e.n as f64) * (half / distance).powi(2)).ceil() as usize;
    if needed > 10 * e.n {
        return Some(format!(
            "no realistic n (the interval's spread would need more than 10× the {} it has)",
            e.n
        ));
    }
    Some(format!(
        "would need the interval's n ≈ {} (it has {}) to clear the edge, if the spread it shows held (it reaches {half:.3} from the median, {:.3} from the edge)",
        needed.max(e.n + 1),
        e.n,
        distance
    ))
}

/// A judgement in a table cell: its verdict, n, p, q and estimate.
pub fn brief(j: &Judgement, estimate_of: &str) -> String {
    let mut t = format!("{}, n = {}", verdict_text(j), shown_n(j));
    if let Some(p) = j.p {
        t.push_str(&format!(", p = {}", p_text(p)));
    }
    if let Some(q) = j.q {
        t.push_str(&format!(", q = {}", p_text(q)));
    }
    let e = estimate_text(j, estimate_of);
    if !e.is_empty() {
        t.push_str(&format!(", {e}"));
    }
    t
}

/// Whether a finding's verdict asks for an explanation: a reproduction that does not hold, is
/// reversed or mixed.
pub fn wants_explanation(v: &FindingVerdict) -> bool {
    v.class == crate::findings::Class::Reproduction
        && matches!(
            v.judgement.verdict,
            Verdict::DoesNotHold { .. } | Verdict::Mixed { .. }
        )
}

/// A study's explanations (issue 59): every reproduction that does not hold, is reversed or
/// mixed, and every finding with an explanation, each with the explanations tested and their
/// outcomes (a failing finding without one says so, and why where its study's
/// `[[no_explanation]]` does). Empty when there is none of either.
pub fn explanations_markdown(verdicts: &[&FindingVerdict]) -> String {
    let rows: Vec<&&FindingVerdict> = verdicts
        .iter()
        .filter(|v| wants_explanation(v) || !v.explanations.is_empty())
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    let cell = |s: &str| s.replace('|', "\\|");
    let mut out = String::from(
        "Explanations: each finding that does not hold, is reversed or mixed, with the \
         explanations tested — the finding's claim judged again with the setting that recreates \
         the seed's condition and on the control (today's values), in the explanation's scenario \
         (`quiclab reproduce STUDY --explain`):\n\n\
         | finding | verdict today | explanation | hypothesis | setting (control) | with the setting | control | outcome |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    for v in rows {
        let today = verdict_word(&v.judgement.verdict);
        if v.explanations.is_empty() {
            out.push_str(&format!(
                "| {} | {today} | {} | | | | | |\n",
                cell(&v.id),
                v.no_explanation
                    .as_ref()
                    .map_or_else(|| "none tested yet".to_string(), |n| cell(&n.text()))
            ));
        }
        for e in &v.explanations {
            let form = match e.form.as_deref() {
                Some("full") | None => String::new(),
                Some(f) => format!(" ({f})"),
            };
            out.push_str(&format!(
                "| {} | {today} | {} in {}{form} | {} | {} ({}) | {} | {} | **{}**{} |\n",
                cell(&v.id),
                cell(&e.id),
                cell(&e.scenario),
                cell(&e.hypothesis),
                cell(&e.setting_text()),
                cell(&e.control_text()),
                cell(&brief(&e.with_setting, &v.estimate_of)),
                cell(&brief(&e.control_judgement, &v.estimate_of)),
                e.outcome.word(),
                match &e.outcome {
                    crate::explain::Outcome::Inconclusive { why } => format!(": {}", cell(why)),
                    _ => String::new(),
                }
            ));
        }
    }
    out.push('\n');
    out
}

/// The verdicts as Markdown tables, one per study (`verdicts.md`; docs/reproductions.md pastes
/// them): finding, claim, metric, what was tested, n, p, the estimate with its interval, the
/// seed's number, the verdict and why.
pub fn markdown(verdicts: &[FindingVerdict]) -> String {
    let mut out = String::new();
    let mut studies: Vec<&str> = Vec::new();
    for v in verdicts {
        if !studies.contains(&v.study.as_str()) {
            studies.push(&v.study);
        }
    }
    let cell = |s: &str| s.replace('|', "\\|");
    for study in studies {
        let mine: Vec<&FindingVerdict> = verdicts.iter().filter(|v| v.study == study).collect();
        let with_beside = mine.iter().any(|v| v.beside.is_some());
        out.push_str(&format!("#### {study}: {}\n\n", tally(&mine)));
        out.push_str(
            "| finding | class | claim | metric | judged as | form | n | p | q | estimate (exact CI) | seed | verdict |",
        );
        out.push_str(if with_beside {
            " beside it (not counted) |\n|---|---|---|---|---|---|---:|---:|---:|---|---|---|---|\n"
        } else {
            "\n|---|---|---|---|---|---|---:|---:|---:|---|---|---|\n"
        });
        for &v in &mine {
            let j = &v.judgement;
            let mut row = format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                cell(&v.id),
                v.class.name(),
                cell(&v.claim),
                cell(v.metric.as_deref().unwrap_or("")),
                cell(&v.test_of),
                cell(v.form.as_deref().unwrap_or("")),
                shown_n(j),
                p_column(j),
                j.q.map_or(String::new(), p_text),
                estimate_text(j, &v.estimate_of),
                v.seed_value.map_or(String::new(), |x| x.to_string()),
                cell(&match needed_n(v) {
                    Some(needed) => format!("{}; {needed}", verdict_text(j)),
                    None => verdict_text(j),
                }),
            );
            if with_beside {
                let text = v.beside.as_ref().map_or(String::new(), |b| {
                    let mut t = format!("{}: {}", b.label(), brief(&b.judgement, &v.estimate_of));
                    if b.disagrees_with(j) {
                        t.push_str(" — **disagrees**; the finding's verdict stands");
                    }
                    t
                });
                row.push_str(&format!(" {} |", cell(&text)));
            }
            out.push_str(&row);
            out.push('\n');
        }
        out.push('\n');
        out.push_str(&explanations_markdown(&mine));
        for v in verdicts.iter().filter(|v| v.study == study) {
            out.push_str(&cells_markdown(v));
        }
        // Findings judged on the same wins table (e.g. 001-1a and 001-1g) grow the same tree:
        // it is printed once, naming them all.
        let mut trees: Vec<(String, Vec<&str>)> = Vec::new();
        for v in verdicts.iter().filter(|v| v.study == study) {
            if let Some(t) = &v.tree {
                let t = t.to_string();
                match trees.iter_mut().find(|(u, _)| *u == t) {
                    Some((_, ids)) => ids.push(&v.id),
                    None => trees.push((t, vec![&v.id])),
                }
            }
        }
        for (t, ids) in trees {
            out.push_str(&format!(
                "Decision tree of {} (Megyesi et al.'s Fig. 6 from these runs):\n\n```\n{t}```\n\n",
                ids.join(" and ")
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::Tree;

    fn verdict(id: &str, tree: Option<Tree>) -> FindingVerdict {
        FindingVerdict {
            study: "megyesi2016".into(),
            id: id.into(),
            source: "Fig. 6".into(),
            claim: format!("claim of {id}"),
            class: crate::findings::Class::Reproduction,
            scenario: Some("megyesi2016".into()),
            metric: Some("plt_ms".into()),
            seed_value: None,
            test_of: "wins".into(),
            estimate_of: String::new(),
            rule: None,
            judgement: Judgement::bare(Verdict::Inconclusive { why: "n".into() }),
            form: Some("quick".into()),
            wins_table: None,
            tree,
            beside: None,
            scale: None,
            per: None,
            scope: None,
            explanations: Vec::new(),
            no_explanation: None,
        }
    }

    #[test]
    fn an_inconclusive_full_form_says_the_n_it_would_need() {
        let rule = crate::Rule {
            test: crate::Test::Sign,
            alpha: 0.05,
            min_n: 6,
            min_effect: 0.05,
        };
        let mut v = verdict("x", None);
        v.form = Some("full".into());
        v.rule = Some(rule);
        v.judgement.p = Some(0.115);
        v.judgement.counts.a_better = 14;
        v.judgement.counts.a_worse = 6;
        v.judgement.verdict = Verdict::Inconclusive {
            why: "fewer informative pairs than the rule needs".into(),
        };
        // 14 of 20 (70 %) on one side: the first m at which ⌈0.7 m⌉ of m gives p < 0.05.
        let text = needed_n(&v).unwrap();
        let m: usize = text
            .trim_start_matches("would need ≈ ")
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let k = (0.7 * m as f64).ceil() as usize;
        assert!(
            quiclab_experiment::stats::sign_test_p(k, m - k) < 0.05,
            "{text}"
        );
        let k1 = (0.7 * (m - 1) as f64).ceil() as usize;
        assert!(
            quiclab_experiment::stats::sign_test_p(k1, m - 1 - k1) >= 0.05,
            "{text}"
        );
        // Half on each side: no n would do. A quick form or part: not a full form's verdict.
        v.judgement.counts.a_worse = 14;
        assert_eq!(needed_n(&v), None);
        v.judgement.counts.a_worse = 6;
        v.form = Some("quick".into());
        assert_eq!(needed_n(&v), None);
        // An interval straddling a band edge: the half-width scaled as 1/√n.
        v.form = Some("full".into());
        v.judgement.p = None;
        v.judgement.verdict = Verdict::Inconclusive {
            why: "the 97.9 % interval overlaps the band".into(),
        };
        v.judgement.estimate = Some(crate::rules::RatioInterval {
            median: 1.0,
            low: 0.85,
            high: 1.15,
            level: 0.979,
            n: 10,
        });
        v.scale = Some(Scale {
            reference: 1.0,
            claimed_low: Some(0.9),
            claimed_high: Some(1.1),
        });
        // Half-width 0.15 against 0.1 to the edges: 10 × 1.5² = 22.5 → 23.
        assert!(
            needed_n(&v)
                .unwrap()
                .starts_with("would need the interval's n ≈ 23 (it has 10)"),
            "{:?}",
            needed_n(&v)
        );
        // Significant, its median within the 5 % that matters, its interval reaching beyond: the
        // margin 0.95–1.05 is what the interval must fit in, not the claimed side (< 0.95; which
        // it already clears). Median 1.021, high 1.100: 0.079 against 0.029 to 1.05, n = 24 →
        // 24 × (0.079 / 0.029)² = 178.1 → 179.
        v.judgement.p = Some(5.6e-6);
        v.judgement.verdict = Verdict::Inconclusive {
            why: "significant (p = 5.6e-6) but the median ratio 1.021 is within the 5 % that \
                  matters (its interval 1.011–1.100 reaches beyond it)"
                .into(),
        };
        v.judgement.estimate = Some(crate::rules::RatioInterval {
            median: 1.021,
            low: 1.011,
            high: 1.100,
            level: 0.977,
            n: 24,
        });
        v.scale = Some(Scale {
            reference: 1.0,
            claimed_low: None,
            claimed_high: Some(0.95),
        });
        let text = needed_n(&v).unwrap();
        assert!(
            text.starts_with("would need the interval's n ≈ 179 (it has 24)")
                && text.contains("0.079 from the median, 0.029 from the edge"),
            "{text}"
        );
    }

    fn leaf(label: &str) -> Tree {
        Tree::Leaf {
            label: label.into(),
            counts: [(label.to_string(), 2)].into_iter().collect(),
        }
    }

    #[test]
    fn findings_on_one_wins_table_print_its_tree_once() {
        let same = Tree::Split {
            param: "rtt".into(),
            branches: vec![("18ms".into(), leaf("h1")), ("218ms".into(), leaf("h3"))],
        };
        let md = markdown(&[
            verdict("001-1a", Some(same.clone())),
            verdict("001-1g", Some(same)),
            verdict("001-2", Some(leaf("h2"))),
            verdict("001-3", None),
        ]);
        assert_eq!(md.matches("Decision tree of").count(), 2, "{md}");
        assert!(md.contains("Decision tree of 001-1a and 001-1g ("), "{md}");
        assert!(md.contains("Decision tree of 001-2 ("), "{md}");
        assert_eq!(md.matches("rtt = 218ms → h3 (h3 2)").count(), 1, "{md}");
        // Every finding still has its own row.
        for id in ["001-1a", "001-1g", "001-2", "001-3"] {
            assert!(md.contains(&format!("| {id} |")), "{id}: {md}");
        }
    }
}
