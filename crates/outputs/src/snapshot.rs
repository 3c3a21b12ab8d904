//! What a command found in a claimed directory before it wrote: so that a command that fails
//! removes what *it* wrote and nothing else — not the files an earlier command left there
//! (a failed merge into an earlier merge's directory must leave that merge whole).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::{MARKER, is_claimed, manifest, remove_claimed_dir, remove_listed};

/// The manifests of a directory and of every claimed directory below it, as they were.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Claimed directory → the names its manifest listed. A directory absent here was not
    /// quiclab's (or did not exist) when the snapshot was taken.
    manifests: BTreeMap<PathBuf, BTreeSet<String>>,
    /// Directories that existed (claimed or not: an empty one a user made is not removed).
    dirs: BTreeSet<PathBuf>,
    /// Whether the top directory existed.
    existed: bool,
    top: PathBuf,
}

impl Snapshot {
    /// Takes the snapshot of `dir` (which need not exist).
    pub fn take(dir: &Path) -> Snapshot {
        let mut manifests = BTreeMap::new();
        let mut dirs = BTreeSet::new();
        walk(dir, &mut manifests, &mut dirs);
        Snapshot {
            manifests,
            dirs,
            existed: std::fs::symlink_metadata(dir).is_ok(),
            top: dir.to_path_buf(),
        }
    }

    /// Removes what was written into the directory since [`Snapshot::take`]: the files its
    /// manifests list now and did not list then, the claimed directories made since, and the
    /// directory itself when it was made since. Files that were there before, and files no
    /// manifest lists, are never touched.
    pub fn remove_new(&self) -> std::io::Result<()> {
        if !self.existed {
            return remove_claimed_dir(&self.top);
        }
        self.undo(&self.top)
    }

    fn undo(&self, dir: &Path) -> std::io::Result<()> {
        if !is_claimed(dir) {
            return Ok(());
        }
        let Some(before) = self.manifests.get(dir) else {
            // Claimed since: made by this command, or an empty directory it claimed.
            if !self.dirs.contains(dir) {
                return remove_claimed_dir(dir);
            }
            remove_listed(dir, |_| true)?;
            let _ = std::fs::remove_file(dir.join(MARKER));
            return Ok(());
        };
        remove_listed(dir, |n| !before.contains(n))?;
        for entry in std::fs::read_dir(dir)?.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                self.undo(&entry.path())?;
            }
        }
        Ok(())
    }
}

fn walk(dir: &Path, out: &mut BTreeMap<PathBuf, BTreeSet<String>>, dirs: &mut BTreeSet<PathBuf>) {
    if std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir()) {
        dirs.insert(dir.to_path_buf());
    }
    // Below a directory that is not quiclab's nothing is written (claim refuses it).
    if !is_claimed(dir) {
        return;
    }
    out.insert(dir.to_path_buf(), manifest(dir));
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                walk(&entry.path(), out, dirs);
            }
        }
    }
}
