//! FEC parity inside the congestion window, as gQUIC counted it (issue 59, `fec_in_cwnd`).
//!
//! quiclab's FEC (quiclab-fec, at the socket under quinn) adds one parity datagram per group
//! of N data datagrams *outside* quinn: the congestion controller never sees the parity, so a
//! connection with FEC sends its whole window of data plus up to 1/N more. gQUIC's FEC packets
//! were ordinary packets of the connection, counted in bytes in flight: data and parity shared
//! one window. This wrapper recreates that sharing: the window any controller grants is split
//! so data gets N/(N+1) of it, the parity's share of a full group's bytes.
//!
//! A model of the sharing, not of gQUIC's accounting: a group flushed before it is full sends a
//! larger parity share than 1/(N+1), and a lost parity datagram is not a congestion signal here
//! (the controller never sent it), where gQUIC's FEC packet loss was.

use std::any::Any;
use std::sync::Arc;
use std::time::Instant;

use quinn_proto::RttEstimator;
use quinn_proto::congestion::{Controller, ControllerFactory, ControllerMetrics};

/// Builds controllers of `inner` whose window is shared with FEC parity of groups of `group`.
pub struct ParityShareConfig {
    pub inner: Arc<dyn ControllerFactory + Send + Sync>,
    pub group: u8,
}

impl ControllerFactory for ParityShareConfig {
    fn build(self: Arc<Self>, now: Instant, current_mtu: u16) -> Box<dyn Controller> {
        Box::new(ParityShare {
            inner: self.inner.clone().build(now, current_mtu),
            group: self.group.max(1),
        })
    }
}

/// A controller whose window data shares with parity (see the module's docs).
pub struct ParityShare {
    inner: Box<dyn Controller>,
    group: u8,
}

impl ParityShare {
    /// The data's part of a window of `bytes`: N/(N+1) of it.
    pub fn data_share(bytes: u64, group: u8) -> u64 {
        let n = u64::from(group.max(1));
        bytes / (n + 1) * n + bytes % (n + 1) * n / (n + 1)
    }
}

impl Controller for ParityShare {
    fn on_sent(&mut self, now: Instant, bytes: u64, last_packet_number: u64) {
        self.inner.on_sent(now, bytes, last_packet_number);
    }

    fn on_ack(
        &mut self,
        now: Instant,
        sent: Instant,
        bytes: u64,
        app_limited: bool,
        rtt: &RttEstimator,
    ) {
        self.inner.on_ack(now, sent, bytes, app_limited, rtt);
    }

    fn on_end_acks(
        &mut self,
        now: Instant,
        in_flight: u64,
        app_limited: bool,
        largest_packet_num_acked: Option<u64>,
    ) {
        self.inner
            .on_end_acks(now, in_flight, app_limited, largest_packet_num_acked);
    }

    fn on_congestion_event(
        &mut self,
        now: Instant,
        sent: Instant,
        is_persistent_congestion: bool,
        lost_bytes: u64,
    ) {
        self.inner
            .on_congestion_event(now, sent, is_persistent_congestion, lost_bytes);
    }

    fn on_mtu_update(&mut self, new_mtu: u16) {
        self.inner.on_mtu_update(new_mtu);
    }

    fn window(&self) -> u64 {
        Self::data_share(self.inner.window(), self.group)
    }

    fn metrics(&self) -> ControllerMetrics {
        // The controller's own window (data and parity), as gQUIC's cwnd was.
        self.inner.metrics()
    }

    fn clone_box(&self) -> Box<dyn Controller> {
        Box::new(ParityShare {
            inner: self.inner.clone_box(),
            group: self.group,
        })
    }

    fn initial_window(&self) -> u64 {
        Self::data_share(self.inner.initial_window(), self.group)
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_gets_n_of_n_plus_one_parts_of_the_window() {
        assert_eq!(ParityShare::data_share(30_000, 2), 20_000);
        assert_eq!(ParityShare::data_share(40_000, 3), 30_000);
        assert_eq!(ParityShare::data_share(14_520, 10), 13_200);
        // No overflow at the largest window, and never more than the window.
        let big = ParityShare::data_share(u64::MAX, 2);
        assert!(big <= u64::MAX / 3 * 2 + 1, "{big}");
    }

    #[test]
    fn the_wrapped_controller_grants_the_data_share_and_keeps_its_own_state() {
        let mut cubic = quinn_proto::congestion::CubicConfig::default();
        cubic.initial_window(14_520);
        let config = Arc::new(ParityShareConfig {
            inner: Arc::new(cubic),
            group: 2,
        });
        let now = Instant::now();
        let mut cc = config.build(now, 1_452);
        assert_eq!(cc.initial_window(), 9_680);
        assert_eq!(cc.window(), 9_680);
        assert_eq!(cc.metrics().congestion_window, 14_520);
        // A loss halves (CUBIC: 0.7×) the controller's window; data keeps two thirds of it.
        cc.on_congestion_event(now, now, false, 1_452);
        let own = cc.metrics().congestion_window;
        assert!(own < 14_520, "{own}");
        assert_eq!(cc.window(), ParityShare::data_share(own, 2));
    }
}
