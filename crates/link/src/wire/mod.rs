//! What crosses the TUN devices, at the level the link needs to read or rewrite: the ECN field of
//! IPv4 and IPv6 headers (here), the packet log's lines ([`log`]) and the virtio-net frames of an
//! offload TUN, split into segments and written back as runs ([`offload`]). (Flow keys are read in
//! [`crate::flow`].)
//!
//! ECN (RFC 3168) is the low two bits of IPv4's TOS byte and of IPv6's traffic class: 00 not
//! ECN-capable, 10 ECT(0), 01 ECT(1), 11 CE. A queue discipline with ECN marks an ECN-capable
//! packet CE instead of dropping it.

pub mod log;
pub mod offload;
pub mod virtio;

/// The ECN field of an IP packet (None: not IPv4/IPv6, or too short).
pub fn ecn_field(packet: &[u8]) -> Option<u8> {
    match packet.first()? >> 4 {
        4 if packet.len() >= 20 => Some(packet[1] & 0b11),
        6 if packet.len() >= 40 => Some((packet[1] >> 4) & 0b11),
        _ => None,
    }
}

/// ECN-capable transport: ECT(0) or ECT(1) (a packet already CE is not marked again).
pub fn is_ect(packet: &[u8]) -> bool {
    matches!(ecn_field(packet), Some(0b01 | 0b10))
}

/// Sets the ECN field to CE, fixing IPv4's header checksum (RFC 1624's incremental update).
/// False when the packet is not an ECN-capable IPv4/IPv6 packet (nothing is changed).
pub fn mark_ce(packet: &mut [u8]) -> bool {
    if !is_ect(packet) {
        return false;
    }
    match packet[0] >> 4 {
        4 => {
            let old = u16::from_be_bytes([packet[0], packet[1]]);
            packet[1] |= 0b11;
            let new = u16::from_be_bytes([packet[0], packet[1]]);
            // HC' = ~(~HC + ~m + m')
            let hc = u16::from_be_bytes([packet[10], packet[11]]);
            let mut sum = u32::from(!hc) + u32::from(!old) + u32::from(new);
            while sum > 0xffff {
                sum = (sum & 0xffff) + (sum >> 16);
            }
            packet[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
            true
        }
        6 => {
            packet[1] |= 0b11 << 4;
            true
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The IPv4 header checksum computed from scratch.
    fn checksum(header: &[u8]) -> u16 {
        let mut sum: u32 = header
            .chunks(2)
            .enumerate()
            .filter(|(i, _)| *i != 5)
            .map(|(_, w)| u32::from(u16::from_be_bytes([w[0], w[1]])))
            .sum();
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        !(sum as u16)
    }

    fn ipv4(tos: u8) -> Vec<u8> {
        let mut p = vec![
            0x45, tos, 0, 40, 0x12, 0x34, 0x40, 0, 64, 17, 0, 0, 100, 64, 0, 1, 100, 64, 0, 2,
        ];
        p.extend([0u8; 20]);
        let c = checksum(&p[..20]);
        p[10..12].copy_from_slice(&c.to_be_bytes());
        p
    }

    #[test]
    fn ipv4_ect_packets_are_marked_ce_with_a_valid_checksum() {
        for tos in [0b10u8, 0b01, 0xb8 | 0b10] {
            let mut p = ipv4(tos);
            assert!(is_ect(&p));
            assert!(mark_ce(&mut p));
            assert_eq!(ecn_field(&p), Some(0b11));
            assert_eq!(p[1] & !0b11, tos & !0b11, "DSCP kept");
            assert_eq!(u16::from_be_bytes([p[10], p[11]]), checksum(&p[..20]));
        }
        // Not ECN-capable, or already CE: left alone.
        for tos in [0u8, 0b11] {
            let mut p = ipv4(tos);
            let before = p.clone();
            assert!(!mark_ce(&mut p));
            assert_eq!(p, before);
        }
    }

    #[test]
    fn ipv6_traffic_class_carries_the_ecn_bits() {
        let mut p = vec![0u8; 40];
        p[0] = 0x60; // version 6, traffic class high nibble 0
        p[1] = 0b10 << 4; // ECT(0) in the traffic class's low bits
        assert_eq!(ecn_field(&p), Some(0b10));
        assert!(mark_ce(&mut p));
        assert_eq!(ecn_field(&p), Some(0b11));
        assert_eq!(p[0], 0x60);
        assert_eq!(ecn_field(&[0x60; 10]), None);
        assert!(!is_ect(&[]));
    }
}
