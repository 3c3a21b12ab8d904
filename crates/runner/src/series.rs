//! Time series of a traced run, from the files a kept run writes (`--keep DIR`, or a scenario's
//! traced runs): the sender's congestion window (cwnd.csv, CLOCK_MONOTONIC) and the downlink queue
//! (link.log, the emulator's packet log). Both are put on one time axis: seconds since the emulator started.
//!
//! Pure functions over the files' text, so they are tested without a lab.

use quiclab_lab::emulator::Direction;
use quiclab_lab::packet_log::{self, LogEvent};
use quiclab_results::Series;

/// Most points kept per series: enough for a figure, small enough for the database.
const MAX_POINTS: usize = 4000;

fn thin(points: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    if points.len() <= MAX_POINTS {
        return points;
    }
    let step = points.len().div_ceil(MAX_POINTS);
    points.into_iter().step_by(step).collect()
}

/// The congestion window of the connection that sent the most bytes (the measured one; a resumed
/// run also has a warm-up connection).
pub fn cwnd_series(run_key: &str, cwnd_csv: &str, epoch_monotonic_ns: u64) -> Option<Series> {
    let mut by_conn: std::collections::BTreeMap<String, (f64, Vec<(f64, f64)>)> =
        Default::default();
    for sample in quiclab_model::cwnd::read_samples(cwnd_csv) {
        let entry = by_conn.entry(sample.conn).or_default();
        entry.0 = entry.0.max(sample.bytes_sent.unwrap_or(0.0));
        let t = (sample.t_mono_ns as f64 - epoch_monotonic_ns as f64) / 1e9;
        entry.1.push((t, sample.cwnd_bytes));
    }
    let n = by_conn.len();
    let (conn, (_, points)) = by_conn.into_iter().max_by(|a, b| a.1.0.total_cmp(&b.1.0))?;
    // Of several connections (h1's six) one is drawn: the panel's legend says which.
    let name = match n {
        1 => "cwnd_bytes".to_string(),
        _ => format!("cwnd_bytes@connection {conn}, the busiest of {n}"),
    };
    Some(Series {
        run_key: run_key.to_string(),
        name,
        unit: "bytes".into(),
        points: thin(points),
    })
}

/// The downlink queue from the packet log: queueing delay of each delivered packet (its one-way
/// delay less the configured propagation delay `delay_us`; serialisation included) and the queue's
/// occupancy in bytes (accepted arrivals less departures, a departure being a delivery less the
/// propagation delay).
pub fn queue_series(run_key: &str, log: &str, delay_us: f64) -> Vec<Series> {
    let mut delay_points = Vec::new();
    // (time in s, byte change) of every arrival that was queued and every departure.
    let mut changes: Vec<(f64, f64)> = Vec::new();
    // The latest arrival, accepted unless its verdict (logged right after it by the same
    // thread) says it was dropped or lost.
    let mut last_arrival: Option<(f64, f64)> = None;
    for event in packet_log::read(log).filter(|e| e.direction() == Direction::Downlink) {
        let t_us = event.t() as f64 / 1e3;
        let t_s = t_us / 1e6;
        match event {
            LogEvent::Arrival { bytes, .. } => {
                changes.extend(last_arrival.replace((t_s, bytes as f64)))
            }
            LogEvent::DroppedQueue { .. }
            | LogEvent::Lost { .. }
            | LogEvent::DroppedSwitch { .. } => last_arrival = None,
            // A queue discipline's drop at dequeue: the packet was queued and leaves now.
            LogEvent::DroppedAtDequeue { bytes, .. } => {
                changes.extend(last_arrival.take());
                changes.push((t_s, -(bytes as f64)));
            }
            LogEvent::Delivered { bytes, one_way, .. } => {
                let one_way_us = one_way as f64 / 1e3;
                let queued_us = (one_way_us - delay_us).max(0.0);
                delay_points.push((t_s, queued_us / 1e3));
                changes.push(((t_us - delay_us) / 1e6, -(bytes as f64)));
            }
        }
    }
    changes.extend(last_arrival);
    changes.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut occupancy = 0.0f64;
    let queue_points: Vec<(f64, f64)> = changes
        .into_iter()
        .map(|(t, d)| {
            occupancy = (occupancy + d).max(0.0);
            (t, occupancy)
        })
        .collect();
    let mut out = Vec::new();
    if !queue_points.is_empty() {
        out.push(Series {
            run_key: run_key.to_string(),
            name: "queue_bytes".into(),
            unit: "bytes".into(),
            points: thin(queue_points),
        });
    }
    if !delay_points.is_empty() {
        out.push(Series {
            run_key: run_key.to_string(),
            name: "queue_delay_ms".into(),
            unit: "ms".into(),
            points: thin(delay_points),
        });
    }
    out
}

/// The downlink's delivered rate from the packet log, in bins of `bin_s` seconds (Mbit/s per bin,
/// empty bins included as 0): what the link carried to the client over time. None without
/// deliveries.
pub fn delivered_rate_series(run_key: &str, log: &str, bin_s: f64) -> Option<Series> {
    let mut bins: std::collections::BTreeMap<u64, f64> = std::collections::BTreeMap::new();
    for event in packet_log::read(log).filter(|e| e.direction() == Direction::Downlink) {
        let t_s = event.t() as f64 / 1e9;
        if let LogEvent::Delivered { bytes, .. } = event {
            *bins.entry((t_s / bin_s) as u64).or_default() += bytes as f64;
        }
    }
    let (&first, _) = bins.first_key_value()?;
    let (&last, _) = bins.last_key_value()?;
    let points = (first..=last)
        .map(|i| {
            let bytes = bins.get(&i).copied().unwrap_or(0.0);
            ((i as f64 + 0.5) * bin_s, bytes * 8.0 / bin_s / 1e6)
        })
        .collect();
    Some(Series {
        run_key: run_key.to_string(),
        name: "throughput_mbps".into(),
        unit: "Mbit/s".into(),
        points: thin(points),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cwnd_of_the_busiest_connection_on_the_log_clock() {
        let csv = "t_mono_ns,conn,transport,cwnd_bytes,ssthresh_bytes,srtt_us,min_rtt_us,lost_packets,retransmitted_packets,delivery_rate_bps,bytes_sent,ca_state\n\
                   1005000000,1,tcp,14480,,,,,,,1000,\n\
                   1010000000,2,tcp,14480,,,,,,,5000,\n\
                   1015000000,2,tcp,28960,,,,,,,90000,\n";
        let s = cwnd_series("k", csv, 1_000_000_000).unwrap();
        assert_eq!(s.points, vec![(0.010, 14480.0), (0.015, 28960.0)]);
        assert!(cwnd_series("k", "garbage", 0).is_none());
    }

    #[test]
    fn queue_occupancy_and_delay_from_the_packet_log() {
        let log = "# quiclab packet log v1\n# epoch_monotonic_ns: 5\n\
                   0.000 down + 1000\n\
                   100.000 down + 1000\n\
                   150.000 down + 1000\n\
                   150.000 down d 1000\n\
                   10800.000 down - 1000 10800.000 1.0\n\
                   11600.000 down - 1000 11500.000 1.0\n\
                   50.000 up + 60\n";
        assert_eq!(quiclab_lab::packet_log::epoch_monotonic_ns(log), Some(5));
        let s = queue_series("k", log, 10_000.0);
        let q = &s.iter().find(|s| s.name == "queue_bytes").unwrap().points;
        // Two accepted arrivals, then two departures at 0.8 ms and 1.6 ms; the drop never counts.
        assert_eq!(
            q,
            &vec![
                (0.0, 1000.0),
                (0.0001, 2000.0),
                (0.0008, 1000.0),
                (0.0016, 0.0)
            ]
        );
        let d = &s
            .iter()
            .find(|s| s.name == "queue_delay_ms")
            .unwrap()
            .points;
        assert_eq!(d, &vec![(0.0108, 0.8), (0.0116, 1.5)]);
    }

    #[test]
    fn a_drop_at_dequeue_leaves_the_queue_then_not_at_the_next_arrival() {
        // CoDel drops the first packet when it reaches the head (2 ms); the second, which
        // arrived in between, is delivered. The occupancy counts both arrivals and two exits.
        let log = "0.000 down + 1000\n\
                   1000.000 down + 1000\n\
                   2000.000 down a 1000\n\
                   13000.000 down - 1000 12000.000 1.0\n";
        let s = queue_series("k", log, 10_000.0);
        let q = &s.iter().find(|s| s.name == "queue_bytes").unwrap().points;
        assert_eq!(
            q,
            &vec![
                (0.0, 1000.0),
                (0.001, 2000.0),
                (0.002, 1000.0),
                (0.003, 0.0)
            ]
        );
    }
}
