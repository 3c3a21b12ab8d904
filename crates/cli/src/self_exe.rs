//! The executable that lab processes (`quiclab serve`, `fetch`, `page-client`) are started from.
//!
//! A long `quiclab run` outlives a `cargo build` that replaces its binary: `current_exe()` then
//! names a deleted file and every later run would fail to start its server. [`pin`] keeps the
//! running binary's inode alive under a hard link beside it, so every run of a grid uses the same
//! binary, whatever happens to the original path meanwhile.

use std::path::PathBuf;
use std::sync::OnceLock;

static PINNED: OnceLock<PathBuf> = OnceLock::new();

const PREFIX: &str = ".quiclab-pinned-";

/// Pins the current executable (best effort: without a pin, [`path`] is `current_exe()`).
pub fn pin() {
    let Ok(exe) = std::fs::read_link("/proc/self/exe") else {
        return;
    };
    let Some(dir) = exe.parent() else { return };
    // Links left by runners that died (SIGKILL) go first.
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(pid) = name
                .strip_prefix(PREFIX)
                .and_then(|p| p.parse::<i32>().ok())
                && !quiclab_lab::process::pid_exists(pid)
            {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    let link = dir.join(format!("{PREFIX}{}", std::process::id()));
    let _ = std::fs::remove_file(&link);
    // /proc/self/exe as the source: it is the inode we run, even if the path was replaced.
    if std::fs::hard_link("/proc/self/exe", &link).is_ok()
        || std::fs::hard_link(&exe, &link).is_ok()
    {
        let _ = PINNED.set(link);
    }
}

/// Removes the pin (at the end of a run).
pub fn unpin() {
    if let Some(p) = PINNED.get() {
        let _ = std::fs::remove_file(p);
    }
}

/// The executable to start lab processes from.
pub fn path() -> std::io::Result<PathBuf> {
    match PINNED.get() {
        Some(p) if p.exists() => Ok(p.clone()),
        _ => std::env::current_exe(),
    }
}
