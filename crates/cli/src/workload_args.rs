//! The flags every workload command shares, one struct per concern. Each flag's value goes to the
//! workload's own parser under its scenario key ([`Params::set`]), so `--size 5MB` and
//! `size = "5MB"` are one parameter with one meaning; errors name the flag.

use std::path::PathBuf;

use anyhow::{Result, anyhow};
use clap::Args;
use quiclab_experiment::WorkloadKind;
use quiclab_lab::LinkSpec;
use quiclab_link::LinkOptions;
use quiclab_workload::params::Params;
use quiclab_workload::{Workload, WorkloadResult, WorkloadSpec};

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
    /// QUIC's UDP payload size in bytes for h3 (1200 up to what the 1500-byte link carries:
    /// 1472 over IPv4, 1452 over IPv6; default 1452); no datagram is larger unless --quic-pmtud
    #[arg(long, value_name = "BYTES")]
    pub quic_mtu: Option<String>,
    /// Let QUIC's PMTU discovery probe above --quic-mtu (up to 1472 bytes)
    #[arg(long)]
    pub quic_pmtud: bool,
    /// The server's HTTP/1.1 and HTTP/2 responses leave out `alt-svc: h3=":443"` (sent by default)
    #[arg(long)]
    pub no_alt_svc: bool,
}

/// A run's own flags: its time limit, address family and what it keeps and prints.
#[derive(Args, Debug, Clone, Default)]
pub struct RunFlags {
    /// Give up after this long (default: from the workload and the link, see docs/experiments.md);
    /// the run then ends as timed out with what it measured kept
    #[arg(long, value_name = "DURATION")]
    pub timeout: Option<String>,
    /// The address family of every connection: 4 (default) or 6
    #[arg(long, value_name = "4|6")]
    pub ip: Option<String>,
    /// Over IPv6: the same as --ip 6
    #[arg(long, conflicts_with = "ip")]
    pub ipv6: bool,
    /// Keep the emulator's packet log (link.log), the server's congestion samples (cwnd.csv),
    /// qlogs and the processes' outputs in this directory (new, empty or quiclab's own)
    #[arg(long, value_name = "DIR")]
    pub keep: Option<PathBuf>,
    /// Capture every packet crossing the link into this pcapng file (new; replaced only with
    /// --force), with the run's TLS/QUIC secrets embedded so that Wireshark decrypts h2 and h3
    #[arg(long, value_name = "FILE")]
    pub pcap: Option<PathBuf>,
    /// Replace the files --pcap (and page's --har and --waterfall) name if they exist (never
    /// through a symbolic link)
    #[arg(long)]
    pub force: bool,
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
        self.set("fec", "--fec", f.fec.as_deref())?;
        self.set("quic_mtu", "--quic-mtu", f.quic_mtu.as_deref())?;
        self.set_flag("quic_pmtud", "--quic-pmtud", f.quic_pmtud)?;
        self.set("alt_svc", "--no-alt-svc", f.no_alt_svc.then_some("false"))
    }

    pub fn run(&mut self, f: &RunFlags) -> Result<()> {
        self.set("timeout", "--timeout", f.timeout.as_deref())?;
        self.set("ip", "--ip", f.ip.as_deref())?;
        self.set("ip", "--ipv6", f.ipv6.then_some("6"))
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

/// Runs `run` in a fresh lab for `spec` (its work directory kept in `--keep`), lets `artifacts`
/// write what the run asks for (HAR, waterfall) and prints the result: one JSON object with
/// `--json`, else its text form. Exit status 1 when the result says the run failed or timed out
/// (the reason on stderr).
pub fn execute<W: Workload>(
    command: &str,
    run: &W,
    (options, spec): (&LinkOptions, &LinkSpec),
    flags: &RunFlags,
    artifacts: impl FnOnce(&W::Output) -> Result<()>,
) -> Result<i32>
where
    W::Output: std::fmt::Display,
{
    let keep = flags.keep.as_deref();
    let capture =
        quiclab_lab::capture::CaptureConfig::for_flag(flags.pcap.as_deref(), flags.force)?;
    let mut running = quiclab_workload::harness::start_lab(options, spec, keep, capture)?;
    let out = run.run(&mut running, keep)?;
    drop(running);
    if let Some(c) = out.fidelity.as_ref().and_then(|f| f.capture.as_ref()) {
        eprintln!("{}", crate::shell::capture_line(c));
    }
    // The result is printed whatever became of the files written from it.
    let written = artifacts(&out.result);
    if flags.json {
        println!("{}", serde_json::to_string_pretty(&out.result)?);
    } else {
        println!("{}", out.result);
    }
    if let Err(e) = written {
        eprintln!("quiclab {command}: error: {e:#} (the run's result is printed above)");
        return Ok(1);
    }
    Ok(match out.result.failure() {
        Some(reason) => {
            eprintln!("quiclab {command}: {reason}");
            1
        }
        None => 0,
    })
}

#[cfg(test)]
mod tests {
    //! One parameter, one meaning: a command's flags and a scenario's keys give the same typed
    //! run, for every workload (both go through `Params::set` and `Params::build`).

    use clap::Parser;
    use quiclab_workload::WorkloadSpec;

    use crate::{Cli, Command};

    /// The link (less its seed: a scenario's runs are seeded) and the run, as text.
    fn flag_form(args: &[&str]) -> String {
        let argv = std::iter::once("quiclab").chain(args.iter().copied());
        let command = Cli::try_parse_from(argv).unwrap().command;
        let (mut spec, run) = match command {
            Command::Bulk(a) => {
                crate::stacks_cmd::bulk_run(&a).map(|(_, s, r)| (s, format!("{r:?}")))
            }
            Command::Page(a) => {
                crate::page_cmd::page_run(&a).map(|(_, s, r)| (s, format!("{r:?}")))
            }
            Command::Flows(a) => {
                crate::flows_cmd::flows_run(&a).map(|(_, s, r)| (s, format!("{r:?}")))
            }
            Command::Video(a) => {
                crate::video_cmd::video_run(&a).map(|(_, s, r)| (s, format!("{r:?}")))
            }
            other => panic!("{other:?}"),
        }
        .unwrap();
        spec.seed = 0;
        format!("{spec:?}\n{run}")
    }

    /// The first run of `scenario` as the runner prepares it, in the same form.
    fn scenario_form(scenario: &str) -> String {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.toml");
        std::fs::write(&file, format!("name = \"t\"\n{scenario}")).unwrap();
        let (s, _, plan) = quiclab_runner::load(&file, None, false).unwrap();
        let mut p = quiclab_runner::Preparer::new(&s, &file)
            .prepare(&plan[0])
            .unwrap();
        p.spec.seed = 0;
        let run = match p.work {
            WorkloadSpec::Bulk(r) => format!("{r:?}"),
            WorkloadSpec::Page(r) => format!("{r:?}"),
            WorkloadSpec::Flows(r) => format!("{r:?}"),
            WorkloadSpec::Video(r) => format!("{r:?}"),
        };
        format!("{:?}\n{run}", p.spec)
    }

    const LINK: &str = "[link]\nrate = \"10mbit\"\nrtt = \"50ms\"\nloss = \"1%\"\n";
    const LINK_FLAGS: &str = "--rate 10mbit --rtt 50ms --loss 1%";

    #[test]
    fn flags_and_scenario_keys_give_the_same_run_of_every_workload() {
        let cases = [
            (
                "bulk --proto h3 --size 2MB --tls 1.3 --fec 2 --timeout 40s --cc gquic-cubic",
                "timeout = \"40s\"\n[workload]\nkind = \"bulk\"\nsize = \"2MB\"\n[protocol]\n\
                 protocol = \"h3\"\ntls = \"1.3\"\nfec = 2\ncc = \"gquic-cubic\"\n",
            ),
            (
                "page --proto h2 --page carlucci-small --max-streams 6 --tls 1.2",
                "[workload]\nkind = \"page\"\npage = \"carlucci-small\"\nmax_streams = 6\n\
                 [protocol]\nprotocol = \"h2\"\ntls = \"1.2\"\n",
            ),
            (
                "flows --flow h3:gquic-cubic --flow h1 --duration 20s --offsets 0s,2s --bin 200ms \
                 --cutoff 3s --fec 3",
                "[workload]\nkind = \"flows\"\nflows = \"h3:gquic-cubic + h1\"\nduration = \"20s\"\n\
                 offsets = \"0s,2s\"\nbin = \"200ms\"\ncutoff = \"3s\"\n[protocol]\nfec = 3\n",
            ),
        ];
        for (flags, keys) in cases {
            let args: Vec<&str> = flags
                .split_whitespace()
                .chain(LINK_FLAGS.split(' '))
                .collect();
            assert_eq!(
                flag_form(&args),
                scenario_form(&format!("{keys}{LINK}")),
                "{flags}"
            );
        }
        // Video, across network switches.
        let flags = "video --proto h1 --proto h3 --abr bba2 --duration 60s --seek 20s:40s \
                     --buffer 10s --switch wifi@0s,lte@20s --on-switch reconnect-0rtt";
        let keys = "[workload]\nkind = \"video\"\nplayers = \"h1 + h3\"\nabr = \"bba2\"\n\
                    duration = \"60s\"\nseek = \"20s:40s\"\nbuffer = \"10s\"\n\
                    on_switch = \"reconnect-0rtt\"\n[link]\nswitch = \"wifi@0s,lte@20s\"\n";
        let args: Vec<&str> = flags.split_whitespace().collect();
        assert_eq!(flag_form(&args), scenario_form(keys));
        // A difference shows: the same flags with another value are another run.
        let other: Vec<&str> = flags
            .replace("bba2", "basic")
            .leak()
            .split_whitespace()
            .collect();
        assert_ne!(flag_form(&other), scenario_form(keys));
    }
}
