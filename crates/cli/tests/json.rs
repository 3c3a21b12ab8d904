//! `--json` of the commands that print results: one JSON document on stdout, whatever they print
//! on stderr (`run --json` is checked through a real lab in compare.rs; the workload commands',
//! with the fidelity flags, in cli.rs).

mod common;
use common::*;

#[test]
fn report_export_and_merge_print_one_json_document() {
    let dir = temp_dir("json");
    let results = two_run_results(&dir.join("r"), quiclab_results::Status::Ok);
    let out = quiclab()
        .args(["report", "--json"])
        .arg(&results)
        .output()
        .unwrap();
    let doc = json(&out);
    let html = doc["html"].as_str().unwrap();
    assert!(html.ends_with("report.html") && std::path::Path::new(html).is_file());
    assert!(doc["figures"].as_array().is_some() && doc["notes"].as_array().is_some());

    let out = quiclab()
        .args(["export", "--json"])
        .arg(&results)
        .output()
        .unwrap();
    let doc = json(&out);
    assert_eq!(doc["runs"], 2, "{doc:#}");
    assert!(doc["runs_csv"].as_str().unwrap().ends_with("runs.csv"));

    let merged = dir.join("m");
    let out = quiclab()
        .args(["merge", "--json", "--out"])
        .arg(&merged)
        .arg(&results)
        .output()
        .unwrap();
    let doc = json(&out);
    assert_eq!(doc["report"]["runs"], 2, "{doc:#}");
    assert_eq!(doc["missing"].as_array().unwrap().len(), 0, "{doc:#}");
    let _ = std::fs::remove_dir_all(&dir);
}
