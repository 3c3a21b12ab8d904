//! A flows run as data: the mix, how much each flow moves, the per-flow settings, the stacks'
//! shared options — built from the parameters once ([`build`], every rule that spans keys
//! checked there), sent to the client child as it is, read by stacks' flow client — and the
//! result assembled from the client's report and the emulator's counters ([`FlowsRun::assemble`],
//! a pure function unit-tested on recorded reports).
//!
//! Seed 000's definitions: G = goodput (application payload, no retransmissions); U = r/b with r
//! the rate the flow put through the bottleneck (its forwarded bytes at the IP layer,
//! retransmissions and headers included) and b the link rate; l = bytes lost / bytes offered at
//! the shaper, per flow, in the data (downlink) direction.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

use quiclab_flows::{Bins, FlowMix, jain};
use quiclab_link::spec::LinkSpec;
use quiclab_link::{FlowSummary, Transport};
use quiclab_proto::options::{Protocol, StackOptions};
use serde::{Deserialize, Serialize};

use crate::TimeSeries;
use crate::fec::FecResult;
use crate::fidelity::FidelityReport;
use crate::flows::{FlowResult, FlowsResult};
use crate::keys;
use crate::params::{ParamError, Params, refuse};
use crate::records::{FecLog, FlowReport, StopReason};

crate::run::taken_from_params! {
    /// What every flow of a mix takes as given from its keys: one line per key, its field and how
    /// it is read. A new per-flow key is one line here; stacks' flow client takes the settings
    /// whole (no `..`), so the compiler asks for the key's behaviour there.
    pub struct FlowSettings {
        /// Start offsets, one per flow (empty: all start together).
        pub offsets: Vec<Duration> = |p| p.durations(&keys::OFFSETS).unwrap_or_default(),
    }
}

/// One flow's outcome: its report, or why it failed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FlowOutcome {
    pub report: Option<FlowReport>,
    pub error: Option<StopReason>,
}

/// What the flows client reports.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FlowsClientReport {
    /// CLOCK_MONOTONIC of the mix's start (ns): receptions count from here.
    pub origin_ns: u64,
    pub flows: Vec<FlowOutcome>,
    pub cpu_s: f64,
    /// The same split into user and system time.
    #[serde(default)]
    pub cpu_split: Option<crate::endpoint::CpuSplit>,
}

/// The flows run `p` asks for, with the stacks' shared options `stack`; a refused combination
/// names the key to change.
pub fn build(p: &Params, stack: StackOptions) -> Result<FlowsRun, ParamError> {
    let mix = p
        .flows()
        .cloned()
        .ok_or_else(|| refuse("flows", "a flows run needs a mix, e.g. flows = \"h3 + h1\""))?;
    let amount = match (
        p.count(&keys::FLOWS_SIZE),
        p.duration(&keys::FLOWS_DURATION),
    ) {
        (Some(size), None) => FlowAmount::Size(size),
        (None, Some(d)) => FlowAmount::Duration(d),
        (Some(_), Some(_)) => {
            return Err(refuse(
                "duration",
                "give exactly one of duration and size, not both",
            ));
        }
        (None, None) => {
            return Err(refuse(
                "duration",
                "a flows run needs exactly one of duration and size",
            ));
        }
    };
    let mut run = FlowsRun::new(mix, amount);
    run.settings = FlowSettings::take(p);
    run.stack = stack;
    run.ipv6 = p.bool(&keys::IP);
    run.timeout = p.duration(&keys::TIMEOUT);
    if let Some(bin) = p.duration(&keys::BIN) {
        run.bin = bin;
    }
    run.cutoff = p.duration(&keys::CUTOFF);
    run.validate().map_err(|(k, e)| refuse(k, e))?;
    Ok(run)
}

/// A mix as its flows' specs (`["h3:gquic-cubic", "h1"]`), parsed back on the other side.
mod mix_as_specs {
    use quiclab_flows::{FlowMix, FlowSpec};
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(mix: &FlowMix, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(mix.flows.iter().map(FlowSpec::label))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<FlowMix, D::Error> {
        let specs = Vec::<String>::deserialize(d)?;
        FlowMix::parse(&specs).map_err(serde::de::Error::custom)
    }
}

/// How much of a long-running flow a flow mix asks the server for: more than any flow reads.
const LONG_RUNNING_SIZE: u64 = quiclab_proto::range::MAX_BYTES_RESOURCE;

/// How long the flows run: a size each, or a duration each.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum FlowAmount {
    /// Each flow downloads this many bytes.
    Size(u64),
    /// Each flow reads for this long from its start, then stops.
    Duration(Duration),
}

/// One flow-mix run: what the client child receives and stacks' flow client reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowsRun {
    /// The flows, in order (sent as their specs, `h3:gquic-cubic`, and parsed back).
    #[serde(with = "mix_as_specs")]
    pub mix: FlowMix,
    pub amount: FlowAmount,
    /// What every flow takes as given from its keys.
    pub settings: FlowSettings,
    /// Bin size of the per-flow series (whole milliseconds).
    pub bin: Duration,
    /// Left out at both ends of each flow for its goodput (None: [`FlowsRun::default_cutoff`]).
    pub cutoff: Option<Duration>,
    /// The stacks' shared options (TLS version, QUIC initial window, gQUIC N); each flow sets its
    /// own congestion controller.
    pub stack: StackOptions,
    pub ipv6: bool,
    /// Give up on flows still running this long after the start (None: from the amount).
    pub timeout: Option<Duration>,
}

impl FlowsRun {
    /// `mix` for `amount` with the defaults: all flows at once, 100 ms bins.
    pub fn new(mix: FlowMix, amount: FlowAmount) -> FlowsRun {
        FlowsRun {
            mix,
            amount,
            settings: FlowSettings::default(),
            bin: Duration::from_millis(100),
            cutoff: None,
            stack: StackOptions::default(),
            ipv6: false,
            timeout: None,
        }
    }

    /// The cutoff when none is given: none for sized flows (they end when done), and for
    /// long-running ones a quarter of the duration, at most 5 s (Flent's usual choice for 60 s).
    pub fn default_cutoff(&self) -> Duration {
        match self.amount {
            FlowAmount::Size(_) => Duration::ZERO,
            FlowAmount::Duration(d) => (d / 4).min(Duration::from_secs(5)),
        }
    }

    pub fn cutoff(&self) -> Duration {
        self.cutoff.unwrap_or_else(|| self.default_cutoff())
    }

    /// Flow `i`'s start offset from the mix's start.
    pub fn offset(&self, i: usize) -> Duration {
        self.settings.offsets.get(i).copied().unwrap_or_default()
    }

    /// The resource each flow asks for (a long-running flow asks for more than it will read).
    pub fn size_asked(&self) -> u64 {
        match self.amount {
            FlowAmount::Size(s) => s,
            FlowAmount::Duration(_) => LONG_RUNNING_SIZE,
        }
    }

    /// When a flow stops reading, from its start (None: it reads the whole resource).
    pub fn stop_after(&self) -> Option<Duration> {
        match self.amount {
            FlowAmount::Size(_) => None,
            FlowAmount::Duration(d) => Some(d),
        }
    }

    /// What the run is compared as: the mix (`h3+h1`).
    pub fn contender(&self) -> String {
        self.mix.label()
    }

    /// A rough duration of the run on `spec` (an estimate).
    pub fn estimate_seconds(&self, spec: &LinkSpec) -> f64 {
        let last_offset = self.settings.offsets.iter().max().copied();
        last_offset.unwrap_or_default().as_secs_f64()
            + match self.amount {
                FlowAmount::Size(s) => {
                    super::transfer_estimate_seconds(s as f64 * self.mix.flows.len() as f64, spec)
                }
                FlowAmount::Duration(d) => d.as_secs_f64() + 0.5,
            }
    }

    /// Refuses what cannot be measured; messages name the option (`duration`, `cutoff`, …).
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        // FEC applies to the mix's h3 flows; a mix without one would run without it, silently.
        if self.stack.fec.is_some() && !self.mix.flows.iter().any(|f| f.proto == Protocol::H3) {
            return Err((
                "fec",
                format!(
                    "FEC is quiclab's XOR FEC under QUIC and applies to a mix's h3 flows, but {} has none",
                    self.mix.label()
                ),
            ));
        }
        let offsets = &self.settings.offsets;
        if !offsets.is_empty() && offsets.len() != self.mix.flows.len() {
            return Err((
                "offsets",
                format!(
                    "{} offsets for {} flows: give one per flow (or none: all start together)",
                    offsets.len(),
                    self.mix.flows.len()
                ),
            ));
        }
        let bin_ms = self.bin.as_nanos() % 1_000_000;
        if self.bin < Duration::from_millis(1) || bin_ms != 0 {
            return Err((
                "bin",
                format!(
                    "{:?}: a bin is a whole number of milliseconds, at least 1 ms (e.g. 100ms)",
                    self.bin
                ),
            ));
        }
        match self.amount {
            FlowAmount::Size(0) => Err(("size", "must be more than 0 bytes".into())),
            FlowAmount::Size(_) => Ok(()),
            FlowAmount::Duration(d) => {
                let cutoff = self.cutoff();
                if d <= cutoff * 2 {
                    return Err((
                        "duration",
                        format!(
                            "{:.3} s is not longer than twice the cutoff ({:.3} s): no time would be \
                             left to measure; lengthen the duration or shorten the cutoff",
                            d.as_secs_f64(),
                            cutoff.as_secs_f64()
                        ),
                    ));
                }
                if self.bin > d - cutoff * 2 {
                    return Err((
                        "bin",
                        format!(
                            "{:.3} s is longer than the measured window ({:.3} s)",
                            self.bin.as_secs_f64(),
                            (d - cutoff * 2).as_secs_f64()
                        ),
                    ));
                }
                Ok(())
            }
        }
    }

    /// The server's ports (443, 444, …) with their stack options, and each flow's port. A port
    /// serves TCP flows of one TCP controller and QUIC flows of one QUIC controller, so a mix
    /// such as `h3:gquic-cubic + h1:cubic` needs one port and `h1:cubic + h1:bbr` two.
    pub fn layout(&self) -> (Vec<(u16, StackOptions)>, Vec<u16>) {
        // (port, options, TCP controller claimed, QUIC controller claimed)
        let mut ports: Vec<(u16, StackOptions, bool, bool)> = Vec::new();
        let mut of_flow = Vec::new();
        for f in &self.mix.flows {
            let want = self.flow_stack(f);
            let quic = f.proto == Protocol::H3;
            let fits = |(_, s, tcp_claimed, quic_claimed): &(u16, StackOptions, bool, bool)| {
                if quic {
                    !*quic_claimed || s.quic_cc == want.quic_cc
                } else {
                    !*tcp_claimed || s.tcp_cc == want.tcp_cc
                }
            };
            let i = match ports.iter().position(fits) {
                Some(i) => i,
                None => {
                    ports.push((443 + ports.len() as u16, self.stack, false, false));
                    ports.len() - 1
                }
            };
            let p = &mut ports[i];
            if quic {
                p.1.quic_cc = want.quic_cc;
                p.3 = true;
            } else {
                p.1.tcp_cc = want.tcp_cc;
                p.2 = true;
            }
            of_flow.push(p.0);
        }
        (
            ports.into_iter().map(|(p, s, _, _)| (p, s)).collect(),
            of_flow,
        )
    }

    /// Flow `f`'s stack options: the run's, with the flow's congestion controller.
    pub fn flow_stack(&self, f: &quiclab_flows::FlowSpec) -> StackOptions {
        self.stack.with_cc(f.proto, f.cc).unwrap_or(self.stack)
    }

    /// How long the run may take on `spec` (its timeout, else from the amount).
    pub fn limit(&self, spec: &LinkSpec) -> Duration {
        if let Some(t) = self.timeout {
            return t;
        }
        let last_offset = self
            .settings
            .offsets
            .iter()
            .max()
            .copied()
            .unwrap_or_default();
        last_offset
            + match self.amount {
                // Every flow's bytes through the link one after the other, with headroom.
                FlowAmount::Size(s) => {
                    super::default_timeout(s.saturating_mul(self.mix.flows.len() as u64), spec)
                }
                FlowAmount::Duration(d) => d + Duration::from_secs(30),
            }
    }
}

impl FlowsRun {
    /// The result from the client's report and the emulator's counters.
    #[allow(clippy::too_many_arguments)]
    pub fn assemble(
        &self,
        client: &FlowsClientReport,
        fec_log: Option<&FecLog>,
        fidelity: Option<FidelityReport>,
        spec: &LinkSpec,
        server_ip: IpAddr,
        server_cpu: f64,
        epoch_ns: u64,
        cwnd_csv: Option<&str>,
    ) -> FlowsResult {
        let origin = client.origin_ns;
        let bin_ns = self.bin.as_nanos() as u64;
        let cutoff_ns = self.cutoff().as_nanos() as u64;
        let rate = spec.downlink.mean_rate_bps();
        let downlink_flows: &[FlowSummary] = fidelity
            .as_ref()
            .map_or(&[], |f| &f.downlink.model.flows[..]);
        let ports: Vec<u16> = self.layout().0.iter().map(|(p, _)| *p).collect();
        // The end of the last bin: every flow's series has the same length.
        let span_end = client
            .flows
            .iter()
            .filter_map(|o| o.report.as_ref().map(|r| r.end_ns))
            .max()
            .unwrap_or(origin);
        let n_bins = span_end.saturating_sub(origin).div_ceil(bin_ns).max(1);
        let end = origin + n_bins * bin_ns;

        let windows_of = cwnd_samples_by_port(cwnd_csv);
        let mut bins_of: Vec<Option<Bins>> = Vec::new();
        let mut flows = Vec::new();
        for (i, (spec_f, outcome)) in self.mix.flows.iter().zip(&client.flows).enumerate() {
            let label = format!("{} {}", i + 1, spec_f.label());
            let transport = match spec_f.proto {
                Protocol::H3 => Transport::Udp,
                _ => Transport::Tcp,
            };
            let mut fr = FlowResult {
                index: i + 1,
                label,
                proto: spec_f.proto.to_string(),
                cc: spec_f.cc.to_string(),
                offset_s: self.offset(i).as_secs_f64(),
                local_port: None,
                goodput_mbps: None,
                goodput_window: "cutoff".into(),
                goodput_cv: None,
                cwnd_cv: None,
                bytes: 0,
                complete: false,
                handshake_ms: None,
                start_s: None,
                end_s: None,
                offered_bytes: None,
                forwarded_bytes: None,
                forwarded_packets: None,
                dropped_packets: None,
                dropped_queue_packets: None,
                dropped_random_packets: None,
                loss_ratio: None,
                utilization: None,
                bin_bytes: Vec::new(),
                fec: None,
                error: outcome.error.clone(),
            };
            let Some(r) = &outcome.report else {
                bins_of.push(None);
                flows.push(fr);
                continue;
            };
            let bins = Bins::count(
                r.receptions
                    .iter()
                    .map(|&(ms, b)| (origin + ms * 1_000_000, b)),
                origin,
                end,
                bin_ns,
            );
            let (start, stop) = (r.start_ns, r.end_ns);
            let window = bins.window_in(start + cutoff_ns, stop.saturating_sub(cutoff_ns));
            fr.goodput_cv = bins.cv(window.clone());
            fr.cwnd_cv = windows_of
                .get(&r.local_port)
                .and_then(|w| cwnd_cv(w, start + cutoff_ns, stop.saturating_sub(cutoff_ns)));
            fr.goodput_mbps = match bins.mean_bps(window) {
                Some(g) => Some(g / 1e6),
                None => {
                    fr.goodput_window = "whole transfer".into();
                    let t = r.last_byte_ns.saturating_sub(r.start_ns) as f64 / 1e9;
                    (t > 0.0).then(|| r.bytes as f64 * 8.0 / t / 1e6)
                }
            };
            fr.local_port = Some(r.local_port);
            if let Some(log) = fec_log.filter(|_| spec_f.proto == Protocol::H3) {
                let in_cwnd = self.stack.fec.is_some_and(|f| f.in_cwnd);
                fr.fec = Some(FecResult::of(
                    in_cwnd,
                    log.peer_ports(&[r.local_port]),
                    r.fec,
                ));
            }
            fr.bytes = r.bytes;
            fr.complete = r.complete;
            fr.handshake_ms = Some(r.handshake_ns.saturating_sub(start) as f64 / 1e6);
            fr.start_s = Some(start.saturating_sub(origin) as f64 / 1e9);
            fr.end_s = Some(stop.saturating_sub(origin) as f64 / 1e9);
            if fr.error.is_none()
                && matches!(self.amount, FlowAmount::Size(s) if !r.complete || r.bytes != s)
            {
                fr.error = Some(StopReason::Failed {
                    reason: format!(
                        "received {} of {} bytes",
                        r.bytes,
                        match self.amount {
                            FlowAmount::Size(s) => s,
                            FlowAmount::Duration(_) => 0,
                        }
                    ),
                });
            }
            let key = downlink_flows.iter().find(|f| {
                f.key.transport == transport
                    && f.key.has_port(r.local_port)
                    && (f.key.low.ip() == server_ip || f.key.high.ip() == server_ip)
                    && ports.iter().any(|&p| f.key.has_port(p))
            });
            if let Some(k) = key {
                let c = k.counters;
                fr.offered_bytes = Some(c.offered_bytes);
                fr.forwarded_bytes = Some(c.forwarded_bytes);
                fr.forwarded_packets = Some(c.forwarded_packets);
                fr.dropped_packets = Some(c.dropped_queue_packets + c.dropped_random_packets);
                fr.dropped_queue_packets = Some(c.dropped_queue_packets);
                fr.dropped_random_packets = Some(c.dropped_random_packets);
                fr.loss_ratio = Some(c.loss_ratio());
                let life = stop.saturating_sub(start) as f64 / 1e9;
                fr.utilization = rate
                    .filter(|_| life > 0.0)
                    .map(|b| c.forwarded_bytes as f64 * 8.0 / life / b);
            }
            fr.bin_bytes = bins.bytes.clone();
            bins_of.push(Some(bins));
            flows.push(fr);
        }

        // Jain's index over the flows' goodputs (every flow counts; a failed flow got nothing).
        let goodputs: Vec<f64> = flows
            .iter()
            .map(|f| f.goodput_mbps.unwrap_or(0.0))
            .collect();
        let all_ok = flows.iter().all(|f| f.goodput_mbps.is_some());
        let jain_means = if flows.len() >= 2 && all_ok {
            jain(&goodputs)
        } else if flows.len() == 1 {
            Some(1.0)
        } else {
            None
        };
        // The window in which every flow ran.
        let reports: Vec<_> = client
            .flows
            .iter()
            .filter_map(|o| o.report.as_ref())
            .collect();
        let common = (reports.len() == flows.len() && !reports.is_empty()).then(|| {
            let from = reports.iter().map(|r| r.start_ns).max().unwrap_or(origin) + cutoff_ns;
            let to = reports
                .iter()
                .map(|r| r.end_ns)
                .min()
                .unwrap_or(origin)
                .saturating_sub(cutoff_ns);
            (from, to)
        });
        let all_bins: Vec<Bins> = bins_of.iter().flatten().cloned().collect();
        let jain_bins = match (common, all_bins.first()) {
            (Some((from, to)), Some(b)) if all_bins.len() == flows.len() && flows.len() >= 2 => {
                quiclab_flows::fairness::jain_per_bin_in(&all_bins, b.window_in(from, to))
            }
            _ if flows.len() == 1 && all_ok => Some(1.0),
            _ => None,
        };
        let total_goodput = all_ok.then(|| goodputs.iter().sum::<f64>());
        let ratio_first_rest = (flows.len() >= 2 && all_ok).then(|| {
            let rest = goodputs[1..].iter().sum::<f64>() / (goodputs.len() - 1) as f64;
            goodputs[0] / rest
        });
        let share_first = total_goodput.filter(|t| *t > 0.0).map(|t| goodputs[0] / t);
        let span_s = {
            let first = reports.iter().map(|r| r.start_ns).min().unwrap_or(origin);
            let last = reports.iter().map(|r| r.end_ns).max().unwrap_or(origin);
            last.saturating_sub(first) as f64 / 1e9
        };
        let forwarded: Option<u64> = flows.iter().map(|f| f.forwarded_bytes).sum();
        let utilization = match (rate, forwarded) {
            (Some(b), Some(fwd)) if span_s > 0.0 => Some(fwd as f64 * 8.0 / span_s / b),
            _ => None,
        };
        let series = self.series(&flows, &all_bins, rate, epoch_ns, origin, cwnd_csv);
        let fec = FecResult::sum(flows.iter().filter_map(|f| f.fec.as_ref()));
        FlowsResult {
            mix: self.mix.label(),
            jain: jain_means,
            jain_bins,
            utilization,
            goodput_utilization: match (rate, total_goodput) {
                (Some(b), Some(g)) => Some(g * 1e6 / b),
                _ => None,
            },
            goodput_mbps: total_goodput,
            ratio_first_rest,
            share_first,
            loss_ratio: fidelity
                .as_ref()
                .map(|f| f.downlink.model.counters.loss_ratio()),
            bin_ms: self.bin.as_millis() as u64,
            cutoff_s: self.cutoff().as_secs_f64(),
            duration_s: match self.amount {
                FlowAmount::Duration(d) => Some(d.as_secs_f64()),
                FlowAmount::Size(_) => None,
            },
            size: match self.amount {
                FlowAmount::Size(s) => Some(s),
                FlowAmount::Duration(_) => None,
            },
            common_window_s: common.map(|(a, b)| {
                (
                    a.saturating_sub(origin) as f64 / 1e9,
                    b.saturating_sub(origin) as f64 / 1e9,
                )
            }),
            flows,
            fec,
            cpu_client_s: client.cpu_s,
            cpu_server_s: server_cpu,
            link: spec.describe(),
            // Set by the caller, who read the endpoints.
            endpoints: None,
            fidelity,
            series,
        }
    }

    /// Per-flow throughput per bin (with the link rate drawn) and, when sampled, per-flow cwnd, on
    /// the emulator's clock.
    fn series(
        &self,
        flows: &[FlowResult],
        bins: &[Bins],
        rate: Option<f64>,
        epoch_ns: u64,
        origin: u64,
        cwnd_csv: Option<&str>,
    ) -> Vec<TimeSeries> {
        let t0 = origin.saturating_sub(epoch_ns) as f64 / 1e9;
        let bin_s = self.bin.as_secs_f64();
        let mut out = Vec::new();
        let with_bins = flows
            .iter()
            .filter(|f| f.error.is_none() || !f.bin_bytes.is_empty());
        for (f, b) in with_bins.zip(bins) {
            out.push(TimeSeries {
                name: format!("throughput_mbps@{}", f.label),
                unit: "Mbit/s".into(),
                points: b
                    .rates_bps()
                    .iter()
                    .enumerate()
                    .map(|(i, r)| (t0 + (i as f64 + 0.5) * bin_s, r / 1e6))
                    .collect(),
            });
        }
        if let (Some(r), Some(b)) = (rate, bins.first()) {
            let t_end = t0 + b.bytes.len() as f64 * bin_s;
            out.push(TimeSeries {
                name: "throughput_mbps@link rate".into(),
                unit: "Mbit/s".into(),
                points: vec![(t0, r / 1e6), (t_end, r / 1e6)],
            });
        }
        if let Some(csv) = cwnd_csv {
            let by_port = cwnd_by_peer_port(csv, epoch_ns);
            for f in flows {
                if let Some(points) = f.local_port.and_then(|p| by_port.get(&p)) {
                    out.push(TimeSeries {
                        name: format!("cwnd_bytes@{}", f.label),
                        unit: "bytes".into(),
                        points: points.clone(),
                    });
                }
            }
        }
        out
    }
}

/// The raw window samples of cwnd.csv by the client's port: (CLOCK_MONOTONIC ns, bytes).
fn cwnd_samples_by_port(csv: Option<&str>) -> BTreeMap<u16, Vec<(u64, f64)>> {
    let mut out: BTreeMap<u16, Vec<(u64, f64)>> = BTreeMap::new();
    for s in csv.map(crate::cwnd::read_samples).unwrap_or_default() {
        if let Some(port) = s.peer_port {
            out.entry(port)
                .or_default()
                .push((s.t_mono_ns, s.cwnd_bytes));
        }
    }
    out
}

/// The coefficient of variation (population standard deviation over mean) of the window samples
/// taken in `[from, to)` (CLOCK_MONOTONIC ns); None with fewer than two, or a mean of 0.
pub fn cwnd_cv(samples: &[(u64, f64)], from: u64, to: u64) -> Option<f64> {
    let xs: Vec<f64> = samples
        .iter()
        .filter(|(t, _)| *t >= from && *t < to)
        .map(|&(_, w)| w)
        .collect();
    if xs.len() < 2 {
        return None;
    }
    let mean = xs.iter().sum::<f64>() / xs.len() as f64;
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / xs.len() as f64;
    (mean > 0.0).then(|| var.sqrt() / mean)
}

/// cwnd samples of cwnd.csv by the client's port, as (s since the emulator's start, bytes).
pub fn cwnd_by_peer_port(csv: &str, epoch_ns: u64) -> BTreeMap<u16, Vec<(f64, f64)>> {
    let mut out: BTreeMap<u16, Vec<(f64, f64)>> = BTreeMap::new();
    for s in crate::cwnd::read_samples(csv) {
        if let Some(port) = s.peer_port {
            let t = s.t_mono_ns.saturating_sub(epoch_ns) as f64 / 1e9;
            out.entry(port).or_default().push((t, s.cwnd_bytes));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(mix: &str, amount: FlowAmount) -> FlowsRun {
        FlowsRun::new(FlowMix::parse_joined(mix).unwrap(), amount)
    }

    #[test]
    fn the_window_variation_is_taken_over_the_cutoff_window_only() {
        // 10 000 and 20 000 bytes alternate inside [100, 200); the spikes outside do not count.
        let s = [
            (50, 1e9),
            (100, 10_000.0),
            (150, 20_000.0),
            (199, 10_000.0),
            (250, 1e9),
        ];
        let cv = cwnd_cv(&s, 100, 200).unwrap();
        // mean 13 333, population sd 4 714: CV 0.354.
        assert!((cv - 4714.045 / 13333.333).abs() < 1e-4, "{cv}");
        assert_eq!(cwnd_cv(&s, 100, 101), None);
        assert_eq!(cwnd_cv(&[(1, 5.0), (2, 5.0)], 0, 10), Some(0.0));
    }

    #[test]
    fn durations_must_leave_a_window_after_the_cutoffs() {
        let mut r = run("h3+h1", FlowAmount::Duration(Duration::from_secs(10)));
        r.cutoff = Some(Duration::from_secs(5));
        let (key, e) = r.validate().unwrap_err();
        assert_eq!(key, "duration");
        assert!(e.contains("twice the cutoff"), "{e}");
        r.cutoff = Some(Duration::from_secs(4));
        assert!(r.validate().is_ok());
        // Default cutoff: a quarter, at most 5 s.
        r.cutoff = None;
        assert_eq!(r.cutoff(), Duration::from_millis(2500));
        assert_eq!(
            run("h1", FlowAmount::Duration(Duration::from_secs(60))).cutoff(),
            Duration::from_secs(5)
        );
        assert_eq!(run("h1", FlowAmount::Size(1000)).cutoff(), Duration::ZERO);
    }

    #[test]
    fn offsets_and_bins_are_checked() {
        let mut r = run("h3+h1", FlowAmount::Duration(Duration::from_secs(20)));
        r.settings.offsets = vec![Duration::ZERO];
        assert_eq!(r.validate().unwrap_err().0, "offsets");
        r.settings.offsets = vec![Duration::ZERO, Duration::from_secs(2)];
        assert!(r.validate().is_ok());
        r.bin = Duration::from_micros(1500);
        assert_eq!(r.validate().unwrap_err().0, "bin");
        r.bin = Duration::from_secs(30);
        assert_eq!(r.validate().unwrap_err().0, "bin");
        assert_eq!(
            run("h1", FlowAmount::Size(0)).validate().unwrap_err().0,
            "size"
        );
    }

    #[test]
    fn one_server_port_per_distinct_stack_configuration() {
        let r = run(
            "h3:gquic-cubic + h1:cubic + h1:bbr + h3:gquic-cubic",
            FlowAmount::Size(1),
        );
        let (ports, of_flow) = r.layout();
        // h3:gquic-cubic and h1:cubic share a port (one per transport); h1:bbr needs another.
        assert_eq!(of_flow, [443, 443, 444, 443]);
        assert_eq!(ports.len(), 2);
        assert_eq!(ports[0].1.quic_cc.as_str(), "gquic-cubic");
        assert_eq!(ports[0].1.tcp_cc.kernel_name(), "cubic");
        assert_eq!(ports[1].1.tcp_cc.kernel_name(), "bbr");
        let same = run("h3 + h1 + h2", FlowAmount::Size(1));
        assert_eq!(same.layout().0.len(), 1, "cubic everywhere: one port");
    }

    #[test]
    fn cwnd_rows_are_split_by_the_clients_port() {
        let csv = "t_mono_ns,conn,transport,cwnd_bytes,ssthresh_bytes,srtt_us,min_rtt_us,lost_packets,retransmitted_packets,delivery_rate_bps,bytes_sent,ca_state,peer_port\n\
                   2000000000,0,tcp,14480,,100,90,0,0,,1000,open,50000\n\
                   2005000000,1,quic,15000,,100,90,0,,,2000,,40000\n\
                   2010000000,0,tcp,28960,,100,90,0,0,,3000,open,50000\n\
                   2015000000,0,tcp,bad,,100,90,0,0,,3000,open,50000\n";
        let m = cwnd_by_peer_port(csv, 1_000_000_000);
        assert_eq!(m[&50000], [(1.0, 14480.0), (1.01, 28960.0)]);
        assert_eq!(m[&40000], [(1.005, 15000.0)]);
        // A log without the column gives nothing rather than wrong flows.
        assert!(cwnd_by_peer_port("t_mono_ns,conn,cwnd_bytes\n1,0,5\n", 0).is_empty());
    }
}

#[cfg(test)]
mod run_tests {
    use super::*;

    #[test]
    fn a_run_goes_to_the_child_and_comes_back_the_same() {
        let mut run = FlowsRun::new(
            FlowMix::parse_joined("h3:gquic-cubic + h1 + h1:bbr").unwrap(),
            FlowAmount::Duration(Duration::from_secs(20)),
        );
        run.settings.offsets = vec![
            Duration::ZERO,
            Duration::from_secs(2),
            Duration::from_millis(2500),
        ];
        run.cutoff = Some(Duration::from_secs(3));
        let text = serde_json::to_string(&run).unwrap();
        assert!(text.contains("\"h3:gquic-cubic\""), "{text}");
        let back: FlowsRun = serde_json::from_str(&text).unwrap();
        assert_eq!(back, run);
    }

    #[test]
    fn build_takes_every_flows_key_and_checks_what_spans_keys() {
        let mut p = Params::new(crate::WorkloadKind::Flows);
        p.set("flows", "h3 + h1").unwrap();
        p.set("duration", "20s").unwrap();
        p.set("offsets", "0s,2s").unwrap();
        p.set("bin", "200ms").unwrap();
        p.set("cutoff", "3s").unwrap();
        let run = build(&p, StackOptions::default()).unwrap();
        assert_eq!(
            run.settings.offsets,
            [Duration::ZERO, Duration::from_secs(2)]
        );
        assert_eq!(run.bin, Duration::from_millis(200));
        assert_eq!(run.stop_after(), Some(Duration::from_secs(20)));
        assert_eq!(run.size_asked(), LONG_RUNNING_SIZE);
        p.set("size", "1MB").unwrap();
        assert_eq!(
            build(&p, StackOptions::default()).unwrap_err().key,
            "duration"
        );
        let mut p = Params::new(crate::WorkloadKind::Flows);
        p.set("flows", "h3 + h1").unwrap();
        p.set("size", "1MB").unwrap();
        p.set("offsets", "0s").unwrap();
        assert_eq!(
            build(&p, StackOptions::default()).unwrap_err().key,
            "offsets"
        );
    }

    /// A recorded client report (two long-running flows at 10 and 5 Mbit/s for 4 s) gives the
    /// goodputs, Jain's index and the ratio its definitions say, over the cutoff window only.
    #[test]
    fn assembly_from_a_recorded_report() {
        let mut run = FlowsRun::new(
            FlowMix::parse_joined("h3 + h1").unwrap(),
            FlowAmount::Duration(Duration::from_secs(4)),
        );
        run.cutoff = Some(Duration::from_secs(1));
        let origin: u64 = 5_000_000_000;
        let flow = |port: u16, bytes_per_ms: u64, spike: u64| FlowReport {
            local_port: port,
            alpn: "h3".into(),
            start_ns: origin,
            handshake_ns: origin + 20_000_000,
            first_byte_ns: origin + 40_000_000,
            last_byte_ns: origin + 4_000_000_000,
            end_ns: origin + 4_000_000_000,
            // A burst in the first (cut off) second must not count.
            receptions: (0..4000u64)
                .map(|ms| (ms, if ms < 10 { spike } else { bytes_per_ms }))
                .collect(),
            bytes: bytes_per_ms * 3990 + spike * 10,
            complete: false,
            stopped: true,
            fec: None,
        };
        let report = FlowsClientReport {
            origin_ns: origin,
            flows: vec![
                FlowOutcome {
                    report: Some(flow(40000, 1250, 100_000)),
                    error: None,
                },
                FlowOutcome {
                    report: Some(flow(40001, 625, 0)),
                    error: None,
                },
            ],
            cpu_s: 0.5,
            cpu_split: None,
        };
        let spec = LinkSpec::default();
        let ip: IpAddr = "10.0.0.2".parse().unwrap();
        let r = run.assemble(&report, None, None, &spec, ip, 0.25, origin, None);
        let g: Vec<f64> = r.flows.iter().map(|f| f.goodput_mbps.unwrap()).collect();
        assert!(
            (g[0] - 10.0).abs() < 1e-6 && (g[1] - 5.0).abs() < 1e-6,
            "{g:?}"
        );
        assert!((r.jain.unwrap() - 0.9).abs() < 1e-9, "{:?}", r.jain);
        assert!((r.ratio_first_rest.unwrap() - 2.0).abs() < 1e-9);
        assert!((r.goodput_mbps.unwrap() - 15.0).abs() < 1e-6);
        // No emulator: the bottleneck's figures are unknown, never 0.
        assert_eq!(r.loss_ratio, None);
        assert_eq!(r.flows[0].forwarded_bytes, None);
        assert_eq!(r.cutoff_s, 1.0);
        // A flow that failed is in the result with its reason, and Jain's index is not claimed.
        let mut failed = report.clone();
        failed.flows[1] = FlowOutcome {
            report: None,
            error: Some(StopReason::Failed {
                reason: "connect".into(),
            }),
        };
        let r = run.assemble(&failed, None, None, &spec, ip, 0.25, origin, None);
        assert_eq!(r.jain, None);
        assert!(r.flows[1].error.is_some());
    }
}
