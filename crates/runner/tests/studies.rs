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
                    .any(|m| m.name == metric)
            },
        )
        .unwrap_or_else(|e| panic!("{e}"));
    }
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
