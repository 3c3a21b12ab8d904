//! How far a measured link may stray from its configuration and still count as the configured
//! one: `quiclab calibrate`'s pass/fail and the runner's fidelity flags use these. Documented in
//! docs/link.md; change both together.

pub const RTT_MEDIAN_TOL_MS: f64 = 0.5;
pub const RTT_MEDIAN_TOL_FRAC: f64 = 0.01;
pub const RTT_P99_TOL_MS: f64 = 2.0;
pub const RTT_P99_TOL_FRAC: f64 = 0.02;
pub const RATE_TOL_FRAC: f64 = 0.02;
pub const LATENESS_P99_TOL_US: f64 = 250.0;
/// z for the two-sided 99 % binomial interval of the measured loss.
pub const LOSS_Z: f64 = 2.576;

/// The smallest release-lateness p99 limit: what the emulator reaches on a quiet host at any
/// rate (docs/link.md), so a tighter limit would judge the emulator, not the link.
pub const LATENESS_FLOOR_US: f64 = LATENESS_P99_TOL_US;
/// A release late by this share of the base RTT moves a round trip by no more than that.
pub const LATENESS_RTT_SHARE: f64 = 0.02;
/// The packet whose serialisation time sets the spacing a late release may disturb.
pub const PACKET_BYTES: f64 = 1500.0;
/// Pauses of the lab totalling more than this share of a run's duration flag it: a pause lands
/// whole in a time measured across it, and half of the ±5 % equivalence margin is what a run
/// may lose to it.
pub const PAUSED_SHARE: f64 = 0.025;
/// A single pause longer than the base RTT (at least this) flags the run: on resuming, the
/// stacks' loss-recovery timers that expired meanwhile fire at once (spurious retransmissions),
/// which no pause shorter than a round trip causes.
pub const PAUSE_LONGEST_FLOOR_MS: f64 = 10.0;

/// The release-lateness p99 a run of `spec` may show: the largest of one packet's
/// serialisation time at the slowest configured rate (a release later by less keeps the
/// packets' spacing and order), [`LATENESS_RTT_SHARE`] of the base RTT (it then moves a round
/// trip by at most that share), and [`LATENESS_FLOOR_US`].
pub fn lateness_p99_limit_us(spec: &crate::LinkSpec) -> f64 {
    let slowest = [&spec.uplink, &spec.downlink]
        .iter()
        .filter_map(|d| d.mean_rate_bps())
        .filter(|r| *r > 0.0)
        .fold(f64::INFINITY, f64::min);
    let packet_us = if slowest.is_finite() {
        PACKET_BYTES * 8.0 / slowest * 1e6
    } else {
        0.0
    };
    let rtt_us = base_rtt_ms(spec) * 1e3;
    packet_us
        .max(LATENESS_RTT_SHARE * rtt_us)
        .max(LATENESS_FLOOR_US)
}

/// The base RTT: the two directions' propagation delays.
pub fn base_rtt_ms(spec: &crate::LinkSpec) -> f64 {
    (spec.uplink.base_delay() + spec.downlink.base_delay()) as f64 / 1e6
}

/// The longest single pause a run of `spec` may contain (ms).
pub fn pause_longest_limit_ms(spec: &crate::LinkSpec) -> f64 {
    base_rtt_ms(spec).max(PAUSE_LONGEST_FLOOR_MS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(args: &[(&str, &str)]) -> crate::LinkSpec {
        let mut o = crate::LinkOptions::default();
        for (k, v) in args {
            o.set(k, v).unwrap();
        }
        o.to_spec(&quiclab_outputs::input::read_input).unwrap()
    }

    #[test]
    fn the_lateness_limit_follows_the_link() {
        // 10 Mbit/s: a packet takes 1.2 ms; 2 % of 50 ms is 1 ms.
        let slow = spec(&[("rate", "10mbit"), ("rtt", "50ms")]);
        assert!((lateness_p99_limit_us(&slow) - 1200.0).abs() < 1e-6);
        // 1 Gbit/s, 50 ms: the RTT's share (1 ms) decides.
        let fast = spec(&[("rate", "1gbit"), ("rtt", "50ms")]);
        assert!((lateness_p99_limit_us(&fast) - 1000.0).abs() < 1e-6);
        // 1 Gbit/s, 2 ms: the floor.
        let lan = spec(&[("rate", "1gbit"), ("rtt", "2ms")]);
        assert_eq!(lateness_p99_limit_us(&lan), LATENESS_FLOOR_US);
        // No rate, no delay: the floor.
        assert_eq!(lateness_p99_limit_us(&spec(&[])), LATENESS_FLOOR_US);
        assert_eq!(pause_longest_limit_ms(&slow), 50.0);
        assert_eq!(pause_longest_limit_ms(&lan), PAUSE_LONGEST_FLOOR_MS);
    }
}
