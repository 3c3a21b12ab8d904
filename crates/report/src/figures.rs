//! Figures: what to draw ([`plan`]) and how ([`FigureSpec::draw`], one
//! function per figure kind, generic over the plotters backend so the SVG
//! and the PNG of a figure come from the same code).
//!
//! Fonts: with plotters' "ab_glyph" feature every text measurement goes
//! through a registered font, even for SVG, where the browser draws the text
//! anyway. [`SvgBackend`](crate::svg::SvgBackend) wraps plotters' SVG
//! backend and answers text measurements from a character-width table
//! instead, so SVGs never need a font file. For the same reason legends are
//! drawn here rather than with plotters' series labels (those measure text
//! via the font directly).

use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters_backend::BackendCoord;

use crate::aggregate::Aggregate;
use crate::svg::SvgBackend;
use crate::{ReportError, ReportInput, fonts};

/// Where a figure belongs in the page.
#[derive(Debug, Clone, PartialEq)]
pub enum Section {
    /// Mean/CI/median bars of `metrics[m]`.
    Bars(usize),
    /// Improvement over the baseline of `metrics[m]`.
    Improvement(usize),
    /// CDF of the primary metric for `settings[s]`.
    Cdf(usize),
    TimeSeries,
    /// Per-flow goodput of flow mixes.
    Fairness,
}

/// One figure: its data, already reduced to what is drawn.
#[derive(Debug, Clone)]
pub struct FigureSpec {
    /// File name without extension, unique within the report.
    pub stem: String,
    pub section: Section,
    /// Drawn at the top of the figure and repeated in the caption.
    pub title: String,
    /// Plain text; escaped when put into the page.
    pub caption: String,
    pub size: (u32, u32),
    pub kind: Kind,
}

#[derive(Debug, Clone)]
pub enum Kind {
    Bars(GroupedBars),
    Cdf(CdfPlot),
    TimeSeries(SeriesPlot),
}

/// Bars grouped by setting, one per series (protocol) in each group.
#[derive(Debug, Clone)]
pub struct GroupedBars {
    /// Group (setting) labels, already wrapped into lines.
    pub groups: Vec<Vec<String>>,
    pub series: Vec<(String, RGBColor)>,
    /// `bars[group][series]`; `None` is drawn as "n/a".
    pub bars: Vec<Vec<Option<Bar>>>,
    pub y_desc: String,
    pub style: BarStyle,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bar {
    pub value: f64,
    pub ci: Option<(f64, f64)>,
    pub median: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BarStyle {
    /// Bars from zero (the median), whiskers (its exact interval), a diamond where a bar
    /// carries a separate median.
    Summary,
    /// Signed percentages around a zero line, each bar labelled.
    Improvement,
}

/// Empirical CDFs, one line per protocol.
#[derive(Debug, Clone)]
pub struct CdfPlot {
    pub x_desc: String,
    pub lines: Vec<CdfLine>,
}

#[derive(Debug, Clone)]
pub struct CdfLine {
    pub protocol: String,
    pub color: RGBColor,
    /// `stats::cdf` points: (value, fraction of runs at or below it).
    pub points: Vec<(f64, f64)>,
}

/// Time series of one run, one panel per series, shared time axis.
#[derive(Debug, Clone)]
pub struct SeriesPlot {
    pub panels: Vec<Panel>,
    pub t_range: (f64, f64),
    /// Spans shaded across every panel (a video player's startup, stalls, waits after seeks).
    pub spans: Vec<Span>,
    /// Instants marked by a vertical line across every panel: the network switches (the series
    /// [`MARK_SERIES`], 1 at each instant).
    pub marks: Vec<f64>,
}

/// The 0/1 series whose instants at 1 are drawn as vertical lines: the link's network switches.
const MARK_SERIES: &str = "network_switch";

/// A time interval during which something held (the series `NAME@LABEL` was 1).
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    /// What held: one of [`SPAN_SERIES`].
    pub kind: &'static str,
    /// Whose (the series' LABEL: a player), empty for an unlabelled series.
    pub label: String,
    pub from: f64,
    pub to: f64,
}

/// 0/1 series drawn as shaded spans instead of panels, with their legend text and shade: the
/// video workload's playback interruptions.
const SPAN_SERIES: [(&str, &str, RGBColor); 3] = [
    ("startup", "startup", RGBColor(215, 215, 215)),
    ("stall", "stall", RGBColor(240, 170, 170)),
    ("seek_wait", "wait after seek", RGBColor(170, 200, 240)),
];

/// One panel: one or more lines on a shared value axis. Series named `NAME@LABEL` share the panel
/// of NAME, a line per LABEL (per-flow throughput with the link rate, per-flow cwnd).
#[derive(Debug, Clone)]
pub struct Panel {
    pub y_desc: String,
    pub lines: Vec<PanelLine>,
}

#[derive(Debug, Clone)]
pub struct PanelLine {
    /// Empty for a panel's only, unnamed line.
    pub label: String,
    pub color: RGBColor,
    pub points: Vec<(f64, f64)>,
}

/// What [`emit`] produced for one figure.
#[derive(Debug, Clone, Default)]
pub struct Emitted {
    /// The SVG document, for inlining; `None` if drawing failed (noted).
    pub svg: Option<String>,
    /// Files written: the `.svg` and, if drawn, the `.png`.
    pub files: Vec<PathBuf>,
}

// ---------------------------------------------------------------------------
// Layout constants (pixels).

const TITLE_SIZE: f64 = 17.0;
const LABEL_SIZE: f64 = 13.0;
const DESC_SIZE: f64 = 14.0;
const LEGEND_H: u32 = 28;
const Y_LABEL_AREA: u32 = 78;
/// Group labels are wrapped to this width where they can be.
const GROUP_LABEL_WRAP: f64 = 170.0;
/// Beyond this many points a time-series panel is reduced to per-bucket
/// min/max, which keeps the shape (spikes included) at a bounded SVG size.
const MAX_PANEL_POINTS: usize = 4000;

/// Okabe–Ito colour-blind-safe palette. h1, h2, h3 keep their colours in
/// every figure regardless of which protocols are present.
const PALETTE: [RGBColor; 8] = [
    RGBColor(230, 159, 0),
    RGBColor(0, 114, 178),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(213, 94, 0),
    RGBColor(120, 120, 120),
    RGBColor(0, 0, 0),
];

fn protocol_colors(protocols: &[String]) -> Vec<RGBColor> {
    let mut others = 0;
    protocols
        .iter()
        .map(|p| match p.as_str() {
            "h1" => PALETTE[0],
            "h2" => PALETTE[1],
            "h3" => PALETTE[2],
            _ => {
                others += 1;
                PALETTE[3 + (others - 1) % (PALETTE.len() - 3)]
            }
        })
        .collect()
}

/// Approximate width in pixels of `text` at plotters font size `size`.
///
/// plotters' SVG backend writes `font-size = size / 1.24`; the per-character
/// advances (in em) are roughly those of DejaVu Sans / Helvetica. Only
/// layout (label areas, legend spacing, figure widths) depends on it; the
/// browser places the SVG text itself via text-anchor.
pub fn text_width(text: &str, size: f64) -> f64 {
    let em = size / 1.24;
    text.chars()
        .map(|c| match c {
            'i' | 'j' | 'l' | '.' | ',' | ':' | ';' | '\'' | '|' | '!' | 'I' => 0.3,
            ' ' | 'f' | 't' | 'r' | '(' | ')' | '[' | ']' | '-' | '/' => 0.38,
            'm' | 'w' | 'M' | 'W' | '%' | '@' | '—' => 0.95,
            c if c.is_ascii_uppercase() => 0.72,
            c if c.is_ascii_digit() => 0.64,
            _ => 0.6,
        })
        .sum::<f64>()
        * em
}

fn font(size: f64) -> TextStyle<'static> {
    (fonts::FAMILY, size).into_font().into()
}

fn label_with_unit(label: &str, unit: &str) -> String {
    if unit.is_empty() {
        label.to_string()
    } else {
        format!("{label} ({unit})")
    }
}

/// File-name-safe form of `s`: lower-case ASCII letters and digits, runs of
/// anything else collapsed to one '-', at most 48 characters.
pub fn slug(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    let out: String = out.trim_matches('-').chars().take(48).collect();
    let out = out.trim_end_matches('-').to_string();
    if out.is_empty() { "x".to_string() } else { out }
}

/// Splits a setting label such as "rate=10mbit, loss=2%, rtt=50ms" at ", "
/// into lines of at most [`GROUP_LABEL_WRAP`] pixels (a single part longer
/// than that stays whole).
fn wrap_label(label: &str) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for part in label.split(", ") {
        match lines.last_mut() {
            Some(line)
                if text_width(&format!("{line}, {part}"), LABEL_SIZE) <= GROUP_LABEL_WRAP =>
            {
                line.push_str(", ");
                line.push_str(part);
            }
            _ => lines.push(part.to_string()),
        }
    }
    if lines.is_empty() {
        lines.push(String::new());
    }
    lines
}

/// A bar at the median of `values`, its whiskers the median's exact 95 % interval (the widest
/// one, at a lower coverage, below 6 values; none for one value) — never a mean's Student
/// interval, which at n = 2 reaches below zero for a time.
fn median_bar(values: &[f64]) -> Bar {
    let i = quiclab_verdict::rules::median_interval(values, 0.95);
    Bar {
        value: i.as_ref().map_or(f64::NAN, |i| i.median),
        ci: i.filter(|_| values.len() >= 2).map(|i| (i.low, i.high)),
        median: None,
    }
}

/// Width wide enough for the title, but at least `min`.
fn fit_title(title: &str, min: f64) -> u32 {
    min.max(text_width(title, TITLE_SIZE) + 40.0).ceil() as u32
}

// ---------------------------------------------------------------------------
// Planning: aggregates → figure specs.

/// All figures of the report, in page order within each section.
pub fn plan(input: &ReportInput, agg: &Aggregate) -> Vec<FigureSpec> {
    let mut specs = Vec::new();
    let colors = protocol_colors(&agg.protocols);
    let groups: Vec<Vec<String>> = agg.settings.iter().map(|s| wrap_label(&s.label)).collect();
    let scenario = &input.scenario_name;

    for (m, table) in agg.metrics.iter().enumerate() {
        if !table.has_values() {
            continue;
        }
        let info = &table.info;
        let y_desc = label_with_unit(&info.label, &info.unit);

        let bars = table
            .cells
            .iter()
            .map(|row| {
                row.iter()
                    .map(|c| c.summary.as_ref().map(|_| median_bar(&c.values)))
                    .collect()
            })
            .collect();
        let series: Vec<_> = agg
            .protocols
            .iter()
            .cloned()
            .zip(colors.iter().copied())
            .collect();
        let title = format!("{} — median and its 95 % interval per setting", info.label);
        let direction = if info.lower_is_better {
            "lower is better"
        } else {
            "higher is better"
        };
        specs.push(FigureSpec {
            stem: format!("bars_{}", slug(&info.name)),
            section: Section::Bars(m),
            size: (
                grouped_width(&title, &groups, series.len()),
                440 + extra_label_height(&groups),
            ),
            title,
            caption: format!(
                "{y_desc} of scenario \"{scenario}\" per setting and protocol ({direction}). \
                 Bars: median over the included runs; whiskers: the median's exact 95 % \
                 interval (order statistics, as the verdicts use; below 6 runs it cannot reach \
                 95 % and spans the runs, the table above gives its coverage); none for one \
                 run. Run counts and exclusions are in the table above."
            ),
            kind: Kind::Bars(GroupedBars {
                groups: groups.clone(),
                series,
                bars,
                y_desc: y_desc.clone(),
                style: BarStyle::Summary,
            }),
        });

        // Improvement over the baseline: every protocol but the baseline.
        let Some(b) = agg.baseline else { continue };
        let others: Vec<usize> = (0..agg.protocols.len()).filter(|&p| p != b).collect();
        if others.is_empty() || table.improvements.is_empty() {
            continue;
        }
        let base = &agg.protocols[b];
        let bars = table
            .improvements
            .iter()
            .map(|row| {
                others
                    .iter()
                    .map(|&p| {
                        row[p].map(|value| Bar {
                            value,
                            ci: None,
                            median: None,
                        })
                    })
                    .collect()
            })
            .collect();
        let series: Vec<_> = others
            .iter()
            .map(|&p| (agg.protocols[p].clone(), colors[p]))
            .collect();
        let formula = if info.lower_is_better {
            format!("I = (P_{base} − P_x) / P_{base} · 100")
        } else {
            format!(
                "I = (P_x − P_{base}) / P_{base} · 100 (higher is better for this metric, \
                 so the sign is reversed relative to Carlucci et al.)"
            )
        };
        let title = format!("{} — improvement over {base} (%)", info.label);
        specs.push(FigureSpec {
            stem: format!("improvement_{}", slug(&info.name)),
            section: Section::Improvement(m),
            size: (
                grouped_width(&title, &groups, series.len()),
                420 + extra_label_height(&groups),
            ),
            title,
            caption: format!(
                "Improvement of each protocol over {base} in {}, scenario \"{scenario}\", \
                 computed on the means: {formula}. Positive = better than {base}. \
                 \"n/a\": a mean is missing or the baseline mean is zero.",
                info.label
            ),
            kind: Kind::Bars(GroupedBars {
                groups: groups.clone(),
                series,
                bars,
                y_desc: format!("improvement over {base} (%)"),
                style: BarStyle::Improvement,
            }),
        });
    }

    if let Some(m) = agg.primary {
        let table = &agg.metrics[m];
        let info = &table.info;
        for (s, setting) in agg.settings.iter().enumerate() {
            let lines: Vec<_> = table.cells[s]
                .iter()
                .enumerate()
                .filter(|(_, c)| !c.values.is_empty())
                .map(|(p, c)| CdfLine {
                    protocol: agg.protocols[p].clone(),
                    color: colors[p],
                    points: quiclab_experiment::stats::cdf(&c.values),
                })
                .collect();
            if lines.is_empty() {
                continue;
            }
            let title = format!("CDF of {} — {}", info.label, setting.label);
            specs.push(FigureSpec {
                // Named by the setting (its index keeps names apart that the slug cuts alike).
                stem: format!(
                    "cdf_{}_{}-{}",
                    slug(&info.name),
                    setting.index,
                    slug(&setting.label)
                ),
                section: Section::Cdf(s),
                size: (fit_title(&title, 600.0), 420),
                title,
                caption: format!(
                    "Empirical CDF of {} over the included repetitions, setting \"{}\", \
                     scenario \"{scenario}\" (one line per protocol; a step per run).",
                    info.label, setting.label
                ),
                kind: Kind::Cdf(CdfPlot {
                    x_desc: label_with_unit(&info.label, &info.unit),
                    lines,
                }),
            });
        }
    }

    for (i, key) in series_keys(input).iter().enumerate() {
        let plot = series_plot(input, key);
        let title = format!("Run {key}");
        let height = 70 + 230 * plot.panels.len() as u32;
        specs.push(FigureSpec {
            stem: format!("timeseries_{:02}_{}", i + 1, slug(key)),
            section: Section::TimeSeries,
            size: (fit_title(&title, 760.0), height),
            caption: format!(
                "Time series of run {key}{}: {} over seconds since the transfer started.{}",
                match input.runs.iter().find(|r| &r.key == key) {
                    Some(r) => format!(
                        " ({}, {}, repetition {}, {})",
                        r.protocol,
                        r.setting_label,
                        r.repetition,
                        r.status.as_str()
                    ),
                    None => String::new(),
                },
                plot.panels
                    .iter()
                    .map(|p| p.y_desc.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                spans_caption(&plot.spans) + &marks_caption(&plot.marks)
            ),
            title,
            kind: Kind::TimeSeries(plot),
        });
    }

    dedup_stems(&mut specs);
    specs
}

/// The time-series figure of one run outside a report (`quiclab bulk|flows|video --figure`): a
/// panel per series, as a report draws a traced run. None when there is nothing to draw.
pub fn run_figure(title: &str, series: Vec<crate::TimeSeries>) -> Option<FigureSpec> {
    let input = ReportInput {
        series,
        ..Default::default()
    };
    let key = input.series.first()?.run_key.clone();
    let plot = series_plot(&input, &key);
    if plot.panels.is_empty() {
        return None;
    }
    Some(FigureSpec {
        stem: "run".into(),
        section: Section::TimeSeries,
        size: (fit_title(title, 760.0), 70 + 230 * plot.panels.len() as u32),
        title: title.to_string(),
        caption: String::new(),
        kind: Kind::TimeSeries(plot),
    })
}

/// `spec` as SVG text.
pub fn figure_svg(spec: &FigureSpec) -> Result<String, String> {
    draw_svg(spec)
}

/// `spec` drawn as a PNG into `path` (a font is needed for its text: an error names the package).
pub fn figure_png(spec: &FigureSpec, path: &Path) -> Result<(), String> {
    if fonts::ensure_font(fonts::CANDIDATES).is_none() {
        return Err(fonts::NO_FONT_NOTE.to_string());
    }
    draw_png(spec, path)
}

/// Mean goodput (95 % CI) of each flow position per setting and mix: how a mix shares the link.
pub fn fairness_figure(
    input: &ReportInput,
    rows: &[crate::fairness::FairnessRow],
) -> Option<FigureSpec> {
    let n_flows = rows.iter().map(|r| r.flows.len()).max()?;
    if n_flows == 0 {
        return None;
    }
    let groups: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let mut l = wrap_label(&r.setting_label);
            l.insert(0, r.mix.clone());
            l
        })
        .collect();
    let series: Vec<(String, RGBColor)> = (0..n_flows)
        .map(|i| (format!("flow {}", i + 1), PALETTE[i % PALETTE.len()]))
        .collect();
    let bars = rows
        .iter()
        .map(|r| {
            (0..n_flows)
                .map(|i| {
                    r.flow_values
                        .get(i)
                        .filter(|v| !v.is_empty())
                        .map(|v| median_bar(v))
                })
                .collect()
        })
        .collect();
    let title = "Goodput of each flow of a mix — median and its 95 % interval".to_string();
    Some(FigureSpec {
        stem: "fairness_goodput_per_flow".into(),
        section: Section::Fairness,
        size: (
            grouped_width(&title, &groups, n_flows),
            440 + extra_label_height(&groups),
        ),
        caption: format!(
            "Goodput of each flow (in mix order: flow 1 is the first of the mix's label) per \
             setting and mix of scenario \"{}\", over each flow's cutoff window. Bars: mean over \
             the included runs; whiskers: the median's exact 95 % interval (order statistics; below 6 \
             runs it spans the runs at a lower coverage); none for one run.",
            input.scenario_name
        ),
        title,
        kind: Kind::Bars(GroupedBars {
            groups,
            series,
            bars,
            y_desc: "goodput (Mbit/s)".into(),
            style: BarStyle::Summary,
        }),
    })
}

fn grouped_width(title: &str, groups: &[Vec<String>], n_series: usize) -> u32 {
    let label_w = groups
        .iter()
        .flatten()
        .map(|l| text_width(l, LABEL_SIZE))
        .fold(0.0, f64::max);
    let group_w = (n_series.max(1) as f64 * 34.0 + 26.0).max(label_w + 14.0);
    let plot_w = group_w * groups.len().max(1) as f64;
    fit_title(title, (Y_LABEL_AREA as f64 + 40.0 + plot_w).max(560.0))
}

fn extra_label_height(groups: &[Vec<String>]) -> u32 {
    let lines = groups.iter().map(Vec::len).max().unwrap_or(1).max(1);
    (lines as u32 - 1) * 16
}

/// Distinct run keys of `input.series`, in first-seen order.
fn series_keys(input: &ReportInput) -> Vec<String> {
    let mut keys: Vec<String> = Vec::new();
    for s in &input.series {
        if !keys.contains(&s.run_key) {
            keys.push(s.run_key.clone());
        }
    }
    keys
}

/// Panels for one run: the congestion window first, then the queue delay,
/// then any other series by name (the paper figures pair cwnd and queue).
/// Series `NAME@LABEL` are lines of NAME's panel.
fn series_plot(input: &ReportInput, key: &str) -> SeriesPlot {
    let rank = |name: &str| match name {
        "throughput_mbps" => 0,
        "cwnd_bytes" => 1,
        "queue_delay_ms" => 2,
        _ => 3,
    };
    let mut t_lo = f64::INFINITY;
    let mut t_hi = f64::NEG_INFINITY;
    // (panel name, unit, lines) in first-seen order, then sorted by rank.
    type Lines = Vec<(String, Vec<(f64, f64)>)>;
    let mut groups: Vec<(String, String, Lines)> = Vec::new();
    let mut spans = Vec::new();
    let mut marks = Vec::new();
    for s in input.series.iter().filter(|s| s.run_key == key) {
        let (name, label) = match s.name.split_once('@') {
            Some((n, l)) => (n.to_string(), l.to_string()),
            None => (s.name.clone(), String::new()),
        };
        let mut points: Vec<(f64, f64)> = s
            .points
            .iter()
            .copied()
            .filter(|(t, v)| t.is_finite() && v.is_finite())
            .collect();
        // A stable sort keeps a step's two points (same time) in order.
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        for &(t, _) in &points {
            t_lo = t_lo.min(t);
            t_hi = t_hi.max(t);
        }
        if name == MARK_SERIES {
            marks.extend(points.iter().filter(|p| p.1 >= 0.5).map(|p| p.0));
            marks.dedup();
            continue;
        }
        if let Some(&(kind, _, _)) = SPAN_SERIES.iter().find(|k| k.0 == name) {
            spans.extend(spans_of(&points).into_iter().map(|(from, to)| Span {
                kind,
                label: label.clone(),
                from,
                to,
            }));
            continue;
        }
        match groups.iter_mut().find(|g| g.0 == name) {
            Some(g) => g.2.push((label, points)),
            None => groups.push((name, s.unit.clone(), vec![(label, points)])),
        }
    }
    groups.sort_by(|a, b| rank(&a.0).cmp(&rank(&b.0)).then(a.0.cmp(&b.0)));
    let panels = groups
        .into_iter()
        .enumerate()
        .map(|(i, (name, unit, lines))| {
            let label = match name.as_str() {
                // One unlabelled window is the connection that sent the most (runner's series:
                // an h1 page load has six).
                "cwnd_bytes" if lines.iter().all(|(l, _)| l.is_empty()) => {
                    "congestion window, busiest connection".to_string()
                }
                "cwnd_bytes" => "congestion window".to_string(),
                "queue_delay_ms" => "queue delay".to_string(),
                "throughput_mbps" => "throughput".to_string(),
                "queue_bytes" => "queue".to_string(),
                // A name's unit is on the axis already: `buffer_s` is "buffer (s)",
                // `bitrate_mbps` "bitrate (Mbit/s)".
                other => other
                    .strip_suffix(&format!("_{unit}"))
                    .or_else(|| {
                        ["_mbps", "_ms", "_s", "_bytes"]
                            .iter()
                            .find_map(|s| other.strip_suffix(s))
                    })
                    .unwrap_or(other)
                    .replace('_', " "),
            };
            let single = lines.len() == 1;
            let mut flow = 0;
            Panel {
                y_desc: label_with_unit(&label, &unit),
                lines: lines
                    .into_iter()
                    .map(|(l, points)| {
                        // A reference line (the link rate) is grey.
                        let color = if l == "link rate" {
                            RGBColor(120, 120, 120)
                        } else if single {
                            PALETTE[[1, 5, 2, 3, 4][i % 5]]
                        } else {
                            flow += 1;
                            PALETTE[(flow - 1) % PALETTE.len()]
                        };
                        PanelLine {
                            label: l,
                            color,
                            points: decimate(points, MAX_PANEL_POINTS),
                        }
                    })
                    .collect(),
            }
        })
        .collect();
    let t_range = if t_lo.is_finite() {
        padded(t_lo, t_hi, 0.0)
    } else {
        (0.0, 1.0)
    };
    SeriesPlot {
        panels,
        t_range,
        spans,
        marks,
    }
}

/// The caption's account of the marks.
fn marks_caption(marks: &[f64]) -> String {
    if marks.is_empty() {
        return String::new();
    }
    let at: Vec<String> = marks.iter().map(|t| format!("{t:.1}")).collect();
    format!(" Vertical lines: network switches at {} s.", at.join(", "))
}

/// The caption's account of the shaded spans: per kind and player, how many and how long.
fn spans_caption(spans: &[Span]) -> String {
    let mut parts = Vec::new();
    for (kind, text, _) in SPAN_SERIES {
        let mut labels: Vec<&str> = spans
            .iter()
            .filter(|s| s.kind == kind)
            .map(|s| s.label.as_str())
            .collect();
        labels.dedup();
        for label in labels {
            let of: Vec<&Span> = spans
                .iter()
                .filter(|s| s.kind == kind && s.label == label)
                .collect();
            let total: f64 = of.iter().map(|s| s.to - s.from).sum();
            let whose = if label.is_empty() {
                String::new()
            } else {
                format!(" ({label})")
            };
            parts.push(format!("{text}{whose}: {} span(s), {total:.2} s", of.len()));
        }
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(" Shaded: {}.", parts.join("; "))
    }
}

/// The intervals where a 0/1 step series (sorted by time) is 1; one still open at the last point
/// ends there.
fn spans_of(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    let mut open: Option<f64> = None;
    for &(t, v) in points {
        match (open, v >= 0.5) {
            (None, true) => open = Some(t),
            (Some(from), false) => {
                if t > from {
                    out.push((from, t));
                }
                open = None;
            }
            _ => {}
        }
    }
    if let (Some(from), Some(&(last, _))) = (open, points.last())
        && last > from
    {
        out.push((from, last));
    }
    out
}

/// Reduces `points` (sorted by time) to at most about `max` points by
/// keeping each bucket's minimum and maximum, in time order.
fn decimate(points: Vec<(f64, f64)>, max: usize) -> Vec<(f64, f64)> {
    if points.len() <= max || max < 2 {
        return points;
    }
    let bucket = points.len().div_ceil(max / 2);
    let mut out = Vec::with_capacity(max + 2);
    for chunk in points.chunks(bucket) {
        let lo = chunk.iter().min_by(|a, b| a.1.total_cmp(&b.1));
        let hi = chunk.iter().max_by(|a, b| a.1.total_cmp(&b.1));
        if let (Some(&lo), Some(&hi)) = (lo, hi) {
            if lo.0 <= hi.0 {
                out.extend([lo, hi]);
            } else {
                out.extend([hi, lo]);
            }
        }
    }
    out
}

/// Makes every stem unique by appending "_2", "_3", … to repeats (two
/// metric names can slug to the same string).
fn dedup_stems(specs: &mut [FigureSpec]) {
    let mut seen: Vec<String> = Vec::new();
    for spec in specs.iter_mut() {
        let mut stem = spec.stem.clone();
        let mut k = 2;
        while seen.contains(&stem) {
            stem = format!("{}_{k}", spec.stem);
            k += 1;
        }
        seen.push(stem.clone());
        spec.stem = stem;
    }
}

/// `[lo, hi]` widened by `frac` of its span on both sides; a degenerate
/// range gets a span so plotters never maps onto zero pixels.
fn padded(lo: f64, hi: f64, frac: f64) -> (f64, f64) {
    let span = hi - lo;
    if span.is_finite() && span > 1e-12 * lo.abs().max(hi.abs()).max(1e-300) {
        (lo - span * frac, hi + span * frac)
    } else {
        let d = if lo.abs() > 0.0 { lo.abs() * 0.1 } else { 1.0 };
        (lo - d, hi + d)
    }
}

// ---------------------------------------------------------------------------
// Output.

/// Draws `spec` to `dir/<stem>.svg` and, when `png`, `dir/<stem>.png`.
/// Drawing failures become notes; only failing to write the SVG file is an
/// error (the output directory is unusable then).
pub fn emit(
    spec: &FigureSpec,
    dir: &Path,
    png: bool,
    notes: &mut Vec<String>,
) -> Result<Emitted, ReportError> {
    let mut out = Emitted::default();
    match draw_svg(spec) {
        Ok(svg) => {
            let path = dir.join(format!("{}.svg", spec.stem));
            quiclab_outputs::write_in_claimed(&path, svg.as_bytes()).map_err(|source| {
                ReportError::Io {
                    action: "writing",
                    path: path.clone(),
                    source,
                }
            })?;
            out.files.push(path);
            out.svg = Some(svg);
        }
        Err(e) => notes.push(format!("Figure \"{}\" could not be drawn: {e}", spec.title)),
    }
    if png {
        let path = dir.join(format!("{}.png", spec.stem));
        match quiclab_outputs::write_in_claimed_with(&path, |tmp| draw_png(spec, tmp)) {
            Ok(()) => out.files.push(path),
            Err(e) => notes.push(format!("PNG of \"{}\" could not be drawn: {e}", spec.title)),
        }
    }
    Ok(out)
}

fn draw_svg(spec: &FigureSpec) -> Result<String, String> {
    let mut buf = String::new();
    {
        let root = SvgBackend(SVGBackend::with_string(&mut buf, spec.size)).into_drawing_area();
        spec.draw(&root).map_err(|e| e.to_string())?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(buf)
}

fn draw_png(spec: &FigureSpec, path: &Path) -> Result<(), String> {
    // Glyphs at their bearings (plotters' bitmap text drops them: "pi e", "+83 .3%").
    let root =
        quiclab_fonts::GlyphBackend::new(BitMapBackend::new(path, spec.size)).into_drawing_area();
    spec.draw(&root).map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())
}

// ---------------------------------------------------------------------------
// Drawing, generic over the backend.

type DrawResult<DB> = Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

impl FigureSpec {
    pub fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult<DB> {
        root.fill(&WHITE)?;
        let body = root.titled(&self.title, font(TITLE_SIZE))?;
        match &self.kind {
            Kind::Bars(bars) => draw_grouped_bars(root, &body, bars),
            Kind::Cdf(cdf) => draw_cdf(&body, cdf),
            Kind::TimeSeries(ts) => draw_time_series(&body, ts),
        }
    }
}

enum Mark {
    Box(RGBColor),
    Line(RGBColor),
    Diamond,
    Whisker,
}

/// One row of legend entries, left to right from the plot's left edge.
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    items: &[(Mark, String)],
) -> DrawResult<DB> {
    let y = LEGEND_H as i32 / 2;
    let mut x = Y_LABEL_AREA as i32;
    let style = font(LABEL_SIZE).pos(Pos::new(HPos::Left, VPos::Center));
    for (mark, label) in items {
        match mark {
            Mark::Box(c) => {
                area.draw(&Rectangle::new([(x, y - 6), (x + 12, y + 6)], c.filled()))?
            }
            Mark::Line(c) => area.draw(&PathElement::new(
                vec![(x, y), (x + 14, y)],
                c.stroke_width(3),
            ))?,
            Mark::Diamond => area.draw(&diamond((x + 6, y)))?,
            Mark::Whisker => {
                let s = BLACK.stroke_width(1);
                area.draw(&PathElement::new(vec![(x + 6, y - 7), (x + 6, y + 7)], s))?;
                area.draw(&PathElement::new(vec![(x + 2, y - 7), (x + 10, y - 7)], s))?;
                area.draw(&PathElement::new(vec![(x + 2, y + 7), (x + 10, y + 7)], s))?;
            }
        }
        area.draw(&Text::new(label.clone(), (x + 18, y), style.clone()))?;
        x += 18 + text_width(label, LABEL_SIZE).ceil() as i32 + 22;
    }
    Ok(())
}

/// The median marker: a filled black diamond centred on `at` (pixels).
fn diamond(at: BackendCoord) -> Polygon<BackendCoord> {
    let (x, y) = at;
    Polygon::new(
        vec![(x, y - 5), (x + 5, y), (x, y + 5), (x - 5, y)],
        BLACK.filled(),
    )
}

fn fmt_tick(v: f64) -> String {
    let a = v.abs();
    let s = if a >= 1e9 {
        // Beyond "M" the suffixes stop being obvious; scientific is honest.
        return format!("{v:.1e}");
    } else if a >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.1}k", v / 1e3)
    } else if a >= 100.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 0.01 {
        format!("{v:.3}")
    } else {
        return format!("{v:.1e}");
    };
    // "2.50M" → "2.5M", "0.100" → "0.1"
    if let Some((num, suffix)) = s
        .find(['M', 'k'])
        .map(|i| (s[..i].to_string(), s[i..].to_string()))
    {
        return trim_zeros(&num) + &suffix;
    }
    trim_zeros(&s)
}

fn trim_zeros(s: &str) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s.to_string()
    }
}

/// Grouped bars (Carlucci et al. 2015, Fig. 8 style): groups = settings,
/// one bar per series; summary style adds CI whiskers and median diamonds,
/// improvement style a zero line and a value label per bar.
fn draw_grouped_bars<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    area: &DrawingArea<DB, Shift>,
    fig: &GroupedBars,
) -> DrawResult<DB> {
    let (legend, plot) = area.split_vertically(LEGEND_H);
    let mut items: Vec<(Mark, String)> = fig
        .series
        .iter()
        .map(|(name, c)| (Mark::Box(*c), name.clone()))
        .collect();
    if fig.style == BarStyle::Summary {
        items.push((Mark::Whisker, "95 % CI".to_string()));
        items.push((Mark::Diamond, "median".to_string()));
    }
    draw_legend(&legend, &items)?;

    // y range: always include 0 (bars start there), then room above (and
    // below, for negative improvements) for whiskers and labels.
    let mut lo: f64 = 0.0;
    let mut hi: f64 = 0.0;
    for bar in fig.bars.iter().flatten().flatten() {
        for v in [
            Some(bar.value),
            bar.median,
            bar.ci.map(|c| c.0),
            bar.ci.map(|c| c.1),
        ]
        .into_iter()
        .flatten()
        .filter(|v| v.is_finite())
        {
            lo = lo.min(v);
            hi = hi.max(v);
        }
    }
    let (lo, hi) = {
        let (plo, phi) = padded(lo, hi, 0.12);
        // Headroom above zero even when every value is negative: the "n/a"
        // and value labels sit above the zero line.
        (if lo < 0.0 { plo } else { 0.0 }, phi)
    };

    let n_groups = fig.groups.len().max(1);
    let label_lines = fig.groups.iter().map(Vec::len).max().unwrap_or(1).max(1) as u32;
    let mut chart = ChartBuilder::on(&plot)
        .margin(10)
        .margin_right(20)
        .x_label_area_size(16 * label_lines + 14)
        .y_label_area_size(Y_LABEL_AREA - 10)
        .build_cartesian_2d(0f64..n_groups as f64, lo..hi)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .x_label_formatter(&|_| String::new())
        .y_labels(8)
        .y_label_formatter(&|v| fmt_tick(*v))
        .y_desc(fig.y_desc.as_str())
        .label_style(font(LABEL_SIZE))
        .axis_desc_style(font(DESC_SIZE))
        .draw()?;

    // Light separators between groups.
    for g in 1..n_groups {
        chart.draw_series(std::iter::once(PathElement::new(
            vec![(g as f64, lo), (g as f64, hi)],
            RGBColor(215, 215, 215).stroke_width(1),
        )))?;
    }
    if fig.style == BarStyle::Improvement && lo < 0.0 {
        chart.draw_series(std::iter::once(PathElement::new(
            vec![(0.0, 0.0), (n_groups as f64, 0.0)],
            BLACK.stroke_width(1),
        )))?;
    }

    let n_series = fig.series.len().max(1) as f64;
    let slot = 0.8 / n_series;
    let small = font(LABEL_SIZE - 1.0);
    for (g, row) in fig.bars.iter().enumerate() {
        for (s, bar) in row.iter().enumerate() {
            let x0 = g as f64 + 0.1 + s as f64 * slot;
            let (x1, cx) = (x0 + slot * 0.88, x0 + slot * 0.44);
            let color = fig.series.get(s).map_or(PALETTE[7], |(_, c)| *c);
            let Some(bar) = bar.filter(|b| b.value.is_finite()) else {
                chart.draw_series(std::iter::once(Text::new(
                    "n/a",
                    (cx, 0.0),
                    small.clone().pos(Pos::new(HPos::Center, VPos::Bottom)),
                )))?;
                continue;
            };
            chart.draw_series(std::iter::once(Rectangle::new(
                [(x0, 0.0), (x1, bar.value)],
                color.filled(),
            )))?;
            if let Some((l, h)) = bar.ci.filter(|(l, h)| l.is_finite() && h.is_finite()) {
                let cap = slot * 0.18;
                let s = BLACK.stroke_width(1);
                chart.draw_series([
                    PathElement::new(vec![(cx, l), (cx, h)], s),
                    PathElement::new(vec![(cx - cap, l), (cx + cap, l)], s),
                    PathElement::new(vec![(cx - cap, h), (cx + cap, h)], s),
                ])?;
            }
            if let Some(m) = bar.median.filter(|m| m.is_finite()) {
                let at = chart.backend_coord(&(cx, m));
                root.draw(&diamond(at))?;
            }
            if fig.style == BarStyle::Improvement {
                let v_pos = if bar.value >= 0.0 {
                    VPos::Bottom
                } else {
                    VPos::Top
                };
                chart.draw_series(std::iter::once(Text::new(
                    format!("{:+.1}%", bar.value),
                    (cx, bar.value),
                    small.clone().pos(Pos::new(HPos::Center, v_pos)),
                )))?;
            }
        }
    }

    // Group labels under the axis, drawn on the root in pixels because
    // plotters' tick labels cannot be placed at group centres.
    let style = font(LABEL_SIZE).pos(Pos::new(HPos::Center, VPos::Top));
    for (g, lines) in fig.groups.iter().enumerate() {
        let (px, py) = chart.backend_coord(&(g as f64 + 0.5, lo));
        for (i, line) in lines.iter().enumerate() {
            root.draw(&Text::new(
                line.clone(),
                (px, py + 8 + 16 * i as i32),
                style.clone(),
            ))?;
        }
    }
    Ok(())
}

/// Empirical CDFs as step lines (Megyesi et al. 2016, Fig. 4 style):
/// x = metric with unit, y = fraction of runs.
fn draw_cdf<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, fig: &CdfPlot) -> DrawResult<DB> {
    let (legend, plot) = area.split_vertically(LEGEND_H);
    let items: Vec<(Mark, String)> = fig
        .lines
        .iter()
        .map(|l| (Mark::Line(l.color), l.protocol.clone()))
        .collect();
    draw_legend(&legend, &items)?;

    let values = fig.lines.iter().flat_map(|l| l.points.iter().map(|p| p.0));
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), v| {
        (l.min(v), h.max(v))
    });
    let (lo, hi) = if lo.is_finite() {
        padded(lo, hi, 0.05)
    } else {
        (0.0, 1.0)
    };
    let mut chart = ChartBuilder::on(&plot)
        .margin(10)
        .margin_right(24)
        .x_label_area_size(46)
        .y_label_area_size(Y_LABEL_AREA - 10)
        .build_cartesian_2d(lo..hi, 0f64..1.05)?;
    chart
        .configure_mesh()
        .x_desc(fig.x_desc.as_str())
        .y_desc("fraction of runs")
        .x_label_formatter(&|v| fmt_tick(*v))
        .y_label_formatter(&|v| fmt_tick(*v))
        .label_style(font(LABEL_SIZE))
        .axis_desc_style(font(DESC_SIZE))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()?;

    for CdfLine { color, points, .. } in &fig.lines {
        // Right-continuous step function: flat at 0 left of the first value,
        // a vertical jump at each value, flat at 1 to the right.
        let mut steps = vec![(lo, 0.0)];
        let mut prev = 0.0;
        for &(v, f) in points {
            steps.push((v, prev));
            steps.push((v, f));
            prev = f;
        }
        steps.push((hi, prev));
        chart.draw_series(LineSeries::new(steps, color.stroke_width(2)))?;
        chart.draw_series(points.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
    }
    Ok(())
}

/// One panel per series of a run, stacked, sharing the time axis
/// (Carlucci et al. 2015, Fig. 6 style: cwnd over queue delay).
fn draw_time_series<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    fig: &SeriesPlot,
) -> DrawResult<DB> {
    let panels = area.split_evenly((fig.panels.len().max(1), 1));
    let (t_lo, t_hi) = fig.t_range;
    for (panel_area, panel) in panels.iter().zip(&fig.panels) {
        let (v_lo, v_hi) = panel
            .lines
            .iter()
            .flat_map(|l| l.points.iter())
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), p| {
                (l.min(p.1), h.max(p.1))
            });
        // Start the axis at zero for non-negative data (cwnd, delay): the
        // reader judges magnitudes, not just the shape.
        let (v_lo, v_hi) = if v_lo.is_finite() {
            let (l, h) = padded(v_lo.min(0.0), v_hi, 0.06);
            (if v_lo >= 0.0 { 0.0 } else { l }, h)
        } else {
            (0.0, 1.0)
        };
        let mut chart = ChartBuilder::on(panel_area)
            .margin(10)
            .margin_right(24)
            .x_label_area_size(44)
            .y_label_area_size(Y_LABEL_AREA - 10)
            .build_cartesian_2d(t_lo..t_hi, v_lo..v_hi)?;
        chart
            .configure_mesh()
            .x_desc("time (s)")
            .y_desc(panel.y_desc.as_str())
            .x_label_formatter(&|v| fmt_tick(*v))
            .y_label_formatter(&|v| fmt_tick(*v))
            .label_style(font(LABEL_SIZE))
            .axis_desc_style(font(DESC_SIZE))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()?;
        if panel.lines.iter().all(|l| l.points.is_empty()) {
            chart.draw_series(std::iter::once(Text::new(
                "no finite points",
                ((t_lo + t_hi) / 2.0, (v_lo + v_hi) / 2.0),
                font(LABEL_SIZE).pos(Pos::new(HPos::Center, VPos::Center)),
            )))?;
            continue;
        }
        // Spans behind the lines, translucent so two players' overlapping spans show.
        for span in &fig.spans {
            let shade = SPAN_SERIES
                .iter()
                .find(|k| k.0 == span.kind)
                .map_or(RGBColor(220, 220, 220), |k| k.2);
            chart.draw_series(std::iter::once(Rectangle::new(
                [(span.from, v_lo), (span.to, v_hi)],
                shade.mix(0.5).filled(),
            )))?;
        }
        for &t in &fig.marks {
            chart.draw_series(std::iter::once(PathElement::new(
                vec![(t, v_lo), (t, v_hi)],
                RGBColor(60, 60, 60).stroke_width(1),
            )))?;
        }
        for line in &panel.lines {
            // One pixel wide on purpose: plotters' bitmap backend joins wider
            // polylines with unbounded miters, so a sawtooth (cwnd after a
            // loss) grows spikes far outside the panel.
            chart.draw_series(LineSeries::new(
                line.points.iter().copied(),
                line.color.stroke_width(1),
            ))?;
            // A single sample draws no line; mark it so the panel is not blank.
            if let [p] = line.points[..] {
                chart.draw_series(std::iter::once(Circle::new(p, 3, line.color.filled())))?;
            }
        }
        // A legend of the named lines, top left inside the plot, one line of text each.
        let named: Vec<&PanelLine> = panel.lines.iter().filter(|l| !l.label.is_empty()).collect();
        for (j, line) in named.iter().enumerate() {
            let y = v_hi - (v_hi - v_lo) * (0.06 + 0.09 * j as f64);
            let x = t_lo + (t_hi - t_lo) * 0.01;
            chart.draw_series(std::iter::once(Text::new(
                format!("— {}", line.label),
                (x, y),
                font(LABEL_SIZE).color(&line.color),
            )))?;
        }
        // The shades' key, top right of the first panel, for the kinds present.
        if std::ptr::eq(panel, &fig.panels[0]) {
            let kinds = SPAN_SERIES
                .iter()
                .filter(|k| fig.spans.iter().any(|s| s.kind == k.0));
            for (j, (_, text, shade)) in kinds.enumerate() {
                let y = v_hi - (v_hi - v_lo) * (0.06 + 0.09 * j as f64);
                let x = t_hi - (t_hi - t_lo) * 0.01;
                chart.draw_series(std::iter::once(Text::new(
                    format!("{text} (shaded)"),
                    (x, y),
                    font(LABEL_SIZE)
                        .color(&RGBColor(shade.0 / 2, shade.1 / 2, shade.2 / 2))
                        .pos(Pos::new(HPos::Right, VPos::Top)),
                )))?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TimeSeries;

    #[test]
    fn slugs_are_file_safe() {
        assert_eq!(
            slug("proto=h2;rate=10mbit;loss=2%;rep=3"),
            "proto-h2-rate-10mbit-loss-2-rep-3"
        );
        assert_eq!(slug("<>"), "x");
        assert!(slug(&"a;".repeat(100)).len() <= 48);
    }

    #[test]
    fn playback_interruptions_become_shaded_spans_not_panels() {
        let series = |name: &str, points: Vec<(f64, f64)>| TimeSeries {
            run_key: "k".into(),
            name: name.into(),
            unit: String::new(),
            points,
        };
        let input = ReportInput {
            scenario_name: "v".into(),
            description: String::new(),
            scenario_file: String::new(),
            scenario_text: String::new(),
            environment: Vec::new(),
            runs: Vec::new(),
            series: vec![
                series("buffer_s@1 h3", vec![(0.0, 0.0), (10.0, 8.0)]),
                // A stall from 2 to 3.5 s and one still going at the end (9 to 10 s).
                series(
                    "stall@1 h3",
                    vec![
                        (0.0, 0.0),
                        (2.0, 0.0),
                        (2.0, 1.0),
                        (3.5, 1.0),
                        (3.5, 0.0),
                        (9.0, 0.0),
                        (9.0, 1.0),
                        (10.0, 1.0),
                    ],
                ),
                series("seek_wait@1 h3", vec![(0.0, 0.0), (10.0, 0.0)]),
                // Network switches at 4 and 8 s: marks, not a panel.
                series(
                    "network_switch",
                    vec![
                        (0.0, 0.0),
                        (4.0, 0.0),
                        (4.0, 1.0),
                        (4.0, 0.0),
                        (8.0, 0.0),
                        (8.0, 1.0),
                        (8.0, 0.0),
                        (10.0, 0.0),
                    ],
                ),
            ],
            planned_runs: 1,
            traced_files: Default::default(),
        };
        let plot = series_plot(&input, "k");
        assert_eq!(plot.panels.len(), 1, "only the buffer is a panel");
        assert_eq!(plot.marks, [4.0, 8.0]);
        assert_eq!(
            marks_caption(&plot.marks),
            " Vertical lines: network switches at 4.0, 8.0 s."
        );
        let stalls: Vec<(f64, f64)> = plot.spans.iter().map(|s| (s.from, s.to)).collect();
        assert_eq!(stalls, [(2.0, 3.5), (9.0, 10.0)]);
        assert!(
            plot.spans
                .iter()
                .all(|s| s.kind == "stall" && s.label == "1 h3")
        );
        assert_eq!(
            spans_caption(&plot.spans),
            " Shaded: stall (1 h3): 2 span(s), 2.50 s."
        );
        // Drawing them works on both backends' path.
        let spec = FigureSpec {
            stem: "t".into(),
            section: Section::TimeSeries,
            size: (760, 300),
            caption: String::new(),
            title: "t".into(),
            kind: Kind::TimeSeries(plot),
        };
        assert!(draw_svg(&spec).unwrap().contains("<svg"));
    }

    #[test]
    fn labels_wrap_at_commas() {
        assert_eq!(wrap_label("all runs"), ["all runs"]);
        let lines = wrap_label("rate=10mbit, loss=2%, rtt=50ms, queue=100pkt, jitter=5ms");
        assert!(lines.len() >= 2, "{lines:?}");
        assert_eq!(
            lines.join(", "),
            "rate=10mbit, loss=2%, rtt=50ms, queue=100pkt, jitter=5ms"
        );
    }

    #[test]
    fn ranges_never_degenerate() {
        assert_eq!(padded(0.0, 10.0, 0.1), (-1.0, 11.0));
        let (l, h) = padded(5.0, 5.0, 0.1);
        assert!(l < 5.0 && h > 5.0);
        let (l, h) = padded(0.0, 0.0, 0.1);
        assert!(l < 0.0 && h > 0.0);
    }

    #[test]
    fn decimation_keeps_extremes() {
        let pts: Vec<(f64, f64)> = (0..10_000).map(|i| (i as f64, (i % 100) as f64)).collect();
        let d = decimate(pts, 1000);
        assert!(d.len() <= 1002);
        assert!(d.iter().any(|p| p.1 == 99.0) && d.iter().any(|p| p.1 == 0.0));
        assert!(d.windows(2).all(|w| w[0].0 <= w[1].0));
    }

    #[test]
    fn ticks_are_compact() {
        assert_eq!(fmt_tick(2_500_000.0), "2.5M");
        assert_eq!(fmt_tick(65_536.0), "65.5k");
        assert_eq!(fmt_tick(12_500.0), "12.5k");
        assert_eq!(fmt_tick(20_000.0), "20k");
        assert_eq!(fmt_tick(250.0), "250");
        assert_eq!(fmt_tick(0.5), "0.5");
        assert_eq!(fmt_tick(0.0), "0");
        assert_eq!(fmt_tick(1e300), "1.0e300");
        assert_eq!(fmt_tick(0.001), "1.0e-3");
    }
}
