//! `quiclab reproduce`: flags in, packs run and verdicts out (quiclab_runner::reproduce).

use std::path::PathBuf;

use anyhow::{Result, bail};
use clap::Args;
use quiclab_runner::reproduce::{self, FindingVerdict, Library, PackOptions};

#[derive(Args, Debug)]
pub struct ReproduceArgs {
    /// A study (carlucci2015, …) or all
    pub study: Option<String>,
    /// Only this finding (repeatable, e.g. --finding 000-5e): run just the scenarios it needs and
    /// judge just it
    #[arg(long = "finding", value_name = "ID")]
    pub findings: Vec<String>,
    /// List the studies, their findings and the time of each pack, quick and full
    #[arg(long, conflicts_with = "judge")]
    pub list: bool,
    /// Judge the results stored in DIR again (DIR/STUDY/SCENARIO/results.sqlite), running nothing
    #[arg(long, value_name = "DIR")]
    pub judge: Option<PathBuf>,
    /// Each scenario's quick form (one repetition where a scenario has none)
    #[arg(long)]
    pub quick: bool,
    /// Override every scenario's repetitions
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub repetitions: Option<u32>,
    /// Where the packs' results and the verdicts go (default quiclab-reproduce)
    #[arg(long, value_name = "DIR", default_value = "quiclab-reproduce")]
    pub out: PathBuf,
    /// Continue an interrupted pack: runs already stored are skipped
    #[arg(long)]
    pub resume: bool,
    /// Run only the K-th of N parts of each scenario's plan (docs/scale.md)
    #[arg(long, value_name = "K/N", conflicts_with = "judge")]
    pub shard: Option<quiclab_experiment::Shard>,
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
    let studies = reproduce::only_findings(lib.select(which)?, &args.findings)?;
    let opts = |quick| PackOptions {
        quick,
        repetitions: args.repetitions,
        resume: args.resume,
        shard: args.shard,
    };
    if args.list {
        let rows = reproduce::listing(&lib, &studies, args.repetitions)?;
        match args.json {
            true => println!("{}", serde_json::to_string_pretty(&rows)?),
            false => rows.iter().for_each(|r| println!("{r}")),
        }
        return Ok(0);
    }
    let dir = match &args.judge {
        Some(d) if !d.is_dir() => bail!("--judge {}: no such directory", d.display()),
        Some(d) => d.clone(),
        None => quiclab_outputs::claim_dir(&args.out, "--out", &["verdicts.json"])?,
    };
    let mut verdicts: Vec<FindingVerdict> = Vec::new();
    for s in &studies {
        let study_dir = dir.join(&s.name);
        let dirs = match &args.judge {
            Some(_) => reproduce::pack_dirs(s, &study_dir),
            None => reproduce::run_pack(
                &lib,
                s,
                &study_dir,
                &opts(args.quick),
                &crate::signals::set_exit_hint,
            )?,
        };
        if args.judge.is_some() && dirs.is_empty() {
            bail!(
                "--judge {}: no results of study {} there ({}/SCENARIO/results.sqlite)",
                dir.display(),
                s.name,
                study_dir.display()
            );
        }
        verdicts.extend(reproduce::judge_study(s, &dirs, Some(&lib))?);
    }
    let (json, csv) = reproduce::write_verdicts(&dir, &verdicts)?;
    let registry = quiclab_runner::metric_registry();
    let html = quiclab_report::reproduction::write(&dir, &studies, &verdicts, &registry)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&verdicts)?);
    } else {
        verdicts.iter().for_each(|v| println!("{v}"));
        println!("{}\n{}\n{}", json.display(), csv.display(), html.display());
    }
    Ok(0)
}
