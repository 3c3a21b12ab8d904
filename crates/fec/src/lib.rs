//! XOR forward error correction as gQUIC 2015 had it (seed 000's FEC module), sans-IO.
//!
//! The sender puts a small header in front of every datagram and, after every N datagrams (a
//! *group*), sends one parity datagram: the XOR of the group's payloads, zero-padded to the
//! longest, with the XOR of their lengths. The receiver rebuilds a datagram when exactly one of
//! its group is missing and the parity arrived; with two or more losses in a group (the parity
//! counts) nothing can be rebuilt. A partial group is closed by a flush timer (the caller's clock:
//! [`Encoder::flush_due`]) so the last datagrams of a burst are protected too.
//!
//! What this is not: gQUIC's FEC lived inside QUIC, so a revived packet was acknowledged and the
//! congestion controller never saw the loss. Under quinn it lives below QUIC (the socket), which
//! gives the same for revived packets, but parity datagrams are invisible to QUIC's congestion
//! window: they are extra load the controller does not account for (docs/fec.md).
//!
//! Wire format (big endian):
//! - data:   `0xD1`, group (u32), index in the group (u8), payload.
//! - parity: `0xF3`, group (u32), data datagrams in the group (u8), XOR of their lengths (u16),
//!   XOR of their payloads zero-padded to the longest.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

const DATA: u8 = 0xD1;
const PARITY: u8 = 0xF3;
/// Bytes in front of a data datagram.
pub const DATA_HEADER: usize = 6;
/// Bytes in front of a parity datagram.
pub const PARITY_HEADER: usize = 8;
/// Room to keep in the QUIC MTU for the header.
pub const MAX_HEADER: usize = PARITY_HEADER;
/// Group sizes accepted: at least 2 data datagrams (one parity per datagram would be duplication,
/// not XOR FEC), at most 64 (the decoder's bitmask; gQUIC's default was 10).
pub const MIN_GROUP: usize = 2;
pub const MAX_GROUP: usize = 64;
/// Groups the decoder keeps open behind the newest before judging them.
const WINDOW: u32 = 32;
/// The most consecutive groups counted as lost whole between two that arrived.
const MAX_GAP: u32 = 1 << 16;

/// Checks a group size (`--fec N`).
pub fn check_group(n: usize) -> Result<usize, String> {
    if (MIN_GROUP..=MAX_GROUP).contains(&n) {
        Ok(n)
    } else {
        Err(format!(
            "{n}: a group is {MIN_GROUP} to {MAX_GROUP} data datagrams (one parity datagram each; gQUIC's default was 10, seed 000's F_G ≈ 3 is N = 2)"
        ))
    }
}

/// A datagram as it came from the network.
#[derive(Debug, PartialEq, Eq)]
pub enum Packet<'a> {
    Data {
        group: u32,
        index: u8,
        payload: &'a [u8],
    },
    Parity {
        group: u32,
        count: u8,
        len_xor: u16,
        payload: &'a [u8],
    },
}

/// Why a datagram was not FEC's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Malformed {
    TooShort(usize),
    UnknownType(u8),
    BadIndex { index: u8, count: Option<u8> },
}

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Malformed::TooShort(n) => write!(f, "{n} bytes: shorter than an FEC header"),
            Malformed::UnknownType(t) => write!(f, "type byte {t:#04x} is neither data nor parity"),
            Malformed::BadIndex { index, count } => {
                write!(f, "index {index} / count {count:?} outside 1..={MAX_GROUP}")
            }
        }
    }
}

/// Reads a datagram's header.
pub fn parse(datagram: &[u8]) -> Result<Packet<'_>, Malformed> {
    let Some(&kind) = datagram.first() else {
        return Err(Malformed::TooShort(0));
    };
    let u32_at = |i: usize| {
        u32::from_be_bytes([
            datagram[i],
            datagram[i + 1],
            datagram[i + 2],
            datagram[i + 3],
        ])
    };
    match kind {
        DATA => {
            if datagram.len() < DATA_HEADER {
                return Err(Malformed::TooShort(datagram.len()));
            }
            let index = datagram[5];
            if index as usize >= MAX_GROUP {
                return Err(Malformed::BadIndex { index, count: None });
            }
            Ok(Packet::Data {
                group: u32_at(1),
                index,
                payload: &datagram[DATA_HEADER..],
            })
        }
        PARITY => {
            if datagram.len() < PARITY_HEADER {
                return Err(Malformed::TooShort(datagram.len()));
            }
            let count = datagram[5];
            if count == 0 || count as usize > MAX_GROUP {
                return Err(Malformed::BadIndex {
                    index: 0,
                    count: Some(count),
                });
            }
            Ok(Packet::Parity {
                group: u32_at(1),
                count,
                len_xor: u16::from_be_bytes([datagram[6], datagram[7]]),
                payload: &datagram[PARITY_HEADER..],
            })
        }
        t => Err(Malformed::UnknownType(t)),
    }
}

/// XORs `src` into `acc`, growing `acc` with zeros to `src`'s length.
fn xor_into(acc: &mut Vec<u8>, src: &[u8]) {
    if acc.len() < src.len() {
        acc.resize(src.len(), 0);
    }
    for (a, s) in acc.iter_mut().zip(src) {
        *a ^= s;
    }
}

/// What a sender did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EncoderCounters {
    pub data_sent: u64,
    pub parity_sent: u64,
    /// Parity datagrams of partial groups, sent by the flush timer.
    pub flushed: u64,
}

impl EncoderCounters {
    /// Sums another sender's counters into these (a socket's peers, a server's sockets).
    pub fn add(&mut self, o: &EncoderCounters) {
        self.data_sent += o.data_sent;
        self.parity_sent += o.parity_sent;
        self.flushed += o.flushed;
    }
}

/// The sending half: headers, the group's running XOR, parity datagrams.
#[derive(Debug)]
pub struct Encoder {
    n: usize,
    group: u32,
    index: usize,
    xor: Vec<u8>,
    len_xor: u16,
    /// When the open group's first datagram was sent (the flush timer counts from here).
    opened_ns: Option<u64>,
    pub counters: EncoderCounters,
}

impl Encoder {
    /// Groups of `n` data datagrams (see [`check_group`]).
    pub fn new(n: usize) -> Result<Encoder, String> {
        Ok(Encoder {
            n: check_group(n)?,
            group: 0,
            index: 0,
            xor: Vec::new(),
            len_xor: 0,
            opened_ns: None,
            counters: EncoderCounters::default(),
        })
    }

    pub fn group_size(&self) -> usize {
        self.n
    }

    /// Wraps one datagram (`payload` ≤ 65535 bytes) sent at `now_ns`: the data datagram to send,
    /// and the group's parity datagram when this one completes it.
    pub fn encode(&mut self, payload: &[u8], now_ns: u64) -> (Vec<u8>, Option<Vec<u8>>) {
        let wire = self.data_datagram(payload);
        let parity = self.sent(payload, now_ns);
        (wire, parity)
    }

    /// The data datagram `payload` would be sent as, without counting it sent (a socket that
    /// cannot send it now leaves the group as it was).
    pub fn data_datagram(&self, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(DATA_HEADER + payload.len());
        out.push(DATA);
        out.extend_from_slice(&self.group.to_be_bytes());
        out.push(self.index as u8);
        out.extend_from_slice(payload);
        out
    }

    /// Counts `payload` sent at `now_ns` (after [`Encoder::data_datagram`]): the group's parity
    /// datagram when it completes the group.
    pub fn sent(&mut self, payload: &[u8], now_ns: u64) -> Option<Vec<u8>> {
        xor_into(&mut self.xor, payload);
        self.len_xor ^= payload.len() as u16;
        self.opened_ns.get_or_insert(now_ns);
        self.index += 1;
        self.counters.data_sent += 1;
        (self.index == self.n).then(|| self.close())
    }

    /// The open group's parity datagram if its first datagram is at least `after_ns` old at
    /// `now_ns` (the flush timer: gQUIC's was max(RTT/2, 5 ms)).
    pub fn flush_due(&mut self, now_ns: u64, after_ns: u64) -> Option<Vec<u8>> {
        let opened = self.opened_ns?;
        if now_ns.saturating_sub(opened) < after_ns {
            return None;
        }
        self.counters.flushed += 1;
        Some(self.close())
    }

    /// When the open group is due for a flush (None: no open group).
    pub fn flush_deadline(&self, after_ns: u64) -> Option<u64> {
        self.opened_ns.map(|t| t + after_ns)
    }

    fn close(&mut self) -> Vec<u8> {
        let mut out = Vec::with_capacity(PARITY_HEADER + self.xor.len());
        out.push(PARITY);
        out.extend_from_slice(&self.group.to_be_bytes());
        out.push(self.index as u8);
        out.extend_from_slice(&self.len_xor.to_be_bytes());
        out.extend_from_slice(&self.xor);
        self.counters.parity_sent += 1;
        self.group = self.group.wrapping_add(1);
        self.index = 0;
        self.xor.clear();
        self.len_xor = 0;
        self.opened_ns = None;
        out
    }
}

/// What a receiver did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DecoderCounters {
    pub data_received: u64,
    pub parity_received: u64,
    /// Datagrams rebuilt from a parity (exactly one missing in their group).
    pub rebuilt: u64,
    /// Groups judged with every data datagram there (nothing to rebuild).
    pub groups_complete: u64,
    /// Groups that lost data and could not rebuild it: two or more of the group's datagrams (the
    /// parity counts) were lost.
    pub unrecoverable_groups: u64,
    /// Data datagrams lost for good in those groups (as far as the receiver can tell: a group
    /// whose parity was lost is counted by the group size).
    pub unrecovered: u64,
    /// Datagrams that were not FEC's (bad header): dropped.
    pub malformed: u64,
    /// Copies of a data datagram already received or rebuilt: handed on (QUIC drops duplicates).
    pub duplicates: u64,
}

impl DecoderCounters {
    /// Sums another receiver's counters into these.
    pub fn add(&mut self, o: &DecoderCounters) {
        self.data_received += o.data_received;
        self.parity_received += o.parity_received;
        self.rebuilt += o.rebuilt;
        self.groups_complete += o.groups_complete;
        self.unrecoverable_groups += o.unrecoverable_groups;
        self.unrecovered += o.unrecovered;
        self.malformed += o.malformed;
        self.duplicates += o.duplicates;
    }
}

/// Where group `g` stands relative to group `newest`, in serial-number arithmetic (RFC 1982 on
/// 32 bits): > 0 newer, 0 the same, < 0 behind. The one comparison for "newer" and "stale": every
/// pair of group numbers is exactly one of newer, within the window, or stale, so no group can
/// be kept open forever.
fn position(g: u32, newest: u32) -> i64 {
    i64::from(g.wrapping_sub(newest) as i32)
}

/// The most groups a decoder holds open at once (the window and the newest).
pub const MAX_OPEN_GROUPS: usize = WINDOW as usize + 1;

#[derive(Debug, Default)]
struct Group {
    /// Data indices received or rebuilt.
    have: u64,
    xor: Vec<u8>,
    len_xor: u16,
    parity: Option<(u8, u16, Vec<u8>)>,
    rebuilt: bool,
}

impl Group {
    fn have_count(&self) -> u32 {
        self.have.count_ones()
    }
}

/// What to hand to QUIC for one datagram from the network.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Decoded {
    /// The datagram's own payload, as a range of it (None: a parity or malformed datagram).
    pub payload: Option<std::ops::Range<usize>>,
    /// A datagram of the same group rebuilt thanks to this one.
    pub rebuilt: Option<Vec<u8>>,
}

/// The receiving half: strips headers, rebuilds single losses, counts.
#[derive(Debug)]
pub struct Decoder {
    n: usize,
    groups: BTreeMap<u32, Group>,
    newest: Option<u32>,
    /// The lowest group not judged yet: a group below a judged one that never showed up lost
    /// every datagram (encoders number their groups from 0, one after the other).
    next_judged: u32,
    pub counters: DecoderCounters,
}

impl Decoder {
    /// `n`: the sender's group size (only used to count the losses of a group whose parity is
    /// lost).
    pub fn new(n: usize) -> Result<Decoder, String> {
        Ok(Decoder {
            n: check_group(n)?,
            groups: BTreeMap::new(),
            newest: None,
            next_judged: 0,
            counters: DecoderCounters::default(),
        })
    }

    /// Takes one datagram from the network.
    pub fn decode(&mut self, datagram: &[u8]) -> Decoded {
        let packet = match parse(datagram) {
            Ok(p) => p,
            Err(_) => {
                self.counters.malformed += 1;
                return Decoded::default();
            }
        };
        let group_id = match packet {
            Packet::Data { group, .. } | Packet::Parity { group, .. } => group,
        };
        // Groups far behind the newest were judged already: a late datagram of one is handed on
        // (data) or ignored (parity), never rebuilt from.
        let stale = self
            .newest
            .is_some_and(|n| position(group_id, n) < -(WINDOW as i64));
        let mut out = Decoded::default();
        match packet {
            Packet::Data { index, payload, .. } => {
                self.counters.data_received += 1;
                out.payload = Some(DATA_HEADER..datagram.len());
                if stale {
                    return out;
                }
                let g = self.groups.entry(group_id).or_default();
                let bit = 1u64 << index;
                if g.have & bit != 0 {
                    self.counters.duplicates += 1;
                    return out;
                }
                g.have |= bit;
                xor_into(&mut g.xor, payload);
                g.len_xor ^= payload.len() as u16;
            }
            Packet::Parity {
                count,
                len_xor,
                payload,
                ..
            } => {
                self.counters.parity_received += 1;
                if stale {
                    return out;
                }
                let g = self.groups.entry(group_id).or_default();
                if g.parity.is_none() {
                    g.parity = Some((count, len_xor, payload.to_vec()));
                }
            }
        }
        out.rebuilt = self.try_rebuild(group_id);
        self.advance(group_id);
        debug_assert!(self.groups.len() <= MAX_OPEN_GROUPS);
        out
    }

    /// Rebuilds the group's one missing datagram, if exactly one is missing and the parity is
    /// there.
    fn try_rebuild(&mut self, group_id: u32) -> Option<Vec<u8>> {
        let g = self.groups.get_mut(&group_id)?;
        let (count, len_xor, parity) = g.parity.as_ref()?;
        if g.rebuilt || g.have_count() + 1 != u32::from(*count) {
            return None;
        }
        let missing = (0..*count).find(|i| g.have & (1u64 << i) == 0)?;
        let len = (len_xor ^ g.len_xor) as usize;
        let mut data = parity.clone();
        xor_into(&mut data, &g.xor);
        if len > data.len() {
            // The parity and the datagrams disagree (a corrupt group): rebuild nothing.
            self.counters.malformed += 1;
            return None;
        }
        data.truncate(len);
        g.have |= 1u64 << missing;
        g.rebuilt = true;
        self.counters.rebuilt += 1;
        Some(data)
    }

    /// Moves the window to `group_id` if it is newer, judging the groups that fall out of it.
    fn advance(&mut self, group_id: u32) {
        let newer = self.newest.is_none_or(|n| position(group_id, n) > 0);
        if newer {
            self.newest = Some(group_id);
        }
        let newest = self.newest.unwrap_or(group_id);
        // The same comparison as "stale" in `decode`: every open group is within WINDOW behind
        // the newest, so at most WINDOW + 1 groups are ever open.
        let old: Vec<u32> = self
            .groups
            .keys()
            .copied()
            .filter(|&g| position(g, newest) < -(WINDOW as i64))
            .collect();
        for g in old {
            if let Some(group) = self.groups.remove(&g) {
                self.judge(g, &group);
            }
        }
    }

    /// Counts a group's fate once it leaves the window (or at [`Decoder::finish`]), after the
    /// groups before it that never showed up: each lost all its datagrams (counted as N data; a
    /// flushed partial group had fewer). Groups lost whole after the last one seen stay unknown
    /// to the receiver. A gap beyond [`MAX_GAP`] groups is not counted (a corrupt header, not
    /// losses).
    fn judge(&mut self, id: u32, g: &Group) {
        let gap = id.wrapping_sub(self.next_judged);
        if gap < MAX_GAP {
            self.counters.unrecoverable_groups += u64::from(gap);
            self.counters.unrecovered += u64::from(gap) * self.n as u64;
        }
        if gap < u32::MAX / 2 {
            self.next_judged = id.wrapping_add(1);
        }
        let count = g.parity.as_ref().map_or(self.n as u32, |p| u32::from(p.0));
        let have = g.have_count();
        if have >= count {
            if !g.rebuilt {
                self.counters.groups_complete += 1;
            }
        } else {
            self.counters.unrecoverable_groups += 1;
            self.counters.unrecovered += u64::from(count - have);
        }
    }

    /// Groups open now (at most [`MAX_OPEN_GROUPS`]).
    pub fn open_groups(&self) -> usize {
        self.groups.len()
    }

    /// Judges every open group (the end of a run): a group still open at the end whose parity
    /// never came is judged by the group size, so call this only once traffic has stopped.
    pub fn finish(&mut self) {
        let groups = std::mem::take(&mut self.groups);
        for (&id, g) in &groups {
            self.judge(id, g);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Datagrams of different lengths with recognisable bytes.
    fn datagrams(k: usize) -> Vec<Vec<u8>> {
        (0..k)
            .map(|i| {
                (0..(100 + 37 * i))
                    .map(|b| (b * 7 + i * 13) as u8)
                    .collect()
            })
            .collect()
    }

    /// Encodes `data` into the wire datagrams in send order.
    fn wire(enc: &mut Encoder, data: &[Vec<u8>]) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        for d in data {
            let (w, p) = enc.encode(d, 0);
            out.push(w);
            out.extend(p);
        }
        out
    }

    #[test]
    fn group_sizes_are_checked() {
        assert!(Encoder::new(1).unwrap_err().contains("2 to 64"));
        assert!(Encoder::new(65).is_err());
        assert!(Decoder::new(0).is_err());
        assert_eq!(Encoder::new(2).unwrap().group_size(), 2);
    }

    #[test]
    fn round_trip_without_loss_hands_on_every_payload_and_no_parity() {
        let data = datagrams(6);
        let mut enc = Encoder::new(3).unwrap();
        let w = wire(&mut enc, &data);
        assert_eq!(w.len(), 8, "6 data + 2 parity");
        assert_eq!(enc.counters.data_sent, 6);
        assert_eq!(enc.counters.parity_sent, 2);
        let mut dec = Decoder::new(3).unwrap();
        let mut got = Vec::new();
        for d in &w {
            let out = dec.decode(d);
            assert_eq!(out.rebuilt, None);
            if let Some(r) = out.payload {
                got.push(d[r].to_vec());
            }
        }
        assert_eq!(got, data);
        dec.finish();
        assert_eq!(dec.counters.groups_complete, 2);
        assert_eq!(dec.counters.unrecoverable_groups, 0);
    }

    #[test]
    fn exactly_one_loss_per_group_is_rebuilt_byte_exact_two_are_not() {
        let data = datagrams(8);
        let mut enc = Encoder::new(4).unwrap();
        let w = wire(&mut enc, &data);
        // Wire order: d0 d1 d2 d3 P0 d4 d5 d6 d7 P1. Lose d1 (one in group 0) and d5, d6 (two in
        // group 1).
        let mut dec = Decoder::new(4).unwrap();
        let mut rebuilt = Vec::new();
        for (i, d) in w.iter().enumerate() {
            if [1, 6, 7].contains(&i) {
                continue;
            }
            rebuilt.extend(dec.decode(d).rebuilt);
        }
        assert_eq!(rebuilt, vec![data[1].clone()], "byte-exact, its own length");
        dec.finish();
        assert_eq!(dec.counters.rebuilt, 1);
        assert_eq!(dec.counters.unrecoverable_groups, 1);
        assert_eq!(dec.counters.unrecovered, 2);
        assert_eq!(
            dec.counters.groups_complete, 0,
            "group 0 was rebuilt, not complete"
        );
    }

    #[test]
    fn a_loss_rebuilt_when_the_parity_comes_before_the_last_data_and_a_late_original_is_a_duplicate()
     {
        let data = datagrams(2);
        let mut enc = Encoder::new(2).unwrap();
        let w = wire(&mut enc, &data); // d0 d1 P
        let mut dec = Decoder::new(2).unwrap();
        assert_eq!(dec.decode(&w[2]).rebuilt, None, "parity first: two missing");
        let out = dec.decode(&w[1]);
        assert_eq!(out.rebuilt.as_deref(), Some(&data[0][..]));
        // The original arrives late: handed on (QUIC drops the copy), counted.
        let out = dec.decode(&w[0]);
        assert!(out.payload.is_some() && out.rebuilt.is_none());
        assert_eq!(dec.counters.duplicates, 1);
    }

    #[test]
    fn partial_groups_flush_on_the_timer() {
        let data = datagrams(3);
        let mut enc = Encoder::new(10).unwrap();
        let (d0, p) = enc.encode(&data[0], 1_000);
        assert!(p.is_none());
        let (d1, _) = enc.encode(&data[1], 3_000);
        assert_eq!(
            enc.flush_deadline(5_000),
            Some(6_000),
            "from the group's first datagram"
        );
        assert_eq!(enc.flush_due(5_999, 5_000), None);
        let parity = enc.flush_due(6_000, 5_000).expect("due");
        assert_eq!(enc.flush_deadline(5_000), None);
        assert_eq!(enc.counters.flushed, 1);
        // The partial group (2 of 10) rebuilds its one loss.
        let mut dec = Decoder::new(10).unwrap();
        dec.decode(&d1);
        assert_eq!(dec.decode(&parity).rebuilt.as_deref(), Some(&data[0][..]));
        let _ = d0;
        // The next datagram opens the next group.
        let (d2, _) = enc.encode(&data[2], 7_000);
        assert!(matches!(
            parse(&d2),
            Ok(Packet::Data {
                group: 1,
                index: 0,
                ..
            })
        ));
    }

    #[test]
    fn malformed_datagrams_are_counted_and_dropped_never_a_panic() {
        let mut dec = Decoder::new(2).unwrap();
        let bad: [&[u8]; 6] = [
            &[],
            &[DATA, 0, 0],
            &[PARITY, 0, 0, 0, 1, 2, 0],
            &[0x42; 40],
            &[DATA, 0, 0, 0, 0, 200, 1, 2],
            &[PARITY, 0, 0, 0, 0, 0, 0, 0, 1],
        ];
        for b in bad {
            let out = dec.decode(b);
            assert_eq!(out, Decoded::default(), "{b:?}");
        }
        assert_eq!(dec.counters.malformed, 6);
        // A parity whose length XOR claims more than it carries rebuilds nothing.
        let mut lying = vec![PARITY, 0, 0, 0, 9, 2, 0x7f, 0xff];
        lying.extend([1, 2, 3]);
        dec.decode(&lying);
        let out = dec.decode(&[DATA, 0, 0, 0, 9, 0, 5, 5]);
        assert_eq!(out.rebuilt, None);
        // Random bytes never panic.
        let mut x: u32 = 12345;
        for len in 0..300 {
            let v: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    (x % 4) as u8 * 0x40 + if x.is_multiple_of(3) { 0x11 } else { 0x33 }
                })
                .collect();
            dec.decode(&v);
        }
    }

    #[test]
    fn groups_lost_whole_are_counted_when_a_later_group_is_judged() {
        let data = datagrams(2);
        let mut enc = Encoder::new(2).unwrap();
        let mut dec = Decoder::new(2).unwrap();
        // Group 0 arrives, groups 1 and 2 are lost entirely (data and parity), group 3 arrives.
        for i in 0..4 {
            let w = wire(&mut enc, &data);
            if i == 0 || i == 3 {
                for d in w {
                    dec.decode(&d);
                }
            }
        }
        dec.finish();
        assert_eq!(dec.counters.groups_complete, 2);
        assert_eq!(
            dec.counters.unrecoverable_groups, 2,
            "the two groups never seen"
        );
        assert_eq!(dec.counters.unrecovered, 4);
        // A group lost whole at the start counts too (encoders number from 0).
        let mut enc = Encoder::new(2).unwrap();
        let mut dec = Decoder::new(2).unwrap();
        let _lost = wire(&mut enc, &data);
        for d in wire(&mut enc, &data) {
            dec.decode(&d);
        }
        dec.finish();
        assert_eq!(dec.counters.unrecoverable_groups, 1);
    }

    #[test]
    fn old_groups_are_judged_as_the_window_moves() {
        let data = datagrams(2);
        let mut enc = Encoder::new(2).unwrap();
        let mut dec = Decoder::new(2).unwrap();
        // Group 0 loses both data datagrams (parity arrives), then WINDOW + 1 clean groups.
        let w0 = wire(&mut enc, &data);
        dec.decode(&w0[2]);
        for _ in 0..=WINDOW {
            for d in wire(&mut enc, &data) {
                dec.decode(&d);
            }
        }
        assert_eq!(
            dec.counters.unrecoverable_groups, 1,
            "judged when it left the window"
        );
        assert_eq!(dec.counters.unrecovered, 2);
        // A late datagram of a judged group is handed on, not rebuilt from.
        let out = dec.decode(&w0[0]);
        assert!(out.payload.is_some() && out.rebuilt.is_none());
    }

    #[test]
    fn group_numbers_half_the_space_away_never_stay_open() {
        // Group numbers 2^31 - 1 and 2^31 ahead of the newest were neither "newer" nor "stale"
        // under two separate comparisons: each was kept open forever, one more per newest.
        let mut dec = Decoder::new(2).unwrap();
        let enc = Encoder::new(2).unwrap();
        let datagram = |group: u32, index: u8| {
            let mut d = enc.data_datagram(b"payload");
            d[1..5].copy_from_slice(&group.to_be_bytes());
            d[5] = index;
            d
        };
        for newest in (0..2_000u32).map(|k| k * 40) {
            dec.decode(&datagram(newest, 0));
            for off in [(1u32 << 31) - 1, 1 << 31, (1 << 31) + 1, u32::MAX, 7] {
                dec.decode(&datagram(newest.wrapping_add(off), 1));
                assert!(
                    dec.open_groups() <= MAX_OPEN_GROUPS,
                    "{}",
                    dec.open_groups()
                );
            }
        }
        assert!(dec.open_groups() <= MAX_OPEN_GROUPS);
        assert_eq!(position(5, 3), 2);
        assert_eq!(position(3, 5), -2);
        assert!(position(1 << 31, 0) < 0 && position((1 << 31) - 1, 0) > 0);
    }
}
