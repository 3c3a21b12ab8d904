//! The page loader over loopback (no lab, no root): corpus pages arrive complete over every
//! protocol with the connection pattern of a browser, HARs validate, failures name the object,
//! dependency chains are followed in order, and stream limits hold.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use quiclab_page::har::ObjectTiming;
use quiclab_proto::options::Protocol;
use quiclab_stacks::page_load::{PageLoadOptions, PageLoadReport, load_page};
use quiclab_stacks::server::{ServerOptions, spawn_server};
use quiclab_stacks::tls::LabCertificate;

const LOCAL: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// A fresh directory for one test (removed first, in case an earlier run left it).
fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("quiclab-page-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn start_server(port: u16, dir: &Path) -> LabCertificate {
    let cert = LabCertificate::generate(&[LOCAL]).unwrap();
    let mut opts = ServerOptions::new(cert.clone(), vec![LOCAL], port);
    opts.dir = Some(dir.to_path_buf());
    spawn_server(opts).expect("server");
    cert
}

fn options(cert: &LabCertificate, port: u16, protocol: Protocol, entry: &str) -> PageLoadOptions {
    let mut o = PageLoadOptions::new(cert.clone(), SocketAddr::new(LOCAL, port), protocol);
    o.timeout = Duration::from_secs(30);
    o.entry = entry.to_string();
    o
}

fn load(opts: &PageLoadOptions) -> anyhow::Result<PageLoadReport> {
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(load_page(opts))
}

fn by_path(r: &PageLoadReport) -> HashMap<&str, &ObjectTiming> {
    r.objects.iter().map(|o| (o.path.as_str(), o)).collect()
}

/// When the request left the loader: the end of blocked/connect/ssl.
fn request_start(o: &ObjectTiming) -> f64 {
    o.started_ms + o.blocked_ms + o.connect_ms + o.tls_ms
}

#[test]
fn corpus_pages_load_completely_over_every_protocol() {
    let dir = temp_dir("corpus");
    let pages = ["carlucci-small", "megyesi-5-small"];
    for name in pages {
        quiclab_page::lookup(name)
            .unwrap()
            .write_to(&dir.join(name))
            .unwrap();
    }
    let cert = start_server(14441, &dir);
    for name in pages {
        let spec = quiclab_page::lookup(name).unwrap();
        for (p, alpn) in [
            (Protocol::H1, "http/1.1"),
            (Protocol::H2, "h2"),
            (Protocol::H3, "h3"),
        ] {
            let entry = format!("/{name}/index.html");
            let r = load(&options(&cert, 14441, p, &entry))
                .unwrap_or_else(|e| panic!("{name} over {p}: {e:#}"));
            eprintln!(
                "{name} over {p}: PLT {:.1} ms, {} connection(s), {} bytes",
                r.plt_ms, r.connections, r.bytes
            );
            assert_eq!(r.objects.len(), spec.objects().len(), "{name} {p}");
            assert_eq!(r.objects[0].path, entry);
            let got = by_path(&r);
            for o in spec.objects() {
                let path = format!("/{name}{}", o.path);
                let t = got
                    .get(path.as_str())
                    .unwrap_or_else(|| panic!("{name} {p}: {path} not loaded"));
                assert_eq!(t.bytes, o.size, "{name} {p}: {path}");
                assert_eq!(t.status, 200);
                assert_eq!(t.mime, o.content_type, "{name} {p}: {path}");
                assert_eq!(t.protocol, alpn);
            }
            assert_eq!(r.bytes, spec.total_bytes());
            assert_eq!(r.negotiated_protocols, vec![alpn.to_string()]);
            match p {
                Protocol::H1 => {
                    assert!(r.connections <= 6, "{name}: {} connections", r.connections);
                    if name == "carlucci-small" {
                        assert!(r.connections > 1, "carlucci-small over h1: one connection");
                    }
                }
                _ => assert_eq!(r.connections, 1, "{name} over {p}"),
            }
            assert_eq!(r.connection_details.len(), r.connections);
            // A connection may be opened and not be needed after all, but every one that carried
            // a request completed its handshakes with the protocol asked for.
            for c in r.connection_details.iter().filter(|c| c.requests > 0) {
                assert!(c.ready_ms.is_some(), "{name} {p}: {c:?}");
                assert_eq!(c.protocol.as_deref(), Some(alpn));
            }
            // Every phase is non-negative and the page load time is the last object's end.
            for o in &r.objects {
                for v in [
                    o.blocked_ms,
                    o.connect_ms,
                    o.tls_ms,
                    o.send_ms,
                    o.wait_ms,
                    o.receive_ms,
                ] {
                    assert!(v >= 0.0, "{name} {p}: {o:?}");
                }
            }
            let last = r.objects.iter().map(|o| o.end_ms()).fold(0.0, f64::max);
            assert!((r.plt_ms - last).abs() < 1e-9);
            // The first request waited for its connection's handshakes.
            assert!(
                r.objects[0].connect_ms > 0.0,
                "{name} {p}: {:?}",
                r.objects[0]
            );
            let har = r.har(&format!("{name} over {p}")).to_json().unwrap();
            if let Err(errors) = quiclab_page::har::validate(&har) {
                panic!("{name} over {p}: invalid HAR: {errors:#?}");
            }
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_missing_object_fails_the_load_naming_it() {
    let dir = temp_dir("missing");
    std::fs::create_dir_all(dir.join("img")).unwrap();
    std::fs::write(
        dir.join("index.html"),
        "<!DOCTYPE html><html><body><img src=\"img/ok.png\"><img src=\"img/missing.png\"></body></html>",
    )
    .unwrap();
    std::fs::write(dir.join("img/ok.png"), vec![7u8; 1000]).unwrap();
    let cert = start_server(14442, &dir);
    for p in Protocol::ALL {
        let e = load(&options(&cert, 14442, p, "/index.html"))
            .expect_err("a page with a missing object loaded");
        let text = format!("{e:#}");
        eprintln!("{p}: {text}");
        assert!(text.contains("/img/missing.png"), "{p}: {text}");
        assert!(text.contains("404"), "{p}: {text}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_dependency_chain_is_loaded_in_order() {
    let dir = temp_dir("chain");
    std::fs::write(
        dir.join("index.html"),
        "<!DOCTYPE html><html><head><link rel=\"stylesheet\" href=\"style.css\"></head><body></body></html>",
    )
    .unwrap();
    std::fs::write(
        dir.join("style.css"),
        "body { background: url(\"img/bg.png\") no-repeat; }\n",
    )
    .unwrap();
    std::fs::create_dir_all(dir.join("img")).unwrap();
    std::fs::write(dir.join("img/bg.png"), vec![1u8; 50_000]).unwrap();
    let cert = start_server(14443, &dir);
    for p in Protocol::ALL {
        let r =
            load(&options(&cert, 14443, p, "/index.html")).unwrap_or_else(|e| panic!("{p}: {e:#}"));
        let paths: Vec<&str> = r.objects.iter().map(|o| o.path.as_str()).collect();
        assert_eq!(paths, ["/index.html", "/style.css", "/img/bg.png"], "{p}");
        let o = by_path(&r);
        let (html, css, img) = (o["/index.html"], o["/style.css"], o["/img/bg.png"]);
        assert!(
            css.started_ms >= html.end_ms(),
            "{p}: {css:?} before {html:?}"
        );
        assert!(
            img.started_ms >= css.end_ms(),
            "{p}: {img:?} before {css:?}"
        );
        assert!(request_start(img) >= css.end_ms(), "{p}");
        assert_eq!(img.bytes, 50_000);
        assert_eq!(css.mime, "text/css; charset=utf-8");
        assert_eq!(img.mime, "image/png");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn max_streams_bounds_the_requests_in_flight() {
    let dir = temp_dir("streams");
    quiclab_page::lookup("carlucci-small")
        .unwrap()
        .write_to(&dir)
        .unwrap();
    let cert = start_server(14444, &dir);
    for p in [Protocol::H2, Protocol::H3] {
        let mut o = options(&cert, 14444, p, "/index.html");
        o.max_streams = Some(2);
        let r = load(&o).unwrap_or_else(|e| panic!("{p}: {e:#}"));
        assert_eq!(r.objects.len(), 22);
        // Requests in flight over time: +1 at a request's start, -1 at its end (ends first on
        // ties: the next request is sent only after the previous one completed).
        let mut edges: Vec<(f64, i32)> = r
            .objects
            .iter()
            .flat_map(|o| [(request_start(o), 1), (o.end_ms(), -1)])
            .collect();
        edges.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let mut in_flight = 0;
        let mut most = 0;
        for (_, d) in edges {
            in_flight += d;
            most = most.max(in_flight);
        }
        assert!(most <= 2, "{p}: {most} requests in flight");
        assert_eq!(most, 2, "{p}: the limit was never reached");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_page_that_never_finishes_fails_within_the_timeout() {
    // A server that accepts TCP connections and never answers: the TLS handshake hangs.
    let listener = std::net::TcpListener::bind((LOCAL, 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in listener.incoming().flatten() {
            held.push(s);
        }
    });
    let cert = LabCertificate::generate(&[LOCAL]).unwrap();
    let mut o = options(&cert, port, Protocol::H1, "/index.html");
    o.timeout = Duration::from_millis(800);
    let t = Instant::now();
    let e = load(&o).expect_err("a hanging server");
    let elapsed = t.elapsed();
    let text = format!("{e:#}");
    assert!(text.contains("/index.html"), "{text}");
    assert!(text.contains("did not finish"), "{text}");
    // The error is due at the timeout, not after some clean-up (that would take seconds); the
    // margin is for a loaded CI host.
    assert!(elapsed < Duration::from_millis(2500), "took {elapsed:?}");
}

#[test]
fn large_pages_load_over_every_protocol() {
    // carlucci-large has 218 objects, more than quinn's default limit of 100 concurrent streams
    // (requests beyond it wait for stream credit); megyesi-50-large is 6.5 MB.
    let dir = temp_dir("large");
    let pages = ["carlucci-large", "megyesi-50-large"];
    for name in pages {
        quiclab_page::lookup(name)
            .unwrap()
            .write_to(&dir.join(name))
            .unwrap();
    }
    let cert = start_server(14445, &dir);
    for name in pages {
        let spec = quiclab_page::lookup(name).unwrap();
        for p in Protocol::ALL {
            let entry = format!("/{name}/index.html");
            let r = load(&options(&cert, 14445, p, &entry))
                .unwrap_or_else(|e| panic!("{name} over {p}: {e:#}"));
            eprintln!(
                "{name} over {p}: PLT {:.1} ms, {} connection(s), {} bytes",
                r.plt_ms, r.connections, r.bytes
            );
            assert_eq!(r.objects.len(), spec.objects().len(), "{name} {p}");
            assert_eq!(r.bytes, spec.total_bytes(), "{name} {p}");
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}
