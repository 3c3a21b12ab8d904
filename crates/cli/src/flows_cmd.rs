//! `quiclab flows`: competing flows through one emulated bottleneck.

use anyhow::{Result, bail};
use clap::Args;
use quiclab_lab::LinkSpec;
use quiclab_link::LinkOptions;
use quiclab_model::WorkloadKind;
use quiclab_workload::WorkloadSpec;
use quiclab_workload::flows::FlowsRun;

use crate::link_args::{self as kinds, Given, HostFlags, KindFlags, LinkFlags};
use crate::workload_args::{RunFlags, execute, run_of};

#[derive(Args, Debug)]
pub struct FlowsArgs {
    #[command(flatten)]
    pub keys: KindFlags<kinds::Flows>,
    #[command(flatten)]
    pub run: RunFlags,
    #[command(flatten)]
    pub link: LinkFlags,
    #[command(flatten)]
    pub host: HostFlags,
}

/// The link and the mix the flags ask for, every value through its key's row.
pub fn flows_run(args: &FlowsArgs) -> Result<(LinkOptions, LinkSpec, FlowsRun)> {
    let groups: [&dyn Given; 3] = [&args.keys, &args.link, &args.host];
    let (options, spec, work) = run_of(WorkloadKind::Flows, &groups)?;
    let WorkloadSpec::Flows(run) = work else {
        bail!("flows parameters built another workload");
    };
    Ok((options, spec, run))
}

pub fn run(args: FlowsArgs) -> Result<i32> {
    let (options, spec, run) = flows_run(&args)?;
    execute("flows", &run, (&options, &spec), &args.run, |_| Ok(()))
}
