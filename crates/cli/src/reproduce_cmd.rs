//! `quiclab reproduce`: flags in, packs run and verdicts out (quiclab_runner::reproduce).

use std::path::PathBuf;

use anyhow::{Result, bail};
use clap::Args;
use quiclab_runner::reproduce::{self, FindingVerdict, Library, PackOptions};

#[derive(Args, Debug)]
pub struct ReproduceArgs {
    /// A study (carlucci2015, …) or all
    pub study: Option<String>,
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
    let studies = lib.select(which)?;
    let opts = |quick| PackOptions {
        quick,
        repetitions: args.repetitions,
        resume: args.resume,
    };
    if args.list {
        let mut rows = Vec::new();
        for s in &studies {
            let (quick, full) = (
                reproduce::estimate_s(&lib, s, &opts(true))?,
                reproduce::estimate_s(&lib, s, &opts(false))?,
            );
            let runnable = s
                .findings
                .iter()
                .filter(|f| !matches!(f.judged, quiclab_verdict::Judged::NotRunnable { .. }))
                .count();
            rows.push(serde_json::json!({"study": s.name, "title": s.title, "findings": s.findings.len(),
                "runnable": runnable, "scenarios": reproduce::scenarios_of(s), "quick_s": quick, "full_s": full}));
            if !args.json {
                println!(
                    "{}: {} findings ({runnable} runnable) over {}; quick ≈ {}, full ≈ {}\n  {}",
                    s.name,
                    s.findings.len(),
                    reproduce::scenarios_of(s).join(", "),
                    quiclab_runner::format_duration(quick),
                    quiclab_runner::format_duration(full),
                    s.title
                );
                for f in &s.findings {
                    println!("  {:<16} {}", f.id, f.claim);
                }
            }
        }
        if args.json {
            println!("{}", serde_json::to_string_pretty(&rows)?);
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
        verdicts.extend(reproduce::judge_study(s, &dirs)?);
    }
    let (json, csv) = reproduce::write_verdicts(&dir, &verdicts)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&verdicts)?);
    } else {
        for v in &verdicts {
            let j = &v.judgement;
            let est = j.estimate.as_ref().map_or(String::new(), |e| {
                format!(
                    " median {:.3} ({:.0} % CI {:.3}–{:.3})",
                    e.median,
                    e.level * 100.0,
                    e.low,
                    e.high
                )
            });
            let p = j.p.map_or(String::new(), |p| format!(", p = {p:.3}"));
            println!(
                "{}/{:<16} {:<14} n = {}{p}{est}  {}",
                v.study,
                v.id,
                reproduce::verdict_word(&j.verdict),
                j.counts.pairs,
                v.claim
            );
        }
        println!("{}\n{}", json.display(), csv.display());
    }
    Ok(0)
}
