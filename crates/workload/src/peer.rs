//! Another implementation in a run (quiclab-peers says how each is run): its server started in
//! the server namespace and waited for, its client run to its end in the client namespace
//! through `quiclab child` (so its CPU and wall time are measured as quiclab's own client's).

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use quiclab_lab::{Lab, RunningLab, Side};
use quiclab_model::implementation::{Client, ImplementationRecord, Server};
use quiclab_peers::client::{ClientLaunch, ExternalFetch, FetchSetup};
use quiclab_peers::server::{Launch, Ready, ServerSetup};
use quiclab_proto::options::Protocol;

use crate::child::{ChildConfig, ExecConfig, ExecReport};
use crate::harness::{self, ClientEnd, RunError, WorkDir};

/// quiclab's own implementation, as a run records it.
pub fn quiclab_record(cc: &str) -> ImplementationRecord {
    ImplementationRecord {
        name: "quiclab".into(),
        version: format!(
            "{} (the stack crates' versions are in the results session)",
            env!("CARGO_PKG_VERSION")
        ),
        congestion_control: format!("{cc} (set by quiclab per socket or connection)"),
    }
}

/// Chromium as a run records it: its version, its QUIC's congestion control its own default
/// (quiclab cannot set it), its TCP the client namespace's.
pub fn chromium_record(
    version: Option<&str>,
    proto: Protocol,
    tcp_cc: &str,
) -> ImplementationRecord {
    ImplementationRecord {
        name: "chromium".into(),
        version: version.unwrap_or("unknown (not reported)").to_string(),
        congestion_control: if proto == Protocol::H3 {
            "QUIC: Chromium's default (not set by quiclab)".into()
        } else {
            format!("TCP {tcp_cc} (the client namespace's, set by quiclab)")
        },
    }
}

/// A Chromium fetch() as the bulk download reads it: the protocol it used must be the one asked
/// for, the answer 200; times from the fetch() call (its connection opened by it).
pub fn chromium_fetch_result(
    f: &quiclab_browser::fetch::BrowserFetch,
    proto: Protocol,
) -> Result<ExternalFetch, RunError> {
    if f.status != 200 {
        return Err(RunError::Failed(format!(
            "Chromium's fetch got HTTP status {}",
            f.status
        )));
    }
    let wanted = quiclab_browser::next_hop_protocol(proto);
    match f.protocol.as_deref() {
        Some(p) if p == wanted => {}
        other => {
            return Err(RunError::Failed(format!(
                "Chromium fetched over {} where {wanted} was asked",
                other.unwrap_or("an unreported protocol")
            )));
        }
    }
    let mut unmeasured = std::collections::BTreeMap::new();
    if f.handshake_ms.is_none() {
        unmeasured.insert(
            "handshake_ms",
            "Chromium's DevTools timing reported no connection set-up".to_string(),
        );
    }
    if f.first_byte_ms.is_none() {
        unmeasured.insert("ttfb_ms", "the body was empty".to_string());
    }
    let tls_version = match f.security.as_deref() {
        Some("TLS 1.3" | "QUIC") => Some("1.3".to_string()),
        Some("TLS 1.2") => Some("1.2".to_string()),
        _ => {
            unmeasured.insert(
                "tls_version",
                format!(
                    "Chromium reported the connection's security as {:?}",
                    f.security
                ),
            );
            None
        }
    };
    Ok(ExternalFetch {
        negotiated: f.protocol.clone(),
        tls_version,
        connect_ms: f.connect_ms,
        handshake_ms: f.handshake_ms,
        ttfb_ms: f.first_byte_ms,
        total_ms: f.total_ms,
        bytes: f.bytes,
        verified: Some(f.verified),
        resumed: false,
        cwnd: Vec::new(),
        unmeasured,
    })
}

/// A started server of another implementation.
pub struct OtherServer {
    pub pid: u32,
    pub record: ImplementationRecord,
    /// Its qlog directory, when it writes one (read for its congestion window).
    pub qlog_dir: Option<PathBuf>,
}

/// Gives a TCP endpoint that cannot set its own congestion control (Caddy on the server side,
/// curl on the client side) the one the run asks for. The namespace's default serves when it is
/// that one; when the host's `net.ipv4.tcp_allowed_congestion_control` kept the namespace from
/// choosing it (the kernel lets only the host's own namespace default to another), the lab's
/// routes on that side carry it instead ([`Lab::route_congestion_control`]) — the host is never
/// changed. What the kernel ran is checked per run through sock_diag (server side).
pub fn ensure_namespace_cc(
    lab: &Lab,
    side: quiclab_lab::Side,
    wanted: &str,
    who: &str,
) -> Result<(), RunError> {
    if lab.tcp_default_cc == wanted {
        return Ok(());
    }
    lab.route_congestion_control(side, wanted).map_err(|e| {
        RunError::Failed(format!(
            "{who} uses the namespace's TCP congestion control, which is {} here, not {wanted} \
             (the host's net.ipv4.tcp_allowed_congestion_control does not let the lab choose it \
             as the default), and giving the lab's routes {wanted} failed: {e:#}",
            lab.tcp_default_cc
        ))
    })
}

/// Which other server to start, and how.
pub struct ServerChoice<'a> {
    pub server: Server,
    /// The server's address the client connects to (port 443).
    pub address: IpAddr,
    /// The directory it serves ([`quiclab_peers::content::Site`]).
    pub root: &'a std::path::Path,
    /// The `cc` key of an HTTP/3 run.
    pub quic_cc: Option<&'a str>,
    pub tcp_cc: &'a str,
    /// Let it write a qlog, where it can (costly: kept runs only).
    pub qlog: bool,
}

/// Starts `choice.server` (not quiclab's own) and waits until it is ready (10 s at most).
pub fn start_server(
    lab: &Lab,
    work: &WorkDir,
    choice: &ServerChoice,
) -> Result<OtherServer, RunError> {
    let ServerChoice {
        server,
        address,
        root,
        quic_cc,
        tcp_cc,
        qlog,
    } = *choice;
    let program = quiclab_peers::programs::server_program(server)
        .map_err(|e| RunError::Failed(format!("{e:#}")))?
        .ok_or_else(|| RunError::Failed("quiclab's own server is started by serve".into()))?;
    let qlog_dir = if qlog && server.def().cwnd == quiclab_model::implementation::CwndSource::Qlog {
        Some(
            quiclab_outputs::claim_subdir(work.path(), "server-qlog", "the server's qlog")
                .map_err(|e| RunError::Failed(e.to_string()))?,
        )
    } else {
        None
    };
    // Caddy cannot choose its TCP congestion control: it has the namespace's (its default, or
    // its routes' where the host keeps the namespace from defaulting to the run's; a TCP run
    // gives it the run's first, an HTTP/3 run records what its unused TCP listener had).
    let namespace_cc = lab.tcp_cc(Side::Server);
    let tcp_cc = if server == Server::Caddy {
        namespace_cc.as_str()
    } else {
        tcp_cc
    };
    let setup = ServerSetup {
        work: work.path(),
        cert: &work.join("cert.pem"),
        key: &work.join("key.pem"),
        address,
        port: 443,
        root,
        quic_cc,
        tcp_cc,
        qlog_dir: qlog_dir.as_deref(),
        keylog: lab.key_log.as_deref(),
    };
    let launch: Launch = quiclab_peers::server::launch(server, &program, &setup)
        .map_err(|e| RunError::Failed(format!("{e:#}")))?;
    let program_text = launch.program.to_string_lossy().into_owned();
    let mut cmd = lab.command(Side::Server, &program_text);
    cmd.args(&launch.args);
    for (k, v) in &launch.env {
        cmd.env(k, v);
    }
    let stderr = work.join("server.stderr");
    cmd.stderr(
        quiclab_outputs::create_in_claimed(&stderr).map_err(|e| RunError::Failed(e.to_string()))?,
    );
    cmd.stdout(std::process::Stdio::null());
    let pid = lab.spawn(cmd)?;
    let t = Instant::now();
    loop {
        let ready = match &launch.ready {
            Ready::File(f) => f.exists(),
            Ready::Sockets(s) => quiclab_peers::listening::ready(pid, *s),
        };
        if ready {
            break;
        }
        let said = || {
            std::fs::read_to_string(&stderr)
                .unwrap_or_default()
                .trim()
                .chars()
                .take(600)
                .collect::<String>()
        };
        if let Some(status) = lab.wait_child(pid, Some(Duration::ZERO))? {
            return Err(RunError::Failed(format!(
                "{} exited before it was ready ({status}): {}",
                server.name(),
                said()
            )));
        }
        if t.elapsed() > Duration::from_secs(10) {
            return Err(RunError::Failed(format!(
                "{} was not ready within 10 s: {}",
                server.name(),
                said()
            )));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(OtherServer {
        pid,
        record: launch.record,
        qlog_dir,
    })
}

/// What another client left: how it ended, what it reported, and its record.
pub struct OtherFetch {
    pub exec: ExecReport,
    pub fetch: Result<ExternalFetch, RunError>,
    pub record: ImplementationRecord,
    /// Both endpoints' CPU and namespace counters.
    pub endpoints: quiclab_model::endpoint::EndpointReadings,
    pub fidelity: Option<quiclab_lab::FidelityReport>,
}

/// Runs `client` (not quiclab's own nor Chromium) for `setup`, then stops the emulator as
/// [`harness::run_client_to_end`] does.
pub fn run_client(
    running: &mut RunningLab,
    work: &WorkDir,
    client: Client,
    setup: &FetchSetup,
    server_pid: u32,
) -> Result<OtherFetch, RunError> {
    let program = quiclab_peers::programs::client_program(client)
        .map_err(|e| RunError::Failed(format!("{e:#}")))?
        .ok_or_else(|| RunError::Failed(format!("{} runs in its own workload", client.name())))?;
    let launch: ClientLaunch = quiclab_peers::client::launch(client, &program, setup)
        .map_err(|e| RunError::Failed(format!("{e:#}")))?;
    let stdout = work.join("client.stdout");
    let config = ChildConfig::Exec(ExecConfig {
        program: launch.program.clone(),
        args: launch.args.clone(),
        env: launch.env.clone(),
        stdout: stdout.clone(),
        timeout_ms: setup.timeout.as_millis() as u64,
        cwd: None,
    });
    let end: ClientEnd<ExecReport> = harness::run_client_to_end(
        running,
        work,
        "client",
        &config,
        setup.timeout,
        Duration::from_secs(5),
        server_pid,
    )?;
    let exec = end.client?;
    let endpoints = end.endpoints.with_client_cpu(exec.cpu_s, exec.cpu_split);
    let printed = std::fs::read_to_string(&stdout).unwrap_or_default();
    let stderr = std::fs::read_to_string(work.join("client.stderr")).unwrap_or_default();
    let fetch = if exec.timed_out {
        Err(RunError::Timeout {
            limit: setup.timeout,
            detail: format!("{} did not finish", client.name()),
        })
    } else if exec.exit_code != Some(0) && client != Client::Curl {
        // curl's own write-out says why it failed; the others say it on stderr.
        Err(RunError::Failed(format!(
            "{} failed (exit {:?}, signal {:?}): {}",
            client.name(),
            exec.exit_code,
            exec.signal,
            stderr.trim().chars().take(600).collect::<String>()
        )))
    } else {
        quiclab_peers::client::read(client, &launch, setup, &printed).map_err(RunError::Failed)
    };
    Ok(OtherFetch {
        exec,
        fetch,
        record: launch.record,
        endpoints,
        fidelity: end.fidelity,
    })
}
