//! The forest plot of a study's reproduction (reproduction.html, docs/figures): one row per
//! finding — quiclab's estimate (the median, a dot) and its exact interval (a bar), read against
//! the claim. Findings measure different things (a per-pair ratio, a share, a time), so every
//! row is divided by its claim's reference value (a threshold, a band's centre, 1 for a per-pair
//! ratio) and all share one log axis: the claimed region is shaded, the seed's own number is a
//! hollow diamond, the colour is the verdict's. A finding judged beside another setting (the
//! built-in loader beside Chromium) has that estimate as a grey ring under its own. Calibrations
//! come after the reproductions, apart. Pure: SVG text from the verdicts.

use std::fmt::Write as _;

use quiclab_verdict::findings::Class;
use quiclab_verdict::{FindingVerdict, Verdict, verdict_word};

use crate::html::esc;

const WIDTH: f64 = 980.0;
const LABEL_W: f64 = 170.0;
const PLOT_X: f64 = 180.0;
const PLOT_W: f64 = 480.0;
const ROW_H: f64 = 20.0;
const TOP: f64 = 46.0;
/// The axis spans 2^-SPAN … 2^SPAN times the reference.
const SPAN: f64 = 3.0;

/// The colour of a verdict.
pub fn colour(v: &Verdict) -> &'static str {
    match v {
        Verdict::Holds => "#2e7d32",
        Verdict::DoesNotHold { reversed: false } => "#c62828",
        Verdict::DoesNotHold { reversed: true } => "#6a1b9a",
        Verdict::NotShown { .. } => "#90a4ae",
        Verdict::Mixed { .. } => "#ef6c00",
        Verdict::Inconclusive { .. } => "#e0a000",
        Verdict::NotRunnable { .. } => "#9e9e9e",
    }
}

/// The x of `ratio` (a value divided by its reference), clamped to the axis; and whether it was
/// clamped (drawn as an arrow at the edge).
fn x_of(ratio: f64) -> (f64, bool) {
    let l = if ratio > 0.0 {
        ratio.log2()
    } else {
        f64::NEG_INFINITY
    };
    let clamped = l.clamp(-SPAN, SPAN);
    (
        PLOT_X + (clamped + SPAN) / (2.0 * SPAN) * PLOT_W,
        l.is_nan() || clamped != l,
    )
}

/// The forest plot of `study`'s findings among `verdicts`, as SVG (empty when it has none).
pub fn forest_svg(study: &str, verdicts: &[FindingVerdict]) -> String {
    let mine: Vec<&FindingVerdict> = verdicts.iter().filter(|v| v.study == study).collect();
    if mine.is_empty() {
        return String::new();
    }
    let reproductions: Vec<&&FindingVerdict> = mine
        .iter()
        .filter(|v| v.class == Class::Reproduction)
        .collect();
    let calibrations: Vec<&&FindingVerdict> = mine
        .iter()
        .filter(|v| v.class == Class::Calibration)
        .collect();
    let rows = reproductions.len() + calibrations.len() + 2;
    let height = TOP + rows as f64 * ROW_H + 50.0;
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height}\" \
         viewBox=\"0 0 {WIDTH} {height}\" font-family=\"DejaVu Sans, sans-serif\" font-size=\"11\">\n\
         <rect width=\"{WIDTH}\" height=\"{height}\" fill=\"white\"/>\n\
         <text x=\"10\" y=\"18\" font-size=\"14\" font-weight=\"bold\">{}: quiclab's estimate against each claim</text>\n\
         <text x=\"10\" y=\"34\" fill=\"#555\">median (dot) and exact interval (bar) ÷ the claim's reference; ticks: each cell's median; shaded: what the claim asks; ◇ the seed's number; ○ beside it (not counted)</text>\n",
        esc(study)
    );
    let mut y = TOP;
    for (title, group) in [
        ("reproductions", &reproductions),
        ("calibrations", &calibrations),
    ] {
        if group.is_empty() {
            continue;
        }
        let _ = writeln!(
            s,
            "<text x=\"10\" y=\"{:.1}\" font-weight=\"bold\" fill=\"#333\">{title}</text>",
            y + 14.0
        );
        y += ROW_H;
        for v in group.iter() {
            row(&mut s, v, y);
            y += ROW_H;
        }
    }
    // The axis: ticks at powers of two of the reference, 1 marked.
    let _ = writeln!(
        s,
        "<line x1=\"{PLOT_X}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"#333\"/>",
        PLOT_X + PLOT_W
    );
    for k in -(SPAN as i32)..=(SPAN as i32) {
        let (x, _) = x_of(2f64.powi(k));
        let label = match k {
            0 => "1".to_string(),
            k if k > 0 => format!("{}", 1 << k),
            k => format!("1/{}", 1 << -k),
        };
        let _ = writeln!(
            s,
            "<line x1=\"{x:.1}\" y1=\"{y:.1}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"#333\"/>\
             <text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{label}</text>",
            y + 4.0,
            y + 16.0
        );
    }
    let _ = writeln!(
        s,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#555\">estimate ÷ the claim's \
         reference (log scale; beyond the axis: an arrow at its end)</text>",
        PLOT_X + PLOT_W / 2.0,
        y + 32.0
    );
    // The reference line over every row.
    let (x1, _) = x_of(1.0);
    let _ = writeln!(
        s,
        "<line x1=\"{x1:.1}\" y1=\"{TOP:.1}\" x2=\"{x1:.1}\" y2=\"{y:.1}\" stroke=\"#888\" stroke-dasharray=\"3,3\"/>"
    );
    s.push_str("</svg>\n");
    s
}

fn row(s: &mut String, v: &FindingVerdict, y: f64) {
    let j = &v.judgement;
    let mid = y + ROW_H / 2.0;
    let c = colour(&j.verdict);
    let _ = writeln!(
        s,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
        LABEL_W,
        mid + 4.0,
        esc(&v.id)
    );
    let mut word = verdict_word(&j.verdict).to_string();
    if let Some(b) = &v.beside {
        let _ = write!(
            word,
            " (beside: {}{})",
            verdict_word(&b.judgement.verdict),
            if b.disagrees_with(j) {
                ", disagrees"
            } else {
                ""
            }
        );
    }
    let _ = writeln!(
        s,
        "<text x=\"{:.1}\" y=\"{:.1}\" fill=\"{c}\" font-weight=\"bold\">{}</text>",
        PLOT_X + PLOT_W + 14.0,
        mid + 4.0,
        esc(&word)
    );
    let Some(scale) = v.scale else {
        return;
    };
    if !(scale.reference.is_finite() && scale.reference > 0.0) {
        return;
    }
    let r = scale.reference;
    // The claimed region.
    let lo = scale.claimed_low.map_or(PLOT_X, |l| x_of(l / r).0);
    let hi = scale
        .claimed_high
        .map_or(PLOT_X + PLOT_W, |h| x_of(h / r).0);
    if hi > lo {
        let _ = writeln!(
            s,
            "<rect x=\"{lo:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"#dbe9f6\"/>",
            y + 2.0,
            hi - lo,
            ROW_H - 4.0
        );
    }
    if let Some(seed) = v.seed_value.filter(|x| x.is_finite()) {
        let (x, _) = x_of(seed / r);
        let _ = writeln!(
            s,
            "<path d=\"M{x:.1},{:.1} l5,5 l-5,5 l-5,-5 z\" fill=\"none\" stroke=\"#000\"/>",
            mid - 5.0
        );
    }
    if let Some(b) = &v.beside
        && let Some(e) = &b.judgement.estimate
    {
        interval(s, e, r, mid + 5.0, "#999", false);
    }
    // Each cell's median: a short tick in its verdict's colour, under the pooled estimate.
    for cell in &j.cells {
        if let Some(e) = &cell.judgement.estimate
            && e.median.is_finite()
            && e.level < 1.0
        {
            let (x, _) = x_of(e.median / r);
            let _ = writeln!(
                s,
                "<line x1=\"{x:.1}\" y1=\"{:.1}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"{}\" stroke-width=\"1.5\"><title>{}: {}</title></line>",
                mid + 3.0,
                mid + 8.0,
                colour(&cell.judgement.verdict),
                esc(&cell.cell),
                verdict_word(&cell.judgement.verdict)
            );
        }
    }
    if let Some(e) = &j.estimate {
        interval(s, e, r, mid, c, true);
    }
}

/// An estimate's interval (unless a count) and median at height `y`.
fn interval(
    s: &mut String,
    e: &quiclab_verdict::rules::RatioInterval,
    reference: f64,
    y: f64,
    colour: &str,
    filled: bool,
) {
    if e.level < 1.0 && e.low.is_finite() && e.high.is_finite() {
        let (a, _) = x_of(e.low / reference);
        let (b, _) = x_of(e.high / reference);
        let _ = writeln!(
            s,
            "<line x1=\"{a:.1}\" y1=\"{y:.1}\" x2=\"{b:.1}\" y2=\"{y:.1}\" stroke=\"{colour}\" stroke-width=\"{}\"/>",
            if filled { 2 } else { 1 }
        );
    }
    if !e.median.is_finite() {
        return;
    }
    let (x, clamped) = x_of(e.median / reference);
    if clamped {
        // Off the axis: an arrow at the end it points past.
        let dir = if x <= PLOT_X { -1.0 } else { 1.0 };
        let _ = writeln!(
            s,
            "<path d=\"M{x:.1},{:.1} l{:.1},4 l{:.1},4 z\" fill=\"{colour}\"/>",
            y - 4.0,
            dir * 7.0,
            -dir * 7.0
        );
    } else {
        let _ = writeln!(
            s,
            "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"{}\" fill=\"{}\" stroke=\"{colour}\"/>",
            if filled { 4 } else { 3 },
            if filled { colour } else { "none" }
        );
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use quiclab_verdict::judge::Judgement;
    use quiclab_verdict::outcome::Scale;

    pub(crate) fn finding(id: &str, class: Class, verdict: Verdict, median: f64) -> FindingVerdict {
        let mut judgement = Judgement::bare(verdict);
        judgement.estimate = Some(quiclab_verdict::rules::RatioInterval {
            median,
            low: median * 0.9,
            high: median * 1.1,
            level: 0.979,
            n: 10,
        });
        FindingVerdict {
            study: "s".into(),
            id: id.into(),
            source: String::new(),
            claim: String::new(),
            class,
            scenario: Some("sc".into()),
            metric: Some("plt_ms".into()),
            seed_value: Some(0.5),
            test_of: String::new(),
            estimate_of: "h3/h1 per pair".into(),
            rule: None,
            judgement,
            form: Some("full".into()),
            wins_table: None,
            tree: None,
            beside: None,
            scale: Some(Scale {
                reference: 1.0,
                claimed_low: None,
                claimed_high: Some(0.95),
            }),
            per: None,
            scope: None,
            explanations: Vec::new(),
            no_explanation: None,
        }
    }

    #[test]
    fn every_finding_is_a_row_coloured_by_its_verdict_and_calibrations_come_apart() {
        let v = vec![
            finding("a-1", Class::Reproduction, Verdict::Holds, 0.6),
            finding(
                "a-2",
                Class::Reproduction,
                Verdict::DoesNotHold { reversed: true },
                1.3,
            ),
            finding("c-1", Class::Calibration, Verdict::Holds, 1000.0),
        ];
        let svg = forest_svg("s", &v);
        for id in ["a-1", "a-2", "c-1", "reproductions", "calibrations"] {
            assert!(svg.contains(&format!(">{id}</text>")), "{id}: {svg}");
        }
        assert!(svg.find(">a-2<").unwrap() < svg.find(">calibrations<").unwrap());
        assert!(svg.contains("#2e7d32") && svg.contains("#6a1b9a"));
        // 0.6 of the reference lies left of 1, 1.3 right of it; 1000 is past the axis: an arrow.
        let x1 = x_of(1.0).0;
        assert!(x_of(0.6).0 < x1 && x_of(1.3).0 > x1);
        assert!(x_of(1000.0).1 && x_of(0.0).1 && !x_of(0.6).1);
        assert_eq!(svg.matches("<circle").count(), 2, "{svg}");
        // Drawing is pure: the same verdicts, the same bytes.
        assert_eq!(svg, forest_svg("s", &v));
        assert!(forest_svg("other", &v).is_empty());
    }
}
