//! What a run is expected to cost the machine, from what runs like it measured: the table
//! `--jobs auto` admits runs by ([`quiclab_experiment::admission`]).
//!
//! A run's class is its workload kind, its browser (Chromium or quiclab's own clients) and its
//! link rate. Its expected CPU is the median `lab_cpu_cores` of the stored runs of its class that
//! ran alone (`labs_in_flight` 1, or from before it was recorded, when every run ran alone) —
//! getrusage of the whole process, exact only then — else the figure measured on the reference
//! machine below. Classes that must run alone say why.

use std::collections::BTreeMap;

use quiclab_experiment::WorkloadKind;
use quiclab_experiment::admission::{Admission, Cost};
use quiclab_model::runner_metrics::{LAB_CPU_CORES, LABS_IN_FLIGHT};
use quiclab_workload::WorkloadSpec;

use crate::PreparedRun;

/// The link rate classes that cost differently (the emulator's work, the stacks' crypto and
/// copies grow with it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RateClass {
    /// Below 50 Mbit/s in both directions.
    Slow,
    /// 50 to 200 Mbit/s.
    Medium,
    /// 200 Mbit/s or more, or no rate limit: the emulator needs most of a core (docs/link.md:
    /// 42–47 % of a core at 1 Gbit/s with TUN offload) and the stacks the rest.
    Fast,
}

impl RateClass {
    /// The class of the faster direction. An unlimited uplink does not count: quiclab's
    /// workloads download, so the uplink carries requests and acknowledgements (a lab with an
    /// unlimited downlink is fast).
    pub fn of(spec: &quiclab_lab::LinkSpec) -> RateClass {
        let down = spec.downlink.mean_rate_bps().unwrap_or(f64::INFINITY);
        let fastest = spec.uplink.mean_rate_bps().map_or(down, |up| up.max(down));
        if fastest >= 200e6 {
            RateClass::Fast
        } else if fastest >= 50e6 {
            RateClass::Medium
        } else {
            RateClass::Slow
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            RateClass::Slow => "< 50 Mbit/s",
            RateClass::Medium => "50–200 Mbit/s",
            RateClass::Fast => "≥ 200 Mbit/s",
        }
    }
}

/// What costs alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CostClass {
    pub kind: WorkloadKind,
    pub chromium: bool,
    pub rate: RateClass,
    /// A queue discipline other than tail drop (CoDel, FQ-CoDel, PIE) in either direction.
    pub aqm: bool,
}

impl CostClass {
    pub fn of(run: &PreparedRun) -> CostClass {
        let chromium = matches!(
            &run.work,
            WorkloadSpec::Page(p) if p.browser == quiclab_workload::child::Browser::Chromium
        );
        let tail_drop = quiclab_link::aqm::DisciplineSpec::DropTail;
        CostClass {
            kind: run.work.kind(),
            chromium,
            rate: RateClass::of(&run.spec),
            aqm: run.spec.uplink.discipline != tail_drop
                || run.spec.downlink.discipline != tail_drop,
        }
    }

    /// Why a run of this class must have the machine to itself (None: it may share).
    pub fn runs_alone(self) -> Option<&'static str> {
        match (self.rate, self.chromium) {
            (RateClass::Fast, _) => Some(
                "a link of 200 Mbit/s or more: its emulator needs about half a core and its \
                 stacks the rest",
            ),
            (_, true) => Some(
                "a Chromium load: side by side its page load time grew 7.5–15 % (docs/scale.md)",
            ),
            _ if self.aqm && self.kind == WorkloadKind::Page => Some(
                "a page load through a CoDel, FQ-CoDel or PIE queue: three side by side had their \
                 emulators' release lateness p99 up to 900 µs (at most 95 µs alone) and a quarter \
                 of the runs still flagged after their retries (docs/scale.md)",
            ),
            _ => None,
        }
    }

    /// The CPU measured for this class on the reference machine (2 vCPU, 2026-11-26), rounded
    /// up: `lab_cpu_cores` of runs that ran alone (docs/scale.md, "What a run costs") — bulk
    /// 0.31–0.33 at a full 10 Mbit/s (0.14–0.20 under 2 % loss), page loads 0.23–0.27, two
    /// competing flows at 20 Mbit/s 0.40–0.46, a 30 s DASH player on NP2b 0.045–0.063.
    pub fn reference_cores(self) -> f64 {
        let slow = match self.kind {
            WorkloadKind::Bulk => 0.33,
            WorkloadKind::Page => 0.30,
            WorkloadKind::Flows => 0.45,
            WorkloadKind::Video => 0.08,
        };
        match (self.rate, self.chromium) {
            (_, true) | (RateClass::Fast, _) => 1.0,
            (RateClass::Medium, false) => (slow * 2.0f64).min(1.0),
            (RateClass::Slow, false) => slow,
        }
    }

    pub fn describe(self) -> String {
        format!(
            "{}{}{} at {}",
            self.kind.name(),
            if self.chromium { " (Chromium)" } else { "" },
            if self.aqm { " (AQM)" } else { "" },
            self.rate.name()
        )
    }
}

/// Where a cost came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CostSource {
    /// The median of this many stored runs of the class that ran alone.
    Measured(usize),
    /// [`CostClass::reference_cores`].
    Reference,
}

/// The expected cost of each class: measured where runs of it ran alone, else the reference.
#[derive(Debug, Clone, Default)]
pub struct CostTable {
    measured: BTreeMap<CostClass, Vec<f64>>,
}

impl CostTable {
    /// Adds a finished run's CPU, if it ran alone and measured it (`metrics`: its stored
    /// metrics). Runs that shared the machine are not evidence of one run's cost.
    pub fn observe(&mut self, class: CostClass, metrics: &BTreeMap<String, f64>) {
        let alone = metrics.get(LABS_IN_FLIGHT.name).is_none_or(|&n| n <= 1.0);
        if let (true, Some(&cores)) = (alone, metrics.get(LAB_CPU_CORES.name))
            && cores.is_finite()
            && cores > 0.0
        {
            self.measured.entry(class).or_default().push(cores);
        }
    }

    /// The expected cost of `class`, and where it came from: the measured median, never below
    /// the reference. A run's `lab_cpu_cores` averages over its whole life, set-up and idle
    /// waits included, so short bursty runs measure light: built-in page loads alone measured
    /// 0.22 cores, which admitted four at once where docs/scale.md had measured three — and the
    /// carlucci2015-s3 full form (06cb7a9) had 28 of 297 built-in loads made four at once still
    /// flagged after their retries (71 retried), against 0 of 179 made three at once.
    pub fn cost(&self, class: CostClass) -> (Cost, CostSource) {
        let exclusive = class.runs_alone().is_some();
        let measured = self.measured.get(&class);
        match measured.and_then(|v| quiclab_experiment::stats::median(v)) {
            Some(median) => (
                Cost {
                    cores: median.max(class.reference_cores()),
                    exclusive,
                },
                CostSource::Measured(measured.map_or(0, Vec::len)),
            ),
            None => (
                Cost {
                    cores: class.reference_cores(),
                    exclusive,
                },
                CostSource::Reference,
            ),
        }
    }
}

/// How many runs may share the machine: `--jobs N` or `--jobs auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Jobs {
    /// At most N at once, whatever they are: the user's choice, made knowingly (the fidelity
    /// flags say what sharing cost); runs that `auto` keeps alone share too.
    Count(usize),
    /// As many as the machine's budget admits ([`auto_admission`]).
    Auto,
}

impl Jobs {
    pub const ONE: Jobs = Jobs::Count(1);

    /// `--jobs`'s value: a positive count or `auto`.
    pub fn parse(s: &str) -> Result<Jobs, String> {
        match s {
            "auto" => Ok(Jobs::Auto),
            n => match n.parse::<usize>() {
                Ok(n) if (1..=64).contains(&n) => Ok(Jobs::Count(n)),
                _ => Err(format!(
                    "`{s}`: give a number of labs from 1 to 64, or `auto` (as many as the \
                     machine's CPU budget admits)"
                )),
            },
        }
    }

    /// A run's cost as this setting admits it: under a count nothing is kept alone.
    pub fn effective(self, cost: Cost) -> Cost {
        match self {
            Jobs::Count(_) => Cost {
                exclusive: false,
                ..cost
            },
            Jobs::Auto => cost,
        }
    }

    pub fn admission(self) -> Admission {
        match self {
            Jobs::Count(n) => Admission::count(n),
            Jobs::Auto => auto_admission(cores()),
        }
    }
}

impl std::fmt::Display for Jobs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Jobs::Count(n) => write!(f, "{n}"),
            Jobs::Auto => write!(f, "auto"),
        }
    }
}

/// The share of the machine's cores `auto` lets the runs in flight expect to use: the rest is
/// headroom for bursts (handshakes, lab set-up) and for the emulators' releases to be on time.
pub const AUTO_CORE_SHARE: f64 = 0.5;

/// At most this many labs per core under `auto` (measured: eight 30 s DASH players on two cores
/// gave the answers of one at a time, lateness p99 ≤ 40 µs, no run flagged; docs/scale.md).
pub const AUTO_LABS_PER_CORE: usize = 4;

/// `--jobs auto` on a machine of `cores` cores.
pub fn auto_admission(cores: usize) -> Admission {
    Admission {
        max_in_flight: (cores * AUTO_LABS_PER_CORE).max(1),
        budget_cores: cores as f64 * AUTO_CORE_SHARE,
    }
}

/// The cores this process may run on.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(kind: WorkloadKind, rate: RateClass) -> CostClass {
        CostClass {
            kind,
            chromium: false,
            rate,
            aqm: false,
        }
    }

    #[test]
    fn only_runs_that_ran_alone_teach_a_cost() {
        let c = class(WorkloadKind::Video, RateClass::Slow);
        let mut t = CostTable::default();
        assert_eq!(t.cost(c).1, CostSource::Reference);
        let m = |cores: f64, labs: Option<f64>| {
            let mut m = BTreeMap::from([(LAB_CPU_CORES.name.to_string(), cores)]);
            if let Some(l) = labs {
                m.insert(LABS_IN_FLIGHT.name.to_string(), l);
            }
            m
        };
        t.observe(c, &m(0.9, Some(3.0)));
        assert_eq!(
            t.cost(c).1,
            CostSource::Reference,
            "a shared run is no evidence"
        );
        t.observe(c, &m(0.10, Some(1.0)));
        t.observe(c, &m(0.12, None));
        t.observe(c, &m(0.20, Some(1.0)));
        let (cost, source) = t.cost(c);
        assert_eq!(source, CostSource::Measured(3));
        assert_eq!(cost.cores, 0.12);
        assert!(!cost.exclusive);
        // Never below the reference: built-in page loads measured 0.22 alone, and four at once
        // (1.0 / 0.22) were flagged where three (1.0 / 0.30) were not.
        let page = class(WorkloadKind::Page, RateClass::Slow);
        t.observe(page, &m(0.22, Some(1.0)));
        let (cost, source) = t.cost(page);
        assert_eq!(source, CostSource::Measured(1));
        assert_eq!(cost.cores, 0.30);
        let a = auto_admission(2);
        assert_eq!((a.budget_cores / cost.cores).floor(), 3.0, "three at once");
    }

    #[test]
    fn fast_links_chromium_and_aqm_queues_run_alone() {
        assert!(
            class(WorkloadKind::Bulk, RateClass::Fast)
                .runs_alone()
                .is_some()
        );
        assert!(
            class(WorkloadKind::Bulk, RateClass::Medium)
                .runs_alone()
                .is_none()
        );
        let chromium = CostClass {
            chromium: true,
            ..class(WorkloadKind::Page, RateClass::Slow)
        };
        assert!(chromium.runs_alone().is_some());
        assert!(CostTable::default().cost(chromium).0.exclusive);
        // Page loads through an AQM queue run alone; downloads through one share (measured).
        let codel = |kind| CostClass {
            aqm: true,
            ..class(kind, RateClass::Slow)
        };
        assert!(codel(WorkloadKind::Page).runs_alone().is_some());
        assert!(codel(WorkloadKind::Bulk).runs_alone().is_none());
    }

    #[test]
    fn jobs_parse_and_name_what_is_allowed() {
        assert_eq!(Jobs::parse("auto"), Ok(Jobs::Auto));
        assert_eq!(Jobs::parse("4"), Ok(Jobs::Count(4)));
        for bad in ["0", "-1", "many", "65"] {
            let e = Jobs::parse(bad).unwrap_err();
            assert!(e.contains("1 to 64") && e.contains("auto"), "{e}");
        }
    }

    #[test]
    fn auto_keeps_half_the_cores_for_headroom() {
        let a = auto_admission(2);
        assert_eq!(a.max_in_flight, 8);
        assert_eq!(a.budget_cores, 1.0);
    }
}
