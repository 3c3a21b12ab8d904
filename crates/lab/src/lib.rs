//! The I/O shell of quiclab: everything that touches the operating system.
//!
//! - [`topology`]: a lab = two network namespaces with a TUN device each (plus crash-proof records);
//! - [`emulator`]: the scheduler thread (both directions in one loop) that carries packets between
//!   the TUNs through the sans-IO [`quiclab_link::LinkModel`];
//! - [`probe`]: quiclab's own measurement probes (UDP echo, kernel-TCP bulk, paced UDP) used by
//!   [`calibrate`] (the measurement and verdicts of `quiclab calibrate`) and the tests;
//! - [`netns`], [`process`], [`registry`]: namespaces, the processes a lab starts, emergency teardown.

pub mod bench;
pub mod calibrate;
pub mod capture;
pub mod counters;
pub mod cpu_limit;
pub mod emulator;
pub mod guard;
pub mod host;
pub mod link_spec;
pub mod netns;
pub mod noise;
pub mod offload;
pub mod os;
pub mod packet_log;
pub mod probe;
pub mod process;
pub mod registry;
pub mod running;
pub mod shell;
pub mod stats;
pub mod switcher;
pub mod tolerance;
pub mod topology;

pub use emulator::{Emulator, EmulatorConfig, SchedulerOptions};
pub use link_spec::{DirectionSpec, LinkSpec};
pub use quiclab_link::LinkOptions;
pub use quiclab_model::fidelity::FidelityReport;
pub use running::RunningLab;
pub use topology::{Lab, LabOptions, Side};
