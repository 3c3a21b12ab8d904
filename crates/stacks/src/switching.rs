//! A download that outlives network switches (seed 004's "parking lot"; issue 12): the client
//! moves to a new address at each switch and answers in one of three ways ([`OnSwitch`]).
//!
//! - `reconnect`: as the seed's player did, the client notices the switch only when no byte has
//!   arrived for `stall_timeout` (5 s in the seed); it then opens a new connection from its current
//!   address (TCP + TLS, or a QUIC handshake; full handshakes) and asks for the rest of the body
//!   (`Range: bytes=N-`). Its sockets are bound to the address they started on, so a switch really
//!   cuts them off, as it cuts off a phone's sockets on the old network.
//! - `reconnect-0rtt`: the same, resuming the TLS 1.3 session (TCP) or resuming with 0-RTT (QUIC).
//! - `migrate` (h3 only): at each switch, after `migrate_delay` (the time the device takes to
//!   notice its new network), the QUIC endpoint is rebound to a socket on the new address
//!   (`quinn::Endpoint::rebind`): the same connection continues over a new path, which the server
//!   validates. A stall longer than `stall_timeout` still ends in a reconnect, and says so.
//!
//! Any other loss of the connection (an I/O error) also leads to a reconnect, at once. Every
//! connection, migration and received chunk is reported on the emulator's clock (seconds since its
//! start), so the workload can measure each switch's interruption and recovery.

pub use quiclab_model::records::{ConnectionRecord, MigrationRecord, OnSwitch};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use bytes::{Buf, Bytes};
use http::Request;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use quiclab_proto::options::{Protocol, StackOptions};
use serde::{Deserialize, Serialize};

use crate::client::{H3_NO_ERROR, finish_h3_request, quic_client_config, quic_client_crypto};
use crate::cwnd::monotonic_ns;
use crate::server::pattern_byte;
use crate::tls::{self, CountingSessionStore, LabCertificate, SERVER_NAME};

/// The switches a client lives through and how it answers them: what the lab's schedule means
/// to a client (its address in each epoch, the switch instants) and its behaviour.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SwitchPlan {
    pub on_switch: OnSwitch,
    /// No byte for this long while waiting for one: the connection is taken as lost.
    pub stall_timeout: Duration,
    /// `migrate`: how long after a switch the client rebinds (the time it takes to notice).
    pub migrate_delay: Duration,
    /// TCP video players: a segment not finished this long after its request is given up even
    /// while bytes flow (AStream's curl `CURLOPT_TIMEOUT`; None: the stall timeout alone).
    #[serde(default)]
    pub transfer_timeout: Option<Duration>,
    /// CLOCK_MONOTONIC of the emulator's 0: switch instants and reports count from here.
    pub epoch_ns: u64,
    /// The switch instants (ns on the emulator's clock), in order.
    pub switch_at_ns: Vec<u64>,
    /// The client's address in each epoch (index 0 before the first switch).
    pub addresses: Vec<IpAddr>,
}

impl SwitchPlan {
    /// Seconds on the emulator's clock.
    pub fn now_s(&self) -> f64 {
        monotonic_ns().saturating_sub(self.epoch_ns) as f64 / 1e9
    }

    /// The client's address at `now_s` (s on the emulator's clock).
    pub fn address_at(&self, now_s: f64) -> Result<IpAddr> {
        let epoch = self
            .switch_at_ns
            .iter()
            .filter(|&&at| at as f64 / 1e9 <= now_s)
            .count()
            .min(self.addresses.len().saturating_sub(1));
        self.addresses
            .get(epoch)
            .copied()
            .context("no client address for this epoch")
    }

    /// `migrate`: rebinds `endpoint` to the new address at each switch still to come (after
    /// the migrate delay), recording each migration in `log`.
    pub(crate) fn spawn_migrator(
        &self,
        endpoint: quinn::Endpoint,
        log: Arc<Mutex<Vec<MigrationRecord>>>,
    ) -> tokio::task::JoinHandle<()> {
        let plan = self.clone();
        tokio::spawn(async move {
            let origin = tokio::time::Instant::now()
                - Duration::from_nanos(monotonic_ns().saturating_sub(plan.epoch_ns));
            for (i, &at) in plan.switch_at_ns.iter().enumerate() {
                let when = origin + Duration::from_nanos(at) + plan.migrate_delay;
                if when <= tokio::time::Instant::now() {
                    continue;
                }
                tokio::time::sleep_until(when).await;
                let Some(&addr) = plan.addresses.get(i + 1) else {
                    break;
                };
                // The new address appears a few ms after the switch instant (the lab adds it, as
                // a phone's OS brings up its new interface): bind as soon as it is there.
                let give_up = tokio::time::Instant::now() + plan.stall_timeout;
                let error = loop {
                    match std::net::UdpSocket::bind(SocketAddr::new(addr, 0))
                        .and_then(|s| endpoint.rebind(s))
                    {
                        Ok(()) => break None,
                        Err(e) if tokio::time::Instant::now() >= give_up => {
                            break Some(format!("{e}"));
                        }
                        Err(_) => tokio::time::sleep(Duration::from_millis(2)).await,
                    }
                };
                log.lock().unwrap().push(MigrationRecord {
                    at_s: plan.now_s(),
                    local: addr.to_string(),
                    error,
                });
            }
        })
    }
}

/// What to download and how to live through the switches.
#[derive(Clone)]
pub struct SwitchDownloadOptions {
    pub cert: LabCertificate,
    pub server: SocketAddr,
    pub protocol: Protocol,
    pub stack: StackOptions,
    /// `/bytes/<size>`.
    pub size: u64,
    pub plan: SwitchPlan,
    /// Give up this long after the start.
    pub limit: Duration,
}

/// What happened (model's record).
pub use quiclab_model::records::SwitchDownloadReport;

/// How one connection ended.
enum End {
    /// The body is complete.
    Done,
    /// Lost (stall or error): reconnect, for this reason.
    Lost(String),
}

struct Progress<'a> {
    opts: &'a SwitchDownloadOptions,
    report: &'a mut SwitchDownloadReport,
}

impl Progress<'_> {
    fn now(&self) -> f64 {
        self.opts.plan.now_s()
    }

    fn chunk(&mut self, data: &[u8]) {
        let offset = self.report.bytes;
        self.report.verified &= data
            .iter()
            .enumerate()
            .all(|(i, &b)| b == pattern_byte(offset + i as u64));
        self.report.bytes += data.len() as u64;
        let t = self.now();
        self.report.progress.push((t, self.report.bytes));
    }
}

/// Downloads `/bytes/<size>` across the switches (see the module documentation).
pub async fn download_across_switches(opts: &SwitchDownloadOptions) -> SwitchDownloadReport {
    let mut report = SwitchDownloadReport {
        verified: true,
        ..Default::default()
    };
    let deadline = tokio::time::Instant::now() + opts.limit;
    let migrations = Arc::new(Mutex::new(Vec::new()));
    let mut tls_configs = TlsConfigs::default();
    let result = tokio::time::timeout_at(deadline, async {
        let mut why = "start".to_string();
        loop {
            let mut p = Progress {
                opts,
                report: &mut report,
            };
            if p.report.bytes >= opts.size {
                p.report.complete = true;
                return Ok::<(), anyhow::Error>(());
            }
            let now = p.now();
            let local = opts.plan.address_at(now)?;
            p.report.connections.push(ConnectionRecord {
                opened_s: now,
                local: local.to_string(),
                why: why.clone(),
                from_byte: p.report.bytes,
                ..Default::default()
            });
            if opts.plan.on_switch != OnSwitch::Reconnect0rtt {
                // Full handshakes: nothing is carried from one connection to the next.
                tls_configs = TlsConfigs::default();
            }
            if let Some(c) = p.report.connections.last_mut() {
                c.tickets_held = tls_configs.tickets_held();
            }
            let started = tokio::time::Instant::now();
            let end = match opts.protocol {
                Protocol::H1 | Protocol::H2 => {
                    let config = tls_configs.tcp(&opts.cert, opts.stack.tls, opts.protocol)?;
                    tcp_attempt(&mut p, local, config).await?
                }
                Protocol::H3 => {
                    let early = opts.plan.on_switch == OnSwitch::Reconnect0rtt;
                    let crypto = tls_configs.quic(&opts.cert, early)?;
                    quic_attempt(&mut p, local, crypto, &migrations).await?
                }
            };
            match end {
                End::Done => {}
                End::Lost(reason) => {
                    // An immediate error (no route yet, a reset) is retried after a pause, not
                    // in a tight loop.
                    if started.elapsed() < Duration::from_millis(100) {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    why = reason;
                }
            }
        }
    })
    .await;
    report.migrations = migrations.lock().unwrap().clone();
    report.error = match result {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(crate::stop::reason_of(&e)),
        Err(_) => Some(crate::stop::StopReason::TimedOut {
            limit_s: opts.limit.as_secs_f64(),
            detail: format!(
                "the download was not complete: {} of {} bytes",
                report.bytes, opts.size
            ),
        }),
    };
    report
}

/// The client's TLS configurations and their session store. rustls resumes a session only with
/// the configuration that made it, so a resuming client keeps one of each for all its connections.
#[derive(Default)]
pub(crate) struct TlsConfigs {
    pub(crate) store: Arc<CountingSessionStore>,
    tcp: Option<Arc<rustls::ClientConfig>>,
    quic: Option<Arc<quinn::crypto::rustls::QuicClientConfig>>,
}

impl TlsConfigs {
    pub(crate) fn tcp(
        &mut self,
        cert: &LabCertificate,
        version: Option<quiclab_proto::options::TlsVersion>,
        protocol: Protocol,
    ) -> Result<Arc<rustls::ClientConfig>> {
        if self.tcp.is_none() {
            let alpn: &[u8] = if protocol == Protocol::H2 {
                b"h2"
            } else {
                b"http/1.1"
            };
            self.tcp = Some(Arc::new(tls::client_config(
                cert,
                version,
                alpn,
                false,
                self.store.clone(),
            )?));
        }
        Ok(self.tcp.clone().expect("just set"))
    }

    pub(crate) fn quic(
        &mut self,
        cert: &LabCertificate,
        early: bool,
    ) -> Result<Arc<quinn::crypto::rustls::QuicClientConfig>> {
        if self.quic.is_none() {
            self.quic = Some(quic_client_crypto(cert, early, self.store.clone())?);
        }
        Ok(self.quic.clone().expect("just set"))
    }

    /// TLS 1.3 tickets the client holds (resumption needs one).
    pub(crate) fn tickets_held(&self) -> u64 {
        self.store.tickets_received() - self.store.tickets_used()
    }
}

/// `Range: bytes=N-` for the rest of the body (none from 0).
fn rest_of_body(offset: u64) -> Option<String> {
    (offset > 0).then(|| format!("bytes={offset}-"))
}

/// Checks the answer: 200 for the whole body, 206 for the rest of it.
fn check_answer(status: http::StatusCode, offset: u64) -> Result<()> {
    let expected = if offset > 0 { 206 } else { 200 };
    if status.as_u16() != expected {
        bail!("the server answered {status} (expected {expected}) from offset {offset}");
    }
    Ok(())
}

async fn within<T, E: std::fmt::Display>(
    stall: Duration,
    what: &str,
    f: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, String> {
    match tokio::time::timeout(stall, f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(format!("{what} failed: {e}")),
        Err(_) => Err(format!(
            "{what}: nothing for {:.1} s (the stall timeout)",
            stall.as_secs_f64()
        )),
    }
}

async fn tcp_attempt(
    p: &mut Progress<'_>,
    local: IpAddr,
    config: Arc<rustls::ClientConfig>,
) -> Result<End> {
    let o = p.opts;
    let stall = o.plan.stall_timeout;
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(o.server),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )
    .context("creating a TCP socket")?;
    crate::sockopt::set_tcp_congestion(&socket, o.stack.tcp_cc.kernel_name())?;
    socket.set_tcp_nodelay(true)?;
    socket.set_nonblocking(true)?;
    if let Err(e) = socket.bind(&SocketAddr::new(local, 0).into()) {
        // The address is not there yet (the lab adds it a few ms after the switch instant).
        return Ok(End::Lost(format!("binding {local}: {e}")));
    }
    let std_stream: std::net::TcpStream = socket.into();
    let connect = tokio::net::TcpSocket::from_std_stream(std_stream).connect(o.server);
    let tcp = match within(stall, "TCP connect", connect).await {
        Ok(t) => t,
        Err(e) => return Ok(End::Lost(e)),
    };
    let connector = tokio_rustls::TlsConnector::from(config);
    let tls = match within(
        stall,
        "TLS handshake",
        connector.connect(SERVER_NAME.try_into()?, tcp),
    )
    .await
    {
        Ok(t) => t,
        Err(e) => return Ok(End::Lost(e)),
    };
    let ready = p.now();
    let resumed = tls.get_ref().1.handshake_kind() == Some(rustls::HandshakeKind::Resumed);
    if let Some(c) = p.report.connections.last_mut() {
        c.ready_s = Some(ready);
        c.resumed = resumed;
    }
    let io = TokioIo::new(tls);
    let offset = p.report.bytes;
    let mut req = Request::get(format!("https://{SERVER_NAME}/bytes/{}", o.size));
    if let Some(range) = rest_of_body(offset) {
        req = req.header(http::header::RANGE, range);
    }
    let resp = if o.protocol == Protocol::H2 {
        let (mut sender, conn) = match within(
            stall,
            "HTTP/2 handshake",
            hyper::client::conn::http2::handshake(TokioExecutor::new(), io),
        )
        .await
        {
            Ok(s) => s,
            Err(e) => return Ok(End::Lost(e)),
        };
        tokio::spawn(conn);
        match within(
            stall,
            "the response",
            sender.send_request(req.body(Empty::<Bytes>::new())?),
        )
        .await
        {
            Ok(r) => r,
            Err(e) => return Ok(End::Lost(e)),
        }
    } else {
        let (mut sender, conn) = match within(
            stall,
            "HTTP/1.1 handshake",
            hyper::client::conn::http1::handshake(io),
        )
        .await
        {
            Ok(s) => s,
            Err(e) => return Ok(End::Lost(e)),
        };
        tokio::spawn(conn);
        let req = req
            .uri(format!("/bytes/{}", o.size))
            .header(http::header::HOST, SERVER_NAME)
            .body(Empty::<Bytes>::new())?;
        match within(stall, "the response", sender.send_request(req)).await {
            Ok(r) => r,
            Err(e) => return Ok(End::Lost(e)),
        }
    };
    check_answer(resp.status(), offset)?;
    let mut body = resp.into_body();
    loop {
        match within(stall, "the body", async { body.frame().await.transpose() }).await {
            Ok(None) => return Ok(End::Done),
            Ok(Some(frame)) => {
                if let Some(data) = frame.data_ref() {
                    p.chunk(data);
                }
            }
            Err(e) => return Ok(End::Lost(e)),
        }
    }
}

async fn quic_attempt(
    p: &mut Progress<'_>,
    local: IpAddr,
    crypto: Arc<quinn::crypto::rustls::QuicClientConfig>,
    migrations: &Arc<Mutex<Vec<MigrationRecord>>>,
) -> Result<End> {
    let o = p.opts;
    let stall = o.plan.stall_timeout;
    let endpoint = match quinn::Endpoint::client(SocketAddr::new(local, 0)) {
        Ok(e) => e,
        Err(e) => return Ok(End::Lost(format!("binding a QUIC socket on {local}: {e}"))),
    };
    let early = o.plan.on_switch == OnSwitch::Reconnect0rtt;
    let config = quic_client_config(crypto, &o.stack, None)?;
    let connecting = endpoint.connect_with(config, o.server, SERVER_NAME)?;
    let (conn, zero_rtt) = if early {
        match connecting.into_0rtt() {
            Ok((conn, _accepted)) => (conn, true),
            Err(connecting) => match within(stall, "QUIC handshake", connecting).await {
                Ok(c) => (c, false),
                Err(e) => return Ok(End::Lost(e)),
            },
        }
    } else {
        match within(stall, "QUIC handshake", connecting).await {
            Ok(c) => (c, false),
            Err(e) => return Ok(End::Lost(e)),
        }
    };
    let ready = p.now();
    if let Some(c) = p.report.connections.last_mut() {
        c.ready_s = Some(ready);
        c.resumed = zero_rtt;
        c.zero_rtt = zero_rtt;
    }
    // Migration: rebind at each later switch, once the device has noticed it.
    let migrator = (o.plan.on_switch == OnSwitch::Migrate)
        .then(|| o.plan.spawn_migrator(endpoint.clone(), migrations.clone()));
    let end = quic_request(p, &conn).await;
    if let Some(m) = migrator {
        m.abort();
    }
    conn.close(H3_NO_ERROR, b"done");
    drop(endpoint);
    end
}

async fn quic_request(p: &mut Progress<'_>, conn: &quinn::Connection) -> Result<End> {
    let o = p.opts;
    let stall = o.plan.stall_timeout;
    let (mut driver, mut sender) = match within(
        stall,
        "HTTP/3 set-up",
        h3::client::new(h3_quinn::Connection::new(conn.clone())),
    )
    .await
    {
        Ok(s) => s,
        Err(e) => return Ok(End::Lost(e)),
    };
    let drive = tokio::spawn(async move {
        let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
    });
    let offset = p.report.bytes;
    let mut req = Request::get(format!("https://{SERVER_NAME}/bytes/{}", o.size));
    if let Some(range) = rest_of_body(offset) {
        req = req.header(http::header::RANGE, range);
    }
    let end = async {
        let mut stream =
            match within(stall, "the request", sender.send_request(req.body(())?)).await {
                Ok(s) => s,
                Err(e) => return Ok(End::Lost(e)),
            };
        if let Err(e) = within(stall, "the request's end", finish_h3_request(&mut stream)).await {
            return Ok(End::Lost(e));
        }
        let resp = match within(stall, "the response", stream.recv_response()).await {
            Ok(r) => r,
            Err(e) => return Ok(End::Lost(e)),
        };
        check_answer(resp.status(), offset)?;
        loop {
            match within(stall, "the body", stream.recv_data()).await {
                Ok(None) => return Ok(End::Done),
                Ok(Some(mut chunk)) => {
                    while chunk.has_remaining() {
                        let c = chunk.chunk();
                        let n = c.len();
                        p.chunk(c);
                        chunk.advance(n);
                    }
                }
                Err(e) => return Ok(End::Lost(e)),
            }
        }
    }
    .await;
    drive.abort();
    end.map_err(|e: anyhow::Error| anyhow!(e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn on_switch_names_parse_and_migrate_needs_h3() {
        for n in OnSwitch::NAMES {
            let b: OnSwitch = n.parse().unwrap();
            assert_eq!(b.as_str(), n);
            assert_eq!(serde_json::to_string(&b).unwrap(), format!("\"{n}\""));
        }
        assert!(
            "teleport"
                .parse::<OnSwitch>()
                .unwrap_err()
                .contains("reconnect-0rtt")
        );
        assert!(OnSwitch::Migrate.check(Protocol::H3).is_ok());
        let e = OnSwitch::Migrate.check(Protocol::H2).unwrap_err();
        assert!(e.contains("needs h3"), "{e}");
        assert!(OnSwitch::Reconnect.check(Protocol::H1).is_ok());
    }

    #[test]
    fn the_rest_of_a_body_is_asked_by_range_and_checked_by_status() {
        assert_eq!(rest_of_body(0), None);
        assert_eq!(rest_of_body(1000).as_deref(), Some("bytes=1000-"));
        assert!(check_answer(http::StatusCode::OK, 0).is_ok());
        assert!(check_answer(http::StatusCode::PARTIAL_CONTENT, 5).is_ok());
        assert!(check_answer(http::StatusCode::OK, 5).is_err());
    }
}
