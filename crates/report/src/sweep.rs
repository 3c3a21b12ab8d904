//! The figure of a rate sweep (docs/figures/sweep-SCENARIO.svg; issue 60): goodput against the
//! shaped rate, one line per combination of the other settings that vary (protocol and server),
//! and below it each end's CPU in cores busy (client solid, server dashed) — so that a protocol
//! falling behind is read beside what its ends spent. A point whose runs were the machine's limit
//! (more than a quarter had a CPU-bound end or a link off its targets, as `machine_limit` judges
//! them) is drawn hollow. Pure: SVG text from the runs.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use quiclab_verdict::study::{MachineLimit, RunRecord, RunStatus, over_machine_limited_share};

use crate::html::esc;

const WIDTH: f64 = 980.0;
const PLOT_X: f64 = 70.0;
const PLOT_W: f64 = 640.0;
const GOODPUT_Y: f64 = 60.0;
const GOODPUT_H: f64 = 300.0;
const CPU_Y: f64 = 410.0;
const CPU_H: f64 = 160.0;
const HEIGHT: f64 = 630.0;
const COLOURS: [&str; 8] = [
    "#1565c0", "#c62828", "#2e7d32", "#ef6c00", "#6a1b9a", "#00838f", "#5d4037", "#546e7a",
];

/// One point of a line: the median of the clean runs at one rate, and whether the machine was
/// the limit there.
struct Point {
    rate_mbps: f64,
    goodput: Option<f64>,
    client_cpu: Option<f64>,
    server_cpu: Option<f64>,
    limited: bool,
    runs: usize,
}

/// The sweep figure of `scenario`'s runs over their `rate` setting, or None when fewer than three
/// rates were run or no run measured goodput.
pub fn sweep_svg(scenario: &str, runs: &[RunRecord]) -> Option<String> {
    let rate_of = |r: &RunRecord| {
        r.params
            .get("rate")
            .and_then(|v| quiclab_link::units::parse_rate(v).ok())
            .map(|bps| bps as f64 / 1e6)
    };
    let rates: BTreeSet<u64> = runs.iter().filter_map(rate_of).map(|r| r as u64).collect();
    if rates.len() < 3 {
        return None;
    }
    // The settings that vary besides the rate name the lines.
    let mut values: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for r in runs {
        for (k, v) in &r.params {
            values.entry(k).or_default().insert(v);
        }
    }
    let varying: Vec<&str> = values
        .iter()
        .filter(|(k, v)| **k != "rate" && v.len() > 1)
        .map(|(k, _)| *k)
        .collect();
    let mut lines: BTreeMap<String, BTreeMap<u64, Vec<&RunRecord>>> = BTreeMap::new();
    for r in runs {
        let Some(rate) = rate_of(r) else { continue };
        let label = varying
            .iter()
            .map(|k| r.params.get(*k).map_or("–", String::as_str))
            .collect::<Vec<_>>()
            .join(" · ");
        lines
            .entry(label)
            .or_default()
            .entry(rate as u64)
            .or_default()
            .push(r);
    }
    let metric = |rs: &[&RunRecord], m: &str| {
        let v: Vec<f64> = rs
            .iter()
            .filter(|r| r.status == RunStatus::Ok { flagged: false })
            .filter_map(|r| r.metrics.get(m).copied())
            .filter(|v| v.is_finite())
            .collect();
        quiclab_experiment::stats::median(&v)
    };
    let lines: Vec<(String, Vec<Point>)> = lines
        .into_iter()
        .map(|(label, by_rate)| {
            let points = by_rate
                .into_iter()
                .map(|(rate, rs)| {
                    let limits: Vec<MachineLimit> =
                        rs.iter().filter_map(|r| MachineLimit::of(r)).collect();
                    let limited = limits.iter().filter(|l| l.any()).count();
                    Point {
                        rate_mbps: rate as f64,
                        goodput: metric(&rs, "goodput_mbps"),
                        client_cpu: metric(&rs, "client_cpu_cores"),
                        server_cpu: metric(&rs, "server_cpu_cores"),
                        limited: over_machine_limited_share(limited, limits.len()),
                        runs: rs.len(),
                    }
                })
                .collect();
            (label, points)
        })
        .collect();
    if !lines
        .iter()
        .any(|(_, ps)| ps.iter().any(|p| p.goodput.is_some()))
    {
        return None;
    }
    let max_rate = *rates.last()? as f64;
    let max_cpu = lines
        .iter()
        .flat_map(|(_, ps)| ps.iter())
        .flat_map(|p| [p.client_cpu, p.server_cpu])
        .flatten()
        .fold(1.0_f64, f64::max)
        .ceil();
    let x = |mbps: f64| PLOT_X + mbps / max_rate * PLOT_W;
    let y_goodput = |mbps: f64| GOODPUT_Y + GOODPUT_H - mbps / max_rate * GOODPUT_H;
    let y_cpu = |cores: f64| CPU_Y + CPU_H - cores / max_cpu * CPU_H;
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{HEIGHT}\" \
         viewBox=\"0 0 {WIDTH} {HEIGHT}\" font-family=\"DejaVu Sans, sans-serif\" font-size=\"11\">\n\
         <rect width=\"{WIDTH}\" height=\"{HEIGHT}\" fill=\"white\"/>\n\
         <text x=\"10\" y=\"18\" font-size=\"14\" font-weight=\"bold\">{}: goodput and each end's CPU against the shaped rate</text>\n\
         <text x=\"10\" y=\"34\" fill=\"#555\">medians of the runs that met the link's targets; hollow: more than a quarter of the runs there had a CPU-bound end or a link off its targets (the machine's limit)</text>\n",
        esc(scenario)
    );
    // Axes, grid and the diagonal (goodput = rate).
    for (top, height, label) in [
        (GOODPUT_Y, GOODPUT_H, "goodput (Mbit/s)"),
        (CPU_Y, CPU_H, "CPU (cores busy)"),
    ] {
        let _ = writeln!(
            s,
            "<rect x=\"{PLOT_X}\" y=\"{top}\" width=\"{PLOT_W}\" height=\"{height}\" fill=\"none\" stroke=\"#999\"/>\n\
             <text x=\"14\" y=\"{:.1}\" transform=\"rotate(-90 14 {:.1})\" text-anchor=\"middle\">{label}</text>",
            top + height / 2.0,
            top + height / 2.0
        );
    }
    for rate in &rates {
        let rx = x(*rate as f64);
        let _ = writeln!(
            s,
            "<line x1=\"{rx:.1}\" y1=\"{GOODPUT_Y}\" x2=\"{rx:.1}\" y2=\"{:.1}\" stroke=\"#eee\"/>\n\
             <line x1=\"{rx:.1}\" y1=\"{CPU_Y}\" x2=\"{rx:.1}\" y2=\"{:.1}\" stroke=\"#eee\"/>\n\
             <text x=\"{rx:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{rate}</text>\n\
             <text x=\"{rx:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{rate}</text>",
            GOODPUT_Y + GOODPUT_H,
            CPU_Y + CPU_H,
            GOODPUT_Y + GOODPUT_H + 14.0,
            CPU_Y + CPU_H + 14.0
        );
    }
    let _ = writeln!(
        s,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">shaped rate (Mbit/s)</text>",
        PLOT_X + PLOT_W / 2.0,
        CPU_Y + CPU_H + 30.0
    );
    for i in 0..=4 {
        let v = max_rate * f64::from(i) / 4.0;
        let c = max_cpu * f64::from(i) / 4.0;
        let _ = writeln!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{v:.0}</text>\n\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{c:.2}</text>",
            PLOT_X - 4.0,
            y_goodput(v) + 4.0,
            PLOT_X - 4.0,
            y_cpu(c) + 4.0
        );
    }
    let _ = writeln!(
        s,
        "<line x1=\"{PLOT_X}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{GOODPUT_Y}\" stroke=\"#bbb\" stroke-dasharray=\"6 4\"/>",
        GOODPUT_Y + GOODPUT_H,
        PLOT_X + PLOT_W
    );
    for (i, (label, points)) in lines.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let path = |y: &dyn Fn(&Point) -> Option<f64>| {
            points
                .iter()
                .filter_map(|p| y(p).map(|v| format!("{:.1},{:.1}", x(p.rate_mbps), v)))
                .collect::<Vec<_>>()
                .join(" ")
        };
        for (ys, dash) in [
            (
                &(|p: &Point| p.goodput.map(y_goodput)) as &dyn Fn(&Point) -> Option<f64>,
                "",
            ),
            (&|p: &Point| p.client_cpu.map(y_cpu), ""),
            (
                &|p: &Point| p.server_cpu.map(y_cpu),
                " stroke-dasharray=\"5 3\"",
            ),
        ] {
            let _ = writeln!(
                s,
                "<polyline points=\"{}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"1.6\"{dash}/>",
                path(ys)
            );
            for p in points {
                if let Some(v) = ys(p) {
                    let fill = if p.limited { "white" } else { colour };
                    let _ = writeln!(
                        s,
                        "<circle cx=\"{:.1}\" cy=\"{v:.1}\" r=\"3.5\" fill=\"{fill}\" stroke=\"{colour}\"><title>{} at {} Mbit/s: {} runs</title></circle>",
                        x(p.rate_mbps),
                        esc(label),
                        p.rate_mbps,
                        p.runs
                    );
                }
            }
        }
        let ly = GOODPUT_Y + 10.0 + i as f64 * 18.0;
        let _ = writeln!(
            s,
            "<line x1=\"730\" y1=\"{ly:.1}\" x2=\"756\" y2=\"{ly:.1}\" stroke=\"{colour}\" stroke-width=\"2\"/>\n\
             <text x=\"762\" y=\"{:.1}\">{}</text>",
            ly + 4.0,
            esc(label)
        );
    }
    let ly = CPU_Y + 10.0;
    let _ = writeln!(
        s,
        "<line x1=\"730\" y1=\"{ly:.1}\" x2=\"756\" y2=\"{ly:.1}\" stroke=\"#333\" stroke-width=\"1.6\"/>\n\
         <text x=\"762\" y=\"{:.1}\">client</text>\n\
         <line x1=\"730\" y1=\"{:.1}\" x2=\"756\" y2=\"{:.1}\" stroke=\"#333\" stroke-width=\"1.6\" stroke-dasharray=\"5 3\"/>\n\
         <text x=\"762\" y=\"{:.1}\">server</text>\n</svg>",
        ly + 4.0,
        ly + 18.0,
        ly + 18.0,
        ly + 22.0
    );
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(proto: &str, rate: &str, rep: u32, goodput: f64, bound: bool) -> RunRecord {
        RunRecord {
            params: BTreeMap::from([
                ("protocol".to_string(), proto.to_string()),
                ("rate".to_string(), rate.to_string()),
                ("size".to_string(), "200MB".to_string()),
            ]),
            repetition: rep,
            status: RunStatus::Ok { flagged: false },
            metrics: BTreeMap::from([
                ("goodput_mbps".to_string(), goodput),
                ("client_cpu_cores".to_string(), goodput / 1000.0),
                ("server_cpu_cores".to_string(), 0.2),
                (
                    "client_cpu_bound".to_string(),
                    if bound { 1.0 } else { 0.0 },
                ),
            ]),
        }
    }

    #[test]
    fn a_line_per_protocol_hollow_where_the_machine_was_the_limit() {
        let mut runs = Vec::new();
        for rep in 1..=4 {
            for (rate, mbps) in [("100mbit", 95.0), ("500mbit", 470.0), ("1gbit", 900.0)] {
                runs.push(run("h2", rate, rep, mbps, false));
                runs.push(run(
                    "h3",
                    rate,
                    rep,
                    mbps * 0.8,
                    rate == "1gbit" && rep <= 2,
                ));
            }
        }
        let svg = sweep_svg("zhang2024-rates", &runs).unwrap();
        // Two lines (the size does not vary), three points each in three panels' lines.
        assert!(
            svg.contains(">h2</text>") && svg.contains(">h3</text>"),
            "{svg}"
        );
        assert_eq!(svg.matches("<polyline").count(), 6);
        assert_eq!(svg.matches("<circle").count(), 18);
        // h3 at 1 Gbit/s: 2 of 4 runs CPU-bound, so hollow in all three of its panels.
        assert_eq!(svg.matches("fill=\"white\" stroke=\"#c62828\"").count(), 3);
        assert_eq!(svg.matches("fill=\"white\" stroke=\"#1565c0\"").count(), 0);
        assert!(svg.contains("h3 at 1000 Mbit/s: 4 runs"));
        // Fewer than three rates: no sweep to draw.
        let two: Vec<RunRecord> = runs
            .into_iter()
            .filter(|r| r.params["rate"] != "1gbit")
            .collect();
        assert!(sweep_svg("x", &two).is_none());
    }
}
