//! What crosses an offload TUN (`IFF_VNET_HDR` with TSO/USO): a virtio-net header and one IP
//! packet, which is a single packet or a kernel super-packet. [`Frame::parse`] validates a frame;
//! the link model then queues each MTU segment by reference (`Frame` + index), so queue, loss,
//! counters and the packet log stay per packet. [`Frame::run_head`] makes one packet of a run of
//! consecutive segments: a GSO packet whose headers are patched for the run (IP length and ID, TCP
//! sequence number and flags, UDP length, partial checksum), written with the payload straight from
//! the read buffer. The segment rules are the kernel's own (those of tun-rs's `gso_split`, against
//! which the tests check them): FIN and PSH on the final segment only, CWR on the first only, IPv4
//! IDs counting up. A lost segment ends a run; segments of different frames (other flows, or a
//! later super-packet) are never merged ([`run_end`]).
//!
//! Pure: bytes in, bytes out. The lab's `offload` module owns the devices, the reads and the
//! `writev` calls. The virtio-net header and the Internet checksum are `wire::virtio`'s.

use super::virtio::{
    GSO_TCPV4 as VIRTIO_NET_HDR_GSO_TCPV4, GSO_TCPV6 as VIRTIO_NET_HDR_GSO_TCPV6,
    GSO_UDP_L4 as VIRTIO_NET_HDR_GSO_UDP_L4, VIRTIO_NET_HDR_LEN, VirtioNetHdr, checksum,
    checksum_no_fold,
};
use serde::{Deserialize, Serialize};

/// Where the IP packet starts in every buffer of an offload lane: room for the virtio-net header
/// in front of it, which a write needs.
pub const PACKET_OFFSET: usize = VIRTIO_NET_HDR_LEN;

/// `VIRTIO_NET_HDR_F_NEEDS_CSUM`: the transport checksum is only the pseudo-header's partial sum.
const NEEDS_CSUM: u8 = 1;
const GSO_NONE: u8 = 0;
const GSO_ECN: u8 = 0x80;

/// Why a frame read from an offload TUN was not turned into packets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsplittable(pub String);

/// How a GSO frame's segments are cut: the validated layout of a super-packet.
#[derive(Debug, Clone, Copy)]
struct Gso {
    hdr: VirtioNetHdr,
    tcp: bool,
    is_v6: bool,
    /// IP + transport header length (every segment starts with these bytes).
    hdr_len: usize,
    /// Payload bytes per segment (the last may be shorter).
    mss: usize,
    segments: usize,
}

/// A frame read from an offload TUN and validated: a virtio-net header and one IP packet, which is
/// either a single MTU packet or a super-packet whose MTU segments are described, not copied. The
/// link model queues the segments by reference (`Frame` + index); a write sends a run of
/// consecutive segments of one frame as one packet — a GSO packet with headers patched for the run
/// — straight from the read buffer, so the payload is never copied in user space.
pub struct Frame {
    buf: Vec<u8>,
    /// The IP packet is `buf[PACKET_OFFSET..PACKET_OFFSET + len]`.
    len: usize,
    gso: Option<Gso>,
}

/// Longest head of a run: virtio-net header, IPv6 header (or IPv4 with options) and a TCP header
/// with options. Headers are validated to fit.
pub const MAX_HEAD: usize = VIRTIO_NET_HDR_LEN + 60 + 60;

impl Frame {
    /// Validates `buf[..n]` (virtio-net header + packet). Every field a split relies on is checked
    /// first (this mirrors tun-rs's `handle_virtio_read` and goes further: lengths, offsets and the
    /// IP header are validated before any index is used), so no input — random, truncated or
    /// malformed — panics or is forwarded half-parsed: it is an [`Unsplittable`] error (with the
    /// buffer back), and the caller drops and counts it. A single packet whose transport checksum
    /// the kernel left partial is completed here. `max_packet`: no segment may be longer.
    pub fn parse(
        mut buf: Vec<u8>,
        n: usize,
        max_packet: usize,
    ) -> Result<Frame, (Unsplittable, Vec<u8>)> {
        match Self::validate(&mut buf, n, max_packet) {
            Ok(gso) => Ok(Frame {
                buf,
                len: n - VIRTIO_NET_HDR_LEN,
                gso,
            }),
            Err(e) => Err((e, buf)),
        }
    }

    fn validate(buf: &mut [u8], n: usize, max_packet: usize) -> Result<Option<Gso>, Unsplittable> {
        let bad = |why: &str| Unsplittable(why.to_string());
        if n > buf.len() {
            return Err(bad("frame longer than its buffer"));
        }
        if n <= VIRTIO_NET_HDR_LEN {
            return Err(bad("frame shorter than its virtio-net header"));
        }
        let mut hdr =
            VirtioNetHdr::decode(&buf[..VIRTIO_NET_HDR_LEN]).map_err(|e| bad(&e.to_string()))?;
        let packet = &mut buf[VIRTIO_NET_HDR_LEN..n];
        let len = packet.len();
        let is_v6 = match packet[0] >> 4 {
            4 => false,
            6 => true,
            v => return Err(Unsplittable(format!("IP version {v}"))),
        };
        let min_ip = if is_v6 { 40 } else { 20 };
        if len < min_ip {
            return Err(bad("packet shorter than its IP header"));
        }
        // The IP header's own length field must say the frame's length: a frame cut short (or
        // padded) is refused rather than split into plausible-looking packets.
        if is_v6 {
            if u16::from_be_bytes([packet[4], packet[5]]) as usize + 40 != len {
                return Err(bad("IPv6 payload length does not match the frame"));
            }
        } else {
            let ihl = (packet[0] & 0x0f) as usize * 4;
            if ihl < 20 || ihl > len {
                return Err(bad("bad IPv4 header length"));
            }
            if u16::from_be_bytes([packet[2], packet[3]]) as usize != len {
                return Err(bad("IPv4 total length does not match the frame"));
            }
        }
        if hdr.gso_type == GSO_NONE {
            if len > max_packet {
                return Err(bad("packet larger than the MTU"));
            }
            if hdr.flags & NEEDS_CSUM != 0 {
                let at = hdr.csum_start as usize + hdr.csum_offset as usize;
                if (hdr.csum_start as usize) < min_ip || at + 2 > len {
                    return Err(bad("checksum field outside the packet"));
                }
                let initial = u16::from_be_bytes([packet[at], packet[at + 1]]);
                packet[at] = 0;
                packet[at + 1] = 0;
                let mut sum = !checksum(&packet[hdr.csum_start as usize..], initial as u64);
                if sum == 0 && hdr.csum_offset == 6 {
                    // UDP sends a computed 0 as all ones (0 means "no checksum").
                    sum = 0xffff;
                }
                packet[at..at + 2].copy_from_slice(&sum.to_be_bytes());
            }
            return Ok(None);
        }
        if hdr.gso_size == 0 {
            return Err(bad("GSO frame with segment size 0"));
        }
        let tcp = match (hdr.gso_type & !GSO_ECN, is_v6) {
            (VIRTIO_NET_HDR_GSO_TCPV4, false) | (VIRTIO_NET_HDR_GSO_TCPV6, true) => true,
            (VIRTIO_NET_HDR_GSO_UDP_L4, _) if hdr.gso_type & GSO_ECN == 0 => false,
            _ => {
                return Err(Unsplittable(format!(
                    "unsupported GSO type {}",
                    hdr.gso_type
                )));
            }
        };
        let start = hdr.csum_start as usize;
        if start < min_ip || start >= len {
            return Err(bad("transport header outside the packet"));
        }
        if !is_v6 && start != (packet[0] & 0x0f) as usize * 4 {
            return Err(bad("transport header does not follow the IPv4 header"));
        }
        if start > 60 {
            return Err(bad("IP header longer than 60 bytes"));
        }
        let expected_proto = if tcp { 6 } else { 17 };
        if is_v6 && start == 40 && packet[6] != expected_proto
            || !is_v6 && packet[9] != expected_proto
        {
            return Err(bad("transport protocol does not match the GSO type"));
        }
        // Never trust hdr_len (the kernel may give the whole first packet's length): derive it
        // from the transport header, as the split needs.
        let transport_len = if tcp {
            if len < start + 20 {
                return Err(bad("TCP header truncated"));
            }
            let l = ((packet[start + 12] >> 4) as usize) * 4;
            if !(20..=60).contains(&l) {
                return Err(bad("bad TCP header length"));
            }
            l
        } else {
            8
        };
        let hdr_len = start + transport_len;
        if len < hdr_len {
            return Err(bad("headers longer than the packet"));
        }
        hdr.hdr_len = hdr_len as u16;
        let expected_offset = if tcp { 16 } else { 6 };
        if hdr.csum_offset != expected_offset {
            return Err(bad("checksum offset does not match the transport protocol"));
        }
        let payload = len - hdr_len;
        if payload == 0 {
            return Err(bad("GSO frame without payload"));
        }
        let mss = hdr.gso_size as usize;
        if hdr_len + mss.min(payload) > max_packet {
            return Err(bad("segment larger than the MTU"));
        }
        Ok(Some(Gso {
            hdr,
            tcp,
            is_v6,
            hdr_len,
            mss,
            segments: payload.div_ceil(mss),
        }))
    }

    /// The IP packet as read (a super-packet's headers are every segment's headers: enough for
    /// flow keys and addresses).
    pub fn packet(&self) -> &[u8] {
        &self.buf[PACKET_OFFSET..PACKET_OFFSET + self.len]
    }

    /// How many MTU packets the frame carries.
    pub fn segments(&self) -> usize {
        self.gso.map_or(1, |g| g.segments)
    }

    /// The IP length of segment `i`.
    pub fn segment_len(&self, i: usize) -> usize {
        match self.gso {
            None => self.len,
            Some(g) => g.hdr_len + g.mss.min(self.len - g.hdr_len - i * g.mss),
        }
    }

    /// Segments `first..=last` as one packet to write: the head (virtio-net header and the run's
    /// IP and transport headers) goes into `head`, and the returned range of [`Frame::bytes`]
    /// follows it. A run of several segments is a GSO packet (the kernel's receive path takes it
    /// as one, as GRO would have made it); one segment is a plain packet. Transport checksums are
    /// left partial (`NEEDS_CSUM`), as the kernel does for its own GSO packets.
    pub fn run_head(
        &self,
        first: usize,
        last: usize,
        head: &mut [u8; MAX_HEAD],
    ) -> (usize, std::ops::Range<usize>) {
        let Some(g) = self.gso else {
            // A single packet, checksums complete: a zeroed virtio-net header.
            head[..VIRTIO_NET_HDR_LEN].fill(0);
            return (VIRTIO_NET_HDR_LEN, PACKET_OFFSET..PACKET_OFFSET + self.len);
        };
        debug_assert!(first <= last && last < g.segments);
        let packet = self.packet();
        let pay_start = g.hdr_len + first * g.mss;
        let pay_end = (g.hdr_len + (last + 1) * g.mss).min(self.len);
        let pay_len = pay_end - pay_start;
        let count = last - first + 1;
        let start = g.hdr.csum_start as usize;
        let hdr = VirtioNetHdr {
            flags: NEEDS_CSUM,
            gso_type: if count > 1 { g.hdr.gso_type } else { GSO_NONE },
            hdr_len: g.hdr_len as u16,
            gso_size: if count > 1 { g.mss as u16 } else { 0 },
            csum_start: g.hdr.csum_start,
            csum_offset: g.hdr.csum_offset,
        };
        hdr.encode(&mut head[..VIRTIO_NET_HDR_LEN])
            .expect("a virtio-net header fits its length");
        let h = &mut head[VIRTIO_NET_HDR_LEN..VIRTIO_NET_HDR_LEN + g.hdr_len];
        h.copy_from_slice(&packet[..g.hdr_len]);
        let ip_total = g.hdr_len + pay_len;
        if g.is_v6 {
            h[4..6].copy_from_slice(&((ip_total - 40) as u16).to_be_bytes());
        } else {
            h[2..4].copy_from_slice(&(ip_total as u16).to_be_bytes());
            // The kernel's own segmentation numbers the IDs of a super-packet's segments upwards.
            let id = u16::from_be_bytes([h[4], h[5]]).wrapping_add(first as u16);
            h[4..6].copy_from_slice(&id.to_be_bytes());
            h[10] = 0;
            h[11] = 0;
            let c = !checksum(&h[..start], 0);
            h[10..12].copy_from_slice(&c.to_be_bytes());
        }
        let transport_len = ip_total - start;
        if g.tcp {
            let seq = u32::from_be_bytes([h[start + 4], h[start + 5], h[start + 6], h[start + 7]])
                .wrapping_add((first * g.mss) as u32);
            h[start + 4..start + 8].copy_from_slice(&seq.to_be_bytes());
            if first > 0 {
                // Legacy ECN GSO keeps CWR on the first segment only.
                h[start + 13] &= !TCP_CWR;
            }
            if last + 1 < g.segments {
                // FIN and PSH belong to the final segment only.
                h[start + 13] &= !(TCP_FIN | TCP_PSH);
            }
        } else {
            h[start + 4..start + 6].copy_from_slice(&(transport_len as u16).to_be_bytes());
        }
        // A partial checksum holds the pseudo-header's sum (folded, not complemented).
        let (src, dst) = if g.is_v6 {
            (&packet[8..24], &packet[24..40])
        } else {
            (&packet[12..16], &packet[16..20])
        };
        let proto = if g.tcp { 6 } else { 17 };
        let pseudo = checksum_no_fold(dst, checksum_no_fold(src, 0));
        let trailer = [0, proto, (transport_len >> 8) as u8, transport_len as u8];
        let sum = checksum(&[], checksum_no_fold(&trailer, pseudo));
        let at = start + g.hdr.csum_offset as usize;
        h[at..at + 2].copy_from_slice(&sum.to_be_bytes());
        (
            VIRTIO_NET_HDR_LEN + g.hdr_len,
            PACKET_OFFSET + pay_start..PACKET_OFFSET + pay_end,
        )
    }

    /// The frame's bytes (what [`Frame::run_head`]'s range indexes).
    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }

    /// Segments `first..=last` as one frame (virtio-net header + packet), copied: for tests and
    /// for [`split_frame`].
    pub fn run_frame(&self, first: usize, last: usize) -> Vec<u8> {
        let mut head = [0u8; MAX_HEAD];
        let (n, range) = self.run_head(first, last, &mut head);
        let mut f = head[..n].to_vec();
        f.extend_from_slice(&self.buf[range]);
        f
    }

    /// Gives the buffer back (for reuse).
    pub fn into_buffer(self) -> Vec<u8> {
        self.buf
    }
}

const TCP_FIN: u8 = 0x01;
const TCP_PSH: u8 = 0x08;
const TCP_CWR: u8 = 0x80;

/// Splits one frame read from an offload TUN (virtio-net header + packet) into MTU packets with
/// complete checksums, written to `out[i][offset..offset + sizes[i]]`; returns how many. The
/// reference form of [`Frame`]'s segments (the lab writes runs of them instead), checked against
/// tun-rs's own splitter in the tests. Malformed input is an [`Unsplittable`] error.
pub fn split_frame<B: AsRef<[u8]> + AsMut<[u8]>>(
    frame: &mut [u8],
    out: &mut [B],
    sizes: &mut [usize],
    offset: usize,
) -> Result<usize, Unsplittable> {
    if sizes.len() < out.len() {
        return Err(Unsplittable("fewer sizes than buffers".into()));
    }
    let room = out.iter().map(|b| b.as_ref().len()).min().unwrap_or(0);
    let f = Frame::parse(frame.to_vec(), frame.len(), room.saturating_sub(offset))
        .map_err(|(e, _)| e)?;
    if f.segments() > out.len() {
        return Err(Unsplittable("more segments than buffers".into()));
    }
    for i in 0..f.segments() {
        let mut seg = f.run_frame(i, i);
        complete_checksum(&mut seg)?;
        let p = &seg[VIRTIO_NET_HDR_LEN..];
        out[i].as_mut()[offset..offset + p.len()].copy_from_slice(p);
        sizes[i] = p.len();
    }
    Ok(f.segments())
}

/// Completes a frame's partial transport checksum in place (and clears `NEEDS_CSUM`).
fn complete_checksum(frame: &mut [u8]) -> Result<(), Unsplittable> {
    let mut hdr = VirtioNetHdr::decode(&frame[..VIRTIO_NET_HDR_LEN])
        .map_err(|e| Unsplittable(e.to_string()))?;
    if hdr.flags & NEEDS_CSUM == 0 {
        return Ok(());
    }
    let packet = &mut frame[VIRTIO_NET_HDR_LEN..];
    let (start, at) = (
        hdr.csum_start as usize,
        hdr.csum_start as usize + hdr.csum_offset as usize,
    );
    let initial = u16::from_be_bytes([packet[at], packet[at + 1]]);
    packet[at] = 0;
    packet[at + 1] = 0;
    let mut sum = !checksum(&packet[start..], initial as u64);
    if sum == 0 && hdr.csum_offset == 6 {
        // UDP sends a computed 0 as all ones (0 means "no checksum").
        sum = 0xffff;
    }
    packet[at..at + 2].copy_from_slice(&sum.to_be_bytes());
    hdr.flags &= !NEEDS_CSUM;
    hdr.encode(&mut frame[..VIRTIO_NET_HDR_LEN])
        .map_err(|e| Unsplittable(e.to_string()))?;
    Ok(())
}

/// What a [`FrameReader`] did: reads, the segments they gave, the frames it refused.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReadFigures {
    /// Reads that returned a packet, and the MTU packets they gave (a super-packet gives several).
    pub reads: u64,
    pub read_segments: u64,
    /// Frames that could not be split (malformed or unsupported): dropped and counted.
    pub dropped_unsplittable: u64,
    /// The last reason a frame could not be split.
    pub last_unsplittable: Option<String>,
}

/// A large read buffer: the longest frame a TUN can hand over — an IPv6 super-packet is a
/// 40-byte header plus a payload length of up to 65 535.
pub const LARGE: usize = VIRTIO_NET_HDR_LEN + 40 + 65_535;

/// What becomes of the bytes an offload lane reads: validated frames, in recycled buffers.
pub struct FrameReader {
    /// Recycled read buffers: large ones (a whole super-packet) and small ones (a single packet
    /// is copied into one, so a queued ACK does not hold 64 kB).
    large: Vec<Vec<u8>>,
    small: Vec<Vec<u8>>,
    /// The longest packet a frame may carry (the devices' MTU).
    max_packet: usize,
    /// The read half of the figures (reads, segments, unsplittable drops).
    figures: ReadFigures,
}

impl FrameReader {
    /// `max_packet`: the devices' MTU.
    pub fn new(max_packet: usize) -> FrameReader {
        FrameReader {
            large: Vec::new(),
            small: Vec::new(),
            max_packet,
            figures: ReadFigures::default(),
        }
    }

    /// A buffer to read the next frame into ([`LARGE`] bytes).
    pub fn buffer(&mut self) -> Vec<u8> {
        self.large.pop().unwrap_or_else(|| vec![0; LARGE])
    }

    /// Takes back a buffer a read did not fill.
    pub fn unused(&mut self, buf: Vec<u8>) {
        self.large.push(buf);
    }

    /// Reads, segments and drops so far.
    pub fn figures(&self) -> &ReadFigures {
        &self.figures
    }

    /// What the lab's offload read does with `buf[..n]` once read: validated into a frame (a single
    /// packet, or a one-segment GSO frame, is copied into a small buffer and the large one kept),
    /// or dropped and counted. Separate from the read so that it is tested without a device.
    pub fn accept(&mut self, buf: Vec<u8>, n: usize) -> Option<Frame> {
        self.figures.reads += 1;
        match Frame::parse(buf, n, self.max_packet) {
            Ok(frame) if frame.segments() > 1 => {
                self.figures.read_segments += frame.segments() as u64;
                Some(frame)
            }
            Ok(frame) => {
                // One packet: into a small buffer, the large one read again. A GSO frame of one
                // segment keeps its layout: its transport checksum is still partial, and the
                // write must ask the kernel to complete it (`NEEDS_CSUM`), not send it as is.
                let mut small = self
                    .small
                    .pop()
                    .unwrap_or_else(|| Vec::with_capacity(PACKET_OFFSET + self.max_packet));
                small.clear();
                small.extend_from_slice(&frame.bytes()[..n]);
                let (len, gso) = (frame.len, frame.gso);
                self.large.push(frame.into_buffer());
                self.figures.read_segments += 1;
                Some(Frame {
                    buf: small,
                    len,
                    gso,
                })
            }
            // Read but not splittable: dropped, counted, never forwarded half-parsed.
            Err((Unsplittable(why), buf)) => {
                self.large.push(buf);
                self.figures.dropped_unsplittable += 1;
                self.figures.last_unsplittable = Some(why);
                None
            }
        }
    }

    /// Takes back a frame whose segments have all left.
    pub fn recycle(&mut self, frame: Frame) {
        let buf = frame.into_buffer();
        if buf.capacity() >= LARGE {
            if self.large.len() < POOL_LIMIT {
                self.large.push(buf);
            }
        } else if self.small.len() < POOL_LIMIT * 16 {
            self.small.push(buf);
        }
    }
}

/// Where the run of consecutive segments of one frame that starts at `batch[k]` ends (exclusive).
pub fn run_end(batch: &[(&Frame, usize)], k: usize) -> usize {
    let frame = batch[k].0;
    let mut end = k + 1;
    while end < batch.len()
        && std::ptr::eq(batch[end].0, frame)
        && batch[end].1 == batch[end - 1].1 + 1
    {
        end += 1;
    }
    end
}

/// Large buffers kept for reuse (64 kB each; a 1 Gbit/s, 10 ms queue holds ~30 super-packets).
const POOL_LIMIT: usize = 256;

#[cfg(test)]
mod tests {
    use super::*;

    /// An IPv4 header (ID 7, DF, TTL 64) with a valid checksum.
    fn ipv4_header(total: usize, proto: u8, src: [u8; 4], dst: [u8; 4]) -> Vec<u8> {
        let mut ip = vec![0u8; 20];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        ip[4..6].copy_from_slice(&7u16.to_be_bytes());
        ip[6] = 0x40; // DF
        ip[8] = 64;
        ip[9] = proto;
        ip[12..16].copy_from_slice(&src);
        ip[16..20].copy_from_slice(&dst);
        let c = !checksum(&ip, 0);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        ip
    }

    /// An IPv4/TCP super-packet as the kernel hands it over with TSO: one IP/TCP header, then
    /// `payload`; the virtio header asks for `mss`-byte segments with a partial checksum.
    pub(crate) fn tso_frame(payload: &[u8], mss: u16, seq: u32, src_port: u16) -> Vec<u8> {
        let total = 20 + 20 + payload.len();
        let mut f = vec![0u8; VIRTIO_NET_HDR_LEN];
        let hdr = VirtioNetHdr {
            flags: NEEDS_CSUM,
            gso_type: VIRTIO_NET_HDR_GSO_TCPV4,
            hdr_len: 40,
            gso_size: mss,
            csum_start: 20,
            csum_offset: 16,
        };
        hdr.encode(&mut f).unwrap();
        let ip = ipv4_header(total.min(65535), 6, [100, 64, 0, 2], [100, 64, 0, 1]);
        let mut tcp = vec![0u8; 20];
        tcp[0..2].copy_from_slice(&src_port.to_be_bytes());
        tcp[2..4].copy_from_slice(&40000u16.to_be_bytes());
        tcp[4..8].copy_from_slice(&seq.to_be_bytes());
        tcp[8..12].copy_from_slice(&1u32.to_be_bytes());
        tcp[12] = 5 << 4;
        tcp[13] = 0x18; // ACK | PSH
        tcp[14..16].copy_from_slice(&512u16.to_be_bytes());
        f.extend_from_slice(&ip);
        f.extend_from_slice(&tcp);
        f.extend_from_slice(payload);
        f
    }

    fn buffers(n: usize) -> (Vec<Vec<u8>>, Vec<usize>) {
        (
            (0..n).map(|_| vec![0u8; PACKET_OFFSET + 1600]).collect(),
            vec![0; n],
        )
    }

    /// The one's-complement sum of a TCP/IPv4 segment with its pseudo-header (0 when valid).
    fn tcp_checksum_ok(p: &[u8]) -> bool {
        let ihl = (p[0] & 0x0f) as usize * 4;
        let tcp_len = p.len() - ihl;
        let mut pseudo = Vec::new();
        pseudo.extend_from_slice(&p[12..20]);
        pseudo.extend_from_slice(&[0, 6]);
        pseudo.extend_from_slice(&(tcp_len as u16).to_be_bytes());
        let initial = checksum_no_fold(&pseudo, 0);
        checksum(&p[ihl..], initial) == 0xffff
    }

    #[test]
    fn a_tso_frame_splits_into_mss_segments_with_valid_headers() {
        let payload: Vec<u8> = (0..4000u32).map(|i| (i * 7 % 251) as u8).collect();
        let mut frame = tso_frame(&payload, 1448, 1_000, 443);
        let (mut out, mut sizes) = buffers(8);
        let n = split_frame(&mut frame, &mut out, &mut sizes, PACKET_OFFSET).unwrap();
        assert_eq!(n, 3); // 1448 + 1448 + 1104
        let mut joined = Vec::new();
        let mut seq = 1_000u32;
        for i in 0..n {
            let p = &out[i][PACKET_OFFSET..PACKET_OFFSET + sizes[i]];
            assert_eq!(
                u16::from_be_bytes([p[2], p[3]]) as usize,
                p.len(),
                "IP total length"
            );
            assert_eq!(checksum(&p[..20], 0), 0xffff, "IPv4 header checksum");
            assert!(tcp_checksum_ok(p), "TCP checksum of segment {i}");
            assert_eq!(u32::from_be_bytes([p[24], p[25], p[26], p[27]]), seq);
            // PSH only on the last segment.
            assert_eq!(p[33] & 0x08 != 0, i == n - 1, "PSH of segment {i}");
            seq += (p.len() - 40) as u32;
            joined.extend_from_slice(&p[40..]);
        }
        assert_eq!(joined, payload);
    }

    /// Splits `frame` with [`split_frame`] into whole packets.
    /// An IPv4 or IPv6 UDP frame (USO when `gso_size` > 0, else one datagram with a partial
    /// checksum), `payload` after an 8-byte UDP header.
    fn udp_frame(payload: &[u8], gso_size: u16, v6: bool) -> Vec<u8> {
        let ip_len = if v6 { 40 } else { 20 };
        let mut raw = vec![0u8; VIRTIO_NET_HDR_LEN];
        VirtioNetHdr {
            flags: NEEDS_CSUM,
            gso_type: if gso_size > 0 {
                VIRTIO_NET_HDR_GSO_UDP_L4
            } else {
                GSO_NONE
            },
            hdr_len: (ip_len + 8) as u16,
            gso_size,
            csum_start: ip_len as u16,
            csum_offset: 6,
        }
        .encode(&mut raw)
        .unwrap();
        let udp_len = 8 + payload.len();
        if v6 {
            let mut ip = vec![0u8; 40];
            ip[0] = 0x60;
            ip[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
            ip[6] = 17;
            ip[7] = 64;
            ip[8..24].copy_from_slice(&[0xfd, 0, 0x71, 0xab, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
            ip[24..40].copy_from_slice(&[0xfd, 0, 0x71, 0xab, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
            raw.extend_from_slice(&ip);
        } else {
            raw.extend_from_slice(&ipv4_header(
                20 + udp_len,
                17,
                [100, 64, 0, 1],
                [100, 64, 0, 2],
            ));
        }
        raw.extend_from_slice(&[0x11, 0x5c, 0x01, 0xbb]);
        raw.extend_from_slice(&((udp_len.min(65535)) as u16).to_be_bytes());
        // The kernel leaves the pseudo-header's sum in the checksum field (partial checksum).
        let off = raw.len() - VIRTIO_NET_HDR_LEN;
        let pkt = &raw[VIRTIO_NET_HDR_LEN..];
        let (src, dst) = if v6 {
            (&pkt[8..24], &pkt[24..40])
        } else {
            (&pkt[12..16], &pkt[16..20])
        };
        let pseudo = checksum_no_fold(dst, checksum_no_fold(src, 0));
        let trailer = [0, 17, (udp_len >> 8) as u8, udp_len as u8];
        let partial = checksum(&[], checksum_no_fold(&trailer, pseudo));
        let _ = off;
        raw.extend_from_slice(&partial.to_be_bytes());
        raw.extend_from_slice(payload);
        raw
    }

    /// What the receiving kernel does with a written frame: completes a partial checksum
    /// (`NEEDS_CSUM`), splits a GSO packet; the packets that result.
    fn as_received(frame: &[u8]) -> Vec<Vec<u8>> {
        let mut f = frame.to_vec();
        let hdr = VirtioNetHdr::decode(&f[..VIRTIO_NET_HDR_LEN]).unwrap();
        if hdr.gso_type == GSO_NONE {
            complete_checksum(&mut f).unwrap();
            return vec![f[VIRTIO_NET_HDR_LEN..].to_vec()];
        }
        split(&f)
    }

    /// Whether a received IPv4/IPv6 TCP or UDP packet's transport checksum is valid (and, for
    /// UDP, not the "no checksum" 0).
    fn transport_checksum_ok(p: &[u8]) -> bool {
        let v6 = p[0] >> 4 == 6;
        let (start, proto, src, dst) = if v6 {
            (40, p[6], &p[8..24], &p[24..40])
        } else {
            ((p[0] & 0x0f) as usize * 4, p[9], &p[12..16], &p[16..20])
        };
        let len = p.len() - start;
        if proto == 17 && p[start + 6] == 0 && p[start + 7] == 0 {
            return false;
        }
        let pseudo = checksum_no_fold(dst, checksum_no_fold(src, 0));
        let trailer = [0, proto, (len >> 8) as u8, len as u8];
        checksum(&p[start..], checksum_no_fold(&trailer, pseudo)) == 0xffff
    }

    /// Reads `raw` as a lane does ([`FrameReader::accept`] on a read buffer) and writes each
    /// segment on its own ([`Frame::run_frame`]): the packets the receiver gets.
    fn through_reader(reader: &mut FrameReader, raw: &[u8]) -> Option<Vec<Vec<u8>>> {
        let mut buf = reader.buffer();
        buf[..raw.len()].copy_from_slice(raw);
        let frame = reader.accept(buf, raw.len())?;
        let out = (0..frame.segments())
            .flat_map(|i| as_received(&frame.run_frame(i, i)))
            .collect();
        reader.recycle(frame);
        Some(out)
    }

    #[test]
    fn a_one_segment_gso_frame_is_written_with_its_checksum_completed() {
        let mut reader = FrameReader::new(1500);
        // TSO with a payload smaller than the MSS: one segment, checksum still partial.
        let raw = tso_frame(&[7u8; 300], 1448, 1000, 5000);
        let got = through_reader(&mut reader, &raw).unwrap();
        assert_eq!(got.len(), 1);
        assert!(
            tcp_checksum_ok(&got[0]),
            "single-segment TSO frame: bad TCP checksum"
        );
        // USO of one datagram, IPv4 and IPv6.
        for v6 in [false, true] {
            let raw = udp_frame(&[3u8; 500], 1200, v6);
            let got = through_reader(&mut reader, &raw).unwrap();
            assert_eq!(got.len(), 1);
            assert!(
                transport_checksum_ok(&got[0]),
                "single-datagram USO (v6 {v6})"
            );
        }
    }

    #[test]
    fn a_udp_checksum_that_completes_to_zero_is_sent_as_all_ones() {
        // Find a payload whose UDP checksum computes to 0: vary two bytes until it does.
        let mut reader = FrameReader::new(1500);
        let mut found = 0;
        for x in 0..=u16::MAX {
            let mut payload = vec![0x5au8; 64];
            payload[0..2].copy_from_slice(&x.to_be_bytes());
            let raw = udp_frame(&payload, 0, false);
            let mut check = raw.clone();
            complete_checksum_raw(&mut check);
            if check[VIRTIO_NET_HDR_LEN + 26..VIRTIO_NET_HDR_LEN + 28] != [0, 0] {
                continue;
            }
            found += 1;
            let got = through_reader(&mut reader, &raw).unwrap();
            assert_eq!(
                &got[0][26..28],
                &[0xff, 0xff],
                "a computed 0 must go out as 0xFFFF"
            );
            assert!(transport_checksum_ok(&got[0]));
        }
        assert!(
            found > 0,
            "no payload gave a zero checksum: the test checks nothing"
        );
    }

    /// The checksum a plain completion (no 0 → 0xFFFF rule) gives: to find the zero case.
    fn complete_checksum_raw(frame: &mut [u8]) {
        let hdr = VirtioNetHdr::decode(&frame[..VIRTIO_NET_HDR_LEN]).unwrap();
        let p = &mut frame[VIRTIO_NET_HDR_LEN..];
        let at = hdr.csum_start as usize + hdr.csum_offset as usize;
        let initial = u16::from_be_bytes([p[at], p[at + 1]]);
        p[at] = 0;
        p[at + 1] = 0;
        let sum = !checksum(&p[hdr.csum_start as usize..], initial as u64);
        p[at..at + 2].copy_from_slice(&sum.to_be_bytes());
    }

    #[test]
    fn the_largest_ipv6_super_packet_fits_a_read_buffer() {
        // 65 535 bytes of IPv6 payload (UDP header + 65 527 bytes) behind a 40-byte header.
        let payload = vec![1u8; 65_535 - 8];
        let raw = udp_frame(&payload, 1232, true);
        assert_eq!(raw.len(), LARGE);
        let mut reader = FrameReader::new(1280);
        let got = through_reader(&mut reader, &raw).expect("the largest IPv6 frame is accepted");
        assert_eq!(got.len(), payload.len().div_ceil(1232));
        assert!(
            got.iter()
                .all(|p| transport_checksum_ok(p) && p.len() <= 1280)
        );
        assert_eq!(reader.figures().dropped_unsplittable, 0);
    }

    #[test]
    fn random_frames_through_the_reader_give_valid_packets_or_counted_drops() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut reader = FrameReader::new(1500);
        let (mut accepted, mut single) = (0, 0);
        for case in 0..3_000 {
            let len = 1 + rng.below(9_000) as usize;
            let payload: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            let raw = match rng.below(3) {
                0 => tso_frame(
                    &payload,
                    500 + rng.below(948) as u16,
                    rng.next() as u32,
                    443,
                ),
                1 => udp_frame(&payload[..len.min(60_000)], 1200, rng.below(2) == 1),
                _ => udp_frame(&payload[..len.min(1400)], 0, rng.below(2) == 1),
            };
            let before = reader.figures().dropped_unsplittable;
            match through_reader(&mut reader, &raw) {
                Some(packets) => {
                    accepted += 1;
                    single += usize::from(packets.len() == 1);
                    for p in &packets {
                        assert!(p.len() <= 1500, "case {case}: {} bytes", p.len());
                        assert!(transport_checksum_ok(p), "case {case}: bad checksum");
                    }
                    let carried: usize = packets
                        .iter()
                        .map(|p| p.len() - if p[0] >> 4 == 6 { 40 } else { 20 })
                        .map(|l| l - if p_is_tcp(&raw) { 20 } else { 8 })
                        .sum();
                    let sent =
                        raw.len() - VIRTIO_NET_HDR_LEN - if p_is_tcp(&raw) { 40 } else { 28 };
                    let sent = sent
                        - if raw[VIRTIO_NET_HDR_LEN] >> 4 == 6 {
                            20
                        } else {
                            0
                        };
                    assert_eq!(carried, sent, "case {case}: payload bytes carried");
                }
                None => assert_eq!(reader.figures().dropped_unsplittable, before + 1),
            }
        }
        assert!(
            accepted > 2_500 && single > 300,
            "{accepted} accepted, {single} single"
        );
    }

    fn p_is_tcp(raw: &[u8]) -> bool {
        let p = &raw[VIRTIO_NET_HDR_LEN..];
        if p[0] >> 4 == 6 { p[6] == 6 } else { p[9] == 6 }
    }

    fn split(frame: &[u8]) -> Vec<Vec<u8>> {
        let (mut out, mut sizes) = buffers(128);
        let n = split_frame(&mut frame.to_vec(), &mut out, &mut sizes, PACKET_OFFSET).unwrap();
        (0..n)
            .map(|i| out[i][PACKET_OFFSET..PACKET_OFFSET + sizes[i]].to_vec())
            .collect()
    }

    fn parsed(frame: &[u8]) -> Frame {
        Frame::parse(frame.to_vec(), frame.len(), 1500)
            .map_err(|(e, _)| e)
            .unwrap()
    }

    #[test]
    fn a_run_of_segments_is_one_gso_packet_that_splits_back_into_them() {
        // 5 segments, the last short, PSH set on the super-packet.
        let payload: Vec<u8> = (0..6_000u32).map(|i| (i % 253) as u8).collect();
        let raw = tso_frame(&payload, 1448, 77_000, 443);
        let frame = parsed(&raw);
        assert_eq!(frame.segments(), 5);
        let segments = split(&raw);
        for (first, last) in [(0, 4), (0, 1), (1, 3), (2, 2), (3, 4), (4, 4)] {
            let run = frame.run_frame(first, last);
            let hdr = VirtioNetHdr::decode(&run[..VIRTIO_NET_HDR_LEN]).unwrap();
            assert_eq!(hdr.flags, NEEDS_CSUM, "run {first}..={last}");
            if last > first {
                assert_eq!(hdr.gso_type, VIRTIO_NET_HDR_GSO_TCPV4);
                assert_eq!(hdr.gso_size, 1448);
            } else {
                assert_eq!(hdr.gso_type, GSO_NONE);
            }
            // What the receiving kernel would make of it: exactly those segments, byte for byte
            // (headers, IDs, sequence numbers, flags, checksums).
            assert_eq!(
                split(&run),
                segments[first..=last].to_vec(),
                "run {first}..={last}"
            );
        }
    }

    #[test]
    fn segments_match_the_kernels_rules_as_tun_rs_implements_them() {
        let mut rng = Rng(42);
        for case in 0..2_000 {
            let payload: Vec<u8> = (0..1 + rng.below(20_000))
                .map(|_| rng.next() as u8)
                .collect();
            let mss = 200 + rng.below(1_260) as u16;
            let mut raw = tso_frame(&payload, mss, rng.next() as u32, rng.next() as u16);
            // Random TCP flags (FIN, PSH, CWR, ...) but ACK, as a sender's data carries.
            raw[VIRTIO_NET_HDR_LEN + 33] = (rng.next() as u8 & !0x06) | 0x10;
            let ours = split(&raw);
            // tun-rs is the reference (a dev-dependency only): its own reading of the header.
            let hdr = tun_rs::VirtioNetHdr::decode(&raw[..VIRTIO_NET_HDR_LEN]).unwrap();
            let (mut out, mut sizes) = buffers(128);
            let mut theirs_in = raw[VIRTIO_NET_HDR_LEN..].to_vec();
            let n = tun_rs::gso_split(&mut theirs_in, hdr, &mut out, &mut sizes, 0, false)
                .unwrap_or_else(|e| panic!("case {case}: tun-rs refused: {e}"));
            let theirs: Vec<Vec<u8>> = (0..n).map(|i| out[i][..sizes[i]].to_vec()).collect();
            assert_eq!(ours, theirs, "case {case}");
        }
    }

    #[test]
    fn a_udp_super_packet_splits_into_datagrams_and_runs_split_back() {
        // USO: one IPv4/UDP header, 3 datagrams of 1200 bytes and one of 100.
        let payload: Vec<u8> = (0..3_700u32).map(|i| (i % 241) as u8).collect();
        let mut raw = vec![0u8; VIRTIO_NET_HDR_LEN];
        VirtioNetHdr {
            flags: NEEDS_CSUM,
            gso_type: VIRTIO_NET_HDR_GSO_UDP_L4,
            hdr_len: 28,
            gso_size: 1200,
            csum_start: 20,
            csum_offset: 6,
        }
        .encode(&mut raw)
        .unwrap();
        let total = 28 + payload.len();
        let ip = ipv4_header(total, 17, [100, 64, 0, 1], [100, 64, 0, 2]);
        raw.extend_from_slice(&ip);
        raw.extend_from_slice(&[0x11, 0x5c, 0x01, 0xbb]);
        raw.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        raw.extend_from_slice(&[0, 0]);
        raw.extend_from_slice(&payload);
        let segments = split(&raw);
        assert_eq!(segments.len(), 4);
        for (i, d) in segments.iter().enumerate() {
            let udp_len = u16::from_be_bytes([d[24], d[25]]) as usize;
            assert_eq!(udp_len, d.len() - 20, "UDP length of datagram {i}");
            let mut pseudo = d[12..20].to_vec();
            pseudo.extend_from_slice(&[0, 17]);
            pseudo.extend_from_slice(&(udp_len as u16).to_be_bytes());
            let sum = checksum(&d[20..], checksum_no_fold(&pseudo, 0));
            assert_eq!(sum, 0xffff, "UDP checksum of datagram {i}");
        }
        let frame = parsed(&raw);
        for (first, last) in [(0, 3), (1, 2), (3, 3)] {
            assert_eq!(split(&frame.run_frame(first, last)), segments[first..=last]);
        }
    }

    #[test]
    fn runs_stop_at_gaps_and_never_cross_frames() {
        // Flow A (4 segments) and flow B (2), interleaved A0 A1 B0 A2 A3 B1, and A's third
        // segment lost in another batch: A0 A1 | B0 | A3 | B1.
        let fa = parsed(&tso_frame(&[1u8; 4 * 1448], 1448, 5_000, 443));
        let fb = parsed(&tso_frame(&[2u8; 2 * 1448], 1448, 9_000, 444));
        let batch = [(&fa, 0), (&fa, 1), (&fb, 0), (&fa, 3), (&fb, 1)];
        assert_eq!(
            runs(&batch),
            vec![(0, 0, 1), (2, 0, 0), (3, 3, 3), (4, 1, 1)],
            "A0-A1 coalesce; B0, A3 (after the gap) and B1 are their own"
        );
        let contiguous = [(&fa, 0), (&fa, 1), (&fa, 2), (&fa, 3), (&fb, 0), (&fb, 1)];
        assert_eq!(runs(&contiguous), vec![(0, 0, 3), (4, 0, 1)]);
    }

    /// The runs the lab's offload write makes of a batch: (batch position, first, last segment).
    fn runs(batch: &[(&Frame, usize)]) -> Vec<(usize, usize, usize)> {
        let mut out = Vec::new();
        let mut k = 0;
        while k < batch.len() {
            let end = run_end(batch, k);
            out.push((k, batch[k].1, batch[end - 1].1));
            k = end;
        }
        out
    }

    /// A small deterministic generator (xorshift64*), so failures reproduce.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n.max(1)
        }
    }

    /// Whatever a split returns must be whole IP packets: the IP header's length field says the
    /// segment's size, and an IPv4 header's checksum holds.
    fn assert_well_formed(out: &[Vec<u8>], sizes: &[usize], n: usize, case: &str) {
        for i in 0..n {
            let p = &out[i][PACKET_OFFSET..PACKET_OFFSET + sizes[i]];
            assert!(p.len() >= 20, "{case}: segment {i} of {} bytes", p.len());
            match p[0] >> 4 {
                4 => {
                    assert_eq!(u16::from_be_bytes([p[2], p[3]]) as usize, p.len(), "{case}");
                }
                6 => {
                    assert!(p.len() >= 40, "{case}");
                    assert_eq!(
                        u16::from_be_bytes([p[4], p[5]]) as usize + 40,
                        p.len(),
                        "{case}"
                    );
                }
                v => panic!("{case}: segment {i} has IP version {v}"),
            }
        }
    }

    #[test]
    fn random_and_malformed_frames_never_panic_and_never_pass_half_parsed() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let (mut out, mut sizes) = buffers(16);
        let mut split = 0;
        let mut refused = 0;
        for case in 0..20_000 {
            let payload_len = rng.below(6_000) as usize;
            let payload: Vec<u8> = (0..payload_len).map(|_| rng.next() as u8).collect();
            let mss = 1 + rng.below(1_600) as u16;
            let mut frame = tso_frame(&payload, mss, rng.next() as u32, rng.next() as u16);
            match case % 6 {
                // Random bytes anywhere, including the virtio header.
                0 => {
                    for _ in 0..1 + rng.below(8) {
                        let i = rng.below(frame.len() as u64) as usize;
                        frame[i] = rng.next() as u8;
                    }
                }
                // Truncated at any length.
                1 => frame.truncate(rng.below(frame.len() as u64 + 1) as usize),
                // A random virtio header on a valid packet.
                2 => {
                    for b in frame.iter_mut().take(VIRTIO_NET_HDR_LEN) {
                        *b = rng.next() as u8;
                    }
                }
                // Pure noise.
                3 => {
                    let len = rng.below(3_000) as usize;
                    frame = (0..len).map(|_| rng.next() as u8).collect();
                }
                // The IP version or header length byte changed.
                4 if frame.len() > VIRTIO_NET_HDR_LEN => {
                    frame[VIRTIO_NET_HDR_LEN] = rng.next() as u8
                }
                // Valid: must split.
                _ => {}
            }
            let name = format!("case {case}");
            match split_frame(&mut frame, &mut out, &mut sizes, PACKET_OFFSET) {
                Ok(n) => {
                    split += 1;
                    assert!(n >= 1 && n <= out.len(), "{name}");
                    assert_well_formed(&out, &sizes, n, &name);
                }
                Err(_) => refused += 1,
            }
        }
        // Both outcomes occur (a generator that only makes garbage would prove nothing).
        assert!(
            split > 3_000 && refused > 3_000,
            "split {split}, refused {refused}"
        );
    }

    #[test]
    fn flow_keys_of_random_packets_never_panic() {
        let mut rng = Rng(7);
        for _ in 0..50_000 {
            let len = rng.below(120) as usize;
            let mut p: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            if let Some(b) = p.first_mut() {
                // Mostly IPv4/IPv6, so the parsers get past the version check.
                *b = [0x45, 0x60, 0x46, *b][rng.below(4) as usize];
            }
            let _ = crate::FlowKey::of_packet(&p);
            let _ = crate::FlowKey::addresses_of_packet(&p);
        }
    }
}
