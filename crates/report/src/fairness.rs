//! Sans-IO fairness summary of flow-mix runs: per setting and mix, each flow's goodput (its
//! summary and the values, for the median's exact interval), the first flow's goodput over the others' mean, and Jain's index (over
//! the window means and per bin), each over the included runs.

use quiclab_experiment::stats::{self, Summary};

use crate::{ReportInput, RunStatus};

/// One (setting, mix) row.
#[derive(Debug, Clone, PartialEq)]
pub struct FairnessRow {
    pub setting: usize,
    pub setting_label: String,
    pub mix: String,
    /// Runs included (ok, and not flagged unless flagged runs are included).
    pub runs: usize,
    /// Per flow position: its label and goodput summary (Mbit/s).
    pub flows: Vec<(String, Option<Summary>)>,
    /// Per flow position: the included runs' goodputs (for the median's exact interval).
    pub flow_values: Vec<Vec<f64>>,
    pub ratio_first_rest: Option<Summary>,
    pub jain: Option<Summary>,
    pub jain_bins: Option<Summary>,
}

/// The rows, in setting then mix order (mixes as first seen); empty when no run has flows.
pub fn rows(input: &ReportInput, include_flagged: bool) -> Vec<FairnessRow> {
    let mut out: Vec<FairnessRow> = Vec::new();
    let mut keys: Vec<(usize, String)> = Vec::new();
    for r in &input.runs {
        if r.flows.is_empty() {
            continue;
        }
        let k = (r.setting, r.protocol.clone());
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    keys.sort_by_key(|k| k.0);
    for (setting, mix) in keys {
        let runs: Vec<_> = input
            .runs
            .iter()
            .filter(|r| r.setting == setting && r.protocol == mix && !r.flows.is_empty())
            .filter(|r| r.status == RunStatus::Ok && (include_flagged || r.flags.is_empty()))
            .collect();
        let label = input
            .runs
            .iter()
            .find(|r| r.setting == setting)
            .map(|r| r.setting_label.clone())
            .unwrap_or_default();
        let n_flows = runs.iter().map(|r| r.flows.len()).max().unwrap_or(0);
        let flow_values: Vec<Vec<f64>> = (0..n_flows)
            .map(|i| {
                runs.iter()
                    .filter_map(|r| r.flows.get(i).and_then(|f| f.1))
                    .collect()
            })
            .collect();
        let flows = flow_values
            .iter()
            .enumerate()
            .map(|(i, values)| {
                let name = runs
                    .iter()
                    .find_map(|r| r.flows.get(i).map(|f| f.0.clone()))
                    .unwrap_or_default();
                (name, stats::summarize(values))
            })
            .collect();
        let metric = |m: &str| -> Option<Summary> {
            let v: Vec<f64> = runs
                .iter()
                .filter_map(|r| r.metrics.get(m).copied())
                .collect();
            stats::summarize(&v)
        };
        out.push(FairnessRow {
            setting,
            setting_label: label,
            mix,
            runs: runs.len(),
            flows,
            flow_values,
            ratio_first_rest: metric("ratio_first_rest"),
            jain: metric(quiclab_model::flows::JAIN.name),
            jain_bins: metric("jain_bins"),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::RunRecord;

    fn run(setting: usize, mix: &str, rep: u32, flows: &[(&str, f64)], jain: f64) -> RunRecord {
        RunRecord {
            key: format!("flows={mix};s={setting};rep={rep}"),
            index: 0,
            setting,
            setting_label: format!("setting {setting}"),
            protocol: mix.into(),
            repetition: rep,
            status: RunStatus::Ok,
            reason: None,
            flags: Vec::new(),
            metrics: BTreeMap::from([("jain".to_string(), jain)]),
            attempt: 1,
            time_limit_s: None,
            flows: flows
                .iter()
                .map(|(l, g)| (l.to_string(), Some(*g)))
                .collect(),
        }
    }

    #[test]
    fn rows_summarise_each_flow_position_over_the_included_runs() {
        let mut flagged = run(0, "h3+h1", 3, &[("1 h3", 100.0), ("2 h1", 0.0)], 0.5);
        flagged.flags.push("lateness".into());
        let input = ReportInput {
            runs: vec![
                run(0, "h3+h1", 1, &[("1 h3", 3.0), ("2 h1", 1.0)], 0.8),
                run(0, "h3+h1", 2, &[("1 h3", 5.0), ("2 h1", 1.0)], 0.7),
                flagged,
                run(1, "h3+h1", 1, &[("1 h3", 2.0), ("2 h1", 2.0)], 1.0),
            ],
            ..ReportInput::default()
        };
        let rows = rows(&input, false);
        assert_eq!(rows.len(), 2);
        let r = &rows[0];
        assert_eq!((r.runs, r.mix.as_str()), (2, "h3+h1"));
        assert_eq!(r.flows[0].0, "1 h3");
        assert_eq!(r.flows[0].1.as_ref().unwrap().mean, 4.0);
        assert_eq!(r.flows[1].1.as_ref().unwrap().mean, 1.0);
        assert!((r.jain.as_ref().unwrap().mean - 0.75).abs() < 1e-12);
        assert_eq!(rows[1].jain.as_ref().unwrap().mean, 1.0);
        // With flagged runs included, the third run counts.
        assert_eq!(super::rows(&input, true)[0].runs, 3);
    }
}
