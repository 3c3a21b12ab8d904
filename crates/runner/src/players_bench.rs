//! `quiclab bench players`: do quiclab's players play as AStream, the seed's player, plays?
//!
//! For each of AStream's rules (BASIC, SARA, BBA-2) the benchmark runs two grids over the seed's
//! mean WiFi, LTE and 3G paths (docs/video.md "Networks"): quiclab's `basic`, `sara-astream` or
//! `bba2-astream` player, and AStream itself (`client = "astream"`, the checkout
//! `QUICLAB_ASTREAM` names), both on the seed's live content (bbb-2s, 160 s; `--quick`: WiFi only,
//! 60 s) over HTTP/1.1. One repetition each: these paths have no random loss, so a repetition
//! would replay the same run (and count once). quiclab's player is given the configuration the
//! AStream checkout has: its `buffer` is `NETFLIX_BUFFER_SIZE` (BBA-2) or `BASIC_THRESHOLD`
//! (BASIC) segments, and it is live (BASIC averages 2 downloads) exactly when
//! `BASIC_DELTA_COUNT` is 2 — so the two sides differ in their code, not their settings.
//!
//! Runs are paired by path and repetition. Per cell: each pair's bitrate ratio (AStream /
//! quiclab) against ±10 %, the share of segments both fetched at the same level, stalls and
//! startup on each side: a cell is within the margin or not — a comparison of two runs, not a
//! test. Per rule, the ratios of every cell pooled are also given the exact interval of their
//! median (as `bench jobs` judges its pairs), which with three paths cannot reach 95 % and so
//! stays inconclusive: the cells are the answer.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use quiclab_model::WorkloadOutput;
use quiclab_results::{Status, Store, StoredRun};
use serde::Serialize;

use crate::cost::Jobs;
use crate::equivalence::Comparison;

/// The benchmark's margin on the average bitrate.
pub const MARGIN: f64 = 0.10;

/// quiclab's rule for each of AStream's, and the AStream setting its `buffer` mirrors.
pub const RULES: &[(&str, Option<&str>)] = &[
    ("basic", Some("BASIC_THRESHOLD")),
    ("sara-astream", None),
    ("bba2-astream", Some("NETFLIX_BUFFER_SIZE")),
];

/// The seed's mean paths (Table 1).
pub const PROFILES: &[&str] = &["wifi", "lte", "3g"];

/// The live content's segment duration (bbb-2s).
const SEGMENT_S: u64 = 2;

/// One path of one rule: the pairs and what they say.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    pub profile: String,
    pub pairs: usize,
    /// Each pair's average bitrate, quiclab then AStream (Mbit/s).
    pub bitrates: Vec<(f64, f64)>,
    /// AStream / quiclab, per pair.
    pub ratios: Vec<f64>,
    /// Pairs whose ratio is within 1 ± [`MARGIN`].
    pub within: usize,
    /// Segments fetched at the same level, of those both fetched (pairs averaged).
    pub level_agreement: Option<f64>,
    /// Stalls, summed over the pairs: quiclab, AStream.
    pub stalls: (u64, u64),
    /// Median startup (s): quiclab, AStream.
    pub startup_s: (Option<f64>, Option<f64>),
    /// Runs that did not finish (either side), with why.
    pub unpaired: Vec<String>,
}

/// One rule: its cells and the pooled judgement.
#[derive(Debug, Clone, Serialize)]
pub struct RuleComparison {
    pub rule: String,
    /// quiclab's settings from AStream's configuration (`buffer = "8s"`, `live = true`).
    pub settings: Vec<String>,
    pub cells: Vec<Cell>,
    pub pooled: Comparison,
}

/// What the benchmark read of AStream.
#[derive(Debug, Clone, Serialize)]
pub struct PlayersBench {
    pub astream: String,
    pub margin: f64,
    pub duration_s: u64,
    pub rules: Vec<RuleComparison>,
}

fn scenario_text(rule: &str, client: &str, settings: &[String], quick: bool) -> String {
    let (profiles, duration, reps) = match quick {
        true => (&PROFILES[..1], 60, 1),
        false => (PROFILES, 160, 1),
    };
    let profiles: Vec<String> = profiles.iter().map(|p| format!("{p:?}")).collect();
    format!(
        "# Written by `quiclab bench players`: {rule} played by {client}.\n\
         name = \"bench-players-{rule}-{client}\"\n\
         description = \"quiclab's players beside AStream: {rule} by {client}, the seed's paths, live bbb-2s\"\n\
         repetitions = {reps}\n\
         seed = 58\n\
         order = \"interleaved\"\n\n\
         [workload]\n\
         kind = \"video\"\n\
         content = \"bbb-2s\"\n\
         duration = \"{duration}s\"\n\
         players = \"h1\"\n\
         abr = \"{rule}\"\n\
         {}\n\n\
         [protocol]\n\
         client = \"{client}\"\n\n\
         [grid]\n\
         profile = [{}]\n",
        settings.join("\n"),
        profiles.join(", ")
    )
}

/// quiclab's keys that give its `rule` the configuration of `astream`.
fn mirrored_settings(
    astream: &quiclab_peers::astream::Astream,
    setting: Option<&str>,
) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(n) = setting.and_then(|s| astream.setting(s)) {
        out.push(format!("buffer = \"{}s\"", n * SEGMENT_S));
    }
    let live = astream.setting("BASIC_DELTA_COUNT") == Some(2);
    out.push(format!("live = {live}"));
    out
}

/// Runs the benchmark into `out` (a directory it claims; an interrupted benchmark continues
/// where it stopped) and writes `out/players.json`.
pub fn bench_players(quick: bool, jobs: Option<Jobs>, out: &Path) -> Result<PlayersBench> {
    let astream = quiclab_peers::astream::find()?;
    quiclab_outputs::claim_dir(out, "--out")?;
    let mut rules = Vec::new();
    for &(rule, setting) in RULES {
        let settings = mirrored_settings(&astream, setting);
        let mut sides: Vec<Vec<StoredRun>> = Vec::new();
        for (client, keys) in [("quiclab", settings.clone()), ("astream", Vec::new())] {
            // AStream reads its own configuration; only `live` (the content's form) is a key it shares.
            let keys: Vec<String> = match client {
                "astream" => settings
                    .iter()
                    .filter(|s| s.starts_with("live"))
                    .cloned()
                    .collect(),
                _ => keys,
            };
            let dir: PathBuf =
                quiclab_outputs::claim_subdir(out, &format!("{rule}-{client}"), "--out")?;
            let file = dir.join("scenario.toml");
            if !file.is_file() {
                quiclab_outputs::write_in_claimed(
                    &file,
                    scenario_text(rule, client, &keys, quick).as_bytes(),
                )?;
            }
            let (scenario, text) = crate::load_scenario(&file, None, false)?;
            let plan = crate::prepare_plan(&file, &scenario)?;
            let mode = crate::Mode {
                resume: crate::Resume::if_stored(&dir),
                jobs: jobs.unwrap_or(Jobs::ONE),
                ..Default::default()
            };
            crate::execute(&file, &scenario, &text, &plan, &dir, mode, &|_| {})?;
            let store = Store::open(&dir.join("results.sqlite"))
                .with_context(|| format!("reading {}", dir.display()))?;
            sides.push(store.runs()?);
        }
        let c = compare_rule(rule, settings, &sides[0], &sides[1]);
        eprintln!("{c}");
        rules.push(c);
    }
    let bench = PlayersBench {
        astream: astream.version.clone(),
        margin: MARGIN,
        duration_s: if quick { 60 } else { 160 },
        rules,
    };
    quiclab_outputs::write_in_claimed(
        &out.join("players.json"),
        serde_json::to_string_pretty(&bench)?.as_bytes(),
    )?;
    Ok(bench)
}

/// A finished run's first player: its average bitrate, levels by segment, stalls and startup.
struct Played {
    bitrate: f64,
    levels: BTreeMap<usize, usize>,
    stalls: u64,
    startup_s: Option<f64>,
}

fn played(r: &StoredRun) -> Result<Played, String> {
    let why = || r.reason().unwrap_or_else(|| "no result".into());
    if r.status() != Status::Ok {
        return Err(why());
    }
    let Some(WorkloadOutput::Video(v)) = r.document.result() else {
        return Err(why());
    };
    let p = v.players.first().ok_or("no player")?;
    let bitrate = p.metrics.avg_bitrate_mbps.ok_or("no segment downloaded")?;
    let mut levels = BTreeMap::new();
    for s in p.segment_log.iter().filter(|s| !s.discarded) {
        levels.entry(s.segment).or_insert(s.level);
    }
    Ok(Played {
        bitrate,
        levels,
        stalls: p.metrics.stalls,
        startup_s: p.metrics.startup_s,
    })
}

/// Pairs quiclab's and AStream's runs of `rule` by path and repetition, and judges them.
pub fn compare_rule(
    rule: &str,
    settings: Vec<String>,
    quiclab: &[StoredRun],
    astream: &[StoredRun],
) -> RuleComparison {
    let key = |r: &StoredRun| {
        (
            r.params.get("profile").cloned().unwrap_or_default(),
            r.repetition,
        )
    };
    let twins: BTreeMap<(String, u32), &StoredRun> = astream.iter().map(|r| (key(r), r)).collect();
    let mut cells: BTreeMap<String, Cell> = BTreeMap::new();
    let mut startups: BTreeMap<String, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
    let mut agreements: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut pooled = Vec::new();
    for q in quiclab {
        let (profile, rep) = key(q);
        let cell = cells.entry(profile.clone()).or_insert_with(|| Cell {
            profile: profile.clone(),
            pairs: 0,
            bitrates: Vec::new(),
            ratios: Vec::new(),
            within: 0,
            level_agreement: None,
            stalls: (0, 0),
            startup_s: (None, None),
            unpaired: Vec::new(),
        });
        let a = twins.get(&(profile.clone(), rep));
        let (q, a) = match (played(q), a.map(|a| played(a))) {
            (Ok(q), Some(Ok(a))) => (q, a),
            (Err(e), _) => {
                cell.unpaired.push(format!("quiclab rep {rep}: {e}"));
                continue;
            }
            (_, Some(Err(e))) => {
                cell.unpaired.push(format!("astream rep {rep}: {e}"));
                continue;
            }
            (_, None) => {
                cell.unpaired.push(format!("astream rep {rep}: not run"));
                continue;
            }
        };
        let ratio = a.bitrate / q.bitrate;
        cell.pairs += 1;
        cell.bitrates.push((q.bitrate, a.bitrate));
        cell.ratios.push(ratio);
        if (ratio - 1.0).abs() <= MARGIN {
            cell.within += 1;
        }
        pooled.push(ratio);
        let common: Vec<(&usize, &usize)> = q
            .levels
            .iter()
            .filter_map(|(s, l)| a.levels.get(s).map(|m| (l, m)))
            .collect();
        if !common.is_empty() {
            let same = common.iter().filter(|(l, m)| l == m).count();
            agreements
                .entry(profile.clone())
                .or_default()
                .push(same as f64 / common.len() as f64);
        }
        cell.stalls.0 += q.stalls;
        cell.stalls.1 += a.stalls;
        let s = startups.entry(profile).or_default();
        s.0.extend(q.startup_s);
        s.1.extend(a.startup_s);
    }
    for (profile, cell) in cells.iter_mut() {
        if let Some(v) = agreements.get(profile) {
            cell.level_agreement = Some(v.iter().sum::<f64>() / v.len() as f64);
        }
        if let Some((q, a)) = startups.get(profile) {
            cell.startup_s = (
                quiclab_experiment::stats::median(q),
                quiclab_experiment::stats::median(a),
            );
        }
    }
    let mut cells: Vec<Cell> = cells.into_values().collect();
    cells.sort_by_key(|c| {
        PROFILES
            .iter()
            .position(|p| *p == c.profile)
            .unwrap_or(usize::MAX)
    });
    RuleComparison {
        rule: rule.to_string(),
        settings,
        cells,
        pooled: Comparison::of(&pooled, MARGIN),
    }
}

impl std::fmt::Display for RuleComparison {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let r = |v: Option<f64>| v.map_or("–".into(), |v| format!("{v:.3}"));
        writeln!(
            f,
            "{} ({}): pooled AStream/quiclab bitrate median {} [{}, {}] over {} pairs: {:?} at ±{:.0} %",
            self.rule,
            self.settings.join(", "),
            r(self.pooled.median_ratio),
            r(self.pooled.low),
            r(self.pooled.high),
            self.pooled.pairs,
            self.pooled.equivalence,
            MARGIN * 100.0
        )?;
        for c in &self.cells {
            let rates: Vec<String> = c
                .bitrates
                .iter()
                .map(|(q, a)| format!("{q:.3}/{a:.3}"))
                .collect();
            writeln!(
                f,
                "  {:<5} {} pair(s), Mbit/s quiclab/AStream {}, within ±10 %: {} of {}, same level {}, stalls {}/{}, startup {}/{} s{}",
                c.profile,
                c.pairs,
                rates.join(" "),
                c.within,
                c.pairs,
                c.level_agreement
                    .map_or("–".into(), |v| format!("{:.0} %", v * 100.0)),
                c.stalls.0,
                c.stalls.1,
                r(c.startup_s.0),
                r(c.startup_s.1),
                if c.unpaired.is_empty() {
                    String::new()
                } else {
                    format!("; unpaired: {}", c.unpaired.join("; "))
                }
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quiclab_model::RunDocument;
    use quiclab_model::run::video::{VideoClientReport, VideoRun};

    /// A stored video run on `profile`, repetition `rep`, whose player averaged `mbps` and
    /// fetched `levels` (a recorded run's result, its figures replaced).
    fn run(profile: &str, rep: u32, mbps: f64, levels: &[usize], stalls: u64) -> StoredRun {
        let video: VideoRun = serde_json::from_str(include_str!(
            "../../model/testdata/video-run-h3-h1-12s.json"
        ))
        .unwrap();
        let client: VideoClientReport = serde_json::from_str(include_str!(
            "../../model/testdata/video-report-h3-h1-12s.json"
        ))
        .unwrap();
        let spec = quiclab_link::spec::LinkSpec::default();
        let mut r = video.assemble(&client, None, None, &spec, 0.0, client.origin_ns);
        let p = &mut r.players[0];
        p.metrics.avg_bitrate_mbps = Some(mbps);
        p.metrics.stalls = stalls;
        let template = p.segment_log[0].clone();
        p.segment_log = levels
            .iter()
            .enumerate()
            .map(|(i, &level)| {
                let mut s = template.clone();
                (s.segment, s.level) = (i, level);
                s
            })
            .collect();
        let mut s = StoredRun::example(&format!("{profile}-{rep}"), "h1", rep, Status::Ok);
        s.params.insert("profile".into(), profile.into());
        s.document = RunDocument::Finished {
            result: WorkloadOutput::Video(r),
        };
        s
    }

    #[test]
    fn pairs_are_judged_per_path_and_pooled() {
        let quiclab = vec![
            run("wifi", 1, 3.0, &[0, 1, 2, 3], 0),
            run("wifi", 2, 3.0, &[0, 1, 2, 3], 0),
            run("3g", 1, 1.0, &[0, 1], 1),
            run("lte", 1, 2.0, &[0, 1], 0),
        ];
        let mut astream = vec![
            run("wifi", 1, 3.2, &[0, 1, 2, 2], 0),
            run("wifi", 2, 3.1, &[0, 1, 2, 3, 3], 0),
            run("3g", 1, 1.5, &[0, 2], 2),
        ];
        let mut failed = StoredRun::example("lte-1", "h1", 1, Status::Failed);
        failed.params.insert("profile".into(), "lte".into());
        astream.push(failed);
        let c = compare_rule("sara-astream", vec![], &quiclab, &astream);
        let profiles: Vec<&str> = c.cells.iter().map(|c| c.profile.as_str()).collect();
        assert_eq!(profiles, ["wifi", "lte", "3g"]);
        let wifi = &c.cells[0];
        assert_eq!((wifi.pairs, wifi.within), (2, 2));
        // 3 of 4 segments at the same level, then 4 of 4 (the fifth only AStream fetched).
        assert!((wifi.level_agreement.unwrap() - 0.875).abs() < 1e-12);
        let lte = &c.cells[1];
        assert_eq!(lte.pairs, 0);
        assert!(
            lte.unpaired[0].contains("astream rep 1"),
            "{:?}",
            lte.unpaired
        );
        let g3 = &c.cells[2];
        assert_eq!((g3.pairs, g3.within, g3.stalls), (1, 0, (1, 2)));
        assert!((g3.ratios[0] - 1.5).abs() < 1e-12);
        // Three pairs pooled: too few for a 95 % interval of the median.
        assert_eq!(c.pooled.pairs, 3);
        assert_eq!(
            c.pooled.equivalence,
            crate::equivalence::Equivalence::Inconclusive
        );
        let text = c.to_string();
        assert!(
            text.contains("wifi  2 pair(s)") && text.contains("unpaired"),
            "{text}"
        );
    }

    #[test]
    fn the_scenarios_quiclab_runs_carry_astreams_configuration() {
        let a = quiclab_peers::astream::Astream {
            client: "x".into(),
            python: "y".into(),
            version: String::new(),
            config: vec![
                ("BASIC_THRESHOLD".into(), "10".into()),
                ("BASIC_DELTA_COUNT".into(), "5".into()),
                ("NETFLIX_BUFFER_SIZE".into(), "4".into()),
            ],
        };
        let s = mirrored_settings(&a, Some("NETFLIX_BUFFER_SIZE"));
        assert_eq!(s, ["buffer = \"8s\"", "live = false"]);
        let text = scenario_text("bba2-astream", "quiclab", &s, true);
        let scenario = quiclab_experiment::parse(&text, "bench").unwrap();
        assert_eq!(quiclab_experiment::expand(&scenario).len(), 1);
        let full =
            quiclab_experiment::parse(&scenario_text("basic", "astream", &[], false), "b").unwrap();
        assert_eq!(quiclab_experiment::expand(&full).len(), 3);
    }
}
