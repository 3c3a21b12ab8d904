//! What the runner itself measures of every run (lab set-up and teardown, the host, its own
//! resources), declared like a workload's metrics; the ones other parts name are constants.

use crate::MetricDef;

pub const SETUP_MS: MetricDef = MetricDef::lower("setup_ms", "Lab set-up", "ms");
pub const TEARDOWN_MS: MetricDef = MetricDef::lower("teardown_ms", "Lab teardown", "ms");
/// The hypervisor's steal during the run (a fidelity flag and a report column).
pub const HOST_STEAL: MetricDef =
    MetricDef::lower("host_steal", "CPU stolen by the hypervisor", "");
/// How long the lab stood still during the workload (the CPU paused most; whole-VM pauses,
/// freezes, SIGSTOP: `quiclab_lab::host::PauseWatch`), as a share of the workload's time — a
/// fidelity flag above 2.5 % — and the longest single pause.
pub const LAB_PAUSED_SHARE: MetricDef = MetricDef::lower(
    "lab_paused_share",
    "Share of the run the lab was paused",
    "",
);
pub const LAB_PAUSE_LONGEST_MS: MetricDef =
    MetricDef::lower("lab_pause_longest_ms", "Longest pause of the lab", "ms");
/// The whole quiclab process's CPU during the run (getrusage of itself and its reaped
/// children, per second of the run): the run's own cost when it ran alone, the sum of every lab
/// in flight when it shared the machine (see [`LABS_IN_FLIGHT`]).
pub const LAB_CPU_CORES: MetricDef = MetricDef::lower(
    "lab_cpu_cores",
    "quiclab's own CPU (runner, emulator, stacks; every lab in flight)",
    "cores",
);
/// The most labs that ran at once while this run did, itself included (1: it ran alone).
pub const LABS_IN_FLIGHT: MetricDef =
    MetricDef::lower("labs_in_flight", "Labs running at once during the run", "");

/// What the runner itself measures of every run (lab set-up and teardown, the host, its own
/// resources), declared like a workload's metrics.
pub const RUNNER_METRICS: &[MetricDef] = &[
    SETUP_MS,
    TEARDOWN_MS,
    HOST_STEAL,
    LAB_PAUSED_SHARE,
    LAB_PAUSE_LONGEST_MS,
    MetricDef::lower("host_busy", "Host CPU busy (anyone's work)", ""),
    LAB_CPU_CORES,
    LABS_IN_FLIGHT,
    MetricDef::lower("runner_fds", "Runner file descriptors", ""),
    MetricDef::lower("runner_rss_kb", "Runner resident memory", "kB"),
];
