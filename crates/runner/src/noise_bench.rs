//! `quiclab bench noise`: do the fidelity flags let through only runs that give a quiet host's
//! answers, and flag only runs that would not?
//!
//! Each grid (`scenarios/jobs-{bulk,page,video,flows}.toml`: bulk at 10 Mbit/s with 2 % loss, a
//! page load, DASH players on NP2b, competing flows) runs one lab at a time on the quiet host,
//! again on the quiet host (the control: the metric's own noise), beside a CPU hog on every core
//! the lab may use, and under pauses of the whole lab in storms ([`PausePattern`]) — noise that
//! quiclab starts before the side and removes after it ([`quiclab_lab::noise`]). The same plan
//! gives the same keys and seeds, so each run is paired with its quiet twin; the per-pair ratio
//! of each report metric is judged by the exact interval of its median (as `bench jobs` does):
//!
//! - the runs the flags let through against quiet runs: equivalent at ±5 %?
//! - the attempts they flagged (each retried attempt and each run still flagged) against quiet
//!   runs: not equivalent? and per run, the two error rates: a let-through run whose headline
//!   ratio lies outside ±5 % (the control's rate is the floor: the metric's own noise), and a
//!   flagged attempt whose ratio lies inside it (flagged for nothing);
//! - at most 1 run in 10 still flagged after its retries.
//!
//! `OUT/equivalence-noise.json` keeps it; each side's directory keeps its results and its noise
//! process's own report (`noise.json`: pauses made, time stopped).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result, bail};
use quiclab_lab::noise::{InjectedNoise, Noise, NoiseReport, PausePattern};
use quiclab_results::{Status, Store, StoredRun};
use serde::{Deserialize, Serialize};

use crate::cost::Jobs;
use crate::equivalence::{Comparison, Equivalence, MARGIN, MetricComparison, Side, compare};

/// The benchmark's grids (scenarios/jobs-KIND.toml).
pub const GRIDS: &[&str] = &["bulk", "page", "video", "flows"];

/// The sides of a grid, quiet first. `steady` is the contrast: the pauses' stolen share spread
/// evenly over all time (the same pause, less often), with no waiting and no retries, so every
/// run meets them — what the runs the flags catch would have said.
pub const SIDES: &[&str] = &["quiet", "quiet-again", "hog", "pauses", "steady"];

/// At most this share of a grid's runs may stay flagged after their retries.
pub const MOST_STILL_FLAGGED: f64 = 0.10;

/// The default pauses: 40 ms of every 100 ms in 30 s storms, a 60 s calm between — 13 % of all
/// time stopped, within the 10–20 % that cloud VMs were seen to steal.
pub const DEFAULT_PATTERN: PausePattern = PausePattern {
    pause_ms: 40.0,
    every_ms: 100.0,
    storm_s: 30.0,
    calm_s: 60.0,
};

/// What a noisy side's noise did, kept beside its results.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SideNoise {
    pub noise: Option<Noise>,
    pub report: NoiseReport,
    /// Processes of quiclab's tree found still stopped after the noise ended (resumed then).
    pub left_stopped: usize,
    /// Time the runner waited for the host to be quiet.
    pub waited_s: f64,
}

/// One noisy side against quiet.
#[derive(Debug, Clone, Serialize)]
pub struct NoisySide {
    pub side: String,
    pub runs: Side,
    pub noise: SideNoise,
    /// Unflagged runs against their quiet twins, every report metric (headline first).
    pub let_through: Vec<MetricComparison>,
    /// Flagged attempts (retried, or still flagged) against their quiet twins, the headline.
    pub flagged: Comparison,
    /// Headline: let-through runs whose ratio lies outside 1 ± margin, of those with a twin.
    pub let_through_changed: (usize, usize),
    /// Headline: flagged attempts whose ratio lies inside 1 ± margin, of those with a twin.
    pub flagged_unchanged: (usize, usize),
    pub still_flagged_share: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct NoiseGrid {
    pub grid: String,
    pub scenario: String,
    pub headline: String,
    pub quiet: Side,
    pub sides: Vec<NoisySide>,
    pub margin: f64,
}

/// Runs the grids `only` (default [`GRIDS`]) of the checkout `lib` under the sides `sides`
/// (default [`SIDES`]; quiet always), into `out/GRID-SIDE`, and compares them. A side whose
/// directory already holds runs continues (`--resume`).
pub fn bench_noise(
    lib: &crate::reproduce::Library,
    only: &[String],
    sides: &[String],
    pattern: PausePattern,
    quick: bool,
    out: &Path,
) -> Result<Vec<NoiseGrid>> {
    pattern.check()?;
    for g in only {
        if !GRIDS.contains(&g.as_str()) {
            bail!(
                "--only {g}: no such grid; the grids are {}",
                GRIDS.join(", ")
            );
        }
    }
    for s in sides {
        if !SIDES.contains(&s.as_str()) {
            bail!(
                "--sides {s}: no such side; the sides are {}",
                SIDES.join(", ")
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
        let headline = quiclab_workload::headline_metric(scenario.kind).name;
        let mut metrics: Vec<&str> = vec![headline];
        metrics.extend(
            quiclab_model::report_metrics(scenario.kind)
                .iter()
                .map(|m| m.name)
                .filter(|m| *m != headline),
        );
        let grid_run = GridRun {
            grid,
            file: &file,
            scenario: &scenario,
            text: &text,
            plan: &plan,
            headline,
            quick,
            pattern,
            out,
        };
        let mut ran = Vec::new();
        for side in SIDES
            .iter()
            .filter(|s| **s == "quiet" || sides.is_empty() || sides.iter().any(|o| o == *s))
        {
            ran.push(grid_run.side(side)?);
        }
        let mut ran = ran.into_iter();
        let quiet = ran.next().context("the quiet side")?;
        let sides = ran
            .map(|side| against_quiet(side, &quiet.runs, &metrics, headline))
            .collect();
        let g = NoiseGrid {
            grid: grid.to_string(),
            scenario: scenario.name.clone(),
            headline: headline.to_string(),
            quiet: quiet.summary,
            sides,
            margin: MARGIN,
        };
        eprintln!("{g}");
        done.push(g);
    }
    let name = match only.is_empty() {
        true => "equivalence-noise.json".to_string(),
        false => format!("equivalence-noise-{}.json", only.join("-")),
    };
    quiclab_outputs::write_in_claimed(
        &out.join(name),
        serde_json::to_string_pretty(&done)?.as_bytes(),
    )?;
    Ok(done)
}

/// One grid of the benchmark: what each side runs.
struct GridRun<'a> {
    grid: &'a str,
    file: &'a Path,
    scenario: &'a quiclab_experiment::Scenario,
    text: &'a str,
    plan: &'a [quiclab_experiment::RunSpec],
    headline: &'a str,
    quick: bool,
    pattern: PausePattern,
    out: &'a Path,
}

/// One side as it ran: its summary, runs, flagged attempts' headlines and the noise it met.
struct SideRun {
    side: String,
    summary: Side,
    runs: Vec<quiclab_results::StoredRun>,
    flagged: Vec<(String, f64)>,
    noise: SideNoise,
}

impl GridRun<'_> {
    /// Runs the grid under `side`'s noise (continuing a side that already holds runs) into
    /// `out/GRID-SIDE`, and reads back what it stored.
    fn side(&self, side: &str) -> Result<SideRun> {
        let (grid, file, text, plan, headline, quick, pattern, out) = (
            self.grid,
            self.file,
            self.text,
            self.plan,
            self.headline,
            self.quick,
            self.pattern,
            self.out,
        );
        let exe = std::env::current_exe().context("finding quiclab's own executable")?;
        let noise = match side {
            "hog" => Some(Noise::Hog {
                cpus: quiclab_lab::host::allowed_cpus(),
            }),
            "pauses" => Some(Noise::Pauses {
                target: std::process::id(),
                pattern,
            }),
            "steady" => Some(Noise::Pauses {
                target: std::process::id(),
                pattern: pattern.spread(),
            }),
            _ => None,
        };
        let dir = quiclab_outputs::claim_subdir(out, &format!("{grid}-{side}"), "--out")?;
        let mode = crate::Mode {
            resume: crate::Resume::if_stored(&dir),
            quick,
            shard: None,
            jobs: Jobs::ONE,
            wait_out_noise: side != "steady",
            point_to_report: false,
        };
        // The steady side's runs each run once: flagged or not, as they met the noise.
        let mut scenario = self.scenario.clone();
        if side == "steady" {
            scenario.retry_flagged = Some(0);
        }
        let noise_file = dir.join("noise.json");
        let earlier: Option<SideNoise> = std::fs::read_to_string(&noise_file)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok());
        if let Some(n) = &noise {
            eprintln!("quiclab bench noise: {grid}, {side}: {}", describe(n));
        }
        let injected = noise
            .as_ref()
            .map(|n| InjectedNoise::start(&exe, n))
            .transpose()?;
        let t = std::time::Instant::now();
        let outcome = crate::execute(file, &scenario, text, plan, &dir, mode, &|_| {});
        let wall = t.elapsed().as_secs_f64();
        // The noise goes whatever the side did.
        let stopped = injected.map(|i| i.stop()).transpose();
        let outcome = outcome?;
        let (report, left_stopped) = stopped?.unwrap_or_default();
        if left_stopped > 0 {
            eprintln!(
                "quiclab bench noise: {left_stopped} process(es) were left stopped by the \
             noise; resumed"
            );
        }
        let side_noise = match (&earlier, outcome.ran) {
            // Nothing ran now: the noise that mattered is the earlier session's.
            (Some(e), 0) => e.clone(),
            _ => SideNoise {
                noise: noise.clone(),
                report,
                left_stopped,
                waited_s: outcome.waited_s,
            },
        };
        if noise.is_some() {
            quiclab_outputs::write_in_claimed(
                &noise_file,
                serde_json::to_string_pretty(&side_noise)?.as_bytes(),
            )?;
        }
        let store = Store::open(&dir.join("results.sqlite"))
            .with_context(|| format!("reading {}", dir.display()))?;
        let runs = store.runs()?;
        let attempts = store.attempts()?;
        let wall = match outcome.ran < runs.len() {
            true => f64::NAN,
            false => wall,
        };
        let summary = crate::equivalence::side(Jobs::ONE, &runs, attempts.len(), wall);
        // Every flagged attempt's headline: the retried ones and the runs still flagged.
        let flagged: Vec<(String, f64)> = attempts
            .iter()
            .filter(|a| a.status() == Status::Ok && !a.flags.is_empty())
            .map(|a| (a.run_key.clone(), a.metrics.get(headline).copied()))
            .chain(
                runs.iter()
                    .filter(|r| r.status() == Status::Ok && !r.flags.is_empty())
                    .map(|r| (r.key.clone(), r.metrics.get(headline).copied())),
            )
            .filter_map(|(k, v)| Some((k, v.filter(|v| v.is_finite())?)))
            .collect();
        Ok(SideRun {
            side: side.to_string(),
            summary,
            runs,
            flagged,
            noise: side_noise,
        })
    }
}

/// A noisy side against the quiet side's runs (`quiet`): every report metric of its unflagged
/// runs, and the headline of its flagged attempts, each against its quiet twin.
fn against_quiet(
    side: SideRun,
    quiet_runs: &[quiclab_results::StoredRun],
    metrics: &[&str],
    headline: &str,
) -> NoisySide {
    let SideRun {
        side,
        summary,
        runs,
        flagged,
        noise,
    } = side;
    let let_through = compare(metrics, quiet_runs, &runs, MARGIN);
    let twins = quiet_values(quiet_runs, headline);
    let through: Vec<f64> = runs
        .iter()
        .filter(|r| r.status() == Status::Ok && r.flags.is_empty())
        .filter_map(|r| ratio(&twins, &r.key, r.metrics.get(headline).copied()))
        .collect();
    let flagged_ratios: Vec<f64> = flagged
        .iter()
        .filter_map(|(k, v)| ratio(&twins, k, Some(*v)))
        .collect();
    let inside = |r: &f64| (r - 1.0).abs() <= MARGIN;
    NoisySide {
        still_flagged_share: match summary.runs {
            0 => 0.0,
            n => summary.flagged as f64 / n as f64,
        },
        side,
        runs: summary,
        noise,
        let_through,
        flagged: Comparison::of(&flagged_ratios, MARGIN),
        let_through_changed: (through.iter().filter(|r| !inside(r)).count(), through.len()),
        flagged_unchanged: (
            flagged_ratios.iter().filter(|r| inside(r)).count(),
            flagged_ratios.len(),
        ),
    }
}

fn describe(n: &Noise) -> String {
    match n {
        Noise::Hog { cpus } => format!(
            "a CPU hog: {} spinning thread(s) pinned to CPU(s) {:?}",
            cpus.len(),
            cpus
        ),
        Noise::Pauses { pattern, .. } => format!("pauses of the whole lab: {pattern}"),
    }
}

/// The quiet side's ok, unflagged values of `metric`, by key.
fn quiet_values(runs: &[StoredRun], metric: &str) -> BTreeMap<String, f64> {
    runs.iter()
        .filter(|r| r.status() == Status::Ok && r.flags.is_empty())
        .filter_map(|r| Some((r.key.clone(), *r.metrics.get(metric)?)))
        .filter(|(_, v)| v.is_finite())
        .collect()
}

/// `value` over its quiet twin's (two zeros: 1; a zero twin: ∞).
fn ratio(twins: &BTreeMap<String, f64>, key: &str, value: Option<f64>) -> Option<f64> {
    let (q, v) = (*twins.get(key)?, value.filter(|v| v.is_finite())?);
    Some(match (q == 0.0, v == 0.0) {
        (true, true) => 1.0,
        (true, false) => f64::INFINITY,
        _ => v / q,
    })
}

/// The command's exit status: 1 when the hog or the pauses side misses its targets (the control
/// and the steady contrast have none).
pub fn exit_code(grids: &[NoiseGrid]) -> i32 {
    i32::from(
        grids
            .iter()
            .flat_map(|g| &g.sides)
            .any(|s| matches!(s.side.as_str(), "hog" | "pauses") && !s.meets_targets()),
    )
}

impl NoisySide {
    /// The targets for a noisy side: its let-through runs equivalent to quiet ones on the
    /// headline, and at most one run in ten still flagged.
    pub fn meets_targets(&self) -> bool {
        self.let_through
            .first()
            .is_some_and(|m| m.pooled.equivalence == Equivalence::Equivalent)
            && self.still_flagged_share <= MOST_STILL_FLAGGED
    }
}

impl std::fmt::Display for NoiseGrid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let r = |v: Option<f64>| v.map_or("–".into(), |v| format!("{v:.3}"));
        let c = |c: &Comparison| {
            format!(
                "n {} median ratio {} [{}, {}] → {:?}",
                c.pairs,
                r(c.median_ratio),
                r(c.low),
                r(c.high),
                c.equivalence
            )
        };
        writeln!(
            f,
            "{} ({}), headline {}, margin ±{:.0} %:",
            self.grid,
            self.scenario,
            self.headline,
            self.margin * 100.0
        )?;
        writeln!(
            f,
            "  quiet: {} runs, {} failed, {} still flagged, {} attempts retried",
            self.quiet.runs, self.quiet.failed, self.quiet.flagged, self.quiet.retried_attempts
        )?;
        for s in &self.sides {
            let stolen = match s.noise.report.elapsed_s > 0.0 {
                true => format!(
                    ", the noise stopped the lab {:.1} % of {:.0} s ({} pauses)",
                    s.noise.report.stopped_s / s.noise.report.elapsed_s * 100.0,
                    s.noise.report.elapsed_s,
                    s.noise.report.pauses
                ),
                false => String::new(),
            };
            writeln!(
                f,
                "  {}: {} runs, {} failed, {} still flagged ({:.0} %), {} attempts retried, waited \
                 {:.0} s{stolen}{}",
                s.side,
                s.runs.runs,
                s.runs.failed,
                s.runs.flagged,
                s.still_flagged_share * 100.0,
                s.runs.retried_attempts,
                s.noise.waited_s,
                match s.side.as_str() {
                    "quiet-again" => " — the control".to_string(),
                    "steady" => " — the contrast: no waits, no retries".to_string(),
                    _ => format!(
                        " — targets {}",
                        if s.meets_targets() { "met" } else { "NOT met" }
                    ),
                }
            )?;
            for m in &s.let_through {
                writeln!(f, "    let through, {}: {}", m.metric, c(&m.pooled))?;
            }
            writeln!(
                f,
                "    flagged attempts, {}: {}",
                self.headline,
                c(&s.flagged)
            )?;
            writeln!(
                f,
                "    error rates ({}): let through but changed {} of {}; flagged but unchanged {} \
                 of {}",
                self.headline,
                s.let_through_changed.0,
                s.let_through_changed.1,
                s.flagged_unchanged.0,
                s.flagged_unchanged.1
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_to_quiet_twins() {
        let twins: BTreeMap<String, f64> = [("a".to_string(), 2.0), ("z".to_string(), 0.0)].into();
        assert_eq!(ratio(&twins, "a", Some(3.0)), Some(1.5));
        assert_eq!(ratio(&twins, "z", Some(0.0)), Some(1.0));
        assert_eq!(ratio(&twins, "z", Some(1.0)), Some(f64::INFINITY));
        assert_eq!(ratio(&twins, "b", Some(1.0)), None);
        assert_eq!(ratio(&twins, "a", Some(f64::NAN)), None);
    }

    #[test]
    fn the_default_pattern_steals_within_what_vms_were_seen_to() {
        let s = DEFAULT_PATTERN.stolen_share();
        assert!((0.10..=0.20).contains(&s), "{s}");
    }
}
