//! Network switches: a client that moves between access networks during a run (seed 004's
//! "parking lot" experiment, Table 3).
//!
//! A [`SwitchSchedule`] is a list of networks, each entered at a time: `wifi@0s,lte@60s,wifi@180s`.
//! Each network is a built-in one-step profile (seed 004's Table 1 presets `wifi`, `lte`, `3g`),
//! applied to both directions. At every entry after the first the client also changes its
//! network address; that part belongs to the lab (the I/O shell), which asks this module which
//! address epoch a time falls in ([`SwitchSchedule::epoch_at`]). An optional outage `gap` after
//! each switch carries nothing at all (loss 100 %): a switch that is not seamless.
//!
//! The whole timeline becomes an ordinary non-repeating [`Profile`] ([`SwitchSchedule::profile`]),
//! so the link model needs nothing new for the rate, delay and loss changes.

use std::fmt;
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use crate::Nanos;
use crate::profile::{self, Profile, ProfileStep};
use crate::units::{format_duration, parse_duration};

/// Named schedules: seed 004's Table 3 (WiFi 0–60 s, the other network 60–180, WiFi 180–300,
/// the other 300–420, WiFi 420–480, the other 480–540, WiFi 540–600).
const NAMED: [(&str, &str); 2] = [
    (
        "arisu2019-lte",
        "wifi@0s,lte@60s,wifi@180s,lte@300s,wifi@420s,lte@480s,wifi@540s",
    ),
    (
        "arisu2019-3g",
        "wifi@0s,3g@60s,wifi@180s,3g@300s,wifi@420s,3g@480s,wifi@540s",
    ),
];

/// Names of the built-in schedules.
pub fn named_schedules() -> Vec<&'static str> {
    NAMED.iter().map(|(n, _)| *n).collect()
}

/// The networks a schedule may name: the built-in profiles of one constant step.
pub fn network_names() -> Vec<&'static str> {
    profile::builtin_names()
        .iter()
        .copied()
        .filter(|n| profile::builtin(n).is_some_and(|p| p.steps.len() == 1))
        .collect()
}

/// One network of a schedule, entered at `at`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Network {
    /// When the client enters it (ns from the start of the run).
    pub at: Nanos,
    /// The preset's name (`wifi`, `lte`, `3g`).
    pub name: String,
    /// The preset's rate, one-way delay and loss (the same both ways).
    pub step: ProfileStep,
}

/// A switch from one network to the next.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Switch {
    pub at: Nanos,
    pub from: String,
    pub to: String,
    /// Which address epoch starts here (1 for the first switch).
    pub epoch: usize,
}

/// A network switch schedule (see the module documentation).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SwitchSchedule {
    /// The text it was parsed from, resolved (a named schedule is shown expanded).
    pub text: String,
    /// In time order; the first at 0.
    pub networks: Vec<Network>,
    /// Outage after each switch: nothing passes either way (0: a seamless switch).
    pub gap: Nanos,
}

/// What was wrong with a schedule, and what is allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwitchError(pub String);

impl fmt::Display for SwitchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SwitchError {}

/// The most switches a schedule may have: the lab gives its client one address epoch per switch
/// and has this many (100.64.0.17 … 100.64.0.216).
pub const MAX_SWITCHES: usize = 200;

impl SwitchSchedule {
    /// Parses `NET@TIME,NET@TIME,…` or a named schedule, with an outage of `gap` after each
    /// switch.
    pub fn parse(text: &str, gap: Nanos) -> Result<SwitchSchedule, SwitchError> {
        let text = text.trim();
        let resolved = NAMED
            .iter()
            .find(|(n, _)| *n == text)
            .map_or(text, |(_, s)| *s);
        let allowed = || {
            format!(
                "NET@TIME,NET@TIME,… with NET one of {} and TIME increasing from 0s, or one of {}",
                network_names().join(", "),
                named_schedules().join(", ")
            )
        };
        if resolved.is_empty() {
            return Err(SwitchError(format!(
                "an empty schedule: expected {}",
                allowed()
            )));
        }
        let mut networks: Vec<Network> = Vec::new();
        for item in resolved.split(',') {
            let item = item.trim();
            if networks.len() > MAX_SWITCHES {
                return Err(SwitchError(format!(
                    "more than {MAX_SWITCHES} switches: a lab has {MAX_SWITCHES} address epochs \
                     for its client (one per switch); give at most {} networks",
                    MAX_SWITCHES + 1
                )));
            }
            let Some((name, at)) = item.split_once('@') else {
                return Err(SwitchError(format!(
                    "{item:?} has no @TIME: expected {}",
                    allowed()
                )));
            };
            let name = name.trim();
            let Some(step) = profile::builtin(name)
                .filter(|p| p.steps.len() == 1)
                .map(|p| p.steps[0].clone())
            else {
                return Err(SwitchError(format!(
                    "unknown network {name:?} in {item:?}: a schedule's networks are {}",
                    network_names().join(", ")
                )));
            };
            let at = parse_duration(at.trim())
                .map_err(|e| SwitchError(format!("{item:?}: the time {e}")))?;
            match networks.last() {
                None if at != 0 => {
                    return Err(SwitchError(format!(
                        "the schedule must start with the first network at 0s (got {item:?})"
                    )));
                }
                Some(prev) if at <= prev.at => {
                    return Err(SwitchError(format!(
                        "times must increase: {item:?} comes after {}@{}",
                        prev.name,
                        format_duration(prev.at)
                    )));
                }
                Some(prev) if gap > 0 && at - prev.at <= gap && networks.len() > 1 => {
                    return Err(SwitchError(format!(
                        "{item:?} comes {} after the previous switch, within its {} outage gap",
                        format_duration(at - prev.at),
                        format_duration(gap)
                    )));
                }
                _ => {}
            }
            networks.push(Network {
                at,
                name: name.to_string(),
                step,
            });
        }
        Ok(SwitchSchedule {
            text: resolved.to_string(),
            networks,
            gap,
        })
    }

    /// The switches, in time order (every network but the first).
    pub fn switches(&self) -> Vec<Switch> {
        self.networks
            .windows(2)
            .enumerate()
            .map(|(i, w)| Switch {
                at: w[1].at,
                from: w[0].name.clone(),
                to: w[1].name.clone(),
                epoch: i + 1,
            })
            .collect()
    }

    /// The address epoch at `t`: 0 before the first switch, k from the k-th switch on.
    pub fn epoch_at(&self, t: Nanos) -> usize {
        self.networks.iter().skip(1).filter(|n| n.at <= t).count()
    }

    /// Whether `t` falls in an outage gap after a switch.
    pub fn in_gap(&self, t: Nanos) -> bool {
        self.gap > 0
            && self
                .networks
                .iter()
                .skip(1)
                .any(|n| t >= n.at && t < n.at + self.gap)
    }

    /// The network the client is on at `t`.
    pub fn network_at(&self, t: Nanos) -> &Network {
        &self.networks[self.epoch_at(t)]
    }

    /// The whole timeline as one direction's profile (the same for both directions): each
    /// network for its time, an outage step of `gap` at each switch, the last network held.
    pub fn profile(&self) -> Profile {
        let mut steps = Vec::new();
        for (i, n) in self.networks.iter().enumerate() {
            let mut start = n.at;
            if i > 0 && self.gap > 0 {
                steps.push(ProfileStep {
                    duration: self.gap,
                    rate_bps: n.step.rate_bps,
                    delay: n.step.delay,
                    loss: 1.0,
                });
                start += self.gap;
            }
            let duration = match self.networks.get(i + 1) {
                Some(next) => next.at - start,
                // Held after the last step (the profile does not repeat).
                None => n.step.duration.max(1),
            };
            steps.push(ProfileStep {
                duration,
                ..n.step.clone()
            });
        }
        Profile {
            name: format!("switch {}", self.text),
            steps,
            repeat: false,
        }
    }
}

/// Which client addresses the link carries at a time (the emulator's half of a switch): from
/// each switch on, only the new network's address. A packet from or to an address of another
/// network is dropped, as the old radio link is gone: without this, sockets bound to the old
/// address would keep talking through the emulator and no timeout would ever fire.
#[derive(Debug, Clone, PartialEq)]
pub struct AddressGate {
    /// (start of the epoch, the client's addresses in it), in time order, the first at 0.
    epochs: Vec<(Nanos, Vec<IpAddr>)>,
}

impl AddressGate {
    /// A gate for `schedule` where `addresses(k)` are the client's addresses in epoch k.
    pub fn new(schedule: &SwitchSchedule, addresses: impl Fn(usize) -> Vec<IpAddr>) -> AddressGate {
        let mut epochs = vec![(0, addresses(0))];
        for sw in schedule.switches() {
            epochs.push((sw.at, addresses(sw.epoch)));
        }
        AddressGate { epochs }
    }

    /// Whether a packet between `src` and `dst` may cross the link at `t`: it does not name a
    /// client address of any epoch but the current one.
    pub fn admits(&self, t: Nanos, src: IpAddr, dst: IpAddr) -> bool {
        self.judge(t, src, dst) == GateVerdict::Admit
    }

    /// What the gate does with a packet between `src` and `dst` at `t`, and why.
    pub fn judge(&self, t: Nanos, src: IpAddr, dst: IpAddr) -> GateVerdict {
        let current = self
            .epochs
            .iter()
            .rposition(|(at, _)| *at <= t)
            .unwrap_or(0);
        let named = |i: usize| {
            let addrs = &self.epochs[i].1;
            addrs.contains(&src) || addrs.contains(&dst)
        };
        if (current + 1..self.epochs.len()).any(named) {
            GateVerdict::NotYetValid
        } else if (0..current).any(named) {
            GateVerdict::Stale
        } else {
            GateVerdict::Admit
        }
    }
}

/// The address gate's verdict on one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateVerdict {
    Admit,
    /// It names an address of a network the client has left: the configured switch cut it off.
    Stale,
    /// It names an address of a network the client has not reached yet: nothing configured drops
    /// such a packet (the lab adds an epoch's address only after its switch), so a run that
    /// shows one is flagged.
    NotYetValid,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{NANOS_PER_MS, NANOS_PER_SEC};

    const S: Nanos = NANOS_PER_SEC;

    #[test]
    fn a_schedule_lists_networks_and_switches_in_time_order() {
        let s = SwitchSchedule::parse("wifi@0s, lte@60s,wifi@180s", 0).unwrap();
        assert_eq!(
            s.networks
                .iter()
                .map(|n| (n.at, n.name.as_str()))
                .collect::<Vec<_>>(),
            [(0, "wifi"), (60 * S, "lte"), (180 * S, "wifi")]
        );
        let sw = s.switches();
        assert_eq!(sw.len(), 2);
        assert_eq!(
            (sw[0].at, sw[0].from.as_str(), sw[0].to.as_str()),
            (60 * S, "wifi", "lte")
        );
        assert_eq!(sw[1].epoch, 2);
        // The presets are seed 004's Table 1 paths: LTE 5.4 Mbit/s, 128 ms RTT.
        assert_eq!(s.networks[1].step.rate_bps, Some(5_400_000));
        assert_eq!(s.networks[1].step.delay, 64 * NANOS_PER_MS);
    }

    #[test]
    fn the_gate_tells_a_left_network_from_one_not_reached_yet() {
        let s = SwitchSchedule::parse("wifi@0s,lte@10s", 0).unwrap();
        let a = |k: usize| -> Vec<IpAddr> { vec![format!("100.64.0.{}", 16 + k).parse().unwrap()] };
        let gate = AddressGate::new(&s, a);
        let server: IpAddr = "100.64.0.2".parse().unwrap();
        let (old, new) = (a(0)[0], a(1)[0]);
        assert_eq!(gate.judge(S, old, server), GateVerdict::Admit);
        assert_eq!(gate.judge(S, new, server), GateVerdict::NotYetValid);
        assert_eq!(gate.judge(11 * S, server, old), GateVerdict::Stale);
        assert_eq!(gate.judge(11 * S, new, server), GateVerdict::Admit);
        assert!(!gate.admits(S, server, new) && gate.admits(11 * S, server, new));
    }

    #[test]
    fn a_schedule_longer_than_the_labs_address_epochs_is_refused() {
        let items = |n: usize| {
            (0..n)
                .map(|i| format!("{}@{i}s", if i % 2 == 0 { "wifi" } else { "lte" }))
                .collect::<Vec<_>>()
                .join(",")
        };
        assert_eq!(
            SwitchSchedule::parse(&items(MAX_SWITCHES + 1), 0)
                .unwrap()
                .switches()
                .len(),
            MAX_SWITCHES
        );
        let e = SwitchSchedule::parse(&items(MAX_SWITCHES + 2), 0).unwrap_err();
        assert!(e.0.contains("more than 200 switches"), "{e:?}");
    }

    #[test]
    fn epochs_change_at_the_switch_instants() {
        let s = SwitchSchedule::parse("wifi@0s,3g@10s,wifi@20s", 0).unwrap();
        assert_eq!(s.epoch_at(0), 0);
        assert_eq!(s.epoch_at(10 * S - 1), 0);
        assert_eq!(s.epoch_at(10 * S), 1);
        assert_eq!(s.epoch_at(25 * S), 2);
        assert_eq!(s.network_at(15 * S).name, "3g");
        assert!(!s.in_gap(10 * S));
    }

    #[test]
    fn the_named_schedules_are_seed_004s_table_3() {
        let s = SwitchSchedule::parse("arisu2019-3g", 0).unwrap();
        let at: Vec<u64> = s.networks.iter().map(|n| n.at / S).collect();
        assert_eq!(at, [0, 60, 180, 300, 420, 480, 540]);
        let names: Vec<&str> = s.networks.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["wifi", "3g", "wifi", "3g", "wifi", "3g", "wifi"]);
        assert!(s.text.starts_with("wifi@0s,3g@60s"));
        assert_eq!(
            SwitchSchedule::parse("arisu2019-lte", 0)
                .unwrap()
                .switches()
                .len(),
            6
        );
    }

    #[test]
    fn the_profile_follows_the_timeline_with_outage_gaps() {
        let s = SwitchSchedule::parse("wifi@0s,lte@10s,3g@30s", 2 * S).unwrap();
        let p = s.profile();
        assert!(!p.repeat);
        let d: Vec<(u64, f64)> = p
            .steps
            .iter()
            .map(|st| (st.duration / S, st.loss))
            .collect();
        // wifi 10 s, gap 2 s, lte 18 s, gap 2 s, 3g held.
        assert_eq!(d[..4], [(10, 0.0), (2, 1.0), (18, 0.0), (2, 1.0)]);
        assert_eq!(p.steps.len(), 5);
        assert_eq!(p.step_at(5 * S).rate_bps, Some(5_900_000));
        assert_eq!(p.step_at(11 * S).loss, 1.0);
        assert_eq!(p.step_at(12 * S).rate_bps, Some(5_400_000));
        assert_eq!(p.step_at(500 * S).rate_bps, Some(3_100_000));
        assert!(s.in_gap(31 * S) && !s.in_gap(32 * S));
        // Without a gap the steps are the networks' own.
        let p0 = SwitchSchedule::parse("wifi@0s,lte@10s", 0)
            .unwrap()
            .profile();
        assert_eq!(p0.steps.len(), 2);
        assert_eq!(p0.step_at(10 * S).rate_bps, Some(5_400_000));
    }

    #[test]
    fn the_gate_passes_only_the_current_networks_address() {
        let s = SwitchSchedule::parse("wifi@0s,lte@10s,wifi@20s", 0).unwrap();
        let client = |k: usize| -> IpAddr { format!("100.64.0.{}", 16 + k).parse().unwrap() };
        let gate = AddressGate::new(&s, |k| vec![client(k)]);
        let server: IpAddr = "100.64.0.2".parse().unwrap();
        let other: IpAddr = "100.64.0.99".parse().unwrap();
        // Before the first switch: epoch 0's address both ways; a later epoch's is not yet valid.
        assert!(gate.admits(5 * S, client(0), server));
        assert!(gate.admits(5 * S, server, client(0)));
        assert!(!gate.admits(5 * S, client(1), server));
        // From the switch on the old address is dropped both ways, the new one passes.
        assert!(!gate.admits(10 * S, client(0), server));
        assert!(!gate.admits(15 * S, server, client(0)));
        assert!(gate.admits(10 * S, client(1), server));
        assert!(gate.admits(25 * S, server, client(2)));
        assert!(!gate.admits(25 * S, server, client(1)));
        // Addresses the schedule does not know are not its business.
        assert!(gate.admits(25 * S, other, server));
    }

    #[test]
    fn bad_schedules_say_what_is_wrong_and_what_is_allowed() {
        let err = |t: &str| SwitchSchedule::parse(t, 0).unwrap_err().0;
        let e = err("wifi@0s,lte@60s,wifi@30s");
        assert!(
            e.contains("times must increase") && e.contains("wifi@30s"),
            "{e}"
        );
        let e = err("wifi@0s,5g@60s");
        assert!(
            e.contains("unknown network \"5g\"") && e.contains("lte"),
            "{e}"
        );
        let e = err("lte@5s,wifi@60s");
        assert!(e.contains("start with the first network at 0s"), "{e}");
        let e = err("wifi,lte@60s");
        assert!(e.contains("no @TIME") && e.contains("arisu2019-lte"), "{e}");
        let e = err("wifi@0s,lte@soon");
        assert!(e.contains("lte@soon"), "{e}");
        assert!(err("").contains("empty"));
        // NP2b profiles vary in time: they are not networks of a schedule.
        let e = err("wifi@0s,np2b-typical@10s");
        assert!(e.contains("unknown network"), "{e}");
        let e = SwitchSchedule::parse("wifi@0s,lte@10s,3g@11s", 2 * S)
            .unwrap_err()
            .0;
        assert!(e.contains("outage gap"), "{e}");
    }
}
