//! The stacks over loopback (no lab, no root): every protocol downloads and verifies content, TLS
//! versions are negotiated as asked, and resumption / 0-RTT are really used on a second connection.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use quiclab_proto::options::{Protocol, StackOptions, TlsVersion};
use quiclab_stacks::client::{FetchOptions, fetch};
use quiclab_stacks::server::{ServerOptions, spawn_server};
use quiclab_stacks::tls::LabCertificate;

const LOCAL: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

fn start_server(port: u16) -> LabCertificate {
    let cert = LabCertificate::generate(&[LOCAL]).unwrap();
    spawn_server(ServerOptions::new(cert.clone(), vec![LOCAL], port)).expect("server");
    cert
}

fn options(cert: &LabCertificate, port: u16, protocol: Protocol) -> FetchOptions {
    FetchOptions {
        cert: cert.clone(),
        server: SocketAddr::new(LOCAL, port),
        protocol,
        paths: vec!["/bytes/300000".into(), "/bytes/1000".into()],
        stack: StackOptions::default(),
        resume: false,
        zero_rtt: false,
        verify: true,
        qlog_dir: None,
        timeout: Duration::from_secs(20),
    }
}

fn run(opts: &FetchOptions) -> quiclab_stacks::client::FetchReport {
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(fetch(opts))
        .unwrap_or_else(|e| panic!("{}: {e:#}", opts.protocol))
}

#[test]
fn every_protocol_downloads_verified_content() {
    let cert = start_server(14431);
    for (p, alpn) in [
        (Protocol::H1, "http/1.1"),
        (Protocol::H2, "h2"),
        (Protocol::H3, "h3"),
    ] {
        let r = run(&options(&cert, 14431, p));
        assert_eq!(r.connection.protocol, alpn);
        assert_eq!(r.requests.len(), 2);
        for q in &r.requests {
            assert_eq!(q.status, 200);
            assert_eq!(q.verified, Some(true), "{p}: {q:?}");
        }
        assert_eq!(r.bytes, 301_000);
    }
}

#[test]
fn tls_versions_are_negotiated_as_asked() {
    let cert = start_server(14432);
    for v in [TlsVersion::Tls12, TlsVersion::Tls13] {
        let mut o = options(&cert, 14432, Protocol::H2);
        o.stack.tls = Some(v);
        assert_eq!(run(&o).connection.tls_version, v.to_string());
    }
}

#[test]
fn tcp_resumption_is_used_on_the_second_connection() {
    let cert = start_server(14433);
    for p in [Protocol::H1, Protocol::H2] {
        for v in [TlsVersion::Tls12, TlsVersion::Tls13] {
            let mut o = options(&cert, 14433, p);
            o.resume = true;
            o.stack.tls = Some(v);
            let r = run(&o);
            assert!(r.connection.resumed, "{p} TLS {v}: not resumed");
            assert!(!r.connection.zero_rtt_accepted);
        }
    }
    // Without --resume the handshake is a full one.
    assert!(!run(&options(&cert, 14433, Protocol::H2)).connection.resumed);
}

#[test]
fn quic_resumption_and_zero_rtt_are_used_on_the_second_connection() {
    let cert = start_server(14434);
    let mut o = options(&cert, 14434, Protocol::H3);
    o.resume = true;
    let r = run(&o);
    assert!(
        r.connection.tickets_held > 0,
        "h3: the warm-up left no ticket"
    );
    assert!(r.connection.resumed, "h3: not resumed");
    let mut o = options(&cert, 14434, Protocol::H3);
    o.zero_rtt = true;
    let r = run(&o);
    assert!(r.connection.resumed, "h3 0-RTT: not resumed");
    assert!(r.connection.zero_rtt_accepted, "h3: 0-RTT not accepted");
    assert!(r.requests.iter().all(|q| q.verified == Some(true)));
}

/// A GET as urllib2 sends it (HTTP/1.1, `Connection: close`) over plain TCP; the status line,
/// the headers and the body.
fn plain_get(port: u16, path: &str) -> (String, String, Vec<u8>) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(SocketAddr::new(LOCAL, port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: lab\r\nConnection: close\r\nUser-Agent: Python-urllib/2.7\r\n\r\n"
    )
    .unwrap();
    let mut all = Vec::new();
    s.read_to_end(&mut all).unwrap();
    let split = all.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&all[..split]).to_string();
    let (status, headers) = head.split_once("\r\n").unwrap();
    (
        status.to_string(),
        headers.to_lowercase(),
        all[split + 4..].to_vec(),
    )
}

/// AStream (the seed's player) is served in plain HTTP/1.1 beside the TLS port: its MPD dialect,
/// init segments and media segments of the sizes quiclab's players fetch.
#[test]
fn astream_is_served_plain_http_with_its_mpd_and_segments() {
    let cert = LabCertificate::generate(&[LOCAL]).unwrap();
    let mut opts = ServerOptions::new(cert, vec![LOCAL], 14435);
    let content = quiclab_video::Content::builtin("bbb-2s")
        .unwrap()
        .truncated(10_000);
    opts.videos = std::sync::Arc::new(vec![content.clone()]);
    opts.plain_http_port = Some(14436);
    spawn_server(opts).expect("server");
    let (status, headers, body) = plain_get(14436, "/astream/bbb-2s.mpd");
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(
        headers.contains("content-type: application/dash+xml"),
        "{headers}"
    );
    let mpd = String::from_utf8(body).unwrap();
    assert_eq!(mpd, quiclab_video::astream::mpd(&content));
    let (status, _, body) = plain_get(14436, "/astream/bbb-2s/3936261/s1.m4s");
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert_eq!(body.len() as u64, content.size(19, 0).unwrap());
    let (_, _, body) = plain_get(14436, "/astream/bbb-2s/45226/init.mp4");
    assert_eq!(body.len() as u64, quiclab_video::astream::INIT_BYTES);
    let (status, _, _) = plain_get(14436, "/astream/bbb-2s/45226/s99.m4s");
    assert_eq!(status, "HTTP/1.1 404 Not Found");
}
