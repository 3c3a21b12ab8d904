//! A page load as data: protocol, page, loader, server, the stacks' options.

use std::path::PathBuf;
use std::time::Duration;

use quiclab_proto::options::{Protocol, StackOptions};
use serde::{Deserialize, Serialize};

use crate::implementation::Server;

/// Who loads the page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Browser {
    /// quiclab's browser-like loader over its own stacks.
    Builtin,
    /// Headless Chromium over CDP.
    Chromium,
}

impl Browser {
    pub fn name(self) -> &'static str {
        match self {
            Browser::Builtin => "builtin",
            Browser::Chromium => "chromium",
        }
    }
}

/// Where a page comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum PageSource {
    /// A page of the built-in corpus (`carlucci-small`, …).
    Builtin(String),
    /// A directory with an index.html.
    Dir(PathBuf),
}

impl PageSource {
    pub fn name(&self) -> String {
        match self {
            PageSource::Builtin(n) => n.clone(),
            PageSource::Dir(d) => d.display().to_string(),
        }
    }
}

/// One page load (the page client receives it as it is).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PageRun {
    pub proto: Protocol,
    pub page: PageSource,
    pub browser: Browser,
    /// The program that serves the page: quiclab's own, or another implementation serving the
    /// page's directory (docs/stacks.md).
    pub server: Server,
    /// For h2/h3: the most requests in flight at once (early QUIC multiplexed 6).
    pub max_streams: Option<u64>,
    pub stack: StackOptions,
    /// Give up on the load after this long (None: from the page's size, which the shell knows).
    pub timeout: Option<Duration>,
    /// Load over IPv6 (`ip = "6"`): the server's IPv6 address, and so every connection.
    pub ipv6: bool,
    /// `warm = true`: an untimed load fills the session cache, the measured one resumes.
    pub warm: bool,
    /// `discover = true` (Chromium, h3): QUIC not forced; Chromium may find it through Alt-Svc.
    pub discover: bool,
    /// `shards = N`: a built-in page's objects spread over N host names (1: none).
    #[serde(default = "one_shard")]
    pub shards: u32,
}

fn one_shard() -> u32 {
    1
}

impl PageRun {
    /// Refuses what cannot be measured; messages name the option (`fec`).
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if self.stack.fec.is_some() {
            if self.proto != Protocol::H3 {
                return Err((
                    "fec",
                    format!(
                        "FEC is quiclab's XOR FEC under QUIC: it needs h3, but this load is {}",
                        self.proto
                    ),
                ));
            }
            if self.browser == Browser::Chromium {
                return Err((
                    "fec",
                    "FEC is quiclab's own layer under quinn: Chromium's QUIC does not speak it; \
                     use the builtin loader"
                        .into(),
                ));
            }
        }
        if self.discover {
            if self.browser != Browser::Chromium || self.proto != Protocol::H3 {
                return Err((
                    "discover",
                    format!(
                        "discovery is Chromium finding HTTP/3 through Alt-Svc: it needs browser = \
                         \"chromium\" and protocol h3 (this load: {} with the {} loader)",
                        self.proto,
                        self.browser.name()
                    ),
                ));
            }
            if !self.stack.alt_svc {
                return Err((
                    "discover",
                    "discovery needs the server's alt-svc header: drop alt_svc = false".into(),
                ));
            }
        }
        if self.server != Server::Quiclab && (self.warm || self.discover) {
            return Err((
                if self.warm { "warm" } else { "discover" },
                format!(
                    "warm and discovery loads are measured against quiclab's own server so far \
                     (its session tickets, 0-RTT and Alt-Svc are known); this load's server is {}",
                    self.server.name()
                ),
            ));
        }
        if self.shards > 1 {
            let why = if self.browser != Browser::Chromium {
                Some(
                    "the built-in loader models one origin; sharding needs browser = \"chromium\""
                        .to_string(),
                )
            } else if !matches!(self.page, PageSource::Builtin(_)) {
                Some("a page directory's documents are served as they are; sharding rewrites a built-in page's index.html".to_string())
            } else if self.server != Server::Quiclab {
                Some(format!(
                    "the shards' names reach quiclab's own server (its certificate names them); this load's server is {}",
                    self.server.name()
                ))
            } else if self.discover {
                Some("a discovery run learns Alt-Svc per origin: with shards each name would learn it apart; drop one of them".to_string())
            } else {
                None
            };
            if let Some(why) = why {
                return Err(("shards", format!("{}: {why}", self.shards)));
            }
        }
        if self.warm {
            if self.discover {
                return Err((
                    "warm",
                    "a discovery run is three navigations in one browser already (the later ones \
                     warm): warm and discover do not combine"
                        .into(),
                ));
            }
            if self.stack.fec.is_some() {
                return Err((
                    "warm",
                    "a warm load with FEC would count the warm-up's FEC with the measured load's; \
                     drop one of them"
                        .into(),
                ));
            }
        }
        Ok(())
    }
}
