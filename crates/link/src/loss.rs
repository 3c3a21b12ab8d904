//! Seeded random loss: Bernoulli and Gilbert–Elliott.
//!
//! The generator is ChaCha8 seeded from a `u64`, so a run is reproducible from its seed on
//! every platform and `rand` version that keeps ChaCha8's stream (unlike `SmallRng`, whose
//! algorithm may change between releases).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::units::LossSpec;

/// A random-loss process for one direction of a link.
#[derive(Debug, Clone)]
pub struct LossProcess {
    spec: LossSpec,
    in_bad_state: bool,
    rng: ChaCha8Rng,
}

impl LossProcess {
    /// A process following `spec`, deterministic for a given `seed`. A Gilbert–Elliott
    /// process starts in the Good state.
    pub fn new(spec: LossSpec, seed: u64) -> LossProcess {
        LossProcess {
            spec,
            in_bad_state: false,
            rng: ChaCha8Rng::seed_from_u64(seed),
        }
    }

    /// Decides whether the next packet is lost, according to the process's [`LossSpec`].
    ///
    /// Gilbert–Elliott: the packet is lost with the loss probability of the current state,
    /// then the chain makes one transition (Good→Bad with `p`, Bad→Good with `r`), as in
    /// Linux netem's per-packet evaluation. The first packet is therefore judged in Good.
    pub fn lose(&mut self) -> bool {
        match self.spec {
            LossSpec::None => false,
            LossSpec::Bernoulli(p) => self.draw(p),
            LossSpec::GilbertElliott {
                p,
                r,
                loss_good,
                loss_bad,
            } => {
                let lost = if self.in_bad_state {
                    self.draw(loss_bad)
                } else {
                    self.draw(loss_good)
                };
                let switch = if self.in_bad_state {
                    self.draw(r)
                } else {
                    self.draw(p)
                };
                if switch {
                    self.in_bad_state = !self.in_bad_state;
                }
                lost
            }
        }
    }

    /// Decides whether the next packet is lost with probability `p`, ignoring the spec;
    /// used for profiles, whose loss changes from step to step. Uses the same generator,
    /// so it is deterministic for the seed too.
    pub fn lose_with(&mut self, p: f64) -> bool {
        self.draw(p)
    }

    /// Whether a Gilbert–Elliott process is currently in its Bad state.
    pub fn in_bad_state(&self) -> bool {
        self.in_bad_state
    }

    /// One Bernoulli trial. Always consumes exactly one random number, so the n-th
    /// decision depends only on the seed and n, not on the probabilities used before.
    /// Out-of-range probabilities saturate instead of panicking (`random_bool` would
    /// panic); NaN counts as 0.
    fn draw(&mut self, p: f64) -> bool {
        let uniform: f64 = self.rng.random();
        // `uniform` is in [0, 1): p ≥ 1 always loses, p ≤ 0 (or NaN) never does.
        uniform < p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count_losses(process: &mut LossProcess, packets: usize) -> usize {
        (0..packets).filter(|_| process.lose()).count()
    }

    /// Half-width of the 99% normal-approximation interval of a binomial count.
    fn binomial_99_half_width(n: f64, p: f64) -> f64 {
        2.576 * (n * p * (1.0 - p)).sqrt()
    }

    #[test]
    fn no_loss_never_loses() {
        let mut process = LossProcess::new(LossSpec::None, 1);
        assert_eq!(count_losses(&mut process, 10_000), 0);
    }

    #[test]
    fn bernoulli_rate_is_within_the_99_percent_interval() {
        let n = 100_000usize;
        for (p, seed) in [(0.01, 7u64), (0.1, 42), (0.5, 3)] {
            let mut process = LossProcess::new(LossSpec::Bernoulli(p), seed);
            let lost = count_losses(&mut process, n) as f64;
            let expected = n as f64 * p;
            let half_width = binomial_99_half_width(n as f64, p);
            assert!(
                (lost - expected).abs() <= half_width,
                "p={p}: lost {lost}, expected {expected} ± {half_width}"
            );
        }
    }

    #[test]
    fn extreme_probabilities() {
        let mut always = LossProcess::new(LossSpec::Bernoulli(1.0), 5);
        assert_eq!(count_losses(&mut always, 1000), 1000);
        let mut process = LossProcess::new(LossSpec::None, 5);
        assert!((0..1000).all(|_| !process.lose_with(0.0)));
        assert!((0..1000).all(|_| process.lose_with(1.0)));
        assert!((0..1000).all(|_| process.lose_with(7.0)));
        assert!((0..1000).all(|_| !process.lose_with(-1.0)));
        assert!((0..1000).all(|_| !process.lose_with(f64::NAN)));
    }

    #[test]
    fn gilbert_elliott_mean_matches_the_stationary_loss() {
        let spec = LossSpec::GilbertElliott {
            p: 0.01,
            r: 0.3,
            loss_good: 0.0,
            loss_bad: 1.0,
        };
        let n = 1_000_000usize;
        let mut process = LossProcess::new(spec, 11);
        let measured = count_losses(&mut process, n) as f64 / n as f64;
        let expected = 0.01 / 0.31;
        assert!((spec.mean_loss() - expected).abs() < 1e-12);
        // Losses come in bursts (mean length 1/r), so the variance is larger than a
        // binomial's (about 1.3% relative standard deviation here); 5% tolerance is tight
        // enough to catch a wrong transition or state order.
        assert!(
            (measured - expected).abs() < 0.05 * expected,
            "measured {measured}, expected {expected}"
        );
    }

    #[test]
    fn gilbert_elliott_losses_are_bursty() {
        // With good = 0 and bad = 1 every loss run is one Bad sojourn: mean length 1/r.
        let spec = LossSpec::GilbertElliott {
            p: 0.01,
            r: 0.25,
            loss_good: 0.0,
            loss_bad: 1.0,
        };
        let mut process = LossProcess::new(spec, 99);
        let (mut runs, mut lost, mut previous) = (0usize, 0usize, false);
        for _ in 0..1_000_000 {
            let now_lost = process.lose();
            if now_lost {
                lost += 1;
                if !previous {
                    runs += 1;
                }
            }
            previous = now_lost;
        }
        let mean_run = lost as f64 / runs as f64;
        assert!((mean_run - 4.0).abs() < 0.3, "mean burst length {mean_run}");
    }

    #[test]
    fn gilbert_elliott_starts_in_good() {
        let spec = LossSpec::GilbertElliott {
            p: 1.0,
            r: 0.0,
            loss_good: 0.0,
            loss_bad: 1.0,
        };
        let mut process = LossProcess::new(spec, 0);
        assert!(!process.in_bad_state());
        assert!(!process.lose(), "the first packet is judged in Good");
        assert!(process.in_bad_state());
        assert!(process.lose());
    }

    #[test]
    fn same_seed_same_sequence_different_seed_different_sequence() {
        let sequence = |seed: u64| {
            let mut process = LossProcess::new(LossSpec::Bernoulli(0.3), seed);
            (0..1000).map(|_| process.lose()).collect::<Vec<bool>>()
        };
        assert_eq!(sequence(1234), sequence(1234));
        assert_ne!(sequence(1234), sequence(1235));
    }
}
