//! Each result's text form: what `quiclab bulk|page|flows|video` print without `--json`, from the
//! typed result alone (the JSON document is the same value serialised).

use std::fmt::{self, Display, Formatter};

use crate::bulk::BulkResult;
use crate::endpoint::{Endpoint, EndpointCost, EndpointCosts};
use crate::fec::FecResult;
use crate::flows::FlowsResult;
use crate::page::PageResult;
use crate::switch::SwitchOutcome;
use crate::video::VideoResult;

/// `-` for a value that was not measured, else the value with `digits` decimals.
fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".to_string(), |x| format!("{x:.digits$}"))
}

impl Display for FecResult {
    /// One line of a run's FEC figures, with the difference from gQUIC it carries.
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let n = |v: Option<u64>| v.map_or("unknown".into(), |v| v.to_string());
        write!(
            f,
            "  FEC N = {}: server sent {} data + {} parity datagrams (parity share {}), client rebuilt {}, {} group(s) beyond repair; {}",
            self.group,
            n(self.data_sent),
            n(self.parity_sent),
            opt(self.parity_share, 3),
            n(self.rebuilt),
            n(self.unrecoverable_groups),
            self.note,
        )?;
        if !self.missing.is_empty() {
            write!(f, "; missing: {}", self.missing.join(", "))?;
        }
        Ok(())
    }
}

impl Display for SwitchOutcome {
    /// One line per network switch: its outcome as the client lived it.
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let s = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.3} s"));
        write!(
            f,
            "  {:>8.3} s {} → {}: interruption {}, recovery {}, {} new connection(s)",
            self.at_s,
            self.from,
            self.to,
            s(self.interruption_s),
            s(self.recovery_s),
            self.connections_opened,
        )?;
        if self.refetched_bytes > 0 {
            write!(f, ", {} B fetched again", self.refetched_bytes)?;
        }
        if self.migrated {
            write!(f, ", migrated")?;
        }
        Ok(())
    }
}

fn lines<T: Display>(f: &mut Formatter<'_>, items: &[T]) -> fmt::Result {
    items.iter().try_for_each(|i| write!(f, "\n{i}"))
}

impl Display for BulkResult {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        if let Some(switches) = &self.network_switches {
            write!(
                f,
                "{} {} bytes across {} switch(es) ({}): total {:.1} ms, goodput {:.3} Mbit/s, {} connection(s)",
                self.proto,
                self.bytes,
                switches.len(),
                self.on_switch.as_deref().unwrap_or("-"),
                self.total_ms,
                self.goodput_mbps,
                self.connections.as_ref().map_or(0, Vec::len)
            )?;
            lines(f, switches)?;
        } else {
            // The protocol once (unless the connection negotiated another), and the server
            // when it is not quiclab's own.
            let negotiated = match self.negotiated.as_str() {
                n if n.is_empty() || n == self.proto => String::new(),
                n => format!(", negotiated {n}"),
            };
            let server = match self.implementations.as_ref().map(|i| &i.server) {
                Some(s) if s.name != "quiclab" => format!(" from {} {}", s.name, s.version),
                _ => String::new(),
            };
            write!(
                f,
                "{} {} bytes{server} (TLS {}{negotiated}{}{}): connect {} ms, handshake {:.1} ms, ttfb {:.1} ms, total {:.1} ms, goodput {:.3} Mbit/s{}, loss ratio {}",
                self.proto,
                self.bytes,
                self.tls_version,
                if self.resumed { ", resumed" } else { "" },
                if self.zero_rtt { ", 0-RTT" } else { "" },
                opt(self.connect_ms, 1),
                self.handshake_ms,
                self.ttfb_ms,
                self.total_ms,
                self.goodput_mbps,
                self.utilization
                    .map_or(String::new(), |u| format!(" (U {u:.3})")),
                opt(self.loss_ratio, 4)
            )?;
        }
        match &self.error {
            Some(e) if e.is_timeout() => write!(f, "\n  {e}")?,
            Some(e) => write!(f, "\n  failed: {e}")?,
            None => {}
        }
        lines(f, self.fec.as_slice())?;
        lines(f, self.endpoints.as_slice())
    }
}

impl Display for EndpointCost {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let split = match (self.cpu_user_s, self.cpu_system_s) {
            (Some(u), Some(s)) => format!(" (user {u:.2} s, system {s:.2} s)"),
            _ => String::new(),
        };
        let yes_no = |v: Option<bool>| match v {
            Some(true) => "on",
            Some(false) => "off",
            None => "?",
        };
        write!(
            f,
            "CPU {} cores{split}{}; per MB: {} packets off the wire, {} into IP, {} UDP reads, {} sent, {} ACK frames; GRO {}, GSO {}; {} UDP datagrams dropped at a full receive buffer",
            opt(self.cpu_cores, 2),
            if self.cpu_bound == Some(true) {
                " — CPU-BOUND"
            } else {
                ""
            },
            opt(self.wire_packets_in_per_mb, 0),
            opt(self.stack_packets_in_per_mb, 0),
            opt(self.udp_reads_per_mb, 0),
            opt(self.sent_per_mb, 0),
            opt(self.ack_frames_out_per_mb, 0),
            yes_no(self.gro),
            yes_no(self.gso),
            self.udp_receive_buffer_drops
                .map_or("-".to_string(), |n| n.to_string()),
        )
    }
}

impl Display for EndpointCosts {
    /// Both ends on two lines; a CPU-bound end is named first, since its rate may be its own
    /// limit rather than the protocol's.
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let bound = self.cpu_bound();
        if !bound.is_empty() {
            let names: Vec<&str> = bound
                .iter()
                .map(|e| match e {
                    Endpoint::Client => "client",
                    Endpoint::Server => "server",
                })
                .collect();
            writeln!(
                f,
                "  note: the {} was CPU-bound: the rate may be its limit, not the protocol's",
                names.join(" and the ")
            )?;
        }
        write!(f, "  client: {}\n  server: {}", self.client, self.server)
    }
}

impl Display for PageResult {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let s = &self.summary;
        // The loader, said as one (beside --server it read as the server), and a server that is
        // not quiclab's.
        let loader = match s.browser.as_str() {
            "chromium" => "Chromium",
            _ => "quiclab's loader",
        };
        let server = match self.implementations.as_ref().map(|i| &i.server) {
            Some(sv) if sv.name != "quiclab" => format!(" from {} {}", sv.name, sv.version),
            _ => String::new(),
        };
        write!(
            f,
            "{} over {} ({loader}){server}, {}: {} objects, {} bytes, page load time {:.1} ms over {} connection(s), protocols {:?}",
            self.page,
            s.proto,
            self.link.downlink,
            s.objects,
            s.bytes,
            s.plt_ms,
            s.connections,
            s.negotiated_protocols
        )?;
        if s.warm {
            // What the session cache bought: a warm load that resumed nothing is a cold one.
            write!(
                f,
                "\n  warm: ttfb {} ms, resumed {} connection(s), 0-RTT accepted on {}",
                opt(s.ttfb_ms, 1),
                s.resumed_connections
                    .map_or("? (no record)".into(), |n| n.to_string()),
                s.zero_rtt_accepted_connections
                    .map_or("? (no record)".into(), |n| n.to_string()),
            )?;
        }
        lines(f, self.fec.as_slice())
    }
}

impl Display for FlowsResult {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} over {}: goodput {} Mbit/s, U {}, J {} (window means), {} (per bin), loss ratio {}",
            self.mix,
            self.link.downlink,
            opt(self.goodput_mbps, 3),
            opt(self.utilization, 3),
            opt(self.jain, 3),
            opt(self.jain_bins, 3),
            opt(self.loss_ratio, 4),
        )?;
        for fl in &self.flows {
            write!(
                f,
                "\n  flow {}: goodput {} Mbit/s ({}), U {}, forwarded {} B, dropped {} packets, l {}",
                fl.label,
                opt(fl.goodput_mbps, 3),
                fl.goodput_window,
                opt(fl.utilization, 3),
                fl.forwarded_bytes.map_or("-".into(), |b| b.to_string()),
                fl.dropped_packets.map_or("-".into(), |b| b.to_string()),
                opt(fl.loss_ratio, 4),
            )?;
            if let Some(e) = &fl.error {
                write!(f, " — stopped: {e}")?;
            }
            lines(f, fl.fec.as_slice())?;
        }
        lines(f, self.endpoints.as_slice())
    }
}

impl Display for VideoResult {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        for (i, p) in self.players.iter().enumerate() {
            let m = &p.metrics;
            if i > 0 {
                writeln!(f)?;
            }
            write!(
                f,
                "player {}: {} segments, average bitrate {} Mbit/s (played {}), startup {} s, \
                 rebuffering {:.2} s in {} stalls (rate {}), {} bitrate switches",
                p.label,
                m.segments,
                opt(m.avg_bitrate_mbps, 3),
                opt(m.played_bitrate_mbps, 3),
                opt(m.startup_s, 2),
                m.rebuffer_s,
                m.stalls,
                opt(m.rebuffer_rate, 4),
                m.bitrate_switches,
            )?;
            if !m.seek_waits_s.is_empty() {
                let waits: Vec<String> = m.seek_waits_s.iter().map(|w| format!("{w:.2}")).collect();
                write!(f, ", waits after seeks {} s", waits.join(", "))?;
            }
            if let Some(e) = &p.error {
                write!(f, " — stopped: {e}")?;
            }
            if let Some(sw) = &p.network_switches {
                write!(
                    f,
                    "\n  {} network switch(es) ({}), {} connection(s) opened",
                    sw.len(),
                    self.on_switch.as_deref().unwrap_or("-"),
                    p.connections.as_ref().map_or(0, Vec::len)
                )?;
                lines(f, sw)?;
            }
            lines(f, p.fec.as_slice())?;
        }
        lines(f, self.endpoints.as_slice())
    }
}

/// `2026-11-25 05:56 UTC` from seconds since the epoch.
pub fn utc(unix: f64) -> String {
    let secs = unix.max(0.0) as u64;
    let (mut days, rest) = (secs / 86_400, secs % 86_400);
    let mut year = 1970;
    loop {
        let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
        let len = if leap { 366 } else { 365 };
        if days < len {
            let month_days = [
                31,
                if leap { 29 } else { 28 },
                31,
                30,
                31,
                30,
                31,
                31,
                30,
                31,
                30,
                31,
            ];
            let mut month = 0;
            while days >= month_days[month] {
                days -= month_days[month];
                month += 1;
            }
            return format!(
                "{year}-{:02}-{:02} {:02}:{:02} UTC",
                month + 1,
                days + 1,
                rest / 3600,
                rest / 60 % 60
            );
        }
        days -= len;
        year += 1;
    }
}

#[cfg(test)]
mod utc_tests {
    use super::utc;

    #[test]
    fn dates_are_utc() {
        assert_eq!(utc(0.0), "1970-01-01 00:00 UTC");
        // 2026-11-25 05:56:18 UTC.
        assert_eq!(utc(1_795_586_178.0), "2026-11-25 05:56 UTC");
        assert_eq!(utc(951_782_400.0), "2000-02-29 00:00 UTC");
    }
}

#[cfg(test)]
mod bulk_line_tests {
    use crate::WorkloadOutput;
    use crate::implementation::{ImplementationRecord, Implementations};

    /// Issue 61: the protocol is said once, the server when it is not quiclab's.
    #[test]
    fn a_bulk_line_names_the_protocol_once_and_a_foreign_server() {
        let WorkloadOutput::Bulk(mut b) = WorkloadOutput::example() else {
            unreachable!("the example is a bulk result")
        };
        let line = b.to_string();
        assert!(
            line.starts_with("h2 1000000 bytes (TLS 1.3): connect"),
            "{line}"
        );
        let record = |name: &str, version: &str| ImplementationRecord {
            name: name.into(),
            version: version.into(),
            congestion_control: "cubic".into(),
        };
        b.proto = "h3".into();
        b.negotiated = "h3".into();
        b.implementations = Some(Implementations {
            server: record("caddy", "v2.6.2"),
            client: record("quiclab", "quinn 0.11"),
        });
        let line = b.to_string();
        assert!(
            line.starts_with("h3 1000000 bytes from caddy v2.6.2 (TLS 1.3): "),
            "{line}"
        );
        assert_eq!(line.matches("h3").count(), 1, "{line}");
        b.negotiated = "h1".into();
        b.implementations = None;
        assert!(
            b.to_string()
                .starts_with("h3 1000000 bytes (TLS 1.3, negotiated h1): "),
            "{}",
            b.to_string()
        );
    }
}
