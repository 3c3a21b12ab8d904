//! The `gquic-cubic` congestion controller (CUBIC emulating N connections, as Google's QUIC did),
//! from `quiclab-proto`, as a quinn controller factory.

use std::sync::Arc;

use anyhow::Result;

/// N, the number of TCP connections gquic-cubic emulates, from `QUICLAB_GQUIC_N` (set by the
/// `--gquic-n` flag of serve/fetch/bulk), default 2 as in Google's QUIC.
pub fn connections() -> Result<u32> {
    match std::env::var("QUICLAB_GQUIC_N") {
        Ok(v) => v.parse::<u32>().ok().filter(|n| *n >= 1).ok_or_else(|| {
            anyhow::anyhow!("--gquic-n: expected a whole number of connections >= 1, got {v:?}")
        }),
        Err(_) => Ok(quiclab_proto::gquic_cubic::DEFAULT_CONNECTIONS),
    }
}

/// Factory for quinn with N connections (see [`connections`]) and the given initial window.
pub fn factory(
    initial_window_packets: u64,
) -> Result<Arc<dyn quinn::congestion::ControllerFactory + Send + Sync>> {
    let config =
        quiclab_proto::gquic_cubic::GquicCubicConfig::new(connections()?, initial_window_packets)?;
    Ok(Arc::new(config))
}
