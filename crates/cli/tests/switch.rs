//! Network switches (`quiclab bulk --switch`): bad input fails before any lab; a QUIC download
//! that migrates keeps its one connection across an address change and resumes within a few
//! round trips of the new network; TCP with `reconnect` resumes after about the stall timeout on
//! a new connection from the new address; a download that never recovers fails at its time limit
//! naming the switch it died at. Video players (`quiclab video --switch`) do the same per
//! segment: h3 migrating keeps its connection, h1 over K connections reopens all K after the stall
//! timeout and asks for the cut segment again. Lab tests need root and skip (saying so) without it.

mod common;
use common::*;

#[test]
fn bad_switch_input_fails_before_any_lab_starts() {
    refused(
        "bulk",
        &[
            "--proto",
            "h2",
            "--switch",
            "wifi@0s,lte@2s",
            "--on-switch",
            "migrate",
        ],
        &["--on-switch", "needs h3"],
    );
    refused(
        "bulk",
        &["--proto", "h3", "--switch", "wifi@0s,lte@20s,3g@10s"],
        &["--switch", "times must increase", "3g@10s"],
    );
    refused(
        "bulk",
        &["--proto", "h3", "--switch", "wifi@0s,5g@2s"],
        &["--switch", "unknown network \"5g\"", "wifi, lte, 3g"],
    );
    refused(
        "bulk",
        &[
            "--proto",
            "h3",
            "--switch",
            "wifi@0s,lte@2s",
            "--rate",
            "10mbit",
        ],
        &["--switch sets each network's rate", "--rate"],
    );
    refused(
        "bulk",
        &["--proto", "h3", "--on-switch", "migrate"],
        &["--switch"],
    );
    refused(
        "bulk",
        &[
            "--proto",
            "h3",
            "--switch",
            "wifi@0s,lte@2s",
            "--on-switch",
            "teleport",
        ],
        &["--on-switch", "reconnect-0rtt"],
    );
    refused(
        "video",
        &[
            "--proto",
            "h3",
            "--proto",
            "h1",
            "--switch",
            "wifi@0s,lte@2s",
            "--on-switch",
            "migrate",
        ],
        &["--on-switch", "player 2 h1", "needs h3"],
    );
    refused(
        "video",
        &["--proto", "h3", "--switch", "wifi@0s,lte@2s,wifi@2s"],
        &["--switch", "times must increase"],
    );
}

/// A 20 s live video with one switch (WiFi → LTE at 8 s).
fn video_across_a_switch_command(args: &[&str]) -> std::process::Command {
    let mut c = quiclab();
    c.args([
        "video",
        "--live",
        "--duration",
        "20s",
        "--abr",
        "basic",
        "--json",
    ])
    .args(["--switch", "wifi@0s,lte@8s"])
    .args(args);
    c
}

/// [`video_across_a_switch_command`]'s result.
fn video_across_a_switch(args: &[&str]) -> serde_json::Value {
    json(&video_across_a_switch_command(args).output().unwrap())
}

#[test]
fn video_players_migrate_over_quic_and_reopen_every_tcp_connection_after_the_timeout() {
    if !root_or_skip(
        "video_players_migrate_over_quic_and_reopen_every_tcp_connection_after_the_timeout",
    ) {
        return;
    }
    // The QUIC and the TCP player side by side, each in its own lab.
    let [quic, tcp]: [_; 2] = outputs_at_once(vec![
        video_across_a_switch_command(&["--proto", "h3", "--on-switch", "migrate"]),
        video_across_a_switch_command(&[
            "--proto",
            "h1",
            "--connections",
            "2",
            "--switch-timeout",
            "2s",
        ]),
    ])
    .try_into()
    .unwrap();
    let r = json(&quic);
    assert!(r["players"][0]["error"].is_null(), "{r}");
    assert_eq!(r["segments"].as_u64(), Some(10), "{r}");
    assert_eq!(r["on_switch"], "migrate");
    assert!(r["bitrate_switches"].is_u64(), "{r}");
    let sw = only_switch(&r);
    assert_eq!(sw["migrated"], true, "{sw}");
    assert_eq!(sw["connections_opened"].as_u64(), Some(0), "{sw}");
    // Whether a segment was in flight or the next request came after the switch, the path
    // changed under one connection: well under the stall timeout.
    let i = sw["interruption_s"].as_f64().unwrap_or(0.0);
    assert!(i < 1.5, "interruption {i} s");
    assert_eq!(r["players"][0]["connections"].as_array().unwrap().len(), 1);
    assert_eq!(r["players"][0]["migrations"][0]["local"], "100.64.0.17");

    let r = json(&tcp);
    assert!(r["players"][0]["error"].is_null(), "{r}");
    assert_eq!(r["segments"].as_u64(), Some(10), "{r}");
    let sw = only_switch(&r);
    assert_eq!(sw["migrated"], false, "{sw}");
    // Both connections are opened again, from the new address, after the 2 s stall timeout.
    assert_eq!(sw["connections_opened"].as_u64(), Some(2), "{sw}");
    let i = sw["interruption_s"].as_f64().unwrap();
    assert!(i > 2.0 && i < 4.5, "interruption {i} s");
    let conns = r["players"][0]["connections"].as_array().unwrap();
    assert_eq!(conns.len(), 4, "{r}");
    for c in &conns[2..] {
        assert_eq!(c["local"], "100.64.0.17", "{c}");
        assert!(c["why"].as_str().unwrap().contains("stall timeout"), "{c}");
    }
    // The segment log names the new connections' ports for the segments after the switch.
    let log = r["players"][0]["segment_log"].as_array().unwrap();
    assert_ne!(log[0]["connections"], log[9]["connections"], "{r}");
}

/// AStream's curl limit (`--transfer-timeout`): a TCP player's segment on the dead connection
/// is given up when the whole-transfer limit (3 s) passes, before the 5 s stall timeout.
#[test]
fn a_tcp_players_whole_transfer_timeout_ends_a_segment_before_the_stall_timeout() {
    if !root_or_skip("a_tcp_players_whole_transfer_timeout_ends_a_segment_before_the_stall_timeout")
    {
        return;
    }
    let r = video_across_a_switch(&["--proto", "h1", "--transfer-timeout", "3s"]);
    assert!(r["players"][0]["error"].is_null(), "{r}");
    assert_eq!(r["segments"].as_u64(), Some(10), "{r}");
    let sw = only_switch(&r);
    assert_eq!(sw["connections_opened"].as_u64(), Some(1), "{sw}");
    let i = sw["interruption_s"].as_f64().unwrap();
    assert!(
        i < 4.9,
        "interruption {i} s: the stall timeout (5 s) ended it, not the 3 s limit"
    );
    let conns = r["players"][0]["connections"].as_array().unwrap();
    assert!(
        conns[1..].iter().any(|c| c["why"]
            .as_str()
            .unwrap_or("")
            .contains("whole-transfer timeout")),
        "{r}"
    );
    // QUIC players have no such limit: refused where no TCP player would use it.
    let out = quiclab()
        .args(["video", "--proto", "h3", "--live", "--duration", "20s"])
        .args(["--switch", "wifi@0s,lte@8s", "--transfer-timeout", "3s"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("transfer_timeout") || err.contains("--transfer-timeout"),
        "{err}"
    );
}

#[test]
fn a_video_player_that_never_recovers_fails_naming_the_switch() {
    if !root_or_skip("a_video_player_that_never_recovers_fails_naming_the_switch") {
        return;
    }
    let out = quiclab()
        .args(["video", "--proto", "h3", "--live", "--duration", "20s"])
        .args([
            "--switch",
            "wifi@0s,3g@4s",
            "--switch-gap",
            "60s",
            "--timeout",
            "10s",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{text}{err}");
    assert!(err.contains("time limit (10.0 s)"), "{err}");
    assert!(err.contains("switch wifi → 3g at 4.0 s"), "{err}");
}

/// The one switch of a run's `switches`.
fn only_switch(r: &serde_json::Value) -> &serde_json::Value {
    let sw = r["network_switches"].as_array().expect("network_switches");
    assert_eq!(sw.len(), 1, "{r}");
    &sw[0]
}

#[test]
fn a_migrating_quic_download_keeps_one_connection_across_the_switch() {
    if !root_or_skip("a_migrating_quic_download_keeps_one_connection_across_the_switch") {
        return;
    }
    let out = quiclab()
        .args(["bulk", "--proto", "h3", "--size", "6MB", "--json"])
        .args(["--switch", "wifi@0s,lte@3s", "--on-switch", "migrate"])
        .output()
        .unwrap();
    let r = json(&out);
    assert_eq!(r["bytes"].as_u64(), Some(6_000_000), "{r}");
    assert_eq!(r["verified"], true);
    let sw = only_switch(&r);
    assert_eq!(
        (sw["to"].as_str(), sw["migrated"].as_bool()),
        (Some("lte"), Some(true)),
        "{sw}"
    );
    assert_eq!(sw["connections_opened"].as_u64(), Some(0), "{sw}");
    // One connection, from the first address, and one migration to the second without error.
    let conns = r["connections"].as_array().unwrap();
    assert_eq!(conns.len(), 1, "{r}");
    assert_eq!(conns[0]["local"], "100.64.0.1");
    let migs = r["migrations"].as_array().unwrap();
    assert_eq!(migs.len(), 1, "{r}");
    assert_eq!(migs[0]["local"], "100.64.0.17");
    assert!(migs[0]["error"].is_null(), "{r}");
    // The server saw one connection on two paths: the bottleneck counted two UDP flows to its
    // port 443, one from each client address.
    let flows = r["fidelity"]["downlink"]["model"]["flows"]
        .as_array()
        .unwrap();
    let server = "100.64.0.2:443";
    let mut clients: Vec<String> = flows
        .iter()
        .filter(|f| f["key"]["transport"] == "udp")
        .filter_map(|f| {
            let (low, high) = (f["key"]["low"].as_str()?, f["key"]["high"].as_str()?);
            let client = match (low == server, high == server) {
                (true, _) => high,
                (_, true) => low,
                _ => return None,
            };
            Some(client.split(':').next()?.to_string())
        })
        .collect();
    clients.sort();
    assert_eq!(clients, ["100.64.0.1", "100.64.0.17"], "{flows:?}");
    // Back within a few round trips of LTE (128 ms): path validation and the loss recovery of
    // what was in flight to the old address take about two (docs/link.md).
    let i = sw["interruption_s"].as_f64().unwrap();
    assert!(i > 0.1 && i < 3.0 * 0.128 + 0.1, "interruption {i} s");
    let stale = r["fidelity"]["downlink"]["dropped_stale_address_packets"]
        .as_u64()
        .unwrap();
    assert!(stale > 0, "nothing was in flight to the old address?");
}

#[test]
fn tcp_reconnects_after_the_stall_timeout_from_the_new_address() {
    if !root_or_skip("tcp_reconnects_after_the_stall_timeout_from_the_new_address") {
        return;
    }
    let out = quiclab()
        .args(["bulk", "--proto", "h2", "--size", "5MB", "--json"])
        .args(["--switch", "wifi@0s,lte@3s", "--switch-timeout", "2s"])
        .output()
        .unwrap();
    let r = json(&out);
    assert_eq!(r["on_switch"], "reconnect");
    assert_eq!(r["bytes"].as_u64(), Some(5_000_000), "{r}");
    assert_eq!(r["verified"], true, "the resumed body is the right bytes");
    let sw = only_switch(&r);
    assert_eq!(sw["migrated"], false);
    assert_eq!(sw["connections_opened"].as_u64(), Some(1), "{sw}");
    // Noticed after the 2 s stall timeout, then a TCP and a TLS handshake over LTE (2 RTTs).
    let i = sw["interruption_s"].as_f64().unwrap();
    assert!(i > 2.0 && i < 3.5, "interruption {i} s");
    let conns = r["connections"].as_array().unwrap();
    assert_eq!(conns.len(), 2);
    assert_eq!(conns[1]["local"], "100.64.0.17");
    assert!(
        conns[1]["why"].as_str().unwrap().contains("stall timeout"),
        "{r}"
    );
    assert!(
        conns[1]["from_byte"].as_u64().unwrap() > 0,
        "asked for the rest only"
    );
    assert!(sw["recovery_s"].as_f64().is_some(), "{sw}");
}

#[test]
fn a_download_that_never_recovers_times_out_at_its_limit_naming_the_switch() {
    if !root_or_skip("a_download_that_never_recovers_times_out_at_its_limit_naming_the_switch") {
        return;
    }
    let out = quiclab()
        .args(["bulk", "--proto", "h3", "--size", "5MB", "--timeout", "6s"])
        .args(["--switch", "wifi@0s,3g@2s", "--switch-gap", "60s"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    // A timeout, typed (a grid stores it as `timeout`), naming the limit.
    assert!(text.contains("timed out at its limit of 6.0 s"), "{text}");
    assert!(text.contains("switch wifi → 3g at 2.0 s"), "{text}");
}
