//! `quiclab bench link`: the emulator's speed and precision, measured against the targets of
//! docs/link.md, each part in a fresh lab. Each part returns a JSON object (the `--json`
//! document's members); with `log`, each figure is said on stderr as it is measured.

use std::time::Duration;

use anyhow::Result;
use quiclab_link::options::{DEFAULT_TUN_COMPENSATION, Offload, Steering};
use quiclab_link::{LinkOptions, LossSpec, QueueLimit, RateSpec, units};
use serde_json::{Value, json};

use crate::calibrate::{CalibrateSettings, binomial_interval, calibrate};
use crate::{LinkSpec, RunningLab, SchedulerOptions, Side, probe};

/// A symmetric link: `rate` (None: unshaped, no queue limit), RTT, Bernoulli loss; seed 7.
pub fn link(rate: Option<u64>, rtt_ms: f64, loss: f64) -> LinkSpec {
    let mut spec = LinkSpec {
        seed: 7,
        tun_compensation: DEFAULT_TUN_COMPENSATION,
        ..Default::default()
    };
    for d in [&mut spec.uplink, &mut spec.downlink] {
        if let Some(bps) = rate {
            d.rate = RateSpec::Constant { bps };
            d.rate_label = units::format_rate(bps);
            d.queue = QueueLimit::Bdp(1.0);
        } else {
            d.queue = QueueLimit::Unlimited;
        }
        d.delay = (rtt_ms * 1e6 / 2.0) as u64;
        d.loss = if loss > 0.0 {
            LossSpec::Bernoulli(loss)
        } else {
            LossSpec::None
        };
    }
    spec
}

/// Runs `part` and adds the fraction of CPU time the hypervisor stole meanwhile: on a shared host
/// a figure measured while much was stolen says more about the neighbours than about quiclab.
fn with_steal(b: &LinkBench, name: &str, part: impl FnOnce() -> Result<Value>) -> Result<Value> {
    let meter = crate::host::StealMeter::start();
    let mut v = part()?;
    {
        let frac = meter.fraction();
        v["cpu_steal_fraction"] = json!(frac);
        if frac > 0.02 {
            b.say(format!(
                "  warning: {name}: the hypervisor stole {:.1}% of CPU time during this part; its figures are unreliable",
                frac * 100.0
            ));
        }
    }
    Ok(v)
}

/// The emulator's CPU seconds per Gbit it carried, both directions (None when it carried
/// nothing): the cost that bounds the rates it can shape, UDP's and TCP's alike.
pub fn cpu_s_per_gbit(f: &crate::FidelityReport) -> Option<f64> {
    let gbit = (f.downlink.delivered_bytes + f.uplink.delivered_bytes) as f64 * 8.0 / 1e9;
    (gbit > 0.0).then(|| f.cpu_core_fraction * f.wall_seconds / gbit)
}

/// What `quiclab bench link` runs with.
pub struct LinkBench {
    /// Scheduler settings of every lab.
    pub scheduler: SchedulerOptions,
    pub steering: Steering,
    pub offload: Offload,
    /// The queue discipline of the TCP parts (`gbit`, `max`): what its CPU costs.
    pub discipline: quiclab_link::aqm::DisciplineSpec,
    /// Shorter runs (a quick look; the documented figures use the default lengths).
    pub quick: bool,
    /// Each figure on stderr as it is measured.
    pub log: bool,
}

impl LinkBench {
    /// The benchmark of labs set up as `link` asks (scheduler, steering, offload), logging each
    /// figure as it is measured.
    pub fn for_link(
        link: &LinkOptions,
        discipline: quiclab_link::aqm::DisciplineSpec,
        quick: bool,
    ) -> LinkBench {
        LinkBench {
            scheduler: SchedulerOptions::of(link),
            steering: link.steering,
            offload: link.offload,
            discipline,
            quick,
            log: true,
        }
    }

    /// A lab set up as this benchmark asks (scheduler, steering, offload), running `spec`.
    pub fn start_lab(&self, spec: &LinkSpec) -> Result<RunningLab> {
        let options = crate::LabOptions {
            steer_receive: self.steering.resolve(spec.wants_receive_steering()),
            offload: self.offload.resolve(spec.wants_offload()),
            ..Default::default()
        };
        RunningLab::start(spec, &options, self.scheduler.clone(), None, None)
    }

    /// Says a figure on stderr (when logging).
    pub fn say(&self, s: String) {
        if self.log {
            eprintln!("{s}");
        }
    }

    fn rtt(&self, rtt_ms: f64, compensation_ns: Option<u64>) -> Result<Value> {
        let mut spec = link(None, rtt_ms, 0.0);
        if let Some(c) = compensation_ns {
            spec.tun_compensation = c;
        }
        let mut running = self.start_lab(&spec)?;
        let n = if self.quick { 300 } else { 2000 };
        let samples = probe::udp_echo(&running.lab, false, n, Duration::from_millis(5), 64)?;
        let f = running.stop_emulator()?;
        let mut s = samples.rtt_ms.clone();
        s.sort_by(f64::total_cmp);
        let q = |p: f64| s[((s.len() - 1) as f64 * p).round() as usize];
        let mean = s.iter().sum::<f64>() / s.len() as f64;
        let v = json!({
            "configured_ms": rtt_ms, "compensation_us": spec.tun_compensation as f64 / 1e3,
            "samples": s.len(), "mean_ms": mean, "median_ms": q(0.5), "p99_ms": q(0.99),
            "max_ms": q(1.0), "lateness_p99_us": f.lateness_us.p99,
        });
        self.say(format!(
            "rtt {rtt_ms} ms (compensation {:.0} us): median {:.3} ms, mean {:.3}, p99 {:.3}, max {:.3}",
            spec.tun_compensation as f64 / 1e3,
            q(0.5),
            mean,
            q(0.99),
            q(1.0)
        ));
        Ok(v)
    }

    /// TCP through an unshaped link (no rate, only delay): what the emulator itself can carry.
    fn unshaped(&self, rtt_ms: f64) -> Result<Value> {
        let spec = link(None, rtt_ms, 0.0);
        let mut running = self.start_lab(&spec)?;
        let secs = if self.quick { 4 } else { 10 };
        let bulk =
            probe::tcp_bulk_download(&running.lab, false, Duration::from_secs(secs), "cubic")?;
        let f = running.stop_emulator()?;
        drop(running);
        // The same flow over a plain veth pair (no emulator, no TUN): what the machine can do.
        let veth = RunningLab::start_direct(&crate::LabOptions::default())?;
        let direct =
            probe::tcp_bulk_download(&veth.lab, false, Duration::from_secs(secs), "cubic")?;
        drop(veth);
        let ratio = bulk.goodput_bps / direct.goodput_bps;
        self.say(format!(
            "unshaped: {:.0} Mbit/s through the emulator (offload {}), {:.0} Mbit/s over a plain veth pair (no delay): ratio {ratio:.2}",
            bulk.goodput_bps / 1e6,
            if f.downlink.offload.is_some() { "on" } else { "off" },
            direct.goodput_bps / 1e6
        ));
        let packets = f.downlink.delivered_packets + f.uplink.delivered_packets;
        let cpu = f.cpu_core_fraction * f.wall_seconds;
        let v = json!({
            "veth_tcp_goodput_mbps": direct.goodput_bps / 1e6,
            "emulator_to_veth_ratio": ratio,
            "offload": f.downlink.offload.is_some(),
            "rtt_ms": rtt_ms, "tcp_goodput_mbps": bulk.goodput_bps / 1e6,
            "packets": packets, "emulator_cpu_core_fraction": f.cpu_core_fraction,
            "emulator_cpu_us_per_packet": cpu * 1e6 / packets.max(1) as f64,
            "emulator_cpu_s_per_gbit": cpu_s_per_gbit(&f),
            "lateness_us": f.lateness_us,
        });
        self.say(format!(
            "unshaped, rtt {rtt_ms} ms: TCP goodput {:.0} Mbit/s, emulator CPU {:.1}% of a core, {:.2} us per packet (both directions), lateness p99 {:.1} us",
            bulk.goodput_bps / 1e6,
            f.cpu_core_fraction * 100.0,
            cpu * 1e6 / packets.max(1) as f64,
            f.lateness_us.p99
        ));
        Ok(v)
    }

    fn tcp(&self, rate_bps: u64, rtt_ms: f64) -> Result<Value> {
        let mut spec = link(Some(rate_bps), rtt_ms, 0.0);
        for d in [&mut spec.uplink, &mut spec.downlink] {
            d.discipline = self.discipline;
        }
        let mut running = self.start_lab(&spec)?;
        let secs = if self.quick { 4 } else { 10 };
        let bulk =
            probe::tcp_bulk_download(&running.lab, false, Duration::from_secs(secs), "cubic")?;
        let f = running.stop_emulator()?;
        let measured = f.downlink.backlogged_rate_bps.unwrap_or(0.0);
        // What the link actually carried over the transfer (IP layer), as a share of its rate:
        // a shaper can be exact while backlogged yet unable to keep the link busy.
        let carried = f.downlink.delivered_bytes as f64 * 8.0 / bulk.seconds / rate_bps as f64;
        let packets = f.downlink.delivered_packets + f.uplink.delivered_packets;
        let cpu_us_per_packet = f.cpu_core_fraction * f.wall_seconds * 1e6 / packets.max(1) as f64;
        let err = (measured - rate_bps as f64) / rate_bps as f64;
        let v = json!({
            "configured_mbps": rate_bps as f64 / 1e6, "rtt_ms": rtt_ms,
            "delivered_backlogged_mbps": measured / 1e6, "error_frac": err,
            "carried_fraction": carried,
            "tcp_goodput_mbps": bulk.goodput_bps / 1e6,
            "lateness_us": f.lateness_us, "early_us": f.downlink.early_us,
            "emulator_cpu_core_fraction": f.cpu_core_fraction,
            "emulator_cpu_us_per_packet": cpu_us_per_packet,
            "emulator_cpu_s_per_gbit": cpu_s_per_gbit(&f),

            "queue_drops": f.downlink.model.counters.dropped_queue_packets,
            "discipline": f.downlink.model.discipline,
            "discipline_drops": f.downlink.model.counters.dropped_aqm_packets,
            "sojourn_ms": f.downlink.sojourn_ms,
            "realtime": f.downlink.realtime,
        });
        self.say(format!(
            "tcp {} {}: delivered {:.3} Mbit/s ({:+.2}%) while backlogged, carried {:.1}% of the rate, goodput {:.3} Mbit/s, lateness p50 {:.1} p99 {:.1} max {:.1} us, emulator CPU {:.1}% of a core ({:.2} us/packet)",
            units::format_rate(rate_bps),
            f.downlink.model.discipline,
            measured / 1e6,
            err * 100.0,
            carried * 100.0,
            bulk.goodput_bps / 1e6,
            f.lateness_us.p50,
            f.lateness_us.p99,
            f.lateness_us.max,
            f.cpu_core_fraction * 100.0,
            cpu_us_per_packet
        ));
        Ok(v)
    }

    fn loss(&self) -> Result<Value> {
        let p = 0.02;
        let spec = link(Some(100_000_000), 10.0, p);
        let mut running = self.start_lab(&spec)?;
        let n = if self.quick { 20_000 } else { 50_000 };
        let r = probe::paced_udp(&running.lab, Side::Client, false, n, 100, 20e6)?;
        let f = running.stop_emulator()?;
        let (lo, hi) = binomial_interval(p, n, 2.576);
        let v = json!({
            "configured": p, "sent": r.sent, "received": r.received, "measured": r.loss,
            "interval_99": [lo, hi], "within": r.loss >= lo && r.loss <= hi,
            "emulator_counted_random_drops": f.uplink.model.counters.dropped_random_packets,
            "host_dropped": r.host_dropped,
        });
        self.say(format!(
            "loss 2% over {n} datagrams: measured {:.4}% (99% interval {:.4}–{:.4}%)",
            r.loss * 100.0,
            lo * 100.0,
            hi * 100.0
        ));
        Ok(v)
    }

    /// `quiclab calibrate`'s traffic (UDP echo, a TCP CUBIC download, paced UDP both ways) on
    /// `rate` with 20 ms RTT, 2 % loss and a 1-BDP queue, `runs` times: release lateness overall
    /// and per phase, the share of releases > 100 µs late, and the host's steal and hiccups (a
    /// spinning SCHED_FIFO thread's gaps, measured for 1 s before each run) beside each run.
    /// Passes when at least 80 % of the runs (4 of 5) were made at < 1 % steal and had p99 ≤
    /// `target_us`.
    fn mix(&self, rate: &str, target_us: f64, runs: usize, datagram: u16) -> Result<Value> {
        let mut options = LinkOptions::default();
        for (key, value) in [
            ("rate", rate),
            ("rtt", "20ms"),
            ("loss", "2%"),
            ("queue", "1bdp"),
        ] {
            options.set(key, value).map_err(anyhow::Error::msg)?;
        }
        options.realtime = self.scheduler.realtime;
        options.spin = self.scheduler.spin.as_nanos() as u64;
        options.nap = self.scheduler.nap.as_nanos() as u64;
        let spec = options
            .to_spec(&quiclab_outputs::input::read_input)
            .map_err(anyhow::Error::msg)?;
        let settings = CalibrateSettings {
            bulk_duration: Duration::from_secs(2),
            loss_packets: Some(if self.quick { 2000 } else { 5000 }),
            loss_datagram: datagram as usize,
            ..CalibrateSettings::default()
        };
        let mut results = Vec::new();
        for i in 0..runs {
            let hiccups = crate::host::hiccups(Duration::from_secs(1), None);
            let c = calibrate(&options, &spec, &settings)?;
            let late = &c.lateness_us;
            let steal = c.host.cpu_steal_fraction;
            let p99 = late.p99;
            let phases: Vec<String> = late
                .phases
                .iter()
                .map(|p| {
                    format!(
                        "{} p99 {:.0} us / {:.2} % late",
                        p.name,
                        p.lateness_us.p99,
                        p.late_share * 100.0
                    )
                })
                .collect();
            self.say(format!(
                "mix {rate} run {}: lateness p99 {p99:.1} us (p50 {:.1}, max {:.0}), {:.2} % of releases > 100 us; {}; steal {:.2} %, host hiccups {:.1}/s > 100 us ({:.2} % of time, max {:.0} us)",
                i + 1,
                late.p50,
                late.max,
                late.late_share * 100.0,
                phases.join(", "),
                steal * 100.0,
                hiccups.gaps_over_100us_per_s,
                hiccups.time_in_gaps_over_100us * 100.0,
                hiccups.max_gap_us
            ));
            results.push(json!({
                "lateness_us": { "p50": late.p50, "p99": p99, "max": late.max },
                "late_share": late.late_share,
                "phases": late.phases,
                "cpu_steal_fraction": steal,
                "host_hiccups_before": hiccups,
                "emulator_cpu_core_fraction": c.fidelity.cpu_core_fraction,
                "meets_target": p99 <= target_us,
            }));
        }
        let quiet: Vec<&Value> = results
            .iter()
            .filter(|r| r["cpu_steal_fraction"].as_f64().unwrap_or(1.0) < 0.01)
            .collect();
        let met = |rs: &[&Value]| {
            rs.iter()
                .filter(|r| r["meets_target"] == json!(true))
                .count()
        };
        let all: Vec<&Value> = results.iter().collect();
        // The target: within it in at least 4 of 5 runs (80 %) made at < 1 % steal. Too few quiet
        // runs to reach that count can show neither a pass nor a fail.
        let needed = (runs * 4).div_ceil(5);
        let verdict = if met(&quiet) >= needed {
            "pass"
        } else if quiet.len() >= needed {
            "fail"
        } else {
            "not judged (too few runs at < 1 % steal)"
        };
        self.say(format!(
            "mix {rate}: p99 <= {target_us} us in {} of {} runs; {} of {} runs at < 1 % steal, {} of them within target: {verdict}",
            met(&all),
            runs,
            quiet.len(),
            runs,
            met(&quiet)
        ));
        Ok(json!({
            "link": format!("{rate}, rtt 20ms, loss 2%, queue 1bdp"),
            "loss_datagram_bytes": datagram.to_string(),
            "target_p99_us": target_us,
            "runs": results,
            "runs_within_target": met(&all),
            "runs_below_1pct_steal": quiet.len(),
            "runs_below_1pct_steal_within_target": met(&quiet),
            "verdict": verdict,
        }))
    }

    fn idle(&self) -> Result<Value> {
        let spec = link(Some(100_000_000), 50.0, 0.0);
        let mut running = self.start_lab(&spec)?;
        std::thread::sleep(Duration::from_secs(if self.quick { 3 } else { 10 }));
        let f = running.stop_emulator()?;
        self.say(format!(
            "idle: emulator CPU {:.3}% of a core",
            f.cpu_core_fraction * 100.0
        ));
        Ok(json!({ "emulator_cpu_core_fraction": f.cpu_core_fraction, "seconds": f.wall_seconds }))
    }
}

/// The parts of [`LinkBench::run`], in the order they run.
pub const PARTS: &[&str] = &[
    "rtt", "rate", "loss", "mix", "flood", "gbit", "max", "unshaped", "idle",
];

impl LinkBench {
    /// The parts named in `only` (all when empty): rtt, rate, loss, mix, flood, gbit, max,
    /// unshaped, idle; one JSON object with a member per figure.
    pub fn run(
        &self,
        only: &[String],
        max_rates: &[f64],
        mix_runs: Option<usize>,
    ) -> Result<Value> {
        let b = self;
        let want = |k: &str| only.is_empty() || only.iter().any(|o| o == k);
        let mut out = serde_json::Map::new();
        if want("rtt") {
            out.insert(
                "tun_path_rtt_uncompensated".into(),
                with_steal(b, "tun_path_rtt_uncompensated", || b.rtt(0.0, Some(0)))?,
            );
            out.insert(
                "rtt_50ms_uncompensated".into(),
                with_steal(b, "rtt_50ms_uncompensated", || b.rtt(50.0, Some(0)))?,
            );
            out.insert(
                "rtt_50ms".into(),
                with_steal(b, "rtt_50ms", || b.rtt(50.0, None))?,
            );
        }
        if want("rate") {
            out.insert(
                "tcp_10mbit".into(),
                with_steal(b, "tcp_10mbit", || b.tcp(10_000_000, 50.0))?,
            );
            out.insert(
                "tcp_100mbit".into(),
                with_steal(b, "tcp_100mbit", || b.tcp(100_000_000, 50.0))?,
            );
        }
        if want("loss") {
            out.insert("loss_2pct".into(), with_steal(b, "loss_2pct", || b.loss())?);
        }
        if want("mix") {
            let runs = mix_runs.unwrap_or(if self.quick { 2 } else { 5 });
            out.insert(
                "mix_100mbit".into(),
                with_steal(b, "mix_100mbit", || b.mix("100mbit", 100.0, runs, 1200))?,
            );
            out.insert(
                "mix_10mbit".into(),
                with_steal(b, "mix_10mbit", || b.mix("10mbit", 50.0, runs, 1200))?,
            );
        }
        if want("flood") {
            // The same mix with 100-byte datagrams: ~98 000 packets/s through the emulator, more
            // than it can release on time on two vCPUs (docs/link.md). No target; the figure is the
            // emulator's packet-rate ceiling.
            out.insert(
                "flood_100mbit_100B".into(),
                with_steal(b, "flood_100mbit_100B", || b.mix("100mbit", 100.0, 1, 100))?,
            );
        }
        if want("gbit") {
            out.insert(
                "tcp_1gbit".into(),
                with_steal(b, "tcp_1gbit", || b.tcp(1_000_000_000, 10.0))?,
            );
        }
        if want("max") {
            // Two criteria, reported separately: the link is carried (IP-layer throughput ≥ 95 % of the
            // rate over the transfer) and delivered within 2 % of the rate while backlogged; and
            // additionally release lateness p99 ≤ 100 µs. The sweep stops at the first rate that
            // misses the first.
            let mut sweep = Vec::new();
            let (mut best_rate, mut best_both) = (Value::Null, Value::Null);
            for &gbit in max_rates {
                let r = with_steal(b, "max", || b.tcp((gbit * 1e9) as u64, 10.0))?;
                let rate_ok = r["error_frac"].as_f64().unwrap_or(1.0).abs() <= 0.02
                    && r["carried_fraction"].as_f64().unwrap_or(0.0) >= 0.95;
                let late_ok = r["lateness_us"]["p99"].as_f64().unwrap_or(1e9) <= 100.0;
                sweep.push(r);
                if !rate_ok {
                    break;
                }
                best_rate = json!(gbit);
                if late_ok {
                    best_both = json!(gbit);
                }
            }
            out.insert("max_rate_sweep".into(), Value::Array(sweep));
            out.insert(
                "max_rate_carried_within_2pct_gbit".into(),
                best_rate.clone(),
            );
            out.insert(
                "max_rate_within_2pct_and_p99_lateness_100us_gbit".into(),
                best_both.clone(),
            );
            b.say(format!(
            "highest rate carried (>= 95%) and delivered within 2%: {best_rate} Gbit/s; also with p99 lateness <= 100 us: {best_both} Gbit/s"
        ));
        }
        if want("unshaped") {
            out.insert(
                "tcp_unshaped_10ms".into(),
                with_steal(b, "tcp_unshaped_10ms", || b.unshaped(10.0))?,
            );
        }
        if want("idle") {
            out.insert("idle".into(), with_steal(b, "idle", || b.idle())?);
        }
        Ok(Value::Object(out))
    }
}
