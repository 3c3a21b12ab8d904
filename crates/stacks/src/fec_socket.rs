//! XOR FEC under quinn (issue 13): a [`quinn::AsyncUdpSocket`] that wraps the runtime's UDP socket
//! and runs `quiclab-fec`'s encoder per destination and decoder per source. Both endpoints of a
//! connection must use it (every datagram carries the FEC header).
//!
//! - Sending: each datagram gets its header; after every N, the group's parity datagram follows.
//!   quinn is told it may send one datagram per call (no GSO), so every datagram is seen. A parity
//!   the socket cannot send at once (it is not writable) waits for the next send. A partial group is
//!   closed by a timer task after `flush_after` (gQUIC: max(RTT/2, 5 ms)).
//! - Receiving: the socket reads into its own buffers (GRO may hand it several datagrams at a
//!   stride), strips the headers, drops parity datagrams after use and hands quinn each payload
//!   and each rebuilt datagram. QUIC discards duplicates, so a late original is harmless.
//!
//! Parity datagrams bypass quinn's congestion controller (they are not QUIC packets): the
//! controller neither paces nor counts them, so FEC adds load it does not know of (gQUIC counted
//! its FEC packets in its window; docs/fec.md says what this changes). A rebuilt datagram reaches
//! QUIC as if it had arrived: the loss is never seen, as in gQUIC.

pub use quiclab_model::records::FecCounters;
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::io::{self, IoSliceMut};
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use quiclab_fec::{Decoder, Encoder};
use quinn::udp::{EcnCodepoint, RecvMeta, Transmit};
use quinn::{AsyncUdpSocket, Runtime, UdpPoller};

use crate::cwnd::monotonic_ns;

/// The socket's receive batch: datagrams read from the kernel at once.
const BATCH: usize = 8;
/// Bytes per receive buffer (a GRO batch of 64 kB at most).
const RECV_BUF: usize = 64 * 1024;

pub use quiclab_model::records::{FecLog, PeerFecCounters};

/// The log a server wrote to `path` ([`log_counters`], the format's one writer); None when it is
/// missing or not a whole log (unknown, never zeros: the caller says what is missing).
pub fn read_fec_log(path: &std::path::Path) -> Option<FecLog> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

struct Sending {
    encoders: HashMap<SocketAddr, Encoder>,
    /// Parity datagrams not sent yet (the socket was not writable).
    pending: VecDeque<(SocketAddr, Option<IpAddr>, Vec<u8>)>,
    parity_unsent: u64,
}

/// A datagram for quinn: source, destination IP, ECN, bytes.
type Ready = (SocketAddr, Option<IpAddr>, Option<EcnCodepoint>, Vec<u8>);

/// The most peers a socket decodes for at once: a decoder holds up to
/// `quiclab_fec::MAX_OPEN_GROUPS` groups of datagrams, and a socket must not grow without bound
/// with the source addresses it sees. The oldest peer's decoder is retired (judged, its
/// counters kept) to make room.
pub const MAX_DECODERS: usize = 256;

struct Receiving {
    decoders: HashMap<SocketAddr, Decoder>,
    /// Peers in the order their decoders were made (the oldest is retired first).
    order: VecDeque<SocketAddr>,
    /// Counters of retired decoders, by peer.
    retired: HashMap<SocketAddr, quiclab_fec::DecoderCounters>,
    /// Payloads ready for quinn.
    ready: VecDeque<Ready>,
    bufs: Vec<Vec<u8>>,
}

impl Receiving {
    /// The decoder for `peer`, made when new (retiring the oldest one at [`MAX_DECODERS`]).
    fn decoder(&mut self, peer: SocketAddr, n: usize) -> &mut Decoder {
        if !self.decoders.contains_key(&peer) {
            while self.decoders.len() >= MAX_DECODERS {
                let Some(oldest) = self.order.pop_front() else {
                    break;
                };
                if let Some(mut d) = self.decoders.remove(&oldest) {
                    d.finish();
                    self.retired.entry(oldest).or_default().add(&d.counters);
                }
            }
            self.order.push_back(peer);
        }
        self.decoders
            .entry(peer)
            .or_insert_with(|| Decoder::new(n).expect("checked in wrap"))
    }
}

/// The FEC socket (see the module documentation).
pub struct FecSocket {
    inner: Arc<dyn AsyncUdpSocket>,
    n: usize,
    sending: Mutex<Sending>,
    receiving: Mutex<Receiving>,
}

impl fmt::Debug for FecSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FecSocket")
            .field("n", &self.n)
            .field("inner", &self.inner)
            .finish()
    }
}

impl FecSocket {
    /// Wraps `socket` with groups of `n` data datagrams; a partial group is flushed after
    /// `flush_after`. Starts the flush timer on the current tokio runtime.
    pub fn wrap(
        socket: std::net::UdpSocket,
        n: usize,
        flush_after: Duration,
    ) -> io::Result<Arc<FecSocket>> {
        quiclab_fec::check_group(n).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let inner = quinn::TokioRuntime.wrap_udp_socket(socket)?;
        let s = Arc::new(FecSocket {
            inner,
            n,
            sending: Mutex::new(Sending {
                encoders: HashMap::new(),
                pending: VecDeque::new(),
                parity_unsent: 0,
            }),
            receiving: Mutex::new(Receiving {
                decoders: HashMap::new(),
                order: VecDeque::new(),
                retired: HashMap::new(),
                ready: VecDeque::new(),
                bufs: vec![vec![0; RECV_BUF]; BATCH],
            }),
        });
        let weak = Arc::downgrade(&s);
        tokio::spawn(flush_timer(weak, flush_after));
        Ok(s)
    }

    /// The counters so far, over every peer.
    pub fn counters(&self) -> FecCounters {
        let mut c = FecCounters {
            group: self.n as u64,
            ..Default::default()
        };
        {
            let s = self.sending.lock().unwrap();
            for e in s.encoders.values() {
                c.sent.add(&e.counters);
            }
            c.parity_unsent = s.parity_unsent;
        }
        let r = self.receiving.lock().unwrap();
        for d in r.decoders.values() {
            c.received.add(&d.counters);
        }
        for d in r.retired.values() {
            c.received.add(d);
        }
        c
    }

    /// The counters per peer (a client's address and port, as the socket saw it), sorted by peer.
    pub fn peer_counters(&self) -> Vec<PeerFecCounters> {
        let mut peers: std::collections::BTreeMap<SocketAddr, FecCounters> = Default::default();
        let blank = FecCounters {
            group: self.n as u64,
            ..Default::default()
        };
        {
            let s = self.sending.lock().unwrap();
            for (to, e) in &s.encoders {
                peers.entry(*to).or_insert(blank).sent.add(&e.counters);
            }
        }
        let r = self.receiving.lock().unwrap();
        for (from, d) in &r.decoders {
            peers
                .entry(*from)
                .or_insert(blank)
                .received
                .add(&d.counters);
        }
        for (from, d) in &r.retired {
            peers.entry(*from).or_insert(blank).received.add(d);
        }
        peers
            .into_iter()
            .map(|(peer, counters)| PeerFecCounters { peer, counters })
            .collect()
    }

    /// The counters once traffic has stopped: every group still open judged first.
    pub fn final_counters(&self) -> FecCounters {
        self.finish();
        self.counters()
    }

    /// Judges every group still open at the receiver (call when traffic has stopped).
    pub fn finish(&self) {
        let mut r = self.receiving.lock().unwrap();
        for d in r.decoders.values_mut() {
            d.finish();
        }
    }

    fn send_one(
        &self,
        to: SocketAddr,
        src_ip: Option<IpAddr>,
        ecn: Option<EcnCodepoint>,
        bytes: &[u8],
    ) -> io::Result<()> {
        self.inner.try_send(&Transmit {
            destination: to,
            ecn,
            contents: bytes,
            segment_size: None,
            src_ip,
        })
    }

    /// Sends what parity datagrams wait, oldest first, while the socket takes them.
    fn send_pending(&self, s: &mut Sending) {
        while let Some((to, src, bytes)) = s.pending.front() {
            match self.send_one(*to, *src, None, bytes) {
                Ok(()) => {
                    s.pending.pop_front();
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(_) => {
                    s.pending.pop_front();
                    s.parity_unsent += 1;
                }
            }
        }
    }

    /// Sends one datagram with its header; the group's parity after it when it completes one.
    fn send_datagram(&self, s: &mut Sending, t: &Transmit, payload: &[u8]) -> io::Result<()> {
        let n = self.n;
        let enc = s
            .encoders
            .entry(t.destination)
            .or_insert_with(|| Encoder::new(n).expect("checked in wrap"));
        let wire = enc.data_datagram(payload);
        self.send_one(t.destination, t.src_ip, t.ecn, &wire)?;
        if let Some(parity) = enc.sent(payload, monotonic_ns()) {
            s.pending.push_back((t.destination, t.src_ip, parity));
            self.send_pending(s);
        }
        Ok(())
    }
}

/// Closes partial groups older than `flush_after`, until the socket is gone.
async fn flush_timer(socket: Weak<FecSocket>, flush_after: Duration) {
    let tick = (flush_after / 2).clamp(Duration::from_millis(1), Duration::from_millis(5));
    let mut interval = tokio::time::interval(tick);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let after_ns = flush_after.as_nanos() as u64;
    loop {
        interval.tick().await;
        let Some(sock) = socket.upgrade() else { return };
        let now = monotonic_ns();
        let mut s = sock.sending.lock().unwrap();
        let due: Vec<(SocketAddr, Vec<u8>)> = s
            .encoders
            .iter_mut()
            .filter_map(|(to, e)| e.flush_due(now, after_ns).map(|p| (*to, p)))
            .collect();
        for (to, p) in due {
            s.pending.push_back((to, None, p));
        }
        sock.send_pending(&mut s);
    }
}

impl AsyncUdpSocket for FecSocket {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
        self.inner.clone().create_io_poller()
    }

    fn try_send(&self, t: &Transmit) -> io::Result<()> {
        let mut s = self.sending.lock().unwrap();
        self.send_pending(&mut s);
        match t.segment_size {
            Some(seg) if seg < t.contents.len() => {
                // quinn was told one datagram per transmit; should it send more, each is sent
                // on its own (a failure after the first is a loss QUIC recovers).
                let mut first = true;
                for chunk in t.contents.chunks(seg) {
                    let r = self.send_datagram(&mut s, t, chunk);
                    if first {
                        r?;
                        first = false;
                    }
                }
                Ok(())
            }
            _ => self.send_datagram(&mut s, t, t.contents),
        }
    }

    fn poll_recv(
        &self,
        cx: &mut Context,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        let mut r = self.receiving.lock().unwrap();
        loop {
            if !r.ready.is_empty() {
                let mut k = 0;
                while k < bufs.len().min(meta.len()) {
                    let Some((addr, dst_ip, ecn, bytes)) = r.ready.pop_front() else {
                        break;
                    };
                    let len = bytes.len().min(bufs[k].len());
                    bufs[k][..len].copy_from_slice(&bytes[..len]);
                    meta[k] = RecvMeta {
                        addr,
                        len,
                        stride: len,
                        ecn,
                        dst_ip,
                    };
                    k += 1;
                }
                return Poll::Ready(Ok(k));
            }
            // Read a batch into the socket's own buffers, then decode it.
            let Receiving { bufs: own, .. } = &mut *r;
            let mut slices: Vec<IoSliceMut<'_>> =
                own.iter_mut().map(|b| IoSliceMut::new(b)).collect();
            let mut metas = [RecvMeta::default(); BATCH];
            let n = match self.inner.poll_recv(cx, &mut slices, &mut metas) {
                Poll::Ready(Ok(n)) => n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            };
            drop(slices);
            let mut decoded = Vec::new();
            for (i, m) in metas.iter().enumerate().take(n) {
                let stride = if m.stride == 0 { m.len } else { m.stride };
                let buf = &r.bufs[i][..m.len];
                for datagram in buf.chunks(stride.max(1)) {
                    decoded.push((m.addr, m.dst_ip, m.ecn, datagram.to_vec()));
                }
            }
            let n_group = self.n;
            for (addr, dst_ip, ecn, datagram) in decoded {
                let out = r.decoder(addr, n_group).decode(&datagram);
                if let Some(range) = out.payload {
                    r.ready
                        .push_back((addr, dst_ip, ecn, datagram[range].to_vec()));
                }
                if let Some(rebuilt) = out.rebuilt {
                    r.ready.push_back((addr, dst_ip, ecn, rebuilt));
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    fn may_fragment(&self) -> bool {
        self.inner.may_fragment()
    }
}

/// A QUIC endpoint on `bind` (a server with `server_config`): over a [`FecSocket`] when `stack`
/// asks for FEC, else quinn's own socket.
pub fn quic_endpoint(
    bind: SocketAddr,
    server_config: Option<quinn::ServerConfig>,
    stack: &quiclab_proto::options::StackOptions,
) -> io::Result<(quinn::Endpoint, Option<Arc<FecSocket>>)> {
    let udp = std::net::UdpSocket::bind(bind)?;
    // quinn asks for UDP GRO where the kernel has it; `quic_gro = false` turns it off on the
    // same socket afterwards (a clone of the descriptor), so datagrams are read one by one.
    let gro_switch = (!stack.quic_gro).then(|| udp.try_clone()).transpose()?;
    let Some(fec) = stack.fec else {
        let e = quinn::Endpoint::new(
            quinn::EndpointConfig::default(),
            server_config,
            udp,
            Arc::new(quinn::TokioRuntime),
        )?;
        if let Some(s) = gro_switch {
            quiclab_sockets::sockopt::set_udp_gro(&s, false).map_err(io::Error::other)?;
        }
        return Ok((e, None));
    };
    let socket = FecSocket::wrap(
        udp,
        fec.group as usize,
        Duration::from_micros(fec.flush_after_us),
    )?;
    let e = quinn::Endpoint::new_with_abstract_socket(
        quinn::EndpointConfig::default(),
        server_config,
        socket.clone(),
        Arc::new(quinn::TokioRuntime),
    )?;
    if let Some(s) = gro_switch {
        quiclab_sockets::sockopt::set_udp_gro(&s, false).map_err(io::Error::other)?;
    }
    Ok((e, Some(socket)))
}

/// Writes the [`FecLog`] of `sockets` to `path` every 100 ms (whole JSON documents, replaced
/// by rename, so a reader never sees half of one), until the process ends.
pub async fn log_counters(
    sockets: Vec<Arc<FecSocket>>,
    path: std::path::PathBuf,
) -> anyhow::Result<()> {
    let tmp = path.with_extension("json.tmp");
    let mut interval = tokio::time::interval(Duration::from_millis(100));
    loop {
        interval.tick().await;
        let mut log = FecLog::default();
        for s in &sockets {
            log.total.add(&s.counters());
            log.peers.extend(s.peer_counters());
        }
        let json = serde_json::to_vec(&log)?;
        quiclab_outputs::write_in_claimed(&tmp, &json)?;
        std::fs::rename(&tmp, &path)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_counter_log_reads_back_whole_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fec.json");
        let mut log = FecLog::default();
        log.total.group = 2;
        log.total.sent.parity_sent = 7;
        std::fs::write(&path, serde_json::to_vec(&log).unwrap()).unwrap();
        assert_eq!(read_fec_log(&path), Some(log));
        std::fs::write(&path, b"{\"total\": {").unwrap();
        assert_eq!(read_fec_log(&path), None);
        assert_eq!(read_fec_log(&dir.path().join("none.json")), None);
    }

    #[test]
    fn decoders_are_capped_and_a_retired_peers_counters_are_kept() {
        let mut r = Receiving {
            decoders: HashMap::new(),
            order: VecDeque::new(),
            retired: HashMap::new(),
            ready: VecDeque::new(),
            bufs: Vec::new(),
        };
        let enc = quiclab_fec::Encoder::new(2).unwrap();
        let datagram = enc.data_datagram(b"x");
        let peer = |i: usize| SocketAddr::from(([100, 64, 0, 1], 10_000 + i as u16));
        for i in 0..MAX_DECODERS + 50 {
            r.decoder(peer(i), 2).decode(&datagram);
            assert!(r.decoders.len() <= MAX_DECODERS);
        }
        assert_eq!(r.decoders.len(), MAX_DECODERS);
        assert_eq!(r.retired.len(), 50);
        // Every datagram is still counted, retired or not.
        let total: u64 = r
            .decoders
            .values()
            .map(|d| d.counters.data_received)
            .sum::<u64>()
            + r.retired.values().map(|c| c.data_received).sum::<u64>();
        assert_eq!(total, (MAX_DECODERS + 50) as u64);
    }
}
