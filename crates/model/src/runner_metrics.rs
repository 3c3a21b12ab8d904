//! What the runner itself measures of every run (lab set-up and teardown, the host, its own
//! resources), declared like a workload's metrics; the ones other parts name are constants.

use crate::MetricDef;

pub const SETUP_MS: MetricDef = MetricDef::lower("setup_ms", "Lab set-up", "ms");
pub const TEARDOWN_MS: MetricDef = MetricDef::lower("teardown_ms", "Lab teardown", "ms");
/// The hypervisor's steal during the run (a fidelity flag and a report column).
pub const HOST_STEAL: MetricDef =
    MetricDef::lower("host_steal", "CPU stolen by the hypervisor", "");

/// What the runner itself measures of every run (lab set-up and teardown, the host, its own
/// resources), declared like a workload's metrics.
pub const RUNNER_METRICS: &[MetricDef] = &[
    SETUP_MS,
    TEARDOWN_MS,
    HOST_STEAL,
    MetricDef::lower("host_busy", "Host CPU busy (anyone's work)", ""),
    MetricDef::lower(
        "lab_cpu_cores",
        "quiclab's own CPU (runner, emulator, stacks)",
        "cores",
    ),
    MetricDef::lower("runner_fds", "Runner file descriptors", ""),
    MetricDef::lower("runner_rss_kb", "Runner resident memory", "kB"),
];
