//! One parameter, one meaning: a command's flags and a scenario's keys give the same typed
//! run, for every workload (both go through `Params::set` and `Params::build`).

use clap::Parser;
use quiclab::{Cli, Command};

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
