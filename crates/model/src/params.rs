//! A run's parameters, typed: every value parsed once, by its key's row of [`crate::keys::KEYS`].
//!
//! Scenario keys (the runner renders each value to its flag form), the commands' flags (derived
//! from the same rows) and stored runs (prepared again) all go through [`Params::set`], so a value
//! means the same wherever it is written. Errors say what the key accepts; callers say where the
//! value came from (`FILE:LINE`, or the flag). What spans keys is checked once, where the run is
//! built (`quiclab_workload::params::build`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use quiclab_flows::FlowMix;
use quiclab_link::LinkOptions;
use quiclab_proto::options::{Protocol, TlsVersion};
use quiclab_video::{AbrKind, PlayerMix, Seek, SeekCheck, SeekPolicy};

use crate::WorkloadKind;
use crate::implementation::{Client, Server};
use crate::keys::{self, Key, Parser, Side};
use crate::records::OnSwitch;

/// One key's value, as its row's parser typed it.
#[derive(Debug, Clone, PartialEq)]
pub enum Setting {
    Bool(bool),
    Duration(Duration),
    Durations(Vec<Duration>),
    Count(u64),
    Text(String),
    Protocol(Protocol),
    Tls(TlsVersion),
    Flows(FlowMix),
    Players(PlayerMix),
    Abr(AbrKind),
    Seeks(Vec<Seek>),
    SeekPolicy(SeekPolicy),
    SeekCheck(SeekCheck),
    OnSwitch(OnSwitch),
    /// An FEC group size; None: off.
    Fec(Option<u8>),
    Server(Server),
    Client(Client),
}

/// A key whose value or combination is refused, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct ParamError {
    pub key: &'static str,
    pub message: String,
}

impl std::fmt::Display for ParamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.key, self.message)
    }
}

/// Refuses `key` with `message`.
pub fn refuse(key: &'static str, message: impl Into<String>) -> ParamError {
    ParamError {
        key,
        message: message.into(),
    }
}

/// Every parameter of one run: the link's options and the typed values of the other keys.
#[derive(Debug, Clone)]
pub struct Params {
    pub kind: WorkloadKind,
    /// The link (and host) keys, through the link's own parser.
    pub link: LinkOptions,
    values: BTreeMap<&'static str, Setting>,
    /// Relative file names (a page directory, a content file, a trace) are relative to this
    /// directory (a scenario's); None: the working directory.
    pub base_dir: Option<PathBuf>,
}

impl Params {
    pub fn new(kind: WorkloadKind) -> Params {
        Params {
            kind,
            link: LinkOptions::default(),
            values: BTreeMap::new(),
            base_dir: None,
        }
    }

    /// The parameters of a run of `kind` from command-line flags (each a key's row and the value
    /// given); an error names the flag (`--rate: …`).
    pub fn from_flags<'a>(
        kind: WorkloadKind,
        given: impl IntoIterator<Item = &'a (&'static crate::keys::Key, String)>,
    ) -> Result<Params, String> {
        let mut params = Params::new(kind);
        for (k, v) in given {
            params
                .set(k.name, v)
                .map_err(|e| format!("--{}: {e}", k.flag()))?;
        }
        Ok(params)
    }

    pub fn relative_to(mut self, dir: &Path) -> Params {
        self.base_dir = Some(dir.to_path_buf());
        self
    }

    /// Parses `value` (a flag's form: `"5MB"`, `"true"`, `"h3 + h1"`) into `key`, by its row.
    /// The error says what the key accepts.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        let row = keys::find(key, self.kind).ok_or_else(|| self.unknown(key))?;
        let v = value.trim();
        match row.parser {
            Parser::Link => {
                let v = if row.path {
                    self.resolve_link_path(row.name, v)
                } else {
                    v.to_string()
                };
                self.link.set(row.name, &v)
            }
            Parser::Value(parse) => {
                let setting = parse(v, self)?;
                self.values.insert(row.name, setting);
                Ok(())
            }
        }
    }

    fn unknown(&self, key: &str) -> String {
        let known: Vec<&str> = keys::of_kind(self.kind).map(|k| k.name).collect();
        format!("unknown key {key:?}; accepted: {}", known.join(", "))
    }

    /// A file name relative to the base directory (a built-in profile name stays a name).
    pub fn resolve(&self, f: &str) -> PathBuf {
        match &self.base_dir {
            Some(dir) if Path::new(f).is_relative() => dir.join(f),
            _ => PathBuf::from(f),
        }
    }

    fn resolve_link_path(&self, key: &str, v: &str) -> String {
        if key.ends_with("profile") && quiclab_link::profile::builtin(v).is_some() {
            return v.to_string();
        }
        self.resolve(v).display().to_string()
    }

    /// The value of `key`, if it was set.
    pub fn get(&self, key: &Key) -> Option<&Setting> {
        debug_assert!(key.side != Side::Link && key.side != Side::Host);
        self.values.get(key.name)
    }

    /// Whether `key` was set.
    pub fn given(&self, key: &Key) -> bool {
        self.values.contains_key(key.name)
    }

    pub fn bool(&self, key: &Key) -> bool {
        match self.get(key) {
            None => false,
            Some(Setting::Bool(b)) => *b,
            Some(other) => mistyped(key, other),
        }
    }

    /// A boolean key that is on unless set false.
    pub fn bool_or(&self, key: &Key, default: bool) -> bool {
        match self.get(key) {
            None => default,
            Some(Setting::Bool(b)) => *b,
            Some(other) => mistyped(key, other),
        }
    }

    pub fn duration(&self, key: &Key) -> Option<Duration> {
        match self.get(key)? {
            Setting::Duration(d) => Some(*d),
            other => mistyped(key, other),
        }
    }

    pub fn durations(&self, key: &Key) -> Option<Vec<Duration>> {
        match self.get(key)? {
            Setting::Durations(d) => Some(d.clone()),
            other => mistyped(key, other),
        }
    }

    pub fn count(&self, key: &Key) -> Option<u64> {
        match self.get(key)? {
            Setting::Count(n) => Some(*n),
            other => mistyped(key, other),
        }
    }

    pub fn text(&self, key: &Key) -> Option<&str> {
        match self.get(key)? {
            Setting::Text(s) => Some(s),
            other => mistyped(key, other),
        }
    }

    pub fn protocol(&self) -> Option<Protocol> {
        match self.get(&keys::PROTOCOL)? {
            Setting::Protocol(p) => Some(*p),
            other => mistyped(&keys::PROTOCOL, other),
        }
    }

    pub fn tls(&self) -> Option<TlsVersion> {
        match self.get(&keys::TLS)? {
            Setting::Tls(t) => Some(*t),
            other => mistyped(&keys::TLS, other),
        }
    }

    pub fn fec(&self) -> Option<u8> {
        match self.get(&keys::FEC)? {
            Setting::Fec(n) => *n,
            other => mistyped(&keys::FEC, other),
        }
    }

    /// The `server` key's value (None: quiclab's own).
    pub fn server(&self) -> Option<Server> {
        match self.get(&keys::SERVER)? {
            Setting::Server(s) => Some(*s),
            other => mistyped(&keys::SERVER, other),
        }
    }

    /// The `client` key's value (None: quiclab's own).
    pub fn client(&self) -> Option<Client> {
        match self.get(&keys::CLIENT)? {
            Setting::Client(c) => Some(*c),
            other => mistyped(&keys::CLIENT, other),
        }
    }

    pub fn on_switch(&self) -> Option<OnSwitch> {
        match self.get(&keys::ON_SWITCH)? {
            Setting::OnSwitch(o) => Some(*o),
            other => mistyped(&keys::ON_SWITCH, other),
        }
    }

    pub fn flows(&self) -> Option<&FlowMix> {
        match self.get(&keys::FLOWS)? {
            Setting::Flows(m) => Some(m),
            other => mistyped(&keys::FLOWS, other),
        }
    }

    pub fn players(&self) -> Option<&PlayerMix> {
        match self.get(&keys::PLAYERS)? {
            Setting::Players(m) => Some(m),
            other => mistyped(&keys::PLAYERS, other),
        }
    }

    pub fn abr(&self) -> Option<AbrKind> {
        match self.get(&keys::ABR)? {
            Setting::Abr(a) => Some(*a),
            other => mistyped(&keys::ABR, other),
        }
    }

    pub fn seeks(&self) -> Option<&[Seek]> {
        match self.get(&keys::SEEK)? {
            Setting::Seeks(s) => Some(s),
            other => mistyped(&keys::SEEK, other),
        }
    }

    pub fn seek_policy(&self) -> Option<SeekPolicy> {
        match self.get(&keys::SEEK_POLICY)? {
            Setting::SeekPolicy(p) => Some(*p),
            other => mistyped(&keys::SEEK_POLICY, other),
        }
    }

    pub fn seek_check(&self) -> Option<SeekCheck> {
        match self.get(&keys::SEEK_CHECK)? {
            Setting::SeekCheck(c) => Some(*c),
            other => mistyped(&keys::SEEK_CHECK, other),
        }
    }

    /// The keys that were set (not the link's), in key order.
    pub fn set_keys(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.values.keys().copied()
    }
}

/// A row's parser and its accessor disagree: a defect of the table (every row's example is
/// built by a test), never of the input.
fn mistyped(key: &Key, got: &Setting) -> ! {
    panic!(
        "internal: key {} holds {got:?}, not what its accessor reads",
        key.name
    )
}

// The parsers rows use. Each says what it accepts.

pub(crate) fn boolean(v: &str, _: &Params) -> Result<Setting, String> {
    match v {
        "true" => Ok(Setting::Bool(true)),
        "false" => Ok(Setting::Bool(false)),
        _ => Err(format!("expected true or false; got {v:?}")),
    }
}

/// A duration such as 250ms, 1.5s or 2min.
pub fn duration(v: &str) -> Result<Duration, String> {
    quiclab_link::units::parse_duration(v)
        .map(Duration::from_nanos)
        .map_err(|e| e.to_string())
}

pub(crate) fn any_duration(v: &str, _: &Params) -> Result<Setting, String> {
    duration(v).map(Setting::Duration)
}

pub(crate) fn positive_duration(v: &str, _: &Params) -> Result<Setting, String> {
    let d = duration(v)?;
    if d.is_zero() {
        return Err("must be more than 0".into());
    }
    Ok(Setting::Duration(d))
}

pub(crate) fn durations(v: &str, _: &Params) -> Result<Setting, String> {
    v.split(',')
        .map(|o| duration(o.trim()))
        .collect::<Result<_, _>>()
        .map(Setting::Durations)
}

/// The largest transfer a run may ask for: 1 TB, the largest resource quiclab's servers serve;
/// past it a run could not be served, and its time limit would be centuries.
pub const MAX_SIZE: u64 = quiclab_proto::range::MAX_BYTES_RESOURCE;

/// A size such as 10MB, 500kB, 1MiB, 1000B or a byte count, from 1 B to [`MAX_SIZE`].
pub fn size(s: &str) -> Result<u64, String> {
    let n = match s.parse::<u64>() {
        Ok(n) if n > 0 => Some(n),
        _ => match quiclab_link::units::parse_queue(s) {
            Ok(quiclab_link::QueueLimit::Bytes(b)) if b > 0 => Some(b),
            _ => None,
        },
    };
    match n {
        Some(n) if n <= MAX_SIZE => Ok(n),
        Some(_) => Err(format!(
            "{s:?} is more than 1 TB (1000GB), the largest transfer quiclab serves"
        )),
        None => Err(format!(
            "expected a size such as 10MB, 500kB, 1MiB or 1000B (units B, kB, KiB, MB, MiB), at \
             most 1 TB; got {s:?}"
        )),
    }
}

pub(crate) fn size_setting(v: &str, _: &Params) -> Result<Setting, String> {
    size(v).map(Setting::Count)
}

/// A flow-control window: 1 kB to 1 GB.
pub(crate) fn window_setting(v: &str, _: &Params) -> Result<Setting, String> {
    let n = size(v)?;
    if !(1_000..=1_000_000_000).contains(&n) {
        return Err(format!("{v:?}: a window is 1kB to 1GB"));
    }
    Ok(Setting::Count(n))
}

fn whole(v: &str, min: u64, max: u64) -> Result<u64, String> {
    v.parse::<u64>()
        .ok()
        .filter(|n| (min..=max).contains(n))
        .ok_or_else(|| {
            format!("expected a whole number at least {min} and at most {max}; got {v:?}")
        })
}

pub(crate) fn at_least_one(v: &str, _: &Params) -> Result<Setting, String> {
    whole(v, 1, u64::from(u32::MAX)).map(Setting::Count)
}

pub(crate) fn parts(v: &str, _: &Params) -> Result<Setting, String> {
    whole(v, 1, 64).map(Setting::Count)
}

pub(crate) fn udp_payload(v: &str, _: &Params) -> Result<Setting, String> {
    v.parse::<u16>()
        .ok()
        .filter(|&n| n > 0)
        .map(|n| Setting::Count(u64::from(n)))
        .ok_or_else(|| {
            format!("expected a UDP payload size in bytes such as 1350 or 1452; got {v:?}")
        })
}

/// An FEC group size quiclab-fec accepts (2–64).
pub fn fec_group(s: &str) -> Result<u8, String> {
    let n: usize = s.parse().map_err(|_| {
        format!("expected a whole number N from 2 to 64 (data datagrams per parity), or 0 / off; got {s:?}")
    })?;
    quiclab_fec::check_group(n).map(|n| n as u8)
}

pub(crate) fn fec(v: &str, _: &Params) -> Result<Setting, String> {
    Ok(Setting::Fec(match v {
        "0" | "off" => None,
        _ => Some(fec_group(v)?),
    }))
}

/// QUIC's ACK frequency: acknowledge every N-th ack-eliciting packet (2–1000), or 0 / off for
/// RFC 9000's default (stored as 0).
pub(crate) fn ack_frequency(v: &str, _: &Params) -> Result<Setting, String> {
    match v {
        "0" | "off" => Ok(Setting::Count(0)),
        _ => whole(v, 2, 1000)
            .map(Setting::Count)
            .map_err(|e| format!("{e} (packets per ACK), or 0 / off")),
    }
}

pub(crate) fn protocol(v: &str, _: &Params) -> Result<Setting, String> {
    v.parse()
        .map(Setting::Protocol)
        .map_err(|e: quiclab_proto::ProtoError| e.to_string())
}

pub(crate) fn server(v: &str, _: &Params) -> Result<Setting, String> {
    Server::parse(v).map(Setting::Server)
}

pub(crate) fn client(v: &str, _: &Params) -> Result<Setting, String> {
    Client::parse(v).map(Setting::Client)
}

pub(crate) fn tls(v: &str, _: &Params) -> Result<Setting, String> {
    v.parse()
        .map(Setting::Tls)
        .map_err(|e: quiclab_proto::ProtoError| e.to_string())
}

pub(crate) fn name(v: &str, _: &Params) -> Result<Setting, String> {
    if v.is_empty() {
        return Err("expected a name".into());
    }
    Ok(Setting::Text(v.to_string()))
}

pub(crate) fn ip(v: &str, _: &Params) -> Result<Setting, String> {
    match v {
        "4" => Ok(Setting::Bool(false)),
        "6" => Ok(Setting::Bool(true)),
        _ => Err(format!("expected \"4\" (IPv4) or \"6\" (IPv6); got {v:?}")),
    }
}

pub(crate) fn on_switch(v: &str, _: &Params) -> Result<Setting, String> {
    v.parse().map(Setting::OnSwitch)
}

/// A name without a slash is a built-in page (checked now); anything else a directory (relative
/// to the scenario's), checked when the run is built.
pub(crate) fn page(v: &str, p: &Params) -> Result<Setting, String> {
    if v.contains('/') {
        return Ok(Setting::Text(p.resolve(v).display().to_string()));
    }
    if !crate::page::BUILTIN_PAGES.contains(&v) {
        return Err(format!(
            "no built-in page named {v:?} (built-in: {}); a directory is written with a slash, e.g. ./{v}, or an absolute path",
            crate::page::BUILTIN_PAGES.join(", ")
        ));
    }
    Ok(Setting::Text(v.to_string()))
}

pub(crate) fn browser(v: &str, _: &Params) -> Result<Setting, String> {
    match v {
        "builtin" | "chromium" => Ok(Setting::Text(v.to_string())),
        _ => Err(format!("expected builtin or chromium; got {v:?}")),
    }
}

pub(crate) fn flow_mix(v: &str, _: &Params) -> Result<Setting, String> {
    FlowMix::parse_joined(v)
        .map(Setting::Flows)
        .map_err(|e| e.to_string())
}

pub(crate) fn player_mix(v: &str, _: &Params) -> Result<Setting, String> {
    PlayerMix::parse_joined(v).map(Setting::Players)
}

pub(crate) fn abr(v: &str, _: &Params) -> Result<Setting, String> {
    AbrKind::parse(v).map(Setting::Abr)
}

/// A built-in content name, else a file (relative to the scenario's directory).
pub(crate) fn content(v: &str, p: &Params) -> Result<Setting, String> {
    Ok(Setting::Text(
        if quiclab_video::Content::builtin(v).is_some() {
            v.to_string()
        } else {
            p.resolve(v).display().to_string()
        },
    ))
}

pub(crate) fn seeks(v: &str, _: &Params) -> Result<Setting, String> {
    quiclab_video::parse_seeks(v).map(Setting::Seeks)
}

pub(crate) fn seek_policy(v: &str, _: &Params) -> Result<Setting, String> {
    SeekPolicy::parse(v).map(Setting::SeekPolicy)
}

pub(crate) fn seek_check(v: &str, _: &Params) -> Result<Setting, String> {
    SeekCheck::parse(v).map(Setting::SeekCheck)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_parsed_once_with_what_is_allowed() {
        let mut p = Params::new(WorkloadKind::Bulk);
        p.set("size", "1MB").unwrap();
        p.set("protocol", "h3").unwrap();
        p.set("fec", "2").unwrap();
        assert_eq!(p.fec(), Some(2));
        p.set("fec", "off").unwrap();
        assert_eq!(p.fec(), None);
        assert!(p.set("fec", "1").unwrap_err().contains("2"));
        assert!(p.set("size", "1 elephant").unwrap_err().contains("10MB"));
        assert!(
            p.set("resume", "yes")
                .unwrap_err()
                .contains("true or false")
        );
        assert!(p.set("timeout", "0s").unwrap_err().contains("more than 0"));
        p.set("rate", "10mbit").unwrap();
        assert_eq!(p.link.shared.rate, Some(10_000_000));
        let e = p.set("rtts", "1").unwrap_err();
        assert!(e.starts_with("unknown key") && e.contains("timeout"), "{e}");
        // A key of another kind is unknown here.
        assert!(
            p.set("players", "h3")
                .unwrap_err()
                .starts_with("unknown key")
        );
    }
}
