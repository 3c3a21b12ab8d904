//! When the emulator's scheduler thread wakes: the policy, without the thread.
//!
//! The shell (`quiclab-lab`'s scheduler) releases what is due, takes in what arrived, then asks
//! [`next_wake`] what to do until the next release: run again at once, spin one more pass, sleep
//! at most so long (waiting on the devices), or block until an arrival. The answer depends on
//! how far the release is, how late this machine wakes a sleeping thread (learnt: [`WakeMargin`]),
//! how much spinning is left in the budget (a tenth of wall time) and how busy the thread is
//! (a SCHED_FIFO thread that runs 95 % of a second is throttled by the kernel, and spinning must
//! never be what pushes it there). All of it is state fed with explicit times, so the policy is
//! tested in virtual time here, like the lanes; the shell only reads clocks and makes the calls.

use crate::Nanos;

/// Spinning may use at most 1/10 of wall time.
pub const SPIN_BUDGET_DIVISOR: Nanos = 10;
/// At most 1 ms of spinning can be saved up.
pub const SPIN_BUDGET_CAP: Nanos = 1_000_000;
/// The learnt wake-up margin never exceeds this (see [`WakeMargin`]).
pub const WAKE_MARGIN_CAP: Nanos = 200_000;
/// Added to each observed wake-up delay, so the margin covers it with a little room.
pub const WAKE_HEADROOM: Nanos = 5_000;
/// Within this long of a release the thread sleeps only in naps of at most `nap` (see
/// [`nap_timeout`]).
pub const APPROACH: Nanos = 2_000_000;
/// Default longest sleep close to a release (`WakeConfig::nap`). A virtual CPU that halts
/// briefly is resumed promptly (the hypervisor polls for a while before it deschedules a halted
/// vCPU — KVM's default is 200 µs), but one halted for milliseconds can take a millisecond or more
/// to run again: measured on the reference VM, a 2 ms ppoll overshot by p50 44 µs, p99 1.2 ms
/// (7.6 % > 100 µs), a 200 µs one by p99 61 µs (0.5 % > 100 µs), a 20 µs one by p99 25 µs. In
/// `quiclab bench link --only mix` at 10 Mbit/s, naps of 150 µs left 0.1–3.5 % of releases more
/// than 100 µs late, naps of 50 µs 0.07–0.5 % (sleeping straight to the release: 2.5–5.9 %), for
/// 14 % instead of 8 % of a core while packets are in flight (docs/link.md).
pub const NAP: Nanos = 50_000;
/// Above this share of a core (work and spinning, over the last ~50 ms), the thread stops
/// spinning: a SCHED_FIFO thread that runs more than 95 % of a second is stopped by the kernel's
/// real-time throttling for the rest of it (tens of ms; "sched: RT throttling activated" was in the
/// kernel log after 1 Gbit/s runs), and spinning must never be what pushes it there. Half a core:
/// a thread that busy is awake most of the time anyway, and at 1 Gbit/s with offload spinning
/// cost 5 points of a core and did not lower the lateness tail (docs/link.md).
pub const SPIN_BUSY_LIMIT: f64 = 0.5;
/// How often the thread's busy share is measured.
pub const BUSY_SAMPLE: Nanos = 10_000_000;

/// What the scheduler does until the next release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// A release is due: run the loop again at once.
    Now,
    /// Within the margin of a release, with budget left: one more pass of the loop (which also
    /// polls the devices, so an arrival meanwhile is timestamped when it comes).
    Spin,
    /// Wait on the devices at most this long (ns, never 0: a zero timeout would spin).
    Sleep(Nanos),
    /// Nothing queued: wait for an arrival, however long.
    Block,
}

/// The host keys that shape the policy.
#[derive(Debug, Clone, Copy)]
pub struct WakeConfig {
    /// Sleep until at least this long before a release, then spin (`--spin`).
    pub spin: Nanos,
    /// Within [`APPROACH`] of a release, sleep at most this long at a time (0 = sleep straight to
    /// the release; `--nap`).
    pub nap: Nanos,
}

/// The policy's state: spin budget, busy share, learnt margin, whether it is spinning.
#[derive(Debug, Clone)]
pub struct WakeState {
    config: WakeConfig,
    spin_budget: Nanos,
    last_budget_update: Nanos,
    /// Set while the loop spins towards a release (cleared when it sleeps).
    spinning_since: Option<Nanos>,
    busy: BusyShare,
    margin: WakeMargin,
}

/// What to do at `now` with the next release at `next_due` (None: nothing queued). Pure: the
/// state changes only through [`WakeState::advance`], [`WakeState::commit`] and
/// [`WakeState::woke_by_timer`].
pub fn next_wake(state: &WakeState, now: Nanos, next_due: Option<Nanos>) -> Wake {
    let Some(due) = next_due else {
        return Wake::Block;
    };
    if due <= now {
        return Wake::Now;
    }
    let until = due - now;
    let margin = state.margin();
    if until <= margin && state.spin_budget > 0 && state.busy.share < SPIN_BUSY_LIMIT {
        return Wake::Spin;
    }
    // Out of spin budget (or too busy to spin): sleep to the release time itself.
    let wanted = if until <= margin {
        until
    } else {
        until - margin
    };
    Wake::Sleep(match state.config.nap {
        0 => wanted,
        nap => nap_timeout(wanted, until, nap),
    })
}

impl WakeState {
    /// A fresh policy at `now`, the thread having used `cpu_ns` of CPU so far.
    pub fn new(config: WakeConfig, now: Nanos, cpu_ns: Nanos) -> WakeState {
        WakeState {
            config,
            spin_budget: SPIN_BUDGET_CAP,
            last_budget_update: now,
            spinning_since: None,
            busy: BusyShare::new(now, cpu_ns),
            margin: WakeMargin::new(config.spin, WAKE_MARGIN_CAP),
        }
    }

    /// Brings the budget and the busy share up to `now`: the budget earns a tenth of the time
    /// passed and pays for the spinning since the last update; `cpu` (the thread's CPU time, ns) is
    /// read only when a busy sample is due.
    pub fn advance(&mut self, now: Nanos, cpu: impl FnOnce() -> Nanos) {
        let passed = now.saturating_sub(self.last_budget_update);
        self.spin_budget = (self.spin_budget + passed / SPIN_BUDGET_DIVISOR).min(SPIN_BUDGET_CAP);
        if let Some(since) = self.spinning_since {
            self.spin_budget = self
                .spin_budget
                .saturating_sub(now.saturating_sub(since.max(self.last_budget_update)));
        }
        self.last_budget_update = now;
        self.busy.update(now, cpu);
    }

    /// Records the decision taken at `now` (whether the loop is spinning from here).
    pub fn commit(&mut self, wake: Wake, now: Nanos) {
        match wake {
            Wake::Spin => {
                self.spinning_since.get_or_insert(now);
            }
            _ => self.spinning_since = None,
        }
    }

    /// A timed sleep ended by its timer `overshoot` ns after the time asked for.
    pub fn woke_by_timer(&mut self, overshoot: Nanos) {
        self.margin.observe(overshoot);
    }

    /// How long before a release the thread stops sleeping: the learnt wake-up delay, at least
    /// the configured spin.
    pub fn margin(&self) -> Nanos {
        self.config.spin.max(self.margin.margin())
    }

    /// Spinning left in the budget (ns).
    pub fn spin_budget(&self) -> Nanos {
        self.spin_budget
    }

    /// The thread's smoothed share of a core.
    pub fn busy_share(&self) -> f64 {
        self.busy.share
    }
}

/// How long to sleep when the wanted sleep is `wanted` and the next release is `until_due` away:
/// far from a release, until `APPROACH` before it (a late wake-up there costs nothing); within
/// `APPROACH`, in naps of at most `nap`, so the thread never halts long right before a release.
pub fn nap_timeout(wanted: Nanos, until_due: Nanos, nap: Nanos) -> Nanos {
    if until_due > APPROACH {
        wanted.min(until_due - APPROACH).max(1)
    } else {
        wanted.min(nap).max(1)
    }
}

/// The scheduler thread's own CPU use as a share of wall time, smoothed over ~50 ms.
#[derive(Debug, Clone)]
struct BusyShare {
    share: f64,
    last_wall: Nanos,
    last_cpu: Nanos,
}

impl BusyShare {
    fn new(now: Nanos, cpu_ns: Nanos) -> BusyShare {
        BusyShare {
            share: 0.0,
            last_wall: now,
            last_cpu: cpu_ns,
        }
    }

    fn update(&mut self, now: Nanos, cpu: impl FnOnce() -> Nanos) {
        let wall = now.saturating_sub(self.last_wall);
        if wall < BUSY_SAMPLE {
            return;
        }
        let cpu = cpu();
        let sample = cpu.saturating_sub(self.last_cpu) as f64 / wall as f64;
        self.share = 0.8 * self.share + 0.2 * sample;
        self.last_wall = now;
        self.last_cpu = cpu;
    }
}

/// How long before a release the scheduler should stop sleeping and start spinning, learnt from how
/// late this machine actually wakes a thread from a timed sleep. On a guest that idles in HLT, a
/// vCPU halted for milliseconds can take tens of microseconds to resume; that varies by host and
/// load, so it is measured rather than assumed. The estimate jumps halfway to a later wake-up at
/// once and relaxes by 1/16 of the gap towards earlier ones; it never goes below the configured
/// spin nor above `cap` (spinning stays rationed by the budget in any case).
#[derive(Debug, Clone)]
struct WakeMargin {
    estimate: Nanos,
    floor: Nanos,
    cap: Nanos,
}

impl WakeMargin {
    fn new(floor: Nanos, cap: Nanos) -> WakeMargin {
        WakeMargin {
            estimate: floor,
            floor,
            cap,
        }
    }

    fn margin(&self) -> Nanos {
        self.estimate.clamp(self.floor, self.cap.max(self.floor))
    }

    /// `overshoot`: how long after the requested time the thread was woken.
    fn observe(&mut self, overshoot: Nanos) {
        let wanted = overshoot + WAKE_HEADROOM;
        if wanted > self.estimate {
            self.estimate += (wanted - self.estimate) / 2;
        } else {
            self.estimate -= (self.estimate - wanted) / 16;
        }
        self.estimate = self.estimate.min(self.cap);
    }
}

#[cfg(test)]
mod tests;
