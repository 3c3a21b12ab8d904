//! The kernel TCP state of another server's connections (Caddy's, the quic-go peer's net/http):
//! `tcp_info` and the congestion control's name, read every [`SAMPLE_INTERVAL`] through the
//! kernel's socket diagnostics from a netlink socket opened in the server's namespace.
//!
//! Why: quiclab's own server samples `TCP_INFO` on its sockets; another program's descriptors are
//! out of reach, but the kernel answers for every socket of a namespace (as `ss -ti` does). The
//! samples go to a kept run's `cwnd.csv` in quiclab's own format and clock, so the report draws
//! another server's TCP window as it draws quiclab's; and the congestion control the kernel ran
//! is checked against the one the run records.

use std::collections::{BTreeMap, BTreeSet};

use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use quiclab_lab::netns::NetNs;
use quiclab_lab::{Lab, Side};
use quiclab_model::implementation::Server;
use quiclab_proto::options::Protocol;
use quiclab_sockets::sock_diag::{Family, dump};
use quiclab_stacks::cwnd::{CwndLog, SAMPLE_INTERVAL, monotonic_ns};

use crate::harness::{RunError, WorkDir};

/// What a sampler saw over its life.
#[derive(Debug, Default, Clone)]
pub struct PeerTcpSummary {
    /// Samples taken of the port's sockets (rows, when a log was given).
    pub samples: u64,
    /// Connections seen (by socket inode).
    pub connections: usize,
    /// The congestion control names the kernel reported for them.
    pub congestion: BTreeSet<String>,
    /// Why sampling stopped early, if it did.
    pub error: Option<String>,
}

/// A thread sampling the TCP sockets on one local port of a namespace.
pub struct PeerTcpSampler {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<PeerTcpSummary>>,
}

fn diag_socket(ns: &NetNs) -> anyhow::Result<OwnedFd> {
    // A netlink socket answers for the namespace it was created in: create it there (on a
    // thread of its own, NetNs::run), use it from anywhere.
    Ok(ns.run(quiclab_sockets::sock_diag::open)??)
}

impl PeerTcpSampler {
    /// Starts sampling the sockets on local `port` in `ns`; with `log`, every sample is a row of
    /// it (connections numbered in the order first seen).
    pub fn start(ns: &NetNs, port: u16, log: Option<CwndLog>) -> anyhow::Result<PeerTcpSampler> {
        let fd = diag_socket(ns)?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::Builder::new()
            .name("peer-tcp-sampler".into())
            .spawn(move || {
                let mut summary = PeerTcpSummary::default();
                let mut conns: BTreeMap<u32, u64> = BTreeMap::new();
                let mut buf = vec![0u8; 64 * 1024];
                let mut seq = 0u32;
                // One last sample after the stop is asked: the end of the transfer.
                let mut last = false;
                loop {
                    last |= stopping.load(Ordering::Relaxed);
                    for family in [Family::V4, Family::V6] {
                        seq = seq.wrapping_add(1);
                        let sockets = match dump(&fd, family, seq, &mut buf) {
                            Ok(s) => s,
                            Err(e) => {
                                summary.error = Some(format!("{e:#}"));
                                return summary;
                            }
                        };
                        let t = monotonic_ns();
                        for s in sockets.iter().filter(|s| s.local_port == port) {
                            let Some(info) = &s.info else { continue };
                            let next = conns.len() as u64;
                            let conn = *conns.entry(s.inode).or_insert(next);
                            if let Some(cc) = &s.congestion {
                                summary.congestion.insert(cc.clone());
                            }
                            if let Some(log) = &log {
                                log.record_tcp(t, conn, s.peer_port, info);
                            }
                            summary.samples += 1;
                        }
                    }
                    if last {
                        break;
                    }
                    std::thread::sleep(SAMPLE_INTERVAL);
                }
                summary.connections = conns.len();
                if let Some(log) = &log {
                    log.flush();
                }
                summary
            })?;
        Ok(PeerTcpSampler {
            stop,
            thread: Some(thread),
        })
    }

    /// Stops sampling (after one last sample) and says what was seen.
    pub fn finish(mut self) -> PeerTcpSummary {
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(summary)) => summary,
            _ => PeerTcpSummary {
                error: Some("the sampler thread panicked".into()),
                ..Default::default()
            },
        }
    }
}

impl Drop for PeerTcpSampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A sampler of `server`'s TCP connections for a run over `proto`, when the server is another
/// program's and the protocol TCP (None otherwise): a kept run's `cwnd.csv` gets its samples.
pub fn sample_other_server(
    lab: &Lab,
    work: &WorkDir,
    server: Server,
    proto: Protocol,
) -> Result<Option<PeerTcpSampler>, RunError> {
    if server == Server::Quiclab || proto == Protocol::H3 {
        return Ok(None);
    }
    let log = if work.is_kept() {
        Some(
            CwndLog::create(&work.join("cwnd.csv"))
                .map_err(|e| RunError::Failed(format!("{e:#}")))?,
        )
    } else {
        None
    };
    PeerTcpSampler::start(lab.namespace(Side::Server), 443, log)
        .map(Some)
        .map_err(|e| {
            RunError::Failed(format!(
                "reading {}'s TCP state (sock_diag) failed: {e:#}",
                server.name()
            ))
        })
}

impl PeerTcpSummary {
    /// The congestion control the kernel ran for the server's connections must be the one the
    /// run records (`cc`); a failed sampler fails the run. A transfer over before the first
    /// sample (5 ms) has nothing to check.
    pub fn check(&self, server: Server, cc: &str) -> Result<(), RunError> {
        if let Some(e) = &self.error {
            return Err(RunError::Failed(format!(
                "reading {}'s TCP state (sock_diag) failed: {e}",
                server.name()
            )));
        }
        if let Some(other) = self.congestion.iter().find(|c| c.as_str() != cc) {
            return Err(RunError::Failed(format!(
                "{}'s TCP connection ran {other}, not {cc} (as the kernel's socket diagnostics \
                 report it): the run would be recorded with the wrong congestion control",
                server.name()
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_whose_kernel_ran_another_congestion_control_fails_the_run() {
        let mut seen = PeerTcpSummary::default();
        assert!(
            seen.check(Server::Caddy, "cubic").is_ok(),
            "nothing seen, nothing to check"
        );
        seen.congestion.insert("cubic".into());
        assert!(seen.check(Server::Caddy, "cubic").is_ok());
        seen.congestion.insert("bbr".into());
        let e = format!("{:?}", seen.check(Server::Caddy, "cubic").unwrap_err());
        assert!(
            e.contains("caddy") && e.contains("ran bbr, not cubic"),
            "{e}"
        );
        let broken = PeerTcpSummary {
            error: Some("EPERM".into()),
            ..Default::default()
        };
        assert!(broken.check(Server::QuicGo, "cubic").is_err());
    }
}
