//! `quiclab serve`: one process serving, on port 443 of the given addresses, HTTP/1.1 and HTTP/2
//! over TLS over TCP (chosen by ALPN; hyper + tokio-rustls) and HTTP/3 over QUIC (quinn + h3).
//!
//! Content: files of a directory, and synthetic `/bytes/<N>` resources of N bytes whose byte at
//! offset i is `i % 256` (so a client can verify what it got), with `Range` support.

use crate::qlog::{QlogFile, QlogHeader, TimeZero, Vantage};
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};

use anyhow::{Context, Result};
use bytes::{Bytes, BytesMut};
use http::{Request, Response, StatusCode};
use hyper::body::{Body, Frame, SizeHint};
use hyper_util::rt::{TokioExecutor, TokioIo};
use quiclab_proto::options::{LAB_LINK_MTU, QuicCongestion, QuicMtu, StackOptions, TcpCongestion};
use quiclab_proto::range;

use crate::tls::{self, LabCertificate};

/// The payload of a QUIC packet quiclab's stacks send unless `quic_mtu` says otherwise (1500-byte
/// MTU minus IPv6 and UDP headers), so the initial window of 10 packets is comparable with TCP's
/// 10 × 1448-byte segments.
pub const QUIC_MTU: u16 = quiclab_proto::options::QUIC_DEFAULT_UDP_PAYLOAD;

/// How long an HTTP/3 request task waits, once its response is sent, for the end of the request.
const REQUEST_END_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// How the server runs.
#[derive(Clone)]
pub struct ServerOptions {
    pub cert: LabCertificate,
    pub addresses: Vec<IpAddr>,
    pub port: u16,
    pub dir: Option<PathBuf>,
    /// TLS version, congestion controllers, QUIC's initial window.
    pub stack: StackOptions,
    /// Sample every connection's congestion state into this log.
    pub cwnd_log: Option<crate::cwnd::CwndLog>,
    /// Write a qlog of every QUIC connection into this directory (`server-<n>.sqlog`).
    pub qlog_dir: Option<PathBuf>,
    /// More ports, each with stack options of its own: a flow mix whose flows of one transport use
    /// different congestion controllers is served by one process, a port per configuration.
    pub extra_ports: Vec<(u16, StackOptions)>,
    /// Video contents served at `/video/<name>/<rep>/<n>` (synthetic bytes of each segment's
    /// size).
    pub videos: Arc<Vec<quiclab_video::Content>>,
    /// With FEC: write the QUIC endpoint's FEC counters here (JSON, rewritten every 100 ms).
    pub fec_log: Option<PathBuf>,
    /// Also serve plain HTTP/1.1 (no TLS) on this port of every address: AStream, the seed's
    /// player, fetches over urllib2 without TLS.
    pub plain_http_port: Option<u16>,
}

impl ServerOptions {
    /// A server of `/bytes/<N>` content on `addresses`:`port`: TLS 1.2 and 1.3, CUBIC for TCP and
    /// QUIC, an initial window of 10 packets, no logs. Set the public fields for anything else.
    pub fn new(cert: LabCertificate, addresses: Vec<IpAddr>, port: u16) -> ServerOptions {
        ServerOptions {
            cert,
            addresses,
            port,
            dir: None,
            stack: StackOptions::default(),
            cwnd_log: None,
            qlog_dir: None,
            extra_ports: Vec::new(),
            videos: Arc::default(),
            fec_log: None,
            plain_http_port: None,
        }
    }
}

/// Runs [`serve`] on a thread of its own (with its own runtime) and returns once it listens, or
/// with the reason it could not start; for tests and tools that need a server beside them. The
/// server runs until the process ends.
pub fn spawn_server(opts: ServerOptions) -> Result<()> {
    let (tx, rx) = std::sync::mpsc::channel();
    let failed = tx.clone();
    std::thread::Builder::new()
        .name("quiclab-server".into())
        .spawn(move || {
            let result = tokio::runtime::Runtime::new()
                .context("server runtime")
                .and_then(|rt| {
                    rt.block_on(serve(opts, move || {
                        let _ = tx.send(Ok(()));
                    }))
                });
            if let Err(e) = result {
                let _ = failed.send(Err(e));
            }
        })
        .context("starting the server thread")?;
    rx.recv_timeout(std::time::Duration::from_secs(10))
        .context("the server did not listen within 10 s")?
}

/// Binds every listener, calls `ready` once they all listen, then serves until the process ends.
pub async fn serve(opts: ServerOptions, ready: impl FnOnce()) -> Result<()> {
    let ports: Vec<(u16, StackOptions)> = std::iter::once((opts.port, opts.stack))
        .chain(opts.extra_ports.iter().copied())
        .collect();
    let mut tasks = tokio::task::JoinSet::new();
    let mut fec_sockets = Vec::new();
    for (port, stack) in ports {
        // Each port's connections see that port's stack options.
        let opts = Arc::new(ServerOptions {
            port,
            stack,
            extra_ports: Vec::new(),
            ..opts.clone()
        });
        let tcp_config = Arc::new(tls::tcp_server_config(&opts.cert, opts.stack.tls)?);
        let acceptor = tokio_rustls::TlsAcceptor::from(tcp_config);
        let quic_config = quic_server_config(&opts)?;
        for &ip in &opts.addresses {
            let addr = SocketAddr::new(ip, port);
            let listener = tcp_listener(addr, opts.stack.tcp_cc)?;
            let (endpoint, fec) =
                crate::fec_socket::quic_endpoint(addr, Some(quic_config.clone()), &opts.stack)
                    .with_context(|| format!("binding QUIC on UDP {addr}"))?;
            fec_sockets.extend(fec);
            tasks.spawn(accept_tcp(listener, acceptor.clone(), opts.clone()));
            tasks.spawn(accept_quic(endpoint, quic_config.clone(), opts.clone()));
        }
    }
    if let Some(port) = opts.plain_http_port {
        let plain = Arc::new(opts.clone());
        for &ip in &opts.addresses {
            let listener = tcp_listener(SocketAddr::new(ip, port), opts.stack.tcp_cc)?;
            tasks.spawn(accept_plain_http(listener, plain.clone()));
        }
    }
    if let Some(path) = &opts.fec_log
        && !fec_sockets.is_empty()
    {
        // One writer for every FEC socket (IPv4 and IPv6, every port): their counters summed.
        tasks.spawn(crate::fec_socket::log_counters(fec_sockets, path.clone()));
    }
    ready();
    while let Some(r) = tasks.join_next().await {
        r??;
    }
    Ok(())
}

fn tcp_listener(addr: SocketAddr, cc: TcpCongestion) -> Result<tokio::net::TcpListener> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )?;
    socket.set_reuse_address(true)?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    // Accepted sockets inherit the listener's congestion control; it is set again on each one.
    crate::sockopt::set_tcp_congestion(&socket, cc.kernel_name())?;
    socket
        .bind(&addr.into())
        .with_context(|| format!("binding TCP {addr}"))?;
    socket.listen(1024)?;
    socket.set_nonblocking(true)?;
    Ok(tokio::net::TcpListener::from_std(socket.into())?)
}

fn quic_server_config(opts: &ServerOptions) -> Result<quinn::ServerConfig> {
    let crypto =
        quinn::crypto::rustls::QuicServerConfig::try_from(tls::quic_server_config(&opts.cert)?)?;
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    config.transport_config(Arc::new(transport_config(&opts.stack, None)?));
    Ok(config)
}

/// QUIC transport parameters shared by server and client: the datagram size (`quic_mtu`), the
/// congestion controller, its initial window in packets of that size, and generous flow-control windows (so that, as with TCP's
/// autotuning, the congestion controller and not flow control limits a bulk transfer). With
/// `qlog`, the connection's events are written there (a JSON-SEQ qlog, openable in qvis).
pub fn transport_config(
    stack: &StackOptions,
    qlog: Option<QlogFile<'_>>,
) -> Result<quinn::TransportConfig> {
    let (cc, iw_packets) = (stack.quic_cc, stack.initial_window_packets);
    let parity_group = stack.fec.filter(|f| f.in_cwnd).map(|f| f.group);
    let mut t = transport_config_for(
        cc,
        iw_packets,
        stack.gquic_n,
        stack.quic_mtu.initial,
        parity_group,
        qlog,
    )?;
    // Flow control (`quic_stream_window`, `quic_window`; both at most 1 GB, checked when the
    // run was built).
    let window = |bytes: u64| {
        quinn::VarInt::from_u64(bytes)
            .map_err(|_| anyhow::anyhow!("a QUIC window of {bytes} bytes"))
    };
    t.stream_receive_window(window(stack.quic_windows.stream)?);
    t.receive_window(window(stack.quic_windows.connection)?);
    // `quic_ack_frequency`: ask the peer to acknowledge every N-th ack-eliciting packet (its
    // threshold is the packets it may receive *without* acknowledging: N − 1).
    if let Some(n) = stack.quic_ack_frequency {
        let mut a = quinn::AckFrequencyConfig::default();
        a.ack_eliciting_threshold(quinn::VarInt::from_u32(n.saturating_sub(1)));
        t.ack_frequency_config(Some(a));
    }
    // With FEC, the FEC header (at most quiclab_fec::MAX_HEADER bytes) rides inside the same
    // UDP payload budget: quinn's packets shrink so that no datagram exceeds `quic_mtu`.
    let header = if stack.fec.is_some() {
        quiclab_fec::MAX_HEADER as u16
    } else {
        0
    };
    let QuicMtu { initial, discover } = stack.quic_mtu;
    let initial = initial.saturating_sub(header);
    // quinn raises an initial size below its min_mtu (RFC 9000's 1200) to it; the scenario's
    // checks keep quic_mtu, less the FEC header, at 1200 or more.
    t.initial_mtu(initial);
    if discover {
        // Probe up to the largest payload a lab link carries over IPv4; IPv6 probes above its
        // own limit are lost, which is how PMTU discovery learns it.
        let mut d = quinn::MtuDiscoveryConfig::default();
        d.upper_bound(
            quiclab_proto::options::max_udp_payload(LAB_LINK_MTU, false).saturating_sub(header),
        );
        t.mtu_discovery_config(Some(d));
    } else {
        t.mtu_discovery_config(None);
    }
    Ok(t)
}

fn transport_config_for(
    cc: QuicCongestion,
    iw_packets: u64,
    gquic_n: u32,
    datagram: u16,
    parity_group: Option<u8>,
    qlog: Option<QlogFile<'_>>,
) -> Result<quinn::TransportConfig> {
    let mut t = quinn::TransportConfig::default();
    if let Some(QlogFile { path, vantage }) = qlog {
        let file = quiclab_outputs::create_in_claimed(path)
            .with_context(|| format!("creating qlog {}", path.display()))?;
        // Time zero of the trace, on the wall clock and CLOCK_MONOTONIC (crate::qlog).
        let (start, zero) = (std::time::Instant::now(), TimeZero::now());
        let writer = QlogHeader::new(std::io::BufWriter::new(file), vantage, zero);
        let mut q = quinn::QlogConfig::default();
        q.writer(Box::new(writer))
            .title(Some(format!("quiclab {}", path.display())))
            .start_time(start);
        t.qlog_stream(q.into_stream());
    }
    // The initial window is counted in packets of the size QUIC sends (1452 B unless quic_mtu).
    let iw = iw_packets * datagram as u64;
    let factory: Arc<dyn quinn::congestion::ControllerFactory + Send + Sync> = match cc {
        QuicCongestion::Cubic => {
            let mut c = quinn::congestion::CubicConfig::default();
            c.initial_window(iw);
            Arc::new(c)
        }
        QuicCongestion::NewReno => {
            let mut c = quinn::congestion::NewRenoConfig::default();
            c.initial_window(iw);
            Arc::new(c)
        }
        QuicCongestion::Bbr => {
            let mut c = quinn::congestion::BbrConfig::default();
            c.initial_window(iw);
            Arc::new(c)
        }
        QuicCongestion::GquicCubic => crate::gquic::factory(gquic_n, iw_packets)?,
    };
    // gQUIC's FEC packets were counted in flight: data gets N/(N+1) of whatever window the
    // controller grants (`fec_in_cwnd`).
    let factory: Arc<dyn quinn::congestion::ControllerFactory + Send + Sync> = match parity_group {
        Some(group) => Arc::new(quiclab_cc::ParityShareConfig {
            inner: factory,
            group,
        }),
        None => factory,
    };
    t.congestion_controller_factory(factory);
    t.send_window(32 << 20);
    t.max_idle_timeout(Some(std::time::Duration::from_secs(30).try_into()?));
    Ok(t)
}

async fn accept_tcp(
    listener: tokio::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    opts: Arc<ServerOptions>,
) -> Result<()> {
    loop {
        let (stream, peer) = listener.accept().await?;
        let acceptor = acceptor.clone();
        let opts = opts.clone();
        tokio::spawn(async move {
            let _ = stream.set_nodelay(true);
            let _ = crate::sockopt::set_tcp_congestion(&stream, opts.stack.tcp_cc.kernel_name());
            let fd = std::os::fd::AsRawFd::as_raw_fd(&stream);
            let Ok(tls) = acceptor.accept(stream).await else {
                return;
            };
            let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
            let service_opts = opts.clone();
            let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let opts = service_opts.clone();
                async move { Ok::<_, Infallible>(reply_hyper(&opts, req).await) }
            });
            let io = TokioIo::new(tls);
            let serving: Pin<Box<dyn std::future::Future<Output = ()> + Send>> = if h2 {
                Box::pin(async move {
                    let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                        .initial_stream_window_size(16 << 20)
                        .initial_connection_window_size(32 << 20)
                        .serve_connection(io, service)
                        .await;
                })
            } else {
                Box::pin(async move {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(io, service)
                        .await;
                })
            };
            match &opts.cwnd_log {
                None => serving.await,
                Some(log) => {
                    // Sampled in this task, alongside the connection that owns the socket: the fd
                    // cannot be closed (and reused) while a sample is taken.
                    let conn = log.connection_id();
                    let mut tick = tokio::time::interval(crate::cwnd::SAMPLE_INTERVAL);
                    tokio::pin!(serving);
                    loop {
                        tokio::select! {
                            _ = &mut serving => break,
                            _ = tick.tick() => log.sample_tcp(conn, peer.port(), fd),
                        }
                    }
                }
            }
        });
    }
}

/// Plain HTTP/1.1 without TLS, for AStream (its urllib2 client; the seed served it plain
/// HTTP). Its connections are not sampled into the cwnd log.
async fn accept_plain_http(
    listener: tokio::net::TcpListener,
    opts: Arc<ServerOptions>,
) -> Result<()> {
    loop {
        let (stream, _) = listener.accept().await?;
        let opts = opts.clone();
        tokio::spawn(async move {
            let _ = stream.set_nodelay(true);
            let _ = crate::sockopt::set_tcp_congestion(&stream, opts.stack.tcp_cc.kernel_name());
            let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let opts = opts.clone();
                async move { Ok::<_, Infallible>(reply_hyper(&opts, req).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn accept_quic(
    endpoint: quinn::Endpoint,
    config: quinn::ServerConfig,
    opts: Arc<ServerOptions>,
) -> Result<()> {
    let mut count = 0u64;
    while let Some(incoming) = endpoint.accept().await {
        let opts = opts.clone();
        // A qlog needs a transport configuration (and so a server configuration) of its own.
        let per_connection = match &opts.qlog_dir {
            Some(dir) => {
                let mut c = config.clone();
                let path = dir.join(format!("server-{count}.sqlog"));
                let qlog = QlogFile {
                    path: &path,
                    vantage: Vantage::Server,
                };
                c.transport_config(Arc::new(transport_config(&opts.stack, Some(qlog))?));
                Some(Arc::new(c))
            }
            None => None,
        };
        count += 1;
        tokio::spawn(async move {
            let accepted = match per_connection {
                Some(c) => incoming.accept_with(c),
                None => incoming.accept(),
            };
            let Ok(mut connecting) = accepted else {
                return;
            };
            // Wait for the whole ClientHello first. Chromium's ClientHello (with its post-quantum
            // key share) spans two Initial packets; a 0.5-RTT connection made after the first one
            // could leave h3's control-stream set-up blocked for good (seen: 1 page load in 6
            // hung until Chromium gave up). 0-RTT data still arrives with the ClientHello.
            if connecting.handshake_data().await.is_err() {
                return;
            }
            // Accept 0-RTT data when the client offers it.
            let conn = match connecting.into_0rtt() {
                Ok((conn, _accepted)) => conn,
                Err(connecting) => match connecting.await {
                    Ok(c) => c,
                    Err(_) => return,
                },
            };
            if let Some(log) = opts.cwnd_log.clone() {
                let conn = conn.clone();
                tokio::spawn(async move {
                    let id = log.connection_id();
                    let mut tick = tokio::time::interval(crate::cwnd::SAMPLE_INTERVAL);
                    loop {
                        tokio::select! {
                            _ = conn.closed() => break,
                            _ = tick.tick() => log.sample_quic(id, &conn),
                        }
                    }
                });
            }
            let mut h3 = match h3::server::Connection::<_, Bytes>::new(h3_quinn::Connection::new(
                conn,
            ))
            .await
            {
                Ok(h3) => h3,
                Err(e) => {
                    eprintln!("quiclab serve: h3 connection set-up failed: {e}");
                    return;
                }
            };
            loop {
                let resolver = match h3.accept().await {
                    Ok(Some(r)) => r,
                    Ok(None) => break,
                    // A client's normal close is no news.
                    Err(e) if e.is_h3_no_error() => break,
                    Err(e) => {
                        eprintln!("quiclab serve: h3 connection ended: {e}");
                        break;
                    }
                };
                let opts = opts.clone();
                tokio::spawn(async move {
                    let (req, mut stream) = match resolver.resolve_request().await {
                        Ok(r) => r,
                        Err(e) => {
                            eprintln!("quiclab serve: h3 request: {e}");
                            return;
                        }
                    };
                    let reply = resolve(&opts, req.uri().path(), range_header(req.headers())).await;
                    let mut resp = Response::builder().status(reply.status);
                    for (k, v) in &reply.headers {
                        resp = resp.header(*k, v);
                    }
                    if stream
                        .send_response(resp.body(()).expect("valid response"))
                        .await
                        .is_err()
                    {
                        return;
                    }
                    let mut body = reply.body;
                    while let Some(chunk) = body.next_chunk() {
                        if stream.send_data(chunk).await.is_err() {
                            return;
                        }
                    }
                    let _ = stream.finish().await;
                    // Read the request to its end before dropping the stream: dropping quinn's
                    // receive side unread sends STOP_SENDING (code 0, not even H3_NO_ERROR), which
                    // fails the client's FIN if it has not gone out yet. The FIN is normally
                    // already here; the bound only keeps a silent client from holding the task.
                    let _ = tokio::time::timeout(REQUEST_END_WAIT, async {
                        while let Ok(Some(_)) = stream.recv_data().await {}
                    })
                    .await;
                });
            }
        });
    }
    Ok(())
}

fn range_header(headers: &http::HeaderMap) -> Option<String> {
    headers
        .get(http::header::RANGE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

async fn reply_hyper(
    opts: &ServerOptions,
    req: Request<hyper::body::Incoming>,
) -> Response<ReplyBody> {
    let reply = resolve(opts, req.uri().path(), range_header(req.headers())).await;
    let mut resp = Response::builder().status(reply.status);
    for (k, v) in &reply.headers {
        resp = resp.header(*k, v);
    }
    if opts.stack.alt_svc {
        resp = resp.header(http::header::ALT_SVC, alt_svc_value(opts.port));
    }
    resp.body(reply.body).expect("valid response")
}

/// What HTTP/1.1 and HTTP/2 responses advertise (RFC 7838): HTTP/3 on the same port over UDP,
/// for a day — as servers that offer HTTP/3 do, and how a browser discovers it.
pub fn alt_svc_value(port: u16) -> String {
    format!("h3=\":{port}\"; ma=86400")
}

/// What to answer.
pub struct Reply {
    pub status: StatusCode,
    pub headers: Vec<(&'static str, String)>,
    pub body: ReplyBody,
}

/// Decides the answer to a GET of `path` (with an optional Range header).
pub async fn resolve(opts: &ServerOptions, path: &str, range_hdr: Option<String>) -> Reply {
    let not_found = || Reply {
        status: StatusCode::NOT_FOUND,
        headers: vec![("content-length", "10".into())],
        body: ReplyBody::bytes(Bytes::from_static(b"not found\n")),
    };
    let (content_type, content) = if let Some(n) = range::parse_bytes_path(path) {
        ("application/octet-stream", Content::Pattern(n))
    } else if let Some(resource) = quiclab_video::astream::resolve(&opts.videos, path) {
        match resource {
            quiclab_video::astream::Resource::Mpd(text) => {
                ("application/dash+xml", Content::File(Bytes::from(text)))
            }
            quiclab_video::astream::Resource::Bytes(n) => ("video/mp4", Content::Pattern(n)),
        }
    } else if let Some((name, rep, n)) = quiclab_video::content::parse_segment_path(path) {
        match opts
            .videos
            .iter()
            .find(|c| c.name == name)
            .and_then(|c| c.size(rep, n))
        {
            Some(size) => ("video/mp4", Content::Pattern(size)),
            None => return not_found(),
        }
    } else {
        match read_file(opts.dir.as_deref(), path).await {
            Some((ct, data)) => (ct, Content::File(data)),
            None => return not_found(),
        }
    };
    let length = content.len();
    let mut headers = vec![
        ("content-type", content_type.to_string()),
        ("accept-ranges", "bytes".to_string()),
        // A sharded page's objects come from other origins than the page: without this a
        // browser's Resource Timing hides their phases, sizes and protocol.
        ("timing-allow-origin", "*".to_string()),
    ];
    let (status, first, last) = match range_hdr.map(|h| range::parse_range(&h, length)) {
        Some(Ok(Some((first, last)))) => {
            headers.push(("content-range", range::content_range(first, last, length)));
            (StatusCode::PARTIAL_CONTENT, first, last + 1)
        }
        Some(Err(e)) => {
            headers.push(("content-range", e.content_range()));
            headers.push(("content-length", "0".into()));
            return Reply {
                status: StatusCode::RANGE_NOT_SATISFIABLE,
                headers,
                body: ReplyBody::bytes(Bytes::new()),
            };
        }
        _ => (StatusCode::OK, 0, length),
    };
    headers.push(("content-length", (last - first).to_string()));
    let body = match content {
        Content::Pattern(_) => ReplyBody::pattern(first, last),
        Content::File(data) => ReplyBody::bytes(data.slice(first as usize..last as usize)),
    };
    Reply {
        status,
        headers,
        body,
    }
}

enum Content {
    Pattern(u64),
    File(Bytes),
}

impl Content {
    fn len(&self) -> u64 {
        match self {
            Content::Pattern(n) => *n,
            Content::File(b) => b.len() as u64,
        }
    }
}

async fn read_file(dir: Option<&Path>, path: &str) -> Option<(&'static str, Bytes)> {
    let dir = dir?;
    let rel = path.trim_start_matches('/');
    let rel = if rel.is_empty() { "index.html" } else { rel };
    // No way out of the directory.
    if rel.split('/').any(|c| c == ".." || c.starts_with('.')) {
        return None;
    }
    let full = dir.join(rel);
    let data = tokio::fs::read(&full).await.ok()?;
    // The page corpus's table, so that every object of a page is served with the type its
    // `PageSpec` declares; the video types (DASH segments and manifests) are not web-page objects
    // and stay here.
    let ct = match quiclab_page::content_type_for_path(path) {
        "application/octet-stream" => {
            match full.extension().and_then(|e| e.to_str()).unwrap_or("") {
                "mp4" | "m4s" => "video/mp4",
                "mpd" => "application/dash+xml",
                _ => "application/octet-stream",
            }
        }
        ct => ct,
    };
    Some((ct, Bytes::from(data)))
}

/// Chunk size of synthetic bodies.
const CHUNK: usize = 64 * 1024;

/// A response body: either bytes in memory or the `/bytes/<N>` pattern, produced in chunks.
pub struct ReplyBody {
    data: Option<Bytes>,
    /// Pattern range still to send: [next, end).
    next: u64,
    end: u64,
    pattern: Bytes,
}

impl ReplyBody {
    fn bytes(b: Bytes) -> ReplyBody {
        ReplyBody {
            data: Some(b),
            next: 0,
            end: 0,
            pattern: Bytes::new(),
        }
    }

    fn pattern(first: u64, end: u64) -> ReplyBody {
        // CHUNK + 256 bytes of 0..=255 repeated: any chunk starting at offset o is a slice of it.
        let mut p = BytesMut::with_capacity(CHUNK + 256);
        for i in 0..CHUNK + 256 {
            p.extend_from_slice(&[(i % 256) as u8]);
        }
        ReplyBody {
            data: None,
            next: first,
            end,
            pattern: p.freeze(),
        }
    }

    /// The next chunk, or None at the end.
    pub fn next_chunk(&mut self) -> Option<Bytes> {
        if let Some(d) = self.data.take() {
            return (!d.is_empty()).then_some(d);
        }
        if self.next >= self.end {
            return None;
        }
        let n = ((self.end - self.next) as usize).min(CHUNK);
        let start = (self.next % 256) as usize;
        self.next += n as u64;
        Some(self.pattern.slice(start..start + n))
    }

    fn remaining(&self) -> u64 {
        self.data.as_ref().map_or(0, |d| d.len() as u64) + (self.end - self.next.min(self.end))
    }
}

impl Body for ReplyBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut TaskContext<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(self.next_chunk().map(|c| Ok(Frame::data(c))))
    }

    fn is_end_stream(&self) -> bool {
        self.remaining() == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining())
    }
}

/// The byte a `/bytes/<N>` resource holds at `offset` (for clients that verify content).
pub fn pattern_byte(offset: u64) -> u8 {
    (offset % 256) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_bodies_hold_the_offset_pattern_in_chunks() {
        let mut b = ReplyBody::pattern(300, 300 + 200_000);
        assert_eq!(b.remaining(), 200_000);
        let mut offset = 300u64;
        while let Some(c) = b.next_chunk() {
            assert!(c.len() <= CHUNK);
            for (i, &byte) in c.iter().enumerate() {
                assert_eq!(byte, pattern_byte(offset + i as u64));
            }
            offset += c.len() as u64;
        }
        assert_eq!(offset, 300 + 200_000);
        assert!(b.is_end_stream());
    }
}
