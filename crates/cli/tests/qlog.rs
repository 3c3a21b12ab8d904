//! Kept qlogs as qvis reads them (qlog 0.3, JSON-SEQ): a vantage point per trace, a reference time
//! on the capture's clock, and frames in the packet events — quinn 0.11 writes neither of the
//! first two nor any frame; quiclab completes its header as it is written and adds the frames
//! from the run's capture. Checked through a real lab against the schema's rules that qvis's
//! sequence and multiplexing views rely on.

use std::path::{Path, PathBuf};

use serde_json::Value;

mod common;
use common::*;

/// The frame types of draft-ietf-quic-qlog-quic-events (0.3) that quiclab writes.
const FRAME_TYPES: &[&str] = &[
    "padding",
    "ping",
    "ack",
    "reset_stream",
    "stop_sending",
    "crypto",
    "new_token",
    "stream",
    "max_data",
    "max_stream_data",
    "max_streams",
    "data_blocked",
    "stream_data_blocked",
    "streams_blocked",
    "new_connection_id",
    "retire_connection_id",
    "path_challenge",
    "path_response",
    "connection_close",
    "handshake_done",
    "datagram",
    "ack_frequency",
    "immediate_ack",
    "unknown",
];

fn sqlogs(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "sqlog") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Checks one trace; returns (packet events, with frames, stream bytes received, its one group).
fn check(path: &Path) -> (usize, usize, u64, String) {
    let text = std::fs::read_to_string(path).unwrap();
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let vantage = if name.starts_with("client") {
        "client"
    } else {
        "server"
    };
    let records: Vec<Value> = text
        .split('\u{1e}')
        .filter(|r| !r.trim().is_empty())
        .map(|r| serde_json::from_str(r.trim_end()).unwrap_or_else(|e| panic!("{name}: {e}: {r}")))
        .collect();
    let header = &records[0];
    assert_eq!(header["qlog_format"], "JSON-SEQ", "{name}");
    assert!(
        header["qlog_version"].as_str().unwrap().starts_with("0.3"),
        "{name}"
    );
    let trace = &header["trace"];
    assert_eq!(trace["vantage_point"]["type"], vantage, "{name}");
    let reference = trace["common_fields"]["reference_time"].as_f64().unwrap();
    assert!(
        reference > 1.6e12,
        "{name}: reference time {reference} is no Unix ms"
    );
    assert_eq!(trace["common_fields"]["time_format"], "relative", "{name}");
    let (mut packets, mut framed, mut stream_bytes) = (0, 0, 0u64);
    // qvis splits a trace into connections by group_id: one connection, one group.
    let group = records[1]["group_id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(!group.is_empty(), "{name}: {}", records[1]);
    for e in &records[1..] {
        assert!(e["time"].as_f64().is_some_and(|t| t >= 0.0), "{name}: {e}");
        assert_eq!(e["group_id"], group.as_str(), "{name}: {e}");
        let ev = e["name"].as_str().unwrap();
        assert!(ev.contains(':'), "{name}: event name {ev}");
        assert!(e["data"].is_object(), "{name}: {e}");
        if !matches!(ev, "transport:packet_sent" | "transport:packet_received") {
            continue;
        }
        packets += 1;
        let h = &e["data"]["header"];
        assert!(
            ["initial", "handshake", "0RTT", "1RTT"].contains(&h["packet_type"].as_str().unwrap()),
            "{name}: {e}"
        );
        assert!(h["packet_number"].as_u64().is_some(), "{name}: {e}");
        let Some(frames) = e["data"]["frames"].as_array() else {
            continue;
        };
        framed += 1;
        for f in frames {
            let ty = f["frame_type"].as_str().unwrap();
            assert!(FRAME_TYPES.contains(&ty), "{name}: frame type {ty}");
            if ty == "stream" {
                for k in ["stream_id", "offset", "length"] {
                    assert!(f[k].as_u64().is_some(), "{name}: {f}");
                }
                if ev == "transport:packet_received" {
                    stream_bytes += f["length"].as_u64().unwrap();
                }
            }
        }
    }
    (packets, framed, stream_bytes, group)
}

#[test]
fn kept_qlogs_have_vantage_points_reference_times_and_frames() {
    if !root_or_skip("kept_qlogs_have_vantage_points_reference_times_and_frames") {
        return;
    }
    let dir = temp_dir("qlog");
    let keep = dir.join("keep");
    // A kept run captures on its own (keep/capture.pcapng): no --pcap needed for the frames.
    let out = quiclab()
        .args([
            "bulk", "--proto", "h3", "--size", "300kB", "--rate", "20mbit", "--rtt", "20ms",
        ])
        .arg("--keep")
        .arg(&keep)
        .output()
        .unwrap();
    assert_success(&out);
    assert!(keep.join("capture.pcapng").is_file());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("packet events with their frames"),
        "{stderr}"
    );
    let files = sqlogs(&keep);
    let names: Vec<String> = files
        .iter()
        .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().any(|n| n.starts_with("client")), "{names:?}");
    assert!(names.iter().any(|n| n.starts_with("server")), "{names:?}");
    let mut groups = std::collections::BTreeSet::new();
    for f in &files {
        let (packets, framed, stream_bytes, group) = check(f);
        groups.insert(group);
        // Every packet the capture holds is opened (the link drops none here).
        assert!(
            packets > 100 && framed == packets,
            "{}: {framed} of {packets}",
            f.display()
        );
        if f.file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("client")
        {
            // The 300 kB body (and the response's HTTP/3 framing) came down in STREAM frames.
            assert!(stream_bytes >= 300_000, "{}: {stream_bytes} B", f.display());
        }
    }
    // The client's and the server's trace of the one connection are in the same group (its
    // original destination connection ID), as qvis pairs them.
    assert_eq!(groups.len(), 1, "{groups:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
