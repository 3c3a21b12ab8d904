//! Player specs (`PROTO[/K][:CC]`), mixes of players, seek lists and Range splitting.
//!
//! A player spec names its transport and how it splits a segment (the seed's §3.3.1):
//! `h1/K` = K persistent TLS/TCP connections, each segment split into K equal Range parts, one
//! per connection; `h2/K` = one connection with K parallel Range requests; `h3/K` = one QUIC
//! connection with K parallel Range requests. K defaults to 1 (whole segments, no Range). A
//! `:CC` names the congestion controller the server sends that player's segments under
//! (`h3:gquic-cubic`, `h1:bbr`); without it the run's default (CUBIC).

use quiclab_proto::options::{Protocol, QuicCongestion, StackOptions, TcpCongestion};
use serde::{Deserialize, Serialize};

/// The forms a player spec takes, for error messages.
pub const PLAYER_FORMS: &str = "PROTO, PROTO/K or either with :CC, with PROTO h1, h2 or h3 and \
                                K ≥ 1: h1/K uses K TCP connections, h2/K and h3/K K parallel \
                                Range requests on one connection; CC is the server's congestion \
                                controller for the player (h1/h2: cubic, reno, bbr; h3: cubic, \
                                newreno, bbr, gquic-cubic) (e.g. h1, h1/4, h2/2, h3:gquic-cubic)";

/// The congestion controller a player's segments are sent under (its spec's `:CC`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PlayerCc {
    Tcp(TcpCongestion),
    Quic(QuicCongestion),
}

impl PlayerCc {
    /// The controller's canonical name (`gquic-cubic`, `bbr`).
    pub fn name(&self) -> &'static str {
        match self {
            PlayerCc::Tcp(c) => c.kernel_name(),
            PlayerCc::Quic(c) => c.as_str(),
        }
    }
}

/// One player's transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlayerSpec {
    pub proto: Protocol,
    /// Range parts per segment: connections (h1) or parallel requests (h2, h3).
    pub parts: u32,
    /// The congestion controller its spec names (None: the run's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cc: Option<PlayerCc>,
}

impl PlayerSpec {
    pub fn new(proto: Protocol, parts: u32) -> Result<PlayerSpec, String> {
        if parts == 0 {
            return Err(format!("{proto}/0: K must be at least 1 ({PLAYER_FORMS})"));
        }
        if parts > 64 {
            return Err(format!("{proto}/{parts}: at most 64 parts"));
        }
        Ok(PlayerSpec {
            proto,
            parts,
            cc: None,
        })
    }

    pub fn parse(s: &str) -> Result<PlayerSpec, String> {
        let s = s.trim();
        let (s_parts, cc) = match s.split_once(':') {
            Some((head, cc)) => (head.trim(), Some(cc.trim())),
            None => (s, None),
        };
        let (p, k) = match s_parts.split_once('/') {
            Some((p, k)) => (p, Some(k)),
            None => (s_parts, None),
        };
        let proto: Protocol = p
            .trim()
            .parse()
            .map_err(|_| format!("{s:?}: unknown protocol {p:?}; expected {PLAYER_FORMS}"))?;
        let parts = match k {
            None => 1,
            Some(k) => k
                .trim()
                .parse::<u32>()
                .map_err(|_| format!("{s:?}: K must be a whole number; expected {PLAYER_FORMS}"))?,
        };
        let mut spec = PlayerSpec::new(proto, parts)?;
        if let Some(cc) = cc {
            let stack = StackOptions::default()
                .with_cc(proto, cc)
                .map_err(|e| format!("{s:?}: {e}"))?;
            spec.cc = Some(match proto {
                Protocol::H3 => PlayerCc::Quic(stack.quic_cc),
                Protocol::H1 | Protocol::H2 => PlayerCc::Tcp(stack.tcp_cc),
            });
        }
        Ok(spec)
    }

    /// `h1`, `h1/4`, `h3:gquic-cubic` (the controller only when the spec named it).
    pub fn label(&self) -> String {
        let mut l = if self.parts == 1 {
            self.proto.to_string()
        } else {
            format!("{}/{}", self.proto, self.parts)
        };
        if let Some(cc) = self.cc {
            l.push(':');
            l.push_str(cc.name());
        }
        l
    }
}

/// Players sharing one bottleneck (Figs. 8–11 of seed 004), in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlayerMix {
    pub players: Vec<PlayerSpec>,
}

impl PlayerMix {
    /// `stack` with the controllers the players name. The server sends every player of one
    /// transport (TCP for h1 and h2, QUIC for h3) under that transport's controller, so players
    /// of one transport must name the same one (a player naming none takes `stack`'s).
    pub fn stack_with_controllers(&self, stack: StackOptions) -> Result<StackOptions, String> {
        let mut out = stack;
        for quic in [false, true] {
            let of: Vec<&PlayerSpec> = self
                .players
                .iter()
                .filter(|p| (p.proto == Protocol::H3) == quic)
                .collect();
            let Some(named) = of.iter().find_map(|p| p.cc) else {
                continue;
            };
            if let Some(other) = of.iter().find(|p| p.cc != Some(named)) {
                return Err(format!(
                    "{}: the server sends every {} player under one congestion controller, and \
                     {} names {} while {} {}; give the {} players the same :CC",
                    self.label(),
                    if quic { "QUIC (h3)" } else { "TCP (h1, h2)" },
                    of.iter()
                        .find(|p| p.cc == Some(named))
                        .map_or_else(String::new, |p| p.label()),
                    named.name(),
                    other.label(),
                    other.cc.map_or_else(
                        || "names none (the run's)".to_string(),
                        |c| format!("names {}", c.name())
                    ),
                    if quic { "h3" } else { "h1 and h2" },
                ));
            }
            let proto = of[0].proto;
            out = out.with_cc(proto, named.name())?;
        }
        Ok(out)
    }

    /// Whether some player names its congestion controller.
    pub fn names_controllers(&self) -> bool {
        self.players.iter().any(|p| p.cc.is_some())
    }

    pub fn parse<S: AsRef<str>>(specs: &[S]) -> Result<PlayerMix, String> {
        if specs.is_empty() {
            return Err(format!("no players: give at least one ({PLAYER_FORMS})"));
        }
        let players = specs
            .iter()
            .map(|s| PlayerSpec::parse(s.as_ref()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(PlayerMix { players })
    }

    /// `h1 + h3` (players joined by `+`).
    pub fn parse_joined(s: &str) -> Result<PlayerMix, String> {
        PlayerMix::parse(&quiclab_proto::mix::split_joined(s)?)
    }

    /// The contender label: runs of equal players as `LABELxN`, joined by `+` (`h1`, `h1/4`,
    /// `h1+h3`, `h3x2`).
    pub fn label(&self) -> String {
        quiclab_proto::mix::label(self.players.iter().map(|m| m.label()))
    }
}

/// Parses seeks `40s:100s,150s:200s` (media times: at → to).
pub fn parse_seeks(s: &str) -> Result<Vec<crate::Seek>, String> {
    let mut out = Vec::new();
    for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (at, to) = item
            .split_once(':')
            .ok_or_else(|| format!("{item:?}: a seek is AT:TO in media time, e.g. 40s:100s"))?;
        let parse = |v: &str| {
            quiclab_link::units::parse_duration(v)
                .map(|ns| ns as f64 / 1e9)
                .map_err(|e| format!("{item:?}: {}", e.message()))
        };
        out.push(crate::Seek {
            at_s: parse(at)?,
            to_s: parse(to)?,
        });
    }
    Ok(out)
}

/// Splits `size` bytes into at most `k` contiguous inclusive ranges `(first, last)` of equal
/// size (the first ones one byte longer when it does not divide), covering every byte once.
pub fn split_ranges(size: u64, k: u32) -> Vec<(u64, u64)> {
    let k = (k.max(1) as u64).min(size.max(1));
    if size == 0 {
        return Vec::new();
    }
    let (base, extra) = (size / k, size % k);
    let mut out = Vec::with_capacity(k as usize);
    let mut first = 0;
    for i in 0..k {
        let len = base + u64::from(i < extra);
        out.push((first, first + len - 1));
        first += len;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_cover_every_byte_exactly_once() {
        for size in [1u64, 2, 7, 1000, 1_968_131, 500_001] {
            for k in 1..=13u32 {
                let r = split_ranges(size, k);
                assert_eq!(r.len() as u64, (k as u64).min(size));
                assert_eq!(r[0].0, 0);
                assert_eq!(r.last().unwrap().1, size - 1);
                for w in r.windows(2) {
                    assert_eq!(w[1].0, w[0].1 + 1, "contiguous");
                }
                let lens: Vec<u64> = r.iter().map(|(a, b)| b - a + 1).collect();
                assert_eq!(lens.iter().sum::<u64>(), size);
                assert!(lens.iter().max().unwrap() - lens.iter().min().unwrap() <= 1);
            }
        }
        assert!(split_ranges(0, 4).is_empty());
    }

    #[test]
    fn player_specs_and_mixes() {
        assert_eq!(
            PlayerSpec::parse("h1/4").unwrap(),
            PlayerSpec {
                proto: Protocol::H1,
                parts: 4,
                cc: None,
            }
        );
        assert!(
            PlayerSpec::parse("h1/0")
                .unwrap_err()
                .contains("at least 1")
        );
        assert!(
            PlayerSpec::parse("h4")
                .unwrap_err()
                .contains("unknown protocol")
        );
        assert!(
            PlayerSpec::parse("h2/x")
                .unwrap_err()
                .contains("whole number")
        );
        assert_eq!(PlayerMix::parse_joined("h1 + h3").unwrap().label(), "h1+h3");
        assert_eq!(PlayerMix::parse(&["h3", "h3"]).unwrap().label(), "h3x2");
        assert_eq!(PlayerMix::parse(&["h2/6"]).unwrap().label(), "h2/6");
    }

    #[test]
    fn a_player_names_the_controller_its_segments_are_sent_under() {
        let p = PlayerSpec::parse("h3:gquic-cubic").unwrap();
        assert_eq!(p.cc, Some(PlayerCc::Quic(QuicCongestion::GquicCubic)));
        assert_eq!(p.label(), "h3:gquic-cubic");
        let p = PlayerSpec::parse("h1/4:bbr").unwrap();
        assert_eq!(
            (p.parts, p.cc),
            (4, Some(PlayerCc::Tcp(TcpCongestion::Bbr)))
        );
        assert_eq!(p.label(), "h1/4:bbr");
        let e = PlayerSpec::parse("h1:gquic-cubic").unwrap_err();
        assert!(
            e.contains("\"h1:gquic-cubic\"") && e.contains("h1/h2: cubic, reno, bbr"),
            "{e}"
        );
        // The mix's stack: each transport under what its players name, the rest as given.
        let mix = PlayerMix::parse_joined("h1 + h3:gquic-cubic").unwrap();
        assert_eq!(mix.label(), "h1+h3:gquic-cubic");
        let stack = mix.stack_with_controllers(StackOptions::default()).unwrap();
        assert_eq!(stack.quic_cc, QuicCongestion::GquicCubic);
        assert_eq!(stack.tcp_cc, StackOptions::default().tcp_cc);
        let stack = PlayerMix::parse_joined("h1:bbr + h2:bbr")
            .unwrap()
            .stack_with_controllers(StackOptions::default())
            .unwrap();
        assert_eq!(stack.tcp_cc, TcpCongestion::Bbr);
        // Players of one transport share the server's controller: differing ones are refused.
        for bad in ["h3 + h3:bbr", "h3:bbr + h3:cubic", "h1:bbr + h2"] {
            let e = PlayerMix::parse_joined(bad)
                .unwrap()
                .stack_with_controllers(StackOptions::default())
                .unwrap_err();
            assert!(e.contains("one congestion controller"), "{bad}: {e}");
        }
        assert!(
            !PlayerMix::parse_joined("h1 + h3")
                .unwrap()
                .names_controllers()
        );
    }

    #[test]
    fn seeks_parse_in_media_time() {
        let s = parse_seeks("40s:100s, 150s:200s").unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!((s[1].at_s, s[1].to_s), (150.0, 200.0));
        assert!(parse_seeks("40s").unwrap_err().contains("AT:TO"));
        assert!(parse_seeks("40:100s").is_err());
    }
}
