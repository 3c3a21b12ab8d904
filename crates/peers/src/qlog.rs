//! What quiclab reads from another implementation's qlog (JSON-SEQ, as quic-go and ngtcp2 write
//! it: records after an RS byte, or one per line): the congestion window over time
//! (`recovery:metrics_updated`), and for a client, when the handshake was confirmed and when the
//! response's first and last bytes arrived (the `transport:packet_received` carrying
//! HANDSHAKE_DONE, and STREAM frames of the first request stream, 0). Times are the qlog's own,
//! milliseconds from the connection's start.

use serde_json::Value;

/// One connection's trace, as quiclab reads it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Timeline {
    /// (ms since the connection started, congestion window in bytes).
    pub cwnd: Vec<(f64, u64)>,
    /// A client's: its handshake complete — the first Handshake packet it sent with CRYPTO (its
    /// Finished, sent once the server's flight arrived), as quiclab's own client times it.
    pub handshake_complete_ms: Option<f64>,
    /// A client's: HANDSHAKE_DONE received (the handshake confirmed, a round trip later).
    pub handshake_done_ms: Option<f64>,
    /// A client's: the first and last STREAM frames of stream 0 received.
    pub first_stream_data_ms: Option<f64>,
    pub last_stream_data_ms: Option<f64>,
    /// Records that did not parse (a truncated last record of a killed server, say).
    pub unreadable: usize,
    /// When the trace's times start, in Unix nanoseconds: quic-go writes its reference time's
    /// wall clock (RFC 3339). None when the qlog gives no absolute time (ngtcp2 0.12 writes
    /// `"reference_time": 0`, its times relative to the connection's first timestamp).
    pub reference_unix_ns: Option<i128>,
}

impl Timeline {
    /// The window samples on CLOCK_MONOTONIC (ns, the clock of quiclab's cwnd.csv and packet
    /// log), given the realtime clock's offset to it (realtime − monotonic, ns, read on the same
    /// machine); None without a reference time.
    pub fn cwnd_monotonic_ns(&self, realtime_minus_monotonic_ns: i128) -> Option<Vec<(u64, u64)>> {
        let start = self.reference_unix_ns? - realtime_minus_monotonic_ns;
        Some(
            self.cwnd
                .iter()
                .filter_map(|(ms, w)| {
                    let t = start + (ms * 1e6).round() as i128;
                    u64::try_from(t).ok().map(|t| (t, *w))
                })
                .collect(),
        )
    }
}

/// A qlog header's reference time in Unix nanoseconds: `{"wall_clock_time": RFC 3339}` (the
/// qlog drafts since 0.4, quic-go) or a number of milliseconds since the epoch (0.3); 0 or
/// anything else is no reference.
fn reference_time(header: &Value) -> Option<i128> {
    let r = header
        .get("trace")?
        .get("common_fields")?
        .get("reference_time")?;
    match r {
        Value::Object(o) => {
            let text = o.get("wall_clock_time")?.as_str()?;
            time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
                .ok()
                .map(|t| t.unix_timestamp_nanos())
        }
        Value::Number(n) => n
            .as_f64()
            .filter(|ms| *ms > 0.0)
            .map(|ms| (ms * 1e6).round() as i128),
        _ => None,
    }
}

/// The records of a qlog file's text.
fn records(text: &str) -> impl Iterator<Item = &str> {
    let rs = text.contains('\u{1e}');
    text.split(move |c| if rs { c == '\u{1e}' } else { c == '\n' })
        .map(str::trim)
        .filter(|r| !r.is_empty())
}

/// Reads a qlog file's text.
pub fn read(text: &str) -> Timeline {
    let mut t = Timeline::default();
    for record in records(text) {
        let Ok(v) = serde_json::from_str::<Value>(record) else {
            t.unreadable += 1;
            continue;
        };
        let (Some(name), Some(time)) = (
            v.get("name").and_then(Value::as_str),
            v.get("time").and_then(Value::as_f64),
        ) else {
            // The header, or an event without a time.
            if t.reference_unix_ns.is_none() {
                t.reference_unix_ns = reference_time(&v);
            }
            continue;
        };
        let data = v.get("data").unwrap_or(&Value::Null);
        match name {
            "recovery:metrics_updated" => {
                if let Some(cwnd) = data.get("congestion_window").and_then(Value::as_u64) {
                    t.cwnd.push((time, cwnd));
                }
            }
            "transport:packet_sent" => {
                let handshake = data
                    .get("header")
                    .and_then(|h| h.get("packet_type"))
                    .and_then(Value::as_str)
                    == Some("handshake");
                let crypto = data
                    .get("frames")
                    .and_then(Value::as_array)
                    .is_some_and(|fs| {
                        fs.iter()
                            .any(|f| f.get("frame_type").and_then(Value::as_str) == Some("crypto"))
                    });
                if handshake && crypto {
                    t.handshake_complete_ms.get_or_insert(time);
                }
            }
            "transport:packet_received" => {
                let frames = data.get("frames").and_then(Value::as_array);
                for f in frames.into_iter().flatten() {
                    match f.get("frame_type").and_then(Value::as_str) {
                        Some("handshake_done") => {
                            t.handshake_done_ms.get_or_insert(time);
                        }
                        Some("stream")
                            if f.get("stream_id").and_then(Value::as_u64) == Some(0)
                                && f.get("length").and_then(Value::as_u64).unwrap_or(1) > 0 =>
                        {
                            t.first_stream_data_ms.get_or_insert(time);
                            t.last_stream_data_ms = Some(time);
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    t
}

/// The qlog files in `dir` (`*.qlog`, `*.sqlog`), by name.
pub fn files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "qlog" || e == "sqlog"))
        .collect();
    v.sort();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_seq_records_give_the_window_and_a_clients_milestones() {
        let text = "\u{1e}{\"qlog_version\":\"0.3\",\"qlog_format\":\"JSON-SEQ\",\"trace\":{}}\n\
             \u{1e}{\"time\":1.5,\"name\":\"recovery:metrics_updated\",\"data\":{\"congestion_window\":14720}}\n\
             \u{1e}{\"time\":10.5,\"name\":\"transport:packet_sent\",\"data\":{\"header\":{\"packet_type\":\"handshake\"},\"frames\":[{\"frame_type\":\"ack\"},{\"frame_type\":\"crypto\"}]}}\n\
             \u{1e}{\"time\":20.25,\"name\":\"transport:packet_received\",\"data\":{\"frames\":[{\"frame_type\":\"handshake_done\"}]}}\n\
             \u{1e}{\"time\":21.0,\"name\":\"transport:packet_received\",\"data\":{\"frames\":[{\"frame_type\":\"stream\",\"stream_id\":3,\"length\":9}]}}\n\
             \u{1e}{\"time\":40.0,\"name\":\"transport:packet_received\",\"data\":{\"frames\":[{\"frame_type\":\"ack\"},{\"frame_type\":\"stream\",\"stream_id\":0,\"length\":1200}]}}\n\
             \u{1e}{\"time\":95.5,\"name\":\"transport:packet_received\",\"data\":{\"frames\":[{\"frame_type\":\"stream\",\"stream_id\":0,\"length\":800,\"fin\":true}]}}\n\
             \u{1e}{\"time\":96.0,\"name\":\"recovery:metrics_updated\",\"data\":{\"congestion_window\":30000}}\n\
             \u{1e}{\"time\":97.0,\"na";
        let t = read(text);
        assert_eq!(t.cwnd, vec![(1.5, 14720), (96.0, 30000)]);
        assert_eq!(t.handshake_complete_ms, Some(10.5));
        assert_eq!(t.handshake_done_ms, Some(20.25));
        assert_eq!(t.first_stream_data_ms, Some(40.0));
        assert_eq!(t.last_stream_data_ms, Some(95.5));
        assert_eq!(t.unreadable, 1, "the truncated last record");
    }

    #[test]
    fn a_wall_clock_reference_puts_the_window_on_the_monotonic_clock() {
        let quic_go = "\u{1e}{\"qlog_format\":\"JSON-SEQ\",\"trace\":{\"common_fields\":{\"reference_time\":{\"clock_type\":\"monotonic\",\"epoch\":\"unknown\",\"wall_clock_time\":\"2026-11-27T01:00:00.5+01:00\"}}}}\n\
             \u{1e}{\"time\":2.25,\"name\":\"recovery:metrics_updated\",\"data\":{\"congestion_window\":1200}}\n";
        let t = read(quic_go);
        // 2026-11-27T00:00:00.5Z
        let unix_ns = 1_795_737_600_500_000_000i128;
        assert_eq!(t.reference_unix_ns, Some(unix_ns));
        let offset = unix_ns - 1_000_000_000; // the monotonic clock read 1 s at that instant
        assert_eq!(
            t.cwnd_monotonic_ns(offset),
            Some(vec![(1_000_000_000 + 2_250_000, 1200)])
        );
        let ngtcp2 = "\u{1e}{\"qlog_format\":\"JSON-SEQ\",\"trace\":{\"common_fields\":{\"time_format\":\"relative\",\"reference_time\":0}}}\n";
        assert_eq!(read(ngtcp2).reference_unix_ns, None);
        assert_eq!(read(ngtcp2).cwnd_monotonic_ns(0), None);
    }

    #[test]
    fn one_record_per_line_reads_the_same() {
        let text = "{\"qlog_version\":\"0.3\"}\n{\"time\":2,\"name\":\"recovery:metrics_updated\",\"data\":{\"congestion_window\":1200}}\n";
        assert_eq!(read(text).cwnd, vec![(2.0, 1200)]);
        assert_eq!(read("").cwnd, vec![]);
    }
}
