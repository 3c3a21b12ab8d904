//! What every workload command shares: its output flags ([`RunFlags`]), the run its key flags ask
//! for ([`run_of`]) and running it in a fresh lab ([`execute`]). The key flags themselves are
//! derived from quiclab-model's key table (`link_args`).

use std::path::PathBuf;

use anyhow::{Result, anyhow};
use clap::Args;
use quiclab_lab::LinkSpec;
use quiclab_link::LinkOptions;
use quiclab_model::WorkloadKind;
use quiclab_workload::{Workload, WorkloadResult, WorkloadSpec};

use crate::link_args::{Given, HostFlags, Kind, KindFlags, LinkFlags, flag_of, link_spec, params};

/// A run's own flags: what it keeps and prints.
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Output")]
pub struct RunFlags {
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

/// The flags of a workload command of kind `K`: its keys (derived from the table), the output
/// flags, network switches, the link and the host. (Page and flows runs refuse a switch schedule
/// with the reason, as scenarios do.)
#[derive(Args, Debug)]
pub struct WorkloadArgs<K: Kind + Clone + std::fmt::Debug + Send + Sync + 'static> {
    #[command(flatten)]
    pub keys: KindFlags<K>,
    #[command(flatten)]
    pub run: RunFlags,
    #[command(flatten)]
    pub link: LinkFlags,
    #[command(flatten)]
    pub host: HostFlags,
}

impl<K: Kind + Clone + std::fmt::Debug + Send + Sync + 'static> WorkloadArgs<K> {
    /// The link and the run the flags ask for, every value through its key's row.
    pub fn prepare(&self) -> Result<(LinkOptions, LinkSpec, WorkloadSpec)> {
        run_of(K::KIND, &[&self.keys, &self.link, &self.host])
    }
}

/// The link and the run of `kind` that the flags of `groups` ask for; an error names the flag
/// (a refused combination, the flag of the key it blames).
pub fn run_of(
    kind: WorkloadKind,
    groups: &[&dyn Given],
) -> Result<(LinkOptions, LinkSpec, WorkloadSpec)> {
    let params = params(kind, groups)?;
    let spec = link_spec(&params)?;
    let work = quiclab_workload::params::build(&params, &spec)
        .map_err(|e| anyhow!("{}: {}", flag_of(e.key, kind), e.message))?;
    Ok((params.link, spec, work))
}

/// Runs `run` in a fresh lab for `spec` (its work directory kept in `--keep`), lets `artifacts`
/// write what the run asks for (HAR, waterfall) and prints the result with the fidelity verdict
/// `run` would store (`quiclab_runner::command`). Exit status 1 when the result says the run
/// failed or timed out (the reason on stderr).
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
    let judged = quiclab_runner::command::run(
        run,
        (options, spec),
        flags.keep.as_deref(),
        (flags.pcap.as_deref(), flags.force),
    )?;
    let out = &judged.outcome;
    if let Some(c) = out.fidelity.as_ref().and_then(|f| f.capture.as_ref()) {
        eprintln!("{c}");
    }
    // The result is printed whatever became of the files written from it.
    let written = artifacts(&out.result);
    let text = quiclab_runner::command::text(&out.result, judged.flags.as_deref(), flags.json)?;
    println!("{text}");
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

    use crate::{Cli, Command};
    use clap::Parser;

    /// The link (less its seed: a scenario's runs are seeded) and the run, as text.
    fn flag_form(args: &[&str]) -> String {
        let argv = std::iter::once("quiclab").chain(args.iter().copied());
        let (_, mut spec, run) = match Cli::try_parse_from(argv).unwrap().command {
            Command::Bulk(a) => a.prepare(),
            Command::Page(a) => a.workload.prepare(),
            Command::Flows(a) => a.prepare(),
            Command::Video(a) => a.prepare(),
            other => panic!("{other:?}"),
        }
        .unwrap();
        spec.seed = 0;
        format!("{spec:?}\n{run:?}")
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
        format!("{:?}\n{:?}", p.spec, p.work)
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
