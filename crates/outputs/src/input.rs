//! Reading the files a user names as input (a delivery trace, a profile, a video's content, a
//! scenario): a device such as `/dev/zero`, a pipe or a file far larger than any such input is
//! refused with a reason instead of being read until memory runs out.

use std::io::{ErrorKind, Read};
use std::path::Path;

/// The most read from one input file: 256 MiB (the largest trace quiclab ships is a few MB).
pub const MAX_INPUT_FILE: u64 = 256 << 20;

/// The text of `path` (links followed): a regular file of at most [`MAX_INPUT_FILE`] bytes.
pub fn read_input(path: &Path) -> std::io::Result<String> {
    let f = std::fs::File::open(path)?;
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::new(
            ErrorKind::InvalidInput,
            "not a regular file (a device, pipe or directory); give a file",
        ));
    }
    let mut bytes = Vec::new();
    f.take(MAX_INPUT_FILE + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_INPUT_FILE {
        return Err(std::io::Error::new(
            ErrorKind::InvalidData,
            format!(
                "larger than {} MiB, more than any input quiclab reads (is it the right file?)",
                MAX_INPUT_FILE >> 20
            ),
        ));
    }
    String::from_utf8(bytes)
        .map_err(|_| std::io::Error::new(ErrorKind::InvalidData, "not UTF-8 text"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn devices_are_refused_not_read() {
        let e = super::read_input(std::path::Path::new("/dev/zero")).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
    }
}
