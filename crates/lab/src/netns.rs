//! Named network namespaces (the ones `ip netns` manages under `/run/netns`).
//!
//! Why threads: `setns(2)` changes the namespace of the *calling thread* only. quiclab never calls it on
//! a thread that runs anything else (least of all a tokio runtime thread): [`NetNs::run`] spawns a
//! short-lived scoped thread, moves it into the namespace, runs the closure and ends. Sockets and TUN fds
//! created there stay bound to that namespace for life, so the rest of the program can use them from any
//! thread. Child processes enter the namespace between `fork` and `exec` (see [`NetNs::command`]).

use std::fs::File;
use std::os::fd::{AsFd, AsRawFd};
use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result, bail};

/// Where iproute2 keeps the bind mounts that name namespaces.
pub const NETNS_DIR: &str = "/run/netns";

/// A network namespace created (and owned) by this process.
#[derive(Debug)]
pub struct NetNs {
    name: String,
    handle: File,
}

impl NetNs {
    /// Creates `/run/netns/NAME` with `ip netns add`. Fails if it exists already.
    pub fn create(name: &str) -> Result<NetNs> {
        if PathBuf::from(NETNS_DIR).join(name).exists() {
            bail!("network namespace {name} exists already (a stale lab? run `quiclab clean`)");
        }
        run_ip(&["netns", "add", name])?;
        Self::open(name)
    }

    /// Opens an existing named namespace.
    pub fn open(name: &str) -> Result<NetNs> {
        let path = PathBuf::from(NETNS_DIR).join(name);
        let handle = File::open(&path).with_context(|| format!("opening {}", path.display()))?;
        Ok(NetNs {
            name: name.to_string(),
            handle,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs `f` on a fresh thread that has entered this namespace, and returns its result.
    pub fn run<T: Send>(&self, f: impl FnOnce() -> T + Send) -> Result<T> {
        std::thread::scope(|scope| {
            let handle = std::thread::Builder::new()
                .name(format!("netns-{}", self.name))
                .spawn_scoped(scope, || -> Result<T> {
                    nix::sched::setns(self.handle.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET)
                        .with_context(|| format!("entering network namespace {}", self.name))?;
                    Ok(f())
                })
                .context("spawning a namespace thread")?;
            handle
                .join()
                .map_err(|_| anyhow::anyhow!("a thread inside namespace {} panicked", self.name))?
        })
    }

    /// A `Command` that will run inside this namespace, in a process group of its own (so that the lab
    /// can end it and everything it forked, and nothing else, by group).
    pub fn command(&self, program: &str) -> Command {
        self.command_with_group(program, true)
    }

    /// Like [`NetNs::command`], but the process stays in quiclab's process group, so it keeps the
    /// terminal (an interactive program works and Ctrl-C reaches it directly).
    pub fn foreground_command(&self, program: &str) -> Command {
        self.command_with_group(program, false)
    }

    fn command_with_group(&self, program: &str, own_group: bool) -> Command {
        let mut cmd = Command::new(program);
        let fd = self.handle.as_raw_fd();
        // `fd` stays open in the parent for the child's lifetime.
        crate::os::enter_netns_before_exec(&mut cmd, fd, own_group);
        cmd
    }

    /// Deletes the name (`ip netns del`). The namespace itself disappears once no process, socket or
    /// device holds it.
    pub fn delete(self) -> Result<()> {
        let name = self.name.clone();
        drop(self.handle);
        delete_named(&name)
    }

    /// The namespace's identity (inode of its nsfs file), to check whether a process lives inside it.
    pub fn inode(&self) -> Result<u64> {
        use std::os::unix::fs::MetadataExt;
        Ok(self.handle.metadata()?.ino())
    }
}

/// Deletes a named namespace by name; a missing one is not an error.
pub fn delete_named(name: &str) -> Result<()> {
    if !PathBuf::from(NETNS_DIR).join(name).exists() {
        return Ok(());
    }
    run_ip(&["netns", "del", name])
}

/// Names of all namespaces under `/run/netns`.
pub fn list_names() -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(NETNS_DIR) else {
        return Vec::new();
    };
    let mut names: Vec<String> = dir
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    names.sort();
    names
}

/// PIDs of the processes whose network namespace is the one with this inode.
pub fn pids_in_namespace(ns_inode: u64) -> Vec<i32> {
    use std::os::unix::fs::MetadataExt;
    let Ok(proc_dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    proc_dir
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::metadata(format!("/proc/{pid}/ns/net"))
                .map(|m| m.ino() == ns_inode)
                .unwrap_or(false)
        })
        .collect()
}

/// Runs `ip ARGS…` and turns a failure into an error carrying its stderr.
pub fn run_ip(args: &[&str]) -> Result<()> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .context("running `ip` (iproute2); install it with `apt-get install iproute2`")?;
    if !out.status.success() {
        bail!(
            "`ip {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Runs a batch of `ip` commands inside namespace `ns` in one process (`ip -n NS -batch -`).
pub fn run_ip_batch(ns: &str, commands: &[String]) -> Result<()> {
    use std::io::Write;
    let mut child = Command::new("ip")
        .args(["-n", ns, "-batch", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .context("running `ip` (iproute2); install it with `apt-get install iproute2`")?;
    // A failed write (ip died early) must still reap ip: the error is kept until it has exited,
    // and its stderr says why.
    let written = (|| -> std::io::Result<()> {
        let mut stdin = child.stdin.take().expect("piped stdin");
        for c in commands {
            writeln!(stdin, "{c}")?;
        }
        Ok(())
    })();
    let out = child.wait_with_output()?;
    if let Err(e) = written {
        bail!(
            "`ip -n {ns} -batch`: writing its commands: {e} ({}; commands: {})",
            String::from_utf8_lossy(&out.stderr).trim(),
            commands.join("; ")
        );
    }
    if !out.status.success() {
        bail!(
            "`ip -n {ns} -batch` failed: {} (commands: {})",
            String::from_utf8_lossy(&out.stderr).trim(),
            commands.join("; ")
        );
    }
    Ok(())
}

/// Writes a sysctl of the *current thread's* network namespace (call it inside [`NetNs::run`]).
pub fn write_sysctl(key: &str, value: &str) -> Result<()> {
    let path = format!("/proc/sys/{}", key.replace('.', "/"));
    std::fs::write(&path, value).with_context(|| format!("setting sysctl {key}={value}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `ip` children of this process that are zombies (exited, never reaped).
    fn zombie_children() -> usize {
        let me = std::process::id().to_string();
        std::fs::read_dir("/proc")
            .map(|d| {
                d.flatten()
                    .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
                    .filter(|stat| {
                        let Some((_, rest)) = stat.rsplit_once(')') else {
                            return false;
                        };
                        let mut f = rest.split_whitespace();
                        f.next() == Some("Z") && f.next() == Some(me.as_str())
                    })
                    .count()
            })
            .unwrap_or(0)
    }

    #[test]
    fn an_ip_that_dies_before_reading_its_commands_is_still_reaped() {
        // No such namespace: ip exits at once, and writing 200 000 commands into its closed stdin
        // fails (EPIPE) — the error must come after ip was reaped, not instead of it.
        let commands: Vec<String> = (0..200_000)
            .map(|i| format!("link show dev lo{i}"))
            .collect();
        let before = zombie_children();
        let e = run_ip_batch("ql-no-such-namespace-for-this-test", &commands).unwrap_err();
        assert!(e.to_string().contains("ip -n ql-no-such-namespace"), "{e}");
        assert_eq!(zombie_children(), before, "ip was left a zombie");
    }
}
