//! `quiclab`: the command line of the lab — a library so that its tests (crates/cli/tests) can
//! parse flags as the binary does; `main.rs` calls [`main`].

pub mod bench;
pub mod calibrate;
pub mod demo;
pub mod flows_cmd;
pub mod link_args;
pub mod page_cmd;
pub mod report_cmd;
pub mod reproduce_cmd;
pub mod run_cmd;
pub mod shell;
pub mod stacks_cmd;
pub mod video_cmd;
pub mod workload_args;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "quiclab",
    version,
    about = "Measure HTTP/1.1, HTTP/2 and HTTP/3 across an emulated network link",
    long_about = "quiclab builds a lab of two network namespaces joined by a user-space link emulator \
                  (rate, delay, loss, tail-drop queue, traces and profiles) and measures real protocol \
                  stacks across it. Needs root."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// The main job: h1 vs h2 vs h3 on two emulated links, a few repetitions, report in ./quiclab-demo/
    Demo(demo::DemoArgs),
    /// Load a web page (built-in corpus or a directory) over h1, h2 or h3 across a fresh lab, with
    /// quiclab's browser-like loader or headless Chromium; HAR and waterfall
    Page(page_cmd::PageArgs),
    /// A workload's half inside a lab's namespace (server, fetch or page client), configured by one
    /// JSON file; prints one JSON report
    #[command(hide = true)]
    Child {
        /// The configuration (written by the workload that starts the child)
        config: std::path::PathBuf,
    },
    /// Run a scenario file's grid of runs, each in a fresh lab, into DIR/results.sqlite
    Run(run_cmd::RunArgs),
    /// Merge the results directories of a scenario's shards (`run --shard K/N`) into one
    Merge(run_cmd::MergeArgs),
    /// Write DIR/report.html and figures from a results directory
    Report(report_cmd::ReportArgs),
    /// Judge results B against results A run for run, per metric (B better, A better, no difference that matters, …)
    Compare(report_cmd::CompareArgs),
    /// Run a seed study's scenarios as one pack and judge each of its findings (studies/*.toml)
    Reproduce(reproduce_cmd::ReproduceArgs),
    /// Export a results directory as CSV for pandas/R
    Export(report_cmd::ExportArgs),
    /// Download --size bytes over h1, h2 or h3 across a fresh lab and report timings, goodput, CPU
    Bulk(stacks_cmd::BulkArgs),
    /// The system calls of one bulk download, client and server, counted with strace -f -c (seed
    /// 002's profiling; counts only, no times)
    Syscalls(stacks_cmd::SyscallsArgs),
    /// Competing flows through one emulated bottleneck (e.g. --flow h3:gquic-cubic --flow h1:cubic
    /// --duration 60s): per-flow goodput over time, the bottleneck's per-flow counters, Jain's index
    Flows(flows_cmd::FlowsArgs),
    /// Adaptive video streaming (DASH) through one emulated bottleneck (e.g. --proto h3 --abr bba2
    /// --profile lte --duration 60s): bitrate, rebuffering, waits after seeks, per-segment log
    Video(video_cmd::VideoArgs),
    /// Serve h1/h2 (TLS over TCP) and h3 (QUIC) on port 443 (inside a lab's server namespace)
    Serve(stacks_cmd::ServeArgs),
    /// Request paths from a lab server over one protocol and report per-request timings
    Fetch(stacks_cmd::FetchArgs),
    /// Run a command in the client namespace of a fresh lab (and optionally a server in the server's)
    Shell(shell::ShellArgs),
    /// Measure the emulated link with quiclab's own probes and compare with its configuration
    Calibrate(calibrate::CalibrateArgs),
    /// Remove namespaces and processes left behind by labs whose quiclab process died
    Clean {
        /// Print what was removed as JSON
        #[arg(long)]
        json: bool,
    },
    /// Benchmarks (speed and precision targets; see docs/link.md)
    Bench {
        #[command(subcommand)]
        which: bench::BenchCommand,
    },
}

/// The binary's entry: parses the command line, runs the command, exits with its status.
pub fn main() {
    // A negative number is a value out of its range, said as such (not "unexpected argument").
    let matches = Cli::command()
        .mut_subcommands(|c| c.allow_negative_numbers(true))
        .get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    // Commands that build labs tear them down on signals; `serve` and `fetch` run inside a lab
    // that someone else owns and simply end on SIGTERM.
    if !matches!(
        cli.command,
        Command::Serve(_) | Command::Fetch(_) | Command::Child { .. }
    ) {
        quiclab_lab::guard::install();
    }
    let result = match cli.command {
        Command::Demo(args) => demo::run(args),
        Command::Run(args) => run_cmd::run(args),
        Command::Merge(args) => run_cmd::merge(args),
        Command::Page(args) => page_cmd::page(args),
        Command::Child { config } => quiclab_workload::child::main(&config),
        Command::Report(args) => report_cmd::report(args),
        Command::Compare(args) => report_cmd::compare(args),
        Command::Reproduce(args) => reproduce_cmd::run(args),
        Command::Export(args) => report_cmd::export(args),
        Command::Bulk(args) => stacks_cmd::bulk(args),
        Command::Syscalls(args) => stacks_cmd::syscalls(args),
        Command::Flows(args) => flows_cmd::run(args),
        Command::Video(args) => video_cmd::run(args),
        Command::Serve(args) => stacks_cmd::serve(args),
        Command::Fetch(args) => stacks_cmd::fetch(args),
        Command::Shell(args) => shell::run(args),
        Command::Calibrate(args) => calibrate::run(args),
        Command::Clean { json } => clean(json),
        Command::Bench { which } => bench::run(which),
    };
    match result {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("quiclab: error: {e:#}");
            std::process::exit(2);
        }
    }
}

fn clean(json: bool) -> anyhow::Result<i32> {
    let report = quiclab_lab::topology::clean_stale()?;
    emit(json, &report, || format!("{report}\n")).map(|_| 0)
}

/// Prints `doc` as one JSON document (`--json`), else `text`.
fn emit<T: serde::Serialize>(
    json: bool,
    doc: &T,
    text: impl FnOnce() -> String,
) -> anyhow::Result<()> {
    match json {
        true => println!("{}", serde_json::to_string_pretty(doc)?),
        false => print!("{}", text()),
    }
    Ok(())
}
