//! Sans-IO model of one emulated network link direction.
//!
//! This crate is the deterministic core of quiclab's link emulator, in the spirit of
//! Mahimahi's `mm-link`, `mm-delay` and `mm-loss`: a bottleneck with a rate (constant,
//! a Mahimahi packet-delivery trace, or a time-varying profile), a tail-drop queue, a
//! random-loss process and a propagation delay.
//!
//! # Why sans-IO
//!
//! Nothing here reads a clock, sleeps, spawns a thread or touches a socket. Time is an
//! explicit argument ([`Nanos`], nanoseconds since an arbitrary epoch chosen by the caller),
//! so the whole model is a pure function of its configuration, its seed and the sequence
//! of `(arrival time, size)` it is fed. That makes every behaviour reproducible and lets
//! the unit tests run hours of virtual time in milliseconds without flakiness.
//!
//! The I/O shell (crate `quiclab-lab`) owns the real world: it reads a packet from a TUN
//! device, calls [`LinkModel::on_arrival`] with its own monotonic clock, and, when the
//! verdict is [`Disposition::Forward`], holds the packet until [`Departure::deliver_at`] and
//! then writes it out on the other side. Dropped packets are simply not written.
//! Because the model computes each packet's departure at arrival time, the shell needs
//! only a timer queue ordered by `deliver_at` (which is non-decreasing, so a FIFO suffices).
//!
//! The only I/O in this crate is the explicit file-loading helpers
//! ([`DeliveryTrace::load`], [`profile::load`]), kept here so that file parsing and its
//! error messages are tested together with the formats.
//!
//! # Modules
//!
//! - [`units`]: parsing and formatting of command-line values (rates, durations, queue sizes, loss).
//! - [`trace`]: Mahimahi-compatible delivery traces.
//! - [`profile`]: time-varying link profiles (TOML / CSV, plus built-in DASH-IF NP2b profiles).
//! - [`loss`]: seeded Bernoulli and Gilbert–Elliott loss.
//! - [`model`]: the link model of one direction ([`LinkModel`]).
//! - [`stats`]: percentile summaries shared with the I/O shell.
//! - [`aqm`]: queue disciplines decided at dequeue time — CoDel, FQ-CoDel, PIE, with ECN marking —
//!   beside tail drop, as pure state machines; [`LinkModel`] runs the one configured.
//! - [`wire`]: the IP header fields the link reads or rewrites (ECN).
//! - [`spec`]: a whole link (both directions) as asked for ([`LinkSpec`]), turned into the two
//!   directions' configurations.
//! - [`options`]: the link options every lab command and scenario shares ([`LinkOptions`]), each
//!   settable by name and parsed once by [`units`], and how they make a [`LinkSpec`].

pub mod aqm;
pub mod error;
pub mod flow;
pub mod input;
pub mod lane;
pub mod loss;
pub mod model;
pub mod options;
pub mod profile;
pub mod spec;
pub mod stats;
pub mod switch;
pub mod trace;
pub mod units;
pub mod variation;
pub mod wake;
pub mod wire;

/// A point in time or a duration, in nanoseconds. Points in time are relative to an
/// arbitrary epoch chosen by the caller (typically the lab's start); only differences and
/// ordering matter to the model.
pub type Nanos = u64;

/// Nanoseconds per microsecond.
pub const NANOS_PER_US: Nanos = 1_000;
/// Nanoseconds per millisecond.
pub const NANOS_PER_MS: Nanos = 1_000_000;
/// Nanoseconds per second.
pub const NANOS_PER_SEC: Nanos = 1_000_000_000;

pub use error::ParseError;
pub use flow::{FlowCounters, FlowKey, FlowSummary, Transport};
pub use loss::LossProcess;
pub use model::{
    Counters, Departure, DirectionConfig, Disposition, LinkModel, ModelError, ModelSummary,
    RateSpec, Settled,
};
pub use options::LinkOptions;
pub use profile::{Profile, ProfileStep};
pub use spec::{DirectionSpec, LinkSpec};
pub use stats::Distribution;
pub use trace::DeliveryTrace;
pub use units::{
    LossSpec, QueueLimit, UnitError, format_duration, format_rate, parse_duration, parse_loss,
    parse_probability, parse_queue, parse_rate,
};
