//! Records what a results database must say about the software that produced it: the git commit
//! of the source and the versions of the protocol stacks (read from Cargo.lock).

use std::process::Command;

/// Crates whose versions decide the measured behaviour.
const STACK_CRATES: &[&str] = &[
    "quinn",
    "quinn-proto",
    "h3",
    "h3-quinn",
    "hyper",
    "hyper-util",
    "rustls",
    "tokio-rustls",
    "ring",
    "tokio",
];

fn main() {
    // Read when the script runs, not baked in when it was compiled: cargo reuses a compiled
    // build script across checkouts that share a target directory, and a baked-in path then
    // names another (perhaps deleted) tree, whose commit and lock file are not this build's.
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let root = std::path::Path::new(&manifest_dir).join("../..");
    let git = |args: &[&str]| {
        Command::new("git")
            .arg("-C")
            .arg(&root)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let commit = match git(&["rev-parse", "--short=12", "HEAD"]) {
        Some(c) => {
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|s| !s.is_empty());
            if dirty { format!("{c}-dirty") } else { c }
        }
        None => "unknown".to_string(),
    };
    println!("cargo:rustc-env=QUICLAB_GIT_COMMIT={commit}");
    for f in [".git/HEAD", ".git/index"] {
        let p = root.join(f);
        if p.exists() {
            println!("cargo:rerun-if-changed={}", p.display());
        }
    }

    // The stack versions are part of every results database's environment: a build without
    // them would record an empty list as if no stack had been used.
    let lock = std::fs::read_to_string(root.join("Cargo.lock"))
        .unwrap_or_else(|e| panic!("{}: {e}", root.join("Cargo.lock").display()));
    println!(
        "cargo:rerun-if-changed={}",
        root.join("Cargo.lock").display()
    );
    let mut versions = Vec::new();
    let mut name = None;
    for line in lock.lines() {
        if let Some(n) = line.strip_prefix("name = ") {
            name = Some(n.trim_matches('"').to_string());
        } else if let Some(v) = line.strip_prefix("version = ")
            && let Some(n) = name.take()
            && STACK_CRATES.contains(&n.as_str())
        {
            versions.push(format!("{n}={}", v.trim_matches('"')));
        }
    }
    println!(
        "cargo:rustc-env=QUICLAB_STACK_CRATES={}",
        versions.join(",")
    );
}
