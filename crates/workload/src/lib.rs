//! quiclab's workloads: what a run measures, behind one abstraction.
//!
//! A workload ([`Workload`]) starts its server side in a running lab, runs its client side in the
//! client namespace, stops the emulator and returns a typed result ([`WorkloadResult`]) — its
//! `--json` contract — that declares its metrics once (name, label, unit, which direction is
//! better). Its work directory is removed on every path unless the caller keeps it.
//!
//! - [`harness`]: the shared parts (work directory, lab start, certificate, server start, client
//!   child processes with typed reports and exit-code errors, the pinned executable).
//! - [`child`]: the halves that run inside the namespaces (`quiclab child CONFIG`): server, fetch
//!   client, page client, each configured by one serialised struct.
//! - [`bulk`], [`page`], [`flows`], [`video`]: the workloads.
//! - [`WorkloadSpec`]: one run of any workload, as the runner holds it; [`registry`]: every metric
//!   any workload or the emulator declares, for reports.
//!
//! Adding a workload: a pure core crate for its logic (if it has any), one module here that
//! implements [`Workload`] and [`WorkloadResult`], a variant in [`WorkloadSpec`] and in
//! `quiclab_experiment::WorkloadKind` (the compiler then lists every match to extend), and a
//! subcommand in the CLI. See docs/architecture.md.

pub mod bench;
pub mod bulk;
pub mod child;
pub mod flows;
pub mod harness;
pub mod page;
pub mod params;
pub mod peer;
pub mod peer_tcp;
pub mod switch;
pub mod syscalls;
pub mod video;

use std::collections::BTreeMap;
use std::path::Path;

use quiclab_experiment::WorkloadKind;
use quiclab_lab::{FidelityReport, LinkSpec, RunningLab};

pub use harness::WorkDir;
pub use quiclab_model::{
    EMULATOR_METRICS, RunDocument, RunError, TimeSeries, WorkloadOutput, WorkloadResult,
    collect_metrics, emulator_metric_values, fec, headline_metric, kind_metrics, registry,
    report_metrics,
};

/// A finished workload: its result and the emulator's fidelity report (None without emulator).
pub struct Outcome<R> {
    pub result: R,
    pub fidelity: Option<FidelityReport>,
}

/// What every workload implements.
pub trait Workload {
    type Output: WorkloadResult;

    /// The workload's name (`kind` in scenarios).
    fn name(&self) -> &'static str;

    /// What the run is compared as: a protocol (`h3`), or a mix (`h3+h1`).
    fn contender(&self) -> String;

    /// A rough duration of one run on `spec`, for dry runs and progress (an estimate).
    fn estimate_seconds(&self, spec: &LinkSpec) -> f64;

    /// How long the run may take on `spec` before it ends as timed out (its `timeout`, else the
    /// workload's own default).
    fn time_limit(&self, spec: &LinkSpec) -> std::time::Duration;

    /// Runs in `running`: server side, client side, result; stops the emulator. With `keep`, the
    /// work directory (traces, reports, certificates) is that directory and stays; without, a
    /// temporary one is removed on every path.
    fn run(
        &self,
        running: &mut RunningLab,
        keep: Option<&Path>,
    ) -> Result<Outcome<Self::Output>, RunError>;

    /// Extra files a kept run writes (HAR, waterfall); returns notes. None by default.
    fn write_artifacts(
        &self,
        _out: &Outcome<Self::Output>,
        _dir: &Path,
        _spec: &LinkSpec,
    ) -> Vec<String> {
        Vec::new()
    }

    /// Time series the workload itself measured (the runner adds the packet log's queue). None by
    /// default.
    fn time_series(&self, _out: &Outcome<Self::Output>) -> Vec<TimeSeries> {
        Vec::new()
    }
}

/// A finished run of any workload, as the runner stores it.
pub struct RunOutput {
    /// The typed result (the workload's `--json` contract, tagged with its kind).
    pub result: WorkloadOutput,
    /// The declared metrics' values, the emulator's included.
    pub metrics: BTreeMap<String, f64>,
    pub fidelity: Option<FidelityReport>,
    /// Why the run counts as failed or timed out although it produced a result.
    pub failure: Option<RunError>,
    /// Notes from writing a kept run's extra files.
    pub notes: Vec<String>,
    /// The workload's own time series ([`Workload::time_series`]).
    pub series: Vec<TimeSeries>,
}

/// One run of any workload: what `[workload]` and the run's parameters asked for.
#[derive(Debug, Clone)]
pub enum WorkloadSpec {
    Bulk(bulk::BulkRun),
    Page(page::PageRun),
    Flows(flows::FlowsRun),
    Video(video::VideoRun),
}

/// A workload with its result's type erased: what the runner needs of any run. Every
/// [`Workload`] whose result is one of [`WorkloadOutput`]'s is one (a blanket impl), so a new
/// kind needs no dispatch code here.
pub trait AnyWorkload {
    fn kind(&self) -> WorkloadKind;
    fn contender(&self) -> String;
    fn estimate_seconds(&self, spec: &LinkSpec) -> f64;
    fn time_limit(&self, spec: &LinkSpec) -> std::time::Duration;
    /// Runs the workload in `running` (see [`Workload::run`]) and erases its result's type.
    fn run_erased(
        &self,
        running: &mut RunningLab,
        keep: Option<&Path>,
    ) -> Result<RunOutput, RunError>;
}

impl<W: Workload> AnyWorkload for W
where
    W::Output: Into<WorkloadOutput> + Clone,
{
    fn kind(&self) -> WorkloadKind {
        WorkloadKind::from_name(self.name()).expect(
            "a workload's name is its kind's (params::tests::every_kind_builds_a_run_of_its_kind)",
        )
    }
    fn contender(&self) -> String {
        Workload::contender(self)
    }
    fn estimate_seconds(&self, spec: &LinkSpec) -> f64 {
        Workload::estimate_seconds(self, spec)
    }
    fn time_limit(&self, spec: &LinkSpec) -> std::time::Duration {
        Workload::time_limit(self, spec)
    }
    fn run_erased(
        &self,
        running: &mut RunningLab,
        keep: Option<&Path>,
    ) -> Result<RunOutput, RunError> {
        erase(self, running, keep)
    }
}

impl WorkloadSpec {
    /// The run as any workload: the one match over the kinds of run.
    pub fn workload(&self) -> &dyn AnyWorkload {
        match self {
            WorkloadSpec::Bulk(w) => w,
            WorkloadSpec::Page(w) => w,
            WorkloadSpec::Flows(w) => w,
            WorkloadSpec::Video(w) => w,
        }
    }

    pub fn kind(&self) -> WorkloadKind {
        self.workload().kind()
    }

    pub fn contender(&self) -> String {
        self.workload().contender()
    }

    pub fn estimate_seconds(&self, spec: &LinkSpec) -> f64 {
        self.workload().estimate_seconds(spec)
    }

    pub fn time_limit(&self, spec: &LinkSpec) -> std::time::Duration {
        self.workload().time_limit(spec)
    }

    /// Runs the workload in `running` (see [`Workload::run`]) and erases its result's type.
    pub fn run(
        &self,
        running: &mut RunningLab,
        keep: Option<&Path>,
    ) -> Result<RunOutput, RunError> {
        self.workload().run_erased(running, keep)
    }
}

fn erase<W: Workload>(
    w: &W,
    running: &mut RunningLab,
    keep: Option<&Path>,
) -> Result<RunOutput, RunError>
where
    W::Output: Into<WorkloadOutput> + Clone,
{
    let out = w.run(running, keep)?;
    let notes = match keep {
        Some(dir) => w.write_artifacts(&out, dir, &running.spec),
        None => Vec::new(),
    };
    let series = w.time_series(&out);
    let mut values = out.result.metric_values();
    if let Some(f) = &out.fidelity {
        values.extend(emulator_metric_values(f));
    }
    let failure = out.result.failure();
    Ok(RunOutput {
        result: out.result.into(),
        metrics: collect_metrics(values),
        failure,
        fidelity: out.fidelity,
        notes,
        series,
    })
}
