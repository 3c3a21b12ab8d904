//! The browser-like page loader: the I/O shell of `quiclab_page::schedule::LoadPlan`.
//!
//! One driver loop owns the plan (it is plain, single-owner state) and does what it asks: on
//! `OpenConnection` it spawns a connection task (TCP + TLS with hyper's HTTP/1.1 or HTTP/2 client,
//! or QUIC + h3), on `SendRequest` it hands the path to that connection's task. Connection and
//! request tasks report back over one mpsc channel of [`Event`]s; the driver feeds them to the plan
//! (HTML and CSS bodies feed discovery there) until it says `Done`.
//!
//! Every time is measured with one clock from navigation start, an `Instant` taken before any
//! socket exists, so the per-object phases add up: the sum
//! `started + blocked + connect + tls + send + wait + receive` is the moment the object's last byte
//! arrived, and the page load time is the latest of those.

use quiclab_model::page::PageSummary;
pub use quiclab_model::records::PageConnection;
use quiclab_model::run::page::{Browser, PageRun};
use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, anyhow, bail};
use bytes::{Buf, Bytes, BytesMut};
use http::Request;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use quiclab_page::har::{Har, HarPage, ObjectTiming, build_har};
use quiclab_page::schedule::{Action, ConnId, LoadConfig, LoadPlan};
use quiclab_page::{ObjectKind, Origin};
use quiclab_proto::options::{Protocol, StackOptions, TcpCongestion};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use tokio::task::{JoinHandle, JoinSet};

use crate::client::{
    connect_tcp_tls, ms, quic_client_config, quic_client_crypto, quic_client_endpoint,
};
use crate::tls::{self, LabCertificate, SERVER_NAME};

/// What to load and how.
#[derive(Clone)]
pub struct PageLoadOptions {
    pub cert: LabCertificate,
    pub server: SocketAddr,
    pub protocol: Protocol,
    /// TLS version for h1/h2 (`None`: 1.3 or 1.2, as negotiated); QUIC is always TLS 1.3.
    /// TLS version for h1/h2 (`None`: 1.3 or 1.2, as negotiated; QUIC is always TLS 1.3),
    /// congestion controllers, QUIC's initial window.
    pub stack: StackOptions,
    /// For h2/h3: the most requests in flight at once (`None`: no limit of the loader's own).
    pub max_streams: Option<usize>,
    /// The whole load (connections included) must finish within this.
    pub timeout: Duration,
    /// The root document's URL path.
    pub entry: String,
    /// A warm load: an untimed load first fills the session cache, then the measured load
    /// resumes (TLS 1.3 session tickets for h1/h2; QUIC resumption with 0-RTT for h3), on new
    /// connections and without an HTTP cache.
    pub warm: bool,
}

impl PageLoadOptions {
    /// Options with the lab's defaults: TLS negotiated, CUBIC for TCP and QUIC, an initial window
    /// of 10 packets, no stream limit, 60 s timeout, entry `/index.html`.
    pub fn new(cert: LabCertificate, server: SocketAddr, protocol: Protocol) -> PageLoadOptions {
        PageLoadOptions {
            cert,
            server,
            protocol,
            stack: StackOptions::default(),
            max_streams: None,
            timeout: Duration::from_secs(60),
            entry: quiclab_page::INDEX_PATH.to_string(),
            warm: false,
        }
    }

    /// The page run's load from `server`: its protocol, stacks, stream limit and warm-up.
    pub fn of_run(
        run: &PageRun,
        cert: LabCertificate,
        server: SocketAddr,
        timeout: Duration,
    ) -> PageLoadOptions {
        PageLoadOptions {
            stack: run.stack,
            max_streams: run.max_streams.map(|m| m as usize),
            timeout,
            warm: run.warm,
            ..PageLoadOptions::new(cert, server, run.proto)
        }
    }
}

/// What one page load measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PageLoadReport {
    pub protocol: Protocol,
    /// Page load time: navigation start to the last object's last byte.
    pub plt_ms: f64,
    /// Every object, in discovery order (the root document first).
    pub objects: Vec<ObjectTiming>,
    /// Connections opened.
    pub connections: usize,
    /// Response body bytes of all objects.
    pub bytes: u64,
    /// The distinct ALPN identifiers the objects arrived over (`http/1.1`, `h2`, `h3`).
    pub negotiated_protocols: Vec<String>,
    /// Wall-clock navigation start, ms since the Unix epoch.
    pub navigation_start_unix_ms: u64,
    /// The server loaded from.
    pub server: SocketAddr,
    /// Each connection's set-up.
    pub connection_details: Vec<PageConnection>,
    /// h3 with FEC: the client's FEC counters (both directions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fec: Option<crate::fec_socket::FecCounters>,
    /// Whether an untimed load filled the session cache first (see `PageLoadOptions::warm`).
    #[serde(default)]
    pub warm: bool,
}

impl PageLoadReport {
    /// The load as the page result summarises it (`max_streams`: the run's limit).
    pub fn summary(&self, max_streams: Option<u64>) -> PageSummary {
        let details = &self.connection_details;
        PageSummary {
            proto: self.protocol.to_string(),
            browser: Browser::Builtin.name().into(),
            browser_version: None,
            objects: self.objects.len(),
            bytes: self.bytes,
            plt_ms: self.plt_ms,
            ttfb_ms: self.objects.first().map(ObjectTiming::first_byte_ms),
            dom_content_loaded_ms: self.content_load_ms(),
            connections: self.connections,
            negotiated_protocols: self.negotiated_protocols.clone(),
            navigation_start_unix_ms: self.navigation_start_unix_ms,
            max_streams,
            chromium_wall_ms: None,
            connection_details: Some(details.clone()),
            warm: self.warm,
            resumed_connections: Some(details.iter().filter(|c| c.resumed).count()),
            zero_rtt_accepted_connections: Some(
                details
                    .iter()
                    .filter(|c| c.zero_rtt_accepted == Some(true))
                    .count(),
            ),
            chromium_handshakes: None,
            discovery: None,
        }
    }

    /// A HAR 1.2 log of this load (one page titled `title`).
    pub fn har(&self, title: &str) -> Har {
        let page = HarPage {
            title: title.to_string(),
            origin: origin_of(self.server),
            navigation_start: UNIX_EPOCH + Duration::from_millis(self.navigation_start_unix_ms),
            page_load_ms: Some(self.plt_ms),
            content_load_ms: self.content_load_ms(),
            server_ip: Some(self.server.ip().to_string()),
            comment: Some(format!(
                "quiclab page load over {} ({} connection(s))",
                self.protocol, self.connections
            )),
        };
        build_har(&page, &self.objects)
    }

    /// DOMContentLoaded as far as the loader models it: the end of the root document when the page
    /// has no scripts (nothing else delays the parser); `None` otherwise (scripts are not run).
    pub fn content_load_ms(&self) -> Option<f64> {
        let has_scripts = self
            .objects
            .iter()
            .any(|o| ObjectKind::from_path(&o.path) == ObjectKind::Script);
        if has_scripts {
            return None;
        }
        self.objects.first().map(ObjectTiming::end_ms)
    }
}

/// `https://<ip>[:port]`, the origin the server is loaded from (port omitted when 443).
fn origin_of(server: SocketAddr) -> String {
    let host = match server {
        SocketAddr::V4(a) => a.ip().to_string(),
        SocketAddr::V6(a) => format!("[{}]", a.ip()),
    };
    if server.port() == 443 {
        format!("https://{host}")
    } else {
        format!("https://{host}:{}", server.port())
    }
}

/// A path to GET on a connection. `keep_body`: the body is parsed for further objects.
struct Command {
    path: String,
    keep_body: bool,
}

/// One connection's set-up, as its task measured it (ms since navigation start).
struct ConnInfo {
    opened_ms: f64,
    tcp_connect_ms: Option<f64>,
    ready_ms: f64,
    alpn: String,
    tls_version: String,
    resumed: bool,
}

/// One response, fully received (ms since navigation start).
struct Fetched {
    /// Set by [`to_event`]: the request functions do not know their connection's id.
    conn: ConnId,
    path: String,
    status: u16,
    mime: String,
    /// Just before the request was handed to the stack.
    start_ms: f64,
    /// When the request was written (= `start_ms` for hyper, which writes it in its connection
    /// task where it cannot be observed).
    sent_ms: f64,
    /// Response headers received.
    first_byte_ms: f64,
    last_byte_ms: f64,
    bytes: u64,
    /// The body, when asked for.
    body: Bytes,
}

/// What connection and request tasks tell the driver.
enum Event {
    Ready {
        conn: ConnId,
        info: ConnInfo,
        requests: mpsc::UnboundedSender<Command>,
    },
    ConnFailed {
        conn: ConnId,
        error: anyhow::Error,
    },
    Response(Box<Fetched>),
    RequestFailed {
        conn: ConnId,
        path: String,
        error: anyhow::Error,
    },
    /// Whether the server accepted a connection's 0-RTT data (known a round trip after it left).
    EarlyData {
        conn: ConnId,
        accepted: bool,
    },
}

/// What every connection task needs.
struct Shared {
    t0: Instant,
    server: SocketAddr,
    protocol: Protocol,
    tcp_cc: TcpCongestion,
    /// h1/h2: one TLS configuration (and so one session cache) per load, as a browser has.
    tcp_tls: Option<Arc<rustls::ClientConfig>>,
    /// h3: one endpoint and configuration per load.
    quic: Option<(quinn::Endpoint, quinn::ClientConfig)>,
    /// h3: send the requests in 0-RTT when a session ticket is held (warm loads).
    early_data: bool,
}

/// Aborts a spawned task when dropped, so that no hyper connection outlives its loader.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Loads a page as a browser would (see the module docs).
///
/// Errors name the object concerned: a non-2xx status, a request or connection failure, or the
/// load not finishing within `opts.timeout`.
pub async fn load_page(opts: &PageLoadOptions) -> Result<PageLoadReport> {
    if !opts.entry.starts_with('/') {
        bail!("the entry path must start with `/`, got `{}`", opts.entry);
    }
    // Configurations are built before navigation start: a browser has them ready too. One
    // session cache serves both loads of a warm load, as a browser's does.
    let store = Arc::new(tls::CountingSessionStore::default());
    let mut fec_socket = None;
    let (tcp_tls, quic) = if opts.protocol.is_quic() {
        let (endpoint, fec) = quic_client_endpoint(opts.server, &opts.stack)?;
        fec_socket = fec;
        let crypto = quic_client_crypto(&opts.cert, opts.warm, store)?;
        let config = quic_client_config(crypto, &opts.stack, None)?;
        (None, Some((endpoint, config)))
    } else {
        let config = tls::client_config(
            &opts.cert,
            opts.stack.tls,
            opts.protocol.alpn(),
            false,
            store,
        )?;
        (Some(Arc::new(config)), None)
    };
    if opts.warm {
        load_once(opts, tcp_tls.clone(), quic.clone(), false)
            .await
            .context("the warm-up load (untimed, to fill the session cache)")?;
    }
    let mut report = load_once(opts, tcp_tls, quic, opts.warm).await?;
    report.warm = opts.warm;
    report.fec = fec_socket.map(|f| f.final_counters());
    Ok(report)
}

/// One load with the given configurations; `early_data`: h3 requests go out in 0-RTT when a
/// ticket is held.
async fn load_once(
    opts: &PageLoadOptions,
    tcp_tls: Option<Arc<rustls::ClientConfig>>,
    quic: Option<(quinn::Endpoint, quinn::ClientConfig)>,
    early_data: bool,
) -> Result<PageLoadReport> {
    let mut config = LoadConfig::new(opts.protocol);
    config.max_streams = opts.max_streams;
    let origin = origin_of(opts.server);
    config.origin = Some(Origin::parse(&origin).with_context(|| format!("origin {origin}"))?);
    let mut plan = LoadPlan::new(config).context("page load configuration")?;

    let navigation_start_unix_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let t0 = Instant::now();
    let deadline = tokio::time::Instant::from_std(t0) + opts.timeout;
    let shared = Arc::new(Shared {
        t0,
        server: opts.server,
        protocol: opts.protocol,
        tcp_cc: opts.stack.tcp_cc,
        tcp_tls,
        quic,
        early_data,
    });

    let mut driver = Driver {
        shared: shared.clone(),
        plan: &mut plan,
        tasks: JoinSet::new(),
        senders: HashMap::new(),
        infos: HashMap::new(),
        fetched: HashMap::new(),
        early: HashMap::new(),
    };
    let (events_tx, mut events) = mpsc::unbounded_channel();
    let outcome = driver
        .run(&opts.entry, events_tx, &mut events, deadline, opts.timeout)
        .await;

    let Driver {
        mut tasks,
        senders,
        infos,
        fetched,
        early,
        ..
    } = driver;
    drop(senders);
    if let Err(e) = outcome {
        // Failed: the error is due now (within the timeout), so every task is aborted at once.
        tasks.abort_all();
        return Err(e);
    }
    // Loaded (the times are all taken): closing the request channels ends every connection task
    // (QUIC ones close their connection). Dropping the event channel, with any `Ready` still queued
    // in it, ends the tasks of connections that were opened but not needed as soon as their
    // handshake completes; those still in it are aborted after a short grace. QUIC's close gets a
    // moment to reach the server.
    drop(events);
    let _ = tokio::time::timeout(Duration::from_millis(250), async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    drop(tasks);
    if let Some((endpoint, _)) = &shared.quic {
        let _ = tokio::time::timeout(Duration::from_secs(2), endpoint.wait_idle()).await;
    }

    report(
        opts,
        &plan,
        &infos,
        &fetched,
        &early,
        navigation_start_unix_ms,
    )
}

struct Driver<'p> {
    shared: Arc<Shared>,
    plan: &'p mut LoadPlan,
    tasks: JoinSet<()>,
    senders: HashMap<ConnId, mpsc::UnboundedSender<Command>>,
    infos: HashMap<ConnId, ConnInfo>,
    fetched: HashMap<String, Fetched>,
    /// Whether each 0-RTT connection's early data was accepted, as the answers came.
    early: HashMap<ConnId, bool>,
}

impl Driver<'_> {
    fn now(&self) -> Duration {
        self.shared.t0.elapsed()
    }

    async fn run(
        &mut self,
        entry: &str,
        events_tx: mpsc::UnboundedSender<Event>,
        events: &mut mpsc::UnboundedReceiver<Event>,
        deadline: tokio::time::Instant,
        timeout: Duration,
    ) -> Result<()> {
        let now = self.now();
        self.plan.object_discovered(now, entry, None);
        loop {
            if self.act(&events_tx)? {
                return Ok(());
            }
            // The driver holds a sender itself, so `recv` only ends by the deadline.
            let event = match tokio::time::timeout_at(deadline, events.recv()).await {
                Ok(Some(event)) => event,
                Ok(None) => bail!("the page loader's event channel closed"),
                Err(_) => bail!(
                    "the page load did not finish within {timeout:?}; not complete: {}",
                    self.incomplete()
                ),
            };
            self.handle(event)?;
        }
    }

    /// Performs every action the plan has now; `true` once it says `Done`.
    fn act(&mut self, events_tx: &mpsc::UnboundedSender<Event>) -> Result<bool> {
        while let Some(action) = self.plan.poll_action(self.now()) {
            match action {
                Action::OpenConnection(conn) => {
                    let shared = self.shared.clone();
                    let events = events_tx.clone();
                    self.tasks.spawn(async move {
                        if let Err(error) = connection(&shared, conn, events.clone()).await {
                            let _ = events.send(Event::ConnFailed { conn, error });
                        }
                    });
                }
                Action::SendRequest { conn, path } => {
                    let keep_body = self.plan.object(&path).is_some_and(|o| o.kind.is_parsed());
                    let sender = self.senders.get(&conn).ok_or_else(|| {
                        anyhow!("{path}: the plan chose connection {conn}, which is not ready")
                    })?;
                    sender
                        .send(Command {
                            path: path.clone(),
                            keep_body,
                        })
                        .map_err(|_| anyhow!("{path}: connection {conn} has gone away"))?;
                }
                Action::Done => return Ok(true),
            }
        }
        Ok(false)
    }

    fn handle(&mut self, event: Event) -> Result<()> {
        let now = self.now();
        match event {
            Event::Ready {
                conn,
                info,
                requests,
            } => {
                if let Some(expected) = self.expected_alpn()
                    && info.alpn != expected
                {
                    bail!(
                        "connection {conn}: the server negotiated ALPN `{}`, not `{expected}`",
                        info.alpn
                    );
                }
                self.senders.insert(conn, requests);
                self.infos.insert(conn, info);
                self.plan.connection_ready(now, conn)?;
            }
            Event::ConnFailed { conn, error } => {
                return Err(error.context(format!(
                    "{} connection {conn} to {} failed; not complete: {}",
                    self.shared.protocol,
                    self.shared.server,
                    self.incomplete()
                )));
            }
            Event::RequestFailed { conn, path, error } => {
                return Err(error.context(format!("GET {path} on connection {conn}")));
            }
            Event::EarlyData { conn, accepted } => {
                self.early.insert(conn, accepted);
            }
            Event::Response(f) => {
                if !(200..300).contains(&f.status) {
                    bail!(
                        "GET {} on connection {}: the server answered {}",
                        f.path,
                        f.conn,
                        f.status
                    );
                }
                self.plan
                    .response_complete(now, f.conn, &f.path, &f.body)
                    .with_context(|| format!("response for {}", f.path))?;
                let mut f = *f;
                // Parsed already: the body is not kept beyond discovery.
                f.body = Bytes::new();
                self.fetched.insert(f.path.clone(), f);
            }
        }
        Ok(())
    }

    /// The ALPN identifier the loader asked for (it offers only that one).
    fn expected_alpn(&self) -> Option<&'static str> {
        std::str::from_utf8(self.shared.protocol.alpn()).ok()
    }

    /// The objects not yet complete, for error messages.
    fn incomplete(&self) -> String {
        let paths: Vec<&str> = self
            .plan
            .objects()
            .iter()
            .filter(|o| o.completed_at.is_none())
            .map(|o| o.path.as_str())
            .collect();
        if paths.is_empty() {
            return "none".to_string();
        }
        const SHOWN: usize = 10;
        let mut text = paths[..paths.len().min(SHOWN)].join(", ");
        if paths.len() > SHOWN {
            text.push_str(&format!(" and {} more", paths.len() - SHOWN));
        }
        text
    }
}

/// Assembles the report from the plan's records and the tasks' measurements.
fn report(
    opts: &PageLoadOptions,
    plan: &LoadPlan,
    infos: &HashMap<ConnId, ConnInfo>,
    fetched: &HashMap<String, Fetched>,
    early: &HashMap<ConnId, bool>,
    navigation_start_unix_ms: u64,
) -> Result<PageLoadReport> {
    let to_ms = |d: Duration| d.as_secs_f64() * 1e3;
    let mut objects = Vec::with_capacity(plan.objects().len());
    for o in plan.objects() {
        let f = fetched
            .get(&o.path)
            .with_context(|| format!("{}: complete in the plan but never received", o.path))?;
        let info = infos
            .get(&f.conn)
            .with_context(|| format!("{}: connection {} was never ready", o.path, f.conn))?;
        let started = to_ms(o.discovered_at);
        // The task's clock and the driver's are the same `Instant`; the max only guards against a
        // request task that measured its start before the driver recorded the discovery.
        let start = f.start_ms.max(started);
        let waited = start - started;
        let (connect, tls) = if o.first_on_connection {
            // The part of the connection's set-up this request waited for, split with the
            // connection's own milestones; QUIC's combined handshake is booked as "connect".
            let from = started.max(info.opened_ms);
            let handshake = (info.ready_ms - from).clamp(0.0, waited);
            match info.tcp_connect_ms {
                Some(tcp) => {
                    let connect = (tcp - from).clamp(0.0, handshake);
                    (connect, handshake - connect)
                }
                None => (handshake, 0.0),
            }
        } else {
            (0.0, 0.0)
        };
        let sent = f.sent_ms.max(start);
        let first = f.first_byte_ms.max(sent);
        let last = f.last_byte_ms.max(first);
        objects.push(ObjectTiming {
            path: o.path.clone(),
            connection: f.conn.0,
            protocol: info.alpn.clone(),
            started_ms: started,
            blocked_ms: waited - connect - tls,
            connect_ms: connect,
            tls_ms: tls,
            send_ms: sent - start,
            wait_ms: first - sent,
            receive_ms: last - first,
            bytes: f.bytes,
            status: f.status,
            mime: f.mime.clone(),
        });
    }
    let negotiated: BTreeSet<String> = objects.iter().map(|o| o.protocol.clone()).collect();
    let connection_details = plan
        .connections()
        .iter()
        .map(|c| {
            let info = infos.get(&c.id);
            PageConnection {
                id: c.id.0,
                opened_ms: to_ms(c.opened_at),
                tcp_connect_ms: info.and_then(|i| i.tcp_connect_ms),
                ready_ms: info.map(|i| i.ready_ms),
                protocol: info.map(|i| i.alpn.clone()),
                tls_version: info.map(|i| i.tls_version.clone()),
                resumed: info.is_some_and(|i| i.resumed),
                zero_rtt_accepted: early.get(&c.id).copied(),
                requests: c.requests,
            }
        })
        .collect();
    Ok(PageLoadReport {
        protocol: opts.protocol,
        plt_ms: objects.iter().map(ObjectTiming::end_ms).fold(0.0, f64::max),
        bytes: objects.iter().map(|o| o.bytes).sum(),
        connections: plan.connections().len(),
        negotiated_protocols: negotiated.into_iter().collect(),
        navigation_start_unix_ms,
        server: opts.server,
        connection_details,
        objects,
        fec: None,
        warm: false,
    })
}

/// One connection's task: set-up, then the requests the driver hands it, until the driver drops
/// its request channel.
async fn connection(
    shared: &Shared,
    conn: ConnId,
    events: mpsc::UnboundedSender<Event>,
) -> Result<()> {
    let t0 = shared.t0;
    let opened_ms = ms(t0);
    let (requests_tx, requests) = mpsc::unbounded_channel();
    if let Some((endpoint, config)) = &shared.quic {
        let connecting = endpoint
            .connect_with(config.clone(), shared.server, SERVER_NAME)
            .context("starting the QUIC handshake")?;
        // With a ticket held (a warm load), the requests go out at once in 0-RTT; whether the
        // server took them is known a round trip later.
        let (quic, resumed) = match shared.early_data {
            true => match connecting.into_0rtt() {
                Ok((quic, accepted)) => {
                    let events = events.clone();
                    tokio::spawn(async move {
                        let accepted = accepted.await;
                        let _ = events.send(Event::EarlyData { conn, accepted });
                    });
                    (quic, true)
                }
                Err(connecting) => (connecting.await.context("QUIC handshake")?, false),
            },
            false => (connecting.await.context("QUIC handshake")?, false),
        };
        let alpn = quic
            .handshake_data()
            .and_then(|d| d.downcast::<quinn::crypto::rustls::HandshakeData>().ok())
            .and_then(|d| d.protocol)
            .map(|p| String::from_utf8_lossy(&p).to_string())
            // In 0-RTT the server's handshake has not arrived yet: the protocol is the resumed
            // session's, the only one offered.
            .unwrap_or_else(|| if resumed { "h3".into() } else { String::new() });
        let (mut h3_conn, sender) = h3::client::new(h3_quinn::Connection::new(quic.clone()))
            .await
            .context("HTTP/3 connection")?;
        let _h3_driver = AbortOnDrop(tokio::spawn(async move {
            let _ = std::future::poll_fn(|cx| h3_conn.poll_close(cx)).await;
        }));
        let info = ConnInfo {
            opened_ms,
            tcp_connect_ms: None,
            ready_ms: ms(t0),
            alpn,
            tls_version: "1.3".to_string(),
            resumed,
        };
        send_ready(&events, conn, info, requests_tx)?;
        multiplexed(requests, &events, conn, |path| {
            let mut sender = sender.clone();
            async move { h3_get(&mut sender, path, t0).await }
        })
        .await;
        quic.close(crate::client::H3_NO_ERROR, b"done");
        return Ok(());
    }

    let config = shared
        .tcp_tls
        .clone()
        .context("no TLS configuration for a TCP connection")?;
    let (tls, timing) = connect_tcp_tls(shared.server, shared.tcp_cc, config, t0).await?;
    let io = TokioIo::new(tls);
    let info = |ready_ms| ConnInfo {
        opened_ms,
        tcp_connect_ms: timing.tcp_connect_ms,
        ready_ms,
        alpn: timing.protocol.clone(),
        tls_version: timing.tls_version.clone(),
        resumed: timing.resumed,
    };
    if shared.protocol == Protocol::H2 {
        // The server's flow-control windows (`server.rs`), so that on both sides the congestion
        // controller, not flow control, limits a transfer — as the QUIC stack is configured.
        let (sender, h2_conn) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
            .initial_stream_window_size(16 << 20)
            .initial_connection_window_size(32 << 20)
            .handshake::<_, Empty<Bytes>>(io)
            .await
            .context("HTTP/2 handshake")?;
        let _h2_driver = AbortOnDrop(tokio::spawn(async move {
            let _ = h2_conn.await;
        }));
        send_ready(&events, conn, info(ms(t0)), requests_tx)?;
        multiplexed(requests, &events, conn, |path| {
            let mut sender = sender.clone();
            async move {
                let req = Request::get(format!("https://{SERVER_NAME}{}", path.path))
                    .body(Empty::<Bytes>::new())?;
                let start = ms(t0);
                let resp = sender.send_request(req).await?;
                hyper_body(path, start, resp, t0).await
            }
        })
        .await;
    } else {
        let (mut sender, h1_conn) = hyper::client::conn::http1::handshake(io)
            .await
            .context("HTTP/1.1 handshake")?;
        let _h1_driver = AbortOnDrop(tokio::spawn(async move {
            let _ = h1_conn.await;
        }));
        send_ready(&events, conn, info(ms(t0)), requests_tx)?;
        let mut requests = requests;
        // One request at a time (no pipelining): the plan sends the next only after the previous
        // response completed, and the loop takes them in order.
        while let Some(cmd) = requests.recv().await {
            let path = cmd.path.clone();
            let result = async {
                sender.ready().await.context("HTTP/1.1 connection")?;
                let req = Request::get(cmd.path.as_str())
                    .header(http::header::HOST, SERVER_NAME)
                    .body(Empty::<Bytes>::new())?;
                let start = ms(t0);
                let resp = sender.send_request(req).await?;
                hyper_body(cmd, start, resp, t0).await
            }
            .await;
            if events.send(to_event(conn, path, result)).is_err() {
                break;
            }
        }
    }
    Ok(())
}

fn send_ready(
    events: &mpsc::UnboundedSender<Event>,
    conn: ConnId,
    info: ConnInfo,
    requests: mpsc::UnboundedSender<Command>,
) -> Result<()> {
    events
        .send(Event::Ready {
            conn,
            info,
            requests,
        })
        .map_err(|_| anyhow!("the page loader stopped"))
}

/// A multiplexed connection's request loop: every command becomes a concurrent request task
/// (`get`), and its result an event. The tasks live in a `JoinSet` owned here, so they end with the
/// connection.
async fn multiplexed<F, Fut>(
    mut requests: mpsc::UnboundedReceiver<Command>,
    events: &mpsc::UnboundedSender<Event>,
    conn: ConnId,
    get: F,
) where
    F: Fn(Command) -> Fut,
    Fut: Future<Output = Result<Fetched>> + Send + 'static,
{
    let mut set = JoinSet::new();
    while let Some(cmd) = requests.recv().await {
        while set.try_join_next().is_some() {}
        let path = cmd.path.clone();
        let events = events.clone();
        let fut = get(cmd);
        set.spawn(async move {
            let _ = events.send(to_event(conn, path, fut.await));
        });
    }
}

fn to_event(conn: ConnId, path: String, result: Result<Fetched>) -> Event {
    match result {
        Ok(mut f) => {
            f.conn = conn;
            Event::Response(Box::new(f))
        }
        Err(error) => Event::RequestFailed { conn, path, error },
    }
}

/// Receives a hyper response's body (kept only when asked for).
async fn hyper_body(
    cmd: Command,
    start_ms: f64,
    resp: http::Response<hyper::body::Incoming>,
    t0: Instant,
) -> Result<Fetched> {
    let first_byte_ms = ms(t0);
    let status = resp.status().as_u16();
    let mime = content_type(resp.headers());
    let mut body = resp.into_body();
    let mut kept = BytesMut::new();
    let mut bytes = 0u64;
    while let Some(frame) = body.frame().await {
        let frame = frame.context("receiving the body")?;
        if let Some(data) = frame.data_ref() {
            bytes += data.len() as u64;
            if cmd.keep_body {
                kept.extend_from_slice(data);
            }
        }
    }
    Ok(Fetched {
        conn: ConnId(0),
        path: cmd.path,
        status,
        mime,
        start_ms,
        sent_ms: start_ms,
        first_byte_ms,
        last_byte_ms: ms(t0),
        bytes,
        body: kept.freeze(),
    })
}

/// One GET over HTTP/3.
async fn h3_get(
    sender: &mut h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>,
    cmd: Command,
    t0: Instant,
) -> Result<Fetched> {
    let req = Request::get(format!("https://{SERVER_NAME}{}", cmd.path)).body(())?;
    let start_ms = ms(t0);
    let mut stream = sender
        .send_request(req)
        .await
        .context("sending the request")?;
    crate::client::finish_h3_request(&mut stream)
        .await
        .context("finishing the request")?;
    let sent_ms = ms(t0);
    let resp = stream
        .recv_response()
        .await
        .context("receiving the response")?;
    let first_byte_ms = ms(t0);
    let mut kept = BytesMut::new();
    let mut bytes = 0u64;
    while let Some(mut chunk) = stream.recv_data().await.context("receiving the body")? {
        while chunk.has_remaining() {
            let c = chunk.chunk();
            bytes += c.len() as u64;
            if cmd.keep_body {
                kept.extend_from_slice(c);
            }
            let n = c.len();
            chunk.advance(n);
        }
    }
    Ok(Fetched {
        conn: ConnId(0),
        path: cmd.path,
        status: resp.status().as_u16(),
        mime: content_type(resp.headers()),
        start_ms,
        sent_ms,
        first_byte_ms,
        last_byte_ms: ms(t0),
        bytes,
        body: kept.freeze(),
    })
}

fn content_type(headers: &http::HeaderMap) -> String {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_name_the_server_as_urls_do() {
        assert_eq!(
            origin_of("100.64.0.2:443".parse().unwrap()),
            "https://100.64.0.2"
        );
        assert_eq!(
            origin_of("[fd00:71ab::2]:8443".parse().unwrap()),
            "https://[fd00:71ab::2]:8443"
        );
    }
}
