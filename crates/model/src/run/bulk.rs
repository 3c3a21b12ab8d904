//! A bulk download as data: protocol, size, the stacks' options, how the client answers network
//! switches, which programs serve and download.

use std::time::Duration;

use quiclab_link::spec::LinkSpec;
use quiclab_proto::options::{Protocol, StackOptions};

use crate::bulk::BulkResult;
use crate::endpoint::{EndpointReadings, Transport};
use crate::fidelity::AppliedSwitch;
use crate::fidelity::FidelityReport;
use crate::implementation::{Client, Implementations, Server};
use crate::records::{ExternalFetch, StopReason, SwitchDownloadReport};
use quiclab_link::switch::SwitchSchedule;

use super::SwitchBehaviour;

/// One bulk transfer (a switch-fetch or Chromium client receives it as it is).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct BulkRun {
    pub proto: Protocol,
    pub size: u64,
    pub resume: bool,
    pub zero_rtt: bool,
    pub stack: StackOptions,
    pub ipv6: bool,
    /// With a kept directory: also write qlogs of every QUIC connection (costly: off in the runner).
    pub qlog: bool,
    /// Give up on the transfer after this long (None: [`super::default_timeout`]).
    pub timeout: Option<Duration>,
    /// How the client answers network switches (used when the link has a switch schedule).
    pub switching: SwitchBehaviour,
    /// Which program serves and which downloads (docs/stacks.md).
    pub server: Server,
    pub client: Client,
}

impl BulkRun {
    /// A download of `size` bytes over `proto` with the default stacks.
    pub fn new(proto: Protocol, size: u64) -> BulkRun {
        BulkRun {
            proto,
            size,
            resume: false,
            zero_rtt: false,
            stack: StackOptions::default(),
            ipv6: false,
            qlog: false,
            timeout: None,
            switching: SwitchBehaviour::default(),
            server: Server::Quiclab,
            client: Client::Quiclab,
        }
    }

    /// Refuses combinations the stacks cannot do.
    pub fn validate(&self) -> Result<(), String> {
        if self.zero_rtt && self.proto != Protocol::H3 {
            return Err(format!(
                "0-RTT is QUIC's (quiclab's TCP stacks send no TLS early data), but this run is {}",
                self.proto
            ));
        }
        if self.size == 0 {
            return Err("the size must be more than 0 bytes".into());
        }
        self.switching.on_switch.check(self.proto)?;
        if self.stack.fec.is_some() && self.proto != Protocol::H3 {
            return Err(format!(
                "FEC is quiclab's XOR FEC under QUIC: it needs h3, but this run is {}",
                self.proto
            ));
        }
        Ok(())
    }
}

/// Seed 000's U = r/b of a download that took `total_ms`: the bytes the bottleneck forwarded
/// downstream per second over the link's mean rate (None on an unlimited link, without the
/// emulator, or for a download that took no time).
pub fn utilization(
    spec: &LinkSpec,
    fidelity: Option<&FidelityReport>,
    total_ms: f64,
) -> Option<f64> {
    match (spec.downlink.mean_rate_bps(), fidelity) {
        (Some(r), Some(f)) if total_ms > 0.0 => {
            Some(f.downlink.model.counters.forwarded_bytes as f64 * 8.0 / (total_ms / 1e3) / r)
        }
        _ => None,
    }
}

/// What the lab measured beside a download: the link, the emulator's report, the processes' CPU
/// time, which programs ran.
pub struct Measured<'a> {
    pub spec: &'a LinkSpec,
    pub fidelity: Option<FidelityReport>,
    /// Both endpoints' CPU time and namespace counters (their costs per MB).
    pub endpoints: EndpointReadings,
    pub implementations: Implementations,
}

impl Measured<'_> {
    /// The client's and the server's CPU seconds (NaN: not measured).
    pub fn cpu(&self) -> (f64, f64) {
        let nan = |v: Option<f64>| v.unwrap_or(f64::NAN);
        (
            nan(self.endpoints.client.cpu_s),
            nan(self.endpoints.server.cpu_s),
        )
    }

    /// The downlink's loss ratio at the bottleneck (None without the emulator).
    pub fn loss_ratio(&self) -> Option<f64> {
        let f = self.fidelity.as_ref()?;
        Some(f.downlink.model.counters.loss_ratio())
    }

    /// The emulator's CPU time over the run, s (None without the emulator).
    pub fn cpu_emulator_s(&self) -> Option<f64> {
        let f = self.fidelity.as_ref()?;
        Some(f.cpu_core_fraction * f.wall_seconds)
    }
}

impl BulkRun {
    /// The result of a download another client made (or quiclab's own, said in the same terms),
    /// with what the lab measured beside it. The transfer is timed from the first byte's request
    /// as quiclab's own client times it where the client tells it; otherwise from the
    /// connection's start. A value the client does not report is null with its reason.
    pub fn result_of(&self, fetch: &ExternalFetch, m: &Measured<'_>) -> BulkResult {
        let nan = |v: Option<f64>| v.unwrap_or(f64::NAN);
        let mut unmeasured: std::collections::BTreeMap<String, String> = fetch
            .unmeasured
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        if fetch.negotiated.is_none() {
            unmeasured.insert("negotiated".into(), "the client does not report it".into());
        }
        // The transfer is timed from the first byte's request as quiclab's own client times it
        // where the client tells it; otherwise from the connection's start.
        let transfer_s = (fetch.total_ms - fetch.handshake_ms.unwrap_or(0.0)).max(1e-9) / 1e3;
        let goodput = fetch.bytes as f64 * 8.0 / transfer_s;
        let gb = fetch.bytes.max(1) as f64 / 1e9;
        BulkResult {
            proto: self.proto.to_string(),
            negotiated: fetch.negotiated.clone().unwrap_or_default(),
            tls_version: fetch.tls_version.clone().unwrap_or_default(),
            resumed: fetch.resumed,
            zero_rtt: false,
            connect_ms: fetch.connect_ms,
            handshake_ms: nan(fetch.handshake_ms),
            ttfb_ms: nan(fetch.ttfb_ms),
            alt_svc: None,
            total_ms: fetch.total_ms,
            bytes: fetch.bytes,
            verified: fetch.verified,
            goodput_mbps: goodput / 1e6,
            utilization: utilization(m.spec, m.fidelity.as_ref(), fetch.total_ms),
            goodput_utilization: m.spec.downlink.mean_rate_bps().map(|r| goodput / r),
            loss_ratio: m.loss_ratio(),
            cpu_client_s: m.cpu().0,
            cpu_server_s: m.cpu().1,
            cpu_client_s_per_gb: m.cpu().0 / gb,
            cpu_server_s_per_gb: m.cpu().1 / gb,
            cpu_emulator_s: m.cpu_emulator_s(),
            congestion_control: self.stack.cc_name(self.proto).to_string(),
            path: "emulator".into(),
            link: m.spec.describe(),
            on_switch: None,
            network_switches: None,
            connections: None,
            migrations: None,
            error: None,
            fec: None,
            implementations: Some(m.implementations.clone()),
            unmeasured,
            endpoints: Some(m.endpoints.cost(
                fetch.bytes,
                fetch.total_ms / 1e3,
                Transport::of([self.proto]),
            )),
            fidelity: m.fidelity.clone(),
        }
    }
}

impl BulkRun {
    /// The result of a download across network switches (`r`, the client's report) on the link
    /// whose schedule is `schedule` (and was applied as `applied`): each switch's outcome, and
    /// the switch a download that never finished died at.
    pub fn result_across_switches(
        &self,
        r: &SwitchDownloadReport,
        (schedule, applied): (&SwitchSchedule, &[AppliedSwitch]),
        m: &Measured<'_>,
    ) -> BulkResult {
        let switches = schedule.switches();
        let outcomes =
            crate::switch::outcomes(schedule, applied, &crate::switch::Timeline::of_download(r));
        let first = r.connections.first();
        let opened = first.map_or(0.0, |c| c.opened_s);
        let ms_after = |t: f64| (t - opened) * 1e3;
        let last_byte = r.progress.last().map_or(opened, |p| p.0);
        let total_s = (last_byte - opened).max(1e-9);
        let goodput = r.bytes as f64 * 8.0 / total_s;
        let gb = r.bytes.max(1) as f64 / 1e9;
        BulkResult {
            proto: self.proto.to_string(),
            negotiated: self.proto.to_string(),
            tls_version: "1.3".into(),
            resumed: r.connections.iter().skip(1).any(|c| c.resumed),
            zero_rtt: r.connections.iter().any(|c| c.zero_rtt),
            connect_ms: None,
            handshake_ms: first.and_then(|c| c.ready_s).map_or(f64::NAN, ms_after),
            ttfb_ms: r.progress.first().map_or(f64::NAN, |p| ms_after(p.0)),
            alt_svc: None,
            total_ms: ms_after(last_byte),
            bytes: r.bytes,
            verified: Some(r.verified),
            goodput_mbps: goodput / 1e6,
            utilization: None,
            goodput_utilization: m.spec.downlink.mean_rate_bps().map(|m| goodput / m),
            loss_ratio: m.loss_ratio(),
            cpu_client_s: m.cpu().0,
            cpu_server_s: m.cpu().1,
            cpu_client_s_per_gb: m.cpu().0 / gb,
            cpu_server_s_per_gb: m.cpu().1 / gb,
            cpu_emulator_s: m.cpu_emulator_s(),
            congestion_control: self.stack.cc_name(self.proto).to_string(),
            path: "emulator".into(),
            link: m.spec.describe(),
            on_switch: Some(self.switching.on_switch.to_string()),
            network_switches: Some(outcomes),
            connections: Some(r.connections.clone()),
            migrations: Some(r.migrations.clone()),
            fec: None,
            implementations: Some(m.implementations.clone()),
            unmeasured: Default::default(),
            endpoints: Some(
                m.endpoints
                    .cost(r.bytes, total_s, Transport::of([self.proto])),
            ),
            error: match (&r.error, r.complete) {
                (None, true) => None,
                (e, _) => {
                    // The switch it died at: the first one after the last byte.
                    let died = switches
                        .iter()
                        .find(|s| s.at as f64 / 1e9 >= last_byte - crate::switch::DIED_TOLERANCE_S)
                        .map(|s| {
                            format!(
                                "; no byte since the switch {} → {} at {:.1} s",
                                s.from,
                                s.to,
                                s.at as f64 / 1e9
                            )
                        })
                        .unwrap_or_default();
                    let mut stop = e.clone().unwrap_or_else(|| StopReason::Failed {
                        reason: "the download did not complete".into(),
                    });
                    stop.text_mut().push_str(&died);
                    Some(stop)
                }
            },
            fidelity: m.fidelity.clone(),
        }
    }
}
