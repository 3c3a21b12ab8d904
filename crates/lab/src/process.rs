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
        crate::os::kill(pid, sig);
    }
}

/// Signals the process group led by `pid` (every child the lab spawns leads a group of its own).
pub fn signal_group(pid: i32, sig: i32) {
    if pid > 1 {
        // A negative PID addresses the group our child created with setpgid(0, 0).
        crate::os::kill(-pid, sig);
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

/// User + system CPU seconds of the children this process has waited for (and of theirs).
pub fn children_cpu_seconds() -> f64 {
    let (user, system) = children_cpu_user_system();
    user + system
}

/// User and system CPU seconds of the children this process has waited for (and of theirs).
pub fn children_cpu_user_system() -> (f64, f64) {
    match nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN) {
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

/// CPU seconds (user + system, all threads, those that ended included) consumed so far by a
/// running process, to the nanosecond: the kernel's per-process CPU clock. /proc's utime and
/// stime count whole clock ticks (10 ms), which reads a short transfer's server as 0 s; they are
/// the fallback only when the clock cannot be had.
pub fn process_cpu_seconds(pid: i32) -> Option<f64> {
    crate::os::process_cpu_clock_seconds(pid)
        .or_else(|| stat_cpu_seconds(&format!("/proc/{pid}/stat")))
}

/// A running process's CPU seconds split into user and system time: /proc's clock-tick counts
/// (utime, stime) share out the precise total of [`process_cpu_seconds`]. None when it used less
/// than one tick of either, or has ended.
pub fn process_cpu_user_system(pid: i32) -> Option<(f64, f64)> {
    let (utime, stime) = stat_ticks(&format!("/proc/{pid}/stat"))?;
    if utime + stime == 0.0 {
        return None;
    }
    let total = process_cpu_seconds(pid)?;
    Some((
        total * utime / (utime + stime),
        total * stime / (utime + stime),
    ))
}

/// utime + stime (fields 14 and 15) of a /proc stat file, in seconds.
fn stat_cpu_seconds(path: &str) -> Option<f64> {
    let (utime, stime) = stat_ticks(path)?;
    let hz = crate::os::clock_ticks_per_second();
    Some((utime + stime) / hz)
}

/// utime and stime (fields 14 and 15) of a /proc stat file, in clock ticks.
fn stat_ticks(path: &str) -> Option<(f64, f64)> {
    let stat = std::fs::read_to_string(path).ok()?;
    // The command name (field 2) may contain spaces and parentheses: fields after the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some((f.get(11)?.parse().ok()?, f.get(12)?.parse().ok()?))
}

/// The calling thread's kernel thread id.
pub fn current_tid() -> i32 {
    nix::unistd::gettid().as_raw()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_cpu_time_is_finer_than_a_clock_tick() {
        let pid = std::process::id() as i32;
        let before = process_cpu_seconds(pid).unwrap();
        // About 2 ms of work: less than one 10 ms tick, which /proc's stat would round away.
        let t0 = std::time::Instant::now();
        let mut x = 0u64;
        while t0.elapsed() < Duration::from_millis(2) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let spent = process_cpu_seconds(pid).unwrap() - before;
        assert!(spent > 0.0 && spent < 1.0, "{spent}");
    }

    #[test]
    fn a_process_cpu_time_splits_into_user_and_system() {
        let pid = std::process::id() as i32;
        // Two clock ticks of user work at least, so /proc has a split to give.
        let t0 = std::time::Instant::now();
        let mut x = 0u64;
        while process_cpu_seconds(pid).unwrap() < 0.05 || t0.elapsed() < Duration::from_millis(30) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let (user, system) = process_cpu_user_system(pid).expect("more than a tick");
        let total = process_cpu_seconds(pid).unwrap();
        assert!(user > 0.0 && system >= 0.0, "{user} {system}");
        assert!(
            (user + system) <= total + 1e-9,
            "{user} + {system} > {total}"
        );
        assert!(
            user + system > 0.5 * total,
            "{user} + {system} against {total}"
        );
    }
}
