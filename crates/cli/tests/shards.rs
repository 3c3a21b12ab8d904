//! A grid split over machines: `quiclab run --shard K/N` runs disjoint parts of a plan, and
//! `quiclab merge` puts them back — the whole plan once, the missing runs named with the command
//! that runs them, shards of another scenario refused, the inputs untouched.

mod common;
use std::collections::BTreeSet;
use std::path::Path;

use common::*;

const SCENARIO: &str = "name = \"twelve\"\nrepetitions = 3\nseed = 12\n\
[workload]\nkind = \"bulk\"\nsize = \"20kB\"\n[link]\nrtt = \"10ms\"\n\
[grid]\nprotocol = [\"h1\", \"h3\"]\nrate = [\"20mbit\", \"50mbit\"]\n";

/// The run keys `quiclab run --dry-run` lists (with `extra` flags).
fn planned_keys(file: &Path, extra: &[&str]) -> BTreeSet<String> {
    let out = quiclab()
        .args(["run", file.to_str().unwrap(), "--dry-run"])
        .args(extra)
        .output()
        .unwrap();
    assert_success(&out);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().last())
        .filter(|k| k.contains(";rep="))
        .map(str::to_string)
        .collect()
}

fn stored_keys(dir: &Path) -> BTreeSet<String> {
    quiclab_results::Store::open(&dir.join("results.sqlite"))
        .unwrap()
        .runs()
        .unwrap()
        .into_iter()
        .map(|r| r.key)
        .collect()
}

#[test]
fn shards_split_the_plan_and_bad_shards_are_refused() {
    let dir = temp_dir("shards-split");
    let file = write(&dir, "twelve.toml", SCENARIO);
    let all = planned_keys(&file, &[]);
    assert_eq!(all.len(), 12);
    let one = planned_keys(&file, &["--shard", "1/2"]);
    let two = planned_keys(&file, &["--shard", "2/2"]);
    assert!(one.is_disjoint(&two));
    assert_eq!(&one | &two, all);
    // A setting's repetition (h1 and h3 of one rate and rep) stays in one shard.
    for k in &one {
        let twin = k.replace("proto=h1", "proto=h3");
        assert!(one.contains(&twin), "{k} without {twin}");
    }
    let f = file.to_str().unwrap();
    for bad in ["3/2", "0/0", "0/2", "two"] {
        refused(
            "run",
            &[f, "--shard", bad, "--dry-run"],
            &["--shard", "1 ≤ K ≤ N"],
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn two_shards_merged_hold_the_plan_once_and_a_missing_shard_is_named() {
    if !root_or_skip("two_shards_merged_hold_the_plan_once_and_a_missing_shard_is_named") {
        return;
    }
    let dir = temp_dir("shards-merge");
    let file = write(&dir, "twelve.toml", SCENARIO);
    let f = file.to_str().unwrap();
    for k in ["1/2", "2/2"] {
        let out = dir.join(format!("shard-{}", &k[..1]));
        let run = quiclab()
            .args(["run", f, "--shard", k, "--out", out.to_str().unwrap()])
            .output()
            .unwrap();
        assert_success(&run);
    }
    let (a, b) = (dir.join("shard-1"), dir.join("shard-2"));
    let before = std::fs::read(a.join("results.sqlite")).unwrap();
    let merged = dir.join("merged");
    let out = quiclab()
        .args(["merge", a.to_str().unwrap(), b.to_str().unwrap(), "--out"])
        .arg(&merged)
        .output()
        .unwrap();
    assert_success(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("12 of 12 planned run(s)") && text.contains("every run of the plan"),
        "{text}"
    );
    assert_eq!(stored_keys(&merged), planned_keys(&file, &[]));
    // Both shards' sessions are kept; the inputs are unchanged.
    let store = quiclab_results::Store::open(&merged.join("results.sqlite")).unwrap();
    assert_eq!(store.sessions().unwrap().len(), 2);
    assert_eq!(std::fs::read(a.join("results.sqlite")).unwrap(), before);
    // The report of the merged directory has every run.
    let report = quiclab()
        .args(["report", merged.to_str().unwrap()])
        .output()
        .unwrap();
    assert_success(&report);

    // Shard 2 alone: exactly shard 1's runs are missing, and the command to run them.
    let partial = dir.join("partial");
    let out = quiclab()
        .args(["merge", b.to_str().unwrap(), "--out"])
        .arg(&partial)
        .output()
        .unwrap();
    assert_success(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    let missing: BTreeSet<String> = text
        .lines()
        .find_map(|l| l.split_once("run(s) missing: "))
        .map(|(_, keys)| keys.split(", ").map(str::to_string).collect())
        .unwrap_or_default();
    assert_eq!(missing, stored_keys(&a), "{text}");
    assert!(
        text.contains(&format!(
            "quiclab run {f} --resume --out {}",
            partial.display()
        )),
        "{text}"
    );

    // A shard of another scenario, a directory that is not a results directory: refused.
    let other = write(
        &dir,
        "other.toml",
        &SCENARIO.replace("seed = 12", "seed = 13"),
    );
    let c = dir.join("other");
    let run = quiclab()
        .args(["run", other.to_str().unwrap(), "--shard", "1/2", "--out"])
        .arg(&c)
        .output()
        .unwrap();
    assert_success(&run);
    let out = quiclab()
        .args(["merge", a.to_str().unwrap(), c.to_str().unwrap(), "--out"])
        .arg(dir.join("mixed"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("another text") && err.contains("one scenario"),
        "{err}"
    );
    let out = quiclab()
        .args(["merge", dir.to_str().unwrap(), "--out"])
        .arg(dir.join("none"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a results directory"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Stops the local Slurm cluster of `dir` (by the PIDs its start recorded) when the test ends,
/// passed or not.
struct LocalCluster(std::path::PathBuf);

impl Drop for LocalCluster {
    fn drop(&mut self) {
        let _ = std::process::Command::new(local_cluster_script())
            .arg("stop")
            .arg(&self.0)
            .status();
    }
}

fn local_cluster_script() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/slurm/local-cluster")
}

fn slurm_script(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scripts/slurm")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

/// The job array of scripts/slurm on a real (one-node) Slurm: two shards, each an exclusive task,
/// then the merge step after them; the merged database holds the plan exactly once.
#[test]
fn a_slurm_job_array_runs_the_shards_and_merges_them() {
    let test = "a_slurm_job_array_runs_the_shards_and_merges_them";
    if !root_or_skip(test) {
        return;
    }
    let have = |t: &str| {
        ["/usr/sbin", "/usr/bin", "/sbin", "/bin"]
            .iter()
            .any(|d| Path::new(d).join(t).exists())
    };
    if !["munged", "slurmctld", "slurmd", "sbatch"]
        .iter()
        .all(|t| have(t))
    {
        quiclab_testkit::skip(
            test,
            "needs Debian's slurm-wlm and munge (QUICLAB_WITH_SLURM=1 scripts/setup installs them)",
        );
        return;
    }
    let dir = temp_dir("slurm");
    let file = write(&dir, "twelve.toml", SCENARIO);
    let cluster = dir.join("cluster");
    let start = std::process::Command::new(local_cluster_script())
        .arg("start")
        .arg(&cluster)
        .output()
        .unwrap();
    let _guard = LocalCluster(cluster.clone());
    assert_success(&start);
    let conf = cluster.join("slurm.conf");
    let results = dir.join("results");
    let sbatch = |args: &[&str]| {
        let out = std::process::Command::new("sbatch")
            .env("SLURM_CONF", &conf)
            .env("QUICLAB", env!("CARGO_BIN_EXE_quiclab"))
            .arg("--parsable")
            .arg(format!("--chdir={}", dir.display()))
            .args(args)
            .output()
            .unwrap();
        assert_success(&out);
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let (f, r) = (file.to_str().unwrap(), results.to_str().unwrap());
    let array = sbatch(&["--array=1-2", &slurm_script("quiclab-array.sbatch"), f, r]);
    // --wait: sbatch returns when the merge job ends, with its exit code (asserted above).
    sbatch(&[
        &format!("--dependency=afterok:{array}"),
        "--wait",
        &slurm_script("quiclab-merge.sbatch"),
        f,
        r,
    ]);
    let merged = results.join("merged");
    let store = quiclab_results::Store::open(&merged.join("results.sqlite")).unwrap();
    let runs = store.runs().unwrap();
    assert_eq!(runs.len(), 12, "every run once");
    assert_eq!(stored_keys(&merged), planned_keys(&file, &[]));
    assert!(
        runs.iter()
            .all(|r| r.status() == quiclab_results::Status::Ok)
    );
    assert!(merged.join("report.html").exists());
    // Each task ran its own shard, and alone: the array's tasks are exclusive on the one node.
    let span = |k: usize| {
        let s = quiclab_results::Store::open(&results.join(format!("shard-{k}/results.sqlite")))
            .unwrap();
        let sessions = s.sessions().unwrap();
        assert_eq!(sessions.len(), 1);
        assert!(
            sessions[0]
                .environment
                .command
                .contains(&format!("--shard {k}/2")),
            "{}",
            sessions[0].environment.command
        );
        let runs = s.runs().unwrap();
        assert_eq!(runs.len(), 6);
        let begin = runs.iter().map(|r| r.started_unix).fold(f64::MAX, f64::min);
        let end = runs
            .iter()
            .map(|r| r.started_unix + r.duration_s)
            .fold(0.0, f64::max);
        (begin, end)
    };
    let (a, b) = (span(1), span(2));
    assert!(a.1 <= b.0 || b.1 <= a.0, "shards overlapped: {a:?} {b:?}");
    drop(_guard);
    assert!(!cluster.join("pids").exists(), "the cluster was stopped");
    let _ = std::fs::remove_dir_all(&dir);
}
