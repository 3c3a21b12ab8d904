//! The short table `quiclab demo` prints: per setting and contender, the summary of one metric
//! over the usable runs (ok and not flagged, as in the report), the median of a second one, and
//! the verdict of Megyesi et al.'s rule — only where every contender has the rule's minimum of
//! usable runs ([`WINS_MIN_RUNS`]). Pure: the caller prints it.

use std::collections::BTreeMap;

use quiclab_experiment::{MetricDef, Summary, Winners, summarize, winners};
use quiclab_results::{Status, StoredRun};

/// The fewest usable runs of each contender a setting needs before Megyesi et al.'s rule is
/// applied to it (see `quiclab_experiment::stats::WINS_MIN_RUNS`).
pub use quiclab_experiment::stats::WINS_MIN_RUNS;

/// One contender of one setting.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ContenderLine {
    pub contender: String,
    /// None: every run failed or was flagged.
    pub summary: Option<Summary>,
    /// The median of the second metric over the same runs.
    pub secondary_median: Option<f64>,
    /// The median's exact interval at 95 % (order statistics; the coverage it reaches, below
    /// 95 % for fewer than 6 runs); None for fewer than 2 runs.
    pub median_ci: Option<quiclab_verdict::rules::RatioInterval>,
    /// Runs of this contender left out: flagged for emulator fidelity; failed or timed out.
    pub flagged: usize,
    pub failed: usize,
}

/// One setting (grid point without the contender).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SettingSummary {
    pub label: String,
    pub lines: Vec<ContenderLine>,
    /// `h3 wins`, `no protocol wins`, or why there is no verdict.
    pub verdict: String,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RunsSummary {
    pub settings: Vec<SettingSummary>,
    /// Runs left out: failed, timed out or flagged.
    pub excluded: usize,
    /// Of those, the flagged ones (`--include-flagged` puts them in).
    pub flagged: usize,
    /// Settings whose verdict was withheld for too few usable runs.
    pub too_few: usize,
}

impl RunsSummary {
    /// What the table leaves out and why, for the lines under it: the runs left out (flagged
    /// apart from failed), and the settings without an answer, saying when the host was too
    /// noisy. `dir` is the results directory (for the `--include-flagged` hint).
    pub fn left_out_lines(&self, dir: &std::path::Path) -> String {
        let mut out = String::new();
        if self.excluded > 0 {
            out.push_str(&format!(
                "\n{} run(s) left out of these figures: {} flagged for emulator fidelity (the lab \
                 paused, as a hypervisor's steal in bursts does, or releases late; each flag says \
                 which), {} failed or timed out; the report lists them \
                 (`quiclab report {} --include-flagged` puts the flagged ones in).\n",
                self.excluded,
                self.flagged,
                self.excluded - self.flagged,
                dir.display()
            ));
        }
        if self.too_few > 0 {
            out.push_str(&format!(
                "\nNo answer for {} of {} setting(s): too few usable runs to apply the rule{}. \
                 Run again with more --repetitions, or on a quieter machine.\n",
                self.too_few,
                self.settings.len(),
                if self.flagged > 0 {
                    " — this host was too noisy for the emulator's fidelity checks during the \
                     runs left out"
                } else {
                    ""
                }
            ));
        }
        out
    }
}

/// The demo's table: the metric's median with its exact 95 % interval (never a mean's Student
/// interval, which at n = 2 reaches below zero for a time), the secondary metric's median, the
/// runs left out, and the verdict per setting.
impl std::fmt::Display for RunsSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "{:<10} {:<6} {:>3} {:>10} {:>24} {:>15} {:>9}",
            "setting",
            "proto",
            "n",
            "median ms",
            "median's 95 % interval",
            "goodput Mbit/s",
            "left out"
        )?;
        for setting in &self.settings {
            let label = &setting.label;
            for line in &setting.lines {
                let proto = &line.contender;
                let left_out = match (line.flagged, line.failed) {
                    (0, 0) => String::new(),
                    (f, 0) => format!("{f} flagged"),
                    (0, x) => format!("{x} failed"),
                    (f, x) => format!("{f} fl., {x} f."),
                };
                match &line.summary {
                    None => writeln!(
                        f,
                        "{label:<10} {proto:<6} {:>3} {:>10} {:>24} {:>15} {left_out:>9}",
                        0, "—", "(no usable run)", "—"
                    )?,
                    Some(s) => {
                        let interval = match &line.median_ci {
                            None => "— (one run)".to_string(),
                            Some(ci) if ci.reaches(0.95) => {
                                format!("{:.0}–{:.0}", ci.low, ci.high)
                            }
                            // Too few runs for 95 %: the range, with the coverage it has.
                            Some(ci) => {
                                format!("{:.0}–{:.0} ({:.0} %)", ci.low, ci.high, ci.level * 100.0)
                            }
                        };
                        writeln!(
                            f,
                            "{label:<10} {proto:<6} {:>3} {:>10.0} {interval:>24} {:>15.2} {left_out:>9}",
                            s.n,
                            s.median,
                            line.secondary_median.unwrap_or(f64::NAN)
                        )?
                    }
                }
            }
            writeln!(f, "{label:<10} → {}", setting.verdict)?;
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
    let mut flagged = 0;
    // (setting, contender) → (flagged, failed) runs left out.
    let mut left_out: BTreeMap<(usize, String), (usize, usize)> = BTreeMap::new();
    for r in runs {
        // Every setting and contender gets a line, even when none of its runs is usable.
        let entry = values
            .entry((r.setting, r.setting_label.clone()))
            .or_default()
            .entry(r.contender.clone())
            .or_default();
        let out = left_out
            .entry((r.setting, r.contender.clone()))
            .or_default();
        if r.status() != Status::Ok {
            excluded += 1;
            out.1 += 1;
            continue;
        }
        if !r.flags.is_empty() {
            excluded += 1;
            flagged += 1;
            out.0 += 1;
            continue;
        }
        entry.0.extend(r.metrics.get(metric));
        entry.1.extend(r.metrics.get(secondary));
    }
    let mut too_few = 0;
    let settings: Vec<SettingSummary> = values
        .into_iter()
        .map(|((setting, label), by_contender)| {
            let usable: BTreeMap<String, Vec<f64>> = by_contender
                .iter()
                .filter(|(_, (v, _))| !v.is_empty())
                .map(|(c, (v, _))| (c.clone(), v.clone()))
                .collect();
            let fewest = by_contender
                .iter()
                .map(|(c, (v, _))| (v.len(), c.as_str()))
                .min();
            let verdict = match (winners(&usable), fewest) {
                _ if usable.len() < by_contender.len() => {
                    too_few += 1;
                    "no verdict: a protocol has no usable run".to_string()
                }
                (_, Some((n, c))) if n < WINS_MIN_RUNS => {
                    too_few += 1;
                    format!(
                        "too few runs (n = {n} of {c}) to apply Megyesi et al.'s rule, which \
                         needs {WINS_MIN_RUNS} usable runs of each protocol"
                    )
                }
                (Winners::Best(p), _) => format!(
                    "{} wins (Megyesi et al.'s rule: ≥ 70 % of its runs ≥ 10 % faster than the \
                     other's mean)",
                    p.join(" and ")
                ),
                (Winners::Equal, _) => "no protocol wins (Megyesi et al.'s rule: none has ≥ 70 % \
                                        of its runs ≥ 10 % faster than the other's mean)"
                    .to_string(),
            };
            let lines = by_contender
                .into_iter()
                .map(|(contender, (v, s))| {
                    let (flagged, failed) = left_out
                        .get(&(setting, contender.clone()))
                        .copied()
                        .unwrap_or_default();
                    ContenderLine {
                        summary: summarize(&v),
                        median_ci: (v.len() >= 2)
                            .then(|| quiclab_verdict::rules::median_interval(&v, 0.95))
                            .flatten(),
                        secondary_median: summarize(&s).map(|s| s.median),
                        contender,
                        flagged,
                        failed,
                    }
                })
                .collect();
            SettingSummary {
                label,
                lines,
                verdict,
            }
        })
        .collect();
    RunsSummary {
        settings,
        excluded,
        flagged,
        too_few,
    }
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
    fn a_clearly_faster_contender_wins_only_from_enough_runs_and_unusable_runs_are_left_out() {
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
        // Three usable runs each: below the rule's minimum, no winner is named.
        assert!(
            s.settings[0]
                .verdict
                .starts_with("too few runs (n = 3 of h1) to apply"),
            "{}",
            s.settings[0].verdict
        );
        runs.push(run(0, "h1", 206.0, Status::Ok));
        runs.push(run(0, "h3", 103.0, Status::Ok));
        let s = summarize_runs(&runs, &TOTAL_MS, &GOODPUT_MBPS);
        assert!(
            s.settings[0].verdict.starts_with("h3 wins"),
            "{}",
            s.settings[0].verdict
        );
        let h3 = &s.settings[0].lines[1];
        assert_eq!(h3.contender, "h3");
        assert_eq!(h3.summary.as_ref().unwrap().n, 4);
        assert_eq!(h3.summary.as_ref().unwrap().median, 101.5);
        assert_eq!(h3.failed, 1);
        // Four runs: the range, which covers the median with 87.5 %, not a mean's interval.
        let ci = h3.median_ci.as_ref().unwrap();
        assert_eq!((ci.low, ci.high), (100.0, 103.0));
        assert!((ci.level - 0.875).abs() < 1e-9);
        assert!(s.to_string().contains("100–103 (88 %)"), "{s}");
        assert_eq!(h3.secondary_median, Some(8.0));
        // A contender without a usable run gets a line and no verdict is given.
        assert!(s.settings[1].lines[1].summary.is_none());
        assert!(s.settings[1].verdict.starts_with("no verdict"));
    }
}
