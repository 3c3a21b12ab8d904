//! The TUN I/O of one emulator lane when the lab's devices have offload (`IFF_VNET_HDR` with
//! TSO/USO): reads split the kernel's super-packets into MTU packets, writes coalesce a batch of
//! released packets into GSO packets per flow. The splitting and the coalescing rules are
//! tun-rs's (a port of wireguard-go's): a segment joins the packet before it only within one
//! flow, with a contiguous sequence number, the same flags and options and no larger size, and
//! every segment it hands back carries complete, recomputed checksums. The link model between
//! them stays per packet: queue, loss, counters and the packet log see MTU packets.

use std::io::ErrorKind;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;

use serde::Serialize;
use tun_rs::{
    GROTable, IDEAL_BATCH_SIZE, SyncDevice, VIRTIO_NET_HDR_GSO_TCPV4, VIRTIO_NET_HDR_GSO_TCPV6,
    VIRTIO_NET_HDR_GSO_UDP_L4, VIRTIO_NET_HDR_LEN, VirtioNetHdr,
};

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

/// Splits one frame read from an offload TUN (virtio-net header + packet) into MTU packets,
/// written to `out[i][offset..offset + sizes[i]]`; returns how many. A frame without GSO is one
/// packet, its checksum completed when the kernel left it partial. Every field the split relies
/// on is checked first (this mirrors tun-rs's own `handle_virtio_read`, which is not public, and
/// goes further: lengths, offsets and the IP header are validated before any index is used), so
/// no input — random, truncated or malformed — panics or is forwarded half-parsed: it is an
/// [`Unsplittable`] error, and the caller drops and counts it.
pub fn split_frame<B: AsRef<[u8]> + AsMut<[u8]>>(
    frame: &mut [u8],
    out: &mut [B],
    sizes: &mut [usize],
    offset: usize,
) -> Result<usize, Unsplittable> {
    let bad = |why: &str| Unsplittable(why.to_string());
    if frame.len() <= VIRTIO_NET_HDR_LEN {
        return Err(bad("frame shorter than its virtio-net header"));
    }
    if out.is_empty() || sizes.len() < out.len() {
        return Err(bad("no output buffers"));
    }
    let mut hdr =
        VirtioNetHdr::decode(&frame[..VIRTIO_NET_HDR_LEN]).map_err(|e| bad(&e.to_string()))?;
    let packet = &mut frame[VIRTIO_NET_HDR_LEN..];
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
        if hdr.flags & NEEDS_CSUM != 0 {
            let at = hdr.csum_start as usize + hdr.csum_offset as usize;
            if (hdr.csum_start as usize) < min_ip || at + 2 > len {
                return Err(bad("checksum field outside the packet"));
            }
            let initial = u16::from_be_bytes([packet[at], packet[at + 1]]);
            packet[at] = 0;
            packet[at + 1] = 0;
            let sum = !tun_rs::checksum(&packet[hdr.csum_start as usize..], initial as u64);
            packet[at..at + 2].copy_from_slice(&sum.to_be_bytes());
        }
        let dst = out[0].as_mut();
        if dst.len() < offset + len {
            return Err(bad("packet larger than a buffer"));
        }
        dst[offset..offset + len].copy_from_slice(packet);
        sizes[0] = len;
        return Ok(1);
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
    // Never trust hdr_len (the kernel may give the whole first packet's length): derive it from
    // the transport header, as the split needs.
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
    hdr.hdr_len = (start + transport_len) as u16;
    if len < hdr.hdr_len as usize {
        return Err(bad("headers longer than the packet"));
    }
    let expected_offset = if tcp { 16 } else { 6 };
    if hdr.csum_offset != expected_offset {
        return Err(bad("checksum offset does not match the transport protocol"));
    }
    // The split writes segments of hdr_len + gso_size bytes: each must fit an output buffer, and
    // there must be enough buffers.
    let payload = len - hdr.hdr_len as usize;
    if payload == 0 {
        return Err(bad("GSO frame without payload"));
    }
    let segments = payload.div_ceil(hdr.gso_size as usize).max(1);
    if segments > out.len() {
        return Err(bad("more segments than buffers"));
    }
    let seg_len = hdr.hdr_len as usize + hdr.gso_size as usize;
    if out
        .iter()
        .any(|b| b.as_ref().len() < offset + seg_len.min(len))
    {
        return Err(bad("segment larger than a buffer"));
    }
    tun_rs::gso_split(packet, hdr, out, sizes, offset, is_v6).map_err(|e| bad(&e.to_string()))
}

/// Fault injection for tests of the fallback: with this variable set, the first coalesced write
/// of every offload lane is treated as refused by the kernel (the fallback reason says so).
pub const FAULT_GSO_REFUSED_ENV: &str = "QUICLAB_FAULT_GSO_REFUSED";

/// What one direction's offload did, for the fidelity report.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct OffloadFigures {
    /// Coalescing window in µs (0: each segment written on its own).
    pub window_us: f64,
    /// Reads that returned a packet, and the MTU packets they gave (a super-packet gives several).
    pub reads: u64,
    pub read_segments: u64,
    pub segments_per_read: f64,
    /// Super-packets the kernel handed over that could not be split (malformed or unsupported):
    /// dropped and counted, never forwarded.
    pub dropped_unsplittable: u64,
    /// The last reason a frame could not be split.
    pub last_unsplittable: Option<String>,
    /// Batches written, and the packets in them (a batch becomes one write per flow and run of
    /// contiguous segments).
    pub batches: u64,
    pub batch_segments: u64,
    pub segments_per_batch: f64,
    /// Writes the receiving kernel counted (its TUN's received packets; a coalesced GSO packet is
    /// one), and delivered packets per write.
    pub kernel_writes: Option<u64>,
    pub segments_per_write: Option<f64>,
    /// Why the lane fell back to writing each packet on its own, if it did (the kernel refused a
    /// coalesced write).
    pub fallback: Option<String>,
}

/// A lane's offload I/O.
pub struct OffloadIo {
    ingress: Arc<SyncDevice>,
    egress: Arc<SyncDevice>,
    gro: GROTable,
    /// The raw read (header + super-packet).
    read_buf: Vec<u8>,
    /// Where `recv_multiple` puts the segments.
    segments: Vec<Vec<u8>>,
    sizes: Vec<usize>,
    /// Recycled packet buffers (`buffer_len` bytes each).
    pool: Vec<Vec<u8>>,
    buffer_len: usize,
    window_ns: u64,
    /// Each packet written on its own (window 0, or after a refused coalesced write).
    plain: bool,
    /// Fault injection ([`FAULT_GSO_REFUSED_ENV`]): the next coalesced write is refused.
    refuse_next: bool,
    figures: OffloadFigures,
}

impl OffloadIo {
    /// `mtu`: the devices' MTU (every segment fits a buffer of `PACKET_OFFSET + mtu`).
    pub fn new(
        ingress: Arc<SyncDevice>,
        egress: Arc<SyncDevice>,
        mtu: u16,
        window_ns: u64,
    ) -> OffloadIo {
        // A little room beyond the MTU: a kernel's non-GSO packet is at most the MTU.
        let buffer_len = PACKET_OFFSET + mtu as usize + 64;
        OffloadIo {
            ingress,
            egress,
            gro: GROTable::new(),
            read_buf: vec![0; VIRTIO_NET_HDR_LEN + 65_535],
            segments: (0..IDEAL_BATCH_SIZE).map(|_| vec![0; buffer_len]).collect(),
            sizes: vec![0; IDEAL_BATCH_SIZE],
            pool: Vec::new(),
            buffer_len,
            window_ns,
            plain: window_ns == 0,
            refuse_next: std::env::var_os(FAULT_GSO_REFUSED_ENV).is_some(),
            figures: OffloadFigures {
                window_us: window_ns as f64 / 1e3,
                ..Default::default()
            },
        }
    }

    pub fn ingress_fd(&self) -> RawFd {
        self.ingress.as_raw_fd()
    }

    /// The coalescing window in ns (0 once the lane writes each packet on its own).
    pub fn window_ns(&self) -> u64 {
        if self.plain { 0 } else { self.window_ns }
    }

    /// Reads one frame from the ingress device and appends its MTU packets to `out` as (buffer,
    /// length), each packet at [`PACKET_OFFSET`]. Returns false when nothing was waiting.
    pub fn read(&mut self, out: &mut Vec<(Vec<u8>, usize)>) -> std::io::Result<bool> {
        // SAFETY: reading into our own buffer of its length.
        let n = unsafe {
            libc::read(
                self.ingress.as_raw_fd(),
                self.read_buf.as_mut_ptr() as *mut libc::c_void,
                self.read_buf.len(),
            )
        };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            return if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) {
                Ok(false)
            } else {
                Err(e)
            };
        }
        self.figures.reads += 1;
        let frame = &mut self.read_buf[..n as usize];
        match split_frame(frame, &mut self.segments, &mut self.sizes, PACKET_OFFSET) {
            Ok(k) => {
                self.figures.read_segments += k as u64;
                for i in 0..k {
                    let fresh = self.pool.pop().unwrap_or_else(|| vec![0; self.buffer_len]);
                    let buf = std::mem::replace(&mut self.segments[i], fresh);
                    out.push((buf, self.sizes[i]));
                }
            }
            // Read but not splittable: dropped, counted, never forwarded half-parsed.
            Err(Unsplittable(why)) => {
                self.figures.dropped_unsplittable += 1;
                self.figures.last_unsplittable = Some(why);
            }
        }
        Ok(true)
    }

    /// Writes `batch` (packets at [`PACKET_OFFSET`], each buffer cut to its packet's end):
    /// coalesced per flow, or each on its own once the lane is plain. `written[i]` says whether
    /// packet `i` reached the kernel. A refused coalesced write switches the lane to plain writes
    /// for good; the batch it carried counts as not written.
    pub fn write(&mut self, batch: &mut [Vec<u8>], written: &mut Vec<bool>) {
        written.clear();
        self.figures.batches += 1;
        self.figures.batch_segments += batch.len() as u64;
        if !self.plain {
            // tun-rs coalesces into a flow's first buffer only when that buffer already has the
            // capacity (it never reallocates): give every buffer room for the whole batch.
            if batch.len() > 1 {
                let total: usize = batch.iter().map(|b| b.len() - PACKET_OFFSET).sum();
                let need = 2 * PACKET_OFFSET + total.min(65_535);
                for b in batch.iter_mut() {
                    if b.capacity() < need {
                        b.reserve(need - b.len());
                    }
                }
            }
            let result = if std::mem::take(&mut self.refuse_next) {
                Err(std::io::Error::other(format!(
                    "fault injection: {FAULT_GSO_REFUSED_ENV}"
                )))
            } else {
                self.egress
                    .send_multiple(&mut self.gro, batch, PACKET_OFFSET)
            };
            match result {
                Ok(_) => written.resize(batch.len(), true),
                Err(e) => {
                    self.plain = true;
                    self.figures.fallback = Some(format!(
                        "the kernel refused a coalesced write ({e}); every packet is written on its own from then on"
                    ));
                    written.resize(batch.len(), false);
                }
            }
            return;
        }
        let fd = self.egress.as_raw_fd();
        for buf in batch.iter_mut() {
            // A zeroed header: no GSO, checksums complete (the split recomputed them).
            buf[..PACKET_OFFSET].fill(0);
            // SAFETY: writing initialised bytes of our own buffer to the TUN fd.
            let n = unsafe { libc::write(fd, buf.as_ptr() as *const libc::c_void, buf.len()) };
            written.push(n >= 0);
        }
    }

    /// Takes back a buffer of this lane (restored to full length for the next read).
    pub fn recycle(&mut self, mut buf: Vec<u8>) {
        // Buffers keep the capacity coalescing gave them (at most a 64 kB super-packet).
        if buf.capacity() > 2 * PACKET_OFFSET + 65_535 + self.buffer_len {
            return;
        }
        buf.resize(self.buffer_len, 0);
        self.pool.push(buf);
    }

    pub fn figures(&self) -> OffloadFigures {
        let mut f = self.figures.clone();
        let ratio = |a: u64, b: u64| if b > 0 { a as f64 / b as f64 } else { 0.0 };
        f.segments_per_read = ratio(f.read_segments, f.reads);
        f.segments_per_batch = ratio(f.batch_segments, f.batches);
        f
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let mut ip = vec![0u8; 20];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&(total.min(65535) as u16).to_be_bytes());
        ip[4..6].copy_from_slice(&7u16.to_be_bytes());
        ip[6] = 0x40; // DF
        ip[8] = 64;
        ip[9] = 6;
        ip[12..16].copy_from_slice(&[100, 64, 0, 2]);
        ip[16..20].copy_from_slice(&[100, 64, 0, 1]);
        let c = !tun_rs::checksum(&ip, 0);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
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
        let initial = tun_rs::checksum_no_fold(&pseudo, 0);
        tun_rs::checksum(&p[ihl..], initial) == 0xffff
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
            assert_eq!(
                tun_rs::checksum(&p[..20], 0),
                0xffff,
                "IPv4 header checksum"
            );
            assert!(tcp_checksum_ok(p), "TCP checksum of segment {i}");
            assert_eq!(u32::from_be_bytes([p[24], p[25], p[26], p[27]]), seq);
            // PSH only on the last segment.
            assert_eq!(p[33] & 0x08 != 0, i == n - 1, "PSH of segment {i}");
            seq += (p.len() - 40) as u32;
            joined.extend_from_slice(&p[40..]);
        }
        assert_eq!(joined, payload);
    }

    #[test]
    fn contiguous_segments_of_one_flow_coalesce_and_other_flows_do_not() {
        // Flow A split into 4 segments, then flow B's 2, interleaved A, B, A, A, B, A.
        let (mut a, mut sa) = buffers(8);
        let mut fa = tso_frame(&[1u8; 4 * 1448], 1448, 5_000, 443);
        assert_eq!(
            split_frame(&mut fa, &mut a, &mut sa, PACKET_OFFSET).unwrap(),
            4
        );
        let (mut b, mut sb) = buffers(8);
        let mut fb = tso_frame(&[2u8; 2 * 1448], 1448, 9_000, 444);
        assert_eq!(
            split_frame(&mut fb, &mut b, &mut sb, PACKET_OFFSET).unwrap(),
            2
        );
        let seg = |v: &Vec<Vec<u8>>, s: &[usize], i: usize| v[i][..PACKET_OFFSET + s[i]].to_vec();
        let mut batch = vec![
            seg(&a, &sa, 0),
            seg(&b, &sb, 0),
            seg(&a, &sa, 1),
            seg(&a, &sa, 2),
            seg(&b, &sb, 1),
            seg(&a, &sa, 3),
        ];
        for b in batch.iter_mut() {
            b.reserve(65_536);
        }
        let mut gro = GROTable::new();
        gro.apply_gro(&mut batch, PACKET_OFFSET, false).unwrap();
        // The first packet of each flow now carries the flow's whole payload as one GSO packet.
        let a_len = batch[0].len() - PACKET_OFFSET;
        let b_len = batch[1].len() - PACKET_OFFSET;
        assert_eq!(a_len, 40 + 4 * 1448, "flow A coalesced");
        assert_eq!(b_len, 40 + 2 * 1448, "flow B coalesced, apart from A");
        let ha = VirtioNetHdr::decode(&batch[0][..VIRTIO_NET_HDR_LEN]).unwrap();
        assert_eq!(ha.gso_type, VIRTIO_NET_HDR_GSO_TCPV4);
        assert_eq!(ha.gso_size, 1448);
        assert!(batch[0][PACKET_OFFSET + 40..].iter().all(|&x| x == 1));
        assert!(batch[1][PACKET_OFFSET + 40..].iter().all(|&x| x == 2));
    }

    #[test]
    fn a_gap_in_the_sequence_stops_coalescing() {
        let (mut a, mut sa) = buffers(8);
        let mut fa = tso_frame(&[3u8; 3 * 1448], 1448, 1, 443);
        split_frame(&mut fa, &mut a, &mut sa, PACKET_OFFSET).unwrap();
        // Segments 0 and 2: segment 1 (lost on the link) is missing.
        let mut batch = vec![
            a[0][..PACKET_OFFSET + sa[0]].to_vec(),
            a[2][..PACKET_OFFSET + sa[2]].to_vec(),
        ];
        for b in batch.iter_mut() {
            b.reserve(65_536);
        }
        GROTable::new()
            .apply_gro(&mut batch, PACKET_OFFSET, false)
            .unwrap();
        assert_eq!(
            batch[0].len(),
            PACKET_OFFSET + 40 + 1448,
            "not merged across the gap"
        );
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
            let _ = quiclab_link::FlowKey::of_packet(&p);
            let _ = quiclab_link::FlowKey::addresses_of_packet(&p);
        }
    }
}
