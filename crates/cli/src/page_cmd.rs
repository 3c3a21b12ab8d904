//! `quiclab page`: one page load across a fresh lab by quiclab's loader or headless Chromium, with
//! a HAR and a waterfall. Flags in, text or JSON out; the work is quiclab-workload's `page`.

use std::path::PathBuf;

use anyhow::{Result, bail};
use clap::Args;
use quiclab_lab::LinkSpec;
use quiclab_link::LinkOptions;
use quiclab_model::WorkloadKind;
use quiclab_workload::WorkloadSpec;
use quiclab_workload::page::PageRun;

use crate::link_args::{self as kinds, Given, HostFlags, KindFlags, LinkFlags};
use crate::workload_args::{RunFlags, execute, run_of};

#[derive(Args, Debug)]
pub struct PageArgs {
    #[command(flatten)]
    pub keys: KindFlags<kinds::Page>,
    /// Write the load as a HAR 1.2 file
    #[arg(long, value_name = "FILE")]
    pub har: Option<PathBuf>,
    /// Write a waterfall figure (FILE.svg, or FILE.png with an SVG beside it)
    #[arg(long, value_name = "FILE")]
    pub waterfall: Option<PathBuf>,
    #[command(flatten)]
    pub run: RunFlags,
    #[command(flatten)]
    pub link: LinkFlags,
    #[command(flatten)]
    pub host: HostFlags,
}

/// The link and the load the flags ask for, every value through its key's row.
pub fn page_run(args: &PageArgs) -> Result<(LinkOptions, LinkSpec, PageRun)> {
    let groups: [&dyn Given; 3] = [&args.keys, &args.link, &args.host];
    let (options, spec, work) = run_of(WorkloadKind::Page, &groups)?;
    let WorkloadSpec::Page(run) = work else {
        bail!("page parameters built another workload");
    };
    Ok((options, spec, run))
}

pub fn page(args: PageArgs) -> Result<i32> {
    let (options, spec, run) = page_run(&args)?;
    // Before the lab starts, so that a refusal costs no run.
    let mut files = quiclab_workload::page::PageFiles::reserve(
        args.har.as_deref(),
        args.waterfall.as_deref(),
        args.run.pcap.as_deref(),
        args.run.force,
    )?;
    let artifacts = |r: &_| -> Result<()> {
        for note in files.write(&run, r, &spec)? {
            eprintln!("quiclab page: {note}");
        }
        Ok(())
    };
    execute("page", &run, (&options, &spec), &args.run, artifacts)
}
