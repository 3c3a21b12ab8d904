//! `quiclab video` and `kind = "video"`: bad input fails before any lab with the flag or
//! FILE:LINE and what is allowed; a 60 s video plays to its end over h1 (4 connections), h2
//! (2 parallel requests) and h3 without rebuffering; BASIC settles below a 1 Mbit/s link; a seek
//! has a measured wait. Lab tests need root and skip (saying so) without it.

mod common;
use common::*;

#[test]
fn bad_video_input_fails_before_any_lab_starts() {
    refused(
        "video",
        &["--proto", "h3", "--abr", "festive"],
        &["--abr", "festive", "bba2-astream"],
    );
    refused(
        "video",
        &["--proto", "h3", "--content", "no-such-video"],
        &["--content", "bbb, bbb-2s"],
    );
    refused(
        "video",
        &["--proto", "h1", "--seek", "40s:700s"],
        &["--seek", "outside the content"],
    );
    refused(
        "video",
        &["--proto", "h1", "--seek", "40s"],
        &["--seek", "AT:TO"],
    );
    refused(
        "video",
        &["--proto", "h1", "--parallel", "2"],
        &["--parallel", "use connections"],
    );
    refused(
        "video",
        &["--proto", "h3", "--connections", "4"],
        &["--connections", "use parallel"],
    );
    refused(
        "video",
        &["--proto", "h1", "--connections", "0"],
        &["--connections", "at least 1"],
    );
    refused(
        "video",
        &["--proto", "h1", "--live", "--seek", "10s:20s"],
        &["--seek", "on-demand"],
    );
    refused(
        "video",
        &["--proto", "h3", "--profile", "fcc"],
        &["FCC", "not shipped", "wifi, lte, 3g"],
    );
    // AStream, the reference player: one h1 player with its own queue limits, and a checkout to
    // run — refused before any lab starts, naming the flag (and what to set).
    refused(
        "video",
        &["--proto", "h3", "--client", "astream"],
        &["--client", "astream speaks h1 only"],
    );
    refused(
        "video",
        &["--proto", "h1", "--client", "astream", "--buffer", "8s"],
        &["--buffer", "NETFLIX_BUFFER_SIZE"],
    );
    let out = quiclab()
        .args(["video", "--proto", "h1", "--client", "astream"])
        .env_remove("QUICLAB_ASTREAM")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--client")
            && err.contains("QUICLAB_ASTREAM")
            && err.contains("does not ship"),
        "{err}"
    );
    let out = quiclab()
        .args(["bench", "players", "--quick", "--out"])
        .arg(temp_dir("bench-players-no-astream").join("out"))
        .env_remove("QUICLAB_ASTREAM")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("QUICLAB_ASTREAM"), "{err}");

    // A content file with a segment's sizes missing: FILE and the key.
    let dir = temp_dir("video-bad-content");
    let file = write(
        &dir,
        "movie.json",
        "{\"segment_duration_ms\": 4000,\n \"bitrates_kbps\": [100, 200],\n \"segment_sizes_bits\": [[400000, 800000], [400000]]}\n",
    );
    let path = file.display().to_string();
    refused(
        "video",
        &["--proto", "h3", "--content", &path],
        &[
            "--content",
            "movie.json: segment_sizes_bits[1]",
            "1 sizes for 2",
        ],
    );
    let file = write(
        &dir,
        "short.json",
        "{\"segment_duration_ms\": 4000,\n \"bitrates_kbps\": [100]\n}\n",
    );
    let path = file.display().to_string();
    refused(
        "video",
        &["--proto", "h3", "--content", &path],
        &["short.json:3:", "segment_sizes_bits"],
    );

    // In a scenario: FILE:LINE and the key, at the dry run already.
    let scenario = write(
        &dir,
        "bad.toml",
        "name = \"bad\"\n[workload]\nkind = \"video\"\nduration = \"60s\"\n[grid]\nplayers = [\"h1/4\", \"h2/0\"]\n",
    );
    let out = quiclab()
        .args(["run", "--dry-run", "--out"])
        .arg(dir.join("out"))
        .arg(&scenario)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("bad.toml:6: key \"players\"") && err.contains("at least 1"),
        "{err}"
    );
}

#[test]
fn the_shipped_video_scenarios_plan_with_quick_forms() {
    for (file, full_runs, quick_runs) in [
        ("arisu2019-seek.toml", 54, 12),
        ("arisu2019-multiplexing.toml", 396, 16),
        ("arisu2019-fairness.toml", 120, 6),
    ] {
        let path = format!("{}/../../scenarios/{file}", env!("CARGO_MANIFEST_DIR"));
        for (quick, runs) in [(false, full_runs), (true, quick_runs)] {
            let mut cmd = quiclab();
            cmd.args(["run", "--dry-run", &path]);
            if quick {
                cmd.arg("--quick");
            }
            let out = cmd.output().unwrap();
            assert_success(&out);
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(
                text.contains(&format!("{runs} run(s)")),
                "{file} quick={quick}: {text}"
            );
            assert!(text.contains("estimated total"), "{text}");
        }
    }
}

#[test]
fn a_60s_video_plays_to_the_end_over_h1_h2_and_h3_without_rebuffering() {
    if !root_or_skip("a_60s_video_plays_to_the_end_over_h1_h2_and_h3_without_rebuffering") {
        return;
    }
    let players = [
        ("h1", ["--connections", "4"]),
        ("h2", ["--parallel", "2"]),
        ("h3", ["--parallel", "1"]),
    ];
    // Three labs side by side: each link carries at most 5 Mbit/s.
    let outs = outputs_at_once(
        players
            .iter()
            .map(|(proto, split)| {
                let mut c = quiclab();
                c.args([
                    "video",
                    "--proto",
                    proto,
                    "--abr",
                    "basic",
                    "--duration",
                    "60s",
                ])
                .args(split)
                .args(["--rate", "5mbit", "--rtt", "50ms", "--json"]);
                c
            })
            .collect(),
    );
    for ((proto, _), out) in players.into_iter().zip(outs) {
        let r = json(&out);
        assert_eq!(r["proto"], proto);
        assert_eq!(r["segments"].as_u64(), Some(15), "{proto}: {r}");
        let p = &r["players"][0];
        assert_eq!(p["ended"], true, "{proto}");
        assert_eq!(
            r["rebuffer_s"].as_f64(),
            Some(0.0),
            "{proto}: {}",
            p["segment_log"]
        );
        assert_eq!(r["rebuffer_rate"].as_f64(), Some(0.0), "{proto}");
        // BASIC (AStream's) climbs at most one level per segment from the lowest: on a constant
        // 5 Mbit/s link it only climbs, and ends well above 1 Mbit/s but below the link's rate.
        let log = p["segment_log"].as_array().unwrap();
        // Every segment names the connections that carried it: the player's ports, k of them
        // over h1, the one connection over h2 and h3.
        let ports: Vec<u64> = p["local_ports"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        assert_eq!(ports.len(), if proto == "h1" { 4 } else { 1 }, "{proto}");
        for s in log {
            let used: Vec<u64> = s["connections"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap())
                .collect();
            assert_eq!(used, ports, "{proto}: {s}");
        }
        let rates: Vec<f64> = log
            .iter()
            .map(|s| s["bitrate_bps"].as_f64().unwrap())
            .collect();
        assert!(rates.windows(2).all(|w| w[1] >= w[0]), "{proto}: {rates:?}");
        let last = *rates.last().unwrap();
        assert!(last > 1e6 && last < 5e6, "{proto}: last level {last}");
        let startup = r["startup_s"].as_f64().unwrap();
        assert!(
            startup > 0.05 && startup < 3.0,
            "{proto}: startup {startup}"
        );
        // Each segment was split as asked: h1/4 used four connections.
        let ports = p["local_ports"].as_array().unwrap().len();
        assert_eq!(ports, if proto == "h1" { 4 } else { 1 }, "{proto}");
        assert_eq!(
            p["parts"].as_u64(),
            Some(if proto == "h1" {
                4
            } else if proto == "h2" {
                2
            } else {
                1
            })
        );
    }
}

#[test]
fn basic_settles_below_a_1mbit_link_and_a_seek_has_a_measured_wait() {
    if !root_or_skip("basic_settles_below_a_1mbit_link_and_a_seek_has_a_measured_wait") {
        return;
    }
    // The two labs side by side (1 and 5 Mbit/s links).
    let mut settles = quiclab();
    settles
        .args([
            "video",
            "--proto",
            "h3",
            "--abr",
            "basic",
            "--duration",
            "48s",
        ])
        .args(["--rate", "1mbit", "--rtt", "50ms", "--json"]);
    let mut seek = quiclab();
    seek.args([
        "video",
        "--proto",
        "h1",
        "--duration",
        "40s",
        "--seek",
        "8s:30s",
    ])
    .args(["--rate", "5mbit", "--rtt", "50ms", "--json"]);
    let [settled, sought]: [_; 2] = outputs_at_once(vec![settles, seek]).try_into().unwrap();
    let r = json(&settled);
    let log = r["players"][0]["segment_log"].as_array().unwrap();
    let last: Vec<f64> = log[log.len() - 4..]
        .iter()
        .map(|s| s["bitrate_bps"].as_f64().unwrap())
        .collect();
    assert!(
        last.iter().all(|&b| b < 1e6),
        "the last levels {last:?} should be below the 1 Mbit/s link"
    );
    assert!(
        last.iter().all(|&b| b > 2e5),
        "and not at the bottom: {last:?}"
    );

    let r = json(&sought);
    let waits = r["seek_waits_s"].as_array().unwrap();
    assert_eq!(waits.len(), 1, "{r}");
    let w = waits[0].as_f64().unwrap();
    // One segment at the level played before the seek, over a 50 ms path: well under 10 s.
    assert!(w > 0.05 && w < 10.0, "wait {w}");
    assert_eq!(r["players"][0]["ended"], true);
    // Played 0–8 s and 30–40 s.
    let played = r["players"][0]["played_s"].as_f64().unwrap();
    assert!((played - 18.0).abs() < 0.1, "played {played}");
}

#[test]
fn a_player_that_cannot_keep_up_fails_at_the_time_limit_with_its_metrics_kept() {
    if !root_or_skip("a_player_that_cannot_keep_up_fails_at_the_time_limit_with_its_metrics_kept") {
        return;
    }
    // 30 kbit/s cannot carry even the lowest level (45 kbit/s): the player stalls until the limit.
    let out = quiclab()
        .args([
            "video",
            "--proto",
            "h3",
            "--duration",
            "40s",
            "--timeout",
            "16s",
        ])
        .args([
            "--rate", "30kbit", "--rtt", "50ms", "--queue", "30kB", "--json",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("time limit"), "{err}");
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the partial result");
    let p = &r["players"][0];
    // Typed: a timeout, not a failure (a grid stores the run as `timeout`, censored).
    assert_eq!(p["error"]["kind"], "timed_out", "{p}");
    assert!(
        p["error"]["detail"]
            .as_str()
            .unwrap()
            .contains("time limit"),
        "{p}"
    );
    assert_eq!(p["ended"], false);
    // What was measured is kept: the segments that arrived and the media played.
    assert!(r["segments"].as_u64().unwrap() >= 1, "{r}");
    assert!(!p["segment_log"].as_array().unwrap().is_empty(), "{p}");
    assert!(p["played_s"].as_f64().unwrap() > 0.0, "{p}");
}
