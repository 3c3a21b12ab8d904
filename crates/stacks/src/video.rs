//! The video client: drives a [`quiclab_video::Player`] with real downloads. It opens the
//! player's connections once (h1/K: K persistent TLS/TCP connections; h2/K: one connection, K
//! parallel requests; h3/K: one QUIC connection, K parallel requests), then asks the player what
//! to do, fetches each segment as K equal Range parts at once (a whole GET when K = 1), and tells
//! the player when it arrived. The player's clock is seconds since the mix's start on
//! CLOCK_MONOTONIC, so its series line up with the emulator's.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use bytes::{Buf, Bytes};
use http::Request;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use quiclab_proto::options::{Protocol, StackOptions};
use quiclab_video::{
    Abr, AbrKind, Action, Content, Download, Player, PlayerConfig, PlayerEvent, PlayerMetrics,
    PlayerSpec, SegmentRecord, split_ranges,
};
use serde::{Deserialize, Serialize};

use crate::client::{
    H3_NO_ERROR, connect_tcp_tls, finish_h3_request, quic_client_config, quic_client_crypto,
    quic_client_endpoint,
};
use crate::cwnd::monotonic_ns;
use crate::tls::{self, LabCertificate, SERVER_NAME};

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
}

/// What one player did.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VideoReport {
    pub metrics: PlayerMetrics,
    pub segments: Vec<SegmentRecord>,
    pub events: Vec<PlayerEvent>,
    /// (seconds since the origin, buffer in seconds).
    pub buffer_points: Vec<(f64, f64)>,
    /// The client ports of the player's connections (the flows' keys at the emulator).
    pub local_ports: Vec<u16>,
    /// Connection set-up done (s since the origin).
    pub connected_s: Option<f64>,
    /// Why the player stopped before the end of the content.
    pub error: Option<String>,
}

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
    },
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
    let mut ports = Vec::new();
    let mut connected_s = None;
    let result: Result<()> = async {
        let mut conns = match tokio::time::timeout_at(deadline, connect(opts, &mut ports)).await {
            Ok(c) => c?,
            Err(_) => bail!("connection set-up did not finish within the time limit"),
        };
        connected_s = Some(clock());
        let r = play(opts, &mut player, &mut conns, &ports, &clock, deadline).await;
        close(conns).await;
        r
    }
    .await;
    player.finish(clock());
    VideoReport {
        metrics: player.metrics(),
        segments: player.log().to_vec(),
        events: player.events().to_vec(),
        buffer_points: player.buffer_points().to_vec(),
        local_ports: ports,
        connected_s,
        error: result.err().map(|e| format!("{e:#}")),
    }
}

async fn play(
    opts: &VideoOptions,
    player: &mut Player,
    conns: &mut Conns,
    ports: &[u16],
    clock: &impl Fn() -> f64,
    deadline: tokio::time::Instant,
) -> Result<()> {
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
                    bail!(
                        "the video had not ended at the time limit ({:.1} s; media position {:.1} s of {:.1} s)",
                        opts.limit.as_secs_f64(),
                        player.position_s(),
                        opts.content.duration_s()
                    );
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
                let fetch = fetch_segment(conns, &path, size, parts);
                let bytes = match tokio::time::timeout_at(deadline, fetch).await {
                    Ok(r) => r.with_context(|| format!("segment {segment} at level {level}"))?,
                    Err(_) => bail!(
                        "segment {segment} at level {level} ({size} B) had not arrived at the time limit ({:.1} s); media position {:.1} s",
                        opts.limit.as_secs_f64(),
                        player.position_s()
                    ),
                };
                let done = clock();
                player.downloaded(
                    done,
                    Download {
                        bytes,
                        download_s: done - requested,
                        // Part i travels on connection i (h1); h2 and h3 have one connection.
                        connections: ports.iter().take(parts.max(1) as usize).copied().collect(),
                    },
                );
            }
        }
    }
}

/// Opens the connections of the player's spec.
async fn connect(opts: &VideoOptions, ports: &mut Vec<u16>) -> Result<Conns> {
    match opts.spec.proto {
        Protocol::H1 | Protocol::H2 => {
            let h2 = opts.spec.proto == Protocol::H2;
            let alpn: &[u8] = if h2 { b"h2" } else { b"http/1.1" };
            let config = Arc::new(tls::client_config(
                &opts.cert,
                opts.stack.tls,
                alpn,
                false,
                Arc::default(),
            )?);
            let n = if h2 { 1 } else { opts.spec.parts };
            // The connections are opened together, as a browser opens its pool.
            let mut tasks = Vec::new();
            for _ in 0..n {
                let (server, cc, config) = (opts.server, opts.stack.tcp_cc, config.clone());
                tasks.push(tokio::spawn(async move {
                    connect_tcp_tls(server, cc, config, std::time::Instant::now()).await
                }));
            }
            let mut streams = Vec::new();
            for t in tasks {
                let (stream, _) = t.await.context("connection task")??;
                ports.push(stream.get_ref().0.local_addr()?.port());
                streams.push(stream);
            }
            if h2 {
                let io = TokioIo::new(streams.pop().expect("one connection"));
                let (sender, conn) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
                    .initial_stream_window_size(16 << 20)
                    .initial_connection_window_size(32 << 20)
                    .handshake(io)
                    .await
                    .context("HTTP/2 handshake")?;
                tokio::spawn(conn);
                Ok(Conns::H2(sender))
            } else {
                let mut senders = Vec::new();
                for s in streams {
                    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(s))
                        .await
                        .context("HTTP/1.1 handshake")?;
                    tokio::spawn(conn);
                    senders.push(Some(sender));
                }
                Ok(Conns::H1(senders))
            }
        }
        Protocol::H3 => {
            let endpoint = quic_client_endpoint(opts.server)?;
            ports.push(endpoint.local_addr()?.port());
            let crypto = quic_client_crypto(&opts.cert, false, Arc::default())?;
            let config = quic_client_config(crypto, &opts.stack, None)?;
            let conn = endpoint
                .connect_with(config, opts.server, SERVER_NAME)?
                .await
                .context("QUIC handshake")?;
            let (mut driver, sender) = h3::client::new(h3_quinn::Connection::new(conn.clone()))
                .await
                .context("HTTP/3 connection")?;
            let drive = tokio::spawn(async move {
                let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
            });
            Ok(Conns::H3 {
                sender,
                conn,
                endpoint,
                drive,
            })
        }
    }
}

async fn close(conns: Conns) {
    if let Conns::H3 {
        sender,
        conn,
        endpoint,
        drive,
    } = conns
    {
        drop(sender);
        drive.abort();
        conn.close(H3_NO_ERROR, b"done");
        let _ = tokio::time::timeout(Duration::from_millis(200), endpoint.wait_idle()).await;
    }
    // TCP connections close when their senders drop.
}

/// Downloads `path` (`size` bytes) as `parts` Range requests at once; returns the body bytes.
async fn fetch_segment(conns: &mut Conns, path: &str, size: u64, parts: u32) -> Result<u64> {
    let ranges: Vec<Option<(u64, u64)>> = if parts <= 1 {
        vec![None]
    } else {
        split_ranges(size, parts).into_iter().map(Some).collect()
    };
    let mut total = 0;
    match conns {
        Conns::H1(senders) => {
            let mut tasks = Vec::new();
            for (i, range) in ranges.iter().enumerate() {
                let mut sender = senders[i]
                    .take()
                    .context("an HTTP/1.1 connection is gone")?;
                let (path, range) = (path.to_string(), *range);
                tasks.push(tokio::spawn(async move {
                    let r = async {
                        sender.ready().await.context("HTTP/1.1 connection")?;
                        let req = request(Request::get(&path), range)
                            .header(http::header::HOST, SERVER_NAME)
                            .body(Empty::new())?;
                        let resp = sender.send_request(req).await?;
                        hyper_body(resp, range, &path).await
                    }
                    .await;
                    (sender, r)
                }));
            }
            for (i, t) in tasks.into_iter().enumerate() {
                let (sender, r) = t.await.context("a part's task ended abnormally")?;
                senders[i] = Some(sender);
                total += r?;
            }
        }
        Conns::H2(sender) => {
            let mut tasks = Vec::new();
            for range in ranges {
                let mut sender = sender.clone();
                let path = path.to_string();
                tasks.push(tokio::spawn(async move {
                    sender.ready().await.context("HTTP/2 connection")?;
                    let req = request(Request::get(format!("https://{SERVER_NAME}{path}")), range)
                        .body(Empty::new())?;
                    let resp = sender.send_request(req).await?;
                    hyper_body(resp, range, &path).await
                }));
            }
            for t in tasks {
                total += t.await.context("a part's task ended abnormally")??;
            }
        }
        Conns::H3 { sender, .. } => {
            let mut tasks = Vec::new();
            for range in ranges {
                let mut sender = sender.clone();
                let path = path.to_string();
                tasks.push(tokio::spawn(async move {
                    let req = request(Request::get(format!("https://{SERVER_NAME}{path}")), range)
                        .body(())?;
                    let mut stream = sender.send_request(req).await?;
                    finish_h3_request(&mut stream).await?;
                    let resp = stream.recv_response().await?;
                    check_status(resp.status(), range, &path)?;
                    let mut n = 0u64;
                    while let Some(mut chunk) = stream.recv_data().await? {
                        n += chunk.remaining() as u64;
                        chunk.advance(chunk.remaining());
                    }
                    check_length(n, range, &path)?;
                    Ok::<u64, anyhow::Error>(n)
                }));
            }
            for t in tasks {
                total += t.await.context("a part's task ended abnormally")??;
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
) -> Result<u64> {
    check_status(resp.status(), range, path)?;
    let mut body = resp.into_body();
    let mut n = 0u64;
    while let Some(frame) = body.frame().await {
        if let Some(data) = frame?.data_ref() {
            n += data.len() as u64;
        }
    }
    check_length(n, range, path)?;
    Ok(n)
}
