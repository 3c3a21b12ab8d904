//! Nothing lost when a merge fails, when two quiclab processes meet, or when a write is cut
//! short (issue 54): each test names the sweep's item (shared/audits/malformed-2026-11-28.md)
//! it covers. Tests that build labs, mount file systems or clean need root and skip (saying
//! so) without it; CI runs them.

use std::path::{Path, PathBuf};

use quiclab_results::{Environment, ScenarioRecord, Status, Store};

mod common;
use common::*;

const SCENARIO: &str = TWO_PROTOCOL_SCENARIO;

/// A results directory as `quiclab run` makes it (claimed, a database of two ok runs), no lab.
fn results_dir(dir: &Path) -> PathBuf {
    two_run_results(dir, Status::Ok)
}

/// Every file below `dir` with its bytes, for "nothing changed".
fn contents(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                out.push((e.path(), std::fs::read(e.path()).unwrap()));
            }
        }
    }
    out.sort();
    out
}

fn run(args: &[&str]) -> std::process::Output {
    quiclab().args(args).output().unwrap()
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn ds1_a_failing_merge_leaves_what_its_out_held() {
    let base = temp_dir("n-merge");
    let a = results_dir(&base.join("a"));
    let b = results_dir(&base.join("b"));
    // An earlier merge's directory with its report and CSV.
    let r = base.join("r");
    assert_success(&run(&[
        "merge",
        a.to_str().unwrap(),
        "--out",
        r.to_str().unwrap(),
    ]));
    assert_success(&run(&["report", r.to_str().unwrap()]));
    assert_success(&run(&["export", r.to_str().unwrap(), "--csv"]));
    let before = contents(&r);
    assert!(before.iter().any(|(p, _)| p.ends_with("report.html")));
    let typo = base.join("sh2-typo");
    for args in [
        // A typo in a shard's path.
        vec![a.to_str().unwrap(), typo.to_str().unwrap()],
        // The same merge again.
        vec![a.to_str().unwrap()],
    ] {
        let o = quiclab()
            .arg("merge")
            .args(&args)
            .args(["--out", r.to_str().unwrap()])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert_eq!(contents(&r), before, "merge {args:?} changed its --out");
    }
    // --out is one of the shards: refused, the shard's database untouched.
    let shard_before = contents(&b);
    let o = run(&[
        "merge",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--out",
        b.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("is the shard"), "{}", stderr(&o));
    assert_eq!(contents(&b), shard_before);
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn ds3_a_directory_another_process_writes_is_refused_naming_that_process() {
    let base = temp_dir("n-lock");
    let r = results_dir(&base.join("r"));
    // Another process holds the directory (flock(1) locks it as quiclab does).
    let mut other = std::process::Command::new("flock")
        .arg(&r)
        .args(["sleep", "2"])
        .spawn()
        .expect("flock(1) (util-linux)");
    let t = std::time::Instant::now();
    let o = loop {
        let o = run(&["report", r.to_str().unwrap()]);
        if o.status.code() == Some(2) || t.elapsed().as_secs() > 4 {
            break o;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("another quiclab process is writing into it")
            && err.contains(&format!("pid {}", other.id())),
        "{err}"
    );
    // Once it has ended (flock(1) waits for its command, which holds the lock too), the
    // directory is free again.
    other.wait().unwrap();
    assert_success(&run(&["report", r.to_str().unwrap()]));
    let _ = std::fs::remove_dir_all(&base);
}

/// A copy of `dir` whose database has the hot journal of a writer killed mid-transaction: the
/// copy is taken while a transaction of this process is open (its journal is on disk, its
/// changes not in the database), so no process holds the copy's locks.
fn with_hot_journal(dir: &Path, into: &Path) -> PathBuf {
    let copy = results_dir(into);
    let db = dir.join("results.sqlite");
    let conn = rusqlite::Connection::open(&db).unwrap();
    // A cache of one page spills the transaction into the database file mid-way, after the
    // journal is synced: as a writer killed in the middle of storing a run leaves it.
    conn.execute_batch(
        "PRAGMA cache_size = 1; BEGIN; \
         UPDATE runs SET reason = 'half-written' || hex(randomblob(100000));",
    )
    .unwrap();
    std::fs::copy(&db, copy.join("results.sqlite")).unwrap();
    std::fs::copy(
        dir.join("results.sqlite-journal"),
        copy.join("results.sqlite-journal"),
    )
    .unwrap();
    conn.execute_batch("ROLLBACK").unwrap();
    copy
}

#[test]
fn an_interrupted_write_is_named_by_readers_and_rolled_back_by_writers() {
    let base = temp_dir("n-journal");
    let r = results_dir(&base.join("r"));
    let hot = with_hot_journal(&r, &base.join("hot"));
    assert!(quiclab_results::interrupted_write(
        &hot.join("results.sqlite")
    ));
    // merge only reads its shards: it says what happened and what recovers it.
    let m = base.join("m");
    let o = run(&["merge", hot.to_str().unwrap(), "--out", m.to_str().unwrap()]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("interrupted write") && err.contains("quiclab report"),
        "{err}"
    );
    assert!(!m.exists(), "a failed merge left {}", m.display());
    // export writes into the directory: it rolls the write back, and every run is there.
    let o = run(&["export", hot.to_str().unwrap(), "--csv"]);
    assert_success(&o);
    assert!(stderr(&o).contains("rolled back"), "{}", stderr(&o));
    assert!(!quiclab_results::interrupted_write(
        &hot.join("results.sqlite")
    ));
    let store = Store::open(&hot.join("results.sqlite")).unwrap();
    let runs = store.runs().unwrap();
    assert_eq!(runs.len(), 2);
    assert!(
        runs.iter()
            .all(|r| !r.reason().is_some_and(|x| x.starts_with("half-written")))
    );
    assert_success(&run(&[
        "merge",
        hot.to_str().unwrap(),
        "--out",
        m.to_str().unwrap(),
    ]));
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn an_empty_database_quiclab_listed_is_made_again() {
    let base = temp_dir("n-empty");
    let out = base.join("out");
    quiclab_outputs::claim_dir(&out, "--out").unwrap();
    // What a disk that filled at the schema left: a listed, empty results.sqlite.
    quiclab_outputs::list_in_manifest(&out.join("results.sqlite")).unwrap();
    std::fs::write(out.join("results.sqlite"), "").unwrap();
    let record = ScenarioRecord {
        name: "s".into(),
        description: String::new(),
        file: "s.toml".into(),
        text: SCENARIO.into(),
        planned_runs: 2,
    };
    let store = Store::create_or_resume(&out.join("results.sqlite"), &record, true).unwrap();
    assert_eq!(store.scenario().unwrap().name, "s");
    // One the user put there (not listed) is not quiclab's: refused, kept.
    let user = base.join("user");
    quiclab_outputs::claim_dir(&user, "--out").unwrap();
    std::fs::write(user.join("results.sqlite"), "").unwrap();
    assert!(Store::create_or_resume(&user.join("results.sqlite"), &record, true).is_err());
    assert!(user.join("results.sqlite").exists());
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn ds4_export_and_report_keep_a_users_file_under_quiclabs_names() {
    let base = temp_dir("n-unlisted");
    let r = results_dir(&base.join("r"));
    write(&r, "runs.csv", "my own table");
    write(&r, "report.html", "my own page");
    let o = run(&["export", r.to_str().unwrap(), "--csv"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("did not write"), "{}", stderr(&o));
    let o = run(&["report", r.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(
        std::fs::read_to_string(r.join("runs.csv")).unwrap(),
        "my own table"
    );
    assert_eq!(
        std::fs::read_to_string(r.join("report.html")).unwrap(),
        "my own page"
    );
    let _ = std::fs::remove_dir_all(&base);
}

const STUDY: &str = "study = \"t\"\ntitle = \"t\"\n[[finding]]\nid = \"t-1\"\nclaim = \"c\"\n\
                     class = \"reproduction\"\nscenario = \"s\"\nmetric = \"total_ms\"\n\
                     wins_share = { axis = \"protocol\", a = \"h3\", at_least = 0.5 }\n\
                     test = \"wins\"\nmin_n = 1\n";

/// A quiclab checkout in miniature: studies/t.toml judging scenarios/s.toml (`scenario`).
fn study_repo(dir: &Path, scenario: &str) -> PathBuf {
    std::fs::create_dir_all(dir.join("studies")).unwrap();
    std::fs::create_dir_all(dir.join("scenarios")).unwrap();
    write(&dir.join("scenarios"), "s.toml", scenario);
    write(&dir.join("studies"), "t.toml", STUDY);
    dir.to_path_buf()
}

#[test]
fn a1_a_stored_plan_is_bounded_when_judged() {
    let base = temp_dir("n-plan");
    let lib = study_repo(&base.join("repo"), SCENARIO);
    let pack = base.join("pack");
    quiclab_outputs::claim_dir(&pack, "--out").unwrap();
    quiclab_outputs::claim_subdir(&pack, "t", "--out").unwrap();
    let dir = results_dir(&pack.join("t/s"));
    rusqlite::Connection::open(dir.join("results.sqlite"))
        .unwrap()
        .execute_batch("UPDATE plan SET repetitions = 4294967295")
        .unwrap();
    let t = std::time::Instant::now();
    let o = run(&[
        "reproduce",
        "t",
        "--repo",
        lib.to_str().unwrap(),
        "--judge",
        pack.to_str().unwrap(),
    ]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("4294967295 repetitions"), "{err}");
    assert!(t.elapsed().as_secs() < 10);
    // --judge runs nothing: the flags that shape runs are refused, not ignored.
    for flag in [&["--quick"][..], &["--resume"], &["--repetitions", "3"]] {
        let mut args = vec![
            "t",
            "--repo",
            lib.to_str().unwrap(),
            "--judge",
            pack.to_str().unwrap(),
        ];
        args.extend_from_slice(flag);
        refused("reproduce", &args, &["cannot be used with"]);
    }
    refused(
        "reproduce",
        &["--list", "--out", "x", "--repo", lib.to_str().unwrap()],
        &["cannot be used with"],
    );
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn silently_wrong_values_are_refused_naming_the_key() {
    let base = temp_dir("n-values");
    for (body, must) in [
        (
            "[workload]\nkind = \"bulk\"\nsize = \"1MB\"\n[link]\nloss = 1\n",
            "100%",
        ),
        (
            "[workload]\nkind = \"bulk\"\nsize = \"1MB\"\n[link]\nloss = \"ge:p=1%,r=0%\"\n",
            "r = 0",
        ),
        (
            "[workload]\nkind = \"bulk\"\nsize = \"18446744073709551615B\"\n",
            "1 TB",
        ),
        (
            "[workload]\nkind = \"flows\"\nflows = \"h3 +\"\nduration = \"5s\"\n",
            "empty part",
        ),
    ] {
        let f = write(&base, "x.toml", &format!("name = \"x\"\n{body}"));
        refused(
            "run",
            &[f.to_str().unwrap(), "--dry-run"],
            &["x.toml", must],
        );
    }
    refused("bulk", &["--loss", "1"], &["--loss", "100%"]);
    refused(
        "bulk",
        &["--proto", "h3", "--server", "caddy", "--quic-mtu", "1200"],
        &["quic_mtu", "never went on the wire"],
    );
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn clean_removes_what_dead_processes_left_on_disk() {
    if !root_or_skip("clean_removes_what_dead_processes_left_on_disk") {
        return;
    }
    // PID 999999999 is past any pid_max: a process that does not exist.
    let work = std::env::temp_dir().join("quiclab-bulk-999999999-AbC123");
    std::fs::create_dir_all(work.join("certs")).unwrap();
    let pin = Path::new(env!("CARGO_BIN_EXE_quiclab"))
        .with_file_name(format!("{}999999999", quiclab_outputs::PINNED_PREFIX));
    std::fs::write(&pin, "x").unwrap();
    // A live process's are kept.
    let live = std::env::temp_dir().join(format!("quiclab-bulk-{}-AbC123", std::process::id()));
    std::fs::create_dir_all(&live).unwrap();
    let out = json(&run(&["clean", "--json"]));
    assert!(!work.exists() && !pin.exists(), "{out}");
    assert!(live.exists());
    assert!(
        out["work_dirs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p.as_str() == work.to_str()),
        "{out}"
    );
    assert_eq!(out["pinned"].as_array().unwrap().len(), 1, "{out}");
    let _ = std::fs::remove_dir_all(&live);
}

const TINY: &str = "name = \"tiny\"\nrepetitions = 3\n[workload]\nkind = \"bulk\"\n\
                    size = \"100kB\"\n[link]\nrate = \"20mbit\"\nrtt = \"20ms\"\n\
                    [grid]\nprotocol = [\"h1\", \"h3\"]\n";

#[test]
fn ds3_two_runs_into_one_out_one_is_refused_before_any_lab() {
    if !root_or_skip("ds3_two_runs_into_one_out_one_is_refused_before_any_lab") {
        return;
    }
    let base = temp_dir("n-two-runs");
    let f = write(&base, "tiny.toml", &format!("trace = \"all\"\n{TINY}"));
    let out = base.join("o");
    let mut first = quiclab()
        .args(["run", f.to_str().unwrap(), "--out", out.to_str().unwrap()])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // The database appears once the first holds the directory.
    let t = std::time::Instant::now();
    while !out.join("results.sqlite").exists() {
        assert!(t.elapsed().as_secs() < 30, "the first run never started");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let second = run(&[
        "run",
        f.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--resume",
    ]);
    let err = stderr(&second);
    let first_done = first.wait().unwrap();
    assert!(first_done.success());
    assert_eq!(second.status.code(), Some(2), "{err}");
    assert!(
        err.contains("another quiclab process is writing into it")
            && err.contains(&format!("pid {}", first.id())),
        "{err}"
    );
    assert!(!err.contains("UNIQUE"), "{err}");
    let store = Store::open(&out.join("results.sqlite")).unwrap();
    assert_eq!(store.runs().unwrap().len(), 6);
    assert_eq!(
        store.sessions().unwrap().len(),
        1,
        "the refused run added a session"
    );
    // Every trace is one JSON document.
    for e in std::fs::read_dir(out.join("traces")).unwrap().flatten() {
        if !e.path().is_dir() {
            continue;
        }
        for f in std::fs::read_dir(e.path()).unwrap().flatten() {
            if f.path().extension().is_some_and(|x| x == "json") {
                let text = std::fs::read_to_string(f.path()).unwrap();
                serde_json::from_str::<serde_json::Value>(&text)
                    .unwrap_or_else(|e| panic!("{}: {e}", f.path().display()));
            }
        }
    }
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn a_capture_that_does_not_fit_costs_the_capture_not_the_run() {
    if !root_or_skip("a_capture_that_does_not_fit_costs_the_capture_not_the_run") {
        return;
    }
    let base = temp_dir("n-capture");
    let f = write(&base, "tiny.toml", &format!("pcap = \"all\"\n{TINY}"));
    let out = base.join("o");
    quiclab_outputs::claim_dir(&out, "--out").unwrap();
    let captures = quiclab_outputs::claim_subdir(&out, "captures", "--out").unwrap();
    // A file system with room for the marker and little else (a 100 kB download's capture is
    // larger than 64 kB).
    let ok = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64k", "quiclab-test"])
        .arg(&captures)
        .status()
        .unwrap()
        .success();
    assert!(ok, "mounting a tmpfs");
    quiclab_outputs::claim_dir(&captures, "--out").unwrap();
    let o = run(&["run", f.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    let leftovers: Vec<String> = std::fs::read_dir(&captures)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("quiclab-tmp"))
        .collect();
    let _ = std::process::Command::new("umount").arg(&captures).status();
    assert_success(&o);
    assert!(leftovers.is_empty(), "{leftovers:?}");
    let store = Store::open(&out.join("results.sqlite")).unwrap();
    let runs = store.runs().unwrap();
    assert_eq!(runs.len(), 6);
    assert!(
        runs.iter().all(|r| r.status() == Status::Ok),
        "{:?}",
        runs.iter().map(|r| r.reason()).collect::<Vec<_>>()
    );
    assert!(runs.iter().all(|r| r.metrics.contains_key("total_ms")));
    let _ = std::fs::remove_dir_all(&base);
}

const SCENARIO2: &str = "name = \"s\"\nrepetitions = 2\n[workload]\nkind = \"bulk\"\n\
                         size = \"10kB\"\n[grid]\nprotocol = [\"h1\", \"h3\"]\n";

/// A shard of a pack of study `t` (`PACK/t/s/`) holding `reps` of both protocols, made by a
/// clean build (evidence keeps only those).
fn shard_pack(pack: &Path, shard: &str, reps: &[u32]) {
    quiclab_outputs::claim_dir(pack, "--out").unwrap();
    quiclab_outputs::claim_subdir(pack, "t", "--out").unwrap();
    let runs: Vec<(&str, u32, f64)> = reps
        .iter()
        .flat_map(|&rep| [("h1", rep, 300.0), ("h3", rep, 200.0)])
        .collect();
    let clean = Environment {
        quiclab_version: "0.1.0".into(),
        git_commit: "0123456789ab".into(),
        command: "quiclab reproduce t".into(),
        ..Environment::default()
    };
    made_results(
        &pack.join("t/s"),
        SCENARIO2,
        (2, Some(shard)),
        &clean,
        Status::Ok,
        &runs,
    );
}

#[test]
fn ds2_two_evidence_additions_at_once_keep_every_run() {
    let base = temp_dir("n-evidence");
    let lib = study_repo(&base.join("repo"), SCENARIO2);
    let (pa, pb) = (base.join("pa"), base.join("pb"));
    shard_pack(&pa, "1/2", &[1]);
    shard_pack(&pb, "2/2", &[2]);
    // Unlocked, two packs ending side by side kept one pack's runs in 8 of 10 tries.
    for attempt in 0..5 {
        let ev = base.join(format!("ev{attempt}"));
        let start = |pack: &Path, out: &str| {
            quiclab()
                .args(["reproduce", "t", "--repo", lib.to_str().unwrap()])
                .args(["--judge", pack.to_str().unwrap()])
                .args([
                    "--out",
                    base.join(format!("{out}{attempt}")).to_str().unwrap(),
                ])
                .args(["--keep-evidence", ev.to_str().unwrap()])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        };
        let (a, b) = (start(&pa, "ja"), start(&pb, "jb"));
        for o in [a.wait_with_output().unwrap(), b.wait_with_output().unwrap()] {
            assert_success(&o);
        }
        let runs = quiclab_results::evidence::gunzip(&ev.join("t/s/runs.jsonl.gz")).unwrap();
        assert_eq!(runs.lines().count(), 4, "attempt {attempt}: {runs}");
    }
    // Damaged evidence is named, not passed over as "no results": a runs file that is a device.
    let runs = base.join("ev0/t/s/runs.jsonl.gz");
    std::fs::remove_file(&runs).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &runs).unwrap();
    let o = run(&[
        "reproduce",
        "t",
        "--repo",
        lib.to_str().unwrap(),
        "--judge",
        base.join("ev0").to_str().unwrap(),
        "--out",
        base.join("judged").to_str().unwrap(),
    ]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("runs.jsonl.gz") && err.contains("not a regular file"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&base);
}
