//! `quiclab reproduce`: flags in, packs run and verdicts out (quiclab_runner::reproduce).

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use quiclab_runner::reproduce::{self, Library, PackOptions};

#[derive(Args, Debug)]
pub struct ReproduceArgs {
    /// A study (carlucci2015, …) or all
    pub study: Option<String>,
    /// Only this finding (repeatable, e.g. --finding 000-5e): run and judge just what it needs
    #[arg(long = "finding", value_name = "ID")]
    pub findings: Vec<String>,
    /// List the studies, their findings and the time of each pack, quick and full
    #[arg(long, conflicts_with_all = ["judge", "out", "keep_evidence", "resume", "shard", "whole_grid"])]
    pub list: bool,
    /// Judge the results (DIR/STUDY/SCENARIO/results.sqlite) or the evidence in DIR, running nothing
    #[arg(long, value_name = "DIR", conflicts_with = "jobs")]
    pub judge: Option<PathBuf>,
    /// Each scenario's quick form (one repetition where a scenario has none)
    #[arg(long, conflicts_with = "judge")]
    pub quick: bool,
    /// Override every scenario's repetitions
    #[arg(long, conflicts_with = "judge", value_parser = clap::value_parser!(u32).range(1..=quiclab_experiment::MAX_REPETITIONS as i64))]
    pub repetitions: Option<u32>,
    /// Where the packs' results and the verdicts go (default quiclab-reproduce). With --judge:
    /// where the verdicts and reports go (default: the judged pack's DIR, when quiclab made it;
    /// for evidence, quiclab-reproduce: evidence is only read)
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Continue an interrupted pack: runs already stored are skipped
    #[arg(long, conflicts_with = "judge")]
    pub resume: bool,
    /// Run only the K-th of N parts of each scenario's plan (docs/scale.md)
    #[arg(long, value_name = "K/N", conflicts_with = "judge")]
    pub shard: Option<quiclab_experiment::Shard>,
    #[command(flatten)]
    pub jobs: crate::run_cmd::JobsArg,
    /// Run each scenario's whole grid, not only the runs some finding judges
    #[arg(long, conflicts_with = "judge")]
    pub whole_grid: bool,
    /// Run the study's explanations (their runs with and without each setting), not its findings
    #[arg(long, conflicts_with = "judge")]
    pub explain: bool,
    /// Add each scenario's judged runs to the evidence in DIR as it finishes (or those --judge reads)
    #[arg(long, value_name = "DIR")]
    pub keep_evidence: Option<PathBuf>,
    /// A quiclab checkout holding studies/ and scenarios/ (default: found from here or the binary)
    #[arg(long, value_name = "DIR")]
    pub repo: Option<PathBuf>,
    /// Print JSON (--list, verdicts)
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: ReproduceArgs) -> Result<i32> {
    let lib = Library::find(args.repo.as_deref())?;
    let which = args.study.as_deref().unwrap_or("all");
    let (selected, broken) = lib.select(which)?;
    for e in &broken {
        eprintln!("quiclab reproduce: a study file is broken and left out: {e}");
    }
    let studies = reproduce::only_findings(selected, &args.findings)?;
    let opts = |quick| PackOptions {
        repetitions: args.repetitions,
        resume: args.resume,
        shard: args.shard,
        jobs: args.jobs.n.unwrap_or(quiclab_runner::cost::Jobs::ONE),
        whole_grid: args.whole_grid,
        explain: args.explain,
        keep_evidence: args.keep_evidence.clone(),
        ..PackOptions::new(quick)
    };
    if args.list {
        let rows = reproduce::listing(&lib, &studies, args.repetitions)?;
        match args.json {
            true => println!("{}", serde_json::to_string_pretty(&rows)?),
            false => rows.iter().for_each(|r| println!("{r}")),
        }
        // With --json stdout stays one JSON document: the broken files are on stderr above.
        if !args.json {
            broken.iter().for_each(|e| println!("broken: {e}"));
        }
        return Ok(if broken.is_empty() { 0 } else { 1 });
    }
    let done = reproduce::reproduce(
        &lib,
        &studies,
        args.judge.as_deref(),
        args.out.as_deref(),
        &opts(args.quick),
        &quiclab_lab::guard::set_exit_hint,
    )?;
    crate::emit(args.json, &done.verdicts, || done.text())?;
    Ok(if broken.is_empty() { 0 } else { 1 })
}
