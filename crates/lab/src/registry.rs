//! The labs alive in this process, so that a signal or a panic can tear them all down even when the
//! code that owns a `Lab` never gets to run its destructor.

use std::collections::BTreeMap;
use std::sync::Mutex;

use crate::topology::LabRecord;

static LIVE: Mutex<BTreeMap<String, LabRecord>> = Mutex::new(BTreeMap::new());

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
pub fn emergency_teardown_all() {
    let labs: Vec<LabRecord> = match LIVE.try_lock() {
        Ok(mut live) => std::mem::take(&mut *live).into_values().collect(),
        Err(_) => return,
    };
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
}

/// Number of labs alive in this process.
pub fn live_count() -> usize {
    LIVE.lock().map(|l| l.len()).unwrap_or(0)
}
