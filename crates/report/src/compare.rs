//! `quiclab compare A B`: two results directories (a before and an after — a stack upgrade, a
//! kernel, a key changed) read, never written; what differs between them said (the scenario's
//! settings, the builds, the stacks' versions, the kernel); each metric judged run for run by
//! the engine of `quiclab reproduce` ([`quiclab_verdict::compare`]); and the comparison written
//! as compare.html (a forest plot per metric: each cell's per-pair ratio B/A and the pooled one,
//! the margin shaded) and compare.json into a directory of quiclab's.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use quiclab_experiment::MetricDef;
use quiclab_results::Store;
use quiclab_verdict::compare::outcome_word;
use quiclab_verdict::outcome::{estimate_text, verdict_text};
use quiclab_verdict::study::{RunRecord, RunStatus};
use quiclab_verdict::{FindingVerdict, Rule, Test};
use serde::Serialize;

use crate::forest::colour;
use crate::html::esc;

/// What the user chose.
#[derive(Debug, Clone)]
pub struct CompareChoice {
    /// Empty: the workload kind's report metrics (what it was, such as a connection count, left
    /// out: it has no better side).
    pub metrics: Vec<String>,
    /// The smallest difference that matters, a share of A (0.05 = 5 %).
    pub margin: f64,
}

/// One results directory as the comparison read it.
#[derive(Debug, Clone, Serialize)]
pub struct SetSummary {
    pub dir: PathBuf,
    pub scenario: String,
    pub runs: usize,
    pub ok: usize,
    pub failed: usize,
    pub timeout: usize,
    /// Still flagged for emulator fidelity after their retries: counted as failed.
    pub flagged: usize,
}

/// A setting or environment value that differs between A and B (None: absent on that side).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Difference {
    pub what: String,
    pub a: Option<String>,
    pub b: Option<String>,
}

/// One metric's comparison: the outcome in the comparison's words and the whole judgement.
#[derive(Debug, Clone, Serialize)]
pub struct MetricComparison {
    pub metric: String,
    pub outcome: &'static str,
    pub verdict: FindingVerdict,
}

/// The whole comparison (compare.json).
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub a: SetSummary,
    pub b: SetSummary,
    /// The stored scenarios' settings that differ (dotted TOML keys; name and description left
    /// out).
    pub settings: Vec<Difference>,
    /// Builds, stacks' crate versions, kernel, CPU and host that differ.
    pub environment: Vec<Difference>,
    pub rule: Rule,
    pub metrics: Vec<MetricComparison>,
    pub html: PathBuf,
    pub json: PathBuf,
}

/// Compares the results in `a` and `b` (each a directory holding results.sqlite; only read),
/// writes compare.html and compare.json into `out` (new, empty or quiclab's).
pub fn compare_dirs(
    a: &Path,
    b: &Path,
    choice: &CompareChoice,
    registry: &[MetricDef],
    out: &Path,
) -> Result<Comparison> {
    if !(choice.margin.is_finite() && (0.0..1.0).contains(&choice.margin)) {
        bail!(
            "--margin {}: expected a percentage from 0 to below 100",
            choice.margin * 100.0
        );
    }
    let (sa, ta, ra, ea) = read_set(a, "A")?;
    let (sb, tb, rb, eb) = read_set(b, "B")?;
    let kind_of = |text: &str, which: &str, dir: &Path| {
        quiclab_experiment::parse(text, &dir.display().to_string())
            .map(|s| s.kind)
            .map_err(|e| {
                anyhow::anyhow!(
                    "{which} {}: its stored scenario does not parse: {e}",
                    dir.display()
                )
            })
    };
    let (ka, kb) = (kind_of(&ta, "A", a)?, kind_of(&tb, "B", b)?);
    if ka != kb {
        bail!(
            "A ({}) ran {} runs and B ({}) {} runs: compare needs results of one workload kind",
            a.display(),
            ka.name(),
            b.display(),
            kb.name()
        );
    }
    let metrics = chosen_metrics(choice, ka, registry, &ra, &rb)?;
    let rule = Rule {
        test: Test::Sign,
        alpha: 0.05,
        min_n: quiclab_verdict::rules::fewest_informative(0.05),
        min_effect: choice.margin,
    };
    let verdicts = quiclab_verdict::compare::compare(&ra, &rb, &metrics, rule);
    let out = quiclab_outputs::claim_dir(out, "--out")?;
    let mut c = Comparison {
        a: sa,
        b: sb,
        settings: differences(&flatten_toml(&ta), &flatten_toml(&tb)),
        environment: differences(&ea, &eb),
        rule,
        metrics: verdicts
            .into_iter()
            .map(|v| MetricComparison {
                metric: v.id.clone(),
                outcome: outcome_word(&v.judgement.verdict),
                verdict: v,
            })
            .collect(),
        html: out.join("compare.html"),
        json: out.join("compare.json"),
    };
    c.html = out.join("compare.html");
    let json = serde_json::to_string_pretty(&c)?;
    let page = html(&c);
    quiclab_outputs::write_set_in_claimed(
        &out,
        &[
            ("compare.html", page.as_bytes()),
            ("compare.json", json.as_bytes()),
        ],
    )
    .with_context(|| {
        format!(
            "writing compare.html and compare.json into {}",
            out.display()
        )
    })?;
    Ok(c)
}

/// One set as read: its summary, its stored scenario text, its runs as the verdict reads them,
/// and its environment (each field's distinct values over its sessions).
type SetRead = (SetSummary, String, Vec<RunRecord>, BTreeMap<String, String>);

/// A results directory read as one side of the comparison (`which`: A or B, for errors).
fn read_set(dir: &Path, which: &str) -> Result<SetRead> {
    let db = dir.join("results.sqlite");
    if !db.is_file() {
        bail!(
            "{which} {}: no results.sqlite there (give a results directory: `quiclab run`'s --out, or a pack's DIR/STUDY/SCENARIO)",
            dir.display()
        );
    }
    let store = Store::open(&db).with_context(|| format!("{which} {}", dir.display()))?;
    let scenario = store.scenario()?;
    let stored = store.runs()?;
    let records = crate::from_store::verdict_records(&stored);
    let count = |f: &dyn Fn(&RunStatus) -> bool| records.iter().filter(|r| f(&r.status)).count();
    let summary = SetSummary {
        dir: dir.to_path_buf(),
        scenario: scenario.name.clone(),
        runs: records.len(),
        ok: count(&|s| matches!(s, RunStatus::Ok { flagged: false })),
        failed: count(&|s| matches!(s, RunStatus::Failed)),
        timeout: count(&|s| matches!(s, RunStatus::Timeout { .. })),
        flagged: count(&|s| matches!(s, RunStatus::Ok { flagged: true })),
    };
    let mut env: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for s in store.sessions()? {
        let e = s.environment;
        let mut put = |k: &str, v: String| {
            env.entry(k.to_string()).or_default().insert(v);
        };
        put(
            "quiclab build",
            format!("{} (git {})", e.quiclab_version, e.git_commit),
        );
        put("kernel", e.kernel);
        put("CPU", format!("{} × {}", e.cpus, e.cpu_model));
        put("host", e.hostname);
        for (k, v) in e.crates {
            put(&format!("crate {k}"), v);
        }
    }
    let env = env
        .into_iter()
        .map(|(k, v)| (k, v.into_iter().collect::<Vec<_>>().join(" + ")))
        .collect();
    Ok((summary, scenario.text, records, env))
}

/// The metrics compared: the user's (each one the registry declares and some run of A or B
/// recorded), or the kind's report metrics that some run recorded, less the descriptive ones.
fn chosen_metrics(
    choice: &CompareChoice,
    kind: quiclab_model::WorkloadKind,
    registry: &[MetricDef],
    a: &[RunRecord],
    b: &[RunRecord],
) -> Result<Vec<MetricDef>> {
    let recorded: BTreeSet<&str> = a
        .iter()
        .chain(b)
        .flat_map(|r| r.metrics.keys().map(String::as_str))
        .collect();
    if choice.metrics.is_empty() {
        // A metric no run recorded (a kind's metric this scenario cannot measure) is left out
        // rather than judged as every run failed.
        return Ok(quiclab_model::report_metrics(kind)
            .iter()
            .filter(|m| !m.descriptive && recorded.contains(m.name))
            .copied()
            .collect());
    }
    crate::from_store::refuse_unrecorded("--metric", &choice.metrics, &recorded)?;
    choice
        .metrics
        .iter()
        .map(|m| {
            quiclab_experiment::metric::find(registry, m).copied().ok_or_else(|| {
                anyhow::anyhow!(
                    "--metric {m}: runs recorded it, but no workload declares which way is better; compare judges declared metrics only"
                )
            })
        })
        .collect()
}

/// A scenario file's settings as dotted keys (`link.rate` → `"10mbit"`), name and description
/// left out (they name the file, not the experiment); an unparsable text is one entry.
fn flatten_toml(text: &str) -> BTreeMap<String, String> {
    fn walk(prefix: &str, v: &toml::Value, out: &mut BTreeMap<String, String>) {
        match v {
            toml::Value::Table(t) => {
                for (k, v) in t {
                    let key = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    walk(&key, v, out);
                }
            }
            other => {
                out.insert(prefix.to_string(), other.to_string());
            }
        }
    }
    let mut out = BTreeMap::new();
    match text.parse::<toml::Table>() {
        Ok(t) => walk("", &toml::Value::Table(t), &mut out),
        Err(_) => {
            out.insert("(scenario text)".into(), "does not parse as TOML".into());
        }
    }
    out.remove("name");
    out.remove("description");
    out
}

/// The keys whose values differ between `a` and `b` (or that one side lacks).
fn differences(a: &BTreeMap<String, String>, b: &BTreeMap<String, String>) -> Vec<Difference> {
    let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    keys.into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .map(|k| Difference {
            what: k.clone(),
            a: a.get(k).cloned(),
            b: b.get(k).cloned(),
        })
        .collect()
}

fn side(v: &Option<String>) -> &str {
    v.as_deref().unwrap_or("(not set)")
}

impl Comparison {
    /// What `quiclab compare` prints: the sets, what differs, a line per metric, the files.
    pub fn text(&self) -> String {
        let mut s = String::new();
        for (name, set) in [("A", &self.a), ("B", &self.b)] {
            let _ = writeln!(
                s,
                "{name}: {} ({}: {} runs, {} ok, {} failed, {} timed out, {} still flagged)",
                set.dir.display(),
                set.scenario,
                set.runs,
                set.ok,
                set.failed,
                set.timeout,
                set.flagged
            );
        }
        for (title, diffs) in [
            ("settings", &self.settings),
            ("environment", &self.environment),
        ] {
            if diffs.is_empty() {
                let _ = writeln!(s, "{title}: the same");
            }
            for d in diffs {
                let _ = writeln!(s, "{title}: {}: {} → {}", d.what, side(&d.a), side(&d.b));
            }
        }
        let _ = writeln!(
            s,
            "each metric: the claim \"B better\", B against A run for run (same settings and repetition), exact sign test at α = {}, margin {:.0} %",
            self.rule.alpha,
            self.rule.min_effect * 100.0
        );
        for m in &self.metrics {
            let _ = writeln!(s, "{}: {}", m.metric, metric_line(m).replace("**", ""));
        }
        let _ = writeln!(s, "{}\n{}", self.html.display(), self.json.display());
        s
    }
}

/// A metric's outcome, its estimate and the judgement's reasons, counts and n, p, q.
fn metric_line(m: &MetricComparison) -> String {
    let j = &m.verdict.judgement;
    let mut s = format!(
        "{} — {}",
        m.outcome,
        estimate_text(j, &m.verdict.estimate_of)
    );
    let mut stats = format!("n = {}", quiclab_verdict::outcome::shown_n(j));
    if let Some(p) = j.p {
        let _ = write!(stats, ", p = {}", quiclab_verdict::outcome::p_text(p));
    }
    if let Some(q) = j.q {
        let _ = write!(stats, ", q = {}", quiclab_verdict::outcome::p_text(q));
    }
    // Why, and what did not count, without the engine's word (the outcome says it).
    let text = verdict_text(j);
    let word = format!("**{}**", quiclab_verdict::verdict_word(&j.verdict));
    let rest = text
        .strip_prefix(&word)
        .unwrap_or(&text)
        .trim_start_matches([' ', '—', ';']);
    let _ = write!(s, " ({stats})");
    if !rest.is_empty() {
        let _ = write!(s, "; {rest}");
    }
    s
}

/// compare.html: self-contained, the forest plots inline.
fn html(c: &Comparison) -> String {
    let mut s = String::from(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>quiclab compare</title>\
         <style>body{font-family:DejaVu Sans,sans-serif;max-width:1000px;margin:2em auto}\
         table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 6px;text-align:left}</style>\
         </head><body>\n<h1>quiclab compare: B against A</h1>\n<table><tr><th></th><th>results</th><th>scenario</th><th>runs</th><th>ok</th><th>failed</th><th>timed out</th><th>still flagged</th></tr>\n",
    );
    for (name, set) in [("A", &c.a), ("B", &c.b)] {
        let _ = writeln!(
            s,
            "<tr><td>{name}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&set.dir.display().to_string()),
            esc(&set.scenario),
            set.runs,
            set.ok,
            set.failed,
            set.timeout,
            set.flagged
        );
    }
    s.push_str("</table>\n<h2>What differs</h2>\n<table><tr><th></th><th>A</th><th>B</th></tr>\n");
    for d in c.settings.iter().chain(&c.environment) {
        let _ = writeln!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&d.what),
            esc(side(&d.a)),
            esc(side(&d.b))
        );
    }
    if c.settings.is_empty() && c.environment.is_empty() {
        s.push_str("<tr><td colspan=\"3\">nothing recorded differs</td></tr>\n");
    }
    let _ = writeln!(
        s,
        "</table>\n<p>Each run of B is paired with A's run of the same settings and repetition (the same seed); \
         per metric, the exact sign test at α = {} (q: Benjamini–Hochberg over the metrics), the exact interval \
         of the median per-pair ratio B/A, and a margin of {:.0} %: <b>B better</b> or <b>A better</b> beyond \
         it, <b>no difference that matters</b> when the interval lies inside it, <b>not shown</b>, <b>mixed</b> \
         when cells go both ways, <b>inconclusive</b> with too few pairs. Repetitions that cannot differ count once.</p>",
        c.rule.alpha,
        c.rule.min_effect * 100.0
    );
    for m in &c.metrics {
        let _ = writeln!(
            s,
            "<h2 id=\"{0}\">{0}: <span style=\"color:{1}\">{2}</span></h2>\n<p>{3}</p>\n{4}",
            esc(&m.metric),
            colour(&m.verdict.judgement.verdict),
            esc(m.outcome),
            esc(&metric_line(m).replace("**", "")),
            forest_svg(m, c.rule.min_effect)
        );
    }
    s.push_str("</body></html>\n");
    s
}

/// One metric's forest plot: a row per cell (its median per-pair ratio B/A and exact interval),
/// the pooled row last, on a log axis around 1 with the margin shaded.
pub fn forest_svg(m: &MetricComparison, margin: f64) -> String {
    let j = &m.verdict.judgement;
    let mut rows: Vec<(String, &quiclab_verdict::Judgement)> = j
        .cells
        .iter()
        .map(|c| (c.cell.clone(), &c.judgement))
        .collect();
    rows.push(("pooled".to_string(), j));
    let ests = rows.iter().filter_map(|(_, j)| j.estimate.as_ref());
    let reach = ests
        .flat_map(|e| [e.low, e.median, e.high])
        .filter(|x| x.is_finite() && *x > 0.0)
        .map(|x| x.log2().abs())
        .fold((1.0 + margin).log2() * 2.0, f64::max)
        .min(4.0);
    let (label_w, plot_x, plot_w, row_h, top) = (260.0, 270.0, 480.0, 20.0, 30.0);
    let height = top + rows.len() as f64 * row_h + 40.0;
    let x = |r: f64| plot_x + (r.log2().clamp(-reach, reach) + reach) / (2.0 * reach) * plot_w;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"980\" height=\"{height}\" font-family=\"DejaVu Sans, sans-serif\" font-size=\"11\">\
         <rect width=\"980\" height=\"{height}\" fill=\"white\"/>\
         <text x=\"10\" y=\"16\" fill=\"#555\">{}: per-pair ratio B/A (log scale), median and exact interval; shaded: within the margin</text>\n",
        esc(&m.metric)
    );
    let (lo, hi) = (x(1.0 - margin), x(1.0 + margin));
    let bottom = top + rows.len() as f64 * row_h;
    let _ = writeln!(
        s,
        "<rect x=\"{lo:.1}\" y=\"{top}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"#dbe9f6\"/>\
         <line x1=\"{2:.1}\" y1=\"{top}\" x2=\"{2:.1}\" y2=\"{bottom:.1}\" stroke=\"#888\" stroke-dasharray=\"3,3\"/>",
        hi - lo,
        bottom - top,
        x(1.0)
    );
    for (i, (label, j)) in rows.iter().enumerate() {
        let mid = top + (i as f64 + 0.5) * row_h;
        let c = colour(&j.verdict);
        let _ = write!(
            s,
            "<text x=\"{label_w}\" y=\"{:.1}\" text-anchor=\"end\"{}>{}</text>",
            mid + 4.0,
            if i + 1 == rows.len() {
                " font-weight=\"bold\""
            } else {
                ""
            },
            esc(label)
        );
        if let Some(e) = &j.estimate
            && e.median.is_finite()
        {
            if e.low.is_finite() && e.high.is_finite() && e.level < 1.0 {
                let _ = write!(
                    s,
                    "<line x1=\"{:.1}\" y1=\"{mid:.1}\" x2=\"{:.1}\" y2=\"{mid:.1}\" stroke=\"{c}\" stroke-width=\"2\"/>",
                    x(e.low),
                    x(e.high)
                );
            }
            let _ = write!(
                s,
                "<circle cx=\"{:.1}\" cy=\"{mid:.1}\" r=\"4\" fill=\"{c}\"><title>{:.3} ({:.3}–{:.3})</title></circle>",
                x(e.median),
                e.median,
                e.low,
                e.high
            );
        }
        let _ = writeln!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" fill=\"{c}\">{}</text>",
            plot_x + plot_w + 10.0,
            mid + 4.0,
            esc(outcome_word(&j.verdict))
        );
    }
    // Axis labels: the ends, the margin's edges and 1, each where it does not crowd the last.
    let mut last = f64::NEG_INFINITY;
    for r in [
        2f64.powf(-reach),
        1.0 - margin,
        1.0,
        1.0 + margin,
        2f64.powf(reach),
    ] {
        if x(r) - last < 36.0 {
            continue;
        }
        last = x(r);
        let _ = write!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#555\">{r:.2}</text>",
            x(r),
            bottom + 16.0
        );
    }
    s.push_str("</svg>\n");
    s
}
