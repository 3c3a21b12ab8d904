//! `quiclab fetch`: requests URLs over one protocol and records, per connection and per request,
//! when each step happened (milliseconds from navigation start, before any socket exists).
//!
//! `--resume` / `--0rtt`: a warm-up connection first obtains a session ticket; it is closed, and the
//! second connection — the one reported — resumes (and with `--0rtt`, sends its request in 0-RTT).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use bytes::{Buf, Bytes};
use http::Request;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use quiclab_model::endpoint::QuicCounters;
use quiclab_proto::options::{Protocol, StackOptions, TcpCongestion};
use serde::{Deserialize, Serialize};

use crate::fec_socket::FecSocket;
use crate::server::{pattern_byte, transport_config};
use crate::tls::{self, LabCertificate, SERVER_NAME};

/// What to fetch and how.
#[derive(Clone)]
pub struct FetchOptions {
    pub cert: LabCertificate,
    pub server: SocketAddr,
    pub protocol: Protocol,
    pub paths: Vec<String>,
    /// TLS version, congestion controllers, QUIC's initial window.
    pub stack: StackOptions,
    pub resume: bool,
    pub zero_rtt: bool,
    /// Check `/bytes/<N>` bodies byte by byte.
    pub verify: bool,
    /// Write a qlog of each QUIC connection here (`client-warmup.sqlog`, `client.sqlog`).
    pub qlog_dir: Option<std::path::PathBuf>,
    pub timeout: Duration,
}

/// One connection's milestones (ms since the measured connection's start).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ConnectionTiming {
    pub tcp_connect_ms: Option<f64>,
    pub handshake_ms: f64,
    pub protocol: String,
    pub tls_version: String,
    pub resumed: bool,
    pub zero_rtt_accepted: bool,
    /// TLS 1.3 session tickets the client held before this connection (from the warm-up).
    pub tickets_held: u64,
}

/// One request's milestones (ms since the measured connection's start).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RequestTiming {
    pub path: String,
    pub status: u16,
    pub request_sent_ms: f64,
    pub first_byte_ms: f64,
    pub last_byte_ms: f64,
    pub bytes: u64,
    /// Some(true) when a `/bytes/<N>` body was checked and correct.
    pub verified: Option<bool>,
    /// The response's `alt-svc` header (how an HTTP/1.1 or HTTP/2 server advertises HTTP/3).
    #[serde(default)]
    pub alt_svc: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct FetchReport {
    pub connection: ConnectionTiming,
    pub requests: Vec<RequestTiming>,
    pub total_ms: f64,
    pub bytes: u64,
    /// The client's FEC counters (what it received and rebuilt), with FEC.
    #[serde(default)]
    pub fec: Option<crate::fec_socket::FecCounters>,
    /// quinn's counts of the client's QUIC connections, the warm-up's included (h3 only).
    #[serde(default)]
    pub quic: Option<QuicCounters>,
}

impl FetchReport {
    /// `quiclab fetch`'s text: the connection, then one line per request.
    pub fn text(&self, server: SocketAddr) -> String {
        use std::fmt::Write;
        let report = self;
        let mut text = String::new();
        writeln!(
            text,
            "{} over {} (TLS {}{}{}): handshake {:.1} ms",
            server,
            report.connection.protocol,
            report.connection.tls_version,
            if report.connection.resumed {
                ", resumed"
            } else {
                ""
            },
            if report.connection.zero_rtt_accepted {
                ", 0-RTT accepted"
            } else {
                ""
            },
            report.connection.handshake_ms
        )
        .expect("writing to a String");
        for r in &report.requests {
            writeln!(
                text,
                "  {} {}: {} bytes, first byte {:.1} ms, last byte {:.1} ms{}",
                r.status,
                r.path,
                r.bytes,
                r.first_byte_ms,
                r.last_byte_ms,
                match r.verified {
                    Some(true) => ", content verified",
                    Some(false) => ", CONTENT WRONG",
                    None => "",
                }
            )
            .expect("writing to a String");
        }
        text
    }
}

/// Runs the fetch (with a warm-up connection first when resuming).
pub async fn fetch(opts: &FetchOptions) -> Result<FetchReport> {
    let run = async {
        match opts.protocol {
            Protocol::H1 | Protocol::H2 => fetch_tcp(opts).await,
            Protocol::H3 => fetch_quic(opts).await,
        }
    };
    tokio::time::timeout(opts.timeout, run)
        .await
        .with_context(|| format!("the fetch did not finish within {:?}", opts.timeout))?
}

pub(crate) fn ms(t0: Instant) -> f64 {
    t0.elapsed().as_secs_f64() * 1e3
}

fn verify_pattern(path: &str, offset: u64, chunk: &[u8]) -> bool {
    quiclab_proto::range::parse_bytes_path(path).is_none()
        || chunk
            .iter()
            .enumerate()
            .all(|(i, &b)| b == pattern_byte(offset + i as u64))
}

async fn fetch_tcp(opts: &FetchOptions) -> Result<FetchReport> {
    let alpn: &[u8] = if opts.protocol == Protocol::H2 {
        b"h2"
    } else {
        b"http/1.1"
    };
    // One config for warm-up and measurement: it holds the session cache.
    let store = Arc::new(tls::CountingSessionStore::default());
    let config = Arc::new(tls::client_config(
        &opts.cert,
        opts.stack.tls,
        alpn,
        false,
        store.clone(),
    )?);
    if opts.resume || opts.zero_rtt {
        let _ = tcp_once(opts, config.clone()).await?;
        // Let the server's close and our ticket processing settle.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let held = store.tickets_received() - store.tickets_used();
    let mut report = tcp_once(opts, config).await?;
    report.connection.tickets_held = held;
    Ok(report)
}

async fn tcp_once(opts: &FetchOptions, config: Arc<rustls::ClientConfig>) -> Result<FetchReport> {
    let t0 = Instant::now();
    let (tls, connection) = connect_tcp_tls(opts.server, opts.stack.tcp_cc, config, t0).await?;
    let io = TokioIo::new(tls);
    let mut requests = Vec::new();
    if opts.protocol == Protocol::H2 {
        let (sender, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
            .await
            .context("HTTP/2 handshake")?;
        tokio::spawn(conn);
        // All requests at once, multiplexed on the one connection.
        let mut set = tokio::task::JoinSet::new();
        for path in &opts.paths {
            let mut sender = sender.clone();
            let path = path.clone();
            let verify = opts.verify;
            set.spawn(async move {
                let req = Request::get(format!("https://{SERVER_NAME}{path}"))
                    .body(Empty::<Bytes>::new())?;
                let sent = ms(t0);
                let resp = sender.send_request(req).await?;
                hyper_response(t0, path, sent, resp, verify).await
            });
        }
        while let Some(r) = set.join_next().await {
            requests.push(r??);
        }
    } else {
        let (mut sender, conn) = hyper::client::conn::http1::handshake(io)
            .await
            .context("HTTP/1.1 handshake")?;
        tokio::spawn(conn);
        for path in &opts.paths {
            let req = Request::get(path.as_str())
                .header(http::header::HOST, SERVER_NAME)
                .body(Empty::<Bytes>::new())?;
            // One request at a time on an HTTP/1.1 connection: wait until the previous exchange
            // has left it idle.
            sender.ready().await.context("HTTP/1.1 connection")?;
            let sent = ms(t0);
            let resp = sender.send_request(req).await?;
            requests.push(hyper_response(t0, path.clone(), sent, resp, opts.verify).await?);
        }
    }
    Ok(finish(connection, requests, t0))
}

/// The TLS-over-TCP stream of one client connection.
pub(crate) type TlsTcpStream = tokio_rustls::client::TlsStream<tokio::net::TcpStream>;

/// Opens a TCP connection to `server` (congestion control `cc`, Nagle off) and completes a TLS
/// handshake over it with `config`. The returned timing's milestones are ms since `t0`. Shared by
/// `fetch` and the page loader so both measure connection set-up the same way.
pub(crate) async fn connect_tcp_tls(
    server: SocketAddr,
    cc: TcpCongestion,
    config: Arc<rustls::ClientConfig>,
    t0: Instant,
) -> Result<(TlsTcpStream, ConnectionTiming)> {
    connect_tcp_tls_from(None, server, cc, config, t0).await
}

/// [`connect_tcp_tls`] from a given local address (a client that moves between networks binds
/// to the one it is on, so a switch really cuts the connection off).
pub(crate) async fn connect_tcp_tls_from(
    local: Option<std::net::IpAddr>,
    server: SocketAddr,
    cc: TcpCongestion,
    config: Arc<rustls::ClientConfig>,
    t0: Instant,
) -> Result<(TlsTcpStream, ConnectionTiming)> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(server),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )
    .context("creating a TCP socket")?;
    crate::sockopt::set_tcp_congestion(&socket, cc.kernel_name())?;
    socket.set_tcp_nodelay(true)?;
    socket.set_nonblocking(true)?;
    if let Some(local) = local {
        socket
            .bind(&SocketAddr::new(local, 0).into())
            .with_context(|| format!("binding {local}"))?;
    }
    let std_stream: std::net::TcpStream = socket.into();
    let tcp = tokio::net::TcpSocket::from_std_stream(std_stream)
        .connect(server)
        .await
        .with_context(|| format!("connecting to {server}"))?;
    let tcp_connect_ms = ms(t0);
    let connector = tokio_rustls::TlsConnector::from(config);
    let tls = connector
        .connect(SERVER_NAME.try_into()?, tcp)
        .await
        .context("TLS handshake")?;
    let handshake_ms = ms(t0);
    let (_, state) = tls.get_ref();
    let connection = ConnectionTiming {
        tcp_connect_ms: Some(tcp_connect_ms),
        handshake_ms,
        protocol: String::from_utf8_lossy(state.alpn_protocol().unwrap_or(b"")).to_string(),
        tls_version: match state.protocol_version() {
            Some(rustls::ProtocolVersion::TLSv1_3) => "1.3".into(),
            Some(rustls::ProtocolVersion::TLSv1_2) => "1.2".into(),
            other => format!("{other:?}"),
        },
        resumed: state.handshake_kind() == Some(rustls::HandshakeKind::Resumed),
        zero_rtt_accepted: false,
        tickets_held: 0,
    };
    Ok((tls, connection))
}

/// The QUIC application close code of an HTTP/3 connection that ends normally (RFC 9114 §8.1).
pub(crate) const H3_NO_ERROR: quinn::VarInt = quinn::VarInt::from_u32(0x100);

/// Ends the sending side of an HTTP/3 request (its FIN).
///
/// RFC 9114 §4.1: a server may send its whole response before reading the whole request and then
/// stop our sending side (STOP_SENDING); clients "MUST NOT discard complete responses as a result
/// of having their request terminated abruptly". So a stop here is not an error: the response is
/// read as usual. When the client task is descheduled between HEADERS and FIN (a loaded host), the
/// stop can arrive first; treating it as fatal failed h3 page loads at random.
pub(crate) async fn finish_h3_request<S>(
    stream: &mut h3::client::RequestStream<S, Bytes>,
) -> Result<(), h3::error::StreamError>
where
    S: h3::quic::SendStream<Bytes>,
{
    match stream.finish().await {
        Err(h3::error::StreamError::RemoteTerminate { .. }) => Ok(()),
        other => other,
    }
}

/// A client QUIC endpoint on an ephemeral port of the server's address family, over quiclab's
/// FEC socket when `stack` asks for FEC (its counters are read from the returned socket).
pub(crate) fn quic_client_endpoint(
    server: SocketAddr,
    stack: &StackOptions,
) -> Result<(quinn::Endpoint, Option<Arc<FecSocket>>)> {
    quic_client_endpoint_from(None, server, stack)
}

/// The unspecified address of `server`'s family.
fn unspecified(server: SocketAddr) -> std::net::IpAddr {
    if server.is_ipv6() {
        std::net::Ipv6Addr::UNSPECIFIED.into()
    } else {
        std::net::Ipv4Addr::UNSPECIFIED.into()
    }
}

/// [`quic_client_endpoint`] on a given local address.
pub(crate) fn quic_client_endpoint_from(
    local: Option<std::net::IpAddr>,
    server: SocketAddr,
    stack: &StackOptions,
) -> Result<(quinn::Endpoint, Option<Arc<FecSocket>>)> {
    let bind = SocketAddr::new(local.unwrap_or_else(|| unspecified(server)), 0);
    crate::fec_socket::quic_endpoint(bind, None, stack)
        .with_context(|| format!("binding a QUIC client socket on {bind}"))
}

/// The rustls part of a QUIC client configuration (ALPN h3, sessions kept in `store`).
pub(crate) fn quic_client_crypto(
    cert: &LabCertificate,
    early_data: bool,
    store: Arc<tls::CountingSessionStore>,
) -> Result<Arc<quinn::crypto::rustls::QuicClientConfig>> {
    let crypto = tls::client_config(cert, None, b"h3", early_data, store)?;
    Ok(Arc::new(
        quinn::crypto::rustls::QuicClientConfig::try_from(crypto)
            .context("QUIC client TLS configuration")?,
    ))
}

/// A QUIC client configuration: `crypto` with the lab's transport parameters (congestion
/// controller, initial window, flow-control windows) and an optional qlog file.
pub(crate) fn quic_client_config(
    crypto: Arc<quinn::crypto::rustls::QuicClientConfig>,
    stack: &StackOptions,
    qlog: Option<&std::path::Path>,
) -> Result<quinn::ClientConfig> {
    let qlog = qlog.map(|path| crate::qlog::QlogFile {
        path,
        vantage: crate::qlog::Vantage::Client,
    });
    let mut c = quinn::ClientConfig::new(crypto);
    c.transport_config(Arc::new(transport_config(stack, qlog)?));
    Ok(c)
}

async fn hyper_response(
    t0: Instant,
    path: String,
    sent: f64,
    resp: http::Response<hyper::body::Incoming>,
    verify: bool,
) -> Result<RequestTiming> {
    let first_byte_ms = ms(t0);
    let status = resp.status().as_u16();
    let alt_svc = alt_svc_of(resp.headers());
    let mut body = resp.into_body();
    let mut bytes = 0u64;
    let mut ok = true;
    while let Some(frame) = body.frame().await {
        if let Some(data) = frame?.data_ref() {
            if verify {
                ok &= verify_pattern(&path, bytes, data);
            }
            bytes += data.len() as u64;
        }
    }
    Ok(RequestTiming {
        verified: verify.then_some(ok),
        path,
        status,
        request_sent_ms: sent,
        first_byte_ms,
        last_byte_ms: ms(t0),
        bytes,
        alt_svc,
    })
}

/// The `alt-svc` header of a response, if it has one.
pub fn alt_svc_of(headers: &http::HeaderMap) -> Option<String> {
    headers
        .get(http::header::ALT_SVC)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

fn finish(connection: ConnectionTiming, requests: Vec<RequestTiming>, t0: Instant) -> FetchReport {
    FetchReport {
        bytes: requests.iter().map(|r| r.bytes).sum(),
        total_ms: ms(t0),
        connection,
        requests,
        fec: None,
        quic: None,
    }
}

/// quinn's counts of one connection's traffic so far.
pub fn quic_counters(conn: &quinn::Connection) -> QuicCounters {
    let s = conn.stats();
    QuicCounters {
        datagrams_in: s.udp_rx.datagrams,
        packets_in: s.udp_rx.ios,
        datagrams_out: s.udp_tx.datagrams,
        send_calls: s.udp_tx.ios,
        ack_frames_out: s.frame_tx.acks,
        ack_frames_in: s.frame_rx.acks,
    }
}

async fn fetch_quic(opts: &FetchOptions) -> Result<FetchReport> {
    let (endpoint, fec) = quic_client_endpoint(opts.server, &opts.stack)?;
    // Early data enabled whenever resuming: `into_0rtt` then tells whether a ticket is held.
    let store = Arc::new(tls::CountingSessionStore::default());
    let crypto = quic_client_crypto(&opts.cert, opts.resume || opts.zero_rtt, store.clone())?;
    let config = |name: &str| -> Result<quinn::ClientConfig> {
        let qlog = opts.qlog_dir.as_ref().map(|d| d.join(name));
        quic_client_config(crypto.clone(), &opts.stack, qlog.as_deref())
    };
    let mut warm_up = None;
    if opts.resume || opts.zero_rtt {
        warm_up = quic_once(opts, &endpoint, config("client-warmup.sqlog")?, false)
            .await?
            .quic;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let held = store.tickets_received() - store.tickets_used();
    let mut report = quic_once(opts, &endpoint, config("client.sqlog")?, true).await?;
    report.connection.tickets_held = held;
    if let (Some(total), Some(w)) = (report.quic.as_mut(), warm_up) {
        total.add(&w);
    }
    endpoint.wait_idle().await;
    report.fec = fec.map(|f| f.final_counters());
    Ok(report)
}

async fn quic_once(
    opts: &FetchOptions,
    endpoint: &quinn::Endpoint,
    config: quinn::ClientConfig,
    measured: bool,
) -> Result<FetchReport> {
    let t0 = Instant::now();
    let connecting = endpoint.connect_with(config, opts.server, SERVER_NAME)?;
    let mut resumed = false;
    let mut zero_rtt_accepted = false;
    let (conn, handshake_ms) = if measured && (opts.resume || opts.zero_rtt) {
        match connecting.into_0rtt() {
            Ok((conn, accepted)) => {
                // A ticket was held and offered: the handshake is a resumption.
                resumed = true;
                if opts.zero_rtt {
                    // Requests go out now, in 0-RTT; whether the server took them is known later.
                    let accepted_fut = tokio::spawn(accepted);
                    let report = quic_requests(opts, conn.clone(), t0, None).await?;
                    zero_rtt_accepted = accepted_fut.await.unwrap_or(false);
                    let mut report = report;
                    report.connection.resumed = resumed;
                    report.connection.zero_rtt_accepted = zero_rtt_accepted;
                    report.quic = Some(quic_counters(&conn));
                    conn.close(H3_NO_ERROR, b"done");
                    return Ok(report);
                }
                accepted.await;
                (conn, ms(t0))
            }
            Err(connecting) => {
                let conn = connecting.await.context("QUIC handshake")?;
                (conn, ms(t0))
            }
        }
    } else {
        let conn = connecting.await.context("QUIC handshake")?;
        (conn, ms(t0))
    };
    let mut report = quic_requests(opts, conn.clone(), t0, Some(handshake_ms)).await?;
    report.connection.resumed = resumed;
    report.connection.zero_rtt_accepted = zero_rtt_accepted;
    if !measured {
        // The server's session ticket may still be in flight: give it a round trip to land before
        // closing the warm-up connection.
        tokio::time::sleep(conn.rtt() * 2).await;
    }
    report.quic = Some(quic_counters(&conn));
    conn.close(H3_NO_ERROR, b"done");
    Ok(report)
}

async fn quic_requests(
    opts: &FetchOptions,
    conn: quinn::Connection,
    t0: Instant,
    handshake_ms: Option<f64>,
) -> Result<FetchReport> {
    let (mut driver, sender) = h3::client::new(h3_quinn::Connection::new(conn.clone()))
        .await
        .context("HTTP/3 connection")?;
    let drive = tokio::spawn(async move {
        let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
    });
    let mut set = tokio::task::JoinSet::new();
    for path in &opts.paths {
        let mut sender = sender.clone();
        let path = path.clone();
        let verify = opts.verify;
        set.spawn(async move {
            let req = Request::get(format!("https://{SERVER_NAME}{path}")).body(())?;
            let sent = ms(t0);
            let mut stream = sender.send_request(req).await?;
            finish_h3_request(&mut stream).await?;
            let resp = stream.recv_response().await?;
            let first_byte_ms = ms(t0);
            let mut bytes = 0u64;
            let mut ok = true;
            while let Some(mut chunk) = stream.recv_data().await? {
                while chunk.has_remaining() {
                    let c = chunk.chunk();
                    if verify {
                        ok &= verify_pattern(&path, bytes, c);
                    }
                    bytes += c.len() as u64;
                    let n = c.len();
                    chunk.advance(n);
                }
            }
            Ok::<_, anyhow::Error>(RequestTiming {
                verified: verify.then_some(ok),
                status: resp.status().as_u16(),
                path,
                request_sent_ms: sent,
                first_byte_ms,
                last_byte_ms: ms(t0),
                bytes,
                alt_svc: alt_svc_of(resp.headers()),
            })
        });
    }
    let mut requests = Vec::new();
    while let Some(r) = set.join_next().await {
        requests.push(r??);
    }
    drop(sender);
    drive.abort();
    let handshake_ms = match handshake_ms {
        Some(h) => h,
        // 0-RTT: the handshake completed while the requests were in flight; quinn does not say
        // when, so report when the request stream saw its response (an upper bound).
        None => requests
            .iter()
            .map(|r| r.first_byte_ms)
            .fold(f64::INFINITY, f64::min),
    };
    if requests.iter().any(|r| r.status >= 400) {
        bail!(
            "the server answered {}",
            requests
                .iter()
                .map(|r| format!("{} {}", r.status, r.path))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(finish(
        ConnectionTiming {
            tcp_connect_ms: None,
            handshake_ms,
            protocol: "h3".into(),
            tls_version: "1.3".into(),
            resumed: false,
            zero_rtt_accepted: false,
            tickets_held: 0,
        },
        requests,
        t0,
    ))
}

#[cfg(test)]
mod tests {
    //! The end of an HTTP/3 request when the response comes first (RFC 9114 §4.1). Both tests hold
    //! the request's FIN back until the whole response is in, the order a descheduled client task
    //! produces by chance.

    use std::net::{IpAddr, Ipv4Addr};

    use super::*;
    use crate::server::{ServerOptions, spawn_server};

    const LOCAL: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

    type Stream = h3::client::RequestStream<h3_quinn::BidiStream<Bytes>, Bytes>;

    /// What the client holds after [`get_without_fin`]; dropping the request sender would close the
    /// HTTP/3 connection.
    struct Held {
        stream: Stream,
        conn: quinn::Connection,
        _sender: h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>,
        bytes: u64,
    }

    /// Connects an HTTP/3 client, sends a GET without its FIN and reads the whole response.
    async fn get_without_fin(cert: &LabCertificate, server: SocketAddr) -> Held {
        let (endpoint, _) = quic_client_endpoint(server, &StackOptions::default()).unwrap();
        let crypto = quic_client_crypto(cert, false, Arc::default()).unwrap();
        let config = quic_client_config(crypto, &StackOptions::default(), None).unwrap();
        let conn = endpoint
            .connect_with(config, server, SERVER_NAME)
            .unwrap()
            .await
            .unwrap();
        let (mut driver, mut sender) = h3::client::new(h3_quinn::Connection::new(conn.clone()))
            .await
            .unwrap();
        tokio::spawn(async move {
            let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
        });
        let req = Request::get(format!("https://{SERVER_NAME}/bytes/5000"))
            .body(())
            .unwrap();
        let mut stream = sender.send_request(req).await.unwrap();
        let resp = stream.recv_response().await.unwrap();
        assert_eq!(resp.status(), 200);
        let mut bytes = 0;
        while let Some(chunk) = stream.recv_data().await.unwrap() {
            bytes += chunk.remaining() as u64;
        }
        // Time for anything the server does on dropping the stream to arrive here.
        tokio::time::sleep(Duration::from_millis(200)).await;
        Held {
            stream,
            conn,
            _sender: sender,
            bytes,
        }
    }

    #[tokio::test]
    async fn the_server_waits_for_the_request_end_instead_of_stopping_it() {
        let cert = LabCertificate::generate(&[LOCAL]).unwrap();
        let port = 14451;
        spawn_server(ServerOptions::new(cert.clone(), vec![LOCAL], port)).unwrap();
        let mut held = get_without_fin(&cert, SocketAddr::new(LOCAL, port)).await;
        assert_eq!(held.bytes, 5000);
        // A plain finish: it fails if the server stopped the stream when it was done with it.
        held.stream
            .finish()
            .await
            .expect("the server still reads the request after its response");
        held.conn.close(H3_NO_ERROR, b"done");
    }

    #[tokio::test]
    async fn a_client_keeps_a_complete_response_when_the_server_stops_its_request() {
        let cert = LabCertificate::generate(&[LOCAL]).unwrap();
        // A server that answers and then stops the request stream at once, as RFC 9114 allows.
        let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(
            tls::quic_server_config(&cert).unwrap(),
        )
        .unwrap();
        let endpoint = quinn::Endpoint::server(
            quinn::ServerConfig::with_crypto(Arc::new(crypto)),
            SocketAddr::new(LOCAL, 0),
        )
        .unwrap();
        let server = endpoint.local_addr().unwrap();
        tokio::spawn(async move {
            while let Some(incoming) = endpoint.accept().await {
                tokio::spawn(async move {
                    let conn = incoming.await.unwrap();
                    let mut h3 =
                        h3::server::Connection::<_, Bytes>::new(h3_quinn::Connection::new(conn))
                            .await
                            .unwrap();
                    while let Ok(Some(resolver)) = h3.accept().await {
                        let (_req, mut stream) = resolver.resolve_request().await.unwrap();
                        let resp = http::Response::new(());
                        stream.send_response(resp).await.unwrap();
                        let body = Bytes::from(vec![7u8; 5000]);
                        stream.send_data(body).await.unwrap();
                        stream.finish().await.unwrap();
                        stream.stop_sending(h3::error::Code::H3_NO_ERROR);
                        // Keep the connection until the client is done.
                        tokio::time::sleep(Duration::from_secs(2)).await;
                    }
                });
            }
        });
        // A plain finish fails: the stop really arrives before the FIN in this set-up ...
        let mut plain = get_without_fin(&cert, server).await;
        assert_eq!(plain.bytes, 5000, "the whole response arrived");
        assert!(matches!(
            plain.stream.finish().await,
            Err(h3::error::StreamError::RemoteTerminate { .. })
        ));
        plain.conn.close(H3_NO_ERROR, b"done");
        // ... and the client's own finish takes it as the end of a good exchange.
        let mut held = get_without_fin(&cert, server).await;
        assert_eq!(held.bytes, 5000, "the whole response arrived");
        finish_h3_request(&mut held.stream)
            .await
            .expect("a stopped request is not an error");
        held.conn.close(H3_NO_ERROR, b"done");
    }
}
