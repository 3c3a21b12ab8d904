//! The `video` workload's result: the `quiclab video --json` contract, and the metrics it declares.

use serde::{Deserialize, Serialize};

use crate::fec::FecResult;
use crate::fidelity::FidelityReport;
use crate::switch::{SwitchOutcome, WithSwitches};
use crate::{Metric, MetricDef, RunError, TimeSeries, WorkloadResult};
use quiclab_link::spec::LinkDescription;
use quiclab_video::{PlayerEvent, SegmentRecord};

/// One player's result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PlayerResult {
    /// Position among the players, from 1.
    pub index: usize,
    /// `1 h1/4`.
    pub label: String,
    pub proto: String,
    /// Range parts per segment (connections for h1, parallel requests for h2/h3).
    pub parts: u32,
    #[serde(flatten)]
    pub metrics: quiclab_video::PlayerMetrics,
    /// Mean wait after a seek (s).
    pub mean_seek_wait_s: Option<f64>,
    pub local_ports: Vec<u16>,
    pub connected_s: Option<f64>,
    /// Every downloaded segment: request time (s since the start), level, bitrate, bytes,
    /// download time, throughput, buffer after it, whether a seek threw it away.
    pub segment_log: Vec<SegmentRecord>,
    pub events: Vec<PlayerEvent>,
    /// Why the player stopped before the end (a timeout is its own kind).
    pub error: Option<crate::records::StopReason>,
    /// With network switches: each switch as this player lived it (its count of bitrate
    /// switches is `bitrate_switches`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network_switches: Option<Vec<SwitchOutcome>>,
    /// With network switches: every connection the player opened.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connections: Option<Vec<crate::records::ConnectionRecord>>,
    /// With network switches: every migration of its QUIC connection.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub migrations: Option<Vec<crate::records::MigrationRecord>>,
    /// h3 with FEC: this player's downlink FEC (the server's counters for its client ports).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fec: Option<FecResult>,
}

/// The result of a video run: the `quiclab video --json` contract. The top-level metrics are
/// player 1's (the only one, unless several share the link).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VideoResult {
    pub proto: String,
    pub parts: u32,
    pub abr: String,
    /// The players' contender label (`h1/4`, `h1+h3`).
    pub mix: String,
    pub content: String,
    pub live: bool,
    #[serde(deserialize_with = "quiclab_link::stats::f64_or_nan")]
    pub segment_s: f64,
    #[serde(deserialize_with = "quiclab_link::stats::f64_or_nan")]
    pub buffer_s: f64,
    #[serde(deserialize_with = "quiclab_link::stats::f64_or_nan")]
    pub duration_s: f64,
    pub seek_policy: String,
    /// Mean bitrate of the downloaded segments (the seed's "average playback bitrate").
    pub avg_bitrate_mbps: Option<f64>,
    pub played_bitrate_mbps: Option<f64>,
    pub rebuffer_rate: Option<f64>,
    pub rebuffer_rate_with_seeks: Option<f64>,
    #[serde(deserialize_with = "quiclab_link::stats::f64_or_nan")]
    pub rebuffer_s: f64,
    pub stalls: u64,
    pub startup_s: Option<f64>,
    pub seek_waits_s: Vec<f64>,
    pub mean_seek_wait_s: Option<f64>,
    /// The count of bitrate switches (level changes between consecutive downloads), player 1's.
    pub bitrate_switches: u64,
    /// With network switches (`--switch`): player 1's outcome of each network switch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network_switches: Option<Vec<SwitchOutcome>>,
    pub segments: u64,
    /// Jain's index over the players' average bitrates (several players).
    pub jain_bitrate: Option<f64>,
    /// Player 1's average bitrate over the others' mean (several players).
    pub bitrate_ratio_first_rest: Option<f64>,
    pub players: Vec<PlayerResult>,
    /// With network switches: how the players answered them (`reconnect`, `reconnect-0rtt`,
    /// `migrate`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_switch: Option<String>,
    /// With FEC: the h3 players' FEC summed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fec: Option<FecResult>,
    #[serde(deserialize_with = "quiclab_link::stats::f64_or_nan")]
    pub cpu_client_s: f64,
    #[serde(deserialize_with = "quiclab_link::stats::f64_or_nan")]
    pub cpu_server_s: f64,
    pub link: LinkDescription,
    pub fidelity: Option<FidelityReport>,
    /// Which program served the segments, its version and congestion control (None in runs
    /// stored before implementations were an axis; the players are always quiclab's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<crate::implementation::ImplementationRecord>,
    /// Which program played, when it was not quiclab's own player: AStream, with its version,
    /// local changes and configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<crate::implementation::ImplementationRecord>,
    /// What moving the segments cost each end (None in runs stored before issue 60).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoints: Option<crate::endpoint::EndpointCosts>,
    #[serde(skip)]
    pub series: Vec<TimeSeries>,
}

/// The headline metrics a video report draws (bitrate against rebuffering).
pub const AVG_BITRATE_MBPS: MetricDef =
    MetricDef::higher("avg_bitrate_mbps", "Average bitrate (downloaded)", "Mbit/s");
pub const REBUFFER_RATE: MetricDef = MetricDef::lower("rebuffer_rate", "Rebuffer rate", "");
pub const MEAN_SEEK_WAIT_S: MetricDef =
    MetricDef::lower("mean_seek_wait_s", "Wait after seek (mean)", "s");
pub const STARTUP_S: MetricDef = MetricDef::lower("startup_s", "Startup delay", "s");
pub const BITRATE_SWITCHES: MetricDef =
    MetricDef::lower("bitrate_switches", "Bitrate switches", "");

impl WithSwitches for VideoResult {
    fn switch_figures(&self) -> crate::switch::SwitchFigures {
        crate::switch::SwitchFigures::of(
            self.network_switches.as_deref(),
            self.players
                .first()
                .and_then(|p| p.connections.as_ref())
                .map(Vec::len),
        )
    }
}

impl VideoResult {
    /// Sets what moving the segments cost each end: every player's segment bytes over the span
    /// from the first request to the last download's end (the players' waits included: a video
    /// client is seldom busy, and the span says so).
    pub fn set_endpoints(&mut self, readings: &crate::endpoint::EndpointReadings) {
        let segments = self.players.iter().flat_map(|p| &p.segment_log);
        let bytes = segments.clone().map(|s| s.bytes).sum();
        let start = segments.clone().map(|s| s.request_s).reduce(f64::min);
        let end = segments
            .map(|s| s.request_s + s.download_s)
            .reduce(f64::max);
        let span_s = match (start, end) {
            (Some(a), Some(b)) if b > a => b - a,
            _ => 0.0,
        };
        let transport =
            crate::endpoint::Transport::of_names(self.players.iter().map(|p| p.proto.as_str()));
        self.endpoints = Some(readings.cost(bytes, span_s, transport));
    }
}

impl crate::endpoint::WithEndpoints for VideoResult {
    fn endpoint_costs(&self) -> Option<&crate::endpoint::EndpointCosts> {
        self.endpoints.as_ref()
    }
}

impl WorkloadResult for VideoResult {
    const REPORT_METRICS: &'static [MetricDef] = &[
        AVG_BITRATE_MBPS,
        REBUFFER_RATE,
        MEAN_SEEK_WAIT_S,
        STARTUP_S,
        BITRATE_SWITCHES,
    ];

    const METRICS: &'static [Metric<Self>] = &[
        Metric::of(AVG_BITRATE_MBPS, |r| r.avg_bitrate_mbps),
        Metric::of(
            MetricDef::higher("played_bitrate_mbps", "Played bitrate", "Mbit/s"),
            |r| r.played_bitrate_mbps,
        ),
        Metric::of(REBUFFER_RATE, |r| r.rebuffer_rate),
        Metric::of(
            MetricDef::lower(
                "rebuffer_rate_with_seeks",
                "Rebuffer rate, seek waits counted",
                "",
            ),
            |r| r.rebuffer_rate_with_seeks,
        ),
        Metric::of(MetricDef::lower("rebuffer_s", "Rebuffering", "s"), |r| {
            Some(r.rebuffer_s)
        }),
        Metric::of(MetricDef::lower("stalls", "Stalls", ""), |r| {
            Some(r.stalls as f64)
        }),
        Metric::of(STARTUP_S, |r| r.startup_s),
        Metric::of(MEAN_SEEK_WAIT_S, |r| r.mean_seek_wait_s),
        Metric::of(
            MetricDef::lower("max_seek_wait_s", "Wait after seek (max)", "s"),
            |r| r.seek_waits_s.iter().copied().reduce(f64::max),
        ),
        Metric::of(BITRATE_SWITCHES, |r| Some(r.bitrate_switches as f64)),
        Metric::of(
            MetricDef::higher("segments", "Segments downloaded", ""),
            |r| Some(r.segments as f64),
        ),
        Metric::of(
            MetricDef::higher(
                "avg_bitrate_mbps_p2",
                "Player 2's average bitrate",
                "Mbit/s",
            ),
            |r| r.players.get(1).and_then(|p| p.metrics.avg_bitrate_mbps),
        ),
        Metric::of(
            MetricDef::lower("rebuffer_rate_p2", "Player 2's rebuffer rate", ""),
            |r| r.players.get(1).and_then(|p| p.metrics.rebuffer_rate),
        ),
        Metric::of(
            MetricDef::higher("jain_bitrate", "Jain's index of the players' bitrates", ""),
            |r| r.jain_bitrate,
        ),
        Metric::of(
            MetricDef::higher(
                "bitrate_ratio_first_rest",
                "Player 1's bitrate / others' mean",
                "",
            )
            .no_effect_at(1.0),
            |r| r.bitrate_ratio_first_rest,
        ),
        crate::switch::metrics::<Self>()[0],
        crate::switch::metrics::<Self>()[1],
        crate::switch::metrics::<Self>()[2],
        crate::switch::metrics::<Self>()[3],
        Metric::of(
            MetricDef::lower("refetched_bytes", "Bytes fetched again", "B"),
            |r| r.switch_figures().refetched_bytes,
        ),
        Metric::of(crate::bulk::CPU_CLIENT_S, |r| Some(r.cpu_client_s)),
        Metric::of(crate::bulk::CPU_SERVER_S, |r| Some(r.cpu_server_s)),
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
        RunError::from_stops(
            self.players
                .iter()
                .filter_map(|p| p.error.as_ref().map(|e| (format!("player {}", p.label), e))),
        )
    }
}
