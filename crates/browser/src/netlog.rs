//! What Chromium's NetLog says about its QUIC attempts: whether it found the server's Alt-Svc,
//! how many QUIC sessions it started, how many completed their handshake, and why the others
//! closed. A discovery run (`--discover`) keeps this beside the per-object protocols, so that "it
//! stayed on h2" comes with its reason.
//!
//! The file is Chromium's `--log-net-log` JSON: `{"constants": {"logEventTypes": {NAME: id}},
//! "events": [{"type": id, "params": {...}}, ...]}`. A browser killed before it closed the file
//! leaves the array open; the parser closes it.

pub use quiclab_model::records::{Handshakes, QuicAttempts};
use std::collections::BTreeSet;

/// A NetLog's JSON, also when Chromium was killed before it closed the events array.
fn parse(text: &str) -> Option<serde_json::Value> {
    serde_json::from_str(text)
        .or_else(|_| {
            // An unterminated log: close the events array and the object.
            let trimmed = text.trim_end().trim_end_matches(',');
            serde_json::from_str(&format!("{trimmed}]}}"))
        })
        .ok()
}

/// Summarises a NetLog's text; None when it is not one.
pub fn quic_attempts(text: &str) -> Option<QuicAttempts> {
    let value = parse(text)?;
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

/// Counts the handshakes of a warm load's measured navigation, which started at `measured_unix_ms`
/// (wall clock, ms since the epoch), and the connections begun between `closed_unix_ms` (when the
/// warm-up's connections were closed) and then. A NetLog's event times are ms of Chromium's
/// monotonic clock; `constants.timeTickOffset` maps them to the wall clock. None when the text is
/// not a NetLog.
pub fn warm_handshakes(
    text: &str,
    closed_unix_ms: f64,
    measured_unix_ms: f64,
) -> Option<Handshakes> {
    let value = parse(text)?;
    let constants = &value["constants"];
    let types = constants["logEventTypes"].as_object()?;
    let id = |name: &str| types.get(name).and_then(serde_json::Value::as_u64);
    let number = |v: &serde_json::Value| {
        v.as_f64()
            .or_else(|| v.as_str().and_then(|s| s.parse::<f64>().ok()))
    };
    let offset = number(&constants["timeTickOffset"])?;
    let (ssl_connect, quic_created, quic_params_resumed, zero_rtt_state) = (
        id("SSL_CONNECT"),
        id("QUIC_SESSION_CREATED"),
        id("QUIC_SESSION_TRANSPORT_PARAMETERS_RESUMED"),
        id("QUIC_SESSION_ZERO_RTT_STATE"),
    );
    let mut out = Handshakes::default();
    for e in value["events"].as_array()? {
        let Some(t) = e["type"].as_u64() else {
            continue;
        };
        let Some(time) = number(&e["time"]) else {
            continue;
        };
        let at = time + offset;
        if at <= closed_unix_ms {
            continue;
        }
        let params = &e["params"];
        let phase = e["phase"].as_u64();
        if at <= measured_unix_ms {
            let begins_connection =
                (Some(t) == ssl_connect && phase == Some(PHASE_BEGIN)) || Some(t) == quic_created;
            if begins_connection {
                out.opened_between_loads += 1;
            }
            continue;
        }
        if Some(t) == ssl_connect && phase == Some(PHASE_END) {
            if params.get("version").is_some() {
                out.tls += 1;
                if params["is_resumed"].as_bool() == Some(true) {
                    out.tls_resumed += 1;
                }
            }
        } else if Some(t) == quic_created {
            out.quic += 1;
        } else if Some(t) == quic_params_resumed {
            out.quic_resumed += 1;
        } else if Some(t) == zero_rtt_state {
            // Logged once per session when its handshake completes: NotAttempted,
            // AttemptedAndSucceeded or AttemptedAndRejected.
            match params["state"].as_str() {
                Some("AttemptedAndSucceeded") => out.quic_zero_rtt_accepted += 1,
                Some("AttemptedAndRejected") => out.quic_zero_rtt_rejected += 1,
                _ => {}
            }
        }
    }
    Some(out)
}

/// NetLog's phases of the events that begin and end a span (an instant event's is 0).
const PHASE_BEGIN: u64 = 1;
const PHASE_END: u64 = 2;

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

    /// Shaped like Chromium 156's events: a cold QUIC session and an h1 connection before the
    /// split, then a resumed h1 connection, a fresh one and a QUIC session resumed with 0-RTT.
    const WARM_LOG: &str = r#"{"constants": {"timeTickOffset": "1000000",
        "logEventTypes": {"SSL_CONNECT": 1, "QUIC_SESSION_CREATED": 2,
        "QUIC_SESSION_TRANSPORT_PARAMETERS_RESUMED": 3, "QUIC_SESSION_ZERO_RTT_STATE": 4}},
      "events": [
        {"time": "100", "type": 2, "phase": 0},
        {"time": "150", "type": 4, "phase": 0, "params": {"state": "NotAttempted"}},
        {"time": "160", "type": 1, "phase": 1},
        {"time": "190", "type": 1, "phase": 2, "params": {"version": "TLS 1.3", "is_resumed": false}},
        {"time": "500", "type": 1, "phase": 2, "params": {"version": "TLS 1.3", "is_resumed": true}},
        {"time": "501", "type": 1, "phase": 2, "params": {"version": "TLS 1.3", "is_resumed": false}},
        {"time": "502", "type": 1, "phase": 2, "params": {"net_error": -105}},
        {"time": "510", "type": 2, "phase": 0},
        {"time": "511", "type": 3, "phase": 0},
        {"time": "600", "type": 4, "phase": 0, "params": {"state": "AttemptedAndSucceeded"}},
        {"time": "601", "type": 4, "phase": 0, "params": {"state": "AttemptedAndRejected"}},"#;

    #[test]
    fn handshakes_are_counted_after_the_split_only() {
        let h = warm_handshakes(WARM_LOG, 1_000_300.0, 1_000_400.0).unwrap();
        assert_eq!(
            h,
            Handshakes {
                tls: 2,
                tls_resumed: 1,
                quic: 1,
                quic_resumed: 1,
                quic_zero_rtt_accepted: 1,
                quic_zero_rtt_rejected: 1,
                opened_between_loads: 0,
            }
        );
        assert_eq!(h.resumed(), 2);
        // Everything counts before the first event; nothing after the last.
        let all = warm_handshakes(WARM_LOG, 0.0, 0.0).unwrap();
        assert_eq!((all.tls, all.quic), (3, 2));
        assert_eq!(
            warm_handshakes(WARM_LOG, 2e6, 2e6).unwrap(),
            Handshakes::default()
        );
        // A connection begun between the close and the measured navigation is counted apart.
        let gap = warm_handshakes(WARM_LOG, 1_000_300.0, 1_000_600.0).unwrap();
        assert_eq!(gap.opened_between_loads, 1);
        assert_eq!(gap.quic, 0);
        assert!(warm_handshakes("not a log", 0.0, 0.0).is_none());
        // A log without the clock's offset cannot be split.
        assert!(warm_handshakes(LOG, 0.0, 0.0).is_none());
    }

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
