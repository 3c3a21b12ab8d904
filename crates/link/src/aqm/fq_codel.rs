//! FQ-CoDel (RFC 8290): packets are hashed by flow into `flows` queues, each under its own CoDel;
//! a deficit round robin with `quantum` bytes serves them, new flows (queues that just became
//! active) before old ones, so a thin flow's packets do not wait behind a bulk flow's standing
//! queue. When the limits are exceeded, the head of the queue with the most bytes is dropped.

use std::collections::VecDeque;

use super::codel::CodelState;
use super::{
    Admission, AqmCounters, CodelParams, Departing, Fifo, Limits, QueuedPacket, departing,
};
use crate::Nanos;

/// FQ-CoDel's parameters (RFC 8290 §4–5).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FqCodelParams {
    /// Flow queues (1024); a flow's queue is its hash modulo this.
    pub flows: u32,
    /// Bytes a queue may send per round (1514: one full-size Ethernet frame).
    pub quantum: u32,
    /// Every queue's CoDel.
    pub codel: CodelParams,
}

impl Default for FqCodelParams {
    fn default() -> FqCodelParams {
        FqCodelParams {
            flows: 1024,
            quantum: 1514,
            codel: CodelParams::default(),
        }
    }
}

impl FqCodelParams {
    pub fn validate(&self) -> Result<(), String> {
        if !(1..=65536).contains(&self.flows) {
            return Err(format!(
                "fq-codel flows must be 1 to 65536 (the RFC's default: 1024); got {}",
                self.flows
            ));
        }
        if self.quantum < 64 {
            return Err(format!(
                "fq-codel quantum must be at least 64 bytes (the RFC's default: 1514); got {}",
                self.quantum
            ));
        }
        self.codel.validate()
    }
}

/// Which list a flow queue is on (RFC 8290 §4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum List {
    New,
    Old,
}

#[derive(Debug, Clone, Default)]
struct FlowQueue {
    fifo: Fifo,
    codel: CodelState,
    deficit: i64,
    /// None: the queue is inactive (on neither list).
    list: Option<List>,
}

/// The queues and their scheduler.
#[derive(Debug, Clone)]
pub struct FqCodel {
    params: FqCodelParams,
    limits: Limits,
    queues: Vec<FlowQueue>,
    new_flows: VecDeque<usize>,
    old_flows: VecDeque<usize>,
    bytes: u64,
    packets: u64,
    counters: AqmCounters,
}

impl FqCodel {
    pub fn new(params: FqCodelParams, limits: Limits) -> FqCodel {
        FqCodel {
            params,
            limits,
            queues: vec![FlowQueue::default(); params.flows.max(1) as usize],
            new_flows: VecDeque::new(),
            old_flows: VecDeque::new(),
            bytes: 0,
            packets: 0,
            counters: AqmCounters::default(),
        }
    }

    /// The queue a flow hashes to.
    pub fn queue_of(&self, flow: u64) -> usize {
        (flow % self.queues.len() as u64) as usize
    }

    /// RFC 8290 §4.1: stamp, append to the flow's queue (a queue that was inactive joins the new
    /// flows with a full quantum), then, over the limits, drop from the head of the fattest queue
    /// until under them. The offered packet is refused only when it is itself such a head.
    pub(super) fn enqueue(
        &mut self,
        now: Nanos,
        mut p: QueuedPacket,
        dropped: &mut Vec<QueuedPacket>,
    ) -> Admission {
        self.counters.offered += 1;
        p.enqueued_at = now;
        let i = self.queue_of(p.flow);
        let q = &mut self.queues[i];
        q.fifo.push(p);
        if q.list.is_none() {
            q.list = Some(List::New);
            q.deficit = self.params.quantum as i64;
            self.new_flows.push_back(i);
        }
        self.bytes += p.bytes as u64;
        self.packets += 1;
        let mut refused = false;
        while self.limits.exceeded_by(self.bytes, self.packets) {
            let fattest = (0..self.queues.len())
                .max_by_key(|&j| self.queues[j].fifo.bytes)
                .expect("at least one queue");
            let Some(head) = self.queues[fattest].fifo.pop() else {
                break;
            };
            self.bytes -= head.bytes as u64;
            self.packets -= 1;
            self.counters.overflow_drops += 1;
            if head == p {
                refused = true;
            } else {
                dropped.push(head);
            }
        }
        if refused {
            Admission::Overflow
        } else {
            Admission::Queued
        }
    }

    /// RFC 8290 §4.2: serve new flows first, then old ones, a quantum per round; a queue whose
    /// deficit is spent goes to the back of the old flows with a quantum more; a new flow that
    /// empties moves to the old flows (so it cannot come back as new at once), an old one that
    /// empties becomes inactive.
    pub(super) fn dequeue(
        &mut self,
        now: Nanos,
        dropped: &mut Vec<QueuedPacket>,
    ) -> Option<Departing> {
        loop {
            let (from_new, i) = match (self.new_flows.front(), self.old_flows.front()) {
                (Some(&i), _) => (true, i),
                (None, Some(&i)) => (false, i),
                (None, None) => return None,
            };
            let list = if from_new {
                &mut self.new_flows
            } else {
                &mut self.old_flows
            };
            let q = &mut self.queues[i];
            if q.deficit <= 0 {
                q.deficit += self.params.quantum as i64;
                list.pop_front();
                q.list = Some(List::Old);
                self.old_flows.push_back(i);
                continue;
            }
            let others = self.bytes - q.fifo.bytes;
            let before = dropped.len();
            let out = q
                .codel
                .dequeue(now, &mut q.fifo, others, &self.params.codel, dropped);
            for d in &dropped[before..] {
                self.bytes -= d.bytes as u64;
                self.packets -= 1;
                self.counters.aqm_drops += 1;
            }
            match out {
                None => {
                    list.pop_front();
                    if from_new {
                        q.list = Some(List::Old);
                        self.old_flows.push_back(i);
                    } else {
                        q.list = None;
                    }
                }
                Some((p, marked)) => {
                    q.deficit -= p.bytes as i64;
                    self.bytes -= p.bytes as u64;
                    self.packets -= 1;
                    self.counters.dequeued += 1;
                    self.counters.marks += marked as u64;
                    return Some(departing(now, p, marked));
                }
            }
        }
    }

    pub(super) fn backlog(&self) -> (u64, u64) {
        (self.bytes, self.packets)
    }

    pub(super) fn counters(&self) -> AqmCounters {
        self.counters
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NANOS_PER_MS;
    use crate::aqm::{Discipline, DisciplineSpec};

    const MS: Nanos = NANOS_PER_MS;

    fn fq(limits: Limits) -> Discipline {
        DisciplineSpec::FqCodel(FqCodelParams::default()).build(limits, 1)
    }

    #[test]
    fn a_thin_flow_is_served_before_a_bulk_flows_standing_queue() {
        // 100 packets of a bulk flow wait; a thin flow's packet arrives behind them. Tail drop
        // would send it 98th; FQ-CoDel sends it next: its queue is a new flow, and the bulk
        // flow has spent its first quantum (two packets) and moved to the old flows.
        let mut d = fq(Limits::default());
        let mut dropped = Vec::new();
        for id in 0..100 {
            d.enqueue(0, QueuedPacket::new(id, 1500, 1), &mut dropped);
        }
        for (k, id) in [0, 1, 2].into_iter().enumerate() {
            let t = (k as u64 + 1) * MS;
            assert_eq!(d.dequeue(t, &mut dropped).unwrap().packet.id, id);
        }
        d.enqueue(3 * MS, QueuedPacket::new(1000, 100, 2), &mut dropped);
        let next = d.dequeue(4 * MS, &mut dropped).unwrap();
        assert_eq!((next.packet.id, next.sojourn), (1000, MS));
        assert!(dropped.is_empty());
    }

    #[test]
    fn two_backlogged_flows_share_by_bytes_not_packets() {
        // Flow 1 sends 1500-byte packets, flow 2 500-byte ones, both always backlogged: deficit
        // round robin gives each about the same bytes, so flow 2 sends about 3 packets per one
        // of flow 1.
        let mut d = fq(Limits::default());
        let mut dropped = Vec::new();
        for id in 0..300 {
            d.enqueue(0, QueuedPacket::new(id, 1500, 1), &mut dropped);
            d.enqueue(0, QueuedPacket::new(10_000 + id, 500, 2), &mut dropped);
        }
        let mut bytes = [0u64; 3];
        // Dequeued before CoDel's first drop could come (sojourn above 5 ms for 100 ms).
        for k in 0..200 {
            let p = d.dequeue(k * MS / 10, &mut dropped).unwrap().packet;
            bytes[p.flow as usize] += p.bytes as u64;
        }
        assert!(dropped.is_empty());
        let share = bytes[1] as f64 / (bytes[1] + bytes[2]) as f64;
        assert!((share - 0.5).abs() < 0.02, "{bytes:?}");
    }

    #[test]
    fn over_the_limit_the_fattest_queue_loses_its_head() {
        let limits = Limits {
            bytes: None,
            packets: Some(4),
        };
        let mut d = fq(limits);
        let mut dropped = Vec::new();
        for id in 0..3 {
            assert_eq!(
                d.enqueue(0, QueuedPacket::new(id, 1500, 1), &mut dropped),
                Admission::Queued
            );
        }
        assert_eq!(
            d.enqueue(0, QueuedPacket::new(10, 100, 2), &mut dropped),
            Admission::Queued
        );
        // The fifth packet (of the thin flow) overflows: flow 1's head goes, not it.
        assert_eq!(
            d.enqueue(0, QueuedPacket::new(11, 100, 2), &mut dropped),
            Admission::Queued
        );
        assert_eq!(dropped.iter().map(|p| p.id).collect::<Vec<_>>(), [0]);
        assert_eq!(d.backlog(), (2 * 1500 + 200, 4));
        // A packet of the fattest flow that is itself its queue's head is refused.
        let mut lone = fq(Limits {
            bytes: Some(1000),
            packets: None,
        });
        let mut dropped = Vec::new();
        assert_eq!(
            lone.enqueue(0, QueuedPacket::new(1, 1500, 3), &mut dropped),
            Admission::Overflow
        );
        assert!(dropped.is_empty());
        assert_eq!(lone.backlog(), (0, 0));
        let c = lone.counters();
        assert_eq!((c.offered, c.overflow_drops), (1, 1));
    }

    #[test]
    fn each_flow_has_its_own_codel() {
        // A bulk flow with a standing queue is dropped from; a sparse flow whose packets leave
        // at once is never dropped, though both share the link.
        let mut d = fq(Limits::default());
        let mut dropped = Vec::new();
        for id in 0..400 {
            d.enqueue(0, QueuedPacket::new(id, 1500, 1), &mut dropped);
        }
        let mut t = 0;
        let mut sparse_sojourns = Vec::new();
        for k in 0..300 {
            t += MS;
            // From 6 ms on the bulk flow is on the old list: a sparse packet is a new flow.
            if k % 10 == 5 {
                d.enqueue(t, QueuedPacket::new(5000 + k, 100, 2), &mut dropped);
            }
            let p = d.dequeue(t, &mut dropped).unwrap();
            if p.packet.flow == 2 {
                sparse_sojourns.push(p.sojourn);
            }
        }
        assert!(!dropped.is_empty());
        assert!(dropped.iter().all(|p| p.flow == 1), "{dropped:?}");
        assert_eq!(sparse_sojourns.len(), 30);
        assert!(
            sparse_sojourns.iter().all(|&s| s <= MS),
            "{sparse_sojourns:?}"
        );
        let c = d.counters();
        assert_eq!(c.aqm_drops as usize, dropped.len());
        let (bytes, packets) = d.backlog();
        assert_eq!(packets, 430 - c.dequeued - c.aqm_drops);
        assert!(bytes > 0);
    }

    #[test]
    fn parameters_out_of_range_are_named() {
        let e = FqCodelParams {
            flows: 0,
            ..Default::default()
        }
        .validate()
        .unwrap_err();
        assert!(e.contains("flows must be 1 to 65536"), "{e}");
        let e = FqCodelParams {
            quantum: 10,
            ..Default::default()
        }
        .validate()
        .unwrap_err();
        assert!(e.contains("quantum must be at least 64"), "{e}");
    }
}
