//! CUBIC emulating N TCP connections, as Google's QUIC (gQUIC) did.
//!
//! Early gQUIC ran one CUBIC instance tuned to be as aggressive as N parallel TCP flows (N = 2
//! by default), so that a browser's single QUIC connection would compete with the several TCP
//! connections HTTP/1.1 opens. That choice explains part of the early "QUIC beats TCP" results
//! (Carlucci et al., "HTTP over UDP: an Experimental Investigation of QUIC", SAC 2015, §2.4),
//! so quiclab can reproduce it against quinn's RFC 9438 CUBIC. The arithmetic follows Chromium's
//! `cubic_bytes.cc`:
//!
//! - multiplicative decrease to `β_N · cwnd` with `β_N = (N − 1 + β) / N`, β = 0.7: only one of
//!   the N emulated flows halves-ish (×0.7), so the aggregate backs off by 0.3/N;
//! - Reno-friendly (TCP-friendly) estimate growing by `α_N = 3N²(1 − β_N)/(1 + β_N)` segments
//!   per RTT, the AIMD increase that matches N Reno flows at that decrease factor;
//! - cubic growth `W(t) = C (t − K)³ + W_max`, C = 0.4, `K = cbrt((W_max − cwnd_epoch)/C)`,
//!   which is `cbrt(W_max (1 − β_N) / C)` right after a loss, in packets of the current MTU;
//! - `cwnd = max(W_cubic, W_est)`, fast convergence as in RFC 8312 §4.6, initial window 10
//!   packets, minimum window 2 packets, minimum window after persistent congestion.
//!
//! Time only enters through the `Instant`s quinn passes in, so the tests drive it with virtual
//! time.

use std::any::Any;
use std::sync::Arc;
use std::time::{Duration, Instant};

use quinn_proto::RttEstimator;
use quinn_proto::congestion::{Controller, ControllerFactory, ControllerMetrics};
use serde::Serialize;

use quiclab_proto::ProtoError;

/// Per-flow CUBIC multiplicative decrease factor (RFC 8312 β_cubic).
pub const BETA: f64 = 0.7;
/// CUBIC scaling constant C (RFC 8312), in packets / s³.
pub const C: f64 = 0.4;
/// Emulated connections gQUIC used by default (the stack option's default, kept with the options).
pub use quiclab_proto::options::DEFAULT_GQUIC_CONNECTIONS as DEFAULT_CONNECTIONS;
/// Initial window (packets), as RFC 6928 and gQUIC.
pub const DEFAULT_INITIAL_WINDOW_PACKETS: u64 = 10;
/// Minimum congestion window (packets), as RFC 9002 §7.2 and gQUIC.
pub const MINIMUM_WINDOW_PACKETS: u64 = 2;

/// Configuration of [`GquicCubic`]; also the quinn [`ControllerFactory`] that builds it.
///
/// Install with `transport.congestion_controller_factory(Arc::new(config))`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct GquicCubicConfig {
    /// Number of TCP connections emulated (N ≥ 1). N = 1 is plain CUBIC with Reno-friendliness.
    /// A value of 0 written directly into the field is treated as 1 rather than dividing by 0;
    /// [`GquicCubicConfig::new`] rejects it.
    pub connections: u32,
    /// Initial congestion window, in packets of the MTU quinn reports when the connection
    /// starts. Values below the 2-packet minimum window written directly are raised to it.
    pub initial_window_packets: u64,
}

impl Default for GquicCubicConfig {
    fn default() -> Self {
        Self {
            connections: DEFAULT_CONNECTIONS,
            initial_window_packets: DEFAULT_INITIAL_WINDOW_PACKETS,
        }
    }
}

impl GquicCubicConfig {
    /// A validated configuration: `connections ≥ 1`, `initial_window_packets ≥ 2`.
    pub fn new(connections: u32, initial_window_packets: u64) -> Result<Self, ProtoError> {
        let config = Self {
            connections,
            initial_window_packets,
        };
        config.validate()?;
        Ok(config)
    }

    /// Checks a configuration built by hand (the fields are public).
    pub fn validate(&self) -> Result<(), ProtoError> {
        if self.connections == 0 {
            return Err(ProtoError::InvalidConfig {
                what: "gquic-cubic connections",
                value: self.connections.to_string(),
                expected: "an integer of at least 1 (the number of emulated TCP connections)",
            });
        }
        if self.initial_window_packets < MINIMUM_WINDOW_PACKETS {
            return Err(ProtoError::InvalidConfig {
                what: "gquic-cubic initial window",
                value: format!("{} packets", self.initial_window_packets),
                expected: "at least 2 packets (the minimum congestion window)",
            });
        }
        Ok(())
    }

    fn n(&self) -> f64 {
        f64::from(self.connections.max(1))
    }

    /// Multiplicative decrease factor β_N = (N − 1 + β) / N: the window after a loss is
    /// `beta() × window` (0.7 for N = 1, 0.85 for N = 2).
    pub fn beta(&self) -> f64 {
        let n = self.n();
        (n - 1.0 + BETA) / n
    }

    /// Reno-friendly additive increase α_N = 3 N² (1 − β_N) / (1 + β_N), in packets per RTT
    /// (≈ 0.529 for N = 1, ≈ 0.973 for N = 2).
    pub fn alpha(&self) -> f64 {
        let n = self.n();
        let beta = self.beta();
        3.0 * n * n * (1.0 - beta) / (1.0 + beta)
    }
}

impl ControllerFactory for GquicCubicConfig {
    fn build(self: Arc<Self>, now: Instant, current_mtu: u16) -> Box<dyn Controller> {
        Box::new(GquicCubic::new(*self, now, current_mtu))
    }
}

/// The controller quinn drives; see the [module documentation](self).
///
/// Windows are kept in bytes (as quinn does); the cubic state is kept in `f64` bytes so the
/// curve is evaluated exactly rather than through Chromium's fixed-point shifts.
#[derive(Debug, Clone)]
pub struct GquicCubic {
    config: GquicCubicConfig,
    /// Current path MTU (bytes): the "packet" unit of every window computation.
    mtu: u64,
    /// Initial window in bytes, fixed at construction so `initial_window()` is stable.
    initial_window: u64,
    /// Congestion window (bytes).
    window: u64,
    /// Slow-start threshold (bytes); `u64::MAX` until the first congestion event.
    ssthresh: u64,
    /// When the current recovery period started: packets sent before it neither grow the
    /// window when acked nor cause another decrease when lost (one reduction per loss episode).
    recovery_start: Option<Instant>,
    /// Start of the current congestion-avoidance epoch (first ack after a loss); `None` means
    /// the next congestion-avoidance ack starts a new one.
    epoch: Option<Instant>,
    /// Window before the last reduction (bytes), possibly lowered by fast convergence; 0 when
    /// there is no history.
    w_max: f64,
    /// Seconds from the epoch start until the curve reaches `origin`.
    k: f64,
    /// The cubic curve's plateau (bytes): `w_max`, or the epoch's starting window if larger.
    origin: f64,
    /// Reno-friendly window estimate (bytes).
    w_est: f64,
}

impl GquicCubic {
    /// A controller in slow start with the configured initial window.
    pub fn new(config: GquicCubicConfig, _now: Instant, current_mtu: u16) -> Self {
        let mtu = u64::from(current_mtu);
        let initial_window = config
            .initial_window_packets
            .max(MINIMUM_WINDOW_PACKETS)
            .saturating_mul(mtu);
        Self {
            config,
            mtu,
            initial_window,
            window: initial_window,
            ssthresh: u64::MAX,
            recovery_start: None,
            epoch: None,
            w_max: 0.0,
            k: 0.0,
            origin: 0.0,
            w_est: 0.0,
        }
    }

    /// The configuration this controller was built from.
    pub fn config(&self) -> &GquicCubicConfig {
        &self.config
    }

    /// Slow-start threshold in bytes (`u64::MAX` before the first congestion event).
    pub fn ssthresh(&self) -> u64 {
        self.ssthresh
    }

    /// [`Controller::on_ack`] with the RTT as a plain `Duration`.
    ///
    /// quinn's `RttEstimator` cannot be constructed outside quinn-proto, so the trait method
    /// forwards here with `rtt.min()`, and tests call this directly. `min_rtt` is the look-ahead
    /// Chromium adds to the epoch time: the window is set for where the curve will be one
    /// (minimum) round trip from now, when the data sent with it is acknowledged.
    pub fn on_ack_rtt(
        &mut self,
        now: Instant,
        sent: Instant,
        bytes: u64,
        app_limited: bool,
        min_rtt: Duration,
    ) {
        if self.in_recovery(sent) {
            return;
        }
        if app_limited {
            // As Chromium's OnApplicationLimited: the sender was not using its window, so the
            // time spent is no evidence the path has more room. Restarting the epoch keeps an
            // idle period from being credited as cubic growth time later.
            self.epoch = None;
            return;
        }
        if self.window < self.ssthresh {
            self.window = self.window.saturating_add(bytes);
            return;
        }
        self.congestion_avoidance(now, bytes, min_rtt);
    }

    fn mss(&self) -> f64 {
        // quinn never reports an MTU of 0; the guard keeps the divisions finite regardless.
        self.mtu.max(1) as f64
    }

    fn minimum_window(&self) -> u64 {
        MINIMUM_WINDOW_PACKETS.saturating_mul(self.mtu)
    }

    fn in_recovery(&self, sent: Instant) -> bool {
        self.recovery_start.is_some_and(|start| sent <= start)
    }

    /// The cubic curve in bytes, `t` seconds after the epoch start.
    fn w_cubic(&self, t: f64) -> f64 {
        (C * (t - self.k).powi(3))
            .mul_add(self.mss(), self.origin)
            .max(0.0)
    }

    fn congestion_avoidance(&mut self, now: Instant, bytes: u64, min_rtt: Duration) {
        let mss = self.mss();
        let window = self.window as f64;
        let acked = bytes as f64;

        let epoch = match self.epoch {
            Some(epoch) => epoch,
            None => {
                // First ack of a new epoch: anchor the curve at the current window. K is the
                // time needed to climb back from here to W_max (RFC 8312 Eq. 2, generalised to
                // cwnd_epoch as in RFC 9438 so fast convergence and app-limited restarts work).
                self.epoch = Some(now);
                self.w_est = window;
                if self.w_max <= window {
                    self.k = 0.0;
                    self.origin = window;
                } else {
                    self.k = ((self.w_max - window) / mss / C).cbrt();
                    self.origin = self.w_max;
                }
                now
            }
        };

        let t = now
            .saturating_duration_since(epoch)
            .saturating_add(min_rtt)
            .as_secs_f64();
        // Chromium limits the cubic increase to half the acked bytes (≤ 1.5× per RTT), so a
        // long quiet epoch cannot turn into a burst far beyond what the acks clocked out.
        let cubic_target = self.w_cubic(t).min(window + acked / 2.0);

        // Reno-friendly estimate: α_N packets per window's worth of acknowledged bytes, i.e.
        // α_N MSS per RTT while the sender is window-limited (RFC 8312 §4.2, Chromium).
        self.w_est += acked * self.config.alpha() * mss / self.w_est.max(mss);

        // f64::max ignores a NaN operand and `as u64` saturates, so no input can panic here.
        let target = cubic_target.max(self.w_est).max(window);
        self.window = target as u64;
    }
}

impl Controller for GquicCubic {
    fn on_ack(
        &mut self,
        now: Instant,
        sent: Instant,
        bytes: u64,
        app_limited: bool,
        rtt: &RttEstimator,
    ) {
        self.on_ack_rtt(now, sent, bytes, app_limited, rtt.min());
    }

    fn on_congestion_event(
        &mut self,
        now: Instant,
        sent: Instant,
        is_persistent_congestion: bool,
        _lost_bytes: u64,
    ) {
        if self.in_recovery(sent) {
            return;
        }
        self.recovery_start = Some(now);
        self.epoch = None;

        let window = self.window as f64;
        let beta = self.config.beta();
        // Fast convergence (RFC 8312 §4.6): a loss below the previous W_max means another flow
        // is taking bandwidth, so plateau lower to let it. With β_N this equals Chromium's
        // "BetaLastMax" factor (N − 1 + 0.85) / N.
        self.w_max = if window < self.w_max {
            window * (1.0 + beta) / 2.0
        } else {
            window
        };
        self.window = ((window * beta) as u64).max(self.minimum_window());
        self.ssthresh = self.window;

        if is_persistent_congestion {
            // RFC 9002 §7.6.2: collapse to the minimum window and slow-start back to ssthresh.
            // The cubic history describes a path that evidently no longer exists, so forget it
            // (Chromium's ResetCubicState on RTO).
            self.window = self.minimum_window();
            self.w_max = 0.0;
        }
    }

    fn on_mtu_update(&mut self, new_mtu: u16) {
        self.mtu = u64::from(new_mtu);
        self.window = self.window.max(self.minimum_window());
    }

    fn window(&self) -> u64 {
        self.window
    }

    fn metrics(&self) -> ControllerMetrics {
        // ControllerMetrics is #[non_exhaustive]: it can only be built from Default.
        let mut metrics = ControllerMetrics::default();
        metrics.congestion_window = self.window;
        metrics.ssthresh = Some(self.ssthresh);
        metrics
    }

    fn clone_box(&self) -> Box<dyn Controller> {
        Box::new(self.clone())
    }

    fn initial_window(&self) -> u64 {
        self.initial_window
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MTU: u16 = 1200;
    const MSS: u64 = MTU as u64;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn controller(n: u32) -> GquicCubic {
        let config = GquicCubicConfig::new(n, DEFAULT_INITIAL_WINDOW_PACKETS).unwrap();
        GquicCubic::new(config, Instant::now(), MTU)
    }

    /// A controller in congestion avoidance at `packets`, then a loss at `t0`.
    fn after_loss(n: u32, packets: u64, t0: Instant) -> GquicCubic {
        let mut cc = controller(n);
        cc.window = packets * MSS;
        cc.on_congestion_event(t0, t0, false, MSS);
        cc
    }

    /// Drives `rounds` window-limited round trips starting at `t0` (the loss time): each round
    /// sends a full window just after the previous acks and gets every packet acked one RTT
    /// later. Returns the time of the last acks and the window after each round.
    fn run_rounds(
        cc: &mut GquicCubic,
        t0: Instant,
        rtt: Duration,
        rounds: u32,
    ) -> (Instant, Vec<(Duration, u64)>) {
        let mut sent = t0 + Duration::from_micros(1);
        let mut trace = Vec::new();
        for _ in 0..rounds {
            let now = sent + rtt;
            for _ in 0..cc.window() / MSS {
                cc.on_ack_rtt(now, sent, MSS, false, rtt);
            }
            trace.push((now - t0, cc.window()));
            sent = now;
        }
        (sent, trace)
    }

    fn packets(bytes: u64) -> f64 {
        bytes as f64 / MSS as f64
    }

    #[test]
    fn beta_and_alpha_for_one_and_two_connections() {
        let one = GquicCubicConfig::new(1, 10).unwrap();
        assert!((one.beta() - 0.7).abs() < 1e-12);
        assert!((one.alpha() - 3.0 * 0.3 / 1.7).abs() < 1e-12);
        assert!((one.alpha() - 0.529).abs() < 1e-3);

        let two = GquicCubicConfig::default();
        assert_eq!(two.connections, 2);
        assert!((two.beta() - 0.85).abs() < 1e-12);
        assert!((two.alpha() - 12.0 * 0.15 / 1.85).abs() < 1e-12);
        assert!((two.alpha() - 0.973).abs() < 1e-3);
    }

    #[test]
    fn config_validation() {
        let err = GquicCubicConfig::new(0, 10).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid gquic-cubic connections 0: expected an integer of at least 1 \
             (the number of emulated TCP connections)"
        );
        let err = GquicCubicConfig::new(2, 1).unwrap_err();
        assert!(err.to_string().contains("at least 2 packets"), "{err}");
        assert!(GquicCubicConfig::new(1, 2).is_ok());
        assert_eq!(
            GquicCubicConfig::new(2, 10).unwrap(),
            GquicCubicConfig::default()
        );
    }

    #[test]
    fn zero_connections_set_directly_does_not_divide_by_zero() {
        let config = GquicCubicConfig {
            connections: 0,
            initial_window_packets: 0,
        };
        assert!(config.validate().is_err());
        assert_eq!(config.beta(), GquicCubicConfig::new(1, 10).unwrap().beta());
        assert!(config.alpha().is_finite());
        // An initial window below the minimum is raised to it.
        let cc = GquicCubic::new(config, Instant::now(), MTU);
        assert_eq!(cc.window(), 2 * MSS);
    }

    #[test]
    fn initial_window_is_ten_packets_of_the_mtu() {
        let now = Instant::now();
        let factory = Arc::new(GquicCubicConfig::default());
        let cc = factory.clone().build(now, MTU);
        assert_eq!(cc.window(), 10 * MSS);
        assert_eq!(cc.initial_window(), 10 * MSS);

        let cc = factory.build(now, 1350);
        assert_eq!(cc.window(), 13_500);

        let config = Arc::new(GquicCubicConfig::new(2, 32).unwrap());
        assert_eq!(config.build(now, MTU).initial_window(), 32 * MSS);
    }

    #[test]
    fn factory_builds_a_downcastable_controller() {
        let now = Instant::now();
        let cc = Arc::new(GquicCubicConfig::default()).build(now, MTU);
        let copy = cc.clone_box();
        assert_eq!(copy.window(), cc.window());
        assert_eq!(cc.metrics().congestion_window, 10 * MSS);
        assert_eq!(cc.metrics().ssthresh, Some(u64::MAX));
        let cc = cc.into_any().downcast::<GquicCubic>().unwrap();
        assert_eq!(cc.config().connections, 2);
    }

    #[test]
    fn slow_start_grows_by_acked_bytes() {
        let t0 = Instant::now();
        let mut cc = controller(2);
        cc.on_ack_rtt(t0 + ms(50), t0, MSS, false, ms(50));
        assert_eq!(cc.window(), 11 * MSS);
        // Application-limited acks do not grow the window.
        cc.on_ack_rtt(t0 + ms(51), t0, MSS, true, ms(50));
        assert_eq!(cc.window(), 11 * MSS);
    }

    #[test]
    fn window_after_loss_is_beta_times_window_before() {
        let t0 = Instant::now();
        for n in [1, 2, 3, 8] {
            let mut cc = controller(n);
            cc.window = 100 * MSS;
            cc.on_congestion_event(t0, t0, false, MSS);
            let expected = 100.0 * MSS as f64 * cc.config().beta();
            assert!(
                (cc.window() as f64 - expected).abs() <= 1.0,
                "N={n}: {} vs {expected}",
                cc.window()
            );
            assert_eq!(cc.ssthresh(), cc.window());
            assert_eq!(cc.metrics().ssthresh, Some(cc.window()));
        }
        let t0 = Instant::now();
        assert_eq!(packets(after_loss(2, 100, t0).window()).round(), 85.0);
        assert_eq!(packets(after_loss(1, 100, t0).window()).round(), 70.0);
    }

    #[test]
    fn two_connections_back_off_less_than_one() {
        let t0 = Instant::now();
        let one = after_loss(1, 200, t0);
        let two = after_loss(2, 200, t0);
        assert!(two.window() > one.window());
        // Decrease of 0.15 instead of 0.3: 30 packets instead of 60.
        assert_eq!(packets(200 * MSS - two.window()).round(), 30.0);
        assert_eq!(packets(200 * MSS - one.window()).round(), 60.0);
    }

    #[test]
    fn one_reduction_per_recovery_period() {
        let t0 = Instant::now();
        let mut cc = after_loss(2, 100, t0);
        let reduced = cc.window();
        // Another loss of a packet sent before the recovery started: no second decrease.
        cc.on_congestion_event(t0 + ms(5), t0, false, MSS);
        assert_eq!(cc.window(), reduced);
        // Acks of packets sent before the recovery started do not grow the window either.
        cc.on_ack_rtt(t0 + ms(6), t0, MSS, false, ms(50));
        assert_eq!(cc.window(), reduced);
        // A loss of a packet sent after it is a new congestion event.
        cc.on_congestion_event(t0 + ms(100), t0 + ms(1), false, MSS);
        assert!(cc.window() < reduced);
    }

    #[test]
    fn fast_convergence_lowers_w_max() {
        let t0 = Instant::now();
        let mut cc = after_loss(2, 100, t0);
        assert_eq!(cc.w_max, 100.0 * MSS as f64);
        // Second loss at 90 packets, below the previous W_max of 100.
        cc.window = 90 * MSS;
        cc.on_congestion_event(t0 + ms(200), t0 + ms(100), false, MSS);
        let beta = cc.config().beta();
        assert!((cc.w_max - 90.0 * MSS as f64 * (1.0 + beta) / 2.0).abs() < 1e-6);
        // The decrease still applies to the window, not to the lowered W_max.
        assert_eq!(packets(cc.window()).round(), (90.0 * beta).round());
        // A loss above W_max just records the new maximum.
        cc.window = 150 * MSS;
        cc.on_congestion_event(t0 + ms(400), t0 + ms(300), false, MSS);
        assert_eq!(cc.w_max, 150.0 * MSS as f64);
    }

    #[test]
    fn persistent_congestion_resets_to_minimum_window() {
        let t0 = Instant::now();
        let mut cc = controller(2);
        cc.window = 100 * MSS;
        cc.on_congestion_event(t0, t0, true, 50 * MSS);
        assert_eq!(cc.window(), 2 * MSS);
        // Slow start back towards β_N × the old window.
        assert_eq!(packets(cc.ssthresh()).round(), 85.0);
        cc.on_ack_rtt(t0 + ms(50), t0 + ms(1), MSS, false, ms(50));
        assert_eq!(cc.window(), 3 * MSS);
    }

    #[test]
    fn cubic_growth_returns_to_w_max_at_k() {
        // Large window and long RTT so the cubic term dominates the Reno-friendly one.
        let t0 = Instant::now();
        let rtt = ms(100);
        let mut cc = after_loss(2, 1000, t0);
        let beta = cc.config().beta();
        let w_max = 1000.0;
        let k = (w_max * (1.0 - beta) / C).cbrt();
        assert!((k - 7.2112).abs() < 1e-3);

        let (_, trace) = run_rounds(&mut cc, t0, rtt, 150);
        assert!((cc.k - k).abs() < 1e-9, "K at the epoch start");

        // run_rounds starts the epoch one RTT after the loss and the controller looks one RTT
        // ahead, so the window after the acks at time t (since the loss) tracks W(t).
        let w = |t: f64| C * (t - k).powi(3) + w_max;
        for &(at, window) in &trace {
            let t = at.as_secs_f64();
            if t < 1.0 || t > k + 1.0 {
                continue;
            }
            let model = w(t);
            assert!(
                (packets(window) - model).abs() / model < 0.01,
                "at {t:.1}s: window {:.1} packets, cubic model {model:.1}",
                packets(window)
            );
        }
        // Below W_max until K, at W_max around K, above it after.
        for &(at, window) in &trace {
            let t = at.as_secs_f64();
            let w = packets(window);
            if t < k - 0.2 {
                assert!(w < w_max, "at {t:.1}s already {w:.1} packets, K = {k:.2}s");
            } else if (t - k).abs() <= 0.1 {
                assert!((w - w_max).abs() < 1.0, "at {t:.2}s: {w:.1} packets");
            } else if t > k + 1.0 {
                assert!(w > w_max, "at {t:.1}s still {w:.1} packets");
            }
        }
        // The plateau: growth around K is far slower than early in the epoch.
        let growth = |from: f64, to: f64| {
            let at = |t: f64| {
                trace
                    .iter()
                    .find(|&&(a, _)| a.as_secs_f64() >= t)
                    .map(|&(_, w)| packets(w))
                    .unwrap()
            };
            at(to) - at(from)
        };
        assert!(growth(k - 0.5, k + 0.5) < growth(0.5, 1.5) / 5.0);
        // Past K the curve turns convex and probes beyond W_max (W(15 s) ≈ 1189 packets).
        let last = packets(trace.last().unwrap().1);
        assert!(last > w_max + 100.0, "{last:.1} packets at 15 s");
    }

    #[test]
    fn reno_friendly_region_dominates_after_loss_on_short_rtt() {
        let t0 = Instant::now();
        let rtt = ms(10);
        for n in [1, 2] {
            let mut cc = after_loss(n, 100, t0);
            let start = packets(cc.window());
            let alpha = cc.config().alpha();
            let rounds = 20;
            let (now, _) = run_rounds(&mut cc, t0, rtt, rounds);
            let window = packets(cc.window());

            // The cubic curve alone would barely have moved in 200 ms...
            let epoch = cc.epoch.unwrap();
            let t = (now - epoch + rtt).as_secs_f64();
            let cubic = cc.w_cubic(t) / MSS as f64;
            assert!(
                window > cubic + 5.0,
                "N={n}: {window:.1} vs cubic {cubic:.1}"
            );
            // ...while the window grew by about α_N packets per RTT.
            let reno = start + alpha * f64::from(rounds);
            assert!(
                (window - reno).abs() < 1.0,
                "N={n}: window {window:.2}, Reno-friendly estimate {reno:.2}"
            );
        }
    }

    #[test]
    fn more_connections_grow_faster_in_reno_friendly_region() {
        let t0 = Instant::now();
        let mut one = after_loss(1, 100, t0);
        let mut two = after_loss(2, 100, t0);
        let one_start = one.window();
        let two_start = two.window();
        run_rounds(&mut one, t0, ms(10), 20);
        run_rounds(&mut two, t0, ms(10), 20);
        assert!(two.window() - two_start > one.window() - one_start);
    }

    #[test]
    fn app_limited_restarts_the_epoch() {
        let t0 = Instant::now();
        let mut cc = after_loss(2, 100, t0);
        run_rounds(&mut cc, t0, ms(50), 2);
        assert!(cc.epoch.is_some());
        let before = cc.window();
        cc.on_ack_rtt(t0 + ms(500), t0 + ms(400), MSS, true, ms(50));
        assert_eq!(cc.window(), before);
        assert!(cc.epoch.is_none());
    }

    #[test]
    fn mtu_update_keeps_minimum_window() {
        let t0 = Instant::now();
        let mut cc = controller(2);
        cc.on_congestion_event(t0, t0, true, 0);
        assert_eq!(cc.window(), 2 * MSS);
        cc.on_mtu_update(1452);
        assert_eq!(cc.window(), 2 * 1452);
    }

    #[test]
    fn extreme_inputs_do_not_panic() {
        let t0 = Instant::now();
        let mut cc = after_loss(2, 100, t0);
        // Ten days without loss, an enormous RTT and ack: the window saturates sanely.
        let later = t0 + Duration::from_secs(10 * 24 * 3600);
        cc.on_ack_rtt(later, later, u64::MAX / 2, false, Duration::MAX);
        cc.on_ack_rtt(later, later, u64::MAX, false, Duration::ZERO);
        assert!(cc.window() >= 85 * MSS);
        // Time going backwards and an MTU of zero.
        cc.on_ack_rtt(t0, t0 + ms(1), MSS, false, ms(1));
        cc.on_mtu_update(0);
        cc.on_ack_rtt(later + ms(1), later, MSS, false, ms(1));
        cc.on_congestion_event(later + ms(2), later + ms(1), false, 0);
        cc.on_congestion_event(later + ms(4), later + ms(3), true, 0);
        cc.on_mtu_update(MTU);
        assert_eq!(cc.window(), 2 * MSS);
    }
}
