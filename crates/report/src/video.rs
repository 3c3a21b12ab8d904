//! Sans-IO summary of video runs in the seed's table layout (seed 004, Tables 5–10): per setting
//! and player mix, the average bitrate of the downloaded segments as mean (standard deviation),
//! the mean wait after a seek, and the rebuffer rate (Eq. 1), each over the included runs; for
//! mixes, player 2's bitrate and Jain's index of the players' bitrates.

use quiclab_experiment::stats::{self, Summary};
use quiclab_model::video::{AVG_BITRATE_MBPS, REBUFFER_RATE};

use crate::{ReportInput, RunStatus};

/// One (setting, players) row.
#[derive(Debug, Clone, PartialEq)]
pub struct VideoRow {
    pub setting: usize,
    pub setting_label: String,
    pub players: String,
    pub runs: usize,
    pub bitrate: Option<Summary>,
    pub seek_wait: Option<Summary>,
    pub rebuffer_rate: Option<Summary>,
    pub bitrate_p2: Option<Summary>,
    pub jain_bitrate: Option<Summary>,
}

/// The rows, in setting then contender order (as first seen); empty when no run is a video run.
pub fn rows(input: &ReportInput, include_flagged: bool) -> Vec<VideoRow> {
    let is_video = |r: &crate::RunRecord| r.metrics.contains_key(AVG_BITRATE_MBPS.name);
    let mut keys: Vec<(usize, String)> = Vec::new();
    for r in input.runs.iter().filter(|r| is_video(r)) {
        let k = (r.setting, r.protocol.clone());
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    keys.sort_by_key(|k| k.0);
    keys.into_iter()
        .map(|(setting, players)| {
            let runs: Vec<_> = input
                .runs
                .iter()
                .filter(|r| r.setting == setting && r.protocol == players && is_video(r))
                .filter(|r| r.status == RunStatus::Ok && (include_flagged || r.flags.is_empty()))
                .collect();
            let metric = |m: &str| -> Option<Summary> {
                let v: Vec<f64> = runs
                    .iter()
                    .filter_map(|r| r.metrics.get(m).copied())
                    .collect();
                stats::summarize(&v)
            };
            VideoRow {
                setting,
                setting_label: input
                    .runs
                    .iter()
                    .find(|r| r.setting == setting)
                    .map(|r| r.setting_label.clone())
                    .unwrap_or_default(),
                players,
                runs: runs.len(),
                bitrate: metric(AVG_BITRATE_MBPS.name),
                seek_wait: metric("mean_seek_wait_s"),
                rebuffer_rate: metric(REBUFFER_RATE.name),
                bitrate_p2: metric("avg_bitrate_mbps_p2"),
                jain_bitrate: metric("jain_bitrate"),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::RunRecord;

    fn run(setting: usize, players: &str, rep: u32, bitrate: f64, wait: f64) -> RunRecord {
        RunRecord {
            key: format!("players={players};s={setting};rep={rep}"),
            index: 0,
            setting,
            setting_label: format!("profile=p{setting}"),
            protocol: players.into(),
            repetition: rep,
            status: RunStatus::Ok,
            reason: None,
            flags: Vec::new(),
            metrics: BTreeMap::from([
                ("avg_bitrate_mbps".to_string(), bitrate),
                ("mean_seek_wait_s".to_string(), wait),
                ("rebuffer_rate".to_string(), 0.01),
            ]),
            flows: Vec::new(),
            attempt: 1,
            time_limit_s: None,
        }
    }

    #[test]
    fn rows_hold_mean_and_spread_per_setting_and_players() {
        let mut failed = run(0, "h3", 3, 0.1, 99.0);
        failed.status = RunStatus::Failed;
        let input = ReportInput {
            runs: vec![
                run(0, "h1", 1, 3.0, 2.0),
                run(0, "h3", 1, 3.2, 1.0),
                run(0, "h1", 2, 3.4, 2.4),
                run(0, "h3", 2, 3.4, 1.2),
                failed,
                run(1, "h1", 1, 1.0, 3.0),
            ],
            ..ReportInput::default()
        };
        let rows = rows(&input, false);
        assert_eq!(rows.len(), 3);
        let h1 = &rows[0];
        assert_eq!((h1.players.as_str(), h1.runs), ("h1", 2));
        let b = h1.bitrate.as_ref().unwrap();
        assert!((b.mean - 3.2).abs() < 1e-12);
        assert!((b.std_dev - 0.08f64.sqrt()).abs() < 1e-9, "{}", b.std_dev);
        assert_eq!(rows[1].runs, 2, "the failed run is left out");
        assert!((rows[1].seek_wait.as_ref().unwrap().mean - 1.1).abs() < 1e-12);
        assert_eq!(rows[2].setting_label, "profile=p1");
        assert!(rows[0].jain_bitrate.is_none());
    }
}
