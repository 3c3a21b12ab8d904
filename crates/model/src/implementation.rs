//! Which programs serve and which fetch: quiclab's own stacks (quinn + h3 for HTTP/3, hyper +
//! rustls over the kernel's TCP for HTTP/1.1 and HTTP/2) or another implementation, run as its
//! own process in the lab's namespaces (docs/stacks.md). A verdict of the form "QUIC beats TCP"
//! is, strictly, about the implementations that ran; these are the `server` and `client` keys
//! that say which, and the table of what each can do, so that a combination that cannot work is
//! refused (naming the key) before any lab starts.

use serde::{Deserialize, Serialize};

use crate::WorkloadKind;
use quiclab_proto::options::Protocol;

/// The program that serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Server {
    /// quiclab's own server (`quiclab serve`): quinn + h3, hyper + rustls.
    Quiclab,
    /// Caddy (Debian's package): HTTP/1.1 and HTTP/2 over Go's TLS, HTTP/3 over its quic-go.
    Caddy,
    /// A current quic-go HTTP/3 server, with Go's net/http for HTTP/1.1 and HTTP/2
    /// (`quiclab-quic-go server`, built by scripts/setup).
    QuicGo,
    /// ngtcp2's example server with nghttp3 and GnuTLS (`gtlsserver`, Debian's ngtcp2-server).
    Ngtcp2,
}

/// The program that fetches (a bulk download; page loads are chosen by `browser`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Client {
    /// quiclab's own client (`quiclab child`): quinn + h3, hyper + rustls.
    Quiclab,
    /// Headless Chromium: a `fetch()` of the object from a blank tab, its connection's timings
    /// from DevTools.
    Chromium,
    /// A current quic-go client (`quiclab-quic-go get`), Go's net/http for h1 and h2.
    QuicGo,
    /// ngtcp2's example client (`gtlsclient`, Debian's ngtcp2-client).
    Ngtcp2,
    /// curl (Debian's: HTTP/1.1 and HTTP/2 over OpenSSL; it has no HTTP/3).
    Curl,
    /// AStream, the Python DASH player seed 004 used (a checkout the user provides, Python 2.7):
    /// video over plain HTTP/1.1, a new urllib2 connection per segment.
    Astream,
}

/// Where an implementation's QUIC congestion window can be read, if anywhere. (Another server's
/// kernel TCP is read from the kernel's socket diagnostics, whoever the server is.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CwndSource {
    /// quiclab's own recorder (quinn's path stats; `tcp_info` for its TCP sockets).
    Quiclab,
    /// The implementation's qlog (`recovery:metrics_updated`, `congestion_window`).
    Qlog,
    /// Nowhere: the value is null, with this reason.
    None(&'static str),
}

/// What one server implementation can do.
#[derive(Debug, Clone, Copy)]
pub struct ServerDef {
    pub server: Server,
    pub name: &'static str,
    pub protocols: &'static [Protocol],
    /// The workload kinds it serves (flows need quiclab's own server: their pacing and FEC are
    /// its own).
    pub kinds: &'static [WorkloadKind],
    /// Its QUIC congestion control: the choices, the first the default (empty: no QUIC).
    pub quic_cc: &'static [&'static str],
    /// Whether the `cc` key can set its QUIC congestion control.
    pub quic_cc_settable: bool,
    pub cwnd: CwndSource,
    pub doc: &'static str,
}

/// What one client implementation can do.
#[derive(Debug, Clone, Copy)]
pub struct ClientDef {
    pub client: Client,
    pub name: &'static str,
    pub protocols: &'static [Protocol],
    /// TLS resumption and 0-RTT on request (`resume`, `zero_rtt`).
    pub resumes: bool,
    /// The workload kinds it runs.
    pub kinds: &'static [WorkloadKind],
    pub doc: &'static str,
}

const ALL: &[Protocol] = &[Protocol::H1, Protocol::H2, Protocol::H3];

pub const SERVERS: &[ServerDef] = &[
    ServerDef {
        server: Server::Quiclab,
        name: "quiclab",
        protocols: ALL,
        kinds: &[
            WorkloadKind::Bulk,
            WorkloadKind::Page,
            WorkloadKind::Flows,
            WorkloadKind::Video,
        ],
        quic_cc: &["cubic", "newreno", "bbr", "gquic-cubic"],
        quic_cc_settable: true,
        cwnd: CwndSource::Quiclab,
        doc: "quiclab's own server: quinn + h3 (HTTP/3), hyper + rustls over the kernel's TCP (HTTP/1.1, HTTP/2)",
    },
    ServerDef {
        server: Server::Caddy,
        name: "caddy",
        protocols: ALL,
        kinds: &[WorkloadKind::Bulk, WorkloadKind::Page, WorkloadKind::Video],
        quic_cc: &["cubic"],
        quic_cc_settable: false,
        cwnd: CwndSource::None("Caddy writes no qlog and exposes no QUIC congestion window"),
        doc: "Caddy (Debian's package): Go's TLS for HTTP/1.1 and HTTP/2, its vendored quic-go for HTTP/3",
    },
    ServerDef {
        server: Server::QuicGo,
        name: "quic-go",
        protocols: ALL,
        kinds: &[WorkloadKind::Bulk, WorkloadKind::Page, WorkloadKind::Video],
        quic_cc: &["cubic"],
        quic_cc_settable: false,
        cwnd: CwndSource::Qlog,
        doc: "a current quic-go HTTP/3 server, Go's net/http for HTTP/1.1 and HTTP/2 (quiclab-quic-go)",
    },
    ServerDef {
        server: Server::Ngtcp2,
        name: "ngtcp2",
        protocols: &[Protocol::H3],
        kinds: &[WorkloadKind::Bulk, WorkloadKind::Page, WorkloadKind::Video],
        quic_cc: &["cubic", "reno", "bbr"],
        quic_cc_settable: true,
        cwnd: CwndSource::Qlog,
        doc: "ngtcp2's example server with nghttp3 and GnuTLS (gtlsserver, Debian's ngtcp2-server): HTTP/3 only",
    },
];

pub const CLIENTS: &[ClientDef] = &[
    ClientDef {
        client: Client::Quiclab,
        name: "quiclab",
        protocols: ALL,
        resumes: true,
        kinds: &[WorkloadKind::Bulk, WorkloadKind::Video],
        doc: "quiclab's own client: quinn + h3, hyper + rustls",
    },
    ClientDef {
        client: Client::Chromium,
        name: "chromium",
        protocols: ALL,
        resumes: false,
        kinds: &[WorkloadKind::Bulk],
        doc: "headless Chromium: fetch() of the object from a blank tab (timings from DevTools)",
    },
    ClientDef {
        client: Client::QuicGo,
        name: "quic-go",
        protocols: ALL,
        resumes: false,
        kinds: &[WorkloadKind::Bulk],
        doc: "a current quic-go client, Go's net/http for HTTP/1.1 and HTTP/2 (quiclab-quic-go get)",
    },
    ClientDef {
        client: Client::Ngtcp2,
        name: "ngtcp2",
        protocols: &[Protocol::H3],
        resumes: false,
        kinds: &[WorkloadKind::Bulk],
        doc: "ngtcp2's example client (gtlsclient, Debian's ngtcp2-client): HTTP/3 only",
    },
    ClientDef {
        client: Client::Curl,
        name: "curl",
        protocols: &[Protocol::H1, Protocol::H2],
        resumes: false,
        kinds: &[WorkloadKind::Bulk],
        doc: "curl (Debian's, OpenSSL): HTTP/1.1 and HTTP/2; it has no HTTP/3",
    },
    ClientDef {
        client: Client::Astream,
        name: "astream",
        protocols: &[Protocol::H1],
        resumes: false,
        kinds: &[WorkloadKind::Video],
        doc: "AStream, the seed's Python DASH player (a checkout given by QUICLAB_ASTREAM, Python 2.7): video over plain HTTP/1.1, a new connection per segment",
    },
];

impl Server {
    pub fn def(self) -> &'static ServerDef {
        SERVERS
            .iter()
            .find(|d| d.server == self)
            .expect("every server has a row")
    }

    pub fn name(self) -> &'static str {
        self.def().name
    }

    pub fn parse(s: &str) -> Result<Server, String> {
        SERVERS
            .iter()
            .find(|d| d.name == s)
            .map(|d| d.server)
            .ok_or_else(|| {
                format!(
                    "expected {}; got {s:?}",
                    names(SERVERS.iter().map(|d| d.name))
                )
            })
    }
}

impl Client {
    pub fn def(self) -> &'static ClientDef {
        CLIENTS
            .iter()
            .find(|d| d.client == self)
            .expect("every client has a row")
    }

    pub fn name(self) -> &'static str {
        self.def().name
    }

    pub fn parse(s: &str) -> Result<Client, String> {
        CLIENTS
            .iter()
            .find(|d| d.name == s)
            .map(|d| d.client)
            .ok_or_else(|| {
                format!(
                    "expected {}; got {s:?}",
                    names(CLIENTS.iter().map(|d| d.name))
                )
            })
    }
}

fn names<'a>(it: impl Iterator<Item = &'a str>) -> String {
    let v: Vec<&str> = it.collect();
    match v.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => v.join(""),
    }
}

fn protocol_list(p: &[Protocol]) -> String {
    names(p.iter().map(|p| p.as_str()))
}

/// What a run asks of its implementations, for [`check`].
#[derive(Debug, Clone, Copy)]
pub struct Combination<'a> {
    pub kind: WorkloadKind,
    pub proto: Protocol,
    pub server: Server,
    /// None for page loads (the browser loads them).
    pub client: Option<Client>,
    /// The `cc` key's value, if given.
    pub cc: Option<&'a str>,
    pub resume: bool,
    pub zero_rtt: bool,
    pub fec: bool,
    /// The first key given that sets quiclab's own QUIC stack (`quic_mtu`, `quic_pmtud`,
    /// `gquic_n`), which another program would not honour.
    pub quic_stack_key: Option<&'static str>,
}

/// Whether the combination can run; else the key to change and why.
pub fn check(c: &Combination) -> Result<(), (&'static str, String)> {
    let s = c.server.def();
    if !s.kinds.contains(&c.kind) {
        return Err((
            "server",
            format!(
                "{} serves bulk downloads, page loads and video segments; a {} run needs \
                 server = \"quiclab\"",
                s.name,
                c.kind.name()
            ),
        ));
    }
    if !s.protocols.contains(&c.proto) {
        return Err((
            "server",
            format!(
                "{} speaks {} only; this run is {}",
                s.name,
                protocol_list(s.protocols),
                c.proto.as_str()
            ),
        ));
    }
    if let Some(client) = c.client {
        let d = client.def();
        if !d.kinds.contains(&c.kind) {
            let kinds: Vec<&str> = d.kinds.iter().map(|k| k.name()).collect();
            return Err((
                "client",
                format!(
                    "{} runs {} only; this run is {}",
                    d.name,
                    kinds.join(" and "),
                    c.kind.name()
                ),
            ));
        }
        if !d.protocols.contains(&c.proto) {
            return Err((
                "client",
                format!(
                    "{} speaks {} only; this run is {}",
                    d.name,
                    protocol_list(d.protocols),
                    c.proto.as_str()
                ),
            ));
        }
        if (c.resume || c.zero_rtt) && !d.resumes {
            let key = if c.zero_rtt { "zero_rtt" } else { "resume" };
            return Err((
                key,
                format!(
                    "resumption and 0-RTT are measured with quiclab's own client; {} is run cold",
                    d.name
                ),
            ));
        }
    }
    if let Some(key) = c.quic_stack_key
        && c.proto == Protocol::H3
    {
        // Another program sends datagrams of its own size (Caddy 1 252 bytes, ngtcp2 1 444 with
        // --quic-mtu 1200): the run would record a value that never went on the wire.
        let other = match (c.server, c.client) {
            (s, _) if s != Server::Quiclab => Some(s.def().name),
            (_, Some(x)) if x != Client::Quiclab => Some(x.def().name),
            _ => None,
        };
        if let Some(name) = other {
            return Err((
                key,
                format!(
                    "{key} sets quiclab's own QUIC stack (quinn); {name} chooses its own packet \
                     sizes and congestion control, so the run would record a value that never \
                     went on the wire: leave {key} out, or use server and client \"quiclab\""
                ),
            ));
        }
    }
    if c.fec && (c.server != Server::Quiclab || c.client.is_some_and(|x| x != Client::Quiclab)) {
        return Err((
            "fec",
            "FEC is quiclab's own XOR FEC under quinn: it needs server and client \"quiclab\""
                .into(),
        ));
    }
    if let Some(cc) = c.cc
        && c.server != Server::Quiclab
    {
        // Over TCP the cc key names the kernel's algorithm (set on the server namespace's
        // sockets, whatever the program); over QUIC it is the implementation's own.
        if c.proto == Protocol::H3 {
            if !s.quic_cc_settable && cc != s.quic_cc[0] {
                return Err((
                    "cc",
                    format!(
                        "{}'s QUIC congestion control is {} and cannot be chosen",
                        s.name, s.quic_cc[0]
                    ),
                ));
            }
            if !s.quic_cc.contains(&cc) {
                return Err((
                    "cc",
                    format!(
                        "{} offers {} for QUIC",
                        s.name,
                        names(s.quic_cc.iter().copied())
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// The programs of a run, as it records them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Implementations {
    pub server: ImplementationRecord,
    pub client: ImplementationRecord,
}

/// An implementation as a run records it: what it is and which version ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImplementationRecord {
    /// `quiclab`, `caddy`, `quic-go`, `ngtcp2`, `chromium`, `curl`.
    pub name: String,
    /// As the program reports it (`v2.6.2`, `v0.65.0`, `0.12.1`), or quiclab's stack crates'.
    pub version: String,
    /// The congestion control it ran with, and whether quiclab set it or it is the program's
    /// only one.
    pub congestion_control: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn combo(server: Server, client: Option<Client>, proto: Protocol) -> Combination<'static> {
        Combination {
            kind: WorkloadKind::Bulk,
            proto,
            server,
            client,
            cc: None,
            resume: false,
            zero_rtt: false,
            fec: false,
            quic_stack_key: None,
        }
    }

    #[test]
    fn names_parse_back_and_unknown_ones_list_the_choices() {
        for d in SERVERS {
            assert_eq!(Server::parse(d.name), Ok(d.server));
        }
        for d in CLIENTS {
            assert_eq!(Client::parse(d.name), Ok(d.client));
        }
        let e = Server::parse("nginx").unwrap_err();
        assert!(e.contains("quiclab, caddy, quic-go or ngtcp2"), "{e}");
        let e = Client::parse("wget").unwrap_err();
        assert!(e.contains("curl"), "{e}");
    }

    #[test]
    fn combinations_that_cannot_work_name_the_key_to_change() {
        assert!(check(&combo(Server::QuicGo, Some(Client::Quiclab), Protocol::H3)).is_ok());
        assert!(check(&combo(Server::Caddy, Some(Client::Curl), Protocol::H2)).is_ok());
        let (key, why) =
            check(&combo(Server::Ngtcp2, Some(Client::Quiclab), Protocol::H2)).unwrap_err();
        assert_eq!(key, "server");
        assert!(why.contains("h3 only"), "{why}");
        let (key, why) =
            check(&combo(Server::Quiclab, Some(Client::Curl), Protocol::H3)).unwrap_err();
        assert_eq!(key, "client");
        assert!(why.contains("h1 or h2"), "{why}");
        let flows = Combination {
            kind: WorkloadKind::Flows,
            ..combo(Server::Caddy, None, Protocol::H3)
        };
        assert_eq!(check(&flows).unwrap_err().0, "server");
        let page = |server, proto| Combination {
            kind: WorkloadKind::Page,
            ..combo(server, None, proto)
        };
        assert!(check(&page(Server::Caddy, Protocol::H1)).is_ok());
        assert!(check(&page(Server::Ngtcp2, Protocol::H3)).is_ok());
        assert_eq!(
            check(&page(Server::Ngtcp2, Protocol::H2)).unwrap_err().0,
            "server"
        );
        let resumed = Combination {
            zero_rtt: true,
            ..combo(Server::Quiclab, Some(Client::QuicGo), Protocol::H3)
        };
        assert_eq!(check(&resumed).unwrap_err().0, "zero_rtt");
        let fec = Combination {
            fec: true,
            ..combo(Server::Ngtcp2, Some(Client::Quiclab), Protocol::H3)
        };
        assert_eq!(check(&fec).unwrap_err().0, "fec");
        // A datagram size another program would not honour is refused, not recorded.
        for (server, client) in [
            (Server::Caddy, Some(Client::Quiclab)),
            (Server::Ngtcp2, Some(Client::Quiclab)),
            (Server::Quiclab, Some(Client::Ngtcp2)),
        ] {
            let mtu = Combination {
                quic_stack_key: Some("quic_mtu"),
                ..combo(server, client, Protocol::H3)
            };
            let (key, why) = check(&mtu).unwrap_err();
            assert_eq!(key, "quic_mtu");
            assert!(why.contains("never went on the wire"), "{why}");
        }
        let own = Combination {
            quic_stack_key: Some("quic_mtu"),
            ..combo(Server::Quiclab, Some(Client::Quiclab), Protocol::H3)
        };
        assert!(check(&own).is_ok());
    }

    #[test]
    fn congestion_control_is_refused_where_it_cannot_be_set() {
        let cc = |server, cc| Combination {
            cc: Some(cc),
            ..combo(server, Some(Client::Quiclab), Protocol::H3)
        };
        assert!(check(&cc(Server::QuicGo, "cubic")).is_ok());
        let (key, why) = check(&cc(Server::QuicGo, "bbr")).unwrap_err();
        assert_eq!(key, "cc");
        assert!(why.contains("cannot be chosen"), "{why}");
        assert!(check(&cc(Server::Ngtcp2, "bbr")).is_ok());
        assert_eq!(
            check(&cc(Server::Ngtcp2, "gquic-cubic")).unwrap_err().0,
            "cc"
        );
        // Over TCP cc is the kernel's, whatever serves.
        let tcp = Combination {
            cc: Some("bbr"),
            ..combo(Server::Caddy, Some(Client::Curl), Protocol::H1)
        };
        assert!(check(&tcp).is_ok());
    }
}
