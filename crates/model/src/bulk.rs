//! The `bulk` workload's result: the `quiclab bulk --json` contract, and the metrics it declares.

use serde::{Deserialize, Serialize};

use crate::fec::FecResult;
use crate::fidelity::FidelityReport;
use crate::metric::{flag, measured};
use crate::records::StopReason;
use crate::switch::{SwitchOutcome, WithSwitches};
use crate::{Metric, MetricDef, RunError, WorkloadResult};
use quiclab_link::spec::LinkDescription;

/// The result of one bulk transfer: the `quiclab bulk --json` contract.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BulkResult {
    pub proto: String,
    /// ALPN as negotiated.
    pub negotiated: String,
    pub tls_version: String,
    pub resumed: bool,
    pub zero_rtt: bool,
    /// TCP's three-way handshake (None for QUIC).
    pub connect_ms: Option<f64>,
    #[serde(deserialize_with = "quiclab_link::stats::f64_or_nan")]
    pub handshake_ms: f64,
    #[serde(deserialize_with = "quiclab_link::stats::f64_or_nan")]
    pub ttfb_ms: f64,
    #[serde(deserialize_with = "quiclab_link::stats::f64_or_nan")]
    pub total_ms: f64,
    pub bytes: u64,
    pub verified: Option<bool>,
    #[serde(deserialize_with = "quiclab_link::stats::f64_or_nan")]
    pub goodput_mbps: f64,
    /// Seed 000's U = r/b: the bytes the bottleneck forwarded downstream (retransmissions and
    /// headers included) per second of the connection's life, over the link's mean rate (None
    /// on an unlimited link or without the emulator).
    pub utilization: Option<f64>,
    /// Goodput over the link's mean rate (None on an unlimited link).
    pub goodput_utilization: Option<f64>,
    /// Downlink packets lost at the bottleneck (random and tail drops) over those that arrived.
    pub loss_ratio: Option<f64>,
    #[serde(deserialize_with = "quiclab_link::stats::f64_or_nan")]
    pub cpu_client_s: f64,
    #[serde(deserialize_with = "quiclab_link::stats::f64_or_nan")]
    pub cpu_server_s: f64,
    #[serde(deserialize_with = "quiclab_link::stats::f64_or_nan")]
    pub cpu_client_s_per_gb: f64,
    #[serde(deserialize_with = "quiclab_link::stats::f64_or_nan")]
    pub cpu_server_s_per_gb: f64,
    pub cpu_emulator_s: Option<f64>,
    pub congestion_control: String,
    /// `emulator` or `veth` (benchmarks without the emulator).
    pub path: String,
    pub link: LinkDescription,
    /// With network switches: how the client answered them (`reconnect`, `reconnect-0rtt`,
    /// `migrate`), each switch's outcome and every connection and migration.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_switch: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network_switches: Option<Vec<SwitchOutcome>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connections: Option<Vec<crate::records::ConnectionRecord>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub migrations: Option<Vec<crate::records::MigrationRecord>>,
    /// Why a download across switches did not complete (a timeout is its own kind).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<StopReason>,
    /// With `--fec N`: the downlink's FEC (what the server sent, what the client rebuilt).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fec: Option<FecResult>,
    /// The response's `alt-svc` header (h1/h2: how the server advertised HTTP/3; None when it
    /// did not, or over h3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alt_svc: Option<String>,
    /// Which programs served and fetched, their versions and congestion control (None in runs
    /// stored before implementations were an axis: quiclab's own on both ends).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub implementations: Option<crate::implementation::Implementations>,
    /// Why a value is null: its name → the reason (another implementation that does not tell
    /// it, say).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub unmeasured: std::collections::BTreeMap<String, String>,
    /// What moving the bytes cost each end: CPU (user, system, CPU-bound), packets and ACKs per
    /// MB (None in runs stored before issue 60).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoints: Option<crate::endpoint::EndpointCosts>,
    pub fidelity: Option<FidelityReport>,
}

/// The download's time (the bulk headline), its first byte and its goodput: metrics other parts of
/// quiclab name (the demo's table, reports), so they are referred to by these constants.
pub const TOTAL_MS: MetricDef = MetricDef::completion_time("total_ms", "Download time", "ms");
pub const TTFB_MS: MetricDef = MetricDef::lower("ttfb_ms", "Time to first byte", "ms");
pub const GOODPUT_MBPS: MetricDef = MetricDef::higher("goodput_mbps", "Goodput", "Mbit/s");
/// Downlink packets lost at the bottleneck over those that arrived (bulk, page and flows alike).
pub const LOSS_RATIO: MetricDef = MetricDef::lower("loss_ratio", "Loss ratio", "");
pub const HANDSHAKE_MS: MetricDef = MetricDef::lower("handshake_ms", "Handshake time", "ms");
/// The client's and the server's CPU time (every kind that runs them).
pub const CPU_CLIENT_S: MetricDef = MetricDef::lower("cpu_client_s", "Client CPU", "s");
pub const CPU_SERVER_S: MetricDef = MetricDef::lower("cpu_server_s", "Server CPU", "s");
/// Seed 000's U (bulk and flows alike), and the same share counted in delivered bytes.
pub const UTILIZATION: MetricDef = MetricDef::higher("utilization", "Channel utilisation U", "");
pub const GOODPUT_UTILIZATION: MetricDef =
    MetricDef::higher("goodput_utilization", "Goodput utilisation", "");
/// Body bytes received (bulk and page alike).
pub const BYTES: MetricDef = MetricDef::higher("bytes", "Bytes received", "B");

impl WithSwitches for BulkResult {
    fn switch_figures(&self) -> crate::switch::SwitchFigures {
        crate::switch::SwitchFigures::of(
            self.network_switches.as_deref(),
            self.connections.as_ref().map(Vec::len),
        )
    }
}

impl crate::endpoint::WithEndpoints for BulkResult {
    fn endpoint_costs(&self) -> Option<&crate::endpoint::EndpointCosts> {
        self.endpoints.as_ref()
    }
}

impl WorkloadResult for BulkResult {
    const REPORT_METRICS: &'static [MetricDef] =
        &[TOTAL_MS, TTFB_MS, GOODPUT_MBPS, LOSS_RATIO, HANDSHAKE_MS];

    const METRICS: &'static [Metric<Self>] = &[
        Metric::of(TOTAL_MS, |r| Some(r.total_ms)),
        Metric::of(TTFB_MS, |r| measured(r.ttfb_ms)),
        Metric::of(GOODPUT_MBPS, |r| Some(r.goodput_mbps)),
        Metric::of(LOSS_RATIO, |r| r.loss_ratio),
        Metric::of(HANDSHAKE_MS, |r| measured(r.handshake_ms)),
        Metric::of(
            MetricDef::lower("connect_ms", "TCP connect time", "ms"),
            |r| r.connect_ms,
        ),
        Metric::of(UTILIZATION, |r| r.utilization),
        Metric::of(GOODPUT_UTILIZATION, |r| r.goodput_utilization),
        Metric::of(BYTES, |r| Some(r.bytes as f64)),
        Metric::of(MetricDef::higher("resumed", "Resumed (1 = yes)", ""), |r| {
            flag(r.resumed)
        }),
        Metric::of(
            MetricDef::higher("zero_rtt", "0-RTT accepted (1 = yes)", ""),
            |r| flag(r.zero_rtt),
        ),
        Metric::of(CPU_CLIENT_S, |r| Some(r.cpu_client_s)),
        Metric::of(CPU_SERVER_S, |r| Some(r.cpu_server_s)),
        Metric::of(
            MetricDef::lower("cpu_client_s_per_gb", "Client CPU per GB", "s/GB"),
            |r| Some(r.cpu_client_s_per_gb),
        ),
        Metric::of(
            MetricDef::lower("cpu_server_s_per_gb", "Server CPU per GB", "s/GB"),
            |r| Some(r.cpu_server_s_per_gb),
        ),
        Metric::of(
            MetricDef::lower("cpu_emulator_s", "Emulator CPU", "s"),
            |r| r.cpu_emulator_s,
        ),
        crate::switch::metrics::<Self>()[0],
        crate::switch::metrics::<Self>()[1],
        crate::switch::metrics::<Self>()[2],
        crate::switch::metrics::<Self>()[3],
        crate::fec::metrics::<Self>()[0],
        crate::fec::metrics::<Self>()[1],
        crate::fec::metrics::<Self>()[2],
        crate::endpoint::metrics::<Self>()[0],
        crate::endpoint::metrics::<Self>()[1],
        crate::endpoint::metrics::<Self>()[2],
        crate::endpoint::metrics::<Self>()[3],
        crate::endpoint::metrics::<Self>()[4],
        crate::endpoint::metrics::<Self>()[5],
        crate::endpoint::metrics::<Self>()[6],
        crate::endpoint::metrics::<Self>()[7],
        crate::endpoint::metrics::<Self>()[8],
        crate::endpoint::metrics::<Self>()[9],
        crate::endpoint::metrics::<Self>()[10],
    ];

    fn failure(&self) -> Option<RunError> {
        if let Some(e) = &self.error {
            return Some(RunError::from_stop(e));
        }
        (self.verified == Some(false))
            .then(|| RunError::Failed("the body did not match the expected bytes".into()))
    }
}
