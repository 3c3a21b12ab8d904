//! `quiclab report DIR` and `quiclab export DIR --csv`: what a results database becomes for people
//! (an offline HTML report with figures) and for pandas/R (flat CSV).

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};
use clap::Args;
use quiclab_report::{MetricInfo, ReportInput, ReportOptions, RunRecord, RunStatus, TimeSeries};
use quiclab_results::{Status, Store};

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// Results directory (holding results.sqlite)
    pub dir: PathBuf,
    /// Contender the improvement bars compare against (default: h1 when it ran, else the first
    /// contender that ran, e.g. the first flow mix)
    #[arg(long)]
    pub baseline: Option<String>,
    /// Metrics to show, comma-separated; the first is the primary one (CDFs, wins table).
    /// Default: the workload kind's (bulk: total_ms, ttfb_ms, goodput_mbps, loss_ratio,
    /// handshake_ms; page: plt_ms, connections, loss_ratio)
    #[arg(long, value_delimiter = ',')]
    pub metrics: Vec<String>,
    /// Include runs whose emulator fidelity was flagged in the statistics (default: shown apart)
    #[arg(long)]
    pub include_flagged: bool,
    /// Draw the time series (congestion window, queue) only of the traced runs matching this
    /// filter: comma-separated key=value parts of the run key, all required, e.g.
    /// `proto=h3,loss=2%,rep=1` (`quiclab export` lists the keys). Repeat for more runs; default:
    /// every traced run
    #[arg(long, value_name = "FILTER")]
    pub series: Vec<String>,
}

#[derive(Args, Debug)]
pub struct ExportArgs {
    /// Results directory (holding results.sqlite)
    pub dir: PathBuf,
    /// Write DIR/runs.csv (a row per run, a column per parameter and metric) and DIR/series.csv
    #[arg(long, required = true)]
    pub csv: bool,
    /// Write the CSV files here instead of DIR
    #[arg(long, value_name = "DIR")]
    pub to: Option<PathBuf>,
}

/// What the user chose for a report; unset parts come from the results (the workload kind's
/// metrics).
#[derive(Debug, Clone, Default)]
pub struct ReportChoice {
    /// None: h1 when it ran, else the first contender that ran.
    pub baseline: Option<String>,
    /// Empty: the metrics the workload kind declares for reports.
    pub metrics: Vec<String>,
    pub include_flagged: bool,
    pub series: Vec<String>,
}

/// How to show `name`: as declared in the metric registry (workloads, emulator, runner); a name
/// nothing declares is shown as it is, lower taken as better, and said so.
fn metric_info(name: &str) -> MetricInfo {
    match quiclab_experiment::metric::find(&quiclab_runner::metric_registry(), name) {
        Some(m) => MetricInfo {
            name: m.name.to_string(),
            label: m.label.to_string(),
            unit: m.unit.to_string(),
            lower_is_better: m.lower_is_better(),
            completion: m.completion,
        },
        None => {
            eprintln!(
                "quiclab report: note: no workload declares a metric {name:?}; shown as it is, lower taken as better"
            );
            MetricInfo {
                name: name.to_string(),
                label: name.to_string(),
                unit: String::new(),
                lower_is_better: true,
                completion: false,
            }
        }
    }
}

pub fn report(args: ReportArgs) -> Result<i32> {
    let choice = ReportChoice {
        baseline: args.baseline.clone(),
        metrics: args.metrics.clone(),
        include_flagged: args.include_flagged,
        series: args.series.clone(),
    };
    let out = write_report(&args.dir, &choice)?;
    println!("{}", out.html.display());
    Ok(0)
}

/// Whether run `key` (e.g. `proto=h3;rate=10mbit;loss=2%;rep=1`) matches a `--series` filter
/// (`proto=h3,loss=2%`): every part of the filter is one of the key's parts.
fn key_matches(key: &str, filter: &str) -> bool {
    let parts: Vec<&str> = key.split(';').collect();
    filter
        .split(',')
        .map(str::trim)
        .filter(|f| !f.is_empty())
        .all(|f| parts.contains(&f))
}

/// The traced runs' keys that `filters` keep (all when there are none); an error names a filter
/// that matches no traced run and shows what the keys look like.
fn chosen_series_keys(
    traced: &std::collections::BTreeSet<String>,
    filters: &[String],
) -> Result<std::collections::BTreeSet<String>> {
    if filters.is_empty() {
        return Ok(traced.clone());
    }
    let mut chosen = std::collections::BTreeSet::new();
    for f in filters {
        if !f.contains('=') {
            bail!(
                "--series {f}: expected key=value parts separated by commas, e.g. proto=h3,rep=1"
            );
        }
        let hits: Vec<&String> = traced.iter().filter(|k| key_matches(k, f)).collect();
        if hits.is_empty() {
            let examples: Vec<&str> = traced.iter().take(3).map(String::as_str).collect();
            if examples.is_empty() {
                bail!("--series {f}: no run of this experiment was traced (scenario key `trace`)");
            }
            bail!(
                "--series {f}: no traced run matches; {} runs were traced, e.g. {}",
                traced.len(),
                examples.join(" | ")
            );
        }
        chosen.extend(hits.into_iter().cloned());
    }
    Ok(chosen)
}

/// Renders DIR/report.html and DIR/figures/ from DIR/results.sqlite.
pub fn write_report(dir: &Path, choice: &ReportChoice) -> Result<quiclab_report::ReportOutput> {
    let store = Store::open(&dir.join("results.sqlite"))?;
    let scenario = store.scenario()?;
    let runs = store.runs()?;
    // The kind's own headline metrics unless the user chose: read from the stored scenario.
    let metrics: Vec<String> = if choice.metrics.is_empty() {
        let kind = quiclab_experiment::parse(&scenario.text, &scenario.file)
            .map(|s| s.kind)
            .map_err(|e| anyhow::anyhow!("the stored scenario does not parse any more: {e}"))?;
        quiclab_workload::report_metrics(kind)
            .iter()
            .map(|m| m.to_string())
            .collect()
    } else {
        choice.metrics.clone()
    };
    let baseline = match &choice.baseline {
        Some(b) => b.clone(),
        None if runs.iter().any(|r| r.contender == "h1") || runs.is_empty() => "h1".into(),
        None => runs
            .iter()
            .min_by_key(|r| r.index)
            .map(|r| r.contender.clone())
            .unwrap_or_default(),
    };
    let options = &ReportOptions {
        baseline,
        metrics: metrics.iter().map(|m| metric_info(m)).collect(),
        include_flagged: choice.include_flagged,
    };
    let series_filters = &choice.series;
    if !runs.iter().any(|r| r.contender == options.baseline) && !runs.is_empty() {
        let protocols: std::collections::BTreeSet<&str> =
            runs.iter().map(|r| r.contender.as_str()).collect();
        bail!(
            "--baseline {}: no run used it; the runs used {}",
            options.baseline,
            protocols.into_iter().collect::<Vec<_>>().join(", ")
        );
    }
    let series = store.series()?;
    let traced: std::collections::BTreeSet<String> =
        series.iter().map(|s| s.run_key.clone()).collect();
    let chosen = chosen_series_keys(&traced, series_filters)?;
    let mut environment = Vec::new();
    for s in store.sessions()? {
        let e = &s.environment;
        let prefix = format!("session {}", s.id);
        environment.push((
            format!("{prefix}: quiclab"),
            format!("{} (git {})", e.quiclab_version, e.git_commit),
        ));
        environment.push((format!("{prefix}: kernel"), e.kernel.clone()));
        environment.push((
            format!("{prefix}: CPU"),
            format!("{} × {}", e.cpus, e.cpu_model),
        ));
        environment.push((
            format!("{prefix}: stacks"),
            e.crates
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", "),
        ));
        environment.push((format!("{prefix}: command"), e.command.clone()));
    }
    let input = ReportInput {
        scenario_name: scenario.name,
        description: scenario.description,
        scenario_file: scenario.file,
        scenario_text: scenario.text,
        environment,
        planned_runs: scenario.planned_runs,
        runs: runs
            .into_iter()
            .map(|r| RunRecord {
                key: r.key,
                index: r.index,
                setting: r.setting,
                setting_label: r.setting_label,
                protocol: r.contender,
                repetition: r.repetition,
                status: match r.status {
                    Status::Ok => RunStatus::Ok,
                    Status::Failed => RunStatus::Failed,
                    Status::Timeout => RunStatus::Timeout,
                },
                reason: r.reason,
                flags: r.flags,
                time_limit_s: (r.status == Status::Timeout)
                    .then(|| r.result.as_ref()?.get("time_limit_s")?.as_f64())
                    .flatten(),
                metrics: r.metrics,
                attempt: r.attempt,
                flows: flow_goodputs(r.result.as_ref()),
            })
            .collect(),
        series: series
            .into_iter()
            .filter(|s| chosen.contains(&s.run_key))
            .map(|s| TimeSeries {
                run_key: s.run_key,
                name: s.name,
                unit: s.unit,
                points: s.points,
            })
            .collect(),
    };
    let out = quiclab_report::render(&input, options, dir)
        .map_err(|e| anyhow::anyhow!("writing the report into {}: {e}", dir.display()))?;
    for note in &out.notes {
        eprintln!("quiclab report: note: {note}");
    }
    Ok(out)
}

/// Each flow's label and goodput of a flow-mix run's stored result (`flows[].label`,
/// `flows[].goodput_mbps`); empty for other kinds.
fn flow_goodputs(result: Option<&serde_json::Value>) -> Vec<(String, Option<f64>)> {
    result
        .and_then(|r| r.get("flows"))
        .and_then(|f| f.as_array())
        .map(|flows| {
            flows
                .iter()
                .map(|f| {
                    (
                        f.get("label")
                            .and_then(|l| l.as_str())
                            .unwrap_or_default()
                            .to_string(),
                        f.get("goodput_mbps").and_then(|g| g.as_f64()),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

pub fn export(args: ExportArgs) -> Result<i32> {
    let store = Store::open(&args.dir.join("results.sqlite"))?;
    let to = args.to.unwrap_or(args.dir);
    // runs.csv and series.csv replace only quiclab's own files: --to names a new or empty
    // directory, an earlier export's, or a results directory.
    quiclab_outputs::claim_dir(&to, "--to", &["results.sqlite"])?;
    let s = quiclab_results::export_csv(&store, &to)?;
    println!(
        "{} ({} runs)\n{} ({} points)",
        s.runs_csv.display(),
        s.runs,
        s.series_csv.display(),
        s.series_points
    );
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_filters_match_whole_key_parts() {
        let key = "proto=h3;page=carlucci-large;rate=10mbit;loss=2%;rep=1";
        assert!(key_matches(key, "proto=h3"));
        assert!(key_matches(key, "proto=h3, loss=2%,rep=1"));
        assert!(!key_matches(key, "proto=h3,loss=0%"));
        // Parts, not substrings: rate=10 is not rate=10mbit, rep=1 does not match rep=10.
        assert!(!key_matches(key, "rate=10"));
        assert!(!key_matches("proto=h1;rep=10", "rep=1"));
    }

    #[test]
    fn series_choice_names_a_filter_that_matches_nothing() {
        let traced: std::collections::BTreeSet<String> = ["proto=h1;rep=1", "proto=h3;rep=1"]
            .into_iter()
            .map(String::from)
            .collect();
        assert_eq!(chosen_series_keys(&traced, &[]).unwrap(), traced);
        let one = chosen_series_keys(&traced, &["proto=h3".into()]).unwrap();
        assert_eq!(one.into_iter().collect::<Vec<_>>(), ["proto=h3;rep=1"]);
        let e = chosen_series_keys(&traced, &["proto=h4".into()]).unwrap_err();
        let e = format!("{e:#}");
        assert!(
            e.contains("--series proto=h4") && e.contains("proto=h1;rep=1"),
            "{e}"
        );
        let e = chosen_series_keys(&traced, &["h3".into()]).unwrap_err();
        assert!(format!("{e:#}").contains("key=value"), "{e:#}");
        let none = std::collections::BTreeSet::new();
        let e = chosen_series_keys(&none, &["proto=h3".into()]).unwrap_err();
        assert!(format!("{e:#}").contains("trace"), "{e:#}");
    }
}
