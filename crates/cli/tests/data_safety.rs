//! No lost or wrong data (issue 22): flags that write files never replace or delete a user's
//! files, and a run that hits its time limit is stored as `timeout` (censored data) in every
//! workload, never as `failed`. Lab tests need root and skip (saying so) without it.

use quiclab_results::{Status, Store};

mod common;
use common::*;

/// A directory holding a file of the user's (as root, quiclab once replaced it).
fn users_dir(name: &str) -> std::path::PathBuf {
    let dir = temp_dir(name);
    write(&dir, "cert.pem", "the user's own certificate");
    dir
}

fn untouched(dir: &std::path::Path) {
    assert_eq!(
        std::fs::read_to_string(dir.join("cert.pem")).unwrap(),
        "the user's own certificate"
    );
    let names: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        names.len(),
        1,
        "quiclab wrote into the user's directory: {names:?}"
    );
}

#[test]
fn keep_into_a_directory_of_user_files_is_refused_and_leaves_them_alone() {
    for (command, args) in [
        ("bulk", vec!["--proto", "h1", "--size", "10kB"]),
        ("page", vec!["--proto", "h2", "--page", "carlucci-small"]),
        ("flows", vec!["--flow", "h1", "--size", "10kB"]),
        ("video", vec!["--proto", "h3", "--duration", "8s"]),
    ] {
        let dir = users_dir(&format!("keep-{command}"));
        let keep = dir.to_str().unwrap();
        let mut all = args.clone();
        all.extend(["--keep", keep]);
        refused(command, &all, &["--keep", keep, "quiclab did not create"]);
        untouched(&dir);
    }
}

#[test]
fn output_files_are_never_replaced_unless_forced_nor_written_through_a_symlink() {
    let dir = temp_dir("user-files");
    let har = write(&dir, "load.har", "the user's HAR");
    refused(
        "page",
        &[
            "--proto",
            "h2",
            "--page",
            "carlucci-small",
            "--har",
            har.to_str().unwrap(),
        ],
        &["--har", "exists", "--force"],
    );
    let precious = write(&dir, "precious", "keep me");
    let link = dir.join("link.log");
    std::os::unix::fs::symlink(&precious, &link).unwrap();
    for force in [false, true] {
        let mut args = vec![
            "--rate",
            "10mbit",
            "--rtt",
            "20ms",
            "--log",
            link.to_str().unwrap(),
        ];
        if force {
            args.push("--force");
        }
        args.extend(["--", "true"]);
        refused("shell", &args, &["--log", "symbolic link"]);
    }
    assert_eq!(std::fs::read_to_string(&har).unwrap(), "the user's HAR");
    assert_eq!(std::fs::read_to_string(&precious).unwrap(), "keep me");
}

#[test]
fn run_and_export_refuse_a_directory_of_user_files() {
    let dir = users_dir("run-out");
    let scenario = write(
        &temp_dir("run-out-scenario"),
        "s.toml",
        "name = \"s\"\n[workload]\nkind = \"bulk\"\nsize = \"10kB\"\n[grid]\nprotocol = [\"h1\"]\n",
    );
    let out = quiclab()
        .args([
            "run",
            scenario.to_str().unwrap(),
            "--out",
            dir.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--out") && err.contains("quiclab did not create"),
        "{err}"
    );
    untouched(&dir);
}

/// Runs a one-run scenario of `kind` that cannot finish within its `timeout`; its stored run.
fn run_past_its_limit(
    name: &str,
    workload: &str,
    grid: &str,
    link: &str,
    limit: &str,
) -> quiclab_results::StoredRun {
    let dir = temp_dir(name);
    let file = write(
        &dir,
        "s.toml",
        &format!(
            "name = \"{name}\"\nrepetitions = 1\ntimeout = \"{limit}\"\nretry_flagged = 0\n\
             [workload]\n{workload}\n[link]\n{link}\n[grid]\n{grid}\n"
        ),
    );
    let out_dir = dir.join("out");
    let out = quiclab()
        .args([
            "run",
            file.to_str().unwrap(),
            "--out",
            out_dir.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    // The run itself did not fail: `quiclab run` stored it (exit 0 or 1 for failed/timed-out runs).
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(matches!(out.status.code(), Some(0) | Some(1)), "{err}");
    let store = Store::open(&out_dir.join("results.sqlite")).unwrap();
    // The stored document reads back with the workloads' types, partial result and all.
    let typed = store.runs_as::<quiclab_workload::WorkloadOutput>().unwrap();
    if let Some(r) = typed[0].document.result() {
        assert!(
            workload.contains(r.kind().name()),
            "{workload}: {:?}",
            r.kind()
        );
    }
    let runs = store.runs().unwrap();
    assert_eq!(runs.len(), 1, "{err}");
    let run = runs.into_iter().next().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    run
}

fn assert_censored(run: &quiclab_results::StoredRun, limit_s: f64) {
    assert_eq!(run.status(), Status::Timeout, "{:?}", run.reason());
    assert_eq!(
        run.document.time_limit_s(),
        Some(limit_s),
        "{:?}",
        run.document
    );
}

#[test]
fn a_video_run_forced_past_its_limit_is_stored_as_timeout() {
    if !root_or_skip("a_video_run_forced_past_its_limit_is_stored_as_timeout") {
        return;
    }
    let run = run_past_its_limit(
        "video-timeout",
        "kind = \"video\"\nduration = \"30s\"",
        "players = [\"h3\"]",
        "rate = \"20mbit\"\nrtt = \"20ms\"",
        "6s",
    );
    assert_censored(&run, 6.0);
    // What the player measured until then is kept beside the limit.
    let doc = serde_json::to_value(run.document.result().expect("a partial result")).unwrap();
    let player = &doc["players"][0];
    assert_eq!(player["error"]["kind"], "timed_out", "{player}");
    assert!(
        player["segment_log"]
            .as_array()
            .is_some_and(|s| !s.is_empty()),
        "{player}"
    );
}

#[test]
fn a_flows_run_forced_past_its_limit_is_stored_as_timeout() {
    if !root_or_skip("a_flows_run_forced_past_its_limit_is_stored_as_timeout") {
        return;
    }
    let run = run_past_its_limit(
        "flows-timeout",
        "kind = \"flows\"\nsize = \"20MB\"",
        "flows = [\"h1 + h3\"]",
        "rate = \"5mbit\"\nrtt = \"20ms\"",
        "4s",
    );
    assert_censored(&run, 4.0);
    let flows =
        serde_json::to_value(run.document.result().expect("a partial result")).unwrap()["flows"]
            .clone();
    for f in flows.as_array().unwrap() {
        assert_eq!(f["error"]["kind"], "timed_out", "{f}");
    }
}

#[test]
fn bulk_and_page_runs_past_their_limit_are_stored_as_timeout() {
    if !root_or_skip("bulk_and_page_runs_past_their_limit_are_stored_as_timeout") {
        return;
    }
    let run = run_past_its_limit(
        "bulk-timeout",
        "kind = \"bulk\"\nsize = \"20MB\"",
        "protocol = [\"h2\"]",
        "rate = \"5mbit\"\nrtt = \"20ms\"",
        "3s",
    );
    assert_censored(&run, 3.0);
    let run = run_past_its_limit(
        "page-timeout",
        "kind = \"page\"\npage = \"carlucci-large\"",
        "protocol = [\"h3\"]",
        "rate = \"1mbit\"\nrtt = \"100ms\"",
        "3s",
    );
    assert_censored(&run, 3.0);
}

#[test]
fn the_server_commands_output_stays_out_of_the_shells_stdout() {
    if !root_or_skip("the_server_commands_output_stays_out_of_the_shells_stdout") {
        return;
    }
    let out = quiclab()
        .args([
            "shell",
            "--rtt",
            "10ms",
            "--server-cmd",
            "echo SERVER-NOISE; sleep 5",
            "--server-wait",
            "500ms",
            "--",
            "echo",
            "client-output",
        ])
        .output()
        .unwrap();
    assert_success(&out);
    // `quiclab shell … -- cmd | parser` reads the command's output alone.
    assert_eq!(String::from_utf8_lossy(&out.stdout), "client-output\n");
    assert!(String::from_utf8_lossy(&out.stderr).contains("SERVER-NOISE"));
}
