//! PIE (RFC 8033): every `t_update` a drop probability is moved by how far the queue delay is
//! from `target` and how it changed since the last update (a PI controller, scaled down while
//! the probability is small); arriving packets are dropped at random with that probability,
//! except during a burst allowance and while the queue is short or the delay well below target.
//!
//! The queue delay is measured, as RFC 8033 §5.2 allows and Linux does without its rate
//! estimator, as the sojourn time of the last packet dequeued (0 once the queue is empty). The
//! periodic update runs lazily: before each enqueue or dequeue, every update due by `now` is
//! applied in turn (between two calls the delay it reads cannot change, so the result is the
//! timer's). The optional derandomisation of §5.1 is not implemented: drops are Bernoulli.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{Admission, AqmCounters, Departing, Fifo, Limits, QueuedPacket, departing};
use crate::{NANOS_PER_MS, NANOS_PER_SEC, Nanos};

/// PIE's parameters (RFC 8033 §4–5).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PieParams {
    /// QDELAY_REF: the queue delay PIE steers towards (15 ms).
    pub target: Nanos,
    /// T_UPDATE: how often the drop probability is updated (15 ms).
    pub t_update: Nanos,
    /// α and β in Hz (0.125 and 1.25): the weights of the delay's distance from target and of
    /// its change since the last update.
    pub alpha: f64,
    pub beta: f64,
    /// MAX_BURST: how long a burst may pass without early drops after a quiet queue (150 ms).
    pub max_burst: Nanos,
    /// No early drop while the backlog is at most two of these (bytes).
    pub mean_packet: u32,
    /// Mark ECN-capable packets CE instead of dropping them, while the drop probability is at
    /// most `mark_threshold` (10 %; above it they are dropped, as RFC 8033 §5.1 advises).
    pub ecn: bool,
    pub mark_threshold: f64,
}

impl Default for PieParams {
    fn default() -> PieParams {
        PieParams {
            target: 15 * NANOS_PER_MS,
            t_update: 15 * NANOS_PER_MS,
            alpha: 0.125,
            beta: 1.25,
            max_burst: 150 * NANOS_PER_MS,
            mean_packet: 1500,
            ecn: false,
            mark_threshold: 0.1,
        }
    }
}

impl PieParams {
    pub fn validate(&self) -> Result<(), String> {
        if self.target == 0 {
            return Err("pie target must be above 0 (the RFC's default: 15 ms)".into());
        }
        if self.t_update == 0 {
            return Err("pie t_update must be above 0 (the RFC's default: 15 ms)".into());
        }
        for (name, v, default) in [("alpha", self.alpha, 0.125), ("beta", self.beta, 1.25)] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(format!(
                    "pie {name} must be a finite number ≥ 0 (the RFC's default: {default}); got {v}"
                ));
            }
        }
        if !(0.0..=1.0).contains(&self.mark_threshold) {
            return Err(format!(
                "pie mark_threshold must be a probability in [0, 1]; got {}",
                self.mark_threshold
            ));
        }
        Ok(())
    }
}

/// One queue under PIE.
#[derive(Debug, Clone)]
pub struct Pie {
    fifo: Fifo,
    params: PieParams,
    limits: Limits,
    counters: AqmCounters,
    rng: ChaCha8Rng,
    drop_prob: f64,
    /// The delay the last update read (`qdelay_old_`).
    qdelay_old: Nanos,
    /// The current queue delay: the last dequeued packet's sojourn, 0 when empty.
    qdelay: Nanos,
    burst_allowance: Nanos,
    /// When the next update is due (None before the first call).
    next_update: Option<Nanos>,
}

impl Pie {
    pub fn new(params: PieParams, limits: Limits, seed: u64) -> Pie {
        Pie {
            fifo: Fifo::default(),
            params,
            limits,
            counters: AqmCounters::default(),
            rng: ChaCha8Rng::seed_from_u64(seed),
            drop_prob: 0.0,
            qdelay_old: 0,
            qdelay: 0,
            burst_allowance: params.max_burst,
            next_update: None,
        }
    }

    /// The drop probability now (for tests and counters).
    pub fn drop_probability(&self) -> f64 {
        self.drop_prob
    }

    /// Applies every periodic update due by `now`.
    fn catch_up(&mut self, now: Nanos) {
        let mut next = *self.next_update.get_or_insert(now + self.params.t_update);
        while now >= next {
            self.calculate_drop_prob();
            next += self.params.t_update;
        }
        self.next_update = Some(next);
    }

    /// RFC 8033 §4.2's `calculate_drop_prob`.
    fn calculate_drop_prob(&mut self) {
        let p = &self.params;
        let s = |t: Nanos| t as f64 / NANOS_PER_SEC as f64;
        let current = self.qdelay;
        let mut adj =
            p.alpha * (s(current) - s(p.target)) + p.beta * (s(current) - s(self.qdelay_old));
        // Small probabilities move in small steps (the RFC's auto-tuning of α and β).
        let scale = match self.drop_prob {
            x if x < 0.000_001 => 1.0 / 2048.0,
            x if x < 0.000_01 => 1.0 / 512.0,
            x if x < 0.000_1 => 1.0 / 128.0,
            x if x < 0.001 => 1.0 / 32.0,
            x if x < 0.01 => 1.0 / 8.0,
            x if x < 0.1 => 1.0 / 2.0,
            _ => 1.0,
        };
        adj *= scale;
        // Cap the adjustment once dropping is heavy, against large swings.
        if self.drop_prob >= 0.1 && adj > 0.02 {
            adj = 0.02;
        }
        self.drop_prob = (self.drop_prob + adj).clamp(0.0, 1.0);
        // Decay when the queue has been empty for two updates.
        if current == 0 && self.qdelay_old == 0 {
            self.drop_prob *= 0.98;
        }
        self.burst_allowance = self.burst_allowance.saturating_sub(p.t_update);
        if self.drop_prob == 0.0 && current < p.target / 2 && self.qdelay_old < p.target / 2 {
            self.burst_allowance = p.max_burst;
        }
        self.qdelay_old = current;
    }

    /// RFC 8033 §4.1's `drop_early`: whether an arriving packet is dropped (or marked).
    fn drop_early(&mut self, bytes: u32) -> bool {
        if self.burst_allowance > 0 {
            return false;
        }
        if self.qdelay_old < self.params.target / 2 && self.drop_prob < 0.2 {
            return false;
        }
        if self.fifo.bytes + bytes as u64 <= 2 * self.params.mean_packet as u64 {
            return false;
        }
        let u: f64 = self.rng.random();
        u < self.drop_prob
    }

    pub(super) fn enqueue(&mut self, now: Nanos, mut p: QueuedPacket) -> Admission {
        self.catch_up(now);
        if !self.fifo.offer(&self.limits, &mut self.counters, p.bytes) {
            return Admission::Overflow;
        }
        let mut admission = Admission::Queued;
        if self.drop_early(p.bytes) {
            if self.params.ecn && p.ect && self.drop_prob <= self.params.mark_threshold {
                admission = Admission::QueuedMarked;
            } else {
                self.counters.aqm_drops += 1;
                return Admission::DroppedEarly;
            }
        }
        p.enqueued_at = now;
        if admission == Admission::QueuedMarked {
            // The mark travels with the packet and shows when it leaves.
            p.ce = true;
            self.counters.marks += 1;
        }
        self.fifo.push(p);
        admission
    }

    pub(super) fn dequeue(&mut self, now: Nanos) -> Option<Departing> {
        self.catch_up(now);
        let Some(p) = self.fifo.pop() else {
            self.qdelay = 0;
            return None;
        };
        self.qdelay = if self.fifo.packets.is_empty() {
            0
        } else {
            now.saturating_sub(p.enqueued_at)
        };
        self.counters.dequeued += 1;
        Some(departing(now, p, false))
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

    const MS: Nanos = NANOS_PER_MS;

    fn pie(ecn: bool) -> Pie {
        Pie::new(
            PieParams {
                ecn,
                ..PieParams::default()
            },
            Limits::default(),
            42,
        )
    }

    #[test]
    fn one_update_moves_the_probability_as_the_rfc_computes_it() {
        let mut q = pie(false);
        for id in 0..3 {
            assert_eq!(
                q.enqueue(0, QueuedPacket::new(id, 1500, 1)),
                Admission::Queued
            );
        }
        // The updates due at 15 and 30 ms read a delay of 0: the probability stays 0.
        let d = q.dequeue(30 * MS).unwrap();
        assert_eq!(d.sojourn, 30 * MS);
        assert_eq!(q.drop_probability(), 0.0);
        // The update at 45 ms reads 30 ms against an old delay of 0:
        // p = α (0.030 − 0.015) + β (0.030 − 0) = 0.039375, scaled by 1/2048 below 10⁻⁶.
        q.enqueue(45 * MS, QueuedPacket::new(9, 1500, 1));
        let expect = (0.125 * 0.015 + 1.25 * 0.030) / 2048.0;
        assert!(
            (q.drop_probability() - expect).abs() < 1e-12,
            "{}",
            q.drop_probability()
        );
    }

    #[test]
    fn a_large_step_is_capped_once_dropping_is_heavy() {
        let mut q = pie(false);
        q.drop_prob = 0.5;
        q.qdelay = 200 * MS;
        q.qdelay_old = 0;
        q.calculate_drop_prob();
        // α·0.185 + β·0.2 = 0.273 would be added; the cap allows 0.02.
        assert!((q.drop_probability() - 0.52).abs() < 1e-12);
        // A decrease is not capped.
        q.qdelay = 0;
        q.qdelay_old = 200 * MS;
        q.calculate_drop_prob();
        assert!(q.drop_probability() < 0.52 - 0.2);
    }

    /// 20 s of arrivals at 6 packets per ms into a link serving 5 per ms (senders that do not
    /// respond to drops, the harshest case for a controller); returns the queue, the sojourns of
    /// the last 5 s and the departures marked.
    fn overload(ecn: bool) -> (Pie, Vec<Nanos>, u64) {
        let mut q = pie(ecn);
        let mut sojourns = Vec::new();
        let mut marked = 0;
        // Ticks of 1/30 ms: an arrival every 5 ticks, a departure every 6.
        for tick in 0..600_000u64 {
            let t = tick * MS / 30;
            if tick % 5 == 0 {
                let p = QueuedPacket {
                    ect: true,
                    ..QueuedPacket::new(tick, 1500, 1)
                };
                q.enqueue(t, p);
            }
            if tick % 6 != 0 {
                continue;
            }
            if let Some(d) = q.dequeue(t) {
                marked += d.marked as u64;
                if t >= 15_000 * MS {
                    sojourns.push(d.sojourn);
                }
            }
        }
        (q, sojourns, marked)
    }

    #[test]
    fn under_overload_pie_holds_the_delay_near_its_target() {
        let (q, mut sojourns, marked) = overload(false);
        let c = q.counters();
        assert!(c.aqm_drops > 0 && marked == 0 && c.marks == 0);
        sojourns.sort_unstable();
        let median = sojourns[sojourns.len() / 2];
        // Without PIE the delay would grow without bound (≈ 4 s after 20 s); PIE holds it
        // around its 15 ms reference.
        assert!(
            (5 * MS..=40 * MS).contains(&median),
            "median {} ms",
            median / MS
        );
        // Every offered packet is accounted for.
        let (_, queued) = q.backlog();
        assert_eq!(
            c.offered,
            c.aqm_drops + c.overflow_drops + c.dequeued + queued
        );
    }

    #[test]
    fn with_ecn_pie_marks_until_the_probability_passes_its_threshold() {
        let (q, _, marked) = overload(true);
        let c = q.counters();
        // Marking does not slow unresponsive senders, so the probability climbs past 10 %,
        // where ECN-capable packets are dropped after all.
        assert!(c.marks > 0 && marked > 0 && marked <= c.marks, "{c:?}");
        assert!(c.aqm_drops > 0, "{c:?}");
        assert!(q.drop_probability() > 0.1);
    }

    #[test]
    fn a_burst_into_a_quiet_queue_passes_and_the_probability_decays_once_it_is_gone() {
        let mut q = pie(false);
        // A burst of 100 packets into an idle queue: the burst allowance lets every one in.
        for id in 0..100 {
            assert_eq!(
                q.enqueue(0, QueuedPacket::new(id, 1500, 1)),
                Admission::Queued
            );
        }
        // Force a high probability, then leave the queue empty: it falls back to 0.
        while q.dequeue(MS).is_some() {}
        q.drop_prob = 0.3;
        q.burst_allowance = 0;
        for k in 1..=1000 {
            q.dequeue(MS + k * 15 * MS);
        }
        assert_eq!(q.drop_probability(), 0.0);
        assert_eq!(q.burst_allowance, PieParams::default().max_burst);
    }

    #[test]
    fn parameters_out_of_range_are_named() {
        let e = PieParams {
            target: 0,
            ..Default::default()
        }
        .validate()
        .unwrap_err();
        assert!(e.contains("target must be above 0"), "{e}");
        let e = PieParams {
            beta: -1.0,
            ..Default::default()
        }
        .validate()
        .unwrap_err();
        assert!(e.contains("beta must be a finite number ≥ 0"), "{e}");
        assert!(PieParams::default().validate().is_ok());
    }
}
