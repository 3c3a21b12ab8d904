//! `quiclab video`: adaptive video streaming (DASH) through one emulated bottleneck.

use anyhow::{Result, bail};
use clap::Args;
use quiclab_lab::LinkSpec;
use quiclab_link::LinkOptions;
use quiclab_model::WorkloadKind;
use quiclab_workload::video::VideoRun;
use quiclab_workload::{Workload, WorkloadSpec};

use crate::link_args::{self as kinds, Given, HostFlags, KindFlags, LinkFlags, SwitchFlags};
use crate::workload_args::{RunFlags, execute, run_of};

#[derive(Args, Debug)]
pub struct VideoArgs {
    #[command(flatten)]
    pub keys: KindFlags<kinds::Video>,
    #[command(flatten)]
    pub run: RunFlags,
    #[command(flatten)]
    pub switch: SwitchFlags,
    #[command(flatten)]
    pub link: LinkFlags,
    #[command(flatten)]
    pub host: HostFlags,
}

/// The link and the players the flags ask for, every value through its key's row.
pub fn video_run(args: &VideoArgs) -> Result<(LinkOptions, LinkSpec, VideoRun)> {
    let groups: [&dyn Given; 4] = [&args.keys, &args.switch, &args.link, &args.host];
    let (options, spec, work) = run_of(WorkloadKind::Video, &groups)?;
    let WorkloadSpec::Video(run) = work else {
        bail!("video parameters built another workload");
    };
    Ok((options, spec, run))
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
