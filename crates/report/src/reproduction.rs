//! `reproduction.html`: the verdicts of `quiclab reproduce` as a page — per study the counts per
//! verdict, the testbed's differences from the seed's, the packs that were judged (form, runs by
//! status, the machines and commits that ran them) and per finding the claim, the seed's number,
//! quiclab's estimate with its interval and n, the test and p, the verdict and a link to the
//! scenario's own report; for a wins claim the wins table and its decision tree (Megyesi et al.
//! 2016, Fig. 6) drawn as SVG.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Result, anyhow};
use quiclab_experiment::metric::MetricDef;
use quiclab_results::{Session, Status, Store};
use quiclab_verdict::{FindingVerdict, Study, Tree, Verdict, verdict_word};

use crate::html::esc;

/// One scenario of a pack as the page describes it.
#[derive(Debug, Clone)]
pub struct PackScenario {
    pub study: String,
    pub scenario: String,
    /// `quick`, `full`, or `full, 1 of 5 repetitions` (as judged: [`FindingVerdict::form`]).
    pub form: String,
    pub ok: usize,
    pub failed: usize,
    pub timeout: usize,
    /// Ok runs still flagged for emulator fidelity (judged as failed).
    pub flagged: usize,
    pub sessions: Vec<Session>,
    /// The Chromium versions its runs loaded pages with.
    pub chromium: Vec<String>,
    /// `STUDY/SCENARIO/report.html` when it was written.
    pub report: Option<String>,
}

/// Reads a pack scenario's results directory.
fn pack_scenario(study: &str, scenario: &str, dir: &Path) -> Result<PackScenario> {
    let store = Store::open(&dir.join("results.sqlite"))?;
    let stored = store.scenario()?;
    let runs = store.runs()?;
    let count = |s: Status| runs.iter().filter(|r| r.status() == s).count();
    Ok(PackScenario {
        study: study.into(),
        scenario: scenario.into(),
        form: if stored.name == scenario {
            "full"
        } else {
            "quick"
        }
        .into(),
        ok: count(Status::Ok),
        failed: count(Status::Failed),
        timeout: count(Status::Timeout),
        flagged: runs
            .iter()
            .filter(|r| r.status() == Status::Ok && !r.flags.is_empty())
            .count(),
        sessions: store.sessions()?,
        chromium: runs
            .iter()
            .filter_map(|r| match r.document.result() {
                Some(quiclab_model::WorkloadOutput::Page(p)) => p.summary.browser_version.clone(),
                _ => None,
            })
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect(),
        report: None,
    })
}

/// The pack scenarios `verdicts` were judged on, read from the results under `dir`
/// (`dir/STUDY/SCENARIO/results.sqlite`), each once, with the form the verdicts give.
pub fn packs_of(dir: &Path, verdicts: &[FindingVerdict]) -> Result<Vec<PackScenario>> {
    let mut packs: Vec<PackScenario> = Vec::new();
    for v in verdicts {
        let Some(scenario) = &v.scenario else {
            continue;
        };
        let sdir = dir.join(&v.study).join(scenario);
        if !sdir.join("results.sqlite").is_file()
            || packs
                .iter()
                .any(|p| p.study == v.study && &p.scenario == scenario)
        {
            continue;
        }
        let mut p = pack_scenario(&v.study, scenario, &sdir)?;
        if let Some(form) = &v.form {
            p.form.clone_from(form);
        }
        packs.push(p);
    }
    Ok(packs)
}

/// Writes `out/reproduction.html` for `studies` judged into `verdicts` from the results under
/// `dir`, and each judged scenario's own report (`out/STUDY/SCENARIO/report.html`, linked from its
/// findings; `out` may be `dir`). A scenario report that cannot be drawn is said on the page,
/// not fatal. Only directories quiclab claimed are written.
pub fn write(
    dir: &Path,
    out: &Path,
    studies: &[Study],
    verdicts: &[FindingVerdict],
    registry: &[MetricDef],
) -> Result<PathBuf> {
    let mut packs = Vec::new();
    let mut notes = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for v in verdicts {
        let Some(scenario) = &v.scenario else {
            continue;
        };
        let sdir = dir.join(&v.study).join(scenario);
        if !sdir.join("results.sqlite").is_file() || !seen.insert(sdir.clone()) {
            continue;
        }
        let mut p = pack_scenario(&v.study, scenario, &sdir)?;
        if let Some(form) = &v.form {
            p.form.clone_from(form);
        }
        let report_dir = quiclab_outputs::claim_subdir(out, &v.study, "--out")
            .and_then(|d| quiclab_outputs::claim_subdir(&d, scenario, "--out"));
        let written = report_dir.map_err(anyhow::Error::from).and_then(|rdir| {
            crate::from_store::write_report_to(&sdir, &rdir, &Default::default(), registry)
        });
        match written {
            Ok(_) => p.report = Some(format!("{}/{scenario}/report.html", v.study)),
            Err(e) => notes.push(format!("{}/{scenario}: no report ({e:#})", v.study)),
        }
        packs.push(p);
    }
    let html = page(studies, verdicts, &packs, &notes);
    let path = out.join("reproduction.html");
    quiclab_outputs::write_in_claimed(&path, html.as_bytes())?;
    Ok(path)
}

/// A session as the pages name it: `2026-11-26 15:22 UTC, 0.1.0 d9d9476d9935, vm (2 × AMD EPYC),
/// Linux 6.18.44`.
pub fn session_line(x: &Session) -> String {
    let e = &x.environment;
    format!(
        "{}, {} {}, {} ({} × {}), {}",
        quiclab_model::utc(x.started_unix),
        e.quiclab_version,
        e.git_commit,
        e.hostname,
        e.cpus,
        e.cpu_model,
        e.kernel
    )
}

fn verdict_class(v: &Verdict) -> &'static str {
    match v {
        Verdict::Holds => "holds",
        Verdict::DoesNotHold { .. } => "nothold",
        Verdict::NotShown { .. } | Verdict::Mixed { .. } | Verdict::Inconclusive { .. } => "open",
        Verdict::NotRunnable { .. } => "na",
    }
}

/// The page (pure: everything it shows is in its arguments).
pub fn page(
    studies: &[Study],
    verdicts: &[FindingVerdict],
    packs: &[PackScenario],
    notes: &[String],
) -> String {
    let mut h = String::new();
    h.push_str(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>quiclab reproductions</title><style>\
         body{font-family:sans-serif;max-width:1300px;margin:2em auto;padding:0 1em;color:#222}\
         table{border-collapse:collapse;margin:1em 0;font-size:0.9em}\
         td,th{border:1px solid #ccc;padding:0.3em 0.5em;vertical-align:top;text-align:left}\
         th{background:#f3f3f3}.holds{background:#d9f2d9}.nothold{background:#f8d7d7}\
         .open{background:#fff3cd}.na{background:#e9e9e9}.why{color:#555;font-size:0.9em}\
         code{font-size:0.95em}</style></head><body>\n<h1>quiclab reproductions</h1>\n\
         <p>Every verdict on this page is computed by <code>quiclab reproduce</code> from the \
         stored runs by the rule its finding states (studies/STUDY.toml); none is written by \
         hand. <b>holds</b>: the exact interval of the median lies beyond no effect in the claimed \
         direction and the median beyond the smallest effect that matters (or the interval lies \
         inside the claimed band, or beyond the threshold), and its Benjamini–Hochberg q within \
         the study is below α; <b>does not hold</b>: the interval excludes the claimed effect \
         (inside the margin, short of a threshold, outside a band, or the other way by less than \
         the margin); <b>reversed</b>: the same as holds, the other way; <b>not shown</b>: enough \
         pairs, and the test did not show the claim (p or q ≥ α) while its interval does not \
         exclude it either — absence of evidence, counted apart; <b>mixed</b>: a pooled claim \
         with a cell significantly the other way (named); <b>inconclusive</b>: \
         fewer pairs than the rule needs (at α = 0.05 never fewer than 6: five of \
         five give p = 0.0625, and the widest interval of a median of five covers 93.75 %), more \
         than 5 % failed or missing runs, an interval straddling a band, or a quick form (an \
         observation: its estimate and n are shown, never a verdict); <b>not runnable</b>: \
         quiclab cannot run it, and why. Intervals are exact order-statistic intervals of the \
         median with the coverage they reach. A <b>calibration</b> holds by construction (a \
         configuration, the handshake's round trips on a fixed-delay link) and is counted apart \
         from the <b>reproductions</b>. Runs that hit their time limit are censored (they lose a \
         pairing to a finished run and count above a threshold up to their limit); failed runs, \
         runs whose partner is missing, and runs still flagged for emulator fidelity after their \
         retries count as failed; runs whose metric is undefined by its definition are counted \
         apart.</p>\n",
    );
    // Counts per study and class: calibrations never add to the reproductions; a finding
    // without a whole full form is "no full form yet" (the docs' summary, the same rows).
    h.push_str("<table><tr><th>study</th><th>class</th><th>findings</th>");
    for w in crate::docs::COLUMNS {
        let _ = write!(h, "<th>{w}</th>");
    }
    h.push_str("</tr>\n");
    for r in crate::docs::summary_rows(studies, verdicts) {
        let _ = write!(
            h,
            "<tr><td><a href=\"#{0}\">{0}</a></td><td>{1}s</td><td>{2}</td>",
            esc(r.study),
            r.class.name(),
            r.findings
        );
        for n in r.counts {
            let _ = write!(h, "<td>{n}</td>");
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</table>\n");
    for s in studies {
        study_section(&mut h, s, verdicts, packs);
    }
    if !notes.is_empty() {
        h.push_str("<h2>Notes</h2><ul>");
        for n in notes {
            let _ = write!(h, "<li>{}</li>", esc(n));
        }
        h.push_str("</ul>\n");
    }
    h.push_str("</body></html>\n");
    h
}

fn study_section(h: &mut String, s: &Study, verdicts: &[FindingVerdict], packs: &[PackScenario]) {
    let seeds = if s.seeds.is_empty() {
        "no seed of its own".to_string()
    } else {
        format!("seeds {}", s.seeds.join(", "))
    };
    let _ = write!(
        h,
        "<h2 id=\"{0}\">{0}</h2>\n<p>{1} ({2})</p>\n",
        esc(&s.name),
        esc(&s.title),
        esc(&seeds)
    );
    h.push_str(&crate::forest::forest_svg(&s.name, verdicts));
    h.push_str("<h3>How this testbed differs from the seed's</h3><ul>");
    for d in &s.differences {
        let _ = write!(h, "<li>{}</li>", esc(d));
    }
    let mine: Vec<&PackScenario> = packs.iter().filter(|p| p.study == s.name).collect();
    let short: Vec<String> = mine
        .iter()
        .filter(|p| p.form != "full")
        .map(|p| format!("{} ({})", p.scenario, p.form))
        .collect();
    if !short.is_empty() {
        let _ = write!(
            h,
            "<li>Judged on runs other than the current files' full forms: {}</li>",
            esc(&short.join(", "))
        );
    }
    h.push_str("</ul>\n<h3>Runs judged</h3>\n");
    if mine.is_empty() {
        h.push_str("<p>No results of this study were judged.</p>\n");
    } else {
        h.push_str(
            "<table><tr><th>scenario</th><th>form</th><th>ok</th><th>flagged</th>\
             <th>failed</th><th>timeout</th><th>ran (UTC), commit, machine</th><th>stacks</th></tr>\n",
        );
        for p in &mine {
            let sessions: Vec<String> = p.sessions.iter().map(session_line).collect();
            let crates: Vec<String> = p
                .sessions
                .last()
                .map(|x| {
                    x.environment
                        .crates
                        .iter()
                        .map(|(k, v)| format!("{k} {v}"))
                        .collect()
                })
                .unwrap_or_default();
            let name = match &p.report {
                Some(r) => format!("<a href=\"{}\">{}</a>", esc(r), esc(&p.scenario)),
                None => esc(&p.scenario),
            };
            let _ = writeln!(
                h,
                "<tr><td>{name}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
                 <td>{}</td><td class=\"why\">{}</td></tr>",
                esc(&p.form),
                p.ok,
                p.flagged,
                p.failed,
                p.timeout,
                esc(&sessions.join("; ")),
                esc(&crates.join(", "))
            );
        }
        h.push_str("</table>\n");
    }
    h.push_str(
        "<h3>Findings</h3>\n<table><tr><th>finding</th><th>class</th><th>source</th><th>claim</th>\
         <th>judged on</th><th>seed</th><th>quiclab (exact CI, n)</th><th>test</th><th>p</th>\
         <th>q</th><th>verdict</th></tr>\n",
    );
    let mine: Vec<&FindingVerdict> = verdicts.iter().filter(|v| v.study == s.name).collect();
    for v in &mine {
        finding_row(h, v, packs, &s.differences);
    }
    h.push_str("</table>\n");
    // Findings judged once per value of a setting: finding × value → verdict.
    for m in crate::matrix::matrices(&mine) {
        let _ = writeln!(
            h,
            "<h3>By {0}</h3>\n<p>Each finding judged once per {0} (the rows above, id@value): \
             its verdict, the estimate with its exact interval and n, and p.</p>\n\
             <table><tr><th>finding</th><th>claim</th>",
            esc(&m.axis)
        );
        for v in &m.values {
            let _ = write!(h, "<th>{} = {}</th>", esc(&m.axis), esc(v));
        }
        h.push_str("</tr>\n");
        for r in &m.rows {
            let _ = write!(h, "<tr><td>{}</td><td>{}</td>", esc(&r.of), esc(&r.claim));
            for c in &r.cells {
                let class = match c.as_ref().map(|c| c.word) {
                    Some("holds") => "holds",
                    Some("does not hold" | "reversed") => "nothold",
                    Some("not runnable") => "na",
                    _ => "open",
                };
                let _ = write!(
                    h,
                    "<td class=\"{class}\">{}</td>",
                    esc(&crate::matrix::cell_text(c.as_ref()))
                );
            }
            h.push_str("</tr>\n");
        }
        h.push_str("</table>\n");
    }
    let ids: Vec<&str> = mine.iter().map(|v| v.id.as_str()).collect();
    let differ = crate::matrix::differences_by_value(&ids, verdicts);
    if !differ.is_empty() {
        h.push_str("<h3>Where the verdict differs by implementation</h3><ul>");
        for d in &differ {
            let _ = write!(h, "<li>{}</li>", esc(d));
        }
        h.push_str("</ul>\n");
    }
    for v in mine
        .iter()
        .filter(|v| v.tree.is_some() || v.wins_table.is_some())
    {
        let _ = writeln!(
            h,
            "<h3 id=\"tree-{0}\">{0}: who wins each setting</h3>",
            esc(&v.id)
        );
        if let Some(t) = &v.tree {
            h.push_str(
                "<p>The decision tree grown from the wins table below (after Megyesi et al. \
                 2016, Fig. 6: A beats B when at least 70 % of A's runs are at least 10 % faster \
                 than B's mean; two protocols are marked when both beat the third but not each \
                 other). Each leaf counts the settings it holds.</p>\n",
            );
            if let Verdict::Inconclusive { why } = &v.judgement.verdict {
                let _ = writeln!(
                    h,
                    "<p><b>Drawn from what ran, not a verdict:</b> {}.</p>",
                    esc(why)
                );
            }
            h.push_str(&tree_svg(t));
        }
        if let Some(table) = &v.wins_table {
            h.push_str("<details><summary>wins table</summary><table><tr><th>setting</th><th>won by</th></tr>");
            // Only the parameters that differ between settings (the scenario's axes).
            let varies = |k: &String| {
                table
                    .iter()
                    .any(|r| r.setting.get(k) != table[0].setting.get(k))
            };
            for row in table {
                let setting: Vec<String> = row
                    .setting
                    .iter()
                    .filter(|(k, _)| varies(k))
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                let _ = write!(
                    h,
                    "<tr><td>{}</td><td>{}</td></tr>",
                    esc(&setting.join(", ")),
                    esc(&row.label())
                );
            }
            h.push_str("</table></details>\n");
        }
    }
}

/// Whether a difference of the testbed names this finding (`… it touches 000-2b, 001-4`).
fn names_finding(difference: &str, id: &str) -> bool {
    difference.match_indices(id).any(|(i, _)| {
        let after = difference[i + id.len()..].chars().next();
        let before = difference[..i].chars().next_back();
        !after.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-')
            && !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-')
    })
}

fn finding_row(h: &mut String, v: &FindingVerdict, packs: &[PackScenario], differences: &[String]) {
    let j = &v.judgement;
    let n = quiclab_verdict::outcome::shown_n(j);
    let value = match &j.estimate {
        Some(e) if e.level >= 1.0 => format!("{:.3} of {} settings", e.median, e.n),
        Some(e) => format!(
            "{}: {:.3} ({:.3}–{:.3}, {:.1} %), n = {n}",
            v.estimate_of,
            e.median,
            e.low,
            e.high,
            e.level * 100.0
        ),
        None if n > 0 => format!("n = {n}"),
        None => "—".into(),
    };
    let mut value = esc(&value);
    let c = &j.counts;
    if c.failed_runs + c.censored_runs + c.undefined_runs + c.unpaired > 0 {
        let _ = write!(
            value,
            "<br><span class=\"why\">{} failed, {} censored, {} undefined, {} without a partner</span>",
            c.failed_runs, c.censored_runs, c.undefined_runs, c.unpaired
        );
    }
    if let Some(d) = &j.detail {
        let _ = write!(value, "<br><span class=\"why\">{}</span>", esc(d));
    }
    let on = match (&v.scenario, &v.metric) {
        (Some(s), Some(m)) => {
            let link = packs
                .iter()
                .find(|p| p.study == v.study && &p.scenario == s)
                .and_then(|p| p.report.as_ref());
            let name = match link {
                Some(r) => format!("<a href=\"{}\">{}</a>", esc(r), esc(s)),
                None => esc(s),
            };
            let tree = if v.tree.is_some() {
                format!(" (<a href=\"#tree-{0}\">tree</a>)", esc(&v.id))
            } else {
                String::new()
            };
            format!(
                "{name}{tree} [{}]<br><code>{}</code>: {}",
                esc(v.form.as_deref().unwrap_or("no runs")),
                esc(m),
                esc(&v.test_of)
            )
        }
        _ => String::new(),
    };
    let test = v.rule.map_or(String::new(), |r| {
        let mut t = format!("{:?}, α = {}, n ≥ {}", r.test, r.alpha, r.min_n).to_lowercase();
        if v.test_of.contains(" vs ") {
            let _ = write!(t, ", effect ≥ {:.0} %", r.min_effect * 100.0);
        }
        t
    });
    let mut why = match &j.verdict {
        Verdict::Inconclusive { why }
        | Verdict::NotRunnable { why }
        | Verdict::NotShown { why } => {
            format!("<br><span class=\"why\">{}</span>", esc(why))
        }
        Verdict::Mixed { cells } => format!(
            "<br><span class=\"why\">the other way in {}</span>",
            esc(&cells.join("; "))
        ),
        _ => String::new(),
    };
    if j.deterministic {
        why.push_str(
            "<br><span class=\"why\">deterministic: the repetitions were copies, judged by their \
             value against the margin (no p)</span>",
        );
    }
    if !j.cells.is_empty() {
        let _ = write!(
            why,
            "<details><summary>{} cells ({})</summary><table><tr><th>cell</th><th>n</th><th>p</th>\
             <th>q</th><th>estimate (exact CI)</th><th>verdict</th></tr>",
            j.cells.len(),
            match v.scope {
                Some(quiclab_verdict::Scope::Each) => "every cell must hold",
                _ => "pooled; mixed when a cell goes significantly the other way",
            }
        );
        for c in &j.cells {
            let cj = &c.judgement;
            let way = if c.against {
                " — against the claim"
            } else if c.toward {
                " — toward it"
            } else {
                ""
            };
            let _ = write!(
                why,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"{}\">{}{way}</td></tr>",
                esc(&c.cell),
                quiclab_verdict::outcome::shown_n(cj),
                esc(&quiclab_verdict::outcome::p_column(cj)),
                cj.q.map_or(String::new(), quiclab_verdict::outcome::p_text),
                esc(&quiclab_verdict::outcome::estimate_text(cj, &v.estimate_of)),
                verdict_class(&cj.verdict),
                verdict_word(&cj.verdict),
            );
        }
        why.push_str("</table></details>");
    }
    if let Some(b) = &v.beside {
        let bj = &b.judgement;
        let estimate = quiclab_verdict::outcome::estimate_text(bj, &v.estimate_of);
        let _ = write!(
            why,
            "<br><span class=\"why\">beside it ({}; not counted): <b>{}</b>, n = {}{}{}{}</span>",
            esc(&b.label()),
            verdict_word(&bj.verdict),
            quiclab_verdict::outcome::shown_n(bj),
            bj.p.map_or(String::new(), |p| format!(
                ", p = {}{}",
                quiclab_verdict::outcome::p_text(p),
                bj.q.map_or(String::new(), |q| format!(
                    ", q = {}",
                    quiclab_verdict::outcome::p_text(q)
                ))
            )),
            if estimate.is_empty() {
                String::new()
            } else {
                format!(", {}", esc(&estimate))
            },
            if b.disagrees_with(j) {
                " — <b>disagrees</b>: the finding's verdict stands"
            } else {
                ""
            }
        );
    }
    if let Some(needed) = quiclab_verdict::outcome::needed_n(v) {
        let _ = write!(why, "<br><span class=\"why\">{}</span>", esc(&needed));
    }
    // Issue 59: the explanations tested, each with its two judgements.
    for e in &v.explanations {
        let brief = |j: &quiclab_verdict::Judgement| {
            esc(&quiclab_verdict::outcome::brief(j, &v.estimate_of))
        };
        let _ = write!(
            why,
            "<br><span class=\"why\">explanation {} ({}): <b>{}</b>{} — with {}: {}; control ({}): {}</span>",
            esc(&e.id),
            esc(&e.hypothesis),
            e.outcome.word(),
            match &e.outcome {
                quiclab_verdict::explain::Outcome::Inconclusive { why } =>
                    format!(" ({})", esc(why)),
                _ => String::new(),
            },
            esc(&e.setting_text()),
            brief(&e.with_setting),
            esc(&e.control_text()),
            brief(&e.control_judgement),
        );
    }
    if let Some(n) = &v.no_explanation {
        let _ = write!(
            why,
            "<br><span class=\"why\">explanation: {}</span>",
            esc(&n.text())
        );
    }
    // The testbed's differences that touch this finding, beside its verdict.
    for d in differences.iter().filter(|d| names_finding(d, &v.id)) {
        let _ = write!(why, "<br><span class=\"why\">differs: {}</span>", esc(d));
    }
    let _ = writeln!(
        h,
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{on}</td><td>{}</td><td>{value}</td>\
         <td>{}</td><td>{}</td><td>{}</td><td class=\"{}\"><b>{}</b>{why}</td></tr>",
        esc(&v.id),
        v.class.name(),
        esc(&v.source),
        esc(&v.claim),
        v.seed_value.map_or("—".into(), |x| format!("{x}")),
        esc(&test),
        match j.p {
            Some(p) => quiclab_verdict::outcome::p_text(p),
            None if j.deterministic => "deterministic".into(),
            None => "—".into(),
        },
        j.q.map_or("—".into(), quiclab_verdict::outcome::p_text),
        verdict_class(&j.verdict),
        verdict_word(&j.verdict),
    );
}

/// The tree as SVG: leaves side by side, each inner node above the middle of its children,
/// edges labelled with the parameter's value.
pub fn tree_svg(t: &Tree) -> String {
    const W: f64 = 130.0;
    const H: f64 = 90.0;
    let width = t.leaves() as f64 * W + 20.0;
    let height = t.depth() as f64 * H + 30.0;
    let mut body = String::new();
    let mut next_leaf = 0usize;
    place(t, 0, &mut next_leaf, &mut body, W, H);
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" \
         font-family=\"sans-serif\" font-size=\"11\">{body}</svg>\n"
    )
}

/// Draws `t` at `depth`; returns its x (the middle of its leaves).
fn place(t: &Tree, depth: usize, next_leaf: &mut usize, out: &mut String, w: f64, h: f64) -> f64 {
    let y = depth as f64 * h + 20.0;
    match t {
        Tree::Leaf { label, counts } => {
            let x = *next_leaf as f64 * w + w / 2.0 + 10.0;
            *next_leaf += 1;
            let total: usize = counts.values().sum();
            let detail: Vec<String> = counts.iter().map(|(l, c)| format!("{l} {c}")).collect();
            let _ = write!(
                out,
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"34\" rx=\"4\" fill=\"#eef5ff\" stroke=\"#6a8fc7\"/>\
                 <text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-weight=\"bold\">{}</text>\
                 <text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#555\" font-size=\"9\">{}</text>",
                x - w / 2.0 + 5.0,
                y,
                w - 10.0,
                y + 14.0,
                esc(label),
                y + 27.0,
                esc(&if counts.len() > 1 {
                    detail.join(", ")
                } else {
                    format!("{total} setting(s)")
                })
            );
            x
        }
        Tree::Split { param, branches } => {
            let xs: Vec<(f64, &String)> = branches
                .iter()
                .map(|(value, sub)| (place(sub, depth + 1, next_leaf, out, w, h), value))
                .collect();
            let x = (xs.first().map_or(0.0, |p| p.0) + xs.last().map_or(0.0, |p| p.0)) / 2.0;
            for (cx, value) in &xs {
                let _ = write!(
                    out,
                    "<line x1=\"{x:.1}\" y1=\"{:.1}\" x2=\"{cx:.1}\" y2=\"{:.1}\" stroke=\"#999\"/>\
                     <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#333\">{}</text>",
                    y + 22.0,
                    y + h,
                    (x + cx) / 2.0,
                    y + h / 2.0 + 12.0,
                    esc(value)
                );
            }
            let _ = write!(
                out,
                "<rect x=\"{:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"22\" rx=\"11\" fill=\"#fff\" stroke=\"#333\"/>\
                 <text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
                x - w / 2.0 + 15.0,
                w - 30.0,
                y + 15.0,
                esc(param)
            );
            x
        }
    }
}

/// Writes `dir/verdicts.json` and `dir/verdicts.csv` (and `dir/verdicts.md`, the same as
/// Markdown tables for the docs).
pub fn write_verdicts(dir: &Path, verdicts: &[FindingVerdict]) -> Result<(PathBuf, PathBuf)> {
    let json = dir.join("verdicts.json");
    // All three checked before any is written: a refusal leaves the earlier verdicts whole.
    quiclab_outputs::check_in_claimed(&[
        &json,
        &dir.join("verdicts.csv"),
        &dir.join("verdicts.md"),
        &dir.join("reproduction.html"),
    ])?;
    let json_bytes = serde_json::to_string_pretty(verdicts)?.into_bytes();
    let csv_path = dir.join("verdicts.csv");
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record([
        "study",
        "finding",
        "class",
        "verdict",
        "why",
        "claim",
        "scenario",
        "metric",
        "test_of",
        "test",
        "alpha",
        "min_effect",
        "n",
        "a_better",
        "a_worse",
        "ties",
        "failed_runs",
        "censored_runs",
        "undefined_runs",
        "unpaired_runs",
        "p",
        "median",
        "ci_low",
        "ci_high",
        "ci_level",
        "seed_value",
        "form",
        "detail",
    ])?;
    let num = |v: Option<f64>| v.map_or(String::new(), |x| x.to_string());
    for v in verdicts {
        let j = &v.judgement;
        let why = match &j.verdict {
            Verdict::Inconclusive { why } | Verdict::NotRunnable { why } => why.clone(),
            _ => String::new(),
        };
        let e = j.estimate.as_ref();
        w.write_record([
            v.study.clone(),
            v.id.clone(),
            v.class.name().to_string(),
            verdict_word(&j.verdict).to_string(),
            why,
            v.claim.clone(),
            v.scenario.clone().unwrap_or_default(),
            v.metric.clone().unwrap_or_default(),
            v.test_of.clone(),
            v.rule
                .map_or(String::new(), |r| format!("{:?}", r.test).to_lowercase()),
            num(v.rule.map(|r| r.alpha)),
            num(v.rule.map(|r| r.min_effect)),
            quiclab_verdict::outcome::shown_n(j).to_string(),
            j.counts.a_better.to_string(),
            j.counts.a_worse.to_string(),
            j.counts.ties.to_string(),
            j.counts.failed_runs.to_string(),
            j.counts.censored_runs.to_string(),
            j.counts.undefined_runs.to_string(),
            j.counts.unpaired.to_string(),
            num(j.p),
            num(e.map(|e| e.median)),
            num(e.map(|e| e.low)),
            num(e.map(|e| e.high)),
            num(e.map(|e| e.level)),
            num(v.seed_value),
            v.form.clone().unwrap_or_default(),
            j.detail.clone().unwrap_or_default(),
        ])?;
    }
    let csv_bytes = w.into_inner().map_err(|e| anyhow!("{e}"))?;
    let md_bytes = quiclab_verdict::outcome::markdown(verdicts).into_bytes();
    // The three as one set: a full disk leaves the earlier verdicts whole, never a new JSON
    // beside an old table.
    quiclab_outputs::write_set_in_claimed(
        dir,
        &[
            ("verdicts.json", &json_bytes),
            ("verdicts.csv", &csv_bytes),
            ("verdicts.md", &md_bytes),
        ],
    )?;
    Ok((json, csv_path))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn a_difference_is_shown_beside_the_findings_it_names() {
        let d = "FEC: parity outside the window; it touches 000-2b, 000-2e and 001-4.";
        assert!(names_finding(d, "000-2b") && names_finding(d, "001-4"));
        assert!(names_finding(d, "000-2e"));
        // A longer id that starts with a named one is not named.
        assert!(!names_finding(d, "000-2e-pages-0") && !names_finding(d, "000-2"));
        assert!(!names_finding("(see 000-1b-quic)", "000-1b"));
    }

    #[test]
    fn a_tree_draws_every_node_and_escapes_labels() {
        let t = Tree::Split {
            param: "rtt".into(),
            branches: vec![
                (
                    "18ms".into(),
                    Tree::Leaf {
                        label: "h1".into(),
                        counts: BTreeMap::from([("h1".into(), 2)]),
                    },
                ),
                (
                    "218ms".into(),
                    Tree::Leaf {
                        label: "h2+h3 <x>".into(),
                        counts: BTreeMap::from([("h2+h3 <x>".into(), 1), ("equal".into(), 1)]),
                    },
                ),
            ],
        };
        let svg = tree_svg(&t);
        assert_eq!(svg.matches("<rect").count(), 3);
        assert!(svg.contains(">rtt<") && svg.contains(">218ms<"));
        assert!(svg.contains("h2+h3 &lt;x&gt;") && !svg.contains("<x>"));
    }
}
