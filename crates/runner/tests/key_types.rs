//! Every scenario key's row says which TOML types a scenario may write it in; each row's example,
//! written in each of those types into a scenario, passes the scenario checker and builds a run
//! (the path `quiclab run` takes: parse, plan, prepare). Where the typed value is the example
//! itself (`max_streams = 6` beside `max_streams = "6"`), both build the same run: the row's
//! types, its parser and the generated docs cannot drift apart.

use quiclab_model::WorkloadKind;
use quiclab_model::keys::{KEYS, Key, Side, Toml};
use std::path::Path;

/// The example in TOML type `t`: None when the example has no form in that type (a row that
/// declares the type must then still accept the number the example starts with).
fn literal(key: &str, example: &str, t: Toml) -> (String, bool) {
    // A bare number is a loss or reordering fraction below 1: the example's "1%" is 0.01, and
    // the one whole number a probability can be is 0. A bare window is a count of bytes.
    match (key, t) {
        ("loss" | "up-loss" | "down-loss", Toml::Integer) => return ("0".into(), false),
        ("loss" | "up-loss" | "down-loss", Toml::Float) => return ("0.01".into(), true),
        ("reorder", Toml::Integer) => return ("0".into(), false),
        ("reorder", Toml::Float) => return ("0.02".into(), true),
        ("quic_stream_window", Toml::Integer) => return ("64000".into(), true),
        ("quic_window", Toml::Integer) => return ("1000000".into(), true),
        // A bare CPU share is a fraction of one core: 1 is the whole core.
        ("client-cpu" | "server-cpu", Toml::Integer) => return ("1".into(), false),
        ("client-cpu", Toml::Float) => return ("0.25".into(), true),
        ("server-cpu", Toml::Float) => return ("0.5".into(), true),
        _ => {}
    }
    let leading: String = example
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    match t {
        Toml::String => (format!("{example:?}"), true),
        Toml::Bool => (example.to_string(), true),
        Toml::Integer => match example.parse::<i64>() {
            Ok(n) => (n.to_string(), true),
            Err(_) => (
                leading.split('.').next().unwrap_or_default().to_string(),
                false,
            ),
        },
        Toml::Float => match example.parse::<f64>() {
            Ok(_) if example.contains('.') => (example.to_string(), true),
            Ok(n) => (format!("{n:.1}"), false),
            Err(_) => (
                format!("{:.1}", leading.parse::<f64>().unwrap_or(0.0)),
                false,
            ),
        },
    }
}

/// What a run of `kind` needs beside the key under test, and what the key needs beside it.
fn companions(kind: WorkloadKind, key: &str) -> Vec<(Side, &'static str, &'static str)> {
    let mut with = match kind {
        WorkloadKind::Bulk => vec![(Side::Protocol, "protocol", "\"h3\"")],
        WorkloadKind::Page => vec![
            (Side::Protocol, "protocol", "\"h3\""),
            (Side::Workload, "page", "\"carlucci-small\""),
        ],
        WorkloadKind::Flows => vec![
            (Side::Workload, "flows", "\"h3 + h1\""),
            (Side::Workload, "duration", "\"10s\""),
        ],
        WorkloadKind::Video => vec![(Side::Workload, "players", "\"h3\"")],
    };
    let needs: &[(Side, &str, &str)] = match key {
        "zero_rtt" => &[(Side::Protocol, "resume", "true")],
        "gquic_n" => &[(Side::Protocol, "cc", "\"gquic-cubic\"")],
        "discover" | "shards" => &[(Side::Workload, "browser", "\"chromium\"")],
        "parallel" => &[(Side::Workload, "players", "\"h3\"")],
        "connections" => &[(Side::Workload, "players", "\"h1\"")],
        // curl speaks h1 and h2 only.
        "client" => &[(Side::Protocol, "protocol", "\"h2\"")],
        "switch-gap" | "on_switch" | "switch_timeout" | "migrate_delay" => {
            &[(Side::Link, "switch", "\"wifi@0s,lte@10s\"")]
        }
        "transfer_timeout" => &[
            (Side::Link, "switch", "\"wifi@0s,lte@10s\""),
            (Side::Workload, "players", "\"h1\""),
        ],
        "reorder-delay" => &[(Side::Link, "reorder", "\"2%\"")],
        "fec_in_cwnd" => &[(Side::Protocol, "fec", "2")],
        "seek_check" => &[(Side::Workload, "seek", "\"20s:40s\"")],
        _ => &[],
    };
    // A link with a delay (its queues default to a bandwidth-delay product), or, for the delay
    // keys themselves, queues in packets.
    match key {
        // A switch schedule sets each network's rate and delay.
        "switch" | "switch-gap" | "on_switch" | "switch_timeout" | "migrate_delay"
        | "transfer_timeout" => {}
        // A profile's steps set the rate and the delay.
        "profile" | "up-profile" | "down-profile" => {}
        "rtt" | "delay" | "up-delay" | "down-delay" => {
            with.push((Side::Link, "rate", "\"10mbit\""));
            with.push((Side::Link, "queue", "\"100pkt\""));
        }
        _ => {
            with.push((Side::Link, "rate", "\"10mbit\""));
            with.push((Side::Link, "rtt", "\"50ms\""));
        }
    }
    for n in needs {
        with.retain(|(_, k, _)| *k != n.1);
        with.push(*n);
    }
    // A flow mix is given a duration or a size, not both.
    if kind == WorkloadKind::Flows && key == "size" {
        with.retain(|(_, k, _)| *k != "duration");
    }
    with.retain(|(_, k, _)| *k != key);
    with
}

fn scenario(kind: WorkloadKind, key: &Key, value: &str) -> String {
    let mut entries = companions(kind, key.name);
    entries.push((key.side, key.name, value));
    let mut text = "name = \"key-types\"\nrepetitions = 1\n".to_string();
    for (side, k, v) in &entries {
        if *side == Side::Run {
            text.push_str(&format!("{k} = {v}\n"));
        }
    }
    let kind_name = kind.def().name;
    text.push_str(&format!("\n[workload]\nkind = \"{kind_name}\"\n"));
    for (table, side) in [
        ("", Side::Workload),
        ("[link]", Side::Link),
        ("[protocol]", Side::Protocol),
    ] {
        if !table.is_empty() && entries.iter().any(|(s, ..)| *s == side) {
            text.push_str(&format!("\n{table}\n"));
        }
        for (s, k, v) in &entries {
            if *s == side {
                text.push_str(&format!("{k} = {v}\n"));
            }
        }
    }
    text
}

/// The one run of a scenario, prepared as `quiclab run` prepares it (Debug of its link and work).
fn prepared(text: &str) -> Result<String, String> {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("key-types.toml");
    let s =
        quiclab_experiment::scenario::parse(text, "key-types.toml").map_err(|e| e.to_string())?;
    let plan = quiclab_experiment::plan::expand(&s);
    assert_eq!(plan.len(), 1, "{text}");
    let run = quiclab_runner::Preparer::new(&s, &file)
        .prepare(&plan[0])
        .map_err(|e| format!("{e:#}"))?;
    Ok(format!("{:?}\n{:?}", run.link, run.work))
}

#[test]
fn every_key_example_in_every_declared_toml_type_passes_the_checker_and_builds() {
    let chromium = Path::new("/usr/lib/chromium/chromium").exists();
    let mut checked = 0;
    let mut failures = Vec::new();
    for key in KEYS {
        if !key.is_scenario_key() || key.example.is_empty() {
            continue;
        }
        // Discovery needs Chromium to build (the run checks the browser is there).
        if matches!(key.name, "discover" | "shards") && !chromium {
            failures.push(format!(
                "{}: /usr/lib/chromium/chromium is missing",
                key.name
            ));
            continue;
        }
        let kind = WorkloadKind::ALL
            .into_iter()
            .find(|w| key.applies_to(*w))
            .unwrap();
        let as_string = prepared(&scenario(kind, key, &format!("{:?}", key.example)));
        for &t in key.toml {
            let (value, exact) = literal(key.name, key.example, t);
            let text = scenario(kind, key, &value);
            checked += 1;
            match prepared(&text) {
                Err(e) => failures.push(format!(
                    "{} = {value} ({}): refused: {e}\n{text}",
                    key.name,
                    t.name()
                )),
                Ok(run) if exact && t != Toml::Bool && Ok(&run) != as_string.as_ref() => failures
                    .push(format!(
                        "{} = {value} ({}) builds another run than {:?}",
                        key.name,
                        t.name(),
                        key.example
                    )),
                Ok(_) => {}
            }
        }
    }
    assert!(checked > 40, "only {checked} key/type pairs checked");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
