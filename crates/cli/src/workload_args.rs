//! What every workload command shares: its output flags ([`RunFlags`]), the run its key flags ask
//! for ([`run_of`]) and running it in a fresh lab ([`execute`]). The key flags themselves are
//! derived from quiclab-model's key table (`link_args`).

use std::path::PathBuf;

use anyhow::{Result, anyhow};
use clap::Args;
use quiclab_lab::LinkSpec;
use quiclab_link::LinkOptions;
use quiclab_model::WorkloadKind;
use quiclab_model::keys::flag_of;
use quiclab_runner::command::FigureFiles;
use quiclab_workload::{Workload, WorkloadResult, WorkloadSpec};

use crate::link_args::{Given, HostFlags, Kind, KindFlags, LinkFlags, link_spec, params};

/// A run's own flags: what it keeps and prints.
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Output")]
pub struct RunFlags {
    /// Keep the emulator's packet log (link.log), the server's congestion samples (cwnd.csv), a
    /// capture (capture.pcapng, unless --pcap), qlogs with their frames and the processes'
    /// outputs in this directory (new, empty or quiclab's own)
    #[arg(long, value_name = "DIR")]
    pub keep: Option<PathBuf>,
    /// Capture every packet crossing the link into this pcapng file (new; replaced only with
    /// --force), with the run's TLS/QUIC secrets embedded so that Wireshark decrypts h2 and h3
    #[arg(long, value_name = "FILE")]
    pub pcap: Option<PathBuf>,
    /// Replace the files --pcap (and page's --har and --waterfall) name if they exist (never
    /// through a symbolic link)
    #[arg(long)]
    pub force: bool,
    /// Print one JSON object
    #[arg(long)]
    pub json: bool,
    /// Draw the run over time into FILE.svg, or FILE.png with its SVG beside it (bulk: rate,
    /// congestion window, queue; flows: each flow; video: buffer, bitrate; page: its waterfall)
    #[arg(long, value_name = "FILE")]
    pub figure: Option<PathBuf>,
}

/// The flags of a workload command of kind `K`: its keys (derived from the table), the output
/// flags, network switches, the link and the host. (Page and flows runs refuse a switch schedule
/// with the reason, as scenarios do.)
#[derive(Args, Debug)]
pub struct WorkloadArgs<K: Kind + Clone + std::fmt::Debug + Send + Sync + 'static> {
    #[command(flatten)]
    pub keys: KindFlags<K>,
    #[command(flatten)]
    pub run: RunFlags,
    #[command(flatten)]
    pub link: LinkFlags,
    #[command(flatten)]
    pub host: HostFlags,
}

impl<K: Kind + Clone + std::fmt::Debug + Send + Sync + 'static> WorkloadArgs<K> {
    /// The link and the run the flags ask for, every value through its key's row.
    pub fn prepare(&self) -> Result<(LinkOptions, LinkSpec, WorkloadSpec)> {
        run_of(K::KIND, &[&self.keys, &self.link, &self.host])
    }
}

/// The link and the run of `kind` that the flags of `groups` ask for; an error names the flag
/// (a refused combination, the flag of the key it blames).
pub fn run_of(
    kind: WorkloadKind,
    groups: &[&dyn Given],
) -> Result<(LinkOptions, LinkSpec, WorkloadSpec)> {
    let params = params(kind, groups)?;
    let spec = link_spec(&params)?;
    let work = quiclab_workload::params::build(&params, &spec)
        .map_err(|e| anyhow!("{}: {}", flag_of(e.key, kind), e.message))?;
    Ok((params.link, spec, work))
}

/// Runs `run` in a fresh lab for `spec` (its work directory kept in `--keep`), lets `artifacts`
/// write what the run asks for (HAR, waterfall) and prints the result with the fidelity verdict
/// `run` would store (`quiclab_runner::command`). Exit status 1 when the result says the run
/// failed or timed out (the reason on stderr).
pub fn execute<W: Workload>(
    command: &str,
    run: &W,
    (options, spec): (&LinkOptions, &LinkSpec),
    flags: &RunFlags,
    artifacts: impl FnOnce(&W::Output) -> Result<()>,
) -> Result<i32>
where
    W::Output: std::fmt::Display,
{
    let (pcap, figure) = (flags.pcap.as_deref(), flags.figure.as_deref());
    let mut fig = figure
        .map(|f| FigureFiles::reserve(f, pcap, flags.force))
        .transpose()?;
    let keep = flags.keep.as_deref();
    let judged = quiclab_runner::command::run(
        run,
        (options, spec),
        keep,
        (pcap, flags.force),
        fig.as_mut(),
    )?;
    let out = &judged.outcome;
    if let Some(c) = out.fidelity.as_ref().and_then(|f| f.capture.as_ref()) {
        eprintln!("{c}");
    }
    // The result is printed whatever became of the files written from it.
    let written =
        artifacts(&out.result).and(judged.figure_error.map_or(Ok(()), |e| Err(anyhow!(e))));
    let text = quiclab_runner::command::text(&out.result, judged.flags.as_deref(), flags.json)?;
    println!("{text}");
    if let Err(e) = written {
        eprintln!("quiclab {command}: error: {e:#} (the run's result is printed above)");
        return Ok(1);
    }
    Ok(match out.result.failure() {
        Some(reason) => {
            eprintln!("quiclab {command}: {reason}");
            1
        }
        None => 0,
    })
}
