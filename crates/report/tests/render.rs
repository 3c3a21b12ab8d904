//! End-to-end rendering into a temporary directory.

mod common;

use common::*;
use quiclab_report::{ReportInput, ReportOptions, RunStatus, render};

#[test]
fn full_report() {
    let dir = temp_dir("full");
    // A figure of an earlier report of the same directory (in quiclab's manifest) is removed;
    // files a user put there, figures or not, are kept.
    std::fs::remove_dir(&dir).unwrap();
    quiclab_outputs::claim_dir(&dir, "--out").unwrap();
    let fig = quiclab_outputs::claim_subdir(&dir, "figures", "figures").unwrap();
    quiclab_outputs::write_in_claimed(&fig.join("timeseries_99_old.svg"), b"<svg/>").unwrap();
    std::fs::write(dir.join("figures/notes.txt"), "mine").unwrap();
    std::fs::write(dir.join("figures/mine.svg"), "<svg>mine</svg>").unwrap();
    let out = render(&synthetic(), &ReportOptions::default(), &dir).unwrap();
    let html = std::fs::read_to_string(&out.html).unwrap();
    assert_eq!(out.html, dir.join("report.html"));
    assert!(!dir.join("figures/timeseries_99_old.svg").exists());
    assert!(dir.join("figures/notes.txt").exists());
    assert_eq!(
        std::fs::read_to_string(dir.join("figures/mine.svg")).unwrap(),
        "<svg>mine</svg>"
    );

    // Figures: total_ms, ttfb_ms, goodput_mbps and handshake_ms have values
    // (loss_ratio is missing everywhere and skipped): 4 bar + 4 improvement
    // figures, 2 CDFs (one per setting), 1 time series.
    let titles = [
        "Download time — median and its 95 % interval per setting",
        "Time to first byte — median and its 95 % interval per setting",
        "Goodput — median and its 95 % interval per setting",
        "Handshake time — median and its 95 % interval per setting",
        "Download time — improvement over h1 (%)",
        "Time to first byte — improvement over h1 (%)",
        "Goodput — improvement over h1 (%)",
        "Handshake time — improvement over h1 (%)",
        "CDF of Download time — rate=10mbit, loss=0%",
        "CDF of Download time — rate=10mbit, loss=2%",
        "Run proto=h3;rate=10mbit;loss=2%;rep=1",
    ];
    assert_eq!(svg_count(&html), titles.len());
    for t in titles {
        // Once in the SVG text, once in the caption.
        assert!(html.matches(t).count() >= 2, "title {t:?} missing");
    }
    assert!(!html.contains("Loss ratio"));

    // PNGs are drawn when the machine has a font (this one is expected to:
    // fonts-dejavu-core); either way every listed file exists.
    let svgs = out
        .figures
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "svg"));
    assert_eq!(svgs.count(), titles.len());
    // With a font at hand every figure has its PNG too, and nothing is noted: a PNG that could
    // not be written (as when its temporary file lost the `.png` the encoder goes by) fails here.
    if quiclab_fonts::find(None).is_some() {
        assert!(out.notes.is_empty(), "{:?}", out.notes);
        assert_eq!(out.figures.len(), 2 * titles.len());
    }
    // CDF files are named by their setting, not by its number alone (issue 61).
    for stem in [
        "cdf_total-ms_0-rate-10mbit-loss-0",
        "cdf_total-ms_1-rate-10mbit-loss-2",
    ] {
        assert!(
            dir.join(format!("figures/{stem}.svg")).exists(),
            "{stem}: {:?}",
            out.figures
        );
    }
    for f in &out.figures {
        let len = std::fs::metadata(f).unwrap().len();
        assert!(len > 0, "{} is empty", f.display());
        assert!(f.starts_with(dir.join("figures")));
    }
    for f in out
        .figures
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "png"))
    {
        let bytes = std::fs::read(f).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    }

    // Header and counts.
    assert!(html.contains("loss-sweep &lt;demo&gt;"));
    assert!(html.contains("0.1.0 (git abc123)"));
    assert!(html.contains("<details>"));
    assert!(html.contains("# &lt;b&gt;not bold&lt;/b&gt;"));
    for cell in [30, 30, 29, 1, 0, 1, 0, 28] {
        assert!(html.contains(&format!("<td class=\"num\">{cell}</td>")));
    }
    assert!(html.contains("are <b>excluded</b>"));

    // Paired comparison: in setting 0, h2 is 10 % faster than h1 in every repetition (4 pairs:
    // one h1 run there is flagged).
    assert!(html.contains("paired vs h1: median · better/worse · p"));
    assert!(html.contains("<td class=\"num\">+10.0 % · 4/0 · p 0.12</td>"));

    // Wins table: h3 wins both settings, with the rule explained.
    assert!(html.contains("Which protocol wins"));
    assert!(html.contains("at least 70 % of A's runs are at least 10 % better than B's mean"));
    assert_eq!(html.matches("<td class=\"win\">h3</td>").count(), 2);

    // Problem runs, with the reason escaped.
    assert!(html.contains(FAILED_KEY) && html.contains(FLAGGED_KEY));
    assert!(html.contains("rate 12 % below target"));
    assert!(html.contains("server said &lt;script&gt;alert(1)&lt;/script&gt; &amp; quit"));
    assert!(!html.contains("<script"));
    // Exclusions per cell: the flagged h1 and the failed h2 run.
    assert!(html.contains("1 (1 flagged)"));
    assert!(html.contains("1 (1 failed)"));
    // The flagged run's setting says it is still flagged.
    assert!(html.contains("runs needing a retry"));
    assert!(html.contains("<td class=\"num warn\">1</td>"));
    // The NaN handshake times are ignored, per run.
    assert!(html.contains("1 (1 without value)"));

    // Self-contained: no scripts, stylesheets or remote resources.
    for needle in ["<link", "src=", "http://", "https://"] {
        let hits = html.matches(needle).count();
        let allowed = if needle == "http://" {
            svg_count(&html) // the SVG namespace URI
        } else {
            0
        };
        assert_eq!(hits, allowed, "{needle}");
    }

    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn timeouts_and_retries_are_reported() {
    let dir = temp_dir("timeouts");
    let mut input = synthetic();
    // Three of one cell's runs time out at 60 s; one run passed on its second attempt.
    let first = input.runs[0].clone();
    for r in input
        .runs
        .iter_mut()
        .filter(|r| r.setting == first.setting && r.protocol == first.protocol)
        .take(3)
    {
        r.status = RunStatus::Timeout;
        r.time_limit_s = Some(60.0);
        r.reason = Some("did not finish within its time limit of 60.0 s".into());
    }
    input.runs[1].attempt = 2;
    let out = render(&input, &ReportOptions::default(), &dir).unwrap();
    let html = std::fs::read_to_string(&out.html).unwrap();
    assert!(html.contains("3 run(s) timed out"), "censoring explained");
    assert!(
        html.contains("(3 timed out)"),
        "the cell's exclusions name the timeouts"
    );
    // Five runs per cell, three censored: the median is at least the limit.
    assert!(html.contains("≥ 60000"), "censored median shown");
    assert!(
        html.contains("timed out)</span>"),
        "wins table marks the cell"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn include_flagged_is_reported() {
    let dir = temp_dir("flagged");
    let options = ReportOptions {
        include_flagged: true,
        ..Default::default()
    };
    let out = render(&synthetic(), &options, &dir).unwrap();
    let html = std::fs::read_to_string(&out.html).unwrap();
    assert!(html.contains("are <b>included</b>"));
    assert!(!html.contains("1 (1 flagged)"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn zero_runs() {
    let dir = temp_dir("empty");
    let input = ReportInput {
        scenario_name: "nothing yet".into(),
        planned_runs: 12,
        ..Default::default()
    };
    let out = render(&input, &ReportOptions::default(), &dir).unwrap();
    let html = std::fs::read_to_string(&out.html).unwrap();
    assert!(html.contains("No runs finished (planned: 12)"));
    assert!(html.contains("(no time series recorded)"));
    assert_eq!(svg_count(&html), 0);
    assert!(out.figures.is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn only_failed_runs() {
    let dir = temp_dir("failed");
    let mut input = synthetic();
    input.series.clear();
    for r in &mut input.runs {
        r.status = RunStatus::Timeout;
        r.reason = Some("no response within 60 s".into());
    }
    let out = render(&input, &ReportOptions::default(), &dir).unwrap();
    let html = std::fs::read_to_string(&out.html).unwrap();
    assert!(html.contains("No run is usable for statistics"));
    assert!(html.contains("No usable values"));
    assert_eq!(svg_count(&html), 0);
    assert_eq!(html.matches("no response within 60 s").count(), 30);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn degenerate_data_does_not_panic() {
    use quiclab_report::{RunRecord, TimeSeries};
    let mut runs = Vec::new();
    let values: [(&str, &str, f64); 9] = [
        // n = 1 per protocol, equal values: zero-width CIs, flat ranges.
        ("equal", "h1", 5.0),
        ("equal", "h2", 5.0),
        ("equal", "h3+bbr", 5.0),
        // Zero baseline mean: improvement undefined.
        ("zero", "h1", 0.0),
        ("zero", "h2", -3.0),
        // Extreme magnitudes and non-finite values.
        ("huge", "h1", 1e300),
        ("huge", "h2", 1e-300),
        ("huge", "h3+bbr", f64::INFINITY),
        (
            "a-very-long-setting-label-without-any-commas-to-wrap-at-all-really",
            "h2",
            f64::NAN,
        ),
    ];
    for (i, (setting, proto, v)) in values.into_iter().enumerate() {
        runs.push(RunRecord {
            key: format!("proto={proto};s={setting}"),
            index: i,
            setting: i / 3,
            setting_label: setting.to_string(),
            protocol: proto.to_string(),
            repetition: 1,
            status: RunStatus::Ok,
            reason: None,
            flags: Vec::new(),
            metrics: [("total_ms".to_string(), v), ("goodput_mbps".to_string(), v)]
                .into_iter()
                .collect(),
            flows: Vec::new(),
            attempt: 1,
            time_limit_s: None,
        });
    }
    let ts = |key: &str, name: &str, points: Vec<(f64, f64)>| TimeSeries {
        run_key: key.to_string(),
        name: name.to_string(),
        unit: String::new(),
        points,
    };
    let input = ReportInput {
        scenario_name: "degenerate".into(),
        planned_runs: 3,
        runs,
        series: vec![
            ts("one point", "cwnd_bytes", vec![(1.0, 10.0)]),
            ts(
                "all nan",
                "queue_delay_ms",
                vec![(f64::NAN, 1.0), (1.0, f64::NAN)],
            ),
            ts("empty", "rtt_ms", Vec::new()),
            ts(
                "many <points>",
                "cwnd_bytes",
                (0..50_000)
                    .map(|i| (i as f64 * 1e-4, (i % 977) as f64))
                    .collect(),
            ),
        ],
        ..Default::default()
    };
    for baseline in ["h1", "h0"] {
        let dir = temp_dir("degenerate");
        let options = ReportOptions {
            baseline: baseline.into(),
            ..Default::default()
        };
        let out = render(&input, &options, &dir).unwrap();
        let html = std::fs::read_to_string(&out.html).unwrap();
        let svgs = out
            .figures
            .iter()
            .filter(|f| f.extension().is_some_and(|e| e == "svg"))
            .count();
        assert_eq!(svg_count(&html), svgs);
        for f in &out.figures {
            assert!(std::fs::metadata(f).unwrap().len() > 0, "{}", f.display());
        }
        assert!(html.contains("many &lt;points&gt;"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
