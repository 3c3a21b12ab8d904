//! SQLite schema and access.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use quiclab_model::WorkloadOutput;
use quiclab_model::document::{RunDocument, Status};

/// Bumped on any incompatible change of [`SCHEMA`]; stored in `PRAGMA user_version`.
pub const SCHEMA_VERSION: i64 = 5;

/// `PRAGMA application_id` of every results database quiclab creates ("QLAB"): with the
/// directory's quiclab marker, what says a database is quiclab's before it is ever upgraded.
pub const APPLICATION_ID: i32 = 0x514C_4142;

/// The whole schema. Kept as one string so that `docs/results.md` can quote it and a test can
/// check that the documentation and the code agree.
pub const SCHEMA: &str = "\
-- One row: the scenario this database belongs to (the file's text, verbatim).
CREATE TABLE scenario (
    id            INTEGER PRIMARY KEY CHECK (id = 1),
    name          TEXT NOT NULL,
    description   TEXT NOT NULL,
    file          TEXT NOT NULL,
    text          TEXT NOT NULL,
    planned_runs  INTEGER NOT NULL,
    created_unix  REAL NOT NULL
);
-- One row per invocation of `quiclab run` (the first and each --resume): where the runs were made.
CREATE TABLE sessions (
    id               INTEGER PRIMARY KEY,
    started_unix     REAL NOT NULL,
    quiclab_version  TEXT NOT NULL,
    git_commit       TEXT NOT NULL,
    kernel           TEXT NOT NULL,
    cpu_model        TEXT NOT NULL,
    cpus             INTEGER NOT NULL,
    hostname         TEXT NOT NULL,
    crates           TEXT NOT NULL,   -- JSON object: crate name -> version (the protocol stacks)
    command          TEXT NOT NULL
);
-- One row per finished run, committed when the run ends.
CREATE TABLE runs (
    key           TEXT PRIMARY KEY,   -- stable identity, e.g. proto=h2;rate=10mbit;loss=2%;rep=3
    run_index     INTEGER NOT NULL,   -- position in the plan's execution order (0-based)
    setting       INTEGER NOT NULL,   -- grid point without the contender (0-based)
    setting_label TEXT NOT NULL,      -- e.g. rate=10mbit, loss=2%
    contender     TEXT NOT NULL,      -- what the run is compared as: h1 | h2 | h3, or a mix (h3+h1)
    repetition    INTEGER NOT NULL,   -- 1-based
    seed          TEXT NOT NULL,      -- the run's 64-bit seed in decimal (the link's loss processes)
    params        TEXT NOT NULL,      -- JSON object of every parameter of the run
    status        TEXT NOT NULL CHECK (status IN ('ok', 'failed', 'timeout')),
    reason        TEXT,               -- why a run failed or timed out
    flagged       INTEGER NOT NULL,   -- 1 when the emulator's fidelity was out of tolerance
    flags         TEXT NOT NULL,      -- JSON array of the fidelity problems
    started_unix  REAL NOT NULL,
    duration_s    REAL NOT NULL,      -- wall time of the whole run, lab set-up to teardown
    setup_ms      REAL,               -- lab set-up (namespaces, TUNs, emulator)
    teardown_ms   REAL,
    host_steal    REAL,               -- fraction of CPU time the hypervisor stole during the run
                                      -- (NULL: it could not be read; the run is then flagged)
    session_id    INTEGER NOT NULL REFERENCES sessions(id),
    result        TEXT NOT NULL,      -- JSON document of the run, by outcome (docs/results.md):
                                      -- {\"outcome\": \"finished\", \"result\": {\"kind\": …}},
                                      -- {\"outcome\": \"timed_out\", \"limit_s\": …, \"reason\": …, \"partial\": …},
                                      -- {\"outcome\": \"failed\", \"reason\": …, \"partial\": …}
    attempt       INTEGER NOT NULL DEFAULT 1  -- which attempt this is; the earlier ones are in attempts
);
-- Attempts a run's row replaced: flagged attempts run again (retry_flagged), failed or timed-out
-- runs run again (--retry-failed). Nothing a run measured is dropped.
CREATE TABLE attempts (
    run_key       TEXT NOT NULL,      -- the run (runs.key) this was an attempt of
    attempt       INTEGER NOT NULL,   -- 1-based
    status        TEXT NOT NULL CHECK (status IN ('ok', 'failed', 'timeout')),
    reason        TEXT,
    flags         TEXT NOT NULL,      -- JSON array of the fidelity problems
    started_unix  REAL NOT NULL,
    duration_s    REAL NOT NULL,
    host_steal    REAL,
    session_id    INTEGER NOT NULL REFERENCES sessions(id),
    metrics       TEXT NOT NULL,      -- JSON object: every metric of the attempt
    result        TEXT NOT NULL,      -- JSON document of the attempt, as runs.result
    PRIMARY KEY (run_key, attempt)
);
-- Every numeric metric of a run, one row each (the long form of runs.result).
CREATE TABLE metrics (
    run_key  TEXT NOT NULL REFERENCES runs(key),
    name     TEXT NOT NULL,
    value    REAL NOT NULL,
    PRIMARY KEY (run_key, name)
);
-- Time series of traced runs: congestion window, queue delay (seconds since the emulator started).
CREATE TABLE series (
    run_key  TEXT NOT NULL REFERENCES runs(key),
    name     TEXT NOT NULL,
    unit     TEXT NOT NULL,
    t_s      REAL NOT NULL,
    value    REAL NOT NULL
);
CREATE INDEX series_by_run ON series (run_key, name);
-- One row: the plan this database was made for and the database's own identity (`quiclab merge`
-- refuses shards of different plans, and the same shard twice however it is named).
CREATE TABLE plan (
    id            INTEGER PRIMARY KEY CHECK (id = 1),
    database_id   TEXT NOT NULL,      -- random at creation; a copy of the file keeps it
    quick         INTEGER,            -- 1: the scenario's quick form (NULL: not recorded, as in
                                      -- a database upgraded from schema 4)
    repetitions   INTEGER,            -- the repetitions the plan was expanded with
    shard         TEXT                -- K/N of `quiclab run --shard`; NULL: the whole plan
);
";

/// The `CREATE TABLE attempts` statement of [`SCHEMA`].
fn attempts_table() -> &'static str {
    let start = SCHEMA.find("CREATE TABLE attempts").unwrap_or(0);
    let len = SCHEMA[start..].find(");").map_or(0, |e| e + 2);
    &SCHEMA[start..start + len]
}

/// The attempts table as schema 3 created it (for upgrading a schema-2 database: its documents
/// are then upgraded to schema 4 with the runs').
fn attempts_table_v3() -> String {
    attempts_table().replace(
        "result        TEXT NOT NULL,      -- JSON document of the attempt, as runs.result",
        "result        TEXT,",
    )
}

/// The workload kind of a stored scenario (`[workload] kind`, default bulk), for upgrading its
/// documents: the file as today's parser reads it, else its TOML's `kind` alone (an old file
/// today's parser refuses still names its kind).
fn stored_kind(conn: &Connection) -> Result<String> {
    let (text, file): (String, String) = conn
        .query_row("SELECT text, file FROM scenario WHERE id = 1", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .optional()?
        .unwrap_or_default();
    if let Ok(s) = quiclab_experiment::parse(&text, &file) {
        return Ok(s.kind.name().to_string());
    }
    let value: toml::Table = toml::from_str(&text).unwrap_or_default();
    Ok(value
        .get("workload")
        .and_then(|w| w.get("kind"))
        .and_then(|k| k.as_str())
        .unwrap_or("bulk")
        .to_string())
}

/// Schema 3 → 4 (inside [`upgrade`]'s transaction): every run's and attempt's document enveloped by outcome
/// (`migrate::upgrade_v3`); video's metric `switches` renamed `bitrate_switches`. Nothing
/// is dropped: a document that is not an object is kept as the result as it was.
fn upgrade_3_to_4(conn: &Connection) -> Result<()> {
    let kind = stored_kind(conn)?;
    {
        for table in ["runs", "attempts"] {
            let key_col = if table == "runs" {
                "key"
            } else {
                "run_key || '#' || attempt"
            };
            let rows: Vec<(String, String, Option<String>, Option<String>)> = {
                let mut stmt = conn.prepare(&format!(
                    "SELECT {key_col}, status, reason, result FROM {table}"
                ))?;
                stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
                    .collect::<rusqlite::Result<_>>()?
            };
            for (key, status, reason, result) in rows {
                let old = result
                    .map(|r| serde_json::from_str::<serde_json::Value>(&r))
                    .transpose()
                    .with_context(|| format!("{table} {key}: its result is not JSON"))?;
                let doc = crate::migrate::upgrade_v3(
                    old,
                    parse_status(&status)?,
                    reason.as_deref(),
                    &kind,
                );
                conn.execute(
                    &format!("UPDATE {table} SET result = ?1 WHERE {key_col} = ?2"),
                    params![serde_json::to_string(&doc)?, key],
                )?;
            }
        }
        if kind == "video" {
            conn.execute(
                "UPDATE metrics SET name = 'bitrate_switches' WHERE name = 'switches'",
                [],
            )?;
            let rows: Vec<(String, i64, String)> = {
                let mut stmt = conn.prepare("SELECT run_key, attempt, metrics FROM attempts")?;
                stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
                    .collect::<rusqlite::Result<_>>()?
            };
            for (key, attempt, metrics) in rows {
                let mut m: BTreeMap<String, f64> = serde_json::from_str(&metrics)
                    .with_context(|| format!("attempt {attempt} of {key}: bad metrics"))?;
                if let Some(v) = m.remove("switches") {
                    m.insert("bitrate_switches".into(), v);
                }
                conn.execute(
                    "UPDATE attempts SET metrics = ?1 WHERE run_key = ?2 AND attempt = ?3",
                    params![serde_json::to_string(&m)?, key, attempt],
                )?;
            }
        }
        // The NOT NULL of the new result columns is documentation here: SQLite cannot add it to
        // an existing column, and every row now has a document.
    }
    Ok(())
}

/// What `quiclab run` was asked to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScenarioRecord {
    pub name: String,
    pub description: String,
    pub file: String,
    pub text: String,
    pub planned_runs: usize,
}

/// The machine and software a session ran on.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Environment {
    pub quiclab_version: String,
    pub git_commit: String,
    pub kernel: String,
    pub cpu_model: String,
    pub cpus: usize,
    pub hostname: String,
    pub crates: BTreeMap<String, String>,
    pub command: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Session {
    pub id: i64,
    pub started_unix: f64,
    pub environment: Environment,
}

fn parse_status(s: &str) -> Result<Status> {
    Status::parse(s).ok_or_else(|| anyhow::anyhow!("unknown run status {s:?} in the database"))
}

/// The status column is the document's outcome stored again for queries: a row where they differ
/// was not written by quiclab, and is refused rather than read either way.
fn check_status<R>(db: &Path, what: &str, column: &str, doc: &RunDocument<R>) -> Result<()> {
    let status = Status::parse(column)
        .ok_or_else(|| anyhow::anyhow!("{}: {what}: unknown status {column:?}", db.display()))?;
    if status != doc.status() {
        bail!(
            "{}: {what}: status {column} but a document of outcome {}",
            db.display(),
            doc.status().as_str()
        );
    }
    Ok(())
}

/// One finished run. `R` is the type its document's result is read as: the workloads' typed
/// results (only the migration of older schemas reads untyped JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredRun<R = WorkloadOutput> {
    pub key: String,
    pub index: usize,
    pub setting: usize,
    pub setting_label: String,
    /// What the run is compared as: its protocol, or a mix of protocols (`h3+h1`).
    pub contender: String,
    pub repetition: u32,
    pub seed: u64,
    pub params: BTreeMap<String, String>,
    pub flags: Vec<String>,
    pub started_unix: f64,
    pub duration_s: f64,
    pub setup_ms: Option<f64>,
    pub teardown_ms: Option<f64>,
    pub host_steal: Option<f64>,
    /// Filled in by [`Store::record`] (the current session) and by [`Store::runs`].
    pub session_id: i64,
    /// What the run produced, by outcome: the only stored outcome (status and reason are
    /// derived from it).
    pub document: RunDocument<R>,
    pub metrics: BTreeMap<String, f64>,
    /// 1-based: which attempt of the run this is (earlier ones are [`Attempt`]s).
    pub attempt: u32,
}

impl<R> StoredRun<R> {
    /// How the run ended (from its document).
    pub fn status(&self) -> Status {
        self.document.status()
    }

    /// Why it did not finish (from its document).
    pub fn reason(&self) -> Option<String> {
        self.document.reason()
    }
}

impl StoredRun {
    /// A run of `contender` with `status` (and the document that goes with it: an empty result,
    /// a 60 s limit, or a reason) and nothing measured — where tests and examples start; every
    /// other field is empty or zero.
    pub fn example(key: &str, contender: &str, repetition: u32, status: Status) -> StoredRun {
        StoredRun {
            key: key.into(),
            index: 0,
            setting: 0,
            setting_label: String::new(),
            contender: contender.into(),
            repetition,
            seed: 1,
            params: BTreeMap::new(),
            flags: vec![],
            started_unix: 0.0,
            duration_s: 1.0,
            setup_ms: None,
            teardown_ms: None,
            host_steal: None,
            session_id: 0,
            document: match status {
                Status::Ok => RunDocument::Finished {
                    result: WorkloadOutput::example(),
                },
                Status::Timeout => RunDocument::TimedOut {
                    limit_s: 60.0,
                    reason: String::new(),
                    partial: None,
                },
                Status::Failed => RunDocument::Failed {
                    reason: "example".into(),
                    partial: None,
                },
            },
            metrics: BTreeMap::new(),
            attempt: 1,
        }
    }
}

/// An attempt of a run that a later attempt replaced in `runs`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attempt<R = WorkloadOutput> {
    pub run_key: String,
    pub attempt: u32,
    pub flags: Vec<String>,
    pub started_unix: f64,
    pub duration_s: f64,
    pub host_steal: Option<f64>,
    pub session_id: i64,
    pub metrics: BTreeMap<String, f64>,
    /// The only stored outcome of the attempt (status and reason derived from it).
    pub document: RunDocument<R>,
}

impl<R> Attempt<R> {
    pub fn status(&self) -> Status {
        self.document.status()
    }

    pub fn reason(&self) -> Option<String> {
        self.document.reason()
    }
}

/// One time series of a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Series {
    pub run_key: String,
    pub name: String,
    pub unit: String,
    pub points: Vec<(f64, f64)>,
}

pub struct Store {
    conn: Connection,
    path: PathBuf,
    session: Option<i64>,
    /// The temporary directory of an upgraded copy read in place of an older database.
    _copy: Option<tempfile::TempDir>,
}

fn now_unix() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

impl<R: Clone> Attempt<R> {
    fn of(run: &StoredRun<R>) -> Attempt<R> {
        Attempt {
            run_key: run.key.clone(),
            attempt: run.attempt,
            flags: run.flags.clone(),
            started_unix: run.started_unix,
            duration_s: run.duration_s,
            host_steal: run.host_steal,
            session_id: run.session_id,
            metrics: run
                .metrics
                .iter()
                .filter(|(_, v)| v.is_finite())
                .map(|(k, v)| (k.clone(), *v))
                .collect(),
            document: run.document.clone(),
        }
    }
}

fn insert_attempt<R: Serialize>(conn: &Connection, a: &Attempt<R>, session: i64) -> Result<()> {
    conn.execute(
        "INSERT INTO attempts (run_key, attempt, status, reason, flags, started_unix, duration_s,
                               host_steal, session_id, metrics, result)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
        params![
            a.run_key,
            a.attempt,
            a.status().as_str(),
            a.reason(),
            serde_json::to_string(&a.flags)?,
            a.started_unix,
            a.duration_s,
            a.host_steal,
            session,
            serde_json::to_string(&a.metrics)?,
            serde_json::to_string(&a.document)?,
        ],
    )?;
    Ok(())
}

/// The scenario record of the database `conn` (at `path`, for the error).
pub(crate) fn read_scenario(conn: &Connection, path: &Path) -> Result<ScenarioRecord> {
    conn.query_row(
        "SELECT name, description, file, text, planned_runs FROM scenario WHERE id = 1",
        [],
        |r| {
            Ok(ScenarioRecord {
                name: r.get(0)?,
                description: r.get(1)?,
                file: r.get(2)?,
                text: r.get(3)?,
                planned_runs: r.get::<_, i64>(4)? as usize,
            })
        },
    )
    .optional()?
    .with_context(|| format!("{}: holds no scenario", path.display()))
}

/// The plan a database was made for (its `plan` row), as `quiclab run` records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlanRecord {
    /// Random at creation: the same database however it is named or copied.
    pub database_id: String,
    pub quick: Option<bool>,
    pub repetitions: Option<u32>,
    /// `K/N` of `--shard`, or None for the whole plan.
    pub shard: Option<String>,
}

/// What a file claimed to be a results database is.
enum Kind {
    /// quiclab's, at `version` (1 ..= SCHEMA_VERSION).
    Quiclab { version: i64, marked: bool },
}

fn random_id() -> String {
    let mut b = [0u8; 16];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        let _ = std::io::Read::read_exact(&mut f, &mut b);
    }
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "{}-{t:x}-{:x}",
        b.iter().map(|x| format!("{x:02x}")).collect::<String>(),
        std::process::id()
    )
}

/// Reads what `conn` (the file `path`) is, refusing what quiclab did not make: a file that is not
/// SQLite, an empty or foreign database, one of a newer quiclab.
fn identify(conn: &Connection, path: &Path) -> Result<Kind> {
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .with_context(|| format!("{}: not an SQLite database", path.display()))?;
    let app: i32 = conn.pragma_query_value(None, "application_id", |r| r.get(0))?;
    let tables: BTreeSet<String> = {
        let mut stmt = conn
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
            .with_context(|| format!("{}: not an SQLite database", path.display()))?;
        stmt.query_map([], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?
    };
    if tables.is_empty() && version == 0 {
        bail!(
            "{}: an empty database, not quiclab's results (made by `quiclab run FILE --out DIR`)",
            path.display()
        );
    }
    let quiclab_tables = ["scenario", "sessions", "runs", "metrics", "series"]
        .iter()
        .all(|t| tables.contains(*t));
    if (app != 0 && app != APPLICATION_ID) || version == 0 || !quiclab_tables {
        bail!(
            "{}: not a quiclab results database (PRAGMA user_version {version}, application_id              {app:#x}, tables: {}); quiclab reads only the databases `quiclab run` made, and never              changes another program's",
            path.display(),
            tables.into_iter().collect::<Vec<_>>().join(", ")
        );
    }
    if version > SCHEMA_VERSION {
        bail!(
            "{}: results schema version {version}, written by a newer quiclab; this quiclab reads              versions 1 to {SCHEMA_VERSION} (update quiclab to read it)",
            path.display()
        );
    }
    let marked = app == APPLICATION_ID
        || path.parent().is_some_and(|d| {
            quiclab_outputs::is_claimed(if d.as_os_str().is_empty() {
                Path::new(".")
            } else {
                d
            })
        });
    Ok(Kind::Quiclab { version, marked })
}

/// Upgrades `conn` from `version` to [`SCHEMA_VERSION`] in one transaction: every step or none.
fn upgrade(conn: &Connection, version: i64) -> Result<()> {
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let work = || -> Result<()> {
        if version == 1 {
            // Version 1 called the contender `protocol` (every run was one protocol).
            conn.execute_batch("ALTER TABLE runs RENAME COLUMN protocol TO contender;")
                .context("schema 1 → 2")?;
        }
        if version <= 2 {
            // Version 3 keeps every attempt of a run (retry_flagged, --retry-failed).
            conn.execute_batch(&format!(
                "ALTER TABLE runs ADD COLUMN attempt INTEGER NOT NULL DEFAULT 1; {}",
                attempts_table_v3()
            ))
            .context("schema 2 → 3")?;
        }
        if version <= 3 {
            // Version 4 stores each run's document by outcome and with its kind (RunDocument).
            upgrade_3_to_4(conn).context("schema 3 → 4")?;
        }
        if version <= 4 {
            // Version 5 records the plan and the database's identity (merge's checks); what an
            // older database never recorded stays NULL.
            conn.execute_batch(&format!("{};", plan_table()))
                .context("schema 4 → 5")?;
            conn.execute(
                "INSERT INTO plan (id, database_id) VALUES (1, ?1)",
                params![random_id()],
            )?;
        }
        conn.execute_batch(&format!(
            "PRAGMA user_version = {SCHEMA_VERSION}; PRAGMA application_id = {APPLICATION_ID};"
        ))?;
        Ok(())
    };
    match work() {
        Ok(()) => {
            conn.execute_batch("COMMIT")?;
            Ok(())
        }
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            Err(e)
        }
    }
}

/// The `CREATE TABLE plan` statement of [`SCHEMA`].
fn plan_table() -> &'static str {
    let start = SCHEMA.find("CREATE TABLE plan").unwrap_or(0);
    let len = SCHEMA[start..].find(");").map_or(0, |e| e + 1);
    &SCHEMA[start..start + len]
}

/// The rollback journal SQLite keeps beside `path` while a write is under way.
fn journal_of(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push("-journal");
    PathBuf::from(p)
}

/// Whether a write to `path` was interrupted: its rollback journal is there and not empty (a
/// writer killed mid-transaction, or a disk that filled).
pub fn interrupted_write(path: &Path) -> bool {
    std::fs::symlink_metadata(journal_of(path)).is_ok_and(|m| m.is_file() && m.len() > 0)
}

fn interrupted_message(path: &Path, e: &anyhow::Error) -> String {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    format!(
        "{}: an interrupted write (a quiclab process was killed, or the disk filled, while it \
         stored a run) left {} behind, which a read-only command cannot roll back ({e}). Recover \
         it with `quiclab report {}` or `quiclab run FILE --out {} --resume`: they roll the \
         unfinished write back and keep every run stored before it",
        path.display(),
        journal_of(path).display(),
        dir.display(),
        dir.display()
    )
}

/// Rolls back the interrupted write of the results database in `dir` ([`interrupted_write`]),
/// when quiclab made the directory: the write that was under way is undone, every run stored
/// before it stays. The caller holds the directory's lock (no live writer). Returns whether
/// there was anything to roll back.
pub fn recover_interrupted(dir: &Path) -> Result<bool> {
    let path = dir.join("results.sqlite");
    if !interrupted_write(&path) || !quiclab_outputs::is_claimed(dir) {
        return Ok(false);
    }
    // Opening to write lets SQLite roll the hot journal back (it does so on the first read).
    let store = Store::open_to_write(&path)?;
    store.run_count()?;
    drop(store);
    Ok(true)
}

/// For a command that writes into the results directory `dir` (report.html, runs.csv): holds
/// its lock — no other quiclab process writes there meanwhile — and so may roll back a write a
/// killed process left unfinished ([`recover_interrupted`]; every stored run stays). Returns the
/// lock and whether anything was rolled back. A directory that is not quiclab's is neither
/// locked nor touched.
pub fn lock_and_recover(dir: &Path) -> Result<(Option<quiclab_outputs::DirLock>, bool)> {
    if !quiclab_outputs::is_claimed(dir) {
        return Ok((None, false));
    }
    let lock = quiclab_outputs::lock_dir(dir, "the results directory", false)?;
    let recovered = recover_interrupted(dir)?;
    Ok((Some(lock), recovered))
}

fn must_exist(path: &Path) -> Result<()> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => Ok(()),
        Ok(_) => bail!(
            "{}: not a file (expected a results database)",
            path.display()
        ),
        Err(_) => bail!(
            "{}: no such results database (made by `quiclab run FILE --out DIR`)",
            path.display()
        ),
    }
}

impl Store {
    /// Opens an existing results database to read it (`report`, `export`, `reproduce --judge`,
    /// merge's inputs): read-only, so the file is never changed. A database of an older schema
    /// is read through an upgraded copy in a temporary directory (the file stays as it is;
    /// [`Store::open_to_write`] upgrades it in place). A foreign, empty or newer database is
    /// refused, saying what it is.
    pub fn open(path: &Path) -> Result<Store> {
        must_exist(path)?;
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .with_context(|| format!("opening {} read-only", path.display()))?;
        let Kind::Quiclab { version, .. } = match identify(&conn, path) {
            Ok(k) => k,
            // A read-only connection cannot roll back what a killed writer left half-done.
            Err(e) if interrupted_write(path) => bail!("{}", interrupted_message(path, &e)),
            Err(e) => return Err(e),
        };
        if version == SCHEMA_VERSION {
            conn.busy_timeout(std::time::Duration::from_secs(5))?;
            return Ok(Store {
                conn,
                path: path.to_owned(),
                session: None,
                _copy: None,
            });
        }
        drop(conn);
        let tmp = tempfile::tempdir().context("a temporary directory for an upgraded copy")?;
        let copy = tmp.path().join("results.sqlite");
        std::fs::copy(path, &copy).with_context(|| format!("copying {}", path.display()))?;
        let conn = Connection::open(&copy)?;
        upgrade(&conn, version).with_context(|| {
            format!(
                "{}: reading schema {version} through an upgraded copy",
                path.display()
            )
        })?;
        Ok(Store {
            conn,
            path: path.to_owned(),
            session: None,
            _copy: Some(tmp),
        })
    }

    /// Opens an existing results database to add to it (`quiclab run --resume`). A database of
    /// an older schema is upgraded in place — only when quiclab made it (its application id, or
    /// the quiclab marker of its directory), after a backup copy beside it
    /// (`results.sqlite.schema-N.bak`), in one transaction.
    pub fn open_to_write(path: &Path) -> Result<Store> {
        must_exist(path)?;
        if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
            bail!(
                "{}: is a symbolic link; quiclab never writes through one",
                path.display()
            );
        }
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_URI
                | OpenFlags::SQLITE_OPEN_NOFOLLOW,
        )
        .with_context(|| format!("opening {}", path.display()))?;
        let Kind::Quiclab { version, marked } = identify(&conn, path)?;
        if version < SCHEMA_VERSION {
            if !marked {
                bail!(
                    "{}: results schema {version} in a directory without quiclab's marker:                      quiclab upgrades only the databases it says it made; read it with `quiclab                      report` (an upgraded copy), or run into a new --out",
                    path.display()
                );
            }
            let backup = path.with_file_name(format!(
                "{}.schema-{version}.bak",
                path.file_name()
                    .map_or("results.sqlite".into(), |n| n.to_string_lossy())
            ));
            let mut dst = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&backup)
                .with_context(|| {
                    format!(
                        "{}: the backup copy before upgrading schema {version} (move the earlier                          backup away)",
                        backup.display()
                    )
                })?;
            std::io::copy(&mut std::fs::File::open(path)?, &mut dst)
                .with_context(|| format!("writing {}", backup.display()))?;
            dst.sync_all()?;
            let _ = quiclab_outputs::list_in_manifest(&backup);
            upgrade(&conn, version).with_context(|| {
                format!(
                    "{}: upgrading the results schema {version} → {SCHEMA_VERSION} (unchanged;                      the copy is {})",
                    path.display(),
                    backup.display()
                )
            })?;
        }
        Self::tune(&conn)?;
        Ok(Store {
            conn,
            path: path.to_owned(),
            session: None,
            _copy: None,
        })
    }

    /// Creates `path` for `scenario`, or, with `resume`, reopens it after checking that it holds
    /// the same scenario. Without `resume`, an existing database with runs is an error: runs are
    /// never overwritten.
    pub fn create_or_resume(path: &Path, scenario: &ScenarioRecord, resume: bool) -> Result<Store> {
        // An empty file quiclab listed before creating its database (the disk filled, or the
        // process was killed, before the schema was written) is its own: made again.
        if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_file() && m.len() == 0)
            && !interrupted_write(path)
            && path.parent().is_some_and(|d| {
                let d = if d.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    d
                };
                path.file_name().is_some_and(|n| {
                    quiclab_outputs::manifest(d).contains(n.to_string_lossy().as_ref())
                })
            })
        {
            std::fs::remove_file(path)
                .with_context(|| format!("removing the empty {}", path.display()))?;
        }
        if path.exists() || std::fs::symlink_metadata(path).is_ok() {
            let store = Store::open_to_write(path)?;
            let stored = store.scenario()?;
            let done = store.run_count()?;
            if !resume {
                if done > 0 {
                    bail!(
                        "{} already holds {done} run(s) of scenario {:?}: add --resume to continue it, \
                         or give another --out",
                        path.display(),
                        stored.name
                    );
                }
            } else if stored.text != scenario.text {
                bail!(
                    "{} holds runs of a different scenario text ({} from {}); --resume continues only \
                     the same scenario: give another --out for the changed file",
                    path.display(),
                    stored.name,
                    stored.file
                );
            }
            return Ok(store);
        }
        if let Some(dir) = path.parent()
            && !dir.as_os_str().is_empty()
        {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        // Listed before it exists: a file SQLite leaves empty (a full disk) is then known to be
        // quiclab's, and made again by the next command instead of blocking it.
        quiclab_outputs::list_in_manifest(path)
            .with_context(|| format!("listing {} in its directory's manifest", path.display()))?;
        let created = (|| -> Result<Connection> {
            let conn = Connection::open_with_flags(
                path,
                OpenFlags::SQLITE_OPEN_READ_WRITE
                    | OpenFlags::SQLITE_OPEN_CREATE
                    | OpenFlags::SQLITE_OPEN_URI
                    | OpenFlags::SQLITE_OPEN_NOFOLLOW,
            )
            .with_context(|| format!("creating {}", path.display()))?;
            Self::tune(&conn)?;
            // The schema, the scenario and the plan in one transaction: a database either holds
            // all three or nothing.
            conn.execute_batch(&format!(
                "BEGIN; {SCHEMA} PRAGMA user_version = {SCHEMA_VERSION}; \
                 PRAGMA application_id = {APPLICATION_ID};"
            ))
            .with_context(|| format!("creating the schema in {}", path.display()))?;
            conn.execute(
                "INSERT INTO scenario (id, name, description, file, text, planned_runs, created_unix)
                 VALUES (1, ?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    scenario.name,
                    scenario.description,
                    scenario.file,
                    scenario.text,
                    scenario.planned_runs as i64,
                    now_unix()
                ],
            )?;
            conn.execute(
                "INSERT INTO plan (id, database_id) VALUES (1, ?1)",
                params![random_id()],
            )?;
            conn.execute_batch("COMMIT")
                .with_context(|| format!("creating {}", path.display()))?;
            Ok(conn)
        })();
        let conn = match created {
            Ok(c) => c,
            Err(e) => {
                // This command made the file (it did not exist above): it goes with its journal.
                let _ = std::fs::remove_file(path);
                let _ = std::fs::remove_file(journal_of(path));
                return Err(e);
            }
        };
        Ok(Store {
            conn,
            path: path.to_owned(),
            session: None,
            _copy: None,
        })
    }

    /// The file this store reads: the database itself, or the upgraded copy of an older one.
    pub fn read_path(&self) -> PathBuf {
        match &self._copy {
            Some(t) => t.path().join("results.sqlite"),
            None => self.path.clone(),
        }
    }

    /// The plan row: what the database was made for, and its identity.
    pub fn plan(&self) -> Result<PlanRecord> {
        Ok(self.conn.query_row(
            "SELECT database_id, quick, repetitions, shard FROM plan WHERE id = 1",
            [],
            |r| {
                Ok(PlanRecord {
                    database_id: r.get(0)?,
                    quick: r.get::<_, Option<i64>>(1)?.map(|q| q != 0),
                    repetitions: r.get::<_, Option<i64>>(2)?.map(|n| n as u32),
                    shard: r.get(3)?,
                })
            },
        )?)
    }

    /// Records the plan (`quiclab run`, at its start): a database already holding runs of
    /// another plan — another shard, quick form or repetitions — is refused, so a resumed run
    /// cannot mix two plans in one database.
    pub fn check_and_set_plan(
        &self,
        quick: bool,
        repetitions: u32,
        shard: Option<String>,
    ) -> Result<()> {
        let stored = self.plan()?;
        let runs = self.run_count()?;
        let differs = |what: &str, was: String, now: String| -> Result<()> {
            bail!(
                "{} holds {runs} run(s) of {what} {was}, and this run is of {what} {now}: one                  database holds one plan (give another --out)",
                self.path.display()
            )
        };
        if runs > 0 {
            if let Some(q) = stored.quick
                && q != quick
            {
                let form = |q: bool| if q { "the quick form" } else { "the full form" }.to_string();
                return differs("plan", form(q), form(quick));
            }
            if let Some(r) = stored.repetitions
                && r != repetitions
            {
                return differs("repetitions", r.to_string(), repetitions.to_string());
            }
            if stored.quick.is_some() && stored.shard != shard {
                let s = |s: &Option<String>| s.clone().unwrap_or_else(|| "the whole plan".into());
                return differs("shard", s(&stored.shard), s(&shard));
            }
        }
        self.conn.execute(
            "UPDATE plan SET quick = ?1, repetitions = ?2, shard = ?3 WHERE id = 1",
            params![quick as i64, repetitions as i64, shard],
        )?;
        Ok(())
    }

    fn tune(conn: &Connection) -> Result<()> {
        // synchronous=FULL: a committed run survives a crash of the machine, not only of quiclab.
        // A small page cache (512 kB instead of 2 MB): the runner only appends, and a cache that
        // grows with the database looks like a leak in a long grid's memory figures.
        conn.execute_batch(
            "PRAGMA foreign_keys = ON; PRAGMA synchronous = FULL; PRAGMA cache_size = -512;",
        )?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        Ok(())
    }

    /// The database connection, for [`crate::merge`].
    pub(crate) fn connection(&self) -> &Connection {
        &self.conn
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn scenario(&self) -> Result<ScenarioRecord> {
        read_scenario(&self.conn, &self.path)
    }

    /// Updates the planned run count (a resumed plan is the same plan; kept for completeness).
    pub fn set_planned_runs(&self, n: usize) -> Result<()> {
        self.conn.execute(
            "UPDATE scenario SET planned_runs = ?1 WHERE id = 1",
            params![n as i64],
        )?;
        Ok(())
    }

    pub fn run_count(&self) -> Result<usize> {
        Ok(self
            .conn
            .query_row("SELECT COUNT(*) FROM runs", [], |r| r.get::<_, i64>(0))?
            as usize)
    }

    /// How many attempts were replaced by a later one (flagged and run again).
    pub fn replaced_attempt_count(&self) -> Result<usize> {
        Ok(self
            .conn
            .query_row("SELECT COUNT(*) FROM attempts", [], |r| r.get::<_, i64>(0))?
            as usize)
    }

    /// Starts a session (one invocation of `quiclab run`); runs recorded afterwards point to it.
    pub fn begin_session(&mut self, env: &Environment) -> Result<i64> {
        self.restore_session(now_unix(), env)
    }

    /// Adds a session as it was recorded elsewhere (evidence rebuilt into a database): its own
    /// start time and environment; runs recorded afterwards point to it.
    pub fn restore_session(&mut self, started_unix: f64, env: &Environment) -> Result<i64> {
        self.conn.execute(
            "INSERT INTO sessions (started_unix, quiclab_version, git_commit, kernel, cpu_model, cpus,
                                   hostname, crates, command)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            params![
                started_unix,
                env.quiclab_version,
                env.git_commit,
                env.kernel,
                env.cpu_model,
                env.cpus as i64,
                env.hostname,
                serde_json::to_string(&env.crates)?,
                env.command
            ],
        )?;
        let id = self.conn.last_insert_rowid();
        self.session = Some(id);
        Ok(id)
    }

    /// Points the runs recorded from now on to `session` (one [`Store::restore_session`] gave).
    pub fn use_session(&mut self, session: i64) {
        self.session = Some(session);
    }

    /// Adds an attempt a later one replaced, as it was recorded elsewhere, to the current
    /// session.
    pub fn restore_attempt(&mut self, attempt: &Attempt) -> Result<()> {
        let session = self
            .session
            .context("internal: restore_attempt() before a session")?;
        insert_attempt(&self.conn, attempt, session).with_context(|| {
            format!(
                "restoring attempt {} of run {}",
                attempt.attempt, attempt.run_key
            )
        })
    }

    /// Keys of the runs already recorded (whatever their status): `--resume` skips them.
    pub fn done_keys(&self) -> Result<HashSet<String>> {
        let mut stmt = self.conn.prepare("SELECT key FROM runs")?;
        let keys = stmt
            .query_map([], |r| r.get::<_, String>(0))?
            .collect::<rusqlite::Result<HashSet<_>>>()?;
        Ok(keys)
    }

    /// Moves the runs that failed or timed out (with their metrics) into `attempts`, so that a
    /// resumed plan runs them again as their next attempt; returns how many. Their time series
    /// are dropped (a failed run's series are partial). Runs that finished `ok` are never touched.
    pub fn forget_failed(&mut self) -> Result<usize> {
        let failed: Vec<StoredRun> = self
            .runs()?
            .into_iter()
            .filter(|r| r.status() != Status::Ok)
            .collect();
        let tx = self.conn.transaction()?;
        for run in &failed {
            insert_attempt(&tx, &Attempt::of(run), run.session_id)?;
        }
        let filter = "SELECT key FROM runs WHERE status != 'ok'";
        tx.execute(
            &format!("DELETE FROM metrics WHERE run_key IN ({filter})"),
            [],
        )?;
        tx.execute(
            &format!("DELETE FROM series WHERE run_key IN ({filter})"),
            [],
        )?;
        let n = tx.execute("DELETE FROM runs WHERE status != 'ok'", [])?;
        tx.commit()?;
        Ok(n)
    }

    /// Stores an attempt that the run's next attempt replaces (a flagged attempt run again).
    pub fn record_attempt<R: Serialize + Clone>(&mut self, run: &StoredRun<R>) -> Result<()> {
        let session = self
            .session
            .context("internal: record_attempt() before begin_session()")?;
        insert_attempt(&self.conn, &Attempt::of(run), session)
            .with_context(|| format!("recording attempt {} of run {}", run.attempt, run.key))
    }

    /// How many attempts of `key` are stored in `attempts` (the next attempt's number is one more).
    pub fn attempts_of(&self, key: &str) -> Result<u32> {
        Ok(self.conn.query_row(
            "SELECT COUNT(*) FROM attempts WHERE run_key = ?1",
            params![key],
            |r| r.get::<_, i64>(0),
        )? as u32)
    }

    /// Every replaced attempt, by run and attempt number.
    pub fn attempts(&self) -> Result<Vec<Attempt>> {
        let status_agrees =
            |key: &str, attempt: i64, column: &str, doc: &RunDocument<WorkloadOutput>| {
                check_status(
                    &self.path,
                    &format!("attempt {attempt} of {key}"),
                    column,
                    doc,
                )
            };
        let mut stmt = self.conn.prepare(
            "SELECT run_key, attempt, status, reason, flags, started_unix, duration_s, host_steal,
                    session_id, metrics, result
             FROM attempts ORDER BY run_key, attempt",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, Option<String>>(3)?,
                r.get::<_, String>(4)?,
                r.get::<_, f64>(5)?,
                r.get::<_, f64>(6)?,
                r.get::<_, Option<f64>>(7)?,
                r.get::<_, i64>(8)?,
                r.get::<_, String>(9)?,
                r.get::<_, String>(10)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (key, attempt, status, reason, flags, started, duration, steal, session, m, result) =
                row?;
            let bad = |what: &str| {
                format!(
                    "{}: attempt {attempt} of {key}: bad {what}",
                    self.path.display()
                )
            };
            let _ = reason;
            let document = serde_json::from_str(&result).with_context(|| bad("result"))?;
            status_agrees(&key, attempt, &status, &document)?;
            out.push(Attempt {
                attempt: attempt as u32,
                flags: serde_json::from_str(&flags).with_context(|| bad("flags"))?,
                started_unix: started,
                duration_s: duration,
                host_steal: steal,
                session_id: session,
                metrics: serde_json::from_str(&m).with_context(|| bad("metrics"))?,
                document,
                run_key: key,
            });
        }
        Ok(out)
    }

    /// Commits one finished run, its metrics and its time series in one transaction.
    pub fn record<R: Serialize>(&mut self, run: &StoredRun<R>, series: &[Series]) -> Result<()> {
        let session = self
            .session
            .context("internal: record() before begin_session()")?;
        let tx = self.conn.transaction()?;
        tx.execute(
            "INSERT INTO runs (key, run_index, setting, setting_label, contender, repetition, seed, params,
                               status, reason, flagged, flags, started_unix, duration_s, setup_ms,
                               teardown_ms, host_steal, session_id, result, attempt)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20)",
            params![
                run.key,
                run.index as i64,
                run.setting as i64,
                run.setting_label,
                run.contender,
                run.repetition,
                run.seed.to_string(),
                serde_json::to_string(&run.params)?,
                run.status().as_str(),
                run.reason(),
                !run.flags.is_empty(),
                serde_json::to_string(&run.flags)?,
                run.started_unix,
                run.duration_s,
                run.setup_ms,
                run.teardown_ms,
                run.host_steal,
                session,
                serde_json::to_string(&run.document)
                    .with_context(|| format!("run {}: its document", run.key))?,
                run.attempt,
            ],
        )
        .with_context(|| format!("recording run {}", run.key))?;
        {
            let mut m =
                tx.prepare("INSERT INTO metrics (run_key, name, value) VALUES (?1, ?2, ?3)")?;
            for (name, value) in &run.metrics {
                // SQLite stores NaN as NULL, which the NOT NULL column refuses: a missing value
                // is simply not stored.
                if value.is_finite() {
                    m.execute(params![run.key, name, value])?;
                }
            }
            let mut s = tx.prepare(
                "INSERT INTO series (run_key, name, unit, t_s, value) VALUES (?1, ?2, ?3, ?4, ?5)",
            )?;
            for series in series {
                for (t, v) in &series.points {
                    if t.is_finite() && v.is_finite() {
                        s.execute(params![series.run_key, series.name, series.unit, t, v])?;
                    }
                }
            }
        }
        tx.commit()
            .with_context(|| format!("committing run {}", run.key))?;
        Ok(())
    }

    /// Every recorded run in execution order, with its metrics and typed documents.
    pub fn runs(&self) -> Result<Vec<StoredRun>> {
        self.runs_as()
    }

    /// Every recorded run in execution order, its document's result read as `R`; a document
    /// that does not read as `R` is an error naming the run.
    pub fn runs_as<R: DeserializeOwned>(&self) -> Result<Vec<StoredRun<R>>> {
        let mut metrics: BTreeMap<String, BTreeMap<String, f64>> = BTreeMap::new();
        {
            let mut stmt = self
                .conn
                .prepare("SELECT run_key, name, value FROM metrics")?;
            let rows = stmt.query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, f64>(2)?,
                ))
            })?;
            for row in rows {
                let (k, n, v) = row?;
                metrics.entry(k).or_default().insert(n, v);
            }
        }
        let mut stmt = self.conn.prepare(
            "SELECT key, run_index, setting, setting_label, contender, repetition, seed, params, status,
                    reason, flags, started_unix, duration_s, setup_ms, teardown_ms, host_steal,
                    session_id, result, attempt
             FROM runs ORDER BY run_index",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, String>(4)?,
                r.get::<_, i64>(5)?,
                r.get::<_, String>(6)?,
                r.get::<_, String>(7)?,
                r.get::<_, String>(8)?,
                r.get::<_, Option<String>>(9)?,
                r.get::<_, String>(10)?,
                (
                    r.get::<_, f64>(11)?,
                    r.get::<_, f64>(12)?,
                    r.get::<_, Option<f64>>(13)?,
                    r.get::<_, Option<f64>>(14)?,
                    r.get::<_, Option<f64>>(15)?,
                    r.get::<_, i64>(16)?,
                    r.get::<_, String>(17)?,
                ),
                r.get::<_, i64>(18)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (
                key,
                index,
                setting,
                setting_label,
                contender,
                repetition,
                seed,
                params,
                status,
                reason,
                flags,
                (started_unix, duration_s, setup_ms, teardown_ms, host_steal, session_id, result),
                attempt,
            ) = row?;
            let bad = |what: &str| format!("{}: run {key}: bad {what}", self.path.display());
            let _ = reason;
            let document: RunDocument<R> =
                serde_json::from_str(&result).with_context(|| bad("result"))?;
            check_status(&self.path, &format!("run {key}"), &status, &document)?;
            out.push(StoredRun {
                metrics: metrics.remove(&key).unwrap_or_default(),
                index: index as usize,
                setting: setting as usize,
                setting_label,
                contender,
                repetition: repetition as u32,
                seed: seed.parse().with_context(|| bad("seed"))?,
                params: serde_json::from_str(&params).with_context(|| bad("params"))?,
                flags: serde_json::from_str(&flags).with_context(|| bad("flags"))?,
                started_unix,
                duration_s,
                setup_ms,
                teardown_ms,
                host_steal,
                session_id,
                document,
                attempt: attempt as u32,
                key,
            });
        }
        Ok(out)
    }

    /// Every stored time series, grouped by run and name, points in time order.
    pub fn series(&self) -> Result<Vec<Series>> {
        let mut stmt = self.conn.prepare(
            "SELECT run_key, name, unit, t_s, value FROM series ORDER BY run_key, name, t_s",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, f64>(3)?,
                r.get::<_, f64>(4)?,
            ))
        })?;
        let mut out: Vec<Series> = Vec::new();
        for row in rows {
            let (run_key, name, unit, t, v) = row?;
            match out.last_mut() {
                Some(s) if s.run_key == run_key && s.name == name => s.points.push((t, v)),
                _ => out.push(Series {
                    run_key,
                    name,
                    unit,
                    points: vec![(t, v)],
                }),
            }
        }
        Ok(out)
    }

    pub fn sessions(&self) -> Result<Vec<Session>> {
        let mut stmt = self.conn.prepare(
            "SELECT id, started_unix, quiclab_version, git_commit, kernel, cpu_model, cpus, hostname,
                    crates, command FROM sessions ORDER BY id",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, f64>(1)?,
                Environment {
                    quiclab_version: r.get(2)?,
                    git_commit: r.get(3)?,
                    kernel: r.get(4)?,
                    cpu_model: r.get(5)?,
                    cpus: r.get::<_, i64>(6)? as usize,
                    hostname: r.get(7)?,
                    crates: BTreeMap::new(),
                    command: r.get(9)?,
                },
                r.get::<_, String>(8)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (id, started_unix, mut environment, crates) = row?;
            environment.crates = serde_json::from_str(&crates).unwrap_or_default();
            out.push(Session {
                id,
                started_unix,
                environment,
            });
        }
        Ok(out)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn temp_db(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "quiclab-results-test-{}-{name}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir.join("results.sqlite")
    }

    pub(crate) fn scenario() -> ScenarioRecord {
        ScenarioRecord {
            name: "t".into(),
            description: "d".into(),
            file: "t.toml".into(),
            text: "name = \"t\"\n".into(),
            planned_runs: 3,
        }
    }

    pub(crate) fn run(key: &str, index: usize, status: Status) -> StoredRun {
        StoredRun {
            key: key.into(),
            index,
            setting: 0,
            setting_label: "rate=10mbit".into(),
            contender: "h2".into(),
            repetition: 1,
            seed: u64::MAX - 7,
            params: BTreeMap::from([("rate".into(), "10mbit".into())]),
            flags: vec![],
            started_unix: 1.0,
            duration_s: 2.0,
            setup_ms: Some(80.0),
            teardown_ms: Some(20.0),
            host_steal: Some(0.01),
            session_id: 0,
            document: match status {
                Status::Ok => RunDocument::Finished {
                    result: WorkloadOutput::example(),
                },
                Status::Timeout => RunDocument::TimedOut {
                    limit_s: 60.0,
                    reason: String::new(),
                    partial: None,
                },
                Status::Failed => RunDocument::Failed {
                    reason: "the client failed".into(),
                    partial: None,
                },
            },
            metrics: BTreeMap::from([("total_ms".into(), 12.5), ("utilization".into(), f64::NAN)]),
            attempt: 1,
        }
    }

    #[test]
    fn runs_round_trip_and_resume_skips_them() {
        let path = temp_db("roundtrip");
        let mut s = Store::create_or_resume(&path, &scenario(), false).unwrap();
        let session = s.begin_session(&Environment::default()).unwrap();
        s.record(
            &run("a", 0, Status::Ok),
            &[Series {
                run_key: "a".into(),
                name: "cwnd_bytes".into(),
                unit: "bytes".into(),
                points: vec![(0.0, 14480.0), (0.005, 28960.0)],
            }],
        )
        .unwrap();
        s.record(&run("b", 1, Status::Timeout), &[]).unwrap();
        drop(s);
        {
            // A copy: forgetting failed runs leaves the ok ones alone.
            let copy = path.with_file_name("copy.sqlite");
            std::fs::copy(&path, &copy).unwrap();
            // Read-only: forgetting is refused and the file unchanged.
            let before = std::fs::read(&copy).unwrap();
            assert!(Store::open(&copy).unwrap().forget_failed().is_err());
            assert_eq!(std::fs::read(&copy).unwrap(), before);
            let mut c = Store::open_to_write(&copy).unwrap();
            assert_eq!(c.forget_failed().unwrap(), 1);
            assert_eq!(c.done_keys().unwrap(), HashSet::from(["a".to_string()]));
            assert_eq!(c.series().unwrap().len(), 1);
        }

        // Without --resume an existing database with runs is refused, naming the way out.
        let e = Store::create_or_resume(&path, &scenario(), false)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("--resume") && e.contains("2 run(s)"), "{e}");
        // A changed scenario cannot be resumed into the same database.
        let mut other = scenario();
        other.text.push_str("repetitions = 2\n");
        assert!(Store::create_or_resume(&path, &other, true).is_err());

        let s = Store::create_or_resume(&path, &scenario(), true).unwrap();
        assert_eq!(
            s.done_keys().unwrap(),
            HashSet::from(["a".to_string(), "b".to_string()])
        );
        let runs = s.runs().unwrap();
        assert_eq!(runs.len(), 2);
        assert_eq!(runs[0].seed, u64::MAX - 7);
        assert_eq!(runs[0].session_id, session);
        // NaN metrics are not stored.
        assert_eq!(runs[0].metrics, BTreeMap::from([("total_ms".into(), 12.5)]));
        assert_eq!(runs[1].status(), Status::Timeout);
        assert_eq!(
            runs[1].reason().as_deref(),
            Some("timed out at its limit of 60.0 s")
        );
        let series = s.series().unwrap();
        assert_eq!(series.len(), 1);
        assert_eq!(series[0].points, vec![(0.0, 14480.0), (0.005, 28960.0)]);
    }

    #[test]
    fn every_attempt_is_kept() {
        let path = temp_db("attempts");
        let mut s = Store::create_or_resume(&path, &scenario(), false).unwrap();
        s.begin_session(&Environment::default()).unwrap();
        // Attempt 1 flagged, replaced by attempt 2 that passed.
        let mut first = run("a", 0, Status::Ok);
        first.flags = vec!["emulator release lateness p99 900 µs > 500 µs".into()];
        s.record_attempt(&first).unwrap();
        assert_eq!(s.attempts_of("a").unwrap(), 1);
        let mut second = run("a", 0, Status::Ok);
        second.attempt = 2;
        s.record(&second, &[]).unwrap();
        // A timed-out run moved aside by --retry-failed becomes an attempt too.
        s.record(&run("b", 1, Status::Timeout), &[]).unwrap();
        assert_eq!(s.forget_failed().unwrap(), 1);
        assert_eq!(s.attempts_of("b").unwrap(), 1);
        let attempts = s.attempts().unwrap();
        assert_eq!(attempts.len(), 2);
        assert_eq!(attempts[0].run_key, "a");
        assert_eq!(attempts[0].flags, first.flags);
        assert_eq!(
            attempts[0].metrics,
            BTreeMap::from([("total_ms".into(), 12.5)])
        );
        assert_eq!(attempts[1].status(), Status::Timeout);
        let runs = s.runs().unwrap();
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0].attempt, 2);
    }

    #[test]
    fn a_version_2_database_is_read_through_a_copy_and_upgraded_only_when_quiclabs() {
        let path = temp_db("v2");
        {
            let c = Connection::open(&path).unwrap();
            let v2 = SCHEMA
                .replace(attempts_table(), "")
                .replace(plan_table(), "");
            let v2: String = v2
                .replace("result        TEXT NOT NULL,", "result        TEXT ")
                .lines()
                .filter(|l| !l.starts_with("    attempt       INTEGER"))
                .map(|l| format!("{l}\n"))
                .collect();
            assert!(
                !v2.contains("CREATE TABLE attempts") && !v2.contains("attempt       INTEGER"),
                "{v2}"
            );
            c.execute_batch(&format!("{v2} PRAGMA user_version = 2;"))
                .unwrap();
            c.execute(
                "INSERT INTO scenario VALUES (1, 't', 'd', 't.toml', 'x', 1, 0)",
                [],
            )
            .unwrap();
        }
        let before = std::fs::read(&path).unwrap();
        // Reading: an upgraded copy; the file is unchanged.
        let s = Store::open(&path).unwrap();
        assert_eq!(s.runs().unwrap().len(), 0);
        assert_ne!(s.read_path(), path);
        drop(s);
        assert_eq!(std::fs::read(&path).unwrap(), before);
        // Writing: no quiclab marker in its directory, no application id: refused, unchanged.
        let e = Store::open_to_write(&path).err().unwrap().to_string();
        assert!(e.contains("marker"), "{e}");
        assert_eq!(std::fs::read(&path).unwrap(), before);
        // In a directory quiclab claimed: a backup copy, then the upgrade.
        let dir = path.parent().unwrap();
        std::fs::remove_dir_all(dir).unwrap();
        quiclab_outputs::claim_dir(dir, "--out").unwrap();
        std::fs::write(&path, &before).unwrap();
        let mut s = Store::open_to_write(&path).unwrap();
        let backup = dir.join("results.sqlite.schema-2.bak");
        assert_eq!(std::fs::read(&backup).unwrap(), before);
        s.begin_session(&Environment::default()).unwrap();
        s.record(&run("a", 0, Status::Ok), &[]).unwrap();
        s.record_attempt(&run("b", 1, Status::Ok)).unwrap();
        assert_eq!(s.runs().unwrap()[0].attempt, 1);
        assert_eq!(s.attempts().unwrap().len(), 1);
        assert_eq!(s.plan().unwrap().repetitions, None);
    }

    #[test]
    fn foreign_empty_and_newer_databases_are_refused_unchanged() {
        let path = temp_db("foreign");
        {
            let c = Connection::open(&path).unwrap();
            c.execute_batch(
                "CREATE TABLE runs (key TEXT, value REAL); INSERT INTO runs VALUES ('a', 1);",
            )
            .unwrap();
        }
        let before = std::fs::read(&path).unwrap();
        for e in [
            Store::open(&path).err().unwrap().to_string(),
            Store::open_to_write(&path).err().unwrap().to_string(),
            Store::create_or_resume(&path, &scenario(), true)
                .err()
                .unwrap()
                .to_string(),
        ] {
            assert!(e.contains("not a quiclab results database"), "{e}");
        }
        assert_eq!(std::fs::read(&path).unwrap(), before);
        std::fs::write(&path, "").unwrap();
        let e = Store::open(&path).err().unwrap().to_string();
        assert!(e.contains("empty database"), "{e}");
        assert_eq!(std::fs::read(&path).unwrap(), b"");
        std::fs::remove_file(&path).unwrap();
        {
            let s = Store::create_or_resume(&path, &scenario(), false).unwrap();
            s.conn.execute_batch("PRAGMA user_version = 99;").unwrap();
        }
        let e = Store::open(&path).err().unwrap().to_string();
        assert!(e.contains("newer quiclab") && e.contains("99"), "{e}");
    }

    #[test]
    fn a_database_holds_one_plan() {
        let path = temp_db("plan");
        let mut s = Store::create_or_resume(&path, &scenario(), false).unwrap();
        s.check_and_set_plan(false, 3, Some("1/2".into())).unwrap();
        s.begin_session(&Environment::default()).unwrap();
        s.record(&run("a", 0, Status::Ok), &[]).unwrap();
        s.check_and_set_plan(false, 3, Some("1/2".into())).unwrap();
        for (quick, reps, shard, word) in [
            (false, 3, Some("3/3"), "shard"),
            (false, 3, None, "shard"),
            (false, 4, Some("1/2"), "repetitions"),
            (true, 3, Some("1/2"), "quick form"),
        ] {
            let e = s
                .check_and_set_plan(quick, reps, shard.map(String::from))
                .unwrap_err()
                .to_string();
            assert!(e.contains(word) && e.contains("one plan"), "{e}");
        }
        let p = s.plan().unwrap();
        assert_eq!(
            (p.quick, p.repetitions, p.shard.as_deref()),
            (Some(false), Some(3), Some("1/2"))
        );
        assert!(!p.database_id.is_empty());
    }

    #[test]
    fn a_run_key_is_recorded_once() {
        let path = temp_db("once");
        let mut s = Store::create_or_resume(&path, &scenario(), false).unwrap();
        s.begin_session(&Environment::default()).unwrap();
        s.record(&run("a", 0, Status::Ok), &[]).unwrap();
        assert!(s.record(&run("a", 0, Status::Ok), &[]).is_err());
        // The failed transaction left nothing behind.
        assert_eq!(s.run_count().unwrap(), 1);
    }

    #[test]
    fn the_documented_schema_is_the_schema() {
        let doc = include_str!("../../../docs/results.md");
        assert!(
            doc.contains(SCHEMA),
            "docs/results.md must quote SCHEMA verbatim; update it"
        );
    }

    #[test]
    fn not_a_database_is_a_clear_error() {
        let path = temp_db("garbage");
        std::fs::write(&path, "hello").unwrap();
        let e = format!("{:#}", Store::open(&path).err().unwrap());
        assert!(e.contains("results.sqlite"), "{e}");
        let e = Store::open(&path.with_file_name("none.sqlite"))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("no such results database"), "{e}");
    }
}
