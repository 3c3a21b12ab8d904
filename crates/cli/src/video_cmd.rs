//! `quiclab video`: adaptive video streaming (DASH) through one emulated bottleneck.

use anyhow::{Result, bail};
use quiclab_workload::{Workload, WorkloadSpec};

use crate::link_args::Video;
use crate::workload_args::{WorkloadArgs, execute};

pub type VideoArgs = WorkloadArgs<Video>;

pub fn run(args: VideoArgs) -> Result<i32> {
    let (link, spec, WorkloadSpec::Video(run)) = args.prepare()? else {
        bail!("internal: video parameters built another workload");
    };
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
