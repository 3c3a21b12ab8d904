//! Real protocol stacks for quiclab, run as processes inside a lab's namespaces:
//! HTTP/1.1 and HTTP/2 over TLS (rustls) over the kernel's TCP (hyper), and HTTP/3 over QUIC
//! (quinn + h3). The server (`quiclab serve`) serves a directory and synthetic `/bytes/<N>`
//! resources; the client (`quiclab fetch`) records per-connection and per-request timings; the
//! page loader (`page_load`) loads a web page as a browser would, driven by `quiclab-page`'s plan; the video client (`video`) drives `quiclab-video`'s player
//! with real segment downloads (`/video/<content>/<rep>/<n>`, with Range); `switching` downloads
//! across network switches (reconnect, 0-RTT reconnect, QUIC migration).
//! The sans-IO pieces (options, ranges, the gQUIC CUBIC controller, TCP_INFO decoding) live in
//! `quiclab-proto`.

pub mod client;
pub mod cwnd;
pub mod fec_socket;
pub mod flow;
pub mod gquic;
pub mod page_load;
pub mod qlog;
pub mod server;
pub mod stop;
pub mod switching;
pub mod tls;
pub mod video;

pub use quiclab_proto::options;
pub use quiclab_sockets::sockopt;
