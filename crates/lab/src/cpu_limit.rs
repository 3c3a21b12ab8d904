//! CPU limits for a lab's endpoints (`client-cpu`, `server-cpu`; issue 59): every process a
//! lab starts on one side joins a control group of its own whose CPU bandwidth is capped to a
//! share of one core. The seeds' clients were slower machines than today's (seed 002 ran
//! Raspberry Pis; Kakhki et al., IMC'17, saw QUIC's gains vanish on slow phones), and QUIC's
//! user-space stack spends more CPU per byte than the kernel's TCP.
//!
//! The cap is the kernel's CFS bandwidth control: the group may run `quota` µs in every
//! `period` µs, all its threads together. It is a fast core throttled, not a slow core: work
//! runs at full speed in slices, so the period is short (10 ms, longer only where the kernel's
//! 1 ms minimum quota needs it) to keep the slices well below the lab's round-trip times.
//!
//! cgroup v2 (`cpu.max`) and v1 (`cpu.cfs_quota_us` in the `cpu` hierarchy) are both used as the
//! host offers them. quiclab never changes the host's cgroup set-up: where v2's root does not
//! delegate the `cpu` controller, a limit is refused with the reason. The groups are named after
//! the lab (`ql-PID-N-client`), recorded with it, removed at teardown and by `quiclab clean`.

use std::fs::{File, OpenOptions};
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// The cgroup v2 mount point and v1's `cpu` hierarchy (distributions mount it here).
const V2_ROOT: &str = "/sys/fs/cgroup";
const V1_CPU: &str = "/sys/fs/cgroup/cpu";

/// The shortest period the quota is spread over; the kernel's smallest quota is 1 ms.
const PERIOD_US: u64 = 10_000;
const MIN_QUOTA_US: u64 = 1_000;

/// Which cgroup interface the host offers for CPU bandwidth.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hierarchy {
    V2,
    V1,
}

impl Hierarchy {
    /// The hierarchy the host's `cpu` controller is in, or why a CPU limit cannot be set here.
    pub fn detect() -> Result<Hierarchy> {
        let v1 = Path::new(V1_CPU).join("cpu.cfs_quota_us");
        if v1.exists() {
            return Ok(Hierarchy::V1);
        }
        let controllers = Path::new(V2_ROOT).join("cgroup.controllers");
        let Ok(available) = std::fs::read_to_string(&controllers) else {
            bail!(
                "a CPU limit needs cgroups: neither {} (v1) nor {} (v2) exists",
                v1.display(),
                controllers.display()
            );
        };
        if !available.split_whitespace().any(|c| c == "cpu") {
            bail!(
                "a CPU limit needs the cgroup v2 cpu controller, which {} does not list",
                controllers.display()
            );
        }
        let subtree = Path::new(V2_ROOT).join("cgroup.subtree_control");
        let delegated = std::fs::read_to_string(&subtree).unwrap_or_default();
        if !delegated.split_whitespace().any(|c| c == "cpu") {
            bail!(
                "a CPU limit needs the cgroup v2 cpu controller enabled for the root's children, \
                 and {} does not list cpu (quiclab does not change the host's cgroups: \
                 `echo +cpu > {}` does, as root)",
                subtree.display(),
                subtree.display()
            );
        }
        Ok(Hierarchy::V2)
    }

    fn base(self) -> &'static Path {
        Path::new(match self {
            Hierarchy::V2 => V2_ROOT,
            Hierarchy::V1 => V1_CPU,
        })
    }
}

/// The period and quota (µs) that cap a group at `share` of one core.
pub fn bandwidth(share: f64) -> (u64, u64) {
    let share = share.clamp(0.0, 1.0);
    let period = if share * (PERIOD_US as f64) < MIN_QUOTA_US as f64 {
        (MIN_QUOTA_US as f64 / share.max(1e-3)).ceil() as u64
    } else {
        PERIOD_US
    };
    let quota = ((share * period as f64).round() as u64).max(MIN_QUOTA_US);
    (period, quota)
}

/// One side's capped group. The processes it holds are the lab's; it is removed once they ended.
#[derive(Debug)]
pub struct CpuGroup {
    dir: PathBuf,
    /// `cgroup.procs`, open for writing: a child writes "0" to it before exec to join.
    procs: File,
    pub share: f64,
}

impl CpuGroup {
    /// Creates the group `name` (the lab's id and side) capped at `share` of one core.
    pub fn create(name: &str, share: f64) -> Result<CpuGroup> {
        let hierarchy = Hierarchy::detect()?;
        let dir = hierarchy.base().join(name);
        std::fs::create_dir(&dir)
            .with_context(|| format!("creating the control group {}", dir.display()))?;
        let group = Self::configure(hierarchy, &dir, share);
        if group.is_err() {
            let _ = std::fs::remove_dir(&dir);
        }
        group
    }

    fn configure(hierarchy: Hierarchy, dir: &Path, share: f64) -> Result<CpuGroup> {
        let (period, quota) = bandwidth(share);
        let write = |file: &str, value: String| {
            std::fs::write(dir.join(file), &value)
                .with_context(|| format!("writing {value:?} to {}", dir.join(file).display()))
        };
        match hierarchy {
            Hierarchy::V2 => write("cpu.max", format!("{quota} {period}"))?,
            Hierarchy::V1 => {
                write("cpu.cfs_period_us", period.to_string())?;
                write("cpu.cfs_quota_us", quota.to_string())?;
            }
        }
        let procs = OpenOptions::new()
            .write(true)
            .open(dir.join("cgroup.procs"))
            .with_context(|| format!("opening {}", dir.join("cgroup.procs").display()))?;
        Ok(CpuGroup {
            dir: dir.to_path_buf(),
            procs,
            share,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The open `cgroup.procs` a child joins through (see `os::join_cgroup_before_exec`).
    pub fn procs_fd(&self) -> RawFd {
        self.procs.as_raw_fd()
    }

    /// Removes the group once its processes are gone (they were ended just before: the kernel
    /// may take a moment to let go of them).
    pub fn remove(self) -> Result<()> {
        remove_group(&self.dir)
    }
}

/// Removes a lab's group (waiting up to a second for exiting processes to leave it).
pub fn remove_group(dir: &Path) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(1);
    loop {
        match std::fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) if Instant::now() >= deadline => {
                return Err(e)
                    .with_context(|| format!("removing the control group {}", dir.display()));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// Groups named after labs (`PREFIX…`) in whichever hierarchy the host has: what `quiclab clean`
/// looks at.
pub fn lab_groups(prefix: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for base in [V1_CPU, V2_ROOT] {
        let Ok(dir) = std::fs::read_dir(base) else {
            continue;
        };
        for entry in dir.flatten() {
            let name = entry.file_name();
            if name.to_string_lossy().starts_with(prefix) && entry.path().is_dir() {
                found.push(entry.path());
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_quota_is_the_share_of_a_10ms_period_and_never_below_1ms() {
        assert_eq!(bandwidth(0.25), (10_000, 2_500));
        assert_eq!(bandwidth(1.0), (10_000, 10_000));
        assert_eq!(bandwidth(0.1), (10_000, 1_000));
        // 5 %: 1 ms every 20 ms.
        assert_eq!(bandwidth(0.05), (20_000, 1_000));
        let (period, quota) = bandwidth(0.01);
        assert_eq!((period, quota), (100_000, 1_000));
    }
}
