//! Whether quiclab will be able to write a directory, asked before the runs that end in the
//! write: a read-only mount or a directory without write permission is refused at once, not
//! after an hour of runs.

use std::io::ErrorKind;
use std::path::Path;

use crate::{OutputError, check_claimable, error, temp_beside};

/// Checks that `dir` is claimable ([`check_claimable`]) and writable: an existing directory
/// takes a temporary file (made and removed at once); a missing one's nearest existing parent
/// must be a directory this process may write into (the directory will be made there).
pub fn check_writable(dir: &Path, flag: &str) -> Result<(), OutputError> {
    check_claimable(dir, flag)?;
    if std::fs::symlink_metadata(dir).is_ok() {
        let (tmp, f) = temp_beside(dir, "writable")
            .map_err(|e| error(flag, dir, format!("quiclab cannot write into it: {e}")))?;
        drop(f);
        let _ = std::fs::remove_file(tmp);
        return Ok(());
    }
    let mut at = dir.parent();
    while let Some(p) = at {
        let p = if p.as_os_str().is_empty() {
            Path::new(".")
        } else {
            p
        };
        match std::fs::symlink_metadata(p) {
            Ok(_) if !p.is_dir() => {
                return Err(error(
                    flag,
                    dir,
                    format!("{} is not a directory, so it cannot be made", p.display()),
                ));
            }
            Ok(_) => {
                let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes())
                    .map_err(|_| error(flag, dir, "the path holds a NUL byte"))?;
                // SAFETY: access() with a valid C string; W_OK also reports a read-only mount
                // (EROFS), which root's permissions do not override.
                if unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) } != 0 {
                    let e = std::io::Error::last_os_error();
                    return Err(error(
                        flag,
                        dir,
                        format!("cannot be made in {}: {e}", p.display()),
                    ));
                }
                return Ok(());
            }
            Err(e) if e.kind() == ErrorKind::NotFound => at = p.parent(),
            Err(e) => return Err(error(flag, dir, e.to_string())),
        }
    }
    Ok(())
}
