//! One direction of the emulated link as the I/O shell drives it, without the I/O: the link model,
//! the packets it holds while a queue discipline decides, and the packets scheduled for release.
//!
//! The shell reads a packet, offers it ([`Lane::arrive`]), runs the disciplines up to its clock
//! ([`Lane::settle`]), writes what is due ([`Lane::pop_due`]) and sleeps until [`Lane::next_wake`].
//! `P` is the shell's handle on a packet's bytes (a buffer, a segment of an offload frame); the
//! lane never looks inside it, it only hands it back — scheduled, or dropped with its cause — so
//! every packet is accounted for exactly once. Everything here runs in virtual time and is tested
//! that way; the shell keeps only reads, writes, the clock and what it measures about them.

use std::collections::VecDeque;

use crate::Nanos;
use crate::flow::FlowKey;
use crate::model::{Departure, LinkModel, Settled, Verdict};

/// A packet scheduled for release.
#[derive(Debug)]
pub struct Release<P> {
    /// When the model says it leaves the link (the shell writes it then).
    pub deliver_at: Nanos,
    /// When it arrived (for its one-way time).
    pub arrival: Nanos,
    /// Served back to back with the previous one (see [`Departure::backlogged`]).
    pub backlogged: bool,
    /// Its IP length.
    pub len: usize,
    /// A queue discipline marked it CE: the shell rewrites its ECN field (`crate::wire::mark_ce`).
    pub marked: bool,
    pub packet: P,
}

/// Why a packet did not cross.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropCause {
    /// The queue's limit (tail drop, a discipline's overflow).
    Queue,
    /// The link's random loss.
    Random,
    /// A queue discipline's own rule (CoDel/FQ-CoDel at dequeue, PIE's early drop).
    Discipline,
}

/// What [`Lane::arrive`] did with a packet.
#[derive(Debug)]
pub enum Arrived<'a, P> {
    /// Scheduled at once (tail drop decides at arrival).
    Scheduled(&'a Release<P>),
    /// Held by the queue discipline until it dequeues it ([`Lane::settle`] says what became of it).
    Held,
    /// Dropped at arrival: the packet back, with why.
    Dropped { packet: P, cause: DropCause },
}

/// A queue discipline's decision about a held packet, as [`Lane::settle`] reports it.
#[derive(Debug)]
pub enum Decision<'a, P> {
    /// Scheduled (already in the release queue; the shell may mark or capture it now).
    Scheduled(&'a mut Release<P>),
    /// Dropped at `at` (its dequeue, or an FQ-CoDel overflow): the packet back.
    Dropped {
        at: Nanos,
        arrival: Nanos,
        len: usize,
        packet: P,
    },
}

#[derive(Debug)]
struct Waiting<P> {
    arrival: Nanos,
    len: usize,
    packet: P,
}

/// One direction: the model, the packets a discipline holds (by slot, the id the model knows them
/// by) and the release queue (in delivery order: the link does not reorder).
#[derive(Debug)]
pub struct Lane<P> {
    model: LinkModel,
    releases: VecDeque<Release<P>>,
    held: Vec<Option<Waiting<P>>>,
    free_slots: Vec<usize>,
}

impl<P> Lane<P> {
    pub fn new(model: LinkModel) -> Lane<P> {
        Lane {
            model,
            releases: VecDeque::new(),
            held: Vec::new(),
            free_slots: Vec::new(),
        }
    }

    pub fn model(&self) -> &LinkModel {
        &self.model
    }

    /// Offers a packet of `len` bytes that arrived at `now` (its flow `key`, ECN-capable or not).
    /// A held packet's fate comes from [`Self::settle`], which the caller runs next.
    pub fn arrive(
        &mut self,
        now: Nanos,
        packet: P,
        len: usize,
        key: Option<FlowKey>,
        ect: bool,
    ) -> Arrived<'_, P> {
        let slot = self.free_slots.last().copied().unwrap_or(self.held.len());
        match self.model.offer(now, slot as u64, len as u32, key, ect) {
            Verdict::Forward(Departure {
                deliver_at,
                backlogged,
                ..
            }) => {
                self.releases.push_back(Release {
                    deliver_at,
                    arrival: now,
                    backlogged,
                    len,
                    marked: false,
                    packet,
                });
                Arrived::Scheduled(self.releases.back().expect("just pushed"))
            }
            Verdict::Held => {
                if self.free_slots.pop().is_none() {
                    self.held.push(None);
                }
                self.held[slot] = Some(Waiting {
                    arrival: now,
                    len,
                    packet,
                });
                Arrived::Held
            }
            Verdict::DroppedQueue => Arrived::Dropped {
                packet,
                cause: DropCause::Queue,
            },
            Verdict::DroppedRandom => Arrived::Dropped {
                packet,
                cause: DropCause::Random,
            },
            Verdict::DroppedAqm => Arrived::Dropped {
                packet,
                cause: DropCause::Discipline,
            },
        }
    }

    /// Runs the queue discipline up to `now` (each dequeue at its own instant) and reports every
    /// decision, in order, to `on`. Nothing to do without a discipline or held packets.
    pub fn settle(&mut self, now: Nanos, mut on: impl FnMut(Decision<'_, P>)) {
        if self.held.len() == self.free_slots.len() {
            return;
        }
        self.model.advance(now);
        while let Some(settled) = self.model.take_settled() {
            let slot = settled.id() as usize;
            let Some(Waiting {
                arrival,
                len,
                packet,
            }) = self.held.get_mut(slot).and_then(Option::take)
            else {
                continue;
            };
            self.free_slots.push(slot);
            match settled {
                Settled::Forward {
                    departure, marked, ..
                } => {
                    self.releases.push_back(Release {
                        deliver_at: departure.deliver_at,
                        arrival,
                        backlogged: departure.backlogged,
                        len,
                        marked,
                        packet,
                    });
                    on(Decision::Scheduled(
                        self.releases.back_mut().expect("just pushed"),
                    ));
                }
                Settled::DroppedAqm { at, .. } | Settled::DroppedOverflow { at, .. } => {
                    on(Decision::Dropped {
                        at,
                        arrival,
                        len,
                        packet,
                    })
                }
            }
        }
    }

    /// When the next scheduled packet is due.
    pub fn next_due(&self) -> Option<Nanos> {
        self.releases.front().map(|r| r.deliver_at)
    }

    /// When the shell must run [`Self::settle`] next: the discipline's next dequeue, with the
    /// model's slack ([`LinkModel::settle_slack`]: no release is late for it).
    pub fn next_dequeue(&self) -> Option<Nanos> {
        self.model
            .next_dequeue_at()
            .map(|at| at + self.model.settle_slack())
    }

    /// When the shell must wake: the earlier of the next release and the next dequeue.
    pub fn next_wake(&self) -> Option<Nanos> {
        match (self.next_due(), self.next_dequeue()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The next scheduled packet if it is due by `horizon` (the shell's now, or now plus a batch
    /// or coalescing window).
    pub fn pop_due(&mut self, horizon: Nanos) -> Option<Release<P>> {
        if self.releases.front()?.deliver_at <= horizon {
            self.releases.pop_front()
        } else {
            None
        }
    }

    /// Packets scheduled or held: neither released nor dropped.
    pub fn in_flight(&self) -> usize {
        self.releases.len() + self.model.held_packets()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aqm::DisciplineSpec;
    use crate::model::{DirectionConfig, RateSpec};
    use crate::units::{LossSpec, QueueLimit};
    use crate::{NANOS_PER_MS, NANOS_PER_US};

    const MS: Nanos = NANOS_PER_MS;
    const US: Nanos = NANOS_PER_US;

    fn lane(discipline: &str, loss: f64) -> Lane<u32> {
        Lane::new(
            LinkModel::new(DirectionConfig {
                rate: RateSpec::Constant { bps: 12_000_000 },
                delay: 10 * MS,
                loss: if loss > 0.0 {
                    LossSpec::Bernoulli(loss)
                } else {
                    LossSpec::None
                },
                queue: QueueLimit::Bytes(60_000),
                base_rtt: 20 * MS,
                seed: 9,
                start: 0,
                delay_compensation: 0,
                discipline: DisciplineSpec::parse(discipline).unwrap(),
            })
            .unwrap(),
        )
    }

    /// What a shell does, in virtual time: `arrivals` (time, id) of 1500 B packets; it settles
    /// before each arrival and after, and releases what is due by then (plus `window`). Returns
    /// (id, release time) in release order and the ids dropped.
    fn drive(
        l: &mut Lane<u32>,
        arrivals: &[(Nanos, u32)],
        window: Nanos,
    ) -> (Vec<(u32, Nanos)>, Vec<u32>) {
        let (mut released, mut dropped) = (Vec::new(), Vec::new());
        let settle = |l: &mut Lane<u32>, now: Nanos, dropped: &mut Vec<u32>| {
            l.settle(now, |d| {
                if let Decision::Dropped { packet, .. } = d {
                    dropped.push(packet)
                }
            })
        };
        let release = |l: &mut Lane<u32>, now: Nanos, out: &mut Vec<(u32, Nanos)>| {
            // Once one is due, the window's packets go with it.
            if l.next_due().is_some_and(|d| d <= now) {
                while let Some(r) = l.pop_due(now + window) {
                    assert!(r.deliver_at <= now + window);
                    out.push((r.packet, now));
                }
            }
        };
        let mut t = 0;
        for &(at, id) in arrivals {
            // Wake at every release and dequeue before the arrival.
            while let Some(w) = l.next_wake().filter(|&w| w < at) {
                t = w.max(t);
                settle(l, t, &mut dropped);
                release(l, t, &mut released);
            }
            t = at;
            settle(l, t, &mut dropped);
            match l.arrive(t, id, 1500, None, false) {
                Arrived::Dropped { packet, .. } => dropped.push(packet),
                Arrived::Held => settle(l, t, &mut dropped),
                Arrived::Scheduled(r) => assert_eq!(r.packet, id),
            }
            release(l, t, &mut released);
        }
        while let Some(w) = l.next_wake() {
            t = w.max(t);
            settle(l, t, &mut dropped);
            release(l, t, &mut released);
        }
        (released, dropped)
    }

    /// A burst of `n` packets every 100 µs (3× the 1 ms service time) for 1 s: queues and drops.
    fn burst(n: u32) -> Vec<(Nanos, u32)> {
        (0..n).map(|i| (Nanos::from(i) * 330 * US, i)).collect()
    }

    #[test]
    fn every_packet_is_released_or_dropped_exactly_once_under_every_discipline() {
        for name in ["droptail", "codel", "fq-codel", "pie"] {
            for loss in [0.0, 0.05] {
                let mut l = lane(name, loss);
                let arrivals = burst(3000);
                let (released, dropped) = drive(&mut l, &arrivals, 0);
                let mut seen: Vec<u32> = released
                    .iter()
                    .map(|r| r.0)
                    .chain(dropped.clone())
                    .collect();
                seen.sort_unstable();
                assert_eq!(seen, (0..3000).collect::<Vec<_>>(), "{name} at {loss}");
                assert_eq!(l.in_flight(), 0);
                let c = l.model().counters();
                assert_eq!(c.forwarded_packets, released.len() as u64, "{name}");
                assert_eq!(
                    c.dropped_queue_packets + c.dropped_random_packets + c.dropped_aqm_packets,
                    dropped.len() as u64,
                    "{name}"
                );
                // One packet (or a few, with a discipline) every ms of service: the overload
                // drops most, every discipline some.
                assert!(!dropped.is_empty(), "{name}");
            }
        }
    }

    #[test]
    fn releases_leave_in_order_on_time_and_the_window_takes_the_packets_due_within_it() {
        for name in ["droptail", "codel"] {
            let mut l = lane(name, 0.0);
            // Four back-to-back packets at t = 0: service 1 ms each, delay 10 ms.
            let (released, dropped) = drive(&mut l, &[(0, 1), (0, 2), (0, 3), (0, 4)], 0);
            assert!(dropped.is_empty());
            assert_eq!(
                released,
                vec![(1, 11 * MS), (2, 12 * MS), (3, 13 * MS), (4, 14 * MS)],
                "{name}"
            );
            // With a 2.5 ms window, a release takes the next two along (each ≤ 2.5 ms early).
            let mut l = lane(name, 0.0);
            let (released, _) = drive(&mut l, &[(0, 1), (0, 2), (0, 3), (0, 4)], 2_500 * US);
            assert_eq!(
                released,
                vec![(1, 11 * MS), (2, 11 * MS), (3, 11 * MS), (4, 14 * MS)],
                "{name}"
            );
        }
    }

    #[test]
    fn a_held_packet_wakes_the_shell_for_its_dequeue_with_the_models_slack() {
        let mut l = lane("codel", 0.0);
        // The first packet goes into service at once; the second waits for the first's 1 ms.
        assert!(matches!(l.arrive(0, 1, 1500, None, false), Arrived::Held));
        l.settle(0, |_| {});
        assert!(matches!(l.arrive(0, 2, 1500, None, false), Arrived::Held));
        l.settle(0, |_| {});
        assert_eq!(l.in_flight(), 2);
        assert_eq!(l.next_due(), Some(11 * MS));
        // Its dequeue at 1 ms may be settled up to half the 10 ms delay, at most 1 ms, later
        // without a late release.
        assert_eq!(l.next_dequeue(), Some(2 * MS));
        assert_eq!(l.next_wake(), Some(2 * MS));
        let mut decided = Vec::new();
        l.settle(2 * MS, |d| {
            if let Decision::Scheduled(r) = d {
                decided.push((r.packet, r.deliver_at))
            }
        });
        assert_eq!(decided, vec![(2, 12 * MS)]);
        assert_eq!(l.next_dequeue(), None);
        assert_eq!(l.pop_due(11 * MS).map(|r| r.packet), Some(1));
        assert!(l.pop_due(11 * MS).is_none());
    }

    #[test]
    fn slots_are_reused_without_mixing_packets_up() {
        // Thousands of held packets through a few slots: each release carries its own handle, in
        // arrival order (CoDel is first in, first out).
        let mut l = lane("codel", 0.0);
        let arrivals: Vec<(Nanos, u32)> = (0..2000)
            .map(|i| (Nanos::from(i) * 1_100 * US, i))
            .collect();
        let (released, dropped) = drive(&mut l, &arrivals, 0);
        assert!(dropped.is_empty());
        assert_eq!(
            released.iter().map(|r| r.0).collect::<Vec<_>>(),
            (0..2000).collect::<Vec<_>>()
        );
        assert!(l.held.len() <= 2, "{} slots", l.held.len());
    }
}
