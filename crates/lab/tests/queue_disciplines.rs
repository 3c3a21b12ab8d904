//! Root-only: queue disciplines decided at dequeue (CoDel, FQ-CoDel, PIE, ECN marking) with real
//! kernel TCP through real namespaces — the behaviour their RFCs publish, end to end. Each check
//! runs the same link under tail drop beside it, so a discipline that did nothing would fail.
//! Tolerances are wide (a busy 2-core CI machine); the figures measured go in docs/link.md.

use std::time::Duration;

use quiclab_lab::emulator::FidelityReport;
use quiclab_lab::{RunningLab, probe};
use quiclab_link::LinkOptions;
use quiclab_testkit::ensure;

fn root_or_skip(test: &str) -> bool {
    quiclab_testkit::can_build_labs_or_skip(test)
}

/// 10 Mbit/s, 50 ms RTT, a deep (1 MB, 800 ms) buffer under `discipline`, ECN as asked.
fn options(discipline: &str, ecn: bool) -> LinkOptions {
    let mut o = LinkOptions::default();
    for (k, v) in [
        ("rate", "10mbit"),
        ("rtt", "50ms"),
        ("queue", "1000kB"),
        ("queue-discipline", discipline),
        ("ecn", if ecn { "true" } else { "false" }),
    ] {
        o.set(k, v).unwrap();
    }
    o
}

/// One CUBIC download of `secs` seconds (and, alongside, UDP echo probes every 50 ms after the
/// first 3 s when `probe_rtt`): the emulator's report and the probes' RTTs.
fn bulk(o: &LinkOptions, secs: u64, probe_rtt: bool) -> Result<(FidelityReport, Vec<f64>), String> {
    let spec = o.to_spec(&quiclab_outputs::input::read_input)?;
    let mut lab = RunningLab::start_for(o, &spec, None, None).map_err(|e| e.to_string())?;
    let rtts = std::thread::scope(|scope| {
        let lab_ref = &lab.lab;
        let prober = probe_rtt.then(|| {
            scope.spawn(move || {
                std::thread::sleep(Duration::from_secs(3));
                probe::udp_echo(
                    lab_ref,
                    false,
                    (secs - 4) as usize * 20,
                    Duration::from_millis(50),
                    64,
                )
            })
        });
        let bulk = probe::tcp_bulk_download(&lab.lab, false, Duration::from_secs(secs), "cubic");
        let rtts = match prober {
            Some(p) => p.join().expect("prober").map_err(|e| e.to_string())?.rtt_ms,
            None => Vec::new(),
        };
        bulk.map_err(|e| e.to_string())?;
        Ok::<_, String>(rtts)
    })?;
    let f = lab.stop_emulator().map_err(|e| e.to_string())?;
    Ok((f, rtts))
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s[s.len() / 2]
}

#[test]
fn codel_keeps_a_cubic_flows_queue_near_its_target_where_tail_drop_fills_the_buffer() {
    if !root_or_skip("codel") {
        return;
    }
    quiclab_testkit::timing("codel", 2, || {
        let (tail, _) = bulk(&options("droptail", false), 15, false)?;
        let (codel, _) = bulk(&options("codel", false), 15, false)?;
        let (t, c) = (&tail.downlink, &codel.downlink);
        let p = |d: &quiclab_lab::emulator::DirectionFidelity| {
            (
                d.sojourn_ms.p50.unwrap_or(f64::NAN),
                d.sojourn_ms.p90.unwrap_or(f64::NAN),
            )
        };
        let ((t50, _), (c50, c90)) = (p(t), p(c));
        eprintln!(
            "codel: sojourn p50 {c50:.2} ms p90 {c90:.2} ms ({:?}); tail drop p50 {t50:.1} ms",
            c.model.aqm
        );
        ensure(t50 > 100.0, || format!("tail drop p50 sojourn {t50:.1} ms"))?;
        // The standing queue stays within a few packets of CoDel's 5 ms target.
        ensure(c50 < 10.0 && c90 < 15.0, || {
            format!("codel sojourn p50 {c50:.1} ms, p90 {c90:.1} ms")
        })?;
        let aqm = c.model.aqm.ok_or("codel reports no discipline counters")?;
        ensure(
            aqm.aqm_drops > 0 && c.model.counters.dropped_queue_packets == 0,
            || {
                format!(
                    "codel {aqm:?}, overflow {}",
                    c.model.counters.dropped_queue_packets
                )
            },
        )?;
        ensure(c.model.discipline == "codel", || c.model.discipline.clone())
    });
}

#[test]
fn fq_codel_keeps_a_thin_flows_rtt_near_the_base_beside_a_bulk_flow() {
    if !root_or_skip("fq-codel") {
        return;
    }
    quiclab_testkit::timing("fq-codel", 2, || {
        let (_, tail) = bulk(&options("droptail", false), 12, true)?;
        let (_, fq) = bulk(&options("fq-codel", false), 12, true)?;
        ensure(tail.len() > 50 && fq.len() > 50, || {
            format!(
                "probes answered: tail drop {}, fq-codel {}",
                tail.len(),
                fq.len()
            )
        })?;
        let (t, f) = (median(&tail), median(&fq));
        eprintln!("probe RTT median: tail drop {t:.1} ms, fq-codel {f:.1} ms");
        ensure(t > 150.0, || {
            format!("tail drop: probe RTT median {t:.1} ms")
        })?;
        // Base 50 ms: the probe's packets form a sparse flow, served before the bulk's backlog.
        ensure(f < 60.0, || format!("fq-codel: probe RTT median {f:.1} ms"))
    });
}

#[test]
fn pie_holds_a_cubic_flows_queue_about_its_15_ms_target() {
    if !root_or_skip("pie") {
        return;
    }
    quiclab_testkit::timing("pie", 2, || {
        let (pie, _) = bulk(&options("pie", false), 15, false)?;
        let d = &pie.downlink;
        let p50 = d.sojourn_ms.p50.unwrap_or(f64::NAN);
        eprintln!("pie: sojourn {:?}, {:?}", d.sojourn_ms, d.model.aqm);
        ensure((4.0..40.0).contains(&p50), || {
            format!("pie p50 sojourn {p50:.1} ms")
        })?;
        let aqm = d.model.aqm.ok_or("no discipline counters")?;
        ensure(aqm.aqm_drops > 0, || format!("{aqm:?}"))
    });
}

#[test]
fn with_ecn_codel_marks_tcp_instead_of_dropping_and_tcp_answers_the_marks() {
    if !root_or_skip("codel-ecn") {
        return;
    }
    quiclab_testkit::timing("codel-ecn", 2, || {
        let (f, _) = bulk(&options("codel", true), 12, false)?;
        let d = &f.downlink;
        let aqm = d.model.aqm.ok_or("no discipline counters")?;
        // The lab's TCP negotiated ECN (tcp_ecn = 1), so its data is ECT: CoDel marks it. That the
        // queue stays short with no drop at all means the sender slowed down on the marks alone.
        ensure(aqm.marks > 0 && aqm.aqm_drops == 0, || format!("{aqm:?}"))?;
        ensure(d.model.counters.marked_packets == aqm.marks, || {
            format!("model marks {}", d.model.counters.marked_packets)
        })?;
        ensure(d.marks_not_applied == 0, || "marks not applied".into())?;
        let p90 = d.sojourn_ms.p90.unwrap_or(f64::NAN);
        eprintln!("codel+ecn: sojourn {:?}, {aqm:?}", d.sojourn_ms);
        ensure(p90 < 15.0, || format!("p90 sojourn {p90:.1} ms"))?;
        ensure(d.model.discipline == "codel+ecn", || {
            d.model.discipline.clone()
        })
    });
}
