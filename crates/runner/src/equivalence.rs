//! `quiclab bench jobs`: do labs side by side give the answers that one lab at a time gives?
//!
//! Each of the benchmark's grids (`scenarios/jobs-*.toml`: bulk at 10 Mbit/s with 2 % loss,
//! page loads by the built-in loader and by Chromium, DASH players on NP2b, competing flows) runs
//! twice into its own results directory: one run at a time, then at the concurrency under test
//! (`--jobs auto` by default). The same plan gives the same run keys and seeds, so every run is
//! paired with its twin; the per-pair ratio (side by side / alone) of the grid's headline metric
//! is judged by the exact interval of its median (quiclab-verdict's, as findings are):
//! equivalent when the interval lies inside 1 ± the margin, not equivalent when it lies outside,
//! else inconclusive — per setting and over the whole grid, for each of the kind's report
//! metrics. Beside it: the fidelity flags, the emulator's release lateness p99 and the wall time
//! of each side. `OUT/equivalence-jobs-J.json` keeps the comparison.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use quiclab_model::runner_metrics::LABS_IN_FLIGHT;
use quiclab_results::{Status, Store, StoredRun};
use serde::Serialize;

use crate::cost::Jobs;
use quiclab_experiment::stats::median;

/// The equivalence margin: a ratio of 0.95 to 1.05 is "the same answer".
pub const MARGIN: f64 = 0.05;

/// The level of the median's interval.
pub const LEVEL: f64 = 0.95;

/// The benchmark's grids, by the kind they exercise (scenarios/jobs-KIND.toml).
pub const GRIDS: &[&str] = &["bulk", "page", "chromium", "video", "flows"];

/// An interval's reading against the margin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Equivalence {
    /// The median ratio's interval lies inside 1 ± margin.
    Equivalent,
    /// It lies wholly outside (at the level: too few pairs are never "not equivalent" either).
    NotEquivalent,
    /// It straddles an edge of the margin (or there are no pairs).
    Inconclusive,
}

/// The per-pair ratios of some pairs, judged.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub pairs: usize,
    pub median_ratio: Option<f64>,
    pub low: Option<f64>,
    pub high: Option<f64>,
    /// The interval's coverage (below [`LEVEL`] when there are too few pairs for it).
    pub level: Option<f64>,
    pub equivalence: Equivalence,
}

impl Comparison {
    pub fn of(ratios: &[f64], margin: f64) -> Comparison {
        let Some(i) = quiclab_verdict::rules::median_interval(ratios, LEVEL) else {
            return Comparison {
                pairs: 0,
                median_ratio: None,
                low: None,
                high: None,
                level: None,
                equivalence: Equivalence::Inconclusive,
            };
        };
        let (lo, hi) = (1.0 - margin, 1.0 + margin);
        let equivalence = if i.low >= lo && i.high <= hi && i.reaches(LEVEL) {
            Equivalence::Equivalent
        } else if (i.high < lo || i.low > hi) && i.reaches(LEVEL) {
            Equivalence::NotEquivalent
        } else {
            Equivalence::Inconclusive
        };
        Comparison {
            pairs: i.n,
            median_ratio: Some(i.median),
            low: Some(i.low),
            high: Some(i.high),
            level: Some(i.level),
            equivalence,
        }
    }
}

/// One side of a grid: how it went.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Side {
    pub jobs: String,
    pub runs: usize,
    pub failed: usize,
    /// Runs still flagged after their retries, and flagged attempts run again.
    pub flagged: usize,
    pub retried_attempts: usize,
    pub lateness_p99_us_median: Option<f64>,
    pub lateness_p99_us_max: Option<f64>,
    /// The most labs in flight at once.
    pub most_labs: Option<f64>,
    pub wall_s: f64,
}

/// One metric of a grid, alone against side by side.
#[derive(Debug, Clone, Serialize)]
pub struct MetricComparison {
    pub metric: String,
    /// Over every pair of the grid.
    pub pooled: Comparison,
    /// Per setting and contender (their label), and the median of each side there.
    pub settings: Vec<(String, Option<f64>, Option<f64>, Comparison)>,
}

/// One grid, alone against side by side, and alone against alone again (the control: how far
/// the same plan's answers move between two runs of it without sharing, the metric's own noise).
#[derive(Debug, Clone, Serialize)]
pub struct GridComparison {
    pub grid: String,
    pub scenario: String,
    pub alone: Side,
    pub again: Side,
    pub shared: Side,
    /// Side by side against alone: the kind's report metrics, the headline first.
    pub metrics: Vec<MetricComparison>,
    /// Alone again against alone, the same metrics.
    pub control: Vec<MetricComparison>,
    pub margin: f64,
}

pub(crate) fn side(jobs: Jobs, runs: &[StoredRun], retried: usize, wall_s: f64) -> Side {
    let late: Vec<f64> = runs
        .iter()
        .filter_map(|r| r.metrics.get("emu_lateness_p99_us").copied())
        .filter(|v| v.is_finite())
        .collect();
    Side {
        jobs: jobs.to_string(),
        runs: runs.len(),
        failed: runs.iter().filter(|r| r.status() != Status::Ok).count(),
        flagged: runs.iter().filter(|r| !r.flags.is_empty()).count(),
        retried_attempts: retried,
        lateness_p99_us_max: late.iter().copied().reduce(f64::max),
        lateness_p99_us_median: median(&late),
        most_labs: runs
            .iter()
            .filter_map(|r| r.metrics.get(LABS_IN_FLIGHT.name).copied())
            .reduce(f64::max),
        wall_s,
    }
}

/// One setting and contender of a grid: the values alone, the other side's, and the pairs'
/// ratios.
type Cell = (Vec<f64>, Vec<f64>, Vec<f64>);

/// The wall time of a side from its runs: the first start to the last end.
fn whole_wall_s(runs: &[StoredRun]) -> f64 {
    let start = runs
        .iter()
        .map(|r| r.started_unix)
        .fold(f64::INFINITY, f64::min);
    let end = runs
        .iter()
        .map(|r| r.started_unix + r.duration_s)
        .fold(f64::NEG_INFINITY, f64::max);
    (end - start).max(0.0)
}

/// Pairs `alone`'s and `other`'s runs by key (both ok and unflagged, both with the metric) and
/// judges the ratios other / alone of each of `metrics`, per setting and contender, and pooled. Two zeros are
/// the same answer (ratio 1); a zero against a non-zero is as far apart as can be (ratio ∞).
pub fn compare(
    metrics: &[&str],
    alone: &[StoredRun],
    other: &[StoredRun],
    margin: f64,
) -> Vec<MetricComparison> {
    let twins: BTreeMap<&str, &StoredRun> = other.iter().map(|r| (r.key.as_str(), r)).collect();
    metrics
        .iter()
        .map(|metric| {
            let value = |r: &StoredRun| {
                (r.status() == Status::Ok && r.flags.is_empty())
                    .then(|| r.metrics.get(*metric).copied())
                    .flatten()
                    .filter(|v| v.is_finite())
            };
            // A setting and a contender: the cell whose median a report shows.
            let mut cells: BTreeMap<(usize, String), Cell> = BTreeMap::new();
            let mut pooled = Vec::new();
            for a in alone {
                let label = match a.setting_label.as_str() {
                    "" | "all runs" => a.contender.clone(),
                    l => format!("{l} · {}", a.contender),
                };
                let cell = cells.entry((a.setting, label)).or_default();
                let b = twins.get(a.key.as_str()).and_then(|b| value(b));
                let a = value(a);
                cell.0.extend(a);
                cell.1.extend(b);
                if let (Some(x), Some(y)) = (a, b) {
                    let ratio = match (x == 0.0, y == 0.0) {
                        (true, true) => 1.0,
                        (true, false) => f64::INFINITY,
                        _ => y / x,
                    };
                    cell.2.push(ratio);
                    pooled.push(ratio);
                }
            }
            MetricComparison {
                metric: metric.to_string(),
                pooled: Comparison::of(&pooled, margin),
                settings: cells
                    .into_iter()
                    .map(|((_, label), (a, b, r))| {
                        (label, median(&a), median(&b), Comparison::of(&r, margin))
                    })
                    .collect(),
            }
        })
        .collect()
}

/// Runs the grids `only` (default [`GRIDS`]) of the checkout `lib`, alone and at `jobs`, into
/// `out/GRID-alone` and `out/GRID-jobs-J`, and compares them. A grid whose directories already
/// hold its runs continues (`--resume`), so an interrupted benchmark loses nothing.
pub fn bench_jobs(
    lib: &crate::reproduce::Library,
    only: &[String],
    jobs: Option<Jobs>,
    quick: bool,
    out: &Path,
) -> Result<Vec<GridComparison>> {
    // Without --jobs: as many as the machine admits (what the benchmark is for).
    let jobs = jobs.unwrap_or(Jobs::Auto);
    if jobs == Jobs::ONE {
        bail!("--jobs 1: the benchmark compares one lab at a time with more; give N > 1 or auto");
    }
    for g in only {
        if !GRIDS.contains(&g.as_str()) {
            bail!(
                "--only {g}: no such grid; the grids are {}",
                GRIDS.join(", ")
            );
        }
    }
    quiclab_outputs::claim_dir(out, "--out")?;
    let mut done = Vec::new();
    for grid in GRIDS
        .iter()
        .filter(|g| only.is_empty() || only.iter().any(|o| o == *g))
    {
        let file = lib.scenario_path(&format!("jobs-{grid}"));
        let (scenario, text) = crate::load_scenario(&file, None, quick)?;
        let plan = crate::prepare_plan(&file, &scenario)?;
        let metrics: Vec<&str> = quiclab_model::report_metrics(scenario.kind)
            .iter()
            .map(|m| m.name)
            .collect();
        let mut sides = Vec::new();
        for (j, name) in [
            (Jobs::ONE, "alone".to_string()),
            (Jobs::ONE, "alone-again".to_string()),
            (jobs, format!("jobs-{jobs}")),
        ] {
            let dir: PathBuf =
                quiclab_outputs::claim_subdir(out, &format!("{grid}-{name}"), "--out")?;
            let mode = crate::Mode {
                resume: crate::Resume::if_stored(&dir),
                quick,
                shard: None,
                jobs: j,
                ..Default::default()
            };
            let t = std::time::Instant::now();
            let outcome = crate::execute(&file, &scenario, &text, &plan, &dir, mode, &|_| {})?;
            let wall = t.elapsed().as_secs_f64();
            let store = Store::open(&dir.join("results.sqlite"))
                .with_context(|| format!("reading {}", dir.display()))?;
            let runs = store.runs()?;
            // A resumed side ran only its missing runs: its wall time is the session's record
            // of the first, whole one.
            let wall = match outcome.ran < runs.len() {
                true => whole_wall_s(&runs),
                false => wall,
            };
            sides.push((side(j, &runs, store.attempts()?.len(), wall), runs));
        }
        let [alone, again, shared]: [(Side, Vec<StoredRun>); 3] = sides
            .try_into()
            .map_err(|_| anyhow::anyhow!("three sides"))?;
        let c = GridComparison {
            grid: grid.to_string(),
            scenario: scenario.name.clone(),
            metrics: compare(&metrics, &alone.1, &shared.1, MARGIN),
            control: compare(&metrics, &alone.1, &again.1, MARGIN),
            alone: alone.0,
            again: again.0,
            shared: shared.0,
            margin: MARGIN,
        };
        eprintln!("{c}");
        done.push(c);
    }
    let json = serde_json::to_string_pretty(&done)?;
    // One file per concurrency (and grid subset), so comparisons at several sit side by side.
    let name = match only.is_empty() {
        true => format!("equivalence-jobs-{jobs}.json"),
        false => format!("equivalence-jobs-{jobs}-{}.json", only.join("-")),
    };
    quiclab_outputs::write_in_claimed(&out.join(name), json.as_bytes())?;
    Ok(done)
}

impl std::fmt::Display for GridComparison {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let r = |v: Option<f64>| v.map_or("–".into(), |v| format!("{v:.3}"));
        let side = |s: &Side| {
            format!(
                "--jobs {:<4} {:>3} runs, {} failed, {} flagged ({} attempts retried), lateness p99 \
                 median {} µs max {} µs, at most {} labs at once, {}",
                s.jobs,
                s.runs,
                s.failed,
                s.flagged,
                s.retried_attempts,
                s.lateness_p99_us_median
                    .map_or("–".into(), |v| format!("{v:.0}")),
                s.lateness_p99_us_max
                    .map_or("–".into(), |v| format!("{v:.0}")),
                s.most_labs.map_or("–".into(), |v| format!("{v:.0}")),
                if s.wall_s.is_finite() {
                    crate::format_duration(s.wall_s)
                } else {
                    "resumed (no wall time)".into()
                }
            )
        };
        writeln!(f, "{} ({}):", self.grid, self.scenario)?;
        writeln!(f, "  {} (alone)", side(&self.alone))?;
        writeln!(f, "  {} (alone again: the control)", side(&self.again))?;
        writeln!(f, "  {} (side by side)", side(&self.shared))?;
        let pooled = |c: &Comparison| {
            format!(
                "n {} ratio {} [{}, {}] → {:?}",
                c.pairs,
                r(c.median_ratio),
                r(c.low),
                r(c.high),
                c.equivalence
            )
        };
        for (m, control) in self.metrics.iter().zip(&self.control) {
            writeln!(
                f,
                "  {} (margin ±{:.0} %): shared/alone {}; again/alone {}",
                m.metric,
                self.margin * 100.0,
                pooled(&m.pooled),
                pooled(&control.pooled),
            )?;
            for ((label, a, b, c), (_, _, again, cc)) in m.settings.iter().zip(&control.settings) {
                writeln!(
                    f,
                    "    {label}: median {} alone, {} again, {} shared; shared/alone {}; \
                     again/alone {}",
                    r(*a),
                    r(*again),
                    r(*b),
                    pooled(c),
                    pooled(cc)
                )?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interval_inside_the_margin_is_equivalent_outside_it_is_not() {
        let same = [0.99, 1.0, 1.01, 1.0, 0.995, 1.005, 1.0, 1.002];
        assert_eq!(
            Comparison::of(&same, 0.05).equivalence,
            Equivalence::Equivalent
        );
        let slower = [1.2, 1.25, 1.22, 1.3, 1.21, 1.24, 1.26, 1.23];
        assert_eq!(
            Comparison::of(&slower, 0.05).equivalence,
            Equivalence::NotEquivalent
        );
        let wide = [0.8, 1.2, 1.0, 0.9, 1.1, 1.05, 0.95, 1.0];
        assert_eq!(
            Comparison::of(&wide, 0.05).equivalence,
            Equivalence::Inconclusive
        );
        // Too few pairs for a 95 % interval: never "equivalent", however close.
        let few = [1.0, 1.0, 1.0];
        assert_eq!(
            Comparison::of(&few, 0.05).equivalence,
            Equivalence::Inconclusive
        );
        assert_eq!(Comparison::of(&[], 0.05).pairs, 0);
        // Nor "not equivalent" from one far-off pair.
        assert_eq!(
            Comparison::of(&[1.3], 0.05).equivalence,
            Equivalence::Inconclusive
        );
    }
}
