//! The per-packet event log written by `quiclab shell --log FILE` (format in docs/link.md).
//!
//! One line per event, modelled on Mahimahi's `mm-link` log but with microsecond timestamps, a
//! direction column and the emulator's own release lateness:
//! ```text
//! # quiclab packet log v1
//! # epoch_unix_ns: 1763751234000000000
//! # uplink: 10mbit, delay 25ms, ...
//! <t_us> <up|down> + <bytes>                          arrival at the emulator
//! <t_us> <up|down> - <bytes> <one_way_us> <late_us>   delivery (released to the other side)
//! <t_us> <up|down> d <bytes>                          dropped by the full queue (tail drop)
//! <t_us> <up|down> l <bytes>                          lost by the random-loss process
//! <t_us> <up|down> x <bytes>                          dropped: the client's address on a network it left
//! ```
//! A link with network switches lists them in the header, one line each:
//! `# switch: t_us=60000000 epoch=1 from=wifi to=lte`.
//!
//! This module is the format's one writer ([`LogWriter`]) and one reader ([`read`],
//! [`epoch_monotonic_ns`]): the runner's queue series and the tests read logs through it.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use quiclab_link::Nanos;

use crate::emulator::Direction;

/// One event of the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogEvent {
    Arrival {
        t: Nanos,
        direction: Direction,
        bytes: u32,
    },
    Delivered {
        t: Nanos,
        direction: Direction,
        bytes: u32,
        one_way: Nanos,
        lateness: Nanos,
    },
    DroppedQueue {
        t: Nanos,
        direction: Direction,
        bytes: u32,
    },
    Lost {
        t: Nanos,
        direction: Direction,
        bytes: u32,
    },
    DroppedSwitch {
        t: Nanos,
        direction: Direction,
        bytes: u32,
    },
    /// Dropped by a queue discipline when it left the queue (CoDel, FQ-CoDel; also FQ-CoDel's
    /// overflow victims), at that time — unlike `DroppedQueue`, which refuses an arrival.
    DroppedAtDequeue {
        t: Nanos,
        direction: Direction,
        bytes: u32,
    },
}

impl LogEvent {
    pub fn t(&self) -> Nanos {
        match *self {
            LogEvent::Arrival { t, .. }
            | LogEvent::Delivered { t, .. }
            | LogEvent::DroppedQueue { t, .. }
            | LogEvent::Lost { t, .. }
            | LogEvent::DroppedSwitch { t, .. }
            | LogEvent::DroppedAtDequeue { t, .. } => t,
        }
    }

    pub fn direction(&self) -> Direction {
        match *self {
            LogEvent::Arrival { direction, .. }
            | LogEvent::Delivered { direction, .. }
            | LogEvent::DroppedQueue { direction, .. }
            | LogEvent::Lost { direction, .. }
            | LogEvent::DroppedSwitch { direction, .. }
            | LogEvent::DroppedAtDequeue { direction, .. } => direction,
        }
    }

    /// One line of the log; None for a header line or a line that is not an event.
    pub fn parse(line: &str) -> Option<LogEvent> {
        let f: Vec<&str> = line.split_ascii_whitespace().collect();
        let (t, direction, bytes) = (
            parse_us(f.first()?)?,
            match *f.get(1)? {
                "up" => Direction::Uplink,
                "down" => Direction::Downlink,
                _ => return None,
            },
            f.get(3)?.parse::<u32>().ok()?,
        );
        Some(match *f.get(2)? {
            "+" => LogEvent::Arrival {
                t,
                direction,
                bytes,
            },
            "-" => LogEvent::Delivered {
                t,
                direction,
                bytes,
                one_way: parse_us(f.get(4)?)?,
                lateness: parse_us(f.get(5)?)?,
            },
            "d" => LogEvent::DroppedQueue {
                t,
                direction,
                bytes,
            },
            "l" => LogEvent::Lost {
                t,
                direction,
                bytes,
            },
            "x" => LogEvent::DroppedSwitch {
                t,
                direction,
                bytes,
            },
            "a" => LogEvent::DroppedAtDequeue {
                t,
                direction,
                bytes,
            },
            _ => return None,
        })
    }
}

/// `123.456` (µs, three decimals as written) → nanoseconds.
fn parse_us(v: &str) -> Option<Nanos> {
    let (whole, frac) = v.split_once('.').unwrap_or((v, "0"));
    if frac.is_empty() || frac.len() > 3 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let frac: Nanos = format!("{frac:0<3}").parse().ok()?;
    whole
        .parse::<Nanos>()
        .ok()?
        .checked_mul(1000)?
        .checked_add(frac)
}

/// The events of a log's text, in order (header and malformed lines skipped).
pub fn read(log: &str) -> impl Iterator<Item = LogEvent> + '_ {
    log.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(LogEvent::parse)
}

/// `# epoch_monotonic_ns: N` of a log's header: CLOCK_MONOTONIC at the emulator's t = 0.
pub fn epoch_monotonic_ns(log: &str) -> Option<u64> {
    log.lines()
        .take_while(|l| l.starts_with('#'))
        .find_map(|l| l.strip_prefix("# epoch_monotonic_ns: "))
        .and_then(|v| v.trim().parse().ok())
}

pub struct LogWriter {
    out: BufWriter<File>,
}

fn us(ns: Nanos) -> String {
    format!("{}.{:03}", ns / 1000, ns % 1000)
}

impl LogWriter {
    pub fn create(path: &Path, epoch: Instant, header: &[String]) -> Result<LogWriter> {
        // Never through a symbolic link; a file the user named was created new (or replaced with
        // --force) by the command before the lab started.
        let file: File = quiclab_outputs::create_in_claimed(path)
            .with_context(|| format!("creating log file {}", path.display()))?;
        let mut out = BufWriter::with_capacity(1 << 20, file);
        let epoch_unix = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos()
            .saturating_sub(epoch.elapsed().as_nanos());
        writeln!(out, "# quiclab packet log v1")?;
        writeln!(out, "# epoch_unix_ns: {epoch_unix}")?;
        // CLOCK_MONOTONIC at t = 0: the clock congestion samples (cwnd.csv) are stamped with.
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes into the timespec we pass.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
        let mono_now = ts.tv_sec as u128 * 1_000_000_000 + ts.tv_nsec as u128;
        writeln!(
            out,
            "# epoch_monotonic_ns: {}",
            mono_now.saturating_sub(epoch.elapsed().as_nanos())
        )?;
        for line in header {
            writeln!(out, "# {line}")?;
        }
        writeln!(
            out,
            "# columns: t_us dir event bytes [one_way_us late_us]; events: + arrival, - delivery, d queue drop, l random loss, x stale address (network switch), a dropped at dequeue (queue discipline)"
        )?;
        Ok(LogWriter { out })
    }

    pub fn write(&mut self, ev: &LogEvent) -> Result<()> {
        match *ev {
            LogEvent::Arrival {
                t,
                direction,
                bytes,
            } => writeln!(self.out, "{} {} + {bytes}", us(t), direction.label())?,
            LogEvent::Delivered {
                t,
                direction,
                bytes,
                one_way,
                lateness,
            } => writeln!(
                self.out,
                "{} {} - {bytes} {} {}",
                us(t),
                direction.label(),
                us(one_way),
                us(lateness)
            )?,
            LogEvent::DroppedQueue {
                t,
                direction,
                bytes,
            } => writeln!(self.out, "{} {} d {bytes}", us(t), direction.label())?,
            LogEvent::Lost {
                t,
                direction,
                bytes,
            } => writeln!(self.out, "{} {} l {bytes}", us(t), direction.label())?,
            LogEvent::DroppedSwitch {
                t,
                direction,
                bytes,
            } => writeln!(self.out, "{} {} x {bytes}", us(t), direction.label())?,
            LogEvent::DroppedAtDequeue {
                t,
                direction,
                bytes,
            } => writeln!(self.out, "{} {} a {bytes}", us(t), direction.label())?,
        }
        Ok(())
    }

    pub fn finish(mut self) -> Result<()> {
        self.out.flush()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_writer_writes_the_reader_reads() {
        let d = Direction::Downlink;
        let events = vec![
            LogEvent::Arrival {
                t: 1_234_567,
                direction: Direction::Uplink,
                bytes: 1500,
            },
            LogEvent::Delivered {
                t: 26_001_001,
                direction: d,
                bytes: 1500,
                one_way: 25_000_999,
                lateness: 12_345,
            },
            LogEvent::DroppedQueue {
                t: 5,
                direction: d,
                bytes: 60,
            },
            LogEvent::Lost {
                t: 999,
                direction: d,
                bytes: 1,
            },
            LogEvent::DroppedSwitch {
                t: 1_000_000_000_000,
                direction: d,
                bytes: 1280,
            },
            LogEvent::DroppedAtDequeue {
                t: 7_000,
                direction: d,
                bytes: 1500,
            },
        ];
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("link.log");
        let mut w = LogWriter::create(&path, Instant::now(), &["uplink: test".into()]).unwrap();
        for e in &events {
            w.write(e).unwrap();
        }
        w.finish().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(read(&text).collect::<Vec<_>>(), events);
        assert!(epoch_monotonic_ns(&text).is_some_and(|e| e > 0));
        // Not events: the header, other directions and verdicts, broken numbers.
        for line in [
            "# x",
            "1.000 sideways + 10",
            "1.000 up ? 10",
            "1.0000 up + 10",
            "1. up + 1",
        ] {
            assert_eq!(LogEvent::parse(line), None, "{line}");
        }
        assert_eq!(parse_us("7"), Some(7000));
        assert_eq!(parse_us("7.5"), Some(7500));
    }
}
