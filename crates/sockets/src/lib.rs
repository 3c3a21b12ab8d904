//! The socket calls quiclab makes beyond std, with what they read decoded by `quiclab-proto`:
//!
//! - [`sockopt`]: `TCP_CONGESTION` and `TCP_INFO` on a socket quiclab holds;
//! - [`sock_diag`]: the netlink socket-diagnostics request and answer through which quiclab reads
//!   another program's TCP state (`tcp_info`, congestion control) without its descriptor.
//!
//! A shell crate of its own so that `quiclab-proto` (option enums, Range parsing, `tcp_info`
//! layouts) stays free of system calls.

pub mod sock_diag;
pub mod sockopt;
