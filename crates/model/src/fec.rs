//! FEC's figures in a workload's result (issue 13): the `fec` object of `--json` and its metrics,
//! shared by every workload that can run h3 over quiclab's XOR FEC (`quiclab_stacks::fec_socket`).
//!
//! The data direction is the downlink: the server sends, the client receives and rebuilds. Parity
//! datagrams are outside quinn's congestion window unless `fec_in_cwnd` (docs/fec.md), which
//! `note` says in every result that has FEC.

use crate::metric::{Metric, MetricDef};
use crate::records::FecCounters;
use serde::{Deserialize, Serialize};

/// Said in every result with FEC: the difference from gQUIC that every such figure carries.
pub const PARITY_NOTE: &str = "parity datagrams are sent outside quinn's congestion window \
                               (gQUIC counted them in it); rebuilt datagrams hide their loss from \
                               the controller, as in gQUIC";
/// Said instead with `fec_in_cwnd`.
pub const PARITY_IN_CWND_NOTE: &str = "parity shares quinn's congestion window with data \
                                       (fec_in_cwnd: data gets N/(N+1) of it, as gQUIC counted \
                                       its FEC packets); a lost parity is no congestion signal; \
                                       rebuilt datagrams hide their loss from the controller, as \
                                       in gQUIC";

/// FEC's figures of a run or of one connection: the downlink's, and each end's whole counters.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FecResult {
    /// Data datagrams per group (N).
    pub group: u64,
    /// Downlink data and parity datagrams the server sent (null: its counters are missing).
    pub data_sent: Option<u64>,
    pub parity_sent: Option<u64>,
    /// Downlink datagrams the client rebuilt from a parity (null: its counters are missing).
    pub rebuilt: Option<u64>,
    /// Downlink groups that lost two or more of their datagrams (nothing rebuilt).
    pub unrecoverable_groups: Option<u64>,
    /// Parity datagrams over all datagrams the server sent: the share of the channel FEC takes
    /// (1/(N+1) with full groups).
    pub parity_share: Option<f64>,
    /// The server's counters as last written (≤ 100 ms before it stopped), both directions.
    pub server: Option<FecCounters>,
    pub client: Option<FecCounters>,
    /// Counters that could not be read (unknown is not zero: their figures above are null).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
    /// The parity shared the congestion window (`fec_in_cwnd`).
    #[serde(default)]
    pub in_cwnd: bool,
    pub note: String,
}

impl FecResult {
    pub fn of(
        in_cwnd: bool,
        server: Option<FecCounters>,
        client: Option<FecCounters>,
    ) -> FecResult {
        let group = server.or(client).map_or(0, |c| c.group);
        let (data_sent, parity_sent) = (
            server.map(|s| s.sent.data_sent),
            server.map(|s| s.sent.parity_sent),
        );
        let mut missing = Vec::new();
        if server.is_none() {
            missing.push("the server's FEC counters (its fec.json had no figures for this)".into());
        }
        if client.is_none() {
            missing.push("the client's FEC counters".into());
        }
        FecResult {
            group,
            data_sent,
            parity_sent,
            rebuilt: client.map(|c| c.received.rebuilt),
            unrecoverable_groups: client.map(|c| c.received.unrecoverable_groups),
            parity_share: server
                .map(|s| (s.sent.data_sent, s.sent.parity_sent))
                .filter(|(d, p)| d + p > 0)
                .map(|(d, p)| p as f64 / (d + p) as f64),
            server,
            client,
            missing,
            in_cwnd,
            note: if in_cwnd {
                PARITY_IN_CWND_NOTE
            } else {
                PARITY_NOTE
            }
            .to_string(),
        }
    }

    /// Several connections' figures as one (a run's sum over its flows or players).
    pub fn sum<'a>(parts: impl IntoIterator<Item = &'a FecResult>) -> Option<FecResult> {
        // A sum over parts of which one lacks its counters is unknown, not a smaller number.
        let mut server = Some(FecCounters::default());
        let mut client = Some(FecCounters::default());
        let mut any = false;
        let mut in_cwnd = false;
        for p in parts {
            any = true;
            in_cwnd |= p.in_cwnd;
            match (&mut server, &p.server) {
                (Some(sum), Some(s)) => sum.add(s),
                _ => server = None,
            }
            match (&mut client, &p.client) {
                (Some(sum), Some(c)) => sum.add(c),
                _ => client = None,
            }
        }
        any.then(|| FecResult::of(in_cwnd, server, client))
    }
}

/// A result that may have run FEC (every workload's can).
pub trait WithFec {
    fn fec(&self) -> Option<&FecResult>;
}

macro_rules! with_fec {
    ($($t:ty),*) => {$(
        impl WithFec for $t {
            fn fec(&self) -> Option<&FecResult> {
                self.fec.as_ref()
            }
        }
    )*};
}
with_fec!(
    crate::bulk::BulkResult,
    crate::page::PageResult,
    crate::flows::FlowsResult,
    crate::video::VideoResult
);

/// The metric rows every workload declares for FEC (None without FEC).
pub const fn metrics<R: WithFec>() -> [Metric<R>; 3] {
    [
        Metric::of(
            MetricDef::lower("fec_parity_share", "FEC parity share of datagrams sent", ""),
            |r| r.fec().and_then(|f| f.parity_share),
        ),
        Metric::of(
            MetricDef::higher("fec_rebuilt", "Datagrams rebuilt by FEC", ""),
            |r| r.fec().and_then(|f| f.rebuilt).map(|v| v as f64),
        ),
        Metric::of(
            MetricDef::lower("fec_unrecoverable_groups", "FEC groups beyond repair", ""),
            |r| {
                r.fec()
                    .and_then(|f| f.unrecoverable_groups)
                    .map(|v| v as f64)
            },
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counters(data: u64, parity: u64, rebuilt: u64) -> FecCounters {
        let mut c = FecCounters {
            group: 2,
            ..Default::default()
        };
        c.sent.data_sent = data;
        c.sent.parity_sent = parity;
        c.received.rebuilt = rebuilt;
        c
    }

    #[test]
    fn the_downlink_is_the_servers_sending_and_the_clients_rebuilding() {
        let r = FecResult::of(false, Some(counters(200, 100, 7)), Some(counters(10, 5, 3)));
        assert_eq!(
            (r.data_sent, r.parity_sent, r.rebuilt),
            (Some(200), Some(100), Some(3))
        );
        assert!((r.parity_share.unwrap() - 1.0 / 3.0).abs() < 1e-12);
        assert!(r.missing.is_empty());
        // Missing counters are unknown, never zero, and the result says which.
        let none = FecResult::of(false, None, None);
        assert_eq!(none.parity_share, None);
        assert_eq!((none.data_sent, none.rebuilt), (None, None));
        assert_eq!(none.missing.len(), 2);
        struct Run(Option<FecResult>);
        impl WithFec for Run {
            fn fec(&self) -> Option<&FecResult> {
                self.0.as_ref()
            }
        }
        let run = Run(Some(none));
        assert!(metrics::<Run>().iter().all(|m| (m.value)(&run).is_none()));
    }

    #[test]
    fn sums_add_every_connection() {
        let a = FecResult::of(false, Some(counters(200, 100, 0)), Some(counters(1, 0, 3)));
        let b = FecResult::of(false, Some(counters(100, 50, 0)), Some(counters(1, 0, 4)));
        let s = FecResult::sum([&a, &b]).unwrap();
        assert_eq!(
            (s.group, s.data_sent, s.parity_sent, s.rebuilt),
            (2, Some(300), Some(150), Some(7))
        );
        assert!(FecResult::sum([]).is_none());
        let c = FecResult::of(false, None, Some(counters(1, 0, 1)));
        let s = FecResult::sum([&a, &c]).unwrap();
        assert_eq!((s.data_sent, s.rebuilt), (None, Some(4)));
    }
}
