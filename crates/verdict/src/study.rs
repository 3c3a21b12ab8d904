//! Judging a study from its stored runs: runs in, verdicts out. The shell (quiclab-runner) reads
//! each scenario's results database into [`ScenarioRuns`] — the runs as plain records, whether
//! they are a quick form or a part of the full plan, the form in words — and calls
//! [`judge_study`]; nothing here opens a file.

use std::collections::BTreeMap;

use quiclab_experiment::metric::MetricDef;

use crate::findings::{self, Judged, Study};
use crate::judge::{self, Claim, Judgement, RunValue, Verdict};
use crate::outcome::FindingVerdict;
use crate::rules::{Better, Observed};

/// How one stored run ended, as a finding reads it.
#[derive(Debug, Clone, PartialEq)]
pub enum RunStatus {
    /// Finished; `flagged`: still flagged for emulator fidelity after its retries.
    Ok {
        flagged: bool,
    },
    /// Hit its time limit (s, when known).
    Timeout {
        limit_s: Option<f64>,
    },
    Failed,
}

/// One stored run: its parameters, repetition, outcome and metric values.
#[derive(Debug, Clone)]
pub struct RunRecord {
    pub params: BTreeMap<String, String>,
    pub repetition: u32,
    pub status: RunStatus,
    pub metrics: BTreeMap<String, f64>,
}

/// One scenario's stored runs as the findings judge them.
#[derive(Debug, Clone)]
pub struct ScenarioRuns {
    pub runs: Vec<RunRecord>,
    /// The scenario's quick form: an observation, never a verdict.
    pub quick: bool,
    /// `quick`, `full`, `full, 1 of 5 repetitions`, … (shown beside each verdict).
    pub form: String,
    /// Why a full form is not whole (fewer runs than planned), if so: an observation too.
    pub part: Option<String>,
}

/// The runs of one scenario as a finding sees them: every run, its value of `metric`. A timed-out
/// run is censored at its limit in the metric's unit (ms for a page load time) when the metric is
/// a time to completion, else its value is unknown (censored without a bound: left out and
/// counted). An ok run without a value is undefined when the metric declares when it has none
/// (not a failure), else failed; a failed run and a run still flagged for emulator fidelity after
/// its retries count as failed (reports leave flagged runs out too).
pub fn run_values(runs: &[RunRecord], metric: &MetricDef) -> Vec<RunValue> {
    runs.iter()
        .map(|r| RunValue {
            params: r.params.clone(),
            repetition: r.repetition,
            value: match &r.status {
                RunStatus::Ok { flagged: true } => Observed::Failed,
                RunStatus::Ok { flagged: false } => match r.metrics.get(metric.name) {
                    Some(v) if v.is_finite() => Observed::Value(*v),
                    _ if metric.undefined_when.is_some() => Observed::Undefined,
                    _ => Observed::Failed,
                },
                RunStatus::Timeout { limit_s } => Observed::Censored {
                    at_least: limit_s
                        .and_then(|limit| metric.censored_at(limit))
                        .unwrap_or(f64::NAN),
                },
                RunStatus::Failed => Observed::Failed,
            },
        })
        .collect()
}

/// Judges every finding of `study` from `scenarios` (scenario name → its runs; None: no results,
/// which makes its findings inconclusive, saying so), with the metrics of `registry`. The error
/// names a finding whose metric quiclab does not measure.
pub fn judge_study(
    study: &Study,
    scenarios: &BTreeMap<String, Option<ScenarioRuns>>,
    registry: &[MetricDef],
) -> Result<Vec<FindingVerdict>, String> {
    let mut out = Vec::new();
    for f in &study.findings {
        out.push(match &f.judged {
            Judged::NotRunnable { why } => verdict_row(
                study,
                f,
                Judgement::bare(Verdict::NotRunnable { why: why.clone() }),
            ),
            Judged::Run { .. } => judge_finding(study, f, scenarios, registry)?,
        });
    }
    judge_explanations(study, &mut out, scenarios, registry)?;
    for v in &mut out {
        v.no_explanation = study
            .findings
            .iter()
            .find(|f| f.id == v.id)
            .and_then(|f| study.no_explanations.iter().find(|n| n.covers(f)))
            .cloned();
    }
    // The study's multiplicity correction: a q beside every p (the explanations' apart).
    crate::cells::adjust_study(&mut out);
    crate::explain::adjust(&mut out);
    Ok(out)
}

/// Each explanation of the study judged for each finding it explains, added to that finding's
/// verdict row: the finding's claim judged on the explanation's runs with the setting and on the
/// control runs (the outcome is set after the multiplicity correction).
fn judge_explanations(
    study: &Study,
    verdicts: &mut [FindingVerdict],
    scenarios: &BTreeMap<String, Option<ScenarioRuns>>,
    registry: &[MetricDef],
) -> Result<(), String> {
    for e in &study.explanations {
        let unrun = |j: &mut Judgement| {
            if scenarios.get(&e.scenario).is_none_or(Option::is_none) {
                j.verdict = Verdict::Inconclusive {
                    why: format!(
                        "no results of {} (quiclab reproduce {} --explain)",
                        e.scenario, study.name
                    ),
                };
            }
        };
        for arms in e.arms(&study.findings) {
            let mut with = judge_finding(study, &arms.with_setting, scenarios, registry)?;
            let mut control = judge_finding(study, &arms.control, scenarios, registry)?;
            unrun(&mut with.judgement);
            unrun(&mut control.judgement);
            let Some(v) = verdicts.iter_mut().find(|v| v.id == arms.finding) else {
                continue;
            };
            v.explanations.push(crate::explain::ExplanationVerdict {
                id: e.id.clone(),
                hypothesis: e.hypothesis.clone(),
                scenario: e.scenario.clone(),
                setting: e.setting.clone(),
                control: e.control.clone(),
                outcome: crate::explain::Outcome::of(&with.judgement, &control.judgement),
                with_setting: with.judgement,
                control_judgement: control.judgement,
                form: with.form,
            });
        }
    }
    Ok(())
}

/// A verdict row of finding `f` with `judgement` and nothing else filled in.
fn verdict_row(study: &Study, f: &findings::Finding, judgement: Judgement) -> FindingVerdict {
    FindingVerdict {
        study: study.name.clone(),
        id: f.id.clone(),
        source: f.source.clone(),
        claim: f.claim.clone(),
        class: f.class,
        scenario: None,
        metric: None,
        seed_value: None,
        test_of: String::new(),
        estimate_of: String::new(),
        rule: None,
        judgement,
        form: None,
        wins_table: None,
        tree: None,
        beside: None,
        scale: None,
        per: f.per.clone(),
        scope: None,
        explanations: Vec::new(),
        no_explanation: None,
    }
}

/// A quick form (or a full form not run to its repetitions) is an observation: its estimate and
/// n are shown, never a verdict (`part`: why the full form is not whole; None: the quick form).
fn as_observation(j: &mut Judgement, part: Option<&str>) {
    if !matches!(j.verdict, Verdict::Inconclusive { .. }) {
        let copies = match j.counts.copies {
            0 => String::new(),
            c => format!("; {c} repetitions folded as copies"),
        };
        j.verdict = Verdict::Inconclusive {
            why: format!(
                "{}: an observation (n = {}{copies}), not a verdict",
                part.unwrap_or("quick form"),
                j.counts.informative().max(j.counts.pairs)
            ),
        };
    }
    for c in &mut j.cells {
        if !matches!(c.judgement.verdict, Verdict::Inconclusive { .. }) {
            c.judgement.verdict = Verdict::Inconclusive {
                why: "an observation, not a verdict".into(),
            };
        }
    }
}

/// A finding with `machine_limit = "not_runnable"` is not runnable here when more than this share
/// of one side's finished runs had a CPU-bound end or a link still off its targets after the
/// retries: a quarter already decides a median or a sign test's pairs.
pub const MACHINE_LIMITED_SHARE: f64 = 0.25;

/// How the machine limited one finished run: an end busy ≥ 90 % of its core (`client_cpu_bound`,
/// `server_cpu_bound`: the run measured it against `quiclab_model::endpoint::CPU_BOUND_SHARE`) or
/// the link still off its targets after the retries (flagged). The verdicts and the report's sweep
/// figure both read it from here, so that "limited by the machine" means one thing.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct MachineLimit {
    pub client_cpu_bound: bool,
    pub server_cpu_bound: bool,
    pub flagged: bool,
}

impl MachineLimit {
    /// None for a run that did not finish (failed or timed out): it has nothing to say.
    pub fn of(r: &RunRecord) -> Option<Self> {
        let RunStatus::Ok { flagged } = r.status else {
            return None;
        };
        let bound = |m: &str| r.metrics.get(m).is_some_and(|v| *v >= 1.0);
        Some(MachineLimit {
            client_cpu_bound: bound("client_cpu_bound"),
            server_cpu_bound: bound("server_cpu_bound"),
            flagged,
        })
    }

    pub fn any(&self) -> bool {
        self.client_cpu_bound || self.server_cpu_bound || self.flagged
    }
}

/// Whether `limited` of `finished` runs is more than [`MACHINE_LIMITED_SHARE`].
pub fn over_machine_limited_share(limited: usize, finished: usize) -> bool {
    limited as f64 > MACHINE_LIMITED_SHARE * finished as f64
}

/// Why `f` is not runnable on the machine that made `runs`, if it is: more than
/// [`MACHINE_LIMITED_SHARE`] of a compared side's finished runs (or of all, without sides) had an
/// end busy ≥ 90 % of its core (`client_cpu_bound`, `server_cpu_bound`: the run measured it
/// against `quiclab_model::endpoint::CPU_BOUND_SHARE`) or were still flagged
/// for the link's fidelity. None when the runs are the protocol's to judge.
pub fn machine_limited(f: &findings::Finding, runs: &[RunRecord]) -> Option<String> {
    let Judged::Run {
        scenario,
        filter,
        claim,
        ..
    } = &f.judged
    else {
        return None;
    };
    #[derive(Default)]
    struct Side {
        finished: usize,
        limited: usize,
        client: usize,
        server: usize,
        flagged: usize,
    }
    let mut sides: BTreeMap<String, Side> = BTreeMap::new();
    for r in runs.iter().filter(|r| f.claims_run(scenario, &r.params)) {
        let Some(limit) = MachineLimit::of(r) else {
            continue;
        };
        let name = match claim.sides() {
            Some((axis, _, _)) => r.params.get(axis).cloned().unwrap_or_default(),
            None => String::new(),
        };
        let side = sides.entry(name).or_default();
        side.finished += 1;
        side.limited += usize::from(limit.any());
        side.client += usize::from(limit.client_cpu_bound);
        side.server += usize::from(limit.server_cpu_bound);
        side.flagged += usize::from(limit.flagged);
    }
    let limited: Vec<String> = sides
        .iter()
        .filter(|(_, s)| over_machine_limited_share(s.limited, s.finished))
        .map(|(name, s)| {
            let mut parts = Vec::new();
            if s.client > 0 {
                parts.push(format!("the client CPU-bound in {}", s.client));
            }
            if s.server > 0 {
                parts.push(format!("the server CPU-bound in {}", s.server));
            }
            if s.flagged > 0 {
                parts.push(format!("the link off its targets in {}", s.flagged));
            }
            let who = if name.is_empty() {
                String::new()
            } else {
                format!("{name}: ")
            };
            format!(
                "{who}{} of {} runs ({})",
                s.limited,
                s.finished,
                parts.join(", ")
            )
        })
        .collect();
    if limited.is_empty() {
        return None;
    }
    let settings = if filter.is_empty() {
        "the finding's settings".to_string()
    } else {
        filter
            .iter()
            .map(|(k, v)| format!("{k} = {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    Some(format!(
        "not runnable here: at {settings} this machine set the result, not the protocol — {}; \
         the finding needs {settings} with both ends under 90 % of a core and the link within \
         its targets (docs/link.md: `quiclab bench link --only quic` gives this machine's top \
         rate for h3)",
        limited.join("; "),
    ))
}

/// One finding that runs a scenario, judged from its stored runs.
fn judge_finding(
    study: &Study,
    f: &findings::Finding,
    scenarios: &BTreeMap<String, Option<ScenarioRuns>>,
    registry: &[MetricDef],
) -> Result<FindingVerdict, String> {
    let Judged::Run {
        scenario,
        filter,
        metric,
        claim,
        rule,
        seed_value,
        beside,
        pin,
        scope,
    } = &f.judged
    else {
        unreachable!("judge_finding is called for findings that run a scenario")
    };
    let Some(def) = quiclab_experiment::metric::find(registry, metric) else {
        return Err(format!(
            "finding {}: metric {metric:?} is not a metric quiclab measures",
            f.id
        ));
    };
    let better = if def.lower_is_better() {
        Better::Lower
    } else {
        Better::Higher
    };
    let mut test_of = describe(claim, better);
    // A pinned side says which value its runs keep (`h1 from server = quiclab`).
    if let (Some(p), Some((_, a, b))) = (pin, claim.sides())
        && p.a != p.b
    {
        test_of.push_str(&format!(
            "; {a} from {0} = {1}, {b} from {0} = {2}",
            p.param, p.a, p.b
        ));
    }
    let stored = scenarios.get(scenario).and_then(Option::as_ref);
    let judge_with = |filter: &BTreeMap<String, String>| match stored {
        None => (
            Judgement::bare(Verdict::Inconclusive {
                why: format!("no results of {scenario} (run the pack)"),
            }),
            None,
        ),
        Some(s) => {
            let values = run_values(&s.runs, def);
            let (mut j, table) =
                judge::judge_claim(&values, filter, claim, pin.as_ref(), better, *rule, *scope);
            if s.quick || s.part.is_some() {
                as_observation(&mut j, s.part.as_deref());
            }
            (j, table)
        }
    };
    let (mut judgement, wins) = judge_with(filter);
    if f.machine_limit
        && let Some(why) = stored.and_then(|s| machine_limited(f, &s.runs))
    {
        judgement.verdict = Verdict::NotRunnable { why };
        for c in &mut judgement.cells {
            c.judgement.verdict = Verdict::Inconclusive {
                why: "the finding is not runnable here".into(),
            };
        }
    }
    let mut v = verdict_row(study, f, judgement);
    v.scenario = Some(scenario.clone());
    v.metric = Some(metric.clone());
    v.seed_value = *seed_value;
    v.test_of = test_of;
    v.rule = Some(*rule);
    v.form = stored.map(|s| s.form.clone());
    v.scope = Some(*scope);
    v.beside = beside.as_ref().map(|b| crate::outcome::Beside {
        values: b.clone(),
        judgement: judge_with(&findings::beside_filter(filter, b)).0,
    });
    v.estimate_of = judge::estimate_of(claim, metric);
    v.scale = crate::outcome::Scale::of(claim, def.lower_is_better(), rule.min_effect);
    if let Some(table) = wins {
        let rows: Vec<_> = table
            .iter()
            .map(|t| (t.setting.clone(), t.label()))
            .collect();
        v.tree = crate::tree::grow(&rows);
        v.wins_table = Some(table);
    }
    Ok(v)
}

fn describe(claim: &Claim, better: Better) -> String {
    match claim {
        Claim::Better { axis, a, b } => format!(
            "{a} vs {b} on {axis} ({} is better)",
            match better {
                Better::Lower => "lower",
                Better::Higher => "higher",
            }
        ),
        Claim::AtLeast { value } => format!("≥ {value}"),
        Claim::AtMost { value } => format!("≤ {value}"),
        Claim::Approx {
            value, tolerance, ..
        } => format!("≈ {value} ± {:.0} %", tolerance * 100.0),
        Claim::Ratio {
            axis,
            a,
            b,
            value,
            tolerance,
        } => format!("{a}/{b} on {axis} ≈ {value} ± {:.0} %", tolerance * 100.0),
        Claim::RatioAtLeast { axis, a, b, value } => format!("{a}/{b} on {axis} ≥ {value}"),
        Claim::RatioAtMost { axis, a, b, value } => format!("{a}/{b} on {axis} ≤ {value}"),
        Claim::WinsShare { axis, a, at_least } => format!(
            "{a} wins ≥ {:.0} % of the settings (Megyesi et al.'s rule on {axis})",
            at_least * 100.0
        ),
        Claim::NoBestEverywhere { axis } => {
            format!("no {axis} wins every setting (Megyesi et al.'s rule)")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLT: MetricDef = MetricDef::completion_time("plt_ms", "Page load time", "ms");

    fn study() -> Study {
        findings::parse(
            "study = \"t\"\ntitle = \"t\"\n[[finding]]\nid = \"x\"\nclaim = \"h3 faster\"\n\
             class = \"reproduction\"\nscenario = \"s\"\nmetric = \"plt_ms\"\n\
             compare = { axis = \"protocol\", a = \"h3\", b = \"h1\" }\nmin_n = 6\n\
             [[finding]]\nid = \"y\"\nclaim = \"elsewhere\"\nclass = \"reproduction\"\n\
             not_runnable = \"no lab for it\"\n",
            "t.toml",
        )
        .unwrap()
    }

    fn run(proto: &str, rep: u32, status: RunStatus, plt: f64) -> RunRecord {
        RunRecord {
            params: BTreeMap::from([("protocol".to_string(), proto.to_string())]),
            repetition: rep,
            status,
            metrics: BTreeMap::from([("plt_ms".to_string(), plt)]),
        }
    }

    fn scenario(quick: bool, reps: u32) -> BTreeMap<String, Option<ScenarioRuns>> {
        let ok = RunStatus::Ok { flagged: false };
        let runs = (1..=reps)
            .flat_map(|r| {
                [
                    run("h3", r, ok.clone(), 900.0 + f64::from(r)),
                    run("h1", r, ok.clone(), 1_200.0 + f64::from(r) * 7.0),
                ]
            })
            .collect();
        BTreeMap::from([(
            "s".to_string(),
            Some(ScenarioRuns {
                runs,
                quick,
                form: if quick { "quick" } else { "full" }.into(),
                part: None,
            }),
        )])
    }

    #[test]
    fn runs_in_verdicts_out() {
        let v = judge_study(&study(), &scenario(false, 8), &[PLT]).unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].judgement.verdict, Verdict::Holds);
        assert_eq!(v[0].judgement.counts.pairs, 8);
        assert_eq!(v[0].form.as_deref(), Some("full"));
        assert!(v[0].judgement.q.is_some(), "the study's correction ran");
        assert!(matches!(
            v[1].judgement.verdict,
            Verdict::NotRunnable { .. }
        ));
    }

    #[test]
    fn a_quick_form_is_an_observation_and_no_results_say_so() {
        let v = judge_study(&study(), &scenario(true, 8), &[PLT]).unwrap();
        assert!(
            matches!(&v[0].judgement.verdict, Verdict::Inconclusive { why } if why.contains("quick form: an observation (n = 8")),
            "{:?}",
            v[0].judgement.verdict
        );
        let v = judge_study(&study(), &BTreeMap::new(), &[PLT]).unwrap();
        assert!(
            matches!(&v[0].judgement.verdict, Verdict::Inconclusive { why } if why.contains("no results of s")),
        );
    }

    #[test]
    fn an_unknown_metric_names_the_finding() {
        let e = judge_study(&study(), &scenario(false, 8), &[]).unwrap_err();
        assert!(e.contains("finding x") && e.contains("plt_ms"), "{e}");
    }

    #[test]
    fn flagged_failed_and_timed_out_runs_are_counted_not_dropped() {
        let runs = [
            run("h3", 1, RunStatus::Ok { flagged: false }, 900.0),
            run("h3", 2, RunStatus::Ok { flagged: true }, 900.0),
            run("h3", 3, RunStatus::Failed, 900.0),
            run(
                "h3",
                4,
                RunStatus::Timeout {
                    limit_s: Some(30.0),
                },
                f64::NAN,
            ),
        ];
        let v: Vec<Observed> = run_values(&runs, &PLT)
            .into_iter()
            .map(|r| r.value)
            .collect();
        assert_eq!(v[0], Observed::Value(900.0));
        assert_eq!(v[1], Observed::Failed);
        assert_eq!(v[2], Observed::Failed);
        assert_eq!(v[3], Observed::Censored { at_least: 30_000.0 });
    }

    #[test]
    fn an_explanation_is_judged_on_its_two_arms_and_said_under_its_finding() {
        let text = "study = \"t\"\ntitle = \"t\"\n[[finding]]\nid = \"x\"\nclaim = \"h3 faster\"\n\
                    class = \"reproduction\"\nscenario = \"s\"\nmetric = \"plt_ms\"\n\
                    compare = { axis = \"protocol\", a = \"h3\", b = \"h1\" }\nmin_n = 6\n\
                    [[explanation]]\nid = \"x-idle\"\nexplains = [\"x\"]\n\
                    hypothesis = \"TCP restarted slow start\"\nscenario = \"e\"\n\
                    setting = { ssai = true }\ncontrol = { ssai = false }\n";
        let study = findings::parse(text, "t.toml").unwrap();
        let ok = RunStatus::Ok { flagged: false };
        let mut runs = Vec::new();
        for rep in 1..=8u32 {
            for (ssai, h1) in [("true", 1_300.0), ("false", 880.0)] {
                for (proto, plt) in [
                    ("h3", 900.0 + f64::from(rep)),
                    ("h1", h1 + 7.0 * f64::from(rep)),
                ] {
                    let mut r = run(proto, rep, ok.clone(), plt);
                    r.params.insert("ssai".into(), ssai.into());
                    runs.push(r);
                }
            }
        }
        let mut scenarios = scenario(false, 8);
        let judged = |scenarios: &BTreeMap<String, Option<ScenarioRuns>>| {
            judge_study(&study, scenarios, &[PLT]).unwrap()[0].clone()
        };
        // Not run yet: said so, never a pass.
        let v = judged(&scenarios);
        assert_eq!(v.explanations.len(), 1);
        assert!(
            matches!(&v.explanations[0].outcome, crate::explain::Outcome::Inconclusive { why } if why.contains("no results of e (quiclab reproduce t --explain)")),
            "{:?}",
            v.explanations[0].outcome
        );
        scenarios.insert(
            "e".into(),
            Some(ScenarioRuns {
                runs: runs.clone(),
                quick: false,
                form: "full".into(),
                part: None,
            }),
        );
        let v = judged(&scenarios);
        let e = &v.explanations[0];
        assert_eq!(e.outcome, crate::explain::Outcome::Explained, "{e:?}");
        assert_eq!(e.with_setting.verdict, Verdict::Holds);
        assert_eq!(e.with_setting.counts.pairs, 8);
        assert!(e.with_setting.q.is_some());
        assert!(
            matches!(
                e.control_judgement.verdict,
                Verdict::DoesNotHold { .. } | Verdict::NotShown { .. }
            ),
            "{:?}",
            e.control_judgement.verdict
        );
        assert_eq!(e.setting_text(), "ssai = true");
        // The finding's own verdict is its own.
        assert_eq!(v.judgement.verdict, Verdict::Holds);
        // With the setting the claim does not come back: not explained.
        for r in runs.iter_mut().filter(|r| r.params["ssai"] == "true") {
            if r.params["protocol"] == "h1" {
                r.metrics.insert("plt_ms".into(), 700.0);
            }
        }
        scenarios.insert(
            "e".into(),
            Some(ScenarioRuns {
                runs,
                quick: false,
                form: "full".into(),
                part: None,
            }),
        );
        assert_eq!(
            judged(&scenarios).explanations[0].outcome,
            crate::explain::Outcome::NotExplained
        );
    }

    #[test]
    fn a_finding_without_explanation_says_why_in_every_rendering() {
        let text = "study = \"t\"\ntitle = \"t\"\n[[finding]]\nid = \"x\"\nclaim = \"h3 faster\"\n\
                    class = \"reproduction\"\nscenario = \"s\"\nmetric = \"plt_ms\"\n\
                    compare = { axis = \"protocol\", a = \"h3\", b = \"h1\" }\nmin_n = 6\n\
                    [[no_explanation]]\nexplains = [\"x\"]\nstatus = \"not built yet\"\n\
                    why = \"players take no controller\"\n";
        let study = findings::parse(text, "t.toml").unwrap();
        let ok = RunStatus::Ok { flagged: false };
        // h3 slower in every pair: the claim does not hold, so the finding asks for one.
        let runs = (1..=8u32)
            .flat_map(|rep| {
                [
                    run("h3", rep, ok.clone(), 1_000.0 + f64::from(rep)),
                    run("h1", rep, ok.clone(), 800.0),
                ]
            })
            .collect();
        let scenarios = BTreeMap::from([(
            "s".to_string(),
            Some(ScenarioRuns {
                runs,
                quick: false,
                form: "full".into(),
                part: None,
            }),
        )]);
        let v = judge_study(&study, &scenarios, &[PLT]).unwrap();
        assert!(
            crate::outcome::wants_explanation(&v[0]),
            "{:?}",
            v[0].judgement
        );
        let said = "none built yet: players take no controller";
        assert_eq!(
            v[0].no_explanation.as_ref().map(|n| n.text()),
            Some(said.into())
        );
        let md = crate::outcome::explanations_markdown(&[&v[0]]);
        assert!(
            md.contains(&format!(" | {said} |")) && md.contains("| x | "),
            "{md}"
        );
        assert!(!md.contains("none tested yet"), "{md}");
        assert!(crate::prose::sentence(&v[0]).contains(said));
        assert!(v[0].to_string().contains(said));
    }

    /// What counts as limited by the machine, the one reading the verdicts and the sweep figure
    /// share: a bound end or a flagged run is; an unfinished run has no say; "more than a quarter"
    /// is strict.
    #[test]
    fn a_run_is_machine_limited_by_a_bound_end_or_a_flag_and_unfinished_runs_have_no_say() {
        let run = |status: RunStatus, client: f64, server: f64| RunRecord {
            params: BTreeMap::new(),
            repetition: 1,
            status,
            metrics: BTreeMap::from([
                ("client_cpu_bound".to_string(), client),
                ("server_cpu_bound".to_string(), server),
            ]),
        };
        let ok = RunStatus::Ok { flagged: false };
        assert_eq!(
            MachineLimit::of(&run(ok.clone(), 0.0, 0.0)).map(|l| l.any()),
            Some(false)
        );
        let client = MachineLimit::of(&run(ok.clone(), 1.0, 0.0)).unwrap();
        assert!(client.any() && client.client_cpu_bound && !client.server_cpu_bound);
        assert!(
            MachineLimit::of(&run(ok, 0.0, 1.0))
                .unwrap()
                .server_cpu_bound
        );
        let flagged = MachineLimit::of(&run(RunStatus::Ok { flagged: true }, 0.0, 0.0)).unwrap();
        assert!(flagged.any() && flagged.flagged);
        assert_eq!(MachineLimit::of(&run(RunStatus::Failed, 1.0, 1.0)), None);
        assert_eq!(
            MachineLimit::of(&run(RunStatus::Timeout { limit_s: None }, 1.0, 1.0)),
            None
        );
        assert!(!over_machine_limited_share(1, 4));
        assert!(over_machine_limited_share(2, 4));
        assert!(!over_machine_limited_share(0, 0));
    }

    /// A rate sweep's finding marked `machine_limit = "not_runnable"`: h3 at 1 Gbit/s with its
    /// client CPU-bound in most runs is not runnable here (naming the rate and the counts); the
    /// same runs with one CPU-bound client of eight are judged; without the key they are judged
    /// however many were bound.
    #[test]
    fn a_machine_limited_finding_is_not_runnable_here_with_the_rate_it_needs() {
        const GOODPUT: MetricDef = MetricDef::higher("goodput_mbps", "Goodput", "Mbit/s");
        let text = |limit: &str| {
            format!(
                "study = \"z\"\ntitle = \"z\"\n[[finding]]\nid = \"gap\"\n\
                 claim = \"h2 faster at 1 Gbit/s\"\nclass = \"reproduction\"\n\
                 scenario = \"r\"\nwhere = {{ rate = \"1gbit\" }}\nmetric = \"goodput_mbps\"\n\
                 compare = {{ axis = \"protocol\", a = \"h2\", b = \"h3\" }}\nmin_n = 6\n{limit}"
            )
        };
        let runs = |bound: u32| -> BTreeMap<String, Option<ScenarioRuns>> {
            let mut out = Vec::new();
            for rep in 1..=8u32 {
                for (proto, rate, goodput) in [
                    ("h2", "1gbit", 930.0),
                    ("h3", "1gbit", 450.0),
                    // Another rate: not the finding's, its bound clients do not count.
                    ("h3", "100mbit", 95.0),
                ] {
                    let mut m = BTreeMap::from([
                        ("goodput_mbps".to_string(), goodput + f64::from(rep)),
                        ("server_cpu_bound".to_string(), 0.0),
                    ]);
                    let b = proto == "h3" && (rate == "100mbit" || rep <= bound);
                    m.insert("client_cpu_bound".into(), if b { 1.0 } else { 0.0 });
                    out.push(RunRecord {
                        params: BTreeMap::from([
                            ("protocol".to_string(), proto.to_string()),
                            ("rate".to_string(), rate.to_string()),
                        ]),
                        repetition: rep,
                        status: RunStatus::Ok { flagged: false },
                        metrics: m,
                    });
                }
            }
            BTreeMap::from([(
                "r".to_string(),
                Some(ScenarioRuns {
                    runs: out,
                    quick: false,
                    form: "full".into(),
                    part: None,
                }),
            )])
        };
        let limited =
            findings::parse(&text("machine_limit = \"not_runnable\"\n"), "z.toml").unwrap();
        assert!(limited.findings[0].machine_limit);
        let v = judge_study(&limited, &runs(7), &[GOODPUT]).unwrap();
        match &v[0].judgement.verdict {
            Verdict::NotRunnable { why } => {
                assert!(why.starts_with("not runnable here"), "{why}");
                assert!(why.contains("rate = 1gbit"), "{why}");
                assert!(
                    why.contains("h3: 7 of 8 runs (the client CPU-bound in 7)"),
                    "{why}"
                );
                assert!(!why.contains("h2:"), "{why}");
            }
            other => panic!("{other:?}"),
        }
        // The estimate stays for the reader.
        assert_eq!(v[0].judgement.counts.pairs, 8);
        let v = judge_study(&limited, &runs(1), &[GOODPUT]).unwrap();
        assert_eq!(
            v[0].judgement.verdict,
            Verdict::Holds,
            "1 of 8 is under a quarter"
        );
        let plain = findings::parse(&text(""), "z.toml").unwrap();
        assert!(!plain.findings[0].machine_limit);
        let v = judge_study(&plain, &runs(8), &[GOODPUT]).unwrap();
        assert_eq!(v[0].judgement.verdict, Verdict::Holds);
        // Flagged runs count as the machine's limit too.
        let mut flagged = runs(0);
        for r in &mut flagged.get_mut("r").unwrap().as_mut().unwrap().runs {
            if r.params["protocol"] == "h2" && r.repetition <= 3 {
                r.status = RunStatus::Ok { flagged: true };
            }
        }
        let v = judge_study(&limited, &flagged, &[GOODPUT]).unwrap();
        assert!(
            matches!(&v[0].judgement.verdict, Verdict::NotRunnable { why } if why.contains("h2: 3 of 8 runs (the link off its targets in 3)")),
            "{:?}",
            v[0].judgement.verdict
        );
    }

    #[test]
    fn machine_limit_takes_two_words_and_needs_runs() {
        let base = "study = \"z\"\ntitle = \"z\"\n[[finding]]\nid = \"a\"\nclaim = \"c\"\n\
                    class = \"reproduction\"\n";
        let e = findings::parse(
            &format!("{base}not_runnable = \"elsewhere\"\nmachine_limit = \"not_runnable\"\n"),
            "z.toml",
        )
        .unwrap_err();
        assert!(e.contains("z.toml:3") && e.contains("machine_limit"), "{e}");
        let e = findings::parse(
            &format!(
                "{base}scenario = \"s\"\nmetric = \"m\"\nat_least = 1.0\nmachine_limit = \"skip\"\n"
            ),
            "z.toml",
        )
        .unwrap_err();
        assert!(e.contains("machine_limit") && e.contains("\"skip\""), "{e}");
    }
}
