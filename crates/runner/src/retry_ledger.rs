//! The host's record of flagged attempts run again, so that a grid in a new results directory
//! estimates with the retry rate this host measured (issue 61: a bufferbloat quick form estimated
//! at 3 min 52 s took 5 min 32 s, its retries left out). Each finished grid appends one line —
//! its workload kind, labs at once, runs finished, attempts run again — to `retries.tsv` in
//! `$QUICLAB_STATE_DIR` (default `/var/lib/quiclab`: the lab runs as root). An append is one short
//! write with `O_APPEND`, so two quiclab processes may append side by side; the file is never
//! rewritten, never read or opened through a symbolic link, and a line that does not parse is
//! skipped (a damaged ledger costs an estimate, never a run). Grids with injected flags
//! (`QUICLAB_FAULT_FLAG_ATTEMPTS`) are not recorded: their retries are no measurement.

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::PathBuf;

use quiclab_model::WorkloadKind;

const FILE: &str = "retries.tsv";
/// More is not read (a ledger of ~20 000 grids).
const MAX_BYTES: u64 = 1 << 20;

/// Attempts run again over runs finished, summed over the ledger's matching grids.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct HostRetries {
    pub extra_attempts: usize,
    pub runs: usize,
    pub grids: usize,
}

impl HostRetries {
    /// The estimate's factor with as many retries per run (None: nothing measured).
    pub fn scale(self) -> Option<f64> {
        (self.runs > 0).then(|| 1.0 + self.extra_attempts as f64 / self.runs as f64)
    }
}

fn dir() -> PathBuf {
    std::env::var_os("QUICLAB_STATE_DIR")
        .map_or_else(|| PathBuf::from("/var/lib/quiclab"), PathBuf::from)
}

/// One ledger line of a grid that finished `runs` runs of `kind` at `jobs` labs at once, with
/// `extra_attempts` flagged attempts run again.
fn line(kind: WorkloadKind, jobs: &str, runs: usize, extra_attempts: usize) -> String {
    format!("{}\t{jobs}\t{runs}\t{extra_attempts}\n", kind.name())
}

/// Appends a finished grid to the ledger; a ledger that cannot be written says so on stderr (the
/// grid's results are stored either way).
pub fn record(kind: WorkloadKind, jobs: &str, runs: usize, extra_attempts: usize) {
    if runs == 0 || std::env::var_os("QUICLAB_FAULT_FLAG_ATTEMPTS").is_some() {
        return;
    }
    let dir = dir();
    let path = dir.join(FILE);
    let written = std::fs::create_dir_all(&dir).and_then(|()| {
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)?;
        f.write_all(line(kind, jobs, runs, extra_attempts).as_bytes())
    });
    if let Err(e) = written {
        eprintln!(
            "quiclab run: note: the host's retry ledger {} was not written ({e}); estimates of new directories go without this grid's retries",
            path.display()
        );
    }
}

/// What the ledger holds for `kind` at `jobs` labs at once (every line of the kind when none is at
/// `jobs`, and which of the two it is: true when at `jobs`).
pub fn measured(kind: WorkloadKind, jobs: &str) -> (HostRetries, bool) {
    let path = dir().join(FILE);
    let text = std::fs::symlink_metadata(&path)
        .ok()
        .filter(|m| m.file_type().is_file())
        .and_then(|_| quiclab_outputs::read_to_string_bounded(&path, MAX_BYTES).ok())
        .unwrap_or_default();
    sum(&text, kind, jobs)
}

fn sum(text: &str, kind: WorkloadKind, jobs: &str) -> (HostRetries, bool) {
    let rows: Vec<(&str, usize, usize)> = text
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            match f[..] {
                [k, j, runs, extra] if k == kind.name() => {
                    Some((j, runs.parse().ok()?, extra.parse().ok()?))
                }
                _ => None,
            }
        })
        .collect();
    let add = |pick: &dyn Fn(&str) -> bool| {
        rows.iter()
            .filter(|r| pick(r.0))
            .fold(HostRetries::default(), |mut h, r| {
                h.runs += r.1;
                h.extra_attempts += r.2;
                h.grids += 1;
                h
            })
    };
    let same = add(&|j| j == jobs);
    match same.runs {
        0 => (add(&|_| true), false),
        _ => (same, true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ledger_sums_its_kind_at_the_same_jobs_else_every_jobs() {
        let text = [
            line(WorkloadKind::Bulk, "1", 30, 3),
            line(WorkloadKind::Bulk, "4", 20, 10),
            "bulk\tgarbage\n".to_string(),
            "bulk\t1\tx\t2\n".to_string(),
            line(WorkloadKind::Video, "1", 10, 10),
            line(WorkloadKind::Bulk, "1", 10, 1),
        ]
        .concat();
        let (h, same) = sum(&text, WorkloadKind::Bulk, "1");
        assert!(same);
        assert_eq!(
            h,
            HostRetries {
                extra_attempts: 4,
                runs: 40,
                grids: 2
            }
        );
        assert_eq!(h.scale(), Some(1.1));
        let (h, same) = sum(&text, WorkloadKind::Bulk, "auto");
        assert!(!same);
        assert_eq!((h.runs, h.extra_attempts), (60, 14));
        assert_eq!(sum(&text, WorkloadKind::Page, "1").0.scale(), None);
    }

    #[test]
    fn a_grid_is_appended_and_read_back_and_a_link_is_never_followed() {
        let dir = tempfile::tempdir().unwrap();
        // SAFETY of the environment: this test's process sets the variable before any reader.
        unsafe { std::env::set_var("QUICLAB_STATE_DIR", dir.path()) };
        record(WorkloadKind::Page, "2", 12, 6);
        record(WorkloadKind::Page, "2", 8, 0);
        let (h, same) = measured(WorkloadKind::Page, "2");
        assert!(same);
        assert_eq!((h.runs, h.extra_attempts, h.grids), (20, 6, 2));
        // A link in the ledger's place: not written through, not read.
        let elsewhere = dir.path().join("elsewhere");
        std::fs::write(&elsewhere, "").unwrap();
        std::fs::remove_file(dir.path().join(FILE)).unwrap();
        std::os::unix::fs::symlink(&elsewhere, dir.path().join(FILE)).unwrap();
        record(WorkloadKind::Page, "2", 5, 5);
        assert_eq!(std::fs::read_to_string(&elsewhere).unwrap(), "");
        assert_eq!(measured(WorkloadKind::Page, "2").0.runs, 0);
    }
}
