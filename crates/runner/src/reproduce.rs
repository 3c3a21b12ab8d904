//! `quiclab reproduce`: a study (`studies/STUDY.toml`) as a pack — the scenarios its findings name,
//! run one after the other into `OUT/SCENARIO/` (each a results directory of its own, resumable) —
//! and every finding judged from the stored runs by `quiclab-verdict`. `--judge` judges stored
//! results again without running anything.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail};
use quiclab_experiment::metric::MetricDef;
use quiclab_results::{Store, StoredRun};
use quiclab_verdict::findings::{self, Judged, Study};
use quiclab_verdict::judge;
use quiclab_verdict::study::{RunRecord, ScenarioRuns};
use serde::Serialize;

pub use quiclab_verdict::outcome::{FindingVerdict, verdict_word};

/// Where the study and scenario files are: a checkout of quiclab (a directory holding `studies/`
/// and `scenarios/`).
#[derive(Debug, Clone)]
pub struct Library {
    pub root: PathBuf,
}

impl Library {
    /// `root` if given, else the first of the working directory and the executable's ancestors
    /// that holds `studies/` (a binary in `target/release/` finds its checkout).
    pub fn find(root: Option<&Path>) -> Result<Library> {
        if let Some(r) = root {
            if !r.join("studies").is_dir() || !r.join("scenarios").is_dir() {
                bail!(
                    "--repo {}: no studies/ and scenarios/ there (give a quiclab checkout)",
                    r.display()
                );
            }
            return Ok(Library {
                root: r.to_path_buf(),
            });
        }
        let mut candidates = vec![std::env::current_dir()?];
        if let Ok(exe) = std::env::current_exe() {
            candidates.extend(exe.ancestors().map(Path::to_path_buf));
        }
        candidates
            .into_iter()
            .find(|c| c.join("studies").is_dir() && c.join("scenarios").is_dir())
            .map(|root| Library { root })
            .ok_or_else(|| {
                anyhow!(
                    "no studies/ found in the working directory or above the quiclab binary; \
                     run from a quiclab checkout or give --repo DIR"
                )
            })
    }

    pub fn scenario_path(&self, name: &str) -> PathBuf {
        self.root.join("scenarios").join(format!("{name}.toml"))
    }

    /// Every study file of `studies/`, each parsed and checked against the scenarios and the
    /// metric registry on its own: a broken file is reported as such and blocks no other study.
    /// A repository without any study file is an error.
    pub fn study_files(&self) -> Result<Vec<StudyFile>> {
        let dir = self.root.join("studies");
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .with_context(|| format!("reading {}", dir.display()))?
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "toml"))
            .collect();
        files.sort();
        if files.is_empty() {
            bail!(
                "{}: no study files (studies/STUDY.toml); nothing to reproduce",
                dir.display()
            );
        }
        let mut out: Vec<StudyFile> = Vec::new();
        let mut ids: BTreeMap<String, String> = BTreeMap::new();
        for file in files {
            let stem = file
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            let parsed = self.study_file(&file, &stem).and_then(|study| {
                // A finding's id names it in every table and in --finding: once in the library.
                for f in &study.findings {
                    if let Some(other) = ids.get(&f.id) {
                        return Err(format!(
                            "{}:{}: finding {:?}: key \"id\": also a finding of study {other}; \
                             ids are unique across studies",
                            file.display(),
                            f.line,
                            f.id
                        ));
                    }
                }
                for f in &study.findings {
                    ids.insert(f.id.clone(), study.name.clone());
                }
                Ok(study)
            });
            out.push(StudyFile {
                file,
                name: stem,
                study: parsed,
            });
        }
        Ok(out)
    }

    fn study_file(&self, file: &Path, stem: &str) -> std::result::Result<Study, String> {
        let name = file.display().to_string();
        let text = std::fs::read_to_string(file).map_err(|e| format!("reading {name}: {e}"))?;
        let study = findings::parse(&text, &name)?;
        // The study's name becomes a directory under --out: a plain name, the file's own (so
        // that two files cannot name one study).
        quiclab_outputs::plain_name(&study.name, "study").map_err(|e| format!("{name}: {e}"))?;
        for f in &study.findings {
            if let Judged::Run { scenario, .. } = &f.judged {
                quiclab_outputs::plain_name(scenario, "scenario").map_err(|e| {
                    format!(
                        "{name}:{}: finding {:?}: key \"scenario\": {e}",
                        f.line, f.id
                    )
                })?;
            }
        }
        if study.name != stem {
            return Err(format!(
                "{name}: study = {:?} but the file is {stem}.toml; a study's name is its file's",
                study.name
            ));
        }
        findings::validate(
            &study,
            &name,
            |s| {
                let p = self.scenario_path(s);
                Some((std::fs::read_to_string(&p).ok()?, p.display().to_string()))
            },
            |kind, metric| {
                quiclab_workload::kind_metrics(kind)
                    .iter()
                    .find(|m| m.name == metric)
                    .copied()
            },
        )?;
        Ok(study)
    }

    /// Every study that parses and checks (see [`Library::study_files`] for the broken ones).
    pub fn studies(&self) -> Result<Vec<Study>> {
        Ok(self
            .study_files()?
            .into_iter()
            .filter_map(|f| f.study.ok())
            .collect())
    }

    /// The studies `which` names (`all`, or one study's name) and the errors of the broken study
    /// files `all` leaves out; a broken study named alone is an error with its own message; an
    /// unknown name lists the known.
    pub fn select(&self, which: &str) -> Result<(Vec<Study>, Vec<String>)> {
        let files = self.study_files()?;
        if which == "all" {
            let mut good = Vec::new();
            let mut broken = Vec::new();
            for f in files {
                match f.study {
                    Ok(s) => good.push(s),
                    Err(e) => broken.push(e),
                }
            }
            if good.is_empty() {
                bail!("no study file checks:\n{}", broken.join("\n"));
            }
            return Ok((good, broken));
        }
        let names: Vec<String> = files.iter().map(|f| f.name.clone()).collect();
        match files.into_iter().find(|f| f.name == which) {
            Some(StudyFile { study: Ok(s), .. }) => Ok((vec![s], Vec::new())),
            Some(StudyFile { study: Err(e), .. }) => bail!("study {which} is broken: {e}"),
            None => bail!("no study {which:?}; studies: {}, or all", names.join(", ")),
        }
    }
}

/// One file of `studies/`, and the study it holds or why it is broken.
#[derive(Debug)]
pub struct StudyFile {
    pub file: PathBuf,
    /// The file's name without `.toml`.
    pub name: String,
    pub study: std::result::Result<Study, String>,
}

/// Keeps only the findings `ids` names (`--finding`): a pack then runs just the scenarios those
/// findings need, and judges just them. Studies left without a finding are dropped. An id that no
/// selected study has is an error listing the ids there are. A finding judged per value (`per`)
/// is named by its own id (every value) or by `id@value`.
pub fn only_findings(studies: Vec<Study>, ids: &[String]) -> Result<Vec<Study>> {
    if ids.is_empty() {
        return Ok(studies);
    }
    let named = |f: &quiclab_verdict::findings::Finding| {
        ids.contains(&f.id) || f.per.as_ref().is_some_and(|p| ids.contains(&p.of))
    };
    let mut known: Vec<&str> = Vec::new();
    for f in studies.iter().flat_map(|s| &s.findings) {
        if let Some(p) = &f.per
            && !known.contains(&p.of.as_str())
        {
            known.push(&p.of);
        }
        known.push(&f.id);
    }
    if let Some(unknown) = ids.iter().find(|id| !known.contains(&id.as_str())) {
        let studies: Vec<&str> = studies.iter().map(|s| s.name.as_str()).collect();
        bail!(
            "--finding {unknown}: no such finding in {}; findings: {}",
            studies.join(", "),
            known.join(", ")
        );
    }
    Ok(studies
        .into_iter()
        .map(|mut s| {
            s.findings.retain(|f| named(f));
            let findings = &s.findings;
            s.explanations
                .retain(|e| findings.iter().any(|f| e.covers(f)));
            s
        })
        .filter(|s| !s.findings.is_empty())
        .collect())
}

/// The scenarios a study's findings and explanations run, each once, in the order they are
/// first named (the findings' first): what is judged and kept as evidence.
pub fn scenarios_of(study: &Study) -> Vec<String> {
    let mut out = pack_scenarios(study, false);
    for s in pack_scenarios(study, true) {
        if !out.contains(&s) {
            out.push(s);
        }
    }
    out
}

/// The scenarios a pack runs: its findings', or with `explain` its explanations' (`quiclab
/// reproduce --explain`: the explanations' runs alone; the findings' are the pack without it,
/// usually committed already).
pub fn pack_scenarios(study: &Study, explain: bool) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let findings = study.findings.iter().filter_map(|f| match &f.judged {
        Judged::Run { scenario, .. } => Some(scenario),
        Judged::NotRunnable { .. } => None,
    });
    let explanations = study.explanations.iter().map(|e| &e.scenario);
    let chosen: Vec<&String> = if explain {
        explanations.collect()
    } else {
        findings.collect()
    };
    for scenario in chosen {
        if !out.contains(scenario) {
            out.push(scenario.clone());
        }
    }
    out
}

/// The stored runs as plain records for the verdict (`quiclab_verdict::study`).
pub fn run_records(runs: &[StoredRun]) -> Vec<RunRecord> {
    quiclab_report::from_store::verdict_records(runs)
}

/// The runs of one results directory as a finding sees them (see
/// `quiclab_verdict::study::run_values`).
pub fn run_values(runs: &[StoredRun], metric: &MetricDef) -> Vec<judge::RunValue> {
    quiclab_verdict::study::run_values(&run_records(runs), metric)
}

/// Judges every finding of `study` from the results directories `dirs` (scenario name → the
/// directory holding its results.sqlite). A scenario without results makes its findings
/// inconclusive, saying so.
///
/// With `lib`, a scenario whose stored text differs from its file in the library says so in the
/// form (the runs were made from another version of the file).
pub fn judge_study(
    study: &Study,
    dirs: &BTreeMap<String, PathBuf>,
    lib: Option<&Library>,
) -> Result<Vec<FindingVerdict>> {
    let scenarios = load_scenarios(study, dirs, lib)?;
    quiclab_verdict::study::judge_study(study, &scenarios, &crate::metric_registry())
        .map_err(anyhow::Error::msg)
}

/// Each scenario of `study` as stored in `dirs` (None: no results): its runs, whether they are
/// its quick form, the form in words, and why a full form is not whole (fewer repetitions or runs
/// than planned), if so. With `lib`, a scenario whose stored text differs from its file says so.
fn load_scenarios(
    study: &Study,
    dirs: &BTreeMap<String, PathBuf>,
    lib: Option<&Library>,
) -> Result<BTreeMap<String, Option<ScenarioRuns>>> {
    let mut runs_by_scenario = BTreeMap::new();
    for scenario in scenarios_of(study) {
        let runs = match dirs.get(&scenario) {
            Some(dir) if dir.join("results.sqlite").is_file() => {
                let store = Store::open(&dir.join("results.sqlite"))?;
                let stored = store.scenario()?;
                if stored.name != scenario && stored.name != format!("{scenario}-quick") {
                    bail!(
                        "{}: holds scenario {:?}, not {scenario:?}",
                        dir.display(),
                        stored.name
                    );
                }
                let runs = store.runs()?;
                let quick = stored.name != scenario;
                let mut form = form_of(quick, &stored.text, &runs);
                let mut part = form.strip_prefix("full, ").map(str::to_string);
                // A full form is whole only when every run the findings judge is there: a shard,
                // or evidence still being gathered, is a part, and says how much of the plan.
                if !quick {
                    let repetitions = store.plan()?.repetitions.or_else(|| {
                        store.sessions().ok()?.iter().find_map(|s| {
                            quiclab_results::merge::repetitions_of(&s.environment.command)
                        })
                    });
                    let planned = judged_keys(study, &scenario, &stored.text, repetitions)
                        .with_context(|| format!("{}", dir.join("results.sqlite").display()))?;
                    let present: std::collections::BTreeSet<&str> =
                        runs.iter().map(|r| r.key.as_str()).collect();
                    let have = planned
                        .iter()
                        .filter(|k| present.contains(k.as_str()))
                        .count();
                    if have < planned.len() && part.is_none() {
                        let of = format!("part: {have} of {} runs", planned.len());
                        form = format!("full, {of}");
                        part = Some(of);
                    }
                }
                let current =
                    lib.and_then(|l| std::fs::read_to_string(l.scenario_path(&scenario)).ok());
                // A comment reworded since is not another version: the values ran are the same.
                if current.is_some_and(|t| !quiclab_experiment::same_experiment(&t, &stored.text)) {
                    form.push_str(", from another version of the scenario file");
                }
                Some(ScenarioRuns {
                    runs: run_records(&runs),
                    quick,
                    form,
                    part,
                })
            }
            _ => None,
        };
        runs_by_scenario.insert(scenario, runs);
    }
    Ok(runs_by_scenario)
}

/// The counts per study, one line each (`panda2019: reproductions: 7 holds, … not shown, …`):
/// "not shown" and "mixed" apart from "does not hold".
pub fn tallies(verdicts: &[FindingVerdict]) -> Vec<String> {
    let mut studies: Vec<&str> = verdicts.iter().map(|v| v.study.as_str()).collect();
    studies.dedup();
    studies
        .into_iter()
        .map(|s| {
            let mine: Vec<&FindingVerdict> = verdicts.iter().filter(|v| v.study == s).collect();
            format!("{s}: {}", quiclab_verdict::outcome::tally(&mine))
        })
        .collect()
}

/// The keys of the runs some finding of `study` judges in `scenario`'s full plan (its stored
/// `text`, at `repetitions` when the pack overrode them); empty when the text does not parse.
fn judged_keys(
    study: &Study,
    scenario: &str,
    text: &str,
    repetitions: Option<u32>,
) -> Result<Vec<String>> {
    let Ok(mut s) = quiclab_experiment::parse(text, "stored scenario") else {
        return Ok(Vec::new());
    };
    if let Some(r) = repetitions {
        // A stored plan is bounded as a command line's is (a damaged or hostile database or
        // evidence file could say 4 294 967 295 repetitions).
        if !(1..=quiclab_experiment::MAX_REPETITIONS).contains(&r) {
            bail!(
                "its plan says {r} repetitions; quiclab plans 1 to {} (the file is damaged)",
                quiclab_experiment::MAX_REPETITIONS
            );
        }
        s.repetitions = r;
    }
    quiclab_experiment::check_plan_size(&s).map_err(|e| anyhow!("its stored plan: {e}"))?;
    Ok(quiclab_experiment::expand(&s)
        .into_iter()
        .filter(|run| study.judges(scenario, &run.params, true))
        .map(|run| run.key)
        .collect())
}

/// The repetitions a stored scenario's text states (0 if it does not parse).
fn planned_repetitions(text: &str) -> u32 {
    quiclab_experiment::parse(text, "stored scenario").map_or(0, |s| s.repetitions)
}

/// `quick`, `full`, or `full, 1 of 5 repetitions` when fewer repetitions ran than the stored
/// scenario states (a quick pack of a scenario without a quick form runs it once).
fn form_of(quick: bool, text: &str, runs: &[StoredRun]) -> String {
    let ran = runs.iter().map(|r| r.repetition).max().unwrap_or(0);
    let planned = planned_repetitions(text);
    match (quick, ran < planned) {
        (true, _) => "quick".into(),
        (false, true) => format!("full, {ran} of {planned} repetitions"),
        (false, false) => "full".into(),
    }
}

/// A study as `quiclab reproduce --list` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct StudyListing {
    pub study: String,
    pub title: String,
    pub findings: Vec<ListedFinding>,
    pub runnable: usize,
    pub scenarios: Vec<String>,
    /// The pack's estimated run time one at a time, quick and full, trimmed to the runs its
    /// findings judge (s).
    pub quick_s: f64,
    pub full_s: f64,
    /// The quick and full forms trimmed to what the findings judge, and the full form's whole
    /// grid (`--whole-grid`), each one at a time and at `--jobs auto`.
    pub quick: PackEstimate,
    pub full: PackEstimate,
    pub whole_grid: PackEstimate,
    /// The explanations' runs, full form (`--explain`).
    pub full_explained: PackEstimate,
    /// The study's explanations (issue 59).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub explanations: Vec<quiclab_verdict::explain::Explanation>,
    /// Why findings have none (`[[no_explanation]]`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub no_explanations: Vec<quiclab_verdict::explain::NoExplanation>,
}

/// One finding as `reproduce --list --json` gives it.
#[derive(Debug, Clone, Serialize)]
pub struct ListedFinding {
    pub id: String,
    pub claim: String,
    pub source: String,
    /// `reproduction` or `calibration`.
    pub class: quiclab_verdict::findings::Class,
    /// The scenario that judges it, or (for a finding quiclab cannot run) why not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scenario: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metric: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_runnable: Option<String>,
}

impl ListedFinding {
    fn of(f: &quiclab_verdict::Finding) -> ListedFinding {
        let (scenario, metric, not_runnable) = match &f.judged {
            Judged::Run {
                scenario, metric, ..
            } => (Some(scenario.clone()), Some(metric.clone()), None),
            Judged::NotRunnable { why } => (None, None, Some(why.clone())),
        };
        ListedFinding {
            id: f.id.clone(),
            claim: f.claim.clone(),
            source: f.source.clone(),
            class: f.class,
            scenario,
            metric,
            not_runnable,
        }
    }
}

/// The listing of `studies` (the estimates with `repetitions` if given).
pub fn listing(
    lib: &Library,
    studies: &[Study],
    repetitions: Option<u32>,
) -> Result<Vec<StudyListing>> {
    let n = studies.len();
    studies
        .iter()
        .enumerate()
        .map(|(i, s)| {
            // Each study's four estimates prepare every run of its packs: seconds each, so a
            // line says what is being counted (stderr: `--json` keeps stdout one document).
            eprintln!(
                "quiclab reproduce --list: estimating {} ({} of {n})",
                s.name,
                i + 1
            );
            let opts = |quick, whole_grid, explain| PackOptions {
                repetitions,
                whole_grid,
                explain,
                ..PackOptions::new(quick)
            };
            let quick = estimate(lib, s, &opts(true, false, false))?;
            let full = estimate(lib, s, &opts(false, false, false))?;
            let whole_grid = estimate(lib, s, &opts(false, true, false))?;
            let full_explained = estimate(lib, s, &opts(false, false, true))?;
            Ok(StudyListing {
                study: s.name.clone(),
                title: s.title.clone(),
                findings: s.findings.iter().map(ListedFinding::of).collect(),
                runnable: s
                    .findings
                    .iter()
                    .filter(|f| matches!(f.judged, Judged::Run { .. }))
                    .count(),
                scenarios: scenarios_of(s),
                quick_s: quick.one_at_a_time_s,
                full_s: full.one_at_a_time_s,
                quick,
                full,
                whole_grid,
                full_explained,
                explanations: s.explanations.clone(),
                no_explanations: s.no_explanations.clone(),
            })
        })
        .collect()
}

impl std::fmt::Display for StudyListing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {} findings ({} runnable) over {}\n  {}",
            self.study,
            self.findings.len(),
            self.runnable,
            self.scenarios.join(", "),
            self.title
        )?;
        let row = |name: &str, e: &PackEstimate| {
            format!(
                "\n  {name:<11} {:>6} runs  ≈ {:>12} one at a time, ≈ {:>12} at --jobs auto",
                e.runs,
                crate::format_duration(e.one_at_a_time_s),
                crate::format_duration(e.auto_s)
            )
        };
        write!(f, "{}", row("quick", &self.quick))?;
        write!(f, "{}", row("full", &self.full))?;
        write!(f, "{}", row("whole grid", &self.whole_grid))?;
        if !self.explanations.is_empty() {
            write!(f, "{}", row("explain", &self.full_explained))?;
        }
        for l in &self.findings {
            let class = match l.class {
                quiclab_verdict::findings::Class::Reproduction => "",
                quiclab_verdict::findings::Class::Calibration => " (calibration)",
            };
            write!(f, "\n  {:<16} {}{class}", l.id, l.claim)?;
        }
        for e in &self.explanations {
            write!(
                f,
                "\n  explanation {} of {} ({}; control {}, in {}): {}",
                e.id,
                e.explains.join(", "),
                quiclab_verdict::explain::values_text(&e.setting),
                quiclab_verdict::explain::values_text(&e.control),
                e.scenario,
                e.hypothesis
            )?;
        }
        for n in &self.no_explanations {
            write!(
                f,
                "\n  explanation of {}: {}",
                n.explains.join(", "),
                n.text()
            )?;
        }
        Ok(())
    }
}

/// How a pack runs.
#[derive(Debug, Clone)]
pub struct PackOptions {
    /// Each scenario's quick form (its `[quick]` table); a scenario without one runs once
    /// (one repetition), and findings that need more pairs come out inconclusive, saying so.
    pub quick: bool,
    /// Override every scenario's repetitions.
    pub repetitions: Option<u32>,
    /// Run only this part of each scenario's plan (`--shard K/N`; the shards' packs are merged
    /// scenario by scenario with `quiclab merge`, then judged with `--judge`).
    pub shard: Option<quiclab_experiment::Shard>,
    pub resume: bool,
    /// How many labs may run at once (`--jobs`).
    pub jobs: crate::cost::Jobs,
    /// Run each scenario's whole grid, not only the runs some finding judges.
    pub whole_grid: bool,
    /// Run the study's explanations instead of its findings (`--explain`): their scenarios,
    /// the runs they judge.
    pub explain: bool,
    /// Add each scenario's judged runs to the evidence in this directory as it finishes
    /// (`--keep-evidence`, [`keep_evidence`]).
    pub keep_evidence: Option<PathBuf>,
}

impl PackOptions {
    /// A pack of `quick` or full form, whole-grid or not, otherwise as run by default.
    pub fn new(quick: bool) -> PackOptions {
        PackOptions {
            quick,
            repetitions: None,
            shard: None,
            resume: false,
            jobs: crate::cost::Jobs::ONE,
            whole_grid: false,
            explain: false,
            keep_evidence: None,
        }
    }
}

/// A scenario of a pack as it would run: its plan (quick or full), trimmed to the runs some
/// finding of `study` judges unless the whole grid is asked for.
fn plan_of(
    lib: &Library,
    study: &Study,
    scenario: &str,
    opts: &PackOptions,
) -> Result<(
    PathBuf,
    quiclab_experiment::Scenario,
    String,
    Vec<quiclab_experiment::RunSpec>,
)> {
    let file = lib.scenario_path(scenario);
    let text = std::fs::read_to_string(&file)
        .with_context(|| format!("reading scenario {}", file.display()))?;
    let has_quick = quiclab_experiment::parse(&text, &file.display().to_string())
        .map_err(|e| anyhow!("{e}"))?
        .quick
        .is_some();
    let repetitions = match (opts.quick, has_quick, opts.repetitions) {
        (_, _, Some(r)) => Some(r),
        (true, false, None) => Some(1),
        _ => None,
    };
    let (s, text, mut plan) = crate::load(&file, repetitions, opts.quick && has_quick)?;
    if !opts.whole_grid {
        plan.retain(|run| study.judges(scenario, &run.params, opts.explain));
    }
    if let Some(shard) = opts.shard {
        plan = quiclab_experiment::shard_of(&plan, shard);
    }
    Ok((file, s, text, plan))
}

/// How long a pack takes: its runs, one at a time and at `--jobs auto` on this machine, each
/// scenario's with the flagged attempts this host ran again for its kind
/// ([`crate::retry_ledger`]).
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct PackEstimate {
    pub runs: usize,
    /// One at a time (s).
    pub one_at_a_time_s: f64,
    /// At `--jobs auto` on this machine, by the reference costs (s).
    pub auto_s: f64,
}

/// The estimated run time of a study's pack: each scenario after the other, each as the
/// runner would start its runs.
pub fn estimate(lib: &Library, study: &Study, opts: &PackOptions) -> Result<PackEstimate> {
    let auto = crate::cost::Jobs::Auto.admission();
    let mut e = PackEstimate::default();
    for scenario in pack_scenarios(study, opts.explain) {
        let (file, s, _, plan) = plan_of(lib, study, &scenario, opts)?;
        let sized = crate::sized(&file, &s, &plan)?;
        // Each with the flagged attempts this host ran again for the kind, alone and at auto.
        let retries = |jobs: crate::cost::Jobs| {
            crate::retry_ledger::measured(s.kind, &jobs.to_string())
                .0
                .scale()
                .unwrap_or(1.0)
        };
        e.runs += plan.len();
        e.one_at_a_time_s +=
            sized.iter().map(|r| r.0).sum::<f64>() * retries(crate::cost::Jobs::ONE);
        e.auto_s += quiclab_experiment::admission::makespan(&sized, &auto)
            * retries(crate::cost::Jobs::Auto);
    }
    Ok(e)
}

/// The estimated run time of a study's pack one at a time, in seconds.
pub fn estimate_s(lib: &Library, study: &Study, opts: &PackOptions) -> Result<f64> {
    Ok(estimate(lib, study, opts)?.one_at_a_time_s)
}

/// Runs a study's pack into `out/SCENARIO/` (each a results directory; with `resume`, the runs
/// already stored are skipped) and returns the directories by scenario. Before each scenario it
/// says where the pack stands: time spent, and the time left by the runs' estimates scaled by
/// how the scenarios so far compared with theirs.
pub fn run_pack(
    lib: &Library,
    study: &Study,
    out: &Path,
    opts: &PackOptions,
    on_hint: &dyn Fn(String),
) -> Result<BTreeMap<String, PathBuf>> {
    let mut dirs = BTreeMap::new();
    let scenarios = pack_scenarios(study, opts.explain);
    if let Some(evidence) = &opts.keep_evidence {
        // The evidence is written after each scenario's runs: a directory quiclab may not write
        // to is refused now, not after an hour of runs (which would stop the pack there).
        let study_dir = evidence.join(&study.name);
        quiclab_outputs::check_writable(evidence, "--keep-evidence")?;
        quiclab_outputs::check_writable(&study_dir, "--keep-evidence")?;
        for scenario in &scenarios {
            quiclab_outputs::check_writable(&study_dir.join(scenario), "--keep-evidence")?;
        }
    }
    let mut planned = Vec::new();
    for scenario in &scenarios {
        let (file, s, text, plan) = plan_of(lib, study, scenario, opts)?;
        // A resumed pack skips the runs already stored: they are neither estimated nor counted.
        let db = out.join(scenario).join("results.sqlite");
        let stored = if opts.resume && db.is_file() {
            Store::open(&db)?.done_keys()?
        } else {
            Default::default()
        };
        // Estimated as the scenario will run: at the pack's --jobs (labs side by side as the
        // admission would take them), not one at a time — at `--jobs auto` that is ≈ 1/6 of it.
        let sized: Vec<(f64, quiclab_experiment::admission::Cost)> =
            crate::dry_run(&file, &s, &plan)?
                .iter()
                .filter(|l| !stored.contains(&l.run.key))
                .map(|l| (l.estimate_s, opts.jobs.effective(l.cost)))
                .collect();
        let todo = sized.len();
        // With the flagged attempts this host ran again for the kind (a new pack measured none).
        let retries = crate::retry_ledger::measured(s.kind, &opts.jobs.to_string())
            .0
            .scale()
            .unwrap_or(1.0);
        let estimate =
            quiclab_experiment::admission::makespan(&sized, &opts.jobs.admission()) * retries;
        planned.push((scenario, file, s, text, plan, todo, estimate));
    }
    let total: f64 = planned.iter().map(|p| p.6).sum();
    let started = std::time::Instant::now();
    let mut estimated_done = 0.0;
    for (i, (scenario, file, s, text, plan, todo, estimate)) in planned.into_iter().enumerate() {
        let dir = out.join(scenario);
        let elapsed = started.elapsed().as_secs_f64();
        // Scale what is left by how long the finished scenarios took against their estimates.
        let pace = if estimated_done > 0.0 {
            elapsed / estimated_done
        } else {
            1.0
        };
        eprintln!(
            "quiclab reproduce: {} — scenario {} of {}: {scenario} ({todo} of {} runs to do, ≈ {}{}); pack: {} spent, ≈ {} left",
            study.name,
            i + 1,
            scenarios.len(),
            plan.len(),
            crate::format_duration(estimate),
            if opts.jobs == crate::cost::Jobs::ONE {
                String::new()
            } else {
                format!(" at --jobs {}", opts.jobs)
            },
            crate::format_duration(elapsed),
            crate::format_duration((total - estimated_done) * pace),
        );
        let resume = if opts.resume && dir.join("results.sqlite").is_file() {
            crate::Resume::Yes
        } else {
            crate::Resume::No
        };
        let mode = crate::Mode {
            resume,
            // A scenario without a [quick] table runs its full form at one repetition.
            quick: opts.quick && s.name.ends_with("-quick"),
            shard: opts.shard,
            jobs: opts.jobs,
            ..Default::default()
        };
        crate::execute(&file, &s, &text, &plan, &dir, mode, on_hint)?;
        if let Some(evidence) = &opts.keep_evidence {
            keep_evidence(study, scenario, &dir, evidence)?;
        }
        estimated_done += estimate;
        dirs.insert(scenario.clone(), dir);
    }
    eprintln!(
        "quiclab reproduce: {} — pack done in {} (estimated {})",
        study.name,
        crate::format_duration(started.elapsed().as_secs_f64()),
        crate::format_duration(total)
    );
    Ok(dirs)
}

/// `path` resolved (links and `..` followed), or, when it does not exist yet, its nearest
/// existing parent resolved with the rest of the path appended.
fn canonical_or_parent(path: &Path) -> Option<PathBuf> {
    if let Ok(p) = std::fs::canonicalize(path) {
        return Some(p);
    }
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    Some(canonical_or_parent(parent)?.join(path.file_name()?))
}

/// The results directories of a judged or run pack: `dir/SCENARIO/` for each scenario that has
/// results there.
pub fn pack_dirs(study: &Study, dir: &Path) -> BTreeMap<String, PathBuf> {
    scenarios_of(study)
        .into_iter()
        .map(|s| {
            let d = dir.join(&s);
            (s, d)
        })
        .filter(|(_, d)| d.join("results.sqlite").is_file())
        .collect()
}

/// Adds the runs of `scenario` in the results directory `dir` that some finding of `study`
/// judges to the evidence in `root` (`root/STUDY/SCENARIO/`, merged with what is there by
/// [`Evidence::add`]'s rules), and says what it added.
pub fn keep_evidence(
    study: &Study,
    scenario: &str,
    dir: &Path,
    root: &Path,
) -> Result<quiclab_results::evidence::Added> {
    use quiclab_results::evidence::Evidence;
    let store = Store::open(&dir.join("results.sqlite"))?;
    let judged = |r: &StoredRun| study.judges(scenario, &r.params, true);
    let (part, left_out) = quiclab_results::evidence::from_store(&store, &judged)?;
    let root = quiclab_outputs::claim_dir(root, "--keep-evidence")?;
    // One addition at a time: two packs that end side by side with the same evidence directory
    // each read, add and write back; unlocked, the later write drops the earlier one's runs.
    // The second waits (its runs are done; refusing would lose them).
    let _lock = quiclab_outputs::lock_dir(&root, "--keep-evidence", true)?;
    let sdir = quiclab_outputs::claim_subdir(&root, &study.name, "--keep-evidence")?;
    let edir = sdir.join(scenario);
    let what = edir.display().to_string();
    let (evidence, mut added) = match edir.join(quiclab_results::evidence::RUNS_FILE).is_file() {
        true => {
            let mut e = Evidence::read(&edir)?;
            let added = e.add(part, &what)?;
            (e, added)
        }
        false => {
            let new = part.runs.len();
            let added = quiclab_results::evidence::Added {
                new,
                ..Default::default()
            };
            (part, added)
        }
    };
    added.left_out = left_out;
    evidence.write(&edir)?;
    eprintln!(
        "quiclab reproduce: evidence {what}: {} runs ({} new, {} already there, {} replaced{})",
        evidence.runs.len(),
        added.new,
        added.same,
        added.replaced.len(),
        match left_out {
            0 => String::new(),
            n => format!("; {n} runs no finding judges left out"),
        }
    );
    for r in &added.replaced {
        eprintln!("quiclab reproduce: evidence {what}: {r}");
    }
    Ok(added)
}

/// The files of the repository `lib` generated from its committed evidence (`evidence/`),
/// judged with today's code: docs/reproductions.md and README.md with their generated parts
/// (the verdict tables, the summary of counts) replaced, and each study's forest plot
/// (docs/figures/reproduction-STUDY.svg). Paths are relative to the repository; nothing is
/// written (a test compares them with the files; `QUICLAB_BLESS=1` writes them).
pub fn generated_docs(lib: &Library) -> Result<Vec<(PathBuf, String)>> {
    use quiclab_report::docs;
    let studies = lib.studies()?;
    let tmp = quiclab_outputs::ScratchDir::new("judge")
        .context("a temporary directory for the evidence")?;
    materialize_evidence(&lib.root.join("evidence"), &studies, tmp.path())?;
    let mut verdicts = Vec::new();
    for s in &studies {
        verdicts.extend(judge_study(
            s,
            &pack_dirs(s, &tmp.path().join(&s.name)),
            Some(lib),
        )?);
    }
    let packs = quiclab_report::reproduction::packs_of(tmp.path(), &verdicts)?;
    let figure = |study: &str| format!("figures/reproduction-{study}.svg");
    let summary = docs::summary(&studies, &verdicts);
    // The sentences of "Reading the verdicts": generated, so that none inverts a direction.
    let mut reading = String::new();
    for s in &studies {
        let part = quiclab_verdict::prose::reading(&s.name, &verdicts);
        if !part.is_empty() {
            reading.push_str(&format!("**{}**\n\n{part}\n", s.name));
        }
    }
    let mut texts: BTreeMap<&str, String> = BTreeMap::new();
    for (file, name, part) in [
        (
            "docs/reproductions.md",
            "verdicts",
            format!(
                "{summary}
{}",
                docs::verdict_sections(&studies, &verdicts, &packs, &figure)
            ),
        ),
        ("docs/reproductions.md", "reading", reading),
        ("README.md", "summary", summary.clone()),
    ] {
        let path = lib.root.join(file);
        let text = match texts.remove(file) {
            Some(t) => t,
            None => std::fs::read_to_string(&path)
                .with_context(|| format!("reading {}", path.display()))?,
        };
        let new = docs::replace_between(&text, name, &part).ok_or_else(|| {
            let (b, e) = docs::markers(name);
            anyhow!(
                "{}: needs the lines {b:?} and {e:?}, once each",
                path.display()
            )
        })?;
        texts.insert(file, new);
    }
    let mut out: Vec<(PathBuf, String)> = texts
        .into_iter()
        .map(|(f, t)| (PathBuf::from(f), t))
        .collect();
    for s in &studies {
        out.push((
            PathBuf::from("docs").join(figure(&s.name)),
            quiclab_report::forest::forest_svg(&s.name, &verdicts),
        ));
        // A rate sweep whose runs measured each end's CPU gets its figure (issue 60).
        for (scenario, runs) in load_scenarios(s, &pack_dirs(s, &tmp.path().join(&s.name)), None)? {
            let Some(runs) = runs else { continue };
            if !runs
                .runs
                .iter()
                .any(|r| r.metrics.contains_key("client_cpu_cores"))
            {
                continue;
            }
            if let Some(svg) = quiclab_report::sweep::sweep_svg(&scenario, &runs.runs) {
                out.push((
                    PathBuf::from(format!("docs/figures/sweep-{scenario}.svg")),
                    svg,
                ));
            }
        }
    }
    Ok(out)
}

/// Rebuilds a results database of every scenario of `studies` the evidence in `root` holds,
/// under `into/STUDY/SCENARIO/results.sqlite`, so that judging and reports read the evidence as
/// they read results.
fn materialize_evidence(root: &Path, studies: &[Study], into: &Path) -> Result<()> {
    for s in studies {
        let wanted = scenarios_of(s);
        for (scenario, dir) in quiclab_results::evidence::scenarios_of(root, &s.name) {
            if !wanted.contains(&scenario) {
                eprintln!(
                    "quiclab reproduce: {}: no finding of {} names scenario {scenario}; not judged",
                    dir.display(),
                    s.name
                );
                continue;
            }
            let evidence = quiclab_results::evidence::Evidence::read(&dir)?;
            let db_dir = into.join(&s.name).join(&scenario);
            std::fs::create_dir_all(&db_dir)?;
            evidence
                .materialize(&db_dir.join("results.sqlite"))
                .with_context(|| format!("rebuilding the results of {}", dir.display()))?;
        }
    }
    Ok(())
}

/// What `quiclab reproduce` wrote.
pub struct Reproduced {
    pub verdicts: Vec<FindingVerdict>,
    pub json: PathBuf,
    pub csv: PathBuf,
    pub html: PathBuf,
}

impl Reproduced {
    /// What `quiclab reproduce` prints: a line per verdict, the tallies per study, the files.
    pub fn text(&self) -> String {
        let mut lines: Vec<String> = self.verdicts.iter().map(|v| v.to_string()).collect();
        lines.extend(tallies(&self.verdicts));
        lines.extend([&self.json, &self.csv, &self.html].map(|p| p.display().to_string()));
        lines.join("\n") + "\n"
    }
}

/// Runs (or with `judge`, only judges) the packs of `studies` and writes the verdicts and
/// reproduction.html. Results are read from, and verdicts written to, one claimed directory
/// (`out_arg`, default quiclab-reproduce); with `judge` DIR and `out_arg` OUT, DIR is only read.
pub fn reproduce(
    lib: &Library,
    studies: &[Study],
    judge: Option<&Path>,
    out_arg: Option<&Path>,
    opts: &PackOptions,
    exit_hint: &dyn Fn(String),
) -> Result<Reproduced> {
    check_directories(judge, out_arg, opts)?;
    // Evidence (evidence/STUDY/SCENARIO/runs.jsonl.gz) is rebuilt into results databases in a
    // temporary directory (`_rebuilt`, removed at the end), judged from there; the evidence is
    // only read.
    let (results, out, _rebuilt) = results_and_out(judge, out_arg, studies, opts)?;
    // One writer per pack directory: a second `reproduce` into it would run (or judge) the same
    // packs and write the same files.
    let _lock = quiclab_outputs::lock_dir(&out, "--out", false)?;
    quiclab_outputs::check_writable(&out, "--out").map_err(|e| match judge {
        Some(_) => {
            anyhow!("{e}; give --out DIR for the verdicts (the judged directory is only read)")
        }
        None => anyhow!("{e}"),
    })?;
    let (verdicts, judged) = run_and_judge(lib, studies, judge, (&results, &out), opts, exit_hint)?;
    if verdicts.is_empty() {
        bail!(
            "no study had results in {}: no verdicts written (earlier ones, if any, are kept)",
            results.display()
        );
    }
    // The report first, then the verdicts as one set: a write that fails (a full disk) leaves
    // the earlier verdicts whole. All four names are checked before either is written.
    quiclab_outputs::check_in_claimed(
        &[
            "verdicts.json",
            "verdicts.csv",
            "verdicts.md",
            "reproduction.html",
        ]
        .map(|n| out.join(n))
        .iter()
        .map(PathBuf::as_path)
        .collect::<Vec<_>>(),
    )?;
    let html = quiclab_report::reproduction::write(
        &results,
        &out,
        &judged,
        &verdicts,
        &crate::metric_registry(),
    )?;
    let (json, csv) = quiclab_report::reproduction::write_verdicts(&out, &verdicts)?;
    Ok(Reproduced {
        verdicts,
        json,
        csv,
        html,
    })
}

/// Before anything runs: `--judge` names a directory, and `--keep-evidence` one of its own that
/// quiclab can write.
fn check_directories(
    judge: Option<&Path>,
    out_arg: Option<&Path>,
    opts: &PackOptions,
) -> Result<()> {
    if let Some(d) = judge
        && !d.is_dir()
    {
        bail!(
            "--judge {}: {}; give a pack's directory (--out of an earlier `quiclab reproduce`) or \
             an evidence directory",
            d.display(),
            if d.exists() {
                "not a directory"
            } else {
                "no such directory"
            }
        );
    }
    if let Some(evidence) = &opts.keep_evidence {
        // Evidence is a directory of its own: beside a pack's results it would be read back as
        // a pack, and a later `--judge` of the pack would read its rebuilt copy.
        let inside = |dir: &Path| match (std::fs::canonicalize(dir), canonical_or_parent(evidence))
        {
            (Ok(d), Some(e)) => e.starts_with(&d),
            _ => false,
        };
        let out_default = Path::new("quiclab-reproduce");
        for (flag, dir) in [
            ("--judge", judge),
            ("--out", Some(out_arg.unwrap_or(out_default))),
        ] {
            if let Some(dir) = dir
                && inside(dir)
            {
                bail!(
                    "--keep-evidence {}: is inside {flag} {}; keep the evidence in a directory of \
                     its own (e.g. evidence/)",
                    evidence.display(),
                    dir.display()
                );
            }
        }
        // Before any run (a pack may take hours): a directory quiclab cannot write is refused now.
        quiclab_outputs::check_writable(evidence, "--keep-evidence")?;
    }
    Ok(())
}

/// Where results are read from and where verdicts and reports are written: the same claimed
/// directory, or with --judge DIR --out OUT, DIR only read and OUT written; evidence is rebuilt
/// into a temporary directory (returned, to be kept while judging).
fn results_and_out(
    judge: Option<&Path>,
    out_arg: Option<&Path>,
    studies: &[Study],
    opts: &PackOptions,
) -> Result<(PathBuf, PathBuf, Option<quiclab_outputs::ScratchDir>)> {
    let rebuilt = match judge {
        Some(d) if quiclab_results::evidence::is_evidence(d) => {
            if opts.keep_evidence.is_some() {
                bail!(
                    "--judge {}: is evidence already; --keep-evidence adds results directories to evidence",
                    d.display()
                );
            }
            let tmp = quiclab_outputs::ScratchDir::new("judge")
                .context("a temporary directory for the evidence")?;
            materialize_evidence(d, studies, tmp.path())?;
            Some(tmp)
        }
        _ => None,
    };
    let (results, out) = match (judge, out_arg) {
        (Some(d), _) if !d.is_dir() => bail!("--judge {}: no such directory", d.display()),
        (Some(_), o) if rebuilt.is_some() => (
            rebuilt
                .as_ref()
                .map(|t| t.path().to_path_buf())
                .unwrap_or_default(),
            quiclab_outputs::claim_dir(
                o.unwrap_or_else(|| Path::new("quiclab-reproduce")),
                "--out",
            )?,
        ),
        (Some(d), Some(o)) => (d.to_path_buf(), quiclab_outputs::claim_dir(o, "--out")?),
        (Some(d), None) if quiclab_outputs::is_claimed(d) => (d.to_path_buf(), d.to_path_buf()),
        (Some(d), None) => bail!(
            "--judge {}: quiclab did not make this directory (it has no quiclab marker), so it \
             writes no verdicts there; give --out DIR for them (DIR is only read)",
            d.display()
        ),
        (None, o) => {
            let o = o.map_or_else(|| PathBuf::from("quiclab-reproduce"), Path::to_path_buf);
            let o = quiclab_outputs::claim_dir(&o, "--out")?;
            (o.clone(), o)
        }
    };
    Ok((results, out, rebuilt))
}

/// Each study's pack run (or, with `judge`, its stored results found, and kept as evidence if
/// asked) and judged: the verdicts, and the studies that had results.
fn run_and_judge(
    lib: &Library,
    studies: &[Study],
    judge: Option<&Path>,
    (results, out): (&Path, &Path),
    opts: &PackOptions,
    exit_hint: &dyn Fn(String),
) -> Result<(Vec<FindingVerdict>, Vec<Study>)> {
    let mut verdicts: Vec<FindingVerdict> = Vec::new();
    let mut judged = Vec::new();
    for s in studies {
        let study_dir = results.join(&s.name);
        let dirs = match judge {
            Some(_) => {
                let dirs = pack_dirs(s, &study_dir);
                if let Some(evidence) = &opts.keep_evidence {
                    for (scenario, dir) in &dirs {
                        keep_evidence(s, scenario, dir, evidence)?;
                    }
                }
                dirs
            }
            None => {
                quiclab_outputs::claim_subdir(out, &s.name, "--out")?;
                run_pack(lib, s, &study_dir, opts, exit_hint)?
            }
        };
        if judge.is_some() && dirs.is_empty() {
            eprintln!(
                "quiclab reproduce: --judge {}: no results of study {} there \
                 ({}/SCENARIO/results.sqlite); not judged",
                results.display(),
                s.name,
                study_dir.display()
            );
            continue;
        }
        verdicts.extend(judge_study(s, &dirs, Some(lib))?);
        judged.push(s.clone());
    }
    Ok((verdicts, judged))
}

#[cfg(test)]
mod tests {
    use super::*;
    use quiclab_results::Status;
    use quiclab_verdict::judge::{Claim, Verdict};
    use quiclab_verdict::rules::{Better, Observed};

    fn stored(proto: &str, rep: u32, status: Status, plt: Option<f64>) -> StoredRun {
        StoredRun {
            params: BTreeMap::from([
                ("protocol".to_string(), proto.to_string()),
                ("loss".to_string(), "0%".to_string()),
            ]),
            metrics: plt
                .map(|v| BTreeMap::from([("plt_ms".to_string(), v)]))
                .unwrap_or_default(),
            ..StoredRun::example(&format!("{proto}-{rep}"), proto, rep, status)
        }
    }

    #[test]
    fn stored_runs_become_values_censored_or_failed() {
        let runs = vec![
            stored("h3", 1, Status::Ok, Some(900.0)),
            stored("h3", 2, Status::Timeout, None),
            stored("h3", 3, Status::Failed, None),
            stored("h3", 4, Status::Ok, None),
        ];
        let values = |def: &MetricDef| -> Vec<Observed> {
            run_values(&runs, def)
                .into_iter()
                .map(|r| r.value)
                .collect()
        };
        // The time limit (60 s) in the metric's unit: 60 000 ms (issue 37: it entered as 60).
        assert_eq!(
            values(&PLT),
            vec![
                Observed::Value(900.0),
                Observed::Censored { at_least: 60_000.0 },
                Observed::Failed,
                // An ok run that did not measure the metric has no value: counted, not zero.
                Observed::Failed,
            ]
        );
        // A metric that is not a time: a timed-out run's value is unknown (no bound), and a
        // metric that declares when it is undefined makes the ok run undefined, not failed.
        let share = MetricDef::higher("plt_ms", "a share", "").undefined_when("nothing dropped");
        let v = values(&share);
        assert!(matches!(v[1], Observed::Censored { at_least } if at_least.is_nan()));
        assert_eq!(v[3], Observed::Undefined);
    }

    const PLT: MetricDef = MetricDef::completion_time("plt_ms", "Page load time", "ms");

    /// Issue 37, §5: a timed-out load entered Megyesi's wins rule with its limit in seconds among
    /// page load times in ms (60 "ms", faster than every real load), so the protocol that timed
    /// out won the setting.
    #[test]
    fn a_timed_out_load_loses_the_wins_rule_in_the_metrics_unit() {
        let mut runs = Vec::new();
        for rep in 1..=10 {
            runs.push(stored("h3", rep, Status::Timeout, None));
            runs.push(stored("h1", rep, Status::Ok, Some(20_000.0)));
        }
        let claim = Claim::WinsShare {
            axis: "protocol".into(),
            a: "h3".into(),
            at_least: 0.5,
        };
        let rule = quiclab_verdict::Rule {
            test: quiclab_verdict::Test::Wins,
            alpha: 0.05,
            min_n: 10,
            min_effect: 0.05,
        };
        let (j, table) = judge::judge_wins(
            &run_values(&runs, &PLT),
            &BTreeMap::new(),
            &claim,
            Better::Lower,
            rule,
        );
        assert_eq!(table[0].label(), "h1", "{table:?}");
        assert_eq!(j.verdict, Verdict::DoesNotHold { reversed: false });
    }

    #[test]
    fn a_study_is_judged_from_its_results_directory() {
        let dir = tempfile::tempdir().unwrap();
        let scenario = quiclab_results::ScenarioRecord {
            name: "s3".into(),
            description: String::new(),
            file: "s3.toml".into(),
            text: "name = \"s3\"\n[workload]\nkind = \"page\"\npage = \"carlucci-small\"\n".into(),
            planned_runs: 12,
        };
        let db = dir.path().join("s3").join("results.sqlite");
        let mut store = Store::create_or_resume(&db, &scenario, false).unwrap();
        store.begin_session(&Default::default()).unwrap();
        for rep in 1..=6 {
            // Repetitions that differ (copies would count once: issue 56).
            let mut a = stored("h3", rep, Status::Ok, Some(800.0 + 20.0 * rep as f64));
            let mut b = stored("h1", rep, Status::Ok, Some(1000.0));
            a.key = format!("a{rep}");
            b.key = format!("b{rep}");
            store.record(&a, &[]).unwrap();
            store.record(&b, &[]).unwrap();
        }
        drop(store);
        let study = findings::parse(
            "study = \"t\"\ntitle = \"t\"\n[[finding]]\nid = \"x\"\nclaim = \"h3 faster\"\nclass = \"reproduction\"\n\
             scenario = \"s3\"\nwhere = { loss = \"0%\" }\nmetric = \"plt_ms\"\n\
             compare = { axis = \"protocol\", a = \"h3\", b = \"h1\" }\nmin_n = 6\n\
             [[finding]]\nid = \"y\"\nclaim = \"elsewhere\"\nclass = \"reproduction\"\nnot_runnable = \"no lab for it\"\n",
            "t.toml",
        )
        .unwrap();
        let v = judge_study(&study, &pack_dirs(&study, dir.path()), None).unwrap();
        assert_eq!(v[0].judgement.verdict, Verdict::Holds);
        assert_eq!(v[0].judgement.counts.pairs, 6);
        assert_eq!(v[0].class, quiclab_verdict::findings::Class::Reproduction);
        assert_eq!(verdict_word(&v[1].judgement.verdict), "not runnable");
        // Without results the finding says so rather than guessing.
        let v = judge_study(&study, &BTreeMap::new(), None).unwrap();
        assert!(
            matches!(&v[0].judgement.verdict, Verdict::Inconclusive { why } if why.contains("no results"))
        );
        let (json, csv) = quiclab_report::reproduction::write_verdicts(dir.path(), &v).unwrap();
        assert!(
            std::fs::read_to_string(json)
                .unwrap()
                .contains("\"inconclusive\"")
        );
        assert_eq!(std::fs::read_to_string(csv).unwrap().lines().count(), 3);
    }

    fn two_studies() -> Vec<Study> {
        let parse = |name: &str, ids: &[&str]| {
            let mut text = format!("study = \"{name}\"\ntitle = \"t\"\n");
            for id in ids {
                text.push_str(&format!(
                    "[[finding]]\nid = \"{id}\"\nclaim = \"c\"\nclass = \"reproduction\"\n\
                     not_runnable = \"why\"\n"
                ));
            }
            findings::parse(&text, "t.toml").unwrap()
        };
        vec![parse("one", &["1-a", "1-b"]), parse("two", &["2-a"])]
    }

    /// A library in a temporary directory: `studies/NAME.toml` for each (name, text), no
    /// scenarios (not_runnable findings need none).
    fn library(files: &[(&str, &str)]) -> (tempfile::TempDir, Library) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("studies")).unwrap();
        std::fs::create_dir(dir.path().join("scenarios")).unwrap();
        for (name, text) in files {
            std::fs::write(
                dir.path().join("studies").join(format!("{name}.toml")),
                text,
            )
            .unwrap();
        }
        let lib = Library::find(Some(dir.path())).unwrap();
        (dir, lib)
    }

    fn study_text(name: &str, id: &str) -> String {
        format!(
            "study = \"{name}\"\ntitle = \"t\"\n[[finding]]\nid = \"{id}\"\nclaim = \"c\"\n\
             class = \"reproduction\"\nnot_runnable = \"why\"\n"
        )
    }

    #[test]
    fn an_evidence_directory_quiclab_may_not_write_to_is_refused_before_any_run() {
        let (_dir, lib) = library(&[("one", &study_text("one", "1-a"))]);
        let study = lib.studies().unwrap().remove(0);
        let foreign = tempfile::tempdir().unwrap();
        std::fs::write(foreign.path().join("notes.txt"), "the user's own").unwrap();
        let out = tempfile::tempdir().unwrap();
        let opts = PackOptions {
            keep_evidence: Some(foreign.path().to_path_buf()),
            ..PackOptions::new(false)
        };
        let e = run_pack(&lib, &study, out.path(), &opts, &|_| {}).unwrap_err();
        assert!(
            format!("{e:#}").contains("--keep-evidence")
                && format!("{e:#}").contains("did not create"),
            "{e:#}"
        );
        assert_eq!(std::fs::read_dir(out.path()).unwrap().count(), 0);
        assert_eq!(std::fs::read_dir(foreign.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_pack_runs_exactly_the_runs_its_findings_judge_unless_asked_for_the_whole_grid() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let lib = Library::find(Some(&root)).unwrap();
        let mut trimmed_somewhere = false;
        for study in lib.studies().unwrap() {
            for scenario in scenarios_of(&study) {
                let whole_opts = PackOptions {
                    whole_grid: true,
                    ..PackOptions::new(false)
                };
                let (_, _, _, whole) = plan_of(&lib, &study, &scenario, &whole_opts).unwrap();
                // Without --explain a pack runs what its findings judge (nothing of a scenario
                // only explanations run); with it, what its explanations judge too.
                for explain in [false, true] {
                    let opts = PackOptions {
                        explain,
                        ..PackOptions::new(false)
                    };
                    if !pack_scenarios(&study, explain).contains(&scenario) {
                        continue;
                    }
                    let (_, _, _, trimmed) = plan_of(&lib, &study, &scenario, &opts).unwrap();
                    let judged: Vec<&str> = whole
                        .iter()
                        .filter(|r| study.judges(&scenario, &r.params, explain))
                        .map(|r| r.key.as_str())
                        .collect();
                    let kept: Vec<&str> = trimmed.iter().map(|r| r.key.as_str()).collect();
                    assert_eq!(kept, judged, "{}: {scenario}", study.name);
                    assert!(
                        !kept.is_empty(),
                        "{}: {scenario} runs nothing (explain: {explain})",
                        study.name
                    );
                    trimmed_somewhere |= kept.len() < whole.len();
                }
            }
        }
        assert!(trimmed_somewhere, "no pack runs less than its whole grid");
    }

    #[test]
    fn a_broken_study_names_itself_and_blocks_no_other() {
        let (_d, lib) = library(&[
            ("good", &study_text("good", "g-1")),
            ("bad", "study = \"bad\"\ntitle = 3\n"),
        ]);
        let (good, broken) = lib.select("all").unwrap();
        assert_eq!(good.len(), 1);
        assert_eq!(good[0].name, "good");
        assert_eq!(broken.len(), 1);
        assert!(
            broken[0].contains("bad.toml:2") && broken[0].contains("key \"title\""),
            "{broken:?}"
        );
        let e = lib.select("bad").unwrap_err().to_string();
        assert!(
            e.contains("study bad is broken") && e.contains("bad.toml"),
            "{e}"
        );
        assert_eq!(lib.select("good").unwrap().0.len(), 1);
    }

    #[test]
    fn study_names_are_their_files_plain_and_ids_unique() {
        // Two files naming one study: the second's name is not its file's.
        let (_d, lib) = library(&[
            ("a", &study_text("a", "x-1")),
            ("b", &study_text("a", "x-2")),
        ]);
        let files = lib.study_files().unwrap();
        let e = files[1].study.as_ref().unwrap_err();
        assert!(e.contains("the file is b.toml"), "{e}");
        // A name that would escape --out.
        for name in ["/abs/path", "../x", "a/b"] {
            let (_d, lib) = library(&[("c", &study_text(name, "y-1"))]);
            let e = lib.study_files().unwrap()[0].study.clone().unwrap_err();
            assert!(e.contains("not a plain name"), "{name}: {e}");
        }
        // An id in two studies.
        let (_d, lib) = library(&[
            ("a", &study_text("a", "same")),
            ("b", &study_text("b", "same")),
        ]);
        let e = lib.study_files().unwrap()[1].study.clone().unwrap_err();
        assert!(e.contains("also a finding of study a"), "{e}");
        // No study at all is an error, not an empty success.
        let (_d, lib) = library(&[]);
        let e = lib.select("all").unwrap_err().to_string();
        assert!(e.contains("no study files"), "{e}");
    }

    #[test]
    fn findings_can_be_picked_and_an_unknown_id_is_named() {
        let ids = |studies: &[Study]| -> Vec<String> {
            studies
                .iter()
                .flat_map(|s| s.findings.iter().map(|f| format!("{}/{}", s.name, f.id)))
                .collect()
        };
        assert_eq!(
            ids(&only_findings(two_studies(), &[]).unwrap()),
            ["one/1-a", "one/1-b", "two/2-a"]
        );
        // A study left without findings is dropped.
        assert_eq!(
            ids(&only_findings(two_studies(), &["1-b".into()]).unwrap()),
            ["one/1-b"]
        );
        let e = only_findings(two_studies(), &["1-a".into(), "9-z".into()])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--finding 9-z") && e.contains("one, two") && e.contains("1-a, 1-b, 2-a"),
            "{e}"
        );
    }

    /// Issue 37, §4: a quick form (or a full form short of its repetitions) prints no verdict:
    /// inconclusive, with its estimate and n, however one-sided its runs.
    #[test]
    fn a_quick_form_or_a_short_full_form_is_an_observation() {
        for (name, text, reps) in [
            (
                "s3-quick",
                "name = \"s3\"\n[workload]\nkind = \"page\"\npage = \"carlucci-small\"\n",
                8,
            ),
            (
                "s3",
                "name = \"s3\"\nrepetitions = 10\n[workload]\nkind = \"page\"\npage = \"carlucci-small\"\n",
                8,
            ),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let scenario = quiclab_results::ScenarioRecord {
                name: name.into(),
                description: String::new(),
                file: "s3.toml".into(),
                text: text.into(),
                planned_runs: 20,
            };
            let db = dir.path().join("s3").join("results.sqlite");
            let mut store = Store::create_or_resume(&db, &scenario, false).unwrap();
            store.begin_session(&Default::default()).unwrap();
            for rep in 1..=reps {
                let mut a = stored("h3", rep, Status::Ok, Some(500.0 + 10.0 * rep as f64));
                let mut b = stored("h1", rep, Status::Ok, Some(1000.0));
                a.key = format!("a{rep}");
                b.key = format!("b{rep}");
                store.record(&a, &[]).unwrap();
                store.record(&b, &[]).unwrap();
            }
            drop(store);
            let study = findings::parse(
                "study = \"t\"\ntitle = \"t\"\n[[finding]]\nid = \"x\"\nclaim = \"h3 faster\"\n\
                 class = \"reproduction\"\nscenario = \"s3\"\nmetric = \"plt_ms\"\n\
                 compare = { axis = \"protocol\", a = \"h3\", b = \"h1\" }\n",
                "t.toml",
            )
            .unwrap();
            let v = judge_study(&study, &pack_dirs(&study, dir.path()), None).unwrap();
            let j = &v[0].judgement;
            assert!(
                matches!(&j.verdict, Verdict::Inconclusive { why }
                    if why.contains("an observation (n = 8), not a verdict")),
                "{name}: {j:?}"
            );
            // The estimate is still shown (h3's 510…580 ms against 1 000 ms).
            let e = j.estimate.as_ref().unwrap();
            assert!(e.median > 0.5 && e.median < 0.6, "{e:?}");
        }
    }

    /// A pack's results kept as evidence and judged from it give the results' verdict; a part
    /// of the plan (a shard) is an observation until the rest is added.
    #[test]
    fn evidence_is_judged_as_its_results_and_a_part_is_an_observation() {
        let text = "name = \"s3\"\nrepetitions = 20\n[workload]\nkind = \"page\"\n\
                    page = \"carlucci-small\"\n[grid]\nprotocol = [\"h1\", \"h3\"]\n";
        let plan = quiclab_experiment::expand(&quiclab_experiment::parse(text, "s3").unwrap());
        let study = findings::parse(
            "study = \"t\"\ntitle = \"t\"\n[[finding]]\nid = \"x\"\nclaim = \"h3 faster\"\n\
             class = \"reproduction\"\nscenario = \"s3\"\nmetric = \"plt_ms\"\n\
             compare = { axis = \"protocol\", a = \"h3\", b = \"h1\" }\n",
            "t.toml",
        )
        .unwrap();
        // Two parts of the plan (like two shards), each its own results directory.
        let results = tempfile::tempdir().unwrap();
        let evidence = tempfile::tempdir().unwrap();
        let verdict_of = |root: &Path| {
            let tmp = tempfile::tempdir().unwrap();
            materialize_evidence(root, std::slice::from_ref(&study), tmp.path()).unwrap();
            judge_study(&study, &pack_dirs(&study, &tmp.path().join("t")), None)
                .unwrap()
                .remove(0)
        };
        for part in 0..2 {
            let dir = results.path().join(format!("part{part}")).join("s3");
            let scenario = quiclab_results::ScenarioRecord {
                name: "s3".into(),
                description: String::new(),
                file: "s3.toml".into(),
                text: text.into(),
                planned_runs: plan.len(),
            };
            let mut store =
                Store::create_or_resume(&dir.join("results.sqlite"), &scenario, false).unwrap();
            store
                .begin_session(&quiclab_results::Environment {
                    git_commit: "0123456789ab".into(),
                    ..Default::default()
                })
                .unwrap();
            // Every run but one (h1's last repetition; one unpaired run of 40 is within the 5 %
            // a verdict tolerates), then that one.
            let last = |spec: &quiclab_experiment::RunSpec| {
                spec.repetition == 20 && spec.params["protocol"] == "h1"
            };
            let mine = |spec: &quiclab_experiment::RunSpec| last(spec) == (part == 1);
            for (i, spec) in plan.iter().enumerate().filter(|(_, spec)| mine(spec)) {
                let plt = if spec.params["protocol"] == "h3" {
                    500.0 + 10.0 * spec.repetition as f64
                } else {
                    1000.0
                };
                let mut r = stored(
                    &spec.params["protocol"],
                    spec.repetition,
                    Status::Ok,
                    Some(plt),
                );
                r.key = spec.key.clone();
                r.index = i;
                r.params = spec.params.clone();
                store.record(&r, &[]).unwrap();
            }
            drop(store);
            keep_evidence(&study, "s3", &dir, evidence.path()).unwrap();
            let v = verdict_of(evidence.path());
            if part == 0 {
                assert_eq!(v.form.as_deref(), Some("full, part: 39 of 40 runs"));
                assert!(
                    matches!(&v.judgement.verdict, Verdict::Inconclusive { why }
                        if why == "part: 39 of 40 runs: an observation (n = 19), not a verdict"),
                    "{:?}",
                    v.judgement
                );
            } else {
                assert_eq!(v.form.as_deref(), Some("full"));
                assert_eq!(v.judgement.verdict, Verdict::Holds);
                assert_eq!(v.judgement.counts.pairs, 20);
            }
        }
        // Judged beside a library whose scenario file was edited since: a reworded comment is
        // the same experiment; a changed value is another version, and the form says so.
        let library = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(library.path().join("scenarios")).unwrap();
        let lib = Library {
            root: library.path().to_path_buf(),
        };
        let form_beside = |file_text: &str| {
            std::fs::write(lib.scenario_path("s3"), file_text).unwrap();
            let tmp = tempfile::tempdir().unwrap();
            materialize_evidence(evidence.path(), std::slice::from_ref(&study), tmp.path())
                .unwrap();
            judge_study(
                &study,
                &pack_dirs(&study, &tmp.path().join("t")),
                Some(&lib),
            )
            .unwrap()
            .remove(0)
            .form
        };
        assert_eq!(
            form_beside(&format!("# what s3 asks, reworded\n{text}")).as_deref(),
            Some("full")
        );
        assert_eq!(
            form_beside(&text.replace("repetitions = 20", "repetitions = 30")).as_deref(),
            Some("full, from another version of the scenario file")
        );
        // The evidence is text in its directory; judging it wrote nothing there.
        let files: Vec<String> = std::fs::read_dir(evidence.path().join("t").join("s3"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| !n.starts_with('.'))
            .collect();
        let mut files = files;
        files.sort();
        assert_eq!(
            files,
            [
                "evidence.json",
                "runs.jsonl.gz",
                "scenario.toml",
                "sessions.jsonl"
            ]
        );
    }

    #[test]
    fn judging_a_directory_of_another_scenario_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let other = quiclab_results::ScenarioRecord {
            name: "s9".into(),
            description: String::new(),
            file: "s9.toml".into(),
            text: "name = \"s9\"\n[workload]\nkind = \"page\"\npage = \"carlucci-small\"\n".into(),
            planned_runs: 2,
        };
        let db = dir.path().join("s3").join("results.sqlite");
        let mut store = Store::create_or_resume(&db, &other, false).unwrap();
        store.begin_session(&Default::default()).unwrap();
        drop(store);
        let study = findings::parse(
            "study = \"t\"\ntitle = \"t\"\n[[finding]]\nid = \"x\"\nclaim = \"h3 faster\"\nclass = \"reproduction\"\n\
             scenario = \"s3\"\nmetric = \"plt_ms\"\n\
             compare = { axis = \"protocol\", a = \"h3\", b = \"h1\" }\n",
            "t.toml",
        )
        .unwrap();
        let e = judge_study(&study, &pack_dirs(&study, dir.path()), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("holds scenario \"s9\", not \"s3\""), "{e}");
    }
}
