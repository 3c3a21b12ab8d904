//! `quiclab demo`: the first thing a newcomer runs.
//!
//! For now (the protocol stacks and the experiment runner come next) it shows the lab's foundation at
//! work: it calibrates two contrasting emulated links with quiclab's own probes and prints, for each,
//! what was configured next to what real packets through real kernel stacks measured, plus the
//! emulator's fidelity figures. Results go to `./quiclab-demo/` as JSON.

use anyhow::{Context, Result};
use clap::{Args, Parser};

use crate::calibrate::{self, CalibrateArgs};

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Where to write the results
    #[arg(long, default_value = "quiclab-demo")]
    pub out: std::path::PathBuf,
}

/// The links the demo measures: a DSL-like path and a lossy, long, slow one (seed 000's 3 Mbit/s).
const LINKS: &[(&str, &[&str])] = &[
    ("10mbit-50ms", &["--rate", "10mbit", "--rtt", "50ms"]),
    (
        "3mbit-100ms-2pct-loss-30kB",
        &[
            "--rate", "3mbit", "--rtt", "100ms", "--loss", "2%", "--queue", "30kB",
        ],
    ),
];

#[derive(Parser)]
struct Wrapper {
    #[command(flatten)]
    calibrate: CalibrateArgs,
}

pub fn run(args: DemoArgs) -> Result<i32> {
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    println!("quiclab demo: calibrating two emulated links with real packets (about a minute)\n");
    let mut rows = Vec::new();
    let mut all_pass = true;
    for (name, flags) in LINKS {
        eprintln!("  measuring {name} …");
        let w = Wrapper::try_parse_from(
            [
                "calibrate",
                "--bulk-duration",
                "4s",
                "--loss-packets",
                "6000",
            ]
            .iter()
            .chain(flags.iter()),
        )
        .map_err(|e| anyhow::anyhow!("{e}"))?;
        let (doc, _) = calibrate::measure(&w.calibrate)?;
        let path = args.out.join(format!("{name}.json"));
        std::fs::write(&path, serde_json::to_string_pretty(&doc)?)?;
        all_pass &= doc["pass"].as_bool() == Some(true);
        rows.push((name.to_string(), doc));
    }
    println!(
        "{:<28} {:>17} {:>21} {:>17} {:>12}  verdict",
        "link", "RTT ms cfg/meas", "rate Mbit/s cfg/meas", "loss % cfg/meas", "late p99 us"
    );
    for (name, d) in &rows {
        let f = |v: &serde_json::Value| v.as_f64().unwrap_or(f64::NAN);
        println!(
            "{:<28} {:>8.2}/{:<8.2} {:>10.3}/{:<10.3} {:>8.3}/{:<8.3} {:>12.1}  {}",
            name,
            f(&d["rtt_ms"]["configured"]),
            f(&d["rtt_ms"]["median"]),
            f(&d["rate_mbps"]["configured"]),
            f(&d["rate_mbps"]["measured"]),
            f(&d["loss"]["configured"]) * 100.0,
            f(&d["loss"]["measured"]) * 100.0,
            f(&d["lateness_us"]["p99"]),
            if d["pass"].as_bool() == Some(true) {
                "ok"
            } else {
                "FAIL"
            }
        );
    }
    let stolen = rows
        .iter()
        .filter_map(|(_, d)| d["host"]["cpu_steal_fraction"].as_f64())
        .fold(0.0, f64::max);
    if stolen > 0.02 {
        println!(
            "\nnote: the hypervisor stole up to {:.1}% of this machine's CPU time meanwhile: late releases \
             and RTT tails then say more about the host than about the emulator (rerun when it is quieter)",
            stolen * 100.0
        );
    }
    println!(
        "\nFull results (probes, emulator counters, fidelity figures): {}/",
        args.out.display()
    );
    println!(
        "Next: `quiclab shell --rate 10mbit --rtt 50ms -- bash` to run your own programs across a link."
    );
    Ok(if all_pass { 0 } else { 1 })
}
