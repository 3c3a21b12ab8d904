//! Network switches as a result reports them.

use serde::{Deserialize, Serialize};

use crate::{MetricDef, TimeSeries};

/// The window over which goodput is judged to have recovered (s).
pub const RECOVERY_WINDOW_S: f64 = 1.0;

/// Recovered: a window's goodput reaches this share of the target.
pub const RECOVERY_SHARE: f64 = 0.8;

/// Bytes read this long after a switch may still have arrived before it (s): a download whose
/// last byte is within it stopped at that switch.
pub const DIED_TOLERANCE_S: f64 = 0.5;

/// The pre-switch goodput is measured over this long before the switch (s).
pub const BEFORE_WINDOW_S: f64 = 2.0;

/// One switch as the download lived it (the `switches` list of `quiclab bulk --json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SwitchOutcome {
    /// The switch instant (s on the emulator's clock).
    pub at_s: f64,
    pub from: String,
    pub to: String,
    /// When the lab had moved the client's addresses (s), if it did.
    pub applied_s: Option<f64>,
    /// The longest pause in the body's arrival (as the application reads it) that ends after
    /// the switch and starts before the next one: for a reconnect, about the stall timeout plus
    /// the handshakes. None: no byte arrived after the switch.
    pub interruption_s: Option<f64>,
    /// Switch → the end of the first window of [`RECOVERY_WINDOW_S`] after it whose goodput
    /// reaches [`RECOVERY_SHARE`] of the target: the goodput over [`BEFORE_WINDOW_S`] before the
    /// switch, capped at the new network's rate. None: not within the download.
    pub recovery_s: Option<f64>,
    /// The target goodput of the recovery (Mbit/s).
    pub recovery_target_mbps: Option<f64>,
    /// Connections opened between this switch and the next.
    pub connections_opened: usize,
    /// Body bytes that had arrived and were fetched again (a video segment given up after the
    /// switch is asked again whole; a bulk download resumes by Range: 0).
    pub refetched_bytes: u64,
    /// The connection moved to the new address (a migration without error) and no new connection
    /// was needed.
    pub migrated: bool,
}

/// The series `network_switch`: 1 at each switch instant (s), 0 elsewhere up to `end`; the
/// report draws it as vertical lines across a run's figures.
pub fn switch_marks(at_s: impl IntoIterator<Item = f64>, end: f64) -> TimeSeries {
    let mut points = vec![(0.0, 0.0)];
    for at in at_s {
        if at <= end {
            points.extend([(at, 0.0), (at, 1.0), (at, 0.0)]);
        }
    }
    points.push((end, 0.0));
    TimeSeries {
        name: "network_switch".into(),
        unit: String::new(),
        points,
    }
}

/// A run's switch metrics: over its switches' outcomes.
#[derive(Debug, Clone, Copy, Default)]
pub struct SwitchFigures {
    pub mean_interruption_s: Option<f64>,
    pub max_interruption_s: Option<f64>,
    pub mean_recovery_s: Option<f64>,
    pub connections_used: Option<f64>,
    pub refetched_bytes: Option<f64>,
}

/// The switch metrics bulk and video runs declare, in [`SwitchFigures::metric_values`]' order.
pub const METRICS: [MetricDef; 4] = [
    MetricDef::lower("mean_interruption_s", "Interruption per switch (mean)", "s"),
    MetricDef::lower("max_interruption_s", "Interruption per switch (max)", "s"),
    MetricDef::lower("mean_recovery_s", "Recovery per switch (mean)", "s"),
    MetricDef::lower("connections_used", "Connections used", ""),
];

impl SwitchFigures {
    /// The values of [`METRICS`].
    pub fn metric_values(&self) -> [(&'static str, Option<f64>); 4] {
        [
            (METRICS[0].name, self.mean_interruption_s),
            (METRICS[1].name, self.max_interruption_s),
            (METRICS[2].name, self.mean_recovery_s),
            (METRICS[3].name, self.connections_used),
        ]
    }

    /// None everywhere without switches; `connections`: how many the client opened in all.
    pub fn of(switches: Option<&[SwitchOutcome]>, connections: Option<usize>) -> SwitchFigures {
        let Some(sw) = switches else {
            return SwitchFigures::default();
        };
        let inter: Vec<f64> = sw.iter().filter_map(|s| s.interruption_s).collect();
        let rec: Vec<f64> = sw.iter().filter_map(|s| s.recovery_s).collect();
        let mean = |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
        SwitchFigures {
            mean_interruption_s: mean(&inter),
            max_interruption_s: inter.iter().copied().reduce(f64::max),
            mean_recovery_s: mean(&rec),
            connections_used: connections.map(|c| c as f64),
            refetched_bytes: Some(sw.iter().map(|s| s.refetched_bytes).sum::<u64>() as f64),
        }
    }
}
