//! `quiclab calibrate`: flags in, the table or the JSON document out. The measurement and its
//! verdicts are `quiclab_lab::calibrate`'s.

use std::time::Duration;

use anyhow::Result;
use clap::Args;
use quiclab_lab::calibrate::{CalibrateSettings, Calibration};

use crate::link_args::{HostFlags, LinkFlags};

#[derive(Args, Debug)]
pub struct CalibrateArgs {
    #[command(flatten)]
    pub link: LinkFlags,
    #[command(flatten)]
    pub host: HostFlags,
    /// Print one JSON object instead of a table
    #[arg(long)]
    pub json: bool,
    /// Probe over IPv6 instead of IPv4
    #[arg(long)]
    pub ipv6: bool,
    /// Number of RTT probes (one every 10 ms)
    #[arg(long, default_value_t = 200)]
    pub rtt_probes: usize,
    /// Length of the TCP bulk transfer
    #[arg(long, default_value = "5s", value_parser = quiclab_model::params::duration)]
    pub bulk_duration: Duration,
    /// Write the per-packet event log of the whole calibration here (format: docs/link.md)
    #[arg(long, value_name = "FILE")]
    pub log: Option<std::path::PathBuf>,
    /// Replace the file --log names if it exists (never through a symlink)
    #[arg(long)]
    pub force: bool,
    /// UDP payload of the loss probe's datagrams, bytes. 1200 is a QUIC packet's size: the probe
    /// then sends at a real experiment's packet rate. 100-byte datagrams at half of 100 Mbit/s are
    /// ~98 000 packets/s, above what the emulator releases on time on two vCPUs (docs/link.md)
    #[arg(long, default_value_t = 1200, value_parser = clap::value_parser!(u16).range(8..=1400))]
    pub loss_datagram: u16,
    /// Datagrams per direction in the loss probe (default: 20000 when loss is configured, else 3000)
    #[arg(long)]
    pub loss_packets: Option<u64>,
}

pub fn run(args: CalibrateArgs) -> Result<i32> {
    let c = measure(&args)?;
    crate::emit(args.json, &c, || c.to_string())?;
    Ok(if c.pass { 0 } else { 1 })
}

/// The calibration the flags ask for.
pub fn measure(args: &CalibrateArgs) -> Result<Calibration> {
    if let Some(log) = &args.log {
        quiclab_outputs::check_user_file(log, "--log", args.force)?;
    }
    let settings = CalibrateSettings {
        ipv6: args.ipv6,
        rtt_probes: args.rtt_probes,
        bulk_duration: args.bulk_duration,
        loss_datagram: args.loss_datagram as usize,
        loss_packets: args.loss_packets,
        log: args.log.clone(),
    };
    let params =
        crate::link_args::params(quiclab_model::WorkloadKind::Bulk, &[&args.link, &args.host])?;
    let spec = crate::link_args::link_spec(&params)?;
    quiclab_lab::calibrate::calibrate(&params.link, &spec, &settings)
}
