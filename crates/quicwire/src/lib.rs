//! QUIC as a quiclab capture shows it (sans-IO): the pcapng's UDP datagrams ([`capture`]), opened
//! with the key log it embeds ([`keys`]: RFC 9001's packet and header protection, by `ring`),
//! split into connections and packets ([`decode`]), their frames read ([`frames`]); and a qlog
//! that lacks frames — quinn 0.11 logs none — completed with the frames of the captured packets
//! it names ([`add_frames`]). So qvis's sequence and multiplexing views have what they draw, at
//! the endpoint's own times.

pub mod capture;
pub mod decode;
pub mod frames;
pub mod keys;

use std::collections::HashMap;

use serde_json::Value;

pub use decode::{Connection, Packet, Space};

/// The QUIC connections of a pcapng capture (its bytes), each packet opened where the capture's
/// key log allows.
pub fn connections(pcapng: &[u8]) -> Result<Vec<Connection>, String> {
    let (datagrams, keylog) = capture::read(pcapng)?;
    let mut d = decode::Decoder::new(&keylog);
    for datagram in &datagrams {
        d.datagram(datagram);
    }
    Ok(d.finish())
}

/// A qlog with frames added.
#[derive(Debug, Clone, PartialEq)]
pub struct Completed {
    /// The JSON-SEQ text.
    pub text: String,
    /// Packet events (sent, received, lost) in it.
    pub packet_events: usize,
    /// Those that got their captured packet's frames.
    pub with_frames: usize,
}

fn space_of(packet_type: &str) -> Option<Space> {
    match packet_type {
        "initial" => Some(Space::Initial),
        "handshake" => Some(Space::Handshake),
        "0RTT" | "1RTT" => Some(Space::Application),
        _ => None,
    }
}

/// The direction, space and number a packet event of a `client` (or server) trace names.
fn key_of(event: &Value, client: bool) -> Option<(bool, Space, u64)> {
    let name = event.get("name")?.as_str()?;
    let sent = match name {
        "transport:packet_sent" | "recovery:packet_lost" => true,
        "transport:packet_received" => false,
        _ => return None,
    };
    let header = event.get("data")?.get("header")?;
    let space = space_of(header.get("packet_type")?.as_str()?)?;
    let number = header.get("packet_number")?.as_u64()?;
    // A client's sent packets go up, a server's come down.
    Some((sent == client, space, number))
}

/// A connection's opened packets by direction, number space and number.
fn index(c: &Connection) -> HashMap<(bool, Space, u64), &Packet> {
    c.packets
        .iter()
        .filter_map(|p| Some(((p.uplink, p.space?, p.number?), p)))
        .collect()
}

/// `qlog` (a JSON-SEQ trace written at the `client`'s end, or the server's) with each packet
/// event's `frames` — and `raw.length` when it has none — from the captured packet of the same
/// direction, number space and number, in the connection of `connections` that holds most of
/// its packets. Records that are not JSON pass unchanged; nothing is invented for a packet the
/// capture does not have or could not open.
pub fn add_frames(qlog: &str, client: bool, connections: &[Connection]) -> Completed {
    let records: Vec<&str> = qlog
        .split('\u{1e}')
        .filter(|r| !r.trim().is_empty())
        .collect();
    let mut parsed: Vec<Option<Value>> = records
        .iter()
        .map(|r| serde_json::from_str(r.trim_end()).ok())
        .collect();
    let keys: Vec<Option<(bool, Space, u64)>> = parsed
        .iter()
        .map(|v| v.as_ref().and_then(|v| key_of(v, client)))
        .collect();
    let indexes: Vec<HashMap<(bool, Space, u64), &Packet>> =
        connections.iter().map(index).collect();
    let matched = |ix: &HashMap<(bool, Space, u64), &Packet>| {
        keys.iter().flatten().filter(|k| ix.contains_key(k)).count()
    };
    let best_at = (0..indexes.len()).max_by_key(|&i| matched(&indexes[i]));
    let best = best_at.map(|i| &indexes[i]);
    // quinn 0.11 names an event's group by the connection ID in use when it was logged, so one
    // connection's trace falls into two groups (the client's first events under its random
    // Initial DCID, the rest under the server's ID) and qvis, which splits traces by group,
    // shows only the first few events. Every event of a trace whose connection the capture
    // holds is put in one group, the connection's original destination ID, the same in the
    // client's and the server's trace.
    let group = best_at
        .filter(|&i| matched(&indexes[i]) > 0)
        .map(|i| Value::String(frames::hex(&connections[i].original_dcid)));
    let mut with_frames = 0;
    for (v, key) in parsed.iter_mut().zip(&keys) {
        if let (Some(group), Some(event)) = (&group, v.as_mut().and_then(|v| v.as_object_mut()))
            && event.contains_key("time")
        {
            event.insert("group_id".into(), group.clone());
        }
        let (Some(v), Some(key), Some(ix)) = (v.as_mut(), key, best) else {
            continue;
        };
        let Some(p) = ix.get(key) else { continue };
        let Some(frames) = &p.frames else { continue };
        let Some(data) = v.get_mut("data").and_then(|d| d.as_object_mut()) else {
            continue;
        };
        data.insert("frames".into(), Value::Array(frames.clone()));
        data.entry("raw")
            .or_insert_with(|| serde_json::json!({ "length": p.length }));
        with_frames += 1;
    }
    let mut text = String::with_capacity(qlog.len() * 2);
    for (raw, v) in records.iter().zip(&parsed) {
        text.push('\u{1e}');
        match v {
            Some(v) => text.push_str(&v.to_string()),
            None => text.push_str(raw.trim_end()),
        }
        text.push('\n');
    }
    Completed {
        text,
        packet_events: keys.iter().flatten().count(),
        with_frames,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(uplink: bool, space: Space, number: u64, frames: Vec<Value>) -> Packet {
        Packet {
            t_ns: 0,
            uplink,
            forwarded: true,
            packet_type: "1RTT",
            space: Some(space),
            number: Some(number),
            length: 1200,
            frames: Some(frames),
            unread: None,
        }
    }

    #[test]
    fn a_client_trace_gets_the_frames_of_the_packets_it_sent_and_received() {
        let conn = Connection {
            original_dcid: vec![1],
            packets: vec![
                packet(
                    true,
                    Space::Application,
                    3,
                    vec![serde_json::json!({"frame_type": "ping"})],
                ),
                packet(
                    false,
                    Space::Application,
                    3,
                    vec![serde_json::json!({"frame_type": "stream", "stream_id": 0})],
                ),
            ],
        };
        let other = Connection {
            original_dcid: vec![2],
            packets: vec![packet(true, Space::Initial, 0, vec![])],
        };
        let qlog = "\u{1e}{\"qlog_format\":\"JSON-SEQ\",\"trace\":{}}\n\
                    \u{1e}{\"time\":1.0,\"name\":\"transport:packet_sent\",\"data\":{\"header\":{\"packet_type\":\"1RTT\",\"packet_number\":3}}}\n\
                    \u{1e}{\"time\":2.0,\"name\":\"transport:packet_received\",\"data\":{\"header\":{\"packet_type\":\"1RTT\",\"packet_number\":3}}}\n\
                    \u{1e}{\"time\":3.0,\"name\":\"transport:packet_received\",\"data\":{\"header\":{\"packet_type\":\"1RTT\",\"packet_number\":9}}}\n\
                    \u{1e}{\"time\":4.0,\"name\":\"recovery:metrics_updated\",\"data\":{\"cwnd\":12000}}\n";
        let c = add_frames(qlog, true, &[other, conn]);
        assert_eq!((c.packet_events, c.with_frames), (3, 2));
        let records: Vec<Value> = c
            .text
            .split('\u{1e}')
            .filter(|r| !r.is_empty())
            .map(|r| serde_json::from_str(r.trim_end()).unwrap())
            .collect();
        assert_eq!(records.len(), 5);
        assert_eq!(records[1]["data"]["frames"][0]["frame_type"], "ping");
        assert_eq!(records[1]["data"]["raw"]["length"], 1200);
        assert_eq!(records[2]["data"]["frames"][0]["frame_type"], "stream");
        // A packet the capture does not have gets nothing invented.
        assert!(records[3]["data"].get("frames").is_none());
        assert_eq!(records[4]["data"]["cwnd"], 12000);
        // Every event is in the group of its connection's original destination ID; the
        // header, which is no event, is left as it was.
        for r in &records[1..] {
            assert_eq!(r["group_id"], "01", "{r}");
        }
        assert!(records[0].get("group_id").is_none());
    }

    #[test]
    fn a_trace_the_capture_does_not_hold_keeps_its_groups() {
        let conn = Connection {
            original_dcid: vec![1],
            packets: vec![packet(true, Space::Initial, 0, vec![])],
        };
        let qlog = "\u{1e}{\"time\":1.0,\"name\":\"transport:packet_sent\",\"group_id\":\"ab\",\"data\":{\"header\":{\"packet_type\":\"1RTT\",\"packet_number\":3}}}\n";
        let c = add_frames(qlog, true, &[conn]);
        assert_eq!(c.with_frames, 0);
        assert!(c.text.contains("\"group_id\":\"ab\""), "{}", c.text);
    }
}
