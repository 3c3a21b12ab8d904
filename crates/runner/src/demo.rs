//! `quiclab demo`: the first thing a newcomer runs.
//!
//! A small built-in scenario (the three protocols, two network settings, a few repetitions) run by
//! the same runner as `quiclab run`, then the report, then a short table. Everything lands in one
//! directory (`./quiclab-demo/`): the scenario file it ran, results.sqlite, report.html, figures/.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use quiclab_model::bulk::{GOODPUT_MBPS, TOTAL_MS};
use quiclab_report::summary::RunsSummary;
use quiclab_results::Store;

/// The built-in scenario (scenarios/demo.toml): seed 000's question in miniature — does HTTP/3
/// over QUIC download faster than HTTP/1.1 or HTTP/2 over TCP on a clean link, and on one with 2 %
/// random loss? Its first line marks a directory as an earlier demo's.
pub const SCENARIO: &str = include_str!("../../../scenarios/demo.toml");

/// What a demo did (`quiclab demo --json` prints it).
#[derive(serde::Serialize)]
pub struct Demo {
    pub runs: usize,
    pub failed: usize,
    pub summary: RunsSummary,
    pub report_html: PathBuf,
    pub store: PathBuf,
}

/// Runs the demo into `out` (new, empty, or an earlier demo's: its results are replaced, never
/// mixed in); `start` is told the scenario's description and run count before the runs start.
pub fn run(
    out: &Path,
    repetitions: u32,
    start: impl FnOnce(&str, usize),
    exit_hint: &dyn Fn(String),
) -> Result<Demo> {
    quiclab_lab::topology::check_privileges()?;
    // A new or empty directory, or one quiclab claimed (an earlier demo's): its marker, not a
    // file name a user could have, says so.
    quiclab_outputs::claim_dir(out, "--out")?;
    let file = out.join("demo.toml");
    quiclab_outputs::write_in_claimed(&file, SCENARIO.as_bytes())
        .with_context(|| format!("writing {}", file.display()))?;
    // Only what quiclab's manifest lists goes: a demo made before quiclab kept a manifest is not
    // cleared by guesswork.
    if !quiclab_outputs::manifest(out).contains("results.sqlite")
        && out.join("results.sqlite").exists()
    {
        bail!(
            "--out {}: holds a results.sqlite that quiclab's manifest of the directory does not list \
             (an earlier demo by an older quiclab, or a file of someone else's); quiclab deletes only \
             what it lists as its own: remove the directory yourself or give another --out",
            out.display()
        );
    }
    quiclab_outputs::remove_listed(out, |n| {
        n == "results.sqlite" || n == "report.html" || n.starts_with("results.sqlite-")
    })?;
    for sub in ["figures", "traces"] {
        quiclab_outputs::remove_claimed_dir(&out.join(sub))?;
    }
    let (scenario, text, plan) = crate::load(&file, Some(repetitions), false)?;
    start(&scenario.description, plan.len());
    let outcome = crate::execute(
        &file,
        &scenario,
        &text,
        &plan,
        out,
        crate::Mode::default(),
        exit_hint,
    )?;
    let report = quiclab_report::from_store::write_report(
        out,
        &Default::default(),
        &crate::metric_registry(),
    )?;
    for note in &report.notes {
        eprintln!("quiclab report: note: {note}");
    }
    let store = Store::open(&out.join("results.sqlite"))?;
    let runs = store.runs()?;
    Ok(Demo {
        runs: runs.len(),
        failed: outcome.failed,
        summary: quiclab_report::summary::summarize_runs(&runs, &TOTAL_MS, &GOODPUT_MBPS),
        report_html: report.html,
        store: store.path().to_path_buf(),
    })
}
