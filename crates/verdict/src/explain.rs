//! Explanations (issue 59): why a seed's finding does not reproduce with today's stacks, as a
//! tested hypothesis. An explanation names the finding(s) it explains, says in one sentence what
//! differed in the seed's time, and gives the setting that recreates that condition and the
//! control (today's value of the same keys). Its scenario runs both; the finding's own claim is
//! judged twice by the same engine — on the runs with the setting and on the control runs — and
//! the explanation is
//!
//! - **explained** when the claim holds with the setting (q < α over the study's explanations)
//!   and does not hold on the control (does not hold, reversed, not shown or mixed): the seed's
//!   result comes back with the setting and is absent without it;
//! - **not explained** when the claim does not hold with the setting either (does not hold,
//!   reversed, not shown with enough units, or mixed): the setting does not bring it back;
//! - **inconclusive** otherwise: too few units with the setting, an inconclusive control, or a
//!   control where the claim holds too (the scenario does not show the failure it explains).
//!
//! ```toml
//! [[explanation]]
//! id = "004-3a-idle"
//! explains = ["004-3a"]                      # findings (a `per` finding by its own id: each value)
//! hypothesis = "Linux restarted TCP from its initial window after each pause of the player …"
//! scenario = "arisu2019-seek-explain"        # its runs have both the setting and the control
//! setting = { tcp_slow_start_after_idle = true }   # the seed's condition
//! control = { tcp_slow_start_after_idle = false }  # today's, the same keys
//! ```
//!
//! Where the seed's condition is in the compared arm itself (gQUIC's CUBIC for the QUIC player a
//! finding compares with TCP's), a setting names the compare axis with a table from the arm's
//! value to the one the explanation runs: `setting = { players = { h3 = "h3:gquic-cubic" } }`,
//! `control = { players = { h3 = "h3" } }`. It is kept as the key `players[h3]`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::findings::{Finding, Judged};
use crate::judge::{Judgement, Verdict};

/// One `[[explanation]]`, checked.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Explanation {
    pub id: String,
    /// The ids of the findings it explains (a `per` finding's values each by `id@value`).
    pub explains: Vec<String>,
    pub hypothesis: String,
    pub scenario: String,
    /// The setting values that recreate the seed's condition (parameter → value as run keys
    /// write them).
    pub setting: BTreeMap<String, String>,
    /// The same keys at today's values.
    pub control: BTreeMap<String, String>,
    /// The line of `[[explanation]]` in the study file.
    #[serde(skip)]
    pub line: usize,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ExplanationDe {
    id: String,
    explains: Vec<String>,
    hypothesis: String,
    scenario: String,
    setting: BTreeMap<String, toml::Value>,
    control: BTreeMap<String, toml::Value>,
}

/// The two arms of an explanation for one finding: the finding's judgement moved to the
/// explanation's scenario with the setting's values, and with the control's.
#[derive(Debug, Clone)]
pub struct Arms {
    pub finding: String,
    pub with_setting: Finding,
    pub control: Finding,
}

impl Explanation {
    /// The arms of this explanation for each finding of `findings` it explains (a finding that
    /// names no runs has none).
    pub fn arms(&self, findings: &[Finding]) -> Vec<Arms> {
        findings
            .iter()
            .filter(|f| self.covers(f))
            .filter_map(|f| {
                Some(Arms {
                    finding: f.id.clone(),
                    with_setting: self.moved(f, &self.setting)?,
                    control: self.moved(f, &self.control)?,
                })
            })
            .collect()
    }

    /// Whether it explains `f` (named by its id, or a `per` finding by the id it was made from).
    pub fn covers(&self, f: &Finding) -> bool {
        self.explains.contains(&f.id)
            || f.per
                .as_ref()
                .is_some_and(|p| self.explains.contains(&p.of))
    }

    /// `f` judged on this explanation's scenario with `values` in its `where` (a value `where`
    /// fixes too is replaced: e.g. a queue swept past the finding's) and in its compared arms
    /// (`axis[old]` keys: the arm `old` of the compare axis becomes the value).
    fn moved(&self, f: &Finding, values: &BTreeMap<String, String>) -> Option<Finding> {
        let mut out = f.clone();
        let Judged::Run {
            scenario,
            filter,
            beside,
            claim,
            ..
        } = &mut out.judged
        else {
            return None;
        };
        scenario.clone_from(&self.scenario);
        let (arms, plain): (BTreeMap<_, _>, BTreeMap<_, _>) = values
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .partition(|(k, _)| arm_key(k).is_some());
        for (key, value) in &arms {
            let (axis, old) = arm_key(key)?;
            replace_arm(claim, axis, old, value);
        }
        *filter = crate::findings::beside_filter(filter, &plain);
        // The explanation judges the finding's own claim, not what is shown beside it.
        *beside = None;
        Some(out)
    }

    /// Whether judging this explanation reads a run of `scenario` with `params`.
    pub fn judges(
        &self,
        findings: &[Finding],
        scenario: &str,
        params: &BTreeMap<String, String>,
    ) -> bool {
        scenario == self.scenario
            && self.arms(findings).iter().any(|a| {
                a.with_setting.judges(scenario, params) || a.control.judges(scenario, params)
            })
    }
}

/// `players[h3]` → (`players`, `h3`): a setting of a compared arm.
fn arm_key(key: &str) -> Option<(&str, &str)> {
    let (axis, rest) = key.split_once('[')?;
    Some((axis, rest.strip_suffix(']')?))
}

/// Replaces the arm `old` of a paired claim along `axis` by `new`.
fn replace_arm(claim: &mut crate::judge::Claim, axis: &str, old: &str, new: &str) {
    use crate::judge::Claim;
    match claim {
        Claim::Better { axis: x, a, b }
        | Claim::Ratio { axis: x, a, b, .. }
        | Claim::RatioAtLeast { axis: x, a, b, .. }
        | Claim::RatioAtMost { axis: x, a, b, .. }
            if x == axis =>
        {
            for side in [a, b] {
                if side == old {
                    *side = new.to_string();
                }
            }
        }
        _ => {}
    }
}

/// The findings `id` names (a `per` finding's values by the id they were made from), which must
/// exist and be runnable; the error says which (`unrunnable`: why a finding that cannot run is
/// refused here).
fn runnable_findings<'a>(
    findings: &'a [Finding],
    id: &str,
    unrunnable: &str,
) -> Result<Vec<&'a Finding>, String> {
    let named: Vec<&Finding> = findings
        .iter()
        .filter(|f| f.id == id || f.per.as_ref().is_some_and(|p| p.of == id))
        .collect();
    if named.is_empty() {
        return Err(format!("no finding {id:?} in this study"));
    }
    if named
        .iter()
        .any(|f| matches!(f.judged, Judged::NotRunnable { .. }))
    {
        return Err(format!("finding {id:?} is not runnable: {unrunnable}"));
    }
    Ok(named)
}

/// Parses a study's `[[explanation]]` tables against its findings (`per` values included).
/// Errors name the file, the explanation's line and the key.
pub(crate) fn parse(
    des: Vec<toml::Spanned<ExplanationDe>>,
    text: &str,
    file: &str,
    findings: &[Finding],
) -> Result<Vec<Explanation>, String> {
    let line_of = |offset: usize| text[..offset.min(text.len())].matches('\n').count() + 1;
    let mut out: Vec<Explanation> = Vec::new();
    for spanned in des {
        let line = line_of(spanned.span().start);
        let e = spanned.into_inner();
        let at = |key: &str, msg: String| {
            format!(
                "{file}:{line}: explanation {:?}: key \"{key}\": {msg}",
                e.id
            )
        };
        if e.id.is_empty() || e.id.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(at(
                "id",
                "expected a non-empty id without spaces (e.g. \"004-3a-idle\")".into(),
            ));
        }
        if out.iter().any(|o| o.id == e.id) || findings.iter().any(|f| f.id == e.id) {
            return Err(at(
                "id",
                "a finding or another explanation has this id".into(),
            ));
        }
        if e.hypothesis.trim().is_empty() {
            return Err(at(
                "hypothesis",
                "must not be empty: what differed in the seed's time, in one sentence".into(),
            ));
        }
        if e.scenario.trim().is_empty() {
            return Err(at("scenario", "must not be empty".into()));
        }
        if e.explains.is_empty() {
            return Err(at("explains", "names no finding".into()));
        }
        if let Some(f) = findings
            .iter()
            .find(|f| matches!(&f.judged, Judged::Run { scenario, .. } if *scenario == e.scenario))
        {
            return Err(at(
                "scenario",
                format!(
                    "{:?} is finding {:?}'s scenario: an explanation runs a scenario of its own \
                     (its runs would grow the finding's pack, and its evidence would be a part)",
                    e.scenario, f.id
                ),
            ));
        }
        for id in &e.explains {
            runnable_findings(findings, id, "there is no claim to judge again")
                .map_err(|m| at("explains", m))?;
        }
        let text = |v: &toml::Value| match v {
            toml::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        // A table is a compared arm's new value (`players = { h3 = "h3:gquic-cubic" }`): every
        // finding explained must compare along that axis and have that arm.
        let render = |m: &BTreeMap<String, toml::Value>,
                      which: &str|
         -> Result<BTreeMap<String, String>, String> {
            let mut out = BTreeMap::new();
            for (k, v) in m {
                let toml::Value::Table(arms) = v else {
                    out.insert(k.clone(), text(v));
                    continue;
                };
                if arms.is_empty() {
                    return Err(at(which, format!("{k}: names no arm")));
                }
                for (old, new) in arms {
                    for id in &e.explains {
                        let compares = findings
                            .iter()
                            .filter(|f| &f.id == id || f.per.as_ref().is_some_and(|p| &p.of == id))
                            .all(|f| match &f.judged {
                                Judged::Run { claim, .. } => {
                                    claim.sides().is_some_and(|(axis, a, b)| {
                                        axis == k && (a == old || b == old)
                                    })
                                }
                                Judged::NotRunnable { .. } => false,
                            });
                        if !compares {
                            return Err(at(
                                which,
                                format!(
                                    "{k} = {{ {old} = … }} replaces a compared arm, but finding \
                                     {id:?} does not compare {old:?} along {k}"
                                ),
                            ));
                        }
                    }
                    out.insert(format!("{k}[{old}]"), text(new));
                }
            }
            Ok(out)
        };
        let (setting, control) = (
            render(&e.setting, "setting")?,
            render(&e.control, "control")?,
        );
        if setting.is_empty() {
            return Err(at(
                "setting",
                "names no setting: give the keys that recreate the seed's condition".into(),
            ));
        }
        let keys = |m: &BTreeMap<String, String>| m.keys().cloned().collect::<Vec<_>>();
        if keys(&setting) != keys(&control) {
            return Err(at(
                "control",
                format!(
                    "must give the same keys as setting ({}) at today's values; got {}",
                    keys(&setting).join(", "),
                    if control.is_empty() {
                        "none".to_string()
                    } else {
                        keys(&control).join(", ")
                    }
                ),
            ));
        }
        if setting == control {
            return Err(at(
                "control",
                "is the setting itself: the control must differ in at least one value".into(),
            ));
        }
        out.push(Explanation {
            id: e.id,
            explains: e.explains,
            hypothesis: e.hypothesis,
            scenario: e.scenario,
            setting,
            control,
            line,
        });
    }
    Ok(out)
}

/// Why a failing finding has no explanation (`[[no_explanation]]`): none can be built (what the
/// seed's result would need is no setting its time documents: testing one anyway would be tuning
/// to the result), or none is built yet (what quiclab lacks to run one). Either way the docs say
/// it under the finding instead of "none tested yet".
///
/// ```toml
/// [[no_explanation]]
/// explains = ["000-1b-quic"]
/// status = "cannot be built"      # or "not built yet"
/// why = "gQUIC v21 emulated two connections, as quiclab's gquic-cubic does; …"
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NoExplanation {
    /// The findings it speaks for (a `per` finding by the id it was made from).
    pub explains: Vec<String>,
    pub status: Unbuilt,
    pub why: String,
    /// The line of `[[no_explanation]]` in the study file.
    #[serde(skip)]
    pub line: usize,
}

/// Whether an explanation cannot be built or is not built yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Unbuilt {
    #[serde(rename = "cannot be built")]
    CannotBeBuilt,
    #[serde(rename = "not built yet")]
    NotBuiltYet,
}

impl NoExplanation {
    /// Whether it speaks for `f` (by its id, or a `per` finding by the id it was made from).
    pub fn covers(&self, f: &Finding) -> bool {
        self.explains.contains(&f.id)
            || f.per
                .as_ref()
                .is_some_and(|p| self.explains.contains(&p.of))
    }

    /// `none can be built: why` as the docs' explanation column says it.
    pub fn text(&self) -> String {
        let head = match self.status {
            Unbuilt::CannotBeBuilt => "none can be built",
            Unbuilt::NotBuiltYet => "none built yet",
        };
        format!("{head}: {}", self.why)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct NoExplanationDe {
    explains: Vec<String>,
    status: Unbuilt,
    why: String,
}

/// Parses a study's `[[no_explanation]]` tables: each names findings of the study that no
/// `[[explanation]]` and no other statement names, and says why in words. Errors name the file,
/// the table's line and the key.
pub(crate) fn parse_none(
    des: Vec<toml::Spanned<NoExplanationDe>>,
    text: &str,
    file: &str,
    findings: &[Finding],
    explanations: &[Explanation],
) -> Result<Vec<NoExplanation>, String> {
    let line_of = |offset: usize| text[..offset.min(text.len())].matches('\n').count() + 1;
    let mut out: Vec<NoExplanation> = Vec::new();
    for spanned in des {
        let line = line_of(spanned.span().start);
        let e = spanned.into_inner();
        let at =
            |key: &str, msg: String| format!("{file}:{line}: no_explanation: key \"{key}\": {msg}");
        if e.explains.is_empty() {
            return Err(at("explains", "names no finding".into()));
        }
        if e.why.trim().is_empty() {
            return Err(at(
                "why",
                "must not be empty: say what an explanation would need and why it is not run"
                    .into(),
            ));
        }
        for id in &e.explains {
            let named = runnable_findings(findings, id, "its verdict says why already")
                .map_err(|m| at("explains", m))?;
            if let Some(x) = explanations
                .iter()
                .find(|x| named.iter().any(|f| x.covers(f)))
            {
                return Err(at(
                    "explains",
                    format!(
                        "finding {id:?} has an explanation ({:?}, line {}): a statement that it \
                         has none would contradict it",
                        x.id, x.line
                    ),
                ));
            }
            if let Some(o) = out.iter().find(|o| named.iter().any(|f| o.covers(f))) {
                return Err(at(
                    "explains",
                    format!(
                        "finding {id:?} is named by the no_explanation of line {} too",
                        o.line
                    ),
                ));
            }
        }
        out.push(NoExplanation {
            explains: e.explains,
            status: e.status,
            why: e.why,
            line,
        });
    }
    Ok(out)
}

/// What an explanation's two judgements say.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Outcome {
    Explained,
    NotExplained,
    Inconclusive { why: String },
}

impl Outcome {
    pub fn word(&self) -> &'static str {
        match self {
            Outcome::Explained => "explained",
            Outcome::NotExplained => "not explained",
            Outcome::Inconclusive { .. } => "inconclusive",
        }
    }

    /// The outcome of a claim judged with the setting and on the control (after the
    /// multiplicity correction of the judgement with the setting).
    pub fn of(with_setting: &Judgement, control: &Judgement) -> Outcome {
        let control_fails = matches!(
            control.verdict,
            Verdict::DoesNotHold { .. } | Verdict::NotShown { .. } | Verdict::Mixed { .. }
        );
        match &with_setting.verdict {
            Verdict::Holds if control_fails => Outcome::Explained,
            Verdict::Holds => Outcome::Inconclusive {
                why: match &control.verdict {
                    Verdict::Holds => "the claim holds on the control too: this scenario does \
                                       not show the failure it explains"
                        .into(),
                    v => format!(
                        "the control is {}: the failure is not shown without the setting",
                        crate::outcome::verdict_word(v)
                    ),
                },
            },
            Verdict::DoesNotHold { .. } | Verdict::NotShown { .. } | Verdict::Mixed { .. } => {
                Outcome::NotExplained
            }
            Verdict::Inconclusive { why } | Verdict::NotRunnable { why } => Outcome::Inconclusive {
                why: format!("with the setting: {why}"),
            },
        }
    }
}

/// One explanation judged for one finding: the `explanations` entry of its verdict row.
#[derive(Debug, Clone, Serialize)]
pub struct ExplanationVerdict {
    pub id: String,
    pub hypothesis: String,
    pub scenario: String,
    pub setting: BTreeMap<String, String>,
    pub control: BTreeMap<String, String>,
    pub outcome: Outcome,
    /// The finding's claim on the runs with the setting: its n, p and q are the explanation's.
    pub with_setting: Judgement,
    /// The same claim on the control runs.
    pub control_judgement: Judgement,
    /// The form of the explanation's runs (`full`, `quick`; None: no runs).
    pub form: Option<String>,
}

impl ExplanationVerdict {
    /// `tcp_slow_start_after_idle = true` (the setting's values in words).
    pub fn setting_text(&self) -> String {
        values_text(&self.setting)
    }

    pub fn control_text(&self) -> String {
        values_text(&self.control)
    }
}

pub fn values_text(values: &BTreeMap<String, String>) -> String {
    values
        .iter()
        .map(|(k, v)| format!("{k} = {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The study's multiplicity correction of its explanations: Benjamini–Hochberg q values over
/// the p values of the judgements with the setting (one family of the study's explanations); an
/// explained outcome needs q < α. Outcomes are computed after it.
pub fn adjust(verdicts: &mut [crate::FindingVerdict]) {
    let ps: Vec<Option<f64>> = verdicts
        .iter()
        .flat_map(|v| v.explanations.iter().map(|e| e.with_setting.p))
        .collect();
    let family = format!(
        "the study's {} explanation p values",
        ps.iter().flatten().count()
    );
    let mut qs = crate::cells::bh(&ps).into_iter();
    for v in verdicts.iter_mut() {
        let alpha = v.rule.map_or(0.05, |r| r.alpha);
        for e in &mut v.explanations {
            e.with_setting.q = qs.next().flatten();
            crate::cells::demote_unless_q(&mut e.with_setting, alpha, &family);
            e.outcome = Outcome::of(&e.with_setting, &e.control_judgement);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn study(explanation: &str) -> Result<crate::Study, String> {
        crate::findings::parse(
            &format!(
                "study = \"t\"\ntitle = \"t\"\n[[finding]]\nid = \"x\"\nclaim = \"h3 faster\"\n\
                 class = \"reproduction\"\nscenario = \"s\"\nwhere = {{ loss = \"1%\" }}\n\
                 metric = \"plt_ms\"\ncompare = {{ axis = \"protocol\", a = \"h3\", b = \"h1\" }}\n\
                 [[finding]]\nid = \"y\"\nclaim = \"elsewhere\"\nclass = \"reproduction\"\n\
                 not_runnable = \"no lab for it\"\n{explanation}"
            ),
            "t.toml",
        )
    }

    const GOOD: &str = "[[explanation]]\nid = \"x-old\"\nexplains = [\"x\"]\n\
                        hypothesis = \"the seed's TCP restarted slow start\"\nscenario = \"s2\"\n\
                        setting = { ssai = true, loss = \"2%\" }\n\
                        control = { ssai = false, loss = \"2%\" }\n";

    #[test]
    fn an_explanation_moves_its_findings_claim_to_its_scenario_with_each_arms_values() {
        let s = study(GOOD).unwrap();
        assert_eq!(s.explanations.len(), 1);
        let e = &s.explanations[0];
        assert_eq!(e.line, 16);
        let arms = e.arms(&s.findings);
        assert_eq!(arms.len(), 1);
        let Judged::Run {
            scenario, filter, ..
        } = &arms[0].with_setting.judged
        else {
            panic!("runs")
        };
        assert_eq!(scenario, "s2");
        // The explanation's value replaces the one `where` fixes.
        assert_eq!(
            filter,
            &BTreeMap::from([
                ("loss".to_string(), "2%".to_string()),
                ("ssai".to_string(), "true".to_string()),
            ])
        );
        let p = |proto: &str, ssai: &str| {
            BTreeMap::from([
                ("protocol".to_string(), proto.to_string()),
                ("loss".to_string(), "2%".to_string()),
                ("ssai".to_string(), ssai.to_string()),
            ])
        };
        assert!(e.judges(&s.findings, "s2", &p("h3", "true")));
        assert!(e.judges(&s.findings, "s2", &p("h1", "false")));
        assert!(
            !e.judges(&s.findings, "s", &p("h1", "false")),
            "another scenario"
        );
        assert!(
            !e.judges(&s.findings, "s2", &p("h2", "false")),
            "not a side"
        );
        assert!(
            !e.judges(&s.findings, "s2", &p("h1", "maybe")),
            "neither arm"
        );
    }

    #[test]
    fn a_setting_of_a_compared_arm_replaces_that_arm_and_nothing_else() {
        let arm = GOOD
            .replace(
                "setting = { ssai = true, loss = \"2%\" }",
                "setting = { protocol = { h3 = \"h3:gquic-cubic\" } }",
            )
            .replace(
                "control = { ssai = false, loss = \"2%\" }",
                "control = { protocol = { h3 = \"h3\" } }",
            );
        let s = study(&arm).unwrap();
        let e = &s.explanations[0];
        assert_eq!(
            e.setting,
            BTreeMap::from([("protocol[h3]".to_string(), "h3:gquic-cubic".to_string())])
        );
        let arms = e.arms(&s.findings);
        let Judged::Run { claim, filter, .. } = &arms[0].with_setting.judged else {
            panic!("runs")
        };
        assert_eq!(claim.sides(), Some(("protocol", "h3:gquic-cubic", "h1")));
        assert_eq!(
            filter,
            &BTreeMap::from([("loss".to_string(), "1%".to_string())]),
            "the arm is no filter"
        );
        let Judged::Run { claim, .. } = &arms[0].control.judged else {
            panic!("runs")
        };
        assert_eq!(claim.sides(), Some(("protocol", "h3", "h1")));
        let p = |proto: &str| {
            BTreeMap::from([
                ("protocol".to_string(), proto.to_string()),
                ("loss".to_string(), "1%".to_string()),
            ])
        };
        assert!(e.judges(&s.findings, "s2", &p("h3:gquic-cubic")));
        assert!(e.judges(&s.findings, "s2", &p("h1")));
        // An arm the finding does not compare is refused, naming it.
        let e = study(&arm.replace("{ h3 = ", "{ h2 = ")).unwrap_err();
        assert!(
            e.starts_with("t.toml:16: explanation") && e.contains("does not compare \"h2\""),
            "{e}"
        );
        let e = study(&arm.replace("protocol = { h3", "page = { h3")).unwrap_err();
        assert!(e.contains("along page"), "{e}");
    }

    #[test]
    fn a_broken_explanation_names_its_line_and_key() {
        for (bad, key, says) in [
            (
                GOOD.replace("[\"x\"]", "[\"z\"]"),
                "explains",
                "no finding \"z\"",
            ),
            (
                GOOD.replace("[\"x\"]", "[\"y\"]"),
                "explains",
                "not runnable",
            ),
            (
                GOOD.replace("[\"x\"]", "[]"),
                "explains",
                "names no finding",
            ),
            (GOOD.replace("\"x-old\"", "\"x\""), "id", "has this id"),
            (
                GOOD.replace("scenario = \"s2\"", "scenario = \"s\""),
                "scenario",
                "a scenario of its own",
            ),
            (
                GOOD.replace(
                    "control = { ssai = false, loss = \"2%\" }",
                    "control = { ssai = false }",
                ),
                "control",
                "same keys",
            ),
            (
                GOOD.replace("ssai = false", "ssai = true"),
                "control",
                "the setting itself",
            ),
            (
                GOOD.replace("setting = { ssai = true, loss = \"2%\" }", "setting = {}"),
                "setting",
                "names no setting",
            ),
            (
                GOOD.replace("the seed's TCP restarted slow start", " "),
                "hypothesis",
                "must not be empty",
            ),
        ] {
            let e = study(&bad).unwrap_err();
            assert!(
                e.starts_with("t.toml:16: explanation")
                    && e.contains(&format!("key \"{key}\""))
                    && e.contains(says),
                "{bad}\n→ {e}"
            );
        }
        let e = study(&GOOD.replace("hypothesis", "because")).unwrap_err();
        assert!(e.contains("because"), "{e}");
    }

    const NONE: &str = "[[no_explanation]]\nexplains = [\"x\"]\nstatus = \"cannot be built\"\n\
                        why = \"the seed names no mechanism\"\n";

    #[test]
    fn a_statement_of_no_explanation_is_kept_and_says_which_kind() {
        let s = study(NONE).unwrap();
        assert_eq!(s.no_explanations.len(), 1);
        let n = &s.no_explanations[0];
        assert_eq!((n.status, n.line), (Unbuilt::CannotBeBuilt, 16));
        assert!(n.covers(&s.findings[0]) && !n.covers(&s.findings[1]));
        assert_eq!(n.text(), "none can be built: the seed names no mechanism");
        let s = study(&NONE.replace("cannot be built", "not built yet")).unwrap();
        assert_eq!(
            s.no_explanations[0].text(),
            "none built yet: the seed names no mechanism"
        );
    }

    #[test]
    fn a_broken_statement_of_no_explanation_names_its_line_and_key() {
        let twice = format!("{NONE}{NONE}");
        let both = format!("{GOOD}{NONE}");
        for (bad, key, says) in [
            (
                NONE.replace("[\"x\"]", "[\"z\"]"),
                "explains",
                "no finding \"z\"",
            ),
            (
                NONE.replace("[\"x\"]", "[\"y\"]"),
                "explains",
                "not runnable",
            ),
            (
                NONE.replace("[\"x\"]", "[]"),
                "explains",
                "names no finding",
            ),
            (
                NONE.replace("the seed names no mechanism", " "),
                "why",
                "must not be empty",
            ),
            (twice, "explains", "line 16 too"),
            (both, "explains", "has an explanation (\"x-old\", line 16)"),
        ] {
            let e = study(&bad).unwrap_err();
            assert!(
                e.contains(": no_explanation: ")
                    && e.contains(&format!("key \"{key}\""))
                    && e.contains(says),
                "{bad}\n→ {e}"
            );
        }
        // A status other than the two is refused by name.
        let e = study(&NONE.replace("cannot be built", "unknown")).unwrap_err();
        assert!(
            e.contains("cannot be built") && e.contains("not built yet"),
            "{e}"
        );
    }

    fn judged(verdict: Verdict) -> Judgement {
        Judgement::bare(verdict)
    }

    #[test]
    fn the_outcome_needs_the_claim_back_with_the_setting_and_absent_without_it() {
        use Verdict::*;
        let no = DoesNotHold { reversed: false };
        let inc = Inconclusive {
            why: "n = 2".into(),
        };
        let shown = NotShown { why: "p".into() };
        assert_eq!(
            Outcome::of(&judged(Holds), &judged(no.clone())),
            Outcome::Explained
        );
        assert_eq!(
            Outcome::of(&judged(Holds), &judged(shown.clone())),
            Outcome::Explained
        );
        assert!(matches!(
            Outcome::of(&judged(Holds), &judged(Holds)),
            Outcome::Inconclusive { why } if why.contains("control too")
        ));
        assert!(matches!(
            Outcome::of(&judged(Holds), &judged(inc.clone())),
            Outcome::Inconclusive { why } if why.contains("control is inconclusive")
        ));
        for v in [
            no.clone(),
            DoesNotHold { reversed: true },
            shown,
            Mixed { cells: vec![] },
        ] {
            assert_eq!(
                Outcome::of(&judged(v), &judged(no.clone())),
                Outcome::NotExplained
            );
        }
        assert!(matches!(
            Outcome::of(&judged(inc), &judged(no)),
            Outcome::Inconclusive { why } if why.contains("with the setting: n = 2")
        ));
    }
}
