//! The virtio-net header an offload TUN puts in front of every frame (Linux
//! `include/uapi/linux/virtio_net.h`, `struct virtio_net_hdr`), and the Internet checksum
//! (RFC 1071) the segmentation recomputes. A few lines of bytes in and out, so that the sans-IO
//! link model needs no TUN crate.

/// `struct virtio_net_hdr` without the `num_buffers` of mergeable buffers: 10 bytes.
pub const VIRTIO_NET_HDR_LEN: usize = 10;
/// `VIRTIO_NET_HDR_GSO_TCPV4`: a TSO frame of IPv4 TCP.
pub const GSO_TCPV4: u8 = 1;
/// `VIRTIO_NET_HDR_GSO_TCPV6`: a TSO frame of IPv6 TCP.
pub const GSO_TCPV6: u8 = 4;
/// `VIRTIO_NET_HDR_GSO_UDP_L4`: a USO frame (IPv4 or IPv6 UDP).
pub const GSO_UDP_L4: u8 = 5;

/// The header's fields, in the host's byte order (as the kernel writes them for a TUN).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VirtioNetHdr {
    pub flags: u8,
    pub gso_type: u8,
    /// Length of the headers (IP + transport) every segment repeats.
    pub hdr_len: u16,
    /// Payload bytes per segment.
    pub gso_size: u16,
    pub csum_start: u16,
    pub csum_offset: u16,
}

impl VirtioNetHdr {
    /// Reads the header from the first [`VIRTIO_NET_HDR_LEN`] bytes.
    pub fn decode(b: &[u8]) -> Result<VirtioNetHdr, String> {
        if b.len() < VIRTIO_NET_HDR_LEN {
            return Err(format!(
                "a virtio-net header needs {VIRTIO_NET_HDR_LEN} bytes, got {}",
                b.len()
            ));
        }
        let u16_at = |i: usize| u16::from_ne_bytes([b[i], b[i + 1]]);
        Ok(VirtioNetHdr {
            flags: b[0],
            gso_type: b[1],
            hdr_len: u16_at(2),
            gso_size: u16_at(4),
            csum_start: u16_at(6),
            csum_offset: u16_at(8),
        })
    }

    /// Writes the header into the first [`VIRTIO_NET_HDR_LEN`] bytes.
    pub fn encode(&self, b: &mut [u8]) -> Result<(), String> {
        if b.len() < VIRTIO_NET_HDR_LEN {
            return Err(format!(
                "a virtio-net header needs {VIRTIO_NET_HDR_LEN} bytes, got {}",
                b.len()
            ));
        }
        b[0] = self.flags;
        b[1] = self.gso_type;
        for (i, v) in [
            self.hdr_len,
            self.gso_size,
            self.csum_start,
            self.csum_offset,
        ]
        .into_iter()
        .enumerate()
        {
            b[2 + 2 * i..4 + 2 * i].copy_from_slice(&v.to_ne_bytes());
        }
        Ok(())
    }
}

/// The one's-complement sum of `b` (big-endian 16-bit words; an odd last byte is the high byte
/// of a word) added to `initial`, not folded: partial sums chain (a pseudo-header, then the
/// segment).
pub fn checksum_no_fold(mut b: &[u8], initial: u64) -> u64 {
    let mut sum = initial;
    while b.len() >= 4 {
        sum += u64::from(u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
        b = &b[4..];
    }
    if b.len() >= 2 {
        sum += u64::from(u16::from_be_bytes([b[0], b[1]]));
        b = &b[2..];
    }
    if let Some(&last) = b.first() {
        sum += u64::from(last) << 8;
    }
    sum
}

/// [`checksum_no_fold`] folded to 16 bits (not complemented).
pub fn checksum(b: &[u8], initial: u64) -> u16 {
    let mut sum = checksum_no_fold(b, initial);
    while sum > 0xffff {
        sum = (sum >> 16) + (sum & 0xffff);
    }
    sum as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_round_trips_and_short_buffers_are_refused() {
        let h = VirtioNetHdr {
            flags: 1,
            gso_type: GSO_TCPV4,
            hdr_len: 52,
            gso_size: 1448,
            csum_start: 20,
            csum_offset: 16,
        };
        let mut b = [0u8; VIRTIO_NET_HDR_LEN];
        h.encode(&mut b).unwrap();
        assert_eq!(VirtioNetHdr::decode(&b).unwrap(), h);
        assert!(VirtioNetHdr::decode(&b[..9]).is_err());
        assert!(h.encode(&mut [0u8; 4]).is_err());
    }

    #[test]
    fn the_checksum_is_rfc_1071s() {
        // RFC 1071's example: 00 01 f2 03 f4 f5 f6 f7 sums to ddf2.
        assert_eq!(
            checksum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7], 0),
            0xddf2
        );
        // An IPv4 header whose checksum field is right sums to 0xffff.
        let ip = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(checksum(&ip, 0), 0xffff);
        // Chained partial sums equal one sum; an odd tail is the high byte.
        assert_eq!(
            checksum(&ip[10..], checksum_no_fold(&ip[..10], 0)),
            checksum(&ip, 0)
        );
        assert_eq!(checksum(&[0xab], 0), 0xab00);
    }
}
