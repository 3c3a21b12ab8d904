//! `quiclab demo`: the first thing a newcomer runs.
//!
//! A small built-in scenario (the three protocols, two network settings, a few repetitions) run by
//! the same runner as `quiclab run`, then the report, then a short table on the terminal. Everything
//! lands in `./quiclab-demo/`: the scenario file it ran, results.sqlite, report.html, figures/.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use quiclab_results::Store;

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Where to write the scenario, results and report (results of an earlier demo are replaced)
    #[arg(long, default_value = "quiclab-demo")]
    pub out: PathBuf,
    /// Repetitions per protocol and setting
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=quiclab_experiment::MAX_REPETITIONS as i64))]
    pub repetitions: u32,
}

/// The built-in scenario (scenarios/demo.toml): seed 000's question in miniature — does HTTP/3
/// over QUIC download faster than HTTP/1.1 or HTTP/2 over TCP on a clean link, and on one with 2 %
/// random loss? Its first line marks a directory as an earlier demo's.
pub const SCENARIO: &str = include_str!("../../../scenarios/demo.toml");

pub fn run(args: DemoArgs) -> Result<i32> {
    quiclab_lab::topology::check_privileges()?;
    // A new or empty directory, or one quiclab claimed (an earlier demo's): its marker, not a
    // file name a user could have, says so.
    quiclab_outputs::claim_dir(&args.out, "--out")?;
    let file = args.out.join("demo.toml");
    quiclab_outputs::write_in_claimed(&file, SCENARIO.as_bytes())
        .with_context(|| format!("writing {}", file.display()))?;
    // A demo always starts afresh: the previous demo's results are replaced, never mixed in. Only
    // what quiclab's manifest lists goes: a demo made before quiclab kept a manifest is not
    // cleared by guesswork.
    let unlisted = !quiclab_outputs::manifest(&args.out).contains("results.sqlite")
        && args.out.join("results.sqlite").exists();
    if unlisted {
        anyhow::bail!(
            "--out {}: holds a results.sqlite that quiclab's manifest of the directory does not list              (an earlier demo by an older quiclab, or a file of someone else's); quiclab deletes only              what it lists as its own: remove the directory yourself or give another --out",
            args.out.display()
        );
    }
    quiclab_outputs::remove_listed(&args.out, |n| {
        n == "results.sqlite" || n == "report.html" || n.starts_with("results.sqlite-")
    })?;
    for sub in ["figures", "traces"] {
        quiclab_outputs::remove_claimed_dir(&args.out.join(sub))?;
    }

    let (scenario, text, plan) = quiclab_runner::load(&file, Some(args.repetitions), false)?;
    println!(
        "quiclab demo: {} — {} runs, each in a fresh lab of two network namespaces joined by the \
         emulated link\n",
        scenario.description,
        plan.len()
    );
    let outcome = quiclab_runner::execute(
        &file,
        &scenario,
        &text,
        &plan,
        &args.out,
        quiclab_runner::Mode::default(),
        &crate::signals::set_exit_hint,
    )?;
    let report = crate::report_cmd::write(&args.out, &Default::default())?;
    let store = Store::open(&args.out.join("results.sqlite"))?;
    let runs = store.runs()?;
    let summary = quiclab_report::summary::summarize_runs(&runs, "total_ms", "goodput_mbps");
    println!(
        "\n{:<10} {:<6} {:>3} {:>14} {:>22} {:>15}",
        "setting", "proto", "n", "median ms", "mean ms (95 % CI)", "goodput Mbit/s"
    );
    for setting in &summary.settings {
        let label = &setting.label;
        for line in &setting.lines {
            let proto = &line.contender;
            match &line.summary {
                None => println!(
                    "{label:<10} {proto:<6} {:>3} {:>14} (every run failed or was flagged)",
                    0, "—"
                ),
                Some(s) => println!(
                    "{label:<10} {proto:<6} {:>3} {:>14.0} {:>8.0} ({:>5.0}–{:<5.0}) {:>15.2}",
                    s.n,
                    s.median,
                    s.mean,
                    s.ci95_low,
                    s.ci95_high,
                    line.secondary_median.unwrap_or(f64::NAN)
                ),
            }
        }
        println!(
            "{label:<10} → {} (Megyesi et al.'s rule: ≥ 70 % of its runs ≥ 10 % faster than the other's mean)",
            setting.verdict
        );
    }
    let excluded = summary.excluded;
    if excluded > 0 {
        println!(
            "\n{excluded} run(s) failed or were flagged for emulator fidelity (often: the hypervisor \
             stole CPU time); they are listed in the report and left out of these figures \
             (`quiclab report {} --include-flagged` puts the flagged ones in).",
            args.out.display()
        );
    }
    println!(
        "\nreport:  {}\nresults: {} ({} runs; `quiclab export {} --csv` for pandas/R)\n\
         Next: write your own scenario (docs/experiments.md) and `quiclab run FILE`.",
        report.html.display(),
        store.path().display(),
        runs.len(),
        args.out.display()
    );
    Ok(if outcome.failed > 0 { 1 } else { 0 })
}
