//! Ctrl-C, SIGTERM, SIGHUP and panics never leave a lab behind: every command that builds labs
//! calls [`install`] first (the CLI does for all but `serve`, `fetch` and `child`, which run inside
//! a lab someone else owns).
//!
//! A handler thread (not an async signal handler: it may take locks and spawn `ip`) reacts to the first
//! signal. If a foreground command runs (`quiclab shell`), it is given the signal and the main thread
//! tears the lab down normally once it exits; otherwise, or if that takes longer than a grace period,
//! the handler kills every process of every live lab, deletes their namespaces and exits 128+signal.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::Duration;

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

/// PID of the foreground command of `quiclab shell` (0 = none).
static FOREGROUND: AtomicI32 = AtomicI32::new(0);
static INTERRUPTED: AtomicBool = AtomicBool::new(false);
/// Printed after an interrupted command's teardown (e.g. how to resume a scenario).
static EXIT_HINT: std::sync::Mutex<String> = std::sync::Mutex::new(String::new());

/// What to print after an interrupted command's teardown (e.g. how to resume a scenario).
pub fn set_exit_hint(hint: String) {
    if let Ok(mut h) = EXIT_HINT.lock() {
        *h = hint;
    }
}

/// The foreground command of `quiclab shell`: it gets the signal and a grace period first.
pub fn set_foreground(pid: Option<u32>) {
    FOREGROUND.store(pid.map_or(0, |p| p as i32), Ordering::SeqCst);
}

/// Installs the panic hook and the signal-handling thread.
pub fn install() {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default_hook(info);
        if std::thread::current().name() == Some("main") {
            crate::registry::emergency_teardown_all();
            quiclab_outputs::remove_scratch_dirs();
        }
    }));
    // A hang-up the caller set to be ignored (`nohup`) stays ignored: catching it would end a
    // long grid its user detached. SIGINT and SIGTERM are always caught (a non-interactive
    // shell's background job starts with SIGINT ignored, and `kill -INT` must still end it).
    let caught: Vec<i32> = [SIGINT, SIGTERM, SIGHUP]
        .into_iter()
        .filter(|&s| s != SIGHUP || !ignored(s))
        .collect();
    let Ok(mut signals) = signal_hook::iterator::Signals::new(caught) else {
        eprintln!(
            "quiclab: warning: could not install signal handlers; an interrupted run may leave namespaces (use `quiclab clean`)"
        );
        return;
    };
    std::thread::Builder::new()
        .name("ql-signals".into())
        .spawn(move || {
            let mut count = 0;
            for sig in signals.forever() {
                count += 1;
                INTERRUPTED.store(true, Ordering::SeqCst);
                let fg = FOREGROUND.load(Ordering::SeqCst);
                if fg > 0 && count == 1 {
                    // The terminal already delivered SIGINT to the command (same process group); pass
                    // on the others, then give the main thread time to finish and tear down.
                    if sig != SIGINT {
                        // The child we started.
                        crate::os::kill(fg, sig);
                    }
                    std::thread::spawn(move || {
                        std::thread::sleep(Duration::from_secs(5));
                        emergency_exit(sig);
                    });
                    continue;
                }
                emergency_exit(sig);
            }
        })
        .ok();
}

/// Whether `sig`'s disposition is SIG_IGN (read without changing it).
fn ignored(sig: i32) -> bool {
    crate::os::signal_ignored(sig)
}

fn emergency_exit(sig: i32) -> ! {
    let fg = FOREGROUND.load(Ordering::SeqCst);
    if fg > 0 {
        // The child we started.
        crate::os::kill(fg, libc::SIGKILL);
    }
    let labs = crate::registry::emergency_teardown_all();
    // The destructors that remove temporary directories do not run on this exit.
    quiclab_outputs::remove_scratch_dirs();
    match labs {
        0 => eprintln!("quiclab: interrupted"),
        1 => eprintln!("quiclab: interrupted; the lab was torn down"),
        n => eprintln!("quiclab: interrupted; the {n} labs were torn down"),
    }
    if let Ok(h) = EXIT_HINT.try_lock()
        && !h.is_empty()
    {
        eprintln!("quiclab: {h}");
    }
    std::process::exit(128 + sig);
}
