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

/// Reports a skipped check: on stderr (shown by the test harness only for failing tests) and
/// appended to the file named by `QUICLAB_SKIP_LOG`, which `scripts/test` prints at the end so no
/// skip goes unseen.
pub fn report_skip(message: &str) {
    eprintln!("{message}");
    if let Ok(path) = std::env::var("QUICLAB_SKIP_LOG") {
        use std::io::Write;
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = writeln!(f, "{message}");
        }
    }
}

/// For tests: whether labs can be built here (root and /dev/net/tun); if not, reports the skip with
/// its reason and returns false.
pub fn can_build_labs_or_skip(test: &str) -> bool {
    let ok = nix::unistd::geteuid().is_root() && std::path::Path::new("/dev/net/tun").exists();
    if !ok {
        report_skip(&format!(
            "SKIPPED {test}: needs root and /dev/net/tun (CI runs as root)"
        ));
    }
    ok
}

/// Above this stolen fraction, timing results are reported as unreliable.
pub const NOISY_STEAL_FRACTION: f64 = 0.10;

/// Runs a timing check up to `attempts` times. Passes as soon as one attempt passes. If all fail, it
/// fails — unless the hypervisor stole more than [`NOISY_STEAL_FRACTION`] of CPU time meanwhile, in
/// which case the machine cannot judge timing and it returns `Err(reason)` for the caller to report
/// as skipped. Structural assertions belong inside `check` too; they fail every attempt alike.
pub fn timing_check(
    name: &str,
    attempts: usize,
    mut check: impl FnMut() -> Result<(), String>,
) -> Result<(), String> {
    let meter = StealMeter::start();
    let mut failures = Vec::new();
    for _ in 0..attempts.max(1) {
        match check() {
            Ok(()) => return Ok(()),
            Err(e) => failures.push(e),
        }
    }
    let stolen = meter.fraction();
    if stolen > NOISY_STEAL_FRACTION {
        return Err(format!(
            "SKIPPED timing of {name}: the hypervisor stole {:.0}% of CPU time during {} attempts ({})",
            stolen * 100.0,
            failures.len(),
            failures.join("; ")
        ));
    }
    panic!(
        "{name} failed {} times with {:.1}% CPU stolen: {}",
        failures.len(),
        stolen * 100.0,
        failures.join("; ")
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_passing_attempt_passes() {
        let mut n = 0;
        assert!(
            timing_check("t", 3, || {
                n += 1;
                if n == 2 { Ok(()) } else { Err("no".into()) }
            })
            .is_ok()
        );
        assert_eq!(n, 2);
    }

    #[test]
    #[should_panic(expected = "failed 3 times")]
    fn a_check_that_always_fails_fails_on_a_quiet_machine() {
        // Sub-millisecond: the hypervisor has no time to steal 10 % of it measurably.
        let _ = timing_check("t", 3, || Err("always".into()));
    }

    #[test]
    fn cpu_ticks_are_readable() {
        let (steal, total) = cpu_ticks().expect("/proc/stat");
        assert!(total > 0 && steal <= total);
    }
}
