//! The experiment runner: a scenario's grid, run by run, each in a fresh lab, into
//! `DIR/results.sqlite`.
//!
//! The plan (order, identities, seeds) comes from the sans-IO `quiclab-experiment`; this crate is
//! the shell around it: it validates every run before the first starts ([`prepare`]), executes
//! them one at a time through `quiclab-workload`, commits each the moment it ends (ingestion:
//! declared metrics, fidelity flags ([`fidelity`]), time series ([`series`]), the environment
//! ([`environment`])), shows progress, and on resume skips the runs already stored.
//! `quiclab run`, `quiclab demo` and `quiclab bench runner` ([`bench`]) drive it.

pub mod bench;
pub mod command;
pub mod cost;
pub mod demo;
pub mod environment;
pub mod equivalence;
pub mod fidelity;
pub mod grid;
pub mod link_bench;
pub mod noise_bench;
pub mod players_bench;
pub mod prepare;
pub mod reproduce;
pub mod retry_ledger;
pub mod series;
pub mod shards;
pub mod storms;

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, anyhow};
use quiclab_experiment::{MetricDef, RunSpec, Scenario, TraceRuns};
use quiclab_results::{Series, StoredRun};
use quiclab_workload::{RunDocument, WorkloadOutput};

pub use grid::execute;
pub use prepare::{PreparedRun, Preparer};
use quiclab_model::runner_metrics::{
    HOST_STEAL, LAB_CPU_CORES, LAB_PAUSE_LONGEST_MS, LAB_PAUSED_SHARE, LABS_IN_FLIGHT, SETUP_MS,
    TEARDOWN_MS,
};

/// What a finished (or interrupted) `run` did (`quiclab run --json` prints it).
#[derive(Debug, Clone, serde::Serialize)]
pub struct RunOutcome {
    pub out: PathBuf,
    pub ran: usize,
    pub failed: usize,
    /// Runs still flagged after their last attempt.
    pub flagged: usize,
    /// Attempts run again because they were flagged.
    pub retries: usize,
    /// Time the runner spent on its own work between runs (preparing runs, committing results).
    pub bookkeeping_s: f64,
    /// Time waited before runs for the host to be quiet (crate::storms).
    pub waited_s: f64,
}

/// How many times a flagged run is run again when neither the scenario (`retry_flagged`) nor the
/// command line (`--retry-flagged`) says.
pub const DEFAULT_RETRY_FLAGGED: u32 = 2;

/// Fault injection for tests of the retry path: with `QUICLAB_FAULT_FLAG_ATTEMPTS=N`, attempts
/// 1 to N of every run get a flag saying so (stored like any flag, so a database made this way
/// shows it). Real fidelity problems cannot be produced on demand.
pub const FAULT_FLAG_ENV: &str = "QUICLAB_FAULT_FLAG_ATTEMPTS";

fn injected_flag(attempt: u32) -> Option<String> {
    let n: u32 = std::env::var(FAULT_FLAG_ENV).ok()?.parse().ok()?;
    (attempt <= n).then(|| format!("fault injection: {FAULT_FLAG_ENV}={n} flags attempts 1 to {n}"))
}

/// `quiclab-results/<name>` (`<name>-shard-K-of-N` for a shard: each shard writes its own
/// directory, merged by `quiclab merge`).
pub fn default_out(scenario: &Scenario, shard: Option<quiclab_experiment::Shard>) -> PathBuf {
    let mut safe: String = scenario
        .name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    if let Some(s) = shard {
        safe.push_str(&format!("-shard-{}-of-{}", s.k, s.n));
    }
    Path::new("quiclab-results").join(safe)
}

/// Reads, overrides and validates a scenario: every run is prepared once (and dropped) so that a
/// bad value in the 900th run is an error before the first run starts.
pub fn load(
    file: &Path,
    repetitions: Option<u32>,
    quick: bool,
) -> Result<(Scenario, String, Vec<RunSpec>)> {
    let (scenario, text) = load_scenario(file, repetitions, quick)?;
    let plan = prepare_plan(file, &scenario)?;
    Ok((scenario, text, plan))
}

/// The plan of a loaded scenario, every run prepared once (and dropped) so that a bad value in
/// the 900th run is an error before the first run starts.
pub fn prepare_plan(file: &Path, scenario: &Scenario) -> Result<Vec<RunSpec>> {
    let plan = quiclab_experiment::expand(scenario);
    let preparer = Preparer::new(scenario, file);
    for run in &plan {
        preparer.prepare(run)?;
    }
    Ok(plan)
}

/// Reads a scenario with its form and repetitions, and counts its plan against the bound, without
/// building the plan.
pub fn load_scenario(
    file: &Path,
    repetitions: Option<u32>,
    quick: bool,
) -> Result<(Scenario, String)> {
    let text = std::fs::read_to_string(file)
        .with_context(|| format!("reading scenario {}", file.display()))?;
    let mut scenario = quiclab_experiment::parse(&text, &file.display().to_string())
        .map_err(|e| anyhow!("{e}"))?;
    if quick {
        scenario = scenario
            .quick_form(&file.display().to_string())
            .map_err(|e| anyhow!("{e}"))?;
    }
    if let Some(r) = repetitions {
        scenario.repetitions = r;
    }
    // Counted before it is built: a grid over the bound is refused naming its axes.
    quiclab_experiment::check_plan_size(&scenario)
        .map_err(|e| anyhow!("{}: {e}", file.display()))?;
    Ok((scenario, text))
}

/// `42 s`, `3 min 05 s`, `1 h 20 min`.
pub fn format_duration(s: f64) -> String {
    let s = s.round() as u64;
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min {:02} s", s / 60, s % 60),
        _ => format!("{} h {:02} min", s / 3600, s % 3600 / 60),
    }
}

/// One line of a dry run: a run of the plan and its estimated duration in seconds.
pub struct DryRunLine<'a> {
    pub run: &'a RunSpec,
    pub estimate_s: f64,
    /// What it is expected to cost the machine (the reference figures: a dry run reads no
    /// results).
    pub cost: quiclab_experiment::admission::Cost,
    /// The run's time limit in seconds.
    pub limit_s: f64,
}

/// The plan's runs with their estimates (for `--dry-run`); errors as [`load`]'s.
pub fn dry_run<'a>(
    file: &Path,
    scenario: &Scenario,
    plan: &'a [RunSpec],
) -> Result<Vec<DryRunLine<'a>>> {
    let preparer = Preparer::new(scenario, file);
    plan.iter()
        .map(|run| {
            let prepared = preparer.prepare(run)?;
            Ok(DryRunLine {
                run,
                estimate_s: prepared.estimate_seconds(),
                cost: reference_cost(&prepared),
                limit_s: prepared.time_limit().as_secs_f64(),
            })
        })
        .collect()
}

/// What a run is expected to cost by the reference figures ([`cost::CostClass::reference_cores`]).
fn reference_cost(prepared: &PreparedRun) -> quiclab_experiment::admission::Cost {
    cost::CostTable::default()
        .cost(cost::CostClass::of(prepared))
        .0
}

/// Each run of `plan` as its estimated seconds and its expected cost (by the reference
/// figures), in plan order: what [`quiclab_experiment::admission::makespan`] takes.
pub fn sized(
    file: &Path,
    scenario: &Scenario,
    plan: &[RunSpec],
) -> Result<Vec<(f64, quiclab_experiment::admission::Cost)>> {
    Ok(dry_run(file, scenario, plan)?
        .into_iter()
        .map(|l| (l.estimate_s, l.cost))
        .collect())
}

/// [`dry_run`] streamed: each run of the plan (of `shard`, when given) is built, prepared,
/// given to `f` and dropped, so a large plan is listed without being held. `f` returns false to
/// stop.
pub fn dry_run_each(
    file: &Path,
    scenario: &Scenario,
    shard: Option<quiclab_experiment::Shard>,
    mut f: impl FnMut(DryRunLine<'_>) -> bool,
) -> Result<()> {
    let preparer = Preparer::new(scenario, file);
    let mut filter = shard.map(quiclab_experiment::ShardFilter::new);
    let mut failed = None;
    quiclab_experiment::for_each_run(scenario, |run| {
        if filter.as_mut().is_some_and(|fl| !fl.keeps(&run)) {
            return true;
        }
        match preparer.prepare(&run) {
            Ok(prepared) => f(DryRunLine {
                run: &run,
                estimate_s: prepared.estimate_seconds(),
                cost: reference_cost(&prepared),
                limit_s: prepared.time_limit().as_secs_f64(),
            }),
            Err(e) => {
                failed = Some(e);
                false
            }
        }
    });
    failed.map_or(Ok(()), Err)
}

/// Writes `quiclab run FILE --dry-run`'s listing of `scenario`'s plan (of `shard`, when given) to
/// `w`, streamed: a header counted in a first pass, then each run as it is built and estimated,
/// the slowest run, runs with too little time-limit headroom, and the estimated total into
/// `out`.
pub fn write_dry_run(
    w: &mut impl std::io::Write,
    file: &Path,
    scenario: &Scenario,
    shard: Option<quiclab_experiment::Shard>,
    out: &Path,
) -> Result<()> {
    // A first pass counts the plan for the header (runs are built one at a time and dropped).
    let (mut runs, mut settings) = (0usize, 0usize);
    let mut filter = shard.map(quiclab_experiment::ShardFilter::new);
    quiclab_experiment::for_each_run(scenario, |r| {
        if filter.as_mut().is_none_or(|f| f.keeps(&r)) {
            runs += 1;
            settings = settings.max(r.setting + 1);
        }
        true
    });
    writeln!(
        w,
        "{}: {runs} run(s) = {settings} setting(s) × {} repetition(s) × contenders, order {:?}",
        file.display(),
        scenario.repetitions,
        scenario.order
    )?;
    writeln!(
        w,
        "{:>5}  {:>20}  {:>8}  {:>8}  key",
        "run", "seed", "≈ s", "limit s"
    )?;
    let mut total = 0.0;
    // The slowest run (key, estimate, limit), and the runs whose limit leaves too little headroom:
    // transfers run longer than their estimate under loss; timed runs (video, flows for a
    // duration) as long as it.
    let mut slowest: Option<(String, f64, f64)> = None;
    let mut tight: (usize, Option<String>) = (0, None);
    let mut written = Ok(());
    let mut sized = Vec::new();
    dry_run_each(file, scenario, shard, |l| {
        total += l.estimate_s;
        sized.push((l.estimate_s, l.cost));
        if slowest.as_ref().is_none_or(|s| l.estimate_s >= s.1) {
            slowest = Some((l.run.key.clone(), l.estimate_s, l.limit_s));
        }
        if l.limit_s < l.estimate_s * 1.2 + 20.0 {
            tight.0 += 1;
            tight.1.get_or_insert_with(|| l.run.key.clone());
        }
        written = writeln!(
            w,
            "{:>5}  {:>20}  {:>8.1}  {:>8.0}  {}",
            l.run.index, l.run.seed, l.estimate_s, l.limit_s, l.run.key
        );
        written.is_ok()
    })?;
    written?;
    if let Some((key, estimate, limit)) = &slowest {
        writeln!(
            w,
            "slowest run: {key} ≈ {estimate:.0} s, time limit {limit:.0} s{} (a run past its limit \
             is stored as timed out and reported as censored)",
            if scenario.timeout.is_some() {
                " (the scenario's timeout)"
            } else {
                " (derived from the run's bytes and the link; set timeout = \"…\" to override)"
            }
        )?;
    }
    if let (n, Some(first)) = &tight {
        writeln!(
            w,
            "warning: {n} run(s) have a time limit under 1.2 × their estimate + 20 s (first: \
             {first}); raise timeout"
        )?;
    }
    writeln!(
        w,
        "a run flagged for emulator fidelity runs again up to {} time(s) (retry_flagged)",
        scenario.retry_flagged.unwrap_or(DEFAULT_RETRY_FLAGGED)
    )?;
    let auto = cost::Jobs::Auto.admission();
    writeln!(
        w,
        "estimated total: {} one at a time, ≈ {} at --jobs auto ({}; by the reference CPU \
         figures of docs/scale.md) (lab set-up, handshakes and transfers at the link rate or the \
         loss-limited rate; an estimate) → {}",
        format_duration(total),
        format_duration(quiclab_experiment::admission::makespan(&sized, &auto)),
        describe_admission(&auto),
        out.join("results.sqlite").display()
    )?;
    Ok(())
}

/// [`write_dry_run`] to stdout, streamed: a reader that stops early (`| head`) closes the pipe,
/// which ends the listing quietly.
pub fn print_dry_run(
    file: &Path,
    scenario: &Scenario,
    shard: Option<quiclab_experiment::Shard>,
    out: &Path,
) -> Result<()> {
    let mut w = std::io::stdout().lock();
    match write_dry_run(&mut w, file, scenario, shard, out) {
        Err(e)
            if e.downcast_ref::<std::io::Error>()
                .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe) =>
        {
            Ok(())
        }
        r => r,
    }
}

/// Whether a run continues a results database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resume {
    No,
    Yes,
    /// Resume, and run the stored failed/timed-out runs again.
    RetryFailed,
}

impl Resume {
    /// Continue what `dir` already holds (a benchmark's side interrupted earlier), else start.
    pub fn if_stored(dir: &Path) -> Resume {
        match dir.join("results.sqlite").is_file() {
            true => Resume::Yes,
            false => Resume::No,
        }
    }

    /// From a command's `--resume` and `--retry-failed` (which implies resuming).
    pub fn from_flags(resume: bool, retry_failed: bool) -> Resume {
        match (resume, retry_failed) {
            (_, true) => Resume::RetryFailed,
            (true, false) => Resume::Yes,
            (false, false) => Resume::No,
        }
    }
}

/// How an invocation runs a plan: whether it resumes, and which form of the scenario's plan it
/// is (recorded in the database, so that a resumed or merged run cannot mix two plans).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mode {
    pub resume: Resume,
    pub quick: bool,
    pub shard: Option<quiclab_experiment::Shard>,
    /// How many labs may run at once.
    pub jobs: cost::Jobs,
    /// Wait out host noise before a run (crate::storms); off only where a benchmark wants the
    /// noise to reach the runs.
    pub wait_out_noise: bool,
    /// End with the commands that show the results (`quiclab run` without `--report`).
    pub point_to_report: bool,
}

impl Default for Mode {
    fn default() -> Mode {
        Mode {
            resume: Resume::No,
            quick: false,
            shard: None,
            jobs: cost::Jobs::ONE,
            wait_out_noise: true,
            point_to_report: false,
        }
    }
}

/// What `quiclab run FILE` asks for: its flags as values.
#[derive(Debug, Clone, Default)]
pub struct RunRequest {
    pub file: PathBuf,
    /// None: quiclab-results/<name> ([`default_out`]).
    pub out: Option<PathBuf>,
    pub resume: bool,
    pub retry_failed: bool,
    /// List the runs and the estimate, run nothing.
    pub dry_run: bool,
    /// Overrides the scenario's `retry_flagged`.
    pub retry_flagged: Option<u32>,
    pub repetitions: Option<u32>,
    pub quick: bool,
    pub shard: Option<quiclab_experiment::Shard>,
    /// None: one lab at a time.
    pub jobs: Option<cost::Jobs>,
    /// End with the commands that show the results (no report is written at the end).
    pub point_to_report: bool,
}

/// `quiclab run`: loads the scenario, and lists the plan (a dry run: None) or runs it (the
/// outcome; progress and the summary on stderr).
pub fn run_file(r: &RunRequest, exit_hint: &dyn Fn(String)) -> Result<Option<RunOutcome>> {
    let (mut scenario, text) = load_scenario(&r.file, r.repetitions, r.quick)?;
    if let Some(n) = r.retry_flagged {
        scenario.retry_flagged = Some(n);
    }
    let out = r
        .out
        .clone()
        .unwrap_or_else(|| default_out(&scenario, r.shard));
    if r.dry_run {
        print_dry_run(&r.file, &scenario, r.shard, &out)?;
        return Ok(None);
    }
    let plan = prepare_plan(&r.file, &scenario)?;
    let plan = match r.shard {
        Some(shard) => quiclab_experiment::shard_of(&plan, shard),
        None => plan,
    };
    let mode = Mode {
        resume: Resume::from_flags(r.resume, r.retry_failed),
        quick: r.quick,
        shard: r.shard,
        jobs: r.jobs.unwrap_or(cost::Jobs::ONE),
        point_to_report: r.point_to_report,
        ..Default::default()
    };
    execute(&r.file, &scenario, &text, &plan, &out, mode, exit_hint).map(Some)
}

/// For `report` and `export`, which write into the results directory `dir`: its lock, and a
/// write a killed process left unfinished rolled back, said on stderr
/// (`quiclab_results::lock_and_recover`).
/// The report of results directory `dir` as `choice` asks, written under its lock (its notes
/// in the output, for the caller to print).
pub fn report_results(
    dir: &Path,
    choice: &quiclab_report::from_store::ReportChoice,
) -> Result<quiclab_report::ReportOutput> {
    let _lock = lock_results_dir(dir)?;
    quiclab_report::from_store::write_report(dir, choice, &metric_registry())
}

/// runs.csv and series.csv of results directory `dir`, into `to` (default `dir`). Read-only: the
/// database is never changed (an older schema is read through a copy); the files replace only
/// quiclab's own (`to` new, empty or claimed by quiclab).
pub fn export_results(dir: &Path, to: Option<&Path>) -> Result<quiclab_results::ExportSummary> {
    let _lock = lock_results_dir(dir)?;
    let store = quiclab_results::Store::open(&dir.join("results.sqlite"))?;
    quiclab_results::export_csv(&store, to.unwrap_or(dir))
}

pub fn lock_results_dir(dir: &Path) -> Result<Option<quiclab_outputs::DirLock>> {
    let (lock, recovered) = quiclab_results::lock_and_recover(dir)?;
    if recovered {
        eprintln!(
            "quiclab: {}: rolled back a write that a quiclab process left unfinished (killed, or \
             a full disk); the runs stored before it are all there",
            dir.join("results.sqlite").display()
        );
    }
    Ok(lock)
}

/// A run in flight: what it was expected to cost, its attempt, and the most labs that ran at
/// once while it did (itself included).
struct InFlight {
    cost: quiclab_experiment::admission::Cost,
    class: cost::CostClass,
    attempt: u32,
    labs: usize,
}

/// What a run's thread hands back: the run as stored, and its time series.
type Executed = (StoredRun<WorkloadOutput>, Vec<Series>);

/// `budget 1.0 of 2 cores, at most 4 labs`.
pub fn describe_admission(a: &quiclab_experiment::admission::Admission) -> String {
    if a.budget_cores.is_finite() {
        format!(
            "expected CPU within {:.1} of {} cores, at most {} labs",
            a.budget_cores,
            cost::cores(),
            a.max_in_flight
        )
    } else {
        format!("at most {} labs", a.max_in_flight)
    }
}

/// Where a run's trace and capture go, if the scenario keeps them for it.
fn run_outputs(
    scenario: &Scenario,
    run: &RunSpec,
    out: &Path,
) -> Result<(Option<PathBuf>, Option<quiclab_lab::capture::CaptureConfig>)> {
    let kept = |which: TraceRuns| match which {
        TraceRuns::All => true,
        TraceRuns::First => run.repetition == 1,
        TraceRuns::None => false,
    };
    let trace_dir = match kept(scenario.trace) {
        true => Some(
            quiclab_outputs::claim_subdir(out, "traces", "--out")?
                .join(format!("run-{:05}", run.index)),
        ),
        false => None,
    };
    // In the results directory quiclab claimed: its own file, replaced by a later attempt.
    let capture = match kept(scenario.pcap) {
        true => {
            quiclab_outputs::claim_subdir(out, "captures", "--out")?;
            Some(quiclab_lab::capture::CaptureConfig {
                force: true,
                ..quiclab_lab::capture::CaptureConfig::new(
                    out.join("captures")
                        .join(format!("run-{:05}.pcapng", run.index)),
                )
            })
        }
        false => None,
    };
    Ok((trace_dir, capture))
}

fn now_unix() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

pub use quiclab_model::runner_metrics::RUNNER_METRICS;

/// Every metric a results database can hold: the workloads', the emulator's and the runner's.
pub fn metric_registry() -> Vec<MetricDef> {
    let mut r = quiclab_workload::registry();
    r.extend_from_slice(RUNNER_METRICS);
    r
}

/// The runner's own open file descriptors and resident memory (kB): recorded with every run so a
/// leak across a long grid shows as a trend (`quiclab bench runner`).
pub fn own_resources() -> (f64, f64) {
    let fds = std::fs::read_dir("/proc/self/fd").map_or(f64::NAN, |d| d.count() as f64);
    let rss_kb = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(f64::NAN);
    (fds, rss_kb)
}

/// A run's row before it ran: its identity, and a document saying it produced nothing.
fn stored_shell(
    scenario: &Scenario,
    run: &RunSpec,
    prepared: &PreparedRun,
) -> StoredRun<WorkloadOutput> {
    StoredRun {
        key: run.key.clone(),
        index: run.index,
        setting: run.setting,
        setting_label: prepare::setting_label(scenario, run),
        contender: prepared.contender(),
        repetition: run.repetition,
        seed: prepared.spec.seed,
        params: run.params.clone(),
        flags: Vec::new(),
        started_unix: now_unix(),
        duration_s: 0.0,
        setup_ms: None,
        teardown_ms: None,
        host_steal: None,
        session_id: 0,
        document: RunDocument::Failed {
            reason: "the run ended before it produced anything".into(),
            partial: None,
        },
        metrics: BTreeMap::new(),
        attempt: 1,
    }
}

/// Executes one run in a fresh lab; never fails: a failure is a run with status failed/timeout.
fn execute_one(
    scenario: &Scenario,
    run: &RunSpec,
    prepared: &PreparedRun,
    trace_dir: Option<PathBuf>,
    capture: Option<quiclab_lab::capture::CaptureConfig>,
) -> Executed {
    let cpu = quiclab_lab::host::CpuMeter::start();
    let t0 = Instant::now();
    let mut stored = stored_shell(scenario, run, prepared);
    let mut series = Vec::new();
    let lab = quiclab_workload::harness::start_lab(
        &prepared.link,
        &prepared.spec,
        trace_dir.as_deref(),
        capture,
    );
    let setup_ms = t0.elapsed().as_secs_f64() * 1e3;
    stored.setup_ms = Some(setup_ms);
    let mut running = match lab {
        Ok(l) => l,
        Err(e) => {
            stored.document = RunDocument::Failed {
                reason: format!("setting up the lab: {e:#}"),
                partial: None,
            };
            stored.duration_s = t0.elapsed().as_secs_f64();
            return (stored, series);
        }
    };
    let work_start = Instant::now();
    let result = prepared.work.run(&mut running, trace_dir.as_deref());
    let t1 = Instant::now();
    // The pauses that fell in the workload's own time (set-up and teardown measure nothing).
    let pauses = quiclab_lab::host::PauseWatch::global().map(|w| w.between(work_start, t1));
    drop(running);
    let teardown_ms = t1.elapsed().as_secs_f64() * 1e3;
    stored.teardown_ms = Some(teardown_ms);
    stored.duration_s = t0.elapsed().as_secs_f64();
    let cpu = cpu.finish();
    // Unknown is not zero: a steal that could not be read is NULL.
    let host_steal = cpu.map(|c| c.steal);
    stored.host_steal = host_steal;
    let (fds, rss_kb) = own_resources();
    let runner_values = [
        (SETUP_MS.name, Some(setup_ms)),
        (TEARDOWN_MS.name, Some(teardown_ms)),
        (HOST_STEAL.name, host_steal),
        (LAB_PAUSED_SHARE.name, pauses.map(|p| p.share())),
        (LAB_PAUSE_LONGEST_MS.name, pauses.map(|p| p.longest_s * 1e3)),
        ("host_busy", cpu.map(|c| c.host_busy)),
        (LAB_CPU_CORES.name, cpu.map(|c| c.lab_cores)),
        ("runner_fds", Some(fds)),
        ("runner_rss_kb", Some(rss_kb)),
    ];
    match result {
        Ok(output) => {
            if let Some(f) = &output.fidelity {
                stored.flags = fidelity::flags(&prepared.spec, f, pauses.as_ref());
            }
            let result = output.result;
            // A player or flow stopped by the time limit is censored data, kept with what it
            // measured until then and the limit it hit.
            stored.document = match output.failure {
                None => RunDocument::Finished { result },
                Some(failure) => RunDocument::of_error(&failure, Some(result)),
            };
            for note in &output.notes {
                eprintln!("quiclab run: {}: {note}", run.key);
            }
            stored.metrics = output.metrics;
            stored
                .metrics
                .extend(quiclab_workload::collect_metrics(runner_values));
            if let Some(dir) = &trace_dir {
                // The workload's own series (per-flow throughput and cwnd) replace the busiest
                // connection's cwnd that the files give.
                let own = !output.series.is_empty();
                series = read_series(&run.key, dir, &prepared.spec, !own);
                series.extend(output.series.into_iter().map(|s| Series {
                    run_key: run.key.clone(),
                    name: s.name,
                    unit: s.unit,
                    points: s.points,
                }));
            }
        }
        Err(e) => {
            // A timed-out run took at least this long: reports treat it as censored.
            stored.document = RunDocument::of_error(&e, None);
            stored.metrics = quiclab_workload::collect_metrics(runner_values);
        }
    }
    (stored, series)
}

/// The time series of a traced run. A missing or unreadable packet log gives no queue series and
/// says so on stderr (the run's measurement does not depend on it; the trace is incomplete).
pub(crate) fn read_series(
    key: &str,
    dir: &Path,
    spec: &quiclab_lab::LinkSpec,
    with_cwnd: bool,
) -> Vec<Series> {
    let mut out = Vec::new();
    let log = std::fs::read_to_string(dir.join("link.log")).unwrap_or_else(|e| {
        eprintln!(
            "quiclab run: {key}: traced, but its packet log {} could not be read ({e}): no queue \
             or cwnd series for this run",
            dir.join("link.log").display()
        );
        String::new()
    });
    let epoch = quiclab_lab::packet_log::epoch_monotonic_ns(&log);
    if let (true, Some(epoch), Ok(csv)) = (
        with_cwnd,
        epoch,
        std::fs::read_to_string(dir.join("cwnd.csv")),
    ) {
        out.extend(series::cwnd_series(key, &csv, epoch));
    }
    // The emulator holds each packet for the configured delay less the TUN compensation.
    let delay_us = spec
        .downlink
        .base_delay()
        .saturating_sub(spec.tun_compensation) as f64
        / 1e3;
    out.extend(series::queue_series(key, &log, delay_us));
    out
}

/// The progress bar (a line per run when stderr is not a terminal, e.g. in CI logs): the runs
/// in flight, and the time left learned from the runs done so far at this concurrency.
struct Progress {
    bar: Option<indicatif::ProgressBar>,
    /// Each run's estimate, by its place in the to-do list.
    estimates: Vec<f64>,
    done: std::cell::Cell<u64>,
    /// The estimates of the finished runs, summed.
    estimated_done: std::cell::Cell<f64>,
    in_flight: std::cell::RefCell<Vec<String>>,
    started: Instant,
    /// Shown with each finished run.
    headline: MetricDef,
}

impl Progress {
    fn new(estimates: Vec<f64>, headline: MetricDef) -> Progress {
        let total = estimates.len() as u64;
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = indicatif::ProgressBar::new(total);
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "{bar:30} {pos}/{len} runs, {elapsed} elapsed  {msg}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            bar
        });
        Progress {
            bar,
            estimates,
            done: std::cell::Cell::new(0),
            estimated_done: std::cell::Cell::new(0.0),
            in_flight: std::cell::RefCell::new(Vec::new()),
            started: Instant::now(),
            headline,
        }
    }

    /// The time left: the estimates of the runs not finished, scaled by how long the finished
    /// ones took (wall time, so the concurrency they ran at is in it) against their estimates.
    /// None before the first run ends.
    fn time_left(&self) -> Option<f64> {
        let done = self.estimated_done.get();
        (done > 0.0).then(|| {
            let total: f64 = self.estimates.iter().sum();
            (total - done).max(0.0) * self.started.elapsed().as_secs_f64() / done
        })
    }

    fn message(&self) -> String {
        let flying = self.in_flight.borrow();
        let left = self.time_left().map_or(String::new(), |s| {
            format!("≈ {} left; ", format_duration(s))
        });
        match flying.len() {
            0 => left,
            1 => format!("{left}{}", flying[0]),
            n => format!("{left}{n} in flight: {}", flying.join(", ")),
        }
    }

    fn start(&self, key: &str, _in_flight: usize) {
        self.in_flight.borrow_mut().push(key.to_string());
        if let Some(b) = &self.bar {
            b.set_message(self.message());
        }
    }

    fn finish_one<R>(&self, i: usize, run: &StoredRun<R>, in_flight: usize) {
        self.done.set(self.done.get() + 1);
        self.estimated_done
            .set(self.estimated_done.get() + self.estimates.get(i).copied().unwrap_or(0.0));
        self.in_flight.borrow_mut().retain(|k| k != &run.key);
        // The workload's headline metric, as it declares it.
        let h = &self.headline;
        let headline = run.metrics.get(h.name).map_or(String::new(), |v| {
            let digits = if v.abs() >= 100.0 { 0 } else { 2 };
            format!(" {} {v:.digits$} {}", h.name, h.unit)
        });
        let line = format!(
            "[{}/{}] {} {}{}{headline}{}{}{}",
            self.done.get(),
            self.estimates.len(),
            run.key,
            run.status().as_str(),
            if run.attempt > 1 {
                format!(" (attempt {})", run.attempt)
            } else {
                String::new()
            },
            run.reason().map_or(String::new(), |r| format!(
                ": {}",
                r.lines().next().unwrap_or("")
            )),
            if run.flags.is_empty() {
                String::new()
            } else {
                format!(" [flagged: {}]", run.flags.join("; "))
            },
            match (self.bar.is_some(), self.time_left()) {
                (false, Some(left)) =>
                    format!(" ({in_flight} in flight, ≈ {} left)", format_duration(left)),
                _ => String::new(),
            }
        );
        match &self.bar {
            Some(b) => {
                b.println(line);
                b.inc(1);
                b.set_message(self.message());
            }
            None => eprintln!("{line}"),
        }
    }

    /// An attempt that was flagged and runs again.
    fn retry<R>(&self, run: &StoredRun<R>, retry_flagged: u32) {
        self.in_flight.borrow_mut().retain(|k| k != &run.key);
        let line = format!(
            "[{}/{}] {} attempt {} of up to {} flagged ({}): running it again, same seed",
            self.done.get() + 1,
            self.estimates.len(),
            run.key,
            run.attempt,
            retry_flagged + 1,
            run.flags.join("; ")
        );
        match &self.bar {
            Some(b) => b.println(line),
            None => eprintln!("{line}"),
        }
    }

    /// A line of its own above the bar (or in the log).
    fn note(&self, line: String) {
        let line = format!("quiclab run: {line}");
        match &self.bar {
            Some(b) => b.println(line),
            None => eprintln!("{line}"),
        }
    }

    fn done(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
