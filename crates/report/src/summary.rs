//! The short table `quiclab demo` prints: per setting and contender, the summary of one metric
//! over the usable runs (ok and not flagged, as in the report), the median of a second one, and
//! the verdict of Megyesi et al.'s rule. Pure: the caller prints it.

use std::collections::BTreeMap;

use quiclab_experiment::{MetricDef, Summary, Winners, summarize, winners};
use quiclab_results::{Status, StoredRun};

/// One contender of one setting.
#[derive(Debug, Clone, PartialEq)]
pub struct ContenderLine {
    pub contender: String,
    /// None: every run failed or was flagged.
    pub summary: Option<Summary>,
    /// The median of the second metric over the same runs.
    pub secondary_median: Option<f64>,
}

/// One setting (grid point without the contender).
#[derive(Debug, Clone, PartialEq)]
pub struct SettingSummary {
    pub label: String,
    pub lines: Vec<ContenderLine>,
    /// `h3 wins`, `no protocol wins`, or why there is no verdict.
    pub verdict: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RunsSummary {
    pub settings: Vec<SettingSummary>,
    /// Runs left out: failed, timed out or flagged.
    pub excluded: usize,
}

/// The demo's table: median and mean (95 % CI) of the metric, the secondary metric's median, and
/// the verdict per setting.
impl std::fmt::Display for RunsSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "{:<10} {:<6} {:>3} {:>14} {:>22} {:>15}",
            "setting", "proto", "n", "median ms", "mean ms (95 % CI)", "goodput Mbit/s"
        )?;
        for setting in &self.settings {
            let label = &setting.label;
            for line in &setting.lines {
                let proto = &line.contender;
                match &line.summary {
                    None => writeln!(
                        f,
                        "{label:<10} {proto:<6} {:>3} {:>14} (every run failed or was flagged)",
                        0, "—"
                    )?,
                    Some(s) => writeln!(
                        f,
                        "{label:<10} {proto:<6} {:>3} {:>14.0} {:>8.0} ({:>5.0}–{:<5.0}) {:>15.2}",
                        s.n,
                        s.median,
                        s.mean,
                        s.ci95_low,
                        s.ci95_high,
                        line.secondary_median.unwrap_or(f64::NAN)
                    )?,
                }
            }
            writeln!(
                f,
                "{label:<10} → {} (Megyesi et al.'s rule: ≥ 70 % of its runs ≥ 10 % faster than the other's mean)",
                setting.verdict
            )?;
        }
        Ok(())
    }
}

/// Summarises `metric` (lower is better, as the wins rule assumes) and the median of `secondary`
/// per setting and contender.
pub fn summarize_runs<R>(
    runs: &[StoredRun<R>],
    metric: &MetricDef,
    secondary: &MetricDef,
) -> RunsSummary {
    let (metric, secondary) = (metric.name, secondary.name);
    // (setting, label) → contender → (metric values, secondary values).
    type Values = (Vec<f64>, Vec<f64>);
    let mut values: BTreeMap<(usize, String), BTreeMap<String, Values>> = BTreeMap::new();
    let mut excluded = 0;
    for r in runs {
        // Every setting and contender gets a line, even when none of its runs is usable.
        let entry = values
            .entry((r.setting, r.setting_label.clone()))
            .or_default()
            .entry(r.contender.clone())
            .or_default();
        if r.status() != Status::Ok || !r.flags.is_empty() {
            excluded += 1;
            continue;
        }
        entry.0.extend(r.metrics.get(metric));
        entry.1.extend(r.metrics.get(secondary));
    }
    let settings = values
        .into_iter()
        .map(|((_, label), by_contender)| {
            let usable: BTreeMap<String, Vec<f64>> = by_contender
                .iter()
                .filter(|(_, (v, _))| !v.is_empty())
                .map(|(c, (v, _))| (c.clone(), v.clone()))
                .collect();
            let verdict = match winners(&usable) {
                _ if usable.len() < by_contender.len() => {
                    "no verdict: a protocol has no usable run".to_string()
                }
                Winners::Best(p) => format!("{} wins", p.join(" and ")),
                Winners::Equal => "no protocol wins".to_string(),
            };
            let lines = by_contender
                .into_iter()
                .map(|(contender, (v, s))| ContenderLine {
                    contender,
                    summary: summarize(&v),
                    secondary_median: summarize(&s).map(|s| s.median),
                })
                .collect();
            SettingSummary {
                label,
                lines,
                verdict,
            }
        })
        .collect();
    RunsSummary { settings, excluded }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quiclab_model::bulk::{GOODPUT_MBPS, TOTAL_MS};

    fn run(setting: usize, contender: &str, total: f64, status: Status) -> StoredRun {
        StoredRun {
            setting,
            setting_label: format!("s{setting}"),
            metrics: BTreeMap::from([
                ("total_ms".to_string(), total),
                ("goodput_mbps".to_string(), 8.0),
            ]),
            ..StoredRun::example(
                &format!("{contender}-{setting}-{total}"),
                contender,
                1,
                status,
            )
        }
    }

    #[test]
    fn a_clearly_faster_contender_wins_and_unusable_runs_are_left_out() {
        let mut runs = Vec::new();
        for t in [100.0, 101.0, 102.0] {
            runs.push(run(0, "h1", t * 2.0, Status::Ok));
            runs.push(run(0, "h3", t, Status::Ok));
        }
        runs.push(run(0, "h3", 10.0, Status::Failed));
        runs.push(run(1, "h1", 100.0, Status::Ok));
        runs.push(run(1, "h3", 100.0, Status::Timeout));
        let s = summarize_runs(&runs, &TOTAL_MS, &GOODPUT_MBPS);
        assert_eq!(s.excluded, 2);
        assert_eq!(s.settings.len(), 2);
        assert_eq!(s.settings[0].verdict, "h3 wins");
        let h3 = &s.settings[0].lines[1];
        assert_eq!(h3.contender, "h3");
        assert_eq!(h3.summary.as_ref().unwrap().n, 3);
        assert_eq!(h3.summary.as_ref().unwrap().median, 101.0);
        assert_eq!(h3.secondary_median, Some(8.0));
        // A contender without a usable run gets a line and no verdict is given.
        assert!(s.settings[1].lines[1].summary.is_none());
        assert!(s.settings[1].verdict.starts_with("no verdict"));
    }
}
