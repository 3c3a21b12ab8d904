//! A quiclab pcapng read for its QUIC: the UDP payloads of its raw-IP packets (IPv4 or IPv6), each
//! with its time (Unix ns), its direction (interface 0 is `uplink`, client to server; 1 is
//! `downlink`) and whether the link forwarded it (a packet it dropped or lost carries a comment
//! saying so, crates/lab/src/capture.rs), and the key log of its Decryption Secrets Block.

use pcap_parser::PcapBlockOwned;
use pcap_parser::pcapng::{Block, OptionCode, PcapNGSlice};

/// One UDP datagram of the capture.
#[derive(Debug, Clone, PartialEq)]
pub struct Datagram {
    pub t_ns: u64,
    /// Client to server.
    pub uplink: bool,
    /// False when the link dropped or lost it (the receiver never saw it).
    pub forwarded: bool,
    pub payload: Vec<u8>,
}

/// The capture's UDP datagrams, in file order, and its key log (empty without secrets).
pub fn read(bytes: &[u8]) -> Result<(Vec<Datagram>, String), String> {
    let blocks = PcapNGSlice::from_slice(bytes).map_err(|e| format!("not a pcapng file: {e:?}"))?;
    let mut datagrams = Vec::new();
    let mut keylog = String::new();
    for (i, block) in blocks.enumerate() {
        let block = block.map_err(|e| format!("pcapng block {i}: {e:?}"))?;
        match block {
            PcapBlockOwned::NG(Block::DecryptionSecrets(d)) => {
                keylog.push_str(&String::from_utf8_lossy(d.data));
                keylog.push('\n');
            }
            PcapBlockOwned::NG(Block::EnhancedPacket(e)) => {
                let Some(payload) = udp_payload(e.data) else {
                    continue;
                };
                let forwarded = !e.options.iter().any(|o| {
                    o.code == OptionCode::Comment
                        && o.as_bytes()
                            .is_ok_and(|b| b.starts_with(b"dropped") || b.starts_with(b"lost"))
                });
                datagrams.push(Datagram {
                    t_ns: (u64::from(e.ts_high) << 32) | u64::from(e.ts_low),
                    uplink: e.if_id == 0,
                    forwarded,
                    payload: payload.to_vec(),
                });
            }
            _ => {}
        }
    }
    Ok((datagrams, keylog))
}

/// The UDP payload of a raw IP packet (None: not UDP, or cut short).
pub fn udp_payload(ip: &[u8]) -> Option<&[u8]> {
    let udp = match ip.first()? >> 4 {
        4 => {
            let ihl = usize::from(ip[0] & 0x0f) * 4;
            if *ip.get(9)? != 17 {
                return None;
            }
            ip.get(ihl..)?
        }
        6 => {
            // quiclab's packets carry no extension headers.
            if *ip.get(6)? != 17 {
                return None;
            }
            ip.get(40..)?
        }
        _ => return None,
    };
    let len = usize::from(u16::from_be_bytes([*udp.get(4)?, *udp.get(5)?]));
    udp.get(8..len.max(8).min(udp.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn udp_payloads_come_out_of_ipv4_and_ipv6_and_nothing_else_does() {
        let mut v4 = vec![
            0x45, 0, 0, 0, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ];
        v4.extend([0x01, 0xbb, 0x30, 0x39, 0, 11, 0, 0, b'a', b'b', b'c']);
        assert_eq!(udp_payload(&v4), Some(&b"abc"[..]));
        let mut v6 = vec![0x60, 0, 0, 0, 0, 11, 17, 64];
        v6.extend([0u8; 32]);
        v6.extend([0x01, 0xbb, 0x30, 0x39, 0, 10, 0, 0, b'x', b'y']);
        assert_eq!(udp_payload(&v6), Some(&b"xy"[..]));
        let mut tcp = v4.clone();
        tcp[9] = 6;
        assert_eq!(udp_payload(&tcp), None);
        assert_eq!(udp_payload(&[0x45, 0]), None);
    }
}
