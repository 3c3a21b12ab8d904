//! The QUIC connections of a capture, packet by packet: datagrams split into their coalesced
//! packets, each attributed to its connection by its connection IDs (the client's first
//! Destination Connection ID opens a connection; the Source IDs of long headers and the IDs that
//! NEW_CONNECTION_ID issues name it afterwards), its header protection removed and its payload
//! opened — Initial keys from that first ID, Handshake and 1-RTT keys from the key log's secrets of
//! the connection's ClientHello random — and its frames read. A packet that cannot be opened (no
//! secret for it, or a key phase never seen) keeps its header fields and says why.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::capture::Datagram;
use crate::frames::{self, Reader};
use crate::keys::{Keys, Suite, initial_secrets};

/// A packet number space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Space {
    Initial,
    Handshake,
    /// 0-RTT and 1-RTT packets share it.
    Application,
}

/// One QUIC packet of the capture.
#[derive(Debug, Clone, PartialEq)]
pub struct Packet {
    pub t_ns: u64,
    /// Client to server.
    pub uplink: bool,
    /// False when the link dropped or lost it.
    pub forwarded: bool,
    /// qlog's `packet_type`: initial, handshake, 0RTT, 1RTT, retry, version_negotiation.
    pub packet_type: &'static str,
    pub space: Option<Space>,
    pub number: Option<u64>,
    /// The packet's bytes (header, payload and tag).
    pub length: usize,
    /// Its frames as qlog objects; None when it could not be opened.
    pub frames: Option<Vec<Value>>,
    /// Why it could not be opened.
    pub unread: Option<String>,
}

/// One connection: the client's first Destination Connection ID and its packets in capture order.
#[derive(Debug, Clone, PartialEq)]
pub struct Connection {
    pub original_dcid: Vec<u8>,
    pub packets: Vec<Packet>,
}

/// A key log's secrets by ClientHello random.
#[derive(Debug, Clone, Default)]
struct Secrets {
    client_handshake: Option<Vec<u8>>,
    server_handshake: Option<Vec<u8>>,
    client_app: Option<Vec<u8>>,
    server_app: Option<Vec<u8>>,
    client_early: Option<Vec<u8>>,
}

fn parse_keylog(text: &str) -> BTreeMap<Vec<u8>, Secrets> {
    let mut out: BTreeMap<Vec<u8>, Secrets> = BTreeMap::new();
    for line in text.lines() {
        let mut parts = line.split_whitespace();
        let (Some(label), Some(random), Some(secret)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let (Some(random), Some(secret)) = (unhex(random), unhex(secret)) else {
            continue;
        };
        let s = out.entry(random).or_default();
        let slot = match label {
            "CLIENT_HANDSHAKE_TRAFFIC_SECRET" => &mut s.client_handshake,
            "SERVER_HANDSHAKE_TRAFFIC_SECRET" => &mut s.server_handshake,
            "CLIENT_TRAFFIC_SECRET_0" => &mut s.client_app,
            "SERVER_TRAFFIC_SECRET_0" => &mut s.server_app,
            "CLIENT_EARLY_TRAFFIC_SECRET" => &mut s.client_early,
            _ => continue,
        };
        *slot = Some(secret);
    }
    out
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// One direction's 1-RTT keys: the current phase and its bit.
struct PhaseKeys {
    keys: Keys,
    phase: bool,
}

struct State {
    conn: Connection,
    /// IDs the client receives on (the server's packets carry them).
    client_cids: Vec<Vec<u8>>,
    /// IDs the server receives on.
    server_cids: Vec<Vec<u8>>,
    client_random: Option<Vec<u8>>,
    /// The client's Initial CRYPTO data from offset 0, for its ClientHello random.
    client_hello: Vec<u8>,
    initial: [Option<Keys>; 2],
    handshake: [Option<Keys>; 2],
    early: Option<Keys>,
    app: [Option<PhaseKeys>; 2],
    /// Largest packet number per direction and space (for the truncated numbers).
    largest: BTreeMap<(bool, Space), u64>,
}

/// Reads a capture's datagrams into connections.
pub struct Decoder {
    secrets: BTreeMap<Vec<u8>, Secrets>,
    states: Vec<State>,
}

impl Decoder {
    /// A decoder with the secrets of `keylog` (the NSS key log format).
    pub fn new(keylog: &str) -> Decoder {
        Decoder {
            secrets: parse_keylog(keylog),
            states: Vec::new(),
        }
    }

    /// The connections read so far.
    pub fn finish(self) -> Vec<Connection> {
        self.states.into_iter().map(|s| s.conn).collect()
    }

    /// Reads one datagram: each of its packets goes to its connection (a datagram of no
    /// connection that is not a client's Initial is left out).
    pub fn datagram(&mut self, d: &Datagram) {
        let mut at = 0;
        while at < d.payload.len() {
            match self.packet(d, at) {
                Some(next) if next > at => at = next,
                _ => break,
            }
        }
    }

    /// The connection a packet going `uplink` (or down) to Destination ID `bytes` (or a short
    /// header's bytes from its ID on) belongs to: the longest ID they start with, the latest
    /// connection first among equals (a zero-length ID matches last).
    fn find(&self, uplink: bool, bytes: &[u8]) -> Option<usize> {
        let mut best: Option<(usize, usize)> = None;
        for (i, s) in self.states.iter().enumerate() {
            let ids = if uplink {
                &s.server_cids
            } else {
                &s.client_cids
            };
            for c in ids.iter().filter(|c| bytes.starts_with(c)) {
                if best.is_none_or(|(_, len)| c.len() >= len) {
                    best = Some((i, c.len()));
                }
            }
        }
        best.map(|(i, _)| i)
    }

    /// Reads the packet at `at` of `d`; returns where the next one starts.
    fn packet(&mut self, d: &Datagram, at: usize) -> Option<usize> {
        let buf = &d.payload[at..];
        let first = *buf.first()?;
        if first & 0x80 == 0 {
            // Short header: the connection by the Destination ID at byte 1.
            let idx = self.find(d.uplink, &buf[1..])?;
            let cid_len = {
                let s = &self.states[idx];
                let cids = if d.uplink {
                    &s.server_cids
                } else {
                    &s.client_cids
                };
                cids.iter()
                    .filter(|c| buf[1..].starts_with(c))
                    .map(Vec::len)
                    .max()?
            };
            let secrets = self.secrets_of(idx);
            let state = &mut self.states[idx];
            state.one_rtt(d, buf, 1 + cid_len, secrets.as_ref());
            return Some(d.payload.len());
        }
        // Long header.
        let mut r = Reader::new(buf);
        r.u8()?;
        let version = u32::from_be_bytes(r.bytes(4)?.try_into().ok()?);
        let dcid_len = r.u8()? as usize;
        let dcid = r.bytes(dcid_len)?.to_vec();
        let scid_len = r.u8()? as usize;
        let scid = r.bytes(scid_len)?.to_vec();
        if version == 0 {
            self.record_header_only(d, buf.len(), "version_negotiation", &dcid);
            return Some(d.payload.len());
        }
        let ty = (first >> 4) & 0x03;
        if ty == 3 {
            self.record_header_only(d, buf.len(), "retry", &dcid);
            return Some(d.payload.len());
        }
        if ty == 0 {
            let token_len = usize::try_from(r.varint()?).ok()?;
            r.bytes(token_len)?;
        }
        let length = usize::try_from(r.varint()?).ok()?;
        let pn_offset = r.pos();
        let end = pn_offset.checked_add(length)?.min(buf.len());
        let idx = match (d.uplink, ty) {
            (true, _) => match self.find(true, &dcid) {
                Some(i) => i,
                None if ty == 0 => self.open_connection(&dcid),
                None => return Some(at + end),
            },
            (false, _) => self.find(false, &dcid)?,
        };
        {
            let s = &mut self.states[idx];
            let ids = if d.uplink {
                &mut s.client_cids
            } else {
                &mut s.server_cids
            };
            if !ids.contains(&scid) {
                ids.push(scid);
            }
        }
        let (packet_type, space) = match ty {
            0 => ("initial", Space::Initial),
            1 => ("0RTT", Space::Application),
            _ => ("handshake", Space::Handshake),
        };
        let secrets = self.secrets_of(idx);
        let state = &mut self.states[idx];
        state.long(
            d,
            &buf[..end],
            pn_offset,
            (packet_type, space),
            secrets.as_ref(),
        );
        Some(at + end)
    }

    fn open_connection(&mut self, dcid: &[u8]) -> usize {
        let (client, server) = initial_secrets(dcid);
        self.states.push(State {
            conn: Connection {
                original_dcid: dcid.to_vec(),
                packets: Vec::new(),
            },
            client_cids: Vec::new(),
            server_cids: vec![dcid.to_vec()],
            client_random: None,
            client_hello: Vec::new(),
            initial: [
                Keys::new(Suite::Aes128GcmSha256, &client),
                Keys::new(Suite::Aes128GcmSha256, &server),
            ],
            handshake: [None, None],
            early: None,
            app: [None, None],
            largest: BTreeMap::new(),
        });
        self.states.len() - 1
    }

    fn secrets_of(&self, idx: usize) -> Option<Secrets> {
        let random = self.states[idx].client_random.as_ref()?;
        self.secrets.get(random).cloned()
    }

    fn record_header_only(&mut self, d: &Datagram, len: usize, ty: &'static str, dcid: &[u8]) {
        if let Some(i) = self.find(d.uplink, dcid) {
            self.states[i].conn.packets.push(Packet {
                t_ns: d.t_ns,
                uplink: d.uplink,
                forwarded: d.forwarded,
                packet_type: ty,
                space: None,
                number: None,
                length: len,
                frames: None,
                unread: Some(format!("a {ty} packet carries no frames")),
            });
        }
    }
}

/// The full packet number from its `len`-byte truncation (RFC 9000, Appendix A.3).
fn full_pn(largest: Option<u64>, truncated: u64, len: usize) -> u64 {
    let expected = largest.map_or(0, |l| l + 1);
    let win = 1u64 << (len * 8);
    let hwin = win / 2;
    let mask = win - 1;
    let candidate = (expected & !mask) | truncated;
    if candidate + hwin <= expected && candidate < (1u64 << 62) - win {
        candidate + win
    } else if candidate > expected + hwin && candidate >= win {
        candidate - win
    } else {
        candidate
    }
}

/// Header protection removed from `buf` (a packet) whose packet number starts at `pn_offset`:
/// the unprotected header, the truncated number and its length.
fn unprotect(keys: &Keys, buf: &[u8], pn_offset: usize) -> Option<(Vec<u8>, u64, usize)> {
    let sample = buf.get(pn_offset + 4..pn_offset + 20)?;
    let mask = keys.mask(sample)?;
    let long = buf[0] & 0x80 != 0;
    let first = buf[0] ^ (mask[0] & if long { 0x0f } else { 0x1f });
    let pn_len = usize::from(first & 0x03) + 1;
    let mut header = buf.get(..pn_offset + pn_len)?.to_vec();
    header[0] = first;
    let mut pn = 0u64;
    for i in 0..pn_len {
        header[pn_offset + i] ^= mask[1 + i];
        pn = (pn << 8) | u64::from(header[pn_offset + i]);
    }
    Some((header, pn, pn_len))
}

impl State {
    fn push(&mut self, d: &Datagram, p: (&'static str, Option<Space>), len: usize) -> &mut Packet {
        self.conn.packets.push(Packet {
            t_ns: d.t_ns,
            uplink: d.uplink,
            forwarded: d.forwarded,
            packet_type: p.0,
            space: p.1,
            number: None,
            length: len,
            frames: None,
            unread: None,
        });
        self.conn.packets.last_mut().expect("just pushed")
    }

    /// Opens with `keys`: the packet's number and plaintext.
    fn open(
        &self,
        keys: &Keys,
        buf: &[u8],
        pn_offset: usize,
        (uplink, space): (bool, Space),
    ) -> Option<(u64, Vec<u8>, u8)> {
        let (header, truncated, pn_len) = unprotect(keys, buf, pn_offset)?;
        let pn = full_pn(
            self.largest.get(&(uplink, space)).copied(),
            truncated,
            pn_len,
        );
        let plain = keys.open(pn, &header, &buf[pn_offset + pn_len..])?;
        Some((pn, plain, header[0]))
    }

    fn read_plain(&mut self, uplink: bool, space: Space, pn: u64, plain: &[u8]) -> Vec<Value> {
        let e = self.largest.entry((uplink, space)).or_insert(pn);
        *e = (*e).max(pn);
        let (frames, carried) = frames::parse(plain);
        for cid in carried.new_cids {
            let ids = if uplink {
                &mut self.client_cids
            } else {
                &mut self.server_cids
            };
            if !ids.contains(&cid) {
                ids.push(cid);
            }
        }
        if uplink && space == Space::Initial && self.client_random.is_none() {
            for (offset, data) in carried.crypto {
                // Contiguous from 0 only: the random is in the first 38 bytes.
                if offset as usize == self.client_hello.len() {
                    self.client_hello.extend_from_slice(&data);
                }
            }
            // ClientHello: type (1), length (3), legacy_version (2), random (32).
            if self.client_hello.len() >= 38 && self.client_hello[0] == 1 {
                self.client_random = Some(self.client_hello[6..38].to_vec());
            }
        }
        frames
    }

    fn long(
        &mut self,
        d: &Datagram,
        buf: &[u8],
        pn_offset: usize,
        (packet_type, space): (&'static str, Space),
        secrets: Option<&Secrets>,
    ) {
        let dir = usize::from(!d.uplink);
        if space == Space::Handshake && self.handshake[dir].is_none() {
            let secret = secrets.and_then(|s| {
                if d.uplink {
                    s.client_handshake.clone()
                } else {
                    s.server_handshake.clone()
                }
            });
            self.handshake[dir] = secret.and_then(|s| keys_of_secret(&s, buf, pn_offset));
        }
        if packet_type == "0RTT" && self.early.is_none() {
            let secret = secrets.and_then(|s| s.client_early.clone());
            self.early = secret.and_then(|s| keys_of_secret(&s, buf, pn_offset));
        }
        let keys = match (packet_type, space) {
            ("0RTT", _) => self.early.as_ref(),
            (_, Space::Initial) => self.initial[dir].as_ref(),
            _ => self.handshake[dir].as_ref(),
        };
        let had_keys = keys.is_some();
        let opened = keys.and_then(|k| self.open(k, buf, pn_offset, (d.uplink, space)));
        let (number, frames, unread) = match opened {
            Some((pn, plain, _)) => (
                Some(pn),
                Some(self.read_plain(d.uplink, space, pn, &plain)),
                None,
            ),
            None => (None, None, Some(why_unread(had_keys, secrets.is_some()))),
        };
        let p = self.push(d, (packet_type, Some(space)), buf.len());
        p.number = number;
        p.frames = frames;
        p.unread = unread;
    }

    fn one_rtt(&mut self, d: &Datagram, buf: &[u8], pn_offset: usize, secrets: Option<&Secrets>) {
        let dir = usize::from(!d.uplink);
        if self.app[dir].is_none() {
            let secret = secrets.and_then(|s| {
                if d.uplink {
                    s.client_app.clone()
                } else {
                    s.server_app.clone()
                }
            });
            self.app[dir] = secret
                .and_then(|s| keys_of_secret(&s, buf, pn_offset))
                .map(|keys| PhaseKeys { keys, phase: false });
        }
        let mut opened = None;
        let mut advanced = None;
        if let Some(app) = &self.app[dir] {
            let space = (d.uplink, Space::Application);
            opened = self.open(&app.keys, buf, pn_offset, space);
            // Not under the current keys: the next key phase's (RFC 9001, Section 6).
            if opened.is_none()
                && let Some(next) = app.keys.next_phase()
                && let Some(o) = self.open(&next, buf, pn_offset, space)
            {
                opened = Some(o);
                advanced = Some(PhaseKeys {
                    keys: next,
                    phase: !app.phase,
                });
            }
        }
        if advanced.is_some() {
            self.app[dir] = advanced;
        }
        let had_keys = self.app[dir].is_some();
        let (number, frames, unread) = match opened {
            Some((pn, plain, _)) => (
                Some(pn),
                Some(self.read_plain(d.uplink, Space::Application, pn, &plain)),
                None,
            ),
            None => (None, None, Some(why_unread(had_keys, secrets.is_some()))),
        };
        let p = self.push(d, ("1RTT", Some(Space::Application)), buf.len());
        p.number = number;
        p.frames = frames;
        p.unread = unread;
    }
}

/// The keys of a key-log `secret`: its suite is the one whose keys open the packet (a secret of
/// 32 bytes is AES-128-GCM's or ChaCha20-Poly1305's).
fn keys_of_secret(secret: &[u8], buf: &[u8], pn_offset: usize) -> Option<Keys> {
    let suites = Suite::for_secret_len(secret.len());
    for &suite in suites {
        let Some(keys) = Keys::new(suite, secret) else {
            continue;
        };
        // The first packet under these keys tells the suite: it opens under the right one (its
        // number is small and near 0 whatever the truncation).
        if let Some((header, truncated, pn_len)) = unprotect(&keys, buf, pn_offset) {
            let pn = full_pn(None, truncated, pn_len);
            if keys.open(pn, &header, &buf[pn_offset + pn_len..]).is_some() || suites.len() == 1 {
                return Some(keys);
            }
        }
    }
    None
}

fn why_unread(had_keys: bool, had_secrets: bool) -> String {
    match (had_keys, had_secrets) {
        (true, _) => "did not open with the connection's keys".into(),
        (false, true) => "the key log has no secret for this packet's keys".into(),
        (false, false) => "the key log has no secrets of this connection".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 9000, Appendix A.3's example.
    #[test]
    fn a_truncated_packet_number_is_decoded_as_rfc_9000_says() {
        assert_eq!(full_pn(Some(0xa82f30ea), 0x9b32, 2), 0xa82f9b32);
        assert_eq!(full_pn(None, 0, 1), 0);
        assert_eq!(full_pn(Some(254), 1, 1), 257);
    }

    #[test]
    fn the_key_log_is_read_by_client_random() {
        let log = "CLIENT_HANDSHAKE_TRAFFIC_SECRET 0102 aabb\nSERVER_TRAFFIC_SECRET_0 0102 ccdd\n\
                   # a comment\nNOT_A_SECRET 0102 eeff\nCLIENT_TRAFFIC_SECRET_0 zz 00\n";
        let s = parse_keylog(log);
        assert_eq!(s.len(), 1);
        let s = &s[&vec![1u8, 2]];
        assert_eq!(s.client_handshake, Some(vec![0xaa, 0xbb]));
        assert_eq!(s.server_app, Some(vec![0xcc, 0xdd]));
        assert_eq!(s.client_app, None);
    }
}
