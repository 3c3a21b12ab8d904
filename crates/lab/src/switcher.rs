//! Applies a network-switch schedule to a running lab: at each switch instant (on the emulator's
//! clock) the client's addresses change.
//!
//! The emulator's gate (`quiclab_link::switch::AddressGate`) makes the old address useless at the
//! exact instant, on the packet scheduler's own clock; this thread only makes the namespace
//! follow (`ip addr add` the new, `ip addr del` the old). Its lateness — a sleep's wake-up plus
//! one `ip` process, a few milliseconds — is recorded with each switch rather than hidden.

pub use quiclab_model::fidelity::AppliedSwitch;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use quiclab_link::switch::SwitchSchedule;

use crate::topology::{MAX_SWITCH_EPOCHS, switch_addresses};

/// The thread that carries out a schedule's switches.
pub struct Switcher {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<JoinHandle<Vec<AppliedSwitch>>>,
}

impl Switcher {
    /// Starts carrying out `schedule` on the client namespace `ns`, whose clock starts at `epoch`.
    pub fn start(
        ns: String,
        schedule: &SwitchSchedule,
        epoch: Instant,
    ) -> std::io::Result<Switcher> {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let switches = schedule.switches();
        let stop_flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("ql-switcher".into())
            .spawn(move || {
                let mut done = Vec::new();
                for sw in switches {
                    let due = epoch + Duration::from_nanos(sw.at);
                    let (lock, cvar) = &*stop_flag;
                    let mut stopped = lock.lock().unwrap();
                    loop {
                        if *stopped {
                            return done;
                        }
                        let now = Instant::now();
                        if now >= due {
                            break;
                        }
                        stopped = cvar.wait_timeout(stopped, due - now).unwrap().0;
                    }
                    drop(stopped);
                    let error = if sw.epoch > MAX_SWITCH_EPOCHS {
                        Some(format!("more than {MAX_SWITCH_EPOCHS} switches"))
                    } else {
                        switch_addresses(&ns, sw.epoch - 1, sw.epoch)
                            .err()
                            .map(|e| format!("{e:#}"))
                    };
                    done.push(AppliedSwitch {
                        at_s: sw.at as f64 / 1e9,
                        applied_s: epoch.elapsed().as_secs_f64(),
                        epoch: sw.epoch,
                        from: sw.from,
                        to: sw.to,
                        error,
                    });
                }
                done
            })?;
        Ok(Switcher {
            stop,
            thread: Some(thread),
        })
    }

    /// Stops (switches not yet due are not made) and returns the switches made.
    pub fn stop(mut self) -> Vec<AppliedSwitch> {
        self.finish()
    }

    fn finish(&mut self) -> Vec<AppliedSwitch> {
        let (lock, cvar) = &*self.stop;
        *lock.lock().unwrap() = true;
        cvar.notify_all();
        self.thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for Switcher {
    fn drop(&mut self) {
        self.finish();
    }
}
