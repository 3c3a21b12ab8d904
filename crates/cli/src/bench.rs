//! `quiclab bench link|stacks|runner`: flags in, figures out. The benchmarks are the lab's
//! (`quiclab_lab::bench`), the workloads' (`quiclab_workload::bench`) and the runner's
//! (`quiclab_runner::bench`); targets in docs/link.md.

use std::time::Duration;

use anyhow::Result;
use clap::{Args, Subcommand};
use quiclab_lab::SchedulerOptions;
use quiclab_lab::bench::LinkBench;
use quiclab_link::options::Steering;

#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Link emulator: RTT precision, rate accuracy, loss statistics, release lateness, CPU, top rate
    Link(BenchLinkArgs),
    /// Protocol stacks: unshaped goodput and CPU per GB of h1, h2 and h3, through the emulator and
    /// over a plain veth pair (so the emulator's share of the cost is visible)
    Stacks(BenchStacksArgs),
    /// Experiment runner: lab set-up/teardown per run, bookkeeping, and leaks over a long grid
    Runner(BenchRunnerArgs),
}

#[derive(Args, Debug)]
pub struct BenchStacksArgs {
    /// Bytes per transfer
    #[arg(long, default_value = "200MB", value_parser = quiclab_runner::prepare::parse_size)]
    pub size: u64,
    /// Print one JSON object
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct BenchLinkArgs {
    /// Print one JSON object
    #[arg(long)]
    pub json: bool,
    /// Shorter runs (for a quick look; the documented figures use the default lengths)
    #[arg(long)]
    pub quick: bool,
    /// Run the scheduler threads without SCHED_FIFO
    #[arg(long)]
    pub no_realtime: bool,
    /// Receive steering (RPS to other CPUs, emulator pinned): auto = for links >= 400 Mbit/s
    #[arg(long, default_value = "auto", value_name = "auto|on|off")]
    pub steering: Steering,
    /// Spin this long before each release (default: the scheduler's default)
    #[arg(long, value_parser = crate::link_args::duration)]
    pub spin: Option<u64>,
    /// TUN offload (TSO/USO reads, coalesced writes): auto = for links >= 200 Mbit/s
    #[arg(long, default_value = "auto", value_name = "auto|on|off")]
    pub offload: quiclab_link::options::Offload,
    /// With offload: coalescing window of the releases (default 200 µs)
    #[arg(long, value_parser = crate::link_args::duration)]
    pub offload_window: Option<u64>,
    /// Queue discipline of the TCP parts (gbit, max): droptail, codel, fq-codel or pie, to compare
    /// their CPU cost (docs/link.md)
    #[arg(long, default_value = "droptail", value_parser = quiclab_link::aqm::DisciplineSpec::parse, value_name = "NAME")]
    pub queue_discipline: quiclab_link::aqm::DisciplineSpec,
    /// Longest sleep within 2 ms of a release (0 = sleep straight to it); default 50 µs
    #[arg(long, value_parser = crate::link_args::duration)]
    pub nap: Option<u64>,
    /// Batch window of the scheduler (see docs/link.md); default 0
    #[arg(long, value_parser = crate::link_args::duration)]
    pub batch_window: Option<u64>,
    /// Rates (Gbit/s) tried by the `max` part, in order, stopping at the first that misses a target
    #[arg(long, value_delimiter = ',', default_values_t = [0.25, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0])]
    pub max_rates: Vec<f64>,
    /// Repetitions of the `mix` part per link (default 5; --quick 2)
    #[arg(long)]
    pub mix_runs: Option<usize>,
    /// Only these parts (comma-separated): rtt,rate,loss,mix,flood,gbit,max,unshaped,idle
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
}

pub fn run(cmd: BenchCommand) -> Result<i32> {
    match cmd {
        BenchCommand::Link(args) => bench_link(args),
        BenchCommand::Stacks(args) => bench_stacks(args),
        BenchCommand::Runner(args) => bench_runner(args),
    }
}

fn bench_link(args: BenchLinkArgs) -> Result<i32> {
    let defaults = SchedulerOptions::default();
    let or = |v: Option<u64>, d: Duration| v.map_or(d, Duration::from_nanos);
    let bench = LinkBench {
        scheduler: SchedulerOptions {
            realtime: !args.no_realtime,
            spin: or(args.spin, defaults.spin),
            batch_window: Duration::from_nanos(args.batch_window.unwrap_or(0)),
            nap: or(args.nap, defaults.nap),
            offload_window: or(args.offload_window, defaults.offload_window),
        },
        steering: args.steering,
        offload: args.offload,
        discipline: args.queue_discipline,
        quick: args.quick,
        log: true,
    };
    let doc = bench.run(&args.only, &args.max_rates, args.mix_runs)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&doc)?);
    }
    Ok(0)
}

fn bench_stacks(args: BenchStacksArgs) -> Result<i32> {
    let rows = quiclab_workload::bench::stacks(args.size)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    }
    Ok(0)
}

#[derive(clap::Args, Debug)]
pub struct BenchRunnerArgs {
    /// Runs in the grid (rounded up to a multiple of 3 protocols)
    #[arg(long, default_value_t = 100)]
    pub runs: u32,
    /// Keep the results here: a new or empty directory (default: a temporary directory, removed
    /// afterwards)
    #[arg(long, value_name = "DIR")]
    pub out: Option<std::path::PathBuf>,
    /// Print one JSON object
    #[arg(long)]
    pub json: bool,
}

fn bench_runner(args: BenchRunnerArgs) -> Result<i32> {
    let report = quiclab_runner::bench::run(args.runs, args.out.as_deref())?;
    let doc = &report.doc;
    if args.json {
        println!("{}", serde_json::to_string_pretty(doc)?);
    } else {
        let f = |p: &str| doc.pointer(p).and_then(|v| v.as_f64()).unwrap_or(f64::NAN);
        println!(
            "{} runs ({} ok) in {:.1} s\n\
             lab set-up    median {:.1} ms, p95 {:.1}, max {:.1}\n\
             lab teardown  median {:.1} ms, p95 {:.1}, max {:.1}\n\
             set-up + teardown median {:.1} ms, p95 {:.1}, max {:.1} (target < 200 ms)\n\
             runner bookkeeping {:.2} ms per run\n\
             namespaces {} → {}, child processes {} → {}\n\
             file descriptors {} before, {} at run 10, {} at the last run, {} after\n\
             resident memory {} kB before, {} at run 10, {} at the last run\n\
             leak: {}",
            doc["runs"],
            doc["ok"],
            f("/wall_s"),
            f("/setup_ms/median"),
            f("/setup_ms/p95"),
            f("/setup_ms/max"),
            f("/teardown_ms/median"),
            f("/teardown_ms/p95"),
            f("/teardown_ms/max"),
            f("/setup_plus_teardown_ms/median"),
            f("/setup_plus_teardown_ms/p95"),
            f("/setup_plus_teardown_ms/max"),
            f("/bookkeeping_ms_per_run"),
            doc["namespaces"]["before"],
            doc["namespaces"]["after"],
            doc["child_processes"]["before"],
            doc["child_processes"]["after"],
            doc["fds"]["before"],
            doc["fds"]["run_10"],
            doc["fds"]["last"],
            doc["fds"]["after"],
            doc["rss_kb"]["before"],
            doc["rss_kb"]["run_10"],
            doc["rss_kb"]["last"],
            if doc["leak"] == true { "YES" } else { "none" }
        );
    }
    Ok(if report.passed { 0 } else { 1 })
}
