//! `quiclab bench runner`: the runner's own costs over a long grid — lab set-up and teardown per run,
//! its bookkeeping between runs, and whether anything leaks (namespaces, processes, file
//! descriptors, memory) from the first run to the last.

use std::path::Path;

use anyhow::{Context, Result};
use quiclab_results::Store;
use serde_json::json;

/// Namespaces that look like quiclab's (`ql-…`), and this process's children.
fn leftovers() -> (usize, usize) {
    let namespaces = std::fs::read_dir("/run/netns").map_or(0, |d| {
        d.filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with("ql-"))
            .count()
    });
    let me = std::process::id().to_string();
    let children = std::fs::read_dir("/proc").map_or(0, |d| {
        d.filter_map(|e| e.ok())
            .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
            .filter(|stat| {
                // Field 4 (ppid) follows the parenthesised command name.
                stat.rsplit_once(')')
                    .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                    == Some(me.as_str())
            })
            .count()
    });
    (namespaces, children)
}

fn quantile(v: Vec<f64>, q: f64) -> f64 {
    quiclab_experiment::stats::percentile(&v, q).unwrap_or(f64::NAN)
}

/// What `quiclab bench runner` measured (`doc`, its `--json` output) and whether it passed (no
/// leak, every run ok).
pub struct BenchRunnerReport {
    pub doc: serde_json::Value,
    pub passed: bool,
}

impl BenchRunnerReport {
    /// Prints the report (as JSON with `json`) and returns the command's exit code.
    pub fn print(&self, json: bool) -> Result<i32> {
        match json {
            true => println!("{}", serde_json::to_string_pretty(&self.doc)?),
            false => println!("{self}"),
        }
        Ok(if self.passed { 0 } else { 1 })
    }
}

/// Runs a grid of `runs` small bulk runs (rounded up to a multiple of 3 protocols) into `out` (a
/// new or empty directory; default a temporary one, removed afterwards) and measures the runner's
/// own costs and leaks.
pub fn run(runs: u32, out: Option<&Path>) -> Result<BenchRunnerReport> {
    let reps = runs.div_ceil(3).max(1);
    // quiclab runs as root: it writes only into a directory it creates (or an empty one) and
    // removes only the temporary directory it created itself.
    let (out, temp) = match out {
        Some(dir) => (quiclab_outputs::claim_dir(dir, "--out")?, None),
        None => {
            let temp = tempfile::Builder::new()
                .prefix("quiclab-bench-runner-")
                .tempdir()
                .context("creating a temporary directory")?;
            (
                quiclab_outputs::claim_dir(temp.path(), "--out")?,
                Some(temp),
            )
        }
    };
    let file = out.join("bench-runner.toml");
    // Small transfers on a fast link: the runner's own costs dominate each run.
    let text = format!(
        "name = \"bench-runner\"\ndescription = \"runner overhead and leak check\"\nrepetitions = {reps}\n\
         trace = \"none\"\n[workload]\nkind = \"bulk\"\nsize = \"100kB\"\n[link]\nrate = \"100mbit\"\n\
         rtt = \"10ms\"\n[grid]\nprotocol = [\"h1\", \"h2\", \"h3\"]\n"
    );
    quiclab_outputs::write_in_claimed(&file, text.as_bytes())?;
    let (scenario, text, plan) = super::load(&file, None, false)?;
    let before = leftovers();
    let (fds_before, rss_before) = super::own_resources();
    let t = std::time::Instant::now();
    let outcome = super::execute(
        &file,
        &scenario,
        &text,
        &plan,
        &out,
        super::Mode::default(),
        &|_| {},
    )?;
    let wall = t.elapsed().as_secs_f64();
    let after = leftovers();
    let (fds_after, rss_after) = super::own_resources();

    let store = Store::open(&out.join("results.sqlite"))?;
    let runs = store.runs()?;
    let metric = |name: &str| -> Vec<f64> {
        runs.iter()
            .map(|r| r.metrics.get(name).copied().unwrap_or(f64::NAN))
            .collect()
    };
    let (setup, teardown) = (metric("setup_ms"), metric("teardown_ms"));
    let overhead: Vec<f64> = setup.iter().zip(&teardown).map(|(s, t)| s + t).collect();
    let fds = metric("runner_fds");
    let rss = metric("runner_rss_kb");
    let ok = runs
        .iter()
        .filter(|r| r.status() == quiclab_results::Status::Ok)
        .count();
    // The first few runs warm up allocators and caches; compare the end with run 10.
    let settled = |v: &[f64]| {
        v.get(9.min(v.len().saturating_sub(1)))
            .copied()
            .unwrap_or(f64::NAN)
    };
    let leak = after.0 > before.0
        || after.1 > before.1
        || fds_after > fds_before
        || fds.last().copied().unwrap_or(0.0) > settled(&fds);
    let doc = json!({
        "leak": leak,
        "runs": runs.len(),
        "ok": ok,
        "wall_s": wall,
        "setup_ms": { "median": quantile(setup.clone(), 0.5), "p95": quantile(setup.clone(), 0.95), "max": quantile(setup, 1.0) },
        "teardown_ms": { "median": quantile(teardown.clone(), 0.5), "p95": quantile(teardown.clone(), 0.95), "max": quantile(teardown, 1.0) },
        "setup_plus_teardown_ms": { "median": quantile(overhead.clone(), 0.5), "p95": quantile(overhead.clone(), 0.95), "max": quantile(overhead, 1.0) },
        "bookkeeping_ms_per_run": outcome.bookkeeping_s * 1e3 / runs.len().max(1) as f64,
        "namespaces": { "before": before.0, "after": after.0 },
        "child_processes": { "before": before.1, "after": after.1 },
        "fds": { "before": fds_before, "run_10": settled(&fds), "last": fds.last(), "max": quantile(fds.clone(), 1.0), "after": fds_after },
        "rss_kb": { "before": rss_before, "run_10": settled(&rss), "last": rss.last(), "after": rss_after },
    });
    // The temporary directory (if any) is removed here, when `temp` drops.
    drop(temp);
    Ok(BenchRunnerReport {
        passed: !leak && ok == runs.len(),
        doc,
    })
}

/// The report as text (`quiclab bench runner` without --json).
impl std::fmt::Display for BenchRunnerReport {
    fn fmt(&self, fmt: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let doc = &self.doc;
        let f = |p: &str| doc.pointer(p).and_then(|v| v.as_f64()).unwrap_or(f64::NAN);
        write!(
            fmt,
            "{} runs ({} ok) in {:.1} s\n\
         lab set-up    median {:.1} ms, p95 {:.1}, max {:.1}\n\
         lab teardown  median {:.1} ms, p95 {:.1}, max {:.1}\n\
         set-up + teardown median {:.1} ms, p95 {:.1}, max {:.1} (target < 200 ms)\n\
         runner bookkeeping {:.2} ms per run\n\
         namespaces {} → {}, child processes {} → {}\n\
         file descriptors {} before, {} at run 10, {} at the last run, {} after\n\
         resident memory {} kB before, {} at run 10, {} at the last run\n\
         leak: {}",
            doc["runs"],
            doc["ok"],
            f("/wall_s"),
            f("/setup_ms/median"),
            f("/setup_ms/p95"),
            f("/setup_ms/max"),
            f("/teardown_ms/median"),
            f("/teardown_ms/p95"),
            f("/teardown_ms/max"),
            f("/setup_plus_teardown_ms/median"),
            f("/setup_plus_teardown_ms/p95"),
            f("/setup_plus_teardown_ms/max"),
            f("/bookkeeping_ms_per_run"),
            doc["namespaces"]["before"],
            doc["namespaces"]["after"],
            doc["child_processes"]["before"],
            doc["child_processes"]["after"],
            doc["fds"]["before"],
            doc["fds"]["run_10"],
            doc["fds"]["last"],
            doc["fds"]["after"],
            doc["rss_kb"]["before"],
            doc["rss_kb"]["run_10"],
            doc["rss_kb"]["last"],
            if doc["leak"] == true { "YES" } else { "none" }
        )
    }
}
