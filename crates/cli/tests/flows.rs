//! `quiclab flows` and `kind = "flows"`: bad mixes fail before any lab, two TCP flows share a link
//! fairly, and a mix's bytes add up between the client, the bins and the bottleneck's per-flow
//! counters. Lab tests need root and skip (saying so) without it.

mod common;
use common::*;

#[test]
fn a_bad_flow_spec_fails_before_any_lab_starts() {
    for (flows, must) in [
        (vec!["h4"], "\"h4\""),
        (vec!["h3:reno"], "for h3: cubic, newreno, bbr, gquic-cubic"),
        (vec!["h1", "h1:gquic-cubic"], "for h1/h2"),
    ] {
        let mut cmd = quiclab();
        cmd.arg("flows");
        for f in &flows {
            cmd.args(["--flow", f]);
        }
        let t = std::time::Instant::now();
        let out = cmd.args(["--duration", "10s"]).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flows:?}: {err}");
        assert!(
            err.contains("--flow") && err.contains(must),
            "{flows:?}: {err}"
        );
        // No lab was built: an error this fast never set up namespaces.
        assert!(t.elapsed().as_secs_f64() < 5.0);
    }
    let out = quiclab()
        .args([
            "flows",
            "--flow",
            "h3",
            "--duration",
            "8s",
            "--cutoff",
            "4s",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--duration") && err.contains("twice the cutoff"),
        "{err}"
    );
    let out = quiclab()
        .args(["flows", "--flow", "h3", "--flow", "h1", "--duration", "20s"])
        .args(["--offsets", "0s"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--offsets") && err.contains("one per flow"),
        "{err}"
    );
    // Neither a duration nor a size.
    let out = quiclab().args(["flows", "--flow", "h3"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));

    // In a scenario: FILE:LINE and the key, at the dry run already.
    let dir = temp_dir("flows-bad-scenario");
    let file = write(
        &dir,
        "bad.toml",
        "name = \"bad\"\n[workload]\nkind = \"flows\"\nduration = \"20s\"\n[grid]\nflows = [\"h3+h1\", \"h3+h4\"]\n",
    );
    let out = quiclab()
        .args(["run", "--dry-run", "--out"])
        .arg(dir.join("out"))
        .arg(&file)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("bad.toml:6: key \"flows\"") && err.contains("h4"),
        "{err}"
    );
}

#[test]
fn two_tcp_cubic_flows_share_a_10mbit_link_fairly() {
    if !root_or_skip("two_tcp_cubic_flows_share_a_10mbit_link_fairly") {
        return;
    }
    // Two CUBIC flows of one RTT converge within 10 s in most runs, not in every one (tail drop
    // can keep them apart for a while: J = 0.89 was seen once in CI): up to 3 attempts. A
    // bottleneck that is unfair every time still fails.
    quiclab_testkit::timing("two_tcp_cubic_flows_share_a_10mbit_link_fairly", 3, || {
        let out = quiclab()
            .args(["flows", "--flow", "h1:cubic", "--flow", "h1:cubic"])
            .args(["--duration", "20s", "--cutoff", "5s"])
            .args([
                "--rate", "10mbit", "--rtt", "50ms", "--queue", "1bdp", "--json",
            ])
            .output()
            .unwrap();
        let r = json(&out);
        for f in r["flows"].as_array().unwrap() {
            assert_eq!(f["proto"], "h1");
            assert_eq!(f["cc"], "cubic");
        }
        let u = r["utilization"].as_f64().unwrap();
        assert!(u > 0.8 && u < 1.05, "U = {u}");
        let jain = r["jain"].as_f64().unwrap();
        let goodputs: Vec<f64> = r["flows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["goodput_mbps"].as_f64().unwrap())
            .collect();
        quiclab_testkit::ensure(jain >= 0.9 && goodputs.iter().all(|g| *g > 2.0), || {
            format!("J = {jain}, goodputs {goodputs:?} Mbit/s")
        })
    });
}

#[test]
fn a_mix_of_h3_and_h1_adds_up_between_client_bins_and_bottleneck() {
    if !root_or_skip("a_mix_of_h3_and_h1_adds_up_between_client_bins_and_bottleneck") {
        return;
    }
    // Over IPv6: the emulator keys flows of both IP versions (IPv4 in the other tests).
    let out = quiclab()
        .args([
            "flows",
            "--flow",
            "h3:gquic-cubic",
            "--flow",
            "h1:cubic",
            "--ip",
            "6",
        ])
        .args(["--duration", "8s", "--bin", "100ms"])
        .args([
            "--rate", "10mbit", "--rtt", "40ms", "--queue", "1bdp", "--json",
        ])
        .output()
        .unwrap();
    let r = json(&out);
    let flows = r["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 2);
    let down = &r["fidelity"]["downlink"]["model"];
    let link_forwarded = down["counters"]["forwarded_bytes"].as_f64().unwrap();
    let mut flows_forwarded = 0.0;
    for f in flows {
        let bytes = f["bytes"].as_u64().unwrap();
        let bins: u64 = f["bin_bytes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b.as_u64().unwrap())
            .sum();
        assert_eq!(bins, bytes, "every received byte is in a bin: {f}");
        let fwd = f["forwarded_bytes"]
            .as_f64()
            .expect("the bottleneck keyed the flow");
        flows_forwarded += fwd;
        // Application bytes are the forwarded bytes less headers, handshakes and retransmissions.
        let ratio = bytes as f64 / fwd;
        assert!(
            ratio > 0.85 && ratio < 1.0,
            "payload/forwarded {ratio}: {f}"
        );
        assert!(f["loss_ratio"].as_f64().is_some() && f["dropped_packets"].is_u64());
    }
    assert_eq!(flows[0]["proto"], "h3");
    assert_eq!(flows[0]["cc"], "gquic-cubic");
    // The flows are (nearly) all the downlink carried: within 2 % (the rest: ICMPv6 and the like).
    let share = flows_forwarded / link_forwarded;
    assert!(
        share > 0.98 && share <= 1.0,
        "flows carry {share} of the link's bytes"
    );
    // Delivered by the emulator ≈ forwarded by the model (nothing in flight at the end).
    let delivered = r["fidelity"]["downlink"]["delivered_bytes"]
        .as_f64()
        .unwrap();
    assert!((delivered / link_forwarded - 1.0).abs() < 0.02);
}

#[test]
fn a_flows_scenario_stores_per_flow_series_and_reports_fairness() {
    if !root_or_skip("a_flows_scenario_stores_per_flow_series_and_reports_fairness") {
        return;
    }
    let dir = temp_dir("flows-scenario");
    let file = write(
        &dir,
        "mix.toml",
        "name = \"mix\"\ntrace = \"first\"\n[workload]\nkind = \"flows\"\nduration = \"6s\"\n\
         cutoff = \"1s\"\n[link]\nrate = \"10mbit\"\nrtt = \"40ms\"\nqueue = \"1bdp\"\n\
         [grid]\nflows = [[\"h3\", \"h1\"]]\n",
    );
    let out_dir = dir.join("out");
    let out = quiclab()
        .args(["run", "--report", "--out"])
        .arg(&out_dir)
        .arg(&file)
        .output()
        .unwrap();
    assert_success(&out);
    let out = quiclab()
        .args(["export", "--csv"])
        .arg(&out_dir)
        .output()
        .unwrap();
    assert_success(&out);
    let runs = std::fs::read_to_string(out_dir.join("runs.csv")).unwrap();
    assert!(runs.contains("h3+h1") && runs.contains("jain"), "{runs}");
    let series = std::fs::read_to_string(out_dir.join("series.csv")).unwrap();
    for name in [
        "throughput_mbps@1 h3",
        "throughput_mbps@2 h1",
        "throughput_mbps@link rate",
        "cwnd_bytes@1 h3",
        "cwnd_bytes@2 h1",
        "queue_delay_ms",
    ] {
        assert!(series.contains(name), "series.csv lacks {name}");
    }
    let html = std::fs::read_to_string(out_dir.join("report.html")).unwrap();
    assert!(html.contains("Fairness of the flow mixes"));
    assert!(html.contains("1 h3:") && html.contains("2 h1:"));
}
