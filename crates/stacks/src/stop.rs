//! Why a player or a flow ended before its end, typed: a run that hit its time limit is censored
//! data (it would have taken at least that long), not a failure, and must reach the results as
//! `timeout` — never as `failed`, which drops the slowest runs out of every comparison.

use std::time::Duration;

pub use quiclab_model::records::StopReason;

/// From a task's error: [`TimeLimitReached`] anywhere in its chain is a timeout.
pub fn reason_of(e: &anyhow::Error) -> StopReason {
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

/// The error a task ends with when the run's time limit stops it (see [`reason_of`]).
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
        let s = reason_of(&e);
        assert!(s.is_timeout(), "{s:?}");
        assert!(
            s.to_string()
                .contains("segment 3 had not arrived at the time limit (60.0 s)")
        );
        let f = reason_of(&anyhow::anyhow!("connection reset"));
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
