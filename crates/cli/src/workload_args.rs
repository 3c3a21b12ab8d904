//! The flags every workload command shares, one struct per concern. Each flag's value goes to the
//! workload's own parser under its scenario key ([`Params::set`]), so `--size 5MB` and
//! `size = "5MB"` are one parameter with one meaning; errors name the flag.

use std::path::PathBuf;

use anyhow::{Result, anyhow};
use clap::Args;
use quiclab_experiment::WorkloadKind;
use quiclab_lab::LinkSpec;
use quiclab_workload::WorkloadSpec;
use quiclab_workload::params::Params;

/// The protocol stack's flags.
#[derive(Args, Debug, Clone, Default)]
pub struct StackFlags {
    /// TLS version for h1/h2 (QUIC always uses TLS 1.3)
    #[arg(long, value_name = "1.2|1.3")]
    pub tls: Option<String>,
    /// Congestion control of the protocol used (h1/h2: cubic|reno|bbr; h3:
    /// cubic|newreno|bbr|gquic-cubic); flows name theirs in --flow
    #[arg(long, value_name = "NAME")]
    pub cc: Option<String>,
    /// Connections emulated by gquic-cubic (N; β = (N−1+0.7)/N; default 2)
    #[arg(long, value_name = "N")]
    pub gquic_n: Option<String>,
    /// XOR FEC under QUIC on both ends for h3, one parity datagram after every N data datagrams
    /// (2–64; seed 000's F_G ≈ 3 is N = 2); partial groups flushed after max(RTT/2, 5 ms). Off by
    /// default (docs/fec.md)
    #[arg(long, value_name = "N")]
    pub fec: Option<String>,
}

/// A run's own flags: its time limit, address family and what it keeps and prints.
#[derive(Args, Debug, Clone, Default)]
pub struct RunFlags {
    /// Give up after this long (default: from the workload and the link, see docs/experiments.md);
    /// the run then ends as timed out with what it measured kept
    #[arg(long, value_name = "DURATION")]
    pub timeout: Option<String>,
    /// Over IPv6
    #[arg(long)]
    pub ipv6: bool,
    /// Keep the emulator's packet log (link.log), the server's congestion samples (cwnd.csv),
    /// qlogs and the processes' outputs in this directory (new, empty or quiclab's own)
    #[arg(long, value_name = "DIR")]
    pub keep: Option<PathBuf>,
    /// Print one JSON object
    #[arg(long)]
    pub json: bool,
}

/// How the client answers network switches (with --switch).
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Network switches")]
pub struct OnSwitchFlags {
    /// reconnect (after --switch-timeout without a byte, a new connection from the new address:
    /// the seed's behaviour), reconnect-0rtt (the same with TLS 1.3 resumption / QUIC 0-RTT) or
    /// migrate (h3: QUIC connection migration to the new address); default reconnect
    #[arg(long, value_name = "BEHAVIOUR", requires = "switch")]
    pub on_switch: Option<String>,
    /// No byte for this long and the connection is taken as lost (default 5s, the seed's player)
    #[arg(long, value_name = "DURATION", requires = "switch")]
    pub switch_timeout: Option<String>,
    /// migrate: the time the client takes to notice the switch before it rebinds (default 0s)
    #[arg(long, value_name = "DURATION", requires = "switch")]
    pub migrate_delay: Option<String>,
}

/// A workload's parameters gathered from flags: each set under its key, errors naming the flag.
pub struct FlagParams {
    params: Params,
    /// Key → the flag that set it, for errors `build` finds across keys.
    flags: Vec<(&'static str, String)>,
}

impl FlagParams {
    pub fn new(kind: WorkloadKind) -> FlagParams {
        FlagParams {
            params: Params::new(kind),
            flags: Vec::new(),
        }
    }

    /// Sets `key` from `flag`'s value, if given.
    pub fn set(&mut self, key: &'static str, flag: &str, value: Option<&str>) -> Result<()> {
        let Some(value) = value else {
            return Ok(());
        };
        self.params
            .set(key, value)
            .map_err(|e| anyhow!("{flag}: {e}"))?;
        self.flags.push((key, flag.to_string()));
        Ok(())
    }

    /// Sets a boolean key when its flag is present.
    pub fn set_flag(&mut self, key: &'static str, flag: &str, on: bool) -> Result<()> {
        self.set(key, flag, on.then_some("true"))
    }

    pub fn stack(&mut self, f: &StackFlags) -> Result<()> {
        self.set("tls", "--tls", f.tls.as_deref())?;
        self.set("cc", "--cc", f.cc.as_deref())?;
        self.set("gquic_n", "--gquic-n", f.gquic_n.as_deref())?;
        self.set("fec", "--fec", f.fec.as_deref())
    }

    pub fn run(&mut self, f: &RunFlags) -> Result<()> {
        self.set("timeout", "--timeout", f.timeout.as_deref())?;
        self.set_flag("ipv6", "--ipv6", f.ipv6)
    }

    pub fn on_switch(&mut self, f: &OnSwitchFlags) -> Result<()> {
        self.set("on_switch", "--on-switch", f.on_switch.as_deref())?;
        self.set(
            "switch_timeout",
            "--switch-timeout",
            f.switch_timeout.as_deref(),
        )?;
        self.set(
            "migrate_delay",
            "--migrate-delay",
            f.migrate_delay.as_deref(),
        )
    }

    /// The run over `spec`; a refused combination names the flag of the key it blames.
    pub fn build(&self, spec: &LinkSpec) -> Result<WorkloadSpec> {
        self.params.build(spec).map_err(|e| {
            let flag = self
                .flags
                .iter()
                .rev()
                .find(|(k, _)| *k == e.key)
                .map(|(_, f)| f.clone())
                .unwrap_or_else(|| format!("--{}", e.key.replace('_', "-")));
            anyhow!("{flag}: {}", e.message)
        })
    }
}

#[cfg(test)]
mod tests {
    //! One parameter, one meaning: a command's flags and a scenario's keys give the same typed
    //! run, for every workload (both go through `Params::set` and `Params::build`).

    use clap::Parser;

    use crate::{Cli, Command};

    fn cli(args: &[&str]) -> Command {
        Cli::try_parse_from(std::iter::once("quiclab").chain(args.iter().copied()))
            .unwrap_or_else(|e| panic!("{args:?}: {e}"))
            .command
    }

    /// The first run of `scenario` as the runner prepares it: its link and workload.
    fn prepared(scenario: &str) -> (quiclab_lab::LinkSpec, quiclab_workload::WorkloadSpec) {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.toml");
        std::fs::write(&file, scenario).unwrap();
        let (s, _, plan) = quiclab_runner::load(&file, None, false).unwrap();
        let p = quiclab_runner::Preparer::new(&s, &file)
            .prepare(&plan[0])
            .unwrap();
        (p.spec, p.work)
    }

    /// Same workload, and the same link apart from its seed (a scenario's runs are seeded).
    fn assert_same(
        flags: (quiclab_lab::LinkSpec, String),
        scenario: (quiclab_lab::LinkSpec, String),
    ) {
        assert_eq!(flags.1, scenario.1);
        let (mut a, b) = (flags.0, scenario.0);
        a.seed = b.seed;
        assert_eq!(format!("{a:?}"), format!("{b:?}"));
    }

    const LINK: &str = "[link]\nrate = \"10mbit\"\nrtt = \"50ms\"\nloss = \"1%\"\n";
    const LINK_FLAGS: [&str; 6] = ["--rate", "10mbit", "--rtt", "50ms", "--loss", "1%"];

    #[test]
    fn bulk_flags_and_scenario_keys_give_the_same_run() {
        let Command::Bulk(args) = cli(&[
            &[
                "bulk", "--proto", "h3", "--size", "2MB", "--tls", "1.3", "--fec", "2",
            ][..],
            &["--timeout", "40s", "--cc", "gquic-cubic"],
            &LINK_FLAGS,
        ]
        .concat()) else {
            unreachable!()
        };
        let (_, spec, run) = crate::stacks_cmd::bulk_run(&args).unwrap();
        let (sspec, swork) = prepared(&format!(
            "name = \"t\"\ntimeout = \"40s\"\n[workload]\nkind = \"bulk\"\nsize = \"2MB\"\n{LINK}\
             [protocol]\nprotocol = \"h3\"\ntls = \"1.3\"\nfec = 2\ncc = \"gquic-cubic\"\n"
        ));
        let quiclab_workload::WorkloadSpec::Bulk(srun) = swork else {
            panic!("{swork:?}")
        };
        // FEC's flush alarm comes from the link's RTT on both paths.
        assert!(run.stack.fec.is_some());
        assert_same((spec, format!("{run:?}")), (sspec, format!("{srun:?}")));
    }

    #[test]
    fn page_flags_and_scenario_keys_give_the_same_load() {
        let Command::Page(args) = cli(&[
            &["page", "--proto", "h2", "--page", "carlucci-small"][..],
            &["--max-streams", "6", "--tls", "1.2"],
            &LINK_FLAGS,
        ]
        .concat()) else {
            unreachable!()
        };
        let (_, spec, run) = crate::page_cmd::page_run(&args).unwrap();
        let (sspec, swork) = prepared(&format!(
            "name = \"t\"\n[workload]\nkind = \"page\"\npage = \"carlucci-small\"\nmax_streams = 6\n\
             {LINK}[protocol]\nprotocol = \"h2\"\ntls = \"1.2\"\n"
        ));
        let quiclab_workload::WorkloadSpec::Page(srun) = swork else {
            panic!("{swork:?}")
        };
        assert_same((spec, format!("{run:?}")), (sspec, format!("{srun:?}")));
    }

    #[test]
    fn flows_flags_and_scenario_keys_give_the_same_mix() {
        let Command::Flows(args) = cli(&[
            &[
                "flows",
                "--flow",
                "h3:gquic-cubic",
                "--flow",
                "h1",
                "--duration",
                "20s",
            ][..],
            &[
                "--offsets",
                "0s,2s",
                "--bin",
                "200ms",
                "--cutoff",
                "3s",
                "--fec",
                "3",
            ],
            &LINK_FLAGS,
        ]
        .concat()) else {
            unreachable!()
        };
        let (_, spec, run) = crate::flows_cmd::flows_run(&args).unwrap();
        let (sspec, swork) = prepared(&format!(
            "name = \"t\"\n[workload]\nkind = \"flows\"\nflows = \"h3:gquic-cubic + h1\"\n\
             duration = \"20s\"\noffsets = \"0s,2s\"\nbin = \"200ms\"\ncutoff = \"3s\"\n{LINK}\
             [protocol]\nfec = 3\n"
        ));
        let quiclab_workload::WorkloadSpec::Flows(srun) = swork else {
            panic!("{swork:?}")
        };
        assert_same((spec, format!("{run:?}")), (sspec, format!("{srun:?}")));
    }

    #[test]
    fn video_flags_and_scenario_keys_give_the_same_players() {
        let Command::Video(args) = cli(&[
            &["video", "--proto", "h1", "--proto", "h3", "--abr", "bba2"][..],
            &["--duration", "60s", "--seek", "20s:40s", "--buffer", "10s"],
            &[
                "--switch",
                "wifi@0s,lte@20s",
                "--on-switch",
                "reconnect-0rtt",
            ],
        ]
        .concat()) else {
            unreachable!()
        };
        let (_, spec, run) = crate::video_cmd::video_run(&args).unwrap();
        let (sspec, swork) = prepared(
            "name = \"t\"\n[workload]\nkind = \"video\"\nplayers = \"h1 + h3\"\nabr = \"bba2\"\n\
             duration = \"60s\"\nseek = \"20s:40s\"\nbuffer = \"10s\"\non_switch = \"reconnect-0rtt\"\n\
             [link]\nswitch = \"wifi@0s,lte@20s\"\n",
        );
        let quiclab_workload::WorkloadSpec::Video(srun) = swork else {
            panic!("{swork:?}")
        };
        assert_same((spec, format!("{run:?}")), (sspec, format!("{srun:?}")));
    }
}
