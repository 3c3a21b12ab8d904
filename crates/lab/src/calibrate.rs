//! `quiclab calibrate`'s measurement: the link quiclab was given, measured through the emulator
//! with quiclab's own probes, and each figure judged against its documented tolerance
//! ([`crate::tolerance`], docs/link.md).
//!
//! Phases, in order, on one lab: (1) UDP echo on the idle link → RTT; (2) kernel-TCP bulk download
//! with CUBIC → the emulator's delivered IP-layer rate while its downlink queue was backlogged (and
//! the TCP goodput as a cross-check); (3) paced UDP streams in both directions at half the link
//! rate → loss. The result ([`Calibration`]) is the `--json` document; its `Display` is the table.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use quiclab_link::spec::LinkDescription;
use quiclab_link::{LinkOptions, RateSpec};
use serde::Serialize;

use crate::emulator::{FidelityReport, PhaseLateness};
use crate::tolerance::*;
use crate::{RunningLab, Side, probe};

/// What to measure and how.
#[derive(Debug, Clone)]
pub struct CalibrateSettings {
    /// Probe over IPv6 instead of IPv4.
    pub ipv6: bool,
    /// RTT probes, one every 10 ms.
    pub rtt_probes: usize,
    /// Length of the TCP bulk transfer.
    pub bulk_duration: Duration,
    /// UDP payload of the loss probe's datagrams (1200: a QUIC packet's size, so the probe sends
    /// at a real experiment's packet rate).
    pub loss_datagram: usize,
    /// Datagrams per direction in the loss probe (None: 20 000 when loss is configured, else
    /// 3 000, fewer on slow links so the probe stays under ~20 s).
    pub loss_packets: Option<u64>,
    /// The per-packet log of the whole calibration.
    pub log: Option<PathBuf>,
}

impl Default for CalibrateSettings {
    fn default() -> Self {
        CalibrateSettings {
            ipv6: false,
            rtt_probes: 200,
            bulk_duration: Duration::from_secs(5),
            loss_datagram: 1200,
            loss_packets: None,
            log: None,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct RttTolerance {
    pub median_ms: f64,
    pub p99_above_ms: f64,
}

/// The idle link's round-trip time (ms).
#[derive(Debug, Clone, Serialize)]
pub struct RttFigures {
    pub configured: f64,
    /// Configured plus the probe's own serialisation.
    pub expected: f64,
    pub median: f64,
    pub mean: f64,
    pub p99: f64,
    pub min: Option<f64>,
    pub max: Option<f64>,
    pub samples: usize,
    pub sent: usize,
    pub tolerance: RttTolerance,
    /// False when a profile changed the delay during the probe (only the median is judged).
    pub p99_checked: bool,
    pub pass: bool,
}

/// The downlink's rate while backlogged (Mbit/s).
#[derive(Debug, Clone, Serialize)]
pub struct RateFigures {
    pub configured: Option<f64>,
    pub measured: Option<f64>,
    pub direction: &'static str,
    pub backlogged_seconds: f64,
    pub tcp_goodput: f64,
    pub tcp_congestion_control: String,
    pub tolerance_frac: f64,
    pub pass: bool,
}

/// One direction's loss probe.
#[derive(Debug, Clone, Serialize)]
pub struct DirectionLoss {
    pub configured: f64,
    pub measured: f64,
    pub sent: u64,
    pub received: u64,
    /// The 99 % interval of the measured loss under the configured process.
    pub interval_99: [f64; 2],
    pub pass: bool,
    /// Datagrams the kernel dropped outside the emulator while both directions' streams ran (see
    /// [`probe::LossResult::host_dropped`]): part of `measured`, not the link's doing.
    pub host_dropped: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct LossFigures {
    /// Both directions pooled.
    pub configured: f64,
    pub measured: f64,
    pub sent: u64,
    pub uplink: DirectionLoss,
    pub downlink: DirectionLoss,
    pub pass: bool,
}

/// The emulator's release lateness over the calibration (µs).
#[derive(Debug, Clone, Serialize)]
pub struct LatenessFigures {
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
    pub tolerance_p99: f64,
    pub late_share: f64,
    pub phases: Vec<PhaseLateness>,
    pub pass: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct HostFigures {
    pub cpu_steal_fraction: f64,
}

/// One direction's reordering, from the loss probe: the share of its datagrams that arrived
/// after a later one.
#[derive(Debug, Clone, Serialize)]
pub struct DirectionReorder {
    pub configured: f64,
    pub measured: f64,
    pub received: u64,
    /// The 99 % interval of the measured share if the configured share is right.
    pub interval_99: [f64; 2],
    /// False when the probe's datagrams are further apart than half the hold-back: then a
    /// held-back datagram is not always overtaken, and the share is shown, not judged.
    pub checked: bool,
    pub pass: bool,
}

/// Jitter and reordering (issue 59), when the link has either.
#[derive(Debug, Clone, Serialize)]
pub struct VariationFigures {
    /// The idle RTT's standard deviation (ms): from both directions' jitter (uniform: J²/3 each
    /// way), and measured by the RTT probe.
    pub rtt_sd_expected_ms: f64,
    pub rtt_sd_measured_ms: f64,
    /// Whether the jitter was judged (|measured − expected| ≤ 25 % of expected + 0.1 ms); not
    /// with reordering, whose hold-backs spread the RTT too.
    pub jitter_checked: bool,
    pub uplink_reorder: DirectionReorder,
    pub downlink_reorder: DirectionReorder,
    pub pass: bool,
}

/// A calibration: the `quiclab calibrate --json` document.
#[derive(Debug, Clone, Serialize)]
pub struct Calibration {
    pub link: LinkDescription,
    pub ip_version: u8,
    pub rtt_ms: RttFigures,
    pub rate_mbps: RateFigures,
    pub loss: LossFigures,
    pub lateness_us: LatenessFigures,
    pub fidelity: FidelityReport,
    pub host: HostFigures,
    /// Jitter and reordering as measured (None: the link has neither).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub variation: Option<VariationFigures>,
    pub pass: bool,
    /// Datagrams per direction of the loss probe (shown in the table).
    #[serde(skip)]
    pub loss_packets: u64,
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

/// The one percentile definition of quiclab (nearest rank); NaN when there are no values.
fn percentile(sorted: &[f64], q: f64) -> f64 {
    quiclab_link::stats::percentile(sorted, q).unwrap_or(f64::NAN)
}

/// Runs the three probes in a fresh lab for `spec` (with `options`' lab and scheduler settings)
/// and judges each figure.
pub fn calibrate(
    options: &LinkOptions,
    spec: &crate::LinkSpec,
    settings: &CalibrateSettings,
) -> Result<Calibration> {
    let steal = crate::host::StealMeter::start();
    let mut running = RunningLab::start_for(options, spec, settings.log.clone(), None)?;
    let lab = &running.lab;
    let ipv6 = settings.ipv6;

    // (1) RTT on the idle link. The probe's own serialisation adds to the propagation delay.
    const PROBE_PAYLOAD: usize = 64;
    let ip_header = if ipv6 { 48 } else { 28 };
    // Serialisation of the probe at the rate in force (a trace's waiting is allowed for below).
    let ser = |d: &crate::DirectionSpec, w: &quiclab_link::spec::WindowFigures| match (
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
        ipv6,
        settings.rtt_probes,
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
    // Jitter spreads the RTT up to the sum of both directions' (uniform, centred on the delay);
    // a held-back (reordered) probe comes back the hold-back later.
    let (up_var, down_var) = (spec.uplink.variation, spec.downlink.variation);
    let variation_slack_ms = [up_var, down_var]
        .iter()
        .map(|v| (v.jitter + if v.reorder > 0.0 { v.reorder_delay } else { 0 }) as f64 / 1e6)
        .sum::<f64>();
    let p99_tol =
        RTT_P99_TOL_MS + RTT_P99_TOL_FRAC * expected_rtt_ms + trace_slack_ms + variation_slack_ms;
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
    let bulk = probe::tcp_bulk_download(lab, ipv6, settings.bulk_duration, "cubic")?;
    let (_, down_after) = running.snapshot();
    let t3 = running.clock();
    let rate_measured = down_after.backlogged_rate_since(&down_before);
    let backlogged_seconds = (down_after.backlogged_ns - down_before.backlogged_ns) as f64 / 1e9;

    // (3) Loss: paced UDP in both directions at once, at half the link rate.
    let pace = |d: &crate::DirectionSpec| d.mean_rate_bps().map_or(20e6, |r| (r * 0.5).min(50e6));
    let loss_configured = spec.uplink.mean_loss().max(spec.downlink.mean_loss());
    let mut count =
        settings
            .loss_packets
            .unwrap_or(if loss_configured > 0.0 { 20_000 } else { 3_000 });
    if settings.loss_packets.is_none() {
        // Keep the probe under ~20 s on slow links.
        let slowest = pace(&spec.uplink).min(pace(&spec.downlink));
        count = count
            .min((slowest * 20.0 / ((settings.loss_datagram + ip_header) * 8) as f64) as u64)
            .max(500);
    }
    let t4 = running.clock();
    running.begin_phase("udp-loss");
    let datagram = settings.loss_datagram;
    let (up_loss, down_loss) = std::thread::scope(|s| {
        let up = s.spawn(|| {
            probe::paced_udp(lab, Side::Client, ipv6, count, datagram, pace(&spec.uplink))
        });
        let down = probe::paced_udp(
            lab,
            Side::Server,
            ipv6,
            count,
            datagram,
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
    let rate_tol = if spec.downlink.is_time_varying() {
        0.05
    } else {
        RATE_TOL_FRAC
    };
    let rate_pass = match (rate_configured, rate_measured) {
        (None, _) => true,
        (Some(c), Some(m)) => (m - c).abs() / c <= rate_tol,
        (Some(_), None) => false,
    };
    let direction = |cfg: f64, r: &probe::LossResult, factor: f64| {
        let (lo, hi) = loss_interval(cfg, r.sent, LOSS_Z, factor);
        DirectionLoss {
            configured: cfg,
            measured: r.loss,
            sent: r.sent,
            received: r.received,
            interval_99: [lo, hi],
            pass: r.loss >= lo && r.loss <= hi,
            host_dropped: r.host_dropped,
        }
    };
    let up_cfg = spec.uplink.configured_over(t4, t5).loss;
    let down_cfg = spec.downlink.configured_over(t4, t5).loss;
    let uplink = direction(up_cfg, &up_loss, loss_variance_factor(&spec.uplink.loss));
    let downlink = direction(
        down_cfg,
        &down_loss,
        loss_variance_factor(&spec.downlink.loss),
    );
    let pooled_sent = up_loss.sent + down_loss.sent;
    let loss = LossFigures {
        configured: (up_cfg + down_cfg) / 2.0,
        measured: 1.0 - (up_loss.received + down_loss.received) as f64 / pooled_sent as f64,
        sent: pooled_sent,
        pass: uplink.pass && downlink.pass,
        uplink,
        downlink,
    };
    // The same limit as the runner's flag: derived from this link (docs/link.md).
    let lateness_limit = crate::tolerance::lateness_p99_limit_us(spec);
    let lateness_pass = fidelity.lateness_us.p99 <= lateness_limit;
    let variation = (!up_var.is_none() || !down_var.is_none()).then(|| {
        let reorder = |v: quiclab_link::variation::Variation,
                       r: &probe::LossResult,
                       d: &crate::DirectionSpec| {
            let measured = r.reordered as f64 / r.received.max(1) as f64;
            let (lo, hi) = binomial_interval(v.reorder, r.received, LOSS_Z);
            let gap_s = ((settings.loss_datagram + ip_header) * 8) as f64 / pace(d);
            let checked = v.reorder > 0.0 && gap_s * 1e9 < v.reorder_delay as f64 / 2.0;
            DirectionReorder {
                configured: v.reorder,
                measured,
                received: r.received,
                interval_99: [lo, hi],
                checked,
                pass: !checked || (measured >= lo && measured <= hi),
            }
        };
        let ms = |ns: u64| ns as f64 / 1e6;
        let sd_expected = ((ms(up_var.jitter).powi(2) + ms(down_var.jitter).powi(2)) / 3.0).sqrt();
        let sd_measured = (sorted.iter().map(|x| (x - mean).powi(2)).sum::<f64>()
            / sorted.len().max(1) as f64)
            .sqrt();
        let jitter_checked = up_var.reorder == 0.0 && down_var.reorder == 0.0;
        let jitter_pass =
            !jitter_checked || (sd_measured - sd_expected).abs() <= 0.25 * sd_expected + 0.1;
        let uplink_reorder = reorder(up_var, &up_loss, &spec.uplink);
        let downlink_reorder = reorder(down_var, &down_loss, &spec.downlink);
        VariationFigures {
            rtt_sd_expected_ms: sd_expected,
            rtt_sd_measured_ms: sd_measured,
            jitter_checked,
            pass: jitter_pass && uplink_reorder.pass && downlink_reorder.pass,
            uplink_reorder,
            downlink_reorder,
        }
    });
    let pass = rtt_pass
        && rate_pass
        && loss.pass
        && lateness_pass
        && variation.as_ref().is_none_or(|v| v.pass);
    Ok(Calibration {
        link: spec.describe(),
        ip_version: if ipv6 { 6 } else { 4 },
        rtt_ms: RttFigures {
            configured: configured_rtt_ms,
            expected: expected_rtt_ms,
            median,
            mean,
            p99,
            min: sorted.first().copied(),
            max: sorted.last().copied(),
            samples: rtt.received,
            sent: rtt.sent,
            tolerance: RttTolerance {
                median_ms: median_tol,
                p99_above_ms: p99_tol,
            },
            p99_checked: !delay_changed,
            pass: rtt_pass,
        },
        rate_mbps: RateFigures {
            configured: rate_configured.map(|r| r / 1e6),
            measured: rate_measured.map(|r| r / 1e6),
            direction: "downlink",
            backlogged_seconds,
            tcp_goodput: bulk.goodput_bps / 1e6,
            tcp_congestion_control: bulk.congestion_control,
            tolerance_frac: rate_tol,
            pass: rate_pass,
        },
        loss,
        lateness_us: LatenessFigures {
            p50: fidelity.lateness_us.p50,
            p99: fidelity.lateness_us.p99,
            max: fidelity.lateness_us.max,
            tolerance_p99: lateness_limit,
            late_share: fidelity.late_share,
            phases: fidelity.phases.clone(),
            pass: lateness_pass,
        },
        fidelity,
        host: HostFigures {
            cpu_steal_fraction: steal.fraction(),
        },
        variation,
        pass,
        loss_packets: count,
    })
}

impl fmt::Display for Calibration {
    /// The table `quiclab calibrate` prints.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ok = |b: bool| if b { "ok" } else { "FAIL" };
        let (r, rate, loss, late) = (&self.rtt_ms, &self.rate_mbps, &self.loss, &self.lateness_us);
        writeln!(f, "quiclab calibrate over IPv{}", self.ip_version)?;
        writeln!(f, "  uplink   {}", self.link.uplink)?;
        writeln!(f, "  downlink {}", self.link.downlink)?;
        writeln!(
            f,
            "  {:<10} {:>14} {:>14}   verdict",
            "figure", "configured", "measured"
        )?;
        writeln!(
            f,
            "  {:<10} {:>11.3} ms {:>11.3} ms   {} (median; p99 {:.3} ms; expected {:.3} ms incl. probe serialisation)",
            "rtt",
            r.configured,
            r.median,
            ok(r.pass),
            r.p99,
            r.expected
        )?;
        writeln!(
            f,
            "  {:<10} {:>14} {:>14}   {} (backlogged downlink; TCP goodput {:.3} Mbit/s)",
            "rate",
            rate.configured
                .map_or("unlimited".into(), |r| format!("{r:.3} Mbit/s")),
            rate.measured
                .map_or("-".into(), |r| format!("{r:.3} Mbit/s")),
            ok(rate.pass),
            rate.tcp_goodput
        )?;
        writeln!(
            f,
            "  {:<10} {:>13.4}% {:>13.4}%   {} ({} datagrams per direction)",
            "loss",
            loss.configured * 100.0,
            loss.measured * 100.0,
            ok(loss.pass),
            self.loss_packets
        )?;
        writeln!(
            f,
            "  {:<10} {:>14} {:>11.1} us   {} (p99 release lateness; p50 {:.1} us, max {:.1} us)",
            "lateness",
            format!("<= {:.0} us", late.tolerance_p99),
            late.p99,
            ok(late.pass),
            late.p50,
            late.max
        )?;
        if let Some(v) = &self.variation {
            writeln!(
                f,
                "  {:<10} {:>11.3} ms {:>11.3} ms   {} (standard deviation of the idle RTT from the jitter{})",
                "jitter",
                v.rtt_sd_expected_ms,
                v.rtt_sd_measured_ms,
                if v.jitter_checked {
                    ok(v.pass)
                } else {
                    "shown"
                },
                if v.jitter_checked {
                    ""
                } else {
                    "; not judged with reordering"
                }
            )?;
            for (name, r) in [
                ("reorder ↑", &v.uplink_reorder),
                ("reorder ↓", &v.downlink_reorder),
            ] {
                writeln!(
                    f,
                    "  {:<10} {:>13.4}% {:>13.4}%   {} (datagrams overtaken; 99 % interval {:.4}–{:.4} %)",
                    name,
                    r.configured * 100.0,
                    r.measured * 100.0,
                    if r.checked { ok(r.pass) } else { "shown" },
                    r.interval_99[0] * 100.0,
                    r.interval_99[1] * 100.0
                )?;
            }
        }
        for p in &late.phases {
            writeln!(
                f,
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
        writeln!(f, "{}", self.fidelity.summary(&self.link))?;
        let stolen = self.host.cpu_steal_fraction;
        if stolen > 0.02 {
            writeln!(
                f,
                "warning: the hypervisor stole {:.1}% of this machine's CPU time during the calibration; \
                 late releases and long RTT tails may be the host's, not the emulator's",
                stolen * 100.0
            )?;
        }
        writeln!(
            f,
            "calibration {}",
            if self.pass { "PASSED" } else { "FAILED" }
        )
    }
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
