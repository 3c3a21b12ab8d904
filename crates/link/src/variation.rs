//! Delay variation on top of the propagation delay (issue 59): jitter and reordering, seeded
//! like the random loss so that a run is reproducible from its seed.
//!
//! - **Jitter** `J`: each packet's propagation delay is drawn uniformly from `[d − J, d + J]`
//!   (at least 0), as netem's `delay d J` without a distribution table. The link keeps its
//!   order: a packet whose draw would deliver it before the previous packet leaves with it
//!   (a real path's queues do not reorder either), so the spread of one-way delays is at most
//!   2J and packets may bunch.
//! - **Reordering** `p` with a hold-back `H`: each packet is, with probability `p`, delivered
//!   `H` later than the link's order would deliver it, and the packets after it may overtake
//!   it (the link's order continues without it). netem's `reorder` sends a share *early* by
//!   the delay instead; holding a share back is the same displacement seen from the other side,
//!   without making the delay itself the reordering's size.
//!
//! The draws come from a stream of their own: adding jitter or reordering to a link does not
//! change which packets its random loss drops.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::Nanos;

/// The most jitter or hold-back quiclab takes (10 s): beyond it a "delay variation" is an outage.
pub const MAX_VARIATION: Nanos = 10_000_000_000;

/// How a direction's delay varies (none by default).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Variation {
    /// Half-width of the uniform spread around the propagation delay.
    pub jitter: Nanos,
    /// The share of packets held back (0–1).
    pub reorder: f64,
    /// How much later a held-back packet is delivered than the link's order would deliver it.
    pub reorder_delay: Nanos,
}

impl Variation {
    pub fn is_none(&self) -> bool {
        self.jitter == 0 && self.reorder == 0.0
    }

    /// Why this variation cannot be emulated, if so.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.reorder.is_finite() && (0.0..=1.0).contains(&self.reorder)) {
            return Err(format!(
                "reorder is a share of packets from 0 to 100 %; got {}",
                self.reorder
            ));
        }
        if self.reorder > 0.0 && self.reorder_delay == 0 {
            return Err("reorder needs a hold-back above 0 (reorder-delay)".into());
        }
        for (name, v) in [
            ("jitter", self.jitter),
            ("reorder-delay", self.reorder_delay),
        ] {
            if v > MAX_VARIATION {
                return Err(format!(
                    "{name} {} is more than {}: that is an outage, not a delay variation",
                    crate::units::format_duration(v),
                    crate::units::format_duration(MAX_VARIATION)
                ));
            }
        }
        Ok(())
    }

    /// `, jitter 5ms, reorder 2% by 10ms` (empty without variation): the direction's
    /// description goes on with it.
    pub fn describe(&self) -> String {
        let mut s = String::new();
        if self.jitter > 0 {
            s += &format!(", jitter {}", crate::units::format_duration(self.jitter));
        }
        if self.reorder > 0.0 {
            s += &format!(
                ", reorder {}% by {}",
                crate::spec::trim(self.reorder * 100.0),
                crate::units::format_duration(self.reorder_delay)
            );
        }
        s
    }
}

/// What the variation does to one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Draw {
    /// Its propagation delay, jitter included.
    pub delay: Nanos,
    /// Held back this much beyond the link's order (it may be overtaken), if it is.
    pub held_back: Option<Nanos>,
}

/// The seeded process of one direction.
#[derive(Debug, Clone)]
pub struct VariationProcess {
    spec: Variation,
    rng: ChaCha8Rng,
}

impl VariationProcess {
    /// Seed: the direction's loss seed; the stream is distinct from the loss's.
    pub fn new(spec: Variation, seed: u64) -> VariationProcess {
        VariationProcess {
            spec,
            rng: ChaCha8Rng::seed_from_u64(seed ^ 0x4A49_5454_4552),
        }
    }

    pub fn spec(&self) -> Variation {
        self.spec
    }

    /// The next packet's delay from the propagation delay `delay` in force.
    pub fn draw(&mut self, delay: Nanos) -> Draw {
        let delay = match self.spec.jitter {
            0 => delay,
            j => {
                let offset = self.rng.random_range(0..=2 * j);
                (delay + offset).saturating_sub(j)
            }
        };
        let held_back = (self.spec.reorder > 0.0 && self.rng.random::<f64>() < self.spec.reorder)
            .then_some(self.spec.reorder_delay);
        Draw { delay, held_back }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Nanos = 1_000_000;

    #[test]
    fn no_variation_draws_the_delay_itself() {
        let mut v = VariationProcess::new(Variation::default(), 1);
        for _ in 0..100 {
            assert_eq!(
                v.draw(25 * MS),
                Draw {
                    delay: 25 * MS,
                    held_back: None
                }
            );
        }
    }

    #[test]
    fn jitter_spreads_uniformly_within_its_band_around_the_delay() {
        let spec = Variation {
            jitter: 5 * MS,
            ..Default::default()
        };
        let mut v = VariationProcess::new(spec, 7);
        let draws: Vec<Nanos> = (0..20_000).map(|_| v.draw(25 * MS).delay).collect();
        assert!(draws.iter().all(|d| (20 * MS..=30 * MS).contains(d)));
        let mean = draws.iter().sum::<Nanos>() as f64 / draws.len() as f64;
        assert!((mean - 25e6).abs() < 0.1e6, "mean {mean}");
        // Uniform: each fifth of the band holds about a fifth of the draws.
        for k in 0..5u64 {
            let lo = 20 * MS + k * 2 * MS;
            let share = draws
                .iter()
                .filter(|d| (lo..lo + 2 * MS).contains(d))
                .count() as f64
                / draws.len() as f64;
            assert!((share - 0.2).abs() < 0.02, "fifth {k}: {share}");
        }
        // Never below 0.
        let mut v = VariationProcess::new(spec, 7);
        assert!((0..1000).all(|_| v.draw(MS).delay <= 6 * MS));
    }

    #[test]
    fn reordering_holds_back_its_share_and_is_reproducible_from_the_seed() {
        let spec = Variation {
            reorder: 0.1,
            reorder_delay: 10 * MS,
            ..Default::default()
        };
        let run = |seed| {
            let mut v = VariationProcess::new(spec, seed);
            (0..10_000)
                .map(|_| v.draw(MS).held_back)
                .collect::<Vec<_>>()
        };
        let a = run(3);
        let share = a.iter().filter(|h| h.is_some()).count() as f64 / a.len() as f64;
        assert!((share - 0.1).abs() < 0.01, "{share}");
        assert!(a.iter().flatten().all(|h| *h == 10 * MS));
        assert_eq!(a, run(3));
        assert_ne!(a, run(4));
    }

    #[test]
    fn a_variation_that_cannot_be_emulated_says_why() {
        let bad = |v: Variation| v.validate().unwrap_err();
        assert!(
            bad(Variation {
                reorder: 1.5,
                reorder_delay: MS,
                ..Default::default()
            })
            .contains("0 to 100")
        );
        assert!(
            bad(Variation {
                reorder: 0.1,
                ..Default::default()
            })
            .contains("reorder-delay")
        );
        assert!(
            bad(Variation {
                jitter: 11_000 * MS,
                ..Default::default()
            })
            .contains("outage")
        );
        assert!(
            Variation {
                jitter: 5 * MS,
                reorder: 0.02,
                reorder_delay: 10 * MS
            }
            .validate()
            .is_ok()
        );
        assert_eq!(
            Variation {
                jitter: 5 * MS,
                reorder: 0.02,
                reorder_delay: 10 * MS
            }
            .describe(),
            ", jitter 5ms, reorder 2% by 10ms"
        );
    }
}
