//! Synthetic experiment data shared by the integration tests.

#![allow(dead_code)] // each test binary uses a different subset

use std::collections::BTreeMap;
use std::path::PathBuf;

use quiclab_report::{ReportInput, RunRecord, RunStatus, TimeSeries};

pub const SETTINGS: [&str; 2] = ["rate=10mbit, loss=0%", "rate=10mbit, loss=2%"];
pub const PROTOCOLS: [&str; 3] = ["h1", "h2", "h3"];
pub const FAILED_KEY: &str = "proto=h2;rate=10mbit;loss=2%;rep=5";
pub const FLAGGED_KEY: &str = "proto=h1;rate=10mbit;loss=0%;rep=2";
pub const SERIES_KEY: &str = "proto=h3;rate=10mbit;loss=2%;rep=1";
pub const EVIL_REASON: &str = "server said <script>alert(1)</script> & quit";

/// A fresh, empty directory under the system temp dir.
pub fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "quiclab-report-{name}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// 2 settings × 3 protocols × 5 repetitions. Download times: h1 ≈ 1000 ms,
/// h2 ≈ 900 ms, h3 ≈ 600 ms (with loss: h1 and h2 ≈ 1500 ms, h3 ≈ 700 ms),
/// ±4 % over the repetitions. One run failed (with markup in its reason),
/// one flagged; one time series pair for one run.
pub fn synthetic() -> ReportInput {
    let mut runs = Vec::new();
    let mut index = 0;
    for (s, label) in SETTINGS.iter().enumerate() {
        for rep in 1..=5u32 {
            for proto in PROTOCOLS {
                let base = match (s, proto) {
                    (0, "h1") => 1000.0,
                    (0, "h2") => 900.0,
                    (0, _) => 600.0,
                    (_, "h3") => 700.0,
                    _ => 1500.0,
                };
                let total = base * (1.0 + 0.02 * (rep as f64 - 3.0));
                let loss = if s == 0 { "0%" } else { "2%" };
                let key = format!("proto={proto};rate=10mbit;loss={loss};rep={rep}");
                let metrics: BTreeMap<String, f64> = [
                    ("total_ms", total),
                    ("ttfb_ms", total / 10.0),
                    ("goodput_mbps", 8.0 * 1000.0 / total),
                    // NaN must be ignored for this run only.
                    ("handshake_ms", if rep == 1 { f64::NAN } else { 30.0 }),
                ]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect();
                let mut run = RunRecord {
                    key: key.clone(),
                    index,
                    setting: s,
                    setting_label: label.to_string(),
                    protocol: proto.to_string(),
                    repetition: rep,
                    status: RunStatus::Ok,
                    reason: None,
                    flags: Vec::new(),
                    metrics,
                    flows: Vec::new(),
                    attempt: 1,
                    time_limit_s: None,
                };
                if key == FAILED_KEY {
                    run.status = RunStatus::Failed;
                    run.reason = Some(EVIL_REASON.to_string());
                }
                if key == FLAGGED_KEY {
                    run.flags = vec!["rate 12 % below target".to_string()];
                }
                runs.push(run);
                index += 1;
            }
        }
    }
    let series = vec![
        TimeSeries {
            run_key: SERIES_KEY.to_string(),
            name: "queue_delay_ms".to_string(),
            unit: "ms".to_string(),
            points: (0..200)
                .map(|i| (i as f64 * 0.01, 20.0 + 15.0 * ((i as f64) / 10.0).sin()))
                .collect(),
        },
        TimeSeries {
            run_key: SERIES_KEY.to_string(),
            name: "cwnd_bytes".to_string(),
            unit: "bytes".to_string(),
            points: (0..200)
                .map(|i| (i as f64 * 0.01, 14_720.0 + 1_200.0 * (i % 50) as f64))
                .collect(),
        },
    ];
    ReportInput {
        scenario_name: "loss-sweep <demo>".to_string(),
        description: "Three protocols, two loss rates.".to_string(),
        scenario_file: "scenarios/loss.toml".to_string(),
        scenario_text: "[grid]\nloss = [\"0%\", \"2%\"] # <b>not bold</b>\n".to_string(),
        environment: vec![
            ("quiclab".to_string(), "0.1.0 (git abc123)".to_string()),
            ("kernel".to_string(), "6.1.0".to_string()),
        ],
        runs,
        series,
        planned_runs: 30,
        traced_files: Default::default(),
    }
}

/// Number of `<svg` openings in `html`.
pub fn svg_count(html: &str) -> usize {
    html.matches("<svg ").count()
}
