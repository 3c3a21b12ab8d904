//! The parts of docs/reproductions.md and README.md that are generated from the committed
//! evidence, never pasted: per study the runs judged, the verdict table and its forest plot, and
//! the summary of counts. Each lives between two marker lines in its file; [`replace_between`]
//! puts a new text there, and a test in the suite regenerates every part from `evidence/` and
//! fails when a file differs (crates/runner/tests/evidence_docs.rs).

use std::fmt::Write as _;

use quiclab_verdict::findings::Class;
use quiclab_verdict::{FindingVerdict, Study, Verdict, verdict_word};

use crate::reproduction::PackScenario;

/// The marker lines of a generated part named `name`.
pub fn markers(name: &str) -> (String, String) {
    (
        format!("<!-- generated: {name} (from evidence/; edit nothing between these lines) -->"),
        format!("<!-- end of generated: {name} -->"),
    )
}

/// `text` with what lies between the markers of `name` replaced by `part`; None when the
/// markers are not there (once each, in order).
pub fn replace_between(text: &str, name: &str, part: &str) -> Option<String> {
    let (begin, end) = markers(name);
    let b = text.find(&begin)?;
    let e = text[b..].find(&end)? + b;
    if text.matches(&begin).count() != 1 || text.matches(&end).count() != 1 {
        return None;
    }
    Some(format!("{}{begin}\n{part}{}", &text[..b], &text[e..]))
}

/// Whether a finding has a full-form verdict: judged on a whole full form (a part, a quick form
/// or no runs leave it "no full form yet").
fn full_form(v: &FindingVerdict) -> bool {
    v.form
        .as_deref()
        .is_some_and(|f| f == "full" || f == "full, from another version of the scenario file")
}

/// The column a finding counts in: its verdict, or `no full form yet` without a whole full form.
pub fn summary_word(v: &FindingVerdict) -> &'static str {
    match &v.judgement.verdict {
        Verdict::NotRunnable { .. } => "not runnable",
        _ if !full_form(v) => "no full form yet",
        other => verdict_word(other),
    }
}

/// The columns of the summary, in order.
pub const COLUMNS: [&str; 8] = [
    "holds",
    "does not hold",
    "reversed",
    "not shown",
    "mixed",
    "inconclusive",
    "no full form yet",
    "not runnable",
];

/// One row of the summary: a study's findings of one class, counted per [`COLUMNS`].
pub struct SummaryRow<'a> {
    pub study: &'a str,
    pub class: Class,
    pub findings: usize,
    pub counts: [usize; 8],
    /// Findings with an explanation whose outcome is explained (issue 59).
    pub explained: usize,
}

/// The summary's rows: per study and class (reproductions and calibrations apart, a class
/// without findings left out), how many findings hold, do not hold, are reversed or
/// inconclusive on a full form, have no full form yet, or cannot run.
pub fn summary_rows<'a>(studies: &'a [Study], verdicts: &[FindingVerdict]) -> Vec<SummaryRow<'a>> {
    let mut rows = Vec::new();
    for s in studies {
        for class in [Class::Reproduction, Class::Calibration] {
            let mine: Vec<&FindingVerdict> = verdicts
                .iter()
                .filter(|v| v.study == s.name && v.class == class)
                .collect();
            if mine.is_empty() {
                continue;
            }
            let counts = COLUMNS.map(|c| mine.iter().filter(|v| summary_word(v) == c).count());
            let explained = mine
                .iter()
                .filter(|v| {
                    v.explanations
                        .iter()
                        .any(|e| e.outcome == quiclab_verdict::explain::Outcome::Explained)
                })
                .count();
            rows.push(SummaryRow {
                study: &s.name,
                class,
                findings: mine.len(),
                counts,
                explained,
            });
        }
    }
    rows
}

/// The summary as a Markdown table ([`summary_rows`]).
pub fn summary(studies: &[Study], verdicts: &[FindingVerdict]) -> String {
    let mut t = String::from("| study | class | findings |");
    for c in COLUMNS {
        let _ = write!(t, " {c} |");
    }
    t.push_str(" explained |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for r in summary_rows(studies, verdicts) {
        let _ = write!(t, "| {} | {}s | {} |", r.study, r.class.name(), r.findings);
        for n in r.counts {
            let _ = write!(t, " {n} |");
        }
        let _ = writeln!(t, " {} |", r.explained);
    }
    t
}

/// Per study: where its forest plot is, the runs judged (scenario, form, runs by status, the
/// sessions' dates, commits, machines, Chromium), and the verdict table.
pub fn verdict_sections(
    studies: &[Study],
    verdicts: &[FindingVerdict],
    packs: &[PackScenario],
    figure_of: &dyn Fn(&str) -> String,
) -> String {
    let mut out = String::new();
    for s in studies {
        let mine: Vec<FindingVerdict> = verdicts
            .iter()
            .filter(|v| v.study == s.name)
            .cloned()
            .collect();
        if mine.is_empty() {
            continue;
        }
        let _ = writeln!(out, "### {}\n\n{}\n", s.name, s.title);
        let _ = writeln!(
            out,
            "![{0}: forest plot]({1})\n",
            s.name,
            figure_of(&s.name)
        );
        let judged: Vec<&PackScenario> = packs.iter().filter(|p| p.study == s.name).collect();
        if judged.is_empty() {
            out.push_str("No evidence of this study is committed yet: no runnable finding has a full form yet.\n\n");
        } else {
            out.push_str(
                "| scenario | form | ok | flagged | failed | timeout | sessions (UTC, quiclab version and commit, host, kernel) | Chromium |\n\
                 |---|---|---:|---:|---:|---:|---|---|\n",
            );
            for p in judged {
                let sessions: Vec<String> = p
                    .sessions
                    .iter()
                    .map(crate::reproduction::session_line)
                    .collect();
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {} | {} | {} | {} | {} |",
                    p.scenario,
                    p.form,
                    p.ok,
                    p.flagged,
                    p.failed,
                    p.timeout,
                    sessions.join("; "),
                    if p.chromium.is_empty() {
                        "—".to_string()
                    } else {
                        p.chromium.join(", ")
                    }
                );
            }
            out.push('\n');
        }
        out.push_str(&quiclab_verdict::outcome::markdown(&mine));
        let refs: Vec<&FindingVerdict> = mine.iter().collect();
        for m in crate::matrix::matrices(&refs) {
            let _ = writeln!(out, "By {}:\n", m.axis);
            out.push_str(&crate::matrix::markdown(&m));
            out.push('\n');
        }
        let ids: Vec<&str> = mine.iter().map(|v| v.id.as_str()).collect();
        let differ = crate::matrix::differences_by_value(&ids, verdicts);
        if !differ.is_empty() {
            out.push_str("Where the verdict differs by implementation:\n\n");
            for d in differ {
                let _ = writeln!(out, "- {d}");
            }
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_part_is_replaced_between_its_markers_and_nothing_else_moves() {
        let (b, e) = markers("t");
        let text = format!("head\n{b}\nold\n{e}\ntail\n");
        let new = replace_between(&text, "t", "new\n").unwrap();
        assert_eq!(new, format!("head\n{b}\nnew\n{e}\ntail\n"));
        // The same part again: the same bytes.
        assert_eq!(replace_between(&new, "t", "new\n").unwrap(), new);
        assert!(replace_between("no markers", "t", "x").is_none());
        assert!(replace_between(&format!("{b}\n{e}\n{b}\n{e}\n"), "t", "x").is_none());
    }
}
