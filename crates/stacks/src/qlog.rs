//! The header quinn's qlog lacks. quinn 0.11 writes each trace with an unknown vantage point and
//! no reference time (its `QlogConfig` offers neither), so qvis cannot tell a client's trace from
//! a server's and nothing aligns the events with the capture or the packet log. [`QlogHeader`]
//! wraps the qlog's writer and rewrites the JSON-SEQ file's first record, the header, as it is
//! written: `vantage_point.type` becomes `client` or `server`, and `common_fields` gets the
//! `reference_time` of the trace's time zero on the wall clock (Unix ms, the clock of the pcapng's
//! timestamps) with `time_format = "relative"`, and `quiclab_monotonic_ns`, the same instant on
//! CLOCK_MONOTONIC (the clock of link.log's `epoch_monotonic_ns` and of cwnd.csv). Every later
//! byte passes through unchanged.

use std::io::{self, Write};

/// Which end wrote the trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vantage {
    Client,
    Server,
}

impl Vantage {
    fn name(self) -> &'static str {
        match self {
            Vantage::Client => "client",
            Vantage::Server => "server",
        }
    }
}

/// Where one connection's qlog goes and which end writes it.
#[derive(Debug, Clone, Copy)]
pub struct QlogFile<'a> {
    pub path: &'a std::path::Path,
    pub vantage: Vantage,
}

/// The trace's time zero on two clocks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimeZero {
    /// Wall clock, Unix milliseconds.
    pub unix_ms: f64,
    /// CLOCK_MONOTONIC, nanoseconds.
    pub monotonic_ns: u64,
}

impl TimeZero {
    /// Now, on both clocks (read back to back).
    pub fn now() -> TimeZero {
        let monotonic_ns = crate::cwnd::monotonic_ns();
        let unix_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64() * 1e3);
        TimeZero {
            unix_ms,
            monotonic_ns,
        }
    }
}

/// A qlog writer whose first record (the header) is completed on its way through.
pub struct QlogHeader<W: Write> {
    inner: W,
    vantage: Vantage,
    zero: TimeZero,
    /// The header's bytes until its newline (None once it is written).
    pending: Option<Vec<u8>>,
}

impl<W: Write> QlogHeader<W> {
    pub fn new(inner: W, vantage: Vantage, zero: TimeZero) -> QlogHeader<W> {
        QlogHeader {
            inner,
            vantage,
            zero,
            pending: Some(Vec::new()),
        }
    }

    /// The header record with what quinn leaves out (left as it is when it is not the JSON object
    /// quiclab expects: a trace is never lost to its header).
    fn completed(&self, record: &[u8]) -> Vec<u8> {
        // A JSON-SEQ record starts with the record separator (0x1E).
        let (rs, json) = match record.first() {
            Some(0x1e) => (&record[..1], &record[1..]),
            _ => (&record[..0], record),
        };
        let Ok(mut doc) = serde_json::from_slice::<serde_json::Value>(json) else {
            return record.to_vec();
        };
        let Some(trace) = doc.get_mut("trace").and_then(|t| t.as_object_mut()) else {
            return record.to_vec();
        };
        trace.insert(
            "vantage_point".into(),
            serde_json::json!({ "name": format!("quiclab {}", self.vantage.name()), "type": self.vantage.name() }),
        );
        let common = trace
            .entry("common_fields")
            .or_insert_with(|| serde_json::json!({}));
        if let Some(c) = common.as_object_mut() {
            c.insert(
                "reference_time".into(),
                serde_json::json!(self.zero.unix_ms),
            );
            c.insert("time_format".into(), serde_json::json!("relative"));
            c.insert(
                "quiclab_monotonic_ns".into(),
                serde_json::json!(self.zero.monotonic_ns),
            );
        }
        let mut out = rs.to_vec();
        out.extend(serde_json::to_vec(&doc).unwrap_or_else(|_| json.to_vec()));
        out
    }
}

impl<W: Write> Write for QlogHeader<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let Some(pending) = self.pending.as_mut() else {
            return self.inner.write(buf);
        };
        match buf.iter().position(|&b| b == b'\n') {
            None => pending.extend_from_slice(buf),
            Some(i) => {
                pending.extend_from_slice(&buf[..i]);
                let header = self.pending.take().unwrap_or_default();
                let completed = self.completed(&header);
                self.inner.write_all(&completed)?;
                self.inner.write_all(&buf[i..])?;
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What quinn 0.11 writes first (abridged), then an event.
    const QUINN: &[u8] = b"\x1e{\"qlog_version\":\"0.3\",\"qlog_format\":\"JSON-SEQ\",\"title\":\"t\",\"trace\":{\"vantage_point\":{\"type\":\"unknown\"},\"common_fields\":{\"protocol_type\":[\"QUIC\"]},\"configuration\":{\"time_offset\":0.0}}}\n\x1e{\"time\":1.5,\"name\":\"transport:packet_sent\",\"data\":{}}\n";

    #[test]
    fn the_header_gets_its_vantage_point_and_reference_time_in_any_write_pattern() {
        let zero = TimeZero {
            unix_ms: 1_700_000_000_123.5,
            monotonic_ns: 42,
        };
        // Whole, and one byte at a time (a BufWriter may cut anywhere).
        for chunk in [QUINN.len(), 1, 7] {
            let mut w = QlogHeader::new(Vec::new(), Vantage::Server, zero);
            for part in QUINN.chunks(chunk) {
                w.write_all(part).unwrap();
            }
            let out = w.inner;
            let records: Vec<&[u8]> = out
                .split(|&b| b == 0x1e)
                .filter(|r| !r.is_empty())
                .collect();
            assert_eq!(records.len(), 2);
            let header: serde_json::Value = serde_json::from_slice(records[0]).unwrap();
            let trace = &header["trace"];
            assert_eq!(trace["vantage_point"]["type"], "server");
            assert_eq!(
                trace["common_fields"]["reference_time"],
                1_700_000_000_123.5
            );
            assert_eq!(trace["common_fields"]["time_format"], "relative");
            assert_eq!(trace["common_fields"]["quiclab_monotonic_ns"], 42);
            assert_eq!(trace["common_fields"]["protocol_type"][0], "QUIC");
            // The event is untouched.
            assert_eq!(
                records[1],
                &b"{\"time\":1.5,\"name\":\"transport:packet_sent\",\"data\":{}}\n"[..]
            );
        }
    }

    #[test]
    fn a_header_that_is_not_quinns_passes_unchanged() {
        let zero = TimeZero::now();
        let mut w = QlogHeader::new(Vec::new(), Vantage::Client, zero);
        w.write_all(b"\x1enot json\n\x1e{}\n").unwrap();
        assert_eq!(w.inner, b"\x1enot json\n\x1e{}\n");
    }
}
