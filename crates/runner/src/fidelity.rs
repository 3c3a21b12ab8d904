//! Is a run's emulated link the one it was configured to be? A run whose emulator strayed from its
//! configuration is flagged, so the report can keep it out of the statistics and show it apart.
//!
//! Each limit is derived from the link it judges and the run's length (docs/link.md, "Fidelity
//! flags"): release lateness against a packet's time at the rate and the base RTT, pauses of the
//! whole lab against the run's duration and the RTT. The hypervisor's steal is recorded, not
//! judged: steal spread thin changes nothing, steal in bursts shows as pauses.

use quiclab_lab::host::Pauses;
use quiclab_lab::tolerance::{
    PAUSED_SHARE, RATE_TOL_FRAC, lateness_p99_limit_us, pause_longest_limit_ms,
};
use quiclab_lab::{FidelityReport, LinkSpec};

/// The flag of a run whose pauses could not be watched (no watcher thread could start).
pub const PAUSES_UNKNOWN: &str =
    "pauses unknown: the lab's pause watch could not start, so a paused run would pass unseen";

/// Below this many bytes sent back to back, the measured backlogged rate is too noisy to judge.
const MIN_BACKLOGGED_BYTES: u64 = 100_000;

/// The fidelity problems of one run (empty: within tolerance). `pauses` are the lab's pauses
/// during the workload (None: they could not be watched, which flags the run: a noisy host must
/// not pass unseen).
pub fn flags(spec: &LinkSpec, f: &FidelityReport, pauses: Option<&Pauses>) -> Vec<String> {
    let mut out = Vec::new();
    let late_limit = lateness_p99_limit_us(spec);
    if f.lateness_us.p99 > late_limit {
        out.push(format!(
            "emulator release lateness p99 {:.0} µs > {late_limit:.0} µs (this link's limit: the \
             largest of a packet's time at its slowest rate, 2 % of its base RTT, 250 µs)",
            f.lateness_us.p99
        ));
    }
    for (name, d, configured) in [
        ("uplink", &f.uplink, spec.uplink.constant_rate_bps()),
        ("downlink", &f.downlink, spec.downlink.constant_rate_bps()),
    ] {
        if let (Some(measured), Some(configured)) = (d.backlogged_rate_bps, configured)
            && d.backlogged_bytes >= MIN_BACKLOGGED_BYTES
        {
            let err = measured / configured as f64 - 1.0;
            if err.abs() > RATE_TOL_FRAC {
                out.push(format!(
                    "{name} rate {:.3} Mbit/s while backlogged, configured {:.3} ({:+.1} %, tolerance ±{:.0} %)",
                    measured / 1e6,
                    configured as f64 / 1e6,
                    err * 100.0,
                    RATE_TOL_FRAC * 100.0
                ));
            }
        }
        if d.write_errors > 0 {
            out.push(format!(
                "{name}: {} packet(s) lost writing to the TUN device",
                d.write_errors
            ));
        }
        if d.marks_not_applied > 0 {
            out.push(format!(
                "{name}: {} ECN mark(s) the queue discipline decided could not be written",
                d.marks_not_applied
            ));
        }
        // Losses nobody configured: the emulator's own, never the link's.
        if let Some(o) = &d.offload {
            if o.dropped_unsplittable > 0 {
                out.push(format!(
                    "{name}: {} TUN offload frame(s) dropped as unsplittable ({})",
                    o.dropped_unsplittable,
                    o.last_unsplittable
                        .as_deref()
                        .unwrap_or("no reason recorded")
                ));
            }
            if let Some(why) = &o.fallback {
                out.push(format!(
                    "{name}: TUN offload fell back to plain writes: {why}"
                ));
            }
        }
        if d.dropped_not_yet_valid_address_packets > 0 {
            out.push(format!(
                "{name}: {} packet(s) dropped for naming a client address of a network not reached \
                 yet (no switch configures that)",
                d.dropped_not_yet_valid_address_packets
            ));
        }
    }
    if f.log_events_dropped > 0 {
        out.push(format!(
            "packet log incomplete ({} events dropped)",
            f.log_events_dropped
        ));
    }
    match pauses {
        Some(p) => out.extend(pause_flags(spec, p)),
        None => out.push(PAUSES_UNKNOWN.to_string()),
    }
    out
}

/// The flags of a run's pauses.
pub fn pause_flags(spec: &LinkSpec, p: &Pauses) -> Vec<String> {
    let mut out = Vec::new();
    if p.share() > PAUSED_SHARE {
        out.push(format!(
            "the lab was paused {:.0} ms in {} pause(s), {:.1} % of the run's {:.1} s (> {:.1} %: a \
             pause lands whole in a time measured across it)",
            p.total_s * 1e3,
            p.count,
            p.share() * 100.0,
            p.window_s,
            PAUSED_SHARE * 100.0
        ));
    }
    let longest = pause_longest_limit_ms(spec);
    if p.longest_s * 1e3 > longest {
        out.push(format!(
            "a pause of the lab of {:.0} ms, longer than {longest:.0} ms (the base RTT: loss-recovery \
             timers expire during it)",
            p.longest_s * 1e3
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use quiclab_lab::emulator::{Direction, DirectionFidelity};
    use quiclab_link::{Distribution, LinkModel, LinkOptions};

    fn quiet_run() -> (LinkSpec, FidelityReport) {
        let spec = LinkOptions::default()
            .to_spec(&quiclab_outputs::input::read_input)
            .unwrap();
        let (up, down) = spec.direction_configs(0);
        let direction = |direction, cfg| DirectionFidelity {
            direction,
            model: LinkModel::new(cfg).unwrap().summary(),
            delivered_packets: 0,
            delivered_bytes: 0,
            in_flight_at_stop: 0,
            lateness_us: Distribution::default(),
            early_us: Distribution::default(),
            backlogged_rate_bps: None,
            backlogged_bytes: 0,
            backlogged_seconds: 0.0,
            write_errors: 0,
            dropped_stale_address_packets: 0,
            dropped_stale_address_bytes: 0,
            dropped_not_yet_valid_address_packets: 0,
            cpu_seconds: 0.0,
            realtime: true,
            offload: None,
            largest_udp_payload: None,
            sojourn_ms: Default::default(),
            marks_not_applied: 0,
        };
        let report = FidelityReport {
            uplink: direction(Direction::Uplink, up),
            downlink: direction(Direction::Downlink, down),
            lateness_us: Distribution::default(),
            cpu_core_fraction: 0.1,
            wall_seconds: 1.0,
            log_events_dropped: 0,
            late_share: 0.0,
            phases: Vec::new(),
            capture: None,
        };
        (spec, report)
    }

    fn paused(total_ms: f64, longest_ms: f64, window_s: f64) -> Pauses {
        Pauses {
            window_s,
            total_s: total_ms / 1e3,
            longest_s: longest_ms / 1e3,
            count: 1,
        }
    }

    #[test]
    fn a_quiet_run_has_no_flags_and_unwatched_pauses_flag_it() {
        let (spec, f) = quiet_run();
        assert!(flags(&spec, &f, Some(&paused(0.0, 0.0, 1.0))).is_empty());
        assert_eq!(flags(&spec, &f, None), [PAUSES_UNKNOWN]);
    }

    #[test]
    fn pauses_flag_by_their_share_of_the_run_and_against_the_rtt() {
        let (mut o, f) = (LinkOptions::default(), quiet_run().1);
        o.set("rtt", "50ms").unwrap();
        let spec = o.to_spec(&quiclab_outputs::input::read_input).unwrap();
        // 200 ms of pauses in a 10 s run: 2 %, none longer than the RTT.
        assert!(flags(&spec, &f, Some(&paused(200.0, 20.0, 10.0))).is_empty());
        // 300 ms in 10 s: 3 % > 2.5 %.
        let got = flags(&spec, &f, Some(&paused(300.0, 20.0, 10.0)));
        assert!(
            got.len() == 1 && got[0].contains("3.0 % of the run"),
            "{got:?}"
        );
        // One pause of 60 ms against a 50 ms RTT, in a long run.
        let got = flags(&spec, &f, Some(&paused(60.0, 60.0, 100.0)));
        assert!(
            got.len() == 1 && got[0].contains("longer than 50 ms"),
            "{got:?}"
        );
    }

    #[test]
    fn lateness_is_judged_against_this_links_limit() {
        let (mut o, mut f) = (LinkOptions::default(), quiet_run().1);
        o.set("rate", "10mbit").unwrap();
        o.set("rtt", "50ms").unwrap();
        let spec = o.to_spec(&quiclab_outputs::input::read_input).unwrap();
        let none = paused(0.0, 0.0, 1.0);
        // 1 ms at 10 Mbit/s (a packet takes 1.2 ms): no flag; the fixed 250 µs flagged it.
        f.lateness_us.p99 = 1000.0;
        assert!(flags(&spec, &f, Some(&none)).is_empty());
        f.lateness_us.p99 = 1300.0;
        assert_eq!(flags(&spec, &f, Some(&none)).len(), 1);
    }

    #[test]
    fn losses_the_emulator_made_itself_flag_the_run() {
        let (spec, mut f) = quiet_run();
        f.downlink.offload = Some(quiclab_lab::offload::OffloadFigures {
            dropped_unsplittable: 2,
            last_unsplittable: Some("bad TCP header length".into()),
            ..Default::default()
        });
        let got = flags(&spec, &f, Some(&paused(0.0, 0.0, 1.0)));
        assert!(
            got.len() == 1 && got[0].contains("2 TUN offload frame(s) dropped as unsplittable"),
            "{got:?}"
        );
        f.downlink.offload = Some(quiclab_lab::offload::OffloadFigures {
            fallback: Some("the kernel refused a coalesced write".into()),
            ..Default::default()
        });
        let got = flags(&spec, &f, Some(&paused(0.0, 0.0, 1.0)));
        assert!(got.len() == 1 && got[0].contains("fell back"), "{got:?}");
        f.downlink.offload = None;
        // Stale drops after a switch are the configured cut: no flag. A not-yet-valid one is.
        f.uplink.dropped_stale_address_packets = 40;
        assert!(flags(&spec, &f, Some(&paused(0.0, 0.0, 1.0))).is_empty());
        f.uplink.dropped_not_yet_valid_address_packets = 1;
        let got = flags(&spec, &f, Some(&paused(0.0, 0.0, 1.0)));
        assert!(
            got.len() == 1 && got[0].contains("not reached yet"),
            "{got:?}"
        );
    }
}
