//! Sans-IO core of `quiclab run`: scenario → plan of runs → statistics.
//!
//! * [`scenario`] parses and validates a TOML scenario file (the only I/O in
//!   this crate is [`scenario::load`], which reads that one file).
//! * [`plan`] expands a scenario's grid into an ordered list of runs with
//!   stable identities and deterministic per-run seeds.
//! * [`stats`] summarises measurements (mean, median, Student-t confidence
//!   intervals, CDFs) and decides which protocol wins a setting.
//!
//! * [`admission`] decides which runs may share the machine (by expected CPU)
//!   and how long a plan takes at a concurrency.
//!
//! * [`metric`] is the registry format in which workloads, the runner and the
//!   emulator declare what each of their numbers is.
//!
//! The runner that executes the runs in labs and stores them in SQLite is the
//! crate `quiclab-runner`; keeping this part free of I/O makes it
//! deterministic and testable.

pub use quiclab_model::metric;
pub mod admission;
pub mod plan;
pub mod scenario;
pub mod stats;

pub use metric::{Better, MetricDef};
pub use plan::{
    MAX_PLAN_RUNS, MAX_REPETITIONS, RunSpec, Shard, ShardFilter, check_plan_size, estimate_seconds,
    expand, for_each_run, shard_of,
};
pub use scenario::{
    Located, Order, Quick, Scenario, ScenarioError, TraceRuns, Value, WorkloadKind, load, parse,
    same_experiment,
};
pub use stats::{Summary, Winners, beats, cdf, improvement, summarize, winners};
