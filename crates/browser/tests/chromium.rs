//! Chromium loads a small page (index.html + 3 images) from quiclab's own server on loopback over
//! h1, h2 and h3, and reports the protocol it was asked to use. Skipped (with the reason printed)
//! when Chromium is not installed.

use std::net::{IpAddr, Ipv4Addr, TcpListener, UdpSocket};
use std::path::Path;
use std::time::Duration;

use quiclab_browser::{
    BrowserOptions, DEFAULT_CHROMIUM, Protocol, check_chromium, load, load_with, prefixed,
};
use quiclab_stacks::server::{ServerOptions, spawn_server};
use quiclab_stacks::tls::LabCertificate;

const LOCAL: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
const IMAGES: [&str; 3] = ["a.png", "b.png", "c.png"];

/// A port free on both TCP and UDP loopback.
fn free_port() -> u16 {
    for _ in 0..50 {
        let tcp = TcpListener::bind((LOCAL, 0)).expect("binding a TCP port");
        let port = tcp.local_addr().expect("local address").port();
        if UdpSocket::bind((LOCAL, port)).is_ok() {
            return port;
        }
    }
    panic!("no port free on both TCP and UDP");
}

/// A 1×1 PNG padded to `size` bytes with a trailing chunk the decoder ignores.
fn png(size: usize) -> Vec<u8> {
    const PIXEL: &[u8] = &[
        0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44,
        0x52, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f,
        0x15, 0xc4, 0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8,
        0xcf, 0xc0, 0xf0, 0x1f, 0x00, 0x05, 0x00, 0x01, 0xff, 0x89, 0x99, 0x3d, 0x1d, 0x00, 0x00,
        0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
    ];
    let mut v = PIXEL.to_vec();
    v.resize(size.max(PIXEL.len()), 0);
    v
}

fn write_site(dir: &Path) {
    let imgs: String = IMAGES
        .iter()
        .map(|i| format!("<img src=\"/{i}\" width=\"1\" height=\"1\">\n"))
        .collect();
    let html = format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>quiclab</title></head>\n\
         <body><p>quiclab browser test</p>\n{imgs}</body></html>\n"
    );
    std::fs::write(dir.join("index.html"), html).expect("writing index.html");
    for (n, i) in IMAGES.iter().enumerate() {
        std::fs::write(dir.join(i), png(20_000 * (n + 1))).expect("writing an image");
    }
}

fn start_server(dir: &Path, port: u16) -> LabCertificate {
    let cert = LabCertificate::generate(&[LOCAL]).expect("certificate");
    let mut opts = ServerOptions::new(cert.clone(), vec![LOCAL], port);
    opts.dir = Some(dir.to_path_buf());
    spawn_server(opts).expect("server");
    cert
}

#[test]
fn chromium_loads_a_page_over_h1_h2_h3() {
    if let Err(e) = check_chromium(Path::new(DEFAULT_CHROMIUM)) {
        quiclab_testkit::skip("chromium_loads_a_page_over_h1_h2_h3", &format!("{e:#}"));
        return;
    }
    let site = std::env::temp_dir().join(format!("quiclab-browser-site-{}", std::process::id()));
    std::fs::create_dir_all(&site).expect("site dir");
    write_site(&site);
    let port = free_port();
    let cert = start_server(&site, port);
    let origin = format!("https://127.0.0.1:{port}");
    let url = format!("{origin}/index.html");
    let mut failures = Vec::new();
    for p in [Protocol::H1, Protocol::H2, Protocol::H3] {
        let mut opts = BrowserOptions::new(p, &origin, &cert.spki_sha256_base64);
        opts.timeout = Duration::from_secs(60);
        let l = match load(&opts, &url) {
            Ok(l) => l,
            Err(e) => {
                failures.push(format!("{p}: {e:#}"));
                continue;
            }
        };
        eprintln!(
            "{p}: {} PLT {:.1} ms DCL {:.1} ms, protocols {:?}, {} resources, wall {:.0} ms",
            l.browser_version,
            l.plt_ms,
            l.dom_content_loaded_ms,
            l.protocols,
            l.resources.len(),
            l.wall_ms
        );
        for r in &l.resources {
            eprintln!(
                "    {} {} start {:.1} connect {:.1}-{:.1} tls {:.1} req {:.1} resp {:.1}-{:.1} transfer {} body {}",
                r.name,
                r.next_hop_protocol,
                r.start_time,
                r.connect_start,
                r.connect_end,
                r.secure_connection_start,
                r.request_start,
                r.response_start,
                r.response_end,
                r.transfer_size,
                r.encoded_body_size
            );
        }
        assert_eq!(
            l.navigation.timing.next_hop_protocol,
            quiclab_browser::next_hop_protocol(p),
            "{p}: navigation"
        );
        if let Err(e) = l.check_protocol(p) {
            failures.push(format!("{p}: {e:#}"));
        }
        assert!(l.plt_ms > 0.0, "{p}: PLT {}", l.plt_ms);
        assert!(l.dom_content_loaded_ms > 0.0, "{p}");
        assert!(l.dom_content_loaded_ms <= l.plt_ms, "{p}");
        for i in IMAGES {
            let want = format!("{origin}/{i}");
            let r = l
                .resources
                .iter()
                .find(|r| r.name == want)
                .unwrap_or_else(|| panic!("{p}: {want} not among {:?}", l.resources));
            assert!(r.response_end > 0.0, "{p}: {r:?}");
            assert!(r.response_end >= r.response_start, "{p}: {r:?}");
            assert!(r.encoded_body_size > 0.0, "{p}: {r:?}");
        }
    }

    // Through a launcher prefix (what `ip netns exec NS` is to the lab): the DevTools pipe on fds
    // 3 and 4 survives an exec wrapper.
    let opts = BrowserOptions::new(Protocol::H2, &origin, &cert.spki_sha256_base64);
    match load_with(&opts, &url, prefixed(vec!["env".into()])) {
        Ok(l) => assert_eq!(l.protocols, ["h2"]),
        Err(e) => failures.push(format!("h2 behind `env`: {e:#}")),
    }

    // A certificate Chromium was not told to accept: a clear error, nothing left behind.
    let opts = BrowserOptions::new(
        Protocol::H2,
        &origin,
        "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
    );
    match load(&opts, &url) {
        Ok(l) => failures.push(format!("wrong SPKI hash accepted: {l:?}")),
        Err(e) => {
            let e = format!("{e:#}");
            eprintln!("wrong SPKI: {}", e.lines().next().unwrap_or(""));
            assert!(e.contains("ERR_CERT"), "{e}");
        }
    }

    // A server that accepts TCP but never answers the TLS handshake: the load times out.
    let silent = TcpListener::bind((LOCAL, 0)).expect("binding a silent listener");
    let silent_origin = format!(
        "https://127.0.0.1:{}",
        silent.local_addr().expect("local address").port()
    );
    let mut opts = BrowserOptions::new(Protocol::H2, &silent_origin, &cert.spki_sha256_base64);
    opts.timeout = Duration::from_secs(4);
    let t = std::time::Instant::now();
    match load(&opts, &format!("{silent_origin}/")) {
        Ok(l) => failures.push(format!("silent server loaded: {l:?}")),
        Err(e) => {
            let e = format!("{e:#}");
            eprintln!("silent server: {}", e.lines().next().unwrap_or(""));
            assert!(e.contains("timed out"), "{e}");
            assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
        }
    }
    drop(silent);
    let ours = format!("quiclab-browser-{}-", std::process::id());
    let left: Vec<_> = std::fs::read_dir(std::env::temp_dir())
        .expect("listing the temp dir")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&ours))
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "run directories left behind: {left:?}");

    let _ = std::fs::remove_dir_all(&site);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
