//! The files a user names as link input (a delivery trace, a profile): the shell reads them. A
//! function of type [`ReadText`] is passed to whatever needs a file's text (the program passes
//! `quiclab_outputs::input::read_input`, which refuses devices and oversized files; a test may pass
//! a map), so that this crate stays free of I/O.

use std::path::Path;

/// Reads the text of a file the user named.
pub type ReadText<'a> = &'a dyn Fn(&Path) -> std::io::Result<String>;

/// Reads straight from the file system (tests; the program passes its own, checked reader).
#[cfg(test)]
pub(crate) fn fs(path: &Path) -> std::io::Result<String> {
    std::fs::read_to_string(path)
}
