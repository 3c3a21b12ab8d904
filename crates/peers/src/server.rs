//! How each other server is started: its command line, its configuration file, what it serves
//! from, and how quiclab knows it is ready. The lab starts the command in the server namespace.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

use anyhow::{Result, bail};
use quiclab_model::implementation::{ImplementationRecord, Server};

use crate::listening::Sockets;
use crate::programs::Program;

/// What a server is to serve, where, and with what.
#[derive(Debug, Clone)]
pub struct ServerSetup<'a> {
    /// The run's work directory (quiclab's own): configuration files go here.
    pub work: &'a Path,
    pub cert: &'a Path,
    pub key: &'a Path,
    /// The address the run's client connects to (the server namespace's IPv4 or IPv6 one).
    pub address: IpAddr,
    pub port: u16,
    /// The directory it serves files from ([`crate::content::Site`]).
    pub root: &'a Path,
    /// The `cc` key, for an HTTP/3 run (checked against the implementation's table first).
    pub quic_cc: Option<&'a str>,
    /// The kernel's TCP congestion control of the server namespace (the lab sets it).
    pub tcp_cc: &'a str,
    /// Where its qlog goes (None: none is written).
    pub qlog_dir: Option<&'a Path>,
    /// Where its TLS secrets go, for the capture (None: not asked).
    pub keylog: Option<&'a Path>,
}

/// When a started server is ready.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ready {
    /// It creates this file.
    File(PathBuf),
    /// Its namespace has these sockets ([`crate::listening::ready`]).
    Sockets(Sockets),
}

/// A server's command, ready for `Lab::command(Side::Server, program)`.
#[derive(Debug, Clone)]
pub struct Launch {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub ready: Ready,
    /// What the run records of it.
    pub record: ImplementationRecord,
    /// Why there is no key log when one was asked for (None: it writes one, or none was asked).
    pub no_keylog: Option<&'static str>,
}

fn text(p: &Path) -> String {
    p.display().to_string()
}

/// The command that starts `server` (not quiclab's own: `quiclab serve` is started as before).
pub fn launch(server: Server, program: &Program, s: &ServerSetup) -> Result<Launch> {
    let def = server.def();
    let listen = SocketAddr::new(s.address, s.port);
    let quic_cc = s.quic_cc.unwrap_or(def.quic_cc[0]);
    let cc_text = |how: &str| {
        format!(
            "QUIC {quic_cc} ({how}); TCP {} (the server namespace's: its default, or its routes' \
             where the host keeps the namespace from defaulting to it)",
            s.tcp_cc
        )
    };
    let record = |cc: String| ImplementationRecord {
        name: def.name.to_string(),
        version: program.version.clone(),
        congestion_control: cc,
    };
    let mut env = Vec::new();
    if let Some(dir) = s.qlog_dir {
        env.push(("QLOGDIR".to_string(), text(dir)));
    }
    Ok(match server {
        Server::Quiclab => bail!("quiclab's own server is started by the workload itself"),
        Server::Caddy => {
            let config = s.work.join("Caddyfile");
            quiclab_outputs::write_in_claimed(&config, caddyfile(s).as_bytes())?;
            let home = quiclab_outputs::claim_subdir(s.work, "caddy-home", "Caddy's storage")
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            // Caddy writes its storage under HOME/XDG dirs: quiclab's scratch directory, never
            // the user's.
            for var in ["HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME"] {
                env.push((var.to_string(), text(&home)));
            }
            Launch {
                program: program.path.clone(),
                args: vec![
                    "run".into(),
                    "--config".into(),
                    text(&config),
                    "--adapter".into(),
                    "caddyfile".into(),
                ],
                env,
                ready: Ready::Sockets(Sockets {
                    port: s.port,
                    tcp: true,
                    udp: true,
                }),
                record: record(cc_text("quic-go's only; not settable")),
                no_keylog: s.keylog.map(|_| "Caddy has no option to write TLS secrets"),
            }
        }
        Server::QuicGo => {
            let ready = s.work.join("quic-go.ready");
            let mut args = vec![
                "server".to_string(),
                "--addr".into(),
                listen.to_string(),
                "--cert".into(),
                text(s.cert),
                "--key".into(),
                text(s.key),
                "--root".into(),
                text(s.root),
                "--tcp-cc".into(),
                s.tcp_cc.to_string(),
                "--ready".into(),
                text(&ready),
            ];
            if let Some(k) = s.keylog {
                args.extend(["--keylog".into(), text(k)]);
            }
            Launch {
                program: program.path.clone(),
                args,
                env,
                ready: Ready::File(ready),
                record: record(format!(
                    "QUIC {quic_cc} (quic-go's only; not settable); TCP {} (set per socket by \
                     quiclab: --tcp-cc)",
                    s.tcp_cc
                )),
                no_keylog: None,
            }
        }
        Server::Ngtcp2 => {
            if let Some(k) = s.keylog {
                env.push(("SSLKEYLOGFILE".to_string(), text(k)));
            }
            let mut args = vec![
                "-q".to_string(),
                "-d".into(),
                text(s.root),
                format!("--cc={quic_cc}"),
            ];
            if let Some(dir) = s.qlog_dir {
                args.push(format!("--qlog-dir={}", text(dir)));
            }
            args.extend([
                s.address.to_string(),
                s.port.to_string(),
                text(s.key),
                text(s.cert),
            ]);
            Launch {
                program: program.path.clone(),
                args,
                env,
                ready: Ready::Sockets(Sockets {
                    port: s.port,
                    tcp: false,
                    udp: true,
                }),
                record: record(format!(
                    "QUIC {quic_cc} ({})",
                    if s.quic_cc.is_some() {
                        "set by quiclab: --cc"
                    } else {
                        "its default"
                    }
                )),
                no_keylog: None,
            }
        }
    })
}

/// Caddy's configuration: one site on every name (no host matcher, so a client that sends no
/// SNI — quiclab's own connects by address — gets the lab's certificate too), the lab's
/// certificate, files from the root, HTTP/1.1, HTTP/2 and HTTP/3, no admin endpoint, no
/// automatic certificates or redirects.
pub fn caddyfile(s: &ServerSetup) -> String {
    let bind = s.address.to_string();
    format!(
        "{{\n\
         \tadmin off\n\
         \tauto_https off\n\
         \tdefault_sni quiclab.test\n\
         \tservers {{\n\
         \t\tprotocols h1 h2 h3\n\
         \t}}\n\
         }}\n\
         https://:{port} {{\n\
         \tbind {bind}\n\
         \ttls {cert} {key}\n\
         \troot * {root}\n\
         \tfile_server\n\
         }}\n",
        port = s.port,
        cert = text(s.cert),
        key = text(s.key),
        root = text(s.root),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn setup<'a>(work: &'a Path, root: &'a Path) -> ServerSetup<'a> {
        ServerSetup {
            work,
            cert: Path::new("/w/cert.pem"),
            key: Path::new("/w/key.pem"),
            address: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
            port: 443,
            root,
            quic_cc: None,
            tcp_cc: "cubic",
            qlog_dir: Some(Path::new("/w/qlog")),
            keylog: Some(Path::new("/w/keys.log")),
        }
    }

    fn program() -> Program {
        Program {
            path: "/usr/bin/x".into(),
            version: "v1".into(),
        }
    }

    #[test]
    fn each_server_gets_its_files_address_and_congestion_control() {
        let dir = tempfile::tempdir().unwrap();
        let work = quiclab_outputs::claim_dir(&dir.path().join("w"), "test").unwrap();
        let root = work.join("www");
        let s = setup(&work, &root);

        let caddy = launch(Server::Caddy, &program(), &s).unwrap();
        let file = std::fs::read_to_string(work.join("Caddyfile")).unwrap();
        assert!(
            file.contains("protocols h1 h2 h3") && file.contains("bind 10.0.0.2"),
            "{file}"
        );
        assert!(file.contains("tls /w/cert.pem /w/key.pem"), "{file}");
        assert!(
            caddy
                .env
                .iter()
                .any(|(k, v)| k == "HOME" && v.contains("caddy-home"))
        );
        assert!(caddy.no_keylog.is_some(), "Caddy cannot write TLS secrets");
        assert!(matches!(
            caddy.ready,
            Ready::Sockets(Sockets {
                tcp: true,
                udp: true,
                ..
            })
        ));

        let ngtcp2 = launch(
            Server::Ngtcp2,
            &program(),
            &ServerSetup {
                quic_cc: Some("bbr"),
                ..s.clone()
            },
        )
        .unwrap();
        assert!(
            ngtcp2.args.contains(&"--cc=bbr".to_string()),
            "{:?}",
            ngtcp2.args
        );
        assert_eq!(
            &ngtcp2.args[ngtcp2.args.len() - 4..],
            ["10.0.0.2", "443", "/w/key.pem", "/w/cert.pem"]
        );
        assert!(
            ngtcp2
                .env
                .contains(&("SSLKEYLOGFILE".into(), "/w/keys.log".into()))
        );
        assert!(ngtcp2.record.congestion_control.contains("set by quiclab"));

        let go = launch(Server::QuicGo, &program(), &s).unwrap();
        assert!(go.args.windows(2).any(|w| w == ["--addr", "10.0.0.2:443"]));
        assert!(go.env.contains(&("QLOGDIR".into(), "/w/qlog".into())));
        assert!(matches!(go.ready, Ready::File(_)));
        assert!(launch(Server::Quiclab, &program(), &s).is_err());
    }
}
