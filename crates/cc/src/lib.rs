//! Sans-IO congestion controllers for quinn.
//!
//! - [`gquic_cubic`]: a quinn congestion controller that makes one QUIC connection behave like
//!   N TCP CUBIC connections, as Google's QUIC did. The shells install it through
//!   `quinn::TransportConfig::congestion_controller_factory`; quinn drives it with timestamps,
//!   so it never reads a clock itself.
//! - [`parity_share`]: any controller's window shared between data and FEC parity, as gQUIC
//!   counted its FEC packets (`fec_in_cwnd`).
//!
//! A crate of its own (not part of `quiclab-proto`) because it needs quinn-proto, and the pure
//! data crates below the shells (`quiclab-model`) must not pull in a QUIC stack.

pub mod gquic_cubic;
pub mod parity_share;

pub use gquic_cubic::{GquicCubic, GquicCubicConfig};
pub use parity_share::{ParityShare, ParityShareConfig};
