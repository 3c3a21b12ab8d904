//! A whole link (both directions) as the user asked for it, turned into the two sans-IO
//! [`DirectionConfig`]s the emulator runs. Shared by every command that builds a lab.

use std::sync::Arc;

use quiclab_link::{DirectionConfig, LossSpec, Nanos, QueueLimit, RateSpec};
use serde::Serialize;

/// One direction as asked for.
#[derive(Debug, Clone)]
pub struct DirectionSpec {
    pub rate: RateSpec,
    /// Human-readable origin of the rate ("10mbit", "trace FILE", "profile NAME").
    pub rate_label: String,
    pub delay: Nanos,
    pub loss: LossSpec,
    pub queue: QueueLimit,
}

impl Default for DirectionSpec {
    fn default() -> Self {
        DirectionSpec {
            rate: RateSpec::Unlimited,
            rate_label: "unlimited".into(),
            delay: 0,
            loss: LossSpec::None,
            queue: QueueLimit::Bdp(1.0),
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

    pub fn is_time_varying(&self) -> bool {
        matches!(self.rate, RateSpec::Trace(_) | RateSpec::Profile(_))
    }
}

/// A whole link.
#[derive(Debug, Clone, Default)]
pub struct LinkSpec {
    pub uplink: DirectionSpec,
    pub downlink: DirectionSpec,
    pub seed: u64,
    /// Subtracted from each direction's delay to cancel the latency the TUN path itself adds
    /// (measured by `quiclab bench link`; see docs/link.md).
    pub tun_compensation: Nanos,
}

/// A serialisable description of a link, stored with every result.
#[derive(Debug, Clone, Serialize)]
pub struct LinkDescription {
    pub uplink: String,
    pub downlink: String,
    pub rtt_ms: f64,
    pub seed: u64,
    pub tun_compensation_us: f64,
}

impl LinkSpec {
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

/// "10mbit, delay 25ms, loss 2%, queue 1bdp".
pub fn describe_direction(d: &DirectionSpec) -> String {
    let mut s = d.rate_label.clone();
    if !matches!(d.rate, RateSpec::Profile(_)) {
        s += &format!(", delay {}", quiclab_link::units::format_duration(d.delay));
    }
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
    }
    s
}

fn trim(x: f64) -> String {
    let s = format!("{x:.4}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Keeps `Arc` in the public signature readable for callers building specs by hand.
pub fn shared<T>(t: T) -> Arc<T> {
    Arc::new(t)
}
