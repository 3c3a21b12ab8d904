//! Other implementations in the lab: Caddy, a current quic-go (`quiclab-quic-go`, built by
//! scripts/setup from tools/quic-go), ngtcp2's example server and client, curl, and AStream
//! (the seed's DASH player, [`astream`]) — each run as its own process in the lab's namespaces,
//! beside quiclab's own stacks (docs/stacks.md).
//!
//! This crate knows each program: where it is and which version it is ([`programs`]), what it
//! needs to serve quiclab's content ([`content`]), how it is started and when it is ready
//! ([`server`], [`listening`]), how a client is told what to fetch and how its answer is read
//! ([`client`], with [`qlog`] for the programs that tell their timings only there). It starts
//! nothing itself: the workloads start what it describes with the lab (`Lab::command`,
//! `Lab::spawn`), so every process is the lab's and ends with it.
//!
//! What a program cannot report is `None` with the reason ([`client::ExternalFetch::unmeasured`]),
//! never 0.

pub mod astream;
pub mod client;
pub mod content;
pub mod listening;
pub mod programs;
pub mod qlog;
pub mod server;

pub use programs::Program;
