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
    /// Protocol the improvement bars compare against
    #[arg(long, default_value = "h1")]
    pub baseline: String,
    /// Metrics to show, comma-separated; the first is the primary one (CDFs, wins table).
    /// Default: total_ms, ttfb_ms, goodput_mbps, loss_ratio, handshake_ms
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

/// Labels and units of the metrics quiclab records; unknown names are shown as they are.
fn metric_info(name: &str) -> MetricInfo {
    let (label, unit, lower) = match name {
        "total_ms" => ("Download time", "ms", true),
        "plt_ms" => ("Page load time", "ms", true),
        "dom_content_loaded_ms" => ("DOMContentLoaded", "ms", true),
        "connections" => ("Connections", "", true),
        "objects" => ("Objects", "", false),
        "ttfb_ms" => ("Time to first byte", "ms", true),
        "handshake_ms" => ("Handshake time", "ms", true),
        "connect_ms" => ("TCP connect time", "ms", true),
        "goodput_mbps" => ("Goodput", "Mbit/s", false),
        "utilization" => ("Channel utilisation", "", false),
        "loss_ratio" => ("Loss ratio", "", true),
        "tail_drops" => ("Tail drops", "packets", true),
        "random_losses" => ("Random losses", "packets", true),
        "cpu_client_s" => ("Client CPU", "s", true),
        "cpu_server_s" => ("Server CPU", "s", true),
        "cpu_client_s_per_gb" => ("Client CPU per GB", "s/GB", true),
        "cpu_server_s_per_gb" => ("Server CPU per GB", "s/GB", true),
        "setup_ms" => ("Lab set-up", "ms", true),
        "teardown_ms" => ("Lab teardown", "ms", true),
        other => (other, "", true),
    };
    MetricInfo {
        name: name.to_string(),
        label: label.to_string(),
        unit: unit.to_string(),
        lower_is_better: lower,
    }
}

pub fn report(args: ReportArgs) -> Result<i32> {
    let options = ReportOptions {
        baseline: args.baseline.clone(),
        metrics: if args.metrics.is_empty() {
            quiclab_report::default_metrics()
        } else {
            args.metrics.iter().map(|m| metric_info(m)).collect()
        },
        include_flagged: args.include_flagged,
    };
    let out = write_report_with(&args.dir, &options, &args.series)?;
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
pub fn write_report(dir: &Path, options: &ReportOptions) -> Result<quiclab_report::ReportOutput> {
    write_report_with(dir, options, &[])
}

/// [`write_report`] with the time series of only the runs `series_filters` choose.
fn write_report_with(
    dir: &Path,
    options: &ReportOptions,
    series_filters: &[String],
) -> Result<quiclab_report::ReportOutput> {
    let store = Store::open(&dir.join("results.sqlite"))?;
    let scenario = store.scenario()?;
    let runs = store.runs()?;
    // Page loads have their own headline metric: page load time.
    let page_defaults;
    let options = if runs.iter().any(|r| r.metrics.contains_key("plt_ms"))
        && options.metrics == quiclab_report::default_metrics()
    {
        page_defaults = ReportOptions {
            metrics: ["plt_ms", "connections", "loss_ratio"]
                .iter()
                .map(|m| metric_info(m))
                .collect(),
            ..options.clone()
        };
        &page_defaults
    } else {
        options
    };
    if !runs.iter().any(|r| r.protocol == options.baseline) && !runs.is_empty() {
        let protocols: std::collections::BTreeSet<&str> =
            runs.iter().map(|r| r.protocol.as_str()).collect();
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
                protocol: r.protocol,
                repetition: r.repetition,
                status: match r.status {
                    Status::Ok => RunStatus::Ok,
                    Status::Failed => RunStatus::Failed,
                    Status::Timeout => RunStatus::Timeout,
                },
                reason: r.reason,
                flags: r.flags,
                metrics: r.metrics,
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

pub fn export(args: ExportArgs) -> Result<i32> {
    let store = Store::open(&args.dir.join("results.sqlite"))?;
    let to = args.to.unwrap_or(args.dir);
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
