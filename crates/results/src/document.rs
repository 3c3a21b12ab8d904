//! A run's document (`runs.result`, `attempts.result`): what the run produced, one typed value
//! whatever its outcome, so that a reader never guesses a shape from the status.
//!
//! `R` is the workload's result (the runner and the report use `quiclab_workload::WorkloadOutput`,
//! an enum over every workload's typed result); readers that only pass documents along use
//! `serde_json::Value`. Schema 4 stores it as JSON:
//! `{"outcome": "finished", "result": {"kind": "bulk", …}}`,
//! `{"outcome": "timed_out", "limit_s": 60.0, "partial": {…} | null}`,
//! `{"outcome": "failed", "reason": "…", "partial": {…} | null}`.

use serde::{Deserialize, Serialize};

use crate::Status;

/// What one run (or one attempt of it) produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum RunDocument<R> {
    /// The run finished; its whole result.
    Finished { result: R },
    /// The run hit its time limit: censored at `limit_s` (it took at least that long). `partial`
    /// holds what its players or flows measured until then, when the workload reports that.
    TimedOut {
        /// NaN (stored as null) only for a schema-3 row that lacked it.
        #[serde(deserialize_with = "f64_or_nan")]
        limit_s: f64,
        partial: Option<R>,
    },
    /// The run failed: why, and what it measured when a result exists (a body that did not match
    /// is a failed run with a result).
    Failed { reason: String, partial: Option<R> },
}

/// serde_json writes NaN as null; read it back as NaN.
fn f64_or_nan<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

impl<R> RunDocument<R> {
    /// The status column this document goes with.
    pub fn status(&self) -> Status {
        match self {
            RunDocument::Finished { .. } => Status::Ok,
            RunDocument::TimedOut { .. } => Status::Timeout,
            RunDocument::Failed { .. } => Status::Failed,
        }
    }

    /// The result, whole or partial.
    pub fn result(&self) -> Option<&R> {
        match self {
            RunDocument::Finished { result } => Some(result),
            RunDocument::TimedOut { partial, .. } | RunDocument::Failed { partial, .. } => {
                partial.as_ref()
            }
        }
    }

    /// The time limit a timed-out run hit (s).
    pub fn time_limit_s(&self) -> Option<f64> {
        match self {
            RunDocument::TimedOut { limit_s, .. } => Some(*limit_s).filter(|l| l.is_finite()),
            _ => None,
        }
    }

    /// The same document with its result converted.
    pub fn try_map<S, E>(self, f: impl Fn(R) -> Result<S, E>) -> Result<RunDocument<S>, E> {
        Ok(match self {
            RunDocument::Finished { result } => RunDocument::Finished { result: f(result)? },
            RunDocument::TimedOut { limit_s, partial } => RunDocument::TimedOut {
                limit_s,
                partial: partial.map(f).transpose()?,
            },
            RunDocument::Failed { reason, partial } => RunDocument::Failed {
                reason,
                partial: partial.map(f).transpose()?,
            },
        })
    }
}

/// Schema 3 stored a run's result document as the workload wrote it (a timed-out run: the
/// document with `time_limit_s` added, or only `{"time_limit_s": …}`; a failed run: the document
/// or NULL), without the workload's kind, and called two different things `switches`. This is that
/// document as schema 4 stores it: enveloped by outcome, tagged with `kind`, `switches` renamed to
/// `bitrate_switches` (a count) or `network_switches` (a list).
pub fn upgrade_v3(
    old: Option<serde_json::Value>,
    status: Status,
    reason: Option<&str>,
    kind: &str,
) -> RunDocument<serde_json::Value> {
    let mut limit_s = None;
    let result = old.and_then(|v| match v {
        serde_json::Value::Object(mut m) => {
            if let Some(t) = m.remove("time_limit_s") {
                limit_s = t.as_f64();
            }
            if m.is_empty() {
                return None;
            }
            rename_switches(&mut m, kind);
            if let Some(players) = m.get_mut("players").and_then(|p| p.as_array_mut()) {
                for p in players.iter_mut().filter_map(|p| p.as_object_mut()) {
                    // A player's flattened metrics: `switches` was always its bitrate switches.
                    if let Some(n) = p.remove("switches") {
                        p.insert("bitrate_switches".into(), n);
                    }
                }
            }
            m.insert("kind".into(), kind.into());
            Some(serde_json::Value::Object(m))
        }
        serde_json::Value::Null => None,
        other => Some(other),
    });
    match status {
        Status::Ok => match result {
            Some(result) => RunDocument::Finished { result },
            // An ok run without a document cannot be read as one: say so rather than invent it.
            None => RunDocument::Failed {
                reason: "stored as ok by schema 3 without a result document".into(),
                partial: None,
            },
        },
        Status::Timeout => RunDocument::TimedOut {
            // Schema 3 always wrote the limit of a timed-out run; NaN says it was not there.
            limit_s: limit_s.unwrap_or(f64::NAN),
            partial: result,
        },
        Status::Failed => RunDocument::Failed {
            reason: reason.unwrap_or("failed (no reason stored)").to_string(),
            partial: result,
        },
    }
}

/// `switches` of schema 3: video's count of bitrate switches, or (with a switch schedule) its
/// list of network switches; bulk's list of network switches.
fn rename_switches(m: &mut serde_json::Map<String, serde_json::Value>, kind: &str) {
    let Some(v) = m.remove("switches") else {
        return;
    };
    match v {
        serde_json::Value::Array(_) => {
            m.insert("network_switches".into(), v);
        }
        // Video's count; `bitrate_switches` was always written beside it.
        serde_json::Value::Number(_) if kind == "video" => {
            m.entry("bitrate_switches").or_insert(v);
        }
        serde_json::Value::Null => {}
        other => {
            m.insert("switches".into(), other);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn documents_say_their_outcome_and_round_trip() {
        for (doc, status) in [
            (
                RunDocument::Finished {
                    result: json!({"kind": "bulk", "total_ms": 1.0}),
                },
                Status::Ok,
            ),
            (
                RunDocument::TimedOut {
                    limit_s: 60.0,
                    partial: None,
                },
                Status::Timeout,
            ),
            (
                RunDocument::Failed {
                    reason: "x".into(),
                    partial: Some(json!({"kind": "bulk"})),
                },
                Status::Failed,
            ),
        ] {
            assert_eq!(doc.status(), status);
            let text = serde_json::to_string(&doc).unwrap();
            let back: RunDocument<serde_json::Value> = serde_json::from_str(&text).unwrap();
            assert_eq!(back, doc);
        }
        let t: RunDocument<serde_json::Value> = serde_json::from_value(
            json!({"outcome": "timed_out", "limit_s": 5.0, "partial": null}),
        )
        .unwrap();
        assert_eq!(t.time_limit_s(), Some(5.0));
        assert!(
            serde_json::from_value::<RunDocument<serde_json::Value>>(json!({"outcome": "maybe"}))
                .is_err()
        );
    }

    #[test]
    fn schema_3_documents_are_enveloped_and_renamed() {
        let v = upgrade_v3(
            Some(json!({"total_ms": 3.0, "switches": [{"at_s": 1.0}]})),
            Status::Ok,
            None,
            "bulk",
        );
        assert_eq!(
            v,
            RunDocument::Finished {
                result: json!({"kind": "bulk", "total_ms": 3.0, "network_switches": [{"at_s": 1.0}]})
            }
        );
        let v = upgrade_v3(
            Some(json!({"switches": 4, "bitrate_switches": 4, "players": [{"switches": 4}]})),
            Status::Ok,
            None,
            "video",
        );
        assert_eq!(
            v.result().unwrap(),
            &json!({"kind": "video", "bitrate_switches": 4, "players": [{"bitrate_switches": 4}]})
        );
        // A timeout with only its limit, and one with what its players measured.
        assert_eq!(
            upgrade_v3(
                Some(json!({"time_limit_s": 90.0})),
                Status::Timeout,
                Some("t"),
                "bulk"
            ),
            RunDocument::TimedOut {
                limit_s: 90.0,
                partial: None
            }
        );
        let v = upgrade_v3(
            Some(json!({"time_limit_s": 90.0, "mix": "h1"})),
            Status::Timeout,
            None,
            "video",
        );
        assert_eq!(v.time_limit_s(), Some(90.0));
        assert_eq!(v.result().unwrap()["mix"], "h1");
        assert_eq!(
            upgrade_v3(None, Status::Failed, Some("lab"), "page"),
            RunDocument::Failed {
                reason: "lab".into(),
                partial: None
            }
        );
    }
}
