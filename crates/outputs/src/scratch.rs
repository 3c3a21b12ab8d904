//! quiclab's temporary directories (a lab's certificates and configurations, evidence rebuilt
//! into databases to be judged) and what a process that died left of them. Each is named
//! `quiclab-KIND-PID-XXXXXX` in the system's temporary directory, so that `quiclab clean` (and
//! the next lab) can tell a dead process's leftovers from a live one's; each is removed when
//! dropped, and when the process is interrupted ([`remove_registered`], from the signal
//! handler, which skips destructors).

use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The live scratch directories of this process, for the signal handler.
static LIVE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// A temporary directory of quiclab's own, removed with everything in it when dropped.
#[derive(Debug)]
pub struct ScratchDir {
    dir: Option<tempfile::TempDir>,
}

impl ScratchDir {
    /// Makes `quiclab-KIND-PID-XXXXXX` (a random tail: nobody can prepare it in advance).
    pub fn new(kind: &str) -> std::io::Result<ScratchDir> {
        let dir = tempfile::Builder::new()
            .prefix(&format!("quiclab-{kind}-{}-", std::process::id()))
            .tempdir()?;
        if let Ok(mut live) = LIVE.lock() {
            live.push(dir.path().to_path_buf());
        }
        Ok(ScratchDir { dir: Some(dir) })
    }

    pub fn path(&self) -> &Path {
        self.dir.as_ref().map_or(Path::new(""), |d| d.path())
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        if let Some(d) = self.dir.take() {
            if let Ok(mut live) = LIVE.lock() {
                live.retain(|p| p != d.path());
            }
            drop(d);
        }
    }
}

/// Removes this process's live scratch directories (an interrupted process about to exit).
pub fn remove_registered() {
    if let Ok(live) = LIVE.try_lock() {
        for p in live.iter() {
            let _ = std::fs::remove_dir_all(p);
        }
    }
}

/// The process id in a scratch directory's name `quiclab-KIND-PID-XXXXXX`.
fn owner(name: &str) -> Option<u32> {
    let mut parts = name.rsplitn(3, '-');
    let tail = parts.next()?;
    let pid = parts.next()?;
    let head = parts.next()?;
    let kind = head.strip_prefix("quiclab-")?;
    let ok = tail.len() >= 6
        && tail.chars().all(|c| c.is_ascii_alphanumeric())
        && !kind.is_empty()
        && kind.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    ok.then(|| pid.parse().ok()).flatten()
}

/// Removes the scratch directories of quiclab processes that no longer exist, from the system's
/// temporary directory; returns them. Only names of [`ScratchDir`]'s form, only real directories
/// (never a link).
pub fn remove_stale_scratch() -> Vec<PathBuf> {
    let mut removed = Vec::new();
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return removed;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some(pid) = owner(&name)
            && !crate::process_exists(pid)
            && e.file_type().is_ok_and(|t| t.is_dir())
            && std::fs::remove_dir_all(e.path()).is_ok()
        {
            removed.push(e.path());
        }
    }
    removed
}

/// The name of a pinned binary beside quiclab's executable (a hard link that keeps a running
/// grid's binary alive while a build replaces it): `.quiclab-pinned-PID`.
pub const PINNED_PREFIX: &str = ".quiclab-pinned-";

/// Removes the pinned binaries of processes that no longer exist beside the running executable;
/// returns them.
pub fn remove_stale_pins() -> Vec<PathBuf> {
    let mut removed = Vec::new();
    let Some(dir) = std::fs::read_link("/proc/self/exe")
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
    else {
        return removed;
    };
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return removed;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some(pid) = name
            .strip_prefix(PINNED_PREFIX)
            .and_then(|p| p.parse::<u32>().ok())
            && !crate::process_exists(pid)
            && e.file_type().is_ok_and(|t| t.is_file())
            && std::fs::remove_file(e.path()).is_ok()
        {
            removed.push(e.path());
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_scratch_names_have_an_owner() {
        assert_eq!(super::owner("quiclab-bulk-1234-aB3dE9"), Some(1234));
        assert_eq!(super::owner("quiclab-judge-77-xyzxyz"), Some(77));
        for other in [
            "quiclab-bulk-aB3dE9",
            "quiclab-1234-aB3dE9",
            "quiclab-bulk-12x4-aB3dE9",
            "quiclab-bulk-1234-ab",
            "other-bulk-1234-aB3dE9",
            "quiclab-bulk-1234-aB3/E9",
        ] {
            assert_eq!(super::owner(other), None, "{other}");
        }
    }
}
