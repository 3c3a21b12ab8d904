//! `quiclab compare A B` as a user meets it: two result sets judged run for run — through real
//! labs, a key change that matters (the bottleneck's rate doubled) and one that does not (the
//! uplink, which carries only requests and ACKs, five times faster) judged as such — and, without
//! a lab, its refusals, what it says differs, and that it only reads the results.

use std::path::Path;

mod common;
use common::*;

/// Six repetitions of 1 MB over h3 on a 20 ms link: six pairs, the fewest at which the exact
/// sign test can reach p < 0.05.
fn scenario(link: &str) -> String {
    format!(
        "name = \"c\"\nrepetitions = 6\nseed = 3\n[workload]\nkind = \"bulk\"\nsize = \"1MB\"\n\
         [protocol]\nprotocol = \"h3\"\n[link]\nrtt = \"20ms\"\n{link}"
    )
}

fn run_into(dir: &Path, name: &str, link: &str) -> std::path::PathBuf {
    let file = write(dir, &format!("{name}.toml"), &scenario(link));
    let out = dir.join(name);
    let done = quiclab()
        .args(["run", "--json"])
        .arg(&file)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    // `run --json`: what the run did, as one document.
    let doc = json(&done);
    assert_eq!(doc["ran"], 6, "{doc:#}");
    assert_eq!(doc["failed"], 0, "{doc:#}");
    out
}

/// The outcome compare.json gives each metric.
fn outcomes(doc: &serde_json::Value) -> Vec<(String, String)> {
    doc["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["metric"].as_str().unwrap().to_string(),
                m["outcome"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn a_key_change_that_matters_and_one_that_does_not_are_judged_as_such() {
    if !root_or_skip("a_key_change_that_matters_and_one_that_does_not_are_judged_as_such") {
        return;
    }
    let dir = temp_dir("compare-lab");
    let a = run_into(&dir, "a", "rate = \"10mbit\"\n");
    let faster = run_into(&dir, "faster", "rate = \"20mbit\"\n");
    let uplink = run_into(&dir, "uplink", "rate = \"10mbit\"\nup-rate = \"50mbit\"\n");
    let judge = |b: &Path, out: &str| {
        let done = quiclab()
            .arg("compare")
            .arg(&a)
            .arg(b)
            .args([
                "--metric",
                "goodput_mbps,total_ms",
                "--margin",
                "10",
                "--json",
            ])
            .arg("--out")
            .arg(dir.join(out))
            .output()
            .unwrap();
        json(&done)
    };
    let doc = judge(&faster, "cmp-faster");
    assert_eq!(
        outcomes(&doc),
        [
            ("goodput_mbps".into(), "B better".into()),
            ("total_ms".into(), "B better".into())
        ],
        "{doc:#}"
    );
    // What differs is said: the rate, and nothing of the build or the host.
    let settings = doc["settings"].as_array().unwrap();
    assert_eq!(settings.len(), 1, "{doc:#}");
    assert_eq!(settings[0]["what"], "link.rate");
    assert_eq!(settings[0]["b"], "\"20mbit\"");
    let doc = judge(&uplink, "cmp-uplink");
    assert_eq!(
        outcomes(&doc),
        [
            ("goodput_mbps".into(), "no difference that matters".into()),
            ("total_ms".into(), "no difference that matters".into())
        ],
        "{doc:#}"
    );
    let html = std::fs::read_to_string(dir.join("cmp-uplink/compare.html")).unwrap();
    assert!(
        html.contains("<svg") && html.contains("link.up-rate"),
        "{html}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Results of six h1 and six h3 bulk runs whose total_ms is `f(protocol, rep)`.
fn made(dir: &Path, f: impl Fn(&str, u32) -> f64) -> std::path::PathBuf {
    let runs: Vec<(&str, u32, f64)> = ["h1", "h3"]
        .into_iter()
        .flat_map(|p| (1..=6).map(move |r| (p, r)))
        .map(|(p, r)| (p, r, f(p, r)))
        .collect();
    made_results(
        dir,
        &TWO_PROTOCOL_SCENARIO.replace("repetitions = 1", "repetitions = 6"),
        (6, None),
        &quiclab_results::Environment::default(),
        quiclab_results::Status::Ok,
        &runs,
    )
}

#[test]
fn compare_judges_stored_runs_per_cell_and_only_reads_them() {
    let dir = temp_dir("compare-made");
    let a = made(&dir.join("a"), |_, r| 300.0 + f64::from(r));
    // h3 a third faster, h1 a third slower: the cells go both ways.
    let b = made(&dir.join("b"), |p, r| {
        (300.0 + f64::from(r)) * if p == "h3" { 0.66 } else { 1.33 }
    });
    let before = std::fs::read(a.join("results.sqlite")).unwrap();
    let out = quiclab()
        .args(["compare", "--json", "--metric", "total_ms", "--out"])
        .arg(dir.join("cmp"))
        .arg(&a)
        .arg(&b)
        .output()
        .unwrap();
    let doc = json(&out);
    assert_eq!(doc["metrics"][0]["outcome"], "mixed", "{doc:#}");
    let cells = doc["metrics"][0]["verdict"]["judgement"]["cells"]
        .as_array()
        .unwrap();
    assert_eq!(cells.len(), 2, "{doc:#}");
    assert_eq!(before, std::fs::read(a.join("results.sqlite")).unwrap());
    // The text names both sets and the metric's line.
    let out = quiclab()
        .args(["compare", "--metric", "total_ms", "--out"])
        .arg(dir.join("cmp"))
        .arg(&a)
        .arg(&b)
        .output()
        .unwrap();
    assert_success(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("total_ms: mixed"), "{text}");
    assert!(text.contains("settings: the same"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn compare_refuses_what_it_cannot_judge_naming_it() {
    let dir = temp_dir("compare-refused");
    let a = made(&dir.join("a"), |_, r| 300.0 + f64::from(r));
    let a = a.to_str().unwrap();
    let missing = dir.join("nothing");
    let missing = missing.to_str().unwrap();
    refused(
        "compare",
        &[a, missing],
        &["B", missing, "no results.sqlite"],
    );
    refused(
        "compare",
        &[a, a, "--metric", "total_mss"],
        &["--metric total_mss", "did you mean \"total_ms\""],
    );
    refused(
        "compare",
        &[a, a, "--margin", "150"],
        &["--margin", "0 to below 100"],
    );
    // An output directory of someone else's files is never written into.
    let foreign = dir.join("foreign");
    std::fs::create_dir_all(&foreign).unwrap();
    write(&foreign, "mine.txt", "a user's file");
    refused(
        "compare",
        &[a, a, "--out", foreign.to_str().unwrap()],
        &["--out", "did not create"],
    );
    let _ = std::fs::remove_dir_all(&dir);
}
