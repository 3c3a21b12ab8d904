//! Renders the results of one quiclab experiment to a self-contained HTML
//! report (`report.html`, figures inlined as SVG) plus SVG and PNG copies of
//! every figure in `figures/`.
//!
//! * `aggregate` is the sans-IO part: it groups runs by setting and
//!   protocol, excludes failed and flagged runs, and computes the summaries,
//!   improvements and verdicts. Everything the report states as a number
//!   comes from there, so it is unit-tested on fixed data.
//! * `figures` turns aggregates into figure descriptions and draws them with
//!   plotters, one function per figure kind, generic over the backend so the
//!   SVG and PNG versions come from the same code.
//! * `fonts` finds a TrueType font for the PNG text at run time; `svg` wraps
//!   plotters' SVG backend so SVGs need no font at all.
//! * `html` assembles the page and escapes everything taken from the input.
//!
//! * `from_store` reads a results database (runs with their typed documents)
//!   into a [`ReportInput`] with the user's choices; `summary` is the
//!   terminal table of `quiclab demo`; `reproduction` is `quiclab reproduce`'s page of
//!   verdicts (reproduction.html). The command line lives elsewhere.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

mod aggregate;
pub mod compare;
pub mod docs;
pub mod fairness;
pub mod figures;
mod fonts;
pub mod forest;
pub mod from_store;
mod html;
pub mod matrix;
pub mod reproduction;
pub mod summary;
mod svg;
pub mod sweep;
pub mod video;

/// Everything the report shows about one experiment.
#[derive(Debug, Clone, Default)]
pub struct ReportInput {
    pub scenario_name: String,
    pub description: String,
    /// Path of the scenario file, as given.
    pub scenario_file: String,
    /// The scenario's TOML text, shown in a collapsible block.
    pub scenario_text: String,
    /// e.g. `("quiclab", "0.1.0 (git abc123)")`, `("kernel", …)`.
    pub environment: Vec<(String, String)>,
    pub runs: Vec<RunRecord>,
    pub series: Vec<TimeSeries>,
    /// How many runs the plan has; `runs.len()` may be fewer (unfinished).
    pub planned_runs: usize,
    /// Files a traced run left (a page load's HAR and waterfall), by run key: what the report
    /// links from the slow cells.
    pub traced_files: BTreeMap<String, Vec<TracedFile>>,
}

/// A file of a traced run, as the report links it.
#[derive(Debug, Clone, PartialEq)]
pub struct TracedFile {
    /// `HAR`, `waterfall`.
    pub label: String,
    /// Relative to the report when it is in the results directory, else the file's path.
    pub href: String,
}

/// Outcome of one run.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum RunStatus {
    Ok,
    Failed,
    Timeout,
}

impl RunStatus {
    /// Lower-case name as shown in the report.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Ok => "ok",
            RunStatus::Failed => "failed",
            RunStatus::Timeout => "timeout",
        }
    }
}

/// One executed run and its measurements.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRecord {
    /// e.g. `"proto=h2;rate=10mbit;loss=2%;rep=3"`, unique.
    pub key: String,
    /// Execution order.
    pub index: usize,
    /// Index of the network/workload setting (grid point without protocol).
    pub setting: usize,
    /// e.g. `"rate=10mbit, loss=2%"` (`"all runs"` without other axes).
    pub setting_label: String,
    /// `"h1"`, `"h2"`, `"h3"` or any other label (opaque).
    pub protocol: String,
    /// 1-based.
    pub repetition: u32,
    pub status: RunStatus,
    /// Failure reason for `Failed`/`Timeout`.
    pub reason: Option<String>,
    /// Emulator-fidelity problems; empty means fidelity within tolerance.
    pub flags: Vec<String>,
    /// e.g. `"total_ms"`, `"ttfb_ms"`, `"goodput_mbps"`, …
    pub metrics: BTreeMap<String, f64>,
    /// 1-based: the attempt this record is (a flagged attempt was run again up to
    /// `retry_flagged` times; earlier attempts are not in the report's statistics).
    pub attempt: u32,
    /// `Timeout` runs: the limit they hit, in seconds (the run took at least this long).
    pub time_limit_s: Option<f64>,
    /// Flow-mix runs: each flow's label (`1 h3`) and goodput in Mbit/s; empty for other kinds.
    pub flows: Vec<(String, Option<f64>)>,
}

/// A per-run time series such as the congestion window.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TimeSeries {
    /// Which run ([`RunRecord::key`]).
    pub run_key: String,
    /// e.g. `"cwnd_bytes"`, `"queue_delay_ms"`.
    pub name: String,
    /// e.g. `"bytes"`, `"ms"`.
    pub unit: String,
    /// (seconds since the run's transfer started, value).
    pub points: Vec<(f64, f64)>,
}

/// How to show one metric.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricInfo {
    /// Key in [`RunRecord::metrics`].
    pub name: String,
    /// Human-readable name, e.g. "Download time".
    pub label: String,
    /// Unit for axis labels, e.g. "ms"; empty for dimensionless metrics.
    pub unit: String,
    pub lower_is_better: bool,
    /// A time to completion in ms: a timed-out run's value is at least its limit (censored).
    pub completion: bool,
    /// A description of the run (connections opened): no improvement over the baseline.
    pub descriptive: bool,
}

impl MetricInfo {
    fn new(name: &str, label: &str, unit: &str, lower_is_better: bool) -> Self {
        MetricInfo {
            name: name.to_string(),
            label: label.to_string(),
            unit: unit.to_string(),
            lower_is_better,
            completion: false,
            descriptive: false,
        }
    }
}

/// What to show and how.
#[derive(Debug, Clone)]
pub struct ReportOptions {
    /// Protocol the improvement bars compare against.
    pub baseline: String,
    /// Metrics to show, in order; the first is the primary metric (wins
    /// table, CDFs).
    pub metrics: Vec<MetricInfo>,
    /// Whether flagged runs (fidelity problems) enter the statistics. They
    /// are listed either way.
    pub include_flagged: bool,
}

impl Default for ReportOptions {
    fn default() -> Self {
        ReportOptions {
            baseline: "h1".to_string(),
            metrics: default_metrics(),
            include_flagged: false,
        }
    }
}

/// The metrics shown when the caller does not choose: download time first
/// (the primary metric), then time to first byte, goodput, loss ratio and
/// handshake time.
pub fn default_metrics() -> Vec<MetricInfo> {
    vec![
        MetricInfo {
            completion: true,
            ..MetricInfo::new("total_ms", "Download time", "ms", true)
        },
        MetricInfo::new("ttfb_ms", "Time to first byte", "ms", true),
        MetricInfo::new("goodput_mbps", "Goodput", "Mbit/s", false),
        MetricInfo::new("loss_ratio", "Loss ratio", "", true),
        MetricInfo::new("handshake_ms", "Handshake time", "ms", true),
    ]
}

/// What [`render`] wrote (`quiclab report --json` prints it).
#[derive(Debug, Clone, serde::Serialize)]
pub struct ReportOutput {
    /// `out_dir/report.html`.
    pub html: PathBuf,
    /// Every figure file written (`.svg` and, when a font was found, `.png`).
    pub figures: Vec<PathBuf>,
    /// Things the reader should know (also shown in the report), e.g. that
    /// PNGs were skipped for lack of a font.
    pub notes: Vec<String>,
}

/// Why [`render`] failed. Only I/O on the output directory is fatal; a
/// figure that cannot be drawn becomes a note instead.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("{action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Writes `out_dir/report.html` and the figures into `out_dir/figures/`
/// (each as `.svg` and `.png`; PNGs are skipped with a note when no font is
/// found). Creates the directories as needed and overwrites earlier output.
pub fn render(
    input: &ReportInput,
    options: &ReportOptions,
    out_dir: &Path,
) -> Result<ReportOutput, ReportError> {
    render_with_fonts(input, options, out_dir, fonts::CANDIDATES)
}

/// [`render`] with an explicit list of font files to try for the PNGs, in
/// order. An empty list renders the SVGs only. Exists so tests can exercise
/// the no-font path on a machine that has fonts.
#[doc(hidden)]
pub fn render_with_fonts(
    input: &ReportInput,
    options: &ReportOptions,
    out_dir: &Path,
    font_candidates: &[&str],
) -> Result<ReportOutput, ReportError> {
    let agg = aggregate::aggregate(input, options);
    let mut notes = agg.notes.clone();

    // Only into a directory quiclab claimed (its marker): a results directory, or a new one. The
    // page and figures/ are checked before anything is written or removed.
    let io = |action: &'static str, path: &Path| {
        let path = path.to_path_buf();
        move |e: std::io::Error| ReportError::Io {
            action,
            path,
            source: e,
        }
    };
    quiclab_outputs::claim_dir(out_dir, "the report's directory")
        .map_err(|e| io("claiming", out_dir)(e.into()))?;
    let html_path = out_dir.join("report.html");
    quiclab_outputs::check_in_claimed(&[&html_path]).map_err(io("writing", &html_path))?;
    let fig_dir = quiclab_outputs::claim_subdir(out_dir, "figures", "the report's figures/")
        .map_err(|e| io("claiming", &out_dir.join("figures"))(e.into()))?;
    // figures/ holds this report's figures only: those of an earlier report of the same results
    // (another --series choice, other metrics) would otherwise stay beside them and mislead. Only
    // the files quiclab's manifest lists go; a user's file there stays.
    quiclab_outputs::remove_listed(&fig_dir, |n| n.ends_with(".svg") || n.ends_with(".png"))
        .map_err(io("clearing", &fig_dir))?;

    let font = fonts::ensure_font(font_candidates);
    if font.is_none() {
        notes.push(fonts::NO_FONT_NOTE.to_string());
    }

    let fairness = fairness::rows(input, options.include_flagged);
    let mut specs = figures::plan(input, &agg);
    specs.extend(figures::fairness_figure(input, &fairness));
    let mut rendered = Vec::with_capacity(specs.len());
    let mut files = Vec::new();
    for spec in specs {
        let out = figures::emit(&spec, &fig_dir, font.is_some(), &mut notes)?;
        files.extend(out.files.iter().cloned());
        rendered.push((spec, out));
    }

    let video = video::rows(input, options.include_flagged);
    let page = html::page(input, options, &agg, &fairness, &video, &rendered, &notes);
    quiclab_outputs::write_in_claimed(&html_path, page.as_bytes())
        .map_err(io("writing", &html_path))?;

    Ok(ReportOutput {
        html: html_path,
        figures: files,
        notes,
    })
}
