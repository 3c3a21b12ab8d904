//! What kinds of workload quiclab runs.

use serde::Serialize;

use crate::keys::{self, Key};
use crate::{MetricDef, WorkloadResult};

/// What a scenario's runs measure: `kind` in `[workload]`. Every match over it is exhaustive, so
/// a new kind is a compile error wherever it needs handling, never a silent fallthrough.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WorkloadKind {
    /// One download of `size` bytes over one connection.
    Bulk,
    /// One page load (built-in corpus or a directory).
    Page,
    /// Flows sharing the bottleneck (a flow mix).
    Flows,
    /// Adaptive video streaming: one or more DASH players.
    Video,
}

impl WorkloadKind {
    /// Every kind, in the order error messages list them.
    pub const ALL: [WorkloadKind; 4] = [
        WorkloadKind::Bulk,
        WorkloadKind::Page,
        WorkloadKind::Flows,
        WorkloadKind::Video,
    ];

    /// The kind's definition (its row of [`KINDS`]).
    pub const fn def(self) -> &'static KindDef {
        &KINDS[self as usize]
    }

    pub const fn name(self) -> &'static str {
        self.def().name
    }

    /// Whether its client answers network switches (`switch`): a bulk download's and a video
    /// player's do; a page load and a flow mix are refused with one.
    pub const fn answers_switches(self) -> bool {
        matches!(self, WorkloadKind::Bulk | WorkloadKind::Video)
    }

    pub fn from_name(s: &str) -> Option<WorkloadKind> {
        WorkloadKind::ALL.into_iter().find(|k| k.name() == s)
    }

    /// The `[workload]` keys of this kind (including `kind`), from the key table.
    pub fn keys(self) -> Vec<&'static str> {
        crate::keys::workload_names(self)
    }

    /// The key whose values are the contenders compared in reports: the protocol, or for flows
    /// and video the mix (of flows, of players).
    pub const fn contender_key(self) -> &'static str {
        self.def().contender_key
    }

    /// Whether the contender is a mix that names its own protocols (so `[protocol]` may only set
    /// what applies to all, the TLS version).
    pub const fn names_protocols(self) -> bool {
        self.def().names_protocols
    }

    /// The keys a run of this kind must be given: of each group, exactly one.
    pub const fn required(self) -> &'static [&'static [&'static Key]] {
        self.def().required
    }
}

/// One workload kind, defined once: its name, what its runs are compared as, and the metrics its
/// typed result declares (its keys are the rows of `keys::KEYS` whose `kinds` name it). The
/// result types themselves are [`crate::WorkloadOutput`]'s variants; the runs, the shells'
/// `WorkloadSpec`.
#[derive(Debug)]
pub struct KindDef {
    pub kind: WorkloadKind,
    pub name: &'static str,
    /// The key whose values are the contenders.
    pub contender_key: &'static str,
    /// The contender is a mix naming its own protocols.
    pub names_protocols: bool,
    /// Keys a run must be given: of each group exactly one (checked where a scenario is read,
    /// with its line, and where a run is built).
    pub required: &'static [&'static [&'static Key]],
    /// Every metric the kind's result declares ([`crate::WorkloadResult::METRICS`]).
    pub metrics: fn() -> Vec<MetricDef>,
    /// What a report shows first; the first is the headline.
    pub report_metrics: &'static [MetricDef],
}

/// Every kind, in [`WorkloadKind`]'s order (a test checks it).
pub const KINDS: [KindDef; 4] = [
    KindDef {
        kind: WorkloadKind::Bulk,
        name: "bulk",
        contender_key: keys::PROTOCOL.name,
        names_protocols: false,
        required: &[],
        metrics: <crate::bulk::BulkResult as WorkloadResult>::metric_defs,
        report_metrics: <crate::bulk::BulkResult as WorkloadResult>::REPORT_METRICS,
    },
    KindDef {
        kind: WorkloadKind::Page,
        name: "page",
        contender_key: keys::PROTOCOL.name,
        names_protocols: false,
        required: &[&[&keys::PAGE]],
        metrics: <crate::page::PageResult as WorkloadResult>::metric_defs,
        report_metrics: <crate::page::PageResult as WorkloadResult>::REPORT_METRICS,
    },
    KindDef {
        kind: WorkloadKind::Flows,
        name: "flows",
        contender_key: keys::FLOWS.name,
        names_protocols: true,
        required: &[&[&keys::FLOWS], &[&keys::FLOWS_DURATION, &keys::FLOWS_SIZE]],
        metrics: <crate::flows::FlowsResult as WorkloadResult>::metric_defs,
        report_metrics: <crate::flows::FlowsResult as WorkloadResult>::REPORT_METRICS,
    },
    KindDef {
        kind: WorkloadKind::Video,
        name: "video",
        contender_key: keys::PLAYERS.name,
        names_protocols: true,
        required: &[&[&keys::PLAYERS]],
        metrics: <crate::video::VideoResult as WorkloadResult>::metric_defs,
        report_metrics: <crate::video::VideoResult as WorkloadResult>::REPORT_METRICS,
    },
];

/// Workload kinds implemented today, by name.
pub fn workload_kind_names() -> Vec<&'static str> {
    WorkloadKind::ALL.iter().map(|k| k.name()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kinds_table_is_in_the_enums_order() {
        for (i, k) in WorkloadKind::ALL.into_iter().enumerate() {
            assert_eq!(KINDS[i].kind, k);
            assert_eq!(k as usize, i);
        }
    }
}

/// docs/experiments.md's metrics table: every metric each kind's result declares (the report's
/// defaults marked, the headline first), the emulator's and the runner's, with label, unit and
/// which direction is better — generated, so a new metric is its declaration and its value only.
pub fn metrics_markdown_table() -> String {
    use crate::metric::Better;
    let mut out = String::from(
        "| metric | measured for | label | unit | better | shown by default |\n|---|---|---|---|---|---|\n",
    );
    let mut row = |m: &MetricDef, whom: &str, shown: &str| {
        let better = match m.better {
            Better::Lower => "lower",
            Better::Higher => "higher",
        };
        let unit = if m.unit.is_empty() { "—" } else { m.unit };
        out.push_str(&format!(
            "| `{}` | {whom} | {} | {unit} | {better} | {shown} |\n",
            m.name, m.label
        ));
    };
    for kind in WorkloadKind::ALL {
        let def = kind.def();
        for (i, m) in def.report_metrics.iter().enumerate() {
            row(m, def.name, if i == 0 { "headline" } else { "yes" });
        }
        for m in &(def.metrics)() {
            if !def.report_metrics.iter().any(|r| r.name == m.name) {
                row(m, def.name, "");
            }
        }
    }
    for m in crate::EMULATOR_METRICS {
        row(m, "every run through the emulator", "");
    }
    for m in crate::runner_metrics::RUNNER_METRICS {
        row(m, "every run (the runner's own)", "");
    }
    out
}

#[cfg(test)]
mod docs_tests {
    #[test]
    fn the_docs_metrics_table_is_the_generated_one() {
        let _turn = crate::DOCS_FILE.lock().unwrap_or_else(|e| e.into_inner());
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/experiments.md");
        let doc = std::fs::read_to_string(&path).unwrap();
        let begin = "<!-- metrics:begin (generated from quiclab_model::kind::metrics_markdown_table; do not edit) -->\n";
        let end = "<!-- metrics:end -->";
        let a = doc
            .find(begin)
            .expect("docs/experiments.md: the metrics:begin marker")
            + begin.len();
        let b = doc
            .find(end)
            .expect("docs/experiments.md: the metrics:end marker");
        let table = super::metrics_markdown_table();
        if std::env::var_os("QUICLAB_WRITE_DOCS").is_some() {
            std::fs::write(&path, format!("{}{table}{}", &doc[..a], &doc[b..])).unwrap();
            return;
        }
        assert!(
            doc[a..b] == table,
            "docs/experiments.md's metrics table is not the declarations': run QUICLAB_WRITE_DOCS=1 cargo test -p quiclab-model"
        );
    }
}
