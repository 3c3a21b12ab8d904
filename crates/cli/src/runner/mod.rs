//! `quiclab run FILE`: a scenario's grid, run by run, each in a fresh lab, into `DIR/results.sqlite`.
//!
//! The plan (order, identities, seeds) comes from the sans-IO `quiclab-experiment`; this module is the
//! shell around it: it validates every run before the first starts, executes them one at a time,
//! commits each the moment it ends, and on `--resume` skips the runs already stored.

pub mod bench;
pub mod environment;
pub mod fidelity;
pub mod params;
pub mod series;

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, anyhow};
use clap::Args;
use quiclab_experiment::{RunSpec, Scenario, TraceRuns};
use quiclab_results::{ScenarioRecord, Series, Status, Store, StoredRun};
use serde_json::Value;

use crate::stacks_cmd::TransferTimeout;
use params::{PreparedRun, Preparer, Workload};

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Scenario file (TOML; see docs/experiments.md)
    pub file: PathBuf,
    /// Results directory (results.sqlite, traces/, report.html); default quiclab-results/<name>
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Continue an interrupted run of the same scenario: skip the runs already stored
    #[arg(long)]
    pub resume: bool,
    /// With --resume: run the stored failed and timed-out runs again (their records are replaced)
    #[arg(long, requires = "resume")]
    pub retry_failed: bool,
    /// List the runs and an estimate of how long they take, and run nothing
    #[arg(long)]
    pub dry_run: bool,
    /// Override the scenario's `repetitions`
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub repetitions: Option<u32>,
    /// Write the report (DIR/report.html) when the runs are done
    #[arg(long)]
    pub report: bool,
}

/// What a finished (or interrupted) `run` did.
pub struct RunOutcome {
    pub out: PathBuf,
    pub ran: usize,
    pub failed: usize,
    pub flagged: usize,
    /// Time the runner spent on its own work between runs (preparing runs, committing results).
    pub bookkeeping_s: f64,
}

pub fn default_out(scenario: &Scenario) -> PathBuf {
    let safe: String = scenario
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
    Path::new("quiclab-results").join(safe)
}

/// Reads, overrides and validates a scenario: every run is prepared once (and dropped) so that a
/// bad value in the 900th run is an error before the first run starts.
pub fn load(file: &Path, repetitions: Option<u32>) -> Result<(Scenario, String, Vec<RunSpec>)> {
    let text = std::fs::read_to_string(file)
        .with_context(|| format!("reading scenario {}", file.display()))?;
    let mut scenario = quiclab_experiment::parse(&text, &file.display().to_string())
        .map_err(|e| anyhow!("{e}"))?;
    if let Some(r) = repetitions {
        scenario.repetitions = r;
    }
    let plan = quiclab_experiment::expand(&scenario);
    let preparer = Preparer::new(&scenario, file);
    for run in &plan {
        preparer.prepare(run)?;
    }
    Ok((scenario, text, plan))
}

fn format_duration(s: f64) -> String {
    let s = s.round() as u64;
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min {:02} s", s / 60, s % 60),
        _ => format!("{} h {:02} min", s / 3600, s % 3600 / 60),
    }
}

pub fn run(args: RunArgs) -> Result<i32> {
    let (scenario, text, plan) = load(&args.file, args.repetitions)?;
    let preparer = Preparer::new(&scenario, &args.file);
    let out = args.out.clone().unwrap_or_else(|| default_out(&scenario));

    if args.dry_run {
        let mut total = 0.0;
        println!(
            "{}: {} run(s) = {} setting(s) × {} repetition(s) × protocols, order {:?}",
            args.file.display(),
            plan.len(),
            plan.iter().map(|r| r.setting).max().map_or(0, |m| m + 1),
            scenario.repetitions,
            scenario.order
        );
        println!("{:>5}  {:>20}  {:>8}  key", "run", "seed", "≈ s");
        for run in &plan {
            let est = params::estimate_seconds(&preparer.prepare(run)?);
            total += est;
            println!(
                "{:>5}  {:>20}  {est:>8.1}  {}",
                run.index, run.seed, run.key
            );
        }
        println!(
            "estimated total: {} (lab set-up, handshakes and transfers at the link rate or the \
             loss-limited rate; an estimate) → {}",
            format_duration(total),
            out.join("results.sqlite").display()
        );
        return Ok(0);
    }

    let resume = if args.retry_failed {
        Resume::RetryFailed
    } else if args.resume {
        Resume::Yes
    } else {
        Resume::No
    };
    let outcome = execute(&args.file, &scenario, &text, &plan, &out, resume)?;
    if args.report {
        crate::report_cmd::write_report(&outcome.out, &Default::default())?;
    }
    Ok(if outcome.failed > 0 { 1 } else { 0 })
}

/// Whether a run continues a results database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resume {
    No,
    Yes,
    /// Resume, and run the stored failed/timed-out runs again.
    RetryFailed,
}

/// Runs the plan's runs not yet stored in `out/results.sqlite`.
pub fn execute(
    file: &Path,
    scenario: &Scenario,
    text: &str,
    plan: &[RunSpec],
    out: &Path,
    resume: Resume,
) -> Result<RunOutcome> {
    quiclab_lab::topology::check_privileges()?;
    // Labs of an earlier runner killed with SIGKILL (which no handler sees) go first.
    let cleaned = quiclab_lab::topology::clean_stale()?;
    if !cleaned.namespaces.is_empty() {
        eprintln!(
            "quiclab run: removed {} namespace(s) left by an earlier quiclab process that died",
            cleaned.namespaces.len()
        );
    }
    let preparer = Preparer::new(scenario, file);
    let db = out.join("results.sqlite");
    let record = ScenarioRecord {
        name: scenario.name.clone(),
        description: scenario.description.clone(),
        file: file.display().to_string(),
        text: text.to_string(),
        planned_runs: plan.len(),
    };
    let mut store = Store::create_or_resume(&db, &record, resume != Resume::No)?;
    store.set_planned_runs(plan.len())?;
    if resume == Resume::RetryFailed {
        let n = store.forget_failed()?;
        eprintln!("quiclab run: {n} failed or timed-out run(s) will run again");
    }
    let done = store.done_keys()?;
    let todo: Vec<&RunSpec> = plan.iter().filter(|r| !done.contains(&r.key)).collect();
    let skipped = plan.len() - todo.len();
    store.begin_session(&environment::current())?;
    crate::signals::set_exit_hint(format!(
        "finished runs are in {}; continue with: quiclab run {} --out {} --resume",
        db.display(),
        file.display(),
        out.display()
    ));

    let estimates: Vec<f64> = todo
        .iter()
        .map(|r| preparer.prepare(r).map(|p| params::estimate_seconds(&p)))
        .collect::<Result<_>>()?;
    eprintln!(
        "quiclab run: {} — {} run(s) to do{}, estimated {} → {}",
        scenario.name,
        todo.len(),
        if skipped > 0 {
            format!(" ({skipped} already stored, skipped)")
        } else {
            String::new()
        },
        format_duration(estimates.iter().sum()),
        db.display()
    );
    crate::self_exe::pin();
    let progress = Progress::new(todo.len() as u64);
    let mut outcome = RunOutcome {
        out: out.to_path_buf(),
        ran: 0,
        failed: 0,
        flagged: 0,
        bookkeeping_s: 0.0,
    };
    for run in todo {
        progress.start(&run.key);
        let traced = match scenario.trace {
            TraceRuns::All => true,
            TraceRuns::First => run.repetition == 1,
            TraceRuns::None => false,
        };
        let trace_dir = traced.then(|| out.join("traces").join(format!("run-{:05}", run.index)));
        let t = Instant::now();
        let prepared = preparer.prepare(run)?;
        outcome.bookkeeping_s += t.elapsed().as_secs_f64();
        let (stored, series) = execute_one(scenario, run, prepared, trace_dir);
        let t = Instant::now();
        store.record(&stored, &series)?;
        outcome.bookkeeping_s += t.elapsed().as_secs_f64();
        outcome.ran += 1;
        if stored.status != Status::Ok {
            outcome.failed += 1;
        }
        if !stored.flags.is_empty() {
            outcome.flagged += 1;
        }
        progress.finish_one(&stored);
    }
    progress.done();
    crate::self_exe::unpin();
    let total = store.run_count()?;
    eprintln!(
        "quiclab run: {} of {} run(s) stored in {} ({} ran now, {} failed or timed out, {} flagged)",
        total,
        plan.len(),
        db.display(),
        outcome.ran,
        outcome.failed,
        outcome.flagged
    );
    Ok(outcome)
}

fn now_unix() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The numbers of a run's result document, plus the emulator's headline figures.
fn metrics(doc: &Value, extra: &[(&str, Option<f64>)]) -> BTreeMap<String, f64> {
    let mut m = BTreeMap::new();
    if let Some(obj) = doc.as_object() {
        for (k, v) in obj {
            match v {
                Value::Number(n) => {
                    if let Some(x) = n.as_f64() {
                        m.insert(k.clone(), x);
                    }
                }
                Value::Bool(b) if k == "resumed" || k == "zero_rtt" => {
                    m.insert(k.clone(), f64::from(u8::from(*b)));
                }
                _ => {}
            }
        }
    }
    for (k, v) in extra {
        if let Some(v) = v {
            m.insert(k.to_string(), *v);
        }
    }
    m
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

/// Executes one run in a fresh lab; never fails: a failure is a run with status failed/timeout.
fn execute_one(
    scenario: &Scenario,
    run: &RunSpec,
    mut prepared: PreparedRun,
    trace_dir: Option<PathBuf>,
) -> (StoredRun, Vec<Series>) {
    let started_unix = now_unix();
    let steal = quiclab_lab::host::StealMeter::start();
    let t0 = Instant::now();
    let mut stored = StoredRun {
        key: run.key.clone(),
        index: run.index,
        setting: run.setting,
        setting_label: params::setting_label(scenario, run),
        protocol: prepared.protocol().to_string(),
        repetition: run.repetition,
        seed: prepared.spec.seed,
        params: run.params.clone(),
        status: Status::Ok,
        reason: None,
        flags: Vec::new(),
        started_unix,
        duration_s: 0.0,
        setup_ms: None,
        teardown_ms: None,
        host_steal: None,
        session_id: 0,
        result: None,
        metrics: BTreeMap::new(),
    };
    let mut series = Vec::new();
    if let Some(d) = &trace_dir
        && let Err(e) = std::fs::create_dir_all(d)
    {
        stored.status = Status::Failed;
        stored.reason = Some(format!("creating {}: {e}", d.display()));
        return (stored, series);
    }
    let log = trace_dir.as_ref().map(|d| d.join("link.log"));
    let lab = prepared.link.start_lab(&prepared.spec, log.clone());
    let setup_ms = t0.elapsed().as_secs_f64() * 1e3;
    stored.setup_ms = Some(setup_ms);
    let mut running = match lab {
        Ok(l) => l,
        Err(e) => {
            stored.status = Status::Failed;
            stored.reason = Some(format!("setting up the lab: {e:#}"));
            stored.duration_s = t0.elapsed().as_secs_f64();
            return (stored, series);
        }
    };
    let result = match &mut prepared.work {
        Workload::Bulk(bulk) => {
            bulk.trace = trace_dir.clone();
            crate::stacks_cmd::transfer_full(bulk, &mut running)
        }
        Workload::Page(page) => {
            page.trace = trace_dir.clone();
            crate::page_cmd::load(page, &mut running).map(|(doc, fidelity, objects)| {
                if let Some(dir) = &trace_dir {
                    crate::page_cmd::write_har_and_waterfall(
                        page,
                        &doc,
                        &objects,
                        &running.spec,
                        Some(&dir.join("page.har")),
                        Some(&dir.join("waterfall.svg")),
                    );
                }
                (doc, fidelity)
            })
        }
    };
    let t1 = Instant::now();
    drop(running);
    let teardown_ms = t1.elapsed().as_secs_f64() * 1e3;
    stored.teardown_ms = Some(teardown_ms);
    stored.duration_s = t0.elapsed().as_secs_f64();
    let host_steal = steal.fraction();
    stored.host_steal = Some(host_steal);
    let (fds, rss_kb) = own_resources();
    match result {
        Ok((doc, fidelity)) => {
            if let Some(f) = &fidelity {
                stored.flags = fidelity::flags(&prepared.spec, f, host_steal);
            }
            if doc["verified"] == false {
                stored.status = Status::Failed;
                stored.reason = Some("the body did not match the expected bytes".into());
            }
            let down = fidelity.as_ref().map(|f| &f.downlink);
            stored.metrics = metrics(
                &doc,
                &[
                    ("setup_ms", Some(setup_ms)),
                    ("teardown_ms", Some(teardown_ms)),
                    ("host_steal", Some(host_steal)),
                    ("runner_fds", Some(fds)),
                    ("runner_rss_kb", Some(rss_kb)),
                    (
                        "emu_lateness_p99_us",
                        fidelity.as_ref().map(|f| f.lateness_us.p99),
                    ),
                    (
                        "emu_cpu_core_fraction",
                        fidelity.as_ref().map(|f| f.cpu_core_fraction),
                    ),
                    (
                        "emu_down_backlogged_mbps",
                        down.and_then(|d| d.backlogged_rate_bps).map(|r| r / 1e6),
                    ),
                    (
                        "tail_drops",
                        down.map(|d| d.model.counters.dropped_queue_packets as f64),
                    ),
                    (
                        "random_losses",
                        down.map(|d| d.model.counters.dropped_random_packets as f64),
                    ),
                    (
                        "max_queue_bytes",
                        down.map(|d| d.model.counters.max_queue_bytes as f64),
                    ),
                ],
            );
            stored.result = Some(doc);
            if let Some(dir) = &trace_dir {
                series = read_series(&run.key, dir, &prepared.spec);
            }
        }
        Err(e) => {
            stored.status = if e.chain().any(|c| c.is::<TransferTimeout>()) {
                Status::Timeout
            } else {
                Status::Failed
            };
            stored.reason = Some(format!("{e:#}"));
            stored.metrics = metrics(
                &Value::Null,
                &[
                    ("setup_ms", Some(setup_ms)),
                    ("teardown_ms", Some(teardown_ms)),
                    ("host_steal", Some(host_steal)),
                    ("runner_fds", Some(fds)),
                    ("runner_rss_kb", Some(rss_kb)),
                ],
            );
        }
    }
    (stored, series)
}

/// The time series of a traced run (missing files give no series, never an error).
fn read_series(key: &str, dir: &Path, spec: &quiclab_lab::LinkSpec) -> Vec<Series> {
    let mut out = Vec::new();
    let log = std::fs::read_to_string(dir.join("link.log")).unwrap_or_default();
    let epoch = series::log_epoch_monotonic_ns(&log);
    if let (Some(epoch), Ok(csv)) = (epoch, std::fs::read_to_string(dir.join("cwnd.csv"))) {
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

/// The progress bar (a line per run when stderr is not a terminal, e.g. in CI logs).
struct Progress {
    bar: Option<indicatif::ProgressBar>,
    total: u64,
    done: std::cell::Cell<u64>,
}

impl Progress {
    fn new(total: u64) -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = indicatif::ProgressBar::new(total);
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "{bar:30} {pos}/{len} runs, {elapsed} elapsed, ETA {eta}  {msg}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            bar
        });
        Progress {
            bar,
            total,
            done: std::cell::Cell::new(0),
        }
    }

    fn start(&self, key: &str) {
        if let Some(b) = &self.bar {
            b.set_message(key.to_string());
        }
    }

    fn finish_one(&self, run: &StoredRun) {
        self.done.set(self.done.get() + 1);
        let headline = run
            .metrics
            .get("total_ms")
            .or_else(|| run.metrics.get("plt_ms"))
            .map_or(String::new(), |t| format!(" {t:.0} ms"));
        let line = format!(
            "[{}/{}] {} {}{headline}{}{}",
            self.done.get(),
            self.total,
            run.key,
            run.status.as_str(),
            run.reason.as_ref().map_or(String::new(), |r| format!(
                ": {}",
                r.lines().next().unwrap_or("")
            )),
            if run.flags.is_empty() {
                String::new()
            } else {
                format!(" [flagged: {}]", run.flags.join("; "))
            }
        );
        match &self.bar {
            Some(b) => {
                b.println(line);
                b.inc(1);
            }
            None => eprintln!("{line}"),
        }
    }

    fn done(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
