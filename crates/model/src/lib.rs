//! What a quiclab run *is*, as plain data: no sockets, threads, processes, clocks or files.
//!
//! - [`kind`]: the workload kinds; [`keys`]: every key a run takes (link, protocol, workload),
//!   in one table, with its parser; [`params`]: a run's typed parameters, checked once.
//! - [`bulk`], [`page`], [`flows`], [`video`]: each workload's typed result and the metrics it
//!   declares ([`WorkloadResult`]); [`WorkloadOutput`] is any of them, [`RunDocument`] a run's
//!   stored outcome.
//! - [`fidelity`]: the emulator's evidence of its own fidelity; [`records`]: what stacks and the
//!   browser record; [`switch`], [`fec`]: parts shared by several results.
//! - [`metric`]: how a number is declared (name, unit, direction).
//!
//! The shells (`quiclab-lab`, `quiclab-stacks`, `quiclab-browser`, `quiclab-workload`) fill these
//! types in; the store, the verdicts and the reports only read them, so none of those depends on
//! tokio or on a lab (see docs/architecture.md).

pub mod bulk;
pub mod cwnd;
pub mod document;
pub mod endpoint;
pub mod error;
pub mod fec;
pub mod fidelity;
pub mod flows;
pub mod implementation;
pub mod keys;
/// docs/experiments.md is rewritten by two tests under QUICLAB_WRITE_DOCS (the key and metrics
/// tables): they take turns, or one would write back the other's old table.
#[cfg(test)]
pub(crate) static DOCS_FILE: std::sync::Mutex<()> = std::sync::Mutex::new(());
pub mod kind;
pub mod metric;
pub mod page;
pub mod params;
pub mod records;
pub mod run;
pub mod runner_metrics;
pub mod switch;
mod text;
pub use text::utc;
pub mod video;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use error::RunError;
pub use fidelity::FidelityReport;
pub use kind::{KINDS, KindDef, WorkloadKind};
pub use metric::{Better, Metric, MetricDef};

/// The typed result of a workload.
pub trait WorkloadResult: Serialize + Sized + 'static {
    /// Every metric this result can have: one row each, its declaration and its value.
    const METRICS: &'static [Metric<Self>];

    /// The metrics a report shows when the user does not choose, each declared in `METRICS`;
    /// the first is the headline (CDFs, the wins table, the runner's progress line).
    const REPORT_METRICS: &'static [MetricDef];

    /// This run's values of the declared metrics (None: not measured in this run, e.g. the TCP
    /// connect time of QUIC), in declaration order.
    fn metric_values(&self) -> Vec<(&'static str, Option<f64>)> {
        Self::METRICS
            .iter()
            .map(|m| (m.def.name, (m.value)(self)))
            .collect()
    }

    /// The declarations of [`Self::METRICS`].
    fn metric_defs() -> Vec<MetricDef> {
        Self::METRICS.iter().map(|m| m.def).collect()
    }

    /// Why an otherwise complete run counts as failed (e.g. a body that did not match) or as
    /// timed out (a player or flow stopped by the time limit: censored, never `failed`).
    fn failure(&self) -> Option<RunError> {
        None
    }
}

/// A time series of a run: `name` (`throughput_mbps@1 h3` — series sharing the part before `@`
/// are drawn in one panel, a line per part after it), unit, (seconds on the emulator's clock,
/// value) points.
#[derive(Debug, Clone, PartialEq)]
pub struct TimeSeries {
    pub name: String,
    pub unit: String,
    pub points: Vec<(f64, f64)>,
}

/// The emulator's headline figures, stored with every run that went through it.
pub const EMULATOR_METRICS: &[MetricDef] = &[
    MetricDef::lower("emu_lateness_p99_us", "Emulator release lateness p99", "µs"),
    MetricDef::lower("emu_cpu_core_fraction", "Emulator CPU", "cores"),
    MetricDef::higher(
        "emu_down_backlogged_mbps",
        "Downlink rate while backlogged",
        "Mbit/s",
    ),
    MetricDef::lower("tail_drops", "Tail drops", "packets"),
    MetricDef::lower("random_losses", "Random losses", "packets"),
    MetricDef::lower("max_queue_bytes", "Largest queue", "B"),
];

/// Values of [`EMULATOR_METRICS`] from a fidelity report.
pub fn emulator_metric_values(f: &FidelityReport) -> Vec<(&'static str, Option<f64>)> {
    let down = &f.downlink;
    vec![
        ("emu_lateness_p99_us", Some(f.lateness_us.p99)),
        ("emu_cpu_core_fraction", Some(f.cpu_core_fraction)),
        (
            "emu_down_backlogged_mbps",
            down.backlogged_rate_bps.map(|r| r / 1e6),
        ),
        (
            "tail_drops",
            Some(down.model.counters.dropped_queue_packets as f64),
        ),
        (
            "random_losses",
            Some(down.model.counters.dropped_random_packets as f64),
        ),
        (
            "max_queue_bytes",
            Some(down.model.counters.max_queue_bytes as f64),
        ),
    ]
}

/// Declared values into a metrics map; absent and non-finite values are left out (a NaN is "not
/// measured", never a number to average).
pub fn collect_metrics(
    values: impl IntoIterator<Item = (&'static str, Option<f64>)>,
) -> BTreeMap<String, f64> {
    values
        .into_iter()
        .filter_map(|(k, v)| v.filter(|x| x.is_finite()).map(|x| (k.to_string(), x)))
        .collect()
}

/// The typed result of any workload: what a run's document holds (`kind` says which), written
/// and read back with these types (`quiclab_results::RunDocument<WorkloadOutput>`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum WorkloadOutput {
    Bulk(bulk::BulkResult),
    Page(page::PageResult),
    Flows(flows::FlowsResult),
    Video(video::VideoResult),
}

/// A run's stored document, typed.
pub type RunDocument = document::RunDocument<WorkloadOutput>;
pub use document::Status;

impl WorkloadOutput {
    pub fn kind(&self) -> WorkloadKind {
        match self {
            WorkloadOutput::Bulk(_) => WorkloadKind::Bulk,
            WorkloadOutput::Page(_) => WorkloadKind::Page,
            WorkloadOutput::Flows(_) => WorkloadKind::Flows,
            WorkloadOutput::Video(_) => WorkloadKind::Video,
        }
    }

    /// A bulk result of 1 MB over h2 on the default link, where tests and examples start (no
    /// emulator evidence, nothing else measured).
    pub fn example() -> WorkloadOutput {
        WorkloadOutput::Bulk(bulk::BulkResult {
            proto: "h2".into(),
            negotiated: "h2".into(),
            tls_version: "1.3".into(),
            resumed: false,
            zero_rtt: false,
            connect_ms: Some(50.0),
            handshake_ms: 100.0,
            ttfb_ms: 150.0,
            alt_svc: None,
            total_ms: 900.0,
            bytes: 1_000_000,
            verified: Some(true),
            goodput_mbps: 9.0,
            utilization: None,
            goodput_utilization: None,
            loss_ratio: None,
            cpu_client_s: 0.1,
            cpu_server_s: 0.1,
            cpu_client_s_per_gb: 100.0,
            cpu_server_s_per_gb: 100.0,
            cpu_emulator_s: None,
            congestion_control: "cubic".into(),
            path: "emulator".into(),
            link: quiclab_link::spec::LinkSpec::default().describe(),
            on_switch: None,
            network_switches: None,
            connections: None,
            migrations: None,
            error: None,
            fec: None,
            implementations: None,
            unmeasured: Default::default(),
            endpoints: None,
            fidelity: None,
        })
    }

    /// The result's `--json` document (without `kind`): what the workload's command prints.
    pub fn to_json(&self) -> serde_json::Result<serde_json::Value> {
        match self {
            WorkloadOutput::Bulk(r) => serde_json::to_value(r),
            WorkloadOutput::Page(r) => serde_json::to_value(r),
            WorkloadOutput::Flows(r) => serde_json::to_value(r),
            WorkloadOutput::Video(r) => serde_json::to_value(r),
        }
    }
}

/// The metrics a workload kind's runs have (its own and the emulator's).
pub fn kind_metrics(kind: WorkloadKind) -> Vec<MetricDef> {
    let mut metrics = (kind.def().metrics)();
    metrics.extend_from_slice(EMULATOR_METRICS);
    metrics
}

/// The metrics a report shows for a workload kind when the user does not choose; the first is the
/// headline ([`WorkloadResult::REPORT_METRICS`]).
pub fn report_metrics(kind: WorkloadKind) -> &'static [MetricDef] {
    kind.def().report_metrics
}

/// The headline metric of a workload kind, as its result declares it.
pub fn headline_metric(kind: WorkloadKind) -> MetricDef {
    report_metrics(kind)[0]
}

macro_rules! into_output {
    ($($variant:ident($t:ty)),*) => {$(
        impl From<$t> for WorkloadOutput {
            fn from(r: $t) -> WorkloadOutput {
                WorkloadOutput::$variant(r)
            }
        }
    )*};
}
into_output!(
    Bulk(bulk::BulkResult),
    Page(page::PageResult),
    Flows(flows::FlowsResult),
    Video(video::VideoResult)
);

/// Every metric any workload or the emulator declares, each name once (a name two workloads share
/// has one meaning: checked by a test).
pub fn registry() -> Vec<MetricDef> {
    let mut out: Vec<MetricDef> = Vec::new();
    for kind in WorkloadKind::ALL {
        for m in kind_metrics(kind) {
            if !out.iter().any(|o| o.name == m.name) {
                out.push(m);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_metric_names_mean_the_same_everywhere() {
        for a in WorkloadKind::ALL {
            for b in WorkloadKind::ALL {
                for ma in kind_metrics(a) {
                    for mb in kind_metrics(b) {
                        if ma.name == mb.name {
                            assert_eq!(ma.better, mb.better, "{} in {a:?} vs {b:?}", ma.name);
                            assert_eq!(ma.unit, mb.unit, "{} in {a:?} vs {b:?}", ma.name);
                        }
                    }
                }
            }
        }
        for kind in WorkloadKind::ALL {
            assert!(crate::metric::duplicates(&kind_metrics(kind)).is_empty());
            for shown in report_metrics(kind) {
                assert!(
                    kind_metrics(kind).contains(shown),
                    "{} is shown for {kind:?} but not declared as it is",
                    shown.name
                );
            }
        }
    }

    #[test]
    fn metrics_leave_out_what_was_not_measured() {
        let m = collect_metrics([
            ("a", Some(1.0)),
            ("b", None),
            ("c", Some(f64::NAN)),
            ("d", Some(f64::INFINITY)),
        ]);
        assert_eq!(m.keys().collect::<Vec<_>>(), ["a"]);
    }

    fn link() -> quiclab_link::spec::LinkDescription {
        quiclab_link::spec::LinkSpec::default().describe()
    }

    /// Every declared name once; every value a number or None (never an infinity).
    fn assert_declared<R: WorkloadResult>(r: &R) {
        assert!(crate::metric::duplicates(&R::metric_defs()).is_empty());
        for (name, v) in r.metric_values() {
            assert!(v.is_none_or(f64::is_finite), "{name}: {v:?}");
        }
    }

    /// Written as a run's document and read back with the types, a result is what it was.
    fn assert_stored_and_read_back<R: Into<WorkloadOutput> + Clone>(r: &R) {
        let doc = RunDocument::Finished {
            result: r.clone().into(),
        };
        let text = serde_json::to_string(&doc).unwrap();
        let back: RunDocument = serde_json::from_str(&text).unwrap();
        assert_eq!(back.status(), Status::Ok);
        assert_eq!(
            serde_json::to_value(&back).unwrap(),
            serde_json::to_value(&doc).unwrap()
        );
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            value["result"]["kind"],
            back.result().unwrap().kind().name()
        );
    }

    #[test]
    fn every_value_a_result_gives_is_declared() {
        let WorkloadOutput::Bulk(example) = WorkloadOutput::example() else {
            unreachable!("the example is a bulk result")
        };
        let bulk = bulk::BulkResult {
            verified: Some(false),
            utilization: Some(0.95),
            goodput_utilization: Some(0.9),
            loss_ratio: Some(0.0),
            ..example
        };
        assert_declared(&bulk);
        assert_stored_and_read_back(&bulk);
        // A NaN (not measured) is stored as null and comes back as NaN, not as an error or 0.
        let mut unmeasured = bulk.clone();
        unmeasured.handshake_ms = f64::NAN;
        let text = serde_json::to_string(&RunDocument::Finished {
            result: unmeasured.into(),
        })
        .unwrap();
        let Ok(RunDocument::Finished {
            result: WorkloadOutput::Bulk(b),
        }) = serde_json::from_str::<RunDocument>(&text)
        else {
            panic!("{text}")
        };
        assert!(b.handshake_ms.is_nan());
        assert!(
            bulk.failure()
                .is_some_and(|f| matches!(f, RunError::Failed(r) if r.contains("did not match")))
        );
        let page = page::PageResult {
            summary: page::PageSummary {
                proto: "h3".into(),
                browser: "builtin".into(),
                browser_version: None,
                objects: 22,
                bytes: 300_000,
                plt_ms: 700.0,
                ttfb_ms: Some(150.0),
                dom_content_loaded_ms: Some(200.0),
                connections: 1,
                negotiated_protocols: vec!["h3".into()],
                navigation_start_unix_ms: 1_763_000_000_000,
                max_streams: None,
                chromium_wall_ms: None,
                connection_details: None,
                warm: false,
                resumed_connections: None,
                zero_rtt_accepted_connections: None,
                chromium_handshakes: None,
                discovery: None,
            },
            page: "carlucci-small".into(),
            link: link(),
            loss_ratio: None,
            fec: None,
            fidelity: None,
            implementations: None,
            objects: Vec::new(),
        };
        assert_declared(&page);
        assert_stored_and_read_back(&page);
        // The navigation's wall-clock start is in the document (for the HAR), never a metric.
        let m = collect_metrics(page.metric_values());
        assert!(!m.contains_key("navigation_start_unix_ms"));
        let doc = serde_json::to_value(&page).unwrap();
        assert_eq!(doc["plt_ms"], 700.0);
        assert_eq!(doc["page"], "carlucci-small");
        // Its line names the loader as one and a server that is not quiclab's (issue 61: "(quiclab)"
        // beside --server caddy read as the server).
        let mut from_caddy = page.clone();
        from_caddy.implementations = Some(implementation::Implementations {
            server: implementation::ImplementationRecord {
                name: "caddy".into(),
                version: "v2.6.2".into(),
                congestion_control: "cubic".into(),
            },
            client: implementation::ImplementationRecord {
                name: "quiclab".into(),
                version: "0.1".into(),
                congestion_control: "cubic".into(),
            },
        });
        assert!(
            from_caddy
                .to_string()
                .starts_with("carlucci-small over h3 (quiclab's loader) from caddy v2.6.2, "),
            "{from_caddy}"
        );
        let flows = flows::FlowsResult {
            mix: "h3+h1".into(),
            jain: Some(0.9),
            jain_bins: Some(0.85),
            utilization: Some(0.99),
            goodput_utilization: Some(0.95),
            goodput_mbps: Some(9.5),
            ratio_first_rest: Some(1.5),
            share_first: Some(0.6),
            loss_ratio: Some(0.01),
            bin_ms: 100,
            cutoff_s: 5.0,
            duration_s: Some(30.0),
            size: None,
            common_window_s: Some((5.0, 25.0)),
            flows: Vec::new(),
            fec: None,
            cpu_client_s: 0.5,
            cpu_server_s: 0.5,
            link: link(),
            endpoints: None,
            fidelity: None,
            series: Vec::new(),
        };
        assert_declared(&flows);
        assert_stored_and_read_back(&flows);
        assert!(flows.failure().is_none());
        // The series are not part of the --json contract.
        assert!(
            serde_json::to_value(&flows)
                .unwrap()
                .get("series")
                .is_none()
        );
    }
}
