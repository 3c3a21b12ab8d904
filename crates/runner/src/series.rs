//! Time series of a traced run, from the files a kept run writes (`--keep DIR`, or a scenario's
//! traced runs): the sender's congestion window (cwnd.csv, CLOCK_MONOTONIC) and the downlink queue
//! (link.log, the emulator's packet log). Both are put on one time axis: seconds since the emulator started.
//!
//! Pure functions over the files' text, so they are tested without a lab.

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

/// `# epoch_monotonic_ns: N` of a packet log.
pub fn log_epoch_monotonic_ns(log: &str) -> Option<u64> {
    log.lines()
        .take_while(|l| l.starts_with('#'))
        .find_map(|l| l.strip_prefix("# epoch_monotonic_ns: "))
        .and_then(|v| v.trim().parse().ok())
}

/// The congestion window of the connection that sent the most bytes (the measured one; a resumed
/// run also has a warm-up connection).
pub fn cwnd_series(run_key: &str, cwnd_csv: &str, epoch_monotonic_ns: u64) -> Option<Series> {
    let mut lines = cwnd_csv.lines();
    let header: Vec<&str> = lines.next()?.split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name);
    let (t_col, conn_col, cwnd_col, sent_col) = (
        col("t_mono_ns")?,
        col("conn")?,
        col("cwnd_bytes")?,
        col("bytes_sent")?,
    );
    let mut by_conn: std::collections::BTreeMap<String, (f64, Vec<(f64, f64)>)> =
        Default::default();
    for line in lines {
        let f: Vec<&str> = line.split(',').collect();
        let get = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok());
        let (Some(t), Some(cwnd)) = (get(t_col), get(cwnd_col)) else {
            continue;
        };
        let conn = f.get(conn_col).copied().unwrap_or("").to_string();
        let entry = by_conn.entry(conn).or_default();
        entry.0 = entry.0.max(get(sent_col).unwrap_or(0.0));
        entry.1.push(((t - epoch_monotonic_ns as f64) / 1e9, cwnd));
    }
    let (_, points) = by_conn.into_values().max_by(|a, b| a.0.total_cmp(&b.0))?;
    Some(Series {
        run_key: run_key.to_string(),
        name: "cwnd_bytes".into(),
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
    for line in log.lines().filter(|l| !l.starts_with('#')) {
        let f: Vec<&str> = line.split_ascii_whitespace().collect();
        if f.len() < 4 || f[1] != "down" {
            continue;
        }
        let (Ok(t_us), Ok(bytes)) = (f[0].parse::<f64>(), f[3].parse::<f64>()) else {
            continue;
        };
        match f[2] {
            "+" => changes.extend(last_arrival.replace((t_us / 1e6, bytes))),
            "d" | "l" | "x" => last_arrival = None,
            "-" => {
                if let Some(one_way) = f.get(4).and_then(|v| v.parse::<f64>().ok()) {
                    let queued_us = (one_way - delay_us).max(0.0);
                    delay_points.push((t_us / 1e6, queued_us / 1e3));
                    changes.push(((t_us - delay_us) / 1e6, -bytes));
                }
            }
            _ => {}
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
        assert_eq!(log_epoch_monotonic_ns(log), Some(5));
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
}
