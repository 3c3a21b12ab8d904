//! What each network switch cost a download: its interruption, its recovery, the connections it
//! took and whether the connection migrated. Computed from the client's report (progress,
//! connections, migrations, on the emulator's clock) and the schedule.

use quiclab_lab::switcher::AppliedSwitch;
use quiclab_link::switch::SwitchSchedule;
use quiclab_stacks::switching::SwitchDownloadReport;
use serde::Serialize;

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
#[derive(Debug, Clone, PartialEq, Serialize)]
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
    /// The connection moved to the new address (a migration without error) and no new connection
    /// was needed.
    pub migrated: bool,
}

/// Body bytes at time `t` (s) by the progress points (cumulative, in time order).
fn bytes_at(progress: &[(f64, u64)], t: f64) -> u64 {
    progress
        .iter()
        .take_while(|(pt, _)| *pt <= t)
        .last()
        .map_or(0, |p| p.1)
}

/// The outcome of every switch of `schedule` that fell within the download.
pub fn outcomes(
    schedule: &SwitchSchedule,
    applied: &[AppliedSwitch],
    report: &SwitchDownloadReport,
) -> Vec<SwitchOutcome> {
    let switches = schedule.switches();
    let progress = &report.progress;
    let start = report.connections.first().map_or(0.0, |c| c.opened_s);
    let end = progress.last().map_or(start, |p| p.0);
    let mut out = Vec::new();
    for (i, sw) in switches.iter().enumerate() {
        let at = sw.at as f64 / 1e9;
        if at < start || (report.complete && at > end) {
            continue;
        }
        let next = switches
            .get(i + 1)
            .map_or(f64::INFINITY, |n| n.at as f64 / 1e9);
        // The longest pause in the body's arrival that ends after the switch and starts before
        // the next one. Not simply "last byte before → first byte after": the application may
        // still read bytes that arrived before the switch a moment after it, and the real pause
        // then follows.
        let mut interruption_s: Option<f64> = None;
        let mut prev = start;
        for &(t, _) in progress.iter().take_while(|p| p.0 < next) {
            if t > at {
                let gap = t - prev;
                interruption_s = Some(interruption_s.map_or(gap, |g: f64| g.max(gap)));
            }
            prev = t;
        }
        // A download that stopped for good in this switch's time has an open pause: no
        // interruption can be given (it did not end).
        if !report.complete && end < next && end >= at - DIED_TOLERANCE_S {
            interruption_s = None;
        }
        let before_from = (at - BEFORE_WINDOW_S).max(start);
        let before_bps = (at > before_from).then(|| {
            (bytes_at(progress, at) - bytes_at(progress, before_from)) as f64 * 8.0
                / (at - before_from)
        });
        let new_rate = schedule.network_at(sw.at).step.rate_bps.map(|r| r as f64);
        let target = match (before_bps, new_rate) {
            (Some(b), Some(r)) => Some(b.min(r)),
            (Some(b), None) => Some(b),
            _ => None,
        }
        .filter(|t| *t > 0.0);
        let recovery_s = target.and_then(|target| {
            progress
                .iter()
                .filter(|p| p.0 - RECOVERY_WINDOW_S >= at)
                .find(|p| {
                    let bits = (p.1 - bytes_at(progress, p.0 - RECOVERY_WINDOW_S)) as f64 * 8.0;
                    bits / RECOVERY_WINDOW_S >= RECOVERY_SHARE * target
                })
                .map(|p| p.0 - at)
        });
        let connections_opened = report
            .connections
            .iter()
            .filter(|c| c.opened_s >= at && c.opened_s < next)
            .count();
        let migrated = connections_opened == 0
            && report
                .migrations
                .iter()
                .any(|m| m.error.is_none() && m.at_s >= at && m.at_s < next);
        out.push(SwitchOutcome {
            at_s: at,
            from: sw.from.clone(),
            to: sw.to.clone(),
            applied_s: applied
                .iter()
                .find(|a| a.epoch == sw.epoch && a.error.is_none())
                .map(|a| a.applied_s),
            interruption_s,
            recovery_s,
            recovery_target_mbps: target.map(|t| t / 1e6),
            connections_opened,
            migrated,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use quiclab_stacks::switching::{ConnectionRecord, MigrationRecord};

    /// 1 Mbit/s of progress (12.5 kB every 0.1 s) over `[from, to)`, continuing from `bytes`.
    fn steady(from: f64, to: f64, mut bytes: u64) -> Vec<(f64, u64)> {
        let mut v = Vec::new();
        let mut t = from;
        while t < to - 1e-9 {
            bytes += 12_500;
            v.push((t, bytes));
            t += 0.1;
        }
        v
    }

    fn conn(at: f64) -> ConnectionRecord {
        ConnectionRecord {
            opened_s: at,
            ready_s: Some(at + 0.1),
            ..Default::default()
        }
    }

    #[test]
    fn a_reconnect_after_a_stall_has_its_interruption_recovery_and_connection() {
        let schedule = SwitchSchedule::parse("wifi@0s,lte@10s", 0).unwrap();
        // 1 Mbit/s until 10 s, nothing until 15.2 s (a 5 s stall timeout and a handshake), then
        // 1 Mbit/s again on a connection opened at 15 s.
        let mut progress = steady(1.0, 10.0, 0);
        let last = progress.last().unwrap().1;
        progress.extend(steady(15.2, 20.0, last));
        let report = SwitchDownloadReport {
            bytes: progress.last().unwrap().1,
            complete: true,
            verified: true,
            progress,
            connections: vec![conn(0.5), conn(15.0)],
            migrations: Vec::new(),
            error: None,
        };
        let o = outcomes(&schedule, &[], &report);
        assert_eq!(o.len(), 1);
        // Bytes read a moment after the switch (they had arrived before it) do not hide the
        // pause that follows.
        let mut late = report.clone();
        late.progress.push((10.0005, late.progress[89].1));
        late.progress.sort_by(|a, b| a.0.total_cmp(&b.0));
        let i = outcomes(&schedule, &[], &late)[0].interruption_s.unwrap();
        assert!((i - 5.1995).abs() < 1e-6, "{i}");
        let o = &o[0];
        assert_eq!((o.from.as_str(), o.to.as_str()), ("wifi", "lte"));
        let i = o.interruption_s.unwrap();
        assert!((i - 5.3).abs() < 1e-6, "{i}");
        // The pre-switch goodput (1 Mbit/s) is reached by the first full window after 15.2 s.
        let r = o.recovery_s.unwrap();
        assert!(r > 5.5 && r < 6.5, "{r}");
        let target = o.recovery_target_mbps.unwrap();
        assert!((target - 1.0).abs() < 0.1, "{target}");
        assert_eq!(o.connections_opened, 1);
        assert!(!o.migrated);
    }

    #[test]
    fn a_migration_without_a_new_connection_counts_as_migrated() {
        let schedule = SwitchSchedule::parse("wifi@0s,3g@4s,wifi@8s", 0).unwrap();
        let mut progress = steady(0.5, 4.0, 0);
        let last = progress.last().unwrap().1;
        progress.extend(steady(4.25, 12.0, last));
        let report = SwitchDownloadReport {
            bytes: progress.last().unwrap().1,
            complete: true,
            verified: true,
            progress,
            connections: vec![conn(0.2)],
            migrations: vec![MigrationRecord {
                at_s: 4.05,
                local: "100.64.0.17".into(),
                error: None,
            }],
            error: None,
        };
        let o = outcomes(&schedule, &[], &report);
        assert_eq!(o.len(), 2);
        assert!(o[0].migrated && o[0].connections_opened == 0);
        assert!((o[0].interruption_s.unwrap() - 0.35).abs() < 1e-6);
        // The second switch had no migration record: not migrated, though no connection opened.
        assert!(!o[1].migrated);
        // A download that ended before a switch has no outcome for it.
        let short = SwitchDownloadReport {
            progress: steady(0.5, 3.0, 0),
            complete: true,
            connections: vec![conn(0.2)],
            ..Default::default()
        };
        assert!(outcomes(&schedule, &[], &short).is_empty());
    }
}
