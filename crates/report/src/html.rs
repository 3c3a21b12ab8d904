//! Page assembly. Every string taken from the input goes through [`esc`];
//! the SVGs come from plotters, which escapes the text it writes. The page
//! has no external references except relative links to its own figure
//! files, so it opens offline and can be mailed as one file.

use std::fmt::Write as _;

use quiclab_experiment::stats::{Paired, Winners};

use crate::aggregate::{Aggregate, Cell, CensoredMedian, Excluded, MetricTable};
use crate::figures::{Emitted, FigureSpec, Section};
use crate::{ReportInput, ReportOptions, RunStatus};

/// HTML-escapes text for element content and quoted attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// About four significant digits, fewer decimals for large values; "—" for
/// non-finite values.
pub fn fmt_num(v: f64) -> String {
    if !v.is_finite() {
        return "—".to_string();
    }
    let a = v.abs();
    let decimals = if a >= 1000.0 || a == 0.0 {
        0
    } else if a >= 100.0 {
        1
    } else if a >= 10.0 {
        2
    } else if a >= 1.0 {
        3
    } else {
        // 0.0123 → 4 decimals: three significant digits below 1.
        ((-a.log10().floor()) as usize + 2).min(12)
    };
    format!("{v:.decimals$}")
}

fn fmt_pct(v: Option<f64>) -> String {
    v.map_or_else(|| "n/a".to_string(), |v| format!("{v:+.1} %"))
}

/// "+20.0 % · 8/2 · p 0.11" for a paired comparison; "n/a" without pairs.
fn fmt_paired(p: Option<&Paired>) -> String {
    let Some(p) = p else {
        return "n/a".to_string();
    };
    let strong = if p.sign_test_p < 0.05 { " <b>" } else { " " };
    let end = if p.sign_test_p < 0.05 { "</b>" } else { "" };
    format!(
        "{:+.1} % · {}/{} ·{strong}p {}{end}",
        p.median_improvement,
        p.better,
        p.worse,
        fmt_p(p.sign_test_p)
    )
}

/// A p-value: two decimals, three below 0.01, "&lt; 0.001" below that.
fn fmt_p(p: f64) -> String {
    if p < 0.001 {
        "&lt; 0.001".to_string()
    } else if p < 0.01 {
        format!("{p:.3}")
    } else {
        format!("{p:.2}")
    }
}

fn unit_suffix(unit: &str) -> String {
    if unit.is_empty() {
        String::new()
    } else {
        format!(" ({})", esc(unit))
    }
}

const CSS: &str = "
body { font-family: system-ui, -apple-system, 'DejaVu Sans', sans-serif; margin: 2em auto; max-width: 1200px; padding: 0 1em; color: #222; line-height: 1.4; }
h1 { margin-bottom: 0.2em; } h2 { margin-top: 2em; border-bottom: 1px solid #ccc; } h3 { margin-top: 1.4em; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.92em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #f2f2f2; } td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.win { font-weight: bold; background: #eaf6ea; }
td.warn { font-weight: bold; background: #fff4d6; }
figure { margin: 1.5em 0; } figure svg { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: 0.9em; color: #444; max-width: 60em; }
pre { background: #f7f7f7; padding: 0.8em; overflow-x: auto; }
.notice { background: #fff4d6; border-left: 4px solid #e6a700; padding: 0.5em 1em; }
.notes li { color: #8a5a00; } .muted { color: #777; }
code { font-size: 0.95em; }
nav ul { columns: 2; }
";

/// The whole report page.
pub fn page(
    input: &ReportInput,
    options: &ReportOptions,
    agg: &Aggregate,
    fairness: &[crate::fairness::FairnessRow],
    video: &[crate::video::VideoRow],
    figures: &[(FigureSpec, Emitted)],
    notes: &[String],
) -> String {
    let mut h = String::new();
    let mut figure_no = 0;
    let name = esc(&input.scenario_name);
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>quiclab report: {name}</title>\n<style>{CSS}</style>\n</head>\n<body>\n\
         <h1>quiclab report: {name}</h1>\n"
    );
    if !input.description.is_empty() {
        let _ = writeln!(h, "<p>{}</p>", esc(&input.description));
    }

    header(&mut h, input, options, agg, notes);
    contents(&mut h, agg);

    h.push_str("<h2 id=\"environment\">Environment</h2>\n");
    if input.environment.is_empty() {
        h.push_str("<p class=\"muted\">(none recorded)</p>\n");
    } else {
        h.push_str("<table>\n");
        for (k, v) in &input.environment {
            let _ = writeln!(h, "<tr><th>{}</th><td>{}</td></tr>", esc(k), esc(v));
        }
        h.push_str("</table>\n");
    }
    let _ = writeln!(
        h,
        "<details>\n<summary>Scenario file <code>{}</code></summary>\n<pre>{}</pre>\n</details>",
        esc(&input.scenario_file),
        esc(&input.scenario_text)
    );

    wins(&mut h, agg);

    if !fairness.is_empty() {
        fairness_section(&mut h, fairness);
        for (spec, out) in figures {
            if spec.section == Section::Fairness {
                figure(&mut h, &mut figure_no, spec, out);
            }
        }
    }

    if !video.is_empty() {
        video_section(&mut h, video);
    }

    for (m, table) in agg.metrics.iter().enumerate() {
        metric_section(&mut h, agg, m, table);
        for (spec, out) in figures {
            if spec.section == Section::Bars(m) || spec.section == Section::Improvement(m) {
                figure(&mut h, &mut figure_no, spec, out);
            }
        }
    }

    h.push_str("<h2 id=\"cdf\">Distribution of the primary metric</h2>\n");
    match agg.primary {
        None => h.push_str("<p class=\"muted\">(no primary metric values: no CDFs)</p>\n"),
        Some(m) => {
            let _ = writeln!(
                h,
                "<p>Empirical CDFs of {} across repetitions, one figure per setting, one \
                 line per protocol (after Megyesi et al. 2016, Fig. 4).</p>",
                esc(&agg.metrics[m].info.label)
            );
            for (s, setting) in agg.settings.iter().enumerate() {
                let spec = figures
                    .iter()
                    .find(|(spec, _)| spec.section == Section::Cdf(s));
                match spec {
                    Some((spec, out)) => figure(&mut h, &mut figure_no, spec, out),
                    None => {
                        let _ = writeln!(
                            h,
                            "<p class=\"muted\">Setting {}: no usable values, no CDF.</p>",
                            esc(&setting.label)
                        );
                    }
                }
            }
        }
    }

    h.push_str("<h2 id=\"timeseries\">Time series</h2>\n");
    if input.series.is_empty() {
        h.push_str("<p class=\"muted\">(no time series recorded)</p>\n");
    } else {
        h.push_str(
            "<p>Per-run time series (after Carlucci et al. 2015, Fig. 6): congestion \
             window and queue delay over seconds since the transfer started, one panel \
             per series.</p>\n",
        );
        for (spec, out) in figures {
            if spec.section == Section::TimeSeries {
                figure(&mut h, &mut figure_no, spec, out);
            }
        }
    }

    traced_loads(&mut h, input, agg);
    problems(&mut h, input, options, agg);

    let _ = writeln!(
        h,
        "<hr>\n<p class=\"muted\">Generated by quiclab-report {}. Figures are also in \
         <code>figures/</code> as SVG and PNG.</p>\n</body>\n</html>",
        env!("CARGO_PKG_VERSION")
    );
    h
}

fn header(
    h: &mut String,
    input: &ReportInput,
    options: &ReportOptions,
    agg: &Aggregate,
    notes: &[String],
) {
    let c = &agg.counts;
    let unfinished = c.planned.saturating_sub(c.finished);
    let _ = writeln!(
        h,
        "<table>\n<tr><th>planned</th><th>finished</th><th>ok</th><th>failed</th>\
         <th>timeout</th><th>flagged</th><th>not finished</th><th>used in statistics</th></tr>\n\
         <tr><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
         <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
         <td class=\"num\">{}</td><td class=\"num\">{}</td></tr>\n</table>",
        c.planned, c.finished, c.ok, c.failed, c.timeout, c.flagged, unfinished, c.used
    );

    let flagged_ok = input
        .runs
        .iter()
        .filter(|r| r.status == RunStatus::Ok && !r.flags.is_empty())
        .count();
    let flagged_policy = if options.include_flagged {
        format!(
            "Flagged runs (emulator fidelity out of tolerance) are <b>included</b> \
             (include_flagged is on): {flagged_ok} flagged ok run(s) enter the statistics."
        )
    } else {
        format!(
            "Flagged runs (emulator fidelity out of tolerance) are <b>excluded</b> \
             (include_flagged is off): {flagged_ok} flagged ok run(s) are left out."
        )
    };
    retries_notice(h, agg, c);
    let _ = writeln!(
        h,
        "<p>Statistics use {} run(s). Failed and timed-out runs ({}) are always excluded. \
         {flagged_policy} Each table's <i>excluded</i> column gives, per setting and \
         protocol, how many runs that statistic left out and why. Baseline for \
         improvements: <b>{}</b>.</p>",
        c.used,
        c.failed + c.timeout,
        esc(&options.baseline)
    );

    if c.finished == 0 {
        let _ = writeln!(
            h,
            "<p class=\"notice\">No runs finished (planned: {}): there is nothing to \
             summarise yet.</p>",
            c.planned
        );
    } else if c.used == 0 {
        let _ = writeln!(
            h,
            "<p class=\"notice\">No run is usable for statistics: all {} finished run(s) \
             failed, timed out or were flagged and excluded. The problem runs are listed \
             <a href=\"#problems\">at the end</a>.</p>",
            c.finished
        );
    } else if agg.metrics.is_empty() {
        h.push_str(
            "<p class=\"notice\">None of the selected metrics was recorded by any run.</p>\n",
        );
    }
    if unfinished > 0 && c.finished > 0 {
        let _ = writeln!(
            h,
            "<p class=\"notice\">The experiment is unfinished: {unfinished} of {} planned \
             run(s) have no result.</p>",
            c.planned
        );
    }

    if !notes.is_empty() {
        h.push_str("<ul class=\"notes\">\n");
        for n in notes {
            let _ = writeln!(h, "<li>{}</li>", esc(n));
        }
        h.push_str("</ul>\n");
    }
}

/// The settings with runs flagged and run again, still flagged, or timed out.
fn retry_rows(agg: &Aggregate) -> Vec<(&crate::aggregate::Setting, &crate::aggregate::RetryRow)> {
    agg.settings
        .iter()
        .zip(&agg.retries)
        .filter(|(_, r)| r.retried_runs + r.still_flagged + r.timed_out > 0)
        .collect()
}

/// At the top: what a timeout means for the statistics, and where the retries are counted (a
/// long table here would stand before the contents).
fn retries_notice(h: &mut String, agg: &Aggregate, c: &crate::aggregate::Counts) {
    let rows = retry_rows(agg);
    if rows.is_empty() {
        return;
    }
    if c.timeout > 0 {
        let _ = writeln!(
            h,
            "<p class=\"notice\">{} run(s) timed out. A timed-out run took at least its time \
             limit: it is censored, not missing. Means, confidence intervals and wins use the \
             finished runs only (marked <b>*</b> where a cell lost runs to timeouts); for \
             completion times the <i>median</i> column counts timed-out runs as longer than every \
             finished one (exact while fewer than half timed out, else shown as ≥ a bound).</p>",
            c.timeout
        );
    }
    let _ = writeln!(
        h,
        "<p>Runs flagged for emulator fidelity are run again with the same seed \
         (<code>retry_flagged</code>); the report uses each run's last attempt. {} setting(s) \
         had runs run again, still flagged or timed out: <a href=\"#retries\">retries per \
         setting</a>.</p>",
        rows.len()
    );
}

/// Runs flagged and run again, runs still flagged, and timed-out runs, per setting.
fn retries(h: &mut String, agg: &Aggregate) {
    let rows = retry_rows(agg);
    if rows.is_empty() {
        return;
    }
    h.push_str(
        "<h3 id=\"retries\">Retries per setting</h3>\n\
         <table>\n<tr><th>Setting</th><th>runs needing a retry</th><th>attempts run again</th>\
         <th>still flagged</th><th>timed out</th></tr>\n",
    );
    for (setting, r) in rows {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num{}\">{}</td><td class=\"num\">{}</td></tr>",
            esc(&setting.label),
            r.retried_runs,
            r.extra_attempts,
            if r.still_flagged > 0 { " warn" } else { "" },
            r.still_flagged,
            r.timed_out
        );
    }
    h.push_str("</table>\n");
}

/// Each cell's slowest traced run (on the primary metric) with the files it left — a page load's
/// HAR and waterfall — slowest cell first: where to look when a cell is slow.
fn traced_loads(h: &mut String, input: &ReportInput, agg: &Aggregate) {
    if input.traced_files.is_empty() {
        return;
    }
    let Some(metric) = agg.primary.map(|m| &agg.metrics[m].info) else {
        return;
    };
    // (setting, contender) → the slowest traced run with a value.
    let mut slowest: std::collections::BTreeMap<(usize, &str), (&crate::RunRecord, f64)> =
        std::collections::BTreeMap::new();
    for r in &input.runs {
        let (Some(_), Some(&v)) = (input.traced_files.get(&r.key), r.metrics.get(&metric.name))
        else {
            continue;
        };
        let e = slowest
            .entry((r.setting, r.protocol.as_str()))
            .or_insert((r, v));
        let worse = if metric.lower_is_better {
            v > e.1
        } else {
            v < e.1
        };
        if worse {
            *e = (r, v);
        }
    }
    let mut rows: Vec<(&crate::RunRecord, f64)> = slowest.into_values().collect();
    rows.sort_by(|a, b| {
        let (x, y) = if metric.lower_is_better {
            (b.1, a.1)
        } else {
            (a.1, b.1)
        };
        x.total_cmp(&y)
    });
    let _ = writeln!(
        h,
        "<h2 id=\"traced\">Slowest traced runs</h2>\n<p>Per setting and protocol, the traced run \
         with the worst {} and the files it left, the slowest cell first.</p>\n<table>\n<tr>\
         <th>setting</th><th>protocol</th><th>run</th><th>{}</th><th>files</th></tr>",
        esc(&metric.label),
        esc(&metric.label)
    );
    for (r, v) in rows {
        let links: Vec<String> = input.traced_files[&r.key]
            .iter()
            .map(|f| format!("<a href=\"{}\">{}</a>", esc(&f.href), esc(&f.label)))
            .collect();
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td><code>{}</code></td><td>{:.1} {}</td><td>{}</td></tr>",
            esc(&r.setting_label),
            esc(&r.protocol),
            esc(&r.key),
            v,
            esc(&metric.unit),
            links.join(" · ")
        );
    }
    h.push_str("</table>\n");
}

fn contents(h: &mut String, agg: &Aggregate) {
    h.push_str("<nav><ul>\n<li><a href=\"#environment\">Environment</a></li>\n");
    h.push_str("<li><a href=\"#wins\">Which protocol wins</a></li>\n");
    for (m, t) in agg.metrics.iter().enumerate() {
        let _ = writeln!(
            h,
            "<li><a href=\"#metric-{m}\">{}</a></li>",
            esc(&t.info.label)
        );
    }
    h.push_str(
        "<li><a href=\"#cdf\">Distribution of the primary metric</a></li>\n\
         <li><a href=\"#timeseries\">Time series</a></li>\n\
         <li><a href=\"#problems\">Failed, timed-out and flagged runs</a></li>\n</ul></nav>\n",
    );
}

fn wins(h: &mut String, agg: &Aggregate) {
    h.push_str("<h2 id=\"wins\">Which protocol wins</h2>\n");
    let Some(m) = agg.primary else {
        h.push_str("<p class=\"muted\">(no primary metric values: no verdicts)</p>\n");
        return;
    };
    let info = &agg.metrics[m].info;
    let reciprocal = if info.lower_is_better {
        String::new()
    } else {
        format!(
            " {} is higher-is-better, so the rule is applied to reciprocals (1/x): \
             negating the values would turn the 10 % margin into a 10 % tolerance.",
            esc(&info.label)
        )
    };
    let _ = writeln!(
        h,
        "<p>Verdict per setting on the primary metric, {}{} (after Megyesi et al. 2016, \
         Fig. 6). Protocol A beats protocol B when at least 70 % of A's runs are at least \
         10 % better than B's mean. One protocol wins a setting when it beats every other; \
         two share the win (e.g. \"h2+h3\") when each beats the rest but not each other; \
         otherwise the setting is \"equal\". \"n/a\": fewer than two protocols had usable \
         runs; \"too few runs\": a protocol had fewer than {} usable runs, below which one run \
         moves the 70 % share by more than the rule's margin (flagged runs are left out unless \
         the report is made with <code>--include-flagged</code>).{reciprocal}</p>",
        esc(&info.label),
        unit_suffix(&info.unit),
        quiclab_experiment::stats::WINS_MIN_RUNS,
    );
    h.push_str("<table>\n<tr><th>Setting</th><th>Winner</th>");
    for p in &agg.protocols {
        let _ = write!(h, "<th>mean {}{}</th>", esc(p), unit_suffix(&info.unit));
    }
    h.push_str("</tr>\n");
    for ((setting, row), cells) in agg
        .settings
        .iter()
        .zip(&agg.wins)
        .zip(&agg.metrics[m].cells)
    {
        // Protocol labels are opaque (may contain '+'), so take the winners
        // from the verdict rather than from its printed form.
        let winners: &[String] = match &row.verdict {
            Winners::Best(names) if row.applied() => names,
            _ => &[],
        };
        let class = if winners.is_empty() {
            ""
        } else {
            " class=\"win\""
        };
        let _ = write!(
            h,
            "<tr><td>{}</td><td{class}>{}</td>",
            esc(&setting.label),
            esc(&row.label())
        );
        for (p, cell) in agg.protocols.iter().zip(cells) {
            let class = if winners.contains(p) {
                "num win"
            } else {
                "num"
            };
            let _ = write!(h, "<td class=\"{class}\">{}</td>", mean_and_n(cell));
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</table>\n");
}

fn mean_and_n(cell: &Cell) -> String {
    let timed_out = match cell.excluded.timeout {
        0 => String::new(),
        k => format!(", {k} timed out"),
    };
    match &cell.summary {
        Some(s) => format!(
            "{}{} <span class=\"muted\">(n={}{timed_out})</span>",
            fmt_num(s.mean),
            if timed_out.is_empty() { "" } else { "*" },
            s.n
        ),
        None if !timed_out.is_empty() => {
            format!("— <span class=\"muted\">({})</span>", &timed_out[2..])
        }
        None => "—".to_string(),
    }
}

/// The median cell: the censoring-aware median where timed-out runs count, else the finished
/// runs' median.
fn median_text(cell: &Cell, finished_median: f64) -> String {
    match cell.censored_median {
        Some(CensoredMedian::Value(v)) => format!(
            "{} <span class=\"muted\">(incl. timeouts)</span>",
            fmt_num(v)
        ),
        Some(CensoredMedian::AtLeast(v)) => format!(
            "≥ {} <span class=\"muted\">(incl. timeouts)</span>",
            fmt_num(v)
        ),
        None => fmt_num(finished_median),
    }
}

fn excluded_text(e: &Excluded) -> String {
    let mut parts = Vec::new();
    if e.failed > 0 {
        parts.push(format!("{} failed", e.failed));
    }
    if e.timeout > 0 {
        parts.push(format!("{} timed out", e.timeout));
    }
    if e.flagged > 0 {
        parts.push(format!("{} flagged", e.flagged));
    }
    if e.missing > 0 {
        parts.push(format!("{} without value", e.missing));
    }
    if parts.is_empty() {
        "0".to_string()
    } else {
        format!("{} ({})", e.total(), parts.join(", "))
    }
}

fn metric_section(h: &mut String, agg: &Aggregate, m: usize, table: &MetricTable) {
    let info = &table.info;
    let direction = if info.lower_is_better {
        "lower is better"
    } else {
        "higher is better"
    };
    let _ = writeln!(
        h,
        "<h2 id=\"metric-{m}\">{}{}</h2>\n<p class=\"muted\">Metric <code>{}</code>, \
         {direction}{}.</p>",
        esc(&info.label),
        unit_suffix(&info.unit),
        esc(&info.name),
        if agg.primary == Some(m) {
            "; primary metric"
        } else {
            ""
        }
    );
    if !table.has_values() {
        h.push_str(
            "<p class=\"muted\">No usable values: every run was excluded or has no finite \
             value for this metric.</p>\n",
        );
    }
    let baseline = agg.baseline.filter(|_| !table.improvements.is_empty());
    h.push_str(
        "<table>\n<tr><th>Setting</th><th>Protocol</th><th>n</th><th>excluded</th>\
         <th>mean</th><th>median's 95 % interval</th><th>median</th><th>std dev</th><th>min</th>\
         <th>max</th>",
    );
    if let Some(b) = baseline {
        let base = esc(&agg.protocols[b]);
        let _ = write!(
            h,
            "<th>vs {base} (+ = better)</th><th title=\"Each repetition's run against the \
             {base} run of the same repetition (same seed, run back to back): median of the \
             per-pair improvements, pairs better / worse, two-sided sign test\">paired vs \
             {base}: median · better/worse · p</th>"
        );
    }
    h.push_str("</tr>\n");
    for (s, setting) in agg.settings.iter().enumerate() {
        for (p, protocol) in agg.protocols.iter().enumerate() {
            let cell = &table.cells[s][p];
            h.push_str("<tr>");
            if p == 0 {
                let _ = write!(
                    h,
                    "<td rowspan=\"{}\">{}</td>",
                    agg.protocols.len(),
                    esc(&setting.label)
                );
            }
            let _ = write!(
                h,
                "<td>{}</td><td class=\"num\">{}</td><td>{}</td>",
                esc(protocol),
                cell.values.len(),
                excluded_text(&cell.excluded)
            );
            match &cell.summary {
                Some(st) => {
                    let _ = write!(
                        h,
                        "<td class=\"num\">{}{}</td><td class=\"num\">{}</td>\
                         <td class=\"num\">{}</td><td class=\"num\">{}</td>\
                         <td class=\"num\">{}</td><td class=\"num\">{}</td>",
                        fmt_num(st.mean),
                        if cell.excluded.timeout > 0 { "*" } else { "" },
                        median_interval_text(&cell.values),
                        median_text(cell, st.median),
                        fmt_num(st.std_dev),
                        fmt_num(st.min),
                        fmt_num(st.max)
                    );
                }
                None if cell.censored_median.is_some() => {
                    h.push_str(&"<td class=\"num\">—</td>".repeat(2));
                    let _ = write!(h, "<td class=\"num\">{}</td>", median_text(cell, f64::NAN));
                    h.push_str(&"<td class=\"num\">—</td>".repeat(3));
                }
                None => h.push_str(&"<td class=\"num\">—</td>".repeat(6)),
            }
            if let Some(b) = baseline {
                let (text, paired) = if p == b {
                    ("baseline".to_string(), "baseline".to_string())
                } else {
                    (
                        fmt_pct(table.improvements[s][p]),
                        fmt_paired(table.paired[s][p].as_ref()),
                    )
                };
                let _ = write!(
                    h,
                    "<td class=\"num\">{text}</td><td class=\"num\">{paired}</td>"
                );
            }
            h.push_str("</tr>\n");
        }
    }
    h.push_str("</table>\n");
}

/// The median's exact 95 % interval (order statistics, as the verdicts use), with the coverage
/// it reaches when fewer runs cannot reach 95 %; "—" below two values. Never a mean's Student
/// interval, which at n = 2 reaches below zero for a time.
fn median_interval_text(values: &[f64]) -> String {
    if values.len() < 2 {
        return "—".into();
    }
    match quiclab_verdict::rules::median_interval(values, 0.95) {
        Some(ci) if ci.reaches(0.95) => format!("{} – {}", fmt_num(ci.low), fmt_num(ci.high)),
        Some(ci) => format!(
            "{} – {} ({:.0} %)",
            fmt_num(ci.low),
            fmt_num(ci.high),
            ci.level * 100.0
        ),
        None => "—".into(),
    }
}

/// Mean ± 95 % CI half-width of a summary (n = 1: the value alone).
fn mean_ci(s: Option<&quiclab_experiment::stats::Summary>) -> String {
    match s {
        None => "–".into(),
        Some(s) if s.n < 2 => fmt_num(s.mean),
        Some(s) => format!(
            "{} ± {}",
            fmt_num(s.mean),
            fmt_num((s.ci95_high - s.ci95_low) / 2.0)
        ),
    }
}

/// `mean (std)` as the seed's tables print it.
fn mean_sd(s: Option<&quiclab_experiment::stats::Summary>) -> String {
    match s {
        None => "–".into(),
        Some(s) if s.n < 2 => fmt_num(s.mean),
        Some(s) => format!("{} ({})", fmt_num(s.mean), fmt_num(s.std_dev)),
    }
}

fn video_section(h: &mut String, rows: &[crate::video::VideoRow]) {
    h.push_str("<h2 id=\"video\">Video: the seed's table layout</h2>\n");
    h.push_str(
        "<p>Per setting and players, over the included runs, as seed 004's Tables 5–10: the \
         average bitrate of the downloaded segments (Mbit/s, mean (standard deviation) over the \
         runs), the mean wait after a seek (seek request to playback of the requested media, s) \
         and the rebuffer rate, rebuffer time / (rebuffer time + media play time), not counting \
         the start or the waits after seeks. With several players the metrics are player 1's; \
         player 2's bitrate and Jain's index over the players' bitrates follow.</p>\n",
    );
    let mixes = rows.iter().any(|r| r.bitrate_p2.is_some());
    h.push_str(
        "<table>\n<tr><th>setting</th><th>players</th><th>runs</th><th>avg. bitrate (std)</th>\
         <th>wait after seek</th><th>rebuffer rate</th>",
    );
    if mixes {
        h.push_str("<th>player 2's bitrate (std)</th><th>J (bitrates)</th>");
    }
    h.push_str("</tr>\n");
    for r in rows {
        let rate = r
            .rebuffer_rate
            .as_ref()
            .map_or("–".to_string(), |s| format!("{:.1} %", s.mean * 100.0));
        let _ = write!(
            h,
            "<tr><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{rate}</td>",
            esc(&r.setting_label),
            esc(&r.players),
            r.runs,
            mean_sd(r.bitrate.as_ref()),
            r.seek_wait
                .as_ref()
                .map_or("–".to_string(), |s| fmt_num(s.mean)),
        );
        if mixes {
            let _ = write!(
                h,
                "<td>{}</td><td>{}</td>",
                mean_sd(r.bitrate_p2.as_ref()),
                mean_sd(r.jain_bitrate.as_ref())
            );
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</table>\n");
}

fn fairness_section(h: &mut String, rows: &[crate::fairness::FairnessRow]) {
    h.push_str("<h2 id=\"fairness\">Fairness of the flow mixes</h2>\n");
    h.push_str(
        "<p>Per setting and mix, over the included runs: each flow's goodput over its cutoff \
         window (Mbit/s, median [its exact 95 % interval, with the coverage reached when fewer \
         runs cannot reach 95 %]), the first flow's goodput over the mean of the others' (e.g. \
         QUIC/TCP in <code>h3+h1</code>), and Jain's index J = (Σx)²/(n·Σx²) over the flows' \
         window means and as the mean of per-bin J (these three: mean ± half-width of the 95 % \
         confidence interval).</p>\n",
    );
    h.push_str(
        "<table>\n<tr><th>setting</th><th>mix</th><th>runs</th><th>goodput per flow</th>\
         <th>first / others</th><th>J (means)</th><th>J (per bin)</th></tr>\n",
    );
    for r in rows {
        let flows = r
            .flows
            .iter()
            .zip(&r.flow_values)
            .map(|((l, s), v)| {
                let median = s.as_ref().map_or("–".into(), |s| fmt_num(s.median));
                format!("{}: {median} [{}]", esc(l), median_interval_text(v))
            })
            .collect::<Vec<_>>()
            .join("<br>");
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td><code>{}</code></td><td>{}</td><td>{flows}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&r.setting_label),
            esc(&r.mix),
            r.runs,
            mean_ci(r.ratio_first_rest.as_ref()),
            mean_ci(r.jain.as_ref()),
            mean_ci(r.jain_bins.as_ref()),
        );
    }
    h.push_str("</table>\n");
}

fn figure(h: &mut String, figure_no: &mut usize, spec: &FigureSpec, out: &Emitted) {
    *figure_no += 1;
    let stem = esc(&spec.stem);
    let _ = writeln!(h, "<figure id=\"fig-{stem}\">");
    match &out.svg {
        // Inlined as is: plotters escapes the text it writes into the SVG.
        Some(svg) => h.push_str(svg),
        None => h.push_str(
            "<p class=\"notice\">This figure could not be drawn (see the notes at the top).</p>\n",
        ),
    }
    let mut links = Vec::new();
    for f in &out.files {
        if let Some(name) = f.file_name().and_then(|n| n.to_str()) {
            let ext = name.rsplit('.').next().unwrap_or("").to_uppercase();
            links.push(format!(
                "<a href=\"figures/{}\">{}</a>",
                esc(name),
                esc(&ext)
            ));
        }
    }
    let _ = writeln!(
        h,
        "<figcaption><b>Figure {}.</b> {}. {} <span class=\"muted\">{}</span></figcaption>\n</figure>",
        figure_no,
        esc(&spec.title),
        esc(&spec.caption),
        links.join(" · ")
    );
}

fn problems(h: &mut String, input: &ReportInput, options: &ReportOptions, agg: &Aggregate) {
    h.push_str("<h2 id=\"problems\">Failed, timed-out and flagged runs</h2>\n");
    retries(h, agg);
    if agg.problem_runs.is_empty() {
        h.push_str("<p class=\"muted\">(none: every finished run succeeded with fidelity in tolerance)</p>\n");
        return;
    }
    let _ = writeln!(
        h,
        "<p>Failed and timed-out runs are never used. Flagged runs are {} (include_flagged \
         is {}).</p>",
        if options.include_flagged {
            "used when they succeeded"
        } else {
            "not used"
        },
        if options.include_flagged { "on" } else { "off" }
    );
    h.push_str(
        "<table>\n<tr><th>#</th><th>Run</th><th>Setting</th><th>Protocol</th><th>Rep.</th>\
         <th>Attempt</th><th>Status</th><th>Reason</th><th>Flags</th>\
         <th title=\"Fraction of CPU time the hypervisor stole during the run\">steal</th>\
         <th title=\"CPU time of quiclab's processes (runner, emulator, clients, servers) over wall time\">lab CPU (cores)</th>\
         <th>In statistics</th></tr>\n",
    );
    for &i in &agg.problem_runs {
        let Some(r) = input.runs.get(i) else { continue };
        let used = r.status == RunStatus::Ok && (r.flags.is_empty() || options.include_flagged);
        let flags: Vec<String> = r.flags.iter().map(|f| esc(f)).collect();
        let _ = writeln!(
            h,
            "<tr><td class=\"num\">{}</td><td><code>{}</code></td><td>{}</td><td>{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td></tr>",
            r.index,
            esc(&r.key),
            esc(&r.setting_label),
            esc(&r.protocol),
            r.repetition,
            r.attempt,
            r.status.as_str(),
            r.reason.as_deref().map(esc).unwrap_or_default(),
            flags.join("<br>"),
            r.metrics
                .get(quiclab_model::runner_metrics::HOST_STEAL.name)
                .map_or("–".into(), |s| format!("{:.1} %", s * 100.0)),
            r.metrics
                .get("lab_cpu_cores")
                .map_or("–".into(), |c| format!("{c:.2}")),
            if used { "yes" } else { "no" }
        );
    }
    h.push_str("</table>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup() {
        assert_eq!(
            esc("<script>alert('x') & \"y\"</script>"),
            "&lt;script&gt;alert(&#39;x&#39;) &amp; &quot;y&quot;&lt;/script&gt;"
        );
    }

    #[test]
    fn numbers_have_sensible_precision() {
        assert_eq!(fmt_num(12345.6), "12346");
        assert_eq!(fmt_num(123.45), "123.5");
        assert_eq!(fmt_num(12.345), "12.35");
        assert_eq!(fmt_num(1.2345), "1.234");
        assert_eq!(fmt_num(0.02), "0.0200");
        assert_eq!(fmt_num(0.0), "0");
        assert_eq!(fmt_num(f64::NAN), "—");
        assert_eq!(fmt_pct(Some(20.0)), "+20.0 %");
        assert_eq!(fmt_pct(None), "n/a");
    }

    #[test]
    fn paired_cells_mark_significant_results() {
        let p = Paired {
            n: 10,
            median_improvement: 20.04,
            better: 10,
            worse: 0,
            sign_test_p: 0.001953125,
        };
        assert_eq!(fmt_paired(Some(&p)), "+20.0 % · 10/0 · <b>p 0.002</b>");
        let p = Paired {
            better: 8,
            worse: 2,
            sign_test_p: 0.109375,
            ..p
        };
        assert_eq!(fmt_paired(Some(&p)), "+20.0 % · 8/2 · p 0.11");
        assert_eq!(fmt_paired(None), "n/a");
        assert_eq!(fmt_p(1e-7), "&lt; 0.001");
    }
}
