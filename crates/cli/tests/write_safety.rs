//! Nothing written where quiclab has no claim (issue 36): every command that writes or deletes
//! is tried against symbolic links, users' files beside quiclab's names, and directories
//! quiclab did not make; commands that read results never change them; plans and numbers are
//! bounded; merges and shards cannot mix plans. Each test names the issue's item it covers.

use std::path::{Path, PathBuf};

use quiclab_results::{Environment, ScenarioRecord, Status, Store, StoredRun};

mod common;
use common::*;

const SCENARIO: &str = TWO_PROTOCOL_SCENARIO;

/// A results directory as `quiclab run` makes it (claimed, a database of two failed runs),
/// built without a lab.
fn results_dir(dir: &Path) -> PathBuf {
    two_run_results(dir, Status::Failed)
}

fn bytes(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap()
}

/// A quiclab checkout in miniature: studies/t.toml judging scenarios/s.toml.
fn repo(dir: &Path, study: &str) -> PathBuf {
    std::fs::create_dir_all(dir.join("studies")).unwrap();
    std::fs::create_dir_all(dir.join("scenarios")).unwrap();
    write(&dir.join("scenarios"), "s.toml", SCENARIO);
    write(&dir.join("studies"), "t.toml", study);
    dir.to_path_buf()
}

const STUDY: &str = "study = \"t\"\ntitle = \"t\"\n[[finding]]\nid = \"t-1\"\nclaim = \"c\"\nclass = \"reproduction\"\n\
                     scenario = \"s\"\nmetric = \"total_ms\"\n\
                     wins_share = { axis = \"protocol\", a = \"h3\", at_least = 0.5 }\n\
                     test = \"wins\"\nmin_n = 1\n";

#[test]
fn item1_report_and_export_never_write_or_delete_through_links() {
    let base = temp_dir("w1");
    let r = results_dir(&base.join("r"));
    let user = base.join("user");
    std::fs::create_dir(&user).unwrap();
    let photo = write(&user, "photo.png", "precious");
    let notes = write(&user, "notes.svg", "<svg>mine</svg>");
    // figures/ a link to the user's directory.
    std::os::unix::fs::symlink(&user, r.join("figures")).unwrap();
    refused(
        "report",
        &[r.to_str().unwrap()],
        &["figures", "symbolic link"],
    );
    assert_eq!(bytes(&photo), b"precious");
    assert_eq!(bytes(&notes), b"<svg>mine</svg>");
    assert_eq!(std::fs::read_dir(&user).unwrap().count(), 2);
    std::fs::remove_file(r.join("figures")).unwrap();
    // report.html and runs.csv links to the user's files.
    let page = write(&user, "page.html", "mine");
    std::os::unix::fs::symlink(&page, r.join("report.html")).unwrap();
    refused(
        "report",
        &[r.to_str().unwrap()],
        &["report.html", "symbolic link"],
    );
    std::os::unix::fs::symlink(&page, r.join("runs.csv")).unwrap();
    refused(
        "export",
        &[r.to_str().unwrap(), "--csv"],
        &["runs.csv", "symbolic link"],
    );
    assert_eq!(bytes(&page), b"mine");
    // A user's figure in a real figures/ survives the report, which removes only its own.
    std::fs::remove_file(r.join("report.html")).unwrap();
    std::fs::remove_file(r.join("runs.csv")).unwrap();
    let out = quiclab()
        .args(["report", r.to_str().unwrap()])
        .output()
        .unwrap();
    assert_success(&out);
    let theirs = write(&r.join("figures"), "theirs.png", "their figure");
    let out = quiclab()
        .args(["report", r.to_str().unwrap()])
        .output()
        .unwrap();
    assert_success(&out);
    assert_eq!(bytes(&theirs), b"their figure");
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn item2_and_6_judging_writes_only_where_quiclab_has_a_claim() {
    let base = temp_dir("w2");
    let lib = repo(&base.join("repo"), STUDY);
    // The user's own directory holding a copy of quiclab's results and their own verdicts.md.
    let judged = base.join("mine");
    std::fs::create_dir_all(judged.join("t")).unwrap();
    let results = results_dir(&base.join("made"));
    std::fs::create_dir_all(judged.join("t/s")).unwrap();
    std::fs::copy(
        results.join("results.sqlite"),
        judged.join("t/s/results.sqlite"),
    )
    .unwrap();
    let verdicts = write(&judged, "verdicts.md", "my notes");
    let db_before = bytes(&judged.join("t/s/results.sqlite"));
    let repo_arg = lib.to_str().unwrap();
    refused(
        "reproduce",
        &["t", "--judge", judged.to_str().unwrap(), "--repo", repo_arg],
        &["--judge", "no quiclab marker", "--out"],
    );
    assert_eq!(bytes(&verdicts), b"my notes");
    // With --out, the verdicts go there and the judged directory is only read.
    let out_dir = base.join("verdicts-out");
    let out = quiclab()
        .args(["reproduce", "t", "--judge", judged.to_str().unwrap()])
        .args(["--out", out_dir.to_str().unwrap(), "--repo", repo_arg])
        .output()
        .unwrap();
    assert_success(&out);
    assert!(out_dir.join("verdicts.json").is_file());
    assert!(out_dir.join("reproduction.html").is_file());
    assert_eq!(bytes(&verdicts), b"my notes");
    assert_eq!(bytes(&judged.join("t/s/results.sqlite")), db_before);
    assert!(!judged.join("verdicts.json").exists());
    // A verdicts.md link in quiclab's own directory is refused before any verdict file changes.
    let json_before = bytes(&out_dir.join("verdicts.json"));
    std::fs::remove_file(out_dir.join("verdicts.md")).unwrap();
    std::os::unix::fs::symlink(&verdicts, out_dir.join("verdicts.md")).unwrap();
    let out = quiclab()
        .args(["reproduce", "t", "--judge", judged.to_str().unwrap()])
        .args(["--out", out_dir.to_str().unwrap(), "--repo", repo_arg])
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    assert_eq!(bytes(&out_dir.join("verdicts.json")), json_before);
    assert_eq!(bytes(&verdicts), b"my notes");
    // Item 6: a directory holding a file named like quiclab's is not quiclab's.
    let u = base.join("u");
    std::fs::create_dir(&u).unwrap();
    let theirs = write(&u, "verdicts.json", "[\"theirs\"]");
    refused(
        "reproduce",
        &["t", "--out", u.to_str().unwrap(), "--repo", repo_arg],
        &["--out", "quiclab did not create"],
    );
    assert_eq!(bytes(&theirs), b"[\"theirs\"]");
    assert_eq!(std::fs::read_dir(&u).unwrap().count(), 1);
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn item3_reading_commands_never_change_a_database() {
    let base = temp_dir("w3");
    // A user's own SQLite file, named like quiclab's.
    let foreign = base.join("f");
    std::fs::create_dir(&foreign).unwrap();
    {
        let c = rusqlite::Connection::open(foreign.join("results.sqlite")).unwrap();
        c.execute_batch("CREATE TABLE runs (key TEXT, v REAL); INSERT INTO runs VALUES ('a', 1);")
            .unwrap();
    }
    let before = bytes(&foreign.join("results.sqlite"));
    let to = base.join("csv");
    for (cmd, args) in [
        (
            "export",
            vec![
                foreign.to_str().unwrap(),
                "--csv",
                "--to",
                to.to_str().unwrap(),
            ],
        ),
        ("report", vec![foreign.to_str().unwrap()]),
    ] {
        refused(cmd, &args, &["not a quiclab results database"]);
        assert_eq!(bytes(&foreign.join("results.sqlite")), before, "{cmd}");
    }
    // An empty file says what it is.
    let empty = base.join("e");
    std::fs::create_dir(&empty).unwrap();
    write(&empty, "results.sqlite", "");
    refused(
        "export",
        &[
            empty.to_str().unwrap(),
            "--csv",
            "--to",
            to.to_str().unwrap(),
        ],
        &["an empty database"],
    );
    assert_eq!(bytes(&empty.join("results.sqlite")), b"");
    // quiclab's own database, read by report and export: unchanged, byte for byte.
    let r = results_dir(&base.join("r"));
    let before = bytes(&r.join("results.sqlite"));
    assert_success(
        &quiclab()
            .args(["report", r.to_str().unwrap()])
            .output()
            .unwrap(),
    );
    assert_success(
        &quiclab()
            .args(["export", r.to_str().unwrap(), "--csv"])
            .output()
            .unwrap(),
    );
    assert_eq!(bytes(&r.join("results.sqlite")), before);
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn item4_names_from_files_cannot_escape_out() {
    let base = temp_dir("w4");
    for (study, what) in [
        (
            STUDY.replace("study = \"t\"", "study = \"/tmp/escape\""),
            "study",
        ),
        (
            STUDY.replace("scenario = \"s\"", "scenario = \"../s\""),
            "scenario",
        ),
    ] {
        let lib = repo(&base.join(what), &study);
        let out = quiclab()
            .args(["reproduce", "t", "--list", "--repo", lib.to_str().unwrap()])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{err}");
        assert!(err.contains("not a plain name"), "{what}: {err}");
    }
    assert!(!Path::new("/tmp/escape").exists());
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn item5_7_12_output_paths_are_checked_before_a_lab_is_built() {
    let base = temp_dir("w5");
    let x = base.join("x");
    let bulk = ["--proto", "h1", "--size", "10kB"];
    // Devices are not files: /dev/full is never replaced, with or without --force.
    for force in [false, true] {
        let mut args = bulk.to_vec();
        args.extend(["--pcap", "/dev/full"]);
        if force {
            args.push("--force");
        }
        refused("bulk", &args, &["--pcap", "/dev/full"]);
    }
    assert!(!Path::new("/dev/.full.quiclab-part").exists());
    // A trailing slash names a directory.
    let slash = format!("{}/", base.display());
    let mut args = bulk.to_vec();
    args.extend(["--pcap", &slash]);
    refused("bulk", &args, &["--pcap", "directory"]);
    // Two flags naming one file, however spelled.
    let other = format!("{}/sub/../x", base.display());
    std::fs::create_dir(base.join("sub")).unwrap();
    for (a, b) in [("--har", "--pcap"), ("--har", "--waterfall")] {
        refused(
            "page",
            &[
                "--proto",
                "h2",
                "--page",
                "carlucci-small",
                a,
                x.to_str().unwrap(),
                b,
                &other,
            ],
            &["names the same file"],
        );
    }
    assert!(!x.exists(), "nothing is created when refused");
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn item5_a_capture_never_touches_a_file_beside_it() {
    if !root_or_skip("item5_a_capture_never_touches_a_file_beside_it") {
        return;
    }
    let base = temp_dir("w5b");
    // The name the capture's side file used to have, taken by a user's file.
    let side = write(&base, ".cap.pcapng.quiclab-part", "the user's");
    let cap = base.join("cap.pcapng");
    let out = quiclab()
        .args([
            "bulk", "--proto", "h1", "--size", "10kB", "--rate", "10mbit", "--rtt", "10ms",
        ])
        .args(["--pcap", cap.to_str().unwrap()])
        .output()
        .unwrap();
    assert_success(&out);
    assert!(std::fs::metadata(&cap).unwrap().len() > 100);
    assert_eq!(bytes(&side), b"the user's");
    let names: Vec<String> = std::fs::read_dir(&base)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn item8_9_12_plans_and_numbers_are_bounded_with_their_range() {
    let base = temp_dir("w8");
    let s = write(&base, "s.toml", SCENARIO);
    let file = s.to_str().unwrap();
    for reps in ["4294967295", "10001", "-1"] {
        refused(
            "run",
            &[file, "--dry-run", "--repetitions", reps],
            &["--repetitions", "1..=10000"],
        );
    }
    let big = write(
        &base,
        "big.toml",
        &SCENARIO.replace("repetitions = 1", "repetitions = 4294967295"),
    );
    refused(
        "run",
        &[big.to_str().unwrap(), "--dry-run"],
        &["repetitions", "1 to 10000"],
    );
    let wide = write(
        &base,
        "wide.toml",
        &format!(
            "{}rate = [{}]\nrtt = [{}]\n",
            SCENARIO.replace("repetitions = 1", "repetitions = 100"),
            (1..=100)
                .map(|i| format!("\"{i}mbit\""))
                .collect::<Vec<_>>()
                .join(", "),
            (1..=100)
                .map(|i| format!("\"{i}ms\""))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    );
    refused(
        "run",
        &[wide.to_str().unwrap(), "--dry-run"],
        &["2 (protocol) × 100 (rate) × 100 (rtt) × 100 repetitions = 2000000 runs"],
    );
    // Item 9: one name per setting: the old alias is an unknown key, named with the real one.
    let both = write(
        &base,
        "both.toml",
        &format!("{SCENARIO}aqm = [\"codel\"]\n"),
    );
    refused(
        "run",
        &[both.to_str().unwrap(), "--dry-run"],
        &["unknown key \"aqm\"", "queue-discipline"],
    );
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn item10_a_broken_study_is_listed_and_others_still_judge() {
    let base = temp_dir("w10");
    let lib = repo(&base.join("repo"), STUDY);
    write(
        &lib.join("studies"),
        "u.toml",
        "study = \"u\"\ntitle = \"u\"\n[[finding]]\nid = \"u-1\"\nclaim = \"c\"\nclass = \"reproduction\"\nscenario = \"s\"\n\
         metric = \"total_ms\"\nat_least = nan\n",
    );
    let out = quiclab()
        .args(["reproduce", "--list", "--repo", lib.to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("t-1") && text.contains("broken") && text.contains("u.toml"),
        "{text}"
    );
    // Judging all: the study with results is judged, the one without says so.
    write(
        &lib.join("studies"),
        "u.toml",
        "study = \"u\"\ntitle = \"u\"\n[[finding]]\nid = \"u-1\"\nclaim = \"c\"\nclass = \"reproduction\"\nnot_runnable = \"x\"\n",
    );
    let judged = base.join("judged");
    quiclab_outputs::claim_dir(&judged, "--out").unwrap();
    quiclab_outputs::claim_subdir(&judged, "t", "--out").unwrap();
    results_dir(&judged.join("t/s"));
    let out = quiclab()
        .args(["reproduce", "--judge", judged.to_str().unwrap()])
        .args(["--repo", lib.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_success(&out);
    assert!(err.contains("no results of study u"), "{err}");
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(judged.join("verdicts.json")).unwrap()).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 1, "{v}");
    // No results for any study: an error, and the verdicts already there stay.
    let before = bytes(&judged.join("verdicts.json"));
    let empty = base.join("empty");
    quiclab_outputs::claim_dir(&empty, "--out").unwrap();
    let out = quiclab()
        .args(["reproduce", "t", "--judge", empty.to_str().unwrap()])
        .args([
            "--out",
            judged.to_str().unwrap(),
            "--repo",
            lib.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    assert_eq!(bytes(&judged.join("verdicts.json")), before);
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn item11_merge_refuses_one_shard_twice_and_leaves_nothing_when_it_fails() {
    let base = temp_dir("w11");
    let a = results_dir(&base.join("a"));
    let out = base.join("merged");
    for twice in [
        PathBuf::from(format!("{}/", a.display())),
        base.join("a/../a"),
    ] {
        let o = quiclab()
            .args(["merge", a.to_str().unwrap(), twice.to_str().unwrap()])
            .args(["--out", out.to_str().unwrap()])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_ne!(o.status.code(), Some(0), "{err}");
        assert!(err.contains("same shard"), "{err}");
        assert!(!out.exists(), "a failed merge left {}", out.display());
    }
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn item11_a_run_into_another_shards_directory_is_refused() {
    if !root_or_skip("item11_a_run_into_another_shards_directory_is_refused") {
        return;
    }
    let base = temp_dir("w11b");
    let s = write(&base, "s.toml", SCENARIO);
    let dir = base.join("shard");
    quiclab_outputs::claim_dir(&dir, "--out").unwrap();
    {
        let record = ScenarioRecord {
            name: "s".into(),
            description: String::new(),
            file: s.display().to_string(),
            text: SCENARIO.into(),
            planned_runs: 1,
        };
        let mut store =
            Store::create_or_resume(&dir.join("results.sqlite"), &record, false).unwrap();
        store
            .check_and_set_plan(false, 1, Some("1/2".into()))
            .unwrap();
        store.begin_session(&Environment::default()).unwrap();
        store
            .record(
                &StoredRun::example("proto=h1;rep=1", "h1", 1, Status::Failed),
                &[],
            )
            .unwrap();
    }
    let before = bytes(&dir.join("results.sqlite"));
    refused(
        "run",
        &[
            s.to_str().unwrap(),
            "--shard",
            "2/2",
            "--resume",
            "--out",
            dir.to_str().unwrap(),
        ],
        &["shard 1/2", "one plan"],
    );
    assert_eq!(bytes(&dir.join("results.sqlite")), before);
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn item8_a_dry_run_of_a_million_runs_is_streamed_not_held() {
    let base = temp_dir("w8b");
    let rates: Vec<String> = (1..=500).map(|i| format!("\"{i}mbit\"")).collect();
    let big = write(
        &base,
        "big.toml",
        &format!(
            "{}rate = [{}]\n[link]\nrtt = \"20ms\"\n",
            SCENARIO.replace("repetitions = 1", "repetitions = 1000"),
            rates.join(", ")
        ),
    );
    let out = quiclab()
        .args(["run", big.to_str().unwrap(), "--dry-run"])
        .output()
        .unwrap();
    assert_success(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with(&format!("{}: 1000000 run(s)", big.display())),
        "{}",
        &text[..200]
    );
    assert_eq!(text.lines().count(), 1_000_005);
    // Held whole, the plan took ≈ 1 GB (1 070 256 kB measured); streamed, a few MB. The largest
    // child this test process waited for is bounded well below that.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    assert_eq!(
        unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) },
        0
    );
    assert!(
        usage.ru_maxrss < 300 * 1024,
        "a child of this test used {} kB",
        usage.ru_maxrss
    );
    let _ = std::fs::remove_dir_all(&base);
}
