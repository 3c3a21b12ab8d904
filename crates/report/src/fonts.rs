//! The report's use of the shared figure font ([`quiclab_fonts`]).

use std::path::PathBuf;

pub use quiclab_fonts::{CANDIDATES, FAMILY};

pub const NO_FONT_NOTE: &str = "PNG figures skipped: no font; apt-get install fonts-dejavu-core";

/// The registered font, registering the first usable candidate if none is yet. An empty
/// `candidates` list means "no PNGs" even when a font is registered: callers use it to get the
/// SVG-only output deterministically.
pub fn ensure_font(candidates: &[&str]) -> Option<PathBuf> {
    if candidates.is_empty() {
        return None;
    }
    quiclab_fonts::register(candidates.iter().map(PathBuf::from)).ok()
}
