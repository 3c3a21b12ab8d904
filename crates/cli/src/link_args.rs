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

    /// Default TCP congestion control inside the lab's namespaces (the host's default is not inherited)
    #[arg(long, default_value = "cubic", value_parser = ["cubic", "reno", "bbr"])]
    pub tcp_cc: String,
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

impl LinkArgs {
    fn direction(
        &self,
        flag: &str,
        rate: Option<u64>,
        trace: Option<&PathBuf>,
        profile: Option<&String>,
        delay: Option<Nanos>,
        loss: Option<LossSpec>,
        queue: Option<QueueLimit>,
    ) -> Result<DirectionSpec> {
        let mut d = DirectionSpec::default();
        let choices = [rate.is_some(), trace.is_some(), profile.is_some()]
            .iter()
            .filter(|x| **x)
            .count();
        if choices > 1 {
            bail!("--{flag}rate, --{flag}trace and --{flag}profile are alternatives: give one");
        }
        if let Some(bps) = rate {
            if bps > 0 {
                d.rate = RateSpec::Constant { bps };
                d.rate_label = units::format_rate(bps);
            }
        } else if let Some(path) = trace {
            let t = quiclab_link::DeliveryTrace::load(path)
                .map_err(|e| anyhow::anyhow!("--{flag}trace: {e}"))?;
            d.rate_label = format!(
                "trace {} (mean {})",
                path.display(),
                units::format_rate(t.mean_rate_bps() as u64)
            );
            d.rate = RateSpec::Trace(Arc::new(t));
        } else if let Some(p) = profile {
            let prof = load_profile(p).with_context(|| format!("--{flag}profile"))?;
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

    /// Builds the link, applying per-direction overrides over the shared flags.
    pub fn to_spec(&self) -> Result<LinkSpec> {
        let half_rtt = self.rtt.map(|r| r / 2);
        let shared_delay = self.delay.or(half_rtt);
        // A per-direction trace/profile/rate replaces the shared choice entirely.
        let pick =
            |own_rate: Option<u64>, own_trace: &Option<PathBuf>, own_prof: &Option<String>| {
                if own_rate.is_some() || own_trace.is_some() || own_prof.is_some() {
                    (own_rate, own_trace.clone(), own_prof.clone())
                } else {
                    (self.rate, self.trace.clone(), self.profile.clone())
                }
            };
        let (ur, ut, up) = pick(self.up_rate, &self.up_trace, &self.up_profile);
        let (dr, dt, dp) = pick(self.down_rate, &self.down_trace, &self.down_profile);
        let uplink = self.direction(
            "up-",
            ur,
            ut.as_ref(),
            up.as_ref(),
            self.up_delay.or(shared_delay),
            self.up_loss.or(self.loss),
            self.up_queue.or(self.queue),
        )?;
        let downlink = self.direction(
            "down-",
            dr,
            dt.as_ref(),
            dp.as_ref(),
            self.down_delay.or(shared_delay),
            self.down_loss.or(self.loss),
            self.down_queue.or(self.queue),
        )?;
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
            realtime: !self.no_realtime,
        }
    }

    pub fn lab_options(&self) -> quiclab_lab::LabOptions {
        quiclab_lab::LabOptions {
            tcp_congestion_control: self.tcp_cc.clone(),
            ..Default::default()
        }
    }
}
