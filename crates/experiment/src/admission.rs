//! Which runs may share the machine: admission by expected CPU, not by count.
//!
//! Several labs run side by side only while the sum of their expected CPU stays within a budget
//! (a share of the machine's cores) and none of them is one that must run alone (a link fast
//! enough that its emulator needs a core's headroom, a browser whose load is bursty). The runner
//! asks [`Admission::admits`] before it starts each run; [`makespan`] replays the same rule over
//! the runs' estimates to say how long a plan takes at a given concurrency. No clocks, no I/O:
//! both are decided from numbers the caller measured.

/// What a run is expected to cost the machine.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cost {
    /// Expected CPU, in cores (CPU seconds per second of the run), of everything the run's lab
    /// does: emulator, servers, clients.
    pub cores: f64,
    /// The run must have the machine to itself.
    pub exclusive: bool,
}

/// How many runs may be in flight at once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Admission {
    /// At most this many runs at once.
    pub max_in_flight: usize,
    /// The sum of the running runs' expected cores must stay within this (infinite: count only).
    pub budget_cores: f64,
}

impl Admission {
    /// One run at a time (today's default).
    pub const ONE: Admission = Admission {
        max_in_flight: 1,
        budget_cores: f64::INFINITY,
    };

    /// Up to `n` runs at once, whatever they cost; an exclusive run still runs alone.
    pub fn count(n: usize) -> Admission {
        Admission {
            max_in_flight: n.max(1),
            budget_cores: f64::INFINITY,
        }
    }

    /// Whether `next` may start while `running` run. A run always starts on an idle machine
    /// (even one that costs more than the budget: it would run alone anyway); an exclusive run
    /// starts only then, and nothing starts beside it.
    pub fn admits(&self, running: &[Cost], next: Cost) -> bool {
        if running.is_empty() {
            return true;
        }
        if next.exclusive || running.iter().any(|c| c.exclusive) {
            return false;
        }
        if running.len() >= self.max_in_flight {
            return false;
        }
        let used: f64 = running.iter().map(|c| c.cores).sum();
        used + next.cores <= self.budget_cores + 1e-9
    }
}

/// The wall time of `runs` (each its estimated seconds and cost), started in order as
/// [`Admission::admits`] lets them: a run that does not fit waits for runs to end, and no later
/// run overtakes it (the runner starts runs in plan order). The sum of the estimates for
/// [`Admission::ONE`].
pub fn makespan(runs: &[(f64, Cost)], admission: &Admission) -> f64 {
    // (end time, cost) of the runs in flight.
    let mut running: Vec<(f64, Cost)> = Vec::new();
    let mut now = 0.0f64;
    let mut end = 0.0f64;
    for &(seconds, cost) in runs {
        loop {
            let costs: Vec<Cost> = running.iter().map(|r| r.1).collect();
            if admission.admits(&costs, cost) {
                break;
            }
            // Wait for the earliest run to end.
            let (i, _) = running
                .iter()
                .enumerate()
                .min_by(|a, b| a.1.0.total_cmp(&b.1.0))
                .expect("a run that is not admitted waits for one in flight");
            now = now.max(running[i].0);
            running.swap_remove(i);
        }
        let finish = now + seconds.max(0.0);
        end = end.max(finish);
        running.push((finish, cost));
    }
    end
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIGHT: Cost = Cost {
        cores: 0.1,
        exclusive: false,
    };
    const HEAVY: Cost = Cost {
        cores: 0.7,
        exclusive: false,
    };
    const ALONE: Cost = Cost {
        cores: 0.5,
        exclusive: true,
    };

    #[test]
    fn a_run_starts_on_an_idle_machine_whatever_it_costs() {
        let a = Admission {
            max_in_flight: 4,
            budget_cores: 0.5,
        };
        assert!(a.admits(&[], HEAVY));
        assert!(a.admits(&[], ALONE));
    }

    #[test]
    fn the_budget_not_the_count_decides() {
        let a = Admission {
            max_in_flight: 8,
            budget_cores: 1.0,
        };
        assert!(a.admits(&[LIGHT; 5], LIGHT));
        assert!(!a.admits(&[HEAVY], HEAVY), "1.4 cores > 1.0");
        assert!(a.admits(&[HEAVY, LIGHT, LIGHT], LIGHT));
        assert!(!a.admits(&[HEAVY, LIGHT, LIGHT, LIGHT], LIGHT));
        // The count still bounds it.
        let a = Admission {
            max_in_flight: 2,
            budget_cores: 10.0,
        };
        assert!(!a.admits(&[LIGHT, LIGHT], LIGHT));
    }

    #[test]
    fn an_exclusive_run_runs_alone() {
        let a = Admission::count(4);
        assert!(!a.admits(&[LIGHT], ALONE));
        assert!(!a.admits(&[ALONE], LIGHT));
        assert!(a.admits(&[LIGHT, LIGHT], LIGHT));
    }

    #[test]
    fn the_makespan_of_one_at_a_time_is_the_sum() {
        let runs = [(10.0, LIGHT), (5.0, HEAVY), (7.0, ALONE)];
        assert_eq!(makespan(&runs, &Admission::ONE), 22.0);
    }

    #[test]
    fn the_makespan_replays_the_admission_in_plan_order() {
        // Four 30 s players at 0.1 core, four at a time: 30 s.
        let runs = [(30.0, LIGHT); 4];
        assert_eq!(makespan(&runs, &Admission::count(4)), 30.0);
        // Two heavy runs cannot share a 1-core budget: one after the other.
        let budget = Admission {
            max_in_flight: 4,
            budget_cores: 1.0,
        };
        assert_eq!(makespan(&[(10.0, HEAVY), (10.0, HEAVY)], &budget), 20.0);
        // An exclusive run waits for the machine to empty, and the next waits for it.
        let runs = [(10.0, LIGHT), (4.0, LIGHT), (5.0, ALONE), (1.0, LIGHT)];
        assert_eq!(makespan(&runs, &Admission::count(4)), 16.0);
        // A later run does not overtake one that waits.
        let runs = [(10.0, HEAVY), (10.0, HEAVY), (1.0, LIGHT)];
        assert_eq!(makespan(&runs, &budget), 20.0);
    }
}
