//! Is a run's emulated link the one it was configured to be? A run whose emulator strayed from its
//! configuration is flagged, so the report can keep it out of the statistics and show it apart.
//!
//! The thresholds are the documented tolerances of `quiclab calibrate` (docs/link.md).

use quiclab_lab::{FidelityReport, LinkSpec};

use quiclab_lab::tolerance::{LATENESS_P99_TOL_US, RATE_TOL_FRAC};

/// Below this many bytes sent back to back, the measured backlogged rate is too noisy to judge.
const MIN_BACKLOGGED_BYTES: u64 = 100_000;

/// The fidelity problems of one run (empty: within tolerance). `host_steal` is the fraction of
/// CPU time the hypervisor stole during the run.
pub fn flags(spec: &LinkSpec, f: &FidelityReport, host_steal: f64) -> Vec<String> {
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
    }
    if f.log_events_dropped > 0 {
        out.push(format!(
            "packet log incomplete ({} events dropped)",
            f.log_events_dropped
        ));
    }
    if host_steal > quiclab_lab::host::NOISY_STEAL_FRACTION {
        out.push(format!(
            "the hypervisor stole {:.0} % of CPU time during the run (> {:.0} %)",
            host_steal * 100.0,
            quiclab_lab::host::NOISY_STEAL_FRACTION * 100.0
        ));
    }
    out
}
