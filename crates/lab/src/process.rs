//! Processes the lab started, and only those: identified by PID *and* start time (so a reused PID is
//! never mistaken for ours), or by living inside a namespace the lab created.

use std::process::Child;
use std::time::{Duration, Instant};

/// Start time of a process in clock ticks since boot (field 22 of /proc/PID/stat).
pub fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces and parentheses: fields after the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

pub fn pid_exists(pid: i32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// True when `pid` runs and is the same process that was recorded (same start time; 0 = unknown).
pub fn is_alive(pid: i32, recorded_start: u64) -> bool {
    match start_time(pid) {
        Some(start) => recorded_start == 0 || start == recorded_start,
        None => false,
    }
}

pub fn signal(pid: i32, sig: i32) {
    if pid > 1 {
        // SAFETY: plain kill(2) on a PID we started.
        unsafe { libc::kill(pid, sig) };
    }
}

/// Signals the process group led by `pid` (every child the lab spawns leads a group of its own).
pub fn signal_group(pid: i32, sig: i32) {
    if pid > 1 {
        // SAFETY: kill(2) with a negative PID addresses the group our child created with setpgid(0, 0).
        unsafe { libc::kill(-pid, sig) };
    }
}

/// SIGTERM to each child's group, then SIGKILL to what is left after `grace`; reaps them all.
pub fn terminate_children(children: &mut [Child], grace: Duration) {
    let mut running: Vec<&mut Child> = children
        .iter_mut()
        .filter_map(|c| match c.try_wait() {
            Ok(Some(_)) => {
                // The leader is gone; members of its group may remain.
                signal_group(c.id() as i32, libc::SIGKILL);
                None
            }
            _ => Some(c),
        })
        .collect();
    for c in running.iter() {
        signal_group(c.id() as i32, libc::SIGTERM);
    }
    let deadline = Instant::now() + grace;
    while !running.is_empty() && Instant::now() < deadline {
        running.retain_mut(|c| !matches!(c.try_wait(), Ok(Some(_))));
        if !running.is_empty() {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    for c in running.iter_mut() {
        signal_group(c.id() as i32, libc::SIGKILL);
        let _ = c.kill();
        let _ = c.wait();
    }
}

/// SIGKILLs every process whose network namespace is the one with `ns_inode` (a namespace quiclab
/// created, so whatever runs there was started by a lab). Returns their PIDs.
pub fn kill_namespace_processes(ns_inode: u64) -> Vec<i32> {
    let me = std::process::id() as i32;
    let mut killed = Vec::new();
    for _ in 0..50 {
        let pids: Vec<i32> = crate::netns::pids_in_namespace(ns_inode)
            .into_iter()
            .filter(|&p| p != me)
            .collect();
        if pids.is_empty() {
            break;
        }
        for &pid in &pids {
            signal(pid, libc::SIGKILL);
            if !killed.contains(&pid) {
                killed.push(pid);
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    killed
}

/// User and system CPU seconds consumed so far by this process (all threads).
pub fn own_cpu_seconds() -> (f64, f64) {
    let usage = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF);
    match usage {
        Ok(u) => {
            let tv = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
            (tv(u.user_time()), tv(u.system_time()))
        }
        Err(_) => (0.0, 0.0),
    }
}

/// CPU seconds (user + system) consumed so far by one thread of this process.
pub fn thread_cpu_seconds(tid: i32) -> Option<f64> {
    stat_cpu_seconds(&format!("/proc/{}/task/{tid}/stat", std::process::id()))
}

/// CPU seconds (user + system, all threads) consumed so far by a running process.
pub fn process_cpu_seconds(pid: i32) -> Option<f64> {
    stat_cpu_seconds(&format!("/proc/{pid}/stat"))
}

/// utime + stime (fields 14 and 15) of a /proc stat file, in seconds.
fn stat_cpu_seconds(path: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(path).ok()?;
    // The command name (field 2) may contain spaces and parentheses: fields after the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = f.get(11)?.parse().ok()?;
    let stime: f64 = f.get(12)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Some((utime + stime) / hz)
}

/// The calling thread's kernel thread id.
pub fn current_tid() -> i32 {
    nix::unistd::gettid().as_raw()
}
