//! Decoding Linux `struct tcp_info` (the `getsockopt(IPPROTO_TCP, TCP_INFO)` answer).
//!
//! The I/O shell performs the syscall into a `[u8; TCP_INFO_MAX_LEN]` and hands us the prefix the
//! kernel filled. We decode by explicit byte offsets rather than by a `#[repr(C)]` mirror
//! struct, for two reasons: the kernel copies `min(optlen, sizeof(struct tcp_info))` bytes, so
//! older kernels return a *shorter* struct whose missing tail must read as "absent", not zero;
//! and reading named offsets needs no `unsafe`.
//!
//! Layout: `include/uapi/linux/tcp.h`. Offsets were checked with `offsetof` against the 6.x
//! header (which ends at `tcpi_snd_wnd`, 232 bytes) and the later additions follow the upstream
//! header. Fields are in native byte order. The first 104 bytes (through `tcpi_total_retrans`)
//! are present on every kernel that has `TCP_INFO` at all, so they are plain values; every field
//! appended later is an `Option`, `None` when the kernel's struct does not reach it.

use serde::Serialize;

use crate::ProtoError;

/// Buffer size to pass to `getsockopt(TCP_INFO)`. Covers the largest layout known (280 bytes,
/// with the AccECN counters of recent kernels) with headroom; the kernel copies only what it
/// has and reports that length, so a larger buffer costs nothing.
pub const TCP_INFO_MAX_LEN: usize = 512;

/// Length of the oldest layout we accept: everything up to and including `tcpi_total_retrans`.
pub const TCP_INFO_MIN_LEN: usize = 104;

/// Byte offsets of the `struct tcp_info` fields (see `include/uapi/linux/tcp.h`).
/// The comment on each later field is the kernel version that appended it.
mod off {
    pub const STATE: usize = 0;
    pub const CA_STATE: usize = 1;
    pub const RETRANSMITS: usize = 2;
    pub const PROBES: usize = 3;
    pub const BACKOFF: usize = 4;
    pub const OPTIONS: usize = 5;
    /// `tcpi_snd_wscale:4, tcpi_rcv_wscale:4`.
    pub const WSCALE: usize = 6;
    /// `tcpi_delivery_rate_app_limited:1, tcpi_fastopen_client_fail:2`.
    pub const APP_LIMITED_FO: usize = 7;
    pub const RTO: usize = 8;
    pub const ATO: usize = 12;
    pub const SND_MSS: usize = 16;
    pub const RCV_MSS: usize = 20;
    pub const UNACKED: usize = 24;
    pub const SACKED: usize = 28;
    pub const LOST: usize = 32;
    pub const RETRANS: usize = 36;
    pub const FACKETS: usize = 40;
    pub const LAST_DATA_SENT: usize = 44;
    pub const LAST_ACK_SENT: usize = 48;
    pub const LAST_DATA_RECV: usize = 52;
    pub const LAST_ACK_RECV: usize = 56;
    pub const PMTU: usize = 60;
    pub const RCV_SSTHRESH: usize = 64;
    pub const RTT: usize = 68;
    pub const RTTVAR: usize = 72;
    pub const SND_SSTHRESH: usize = 76;
    pub const SND_CWND: usize = 80;
    pub const ADVMSS: usize = 84;
    pub const REORDERING: usize = 88;
    pub const RCV_RTT: usize = 92;
    pub const RCV_SPACE: usize = 96;
    pub const TOTAL_RETRANS: usize = 100;
    pub const PACING_RATE: usize = 104; // 3.15
    pub const MAX_PACING_RATE: usize = 112; // 3.15
    pub const BYTES_ACKED: usize = 120; // 4.1
    pub const BYTES_RECEIVED: usize = 128; // 4.1
    pub const SEGS_OUT: usize = 136; // 4.2
    pub const SEGS_IN: usize = 140; // 4.2
    pub const NOTSENT_BYTES: usize = 144; // 4.6
    pub const MIN_RTT: usize = 148; // 4.6
    pub const DATA_SEGS_IN: usize = 152; // 4.6
    pub const DATA_SEGS_OUT: usize = 156; // 4.6
    pub const DELIVERY_RATE: usize = 160; // 4.9
    pub const BUSY_TIME: usize = 168; // 4.10
    pub const RWND_LIMITED: usize = 176; // 4.10
    pub const SNDBUF_LIMITED: usize = 184; // 4.10
    pub const DELIVERED: usize = 192; // 4.18
    pub const DELIVERED_CE: usize = 196; // 4.18
    pub const BYTES_SENT: usize = 200; // 4.19
    pub const BYTES_RETRANS: usize = 208; // 4.19
    pub const DSACK_DUPS: usize = 216; // 4.19
    pub const REORD_SEEN: usize = 220; // 4.19
    pub const RCV_OOOPACK: usize = 224; // 5.4
    pub const SND_WND: usize = 228; // 5.4
    pub const RCV_WND: usize = 232; // 6.2
    pub const REHASH: usize = 236; // 6.2
    pub const TOTAL_RTO: usize = 240; // 6.7 (u16)
    pub const TOTAL_RTO_RECOVERIES: usize = 242; // 6.7 (u16)
    pub const TOTAL_RTO_TIME: usize = 244; // 6.7
    pub const RECEIVED_CE: usize = 248; // AccECN
}

/// `tcpi_options` bits (`TCPI_OPT_*`).
pub const TCPI_OPT_TIMESTAMPS: u8 = 1;
/// SACK was negotiated.
pub const TCPI_OPT_SACK: u8 = 2;
/// Window scaling was negotiated.
pub const TCPI_OPT_WSCALE: u8 = 4;
/// ECN was negotiated.
pub const TCPI_OPT_ECN: u8 = 8;

/// A decoded `struct tcp_info`. Units follow the kernel: times named `_us` are microseconds,
/// `_ms` milliseconds; windows and thresholds named in packets are segments of `snd_mss`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TcpInfo {
    /// `TCP_ESTABLISHED` = 1, ... (see [`TcpInfo::state_name`]).
    pub state: u8,
    /// Congestion-avoidance state: 0 Open, 1 Disorder, 2 CWR, 3 Recovery, 4 Loss.
    pub ca_state: u8,
    /// Consecutive unrecovered RTO timeouts.
    pub retransmits: u8,
    /// Unanswered zero-window probes.
    pub probes: u8,
    /// RTO backoff exponent.
    pub backoff: u8,
    /// `TCPI_OPT_*` bits.
    pub options: u8,
    /// Send window scale shift.
    pub snd_wscale: u8,
    /// Receive window scale shift.
    pub rcv_wscale: u8,
    /// The last delivery-rate sample was application limited.
    pub delivery_rate_app_limited: bool,
    /// Why a TCP Fast Open client attempt failed (0 = no failure recorded).
    pub fastopen_client_fail: u8,
    /// Retransmission timeout (µs).
    pub rto_us: u32,
    /// Delayed-ACK timeout (µs).
    pub ato_us: u32,
    /// Sender MSS (bytes).
    pub snd_mss: u32,
    /// Receiver MSS estimate (bytes).
    pub rcv_mss: u32,
    /// Segments sent but not yet acknowledged.
    pub unacked: u32,
    /// Segments SACKed.
    pub sacked: u32,
    /// Segments considered lost.
    pub lost: u32,
    /// Segments currently retransmitted and in flight.
    pub retrans: u32,
    /// Unused by modern kernels (always 0); kept for layout fidelity.
    pub fackets: u32,
    /// Time since the last data segment was sent (ms).
    pub last_data_sent_ms: u32,
    /// Time since the last ACK was sent (ms); the kernel does not track it (0).
    pub last_ack_sent_ms: u32,
    /// Time since the last data segment was received (ms).
    pub last_data_recv_ms: u32,
    /// Time since the last ACK was received (ms).
    pub last_ack_recv_ms: u32,
    /// Path MTU (bytes).
    pub pmtu: u32,
    /// Receive slow-start threshold (bytes).
    pub rcv_ssthresh: u32,
    /// Smoothed RTT (µs).
    pub rtt_us: u32,
    /// RTT mean deviation (µs).
    pub rttvar_us: u32,
    /// Slow-start threshold (packets); `0x7fffffff` (infinity) until the first loss.
    pub snd_ssthresh: u32,
    /// Congestion window (packets).
    pub snd_cwnd: u32,
    /// Advertised MSS (bytes).
    pub advmss: u32,
    /// Reordering metric (packets).
    pub reordering: u32,
    /// Receiver-side RTT estimate (µs).
    pub rcv_rtt_us: u32,
    /// Receive buffer space estimate (bytes).
    pub rcv_space: u32,
    /// Total segments retransmitted over the connection's life.
    pub total_retrans: u32,
    /// Current pacing rate (bytes/s). Linux ≥ 3.15.
    pub pacing_rate: Option<u64>,
    /// `SO_MAX_PACING_RATE` (bytes/s; `u64::MAX` = unlimited). Linux ≥ 3.15.
    pub max_pacing_rate: Option<u64>,
    /// Bytes acknowledged by the peer. Linux ≥ 4.1.
    pub bytes_acked: Option<u64>,
    /// Bytes received. Linux ≥ 4.1.
    pub bytes_received: Option<u64>,
    /// Segments sent, including retransmissions and pure ACKs. Linux ≥ 4.2.
    pub segs_out: Option<u32>,
    /// Segments received. Linux ≥ 4.2.
    pub segs_in: Option<u32>,
    /// Bytes queued but not yet sent. Linux ≥ 4.6.
    pub notsent_bytes: Option<u32>,
    /// Minimum RTT observed (µs). Linux ≥ 4.6.
    pub min_rtt_us: Option<u32>,
    /// Data segments received. Linux ≥ 4.6.
    pub data_segs_in: Option<u32>,
    /// Data segments sent, including retransmissions. Linux ≥ 4.6.
    pub data_segs_out: Option<u32>,
    /// Most recent delivery-rate sample (bytes/s). Linux ≥ 4.9.
    pub delivery_rate: Option<u64>,
    /// Time busy sending data (µs). Linux ≥ 4.10.
    pub busy_time_us: Option<u64>,
    /// Time limited by the receive window (µs). Linux ≥ 4.10.
    pub rwnd_limited_us: Option<u64>,
    /// Time limited by the send buffer (µs). Linux ≥ 4.10.
    pub sndbuf_limited_us: Option<u64>,
    /// Segments delivered (acked or SACKed). Linux ≥ 4.18.
    pub delivered: Option<u32>,
    /// Segments delivered with an ECN CE echo. Linux ≥ 4.18.
    pub delivered_ce: Option<u32>,
    /// Data bytes sent, including retransmissions. Linux ≥ 4.19.
    pub bytes_sent: Option<u64>,
    /// Data bytes retransmitted. Linux ≥ 4.19.
    pub bytes_retrans: Option<u64>,
    /// Duplicate segments reported by DSACK. Linux ≥ 4.19.
    pub dsack_dups: Option<u32>,
    /// Reordering events seen. Linux ≥ 4.19.
    pub reord_seen: Option<u32>,
    /// Out-of-order packets received. Linux ≥ 5.4.
    pub rcv_ooopack: Option<u32>,
    /// Peer's advertised receive window after scaling (bytes). Linux ≥ 5.4.
    pub snd_wnd: Option<u32>,
    /// Local advertised receive window after scaling (bytes). Linux ≥ 6.2.
    pub rcv_wnd: Option<u32>,
    /// PLB- or timeout-triggered rehash attempts. Linux ≥ 6.2.
    pub rehash: Option<u32>,
    /// RTO timeouts, including SYN/SYN-ACK and recurring ones. Linux ≥ 6.7.
    pub total_rto: Option<u16>,
    /// RTO recoveries, including an unfinished one. Linux ≥ 6.7.
    pub total_rto_recoveries: Option<u16>,
    /// Time spent in RTO recoveries (ms). Linux ≥ 6.7.
    pub total_rto_time_ms: Option<u32>,
    /// CE-marked segments received (AccECN kernels).
    pub received_ce: Option<u32>,
}

/// Bounds-checked native-endian reads. `None` when the field is not entirely inside `b`, which
/// is exactly "this kernel's struct does not have the field".
fn read<const N: usize>(b: &[u8], at: usize) -> Option<[u8; N]> {
    b.get(at..at.checked_add(N)?)?.try_into().ok()
}
fn u8_at(b: &[u8], at: usize) -> Option<u8> {
    b.get(at).copied()
}
fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    read(b, at).map(u16::from_ne_bytes)
}
fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    read(b, at).map(u32::from_ne_bytes)
}
fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    read(b, at).map(u64::from_ne_bytes)
}

/// Splits the `snd_wscale:4, rcv_wscale:4` byte. C bit-fields are allocated from the least
/// significant bit on little-endian ABIs and from the most significant bit on big-endian ones,
/// so the first-declared field sits in a different nibble depending on the target.
fn split_wscale(byte: u8) -> (u8, u8) {
    if cfg!(target_endian = "little") {
        (byte & 0x0f, byte >> 4)
    } else {
        (byte >> 4, byte & 0x0f)
    }
}

/// Splits the `delivery_rate_app_limited:1, fastopen_client_fail:2` byte (same ABI rule).
fn split_app_limited_fo(byte: u8) -> (bool, u8) {
    if cfg!(target_endian = "little") {
        (byte & 0x01 != 0, (byte >> 1) & 0x03)
    } else {
        (byte & 0x80 != 0, (byte >> 5) & 0x03)
    }
}

impl TcpInfo {
    /// Decodes the bytes `getsockopt(TCP_INFO)` wrote (pass exactly the returned length).
    ///
    /// Fields the buffer does not fully cover are `None`; bytes beyond the layout we know are
    /// ignored, so a newer kernel's longer struct still decodes.
    pub fn decode(bytes: &[u8]) -> Result<TcpInfo, ProtoError> {
        if bytes.len() < TCP_INFO_MIN_LEN {
            return Err(ProtoError::TcpInfoTooShort {
                len: bytes.len(),
                min: TCP_INFO_MIN_LEN,
            });
        }
        // Past the length check, every mandatory field is in bounds; `unwrap_or_default` only
        // exists so that this function has no panic path at all.
        let b = bytes;
        let u8f = |at| u8_at(b, at).unwrap_or_default();
        let u32f = |at| u32_at(b, at).unwrap_or_default();
        let (snd_wscale, rcv_wscale) = split_wscale(u8f(off::WSCALE));
        let (delivery_rate_app_limited, fastopen_client_fail) =
            split_app_limited_fo(u8f(off::APP_LIMITED_FO));

        Ok(TcpInfo {
            state: u8f(off::STATE),
            ca_state: u8f(off::CA_STATE),
            retransmits: u8f(off::RETRANSMITS),
            probes: u8f(off::PROBES),
            backoff: u8f(off::BACKOFF),
            options: u8f(off::OPTIONS),
            snd_wscale,
            rcv_wscale,
            delivery_rate_app_limited,
            fastopen_client_fail,
            rto_us: u32f(off::RTO),
            ato_us: u32f(off::ATO),
            snd_mss: u32f(off::SND_MSS),
            rcv_mss: u32f(off::RCV_MSS),
            unacked: u32f(off::UNACKED),
            sacked: u32f(off::SACKED),
            lost: u32f(off::LOST),
            retrans: u32f(off::RETRANS),
            fackets: u32f(off::FACKETS),
            last_data_sent_ms: u32f(off::LAST_DATA_SENT),
            last_ack_sent_ms: u32f(off::LAST_ACK_SENT),
            last_data_recv_ms: u32f(off::LAST_DATA_RECV),
            last_ack_recv_ms: u32f(off::LAST_ACK_RECV),
            pmtu: u32f(off::PMTU),
            rcv_ssthresh: u32f(off::RCV_SSTHRESH),
            rtt_us: u32f(off::RTT),
            rttvar_us: u32f(off::RTTVAR),
            snd_ssthresh: u32f(off::SND_SSTHRESH),
            snd_cwnd: u32f(off::SND_CWND),
            advmss: u32f(off::ADVMSS),
            reordering: u32f(off::REORDERING),
            rcv_rtt_us: u32f(off::RCV_RTT),
            rcv_space: u32f(off::RCV_SPACE),
            total_retrans: u32f(off::TOTAL_RETRANS),
            pacing_rate: u64_at(b, off::PACING_RATE),
            max_pacing_rate: u64_at(b, off::MAX_PACING_RATE),
            bytes_acked: u64_at(b, off::BYTES_ACKED),
            bytes_received: u64_at(b, off::BYTES_RECEIVED),
            segs_out: u32_at(b, off::SEGS_OUT),
            segs_in: u32_at(b, off::SEGS_IN),
            notsent_bytes: u32_at(b, off::NOTSENT_BYTES),
            min_rtt_us: u32_at(b, off::MIN_RTT),
            data_segs_in: u32_at(b, off::DATA_SEGS_IN),
            data_segs_out: u32_at(b, off::DATA_SEGS_OUT),
            delivery_rate: u64_at(b, off::DELIVERY_RATE),
            busy_time_us: u64_at(b, off::BUSY_TIME),
            rwnd_limited_us: u64_at(b, off::RWND_LIMITED),
            sndbuf_limited_us: u64_at(b, off::SNDBUF_LIMITED),
            delivered: u32_at(b, off::DELIVERED),
            delivered_ce: u32_at(b, off::DELIVERED_CE),
            bytes_sent: u64_at(b, off::BYTES_SENT),
            bytes_retrans: u64_at(b, off::BYTES_RETRANS),
            dsack_dups: u32_at(b, off::DSACK_DUPS),
            reord_seen: u32_at(b, off::REORD_SEEN),
            rcv_ooopack: u32_at(b, off::RCV_OOOPACK),
            snd_wnd: u32_at(b, off::SND_WND),
            rcv_wnd: u32_at(b, off::RCV_WND),
            rehash: u32_at(b, off::REHASH),
            total_rto: u16_at(b, off::TOTAL_RTO),
            total_rto_recoveries: u16_at(b, off::TOTAL_RTO_RECOVERIES),
            total_rto_time_ms: u32_at(b, off::TOTAL_RTO_TIME),
            received_ce: u32_at(b, off::RECEIVED_CE),
        })
    }

    /// The kernel's name for [`TcpInfo::state`] (`include/net/tcp_states.h`).
    pub fn state_name(&self) -> &'static str {
        match self.state {
            1 => "ESTABLISHED",
            2 => "SYN_SENT",
            3 => "SYN_RECV",
            4 => "FIN_WAIT1",
            5 => "FIN_WAIT2",
            6 => "TIME_WAIT",
            7 => "CLOSE",
            8 => "CLOSE_WAIT",
            9 => "LAST_ACK",
            10 => "LISTEN",
            11 => "CLOSING",
            12 => "NEW_SYN_RECV",
            13 => "BOUND_INACTIVE",
            _ => "UNKNOWN",
        }
    }

    /// The kernel's name for [`TcpInfo::ca_state`] (`enum tcp_ca_state`).
    pub fn ca_state_name(&self) -> &'static str {
        match self.ca_state {
            0 => "Open",
            1 => "Disorder",
            2 => "CWR",
            3 => "Recovery",
            4 => "Loss",
            _ => "UNKNOWN",
        }
    }

    /// Congestion window in bytes (`snd_cwnd × snd_mss`), the unit quinn reports its window in,
    /// so TCP and QUIC windows can be plotted on one axis.
    pub fn cwnd_bytes(&self) -> u64 {
        u64::from(self.snd_cwnd) * u64::from(self.snd_mss)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fills a `struct tcp_info` image field by field, at explicit offsets, the way the kernel
    /// would lay it out on this machine.
    struct Image(Vec<u8>);

    impl Image {
        fn new(len: usize) -> Self {
            Image(vec![0; len])
        }
        fn u8(&mut self, at: usize, v: u8) -> &mut Self {
            self.0[at] = v;
            self
        }
        fn u16(&mut self, at: usize, v: u16) -> &mut Self {
            self.0[at..at + 2].copy_from_slice(&v.to_ne_bytes());
            self
        }
        fn u32(&mut self, at: usize, v: u32) -> &mut Self {
            self.0[at..at + 4].copy_from_slice(&v.to_ne_bytes());
            self
        }
        fn u64(&mut self, at: usize, v: u64) -> &mut Self {
            self.0[at..at + 8].copy_from_slice(&v.to_ne_bytes());
            self
        }
        /// A full 6.7-era image (248 bytes) plus the AccECN `received_ce`, with a distinct value
        /// in every field so a swapped offset cannot go unnoticed.
        fn full() -> Self {
            let mut i = Image::new(252);
            let wscale = if cfg!(target_endian = "little") {
                0x97
            } else {
                0x79
            };
            let app_fo = if cfg!(target_endian = "little") {
                0b101
            } else {
                0xc0
            };
            i.u8(off::STATE, 1)
                .u8(off::CA_STATE, 3)
                .u8(off::RETRANSMITS, 2)
                .u8(off::PROBES, 4)
                .u8(off::BACKOFF, 5)
                .u8(off::OPTIONS, TCPI_OPT_SACK | TCPI_OPT_WSCALE)
                .u8(off::WSCALE, wscale) // snd 7, rcv 9
                .u8(off::APP_LIMITED_FO, app_fo) // app-limited, fastopen fail 2
                .u32(off::RTO, 204_000)
                .u32(off::ATO, 40_000)
                .u32(off::SND_MSS, 1448)
                .u32(off::RCV_MSS, 1400)
                .u32(off::UNACKED, 10)
                .u32(off::SACKED, 11)
                .u32(off::LOST, 12)
                .u32(off::RETRANS, 13)
                .u32(off::FACKETS, 14)
                .u32(off::LAST_DATA_SENT, 15)
                .u32(off::LAST_ACK_SENT, 16)
                .u32(off::LAST_DATA_RECV, 17)
                .u32(off::LAST_ACK_RECV, 18)
                .u32(off::PMTU, 1500)
                .u32(off::RCV_SSTHRESH, 64_000)
                .u32(off::RTT, 20_500)
                .u32(off::RTTVAR, 3_100)
                .u32(off::SND_SSTHRESH, 42)
                .u32(off::SND_CWND, 57)
                .u32(off::ADVMSS, 1460)
                .u32(off::REORDERING, 3)
                .u32(off::RCV_RTT, 21_000)
                .u32(off::RCV_SPACE, 14_600)
                .u32(off::TOTAL_RETRANS, 99)
                .u64(off::PACING_RATE, 12_500_000)
                .u64(off::MAX_PACING_RATE, u64::MAX)
                .u64(off::BYTES_ACKED, 10_000_001)
                .u64(off::BYTES_RECEIVED, 555)
                .u32(off::SEGS_OUT, 7001)
                .u32(off::SEGS_IN, 3001)
                .u32(off::NOTSENT_BYTES, 65_536)
                .u32(off::MIN_RTT, 20_001)
                .u32(off::DATA_SEGS_IN, 1)
                .u32(off::DATA_SEGS_OUT, 6999)
                .u64(off::DELIVERY_RATE, 1_250_000)
                .u64(off::BUSY_TIME, 8_000_000)
                .u64(off::RWND_LIMITED, 123)
                .u64(off::SNDBUF_LIMITED, 456)
                .u32(off::DELIVERED, 6900)
                .u32(off::DELIVERED_CE, 7)
                .u64(off::BYTES_SENT, 10_100_000)
                .u64(off::BYTES_RETRANS, 100_000)
                .u32(off::DSACK_DUPS, 8)
                .u32(off::REORD_SEEN, 9)
                .u32(off::RCV_OOOPACK, 19)
                .u32(off::SND_WND, 3_000_000)
                .u32(off::RCV_WND, 131_072)
                .u32(off::REHASH, 1)
                .u16(off::TOTAL_RTO, 2)
                .u16(off::TOTAL_RTO_RECOVERIES, 1)
                .u32(off::TOTAL_RTO_TIME, 400)
                .u32(off::RECEIVED_CE, 21);
            i
        }
    }

    #[test]
    fn decodes_every_field_at_its_offset() {
        let t = TcpInfo::decode(&Image::full().0).unwrap();
        assert_eq!(t.state, 1);
        assert_eq!(t.state_name(), "ESTABLISHED");
        assert_eq!(t.ca_state, 3);
        assert_eq!(t.ca_state_name(), "Recovery");
        assert_eq!((t.retransmits, t.probes, t.backoff), (2, 4, 5));
        assert_eq!(t.options, TCPI_OPT_SACK | TCPI_OPT_WSCALE);
        assert_eq!((t.snd_wscale, t.rcv_wscale), (7, 9));
        assert!(t.delivery_rate_app_limited);
        assert_eq!(t.fastopen_client_fail, 2);
        assert_eq!((t.rto_us, t.ato_us), (204_000, 40_000));
        assert_eq!((t.snd_mss, t.rcv_mss), (1448, 1400));
        assert_eq!(
            (t.unacked, t.sacked, t.lost, t.retrans, t.fackets),
            (10, 11, 12, 13, 14)
        );
        assert_eq!(
            (
                t.last_data_sent_ms,
                t.last_ack_sent_ms,
                t.last_data_recv_ms,
                t.last_ack_recv_ms
            ),
            (15, 16, 17, 18)
        );
        assert_eq!((t.pmtu, t.rcv_ssthresh), (1500, 64_000));
        assert_eq!((t.rtt_us, t.rttvar_us), (20_500, 3_100));
        assert_eq!((t.snd_ssthresh, t.snd_cwnd), (42, 57));
        assert_eq!((t.advmss, t.reordering), (1460, 3));
        assert_eq!((t.rcv_rtt_us, t.rcv_space), (21_000, 14_600));
        assert_eq!(t.total_retrans, 99);
        assert_eq!(t.pacing_rate, Some(12_500_000));
        assert_eq!(t.max_pacing_rate, Some(u64::MAX));
        assert_eq!(t.bytes_acked, Some(10_000_001));
        assert_eq!(t.bytes_received, Some(555));
        assert_eq!((t.segs_out, t.segs_in), (Some(7001), Some(3001)));
        assert_eq!(t.notsent_bytes, Some(65_536));
        assert_eq!(t.min_rtt_us, Some(20_001));
        assert_eq!((t.data_segs_in, t.data_segs_out), (Some(1), Some(6999)));
        assert_eq!(t.delivery_rate, Some(1_250_000));
        assert_eq!(t.busy_time_us, Some(8_000_000));
        assert_eq!(t.rwnd_limited_us, Some(123));
        assert_eq!(t.sndbuf_limited_us, Some(456));
        assert_eq!((t.delivered, t.delivered_ce), (Some(6900), Some(7)));
        assert_eq!(t.bytes_sent, Some(10_100_000));
        assert_eq!(t.bytes_retrans, Some(100_000));
        assert_eq!((t.dsack_dups, t.reord_seen), (Some(8), Some(9)));
        assert_eq!(t.rcv_ooopack, Some(19));
        assert_eq!(t.snd_wnd, Some(3_000_000));
        assert_eq!(t.rcv_wnd, Some(131_072));
        assert_eq!(t.rehash, Some(1));
        assert_eq!(t.total_rto, Some(2));
        assert_eq!(t.total_rto_recoveries, Some(1));
        assert_eq!(t.total_rto_time_ms, Some(400));
        assert_eq!(t.received_ce, Some(21));
        assert_eq!(t.cwnd_bytes(), 57 * 1448);
    }

    #[test]
    fn longer_buffer_than_known_layout_decodes() {
        let mut img = Image::full();
        img.0.resize(TCP_INFO_MAX_LEN, 0xff);
        let t = TcpInfo::decode(&img.0).unwrap();
        assert_eq!(t.snd_cwnd, 57);
        assert_eq!(t.received_ce, Some(21));
    }

    #[test]
    fn older_kernel_struct_leaves_later_fields_none() {
        // Linux 4.9..4.10: the struct ends after tcpi_delivery_rate (168 bytes).
        let full = Image::full().0;
        let t = TcpInfo::decode(&full[..168]).unwrap();
        assert_eq!(t.snd_cwnd, 57);
        assert_eq!(t.rtt_us, 20_500);
        assert_eq!(t.pacing_rate, Some(12_500_000));
        assert_eq!(t.min_rtt_us, Some(20_001));
        assert_eq!(t.delivery_rate, Some(1_250_000));
        assert_eq!(t.busy_time_us, None);
        assert_eq!(t.delivered, None);
        assert_eq!(t.bytes_sent, None);
        assert_eq!(t.bytes_retrans, None);
        assert_eq!(t.snd_wnd, None);
        assert_eq!(t.total_rto, None);

        // The 5.4..6.1 header stops at tcpi_snd_wnd (232 bytes).
        let t = TcpInfo::decode(&full[..232]).unwrap();
        assert_eq!(t.snd_wnd, Some(3_000_000));
        assert_eq!(t.rcv_wnd, None);

        // The minimum (pre-3.15) layout: nothing optional is present.
        let t = TcpInfo::decode(&full[..TCP_INFO_MIN_LEN]).unwrap();
        assert_eq!(t.total_retrans, 99);
        assert_eq!(t.pacing_rate, None);
        assert_eq!(t.bytes_acked, None);
    }

    #[test]
    fn partially_covered_field_is_none() {
        // 4 of pacing_rate's 8 bytes: absent, not a torn value.
        let full = Image::full().0;
        let t = TcpInfo::decode(&full[..TCP_INFO_MIN_LEN + 4]).unwrap();
        assert_eq!(t.pacing_rate, None);
        // Half of the u16 pair: total_rto present, recoveries absent.
        let t = TcpInfo::decode(&full[..off::TOTAL_RTO + 2]).unwrap();
        assert_eq!(t.total_rto, Some(2));
        assert_eq!(t.total_rto_recoveries, None);
    }

    #[test]
    fn too_short_is_an_error() {
        let full = Image::full().0;
        for len in [0, 1, 8, TCP_INFO_MIN_LEN - 1] {
            let err = TcpInfo::decode(&full[..len]).unwrap_err();
            assert_eq!(
                err,
                ProtoError::TcpInfoTooShort {
                    len,
                    min: TCP_INFO_MIN_LEN
                }
            );
        }
        let msg = TcpInfo::decode(&[0; 7]).unwrap_err().to_string();
        assert!(
            msg.contains("got 7 bytes") && msg.contains("at least 104"),
            "{msg}"
        );
    }

    #[test]
    fn offsets_are_contiguous_and_aligned() {
        // Each field starts where the previous one ends, and naturally aligned, as the C
        // compiler lays out this struct (it has no padding).
        let layout: &[(usize, usize)] = &[
            (off::RTO, 4),
            (off::ATO, 4),
            (off::SND_MSS, 4),
            (off::RCV_MSS, 4),
            (off::UNACKED, 4),
            (off::SACKED, 4),
            (off::LOST, 4),
            (off::RETRANS, 4),
            (off::FACKETS, 4),
            (off::LAST_DATA_SENT, 4),
            (off::LAST_ACK_SENT, 4),
            (off::LAST_DATA_RECV, 4),
            (off::LAST_ACK_RECV, 4),
            (off::PMTU, 4),
            (off::RCV_SSTHRESH, 4),
            (off::RTT, 4),
            (off::RTTVAR, 4),
            (off::SND_SSTHRESH, 4),
            (off::SND_CWND, 4),
            (off::ADVMSS, 4),
            (off::REORDERING, 4),
            (off::RCV_RTT, 4),
            (off::RCV_SPACE, 4),
            (off::TOTAL_RETRANS, 4),
            (off::PACING_RATE, 8),
            (off::MAX_PACING_RATE, 8),
            (off::BYTES_ACKED, 8),
            (off::BYTES_RECEIVED, 8),
            (off::SEGS_OUT, 4),
            (off::SEGS_IN, 4),
            (off::NOTSENT_BYTES, 4),
            (off::MIN_RTT, 4),
            (off::DATA_SEGS_IN, 4),
            (off::DATA_SEGS_OUT, 4),
            (off::DELIVERY_RATE, 8),
            (off::BUSY_TIME, 8),
            (off::RWND_LIMITED, 8),
            (off::SNDBUF_LIMITED, 8),
            (off::DELIVERED, 4),
            (off::DELIVERED_CE, 4),
            (off::BYTES_SENT, 8),
            (off::BYTES_RETRANS, 8),
            (off::DSACK_DUPS, 4),
            (off::REORD_SEEN, 4),
            (off::RCV_OOOPACK, 4),
            (off::SND_WND, 4),
            (off::RCV_WND, 4),
            (off::REHASH, 4),
            (off::TOTAL_RTO, 2),
            (off::TOTAL_RTO_RECOVERIES, 2),
            (off::TOTAL_RTO_TIME, 4),
            (off::RECEIVED_CE, 4),
        ];
        let mut next = 8; // after the eight u8 fields
        for &(at, size) in layout {
            assert_eq!(at, next, "field at {at}");
            assert_eq!(at % size, 0, "field at {at} misaligned");
            next = at + size;
        }
        assert_eq!(off::TOTAL_RETRANS + 4, TCP_INFO_MIN_LEN);
        assert!(next <= TCP_INFO_MAX_LEN);
    }
}
