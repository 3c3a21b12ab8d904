//! `quiclab page`: one page load across a fresh lab, by quiclab's browser-like loader or by headless
//! Chromium, with a HAR file and a waterfall figure.
//!
//! The outer process owns the lab: it writes the page, starts `quiclab serve --dir` in the server
//! namespace and `quiclab page-client` in the client namespace, then reads the client's JSON. The
//! client runs the loader (`quiclab_stacks::page_load`) or Chromium (`quiclab_browser`) from inside
//! the client namespace, so neither needs to know about namespaces.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use clap::Args;
use quiclab_lab::Side;
use quiclab_page::har::{HarPage, ObjectTiming};
use quiclab_proto::options::{Protocol, QuicCongestion, TcpCongestion, TlsVersion};
use quiclab_stacks::tls::LabCertificate;
use serde_json::{Value, json};

use crate::link_args::LinkArgs;

fn duration(s: &str) -> Result<Duration, String> {
    quiclab_link::units::parse_duration(s)
        .map(Duration::from_nanos)
        .map_err(|e| e.to_string())
}

#[derive(Args, Debug)]
pub struct PageArgs {
    /// h1 (HTTP/1.1, up to 6 TLS/TCP connections), h2 (one TLS/TCP connection) or h3 (one QUIC)
    #[arg(long)]
    pub proto: Protocol,
    /// A built-in page: carlucci-{small,medium,large}, megyesi-{5,50}-{small,large}
    #[arg(
        long,
        required_unless_present = "page_dir",
        conflicts_with = "page_dir"
    )]
    pub page: Option<String>,
    /// A directory with an index.html; its objects are discovered from the HTML and CSS
    #[arg(long, value_name = "DIR")]
    pub page_dir: Option<PathBuf>,
    /// builtin (quiclab's loader) or chromium (headless Chromium over CDP)
    #[arg(long, default_value = "builtin", value_parser = ["builtin", "chromium"])]
    pub browser: String,
    /// Write the load as a HAR 1.2 file
    #[arg(long, value_name = "FILE")]
    pub har: Option<PathBuf>,
    /// Write a waterfall figure (FILE.svg, or FILE.png with an SVG beside it)
    #[arg(long, value_name = "FILE")]
    pub waterfall: Option<PathBuf>,
    /// Most concurrent requests on the h2/h3 connection (early QUIC multiplexed 6)
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_streams: Option<u64>,
    /// Congestion control (h1/h2: cubic|reno|bbr; h3: cubic|newreno|bbr|gquic-cubic)
    #[arg(long, default_value = "cubic")]
    pub cc: String,
    /// TLS version for h1/h2
    #[arg(long, value_name = "1.2|1.3")]
    pub tls: Option<TlsVersion>,
    /// Give up on the load after this long
    #[arg(long, default_value = "60s", value_parser = duration)]
    pub timeout: Duration,
    /// Keep the packet log, congestion samples and client/server output in this directory
    #[arg(long, value_name = "DIR")]
    pub trace: Option<PathBuf>,
    /// Print one JSON object
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub link: LinkArgs,
}

/// Where a page comes from.
#[derive(Debug, Clone)]
pub enum PageSource {
    Builtin(String),
    Dir(PathBuf),
}

impl PageSource {
    pub fn name(&self) -> String {
        match self {
            PageSource::Builtin(n) => n.clone(),
            PageSource::Dir(d) => d.display().to_string(),
        }
    }

    /// Checks the page before any lab is built: a known name, or a directory whose index.html and
    /// every object it references exist.
    pub fn validate(&self) -> Result<()> {
        match self {
            PageSource::Builtin(n) => {
                quiclab_page::corpus::lookup(n).map_err(|e| anyhow!("{e}"))?;
            }
            PageSource::Dir(d) => {
                quiclab_page::discover::load_dir(d).map_err(|e| anyhow!("{e}"))?;
            }
        }
        Ok(())
    }
}

/// One page load's parameters.
#[derive(Debug, Clone)]
pub struct PageRun {
    pub proto: Protocol,
    pub page: PageSource,
    pub chromium: bool,
    pub max_streams: Option<u64>,
    pub tls: Option<TlsVersion>,
    pub tcp_cc: TcpCongestion,
    pub quic_cc: QuicCongestion,
    pub timeout: Duration,
    /// Keep traces (packet log, cwnd.csv, outputs) here; None = a temporary directory.
    pub trace: Option<PathBuf>,
}

/// Splits a congestion-control name by protocol (TCP for h1/h2, QUIC for h3): `--cc` of `bulk` and
/// `page`, `cc` of scenarios.
pub fn congestion(proto: Protocol, cc: &str) -> Result<(TcpCongestion, QuicCongestion)> {
    Ok(match proto {
        Protocol::H3 => (
            TcpCongestion::Cubic,
            cc.parse::<QuicCongestion>()
                .map_err(|e| anyhow!("{e} (for h3: cubic, newreno, bbr, gquic-cubic)"))?,
        ),
        _ => (
            cc.parse::<TcpCongestion>()
                .map_err(|e| anyhow!("{e} (for h1/h2: cubic, reno, bbr)"))?,
            QuicCongestion::Cubic,
        ),
    })
}

pub fn page(args: PageArgs) -> Result<i32> {
    let source = match (&args.page, &args.page_dir) {
        (Some(p), _) => PageSource::Builtin(p.clone()),
        (None, Some(d)) => PageSource::Dir(d.clone()),
        (None, None) => bail!("give --page NAME or --page-dir DIR"),
    };
    source.validate().with_context(|| {
        if args.page.is_some() {
            "--page"
        } else {
            "--page-dir"
        }
    })?;
    let (tcp_cc, quic_cc) = congestion(args.proto, &args.cc).context("--cc")?;
    if args.browser == "chromium" {
        quiclab_browser::check_chromium(Path::new(quiclab_browser::DEFAULT_CHROMIUM))?;
    }
    let spec = args.link.to_spec()?;
    let mut running = args.link.start_traced_lab(&spec, args.trace.as_deref())?;
    let run = PageRun {
        proto: args.proto,
        page: source,
        chromium: args.browser == "chromium",
        max_streams: args.max_streams,
        tls: args.tls,
        tcp_cc,
        quic_cc,
        timeout: args.timeout,
        trace: args.trace.clone(),
    };
    let (doc, _, objects) = load(&run, &mut running)?;
    drop(running);
    let notes = write_har_and_waterfall(
        &run,
        &doc,
        &objects,
        &spec,
        args.har.as_deref(),
        args.waterfall.as_deref(),
    );
    for note in notes {
        eprintln!("quiclab page: {note}");
    }
    let title = title(&run, &spec);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        println!(
            "{}: {} objects, {} bytes, page load time {:.1} ms over {} connection(s), protocols {}",
            title,
            doc["objects"],
            doc["bytes"],
            doc["plt_ms"].as_f64().unwrap_or(f64::NAN),
            doc["connections"],
            doc["negotiated_protocols"]
        );
    }
    Ok(0)
}

fn title(run: &PageRun, spec: &quiclab_lab::LinkSpec) -> String {
    format!(
        "{} over {} ({}), {}",
        run.page.name(),
        run.proto,
        if run.chromium { "Chromium" } else { "quiclab" },
        spec.describe().downlink
    )
}

/// Writes the HAR and/or the waterfall (FILE.svg, or FILE.png with an SVG beside it) of a load;
/// returns notes and errors as text (a figure that cannot be written does not fail a measurement).
pub fn write_har_and_waterfall(
    run: &PageRun,
    doc: &Value,
    objects: &[ObjectTiming],
    spec: &quiclab_lab::LinkSpec,
    har: Option<&Path>,
    waterfall: Option<&Path>,
) -> Vec<String> {
    let mut notes = Vec::new();
    let title = title(run, spec);
    if let Some(path) = har {
        let har = quiclab_page::har::build_har(
            &HarPage {
                title: title.clone(),
                origin: "https://100.64.0.2".into(),
                navigation_start: std::time::UNIX_EPOCH
                    + Duration::from_millis(doc["navigation_start_unix_ms"].as_u64().unwrap_or(0)),
                page_load_ms: doc["plt_ms"].as_f64(),
                content_load_ms: doc["dom_content_loaded_ms"].as_f64(),
                server_ip: Some("100.64.0.2".into()),
                comment: Some(format!("quiclab page; link: {}", spec.describe().downlink)),
            },
            objects,
        );
        if let Err(e) = har.write_to(path) {
            notes.push(format!("error: writing {}: {e}", path.display()));
        }
    }
    if let Some(path) = waterfall {
        let (svg, png) = match path.extension().and_then(|e| e.to_str()) {
            Some("png") => (path.with_extension("svg"), Some(path.to_path_buf())),
            _ => (path.to_path_buf(), None),
        };
        match quiclab_page::waterfall::write_waterfall(
            objects,
            &quiclab_page::waterfall::WaterfallOptions {
                title,
                page_load_ms: doc["plt_ms"].as_f64(),
                ..Default::default()
            },
            &svg,
            png.as_deref(),
        ) {
            Ok(out) => notes.extend(out.note.map(|n| format!("note: {n}"))),
            Err(e) => notes.push(format!("error: writing the waterfall: {e}")),
        }
    }
    notes
}

/// Loads one page in a running lab and stops its emulator. Returns the result document, the
/// emulator's fidelity report and the per-object timings (for a HAR and a waterfall).
pub fn load(
    run: &PageRun,
    running: &mut quiclab_lab::RunningLab,
) -> Result<(
    Value,
    Option<quiclab_lab::FidelityReport>,
    Vec<ObjectTiming>,
)> {
    let spec = running.spec.clone();
    let work = match &run.trace {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("quiclab-page-{}", running.lab.id)),
    };
    std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    let result = load_in(run, running, &work);
    if run.trace.is_none() {
        let _ = std::fs::remove_dir_all(&work);
    }
    let (client, fidelity) = result?;
    let (mut doc, objects) = summarize(run, &client)?;
    doc["link"] = serde_json::to_value(spec.describe())?;
    doc["loss_ratio"] = json!(
        fidelity
            .as_ref()
            .map(|f| f.downlink.model.counters.loss_ratio())
    );
    doc["fidelity"] = serde_json::to_value(&fidelity)?;
    Ok((doc, fidelity, objects))
}

fn load_in(
    run: &PageRun,
    running: &mut quiclab_lab::RunningLab,
    work: &Path,
) -> Result<(Value, Option<quiclab_lab::FidelityReport>)> {
    let lab = &running.lab;
    let page_dir = match &run.page {
        PageSource::Builtin(name) => {
            let dir = work.join("page");
            quiclab_page::corpus::lookup(name)
                .map_err(|e| anyhow!("{e}"))?
                .write_to(&dir)
                .map_err(|e| anyhow!("{e}"))?;
            dir
        }
        PageSource::Dir(d) => d.clone(),
    };
    let cert = LabCertificate::generate(&[
        lab.address_v4(Side::Server).into(),
        lab.address_v6(Side::Server).into(),
    ])?;
    cert.save(work)?;
    let exe = crate::self_exe::path()?;
    let exe = exe.to_str().context("executable path")?;
    let cc_flags = |c: &mut std::process::Command| {
        c.args([
            "--tcp-cc",
            run.tcp_cc.kernel_name(),
            "--quic-cc",
            &run.quic_cc.to_string(),
        ]);
        if let Some(t) = run.tls {
            c.args(["--tls", &t.to_string()]);
        }
    };
    let mut serve = lab.command(Side::Server, exe);
    serve.arg("serve").arg("--dir").arg(&page_dir);
    if run.trace.is_some() {
        serve.arg("--cwnd-log").arg(work.join("cwnd.csv"));
        serve.arg("--qlog-dir").arg(work);
    }
    cc_flags(&mut serve);
    crate::stacks_cmd::start_server(lab, serve, work)?;

    let server_ip: IpAddr = lab.address_v4(Side::Server).into();
    let mut client = lab.command(Side::Client, exe);
    client
        .args(["page-client", "--proto", &run.proto.to_string()])
        .args([
            "--browser",
            if run.chromium { "chromium" } else { "builtin" },
        ])
        .arg("--cert")
        .arg(work.join("cert.pem"))
        .args(["--server", &SocketAddr::new(server_ip, 443).to_string()])
        .args(["--timeout", &format!("{}ms", run.timeout.as_millis())]);
    if let Some(m) = run.max_streams {
        client.args(["--max-streams", &m.to_string()]);
    }
    cc_flags(&mut client);
    client.stdout(std::fs::File::create(work.join("page.json"))?);
    client.stderr(std::fs::File::create(work.join("page.stderr"))?);
    let pid = lab.spawn(client)?;
    // Chromium needs a few seconds to start on top of the load itself.
    let grace = Duration::from_secs(if run.chromium { 20 } else { 5 });
    let status = lab.wait_child(pid, Some(run.timeout + grace))?;
    let fidelity = if running.emulated() {
        Some(running.stop_emulator()?)
    } else {
        None
    };
    let stderr = std::fs::read_to_string(work.join("page.stderr")).unwrap_or_default();
    let Some(status) = status else {
        return Err(crate::stacks_cmd::TransferTimeout(run.timeout).into());
    };
    if !status.success() {
        let reason = stderr.trim().trim_start_matches("quiclab: error: ");
        if reason.contains("did not finish within") || reason.contains("timed out") {
            return Err(
                anyhow::Error::new(crate::stacks_cmd::TransferTimeout(run.timeout))
                    .context(format!("the page load gave up: {reason}")),
            );
        }
        bail!("the page load failed: {reason}");
    }
    let out = std::fs::read_to_string(work.join("page.json")).unwrap_or_default();
    let v: Value = serde_json::from_str(out.trim())
        .with_context(|| format!("reading the page client's report: {out:?}"))?;
    Ok((v, fidelity))
}

/// The result document (the `--json` contract) and per-object timings from the client's output
/// (`{"summary": {...}, "objects": [...]}`, written by [`page_client`]).
fn summarize(run: &PageRun, client: &Value) -> Result<(Value, Vec<ObjectTiming>)> {
    let mut doc = client["summary"].clone();
    if !doc.is_object() {
        bail!("the page client's report has no summary: {client}");
    }
    doc["page"] = json!(run.page.name());
    let objects: Vec<ObjectTiming> = serde_json::from_value(client["objects"].clone())
        .context("reading the page client's object timings")?;
    Ok((doc, objects))
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
            let tls = if new_connection && r.secure_connection_start > 0.0 {
                (r.connect_end - r.secure_connection_start).max(0.0)
            } else {
                0.0
            };
            let connect = if new_connection {
                (r.connect_end - r.connect_start - tls).max(0.0)
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

#[derive(Args, Debug)]
pub struct PageClientArgs {
    #[arg(long)]
    pub proto: Protocol,
    #[arg(long, value_parser = ["builtin", "chromium"])]
    pub browser: String,
    #[arg(long)]
    pub cert: PathBuf,
    #[arg(long)]
    pub server: SocketAddr,
    #[arg(long, value_parser = duration)]
    pub timeout: Duration,
    #[arg(long)]
    pub max_streams: Option<u64>,
    #[arg(long)]
    pub tls: Option<TlsVersion>,
    #[arg(long, default_value = "cubic")]
    pub tcp_cc: TcpCongestion,
    #[arg(long, default_value = "cubic")]
    pub quic_cc: QuicCongestion,
}

/// `quiclab page-client`: the client half of `quiclab page`, run inside the client namespace.
/// Prints one JSON object.
pub fn page_client(args: PageClientArgs) -> Result<i32> {
    let dir = args.cert.parent().unwrap_or(Path::new("."));
    let cert = LabCertificate::load(&args.cert, &dir.join("key.pem"))?;
    let nav_unix_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let proto = args.proto.to_string();
    let doc = if args.browser == "chromium" {
        let origin = format!("https://{}", args.server);
        let mut opts =
            quiclab_browser::BrowserOptions::new(args.proto, &origin, &cert.spki_sha256_base64);
        opts.timeout = args.timeout;
        let load = quiclab_browser::load(&opts, &format!("{origin}/index.html"))?;
        load.check_protocol(args.proto)?;
        let objects = chromium_objects(&load);
        let entries = || std::iter::once(&load.navigation.timing).chain(&load.resources);
        // Resource Timing has no connection ids: count the entries that opened a connection.
        let connections = entries()
            .filter(|r| r.connect_end > r.connect_start)
            .count();
        let bytes: f64 = entries().map(|r| r.encoded_body_size).sum();
        json!({
            "summary": {
                "proto": proto,
                "browser": "chromium",
                "browser_version": load.browser_version,
                "objects": load.resources.len() + 1,
                "bytes": bytes as u64,
                "plt_ms": load.plt_ms,
                "dom_content_loaded_ms": load.dom_content_loaded_ms,
                "connections": connections,
                "negotiated_protocols": load.protocols,
                "navigation_start_unix_ms": nav_unix_ms,
                "max_streams": args.max_streams,
                "chromium_wall_ms": load.wall_ms,
            },
            "objects": objects,
        })
    } else {
        let mut opts =
            quiclab_stacks::page_load::PageLoadOptions::new(cert, args.server, args.proto);
        opts.tls = args.tls;
        opts.tcp_cc = args.tcp_cc;
        opts.quic_cc = args.quic_cc;
        opts.max_streams = args.max_streams.map(|m| m as usize);
        opts.timeout = args.timeout;
        let report = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?
            .block_on(quiclab_stacks::page_load::load_page(&opts))?;
        json!({
            "summary": {
                "proto": proto,
                "browser": "builtin",
                "objects": report.objects.len(),
                "bytes": report.bytes,
                "plt_ms": report.plt_ms,
                "dom_content_loaded_ms": report.content_load_ms(),
                "connections": report.connections,
                "negotiated_protocols": report.negotiated_protocols,
                "navigation_start_unix_ms": report.navigation_start_unix_ms,
                "max_streams": args.max_streams,
                "connection_details": report.connection_details,
            },
            "objects": report.objects,
        })
    };
    println!("{}", serde_json::to_string(&doc)?);
    Ok(0)
}
