//! What Chromium's NetLog says about its QUIC attempts: whether it found the server's Alt-Svc,
//! how many QUIC sessions it started, how many completed their handshake, and why the others
//! closed. A discovery run (`--discover`) keeps this beside the per-object protocols, so that "it
//! stayed on h2" comes with its reason.
//!
//! The file is Chromium's `--log-net-log` JSON: `{"constants": {"logEventTypes": {NAME: id}},
//! "events": [{"type": id, "params": {...}}, ...]}`. A browser killed before it closed the file
//! leaves the array open; the parser closes it.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

/// Chromium's QUIC attempts during a run, from its NetLog.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QuicAttempts {
    /// Requests for which Chromium had an Alt-Svc entry for the origin.
    pub alt_svc_found: u64,
    /// Of those, entries already marked broken (a QUIC attempt failed earlier).
    pub alt_svc_broken: u64,
    /// QUIC sessions started.
    pub sessions: u64,
    /// QUIC sessions whose handshake completed.
    pub handshakes_done: u64,
    /// Why sessions closed, as Chromium logged it (distinct reasons).
    pub close_reasons: Vec<String>,
}

/// Summarises a NetLog's text; None when it is not one.
pub fn quic_attempts(text: &str) -> Option<QuicAttempts> {
    let value: serde_json::Value = serde_json::from_str(text)
        .or_else(|_| {
            // An unterminated log: close the events array and the object.
            let trimmed = text.trim_end().trim_end_matches(',');
            serde_json::from_str(&format!("{trimmed}]}}"))
        })
        .ok()?;
    let types = value["constants"]["logEventTypes"].as_object()?;
    let id = |name: &str| types.get(name).and_then(serde_json::Value::as_u64);
    let (alt_svc, created, done, closed) = (
        id("HTTP_STREAM_JOB_CONTROLLER_ALT_SVC_FOUND"),
        id("QUIC_SESSION_CREATED"),
        id("QUIC_SESSION_HANDSHAKE_DONE"),
        id("QUIC_SESSION_CLOSED"),
    );
    let mut out = QuicAttempts::default();
    let mut reasons = BTreeSet::new();
    for e in value["events"].as_array()? {
        let t = e["type"].as_u64();
        if t.is_none() {
            continue;
        }
        if t == alt_svc {
            out.alt_svc_found += 1;
            if e["params"]["is_broken"].as_bool() == Some(true) {
                out.alt_svc_broken += 1;
            }
        } else if t == created {
            out.sessions += 1;
        } else if t == done {
            out.handshakes_done += 1;
        } else if t == closed
            && let Some(d) = e["params"]["details"].as_str()
        {
            reasons.insert(d.to_string());
        }
    }
    out.close_reasons = reasons.into_iter().collect();
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = r#"{"constants": {"logEventTypes": {"HTTP_STREAM_JOB_CONTROLLER_ALT_SVC_FOUND": 7,
        "QUIC_SESSION_CREATED": 8, "QUIC_SESSION_HANDSHAKE_DONE": 9, "QUIC_SESSION_CLOSED": 10}},
      "events": [
        {"type": 7, "params": {"alt_svc": "quic quiclab.test:443", "is_broken": false}},
        {"type": 8},
        {"type": 10, "params": {"details": "certificate unknown", "from_peer": false}},
        {"type": 10, "params": {"details": "certificate unknown"}},
        {"type": 7, "params": {"alt_svc": "quic quiclab.test:443", "is_broken": true}},
        {"type": 3},"#;

    #[test]
    fn attempts_are_counted_even_in_an_unterminated_log() {
        let a = quic_attempts(LOG).unwrap();
        assert_eq!(
            a,
            QuicAttempts {
                alt_svc_found: 2,
                alt_svc_broken: 1,
                sessions: 1,
                handshakes_done: 0,
                close_reasons: vec!["certificate unknown".into()],
            }
        );
        assert!(quic_attempts("not a log").is_none());
    }
}
