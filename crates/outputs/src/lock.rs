//! One writer per directory: an advisory lock (`flock`) on the directory itself, so that two
//! quiclab processes never write one results, pack or evidence directory at once (two runs
//! storing the same runs, two evidence additions each writing back what it read). The lock is
//! on the directory's own file descriptor: nothing is created beside the user's files, and the
//! kernel lets it go when the process ends, however it ends (SIGKILL included). The other
//! process is named from `/proc/locks` and its command line.
//!
//! Locks are re-entrant within a process (a pack locks its directory, then each scenario's):
//! a second [`lock_dir`] of a directory this process holds counts up, and the lock goes when
//! the last [`DirLock`] is dropped.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::{OutputError, SYMLINK, error};

/// The directories this process has locked: (device, inode) → the open directory and how many
/// [`DirLock`]s hold it.
static HELD: Mutex<BTreeMap<(u64, u64), (File, usize)>> = Mutex::new(BTreeMap::new());

/// This process's lock of one directory (see the module's text); dropping the last one of a
/// directory releases it.
#[derive(Debug)]
pub struct DirLock {
    key: (u64, u64),
    pub path: PathBuf,
}

impl Drop for DirLock {
    fn drop(&mut self) {
        let mut held = HELD.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, n)) = held.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                // Closing the descriptor releases the flock.
                held.remove(&self.key);
            }
        }
    }
}

/// Locks `dir` (an existing directory, not a link) for this process's writes. When another
/// process holds it: with `wait`, says so on stderr and waits for it (an evidence addition at
/// the end of a pack, which must not be lost); without, refuses naming that process (a run
/// that would otherwise store the same runs twice). A file system that cannot lock (some network
/// file systems) is said on stderr and the write goes on unlocked.
pub fn lock_dir(dir: &Path, flag: &str, wait: bool) -> Result<DirLock, OutputError> {
    let meta = std::fs::symlink_metadata(dir).map_err(|e| error(flag, dir, e.to_string()))?;
    if meta.file_type().is_symlink() {
        return Err(error(flag, dir, SYMLINK));
    }
    if !meta.is_dir() {
        return Err(error(flag, dir, "not a directory"));
    }
    let key = (meta.dev(), meta.ino());
    let lock = DirLock {
        key,
        path: dir.to_path_buf(),
    };
    {
        let mut held = HELD.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, n)) = held.get_mut(&key) {
            *n += 1;
            return Ok(lock);
        }
    }
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
        .open(dir)
        .map_err(|e| error(flag, dir, format!("opening it to lock it: {e}")))?;
    let fd = file.as_raw_fd();
    // A process that just ended may hold it a moment longer: the kernel closes an exiting
    // process's files in deferred work, after its parent may already have reaped it. So a lock
    // that is taken is tried again for a second before the other process is named.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
    let got = loop {
        // SAFETY: flock on a descriptor this function owns.
        let got = unsafe { libc::flock(fd, libc::LOCK_EX | libc::LOCK_NB) };
        let busy =
            got != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EWOULDBLOCK);
        if !busy || std::time::Instant::now() >= deadline {
            break got;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    if got != 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EWOULDBLOCK) {
            eprintln!(
                "quiclab: {flag} {}: cannot lock it ({e}); another quiclab process writing \
                 there at the same time would not be noticed",
                dir.display()
            );
        } else {
            let holder = holder_of(key);
            if !wait {
                return Err(error(
                    flag,
                    dir,
                    format!(
                        "another quiclab process is writing into it ({holder}); one process \
                         writes a directory at a time: wait for it to end, or give another \
                         directory"
                    ),
                ));
            }
            eprintln!(
                "quiclab: {flag} {}: waiting for another quiclab process, which is writing \
                 into it ({holder})",
                dir.display()
            );
            loop {
                // SAFETY: as above; blocking until the other process lets go.
                if unsafe { libc::flock(fd, libc::LOCK_EX) } == 0 {
                    break;
                }
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::Interrupted {
                    return Err(error(flag, dir, format!("waiting for its lock: {e}")));
                }
            }
        }
    }
    let mut held = HELD.lock().unwrap_or_else(|p| p.into_inner());
    match held.get_mut(&key) {
        // Another thread of this process locked it meanwhile: this descriptor is not needed.
        Some((_, n)) => *n += 1,
        None => {
            held.insert(key, (file, 1));
        }
    }
    Ok(lock)
}

/// Who holds the flock of the file (device, inode): "pid N: its command line", from
/// `/proc/locks`; "a process this system does not name" when it cannot be read.
fn holder_of((dev, ino): (u64, u64)) -> String {
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let id = format!("{major:02x}:{minor:02x}:{ino}");
    let pid = std::fs::read_to_string("/proc/locks")
        .ok()
        .and_then(|t| {
            t.lines().find_map(|l| {
                // "1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF" (a blocked waiter's line
                // has "->" after the number and is not the holder)
                let w: Vec<&str> = l.split_whitespace().collect();
                (w.len() >= 6 && w[1] == "FLOCK" && w[5] == id).then(|| w[4].to_string())
            })
        })
        .and_then(|p| p.parse::<u32>().ok());
    match pid {
        Some(pid) => {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|b| {
                    b.split(|c| *c == 0)
                        .filter(|w| !w.is_empty())
                        .map(|w| String::from_utf8_lossy(w).into_owned())
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .unwrap_or_default();
            if cmd.is_empty() {
                format!("pid {pid}")
            } else {
                format!("pid {pid}: {cmd}")
            }
        }
        None => "a process this system does not name".to_string(),
    }
}
