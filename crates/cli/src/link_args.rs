//! The LINK OPTIONS every lab command shares. Plain flags set both directions; `--up-*`/`--down-*`
//! override one direction.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use quiclab_lab::{DirectionSpec, LinkSpec, SchedulerOptions};
use quiclab_link::{LossSpec, Nanos, QueueLimit, RateSpec, units};

fn rate(s: &str) -> Result<u64, String> {
    if s.eq_ignore_ascii_case("unlimited") {
        return Ok(0);
    }
    units::parse_rate(s).map_err(|e| e.to_string())
}
fn duration(s: &str) -> Result<Nanos, String> {
    units::parse_duration(s).map_err(|e| e.to_string())
}
fn loss(s: &str) -> Result<LossSpec, String> {
    units::parse_loss(s).map_err(|e| e.to_string())
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

    /// Steer the receiving kernels' processing to other CPUs (RPS) and pin the emulator: auto = only
    /// for links of 400 Mbit/s or more, where it cuts release lateness (see docs/link.md)
    #[arg(long, default_value = "auto", value_parser = ["auto", "on", "off"])]
    pub steering: String,

    /// Default TCP congestion control inside the lab's namespaces (the host's default is not inherited)
    #[arg(long, default_value = "cubic", value_parser = ["cubic", "reno", "bbr"])]
    pub tcp_cc: String,
}

/// Resolves `--steering auto|on|off` for a link.
pub fn steering(choice: &str, spec: &LinkSpec) -> bool {
    match choice {
        "on" => true,
        "off" => false,
        _ => spec.wants_receive_steering(),
    }
}

/// Half the median RTT of a zero-delay link measured by `quiclab bench link` on the reference machine
/// (0.126 ms, 2 vCPU Firecracker VM, kernel 6.18):
/// the TUN → emulator → TUN path adds this much one-way latency on its own.
pub const DEFAULT_TUN_COMPENSATION: Nanos = 63_000;

fn load_profile(s: &str) -> Result<Arc<quiclab_link::Profile>> {
    if let Some(p) = quiclab_link::profile::builtin(s) {
        return Ok(Arc::new(p));
    }
    let path = PathBuf::from(s);
    if !path.exists() {
        bail!(
            "no built-in profile named {s:?} and no such file (built-in: {})",
            quiclab_link::profile::builtin_names().join(", ")
        );
    }
    Ok(Arc::new(
        quiclab_link::profile::load(&path).map_err(|e| anyhow::anyhow!("{e}"))?,
    ))
}

/// The flags that decide one direction, after per-direction overrides.
struct DirectionFlags {
    /// "", "up-" or "down-": which flags the user typed, for error messages.
    prefix: &'static str,
    rate: Option<u64>,
    trace: Option<PathBuf>,
    profile: Option<String>,
    delay: Option<Nanos>,
    loss: Option<LossSpec>,
    queue: Option<QueueLimit>,
}

impl DirectionFlags {
    fn build(self) -> Result<DirectionSpec> {
        let flag = self.prefix;
        let mut d = DirectionSpec::default();
        if let Some(bps) = self.rate {
            if bps > 0 {
                d.rate = RateSpec::Constant { bps };
                d.rate_label = units::format_rate(bps);
            }
        } else if let Some(path) = &self.trace {
            let t = quiclab_link::DeliveryTrace::load(path)
                .map_err(|e| anyhow::anyhow!("--{flag}trace: {e}"))?;
            d.rate_label = format!(
                "trace {} (mean {})",
                path.display(),
                units::format_rate(t.mean_rate_bps() as u64)
            );
            d.rate = RateSpec::Trace(Arc::new(t));
        } else if let Some(p) = &self.profile {
            let prof = load_profile(p).with_context(|| format!("--{flag}profile"))?;
            d.rate_label = format!("profile {}", prof.name);
            d.rate = RateSpec::Profile(prof);
        }
        if let Some(delay) = self.delay {
            d.delay = delay;
        }
        if let Some(loss) = self.loss {
            d.loss = loss;
        }
        if let Some(q) = self.queue {
            d.queue = q;
        }
        if matches!(d.rate, RateSpec::Unlimited) && matches!(d.queue, QueueLimit::Bdp(_)) {
            // Without a bottleneck there is no queue to size.
            d.queue = QueueLimit::Unlimited;
        }
        Ok(d)
    }
}

impl LinkArgs {
    /// Builds the link, applying per-direction overrides over the shared flags.
    pub fn to_spec(&self) -> Result<LinkSpec> {
        let half_rtt = self.rtt.map(|r| r / 2);
        let shared_delay = self.delay.or(half_rtt);
        // A per-direction trace/profile/rate replaces the shared choice entirely. Errors name the
        // flag the user actually typed.
        let flags = |prefix: &'static str,
                     own: (Option<u64>, &Option<PathBuf>, &Option<String>),
                     delay: Option<Nanos>,
                     loss: Option<LossSpec>,
                     queue: Option<QueueLimit>| {
            let choices = [own.0.is_some(), own.1.is_some(), own.2.is_some()];
            let (prefix, rate, trace, profile) = if choices.iter().any(|c| *c) {
                if choices.iter().filter(|c| **c).count() > 1 {
                    bail!(
                        "--{prefix}rate, --{prefix}trace and --{prefix}profile are alternatives: give one"
                    );
                }
                (prefix, own.0, own.1.clone(), own.2.clone())
            } else {
                ("", self.rate, self.trace.clone(), self.profile.clone())
            };
            DirectionFlags {
                prefix,
                rate,
                trace,
                profile,
                delay,
                loss,
                queue,
            }
            .build()
        };
        let uplink = flags(
            "up-",
            (self.up_rate, &self.up_trace, &self.up_profile),
            self.up_delay.or(shared_delay),
            self.up_loss.or(self.loss),
            self.up_queue.or(self.queue),
        )?;
        let downlink = flags(
            "down-",
            (self.down_rate, &self.down_trace, &self.down_profile),
            self.down_delay.or(shared_delay),
            self.down_loss.or(self.loss),
            self.down_queue.or(self.queue),
        )?;
        let base_rtt = uplink.base_delay() + downlink.base_delay();
        for (name, d, explicit) in [
            ("up", &uplink, self.up_queue.or(self.queue).is_some()),
            ("down", &downlink, self.down_queue.or(self.queue).is_some()),
        ] {
            if base_rtt == 0 && matches!(d.queue, QueueLimit::Bdp(_)) {
                bail!(
                    "the {name}link queue is {} (a bandwidth-delay product) but the link has no delay, so it would hold 0 bytes: \
                     give a delay (--rtt 50ms, --delay 25ms) or a queue in bytes or packets (--queue 64kB, --queue 100pkt)",
                    if explicit {
                        "given in bdp"
                    } else {
                        "1bdp by default"
                    }
                );
            }
        }
        Ok(LinkSpec {
            uplink,
            downlink,
            seed: self.seed,
            tun_compensation: self.tun_compensation.unwrap_or(DEFAULT_TUN_COMPENSATION),
        })
    }

    pub fn scheduler(&self) -> SchedulerOptions {
        SchedulerOptions {
            spin: Duration::from_nanos(self.spin),
            batch_window: Duration::from_nanos(self.batch_window),
            realtime: !self.no_realtime,
        }
    }

    /// A fresh lab with its emulator running for `spec` (built from these arguments).
    pub fn start_lab(
        &self,
        spec: &LinkSpec,
        log: Option<PathBuf>,
    ) -> Result<quiclab_lab::RunningLab> {
        quiclab_lab::RunningLab::start(spec, &self.lab_options(spec), self.scheduler(), log)
    }

    /// [`Self::start_lab`] for a command with `--trace DIR`: the directory is made and the link's
    /// packet log goes to `DIR/link.log`; without one, no log.
    pub fn start_traced_lab(
        &self,
        spec: &LinkSpec,
        trace: Option<&std::path::Path>,
    ) -> Result<quiclab_lab::RunningLab> {
        if let Some(d) = trace {
            std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
        }
        self.start_lab(spec, trace.map(|d| d.join("link.log")))
    }

    pub fn lab_options(&self, spec: &LinkSpec) -> quiclab_lab::LabOptions {
        quiclab_lab::LabOptions {
            tcp_congestion_control: self.tcp_cc.clone(),
            steer_receive: steering(&self.steering, spec),
            ..Default::default()
        }
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
    fn rtt_is_split_equally_and_flags_apply_to_both_directions() {
        let s = spec(&["--rate", "10mbit", "--rtt", "50ms", "--loss", "2%"]).unwrap();
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
    fn per_direction_flags_override_the_shared_ones() {
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
    fn a_direction_profile_replaces_the_shared_rate() {
        let s = spec(&[
            "--rate",
            "10mbit",
            "--down-profile",
            "np2b-typical",
            "--rtt",
            "20ms",
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
    }

    #[test]
    fn errors_name_the_flag_the_user_typed() {
        let e = spec(&["--rate", "10mbit"]).unwrap_err().to_string();
        assert!(e.contains("--rtt") && e.contains("--queue"), "{e}");
        let e = spec(&["--profile", "nope"]).unwrap_err();
        let e = format!("{e:#}");
        assert!(e.starts_with("--profile"), "{e}");
        assert!(e.contains("np2b-typical"), "{e}");
        let e = spec(&["--down-profile", "nope"]).unwrap_err();
        assert!(format!("{e:#}").starts_with("--down-profile"));
        let e = spec(&["--rate", "3 mbit"]).unwrap_err().to_string();
        assert!(e.contains("--rate"), "{e}");
        let e = spec(&["--up-rate", "1mbit", "--up-trace", "x.trace"]).unwrap_err();
        assert!(e.to_string().contains("alternatives"), "{e}");
    }
}
