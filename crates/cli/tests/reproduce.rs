//! `quiclab reproduce`: a study's pack runs end to end and writes a verdict for every finding,
//! `--judge` on its output gives the same verdicts, and bad input is refused naming it. The pack
//! here is a tiny study over a tiny scenario (a --repo of its own), so the test takes seconds;
//! the shipped studies are checked against their scenarios by crates/runner/tests/studies.rs.

mod common;
use common::*;

const SCENARIO: &str = "name = \"tiny\"\nrepetitions = 6\nseed = 5\n\
[workload]\nkind = \"bulk\"\nsize = \"20kB\"\n[link]\nrate = \"20mbit\"\nrtt = \"100ms\"\n\
[grid]\nprotocol = [\"h1\", \"h3\"]\n[quick]\nrepetitions = 6\n";

const STUDY: &str = "study = \"tiny\"\ntitle = \"A tiny study\"\n\
[[finding]]\nid = \"t-1\"\nclaim = \"QUIC's one-RTT handshake makes a small download faster\"\n\
class = \"calibration\"\nscenario = \"tiny\"\nmetric = \"total_ms\"\ncompare = { axis = \"protocol\", a = \"h3\", b = \"h1\" }\n\
min_n = 6\n\
[[finding]]\nid = \"t-2\"\nclaim = \"goodput is at least 100 Mbit/s\"\nclass = \"reproduction\"\nscenario = \"tiny\"\n\
where = { protocol = \"h1\" }\nmetric = \"goodput_mbps\"\nat_least = 100.0\nmin_n = 6\n\
[[finding]]\nid = \"t-3\"\nclaim = \"over the Internet\"\nclass = \"reproduction\"\nnot_runnable = \"no Internet here\"\n\
[[finding]]\nid = \"t-4\"\nclaim = \"h3 wins the setting\"\nclass = \"reproduction\"\nscenario = \"tiny\"\nmetric = \"total_ms\"\n\
wins_share = { axis = \"protocol\", a = \"h3\", at_least = 1.0 }\ntest = \"wins\"\nmin_n = 5\n\
[[finding]]\nid = \"t-5\"\nclaim = \"h3 takes 70 % of h1's time\"\nclass = \"reproduction\"\nscenario = \"tiny\"\nmetric = \"total_ms\"\n\
compare = { axis = \"protocol\", a = \"h3\", b = \"h1\" }\napprox = { value = 0.7, tolerance = 0.3 }\n\
test = \"interval\"\n";

fn repo(name: &str) -> std::path::PathBuf {
    let dir = temp_dir(name);
    std::fs::create_dir_all(dir.join("studies")).unwrap();
    std::fs::create_dir_all(dir.join("scenarios")).unwrap();
    write(&dir.join("scenarios"), "tiny.toml", SCENARIO);
    write(&dir.join("studies"), "tiny.toml", STUDY);
    dir
}

#[test]
fn a_pack_runs_and_every_finding_gets_a_verdict_that_judging_again_repeats() {
    if !root_or_skip("a_pack_runs_and_every_finding_gets_a_verdict_that_judging_again_repeats") {
        return;
    }
    let dir = repo("reproduce-pack");
    let out = dir.join("out");
    let args = |extra: &[&str]| {
        let mut c = quiclab();
        c.args([
            "reproduce",
            "tiny",
            "--json",
            "--repo",
            dir.to_str().unwrap(),
        ]);
        c.args(extra);
        c
    };
    // The full form (6 repetitions: the fewest a sign test can decide with).
    let first = json(&args(&["--out", out.to_str().unwrap()]).output().unwrap());
    let verdicts = first.as_array().unwrap();
    assert_eq!(verdicts.len(), 5, "{first}");
    let word = |v: &serde_json::Value| v["judgement"]["verdict"]["verdict"].clone();
    // 20 kB over 100 ms: h3 saves a round trip of handshake in every pair (6 of 6, p = 0.03).
    assert_eq!(word(&verdicts[0]), "holds", "{}", verdicts[0]);
    // Six pairs — or, when the six repeat within a tenth of the margin, one unit of copies.
    let c = &verdicts[0]["judgement"]["counts"];
    assert!(
        c["pairs"] == 6 || (verdicts[0]["judgement"]["deterministic"] == true && c["copies"] == 5),
        "{}",
        verdicts[0]
    );
    assert_eq!(verdicts[0]["class"], "calibration");
    // 20 Mbit/s cannot carry 100 Mbit/s: every run below the threshold — does not hold (a plain
    // value has no direction to reverse). On a loss-free link the six runs repeat within a
    // tenth of the margin: copies, one unit, judged by the value with no p (issue 56).
    assert_eq!(word(&verdicts[1]), "does_not_hold", "{}", verdicts[1]);
    assert_eq!(
        verdicts[1]["judgement"]["verdict"]["reversed"], false,
        "{}",
        verdicts[1]
    );
    let j = &verdicts[1]["judgement"];
    assert!(
        j["deterministic"] == true || j["p"].is_number(),
        "{}",
        verdicts[1]
    );
    assert_eq!(word(&verdicts[2]), "not_runnable");
    // Megyesi's rule on the one setting: h3 is ≥ 10 % under h1's mean in every run.
    assert_eq!(word(&verdicts[3]), "holds", "{}", verdicts[3]);
    assert_eq!(verdicts[3]["tree"]["label"], "h3", "{}", verdicts[3]);
    // A ratio band judged on the exact interval of six ratios (the range, 96.9 %).
    assert_eq!(verdicts[4]["judgement"]["estimate"]["n"], 6);
    let level = verdicts[4]["judgement"]["estimate"]["level"]
        .as_f64()
        .unwrap();
    assert!((level - 0.96875).abs() < 1e-9, "{level}");
    assert_eq!(verdicts[4]["form"], "full");
    assert!(out.join("verdicts.csv").is_file() && out.join("tiny/tiny/results.sqlite").is_file());
    // The page: every finding, the scenario's own report linked, the tree drawn.
    let html = std::fs::read_to_string(out.join("reproduction.html")).unwrap();
    for id in ["t-1", "t-2", "t-3", "t-4", "t-5"] {
        assert!(html.contains(&format!("<td>{id}</td>")), "{id} missing");
    }
    assert!(html.contains("href=\"tiny/tiny/report.html\"") && html.contains("<svg"));
    assert!(out.join("tiny/tiny/report.html").is_file());
    let md = std::fs::read_to_string(out.join("verdicts.md")).unwrap();
    // Reproductions and calibrations are counted apart.
    assert!(
        md.contains("#### tiny: reproductions: ")
            && md.contains(
                "; calibrations: 1 holds, 0 does not hold, 0 reversed, 0 not shown, 0 mixed, 0 \
                 inconclusive, 0 not runnable"
            ),
        "{md}"
    );
    // Judged again from the stored runs: the same verdicts, nothing run.
    let again = json(&args(&["--judge", out.to_str().unwrap()]).output().unwrap());
    assert_eq!(again, first);
    // Kept as evidence (a clean build's only) and judged from it: the same verdicts again.
    let evidence = dir.join("evidence");
    let kept = args(&[
        "--judge",
        out.to_str().unwrap(),
        "--out",
        dir.join("judged").to_str().unwrap(),
        "--keep-evidence",
        evidence.to_str().unwrap(),
    ])
    .output()
    .unwrap();
    let err = String::from_utf8_lossy(&kept.stderr);
    if html.contains("-dirty") {
        // A test binary built from a tree with uncommitted changes: refused, saying why.
        assert!(
            !kept.status.success() && err.contains("not a clean commit"),
            "{err}"
        );
    } else {
        assert!(kept.status.success(), "{err}");
        assert!(err.contains("12 runs (12 new"), "{err}");
        assert!(evidence.join("tiny/tiny/runs.jsonl.gz").is_file());
        let judged = json(
            &args(&[
                "--judge",
                evidence.to_str().unwrap(),
                "--out",
                dir.join("from-evidence").to_str().unwrap(),
            ])
            .output()
            .unwrap(),
        );
        assert_eq!(judged, first);
        // Evidence is not added to evidence.
        let twice = args(&[
            "--judge",
            evidence.to_str().unwrap(),
            "--out",
            dir.join("x").to_str().unwrap(),
            "--keep-evidence",
            evidence.to_str().unwrap(),
        ])
        .output()
        .unwrap();
        assert_eq!(twice.status.code(), Some(2));
    }
    // Resumed, the pack finds every run stored: nothing is left to do or to wait for, and the
    // verdicts stay the same. Its estimates are at the --jobs it runs at.
    let resumed = args(&["--out", out.to_str().unwrap(), "--resume", "--jobs", "2"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&resumed.stderr);
    assert!(
        err.contains("(0 of 12 runs to do, ≈ 0 s at --jobs 2)") && err.contains("≈ 0 s left"),
        "{err}"
    );
    assert_eq!(json(&resumed), first);
    // The quick form of the same pack is an observation: no verdict, its estimates shown.
    let quick_out = dir.join("quick");
    let quick = json(
        &args(&["--quick", "--out", quick_out.to_str().unwrap()])
            .output()
            .unwrap(),
    );
    for v in quick.as_array().unwrap() {
        let w = word(v);
        assert!(w == "inconclusive" || w == "not_runnable", "{v}");
    }
    let why = quick[0]["judgement"]["verdict"]["why"].as_str().unwrap();
    // Six pairs — or one unit when the six repeat as copies (issue 56).
    assert!(
        why.starts_with("quick form: an observation (n = 6)")
            || why
                .starts_with("quick form: an observation (n = 1; 5 repetitions folded as copies)"),
        "{why}"
    );
    assert!(
        quick[0]["judgement"]["estimate"]["median"]
            .as_f64()
            .unwrap()
            < 1.0
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_reproduce_input_is_refused_naming_it() {
    let dir = repo("reproduce-bad");
    let run = |extra: &[&str]| {
        quiclab()
            .args(["reproduce", "--repo", dir.to_str().unwrap()])
            .args(extra)
            .output()
            .unwrap()
    };
    let out = run(&["nosuch"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no study \"nosuch\"") && err.contains("tiny"),
        "{err}"
    );
    // A study naming a value its scenario does not have: FILE:LINE and the key.
    write(
        &dir.join("studies"),
        "tiny.toml",
        &STUDY.replace("protocol = \"h1\" }", "protocol = \"h9\" }"),
    );
    let out = run(&["--list"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("tiny.toml:") && err.contains("key \"where\""),
        "{err}"
    );
    write(&dir.join("studies"), "tiny.toml", STUDY);
    let out = run(&["tiny", "--judge", dir.join("none").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--judge"));
    // --list needs no lab: the findings and the pack's estimate.
    let out = run(&["--list"]);
    assert_success(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("tiny: 5 findings (4 runnable)") && text.contains("t-2"),
        "{text}"
    );
    // Progress while the estimates are made (issue 61: 31 s without a line).
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("estimating tiny (1 of 1)"), "{err}");
    // --finding picks findings; an unknown id is named with the ids there are.
    let out = run(&["tiny", "--list", "--finding", "t-2"]);
    assert_success(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("tiny: 1 findings (1 runnable)") && !text.contains("t-1"),
        "{text}"
    );
    // --list --json: each finding an object with its id, claim, class and scenario (or why it
    // cannot run).
    let out = run(&["tiny", "--list", "--json"]);
    assert_success(&out);
    let listed = json(&out);
    let findings = listed[0]["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 5);
    assert_eq!(findings[0]["id"], "t-1");
    assert_eq!(findings[0]["class"], "calibration");
    assert_eq!(findings[0]["scenario"], "tiny");
    assert_eq!(findings[1]["class"], "reproduction");
    assert_eq!(findings[2]["not_runnable"], "no Internet here");
    assert!(findings[2].get("scenario").is_none());
    // The estimates: the full form trimmed to what the findings read (here all 12 runs: t-1
    // compares h3 with h1) against the whole grid, one at a time and at --jobs auto; t-2 alone
    // reads only the h1 runs.
    let full = &listed[0]["full"];
    assert_eq!(full["runs"], 12, "{listed}");
    assert_eq!(listed[0]["whole_grid"]["runs"], 12, "{listed}");
    let (one, auto) = (
        full["one_at_a_time_s"].as_f64().unwrap(),
        full["auto_s"].as_f64().unwrap(),
    );
    assert!(auto > 0.0 && auto < one, "{one} {auto}");
    let out = run(&["tiny", "--list", "--json", "--finding", "t-2"]);
    assert_success(&out);
    let listed = json(&out);
    assert_eq!(listed[0]["full"]["runs"], 6, "{listed}");
    assert_eq!(listed[0]["whole_grid"]["runs"], 12, "{listed}");
    let out = run(&["tiny", "--list"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("at --jobs auto") && text.contains("whole grid"),
        "{text}"
    );
    let out = run(&["tiny", "--list", "--finding", "t-9"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--finding t-9") && err.contains("t-1, t-2, t-3, t-4, t-5"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
