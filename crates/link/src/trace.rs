//! Mahimahi-compatible packet-delivery traces.
//!
//! Format (as read by Mahimahi's `mm-link`): one integer per line, a timestamp in
//! milliseconds at which one delivery opportunity of [`OPPORTUNITY_BYTES`] bytes occurs.
//! Timestamps must not decrease; equal timestamps mean several opportunities in the same
//! millisecond. The trace repeats forever with a period equal to its last timestamp, which
//! must therefore be greater than 0. As in Mahimahi, cycle `k` consists of the listed
//! timestamps shifted by `k × period`, so a trace starting at 0 has, at each multiple of
//! the period, both the last opportunity of one cycle and the first of the next.
//!
//! Blank lines and lines starting with `#` are ignored (Mahimahi itself does not accept
//! comments; they are an extension so traces can say where they came from), and leading
//! or trailing whitespace is tolerated.

use std::path::Path;

pub use crate::error::ParseError;
use crate::{NANOS_PER_MS, Nanos};

/// Bytes delivered by one opportunity, Mahimahi's fixed `PACKET_SIZE`.
pub const OPPORTUNITY_BYTES: u32 = 1500;

/// Timestamps above this (about 31.7 years) are rejected so that every
/// `cycle × period + timestamp` computation stays far from `u64` overflow.
const MAX_TIMESTAMP_MS: u64 = 1_000_000_000_000;

/// A parsed delivery trace. Always valid: at least one opportunity, non-decreasing
/// timestamps, and a period (last timestamp) greater than 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryTrace {
    name: String,
    timestamps_ms: Vec<u64>,
}

impl DeliveryTrace {
    /// Parses trace text. `source_name` is used in error messages (`FILE:LINE: message`)
    /// and as the trace's [`name`](Self::name).
    pub fn parse(text: &str, source_name: &str) -> Result<DeliveryTrace, ParseError> {
        let mut timestamps_ms: Vec<u64> = Vec::new();
        let mut last_line = 0;
        for (index, raw_line) in text.lines().enumerate() {
            let line_number = index + 1;
            let line = raw_line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            if !line.bytes().all(|b| b.is_ascii_digit()) {
                return Err(ParseError::at_line(
                    source_name,
                    line_number,
                    format!("expected a whole number of milliseconds, got \"{line}\""),
                ));
            }
            let timestamp = line
                .parse::<u64>()
                .ok()
                .filter(|&ms| ms <= MAX_TIMESTAMP_MS)
                .ok_or_else(|| {
                    ParseError::at_line(
                        source_name,
                        line_number,
                        format!(
                            "timestamp {line} is too large; at most {MAX_TIMESTAMP_MS} ms is accepted"
                        ),
                    )
                })?;
            if let Some(&previous) = timestamps_ms.last()
                && timestamp < previous
            {
                return Err(ParseError::at_line(
                    source_name,
                    line_number,
                    format!(
                        "timestamp {timestamp} is earlier than the previous one ({previous}); \
                         timestamps must not decrease"
                    ),
                ));
            }
            timestamps_ms.push(timestamp);
            last_line = line_number;
        }
        match timestamps_ms.last() {
            None => Err(ParseError::whole_file(
                source_name,
                "the trace is empty (no delivery opportunities)",
            )),
            Some(0) => Err(ParseError::at_line(
                source_name,
                last_line,
                "the last timestamp must be > 0 because it is the period after which the \
                 trace repeats; got 0",
            )),
            Some(_) => Ok(DeliveryTrace {
                name: source_name.to_string(),
                timestamps_ms,
            }),
        }
    }

    /// Reads (through `read`) and parses a trace file; errors (including a missing file) name
    /// the file.
    pub fn load(path: &Path, read: crate::input::ReadText) -> Result<DeliveryTrace, ParseError> {
        let source_name = path.display().to_string();
        let text = read(path).map_err(|e| {
            ParseError::whole_file(&source_name, format!("cannot read the trace file: {e}"))
        })?;
        DeliveryTrace::parse(&text, &source_name)
    }

    /// The source name given to [`parse`](Self::parse) (the path for [`load`](Self::load)).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The period after which the trace repeats (its last timestamp).
    pub fn period(&self) -> Nanos {
        self.period_ms() * NANOS_PER_MS
    }

    /// Number of delivery opportunities in one period.
    pub fn opportunities(&self) -> usize {
        self.timestamps_ms.len()
    }

    /// The mean rate in bits per second: opportunities × 1500 bytes × 8 / period.
    pub fn mean_rate_bps(&self) -> f64 {
        let bits_per_period = self.timestamps_ms.len() as f64 * f64::from(OPPORTUNITY_BYTES) * 8.0;
        bits_per_period * 1000.0 / self.period_ms() as f64
    }

    /// The opportunity timestamps of one period, in milliseconds.
    pub fn timestamps_ms(&self) -> &[u64] {
        &self.timestamps_ms
    }

    fn period_ms(&self) -> u64 {
        // Never empty by construction; 0 would only be reachable through a bug.
        self.timestamps_ms.last().copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_mahimahi_format_with_comments_and_whitespace() {
        let text = "# measured on a train\n0\n  5 \n5\n\n10\r\n";
        let trace = DeliveryTrace::parse(text, "train.trace").unwrap();
        assert_eq!(trace.timestamps_ms(), &[0, 5, 5, 10]);
        assert_eq!(trace.period(), 10_000_000);
        assert_eq!(trace.opportunities(), 4);
        // 4 × 12 000 bits per 10 ms = 4.8 Mbit/s.
        assert_eq!(trace.mean_rate_bps(), 4_800_000.0);
        assert_eq!(trace.name(), "train.trace");
    }

    #[test]
    fn one_opportunity_per_ms_is_12_mbit() {
        let text: String = (1..=1000).map(|ms| format!("{ms}\n")).collect();
        let trace = DeliveryTrace::parse(&text, "12mbit.trace").unwrap();
        assert_eq!(trace.mean_rate_bps(), 12_000_000.0);
    }

    #[test]
    fn rejects_fractional_timestamps_with_file_and_line() {
        let text = "1\n2\n3\n4\n5\n6\n12.5\n";
        let error = DeliveryTrace::parse(text, "uplink.trace").unwrap_err();
        assert_eq!(
            error.to_string(),
            "uplink.trace:7: expected a whole number of milliseconds, got \"12.5\""
        );
        assert_eq!(error.line, Some(7));
    }

    #[test]
    fn rejects_other_garbage() {
        for bad in ["-3", "+3", "abc", "1 2", "0x10"] {
            let error = DeliveryTrace::parse(&format!("1\n{bad}\n"), "x.trace").unwrap_err();
            assert_eq!(error.line, Some(2), "{bad}");
            assert!(error.message.contains("whole number"), "{error}");
        }
    }

    #[test]
    fn rejects_decreasing_timestamps() {
        let text = "# header\n10\n20\n30\n40\n50\n52\n\n40\n";
        let error = DeliveryTrace::parse(text, "x.trace").unwrap_err();
        assert_eq!(
            error.to_string(),
            "x.trace:9: timestamp 40 is earlier than the previous one (52); \
             timestamps must not decrease"
        );
    }

    #[test]
    fn rejects_empty_trace() {
        let error = DeliveryTrace::parse("# nothing\n\n", "x.trace").unwrap_err();
        assert_eq!(
            error.to_string(),
            "x.trace: the trace is empty (no delivery opportunities)"
        );
    }

    #[test]
    fn rejects_zero_period() {
        let error = DeliveryTrace::parse("0\n\n0\n", "x.trace").unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("x.trace:3: the last timestamp must be > 0"),
            "{error}"
        );
    }

    #[test]
    fn rejects_huge_timestamps() {
        let error = DeliveryTrace::parse("99999999999999999999999\n", "x.trace").unwrap_err();
        assert!(
            error.to_string().starts_with("x.trace:1: timestamp"),
            "{error}"
        );
        assert!(error.message.contains("too large"), "{error}");
    }

    #[test]
    fn load_names_the_missing_file() {
        let error = DeliveryTrace::load(Path::new("/nonexistent/cell.trace"), &crate::input::fs)
            .unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("/nonexistent/cell.trace: cannot read"),
            "{error}"
        );
    }

    #[test]
    fn load_reads_a_file() {
        let path = std::env::temp_dir().join(format!("quiclab-link-{}.trace", std::process::id()));
        std::fs::write(&path, "1\n2\n").unwrap();
        let loaded = DeliveryTrace::load(&path, &crate::input::fs);
        std::fs::remove_file(&path).unwrap();
        let trace = loaded.unwrap();
        assert_eq!(trace.period(), 2_000_000);
        assert_eq!(trace.name(), path.display().to_string());
    }
}
