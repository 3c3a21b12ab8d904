//! Host noise that quiclab makes and removes itself, for `quiclab bench noise`: a CPU hog on the
//! lab's cores, or pauses of the whole lab — the quiclab process and every process it started,
//! emulator included — as a hypervisor's steal pauses a VM.
//!
//! The noise runs in a process of its own (quiclab re-executed, `bench inject-noise`), outside
//! what it pauses: a stopped process cannot resume itself. It lives in its own process group, so
//! a Ctrl-C at the terminal does not end it in the middle of a pause, and it ends when its stdin
//! closes — when [`InjectedNoise::stop`] closes it, or when the quiclab process that started it
//! dies however it dies — resuming what it stopped first. SIGTERM, SIGINT and SIGHUP end it the
//! same way.

use std::io::{Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

/// Pauses in storms: within a storm, the lab stops for `pause_ms` once every `every_ms`; storms
/// of `storm_s` alternate with calm stretches of `calm_s`, a storm first.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PausePattern {
    pub pause_ms: f64,
    pub every_ms: f64,
    pub storm_s: f64,
    pub calm_s: f64,
}

impl PausePattern {
    /// The share of all time the lab is stopped.
    pub fn stolen_share(&self) -> f64 {
        let in_storm = (self.pause_ms / self.every_ms).min(1.0);
        let cycle = self.storm_s + self.calm_s;
        if cycle > 0.0 {
            in_storm * self.storm_s / cycle
        } else {
            in_storm
        }
    }

    pub fn check(&self) -> Result<()> {
        if !(self.pause_ms > 0.0 && self.every_ms > self.pause_ms) {
            bail!(
                "a pause of {} ms must be above 0 and shorter than its period of {} ms",
                self.pause_ms,
                self.every_ms
            );
        }
        if !(self.storm_s > 0.0 && self.calm_s >= 0.0 && self.storm_s.is_finite()) {
            bail!("a storm must last more than 0 s, and a calm at least 0 s");
        }
        Ok(())
    }
}

impl PausePattern {
    /// The same pauses spread evenly over all time, stealing the same share: one every
    /// `pause / share`, with no calm.
    pub fn spread(&self) -> PausePattern {
        PausePattern {
            pause_ms: self.pause_ms,
            every_ms: self.pause_ms / self.stolen_share().max(1e-6),
            storm_s: 1e9,
            calm_s: 0.0,
        }
    }

    /// `PAUSE/EVERY/STORM/CALM`, each a duration (`40ms/100ms/30s/60s`).
    pub fn parse(s: &str) -> Result<PausePattern, String> {
        let parts: Vec<&str> = s.split('/').collect();
        let [pause, every, storm, calm] = parts[..] else {
            return Err(format!(
                "{s:?}: give PAUSE/EVERY/STORM/CALM, four durations, e.g. 40ms/100ms/30s/60s"
            ));
        };
        let d = |v: &str| {
            quiclab_link::units::parse_duration(v)
                .map(|ns| ns as f64 / 1e9)
                .map_err(|e| format!("{v:?} in {s:?}: {}", e.message()))
        };
        let p = PausePattern {
            pause_ms: d(pause)? * 1e3,
            every_ms: d(every)? * 1e3,
            storm_s: d(storm)?,
            calm_s: d(calm)?,
        };
        p.check().map_err(|e| e.to_string())?;
        Ok(p)
    }
}

impl std::fmt::Display for PausePattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.calm_s == 0.0 {
            return write!(
                f,
                "{:.0} ms pauses every {:.0} ms throughout ({:.1} % of the time stopped)",
                self.pause_ms,
                self.every_ms,
                self.stolen_share() * 100.0
            );
        }
        write!(
            f,
            "{:.0} ms pauses every {:.0} ms in {:.0} s storms, {:.0} s calm between ({:.1} % of the \
             time stopped)",
            self.pause_ms,
            self.every_ms,
            self.storm_s,
            self.calm_s,
            self.stolen_share() * 100.0
        )
    }
}

/// What noise to make.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Noise {
    /// One spinning thread pinned to each of these CPUs, at normal priority.
    Hog { cpus: Vec<usize> },
    /// Stop `target` and its descendants in this pattern.
    Pauses { target: u32, pattern: PausePattern },
}

/// What the noise did, as its process reports it when it ends.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NoiseReport {
    pub elapsed_s: f64,
    pub pauses: u64,
    /// Wall time the target was stopped, summed.
    pub stopped_s: f64,
    pub hog_threads: usize,
}

/// A noise process running.
pub struct InjectedNoise {
    child: std::process::Child,
    target: u32,
}

impl InjectedNoise {
    /// Starts `noise` in a process of its own (`exe bench inject-noise JSON`).
    pub fn start(exe: &std::path::Path, noise: &Noise) -> Result<InjectedNoise> {
        use std::os::unix::process::CommandExt;
        let json = serde_json::to_string(noise)?;
        let child = std::process::Command::new(exe)
            .args(["bench", "inject-noise", &json])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .process_group(0)
            .spawn()
            .with_context(|| format!("starting the noise process ({})", exe.display()))?;
        Ok(InjectedNoise {
            child,
            target: std::process::id(),
        })
    }

    /// The noise process's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Ends the noise: closes its stdin, waits for it (5 s, then kills it by its pid), resumes
    /// any process of this one's tree it left stopped, and returns its report with the number of
    /// processes found stopped afterwards (0 when it cleaned up itself).
    pub fn stop(mut self) -> Result<(NoiseReport, usize)> {
        drop(self.child.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(5);
        let status = loop {
            if let Some(s) = self.child.try_wait()? {
                break Some(s);
            }
            if Instant::now() > deadline {
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        if status.is_none() {
            // Ours, by pid: it would not end on its own.
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let mut out = String::new();
        if let Some(mut o) = self.child.stdout.take() {
            let _ = o.read_to_string(&mut out);
        }
        let left_stopped = resume_stopped(self.target, None);
        let report = serde_json::from_str(out.trim()).unwrap_or_default();
        match status {
            Some(s) if s.success() => Ok((report, left_stopped)),
            Some(s) => bail!("the noise process ended with {s}"),
            None => bail!("the noise process did not end within 5 s of being told; it was killed"),
        }
    }
}

/// Processes in `/proc`: (pid, state, parent pid).
fn processes() -> Vec<(u32, char, u32)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let pid: u32 = e.ok()?.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // The command name may hold spaces and parentheses: fields follow the last ')'.
        let rest = &stat[stat.rfind(')')? + 1..];
        let mut f = rest.split_whitespace();
        let state = f.next()?.chars().next()?;
        let ppid = f.next()?.parse().ok()?;
        Some((pid, state, ppid))
    })
    .collect()
}

/// `root` and every process descending from it, except `skip` (the noise process itself).
fn tree(root: u32, skip: Option<u32>) -> Vec<u32> {
    let all = processes();
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        let parent = out[i];
        for &(pid, _, ppid) in &all {
            if ppid == parent && Some(pid) != skip && !out.contains(&pid) {
                out.push(pid);
            }
        }
        i += 1;
    }
    out
}

/// Sends SIGCONT to every stopped process of `root`'s tree (not `skip`); how many there were.
fn resume_stopped(root: u32, skip: Option<u32>) -> usize {
    let members = tree(root, skip);
    let stopped: Vec<u32> = processes()
        .into_iter()
        .filter(|(pid, state, _)| *state == 'T' && members.contains(pid))
        .map(|(pid, _, _)| pid)
        .collect();
    for &pid in &stopped {
        signal(pid, nix::sys::signal::Signal::SIGCONT);
    }
    stopped.len()
}

fn signal(pid: u32, sig: nix::sys::signal::Signal) {
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), sig);
}

/// [`inject`] of the noise a JSON argument describes.
pub fn inject_json(json: &str) -> Result<NoiseReport> {
    let noise: Noise = serde_json::from_str(json).context("the noise's description (JSON)")?;
    inject(&noise)
}

/// The noise process's side: makes `noise` until stdin closes (or a terminating signal), then
/// prints its report as one JSON line.
pub fn inject(noise: &Noise) -> Result<NoiseReport> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register(sig, stop.clone())?;
    }
    // A thread reads stdin to its end: then the noise stops.
    {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut sink = [0u8; 64];
            let mut stdin = std::io::stdin();
            while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
            stop.store(true, Ordering::SeqCst);
        });
    }
    let start = Instant::now();
    let mut report = NoiseReport::default();
    match noise {
        Noise::Hog { cpus } => {
            std::thread::scope(|s| {
                for &cpu in cpus {
                    let stop = &stop;
                    s.spawn(move || {
                        pin(cpu);
                        let mut x = 0u64;
                        while !stop.load(Ordering::Relaxed) {
                            for _ in 0..10_000 {
                                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                            }
                        }
                    });
                }
            });
            report.hog_threads = cpus.len();
        }
        Noise::Pauses { target, pattern } => {
            pattern.check()?;
            let me = std::process::id();
            let cycle = pattern.storm_s + pattern.calm_s;
            let mut next = start;
            while !stop.load(Ordering::SeqCst) {
                let t = start.elapsed().as_secs_f64() % cycle.max(1e-9);
                if t >= pattern.storm_s {
                    // Calm: until the next storm.
                    sleep_unless(&stop, Duration::from_secs_f64(cycle - t));
                    next = Instant::now();
                    continue;
                }
                let now = Instant::now();
                if now < next {
                    sleep_unless(&stop, next - now);
                    continue;
                }
                next += Duration::from_secs_f64(pattern.every_ms / 1e3);
                let members = tree(*target, Some(me));
                let stopped_at = Instant::now();
                for &pid in &members {
                    signal(pid, nix::sys::signal::Signal::SIGSTOP);
                }
                // Whatever happens now, the members are resumed: no early exit here.
                std::thread::sleep(Duration::from_secs_f64(pattern.pause_ms / 1e3));
                for &pid in &members {
                    signal(pid, nix::sys::signal::Signal::SIGCONT);
                }
                report.pauses += 1;
                report.stopped_s += stopped_at.elapsed().as_secs_f64();
            }
            // A process started during the last pause's walk may have been missed by SIGCONT.
            resume_stopped(*target, Some(me));
        }
    }
    report.elapsed_s = start.elapsed().as_secs_f64();
    let mut out = std::io::stdout();
    writeln!(out, "{}", serde_json::to_string(&report)?)?;
    out.flush()?;
    Ok(report)
}

fn sleep_unless(stop: &AtomicBool, d: Duration) {
    let until = Instant::now() + d;
    while !stop.load(Ordering::SeqCst) {
        let now = Instant::now();
        if now >= until {
            return;
        }
        std::thread::sleep((until - now).min(Duration::from_millis(50)));
    }
}

fn pin(cpu: usize) {
    crate::os::pin_to_cpu(cpu);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_patterns_stolen_share_and_its_checks() {
        let p = PausePattern {
            pause_ms: 40.0,
            every_ms: 100.0,
            storm_s: 30.0,
            calm_s: 60.0,
        };
        assert!((p.stolen_share() - 0.4 / 3.0).abs() < 1e-9);
        assert!(p.check().is_ok());
        let bad = PausePattern {
            pause_ms: 100.0,
            ..p
        };
        assert!(
            bad.check()
                .unwrap_err()
                .to_string()
                .contains("shorter than its period")
        );
        assert_eq!(PausePattern::parse("40ms/100ms/30s/60s"), Ok(p));
        assert!(
            PausePattern::parse("40ms/100ms")
                .unwrap_err()
                .contains("four durations")
        );
        assert!(
            PausePattern::parse("40ms/100ms/30s/x")
                .unwrap_err()
                .contains("\"x\"")
        );
        assert!(PausePattern::parse("200ms/100ms/30s/60s").is_err());
        let spread = p.spread();
        assert!((spread.stolen_share() - p.stolen_share()).abs() < 1e-9);
        assert!((spread.every_ms - 300.0).abs() < 1e-6);
    }

    #[test]
    fn this_process_is_in_its_own_tree() {
        let me = std::process::id();
        assert_eq!(tree(me, None)[0], me);
        assert!(processes().iter().any(|(pid, _, _)| *pid == me));
    }
}
