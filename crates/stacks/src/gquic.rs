//! The `gquic-cubic` congestion controller (CUBIC emulating N connections, as Google's QUIC did),
//! from `quiclab-proto`, as a quinn controller factory.

use std::sync::Arc;

use anyhow::Result;

/// Factory for quinn with the default N = 2 connections and the given initial window.
pub fn factory(
    initial_window_packets: u64,
) -> Result<Arc<dyn quinn::congestion::ControllerFactory + Send + Sync>> {
    let config = quiclab_proto::gquic_cubic::GquicCubicConfig::new(
        quiclab_proto::gquic_cubic::DEFAULT_CONNECTIONS,
        initial_window_packets,
    )?;
    Ok(Arc::new(config))
}
