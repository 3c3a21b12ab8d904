//! `quiclab flows`: competing flows through one emulated bottleneck.

use anyhow::{Result, bail};
use quiclab_workload::WorkloadSpec;

use crate::link_args::Flows;
use crate::workload_args::{WorkloadArgs, execute};

pub type FlowsArgs = WorkloadArgs<Flows>;

pub fn run(args: FlowsArgs) -> Result<i32> {
    let (options, spec, WorkloadSpec::Flows(run)) = args.prepare()? else {
        bail!("internal: flows parameters built another workload");
    };
    execute("flows", &run, (&options, &spec), &args.run, |_| Ok(()))
}
