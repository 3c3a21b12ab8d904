//! `quiclab bench stacks`: the protocol stacks' unshaped goodput and CPU per GB, through the
//! emulator and over a plain veth pair (so the emulator's share of the cost is visible).

use anyhow::Result;
use quiclab_lab::{RunningLab, SchedulerOptions};
use quiclab_proto::options::Protocol;
use serde_json::{Value, json};

use crate::Workload;
use crate::bulk::BulkRun;

/// `quiclab bench stacks`: h1, h2 and h3 downloads of `size` bytes, unshaped, through the
/// emulator and over a plain veth pair: each a bulk result (less its fidelity report) with the
/// CPU stolen meanwhile. Each row is said on stderr.
pub fn stacks(size: u64) -> Result<Vec<Value>> {
    // No shaping at all: no rate, no delay, no queue limit. What is measured is the stacks (and, on
    // the emulator path, the emulator's own cost).
    let mut unshaped = quiclab_lab::bench::link(None, 0.0, 0.0);
    unshaped.tun_compensation = 0;
    let mut rows = Vec::new();
    for proto in [Protocol::H1, Protocol::H2, Protocol::H3] {
        for emulated in [true, false] {
            let meter = quiclab_lab::host::StealMeter::start();
            let mut running = if emulated {
                RunningLab::start(
                    &unshaped,
                    &Default::default(),
                    SchedulerOptions::default(),
                    None,
                    None,
                )?
            } else {
                RunningLab::start_direct(&Default::default())?
            };
            let run = BulkRun::new(proto, size);
            let out = run.run(&mut running, None)?;
            let mut doc = serde_json::to_value(&out.result)?;
            drop(running);
            let stolen = meter.fraction();
            doc["cpu_steal_fraction"] = json!(stolen);
            let f = |k: &str| doc[k].as_f64().unwrap_or(f64::NAN);
            let gb = f("bytes") / 1e9;
            eprintln!(
                "{:<3} {:<8} goodput {:>8.1} Mbit/s  CPU s/GB: client {:>6.2}  server {:>6.2}  emulator {:>6}{}",
                proto,
                if emulated { "emulator" } else { "veth" },
                f("goodput_mbps"),
                f("cpu_client_s_per_gb"),
                f("cpu_server_s_per_gb"),
                doc["cpu_emulator_s"]
                    .as_f64()
                    .map_or("-".into(), |c| format!("{:.2}", c / gb)),
                if stolen > 0.02 {
                    format!(
                        "  (warning: {:.1}% CPU stolen by the hypervisor)",
                        stolen * 100.0
                    )
                } else {
                    String::new()
                }
            );
            doc.as_object_mut().map(|o| o.remove("fidelity"));
            rows.push(doc);
        }
    }
    Ok(rows)
}
