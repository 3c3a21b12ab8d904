//! Executing a plan: the results directory opened (claimed, locked, the plan checked against what
//! it holds), each run's expected cost, then the runs started as the admission lets them beside
//! those in flight, each result stored by this thread alone, a flagged attempt run again. The
//! decisions (retry or record, where a retry goes in the queue, the lines printed) are small pure
//! functions, tested below; the rest moves threads, files and labs.

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use quiclab_experiment::admission::{Admission, Cost};
use quiclab_experiment::{RunSpec, Scenario};
use quiclab_results::{ScenarioRecord, Status, Store};
use quiclab_workload::RunDocument;
use quiclab_workload::harness::exe;

use crate::cost::{CostClass, CostTable, Jobs};
use crate::{
    DEFAULT_RETRY_FLAGGED, Executed, InFlight, Mode, PreparedRun, Preparer, Progress, Resume,
    RunOutcome, describe_admission, environment, format_duration, injected_flag,
};

/// Runs the plan's runs not yet stored in `out/results.sqlite`.
/// `on_hint` receives, before the first run, what to tell a user who interrupts the grid (how to
/// resume it).
pub fn execute(
    file: &Path,
    scenario: &Scenario,
    text: &str,
    plan: &[RunSpec],
    out: &Path,
    mode: Mode,
    on_hint: &dyn Fn(String),
) -> Result<RunOutcome> {
    let _lock = open_results_dir(out)?;
    let preparer = Preparer::new(scenario, file);
    let db = out.join("results.sqlite");
    let mut store = open_store(&db, file, scenario, text, plan, mode)?;
    let done = store.done_keys()?;
    let todo: Vec<&RunSpec> = plan.iter().filter(|r| !done.contains(&r.key)).collect();
    let skipped = plan.len() - todo.len();
    store.begin_session(&environment::current())?;
    on_hint(format!(
        "finished runs are in {}; continue with: quiclab run {} --out {} --resume",
        db.display(),
        file.display(),
        out.display()
    ));
    let retry_flagged = scenario.retry_flagged.unwrap_or(DEFAULT_RETRY_FLAGGED);
    let admission = mode.jobs.admission();
    let costs = learnt_costs(&preparer, plan, &store, skipped)?;
    let mut sized = Vec::with_capacity(todo.len());
    for r in &todo {
        let p = preparer.prepare(r)?;
        let cost = mode.jobs.effective(costs.cost(CostClass::of(&p)).0);
        sized.push((p.estimate_seconds(), cost));
    }
    eprintln!(
        "{}",
        plan_line(
            &scenario.name,
            (todo.len(), skipped),
            &sized,
            (mode.jobs, &admission),
            (
                retry_flagged,
                RetriesSoFar::of(&store, scenario.kind, mode.jobs)?
            ),
            &db
        )
    );
    exe::pin();
    let progress = Progress::new(
        sized.iter().map(|s| s.0).collect(),
        quiclab_workload::headline_metric(scenario.kind),
    );
    let mut queue = VecDeque::new();
    for (i, run) in todo.iter().enumerate() {
        // Attempts of this run stored before an interruption count: numbering continues.
        queue.push_back((i, store.attempts_of(&run.key)? + 1));
    }
    let mut grid = Grid {
        scenario,
        todo: &todo,
        preparer: &preparer,
        out,
        jobs: mode.jobs,
        admission,
        retry_flagged,
        store: &mut store,
        costs,
        progress: &progress,
        storms: crate::storms::StormWatch::new(mode.wait_out_noise),
        queue,
        next: None,
        flying: BTreeMap::new(),
        outcome: RunOutcome {
            out: out.to_path_buf(),
            ran: 0,
            failed: 0,
            flagged: 0,
            retries: 0,
            bookkeeping_s: 0.0,
            waited_s: 0.0,
        },
    };
    grid.run()?;
    let mut outcome = grid.outcome;
    outcome.waited_s = grid.storms.waited_s;
    progress.done();
    exe::unpin();
    let total = store.run_count()?;
    crate::retry_ledger::record(
        scenario.kind,
        &mode.jobs.to_string(),
        outcome.ran,
        outcome.retries,
    );
    eprintln!("{}", summary_line(total, plan.len(), &db, &outcome));
    if mode.point_to_report {
        eprintln!("{}", next_steps(out));
    }
    Ok(outcome)
}

/// Privileges checked, labs an earlier runner left (killed with SIGKILL, which no handler sees)
/// removed, `out` claimed and locked: a results directory is new, empty or quiclab's (its marker),
/// so that the report and figures written into it never replace someone else's files, and one
/// writer per directory (a second `run` into it would run and store the same runs). Returns the
/// lock.
fn open_results_dir(out: &Path) -> Result<quiclab_outputs::DirLock> {
    quiclab_lab::topology::check_privileges()?;
    let cleaned = quiclab_lab::topology::clean_stale()?;
    if !cleaned.namespaces.is_empty() {
        eprintln!(
            "quiclab run: removed {} namespace(s) left by an earlier quiclab process that died",
            cleaned.namespaces.len()
        );
    }
    quiclab_outputs::check_writable(out, "--out")?;
    quiclab_outputs::claim_dir(out, "--out")?;
    let lock = quiclab_outputs::lock_dir(out, "--out", false)?;
    // Temporary files of an earlier process that died here (a capture cut short) go first.
    quiclab_outputs::remove_stale_temps(out);
    Ok(lock)
}

/// The results database, created or resumed. One database, one plan: a resumed run of another
/// shard, form or repetitions is refused before it changes anything; with `--retry-failed` the
/// failed and timed-out runs are forgotten (and run again).
fn open_store(
    db: &Path,
    file: &Path,
    scenario: &Scenario,
    text: &str,
    plan: &[RunSpec],
    mode: Mode,
) -> Result<Store> {
    let record = ScenarioRecord {
        name: scenario.name.clone(),
        description: scenario.description.clone(),
        file: file.display().to_string(),
        text: text.to_string(),
        planned_runs: plan.len(),
    };
    let mut store = Store::create_or_resume(db, &record, mode.resume != Resume::No)?;
    store.check_and_set_plan(
        mode.quick,
        scenario.repetitions,
        mode.shard.map(|s| s.to_string()),
    )?;
    store.set_planned_runs(plan.len())?;
    if mode.resume == Resume::RetryFailed {
        let n = store.forget_failed()?;
        eprintln!("quiclab run: {n} failed or timed-out run(s) will run again");
    }
    Ok(store)
}

/// What each run is expected to cost: its class's runs that ran alone in this database teach it
/// (a resumed grid starts from what it measured), else the reference figures.
fn learnt_costs(
    preparer: &Preparer<'_>,
    plan: &[RunSpec],
    store: &Store,
    skipped: usize,
) -> Result<CostTable> {
    let mut costs = CostTable::default();
    if skipped > 0 {
        let by_key: BTreeMap<&str, &RunSpec> = plan.iter().map(|r| (r.key.as_str(), r)).collect();
        for stored in store.runs()? {
            if let Some(run) = by_key.get(stored.key.as_str()) {
                costs.observe(CostClass::of(&preparer.prepare(run)?), &stored.metrics);
            }
        }
    }
    Ok(costs)
}

/// What the grid will do, before it starts (`(to do, skipped)`; each run's estimate and cost).
/// The retries a results directory measured so far: attempts run again per run stored; and,
/// for a directory that measured none yet, what this host measured for the workload kind
/// ([`crate::retry_ledger`]; `host_same_jobs`: at the same --jobs, else at any).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
struct RetriesSoFar {
    extra_attempts: usize,
    runs: usize,
    host: crate::retry_ledger::HostRetries,
    host_same_jobs: bool,
}

impl RetriesSoFar {
    fn of(store: &Store, kind: quiclab_model::WorkloadKind, jobs: Jobs) -> Result<RetriesSoFar> {
        let (host, host_same_jobs) = crate::retry_ledger::measured(kind, &jobs.to_string());
        Ok(RetriesSoFar {
            extra_attempts: store.replaced_attempt_count()?,
            runs: store.run_count()?,
            host,
            host_same_jobs,
        })
    }

    /// What the estimate becomes with as many retries per run as measured (None: nothing
    /// measured yet).
    fn scale(self) -> Option<f64> {
        (self.runs > 0).then(|| 1.0 + self.extra_attempts as f64 / self.runs as f64)
    }
}

fn plan_line(
    name: &str,
    (todo, skipped): (usize, usize),
    sized: &[(f64, Cost)],
    (jobs, admission): (Jobs, &Admission),
    (retry_flagged, so_far): (u32, RetriesSoFar),
    db: &Path,
) -> String {
    let alone: f64 = sized.iter().map(|s| s.0).sum();
    // Retries are in the estimate once this directory has measured them (issue 61: estimates
    // that left them out fell short by 40 %).
    let retries = match (so_far.scale(), so_far.host.scale()) {
        (None, None) => {
            " (not in the estimate: no retry measured here or on this host yet)".to_string()
        }
        (None, Some(k)) => format!(
            "; none measured here yet, on this host {} flagged attempt(s) ran again over {} run(s) \
             of this kind{}: ≈ {} one at a time with as many",
            so_far.host.extra_attempts,
            so_far.host.runs,
            if so_far.host_same_jobs {
                " at these --jobs"
            } else {
                " (at other --jobs)"
            },
            format_duration(alone * k)
        ),
        (Some(k), _) => format!(
            "; so far here {} flagged attempt(s) ran again over {} run(s): ≈ {} one at a time \
             with as many",
            so_far.extra_attempts,
            so_far.runs,
            format_duration(alone * k)
        ),
    };
    let skipped = match skipped {
        0 => String::new(),
        n => format!(" ({n} already stored, skipped)"),
    };
    let side_by_side = match jobs == Jobs::ONE {
        true => String::new(),
        false => format!(
            " one at a time, ≈ {} at --jobs {jobs} ({})",
            format_duration(quiclab_experiment::admission::makespan(sized, admission)),
            describe_admission(admission)
        ),
    };
    format!(
        "quiclab run: {name} — {todo} run(s) to do{skipped}, estimated {}{side_by_side} → {}; a \
         run flagged for emulator fidelity runs again up to {retry_flagged} time(s){retries}",
        format_duration(alone),
        db.display()
    )
}

/// What the grid did, after it ended (`total` runs stored of `planned`).
fn summary_line(total: usize, planned: usize, db: &Path, o: &RunOutcome) -> String {
    let waited = match o.waited_s > 0.0 {
        true => format!("; {} waited out host noise", format_duration(o.waited_s)),
        false => String::new(),
    };
    format!(
        "quiclab run: {total} of {planned} run(s) stored in {} ({} ran now, {} failed or timed \
         out, {} flagged attempt(s) run again, {} still flagged{waited})",
        db.display(),
        o.ran,
        o.failed,
        o.retries,
        o.flagged
    )
}

/// Where a user goes from a results directory.
fn next_steps(out: &Path) -> String {
    let out = out.display();
    format!(
        "quiclab run: to see them: quiclab report {out} (report.html with figures), quiclab \
         export {out} (CSV for pandas or R)"
    )
}

/// A flagged attempt with retries left is kept as an attempt and run again with the same seed;
/// the last attempt (passing or not) is the run's row.
fn runs_again(flagged: bool, attempt: u32, retry_flagged: u32) -> bool {
    flagged && attempt <= retry_flagged
}

/// Queues `retry` (a run and its next attempt) first, before `next` (the run already prepared to
/// start): a retry that waited out a storm starts right after it, not one run later (when the
/// next storm may be due).
fn queue_retry(
    queue: &mut VecDeque<(usize, u32)>,
    next: Option<(usize, u32)>,
    retry: (usize, u32),
) {
    if let Some(n) = next {
        queue.push_front(n);
    }
    queue.push_front(retry);
}

/// A grid in progress: what is queued, prepared, in flight, and what it did so far.
struct Grid<'a> {
    scenario: &'a Scenario,
    todo: &'a [&'a RunSpec],
    preparer: &'a Preparer<'a>,
    out: &'a Path,
    jobs: Jobs,
    admission: Admission,
    retry_flagged: u32,
    store: &'a mut Store,
    costs: CostTable,
    progress: &'a Progress,
    storms: crate::storms::StormWatch,
    /// Runs to start (index into `todo`, attempt), in order.
    queue: VecDeque<(usize, u32)>,
    /// The next run, prepared, waiting for room.
    next: Option<(usize, u32, PreparedRun, CostClass)>,
    flying: BTreeMap<usize, InFlight>,
    outcome: RunOutcome,
}

impl Grid<'_> {
    /// Runs start in plan order, each when the admission lets it beside the runs in flight; the
    /// results come back over a channel and this thread alone writes them (one writer).
    fn run(&mut self) -> Result<()> {
        std::thread::scope(|scope| -> Result<()> {
            let (tx, rx) = std::sync::mpsc::channel::<(usize, Executed)>();
            loop {
                while let Some((i, prepared)) = self.admit_next()? {
                    self.start(scope, &tx, i, prepared)?;
                }
                if self.flying.is_empty() {
                    return Ok(());
                }
                let (i, executed) = rx.recv().context("a run's thread vanished")?;
                if quiclab_lab::registry::shutting_down() {
                    // Ctrl-C's teardown killed the labs in flight: their runs did not fail on
                    // their own and are not stored (`--resume` runs them); the process is about
                    // to exit.
                    loop {
                        std::thread::sleep(std::time::Duration::from_secs(1));
                    }
                }
                self.settle(i, executed)?;
            }
        })
    }

    /// The next queued run, prepared, if the admission lets it start now (it is marked in
    /// flight); None when nothing is queued or there is no room.
    fn admit_next(&mut self) -> Result<Option<(usize, PreparedRun)>> {
        if self.next.is_none() {
            let Some((i, attempt)) = self.queue.pop_front() else {
                return Ok(None);
            };
            let t = Instant::now();
            let prepared = self.preparer.prepare(self.todo[i])?;
            self.outcome.bookkeeping_s += t.elapsed().as_secs_f64();
            let class = CostClass::of(&prepared);
            self.next = Some((i, attempt, prepared, class));
        }
        let Some((_, _, _, class)) = &self.next else {
            return Ok(None);
        };
        let cost = self.jobs.effective(self.costs.cost(*class).0);
        let running: Vec<_> = self.flying.values().map(|f| f.cost).collect();
        if !self.admission.admits(&running, cost) {
            return Ok(None);
        }
        // Not into a storm: the first run, and the next after a flagged attempt, read the host
        // first and wait while it is noisy.
        self.storms.before_run(&|line| self.progress.note(line));
        let (i, attempt, prepared, class) = self.next.take().expect("checked above");
        let labs = self.flying.len() + 1;
        for f in self.flying.values_mut() {
            f.labs = f.labs.max(labs);
        }
        let in_flight = InFlight {
            cost,
            class,
            attempt,
            labs,
        };
        self.flying.insert(i, in_flight);
        Ok(Some((i, prepared)))
    }

    /// Starts run `i` on a thread of its own; its result (a panic becomes a failed run) comes
    /// back over `tx`.
    fn start<'s, 'e>(
        &self,
        scope: &'s std::thread::Scope<'s, 'e>,
        tx: &std::sync::mpsc::Sender<(usize, Executed)>,
        i: usize,
        prepared: PreparedRun,
    ) -> Result<()>
    where
        Self: 'e,
    {
        let (scenario, run) = (self.scenario, self.todo[i]);
        let (trace_dir, capture) = crate::run_outputs(scenario, run, self.out)?;
        // Each attempt's trace starts empty: files of an earlier attempt (or of a run interrupted
        // before it was stored) must not be read as this attempt's. The directory is quiclab's,
        // under the results directory it claimed.
        if let Some(dir) = &trace_dir {
            quiclab_outputs::remove_claimed_dir(dir)
                .with_context(|| format!("clearing {}", dir.display()))?;
        }
        self.progress.start(&run.key, self.flying.len());
        let tx = tx.clone();
        std::thread::Builder::new()
            .name(format!("ql-run-{}", run.index))
            .spawn_scoped(scope, move || {
                let executed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    crate::execute_one(scenario, run, &prepared, trace_dir, capture)
                }))
                .unwrap_or_else(|panic| {
                    let what = panic
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_else(|| "a panic".into());
                    let mut stored = crate::stored_shell(scenario, run, &prepared);
                    stored.document = RunDocument::Failed {
                        reason: format!("the run's thread panicked: {what}"),
                        partial: None,
                    };
                    (stored, Vec::new())
                });
                // The receiver is gone only when the runner stopped on an error.
                let _ = tx.send((i, executed));
            })
            .context("starting a run's thread")?;
        Ok(())
    }

    /// Run `i` came back: stored as an attempt and queued again (flagged, retries left), or
    /// stored as the run's row.
    fn settle(&mut self, i: usize, (mut stored, series): Executed) -> Result<()> {
        let f = self.flying.remove(&i).expect("a run in flight");
        stored.attempt = f.attempt;
        stored.flags.extend(injected_flag(f.attempt));
        let labs = crate::LABS_IN_FLIGHT.name.to_string();
        stored.metrics.insert(labs, f.labs as f64);
        self.costs.observe(f.class, &stored.metrics);
        self.storms.after(!stored.flags.is_empty());
        let t = Instant::now();
        let retry = runs_again(!stored.flags.is_empty(), f.attempt, self.retry_flagged);
        if retry {
            self.store.record_attempt(&stored)?;
        } else {
            self.store.record(&stored, &series)?;
        }
        self.outcome.bookkeeping_s += t.elapsed().as_secs_f64();
        if retry {
            self.progress.retry(&stored, self.retry_flagged);
            self.outcome.retries += 1;
            let next = self.next.take().map(|(n, attempt, _, _)| (n, attempt));
            queue_retry(&mut self.queue, next, (i, f.attempt + 1));
            return Ok(());
        }
        self.outcome.ran += 1;
        if stored.status() != Status::Ok {
            self.outcome.failed += 1;
        }
        if !stored.flags.is_empty() {
            self.outcome.flagged += 1;
        }
        self.progress.finish_one(i, &stored, self.flying.len());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flagged_attempt_runs_again_while_retries_are_left() {
        assert!(runs_again(true, 1, 2));
        assert!(runs_again(true, 2, 2));
        assert!(!runs_again(true, 3, 2), "the last attempt is the run's row");
        assert!(!runs_again(false, 1, 2), "an unflagged attempt is the row");
        assert!(!runs_again(true, 1, 0), "no retries configured");
    }

    #[test]
    fn a_retry_goes_first_then_the_run_already_prepared() {
        let mut q = VecDeque::from([(5, 1), (6, 1)]);
        queue_retry(&mut q, Some((4, 1)), (2, 2));
        assert_eq!(Vec::from(q), [(2, 2), (4, 1), (5, 1), (6, 1)]);
        let mut q = VecDeque::new();
        queue_retry(&mut q, None, (0, 3));
        assert_eq!(Vec::from(q), [(0, 3)]);
    }

    #[test]
    fn the_lines_say_what_the_grid_will_do_and_did() {
        let db = Path::new("out/results.sqlite");
        let one = Cost {
            cores: 1.0,
            exclusive: false,
        };
        let line = plan_line(
            "s",
            (2, 3),
            &[(60.0, one), (30.0, one)],
            (Jobs::ONE, &Jobs::ONE.admission()),
            (2, RetriesSoFar::default()),
            db,
        );
        assert!(
            line.contains("s — 2 run(s) to do (3 already stored, skipped)"),
            "{line}"
        );
        assert!(
            line.contains("estimated 1 min 30 s → out/results.sqlite"),
            "{line}"
        );
        assert!(!line.contains("--jobs"), "{line}");
        assert!(line.contains("up to 2 time(s)"), "{line}");
        assert!(
            line.ends_with("(not in the estimate: no retry measured here or on this host yet)"),
            "{line}"
        );
        // Resumed where 2 of 4 stored runs ran again: the estimate grows by half.
        let measured = RetriesSoFar {
            extra_attempts: 2,
            runs: 4,
            ..Default::default()
        };
        let line = plan_line(
            "s",
            (2, 4),
            &[(60.0, one), (30.0, one)],
            (Jobs::ONE, &Jobs::ONE.admission()),
            (2, measured),
            db,
        );
        assert!(
            line.ends_with(
                "; so far here 2 flagged attempt(s) ran again over 4 run(s): ≈ 2 min 15 s one at \
                 a time with as many"
            ),
            "{line}"
        );
        // A new directory on a host that measured 1 retry per 10 runs of the kind: ten per cent
        // more, said as the host's.
        let host = RetriesSoFar {
            host: crate::retry_ledger::HostRetries {
                extra_attempts: 3,
                runs: 30,
                grids: 2,
            },
            host_same_jobs: true,
            ..Default::default()
        };
        let line = plan_line(
            "s",
            (2, 0),
            &[(60.0, one), (30.0, one)],
            (Jobs::ONE, &Jobs::ONE.admission()),
            (2, host),
            db,
        );
        assert!(
            line.ends_with(
                "; none measured here yet, on this host 3 flagged attempt(s) ran again over 30 \
                 run(s) of this kind at these --jobs: ≈ 1 min 39 s one at a time with as many"
            ),
            "{line}"
        );
        let o = RunOutcome {
            out: "out".into(),
            ran: 4,
            failed: 1,
            flagged: 0,
            retries: 2,
            bookkeeping_s: 0.0,
            waited_s: 0.0,
        };
        let line = summary_line(5, 6, db, &o);
        assert_eq!(
            line,
            "quiclab run: 5 of 6 run(s) stored in out/results.sqlite (4 ran now, 1 failed or \
             timed out, 2 flagged attempt(s) run again, 0 still flagged)"
        );
        let waited = RunOutcome {
            waited_s: 90.0,
            ..o
        };
        assert!(summary_line(5, 6, db, &waited).contains("; 1 min 30 s waited out host noise"));
        // `run` without --report ends pointing to what reads the results (issue 61).
        assert_eq!(
            next_steps(Path::new("out")),
            "quiclab run: to see them: quiclab report out (report.html with figures), quiclab \
             export out (CSV for pandas or R)"
        );
    }
}
