//! A workload's parameters, defined once: every key has one parser ([`Params::set`], as
//! `LinkOptions::set` is the link's) and a run is checked once ([`Params::build`]).
//!
//! Scenario keys (the runner renders each value to its flag form and calls `set`), the CLI's
//! flags (each command hands its flag values to `set` under the same key) and stored runs (their
//! parameters are prepared again the same way) all go through here, so a value means the same
//! wherever it is written. Errors name the key; callers say where it came from (`FILE:LINE`, or
//! the flag).
//!
//! Adding a key: its name in `quiclab_experiment`'s key list of the kind (what scenarios accept),
//! a field and an arm of `set` here, and its use in `build`. The test
//! `every_scenario_key_has_a_parser` fails until both agree.

use std::path::{Path, PathBuf};
use std::time::Duration;

use quiclab_experiment::WorkloadKind;
use quiclab_flows::FlowMix;
use quiclab_lab::LinkSpec;
use quiclab_proto::options::{
    FecSettings, Protocol, QUIC_MIN_UDP_PAYLOAD, QuicMtu, StackOptions, TlsVersion,
};
use quiclab_stacks::switching::OnSwitch;

use crate::WorkloadSpec;
use crate::bulk::{BulkRun, SwitchBehaviour};
use crate::child::Browser;
use crate::flows::{FlowAmount, FlowsRun};
use crate::page::{PageRun, PageSource};
use crate::video::{VideoOptions, VideoRun};

/// Keys of the protocol stack, shared by every kind (scenarios' `[protocol]`).
pub const STACK_KEYS: &[&str] = &[
    "protocol",
    "tls",
    "cc",
    "gquic_n",
    "resume",
    "zero_rtt",
    "fec",
    "ip",
    "quic_mtu",
    "quic_pmtud",
    "alt_svc",
];

/// Keys of a run that every kind takes: its time limit.
pub const RUN_KEYS: &[&str] = &["timeout"];

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

fn refuse(key: &'static str, message: impl Into<String>) -> ParamError {
    ParamError {
        key,
        message: message.into(),
    }
}

/// The protocol stack's parameters.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StackParams {
    /// h1, h2 or h3 (bulk and page; flows and video name theirs in the mix). Default h2.
    pub protocol: Option<Protocol>,
    pub tls: Option<TlsVersion>,
    /// The congestion controller of the protocol's transport, checked against it in `build`.
    pub cc: Option<String>,
    /// Connections emulated by gquic-cubic (N ≥ 1).
    pub gquic_n: Option<u32>,
    pub resume: bool,
    pub zero_rtt: bool,
    /// XOR FEC group size (2–64); None: off.
    pub fec: Option<u8>,
    /// QUIC's initial UDP payload size in bytes (None: quinn's 1452).
    pub quic_mtu: Option<u16>,
    /// PMTU discovery above `quic_mtu`.
    pub quic_pmtud: bool,
    /// `alt_svc = false`: the server does not advertise HTTP/3 (None: it does).
    pub alt_svc: Option<bool>,
}

/// How the client answers network switches (bulk and video, with a `switch` schedule).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SwitchParams {
    pub on_switch: Option<OnSwitch>,
    pub switch_timeout: Option<Duration>,
    pub migrate_delay: Option<Duration>,
}

impl SwitchParams {
    fn given(&self) -> Option<&'static str> {
        if self.on_switch.is_some() {
            Some("on_switch")
        } else if self.switch_timeout.is_some() {
            Some("switch_timeout")
        } else if self.migrate_delay.is_some() {
            Some("migrate_delay")
        } else {
            None
        }
    }

    fn behaviour(&self) -> SwitchBehaviour {
        let d = SwitchBehaviour::default();
        SwitchBehaviour {
            on_switch: self.on_switch.unwrap_or(d.on_switch),
            stall_timeout: self.switch_timeout.unwrap_or(d.stall_timeout),
            migrate_delay: self.migrate_delay.unwrap_or(d.migrate_delay),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct BulkParams {
    pub size: Option<u64>,
}

#[derive(Debug, Clone, Default)]
pub struct PageParams {
    pub page: Option<PageSource>,
    pub browser: Option<Browser>,
    pub max_streams: Option<u64>,
    pub warm: bool,
    pub discover: bool,
}

#[derive(Debug, Clone, Default)]
pub struct FlowsParams {
    pub flows: Option<FlowMix>,
    pub duration: Option<Duration>,
    pub size: Option<u64>,
    pub offsets: Option<Vec<Duration>>,
    pub bin: Option<Duration>,
    pub cutoff: Option<Duration>,
}

/// The kind's own parameters.
#[derive(Debug, Clone)]
pub enum KindParams {
    Bulk(BulkParams),
    Page(PageParams),
    Flows(FlowsParams),
    /// Video's options are checked together by [`VideoRun::from_options`] (they depend on the
    /// content); `set` checks each value's form first.
    Video(VideoOptions),
}

/// Every parameter of one run of a workload, typed.
#[derive(Debug, Clone)]
pub struct Params {
    pub stack: StackParams,
    pub switching: SwitchParams,
    /// Give up after this long (None: the workload's default from the link).
    pub timeout: Option<Duration>,
    /// `ip = "6"`: every connection of the run over IPv6 (default IPv4).
    pub ipv6: bool,
    pub kind: KindParams,
    /// Relative file names (a page directory, a content file) are relative to this directory
    /// (a scenario's); None: the working directory.
    pub base_dir: Option<PathBuf>,
}

impl Params {
    pub fn new(kind: WorkloadKind) -> Params {
        Params {
            stack: StackParams::default(),
            switching: SwitchParams::default(),
            timeout: None,
            ipv6: false,
            kind: match kind {
                WorkloadKind::Bulk => KindParams::Bulk(BulkParams::default()),
                WorkloadKind::Page => KindParams::Page(PageParams::default()),
                WorkloadKind::Flows => KindParams::Flows(FlowsParams::default()),
                WorkloadKind::Video => KindParams::Video(VideoOptions::default()),
            },
            base_dir: None,
        }
    }

    pub fn relative_to(mut self, dir: &Path) -> Params {
        self.base_dir = Some(dir.to_path_buf());
        self
    }

    pub fn workload_kind(&self) -> WorkloadKind {
        match self.kind {
            KindParams::Bulk(_) => WorkloadKind::Bulk,
            KindParams::Page(_) => WorkloadKind::Page,
            KindParams::Flows(_) => WorkloadKind::Flows,
            KindParams::Video(_) => WorkloadKind::Video,
        }
    }

    /// Every key `set` takes for this kind.
    pub fn keys(&self) -> Vec<&'static str> {
        let mut keys: Vec<&'static str> = STACK_KEYS.iter().chain(RUN_KEYS).copied().collect();
        keys.extend(self.workload_kind().keys().iter().filter(|k| **k != "kind"));
        keys
    }

    /// Parses `value` (a flag's form: `"5MB"`, `"true"`, `"h3 + h1"`) into key `key`. The error
    /// says what the key accepts.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        let v = value.trim();
        match key {
            "protocol" => {
                self.stack.protocol = Some(
                    v.parse()
                        .map_err(|e: quiclab_proto::ProtoError| e.to_string())?,
                )
            }
            "tls" => {
                self.stack.tls = Some(
                    v.parse()
                        .map_err(|e: quiclab_proto::ProtoError| e.to_string())?,
                )
            }
            "cc" => {
                if v.is_empty() {
                    return Err("expected a congestion controller name".into());
                }
                self.stack.cc = Some(v.to_string());
            }
            "gquic_n" => {
                self.stack.gquic_n =
                    Some(v.parse::<u32>().ok().filter(|&n| n >= 1).ok_or_else(|| {
                        format!("expected a whole number from 1 to {}; got {v:?}", u32::MAX)
                    })?)
            }
            "resume" => self.stack.resume = boolean(v)?,
            "zero_rtt" => self.stack.zero_rtt = boolean(v)?,
            "fec" => {
                self.stack.fec = match v {
                    "0" | "off" => None,
                    _ => Some(fec_group(v)?),
                }
            }
            "timeout" => {
                let t = duration(v)?;
                if t.is_zero() {
                    return Err("must be more than 0".into());
                }
                self.timeout = Some(t);
            }
            "ip" => {
                self.ipv6 = match v {
                    "4" => false,
                    "6" => true,
                    _ => return Err(format!("expected \"4\" (IPv4) or \"6\" (IPv6); got {v:?}")),
                }
            }
            "quic_mtu" => {
                let n = v.parse::<u16>().ok().filter(|&n| n > 0).ok_or_else(|| {
                    format!("expected a UDP payload size in bytes such as 1350 or 1452; got {v:?}")
                })?;
                self.stack.quic_mtu = Some(n);
            }
            "quic_pmtud" => self.stack.quic_pmtud = boolean(v)?,
            "alt_svc" => self.stack.alt_svc = Some(boolean(v)?),
            "on_switch" | "switch_timeout" | "migrate_delay"
                if matches!(self.kind, KindParams::Bulk(_) | KindParams::Video(_)) =>
            {
                match key {
                    "on_switch" => self.switching.on_switch = Some(v.parse()?),
                    "switch_timeout" => {
                        let t = duration(v)?;
                        if t.is_zero() {
                            return Err("must be more than 0".into());
                        }
                        self.switching.switch_timeout = Some(t);
                    }
                    _ => self.switching.migrate_delay = Some(duration(v)?),
                }
            }
            _ => {
                let base = self.base_dir.clone();
                let resolve = |f: &str| match &base {
                    Some(dir) if Path::new(f).is_relative() => dir.join(f),
                    _ => PathBuf::from(f),
                };
                let known = self.keys();
                match &mut self.kind {
                    KindParams::Bulk(b) => match key {
                        "size" => b.size = Some(size(v)?),
                        _ => return Err(unknown(key, &known)),
                    },
                    KindParams::Page(p) => match key {
                        // A name without a slash is a built-in page; anything else a directory.
                        "page" => {
                            let source = if v.contains('/') {
                                PageSource::Dir(resolve(v))
                            } else {
                                PageSource::Builtin(v.to_string())
                            };
                            source.validate()?;
                            p.page = Some(source);
                        }
                        "browser" => {
                            p.browser = Some(match v {
                                "builtin" => Browser::Builtin,
                                "chromium" => {
                                    quiclab_browser::check_chromium(Path::new(
                                        quiclab_browser::DEFAULT_CHROMIUM,
                                    ))
                                    .map_err(|e| e.to_string())?;
                                    Browser::Chromium
                                }
                                _ => {
                                    return Err(format!("expected builtin or chromium; got {v:?}"));
                                }
                            })
                        }
                        "warm" => p.warm = boolean(v)?,
                        "discover" => p.discover = boolean(v)?,
                        "max_streams" => {
                            p.max_streams = Some(
                                v.parse::<u64>()
                                    .ok()
                                    .filter(|&n| n >= 1)
                                    .ok_or_else(|| format!("expected an integer ≥ 1; got {v:?}"))?,
                            )
                        }
                        _ => return Err(unknown(key, &known)),
                    },
                    KindParams::Flows(f) => match key {
                        "flows" => {
                            f.flows = Some(FlowMix::parse_joined(v).map_err(|e| e.to_string())?)
                        }
                        "duration" => f.duration = Some(duration(v)?),
                        "size" => f.size = Some(size(v)?),
                        "offsets" => {
                            f.offsets = Some(
                                v.split(',')
                                    .map(|o| duration(o.trim()))
                                    .collect::<Result<_, _>>()?,
                            )
                        }
                        "bin" => f.bin = Some(duration(v)?),
                        "cutoff" => f.cutoff = Some(duration(v)?),
                        _ => return Err(unknown(key, &known)),
                    },
                    KindParams::Video(o) => match key {
                        "players" => o.players = v.to_string(),
                        "abr" => {
                            quiclab_video::AbrKind::parse(v)?;
                            o.abr = Some(v.to_string());
                        }
                        // A content that is not built in is a file.
                        "content" => {
                            o.content = Some(if quiclab_video::Content::builtin(v).is_some() {
                                v.to_string()
                            } else {
                                resolve(v).display().to_string()
                            })
                        }
                        "live" => o.live = boolean(v)?,
                        "seek" => {
                            quiclab_video::parse_seeks(v)?;
                            o.seek = Some(v.to_string());
                        }
                        "duration" => {
                            duration(v)?;
                            o.duration = Some(v.to_string());
                        }
                        "seek_policy" => {
                            quiclab_video::SeekPolicy::parse(v)?;
                            o.seek_policy = Some(v.to_string());
                        }
                        "buffer" => {
                            duration(v)?;
                            o.buffer = Some(v.to_string());
                        }
                        "connections" => o.connections = Some(parts(v)?),
                        "parallel" => o.parallel = Some(parts(v)?),
                        _ => return Err(unknown(key, &known)),
                    },
                }
            }
        }
        Ok(())
    }

    /// The run these parameters ask for over `link`, with every rule that spans keys checked:
    /// a refused combination names the key to change.
    pub fn build(&self, link: &LinkSpec) -> Result<WorkloadSpec, ParamError> {
        let s = &self.stack;
        let proto = s.protocol.unwrap_or(Protocol::H2);
        let mut stack = StackOptions {
            tls: s.tls,
            gquic_n: s.gquic_n.unwrap_or(StackOptions::default().gquic_n),
            ..StackOptions::default()
        };
        if let Some(cc) = &s.cc {
            stack = stack.with_cc(proto, cc).map_err(|e| refuse("cc", e))?;
        }
        stack.alt_svc = s.alt_svc.unwrap_or(true);
        // TCP runs ignore QUIC's datagram size (a grid may cross it with every protocol).
        stack.quic_mtu = QuicMtu {
            initial: s.quic_mtu.unwrap_or(stack.quic_mtu.initial),
            discover: s.quic_pmtud,
        };
        stack
            .quic_mtu
            .check(quiclab_lab::topology::LINK_MTU, self.ipv6)
            .map_err(|e| refuse("quic_mtu", e))?;
        if s.fec.is_some() {
            // The FEC header rides inside QUIC's datagram budget (see quiclab-stacks).
            let floor = QUIC_MIN_UDP_PAYLOAD + quiclab_fec::MAX_HEADER as u16;
            if stack.quic_mtu.initial < floor {
                return Err(refuse(
                    "quic_mtu",
                    format!(
                        "with FEC a datagram also carries the FEC header ({} bytes): quic_mtu must be at least {floor}",
                        quiclab_fec::MAX_HEADER
                    ),
                ));
            }
        }
        if let Some(n) = s.fec {
            if link.switch.is_some() {
                return Err(refuse(
                    "fec",
                    "FEC across network switches is not built yet (the switching client makes its own QUIC \
                     endpoints): drop fec, or the switch schedule (--switch / switch)",
                ));
            }
            // gQUIC's flush alarm: max(RTT/2, 5 ms) of the emulated path.
            stack.fec = Some(FecSettings::for_rtt(n, link.base_rtt()));
        }
        if s.zero_rtt && proto != Protocol::H3 {
            return Err(refuse(
                "zero_rtt",
                format!(
                    "0-RTT is QUIC's (quiclab's TCP stacks send no TLS early data), but this run is {proto}: \
                     use resume to compare resumed handshakes"
                ),
            ));
        }
        let kind = self.workload_kind();
        // Only the bulk and video clients answer network switches.
        if link.switch.is_none() {
            if let Some(k) = self.switching.given() {
                return Err(refuse(
                    k,
                    "it answers network switches: set a schedule with switch = \"wifi@0s,lte@60s\" (or \"arisu2019-lte\")",
                ));
            }
        } else if matches!(kind, WorkloadKind::Page | WorkloadKind::Flows) {
            return Err(ParamError {
                key: "switch",
                message: format!(
                    "network switches are answered by the bulk and video clients only; this run is kind = \"{}\"",
                    kind.name()
                ),
            });
        }
        // A bulk download or page load is one protocol's; flows and video apply FEC to their h3
        // flows and players (their own validation refuses a mix without one).
        if s.fec.is_some()
            && matches!(kind, WorkloadKind::Bulk | WorkloadKind::Page)
            && proto != Protocol::H3
        {
            return Err(refuse(
                "fec",
                format!(
                    "FEC is quiclab's XOR FEC under QUIC: it needs h3, but this run is {proto}"
                ),
            ));
        }
        if matches!(kind, WorkloadKind::Flows | WorkloadKind::Video) {
            for key in ["protocol", "cc", "resume", "zero_rtt"] {
                let given = match key {
                    "protocol" => s.protocol.is_some(),
                    "cc" => s.cc.is_some(),
                    "resume" => s.resume,
                    _ => s.zero_rtt,
                };
                if given {
                    return Err(refuse(
                        key,
                        format!(
                            "a {} run names its protocols and congestion controllers in its mix ({})",
                            kind.name(),
                            kind.contender_key()
                        ),
                    ));
                }
            }
        }
        Ok(match &self.kind {
            KindParams::Bulk(b) => {
                let size = b.size.ok_or_else(|| {
                    refuse("size", "a bulk run needs a size, e.g. size = \"5MB\"")
                })?;
                if link.switch.is_some() && (s.resume || s.zero_rtt) {
                    let key = if s.resume { "resume" } else { "zero_rtt" };
                    return Err(refuse(
                        key,
                        "across network switches, resumption is chosen by on_switch = \"reconnect-0rtt\"",
                    ));
                }
                let run = BulkRun {
                    resume: s.resume,
                    zero_rtt: s.zero_rtt,
                    stack,
                    ipv6: self.ipv6,
                    timeout: Some(
                        self.timeout
                            .unwrap_or_else(|| crate::bulk::default_timeout(size, link)),
                    ),
                    switching: self.switching.behaviour(),
                    ..BulkRun::new(proto, size)
                };
                run.validate().map_err(|e| refuse("on_switch", e))?;
                WorkloadSpec::Bulk(run)
            }
            KindParams::Page(p) => {
                if s.resume || s.zero_rtt {
                    let key = if s.resume { "resume" } else { "zero_rtt" };
                    return Err(refuse(
                        key,
                        "a page load resumes with warm = true (an untimed load first fills the \
                         session cache; h3 then sends its requests in 0-RTT)",
                    ));
                }
                let page = p.page.clone().ok_or_else(|| {
                    refuse(
                        "page",
                        "a page run needs a page, e.g. page = \"carlucci-small\"",
                    )
                })?;
                let run = PageRun {
                    proto,
                    browser: p.browser.unwrap_or(Browser::Builtin),
                    max_streams: p.max_streams,
                    stack,
                    timeout: self.timeout.unwrap_or_else(|| page.default_timeout(link)),
                    page,
                    ipv6: self.ipv6,
                    warm: p.warm,
                    discover: p.discover,
                };
                run.validate().map_err(|(k, e)| refuse(k, e))?;
                WorkloadSpec::Page(run)
            }
            KindParams::Flows(f) => {
                let mix = f.flows.clone().ok_or_else(|| {
                    refuse("flows", "a flows run needs a mix, e.g. flows = \"h3 + h1\"")
                })?;
                let amount = match (f.size, f.duration) {
                    (Some(size), None) => FlowAmount::Size(size),
                    (None, Some(d)) => FlowAmount::Duration(d),
                    (Some(_), Some(_)) => {
                        return Err(refuse(
                            "duration",
                            "give exactly one of duration and size, not both",
                        ));
                    }
                    (None, None) => {
                        return Err(refuse(
                            "duration",
                            "a flows run needs exactly one of duration and size",
                        ));
                    }
                };
                let mut run = FlowsRun::new(mix, amount);
                run.stack = stack;
                run.ipv6 = self.ipv6;
                run.timeout = self.timeout;
                run.offsets = f.offsets.clone().unwrap_or_default();
                if let Some(bin) = f.bin {
                    run.bin = bin;
                }
                run.cutoff = f.cutoff;
                run.validate().map_err(|(k, e)| refuse(k, e))?;
                WorkloadSpec::Flows(run)
            }
            KindParams::Video(o) => {
                let mut run = VideoRun::from_options(o).map_err(|(k, e)| refuse(k, e))?;
                run.stack = stack;
                run.ipv6 = self.ipv6;
                run.timeout = self.timeout;
                run.switching = self.switching.behaviour();
                run.validate().map_err(|(k, e)| refuse(k, e))?;
                WorkloadSpec::Video(run)
            }
        })
    }
}

fn unknown(key: &str, known: &[&str]) -> String {
    format!("unknown key {key:?}; accepted: {}", known.join(", "))
}

fn boolean(v: &str) -> Result<bool, String> {
    match v {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(format!("expected true or false; got {v:?}")),
    }
}

fn duration(v: &str) -> Result<Duration, String> {
    quiclab_link::units::parse_duration(v)
        .map(Duration::from_nanos)
        .map_err(|e| e.to_string())
}

fn parts(v: &str) -> Result<u32, String> {
    v.parse::<u32>()
        .ok()
        .filter(|n| (1..=64).contains(n))
        .ok_or_else(|| format!("expected a whole number at least 1 and at most 64; got {v:?}"))
}

/// A size such as 10MB, 500kB, 1MiB, 1000B or a byte count (`--size`, `size` of scenarios).
pub fn size(s: &str) -> Result<u64, String> {
    if let Ok(n) = s.parse::<u64>()
        && n > 0
    {
        return Ok(n);
    }
    match quiclab_link::units::parse_queue(s) {
        Ok(quiclab_link::QueueLimit::Bytes(b)) if b > 0 => Ok(b),
        _ => Err(format!(
            "expected a size such as 10MB, 500kB, 1MiB or 1000B (units B, kB, KiB, MB, MiB); got {s:?}"
        )),
    }
}

/// An FEC group size quiclab-fec accepts (2–64).
pub fn fec_group(s: &str) -> Result<u8, String> {
    let n: usize = s.parse().map_err(|_| {
        format!("expected a whole number N from 2 to 64 (data datagrams per parity), or 0 / off; got {s:?}")
    })?;
    quiclab_fec::check_group(n).map(|n| n as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scenario_key_has_a_parser() {
        for kind in WorkloadKind::ALL {
            let p = Params::new(kind);
            for key in p.keys() {
                let mut p = Params::new(kind);
                // Any value: what matters is that the key is known (not "unknown key").
                if let Err(e) = p.set(key, "?") {
                    assert!(!e.starts_with("unknown key"), "{kind:?} {key}: {e}");
                }
            }
            let mut p = Params::new(kind);
            let e = p.set("rtts", "1").unwrap_err();
            assert!(e.starts_with("unknown key") && e.contains("timeout"), "{e}");
        }
        // The scenario's stack keys are these.
        for key in quiclab_experiment::scenario::PROTOCOL_KEYS {
            assert!(STACK_KEYS.contains(key), "{key}");
        }
    }

    #[test]
    fn values_are_parsed_once_with_what_is_allowed() {
        let mut p = Params::new(WorkloadKind::Bulk);
        p.set("size", "1MB").unwrap();
        p.set("protocol", "h3").unwrap();
        p.set("fec", "2").unwrap();
        assert_eq!(p.stack.fec, Some(2));
        p.set("fec", "off").unwrap();
        assert_eq!(p.stack.fec, None);
        assert!(p.set("fec", "1").unwrap_err().contains("2"));
        assert!(p.set("size", "1 elephant").unwrap_err().contains("10MB"));
        assert!(
            p.set("resume", "yes")
                .unwrap_err()
                .contains("true or false")
        );
        assert!(p.set("timeout", "0s").unwrap_err().contains("more than 0"));
    }
}
