//! `quiclab video`: adaptive video streaming (DASH) through one emulated bottleneck.

use std::path::PathBuf;

use anyhow::{Result, anyhow};
use clap::Args;
use quiclab_proto::options::{Protocol, StackOptions, TlsVersion};
use quiclab_workload::Workload;
use quiclab_workload::WorkloadResult;
use quiclab_workload::video::{VideoOptions, VideoRun};

use crate::link_args::LinkArgs;

#[derive(Args, Debug)]
pub struct VideoArgs {
    /// The player's protocol: h1 (persistent TLS/TCP connections), h2 (one connection), h3 (one
    /// QUIC connection). Repeat for players sharing the link (e.g. --proto h1 --proto h3)
    #[arg(long = "proto", value_name = "h1|h2|h3", required = true)]
    pub protos: Vec<Protocol>,
    /// ABR rule: basic, sara, bba2 (as their papers define them) or sara-astream, bba2-astream
    /// (as the seed's AStream player implements them)
    #[arg(long, default_value = "basic", value_name = "NAME")]
    pub abr: String,
    /// Content: bbb (the seed's Big Buck Bunny ladder, 4 s segments), bbb-2s (2 s segments), or
    /// a Sabre movie JSON file
    #[arg(long, value_name = "NAME|FILE")]
    pub content: Option<String>,
    /// Live: 2 s segments (bbb-2s), an 8 s buffer, segments available over time
    #[arg(long)]
    pub live: bool,
    /// h1: K TCP connections, each segment split into K Range parts
    #[arg(long, value_name = "K", conflicts_with = "parallel")]
    pub connections: Option<u32>,
    /// h2/h3: K parallel Range requests per segment on one connection
    #[arg(long, value_name = "K")]
    pub parallel: Option<u32>,
    /// Seeks in media time, AT:TO, comma-separated (e.g. 40s:100s,150s:200s)
    #[arg(long, value_name = "AT:TO,…")]
    pub seek: Option<String>,
    /// The level fetched while a seek refills the buffer: keep-last (the seed's) or abr
    #[arg(long, value_name = "POLICY")]
    pub seek_policy: Option<String>,
    /// Play only this much of the content (e.g. 60s for a quick run)
    #[arg(long, value_name = "DURATION")]
    pub duration: Option<String>,
    /// Buffer capacity (default 20s on demand, 8s live)
    #[arg(long, value_name = "DURATION")]
    pub buffer: Option<String>,
    /// Give up this long after the start (default 1.5 × the media to play + 60 s): a player still
    /// playing then ends the run as failed, with what it measured kept
    #[arg(long, value_parser = crate::link_args::duration, value_name = "DURATION")]
    pub timeout: Option<u64>,
    /// TLS version for h1/h2
    #[arg(long, value_name = "1.2|1.3")]
    pub tls: Option<TlsVersion>,
    /// XOR FEC under QUIC for the h3 players, one parity datagram after every N data datagrams
    /// (2–64); off by default (docs/fec.md). Not with --switch (the switching client makes its
    /// own endpoints)
    #[arg(long, value_name = "N", value_parser = crate::stacks_cmd::fec_group, conflicts_with = "switch")]
    pub fec: Option<u8>,
    /// Over IPv6
    #[arg(long)]
    pub ipv6: bool,
    /// Keep the packet log, congestion samples, segment log and the processes' outputs here
    #[arg(long, value_name = "DIR")]
    pub keep: Option<PathBuf>,
    /// Print one JSON object
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub link: LinkArgs,
    #[command(flatten)]
    pub switch: crate::link_args::SwitchArgs,
    #[command(flatten)]
    pub on_switch: crate::link_args::OnSwitchArgs,
}

pub fn run(args: VideoArgs) -> Result<i32> {
    let players: Vec<String> = args.protos.iter().map(|p| p.to_string()).collect();
    let options = VideoOptions {
        players: players.join("+"),
        abr: Some(args.abr.clone()),
        content: args.content.clone(),
        live: args.live,
        seek: args.seek.clone(),
        duration: args.duration.clone(),
        seek_policy: args.seek_policy.clone(),
        buffer: args.buffer.clone(),
        connections: args.connections,
        parallel: args.parallel,
    };
    let mut run = VideoRun::from_options(&options).map_err(|(key, e)| {
        let flag = match key {
            "players" => "proto",
            "seek_policy" => "seek-policy",
            k => k,
        };
        anyhow!("--{flag}: {e}")
    })?;
    run.stack = StackOptions {
        tls: args.tls,
        ..StackOptions::default()
    };
    run.ipv6 = args.ipv6;
    run.timeout = args.timeout.map(std::time::Duration::from_nanos);
    run.switching = quiclab_workload::bulk::SwitchBehaviour {
        on_switch: args.on_switch.on_switch,
        stall_timeout: args.on_switch.switch_timeout,
        migrate_delay: args.on_switch.migrate_delay,
    };
    let link = args.switch.apply(args.link.options());
    let spec = link.to_spec().map_err(anyhow::Error::msg)?;
    run.stack.fec = args
        .fec
        .map(|n| quiclab_proto::options::FecSettings::for_rtt(n, spec.base_rtt()));
    run.validate()
        .map_err(|(key, e)| anyhow!("--{}: {e}", key.replace('_', "-")))?;
    if !args.json {
        eprintln!(
            "quiclab video: {} with {} on {}, {:.0} s of media to play (≈ {:.0} s)",
            run.mix.label(),
            run.abr,
            spec.describe().downlink,
            run.media_to_play_s(),
            run.estimate_seconds(&spec)
        );
    }
    let mut running = quiclab_workload::harness::start_lab(&link, &spec, args.keep.as_deref())?;
    let out = run.run(&mut running, args.keep.as_deref())?;
    drop(running);
    let r = &out.result;
    if args.json {
        println!("{}", serde_json::to_string_pretty(r)?);
    } else {
        let f = |v: Option<f64>, d: usize| v.map_or("-".to_string(), |x| format!("{x:.d$}"));
        for p in &r.players {
            let m = &p.metrics;
            let waits: Vec<String> = m.seek_waits_s.iter().map(|w| format!("{w:.2}")).collect();
            println!(
                "player {}: {} segments, average bitrate {} Mbit/s (played {}), startup {} s, \
                 rebuffering {:.2} s in {} stalls (rate {}), {} switches{}{}",
                p.label,
                m.segments,
                f(m.avg_bitrate_mbps, 3),
                f(m.played_bitrate_mbps, 3),
                f(m.startup_s, 2),
                m.rebuffer_s,
                m.stalls,
                f(m.rebuffer_rate, 4),
                m.switches,
                if waits.is_empty() {
                    String::new()
                } else {
                    format!(", waits after seeks {} s", waits.join(", "))
                },
                p.error
                    .as_ref()
                    .map_or(String::new(), |e| format!(" — failed: {e}")),
            );
            if let Some(sw) = &p.network_switches {
                println!(
                    "  {} network switch(es) ({}), {} connection(s) opened",
                    sw.len(),
                    r.on_switch.as_deref().unwrap_or("-"),
                    p.connections.as_ref().map_or(0, Vec::len)
                );
                crate::link_args::print_switch_outcomes(sw);
            }
            if let Some(fec) = &p.fec {
                println!("{}", crate::stacks_cmd::fec_line(fec));
            }
        }
    }
    match r.failure() {
        Some(reason) => {
            eprintln!("quiclab video: {reason}");
            Ok(1)
        }
        None => Ok(0),
    }
}
