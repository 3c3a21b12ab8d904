//! QUIC frames (RFC 9000, Section 19) of a decrypted packet payload, as qlog 0.3 `QuicFrame`
//! objects (draft-ietf-quic-qlog-quic-events): `frame_type` and the fields qvis reads — stream
//! ids, offsets and lengths for its multiplexing view, acknowledged ranges for its sequence view.
//! A payload that does not parse ends in one `unknown` frame saying where.

use serde_json::{Value, json};

/// A reader of a byte slice with QUIC's variable-length integers.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0 }
    }

    pub fn pos(&self) -> usize {
        self.pos
    }

    pub fn left(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub fn u8(&mut self) -> Option<u8> {
        let b = *self.buf.get(self.pos)?;
        self.pos += 1;
        Some(b)
    }

    pub fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let s = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }

    /// A variable-length integer (RFC 9000, Section 16).
    pub fn varint(&mut self) -> Option<u64> {
        let first = self.u8()?;
        let len = 1usize << (first >> 6);
        let mut v = u64::from(first & 0x3f);
        for _ in 1..len {
            v = (v << 8) | u64::from(self.u8()?);
        }
        Some(v)
    }
}

/// What a payload carries beside its qlog frames: what decoding the rest of the connection needs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Carried {
    /// CRYPTO frames' data by offset (the ClientHello's random names the connection's secrets).
    pub crypto: Vec<(u64, Vec<u8>)>,
    /// Connection IDs issued by NEW_CONNECTION_ID (the peer sends to them).
    pub new_cids: Vec<Vec<u8>>,
}

/// The frames of `payload`, in order (consecutive PADDING bytes are one frame with their count).
pub fn frames(payload: &[u8]) -> Vec<Value> {
    parse(payload).0
}

/// [`frames`], and what they carry for the decoder.
pub fn parse(payload: &[u8]) -> (Vec<Value>, Carried) {
    let mut r = Reader::new(payload);
    let mut out: Vec<Value> = Vec::new();
    let mut carried = Carried::default();
    while r.left() > 0 {
        let at = r.pos();
        match frame(&mut r, &mut carried) {
            Some(Frame::Padding) => {
                let n = r.pos() - at;
                match out.last_mut() {
                    Some(last) if last["frame_type"] == "padding" => {
                        let len = last["length"].as_u64().unwrap_or(0) + n as u64;
                        last["length"] = json!(len);
                        last["payload_length"] = json!(len);
                    }
                    _ => out
                        .push(json!({ "frame_type": "padding", "length": n, "payload_length": n })),
                }
            }
            Some(Frame::Other(v)) => out.push(v),
            None => {
                out.push(json!({
                    "frame_type": "unknown",
                    "raw": { "length": payload.len() - at },
                    "quiclab_note": format!("frames not parsed from byte {at} on"),
                }));
                break;
            }
        }
    }
    (out, carried)
}

enum Frame {
    Padding,
    Other(Value),
}

fn frame(r: &mut Reader<'_>, carried: &mut Carried) -> Option<Frame> {
    let ty = r.varint()?;
    let v = match ty {
        0x00 => return Some(Frame::Padding),
        0x01 => json!({ "frame_type": "ping" }),
        0x02 | 0x03 => {
            let largest = r.varint()?;
            let delay = r.varint()?;
            let count = r.varint()?;
            let first = r.varint()?;
            let mut ranges = Vec::new();
            let mut hi = largest;
            let mut lo = largest.checked_sub(first)?;
            ranges.push(if lo == hi {
                json!([lo])
            } else {
                json!([lo, hi])
            });
            for _ in 0..count {
                let gap = r.varint()?;
                let len = r.varint()?;
                hi = lo.checked_sub(gap)?.checked_sub(2)?;
                lo = hi.checked_sub(len)?;
                ranges.push(if lo == hi {
                    json!([lo])
                } else {
                    json!([lo, hi])
                });
            }
            // Ascending, as qlog lists them.
            ranges.reverse();
            let mut f = json!({ "frame_type": "ack", "ack_delay": delay, "acked_ranges": ranges });
            if ty == 0x03 {
                f["ect0"] = json!(r.varint()?);
                f["ect1"] = json!(r.varint()?);
                f["ce"] = json!(r.varint()?);
            }
            f
        }
        0x04 => json!({
            "frame_type": "reset_stream",
            "stream_id": r.varint()?,
            "error_code": r.varint()?,
            "final_size": r.varint()?,
        }),
        0x05 => json!({
            "frame_type": "stop_sending",
            "stream_id": r.varint()?,
            "error_code": r.varint()?,
        }),
        0x06 => {
            let offset = r.varint()?;
            let length = r.varint()?;
            let data = r.bytes(usize::try_from(length).ok()?)?;
            carried.crypto.push((offset, data.to_vec()));
            json!({ "frame_type": "crypto", "offset": offset, "length": length })
        }
        0x07 => {
            let len = r.varint()?;
            r.bytes(usize::try_from(len).ok()?)?;
            json!({ "frame_type": "new_token", "token": { "length": len } })
        }
        0x08..=0x0f => {
            let stream_id = r.varint()?;
            let offset = if ty & 0x04 != 0 { r.varint()? } else { 0 };
            let length = if ty & 0x02 != 0 {
                r.varint()?
            } else {
                r.left() as u64
            };
            r.bytes(usize::try_from(length).ok()?)?;
            json!({
                "frame_type": "stream",
                "stream_id": stream_id,
                "offset": offset,
                "length": length,
                "fin": ty & 0x01 != 0,
            })
        }
        0x10 => json!({ "frame_type": "max_data", "maximum": r.varint()? }),
        0x11 => json!({
            "frame_type": "max_stream_data",
            "stream_id": r.varint()?,
            "maximum": r.varint()?,
        }),
        0x12 | 0x13 => json!({
            "frame_type": "max_streams",
            "stream_type": if ty == 0x12 { "bidirectional" } else { "unidirectional" },
            "maximum": r.varint()?,
        }),
        0x14 => json!({ "frame_type": "data_blocked", "limit": r.varint()? }),
        0x15 => json!({
            "frame_type": "stream_data_blocked",
            "stream_id": r.varint()?,
            "limit": r.varint()?,
        }),
        0x16 | 0x17 => json!({
            "frame_type": "streams_blocked",
            "stream_type": if ty == 0x16 { "bidirectional" } else { "unidirectional" },
            "limit": r.varint()?,
        }),
        0x18 => {
            let seq = r.varint()?;
            let retire = r.varint()?;
            let len = r.u8()? as usize;
            let cid = r.bytes(len)?;
            r.bytes(16)?;
            carried.new_cids.push(cid.to_vec());
            json!({
                "frame_type": "new_connection_id",
                "sequence_number": seq,
                "retire_prior_to": retire,
                "connection_id_length": len,
                "connection_id": hex(cid),
            })
        }
        0x19 => json!({ "frame_type": "retire_connection_id", "sequence_number": r.varint()? }),
        0x1a | 0x1b => {
            let data = r.bytes(8)?;
            json!({
                "frame_type": if ty == 0x1a { "path_challenge" } else { "path_response" },
                "data": hex(data),
            })
        }
        0x1c | 0x1d => {
            let code = r.varint()?;
            let frame_type = if ty == 0x1c { Some(r.varint()?) } else { None };
            let len = r.varint()?;
            let reason = r.bytes(usize::try_from(len).ok()?)?;
            let mut f = json!({
                "frame_type": "connection_close",
                "error_space": if ty == 0x1c { "transport" } else { "application" },
                "raw_error_code": code,
                "reason": String::from_utf8_lossy(reason),
            });
            if let Some(t) = frame_type {
                f["trigger_frame_type"] = json!(t);
            }
            f
        }
        0x1e => json!({ "frame_type": "handshake_done" }),
        0x30 | 0x31 => {
            let length = if ty == 0x31 {
                r.varint()?
            } else {
                r.left() as u64
            };
            r.bytes(usize::try_from(length).ok()?)?;
            json!({ "frame_type": "datagram", "length": length })
        }
        // ACK_FREQUENCY (draft-ietf-quic-ack-frequency), which quinn sends with
        // `quic_ack_frequency`.
        0xaf => json!({
            "frame_type": "ack_frequency",
            "sequence_number": r.varint()?,
            "ack_eliciting_threshold": r.varint()?,
            "request_max_ack_delay": r.varint()?,
            "reordering_threshold": r.varint()?,
        }),
        0x1f => json!({ "frame_type": "immediate_ack" }),
        _ => return None,
    };
    Some(Frame::Other(v))
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_read_as_rfc_9000_a1_says() {
        for (bytes, v) in [
            (
                &[0xc2, 0x19, 0x7c, 0x5e, 0xff, 0x14, 0xe8, 0x8c][..],
                151_288_809_941_952_652u64,
            ),
            (&[0x9d, 0x7f, 0x3e, 0x7d][..], 494_878_333),
            (&[0x7b, 0xbd][..], 15_293),
            (&[0x25][..], 37),
            (&[0x40, 0x25][..], 37),
        ] {
            assert_eq!(Reader::new(bytes).varint(), Some(v));
        }
    }

    #[test]
    fn a_payload_reads_as_its_frames() {
        // ACK of 10..=12 and 5..=7 (gap 1: 8 and 9 missing), a STREAM with offset, length and
        // FIN, three PADDING bytes, a PING.
        let payload = [
            0x02, 12, 0, 1, 2, 1,
            2, // ack: largest 12, delay 0, 1 range, first 2; gap 1, len 2
            0x0f, 4, 0x40, 100, 3, b'a', b'b', b'c', // stream 4, offset 100, length 3, fin
            0, 0, 0, 0x01,
        ];
        let f = frames(&payload);
        assert_eq!(f.len(), 4, "{f:#?}");
        assert_eq!(f[0]["frame_type"], "ack");
        assert_eq!(f[0]["acked_ranges"], json!([[5, 7], [10, 12]]));
        assert_eq!(f[1]["frame_type"], "stream");
        assert_eq!(
            (
                &f[1]["stream_id"],
                &f[1]["offset"],
                &f[1]["length"],
                &f[1]["fin"]
            ),
            (&json!(4), &json!(100), &json!(3), &json!(true))
        );
        assert_eq!(
            f[2],
            json!({ "frame_type": "padding", "length": 3, "payload_length": 3 })
        );
        assert_eq!(f[3]["frame_type"], "ping");
    }

    #[test]
    fn a_truncated_frame_is_said_not_guessed() {
        let f = frames(&[0x01, 0x21, 0x00, 0x00]);
        assert_eq!(f[0]["frame_type"], "ping");
        assert_eq!(f[1]["frame_type"], "unknown");
        assert_eq!(f[1]["raw"]["length"], 3);
    }
}
