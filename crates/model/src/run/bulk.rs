//! A bulk download as data: protocol, size, the stacks' options, how the client answers network
//! switches, which programs serve and download.

use std::time::Duration;

use quiclab_link::spec::LinkSpec;
use quiclab_proto::options::{Protocol, StackOptions};

use crate::fidelity::FidelityReport;
use crate::implementation::{Client, Server};

use super::SwitchBehaviour;

/// One bulk transfer.
#[derive(Debug, Clone, PartialEq)]
pub struct BulkRun {
    pub proto: Protocol,
    pub size: u64,
    pub resume: bool,
    pub zero_rtt: bool,
    pub stack: StackOptions,
    pub ipv6: bool,
    /// With a kept directory: also write qlogs of every QUIC connection (costly: off in the runner).
    pub qlog: bool,
    /// Give up on the transfer after this long (None: [`super::default_timeout`]).
    pub timeout: Option<Duration>,
    /// How the client answers network switches (used when the link has a switch schedule).
    pub switching: SwitchBehaviour,
    /// Which program serves and which downloads (docs/stacks.md).
    pub server: Server,
    pub client: Client,
}

impl BulkRun {
    /// A download of `size` bytes over `proto` with the default stacks.
    pub fn new(proto: Protocol, size: u64) -> BulkRun {
        BulkRun {
            proto,
            size,
            resume: false,
            zero_rtt: false,
            stack: StackOptions::default(),
            ipv6: false,
            qlog: false,
            timeout: None,
            switching: SwitchBehaviour::default(),
            server: Server::Quiclab,
            client: Client::Quiclab,
        }
    }

    /// Refuses combinations the stacks cannot do.
    pub fn validate(&self) -> Result<(), String> {
        if self.zero_rtt && self.proto != Protocol::H3 {
            return Err(format!(
                "0-RTT is QUIC's (quiclab's TCP stacks send no TLS early data), but this run is {}",
                self.proto
            ));
        }
        if self.size == 0 {
            return Err("the size must be more than 0 bytes".into());
        }
        self.switching.on_switch.check(self.proto)?;
        if self.stack.fec.is_some() && self.proto != Protocol::H3 {
            return Err(format!(
                "FEC is quiclab's XOR FEC under QUIC: it needs h3, but this run is {}",
                self.proto
            ));
        }
        Ok(())
    }
}

/// Seed 000's U = r/b of a download that took `total_ms`: the bytes the bottleneck forwarded
/// downstream per second over the link's mean rate (None on an unlimited link, without the
/// emulator, or for a download that took no time).
pub fn utilization(
    spec: &LinkSpec,
    fidelity: Option<&FidelityReport>,
    total_ms: f64,
) -> Option<f64> {
    match (spec.downlink.mean_rate_bps(), fidelity) {
        (Some(r), Some(f)) if total_ms > 0.0 => {
            Some(f.downlink.model.counters.forwarded_bytes as f64 * 8.0 / (total_ms / 1e3) / r)
        }
        _ => None,
    }
}
