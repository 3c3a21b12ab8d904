//! Findings judged once per value of a setting (`per = { axis = "server", … }`) as a matrix:
//! finding × value → verdict, for reproduction.html and docs/reproductions.md; and, beside a
//! seed study's own finding, whether its verdict differs by that setting.

use std::fmt::Write as _;

use quiclab_verdict::FindingVerdict;

use crate::docs::summary_word;

/// The matrix of a study's per-value findings: the setting, its values in the order first
/// judged, and one row per finding (its id, claim and one cell per value).
#[derive(Debug, Clone, PartialEq)]
pub struct Matrix {
    pub axis: String,
    pub values: Vec<String>,
    pub rows: Vec<MatrixRow>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct MatrixRow {
    pub of: String,
    pub claim: String,
    /// Per value: the verdict's word as the summary counts it and the estimate (`0.84 [0.79,
    /// 0.90], n = 10`), None where this value was not judged.
    pub cells: Vec<Option<Cell>>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    pub word: &'static str,
    pub estimate: Option<String>,
    pub p: Option<f64>,
}

/// The matrices of `verdicts` (one per setting named by `per`), in the order first met.
pub fn matrices(verdicts: &[&FindingVerdict]) -> Vec<Matrix> {
    let mut out: Vec<Matrix> = Vec::new();
    for v in verdicts {
        let Some(per) = &v.per else { continue };
        let m = match out.iter_mut().position(|m| m.axis == per.axis) {
            Some(i) => &mut out[i],
            None => {
                out.push(Matrix {
                    axis: per.axis.clone(),
                    values: Vec::new(),
                    rows: Vec::new(),
                });
                out.last_mut().expect("just pushed")
            }
        };
        let col = match m.values.iter().position(|x| *x == per.value) {
            Some(c) => c,
            None => {
                m.values.push(per.value.clone());
                for r in &mut m.rows {
                    r.cells.push(None);
                }
                m.values.len() - 1
            }
        };
        let width = m.values.len();
        let row = match m.rows.iter().position(|r| r.of == per.of) {
            Some(r) => r,
            None => {
                m.rows.push(MatrixRow {
                    of: per.of.clone(),
                    claim: v.claim.clone(),
                    cells: vec![None; width],
                });
                m.rows.len() - 1
            }
        };
        let j = &v.judgement;
        m.rows[row].cells[col] = Some(Cell {
            word: summary_word(v),
            estimate: j.estimate.as_ref().map(|e| {
                format!(
                    "{} [{}, {}], n = {}",
                    sig3(e.median),
                    sig3(e.low),
                    sig3(e.high),
                    e.n
                )
            }),
            p: j.p,
        });
    }
    out
}

fn sig3(x: f64) -> String {
    if !x.is_finite() {
        return x.to_string();
    }
    format!("{}", (x * 1000.0).round() / 1000.0)
}

/// A matrix as a Markdown table (cells: verdict, estimate and p).
pub fn markdown(m: &Matrix) -> String {
    let mut t = String::from("| finding | claim |");
    for v in &m.values {
        let _ = write!(t, " {} = {v} |", m.axis);
    }
    t.push_str("\n|---|---|");
    for _ in &m.values {
        t.push_str("---|");
    }
    t.push('\n');
    for r in &m.rows {
        let _ = write!(t, "| {} | {} |", r.of, r.claim.replace('|', "\\|"));
        for c in &r.cells {
            let _ = write!(t, " {} |", cell_text(c.as_ref()));
        }
        t.push('\n');
    }
    t
}

/// A cell in words: `holds (0.84 [0.79, 0.90], n = 10; p = 0.002)`.
pub fn cell_text(c: Option<&Cell>) -> String {
    match c {
        None => "—".into(),
        Some(c) => {
            let mut s = c.word.to_string();
            let mut more = Vec::new();
            if let Some(e) = &c.estimate {
                more.push(e.clone());
            }
            if let Some(p) = c.p {
                more.push(format!("p = {}", quiclab_verdict::outcome::p_text(p)));
            }
            if !more.is_empty() {
                let _ = write!(s, " ({})", more.join("; "));
            }
            s
        }
    }
}

/// For each finding of `study_ids` judged per value elsewhere (a row whose `of` is the id):
/// a sentence when its full-form verdicts differ by value (`000-5a-quic: by server — quiclab
/// holds, caddy does not hold (implementations)`). Rows with a value not yet run say nothing.
pub fn differences_by_value(study_ids: &[&str], all: &[FindingVerdict]) -> Vec<String> {
    let mut out = Vec::new();
    let mut studies: Vec<&str> = all
        .iter()
        .filter(|v| v.per.is_some())
        .map(|v| v.study.as_str())
        .collect();
    studies.dedup();
    for study in studies {
        let mine: Vec<&FindingVerdict> = all.iter().filter(|v| v.study == study).collect();
        for m in matrices(&mine) {
            for r in m.rows.iter().filter(|r| study_ids.contains(&r.of.as_str())) {
                let words: Vec<&str> = r.cells.iter().flatten().map(|c| c.word).collect();
                if words.len() != r.cells.len()
                    || words.contains(&"no full form yet")
                    || words.iter().all(|w| *w == words[0])
                {
                    continue;
                }
                let each: Vec<String> = m
                    .values
                    .iter()
                    .zip(&words)
                    .map(|(v, w)| format!("{v} {w}"))
                    .collect();
                out.push(format!(
                    "{}: the verdict differs by {} — {} (study {study})",
                    r.of,
                    m.axis,
                    each.join(", ")
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use quiclab_verdict::findings::PerValue;

    fn verdict(of: &str, value: &str, holds: bool) -> FindingVerdict {
        let mut v = crate::forest::tests::finding(
            &format!("{of}@{value}"),
            quiclab_verdict::findings::Class::Reproduction,
            if holds {
                quiclab_verdict::Verdict::Holds
            } else {
                quiclab_verdict::Verdict::DoesNotHold { reversed: false }
            },
            0.8,
        );
        v.study = "implementations".into();
        v.per = Some(PerValue {
            of: of.into(),
            axis: "server".into(),
            value: value.into(),
        });
        v
    }

    #[test]
    fn per_value_verdicts_become_one_row_per_finding_and_a_column_per_value() {
        let v = [
            verdict("5a", "quiclab", true),
            verdict("5a", "caddy", false),
            verdict("1c", "quiclab", true),
            verdict("1c", "caddy", true),
        ];
        let refs: Vec<&FindingVerdict> = v.iter().collect();
        let m = matrices(&refs);
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].values, ["quiclab", "caddy"]);
        assert_eq!(m[0].rows.len(), 2);
        assert_eq!(
            m[0].rows[0].cells[1].as_ref().unwrap().word,
            "does not hold"
        );
        let md = markdown(&m[0]);
        assert!(md.contains("| server = quiclab | server = caddy |"), "{md}");
        assert!(md.contains("| 5a |"), "{md}");
        let d = differences_by_value(&["5a", "1c"], &v);
        assert_eq!(d.len(), 1, "{d:?}");
        assert!(
            d[0].starts_with(
                "5a: the verdict differs by server — quiclab holds, caddy does not hold"
            ),
            "{}",
            d[0]
        );
    }
}
