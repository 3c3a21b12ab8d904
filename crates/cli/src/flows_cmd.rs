//! `quiclab flows`: competing flows through one emulated bottleneck.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Result, anyhow};
use clap::Args;
use quiclab_flows::FlowMix;
use quiclab_proto::options::{StackOptions, TlsVersion};
use quiclab_workload::Workload;
use quiclab_workload::WorkloadResult;
use quiclab_workload::flows::{FlowAmount, FlowsRun};

use crate::link_args::{LinkArgs, duration};

#[derive(Args, Debug)]
pub struct FlowsArgs {
    /// A flow: PROTO or PROTO:CC (h1 = one TLS/TCP connection, h2, h3; CC cubic|reno|bbr for
    /// h1/h2, cubic|newreno|bbr|gquic-cubic for h3). Repeat for a mix, e.g.
    /// `--flow h3:gquic-cubic --flow h1:cubic`
    #[arg(long = "flow", value_name = "PROTO[:CC]", required = true)]
    pub flows: Vec<String>,
    /// Each flow reads this long from its start, then stops (long-running flows)
    #[arg(long, value_parser = duration, value_name = "DURATION", conflicts_with = "size",
          required_unless_present = "size")]
    pub duration: Option<u64>,
    /// Each flow downloads this many bytes instead (e.g. 5MB)
    #[arg(long, value_parser = quiclab_runner::prepare::parse_size)]
    pub size: Option<u64>,
    /// Start offsets, one per flow, comma-separated (e.g. 0s,10s); default: all at once
    #[arg(long, value_delimiter = ',', value_parser = duration, value_name = "DURATION,…")]
    pub offsets: Vec<u64>,
    /// Bin size of the per-flow throughput series (whole milliseconds)
    #[arg(long, value_parser = duration, value_name = "DURATION", default_value = "100ms")]
    pub bin: u64,
    /// Left out at both ends of each flow for its goodput (Flent's cutoff); default: a quarter of
    /// --duration, at most 5 s; 0 with --size
    #[arg(long, value_parser = duration, value_name = "DURATION")]
    pub cutoff: Option<u64>,
    /// TLS version for h1/h2 flows
    #[arg(long, value_name = "1.2|1.3")]
    pub tls: Option<TlsVersion>,
    /// Connections emulated by gquic-cubic (N; β = (N−1+0.7)/N)
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..))]
    pub gquic_n: u32,
    /// XOR FEC under QUIC for every h3 flow of the mix, one parity datagram after every N data
    /// datagrams (2–64; seed 000's F_G ≈ 3 is N = 2); off by default (docs/fec.md)
    #[arg(long, value_name = "N", value_parser = crate::stacks_cmd::fec_group)]
    pub fec: Option<u8>,
    /// Over IPv6
    #[arg(long)]
    pub ipv6: bool,
    /// Keep the emulator's packet log (link.log), the server's congestion samples (cwnd.csv) and
    /// the client/server outputs in this directory
    #[arg(long, value_name = "DIR")]
    pub keep: Option<PathBuf>,
    /// Print one JSON object
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub link: LinkArgs,
}

pub fn run(args: FlowsArgs) -> Result<i32> {
    let mix = FlowMix::parse(&args.flows).map_err(|e| anyhow!("--flow: {e}"))?;
    let amount = match (args.size, args.duration) {
        (Some(s), None) => FlowAmount::Size(s),
        (None, Some(d)) => FlowAmount::Duration(Duration::from_nanos(d)),
        _ => return Err(anyhow!("give one of --duration and --size")),
    };
    let mut run = FlowsRun::new(mix, amount);
    run.offsets = args
        .offsets
        .iter()
        .map(|&o| Duration::from_nanos(o))
        .collect();
    run.bin = Duration::from_nanos(args.bin);
    run.cutoff = args.cutoff.map(Duration::from_nanos);
    run.stack = StackOptions {
        tls: args.tls,
        gquic_n: args.gquic_n,
        ..StackOptions::default()
    };
    run.ipv6 = args.ipv6;
    let options = args.link.options();
    let spec = args.link.to_spec()?;
    run.stack.fec = args
        .fec
        .map(|n| quiclab_proto::options::FecSettings::for_rtt(n, spec.base_rtt()));
    run.validate().map_err(|(key, e)| anyhow!("--{key}: {e}"))?;
    let mut running = quiclab_workload::harness::start_lab(&options, &spec, args.keep.as_deref())?;
    let out = run.run(&mut running, args.keep.as_deref())?;
    drop(running);
    let r = &out.result;
    if args.json {
        println!("{}", serde_json::to_string_pretty(r)?);
    } else {
        let f = |v: Option<f64>, d: usize| v.map_or("-".to_string(), |x| format!("{x:.d$}"));
        println!(
            "{} over {}: goodput {} Mbit/s, U {}, J {} (window means), {} (per bin), loss ratio {}",
            r.mix,
            spec.describe().downlink,
            f(r.goodput_mbps, 3),
            f(r.utilization, 3),
            f(r.jain, 3),
            f(r.jain_bins, 3),
            f(r.loss_ratio, 4),
        );
        for fl in &r.flows {
            println!(
                "  flow {}: goodput {} Mbit/s ({}), U {}, forwarded {} B, dropped {} packets, l {}{}",
                fl.label,
                f(fl.goodput_mbps, 3),
                fl.goodput_window,
                f(fl.utilization, 3),
                fl.forwarded_bytes.map_or("-".into(), |b| b.to_string()),
                fl.dropped_packets.map_or("-".into(), |b| b.to_string()),
                f(fl.loss_ratio, 4),
                fl.error
                    .as_ref()
                    .map_or(String::new(), |e| format!(" — failed: {e}")),
            );
            if let Some(fec) = &fl.fec {
                println!("  {}", crate::stacks_cmd::fec_line(fec));
            }
        }
    }
    match r.failure() {
        Some(reason) => {
            eprintln!("quiclab flows: {reason}");
            Ok(1)
        }
        None => Ok(0),
    }
}
