//! `quiclab flows`: competing flows through one emulated bottleneck.

use anyhow::{Result, bail};
use clap::Args;
use quiclab_experiment::WorkloadKind;
use quiclab_lab::LinkSpec;
use quiclab_link::LinkOptions;
use quiclab_workload::WorkloadSpec;
use quiclab_workload::flows::FlowsRun;

use crate::link_args::LinkArgs;
use crate::workload_args::{FlagParams, RunFlags, StackFlags, execute};

#[derive(Args, Debug)]
pub struct FlowsArgs {
    /// A flow: PROTO or PROTO:CC (h1 = one TLS/TCP connection, h2, h3; CC cubic|reno|bbr for
    /// h1/h2, cubic|newreno|bbr|gquic-cubic for h3). Repeat for a mix, e.g.
    /// `--flow h3:gquic-cubic --flow h1:cubic`
    #[arg(long = "flow", value_name = "PROTO[:CC]", required = true)]
    pub flows: Vec<String>,
    /// Each flow reads this long from its start, then stops (long-running flows)
    #[arg(
        long,
        value_name = "DURATION",
        conflicts_with = "size",
        required_unless_present = "size"
    )]
    pub duration: Option<String>,
    /// Each flow downloads this many bytes instead (e.g. 5MB)
    #[arg(long)]
    pub size: Option<String>,
    /// Start offsets, one per flow, comma-separated (e.g. 0s,10s); default: all at once
    #[arg(long, value_name = "DURATION,…")]
    pub offsets: Option<String>,
    /// Bin size of the per-flow throughput series (whole milliseconds; default 100ms)
    #[arg(long, value_name = "DURATION")]
    pub bin: Option<String>,
    /// Left out at both ends of each flow for its goodput (Flent's cutoff); default: a quarter of
    /// --duration, at most 5 s; 0 with --size
    #[arg(long, value_name = "DURATION")]
    pub cutoff: Option<String>,
    #[command(flatten)]
    pub stack: StackFlags,
    #[command(flatten)]
    pub run: RunFlags,
    #[command(flatten)]
    pub link: LinkArgs,
}

/// The link and the mix the flags ask for, every value through the workload's own parser.
pub fn flows_run(args: &FlowsArgs) -> Result<(LinkOptions, LinkSpec, FlowsRun)> {
    let mut params = FlagParams::new(WorkloadKind::Flows);
    params.set("flows", "--flow", Some(&args.flows.join(" + ")))?;
    params.set("duration", "--duration", args.duration.as_deref())?;
    params.set("size", "--size", args.size.as_deref())?;
    params.set("offsets", "--offsets", args.offsets.as_deref())?;
    params.set("bin", "--bin", args.bin.as_deref())?;
    params.set("cutoff", "--cutoff", args.cutoff.as_deref())?;
    params.stack(&args.stack)?;
    params.run(&args.run)?;
    let options = args.link.options();
    let spec = args.link.to_spec()?;
    let WorkloadSpec::Flows(run) = params.build(&spec)? else {
        bail!("flows parameters built another workload");
    };
    Ok((options, spec, run))
}

pub fn run(args: FlowsArgs) -> Result<i32> {
    let (options, spec, run) = flows_run(&args)?;
    execute("flows", &run, (&options, &spec), &args.run, |_| Ok(()))
}
