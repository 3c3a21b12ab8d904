//! Queue disciplines decided at dequeue time: CoDel (RFC 8289), FQ-CoDel (RFC 8290) and PIE
//! (RFC 8033), beside tail drop, as pure state machines on the caller's clock (issue 27).
//!
//! A discipline holds the packets waiting for the bottleneck. The link offers each arriving
//! packet to [`Discipline::enqueue`], which may refuse it (the byte or packet limit, or PIE's
//! early drop), and asks [`Discipline::dequeue`] for the next packet whenever the bottleneck can
//! start serialising one. CoDel and FQ-CoDel decide there, from how long the head packet waited;
//! that is why they cannot be expressed in a model that fixes each packet's departure when it
//! arrives. Nothing here reads a clock or does I/O: `now` is passed in, and every decision follows
//! from the calls made so far (PIE's coin is ChaCha8 from a seed, like the random loss).
//!
//! With ECN on, CoDel, FQ-CoDel and PIE mark an ECN-capable packet (ECT) CE instead of dropping
//! it, as Linux's qdiscs do; a packet that is not ECN-capable is dropped as without ECN. Tail
//! drop never marks.
//!
//! [`crate::model::LinkModel`] runs them (`DirectionConfig::discipline`): tail drop keeps its exact
//! decision at arrival, the others hold their packets until the bottleneck dequeues them. The
//! disciplines are tested here against the RFCs' behaviour in virtual time.

mod codel;
mod fq_codel;
mod pie;

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::{NANOS_PER_MS, Nanos};

pub use codel::{Codel, CodelParams};
pub use fq_codel::{FqCodel, FqCodelParams};
pub use pie::{Pie, PieParams};

/// A packet as a discipline sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueuedPacket {
    /// The caller's handle on the packet's bytes.
    pub id: u64,
    /// Its size on the link (what limits and quanta count).
    pub bytes: u32,
    /// A hash of its flow (the 5-tuple): FQ-CoDel's bucket is `flow % flows`.
    pub flow: u64,
    /// ECN-capable transport (ECT(0) or ECT(1)): may be marked CE instead of dropped.
    pub ect: bool,
    /// When it was enqueued; set by [`Discipline::enqueue`].
    pub enqueued_at: Nanos,
    /// Marked CE while queued (PIE marks at enqueue); it leaves marked.
    pub ce: bool,
}

impl QueuedPacket {
    /// A packet of `bytes` of flow `flow`, not ECN-capable.
    pub fn new(id: u64, bytes: u32, flow: u64) -> QueuedPacket {
        QueuedPacket {
            id,
            bytes,
            flow,
            ect: false,
            enqueued_at: 0,
            ce: false,
        }
    }
}

/// What enqueue did with the offered packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    Queued,
    /// Queued, and marked CE (PIE with ECN instead of an early drop).
    QueuedMarked,
    /// Refused: the byte or packet limit would be exceeded.
    Overflow,
    /// Refused by the discipline's own rule (PIE's early drop).
    DroppedEarly,
}

/// A packet leaving the queue for the bottleneck.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Departing {
    pub packet: QueuedPacket,
    /// Marked CE by the discipline (at dequeue by CoDel/FQ-CoDel, at enqueue by PIE).
    pub marked: bool,
    /// How long it waited: dequeue time − enqueue time.
    pub sojourn: Nanos,
}

/// Counters of one discipline. Every offered packet ends in exactly one of `overflow_drops`,
/// `aqm_drops` (at enqueue or dequeue) or `dequeued`, or is still queued.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AqmCounters {
    /// Packets offered to enqueue.
    pub offered: u64,
    /// Dropped because a limit was reached (FQ-CoDel: from the head of the fattest flow).
    pub overflow_drops: u64,
    /// Dropped by the discipline's rule: CoDel and FQ-CoDel at dequeue, PIE at enqueue.
    pub aqm_drops: u64,
    /// Marked CE instead of dropped.
    pub marks: u64,
    /// Handed to the bottleneck.
    pub dequeued: u64,
}

/// The queue's byte and packet limits, as the tail-drop queue has them (None: unlimited).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    pub bytes: Option<u64>,
    pub packets: Option<u64>,
}

impl Limits {
    /// Whether a packet of `bytes` fits beside a backlog of `backlog_bytes` in `backlog_packets`.
    fn admits(&self, backlog_bytes: u64, backlog_packets: u64, bytes: u32) -> bool {
        self.bytes.is_none_or(|l| backlog_bytes + bytes as u64 <= l)
            && self.packets.is_none_or(|l| backlog_packets < l)
    }

    /// Whether a backlog is over the limits.
    fn exceeded_by(&self, backlog_bytes: u64, backlog_packets: u64) -> bool {
        self.bytes.is_some_and(|l| backlog_bytes > l)
            || self.packets.is_some_and(|l| backlog_packets > l)
    }
}

/// The packets of one queue, first in first out, with their byte count.
#[derive(Debug, Clone, Default)]
struct Fifo {
    packets: VecDeque<QueuedPacket>,
    bytes: u64,
}

impl Fifo {
    fn push(&mut self, p: QueuedPacket) {
        self.bytes += p.bytes as u64;
        self.packets.push_back(p);
    }

    fn pop(&mut self) -> Option<QueuedPacket> {
        let p = self.packets.pop_front()?;
        self.bytes -= p.bytes as u64;
        Some(p)
    }

    fn len(&self) -> u64 {
        self.packets.len() as u64
    }

    /// Counts an offer of a packet of `bytes`; false, counted as an overflow, when it does not
    /// fit within `limits` (every single-queue discipline's first check).
    fn offer(&self, limits: &Limits, counters: &mut AqmCounters, bytes: u32) -> bool {
        counters.offered += 1;
        let fits = limits.admits(self.bytes, self.len(), bytes);
        if !fits {
            counters.overflow_drops += 1;
        }
        fits
    }

    /// Tail drop's admission (tail drop's and CoDel's enqueue): refuse what does not fit, stamp
    /// and append the rest.
    fn enqueue_tail(
        &mut self,
        limits: &Limits,
        counters: &mut AqmCounters,
        now: Nanos,
        mut p: QueuedPacket,
    ) -> Admission {
        if !self.offer(limits, counters, p.bytes) {
            return Admission::Overflow;
        }
        p.enqueued_at = now;
        self.push(p);
        Admission::Queued
    }
}

/// Which discipline, with its parameters: the `--queue-discipline` and scenario `aqm` value.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum DisciplineSpec {
    #[default]
    DropTail,
    Codel(CodelParams),
    FqCodel(FqCodelParams),
    Pie(PieParams),
}

impl DisciplineSpec {
    /// The names a flag or scenario takes.
    pub const NAMES: [&'static str; 4] = ["droptail", "codel", "fq-codel", "pie"];

    /// A discipline by name with its RFC's defaults, or with some of them replaced:
    /// `NAME[:KEY=VALUE,…]`, e.g. `codel:target=10ms,interval=200ms`, `fq-codel:flows=64`,
    /// `pie:target=20ms,tupdate=30ms`. Keys: codel and fq-codel `target`, `interval` (durations);
    /// fq-codel `flows`, `quantum` (bytes); pie `target`, `tupdate`, `alpha`, `beta`,
    /// `max-burst`. Values are checked ([`Self::validate`]); errors name the key.
    pub fn parse(text: &str) -> Result<DisciplineSpec, String> {
        let (name, params) = match text.split_once(':') {
            Some((n, p)) => (n, Some(p)),
            None => (text, None),
        };
        let mut spec = match name {
            "droptail" => DisciplineSpec::DropTail,
            "codel" => DisciplineSpec::Codel(CodelParams::default()),
            "fq-codel" | "fq_codel" => DisciplineSpec::FqCodel(FqCodelParams::default()),
            "pie" => DisciplineSpec::Pie(PieParams::default()),
            other => {
                return Err(format!(
                    "unknown queue discipline {other:?}; allowed: {} (with parameters: \
                     codel:target=5ms,interval=100ms)",
                    Self::NAMES.join(", ")
                ));
            }
        };
        for pair in params.into_iter().flat_map(|p| p.split(',')) {
            let (key, value) = pair.split_once('=').ok_or_else(|| {
                format!("{name}: parameter {pair:?} is not KEY=VALUE (e.g. target=5ms)")
            })?;
            spec.set(key.trim(), value.trim())
                .map_err(|e| format!("{name}: {key}={value}: {e}"))?;
        }
        spec.validate()?;
        Ok(spec)
    }

    /// Sets one parameter by name.
    fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        let duration = || crate::units::parse_duration(value).map_err(|e| e.to_string());
        let number = || {
            value.parse::<u32>().map_err(|_| {
                format!(
                    "expected a whole number from 0 to {}; got {value:?}",
                    u32::MAX
                )
            })
        };
        let real = || {
            value
                .parse::<f64>()
                .map_err(|_| format!("expected a number; got {value:?}"))
        };
        let name = self.name();
        let unknown = |keys: &str| Err(format!("unknown parameter; {name} takes {keys}"));
        match self {
            DisciplineSpec::DropTail => return Err("droptail takes no parameters".into()),
            DisciplineSpec::Codel(p) => match key {
                "target" => p.target = duration()?,
                "interval" => p.interval = duration()?,
                _ => return unknown("target, interval"),
            },
            DisciplineSpec::FqCodel(p) => match key {
                "target" => p.codel.target = duration()?,
                "interval" => p.codel.interval = duration()?,
                "flows" => p.flows = number()?,
                "quantum" => p.quantum = number()?,
                _ => return unknown("target, interval, flows, quantum"),
            },
            DisciplineSpec::Pie(p) => match key {
                "target" => p.target = duration()?,
                "tupdate" | "t_update" => p.t_update = duration()?,
                "alpha" => p.alpha = real()?,
                "beta" => p.beta = real()?,
                "max-burst" | "max_burst" => p.max_burst = duration()?,
                _ => return unknown("target, tupdate, alpha, beta, max-burst"),
            },
        }
        Ok(())
    }

    pub fn name(&self) -> &'static str {
        match self {
            DisciplineSpec::DropTail => "droptail",
            DisciplineSpec::Codel(_) => "codel",
            DisciplineSpec::FqCodel(_) => "fq-codel",
            DisciplineSpec::Pie(_) => "pie",
        }
    }

    /// ECN marking instead of dropping (tail drop marks nothing: [`Self::marks_anything`]).
    pub fn with_ecn(self, ecn: bool) -> DisciplineSpec {
        match self {
            DisciplineSpec::DropTail => DisciplineSpec::DropTail,
            DisciplineSpec::Codel(p) => DisciplineSpec::Codel(CodelParams { ecn, ..p }),
            DisciplineSpec::FqCodel(p) => DisciplineSpec::FqCodel(FqCodelParams {
                codel: CodelParams { ecn, ..p.codel },
                ..p
            }),
            DisciplineSpec::Pie(p) => DisciplineSpec::Pie(PieParams { ecn, ..p }),
        }
    }

    /// Whether it marks ECN-capable packets instead of dropping them.
    pub fn ecn(&self) -> bool {
        match self {
            DisciplineSpec::DropTail => false,
            DisciplineSpec::Codel(p) => p.ecn,
            DisciplineSpec::FqCodel(p) => p.codel.ecn,
            DisciplineSpec::Pie(p) => p.ecn,
        }
    }

    /// The name as reported: `codel`, or `codel+ecn` when it marks.
    pub fn label(&self) -> String {
        if self.ecn() {
            format!("{}+ecn", self.name())
        } else {
            self.name().to_string()
        }
    }

    /// Whether the discipline can mark at all (tail drop cannot: `--ecn` with it marks nothing).
    pub fn marks_anything(&self) -> bool {
        !matches!(self, DisciplineSpec::DropTail)
    }

    /// Checks the parameters; the error names the parameter and what is allowed.
    pub fn validate(&self) -> Result<(), String> {
        match self {
            DisciplineSpec::DropTail => Ok(()),
            DisciplineSpec::Codel(p) => p.validate(),
            DisciplineSpec::FqCodel(p) => p.validate(),
            DisciplineSpec::Pie(p) => p.validate(),
        }
    }

    /// The discipline's state, empty, with the queue's limits; `seed` drives PIE's coin.
    pub fn build(&self, limits: Limits, seed: u64) -> Discipline {
        match *self {
            DisciplineSpec::DropTail => Discipline::DropTail(DropTail::new(limits)),
            DisciplineSpec::Codel(p) => Discipline::Codel(Codel::new(p, limits)),
            DisciplineSpec::FqCodel(p) => Discipline::FqCodel(FqCodel::new(p, limits)),
            DisciplineSpec::Pie(p) => Discipline::Pie(Box::new(Pie::new(p, limits, seed))),
        }
    }
}

/// A discipline's state.
#[derive(Debug, Clone)]
pub enum Discipline {
    DropTail(DropTail),
    Codel(Codel),
    FqCodel(FqCodel),
    /// Boxed: its generator's state makes it the largest by far.
    Pie(Box<Pie>),
}

impl Discipline {
    /// Offers `p` at `now`. Packets the discipline drops to make room (FQ-CoDel's fattest
    /// flow's head) are pushed to `dropped`; the offered packet itself is never pushed there —
    /// its fate is the returned [`Admission`].
    pub fn enqueue(
        &mut self,
        now: Nanos,
        p: QueuedPacket,
        dropped: &mut Vec<QueuedPacket>,
    ) -> Admission {
        match self {
            Discipline::DropTail(d) => d.enqueue(now, p),
            Discipline::Codel(d) => d.enqueue(now, p),
            Discipline::FqCodel(d) => d.enqueue(now, p, dropped),
            Discipline::Pie(d) => d.enqueue(now, p),
        }
    }

    /// The next packet for the bottleneck at `now`, or None when the queue is empty. Packets
    /// dropped at dequeue (CoDel, FQ-CoDel) are pushed to `dropped`.
    pub fn dequeue(&mut self, now: Nanos, dropped: &mut Vec<QueuedPacket>) -> Option<Departing> {
        match self {
            Discipline::DropTail(d) => d.dequeue(now),
            Discipline::Codel(d) => d.dequeue(now, dropped),
            Discipline::FqCodel(d) => d.dequeue(now, dropped),
            Discipline::Pie(d) => d.dequeue(now),
        }
    }

    /// Bytes and packets waiting.
    pub fn backlog(&self) -> (u64, u64) {
        match self {
            Discipline::DropTail(d) => (d.fifo.bytes, d.fifo.len()),
            Discipline::Codel(d) => d.backlog(),
            Discipline::FqCodel(d) => d.backlog(),
            Discipline::Pie(d) => d.backlog(),
        }
    }

    pub fn counters(&self) -> AqmCounters {
        match self {
            Discipline::DropTail(d) => d.counters,
            Discipline::Codel(d) => d.counters(),
            Discipline::FqCodel(d) => d.counters(),
            Discipline::Pie(d) => d.counters(),
        }
    }
}

/// First in, first out, and a full queue drops the arriving packet.
#[derive(Debug, Clone)]
pub struct DropTail {
    fifo: Fifo,
    limits: Limits,
    counters: AqmCounters,
}

impl DropTail {
    pub fn new(limits: Limits) -> DropTail {
        DropTail {
            fifo: Fifo::default(),
            limits,
            counters: AqmCounters::default(),
        }
    }

    fn enqueue(&mut self, now: Nanos, p: QueuedPacket) -> Admission {
        self.fifo
            .enqueue_tail(&self.limits, &mut self.counters, now, p)
    }

    fn dequeue(&mut self, now: Nanos) -> Option<Departing> {
        let p = self.fifo.pop()?;
        self.counters.dequeued += 1;
        Some(departing(now, p, false))
    }
}

fn departing(now: Nanos, packet: QueuedPacket, marked: bool) -> Departing {
    Departing {
        packet,
        marked: marked || packet.ce,
        sojourn: now.saturating_sub(packet.enqueued_at),
    }
}

/// `5ms`, `100ms`: what the errors print.
fn ms(t: Nanos) -> String {
    format!("{} ms", t as f64 / NANOS_PER_MS as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Nanos = NANOS_PER_MS;

    #[test]
    fn parameters_replace_the_defaults_and_bad_ones_are_named() {
        let DisciplineSpec::Codel(c) =
            DisciplineSpec::parse("codel:target=10ms,interval=200ms").unwrap()
        else {
            panic!("codel")
        };
        assert_eq!((c.target, c.interval), (10 * MS, 200 * MS));
        let DisciplineSpec::FqCodel(f) = DisciplineSpec::parse("fq-codel:flows=64").unwrap() else {
            panic!("fq-codel")
        };
        assert_eq!((f.flows, f.quantum), (64, 1514));
        let DisciplineSpec::Pie(p) = DisciplineSpec::parse("pie:tupdate=30ms").unwrap() else {
            panic!("pie")
        };
        assert_eq!((p.target, p.t_update), (15 * MS, 30 * MS));
        for (text, words) in [
            ("codel:target=200ms", &["target", "interval"][..]),
            ("codel:target=0ms", &["target", "above 0"]),
            ("codel:target=-1ms", &["target"]),
            ("codel:speed=3", &["speed", "target, interval"]),
            ("codel:target", &["KEY=VALUE"]),
            ("pie:alpha=x", &["alpha", "number"]),
            ("fq-codel:flows=0", &["flows", "1 to 65536"]),
            ("droptail:x=1", &["no parameters"]),
        ] {
            let e = DisciplineSpec::parse(text).unwrap_err();
            for w in words {
                assert!(e.contains(w), "{text}: {e:?} lacks {w:?}");
            }
        }
    }

    #[test]
    fn names_parse_to_their_rfcs_defaults_and_unknown_ones_are_named() {
        for name in DisciplineSpec::NAMES {
            assert_eq!(DisciplineSpec::parse(name).unwrap().name(), name);
        }
        let DisciplineSpec::Codel(c) = DisciplineSpec::parse("codel").unwrap() else {
            panic!()
        };
        assert_eq!((c.target, c.interval), (5 * MS, 100 * MS));
        let DisciplineSpec::FqCodel(f) = DisciplineSpec::parse("fq-codel").unwrap() else {
            panic!()
        };
        assert_eq!((f.flows, f.quantum), (1024, 1514));
        let DisciplineSpec::Pie(p) = DisciplineSpec::parse("pie").unwrap() else {
            panic!()
        };
        assert_eq!(
            (p.target, p.t_update, p.max_burst),
            (15 * MS, 15 * MS, 150 * MS)
        );
        let e = DisciplineSpec::parse("red").unwrap_err();
        assert!(
            e.contains("\"red\"") && e.contains("droptail, codel, fq-codel, pie"),
            "{e}"
        );
        assert!(!DisciplineSpec::DropTail.marks_anything());
        assert!(
            DisciplineSpec::parse("pie")
                .unwrap()
                .with_ecn(true)
                .marks_anything()
        );
    }

    #[test]
    fn tail_drop_refuses_what_does_not_fit_and_reports_sojourn() {
        let limits = Limits {
            bytes: Some(3000),
            packets: Some(2),
        };
        let mut d = DisciplineSpec::DropTail.build(limits, 1);
        let mut dropped = Vec::new();
        let p = |id| QueuedPacket::new(id, 1500, 7);
        assert_eq!(d.enqueue(0, p(1), &mut dropped), Admission::Queued);
        assert_eq!(d.enqueue(MS, p(2), &mut dropped), Admission::Queued);
        assert_eq!(d.enqueue(2 * MS, p(3), &mut dropped), Admission::Overflow);
        assert_eq!(d.backlog(), (3000, 2));
        let out = d.dequeue(10 * MS, &mut dropped).unwrap();
        assert_eq!(
            (out.packet.id, out.sojourn, out.marked),
            (1, 10 * MS, false)
        );
        assert_eq!(d.dequeue(10 * MS, &mut dropped).unwrap().sojourn, 9 * MS);
        assert!(d.dequeue(11 * MS, &mut dropped).is_none());
        assert!(dropped.is_empty());
        let c = d.counters();
        assert_eq!((c.offered, c.overflow_drops, c.dequeued), (3, 1, 2));
    }
}
