//! Waiting out a storm: a run (or a retry) does not start while the host is pausing the lab or
//! stealing its CPU, so that a flagged attempt's retry does not fall into the same storm.
//!
//! Before the first run and after every flagged attempt, the host is read for a moment
//! ([`quiclab_lab::host::HostReading`]); while the lab is paused for more than a run may be, the
//! runner waits until it has not been for a stretch that grows with the flagged attempts in a
//! row (1 s, 2 s, 4 s, 8 s), at most [`MOST_WAITED`] in all, and says on the progress line —
//! at growing intervals — what it waits for. The end of the budget lets the run start anyway
//! (it may then be flagged, and says why). Waiting stores nothing, so
//! Ctrl-C and `--resume` behave as between any two runs.

use std::time::Duration;

use quiclab_lab::host::HostReading;
use quiclab_lab::tolerance::PAUSED_SHARE;

/// How long the host is read before a run.
pub const READING: Duration = Duration::from_millis(500);
/// The longest interval between two progress lines of one wait.
pub const LONGEST_WAIT: Duration = Duration::from_secs(60);
/// The quiet a run waits for after a noisy reading, before its first retry.
pub const QUIET: Duration = Duration::from_secs(1);
/// The most quiet a run waits for (after several flagged attempts in a row).
pub const LONGEST_QUIET: Duration = Duration::from_secs(8);
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
    flagged_in_a_row: u32,
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
            flagged_in_a_row: 0,
        }
    }

    /// An attempt ended; a flagged one makes the next start read the host.
    pub fn after(&mut self, flagged: bool) {
        self.read_next |= flagged && !self.off;
        self.flagged_in_a_row = if flagged {
            self.flagged_in_a_row + 1
        } else {
            0
        };
    }

    /// The quiet a run waits for once the host was found noisy: 1 s, doubled for each flagged
    /// attempt in a row beyond the first (a retry that met the storm again waits for a longer
    /// lull), at most [`LONGEST_QUIET`].
    pub fn quiet_needed(&self) -> Duration {
        (QUIET * (1u32 << self.flagged_in_a_row.saturating_sub(1).min(8))).min(LONGEST_QUIET)
    }

    /// Before a run starts: reads the host if due and, while it is noisy, waits until the lab
    /// has not been paused for [`Self::quiet_needed`] — watching all along (the pause watch
    /// keeps time), so the run starts as soon as the storm is over, not a blind pause later —
    /// saying so through `say` at growing intervals (1 s, 2 s, 4 s, … at most
    /// [`LONGEST_WAIT`]). Returns early when the process is shutting down (Ctrl-C).
    pub fn before_run(&mut self, say: &dyn Fn(String)) {
        if !std::mem::take(&mut self.read_next) {
            return;
        }
        let Some(mut why) = noisy(&HostReading::take(READING)) else {
            return;
        };
        let Some(watch) = quiclab_lab::host::PauseWatch::global() else {
            return;
        };
        let (most, quiet) = (most_waited(), self.quiet_needed());
        let start = std::time::Instant::now();
        let (mut next_say, mut says) = (Duration::ZERO, 0);
        loop {
            let waited = start.elapsed();
            if waited >= most {
                say(format!(
                    "the host is still noisy ({why}) after {:.0} s of waiting: the next run starts \
                     anyway (it is flagged if the noise reaches it)",
                    waited.as_secs_f64()
                ));
                break;
            }
            if waited >= next_say {
                say(format!(
                    "host noisy ({why}): waiting for {:.0} s without a pause before the next run \
                     (waited {:.0} s of at most {:.0})",
                    quiet.as_secs_f64(),
                    waited.as_secs_f64(),
                    most.as_secs_f64()
                ));
                next_say = waited + wait_after(says);
                says += 1;
            }
            for _ in 0..5 {
                if quiclab_lab::registry::shutting_down() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            // The stretch looked at: the last `quiet`, but not before the wait began until a
            // whole `quiet` has passed (then the storm that started the wait is in it).
            let window = quiet.min(start.elapsed()).max(READING);
            let recent = HostReading {
                steal: None,
                pauses: Some(watch.last(window)),
                run_queue: None,
            };
            match noisy(&recent) {
                Some(w) => why = w,
                None if start.elapsed() >= quiet => {
                    say(format!(
                        "the host is quiet again after {:.0} s: the next run starts",
                        start.elapsed().as_secs_f64()
                    ));
                    break;
                }
                None => {}
            }
        }
        self.waited_s += start.elapsed().as_secs_f64();
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

    #[test]
    fn each_flagged_attempt_in_a_row_waits_for_a_longer_lull() {
        let mut s = StormWatch::default();
        let q = |s: &StormWatch| s.quiet_needed().as_secs();
        assert_eq!(q(&s), 1);
        let mut got = Vec::new();
        for _ in 0..6 {
            s.after(true);
            got.push(q(&s));
        }
        assert_eq!(got, [1, 2, 4, 8, 8, 8]);
        s.after(false);
        assert_eq!(q(&s), 1);
    }
}
