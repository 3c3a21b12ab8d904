//! The link options every lab command and scenario shares, as plain values.
//!
//! `quiclab shell|bulk|page|calibrate …` take them as flags (`--rate 10mbit`, `--down-loss 1%`),
//! scenario files as keys (`rate = "10mbit"` in `[link]` or `[grid]`): both end here. A value is
//! parsed once, by [`LinkOptions::set`] with this crate's own parsers, and the options become a
//! [`LinkSpec`] in [`LinkOptions::to_spec`]. Plain flags set both directions; `up-*`/`down-*`
//! override one.
//!
//! The scheduler and lab settings (`spin`, `batch-window`, `steering`, …) ride along because every
//! lab command takes them together with the link; they do not change the link's model.

use std::path::PathBuf;
use std::sync::Arc;

use crate::aqm::DisciplineSpec;
use crate::spec::{DirectionSpec, LinkSpec};
use crate::{LossSpec, Nanos, QueueLimit, RateSpec, units};

/// Half the median RTT of a zero-delay link measured by `quiclab bench link` on the reference
/// machine (0.126 ms, 2 vCPU Firecracker VM, kernel 6.18): the TUN → emulator → TUN path adds this
/// much one-way latency on its own.
pub const DEFAULT_TUN_COMPENSATION: Nanos = 63_000;

/// How long a reordered packet is held back when `--reorder-delay` is not given (10 ms: at
/// the seeds' rates many packets overtake it, as netem's `reorder` with a 10 ms delay).
pub const DEFAULT_REORDER_DELAY: Nanos = 10_000_000;

/// Default coalescing window of TUN offload (`--offload-window`): segments due within 200 µs
/// after a due one leave with it, so each is at most that early (mean about half). The order of
/// a 1–10 Gbit/s NIC's interrupt moderation, which batches a receiver's packets over 50–125 µs or
/// more. Each wake-up of the emulator (a VM exit on this class of host) is its largest cost left:
/// at 1 Gbit/s, measured 2026-11-25 over 5 interleaved runs each, 100 µs took 55–61 % of a core,
/// 150 µs 50.3–50.5 %, 200 µs 46.3–47.5 %; at 250 Mbit/s 200 µs took 42–44 % (docs/link.md).
pub const DEFAULT_OFFLOAD_WINDOW: Nanos = 200_000;

/// `--steering auto` turns receive steering on for links this fast (see
/// `LinkSpec::wants_receive_steering`).
pub const STEERING_THRESHOLD_BPS: f64 = 400e6;

/// `--offload auto` turns TUN offload on for links this fast (see `LinkSpec::wants_offload`).
pub const OFFLOAD_THRESHOLD_BPS: f64 = 200e6;

/// A lab feature that pays off only on fast links: `on`, `off`, or `auto` = only for links fast
/// enough ([`LinkSpec::wants_receive_steering`], [`LinkSpec::wants_offload`]), so slower links
/// keep the simple, strictly per-packet path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FastLinkChoice {
    #[default]
    Auto,
    On,
    Off,
}

impl FastLinkChoice {
    /// Resolves the choice; `auto` is what `auto` gives for the link at hand.
    pub fn resolve(self, auto: bool) -> bool {
        match self {
            FastLinkChoice::On => true,
            FastLinkChoice::Off => false,
            FastLinkChoice::Auto => auto,
        }
    }
}

impl std::str::FromStr for FastLinkChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(FastLinkChoice::Auto),
            "on" => Ok(FastLinkChoice::On),
            "off" => Ok(FastLinkChoice::Off),
            _ => Err(format!("expected auto, on or off; got {s:?}")),
        }
    }
}

/// Whether the receiving kernels' processing is steered to other CPUs (see `LabOptions`).
pub type Steering = FastLinkChoice;

/// Whether the TUN devices use offload: the kernels hand the emulator TSO/USO super-packets
/// (split into MTU packets for the model) and take back coalesced GSO writes (see
/// `LabOptions::offload`).
pub type Offload = FastLinkChoice;

/// The rate choice of one direction (or of both): at most one of these.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RateChoice {
    /// Bits per second; 0 = unlimited.
    pub rate: Option<u64>,
    /// A Mahimahi packet-delivery trace.
    pub trace: Option<PathBuf>,
    /// A built-in profile name or a profile file.
    pub profile: Option<String>,
}

impl RateChoice {
    fn given(&self) -> usize {
        usize::from(self.rate.is_some())
            + usize::from(self.trace.is_some())
            + usize::from(self.profile.is_some())
    }
}

/// What a lab command or a scenario run asked of the link (and of the lab's scheduler).
#[derive(Debug, Clone, PartialEq)]
pub struct LinkOptions {
    pub shared: RateChoice,
    pub up: RateChoice,
    pub down: RateChoice,
    pub delay: Option<Nanos>,
    pub rtt: Option<Nanos>,
    pub up_delay: Option<Nanos>,
    pub down_delay: Option<Nanos>,
    pub loss: Option<LossSpec>,
    pub up_loss: Option<LossSpec>,
    pub down_loss: Option<LossSpec>,
    pub queue: Option<QueueLimit>,
    pub up_queue: Option<QueueLimit>,
    pub down_queue: Option<QueueLimit>,
    /// The queue discipline of both directions (`--queue-discipline`, scenario `queue-discipline`), and of one.
    pub queue_discipline: Option<DisciplineSpec>,
    pub up_queue_discipline: Option<DisciplineSpec>,
    pub down_queue_discipline: Option<DisciplineSpec>,
    /// Disciplines mark ECN-capable packets CE instead of dropping them (`--ecn`).
    pub ecn: bool,
    /// Jitter and reordering of both directions (`--jitter`, `--reorder`, `--reorder-delay`).
    pub jitter: Option<Nanos>,
    pub reorder: Option<f64>,
    pub reorder_delay: Option<Nanos>,
    /// Network switch schedule (`wifi@0s,lte@60s,…` or a named one): see [`crate::switch`].
    pub switch: Option<String>,
    /// Outage after each switch (default 0).
    pub switch_gap: Option<Nanos>,
    /// Seed of the random-loss processes.
    pub seed: u64,
    /// `None`: [`DEFAULT_TUN_COMPENSATION`].
    pub tun_compensation: Option<Nanos>,
    /// Scheduler: SCHED_FIFO unless false.
    pub realtime: bool,
    /// Scheduler: spin this long before each release.
    pub spin: Nanos,
    /// Scheduler: release packets due within this window together.
    pub batch_window: Nanos,
    /// Scheduler: longest sleep within 2 ms of a release (0 = sleep straight to it).
    pub nap: Nanos,
    pub steering: Steering,
    /// TUN offload (TSO/USO reads, coalesced GSO writes).
    pub offload: Offload,
    /// With offload: segments due within this window after a due one are written with it, as one
    /// coalesced packet per flow when they are contiguous (0 = every segment written on its own).
    pub offload_window: Nanos,
    /// Default TCP congestion control inside the lab's namespaces.
    pub tcp_cc: String,
    /// The lab's kernels restart TCP's slow start after an idle period
    /// (`tcp-slow-start-after-idle`; the kernel's default, true).
    pub tcp_slow_start_after_idle: bool,
    /// The lab's kernels detect losses with RACK (`tcp-rack`, `net.ipv4.tcp_recovery = 1`, the
    /// default since Linux 4.4) or, false, by duplicate ACKs alone as 2015's kernels did.
    pub tcp_rack: bool,
    /// The lab's kernels' TCP receive and send buffers (`tcp-rmem`, `tcp-wmem`: min, default and
    /// max bytes, as the sysctls write them; None: the kernel's own).
    pub tcp_rmem: Option<[u64; 3]>,
    pub tcp_wmem: Option<[u64; 3]>,
    /// The share of one core the client's (`client-cpu`) and the server's (`server-cpu`)
    /// processes may use together, 0.01–1; None: no limit.
    pub client_cpu: Option<f64>,
    pub server_cpu: Option<f64>,
}

impl Default for LinkOptions {
    fn default() -> Self {
        LinkOptions {
            shared: RateChoice::default(),
            up: RateChoice::default(),
            down: RateChoice::default(),
            delay: None,
            rtt: None,
            up_delay: None,
            down_delay: None,
            loss: None,
            up_loss: None,
            down_loss: None,
            queue: None,
            up_queue: None,
            down_queue: None,
            queue_discipline: None,
            up_queue_discipline: None,
            down_queue_discipline: None,
            ecn: false,
            jitter: None,
            reorder: None,
            reorder_delay: None,
            switch: None,
            switch_gap: None,
            seed: 1,
            tun_compensation: None,
            realtime: true,
            spin: 10_000,
            batch_window: 0,
            nap: 50_000,
            steering: Steering::Auto,
            offload: Offload::Auto,
            offload_window: DEFAULT_OFFLOAD_WINDOW,
            tcp_cc: "cubic".into(),
            tcp_slow_start_after_idle: true,
            tcp_rack: true,
            tcp_rmem: None,
            tcp_wmem: None,
            client_cpu: None,
            server_cpu: None,
        }
    }
}

/// `25%` or `0.25`: a share of one core, 1 % to 100 %; `unlimited`: no limit (None), the
/// default, so a grid can set a limit beside its control.
pub fn cpu_share(value: &str) -> Result<Option<f64>, String> {
    let expected = || {
        format!(
            "expected a share of one core from 1% to 100%, e.g. 25% or 0.25, or unlimited; got \
             {value:?}"
        )
    };
    if value.eq_ignore_ascii_case("unlimited") {
        return Ok(None);
    }
    let share = match value.strip_suffix('%') {
        Some(pct) => pct.trim().parse::<f64>().map_err(|_| expected())? / 100.0,
        None => value.trim().parse::<f64>().map_err(|_| expected())?,
    };
    if !(0.01..=1.0).contains(&share) {
        return Err(expected());
    }
    Ok(Some(share))
}

/// `4096 87380 6291456` (or with commas): a TCP buffer sysctl's min, default and max bytes,
/// each 1 kB to 1 GB except min (from 1 byte), in order.
pub fn tcp_buffers(value: &str) -> Result<[u64; 3], String> {
    let expected = || {
        format!(
            "expected MIN DEFAULT MAX in bytes, e.g. \"4096 87380 6291456\" (Linux 2016's \
             tcp_rmem); got {value:?}"
        )
    };
    let parts: Vec<u64> = value
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|p| !p.is_empty())
        .map(|p| p.parse::<u64>().map_err(|_| expected()))
        .collect::<Result<_, _>>()?;
    let [min, default, max] = parts[..] else {
        return Err(expected());
    };
    if !(min >= 1 && min <= default && default <= max) {
        return Err(format!(
            "{}: they must grow: min ≤ default ≤ max",
            expected()
        ));
    }
    if !(1_000..=1_000_000_000).contains(&max) {
        return Err(format!("{}: max must be 1 kB to 1 GB", expected()));
    }
    Ok([min, default, max])
}

fn boolean(value: &str) -> Result<bool, String> {
    match value {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(format!("expected true or false; got {value:?}")),
    }
}

/// Parses a rate value; `unlimited` is 0.
pub fn parse_rate_or_unlimited(s: &str) -> Result<u64, String> {
    if s.eq_ignore_ascii_case("unlimited") {
        return Ok(0);
    }
    units::parse_rate(s).map_err(|e| e.to_string())
}

impl LinkOptions {
    /// Sets one option by its key (a link or host key of quiclab-model's key table) from its text, with the parser the flag of
    /// the same name uses. The error says what is accepted; the caller names the key and where
    /// it came from.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        let dur = |s: &str| units::parse_duration(s).map_err(|e| e.to_string());
        let loss = |s: &str| units::parse_loss(s).map_err(|e| e.to_string());
        let queue = |s: &str| units::parse_queue(s).map_err(|e| e.to_string());
        let discipline = |s: &str| DisciplineSpec::parse(s);
        match key {
            "rate" => self.shared.rate = Some(parse_rate_or_unlimited(value)?),
            "up-rate" => self.up.rate = Some(parse_rate_or_unlimited(value)?),
            "down-rate" => self.down.rate = Some(parse_rate_or_unlimited(value)?),
            "trace" => self.shared.trace = Some(PathBuf::from(value)),
            "up-trace" => self.up.trace = Some(PathBuf::from(value)),
            "down-trace" => self.down.trace = Some(PathBuf::from(value)),
            "profile" => self.shared.profile = Some(value.to_string()),
            "up-profile" => self.up.profile = Some(value.to_string()),
            "down-profile" => self.down.profile = Some(value.to_string()),
            "delay" => self.delay = Some(dur(value)?),
            "rtt" => self.rtt = Some(dur(value)?),
            "up-delay" => self.up_delay = Some(dur(value)?),
            "down-delay" => self.down_delay = Some(dur(value)?),
            "loss" => self.loss = Some(loss(value)?),
            "up-loss" => self.up_loss = Some(loss(value)?),
            "down-loss" => self.down_loss = Some(loss(value)?),
            "queue" => self.queue = Some(queue(value)?),
            "up-queue" => self.up_queue = Some(queue(value)?),
            "down-queue" => self.down_queue = Some(queue(value)?),
            "queue-discipline" => self.queue_discipline = Some(discipline(value)?),
            "up-queue-discipline" => self.up_queue_discipline = Some(discipline(value)?),
            "down-queue-discipline" => self.down_queue_discipline = Some(discipline(value)?),
            "ecn" => self.ecn = boolean(value)?,
            "jitter" => self.jitter = Some(dur(value)?),
            "reorder" => {
                self.reorder = Some(units::parse_probability(value).map_err(|e| e.to_string())?)
            }
            "reorder-delay" => self.reorder_delay = Some(dur(value)?),
            "tcp-slow-start-after-idle" => self.tcp_slow_start_after_idle = boolean(value)?,
            "tcp-rack" => self.tcp_rack = boolean(value)?,
            "tcp-rmem" => self.tcp_rmem = Some(tcp_buffers(value)?),
            "tcp-wmem" => self.tcp_wmem = Some(tcp_buffers(value)?),
            "client-cpu" => self.client_cpu = cpu_share(value)?,
            "server-cpu" => self.server_cpu = cpu_share(value)?,
            "switch" => {
                // Checked now, so that a bad schedule is refused where it was written.
                crate::switch::SwitchSchedule::parse(value, 0).map_err(|e| e.to_string())?;
                self.switch = Some(value.to_string())
            }
            "switch-gap" => self.switch_gap = Some(dur(value)?),
            "seed" => {
                self.seed = value.parse().map_err(|_| {
                    format!(
                        "expected a whole number from 0 to {}; got {value:?}",
                        u64::MAX
                    )
                })?
            }
            // How this host runs the emulator (flags only; quiclab-model's key table says so).
            "tun-compensation" => self.tun_compensation = Some(dur(value)?),
            "realtime" => self.realtime = boolean(value)?,
            "spin" => self.spin = dur(value)?,
            "batch-window" => self.batch_window = dur(value)?,
            "nap" => self.nap = dur(value)?,
            "steering" => self.steering = value.parse()?,
            "offload" => self.offload = value.parse()?,
            "offload-window" => self.offload_window = dur(value)?,
            "tcp-cc" => {
                if !["cubic", "reno", "bbr"].contains(&value) {
                    return Err(format!("expected cubic, reno or bbr; got {value:?}"));
                }
                self.tcp_cc = value.to_string()
            }
            _ => return Err(format!("{key:?} is not a link option")),
        }
        Ok(())
    }

    /// Builds the link, applying per-direction overrides over the shared options. Errors name the
    /// flag (`--up-rate`, …) the user actually typed.
    /// The link these options ask for; a trace or profile file is read through `read`.
    pub fn to_spec(&self, read: crate::input::ReadText) -> Result<LinkSpec, String> {
        if let Some(text) = &self.switch {
            return self.switch_spec(text);
        }
        if self.switch_gap.is_some() {
            return Err(
                "--switch-gap is the outage after each network switch: it needs --switch".into(),
            );
        }
        if self.delay.is_some() && self.rtt.is_some() {
            return Err(
                "--delay and --rtt are alternatives (--rtt 50ms = --delay 25ms): give one".into(),
            );
        }
        let half_rtt = self.rtt.map(|r| r / 2);
        let shared_delay = self.delay.or(half_rtt);
        let direction = |prefix: &'static str,
                         own: &RateChoice,
                         delay: Option<Nanos>,
                         loss: Option<LossSpec>,
                         queue: Option<QueueLimit>|
         -> Result<DirectionSpec, String> {
            // A per-direction trace/profile/rate replaces the shared choice entirely.
            let (prefix, choice) = if own.given() > 0 {
                (prefix, own)
            } else {
                ("", &self.shared)
            };
            if choice.given() > 1 {
                return Err(format!(
                    "--{prefix}rate, --{prefix}trace and --{prefix}profile are alternatives: give one"
                ));
            }
            build_direction(prefix, choice, delay, loss, queue, read)
        };
        let uplink = direction(
            "up-",
            &self.up,
            self.up_delay.or(shared_delay),
            self.up_loss.or(self.loss),
            self.up_queue.or(self.queue),
        )?;
        let downlink = direction(
            "down-",
            &self.down,
            self.down_delay.or(shared_delay),
            self.down_loss.or(self.loss),
            self.down_queue.or(self.queue),
        )?;
        let (uplink, downlink) = self.with_disciplines(uplink, downlink)?;
        let base_rtt = uplink.base_delay() + downlink.base_delay();
        for (name, d, explicit) in [
            ("up", &uplink, self.up_queue.or(self.queue).is_some()),
            ("down", &downlink, self.down_queue.or(self.queue).is_some()),
        ] {
            if base_rtt == 0 && matches!(d.queue, QueueLimit::Bdp(_)) {
                return Err(format!(
                    "the {name}link queue is {} (a bandwidth-delay product) but the link has no delay, so it would hold 0 bytes: \
                     give a delay (--rtt 50ms, --delay 25ms) or a queue in bytes or packets (--queue 64kB, --queue 100pkt)",
                    if explicit {
                        "given in bdp"
                    } else {
                        "1bdp by default"
                    }
                ));
            }
        }
        Ok(LinkSpec {
            uplink,
            downlink,
            seed: self.seed,
            switch: None,
            tun_compensation: self.tun_compensation.unwrap_or(DEFAULT_TUN_COMPENSATION),
        })
    }

    /// What a user should hear about options that are allowed but do less than they may think:
    /// `--ecn` with tail drop marks nothing.
    pub fn notes(&self, spec: &LinkSpec) -> Vec<String> {
        let mut notes = Vec::new();
        if self.ecn && !spec.ecn() {
            notes.push(
                "--ecn with tail drop marks nothing (tail drop can only drop); give \
                 --queue-discipline codel, fq-codel or pie"
                    .into(),
            );
        }
        notes
    }

    /// Sets each direction's queue discipline (per-direction flags over the shared one) with ECN
    /// as asked. A discipline needs a rate to queue behind; `--ecn` with tail drop is allowed and
    /// marks nothing (the fidelity report says `droptail`), as the issue asks.
    fn with_disciplines(
        &self,
        mut uplink: DirectionSpec,
        mut downlink: DirectionSpec,
    ) -> Result<(DirectionSpec, DirectionSpec), String> {
        for (prefix, side, d, own) in [
            ("up-", "uplink", &mut uplink, self.up_queue_discipline),
            (
                "down-",
                "downlink",
                &mut downlink,
                self.down_queue_discipline,
            ),
        ] {
            let (flag, choice) = match own {
                Some(c) => (format!("--{prefix}queue-discipline"), Some(c)),
                None => ("--queue-discipline".to_string(), self.queue_discipline),
            };
            let Some(choice) = choice else { continue };
            if choice != DisciplineSpec::DropTail && matches!(d.rate, RateSpec::Unlimited) {
                return Err(format!(
                    "{flag} {}: the {side} has no rate, so nothing ever queues; give a rate \
                     (--rate 10mbit)",
                    choice.name()
                ));
            }
            choice.validate().map_err(|e| format!("{flag}: {e}"))?;
            d.discipline = choice;
        }
        let variation = crate::variation::Variation {
            jitter: self.jitter.unwrap_or(0),
            reorder: self.reorder.unwrap_or(0.0),
            reorder_delay: self.reorder_delay.unwrap_or(DEFAULT_REORDER_DELAY),
        };
        if self.reorder_delay.is_some() && variation.reorder == 0.0 {
            return Err(
                "--reorder-delay is how long a reordered packet is held back: it needs \
                        --reorder"
                    .into(),
            );
        }
        variation
            .validate()
            .map_err(|e| format!("--jitter/--reorder: {e}"))?;
        for d in [&mut uplink, &mut downlink] {
            d.discipline = d.discipline.with_ecn(self.ecn);
            d.variation = variation;
        }
        if self.ecn && self.offload == Offload::On {
            return Err(
                "--ecn marks single packets' headers, which TUN offload's super-packets share: \
                 use --offload auto (off with --ecn) or off"
                    .into(),
            );
        }
        Ok((uplink, downlink))
    }

    /// A link that follows a switch schedule: each network's rate and delay both ways, the
    /// queue and any extra random loss as given.
    fn switch_spec(&self, text: &str) -> Result<LinkSpec, String> {
        let schedule = crate::switch::SwitchSchedule::parse(text, self.switch_gap.unwrap_or(0))
            .map_err(|e| format!("--switch: {e}"))?;
        let mut given: Vec<&str> = Vec::new();
        for (name, choice) in [("", &self.shared), ("up-", &self.up), ("down-", &self.down)] {
            if choice.given() > 0 {
                given.push(match name {
                    "up-" => "--up-rate/--up-trace/--up-profile",
                    "down-" => "--down-rate/--down-trace/--down-profile",
                    _ => "--rate/--trace/--profile",
                });
            }
        }
        for (flag, set) in [
            ("--delay", self.delay.is_some()),
            ("--rtt", self.rtt.is_some()),
            ("--up-delay", self.up_delay.is_some()),
            ("--down-delay", self.down_delay.is_some()),
        ] {
            if set {
                given.push(flag);
            }
        }
        if !given.is_empty() {
            return Err(format!(
                "--switch sets each network's rate and delay (seed 004's presets); drop {}",
                given.join(", ")
            ));
        }
        let profile = Arc::new(schedule.profile());
        let direction = |loss: Option<LossSpec>, queue: Option<QueueLimit>| DirectionSpec {
            rate: RateSpec::Profile(profile.clone()),
            rate_label: format!("switch {}", schedule.text),
            delay: 0,
            loss: loss.unwrap_or(LossSpec::None),
            queue: queue.unwrap_or(QueueLimit::Bdp(1.0)),
            discipline: DisciplineSpec::DropTail,
            variation: Default::default(),
        };
        let (uplink, downlink) = self.with_disciplines(
            direction(self.up_loss.or(self.loss), self.up_queue.or(self.queue)),
            direction(self.down_loss.or(self.loss), self.down_queue.or(self.queue)),
        )?;
        Ok(LinkSpec {
            uplink,
            downlink,
            seed: self.seed,
            switch: Some(schedule),
            tun_compensation: self.tun_compensation.unwrap_or(DEFAULT_TUN_COMPENSATION),
        })
    }
}

fn load_profile(s: &str, read: crate::input::ReadText) -> Result<Arc<crate::Profile>, String> {
    if let Some(p) = crate::profile::builtin(s) {
        return Ok(Arc::new(p));
    }
    let path = PathBuf::from(s);
    if s.eq_ignore_ascii_case("fcc") {
        // Named by seed 004 but not shipped: `builtin_or_load` says why.
        return crate::profile::builtin_or_load(s, read)
            .map(Arc::new)
            .map_err(|e| e.to_string());
    }
    // A missing file reads as an unknown name: a profile is a built-in name or a file.
    let text = match read(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!(
                "no built-in profile named {s:?} and no such file (built-in: {})",
                crate::profile::builtin_names().join(", ")
            ));
        }
        other => other,
    };
    crate::profile::load(&path, &|_| {
        text.as_ref().map(String::clone).map_err(copy_error)
    })
    .map(Arc::new)
    .map_err(|e| e.to_string())
}

/// The same error again (`io::Error` is not `Clone`).
fn copy_error(e: &std::io::Error) -> std::io::Error {
    std::io::Error::new(e.kind(), e.to_string())
}

fn build_direction(
    flag: &str,
    choice: &RateChoice,
    delay: Option<Nanos>,
    loss: Option<LossSpec>,
    queue: Option<QueueLimit>,
    read: crate::input::ReadText,
) -> Result<DirectionSpec, String> {
    let mut d = DirectionSpec::default();
    if let Some(bps) = choice.rate {
        if bps > 0 {
            d.rate = RateSpec::Constant { bps };
            d.rate_label = units::format_rate(bps);
        }
    } else if let Some(path) = &choice.trace {
        let t =
            crate::DeliveryTrace::load(path, read).map_err(|e| format!("--{flag}trace: {e}"))?;
        d.rate_label = format!(
            "trace {} (mean {})",
            path.display(),
            units::format_rate(t.mean_rate_bps() as u64)
        );
        d.rate = RateSpec::Trace(Arc::new(t));
    } else if let Some(p) = &choice.profile {
        let prof = load_profile(p, read).map_err(|e| format!("--{flag}profile: {e}"))?;
        d.rate_label = format!("profile {}", prof.name);
        d.rate = RateSpec::Profile(prof);
    }
    if let Some(delay) = delay {
        d.delay = delay;
    }
    if let Some(loss) = loss {
        d.loss = loss;
    }
    if let Some(q) = queue {
        d.queue = q;
    }
    if matches!(d.rate, RateSpec::Unlimited) && matches!(d.queue, QueueLimit::Bdp(_)) {
        // Without a bottleneck there is no queue to size.
        d.queue = QueueLimit::Unlimited;
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(pairs: &[(&str, &str)]) -> Result<LinkSpec, String> {
        let mut o = LinkOptions::default();
        for (k, v) in pairs {
            o.set(k, v).map_err(|e| format!("--{k}: {e}"))?;
        }
        o.to_spec(&crate::input::fs)
    }

    #[test]
    fn a_cpu_share_is_a_percentage_or_a_fraction_of_one_core() {
        assert_eq!(cpu_share("25%"), Ok(Some(0.25)));
        assert_eq!(cpu_share("0.1"), Ok(Some(0.1)));
        assert_eq!(cpu_share("100%"), Ok(Some(1.0)));
        assert_eq!(cpu_share("unlimited"), Ok(None));
        for bad in ["0%", "0", "0.5%", "150%", "2", "fast", ""] {
            let e = cpu_share(bad).unwrap_err();
            assert!(e.contains("1% to 100%"), "{bad}: {e}");
        }
        let mut o = LinkOptions::default();
        o.set("client-cpu", "20%").unwrap();
        o.set("server-cpu", "0.5").unwrap();
        assert_eq!((o.client_cpu, o.server_cpu), (Some(0.2), Some(0.5)));
    }

    #[test]
    fn rtt_is_split_equally_and_options_apply_to_both_directions() {
        let s = spec(&[("rate", "10mbit"), ("rtt", "50ms"), ("loss", "2%")]).unwrap();
        for d in [&s.uplink, &s.downlink] {
            assert_eq!(d.delay, 25_000_000);
            assert_eq!(d.constant_rate_bps(), Some(10_000_000));
            assert_eq!(d.loss, LossSpec::Bernoulli(0.02));
            assert_eq!(d.queue, QueueLimit::Bdp(1.0));
        }
        assert_eq!(s.base_rtt(), 50_000_000);
        assert_eq!(s.tun_compensation, DEFAULT_TUN_COMPENSATION);
    }

    #[test]
    fn per_direction_options_override_the_shared_ones() {
        let s = spec(&[
            ("rate", "10mbit"),
            ("up-rate", "1mbit"),
            ("delay", "10ms"),
            ("down-delay", "40ms"),
            ("down-loss", "0.5%"),
            ("up-queue", "20pkt"),
        ])
        .unwrap();
        assert_eq!(s.uplink.constant_rate_bps(), Some(1_000_000));
        assert_eq!(s.downlink.constant_rate_bps(), Some(10_000_000));
        assert_eq!((s.uplink.delay, s.downlink.delay), (10_000_000, 40_000_000));
        assert_eq!(s.uplink.loss, LossSpec::None);
        assert_eq!(s.downlink.loss, LossSpec::Bernoulli(0.005));
        assert_eq!(s.uplink.queue, QueueLimit::Packets(20));
        assert_eq!(s.downlink.queue, QueueLimit::Bdp(1.0));
    }

    #[test]
    fn a_switch_schedule_drives_both_directions_and_refuses_other_rates() {
        let s = spec(&[
            ("switch", "arisu2019-lte"),
            ("switch-gap", "1s"),
            ("queue", "64kB"),
        ])
        .unwrap();
        let sched = s.switch.as_ref().unwrap();
        assert_eq!(sched.switches().len(), 6);
        assert_eq!(sched.gap, crate::NANOS_PER_SEC);
        for d in [&s.uplink, &s.downlink] {
            assert!(
                d.rate_label.starts_with("switch wifi@0s,lte@60s"),
                "{}",
                d.rate_label
            );
            let RateSpec::Profile(p) = &d.rate else {
                panic!("not a profile")
            };
            // WiFi first, LTE from 61 s (after the 1 s outage).
            assert_eq!(p.step_at(0).rate_bps, Some(5_900_000));
            assert_eq!(p.step_at(60_500 * NANOS_PER_MS_T).loss, 1.0);
            assert_eq!(p.step_at(61_000 * NANOS_PER_MS_T).rate_bps, Some(5_400_000));
            assert_eq!(d.queue, QueueLimit::Bytes(64_000));
        }
        let e = spec(&[
            ("switch", "wifi@0s,lte@60s"),
            ("rate", "10mbit"),
            ("rtt", "50ms"),
        ])
        .unwrap_err();
        assert!(
            e.contains("--switch sets") && e.contains("--rate") && e.contains("--rtt"),
            "{e}"
        );
        let e = spec(&[("switch", "wifi@0s,lte@30s,wifi@10s")]).unwrap_err();
        assert!(
            e.starts_with("--switch:") && e.contains("times must increase"),
            "{e}"
        );
        let e = spec(&[("switch-gap", "1s"), ("rate", "1mbit"), ("rtt", "10ms")]).unwrap_err();
        assert!(e.contains("needs --switch"), "{e}");
    }

    const NANOS_PER_MS_T: u64 = crate::NANOS_PER_MS;

    #[test]
    fn a_direction_profile_replaces_the_shared_rate() {
        let s = spec(&[
            ("rate", "10mbit"),
            ("down-profile", "np2b-typical"),
            ("rtt", "20ms"),
        ])
        .unwrap();
        assert_eq!(s.uplink.constant_rate_bps(), Some(10_000_000));
        assert!(s.downlink.is_time_varying());
        assert!(s.downlink.rate_label.contains("np2b-typical"));
    }

    #[test]
    fn unlimited_rate_has_no_queue_and_needs_no_delay() {
        let s = spec(&[]).unwrap();
        assert!(matches!(s.uplink.rate, RateSpec::Unlimited));
        assert_eq!(s.uplink.queue, QueueLimit::Unlimited);
        let s = spec(&[("rate", "unlimited")]).unwrap();
        assert!(matches!(s.downlink.rate, RateSpec::Unlimited));
    }

    #[test]
    fn errors_name_the_option_and_what_is_accepted() {
        let e = spec(&[("rate", "10mbit")]).unwrap_err();
        assert!(e.contains("--rtt") && e.contains("--queue"), "{e}");
        let e = spec(&[("profile", "nope")]).unwrap_err();
        assert!(
            e.starts_with("--profile") && e.contains("np2b-typical"),
            "{e}"
        );
        let e = spec(&[("down-profile", "nope")]).unwrap_err();
        assert!(e.starts_with("--down-profile"), "{e}");
        let e = spec(&[("rate", "3 mbit")]).unwrap_err();
        assert!(e.starts_with("--rate") && e.contains("mbit"), "{e}");
        let e = spec(&[("up-rate", "1mbit"), ("up-trace", "x.trace")]).unwrap_err();
        assert!(e.contains("alternatives"), "{e}");
        let e = spec(&[("delay", "10ms"), ("rtt", "20ms")]).unwrap_err();
        assert!(e.contains("alternatives"), "{e}");
        let e = spec(&[("loss", "120%")]).unwrap_err();
        assert!(e.starts_with("--loss"), "{e}");
        let e = spec(&[("bandwidth", "1mbit")]).unwrap_err();
        assert!(e.contains("not a link option"), "{e}");
        let e = spec(&[("seed", "-1")]).unwrap_err();
        assert!(e.contains("whole number"), "{e}");
    }
}
