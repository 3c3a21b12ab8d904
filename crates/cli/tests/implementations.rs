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
    // Caddy's TCP runs with the server namespace's default congestion control (Go offers no
    // per-socket choice): BBR here is a choice the host allows every namespace.
    for (server, proto, cc) in [
        ("quic-go", "h3", "cubic"),
        ("quic-go", "h2", "cubic"),
        ("caddy", "h3", "cubic"),
        ("caddy", "h1", "bbr"),
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

/// A program that takes the namespace's TCP congestion control runs with the one asked for, or
/// fails saying why: a namespace may choose only among the host's allowed algorithms, which
/// quiclab never changes.
#[test]
fn a_namespace_that_cannot_have_the_asked_tcp_algorithm_fails_the_run_saying_so() {
    if !root_or_skip("a_namespace_that_cannot_have_the_asked_tcp_algorithm_fails_the_run_saying_so")
    {
        return;
    }
    let allowed = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_allowed_congestion_control")
        .unwrap_or_default();
    let out = quiclab()
        .args([
            "bulk", "--json", "--size", "1MB", "--rate", "20mbit", "--rtt", "20ms", "--proto",
            "h2", "--server", "caddy", "--cc", "cubic",
        ])
        .output()
        .unwrap();
    if allowed.split_whitespace().any(|a| a == "cubic") {
        check_size(&json(&out), 1_000_000);
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{err}");
        assert!(
            err.contains("tcp_allowed_congestion_control") && err.contains("cubic"),
            "{err}"
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
