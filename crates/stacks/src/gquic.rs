//! The `gquic-cubic` congestion controller (CUBIC emulating N connections, as Google's QUIC did),
//! from `quiclab-proto`, as a quinn controller factory.

use std::sync::Arc;

use anyhow::Result;

/// Factory for quinn emulating `connections` TCP connections (N, 2 in Google's QUIC) with the
/// given initial window.
pub fn factory(
    connections: u32,
    initial_window_packets: u64,
) -> Result<Arc<dyn quinn::congestion::ControllerFactory + Send + Sync>> {
    let config =
        quiclab_cc::gquic_cubic::GquicCubicConfig::new(connections, initial_window_packets)?;
    Ok(Arc::new(config))
}
