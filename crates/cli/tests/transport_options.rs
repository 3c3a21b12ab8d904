//! What seed 002 measures and what users open: IPv6 as an address family of every workload,
//! QUIC's datagram size (`--quic-mtu`), warm page loads (resumption and 0-RTT), Alt-Svc on
//! HTTP/1.1 and HTTP/2 responses, and pcapng captures with the run's secrets inside — checked
//! through real labs, the captures read back packet by packet and decrypted by tshark.

use std::path::Path;

use pcap_parser::PcapBlockOwned;
use pcap_parser::pcapng::{Block, PcapNGSlice};
use serde_json::Value;

mod common;
use common::*;

/// `quiclab COMMAND ARGS --json`, which must succeed.
fn run_json(command: &str, args: &[&str]) -> Value {
    let out = quiclab()
        .arg(command)
        .args(args)
        .arg("--json")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{command} {args:?}: {err}");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// Every packet of a capture: (interface, IP packet).
fn packets(path: &Path) -> Vec<(u32, Vec<u8>)> {
    let bytes = std::fs::read(path).unwrap();
    PcapNGSlice::from_slice(&bytes)
        .unwrap()
        .filter_map(|b| match b.unwrap() {
            PcapBlockOwned::NG(Block::EnhancedPacket(e)) => {
                Some((e.if_id, e.data[..e.caplen as usize].to_vec()))
            }
            _ => None,
        })
        .collect()
}

/// The UDP payload length of an IPv4 or IPv6 packet (None: not UDP).
fn udp_payload(p: &[u8]) -> Option<usize> {
    match p[0] >> 4 {
        4 if p[9] == 17 => Some(p.len() - usize::from(p[0] & 0x0f) * 4 - 8),
        6 if p[6] == 17 => Some(p.len() - 48),
        _ => None,
    }
}

const LINK: &[&str] = &["--rate", "20mbit", "--rtt", "20ms"];

#[test]
fn bulk_and_page_loads_run_over_ipv6() {
    if !root_or_skip("bulk_and_page_loads_run_over_ipv6") {
        return;
    }
    let dir = temp_dir("ipv6");
    for proto in ["h2", "h3"] {
        let pcap = dir.join(format!("bulk-{proto}.pcapng"));
        let mut args = vec!["--proto", proto, "--size", "200kB", "--ip", "6"];
        args.extend(LINK);
        args.extend(["--pcap", pcap.to_str().unwrap()]);
        let d = run_json("bulk", &args);
        assert_eq!(d["verified"], true, "{d}");
        // Every packet on the wire is IPv6.
        let all = packets(&pcap);
        assert!(all.len() > 100, "{proto}: {} packets", all.len());
        assert!(
            all.iter().all(|(_, p)| p[0] >> 4 == 6),
            "{proto}: an IPv4 packet"
        );
    }
    let mut args = vec!["--proto", "h3", "--page", "carlucci-small", "--ip", "6"];
    args.extend(LINK);
    let d = run_json("page", &args);
    assert_eq!(d["negotiated_protocols"], serde_json::json!(["h3"]), "{d}");
    if !Path::new(quiclab_browser::DEFAULT_CHROMIUM).exists() {
        quiclab_testkit::skip(
            "bulk_and_page_loads_run_over_ipv6 (Chromium)",
            "no Chromium (apt-get install chromium; scripts/test installs it)",
        );
        return;
    }
    for proto in ["h2", "h3"] {
        let mut args = vec![
            "--proto",
            proto,
            "--page",
            "carlucci-small",
            "--browser",
            "chromium",
            "--ip",
            "6",
        ];
        args.extend(LINK);
        let d = run_json("page", &args);
        let want = if proto == "h3" { "h3" } else { "h2" };
        assert_eq!(d["negotiated_protocols"], serde_json::json!([want]), "{d}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn quic_mtu_bounds_every_datagram_on_the_wire() {
    if !root_or_skip("quic_mtu_bounds_every_datagram_on_the_wire") {
        return;
    }
    let dir = temp_dir("quic-mtu");
    for (mtu, ip) in [("1350", "4"), ("1350", "6"), ("1452", "4")] {
        let pcap = dir.join(format!("h3-{mtu}-{ip}.pcapng"));
        let mut args = vec![
            "--proto",
            "h3",
            "--size",
            "1MB",
            "--ip",
            ip,
            "--quic-mtu",
            mtu,
        ];
        args.extend(LINK);
        args.extend(["--pcap", pcap.to_str().unwrap()]);
        let d = run_json("bulk", &args);
        let limit: usize = mtu.parse().unwrap();
        let largest = packets(&pcap)
            .iter()
            .filter_map(|(_, p)| udp_payload(p))
            .max()
            .unwrap();
        // A 1 MB download fills datagrams to the limit, and none is larger.
        assert_eq!(largest, limit, "quic_mtu {mtu} over IPv{ip}");
        assert_eq!(
            d["fidelity"]["downlink"]["largest_udp_payload"], limit,
            "the emulator's own count: {d}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// At 100 ms RTT: cold, a handshake round trip and then the request's; warm, the request leaves in
/// 0-RTT and the first byte comes a round trip sooner.
fn assert_ttfb_a_round_trip_shorter(cold: &Value, warm: &Value) {
    let (c, w) = (
        cold["ttfb_ms"].as_f64().unwrap(),
        warm["ttfb_ms"].as_f64().unwrap(),
    );
    assert!(
        c > 190.0 && w < 150.0 && c - w > 60.0,
        "ttfb cold {c} ms, warm {w} ms"
    );
}

/// One load of carlucci-small at 20 Mbit/s and 100 ms RTT, cold or warm.
fn carlucci_small(browser: &str, proto: &str, warm: bool) -> Value {
    let mut args = vec![
        "--proto",
        proto,
        "--page",
        "carlucci-small",
        "--browser",
        browser,
        "--rate",
        "20mbit",
        "--rtt",
        "100ms",
    ];
    if warm {
        args.push("--warm");
    }
    run_json("page", &args)
}

#[test]
fn a_warm_h3_load_sends_in_0rtt_and_gets_its_first_byte_a_round_trip_sooner() {
    let name = "a_warm_h3_load_sends_in_0rtt_and_gets_its_first_byte_a_round_trip_sooner";
    if !root_or_skip(name) {
        return;
    }
    let (cold, warm) = (
        carlucci_small("builtin", "h3", false),
        carlucci_small("builtin", "h3", true),
    );
    assert_eq!(cold["warm"], false);
    assert_eq!(cold["zero_rtt_accepted_connections"], 0, "{cold}");
    assert_eq!(warm["warm"], true);
    assert_eq!(warm["resumed_connections"], 1, "{warm}");
    assert_eq!(warm["zero_rtt_accepted_connections"], 1, "{warm}");
    assert_ttfb_a_round_trip_shorter(&cold, &warm);
    // h1 and h2 resume every connection of the measured load (TLS 1.3 tickets).
    for proto in ["h1", "h2"] {
        let d = run_json(
            "page",
            &[
                "--proto",
                proto,
                "--page",
                "carlucci-small",
                "--warm",
                "--rtt",
                "20ms",
            ],
        );
        assert_eq!(d["resumed_connections"], d["connections"], "{proto}: {d}");
    }
}

/// Chromium's warm load: a warm-up navigation, its connections closed, then the measured one in
/// the same browser. Its NetLog says what resumed; the TTFB says whether the request left in
/// 0-RTT.
#[test]
fn a_warm_chromium_load_resumes_and_sends_its_h3_request_in_0rtt() {
    let name = "a_warm_chromium_load_resumes_and_sends_its_h3_request_in_0rtt";
    if !root_or_skip(name) {
        return;
    }
    let load = |proto: &str, warm: bool| carlucci_small("chromium", proto, warm);
    let (cold, warm) = (load("h3", false), load("h3", true));
    assert_eq!(cold["warm"], false);
    // A cold Chromium load records no NetLog: unknown, not 0.
    assert!(cold.get("resumed_connections").is_none(), "{cold}");
    assert_eq!(warm["warm"], true);
    assert_eq!(warm["connections"], 1, "{warm}");
    assert_eq!(warm["resumed_connections"], 1, "{warm}");
    assert_eq!(warm["zero_rtt_accepted_connections"], 1, "{warm}");
    assert_eq!(warm["chromium_handshakes"]["opened_between_loads"], 0);
    assert_ttfb_a_round_trip_shorter(&cold, &warm);
    // h2: the measured load's one connection resumes its TLS 1.3 session, without early data.
    let h2 = load("h2", true);
    assert_eq!(h2["connections"], 1, "{h2}");
    assert_eq!(h2["resumed_connections"], 1, "{h2}");
    assert_eq!(h2["zero_rtt_accepted_connections"], 0, "{h2}");
}

#[test]
fn h2_responses_advertise_h3_unless_told_not_to() {
    if !root_or_skip("h2_responses_advertise_h3_unless_told_not_to") {
        return;
    }
    let mut args = vec!["--proto", "h2", "--size", "10kB"];
    args.extend(LINK);
    let d = run_json("bulk", &args);
    assert_eq!(d["alt_svc"], "h3=\":443\"; ma=86400", "{d}");
    args.push("--no-alt-svc");
    let d = run_json("bulk", &args);
    assert!(d["alt_svc"].is_null(), "{d}");
}

#[test]
fn an_h3_capture_decrypts_in_tshark() {
    let name = "an_h3_capture_decrypts_in_tshark";
    if !root_or_skip(name) {
        return;
    }
    if !Path::new("/usr/bin/tshark").exists() {
        quiclab_testkit::skip(
            name,
            "no tshark (apt-get install tshark; QUICLAB_WITH_TSHARK=1 scripts/setup installs it)",
        );
        return;
    }
    let dir = temp_dir("tshark");
    let pcap = dir.join("h3.pcapng");
    let mut args = vec!["--proto", "h3", "--size", "300kB", "--loss", "1%"];
    args.extend(LINK);
    args.extend(["--pcap", pcap.to_str().unwrap()]);
    let d = run_json("bulk", &args);
    let c = &d["fidelity"]["capture"];
    assert!(c["secrets"].as_u64().unwrap() >= 5, "{c}");
    assert_eq!(c["over_cap"], 0);
    let tshark = |filter: &str, field: &str| {
        let out = std::process::Command::new("/usr/bin/tshark")
            .args([
                "-r",
                pcap.to_str().unwrap(),
                "-Y",
                filter,
                "-T",
                "fields",
                "-e",
                field,
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // Decrypted: QUIC's STREAM frames (inside 1-RTT packets, so visible only with the keys) from
    // both ends, and HTTP/3 frames on them. tshark 4.0 may not dissect a stream's later HTTP/3
    // frames where the capture holds both a lost packet and its retransmission (1 run in 20 lost
    // the response's HEADERS that way), so one HEADERS frame is required, not both.
    let streams = tshark("quic.stream.stream_id", "ip.src");
    let senders: std::collections::BTreeSet<&str> =
        streams.lines().filter(|l| !l.is_empty()).collect();
    assert!(
        senders.contains("100.64.0.1") && senders.contains("100.64.0.2"),
        "decrypted STREAM frames from both ends expected: {senders:?}"
    );
    let headers = tshark("http3.frame_type == 1", "frame.number");
    assert!(!headers.trim().is_empty(), "no HTTP/3 HEADERS frame");
    // The link's random losses are marked in the capture.
    let lost = tshark("frame.comment contains \"lost\"", "frame.number");
    assert!(!lost.trim().is_empty(), "no packet marked lost at 1 % loss");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Seed 002's discovery: Chromium loads without forced QUIC, three times in one browser. What
/// is checked is that the run records the evidence either way — Chromium saw the server's Alt-Svc,
/// and it either moved to h3 or its NetLog says why its QUIC session closed.
#[test]
fn chromium_discovery_records_the_alt_svc_and_what_came_of_it() {
    let name = "chromium_discovery_records_the_alt_svc_and_what_came_of_it";
    if !root_or_skip(name) {
        return;
    }
    if !Path::new(quiclab_browser::DEFAULT_CHROMIUM).exists() {
        quiclab_testkit::skip(
            name,
            "no Chromium (apt-get install chromium; scripts/test installs it)",
        );
        return;
    }
    let mut args = vec![
        "--proto",
        "h3",
        "--page",
        "carlucci-small",
        "--browser",
        "chromium",
        "--discover",
    ];
    args.extend(LINK);
    let d = run_json("page", &args);
    let disc = &d["discovery"];
    let navigations = disc["navigations"].as_array().unwrap();
    assert_eq!(navigations.len(), 3, "{disc}");
    // The first load cannot know the Alt-Svc yet: its document goes over TCP.
    assert!(
        navigations[0]["objects_by_protocol"]["h2"]
            .as_u64()
            .unwrap()
            >= 1,
        "{disc}"
    );
    let quic = &disc["quic"];
    assert!(quic["alt_svc_found"].as_u64().unwrap() > 0, "{disc}");
    match disc["switched_at_navigation"].as_u64() {
        Some(n) => assert!(
            n >= 1 && quic["handshakes_done"].as_u64().unwrap() >= 1,
            "{disc}"
        ),
        None => assert!(
            !quic["close_reasons"].as_array().unwrap().is_empty(),
            "no h3 and no reason: {disc}"
        ),
    }
}

/// Seed 002's profiling: the system calls of one download, per process, counted under strace.
#[test]
fn a_syscall_profile_counts_each_process_s_calls() {
    let name = "a_syscall_profile_counts_each_process_s_calls";
    if !root_or_skip(name) {
        return;
    }
    if !Path::new("/usr/bin/strace").exists() {
        quiclab_testkit::skip(
            name,
            "no strace (apt-get install strace; QUICLAB_WITH_TSHARK=1 scripts/setup installs it)",
        );
        return;
    }
    for proto in ["h2", "h3"] {
        let mut args = vec!["--proto", proto, "--size", "1MB"];
        args.extend(LINK);
        let d = run_json("syscalls", &args);
        for side in ["client", "server"] {
            let p = &d[side];
            let calls = p["syscalls"].as_array().unwrap();
            let total = p["total_calls"].as_u64().unwrap();
            let sum: u64 = calls.iter().map(|c| c["calls"].as_u64().unwrap()).sum();
            assert_eq!(sum, total, "{proto} {side}: {p}");
            // Whoever receives the download reads it: a receive call is among the top three.
            if side == "client" {
                let top: Vec<&str> = calls[..3]
                    .iter()
                    .map(|c| c["name"].as_str().unwrap())
                    .collect();
                assert!(
                    top.iter().any(|n| n.starts_with("recv") || *n == "read"),
                    "{proto} client: {top:?}"
                );
            }
        }
    }
}

#[test]
fn bad_transport_options_are_refused_naming_the_flag() {
    refused(
        "bulk",
        &[
            "--proto",
            "h3",
            "--size",
            "1kB",
            "--quic-ack-frequency",
            "1",
        ],
        &["--quic-ack-frequency", "at least 2", "0 / off"],
    );
    refused(
        "page",
        &["--proto", "h3", "--page", "carlucci-small", "--discover"],
        &["--discover", "chromium"],
    );
    refused(
        "bulk",
        &["--proto", "h3", "--size", "1kB", "--ip", "5"],
        &["--ip", "\"4\""],
    );
    refused(
        "bulk",
        &["--proto", "h3", "--size", "1kB", "--quic-mtu", "1199"],
        &["--quic-mtu", "1200"],
    );
    refused(
        "bulk",
        &["--proto", "h3", "--size", "1kB", "--quic-mtu", "1473"],
        &["--quic-mtu", "1472"],
    );
    refused(
        "bulk",
        &[
            "--proto",
            "h3",
            "--size",
            "1kB",
            "--ip",
            "6",
            "--quic-mtu",
            "1460",
        ],
        &["--quic-mtu", "1452", "IPv6"],
    );
    refused(
        "page",
        &[
            "--proto",
            "h3",
            "--page",
            "carlucci-small",
            "--fec",
            "2",
            "--warm",
        ],
        &["warm", "FEC"],
    );
    refused(
        "bulk",
        &[
            "--proto",
            "h3",
            "--size",
            "1kB",
            "--pcap",
            "/no/such/dir/x.pcapng",
        ],
        &["--pcap", "directory does not exist"],
    );
}

/// The result's `endpoints` (issue 60): what each end's namespace counted per MB, the CPU split,
/// and the two keys that change what a QUIC receiver does — fewer ACK frames with
/// `--quic-ack-frequency`, every datagram read alone with `--no-quic-gro`.
#[test]
fn each_ends_receive_cost_is_counted_per_mb_and_the_quic_keys_change_it() {
    if !root_or_skip("each_ends_receive_cost_is_counted_per_mb_and_the_quic_keys_change_it") {
        return;
    }
    let bulk = |proto: &str, extra: &[&str]| {
        let mut args = vec![
            "--proto", proto, "--size", "10MB", "--rate", "50mbit", "--rtt", "10ms",
        ];
        args.extend(extra);
        let d = run_json("bulk", &args);
        assert_eq!(d["verified"], true, "{d}");
        d["endpoints"].clone()
    };
    let num = |v: &Value, k: &str| v[k].as_f64().unwrap_or_else(|| panic!("{k} in {v}"));
    // TCP: about 690 full-size segments per MB off the wire (1448 payload bytes each), headers,
    // handshake and retransmissions on top; the client's ACKs go the other way.
    let tcp = bulk("h2", &[]);
    let (c, s) = (&tcp["client"], &tcp["server"]);
    let wire = num(c, "wire_packets_in_per_mb");
    assert!(
        (600.0..1000.0).contains(&wire),
        "h2 wire packets per MB {wire}: {tcp}"
    );
    assert!(num(c, "sent_per_mb") > 50.0, "{tcp}");
    assert!(
        num(s, "stack_packets_in_per_mb") > 50.0,
        "the server's ACKs in: {tcp}"
    );
    assert!(num(c, "cpu_user_s") + num(c, "cpu_system_s") > 0.0, "{tcp}");
    assert!(
        c["cpu_bound"].is_boolean(),
        "a 1.6 s transfer is judged: {tcp}"
    );
    assert!(
        c["ack_frames_out_per_mb"].is_null(),
        "TCP has no ACK frames: {tcp}"
    );
    // QUIC: quinn's ACK frames; the receiver's reads; asking for fewer ACKs gives fewer.
    let quic = bulk("h3", &[]);
    let acks = num(&quic["client"], "ack_frames_out_per_mb");
    assert!(acks > 50.0, "{quic}");
    assert!(num(&quic["client"], "udp_reads_per_mb") > 50.0, "{quic}");
    assert!(
        quic["server"]["unmeasured"]["ack_frames_out_per_mb"].is_string(),
        "{quic}"
    );
    let fewer = bulk("h3", &["--quic-ack-frequency", "10"]);
    let fewer_acks = num(&fewer["client"], "ack_frames_out_per_mb");
    assert!(
        fewer_acks < 0.7 * acks,
        "ACK frames per MB {fewer_acks} at 10 against {acks}"
    );
    // Without GRO every datagram that came is read by itself.
    let alone = bulk("h3", &["--no-quic-gro"]);
    let c = &alone["client"];
    assert_eq!(c["gro"], false, "{alone}");
    let (reads, came) = (num(c, "udp_reads_per_mb"), num(c, "wire_packets_in_per_mb"));
    assert!(
        reads >= 0.9 * came,
        "{reads} reads per MB of {came} datagrams: {alone}"
    );
}
