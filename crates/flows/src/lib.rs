//! Sans-IO core of competing flows (seed 000 S1/S2, seed 002's fairness): what a flow mix is, how
//! it is labelled, and the arithmetic of per-flow throughput over time and fairness. No clock is
//! read here: times are nanoseconds on whatever clock the caller's samples use.
//!
//! - [`spec`]: a flow (`h3:gquic-cubic`), a mix (`h3:gquic-cubic + h1:cubic`) and its contender
//!   label (`h3+h1`, `h3x2+h1x2`).
//! - [`fairness`]: bytes per bin, goodput over the window [start + cutoff, end − cutoff] (Flent's
//!   `cutoff`), Jain's index J = (Σx)² / (n · Σx²) over the window means and per bin.

pub mod fairness;
pub mod spec;

pub use fairness::{Bins, jain, window_goodput_bps};
pub use spec::{FlowMix, FlowSpec, SpecError};
