//! The crate's error type.
//!
//! Every message names what was received *and* what is accepted, because these errors end up
//! in front of a person typing CLI flags or reading a lab report, not in front of a debugger.

use crate::range::RangeError;

/// Errors produced by the sans-IO protocol pieces.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtoError {
    /// A textual option (protocol, TLS version, congestion controller, ...) is not one we know.
    #[error("unknown {kind} {value:?}: expected one of {expected}")]
    UnknownValue {
        /// What was being parsed, e.g. `"protocol"`.
        kind: &'static str,
        /// The rejected input, verbatim.
        value: String,
        /// The accepted spellings, comma separated.
        expected: &'static str,
    },

    /// The kernel refused a socket option (the OS error, rendered).
    #[error("{option} {value:?}: {error} (see net.ipv4.tcp_available_congestion_control)")]
    SocketOption {
        option: &'static str,
        value: String,
        error: String,
    },

    /// A numeric configuration value is out of its accepted range.
    #[error("invalid {what} {value}: expected {expected}")]
    InvalidConfig {
        /// The setting, e.g. `"gquic-cubic connections"`.
        what: &'static str,
        /// The rejected value, rendered.
        value: String,
        /// A description of the accepted values.
        expected: &'static str,
    },

    /// A `getsockopt(TCP_INFO)` buffer is shorter than the oldest layout we decode.
    #[error(
        "tcp_info buffer too short: got {len} bytes, expected at least {min} \
         (struct tcp_info up to tcpi_total_retrans)"
    )]
    TcpInfoTooShort {
        /// Bytes received.
        len: usize,
        /// Bytes required.
        min: usize,
    },

    /// The kernel's `NETLINK_SOCK_DIAG` answer is not laid out as `include/uapi/linux/inet_diag.h`
    /// says (truncated, a length that overruns its buffer, a netlink error): not a configuration
    /// problem, so not `InvalidConfig`.
    #[error(
        "malformed sock_diag answer: {detail} (expected netlink messages laid out as include/uapi/linux/inet_diag.h says)"
    )]
    SockDiag {
        /// What was wrong, with the offsets involved.
        detail: String,
    },

    /// An HTTP Range request that cannot be served.
    #[error(transparent)]
    Range(#[from] RangeError),
}
