//! Syscall profiles (seed 002's "QUIC profiling": recvmsg dominates QUIC's system calls). A
//! profile run wraps the lab's client and server processes in `strace -f -c`, which counts every
//! system call of every thread; this module reads those counts. Tracing slows the traced
//! processes by an order of magnitude, so a profile run reports counts only — never times, and
//! never beside timing runs.

use serde::{Deserialize, Serialize};

/// One system call's count in a process (all its threads).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyscallCount {
    pub name: String,
    pub calls: u64,
    pub errors: u64,
}

/// A process's system calls, most frequent first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyscallProfile {
    pub syscalls: Vec<SyscallCount>,
    pub total_calls: u64,
}

impl SyscallProfile {
    /// Each call's share of all calls, for the `n` most frequent.
    pub fn top(&self, n: usize) -> impl Iterator<Item = (&SyscallCount, f64)> {
        let total = self.total_calls.max(1) as f64;
        self.syscalls
            .iter()
            .take(n)
            .map(move |s| (s, s.calls as f64 / total))
    }
}

/// The columns quiclab asks `strace -c` for (`-U`): no times.
pub const STRACE_COLUMNS: &str = "calls,errors,name";

/// Reads the summary table of `strace -c -U calls,errors,name`: between dashed rules, one row per
/// system call — calls, errors (blank when none), name — then a `total` row. An error names the
/// line that does not read.
pub fn parse_strace_summary(text: &str) -> Result<SyscallProfile, String> {
    let mut profile = SyscallProfile::default();
    let mut in_table = false;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.starts_with("calls") {
            in_table = true;
            continue;
        }
        if !in_table || t.is_empty() || t.starts_with("---") {
            continue;
        }
        let bad = || format!("strace summary line {}: cannot read {t:?}", i + 1);
        let f: Vec<&str> = t.split_whitespace().collect();
        let (calls, errors, name) = match f.as_slice() {
            [calls, name] => (calls.parse().map_err(|_| bad())?, 0, *name),
            [calls, errors, name] => (
                calls.parse().map_err(|_| bad())?,
                errors.parse().map_err(|_| bad())?,
                *name,
            ),
            _ => return Err(bad()),
        };
        if name == "total" {
            profile.total_calls = calls;
            break;
        }
        profile.syscalls.push(SyscallCount {
            name: name.to_string(),
            calls,
            errors,
        });
    }
    if profile.syscalls.is_empty() {
        return Err("no strace summary table (strace -c writes one when the process exits)".into());
    }
    if profile.total_calls == 0 {
        profile.total_calls = profile.syscalls.iter().map(|s| s.calls).sum();
    }
    profile
        .syscalls
        .sort_by(|a, b| b.calls.cmp(&a.calls).then(a.name.cmp(&b.name)));
    Ok(profile)
}

/// One bulk download with its client and server under `strace -f -c`: the result and the two
/// processes' profiles (client, server). Counts only: tracing slows the processes too much for any
/// time to mean anything.
pub fn trace_bulk(
    run: &crate::bulk::BulkRun,
    options: &quiclab_link::LinkOptions,
    spec: &quiclab_lab::LinkSpec,
    keep: Option<&std::path::Path>,
) -> anyhow::Result<BulkSyscalls> {
    use anyhow::{Context, bail};
    if !std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("strace").is_file()))
    {
        bail!("quiclab syscalls needs strace on PATH (apt-get install strace)");
    }
    let dir = tempfile::Builder::new()
        .prefix("quiclab-syscalls-")
        .tempdir()?;
    let mut running = crate::harness::start_lab(options, spec, keep, None)?;
    running.lab.syscall_trace = Some(dir.path().to_path_buf());
    let out = crate::Workload::run(run, &mut running, keep);
    // The server's strace writes its table when the lab ends the server.
    drop(running);
    let out = out?;
    if let Some(reason) = crate::WorkloadResult::failure(&out.result) {
        bail!("the traced download did not complete: {reason}");
    }
    let read = |name: &str| -> anyhow::Result<SyscallProfile> {
        let path = dir.path().join(format!("{name}.strace"));
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading strace's output {}", path.display()))?;
        parse_strace_summary(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
    };
    Ok(BulkSyscalls {
        proto: run.proto.to_string(),
        bytes: out.result.bytes,
        link: spec.describe(),
        client: read("fetch")?,
        server: read("serve")?,
        note: "system call counts under strace -f -c (all threads); no times: tracing slows the processes",
    })
}

/// `quiclab syscalls`' document: one traced bulk download's system calls, client and server.
#[derive(Debug, Clone, Serialize)]
pub struct BulkSyscalls {
    pub proto: String,
    pub bytes: u64,
    pub link: quiclab_link::spec::LinkDescription,
    pub client: SyscallProfile,
    pub server: SyscallProfile,
    pub note: &'static str,
}

impl BulkSyscalls {
    /// The `top` most frequent calls of each process, as text.
    pub fn text(&self, top: usize) -> String {
        let mut out = String::new();
        for (who, p) in [("client", &self.client), ("server", &self.server)] {
            out.push_str(&format!(
                "{who} ({}, {} bytes): {} system calls\n",
                self.proto, self.bytes, p.total_calls
            ));
            for (s, share) in p.top(top) {
                out.push_str(&format!(
                    "  {:>6.2} %  {:>9}  {}\n",
                    share * 100.0,
                    s.calls,
                    s.name
                ));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The seed's table (Panda 2019, "QUIC profiling") in `-U calls,errors,name` form.
    const SUMMARY: &str = "\
    calls    errors syscall
--------- --------- ----------------
    80800           recvmsg
     2191           epoll_wait
     2141        12 sendmsg
       96           brk
--------- --------- ----------------
    85228        12 total
";

    #[test]
    fn the_seed_s_table_reads_back_most_frequent_first() {
        let p = parse_strace_summary(SUMMARY).unwrap();
        assert_eq!(p.total_calls, 85228);
        assert_eq!(p.syscalls[0].name, "recvmsg");
        assert_eq!(p.syscalls[0].calls, 80800);
        assert_eq!(p.syscalls[2].errors, 12);
        let (top, share) = p.top(1).next().unwrap();
        assert_eq!(top.name, "recvmsg");
        assert!((share - 80800.0 / 85228.0).abs() < 1e-12);
    }

    #[test]
    fn output_without_a_table_is_an_error() {
        assert!(parse_strace_summary("strace: attach: ptrace: Operation not permitted").is_err());
        let e = parse_strace_summary("    calls syscall\n x y z recvmsg\n").unwrap_err();
        assert!(e.contains("line 2"), "{e}");
    }
}
