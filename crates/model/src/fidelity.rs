//! The emulator's evidence of its own fidelity, as data: what every result carries. The emulator
//! (`quiclab-lab`) fills it in; reports, verdicts and the store only read it.

use std::path::PathBuf;

use quiclab_link::ModelSummary;
use quiclab_link::spec::LinkDescription;
use quiclab_link::stats::Distribution;
use quiclab_link::wire::log::Direction;
use serde::{Deserialize, Serialize};

/// Fidelity figures of one direction.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DirectionFidelity {
    pub direction: Direction,
    /// The model's view: counters (offered, forwarded, dropped by cause), queue and sojourn distributions.
    pub model: ModelSummary,
    /// Packets and bytes actually written to the egress TUN.
    pub delivered_packets: u64,
    pub delivered_bytes: u64,
    /// Packets still queued in the emulator when it stopped (neither delivered nor dropped).
    pub in_flight_at_stop: u64,
    /// How late each release was versus its computed time.
    pub lateness_us: Distribution,
    /// Releases made before their time because of `--batch-window` (count and how early, in µs).
    pub early_us: Distribution,
    /// IP-layer rate delivered while the queue was backlogged (back-to-back releases), measured from the
    /// actual release times; `None` when the link was never backlogged.
    pub backlogged_rate_bps: Option<f64>,
    /// Bytes and time over which `backlogged_rate_bps` was measured.
    pub backlogged_bytes: u64,
    #[serde(deserialize_with = "quiclab_link::stats::f64_or_nan")]
    pub backlogged_seconds: f64,
    /// Writes to the egress TUN that failed (the packet is lost and counted here).
    pub write_errors: u64,
    /// Packets (and bytes) dropped because they came from or went to the client's address on a
    /// network it had already left (network switches), at arrival or at release.
    pub dropped_stale_address_packets: u64,
    pub dropped_stale_address_bytes: u64,
    /// Of those, packets that named an address of a network the client had not reached yet:
    /// no configured switch drops such a packet, so the run is flagged.
    pub dropped_not_yet_valid_address_packets: u64,
    /// CPU seconds of the scheduler thread, which serves both directions (the same figure in both).
    /// It includes the receiving kernel's network stack, which runs in the context of each TUN write.
    #[serde(deserialize_with = "quiclab_link::stats::f64_or_nan")]
    pub cpu_seconds: f64,
    /// Whether the thread ran under SCHED_FIFO.
    pub realtime: bool,
    /// TUN offload's figures (reads split, batches coalesced, fallback), when the lab had it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offload: Option<OffloadFigures>,
    /// The largest UDP payload that arrived on this link (segments of offload super-packets
    /// counted one by one, as they cross the emulated wire): QUIC's datagram size as sent, what
    /// `quic_mtu` bounds. None: no UDP packet arrived (or a result from before it was measured).
    #[serde(default)]
    pub largest_udp_payload: Option<u64>,
    /// How long forwarded packets waited in the bottleneck's queue (arrival to the start of their
    /// serialisation — the sojourn CoDel and PIE measure at dequeue), in ms; for every discipline,
    /// tail drop too.
    #[serde(default)]
    pub sojourn_ms: SojournMs,
    /// Marks a discipline decided that could not be written into the packet (see
    /// `Lane::marks_not_applied`); 0 unless something is wrong.
    #[serde(default)]
    pub marks_not_applied: u64,
}

/// Percentiles of the queue's sojourn time — arrival to the start of serialisation, what CoDel and
/// PIE measure (the model's `queueing_delay_us`) — in ms; null when no packet was forwarded (unknown,
/// not 0). Not the model's older `sojourn_us`, which runs to the end of serialisation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SojournMs {
    pub packets: u64,
    pub p50: Option<f64>,
    pub p90: Option<f64>,
    pub p99: Option<f64>,
}

impl SojournMs {
    /// From the model's queueing-delay distribution (µs).
    pub fn of(queueing_delay_us: &Distribution) -> SojournMs {
        let ms = |v: f64| (queueing_delay_us.count > 0).then_some(v / 1e3);
        SojournMs {
            packets: queueing_delay_us.count,
            p50: ms(queueing_delay_us.p50),
            p90: ms(queueing_delay_us.p90),
            p99: ms(queueing_delay_us.p99),
        }
    }
}

/// The evidence of the emulator's own fidelity that goes with every result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FidelityReport {
    pub uplink: DirectionFidelity,
    pub downlink: DirectionFidelity,
    /// Lateness over both directions.
    pub lateness_us: Distribution,
    /// Emulator CPU (the scheduler thread) as a fraction of one core over the run.
    #[serde(deserialize_with = "quiclab_link::stats::f64_or_nan")]
    pub cpu_core_fraction: f64,
    #[serde(deserialize_with = "quiclab_link::stats::f64_or_nan")]
    pub wall_seconds: f64,
    /// Log events dropped because the log writer could not keep up (the log is then incomplete).
    pub log_events_dropped: u64,
    /// Share of all releases more than 100 µs late.
    #[serde(deserialize_with = "quiclab_link::stats::f64_or_nan")]
    pub late_share: f64,
    /// Lateness per phase the caller marked (`Emulator::begin_phase`; calibrate: rtt, tcp,
    /// udp-loss), in order; empty when none were marked.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<PhaseLateness>,
    /// The run's pcapng capture, when it asked for one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture: Option<CaptureSummary>,
}

/// Release lateness over one marked phase (both directions).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PhaseLateness {
    pub name: String,
    pub lateness_us: Distribution,
    /// Share of the phase's releases more than 100 µs late.
    #[serde(deserialize_with = "quiclab_link::stats::f64_or_nan")]
    pub late_share: f64,
}

/// What a capture holds, in every result that asked for one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaptureSummary {
    pub path: PathBuf,
    /// Packets written.
    pub packets: u64,
    /// Size of the file.
    pub bytes: u64,
    /// Packets past the size cap, counted and not written.
    pub over_cap: u64,
    /// Packets the capture writer could not keep up with (the emulator never waits for it).
    pub dropped_by_writer: u64,
    /// Lines of TLS key log embedded (0: nothing to decrypt with).
    pub secrets: u64,
    /// Why the capture could not be written (a full disk): its file is absent, and the run's
    /// measurement is kept all the same. None: the file was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missing: Option<String>,
}

/// What one direction's offload did, for the fidelity report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OffloadFigures {
    /// Coalescing window in µs (0: each segment written on its own).
    #[serde(deserialize_with = "quiclab_link::stats::f64_or_nan")]
    pub window_us: f64,
    /// Reads that returned a packet, and the MTU packets they gave (a super-packet gives several).
    pub reads: u64,
    pub read_segments: u64,
    #[serde(deserialize_with = "quiclab_link::stats::f64_or_nan")]
    pub segments_per_read: f64,
    /// Super-packets the kernel handed over that could not be split (malformed or unsupported):
    /// dropped and counted, never forwarded.
    pub dropped_unsplittable: u64,
    /// The last reason a frame could not be split.
    pub last_unsplittable: Option<String>,
    /// Batches written, and the packets in them (a batch becomes one write per run of consecutive
    /// segments of one frame).
    pub batches: u64,
    pub batch_segments: u64,
    #[serde(deserialize_with = "quiclab_link::stats::f64_or_nan")]
    pub segments_per_batch: f64,
    /// Writes the receiving kernel counted (its TUN's received packets; a coalesced GSO packet is
    /// one), and delivered packets per write.
    pub kernel_writes: Option<u64>,
    pub segments_per_write: Option<f64>,
    /// Why the lane fell back to writing each packet on its own, if it did (the kernel refused a
    /// coalesced write).
    pub fallback: Option<String>,
}

/// One switch as the lab carried it out.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AppliedSwitch {
    /// The scheduled instant (s on the emulator's clock).
    pub at_s: f64,
    /// When the client's addresses had changed (s on the emulator's clock).
    pub applied_s: f64,
    /// The address epoch it started (1 for the first switch).
    pub epoch: usize,
    pub from: String,
    pub to: String,
    /// Why the namespace could not follow (the gate dropped the old address regardless).
    pub error: Option<String>,
}

fn direction_lines(name: &str, d: &DirectionFidelity) -> String {
    let c = &d.model.counters;
    let rate = d
        .backlogged_rate_bps
        .map(|r| {
            format!(
                "{:.3} Mbit/s while backlogged ({:.2} s)",
                r / 1e6,
                d.backlogged_seconds
            )
        })
        .unwrap_or_else(|| "never backlogged".into());
    format!(
        "  {name:<8} offered {} pkts / {} B; delivered {} pkts / {} B; dropped: queue {} pkts, random loss {} pkts{}; loss ratio {:.4}\n\
         {:<10} rate {rate}; sojourn p50 {:.0} us p99 {:.0} us; queue peak {} B; lateness p50 {:.1} us p99 {:.1} us max {:.1} us",
        c.offered_packets,
        c.offered_bytes,
        d.delivered_packets,
        d.delivered_bytes,
        c.dropped_queue_packets,
        c.dropped_random_packets,
        match &d.model.aqm {
            Some(_) => format!(
                ", {} by {} pkts, marked CE {} pkts",
                d.model.discipline, c.dropped_aqm_packets, c.marked_packets
            ),
            None => String::new(),
        },
        c.loss_ratio(),
        "",
        d.model.sojourn_us.p50,
        d.model.sojourn_us.p99,
        c.max_queue_bytes,
        d.lateness_us.p50,
        d.lateness_us.p99,
        d.lateness_us.max,
    )
}

impl FidelityReport {
    /// The emulator's figures as `quiclab shell` and `quiclab calibrate` print them.
    pub fn summary(&self, link: &LinkDescription) -> String {
        let f = self;
        format!(
            "quiclab link summary\n  uplink   {}\n  downlink {}\n{}\n{}\n  emulator CPU {:.1}% of a core over {:.2} s{}",
            link.uplink,
            link.downlink,
            direction_lines("uplink", &f.uplink),
            direction_lines("downlink", &f.downlink),
            f.cpu_core_fraction * 100.0,
            f.wall_seconds,
            if f.log_events_dropped > 0 {
                format!(
                    "; WARNING: {} log events dropped (log incomplete)",
                    f.log_events_dropped
                )
            } else {
                String::new()
            }
        )
    }
}

/// One line per switch, as `quiclab shell` prints them.
impl std::fmt::Display for AppliedSwitch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "switch {}: {} → {} at {:.3} s (addresses changed at {:.3} s)",
            self.epoch, self.from, self.to, self.at_s, self.applied_s
        )?;
        match &self.error {
            Some(e) => write!(f, "; the namespace could not follow: {e}"),
            None => Ok(()),
        }
    }
}

/// One line about a run's capture: where, how much, what it can decrypt with.
impl std::fmt::Display for CaptureSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let c = self;
        if let Some(why) = &c.missing {
            return write!(
                f,
                "capture: {} not written ({why}); the run's measurement is kept",
                c.path.display()
            );
        }
        let mut line = format!(
            "capture: {} ({} packets, {} bytes; {})",
            c.path.display(),
            c.packets,
            c.bytes,
            if c.secrets > 0 {
                format!("{} secret(s) embedded", c.secrets)
            } else {
                "no secrets: nothing in the lab logged TLS keys".to_string()
            }
        );
        if c.over_cap > 0 {
            line.push_str(&format!(
                "; {} packet(s) past the size cap not captured",
                c.over_cap
            ));
        }
        if c.dropped_by_writer > 0 {
            line.push_str(&format!(
                "; {} packet(s) missed: the writer fell behind",
                c.dropped_by_writer
            ));
        }
        f.write_str(&line)
    }
}
