//! The `page` workload's result: the `quiclab page --json` contract, and the metrics it declares.

use serde::{Deserialize, Serialize};

use crate::bulk::LOSS_RATIO;
use crate::fec::FecResult;
use crate::fidelity::FidelityReport;
use crate::records::PageConnection;
use crate::{Metric, MetricDef, WorkloadResult};
use quiclab_link::spec::LinkDescription;

/// The host name of shard `k` (1-based) of `host` (`s1.quiclab.test`): where a sharded page
/// (`shards = N`) references its objects, and what the browser maps to the server.
pub fn shard_host(k: u32, host: &str) -> String {
    format!("s{k}.{host}")
}

/// The built-in pages, by name (`page = "carlucci-small"`). quiclab-page's corpus builds each
/// (its test `every_builtin_name_builds` fails for a name it does not know); the name list is
/// here so that a key's parser can check a name without the corpus.
pub const BUILTIN_PAGES: &[&str] = &[
    "carlucci-small",
    "carlucci-medium",
    "carlucci-large",
    "megyesi-5-small",
    "megyesi-5-large",
    "megyesi-50-small",
    "megyesi-50-large",
];

/// The result of one page load: the `quiclab page --json` contract.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PageResult {
    #[serde(flatten)]
    pub summary: PageSummary,
    pub page: String,
    pub link: LinkDescription,
    /// Downlink packets lost at the bottleneck over those that arrived.
    pub loss_ratio: Option<f64>,
    /// With FEC: the downlink's FEC (what the server sent, what the client rebuilt).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fec: Option<FecResult>,
    pub fidelity: Option<FidelityReport>,
    /// Which program served and which loaded, their versions and congestion control (None in
    /// loads stored before implementations were an axis: quiclab's own server).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub implementations: Option<crate::implementation::Implementations>,
    /// Per-object timings (for the HAR and the waterfall; not part of the JSON document).
    #[serde(skip)]
    pub objects: Vec<ObjectTiming>,
}

/// The page load time (the page headline) and the connections the load opened.
pub const PLT_MS: MetricDef = MetricDef::completion_time("plt_ms", "Page load time", "ms");
pub const CONNECTIONS: MetricDef = MetricDef::lower("connections", "Connections", "").descriptive();

impl WorkloadResult for PageResult {
    const REPORT_METRICS: &'static [MetricDef] = &[PLT_MS, CONNECTIONS, LOSS_RATIO];

    const METRICS: &'static [Metric<Self>] = &[
        Metric::of(PLT_MS, |r| Some(r.summary.plt_ms)),
        Metric::of(CONNECTIONS, |r| Some(r.summary.connections as f64)),
        Metric::of(LOSS_RATIO, |r| r.loss_ratio),
        Metric::of(
            MetricDef::lower("ttfb_ms", "Time to first byte (root document)", "ms"),
            |r| r.summary.ttfb_ms,
        ),
        Metric::of(
            MetricDef::lower("dom_content_loaded_ms", "DOMContentLoaded", "ms"),
            |r| r.summary.dom_content_loaded_ms,
        ),
        Metric::of(MetricDef::higher("objects", "Objects", ""), |r| {
            Some(r.summary.objects as f64)
        }),
        Metric::of(crate::bulk::BYTES, |r| Some(r.summary.bytes as f64)),
        Metric::of(
            MetricDef::lower("chromium_wall_ms", "Chromium wall time", "ms"),
            |r| r.summary.chromium_wall_ms,
        ),
        crate::fec::metrics::<Self>()[0],
        crate::fec::metrics::<Self>()[1],
        crate::fec::metrics::<Self>()[2],
    ];
}

/// The page client's summary of one load.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PageSummary {
    pub proto: String,
    pub browser: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub browser_version: Option<String>,
    pub objects: usize,
    pub bytes: u64,
    pub plt_ms: f64,
    /// The root document's first byte, ms after navigation start (None: not recorded, in
    /// results from before it was).
    #[serde(default)]
    pub ttfb_ms: Option<f64>,
    pub dom_content_loaded_ms: Option<f64>,
    pub connections: usize,
    pub negotiated_protocols: Vec<String>,
    /// Wall-clock time of the navigation's start (for the HAR), not a measurement.
    pub navigation_start_unix_ms: u64,
    pub max_streams: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chromium_wall_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_details: Option<Vec<PageConnection>>,
    /// Whether the measured load followed an untimed one (session cache filled).
    #[serde(default)]
    pub warm: bool,
    /// Connections of the measured load whose TLS (or QUIC) handshake resumed a session, and
    /// of those h3 ones whose 0-RTT requests the server accepted. The built-in loader knows them
    /// for every load; Chromium's come from its NetLog, recorded for warm loads only (None: a
    /// cold Chromium load, or a warm one whose NetLog could not be read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumed_connections: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zero_rtt_accepted_connections: Option<usize>,
    /// A warm Chromium load: the measured navigation's handshakes as its NetLog lists them (TLS
    /// and QUIC, resumed, 0-RTT accepted and rejected).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chromium_handshakes: Option<crate::records::Handshakes>,
    /// `--discover` (Chromium, h3 not forced): what each navigation came over; the summary's
    /// other figures are the first navigation's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discovery: Option<Discovery>,
}

/// Navigations of a discovery run, one after the other in one browser.
pub const DISCOVERY_NAVIGATIONS: usize = 3;

/// How Chromium found HTTP/3 through the server's Alt-Svc: per navigation, what its objects came
/// over, and the first navigation (1-based) with an object over h3.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Discovery {
    pub navigations: Vec<DiscoveredLoad>,
    /// None: no navigation used h3.
    pub switched_at_navigation: Option<usize>,
    /// Chromium's QUIC attempts over all navigations, from its NetLog (None: unreadable): did it
    /// find the Alt-Svc, start QUIC, complete a handshake, and why sessions closed.
    pub quic: Option<crate::records::QuicAttempts>,
}

/// One navigation of a discovery run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DiscoveredLoad {
    pub plt_ms: f64,
    /// Objects (the document included) by `nextHopProtocol`.
    pub objects_by_protocol: std::collections::BTreeMap<String, usize>,
    /// When the first object over h3 started, ms after this navigation's start.
    pub first_h3_start_ms: Option<f64>,
}

/// What the loader measured for one object, relative to navigation start, in ms. Phases that did
/// not happen are 0 (a reused connection has `connect_ms = tls_ms = 0`); negative values are
/// treated as "did not happen".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ObjectTiming {
    /// URL path.
    pub path: String,
    /// The connection it used.
    pub connection: u64,
    /// `http/1.1`, `h2` or `h3`.
    pub protocol: String,
    /// When its request became wanted (discovered), ms after navigation start.
    pub started_ms: f64,
    /// Waiting for a connection or a stream slot.
    pub blocked_ms: f64,
    /// TCP or QUIC handshake this request waited for (0 on a reused connection).
    pub connect_ms: f64,
    /// TLS handshake this request waited for (0 on a reused connection; 0 for QUIC if it is booked
    /// in `connect_ms`).
    pub tls_ms: f64,
    /// Writing the request.
    pub send_ms: f64,
    /// Request sent to first response byte.
    pub wait_ms: f64,
    /// First to last response byte.
    pub receive_ms: f64,
    /// Response body bytes.
    pub bytes: u64,
    /// Status code.
    pub status: u16,
    /// Content-Type.
    pub mime: String,
}

impl ObjectTiming {
    /// The sum of its phases (negative ones count as 0), ms.
    pub fn total_ms(&self) -> f64 {
        [
            self.blocked_ms,
            self.connect_ms,
            self.tls_ms,
            self.send_ms,
            self.wait_ms,
            self.receive_ms,
        ]
        .iter()
        .map(|v| v.max(0.0))
        .sum()
    }

    /// When its last byte arrived, ms after navigation start.
    pub fn end_ms(&self) -> f64 {
        self.started_ms + self.total_ms()
    }

    /// When its first byte arrived (its time to first byte), ms after navigation start.
    pub fn first_byte_ms(&self) -> f64 {
        self.end_ms() - self.receive_ms
    }
}
