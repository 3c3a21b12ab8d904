//! The link model of one direction: random loss, a tail-drop queue, a bottleneck rate and
//! a propagation delay, computed in virtual time.
//!
//! # Pipeline
//!
//! Every packet offered to [`LinkModel::on_arrival`] goes through:
//!
//! 1. **Random loss**, decided at arrival. A lost packet never enters the queue and
//!    consumes no capacity (like netem's and `mm-loss`'s loss, which act before the
//!    bottleneck). Disposition [`Disposition::DroppedRandom`].
//! 2. **Tail-drop queue.** The occupancy an arriving packet sees is the bytes and packets
//!    that arrived earlier and whose service has *not started* by `now`; the packet being
//!    serialised is already "on the wire", like the head packet a Linux qdisc has handed to
//!    the NIC. The packet is dropped when `waiting_bytes + bytes > limit_bytes` or
//!    `waiting_packets + 1 > limit_packets` (verdict [`Disposition::DroppedQueue`]). A packet
//!    arriving at an idle link (every earlier packet has finished service by `now`) goes
//!    straight to the head of the line and is never dropped by the queue, so even a `0B`
//!    queue passes one packet at a time.
//! 3. **Serialisation** at the bottleneck rate, first come first served.
//! 4. **Propagation delay**, added to the end of serialisation.
//! 5. **Delivery** at [`Departure::deliver_at`], never earlier than the previous packet's
//!    delivery: the link is FIFO and does not reorder, even when a profile lowers the
//!    delay (a packet then waits for the one in front of it, as on a real path).
//!
//! Because the rate schedule is known in advance, each packet's service start, service
//! end and delivery time are computed once, at arrival; the I/O shell only has to hold the
//! packet until `deliver_at`.
//!
//! # Rates
//!
//! - **Constant**: a packet of `b` bytes takes exactly `8·b / rate` seconds. The link's
//!   busy-until time is kept as whole nanoseconds plus a remainder in units of
//!   `1 / rate` ns, so back-to-back packets accumulate no rounding drift; reported
//!   times are rounded *up* to the nanosecond (a packet has not finished before its last
//!   bit has).
//! - **Trace** (Mahimahi `mm-link` semantics, as in its `link_queue.cc`): each delivery
//!   opportunity releases up to 1500 bytes from the head of the queue. A packet larger than
//!   what is left of an opportunity uses it up and continues in the next one; several small
//!   packets can share an opportunity; bytes of an opportunity that find the queue empty
//!   are lost (a packet arriving after an opportunity's time cannot use its leftover, one
//!   arriving exactly at that time can). `service_start` is the time of the first
//!   opportunity a packet uses and `service_end` that of the opportunity completing it.
//!   Opportunity times are relative to [`DirectionConfig::start`] and wrap with the
//!   trace's period.
//! - **Profile**: the rate is piecewise constant by step (relative to
//!   [`DirectionConfig::start`], repeating or holding the last step), and a packet's
//!   serialisation integrates the rate exactly across step boundaries. An unlimited step
//!   serialises instantly. The delay applied is the step's delay at `service_end`, and the
//!   random loss is the step's (Bernoulli) loss at arrival; the configuration's `delay`
//!   and `loss` are ignored.
//! - **Unlimited**: no serialisation and no queue (`service_start = service_end = now`),
//!   a delay-only link like `mm-delay`.
//!
//! # Queue limits in bdp
//!
//! [`QueueLimit::Bdp`]`(k)` resolves to `round(k × rate × base_rtt / 8)` bytes, using the
//! constant rate, a trace's mean rate, or a profile's time-weighted mean rate. It is an
//! error with an unlimited rate (or a profile with unlimited steps), and when it resolves to
//! 0 bytes (e.g. a base RTT of 0), since that would silently make the link bufferless.
//!
//! # Times
//!
//! All times are [`Nanos`] on the caller's clock. `now` must not decrease between calls; if
//! it does, the model uses the latest time it has seen instead of panicking. Times before
//! [`DirectionConfig::start`] belong to the first profile step, and no trace opportunity
//! occurs before `start`.

use std::collections::VecDeque;
use std::sync::Arc;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::aqm::{Admission, AqmCounters, DisciplineSpec, Limits, QueuedPacket};
use crate::flow::{Fate, FlowKey, FlowTable};
use crate::loss::LossProcess;
use crate::profile::Profile;
use crate::stats::{self, Distribution};
use crate::trace::{DeliveryTrace, OPPORTUNITY_BYTES};
use crate::units::{LossSpec, QueueLimit, format_duration, format_probability, format_rate};
use crate::variation::{Variation, VariationProcess};
use crate::{NANOS_PER_MS, NANOS_PER_SEC, Nanos};

/// The bottleneck rate of one direction.
#[derive(Debug, Clone)]
pub enum RateSpec {
    /// No rate limit: a delay-only link.
    Unlimited,
    /// A constant rate in bits per second (> 0).
    Constant {
        /// Bits per second.
        bps: u64,
    },
    /// Mahimahi delivery trace.
    Trace(Arc<DeliveryTrace>),
    /// Time-varying profile; also supplies the delay and loss.
    Profile(Arc<Profile>),
}

/// Configuration of one direction of the link.
#[derive(Debug, Clone)]
pub struct DirectionConfig {
    /// Bottleneck rate.
    pub rate: RateSpec,
    /// One-way propagation delay; replaced by the step's delay when `rate` is a profile.
    pub delay: Nanos,
    /// Random loss; replaced by each step's Bernoulli loss when `rate` is a profile.
    pub loss: LossSpec,
    /// Tail-drop queue capacity; `Bdp` is resolved by [`LinkModel::new`].
    pub queue: QueueLimit,
    /// Round-trip propagation delay of the path (both directions), used only to resolve
    /// [`QueueLimit::Bdp`].
    pub base_rtt: Nanos,
    /// Seed of the random-loss process.
    pub seed: u64,
    /// Clock time at which traces and profiles start (their time 0).
    pub start: Nanos,
    /// Latency the I/O shell itself adds on this direction (reading and writing TUN devices, the
    /// kernels' own path), subtracted from every propagation delay (saturating at 0) so that what a
    /// user measures end to end is the delay configured. 0 in a pure model.
    pub delay_compensation: Nanos,
    /// The queue discipline. Tail drop (the default) is decided at arrival, exactly; CoDel,
    /// FQ-CoDel and PIE at dequeue, so the model holds their packets ([`Disposition::Held`]).
    pub discipline: DisciplineSpec,
    /// Jitter and reordering on top of the propagation delay ([`crate::variation`]).
    pub variation: Variation,
}

/// What happens to an offered packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    /// The packet crosses the link; release it at `deliver_at`.
    Forward(Departure),
    /// Lost by the random-loss process (at arrival, before the queue, like netem and mm-loss).
    DroppedRandom,
    /// Tail drop: the queue was full.
    DroppedQueue,
    /// Dropped at arrival by the queue discipline's own rule (PIE's early drop).
    DroppedAqm,
    /// Held by a queue discipline that decides at dequeue: its fate comes later, from
    /// [`LinkModel::take_settled`] (call [`LinkModel::advance`] at
    /// [`LinkModel::next_dequeue_at`]).
    Held,
}

/// The schedule of a forwarded packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Departure {
    /// When the bottleneck starts serialising it.
    pub service_start: Nanos,
    /// When its last bit has left the bottleneck.
    pub service_end: Nanos,
    /// `service_end` + propagation delay, never earlier than the previous packet's
    /// `deliver_at` (FIFO) — unless the link reorders and holds this one back, when later
    /// packets may leave before it ([`crate::variation`]).
    pub deliver_at: Nanos,
    /// True when its service followed the previous packet's with no idle gap (it arrived
    /// no later than the previous packet finished), so the I/O shell can measure the
    /// delivered rate over backlogged periods. Always false on an unlimited link.
    pub backlogged: bool,
}

/// Per-direction packet and byte counters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// Packets offered to the link.
    pub offered_packets: u64,
    /// Bytes offered to the link.
    pub offered_bytes: u64,
    /// Packets forwarded.
    pub forwarded_packets: u64,
    /// Bytes forwarded.
    pub forwarded_bytes: u64,
    /// Packets lost by random loss.
    pub dropped_random_packets: u64,
    /// Bytes lost by random loss.
    pub dropped_random_bytes: u64,
    /// Packets tail-dropped by the queue.
    pub dropped_queue_packets: u64,
    /// Bytes tail-dropped by the queue.
    pub dropped_queue_bytes: u64,
    /// Peak bytes waiting in the queue (not counting the packet in service), including an
    /// arriving packet once admitted if it has to wait.
    pub max_queue_bytes: u64,
    /// Peak packets waiting in the queue, counted the same way as `max_queue_bytes`.
    pub max_queue_packets: u64,
    /// Packets the queue discipline dropped by its own rule (CoDel and FQ-CoDel at dequeue, PIE at
    /// arrival); tail drop's and a discipline's overflow drops are `dropped_queue_*`.
    #[serde(default)]
    pub dropped_aqm_packets: u64,
    #[serde(default)]
    pub dropped_aqm_bytes: u64,
    /// Packets marked CE instead of dropped (`--ecn`).
    #[serde(default)]
    pub marked_packets: u64,
}

impl Counters {
    /// Loss ratio `l` = bytes lost / bytes sent, as defined by Carlucci et al. 2015
    /// (random and queue drops together); 0 when nothing was offered.
    pub fn loss_ratio(&self) -> f64 {
        if self.offered_bytes == 0 {
            return 0.0;
        }
        (self.dropped_random_bytes + self.dropped_queue_bytes + self.dropped_aqm_bytes) as f64
            / self.offered_bytes as f64
    }
}

/// Everything a report needs about one direction.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ModelSummary {
    /// The rate, e.g. `10mbit`, `trace cell.trace (mean 4.3mbit)`, `profile np2b-typical`.
    pub rate: String,
    /// The one-way delay, e.g. `25ms`, or `per profile step (mean 70.5ms)`.
    pub delay: String,
    /// The random loss, e.g. `none`, `1%`, `ge:p=1%,r=30%,bad=100%,good=0%`.
    pub loss: String,
    /// Resolved byte limit of the queue (bdp → bytes); `None` when unlimited or packet-limited.
    pub queue_limit_bytes: Option<u64>,
    /// Packet limit of the queue; `None` when unlimited or byte-limited.
    pub queue_limit_packets: Option<u64>,
    /// The queue discipline: `droptail`, `codel`, `fq-codel` or `pie` (with `+ecn` when it marks).
    #[serde(default = "droptail_name")]
    pub discipline: String,
    /// The discipline's own counters (None for tail drop, whose drops are the counters').
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aqm: Option<AqmCounters>,
    /// The counters.
    pub counters: Counters,
    /// [`Counters::loss_ratio`].
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    pub loss_ratio: f64,
    /// Per forwarded packet: `service_start − arrival`, in microseconds.
    pub queueing_delay_us: Distribution,
    /// Per forwarded packet: `service_end − arrival`, in microseconds.
    pub sojourn_us: Distribution,
    /// Per packet reaching the queue (forwarded or tail-dropped): bytes waiting ahead of it
    /// at arrival.
    pub queue_occupancy_bytes: Distribution,
    /// Per-flow counters (5-tuple, both directions of a connection under one key) of the packets
    /// offered with a key ([`LinkModel::on_packet`]).
    pub flows: Vec<crate::flow::FlowSummary>,
    /// Packets offered without a flow key (not TCP/UDP, or counted by [`LinkModel::on_arrival`]).
    pub unkeyed: crate::flow::FlowCounters,
}

fn droptail_name() -> String {
    "droptail".into()
}

/// A configuration that cannot be modelled.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    /// `QueueLimit::Bdp` with `RateSpec::Unlimited`.
    #[error(
        "a queue in bdp needs a rate: the link rate is unlimited, so the bandwidth-delay \
         product is undefined; give the queue in bytes (e.g. 64kB) or packets (e.g. 100pkt)"
    )]
    BdpWithUnlimitedRate,
    /// `QueueLimit::Bdp` with a profile whose mean rate is unlimited.
    #[error(
        "a queue in bdp needs a finite mean rate, but profile {profile} has unlimited steps; \
         give the queue in bytes (e.g. 64kB) or packets (e.g. 100pkt)"
    )]
    BdpWithUnlimitedProfile {
        /// The profile's name.
        profile: String,
    },
    /// `QueueLimit::Bdp` that comes to 0 bytes.
    #[error(
        "a queue of {multiple}bdp resolves to 0 bytes (rate {rate} × base RTT {base_rtt}); \
         set a delay so that the base RTT is not 0, or give the queue in bytes (e.g. 64kB) \
         or packets (e.g. 100pkt)"
    )]
    BdpResolvesToZero {
        /// The bdp multiple.
        multiple: f64,
        /// The (mean) rate used, formatted.
        rate: String,
        /// The base RTT, formatted.
        base_rtt: String,
    },
    /// `QueueLimit::Bdp` with a multiple that is not a finite number > 0.
    #[error("a queue in bdp must be a finite multiple greater than 0; got {0}")]
    InvalidBdp(f64),
    /// `RateSpec::Constant` with 0 bit/s.
    #[error("a constant rate must be greater than 0 bit/s; use an unlimited rate for no limit")]
    ZeroRate,
    /// A hand-built profile that breaks the parser's invariants.
    #[error("profile {name} cannot be used: {reason}")]
    InvalidProfile {
        /// The profile's name.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Queue-discipline parameters out of range.
    #[error("queue discipline {name}: {reason}")]
    InvalidDiscipline {
        /// The discipline's name.
        name: String,
        /// What is wrong, naming the parameter.
        reason: String,
    },
    /// A loss spec with a probability outside [0, 1].
    #[error("loss model {spec} cannot be used: every probability must be within [0, 1]")]
    InvalidLoss {
        /// The spec, formatted.
        spec: String,
    },
    /// Jitter or reordering that cannot be emulated.
    #[error("delay variation cannot be used: {reason}")]
    InvalidVariation { reason: String },
}

/// A time with sub-nanosecond precision: `ns + rem / rate` nanoseconds, where `rate` is the
/// bit rate of the schedule segment containing `ns` and `rem < rate`.
///
/// Serialising `b` bits at `rate` bit/s takes `b·10⁹ / rate` ns; keeping the remainder over
/// the rate as the denominator makes consecutive serialisations add up exactly. Segment
/// boundaries are whole nanoseconds, so a time with `rem > 0` is always strictly inside one
/// segment and the denominator is unambiguous.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ExactTime {
    ns: Nanos,
    rem: u64,
}

impl ExactTime {
    fn whole(ns: Nanos) -> ExactTime {
        ExactTime { ns, rem: 0 }
    }

    /// Rounded up: the first whole nanosecond at or after this time.
    fn ceil(self) -> Nanos {
        self.ns.saturating_add(u64::from(self.rem > 0))
    }
}

/// The rate over time, for the bit-by-bit ("fluid") server: a sequence of segments of
/// constant rate (`None` = unlimited).
#[derive(Debug, Clone)]
enum RateSchedule {
    Unlimited,
    Constant(u64),
    Profile {
        profile: Arc<Profile>,
        start: Nanos,
        /// End of each step relative to the profile start (cumulative durations).
        step_ends: Vec<Nanos>,
        cycle: Nanos,
    },
}

impl RateSchedule {
    /// The rate in force at instant `t` and the end of its segment (`Nanos::MAX` = never).
    fn segment_at(&self, t: Nanos) -> (Option<u64>, Nanos) {
        match self {
            RateSchedule::Unlimited => (None, Nanos::MAX),
            RateSchedule::Constant(bps) => (Some(*bps), Nanos::MAX),
            RateSchedule::Profile {
                profile,
                start,
                step_ends,
                cycle,
            } => {
                let rate_of = |index: usize| profile.steps.get(index).and_then(|s| s.rate_bps);
                let last = step_ends.len().saturating_sub(1);
                let relative = t.saturating_sub(*start);
                let (cycle_start, offset) = if relative < *cycle {
                    (*start, relative)
                } else if profile.repeat {
                    let cycles = relative / cycle;
                    (
                        start.saturating_add(cycles.saturating_mul(*cycle)),
                        relative % cycle,
                    )
                } else {
                    return (rate_of(last), Nanos::MAX);
                };
                let index = step_ends.partition_point(|&end| end <= offset).min(last);
                let end = if !profile.repeat && index == last {
                    Nanos::MAX
                } else {
                    cycle_start.saturating_add(step_ends[index])
                };
                (rate_of(index), end)
            }
        }
    }
}

/// Serves packets bit by bit at a piecewise-constant rate (constant, profile, unlimited).
#[derive(Debug, Clone)]
struct FluidServer {
    schedule: RateSchedule,
    /// When the last admitted packet finishes serialisation.
    busy_until: ExactTime,
}

impl FluidServer {
    /// Schedules a packet arriving at `now` behind every earlier one; returns its exact
    /// service start and end.
    fn serve(&mut self, now: Nanos, bytes: u32) -> (ExactTime, ExactTime) {
        // busy_until ≥ now exactly iff busy_until.ns ≥ now, because rem/rate < 1 ns.
        let start = if self.busy_until.ns >= now {
            self.busy_until
        } else {
            ExactTime::whole(now)
        };
        // Work left, in bit·ns/s: at `rate` bit/s it takes need/rate ns.
        let mut need = u128::from(bytes) * 8 * u128::from(NANOS_PER_SEC);
        let mut t = start;
        while need > 0 {
            let (rate, segment_end) = self.schedule.segment_at(t.ns);
            let Some(rate) = rate else {
                // An unlimited segment sends the rest instantly.
                break;
            };
            let rate = u128::from(rate);
            // How much work fits before the segment ends, in the same unit as `need`.
            // `None` means more than any packet needs: the segment never ends, or the
            // product overflows u128 (far beyond a packet's 2^32 · 8 · 10^9).
            let capacity = if segment_end == Nanos::MAX {
                None
            } else {
                segment_end
                    .checked_sub(t.ns)
                    .and_then(|span| u128::from(span).checked_mul(rate))
                    .and_then(|c| c.checked_sub(u128::from(t.rem)))
            };
            match capacity {
                Some(capacity) if capacity < need => {
                    need -= capacity;
                    t = ExactTime::whole(segment_end);
                }
                _ => {
                    let total = u128::from(t.rem) + need;
                    let whole_ns = u64::try_from(total / rate).unwrap_or(u64::MAX);
                    t = ExactTime {
                        ns: t.ns.saturating_add(whole_ns),
                        rem: (total % rate) as u64,
                    };
                    need = 0;
                }
            }
        }
        self.busy_until = t;
        (start, t)
    }
}

/// Position of a delivery opportunity: `index` within the trace, in repetition `cycle`.
/// Ordered like the opportunities' times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct OpportunityPosition {
    cycle: u64,
    index: usize,
}

/// Serves packets from the delivery opportunities of a Mahimahi trace.
#[derive(Debug, Clone)]
struct TraceServer {
    trace: Arc<DeliveryTrace>,
    start: Nanos,
    period: Nanos,
    /// The first opportunity no packet has used yet.
    next: OpportunityPosition,
    /// The opportunity the last packet finished in, and how many of its bytes are unused.
    last_used: Option<(Nanos, u32)>,
}

impl TraceServer {
    fn offset_of(&self, index: usize) -> Nanos {
        self.trace.timestamps_ms()[index] * NANOS_PER_MS
    }

    fn time_of(&self, position: OpportunityPosition) -> Nanos {
        self.start
            .saturating_add(position.cycle.saturating_mul(self.period))
            .saturating_add(self.offset_of(position.index))
    }

    fn advance(&mut self) {
        self.next.index += 1;
        if self.next.index == self.trace.opportunities() {
            self.next = OpportunityPosition {
                cycle: self.next.cycle.saturating_add(1),
                index: 0,
            };
        }
    }

    /// The first opportunity whose time is ≥ `t`, found arithmetically so that an idle
    /// period of any length costs O(log n).
    fn first_at_or_after(&self, t: Nanos) -> OpportunityPosition {
        let timestamps = self.trace.timestamps_ms();
        let first_with_offset_at_least =
            |offset: Nanos| timestamps.partition_point(|&ms| ms * NANOS_PER_MS < offset);
        if t <= self.start {
            return OpportunityPosition { cycle: 0, index: 0 };
        }
        let relative = t - self.start;
        let cycle = relative / self.period;
        // Cycle k's last opportunity (at offset = period) coincides with cycle k+1's
        // start, so the previous cycle may still have opportunities at exactly `t`.
        if cycle > 0 {
            let index = first_with_offset_at_least(relative - (cycle - 1) * self.period);
            if index < timestamps.len() {
                return OpportunityPosition {
                    cycle: cycle - 1,
                    index,
                };
            }
        }
        // relative − cycle·period < period = last timestamp, so this always finds one.
        let index = first_with_offset_at_least(relative - cycle * self.period);
        if index < timestamps.len() {
            OpportunityPosition { cycle, index }
        } else {
            OpportunityPosition {
                cycle: cycle + 1,
                index: 0,
            }
        }
    }

    /// Schedules a packet arriving at `now` behind every earlier one; returns the times of
    /// the first and the last opportunity it uses.
    fn serve(&mut self, now: Nanos, bytes: u32) -> (Nanos, Nanos) {
        let mut remaining = bytes;
        let mut first_used = None;
        // The previous packet's last opportunity still has bytes, and this packet was
        // already queued when that opportunity occurred: it may use them.
        if let Some((time, unused)) = self.last_used
            && unused > 0
            && time >= now
        {
            let used = unused.min(remaining);
            remaining -= used;
            self.last_used = Some((time, unused - used));
            if remaining == 0 {
                return (time, time);
            }
            first_used = Some(time);
        }
        // Opportunities that occurred while the queue was empty are wasted.
        self.next = self.next.max(self.first_at_or_after(now));
        loop {
            let time = self.time_of(self.next);
            self.advance();
            let used = OPPORTUNITY_BYTES.min(remaining);
            remaining -= used;
            self.last_used = Some((time, OPPORTUNITY_BYTES - used));
            let start = *first_used.get_or_insert(time);
            if remaining == 0 {
                return (start, time);
            }
        }
    }
}

#[derive(Debug, Clone)]
enum Server {
    Fluid(FluidServer),
    Trace(TraceServer),
}

/// A scheduled packet, as the queue accounting needs it.
struct Service {
    start: Nanos,
    /// Exact end rounded down / up; the exact end is within `[end_floor, end_ceil]`.
    end_floor: Nanos,
    end_ceil: Nanos,
}

impl Server {
    /// When a packet queued at `t` could start its service: `t` for a rate (the caller knows the
    /// server is free by `t`), a trace's first opportunity at or after `t` with bytes left.
    fn ready_at(&self, t: Nanos) -> Nanos {
        match self {
            Server::Fluid(_) => t,
            Server::Trace(server) => {
                if let Some((time, unused)) = server.last_used
                    && unused > 0
                    && time >= t
                {
                    return time;
                }
                server.time_of(server.next.max(server.first_at_or_after(t)))
            }
        }
    }

    fn serve(&mut self, now: Nanos, bytes: u32) -> Service {
        match self {
            Server::Fluid(server) => {
                let (start, end) = server.serve(now, bytes);
                Service {
                    start: start.ceil(),
                    end_floor: end.ns,
                    end_ceil: end.ceil(),
                }
            }
            Server::Trace(server) => {
                let (start, end) = server.serve(now, bytes);
                Service {
                    start,
                    end_floor: end,
                    end_ceil: end,
                }
            }
        }
    }
}

/// The model of one direction of the link. See the module documentation for semantics.
#[derive(Debug, Clone)]
pub struct LinkModel {
    rate_description: String,
    delay_description: String,
    loss_description: String,
    fixed_delay: Nanos,
    delay_compensation: Nanos,
    /// For a profile: the profile and its start, to look up each step's delay and loss.
    profile: Option<(Arc<Profile>, Nanos)>,
    unlimited_rate: bool,
    server: Server,
    loss: LossProcess,
    limit_bytes: Option<u64>,
    limit_packets: Option<u64>,
    /// Admitted packets whose service has not started yet: (service start, bytes).
    waiting: VecDeque<(Nanos, u32)>,
    waiting_bytes: u64,
    latest_now: Nanos,
    /// The previous forwarded packet's service end, rounded down and up.
    previous_end: Option<(Nanos, Nanos)>,
    previous_deliver_at: Nanos,
    /// Jitter and reordering (none by default).
    variation: VariationProcess,
    counters: Counters,
    queueing_delay_us: Histogram<u64>,
    sojourn_us: Histogram<u64>,
    queue_occupancy_bytes: Histogram<u64>,
    flows: FlowTable,
    /// The discipline's name as reported.
    discipline_name: String,
    /// A discipline that decides at dequeue; None for tail drop (decided at arrival).
    queue: Option<DisciplineQueue>,
}

fn loss_is_valid(spec: &LossSpec) -> bool {
    let valid = |p: f64| (0.0..=1.0).contains(&p);
    match *spec {
        LossSpec::None => true,
        LossSpec::Bernoulli(p) => valid(p),
        LossSpec::GilbertElliott {
            p,
            r,
            loss_good,
            loss_bad,
        } => valid(p) && valid(r) && valid(loss_good) && valid(loss_bad),
    }
}

/// Resolves the queue limit to (bytes, packets); `mean_rate_bps` is `None` for an
/// unlimited rate.
fn resolve_queue(
    cfg: &DirectionConfig,
    mean_rate_bps: Option<f64>,
) -> Result<(Option<u64>, Option<u64>), ModelError> {
    match cfg.queue {
        QueueLimit::Bytes(bytes) => Ok((Some(bytes), None)),
        QueueLimit::Packets(packets) => Ok((None, Some(packets))),
        QueueLimit::Unlimited => Ok((None, None)),
        QueueLimit::Bdp(multiple) => {
            if !(multiple.is_finite() && multiple > 0.0) {
                return Err(ModelError::InvalidBdp(multiple));
            }
            let rate = match (&cfg.rate, mean_rate_bps) {
                (_, None) => return Err(ModelError::BdpWithUnlimitedRate),
                (RateSpec::Profile(profile), Some(rate)) if !rate.is_finite() => {
                    return Err(ModelError::BdpWithUnlimitedProfile {
                        profile: profile.name.clone(),
                    });
                }
                (_, Some(rate)) => rate,
            };
            let bytes = (multiple * rate * cfg.base_rtt as f64 / 8e9).round();
            if bytes < 1.0 {
                return Err(ModelError::BdpResolvesToZero {
                    multiple,
                    rate: format_rate(rate.round() as u64),
                    base_rtt: format_duration(cfg.base_rtt),
                });
            }
            // `as` saturates, so an absurdly large product becomes u64::MAX (no limit).
            Ok((Some(bytes as u64), None))
        }
    }
}

impl LinkModel {
    /// Builds the model, resolving a bdp queue limit and checking the configuration.
    pub fn new(cfg: DirectionConfig) -> Result<LinkModel, ModelError> {
        cfg.variation
            .validate()
            .map_err(|reason| ModelError::InvalidVariation { reason })?;
        if !loss_is_valid(&cfg.loss) {
            return Err(ModelError::InvalidLoss {
                spec: cfg.loss.to_string(),
            });
        }
        let fixed_delay_description =
            format!("{}{}", format_duration(cfg.delay), cfg.variation.describe());
        let fixed_loss_description = cfg.loss.to_string();
        let (server, mean_rate_bps, rate_description, delay_description, loss_description) =
            match &cfg.rate {
                RateSpec::Unlimited => (
                    Server::Fluid(FluidServer {
                        schedule: RateSchedule::Unlimited,
                        busy_until: ExactTime::whole(0),
                    }),
                    None,
                    "unlimited".to_string(),
                    fixed_delay_description,
                    fixed_loss_description,
                ),
                RateSpec::Constant { bps } => {
                    if *bps == 0 {
                        return Err(ModelError::ZeroRate);
                    }
                    (
                        Server::Fluid(FluidServer {
                            schedule: RateSchedule::Constant(*bps),
                            busy_until: ExactTime::whole(0),
                        }),
                        Some(*bps as f64),
                        format_rate(*bps),
                        fixed_delay_description,
                        fixed_loss_description,
                    )
                }
                RateSpec::Trace(trace) => {
                    let mean = trace.mean_rate_bps();
                    (
                        Server::Trace(TraceServer {
                            trace: Arc::clone(trace),
                            start: cfg.start,
                            period: trace.period(),
                            next: OpportunityPosition { cycle: 0, index: 0 },
                            last_used: None,
                        }),
                        Some(mean),
                        format!(
                            "trace {} (mean {})",
                            trace.name(),
                            format_rate(mean.round() as u64)
                        ),
                        fixed_delay_description,
                        fixed_loss_description,
                    )
                }
                RateSpec::Profile(profile) => {
                    profile
                        .validate()
                        .map_err(|reason| ModelError::InvalidProfile {
                            name: profile.name.clone(),
                            reason,
                        })?;
                    let step_ends: Vec<Nanos> = profile
                        .steps
                        .iter()
                        .scan(0u64, |end, step| {
                            *end = end.saturating_add(step.duration);
                            Some(*end)
                        })
                        .collect();
                    (
                        Server::Fluid(FluidServer {
                            schedule: RateSchedule::Profile {
                                profile: Arc::clone(profile),
                                start: cfg.start,
                                step_ends,
                                cycle: profile.cycle_duration(),
                            },
                            busy_until: ExactTime::whole(0),
                        }),
                        Some(profile.mean_rate_bps()),
                        format!("profile {}", profile.name),
                        format!(
                            "per profile step (mean {}){}",
                            format_duration(profile.mean_delay()),
                            cfg.variation.describe()
                        ),
                        format!(
                            "per profile step (mean {})",
                            format_probability(profile.mean_loss())
                        ),
                    )
                }
            };
        let (limit_bytes, limit_packets) = resolve_queue(&cfg, mean_rate_bps)?;
        cfg.discipline
            .validate()
            .map_err(|reason| ModelError::InvalidDiscipline {
                name: cfg.discipline.name().into(),
                reason,
            })?;
        let queue = (cfg.discipline != DisciplineSpec::DropTail).then(|| {
            DisciplineQueue::new(cfg.discipline.build(
                Limits {
                    bytes: limit_bytes,
                    packets: limit_packets,
                },
                // PIE's coin: a stream of its own, apart from the random loss's.
                cfg.seed ^ 0x5049_4500,
            ))
        });
        Ok(LinkModel {
            rate_description,
            delay_description,
            loss_description,
            fixed_delay: cfg.delay,
            delay_compensation: cfg.delay_compensation,
            profile: match &cfg.rate {
                RateSpec::Profile(profile) => Some((Arc::clone(profile), cfg.start)),
                _ => None,
            },
            unlimited_rate: matches!(cfg.rate, RateSpec::Unlimited),
            server,
            loss: LossProcess::new(cfg.loss, cfg.seed),
            limit_bytes,
            limit_packets,
            waiting: VecDeque::new(),
            waiting_bytes: 0,
            latest_now: 0,
            previous_end: None,
            previous_deliver_at: 0,
            variation: VariationProcess::new(cfg.variation, cfg.seed),
            counters: Counters::default(),
            queueing_delay_us: stats::new_histogram(),
            sojourn_us: stats::new_histogram(),
            queue_occupancy_bytes: stats::new_histogram(),
            flows: FlowTable::default(),
            discipline_name: cfg.discipline.label(),
            queue,
        })
    }

    /// [`LinkModel::on_arrival`] for a packet whose flow is known: its fate is also counted
    /// against `key` (see [`crate::flow`]; None counts as unkeyed).
    pub fn on_packet(&mut self, now: Nanos, bytes: u32, key: Option<FlowKey>) -> Disposition {
        self.offer(now, 0, bytes, key, false)
    }

    /// Offers a packet known to the caller as `id` (unique among the packets the model holds):
    /// its fate is counted against `key`, and `ect` (ECN-capable transport) lets a discipline
    /// with ECN mark it instead of dropping it. With tail drop the verdict is final; with a
    /// discipline that decides at dequeue it is usually [`Disposition::Held`].
    pub fn offer(
        &mut self,
        now: Nanos,
        id: u64,
        bytes: u32,
        key: Option<FlowKey>,
        ect: bool,
    ) -> Disposition {
        if self.queue.is_some() {
            return self.offer_to_discipline(now, id, bytes, key, ect);
        }
        let verdict = self.on_arrival_uncounted(now, bytes);
        let fate = match verdict {
            Disposition::Forward(_) => Fate::Forwarded,
            Disposition::DroppedRandom => Fate::DroppedRandom,
            Disposition::DroppedQueue | Disposition::DroppedAqm | Disposition::Held => {
                Fate::DroppedQueue
            }
        };
        self.flows.count(key, bytes, fate);
        verdict
    }

    /// When the bottleneck takes its next held packet (None: nothing held, or tail drop). The
    /// caller calls [`Self::advance`] at that time (or later: decisions are made in virtual time
    /// either way, but a late call makes the packet's release late if its delay is short).
    pub fn next_dequeue_at(&self) -> Option<Nanos> {
        self.queue.as_ref()?.next_dequeue(&self.server)
    }

    /// Runs the bottleneck up to `now`: every dequeue due by then is decided, at its own instant.
    /// The fates are collected for [`Self::take_settled`].
    pub fn advance(&mut self, now: Nanos) {
        let now = now.max(self.latest_now);
        self.latest_now = now;
        while let Some(at) = self.next_dequeue_at().filter(|&at| at <= now) {
            if !self.dequeue_one(at) {
                break;
            }
        }
    }

    /// The fates decided so far of held packets, in the order they were decided (forwarded ones in
    /// order of delivery).
    pub fn take_settled(&mut self) -> Option<Settled> {
        self.queue.as_mut()?.settled.pop_front()
    }

    /// How long after a dequeue's instant the caller may settle it without delivering anything
    /// late: half the shortest propagation delay a packet can get, at most 1 ms (a dequeued packet
    /// is delivered no sooner than its delay after). The caller can wake for dequeues this much
    /// later, and so less often than for releases.
    pub fn settle_slack(&self) -> Nanos {
        let shortest = match &self.profile {
            Some((profile, _)) => profile.steps.iter().map(|s| s.delay).min().unwrap_or(0),
            None => self.fixed_delay,
        }
        .saturating_sub(self.delay_compensation);
        (shortest / 2).min(NANOS_PER_MS)
    }

    /// How many packets a discipline holds.
    pub fn held_packets(&self) -> usize {
        self.queue.as_ref().map_or(0, |q| q.held.len())
    }

    fn offer_to_discipline(
        &mut self,
        now: Nanos,
        id: u64,
        bytes: u32,
        key: Option<FlowKey>,
        ect: bool,
    ) -> Disposition {
        self.advance(now);
        let now = self.latest_now;
        let size = u64::from(bytes);
        self.counters.offered_packets += 1;
        self.counters.offered_bytes += size;
        if self.lose_at(now) {
            self.counters.dropped_random_packets += 1;
            self.counters.dropped_random_bytes += size;
            self.flows.count(key, bytes, Fate::DroppedRandom);
            return Disposition::DroppedRandom;
        }
        let queue = self.queue.as_mut().expect("a discipline");
        let (backlog_bytes, _) = queue.discipline.backlog();
        stats::record(&mut self.queue_occupancy_bytes, backlog_bytes);
        let was_empty = queue.is_empty();
        let mut packet = QueuedPacket::new(id, bytes, discipline::flow_hash(key.as_ref()));
        packet.ect = ect;
        let mut scratch = std::mem::take(&mut queue.scratch);
        let admission = queue.discipline.enqueue(now, packet, &mut scratch);
        // FQ-CoDel over its limit drops the fattest flow's head, another packet.
        for victim in scratch.drain(..) {
            queue.settled.push_back(Settled::DroppedOverflow {
                id: victim.id,
                at: now,
            });
            if let Some(h) = queue.held.remove(&victim.id) {
                self.flows.count(h.key, victim.bytes, Fate::DroppedQueue);
            }
            self.counters.dropped_queue_packets += 1;
            self.counters.dropped_queue_bytes += u64::from(victim.bytes);
        }
        queue.scratch = scratch;
        let verdict = match admission {
            Admission::Queued | Admission::QueuedMarked => {
                queue.held.insert(id, HeldPacket { key, arrival: now });
                if was_empty {
                    queue.nonempty_since = now;
                }
                let (b, p) = queue.discipline.backlog();
                self.counters.max_queue_bytes = self.counters.max_queue_bytes.max(b);
                self.counters.max_queue_packets = self.counters.max_queue_packets.max(p);
                Disposition::Held
            }
            Admission::Overflow => {
                self.counters.dropped_queue_packets += 1;
                self.counters.dropped_queue_bytes += size;
                self.flows.count(key, bytes, Fate::DroppedQueue);
                Disposition::DroppedQueue
            }
            Admission::DroppedEarly => {
                self.counters.dropped_aqm_packets += 1;
                self.counters.dropped_aqm_bytes += size;
                self.flows.count(key, bytes, Fate::DroppedQueue);
                Disposition::DroppedAqm
            }
        };
        // An idle server takes the packet at once.
        self.advance(now);
        verdict
    }

    /// The server takes the discipline's next packet at `at`; false when the discipline had
    /// nothing to give (it dropped what was left).
    fn dequeue_one(&mut self, at: Nanos) -> bool {
        let queue = self.queue.as_mut().expect("a discipline");
        let mut scratch = std::mem::take(&mut queue.scratch);
        let departing = queue.discipline.dequeue(at, &mut scratch);
        for victim in scratch.drain(..) {
            queue
                .settled
                .push_back(Settled::DroppedAqm { id: victim.id, at });
            if let Some(h) = queue.held.remove(&victim.id) {
                self.flows.count(h.key, victim.bytes, Fate::DroppedQueue);
            }
            self.counters.dropped_aqm_packets += 1;
            self.counters.dropped_aqm_bytes += u64::from(victim.bytes);
        }
        queue.scratch = scratch;
        let Some(d) = departing else {
            return false;
        };
        let p = d.packet;
        let held = queue.held.remove(&p.id);
        let arrival = held.map_or(p.enqueued_at, |h| h.arrival);
        let backlogged = !self.unlimited_rate
            && self
                .previous_end
                .is_some_and(|(end_floor, _)| arrival <= end_floor);
        let service = self.server.serve(at, p.bytes);
        self.previous_end = Some((service.end_floor, service.end_ceil));
        let deliver_at = self.deliver_at(service.end_ceil);
        let queue = self.queue.as_mut().expect("a discipline");
        queue.free_at = service.end_ceil;
        let size = u64::from(p.bytes);
        self.counters.forwarded_packets += 1;
        self.counters.forwarded_bytes += size;
        if d.marked {
            self.counters.marked_packets += 1;
        }
        self.flows
            .count(held.and_then(|h| h.key), p.bytes, Fate::Forwarded);
        stats::record_micros(
            &mut self.queueing_delay_us,
            service.start.saturating_sub(arrival),
        );
        stats::record_micros(
            &mut self.sojourn_us,
            service.end_ceil.saturating_sub(arrival),
        );
        queue.settled.push_back(Settled::Forward {
            id: p.id,
            departure: Departure {
                service_start: service.start,
                service_end: service.end_ceil,
                deliver_at,
                backlogged,
            },
            marked: d.marked,
        });
        true
    }

    /// The random loss at `now` (a profile's step's, or the configured process).
    fn lose_at(&mut self, now: Nanos) -> bool {
        match &self.profile {
            Some((profile, start)) => {
                let loss = profile.step_at(now.saturating_sub(*start)).loss;
                self.loss.lose_with(loss)
            }
            None => self.loss.lose(),
        }
    }

    /// When a packet whose serialisation ends at `end` is delivered: after the propagation delay
    /// in force then (with its jitter), never before the previous packet — unless the link
    /// reorders and holds this one back, when the link's order goes on without it.
    fn deliver_at(&mut self, end: Nanos) -> Nanos {
        let delay = match &self.profile {
            Some((profile, start)) => profile.step_at(end.saturating_sub(*start)).delay,
            None => self.fixed_delay,
        };
        let draw = self.variation.draw(delay);
        let delay = draw.delay.saturating_sub(self.delay_compensation);
        let in_order = end.saturating_add(delay).max(self.previous_deliver_at);
        match draw.held_back {
            None => {
                self.previous_deliver_at = in_order;
                in_order
            }
            Some(extra) => in_order.saturating_add(extra),
        }
    }

    /// Offers a packet of `bytes` bytes arriving at `now` and returns its fate. `now` must
    /// not decrease across calls (an earlier time is treated as the latest time seen).
    pub fn on_arrival(&mut self, now: Nanos, bytes: u32) -> Disposition {
        self.on_packet(now, bytes, None)
    }

    fn on_arrival_uncounted(&mut self, now: Nanos, bytes: u32) -> Disposition {
        let now = now.max(self.latest_now);
        self.latest_now = now;
        let size = u64::from(bytes);
        self.counters.offered_packets += 1;
        self.counters.offered_bytes += size;

        if self.lose_at(now) {
            self.counters.dropped_random_packets += 1;
            self.counters.dropped_random_bytes += size;
            return Disposition::DroppedRandom;
        }

        // Packets whose service has started by now have left the queue.
        while let Some(&(start, waiting_size)) = self.waiting.front()
            && start <= now
        {
            self.waiting.pop_front();
            self.waiting_bytes -= u64::from(waiting_size);
        }
        stats::record(&mut self.queue_occupancy_bytes, self.waiting_bytes);

        let idle = self
            .previous_end
            .is_none_or(|(_, end_ceil)| end_ceil <= now);
        if !idle {
            let too_many_bytes = self
                .limit_bytes
                .is_some_and(|limit| self.waiting_bytes + size > limit);
            let too_many_packets = self
                .limit_packets
                .is_some_and(|limit| self.waiting.len() as u64 + 1 > limit);
            if too_many_bytes || too_many_packets {
                self.counters.dropped_queue_packets += 1;
                self.counters.dropped_queue_bytes += size;
                return Disposition::DroppedQueue;
            }
        }

        // No idle gap iff it arrived no later than the previous packet's exact end, which
        // (for whole-ns `now`) is iff now ≤ that end rounded down.
        let backlogged = !self.unlimited_rate
            && self
                .previous_end
                .is_some_and(|(end_floor, _)| now <= end_floor);
        let service = self.server.serve(now, bytes);
        self.previous_end = Some((service.end_floor, service.end_ceil));
        if service.start > now {
            self.waiting.push_back((service.start, bytes));
            self.waiting_bytes += size;
        }
        self.counters.max_queue_bytes = self.counters.max_queue_bytes.max(self.waiting_bytes);
        self.counters.max_queue_packets = self
            .counters
            .max_queue_packets
            .max(self.waiting.len() as u64);

        let deliver_at = self.deliver_at(service.end_ceil);

        self.counters.forwarded_packets += 1;
        self.counters.forwarded_bytes += size;
        stats::record_micros(
            &mut self.queueing_delay_us,
            service.start.saturating_sub(now),
        );
        stats::record_micros(&mut self.sojourn_us, service.end_ceil.saturating_sub(now));

        Disposition::Forward(Departure {
            service_start: service.start,
            service_end: service.end_ceil,
            deliver_at,
            backlogged,
        })
    }

    /// The queue's byte limit after resolving bdp; `None` when unlimited or packet-limited.
    pub fn queue_limit_bytes(&self) -> Option<u64> {
        self.limit_bytes
    }

    /// The queue's packet limit; `None` when unlimited or byte-limited.
    pub fn queue_limit_packets(&self) -> Option<u64> {
        self.limit_packets
    }

    /// The counters so far.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// A description of the rate, e.g. `10mbit` or `trace cell.trace (mean 4.3mbit)`.
    pub fn rate_description(&self) -> &str {
        &self.rate_description
    }

    /// Counters, resolved limits and distributions, for reports.
    pub fn summary(&self) -> ModelSummary {
        ModelSummary {
            rate: self.rate_description.clone(),
            delay: self.delay_description.clone(),
            loss: self.loss_description.clone(),
            queue_limit_bytes: self.limit_bytes,
            queue_limit_packets: self.limit_packets,
            discipline: self.discipline_name.clone(),
            aqm: self.queue.as_ref().map(DisciplineQueue::counters),
            counters: self.counters.clone(),
            loss_ratio: self.counters.loss_ratio(),
            queueing_delay_us: Distribution::from_histogram(&self.queueing_delay_us),
            sojourn_us: Distribution::from_histogram(&self.sojourn_us),
            queue_occupancy_bytes: Distribution::from_histogram(&self.queue_occupancy_bytes),
            flows: self.flows.flows(),
            unkeyed: self.flows.other(),
        }
    }
}

mod discipline;
#[cfg(test)]
mod tests;

pub use discipline::Settled;
use discipline::{DisciplineQueue, HeldPacket};
