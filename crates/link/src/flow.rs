//! Flows at the bottleneck: which transport connection a packet belongs to, and per-flow counters.
//!
//! A flow is keyed by its 5-tuple (IP version by its addresses, transport TCP or UDP, both
//! endpoints) read from the packet's IP header, in a canonical order of the two endpoints so that
//! a connection's data (downlink) and its acknowledgements (uplink) have one key. So the
//! bottleneck itself says how many packets and bytes each flow offered, got through and lost —
//! seed 000's loss ratio l per flow, independent of what the endpoints believe.
//!
//! Parsing is of the fixed headers only: IPv4 (with options, by IHL) and IPv6 whose next header is
//! TCP or UDP directly. Anything else (ICMP, IPv6 extension headers, fragments after the first,
//! truncated packets) has no key and is counted as "other" by the caller.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use serde::{Deserialize, Serialize};

/// The transport of a flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    Tcp,
    Udp,
}

const IPPROTO_TCP: u8 = 6;
const IPPROTO_UDP: u8 = 17;

/// A flow's 5-tuple with its endpoints in canonical order (`low` ≤ `high`), so both directions of
/// a connection share one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct FlowKey {
    pub transport: Transport,
    pub low: SocketAddr,
    pub high: SocketAddr,
}

impl FlowKey {
    /// The key of `a` ↔ `b` over `transport`, in either direction.
    pub fn new(transport: Transport, a: SocketAddr, b: SocketAddr) -> FlowKey {
        let (low, high) = if a <= b { (a, b) } else { (b, a) };
        FlowKey {
            transport,
            low,
            high,
        }
    }

    /// The source and destination addresses of an IP packet (starting at its IP header), any
    /// transport.
    pub fn addresses_of_packet(packet: &[u8]) -> Option<(IpAddr, IpAddr)> {
        match packet.first()? >> 4 {
            4 if packet.len() >= 20 => {
                let src: [u8; 4] = packet[12..16].try_into().ok()?;
                let dst: [u8; 4] = packet[16..20].try_into().ok()?;
                Some((
                    IpAddr::V4(Ipv4Addr::from(src)),
                    IpAddr::V4(Ipv4Addr::from(dst)),
                ))
            }
            6 if packet.len() >= 40 => {
                let src: [u8; 16] = packet[8..24].try_into().ok()?;
                let dst: [u8; 16] = packet[24..40].try_into().ok()?;
                Some((
                    IpAddr::V6(Ipv6Addr::from(src)),
                    IpAddr::V6(Ipv6Addr::from(dst)),
                ))
            }
            _ => None,
        }
    }

    /// The UDP payload length of an IP packet of `ip_len` bytes whose headers start `packet`
    /// (a segment of an offload super-packet has its headers and its own length), or None when
    /// it is not a UDP packet this parser reads (IPv4 without a later fragment; IPv6 with UDP as
    /// the first next header).
    pub fn udp_payload_len(packet: &[u8], ip_len: usize) -> Option<usize> {
        let header = match packet.first()? >> 4 {
            4 => {
                let ihl = usize::from(packet[0] & 0x0f) * 4;
                if ihl < 20 || packet.len() < ihl || packet[9] != IPPROTO_UDP {
                    return None;
                }
                if u16::from_be_bytes([packet[6], packet[7]]) & 0x1fff != 0 {
                    return None;
                }
                ihl
            }
            6 if packet.len() >= 40 && packet[6] == IPPROTO_UDP => 40,
            _ => return None,
        };
        ip_len.checked_sub(header + 8)
    }

    /// The key of an IP packet (starting at its IP header), or None when it is not a TCP or UDP
    /// packet this parser reads (see the module's documentation).
    pub fn of_packet(packet: &[u8]) -> Option<FlowKey> {
        let version = packet.first()? >> 4;
        let (proto, src, dst, l4) = match version {
            4 => {
                let ihl = usize::from(packet[0] & 0x0f) * 4;
                if ihl < 20 || packet.len() < ihl {
                    return None;
                }
                // A later fragment carries no transport header.
                let fragment_offset = u16::from_be_bytes([packet[6], packet[7]]) & 0x1fff;
                if fragment_offset != 0 {
                    return None;
                }
                let src: [u8; 4] = packet[12..16].try_into().ok()?;
                let dst: [u8; 4] = packet[16..20].try_into().ok()?;
                (
                    packet[9],
                    IpAddr::V4(Ipv4Addr::from(src)),
                    IpAddr::V4(Ipv4Addr::from(dst)),
                    &packet[ihl..],
                )
            }
            6 => {
                if packet.len() < 40 {
                    return None;
                }
                let src: [u8; 16] = packet[8..24].try_into().ok()?;
                let dst: [u8; 16] = packet[24..40].try_into().ok()?;
                (
                    packet[6],
                    IpAddr::V6(Ipv6Addr::from(src)),
                    IpAddr::V6(Ipv6Addr::from(dst)),
                    &packet[40..],
                )
            }
            _ => return None,
        };
        let transport = match proto {
            IPPROTO_TCP => Transport::Tcp,
            IPPROTO_UDP => Transport::Udp,
            _ => return None,
        };
        if l4.len() < 4 {
            return None;
        }
        let sport = u16::from_be_bytes([l4[0], l4[1]]);
        let dport = u16::from_be_bytes([l4[2], l4[3]]);
        Some(FlowKey::new(
            transport,
            SocketAddr::new(src, sport),
            SocketAddr::new(dst, dport),
        ))
    }

    /// Whether `port` is one of the flow's two ports (how a workload finds its client's flow).
    pub fn has_port(&self, port: u16) -> bool {
        self.low.port() == port || self.high.port() == port
    }
}

/// One flow's packets and bytes at one direction of the bottleneck.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowCounters {
    pub offered_packets: u64,
    pub offered_bytes: u64,
    pub forwarded_packets: u64,
    pub forwarded_bytes: u64,
    pub dropped_random_packets: u64,
    pub dropped_random_bytes: u64,
    pub dropped_queue_packets: u64,
    pub dropped_queue_bytes: u64,
}

impl FlowCounters {
    /// Seed 000's l for this flow: bytes lost (random and tail drops) / bytes offered; 0 when
    /// nothing was offered.
    pub fn loss_ratio(&self) -> f64 {
        if self.offered_bytes == 0 {
            return 0.0;
        }
        (self.dropped_random_bytes + self.dropped_queue_bytes) as f64 / self.offered_bytes as f64
    }
}

/// A flow and its counters, as reports carry them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowSummary {
    pub key: FlowKey,
    #[serde(flatten)]
    pub counters: FlowCounters,
}

/// Flows seen beyond this many share the `other` counters (a bound on memory whatever arrives).
pub const MAX_FLOWS: usize = 4096;

/// Per-flow counters of one direction; packets without a key (or beyond [`MAX_FLOWS`]) count as
/// `other`.
#[derive(Debug, Clone, Default)]
pub struct FlowTable {
    flows: HashMap<FlowKey, FlowCounters>,
    other: FlowCounters,
}

/// What happened to a packet, for [`FlowTable::count`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    Forwarded,
    DroppedRandom,
    DroppedQueue,
}

impl FlowTable {
    /// Counts a packet of `bytes` bytes of flow `key` with its fate.
    pub fn count(&mut self, key: Option<FlowKey>, bytes: u32, fate: Fate) {
        let full = self.flows.len() >= MAX_FLOWS;
        let c = match key {
            Some(k) if !full || self.flows.contains_key(&k) => self.flows.entry(k).or_default(),
            _ => &mut self.other,
        };
        let b = u64::from(bytes);
        c.offered_packets += 1;
        c.offered_bytes += b;
        match fate {
            Fate::Forwarded => {
                c.forwarded_packets += 1;
                c.forwarded_bytes += b;
            }
            Fate::DroppedRandom => {
                c.dropped_random_packets += 1;
                c.dropped_random_bytes += b;
            }
            Fate::DroppedQueue => {
                c.dropped_queue_packets += 1;
                c.dropped_queue_bytes += b;
            }
        }
    }

    /// Every keyed flow, ordered by key.
    pub fn flows(&self) -> Vec<FlowSummary> {
        let mut out: Vec<FlowSummary> = self
            .flows
            .iter()
            .map(|(&key, &counters)| FlowSummary { key, counters })
            .collect();
        out.sort_by_key(|f| f.key);
        out
    }

    /// Packets without a key.
    pub fn other(&self) -> FlowCounters {
        self.other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ipv4(proto: u8, src: [u8; 4], sport: u16, dst: [u8; 4], dport: u16) -> Vec<u8> {
        let mut p = vec![0u8; 20 + 8];
        p[0] = 0x45;
        p[9] = proto;
        p[12..16].copy_from_slice(&src);
        p[16..20].copy_from_slice(&dst);
        p[20..22].copy_from_slice(&sport.to_be_bytes());
        p[22..24].copy_from_slice(&dport.to_be_bytes());
        p
    }

    fn ipv6(proto: u8, src: Ipv6Addr, sport: u16, dst: Ipv6Addr, dport: u16) -> Vec<u8> {
        let mut p = vec![0u8; 40 + 8];
        p[0] = 0x60;
        p[6] = proto;
        p[8..24].copy_from_slice(&src.octets());
        p[24..40].copy_from_slice(&dst.octets());
        p[40..42].copy_from_slice(&sport.to_be_bytes());
        p[42..44].copy_from_slice(&dport.to_be_bytes());
        p
    }

    #[test]
    fn both_directions_of_an_ipv4_connection_share_a_key() {
        let down = ipv4(6, [10, 0, 0, 1], 443, [10, 0, 0, 2], 50000);
        let up = ipv4(6, [10, 0, 0, 2], 50000, [10, 0, 0, 1], 443);
        let k = FlowKey::of_packet(&down).unwrap();
        assert_eq!(Some(k), FlowKey::of_packet(&up));
        assert_eq!(k.transport, Transport::Tcp);
        assert_eq!(k.low, "10.0.0.1:443".parse().unwrap());
        assert_eq!(k.high, "10.0.0.2:50000".parse().unwrap());
        assert!(k.has_port(50000) && k.has_port(443) && !k.has_port(50001));
        // Another client port is another flow; UDP between the same ports is another flow.
        let other = ipv4(6, [10, 0, 0, 1], 443, [10, 0, 0, 2], 50001);
        assert_ne!(FlowKey::of_packet(&other), Some(k));
        let udp = ipv4(17, [10, 0, 0, 1], 443, [10, 0, 0, 2], 50000);
        assert_eq!(FlowKey::of_packet(&udp).unwrap().transport, Transport::Udp);
    }

    #[test]
    fn udp_payloads_are_measured_and_tcp_is_not() {
        let (a, b) = (Ipv6Addr::LOCALHOST, Ipv6Addr::UNSPECIFIED);
        let udp6 = ipv6(17, a, 443, b, 40000);
        assert_eq!(FlowKey::udp_payload_len(&udp6, 1400), Some(1400 - 48));
        assert_eq!(FlowKey::udp_payload_len(&ipv6(6, a, 443, b, 1), 1400), None);
        let mut v4 = vec![0u8; 28];
        v4[0] = 0x45;
        v4[9] = 17;
        assert_eq!(FlowKey::udp_payload_len(&v4, 1378), Some(1350));
        assert_eq!(FlowKey::udp_payload_len(&v4, 20), None);
        v4[9] = 6;
        assert_eq!(FlowKey::udp_payload_len(&v4, 1378), None);
        // A later fragment has no UDP header.
        v4[9] = 17;
        v4[7] = 1;
        assert_eq!(FlowKey::udp_payload_len(&v4, 1378), None);
    }

    #[test]
    fn ipv4_options_and_ipv6_are_read() {
        let mut p = ipv4(17, [10, 0, 0, 1], 443, [10, 0, 0, 2], 40000);
        // IHL 6: four bytes of options before the UDP header.
        p[0] = 0x46;
        p.splice(20..20, [1, 1, 1, 1]);
        let k = FlowKey::of_packet(&p).unwrap();
        assert!(k.has_port(40000) && k.has_port(443));

        let (a, b): (Ipv6Addr, Ipv6Addr) = ("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap());
        let down = ipv6(17, a, 443, b, 40000);
        let up = ipv6(17, b, 40000, a, 443);
        let k = FlowKey::of_packet(&down).unwrap();
        assert_eq!(Some(k), FlowKey::of_packet(&up));
        assert_eq!(k.low, SocketAddr::new(a.into(), 443));
        assert_eq!(k.transport, Transport::Udp);
    }

    #[test]
    fn what_is_not_tcp_or_udp_has_no_key() {
        assert_eq!(FlowKey::of_packet(&[]), None);
        assert_eq!(FlowKey::of_packet(&[0x45, 0, 0]), None);
        // ICMP.
        assert_eq!(FlowKey::of_packet(&ipv4(1, [1; 4], 0, [2; 4], 0)), None);
        // A later fragment.
        let mut frag = ipv4(17, [1; 4], 1, [2; 4], 2);
        frag[7] = 10;
        assert_eq!(FlowKey::of_packet(&frag), None);
        // IPv6 with a hop-by-hop extension header.
        let a: Ipv6Addr = "fd00::1".parse().unwrap();
        assert_eq!(FlowKey::of_packet(&ipv6(0, a, 1, a, 2)), None);
        // Too short for the ports.
        assert_eq!(
            FlowKey::of_packet(&ipv4(6, [1; 4], 1, [2; 4], 2)[..22]),
            None
        );
    }

    #[test]
    fn the_table_counts_fates_per_flow_and_the_rest_as_other() {
        let mut t = FlowTable::default();
        let k = FlowKey::new(
            Transport::Tcp,
            "10.0.0.1:443".parse().unwrap(),
            "10.0.0.2:5".parse().unwrap(),
        );
        t.count(Some(k), 1500, Fate::Forwarded);
        t.count(Some(k), 1500, Fate::DroppedQueue);
        t.count(Some(k), 1000, Fate::DroppedRandom);
        t.count(None, 60, Fate::Forwarded);
        let flows = t.flows();
        assert_eq!(flows.len(), 1);
        let c = flows[0].counters;
        assert_eq!((c.offered_packets, c.offered_bytes), (3, 4000));
        assert_eq!((c.forwarded_packets, c.forwarded_bytes), (1, 1500));
        assert_eq!((c.dropped_queue_packets, c.dropped_random_packets), (1, 1));
        assert!((c.loss_ratio() - 2500.0 / 4000.0).abs() < 1e-12);
        assert_eq!(t.other().forwarded_bytes, 60);
    }
}
