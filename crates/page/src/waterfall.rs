//! Waterfall figures of a page load, in the style of the network panel screenshots on the Carlucci et
//! al. project page (seed 003): one row per object in start order, a bar per row split into the
//! phases blocked / connect / TLS / send / wait / receive (Chrome DevTools' colours: grey, orange,
//! purple, teal, green, blue), the connection id next to the name, time in ms along the top, and the
//! page load time as a red vertical line (DevTools' "load" line).
//!
//! Everything is drawn with plain plotters primitives at computed pixel positions (no chart mesh),
//! because the SVG backend then needs no font at all — text becomes `<text>` elements the viewer
//! renders — while the PNG backend rasterises text with ab_glyph from a font file found at run time.
//! Without a font the SVG is still written and the result carries a note instead of a PNG.

use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::har::{ObjectTiming, page_load_ms};

/// Errors of drawing or writing a waterfall.
#[derive(Debug, thiserror::Error)]
pub enum WaterfallError {
    /// The drawing backend failed (for the PNG: encoding or writing the file).
    #[error("{}: drawing the waterfall failed: {message}", path.display())]
    Draw {
        /// The output file.
        path: PathBuf,
        /// The backend's error.
        message: String,
    },
    /// Writing the SVG file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The output file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}

/// How to draw a waterfall.
#[derive(Debug, Clone, PartialEq)]
pub struct WaterfallOptions {
    /// The figure's title (e.g. `carlucci-small over h2, 3 Mbit/s, 50 ms`).
    pub title: String,
    /// The page load time to mark; `None` takes the latest end of the objects.
    pub page_load_ms: Option<f64>,
    /// Width in pixels (the height follows from the number of rows).
    pub width: u32,
    /// A font file for PNG text, tried before the usual places ([`quiclab_fonts::CANDIDATES`]). Fonts are registered with
    /// plotters once per process, so only the first successful call's font is used.
    pub font_path: Option<PathBuf>,
}

impl Default for WaterfallOptions {
    fn default() -> Self {
        WaterfallOptions {
            title: String::new(),
            page_load_ms: None,
            width: 1200,
            font_path: None,
        }
    }
}

/// What [`write_waterfall`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaterfallOutput {
    /// The SVG file.
    pub svg: PathBuf,
    /// The PNG file, if one was asked for and a font was found.
    pub png: Option<PathBuf>,
    /// Why there is no PNG, if one was asked for and none was written.
    pub note: Option<String>,
}

/// The phases in drawing order: name for the legend, colour.
const PHASES: [(&str, RGBColor); 6] = [
    ("Blocked", RGBColor(0xA8, 0xA8, 0xA8)),
    ("Connect", RGBColor(0xE5, 0x82, 0x26)),
    ("TLS", RGBColor(0xA9, 0x4B, 0xC8)),
    ("Send", RGBColor(0x26, 0xA6, 0x9A)),
    ("Wait (TTFB)", RGBColor(0x1E, 0xAA, 0x41)),
    ("Receive", RGBColor(0x1B, 0x68, 0xF1)),
];
const LOAD_LINE: RGBColor = RGBColor(0xE5, 0x39, 0x35);
const GRID: RGBColor = RGBColor(0xE0, 0xE0, 0xE0);
const STRIPE: RGBColor = RGBColor(0xF5, 0xF5, 0xF5);
const TEXT: RGBColor = RGBColor(0x20, 0x20, 0x20);
const MUTED: RGBColor = RGBColor(0x60, 0x60, 0x60);

// Layout in pixels.
const MARGIN: i32 = 10;
const TITLE_H: i32 = 28;
const HEADER_H: i32 = 22;
const ROW_H: i32 = 16;
const BAR_H: i32 = 10;
const FOOTER_H: i32 = 56;
const NAME_W: i32 = 300;
const CONN_W: i32 = 60;
const MIN_WIDTH: u32 = 720;
const LEGEND_SLOT: i32 = 100;
/// Most rows drawn: beyond this the figure (and the PNG's pixel buffer, 1200 × 16 px per row) grows
/// unreadable and large; the title then says how many objects are shown.
pub const MAX_ROWS: usize = 1000;
/// Longest object name shown; longer ones keep their end (the file name), prefixed with `…`.
const NAME_CHARS: usize = 42;

/// One row, precomputed.
struct Row {
    label: String,
    conn: u64,
    start: f64,
    phases: [f64; 6],
}

fn rows(objects: &[ObjectTiming]) -> Vec<Row> {
    let mut rows: Vec<Row> = objects
        .iter()
        .map(|o| Row {
            label: shorten(&o.path),
            conn: o.connection,
            start: o.started_ms.max(0.0),
            phases: [
                o.blocked_ms,
                o.connect_ms,
                o.tls_ms,
                o.send_ms,
                o.wait_ms,
                o.receive_ms,
            ]
            .map(|v| v.max(0.0)),
        })
        .collect();
    // Stable: objects starting together keep their input order, as DevTools keeps request order.
    rows.sort_by(|a, b| a.start.total_cmp(&b.start));
    rows.truncate(MAX_ROWS);
    rows
}

/// The title, saying so when rows were left out.
fn full_title(title: &str, objects: usize) -> String {
    if objects > MAX_ROWS {
        format!("{title} (first {MAX_ROWS} of {objects} objects by start time)")
    } else {
        title.to_string()
    }
}

fn shorten(path: &str) -> String {
    let n = path.chars().count();
    if n <= NAME_CHARS {
        path.to_string()
    } else {
        let tail: String = path.chars().skip(n - (NAME_CHARS - 1)).collect();
        format!("…{tail}")
    }
}

/// A "nice" tick step (1, 2 or 5 × 10^k) giving about `target` ticks over `range`.
fn tick_step(range: f64, target: f64) -> f64 {
    let raw = (range / target).max(f64::MIN_POSITIVE);
    let magnitude = 10f64.powf(raw.log10().floor());
    let norm = raw / magnitude;
    let nice = if norm <= 1.0 {
        1.0
    } else if norm <= 2.0 {
        2.0
    } else if norm <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * magnitude
}

fn size_for(rows: usize, width: u32) -> (u32, u32) {
    let rows = i32::try_from(rows).unwrap_or(i32::MAX);
    let height = (2 * MARGIN + TITLE_H + HEADER_H + FOOTER_H)
        .saturating_add(rows.max(1).saturating_mul(ROW_H));
    (
        width.max(MIN_WIDTH),
        u32::try_from(height).unwrap_or(u32::MAX),
    )
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    rows: &[Row],
    title: &str,
    load_ms: f64,
    width: u32,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    root.fill(&WHITE)?;
    let width = i32::try_from(width).unwrap_or(i32::MAX);
    let font = |size: u32, color: &'static RGBColor, h: HPos| {
        TextStyle::from((quiclab_fonts::FAMILY, size).into_font())
            .color(color)
            .pos(Pos::new(h, VPos::Center))
    };

    let x0 = MARGIN + NAME_W + CONN_W;
    let x1 = width - MARGIN - 20;
    let top = MARGIN + TITLE_H + HEADER_H;
    let n = i32::try_from(rows.len()).unwrap_or(i32::MAX);
    let bottom = top.saturating_add(n.max(1).saturating_mul(ROW_H));
    let row_y =
        |r: usize| top.saturating_add(i32::try_from(r).unwrap_or(i32::MAX).saturating_mul(ROW_H));

    let end_ms = rows
        .iter()
        .map(|r| r.start + r.phases.iter().sum::<f64>())
        .fold(load_ms, f64::max);
    let step = tick_step(end_ms.max(1.0) * 1.05, 8.0);
    let x_max = ((end_ms.max(1.0) * 1.05) / step).ceil() * step;
    let px = |ms: f64| x0 + ((ms / x_max) * f64::from(x1 - x0)).round() as i32;

    root.draw(&Text::new(
        title.to_string(),
        (MARGIN, MARGIN + TITLE_H / 2),
        font(16, &TEXT, HPos::Left),
    ))?;

    // Header: column names and time ticks with grid lines.
    let header_y = MARGIN + TITLE_H + HEADER_H / 2;
    root.draw(&Text::new(
        "Object".to_string(),
        (MARGIN, header_y),
        font(12, &MUTED, HPos::Left),
    ))?;
    root.draw(&Text::new(
        "Conn".to_string(),
        (x0 - 12, header_y),
        font(12, &MUTED, HPos::Right),
    ))?;
    for r in 0..rows.len() {
        if r % 2 == 1 {
            let y = row_y(r);
            root.draw(&Rectangle::new(
                [(MARGIN, y), (width - MARGIN, y + ROW_H)],
                STRIPE.filled(),
            ))?;
        }
    }
    let ticks = (x_max / step).round() as i64;
    for k in 0..=ticks {
        let ms = k as f64 * step;
        let x = px(ms);
        root.draw(&PathElement::new(
            vec![(x, top), (x, bottom)],
            GRID.stroke_width(1),
        ))?;
        root.draw(&Text::new(
            format_ms(ms, step),
            (x, header_y),
            font(11, &MUTED, HPos::Center),
        ))?;
    }
    root.draw(&PathElement::new(
        vec![(MARGIN, top), (width - MARGIN, top)],
        MUTED.stroke_width(1),
    ))?;

    for (i, row) in rows.iter().enumerate() {
        let y = row_y(i);
        let mid = y + ROW_H / 2;
        root.draw(&Text::new(
            row.label.clone(),
            (MARGIN + 2, mid),
            font(11, &TEXT, HPos::Left),
        ))?;
        root.draw(&Text::new(
            row.conn.to_string(),
            (x0 - 12, mid),
            font(11, &TEXT, HPos::Right),
        ))?;
        let mut t = row.start;
        for (phase, (_, color)) in row.phases.iter().zip(PHASES.iter()) {
            if *phase > 0.0 {
                let (a, b) = (px(t), px(t + phase));
                // A phase too short to see still gets one pixel, so no phase silently vanishes.
                let b = b.max(a + 1);
                root.draw(&Rectangle::new(
                    [(a, mid - BAR_H / 2), (b, mid + BAR_H / 2)],
                    color.filled(),
                ))?;
            }
            t += phase;
        }
    }

    // The page load time.
    let lx = px(load_ms);
    root.draw(&PathElement::new(
        vec![(lx, top), (lx, bottom)],
        LOAD_LINE.stroke_width(2),
    ))?;
    root.draw(&Text::new(
        format!("load {:.0} ms", load_ms),
        (lx + 4, top + 8),
        font(11, &LOAD_LINE, HPos::Left),
    ))?;

    // Footer: axis name and legend.
    let axis_y = bottom + 14;
    root.draw(&Text::new(
        "time since navigation start (ms)".to_string(),
        ((x0 + x1) / 2, axis_y),
        font(12, &MUTED, HPos::Center),
    ))?;
    let legend_y = bottom + 38;
    let mut x = MARGIN;
    for (name, color) in PHASES.iter() {
        root.draw(&Rectangle::new(
            [(x, legend_y - 5), (x + 14, legend_y + 5)],
            color.filled(),
        ))?;
        root.draw(&Text::new(
            name.to_string(),
            (x + 18, legend_y),
            font(12, &TEXT, HPos::Left),
        ))?;
        // Fixed slots: the longest name, "Wait (TTFB)", fits in 100 px at 12 px.
        x += LEGEND_SLOT;
    }
    root.draw(&PathElement::new(
        vec![(x, legend_y - 6), (x, legend_y + 6)],
        LOAD_LINE.stroke_width(2),
    ))?;
    root.draw(&Text::new(
        "Page load".to_string(),
        (x + 6, legend_y),
        font(12, &TEXT, HPos::Left),
    ))?;
    Ok(())
}

/// Tick labels: whole ms, or one decimal when the step is below 1 ms.
fn format_ms(ms: f64, step: f64) -> String {
    if step < 1.0 {
        format!("{ms:.1}")
    } else {
        format!("{ms:.0}")
    }
}

/// The waterfall as SVG text (needs no font).
pub fn svg_string(
    objects: &[ObjectTiming],
    options: &WaterfallOptions,
) -> Result<String, WaterfallError> {
    let rows = rows(objects);
    let load = options
        .page_load_ms
        .unwrap_or_else(|| page_load_ms(objects));
    let size = size_for(rows.len(), options.width);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        let title = full_title(&options.title, objects.len());
        draw(&root, &rows, &title, load, size.0).map_err(|e| WaterfallError::Draw {
            path: PathBuf::from("<svg>"),
            message: e.to_string(),
        })?;
        root.present().map_err(|e| WaterfallError::Draw {
            path: PathBuf::from("<svg>"),
            message: e.to_string(),
        })?;
    }
    Ok(svg)
}

/// Writes the waterfall as SVG and, if `png` is given and a font is found, as PNG. A missing font is
/// not an error: the result's `note` says why there is no PNG.
pub fn write_waterfall(
    objects: &[ObjectTiming],
    options: &WaterfallOptions,
    svg: &Path,
    png: Option<&Path>,
) -> Result<WaterfallOutput, WaterfallError> {
    let text = svg_string(objects, options)?;
    std::fs::write(svg, text).map_err(|source| WaterfallError::Io {
        path: svg.to_path_buf(),
        source,
    })?;
    let mut out = WaterfallOutput {
        svg: svg.to_path_buf(),
        png: None,
        note: None,
    };
    let Some(png) = png else {
        return Ok(out);
    };
    match draw_png(objects, options, png)? {
        Some(note) => out.note = Some(note),
        None => out.png = Some(png.to_path_buf()),
    }
    Ok(out)
}

/// Draws the waterfall as PNG into `png` (a path the caller made safe to write: quiclab's own
/// temporary file). `Ok(Some(note))` when no font was found and nothing was drawn.
pub fn draw_png(
    objects: &[ObjectTiming],
    options: &WaterfallOptions,
    png: &Path,
) -> Result<Option<String>, WaterfallError> {
    if let Err(note) = register_font(options.font_path.as_deref()) {
        return Ok(Some(note));
    }
    let rows = rows(objects);
    let load = options
        .page_load_ms
        .unwrap_or_else(|| page_load_ms(objects));
    let size = size_for(rows.len(), options.width);
    let draw_err = |e: &dyn std::fmt::Display| WaterfallError::Draw {
        path: png.to_path_buf(),
        message: e.to_string(),
    };
    // Glyphs at their bearings (plotters' bitmap text drops them: "pi e").
    let root = quiclab_fonts::GlyphBackend::new(BitMapBackend::new(png, size)).into_drawing_area();
    let title = full_title(&options.title, objects.len());
    draw(&root, &rows, &title, load, size.0).map_err(|e| draw_err(&e))?;
    root.present().map_err(|e| draw_err(&e))?;
    Ok(None)
}

/// The first font file that exists: `preferred`, then the usual places ([`quiclab_fonts::find`]).
pub fn find_font(preferred: Option<&Path>) -> Option<PathBuf> {
    quiclab_fonts::find(preferred)
}

/// Registers the font for PNG text (`preferred` first), or says why there is no PNG.
fn register_font(preferred: Option<&Path>) -> Result<PathBuf, String> {
    quiclab_fonts::register(quiclab_fonts::with_candidates(preferred))
        .map_err(|e| format!("no PNG written: {e}; the SVG needs none"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_nice() {
        assert_eq!(tick_step(1000.0, 8.0), 200.0);
        assert_eq!(tick_step(2100.0, 8.0), 500.0);
        assert_eq!(tick_step(80.0, 8.0), 10.0);
        assert_eq!(tick_step(3.0, 8.0), 0.5);
    }

    #[test]
    fn long_names_keep_their_end() {
        let long = format!("/{}/image.jpg", "d".repeat(60));
        let s = shorten(&long);
        assert_eq!(s.chars().count(), NAME_CHARS);
        assert!(s.starts_with('…') && s.ends_with("/image.jpg"));
        assert_eq!(shorten("/a.jpg"), "/a.jpg");
    }
}
