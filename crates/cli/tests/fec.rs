//! XOR FEC under QUIC (`quiclab bulk --fec N`): bad input fails before any lab; on a clean link the
//! parity datagrams are 1/(N+1) of what the server sends; with random loss single losses in a
//! group are rebuilt, and the two ends' counters agree with the emulator's per-flow counters. Lab
//! tests need root and skip (saying so) without it.

mod common;
use common::*;

#[test]
fn bad_fec_input_fails_before_any_lab_starts() {
    refused(
        "bulk",
        &["--proto", "h2", "--fec", "2"],
        &["--fec", "needs h3", "h2"],
    );
    refused(
        "bulk",
        &["--proto", "h3", "--fec", "1"],
        &["--fec", "2 to 64"],
    );
    refused(
        "bulk",
        &["--proto", "h3", "--fec", "1000"],
        &["--fec", "2 to 64"],
    );
    refused(
        "bulk",
        &["--proto", "h3", "--fec", "two"],
        &["--fec", "whole number"],
    );
    // The client across switches does not run FEC yet: refused, not silently without it.
    refused(
        "bulk",
        &["--proto", "h3", "--fec", "2", "--switch", "wifi@0s,lte@2s"],
        &["--fec", "--switch"],
    );
}

/// The downlink UDP flow's counters at the bottleneck.
fn udp_flow(r: &serde_json::Value) -> serde_json::Value {
    let flows = r["fidelity"]["downlink"]["model"]["flows"]
        .as_array()
        .expect("per-flow counters");
    let udp: Vec<&serde_json::Value> = flows
        .iter()
        .filter(|f| f["key"]["transport"] == "udp")
        .collect();
    assert_eq!(udp.len(), 1, "{flows:?}");
    udp[0].clone()
}

fn bulk_with_fec(args: &[&str]) -> serde_json::Value {
    let out = quiclab()
        .args([
            "bulk", "--proto", "h3", "--json", "--rate", "10mbit", "--rtt", "20ms",
        ])
        .args(args)
        .output()
        .unwrap();
    json(&out)
}

#[test]
fn on_a_clean_link_a_third_of_the_datagrams_are_parity_with_groups_of_two() {
    if !root_or_skip("on_a_clean_link_a_third_of_the_datagrams_are_parity_with_groups_of_two") {
        return;
    }
    let r = bulk_with_fec(&["--size", "2MB", "--fec", "2"]);
    assert_eq!(r["verified"], true, "{r}");
    let fec = &r["fec"];
    assert_eq!(fec["group"].as_u64(), Some(2), "{fec}");
    let share = fec["parity_share"].as_f64().unwrap();
    assert!((share - 1.0 / 3.0).abs() < 0.02, "parity share {share}");
    // Every datagram the server sent reached the bottleneck (± the last 100 ms of counters). No
    // random loss, but the parity datagrams are load quinn's controller does not see, so the queue
    // may overflow: whatever was rebuilt was lost there.
    let flow = udp_flow(&r);
    let queue_drops = flow["dropped_queue_packets"].as_u64().unwrap();
    assert_eq!(flow["dropped_random_packets"].as_u64(), Some(0));
    assert!(fec["rebuilt"].as_u64().unwrap() <= queue_drops, "{fec}");
    let sent = fec["data_sent"].as_u64().unwrap() + fec["parity_sent"].as_u64().unwrap();
    let offered = flow["offered_packets"].as_u64().unwrap();
    assert!(
        offered.abs_diff(sent) <= 5,
        "sent {sent}, at the bottleneck {offered}"
    );
    // Goodput counts the body only, not the parity.
    assert!(
        r["goodput_mbps"].as_f64().unwrap() < 10.0 * 2.0 / 3.0 + 0.3,
        "{r}"
    );
}

#[test]
fn with_random_loss_single_losses_are_rebuilt_and_the_counters_agree() {
    if !root_or_skip("with_random_loss_single_losses_are_rebuilt_and_the_counters_agree") {
        return;
    }
    let r = bulk_with_fec(&[
        "--size",
        "5MB",
        "--fec",
        "4",
        "--down-loss",
        "2%",
        "--seed",
        "7",
    ]);
    assert_eq!(r["verified"], true, "{r}");
    assert_eq!(r["bytes"].as_u64(), Some(5_000_000));
    let fec = &r["fec"];
    let flow = udp_flow(&r);
    let c = &flow;
    let dropped = c["dropped_random_packets"].as_u64().unwrap()
        + c["dropped_queue_packets"].as_u64().unwrap();
    assert!(dropped > 20, "2 % of ≈ 4000 datagrams: {c}");
    let rebuilt = fec["rebuilt"].as_u64().unwrap();
    // A loss is rebuilt unless another of its group (4 data + 1 parity) was lost too: with 2 %
    // random loss about 92 % of the data losses; bursts of queue drops lower that.
    let data_lost =
        fec["data_sent"].as_u64().unwrap() - fec["client"]["data_received"].as_u64().unwrap();
    assert!(
        rebuilt <= data_lost,
        "rebuilt {rebuilt} of {data_lost} lost"
    );
    assert!(
        rebuilt * 2 > data_lost,
        "most single losses rebuilt: {rebuilt} of {data_lost}"
    );
    // What the client received is what the bottleneck forwarded of the server's datagrams.
    let received = fec["client"]["data_received"].as_u64().unwrap()
        + fec["client"]["parity_received"].as_u64().unwrap();
    let forwarded = c["forwarded_packets"].as_u64().unwrap();
    assert!(
        received.abs_diff(forwarded) <= 5,
        "received {received}, forwarded {forwarded}"
    );
    // Groups beyond repair are those that lost two or more: few at 2 %.
    let bad = fec["unrecoverable_groups"].as_u64().unwrap();
    assert!(
        bad * 4 < data_lost.max(4),
        "{bad} unrecoverable groups for {data_lost} losses"
    );
}
