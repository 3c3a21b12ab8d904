//! A grid spread over machines: each runs `quiclab run FILE --shard K/N` into its own results
//! directory, and [`merge`] puts the shards back together (quiclab-results' merge) and says which
//! runs of the whole plan are still missing, with the command that runs exactly those.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use std::os::unix::fs::MetadataExt;

use anyhow::{Result, anyhow, bail};
use quiclab_results::Store;
use quiclab_results::merge::MergeReport;

/// What `quiclab merge` did and what is left (`--json` prints it).
#[derive(Debug, Clone, serde::Serialize)]
pub struct MergeOutcome {
    pub out: PathBuf,
    pub report: MergeReport,
    /// Runs of the whole plan that no shard holds, by key.
    pub missing: Vec<String>,
    /// The command that runs them into the merged directory.
    pub command: String,
    pub planned: usize,
}

/// `quiclab merge`: claims `out` (new, empty or quiclab's, not one of the shards, without a
/// database), locks it, merges `shards` into it, and when the merge fails removes what this
/// merge wrote — the directory it created, or its files — and nothing that was there before.
pub fn merge_into(
    shards: &[PathBuf],
    out: &Path,
    allow_mixed_versions: bool,
) -> Result<MergeOutcome> {
    // Refused before anything is written: an --out that is one of the shards (merging into it
    // would write beside the shard's own database), or one that holds a database already.
    let same_dir = |a: &Path, b: &Path| match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    };
    for shard in shards {
        if same_dir(shard, out) {
            bail!(
                "--out {}: is the shard {} itself; merge writes a new results directory (give a \
                 new or empty --out)",
                out.display(),
                shard.display()
            );
        }
    }
    if std::fs::symlink_metadata(out.join("results.sqlite")).is_ok() {
        bail!(
            "--out {}: holds a results database already; merge writes a new one (give a new or \
             empty --out; nothing was changed)",
            out.display()
        );
    }
    quiclab_outputs::check_writable(out, "--out")?;
    // What --out held before: a merge that fails removes only what it wrote itself.
    let before = quiclab_outputs::Snapshot::take(out);
    let (out, _) = quiclab_outputs::claim(out, "--out")?;
    let _lock = quiclab_outputs::lock_dir(&out, "--out", false)?;
    let merged = merge(shards, &out, allow_mixed_versions);
    if merged.is_err() {
        let _ = before.remove_new();
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
