//! `quiclab run`, `report` and `export` as a user meets them: scenario errors, dry runs, a tiny real
//! grid end to end, and runs interrupted by SIGKILL and Ctrl-C then resumed. Tests that build labs
//! need root and skip (saying so) without it.

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use quiclab_results::{Status, Store};

mod common;
use common::*;

const SMALL: &str = r#"name = "small"
repetitions = 2
seed = 5
[workload]
kind = "bulk"
size = "200kB"
[link]
rate = "20mbit"
rtt = "20ms"
[grid]
protocol = ["h1", "h2", "h3"]
loss = ["0%", "1%"]
"#;

/// The metrics a bulk run through the emulator stored before the workloads moved into
/// quiclab-workload (derived from the old ingestion: every numeric field of the result document,
/// `resumed`/`zero_rtt` as 0/1, the runner's and the emulator's figures). The move must not change
/// them; `connect_ms` is TCP's, `emu_down_backlogged_mbps` exists only once the link was backlogged.
const PINNED_BULK_METRICS: &[&str] = &[
    "bytes",
    // Each end's cost per MB (issue 60); the CPU-bound flags need a transfer of 1 s or more.
    "client_ack_frames_per_mb",
    "client_cpu_cores",
    "client_deliveries_per_mb",
    "client_sent_per_mb",
    "client_stack_packets_per_mb",
    "client_udp_reads_per_mb",
    "client_wire_packets_per_mb",
    "connect_ms",
    "cpu_client_s",
    "cpu_client_s_per_gb",
    "cpu_emulator_s",
    "cpu_server_s",
    "cpu_server_s_per_gb",
    "emu_cpu_core_fraction",
    "emu_down_backlogged_mbps",
    "emu_lateness_p99_us",
    "goodput_mbps",
    "goodput_utilization",
    "handshake_ms",
    "host_busy",
    "host_steal",
    "lab_cpu_cores",
    // The lab's pauses during the workload (2026-11-28: the pause flag's measure).
    "lab_pause_longest_ms",
    "lab_paused_share",
    "labs_in_flight",
    "loss_ratio",
    "max_queue_bytes",
    "random_losses",
    "resumed",
    "runner_fds",
    "runner_rss_kb",
    "server_cpu_cores",
    "server_stack_packets_per_mb",
    "setup_ms",
    "tail_drops",
    "teardown_ms",
    "total_ms",
    "ttfb_ms",
    "utilization",
    "zero_rtt",
];

/// The seeds of SMALL's runs as the runner before the move printed them (`--dry-run`).
const PINNED_SMALL_SEEDS: &[(&str, u64)] = &[
    ("proto=h1;loss=0%;rep=1", 13965265003956234860),
    ("proto=h3;loss=0%;rep=2", 7726841865142897568),
    ("proto=h2;loss=1%;rep=1", 6129683159048212209),
    ("proto=h3;loss=1%;rep=2", 17345258813461959530),
];

#[test]
fn the_pinned_small_scenario_keeps_its_keys_and_seeds() {
    let dir = temp_dir("pinned-seeds");
    let file = write(&dir, "s.toml", SMALL);
    let out = dry_run(&file);
    assert_success(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    for (key, seed) in PINNED_SMALL_SEEDS {
        assert!(
            text.lines()
                .any(|l| l.ends_with(key) && l.contains(&format!(" {seed} "))),
            "{key} should have seed {seed}:\n{text}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `quiclab run --dry-run FILE`.
fn dry_run(file: &Path) -> std::process::Output {
    quiclab()
        .args(["run", "--dry-run"])
        .arg(file)
        .output()
        .unwrap()
}

#[test]
fn dry_run_lists_every_run_with_its_seed_and_an_estimate() {
    let dir = temp_dir("dry");
    let file = write(&dir, "s.toml", SMALL);
    let out = dry_run(&file);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("12 run(s)"), "{text}");
    let runs: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("rep=") && l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
        .collect();
    assert_eq!(runs.len(), 12, "{text}");
    // Each run's time limit (200 kB at 20 Mbit/s: the 30 s floor plus a little).
    let limit = |l: &str| l.split_whitespace().nth(3).unwrap().parse::<f64>().unwrap();
    assert!(
        runs.iter().all(|l| (30.0..40.0).contains(&limit(l))),
        "{text}"
    );
    assert!(text.contains("slowest run: "), "{text}");
    assert!(text.contains("runs again up to 2 time(s)"), "{text}");
    // Interleaved: the protocols of a repetition back to back, sharing a seed.
    assert!(runs[0].contains("proto=h1;loss=0%;rep=1"), "{text}");
    assert!(runs[2].contains("proto=h3;loss=0%;rep=1"), "{text}");
    let seed = |l: &str| l.split_whitespace().nth(1).unwrap().to_string();
    assert_eq!(seed(runs[0]), seed(runs[2]));
    assert_ne!(seed(runs[0]), seed(runs[3]));
    assert!(text.contains("estimated total"), "{text}");
    // --repetitions overrides the file.
    let out = quiclab()
        .args(["run", "--dry-run", "--repetitions", "5"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("30 run(s)"));
}

#[test]
fn every_shipped_scenario_is_valid() {
    // The files under scenarios/ are what users run first: each must pass the checks every run
    // goes through before a lab is built (a dry run needs no root).
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    assert!(files.len() >= 5, "{files:?}");
    let chromium =
        quiclab_browser::check_chromium(std::path::Path::new(quiclab_browser::DEFAULT_CHROMIUM));
    for file in files {
        let uses_chromium = std::fs::read_to_string(&file)
            .unwrap()
            .contains("\"chromium\"");
        if let (true, Err(e)) = (uses_chromium, &chromium) {
            // Refusing it is right (the run could not be made); that error is tested elsewhere.
            quiclab_testkit::skip(
                &format!("dry run of {} (uses Chromium)", file.display()),
                &format!("{e:#}"),
            );
            continue;
        }
        let out = dry_run(&file);
        let text = String::from_utf8_lossy(&out.stdout);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{}: {err}", file.display());
        assert!(
            text.contains("estimated total"),
            "{}: {text}",
            file.display()
        );
    }
}

#[test]
fn bad_scenarios_are_refused_naming_file_line_and_key() {
    let dir = temp_dir("bad");
    for (text, expected) in [
        (
            SMALL.replace("rtt = \"20ms\"", "rtts = \"20ms\""),
            vec!["s.toml:9:", "unknown key \"rtts\"", "rtt"],
        ),
        (
            SMALL.replace("\"0%\", \"1%\"", "\"0%\", \"1 percent\""),
            vec!["s.toml:12:", "key \"loss\""],
        ),
        (
            SMALL.replace("repetitions = 2", "repetitions = \"two\""),
            vec!["s.toml:2:", "repetitions", "integer"],
        ),
        (
            SMALL.replace("kind = \"bulk\"", "kind = \"dash\""),
            vec!["s.toml:5:", "kind", "video"],
        ),
        (
            // A video key in a bulk workload is named with the kind's own keys.
            SMALL.replace("kind = \"bulk\"", "kind = \"video\""),
            vec!["s.toml:6:", "unknown key \"size\"", "players"],
        ),
    ] {
        let file = write(&dir, "s.toml", &text);
        for args in [vec!["run", "--dry-run"], vec!["run"]] {
            let out = quiclab().args(&args).arg(&file).output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{err}");
            for e in &expected {
                assert!(err.contains(e), "stderr lacks {e:?}: {err}");
            }
            assert!(!err.contains("panicked"), "{err}");
        }
    }
    let out = quiclab()
        .args(["run"])
        .arg(dir.join("missing.toml"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(err.contains("missing.toml"), "{err}");
    let out = quiclab().args(["report"]).arg(&dir).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(err.contains("no such results database"), "{err}");
}

#[test]
fn a_tiny_scenario_runs_end_to_end_into_sqlite_csv_and_a_report() {
    if !root_or_skip("a_tiny_scenario_runs_end_to_end_into_sqlite_csv_and_a_report") {
        return;
    }
    let dir = temp_dir("e2e");
    let file = write(&dir, "s.toml", SMALL);
    let out_dir = dir.join("out");
    let child = quiclab()
        .arg("run")
        .arg(&file)
        .arg("--out")
        .arg(&out_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(namespaces_of(pid).is_empty(), "namespaces left behind");

    let store = Store::open(&out_dir.join("results.sqlite")).unwrap();
    let runs = store.runs().unwrap();
    assert_eq!(runs.len(), 12);
    // Every document reads back with the workloads' types, as the bulk result it was written as,
    // and its declared metrics agree with the metrics table.
    for r in store.runs_as::<quiclab_workload::WorkloadOutput>().unwrap() {
        let Some(quiclab_workload::WorkloadOutput::Bulk(b)) = r.document.result() else {
            panic!("{}: {:?}", r.key, r.document.status());
        };
        assert_eq!(b.total_ms, r.metrics["total_ms"], "{}", r.key);
        assert_eq!(b.proto, r.contender, "{}", r.key);
    }
    for r in &runs {
        assert_eq!(r.status(), Status::Ok, "{}: {:?}", r.key, r.reason());
        let total = r.metrics["total_ms"];
        // 200 kB at 20 Mbit/s is 80 ms on the wire; plus handshakes and slow start at 20 ms RTT.
        assert!(total > 80.0 && total < 20_000.0, "{}: {total}", r.key);
        assert_eq!(r.metrics["bytes"], 200_000.0);
        assert!(r.metrics["setup_ms"] < 2_000.0);
        // The same metric names as before the workloads were typed (nothing lost), with each
        // end's costs since issue 60: QUIC's UDP reads and ACK frames over h3 only.
        let quic_only = ["client_udp_reads_per_mb", "client_ack_frames_per_mb"];
        let expected: Vec<&str> = PINNED_BULK_METRICS
            .iter()
            .copied()
            .filter(|m| *m != "connect_ms" || r.contender != "h3")
            .filter(|m| !quic_only.contains(m) || r.contender == "h3")
            .filter(|m| {
                *m != "emu_down_backlogged_mbps"
                    || r.metrics.contains_key("emu_down_backlogged_mbps")
            })
            .collect();
        let names: Vec<&str> = r.metrics.keys().map(String::as_str).collect();
        assert_eq!(names, expected, "{}", r.key);
        let Some(quiclab_workload::WorkloadOutput::Bulk(b)) = r.document.result() else {
            panic!("{}: not a bulk result", r.key);
        };
        assert!(b.fidelity.is_some(), "{}", r.key);
    }
    let protocols: std::collections::BTreeSet<_> =
        runs.iter().map(|r| r.contender.as_str()).collect();
    assert_eq!(protocols.len(), 3);
    // Lossy runs lost packets, clean ones did not (random loss only where configured).
    for r in &runs {
        let lost = r.metrics["random_losses"];
        if r.params["loss"] == "0%" {
            assert_eq!(lost, 0.0, "{}", r.key);
        }
    }
    // The environment is recorded.
    let sessions = store.sessions().unwrap();
    assert_eq!(sessions.len(), 1);
    assert!(sessions[0].environment.kernel.contains("Linux"));
    assert!(sessions[0].environment.crates.contains_key("quinn"));
    // Repetition 1 of each setting and protocol is traced: cwnd and queue over time.
    let series = store.series().unwrap();
    for proto in ["h1", "h2", "h3"] {
        for name in ["cwnd_bytes", "queue_bytes"] {
            assert!(
                // `NAME@LABEL`: of several connections, the one drawn.
                series.iter().any(|s| s.name.split('@').next() == Some(name)
                    && s.run_key.starts_with(&format!("proto={proto};"))
                    && s.points.len() > 3),
                "no {name} series for {proto}"
            );
        }
    }

    // --include-flagged: on a busy host every run of a setting can be flagged for fidelity, and the
    // report then (rightly) draws no statistics; this test is about the figures being drawn.
    let out = quiclab()
        .arg("report")
        .arg(&out_dir)
        .arg("--include-flagged")
        .output()
        .unwrap();
    assert_success(&out);
    let html = std::fs::read_to_string(out_dir.join("report.html")).unwrap();
    for needle in [
        "small",
        "improvement",
        "wins",
        "<svg",
        "congestion window",
        "h3",
    ] {
        assert!(
            html.to_lowercase().contains(needle),
            "report lacks {needle}"
        );
    }
    let figures: Vec<_> = std::fs::read_dir(out_dir.join("figures"))
        .unwrap()
        .flatten()
        .collect();
    assert!(
        figures
            .iter()
            .any(|f| f.file_name().to_string_lossy().starts_with("cdf_"))
    );
    assert!(
        figures
            .iter()
            .any(|f| f.file_name().to_string_lossy().starts_with("timeseries_"))
    );

    // CSV is export's only format: `--csv` may be left out (a newcomer's first try, issue 61).
    let out = quiclab().arg("export").arg(&out_dir).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let csv = std::fs::read_to_string(out_dir.join("runs.csv")).unwrap();
    assert_eq!(csv.lines().count(), 13);
    assert!(csv.lines().next().unwrap().contains("goodput_mbps"));
}

const RETRIED: &str = r#"name = "retried"
retry_flagged = 2
[workload]
kind = "bulk"
size = "100kB"
[link]
rate = "20mbit"
rtt = "10ms"
[grid]
protocol = ["h1", "h3"]
"#;

#[test]
fn flagged_runs_are_run_again_and_every_attempt_is_stored() {
    if !root_or_skip("flagged_runs_are_run_again_and_every_attempt_is_stored") {
        return;
    }
    let dir = temp_dir("retried");
    let file = write(&dir, "s.toml", RETRIED);
    // Attempt 1 of every run is flagged (fault injection): attempt 2 is the run's record.
    let out_dir = dir.join("out");
    let out = quiclab()
        .arg("run")
        .arg(&file)
        .arg("--out")
        .arg(&out_dir)
        .arg("--report")
        .env("QUICLAB_FAULT_FLAG_ATTEMPTS", "1")
        .output()
        .unwrap();
    assert_success(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("running it again, same seed"), "{err}");
    let store = Store::open(&out_dir.join("results.sqlite")).unwrap();
    let runs = store.runs().unwrap();
    let attempts = store.attempts().unwrap();
    assert_eq!(runs.len(), 2);
    // One attempt replaced per run, more if a real fidelity flag struck too.
    let replaced: u32 = runs.iter().map(|r| r.attempt - 1).sum();
    assert_eq!(attempts.len(), replaced as usize, "{attempts:?}");
    for r in &runs {
        // A real fidelity flag on a noisy host would make this attempt 3; both are fine.
        assert!(r.attempt >= 2, "{}: attempt {}", r.key, r.attempt);
        assert_eq!(r.status(), Status::Ok, "{}: {:?}", r.key, r.reason());
        let first = attempts
            .iter()
            .find(|a| a.run_key == r.key && a.attempt == 1)
            .expect("attempt 1 stored");
        assert!(first.flags.iter().any(|f| f.contains("fault injection")));
        assert_eq!(first.status(), Status::Ok);
        assert!(
            first.metrics["total_ms"] > 0.0,
            "attempt 1 keeps its metrics"
        );
        for m in ["host_steal", "host_busy", "lab_cpu_cores"] {
            assert!(r.metrics.contains_key(m), "{}: no {m}", r.key);
        }
        // The lab (emulator, client, server) used some CPU, and less than the whole machine.
        let lab = r.metrics["lab_cpu_cores"];
        assert!(lab > 0.0 && lab < 64.0, "{}: {lab}", r.key);
    }
    // A retry runs next, before the run after it (which may already be prepared): one that
    // waited out a storm must not start a run later, into the next one.
    let mut by_index = runs.clone();
    by_index.sort_by_key(|r| r.index);
    let second_first_attempt = attempts
        .iter()
        .find(|a| a.run_key == by_index[1].key && a.attempt == 1)
        .expect("the second run's attempt 1");
    assert!(
        by_index[0].started_unix < second_first_attempt.started_unix,
        "the first run's retry ran after the second run started"
    );
    let html = std::fs::read_to_string(out_dir.join("report.html")).unwrap();
    assert!(
        html.contains("runs needing a retry"),
        "report counts retries"
    );

    // --retry-flagged 0 overrides the scenario: the flagged attempt is the run's record.
    let out_dir = dir.join("out0");
    let out = quiclab()
        .arg("run")
        .arg(&file)
        .arg("--out")
        .arg(&out_dir)
        .args(["--retry-flagged", "0"])
        .env("QUICLAB_FAULT_FLAG_ATTEMPTS", "1")
        .output()
        .unwrap();
    assert_success(&out);
    let store = Store::open(&out_dir.join("results.sqlite")).unwrap();
    assert!(store.attempts().unwrap().is_empty());
    let runs = store.runs().unwrap();
    assert_eq!(runs.len(), 2);
    assert!(runs.iter().all(|r| r.attempt == 1 && !r.flags.is_empty()));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Starts `quiclab run` and waits until at least `n` runs are committed.
fn start_and_wait_for_runs(file: &Path, out_dir: &Path, n: usize, args: &[&str]) -> Child {
    let mut child = quiclab()
        .arg("run")
        .arg(file)
        .arg("--out")
        .arg(out_dir)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let db = out_dir.join("results.sqlite");
    let t = Instant::now();
    loop {
        if let Ok(s) = Store::open(&db)
            && s.run_count().unwrap_or(0) >= n
        {
            return child;
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("quiclab run ended early: {status}");
        }
        assert!(t.elapsed() < Duration::from_secs(120), "no runs committed");
        std::thread::sleep(Duration::from_millis(20));
    }
}

const NINE: &str = r#"name = "nine"
repetitions = 3
[workload]
kind = "bulk"
size = "300kB"
[link]
rate = "10mbit"
rtt = "20ms"
"#;

#[test]
fn a_run_killed_with_sigkill_resumes_without_repeating_or_losing_runs() {
    if !root_or_skip("a_run_killed_with_sigkill_resumes_without_repeating_or_losing_runs") {
        return;
    }
    let dir = temp_dir("kill");
    let file = write(&dir, "s.toml", NINE);
    let out_dir = dir.join("out");
    let mut child = start_and_wait_for_runs(&file, &out_dir, 3, &[]);
    let pid = child.id();
    // SAFETY: killing the child we started.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    child.wait().unwrap();
    let before = Store::open(&out_dir.join("results.sqlite"))
        .unwrap()
        .runs()
        .unwrap();
    assert!(before.len() >= 3 && before.len() < 9, "{}", before.len());

    // Without --resume the runs are not overwritten.
    let out = quiclab()
        .arg("run")
        .arg(&file)
        .arg("--out")
        .arg(&out_dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--resume"), "{err}");

    let out = quiclab()
        .arg("run")
        .arg(&file)
        .arg("--out")
        .arg(&out_dir)
        .arg("--resume")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("already stored, skipped"), "{err}");
    // SIGKILL left the lab's namespaces; the next run removed them.
    assert!(namespaces_of(pid).is_empty(), "{:?}", namespaces_of(pid));

    let store = Store::open(&out_dir.join("results.sqlite")).unwrap();
    let after = store.runs().unwrap();
    assert_eq!(after.len(), 9);
    let keys: std::collections::BTreeSet<_> = after.iter().map(|r| &r.key).collect();
    assert_eq!(keys.len(), 9);
    // The runs finished before the kill are the same records, untouched.
    for b in &before {
        let a = after.iter().find(|a| a.key == b.key).unwrap();
        assert_eq!(a.started_unix, b.started_unix);
        assert_eq!(a.session_id, b.session_id);
    }
    assert_eq!(store.sessions().unwrap().len(), 2);
}

#[test]
fn ctrl_c_tears_the_lab_down_and_says_how_to_resume() {
    if !root_or_skip("ctrl_c_tears_the_lab_down_and_says_how_to_resume") {
        return;
    }
    let dir = temp_dir("int");
    let file = write(&dir, "s.toml", NINE);
    let out_dir = dir.join("out");
    let child = start_and_wait_for_runs(&file, &out_dir, 1, &[]);
    let pid = child.id();
    // SAFETY: signalling the child we started.
    unsafe { libc::kill(pid as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(err.contains("--resume"), "{err}");
    assert!(namespaces_of(pid).is_empty());
    let n = Store::open(&out_dir.join("results.sqlite"))
        .unwrap()
        .run_count()
        .unwrap();
    assert!(n >= 1);
}

#[test]
fn labs_side_by_side_store_every_run_once_with_retries_and_say_how_many_ran_at_once() {
    if !root_or_skip(
        "labs_side_by_side_store_every_run_once_with_retries_and_say_how_many_ran_at_once",
    ) {
        return;
    }
    let dir = temp_dir("jobs");
    let file = write(&dir, "s.toml", SMALL);
    let out_dir = dir.join("out");
    // Attempt 1 of every run is flagged (fault injection): each run is retried while others
    // are in flight, and attempt 2 is its record.
    let child = quiclab()
        .arg("run")
        .arg(&file)
        .arg("--out")
        .arg(&out_dir)
        .args(["--jobs", "3"])
        .env("QUICLAB_FAULT_FLAG_ATTEMPTS", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("at --jobs 3"),
        "the estimate at the concurrency: {err}"
    );
    assert!(namespaces_of(pid).is_empty(), "namespaces left behind");
    let store = Store::open(&out_dir.join("results.sqlite")).unwrap();
    let runs = store.runs().unwrap();
    assert_eq!(runs.len(), 12);
    let keys: std::collections::BTreeSet<_> = runs.iter().map(|r| &r.key).collect();
    assert_eq!(keys.len(), 12, "every run once");
    let mut most = 0.0f64;
    for r in &runs {
        assert_eq!(r.status(), Status::Ok, "{}: {:?}", r.key, r.reason());
        assert!(r.attempt >= 2, "{}: attempt {}", r.key, r.attempt);
        let labs = r.metrics["labs_in_flight"];
        assert!((1.0..=3.0).contains(&labs), "{}: {labs}", r.key);
        most = most.max(labs);
        assert!(r.metrics["total_ms"] > 80.0, "{}", r.key);
    }
    assert!(most >= 2.0, "no two labs ever ran at once");
    let attempts = store.attempts().unwrap();
    assert!(attempts.len() >= 12, "{}", attempts.len());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn ctrl_c_tears_every_lab_in_flight_down_and_the_grid_resumes() {
    if !root_or_skip("ctrl_c_tears_every_lab_in_flight_down_and_the_grid_resumes") {
        return;
    }
    let dir = temp_dir("int-jobs");
    let file = write(&dir, "s.toml", NINE);
    let out_dir = dir.join("out");
    let child = start_and_wait_for_runs(&file, &out_dir, 1, &["--jobs", "3"]);
    let pid = child.id();
    // SAFETY: signalling the child we started.
    unsafe { libc::kill(pid as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(namespaces_of(pid).is_empty(), "{:?}", namespaces_of(pid));
    // The runs the teardown killed are not stored as failed runs (they did not fail on their own).
    let stored = Store::open(&out_dir.join("results.sqlite"))
        .unwrap()
        .runs()
        .unwrap();
    for r in &stored {
        assert_eq!(r.status(), Status::Ok, "{}: {:?}", r.key, r.reason());
    }
    let out = quiclab()
        .arg("run")
        .arg(&file)
        .arg("--out")
        .arg(&out_dir)
        .args(["--resume", "--jobs", "3"])
        .output()
        .unwrap();
    assert_success(&out);
    let runs = Store::open(&out_dir.join("results.sqlite"))
        .unwrap()
        .runs()
        .unwrap();
    assert_eq!(runs.len(), 9);
    // The runs the interrupt ended were not stored as failed: every run is ok.
    for r in &runs {
        assert_eq!(r.status(), Status::Ok, "{}: {:?}", r.key, r.reason());
    }
    let _ = std::fs::remove_dir_all(&dir);
}
