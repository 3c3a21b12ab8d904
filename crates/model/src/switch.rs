//! Network switches as a result reports them.

use serde::{Deserialize, Serialize};

use crate::{Metric, MetricDef, TimeSeries};

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

/// A result that may have lived through network switches (bulk and video).
pub trait WithSwitches {
    fn switch_figures(&self) -> SwitchFigures;
}

/// The switch metric rows bulk and video runs declare (None without switches).
pub const fn metrics<R: WithSwitches>() -> [Metric<R>; 4] {
    [
        Metric::of(
            MetricDef::lower("mean_interruption_s", "Interruption per switch (mean)", "s"),
            |r| r.switch_figures().mean_interruption_s,
        ),
        Metric::of(
            MetricDef::lower("max_interruption_s", "Interruption per switch (max)", "s"),
            |r| r.switch_figures().max_interruption_s,
        ),
        Metric::of(
            MetricDef::lower("mean_recovery_s", "Recovery per switch (mean)", "s"),
            |r| r.switch_figures().mean_recovery_s,
        ),
        Metric::of(
            MetricDef::lower("connections_used", "Connections used", ""),
            |r| r.switch_figures().connections_used,
        ),
    ]
}

impl SwitchFigures {
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

// ---- what each switch cost (computed from a client's timeline and the schedule) -----------

use crate::fidelity::AppliedSwitch;
use crate::records::{ConnectionRecord, MigrationRecord, SwitchDownloadReport, VideoSwitchLog};
use quiclab_link::switch::SwitchSchedule;

/// Body bytes at time `t` (s) by the progress points (cumulative, in time order).
fn bytes_at(progress: &[(f64, u64)], t: f64) -> u64 {
    progress
        .iter()
        .take_while(|(pt, _)| *pt <= t)
        .last()
        .map_or(0, |p| p.1)
}

/// How one client lived through the switches, on the emulator's clock (s).
pub struct Timeline<'a> {
    /// (s, body bytes so far), in time order.
    pub progress: &'a [(f64, u64)],
    /// When the client started waiting for bytes after being idle (a video segment request): a
    /// pause in the bytes counts from the later of the last byte and the request. Empty for a
    /// download that waits from its first connection to its end.
    pub requests: &'a [f64],
    pub connections: &'a [ConnectionRecord],
    pub migrations: &'a [MigrationRecord],
    /// (s, bytes) thrown away and fetched again.
    pub refetched: &'a [(f64, u64)],
    /// Whether the client got all it wanted.
    pub complete: bool,
    /// How recovery is judged: by the goodput of windows (a download that is never idle) or by
    /// the throughput of whole requests (a video player, idle between segments).
    pub recovery: Recovery<'a>,
}

/// What "back to the pre-switch throughput" is measured on.
pub enum Recovery<'a> {
    /// Goodput over windows of [`RECOVERY_WINDOW_S`].
    Windows,
    /// Each request's (start s, end s, bytes): the throughput of the segments completed in
    /// [`BEFORE_WINDOW_S`] × 2 before the switch is the target; the first request completed
    /// after the switch that reaches [`RECOVERY_SHARE`] of it ends the recovery.
    Requests(&'a [(f64, f64, u64)]),
}

impl<'a> Timeline<'a> {
    /// A bulk download's timeline.
    pub fn of_download(r: &'a SwitchDownloadReport) -> Timeline<'a> {
        Timeline {
            progress: &r.progress,
            requests: &[],
            connections: &r.connections,
            migrations: &r.migrations,
            refetched: &[],
            complete: r.complete,
            recovery: Recovery::Windows,
        }
    }

    /// A video player's timeline; `segments`: (request s, done s, bytes) on the emulator's clock.
    pub fn of_player(
        log: &'a VideoSwitchLog,
        segments: &'a [(f64, f64, u64)],
        complete: bool,
    ) -> Timeline<'a> {
        Timeline {
            progress: &log.progress,
            requests: &log.requests,
            connections: &log.connections,
            migrations: &log.migrations,
            refetched: &log.refetched,
            complete,
            recovery: Recovery::Requests(segments),
        }
    }
}

/// The outcome of every switch of `schedule` that fell within the download.
pub fn outcomes(
    schedule: &SwitchSchedule,
    applied: &[AppliedSwitch],
    timeline: &Timeline<'_>,
) -> Vec<SwitchOutcome> {
    let switches = schedule.switches();
    let progress = timeline.progress;
    let start = timeline.connections.first().map_or(0.0, |c| c.opened_s);
    let end = progress.last().map_or(start, |p| p.0);
    let mut out = Vec::new();
    for (i, sw) in switches.iter().enumerate() {
        let at = sw.at as f64 / 1e9;
        if at < start || (timeline.complete && at > end) {
            continue;
        }
        let next = switches
            .get(i + 1)
            .map_or(f64::INFINITY, |n| n.at as f64 / 1e9);
        // The longest pause in the body's arrival that ends after the switch and starts before
        // the next one. Not simply "last byte before → first byte after": the application may
        // still read bytes that arrived before the switch a moment after it, and the real pause
        // then follows. An idle client is not paused: a pause starts no earlier than the
        // request being waited for.
        let mut interruption_s: Option<f64> = None;
        let mut prev = start;
        for &(t, _) in progress.iter().take_while(|p| p.0 < next) {
            let asked = timeline
                .requests
                .iter()
                .take_while(|&&r| r <= t)
                .last()
                .copied()
                .unwrap_or(start);
            if t > at {
                let gap = t - prev.max(asked);
                interruption_s = Some(interruption_s.map_or(gap, |g: f64| g.max(gap)));
            }
            prev = t;
        }
        // A download that stopped for good in this switch's time has an open pause: no
        // interruption can be given (it did not end).
        if !timeline.complete && end < next && end >= at - DIED_TOLERANCE_S {
            interruption_s = None;
        }
        let new_rate = schedule.network_at(sw.at).step.rate_bps.map(|r| r as f64);
        let cap = |before: Option<f64>| {
            match (before, new_rate) {
                (Some(b), Some(r)) => Some(b.min(r)),
                (b, _) => b,
            }
            .filter(|t| *t > 0.0)
        };
        let (target, recovery_s) = match timeline.recovery {
            Recovery::Windows => {
                let before_from = (at - BEFORE_WINDOW_S).max(start);
                let before_bps = (at > before_from).then(|| {
                    (bytes_at(progress, at) - bytes_at(progress, before_from)) as f64 * 8.0
                        / (at - before_from)
                });
                let target = cap(before_bps);
                let recovery_s = target.and_then(|target| {
                    progress
                        .iter()
                        .filter(|p| p.0 - RECOVERY_WINDOW_S >= at)
                        .find(|p| {
                            let bits =
                                (p.1 - bytes_at(progress, p.0 - RECOVERY_WINDOW_S)) as f64 * 8.0;
                            bits / RECOVERY_WINDOW_S >= RECOVERY_SHARE * target
                        })
                        .map(|p| p.0 - at)
                });
                (target, recovery_s)
            }
            Recovery::Requests(requests) => {
                let rate = |r: &(f64, f64, u64)| r.2 as f64 * 8.0 / (r.1 - r.0).max(1e-6);
                let before: Vec<&(f64, f64, u64)> = requests
                    .iter()
                    .filter(|r| r.1 <= at && r.1 >= at - 2.0 * BEFORE_WINDOW_S)
                    .collect();
                let before_bps = (!before.is_empty()).then(|| {
                    before.iter().map(|r| r.2).sum::<u64>() as f64 * 8.0
                        / before.iter().map(|r| (r.1 - r.0).max(1e-6)).sum::<f64>()
                });
                let target = cap(before_bps);
                let recovery_s = target.and_then(|target| {
                    requests
                        .iter()
                        .filter(|r| r.1 > at && r.0 < next)
                        .find(|r| rate(r) >= RECOVERY_SHARE * target)
                        .map(|r| r.1 - at)
                });
                (target, recovery_s)
            }
        };
        let connections_opened = timeline
            .connections
            .iter()
            .filter(|c| c.opened_s >= at && c.opened_s < next)
            .count();
        let refetched_bytes = timeline
            .refetched
            .iter()
            .filter(|r| r.0 >= at && r.0 < next)
            .map(|r| r.1)
            .sum();
        let migrated = connections_opened == 0
            && timeline
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
            refetched_bytes,
            migrated,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let o = outcomes(&schedule, &[], &Timeline::of_download(&report));
        assert_eq!(o.len(), 1);
        // Bytes read a moment after the switch (they had arrived before it) do not hide the
        // pause that follows.
        let mut late = report.clone();
        late.progress.push((10.0005, late.progress[89].1));
        late.progress.sort_by(|a, b| a.0.total_cmp(&b.0));
        let i = outcomes(&schedule, &[], &Timeline::of_download(&late))[0]
            .interruption_s
            .unwrap();
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
        let o = outcomes(&schedule, &[], &Timeline::of_download(&report));
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
        assert!(outcomes(&schedule, &[], &Timeline::of_download(&short)).is_empty());
    }

    /// A player fetching a 100 kB segment every 2 s in 0.2 s (4 Mbit/s), idle in between;
    /// `(request, first byte, done)` per segment.
    fn player(segments: &[(f64, f64, f64)]) -> (VideoSwitchLog, Vec<(f64, f64, u64)>) {
        let mut log = VideoSwitchLog::default();
        let mut bytes = 0;
        let mut requests = Vec::new();
        for &(req, first, done) in segments {
            log.requests.push(req);
            // Ten chunks of 10 kB from the first byte to the end.
            for k in 0..10 {
                bytes += 10_000;
                log.progress
                    .push((first + (done - first) * k as f64 / 9.0, bytes));
            }
            requests.push((req, done, 100_000));
        }
        log.connections.push(conn(0.0));
        (log, requests)
    }

    #[test]
    fn a_player_idle_at_the_switch_is_interrupted_from_its_next_request_not_its_last_byte() {
        let schedule = SwitchSchedule::parse("wifi@0s,lte@10s", 0).unwrap();
        // Segments at 0, 2, …, 8 s; the one asked at 10.0 s (just after the switch) stalls
        // until the stall timeout (15.0 s), whose retry on a new connection gets bytes from 15.3 s.
        let mut segs: Vec<(f64, f64, f64)> = (0..5)
            .map(|i| (2.0 * i as f64, 2.0 * i as f64 + 0.02, 2.0 * i as f64 + 0.2))
            .collect();
        segs.push((10.0, 15.3, 15.5));
        segs.push((16.0, 16.02, 16.2));
        let (mut log, requests) = player(&segs);
        log.connections.push(conn(15.0));
        log.refetched.push((15.0, 0));
        let t = Timeline::of_player(&log, &requests, true);
        let o = &outcomes(&schedule, &[], &t)[0];
        // From the request at 10.0 s (not from the last byte at 8.2 s) to 15.3 s.
        let i = o.interruption_s.unwrap();
        assert!((i - 5.3).abs() < 1e-6, "{i}");
        assert_eq!(o.connections_opened, 1);
        assert_eq!(o.refetched_bytes, 0);
        // Before: 4 Mbit/s per segment (capped at LTE's rate); the retried segment is slow (its
        // 5.5 s count), the next one is back: recovery at its end.
        let r = o.recovery_s.unwrap();
        assert!((r - 6.2).abs() < 1e-6, "{r}");
    }

    #[test]
    fn a_segment_cut_by_the_switch_counts_its_lost_part_and_its_retry_does_not_reset_the_pause() {
        let schedule = SwitchSchedule::parse("wifi@0s,3g@10s", 0).unwrap();
        let mut log = VideoSwitchLog::default();
        log.connections.push(conn(0.0));
        // Asked at 9.9 s: 50 kB until 10.0 s, then nothing; given up at 15.0 s (50 kB thrown
        // away), asked again (a retry: no new request) and complete from 15.4 s.
        log.requests.push(9.9);
        log.progress.extend([
            (9.95, 25_000),
            (10.0, 50_000),
            (15.4, 100_000),
            (15.6, 150_000),
        ]);
        log.refetched.push((15.0, 50_000));
        log.connections.push(conn(15.0));
        let requests = vec![(9.9, 15.6, 100_000)];
        let t = Timeline::of_player(&log, &requests, true);
        let o = &outcomes(&schedule, &[], &t)[0];
        let i = o.interruption_s.unwrap();
        assert!((i - 5.4).abs() < 1e-6, "{i}");
        assert_eq!(o.refetched_bytes, 50_000);
        // No segment before the switch ended in the window: no target, no recovery.
        assert_eq!(o.recovery_s, None);
        let f = SwitchFigures::of(Some(std::slice::from_ref(o)), Some(2));
        assert_eq!(f.refetched_bytes, Some(50_000.0));
        assert_eq!(f.connections_used, Some(2.0));
    }
}
