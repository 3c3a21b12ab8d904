//! Font for the PNG figures.
//!
//! plotters is built without its "ttf" feature (that one needs fontconfig),
//! so bitmap text goes through ab_glyph, which draws nothing until a font is
//! registered. We look for a TrueType file at run time rather than embedding
//! one: it keeps the binary small and the licence question out of the crate.
//! SVG figures never need it (see `figures::SvgBackend`).

use std::path::PathBuf;
use std::sync::Mutex;

use plotters::style::FontStyle;

/// Tried in order. DejaVu Sans first (Debian/Ubuntu package
/// fonts-dejavu-core), then its paths on other distributions, then
/// Liberation Sans as a metric-compatible stand-in.
pub const CANDIDATES: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu-sans-fonts/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/liberation-sans/LiberationSans-Regular.ttf",
];

pub const NO_FONT_NOTE: &str = "PNG figures skipped: no font; apt-get install fonts-dejavu-core";

/// The family name the figures ask for; the font is registered under it.
pub const FAMILY: &str = "sans-serif";

/// Fonts registered or rejected so far in this process.
struct State {
    registered: Option<PathBuf>,
    /// Files that were read but are not valid fonts; never retried, because
    /// each attempt leaks the file's bytes (see below).
    rejected: Vec<String>,
}

/// plotters keeps registered fonts in a process-wide table and needs
/// `&'static` bytes, so we register once and leak the file's bytes (a few
/// hundred KiB, once per process).
static STATE: Mutex<State> = Mutex::new(State {
    registered: None,
    rejected: Vec::new(),
});

/// Returns the registered font, registering the first loadable candidate if
/// none is yet. An empty `candidates` list means "no PNGs" even when a font
/// is registered: callers use it to get the SVG-only output deterministically.
pub fn ensure_font(candidates: &[&str]) -> Option<PathBuf> {
    if candidates.is_empty() {
        return None;
    }
    // A poisoned lock only means another thread panicked mid-registration;
    // the state inside is still consistent (each field is set in one step).
    let mut state = STATE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(path) = state.registered.as_ref() {
        return Some(path.clone());
    }
    for &candidate in candidates {
        if state.rejected.iter().any(|r| r == candidate) {
            continue;
        }
        let Ok(bytes) = std::fs::read(candidate) else {
            continue;
        };
        let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        // Other styles (bold, italic) fall back to the normal one.
        if plotters::style::register_font(FAMILY, FontStyle::Normal, bytes).is_ok() {
            state.registered = Some(PathBuf::from(candidate));
            return state.registered.clone();
        }
        state.rejected.push(candidate.to_string());
    }
    None
}
