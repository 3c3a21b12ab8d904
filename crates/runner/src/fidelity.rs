//! Is a run's emulated link the one it was configured to be? A run whose emulator strayed from its
//! configuration is flagged, so the report can keep it out of the statistics and show it apart.
//!
//! The thresholds are the documented tolerances of `quiclab calibrate` (docs/link.md).

use quiclab_lab::{FidelityReport, LinkSpec};

use quiclab_lab::tolerance::{LATENESS_P99_TOL_US, RATE_TOL_FRAC};

/// The flag of a run whose CPU steal could not be read (/proc/stat).
pub const STEAL_UNKNOWN: &str = "steal unknown: the host's CPU steal could not be read";

/// Below this many bytes sent back to back, the measured backlogged rate is too noisy to judge.
const MIN_BACKLOGGED_BYTES: u64 = 100_000;

/// The fidelity problems of one run (empty: within tolerance). `host_steal` is the fraction of
/// CPU time the hypervisor stole during the run (None: it could not be read, which flags the run:
/// a noisy host must not pass unseen).
pub fn flags(spec: &LinkSpec, f: &FidelityReport, host_steal: Option<f64>) -> Vec<String> {
    let mut out = Vec::new();
    if f.lateness_us.p99 > LATENESS_P99_TOL_US {
        out.push(format!(
            "emulator release lateness p99 {:.0} µs > {LATENESS_P99_TOL_US:.0} µs",
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
    match host_steal {
        Some(steal) if steal > quiclab_lab::host::NOISY_STEAL_FRACTION => out.push(format!(
            "the hypervisor stole {:.0} % of CPU time during the run (> {:.0} %)",
            steal * 100.0,
            quiclab_lab::host::NOISY_STEAL_FRACTION * 100.0
        )),
        Some(_) => {}
        None => out.push(STEAL_UNKNOWN.to_string()),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use quiclab_lab::emulator::{Direction, DirectionFidelity};
    use quiclab_link::{Distribution, LinkModel, LinkOptions};

    fn quiet_run() -> (LinkSpec, FidelityReport) {
        let spec = LinkOptions::default().to_spec().unwrap();
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

    #[test]
    fn a_quiet_run_has_no_flags_and_unknown_steal_flags_it() {
        let (spec, f) = quiet_run();
        assert!(flags(&spec, &f, Some(0.001)).is_empty());
        assert_eq!(flags(&spec, &f, None), [STEAL_UNKNOWN]);
        assert_eq!(flags(&spec, &f, Some(0.5)).len(), 1);
    }

    #[test]
    fn losses_the_emulator_made_itself_flag_the_run() {
        let (spec, mut f) = quiet_run();
        f.downlink.offload = Some(quiclab_lab::offload::OffloadFigures {
            dropped_unsplittable: 2,
            last_unsplittable: Some("bad TCP header length".into()),
            ..Default::default()
        });
        let got = flags(&spec, &f, Some(0.0));
        assert!(
            got.len() == 1 && got[0].contains("2 TUN offload frame(s) dropped as unsplittable"),
            "{got:?}"
        );
        f.downlink.offload = Some(quiclab_lab::offload::OffloadFigures {
            fallback: Some("the kernel refused a coalesced write".into()),
            ..Default::default()
        });
        let got = flags(&spec, &f, Some(0.0));
        assert!(got.len() == 1 && got[0].contains("fell back"), "{got:?}");
        f.downlink.offload = None;
        // Stale drops after a switch are the configured cut: no flag. A not-yet-valid one is.
        f.uplink.dropped_stale_address_packets = 40;
        assert!(flags(&spec, &f, Some(0.0)).is_empty());
        f.uplink.dropped_not_yet_valid_address_packets = 1;
        let got = flags(&spec, &f, Some(0.0));
        assert!(
            got.len() == 1 && got[0].contains("not reached yet"),
            "{got:?}"
        );
    }
}
