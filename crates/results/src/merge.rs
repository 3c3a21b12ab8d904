//! Merging the results databases of one scenario's shards (`quiclab merge`): every run once, with
//! its attempts, metrics and series, every session kept (renumbered). The inputs are opened
//! read-only and never changed. Shards of different scenarios (name or text) are refused, and so
//! are shards made by different quiclab builds unless the caller allows it.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use std::os::unix::fs::MetadataExt;

use rusqlite::{Connection, params};

use crate::store::{PlanRecord, ScenarioRecord, Store};

/// What a merge did.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct MergeReport {
    /// Runs in the merged database.
    pub runs: usize,
    /// Sessions copied (every session of every shard).
    pub sessions: usize,
    /// Runs found in more than one shard and which copy was kept, in words.
    pub duplicates: Vec<String>,
    /// The builds (version and commit) the shards came from, when more than one (allowed).
    pub mixed_versions: Vec<String>,
}

struct Input {
    /// The shard as the user named it.
    dir: PathBuf,
    /// Its database (the file itself, or an upgraded copy of an older schema).
    store: Store,
    scenario: ScenarioRecord,
    builds: BTreeSet<String>,
    plan: PlanRecord,
    /// The file's device and inode: the same shard named twice (a link, a trailing slash).
    inode: (u64, u64),
    /// The `--repetitions` its sessions' command lines gave, when the plan row does not say.
    repetitions: Option<u32>,
}

/// The `--repetitions N` a session's command line gave, if any.
pub fn repetitions_of(command: &str) -> Option<u32> {
    let mut words = command.split_whitespace();
    while let Some(w) = words.next() {
        if let Some(v) = w.strip_prefix("--repetitions=") {
            return v.parse().ok();
        }
        if w == "--repetitions" {
            return words.next()?.parse().ok();
        }
    }
    None
}

fn read_input(dir: &Path) -> Result<Input> {
    let path = dir.join("results.sqlite");
    if !path.is_file() {
        bail!(
            "{}: not a results directory (no results.sqlite; shards are made by `quiclab run FILE --shard K/N`)",
            dir.display()
        );
    }
    // Read-only: a shard is never changed (an older schema is read through an upgraded copy).
    let store = Store::open(&path)?;
    let scenario = store.scenario()?;
    let sessions = store.sessions()?;
    let builds = sessions
        .iter()
        .map(|s| {
            format!(
                "{} {}",
                s.environment.quiclab_version, s.environment.git_commit
            )
        })
        .collect();
    let repetitions = sessions
        .iter()
        .find_map(|s| repetitions_of(&s.environment.command));
    let plan = store.plan()?;
    let meta = std::fs::metadata(&path)?;
    Ok(Input {
        dir: dir.to_path_buf(),
        store,
        scenario,
        builds,
        plan,
        inode: (meta.dev(), meta.ino()),
        repetitions,
    })
}

/// Refuses shards that cannot be one plan's parts: the same shard twice (by its database's
/// identity, not its path), different quick/full forms, repetitions or shard counts, or two
/// shards of the same K/N.
fn check_one_plan(inputs: &[Input]) -> Result<()> {
    for (i, a) in inputs.iter().enumerate() {
        for b in &inputs[..i] {
            if a.inode == b.inode || a.plan.database_id == b.plan.database_id {
                bail!(
                    "{} and {} are the same shard (database {}): give each shard once",
                    b.dir.display(),
                    a.dir.display(),
                    a.plan.database_id
                );
            }
            let reps = |x: &Input| x.plan.repetitions.or(x.repetitions);
            if reps(a) != reps(b) {
                let say =
                    |r: Option<u32>| r.map_or("the scenario's own".to_string(), |r| r.to_string());
                bail!(
                    "{} ran {} repetitions and {} ran {}: shards of one plan have the same \
                     repetitions (rerun one with --repetitions)",
                    b.dir.display(),
                    say(reps(b)),
                    a.dir.display(),
                    say(reps(a))
                );
            }
            if let (Some(qa), Some(qb)) = (a.plan.quick, b.plan.quick)
                && qa != qb
            {
                bail!(
                    "{} and {} ran different forms of the scenario (quick and full): merge shards \
                     of one plan",
                    b.dir.display(),
                    a.dir.display()
                );
            }
            let n_of = |s: &Option<String>| {
                s.as_ref()
                    .and_then(|s| s.split('/').nth(1))
                    .map(str::to_string)
            };
            if a.plan.quick.is_some() && b.plan.quick.is_some() {
                if n_of(&a.plan.shard) != n_of(&b.plan.shard) {
                    bail!(
                        "{} is shard {} and {} is shard {}: shards of one plan split it the same way",
                        b.dir.display(),
                        b.plan.shard.as_deref().unwrap_or("(the whole plan)"),
                        a.dir.display(),
                        a.plan.shard.as_deref().unwrap_or("(the whole plan)")
                    );
                }
                if a.plan.shard.is_some() && a.plan.shard == b.plan.shard {
                    bail!(
                        "{} and {} are both shard {}: each part of the plan once",
                        b.dir.display(),
                        a.dir.display(),
                        a.plan.shard.as_deref().unwrap_or_default()
                    );
                }
            }
        }
    }
    Ok(())
}

const RUN_COLUMNS: &str = "key, run_index, setting, setting_label, contender, repetition, seed, \
     params, status, reason, flagged, flags, started_unix, duration_s, setup_ms, teardown_ms, \
     host_steal, session_id, result, attempt";
const ATTEMPT_COLUMNS: &str = "run_key, attempt, status, reason, flags, started_unix, duration_s, \
     host_steal, session_id, metrics, result";

/// Merges the results directories `shards` (each `DIR/results.sqlite` of the same scenario) into
/// `out` (a new `results.sqlite`). A run in two shards keeps its `ok` copy, else the later one,
/// and the report says which.
pub fn merge(shards: &[PathBuf], out: &Path, allow_mixed_versions: bool) -> Result<MergeReport> {
    if shards.is_empty() {
        bail!("nothing to merge: give the shards' results directories");
    }
    let inputs: Vec<Input> = shards
        .iter()
        .map(|d| read_input(d))
        .collect::<Result<_>>()?;
    if out.join("results.sqlite").exists() {
        bail!(
            "--out {}: holds a results database already; merge writes a new one (give a new or \
             empty --out)",
            out.display()
        );
    }
    let first = &inputs[0];
    for other in &inputs[1..] {
        if other.scenario.name != first.scenario.name || other.scenario.text != first.scenario.text
        {
            bail!(
                "{} holds scenario {:?} and {} holds {:?}{}: merge shards of one scenario (the same \
                 file text and seed) only",
                first.dir.display(),
                first.scenario.name,
                other.dir.display(),
                other.scenario.name,
                if other.scenario.name == first.scenario.name {
                    " with another text"
                } else {
                    ""
                }
            );
        }
    }
    // Parts of one scenario first, then of one plan of it.
    check_one_plan(&inputs)?;
    let builds: BTreeSet<String> = inputs.iter().flat_map(|i| i.builds.clone()).collect();
    if builds.len() > 1 && !allow_mixed_versions {
        bail!(
            "the shards come from different quiclab builds ({}): rerun them with one build, or add \
             --allow-mixed-versions (the merged results then say so)",
            builds.iter().cloned().collect::<Vec<_>>().join("; ")
        );
    }
    let record = ScenarioRecord {
        planned_runs: inputs.iter().map(|i| i.scenario.planned_runs).sum(),
        ..first.scenario.clone()
    };
    let store = Store::create_or_resume(&out.join("results.sqlite"), &record, false)?;
    if let Some(quick) = first.plan.quick {
        store.check_and_set_plan(quick, first.plan.repetitions.unwrap_or_default(), None)?;
    }
    let conn = store.connection();
    let mut report = MergeReport {
        mixed_versions: if builds.len() > 1 {
            builds.into_iter().collect()
        } else {
            Vec::new()
        },
        ..MergeReport::default()
    };
    for input in &inputs {
        let file = input.store.read_path();
        let uri = format!("file:{}?mode=ro", file.display());
        conn.execute("ATTACH DATABASE ?1 AS src", params![uri])
            .with_context(|| format!("attaching {}", file.display()))?;
        let copied = copy_shard(conn, &input.dir.join("results.sqlite"), &mut report);
        conn.execute_batch("DETACH DATABASE src")?;
        copied?;
    }
    report.runs = conn.query_row("SELECT COUNT(*) FROM runs", [], |r| r.get::<_, i64>(0))? as usize;
    // Traces are named by the run's index in the whole plan, which a shard keeps: no clashes.
    for dir in shards {
        copy_missing(&dir.join("traces"), &out.join("traces"))?;
    }
    Ok(report)
}

/// Copies what of `from` is not yet in `to`, recursively (nothing is overwritten; `to` and its
/// subdirectories are claimed as quiclab's, links in `from` are not followed).
fn copy_missing(from: &Path, to: &Path) -> Result<()> {
    if !std::fs::symlink_metadata(from).is_ok_and(|m| m.is_dir()) {
        return Ok(());
    }
    quiclab_outputs::claim_dir(to, "--out")?;
    for entry in std::fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        let kind = entry.file_type()?;
        if kind.is_dir() {
            copy_missing(&entry.path(), &target)?;
        } else if kind.is_file() && std::fs::symlink_metadata(&target).is_err() {
            if entry.file_name() == quiclab_outputs::MARKER {
                continue;
            }
            let mut dst = quiclab_outputs::create_in_claimed(&target)?;
            std::io::copy(&mut std::fs::File::open(entry.path())?, &mut dst)
                .with_context(|| format!("copying {}", entry.path().display()))?;
        }
    }
    Ok(())
}

/// Copies the attached shard `src` into the main database: its sessions renumbered after the
/// ones there, its runs (each with attempts, metrics, series) unless the main database already
/// has a better copy.
fn copy_shard(conn: &Connection, path: &Path, report: &mut MergeReport) -> Result<()> {
    let tx = conn.unchecked_transaction()?;
    let offset: i64 = tx.query_row("SELECT COALESCE(MAX(id), 0) FROM main.sessions", [], |r| {
        r.get(0)
    })?;
    report.sessions += tx.execute(
        "INSERT INTO main.sessions SELECT id + ?1, started_unix, quiclab_version, git_commit, \
         kernel, cpu_model, cpus, hostname, crates, command FROM src.sessions",
        params![offset],
    )?;
    // Runs in both: keep the ok one, else the later one.
    let mut stmt = tx.prepare(
        "SELECT s.key, s.status, s.started_unix, m.status, m.started_unix \
         FROM src.runs s JOIN main.runs m ON s.key = m.key",
    )?;
    let both: Vec<(String, String, f64, String, f64)> = stmt
        .query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })?
        .collect::<rusqlite::Result<_>>()?;
    drop(stmt);
    tx.execute_batch(
        "CREATE TEMP TABLE IF NOT EXISTS take (key TEXT PRIMARY KEY); DELETE FROM take;",
    )?;
    tx.execute(
        "INSERT INTO take SELECT key FROM src.runs WHERE key NOT IN (SELECT key FROM main.runs)",
        [],
    )?;
    for (key, s_status, s_started, m_status, m_started) in both {
        let s_ok = s_status == "ok";
        let m_ok = m_status == "ok";
        let take_src = if s_ok != m_ok {
            s_ok
        } else {
            s_started > m_started
        };
        report.duplicates.push(format!(
            "{key}: in two shards ({m_status} and {s_status} in {}); kept the {}",
            path.display(),
            if take_src {
                format!("{s_status} copy from {}", path.display())
            } else {
                format!("{m_status} copy already merged")
            }
        ));
        if take_src {
            for table in ["metrics", "series", "attempts"] {
                tx.execute(
                    &format!("DELETE FROM main.{table} WHERE run_key = ?1"),
                    params![key],
                )?;
            }
            tx.execute("DELETE FROM main.runs WHERE key = ?1", params![key])?;
            tx.execute("INSERT INTO take VALUES (?1)", params![key])?;
        }
    }
    let shifted = |cols: &str| cols.replace("session_id", &format!("session_id + {offset}"));
    tx.execute(
        &format!(
            "INSERT INTO main.runs ({RUN_COLUMNS}) SELECT {} FROM src.runs WHERE key IN (SELECT key FROM take)",
            shifted(RUN_COLUMNS)
        ),
        [],
    )?;
    tx.execute(
        &format!(
            "INSERT INTO main.attempts ({ATTEMPT_COLUMNS}) SELECT {} FROM src.attempts \
             WHERE run_key IN (SELECT key FROM take)",
            shifted(ATTEMPT_COLUMNS)
        ),
        [],
    )?;
    for table in ["metrics", "series"] {
        tx.execute(
            &format!(
                "INSERT INTO main.{table} SELECT * FROM src.{table} WHERE run_key IN (SELECT key FROM take)"
            ),
            [],
        )?;
    }
    tx.commit()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Environment, Status, StoredRun};

    fn shard(dir: &Path, text: &str, commit: &str, runs: &[(&str, Status, f64)]) {
        let record = ScenarioRecord {
            name: "s".into(),
            description: String::new(),
            file: "s.toml".into(),
            text: text.into(),
            planned_runs: runs.len(),
        };
        let mut store =
            Store::create_or_resume(&dir.join("results.sqlite"), &record, false).unwrap();
        store
            .begin_session(&Environment {
                git_commit: commit.into(),
                ..Environment::default()
            })
            .unwrap();
        for (key, status, started) in runs {
            let run = StoredRun {
                started_unix: *started,
                metrics: [("m".to_string(), 1.0)].into(),
                ..StoredRun::example(key, "h1", 1, *status)
            };
            store.record(&run, &[]).unwrap();
        }
    }

    #[test]
    fn a_run_in_two_shards_keeps_its_ok_copy_else_the_later() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b, out) = (
            dir.path().join("a"),
            dir.path().join("b"),
            dir.path().join("out"),
        );
        shard(
            &a,
            "t",
            "c1",
            &[
                ("x", Status::Failed, 1.0),
                ("y", Status::Ok, 1.0),
                ("z", Status::Ok, 5.0),
            ],
        );
        shard(
            &b,
            "t",
            "c1",
            &[
                ("x", Status::Ok, 2.0),
                ("y", Status::Failed, 2.0),
                ("w", Status::Ok, 2.0),
            ],
        );
        let before = std::fs::read(a.join("results.sqlite")).unwrap();
        let r = merge(&[a.clone(), b.clone()], &out, false).unwrap();
        assert_eq!((r.runs, r.sessions), (4, 2));
        assert_eq!(r.duplicates.len(), 2, "{:?}", r.duplicates);
        let merged = Store::open(&out.join("results.sqlite")).unwrap();
        let status: std::collections::BTreeMap<String, Status> = merged
            .runs()
            .unwrap()
            .into_iter()
            .map(|r| (r.key.clone(), r.status()))
            .collect();
        assert_eq!(status["x"], Status::Ok);
        assert_eq!(status["y"], Status::Ok);
        // The copy from the second shard points at its own session, renumbered.
        let x = merged
            .runs()
            .unwrap()
            .into_iter()
            .find(|r| r.key == "x")
            .unwrap();
        assert_eq!(x.session_id, 2);
        assert_eq!(x.metrics["m"], 1.0);
        assert_eq!(std::fs::read(a.join("results.sqlite")).unwrap(), before);
        // Another scenario text, or another build, is refused.
        let c = dir.path().join("c");
        shard(&c, "other", "c1", &[("v", Status::Ok, 1.0)]);
        let e = merge(&[a.clone(), c], &dir.path().join("o2"), false).unwrap_err();
        assert!(e.to_string().contains("another text"), "{e}");
        let d = dir.path().join("d");
        shard(&d, "t", "c2", &[("v", Status::Ok, 1.0)]);
        let e = merge(&[a.clone(), d.clone()], &dir.path().join("o3"), false).unwrap_err();
        assert!(e.to_string().contains("--allow-mixed-versions"), "{e}");
        let r = merge(&[a, d], &dir.path().join("o4"), true).unwrap();
        assert_eq!(r.mixed_versions.len(), 2);
    }

    #[test]
    fn repetitions_come_from_the_command_line() {
        assert_eq!(
            repetitions_of("quiclab run s.toml --repetitions 3 --shard 1/2"),
            Some(3)
        );
        assert_eq!(
            repetitions_of("quiclab run s.toml --repetitions=4"),
            Some(4)
        );
        assert_eq!(repetitions_of("quiclab run s.toml --shard 1/2"), None);
    }

    #[test]
    fn the_same_shard_twice_or_shards_of_two_plans_are_refused_and_nothing_is_left() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b, c, out) = (
            dir.path().join("a"),
            dir.path().join("b"),
            dir.path().join("c"),
            dir.path().join("out"),
        );
        shard(&a, "t", "c1", &[("x", Status::Ok, 1.0)]);
        shard(&b, "t", "c1", &[("y", Status::Ok, 1.0)]);
        shard(&c, "t", "c1", &[("z", Status::Ok, 1.0)]);
        let plan = |d: &Path, reps: u32, shard: &str| {
            Store::open_to_write(&d.join("results.sqlite"))
                .unwrap()
                .check_and_set_plan(false, reps, Some(shard.into()))
                .unwrap()
        };
        plan(&a, 2, "1/2");
        plan(&b, 4, "2/2");
        plan(&c, 2, "1/2");
        // The same shard by another spelling, by a link, and by a copy of its file.
        let slash = PathBuf::from(format!("{}/", a.display()));
        std::os::unix::fs::symlink(&a, dir.path().join("link")).unwrap();
        let copy = dir.path().join("copy");
        std::fs::create_dir(&copy).unwrap();
        std::fs::copy(a.join("results.sqlite"), copy.join("results.sqlite")).unwrap();
        for twice in [slash, dir.path().join("link"), copy] {
            let e = merge(&[a.clone(), twice], &out, false)
                .unwrap_err()
                .to_string();
            assert!(e.contains("same shard"), "{e}");
        }
        let e = merge(&[a.clone(), b.clone()], &out, false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("repetitions"), "{e}");
        let e = merge(&[a.clone(), c.clone()], &out, false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("both shard 1/2"), "{e}");
        assert!(!out.join("results.sqlite").exists());
    }
}
