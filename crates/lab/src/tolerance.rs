//! How far a measured link may stray from its configuration and still count as the configured
//! one: `quiclab calibrate`'s pass/fail and the runner's fidelity flags use these. Documented in
//! docs/link.md; change both together.

pub const RTT_MEDIAN_TOL_MS: f64 = 0.5;
pub const RTT_MEDIAN_TOL_FRAC: f64 = 0.01;
pub const RTT_P99_TOL_MS: f64 = 2.0;
pub const RTT_P99_TOL_FRAC: f64 = 0.02;
pub const RATE_TOL_FRAC: f64 = 0.02;
pub const LATENESS_P99_TOL_US: f64 = 250.0;
/// z for the two-sided 99 % binomial interval of the measured loss.
pub const LOSS_Z: f64 = 2.576;
