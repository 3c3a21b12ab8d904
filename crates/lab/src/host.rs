//! Facts about the host that decide whether a timing measurement can be trusted.

/// CPU time the hypervisor stole from this (virtual) machine, in clock ticks summed over all CPUs,
/// and the total ticks (all states), from the first line of /proc/stat.
pub fn cpu_ticks() -> Option<(u64, u64)> {
    host_ticks().map(|h| (h.steal, h.total))
}

/// Measures the fraction of CPU time stolen by the hypervisor since it was started. On a shared
/// host, a timing figure measured while much was stolen says more about the neighbours than about
/// the emulator.
pub struct StealMeter {
    start: Option<(u64, u64)>,
}

impl StealMeter {
    pub fn start() -> StealMeter {
        StealMeter { start: cpu_ticks() }
    }

    /// Stolen fraction of all CPU time since `start` (0 when unknown).
    pub fn fraction(&self) -> f64 {
        match (self.start, cpu_ticks()) {
            (Some((s0, t0)), Some((s1, t1))) if t1 > t0 => (s1 - s0) as f64 / (t1 - t0) as f64,
            _ => 0.0,
        }
    }
}

/// Where the CPU time of a stretch of wall time went: what the hypervisor stole, how busy the
/// machine was, and how much of it quiclab itself used (this process — the emulator's threads
/// and the runner — plus the child processes it reaped: clients, servers, browsers). A flagged
/// run then shows whether the host was noisy or the lab itself was short of CPU.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CpuUse {
    /// Fraction of all CPU time stolen by the hypervisor.
    pub steal: f64,
    /// Fraction of all CPU time not idle (anyone's work, quiclab's included; steal excluded).
    pub host_busy: f64,
    /// quiclab's CPU time divided by wall time: cores' worth (2.0 = two CPUs busy throughout).
    pub lab_cores: f64,
}

/// Measures [`CpuUse`] from `start` to `finish`.
pub struct CpuMeter {
    wall: std::time::Instant,
    host: Option<HostTicks>,
    lab_s: Option<f64>,
}

#[derive(Clone, Copy)]
struct HostTicks {
    steal: u64,
    idle: u64,
    total: u64,
}

fn host_ticks() -> Option<HostTicks> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let f: Vec<u64> = stat
        .lines()
        .next()?
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal …
    Some(HostTicks {
        steal: *f.get(7)?,
        idle: f.get(3)? + f.get(4)?,
        total: f.iter().sum(),
    })
}

/// CPU seconds (user + system) of this process's threads and of its reaped children.
fn lab_cpu_seconds() -> Option<f64> {
    use nix::sys::resource::{UsageWho, getrusage};
    let secs = |u: nix::sys::resource::Usage| {
        let t = |tv: nix::sys::time::TimeVal| tv.tv_sec() as f64 + tv.tv_usec() as f64 / 1e6;
        t(u.user_time()) + t(u.system_time())
    };
    Some(
        secs(getrusage(UsageWho::RUSAGE_SELF).ok()?)
            + secs(getrusage(UsageWho::RUSAGE_CHILDREN).ok()?),
    )
}

impl CpuMeter {
    pub fn start() -> CpuMeter {
        CpuMeter {
            wall: std::time::Instant::now(),
            host: host_ticks(),
            lab_s: lab_cpu_seconds(),
        }
    }

    /// The CPU use since `start` (`None` when /proc/stat or getrusage could not be read, or no
    /// time passed).
    pub fn finish(&self) -> Option<CpuUse> {
        let (h0, h1) = (self.host?, host_ticks()?);
        let total = h1.total.checked_sub(h0.total).filter(|&t| t > 0)? as f64;
        let steal = h1.steal.saturating_sub(h0.steal) as f64;
        let idle = h1.idle.saturating_sub(h0.idle) as f64;
        let wall = self.wall.elapsed().as_secs_f64();
        let lab = lab_cpu_seconds()? - self.lab_s?;
        Some(CpuUse {
            steal: steal / total,
            host_busy: ((total - idle - steal) / total).clamp(0.0, 1.0),
            lab_cores: if wall > 0.0 { lab.max(0.0) / wall } else { 0.0 },
        })
    }
}

/// What a spinning thread at the emulator's priority saw of the machine: gaps in its own run,
/// which no scheduler on this (virtual) machine can avoid — the floor under release lateness.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Hiccups {
    #[serde(deserialize_with = "quiclab_link::stats::f64_or_nan")]
    pub seconds: f64,
    /// Gaps longer than 100 µs, per second.
    #[serde(deserialize_with = "quiclab_link::stats::f64_or_nan")]
    pub gaps_over_100us_per_s: f64,
    /// Share of the time spent in gaps longer than 100 µs.
    #[serde(deserialize_with = "quiclab_link::stats::f64_or_nan")]
    pub time_in_gaps_over_100us: f64,
    #[serde(deserialize_with = "quiclab_link::stats::f64_or_nan")]
    pub max_gap_us: f64,
}

/// Spins for `duration` on `cpu` (if given) under SCHED_FIFO 50 — as the emulator's scheduler
/// runs — and records every gap between two consecutive clock reads longer than 100 µs: the
/// hypervisor running something else, or an interrupt. Sleeps 1 ms in every 10 ms so that the
/// kernel's real-time throttling never steps in; those sleeps are not counted.
pub fn hiccups(duration: std::time::Duration, cpu: Option<usize>) -> Hiccups {
    std::thread::scope(|s| {
        s.spawn(|| {
            if let Some(cpu) = cpu {
                crate::os::pin_to_cpu(cpu);
            }
            crate::os::set_realtime(50);
            let start = std::time::Instant::now();
            let (mut last, mut next_nap) = (start, start + std::time::Duration::from_millis(9));
            let (mut gaps, mut gap_time, mut max_gap) = (0u64, 0f64, 0f64);
            let threshold = std::time::Duration::from_micros(100);
            while last.duration_since(start) < duration {
                let now = std::time::Instant::now();
                let gap = now - last;
                if gap > threshold {
                    gaps += 1;
                    gap_time += gap.as_secs_f64();
                    max_gap = max_gap.max(gap.as_secs_f64());
                }
                last = now;
                if now >= next_nap {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                    last = std::time::Instant::now();
                    next_nap = last + std::time::Duration::from_millis(9);
                }
            }
            let secs = start.elapsed().as_secs_f64();
            Hiccups {
                seconds: secs,
                gaps_over_100us_per_s: gaps as f64 / secs,
                time_in_gaps_over_100us: gap_time / secs,
                max_gap_us: max_gap * 1e6,
            }
        })
        .join()
        .unwrap_or(Hiccups {
            seconds: 0.0,
            gaps_over_100us_per_s: f64::NAN,
            time_in_gaps_over_100us: f64::NAN,
            max_gap_us: f64::NAN,
        })
    })
}

/// Above this stolen fraction, timing results are reported as unreliable.
pub const NOISY_STEAL_FRACTION: f64 = 0.10;

/// How long the lab was not running at all: a whole-VM pause (the hypervisor running another
/// guest on this vCPU), a cgroup freeze, or SIGSTOP. Everything the lab times — the emulator's
/// releases, the stacks' timers, the workload's clock — stands still while wall time goes on,
/// so a pause lands in a time measured across it. Steal in /proc/stat counts the first kind only
/// and says nothing of how it was spread; this is measured where it matters.
///
/// One watcher thread per CPU the process may use, pinned there, at a real-time priority above
/// the emulator's (it runs a few µs per period, so it neither waits behind the emulator's
/// spinning nor delays it measurably): it sleeps [`WATCH_PERIOD`] and records every wake-up later
/// than [`PAUSE_MIN`] as a pause of that length. A pause of the CPU it is pinned to, or of the
/// whole process, is then seen; a CPU hog at normal priority is not (that is the lab short of
/// CPU, which its own `lab_cpu_cores` and the results show).
pub struct PauseWatch {
    cpus: Vec<std::sync::Arc<CpuPauses>>,
    /// Whether the watchers run at real-time priority (else they also see a busy CPU's
    /// scheduling delays, which over-counts).
    pub realtime: bool,
}

/// A watcher sleeps this long between looks at the clock.
pub const WATCH_PERIOD: std::time::Duration = std::time::Duration::from_millis(2);
/// A wake-up later than this is a pause (the kernel's timer slack and wake-up latency are tens
/// of µs on an idle or busy machine under SCHED_FIFO).
pub const PAUSE_MIN: std::time::Duration = std::time::Duration::from_millis(1);
/// The pauses a watcher remembers (at 10 pauses a second, 20 minutes' worth).
const PAUSES_KEPT: usize = 12_000;

#[derive(Default)]
struct CpuPauses {
    /// (when the pause ended, how long it was), oldest first.
    recent: std::sync::Mutex<std::collections::VecDeque<(std::time::Instant, std::time::Duration)>>,
}

/// The pauses seen in a stretch of time: the most any one CPU was paused.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pauses {
    pub window_s: f64,
    /// The total length of the pauses of the CPU that was paused most.
    pub total_s: f64,
    /// The longest single pause of any CPU.
    pub longest_s: f64,
    /// How many pauses that CPU had.
    pub count: usize,
}

impl Pauses {
    /// The share of the window spent paused.
    pub fn share(&self) -> f64 {
        if self.window_s > 0.0 {
            (self.total_s / self.window_s).min(1.0)
        } else {
            0.0
        }
    }
}

impl PauseWatch {
    /// The process's watch, started on first use. None when no watcher thread could start.
    pub fn global() -> Option<&'static PauseWatch> {
        static WATCH: std::sync::OnceLock<Option<PauseWatch>> = std::sync::OnceLock::new();
        WATCH.get_or_init(PauseWatch::start).as_ref()
    }

    fn start() -> Option<PauseWatch> {
        let cpus = allowed_cpus();
        let mut watch = PauseWatch {
            cpus: Vec::new(),
            realtime: true,
        };
        let (tx, rx) = std::sync::mpsc::channel();
        for cpu in cpus {
            let pauses = std::sync::Arc::new(CpuPauses::default());
            let mine = pauses.clone();
            let tx = tx.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("ql-pause-{cpu}"))
                .spawn(move || {
                    let realtime = pin_realtime(cpu, 60);
                    let _ = tx.send(realtime);
                    drop(tx);
                    watch_pauses(&mine);
                });
            if spawned.is_ok() {
                watch.cpus.push(pauses);
            }
        }
        drop(tx);
        // One answer per watcher (each keeps its sender: it never ends).
        for _ in 0..watch.cpus.len() {
            watch.realtime &= rx.recv().unwrap_or(false);
        }
        (!watch.cpus.is_empty()).then_some(watch)
    }

    /// The pauses that ended within the last `window` (up to now).
    pub fn last(&self, window: std::time::Duration) -> Pauses {
        let now = std::time::Instant::now();
        self.between(now.checked_sub(window).unwrap_or(now), now)
    }

    /// The pauses that ended between `from` and `to`; a pause that began before `from` counts
    /// only its part after it.
    pub fn between(&self, from: std::time::Instant, to: std::time::Instant) -> Pauses {
        let mut out = Pauses {
            window_s: to.saturating_duration_since(from).as_secs_f64(),
            total_s: 0.0,
            longest_s: 0.0,
            count: 0,
        };
        for cpu in &self.cpus {
            let recent = cpu.recent.lock().unwrap_or_else(|p| p.into_inner());
            let (mut total, mut count) = (0.0, 0);
            for &(end, len) in recent.iter().filter(|(end, _)| *end > from && *end <= to) {
                let began = end.checked_sub(len).unwrap_or(end).max(from);
                let part = end.saturating_duration_since(began).as_secs_f64();
                total += part;
                count += 1;
                out.longest_s = out.longest_s.max(part);
            }
            if total > out.total_s {
                out.total_s = total;
                out.count = count;
            }
        }
        out
    }
}

fn watch_pauses(pauses: &CpuPauses) {
    let mut before = std::time::Instant::now();
    loop {
        std::thread::sleep(WATCH_PERIOD);
        let now = std::time::Instant::now();
        let late = now
            .saturating_duration_since(before)
            .saturating_sub(WATCH_PERIOD);
        if late > PAUSE_MIN {
            let mut recent = pauses.recent.lock().unwrap_or_else(|p| p.into_inner());
            if recent.len() == PAUSES_KEPT {
                recent.pop_front();
            }
            recent.push_back((now, late));
        }
        before = now;
    }
}

/// The CPUs this process may run on.
pub fn allowed_cpus() -> Vec<usize> {
    crate::os::allowed_cpus().unwrap_or_else(|| vec![0])
}

/// Pins the calling thread to `cpu` and moves it to SCHED_FIFO `priority`; whether the latter
/// worked.
fn pin_realtime(cpu: usize, priority: i32) -> bool {
    crate::os::pin_to_cpu(cpu);
    crate::os::set_realtime(priority)
}

/// The host for a moment: how much was stolen, how long the lab was paused, how many threads
/// wanted a CPU. Read before a run starts, so that a run does not start inside a storm.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HostReading {
    pub steal: Option<f64>,
    pub pauses: Option<Pauses>,
    /// Threads runnable or running, on average over the reading (/proc/stat procs_running).
    pub run_queue: Option<f64>,
}

impl HostReading {
    /// Reads the host for `window`.
    pub fn take(window: std::time::Duration) -> HostReading {
        let watch = PauseWatch::global();
        let steal = StealMeter::start();
        let from = std::time::Instant::now();
        let mut queue = Vec::new();
        let steps = (window.as_millis() / 50).max(1);
        for _ in 0..steps {
            std::thread::sleep(window / steps as u32);
            queue.extend(procs_running());
        }
        HostReading {
            steal: cpu_ticks().map(|_| steal.fraction()),
            pauses: watch.map(|w| w.between(from, std::time::Instant::now())),
            run_queue: (!queue.is_empty()).then(|| queue.iter().sum::<f64>() / queue.len() as f64),
        }
    }
}

/// /proc/stat's `procs_running`, less this reader itself.
fn procs_running() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let n: f64 = stat
        .lines()
        .find_map(|l| l.strip_prefix("procs_running "))?
        .trim()
        .parse()
        .ok()?;
    Some((n - 1.0).max(0.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_meter_sees_this_process_working() {
        let m = CpuMeter::start();
        let t = std::time::Instant::now();
        let mut x = 0u64;
        while t.elapsed() < std::time::Duration::from_millis(300) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        let u = m.finish().expect("/proc/stat and getrusage");
        // This thread spun the whole time: at least about one core (generous: the VM may steal
        // some), at most every CPU (other tests of this process run meanwhile).
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        assert!(u.lab_cores > 0.5 && u.lab_cores <= cpus + 0.2, "{u:?}");
        assert!(u.host_busy > 0.0 && u.host_busy <= 1.0, "{u:?}");
        assert!((0.0..=1.0).contains(&u.steal), "{u:?}");
    }

    #[test]
    fn hiccups_are_measured() {
        let h = hiccups(std::time::Duration::from_millis(200), None);
        assert!(h.seconds >= 0.2 && h.seconds < 1.0, "{h:?}");
        assert!(
            h.time_in_gaps_over_100us >= 0.0 && h.time_in_gaps_over_100us < 1.0,
            "{h:?}"
        );
        assert!(h.max_gap_us >= 0.0, "{h:?}");
    }

    #[test]
    fn a_reading_of_the_host_has_its_parts() {
        let r = HostReading::take(std::time::Duration::from_millis(200));
        assert!(r.steal.is_some_and(|s| (0.0..=1.0).contains(&s)), "{r:?}");
        assert!(r.pauses.is_some_and(|p| p.window_s >= 0.19), "{r:?}");
        assert!(r.run_queue.is_some_and(|q| q >= 0.0), "{r:?}");
    }

    #[test]
    fn cpu_ticks_are_readable() {
        let (steal, total) = cpu_ticks().expect("/proc/stat");
        assert!(total > 0 && steal <= total);
    }
}
