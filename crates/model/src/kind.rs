//! What kinds of workload quiclab runs.

use serde::Serialize;

/// What a scenario's runs measure: `kind` in `[workload]`. Every match over it is exhaustive, so
/// a new kind is a compile error wherever it needs handling, never a silent fallthrough.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
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

    pub const fn name(self) -> &'static str {
        match self {
            WorkloadKind::Bulk => "bulk",
            WorkloadKind::Page => "page",
            WorkloadKind::Flows => "flows",
            WorkloadKind::Video => "video",
        }
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
        match self {
            WorkloadKind::Bulk | WorkloadKind::Page => "protocol",
            WorkloadKind::Flows => "flows",
            WorkloadKind::Video => "players",
        }
    }

    /// Whether the contender is a mix that names its own protocols (so `[protocol]` may only set
    /// what applies to all, the TLS version).
    pub const fn names_protocols(self) -> bool {
        matches!(self, WorkloadKind::Flows | WorkloadKind::Video)
    }
}

/// Workload kinds implemented today, by name.
pub fn workload_kind_names() -> Vec<&'static str> {
    WorkloadKind::ALL.iter().map(|k| k.name()).collect()
}
