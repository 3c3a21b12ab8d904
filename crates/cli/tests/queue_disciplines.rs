//! `--queue-discipline` / `aqm` and `--ecn` from the command line and scenario files: bad input is
//! refused before any lab starts, naming the flag or FILE:LINE:key; quinn's packets are
//! ECN-capable, so CoDel with ECN marks an h3 download instead of dropping it (root).

mod common;
use common::*;

#[test]
fn bad_queue_disciplines_are_refused_naming_the_flag_or_the_key() {
    let bulk = |extra: &[&str]| {
        let mut a = vec![
            "--proto", "h3", "--size", "1MB", "--rate", "10mbit", "--rtt", "50ms",
        ];
        a.extend_from_slice(extra);
        a.into_iter().map(String::from).collect::<Vec<_>>()
    };
    for (args, must) in [
        (
            bulk(&["--queue-discipline", "red"]),
            &["--queue-discipline", "fq-codel", "pie"][..],
        ),
        (
            bulk(&["--queue-discipline", "codel:target=100ms"]),
            &["--queue-discipline", "target", "interval"],
        ),
        (
            bulk(&["--down-queue-discipline", "pie:tupdate=0ms"]),
            &["--down-queue-discipline", "t_update"],
        ),
        (
            bulk(&["--queue-discipline", "fq-codel:speed=1"]),
            &["speed", "flows, quantum"],
        ),
        (
            bulk(&["--queue-discipline", "codel", "--ecn", "--offload", "on"]),
            &["--ecn", "--offload"],
        ),
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        refused("bulk", &args, must);
    }
    // A discipline needs a rate to queue behind.
    refused(
        "bulk",
        &[
            "--proto",
            "h3",
            "--size",
            "1MB",
            "--queue-discipline",
            "codel",
        ],
        &["--queue-discipline", "no rate"],
    );
    // In a scenario: FILE:LINE:key.
    let dir = temp_dir("bad-aqm-scenario");
    let file = write(
        &dir,
        "s.toml",
        "name = \"s\"\n[workload]\nkind = \"bulk\"\nsize = \"1MB\"\n[link]\nrate = \"10mbit\"\n\
         rtt = \"50ms\"\n[grid]\nqueue-discipline = [\"codel\", \"red\"]\n",
    );
    let out = quiclab()
        .args(["run", file.to_str().unwrap(), "--dry-run"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("s.toml:9") && err.contains("queue-discipline") && err.contains("red"),
        "{err}"
    );
}

#[test]
fn codel_with_ecn_marks_an_h3_download_instead_of_dropping_it() {
    if !root_or_skip("codel_with_ecn_marks_an_h3_download_instead_of_dropping_it") {
        return;
    }
    let run = |ecn: bool| {
        let mut args = vec![
            "bulk",
            "--proto",
            "h3",
            "--size",
            "8MB",
            "--rate",
            "10mbit",
            "--rtt",
            "50ms",
            "--queue",
            "1000kB",
            "--queue-discipline",
            "codel",
            "--json",
        ];
        if ecn {
            args.push("--ecn");
        }
        let out = quiclab().args(&args).output().unwrap();
        assert_success(&out);
        json(&out)
    };
    let (plain, marked) = (run(false), run(true));
    let aqm = |d: &serde_json::Value| d["fidelity"]["downlink"]["model"]["aqm"].clone();
    let (p, m) = (aqm(&plain), aqm(&marked));
    // Without ECN CoDel drops; with it quinn's packets (ECT(0)) are marked, and quinn slows down
    // on the marks: nothing dropped, the queue still short.
    assert!(
        p["aqm_drops"].as_u64().unwrap() > 0 && p["marks"] == 0,
        "{p}"
    );
    assert!(
        m["marks"].as_u64().unwrap() > 0 && m["aqm_drops"] == 0,
        "{m}"
    );
    let sojourn = &marked["fidelity"]["downlink"]["sojourn_ms"];
    assert!(sojourn["p90"].as_f64().unwrap() < 20.0, "{sojourn}");
    assert_eq!(
        marked["fidelity"]["downlink"]["model"]["discipline"],
        "codel+ecn"
    );
}
