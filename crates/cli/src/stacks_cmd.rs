//! `quiclab serve`, `quiclab fetch` and `quiclab bulk`: the real protocol stacks across a lab.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Args;
use quiclab_lab::Side;
use quiclab_proto::options::{Protocol, QuicCongestion, TcpCongestion, TlsVersion};
use quiclab_stacks::client::{FetchOptions, FetchReport};
use quiclab_stacks::server::ServerOptions;
use quiclab_stacks::tls::LabCertificate;
use serde_json::json;

use crate::link_args::LinkArgs;

#[derive(Args, Debug, Clone)]
pub struct StackArgs {
    /// TLS version for HTTP/1.1 and HTTP/2 (QUIC always uses TLS 1.3)
    #[arg(long, value_name = "1.2|1.3")]
    pub tls: Option<TlsVersion>,
    /// TCP congestion control, set per socket on both ends
    #[arg(long, default_value = "cubic", value_name = "cubic|reno|bbr")]
    pub tcp_cc: TcpCongestion,
    /// QUIC congestion control on both ends
    #[arg(
        long,
        default_value = "cubic",
        value_name = "cubic|newreno|bbr|gquic-cubic"
    )]
    pub quic_cc: QuicCongestion,
    /// Initial congestion window of QUIC, in packets (TCP's is the kernel's 10)
    #[arg(long, default_value_t = 10)]
    pub initial_window: u64,
    /// Connections emulated by gquic-cubic (N; β = (N−1+0.7)/N)
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..))]
    pub gquic_n: u32,
}

impl StackArgs {
    /// Makes the choice of N visible to the controller factory (and to child processes).
    fn apply(&self) {
        // SAFETY: called on the main thread before any other thread is started.
        unsafe { std::env::set_var("QUICLAB_GQUIC_N", self.gquic_n.to_string()) };
    }
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    #[arg(long)]
    pub cert: PathBuf,
    #[arg(long)]
    pub key: PathBuf,
    /// Serve the files of this directory (and always /bytes/<N>)
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Addresses to listen on (default: $QUICLAB_SERVER and $QUICLAB_SERVER6)
    #[arg(long = "addr")]
    pub addrs: Vec<IpAddr>,
    #[arg(long, default_value_t = 443)]
    pub port: u16,
    /// Create this file once every listener is up
    #[arg(long)]
    pub ready_file: Option<PathBuf>,
    /// Sample every connection's congestion state (TCP_INFO / QUIC path stats) into this CSV
    #[arg(long, value_name = "FILE")]
    pub cwnd_log: Option<PathBuf>,
    /// Write a qlog of every QUIC connection into this directory
    #[arg(long, value_name = "DIR")]
    pub qlog_dir: Option<PathBuf>,
    #[command(flatten)]
    pub stack: StackArgs,
}

#[derive(Args, Debug)]
pub struct FetchArgs {
    /// h1 (HTTP/1.1, TLS, TCP), h2 (HTTP/2, TLS, TCP) or h3 (HTTP/3, QUIC)
    #[arg(long)]
    pub proto: Protocol,
    /// The lab certificate to trust (and nothing else)
    #[arg(long)]
    pub cert: PathBuf,
    /// Server address (default: $QUICLAB_SERVER, port 443)
    #[arg(long)]
    pub server: Option<SocketAddr>,
    /// Obtain a session ticket on a first connection, then measure a resumed second one
    #[arg(long)]
    pub resume: bool,
    /// Like --resume, and send the request in 0-RTT (h3)
    #[arg(long = "0rtt")]
    pub zero_rtt: bool,
    /// Check /bytes/<N> bodies byte by byte
    #[arg(long)]
    pub verify: bool,
    /// Write a qlog of each QUIC connection into this directory
    #[arg(long, value_name = "DIR")]
    pub qlog_dir: Option<PathBuf>,
    /// Give up after this long
    #[arg(long, default_value = "120s",
          value_parser = |s: &str| quiclab_link::units::parse_duration(s).map_err(|e| e.to_string()))]
    pub timeout: u64,
    /// Print one JSON object
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub stack: StackArgs,
    /// Paths to request, e.g. /bytes/1000000
    #[arg(required = true)]
    pub paths: Vec<String>,
}

fn env_addr(var: &str) -> Option<IpAddr> {
    std::env::var(var).ok()?.parse().ok()
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

pub fn serve(args: ServeArgs) -> Result<i32> {
    args.stack.apply();
    let cert = LabCertificate::load(&args.cert, &args.key)?;
    let mut addresses = args.addrs.clone();
    if addresses.is_empty() {
        addresses.extend(env_addr("QUICLAB_SERVER"));
        addresses.extend(env_addr("QUICLAB_SERVER6"));
    }
    if addresses.is_empty() {
        bail!(
            "no address to listen on: give --addr (or run inside a lab, which sets QUICLAB_SERVER)"
        );
    }
    if let Some(dir) = &args.dir
        && !dir.is_dir()
    {
        bail!("--dir {}: not a directory", dir.display());
    }
    let opts = ServerOptions {
        cert,
        addresses,
        port: args.port,
        dir: args.dir.clone(),
        tls: args.stack.tls,
        tcp_cc: args.stack.tcp_cc,
        quic_cc: args.stack.quic_cc,
        initial_window_packets: args.stack.initial_window,
        cwnd_log: args
            .cwnd_log
            .as_deref()
            .map(quiclab_stacks::cwnd::CwndLog::create)
            .transpose()?,
        qlog_dir: args.qlog_dir.clone(),
    };
    let ready_file = args.ready_file.clone();
    runtime()?.block_on(quiclab_stacks::server::serve(opts, move || {
        if let Some(f) = ready_file {
            let _ = std::fs::write(f, std::process::id().to_string());
        }
    }))?;
    Ok(0)
}

pub fn fetch(args: FetchArgs) -> Result<i32> {
    args.stack.apply();
    let dir = args.cert.parent().unwrap_or(std::path::Path::new("."));
    let cert = LabCertificate::load(&args.cert, &dir.join("key.pem"))
        .or_else(|_| LabCertificate::load(&args.cert, &args.cert))?;
    let server = match args.server {
        Some(s) => s,
        None => SocketAddr::new(
            env_addr("QUICLAB_SERVER").context(
                "no server: give --server (or run inside a lab, which sets QUICLAB_SERVER)",
            )?,
            443,
        ),
    };
    let opts = FetchOptions {
        cert,
        server,
        protocol: args.proto,
        paths: args.paths.clone(),
        tls: args.stack.tls,
        tcp_cc: args.stack.tcp_cc,
        quic_cc: args.stack.quic_cc,
        initial_window_packets: args.stack.initial_window,
        resume: args.resume,
        zero_rtt: args.zero_rtt,
        verify: args.verify,
        qlog_dir: args.qlog_dir.clone(),
        timeout: Duration::from_nanos(args.timeout),
    };
    let report = runtime()?.block_on(quiclab_stacks::client::fetch(&opts))?;
    let (user, system) = quiclab_lab::process::own_cpu_seconds();
    if args.json {
        let mut v = serde_json::to_value(&report)?;
        v["cpu_s"] = json!(user + system);
        println!("{}", serde_json::to_string(&v)?);
    } else {
        println!(
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
        );
        for r in &report.requests {
            println!(
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
            );
        }
    }
    Ok(
        if report.requests.iter().all(|r| r.verified != Some(false)) {
            0
        } else {
            1
        },
    )
}

#[derive(Args, Debug)]
pub struct BulkArgs {
    /// h1, h2 or h3
    #[arg(long)]
    pub proto: Protocol,
    /// Bytes to download, e.g. 10MB, 500kB, 1MiB
    #[arg(long, default_value = "10MB", value_parser = parse_size)]
    pub size: u64,
    #[arg(long)]
    pub resume: bool,
    #[arg(long = "0rtt")]
    pub zero_rtt: bool,
    /// Congestion control of the protocol used (TCP: cubic|reno|bbr; QUIC: cubic|newreno|bbr|gquic-cubic)
    #[arg(long, default_value = "cubic")]
    pub cc: String,
    /// TLS version for h1/h2
    #[arg(long, value_name = "1.2|1.3")]
    pub tls: Option<TlsVersion>,
    /// Connections emulated by gquic-cubic (N; β = (N−1+0.7)/N)
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..))]
    pub gquic_n: u32,
    /// Over IPv6
    #[arg(long)]
    pub ipv6: bool,
    /// Keep the emulator's packet log (link.log), the server's congestion samples (cwnd.csv) and the
    /// fetch/serve outputs in this directory
    #[arg(long, value_name = "DIR")]
    pub trace: Option<PathBuf>,
    /// Print one JSON object
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub link: LinkArgs,
}

pub fn parse_size(s: &str) -> Result<u64, String> {
    match quiclab_link::units::parse_queue(s) {
        Ok(quiclab_link::QueueLimit::Bytes(b)) if b > 0 => Ok(b),
        _ => Err(format!(
            "expected a size such as 10MB, 500kB, 1MiB or 1000B (units B, kB, KiB, MB, MiB); got {s:?}"
        )),
    }
}

/// One bulk transfer's parameters (from `quiclab bulk` or a benchmark).
pub struct BulkRun {
    pub proto: Protocol,
    pub size: u64,
    pub resume: bool,
    pub zero_rtt: bool,
    pub tcp_cc: TcpCongestion,
    pub quic_cc: QuicCongestion,
    pub tls: Option<TlsVersion>,
    pub gquic_n: u32,
    pub ipv6: bool,
    /// Keep the traces here; None = a temporary directory, removed afterwards.
    pub trace: Option<PathBuf>,
    /// With `trace`: also write qlogs of every QUIC connection (costly: off in the runner).
    pub qlog: bool,
    /// Give up on the transfer after this long (None: 30 s + 4 × the ideal transfer time).
    pub timeout: Option<Duration>,
}

/// The transfer did not finish within its time limit (the runner records the run as `timeout`).
#[derive(Debug)]
pub struct TransferTimeout(pub Duration);

impl std::fmt::Display for TransferTimeout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the transfer did not finish within its time limit of {:.1} s",
            self.0.as_secs_f64()
        )
    }
}

impl std::error::Error for TransferTimeout {}

pub fn bulk(args: BulkArgs) -> Result<i32> {
    let (tcp_cc, quic_cc) = crate::page_cmd::congestion(args.proto, &args.cc).context("--cc")?;
    if args.zero_rtt && args.proto != Protocol::H3 {
        bail!("--0rtt needs --proto h3 (quiclab's TCP stacks do not send TLS early data)");
    }
    let spec = args.link.to_spec()?;
    let mut running = args.link.start_traced_lab(&spec, args.trace.as_deref())?;
    let run = BulkRun {
        proto: args.proto,
        size: args.size,
        resume: args.resume,
        zero_rtt: args.zero_rtt,
        tcp_cc,
        quic_cc,
        tls: args.tls,
        gquic_n: args.gquic_n,
        ipv6: args.ipv6,
        trace: args.trace.clone(),
        qlog: true,
        timeout: None,
    };
    let doc = transfer(&run, &mut running)?;
    drop(running);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        let f = |k: &str| doc[k].as_f64().unwrap_or(f64::NAN);
        println!(
            "{} {} bytes over {} (TLS {}{}{}): connect {} ms, handshake {:.1} ms, ttfb {:.1} ms, total {:.1} ms, goodput {:.3} Mbit/s{}, loss ratio {:.4}",
            run.proto,
            doc["bytes"],
            doc["negotiated"].as_str().unwrap_or(""),
            doc["tls_version"].as_str().unwrap_or(""),
            if doc["resumed"] == true {
                ", resumed"
            } else {
                ""
            },
            if doc["zero_rtt"] == true {
                ", 0-RTT"
            } else {
                ""
            },
            doc["connect_ms"]
                .as_f64()
                .map_or("-".into(), |m| format!("{m:.1}")),
            f("handshake_ms"),
            f("ttfb_ms"),
            f("total_ms"),
            f("goodput_mbps"),
            doc["utilization"]
                .as_f64()
                .map_or(String::new(), |u| format!(" (utilisation {u:.3})")),
            f("loss_ratio")
        );
    }
    Ok(if doc["verified"] == false { 1 } else { 0 })
}

/// Starts `quiclab serve` (`serve` is `lab.command(Side::Server, exe)` with the `serve` argument
/// and its options already added) with the certificate saved in `work`, and waits until every listener is up.
pub fn start_server(
    lab: &quiclab_lab::Lab,
    mut serve: std::process::Command,
    work: &std::path::Path,
) -> Result<u32> {
    let ready = work.join("ready");
    let _ = std::fs::remove_file(&ready);
    serve
        .arg("--cert")
        .arg(work.join("cert.pem"))
        .arg("--key")
        .arg(work.join("key.pem"))
        .arg("--ready-file")
        .arg(&ready);
    serve.stderr(std::fs::File::create(work.join("serve.stderr"))?);
    let server_pid = lab.spawn(serve)?;
    let t = Instant::now();
    while !ready.exists() {
        if let Some(status) = lab.wait_child(server_pid, Some(Duration::ZERO))? {
            bail!(
                "the server exited before it was ready ({status}): {}",
                std::fs::read_to_string(work.join("serve.stderr"))
                    .unwrap_or_default()
                    .trim()
            );
        }
        if t.elapsed() > Duration::from_secs(10) {
            bail!("the server was not ready within 10 s");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(server_pid)
}

/// The time limit of a transfer when none is given: 30 s for set-up and handshakes plus four times
/// the transfer's duration at the link's mean rate (losses and slow start need headroom).
pub fn default_timeout(size: u64, spec: &quiclab_lab::LinkSpec) -> Duration {
    Duration::from_secs(30)
        + spec.downlink.mean_rate_bps().map_or(Duration::ZERO, |r| {
            Duration::from_secs_f64(size as f64 * 8.0 / r * 4.0)
        })
}

/// Runs one bulk transfer in a running lab: a fresh certificate, `quiclab serve` in the server
/// namespace, `quiclab fetch` in the client's; stops the emulator (if any) and returns the result.
pub fn transfer(run: &BulkRun, running: &mut quiclab_lab::RunningLab) -> Result<serde_json::Value> {
    transfer_full(run, running).map(|(doc, _)| doc)
}

/// [`transfer`], also returning the emulator's fidelity report as a value (None over veth).
pub fn transfer_full(
    run: &BulkRun,
    running: &mut quiclab_lab::RunningLab,
) -> Result<(serde_json::Value, Option<quiclab_lab::FidelityReport>)> {
    let (tcp_cc, quic_cc) = (run.tcp_cc, run.quic_cc);
    let spec = running.spec.clone();
    let work = match &run.trace {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("quiclab-bulk-{}", running.lab.id)),
    };
    std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    let lab = &running.lab;
    let server_ip: IpAddr = if run.ipv6 {
        lab.address_v6(Side::Server).into()
    } else {
        lab.address_v4(Side::Server).into()
    };
    let cert = LabCertificate::generate(&[
        lab.address_v4(Side::Server).into(),
        lab.address_v6(Side::Server).into(),
    ])?;
    cert.save(&work)?;
    let exe = crate::self_exe::path()?;
    let exe = exe.to_str().context("executable path")?;
    let cc_flags = |c: &mut std::process::Command| {
        c.args([
            "--tcp-cc",
            tcp_cc.kernel_name(),
            "--quic-cc",
            &quic_cc.to_string(),
        ]);
        if let Some(t) = run.tls {
            c.args(["--tls", &t.to_string()]);
        }
        c.args(["--gquic-n", &run.gquic_n.to_string()]);
    };

    // The server, in the server namespace.
    let mut serve = lab.command(Side::Server, exe);
    serve.arg("serve");
    if run.trace.is_some() {
        serve.arg("--cwnd-log").arg(work.join("cwnd.csv"));
        if run.qlog {
            serve.arg("--qlog-dir").arg(&work);
        }
    }
    cc_flags(&mut serve);
    let server_pid = start_server(lab, serve, &work)?;

    // The client, in the client namespace.
    let timeout = run
        .timeout
        .unwrap_or_else(|| default_timeout(run.size, &spec));
    let mut fetch = lab.command(Side::Client, exe);
    fetch
        .args([
            "fetch",
            "--json",
            "--verify",
            "--proto",
            &run.proto.to_string(),
        ])
        .arg("--cert")
        .arg(work.join("cert.pem"))
        .args(["--server", &SocketAddr::new(server_ip, 443).to_string()])
        .args(["--timeout", &format!("{}ms", timeout.as_millis())]);
    cc_flags(&mut fetch);
    if run.resume {
        fetch.arg("--resume");
    }
    if run.zero_rtt {
        fetch.arg("--0rtt");
    }
    if run.trace.is_some() && run.qlog {
        fetch.arg("--qlog-dir").arg(&work);
    }
    fetch.arg(format!("/bytes/{}", run.size));
    fetch.stdout(std::fs::File::create(work.join("fetch.json"))?);
    fetch.stderr(std::fs::File::create(work.join("fetch.stderr"))?);
    let fetch_pid = lab.spawn(fetch)?;
    // The client gives up itself at `timeout`; the grace period covers its exit.
    let Some(status) = lab.wait_child(fetch_pid, Some(timeout + Duration::from_secs(5)))? else {
        return Err(TransferTimeout(timeout).into());
    };
    let server_cpu =
        quiclab_lab::process::process_cpu_seconds(server_pid as i32).unwrap_or(f64::NAN);
    let fidelity = if running.emulated() {
        Some(running.stop_emulator()?)
    } else {
        None
    };
    let out = std::fs::read_to_string(work.join("fetch.json")).unwrap_or_default();
    let stderr = std::fs::read_to_string(work.join("fetch.stderr")).unwrap_or_default();
    if run.trace.is_none() {
        let _ = std::fs::remove_dir_all(&work);
    }
    if !status.success() {
        if stderr.contains("did not finish within") {
            return Err(anyhow::Error::new(TransferTimeout(timeout))
                .context(format!("the client gave up: {}", stderr.trim())));
        }
        bail!("the client failed ({status}): {}", stderr.trim());
    }
    let v: serde_json::Value = serde_json::from_str(out.trim())
        .with_context(|| format!("reading the client's report: {out:?}"))?;
    let report: FetchReport = serde_json::from_value(v.clone()).unwrap_or_default();

    let req = report.requests.first().cloned().unwrap_or_default();
    let transfer_s = (req.last_byte_ms - req.request_sent_ms).max(1e-9) / 1e3;
    let goodput = req.bytes as f64 * 8.0 / transfer_s;
    let configured = spec.downlink.mean_rate_bps();
    let gb = req.bytes.max(1) as f64 / 1e9;
    let doc = json!({
        "proto": run.proto.to_string(),
        "negotiated": report.connection.protocol,
        "tls_version": report.connection.tls_version,
        "resumed": report.connection.resumed,
        "zero_rtt": report.connection.zero_rtt_accepted,
        "connect_ms": report.connection.tcp_connect_ms,
        "handshake_ms": report.connection.handshake_ms,
        "ttfb_ms": req.first_byte_ms,
        "total_ms": req.last_byte_ms,
        "bytes": req.bytes,
        "verified": req.verified,
        "goodput_mbps": goodput / 1e6,
        "utilization": configured.map(|r| goodput / r),
        "loss_ratio": fidelity.as_ref().map(|f| f.downlink.model.counters.loss_ratio()),
        "cpu_client_s": v["cpu_s"],
        "cpu_server_s": server_cpu,
        "cpu_client_s_per_gb": v["cpu_s"].as_f64().map(|c| c / gb),
        "cpu_server_s_per_gb": server_cpu / gb,
        "cpu_emulator_s": fidelity.as_ref().map(|f| f.cpu_core_fraction * f.wall_seconds),
        "congestion_control": if run.proto == Protocol::H3 { quic_cc.to_string() } else { tcp_cc.kernel_name().to_string() },
        "path": if fidelity.is_some() { "emulator" } else { "veth" },
        "link": spec.describe(),
        "fidelity": fidelity,
    });
    Ok((doc, fidelity))
}
