//! Merging the results databases of one scenario's shards (`quiclab merge`): every run once, with
//! its attempts, metrics and series, every session kept (renumbered). The inputs are opened
//! read-only and never changed. Shards of different scenarios (name or text) are refused, and so
//! are shards made by different quiclab builds unless the caller allows it.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use rusqlite::{Connection, OpenFlags, params};

use crate::store::{SCHEMA_VERSION, ScenarioRecord, Store};

/// What a merge did.
#[derive(Debug, Clone, Default, PartialEq)]
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
    path: PathBuf,
    scenario: ScenarioRecord,
    builds: BTreeSet<String>,
}

fn read_input(dir: &Path) -> Result<Input> {
    let path = dir.join("results.sqlite");
    if !path.is_file() {
        bail!(
            "{}: not a results directory (no results.sqlite; shards are made by `quiclab run FILE --shard K/N`)",
            dir.display()
        );
    }
    let conn = Connection::open_with_flags(&path, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .with_context(|| format!("opening {} read-only", path.display()))?;
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .with_context(|| format!("{}: not an SQLite database", path.display()))?;
    if version != SCHEMA_VERSION {
        bail!(
            "{}: results schema version {version}, merge reads version {SCHEMA_VERSION}: open it once \
             with this quiclab (`quiclab report {}`) to upgrade it, then merge",
            path.display(),
            dir.display()
        );
    }
    let scenario = crate::store::read_scenario(&conn, &path)?;
    let mut stmt =
        conn.prepare("SELECT DISTINCT quiclab_version || ' ' || git_commit FROM sessions")?;
    let builds = stmt
        .query_map([], |r| r.get::<_, String>(0))?
        .collect::<rusqlite::Result<BTreeSet<String>>>()?;
    Ok(Input {
        path,
        scenario,
        builds,
    })
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
    let first = &inputs[0];
    for other in &inputs[1..] {
        if other.scenario.name != first.scenario.name || other.scenario.text != first.scenario.text
        {
            bail!(
                "{} holds scenario {:?} and {} holds {:?}{}: merge shards of one scenario (the same \
                 file text and seed) only",
                first.path.display(),
                first.scenario.name,
                other.path.display(),
                other.scenario.name,
                if other.scenario.name == first.scenario.name {
                    " with another text"
                } else {
                    ""
                }
            );
        }
    }
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
        let uri = format!("file:{}?mode=ro", input.path.display());
        conn.execute("ATTACH DATABASE ?1 AS src", params![uri])
            .with_context(|| format!("attaching {}", input.path.display()))?;
        let copied = copy_shard(conn, &input.path, &mut report);
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

/// Copies what of `from` is not yet in `to`, recursively (nothing is overwritten).
fn copy_missing(from: &Path, to: &Path) -> Result<()> {
    if !from.is_dir() {
        return Ok(());
    }
    std::fs::create_dir_all(to).with_context(|| format!("creating {}", to.display()))?;
    for entry in std::fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_missing(&entry.path(), &target)?;
        } else if !target.exists() {
            std::fs::copy(entry.path(), &target)
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
            .map(|r| (r.key, r.status))
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
}
