//! The `quiclab` command line as a user meets it: errors, exit codes, teardown on signals, `clean`,
//! and `calibrate --json`'s contract. Tests that build labs need root and skip (saying so) without it.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::*;

/// A timing check with retries; skipped (and said so) when the hypervisor steals much CPU.
fn timing(name: &str, check: impl FnMut() -> Result<(), String>) {
    quiclab_testkit::timing(name, 3, check)
}

use quiclab_testkit::ensure;

#[test]
fn bad_values_name_the_flag_and_the_accepted_forms() {
    for (args, must_contain) in [
        (vec!["--rate", "10mb"], vec!["--rate", "mbit"]),
        (vec!["--delay", "25"], vec!["--delay", "ms"]),
        (vec!["--loss", "120%"], vec!["--loss"]),
        (vec!["--queue", "30kb/s"], vec!["--queue", "bdp"]),
        (vec!["--up-rate", "fast"], vec!["--up-rate"]),
    ] {
        let out = quiclab()
            .arg("shell")
            .args(&args)
            .args(["--", "true"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        for m in must_contain {
            assert!(err.contains(m), "{args:?}: stderr lacks {m:?}: {err}");
        }
        assert!(!err.contains("panicked"), "{err}");
    }
}

/// A page load's files are listed with the other outputs in `page --help`, not among the
/// emulator's host flags (issue 61, the newcomer's walk-through).
#[test]
fn page_help_lists_the_har_and_waterfall_under_output() {
    let out = quiclab().args(["page", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    let heading_of = |flag: &str| {
        help.lines()
            .take_while(|l| !l.trim_start().starts_with(flag))
            .filter(|l| !l.starts_with(' ') && l.ends_with(':'))
            .last()
            .map(str::to_string)
    };
    for flag in ["--har", "--waterfall"] {
        assert_eq!(
            heading_of(flag).as_deref(),
            Some("Output:"),
            "{flag}: {help}"
        );
    }
}

/// Only the commands whose client answers network switches list --switch (issue 61: flows and
/// page listed it and then refused it).
#[test]
fn only_the_commands_that_answer_switches_list_switch() {
    for (command, lists) in [
        ("bulk", true),
        ("video", true),
        ("flows", false),
        ("page", false),
    ] {
        let out = quiclab().args([command, "--help"]).output().unwrap();
        let help = String::from_utf8_lossy(&out.stdout);
        for flag in ["--switch ", "--switch-gap "] {
            assert_eq!(help.contains(flag), lists, "{command} {flag}: {help}");
        }
    }
    let out = quiclab()
        .args(["flows", "--flow", "h1", "--switch", "wifi@0s,lte@2s"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("unexpected argument '--switch'"), "{err}");
}

#[test]
fn a_malformed_trace_names_the_file_and_line() {
    let dir = std::env::temp_dir().join(format!("quiclab-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bad.trace");
    std::fs::write(&path, "1\n2\nthree\n4\n").unwrap();
    let out = quiclab()
        .args(["shell", "--trace"])
        .arg(&path)
        .args(["--", "true"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0));
    assert!(err.contains("bad.trace:3"), "{err}");
    let out = quiclab()
        .args(["shell", "--profile", "no-such-profile", "--", "true"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("np2b-typical"), "lists built-ins: {err}");
}

#[test]
fn shell_runs_in_the_client_namespace_and_returns_the_exit_status() {
    if !root_or_skip("shell") {
        return;
    }
    let out = quiclab()
        .args(["shell", "--rtt", "10ms", "--", "sh", "-c"])
        .arg("ip -o addr show; echo server=$QUICLAB_SERVER server6=$QUICLAB_SERVER6; exit 7")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(7), "{text}");
    assert!(text.contains("100.64.0.1/24"), "{text}");
    assert!(
        text.contains("server=100.64.0.2 server6=fd00:71ab::2"),
        "{text}"
    );
}

#[test]
fn shell_log_records_every_packet_and_prints_a_summary() {
    if !root_or_skip("shell --log") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("quiclab-log-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("link.log");
    timing("shell --log", || {
        // Bash's /dev/udp sends one datagram to the server side: 3 of them cross the uplink.
        let out = quiclab()
            .args(["shell", "--rate", "10mbit", "--rtt", "20ms", "--log"])
            .arg(&log)
            .args(["--", "bash", "-c"])
            .arg("for i in 1 2 3; do echo hello > /dev/udp/$QUICLAB_SERVER/9; done; sleep 0.1")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("quiclab link summary"), "{err}");
        let text = std::fs::read_to_string(&log).unwrap();
        assert!(text.starts_with("# quiclab packet log v1"), "{text}");
        let arrivals = text.lines().filter(|l| l.contains(" up + ")).count();
        let deliveries = text.lines().filter(|l| l.contains(" up - ")).count();
        assert_eq!(arrivals, 3, "{text}");
        assert_eq!(deliveries, 3, "{text}");
        for l in text.lines().filter(|l| l.contains(" up - ")) {
            // `t dir - bytes one_way_us late_us`: one-way ≈ 10 ms.
            let one_way: f64 = l.split_whitespace().nth(4).unwrap().parse().unwrap();
            ensure((one_way - 10_000.0).abs() < 1_500.0, || l.to_string())?;
        }
        Ok(())
    });
}

/// `quiclab shell` with a sleeping server and client, once its lab is up and both have started.
fn shell_with_sleepers() -> (std::process::Child, u32) {
    let child = quiclab()
        .args(["shell", "--server-cmd", "sleep 60", "--", "sleep", "60"])
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let t0 = Instant::now();
    while namespaces_of(pid).len() < 2 && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    (child, pid)
}

#[test]
fn sigterm_during_shell_tears_the_lab_down() {
    if !root_or_skip("sigterm") {
        return;
    }
    let (mut child, pid) = shell_with_sleepers();
    assert_eq!(namespaces_of(pid).len(), 2, "lab came up");
    std::thread::sleep(Duration::from_millis(500));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = child.wait().unwrap();
    assert!(!status.success());
    assert!(
        namespaces_of(pid).is_empty(),
        "namespaces left after SIGTERM"
    );
}

#[test]
fn clean_removes_what_a_killed_lab_left() {
    if !root_or_skip("clean") {
        return;
    }
    let (mut child, pid) = shell_with_sleepers();
    std::thread::sleep(Duration::from_millis(500));
    child.kill().unwrap(); // SIGKILL: no chance to clean up
    child.wait().unwrap();
    assert_eq!(namespaces_of(pid).len(), 2, "SIGKILL left the lab behind");
    let out = quiclab().args(["clean", "--json"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(namespaces_of(pid).is_empty(), "clean left namespaces");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // The two `sleep 60` (server and client) were ours and are gone.
    assert!(
        report["processes"].as_array().unwrap().len() >= 2,
        "{report}"
    );
}

/// A lab's child that outlived its lab (its owner killed mid-teardown, the namespaces' names
/// gone) is found by the lab id in its environment and ended; a process with a live owner, or in
/// the host's namespace, is left alone.
#[test]
fn clean_ends_a_lab_child_whose_lab_is_gone() {
    if !root_or_skip("clean_ends_a_lab_child_whose_lab_is_gone") {
        return;
    }
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let dead = gone.id();
    gone.wait().unwrap();
    let start = |lab: String, own_namespace: bool| {
        let mut c = if own_namespace {
            let mut c = std::process::Command::new("unshare");
            c.args(["-n", "sleep", "60"]);
            c
        } else {
            let mut c = std::process::Command::new("sleep");
            c.arg("60");
            c
        };
        c.env("QUICLAB_LAB", lab).spawn().unwrap()
    };
    let mut orphan = start(format!("ql-{dead}-0"), true);
    let mut owned = start(format!("ql-{}-0", std::process::id()), true);
    let mut host = start(format!("ql-{dead}-1"), false);
    std::thread::sleep(Duration::from_millis(300));
    let out = quiclab().args(["clean", "--json"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ended: Vec<i64> = report["processes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p.as_i64())
        .collect();
    assert!(ended.contains(&(orphan.id() as i64)), "{report}");
    assert!(
        orphan.wait().unwrap().code().is_none(),
        "the orphan was killed"
    );
    for c in [&mut owned, &mut host] {
        assert!(!ended.contains(&(c.id() as i64)), "{report}");
        assert!(c.try_wait().unwrap().is_none(), "left alone");
        c.kill().unwrap();
        c.wait().unwrap();
    }
}

#[test]
fn calibrate_json_reports_configured_and_measured_figures() {
    if !root_or_skip("calibrate") {
        return;
    }
    timing("calibrate", || {
        let out = quiclab()
            .args([
                "calibrate",
                "--rate",
                "20mbit",
                "--rtt",
                "20ms",
                "--loss",
                "1%",
                "--json",
                "--bulk-duration",
                "3s",
                "--rtt-probes",
                "100",
                "--loss-packets",
                "4000",
            ])
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
        // The contract: fields, configured values, exit code agreeing with `pass`.
        let pass = v["pass"].as_bool().unwrap();
        assert_eq!(out.status.code(), Some(if pass { 0 } else { 1 }));
        assert_eq!(v["rtt_ms"]["configured"].as_f64(), Some(20.0));
        assert_eq!(v["rate_mbps"]["configured"].as_f64(), Some(20.0));
        assert_eq!(v["loss"]["configured"].as_f64(), Some(0.01));
        for k in ["p50", "p99", "max"] {
            assert!(v["lateness_us"][k].as_f64().unwrap() >= 0.0);
        }
        // Lateness per phase, each with its share of releases > 100 µs late.
        let phases = v["lateness_us"]["phases"].as_array().unwrap();
        let names: Vec<&str> = phases.iter().map(|p| p["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["rtt", "tcp", "udp-loss"]);
        for p in phases.iter().chain([&v["lateness_us"]]) {
            let share = p["late_share"].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&share), "{p}");
        }
        // The loss phase carried its 2 × 4 000 datagrams (less the 1 % lost) and the echoes.
        let udp = phases[2]["lateness_us"]["count"].as_u64().unwrap();
        assert!((7_500..=8_100).contains(&udp), "udp-loss releases {udp}");
        // The measurements, within generous bounds.
        let median = v["rtt_ms"]["median"].as_f64().unwrap();
        ensure((median - 20.0).abs() < 2.0, || format!("median {median}"))?;
        let rate = v["rate_mbps"]["measured"].as_f64().unwrap_or(0.0);
        ensure((rate - 20.0).abs() < 1.0, || format!("rate {rate}"))?;
        let loss = v["loss"]["measured"].as_f64().unwrap();
        ensure((loss - 0.01).abs() < 0.005, || format!("loss {loss}"))
    });
}

/// Issue 59: jitter and reordering are measured by `calibrate` and judged against what was
/// configured: the idle RTT's spread from the jitter, the share of datagrams overtaken.
#[test]
fn calibrate_measures_jitter_and_reordering() {
    if !root_or_skip("calibrate-variation") {
        return;
    }
    let run = |extra: &[&str]| {
        let out = quiclab()
            .args([
                "calibrate",
                "--rate",
                "20mbit",
                "--rtt",
                "20ms",
                "--json",
                "--bulk-duration",
                "2s",
                "--rtt-probes",
                "200",
                "--loss-packets",
                "4000",
            ])
            .args(extra)
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
        assert_eq!(
            out.status.code(),
            Some(if v["pass"].as_bool().unwrap() { 0 } else { 1 })
        );
        v
    };
    timing("calibrate-jitter", || {
        let v = run(&["--jitter", "3ms"]);
        assert!(
            v["link"]["downlink"]
                .as_str()
                .unwrap()
                .contains("jitter 3ms"),
            "{}",
            v["link"]
        );
        let var = &v["variation"];
        assert_eq!(var["jitter_checked"].as_bool(), Some(true));
        // Two uniform ±3 ms draws: √(2 · 9 / 3) ms.
        let expected = var["rtt_sd_expected_ms"].as_f64().unwrap();
        assert!((expected - 6f64.sqrt()).abs() < 1e-9, "{expected}");
        let measured = var["rtt_sd_measured_ms"].as_f64().unwrap();
        ensure((measured - expected).abs() < 0.35 * expected, || {
            format!("RTT sd {measured} ms, expected {expected}")
        })?;
        let median = v["rtt_ms"]["median"].as_f64().unwrap();
        ensure((median - 20.0).abs() < 2.0, || format!("median {median}"))?;
        ensure(
            var["downlink_reorder"]["measured"].as_f64() == Some(0.0),
            || format!("jitter alone reordered: {var}"),
        )
    });
    timing("calibrate-reorder", || {
        let v = run(&["--reorder", "5%"]);
        let var = &v["variation"];
        for d in ["uplink_reorder", "downlink_reorder"] {
            assert_eq!(var[d]["checked"].as_bool(), Some(true), "{var}");
            let share = var[d]["measured"].as_f64().unwrap();
            ensure((0.03..0.07).contains(&share), || format!("{d}: {share}"))?;
        }
        ensure(v["pass"].as_bool() == Some(true), || format!("{v}"))
    });
    let e = quiclab()
        .args([
            "calibrate",
            "--rate",
            "20mbit",
            "--rtt",
            "20ms",
            "--reorder-delay",
            "5ms",
        ])
        .output()
        .unwrap();
    assert_eq!(
        e.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&e.stderr)
    );
    assert!(String::from_utf8_lossy(&e.stderr).contains("needs --reorder"));
}

/// `calibrate --offload on` at 200 Mbit/s with a packet log: the JSON document and the log.
fn offload_calibration(dir: &std::path::Path, env: &[(&str, &str)]) -> (serde_json::Value, String) {
    let log = dir.join("link.log");
    let out = quiclab()
        .args([
            "calibrate",
            "--rate",
            "200mbit",
            "--rtt",
            "10ms",
            "--offload",
            "on",
            "--json",
            "--bulk-duration",
            "2s",
            "--rtt-probes",
            "20",
            "--loss-packets",
            "2000",
            "--log",
        ])
        .arg(&log)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    (v, std::fs::read_to_string(&log).unwrap())
}

/// Timing of an offload calibration: the download's rate while backlogged within 2 % of 200 Mbit/s.
fn rate_within_2pct(v: &serde_json::Value) -> Result<(), String> {
    let rate = v["rate_mbps"]["measured"].as_f64().unwrap_or(0.0);
    ensure((rate - 200.0).abs() <= 4.0, || {
        format!("rate {rate} Mbit/s")
    })
}

/// Delivered packets in a packet log per direction, and the largest.
fn delivered_in_log(log: &str) -> (u64, u64, u64) {
    let (mut up, mut down, mut largest) = (0, 0, 0);
    for l in log.lines().filter(|l| !l.starts_with('#')) {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.get(2) == Some(&"-") {
            let bytes: u64 = f[3].parse().unwrap();
            largest = largest.max(bytes);
            if f[1] == "up" {
                up += 1;
            } else {
                down += 1;
            }
        }
    }
    (up, down, largest)
}

#[test]
fn offload_splits_super_packets_and_keeps_the_model_per_packet() {
    if !root_or_skip("offload") {
        return;
    }
    let dir = temp_dir("offload");
    timing("offload", || {
        let (v, log) = offload_calibration(&dir, &[]);
        let f = &v["fidelity"];
        let down = &f["downlink"]["offload"];
        // The kernel handed over TSO super-packets and the emulator split them.
        let per_read = down["segments_per_read"].as_f64().unwrap();
        assert!(per_read > 1.5, "segments per read {per_read}: {down}");
        assert_eq!(down["dropped_unsplittable"].as_u64(), Some(0), "{down}");
        assert!(down["fallback"].is_null(), "{down}");
        // The packet log has one line per delivered MTU packet.
        let (up_n, down_n, largest) = delivered_in_log(&log);
        assert_eq!(up_n, f["uplink"]["delivered_packets"].as_u64().unwrap());
        assert_eq!(down_n, f["downlink"]["delivered_packets"].as_u64().unwrap());
        assert!(largest <= 1500, "a packet of {largest} bytes in the log");
        // Coalesced writes: fewer writes than packets (the kernel's own count).
        let per_write = down["segments_per_write"].as_f64().unwrap();
        assert!(per_write >= 1.0, "{down}");
        rate_within_2pct(&v)
    });
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_refused_coalesced_write_falls_back_to_plain_writes() {
    if !root_or_skip("offload_fallback") {
        return;
    }
    let dir = temp_dir("offload-fallback");
    timing("offload_fallback", || {
        let (v, log) = offload_calibration(&dir, &[("QUICLAB_FAULT_GSO_REFUSED", "1")]);
        let f = &v["fidelity"];
        // The download's first coalesced write was refused (the uplink carries ACKs, which
        // never coalesce, so it has nothing to refuse).
        let o = &f["downlink"]["offload"];
        let why = o["fallback"].as_str().unwrap_or_default();
        assert!(why.contains("refused"), "downlink: {o}");
        // Every packet written on its own from then on (the refused run again, one by one):
        // one kernel write per packet, and none lost to the refusal.
        for d in ["uplink", "downlink"] {
            let o = &f[d]["offload"];
            let per_write = o["segments_per_write"].as_f64().unwrap();
            assert!((per_write - 1.0).abs() < 0.01, "{d}: {o}");
            assert_eq!(f[d]["write_errors"].as_u64(), Some(0), "{d}: {}", f[d]);
        }
        let (_, down_n, _) = delivered_in_log(&log);
        assert_eq!(down_n, f["downlink"]["delivered_packets"].as_u64().unwrap());
        rate_within_2pct(&v)
    });
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn not_root_is_explained() {
    let run = |cmd: &mut Command| {
        let out = cmd.args(["shell", "--", "true"]).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("root"), "{err}");
    };
    if !nix::unistd::geteuid().is_root() {
        run(&mut quiclab());
        return;
    }
    // As root: run a copy of the binary as `nobody`, from a directory nobody can enter (the build
    // tree may sit under a private 0700 directory).
    let Ok(Some(nobody)) = nix::unistd::User::from_name("nobody") else {
        quiclab_testkit::skip("not_root", "no 'nobody' user");
        return;
    };
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let dir = std::env::temp_dir().join(format!("quiclab-nobody-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let bin = dir.join("quiclab");
    std::fs::copy(env!("CARGO_BIN_EXE_quiclab"), &bin).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut cmd = Command::new(&bin);
    cmd.uid(nobody.uid.as_raw())
        .gid(nobody.gid.as_raw())
        .current_dir(&dir);
    run(&mut cmd);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bulk_downloads_verified_content_over_each_protocol_with_the_expected_round_trips() {
    if !root_or_skip("bulk") {
        return;
    }
    // 40 ms RTT, a 1 kB object: time to first byte is the handshake's round trips plus one. (With a
    // larger object TLS over TCP takes one round trip more: its first 16 kB record does not fit in
    // the initial window, and the headers in it cannot be decrypted before the rest arrives.)
    for (proto, tls, negotiated, rtts) in [
        ("h1", "1.2", "http/1.1", 4.0),
        ("h2", "1.3", "h2", 3.0),
        ("h3", "1.3", "h3", 2.0),
    ] {
        timing(&format!("bulk {proto}"), || {
            let mut cmd = quiclab();
            cmd.args([
                "bulk", "--proto", proto, "--size", "1kB", "--rate", "50mbit",
            ]);
            cmd.args(["--rtt", "40ms", "--json"]);
            if proto != "h3" {
                cmd.args(["--tls", tls]);
            }
            let out = cmd.output().unwrap();
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
                panic!("{proto}: {e}: {}", String::from_utf8_lossy(&out.stderr))
            });
            assert_eq!(out.status.code(), Some(0), "{proto}");
            assert_eq!(v["negotiated"], negotiated);
            assert_eq!(v["tls_version"], tls);
            assert_eq!(v["verified"], true);
            assert_eq!(v["bytes"], 1_000);
            for k in ["goodput_mbps", "loss_ratio", "cpu_client_s", "cpu_server_s"] {
                assert!(v[k].is_number(), "{proto}: {k} missing: {v}");
            }
            let ttfb = v["ttfb_ms"].as_f64().unwrap();
            let expected = rtts * 40.0;
            ensure((ttfb - expected).abs() < 0.15 * expected + 5.0, || {
                format!("{proto}: ttfb {ttfb:.1} ms, expected about {expected} ms ({rtts} RTT)")
            })
        });
    }
}

#[test]
fn bulk_resumes_and_sends_0rtt_through_the_emulator() {
    if !root_or_skip("bulk 0-RTT") {
        return;
    }
    for (args, resumed, zero_rtt, rtts) in [
        (&["--proto", "h3", "--zero-rtt"][..], true, true, 1.0),
        (&["--proto", "h3", "--resume"][..], true, false, 2.0),
        (
            &["--proto", "h1", "--tls", "1.2", "--resume"][..],
            true,
            false,
            3.0,
        ),
    ] {
        timing(&format!("bulk {args:?}"), || {
            let out = quiclab()
                .arg("bulk")
                .args(args)
                .args([
                    "--size", "1kB", "--rate", "50mbit", "--rtt", "40ms", "--json",
                ])
                .output()
                .unwrap();
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
                panic!("{args:?}: {e}: {}", String::from_utf8_lossy(&out.stderr))
            });
            assert_eq!(v["resumed"], resumed, "{args:?}");
            assert_eq!(v["zero_rtt"], zero_rtt, "{args:?}");
            assert_eq!(v["verified"], true);
            let ttfb = v["ttfb_ms"].as_f64().unwrap();
            let expected = rtts * 40.0;
            ensure((ttfb - expected).abs() < 0.15 * expected + 5.0, || {
                format!("{args:?}: ttfb {ttfb:.1} ms, expected about {expected} ms")
            })
        });
    }
}

#[test]
fn bench_runner_refuses_a_non_empty_out_and_deletes_nothing() {
    // `--out ~` once ran remove_dir_all on a home directory. Whatever the privileges, a non-empty
    // directory is refused before anything runs, and its files stay.
    let dir = temp_dir("bench-runner-out");
    let precious = write(&dir, "precious.txt", "not quiclab's");
    let out = quiclab()
        .args(["bench", "runner", "--runs", "3", "--out"])
        .arg(&dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--out") && err.contains("quiclab did not create"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&precious).unwrap(), "not quiclab's");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn trace_is_a_mahimahi_trace_everywhere_and_keep_the_outputs_directory() {
    // `--trace` once meant both a Mahimahi trace (LINK OPTIONS) and bulk's/page's output
    // directory; `quiclab bulk --trace FILE` then failed with "File exists".
    for cmd in ["bulk", "page", "shell"] {
        let out = quiclab().args([cmd, "--help"]).output().unwrap();
        let help = String::from_utf8_lossy(&out.stdout);
        assert_eq!(help.matches("--trace <").count(), 1, "{cmd}: {help}");
        if cmd != "shell" {
            assert_eq!(help.matches("--keep <DIR>").count(), 1, "{cmd}: {help}");
        }
    }
    let dir = temp_dir("bulk-trace");
    let trace = write(&dir, "bad.trace", "not a timestamp\n");
    let out = quiclab()
        .args(["bulk", "--proto", "h2", "--size", "10kB", "--trace"])
        .arg(&trace)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--trace") && err.contains("bad.trace") && !err.contains("File exists"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn demo_refuses_a_directory_that_is_not_an_earlier_demo() {
    if !root_or_skip("demo_refuses_a_directory_that_is_not_an_earlier_demo") {
        return;
    }
    let dir = temp_dir("demo-out");
    let figures = dir.join("figures");
    std::fs::create_dir_all(&figures).unwrap();
    let mine = write(&figures, "mine.svg", "<svg/>");
    let out = quiclab()
        .arg("demo")
        .arg("--out")
        .arg(&dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("quiclab did not create"), "{err}");
    assert!(mine.exists(), "the demo removed a file it did not create");
    let _ = std::fs::remove_dir_all(&dir);
}
