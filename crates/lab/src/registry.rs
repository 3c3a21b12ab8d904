//! The labs alive in this process, so that a signal or a panic can tear them all down even when the
//! code that owns a `Lab` never gets to run its destructor.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::topology::LabRecord;

static LIVE: Mutex<BTreeMap<String, LabRecord>> = Mutex::new(BTreeMap::new());

/// Held while a lab creates its namespaces. An emergency teardown takes it (and sets
/// [`SHUTTING_DOWN`]) so that no namespace can appear after the teardown looked: a signal that
/// arrived half-way through `Lab::create` used to leave that lab's namespaces behind.
static SETUP: Mutex<()> = Mutex::new(());
static SHUTTING_DOWN: AtomicBool = AtomicBool::new(false);

/// Taken by `Lab::create` for the whole set-up; `None` once an emergency teardown has begun.
pub(crate) fn setup_guard() -> Option<MutexGuard<'static, ()>> {
    let guard = SETUP.lock().unwrap_or_else(|e| e.into_inner());
    (!SHUTTING_DOWN.load(Ordering::SeqCst)).then_some(guard)
}

/// `try_lock` with a deadline: a signal handler must not block forever on a lock whose owner may be
/// the very thread that panicked.
fn lock_within<T>(m: &Mutex<T>, limit: Duration) -> Option<MutexGuard<'_, T>> {
    let deadline = Instant::now() + limit;
    loop {
        match m.try_lock() {
            Ok(g) => return Some(g),
            Err(std::sync::TryLockError::Poisoned(e)) => return Some(e.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(_) => return None,
        }
    }
}

pub(crate) fn register(rec: &LabRecord) {
    if let Ok(mut live) = LIVE.lock() {
        live.insert(rec.id.clone(), rec.clone());
    }
}

pub(crate) fn unregister(id: &str) {
    if let Ok(mut live) = LIVE.lock() {
        live.remove(id);
    }
}

/// Kills every process of every live lab and deletes their namespaces. For signal handlers and panic
/// hooks: it does not wait for threads and never blocks on the owners' locks for long.
/// Whether an emergency teardown (a signal, or a panic on the main thread) has begun: the labs
/// alive are being killed, and a run that fails from now on failed because of it.
pub fn shutting_down() -> bool {
    SHUTTING_DOWN.load(Ordering::SeqCst)
}

/// Tears down every live lab of this process (a signal, or a panic on the main thread) and
/// returns how many there were.
pub fn emergency_teardown_all() -> usize {
    SHUTTING_DOWN.store(true, Ordering::SeqCst);
    // Wait for a set-up in progress to finish (it then sees SHUTTING_DOWN for any later lab), and
    // keep the lock: the process is about to exit.
    if let Some(g) = lock_within(&SETUP, Duration::from_secs(3)) {
        std::mem::forget(g);
    }
    let labs: Vec<LabRecord> = match lock_within(&LIVE, Duration::from_secs(1)) {
        Some(mut live) => std::mem::take(&mut *live).into_values().collect(),
        None => Vec::new(),
    };
    let mut torn_down = labs.len();
    for rec in labs {
        for &(pid, start) in &rec.children {
            if crate::process::is_alive(pid, start) {
                crate::process::signal_group(pid, libc::SIGKILL);
                crate::process::signal(pid, libc::SIGKILL);
            }
        }
        for name in &rec.namespaces {
            if let Ok(ns) = crate::netns::NetNs::open(name) {
                if let Ok(inode) = ns.inode() {
                    crate::process::kill_namespace_processes(inode);
                }
                let _ = ns.delete();
            }
        }
        let _ = std::fs::remove_file(
            std::path::Path::new(crate::topology::STATE_DIR).join(format!("{}.json", rec.id)),
        );
    }
    // Last, anything named after this process (a lab whose record was not in the registry).
    let own = format!(
        "{}{}-",
        crate::topology::NAMESPACE_PREFIX,
        std::process::id()
    );
    if let Ok(entries) = std::fs::read_dir("/run/netns") {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with(&own)
                && let Ok(ns) = crate::netns::NetNs::open(&name)
            {
                if let Ok(inode) = ns.inode() {
                    crate::process::kill_namespace_processes(inode);
                }
                let _ = ns.delete();
                torn_down = torn_down.max(1);
            }
        }
    }
    torn_down
}

/// Number of labs alive in this process.
pub fn live_count() -> usize {
    LIVE.lock().map(|l| l.len()).unwrap_or(0)
}
