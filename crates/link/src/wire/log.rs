//! The packet log's format (docs/link.md): one event per line, parsed and written here; the lab's
//! `LogWriter` puts the lines in a file with its header, the runner reads them back.
//!
//! One line per event, modelled on Mahimahi's `mm-link` log but with microsecond timestamps, a
//! direction column and the emulator's own release lateness:
//! ```text
//! # quiclab packet log v1
//! # epoch_unix_ns: 1763751234000000000
//! # uplink: 10mbit, one-way delay 25ms, ...
//! <t_us> <up|down> + <bytes>                          arrival at the emulator
//! <t_us> <up|down> - <bytes> <one_way_us> <late_us>   delivery (released to the other side)
//! <t_us> <up|down> d <bytes>                          refused by the queue (its limit; PIE's early drop)
//! <t_us> <up|down> l <bytes>                          lost by the random-loss process
//! <t_us> <up|down> x <bytes>                          dropped: the client's address on a network it left
//! <t_us> <up|down> a <bytes>                          dropped at dequeue by a queue discipline
//! ```
//! A link with network switches lists them in the header, one line each:
//! `# switch: t_us=60000000 epoch=1 from=wifi to=lte`.
//!
//! This module is the format's one reader ([`read`], [`epoch_monotonic_ns`]) and the lines' one
//! writer ([`LogEvent::line`]).

use serde::{Deserialize, Serialize};

use crate::Nanos;

/// Which way a packet travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// client → server
    Uplink,
    /// server → client
    Downlink,
}

impl Direction {
    pub fn label(self) -> &'static str {
        match self {
            Direction::Uplink => "up",
            Direction::Downlink => "down",
        }
    }
}

/// The header line that names the columns and events.
pub const COLUMNS: &str = "columns: t_us dir event bytes [one_way_us late_us]; events: + arrival, - delivery, d queue drop, l random loss, x stale address (network switch), a dropped at dequeue (queue discipline)";

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
    /// The event as one line of the log (without its newline).
    pub fn line(&self) -> String {
        match *self {
            LogEvent::Arrival {
                t,
                direction,
                bytes,
            } => format!("{} {} + {bytes}", us(t), direction.label()),
            LogEvent::Delivered {
                t,
                direction,
                bytes,
                one_way,
                lateness,
            } => format!(
                "{} {} - {bytes} {} {}",
                us(t),
                direction.label(),
                us(one_way),
                us(lateness)
            ),
            LogEvent::DroppedQueue {
                t,
                direction,
                bytes,
            } => format!("{} {} d {bytes}", us(t), direction.label()),
            LogEvent::Lost {
                t,
                direction,
                bytes,
            } => format!("{} {} l {bytes}", us(t), direction.label()),
            LogEvent::DroppedSwitch {
                t,
                direction,
                bytes,
            } => format!("{} {} x {bytes}", us(t), direction.label()),
            LogEvent::DroppedAtDequeue {
                t,
                direction,
                bytes,
            } => format!("{} {} a {bytes}", us(t), direction.label()),
        }
    }

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
pub fn parse_us(v: &str) -> Option<Nanos> {
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

fn us(ns: Nanos) -> String {
    format!("{}.{:03}", ns / 1000, ns % 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_event_formats_to_a_line_that_parses_back() {
        let d = Direction::Downlink;
        let events = [
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
        for e in &events {
            assert_eq!(LogEvent::parse(&e.line()), Some(e.clone()), "{}", e.line());
        }
        assert_eq!(events[1].line(), "26001.001 down - 1500 25000.999 12.345");
        assert_eq!(events[5].line(), "7.000 down a 1500");
    }
}
