//! A whole link (both directions) as the user asked for it, turned into the two sans-IO
//! [`DirectionConfig`]s the emulator runs. Shared by every command that builds a lab.

use crate::aqm::DisciplineSpec;
use crate::{DirectionConfig, LossSpec, Nanos, QueueLimit, RateSpec};
use serde::{Deserialize, Serialize};

/// One direction as asked for.
#[derive(Debug, Clone)]
pub struct DirectionSpec {
    pub rate: RateSpec,
    /// Human-readable origin of the rate ("10mbit", "trace FILE", "profile NAME").
    pub rate_label: String,
    pub delay: Nanos,
    pub loss: LossSpec,
    pub queue: QueueLimit,
    /// The queue's discipline (tail drop unless asked), with ECN marking or not.
    pub discipline: DisciplineSpec,
    /// Jitter and reordering on top of the delay ([`crate::variation`]).
    pub variation: crate::variation::Variation,
}

impl Default for DirectionSpec {
    fn default() -> Self {
        DirectionSpec {
            rate: RateSpec::Unlimited,
            rate_label: "unlimited".into(),
            delay: 0,
            loss: LossSpec::None,
            queue: QueueLimit::Bdp(1.0),
            discipline: DisciplineSpec::DropTail,
            variation: Default::default(),
        }
    }
}

impl DirectionSpec {
    /// The constant rate, if the rate is constant.
    pub fn constant_rate_bps(&self) -> Option<u64> {
        match self.rate {
            RateSpec::Constant { bps } => Some(bps),
            _ => None,
        }
    }

    /// Mean rate in bit/s (None when unlimited).
    pub fn mean_rate_bps(&self) -> Option<f64> {
        match &self.rate {
            RateSpec::Unlimited => None,
            RateSpec::Constant { bps } => Some(*bps as f64),
            RateSpec::Trace(t) => Some(t.mean_rate_bps()),
            RateSpec::Profile(p) => Some(p.mean_rate_bps()),
        }
    }

    /// The configured loss probability (mean for Gilbert–Elliott; a profile's own losses excluded).
    pub fn mean_loss(&self) -> f64 {
        self.loss.mean_loss()
    }

    /// Propagation delay at the start (a profile's first step), for reporting.
    pub fn base_delay(&self) -> Nanos {
        match &self.rate {
            RateSpec::Profile(p) => p.mean_delay(),
            _ => self.delay,
        }
    }

    /// What this direction was configured to be, averaged over the emulator-clock window
    /// `[from, to)` (traces and profiles start at 0): the figure a measurement over that window
    /// should be compared with. Sampled every 100 µs (exact for constant links).
    pub fn configured_over(&self, from: Nanos, to: Nanos) -> WindowFigures {
        let to = to.max(from + 1);
        match &self.rate {
            RateSpec::Unlimited | RateSpec::Constant { .. } => WindowFigures {
                rate_bps: self.mean_rate_bps(),
                delay: self.delay as f64,
                loss: self.mean_loss(),
            },
            RateSpec::Trace(trace) => {
                let period = trace.period();
                let opportunities = trace
                    .timestamps_ms()
                    .iter()
                    .map(|ms| ms * 1_000_000)
                    .collect::<Vec<_>>();
                // Opportunities in [from, to): whole periods plus the partial ones.
                let count_before = |t: Nanos| -> u64 {
                    let cycles = t / period;
                    let rest = t % period;
                    cycles * opportunities.len() as u64
                        + opportunities.iter().filter(|&&o| o < rest).count() as u64
                };
                let n = count_before(to) - count_before(from);
                WindowFigures {
                    rate_bps: Some(n as f64 * 1500.0 * 8.0 * 1e9 / (to - from) as f64),
                    delay: self.delay as f64,
                    loss: self.mean_loss(),
                }
            }
            RateSpec::Profile(profile) => {
                const STEP: Nanos = 100_000;
                let (mut rate, mut delay, mut loss, mut n) = (0.0, 0.0, 0.0, 0.0);
                let mut unlimited = false;
                let mut t = from;
                while t < to {
                    let step = profile.step_at(t);
                    match step.rate_bps {
                        Some(r) => rate += r as f64,
                        None => unlimited = true,
                    }
                    delay += step.delay as f64;
                    loss += step.loss;
                    n += 1.0;
                    t += STEP;
                }
                WindowFigures {
                    rate_bps: (!unlimited).then_some(rate / n),
                    delay: delay / n,
                    loss: loss / n,
                }
            }
        }
    }

    pub fn is_time_varying(&self) -> bool {
        matches!(self.rate, RateSpec::Trace(_) | RateSpec::Profile(_))
    }
}

/// Configured figures of one direction over a window of time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct WindowFigures {
    /// Mean rate in bit/s; None when unlimited.
    pub rate_bps: Option<f64>,
    /// Mean one-way delay in ns.
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    pub delay: f64,
    /// Mean random-loss probability.
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    pub loss: f64,
}

/// A whole link.
#[derive(Debug, Clone, Default)]
pub struct LinkSpec {
    pub uplink: DirectionSpec,
    pub downlink: DirectionSpec,
    pub seed: u64,
    /// Network switches (`--switch`): both directions then follow the schedule's profile, and
    /// the emulator passes only the current network's client address.
    pub switch: Option<crate::switch::SwitchSchedule>,
    /// Subtracted from each direction's delay to cancel the latency the TUN path itself adds
    /// (measured by `quiclab bench link`; see docs/link.md).
    pub tun_compensation: Nanos,
}

/// A serialisable description of a link, stored with every result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LinkDescription {
    pub uplink: String,
    pub downlink: String,
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    pub rtt_ms: f64,
    pub seed: u64,
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    pub tun_compensation_us: f64,
}

impl LinkSpec {
    /// Whether either direction's discipline marks ECN (the lab then turns on the kernels'
    /// `tcp_ecn`, and keeps TUN offload off: a mark rewrites one packet's header).
    pub fn ecn(&self) -> bool {
        self.uplink.discipline.ecn() || self.downlink.discipline.ecn()
    }

    /// Round-trip propagation delay (base RTT) as configured.
    pub fn base_rtt(&self) -> Nanos {
        self.uplink.base_delay() + self.downlink.base_delay()
    }

    /// The two model configurations; `start` is the emulator clock time at which traces start.
    pub fn direction_configs(&self, start: Nanos) -> (DirectionConfig, DirectionConfig) {
        let rtt = self.base_rtt();
        let make = |d: &DirectionSpec, seed: u64| DirectionConfig {
            rate: d.rate.clone(),
            delay: d.delay,
            delay_compensation: self.tun_compensation,
            discipline: d.discipline,
            variation: d.variation,
            loss: d.loss,
            queue: d.queue,
            base_rtt: rtt,
            seed,
            start,
        };
        // Distinct, reproducible streams per direction.
        (
            make(&self.uplink, self.seed.wrapping_mul(2).wrapping_add(1)),
            make(&self.downlink, self.seed.wrapping_mul(2).wrapping_add(2)),
        )
    }

    /// Whether receive steering (see `LabOptions::steer_receive`) pays off for this link: it cuts
    /// release lateness at high rates but adds a cross-CPU hop (and its tail) to every lone packet,
    /// so it is worth it only for fast links. Measured on the reference machine: at 1 Gbit/s p99
    /// lateness 46–73 µs with it vs 285–777 µs without; idle 50 ms RTT p99 52–54 ms with vs
    /// 50.4–50.8 ms without.
    pub fn wants_receive_steering(&self) -> bool {
        self.has_a_direction_of_at_least(crate::options::STEERING_THRESHOLD_BPS)
    }

    /// Whether TUN offload (super-packets read, releases coalesced within a window) is worth its
    /// earliness for this link: below 200 Mbit/s the per-packet path costs at most about half a
    /// core; above, it costs 68 % at 200 Mbit/s and 72 % at 250 Mbit/s against 42–44 % with
    /// offload (2026-11-25, docs/link.md).
    pub fn wants_offload(&self) -> bool {
        self.has_a_direction_of_at_least(crate::options::OFFLOAD_THRESHOLD_BPS)
    }

    fn has_a_direction_of_at_least(&self, bps: f64) -> bool {
        [&self.uplink, &self.downlink]
            .iter()
            .any(|d| d.mean_rate_bps().is_some_and(|r| r >= bps))
    }

    pub fn describe(&self) -> LinkDescription {
        LinkDescription {
            uplink: describe_direction(&self.uplink),
            downlink: describe_direction(&self.downlink),
            rtt_ms: self.base_rtt() as f64 / 1e6,
            seed: self.seed,
            tun_compensation_us: self.tun_compensation as f64 / 1e3,
        }
    }
}

/// "10mbit, one-way delay 25ms, loss 2%, queue 1bdp" (the delay is said to be one way: `--rtt 50ms` gives 25 ms each way).
pub fn describe_direction(d: &DirectionSpec) -> String {
    let mut s = d.rate_label.clone();
    if !matches!(d.rate, RateSpec::Profile(_)) {
        s += &format!(", one-way delay {}", crate::units::format_duration(d.delay));
    }
    s += &d.variation.describe();
    match d.loss {
        LossSpec::None => {}
        LossSpec::Bernoulli(p) => s += &format!(", loss {}%", trim(p * 100.0)),
        LossSpec::GilbertElliott {
            p,
            r,
            loss_good,
            loss_bad,
        } => {
            s += &format!(
                ", loss ge:p={}%,r={}%,good={}%,bad={}%",
                trim(p * 100.0),
                trim(r * 100.0),
                trim(loss_good * 100.0),
                trim(loss_bad * 100.0)
            )
        }
    }
    if !matches!(d.rate, RateSpec::Unlimited) {
        s += &format!(
            ", queue {}",
            match d.queue {
                QueueLimit::Bytes(b) => format!("{b}B"),
                QueueLimit::Packets(p) => format!("{p}pkt"),
                QueueLimit::Bdp(k) => format!("{}bdp", trim(k)),
                QueueLimit::Unlimited => "unlimited".into(),
            }
        );
        if d.discipline != DisciplineSpec::DropTail {
            s += &format!(" {}", d.discipline.label());
        }
    }
    s
}

pub(crate) fn trim(x: f64) -> String {
    let s = format!("{x:.4}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile;
    use std::sync::Arc;

    #[test]
    fn configured_over_a_window_of_a_profile_averages_its_steps() {
        let d = DirectionSpec {
            rate: RateSpec::Profile(Arc::new(profile::builtin("np2b-typical").unwrap())),
            ..Default::default()
        };
        // Inside the first step: 1.5 Mbit/s, 100 ms, 0.12 %.
        let w = d.configured_over(1_000_000_000, 5_000_000_000);
        assert!((w.rate_bps.unwrap() - 1.5e6).abs() < 1.0);
        assert!((w.delay - 100e6).abs() < 1.0);
        assert!((w.loss - 0.0012).abs() < 1e-9);
        // Half in step 1 (1.5 Mbit/s), half in step 2 (2 Mbit/s).
        let w = d.configured_over(25_000_000_000, 35_000_000_000);
        assert!((w.rate_bps.unwrap() - 1.75e6).abs() < 1e3, "{w:?}");
    }

    #[test]
    fn configured_over_a_window_of_a_trace_counts_its_opportunities() {
        // Two opportunities per 10 ms period: 2 × 1500 B / 10 ms = 2.4 Mbit/s.
        let trace = crate::DeliveryTrace::parse("3\n10\n", "t").unwrap();
        let d = DirectionSpec {
            rate: RateSpec::Trace(Arc::new(trace)),
            ..Default::default()
        };
        let w = d.configured_over(0, 1_000_000_000);
        assert!((w.rate_bps.unwrap() - 2.4e6).abs() < 1.0, "{w:?}");
        // [0, 5 ms) holds only the opportunity at 3 ms: 1500 B in 5 ms.
        let w = d.configured_over(0, 5_000_000);
        assert!((w.rate_bps.unwrap() - 2.4e6).abs() < 1.0, "{w:?}");
    }

    #[test]
    fn offload_turns_on_from_200_mbit_and_steering_from_400_in_either_direction() {
        let link = |down_bps: u64, up_bps: u64| LinkSpec {
            uplink: DirectionSpec {
                rate: RateSpec::Constant { bps: up_bps },
                ..Default::default()
            },
            downlink: DirectionSpec {
                rate: RateSpec::Constant { bps: down_bps },
                ..Default::default()
            },
            seed: 0,
            switch: None,
            tun_compensation: 0,
        };
        let both = |l: &LinkSpec| (l.wants_offload(), l.wants_receive_steering());
        assert_eq!(both(&link(100_000_000, 10_000_000)), (false, false));
        assert_eq!(both(&link(199_999_999, 10_000_000)), (false, false));
        assert_eq!(both(&link(200_000_000, 10_000_000)), (true, false));
        assert_eq!(both(&link(250_000_000, 10_000_000)), (true, false));
        assert_eq!(both(&link(10_000_000, 400_000_000)), (true, true));
        assert_eq!(both(&link(1_000_000_000, 1_000_000_000)), (true, true));
        // A rate-less link (unshaped) wants neither: auto keeps the per-packet path.
        let unshaped = LinkSpec {
            uplink: DirectionSpec::default(),
            downlink: DirectionSpec::default(),
            seed: 0,
            switch: None,
            tun_compensation: 0,
        };
        assert_eq!(both(&unshaped), (false, false));
    }

    #[test]
    fn descriptions_are_readable() {
        let d = DirectionSpec {
            rate: RateSpec::Constant { bps: 10_000_000 },
            rate_label: "10mbit".into(),
            delay: 25_000_000,
            loss: LossSpec::Bernoulli(0.02),
            queue: QueueLimit::Bytes(30_000),
            discipline: DisciplineSpec::DropTail,
            variation: Default::default(),
        };
        assert_eq!(
            describe_direction(&d),
            "10mbit, one-way delay 25ms, loss 2%, queue 30000B"
        );
        let codel = DirectionSpec {
            discipline: DisciplineSpec::parse("codel").unwrap().with_ecn(true),
            ..d.clone()
        };
        assert_eq!(
            describe_direction(&codel),
            "10mbit, one-way delay 25ms, loss 2%, queue 30000B codel+ecn"
        );
        let varied = DirectionSpec {
            variation: crate::variation::Variation {
                jitter: 5_000_000,
                reorder: 0.02,
                reorder_delay: 10_000_000,
            },
            ..d
        };
        assert_eq!(
            describe_direction(&varied),
            "10mbit, one-way delay 25ms, jitter 5ms, reorder 2% by 10ms, loss 2%, queue 30000B"
        );
    }
}
