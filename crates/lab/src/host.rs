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
        // One thread spun the whole time: about one core (generous: the VM may steal some).
        assert!(u.lab_cores > 0.5 && u.lab_cores < 1.5, "{u:?}");
        assert!(u.host_busy > 0.0 && u.host_busy <= 1.0, "{u:?}");
        assert!((0.0..=1.0).contains(&u.steal), "{u:?}");
    }

    #[test]
    fn cpu_ticks_are_readable() {
        let (steal, total) = cpu_ticks().expect("/proc/stat");
        assert!(total > 0 && steal <= total);
    }
}
