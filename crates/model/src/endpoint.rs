//! What moving a run's bytes cost each endpoint (issue 60): its CPU time, user and system, and
//! what its network namespace's kernel counted — packets that came off the wire, what the IP layer
//! took in after receive offload had merged them, UDP datagrams user space read, segments and
//! datagrams it sent — per MB of the run's payload, with the QUIC stack's own counters (receive
//! calls, ACK frames) where quiclab's own stack ran.
//!
//! Why per side and per MB: Zhang et al. (WWW 2024) traced HTTP/3's lower rates on fast links to
//! the receiver — far more packets delivered to user space than TCP's (whose kernel merges them
//! and acknowledges them itself) and ACKs sent from user space. On a 2-core machine a result at a
//! high rate is as likely to measure an endpoint's CPU as the protocol, so each side says whether
//! it was CPU-bound, and a report never reads that limit as a protocol effect.
//!
//! Each endpoint lives in a network namespace of its own that the lab created for the run, so the
//! namespace's counters (zero at its creation) are that endpoint's alone: every implementation,
//! curl's and Chromium's too, is measured the same way.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::metric::{Metric, MetricDef};

/// The kernel's counters of one network namespace (`/proc/net/snmp`, `/proc/net/snmp6`,
/// `/proc/net/netstat`), IPv4 and IPv6 together.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamespaceCounters {
    /// Packets that arrived from the wire: the ECN-codepoint counters (`IpExt: InNoECTPkts +
    /// InECT1Pkts + InECT0Pkts + InCEPkts`, and IPv6's), which count the packets a merged one holds.
    pub wire_packets_in: u64,
    /// Packets the IP layer took in (`Ip: InReceives`, `Ip6InReceives`): after receive offload
    /// (GRO) merged them, one per merged packet.
    pub stack_packets_in: u64,
    /// Packets handed to the IP layer to send (`Ip: OutRequests`, `Ip6OutRequests`): before
    /// segmentation offload (TSO/GSO) cut them.
    pub stack_packets_out: u64,
    /// TCP segments received and sent (`Tcp: InSegs`, `OutSegs`; the kernel counts a sent
    /// segment as what goes on the wire).
    pub tcp_segments_in: u64,
    pub tcp_segments_out: u64,
    /// UDP datagrams user space read (`Udp: InDatagrams`, `Udp6InDatagrams`: one per read, a
    /// merged datagram once) and sent (`OutDatagrams`: one per send, a segmented one once).
    pub udp_datagrams_in: u64,
    pub udp_datagrams_out: u64,
    /// UDP datagrams the kernel dropped because a socket's receive buffer was full
    /// (`Udp: RcvbufErrors`, `Udp6RcvbufErrors`): a receiver that did not read fast enough.
    #[serde(default)]
    pub udp_receive_buffer_drops: u64,
}

/// The value of `name` in a `/proc/net/snmp`-style table: lines `Prefix: name name …` followed by
/// `Prefix: value value …`.
fn table_value(text: &str, prefix: &str, name: &str) -> Option<u64> {
    let mut lines = text.lines().filter(|l| l.starts_with(prefix));
    while let (Some(names), Some(values)) = (lines.next(), lines.next()) {
        let found = names
            .split_whitespace()
            .zip(values.split_whitespace())
            .skip(1)
            .find(|(n, _)| *n == name);
        if let Some((_, v)) = found {
            return v.parse().ok();
        }
    }
    None
}

/// The value of `name` in `/proc/net/snmp6` (lines `name value`).
fn snmp6_value(text: &str, name: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let mut f = l.split_whitespace();
        (f.next() == Some(name)).then(|| f.next()?.parse().ok())?
    })
}

impl NamespaceCounters {
    /// Reads the counters out of the three files' texts (`snmp6` is None where the namespace has
    /// no IPv6). An IPv4 counter missing from its table is an error naming it: the kernel has
    /// printed every one of them since Linux 4.
    pub fn parse(snmp: &str, netstat: &str, snmp6: Option<&str>) -> Result<Self, String> {
        let v4 = |text: &str, file: &str, prefix: &str, name: &str| {
            table_value(text, prefix, name).ok_or_else(|| format!("{file} has no {prefix} {name}"))
        };
        let v6 = |name: &str| snmp6.and_then(|t| snmp6_value(t, name)).unwrap_or(0);
        let mut wire_packets_in = 0;
        for name in ["InNoECTPkts", "InECT1Pkts", "InECT0Pkts", "InCEPkts"] {
            wire_packets_in +=
                v4(netstat, "/proc/net/netstat", "IpExt:", name)? + v6(&format!("Ip6{name}"));
        }
        Ok(NamespaceCounters {
            wire_packets_in,
            stack_packets_in: v4(snmp, "/proc/net/snmp", "Ip:", "InReceives")?
                + v6("Ip6InReceives"),
            stack_packets_out: v4(snmp, "/proc/net/snmp", "Ip:", "OutRequests")?
                + v6("Ip6OutRequests"),
            tcp_segments_in: v4(snmp, "/proc/net/snmp", "Tcp:", "InSegs")?,
            tcp_segments_out: v4(snmp, "/proc/net/snmp", "Tcp:", "OutSegs")?,
            udp_datagrams_in: v4(snmp, "/proc/net/snmp", "Udp:", "InDatagrams")?
                + v6("Udp6InDatagrams"),
            udp_datagrams_out: v4(snmp, "/proc/net/snmp", "Udp:", "OutDatagrams")?
                + v6("Udp6OutDatagrams"),
            udp_receive_buffer_drops: v4(snmp, "/proc/net/snmp", "Udp:", "RcvbufErrors")?
                + v6("Udp6RcvbufErrors"),
        })
    }
}

/// A QUIC stack's own count of its connection's traffic (quinn's `ConnectionStats`): what the
/// kernel cannot see inside the encrypted packets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuicCounters {
    pub datagrams_in: u64,
    /// QUIC packets in them (a datagram may hold several).
    pub packets_in: u64,
    pub datagrams_out: u64,
    /// Sends that carried them (fewer than the datagrams with UDP GSO).
    pub send_calls: u64,
    pub ack_frames_out: u64,
    pub ack_frames_in: u64,
}

impl QuicCounters {
    /// The sum over several connections (a warm-up and the measured one, a mix's flows).
    pub fn add(&mut self, other: &QuicCounters) {
        self.datagrams_in += other.datagrams_in;
        self.packets_in += other.packets_in;
        self.datagrams_out += other.datagrams_out;
        self.send_calls += other.send_calls;
        self.ack_frames_out += other.ack_frames_out;
        self.ack_frames_in += other.ack_frames_in;
    }
}

/// User and system CPU seconds of an endpoint's processes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuSplit {
    pub user_s: f64,
    pub system_s: f64,
}

/// What carried the run's bytes: the counters that say what the endpoints did differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Tcp,
    Quic,
    /// Both at once (a flow or player mix): sends are counted together, offload is not judged.
    Mixed,
}

impl Transport {
    /// Of the results' protocol names (`h1`, `h3`, …; a name that is none counts as TCP).
    pub fn of_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Transport {
        Transport::of(
            names
                .into_iter()
                .map(|n| n.parse().unwrap_or(quiclab_proto::options::Protocol::H1)),
        )
    }

    /// TCP for h1 and h2, QUIC for h3; a mix of both is mixed.
    pub fn of(protocols: impl IntoIterator<Item = quiclab_proto::options::Protocol>) -> Transport {
        use quiclab_proto::options::Protocol;
        let (mut tcp, mut quic) = (false, false);
        for p in protocols {
            match p {
                Protocol::H3 => quic = true,
                Protocol::H1 | Protocol::H2 => tcp = true,
            }
        }
        match (tcp, quic) {
            (true, true) => Transport::Mixed,
            (false, true) => Transport::Quic,
            _ => Transport::Tcp,
        }
    }
}

impl From<(f64, f64)> for CpuSplit {
    /// From (user, system) seconds.
    fn from((user_s, system_s): (f64, f64)) -> CpuSplit {
        CpuSplit { user_s, system_s }
    }
}

/// Which end of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Endpoint {
    Client,
    Server,
}

/// An endpoint is CPU-bound when it was busy this share of what it could use (one core, or its
/// CPU limit) over the whole transfer: set-up and the last idle milliseconds keep a saturated
/// endpoint a little under 100 %, and a reading of 90 % leaves a few percent for them.
pub const CPU_BOUND_SHARE: f64 = 0.9;

/// What one endpoint measured, as [`EndpointCost::of`] takes it.
#[derive(Debug, Clone)]
pub struct EndpointReading {
    /// CPU seconds of its processes, user and system together (None: could not be read).
    pub cpu_s: Option<f64>,
    /// The same split into user and system time (None: not known, e.g. /proc counts whole clock
    /// ticks and the process used less than one).
    pub cpu_user_s: Option<f64>,
    pub cpu_system_s: Option<f64>,
    /// Its namespace's counters over the run (None: could not be read, with the reason).
    pub counters: Result<NamespaceCounters, String>,
    /// quinn's counters (None: another implementation, or a TCP run).
    pub quic: Option<QuicCounters>,
    /// Its CPU limit in cores (`client-cpu`, `server-cpu`; None: unlimited).
    pub cpu_limit_cores: Option<f64>,
    /// Packets the emulator delivered to this end: the wire's own count. The kernel's ECN
    /// counters count a merged packet once when the emulator writes it whole (TUN offload), so
    /// they stand in only without the emulator.
    pub delivered_packets: Option<u64>,
}

impl EndpointReading {
    /// An endpoint whose CPU time (`cpu_s`, NaN when unknown) and its split were read beside
    /// its namespace's counters.
    pub fn new(
        cpu_s: f64,
        split: Option<CpuSplit>,
        counters: Result<NamespaceCounters, String>,
    ) -> EndpointReading {
        EndpointReading {
            cpu_s: cpu_s.is_finite().then_some(cpu_s),
            cpu_user_s: split.map(|s| s.user_s),
            cpu_system_s: split.map(|s| s.system_s),
            counters,
            quic: None,
            cpu_limit_cores: None,
            delivered_packets: None,
        }
    }

    /// Packets off the wire: the emulator's count, else the kernel's.
    fn wire_packets_in(&self) -> Option<u64> {
        self.delivered_packets
            .or_else(|| self.counters.as_ref().ok().map(|c| c.wire_packets_in))
    }
}

impl EndpointReading {
    /// Its CPU time (`cpu_s`, NaN when unknown) and the split, read after the counters (a
    /// client's come with its report).
    pub fn set_cpu(&mut self, cpu_s: f64, split: Option<CpuSplit>) {
        self.cpu_s = cpu_s.is_finite().then_some(cpu_s);
        self.cpu_user_s = split.map(|s| s.user_s);
        self.cpu_system_s = split.map(|s| s.system_s);
    }
}

/// What both endpoints measured.
#[derive(Debug, Clone)]
pub struct EndpointReadings {
    pub client: EndpointReading,
    pub server: EndpointReading,
}

impl EndpointReadings {
    /// The server's CPU seconds (NaN: not measured).
    pub fn server_cpu_s(&self) -> f64 {
        self.server.cpu_s.unwrap_or(f64::NAN)
    }

    /// With the packets the emulator delivered to each end (`fidelity`: its report; None
    /// without the emulator), the wire's count.
    pub fn with_emulator(mut self, fidelity: Option<&crate::fidelity::FidelityReport>) -> Self {
        if let Some(f) = fidelity {
            self.client.delivered_packets = Some(f.downlink.delivered_packets);
            self.server.delivered_packets = Some(f.uplink.delivered_packets);
        }
        self
    }

    /// With the client's CPU time (`cpu_s`, NaN when unknown) and its split, which come with its
    /// report after the lab read the rest.
    pub fn with_client_cpu(mut self, cpu_s: f64, split: Option<CpuSplit>) -> EndpointReadings {
        self.client.set_cpu(cpu_s, split);
        self
    }

    /// Both endpoints' cost of moving `payload_bytes` in `transfer_s` seconds.
    pub fn cost(&self, payload_bytes: u64, transfer_s: f64, transport: Transport) -> EndpointCosts {
        let mut costs = EndpointCosts {
            client: EndpointCost::of(&self.client, payload_bytes, transfer_s, transport),
            server: EndpointCost::of(&self.server, payload_bytes, transfer_s, transport),
        };
        // The kernel counts a UDP send once however many datagrams it carries, and the other end
        // counts the datagrams that came: fewer sends than the peer received is GSO (losses at the
        // bottleneck make it look less so, never more).
        if transport == Transport::Quic {
            for (cost, this, peer) in [
                (&mut costs.client, &self.client, &self.server),
                (&mut costs.server, &self.server, &self.client),
            ] {
                if cost.gso.is_some() {
                    continue;
                }
                if let (Ok(c), Some(came)) = (&this.counters, peer.wire_packets_in())
                    && came > 0
                {
                    cost.gso = Some((c.udp_datagrams_out as f64) < MERGED * came as f64);
                    cost.unmeasured.remove("gso");
                }
            }
        }
        costs
    }
}

/// What moving the payload cost one endpoint, per MB (10⁶ bytes) of the run's payload (the bytes
/// downloaded). A value that could not be measured is null, its reason in `unmeasured`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EndpointCost {
    pub cpu_user_s: Option<f64>,
    pub cpu_system_s: Option<f64>,
    /// Cores busy on average over the transfer: (user + system) / its wall time.
    pub cpu_cores: Option<f64>,
    /// Busy at least [`CPU_BOUND_SHARE`] of one core (or of its CPU limit) over the transfer: its
    /// rate may be the endpoint's limit, not the protocol's.
    pub cpu_bound: Option<bool>,
    /// Packets off the wire, per MB.
    pub wire_packets_in_per_mb: Option<f64>,
    /// Packets the IP layer took in after GRO, per MB.
    pub stack_packets_in_per_mb: Option<f64>,
    /// UDP datagrams user space read (QUIC), per MB.
    pub udp_reads_per_mb: Option<f64>,
    /// What the end's receiving transport handed up per MB, one count for both: TCP's packets
    /// into IP after GRO (the kernel's TCP takes them from there), QUIC's datagrams read by user
    /// space (where QUIC runs) — Zhang et al.'s "packets delivered" (None for a mix).
    #[serde(default)]
    pub deliveries_per_mb: Option<f64>,
    /// TCP segments or UDP datagrams sent, per MB: for the receiving end of a download, its ACKs
    /// (TCP's kernel sends them; QUIC's user space does).
    pub sent_per_mb: Option<f64>,
    /// QUIC ACK frames sent, per MB (quinn's count).
    pub ack_frames_out_per_mb: Option<f64>,
    /// UDP datagrams the kernel dropped at this end because its socket's receive buffer was full
    /// (the receiver fell behind; QUIC then sees them as lost), in all.
    #[serde(default)]
    pub udp_receive_buffer_drops: Option<u64>,
    /// Receive offload merged packets (the kernel's counters): over TCP the IP layer took in
    /// fewer packets than came off the wire; over UDP user space read fewer datagrams than came
    /// (UDP GRO, which a socket must ask for).
    pub gro: Option<bool>,
    /// Segmentation offload: fewer sends than packets (TCP: IP `OutRequests` against `OutSegs`;
    /// QUIC: quinn's send calls against its datagrams).
    pub gso: Option<bool>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub unmeasured: BTreeMap<String, String>,
}

/// The shortest transfer whose endpoints are judged CPU-bound or not, s.
pub const MIN_JUDGED_S: f64 = 1.0;

/// Merged means clearly fewer: a few unmerged handshake and ACK packets must not read as GRO.
const MERGED: f64 = 0.9;

impl EndpointCost {
    /// One endpoint's cost of moving `payload_bytes` in `transfer_s` seconds over `transport`.
    pub fn of(
        reading: &EndpointReading,
        payload_bytes: u64,
        transfer_s: f64,
        transport: Transport,
    ) -> EndpointCost {
        let mut unmeasured = BTreeMap::new();
        let mb = payload_bytes as f64 / 1e6;
        let per_mb = |n: u64| (mb > 0.0).then(|| n as f64 / mb);
        let cpu = reading.cpu_s;
        if cpu.is_none() {
            unmeasured.insert(
                "cpu".into(),
                "the processes' CPU time could not be read".into(),
            );
        } else if reading.cpu_user_s.is_none() || reading.cpu_system_s.is_none() {
            unmeasured.insert(
                "cpu_user_s".into(),
                "the split into user and system time could not be read (less than one clock tick of either)".into(),
            );
        }
        let cpu_cores = cpu.filter(|_| transfer_s > 0.0).map(|c| c / transfer_s);
        let cpu_bound = match cpu_cores {
            Some(c) if transfer_s >= MIN_JUDGED_S => {
                Some(c >= CPU_BOUND_SHARE * reading.cpu_limit_cores.unwrap_or(1.0).min(1.0))
            }
            Some(_) => {
                unmeasured.insert(
                    "cpu_bound".into(),
                    format!("a transfer under {MIN_JUDGED_S} s: the processes' start and handshake would weigh as much as it"),
                );
                None
            }
            None => None,
        };
        let mut cost = EndpointCost {
            cpu_user_s: reading.cpu_user_s,
            cpu_system_s: reading.cpu_system_s,
            cpu_cores,
            cpu_bound,
            ..Default::default()
        };
        match &reading.counters {
            Ok(c) => {
                let wire = reading.wire_packets_in().unwrap_or(c.wire_packets_in);
                cost.wire_packets_in_per_mb = per_mb(wire);
                cost.udp_receive_buffer_drops = Some(c.udp_receive_buffer_drops);
                cost.stack_packets_in_per_mb = per_mb(c.stack_packets_in);
                let fewer = |n: u64| (n as f64) < MERGED * wire as f64;
                match transport {
                    Transport::Tcp => {
                        cost.gro = (wire > 0).then(|| fewer(c.stack_packets_in));
                        cost.deliveries_per_mb = per_mb(c.stack_packets_in);
                        cost.sent_per_mb = per_mb(c.tcp_segments_out);
                        cost.gso = (c.tcp_segments_out > 0).then_some(
                            (c.stack_packets_out as f64) < MERGED * c.tcp_segments_out as f64,
                        );
                    }
                    Transport::Quic => {
                        cost.gro = (wire > 0).then(|| fewer(c.udp_datagrams_in));
                        cost.udp_reads_per_mb = per_mb(c.udp_datagrams_in);
                        cost.deliveries_per_mb = cost.udp_reads_per_mb;
                        cost.sent_per_mb = per_mb(c.udp_datagrams_out);
                    }
                    Transport::Mixed => {
                        cost.udp_reads_per_mb = per_mb(c.udp_datagrams_in);
                        cost.sent_per_mb = per_mb(c.tcp_segments_out + c.udp_datagrams_out);
                        for key in ["gro", "gso"] {
                            unmeasured.insert(
                                key.into(),
                                "TCP and QUIC ran together: the counters do not tell whose packets were merged".into(),
                            );
                        }
                    }
                }
            }
            Err(why) => {
                unmeasured.insert("counters".into(), why.clone());
            }
        }
        match (&reading.quic, transport) {
            (Some(q), Transport::Quic) => {
                cost.ack_frames_out_per_mb = per_mb(q.ack_frames_out);
                if q.send_calls > 0 {
                    cost.gso = Some((q.send_calls as f64) < MERGED * q.datagrams_out as f64);
                }
            }
            (None, Transport::Quic) => {
                unmeasured.insert(
                    "ack_frames_out_per_mb".into(),
                    "QUIC's ACK frames travel encrypted: only the stack itself counts them, and this end reported no count (quiclab's own client reports quinn's; servers and other clients do not yet)".into(),
                );
                if cost.gso.is_none() {
                    unmeasured.insert(
                        "gso".into(),
                        "the kernel counts a UDP send once however many datagrams it carries, and neither this end's stack nor the other end's counters told how many went".into(),
                    );
                }
            }
            _ => {}
        }
        cost.unmeasured = unmeasured;
        cost
    }
}

/// Both endpoints' costs (the result's `endpoints`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EndpointCosts {
    pub client: EndpointCost,
    pub server: EndpointCost,
}

impl EndpointCosts {
    /// The sides that were CPU-bound, for a note beside the result ("the client was CPU-bound").
    pub fn cpu_bound(&self) -> Vec<Endpoint> {
        [
            (Endpoint::Client, &self.client),
            (Endpoint::Server, &self.server),
        ]
        .into_iter()
        .filter(|(_, c)| c.cpu_bound == Some(true))
        .map(|(e, _)| e)
        .collect()
    }
}

/// A result that carries its endpoints' costs (bulk, flows, video).
pub trait WithEndpoints {
    fn endpoint_costs(&self) -> Option<&EndpointCosts>;
}

fn client<R: WithEndpoints>(r: &R) -> Option<&EndpointCost> {
    r.endpoint_costs().map(|e| &e.client)
}

fn server<R: WithEndpoints>(r: &R) -> Option<&EndpointCost> {
    r.endpoint_costs().map(|e| &e.server)
}

fn flag(b: Option<bool>) -> Option<f64> {
    b.map(|b| if b { 1.0 } else { 0.0 })
}

/// The endpoint metric rows bulk, flows and video runs declare (None in runs stored before
/// they were measured, and where the cost says a value is unmeasured).
pub const fn metrics<R: WithEndpoints>() -> [Metric<R>; 11] {
    [
        Metric::of(
            MetricDef::lower("client_cpu_cores", "Client CPU (cores busy)", "cores"),
            |r| client(r)?.cpu_cores,
        ),
        Metric::of(
            MetricDef::lower("server_cpu_cores", "Server CPU (cores busy)", "cores"),
            |r| server(r)?.cpu_cores,
        ),
        Metric::of(
            MetricDef::lower(
                "client_deliveries_per_mb",
                "Client packets handed up per MB (TCP: into IP after GRO; QUIC: UDP reads)",
                "1/MB",
            ),
            |r| client(r)?.deliveries_per_mb,
        ),
        Metric::of(
            MetricDef::lower("client_cpu_bound", "Client CPU-bound (1 = yes)", ""),
            |r| flag(client(r)?.cpu_bound),
        ),
        Metric::of(
            MetricDef::lower("server_cpu_bound", "Server CPU-bound (1 = yes)", ""),
            |r| flag(server(r)?.cpu_bound),
        ),
        Metric::of(
            MetricDef::lower(
                "client_wire_packets_per_mb",
                "Client packets off the wire per MB",
                "1/MB",
            ),
            |r| client(r)?.wire_packets_in_per_mb,
        ),
        Metric::of(
            MetricDef::lower(
                "client_stack_packets_per_mb",
                "Client packets into IP after GRO per MB",
                "1/MB",
            ),
            |r| client(r)?.stack_packets_in_per_mb,
        ),
        Metric::of(
            MetricDef::lower(
                "client_udp_reads_per_mb",
                "Client UDP datagrams read per MB",
                "1/MB",
            ),
            |r| client(r)?.udp_reads_per_mb,
        ),
        Metric::of(
            MetricDef::lower("client_sent_per_mb", "Client packets sent per MB", "1/MB"),
            |r| client(r)?.sent_per_mb,
        ),
        Metric::of(
            MetricDef::lower(
                "client_ack_frames_per_mb",
                "Client QUIC ACK frames per MB",
                "1/MB",
            ),
            |r| client(r)?.ack_frames_out_per_mb,
        ),
        Metric::of(
            MetricDef::lower(
                "server_stack_packets_per_mb",
                "Server packets into IP per MB",
                "1/MB",
            ),
            |r| server(r)?.stack_packets_in_per_mb,
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    const SNMP: &str = "\
Ip: Forwarding DefaultTTL InReceives InHdrErrors InAddrErrors ForwDatagrams InUnknownProtos InDiscards InDelivers OutRequests OutDiscards OutNoRoutes ReasmTimeout ReasmReqds ReasmOKs ReasmFails FragOKs FragFails FragCreates OutTransmits
Ip: 2 64 1000 0 0 0 0 0 1000 700 0 0 0 0 0 0 0 0 0 700
Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors
Tcp: 1 200 120000 -1 1 0 0 0 0 990 1400 0 0 0 0
Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
Udp: 10 0 0 9 3 0 0 0 0
";
    const NETSTAT: &str = "\
TcpExt: SyncookiesSent DelayedACKs
TcpExt: 0 12
IpExt: InNoRoutes InTruncatedPkts InNoECTPkts InECT1Pkts InECT0Pkts InCEPkts
IpExt: 0 0 3000 0 10 0
";

    #[test]
    fn namespace_counters_are_read_from_the_kernels_tables() {
        let c = NamespaceCounters::parse(
            SNMP,
            NETSTAT,
            Some("Ip6InReceives \t 5\nIp6InNoECTPkts 5\nUdp6InDatagrams 2\n"),
        )
        .unwrap();
        assert_eq!(c.wire_packets_in, 3015);
        assert_eq!(c.stack_packets_in, 1005);
        assert_eq!(c.stack_packets_out, 700);
        assert_eq!((c.tcp_segments_in, c.tcp_segments_out), (990, 1400));
        assert_eq!((c.udp_datagrams_in, c.udp_datagrams_out), (12, 9));
        assert_eq!(c.udp_receive_buffer_drops, 3);
        let e = NamespaceCounters::parse("Ip: X\nIp: 1\n", NETSTAT, None).unwrap_err();
        assert!(e.contains("/proc/net/snmp has no Ip: InReceives"), "{e}");
    }

    fn reading(counters: NamespaceCounters, quic: Option<QuicCounters>) -> EndpointReading {
        EndpointReading {
            cpu_s: Some(1.0),
            cpu_user_s: Some(0.75),
            cpu_system_s: Some(0.25),
            counters: Ok(counters),
            quic,
            cpu_limit_cores: None,
            delivered_packets: None,
        }
    }

    #[test]
    fn a_tcp_receiver_counts_merged_packets_and_its_acks_per_mb() {
        let c = NamespaceCounters::parse(SNMP, NETSTAT, None).unwrap();
        let cost = EndpointCost::of(&reading(c, None), 2_000_000, 1.0, Transport::Tcp);
        assert_eq!(cost.wire_packets_in_per_mb, Some(1505.0));
        assert_eq!(cost.stack_packets_in_per_mb, Some(500.0));
        assert_eq!(
            cost.deliveries_per_mb,
            Some(500.0),
            "TCP hands up what IP took in"
        );
        assert_eq!(cost.sent_per_mb, Some(700.0));
        assert_eq!(cost.gro, Some(true));
        assert_eq!(cost.gso, Some(true), "700 sends for 1400 segments");
        assert_eq!(cost.cpu_cores, Some(1.0));
        assert_eq!(cost.cpu_bound, Some(true), "a whole core");
        assert!(cost.unmeasured.is_empty(), "{:?}", cost.unmeasured);
    }

    #[test]
    fn a_quic_receiver_without_quinns_counts_says_why_its_acks_are_unknown() {
        let c = NamespaceCounters {
            wire_packets_in: 1000,
            stack_packets_in: 1000,
            udp_datagrams_in: 1000,
            udp_datagrams_out: 250,
            ..Default::default()
        };
        let cost = EndpointCost::of(&reading(c, None), 1_000_000, 3.0, Transport::Quic);
        assert_eq!(cost.udp_reads_per_mb, Some(1000.0));
        assert_eq!(
            cost.deliveries_per_mb,
            Some(1000.0),
            "QUIC hands up what it read"
        );
        assert_eq!(cost.sent_per_mb, Some(250.0));
        assert_eq!(cost.gro, Some(false));
        assert_eq!(cost.gso, None);
        assert_eq!(cost.ack_frames_out_per_mb, None);
        assert!(cost.unmeasured.contains_key("ack_frames_out_per_mb"));
        assert!(cost.unmeasured.contains_key("gso"));
        assert_eq!(cost.cpu_bound, Some(false), "a third of a core");
        // quinn's own counts fill them in: one send per datagram is no GSO.
        let q = QuicCounters {
            datagrams_in: 1000,
            packets_in: 1002,
            datagrams_out: 250,
            send_calls: 250,
            ack_frames_out: 240,
            ack_frames_in: 3,
        };
        let cost = EndpointCost::of(&reading(c, Some(q)), 1_000_000, 3.0, Transport::Quic);
        assert_eq!(cost.ack_frames_out_per_mb, Some(240.0));
        assert_eq!(cost.gso, Some(false));
        // UDP GRO: user space read a quarter of the datagrams that came.
        let merged = NamespaceCounters {
            udp_datagrams_in: 250,
            ..c
        };
        let cost = EndpointCost::of(&reading(merged, Some(q)), 1_000_000, 3.0, Transport::Quic);
        assert_eq!(cost.gro, Some(true));
        assert_eq!(cost.udp_reads_per_mb, Some(250.0));
        assert!(cost.unmeasured.is_empty(), "{:?}", cost.unmeasured);
    }

    #[test]
    fn a_mix_of_tcp_and_quic_counts_its_sends_together_and_leaves_offload_unjudged() {
        use quiclab_proto::options::Protocol::{H1, H2, H3};
        assert_eq!(Transport::of([H1, H2]), Transport::Tcp);
        assert_eq!(Transport::of([H3, H3]), Transport::Quic);
        assert_eq!(Transport::of([H3, H1]), Transport::Mixed);
        let c = NamespaceCounters {
            wire_packets_in: 2000,
            stack_packets_in: 500,
            tcp_segments_out: 300,
            udp_datagrams_in: 1000,
            udp_datagrams_out: 200,
            ..Default::default()
        };
        let cost = EndpointCost::of(&reading(c, None), 1_000_000, 2.0, Transport::Mixed);
        assert_eq!(cost.sent_per_mb, Some(500.0));
        assert_eq!((cost.gro, cost.gso), (None, None));
        assert!(cost.unmeasured.contains_key("gro") && cost.unmeasured.contains_key("gso"));
    }

    #[test]
    fn a_quic_senders_gso_is_judged_by_what_the_other_end_received() {
        let server = NamespaceCounters {
            wire_packets_in: 350,
            udp_datagrams_in: 350,
            udp_datagrams_out: 350,
            ..Default::default()
        };
        let client = NamespaceCounters {
            wire_packets_in: 700,
            udp_datagrams_in: 700,
            udp_datagrams_out: 350,
            ..Default::default()
        };
        let readings = EndpointReadings {
            client: reading(client, None),
            server: reading(server, None),
        };
        let costs = readings.cost(1_000_000, 2.0, Transport::Quic);
        assert_eq!(
            costs.server.gso,
            Some(true),
            "350 sends put 700 datagrams on the wire"
        );
        // The emulator's count of what it delivered stands for the wire: the kernel counts a
        // packet the emulator wrote merged once.
        let mut merged = readings.clone();
        merged.client.delivered_packets = Some(1400);
        let costs = merged.cost(1_000_000, 2.0, Transport::Quic);
        assert_eq!(costs.client.wire_packets_in_per_mb, Some(1400.0));
        assert_eq!(costs.client.gro, Some(true), "700 reads of 1400 datagrams");
        assert!(!costs.server.unmeasured.contains_key("gso"));
        assert_eq!(costs.client.gso, Some(false), "350 sends, 350 arrived");
    }

    #[test]
    fn cpu_bound_is_judged_against_the_endpoints_limit() {
        let mut r = reading(NamespaceCounters::default(), None);
        r.cpu_s = Some(0.1);
        assert_eq!(
            EndpointCost::of(&r, 1, 1.0, Transport::Tcp).cpu_bound,
            Some(false)
        );
        r.cpu_limit_cores = Some(0.1);
        assert_eq!(
            EndpointCost::of(&r, 1, 1.0, Transport::Tcp).cpu_bound,
            Some(true)
        );
        let short = EndpointCost::of(&r, 1, 0.5, Transport::Tcp);
        assert_eq!(short.cpu_bound, None, "half a second is too short to judge");
        assert!(short.unmeasured.contains_key("cpu_bound"));
        r.cpu_user_s = None;
        let cost = EndpointCost::of(&r, 1, 1.0, Transport::Tcp);
        assert_eq!(cost.cpu_bound, Some(true), "the total is known");
        assert!(cost.unmeasured.contains_key("cpu_user_s"));
        r.cpu_s = None;
        let cost = EndpointCost::of(&r, 1, 1.0, Transport::Tcp);
        assert_eq!(cost.cpu_bound, None);
        assert!(cost.unmeasured.contains_key("cpu"));
        r.counters = Err("the namespace was gone".into());
        let cost = EndpointCost::of(&r, 1, 1.0, Transport::Tcp);
        assert_eq!(cost.unmeasured["counters"], "the namespace was gone");
        assert_eq!(cost.wire_packets_in_per_mb, None);
    }
}
