//! Every key a run takes, in one table ([`KEYS`]): its scenario key, its flag, where it lives,
//! which kinds take it, the TOML types a scenario may write, its parser, unit, allowed values and
//! doc line. The scenario checker (`quiclab-experiment`), every command's flags (`quiclab-cli`
//! derives them), the typed parameters ([`crate::params::Params::set`]) and the key table of
//! docs/experiments.md ([`markdown_table`], checked by a test) all come from here.
//!
//! Adding a key: one row here (a `const` and its place in [`KEYS`]) and its use where the run is
//! built (`quiclab_workload::params::build`). The test `every_key_reaches_the_run` (in
//! quiclab-workload) fails for a row whose value changes nothing.

use crate::WorkloadKind;
use crate::WorkloadKind::{Bulk, Flows, Page, Video};
use crate::params::{self, Params, Setting};

/// Where a key lives in a scenario file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// `[link]` (and `[grid]`): the emulated path, parsed by quiclab-link.
    Link,
    /// A flag only: how this machine runs the emulator (priority, spinning, offload), not what
    /// is measured, so never a scenario key (a scenario runs the same on any host).
    Host,
    /// `[protocol]` (and `[grid]`): the protocol stack.
    Protocol,
    /// The top level of a scenario: the run's own settings.
    Run,
    /// `[workload]` (and `[grid]`): what the kind measures.
    Workload,
}

impl Side {
    pub fn name(self) -> &'static str {
        match self {
            Side::Link => "[link]",
            Side::Host => "flag only",
            Side::Protocol => "[protocol]",
            Side::Run => "top level",
            Side::Workload => "[workload]",
        }
    }
}

/// A TOML type a scenario may write a key's value in (rendered to the flag's text form).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Toml {
    String,
    Integer,
    Float,
    Bool,
}

impl Toml {
    pub fn name(self) -> &'static str {
        match self {
            Toml::String => "string",
            Toml::Integer => "integer",
            Toml::Float => "float",
            Toml::Bool => "boolean",
        }
    }
}

/// How a key's text becomes its value.
#[derive(Clone, Copy)]
pub enum Parser {
    /// quiclab-link's `LinkOptions::set` (link and host keys).
    Link,
    /// A typed value kept in [`Params`].
    Value(fn(&str, &Params) -> Result<Setting, String>),
}

impl std::fmt::Debug for Parser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Parser::Link => "Link",
            Parser::Value(_) => "Value",
        })
    }
}

/// One row of the table.
#[derive(Debug, Clone, Copy)]
pub struct Key {
    /// The scenario key (`[link]` keys are kebab-case, the others snake_case, as scenarios have
    /// always written them).
    pub name: &'static str,
    /// The flag (without `--`) when it is not the name in kebab-case ([`Key::flag`]).
    pub flag_name: Option<&'static str>,
    pub side: Side,
    /// The kinds that take it (empty: every kind).
    pub kinds: &'static [WorkloadKind],
    /// The TOML types a scenario may write it in.
    pub toml: &'static [Toml],
    /// A scenario may give a list (and the flag may repeat): the parts are joined with this.
    pub list: Option<&'static str>,
    /// The flag takes no value: its presence sets this value.
    pub switch: Option<&'static str>,
    /// The value names a file (resolved against the scenario's directory).
    pub path: bool,
    /// With a mix (flows, video): applies to every flow or player (`[protocol]` keys only).
    pub mix_wide: bool,
    /// It chooses the client under comparison, not the network or the workload: like the
    /// protocol it stays out of a run's seed, so e.g. the built-in loader and Chromium loading a
    /// page in the same repetition meet the same random-loss draws.
    pub client_axis: bool,
    pub parser: Parser,
    /// The value's form, as help shows it (`DURATION`, `RATE`, `h1|h2|h3`).
    pub syntax: &'static str,
    pub unit: &'static str,
    /// What is allowed, in words (empty: what `syntax` says).
    pub range: &'static str,
    /// The value when the key is not given (empty: none, or derived; the doc line says).
    pub default: &'static str,
    pub doc: &'static str,
    /// A value that is not the default: tests build a run with it and check it changes the run.
    pub example: &'static str,
}

impl Key {
    /// Whether `kind` takes this key.
    pub fn applies_to(&self, kind: WorkloadKind) -> bool {
        self.kinds.is_empty() || self.kinds.contains(&kind)
    }

    /// The flag, without `--`: the name in kebab-case unless the row names another.
    pub fn flag(&self) -> String {
        self.flag_name
            .map_or_else(|| self.name.replace('_', "-"), str::to_string)
    }

    /// Whether a scenario may write it (host keys are flags only).
    pub fn is_scenario_key(&self) -> bool {
        self.side != Side::Host
    }
}

const fn row(name: &'static str, side: Side, parser: Parser) -> Key {
    Key {
        name,
        flag_name: None,
        side,
        kinds: &[],
        toml: &[Toml::String],
        list: None,
        switch: None,
        path: false,
        mix_wide: false,
        client_axis: false,
        parser,
        syntax: "",
        unit: "",
        range: "",
        default: "",
        doc: "",
        example: "",
    }
}

const fn link(
    name: &'static str,
    syntax: &'static str,
    doc: &'static str,
    example: &'static str,
) -> Key {
    Key {
        syntax,
        doc,
        example,
        ..row(name, Side::Link, Parser::Link)
    }
}

const fn host(
    name: &'static str,
    syntax: &'static str,
    default: &'static str,
    doc: &'static str,
    example: &'static str,
) -> Key {
    Key {
        syntax,
        doc,
        default,
        example,
        ..row(name, Side::Host, Parser::Link)
    }
}

type Parse = fn(&str, &Params) -> Result<Setting, String>;

const fn value(name: &'static str, side: Side, parse: Parse) -> Key {
    row(name, side, Parser::Value(parse))
}

const BOOL: &[Toml] = &[Toml::Bool];
const INT: &[Toml] = &[Toml::Integer, Toml::String];
/// A size: "5MB", or a byte count.
const SIZE: &[Toml] = &[Toml::String, Toml::Integer];
const NUMBER: &[Toml] = &[Toml::String, Toml::Integer, Toml::Float];

/// Declares the rows, each a `pub const`, and [`KEYS`] with every one of them in the same order:
/// a new key is one row here, and nothing can leave it out of the table.
macro_rules! key_table {
    ($($(#[$meta:meta])* pub const $name:ident: Key = $row:expr;)*) => {
        $($(#[$meta])* pub const $name: Key = $row;)*
        /// Every key, in the order docs and help list them.
        pub const KEYS: &[&Key] = &[$(&$name),*];
    };
}

key_table! {
// ---- [link] -------------------------------------------------------------------------------

pub const RATE: Key = link(
    "rate",
    "RATE",
    "Bottleneck rate, e.g. 10mbit, 1.5gbit, 20Mbps (megabits), or \"unlimited\"",
    "10mbit",
);
pub const UP_RATE: Key = link(
    "up-rate",
    "RATE",
    "The uplink's rate (overrides rate)",
    "1mbit",
);
pub const DOWN_RATE: Key = link(
    "down-rate",
    "RATE",
    "The downlink's rate (overrides rate)",
    "20mbit",
);
pub const TRACE: Key = Key {
    path: true,
    ..link(
        "trace",
        "FILE",
        "Mahimahi packet-delivery trace (one ms timestamp per 1500-byte opportunity) instead of rate",
        "",
    )
};
pub const UP_TRACE: Key = Key {
    path: true,
    ..link("up-trace", "FILE", "The uplink's trace", "")
};
pub const DOWN_TRACE: Key = Key {
    path: true,
    ..link("down-trace", "FILE", "The downlink's trace", "")
};
pub const PROFILE: Key = Key {
    path: true,
    ..link(
        "profile",
        "NAME|FILE",
        "Time-varying profile: a built-in name (np2b-typical, …) or a .toml/.csv file of steps (duration, rate, delay, loss); its delays and losses replace delay and loss",
        "np2b-typical",
    )
};
pub const UP_PROFILE: Key = Key {
    path: true,
    ..link(
        "up-profile",
        "NAME|FILE",
        "The uplink's profile",
        "np2b-typical",
    )
};
pub const DOWN_PROFILE: Key = Key {
    path: true,
    ..link(
        "down-profile",
        "NAME|FILE",
        "The downlink's profile",
        "np2b-typical",
    )
};
pub const DELAY: Key = link(
    "delay",
    "DURATION",
    "One-way propagation delay, e.g. 25ms, 300us (or rtt)",
    "25ms",
);
pub const RTT: Key = link(
    "rtt",
    "DURATION",
    "Round-trip propagation delay, split equally between the directions",
    "50ms",
);
pub const UP_DELAY: Key = link("up-delay", "DURATION", "The uplink's one-way delay", "10ms");
pub const DOWN_DELAY: Key = link(
    "down-delay",
    "DURATION",
    "The downlink's one-way delay",
    "40ms",
);
pub const LOSS: Key = Key {
    toml: NUMBER,
    ..link(
        "loss",
        "LOSS",
        "Random loss: 2%, or a fraction below 1 (0.02), or Gilbert–Elliott ge:p=1%,r=30%[,bad=100%][,good=0%]",
        "1%",
    )
};
pub const UP_LOSS: Key = Key {
    toml: NUMBER,
    ..link("up-loss", "LOSS", "The uplink's random loss", "1%")
};
pub const DOWN_LOSS: Key = Key {
    toml: NUMBER,
    ..link("down-loss", "LOSS", "The downlink's random loss", "1%")
};
pub const QUEUE: Key = link(
    "queue",
    "SIZE",
    "Bottleneck queue: 30kB, 64KiB, 20pkt, 1bdp (default), 0.5bdp, unlimited",
    "20pkt",
);
pub const UP_QUEUE: Key = link("up-queue", "SIZE", "The uplink's queue", "20pkt");
pub const DOWN_QUEUE: Key = link("down-queue", "SIZE", "The downlink's queue", "20pkt");
pub const QUEUE_DISCIPLINE: Key = link(
    "queue-discipline",
    "NAME",
    "Queue discipline: droptail (default), codel (RFC 8289: target 5 ms, interval 100 ms), fq-codel (RFC 8290: 1024 flows, quantum 1514 B) or pie (RFC 8033: target 15 ms, t_update 15 ms); the queue size is its limit",
    "codel",
);
pub const UP_QUEUE_DISCIPLINE: Key = link(
    "up-queue-discipline",
    "NAME",
    "The uplink's queue discipline",
    "codel",
);
pub const DOWN_QUEUE_DISCIPLINE: Key = link(
    "down-queue-discipline",
    "NAME",
    "The downlink's queue discipline",
    "codel",
);
pub const ECN: Key = Key {
    toml: BOOL,
    switch: Some("true"),
    ..link(
        "ecn",
        "",
        "The queue discipline marks ECN-capable packets CE instead of dropping them, and the lab's TCP asks for ECN (tcp_ecn = 1; quinn uses ECN by default); with droptail it marks nothing",
        "true",
    )
};
pub const JITTER: Key = link(
    "jitter",
    "DURATION",
    "Each packet's one-way delay varies uniformly within ± this around the delay (both directions, seeded apart from the loss); the link keeps its order, so packets may bunch (docs/link.md)",
    "5ms",
);
pub const REORDER: Key = Key {
    toml: NUMBER,
    range: "0–100 %",
    default: "0%",
    ..link(
        "reorder",
        "PERCENT",
        "This share of packets (both directions) is held back reorder-delay beyond the link's order, and the packets after it may overtake it (docs/link.md)",
        "2%",
    )
};
pub const REORDER_DELAY: Key = Key {
    default: "10ms",
    ..link(
        "reorder-delay",
        "DURATION",
        "How much later a reordered packet is delivered than the link's order would deliver it (needs reorder)",
        "20ms",
    )
};
pub const TCP_SLOW_START_AFTER_IDLE: Key = Key {
    toml: BOOL,
    default: "true",
    ..link(
        "tcp-slow-start-after-idle",
        "true|false",
        "The lab's kernels restart TCP from its initial window after an idle period longer than the RTO (net.ipv4.tcp_slow_start_after_idle in both namespaces; Linux's default, so true); QUIC stacks keep their window",
        "false",
    )
};
pub const TCP_RACK: Key = Key {
    toml: BOOL,
    default: "true",
    ..link(
        "tcp-rack",
        "true|false",
        "The lab's kernels detect TCP losses with RACK (net.ipv4.tcp_recovery = 1 in both namespaces, Linux's default since 4.4); false: by duplicate ACKs and the tail-loss probe, as 2015's kernels did",
        "false",
    )
};
pub const TCP_RMEM: Key = link(
    "tcp-rmem",
    "MIN DEFAULT MAX",
    "The lab's kernels' TCP receive buffer (net.ipv4.tcp_rmem in both namespaces, bytes), e.g. Linux 2016's \"4096 87380 6291456\"; default: the kernel's own for a new namespace (Linux 6.18: 4096 131072 33554432)",
    "4096 87380 6291456",
);
pub const TCP_WMEM: Key = link(
    "tcp-wmem",
    "MIN DEFAULT MAX",
    "The lab's kernels' TCP send buffer (net.ipv4.tcp_wmem in both namespaces, bytes); default: the kernel's own",
    "4096 16384 1048576",
);
pub const CLIENT_CPU: Key = Key {
    toml: NUMBER,
    range: "1–100 %",
    default: "unlimited",
    ..link(
        "client-cpu",
        "PERCENT|unlimited",
        "The client's processes (a browser's included) together get at most this share of one core's time (a cgroup CPU quota per 10 ms; docs/link.md): a slow client such as the seeds' Raspberry Pis",
        "25%",
    )
};
pub const SERVER_CPU: Key = Key {
    toml: NUMBER,
    range: "1–100 %",
    default: "unlimited",
    ..link(
        "server-cpu",
        "PERCENT|unlimited",
        "The server's processes together get at most this share of one core's time (a cgroup CPU quota per 10 ms)",
        "50%",
    )
};
pub const SWITCH: Key = link(
    "switch",
    "SCHEDULE",
    "Network switches: the client moves between seed 004's networks (wifi, lte, 3g) at the given times, e.g. wifi@0s,lte@60s,wifi@180s, or arisu2019-lte / arisu2019-3g; each network's rate and delay apply both ways, and at each switch the client gets a new address. Replaces rate/rtt/profile",
    "wifi@0s,lte@10s",
);
pub const SWITCH_GAP: Key = link(
    "switch-gap",
    "DURATION",
    "Outage after each network switch: nothing crosses for this long (needs switch)",
    "1s",
);
pub const SEED: Key = Key {
    toml: INT,
    default: "1",
    ..link(
        "seed",
        "N",
        "Seed of the random-loss processes (a run with the same seed drops the same packets); a scenario's runs are seeded per run unless it sets one",
        "7",
    )
};

// ---- host (flags only) ----------------------------------------------------------------------

pub const TUN_COMPENSATION: Key = host(
    "tun-compensation",
    "DURATION",
    "",
    "Latency subtracted from each direction's delay to cancel the TUN path's own (docs/link.md)",
    "20us",
);
pub const REALTIME: Key = Key {
    flag_name: Some("no-realtime"),
    toml: BOOL,
    switch: Some("false"),
    ..host(
        "realtime",
        "",
        "true",
        "Run the scheduler threads with normal priority instead of SCHED_FIFO",
        "false",
    )
};
pub const SPIN: Key = host(
    "spin",
    "DURATION",
    "10us",
    "Spin (instead of sleeping) this long before each release",
    "20us",
);
pub const BATCH_WINDOW: Key = host(
    "batch-window",
    "DURATION",
    "0us",
    "Release packets due within this window together with one that is due (0 = each at its own time): fewer wake-ups at high rates, bounded earliness (reported); docs/link.md",
    "100us",
);
pub const NAP: Key = host(
    "nap",
    "DURATION",
    "50us",
    "Within 2 ms of a release, sleep at most this long at a time (0 = sleep straight to the release): a vCPU halted for milliseconds can wake a millisecond late (docs/link.md)",
    "100us",
);
pub const STEERING: Key = host(
    "steering",
    "auto|on|off",
    "auto",
    "Steer the receiving kernels' processing to other CPUs (RPS) and pin the emulator: auto = only for links of 400 Mbit/s or more (docs/link.md)",
    "off",
);
pub const OFFLOAD: Key = host(
    "offload",
    "auto|on|off",
    "auto",
    "TUN offload: the kernels hand over TSO/USO super-packets (split into MTU packets for the link model) and take back coalesced writes; auto = only for links of 200 Mbit/s or more (docs/link.md)",
    "on",
);
pub const OFFLOAD_WINDOW: Key = host(
    "offload-window",
    "DURATION",
    "200us",
    "With offload: write the segments due within this window after a due one together, one coalesced packet per flow (0 = each segment on its own); earliness is reported",
    "100us",
);
pub const TCP_CC: Key = host(
    "tcp-cc",
    "cubic|reno|bbr",
    "cubic",
    "Default TCP congestion control inside the lab's namespaces (the host's default is not inherited)",
    "reno",
);

// ---- [protocol] -------------------------------------------------------------------------------

pub const PROTOCOL: Key = Key {
    flag_name: Some("proto"),
    kinds: &[Bulk, Page],
    syntax: "h1|h2|h3",
    default: "h2",
    doc: "h1 (HTTP/1.1 over TLS/TCP; a page load opens up to 6 connections), h2 (HTTP/2, one TLS/TCP connection) or h3 (HTTP/3 over one QUIC connection)",
    example: "h3",
    ..value("protocol", Side::Protocol, params::protocol)
};
pub const SERVER: Key = Key {
    kinds: &[Bulk, Page, Video],
    // One server for a video run's every player.
    mix_wide: true,
    syntax: "quiclab|caddy|quic-go|ngtcp2",
    default: "quiclab",
    doc: "Which program serves (docs/stacks.md): quiclab (quinn + h3, hyper + rustls), caddy (Debian's Caddy: Go's TLS, its quic-go), quic-go (a current quic-go, Go's net/http for h1 and h2) or ngtcp2 (ngtcp2's example server, h3 only); bulk downloads, page loads and video segments",
    example: "quic-go",
    ..value("server", Side::Protocol, params::server)
};
pub const CLIENT: Key = Key {
    kinds: &[Bulk, Video],
    // One client for a video run's (single) player.
    mix_wide: true,
    syntax: "quiclab|chromium|quic-go|ngtcp2|curl|astream",
    default: "quiclab",
    doc: "Which program downloads (docs/stacks.md): quiclab, chromium (a fetch() in headless Chromium), quic-go, ngtcp2 (h3 only) or curl (h1 and h2) for bulk downloads; quiclab or astream (the seed's Python DASH player, a checkout given by QUICLAB_ASTREAM; one h1 player) for video; page loads choose with browser",
    example: "curl",
    ..value("client", Side::Protocol, params::client)
};
pub const TLS: Key = Key {
    mix_wide: true,
    // `tls = 1.3` (a TOML float) and `tls = "1.3"` both mean TLS 1.3.
    toml: &[Toml::String, Toml::Float],
    syntax: "1.2|1.3",
    default: "1.3",
    doc: "TLS version for h1/h2 (QUIC always uses TLS 1.3)",
    example: "1.2",
    ..value("tls", Side::Protocol, params::tls)
};
pub const CC: Key = Key {
    kinds: &[Bulk, Page],
    syntax: "NAME",
    doc: "Congestion control of the protocol used (h1/h2: cubic|reno|bbr; h3: cubic|newreno|bbr|gquic-cubic); flows and video name theirs in their mix",
    example: "bbr",
    ..value("cc", Side::Protocol, params::name)
};
pub const GQUIC_N: Key = Key {
    kinds: &[Bulk, Page],
    toml: INT,
    syntax: "N",
    default: "2",
    range: "1 or more",
    doc: "Connections emulated by gquic-cubic (β = (N−1+0.7)/N)",
    example: "4",
    ..value("gquic_n", Side::Protocol, params::at_least_one)
};
pub const RESUME: Key = Key {
    kinds: &[Bulk, Page],
    toml: BOOL,
    switch: Some("true"),
    doc: "Resume a TLS session (TLS 1.3 tickets; QUIC resumption) from an untimed first connection",
    example: "true",
    ..value("resume", Side::Protocol, params::boolean)
};
pub const ZERO_RTT: Key = Key {
    kinds: &[Bulk, Page],
    toml: BOOL,
    switch: Some("true"),
    doc: "h3: send the request in 0-RTT on a resumed connection",
    example: "true",
    ..value("zero_rtt", Side::Protocol, params::boolean)
};
pub const FEC: Key = Key {
    mix_wide: true,
    toml: INT,
    syntax: "N",
    range: "2–64, or 0 / off",
    default: "off",
    doc: "XOR FEC under QUIC on both ends for h3, one parity datagram after every N data datagrams (seed 000's F_G ≈ 3 is N = 2); partial groups flushed after max(RTT/2, 5 ms) (docs/fec.md)",
    example: "2",
    ..value("fec", Side::Protocol, params::fec)
};
pub const FEC_IN_CWND: Key = Key {
    mix_wide: true,
    toml: BOOL,
    switch: Some("true"),
    default: "false",
    doc: "With fec: parity shares the congestion window with data, as gQUIC counted its FEC packets (data gets N/(N+1) of the window; docs/fec.md); false: parity travels outside it; without fec it changes nothing",
    example: "true",
    ..value("fec_in_cwnd", Side::Protocol, params::boolean)
};
pub const IP: Key = Key {
    mix_wide: true,
    toml: INT,
    syntax: "4|6",
    default: "4",
    doc: "The address family of every connection",
    example: "6",
    ..value("ip", Side::Protocol, params::ip)
};
pub const QUIC_MTU: Key = Key {
    mix_wide: true,
    toml: INT,
    syntax: "BYTES",
    unit: "B",
    range: "1200 up to what the 1500-byte link carries (1472 over IPv4, 1452 over IPv6)",
    default: "1452",
    doc: "QUIC's UDP payload size for h3; no datagram is larger unless quic_pmtud",
    example: "1350",
    ..value("quic_mtu", Side::Protocol, params::udp_payload)
};
pub const QUIC_STREAM_WINDOW: Key = Key {
    mix_wide: true,
    toml: SIZE,
    syntax: "SIZE",
    unit: "B",
    range: "1kB–1GB",
    default: "16MiB",
    doc: "h3: each stream's flow-control receive window on quiclab's ends (quinn); the default is large enough that congestion control, not flow control, limits a transfer",
    example: "64kB",
    ..value("quic_stream_window", Side::Protocol, params::window_setting)
};
pub const QUIC_WINDOW: Key = Key {
    mix_wide: true,
    toml: SIZE,
    syntax: "SIZE",
    unit: "B",
    range: "1kB–1GB",
    default: "32MiB",
    doc: "h3: the connection's flow-control receive window (all streams together) on quiclab's ends",
    example: "1MB",
    ..value("quic_window", Side::Protocol, params::window_setting)
};
pub const QUIC_ACK_FREQUENCY: Key = Key {
    mix_wide: true,
    toml: INT,
    syntax: "N",
    range: "2–1000, or 0 / off",
    default: "off",
    doc: "h3: each of quiclab's ends asks its peer (ACK frequency extension, draft-ietf-quic-ack-frequency) to acknowledge only every N-th ack-eliciting packet instead of every second one: fewer ACKs for the receiver to build and send (Zhang et al., WWW 2024, sent fewer ACKs as a fix)",
    example: "10",
    ..value("quic_ack_frequency", Side::Protocol, params::ack_frequency)
};
pub const QUIC_GRO: Key = Key {
    mix_wide: true,
    toml: BOOL,
    switch: Some("false"),
    flag_name: Some("no-quic-gro"),
    default: "true",
    doc: "h3: UDP receive offload (GRO) on quiclab's QUIC sockets, which quinn turns on where the kernel has it; false reads every datagram by itself (the flag --no-quic-gro)",
    example: "false",
    ..value("quic_gro", Side::Protocol, params::boolean)
};
pub const QUIC_PMTUD: Key = Key {
    mix_wide: true,
    toml: BOOL,
    switch: Some("true"),
    doc: "Let QUIC's PMTU discovery probe above quic_mtu (up to 1472 bytes)",
    example: "true",
    ..value("quic_pmtud", Side::Protocol, params::boolean)
};
pub const ALT_SVC: Key = Key {
    flag_name: Some("no-alt-svc"),
    mix_wide: true,
    toml: BOOL,
    switch: Some("false"),
    default: "true",
    doc: "The server's HTTP/1.1 and HTTP/2 responses advertise HTTP/3 (`alt-svc: h3=\":443\"`); the flag --no-alt-svc leaves it out",
    example: "false",
    ..value("alt_svc", Side::Protocol, params::boolean)
};

// ---- the run ----------------------------------------------------------------------------------

pub const TIMEOUT: Key = Key {
    syntax: "DURATION",
    doc: "Give up after this long (default: from the workload and the link, see docs/experiments.md); the run then ends as timed out (censored) with what it measured kept",
    example: "40s",
    ..value("timeout", Side::Run, params::positive_duration)
};

// ---- [workload] -------------------------------------------------------------------------------

pub const BULK_SIZE: Key = Key {
    kinds: &[Bulk],
    toml: SIZE,
    syntax: "SIZE",
    unit: "B",
    default: "10MB",
    doc: "The download's size, e.g. 5MB, 500kB, 1MiB",
    example: "2MB",
    ..value("size", Side::Workload, params::size_setting)
};
pub const ON_SWITCH: Key = Key {
    client_axis: true,
    kinds: &[Bulk, Video],
    syntax: "BEHAVIOUR",
    range: "reconnect, reconnect-0rtt, migrate",
    default: "reconnect",
    doc: "How the client answers a network switch: reconnect (after switch_timeout without a byte, a new connection from the new address: the seed's behaviour), reconnect-0rtt (the same with TLS 1.3 resumption / QUIC 0-RTT) or migrate (h3: QUIC connection migration)",
    example: "reconnect-0rtt",
    ..value("on_switch", Side::Workload, params::on_switch)
};
pub const SWITCH_TIMEOUT: Key = Key {
    client_axis: true,
    kinds: &[Bulk, Video],
    syntax: "DURATION",
    default: "5s",
    doc: "With switches: no byte for this long and the connection is taken as lost (the seed's player)",
    example: "3s",
    ..value("switch_timeout", Side::Workload, params::positive_duration)
};
pub const TRANSFER_TIMEOUT: Key = Key {
    client_axis: true,
    kinds: &[Video],
    syntax: "DURATION",
    default: "none",
    doc: "With switches, TCP players (h1, h2): a segment not finished this long after it was asked for is given up even while bytes flow and asked again on new connections (the seed's AStream: curl's CURLOPT_TIMEOUT of 5 s); the stall timeout still applies",
    example: "5s",
    ..value("transfer_timeout", Side::Workload, params::positive_duration)
};
pub const MIGRATE_DELAY: Key = Key {
    client_axis: true,
    kinds: &[Bulk, Video],
    syntax: "DURATION",
    default: "0s",
    doc: "With on_switch = migrate: the time the client takes to notice the switch before it rebinds",
    example: "100ms",
    ..value("migrate_delay", Side::Workload, params::any_duration)
};
pub const PAGE: Key = Key {
    kinds: &[Page],
    syntax: "NAME|DIR",
    doc: "A built-in page (carlucci-{small,medium,large}, megyesi-{5,50}-{small,large}), or a directory with an index.html (a value with a slash; its objects are discovered from the HTML and CSS)",
    example: "carlucci-large",
    ..value("page", Side::Workload, params::page)
};
pub const BROWSER: Key = Key {
    client_axis: true,
    kinds: &[Page],
    syntax: "builtin|chromium",
    default: "builtin",
    doc: "Who loads the page: builtin (quiclab's loader) or chromium (headless Chromium over CDP)",
    example: "chromium",
    ..value("browser", Side::Workload, params::browser)
};
pub const MAX_STREAMS: Key = Key {
    kinds: &[Page],
    toml: INT,
    syntax: "N",
    range: "1 or more",
    doc: "Most concurrent requests on the h2/h3 connection (early QUIC multiplexed 6)",
    example: "6",
    ..value("max_streams", Side::Workload, params::at_least_one)
};
pub const WARM: Key = Key {
    kinds: &[Page],
    toml: BOOL,
    switch: Some("true"),
    doc: "Warm load: an untimed load first fills the session cache, then the measured load resumes (TLS 1.3 tickets for h1/h2, QUIC resumption and 0-RTT for h3)",
    example: "true",
    ..value("warm", Side::Workload, params::boolean)
};
pub const DISCOVER: Key = Key {
    kinds: &[Page],
    toml: BOOL,
    switch: Some("true"),
    doc: "Chromium and h3 only: QUIC enabled but not forced; three loads in one browser record what each object came over and when Chromium moved to HTTP/3",
    example: "true",
    ..value("discover", Side::Workload, params::boolean)
};
pub const SHARDS: Key = Key {
    kinds: &[Page],
    toml: INT,
    syntax: "N",
    range: "1–64",
    default: "1",
    doc: "Chromium, built-in pages: the page's objects spread round-robin over N host names (s1.quiclab.test …; index.html stays on quiclab.test), as 2015 sites sharded them so that HTTP/1.1 opened six connections per name; all names reach the one server",
    example: "4",
    ..value("shards", Side::Workload, params::parts)
};
pub const FLOWS: Key = Key {
    flag_name: Some("flow"),
    kinds: &[Flows],
    list: Some(" + "),
    syntax: "PROTO[:CC]",
    doc: "The flow mix: flows PROTO or PROTO:CC (h1 = one TLS/TCP connection, h2, h3; CC cubic|reno|bbr for h1/h2, cubic|newreno|bbr|gquic-cubic for h3), e.g. \"h3:gquic-cubic + h1\" (the flag repeats)",
    example: "h3 + h1",
    ..value("flows", Side::Workload, params::flow_mix)
};
pub const FLOWS_DURATION: Key = Key {
    kinds: &[Flows],
    syntax: "DURATION",
    doc: "Each flow reads this long from its start, then stops (give this or size)",
    example: "20s",
    ..value("duration", Side::Workload, params::positive_duration)
};
pub const FLOWS_SIZE: Key = Key {
    kinds: &[Flows],
    toml: SIZE,
    syntax: "SIZE",
    unit: "B",
    doc: "Each flow downloads this many bytes instead of duration",
    example: "5MB",
    ..value("size", Side::Workload, params::size_setting)
};
pub const OFFSETS: Key = Key {
    kinds: &[Flows],
    list: Some(","),
    syntax: "DURATION,…",
    default: "all at 0s",
    doc: "Start offsets, one per flow",
    example: "0s,2s",
    ..value("offsets", Side::Workload, params::durations)
};
pub const BIN: Key = Key {
    kinds: &[Flows],
    syntax: "DURATION",
    default: "100ms",
    doc: "Bin size of the per-flow throughput series (whole milliseconds)",
    example: "200ms",
    ..value("bin", Side::Workload, params::positive_duration)
};
pub const CUTOFF: Key = Key {
    kinds: &[Flows],
    syntax: "DURATION",
    default: "a quarter of duration, at most 5s; 0 with size",
    doc: "Left out at both ends of each flow for its goodput (Flent's cutoff)",
    example: "3s",
    ..value("cutoff", Side::Workload, params::any_duration)
};
pub const PLAYERS: Key = Key {
    flag_name: Some("proto"),
    kinds: &[Video],
    list: Some(" + "),
    syntax: "PROTO[/K][:CC]",
    doc: "The players sharing the link, each h1 (persistent TLS/TCP connections), h2 (one connection) or h3 (one QUIC connection), with the congestion controller the server sends it under if given (players of one transport share one), e.g. \"h1 + h3:gquic-cubic\" (the flag repeats)",
    example: "h1 + h3",
    ..value("players", Side::Workload, params::player_mix)
};
pub const ABR: Key = Key {
    kinds: &[Video],
    syntax: "NAME",
    default: "basic",
    doc: "ABR rule: basic, sara, bba2 (as their papers define them) or sara-astream, bba2-astream (as the seed's AStream player implements them)",
    example: "bba2",
    ..value("abr", Side::Workload, params::abr)
};
pub const CONTENT: Key = Key {
    kinds: &[Video],
    syntax: "NAME|FILE",
    default: "bbb (bbb-2s live)",
    doc: "Content: bbb (the seed's Big Buck Bunny ladder, 4 s segments), bbb-2s (2 s segments), or a Sabre movie JSON file",
    example: "bbb-2s",
    ..value("content", Side::Workload, params::content)
};
pub const LIVE: Key = Key {
    kinds: &[Video],
    toml: BOOL,
    switch: Some("true"),
    doc: "Live: 2 s segments (bbb-2s), an 8 s buffer, segments available over time",
    example: "true",
    ..value("live", Side::Workload, params::boolean)
};
pub const SEEK: Key = Key {
    kinds: &[Video],
    list: Some(","),
    syntax: "AT:TO,…",
    doc: "Seeks in media time, e.g. 40s:100s,150s:200s",
    example: "20s:40s",
    ..value("seek", Side::Workload, params::seeks)
};
pub const VIDEO_DURATION: Key = Key {
    kinds: &[Video],
    syntax: "DURATION",
    doc: "Play only this much of the content (e.g. 60s for a quick run)",
    example: "60s",
    ..value("duration", Side::Workload, params::positive_duration)
};
pub const SEEK_POLICY: Key = Key {
    kinds: &[Video],
    syntax: "POLICY",
    default: "keep-last",
    doc: "The level fetched while a seek refills the buffer: keep-last (the seed's) or abr",
    example: "abr",
    ..value("seek_policy", Side::Workload, params::seek_policy)
};
pub const SEEK_CHECK: Key = Key {
    kinds: &[Video],
    client_axis: true,
    syntax: "WHEN",
    range: "at-point or after-download",
    default: "at-point",
    doc: "When the player sees a seek point: at-point (when playback reaches it; a download in flight is finished and thrown away) or after-download (the seed's AStream fork: playback runs on until the next download ends, which is thrown away, and the wait starts then)",
    example: "after-download",
    ..value("seek_check", Side::Workload, params::seek_check)
};
pub const BUFFER: Key = Key {
    kinds: &[Video],
    syntax: "DURATION",
    default: "20s on demand, 8s live",
    doc: "Buffer capacity",
    example: "10s",
    ..value("buffer", Side::Workload, params::positive_duration)
};
pub const POLL: Key = Key {
    kinds: &[Video],
    client_axis: true,
    syntax: "DURATION",
    range: "0–10s",
    default: "0s",
    doc: "The player learns of a finished download only at polls this far apart, counted from its request (the seed's AStream fork slept 0.5 s before each read of its downloader's output; 0 = at once)",
    example: "500ms",
    ..value("poll", Side::Workload, params::any_duration)
};
pub const CONNECTIONS: Key = Key {
    kinds: &[Video],
    toml: INT,
    syntax: "K",
    range: "1–64",
    doc: "h1 players: K TCP connections, each segment split into K Range parts",
    example: "4",
    ..value("connections", Side::Workload, params::parts)
};
pub const PARALLEL: Key = Key {
    kinds: &[Video],
    toml: INT,
    syntax: "K",
    range: "1–64",
    doc: "h2/h3 players: K parallel Range requests per segment on one connection",
    example: "4",
    ..value("parallel", Side::Workload, params::parts)
};
}

/// The command-line flag that blames `key` in an error of a built run of `kind` (its row's flag;
/// a name no row has, spelled as a flag would be).
pub fn flag_of(key: &str, kind: WorkloadKind) -> String {
    find(key, kind).map_or_else(
        || format!("--{}", key.replace('_', "-")),
        |k| format!("--{}", k.flag()),
    )
}

/// The row of scenario key `name` for `kind`.
pub fn find(name: &str, kind: WorkloadKind) -> Option<&'static Key> {
    KEYS.iter()
        .copied()
        .find(|k| k.name == name && k.applies_to(kind))
}

/// The rows `kind` takes.
pub fn of_kind(kind: WorkloadKind) -> impl Iterator<Item = &'static Key> {
    KEYS.iter().copied().filter(move |k| k.applies_to(kind))
}

/// The scenario keys of one side, each name once (a name two kinds share is one key).
pub fn names(side: Side) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for k in KEYS.iter().filter(|k| k.side == side) {
        if !out.contains(&k.name) {
            out.push(k.name);
        }
    }
    out
}

/// The row of scenario key `name` on `side` for any kind (the first).
pub fn any_kind(name: &str, side: Side) -> Option<&'static Key> {
    KEYS.iter()
        .copied()
        .find(|k| k.name == name && k.side == side)
}

/// The `[workload]` keys of `kind`, `kind` first.
pub fn workload_names(kind: WorkloadKind) -> Vec<&'static str> {
    std::iter::once("kind")
        .chain(
            of_kind(kind)
                .filter(|k| k.side == Side::Workload)
                .map(|k| k.name),
        )
        .collect()
}

/// docs/experiments.md's key table, generated (a test checks the doc holds it).
pub fn markdown_table() -> String {
    let mut out = String::from(
        "| key | flag | where | kinds | TOML | value | default | what it sets |\n|---|---|---|---|---|---|---|---|\n",
    );
    for k in KEYS {
        let kinds = if k.kinds.is_empty() {
            "all".to_string()
        } else {
            k.kinds
                .iter()
                .map(|k| k.name())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut toml: Vec<&str> = k.toml.iter().map(|t| t.name()).collect();
        if k.list.is_some() {
            toml.push("array");
        }
        let mut value = match (k.switch, k.syntax) {
            (Some(v), _) => format!("(flag alone: {v})"),
            (None, s) => format!("`{s}`"),
        };
        if !k.range.is_empty() {
            value.push_str(&format!(" ({})", k.range));
        }
        if !k.unit.is_empty() {
            value.push_str(&format!(", {}", k.unit));
        }
        let key = if k.is_scenario_key() {
            format!("`{}`", k.name)
        } else {
            "—".to_string()
        };
        out.push_str(&format!(
            "| {key} | `--{}` | {} | {kinds} | {} | {value} | {} | {} |\n",
            k.flag(),
            k.side.name(),
            toml.join(", "),
            if k.default.is_empty() {
                "—"
            } else {
                k.default
            },
            k.doc.replace('|', "\\|"),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_is_whole_and_its_example_parses() {
        for k in KEYS {
            assert!(!k.doc.is_empty(), "{}: no doc line", k.name);
            assert!(
                k.switch.is_some() || !k.syntax.is_empty(),
                "{}: no value syntax",
                k.name
            );
            assert!(!k.toml.is_empty(), "{}", k.name);
            if k.switch.is_some() {
                assert_eq!(k.toml, BOOL, "{}: a switch flag is a boolean key", k.name);
            }
            if k.mix_wide {
                assert_eq!(k.side, Side::Protocol, "{}", k.name);
            }
            // One spelling: the flag is the key's own name in kebab-case, unless the table says
            // otherwise here (the proto/flow flags of the contender, the negated switches).
            let renamed = [
                ("protocol", "proto"),
                ("flows", "flow"),
                ("players", "proto"),
                ("alt_svc", "no-alt-svc"),
                ("realtime", "no-realtime"),
                ("quic_gro", "no-quic-gro"),
            ];
            if let Some(f) = k.flag_name {
                assert!(renamed.contains(&(k.name, f)), "{}: flag --{f}", k.name);
            }
            // Every example parses (trace files are not at hand here).
            if !k.path || !k.example.is_empty() {
                let kind = WorkloadKind::ALL
                    .into_iter()
                    .find(|w| k.applies_to(*w))
                    .unwrap();
                let mut p = Params::new(kind);
                if k.name == "switch-gap" {
                    p.set("switch", "wifi@0s,lte@10s").unwrap();
                }
                if !k.example.is_empty() {
                    p.set(k.name, k.example)
                        .unwrap_or_else(|e| panic!("{} = {:?}: {e}", k.name, k.example));
                }
            }
        }
    }

    #[test]
    fn a_name_means_one_key_per_kind_and_one_flag_per_command() {
        for kind in WorkloadKind::ALL {
            let rows: Vec<&Key> = of_kind(kind).collect();
            for (i, a) in rows.iter().enumerate() {
                for b in &rows[i + 1..] {
                    assert!(a.name != b.name, "{kind:?}: two rows named {}", a.name);
                    assert!(
                        a.flag() != b.flag(),
                        "{kind:?}: two rows with flag --{}",
                        a.flag()
                    );
                }
            }
        }
    }

    /// docs/experiments.md holds the generated table between its markers. With
    /// `QUICLAB_WRITE_DOCS=1` the test writes it instead (then review the diff).
    #[test]
    fn the_docs_key_table_is_the_generated_one() {
        let _turn = crate::DOCS_FILE.lock().unwrap_or_else(|e| e.into_inner());
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/experiments.md");
        let doc = std::fs::read_to_string(&path).unwrap();
        let begin = "<!-- keys:begin (generated from quiclab_model::keys::markdown_table; do not edit) -->\n";
        let end = "<!-- keys:end -->";
        let a = doc
            .find(begin)
            .expect("docs/experiments.md: the keys:begin marker")
            + begin.len();
        let b = doc
            .find(end)
            .expect("docs/experiments.md: the keys:end marker");
        let table = markdown_table();
        if std::env::var_os("QUICLAB_WRITE_DOCS").is_some() {
            std::fs::write(&path, format!("{}{table}{}", &doc[..a], &doc[b..])).unwrap();
            return;
        }
        assert!(
            doc[a..b] == table,
            "docs/experiments.md's key table is not the table's: run QUICLAB_WRITE_DOCS=1 cargo test -p quiclab-model"
        );
    }
}
