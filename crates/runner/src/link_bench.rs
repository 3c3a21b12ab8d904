//! `quiclab bench link`: the emulator's own parts (`quiclab_lab::bench`) and the QUIC part
//! (issue 60): h3 downloads by quinn through the emulator, unshaped and shaped at rising rates,
//! with what each costs the emulator and both endpoints — the top shaped rate at which an h3
//! result is the link's and not the machine's.

use anyhow::Result;
use quiclab_proto::options::Protocol;
use quiclab_workload::Workload;
use quiclab_workload::bulk::BulkRun;
use serde_json::{Value, json};

/// The link's fidelity targets for one download at `rate_bps`: the downlink delivered within 2 %
/// of the rate while backlogged, and release lateness p99 ≤ 100 µs; with the share of the rate
/// carried over the transfer, which for QUIC is the sender's doing (reported, not a target).
fn rate_criteria(
    f: &quiclab_lab::FidelityReport,
    rate_bps: f64,
    transfer_s: f64,
) -> (f64, f64, bool, bool) {
    let measured = f.downlink.backlogged_rate_bps.unwrap_or(0.0);
    let error = (measured - rate_bps) / rate_bps;
    let carried = f.downlink.delivered_bytes as f64 * 8.0 / transfer_s.max(1e-9) / rate_bps;
    (
        error,
        carried,
        error.abs() <= 0.02,
        f.lateness_us.p99 <= 100.0,
    )
}

/// One h3 download (quiclab's quinn on both ends) on `spec` in a fresh lab set up as `bench`
/// asks: the result and the emulator's report.
fn quic_download(
    bench: &quiclab_lab::bench::LinkBench,
    spec: &quiclab_lab::LinkSpec,
    size: u64,
) -> Result<(quiclab_model::bulk::BulkResult, quiclab_lab::FidelityReport)> {
    let mut running = bench.start_lab(spec)?;
    let out = BulkRun::new(Protocol::H3, size).run(&mut running, None)?;
    drop(running);
    let fidelity = out
        .fidelity
        .ok_or_else(|| anyhow::anyhow!("the download ran without the emulator"))?;
    Ok((out.result, fidelity))
}

/// The figures of one QUIC download beside the link's: goodput, what the emulator spent per
/// packet and per Gbit carried, and both endpoints' costs (issue 60).
fn quic_figures(
    r: &quiclab_model::bulk::BulkResult,
    f: &quiclab_lab::FidelityReport,
) -> serde_json::Map<String, Value> {
    let packets = f.downlink.delivered_packets + f.uplink.delivered_packets;
    let cpu_s = f.cpu_core_fraction * f.wall_seconds;
    let mut m = serde_json::Map::new();
    m.insert("goodput_mbps".into(), json!(r.goodput_mbps));
    m.insert("bytes".into(), json!(r.bytes));
    m.insert("offload".into(), json!(f.downlink.offload.is_some()));
    m.insert("packets".into(), json!(packets));
    m.insert(
        "emulator_cpu_core_fraction".into(),
        json!(f.cpu_core_fraction),
    );
    m.insert(
        "emulator_cpu_us_per_packet".into(),
        json!(cpu_s * 1e6 / packets.max(1) as f64),
    );
    m.insert(
        "emulator_cpu_s_per_gbit".into(),
        json!(quiclab_lab::bench::cpu_s_per_gbit(f)),
    );
    m.insert("lateness_us".into(), json!(f.lateness_us));
    m.insert("endpoints".into(), json!(r.endpoints));
    m
}

/// `quiclab bench link`'s QUIC part (issue 60): h3 downloads by quinn through the emulator,
/// unshaped at 10 ms RTT (what the emulator and the endpoints carry, and what it costs each of
/// them per packet and per Gbit), then shaped at each of `rates_gbit` at 10 ms RTT up to the
/// first rate where the link misses its targets or an end is CPU-bound: the top shaped rate at
/// which an h3 result is the link's and not the machine's.
pub fn quic_link(bench: &quiclab_lab::bench::LinkBench, rates_gbit: &[f64]) -> Result<Value> {
    let secs = if bench.quick { 3.0 } else { 8.0 };
    let mut out = serde_json::Map::new();
    // Unshaped: as much as goes in `secs` at 1 Gbit/s, at least 50 MB.
    let size = ((1e9 * secs / 8.0) as u64).max(50_000_000);
    let (r, f) = quic_download(bench, &quiclab_lab::bench::link(None, 10.0, 0.0), size)?;
    let unshaped = quic_figures(&r, &f);
    bench.say(format!(
        "quic unshaped, rtt 10 ms: h3 goodput {:.0} Mbit/s, emulator {:.2} us per packet, {} s per Gbit{}",
        r.goodput_mbps,
        unshaped["emulator_cpu_us_per_packet"].as_f64().unwrap_or(f64::NAN),
        unshaped["emulator_cpu_s_per_gbit"]
            .as_f64()
            .map_or("-".into(), |v| format!("{v:.3}")),
        r.endpoints.as_ref().map_or(String::new(), |e| format!("\n{e}"))
    ));
    out.insert("quic_unshaped_10ms".into(), Value::Object(unshaped));
    let mut sweep = Vec::new();
    let (mut best_rate, mut best_both) = (Value::Null, Value::Null);
    for &gbit in rates_gbit {
        let rate = gbit * 1e9;
        let size = ((rate * secs / 8.0) as u64).max(5_000_000);
        let (r, f) = quic_download(
            bench,
            &quiclab_lab::bench::link(Some(rate as u64), 10.0, 0.0),
            size,
        )?;
        let (error, carried, within, late_ok) = rate_criteria(&f, rate, r.total_ms / 1e3);
        let mut row = quic_figures(&r, &f);
        row.insert("configured_mbps".into(), json!(rate / 1e6));
        row.insert("error_frac".into(), json!(error));
        row.insert("carried_fraction".into(), json!(carried));
        let bound = r
            .endpoints
            .as_ref()
            .map(|e| e.cpu_bound())
            .unwrap_or_default();
        row.insert("cpu_bound".into(), json!(bound));
        // A CPU-bound end makes the result the machine's, whatever the link did.
        let rate_ok = within && bound.is_empty();
        bench.say(format!(
            "quic {gbit} Gbit/s: goodput {:.1} Mbit/s, delivered {:+.2}% while backlogged, carried {:.1}%, lateness p99 {:.1} us{}",
            r.goodput_mbps,
            error * 100.0,
            carried * 100.0,
            f.lateness_us.p99,
            if bound.is_empty() {
                String::new()
            } else {
                format!(", CPU-bound: {bound:?}")
            }
        ));
        sweep.push(Value::Object(row));
        if !rate_ok {
            break;
        }
        best_rate = json!(gbit);
        if late_ok {
            best_both = json!(gbit);
        }
    }
    out.insert("quic_max_rate_sweep".into(), Value::Array(sweep));
    out.insert(
        "quic_max_rate_within_2pct_no_cpu_bound_gbit".into(),
        best_rate.clone(),
    );
    out.insert(
        "quic_max_rate_within_2pct_no_cpu_bound_and_p99_lateness_100us_gbit".into(),
        best_both.clone(),
    );
    bench.say(format!(
        "h3 (quinn): highest rate delivered within 2% with no CPU-bound end: {best_rate} Gbit/s; also with p99 lateness <= 100 us: {best_both} Gbit/s"
    ));
    Ok(Value::Object(out))
}

/// `quiclab bench link`: the emulator's parts (`quiclab_lab::bench`) and the QUIC part
/// (`quic`, [`quic_link`] over `quic_rates_gbit`), those named in `only` (all when empty).
pub fn link(
    bench: &quiclab_lab::bench::LinkBench,
    only: &[String],
    max_rates_gbit: &[f64],
    mix_runs: Option<usize>,
    quic_rates_gbit: &[f64],
) -> Result<Value> {
    let known = quiclab_lab::bench::PARTS.iter().chain(&["quic"]);
    if let Some(unknown) = only.iter().find(|o| !known.clone().any(|k| k == o)) {
        anyhow::bail!(
            "--only {unknown}: no such part; the parts are {}, quic",
            quiclab_lab::bench::PARTS.join(", ")
        );
    }
    let lab_parts: Vec<String> = only.iter().filter(|o| *o != "quic").cloned().collect();
    let mut doc = if only.is_empty() || !lab_parts.is_empty() {
        bench.run(&lab_parts, max_rates_gbit, mix_runs)?
    } else {
        json!({})
    };
    let wants_quic = only.is_empty() || only.iter().any(|o| o == "quic");
    if wants_quic
        && let (Value::Object(d), Value::Object(q)) = (&mut doc, quic_link(bench, quic_rates_gbit)?)
    {
        d.extend(q);
    }
    Ok(doc)
}

/// `--json` of `quiclab bench link` and `bench stacks`: the document, pretty.
pub fn print_json(on: bool, doc: &impl serde::Serialize) -> Result<()> {
    if on {
        println!("{}", serde_json::to_string_pretty(doc)?);
    }
    Ok(())
}
