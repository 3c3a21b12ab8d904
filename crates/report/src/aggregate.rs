//! Sans-IO aggregation: runs → per (metric, setting, protocol) samples,
//! summaries, improvements over the baseline and wins verdicts.
//!
//! Exclusion policy, applied per run and per metric, first match wins:
//! 1. failed or timed-out runs are always excluded from means, CIs and wins; a timed-out run
//!    is censored data for completion-time metrics (it took at least its limit), so those cells
//!    also get a median that counts it ([`CensoredMedian`]);
//! 2. flagged runs (fidelity out of tolerance) are excluded unless
//!    `include_flagged`;
//! 3. runs without a finite value for the metric contribute nothing.
//!
//! Each cell counts its exclusions by reason, so the report can say exactly
//! what every statistic left out.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use quiclab_experiment::stats::{self, Paired, Summary, Winners};

use crate::{MetricInfo, ReportInput, ReportOptions, RunRecord, RunStatus};

/// Runs of one (setting, protocol) that a statistic left out, by reason.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Excluded {
    /// Failed.
    pub failed: usize,
    /// Timed out (censored: took at least the time limit).
    pub timeout: usize,
    /// Flagged and `include_flagged` is off.
    pub flagged: usize,
    /// Usable run without a finite value for the metric.
    pub missing: usize,
}

impl Excluded {
    pub fn total(&self) -> usize {
        self.failed + self.timeout + self.flagged + self.missing
    }
}

/// Sample of one metric for one (setting, protocol).
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// Values in execution order.
    pub values: Vec<f64>,
    /// The repetition of each value (parallel to `values`).
    pub repetitions: Vec<u32>,
    pub summary: Option<Summary>,
    pub excluded: Excluded,
    /// Completion-time metrics with timed-out runs: the median over finished and timed-out runs.
    pub censored_median: Option<CensoredMedian>,
}

/// The median of a completion time over finished runs and timed-out ones, a timed-out run
/// counting as longer than every finished run (it ran until its limit, and finished runs ended
/// within theirs). It stays exact while fewer than half the runs timed out.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum CensoredMedian {
    Value(f64),
    /// The median is at least this value (the shortest time limit when at least half the runs
    /// timed out).
    AtLeast(f64),
}

impl CensoredMedian {
    /// `finished`: the finished runs' values; `limits`: each timed-out run's limit in the
    /// metric's unit.
    pub fn of(finished: &[f64], limits: &[f64]) -> Option<CensoredMedian> {
        let n = finished.len() + limits.len();
        if n == 0 || limits.is_empty() {
            return None;
        }
        let mut v = finished.to_vec();
        v.sort_by(f64::total_cmp);
        let (lo, hi) = ((n - 1) / 2, n / 2);
        let limit = limits.iter().copied().fold(f64::INFINITY, f64::min);
        Some(if hi < v.len() {
            CensoredMedian::Value((v[lo] + v[hi]) / 2.0)
        } else if lo < v.len() {
            // Even n: the mean of a finished value and a censored one (≥ the shortest limit).
            CensoredMedian::AtLeast((v[lo] + limit.max(v[lo])) / 2.0)
        } else {
            CensoredMedian::AtLeast(limit)
        })
    }
}

/// Per setting: how many runs needed more than one attempt because they were flagged, and how
/// many are still flagged after their last.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RetryRow {
    /// Runs whose used record is a later attempt.
    pub retried_runs: usize,
    /// Attempts run again in all (Σ attempt − 1).
    pub extra_attempts: usize,
    /// Runs flagged in their last attempt.
    pub still_flagged: usize,
    /// Runs that timed out.
    pub timed_out: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Setting {
    /// [`RunRecord::setting`].
    pub index: usize,
    pub label: String,
}

/// One metric over all settings and protocols.
#[derive(Debug, Clone)]
pub struct MetricTable {
    pub info: MetricInfo,
    /// `cells[s][p]`: setting `s` (position in [`Aggregate::settings`]) and
    /// protocol `p` (position in [`Aggregate::protocols`]).
    pub cells: Vec<Vec<Cell>>,
    /// `improvements[s][p]` in percent, positive = better than the baseline,
    /// for every protocol (the baseline's own entry is `None`); `None` where
    /// a mean is missing or the baseline mean is zero. Empty when the
    /// baseline protocol has no runs at all.
    pub improvements: Vec<Vec<Option<f64>>>,
    /// `paired[s][p]`: protocol `p` against the baseline repetition by repetition (pairs where
    /// both runs have a value); same shape and emptiness rules as `improvements`.
    pub paired: Vec<Vec<Option<Paired>>>,
}

impl MetricTable {
    /// Whether any cell has at least one value.
    pub fn has_values(&self) -> bool {
        self.cells.iter().flatten().any(|c| !c.values.is_empty())
    }
}

/// Wins verdict of one setting on the primary metric.
#[derive(Debug, Clone, PartialEq)]
pub struct WinRow {
    pub verdict: Winners,
    /// Protocols that had values and so took part in the comparison.
    pub compared: Vec<String>,
    /// The fewest values a compared protocol had: below
    /// [`quiclab_experiment::stats::WINS_MIN_RUNS`] the rule is not applied.
    pub fewest: usize,
}

impl WinRow {
    /// Whether the rule was applied: two protocols or more, each with the rule's minimum of runs.
    pub fn applied(&self) -> bool {
        self.compared.len() >= 2 && self.fewest >= quiclab_experiment::stats::WINS_MIN_RUNS
    }

    /// "h3", "h2+h3", "equal", "too few runs (n = 2)" below the rule's minimum, or "n/a" when
    /// fewer than two protocols had values (then there was nothing to compare).
    pub fn label(&self) -> String {
        if self.compared.len() < 2 {
            return "n/a".to_string();
        }
        if !self.applied() {
            return format!("too few runs (n = {})", self.fewest);
        }
        match &self.verdict {
            Winners::Best(names) => names.join("+"),
            Winners::Equal => "equal".to_string(),
        }
    }
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Counts {
    pub planned: usize,
    /// Runs present in the input (finished, whatever their status).
    pub finished: usize,
    pub ok: usize,
    pub failed: usize,
    pub timeout: usize,
    /// Runs with at least one flag, any status.
    pub flagged: usize,
    /// Ok runs that enter the statistics (flagged ones only with
    /// `include_flagged`).
    pub used: usize,
}

#[derive(Debug, Clone)]
pub struct Aggregate {
    /// h1, h2, h3 first, then others by name.
    pub protocols: Vec<String>,
    /// Position of the baseline in `protocols`, if it has runs.
    pub baseline: Option<usize>,
    /// By setting index.
    pub settings: Vec<Setting>,
    pub counts: Counts,
    /// Metrics present in at least one run, in option order.
    pub metrics: Vec<MetricTable>,
    /// Position of the primary metric in `metrics`.
    pub primary: Option<usize>,
    /// Per setting, on the primary metric; empty without a primary metric.
    pub wins: Vec<WinRow>,
    /// Positions in `input.runs` of failed, timed-out or flagged runs, in
    /// execution order.
    pub problem_runs: Vec<usize>,
    /// By setting (parallel to `settings`).
    pub retries: Vec<RetryRow>,
    pub notes: Vec<String>,
}

/// Sort key that puts the HTTP versions first, in version order.
fn protocol_cmp(a: &str, b: &str) -> Ordering {
    let rank = |p: &str| match p {
        "h1" => 0,
        "h2" => 1,
        "h3" => 2,
        _ => 3,
    };
    rank(a).cmp(&rank(b)).then_with(|| a.cmp(b))
}

/// Why a run does not enter the statistics, if it doesn't.
enum Exclusion {
    Failed,
    Timeout,
    Flagged,
}

fn exclusion(run: &RunRecord, include_flagged: bool) -> Option<Exclusion> {
    match run.status {
        RunStatus::Failed => Some(Exclusion::Failed),
        RunStatus::Timeout => Some(Exclusion::Timeout),
        RunStatus::Ok if !run.flags.is_empty() && !include_flagged => Some(Exclusion::Flagged),
        RunStatus::Ok => None,
    }
}

/// Improvement of `x` over `base` in percent with "positive = better":
/// `stats::improvement` for lower-is-better metrics, its negation
/// `(x − base) / base × 100` for higher-is-better ones. `None` when the
/// result is not finite (baseline mean zero).
pub fn signed_improvement(base: f64, x: f64, lower_is_better: bool) -> Option<f64> {
    let i = stats::improvement(base, x);
    let i = if lower_is_better { i } else { -i };
    i.is_finite().then_some(i)
}

/// Values as fed to `stats::winners`, which assumes lower is better.
///
/// Higher-is-better values are mapped to their reciprocals (goodput → time
/// per bit), not negated: `beats` compares against `0.9 × mean(b)`, and with
/// negated values that threshold becomes "at most 10 % worse", so equal
/// protocols would beat each other. Non-positive values (no goodput at all)
/// become +∞, the worst possible.
pub fn winner_values(values: &[f64], lower_is_better: bool) -> Vec<f64> {
    if lower_is_better {
        return values.to_vec();
    }
    values
        .iter()
        .map(|&v| if v > 0.0 { 1.0 / v } else { f64::INFINITY })
        .collect()
}

/// `(base, x)` value pairs of the repetitions both cells have, in repetition order. A repetition
/// with more than one value in a cell (not made by the runner) pairs its first.
fn pairs(base: &Cell, x: &Cell) -> Vec<(f64, f64)> {
    let by_rep = |c: &Cell| {
        let mut m = BTreeMap::new();
        for (&r, &v) in c.repetitions.iter().zip(&c.values) {
            m.entry(r).or_insert(v);
        }
        m
    };
    let (base, x) = (by_rep(base), by_rep(x));
    base.iter()
        .filter_map(|(r, &b)| x.get(r).map(|&v| (b, v)))
        .collect()
}

/// Groups, filters and summarises `input.runs` as `options` asks.
/// Ok runs in which an endpoint was CPU-bound (the `client_cpu_bound` / `server_cpu_bound`
/// metrics, issue 60), per setting and protocol: their rate may be the endpoint's limit, not the
/// protocol's, so a reader must know before comparing them. None when no run was.
fn cpu_bound_note(runs: &[RunRecord]) -> Option<String> {
    let mut cells: BTreeMap<(usize, String), (String, usize, usize)> = BTreeMap::new();
    for r in runs.iter().filter(|r| r.status == RunStatus::Ok) {
        let bound = |m: &str| r.metrics.get(m).is_some_and(|v| *v >= 1.0);
        let (client, server) = (bound("client_cpu_bound"), bound("server_cpu_bound"));
        if client || server {
            let cell = cells
                .entry((r.setting, r.protocol.clone()))
                .or_insert_with(|| (r.setting_label.clone(), 0, 0));
            cell.1 += usize::from(client);
            cell.2 += usize::from(server);
        }
    }
    if cells.is_empty() {
        return None;
    }
    let list: Vec<String> = cells
        .iter()
        .map(|((_, proto), (label, c, s))| format!("{label} {proto}: client {c}, server {s}"))
        .collect();
    Some(format!(
        "Runs with a CPU-bound endpoint (busy ≥ 90 % of a core, or of its CPU limit, over the transfer; docs/stacks.md): {}. Their rates may be the endpoint's limit rather than the protocol's.",
        list.join("; ")
    ))
}

pub fn aggregate(input: &ReportInput, options: &ReportOptions) -> Aggregate {
    let runs = &input.runs;
    let mut notes = Vec::new();

    let mut protocols: Vec<String> = Vec::new();
    for r in runs {
        if !protocols.contains(&r.protocol) {
            protocols.push(r.protocol.clone());
        }
    }
    protocols.sort_by(|a, b| protocol_cmp(a, b));

    // First label seen per setting index wins; the labels come from the same
    // plan, so they agree unless the input is inconsistent.
    let mut labels: BTreeMap<usize, String> = BTreeMap::new();
    for r in runs {
        labels
            .entry(r.setting)
            .or_insert_with(|| r.setting_label.clone());
    }
    let settings: Vec<Setting> = labels
        .into_iter()
        .map(|(index, label)| Setting { index, label })
        .collect();
    let setting_pos: BTreeMap<usize, usize> = settings
        .iter()
        .enumerate()
        .map(|(i, s)| (s.index, i))
        .collect();
    let proto_pos = |p: &str| protocols.iter().position(|q| q == p);

    let counts = Counts {
        planned: input.planned_runs,
        finished: runs.len(),
        ok: runs.iter().filter(|r| r.status == RunStatus::Ok).count(),
        failed: runs
            .iter()
            .filter(|r| r.status == RunStatus::Failed)
            .count(),
        timeout: runs
            .iter()
            .filter(|r| r.status == RunStatus::Timeout)
            .count(),
        flagged: runs.iter().filter(|r| !r.flags.is_empty()).count(),
        used: runs
            .iter()
            .filter(|r| exclusion(r, options.include_flagged).is_none())
            .count(),
    };

    let baseline = proto_pos(&options.baseline);
    if baseline.is_none() && !runs.is_empty() {
        notes.push(format!(
            "Baseline protocol \"{}\" has no runs: improvement figures are omitted.",
            options.baseline
        ));
    }

    notes.extend(cpu_bound_note(runs));

    // Execution order, so samples and the problem list read chronologically.
    let mut order: Vec<usize> = (0..runs.len()).collect();
    order.sort_by(|&a, &b| {
        runs[a]
            .index
            .cmp(&runs[b].index)
            .then_with(|| runs[a].key.cmp(&runs[b].key))
    });

    let mut seen_names: Vec<&str> = Vec::new();
    let mut metrics = Vec::new();
    for info in &options.metrics {
        if seen_names.contains(&info.name.as_str()) {
            notes.push(format!(
                "Metric \"{}\" was requested twice; shown once.",
                info.name
            ));
            continue;
        }
        seen_names.push(&info.name);
        // Metrics no run recorded are skipped silently, as asked.
        if !runs.iter().any(|r| r.metrics.contains_key(&info.name)) {
            continue;
        }
        let empty = Cell {
            values: Vec::new(),
            repetitions: Vec::new(),
            summary: None,
            excluded: Excluded::default(),
            censored_median: None,
        };
        let mut cells = vec![vec![empty; protocols.len()]; settings.len()];
        // Per cell, the limits (in ms) of timed-out runs, for completion-time metrics.
        let mut limits = vec![vec![Vec::new(); protocols.len()]; settings.len()];
        for &i in &order {
            let r = &runs[i];
            // Both lookups succeed: the lists were built from these runs.
            let (Some(&s), Some(p)) = (setting_pos.get(&r.setting), proto_pos(&r.protocol)) else {
                continue;
            };
            let cell = &mut cells[s][p];
            match exclusion(r, options.include_flagged) {
                Some(Exclusion::Failed) => cell.excluded.failed += 1,
                Some(Exclusion::Timeout) => {
                    cell.excluded.timeout += 1;
                    if info.completion
                        && let Some(limit) = r.time_limit_s
                    {
                        limits[s][p].push(limit * 1e3);
                    }
                }
                Some(Exclusion::Flagged) => cell.excluded.flagged += 1,
                None => match r.metrics.get(&info.name) {
                    Some(v) if v.is_finite() => {
                        cell.values.push(*v);
                        cell.repetitions.push(r.repetition);
                    }
                    _ => cell.excluded.missing += 1,
                },
            }
        }
        for (cell, limits) in cells.iter_mut().flatten().zip(limits.iter().flatten()) {
            cell.summary = stats::summarize(&cell.values);
            cell.censored_median = CensoredMedian::of(&cell.values, limits);
        }
        // A count that describes the run (connections) is no better for being smaller.
        let baseline = baseline.filter(|_| !info.descriptive);
        let improvements = match baseline {
            None => Vec::new(),
            Some(b) => cells
                .iter()
                .map(|row| {
                    let base = row[b].summary.as_ref().map(|s| s.mean);
                    row.iter()
                        .enumerate()
                        .map(|(p, c)| {
                            let (base, x) = (base?, c.summary.as_ref()?.mean);
                            if p == b {
                                return None;
                            }
                            signed_improvement(base, x, info.lower_is_better)
                        })
                        .collect()
                })
                .collect(),
        };
        let paired = match baseline {
            None => Vec::new(),
            Some(b) => cells
                .iter()
                .map(|row| {
                    row.iter()
                        .enumerate()
                        .map(|(p, c)| {
                            if p == b {
                                return None;
                            }
                            let lower = info.lower_is_better;
                            stats::paired(&pairs(&row[b], c), |base, x| {
                                signed_improvement(base, x, lower).unwrap_or(f64::NAN)
                            })
                        })
                        .collect()
                })
                .collect(),
        };
        metrics.push(MetricTable {
            info: info.clone(),
            cells,
            improvements,
            paired,
        });
    }

    let primary = if metrics.is_empty() {
        None
    } else {
        // No let-chain here: the workspace's rust-version (1.85) predates them.
        let first = options.metrics.first();
        if let Some(first) = first.filter(|f| f.name != metrics[0].info.name) {
            notes.push(format!(
                "Primary metric \"{}\" was not recorded by any run; \"{}\" is used as the primary metric instead.",
                first.name, metrics[0].info.name
            ));
        }
        Some(0)
    };

    let wins = match primary {
        None => Vec::new(),
        Some(m) => {
            let table = &metrics[m];
            table
                .cells
                .iter()
                .map(|row| {
                    let mut results = BTreeMap::new();
                    for (p, cell) in row.iter().enumerate() {
                        if !cell.values.is_empty() {
                            results.insert(
                                protocols[p].clone(),
                                winner_values(&cell.values, table.info.lower_is_better),
                            );
                        }
                    }
                    WinRow {
                        verdict: stats::winners(&results),
                        fewest: results.values().map(Vec::len).min().unwrap_or(0),
                        compared: results.into_keys().collect(),
                    }
                })
                .collect()
        }
    };

    let problem_runs = order
        .iter()
        .copied()
        .filter(|&i| runs[i].status != RunStatus::Ok || !runs[i].flags.is_empty())
        .collect();

    let mut retries = vec![RetryRow::default(); settings.len()];
    for r in runs {
        let Some(&s) = setting_pos.get(&r.setting) else {
            continue;
        };
        let row = &mut retries[s];
        if r.attempt > 1 {
            row.retried_runs += 1;
            row.extra_attempts += (r.attempt - 1) as usize;
        }
        row.still_flagged += usize::from(!r.flags.is_empty());
        row.timed_out += usize::from(r.status == RunStatus::Timeout);
    }

    Aggregate {
        retries,
        protocols,
        baseline,
        settings,
        counts,
        metrics,
        primary,
        wins,
        problem_runs,
        notes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(setting: usize, proto: &str, rep: u32, total: f64) -> RunRecord {
        RunRecord {
            key: format!("proto={proto};s={setting};rep={rep}"),
            index: setting * 100 + rep as usize,
            setting,
            setting_label: format!("setting {setting}"),
            protocol: proto.to_string(),
            repetition: rep,
            status: RunStatus::Ok,
            reason: None,
            flags: Vec::new(),
            metrics: [
                ("total_ms".to_string(), total),
                ("goodput_mbps".to_string(), 8000.0 / total),
            ]
            .into_iter()
            .collect(),
            flows: Vec::new(),
            attempt: 1,
            time_limit_s: None,
        }
    }

    /// Setting 0: h1 = 100 ×4, h2 = 80 ×4, h3 = 50 ×4, plus one failed h3
    /// run with a bogus value and one flagged h2 run with a bogus value.
    fn fixture() -> ReportInput {
        let mut runs = Vec::new();
        for rep in 1..=4 {
            runs.push(run(0, "h3", rep, 50.0));
            runs.push(run(0, "h2", rep, 80.0));
            runs.push(run(0, "h1", rep, 100.0));
        }
        let mut failed = run(0, "h3", 5, 1.0);
        failed.status = RunStatus::Failed;
        failed.reason = Some("handshake timeout".into());
        failed.index = 50;
        runs.push(failed);
        let mut flagged = run(0, "h2", 5, 1000.0);
        flagged.flags = vec!["rate off by 12 %".into()];
        flagged.index = 60;
        runs.push(flagged);
        let mut nan = run(0, "h1", 6, 100.0);
        nan.metrics.insert("total_ms".into(), f64::NAN);
        runs.push(nan);
        ReportInput {
            planned_runs: 20,
            runs,
            ..Default::default()
        }
    }

    fn metric<'a>(agg: &'a Aggregate, name: &str) -> &'a MetricTable {
        agg.metrics.iter().find(|m| m.info.name == name).unwrap()
    }

    #[test]
    fn excludes_failed_and_flagged_and_counts() {
        let agg = aggregate(&fixture(), &ReportOptions::default());
        assert_eq!(agg.protocols, ["h1", "h2", "h3"]);
        assert_eq!(agg.settings.len(), 1);
        assert_eq!(
            agg.counts,
            Counts {
                planned: 20,
                finished: 15,
                ok: 14,
                failed: 1,
                timeout: 0,
                flagged: 1,
                used: 13,
            }
        );
        let t = metric(&agg, "total_ms");
        let [h1, h2, h3] = &t.cells[0][..] else {
            panic!("three protocols")
        };
        assert_eq!(h1.values, [100.0; 4]);
        assert_eq!(
            h1.excluded,
            Excluded {
                missing: 1,
                ..Default::default()
            }
        );
        assert_eq!(h2.summary.as_ref().unwrap().mean, 80.0);
        assert_eq!(h2.excluded.flagged, 1);
        assert_eq!(h3.summary.as_ref().unwrap().n, 4);
        assert_eq!(h3.summary.as_ref().unwrap().mean, 50.0);
        assert_eq!(h3.excluded.failed, 1);
        assert_eq!(h3.excluded.total(), 1);
        // Problem list: the failed and the flagged run, execution order.
        let input = fixture();
        let keys: Vec<&str> = agg
            .problem_runs
            .iter()
            .map(|&i| input.runs[i].key.as_str())
            .collect();
        assert_eq!(keys, ["proto=h3;s=0;rep=5", "proto=h2;s=0;rep=5"]);
    }

    #[test]
    fn include_flagged_uses_flagged_runs() {
        let options = ReportOptions {
            include_flagged: true,
            ..Default::default()
        };
        let agg = aggregate(&fixture(), &options);
        let h2 = &metric(&agg, "total_ms").cells[0][1];
        assert_eq!(h2.values.len(), 5);
        assert_eq!(
            h2.summary.as_ref().unwrap().mean,
            (4.0 * 80.0 + 1000.0) / 5.0
        );
        assert_eq!(h2.excluded.total(), 0);
        assert_eq!(agg.counts.used, 14);
    }

    #[test]
    fn paired_comparison_matches_repetitions_and_skips_unpaired_runs() {
        let mut runs = Vec::new();
        // h2 is 20 % faster than h1 in repetitions 1-4 and 10 % slower in 5; repetition 6 has
        // no h2 run, repetition 7 no h1 run: neither is paired.
        for (rep, h1, h2) in [
            (1, 100.0, 80.0),
            (2, 200.0, 160.0),
            (3, 50.0, 40.0),
            (4, 100.0, 80.0),
            (5, 100.0, 110.0),
        ] {
            runs.push(run(0, "h1", rep, h1));
            runs.push(run(0, "h2", rep, h2));
        }
        runs.push(run(0, "h1", 6, 100.0));
        runs.push(run(0, "h2", 7, 1.0));
        let input = ReportInput {
            planned_runs: runs.len(),
            runs,
            ..Default::default()
        };
        let agg = aggregate(&input, &ReportOptions::default());
        let total = metric(&agg, "total_ms");
        assert!(total.paired[0][0].is_none(), "the baseline has no pair");
        let p = total.paired[0][1].as_ref().unwrap();
        assert_eq!((p.n, p.better, p.worse), (5, 4, 1));
        assert!((p.median_improvement - 20.0).abs() < 1e-9);
        // Higher-is-better goodput flips the sign, pair by pair.
        let g = metric(&agg, "goodput_mbps").paired[0][1].as_ref().unwrap();
        assert_eq!((g.better, g.worse), (4, 1));
        assert!((g.median_improvement - 25.0).abs() < 1e-9);
    }

    #[test]
    fn improvements_on_means_with_sign_per_direction() {
        let agg = aggregate(&fixture(), &ReportOptions::default());
        // Download time: (100 − 80) / 100 = 20 %, (100 − 50) / 100 = 50 %.
        let t = metric(&agg, "total_ms");
        assert_eq!(t.improvements[0], [None, Some(20.0), Some(50.0)]);
        // Goodput 80 / 100 / 160 Mbit/s: higher is better, so
        // (100 − 80) / 80 = +25 % and (160 − 80) / 80 = +100 %.
        let g = metric(&agg, "goodput_mbps");
        assert_eq!(g.improvements[0], [None, Some(25.0), Some(100.0)]);
        assert_eq!(signed_improvement(0.0, 1.0, true), None);
        // A count that describes the run (a page's connections) gets no improvement over h1:
        // six connections against one is not "+83 %" (issue 61).
        let mut options = ReportOptions::default();
        options.metrics[0].descriptive = true;
        let agg = aggregate(&fixture(), &options);
        let t = metric(&agg, "total_ms");
        assert!(t.improvements.is_empty() && t.paired.is_empty());
        assert!(!metric(&agg, "goodput_mbps").improvements.is_empty());
    }

    #[test]
    fn wins_and_missing_metrics() {
        let agg = aggregate(&fixture(), &ReportOptions::default());
        // Only total_ms and goodput_mbps were recorded; the other defaults
        // are skipped silently.
        let names: Vec<&str> = agg.metrics.iter().map(|m| m.info.name.as_str()).collect();
        assert_eq!(names, ["total_ms", "goodput_mbps"]);
        assert_eq!(agg.primary, Some(0));
        assert_eq!(agg.wins.len(), 1);
        assert_eq!(agg.wins[0].verdict, Winners::Best(vec!["h3".into()]));
        assert_eq!(agg.wins[0].label(), "h3");
        assert!(agg.notes.is_empty(), "{:?}", agg.notes);
    }

    #[test]
    fn runs_with_a_cpu_bound_endpoint_are_named_per_setting_and_protocol() {
        let mut input = fixture();
        assert_eq!(cpu_bound_note(&input.runs), None);
        input.runs[0].metrics.insert("client_cpu_bound".into(), 1.0);
        input.runs[0].metrics.insert("server_cpu_bound".into(), 0.0);
        input.runs[3].metrics.insert("client_cpu_bound".into(), 1.0);
        // A failed run's flag says nothing about a result the statistics use.
        let mut failed = run(1, "h2", 1, 10.0);
        failed.status = RunStatus::Failed;
        failed.metrics.insert("server_cpu_bound".into(), 1.0);
        input.runs.push(failed);
        let agg = aggregate(&input, &ReportOptions::default());
        let note = agg
            .notes
            .iter()
            .find(|n| n.contains("CPU-bound"))
            .expect("a note");
        assert!(note.contains("setting 0 h3: client 2, server 0"), "{note}");
        assert!(!note.contains("setting 1"), "{note}");
    }

    #[test]
    fn higher_is_better_verdicts_use_reciprocals() {
        // Equal goodputs: nobody wins. (Negating the values instead would
        // make every protocol "beat" every other, and h1 would win.)
        let equal: BTreeMap<String, Vec<f64>> = ["h1", "h2", "h3"]
            .iter()
            .map(|p| (p.to_string(), winner_values(&[100.0; 5], false)))
            .collect();
        assert_eq!(stats::winners(&equal), Winners::Equal);
        // Goodput 20 % higher for h3: 1/120 ≤ 0.9/100, h3 wins.
        let mut better = equal.clone();
        better.insert("h3".into(), winner_values(&[120.0; 5], false));
        assert_eq!(stats::winners(&better), Winners::Best(vec!["h3".into()]));
        // Zero goodput is the worst possible value.
        assert_eq!(winner_values(&[0.0], false), [f64::INFINITY]);
    }

    #[test]
    fn primary_falls_back_and_baseline_missing_is_noted() {
        let options = ReportOptions {
            baseline: "h0".into(),
            metrics: vec![
                MetricInfo::new("nope", "Nope", "", true),
                MetricInfo::new("goodput_mbps", "Goodput", "Mbit/s", false),
            ],
            include_flagged: false,
        };
        let agg = aggregate(&fixture(), &options);
        assert_eq!(agg.metrics.len(), 1);
        assert_eq!(agg.primary, Some(0));
        assert!(agg.metrics[0].improvements.is_empty());
        assert_eq!(agg.notes.len(), 2, "{:?}", agg.notes);
        // Goodput 160 vs 125 vs 100: h3 beats both by ≥ 10 %.
        assert_eq!(agg.wins[0].label(), "h3");
    }

    #[test]
    fn no_runs_and_only_failed_runs() {
        let agg = aggregate(&ReportInput::default(), &ReportOptions::default());
        assert!(agg.metrics.is_empty() && agg.wins.is_empty() && agg.settings.is_empty());
        assert_eq!(agg.primary, None);

        let mut input = fixture();
        for r in &mut input.runs {
            r.status = RunStatus::Timeout;
        }
        let agg = aggregate(&input, &ReportOptions::default());
        assert_eq!(agg.counts.used, 0);
        assert_eq!(agg.counts.timeout, 15);
        assert!(!metric(&agg, "total_ms").has_values());
        assert_eq!(agg.wins[0].label(), "n/a");
        assert_eq!(agg.problem_runs.len(), 15);
    }

    #[test]
    fn censored_median_counts_timeouts_as_longest() {
        assert_eq!(CensoredMedian::of(&[1.0, 2.0], &[]), None);
        // 3 finished + 1 timed out: n = 4, median between 2nd and 3rd → finished values.
        assert_eq!(
            CensoredMedian::of(&[3.0, 1.0, 2.0], &[60_000.0]),
            Some(CensoredMedian::Value(2.5))
        );
        // 2 + 1: the middle of three is the larger finished value.
        assert_eq!(
            CensoredMedian::of(&[5.0, 1.0], &[60_000.0]),
            Some(CensoredMedian::Value(5.0))
        );
        // 2 + 2: the median's upper half is censored: at least (2 + 60000) / 2.
        assert_eq!(
            CensoredMedian::of(&[1.0, 2.0], &[60_000.0, 90_000.0]),
            Some(CensoredMedian::AtLeast(30_001.0))
        );
        // 1 + 2: the middle is a timeout: at least the shortest limit.
        assert_eq!(
            CensoredMedian::of(&[1.0], &[90_000.0, 60_000.0]),
            Some(CensoredMedian::AtLeast(60_000.0))
        );
    }

    #[test]
    fn timeouts_are_censored_for_completion_metrics_only() {
        let mut input = fixture();
        // Two of h1's five runs (reps 1 and 2) time out at 60 s.
        for r in input
            .runs
            .iter_mut()
            .filter(|r| r.protocol == "h1" && r.repetition <= 2)
        {
            r.status = RunStatus::Timeout;
            r.time_limit_s = Some(60.0);
        }
        let mut options = ReportOptions::default();
        options.metrics[2].completion = false; // goodput is not a completion time
        let agg = aggregate(&input, &options);
        let h1 = &metric(&agg, "total_ms").cells[0][0];
        assert_eq!(h1.excluded.timeout, 2);
        assert_eq!(h1.excluded.failed, 0);
        // Finished: 100, 100 (rep 6 has no value): median of {100, 100, t, t} ≥ (100 + 60000) / 2.
        assert_eq!(h1.values, [100.0, 100.0]);
        assert_eq!(h1.censored_median, Some(CensoredMedian::AtLeast(30_050.0)));
        assert_eq!(
            metric(&agg, "goodput_mbps").cells[0][0].censored_median,
            None
        );
        assert_eq!(agg.retries[0].timed_out, 2);
    }

    #[test]
    fn retries_are_counted_per_setting() {
        let mut input = fixture();
        input.runs[0].attempt = 3; // passed at the third attempt
        input.runs[1].attempt = 2;
        let agg = aggregate(&input, &ReportOptions::default());
        assert_eq!(
            agg.retries[0],
            RetryRow {
                retried_runs: 2,
                extra_attempts: 3,
                still_flagged: 1,
                timed_out: 0
            }
        );
    }

    #[test]
    fn protocol_order_puts_http_versions_first() {
        let mut v = vec!["quic-x", "h3", "a", "h1", "h2"];
        v.sort_by(|a, b| protocol_cmp(a, b));
        assert_eq!(v, ["h1", "h2", "h3", "a", "quic-x"]);
    }
}
