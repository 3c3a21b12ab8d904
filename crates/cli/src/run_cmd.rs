//! `quiclab run FILE`: flags in, the runner (quiclab-runner) does the grid, progress and results
//! out.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use quiclab_runner::{Resume, format_duration};

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
}

pub fn run(args: RunArgs) -> Result<i32> {
    let (mut scenario, text) =
        quiclab_runner::load_scenario(&args.file, args.repetitions, args.quick)?;
    if let Some(n) = args.retry_flagged {
        scenario.retry_flagged = Some(n);
    }
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| quiclab_runner::default_out(&scenario, args.shard));
    if args.dry_run {
        // Streamed: each run is built, estimated, printed and dropped (a plan is never held).
        // A reader that stops early (`| head`) closes the pipe: that ends the listing, quietly.
        return match print_dry_run(&args, &scenario, &out) {
            Err(e)
                if e.downcast_ref::<std::io::Error>()
                    .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe) =>
            {
                Ok(0)
            }
            r => r.map(|()| 0),
        };
    }
    let mut plan = quiclab_runner::prepare_plan(&args.file, &scenario)?;
    if let Some(shard) = args.shard {
        plan = quiclab_experiment::shard_of(&plan, shard);
    }

    let resume = if args.retry_failed {
        Resume::RetryFailed
    } else if args.resume {
        Resume::Yes
    } else {
        Resume::No
    };
    let outcome = quiclab_runner::execute(
        &args.file,
        &scenario,
        &text,
        &plan,
        &out,
        quiclab_runner::Mode {
            resume,
            quick: args.quick,
            shard: args.shard,
        },
        &crate::signals::set_exit_hint,
    )?;
    if args.report {
        crate::report_cmd::write(&outcome.out, &Default::default())?;
    }
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
}

pub fn merge(args: MergeArgs) -> Result<i32> {
    let was_claimed = quiclab_outputs::is_claimed(&args.out);
    let (out, created) = quiclab_outputs::claim(&args.out, "--out")?;
    match quiclab_runner::shards::merge(&args.shards, &out, args.allow_mixed_versions) {
        Ok(outcome) => {
            println!("{outcome}");
            Ok(0)
        }
        Err(e) => {
            // A failed merge leaves nothing behind: the directory it made, or the files it
            // wrote into an empty one it claimed.
            if created {
                let _ = quiclab_outputs::remove_claimed_dir(&out);
            } else {
                let _ = quiclab_outputs::remove_listed(&out, |_| true);
                let _ = quiclab_outputs::remove_claimed_dir(&out.join("traces"));
                if !was_claimed {
                    let _ = std::fs::remove_file(out.join(quiclab_outputs::MARKER));
                }
            }
            Err(e)
        }
    }
}

fn print_dry_run(
    args: &RunArgs,
    scenario: &quiclab_experiment::Scenario,
    out: &std::path::Path,
) -> Result<()> {
    use std::io::Write;
    // A first pass counts the plan for the header (runs are built one at a time and dropped).
    let (mut runs, mut settings) = (0usize, 0usize);
    let mut filter = args.shard.map(quiclab_experiment::ShardFilter::new);
    quiclab_experiment::for_each_run(scenario, |r| {
        if filter.as_mut().is_none_or(|f| f.keeps(&r)) {
            runs += 1;
            settings = settings.max(r.setting + 1);
        }
        true
    });
    let mut w = std::io::stdout().lock();
    writeln!(
        w,
        "{}: {runs} run(s) = {settings} setting(s) × {} repetition(s) × contenders, order {:?}",
        args.file.display(),
        scenario.repetitions,
        scenario.order
    )?;
    writeln!(
        w,
        "{:>5}  {:>20}  {:>8}  {:>8}  key",
        "run", "seed", "≈ s", "limit s"
    )?;
    let mut total = 0.0;
    // The slowest run (key, estimate, limit), and the runs whose limit leaves too little headroom:
    // transfers run longer than their estimate under loss; timed runs (video, flows for a
    // duration) as long as it.
    let mut slowest: Option<(String, f64, f64)> = None;
    let mut tight: (usize, Option<String>) = (0, None);
    let mut written = Ok(());
    quiclab_runner::dry_run_each(&args.file, scenario, args.shard, |l| {
        total += l.estimate_s;
        if slowest.as_ref().is_none_or(|s| l.estimate_s >= s.1) {
            slowest = Some((l.run.key.clone(), l.estimate_s, l.limit_s));
        }
        if l.limit_s < l.estimate_s * 1.2 + 20.0 {
            tight.0 += 1;
            tight.1.get_or_insert_with(|| l.run.key.clone());
        }
        written = writeln!(
            w,
            "{:>5}  {:>20}  {:>8.1}  {:>8.0}  {}",
            l.run.index, l.run.seed, l.estimate_s, l.limit_s, l.run.key
        );
        written.is_ok()
    })?;
    written?;
    if let Some((key, estimate, limit)) = &slowest {
        writeln!(
            w,
            "slowest run: {key} ≈ {estimate:.0} s, time limit {limit:.0} s{} (a run past its limit \
             is stored as timed out and reported as censored)",
            if scenario.timeout.is_some() {
                " (the scenario's timeout)"
            } else {
                " (derived from the run's bytes and the link; set timeout = \"…\" to override)"
            }
        )?;
    }
    if let (n, Some(first)) = &tight {
        writeln!(
            w,
            "warning: {n} run(s) have a time limit under 1.2 × their estimate + 20 s (first: \
             {first}); raise timeout"
        )?;
    }
    writeln!(
        w,
        "a run flagged for emulator fidelity runs again up to {} time(s) (retry_flagged)",
        scenario
            .retry_flagged
            .unwrap_or(quiclab_runner::DEFAULT_RETRY_FLAGGED)
    )?;
    writeln!(
        w,
        "estimated total: {} (lab set-up, handshakes and transfers at the link rate or the \
         loss-limited rate; an estimate) → {}",
        format_duration(total),
        out.join("results.sqlite").display()
    )?;
    Ok(())
}
