//! Waiting out a storm: a run (or a retry) does not start while the host is pausing the lab or
//! stealing its CPU, so that a flagged attempt's retry does not fall into the same storm.
//!
//! Before the first run and after every flagged attempt, the host is read for a moment
//! ([`quiclab_lab::host::HostReading`]); while the lab is paused for more than a run may be the
//! runner waits — 1 s, then twice as
//! long each time, at most [`LONGEST_WAIT`] at once and [`MOST_WAITED`] in all before a run —
//! and says on the progress line what it waits for. A quiet reading lets the run start; so does
//! the end of the budget (the run may then be flagged, and says why). Waiting stores nothing, so
//! Ctrl-C and `--resume` behave as between any two runs.

use std::time::Duration;

use quiclab_lab::host::HostReading;
use quiclab_lab::tolerance::PAUSED_SHARE;

/// How long the host is read before a run.
pub const READING: Duration = Duration::from_millis(500);
/// The longest single wait.
pub const LONGEST_WAIT: Duration = Duration::from_secs(60);
/// The most waited before one run starts anyway.
pub const MOST_WAITED: Duration = Duration::from_secs(600);

/// Sets a smaller bound than [`MOST_WAITED`] (whole seconds): the test suite's, so that a noisy
/// CI host slows it by at most that per run start.
pub const MOST_WAITED_ENV: &str = "QUICLAB_MOST_WAITED_S";

/// [`MOST_WAITED`], or the smaller bound [`MOST_WAITED_ENV`] sets.
pub fn most_waited() -> Duration {
    std::env::var(MOST_WAITED_ENV)
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .map_or(MOST_WAITED, |s| Duration::from_secs(s).min(MOST_WAITED))
}

/// Why a reading is noisy (None: quiet): the lab paused for more than a run may be
/// ([`PAUSED_SHARE`], the flag's own limit). Steal and the run queue are said beside it but not
/// waited on, as they do not flag a run: steal spread thin changes no result (steal in bursts
/// shows as pauses), and other processes' work slows the stacks without pausing the emulator —
/// `quiclab bench noise`'s CPU-hog grid measures what that does; parallel tests or labs would
/// otherwise wait on each other.
pub fn noisy(r: &HostReading) -> Option<String> {
    let mut why = Vec::new();
    if let Some(p) = r.pauses
        && p.share() > PAUSED_SHARE
    {
        why.push(format!(
            "the lab was paused {:.0} % of {:.1} s (longest {:.0} ms)",
            p.share() * 100.0,
            p.window_s,
            p.longest_s * 1e3
        ));
    }
    if why.is_empty() {
        return None;
    }
    if let Some(s) = r.steal {
        why.push(format!(
            "the hypervisor stole {:.0} % of CPU time",
            s * 100.0
        ));
    }
    if let Some(q) = r.run_queue {
        why.push(format!("{q:.1} threads runnable"));
    }
    Some(why.join(", "))
}

/// The wait after `waits` earlier waits: 1 s, 2 s, 4 s, … at most [`LONGEST_WAIT`].
pub fn wait_after(waits: u32) -> Duration {
    Duration::from_secs(1u64 << waits.min(10)).min(LONGEST_WAIT)
}

/// Whether the next run must read the host first, and what was waited.
#[derive(Debug)]
pub struct StormWatch {
    read_next: bool,
    /// Seconds waited in all.
    pub waited_s: f64,
    off: bool,
}

impl Default for StormWatch {
    fn default() -> Self {
        StormWatch::new(true)
    }
}

impl StormWatch {
    /// A watch that waits out noise, or (`wait` false) one that never reads the host.
    pub fn new(wait: bool) -> StormWatch {
        StormWatch {
            read_next: wait,
            waited_s: 0.0,
            off: !wait,
        }
    }

    /// An attempt ended; a flagged one makes the next start read the host.
    pub fn after(&mut self, flagged: bool) {
        self.read_next |= flagged && !self.off;
    }

    /// Before a run starts: reads the host if due and waits while it is noisy, saying so through
    /// `say`. Returns early when the process is shutting down (Ctrl-C).
    pub fn before_run(&mut self, say: &dyn Fn(String)) {
        if !std::mem::take(&mut self.read_next) {
            return;
        }
        let mut waited = Duration::ZERO;
        let most = most_waited();
        for waits in 0.. {
            let reading = HostReading::take(READING);
            let Some(why) = noisy(&reading) else {
                if waited > Duration::ZERO {
                    say(format!(
                        "the host is quiet again after {:.0} s: the next run starts",
                        waited.as_secs_f64()
                    ));
                }
                return;
            };
            if waited >= most {
                say(format!(
                    "the host is still noisy ({why}) after {:.0} s of waiting: the next run starts \
                     anyway (it is flagged if the noise reaches it)",
                    waited.as_secs_f64()
                ));
                return;
            }
            let pause = wait_after(waits).min(most - waited);
            say(format!(
                "host noisy ({why}): waiting {:.0} s before the next run (waited {:.0} s of at \
                 most {:.0})",
                pause.as_secs_f64(),
                waited.as_secs_f64(),
                most.as_secs_f64()
            ));
            let until = std::time::Instant::now() + pause;
            while std::time::Instant::now() < until {
                if quiclab_lab::registry::shutting_down() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            waited += pause;
            self.waited_s += pause.as_secs_f64();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quiclab_lab::host::Pauses;

    fn reading(paused: f64, steal: f64, queue: f64) -> HostReading {
        HostReading {
            steal: Some(steal),
            pauses: Some(Pauses {
                window_s: 0.5,
                total_s: paused * 0.5,
                longest_s: 0.02,
                count: 3,
            }),
            run_queue: Some(queue),
        }
    }

    #[test]
    fn a_storm_is_told_from_a_quiet_host() {
        assert_eq!(noisy(&reading(0.0, 0.01, 0.5)), None);
        let why = noisy(&reading(0.3, 0.0, 2.0)).unwrap();
        assert!(
            why.contains("paused 30 %") && why.contains("2.0 threads"),
            "{why}"
        );
        // Steal or a long run queue alone is not waited on.
        assert_eq!(noisy(&reading(0.0, 0.15, 0.0)), None);
        assert_eq!(noisy(&reading(0.0, 0.0, 9.0)), None);
    }

    #[test]
    fn waits_grow_and_are_bounded() {
        let w: Vec<u64> = (0..9).map(|i| wait_after(i).as_secs()).collect();
        assert_eq!(w, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
    }

    #[test]
    fn only_the_first_run_and_runs_after_a_flagged_attempt_read_the_host() {
        let mut s = StormWatch::default();
        let said = std::cell::RefCell::new(Vec::new());
        s.before_run(&|l| said.borrow_mut().push(l));
        assert!(!s.read_next);
        s.after(false);
        assert!(!s.read_next);
        s.after(true);
        assert!(s.read_next);
        let mut off = StormWatch::new(false);
        off.after(true);
        assert!(!off.read_next);
    }
}
