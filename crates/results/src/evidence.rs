//! Evidence: the runs a study's pack judged, kept in the repository as text that diffs and
//! merges (`evidence/STUDY/SCENARIO/`), so that anyone with a checkout can judge them again with
//! today's code (`quiclab reproduce all --judge evidence/`). One directory per scenario:
//!
//! - `scenario.toml` — the scenario's text the runs were made from, byte for byte;
//! - `evidence.json` — the scenario record, the form (always the full form; the repetitions when
//!   overridden) and the parts (results databases) merged into it;
//! - `sessions.jsonl` — one line per results session a run came from: quiclab's commit (a clean
//!   tree: evidence from a dirty build is refused), host, kernel, CPU, the stack crates, the
//!   Chromium versions its runs loaded pages with, the date;
//! - `runs.jsonl.gz` — one line per run (gzip-compressed), in plan order: key, parameters, seed, the typed document
//!   (the result; no time series, no packets), metrics, fidelity flags, host steal, and the
//!   earlier attempts a retry replaced.
//!
//! Parts made at different times or on different machines (`--shard K/N`, `--resume`) merge
//! with `quiclab merge`'s rules: one scenario text, one form and repetitions, one build; a run
//! found twice keeps its `ok` copy, else the later one.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use crate::store::{Attempt, Environment, ScenarioRecord, Store, StoredRun};
use quiclab_model::WorkloadOutput;

pub const SCENARIO_FILE: &str = "scenario.toml";
pub const HEADER_FILE: &str = "evidence.json";
pub const SESSIONS_FILE: &str = "sessions.jsonl";
/// Gzip-compressed: the runs of every pack in text would pass the ≈ 30 MB the repository allows
/// evidence (a page load's fidelity report alone is ≈ 7 kB); `zcat` (or git's textconv, see
/// .gitattributes) shows the lines.
pub const RUNS_FILE: &str = "runs.jsonl.gz";

/// What a scenario's evidence is: the scenario record (its text is `scenario.toml`), its form,
/// and the results databases merged into it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    pub scenario: String,
    pub description: String,
    /// The scenario file the runs were made from, as the run named it.
    pub file: String,
    /// The repetitions when the pack overrode the scenario's (`--repetitions`), else null.
    pub repetitions: Option<u32>,
    pub parts: Vec<Part>,
}

/// One results database merged into the evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Part {
    /// The database's identity (random at its creation).
    pub database_id: String,
    /// `K/N` when it ran one shard of the plan.
    pub shard: Option<String>,
    /// Its runs kept here.
    pub runs: usize,
}

/// A results session a run came from, numbered within the evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvidenceSession {
    pub id: i64,
    /// The database and its session number the session came from.
    pub database_id: String,
    pub database_session: i64,
    pub started_unix: f64,
    /// `started_unix` in words (UTC).
    pub date: String,
    pub environment: Environment,
    /// The Chromium versions its runs loaded pages with (`Browser.getVersion`), none when no run
    /// of the session used Chromium.
    pub chromium: Vec<String>,
}

/// One run: as the results store holds it, with the earlier attempts a retry replaced.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EvidenceRun {
    #[serde(flatten)]
    pub run: StoredRun,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replaced_attempts: Vec<Attempt>,
}

/// The evidence of one scenario.
#[derive(Debug, Clone)]
pub struct Evidence {
    pub header: Header,
    /// `scenario.toml`.
    pub text: String,
    pub sessions: Vec<EvidenceSession>,
    pub runs: Vec<EvidenceRun>,
}

/// What adding a results database to evidence did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Added {
    /// Runs new to the evidence.
    pub new: usize,
    /// Runs it already held, the same (the same database added again).
    pub same: usize,
    /// Runs it held in another copy, and which copy was kept, in words.
    pub replaced: Vec<String>,
    /// Runs of the database left out (no finding judges them).
    pub left_out: usize,
}

/// Whether `commit` names a clean tree: not empty, not `unknown`, not `…-dirty`.
pub fn clean_commit(commit: &str) -> bool {
    !commit.is_empty() && commit != "unknown" && !commit.ends_with("-dirty")
}

/// Whether `dir` holds evidence: some `STUDY/SCENARIO/runs.jsonl.gz` (a results directory holds
/// `STUDY/SCENARIO/results.sqlite` instead).
pub fn is_evidence(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|studies| {
        studies.flatten().any(|s| {
            std::fs::read_dir(s.path())
                .is_ok_and(|sc| sc.flatten().any(|d| holds_evidence(&d.path())))
        })
    })
}

/// Whether the scenario directory `dir` holds evidence: its runs file or its header, whatever
/// they are (a runs file that is missing, a device or a pipe is then refused by
/// [`Evidence::read`], naming it, instead of the directory being passed over in silence).
fn holds_evidence(dir: &Path) -> bool {
    std::fs::symlink_metadata(dir.join(RUNS_FILE)).is_ok()
        || std::fs::symlink_metadata(dir.join(HEADER_FILE)).is_ok()
}

/// The evidence of `store` (a pack's results database of one scenario): its runs that `judged`
/// keeps, each with its replaced attempts, and the sessions they came from. Refused: a quick
/// form, and any session of a build that is not a clean commit.
pub fn from_store(store: &Store, judged: &dyn Fn(&StoredRun) -> bool) -> Result<(Evidence, usize)> {
    let path = store.path().display().to_string();
    let scenario = store.scenario()?;
    let plan = store.plan()?;
    if plan.quick == Some(true) || scenario.name.ends_with("-quick") {
        bail!(
            "{path}: holds the quick form of {}; evidence keeps full forms only (run the pack \
             without --quick)",
            scenario.name
        );
    }
    let all = store.runs()?;
    let total = all.len();
    let runs: Vec<StoredRun> = all.into_iter().filter(|r| judged(r)).collect();
    let left_out = total - runs.len();
    let mut attempts: BTreeMap<String, Vec<Attempt>> = BTreeMap::new();
    for a in store.attempts()? {
        attempts.entry(a.run_key.clone()).or_default().push(a);
    }
    let used: BTreeSet<i64> = runs
        .iter()
        .map(|r| r.session_id)
        .chain(
            runs.iter()
                .flat_map(|r| attempts.get(&r.key).into_iter().flatten())
                .map(|a| a.session_id),
        )
        .collect();
    let mut sessions = Vec::new();
    let mut repetitions = plan.repetitions;
    for s in store
        .sessions()?
        .into_iter()
        .filter(|s| used.contains(&s.id))
    {
        if !clean_commit(&s.environment.git_commit) {
            bail!(
                "{path}: session {} ran quiclab {:?}, not a clean commit; evidence is kept only \
                 from builds of a committed tree (commit, build, run the pack again)",
                s.id,
                s.environment.git_commit
            );
        }
        repetitions = repetitions.or_else(|| crate::merge::repetitions_of(&s.environment.command));
        sessions.push(EvidenceSession {
            id: s.id,
            database_id: plan.database_id.clone(),
            database_session: s.id,
            started_unix: s.started_unix,
            date: quiclab_model::utc(s.started_unix),
            chromium: chromium_versions(&runs, &attempts, s.id),
            environment: s.environment,
        });
    }
    let runs = runs
        .into_iter()
        .map(|run| EvidenceRun {
            replaced_attempts: attempts.remove(&run.key).unwrap_or_default(),
            run,
        })
        .collect::<Vec<_>>();
    let evidence = Evidence {
        header: Header {
            scenario: scenario.name,
            description: scenario.description,
            file: scenario.file,
            repetitions,
            parts: vec![Part {
                database_id: plan.database_id,
                shard: plan.shard,
                runs: runs.len(),
            }],
        },
        text: scenario.text,
        sessions,
        runs,
    };
    evidence.check_one_build(&path)?;
    Ok((evidence, left_out))
}

/// The Chromium versions the runs (and attempts) of session `id` report.
fn chromium_versions(
    runs: &[StoredRun],
    attempts: &BTreeMap<String, Vec<Attempt>>,
    id: i64,
) -> Vec<String> {
    let version = |doc: &crate::RunDocument<WorkloadOutput>| match doc.result() {
        Some(WorkloadOutput::Page(p)) => p.summary.browser_version.clone(),
        _ => None,
    };
    let of_runs = runs
        .iter()
        .filter(|r| r.session_id == id)
        .filter_map(|r| version(&r.document));
    let of_attempts = attempts
        .values()
        .flatten()
        .filter(|a| a.session_id == id)
        .filter_map(|a| version(&a.document));
    of_runs
        .chain(of_attempts)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

impl EvidenceRun {
    /// Its line of `runs.jsonl.gz` (two runs are the same run when their lines are).
    pub fn line(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

impl Evidence {
    /// The builds (quiclab version and commit) its sessions ran.
    pub fn builds(&self) -> BTreeSet<String> {
        self.sessions
            .iter()
            .map(|s| {
                format!(
                    "quiclab {} at {}",
                    s.environment.quiclab_version, s.environment.git_commit
                )
            })
            .collect()
    }

    fn check_one_build(&self, what: &str) -> Result<()> {
        let builds = self.builds();
        if builds.len() > 1 {
            bail!(
                "{what}: runs of {} builds ({}); one scenario's evidence comes from one build \
                 (run its other parts with the same build, or all of it again with one)",
                builds.len(),
                builds.into_iter().collect::<Vec<_>>().join(", ")
            );
        }
        Ok(())
    }

    /// The run keys it holds.
    pub fn keys(&self) -> BTreeSet<&str> {
        self.runs.iter().map(|r| r.run.key.as_str()).collect()
    }

    /// Adds `part` (evidence of one results database, [`from_store`]) with `quiclab merge`'s
    /// rules: the same scenario name and text, the same repetitions, one build; a run found in
    /// both keeps its `ok` copy, else the later one. `what` names the evidence for errors.
    pub fn add(&mut self, part: Evidence, what: &str) -> Result<Added> {
        if part.header.scenario != self.header.scenario || part.text != self.text {
            bail!(
                "{what}: holds runs of another version of scenario {} (its scenario.toml \
                 differs); evidence of a changed scenario starts anew (remove the directory \
                 from the repository and add every part again)",
                self.header.scenario
            );
        }
        if part.header.repetitions != self.header.repetitions {
            let say =
                |r: Option<u32>| r.map_or("the scenario's own".to_string(), |r| r.to_string());
            bail!(
                "{what}: holds runs of {} repetitions and this part ran {}: the parts of one \
                 scenario's evidence run the same repetitions",
                say(self.header.repetitions),
                say(part.header.repetitions)
            );
        }
        let mut added = Added::default();
        // Sessions: the same (database, session) once; others numbered after the last.
        let mut ids: BTreeMap<i64, i64> = BTreeMap::new();
        for s in part.sessions {
            let known = self.sessions.iter().find(|k| {
                k.database_id == s.database_id && k.database_session == s.database_session
            });
            let id = match known {
                Some(k) => k.id,
                None => {
                    let id = self.sessions.iter().map(|k| k.id).max().unwrap_or(0) + 1;
                    self.sessions.push(EvidenceSession { id, ..s.clone() });
                    id
                }
            };
            ids.insert(s.id, id);
        }
        for p in part.header.parts {
            match self
                .header
                .parts
                .iter_mut()
                .find(|k| k.database_id == p.database_id)
            {
                Some(k) => *k = p,
                None => self.header.parts.push(p),
            }
        }
        for mut r in part.runs {
            let renumber = |id: i64| ids.get(&id).copied().unwrap_or(id);
            r.run.session_id = renumber(r.run.session_id);
            for a in &mut r.replaced_attempts {
                a.session_id = renumber(a.session_id);
            }
            match self.runs.iter_mut().find(|k| k.run.key == r.run.key) {
                None => {
                    added.new += 1;
                    self.runs.push(r);
                }
                Some(k) if k.line() == r.line() => added.same += 1,
                Some(k) => {
                    let ok = |x: &EvidenceRun| x.run.status() == crate::Status::Ok;
                    let keep_new = match (ok(k), ok(&r)) {
                        (true, false) => false,
                        (false, true) => true,
                        _ => r.run.started_unix > k.run.started_unix,
                    };
                    let kept = if keep_new { &r } else { &*k };
                    added.replaced.push(format!(
                        "{}: kept the {} copy ({}, started {})",
                        r.run.key,
                        if keep_new { "new" } else { "earlier" },
                        kept.run.status().as_str(),
                        quiclab_model::utc(kept.run.started_unix)
                    ));
                    if keep_new {
                        *k = r;
                    }
                }
            }
        }
        self.runs
            .sort_by(|a, b| (a.run.index, &a.run.key).cmp(&(b.run.index, &b.run.key)));
        // Sessions no run points to any more (every run of them replaced) go.
        let used: BTreeSet<i64> = self
            .runs
            .iter()
            .flat_map(|r| {
                std::iter::once(r.run.session_id)
                    .chain(r.replaced_attempts.iter().map(|a| a.session_id))
            })
            .collect();
        self.sessions.retain(|s| used.contains(&s.id));
        self.check_one_build(what)?;
        Ok(added)
    }

    /// Reads the evidence in `dir` (`evidence/STUDY/SCENARIO`). Refused: a file that does not
    /// read (named with its line), a run of a session it does not hold, a session of a build
    /// that is not a clean commit.
    pub fn read(dir: &Path) -> Result<Evidence> {
        let file = |name: &str| -> Result<(PathBuf, String)> {
            let p = dir.join(name);
            let text =
                quiclab_outputs::read_to_string_bounded(&p, quiclab_outputs::MAX_STORED_FILE)
                    .with_context(|| format!("reading {}", p.display()))?;
            Ok((p, text))
        };
        let (hp, header) = file(HEADER_FILE)?;
        let header: Header = serde_json::from_str(&header)
            .with_context(|| format!("{}: not an evidence header", hp.display()))?;
        let (_, text) = file(SCENARIO_FILE)?;
        let (sp, sessions) = file(SESSIONS_FILE)?;
        let sessions: Vec<EvidenceSession> = lines(&sp, &sessions)?;
        let rp = dir.join(RUNS_FILE);
        let runs = gunzip(&rp)?;
        let runs: Vec<EvidenceRun> = lines(&rp, &runs)?;
        for s in &sessions {
            if !clean_commit(&s.environment.git_commit) {
                bail!(
                    "{}: session {} ran quiclab {:?}: evidence comes from clean commits only",
                    sp.display(),
                    s.id,
                    s.environment.git_commit
                );
            }
        }
        let ids: BTreeSet<i64> = sessions.iter().map(|s| s.id).collect();
        for (i, r) in runs.iter().enumerate() {
            let missing = std::iter::once(r.run.session_id)
                .chain(r.replaced_attempts.iter().map(|a| a.session_id))
                .find(|id| !ids.contains(id));
            if let Some(id) = missing {
                bail!(
                    "{}:{}: run {} points to session {id}, which {} does not hold",
                    rp.display(),
                    i + 1,
                    r.run.key,
                    sp.display()
                );
            }
        }
        let evidence = Evidence {
            header,
            text,
            sessions,
            runs,
        };
        evidence.check_one_build(&dir.display().to_string())?;
        Ok(evidence)
    }

    /// Writes the evidence into `dir` (a directory quiclab claims: new, empty or its own), each
    /// file replaced whole.
    pub fn write(&self, dir: &Path) -> Result<()> {
        let dir = quiclab_outputs::claim_dir(dir, "evidence")?;
        let mut header = self.header.clone();
        for p in &mut header.parts {
            p.runs = self
                .runs
                .iter()
                .filter(|r| {
                    self.sessions
                        .iter()
                        .any(|s| s.id == r.run.session_id && s.database_id == p.database_id)
                })
                .count();
        }
        let jsonl = |items: Vec<String>| items.join("\n") + "\n";
        let sessions = self
            .sessions
            .iter()
            .map(serde_json::to_string)
            .collect::<serde_json::Result<Vec<_>>>()?;
        let runs = self
            .runs
            .iter()
            .map(serde_json::to_string)
            .collect::<serde_json::Result<Vec<_>>>()?;
        let files = [
            (SCENARIO_FILE, self.text.clone().into_bytes()),
            (
                HEADER_FILE,
                (serde_json::to_string_pretty(&header)? + "\n").into_bytes(),
            ),
            (SESSIONS_FILE, jsonl(sessions).into_bytes()),
            (RUNS_FILE, gzip(jsonl(runs).as_bytes())?),
        ];
        // One set: all four written before any replaces the old one (a full disk leaves the
        // evidence as it was, never a new header beside old runs).
        let set: Vec<(&str, &[u8])> = files.iter().map(|(n, b)| (*n, b.as_slice())).collect();
        quiclab_outputs::write_set_in_claimed(&dir, &set)
            .with_context(|| format!("writing the evidence in {}", dir.display()))?;
        Ok(())
    }

    /// The scenario record the runs were made from.
    pub fn scenario_record(&self) -> ScenarioRecord {
        ScenarioRecord {
            name: self.header.scenario.clone(),
            description: self.header.description.clone(),
            file: self.header.file.clone(),
            text: self.text.clone(),
            planned_runs: self.runs.len(),
        }
    }

    /// Rebuilds a results database at `db` (new) from the evidence: the scenario, every session
    /// with its own date and environment, every run with its metrics and replaced attempts (no
    /// time series: evidence keeps none). What reads results (`report`, `reproduce --judge`)
    /// then reads the evidence.
    pub fn materialize(&self, db: &Path) -> Result<Store> {
        if db.exists() {
            bail!(
                "{}: exists; evidence is rebuilt into a new database",
                db.display()
            );
        }
        let mut store = Store::create_or_resume(db, &self.scenario_record(), false)?;
        // The plan's repetitions: the override, else the scenario's own, else what ran.
        let repetitions = self
            .header
            .repetitions
            .or_else(|| {
                quiclab_experiment::parse(&self.text, &self.header.file)
                    .ok()
                    .map(|s| s.repetitions)
            })
            .unwrap_or_else(|| {
                self.runs
                    .iter()
                    .map(|r| r.run.repetition)
                    .max()
                    .unwrap_or(1)
            });
        store.check_and_set_plan(false, repetitions, None)?;
        let mut ids = BTreeMap::new();
        for s in &self.sessions {
            ids.insert(s.id, store.restore_session(s.started_unix, &s.environment)?);
        }
        for r in &self.runs {
            for a in &r.replaced_attempts {
                store.use_session(ids[&a.session_id]);
                store.restore_attempt(a)?;
            }
            store.use_session(ids[&r.run.session_id]);
            store.record(&r.run, &[])?;
        }
        Ok(store)
    }
}

/// `bytes` gzip-compressed, the same bytes for the same input (no name, no time in the header).
pub fn gzip(bytes: &[u8]) -> Result<Vec<u8>> {
    use std::io::Write as _;
    let mut e = flate2::GzBuilder::new()
        .mtime(0)
        .write(Vec::new(), flate2::Compression::best());
    e.write_all(bytes)?;
    Ok(e.finish()?)
}

/// The text of the gzip-compressed file `path`: every gzip member (a file made by joining two
/// gzip files reads as their joined text, as `zcat` reads it), refused past
/// [`quiclab_outputs::MAX_STORED_FILE`] bytes compressed or uncompressed (a gzip bomb), and
/// refused when it is not a regular file (a device, a pipe).
pub fn gunzip(path: &Path) -> Result<String> {
    use std::io::Read as _;
    let max = quiclab_outputs::MAX_STORED_FILE;
    let compressed = quiclab_outputs::read_bounded(path, max)?;
    let mut bytes = Vec::new();
    flate2::read::MultiGzDecoder::new(compressed.as_slice())
        .take(max + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("{}: not gzip-compressed text", path.display()))?;
    if bytes.len() as u64 > max {
        return Err(quiclab_outputs::too_large(path, max))
            .with_context(|| format!("{}: uncompressed", path.display()));
    }
    String::from_utf8(bytes)
        .map_err(|_| anyhow::anyhow!("{}: not gzip-compressed UTF-8 text", path.display()))
}

/// Parses one JSON value per non-empty line of `text` (the file `path`), naming the line of one
/// that does not read.
fn lines<T: serde::de::DeserializeOwned>(path: &Path, text: &str) -> Result<Vec<T>> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l)
                .with_context(|| format!("{}:{}: does not read", path.display(), i + 1))
        })
        .collect()
}

/// The scenario directories of study `study` in the evidence directory `dir`, by name.
pub fn scenarios_of(dir: &Path, study: &str) -> BTreeMap<String, PathBuf> {
    std::fs::read_dir(dir.join(study))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| holds_evidence(p))
        .filter_map(|p| Some((p.file_name()?.to_string_lossy().into_owned(), p)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Status;
    use crate::store::tests::{run, scenario, temp_db};

    fn env(commit: &str) -> Environment {
        Environment {
            quiclab_version: "0.1.0".into(),
            git_commit: commit.into(),
            hostname: "lab".into(),
            command: "quiclab reproduce t".into(),
            ..Default::default()
        }
    }

    /// A results database named `name` of runs (key, status, start) by a build of `commit`; run
    /// `a` is a second attempt (its first, flagged, replaced).
    fn database(name: &str, commit: &str, runs: &[(&str, Status, f64)]) -> Store {
        let path = temp_db(name);
        let mut store = Store::create_or_resume(&path, &scenario(), false).unwrap();
        store.begin_session(&env(commit)).unwrap();
        for (i, (key, status, started)) in runs.iter().enumerate() {
            let mut r = run(key, i, *status);
            r.started_unix = *started;
            if *key == "a" {
                let first = StoredRun {
                    flags: vec!["emulator late".into()],
                    ..r.clone()
                };
                store.record_attempt(&first).unwrap();
                r.attempt = 2;
            }
            store.record(&r, &[]).unwrap();
        }
        store
    }

    fn all(_: &StoredRun) -> bool {
        true
    }

    #[test]
    fn evidence_round_trips_through_text_and_back_into_a_database() {
        let store = database(
            "ev-round",
            "abc123",
            // 1795717982.9585025 is read back one ULP beside itself by serde_json's default
            // parser (it was, in the carlucci2015 evidence): the evidence must keep it exact.
            &[
                ("a", Status::Ok, 1.0),
                ("b", Status::Failed, 1_795_717_982.958_502_5),
            ],
        );
        let (e, left_out) = from_store(&store, &all).unwrap();
        assert_eq!(left_out, 0);
        assert_eq!(e.runs.len(), 2);
        assert_eq!(
            e.runs[0].replaced_attempts.len(),
            1,
            "the flagged first attempt is kept"
        );
        assert_eq!(e.sessions[0].environment.git_commit, "abc123");
        let dir = temp_db("ev-round-dir").with_file_name("evidence");
        e.write(&dir).unwrap();
        let back = Evidence::read(&dir).unwrap();
        let lines = |e: &Evidence| e.runs.iter().map(EvidenceRun::line).collect::<Vec<_>>();
        assert_eq!(lines(&back), lines(&e));
        assert_eq!(
            (&back.header, &back.text, &back.sessions),
            (&e.header, &e.text, &e.sessions)
        );
        // Written twice, the same bytes: text that diffs.
        let bytes = std::fs::read(dir.join(RUNS_FILE)).unwrap();
        back.write(&dir).unwrap();
        assert_eq!(std::fs::read(dir.join(RUNS_FILE)).unwrap(), bytes);
        // Rebuilt into a database, the runs read as the original's.
        let db = temp_db("ev-round-db");
        let rebuilt = back.materialize(&db).unwrap();
        let strip = |mut r: StoredRun| {
            r.session_id = 0;
            serde_json::to_string(&r).unwrap()
        };
        let want: Vec<_> = store.runs().unwrap().into_iter().map(strip).collect();
        let got: Vec<_> = rebuilt.runs().unwrap().into_iter().map(strip).collect();
        assert_eq!(got, want);
        assert_eq!(rebuilt.attempts().unwrap().len(), 1);
        assert_eq!(
            rebuilt.sessions().unwrap()[0].started_unix,
            store.sessions().unwrap()[0].started_unix
        );
        assert_eq!(rebuilt.scenario().unwrap().text, scenario().text);
    }

    #[test]
    fn a_dirty_build_and_a_quick_form_are_refused() {
        let store = database("ev-dirty", "abc123-dirty", &[("b", Status::Ok, 1.0)]);
        let e = from_store(&store, &all).unwrap_err().to_string();
        assert!(e.contains("not a clean commit"), "{e}");
        let store = database("ev-unknown", "unknown", &[("b", Status::Ok, 1.0)]);
        assert!(from_store(&store, &all).is_err());
        let store = database("ev-quick", "abc123", &[("b", Status::Ok, 1.0)]);
        store.check_and_set_plan(true, 1, None).unwrap();
        let e = from_store(&store, &all).unwrap_err().to_string();
        assert!(e.contains("full forms only"), "{e}");
    }

    #[test]
    fn parts_merge_by_merges_rules() {
        let one = database(
            "ev-one",
            "abc123",
            &[("a", Status::Ok, 1.0), ("b", Status::Failed, 2.0)],
        );
        let two = database(
            "ev-two",
            "abc123",
            &[("b", Status::Ok, 3.0), ("c", Status::Ok, 4.0)],
        );
        let (mut e, _) = from_store(&one, &all).unwrap();
        let added = e.add(from_store(&two, &all).unwrap().0, "t").unwrap();
        assert_eq!((added.new, added.same), (1, 0));
        assert_eq!(added.replaced.len(), 1, "{:?}", added.replaced);
        assert!(
            added.replaced[0].starts_with("b: kept the new copy (ok"),
            "{:?}",
            added.replaced
        );
        assert_eq!(e.keys().into_iter().collect::<Vec<_>>(), ["a", "b", "c"]);
        assert_eq!(e.sessions.len(), 2);
        assert_eq!(e.header.parts.len(), 2);
        // Every run points to a session the evidence holds, renumbered.
        let ids: BTreeSet<i64> = e.sessions.iter().map(|s| s.id).collect();
        assert!(e.runs.iter().all(|r| ids.contains(&r.run.session_id)));
        // The same database again adds nothing; a failed copy never replaces an ok one.
        let again = e.add(from_store(&one, &all).unwrap().0, "t").unwrap();
        assert_eq!((again.new, again.same), (0, 1));
        assert!(
            again.replaced[0].starts_with("b: kept the earlier copy (ok"),
            "{:?}",
            again.replaced
        );
        assert_eq!(
            e.runs
                .iter()
                .find(|r| r.run.key == "b")
                .unwrap()
                .run
                .status(),
            Status::Ok
        );
        // Another build is refused, and so is another text of the scenario.
        let other = database("ev-other", "def456", &[("d", Status::Ok, 5.0)]);
        let err = e
            .clone()
            .add(from_store(&other, &all).unwrap().0, "t")
            .unwrap_err()
            .to_string();
        assert!(err.contains("one build"), "{err}");
        let (mut changed, _) = from_store(&one, &all).unwrap();
        changed.text.push_str("# changed\n");
        let err = e.add(changed, "t").unwrap_err().to_string();
        assert!(err.contains("another version"), "{err}");
    }

    #[test]
    fn a_line_that_does_not_read_is_named_and_runs_of_unknown_sessions_are_refused() {
        let store = database("ev-bad", "abc123", &[("a", Status::Ok, 1.0)]);
        let (e, _) = from_store(&store, &all).unwrap();
        let root = temp_db("ev-bad-dir").with_file_name("evidence");
        let dir = root.join("study").join("scenario");
        e.write(&dir).unwrap();
        assert!(is_evidence(&root));
        assert!(!is_evidence(&root.join("study")));
        assert_eq!(
            scenarios_of(&root, "study").into_keys().collect::<Vec<_>>(),
            ["scenario"]
        );
        let runs = gunzip(&dir.join(RUNS_FILE)).unwrap();
        let put = |text: String| {
            std::fs::write(dir.join(RUNS_FILE), gzip(text.as_bytes()).unwrap()).unwrap()
        };
        put(format!("{runs}{{\"key\": 1}}\n"));
        let err = format!("{:#}", Evidence::read(&dir).unwrap_err());
        assert!(err.contains("runs.jsonl.gz:2: does not read"), "{err}");
        put(runs.replace("\"session_id\":1", "\"session_id\":9"));
        let err = format!("{:#}", Evidence::read(&dir).unwrap_err());
        assert!(err.contains("session 9"), "{err}");
    }

    #[test]
    fn every_gzip_member_is_read_and_devices_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("runs.jsonl.gz");
        // Two files joined (`cat a.gz b.gz`): zcat reads both, and so does quiclab.
        let mut joined = gzip(b"{\"a\":1}\n").unwrap();
        joined.extend(gzip(b"{\"a\":2}\n").unwrap());
        std::fs::write(&p, joined).unwrap();
        assert_eq!(gunzip(&p).unwrap(), "{\"a\":1}\n{\"a\":2}\n");
        let e = gunzip(std::path::Path::new("/dev/zero")).unwrap_err();
        assert!(format!("{e:#}").contains("not a regular file"), "{e:#}");
    }
}
