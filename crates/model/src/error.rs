//! A run that did not produce a result, and why.

use std::time::Duration;

/// How a run did not produce a result.
#[derive(Debug)]
pub enum RunError {
    /// The workload did not finish within its time limit (the runner stores status `timeout`).
    Timeout { limit: Duration, detail: String },
    /// Anything else, with its reason.
    Failed(String),
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Timeout { limit, detail } => write!(
                f,
                "did not finish within its time limit of {:.1} s{}",
                limit.as_secs_f64(),
                if detail.is_empty() {
                    String::new()
                } else {
                    format!(": {detail}")
                }
            ),
            RunError::Failed(reason) => f.write_str(reason),
        }
    }
}

impl std::error::Error for RunError {}

impl RunError {
    /// A player's, flow's or download's typed stop as the run's error: a timeout stays one.
    pub fn from_stop(stop: &crate::records::StopReason) -> RunError {
        match stop {
            crate::records::StopReason::TimedOut { limit_s, detail } => RunError::Timeout {
                limit: Duration::from_secs_f64(*limit_s),
                detail: detail.clone(),
            },
            crate::records::StopReason::Failed { reason } => RunError::Failed(reason.clone()),
        }
    }

    /// The run's error from several parts' stops (players, flows), each labelled: any failure
    /// makes the run failed; only when every stopped part timed out is the run a timeout.
    pub fn from_stops<'a>(
        stops: impl IntoIterator<Item = (String, &'a crate::records::StopReason)>,
    ) -> Option<RunError> {
        let stops: Vec<_> = stops.into_iter().collect();
        let text = stops
            .iter()
            .map(|(label, s)| format!("{label}: {}", s.text()))
            .collect::<Vec<_>>()
            .join("; ");
        let limit = stops.iter().find_map(|(_, s)| match s {
            crate::records::StopReason::TimedOut { limit_s, .. } => Some(*limit_s),
            _ => None,
        });
        match (
            stops.is_empty(),
            stops.iter().all(|(_, s)| s.is_timeout()),
            limit,
        ) {
            (true, _, _) => None,
            (false, true, Some(limit_s)) => Some(RunError::Timeout {
                limit: Duration::from_secs_f64(limit_s),
                detail: text,
            }),
            _ => Some(RunError::Failed(text)),
        }
    }
}

impl From<anyhow::Error> for RunError {
    fn from(e: anyhow::Error) -> Self {
        RunError::Failed(format!("{e:#}"))
    }
}
