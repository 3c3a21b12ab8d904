//! `quiclab page`: one page load across a fresh lab by quiclab's loader or headless Chromium, with
//! a HAR and a waterfall. Flags in, text or JSON out; the work is quiclab-workload's `page`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use quiclab_proto::options::{Protocol, StackOptions, TlsVersion};
use quiclab_workload::Workload;
use quiclab_workload::child::Browser;
use quiclab_workload::page::{PageRun, PageSource};

use crate::link_args::LinkArgs;

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
    /// Replace the files --har and --waterfall name if they exist (never through a symlink)
    #[arg(long)]
    pub force: bool,
    /// Most concurrent requests on the h2/h3 connection (early QUIC multiplexed 6)
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_streams: Option<u64>,
    /// Congestion control (h1/h2: cubic|reno|bbr; h3: cubic|newreno|bbr|gquic-cubic)
    #[arg(long, default_value = "cubic")]
    pub cc: String,
    /// TLS version for h1/h2
    #[arg(long, value_name = "1.2|1.3")]
    pub tls: Option<TlsVersion>,
    /// h3 with the builtin loader: XOR FEC under QUIC on both ends, one parity datagram after
    /// every N data datagrams (2–64); off by default (docs/fec.md)
    #[arg(long, value_name = "N", value_parser = crate::stacks_cmd::fec_group)]
    pub fec: Option<u8>,
    /// Give up on the load after this long
    #[arg(long, default_value = "60s", value_parser = crate::link_args::std_duration)]
    pub timeout: Duration,
    /// Keep the packet log, congestion samples, qlogs and client/server output in this directory
    #[arg(long, value_name = "DIR")]
    pub keep: Option<PathBuf>,
    /// Print one JSON object
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub link: LinkArgs,
}

pub fn page(args: PageArgs) -> Result<i32> {
    let source = match (&args.page, &args.page_dir) {
        (Some(p), _) => PageSource::Builtin(p.clone()),
        (None, Some(d)) => PageSource::Dir(d.clone()),
        (None, None) => bail!("give --page NAME or --page-dir DIR"),
    };
    source
        .validate()
        .map_err(anyhow::Error::msg)
        .with_context(|| {
            if args.page.is_some() {
                "--page"
            } else {
                "--page-dir"
            }
        })?;
    let stack = StackOptions {
        tls: args.tls,
        ..StackOptions::default()
    }
    .with_cc(args.proto, &args.cc)
    .map_err(|e| anyhow::anyhow!("--cc: {e}"))?;
    let browser = if args.browser == "chromium" {
        quiclab_browser::check_chromium(Path::new(quiclab_browser::DEFAULT_CHROMIUM))?;
        Browser::Chromium
    } else {
        Browser::Builtin
    };
    let options = args.link.options();
    let spec = args.link.to_spec()?;
    let mut stack = stack;
    stack.fec = args
        .fec
        .map(|n| quiclab_proto::options::FecSettings::for_rtt(n, spec.base_rtt()));
    let run = PageRun {
        proto: args.proto,
        page: source,
        browser,
        max_streams: args.max_streams,
        stack,
        timeout: args.timeout,
    };
    run.validate()
        .map_err(|(key, e)| anyhow::anyhow!("--{key}: {e}"))?;
    // Before the lab starts, so that a refusal costs no run.
    if let Some(har) = &args.har {
        quiclab_outputs::check_user_file(har, "--har", args.force)?;
    }
    if let Some(w) = &args.waterfall {
        quiclab_outputs::check_user_file(w, "--waterfall", args.force)?;
        if w.extension().is_some_and(|e| e == "png") {
            quiclab_outputs::check_user_file(&w.with_extension("svg"), "--waterfall", args.force)?;
        }
    }
    let mut running = quiclab_workload::harness::start_lab(&options, &spec, args.keep.as_deref())?;
    let out = run.run(&mut running, args.keep.as_deref())?;
    drop(running);
    let notes = run.write_har_and_waterfall(
        &out.result,
        &spec,
        args.har.as_deref(),
        args.waterfall.as_deref(),
    );
    for note in notes {
        eprintln!("quiclab page: {note}");
    }
    let r = &out.result;
    if args.json {
        println!("{}", serde_json::to_string_pretty(r)?);
    } else {
        println!(
            "{} over {} ({}), {}: {} objects, {} bytes, page load time {:.1} ms over {} connection(s), protocols {:?}",
            run.page.name(),
            run.proto,
            match run.browser {
                Browser::Chromium => "Chromium",
                Browser::Builtin => "quiclab",
            },
            spec.describe().downlink,
            r.summary.objects,
            r.summary.bytes,
            r.summary.plt_ms,
            r.summary.connections,
            r.summary.negotiated_protocols
        );
        if let Some(fec) = &r.fec {
            println!("{}", crate::stacks_cmd::fec_line(fec));
        }
    }
    Ok(0)
}
