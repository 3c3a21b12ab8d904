//! Sans-IO protocol pieces for quiclab.
//!
//! quiclab measures HTTP/1.1, HTTP/2 and HTTP/3 across an emulated link. The code that touches
//! sockets, threads and async runtimes lives in `crates/stacks` (the *I/O shells*); everything
//! that can be expressed as a pure function of its inputs lives here, so it can be unit-tested
//! deterministically, with virtual time and hand-built byte buffers, without namespaces, root
//! privileges or a network:
//!
//! - [`tcp_info`]: decoding the bytes the kernel returns for `getsockopt(TCP_INFO)`. The shell
//!   does the syscall; the layout knowledge (and its version differences) is here.
//! - [`range`]: HTTP Range (RFC 9110 §14) parsing for the `/bytes/<N>` test resources, shared by
//!   the HTTP/1.1, HTTP/2 and HTTP/3 servers so they answer identically.
//! - [`options`]: the option enums (protocol, TLS version, congestion controllers) shared by
//!   the server, the client and the CLI, with one spelling for parsing, display and JSON.
//!
//! The congestion controllers for quinn are `quiclab-cc` (they need quinn-proto); the socket calls
//! that read `tcp_info` are `quiclab-sockets`. This crate has no system calls and no QUIC stack, so
//! the data crates above it (`quiclab-model`) stay pure.
//!
//! Nothing in this crate panics on bad input: malformed input is either an error whose message
//! names what is accepted, or (where the relevant RFC says to) silently ignored.

pub mod error;
pub mod mix;
pub mod options;
pub mod range;
pub mod tcp_info;

pub use error::ProtoError;
pub use options::{Protocol, QuicCongestion, TcpCongestion, TlsVersion};
pub use range::{RangeError, content_range, parse_bytes_path, parse_range};
pub use tcp_info::{TCP_INFO_MAX_LEN, TcpInfo};

/// The name every lab server answers to and its certificate carries: every client asks for it
/// (as SNI and authority) and connects to the server's address.
pub const SERVER_NAME: &str = "quiclab.test";
