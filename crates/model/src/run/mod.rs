//! A run as data: what each kind's run is, built once from the typed parameters, sent to the
//! child processes as it is and read by the stacks (no copy structs on the way), and its result
//! assembled by a pure function of what the children report.
//!
//! - [`build`]: the one pure build of a run from the parameters ([`build::Run`]);
//! - [`bulk`], [`page`], [`flows`], [`video`]: each kind's run; flows and video with their
//!   result assembly. A flows run goes to its child process as it is; the others' children still
//!   take configurations of their own (the next step of the same design).

pub mod build;
pub mod bulk;
pub mod flows;
pub mod page;
pub mod video;

use std::time::Duration;

use quiclab_link::spec::LinkSpec;

/// Declares a struct of settings each taken as given from one key, and `take(params)` that
/// builds it: one line per key — its field, its type and how it is read from the parameters.
/// Where the settings are used, they are taken whole (no `..`), so a new line is a compile
/// error there until its behaviour is written.
macro_rules! taken_from_params {
    ($(#[$meta:meta])* pub struct $name:ident {
        $($(#[$fmeta:meta])* pub $field:ident: $ty:ty = |$p:ident| $take:expr,)*
    }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
        pub struct $name {
            $($(#[$fmeta])* pub $field: $ty,)*
        }

        impl $name {
            /// Every field from its key in `params`.
            pub fn take(params: &$crate::params::Params) -> $name {
                $name {
                    $($field: {
                        let $p = params;
                        $take
                    },)*
                }
            }
        }
    };
}
pub(crate) use taken_from_params;

/// The time limit of a transfer when none is given: 30 s for set-up and handshakes plus four times
/// its [`transfer_estimate_seconds`] (the link rate, or the loss-limited rate when that is lower:
/// a single connection at 2 % loss and 200 ms moves far less than the link's rate; slow start,
/// retransmission timeouts and head-of-line blocking need the headroom).
pub fn default_timeout(size: u64, spec: &LinkSpec) -> Duration {
    Duration::from_secs(30)
        + Duration::from_secs_f64(4.0 * transfer_estimate_seconds(size as f64, spec))
}

/// A rough duration of moving `bytes` across `spec` (lab set-up and process start-up, handshakes,
/// and the transfer at the smaller of the link rate and the Mathis et al. loss-limited rate
/// MSS/RTT · 1.22/√p). An estimate, and every place that shows it says so.
pub fn transfer_estimate_seconds(bytes: f64, spec: &LinkSpec) -> f64 {
    // Lab set-up and teardown, server start-up and process spawns (measured: ≈ 0.15–0.2 s).
    const OVERHEAD_S: f64 = 0.2;
    let rtt = (spec.base_rtt() as f64 / 1e9).max(1e-4);
    let rate = spec.downlink.mean_rate_bps().unwrap_or(2e9);
    let loss = match spec.downlink.loss {
        quiclab_link::LossSpec::Bernoulli(p) => p,
        _ => 0.0,
    };
    let mathis = if loss > 0.0 {
        1448.0 * 8.0 / rtt * 1.22 / loss.sqrt()
    } else {
        f64::INFINITY
    };
    OVERHEAD_S + 4.0 * rtt + bytes * 8.0 / rate.min(mathis) * 1.1
}

/// A client's answer to network switches (see `quiclab_stacks::switching`).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SwitchBehaviour {
    pub on_switch: crate::records::OnSwitch,
    /// No byte for this long: the connection is taken as lost (the seed's player: 5 s).
    pub stall_timeout: Duration,
    /// `migrate`: how long after the switch the client rebinds to its new address.
    pub migrate_delay: Duration,
    /// TCP video players: a segment not finished this long after its request is given up even
    /// while bytes flow (AStream's curl `CURLOPT_TIMEOUT`; None: only the stall timeout).
    #[serde(default)]
    pub transfer_timeout: Option<Duration>,
}

impl Default for SwitchBehaviour {
    fn default() -> Self {
        SwitchBehaviour {
            on_switch: crate::records::OnSwitch::Reconnect,
            stall_timeout: Duration::from_secs(5),
            migrate_delay: Duration::ZERO,
            transfer_timeout: None,
        }
    }
}
