//! One flow of a competing-flows mix: one connection (h1 = one TLS/TCP connection, h2, or h3 over
//! QUIC) that downloads one `/bytes/<N>` resource and records when its application bytes arrived,
//! per millisecond on CLOCK_MONOTONIC (the clock of the emulator's packet log and of the
//! congestion-window samples). A long-running flow stops reading at its time limit and closes.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::stop::StopReason;
use anyhow::{Context, Result, bail};
use bytes::{Buf, Bytes};
use http::Request;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use quiclab_model::run::flows::{FlowOutcome, FlowSettings, FlowsRun};
use quiclab_proto::options::{Protocol, StackOptions};

use crate::client::{
    H3_NO_ERROR, connect_tcp_tls, finish_h3_request, quic_client_config, quic_client_crypto,
    quic_client_endpoint,
};
use crate::cwnd::monotonic_ns;
use crate::tls::{self, LabCertificate, SERVER_NAME};

/// Flow `i` of a run, as this client reads it: the run's own description (quiclab-model's
/// `FlowsRun`, received as it is), and what the lab adds (certificate, server, clock origin).
struct FlowOptions<'a> {
    cert: &'a LabCertificate,
    server: SocketAddr,
    protocol: Protocol,
    stack: StackOptions,
}

/// What one flow did (model's record).
pub use quiclab_model::records::FlowReport;

/// Body bytes per millisecond since the origin.
struct Receptions {
    origin_ns: u64,
    per_ms: Vec<(u64, u64)>,
    bytes: u64,
    first_ns: Option<u64>,
    last_ns: u64,
}

impl Receptions {
    fn new(origin_ns: u64) -> Receptions {
        Receptions {
            origin_ns,
            per_ms: Vec::new(),
            bytes: 0,
            first_ns: None,
            last_ns: 0,
        }
    }

    fn add(&mut self, n: usize) {
        if n == 0 {
            return;
        }
        let now = monotonic_ns();
        let ms = now.saturating_sub(self.origin_ns) / 1_000_000;
        match self.per_ms.last_mut() {
            Some((m, b)) if *m == ms => *b += n as u64,
            _ => self.per_ms.push((ms, n as u64)),
        }
        self.bytes += n as u64;
        self.first_ns.get_or_insert(now);
        self.last_ns = now;
    }
}

/// Every flow of `run`, each in its own task against its server (`servers[i]`), all counted from
/// `origin_ns`; a flow's failure, or its still running `limit` after the start, is its own outcome.
pub async fn run_flows(
    run: &FlowsRun,
    cert: &LabCertificate,
    servers: &[SocketAddr],
    origin_ns: u64,
    limit: Duration,
) -> Vec<FlowOutcome> {
    let mut tasks = Vec::new();
    for (i, &server) in servers.iter().enumerate() {
        let (run, cert) = (run.clone(), cert.clone());
        tasks.push(tokio::spawn(async move {
            // The offset is the flow's own (run_flow waits it out).
            let flow = run_flow(&run, i, &cert, server, origin_ns);
            let (report, error) = match tokio::time::timeout(limit, flow).await {
                Ok(Ok(r)) => (Some(r), None),
                Ok(Err(e)) => (None, Some(crate::stop::reason_of(&e))),
                Err(_) => (
                    None,
                    Some(StopReason::TimedOut {
                        limit_s: limit.as_secs_f64(),
                        detail: "the flow had not finished".into(),
                    }),
                ),
            };
            FlowOutcome { report, error }
        }));
    }
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap_or_else(|e| FlowOutcome {
            report: None,
            error: Some(StopReason::Failed {
                reason: format!("the flow's task ended abnormally: {e}"),
            }),
        }));
    }
    out
}

/// Runs flow `i` of `run` against `server` after its offset; receptions are counted in ms since
/// `origin_ns` (CLOCK_MONOTONIC of the mix's start). Errors say what failed (connect, handshake,
/// status).
pub async fn run_flow(
    run: &FlowsRun,
    i: usize,
    cert: &LabCertificate,
    server: SocketAddr,
    origin_ns: u64,
) -> Result<FlowReport> {
    // The per-flow settings, taken whole: a new one does not compile until it is handled here.
    let FlowSettings { offsets } = &run.settings;
    tokio::time::sleep(offsets.get(i).copied().unwrap_or_default()).await;
    let spec = run.mix.flows.get(i).context("no such flow in the mix")?;
    let opts = &FlowOptions {
        cert,
        server,
        protocol: spec.proto,
        stack: run.flow_stack(spec),
    };
    let start_ns = monotonic_ns();
    let path = format!("/bytes/{}", run.size_asked());
    let mut rx = Receptions::new(origin_ns);
    let deadline = run.stop_after().map(|d| tokio::time::Instant::now() + d);
    let Transfer {
        local_port,
        alpn,
        handshake_ns,
        complete,
        fec,
    } = match opts.protocol {
        Protocol::H1 | Protocol::H2 => tcp_flow(opts, &path, &mut rx, deadline).await?,
        Protocol::H3 => quic_flow(opts, &path, &mut rx, deadline).await?,
    };
    let end_ns = if complete { rx.last_ns } else { monotonic_ns() };
    Ok(FlowReport {
        local_port,
        alpn,
        start_ns,
        handshake_ns,
        first_byte_ns: rx.first_ns.unwrap_or(0),
        last_byte_ns: rx.last_ns,
        end_ns,
        bytes: rx.bytes,
        complete,
        stopped: !complete,
        receptions: rx.per_ms,
        fec,
    })
}

/// How a flow's connection went.
struct Transfer {
    local_port: u16,
    alpn: String,
    handshake_ns: u64,
    /// The whole resource arrived (else the flow stopped at its deadline).
    complete: bool,
    fec: Option<crate::fec_socket::FecCounters>,
}

/// Reads `body` into `rx` until it ends (true) or `deadline` passes (false).
async fn read_until<F>(deadline: Option<tokio::time::Instant>, read: F) -> Result<bool>
where
    F: std::future::Future<Output = Result<()>>,
{
    match deadline {
        None => read.await.map(|()| true),
        Some(d) => match tokio::time::timeout_at(d, read).await {
            Ok(r) => r.map(|()| true),
            Err(_) => Ok(false),
        },
    }
}

async fn tcp_flow(
    opts: &FlowOptions<'_>,
    path: &str,
    rx: &mut Receptions,
    deadline: Option<tokio::time::Instant>,
) -> Result<Transfer> {
    let alpn: &[u8] = if opts.protocol == Protocol::H2 {
        b"h2"
    } else {
        b"http/1.1"
    };
    let config = Arc::new(tls::client_config(
        opts.cert,
        opts.stack.tls,
        alpn,
        false,
        Arc::default(),
    )?);
    let (stream, timing) = connect_tcp_tls(
        opts.server,
        opts.stack.tcp_cc,
        config,
        std::time::Instant::now(),
    )
    .await?;
    let handshake_ns = monotonic_ns();
    let local_port = stream.get_ref().0.local_addr()?.port();
    let io = TokioIo::new(stream);
    let resp = if opts.protocol == Protocol::H2 {
        let (mut sender, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
            .await
            .context("HTTP/2 handshake")?;
        tokio::spawn(conn);
        let req =
            Request::get(format!("https://{SERVER_NAME}{path}")).body(Empty::<Bytes>::new())?;
        sender.send_request(req).await?
    } else {
        let (mut sender, conn) = hyper::client::conn::http1::handshake(io)
            .await
            .context("HTTP/1.1 handshake")?;
        tokio::spawn(conn);
        let req = Request::get(path)
            .header(http::header::HOST, SERVER_NAME)
            .body(Empty::<Bytes>::new())?;
        sender.send_request(req).await?
    };
    if resp.status() != 200 {
        bail!("the server answered {} for {path}", resp.status());
    }
    let mut body = resp.into_body();
    let complete = read_until(deadline, async {
        while let Some(frame) = body.frame().await {
            if let Some(data) = frame?.data_ref() {
                rx.add(data.len());
            }
        }
        Ok(())
    })
    .await?;
    // Dropping the body and the connection closes the socket: a stopped flow ends here.
    Ok(Transfer {
        local_port,
        alpn: timing.protocol,
        handshake_ns,
        complete,
        fec: None,
    })
}

async fn quic_flow(
    opts: &FlowOptions<'_>,
    path: &str,
    rx: &mut Receptions,
    deadline: Option<tokio::time::Instant>,
) -> Result<Transfer> {
    let (endpoint, fec) = quic_client_endpoint(opts.server, &opts.stack)?;
    let local_port = endpoint.local_addr()?.port();
    let crypto = quic_client_crypto(opts.cert, false, Arc::default())?;
    let config = quic_client_config(crypto, &opts.stack, None)?;
    let conn = endpoint
        .connect_with(config, opts.server, SERVER_NAME)?
        .await
        .context("QUIC handshake")?;
    let handshake_ns = monotonic_ns();
    let (mut driver, mut sender) = h3::client::new(h3_quinn::Connection::new(conn.clone()))
        .await
        .context("HTTP/3 connection")?;
    let drive = tokio::spawn(async move {
        let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
    });
    let req = Request::get(format!("https://{SERVER_NAME}{path}")).body(())?;
    let mut stream = sender.send_request(req).await?;
    finish_h3_request(&mut stream).await?;
    let resp = stream.recv_response().await?;
    if resp.status() != 200 {
        bail!("the server answered {} for {path}", resp.status());
    }
    let complete = read_until(deadline, async {
        while let Some(mut chunk) = stream.recv_data().await? {
            while chunk.has_remaining() {
                let n = chunk.chunk().len();
                rx.add(n);
                chunk.advance(n);
            }
        }
        Ok(())
    })
    .await?;
    drop(stream);
    drop(sender);
    drive.abort();
    conn.close(H3_NO_ERROR, b"done");
    // Let the close leave before the endpoint goes (bounded: the peer may be gone).
    let _ = tokio::time::timeout(Duration::from_millis(200), endpoint.wait_idle()).await;
    let fec = fec.map(|f| f.final_counters());
    Ok(Transfer {
        local_port,
        alpn: "h3".into(),
        handshake_ns,
        complete,
        fec,
    })
}
