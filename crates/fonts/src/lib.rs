//! The font for quiclab's PNG figures (report figures and waterfalls), one registry per process.
//!
//! plotters is built without its "ttf" feature (that one needs fontconfig), so bitmap text goes
//! through ab_glyph, which draws nothing until a font is registered. quiclab looks for a TrueType
//! file at run time rather than embedding one: it keeps the binary small and the licence question
//! out of the crates. SVG figures never need it (their text is `<text>` the viewer renders).
//!
//! plotters keeps registered fonts in a process-wide table and needs `&'static` bytes, so a font
//! is registered once and its file's bytes are leaked (a few hundred KiB, once per process); a
//! file that fails is remembered and never read again.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

pub mod png;
pub use png::GlyphBackend;

use plotters::style::FontStyle;

/// Tried in order: DejaVu Sans (Debian/Ubuntu package fonts-dejavu-core) at its paths on the
/// common distributions, then Liberation Sans as a metric-compatible stand-in.
pub const CANDIDATES: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu-sans-fonts/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/liberation-sans/LiberationSans-Regular.ttf",
];

/// The family name figures ask for; the font is registered under it.
pub const FAMILY: &str = "sans-serif";

/// What this process registered or gave up on.
struct State {
    registered: Option<PathBuf>,
    /// The registered file's bytes (leaked once, as plotters needs them).
    bytes: Option<&'static [u8]>,
    /// Files read but refused (not a font, or plotters could not parse them): never retried.
    rejected: Vec<PathBuf>,
}

static STATE: Mutex<State> = Mutex::new(State {
    registered: None,
    bytes: None,
    rejected: Vec::new(),
});

/// The first file that exists: `preferred`, then [`CANDIDATES`].
pub fn find(preferred: Option<&Path>) -> Option<PathBuf> {
    with_candidates(preferred).find(|p| p.is_file())
}

/// `preferred` followed by [`CANDIDATES`].
pub fn with_candidates(preferred: Option<&Path>) -> impl Iterator<Item = PathBuf> {
    preferred
        .map(Path::to_path_buf)
        .into_iter()
        .chain(CANDIDATES.iter().map(PathBuf::from))
}

/// The registered font, registering the first usable one of `candidates` if none is yet; else
/// why none could be, naming every file tried.
pub fn register(candidates: impl IntoIterator<Item = PathBuf>) -> Result<PathBuf, String> {
    // A poisoned lock only means another thread panicked mid-registration; the state inside is
    // still consistent (each field is set in one step).
    let mut state = STATE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(path) = &state.registered {
        return Ok(path.clone());
    }
    let mut tried = Vec::new();
    for path in candidates {
        if state.rejected.contains(&path) {
            tried.push(format!("{}: refused before", path.display()));
            continue;
        }
        let bytes = match read_font(&path) {
            Ok(b) => b,
            Err(why) => {
                if path.exists() {
                    state.rejected.push(path);
                }
                tried.push(why);
                continue;
            }
        };
        let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        // Other styles (bold, italic) fall back to the normal one.
        if plotters::style::register_font(FAMILY, FontStyle::Normal, bytes).is_ok() {
            state.registered = Some(path.clone());
            state.bytes = Some(bytes);
            return Ok(path);
        }
        tried.push(format!("{}: the font could not be parsed", path.display()));
        state.rejected.push(path);
    }
    if tried.is_empty() {
        return Err("no usable font: no file given".to_string());
    }
    Err(format!("no usable font (tried {})", tried.join("; ")))
}

/// The registered font, for drawing glyphs ([`GlyphBackend`]); None before [`register`] found
/// one.
pub fn registered_font() -> Option<ab_glyph::FontRef<'static>> {
    let state = STATE.lock().unwrap_or_else(|e| e.into_inner());
    ab_glyph::FontRef::try_from_slice(state.bytes?).ok()
}

/// A font file's bytes if it looks like a TrueType/OpenType font (checked before the bytes are
/// leaked, so only plausible fonts are kept); else why not, naming the file.
fn read_font(path: &Path) -> Result<Vec<u8>, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    match bytes.get(..4) {
        Some([0, 1, 0, 0] | b"true" | b"OTTO" | b"ttcf") => Ok(bytes),
        _ => Err(format!("{}: not a TrueType/OpenType font", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unusable_fonts_are_named() {
        let err = read_font(Path::new("/nonexistent/font.ttf")).expect_err("missing");
        assert!(err.starts_with("/nonexistent/font.ttf: "), "{err}");
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
        let err = read_font(&manifest).expect_err("not a font");
        assert!(err.ends_with("not a TrueType/OpenType font"), "{err}");
        if let Some(font) = find(None) {
            assert!(read_font(&font).is_ok());
        }
    }

    #[test]
    fn registration_names_what_it_tried_and_then_sticks() {
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
        let missing = PathBuf::from("/nonexistent/font.ttf");
        let err = register([missing.clone(), manifest.clone()]).expect_err("no font among them");
        assert!(err.contains("/nonexistent/font.ttf: "), "{err}");
        assert!(err.contains("not a TrueType/OpenType font"), "{err}");
        let Some(font) = find(None) else {
            quiclab_testkit::skip(
                "registration_names_what_it_tried_and_then_sticks (registration half)",
                "no font installed (fonts-dejavu-core)",
            );
            return;
        };
        assert_eq!(register([font.clone()]), Ok(font.clone()));
        // Registered once: later calls return it whatever they offer.
        assert_eq!(register([missing]), Ok(font));
    }
}
