//! The per-packet event log written by `quiclab shell --log FILE` (format in docs/link.md).
//!
//! The format (events, parsing, lines) is `quiclab_link::wire::log`; this module writes the file
//! ([`LogWriter`]: header with the clocks' epochs, one line per event) and re-exports the reader
//! ([`read`], [`epoch_monotonic_ns`]) that the runner's queue series and the tests use.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use anyhow::{Context, Result};

pub use quiclab_link::wire::log::{LogEvent, epoch_monotonic_ns, read};

pub struct LogWriter {
    out: BufWriter<File>,
}

impl LogWriter {
    pub fn create(path: &Path, clock: &crate::os::Clock, header: &[String]) -> Result<LogWriter> {
        // Never through a symbolic link; a file the user named was created new (or replaced with
        // --force) by the command before the lab started.
        let file: File = quiclab_outputs::create_in_claimed(path)
            .with_context(|| format!("creating log file {}", path.display()))?;
        let mut out = BufWriter::with_capacity(1 << 20, file);
        let epoch_unix = clock.epoch_unix_ns();
        writeln!(out, "# quiclab packet log v1")?;
        writeln!(out, "# epoch_unix_ns: {epoch_unix}")?;
        // CLOCK_MONOTONIC at t = 0: the clock congestion samples (cwnd.csv) are stamped with.
        writeln!(out, "# epoch_monotonic_ns: {}", clock.epoch_monotonic_ns())?;
        for line in header {
            writeln!(out, "# {line}")?;
        }
        writeln!(out, "# {}", quiclab_link::wire::log::COLUMNS)?;
        Ok(LogWriter { out })
    }

    pub fn write(&mut self, ev: &LogEvent) -> Result<()> {
        writeln!(self.out, "{}", ev.line())?;
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
    use crate::emulator::Direction;

    #[test]
    fn what_the_writer_writes_the_reader_reads() {
        // Every event's line is checked in quiclab_link::wire::log; here, that the file's header
        // does not hide them from the reader.
        let events = vec![
            LogEvent::Arrival {
                t: 1_234_567,
                direction: Direction::Uplink,
                bytes: 1500,
            },
            LogEvent::DroppedAtDequeue {
                t: 7_000,
                direction: Direction::Downlink,
                bytes: 1500,
            },
        ];
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("link.log");
        let mut w =
            LogWriter::create(&path, &crate::os::Clock::start(), &["uplink: test".into()]).unwrap();
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
        assert_eq!(quiclab_link::wire::log::parse_us("7"), Some(7000));
        assert_eq!(quiclab_link::wire::log::parse_us("7.5"), Some(7500));
    }
}
