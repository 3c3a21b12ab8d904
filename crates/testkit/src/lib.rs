//! Helpers for quiclab's tests, kept out of the libraries' public API (a dev-dependency only).
//!
//! - [`skip`]: the one way a test says it could not check something. Every skip is written to
//!   stderr and appended to the file named by `QUICLAB_SKIP_LOG`, which `scripts/test` counts and
//!   prints at the end, so no skip reads as a pass. Under `QUICLAB_REQUIRE_LAB=1` (set by CI) a skip
//!   whose cause is a missing capability (root, TUN, Chromium, a font) fails the test instead.
//! - [`can_build_labs_or_skip`]: whether this host can build labs (root and /dev/net/tun).
//! - [`timing`]: a timing check with retries that tolerates a host whose hypervisor steals CPU.

use quiclab_lab::host::StealMeter;

/// Above this stolen fraction of CPU time, a failed timing check says more about the neighbours
/// than about quiclab: it is reported as skipped (never silently passed).
pub use quiclab_lab::host::NOISY_STEAL_FRACTION;

/// The variable under which a missing capability fails a test instead of skipping it.
pub const REQUIRE_LAB_VAR: &str = "QUICLAB_REQUIRE_LAB";

/// Whether a missing capability must fail tests (CI sets `QUICLAB_REQUIRE_LAB=1`).
pub fn lab_required() -> bool {
    std::env::var(REQUIRE_LAB_VAR).is_ok_and(|v| v == "1")
}

/// Appends `line` to stderr and to `$QUICLAB_SKIP_LOG` (when set).
fn log_skip(line: &str) {
    eprintln!("{line}");
    if let Ok(path) = std::env::var("QUICLAB_SKIP_LOG") {
        use std::io::Write;
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = writeln!(f, "{line}");
        }
    }
}

/// The test `test` cannot check what it should because this host lacks something (`reason`).
/// Reported as a skip; under `QUICLAB_REQUIRE_LAB=1` it panics, failing the test.
pub fn skip(test: &str, reason: &str) {
    if lab_required() {
        panic!(
            "{test} cannot run here: {reason} — {REQUIRE_LAB_VAR}=1 requires every check to run \
             (install what is missing, or unset the variable to skip)"
        );
    }
    log_skip(&format!("SKIPPED {test}: {reason}"));
}

/// A check that ran but whose outcome this host cannot judge (CPU stolen during a timing
/// measurement). Always a reported skip, even in CI: the cause is the host, not a missing install.
pub fn skip_noisy(test: &str, reason: &str) {
    log_skip(&format!("SKIPPED {test}: {reason}"));
}

/// Whether labs can be built here (root and /dev/net/tun); if not, [`skip`]s with the reason.
pub fn can_build_labs_or_skip(test: &str) -> bool {
    let ok = nix::unistd::geteuid().is_root() && std::path::Path::new("/dev/net/tun").exists();
    if !ok {
        skip(test, "needs root and /dev/net/tun (CI runs as root)");
    }
    ok
}

/// Runs a timing check up to `attempts` times and passes as soon as one attempt passes. If all
/// fail it panics — unless the hypervisor stole more than [`NOISY_STEAL_FRACTION`] of CPU time
/// meanwhile, in which case the failure is reported as a skip with the attempts' messages.
/// Structural assertions belong inside `check` too; they fail every attempt alike.
pub fn timing(name: &str, attempts: usize, check: impl FnMut() -> Result<(), String>) {
    if let Err(reason) = timing_check(name, attempts, check) {
        skip_noisy(name, &reason);
    }
}

/// [`timing`] without the reporting: `Ok` when an attempt passed, `Err(reason)` when every attempt
/// failed on a noisy host; panics when every attempt failed on a quiet one.
pub fn timing_check(
    name: &str,
    attempts: usize,
    mut check: impl FnMut() -> Result<(), String>,
) -> Result<(), String> {
    let meter = StealMeter::start();
    let mut failures = Vec::new();
    for _ in 0..attempts.max(1) {
        match check() {
            Ok(()) => return Ok(()),
            Err(e) => failures.push(e),
        }
    }
    let stolen = meter.fraction();
    if stolen > NOISY_STEAL_FRACTION {
        return Err(format!(
            "timing not judged: the hypervisor stole {:.0}% of CPU time during {} attempts ({})",
            stolen * 100.0,
            failures.len(),
            failures.join("; ")
        ));
    }
    panic!(
        "{name} failed {} times with {:.1}% CPU stolen: {}",
        failures.len(),
        stolen * 100.0,
        failures.join("; ")
    );
}

/// `Ok` when `cond` holds, else `Err(msg())`: for the checks inside [`timing`].
pub fn ensure(cond: bool, msg: impl FnOnce() -> String) -> Result<(), String> {
    if cond { Ok(()) } else { Err(msg()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_passing_attempt_passes() {
        let mut n = 0;
        assert!(
            timing_check("t", 3, || {
                n += 1;
                if n == 2 { Ok(()) } else { Err("no".into()) }
            })
            .is_ok()
        );
        assert_eq!(n, 2);
    }

    #[test]
    #[should_panic(expected = "failed 3 times")]
    fn a_check_that_always_fails_fails_on_a_quiet_machine() {
        // Sub-millisecond: the hypervisor has no time to steal 10 % of it measurably.
        let _ = timing_check("t", 3, || Err("always".into()));
    }

    #[test]
    fn a_required_lab_turns_a_skip_into_a_failure() {
        // The variable is read at the call; this test sets it only for a child process so that
        // parallel tests in this binary never see it.
        let exe = std::env::current_exe().unwrap();
        let out = std::process::Command::new(exe)
            .args(["--exact", "tests::skip_probe", "--nocapture", "--ignored"])
            .env(REQUIRE_LAB_VAR, "1")
            .env_remove("QUICLAB_SKIP_LOG")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{text}");
        assert!(text.contains("QUICLAB_REQUIRE_LAB=1 requires"), "{text}");
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "tests::skip_probe", "--nocapture", "--ignored"])
            .env_remove(REQUIRE_LAB_VAR)
            .env_remove("QUICLAB_SKIP_LOG")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(out.status.success(), "{text}");
        assert!(text.contains("SKIPPED probe: no widget"), "{text}");
    }

    /// Run by the test above in a child process.
    #[test]
    #[ignore = "run as a child process by a_required_lab_turns_a_skip_into_a_failure"]
    fn skip_probe() {
        skip("probe", "no widget");
    }
}
