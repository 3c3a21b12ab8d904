//! The bottleneck's queue when a discipline decides at dequeue time (CoDel, FQ-CoDel, PIE).
//!
//! Tail drop fixes a packet's departure when it arrives ([`LinkModel`]'s own path). A discipline
//! that decides at dequeue cannot: whether the head is sent, dropped or marked depends on how long
//! it waited by the time the bottleneck is free. So here the model holds each admitted packet
//! (by the caller's id), and the bottleneck pulls packets from the discipline in virtual time:
//! whenever the server is free and the queue is not empty, at the exact instant that happens,
//! whatever the caller's clock did. The caller feeds arrivals in time order and asks what has
//! been settled up to its `now`; packets are never settled ahead of `now`, because an arrival
//! still to come could change a later decision (FQ-CoDel serves a new flow first).

use std::collections::{HashMap, VecDeque};

use crate::aqm::{AqmCounters, Discipline, QueuedPacket};
use crate::flow::FlowKey;
use crate::{Nanos, model::Server};

/// What became of a packet the discipline held ([`crate::Disposition::Held`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    /// It crosses the link; `marked`: the discipline set its ECN field to CE.
    Forward {
        id: u64,
        departure: crate::Departure,
        marked: bool,
    },
    /// Dropped by the discipline's rule (CoDel/FQ-CoDel at dequeue), at `at`.
    DroppedAqm { id: u64, at: Nanos },
    /// Dropped to make room (FQ-CoDel drops the fattest flow's head when over its limit), at `at`.
    DroppedOverflow { id: u64, at: Nanos },
}

impl Settled {
    pub fn id(&self) -> u64 {
        match *self {
            Settled::Forward { id, .. }
            | Settled::DroppedAqm { id, .. }
            | Settled::DroppedOverflow { id, .. } => id,
        }
    }
}

/// A held packet's flow, for the per-flow counters once its fate is known.
#[derive(Debug, Clone, Copy)]
pub(super) struct HeldPacket {
    pub key: Option<FlowKey>,
    pub arrival: Nanos,
}

/// The discipline, the packets it holds, and when the server can take the next one.
#[derive(Debug, Clone)]
pub(super) struct DisciplineQueue {
    pub discipline: Discipline,
    pub held: HashMap<u64, HeldPacket>,
    /// The exact end (rounded up) of the last packet's serialisation.
    pub free_at: Nanos,
    /// When the queue last went from empty to not empty.
    pub nonempty_since: Nanos,
    pub scratch: Vec<QueuedPacket>,
    pub settled: VecDeque<Settled>,
}

impl DisciplineQueue {
    pub fn new(discipline: Discipline) -> DisciplineQueue {
        DisciplineQueue {
            discipline,
            held: HashMap::new(),
            free_at: 0,
            nonempty_since: 0,
            scratch: Vec::new(),
            settled: VecDeque::new(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.discipline.backlog().1 == 0
    }

    /// When the server takes the next packet, if any is waiting.
    pub fn next_dequeue(&self, server: &Server) -> Option<Nanos> {
        (!self.is_empty()).then(|| server.ready_at(self.free_at.max(self.nonempty_since)))
    }

    pub fn counters(&self) -> AqmCounters {
        self.discipline.counters()
    }
}

/// A stable 64-bit hash of a flow (FQ-CoDel's bucket): FNV-1a over the key's bytes (protocol,
/// then each end's address and port), the same across runs and machines (std's hasher is not
/// promised to be). Called per packet: no allocation.
pub(super) fn flow_hash(key: Option<&FlowKey>) -> u64 {
    let Some(key) = key else { return 0 };
    let fnv = |h: u64, bytes: &[u8]| {
        bytes
            .iter()
            .fold(h, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
    };
    let end = |h: u64, a: &std::net::SocketAddr| {
        let h = match a.ip() {
            std::net::IpAddr::V4(ip) => fnv(h, &ip.octets()),
            std::net::IpAddr::V6(ip) => fnv(h, &ip.octets()),
        };
        fnv(h, &a.port().to_be_bytes())
    };
    let proto = match key.transport {
        crate::flow::Transport::Tcp => 6u8,
        crate::flow::Transport::Udp => 17,
    };
    end(
        end(fnv(0xcbf2_9ce4_8422_2325, &[proto]), &key.low),
        &key.high,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flows_hash_apart_and_both_directions_alike() {
        let key = |a: &str, b: &str| {
            FlowKey::new(
                crate::flow::Transport::Tcp,
                a.parse().unwrap(),
                b.parse().unwrap(),
            )
        };
        let k = key("10.0.0.1:1000", "10.0.0.2:443");
        assert_eq!(
            flow_hash(Some(&k)),
            flow_hash(Some(&key("10.0.0.2:443", "10.0.0.1:1000")))
        );
        assert_ne!(
            flow_hash(Some(&k)),
            flow_hash(Some(&key("10.0.0.1:1001", "10.0.0.2:443")))
        );
        assert_eq!(flow_hash(None), 0);
    }
}
