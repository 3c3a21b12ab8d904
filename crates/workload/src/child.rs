//! The halves of a workload that run inside a lab's namespaces, as `quiclab child CONFIG`: the
//! server (`quiclab serve`), the bulk client (`quiclab fetch`), the page client, the flows client
//! and the video client.
//!
//! Each is told everything by one serialised [`ChildConfig`] and prints one JSON report. A client
//! that fails once its time limit has passed exits with [`crate::harness::EXIT_TIMED_OUT`]: the
//! parent learns "timeout" from the exit code, not from the wording of an error.

use quiclab_lab::process::{children_cpu_seconds, children_cpu_user_system};
use quiclab_model::endpoint::CpuSplit;
pub use quiclab_model::page::{DISCOVERY_NAVIGATIONS, DiscoveredLoad, Discovery, PageSummary};
use quiclab_model::run::{bulk::BulkRun, page::PageRun, video::VideoRun};
use quiclab_stacks::page_load::PageLoadOptions;
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

/// A bulk download (the run's `size` bytes over its protocol) by Chromium's `fetch()`
/// ([`quiclab_browser::fetch`]), run in the client namespace like a page load.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChromiumFetchConfig {
    pub cert: PathBuf,
    pub run: BulkRun,
    pub server: SocketAddr,
    /// `/bytes/N`.
    pub path: String,
    pub timeout_ms: u64,
}

/// What Chromium's fetch measured, with the CPU time of Chromium's processes (those this
/// process and Chromium reaped).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChromiumFetchReport {
    pub fetch: quiclab_browser::fetch::BrowserFetch,
    pub cpu_s: f64,
    #[serde(default)]
    pub cpu_split: Option<CpuSplit>,
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
    /// Its working directory (None: the child's own).
    #[serde(default)]
    pub cwd: Option<PathBuf>,
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
    #[serde(default)]
    pub cpu_split: Option<CpuSplit>,
}

/// The run's download across network switches (see `quiclab_stacks::switching`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SwitchFetchConfig {
    pub cert: PathBuf,
    pub run: BulkRun,
    pub server: SocketAddr,
    pub plan: quiclab_stacks::switching::SwitchPlan,
    pub timeout_ms: u64,
}

/// What the switch-fetch client reports.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SwitchFetchReport {
    #[serde(flatten)]
    pub report: quiclab_stacks::switching::SwitchDownloadReport,
    pub cpu_s: f64,
    #[serde(default)]
    pub cpu_split: Option<CpuSplit>,
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
    /// Video contents served at `/video/<name>/<rep>/<n>` (and to AStream at `/astream/…`).
    #[serde(default)]
    pub videos: Vec<quiclab_video::Content>,
    /// Also plain HTTP/1.1 on this port (AStream's client).
    #[serde(default)]
    pub plain_http_port: Option<u16>,
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

pub use quiclab_model::run::page::Browser;

/// The client half of a page load: the run itself, and what the lab adds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PageClientConfig {
    pub cert: PathBuf,
    pub run: PageRun,
    pub server: SocketAddr,
    pub timeout_ms: u64,
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

/// The client half of a video run: the run itself, and what the lab adds. Every player runs in
/// one process, on one clock.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VideoClientConfig {
    pub cert: PathBuf,
    pub run: VideoRun,
    pub server: SocketAddr,
    /// Give up on players still playing this long after the start (their reports say so).
    pub timeout_ms: u64,
    /// The network switches the client lives through (every player moves with it).
    #[serde(default)]
    pub switching: Option<quiclab_stacks::switching::SwitchPlan>,
}

pub use quiclab_model::run::video::VideoClientReport;

/// What `quiclab fetch` reports: the stacks' report and the client's own CPU time.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FetchChildReport {
    #[serde(flatten)]
    pub report: FetchReport,
    /// User + system CPU seconds of the client process.
    pub cpu_s: f64,
    #[serde(default)]
    pub cpu_split: Option<CpuSplit>,
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

/// One download by Chromium's fetch(): the certificate's name mapped to the server's address
/// (as a page load from another server), the protocol forced as for page loads.
pub fn chromium_fetch(c: &ChromiumFetchConfig) -> Result<ChromiumFetchReport> {
    let cert = load_client_certificate(&c.cert)?;
    let (origin, extra_args) = quiclab_browser::page::origin_for(c.server, true);
    let mut opts =
        quiclab_browser::BrowserOptions::new(c.run.proto, &origin, &cert.spki_sha256_base64);
    opts.timeout = Duration::from_millis(c.timeout_ms);
    opts.extra_args = extra_args;
    let before = children_cpu_user_system();
    let fetch = quiclab_browser::fetch::fetch_with(
        &opts,
        &format!("{origin}{}", c.path),
        c.run.size,
        quiclab_browser::prefixed(Vec::new()),
    )?;
    let after = children_cpu_user_system();
    let split = CpuSplit::from((after.0 - before.0, after.1 - before.1));
    Ok(ChromiumFetchReport {
        fetch,
        cpu_s: split.user_s + split.system_s,
        cpu_split: Some(split),
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
    if let Some(dir) = &c.cwd {
        cmd.current_dir(dir);
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
        cpu_s: children_cpu_seconds(),
        cpu_split: Some(children_cpu_user_system().into()),
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
    opts.plain_http_port = c.plain_http_port;
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
    Ok(FetchChildReport {
        report,
        cpu_s: own_cpu_s(),
        cpu_split: Some(quiclab_lab::process::own_cpu_seconds().into()),
    })
}

/// One download across network switches.
pub fn switch_fetch(c: &SwitchFetchConfig) -> Result<SwitchFetchReport> {
    let opts = quiclab_stacks::switching::SwitchDownloadOptions {
        cert: load_client_certificate(&c.cert)?,
        server: c.server,
        protocol: c.run.proto,
        stack: c.run.stack,
        size: c.run.size,
        plan: c.plan.clone(),
        limit: Duration::from_millis(c.timeout_ms),
    };
    let report = runtime()?.block_on(quiclab_stacks::switching::download_across_switches(&opts));
    Ok(SwitchFetchReport {
        report,
        cpu_s: own_cpu_s(),
        cpu_split: Some(quiclab_lab::process::own_cpu_seconds().into()),
    })
}

/// Every player of a video run on one clock (see `quiclab_stacks::video::run_players`).
pub fn video_client(c: &VideoClientConfig) -> Result<VideoClientReport> {
    let cert = load_client_certificate(&c.cert)?;
    let origin_ns = quiclab_stacks::cwnd::monotonic_ns();
    let limit = Duration::from_millis(c.timeout_ms);
    let players = runtime()?.block_on(quiclab_stacks::video::run_players(
        &c.run,
        &cert,
        c.server,
        origin_ns,
        limit,
        c.switching.clone(),
    ))?;
    Ok(VideoClientReport {
        origin_ns,
        players,
        cpu_s: own_cpu_s(),
        cpu_split: Some(quiclab_lab::process::own_cpu_seconds().into()),
    })
}

/// Every flow of a mix; a flow's failure is its own (see `quiclab_stacks::flow::run_flows`).
pub fn flows_client(c: &FlowsClientConfig) -> Result<FlowsClientReport> {
    let cert = load_client_certificate(&c.cert)?;
    let origin_ns = quiclab_stacks::cwnd::monotonic_ns();
    let limit = Duration::from_millis(c.timeout_ms);
    let flows = runtime()?.block_on(quiclab_stacks::flow::run_flows(
        &c.run, &cert, &c.servers, origin_ns, limit,
    ));
    Ok(FlowsClientReport {
        origin_ns,
        flows,
        cpu_s: own_cpu_s(),
        cpu_split: Some(quiclab_lab::process::own_cpu_seconds().into()),
    })
}

/// User + system CPU seconds of this process so far.
fn own_cpu_s() -> f64 {
    let (user, system) = quiclab_lab::process::own_cpu_seconds();
    user + system
}

/// One page load by the built-in loader or Chromium.
pub fn page_client(c: &PageClientConfig) -> Result<PageClientReport> {
    let cert = load_client_certificate(&c.cert)?;
    let timeout = Duration::from_millis(c.timeout_ms);
    match c.run.browser {
        Browser::Chromium => {
            let (summary, objects) = quiclab_browser::page::load_page(
                &c.run,
                &cert.spki_sha256_base64,
                c.server,
                timeout,
            )?;
            Ok(PageClientReport {
                summary,
                objects,
                fec: None,
            })
        }
        Browser::Builtin => {
            let opts = PageLoadOptions::of_run(&c.run, cert, c.server, timeout);
            let report = runtime()?.block_on(quiclab_stacks::page_load::load_page(&opts))?;
            Ok(PageClientReport {
                summary: report.summary(c.run.max_streams),
                objects: report.objects,
                fec: report.fec,
            })
        }
    }
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
