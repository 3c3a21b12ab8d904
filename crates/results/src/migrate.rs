//! Reading what older schemas stored: the only place a stored document is read as untyped JSON.

use quiclab_model::document::{RunDocument, Status};

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
            reason: reason.unwrap_or_default().to_string(),
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
            // The reason column of schema 3 becomes the document's reason.
            RunDocument::TimedOut {
                limit_s: 90.0,
                reason: "t".into(),
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
