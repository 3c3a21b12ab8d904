//! The run the parameters ask for: [`build`] turns the typed [`Params`] (parsed by the key table)
//! into a [`Run`], checking every rule that spans keys once, here. A refused combination names
//! the key to change. Pure: a file the parameters name (a video's content) is read through the
//! shell's reader; whether the programs a run needs are installed is the shell's check
//! (`quiclab_workload::params::build`), before any lab starts.

use quiclab_link::input::ReadText;
use quiclab_link::spec::LinkSpec;
use quiclab_proto::options::{
    FecSettings, LAB_LINK_MTU, Protocol, QUIC_MIN_UDP_PAYLOAD, QuicMtu, QuicWindows, StackOptions,
};
use std::path::PathBuf;

use crate::WorkloadKind;
use crate::implementation::{self, Client, Server};
use crate::keys as k;
use crate::params::{ParamError, Params, refuse};

use super::SwitchBehaviour;
use super::bulk::BulkRun;
use super::flows::FlowsRun;
use super::page::{Browser, PageRun, PageSource};
use super::video::VideoRun;

/// A bulk download's size when none is given (the key table's default for `size`).
pub const DEFAULT_BULK_SIZE: u64 = 10_000_000;

/// One run of any kind.
#[derive(Debug, Clone)]
pub enum Run {
    Bulk(BulkRun),
    Page(PageRun),
    Flows(FlowsRun),
    Video(VideoRun),
}

/// How the client answers network switches, from `on_switch`, `switch_timeout`, `migrate_delay`.
fn switching(p: &Params) -> SwitchBehaviour {
    let d = SwitchBehaviour::default();
    SwitchBehaviour {
        on_switch: p.on_switch().unwrap_or(d.on_switch),
        stall_timeout: p.duration(&k::SWITCH_TIMEOUT).unwrap_or(d.stall_timeout),
        migrate_delay: p.duration(&k::MIGRATE_DELAY).unwrap_or(d.migrate_delay),
        transfer_timeout: p.duration(&k::TRANSFER_TIMEOUT),
    }
}

/// The first key given that sets quiclab's own QUIC stack, which another program would not
/// honour (checked against the server and client chosen).
fn quic_stack_key(p: &Params) -> Option<&'static str> {
    [
        &k::QUIC_MTU,
        &k::QUIC_PMTUD,
        &k::GQUIC_N,
        &k::QUIC_STREAM_WINDOW,
        &k::QUIC_WINDOW,
        &k::QUIC_ACK_FREQUENCY,
        &k::QUIC_GRO,
    ]
    .into_iter()
    .find(|key| p.given(key))
    .map(|key| key.name)
}

/// The protocol stack's options (for `proto`, the run's protocol or a mix's default).
fn stack(p: &Params, proto: Protocol, link: &LinkSpec) -> Result<StackOptions, ParamError> {
    let mut stack = StackOptions {
        tls: p.tls(),
        gquic_n: p
            .count(&k::GQUIC_N)
            .map_or(StackOptions::default().gquic_n, |n| n as u32),
        ..StackOptions::default()
    };
    if let Some(cc) = p.text(&k::CC) {
        stack = stack.with_cc(proto, cc).map_err(|e| refuse("cc", e))?;
    }
    stack.alt_svc = p.bool_or(&k::ALT_SVC, true);
    stack.quic_ack_frequency = p
        .count(&k::QUIC_ACK_FREQUENCY)
        .filter(|&n| n > 0)
        .map(|n| n as u32);
    stack.quic_gro = p.bool_or(&k::QUIC_GRO, true);
    let windows = QuicWindows::default();
    stack.quic_windows = QuicWindows {
        stream: p.count(&k::QUIC_STREAM_WINDOW).unwrap_or(windows.stream),
        connection: p.count(&k::QUIC_WINDOW).unwrap_or(windows.connection),
    };
    // TCP runs ignore QUIC's datagram size (a grid may cross it with every protocol).
    stack.quic_mtu = QuicMtu {
        initial: p
            .count(&k::QUIC_MTU)
            .map_or(stack.quic_mtu.initial, |n| n as u16),
        discover: p.bool(&k::QUIC_PMTUD),
    };
    let ipv6 = p.bool(&k::IP);
    stack
        .quic_mtu
        .check(LAB_LINK_MTU, ipv6)
        .map_err(|e| refuse("quic_mtu", e))?;
    if let Some(n) = p.fec() {
        // The FEC header rides inside QUIC's datagram budget (see quiclab-stacks).
        let floor = QUIC_MIN_UDP_PAYLOAD + quiclab_fec::MAX_HEADER as u16;
        if stack.quic_mtu.initial < floor {
            return Err(refuse(
                "quic_mtu",
                format!(
                    "with FEC a datagram also carries the FEC header ({} bytes): quic_mtu must be at least {floor}",
                    quiclab_fec::MAX_HEADER
                ),
            ));
        }
        if link.switch.is_some() {
            return Err(refuse(
                "fec",
                "FEC across network switches is not built yet (the switching client makes its own QUIC \
                 endpoints): drop fec, or the switch schedule (--switch / switch)",
            ));
        }
        // gQUIC's flush alarm: max(RTT/2, 5 ms) of the emulated path.
        stack.fec = Some(FecSettings {
            in_cwnd: p.bool(&k::FEC_IN_CWND),
            ..FecSettings::for_rtt(n, link.base_rtt())
        });
    }
    // Without FEC there is no parity to share the window with: fec_in_cwnd changes nothing (a
    // grid may cross it with fec = 0, as an explanation's control pairs need).
    Ok(stack)
}

/// Whether `server` (and `client`) can run `proto` with what `p` sets (the implementations'
/// table, `implementation::check`); the error names the key to change.
fn check_combination(
    p: &Params,
    proto: Protocol,
    server: Server,
    client: Option<Client>,
) -> Result<(), ParamError> {
    implementation::check(&implementation::Combination {
        kind: p.kind,
        proto,
        server,
        client,
        cc: p.text(&k::CC),
        resume: p.bool(&k::RESUME),
        zero_rtt: p.bool(&k::ZERO_RTT),
        fec: p.fec().is_some(),
        quic_stack_key: quic_stack_key(p),
    })
    .map_err(|(key, e)| refuse(key, e))
}

/// The run `p` asks for over `link`, with every rule that spans keys checked.
pub fn build(p: &Params, link: &LinkSpec, read: ReadText) -> Result<Run, ParamError> {
    let kind = p.kind;
    let proto = p.protocol().unwrap_or(Protocol::H2);
    let stack = stack(p, proto, link)?;
    let resume = p.bool(&k::RESUME);
    let zero_rtt = p.bool(&k::ZERO_RTT);
    let ipv6 = p.bool(&k::IP);
    let timeout = p.duration(&k::TIMEOUT);
    if zero_rtt && proto != Protocol::H3 {
        return Err(refuse(
            "zero_rtt",
            format!(
                "0-RTT is QUIC's (quiclab's TCP stacks send no TLS early data), but this run is {proto}: \
                 use resume to compare resumed handshakes"
            ),
        ));
    }
    // Only the bulk and video clients answer network switches.
    if link.switch.is_none() {
        if let Some(key) = [
            &k::ON_SWITCH,
            &k::SWITCH_TIMEOUT,
            &k::MIGRATE_DELAY,
            &k::TRANSFER_TIMEOUT,
        ]
        .into_iter()
        .find(|key| p.given(key))
        {
            return Err(refuse(
                key.name,
                "it answers network switches: set a schedule (--switch, or switch = \"wifi@0s,lte@60s\" or \"arisu2019-lte\" in a scenario)",
            ));
        }
    } else if !kind.answers_switches() {
        return Err(refuse(
            "switch",
            format!(
                "network switches are answered by the bulk and video clients only; this run is kind = \"{}\"",
                kind.name()
            ),
        ));
    }
    // A bulk download or page load is one protocol's; flows and video apply FEC to their h3
    // flows and players (their own validation refuses a mix without one).
    if p.fec().is_some()
        && matches!(kind, WorkloadKind::Bulk | WorkloadKind::Page)
        && proto != Protocol::H3
    {
        return Err(refuse(
            "fec",
            format!("FEC is quiclab's XOR FEC under QUIC: it needs h3, but this run is {proto}"),
        ));
    }
    Ok(match kind {
        WorkloadKind::Bulk => {
            let size = p.count(&k::BULK_SIZE).unwrap_or(DEFAULT_BULK_SIZE);
            if link.switch.is_some() && (resume || zero_rtt) {
                let key = if resume { "resume" } else { "zero_rtt" };
                return Err(refuse(
                    key,
                    "across network switches, resumption is chosen by on_switch = \"reconnect-0rtt\"",
                ));
            }
            let server = p.server().unwrap_or(Server::Quiclab);
            let client = p.client().unwrap_or(Client::Quiclab);
            // Checked before any lab starts, with the programs present: a run that cannot work
            // costs nothing.
            check_combination(p, proto, server, Some(client))?;
            if (server != Server::Quiclab || client != Client::Quiclab) && link.switch.is_some() {
                return Err(refuse(
                    if server != Server::Quiclab {
                        "server"
                    } else {
                        "client"
                    },
                    "network switches are answered by quiclab's own client and server",
                ));
            }
            let run = BulkRun {
                resume,
                zero_rtt,
                stack,
                ipv6,
                timeout: Some(timeout.unwrap_or_else(|| super::default_timeout(size, link))),
                switching: switching(p),
                server,
                client,
                ..BulkRun::new(proto, size)
            };
            run.validate().map_err(|e| refuse("on_switch", e))?;
            Run::Bulk(run)
        }
        WorkloadKind::Page => {
            if resume || zero_rtt {
                let key = if resume { "resume" } else { "zero_rtt" };
                return Err(refuse(
                    key,
                    "a page load resumes with warm = true (an untimed load first fills the \
                     session cache; h3 then sends its requests in 0-RTT)",
                ));
            }
            let page = match p.text(&k::PAGE) {
                // A name without a slash is a built-in page; anything else a directory.
                Some(v) if v.contains('/') => PageSource::Dir(PathBuf::from(v)),
                Some(v) => PageSource::Builtin(v.to_string()),
                None => {
                    return Err(refuse(
                        "page",
                        "a page run needs a page, e.g. page = \"carlucci-small\"",
                    ));
                }
            };
            let browser = match p.text(&k::BROWSER) {
                Some("chromium") => Browser::Chromium,
                _ => Browser::Builtin,
            };
            if browser == Browser::Chromium
                && let Some(key) = [&k::QUIC_STREAM_WINDOW, &k::QUIC_WINDOW]
                    .into_iter()
                    .find(|key| p.given(key))
            {
                // A page's bytes flow to the browser: its receive windows are Chromium's own.
                return Err(refuse(
                    key.name,
                    "Chromium receives the page and keeps its own QUIC receive windows: the run \
                     would record a window that limited nothing; use browser = \"builtin\"",
                ));
            }
            let server = p.server().unwrap_or(Server::Quiclab);
            check_combination(p, proto, server, None)?;
            let run = PageRun {
                proto,
                browser,
                server,
                max_streams: p.count(&k::MAX_STREAMS),
                stack,
                timeout,
                page,
                ipv6,
                warm: p.bool(&k::WARM),
                discover: p.bool(&k::DISCOVER),
                shards: p.count(&k::SHARDS).map_or(1, |n| n as u32),
            };
            run.validate().map_err(|(k, e)| refuse(k, e))?;
            Run::Page(run)
        }
        WorkloadKind::Flows => Run::Flows(super::flows::build(p, stack)?),
        WorkloadKind::Video => {
            let mut run = VideoRun::build(p, read).map_err(|(k, e)| refuse(k, e))?;
            // A player's `:CC` is the server's controller for its transport.
            run.stack = run
                .mix
                .stack_with_controllers(stack)
                .map_err(|e| refuse("players", e))?;
            run.ipv6 = ipv6;
            run.timeout = timeout;
            run.switching = switching(p);
            run.server = p.server().unwrap_or(Server::Quiclab);
            run.client = p.client().unwrap_or(Client::Quiclab);
            if run.client != Client::Quiclab {
                if link.switch.is_some() {
                    return Err(refuse(
                        "client",
                        "network switches are answered by quiclab's own client and server",
                    ));
                }
                if p.duration(&k::BUFFER).is_some() {
                    // AStream reads its queue limits from its own config_dash.py; quiclab
                    // records them per run.
                    return Err(refuse(
                        "buffer",
                        "client astream: AStream's buffer is its own configuration (config_dash.py's NETFLIX_BUFFER_SIZE and BASIC_THRESHOLD, recorded per run); leave buffer out",
                    ));
                }
                if p.given(&k::SEEK_CHECK) {
                    return Err(refuse(
                        "seek_check",
                        "client astream: seek_check models the seed's fork; upstream AStream \
                         plays without seeks",
                    ));
                }
                if p.given(&k::POLL) {
                    return Err(refuse(
                        "poll",
                        "client astream: poll models the seed's fork, whose downloader quiclab's \
                         player stands in for; AStream learns of its downloads itself",
                    ));
                }
                for player in &run.mix.players {
                    check_combination(p, player.proto, run.server, Some(run.client))?;
                }
            }
            if run.server != Server::Quiclab {
                if link.switch.is_some() {
                    return Err(refuse(
                        "server",
                        "network switches are answered by quiclab's own client and server",
                    ));
                }
                if run.mix.names_controllers() {
                    return Err(refuse(
                        "players",
                        format!(
                            "{}: a player's :CC is set by quiclab's own server; {} sends under \
                             its own controllers (drop the :CC or the server)",
                            run.mix.label(),
                            run.server.name()
                        ),
                    ));
                }
                // Each player's protocol against the server's table (and the cc it can set).
                for player in &run.mix.players {
                    // resume and zero_rtt are not video keys: false here.
                    check_combination(p, player.proto, run.server, None)?;
                }
            }
            run.validate().map_err(|(k, e)| refuse(k, e))?;
            Run::Video(run)
        }
    })
}
