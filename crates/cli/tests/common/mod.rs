//! Helpers the CLI's integration tests share. Each test binary uses a part of them, hence the
//! `dead_code` allowance.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The `quiclab` binary under test.
pub fn quiclab() -> Command {
    Command::new(env!("CARGO_BIN_EXE_quiclab"))
}

/// Whether labs can be built here; says why the test is skipped when not.
pub fn root_or_skip(test: &str) -> bool {
    quiclab_testkit::can_build_labs_or_skip(test)
}

/// A fresh directory for one test (removed first, in case an earlier run left it).
pub fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("quiclab-cli-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes `text` to `dir/name` and returns the path.
pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// The lab namespaces process `pid` has (quiclab names them `ql-<pid>-…`).
pub fn namespaces_of(pid: u32) -> Vec<String> {
    std::fs::read_dir("/run/netns")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| n.starts_with(&format!("ql-{pid}-")))
                .collect()
        })
        .unwrap_or_default()
}

/// Asserts that a finished `quiclab` exited 0, showing its stderr when not.
pub fn assert_success(out: &std::process::Output) {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The one JSON object a successful `--json` run printed.
pub fn json(out: &std::process::Output) -> serde_json::Value {
    assert_success(out);
    serde_json::from_slice(&out.stdout).expect("--json prints one JSON object")
}

/// Runs `quiclab COMMAND ARGS` expecting a usage error (exit 2) that contains every `must`,
/// quickly (no lab was built).
pub fn refused(command: &str, args: &[&str], must: &[&str]) {
    let t = std::time::Instant::now();
    let out = quiclab().arg(command).args(args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    for m in must {
        assert!(err.contains(m), "{args:?}: {err:?} lacks {m:?}");
    }
    assert!(t.elapsed().as_secs_f64() < 5.0, "{args:?} built a lab");
}

/// A results directory as `quiclab run` makes it — claimed, a database of scenario `text` with
/// its plan (`repetitions`, `shard`), one session of `env`, and a bulk run of `status` per
/// `(protocol, repetition, total_ms)` — built without a lab.
pub fn made_results(
    dir: &Path,
    text: &str,
    (repetitions, shard): (u32, Option<&str>),
    env: &quiclab_results::Environment,
    status: quiclab_results::Status,
    runs: &[(&str, u32, f64)],
) -> PathBuf {
    use quiclab_results::{ScenarioRecord, Store, StoredRun};
    quiclab_outputs::claim_dir(dir, "--out").unwrap();
    let record = ScenarioRecord {
        name: "s".into(),
        description: String::new(),
        file: "s.toml".into(),
        text: text.into(),
        planned_runs: runs.len(),
    };
    let mut store = Store::create_or_resume(&dir.join("results.sqlite"), &record, false).unwrap();
    store
        .check_and_set_plan(false, repetitions, shard.map(str::to_string))
        .unwrap();
    store.begin_session(env).unwrap();
    for &(proto, rep, v) in runs {
        let run = StoredRun {
            params: [
                ("protocol".to_string(), proto.to_string()),
                ("size".to_string(), "10kB".to_string()),
            ]
            .into(),
            metrics: [("total_ms".to_string(), v)].into(),
            ..StoredRun::example(&format!("proto={proto};rep={rep}"), proto, rep, status)
        };
        store.record(&run, &[]).unwrap();
    }
    dir.to_path_buf()
}

/// A bulk scenario of h1 against h3 at one repetition (the helpers' results directories hold it).
pub const TWO_PROTOCOL_SCENARIO: &str = "name = \"s\"\nrepetitions = 1\n[workload]\nkind = \"bulk\"\n\
                                         size = \"10kB\"\n[grid]\nprotocol = [\"h1\", \"h3\"]\n";

/// [`made_results`] of [`TWO_PROTOCOL_SCENARIO`]: one h1 and one h3 run of `status`.
pub fn two_run_results(dir: &Path, status: quiclab_results::Status) -> PathBuf {
    made_results(
        dir,
        TWO_PROTOCOL_SCENARIO,
        (1, None),
        &quiclab_results::Environment::default(),
        status,
        &[("h1", 1, 300.0), ("h3", 1, 200.0)],
    )
}

/// Runs the commands at once and returns their outputs in order. Tests whose labs mostly wait
/// (a video plays in real time at a few Mbit/s) run them side by side: the suite runs its tests
/// one at a time, and these waits were most of its length.
pub fn outputs_at_once(commands: Vec<Command>) -> Vec<std::process::Output> {
    use std::process::Stdio;
    let children: Vec<_> = commands
        .into_iter()
        .map(|mut c| {
            c.stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect()
}
