//! `quiclab shell`: a command in the client namespace of a fresh lab, like Mahimahi's nested shells.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use clap::Args;

use crate::link_args::{HostFlags, LinkFlags, SwitchFlags};

#[derive(Args, Debug)]
pub struct ShellArgs {
    #[command(flatten)]
    pub link: LinkFlags,

    #[command(flatten)]
    pub host: HostFlags,

    #[command(flatten)]
    pub switch: SwitchFlags,

    /// Shell command to run in the server namespace (started first, stopped after CMD ends)
    #[arg(long, value_name = "CMD")]
    pub server_cmd: Option<String>,

    /// How long to give --server-cmd to start listening before CMD starts
    #[arg(long, default_value = "300ms", value_name = "DURATION", value_parser = quiclab_model::params::duration)]
    pub server_wait: Duration,

    /// Write the per-packet event log here (format: docs/link.md) and print a summary
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,

    /// Print the summary even without --log
    #[arg(long)]
    pub summary: bool,

    /// Write the emulator's fidelity report (JSON) here
    #[arg(long, value_name = "FILE")]
    pub fidelity_json: Option<PathBuf>,

    /// Capture every packet crossing the link into this pcapng file, with the TLS/QUIC secrets of
    /// the commands that honour SSLKEYLOGFILE embedded (Wireshark decrypts from the one file)
    #[arg(long, value_name = "FILE")]
    pub pcap: Option<PathBuf>,

    /// Replace files that --log, --fidelity-json or --pcap name if they exist (never through a
    /// symlink)
    #[arg(long)]
    pub force: bool,

    /// The command to run in the client namespace (QUICLAB_SERVER/QUICLAB_SERVER6 hold the server's addresses)
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

pub fn run(args: ShellArgs) -> Result<i32> {
    let params = crate::link_args::params(
        quiclab_model::WorkloadKind::Bulk,
        &[&args.link, &args.host, &args.switch],
    )?;
    let spec = crate::link_args::link_spec(&params)?;
    let options = params.link;
    let capture = quiclab_lab::shell::check_outputs(
        args.log.as_deref(),
        args.fidelity_json.as_deref(),
        args.pcap.as_deref(),
        args.force,
    )?;
    let out = quiclab_lab::shell::run(quiclab_lab::shell::ShellRun {
        options: &options,
        spec: &spec,
        server_cmd: args.server_cmd.as_deref(),
        server_wait: args.server_wait,
        log: args.log.clone(),
        capture,
        command: &args.command,
    })?;
    for line in out.report_lines(args.log.as_deref(), args.summary, &spec) {
        eprintln!("{line}");
    }
    if let Some(path) = &args.fidelity_json {
        out.write_fidelity_json(path, &spec)?;
    }
    Ok(out.status)
}
