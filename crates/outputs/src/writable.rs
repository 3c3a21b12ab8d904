//! Whether quiclab will be able to write a directory, asked before the runs that end in the
//! write: a read-only mount or a directory without write permission is refused at once, not
//! after an hour of runs. (A full disk is not foreseen: that is met when the write comes.)

use std::io::ErrorKind;
use std::path::Path;

use crate::{OutputError, check_claimable, error};

/// Checks that `dir` is claimable ([`check_claimable`]) and writable: the directory, or when it
/// is missing its nearest existing parent (where it will be made), must be one this process may
/// write into. Nothing is created: another quiclab process may be claiming the same directory
/// at this moment, and a file of ours there would make it look like someone else's.
pub fn check_writable(dir: &Path, flag: &str) -> Result<(), OutputError> {
    check_claimable(dir, flag)?;
    let mut at = Some(dir);
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
                        if p == dir {
                            format!("quiclab cannot write into it: {e}")
                        } else {
                            format!("cannot be made in {}: {e}", p.display())
                        },
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
