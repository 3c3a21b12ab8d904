//! The `flows` workload's result: the `quiclab flows --json` contract, and the metrics it declares.

use serde::{Deserialize, Serialize};

use crate::bulk::{GOODPUT_MBPS, LOSS_RATIO, UTILIZATION};
use crate::fec::FecResult;
use crate::fidelity::FidelityReport;
use crate::records::StopReason;
use crate::{Metric, MetricDef, RunError, TimeSeries, WorkloadResult};
use quiclab_link::spec::LinkDescription;

/// One flow's result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FlowResult {
    /// Position in the mix, from 1.
    pub index: usize,
    /// `1 h3:gquic-cubic`: position and spec, as series and tables name the flow.
    pub label: String,
    pub proto: String,
    pub cc: String,
    #[serde(deserialize_with = "quiclab_link::stats::f64_or_nan")]
    pub offset_s: f64,
    /// The client's port (with the transport, the flow's key at the emulator).
    pub local_port: Option<u16>,
    /// Goodput G over the flow's cutoff window (the whole transfer when the window holds no whole
    /// bin, see `goodput_window`).
    pub goodput_mbps: Option<f64>,
    /// `cutoff` or `whole transfer`.
    pub goodput_window: String,
    /// How steady the flow was: the coefficient of variation of its bytes per bin over its
    /// cutoff window (None when the window holds fewer than two bins; runs stored before it
    /// existed read as None).
    #[serde(default)]
    pub goodput_cv: Option<f64>,
    /// How much the flow's congestion window oscillated: the coefficient of variation of the
    /// server's window samples (every 5 ms, TCP_INFO or quinn's path) over the cutoff window —
    /// the seed's "cwnd oscillations" (Carlucci et al. 2015, Fig. 6). None with fewer than two
    /// samples; runs stored before it existed read as None.
    #[serde(default)]
    pub cwnd_cv: Option<f64>,
    /// Application bytes received.
    pub bytes: u64,
    pub complete: bool,
    pub handshake_ms: Option<f64>,
    /// Start and end, seconds since the mix's start.
    pub start_s: Option<f64>,
    pub end_s: Option<f64>,
    /// The bottleneck's counters of this flow, data direction (downlink).
    pub offered_bytes: Option<u64>,
    pub forwarded_bytes: Option<u64>,
    pub forwarded_packets: Option<u64>,
    pub dropped_packets: Option<u64>,
    pub dropped_queue_packets: Option<u64>,
    pub dropped_random_packets: Option<u64>,
    /// l: bytes lost / bytes offered at the shaper.
    pub loss_ratio: Option<f64>,
    /// U = r/b: the rate of this flow's forwarded bytes over its lifetime, over the link rate.
    pub utilization: Option<f64>,
    /// Application bytes per bin from the mix's start.
    pub bin_bytes: Vec<u64>,
    /// h3 with FEC: this flow's downlink FEC (the server's counters for this flow's client port).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fec: Option<FecResult>,
    /// Why the flow stopped early (a timeout is its own kind; a failed flow has no report).
    pub error: Option<StopReason>,
}

/// The result of one flow mix: the `quiclab flows --json` contract.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FlowsResult {
    /// The mix's contender label (`h3:gquic-cubic+h1:cubic`).
    pub mix: String,
    /// Jain's index over the flows' window goodputs.
    pub jain: Option<f64>,
    /// The mean over the common window's bins of Jain's index across flows.
    pub jain_bins: Option<f64>,
    /// U of the link: every flow's forwarded bytes over b × the mix's span.
    pub utilization: Option<f64>,
    /// The flows' goodputs summed, over b.
    pub goodput_utilization: Option<f64>,
    /// The flows' goodputs summed.
    pub goodput_mbps: Option<f64>,
    /// The first flow's goodput over the mean of the others' (e.g. QUIC/TCP in `h3+h1`).
    pub ratio_first_rest: Option<f64>,
    /// The first flow's share of the summed goodput.
    pub share_first: Option<f64>,
    /// The link's downlink loss ratio (every packet, flows and the rest).
    pub loss_ratio: Option<f64>,
    pub bin_ms: u64,
    #[serde(deserialize_with = "quiclab_link::stats::f64_or_nan")]
    pub cutoff_s: f64,
    pub duration_s: Option<f64>,
    pub size: Option<u64>,
    /// The window every flow ran in, less the cutoff, in seconds since the start.
    pub common_window_s: Option<(f64, f64)>,
    pub flows: Vec<FlowResult>,
    /// With FEC: the h3 flows' FEC summed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fec: Option<FecResult>,
    #[serde(deserialize_with = "quiclab_link::stats::f64_or_nan")]
    pub cpu_client_s: f64,
    #[serde(deserialize_with = "quiclab_link::stats::f64_or_nan")]
    pub cpu_server_s: f64,
    pub link: LinkDescription,
    /// What moving the flows' bytes cost each end (None in runs stored before issue 60).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoints: Option<crate::endpoint::EndpointCosts>,
    pub fidelity: Option<FidelityReport>,
    /// Series of this run on the emulator's clock (s since it started): not serialised.
    #[serde(skip)]
    pub series: Vec<TimeSeries>,
}

impl FlowsResult {
    /// Of the datagrams the bottleneck dropped from the flows that ran FEC (data and parity,
    /// downlink), the share the client rebuilt from a parity: seed 000's "packets recovered by
    /// FEC" over the packets lost. None without FEC flows, when a flow's counters are missing
    /// (unknown is not zero), or when nothing was dropped (no share to take).
    pub fn fec_rebuilt_share(&self) -> Option<f64> {
        rebuilt_share(
            self.flows
                .iter()
                .filter_map(|f| Some((f.fec.as_ref()?.rebuilt, f.dropped_packets))),
        )
    }
}

/// Rebuilt over dropped datagrams summed over `(rebuilt, dropped)` of each FEC flow; None for no
/// flow, a missing count, or nothing dropped.
fn rebuilt_share(parts: impl IntoIterator<Item = (Option<u64>, Option<u64>)>) -> Option<f64> {
    let (mut rebuilt, mut dropped, mut any) = (0u64, 0u64, false);
    for (r, d) in parts {
        rebuilt += r?;
        dropped += d?;
        any = true;
    }
    (any && dropped > 0).then(|| rebuilt as f64 / dropped as f64)
}

/// Jain's index over the flows' window means: the fairness figure a flows report draws.
pub const JAIN: MetricDef = MetricDef::higher("jain", "Jain's index (window means)", "");
/// The first flow's goodput over the others' mean (no effect at 1).
pub const RATIO_FIRST_REST: MetricDef = MetricDef::higher(
    "ratio_first_rest",
    "First flow's goodput / others' mean",
    "",
)
.no_effect_at(1.0);

impl FlowsResult {
    /// Sets what moving the flows' bytes cost each end: every flow's bytes over the span from
    /// the first flow's start to the last one's end.
    pub fn set_endpoints(&mut self, readings: &crate::endpoint::EndpointReadings) {
        let bytes = self.flows.iter().map(|f| f.bytes).sum();
        let start = self.flows.iter().filter_map(|f| f.start_s).reduce(f64::min);
        let end = self.flows.iter().filter_map(|f| f.end_s).reduce(f64::max);
        let span_s = match (start, end) {
            (Some(a), Some(b)) if b > a => b - a,
            _ => self.duration_s.unwrap_or(0.0),
        };
        let transport =
            crate::endpoint::Transport::of_names(self.flows.iter().map(|f| f.proto.as_str()));
        self.endpoints = Some(readings.cost(bytes, span_s, transport));
    }
}

impl crate::endpoint::WithEndpoints for FlowsResult {
    fn endpoint_costs(&self) -> Option<&crate::endpoint::EndpointCosts> {
        self.endpoints.as_ref()
    }
}

impl WorkloadResult for FlowsResult {
    const REPORT_METRICS: &'static [MetricDef] = &[
        GOODPUT_MBPS,
        JAIN,
        RATIO_FIRST_REST,
        UTILIZATION,
        LOSS_RATIO,
    ];

    const METRICS: &'static [Metric<Self>] = &[
        Metric::of(JAIN, |r| r.jain),
        Metric::of(
            MetricDef::higher("jain_bins", "Jain's index (mean per bin)", ""),
            |r| r.jain_bins,
        ),
        Metric::of(UTILIZATION, |r| r.utilization),
        Metric::of(crate::bulk::GOODPUT_UTILIZATION, |r| r.goodput_utilization),
        Metric::of(GOODPUT_MBPS, |r| r.goodput_mbps),
        Metric::of(RATIO_FIRST_REST, |r| r.ratio_first_rest),
        Metric::of(
            MetricDef::higher("share_first", "First flow's goodput share", ""),
            |r| r.share_first,
        ),
        Metric::of(LOSS_RATIO, |r| r.loss_ratio),
        Metric::of(
            MetricDef::lower("first_flow_loss_ratio", "First flow's loss ratio", ""),
            |r| r.flows.first().and_then(|f| f.loss_ratio),
        ),
        Metric::of(
            MetricDef::lower(
                "first_flow_goodput_cv",
                "First flow's goodput variation (CV per bin)",
                "",
            )
            .undefined_when("the flow moved data in fewer than two bins"),
            |r| r.flows.first().and_then(|f| f.goodput_cv),
        ),
        Metric::of(
            MetricDef::lower(
                "first_flow_cwnd_cv",
                "First flow's congestion-window variation (CV of its samples)",
                "",
            )
            .undefined_when(
                "the server logged fewer than two window samples of the flow in its window",
            ),
            |r| r.flows.first().and_then(|f| f.cwnd_cv),
        ),
        Metric::of(
            MetricDef::higher(
                "fec_rebuilt_share",
                "Share of the FEC flows' lost datagrams rebuilt",
                "",
            )
            .undefined_when(
                "the bottleneck dropped nothing from the FEC flows (or no flow ran FEC)",
            ),
            FlowsResult::fec_rebuilt_share,
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
            self.flows
                .iter()
                .filter_map(|f| f.error.as_ref().map(|e| (format!("flow {}", f.label), e))),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rebuilt_share_is_of_the_fec_flows_drops_and_unknown_stays_unknown() {
        assert_eq!(
            rebuilt_share([(Some(3), Some(10)), (Some(1), Some(30))]),
            Some(0.1)
        );
        // A flow whose counters are missing makes the share unknown, never smaller.
        assert_eq!(rebuilt_share([(Some(3), Some(10)), (None, Some(30))]), None);
        assert_eq!(rebuilt_share([(Some(3), Some(10)), (Some(1), None)]), None);
        // Nothing dropped: no share to take; no FEC flow: none either.
        assert_eq!(rebuilt_share([(Some(0), Some(0))]), None);
        assert_eq!(rebuilt_share(std::iter::empty()), None);
    }
}
