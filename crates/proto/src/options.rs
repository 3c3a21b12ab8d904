//! Protocol option enums shared by the server, the client and the CLI.
//!
//! Each enum has exactly one canonical spelling, used for `Display`, for serde and as the first
//! accepted `FromStr` input, so a value printed in a report can be pasted back into a flag.
//! Parsing is ASCII case-insensitive and ignores surrounding whitespace, because these values
//! come from command lines and TOML files written by people.

/// Connections a gQUIC-style CUBIC emulates by default (gQUIC's own default).
pub const DEFAULT_GQUIC_CONNECTIONS: u32 = 2;

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::ProtoError;

/// Parses `s` against a table of (spelling, value) pairs; the first spelling of each value is
/// canonical. Shared so every enum reports errors in the same shape.
fn parse_table<T: Copy>(
    s: &str,
    table: &[(&str, T)],
    kind: &'static str,
    expected: &'static str,
) -> Result<T, ProtoError> {
    let wanted = s.trim();
    table
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(wanted))
        .map(|&(_, value)| value)
        .ok_or_else(|| ProtoError::UnknownValue {
            kind,
            value: s.to_owned(),
            expected,
        })
}

/// The HTTP version under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// HTTP/1.1 over TLS over TCP.
    H1,
    /// HTTP/2 over TLS over TCP.
    H2,
    /// HTTP/3 over QUIC.
    H3,
}

impl Protocol {
    /// All variants, in display order.
    pub const ALL: [Protocol; 3] = [Protocol::H1, Protocol::H2, Protocol::H3];

    /// Canonical short name (`"h1"`, `"h2"`, `"h3"`).
    pub const fn as_str(&self) -> &'static str {
        match self {
            Protocol::H1 => "h1",
            Protocol::H2 => "h2",
            Protocol::H3 => "h3",
        }
    }

    /// The ALPN protocol identifier (RFC 7301 registry) negotiated for this version.
    pub const fn alpn(&self) -> &'static [u8] {
        match self {
            Protocol::H1 => b"http/1.1",
            Protocol::H2 => b"h2",
            Protocol::H3 => b"h3",
        }
    }

    /// Maps a negotiated ALPN identifier back to the protocol; `None` for anything else, since a
    /// peer may negotiate an identifier we never offered only through a bug worth reporting.
    pub fn from_alpn(alpn: &[u8]) -> Option<Protocol> {
        Protocol::ALL.into_iter().find(|p| p.alpn() == alpn)
    }

    /// The HAR `httpVersion` spelling: `http/1.1`, `h2`, `h3`.
    pub const fn har_version(self) -> &'static str {
        match self {
            Protocol::H1 => "http/1.1",
            Protocol::H2 => "h2",
            Protocol::H3 => "h3",
        }
    }

    /// Whether a page's requests share one connection (h2, h3) rather than up to six (h1).
    pub const fn is_multiplexed(self) -> bool {
        !matches!(self, Protocol::H1)
    }

    /// Whether this protocol runs over QUIC (UDP) rather than TCP.
    pub const fn is_quic(&self) -> bool {
        matches!(self, Protocol::H3)
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Protocol {
    type Err = ProtoError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        // "http/1.1" is accepted because it is the ALPN spelling people copy from curl output.
        const TABLE: &[(&str, Protocol)] = &[
            ("h1", Protocol::H1),
            ("http/1.1", Protocol::H1),
            ("http1", Protocol::H1),
            ("h2", Protocol::H2),
            ("http/2", Protocol::H2),
            ("http2", Protocol::H2),
            ("h3", Protocol::H3),
            ("http/3", Protocol::H3),
            ("http3", Protocol::H3),
        ];
        parse_table(s, TABLE, "protocol", "h1, h2, h3")
    }
}

/// The TLS version for the TCP stacks (QUIC always uses TLS 1.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TlsVersion {
    /// TLS 1.2 (RFC 5246).
    #[serde(rename = "1.2")]
    Tls12,
    /// TLS 1.3 (RFC 8446).
    #[serde(rename = "1.3")]
    Tls13,
}

impl TlsVersion {
    /// All variants, in display order.
    pub const ALL: [TlsVersion; 2] = [TlsVersion::Tls12, TlsVersion::Tls13];

    /// Canonical name (`"1.2"`, `"1.3"`).
    pub const fn as_str(&self) -> &'static str {
        match self {
            TlsVersion::Tls12 => "1.2",
            TlsVersion::Tls13 => "1.3",
        }
    }
}

impl fmt::Display for TlsVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for TlsVersion {
    type Err = ProtoError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        // The prefixed spellings are the ones openssl and curl print.
        const TABLE: &[(&str, TlsVersion)] = &[
            ("1.2", TlsVersion::Tls12),
            ("tls1.2", TlsVersion::Tls12),
            ("tlsv1.2", TlsVersion::Tls12),
            ("1.3", TlsVersion::Tls13),
            ("tls1.3", TlsVersion::Tls13),
            ("tlsv1.3", TlsVersion::Tls13),
        ];
        parse_table(s, TABLE, "TLS version", "1.2, 1.3")
    }
}

/// Kernel TCP congestion control algorithm for the HTTP/1.1 and HTTP/2 stacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TcpCongestion {
    /// CUBIC (RFC 9438), the Linux default.
    Cubic,
    /// NewReno (RFC 6582).
    Reno,
    /// BBR (v1 in mainline Linux).
    Bbr,
}

impl TcpCongestion {
    /// All variants, in display order.
    pub const ALL: [TcpCongestion; 3] = [
        TcpCongestion::Cubic,
        TcpCongestion::Reno,
        TcpCongestion::Bbr,
    ];

    /// The name the kernel uses for `setsockopt(TCP_CONGESTION)` and
    /// `net.ipv4.tcp_available_congestion_control`; also the canonical spelling.
    pub const fn kernel_name(&self) -> &'static str {
        match self {
            TcpCongestion::Cubic => "cubic",
            TcpCongestion::Reno => "reno",
            TcpCongestion::Bbr => "bbr",
        }
    }
}

impl fmt::Display for TcpCongestion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.kernel_name())
    }
}

impl FromStr for TcpCongestion {
    type Err = ProtoError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        const TABLE: &[(&str, TcpCongestion)] = &[
            ("cubic", TcpCongestion::Cubic),
            ("reno", TcpCongestion::Reno),
            ("bbr", TcpCongestion::Bbr),
        ];
        parse_table(s, TABLE, "TCP congestion control", "cubic, reno, bbr")
    }
}

/// Congestion controller for the QUIC (quinn) stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum QuicCongestion {
    /// quinn's CUBIC (RFC 9438).
    #[serde(rename = "cubic")]
    Cubic,
    /// quinn's NewReno (RFC 9002 §7).
    #[serde(rename = "newreno")]
    NewReno,
    /// quinn's BBR (experimental, v1-like).
    #[serde(rename = "bbr")]
    Bbr,
    /// [`crate::gquic_cubic::GquicCubic`]: CUBIC emulating N TCP connections.
    #[serde(rename = "gquic-cubic")]
    GquicCubic,
}

impl QuicCongestion {
    /// All variants, in display order.
    pub const ALL: [QuicCongestion; 4] = [
        QuicCongestion::Cubic,
        QuicCongestion::NewReno,
        QuicCongestion::Bbr,
        QuicCongestion::GquicCubic,
    ];

    /// Canonical name (`"cubic"`, `"newreno"`, `"bbr"`, `"gquic-cubic"`).
    pub const fn as_str(&self) -> &'static str {
        match self {
            QuicCongestion::Cubic => "cubic",
            QuicCongestion::NewReno => "newreno",
            QuicCongestion::Bbr => "bbr",
            QuicCongestion::GquicCubic => "gquic-cubic",
        }
    }
}

impl fmt::Display for QuicCongestion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for QuicCongestion {
    type Err = ProtoError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        const TABLE: &[(&str, QuicCongestion)] = &[
            ("cubic", QuicCongestion::Cubic),
            ("newreno", QuicCongestion::NewReno),
            ("bbr", QuicCongestion::Bbr),
            ("gquic-cubic", QuicCongestion::GquicCubic),
        ];
        parse_table(
            s,
            TABLE,
            "QUIC congestion control",
            "cubic, newreno, bbr, gquic-cubic",
        )
    }
}

/// How the protocol stacks of one run are set up, on both ends. The lab's child processes
/// (`quiclab child` as server, fetch or page client) receive it whole, serialised, so no option travels
/// through the environment or gets lost between two copies of a flag list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StackOptions {
    /// TLS version for HTTP/1.1 and HTTP/2 (`None`: 1.3 or 1.2 as negotiated); QUIC is always 1.3.
    pub tls: Option<TlsVersion>,
    /// Kernel TCP congestion control, set per socket on both ends.
    pub tcp_cc: TcpCongestion,
    /// QUIC congestion control on both ends.
    pub quic_cc: QuicCongestion,
    /// QUIC's initial congestion window in packets (TCP's is the kernel's 10 segments).
    pub initial_window_packets: u64,
    /// N, the connections `gquic-cubic` emulates (β = (N−1+0.7)/N).
    pub gquic_n: u32,
    /// XOR FEC under QUIC on both ends (`--fec N`; None: off).
    #[serde(default)]
    pub fec: Option<FecSettings>,
    /// QUIC's datagram size on both ends (`quic_mtu`, `quic_pmtud`).
    #[serde(default)]
    pub quic_mtu: QuicMtu,
    /// The server's HTTP/1.1 and HTTP/2 responses advertise HTTP/3 (`alt-svc: h3=":443"`), as
    /// real servers do; `alt_svc = false` leaves it out.
    #[serde(default = "advertise_h3")]
    pub alt_svc: bool,
    /// QUIC's flow-control receive windows on both ends (`quic_stream_window`, `quic_window`):
    /// large by default, so that congestion control and not flow control limits a transfer.
    #[serde(default)]
    pub quic_windows: QuicWindows,
    /// QUIC's ACK frequency (`quic_ack_frequency`): each end asks its peer, by the ACK frequency
    /// extension (draft-ietf-quic-ack-frequency), to acknowledge only every N-th ack-eliciting
    /// packet. None: no request, RFC 9000's every second packet.
    #[serde(default)]
    pub quic_ack_frequency: Option<u32>,
    /// UDP receive offload on quiclab's QUIC sockets (`quic_gro`): quinn asks the kernel for
    /// merged datagrams where it has UDP GRO; false reads them one by one.
    #[serde(default = "advertise_h3")]
    pub quic_gro: bool,
}

/// QUIC's receive windows (bytes): what one stream, and the whole connection, may have in
/// flight unread before the receiver raises its limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuicWindows {
    pub stream: u64,
    pub connection: u64,
}

/// quiclab's default stream receive window (16 MiB).
pub const DEFAULT_QUIC_STREAM_WINDOW: u64 = 16 << 20;
/// quiclab's default connection receive window (32 MiB).
pub const DEFAULT_QUIC_WINDOW: u64 = 32 << 20;

impl Default for QuicWindows {
    fn default() -> Self {
        QuicWindows {
            stream: DEFAULT_QUIC_STREAM_WINDOW,
            connection: DEFAULT_QUIC_WINDOW,
        }
    }
}

const fn advertise_h3() -> bool {
    true
}

/// The UDP payload size QUIC sends: `initial` bytes from the first datagram on and, with
/// `discover`, larger ones up to what the path carries once PMTU discovery (RFC 8899) probes them.
/// Without discovery, no datagram is larger than `initial` — gQUIC's fixed 1350 B, for example.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuicMtu {
    pub initial: u16,
    pub discover: bool,
}

/// The MTU of a lab's links (Ethernet's): what `quic_mtu` is checked against.
pub const LAB_LINK_MTU: u16 = 1500;

/// RFC 9000's floor: a QUIC path must carry 1200-byte UDP payloads.
pub const QUIC_MIN_UDP_PAYLOAD: u16 = 1200;

/// quinn's default initial datagram size, quiclab's when `quic_mtu` is not given: the largest
/// UDP payload a 1500-byte link carries over IPv6 (1500 − 40 − 8), and so over IPv4 too.
pub const QUIC_DEFAULT_UDP_PAYLOAD: u16 = 1452;

impl Default for QuicMtu {
    fn default() -> Self {
        QuicMtu {
            initial: QUIC_DEFAULT_UDP_PAYLOAD,
            discover: false,
        }
    }
}

/// The largest UDP payload an IP packet of `link_mtu` bytes carries (IPv4: 20-byte header,
/// IPv6: 40, both without options; UDP: 8).
pub const fn max_udp_payload(link_mtu: u16, ipv6: bool) -> u16 {
    link_mtu.saturating_sub(if ipv6 { 48 } else { 28 })
}

impl QuicMtu {
    /// Checks the size against RFC 9000's floor and what a link of `link_mtu` carries.
    pub fn check(&self, link_mtu: u16, ipv6: bool) -> Result<(), String> {
        let max = max_udp_payload(link_mtu, ipv6);
        if self.initial < QUIC_MIN_UDP_PAYLOAD || self.initial > max {
            return Err(format!(
                "a UDP payload of {} bytes: QUIC needs at least {QUIC_MIN_UDP_PAYLOAD} (RFC 9000) and the lab's \
                 {link_mtu}-byte link carries at most {max} over IPv{}",
                self.initial,
                if ipv6 { 6 } else { 4 }
            ));
        }
        Ok(())
    }
}

/// XOR forward error correction under QUIC (gQUIC 2015's; `quiclab-fec`): a parity datagram after
/// every `group` data datagrams, a partial group closed after `flush_after_us`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FecSettings {
    pub group: u8,
    pub flush_after_us: u64,
    /// Parity shares the congestion window with data, as gQUIC counted its FEC packets
    /// (`fec_in_cwnd`; quiclab-cc's ParityShare); false: parity travels outside the window.
    #[serde(default)]
    pub in_cwnd: bool,
}

impl FecSettings {
    /// gQUIC's flush alarm for a path of round-trip time `rtt_ns`: max(RTT/2, 5 ms).
    pub fn for_rtt(group: u8, rtt_ns: u64) -> FecSettings {
        FecSettings {
            group,
            flush_after_us: (rtt_ns / 2 / 1000).max(5_000),
            in_cwnd: false,
        }
    }
}

impl Default for StackOptions {
    /// TLS negotiated, CUBIC for TCP and QUIC, an initial window of 10 packets, N = 2.
    fn default() -> Self {
        StackOptions {
            tls: None,
            tcp_cc: TcpCongestion::Cubic,
            quic_cc: QuicCongestion::Cubic,
            initial_window_packets: 10,
            gquic_n: DEFAULT_GQUIC_CONNECTIONS,
            fec: None,
            quic_mtu: QuicMtu::default(),
            alt_svc: true,
            quic_windows: QuicWindows::default(),
            quic_ack_frequency: None,
            quic_gro: true,
        }
    }
}

impl StackOptions {
    /// Sets the congestion controller of the transport `proto` uses (TCP for h1/h2, QUIC for h3)
    /// from one name: `--cc` of `bulk` and `page`, `cc` of scenarios. The other transport keeps
    /// its default.
    pub fn with_cc(mut self, proto: Protocol, cc: &str) -> Result<Self, String> {
        match proto {
            Protocol::H3 => {
                self.quic_cc = cc
                    .parse()
                    .map_err(|e| format!("{e} (for h3: cubic, newreno, bbr, gquic-cubic)"))?;
            }
            Protocol::H1 | Protocol::H2 => {
                self.tcp_cc = cc
                    .parse()
                    .map_err(|e| format!("{e} (for h1/h2: cubic, reno, bbr)"))?;
            }
        }
        Ok(self)
    }

    /// The congestion controller `proto` runs under, by its canonical name.
    pub fn cc_name(&self, proto: Protocol) -> &'static str {
        match proto {
            Protocol::H3 => self.quic_cc.as_str(),
            Protocol::H1 | Protocol::H2 => self.tcp_cc.kernel_name(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocol_parses_short_and_alpn_names() {
        assert_eq!("h1".parse::<Protocol>().unwrap(), Protocol::H1);
        assert_eq!("http/1.1".parse::<Protocol>().unwrap(), Protocol::H1);
        assert_eq!("HTTP/1.1".parse::<Protocol>().unwrap(), Protocol::H1);
        assert_eq!("h2".parse::<Protocol>().unwrap(), Protocol::H2);
        assert_eq!(" H3 ".parse::<Protocol>().unwrap(), Protocol::H3);
    }

    #[test]
    fn protocol_error_names_accepted_values() {
        let err = "h4".parse::<Protocol>().unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"unknown protocol "h4": expected one of h1, h2, h3"#
        );
        assert!("".parse::<Protocol>().is_err());
    }

    #[test]
    fn protocol_display_alpn_and_round_trip() {
        for p in Protocol::ALL {
            assert_eq!(p.to_string().parse::<Protocol>().unwrap(), p);
            assert_eq!(Protocol::from_alpn(p.alpn()), Some(p));
        }
        assert_eq!(Protocol::H1.to_string(), "h1");
        assert_eq!(Protocol::H1.alpn(), b"http/1.1");
        assert_eq!(Protocol::H2.alpn(), b"h2");
        assert_eq!(Protocol::H3.alpn(), b"h3");
        assert_eq!(Protocol::from_alpn(b"spdy/3"), None);
        assert!(Protocol::H3.is_quic() && !Protocol::H2.is_quic());
    }

    #[test]
    fn tls_version_parses_and_displays() {
        assert_eq!("1.2".parse::<TlsVersion>().unwrap(), TlsVersion::Tls12);
        assert_eq!("TLSv1.3".parse::<TlsVersion>().unwrap(), TlsVersion::Tls13);
        assert_eq!(TlsVersion::Tls13.to_string(), "1.3");
        let err = "1.1".parse::<TlsVersion>().unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"unknown TLS version "1.1": expected one of 1.2, 1.3"#
        );
        for v in TlsVersion::ALL {
            assert_eq!(v.to_string().parse::<TlsVersion>().unwrap(), v);
        }
    }

    #[test]
    fn tcp_congestion_kernel_names() {
        assert_eq!(TcpCongestion::Cubic.kernel_name(), "cubic");
        assert_eq!(TcpCongestion::Reno.kernel_name(), "reno");
        assert_eq!(TcpCongestion::Bbr.kernel_name(), "bbr");
        for c in TcpCongestion::ALL {
            assert_eq!(c.to_string().parse::<TcpCongestion>().unwrap(), c);
        }
        let err = "vegas".parse::<TcpCongestion>().unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"unknown TCP congestion control "vegas": expected one of cubic, reno, bbr"#
        );
    }

    #[test]
    fn quic_congestion_names() {
        assert_eq!(
            "gquic-cubic".parse::<QuicCongestion>().unwrap(),
            QuicCongestion::GquicCubic
        );
        assert_eq!(
            "NewReno".parse::<QuicCongestion>().unwrap(),
            QuicCongestion::NewReno
        );
        for c in QuicCongestion::ALL {
            assert_eq!(c.to_string().parse::<QuicCongestion>().unwrap(), c);
        }
        let err = "reno".parse::<QuicCongestion>().unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"unknown QUIC congestion control "reno": expected one of cubic, newreno, bbr, gquic-cubic"#
        );
    }

    /// serde uses the same spelling as Display, checked through serde's own `Serializer` for
    /// `&str`-like output without pulling in serde_json: a unit variant serializes via
    /// `serialize_unit_variant`, whose `variant` argument is the renamed name.
    #[test]
    fn serde_names_match_display() {
        use serde::Serializer;
        use serde::ser::Impossible;

        struct NameOnly;
        #[derive(Debug)]
        struct NotAName;
        impl fmt::Display for NotAName {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("not a unit variant")
            }
        }
        impl std::error::Error for NotAName {}
        impl serde::ser::Error for NotAName {
            fn custom<T: fmt::Display>(_: T) -> Self {
                NotAName
            }
        }
        macro_rules! reject {
            ($($name:ident($($t:ty),*) -> $ret:ty;)*) => {
                $(fn $name(self, $(_: $t),*) -> Result<$ret, NotAName> { Err(NotAName) })*
            };
        }
        impl Serializer for NameOnly {
            type Ok = String;
            type Error = NotAName;
            type SerializeSeq = Impossible<String, NotAName>;
            type SerializeTuple = Impossible<String, NotAName>;
            type SerializeTupleStruct = Impossible<String, NotAName>;
            type SerializeTupleVariant = Impossible<String, NotAName>;
            type SerializeMap = Impossible<String, NotAName>;
            type SerializeStruct = Impossible<String, NotAName>;
            type SerializeStructVariant = Impossible<String, NotAName>;
            fn serialize_unit_variant(
                self,
                _: &'static str,
                _: u32,
                variant: &'static str,
            ) -> Result<String, NotAName> {
                Ok(variant.to_owned())
            }
            fn serialize_some<T: ?Sized + Serialize>(self, _: &T) -> Result<String, NotAName> {
                Err(NotAName)
            }
            fn serialize_newtype_struct<T: ?Sized + Serialize>(
                self,
                _: &'static str,
                _: &T,
            ) -> Result<String, NotAName> {
                Err(NotAName)
            }
            fn serialize_newtype_variant<T: ?Sized + Serialize>(
                self,
                _: &'static str,
                _: u32,
                _: &'static str,
                _: &T,
            ) -> Result<String, NotAName> {
                Err(NotAName)
            }
            reject! {
                serialize_bool(bool) -> String;
                serialize_i8(i8) -> String;
                serialize_i16(i16) -> String;
                serialize_i32(i32) -> String;
                serialize_i64(i64) -> String;
                serialize_u8(u8) -> String;
                serialize_u16(u16) -> String;
                serialize_u32(u32) -> String;
                serialize_u64(u64) -> String;
                serialize_f32(f32) -> String;
                serialize_f64(f64) -> String;
                serialize_char(char) -> String;
                serialize_str(&str) -> String;
                serialize_bytes(&[u8]) -> String;
                serialize_none() -> String;
                serialize_unit() -> String;
                serialize_unit_struct(&'static str) -> String;
                serialize_seq(Option<usize>) -> Self::SerializeSeq;
                serialize_tuple(usize) -> Self::SerializeTuple;
                serialize_tuple_struct(&'static str, usize) -> Self::SerializeTupleStruct;
                serialize_tuple_variant(&'static str, u32, &'static str, usize) -> Self::SerializeTupleVariant;
                serialize_map(Option<usize>) -> Self::SerializeMap;
                serialize_struct(&'static str, usize) -> Self::SerializeStruct;
                serialize_struct_variant(&'static str, u32, &'static str, usize) -> Self::SerializeStructVariant;
            }
        }

        fn name<T: Serialize>(v: T) -> String {
            v.serialize(NameOnly).unwrap()
        }
        for p in Protocol::ALL {
            assert_eq!(name(p), p.to_string());
        }
        for v in TlsVersion::ALL {
            assert_eq!(name(v), v.to_string());
        }
        for c in TcpCongestion::ALL {
            assert_eq!(name(c), c.to_string());
        }
        for c in QuicCongestion::ALL {
            assert_eq!(name(c), c.to_string());
        }
    }

    #[test]
    fn stack_options_split_cc_by_transport_and_round_trip() {
        let o = StackOptions::default()
            .with_cc(Protocol::H3, "gquic-cubic")
            .unwrap();
        assert_eq!(o.quic_cc, QuicCongestion::GquicCubic);
        assert_eq!(o.tcp_cc, TcpCongestion::Cubic);
        assert_eq!(o.cc_name(Protocol::H3), "gquic-cubic");
        let e = StackOptions::default()
            .with_cc(Protocol::H1, "newreno")
            .unwrap_err();
        assert!(e.contains("for h1/h2: cubic, reno, bbr"), "{e}");
        let back: StackOptions = serde_json::from_str(&serde_json::to_string(&o).unwrap()).unwrap();
        assert_eq!(back, o);
        assert!(serde_json::from_str::<StackOptions>("{\"tls\":null}").is_err());
    }
}
