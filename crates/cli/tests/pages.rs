//! `quiclab page` as a user meets it: the built-in loader over every protocol through the emulator,
//! Chromium as the reference, HAR and waterfall output, bad input, and page scenarios in the runner.
//! Tests that build labs need root and skip (saying so) without it.

use serde_json::Value;

mod common;
use common::*;

fn page_json(args: &[&str]) -> Value {
    let out = quiclab()
        .arg("page")
        .args(args)
        .arg("--json")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

fn expected_protocol(proto: &str) -> &'static str {
    match proto {
        "h1" => "http/1.1",
        "h2" => "h2",
        _ => "h3",
    }
}

#[test]
fn each_carlucci_page_loads_over_each_protocol_through_the_emulator() {
    if !root_or_skip("each_carlucci_page_loads_over_each_protocol_through_the_emulator") {
        return;
    }
    let dir = temp_dir("carlucci");
    for page in ["carlucci-small", "carlucci-medium", "carlucci-large"] {
        let spec = quiclab_page::corpus::lookup(page).unwrap();
        for proto in ["h1", "h2", "h3"] {
            let har = dir.join(format!("{page}-{proto}.har"));
            let svg = dir.join(format!("{page}-{proto}.svg"));
            let d = page_json(&[
                "--proto",
                proto,
                "--page",
                page,
                "--rate",
                "20mbit",
                "--rtt",
                "20ms",
                "--har",
                har.to_str().unwrap(),
                "--waterfall",
                svg.to_str().unwrap(),
            ]);
            let what = format!("{page} over {proto}");
            for key in [
                "proto",
                "page",
                "objects",
                "bytes",
                "plt_ms",
                "connections",
                "browser",
                "negotiated_protocols",
                "fidelity",
            ] {
                assert!(!d[key].is_null(), "{what}: no {key}: {d}");
            }
            assert_eq!(d["objects"], spec.objects().len() as u64, "{what}");
            assert_eq!(d["bytes"], spec.total_bytes(), "{what}");
            assert_eq!(d["browser"], "builtin");
            assert_eq!(
                d["negotiated_protocols"],
                serde_json::json!([expected_protocol(proto)]),
                "{what}"
            );
            let connections = d["connections"].as_u64().unwrap();
            if proto == "h1" {
                assert!(connections > 1 && connections <= 6, "{what}: {connections}");
            } else {
                assert_eq!(connections, 1, "{what}");
            }
            // At 20 Mbit/s the bytes alone take this long; handshakes and discovery add round trips.
            let wire_ms = spec.total_bytes() as f64 * 8.0 / 20e6 * 1e3;
            let plt = d["plt_ms"].as_f64().unwrap();
            assert!(plt > wire_ms && plt < 30_000.0, "{what}: {plt} ms");
            let har_text = std::fs::read_to_string(&har).unwrap();
            quiclab_page::har::validate(&har_text)
                .unwrap_or_else(|e| panic!("{what}: HAR invalid: {e:?}"));
            assert!(std::fs::read_to_string(&svg).unwrap().contains("<svg"));
        }
    }
}

#[test]
fn chromium_loads_over_each_protocol_with_the_asked_next_hop_protocol() {
    if !root_or_skip("chromium_loads_over_each_protocol_with_the_asked_next_hop_protocol") {
        return;
    }
    if !std::path::Path::new(quiclab_browser::DEFAULT_CHROMIUM).exists() {
        quiclab_testkit::skip(
            "chromium_loads_over_each_protocol_with_the_asked_next_hop_protocol",
            "no Chromium (apt-get install chromium; scripts/test installs it)",
        );
        return;
    }
    for proto in ["h1", "h2", "h3"] {
        let d = page_json(&[
            "--proto",
            proto,
            "--page",
            "megyesi-5-small",
            "--browser",
            "chromium",
            "--rate",
            "20mbit",
            "--rtt",
            "20ms",
        ]);
        assert_eq!(d["browser"], "chromium");
        assert_eq!(
            d["negotiated_protocols"],
            serde_json::json!([expected_protocol(proto)]),
            "{proto}: {d}"
        );
        assert_eq!(d["objects"], 6, "{proto}");
        assert!(d["plt_ms"].as_f64().unwrap() > 20.0, "{proto}");
    }
}

/// A sharded page (`--shards 4`, 2015's HTTP/1.1 sites): Chromium reaches every shard's name at
/// the one server, opens its six HTTP/1.1 connections per name (more than six in all), sees the
/// shards' timings and sizes (the server's Timing-Allow-Origin), and over h3 every shard is
/// forced onto QUIC.
#[test]
fn chromium_loads_a_sharded_page_over_more_connections() {
    if !root_or_skip("chromium_loads_a_sharded_page_over_more_connections") {
        return;
    }
    if !std::path::Path::new(quiclab_browser::DEFAULT_CHROMIUM).exists() {
        quiclab_testkit::skip(
            "chromium_loads_a_sharded_page_over_more_connections",
            "no Chromium (apt-get install chromium; scripts/test installs it)",
        );
        return;
    }
    let spec = quiclab_page::corpus::lookup("megyesi-50-small").unwrap();
    let load = |proto: &str, shards: &str| {
        page_json(&[
            "--proto",
            proto,
            "--page",
            "megyesi-50-small",
            "--browser",
            "chromium",
            "--shards",
            shards,
            "--rate",
            "20mbit",
            "--rtt",
            "40ms",
        ])
    };
    let one = load("h1", "1");
    let four = load("h1", "4");
    for d in [&one, &four] {
        assert_eq!(d["objects"], 51, "{d}");
        assert_eq!(
            d["negotiated_protocols"],
            serde_json::json!(["http/1.1"]),
            "{d}"
        );
        // Every object's size is seen: a shard's too.
        assert!(d["bytes"].as_u64().unwrap() >= spec.embedded_bytes(), "{d}");
    }
    let (c1, c4) = (
        one["connections"].as_u64().unwrap(),
        four["connections"].as_u64().unwrap(),
    );
    assert!(c1 <= 6, "one name: at most six connections, got {c1}");
    assert!(c4 > 6, "four names: more than six connections, got {c4}");
    let h3 = load("h3", "4");
    assert_eq!(
        h3["negotiated_protocols"],
        serde_json::json!(["h3"]),
        "{h3}"
    );
    assert_eq!(h3["objects"], 51, "{h3}");
    // The built-in loader models one origin: refused before any lab, naming the key.
    let out = quiclab()
        .args([
            "page",
            "--proto",
            "h1",
            "--page",
            "megyesi-5-small",
            "--shards",
            "2",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("shards") && err.contains("chromium"), "{err}");
}

#[test]
fn bad_pages_are_clear_errors() {
    let dir = temp_dir("bad");
    let out = quiclab()
        .args(["page", "--proto", "h2", "--page"])
        .arg(&dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("index.html") && err.contains(&*dir.to_string_lossy()),
        "{err}"
    );

    std::fs::write(dir.join("index.html"), "<img src=\"gone.png\">").unwrap();
    let out = quiclab()
        .args(["page", "--proto", "h2", "--page"])
        .arg(&dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("gone.png"), "{err}");

    let out = quiclab()
        .args(["page", "--proto", "h2", "--page", "carlucci-huge"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("carlucci-small") && err.contains("megyesi-50-large"),
        "{err}"
    );
}

#[test]
fn page_scenarios_run_in_the_runner() {
    if !root_or_skip("page_scenarios_run_in_the_runner") {
        return;
    }
    let dir = temp_dir("scenario");
    let file = dir.join("s.toml");
    std::fs::write(
        &file,
        "name = \"pages\"\n[workload]\nkind = \"page\"\npage = \"megyesi-5-small\"\n\
         [link]\nrate = \"10mbit\"\nrtt = \"20ms\"\n",
    )
    .unwrap();
    let out_dir = dir.join("out");
    let out = quiclab()
        .arg("run")
        .arg(&file)
        .arg("--out")
        .arg(&out_dir)
        .output()
        .unwrap();
    assert_success(&out);
    let runs = quiclab_results::Store::open(&out_dir.join("results.sqlite"))
        .unwrap()
        .runs()
        .unwrap();
    assert_eq!(runs.len(), 3);
    for r in &runs {
        assert!(r.metrics["plt_ms"] > 20.0, "{}", r.key);
        assert_eq!(r.metrics["objects"], 6.0, "{}", r.key);
    }
    // Repetition 1 is traced: its HAR and waterfall are kept.
    assert!(out_dir.join("traces/run-00000/page.har").exists());
    // --include-flagged: on a busy host all three runs may be flagged, and the report would then
    // (rightly) draw no statistics.
    let out = quiclab()
        .arg("report")
        .arg(&out_dir)
        .arg("--include-flagged")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let html = std::fs::read_to_string(out_dir.join("report.html")).unwrap();
    assert!(
        html.contains("Page load time"),
        "the report's primary metric is PLT"
    );
    // The slowest traced load of each cell is linked: its HAR and waterfall.
    assert!(html.contains("id=\"traced\""), "no traced runs' section");
    assert!(
        html.contains("href=\"traces/run-00000/page.har\"")
            && html.contains("href=\"traces/run-00000/waterfall.svg\""),
        "the traced run's files are not linked"
    );
}
