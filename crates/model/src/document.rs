//! A run's document (`runs.result`, `attempts.result`): what the run produced, one typed value
//! whatever its outcome, so that a reader never guesses a shape from the status.
//!
//! `R` is the workload's result: `crate::WorkloadOutput`, an enum over every workload's typed
//! result, wherever a run is stored or read (only the store's migration of older schemas reads
//! untyped JSON). The document is the only stored outcome: a run's status and reason are derived
//! from it ([`RunDocument::status`], [`RunDocument::reason`]). Schema 4 stores it as JSON:
//! `{"outcome": "finished", "result": {"kind": "bulk", …}}`,
//! `{"outcome": "timed_out", "limit_s": 60.0, "reason": "…", "partial": {…} | null}`,
//! `{"outcome": "failed", "reason": "…", "partial": {…} | null}`.

use serde::{Deserialize, Serialize};

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
        /// What timed out (empty in documents written before it was stored).
        #[serde(default)]
        reason: String,
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

    /// Why the run did not finish (None: it did).
    pub fn reason(&self) -> Option<String> {
        match self {
            RunDocument::Finished { .. } => None,
            RunDocument::TimedOut {
                limit_s, reason, ..
            } if reason.is_empty() => Some(format!("timed out at its limit of {limit_s:.1} s")),
            RunDocument::TimedOut { reason, .. } | RunDocument::Failed { reason, .. } => {
                Some(reason.clone())
            }
        }
    }

    /// The document of a run that ended with `error` (a timeout stays censored at its limit),
    /// with what it measured until then.
    pub fn of_error(error: &crate::RunError, partial: Option<R>) -> RunDocument<R> {
        match error {
            crate::RunError::Timeout { limit, .. } => RunDocument::TimedOut {
                limit_s: limit.as_secs_f64(),
                reason: error.to_string(),
                partial,
            },
            crate::RunError::Failed(reason) => RunDocument::Failed {
                reason: reason.clone(),
                partial,
            },
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
            RunDocument::TimedOut {
                limit_s,
                reason,
                partial,
            } => RunDocument::TimedOut {
                limit_s,
                reason,
                partial: partial.map(f).transpose()?,
            },
            RunDocument::Failed { reason, partial } => RunDocument::Failed {
                reason,
                partial: partial.map(f).transpose()?,
            },
        })
    }
}

/// How a run ended: what the store's status column says, always derived from the run's document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Failed,
    Timeout,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Failed => "failed",
            Status::Timeout => "timeout",
        }
    }

    /// From the store's text (None: not a status quiclab writes).
    pub fn parse(s: &str) -> Option<Status> {
        match s {
            "ok" => Some(Status::Ok),
            "failed" => Some(Status::Failed),
            "timeout" => Some(Status::Timeout),
            _ => None,
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
                    reason: String::new(),
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
}
