//! `quiclab calibrate`: measure the link quiclab was given, through the emulator, with quiclab's own
//! probes, and say whether each figure is within its documented tolerance (docs/link.md).
//!
//! Phases, in order, on one lab: (1) UDP echo on the idle link → RTT; (2) kernel-TCP bulk download with
//! CUBIC → the emulator's delivered IP-layer rate while its downlink queue was backlogged (and the TCP
//! goodput as a cross-check); (3) paced UDP streams in both directions at half the link rate → loss.

use std::time::Duration;

use anyhow::Result;
use clap::Args;
use quiclab_lab::{Side, probe};
use quiclab_link::RateSpec;
use serde_json::json;

use crate::link_args::LinkArgs;
use crate::report;

use quiclab_lab::tolerance::*;

#[derive(Args, Debug)]
pub struct CalibrateArgs {
    #[command(flatten)]
    pub link: LinkArgs,
    /// Print one JSON object instead of a table
    #[arg(long)]
    pub json: bool,
    /// Probe over IPv6 instead of IPv4
    #[arg(long)]
    pub ipv6: bool,
    /// Number of RTT probes (one every 10 ms)
    #[arg(long, default_value_t = 200)]
    pub rtt_probes: usize,
    /// Length of the TCP bulk transfer
    #[arg(long, default_value = "5s",
          value_parser = crate::link_args::duration)]
    pub bulk_duration: u64,
    /// Write the per-packet event log of the whole calibration here (format: docs/link.md)
    #[arg(long, value_name = "FILE")]
    pub log: Option<std::path::PathBuf>,
    /// Replace the file --log names if it exists (never through a symlink)
    #[arg(long)]
    pub force: bool,
    /// UDP payload of the loss probe's datagrams, bytes. 1200 is a QUIC packet's size: the probe
    /// then sends at a real experiment's packet rate. 100-byte datagrams at half of 100 Mbit/s are
    /// ~98 000 packets/s, above what the emulator releases on time on two vCPUs (docs/link.md)
    #[arg(long, default_value_t = 1200, value_parser = clap::value_parser!(u16).range(8..=1400))]
    pub loss_datagram: u16,
    /// Datagrams per direction in the loss probe (default: 20000 when loss is configured, else 3000)
    #[arg(long)]
    pub loss_packets: Option<u64>,
}

/// Two-sided binomial interval for `n` trials of probability `p` (normal approximation plus a
/// continuity correction, clamped to [0, 1]).
pub fn binomial_interval(p: f64, n: u64, z: f64) -> (f64, f64) {
    loss_interval(p, n, z, 1.0)
}

/// Like [`binomial_interval`] with the variance multiplied by `variance_factor` (correlated losses).
pub fn loss_interval(p: f64, n: u64, z: f64, variance_factor: f64) -> (f64, f64) {
    let n = n.max(1) as f64;
    let half = z * (variance_factor * p * (1.0 - p) / n).sqrt() + 0.5 / n;
    ((p - half).max(0.0), (p + half).min(1.0))
}

/// How much a loss process's correlation inflates the variance of a measured loss rate. For
/// Gilbert–Elliott the state is a two-state Markov chain with lag-1 autocorrelation λ = 1 − p − r,
/// and the variance of a long-run mean grows by (1 + λ) / (1 − λ) (exact for good = 0 %, bad = 100 %;
/// an upper bound otherwise). Independent (Bernoulli) loss: 1.
pub fn loss_variance_factor(loss: &quiclab_link::LossSpec) -> f64 {
    match *loss {
        quiclab_link::LossSpec::GilbertElliott { p, r, .. } => {
            let lambda = 1.0 - p - r;
            ((1.0 + lambda) / (1.0 - lambda).max(1e-9)).max(1.0)
        }
        _ => 1.0,
    }
}

fn percentile(values: &[f64], q: f64) -> f64 {
    quiclab_experiment::stats::percentile(values, q).unwrap_or(f64::NAN)
}

pub fn run(args: CalibrateArgs) -> Result<i32> {
    let (doc, text) = measure(&args)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        print!("{text}");
    }
    Ok(if doc["pass"].as_bool() == Some(true) {
        0
    } else {
        1
    })
}

/// Runs the three probes and returns the JSON document and its human-readable form.
pub fn measure(args: &CalibrateArgs) -> Result<(serde_json::Value, String)> {
    use std::fmt::Write as _;
    let spec = args.link.to_spec()?;
    let steal = quiclab_lab::host::StealMeter::start();
    if let Some(log) = &args.log {
        quiclab_outputs::check_user_file(log, "--log", args.force)?;
    }
    let mut running = args.link.start_lab(&spec, args.log.clone())?;
    let lab = &running.lab;

    // (1) RTT on the idle link. The probe's own serialisation adds to the propagation delay.
    const PROBE_PAYLOAD: usize = 64;
    let ip_header = if args.ipv6 { 48 } else { 28 };
    // Serialisation of the probe at the rate in force (a trace's waiting is allowed for below).
    let ser = |d: &quiclab_lab::DirectionSpec, w: &quiclab_lab::link_spec::WindowFigures| match (
        &d.rate, w.rate_bps,
    ) {
        (RateSpec::Constant { .. } | RateSpec::Profile(_), Some(bps)) => {
            ((PROBE_PAYLOAD + ip_header) * 8) as f64 / bps * 1e3
        }
        _ => 0.0,
    };
    let t0 = running.clock();
    running.begin_phase("rtt");
    let rtt = probe::udp_echo(
        lab,
        args.ipv6,
        args.rtt_probes,
        Duration::from_millis(10),
        PROBE_PAYLOAD,
    )?;
    let t1 = running.clock();
    let (up_w, down_w) = (
        spec.uplink.configured_over(t0, t1),
        spec.downlink.configured_over(t0, t1),
    );
    let configured_rtt_ms = (up_w.delay + down_w.delay) / 1e6;
    let expected_rtt_ms =
        configured_rtt_ms + ser(&spec.uplink, &up_w) + ser(&spec.downlink, &down_w);
    let mut sorted = rtt.rtt_ms.clone();
    sorted.sort_by(f64::total_cmp);
    let median = percentile(&sorted, 0.5);
    let p99 = percentile(&sorted, 0.99);
    let mean = sorted.iter().sum::<f64>() / sorted.len().max(1) as f64;
    // A trace releases on whole-millisecond opportunities: up to 1 ms of waiting each way.
    let trace_slack_ms = [&spec.uplink, &spec.downlink]
        .iter()
        .filter(|d| matches!(d.rate, RateSpec::Trace(_)))
        .count() as f64;
    let median_tol = RTT_MEDIAN_TOL_MS + RTT_MEDIAN_TOL_FRAC * expected_rtt_ms + trace_slack_ms;
    let p99_tol = RTT_P99_TOL_MS + RTT_P99_TOL_FRAC * expected_rtt_ms + trace_slack_ms;
    // A profile may change its delay during the probe: then only the median is meaningful.
    let delay_changed = [&spec.uplink, &spec.downlink].iter().any(|d| {
        matches!(d.rate, RateSpec::Profile(_)) && {
            let a = d.configured_over(t0, t0 + 1);
            let b = d.configured_over(t1.saturating_sub(1), t1);
            a.delay != b.delay
        }
    });
    let rtt_pass = !sorted.is_empty()
        && (median - expected_rtt_ms).abs() <= median_tol
        && (delay_changed || p99 <= expected_rtt_ms + p99_tol);

    // (2) Rate: a CUBIC download fills the downlink queue. Measured over this phase alone: the
    //     loss probe's small datagrams would share a trace's delivery opportunities.
    let (_, down_before) = running.snapshot();
    let t2 = running.clock();
    running.begin_phase("tcp");
    let bulk = probe::tcp_bulk_download(
        lab,
        args.ipv6,
        Duration::from_nanos(args.bulk_duration),
        "cubic",
    )?;

    let (_, down_after) = running.snapshot();
    let t3 = running.clock();
    let rate_measured = down_after.backlogged_rate_since(&down_before);
    let backlogged_seconds = (down_after.backlogged_ns - down_before.backlogged_ns) as f64 / 1e9;

    // (3) Loss: paced UDP in both directions at once, at half the link rate.
    let pace =
        |d: &quiclab_lab::DirectionSpec| d.mean_rate_bps().map_or(20e6, |r| (r * 0.5).min(50e6));
    let loss_configured = spec.uplink.mean_loss().max(spec.downlink.mean_loss());
    let mut count = args
        .loss_packets
        .unwrap_or(if loss_configured > 0.0 { 20_000 } else { 3_000 });
    if args.loss_packets.is_none() {
        // Keep the probe under ~20 s on slow links.
        let slowest = pace(&spec.uplink).min(pace(&spec.downlink));
        count = count
            .min((slowest * 20.0 / ((args.loss_datagram as usize + ip_header) * 8) as f64) as u64)
            .max(500);
    }
    let t4 = running.clock();
    running.begin_phase("udp-loss");
    let (up_loss, down_loss) = std::thread::scope(|s| {
        let up = s.spawn(|| {
            probe::paced_udp(
                lab,
                Side::Client,
                args.ipv6,
                count,
                args.loss_datagram as usize,
                pace(&spec.uplink),
            )
        });
        let down = probe::paced_udp(
            lab,
            Side::Server,
            args.ipv6,
            count,
            args.loss_datagram as usize,
            pace(&spec.downlink),
        );
        (up.join().expect("uplink loss probe"), down)
    });
    let (up_loss, down_loss) = (up_loss?, down_loss?);
    let t5 = running.clock();

    let fidelity = running.stop_emulator()?;
    drop(running);

    // Verdicts.
    let rate_configured = spec.downlink.configured_over(t2, t3).rate_bps;
    let rate_pass = match (rate_configured, rate_measured) {
        (None, _) => true,
        (Some(c), Some(m)) => {
            let tol = if spec.downlink.is_time_varying() {
                0.05
            } else {
                RATE_TOL_FRAC
            };
            (m - c).abs() / c <= tol
        }
        (Some(_), None) => false,
    };
    let loss_dir = |cfg: f64, r: &probe::LossResult, factor: f64| {
        let (lo, hi) = loss_interval(cfg, r.sent, LOSS_Z, factor);
        json!({
            "configured": cfg, "measured": r.loss, "sent": r.sent, "received": r.received,
            "interval_99": [lo, hi], "pass": r.loss >= lo && r.loss <= hi,
        })
    };
    let up_cfg = spec.uplink.configured_over(t4, t5).loss;
    let down_cfg = spec.downlink.configured_over(t4, t5).loss;
    let up_j = loss_dir(up_cfg, &up_loss, loss_variance_factor(&spec.uplink.loss));
    let down_j = loss_dir(
        down_cfg,
        &down_loss,
        loss_variance_factor(&spec.downlink.loss),
    );
    let loss_pass =
        up_j["pass"].as_bool().unwrap_or(false) && down_j["pass"].as_bool().unwrap_or(false);
    let pooled_sent = up_loss.sent + down_loss.sent;
    let pooled_measured = 1.0 - (up_loss.received + down_loss.received) as f64 / pooled_sent as f64;
    let pooled_configured = (up_cfg + down_cfg) / 2.0;
    let lateness_pass = fidelity.lateness_us.p99 <= LATENESS_P99_TOL_US;
    let stolen = steal.fraction();
    let pass = rtt_pass && rate_pass && loss_pass && lateness_pass;

    let doc = json!({
        "link": spec.describe(),
        "ip_version": if args.ipv6 { 6 } else { 4 },
        "rtt_ms": {
            "configured": configured_rtt_ms, "expected": expected_rtt_ms,
            "median": median, "mean": mean, "p99": p99,
            "min": sorted.first(), "max": sorted.last(),
            "samples": rtt.received, "sent": rtt.sent,
            "tolerance": { "median_ms": median_tol, "p99_above_ms": p99_tol },
            "p99_checked": !delay_changed, "pass": rtt_pass,
        },
        "rate_mbps": {
            "configured": rate_configured.map(|r| r / 1e6),
            "measured": rate_measured.map(|r| r / 1e6),
            "direction": "downlink",
            "backlogged_seconds": backlogged_seconds,
            "tcp_goodput": bulk.goodput_bps / 1e6,
            "tcp_congestion_control": bulk.congestion_control,
            "tolerance_frac": if spec.downlink.is_time_varying() { 0.05 } else { RATE_TOL_FRAC },
            "pass": rate_pass,
        },
        "loss": {
            "configured": pooled_configured, "measured": pooled_measured, "sent": pooled_sent,
            "uplink": up_j, "downlink": down_j, "pass": loss_pass,
        },
        "lateness_us": {
            "p50": fidelity.lateness_us.p50, "p99": fidelity.lateness_us.p99,
            "max": fidelity.lateness_us.max, "tolerance_p99": LATENESS_P99_TOL_US,
            "late_share": fidelity.late_share,
            "phases": fidelity.phases,
            "pass": lateness_pass,
        },
        "fidelity": fidelity,
        "host": { "cpu_steal_fraction": stolen },
        "pass": pass,
    });
    let mut text = String::new();
    {
        let ok = |b: bool| if b { "ok" } else { "FAIL" };
        writeln!(
            text,
            "quiclab calibrate over IPv{}",
            if args.ipv6 { 6 } else { 4 }
        )?;
        writeln!(text, "  uplink   {}", spec.describe().uplink)?;
        writeln!(text, "  downlink {}", spec.describe().downlink)?;
        writeln!(
            text,
            "  {:<10} {:>14} {:>14}   verdict",
            "figure", "configured", "measured"
        )?;
        writeln!(
            text,
            "  {:<10} {:>11.3} ms {:>11.3} ms   {} (median; p99 {:.3} ms; expected {:.3} ms incl. probe serialisation)",
            "rtt",
            configured_rtt_ms,
            median,
            ok(rtt_pass),
            p99,
            expected_rtt_ms
        )?;
        writeln!(
            text,
            "  {:<10} {:>14} {:>14}   {} (backlogged downlink; TCP goodput {:.3} Mbit/s)",
            "rate",
            rate_configured.map_or("unlimited".into(), |r| format!("{:.3} Mbit/s", r / 1e6)),
            rate_measured.map_or("-".into(), |r| format!("{:.3} Mbit/s", r / 1e6)),
            ok(rate_pass),
            bulk.goodput_bps / 1e6
        )?;
        writeln!(
            text,
            "  {:<10} {:>13.4}% {:>13.4}%   {} ({} datagrams per direction)",
            "loss",
            pooled_configured * 100.0,
            pooled_measured * 100.0,
            ok(loss_pass),
            count
        )?;
        writeln!(
            text,
            "  {:<10} {:>14} {:>11.1} us   {} (p99 release lateness; p50 {:.1} us, max {:.1} us)",
            "lateness",
            format!("<= {LATENESS_P99_TOL_US} us"),
            fidelity.lateness_us.p99,
            ok(lateness_pass),
            fidelity.lateness_us.p50,
            fidelity.lateness_us.max
        )?;
        for p in &fidelity.phases {
            writeln!(
                text,
                "  {:<10} {:>14} {:>11.1} us   (phase {}: p99; p50 {:.1} us, max {:.1} us, {:.2} % of {} releases > 100 us)",
                "",
                "",
                p.lateness_us.p99,
                p.name,
                p.lateness_us.p50,
                p.lateness_us.max,
                p.late_share * 100.0,
                p.lateness_us.count
            )?;
        }
        writeln!(
            text,
            "{}",
            report::fidelity_summary(&spec.describe(), &fidelity)
        )?;
        if stolen > 0.02 {
            writeln!(
                text,
                "warning: the hypervisor stole {:.1}% of this machine's CPU time during the calibration; \
                 late releases and long RTT tails may be the host's, not the emulator's",
                stolen * 100.0
            )?;
        }
        writeln!(
            text,
            "calibration {}",
            if pass { "PASSED" } else { "FAILED" }
        )?;
    }
    Ok((doc, text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binomial_interval_matches_the_normal_approximation() {
        // p = 2 %, n = 20 000: σ = sqrt(0.02·0.98/20000) = 0.000990; 2.576σ = 0.00255.
        let (lo, hi) = binomial_interval(0.02, 20_000, LOSS_Z);
        assert!((lo - (0.02 - 0.00255 - 0.000025)).abs() < 1e-5, "{lo}");
        assert!((hi - (0.02 + 0.00255 + 0.000025)).abs() < 1e-5, "{hi}");
        // No loss configured: only the continuity term remains, so one lost datagram in 1000
        // is already outside.
        let (lo, hi) = binomial_interval(0.0, 1000, LOSS_Z);
        assert_eq!(lo, 0.0);
        assert!(hi < 0.001);
        // Clamped to [0, 1].
        assert_eq!(binomial_interval(1.0, 10, LOSS_Z).1, 1.0);
    }

    #[test]
    fn bursty_loss_widens_the_interval() {
        use quiclab_link::LossSpec;
        assert_eq!(loss_variance_factor(&LossSpec::Bernoulli(0.02)), 1.0);
        // p = 1 %, r = 20 %: λ = 0.79, factor = 1.79 / 0.21 ≈ 8.52.
        let f = loss_variance_factor(&LossSpec::GilbertElliott {
            p: 0.01,
            r: 0.2,
            loss_good: 0.0,
            loss_bad: 1.0,
        });
        assert!((f - 1.79 / 0.21).abs() < 1e-9, "{f}");
        let (lo1, _) = binomial_interval(0.05, 20_000, LOSS_Z);
        let (lo2, _) = loss_interval(0.05, 20_000, LOSS_Z, f);
        assert!(lo2 < lo1);
    }
}
