//! Congestion state over time, for both transports, on the machine's monotonic clock (the same clock
//! in every process and namespace, and the one the emulator's packet log is anchored to):
//! TCP from `TCP_INFO` on the sending socket, QUIC from quinn's path statistics. One CSV row per
//! sample:
//!
//! `t_mono_ns,conn,transport,cwnd_bytes,ssthresh_bytes,srtt_us,min_rtt_us,lost_packets,retransmitted_packets,delivery_rate_bps,bytes_sent,ca_state,peer_port`
//!
//! (fields a transport does not report are left empty). `peer_port` is the client's port: it ties
//! a connection to a flow of a mix (the emulator keys flows by the same 5-tuple).
//!
//! This module is the format's one writer ([`CwndLog`]) and one reader ([`read_samples`]): the
//! runner's cwnd series and the flows workload's per-flow windows read the file through it.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::fd::RawFd;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use quiclab_proto::tcp_info::TcpInfo;

/// How often a connection's congestion state is sampled.
pub const SAMPLE_INTERVAL: Duration = Duration::from_millis(5);

pub const CSV_HEADER: &str = "t_mono_ns,conn,transport,cwnd_bytes,ssthresh_bytes,srtt_us,min_rtt_us,lost_packets,retransmitted_packets,delivery_rate_bps,bytes_sent,ca_state,peer_port";

/// CLOCK_MONOTONIC in nanoseconds.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A shared CSV file of samples from every connection of a process.
#[derive(Clone)]
pub struct CwndLog {
    out: Arc<Mutex<BufWriter<File>>>,
    next_conn: Arc<AtomicU64>,
}

impl CwndLog {
    pub fn create(path: &Path) -> Result<CwndLog> {
        let file: File = quiclab_outputs::create_in_claimed(path)
            .with_context(|| format!("creating the congestion log {}", path.display()))?;
        let mut out = BufWriter::new(file);
        writeln!(out, "{CSV_HEADER}")?;
        Ok(CwndLog {
            out: Arc::new(Mutex::new(out)),
            next_conn: Arc::new(AtomicU64::new(0)),
        })
    }

    /// A number for a new connection.
    pub fn connection_id(&self) -> u64 {
        self.next_conn.fetch_add(1, Ordering::Relaxed)
    }

    fn row(&self, line: String) {
        // Flushed at once: the server is ended by a signal when its lab is torn down.
        if let Ok(mut out) = self.out.lock() {
            let _ = writeln!(out, "{line}");
            let _ = out.flush();
        }
    }

    pub fn flush(&self) {
        if let Ok(mut out) = self.out.lock() {
            let _ = out.flush();
        }
    }

    /// Samples TCP_INFO of `fd` (a live TCP socket; the caller guarantees it stays open).
    pub fn sample_tcp(&self, conn: u64, peer_port: u16, fd: RawFd) {
        if let Some(i) = read_tcp_info(fd) {
            self.row(format!("{},{peer_port}", tcp_row(monotonic_ns(), conn, &i)));
        }
    }

    /// Writes a `tcp_info` read some other way (another program's socket, through the kernel's
    /// socket diagnostics) as a sample of connection `conn`, taken at `t_mono_ns`.
    pub fn record_tcp(&self, t_mono_ns: u64, conn: u64, peer_port: u16, info: &TcpInfo) {
        self.row(format!("{},{peer_port}", tcp_row(t_mono_ns, conn, info)));
    }

    /// Samples quinn's path statistics of a connection.
    pub fn sample_quic(&self, conn: u64, c: &quinn::Connection) {
        let s = c.stats();
        self.row(format!(
            "{},{conn},quic,{},,{},{},{},,,{},,{}",
            monotonic_ns(),
            s.path.cwnd,
            s.path.rtt.as_micros(),
            s.path.min_rtt.as_micros(),
            s.path.lost_packets,
            s.udp_tx.bytes,
            c.remote_address().port(),
        ));
    }
}

fn tcp_row(t: u64, conn: u64, i: &TcpInfo) -> String {
    let mss = i.snd_mss as u64;
    format!(
        "{t},{conn},tcp,{},{},{},{},{},{},{},{},{}",
        i.cwnd_bytes(),
        // The kernel reports "infinite" ssthresh as a huge value before the first loss.
        if i.snd_ssthresh >= 0x7fff_ffff {
            String::new()
        } else {
            (i.snd_ssthresh as u64 * mss).to_string()
        },
        i.rtt_us,
        i.min_rtt_us.map(|v| v.to_string()).unwrap_or_default(),
        i.lost,
        i.total_retrans,
        i.delivery_rate
            .map(|v| (v * 8).to_string())
            .unwrap_or_default(),
        i.bytes_sent.map(|v| v.to_string()).unwrap_or_default(),
        i.ca_state_name(),
    )
}

pub use quiclab_model::cwnd::{CwndSample, read_samples};
pub use quiclab_sockets::sockopt::tcp_info as read_tcp_info;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_info_of_a_live_loopback_socket_is_sampled() {
        use std::os::fd::AsRawFd;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let i = read_tcp_info(c.as_raw_fd()).expect("TCP_INFO");
        assert!(i.snd_cwnd >= 1 && i.snd_mss > 0);
        let dir = std::env::temp_dir().join(format!("quiclab-cwnd-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = CwndLog::create(&dir.join("cwnd.csv")).unwrap();
        log.sample_tcp(0, 1234, c.as_raw_fd());
        log.flush();
        let text = std::fs::read_to_string(dir.join("cwnd.csv")).unwrap();
        let row: Vec<&str> = text.lines().nth(1).unwrap().split(',').collect();
        assert_eq!(row.len(), CSV_HEADER.split(',').count(), "{text}");
        assert_eq!(row[2], "tcp");
        // The reader gets back what the writer wrote.
        let samples = read_samples(&text);
        assert_eq!(samples.len(), 1, "{text}");
        assert_eq!(samples[0].peer_port, Some(1234));
        assert_eq!(samples[0].conn, "0");
        assert_eq!(samples[0].cwnd_bytes, i.cwnd_bytes() as f64);
        assert!(read_samples("t,cwnd\n1,2\n").is_empty());
        let _ = std::fs::remove_dir_all(dir);
    }
}
