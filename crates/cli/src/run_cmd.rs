//! `quiclab run FILE`: flags in, the runner (quiclab-runner) does the grid, progress and results
//! out.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Scenario file (TOML; see docs/experiments.md)
    pub file: PathBuf,
    /// Results directory (results.sqlite, traces/, report.html); default quiclab-results/<name>
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Continue an interrupted run of the same scenario: skip the runs already stored
    #[arg(long)]
    pub resume: bool,
    /// With --resume: run the stored failed and timed-out runs again (their records are replaced)
    #[arg(long, requires = "resume")]
    pub retry_failed: bool,
    /// List the runs and an estimate of how long they take, and run nothing
    #[arg(long)]
    pub dry_run: bool,
    /// Run a run flagged for emulator fidelity again (same seed) up to N times until an attempt
    /// passes; every attempt is stored. Overrides the scenario's `retry_flagged` (default 2)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=quiclab_experiment::scenario::MAX_RETRY_FLAGGED as i64))]
    pub retry_flagged: Option<u32>,
    /// Override the scenario's `repetitions`
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=quiclab_experiment::MAX_REPETITIONS as i64))]
    pub repetitions: Option<u32>,
    /// Write the report (DIR/report.html) when the runs are done
    #[arg(long)]
    pub report: bool,
    /// Run the scenario's quick form (its [quick] table: shorter content, fewer repetitions);
    /// results go to quiclab-results/<name>-quick by default
    #[arg(long)]
    pub quick: bool,
    /// Run only the K-th of N disjoint parts of the plan, K from 1 (a setting's repetition stays
    /// whole); results go to quiclab-results/<name>-shard-K-of-N by default (docs/scale.md)
    #[arg(long, value_name = "K/N")]
    pub shard: Option<quiclab_experiment::Shard>,
    #[command(flatten)]
    pub jobs: JobsArg,
    /// Print what the run did as one JSON document on stdout (progress stays on stderr)
    #[arg(long, conflicts_with = "dry_run")]
    pub json: bool,
}
/// `--jobs`, declared once for every command that runs labs side by side.
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct JobsArg {
    /// Labs at once: N, or auto (as many as the CPU budget admits; docs/scale.md) [default: 1; bench jobs: auto]
    #[arg(id = "jobs", long = "jobs", value_name = "N|auto", value_parser = quiclab_runner::cost::Jobs::parse)]
    pub n: Option<quiclab_runner::cost::Jobs>,
}

pub fn run(args: RunArgs) -> Result<i32> {
    let request = quiclab_runner::RunRequest {
        file: args.file,
        out: args.out,
        resume: args.resume,
        retry_failed: args.retry_failed,
        dry_run: args.dry_run,
        retry_flagged: args.retry_flagged,
        repetitions: args.repetitions,
        quick: args.quick,
        shard: args.shard,
        jobs: args.jobs.n,
        point_to_report: !args.report,
    };
    let hint = &quiclab_lab::guard::set_exit_hint;
    let Some(outcome) = quiclab_runner::run_file(&request, hint)? else {
        return Ok(0);
    };
    if args.report {
        crate::report_cmd::write(&outcome.out, &Default::default())?;
    }
    crate::emit(args.json, &outcome, String::new)?;
    Ok(if outcome.failed > 0 { 1 } else { 0 })
}

#[derive(Args, Debug)]
pub struct MergeArgs {
    /// The shards' results directories (each `quiclab run FILE --shard K/N --out DIR`)
    #[arg(required = true)]
    pub shards: Vec<PathBuf>,
    /// The merged results directory (a new one; the shards are only read)
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Merge shards made by different quiclab builds (each session keeps its build)
    #[arg(long)]
    pub allow_mixed_versions: bool,
    /// Print what was merged and what is missing as one JSON document
    #[arg(long)]
    pub json: bool,
}

pub fn merge(args: MergeArgs) -> Result<i32> {
    let outcome =
        quiclab_runner::shards::merge_into(&args.shards, &args.out, args.allow_mixed_versions)?;
    crate::emit(args.json, &outcome, || format!("{outcome}\n")).map(|_| 0)
}
