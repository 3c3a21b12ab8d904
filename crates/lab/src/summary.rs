//! The emulator's fidelity report as text (`quiclab shell`'s summary, `quiclab calibrate`'s table).

use crate::FidelityReport;
use crate::emulator::DirectionFidelity;
use quiclab_link::spec::LinkDescription;

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
