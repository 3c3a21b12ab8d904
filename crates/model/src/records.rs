//! What the stacks and the browser record about a run, as data (the shells fill these in; every
//! result that embeds them is read without them).

use quiclab_fec::{DecoderCounters, EncoderCounters};
use quiclab_proto::options::Protocol;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;

/// Why a player or a flow stopped early.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StopReason {
    /// The run's time limit passed first.
    TimedOut { limit_s: f64, detail: String },
    /// Anything else (an I/O error, a server error, a stall that gave up, bytes missing).
    Failed { reason: String },
}

/// One connection of the download.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ConnectionRecord {
    /// When it was started (s on the emulator's clock).
    pub opened_s: f64,
    /// When its handshake finished (None: it never did).
    pub ready_s: Option<f64>,
    pub local: String,
    pub resumed: bool,
    pub zero_rtt: bool,
    /// Why it was opened: `start`, or what ended the previous one.
    pub why: String,
    /// The body offset it asked from.
    pub from_byte: u64,
    /// TLS 1.3 session tickets the client held when it started (resumption needs one).
    pub tickets_held: u64,
}

/// One migration of the QUIC connection to a new address.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct MigrationRecord {
    pub at_s: f64,
    pub local: String,
    pub error: Option<String>,
}

/// FEC's figures for one endpoint: what it sent and what it received, summed over its peers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct FecCounters {
    /// Data datagrams per group (N).
    pub group: u64,
    /// Parity datagrams the socket could not send (an error other than not writable).
    pub parity_unsent: u64,
    /// What it sent: `data_sent`, `parity_sent`, `flushed` (parity of partial groups).
    #[serde(flatten)]
    pub sent: EncoderCounters,
    /// What it received: `data_received`, `parity_received`, `rebuilt`, `groups_complete`,
    /// `unrecoverable_groups`, `unrecovered`, `malformed`, `duplicates`.
    #[serde(flatten)]
    pub received: DecoderCounters,
}

impl FecCounters {
    /// Adds another socket's counters (the group size is the same on all of a run's sockets).
    pub fn add(&mut self, o: &FecCounters) {
        self.group = self.group.max(o.group);
        self.parity_unsent += o.parity_unsent;
        self.sent.add(&o.sent);
        self.received.add(&o.received);
    }
}

/// One connection the loader opened (ms since navigation start). A connection can be opened and
/// never become ready before the page is loaded (HTTP/1.1 opens one per waiting request, as
/// Chromium does, and other connections may serve them first); its set-up fields are then `None`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PageConnection {
    pub id: u64,
    /// When the plan asked for it.
    pub opened_ms: f64,
    /// When TCP's handshake completed (`None` for QUIC, or not completed).
    pub tcp_connect_ms: Option<f64>,
    /// When it was ready for requests (TLS, or QUIC's handshake, complete).
    pub ready_ms: Option<f64>,
    /// The negotiated ALPN: `http/1.1`, `h2` or `h3`.
    pub protocol: Option<String>,
    /// `1.2` or `1.3`.
    pub tls_version: Option<String>,
    /// Whether TLS resumed a session (of an earlier connection, or of the warm-up load).
    pub resumed: bool,
    /// h3 of a warm load: whether the server accepted the requests sent in 0-RTT (None: no
    /// 0-RTT was attempted, or the answer came after the load).
    #[serde(default)]
    pub zero_rtt_accepted: Option<bool>,
    /// Requests sent on it.
    pub requests: usize,
}

/// Chromium's QUIC attempts during a run, from its NetLog.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QuicAttempts {
    /// Requests for which Chromium had an Alt-Svc entry for the origin.
    pub alt_svc_found: u64,
    /// Of those, entries already marked broken (a QUIC attempt failed earlier).
    pub alt_svc_broken: u64,
    /// QUIC sessions started.
    pub sessions: u64,
    /// QUIC sessions whose handshake completed.
    pub handshakes_done: u64,
    /// Why sessions closed, as Chromium logged it (distinct reasons).
    pub close_reasons: Vec<String>,
}

/// The handshakes of a warm load's measured navigation: the connections it opened and how many
/// resumed a session of the warm-up.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Handshakes {
    /// TLS-over-TCP handshakes that completed (`SSL_CONNECT` ends with a version).
    pub tls: u64,
    /// Of those, the ones that resumed a session (`is_resumed`).
    pub tls_resumed: u64,
    /// QUIC sessions created.
    pub quic: u64,
    /// Of those, the ones whose transport parameters came from a stored session (a resumption).
    pub quic_resumed: u64,
    /// QUIC sessions that sent 0-RTT and the server accepted it.
    pub quic_zero_rtt_accepted: u64,
    /// QUIC sessions whose 0-RTT the server rejected.
    pub quic_zero_rtt_rejected: u64,
    /// Connections (TLS or QUIC) that began between the warm-up's close and the measured
    /// navigation: the measured load may have reused one, so a warm run with any fails.
    #[serde(default)]
    pub opened_between_loads: u64,
}

impl Handshakes {
    /// Connections that resumed a session, TLS over TCP and QUIC.
    pub fn resumed(&self) -> u64 {
        self.tls_resumed + self.quic_resumed
    }
}

impl StopReason {
    pub fn is_timeout(&self) -> bool {
        matches!(self, StopReason::TimedOut { .. })
    }

    /// The text that describes it.
    pub fn text(&self) -> &str {
        match self {
            StopReason::TimedOut { detail, .. } => detail,
            StopReason::Failed { reason } => reason,
        }
    }

    /// The text that describes it (appended to by callers that learn more).
    pub fn text_mut(&mut self) -> &mut String {
        match self {
            StopReason::TimedOut { detail, .. } => detail,
            StopReason::Failed { reason } => reason,
        }
    }
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StopReason::TimedOut { limit_s, detail } => {
                write!(f, "timed out at its limit of {limit_s:.1} s: {detail}")
            }
            StopReason::Failed { reason } => f.write_str(reason),
        }
    }
}

/// How a client answers a network switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OnSwitch {
    Reconnect,
    #[serde(rename = "reconnect-0rtt")]
    Reconnect0rtt,
    Migrate,
}

impl OnSwitch {
    pub const NAMES: [&'static str; 3] = ["reconnect", "reconnect-0rtt", "migrate"];

    pub fn as_str(self) -> &'static str {
        match self {
            OnSwitch::Reconnect => "reconnect",
            OnSwitch::Reconnect0rtt => "reconnect-0rtt",
            OnSwitch::Migrate => "migrate",
        }
    }

    /// Refuses what the stacks cannot do: migration is QUIC's.
    pub fn check(self, protocol: Protocol) -> Result<(), String> {
        if self == OnSwitch::Migrate && protocol != Protocol::H3 {
            return Err(format!(
                "migrate is QUIC connection migration: it needs h3, but this run is {protocol} (use reconnect or reconnect-0rtt)"
            ));
        }
        Ok(())
    }
}

impl std::str::FromStr for OnSwitch {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "reconnect" => Ok(OnSwitch::Reconnect),
            "reconnect-0rtt" => Ok(OnSwitch::Reconnect0rtt),
            "migrate" => Ok(OnSwitch::Migrate),
            _ => Err(format!(
                "expected one of {}; got {s:?}",
                OnSwitch::NAMES.join(", ")
            )),
        }
    }
}

impl std::fmt::Display for OnSwitch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One peer's share of an endpoint's counters (`parity_unsent` is the endpoint's, not a peer's).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PeerFecCounters {
    pub peer: SocketAddr,
    #[serde(flatten)]
    pub counters: FecCounters,
}

/// What a server writes while it runs (quiclab-stacks' `ServeConfig::fec_log`): every FEC socket's counters summed,
/// and per peer (so that each flow of a mix finds its own by its client port).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FecLog {
    pub total: FecCounters,
    pub peers: Vec<PeerFecCounters>,
}

impl FecLog {
    /// The counters of the peers on the client ports `ports`, summed (one connection's port, or
    /// every port a video player opened); None when no peer used them.
    pub fn peer_ports(&self, ports: &[u16]) -> Option<FecCounters> {
        let mut found = None;
        for p in self.peers.iter().filter(|p| ports.contains(&p.peer.port())) {
            found
                .get_or_insert(FecCounters {
                    group: p.counters.group,
                    ..Default::default()
                })
                .add(&p.counters);
        }
        found
    }
}

/// What one flow did; times are CLOCK_MONOTONIC nanoseconds.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct FlowReport {
    /// The client's port: with the transport, the flow's key at the emulator.
    pub local_port: u16,
    pub alpn: String,
    pub start_ns: u64,
    /// TLS (TCP) or QUIC handshake complete.
    pub handshake_ns: u64,
    pub first_byte_ns: u64,
    pub last_byte_ns: u64,
    /// When the flow ended: its last byte, or the time it stopped reading.
    pub end_ns: u64,
    /// Application (body) bytes received.
    pub bytes: u64,
    /// The whole resource arrived.
    pub complete: bool,
    /// The flow stopped at its time limit (long-running flows).
    pub stopped: bool,
    /// `[ms since origin, bytes]` of every millisecond in which body bytes arrived.
    pub receptions: Vec<(u64, u64)>,
    /// h3 with FEC: the client's FEC counters (both directions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fec: Option<FecCounters>,
}

/// What a download across network switches did.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SwitchDownloadReport {
    pub bytes: u64,
    pub complete: bool,
    /// Every body byte was the pattern byte of its offset.
    pub verified: bool,
    /// (s on the emulator's clock, body bytes so far), one point per chunk received.
    pub progress: Vec<(f64, u64)>,
    pub connections: Vec<ConnectionRecord>,
    pub migrations: Vec<MigrationRecord>,
    /// Why the download stopped before the end (a timeout is its own kind).
    pub error: Option<StopReason>,
}

/// What the switches did to one player, on the emulator's clock (s): what the workload needs
/// to measure each switch's interruption, recovery and re-fetched bytes.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct VideoSwitchLog {
    /// Every connection the player opened (h1/K: K per set).
    pub connections: Vec<ConnectionRecord>,
    pub migrations: Vec<MigrationRecord>,
    /// (s, segment body bytes so far, including bytes later thrown away); points closer than
    /// quiclab-stacks' `PROGRESS_MERGE_S` are merged, so a pause is measured up to that much long.
    pub progress: Vec<(f64, u64)>,
    /// When each segment request (and each retry) started: a pause in the bytes counts from the
    /// later of the last byte and the request (the player is idle between segments).
    pub requests: Vec<f64>,
    /// (s, bytes) of each segment given up after a loss: its part that had arrived, fetched
    /// again with the whole segment.
    pub refetched: Vec<(f64, u64)>,
}

/// What one player did.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VideoReport {
    pub metrics: quiclab_video::PlayerMetrics,
    pub segments: Vec<quiclab_video::SegmentRecord>,
    pub events: Vec<quiclab_video::PlayerEvent>,
    /// (seconds since the origin, buffer in seconds).
    pub buffer_points: Vec<(f64, f64)>,
    /// The client ports of the player's connections (the flows' keys at the emulator).
    pub local_ports: Vec<u16>,
    /// Connection set-up done (s since the origin).
    pub connected_s: Option<f64>,
    /// Why the player stopped before the end of the content (a timeout is its own kind).
    pub error: Option<StopReason>,
    /// With switches: connections, migrations and the bytes' arrival.
    #[serde(default)]
    pub switching: Option<VideoSwitchLog>,
    /// h3 with FEC: the client's FEC counters over the player's connections (both directions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fec: Option<FecCounters>,
}

/// A download by another client, in quiclab's terms.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExternalFetch {
    /// The ALPN it negotiated (`h3`, `h2`, `http/1.1`).
    pub negotiated: Option<String>,
    /// `1.3`, `1.2` (HTTP/3 is always TLS 1.3: RFC 9001).
    pub tls_version: Option<String>,
    pub connect_ms: Option<f64>,
    pub handshake_ms: Option<f64>,
    pub ttfb_ms: Option<f64>,
    pub total_ms: f64,
    pub bytes: u64,
    pub verified: Option<bool>,
    pub resumed: bool,
    /// The congestion window over time, from its qlog (ms, bytes).
    pub cwnd: Vec<(f64, u64)>,
    /// Why a field is None: field name → reason.
    pub unmeasured: std::collections::BTreeMap<&'static str, String>,
}
