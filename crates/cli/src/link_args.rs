//! The LINK OPTIONS every lab command shares. Plain flags set both directions; `--up-*`/`--down-*`
//! override one direction.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use clap::Args;
use quiclab_lab::LinkSpec;
use quiclab_link::aqm::DisciplineSpec;
use quiclab_link::options::{RateChoice, Steering, parse_rate_or_unlimited};
use quiclab_link::{LinkOptions, LossSpec, Nanos, QueueLimit, units};

fn rate(s: &str) -> Result<u64, String> {
    parse_rate_or_unlimited(s)
}
/// The one duration parser of the command line (quiclab-link's).
pub fn duration(s: &str) -> Result<Nanos, String> {
    units::parse_duration(s).map_err(|e| e.to_string())
}
/// [`duration`] as a `std::time::Duration`.
pub fn std_duration(s: &str) -> Result<Duration, String> {
    duration(s).map(Duration::from_nanos)
}
fn loss(s: &str) -> Result<LossSpec, String> {
    units::parse_loss(s).map_err(|e| e.to_string())
}
/// Prints what is allowed but does less than it may seem (`LinkOptions::notes`) to stderr.
pub fn print_notes(options: &LinkOptions, spec: &LinkSpec) {
    for note in options.notes(spec) {
        eprintln!("quiclab: note: {note}");
    }
}

fn discipline(s: &str) -> Result<DisciplineSpec, String> {
    DisciplineSpec::parse(s)
}

fn queue(s: &str) -> Result<QueueLimit, String> {
    units::parse_queue(s).map_err(|e| e.to_string())
}

#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Link options (both directions unless prefixed up-/down-)")]
pub struct LinkArgs {
    /// Bottleneck rate, e.g. 10mbit, 1.5gbit, 20Mbps (megabits), or "unlimited"
    #[arg(long, value_parser = rate, value_name = "RATE")]
    pub rate: Option<u64>,
    #[arg(long, value_parser = rate, value_name = "RATE")]
    pub up_rate: Option<u64>,
    #[arg(long, value_parser = rate, value_name = "RATE")]
    pub down_rate: Option<u64>,

    /// Mahimahi packet-delivery trace (one ms timestamp per 1500-byte opportunity) instead of --rate
    #[arg(long, value_name = "FILE", conflicts_with_all = ["rate", "profile"])]
    pub trace: Option<PathBuf>,
    #[arg(long, value_name = "FILE")]
    pub up_trace: Option<PathBuf>,
    #[arg(long, value_name = "FILE")]
    pub down_trace: Option<PathBuf>,

    /// Time-varying profile: a built-in name (np2b-typical, …) or a .toml/.csv file of steps
    /// (duration, rate, delay, loss); its delays and losses replace --delay and --loss
    #[arg(long, value_name = "NAME|FILE", conflicts_with_all = ["rate"])]
    pub profile: Option<String>,
    #[arg(long, value_name = "NAME|FILE")]
    pub up_profile: Option<String>,
    #[arg(long, value_name = "NAME|FILE")]
    pub down_profile: Option<String>,

    /// One-way propagation delay, e.g. 25ms, 300us
    #[arg(long, value_parser = duration, value_name = "DURATION", conflicts_with = "rtt")]
    pub delay: Option<Nanos>,
    /// Round-trip propagation delay, split equally between the directions
    #[arg(long, value_parser = duration, value_name = "DURATION")]
    pub rtt: Option<Nanos>,
    #[arg(long, value_parser = duration, value_name = "DURATION")]
    pub up_delay: Option<Nanos>,
    #[arg(long, value_parser = duration, value_name = "DURATION")]
    pub down_delay: Option<Nanos>,

    /// Random loss: 2%, 0.02, or Gilbert–Elliott ge:p=1%,r=30%[,bad=100%][,good=0%]
    #[arg(long, value_parser = loss, value_name = "LOSS")]
    pub loss: Option<LossSpec>,
    #[arg(long, value_parser = loss, value_name = "LOSS")]
    pub up_loss: Option<LossSpec>,
    #[arg(long, value_parser = loss, value_name = "LOSS")]
    pub down_loss: Option<LossSpec>,

    /// Tail-drop queue: 30kB, 64KiB, 20pkt, 1bdp (default), 0.5bdp, unlimited
    #[arg(long, value_parser = queue, value_name = "SIZE")]
    pub queue: Option<QueueLimit>,
    #[arg(long, value_parser = queue, value_name = "SIZE")]
    pub up_queue: Option<QueueLimit>,
    #[arg(long, value_parser = queue, value_name = "SIZE")]
    pub down_queue: Option<QueueLimit>,

    /// Queue discipline: droptail (default), codel (RFC 8289: target 5 ms, interval 100 ms),
    /// fq-codel (RFC 8290: 1024 flows, quantum 1514 B) or pie (RFC 8033: target 15 ms, t_update
    /// 15 ms); the queue size is its limit (docs/link.md)
    #[arg(long, value_parser = discipline, value_name = "NAME")]
    pub queue_discipline: Option<DisciplineSpec>,
    #[arg(long, value_parser = discipline, value_name = "NAME")]
    pub up_queue_discipline: Option<DisciplineSpec>,
    #[arg(long, value_parser = discipline, value_name = "NAME")]
    pub down_queue_discipline: Option<DisciplineSpec>,

    /// The queue discipline marks ECN-capable packets CE instead of dropping them, and the lab's
    /// TCP asks for ECN (tcp_ecn = 1; quinn uses ECN by default). With droptail it marks nothing
    #[arg(long)]
    pub ecn: bool,

    /// Seed of the random-loss processes (a run with the same seed drops the same packets)
    #[arg(long, default_value_t = 1)]
    pub seed: u64,

    /// Latency subtracted from each direction's delay to cancel the TUN path's own (see docs/link.md)
    #[arg(long, value_parser = duration, value_name = "DURATION")]
    pub tun_compensation: Option<Nanos>,

    /// Run the scheduler threads with normal priority instead of SCHED_FIFO
    #[arg(long)]
    pub no_realtime: bool,

    /// Spin (instead of sleeping) this long before each release
    #[arg(long, value_parser = duration, value_name = "DURATION", default_value = "10us")]
    pub spin: Nanos,

    /// Release packets due within this window together with one that is due (0 = each at its own
    /// time): fewer wake-ups at high rates, bounded earliness (reported); see docs/link.md
    #[arg(long, value_parser = duration, value_name = "DURATION", default_value = "0us")]
    pub batch_window: Nanos,

    /// Within 2 ms of a release, sleep at most this long at a time (0 = sleep straight to the
    /// release): a vCPU halted for milliseconds can wake a millisecond late (docs/link.md)
    #[arg(long, value_parser = duration, value_name = "DURATION", default_value = "50us")]
    pub nap: Nanos,

    /// Steer the receiving kernels' processing to other CPUs (RPS) and pin the emulator: auto = only
    /// for links of 400 Mbit/s or more, where it cuts release lateness (see docs/link.md)
    #[arg(long, default_value = "auto", value_name = "auto|on|off")]
    pub steering: Steering,

    /// TUN offload: the kernels hand over TSO/USO super-packets (split into MTU packets for the
    /// link model) and take back coalesced writes; auto = only for links of 200 Mbit/s or more,
    /// so slower links keep strict per-packet releases (see docs/link.md)
    #[arg(long, default_value = "auto", value_name = "auto|on|off")]
    pub offload: quiclab_link::options::Offload,

    /// With offload: write the segments due within this window after a due one together, one
    /// coalesced packet per flow (0 = each segment on its own); earliness is reported
    #[arg(long, value_parser = duration, value_name = "DURATION", default_value = "200us")]
    pub offload_window: Nanos,

    /// Default TCP congestion control inside the lab's namespaces (the host's default is not inherited)
    #[arg(long, default_value = "cubic", value_parser = ["cubic", "reno", "bbr"])]
    pub tcp_cc: String,
}

/// Network switches (`quiclab shell`, `quiclab bulk`): the link follows a schedule of seed 004's
/// networks and the client's address changes at each switch (docs/link.md).
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Network switches")]
pub struct SwitchArgs {
    /// The client moves between seed 004's networks (wifi, lte, 3g) at the given times, e.g.
    /// wifi@0s,lte@60s,wifi@180s, or arisu2019-lte / arisu2019-3g (Table 3). Each network's rate
    /// and delay apply both ways; at each switch the client gets a new address and packets of the
    /// old one stop crossing. Replaces --rate/--rtt/--profile
    #[arg(long, value_name = "SCHEDULE")]
    pub switch: Option<String>,
    /// Outage after each switch: nothing crosses for this long
    #[arg(long, value_name = "DURATION", requires = "switch", value_parser = duration)]
    pub switch_gap: Option<Nanos>,
}

impl SwitchArgs {
    /// The link options with the schedule set.
    pub fn apply(&self, mut options: LinkOptions) -> LinkOptions {
        options.switch = self.switch.clone();
        options.switch_gap = self.switch_gap;
        options
    }
}

impl LinkArgs {
    /// The options as plain values (what scenarios set by key).
    pub fn options(&self) -> LinkOptions {
        let choice =
            |rate: Option<u64>, trace: &Option<PathBuf>, profile: &Option<String>| RateChoice {
                rate,
                trace: trace.clone(),
                profile: profile.clone(),
            };
        LinkOptions {
            shared: choice(self.rate, &self.trace, &self.profile),
            up: choice(self.up_rate, &self.up_trace, &self.up_profile),
            down: choice(self.down_rate, &self.down_trace, &self.down_profile),
            delay: self.delay,
            rtt: self.rtt,
            up_delay: self.up_delay,
            down_delay: self.down_delay,
            loss: self.loss,
            up_loss: self.up_loss,
            down_loss: self.down_loss,
            queue: self.queue,
            up_queue: self.up_queue,
            down_queue: self.down_queue,
            queue_discipline: self.queue_discipline,
            up_queue_discipline: self.up_queue_discipline,
            down_queue_discipline: self.down_queue_discipline,
            ecn: self.ecn,
            // --switch is its own flag group (SwitchArgs), taken by the commands whose clients
            // answer a switch (shell, bulk, video): see SwitchArgs::apply.
            switch: None,
            switch_gap: None,
            seed: self.seed,
            tun_compensation: self.tun_compensation,
            realtime: !self.no_realtime,
            spin: self.spin,
            batch_window: self.batch_window,
            nap: self.nap,
            steering: self.steering,
            offload: self.offload,
            offload_window: self.offload_window,
            tcp_cc: self.tcp_cc.clone(),
        }
    }

    /// Builds the link, applying per-direction overrides over the shared flags.
    pub fn to_spec(&self) -> Result<LinkSpec> {
        let options = self.options();
        let spec = options.to_spec().map_err(anyhow::Error::msg)?;
        print_notes(&options, &spec);
        Ok(spec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Wrapper {
        #[command(flatten)]
        link: LinkArgs,
    }

    fn spec(args: &[&str]) -> Result<LinkSpec> {
        let w = Wrapper::try_parse_from(std::iter::once("quiclab").chain(args.iter().copied()))
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        w.link.to_spec()
    }

    #[test]
    fn the_flags_defaults_are_the_options_defaults() {
        let w = Wrapper::try_parse_from(["quiclab"]).unwrap();
        let defaults = LinkOptions::default();
        assert_eq!(w.link.offload_window, defaults.offload_window);
        assert_eq!(w.link.nap, defaults.nap);
    }

    // The link semantics are tested in quiclab-link (options.rs); these check that every flag
    // reaches its option.
    #[test]
    fn flags_reach_their_options() {
        let s = spec(&[
            "--rate",
            "10mbit",
            "--up-rate",
            "1mbit",
            "--delay",
            "10ms",
            "--down-delay",
            "40ms",
            "--down-loss",
            "0.5%",
            "--up-queue",
            "20pkt",
            "--seed",
            "7",
        ])
        .unwrap();
        assert_eq!(s.uplink.constant_rate_bps(), Some(1_000_000));
        assert_eq!(s.downlink.constant_rate_bps(), Some(10_000_000));
        assert_eq!((s.uplink.delay, s.downlink.delay), (10_000_000, 40_000_000));
        assert_eq!(s.downlink.loss, LossSpec::Bernoulli(0.005));
        assert_eq!(s.uplink.queue, QueueLimit::Packets(20));
        assert_eq!(s.seed, 7);
        let s = spec(&["--down-profile", "np2b-typical", "--rtt", "20ms"]).unwrap();
        assert!(s.downlink.is_time_varying());
        let e = spec(&["--rate", "10mbit"]).unwrap_err().to_string();
        assert!(e.contains("--rtt") && e.contains("--queue"), "{e}");
    }
}
