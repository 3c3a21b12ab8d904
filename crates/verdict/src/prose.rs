//! The "Reading the verdicts" sentences, generated from the verdicts so that no sentence can
//! invert a direction or quote a number the evidence does not hold: per finding, what the
//! estimate says in words (which side was lower or higher, by how much), n, p, q, and how the
//! cells split. Hand-written context stays beside them in the docs.

use crate::judge::{Judgement, Verdict};
use crate::outcome::{FindingVerdict, p_text, shown_n, verdict_word};

/// The sides and metric of a comparison in words: `h3's plt_ms was 8.3 % lower than h1's`.
fn direction_words(a: &str, b: &str, metric: &str, ratio: f64) -> String {
    if !ratio.is_finite() {
        return format!("{a}'s {metric} had no finite ratio to {b}'s");
    }
    if ratio == 1.0 {
        return format!("{a}'s {metric} was equal to {b}'s (median per-pair ratio 1)");
    }
    let (word, share) = if ratio < 1.0 {
        ("lower", 1.0 - ratio)
    } else {
        ("higher", ratio - 1.0)
    };
    format!(
        "{a}'s {metric} was {:.1} % {word} than {b}'s (median per-pair ratio {ratio:.3})",
        share * 100.0
    )
}

/// n, p and q as a parenthesis: `n = 30, p = 0.002, q = 0.004`, or `deterministic`.
fn stats(j: &Judgement) -> String {
    let mut parts = vec![format!("n = {}", shown_n(j))];
    match (j.p, j.deterministic) {
        (Some(p), _) => parts.push(format!("p = {}", p_text(p))),
        (None, true) => parts.push("deterministic: copies, no p".into()),
        _ => {}
    }
    if let Some(q) = j.q {
        parts.push(format!("q = {}", p_text(q)));
    }
    if let Some(e) = &j.estimate
        && e.level < 1.0
    {
        parts.push(format!(
            "exact {:.1} % interval {:.3}–{:.3}",
            e.level * 100.0,
            e.low,
            e.high
        ));
    }
    parts.join(", ")
}

/// How the cells split: `toward the claim in 4 of 6 cells (…); against it in 1 (…)`.
fn cells_words(j: &Judgement) -> Option<String> {
    if j.cells.is_empty() {
        return None;
    }
    let n = j.cells.len();
    let toward: Vec<&str> = j
        .cells
        .iter()
        .filter(|c| c.toward)
        .map(|c| c.cell.as_str())
        .collect();
    let against: Vec<&str> = j
        .cells
        .iter()
        .filter(|c| c.against)
        .map(|c| c.cell.as_str())
        .collect();
    let mut s = format!(
        "by cell: significantly toward the claim in {} of {n}",
        toward.len()
    );
    if !toward.is_empty() && toward.len() < n {
        s.push_str(&format!(" ({})", toward.join("; ")));
    }
    s.push_str(&format!(", against it in {}", against.len()));
    if !against.is_empty() {
        s.push_str(&format!(" ({})", against.join("; ")));
    }
    Some(s)
}

/// One finding's sentence (a Markdown list item).
pub fn sentence(v: &FindingVerdict) -> String {
    let j = &v.judgement;
    let metric = v.metric.as_deref().unwrap_or("the metric");
    let word = verdict_word(&j.verdict);
    let mut s = format!("- **{}** — **{word}**", v.id);
    if let Verdict::NotRunnable { why } = &j.verdict {
        s.push_str(&format!(": {why}.\n"));
        return s;
    }
    let what = match (&v.rule, j.estimate.as_ref()) {
        (_, None) => None,
        (_, Some(e)) if e.level >= 1.0 => Some(format!(
            "{:.3} of {} settings by Megyesi et al.'s rule",
            e.median, e.n
        )),
        (_, Some(e)) => Some(match claim_sides(v) {
            Some((a, b)) => direction_words(a, b, metric, e.median),
            None => format!("the median {metric} was {:.3}", e.median),
        }),
    };
    if let Some(w) = what {
        s.push_str(&format!(": {w}"));
    }
    s.push_str(&format!(" ({})", stats(j)));
    if let Some(c) = cells_words(j) {
        s.push_str(&format!("; {c}"));
    }
    if let Some(seed) = v.seed_value {
        s.push_str(&format!("; the seed's number: {seed}"));
    }
    for e in &v.explanations {
        s.push_str(&format!(
            "; with {} ({}) the claim {} ({}), on the control {} ({}): **{}**",
            e.setting_text(),
            e.id,
            verdict_word(&e.with_setting.verdict),
            stats(&e.with_setting),
            verdict_word(&e.control_judgement.verdict),
            stats(&e.control_judgement),
            e.outcome.word()
        ));
    }
    if let Some(n) = &v.no_explanation {
        s.push_str(&format!("; explanation: {}", n.text()));
    }
    s.push_str(".\n");
    s
}

/// The compared sides of a paired finding, from its `test_of` (`h3 vs h1 on protocol`,
/// `h3/h1 on players ≥ 0.95`).
fn claim_sides(v: &FindingVerdict) -> Option<(&str, &str)> {
    let est = v.estimate_of.strip_suffix(" per pair")?;
    // `a/b`, where a side may itself hold a slash (`h2/4`): split where test_of says " vs ".
    if let Some((a, rest)) = v.test_of.split_once(" vs ") {
        let b = rest.split(" on ").next()?;
        return Some((a, b));
    }
    let (a, b) = est.split_once('/')?;
    Some((a, b))
}

/// The sentences of a study's reproductions, in file order.
pub fn reading(study: &str, verdicts: &[FindingVerdict]) -> String {
    let mut out = String::new();
    for v in verdicts
        .iter()
        .filter(|v| v.study == study && v.class == crate::findings::Class::Reproduction)
    {
        out.push_str(&sentence(v));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn direction_words_follow_the_ratio_never_the_claim() {
        assert_eq!(
            direction_words("h2", "h3", "plt_ms", 1.015),
            "h2's plt_ms was 1.5 % higher than h3's (median per-pair ratio 1.015)"
        );
        assert!(direction_words("h3", "h1", "plt_ms", 0.9).contains("10.0 % lower"));
        assert!(direction_words("h3", "h1", "x", 1.0).contains("equal"));
    }
}
