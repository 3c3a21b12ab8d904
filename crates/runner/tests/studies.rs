//! Every study file (`studies/*.toml`) parses and names only what exists: its scenarios (in
//! `scenarios/`), setting values some run of them has, compared values on both sides, and
//! metrics the scenario's workload declares.

use std::path::Path;

#[test]
fn every_study_file_validates_against_the_scenarios_and_metrics() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files: Vec<_> = std::fs::read_dir(root.join("studies"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no study files");
    let mut errors = Vec::new();
    let mut short_plans = Vec::new();
    for file in files {
        let name = file.display().to_string();
        let text = std::fs::read_to_string(&file).unwrap();
        let study =
            quiclab_verdict::findings::parse(&text, &name).unwrap_or_else(|e| panic!("{e}"));
        quiclab_verdict::findings::validate(
            &study,
            &name,
            |scenario| {
                let path = root.join("scenarios").join(format!("{scenario}.toml"));
                let text = std::fs::read_to_string(&path).ok()?;
                Some((text, path.display().to_string()))
            },
            |kind, metric| {
                quiclab_workload::kind_metrics(kind)
                    .iter()
                    .find(|m| m.name == metric)
                    .copied()
            },
        )
        .map(|short| short_plans.extend(short.into_iter().map(|s| format!("{}/{s}", study.name))))
        .unwrap_or_else(|e| errors.push(e));
    }
    assert!(errors.is_empty(), "{}", errors.join("\n"));
    // Plans at the fewest pairs a test can decide with have no slack until their scenario runs
    // more repetitions: docs/reproductions.md lists each (and no other), so none is forgotten.
    let docs = std::fs::read_to_string(root.join("docs/reproductions.md")).unwrap();
    let (begin, end) = ("<!-- short plans -->", "<!-- end of short plans -->");
    let listed = &docs[docs.find(begin).expect("the short plans list") + begin.len()
        ..docs.find(end).expect("its end")];
    let listed: Vec<&str> = listed
        .lines()
        .filter_map(|l| l.strip_prefix("- "))
        .collect();
    assert_eq!(
        listed, short_plans,
        "docs/reproductions.md's short plans differ from the study files'"
    );
}

/// The README's table of scenarios names every scenario file (a newcomer finds each one there).
#[test]
fn the_readme_names_every_scenario_file() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(root.join("scenarios")).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".toml") && !readme.contains(&format!("`scenarios/{name}`")) {
            missing.push(name);
        }
    }
    assert!(missing.is_empty(), "README.md does not name: {missing:?}");
}

/// Issues 37 and 56: the findings that hold by construction are calibrations, never counted as
/// reproductions — the handshake's round trips on a fixed-delay link, what 0-RTT saves, FEC's
/// parity share by configuration.
#[test]
fn findings_that_hold_by_construction_are_calibrations() {
    use quiclab_verdict::findings::Class;
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut class = std::collections::BTreeMap::new();
    for file in std::fs::read_dir(root.join("studies")).unwrap().flatten() {
        let text = std::fs::read_to_string(file.path()).unwrap();
        let study = quiclab_verdict::findings::parse(&text, "study").unwrap();
        for f in study.findings {
            class.insert(f.id, f.class);
        }
    }
    for id in [
        "000-2a",
        "002-1a-quic",
        "002-1a-tls12",
        "002-1a-v6",
        "002-1a-0rtt",
        "002-2-v4",
        "002-2-v6",
        "000-5f",
        "001-5",
        "004-3f",
        // Issue 56: these hold by handshake arithmetic — leads of exactly 2 RTT (0-RTT against
        // a resumed TCP + TLS load), 2 against 3 RTT to the first byte, a 1 kB or 10 kB
        // download that is one round trip fewer.
        "000-5f-lead",
        "001-5-lead",
        "002-1b",
        "002-1c-small",
        "002-1c-sizes-small",
    ] {
        assert_eq!(class.get(id), Some(&Class::Calibration), "{id}");
    }
    // The claims they calibrate against stay reproductions.
    for id in ["000-1a", "001-1a", "002-1c-large", "000-5a-quic"] {
        assert_eq!(class.get(id), Some(&Class::Reproduction), "{id}");
    }
}
