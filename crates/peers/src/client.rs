//! How each other client is told what to download, and how its answer is read into the
//! milestones quiclab's own client reports (ms from the start of the measured connection):
//! connected (TCP), handshake done, first byte, last byte. Each program tells them its own way —
//! the quic-go peer prints one JSON line, curl its `%{json}` write-out, ngtcp2's example client
//! only its qlog — and what it does not tell is `None` with the reason.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Result, bail};
use quiclab_model::implementation::{Client, ImplementationRecord};
use quiclab_proto::options::Protocol;
use serde::Deserialize;

use crate::programs::Program;

pub use quiclab_proto::SERVER_NAME;

/// One download.
#[derive(Debug, Clone)]
pub struct FetchSetup<'a> {
    /// The run's work directory (quiclab's own): the body and the qlog go here.
    pub work: &'a Path,
    pub proto: Protocol,
    pub server: SocketAddr,
    /// `/bytes/N`.
    pub path: &'a str,
    /// N: the bytes the body must have.
    pub size: u64,
    /// The lab's certificate (self-signed: it is its own root).
    pub ca: &'a Path,
    /// The kernel's TCP congestion control for h1 and h2 (the quic-go peer sets it per socket;
    /// curl has the client namespace's, which the lab sets to the same).
    pub tcp_cc: &'a str,
    pub keylog: Option<&'a Path>,
    pub timeout: Duration,
}

/// A client's command, ready for `Lab::command(Side::Client, program)`.
#[derive(Debug, Clone)]
pub struct ClientLaunch {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    /// Where the body lands, to verify after it ends (None: the client verifies it itself).
    pub body: Option<PathBuf>,
    /// Where its qlog lands, to read its timings from (None: it prints them).
    pub qlog_dir: Option<PathBuf>,
    pub record: ImplementationRecord,
}

fn text(p: &Path) -> String {
    p.display().to_string()
}

fn url(s: &FetchSetup) -> String {
    format!("https://{SERVER_NAME}:{}{}", s.server.port(), s.path)
}

/// The command that runs `client` (not quiclab's own, nor Chromium: those run as before).
pub fn launch(client: Client, program: &Program, s: &FetchSetup) -> Result<ClientLaunch> {
    let record = |cc: String| ImplementationRecord {
        name: client.name().to_string(),
        version: program.version.clone(),
        congestion_control: cc,
    };
    let tcp_cc = format!("TCP {} (the client namespace's, set by quiclab)", s.tcp_cc);
    let mut env = Vec::new();
    Ok(match client {
        Client::Quiclab | Client::Chromium | Client::Astream => {
            bail!("{} is run by the workload itself", client.name())
        }
        Client::QuicGo => {
            let qlog = crate_dir(s.work, "client-qlog")?;
            env.push(("QLOGDIR".to_string(), text(&qlog)));
            let mut args = vec![
                "get".to_string(),
                "--url".into(),
                url(s),
                "--proto".into(),
                s.proto.as_str().into(),
                "--ca".into(),
                text(s.ca),
                "--connect".into(),
                s.server.to_string(),
                "--tcp-cc".into(),
                s.tcp_cc.into(),
                "--verify-pattern".into(),
                "--expect-bytes".into(),
                s.size.to_string(),
                "--timeout".into(),
                format!("{}ms", s.timeout.as_millis()),
            ];
            if let Some(k) = s.keylog {
                args.extend(["--keylog".into(), text(k)]);
            }
            ClientLaunch {
                program: program.path.clone(),
                args,
                env,
                body: None,
                qlog_dir: Some(qlog),
                record: record(match s.proto {
                    Protocol::H3 => "QUIC cubic (quic-go's only; not settable)".into(),
                    _ => format!("TCP {} (set by quiclab on its socket)", s.tcp_cc),
                }),
            }
        }
        Client::Curl => {
            if s.proto == Protocol::H3 {
                bail!("curl here has no HTTP/3");
            }
            if let Some(k) = s.keylog {
                env.push(("SSLKEYLOGFILE".to_string(), text(k)));
            }
            let body = s.work.join("body");
            let ip = match s.server {
                SocketAddr::V4(a) => a.ip().to_string(),
                SocketAddr::V6(a) => format!("[{}]", a.ip()),
            };
            let port = s.server.port();
            let args = vec![
                "--silent".to_string(),
                "--show-error".into(),
                if s.proto == Protocol::H2 {
                    "--http2"
                } else {
                    "--http1.1"
                }
                .into(),
                "--cacert".into(),
                text(s.ca),
                "--connect-to".into(),
                format!("{SERVER_NAME}:{port}:{ip}:{port}"),
                "--max-time".into(),
                format!("{:.3}", s.timeout.as_secs_f64()),
                "--output".into(),
                text(&body),
                "--write-out".into(),
                "%{json}".into(),
                url(s),
            ];
            ClientLaunch {
                program: program.path.clone(),
                args,
                env,
                body: Some(body),
                qlog_dir: None,
                record: record(tcp_cc),
            }
        }
        Client::Ngtcp2 => {
            if s.proto != Protocol::H3 {
                bail!("ngtcp2's client speaks HTTP/3 only");
            }
            if let Some(k) = s.keylog {
                env.push(("SSLKEYLOGFILE".to_string(), text(k)));
            }
            let qlog = crate_dir(s.work, "client-qlog")?;
            let download = crate_dir(s.work, "download")?;
            let args = vec![
                "-q".to_string(),
                "--exit-on-all-streams-close".into(),
                format!("--download={}", text(&download)),
                format!("--qlog-dir={}", text(&qlog)),
                format!("--timeout={}s", s.timeout.as_secs().max(1)),
                s.server.ip().to_string(),
                s.server.port().to_string(),
                url(s),
            ];
            ClientLaunch {
                program: program.path.clone(),
                args,
                env,
                // --download names the file after the URL's last segment.
                body: Some(download.join(s.size.to_string())),
                qlog_dir: Some(qlog),
                record: record("QUIC cubic (its default)".into()),
            }
        }
    })
}

fn crate_dir(work: &Path, name: &str) -> Result<PathBuf> {
    quiclab_outputs::claim_subdir(work, name, "a client's output")
        .map_err(|e| anyhow::anyhow!("{e}"))
}

/// A download by another client, in quiclab's terms (model's record).
pub use quiclab_model::records::ExternalFetch;

/// The quic-go peer's line.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct QuicGoLine {
    #[allow(dead_code)]
    implementation: String,
    #[allow(dead_code)]
    version: String,
    #[allow(dead_code)]
    proto: String,
    alpn: String,
    tls_version: String,
    status: u16,
    bytes: u64,
    verified: Option<bool>,
    handshake_ms: f64,
    ttfb_ms: f64,
    total_ms: f64,
    resumed: bool,
}

/// curl's `%{json}` (the fields quiclab reads; it prints many more).
#[derive(Debug, Deserialize)]
struct CurlJson {
    time_connect: f64,
    time_appconnect: f64,
    time_starttransfer: f64,
    time_total: f64,
    size_download: u64,
    http_version: String,
    response_code: u16,
    exitcode: i32,
    #[serde(default)]
    errormsg: Option<String>,
}

/// Reads what `client` left: its stdout (`stdout`), its body and qlog files. A body that does not
/// hold the pattern is read as such (`verified: Some(false)`); the run then fails on it.
pub fn read(
    client: Client,
    launch: &ClientLaunch,
    s: &FetchSetup,
    stdout: &str,
) -> Result<ExternalFetch, String> {
    let timeline = launch.qlog_dir.as_deref().map(|dir| {
        let files = crate::qlog::files(dir);
        files
            .first()
            .and_then(|f| std::fs::read_to_string(f).ok())
            .map(|t| crate::qlog::read(&t))
    });
    let cwnd = timeline
        .clone()
        .flatten()
        .map(|t| t.cwnd)
        .unwrap_or_default();
    let mut out = match client {
        Client::QuicGo => {
            let line = stdout
                .lines()
                .rev()
                .find(|l| l.trim_start().starts_with('{'))
                .ok_or("the quic-go client printed no result line")?;
            let l: QuicGoLine = serde_json::from_str(line)
                .map_err(|e| format!("the quic-go client's line does not match ({e}): {line}"))?;
            if l.status != 200 {
                return Err(format!("the server answered {}", l.status));
            }
            let mut unmeasured = BTreeMap::new();
            unmeasured.insert(
                "connect_ms",
                match s.proto {
                    Protocol::H3 => "QUIC has no TCP connect".to_string(),
                    _ => "the quic-go peer reports the handshake, not the TCP connect".to_string(),
                },
            );
            ExternalFetch {
                negotiated: Some(l.alpn),
                tls_version: Some(l.tls_version),
                connect_ms: None,
                handshake_ms: Some(l.handshake_ms),
                ttfb_ms: Some(l.ttfb_ms),
                total_ms: l.total_ms,
                bytes: l.bytes,
                verified: l.verified,
                resumed: l.resumed,
                cwnd: Vec::new(),
                unmeasured,
            }
        }
        Client::Curl => {
            let start = stdout
                .find('{')
                .ok_or("curl printed no %{json} write-out")?;
            let j: CurlJson = serde_json::from_str(stdout[start..].trim())
                .map_err(|e| format!("curl's write-out does not parse ({e})"))?;
            if j.exitcode != 0 {
                return Err(format!(
                    "curl failed (exit code {}): {}",
                    j.exitcode,
                    j.errormsg.unwrap_or_default()
                ));
            }
            if j.response_code != 200 {
                return Err(format!("the server answered {}", j.response_code));
            }
            let mut unmeasured = BTreeMap::new();
            unmeasured.insert(
                "tls_version",
                "curl's write-out does not say the TLS version".to_string(),
            );
            ExternalFetch {
                tls_version: None,
                negotiated: Some(match j.http_version.as_str() {
                    "2" => "h2".into(),
                    "1.1" => "http/1.1".into(),
                    other => other.to_string(),
                }),
                connect_ms: Some(j.time_connect * 1e3),
                handshake_ms: Some(j.time_appconnect * 1e3),
                ttfb_ms: Some(j.time_starttransfer * 1e3),
                total_ms: j.time_total * 1e3,
                bytes: j.size_download,
                verified: None,
                resumed: false,
                cwnd: Vec::new(),
                unmeasured,
            }
        }
        Client::Ngtcp2 => {
            let t = timeline
                .flatten()
                .ok_or("ngtcp2's client wrote no qlog to read its timings from")?;
            let mut unmeasured = BTreeMap::new();
            unmeasured.insert("connect_ms", "QUIC has no TCP connect".to_string());
            let total_ms = t
                .last_stream_data_ms
                .ok_or("ngtcp2's qlog shows no response data on stream 0")?;
            if t.handshake_complete_ms.is_none() {
                unmeasured.insert(
                    "handshake_ms",
                    "ngtcp2's qlog shows no Handshake packet with CRYPTO sent".to_string(),
                );
            }
            ExternalFetch {
                negotiated: Some("h3".into()),
                tls_version: Some("1.3".into()),
                connect_ms: None,
                handshake_ms: t.handshake_complete_ms,
                ttfb_ms: t.first_stream_data_ms,
                total_ms,
                bytes: 0,
                verified: None,
                resumed: false,
                cwnd: Vec::new(),
                unmeasured,
            }
        }
        Client::Quiclab | Client::Chromium | Client::Astream => {
            return Err(format!("{} is read by the workload itself", client.name()));
        }
    };
    if out.cwnd.is_empty() {
        out.cwnd = cwnd;
    }
    if let Some(body) = &launch.body {
        let len = std::fs::metadata(body)
            .map_err(|e| format!("the downloaded body {}: {e}", body.display()))?
            .len();
        out.bytes = len;
        out.verified = Some(
            crate::content::file_holds_pattern(body, s.size)
                .map_err(|e| format!("verifying {}: {e}", body.display()))?,
        );
        // A body of hundreds of MB is not kept (it is verified, and it is the pattern).
        let _ = std::fs::remove_file(body);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{IpAddr, Ipv6Addr};

    fn program() -> Program {
        Program {
            path: "/usr/bin/x".into(),
            version: "v1".into(),
        }
    }

    fn setup(work: &Path, proto: Protocol) -> FetchSetup<'_> {
        FetchSetup {
            work,
            proto,
            server: SocketAddr::new(IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2)), 443),
            path: "/bytes/1000",
            size: 1000,
            ca: Path::new("/w/cert.pem"),
            tcp_cc: "cubic",
            keylog: None,
            timeout: Duration::from_secs(30),
        }
    }

    #[test]
    fn curl_connects_to_the_address_under_the_certificates_name_and_is_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let work = quiclab_outputs::claim_dir(&dir.path().join("w"), "test").unwrap();
        let s = setup(&work, Protocol::H2);
        let l = launch(Client::Curl, &program(), &s).unwrap();
        assert!(
            l.args
                .contains(&"quiclab.test:443:[fd00::2]:443".to_string()),
            "{:?}",
            l.args
        );
        assert!(l.args.contains(&"--http2".to_string()));
        assert_eq!(
            l.args.last().unwrap(),
            "https://quiclab.test:443/bytes/1000"
        );
        assert!(launch(Client::Curl, &program(), &setup(&work, Protocol::H3)).is_err());
        // The body it wrote, and its write-out.
        let body: Vec<u8> = (0..1000u64).map(crate::content::pattern_byte).collect();
        quiclab_outputs::write_in_claimed(l.body.as_ref().unwrap(), &body).unwrap();
        let json = r#"{"time_connect":0.0205,"time_appconnect":0.0612,"time_starttransfer":0.083,"time_total":0.1,"size_download":1000,"http_version":"2","response_code":200,"exitcode":0,"errormsg":null,"url":"x"}"#;
        let f = read(Client::Curl, &l, &s, json).unwrap();
        assert_eq!(f.negotiated.as_deref(), Some("h2"));
        assert_eq!(f.verified, Some(true));
        assert!((f.handshake_ms.unwrap() - 61.2).abs() < 1e-9);
        assert!((f.total_ms - 100.0).abs() < 1e-9);
        assert_eq!(f.bytes, 1000);
        assert!(
            !l.body.as_ref().unwrap().exists(),
            "the verified body is not kept"
        );
    }

    #[test]
    fn a_quic_go_line_that_does_not_match_is_an_error_not_a_default() {
        let dir = tempfile::tempdir().unwrap();
        let work = quiclab_outputs::claim_dir(&dir.path().join("w"), "test").unwrap();
        let s = setup(&work, Protocol::H3);
        let l = launch(Client::QuicGo, &program(), &s).unwrap();
        let good = r#"{"implementation":"quic-go","version":"v0.65.0","proto":"h3","alpn":"h3","tls_version":"1.3","status":200,"bytes":1000,"verified":true,"handshake_ms":41.5,"ttfb_ms":83.0,"total_ms":90.0,"resumed":false}"#;
        let f = read(Client::QuicGo, &l, &s, good).unwrap();
        assert_eq!(
            (f.verified, f.handshake_ms, f.connect_ms),
            (Some(true), Some(41.5), None)
        );
        assert!(f.unmeasured["connect_ms"].contains("QUIC has no TCP connect"));
        let e = read(Client::QuicGo, &l, &s, r#"{"bytes":1}"#).unwrap_err();
        assert!(e.contains("does not match"), "{e}");
        assert!(read(Client::QuicGo, &l, &s, "").is_err());
    }
}
