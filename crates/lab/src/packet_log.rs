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

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use quiclab_link::Nanos;

use crate::emulator::Direction;

/// One event of the log.
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
            "# columns: t_us dir event bytes [one_way_us late_us]; events: + arrival, - delivery, d queue drop, l random loss, x stale address (network switch)"
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
        }
        Ok(())
    }

    pub fn finish(mut self) -> Result<()> {
        self.out.flush()?;
        Ok(())
    }
}
