//! CoDel (RFC 8289): drop from the head when packets have waited longer than `target` for at
//! least `interval`, then drop again at intervals shrinking as `interval / √count` until the
//! sojourn time falls below `target`. The state machine follows the RFC's pseudocode (its Linux
//! variant, which the RFC prints) line for line; [`CodelState`] is kept apart from the packets so
//! that FQ-CoDel can run one per flow.

use super::{Admission, AqmCounters, Departing, Fifo, Limits, QueuedPacket, departing, ms};
use crate::{NANOS_PER_MS, Nanos};

/// CoDel's parameters (RFC 8289 §4.2–4.3).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CodelParams {
    /// The acceptable standing queue delay (5 ms).
    pub target: Nanos,
    /// The window over which the sojourn time must stay above `target` before a drop (100 ms).
    pub interval: Nanos,
    /// A backlog of at most this many bytes is never dropped from (RFC 8289 §5.3's maxpacket:
    /// one MTU, so that a queue holding a single packet is left alone).
    pub mtu: u32,
    /// Mark ECN-capable packets CE instead of dropping them.
    pub ecn: bool,
}

impl Default for CodelParams {
    fn default() -> CodelParams {
        CodelParams {
            target: 5 * NANOS_PER_MS,
            interval: 100 * NANOS_PER_MS,
            mtu: 1514,
            ecn: false,
        }
    }
}

impl CodelParams {
    pub fn validate(&self) -> Result<(), String> {
        if self.target == 0 {
            return Err("codel target must be above 0 (the RFC's default: 5 ms)".into());
        }
        if self.interval == 0 {
            return Err("codel interval must be above 0 (the RFC's default: 100 ms)".into());
        }
        if self.target >= self.interval {
            return Err(format!(
                "codel target ({}) must be below its interval ({}); the RFC's defaults are 5 ms \
                 and 100 ms",
                ms(self.target),
                ms(self.interval)
            ));
        }
        Ok(())
    }
}

/// The control law: the next drop `interval / √count` after `t`.
fn control_law(t: Nanos, count: u32, interval: Nanos) -> Nanos {
    t + (interval as f64 / (count.max(1) as f64).sqrt()) as Nanos
}

/// CoDel's variables of one queue (RFC 8289 §5.1).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct CodelState {
    /// When the sojourn time will have stayed above target for an interval (None: it is below).
    first_above_time: Option<Nanos>,
    /// When the next drop is due while dropping.
    drop_next: Nanos,
    /// Drops (and marks) since entering the dropping state.
    count: u32,
    /// `count` when the dropping state was last entered.
    lastcount: u32,
    dropping: bool,
}

impl CodelState {
    /// RFC 8289's `dodequeue`: the head packet, and whether it may be dropped. `others` are the
    /// bytes queued elsewhere that count towards the backlog (FQ-CoDel's other flows, as Linux
    /// counts the whole qdisc's backlog).
    fn dodequeue(
        &mut self,
        now: Nanos,
        fifo: &mut Fifo,
        others: u64,
        p: &CodelParams,
    ) -> (Option<QueuedPacket>, bool) {
        let Some(pkt) = fifo.pop() else {
            self.first_above_time = None;
            return (None, false);
        };
        let sojourn = now.saturating_sub(pkt.enqueued_at);
        let mut ok_to_drop = false;
        if sojourn < p.target || fifo.bytes + others <= p.mtu as u64 {
            // Below target, or too little queued to matter: leave (or stay out of) the window.
            self.first_above_time = None;
        } else {
            match self.first_above_time {
                None => self.first_above_time = Some(now + p.interval),
                Some(t) if now >= t => ok_to_drop = true,
                Some(_) => {}
            }
        }
        (Some(pkt), ok_to_drop)
    }

    /// RFC 8289's `dequeue`: the packet to send and whether it is marked CE, dropping from the
    /// head (into `dropped`) while the control law says so.
    pub(super) fn dequeue(
        &mut self,
        now: Nanos,
        fifo: &mut Fifo,
        others: u64,
        p: &CodelParams,
        dropped: &mut Vec<QueuedPacket>,
    ) -> Option<(QueuedPacket, bool)> {
        let (mut pkt, ok_to_drop) = self.dodequeue(now, fifo, others, p);
        if self.dropping {
            if !ok_to_drop {
                // Sojourn time below target: leave the dropping state.
                self.dropping = false;
            }
            while self.dropping && now >= self.drop_next {
                let head = pkt?;
                self.count += 1;
                if p.ecn && head.ect {
                    // Marked instead of dropped; the schedule advances as after a drop, and
                    // the marked packet is the one sent (Linux's codel_dequeue).
                    self.drop_next = control_law(self.drop_next, self.count, p.interval);
                    return Some((head, true));
                }
                dropped.push(head);
                let (next, ok) = self.dodequeue(now, fifo, others, p);
                pkt = next;
                if !ok {
                    self.dropping = false;
                } else {
                    self.drop_next = control_law(self.drop_next, self.count, p.interval);
                }
            }
        } else if ok_to_drop {
            let head = pkt.expect("a packet may be dropped only when there is one");
            let marked = p.ecn && head.ect;
            if !marked {
                dropped.push(head);
                pkt = self.dodequeue(now, fifo, others, p).0;
            }
            self.dropping = true;
            // If the queue went above target soon after it last went below, start from the drop
            // rate that controlled it then. `now - drop_next` is compared as Linux does (a time
            // before drop_next counts as close), hence the saturating subtraction.
            let delta = self.count.wrapping_sub(self.lastcount);
            self.count = 1;
            if delta > 1 && now.saturating_sub(self.drop_next) < 16 * p.interval {
                self.count = delta;
            }
            self.drop_next = control_law(now, self.count, p.interval);
            self.lastcount = self.count;
            if marked {
                return Some((head, true));
            }
        }
        pkt.map(|x| (x, false))
    }
}

/// One queue under CoDel.
#[derive(Debug, Clone)]
pub struct Codel {
    fifo: Fifo,
    state: CodelState,
    params: CodelParams,
    limits: Limits,
    counters: AqmCounters,
}

impl Codel {
    pub fn new(params: CodelParams, limits: Limits) -> Codel {
        Codel {
            fifo: Fifo::default(),
            state: CodelState::default(),
            params,
            limits,
            counters: AqmCounters::default(),
        }
    }

    pub(super) fn enqueue(&mut self, now: Nanos, p: QueuedPacket) -> Admission {
        self.fifo
            .enqueue_tail(&self.limits, &mut self.counters, now, p)
    }

    pub(super) fn dequeue(
        &mut self,
        now: Nanos,
        dropped: &mut Vec<QueuedPacket>,
    ) -> Option<Departing> {
        let before = dropped.len();
        let out = self
            .state
            .dequeue(now, &mut self.fifo, 0, &self.params, dropped);
        self.counters.aqm_drops += (dropped.len() - before) as u64;
        let (p, marked) = out?;
        self.counters.dequeued += 1;
        self.counters.marks += marked as u64;
        Some(departing(now, p, marked))
    }

    pub(super) fn backlog(&self) -> (u64, u64) {
        (self.fifo.bytes, self.fifo.len())
    }

    pub(super) fn counters(&self) -> AqmCounters {
        self.counters
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aqm::{Discipline, DisciplineSpec};

    const MS: Nanos = NANOS_PER_MS;

    fn codel(ecn: bool) -> Discipline {
        DisciplineSpec::Codel(CodelParams::default())
            .with_ecn(ecn)
            .build(Limits::default(), 1)
    }

    fn pkt(id: u64, ect: bool) -> QueuedPacket {
        QueuedPacket {
            ect,
            ..QueuedPacket::new(id, 1500, 1)
        }
    }

    /// A standing queue: `n` packets enqueued at t = 0, then one dequeue every `gap`; returns,
    /// per dequeue call, (time, id sent, ids dropped, marked).
    fn drain(
        d: &mut Discipline,
        n: u64,
        gap: Nanos,
        ect: bool,
    ) -> Vec<(Nanos, u64, Vec<u64>, bool)> {
        let mut dropped = Vec::new();
        for id in 0..n {
            assert_eq!(
                d.enqueue(0, pkt(id, ect), &mut dropped),
                crate::aqm::Admission::Queued
            );
        }
        let mut out = Vec::new();
        let mut t = 0;
        loop {
            t += gap;
            dropped.clear();
            let Some(dep) = d.dequeue(t, &mut dropped) else {
                break;
            };
            out.push((
                t,
                dep.packet.id,
                dropped.iter().map(|p| p.id).collect(),
                dep.marked,
            ));
        }
        out
    }

    #[test]
    fn below_target_nothing_is_dropped() {
        // Dequeued 1 ms apart from a burst of 4: sojourn 1..4 ms < 5 ms.
        let out = drain(&mut codel(false), 4, MS, false);
        assert_eq!(out.len(), 4);
        assert!(out.iter().all(|(_, _, d, _)| d.is_empty()));
    }

    #[test]
    fn the_first_drop_comes_an_interval_after_the_sojourn_went_above_target() {
        // 600 packets at t = 0, one dequeued per ms: the sojourn reaches 5 ms at t = 5 ms, so
        // first_above_time = 105 ms and the first drop is at the dequeue at 105 ms.
        let out = drain(&mut codel(false), 600, MS, false);
        let first = out.iter().find(|(_, _, d, _)| !d.is_empty()).unwrap();
        assert_eq!(first.0, 105 * MS, "{first:?}");
        // The head at 105 ms (id 104) is dropped and the next one sent.
        assert_eq!((first.1, first.2.clone()), (105, vec![104]));
        // Then drops at drop_next = 105 + 100/√1, then + 100/√2, + 100/√3 ms (the control law,
        // each from the previous drop_next).
        let times: Vec<Nanos> = out
            .iter()
            .filter(|(_, _, d, _)| !d.is_empty())
            .map(|(t, ..)| *t)
            .take(4)
            .collect();
        let mut expect = vec![105 * MS];
        let mut next = 105 * MS;
        for count in 1..=3u32 {
            next += (100.0 * MS as f64 / (count as f64).sqrt()) as Nanos;
            // Dequeues happen on whole ms: the drop is at the first dequeue at or after it.
            expect.push(next.div_ceil(MS) * MS);
        }
        assert_eq!(times, expect);
    }

    #[test]
    fn a_single_packet_backlog_is_never_dropped() {
        // Two packets, the second dequeued after 200 ms: the backlog after taking it is 0 bytes
        // (≤ one MTU), so however long it waited it is sent.
        let mut d = codel(false);
        let mut dropped = Vec::new();
        d.enqueue(0, pkt(1, false), &mut dropped);
        d.enqueue(0, pkt(2, false), &mut dropped);
        assert_eq!(d.dequeue(100 * MS, &mut dropped).unwrap().packet.id, 1);
        assert_eq!(d.dequeue(300 * MS, &mut dropped).unwrap().packet.id, 2);
        assert!(dropped.is_empty());
    }

    #[test]
    fn with_ecn_capable_packets_codel_marks_where_it_would_drop() {
        let dropping = drain(&mut codel(false), 200, MS, true);
        let marking = drain(&mut codel(true), 200, MS, true);
        // Without ECN the same ECT packets are dropped; with it nothing is dropped and the
        // first mark falls where the first drop fell.
        assert!(dropping.iter().any(|(_, _, d, _)| !d.is_empty()));
        assert!(marking.iter().all(|(_, _, d, _)| d.is_empty()));
        assert_eq!(marking.len(), 200);
        let first_mark = marking.iter().find(|(.., m)| *m).unwrap();
        assert_eq!((first_mark.0, first_mark.1), (105 * MS, 104));
        // A packet that is not ECN-capable is still dropped with ECN on.
        let not_ect = drain(&mut codel(true), 200, MS, false);
        assert!(not_ect.iter().any(|(_, _, d, _)| !d.is_empty()));
        assert!(not_ect.iter().all(|(.., m)| !m));
    }

    #[test]
    fn drops_stop_when_the_sojourn_falls_below_target() {
        // A long standing queue is drained fast after CoDel began dropping: once the head has
        // waited less than 5 ms, nothing more is dropped.
        let mut d = codel(false);
        let mut dropped = Vec::new();
        for id in 0..150 {
            d.enqueue(0, pkt(id, false), &mut dropped);
        }
        let mut t = 0;
        for _ in 0..110 {
            t += MS;
            d.dequeue(t, &mut dropped);
        }
        assert!(!dropped.is_empty(), "dropping by 110 ms");
        while d.dequeue(t, &mut dropped).is_some() {}
        // New packets, dequeued as soon as they come (sojourn 0): none is dropped.
        let before = dropped.len();
        for id in 1000..1010 {
            t += 200 * MS;
            d.enqueue(t, pkt(id, false), &mut dropped);
            assert_eq!(d.dequeue(t, &mut dropped).unwrap().packet.id, id);
        }
        assert_eq!(dropped.len(), before);
        let c = d.counters();
        assert_eq!(c.aqm_drops, before as u64);
        assert_eq!(c.offered, 160);
        assert_eq!(c.dequeued + c.aqm_drops, 160);
    }

    #[test]
    fn parameters_out_of_range_are_named() {
        let bad = |target, interval| {
            CodelParams {
                target,
                interval,
                ..CodelParams::default()
            }
            .validate()
            .unwrap_err()
        };
        assert!(bad(0, 100 * MS).contains("target must be above 0"));
        assert!(bad(5 * MS, 0).contains("interval must be above 0"));
        let e = bad(100 * MS, 100 * MS);
        assert!(
            e.contains("target (100 ms) must be below its interval (100 ms)"),
            "{e}"
        );
        assert!(CodelParams::default().validate().is_ok());
    }
}
