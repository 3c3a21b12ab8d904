//! `quiclab video`: adaptive video streaming (DASH) through one emulated bottleneck.

use anyhow::{Result, bail};
use clap::Args;
use quiclab_experiment::WorkloadKind;
use quiclab_lab::LinkSpec;
use quiclab_link::LinkOptions;
use quiclab_workload::video::VideoRun;
use quiclab_workload::{Workload, WorkloadSpec};

use crate::link_args::LinkArgs;
use crate::workload_args::{FlagParams, OnSwitchFlags, RunFlags, StackFlags, execute};

#[derive(Args, Debug)]
pub struct VideoArgs {
    /// The player's protocol: h1 (persistent TLS/TCP connections), h2 (one connection), h3 (one
    /// QUIC connection). Repeat for players sharing the link (e.g. --proto h1 --proto h3)
    #[arg(long = "proto", value_name = "h1|h2|h3", required = true)]
    pub protos: Vec<String>,
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
    pub connections: Option<String>,
    /// h2/h3: K parallel Range requests per segment on one connection
    #[arg(long, value_name = "K")]
    pub parallel: Option<String>,
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
    #[command(flatten)]
    pub stack: StackFlags,
    #[command(flatten)]
    pub run: RunFlags,
    #[command(flatten)]
    pub link: LinkArgs,
    #[command(flatten)]
    pub switch: crate::link_args::SwitchArgs,
    #[command(flatten)]
    pub on_switch: OnSwitchFlags,
}

/// The link and the players the flags ask for, every value through the workload's own parser.
pub fn video_run(args: &VideoArgs) -> Result<(LinkOptions, LinkSpec, VideoRun)> {
    let mut params = FlagParams::new(WorkloadKind::Video);
    params.set("players", "--proto", Some(&args.protos.join(" + ")))?;
    params.set("abr", "--abr", Some(&args.abr))?;
    params.set("content", "--content", args.content.as_deref())?;
    params.set_flag("live", "--live", args.live)?;
    params.set("connections", "--connections", args.connections.as_deref())?;
    params.set("parallel", "--parallel", args.parallel.as_deref())?;
    params.set("seek", "--seek", args.seek.as_deref())?;
    params.set("seek_policy", "--seek-policy", args.seek_policy.as_deref())?;
    params.set("duration", "--duration", args.duration.as_deref())?;
    params.set("buffer", "--buffer", args.buffer.as_deref())?;
    params.stack(&args.stack)?;
    params.run(&args.run)?;
    params.on_switch(&args.on_switch)?;
    let link = args.switch.apply(args.link.options());
    let spec = link.to_spec().map_err(anyhow::Error::msg)?;
    crate::link_args::print_notes(&link, &spec);
    let WorkloadSpec::Video(run) = params.build(&spec)? else {
        bail!("video parameters built another workload");
    };
    Ok((link, spec, run))
}

pub fn run(args: VideoArgs) -> Result<i32> {
    let (link, spec, run) = video_run(&args)?;
    if !args.run.json {
        eprintln!(
            "quiclab video: {} with {} on {}, {:.0} s of media to play (≈ {:.0} s)",
            run.mix.label(),
            run.abr,
            spec.describe().downlink,
            run.media_to_play_s(),
            run.estimate_seconds(&spec)
        );
    }
    execute("video", &run, (&link, &spec), &args.run, |_| Ok(()))
}
