//! Bounded reads of the files quiclab reads back (evidence, sessions, traces, a scenario's
//! content): a file that is a device (`/dev/zero`), a pipe, or far larger than anything quiclab
//! writes is refused with its name, instead of being read until memory runs out.

use std::io::{ErrorKind, Read};
use std::path::Path;

/// The most quiclab reads from one stored file: 1 GiB (the whole committed evidence of six
/// studies is 10 MB; a trace of a ten-minute video run is a few MB).
pub const MAX_STORED_FILE: u64 = 1 << 30;

/// Reads `path` (a regular file, links followed) whole, refusing more than `max` bytes.
pub fn read_bounded(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    let f = std::fs::File::open(path)
        .map_err(|e| std::io::Error::new(e.kind(), format!("reading {}: {e}", path.display())))?;
    let meta = f.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::new(
            ErrorKind::InvalidInput,
            format!(
                "{}: not a regular file (a device, pipe or directory); quiclab reads only \
                 regular files here",
                path.display()
            ),
        ));
    }
    let mut bytes = Vec::new();
    f.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| std::io::Error::new(e.kind(), format!("reading {}: {e}", path.display())))?;
    if bytes.len() as u64 > max {
        return Err(too_large(path, max));
    }
    Ok(bytes)
}

/// [`read_bounded`] as UTF-8 text.
pub fn read_to_string_bounded(path: &Path, max: u64) -> std::io::Result<String> {
    String::from_utf8(read_bounded(path, max)?).map_err(|_| {
        std::io::Error::new(
            ErrorKind::InvalidData,
            format!("{}: not UTF-8 text", path.display()),
        )
    })
}

/// The error for a file past `max` bytes.
pub fn too_large(path: &Path, max: u64) -> std::io::Error {
    std::io::Error::new(
        ErrorKind::InvalidData,
        format!(
            "{}: larger than {} MiB, the most quiclab reads from such a file (is it the right \
             file?)",
            path.display(),
            max >> 20
        ),
    )
}
