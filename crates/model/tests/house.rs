//! The house as the docs describe it: README.md and docs/architecture.md name every crate, doc,
//! study and command (and README every scenario), and the readers of results — report, results,
//! verdict and the model itself — have no path to tokio or to a lab through the workspace's crates.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(p: &str) -> String {
    std::fs::read_to_string(root().join(p)).unwrap_or_else(|e| panic!("{p}: {e}"))
}

fn names_in(dir: &str, ext: &str) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(root().join(dir))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| ext.is_empty() || n.ends_with(ext))
        .collect();
    out.sort();
    out
}

/// The subcommands of `quiclab`, from the CLI's `Command` enum (kebab-case, the hidden `child`
/// left out).
fn commands() -> Vec<String> {
    let main = read("crates/cli/src/lib.rs");
    let body = &main[main.find("enum Command {").unwrap()..];
    let body = &body[..body.find("\n}").unwrap()];
    body.lines()
        .filter_map(|l| {
            let l = l.strip_prefix("    ")?;
            let name: String = l.chars().take_while(|c| c.is_ascii_alphabetic()).collect();
            (!name.is_empty() && name.chars().next()?.is_ascii_uppercase()).then_some(name)
        })
        .filter(|n| n != "Child")
        .map(|n| n.to_lowercase())
        .collect()
}

#[test]
fn readme_and_architecture_name_every_part() {
    let readme = read("README.md");
    let arch = read("docs/architecture.md");
    let mut missing = Vec::new();
    for krate in names_in("crates", "") {
        let toml = read(&format!("crates/{krate}/Cargo.toml"));
        let package = toml
            .lines()
            .find_map(|l| l.strip_prefix("name = \""))
            .map(|n| n.trim_end_matches('"').to_string())
            .unwrap();
        for (doc, text) in [("README.md", &readme), ("docs/architecture.md", &arch)] {
            if !text.contains(&package) {
                missing.push(format!("{doc}: crate {package}"));
            }
        }
    }
    for doc in names_in("docs", ".md") {
        if !readme.contains(&format!("docs/{doc}")) {
            missing.push(format!("README.md: docs/{doc}"));
        }
        if doc != "architecture.md" && !arch.contains(&doc) {
            missing.push(format!("docs/architecture.md: {doc}"));
        }
    }
    for study in names_in("studies", ".toml") {
        let stem = study.trim_end_matches(".toml");
        for (doc, text) in [("README.md", &readme), ("docs/architecture.md", &arch)] {
            if !text.contains(stem) {
                missing.push(format!("{doc}: study {stem}"));
            }
        }
    }
    for scenario in names_in("scenarios", ".toml") {
        if !readme.contains(&format!("`scenarios/{scenario}`")) {
            missing.push(format!("README.md: scenario {scenario}"));
        }
    }
    let commands = commands();
    assert!(commands.len() >= 15, "{commands:?}");
    for c in &commands {
        for (doc, text) in [("README.md", &readme), ("docs/architecture.md", &arch)] {
            let named = [format!("`quiclab {c}"), format!("`{c}`"), format!("`{c} ")];
            if !named.iter().any(|n| text.contains(n.as_str())) {
                missing.push(format!("{doc}: command {c}"));
            }
        }
    }
    assert!(missing.is_empty(), "not named: {missing:#?}");
}

/// Every workspace crate's normal dependencies, from its Cargo.toml.
fn dependencies() -> BTreeMap<String, BTreeSet<String>> {
    let mut out = BTreeMap::new();
    for krate in names_in("crates", "") {
        let toml = read(&format!("crates/{krate}/Cargo.toml"));
        let name = toml
            .lines()
            .find_map(|l| l.strip_prefix("name = \""))
            .map(|n| n.trim_end_matches('"').to_string())
            .unwrap();
        let mut deps = BTreeSet::new();
        let mut in_deps = false;
        for line in toml.lines() {
            let line = line.trim();
            if line.starts_with('[') {
                in_deps = line == "[dependencies]";
                continue;
            }
            if in_deps && !line.starts_with('#') && !line.is_empty() {
                let dep = line.split(['.', ' ', '=']).next().unwrap().to_string();
                deps.insert(dep);
            }
        }
        out.insert(name, deps);
    }
    out
}

#[test]
fn the_readers_of_results_reach_no_runtime_and_no_lab() {
    let deps = dependencies();
    let shells = [
        "tokio",
        "quinn",
        "hyper",
        "h3",
        "tokio-rustls",
        "quiclab-lab",
        "quiclab-stacks",
        "quiclab-browser",
        "quiclab-workload",
        "tun-rs",
    ];
    for start in [
        "quiclab-model",
        "quiclab-report",
        "quiclab-results",
        "quiclab-verdict",
    ] {
        let mut seen = BTreeSet::new();
        let mut todo = vec![start.to_string()];
        while let Some(c) = todo.pop() {
            if !seen.insert(c.clone()) {
                continue;
            }
            for d in deps.get(&c).into_iter().flatten() {
                assert!(
                    !shells.contains(&d.as_str()),
                    "{start} reaches {d} through {c}"
                );
                if deps.contains_key(d) {
                    todo.push(d.clone());
                }
            }
        }
    }
    // The sans-IO link model needs no TUN crate either.
    assert!(
        !deps["quiclab-link"].contains("tun-rs"),
        "quiclab-link depends on tun-rs"
    );
}

/// The source of a crate without its tests (files named tests.rs, and everything from a line
/// `#[cfg(test)]` on).
fn non_test_source(dir: &Path, out: &mut Vec<(PathBuf, String)>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "tests") {
                non_test_source(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs")
            && path.file_name().is_some_and(|n| n != "tests.rs")
        {
            let text = std::fs::read_to_string(&path).unwrap();
            let end = text.find("#[cfg(test)]").unwrap_or(text.len());
            out.push((path, text[..end].to_string()));
        }
    }
}

/// `model` is plain data: nothing it reaches opens a file or socket, starts a process or thread,
/// or reads a clock. External crates are allowed by name (parsers, serialisation, seeded random
/// numbers, histograms); the workspace crates it reaches are searched for the std and libc calls
/// that would do I/O.
#[test]
fn the_model_reaches_no_crate_that_does_io() {
    let deps = dependencies();
    let allowed_external = [
        "serde",
        "serde_json",
        "anyhow",
        "thiserror",
        "toml",
        "rand",
        "rand_chacha",
        "hdrhistogram",
    ];
    let forbidden = [
        "std::fs",
        "std::net::TcpStream",
        "std::net::UdpSocket",
        "std::net::TcpListener",
        "std::process",
        "std::thread",
        "Instant::now",
        "SystemTime::now",
        "libc::",
        "File::open",
    ];
    let mut reached = BTreeSet::new();
    let mut todo = vec!["quiclab-model".to_string()];
    let mut found = Vec::new();
    while let Some(c) = todo.pop() {
        if !reached.insert(c.clone()) {
            continue;
        }
        for d in deps.get(&c).into_iter().flatten() {
            if deps.contains_key(d) {
                todo.push(d.clone());
            } else if !allowed_external.contains(&d.as_str()) {
                found.push(format!("{c} depends on {d}"));
            }
        }
    }
    assert!(reached.len() >= 5, "{reached:?}");
    for krate in &reached {
        let dir = root()
            .join("crates")
            .join(krate.trim_start_matches("quiclab-"))
            .join("src");
        let mut files = Vec::new();
        non_test_source(&dir, &mut files);
        assert!(!files.is_empty(), "{}", dir.display());
        for (path, text) in files {
            for f in forbidden {
                if text.contains(f) {
                    found.push(format!("{}: {f}", path.display()));
                }
            }
        }
    }
    assert!(found.is_empty(), "model reaches I/O: {found:#?}");
}
