//! Other implementations through the lab (`--server caddy|quic-go|ngtcp2`, `--client
//! quic-go|ngtcp2|curl`; docs/stacks.md): a combination that cannot work is refused before any
//! lab starts, naming the flag; each implementation downloads (or serves) a known number of bytes
//! through the emulated link, verified byte for byte, and the result names the programs and their
//! versions. So an upgrade of a package that breaks an implementation fails here, not in a study.
//! Lab tests need root and the programs (QUICLAB_WITH_PEERS=1 scripts/setup; scripts/test asks
//! for them): in CI they fail without them.

mod common;
use common::*;

#[test]
fn combinations_that_cannot_work_are_refused_before_any_lab() {
    refused(
        "bulk",
        &["--proto", "h2", "--server", "ngtcp2"],
        &["--server", "h3 only", "h2"],
    );
    refused(
        "bulk",
        &["--proto", "h3", "--client", "curl"],
        &["--client", "h1 or h2"],
    );
    refused(
        "bulk",
        &["--proto", "h3", "--server", "quic-go", "--cc", "bbr"],
        &["--cc", "cannot be chosen"],
    );
    refused(
        "bulk",
        &["--proto", "h3", "--client", "quic-go", "--zero-rtt"],
        &["--zero-rtt", "quiclab's own client"],
    );
    refused(
        "bulk",
        &["--proto", "h3", "--server", "caddy", "--fec", "2"],
        &["--fec", "quiclab"],
    );
    refused("bulk", &["--server", "nginx"], &["--server", "caddy"]);
}

/// A 3 MB download at 20 Mbit/s and 20 ms through the lab with `args`; the result's JSON.
fn download(args: &[&str]) -> serde_json::Value {
    let out = quiclab()
        .args([
            "bulk", "--json", "--size", "3MB", "--rate", "20mbit", "--rtt", "20ms",
        ])
        .args(args)
        .output()
        .unwrap();
    json(&out)
}

fn check(r: &serde_json::Value, server: &str, client: &str) {
    assert_eq!(r["verified"], true, "{r}");
    assert_eq!(r["bytes"].as_u64(), Some(3_000_000), "{r}");
    let imps = &r["implementations"];
    assert_eq!(imps["server"]["name"], server, "{imps}");
    assert_eq!(imps["client"]["name"], client, "{imps}");
    for side in ["server", "client"] {
        let v = imps[side]["version"].as_str().unwrap_or("");
        assert!(!v.is_empty(), "{side}'s version: {imps}");
    }
    let goodput = r["goodput_mbps"].as_f64().unwrap();
    assert!(goodput > 5.0 && goodput < 20.5, "goodput {goodput}: {r}");
}

#[test]
fn each_server_serves_verified_bytes_to_quiclab_through_the_lab() {
    if !root_or_skip("each_server_serves_verified_bytes_to_quiclab_through_the_lab") {
        return;
    }
    // Caddy's TCP runs with the server namespace's congestion control (Go offers no per-socket
    // choice): its default, or the lab's routes' where the host keeps the namespace from it.
    for (server, proto, cc) in [
        ("quic-go", "h3", "cubic"),
        ("quic-go", "h2", "cubic"),
        ("caddy", "h3", "cubic"),
        ("caddy", "h1", "bbr"),
        ("caddy", "h1", "cubic"),
        ("ngtcp2", "h3", "cubic"),
    ] {
        let r = download(&["--proto", proto, "--server", server, "--cc", cc]);
        check(&r, server, "quiclab");
        assert_eq!(r["proto"], proto, "{r}");
        let server_cc = r["implementations"]["server"]["congestion_control"]
            .as_str()
            .unwrap_or("");
        let shown = if proto == "h3" {
            format!("QUIC {cc}")
        } else {
            format!("TCP {cc}")
        };
        assert!(server_cc.contains(&shown), "{server_cc}");
    }
}

/// A program that takes the namespace's TCP congestion control (Caddy) runs with the one asked
/// for on any host: where the host's `tcp_allowed_congestion_control` keeps a namespace from
/// defaulting to it (this CI host allows `reno bbr`), the lab's routes carry it, and the run
/// records what the kernel ran (sock_diag).
#[test]
fn a_program_that_takes_the_namespace_tcp_algorithm_gets_the_one_asked_for() {
    if !root_or_skip("a_program_that_takes_the_namespace_tcp_algorithm_gets_the_one_asked_for") {
        return;
    }
    let allowed = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_allowed_congestion_control")
        .unwrap_or_default();
    for client in ["quiclab", "curl"] {
        let out = quiclab()
            .args([
                "bulk", "--json", "--size", "1MB", "--rate", "20mbit", "--rtt", "20ms", "--proto",
                "h2", "--server", "caddy", "--client", client, "--cc", "cubic",
            ])
            .output()
            .unwrap();
        let r = json(&out);
        check_size(&r, 1_000_000);
        let server_cc = r["implementations"]["server"]["congestion_control"]
            .as_str()
            .unwrap_or("");
        assert!(
            server_cc.contains("TCP cubic"),
            "allowed here: {allowed}; {server_cc}: {r}"
        );
    }
}

fn check_size(r: &serde_json::Value, size: u64) {
    assert_eq!(r["verified"], true, "{r}");
    assert_eq!(r["bytes"].as_u64(), Some(size), "{r}");
}

#[test]
fn each_client_downloads_verified_bytes_through_the_lab() {
    if !root_or_skip("each_client_downloads_verified_bytes_through_the_lab") {
        return;
    }
    // curl and Caddy take the namespace's TCP congestion control (BBR is one the host allows).
    for (client, server, proto, cc) in [
        ("quic-go", "quiclab", "h3", "cubic"),
        ("quic-go", "caddy", "h2", "bbr"),
        ("curl", "quiclab", "h2", "bbr"),
        ("curl", "quic-go", "h1", "bbr"),
        ("ngtcp2", "quic-go", "h3", "cubic"),
    ] {
        let r = download(&[
            "--proto", proto, "--server", server, "--client", client, "--cc", cc,
        ]);
        check(&r, server, client);
        // What a client does not tell is null with the reason, never 0.
        if client == "curl" {
            assert!(r["unmeasured"]["tls_version"].is_string(), "{r}");
        }
        if proto == "h3" {
            assert!(r["connect_ms"].is_null(), "{r}");
        }
    }
}

#[test]
fn page_loads_from_other_servers_are_refused_where_they_cannot_work() {
    refused(
        "page",
        &[
            "--page",
            "carlucci-small",
            "--proto",
            "h1",
            "--server",
            "ngtcp2",
        ],
        &["--server", "h3 only"],
    );
    refused(
        "page",
        &[
            "--page",
            "carlucci-small",
            "--proto",
            "h3",
            "--server",
            "caddy",
            "--warm",
        ],
        &["--warm", "quiclab's own server"],
    );
}

/// One load of the built-in page carlucci-small (a root document and its JPEGs) at 20 Mbit/s
/// and 20 ms from `server`, by `browser`; every object must arrive over `proto`.
fn load_page(server: &str, browser: &str, proto: &str, cc: &str) {
    let out = quiclab()
        .args([
            "page",
            "--json",
            "--page",
            "carlucci-small",
            "--rate",
            "20mbit",
            "--rtt",
            "20ms",
            "--proto",
            proto,
            "--server",
            server,
            "--browser",
            browser,
            "--cc",
            cc,
        ])
        .output()
        .unwrap();
    let r = json(&out);
    let expected = quiclab_page::corpus::lookup("carlucci-small")
        .unwrap()
        .generate()
        .len() as u64;
    assert_eq!(
        r["objects"].as_u64(),
        Some(expected),
        "{server} {browser} {proto}: {r}"
    );
    let plt = r["plt_ms"].as_f64().unwrap_or(0.0);
    assert!(plt > 40.0 && plt < 30_000.0, "plt {plt}: {r}");
    let negotiated = r["negotiated_protocols"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let wanted = match proto {
        "h1" => "http/1.1",
        other => other,
    };
    assert!(
        !negotiated.is_empty() && negotiated.iter().all(|p| p == wanted),
        "{server} {browser} {proto}: negotiated {negotiated:?}"
    );
    let imps = &r["implementations"];
    assert_eq!(imps["server"]["name"], server, "{imps}");
    let loader = if browser == "chromium" {
        "chromium"
    } else {
        "quiclab"
    };
    assert_eq!(imps["client"]["name"], loader, "{imps}");
}

#[test]
fn other_servers_serve_a_corpus_page_to_both_loaders_through_the_lab() {
    if !root_or_skip("other_servers_serve_a_corpus_page_to_both_loaders_through_the_lab") {
        return;
    }
    for (server, browser, proto, cc) in [
        ("caddy", "chromium", "h3", "cubic"),
        ("caddy", "builtin", "h1", "bbr"),
        ("quic-go", "chromium", "h2", "cubic"),
        ("quic-go", "builtin", "h3", "cubic"),
        ("ngtcp2", "chromium", "h3", "cubic"),
        ("ngtcp2", "builtin", "h3", "cubic"),
    ] {
        load_page(server, browser, proto, cc);
    }
}

#[test]
fn chromium_downloads_verified_bytes_from_each_server_through_the_lab() {
    if !root_or_skip("chromium_downloads_verified_bytes_from_each_server_through_the_lab") {
        return;
    }
    for (server, proto, cc) in [
        ("quiclab", "h3", "cubic"),
        ("quiclab", "h1", "cubic"),
        ("caddy", "h2", "bbr"),
        ("quic-go", "h3", "cubic"),
        ("ngtcp2", "h3", "cubic"),
    ] {
        let r = download(&[
            "--proto", proto, "--server", server, "--client", "chromium", "--cc", cc,
        ]);
        check(&r, server, "chromium");
        let wanted = if proto == "h1" { "http/1.1" } else { proto };
        assert_eq!(r["negotiated"], wanted, "{r}");
        let handshake = r["handshake_ms"].as_f64().unwrap_or(0.0);
        // One round trip (QUIC) or two (TCP, then TLS 1.3) of 20 ms, with generous room.
        assert!(
            (19.0..400.0).contains(&handshake),
            "handshake {handshake}: {r}"
        );
        assert!(r["ttfb_ms"].as_f64().unwrap_or(0.0) > handshake, "{r}");
    }
}

#[test]
fn other_servers_serve_video_segments_to_quiclab_players_through_the_lab() {
    if !root_or_skip("other_servers_serve_video_segments_to_quiclab_players_through_the_lab") {
        return;
    }
    // Two segments of bbb (4 s each) from each server; the h1 player's 4 Range requests per
    // segment need the server's Range support. (Caddy over TCP would take the namespace's
    // congestion control, which on a host that allows only reno and bbr cannot be CUBIC.)
    // The three labs side by side: each plays 8 s of video in real time.
    let servers = [("quic-go", "h1/4"), ("ngtcp2", "h3"), ("caddy", "h3")];
    let outs = outputs_at_once(
        servers
            .iter()
            .map(|(server, players)| {
                let mut c = quiclab();
                c.args([
                    "video",
                    "--json",
                    "--proto",
                    players,
                    "--duration",
                    "8s",
                    "--abr",
                    "basic",
                    "--rate",
                    "20mbit",
                    "--rtt",
                    "20ms",
                    "--server",
                    server,
                ]);
                c
            })
            .collect(),
    );
    for ((server, _), out) in servers.into_iter().zip(outs) {
        let r = json(&out);
        assert_eq!(r["segments"].as_u64(), Some(2), "{server}: {r}");
        assert_eq!(r["server"]["name"], server, "{r}");
        assert!(r["avg_bitrate_mbps"].as_f64().unwrap_or(0.0) > 0.0, "{r}");
    }
    refused(
        "video",
        &["--proto", "h1", "--duration", "8s", "--server", "ngtcp2"],
        &["--server", "h3"],
    );
}

/// A kept run of the quic-go server: its qlog's congestion window goes into cwnd.csv on the
/// monotonic clock, as quiclab's own server writes it, inside the run's time.
#[test]
fn a_kept_quic_go_run_has_its_congestion_window_on_the_labs_clock() {
    if !root_or_skip("a_kept_quic_go_run_has_its_congestion_window_on_the_labs_clock") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let keep = dir.path().join("kept");
    let mono_ns = || {
        nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
            .map(|t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64)
            .unwrap()
    };
    let before = mono_ns();
    let r = download(&[
        "--proto",
        "h3",
        "--server",
        "quic-go",
        "--keep",
        keep.to_str().unwrap(),
    ]);
    let after = mono_ns();
    check(&r, "quic-go", "quiclab");
    let csv = std::fs::read_to_string(keep.join("cwnd.csv")).unwrap();
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some("t_mono_ns,conn,transport,cwnd_bytes"));
    let times: Vec<u64> = lines
        .map(|l| l.split(',').next().unwrap().parse().unwrap())
        .collect();
    assert!(times.len() >= 3, "{csv}");
    assert!(
        times.iter().all(|t| (before..after).contains(t)),
        "samples outside the run ({before}..{after}): {times:?}"
    );
}

/// Another server's kernel TCP (Caddy's, the quic-go peer's net/http): its window read from the
/// kernel's socket diagnostics goes into a kept run's cwnd.csv, quiclab's own format and clock;
/// the run checks the congestion control the kernel ran is the one it records.
#[test]
fn a_kept_run_of_another_servers_tcp_has_its_window_from_the_kernel() {
    if !root_or_skip("a_kept_run_of_another_servers_tcp_has_its_window_from_the_kernel") {
        return;
    }
    for (server, proto, cc) in [("caddy", "h2", "bbr"), ("quic-go", "h1", "cubic")] {
        let dir = tempfile::tempdir().unwrap();
        let keep = dir.path().join("kept");
        let r = download(&[
            "--proto",
            proto,
            "--server",
            server,
            "--cc",
            cc,
            "--keep",
            keep.to_str().unwrap(),
        ]);
        check(&r, server, "quiclab");
        let csv = std::fs::read_to_string(keep.join("cwnd.csv")).unwrap();
        let mut lines = csv.lines();
        assert_eq!(
            lines.next(),
            Some(
                "t_mono_ns,conn,transport,cwnd_bytes,ssthresh_bytes,srtt_us,min_rtt_us,lost_packets,retransmitted_packets,delivery_rate_bps,bytes_sent,ca_state,peer_port"
            )
        );
        let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
        // 3 MB at 20 Mbit/s takes > 1 s: a sample every 5 ms gives well over 50.
        assert!(rows.len() > 50, "{server}: {} rows", rows.len());
        assert!(rows.iter().all(|r| r[2] == "tcp"), "{server}: {csv}");
        let peak: u64 = rows
            .iter()
            .map(|r| r[3].parse::<u64>().unwrap())
            .max()
            .unwrap();
        // The path's BDP is 50 kB; the window grows past its initial 10 segments.
        assert!(peak > 14_480, "{server}: peak window {peak} B");
    }
}
