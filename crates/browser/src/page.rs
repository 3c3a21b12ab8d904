//! A page run's load in Chromium: the browser's options from the run ([`PageRun`]), the page
//! summary and HAR object timings from what Chromium measured.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, Result};
use quiclab_model::implementation::Server;
use quiclab_model::page::{
    DISCOVERY_NAVIGATIONS, DiscoveredLoad, Discovery, ObjectTiming, PageSummary,
};
use quiclab_model::run::page::{Browser, PageRun};
use quiclab_proto::SERVER_NAME;

use crate::{BrowserLoad, BrowserOptions, netlog::QuicAttempts};

/// The origin Chromium loads from `server` and the arguments that make it reach the server:
/// by the certificate's name mapped to the address (`--host-resolver-rules`), or, with
/// `by_name` false and an IPv4 address, by the address itself.
pub fn origin_for(server: SocketAddr, by_name: bool) -> (String, Vec<String>) {
    if let (SocketAddr::V4(_), false) = (server, by_name) {
        return (format!("https://{server}"), Vec::new());
    }
    let address = match server.ip() {
        std::net::IpAddr::V6(a) => format!("[{a}]"),
        std::net::IpAddr::V4(a) => a.to_string(),
    };
    // Its sub-domains too: a sharded page's host names reach the same server.
    (
        format!("https://{SERVER_NAME}:{}", server.port()),
        vec![format!(
            "--host-resolver-rules=MAP {SERVER_NAME} {address},MAP *.{SERVER_NAME} {address}"
        )],
    )
}

/// The origins of a sharded page's host names (`https://s1.quiclab.test` …; none for one
/// shard): its objects' URLs name no port, so 443.
pub fn shard_origins(shards: u32) -> Vec<String> {
    if shards <= 1 {
        return Vec::new();
    }
    (1..=shards)
        .map(|k| {
            format!(
                "https://{}",
                quiclab_model::page::shard_host(k, SERVER_NAME)
            )
        })
        .collect()
}

/// Loads the run's page from `server` (a warm load, a discovery run's navigations or one cold
/// load); `spki` is the lab certificate's SPKI hash.
pub fn load_page(
    run: &PageRun,
    spki: &str,
    server: SocketAddr,
    timeout: Duration,
) -> Result<(PageSummary, Vec<ObjectTiming>)> {
    let nav_unix_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    // Over IPv6 Chromium loads a name mapped to the server's address: it does not match an
    // IPv6 literal against --origin-to-force-quic-on (it loaded h2 instead). Discovery runs use
    // the name too (an origin learns its Alt-Svc under its name), and so does a load from
    // another server (Caddy picks its certificate by the name a client sends).
    // A sharded page's host names are names: the page is loaded by name too.
    let (origin, extra_args) = origin_for(
        server,
        run.discover || run.server != Server::Quiclab || run.shards > 1,
    );
    let mut opts = BrowserOptions::new(run.proto, &origin, spki);
    opts.also_quic_on = shard_origins(run.shards);
    opts.timeout = timeout;
    opts.extra_args = extra_args;
    opts.discover = run.discover;
    opts.warm = run.warm;
    let url = format!("{origin}/index.html");
    // A warm load's handshakes, from Chromium's NetLog (None: cold, or unreadable).
    let mut handshakes = None;
    let (load, discovery) = if run.warm {
        let warm = crate::load_warm_with(&opts, &url, crate::prefixed(Vec::new()))?;
        warm.measured.check_protocol(run.proto)?;
        handshakes = warm.handshakes;
        (warm.measured, None)
    } else if run.discover {
        let repeated = crate::load_repeatedly_with(
            &opts,
            &url,
            DISCOVERY_NAVIGATIONS,
            crate::prefixed(Vec::new()),
        )?;
        let discovery = discovery_of(&repeated.loads, repeated.quic);
        let first = repeated.loads.into_iter().next().context("no navigation")?;
        (first, Some(discovery))
    } else {
        let load = crate::load(&opts, &url)?;
        load.check_protocol(run.proto)?;
        (load, None)
    };
    let objects = object_timings(&load);
    let entries = || std::iter::once(&load.navigation.timing).chain(&load.resources);
    // Resource Timing has no connection ids: count the entries that opened a connection.
    // A warm load's NetLog counts them better: Chromium preconnects as a navigation
    // starts, and Resource Timing then shows the navigation on a reused connection.
    let connections = match &handshakes {
        Some(h) => (h.tls + h.quic) as usize,
        None => entries()
            .filter(|r| r.connect_end > r.connect_start)
            .count(),
    };
    let bytes: f64 = entries().map(|r| r.encoded_body_size).sum();
    let summary = PageSummary {
        proto: run.proto.to_string(),
        browser: Browser::Chromium.name().into(),
        browser_version: Some(load.browser_version.clone()),
        objects: load.resources.len() + 1,
        bytes: bytes as u64,
        plt_ms: load.plt_ms,
        ttfb_ms: objects.first().map(ObjectTiming::first_byte_ms),
        dom_content_loaded_ms: Some(load.dom_content_loaded_ms),
        connections,
        negotiated_protocols: load.protocols.clone(),
        navigation_start_unix_ms: nav_unix_ms,
        max_streams: run.max_streams,
        chromium_wall_ms: Some(load.wall_ms),
        connection_details: None,
        warm: run.warm,
        resumed_connections: handshakes.as_ref().map(|h| h.resumed() as usize),
        zero_rtt_accepted_connections: handshakes
            .as_ref()
            .map(|h| h.quic_zero_rtt_accepted as usize),
        chromium_handshakes: handshakes,
        discovery,
    };
    Ok((summary, objects))
}

/// What a discovery run's navigations show: each one's protocols and when HTTP/3 first started.
pub fn discovery_of(loads: &[BrowserLoad], quic: Option<QuicAttempts>) -> Discovery {
    let navigations: Vec<DiscoveredLoad> = loads
        .iter()
        .map(|l| {
            let start = l.navigation.timing.start_time;
            let entries = || std::iter::once(&l.navigation.timing).chain(&l.resources);
            let mut by = BTreeMap::new();
            for e in entries() {
                *by.entry(e.next_hop_protocol.clone()).or_insert(0) += 1;
            }
            DiscoveredLoad {
                plt_ms: l.plt_ms,
                objects_by_protocol: by,
                first_h3_start_ms: entries()
                    .filter(|e| e.next_hop_protocol == "h3")
                    .map(|e| e.start_time - start)
                    .reduce(f64::min),
            }
        })
        .collect();
    let switched_at_navigation = navigations
        .iter()
        .position(|n| n.first_h3_start_ms.is_some())
        .map(|i| i + 1);
    Discovery {
        navigations,
        switched_at_navigation,
        quic,
    }
}

/// Chromium's Resource Timing entries as HAR object timings (ms since navigation start).
pub fn object_timings(load: &BrowserLoad) -> Vec<ObjectTiming> {
    let path_of = |url: &str| {
        url.split_once("://")
            .and_then(|(_, rest)| rest.find('/').map(|i| rest[i..].to_string()))
            .unwrap_or_else(|| url.to_string())
    };
    std::iter::once(&load.navigation.timing)
        .chain(&load.resources)
        .enumerate()
        .map(|(i, r)| {
            let new_connection = r.connect_end > r.connect_start;
            // A request sent in 0-RTT starts before the handshake ends: HAR's phases follow one
            // another, so the handshake's phases end when the request was sent and the rest of
            // the handshake is part of the wait (their sum stays the object's time).
            let connect_end = if new_connection && r.request_start < r.connect_end {
                r.request_start.max(r.connect_start)
            } else {
                r.connect_end
            };
            let tls = if new_connection && r.secure_connection_start > 0.0 {
                (connect_end - r.secure_connection_start).max(0.0)
            } else {
                0.0
            };
            let connect = if new_connection {
                (connect_end - r.connect_start - tls).max(0.0)
            } else {
                0.0
            };
            let blocked = if new_connection {
                (r.connect_start - r.start_time).max(0.0)
            } else {
                (r.request_start - r.start_time).max(0.0)
            };
            ObjectTiming {
                path: path_of(&r.name),
                // Resource Timing does not say which connection an object used.
                connection: i as u64,
                protocol: r.next_hop_protocol.clone(),
                started_ms: r.start_time,
                blocked_ms: blocked,
                connect_ms: connect,
                tls_ms: tls,
                send_ms: 0.0,
                wait_ms: (r.response_start - r.request_start).max(0.0),
                receive_ms: (r.response_end - r.response_start).max(0.0),
                bytes: r.encoded_body_size.max(0.0) as u64,
                status: r.response_status as u16,
                mime: String::new(),
            }
        })
        .collect()
}
