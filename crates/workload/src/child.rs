//! The halves of a workload that run inside a lab's namespaces, as `quiclab child CONFIG`: the
//! server (`quiclab serve`), the bulk client (`quiclab fetch`), the page client, the flows client
//! and the video client.
//!
//! Each is told everything by one serialised [`ChildConfig`] and prints one JSON report. A client
//! that fails once its time limit has passed exits with [`crate::harness::EXIT_TIMED_OUT`]: the
//! parent learns "timeout" from the exit code, not from the wording of an error.

pub use quiclab_model::page::{DISCOVERY_NAVIGATIONS, DiscoveredLoad, Discovery, PageSummary};
use quiclab_stacks::stop::StopReason;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use quiclab_page::har::ObjectTiming;
use quiclab_proto::options::{Protocol, StackOptions};
use quiclab_stacks::client::{FetchOptions, FetchReport};
use quiclab_stacks::server::ServerOptions;
use quiclab_stacks::tls::LabCertificate;
use serde::{Deserialize, Serialize};

use crate::harness::EXIT_TIMED_OUT;

/// What a child process runs: the one argument of `quiclab child`, as JSON.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "kebab-case", deny_unknown_fields)]
pub enum ChildConfig {
    Serve(ServeConfig),
    Fetch(FetchConfig),
    PageClient(PageClientConfig),
    FlowsClient(FlowsClientConfig),
    VideoClient(VideoClientConfig),
    SwitchFetch(SwitchFetchConfig),
    Exec(ExecConfig),
    ChromiumFetch(ChromiumFetchConfig),
}

/// A bulk download by Chromium's `fetch()` ([`quiclab_browser::fetch`]), run in the client
/// namespace like a page load.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChromiumFetchConfig {
    pub proto: Protocol,
    pub cert: PathBuf,
    pub server: SocketAddr,
    /// `/bytes/N`.
    pub path: String,
    pub size: u64,
    pub timeout_ms: u64,
}

/// What Chromium's fetch measured, with the CPU time of Chromium's processes (those this
/// process and Chromium reaped).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChromiumFetchReport {
    pub fetch: quiclab_browser::fetch::BrowserFetch,
    pub cpu_s: f64,
}

/// Another implementation's client (curl, quic-go, ngtcp2; quiclab-peers says how to run it),
/// started by `quiclab child` in the client namespace so that its wall and CPU time are measured
/// as quiclab's own client's are: this process waits for it and reads its resource usage.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecConfig {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    /// Its standard output goes here (a file of the run's work directory).
    pub stdout: PathBuf,
    pub timeout_ms: u64,
}

/// How the program ended.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecReport {
    /// Its exit code (None: ended by a signal).
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    /// It ran past the time limit and was killed.
    pub timed_out: bool,
    pub wall_ms: f64,
    /// Its user + system CPU seconds (getrusage of the reaped child).
    pub cpu_s: f64,
}

/// A download across network switches (see `quiclab_stacks::switching`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SwitchFetchConfig {
    pub proto: Protocol,
    pub cert: PathBuf,
    pub server: SocketAddr,
    pub size: u64,
    pub stack: StackOptions,
    pub plan: quiclab_stacks::switching::SwitchPlan,
    pub timeout_ms: u64,
}

/// What the switch-fetch client reports.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SwitchFetchReport {
    #[serde(flatten)]
    pub report: quiclab_stacks::switching::SwitchDownloadReport,
    pub cpu_s: f64,
}

/// `quiclab serve`: h1/h2 over TLS/TCP and h3 over QUIC.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServeConfig {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// Serve the files of this directory (and always `/bytes/<N>`).
    pub dir: Option<PathBuf>,
    pub addresses: Vec<IpAddr>,
    pub port: u16,
    /// Created once every listener is up.
    pub ready_file: Option<PathBuf>,
    /// Sample every connection's congestion state into this CSV.
    pub cwnd_log: Option<PathBuf>,
    /// With FEC: the server's FEC counters, rewritten every 100 ms.
    #[serde(default)]
    pub fec_log: Option<PathBuf>,
    /// Write a qlog of every QUIC connection into this directory.
    pub qlog_dir: Option<PathBuf>,
    pub stack: StackOptions,
    /// More ports with stack options of their own (a flow mix; see `ServerOptions::extra_ports`).
    #[serde(default)]
    pub extra_ports: Vec<(u16, StackOptions)>,
    /// Video contents served at `/video/<name>/<rep>/<n>`.
    #[serde(default)]
    pub videos: Vec<quiclab_video::Content>,
}

/// `quiclab fetch`: request paths over one protocol.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FetchConfig {
    pub proto: Protocol,
    /// The lab certificate to trust (and nothing else).
    pub cert: PathBuf,
    pub server: SocketAddr,
    pub paths: Vec<String>,
    /// Obtain a session ticket on a first connection, then measure a resumed second one.
    pub resume: bool,
    /// Like `resume`, and send the request in 0-RTT (h3).
    pub zero_rtt: bool,
    /// Check `/bytes/<N>` bodies byte by byte.
    pub verify: bool,
    pub qlog_dir: Option<PathBuf>,
    pub timeout_ms: u64,
    pub stack: StackOptions,
}

/// Who loads a page.
pub use quiclab_model::run::page::Browser;

/// The client half of a page load.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PageClientConfig {
    pub proto: Protocol,
    pub browser: Browser,
    pub cert: PathBuf,
    pub server: SocketAddr,
    pub timeout_ms: u64,
    pub max_streams: Option<u64>,
    pub stack: StackOptions,
    /// An untimed load first, then the measured one resumes (see `PageLoadOptions::warm`).
    #[serde(default)]
    pub warm: bool,
    /// Chromium without forcing QUIC, [`DISCOVERY_NAVIGATIONS`] loads in one browser.
    #[serde(default)]
    pub discover: bool,
    /// Chromium loads the certificate's name mapped to the server's address (another server
    /// chooses its certificate by the name sent), not the address itself.
    #[serde(default)]
    pub by_name: bool,
}

/// The client half of a flow mix: every flow in one process, so they share one clock and start
/// together (or at their offsets). The run itself, and what the lab adds: each flow's server.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FlowsClientConfig {
    pub cert: PathBuf,
    pub run: quiclab_model::run::flows::FlowsRun,
    /// Each flow's server address and port (the port whose stack options are the flow's).
    pub servers: Vec<SocketAddr>,
    /// Give up on flows still running this long after the mix's start.
    pub timeout_ms: u64,
}

pub use quiclab_model::run::flows::{FlowOutcome, FlowsClientReport};

/// The client half of a video run: every player in one process, on one clock.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VideoClientConfig {
    pub cert: PathBuf,
    pub content: quiclab_video::Content,
    pub player: quiclab_video::PlayerConfig,
    pub abr: quiclab_video::AbrKind,
    pub players: Vec<VideoPlayerConfig>,
    /// Give up on players still playing this long after the start (their reports say so).
    pub timeout_ms: u64,
    /// The network switches the client lives through (every player moves with it).
    #[serde(default)]
    pub switching: Option<quiclab_stacks::switching::SwitchPlan>,
}

/// One player of a video run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VideoPlayerConfig {
    pub spec: quiclab_video::PlayerSpec,
    pub stack: StackOptions,
    pub server: SocketAddr,
}

/// What the video client reports: one report per player (each with its error, if any).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VideoClientReport {
    /// CLOCK_MONOTONIC of the start (ns): the players' clocks count from here.
    pub origin_ns: u64,
    pub players: Vec<quiclab_stacks::video::VideoReport>,
    pub cpu_s: f64,
}

/// What `quiclab fetch` reports: the stacks' report and the client's own CPU time.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FetchChildReport {
    #[serde(flatten)]
    pub report: FetchReport,
    /// User + system CPU seconds of the client process.
    pub cpu_s: f64,
}

impl FetchChildReport {
    /// Whether a body checked with `verify` was wrong (the command's exit status 1).
    pub fn any_unverified(&self) -> bool {
        self.report
            .requests
            .iter()
            .any(|r| r.verified == Some(false))
    }
}

/// What a discovery run's navigations show.
pub fn discovery_of(
    loads: &[quiclab_browser::BrowserLoad],
    quic: Option<quiclab_browser::netlog::QuicAttempts>,
) -> Discovery {
    let navigations: Vec<DiscoveredLoad> = loads
        .iter()
        .map(|l| {
            let start = l.navigation.timing.start_time;
            let entries = || std::iter::once(&l.navigation.timing).chain(&l.resources);
            let mut by = std::collections::BTreeMap::new();
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

/// What the page client reports: the summary and per-object timings (for a HAR and a waterfall).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PageClientReport {
    pub summary: PageSummary,
    pub objects: Vec<ObjectTiming>,
    /// The loader's FEC counters (h3 with FEC).
    #[serde(default)]
    pub fec: Option<quiclab_stacks::fec_socket::FecCounters>,
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

/// `quiclab child FILE`: reads the configuration, runs it, prints the report; returns the exit code.
pub fn main(config_file: &Path) -> Result<i32> {
    let text = std::fs::read_to_string(config_file)
        .with_context(|| format!("reading {}", config_file.display()))?;
    let config: ChildConfig = serde_json::from_str(&text)
        .with_context(|| format!("{}: not a child configuration", config_file.display()))?;
    match config {
        ChildConfig::Serve(c) => serve(&c).map(|()| 0),
        ChildConfig::Fetch(c) => {
            report_or_timeout(Duration::from_millis(c.timeout_ms), || fetch(&c))
        }
        ChildConfig::PageClient(c) => {
            report_or_timeout(Duration::from_millis(c.timeout_ms), || page_client(&c))
        }
        // A flow that fails or times out is reported as such; the other flows' data stays.
        ChildConfig::FlowsClient(c) => {
            let report = flows_client(&c)?;
            println!("{}", serde_json::to_string(&report)?);
            Ok(0)
        }
        // A download that never recovers reports what it received and why it stopped.
        ChildConfig::SwitchFetch(c) => {
            let report = switch_fetch(&c)?;
            println!("{}", serde_json::to_string(&report)?);
            Ok(0)
        }
        // Likewise a player that stalls past the limit reports what it measured.
        ChildConfig::VideoClient(c) => {
            let report = video_client(&c)?;
            println!("{}", serde_json::to_string(&report)?);
            Ok(0)
        }
        ChildConfig::ChromiumFetch(c) => {
            report_or_timeout(Duration::from_millis(c.timeout_ms), || chromium_fetch(&c))
        }
        // How the program ended is the report; the workload reads what it wrote.
        ChildConfig::Exec(c) => {
            let report = exec(&c)?;
            println!("{}", serde_json::to_string(&report)?);
            Ok(0)
        }
    }
}

/// CPU seconds of the children this process has waited for (and of theirs).
fn children_cpu_s() -> f64 {
    // SAFETY: getrusage(2) fills the struct it is given.
    let usage = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut u);
        u
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// One download by Chromium's fetch(): the certificate's name mapped to the server's address
/// (as a page load from another server), the protocol forced as for page loads.
pub fn chromium_fetch(c: &ChromiumFetchConfig) -> Result<ChromiumFetchReport> {
    let cert = load_client_certificate(&c.cert)?;
    let origin = format!("https://{CHROMIUM_V6_HOST}:{}", c.server.port());
    let mut opts = quiclab_browser::BrowserOptions::new(c.proto, &origin, &cert.spki_sha256_base64);
    opts.timeout = Duration::from_millis(c.timeout_ms);
    opts.extra_args = vec![format!(
        "--host-resolver-rules=MAP {CHROMIUM_V6_HOST} {}",
        match c.server.ip() {
            std::net::IpAddr::V6(a) => format!("[{a}]"),
            std::net::IpAddr::V4(a) => a.to_string(),
        }
    )];
    let before = children_cpu_s();
    let fetch = quiclab_browser::fetch::fetch_with(
        &opts,
        &format!("{origin}{}", c.path),
        c.size,
        quiclab_browser::prefixed(Vec::new()),
    )?;
    Ok(ChromiumFetchReport {
        fetch,
        cpu_s: children_cpu_s() - before,
    })
}

/// Runs another implementation's client to its end (or kills it, by its PID, at the limit).
pub fn exec(c: &ExecConfig) -> Result<ExecReport> {
    use std::os::unix::process::ExitStatusExt;
    let stdout = quiclab_outputs::create_in_claimed(&c.stdout)
        .with_context(|| format!("creating {}", c.stdout.display()))?;
    let mut cmd = std::process::Command::new(&c.program);
    cmd.args(&c.args)
        .stdout(stdout)
        .stdin(std::process::Stdio::null());
    for (k, v) in &c.env {
        cmd.env(k, v);
    }
    let t0 = Instant::now();
    let mut child = cmd
        .spawn()
        .with_context(|| format!("starting {}", c.program.display()))?;
    let limit = Duration::from_millis(c.timeout_ms);
    let mut timed_out = false;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if t0.elapsed() > limit {
            timed_out = true;
            let _ = child.kill();
            break child.wait()?;
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let wall_ms = t0.elapsed().as_secs_f64() * 1e3;
    Ok(ExecReport {
        exit_code: status.code(),
        signal: status.signal(),
        timed_out,
        wall_ms,
        // The only child this process had.
        cpu_s: children_cpu_s(),
    })
}

/// Prints `run`'s report as one line of JSON (exit 0), or its error on stderr with exit code
/// [`EXIT_TIMED_OUT`] when it failed at or after `limit` (it gave up because time ran out).
fn report_or_timeout<R: Serialize>(
    limit: Duration,
    run: impl FnOnce() -> Result<R>,
) -> Result<i32> {
    let t0 = Instant::now();
    match run() {
        Ok(report) => {
            println!("{}", serde_json::to_string(&report)?);
            Ok(0)
        }
        Err(e) if t0.elapsed() >= limit => {
            eprintln!("quiclab: error: {e:#}");
            Ok(EXIT_TIMED_OUT)
        }
        Err(e) => Err(e),
    }
}

/// Runs the server until the process is ended.
pub fn serve(c: &ServeConfig) -> Result<()> {
    let cert = LabCertificate::load(&c.cert, &c.key)?;
    if let Some(dir) = &c.dir
        && !dir.is_dir()
    {
        anyhow::bail!("{}: not a directory", dir.display());
    }
    let mut opts = ServerOptions::new(cert, c.addresses.clone(), c.port);
    opts.dir = c.dir.clone();
    opts.stack = c.stack;
    opts.cwnd_log = c
        .cwnd_log
        .as_deref()
        .map(quiclab_stacks::cwnd::CwndLog::create)
        .transpose()?;
    opts.qlog_dir = c.qlog_dir.clone();
    opts.fec_log = c.fec_log.clone();
    opts.extra_ports = c.extra_ports.clone();
    opts.videos = std::sync::Arc::new(c.videos.clone());
    let ready_file = c.ready_file.clone();
    runtime()?.block_on(quiclab_stacks::server::serve(opts, move || {
        if let Some(f) = ready_file {
            // The harness waits for this file; if it cannot be written, the server's start
            // times out with the server's stderr as the reason.
            if let Err(e) =
                quiclab_outputs::write_in_claimed(&f, std::process::id().to_string().as_bytes())
            {
                eprintln!("quiclab serve: the ready file: {e}");
            }
        }
    }))
}

/// The lab certificate beside `cert` (its key is `key.pem` in the same directory, or in the same
/// file).
fn load_client_certificate(cert: &Path) -> Result<LabCertificate> {
    let dir = cert.parent().unwrap_or(Path::new("."));
    LabCertificate::load(cert, &dir.join("key.pem")).or_else(|_| LabCertificate::load(cert, cert))
}

/// One fetch, with the client's own CPU time.
pub fn fetch(c: &FetchConfig) -> Result<FetchChildReport> {
    let opts = FetchOptions {
        cert: load_client_certificate(&c.cert)?,
        server: c.server,
        protocol: c.proto,
        paths: c.paths.clone(),
        stack: c.stack,
        resume: c.resume,
        zero_rtt: c.zero_rtt,
        verify: c.verify,
        qlog_dir: c.qlog_dir.clone(),
        timeout: Duration::from_millis(c.timeout_ms),
    };
    let report = runtime()?.block_on(quiclab_stacks::client::fetch(&opts))?;
    let (user, system) = quiclab_lab::process::own_cpu_seconds();
    Ok(FetchChildReport {
        report,
        cpu_s: user + system,
    })
}

/// One download across network switches.
pub fn switch_fetch(c: &SwitchFetchConfig) -> Result<SwitchFetchReport> {
    let opts = quiclab_stacks::switching::SwitchDownloadOptions {
        cert: load_client_certificate(&c.cert)?,
        server: c.server,
        protocol: c.proto,
        stack: c.stack,
        size: c.size,
        plan: c.plan.clone(),
        limit: Duration::from_millis(c.timeout_ms),
    };
    let report = runtime()?.block_on(quiclab_stacks::switching::download_across_switches(&opts));
    let (user, system) = quiclab_lab::process::own_cpu_seconds();
    Ok(SwitchFetchReport {
        report,
        cpu_s: user + system,
    })
}

/// Every player of a video run, each in its own task, all on one clock.
pub fn video_client(c: &VideoClientConfig) -> Result<VideoClientReport> {
    let cert = load_client_certificate(&c.cert)?;
    let rt = runtime()?;
    let origin_ns = quiclab_stacks::cwnd::monotonic_ns();
    let players = rt.block_on(async {
        let mut tasks = Vec::new();
        for p in &c.players {
            let opts = quiclab_stacks::video::VideoOptions {
                cert: cert.clone(),
                server: p.server,
                spec: p.spec,
                stack: p.stack,
                content: c.content.clone(),
                player: c.player.clone(),
                abr: c.abr,
                origin_ns,
                limit: Duration::from_millis(c.timeout_ms),
                switching: c.switching.clone(),
            };
            tasks.push(tokio::spawn(async move {
                quiclab_stacks::video::run_player(&opts).await
            }));
        }
        let mut out = Vec::new();
        for t in tasks {
            out.push(t.await);
        }
        out
    });
    let players = players
        .into_iter()
        .collect::<Result<Vec<_>, _>>()
        .context("a player's task ended abnormally")?;
    let (user, system) = quiclab_lab::process::own_cpu_seconds();
    Ok(VideoClientReport {
        origin_ns,
        players,
        cpu_s: user + system,
    })
}

/// Every flow of a mix, each in its own task; a flow's failure is its own (see [`FlowOutcome`]).
pub fn flows_client(c: &FlowsClientConfig) -> Result<FlowsClientReport> {
    let cert = load_client_certificate(&c.cert)?;
    let limit = Duration::from_millis(c.timeout_ms);
    let rt = runtime()?;
    let origin_ns = quiclab_stacks::cwnd::monotonic_ns();
    let flows = rt.block_on(async {
        let mut tasks = Vec::new();
        for (i, &server) in c.servers.iter().enumerate() {
            let (run, cert) = (c.run.clone(), cert.clone());
            tasks.push(tokio::spawn(async move {
                // The offset is the flow's own (stacks' flow client waits it out).
                let flow = quiclab_stacks::flow::run_flow(&run, i, &cert, server, origin_ns);
                match tokio::time::timeout(limit, flow).await {
                    Ok(Ok(r)) => FlowOutcome {
                        report: Some(r),
                        error: None,
                    },
                    Ok(Err(e)) => FlowOutcome {
                        report: None,
                        error: Some(quiclab_stacks::stop::reason_of(&e)),
                    },
                    Err(_) => FlowOutcome {
                        report: None,
                        error: Some(StopReason::TimedOut {
                            limit_s: limit.as_secs_f64(),
                            detail: "the flow had not finished".into(),
                        }),
                    },
                }
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
    });
    let (user, system) = quiclab_lab::process::own_cpu_seconds();
    Ok(FlowsClientReport {
        origin_ns,
        flows,
        cpu_s: user + system,
    })
}

/// The name Chromium loads an IPv6 lab's page (and every discovery run's) from:
/// `--host-resolver-rules` maps it to the server's address. The lab certificate's name.
pub const CHROMIUM_V6_HOST: &str = quiclab_stacks::tls::SERVER_NAME;

/// One page load by the built-in loader or Chromium.
pub fn page_client(c: &PageClientConfig) -> Result<PageClientReport> {
    let cert = load_client_certificate(&c.cert)?;
    let timeout = Duration::from_millis(c.timeout_ms);
    match c.browser {
        Browser::Chromium => chromium_page_client(c, &cert, timeout),
        Browser::Builtin => builtin_page_client(c, cert, timeout),
    }
}

/// A page load (or a warm or discovery run) in headless Chromium.
fn chromium_page_client(
    c: &PageClientConfig,
    cert: &LabCertificate,
    timeout: Duration,
) -> Result<PageClientReport> {
    let nav_unix_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let proto = c.proto.to_string();
    // Over IPv6 Chromium loads a name mapped to the server's address: it does not match
    // an IPv6 literal against --origin-to-force-quic-on (it loaded h2 instead).
    // Discovery runs use the name too: an origin learns its Alt-Svc under its name.
    let (origin, extra_args) = match c.server {
        SocketAddr::V4(_) if !c.discover && !c.by_name => {
            (format!("https://{}", c.server), Vec::new())
        }
        _ => (
            format!("https://{CHROMIUM_V6_HOST}:{}", c.server.port()),
            vec![format!(
                "--host-resolver-rules=MAP {CHROMIUM_V6_HOST} {}",
                match c.server.ip() {
                    std::net::IpAddr::V6(a) => format!("[{a}]"),
                    std::net::IpAddr::V4(a) => a.to_string(),
                }
            )],
        ),
    };
    let mut opts = quiclab_browser::BrowserOptions::new(c.proto, &origin, &cert.spki_sha256_base64);
    opts.timeout = timeout;
    opts.extra_args = extra_args;
    opts.discover = c.discover;
    opts.warm = c.warm;
    let url = format!("{origin}/index.html");
    // A warm load's handshakes, from Chromium's NetLog (None: cold, or unreadable).
    let mut handshakes = None;
    let (load, discovery) = if c.warm {
        let warm =
            quiclab_browser::load_warm_with(&opts, &url, quiclab_browser::prefixed(Vec::new()))?;
        warm.measured.check_protocol(c.proto)?;
        handshakes = warm.handshakes;
        (warm.measured, None)
    } else if c.discover {
        let repeated = quiclab_browser::load_repeatedly_with(
            &opts,
            &url,
            DISCOVERY_NAVIGATIONS,
            quiclab_browser::prefixed(Vec::new()),
        )?;
        let discovery = discovery_of(&repeated.loads, repeated.quic);
        let first = repeated.loads.into_iter().next().context("no navigation")?;
        (first, Some(discovery))
    } else {
        let load = quiclab_browser::load(&opts, &url)?;
        load.check_protocol(c.proto)?;
        (load, None)
    };
    let objects = chromium_objects(&load);
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
    Ok(PageClientReport {
        summary: PageSummary {
            proto,
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
            max_streams: c.max_streams,
            chromium_wall_ms: Some(load.wall_ms),
            connection_details: None,
            warm: c.warm,
            resumed_connections: handshakes.as_ref().map(|h| h.resumed() as usize),
            zero_rtt_accepted_connections: handshakes
                .as_ref()
                .map(|h| h.quic_zero_rtt_accepted as usize),
            chromium_handshakes: handshakes,
            discovery,
        },
        objects,
        fec: None,
    })
}

/// A page load with quiclab's browser-like loader over its own stacks.
fn builtin_page_client(
    c: &PageClientConfig,
    cert: LabCertificate,
    timeout: Duration,
) -> Result<PageClientReport> {
    let proto = c.proto.to_string();
    let mut opts = quiclab_stacks::page_load::PageLoadOptions::new(cert, c.server, c.proto);
    opts.stack = c.stack;
    opts.max_streams = c.max_streams.map(|m| m as usize);
    opts.timeout = timeout;
    opts.warm = c.warm;
    let report = runtime()?.block_on(quiclab_stacks::page_load::load_page(&opts))?;
    let details = &report.connection_details;
    Ok(PageClientReport {
        summary: PageSummary {
            proto,
            browser: Browser::Builtin.name().into(),
            browser_version: None,
            objects: report.objects.len(),
            bytes: report.bytes,
            plt_ms: report.plt_ms,
            ttfb_ms: report.objects.first().map(ObjectTiming::first_byte_ms),
            dom_content_loaded_ms: report.content_load_ms(),
            connections: report.connections,
            negotiated_protocols: report.negotiated_protocols.clone(),
            navigation_start_unix_ms: report.navigation_start_unix_ms,
            max_streams: c.max_streams,
            chromium_wall_ms: None,
            connection_details: Some(report.connection_details.clone()),
            warm: report.warm,
            resumed_connections: Some(details.iter().filter(|c| c.resumed).count()),
            zero_rtt_accepted_connections: Some(
                details
                    .iter()
                    .filter(|c| c.zero_rtt_accepted == Some(true))
                    .count(),
            ),
            chromium_handshakes: None,
            discovery: None,
        },
        objects: report.objects,
        fec: report.fec,
    })
}

/// Chromium's Resource Timing entries as HAR object timings (ms since navigation start).
fn chromium_objects(load: &quiclab_browser::BrowserLoad) -> Vec<ObjectTiming> {
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

/// `quiclab fetch`'s text: the connection, then one line per request.
pub fn fetch_text(out: &FetchChildReport, server: SocketAddr) -> String {
    use std::fmt::Write;
    let report = &out.report;
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

fn env_addr(var: &str) -> Option<IpAddr> {
    std::env::var(var).ok()?.parse().ok()
}

/// The addresses `quiclab serve` listens on (and `fetch` asks): those given, else the lab's
/// (`QUICLAB_SERVER`, `QUICLAB_SERVER6`, set inside a lab).
pub fn lab_addresses(given: &[IpAddr]) -> Result<Vec<IpAddr>> {
    let mut addresses = given.to_vec();
    if addresses.is_empty() {
        addresses.extend(env_addr("QUICLAB_SERVER"));
        addresses.extend(env_addr("QUICLAB_SERVER6"));
    }
    if addresses.is_empty() {
        anyhow::bail!(
            "no server address: give one (--addr, --server), or run inside a lab, which sets QUICLAB_SERVER"
        );
    }
    Ok(addresses)
}

/// `quiclab serve`'s files checked before it starts: the directory it serves exists, the files it
/// writes are new (or replaced with `force`, never through a symbolic link), the qlog directory
/// is quiclab's.
pub fn check_serve_outputs(c: &ServeConfig, force: bool) -> Result<()> {
    if let Some(dir) = &c.dir
        && !dir.is_dir()
    {
        anyhow::bail!("--dir {}: not a directory", dir.display());
    }
    for (file, flag) in [(&c.ready_file, "--ready-file"), (&c.cwnd_log, "--cwnd-log")] {
        if let Some(f) = file {
            quiclab_outputs::check_user_file(f, flag, force)?;
        }
    }
    if let Some(d) = &c.qlog_dir {
        quiclab_outputs::claim_dir(d, "--qlog-dir")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configurations_round_trip_and_reject_unknown_roles() {
        let c = ChildConfig::Fetch(FetchConfig {
            proto: Protocol::H3,
            cert: "/w/cert.pem".into(),
            server: "100.64.0.2:443".parse().unwrap(),
            paths: vec!["/bytes/10".into()],
            resume: false,
            zero_rtt: false,
            verify: true,
            qlog_dir: None,
            timeout_ms: 1000,
            stack: StackOptions {
                gquic_n: 4,
                ..Default::default()
            },
        });
        let text = serde_json::to_string(&c).unwrap();
        assert!(
            text.contains("\"role\":\"fetch\"") && text.contains("\"gquic_n\":4"),
            "{text}"
        );
        let ChildConfig::Fetch(back) = serde_json::from_str(&text).unwrap() else {
            panic!("a fetch")
        };
        assert_eq!(back.stack.gquic_n, 4);
        assert!(serde_json::from_str::<ChildConfig>("{\"role\":\"dance\"}").is_err());
    }

    #[test]
    fn a_fetch_report_without_its_fields_is_refused() {
        // The schema-mismatch bug: such a report was once stored as an `ok` run of 0 bytes.
        let e = crate::harness::parse_report::<FetchChildReport>("{\"cpu_s\": 0.1}").unwrap_err();
        assert!(e.contains("missing field"), "{e}");
    }
}
