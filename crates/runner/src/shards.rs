//! A grid spread over machines: each runs `quiclab run FILE --shard K/N` into its own results
//! directory, and [`merge`] puts the shards back together (quiclab-results' merge) and says which
//! runs of the whole plan are still missing, with the command that runs exactly those.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{Result, anyhow};
use quiclab_results::Store;
use quiclab_results::merge::MergeReport;

/// What `quiclab merge` did and what is left.
#[derive(Debug, Clone)]
pub struct MergeOutcome {
    pub out: PathBuf,
    pub report: MergeReport,
    /// Runs of the whole plan that no shard holds, by key.
    pub missing: Vec<String>,
    /// The command that runs them into the merged directory.
    pub command: String,
    pub planned: usize,
}

/// `quiclab merge`: claims `out` (new, empty or quiclab's), merges `shards` into it, and when
/// the merge fails removes what it made — the directory it created, or its files in an empty
/// one — so a failed merge leaves nothing behind.
pub fn merge_into(
    shards: &[PathBuf],
    out: &Path,
    allow_mixed_versions: bool,
) -> Result<MergeOutcome> {
    let was_claimed = quiclab_outputs::is_claimed(out);
    let (out, created) = quiclab_outputs::claim(out, "--out")?;
    let merged = merge(shards, &out, allow_mixed_versions);
    if merged.is_err() {
        if created {
            let _ = quiclab_outputs::remove_claimed_dir(&out);
        } else {
            let _ = quiclab_outputs::remove_listed(&out, |_| true);
            let _ = quiclab_outputs::remove_claimed_dir(&out.join("traces"));
            if !was_claimed {
                let _ = std::fs::remove_file(out.join(quiclab_outputs::MARKER));
            }
        }
    }
    merged
}

/// Merges `shards` into `out` and compares the result with the whole plan of its scenario (the
/// stored text; its quick form when the shards ran it; the repetitions their command lines gave).
pub fn merge(shards: &[PathBuf], out: &Path, allow_mixed_versions: bool) -> Result<MergeOutcome> {
    let report = quiclab_results::merge::merge(shards, out, allow_mixed_versions)?;
    let store = Store::open_to_write(&out.join("results.sqlite"))?;
    let stored = store.scenario()?;
    let sessions = store.sessions()?;
    let mut scenario = quiclab_experiment::parse(&stored.text, &stored.file)
        .map_err(|e| anyhow!("the merged scenario does not parse: {e}"))?;
    let quick = stored.name == format!("{}-quick", scenario.name);
    if quick {
        scenario = scenario
            .quick_form(&stored.file)
            .map_err(|e| anyhow!("{e}"))?;
    }
    let repetitions = store.plan()?.repetitions.or_else(|| {
        sessions
            .iter()
            .find_map(|s| quiclab_results::merge::repetitions_of(&s.environment.command))
    });
    if let Some(r) = repetitions {
        scenario.repetitions = r;
    }
    quiclab_experiment::check_plan_size(&scenario).map_err(|e| anyhow!("{e}"))?;
    let plan = quiclab_experiment::expand(&scenario);
    let done: BTreeSet<String> = store.runs()?.into_iter().map(|r| r.key).collect();
    let missing: Vec<String> = plan
        .iter()
        .filter(|r| !done.contains(&r.key))
        .map(|r| r.key.clone())
        .collect();
    store.set_planned_runs(plan.len())?;
    let mut command = format!(
        "quiclab run {} --resume --out {}",
        stored.file,
        out.display()
    );
    if quick {
        command.push_str(" --quick");
    }
    if let Some(r) = repetitions {
        command.push_str(&format!(" --repetitions {r}"));
    }
    Ok(MergeOutcome {
        out: out.to_path_buf(),
        report,
        missing,
        command,
        planned: plan.len(),
    })
}

impl std::fmt::Display for MergeOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "quiclab merge: {} of {} planned run(s) in {} ({} session(s))",
            self.report.runs,
            self.planned,
            self.out.join("results.sqlite").display(),
            self.report.sessions
        )?;
        if !self.report.mixed_versions.is_empty() {
            write!(
                f,
                "\nmixed quiclab builds (allowed): {}",
                self.report.mixed_versions.join("; ")
            )?;
        }
        for d in &self.report.duplicates {
            write!(f, "\n{d}")?;
        }
        if self.missing.is_empty() {
            write!(f, "\nevery run of the plan is there")?;
        } else {
            write!(
                f,
                "\n{} run(s) missing: {}\nto run them: {}",
                self.missing.len(),
                self.missing.join(", "),
                self.command
            )?;
        }
        Ok(())
    }
}
