//! The video client: drives a [`quiclab_video::Player`] with real downloads. It opens the
//! player's connections once (h1/K: K persistent TLS/TCP connections; h2/K: one connection, K
//! parallel requests; h3/K: one QUIC connection, K parallel requests), then asks the player what
//! to do, fetches each segment as K equal Range parts at once (a whole GET when K = 1), and tells
//! the player when it arrived. The player's clock is seconds since the mix's start on
//! CLOCK_MONOTONIC, so its series line up with the emulator's.
//!
//! Across network switches ([`VideoOptions::switching`]) the player's connections are bound to
//! the client's address of the moment, and a segment whose bytes stop for the stall timeout (or
//! whose connection fails) is given up: the player opens all its connections again from its
//! current address (h1/K: all K; `reconnect-0rtt` resumes the TLS sessions / sends 0-RTT) and
//! asks for the whole segment again, throwing away the part that had arrived (the seed's player
//! did the same). With `migrate` (h3) the QUIC endpoint moves to the new address at each switch
//! and the segment continues on the same connection.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::stop::TimeLimitReached;
use anyhow::{Context, Result, bail};
use bytes::{Buf, Bytes};
use http::Request;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use quiclab_model::run::video::VideoRun;
use quiclab_proto::options::{Protocol, StackOptions};
use quiclab_video::{
    Abr, AbrKind, Action, Content, Download, Player, PlayerConfig, PlayerSpec, split_ranges,
};

use crate::client::{
    H3_NO_ERROR, connect_tcp_tls_from, finish_h3_request, quic_client_config,
    quic_client_endpoint_from,
};
use crate::cwnd::monotonic_ns;
use crate::switching::{ConnectionRecord, MigrationRecord, OnSwitch, SwitchPlan, TlsConfigs};
use crate::tls::{LabCertificate, SERVER_NAME};

/// One player's parameters.
#[derive(Clone)]
pub struct VideoOptions {
    pub cert: LabCertificate,
    pub server: SocketAddr,
    pub spec: PlayerSpec,
    pub stack: StackOptions,
    pub content: Content,
    pub player: PlayerConfig,
    pub abr: AbrKind,
    /// CLOCK_MONOTONIC of the mix's start: the player's clock counts from here.
    pub origin_ns: u64,
    /// Give up this long after the origin (the run's time limit): the report keeps what was
    /// measured and says why it ended.
    pub limit: Duration,
    /// The network switches the client lives through, and its answer to them.
    pub switching: Option<SwitchPlan>,
}

pub use quiclab_model::records::VideoSwitchLog;

/// Progress points closer than this are merged (s).
pub const PROGRESS_MERGE_S: f64 = 0.005;

/// Body bytes as they arrive, on the emulator's clock: progress points and the last arrival.
struct Meter {
    base_ns: u64,
    state: Mutex<(u64, Vec<(f64, u64)>)>,
}

impl Meter {
    fn now(&self) -> f64 {
        monotonic_ns().saturating_sub(self.base_ns) as f64 / 1e9
    }

    fn add(&self, n: u64) {
        let t = self.now();
        let mut st = self.state.lock().unwrap();
        st.0 += n;
        let bytes = st.0;
        match st.1.last_mut() {
            Some(last) if t - last.0 < PROGRESS_MERGE_S => last.1 = bytes,
            _ => st.1.push((t, bytes)),
        }
    }

    fn bytes(&self) -> u64 {
        self.state.lock().unwrap().0
    }

    fn last_arrival(&self) -> Option<f64> {
        self.state.lock().unwrap().1.last().map(|p| p.0)
    }
}

/// What one player did (model's record).
pub use quiclab_model::records::VideoReport;

/// The player's connections.
enum Conns {
    /// One sender per connection; a part is sent on its own connection.
    H1(Vec<Option<hyper::client::conn::http1::SendRequest<Empty<Bytes>>>>),
    H2(hyper::client::conn::http2::SendRequest<Empty<Bytes>>),
    H3 {
        sender: h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>,
        conn: quinn::Connection,
        endpoint: quinn::Endpoint,
        drive: tokio::task::JoinHandle<()>,
        /// `migrate`: moves the endpoint at each switch.
        migrator: Option<tokio::task::JoinHandle<()>>,
    },
}

/// The connections of the moment and what the switches need kept between them.
struct Session<'a> {
    opts: &'a VideoOptions,
    /// Client ports of every connection ever opened (the flows' keys at the emulator).
    ports: Vec<u16>,
    /// Client ports of the current connections.
    current: Vec<u16>,
    tls: TlsConfigs,
    meter: Option<Arc<Meter>>,
    log: VideoSwitchLog,
    migrations: Arc<Mutex<Vec<MigrationRecord>>>,
    /// The FEC sockets of every QUIC endpoint opened (h3 with FEC).
    fec: Vec<Arc<crate::fec_socket::FecSocket>>,
}

/// Every player of `run`, each in its own task against `server`, all on one clock from
/// `origin_ns`; each gives up `limit` after the start (its report says so).
pub async fn run_players(
    run: &VideoRun,
    cert: &LabCertificate,
    server: SocketAddr,
    origin_ns: u64,
    limit: Duration,
    switching: Option<SwitchPlan>,
) -> Result<Vec<VideoReport>> {
    let mut tasks = Vec::new();
    for p in &run.mix.players {
        let opts = VideoOptions {
            cert: cert.clone(),
            server,
            spec: *p,
            stack: run.stack,
            content: run.content.clone(),
            player: run.player.clone(),
            abr: run.abr,
            origin_ns,
            limit,
            switching: switching.clone(),
        };
        tasks.push(tokio::spawn(async move { run_player(&opts).await }));
    }
    let mut players = Vec::new();
    for t in tasks {
        players.push(t.await.context("a player's task ended abnormally")?);
    }
    Ok(players)
}

/// Runs the player to the end of the content, or until `limit`, or until a download fails.
pub async fn run_player(opts: &VideoOptions) -> VideoReport {
    let origin = tokio::time::Instant::now()
        - Duration::from_nanos(monotonic_ns().saturating_sub(opts.origin_ns));
    let clock = move || origin.elapsed().as_secs_f64();
    let deadline = origin + opts.limit;
    let mut player = Player::new(
        opts.content.clone(),
        opts.player.clone(),
        Abr::new(opts.abr),
    );
    let mut session = Session {
        opts,
        ports: Vec::new(),
        current: Vec::new(),
        tls: TlsConfigs::default(),
        meter: opts.switching.as_ref().map(|plan| {
            Arc::new(Meter {
                base_ns: plan.epoch_ns,
                state: Mutex::default(),
            })
        }),
        log: VideoSwitchLog::default(),
        migrations: Arc::default(),
        fec: Vec::new(),
    };
    let mut connected_s = None;
    let result: Result<()> = async {
        let mut conns = match tokio::time::timeout_at(deadline, session.connect("start")).await {
            Ok(c) => c?,
            Err(_) => {
                return Err(TimeLimitReached {
                    limit: opts.limit,
                    what: "connection set-up had not finished".into(),
                }
                .into());
            }
        };
        connected_s = Some(clock());
        let r = play(&mut session, &mut player, &mut conns, &clock, deadline).await;
        close(conns).await;
        r
    }
    .await;
    player.finish(clock());
    let switching = opts.switching.as_ref().map(|_| {
        let mut log = std::mem::take(&mut session.log);
        log.migrations = session.migrations.lock().unwrap().clone();
        if let Some(m) = &session.meter {
            log.progress = m.state.lock().unwrap().1.clone();
        }
        log
    });
    VideoReport {
        metrics: player.metrics(),
        segments: player.log().to_vec(),
        events: player.events().to_vec(),
        buffer_points: player.buffer_points().to_vec(),
        local_ports: session.ports,
        connected_s,
        error: result.err().map(|e| crate::stop::reason_of(&e)),
        switching,
        fec: (!session.fec.is_empty()).then(|| {
            let mut sum = crate::fec_socket::FecCounters::default();
            for f in &session.fec {
                sum.add(&f.final_counters());
            }
            sum
        }),
    }
}

async fn play(
    session: &mut Session<'_>,
    player: &mut Player,
    conns: &mut Conns,
    clock: &impl Fn() -> f64,
    deadline: tokio::time::Instant,
) -> Result<()> {
    let opts = session.opts;
    let parts = opts.spec.parts;
    loop {
        let now = clock();
        match player.next(now) {
            Action::Done => return Ok(()),
            Action::WaitUntil(t) => {
                let until =
                    tokio::time::Instant::now() + Duration::from_secs_f64((t - now).max(0.0));
                if until > deadline {
                    tokio::time::sleep_until(deadline).await;
                    return Err(TimeLimitReached {
                        limit: opts.limit,
                        what: format!(
                            "the video had not ended (media position {:.1} s of {:.1} s)",
                            player.position_s(),
                            opts.content.duration_s()
                        ),
                    }
                    .into());
                }
                tokio::time::sleep_until(until).await;
            }
            Action::Fetch { segment, level } => {
                let size = opts
                    .content
                    .size(level, segment)
                    .context("the player asked for a segment outside the content")?;
                let path = opts.content.path(level, segment);
                let requested = clock();
                let fetch = session.fetch_across_switches(conns, &path, size, parts);
                let bytes = match tokio::time::timeout_at(deadline, fetch).await {
                    Ok(r) => r.with_context(|| format!("segment {segment} at level {level}"))?,
                    Err(_) => {
                        return Err(TimeLimitReached {
                            limit: opts.limit,
                            what: format!(
                                "segment {segment} at level {level} ({size} B) had not arrived (media position {:.1} s)",
                                player.position_s()
                            ),
                        }
                        .into());
                    }
                };
                let mut done = clock();
                if opts.player.poll_s > 0.0 {
                    // The seed's player read its downloader's output at polls (`poll`): it
                    // learns of the segment at the first poll after the last byte.
                    let noticed =
                        quiclab_video::player::noticed_at(requested, done, opts.player.poll_s);
                    tokio::time::sleep(Duration::from_secs_f64((noticed - done).max(0.0))).await;
                    done = clock();
                }
                player.downloaded(
                    done,
                    Download {
                        bytes,
                        download_s: done - requested,
                        // Part i travels on connection i (h1); h2 and h3 have one connection.
                        connections: session.current.clone(),
                    },
                );
            }
        }
    }
}

impl Session<'_> {
    /// Fetches a segment; across switches, a segment lost to a stall or a failed connection is
    /// asked again, whole, on new connections (or, migrating, continues on the same one).
    async fn fetch_across_switches(
        &mut self,
        conns: &mut Conns,
        path: &str,
        size: u64,
        parts: u32,
    ) -> Result<u64> {
        let (Some(plan), Some(meter)) = (self.opts.switching.clone(), self.meter.clone()) else {
            return fetch_segment(conns, path, size, parts, None).await;
        };
        // A retry is not a new request: the pause it ends began with the segment's request.
        self.log.requests.push(plan.now_s());
        loop {
            let start = plan.now_s();
            let before = meter.bytes();
            // AStream's curl gave a TCP segment a whole-transfer limit; QUIC players have none.
            let transfer_limit = plan
                .transfer_timeout
                .filter(|_| self.opts.spec.proto != Protocol::H3)
                .map(|t| t.as_secs_f64());
            let watchdog = async {
                loop {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    let since = meter.last_arrival().map_or(start, |t| t.max(start));
                    if plan.now_s() - since >= plan.stall_timeout.as_secs_f64() {
                        return format!(
                            "no byte for {:.1} s (the stall timeout)",
                            plan.stall_timeout.as_secs_f64()
                        );
                    }
                    if let Some(limit) = transfer_limit
                        && plan.now_s() - start >= limit
                    {
                        return format!(
                            "the segment took longer than {limit:.1} s (the whole-transfer timeout)"
                        );
                    }
                }
            };
            let why = tokio::select! {
                r = fetch_segment(conns, path, size, parts, Some(&meter)) => match r {
                    Ok(n) => return Ok(n),
                    Err(e) => format!("{e:#}"),
                },
                why = watchdog => why,
            };
            let lost = meter.bytes() - before;
            self.log.refetched.push((plan.now_s(), lost));
            // A fresh set of connections from the current address; until one is up, again
            // (the new address may not be there yet, a handshake may stall).
            let mut why = why;
            let fresh = loop {
                let attempt = plan.now_s();
                match tokio::time::timeout(plan.stall_timeout, self.connect(&why)).await {
                    Ok(Ok(c)) => break c,
                    Ok(Err(e)) => why = format!("{e:#}"),
                    Err(_) => {
                        why = format!(
                            "connection set-up: nothing for {:.1} s (the stall timeout)",
                            plan.stall_timeout.as_secs_f64()
                        )
                    }
                }
                if plan.now_s() - attempt < 0.1 {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            };
            let old = std::mem::replace(conns, fresh);
            close(old).await;
        }
    }

    /// Opens the connections of the player's spec (from the client's current address across
    /// switches); `why`: `start`, or what ended the previous ones.
    async fn connect(&mut self, why: &str) -> Result<Conns> {
        let opts = self.opts;
        let plan = opts.switching.as_ref();
        let local: Option<IpAddr> = plan.map(|p| p.address_at(p.now_s())).transpose()?;
        let from_byte = self.meter.as_ref().map_or(0, |m| m.bytes());
        if plan.is_some_and(|p| p.on_switch != OnSwitch::Reconnect0rtt) {
            // Full handshakes: nothing is carried from one set of connections to the next.
            self.tls = TlsConfigs::default();
        }
        let n = match opts.spec.proto {
            Protocol::H1 => opts.spec.parts.max(1),
            Protocol::H2 | Protocol::H3 => 1,
        };
        let first = self.log.connections.len();
        if let Some(p) = plan {
            for _ in 0..n {
                self.log.connections.push(ConnectionRecord {
                    opened_s: p.now_s(),
                    local: local.map(|l| l.to_string()).unwrap_or_default(),
                    why: why.to_string(),
                    from_byte,
                    tickets_held: self.tls.tickets_held(),
                    ..Default::default()
                });
            }
        }
        let mut ports = Vec::new();
        let conns = match opts.spec.proto {
            Protocol::H1 | Protocol::H2 => {
                let h2 = opts.spec.proto == Protocol::H2;
                let config = self.tls.tcp(&opts.cert, opts.stack.tls, opts.spec.proto)?;
                // The connections are opened together, as a browser opens its pool.
                let mut tasks = Vec::new();
                for _ in 0..n {
                    let (server, cc, config) = (opts.server, opts.stack.tcp_cc, config.clone());
                    tasks.push(tokio::spawn(async move {
                        connect_tcp_tls_from(local, server, cc, config, std::time::Instant::now())
                            .await
                    }));
                }
                let mut streams = Vec::new();
                for (i, t) in tasks.into_iter().enumerate() {
                    let (stream, _) = t.await.context("connection task")??;
                    ports.push(stream.get_ref().0.local_addr()?.port());
                    let resumed =
                        stream.get_ref().1.handshake_kind() == Some(rustls::HandshakeKind::Resumed);
                    if let (Some(p), Some(c)) = (plan, self.log.connections.get_mut(first + i)) {
                        c.ready_s = Some(p.now_s());
                        c.resumed = resumed;
                    }
                    streams.push(stream);
                }
                if h2 {
                    let io = TokioIo::new(streams.pop().expect("one connection"));
                    let (sender, conn) =
                        hyper::client::conn::http2::Builder::new(TokioExecutor::new())
                            .initial_stream_window_size(16 << 20)
                            .initial_connection_window_size(32 << 20)
                            .handshake(io)
                            .await
                            .context("HTTP/2 handshake")?;
                    tokio::spawn(conn);
                    Conns::H2(sender)
                } else {
                    let mut senders = Vec::new();
                    for s in streams {
                        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(s))
                            .await
                            .context("HTTP/1.1 handshake")?;
                        tokio::spawn(conn);
                        senders.push(Some(sender));
                    }
                    Conns::H1(senders)
                }
            }
            Protocol::H3 => {
                let (endpoint, fec) = quic_client_endpoint_from(local, opts.server, &opts.stack)?;
                self.fec.extend(fec);
                ports.push(endpoint.local_addr()?.port());
                let early = plan.is_some_and(|p| p.on_switch == OnSwitch::Reconnect0rtt);
                let crypto = self.tls.quic(&opts.cert, early)?;
                let config = quic_client_config(crypto, &opts.stack, None)?;
                let connecting = endpoint.connect_with(config, opts.server, SERVER_NAME)?;
                let (conn, zero_rtt) = if early {
                    match connecting.into_0rtt() {
                        Ok((conn, _accepted)) => (conn, true),
                        Err(connecting) => (connecting.await.context("QUIC handshake")?, false),
                    }
                } else {
                    (connecting.await.context("QUIC handshake")?, false)
                };
                if let (Some(p), Some(c)) = (plan, self.log.connections.get_mut(first)) {
                    c.ready_s = Some(p.now_s());
                    c.resumed = zero_rtt;
                    c.zero_rtt = zero_rtt;
                }
                let (mut driver, sender) = h3::client::new(h3_quinn::Connection::new(conn.clone()))
                    .await
                    .context("HTTP/3 connection")?;
                let drive = tokio::spawn(async move {
                    let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
                });
                let migrator = plan
                    .filter(|p| p.on_switch == OnSwitch::Migrate)
                    .map(|p| p.spawn_migrator(endpoint.clone(), self.migrations.clone()));
                Conns::H3 {
                    sender,
                    conn,
                    endpoint,
                    drive,
                    migrator,
                }
            }
        };
        self.ports.extend(&ports);
        self.current = ports;
        Ok(conns)
    }
}

async fn close(conns: Conns) {
    if let Conns::H3 {
        sender,
        conn,
        endpoint,
        drive,
        migrator,
    } = conns
    {
        drop(sender);
        drive.abort();
        if let Some(m) = migrator {
            m.abort();
        }
        conn.close(H3_NO_ERROR, b"done");
        let _ = tokio::time::timeout(Duration::from_millis(200), endpoint.wait_idle()).await;
    }
    // TCP connections close when their senders drop.
}

/// Downloads `path` (`size` bytes) as `parts` Range requests at once; returns the body bytes.
/// The parts run as tasks of a set that is aborted when this future is dropped (a segment given
/// up after a stall leaves nothing behind). `meter` counts the bytes as they arrive.
async fn fetch_segment(
    conns: &mut Conns,
    path: &str,
    size: u64,
    parts: u32,
    meter: Option<&Arc<Meter>>,
) -> Result<u64> {
    let ranges: Vec<Option<(u64, u64)>> = if parts <= 1 {
        vec![None]
    } else {
        split_ranges(size, parts).into_iter().map(Some).collect()
    };
    let mut total = 0;
    match conns {
        Conns::H1(senders) => {
            let mut tasks = tokio::task::JoinSet::new();
            for (i, range) in ranges.iter().enumerate() {
                let mut sender = senders[i]
                    .take()
                    .context("an HTTP/1.1 connection is gone")?;
                let (path, range, meter) = (path.to_string(), *range, meter.cloned());
                tasks.spawn(async move {
                    let r = async {
                        sender.ready().await.context("HTTP/1.1 connection")?;
                        let req = request(Request::get(&path), range)
                            .header(http::header::HOST, SERVER_NAME)
                            .body(Empty::new())?;
                        let resp = sender.send_request(req).await?;
                        hyper_body(resp, range, &path, meter.as_deref()).await
                    }
                    .await;
                    (i, sender, r)
                });
            }
            while let Some(t) = tasks.join_next().await {
                let (i, sender, r) = t.context("a part's task ended abnormally")?;
                senders[i] = Some(sender);
                total += r?;
            }
        }
        Conns::H2(sender) => {
            let mut tasks = tokio::task::JoinSet::new();
            for range in ranges {
                let mut sender = sender.clone();
                let (path, meter) = (path.to_string(), meter.cloned());
                tasks.spawn(async move {
                    sender.ready().await.context("HTTP/2 connection")?;
                    let req = request(Request::get(format!("https://{SERVER_NAME}{path}")), range)
                        .body(Empty::new())?;
                    let resp = sender.send_request(req).await?;
                    hyper_body(resp, range, &path, meter.as_deref()).await
                });
            }
            while let Some(t) = tasks.join_next().await {
                total += t.context("a part's task ended abnormally")??;
            }
        }
        Conns::H3 { sender, .. } => {
            let mut tasks = tokio::task::JoinSet::new();
            for range in ranges {
                let mut sender = sender.clone();
                let (path, meter) = (path.to_string(), meter.cloned());
                tasks.spawn(async move {
                    let req = request(Request::get(format!("https://{SERVER_NAME}{path}")), range)
                        .body(())?;
                    let mut stream = sender.send_request(req).await?;
                    finish_h3_request(&mut stream).await?;
                    let resp = stream.recv_response().await?;
                    check_status(resp.status(), range, &path)?;
                    let mut n = 0u64;
                    while let Some(mut chunk) = stream.recv_data().await? {
                        let len = chunk.remaining() as u64;
                        n += len;
                        if let Some(m) = &meter {
                            m.add(len);
                        }
                        chunk.advance(chunk.remaining());
                    }
                    check_length(n, range, &path)?;
                    Ok::<u64, anyhow::Error>(n)
                });
            }
            while let Some(t) = tasks.join_next().await {
                total += t.context("a part's task ended abnormally")??;
            }
        }
    }
    if total != size {
        bail!("{path}: {total} bytes arrived of {size}");
    }
    Ok(total)
}

fn request(b: http::request::Builder, range: Option<(u64, u64)>) -> http::request::Builder {
    match range {
        Some((first, last)) => b.header(http::header::RANGE, format!("bytes={first}-{last}")),
        None => b,
    }
}

fn check_status(status: http::StatusCode, range: Option<(u64, u64)>, path: &str) -> Result<()> {
    let want = if range.is_some() { 206 } else { 200 };
    if status != want {
        bail!("the server answered {status} for {path} (expected {want})");
    }
    Ok(())
}

fn check_length(n: u64, range: Option<(u64, u64)>, path: &str) -> Result<()> {
    if let Some((first, last)) = range
        && n != last - first + 1
    {
        bail!(
            "{path} bytes={first}-{last}: {n} bytes arrived of {}",
            last - first + 1
        );
    }
    Ok(())
}

async fn hyper_body(
    resp: http::Response<hyper::body::Incoming>,
    range: Option<(u64, u64)>,
    path: &str,
    meter: Option<&Meter>,
) -> Result<u64> {
    check_status(resp.status(), range, path)?;
    let mut body = resp.into_body();
    let mut n = 0u64;
    while let Some(frame) = body.frame().await {
        if let Some(data) = frame?.data_ref() {
            n += data.len() as u64;
            if let Some(m) = meter {
                m.add(data.len() as u64);
            }
        }
    }
    check_length(n, range, path)?;
    Ok(n)
}
