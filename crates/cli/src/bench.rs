//! `quiclab bench link|stacks|runner`: flags in, figures out. The benchmarks are the lab's
//! (`quiclab_lab::bench`), the workloads' (`quiclab_workload::bench`) and the runner's
//! (`quiclab_runner::bench`); targets in docs/link.md.

use anyhow::Result;
use clap::{Args, Subcommand};
use quiclab_lab::bench::LinkBench;
use quiclab_runner::link_bench;

#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Link emulator: RTT precision, rate accuracy, loss statistics, release lateness, CPU, top rate
    Link(BenchLinkArgs),
    /// Protocol stacks: unshaped goodput and CPU per GB of h1, h2 and h3, through the emulator and
    /// over a plain veth pair (so the emulator's share of the cost is visible)
    Stacks(BenchStacksArgs),
    /// Experiment runner: lab set-up/teardown per run, bookkeeping, and leaks over a long grid
    Runner(BenchRunnerArgs),
    /// Labs side by side: each grid of scenarios/jobs-*.toml alone and at --jobs, compared (docs/scale.md)
    Jobs(BenchJobsArgs),
    /// The fidelity flags under host noise quiclab makes and removes (a CPU hog, pauses of the
    /// whole lab in storms): do the runs they let through give quiet runs' answers (docs/link.md)
    Noise(BenchNoiseArgs),
    /// Video players: quiclab's BASIC, SARA and BBA-2 beside AStream, the seed's player
    /// (QUICLAB_ASTREAM), on the seed's WiFi, LTE and 3G paths (docs/video.md)
    Players(BenchPlayersArgs),
    /// The noise process of `bench noise` (one JSON argument; ends when stdin closes)
    #[command(hide = true)]
    InjectNoise { noise: String },
}

#[derive(Args, Debug)]
pub struct BenchNoiseArgs {
    /// Only these grids (comma-separated): bulk,page,video,flows
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
    /// Only these sides besides quiet (comma-separated): quiet-again,hog,pauses
    #[arg(long, value_delimiter = ',')]
    pub sides: Vec<String>,
    /// Pauses of the whole lab: PAUSE/EVERY/STORM/CALM (a PAUSE-long stop every EVERY, in storms
    /// of STORM with CALM between)
    #[arg(long, default_value = "40ms/100ms/30s/60s", value_parser = quiclab_lab::noise::PausePattern::parse)]
    pub pattern: quiclab_lab::noise::PausePattern,
    /// The grids' quick forms (too few pairs for an equivalence verdict: a look only)
    #[arg(long)]
    pub quick: bool,
    /// Results of each grid and side, and equivalence-noise.json (continued when interrupted)
    #[arg(long, value_name = "DIR", default_value = "quiclab-bench-noise")]
    pub out: std::path::PathBuf,
    /// Print the comparisons as one JSON document on stdout (progress stays on stderr)
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct BenchJobsArgs {
    /// Only these grids (comma-separated): bulk,page,chromium,video,flows
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
    #[command(flatten)]
    pub jobs: crate::run_cmd::JobsArg,
    /// The grids' quick forms
    #[arg(long)]
    pub quick: bool,
    /// Results and equivalence-jobs-J.json (continued when it holds an interrupted benchmark)
    #[arg(long, value_name = "DIR", default_value = "quiclab-bench-jobs")]
    pub out: std::path::PathBuf,
    /// Print the comparisons as one JSON document on stdout (progress stays on stderr)
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct BenchPlayersArgs {
    #[command(flatten)]
    pub jobs: crate::run_cmd::JobsArg,
    /// WiFi only, 60 s, one repetition
    #[arg(long)]
    pub quick: bool,
    /// Results of each rule and player, and players.json (continued when interrupted)
    #[arg(long, value_name = "DIR", default_value = "quiclab-bench-players")]
    pub out: std::path::PathBuf,
    /// Print the comparisons as one JSON document on stdout (progress stays on stderr)
    #[arg(long)]
    pub json: bool,
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
    #[command(flatten)]
    pub host: crate::link_args::HostFlags,
    /// Queue discipline of the TCP parts (gbit, max): droptail, codel, fq-codel or pie, to compare
    /// their CPU cost (docs/link.md)
    #[arg(long, default_value = "droptail", value_parser = quiclab_link::aqm::DisciplineSpec::parse, value_name = "NAME")]
    pub queue_discipline: quiclab_link::aqm::DisciplineSpec,
    /// Rates (Gbit/s) tried by the `max` part, in order, stopping at the first that misses a target
    #[arg(long, value_delimiter = ',', default_values_t = [0.25, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0])]
    pub max_rates: Vec<f64>,
    /// Repetitions of the `mix` part per link (default 5; --quick 2)
    #[arg(long)]
    pub mix_runs: Option<usize>,
    /// Rates (Gbit/s) tried by the `quic` part (h3 by quinn), in order, stopping at the first that misses a target
    #[arg(long, value_delimiter = ',', default_values_t = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0, 1.5])]
    pub quic_rates: Vec<f64>,
    /// Only these parts (comma-separated): rtt,rate,loss,mix,flood,gbit,max,unshaped,idle,quic
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
}

pub fn run(cmd: BenchCommand) -> Result<i32> {
    let library = || quiclab_runner::reproduce::Library::find(None);
    match cmd {
        BenchCommand::Link(args) => {
            let link =
                crate::link_args::params(quiclab_model::WorkloadKind::Bulk, &[&args.host])?.link;
            let bench = LinkBench::for_link(&link, args.queue_discipline, args.quick);
            let a = &args;
            let doc = link_bench::link(&bench, &a.only, &a.max_rates, a.mix_runs, &a.quic_rates)?;
            link_bench::print_json(args.json, &doc).map(|_| 0)
        }
        BenchCommand::Stacks(args) => {
            let rows = quiclab_workload::bench::stacks(args.size)?;
            link_bench::print_json(args.json, &rows).map(|_| 0)
        }
        BenchCommand::Runner(a) => {
            quiclab_runner::bench::run(a.runs, a.out.as_deref())?.print(a.json)
        }
        BenchCommand::Jobs(a) => {
            let lib = library()?;
            let grids =
                quiclab_runner::equivalence::bench_jobs(&lib, &a.only, a.jobs.n, a.quick, &a.out)?;
            crate::emit(a.json, &grids, String::new).map(|_| 0)
        }
        BenchCommand::Noise(a) => {
            let lib = library()?;
            let grids = quiclab_runner::noise_bench::bench_noise(
                &lib, &a.only, &a.sides, a.pattern, a.quick, &a.out,
            )?;
            crate::emit(a.json, &grids, String::new)?;
            Ok(quiclab_runner::noise_bench::exit_code(&grids))
        }
        BenchCommand::Players(a) => {
            let bench = quiclab_runner::players_bench::bench_players(a.quick, a.jobs.n, &a.out)?;
            crate::emit(a.json, &bench, String::new).map(|_| 0)
        }
        BenchCommand::InjectNoise { noise } => quiclab_lab::noise::inject_json(&noise).map(|_| 0),
    }
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
