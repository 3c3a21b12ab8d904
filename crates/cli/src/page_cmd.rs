//! `quiclab page`: one page load across a fresh lab by quiclab's loader or headless Chromium, with
//! a HAR and a waterfall. Flags in, text or JSON out; the work is quiclab-workload's `page`.

use std::path::PathBuf;

use anyhow::{Result, bail};
use clap::Args;
use quiclab_workload::WorkloadSpec;

use crate::link_args::Page;
use crate::workload_args::{WorkloadArgs, execute};

#[derive(Args, Debug)]
pub struct PageArgs {
    #[command(flatten)]
    pub workload: WorkloadArgs<Page>,
    /// Write the load as a HAR 1.2 file
    #[arg(long, value_name = "FILE", help_heading = "Output")]
    pub har: Option<PathBuf>,
    /// Write a waterfall figure (FILE.svg, or FILE.png with an SVG beside it)
    #[arg(long, value_name = "FILE", help_heading = "Output")]
    pub waterfall: Option<PathBuf>,
}

pub fn page(args: PageArgs) -> Result<i32> {
    let (options, spec, WorkloadSpec::Page(run)) = args.workload.prepare()? else {
        bail!("internal: page parameters built another workload");
    };
    // A page's figure is its waterfall.
    let mut flags = args.workload.run.clone();
    let waterfall = match (args.waterfall, flags.figure.take()) {
        (Some(_), Some(_)) => bail!("--figure and --waterfall both name the waterfall: give one"),
        (w, f) => w.or(f),
    };
    // Before the lab starts, so that a refusal costs no run.
    let mut files = quiclab_workload::page::PageFiles::reserve(
        args.har.as_deref(),
        waterfall.as_deref(),
        flags.pcap.as_deref(),
        flags.force,
    )?;
    let artifacts = |r: &_| -> Result<()> {
        for note in files.write(&run, r, &spec)? {
            eprintln!("quiclab page: {note}");
        }
        Ok(())
    };
    execute("page", &run, (&options, &spec), &flags, artifacts)
}
