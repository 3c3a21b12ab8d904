//! Facts about the host that decide whether a timing measurement can be trusted.

/// CPU time the hypervisor stole from this (virtual) machine, in clock ticks summed over all CPUs,
/// and the total ticks (all states), from the first line of /proc/stat.
pub fn cpu_ticks() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let fields: Vec<u64> = stat
        .lines()
        .next()?
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    Some((*fields.get(7)?, fields.iter().sum()))
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

/// Above this stolen fraction, timing results are reported as unreliable.
pub const NOISY_STEAL_FRACTION: f64 = 0.10;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_ticks_are_readable() {
        let (steal, total) = cpu_ticks().expect("/proc/stat");
        assert!(total > 0 && steal <= total);
    }
}
