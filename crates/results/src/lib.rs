//! The results store of `quiclab run`: one SQLite file per experiment (`DIR/results.sqlite`).
//!
//! Every finished run is committed in its own transaction the moment it ends, so a run killed at
//! any point (Ctrl-C, SIGKILL, power loss) keeps every run finished before it, and `--resume`
//! skips exactly those. The schema is documented in `docs/results.md`; [`SCHEMA`] is the source
//! of truth and `PRAGMA user_version` carries [`SCHEMA_VERSION`]. Each run's document
//! ([`RunDocument`]) says its outcome and carries the workload's typed result.

pub mod evidence;
mod export;
pub mod merge;
mod migrate;
mod store;

pub use export::{ExportSummary, export_csv};
pub use quiclab_model::document::{RunDocument, Status};
pub use store::{
    APPLICATION_ID, Attempt, Environment, PlanRecord, SCHEMA, SCHEMA_VERSION, ScenarioRecord,
    Series, Session, Store, StoredRun, interrupted_write, lock_and_recover, recover_interrupted,
};
