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
                // SAFETY: sched_setaffinity on the calling thread with a zeroed, then filled, set.
                unsafe {
                    let mut set: libc::cpu_set_t = std::mem::zeroed();
                    libc::CPU_SET(cpu, &mut set);
                    libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
                }
            }
            let param = libc::sched_param { sched_priority: 50 };
            // SAFETY: pthread_setschedparam on this thread with a valid policy and parameter.
            unsafe { libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &param) };
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
    fn cpu_ticks_are_readable() {
        let (steal, total) = cpu_ticks().expect("/proc/stat");
        assert!(total > 0 && steal <= total);
    }
}
