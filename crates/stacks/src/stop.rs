//! Why a player or a flow ended before its end, typed: a run that hit its time limit is censored
//! data (it would have taken at least that long), not a failure, and must reach the results as
//! `timeout` — never as `failed`, which drops the slowest runs out of every comparison.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Why a player or a flow stopped early.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StopReason {
    /// The run's time limit passed first.
    TimedOut { limit_s: f64, detail: String },
    /// Anything else (an I/O error, a server error, a stall that gave up, bytes missing).
    Failed { reason: String },
}

impl StopReason {
    /// From a task's error: [`TimeLimitReached`] anywhere in its chain is a timeout.
    pub fn of(e: &anyhow::Error) -> StopReason {
        match e.chain().find_map(|c| c.downcast_ref::<TimeLimitReached>()) {
            Some(t) => StopReason::TimedOut {
                limit_s: t.limit.as_secs_f64(),
                detail: format!("{e:#}"),
            },
            None => StopReason::Failed {
                reason: format!("{e:#}"),
            },
        }
    }

    pub fn is_timeout(&self) -> bool {
        matches!(self, StopReason::TimedOut { .. })
    }

    /// The text that describes it.
    pub fn text(&self) -> &str {
        match self {
            StopReason::TimedOut { detail, .. } => detail,
            StopReason::Failed { reason } => reason,
        }
    }

    /// The text that describes it (appended to by callers that learn more).
    pub fn text_mut(&mut self) -> &mut String {
        match self {
            StopReason::TimedOut { detail, .. } => detail,
            StopReason::Failed { reason } => reason,
        }
    }
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StopReason::TimedOut { limit_s, detail } => {
                write!(f, "timed out at its limit of {limit_s:.1} s: {detail}")
            }
            StopReason::Failed { reason } => f.write_str(reason),
        }
    }
}

/// The error a task ends with when the run's time limit stops it (see [`StopReason::of`]).
#[derive(Debug, Clone)]
pub struct TimeLimitReached {
    pub limit: Duration,
    pub what: String,
}

impl std::fmt::Display for TimeLimitReached {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} at the time limit ({:.1} s)",
            self.what,
            self.limit.as_secs_f64()
        )
    }
}

impl std::error::Error for TimeLimitReached {}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    #[test]
    fn a_time_limit_anywhere_in_the_chain_is_a_timeout() {
        let e: anyhow::Error = TimeLimitReached {
            limit: Duration::from_secs(60),
            what: "segment 3 had not arrived".into(),
        }
        .into();
        let e = Err::<(), _>(e).context("player h3").unwrap_err();
        let s = StopReason::of(&e);
        assert!(s.is_timeout(), "{s:?}");
        assert!(
            s.to_string()
                .contains("segment 3 had not arrived at the time limit (60.0 s)")
        );
        let f = StopReason::of(&anyhow::anyhow!("connection reset"));
        assert_eq!(
            f,
            StopReason::Failed {
                reason: "connection reset".into()
            }
        );
        let json = serde_json::to_string(&s).unwrap();
        assert!(json.contains("\"kind\":\"timed_out\""), "{json}");
    }
}
