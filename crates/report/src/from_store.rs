//! From a results database to the report: the runs read with their typed documents
//! (`quiclab_model::WorkloadOutput`), the user's choices (baseline, metrics, which traced runs'
//! series) applied, and [`render`](crate::render) called. `quiclab report` and `quiclab demo` use
//! it; the command line only parses and prints.

use std::path::Path;

use anyhow::{Result, bail};
use quiclab_experiment::MetricDef;
use quiclab_model::WorkloadOutput;
use quiclab_results::{Status, Store};

use crate::{
    MetricInfo, ReportInput, ReportOptions, ReportOutput, RunRecord, RunStatus, TimeSeries,
};

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
fn metric_info(registry: &[MetricDef], name: &str) -> MetricInfo {
    match quiclab_experiment::metric::find(registry, name) {
        Some(m) => MetricInfo {
            name: m.name.to_string(),
            label: m.label.to_string(),
            unit: m.unit.to_string(),
            lower_is_better: m.lower_is_better(),
            completion: m.completion,
            descriptive: m.descriptive,
        },
        None => MetricInfo {
            name: name.to_string(),
            label: name.to_string(),
            unit: String::new(),
            lower_is_better: true,
            completion: false,
            descriptive: false,
        },
    }
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
///
/// Each run's document is read with the workloads' types; `registry` is every metric that
/// workloads, the emulator and the runner declare (labels, units, directions).
pub fn write_report(
    dir: &Path,
    choice: &ReportChoice,
    registry: &[MetricDef],
) -> Result<ReportOutput> {
    write_report_to(dir, dir, choice, registry)
}

/// [`write_report`] of the results in `dir` into `out` (report.html and figures/; `out` must be
/// new, empty or quiclab's). The database is only read.
pub fn write_report_to(
    dir: &Path,
    out: &Path,
    choice: &ReportChoice,
    registry: &[MetricDef],
) -> Result<ReportOutput> {
    let store = Store::open(&dir.join("results.sqlite"))?;
    let scenario = store.scenario()?;
    let runs = store.runs_as::<WorkloadOutput>()?;
    // The kind's own headline metrics unless the user chose: read from the stored scenario.
    let metrics: Vec<String> = if choice.metrics.is_empty() {
        let kind = quiclab_experiment::parse(&scenario.text, &scenario.file)
            .map(|s| s.kind)
            .map_err(|e| anyhow::anyhow!("the stored scenario does not parse any more: {e}"))?;
        quiclab_model::report_metrics(kind)
            .iter()
            .map(|m| m.name.to_string())
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
        metrics: metrics.iter().map(|m| metric_info(registry, m)).collect(),
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
    // A traced page load's HAR and waterfall (DIR/traces/run-NNNNN/), linked from the report.
    let mut traced_files = std::collections::BTreeMap::new();
    for r in &runs {
        let sub = format!("traces/run-{:05}", r.index);
        let files: Vec<crate::TracedFile> = [("HAR", "page.har"), ("waterfall", "waterfall.svg")]
            .into_iter()
            .filter(|(_, f)| dir.join(&sub).join(f).is_file())
            .map(|(label, f)| crate::TracedFile {
                label: label.into(),
                href: if out == dir {
                    format!("{sub}/{f}")
                } else {
                    dir.join(&sub).join(f).display().to_string()
                },
            })
            .collect();
        if !files.is_empty() {
            traced_files.insert(r.key.clone(), files);
        }
    }
    let input = ReportInput {
        traced_files,
        scenario_name: scenario.name,
        description: scenario.description,
        scenario_file: scenario.file,
        scenario_text: scenario.text,
        environment,
        planned_runs: scenario.planned_runs,
        runs: runs
            .into_iter()
            .map(|r| (r.status(), r.reason(), r))
            .map(|(status, reason, r)| RunRecord {
                key: r.key,
                index: r.index,
                setting: r.setting,
                setting_label: r.setting_label,
                protocol: r.contender,
                repetition: r.repetition,
                status: match status {
                    Status::Ok => RunStatus::Ok,
                    Status::Failed => RunStatus::Failed,
                    Status::Timeout => RunStatus::Timeout,
                },
                reason,
                flags: r.flags,
                time_limit_s: r.document.time_limit_s(),
                flows: flow_goodputs(r.document.result()),
                metrics: r.metrics,
                attempt: r.attempt,
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
    if !input.runs.is_empty() {
        refuse_unrecorded_metrics(&choice.metrics, &input.runs)?;
    }
    let mut out = crate::render(&input, options, out)
        .map_err(|e| anyhow::anyhow!("writing the report into {}: {e}", out.display()))?;
    for m in &metrics {
        if quiclab_experiment::metric::find(registry, m).is_none() {
            out.notes.push(format!(
                "no workload declares a metric {m:?}; shown as it is, lower taken as better"
            ));
        }
    }
    Ok(out)
}

/// A metric asked for by name (`--metrics`) that no run recorded is a typo or the wrong
/// results: refused with the names near it, not drawn as an empty section.
fn refuse_unrecorded_metrics(chosen: &[String], runs: &[RunRecord]) -> Result<()> {
    let recorded: std::collections::BTreeSet<&str> = runs
        .iter()
        .flat_map(|r| r.metrics.keys().map(String::as_str))
        .collect();
    refuse_unrecorded("--metrics", chosen, &recorded)
}

/// Each of `chosen` (named by `flag`) that is not among the `recorded` metric names: refused with
/// the names near it (`did you mean "goodput_mbps"?`), or the whole list when none is near.
pub(crate) fn refuse_unrecorded(
    flag: &str,
    chosen: &[String],
    recorded: &std::collections::BTreeSet<&str>,
) -> Result<()> {
    for m in chosen {
        if recorded.contains(m.as_str()) {
            continue;
        }
        let names: Vec<&str> = recorded.iter().copied().collect();
        let near = quiclab_experiment::scenario::near_names(m, &names);
        let hint = if near.is_empty() {
            format!("these runs recorded {}", names.join(", "))
        } else {
            let quoted: Vec<String> = near.iter().map(|n| format!("{n:?}")).collect();
            format!(
                "did you mean {}? ({} metrics recorded; `quiclab export` lists them as columns)",
                quoted.join(" or "),
                names.len()
            )
        };
        bail!("{flag} {m}: no run recorded a metric {m:?}; {hint}");
    }
    Ok(())
}

/// The stored runs as the verdict engine reads them (`quiclab_verdict::study`): a run still
/// flagged for emulator fidelity after its retries is marked so (it counts as failed), a timed-out
/// one carries its limit (censored).
pub fn verdict_records(
    runs: &[quiclab_results::StoredRun],
) -> Vec<quiclab_verdict::study::RunRecord> {
    use quiclab_verdict::study::{RunRecord, RunStatus};
    runs.iter()
        .map(|r| RunRecord {
            params: r.params.clone(),
            repetition: r.repetition,
            status: match r.status() {
                Status::Ok => RunStatus::Ok {
                    flagged: !r.flags.is_empty(),
                },
                Status::Timeout => RunStatus::Timeout {
                    limit_s: r.document.time_limit_s(),
                },
                Status::Failed => RunStatus::Failed,
            },
            metrics: r.metrics.clone(),
        })
        .collect()
}

/// Each flow's label and goodput of a flow-mix run's result; empty for other kinds.
fn flow_goodputs(result: Option<&WorkloadOutput>) -> Vec<(String, Option<f64>)> {
    match result {
        Some(WorkloadOutput::Flows(r)) => r
            .flows
            .iter()
            .map(|f| (f.label.clone(), f.goodput_mbps))
            .collect(),
        _ => Vec::new(),
    }
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

    /// `report --metrics goodput` (issue 61): refused, naming the recorded metric it is near,
    /// not an empty section and exit 0.
    #[test]
    fn a_metric_no_run_recorded_is_refused_with_the_names_near_it() {
        let run = RunRecord {
            key: "proto=h3;rep=1".into(),
            index: 0,
            setting: 0,
            setting_label: "setting 0".into(),
            protocol: "h3".into(),
            repetition: 1,
            status: crate::RunStatus::Ok,
            reason: None,
            flags: Vec::new(),
            metrics: [
                ("goodput_mbps".to_string(), 9.5),
                ("total_ms".to_string(), 1.0),
            ]
            .into_iter()
            .collect(),
            flows: Vec::new(),
            attempt: 1,
            time_limit_s: None,
        };
        let runs = [run];
        assert!(refuse_unrecorded_metrics(&[], &runs).is_ok());
        assert!(refuse_unrecorded_metrics(&["total_ms".into()], &runs).is_ok());
        let e = refuse_unrecorded_metrics(&["goodput_mbp".into()], &runs).unwrap_err();
        assert!(
            format!("{e}").contains("did you mean \"goodput_mbps\""),
            "{e}"
        );
        let e = refuse_unrecorded_metrics(&["plt".into()], &runs).unwrap_err();
        assert!(
            format!("{e}").contains("these runs recorded goodput_mbps, total_ms"),
            "{e}"
        );
    }
}
