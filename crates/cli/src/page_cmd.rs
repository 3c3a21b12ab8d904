//! `quiclab page`: one page load across a fresh lab by quiclab's loader or headless Chromium, with
//! a HAR and a waterfall. Flags in, text or JSON out; the work is quiclab-workload's `page`.

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};
use clap::Args;
use quiclab_experiment::WorkloadKind;
use quiclab_lab::LinkSpec;
use quiclab_link::LinkOptions;
use quiclab_workload::WorkloadSpec;
use quiclab_workload::page::PageRun;

use crate::link_args::LinkArgs;
use crate::workload_args::{FlagParams, RunFlags, StackFlags, execute};

#[derive(Args, Debug)]
pub struct PageArgs {
    /// h1 (HTTP/1.1, up to 6 TLS/TCP connections), h2 (one TLS/TCP connection) or h3 (one QUIC)
    #[arg(long)]
    pub proto: String,
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
    #[arg(long)]
    pub max_streams: Option<String>,
    /// Warm load: an untimed load first fills the session cache, then the measured load resumes
    /// (TLS 1.3 tickets for h1/h2, QUIC resumption and 0-RTT for h3). Chromium: two navigations
    /// in one browser, its connections closed in between (--enable-net-benchmarking)
    #[arg(long)]
    pub warm: bool,
    /// Chromium and h3 only: QUIC enabled but not forced; three loads in one browser record what
    /// each object came over and when Chromium moved to HTTP/3 after the server's alt-svc
    #[arg(long)]
    pub discover: bool,
    #[command(flatten)]
    pub stack: StackFlags,
    #[command(flatten)]
    pub run: RunFlags,
    #[command(flatten)]
    pub link: LinkArgs,
}

/// The link and the load the flags ask for, every value through the workload's own parser.
pub fn page_run(args: &PageArgs) -> Result<(LinkOptions, LinkSpec, PageRun)> {
    let mut params = FlagParams::new(WorkloadKind::Page);
    params.set("protocol", "--proto", Some(&args.proto))?;
    match (&args.page, &args.page_dir) {
        (Some(p), _) => params.set("page", "--page", Some(p))?,
        // A page directory is a path: with a slash, so that it is not taken for a built-in name.
        (None, Some(d)) => params.set(
            "page",
            "--page-dir",
            Some(&std::path::Path::new(".").join(d).display().to_string()),
        )?,
        (None, None) => bail!("give --page NAME or --page-dir DIR"),
    }
    params.set("browser", "--browser", Some(&args.browser))?;
    params.set("max_streams", "--max-streams", args.max_streams.as_deref())?;
    params.set_flag("warm", "--warm", args.warm)?;
    params.set_flag("discover", "--discover", args.discover)?;
    params.stack(&args.stack)?;
    params.run(&args.run)?;
    let options = args.link.options();
    let spec = args.link.to_spec()?;
    let WorkloadSpec::Page(run) = params.build(&spec)? else {
        bail!("page parameters built another workload");
    };
    Ok((options, spec, run))
}

pub fn page(args: PageArgs) -> Result<i32> {
    let (options, spec, run) = page_run(&args)?;
    // Before the lab starts, so that a refusal costs no run: every output path checked, no two
    // flags naming one file (the capture's too), and the HAR and waterfall files created now.
    let force = args.run.force;
    let (svg, png) = match &args.waterfall {
        Some(w) if w.extension().is_some_and(|e| e == "png") => {
            (Some(w.with_extension("svg")), Some(w.clone()))
        }
        Some(w) => (Some(w.clone()), None),
        None => (None, None),
    };
    let named: Vec<(&Path, &str)> = [
        (args.run.pcap.as_deref(), "--pcap"),
        (args.har.as_deref(), "--har"),
        (svg.as_deref(), "--waterfall"),
        (png.as_deref(), "--waterfall"),
    ]
    .into_iter()
    .filter_map(|(p, f)| p.map(|p| (p, f)))
    .collect();
    quiclab_outputs::distinct(&named)?;
    let reserve = |p: &Option<PathBuf>, flag| {
        p.as_deref()
            .map(|p| quiclab_outputs::UserFile::reserve(p, flag, force))
            .transpose()
    };
    let mut har = reserve(&args.har, "--har")?;
    let mut svg = reserve(&svg, "--waterfall")?;
    let mut png = reserve(&png, "--waterfall")?;
    let artifacts = |r: &_| -> Result<()> {
        let waterfall = svg
            .as_mut()
            .map(|svg| quiclab_workload::page::WaterfallFiles {
                svg,
                png: png.as_mut(),
            });
        for note in run.write_har_and_waterfall(r, &spec, har.as_mut(), waterfall)? {
            eprintln!("quiclab page: {note}");
        }
        Ok(())
    };
    execute("page", &run, (&options, &spec), &args.run, artifacts)
}
