//! What a results database records about the machine and software of each session.

use std::collections::BTreeMap;

use quiclab_results::Environment;

/// The environment of this process: quiclab's version and commit, kernel, CPU, the stacks' crates.
pub fn current() -> Environment {
    let uts = nix::sys::utsname::uname().ok();
    let field = |f: fn(&nix::sys::utsname::UtsName) -> &std::ffi::OsStr| {
        uts.as_ref()
            .map_or(String::new(), |u| f(u).to_string_lossy().into_owned())
    };
    let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    let crates: BTreeMap<String, String> = env!("QUICLAB_STACK_CRATES")
        .split(',')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Environment {
        quiclab_version: env!("CARGO_PKG_VERSION").to_string(),
        git_commit: env!("QUICLAB_GIT_COMMIT").to_string(),
        kernel: format!("{} {}", field(|u| u.sysname()), field(|u| u.release())),
        cpu_model,
        cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
        hostname: field(|u| u.nodename()),
        crates,
        command: std::env::args().collect::<Vec<_>>().join(" "),
    }
}
