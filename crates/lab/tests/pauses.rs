//! The pause watch sees a process stopped from outside (its own test binary: stopping the
//! process would disturb other tests' timing).

use quiclab_lab::host::PauseWatch;

#[test]
fn a_stopped_process_is_seen_as_paused() {
    let watch = PauseWatch::global().expect("watcher threads");
    std::thread::sleep(std::time::Duration::from_millis(50));
    let from = std::time::Instant::now();
    // Stop this whole process for ≈ 150 ms from outside it, as a hypervisor's pause would.
    let me = std::process::id();
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("kill -STOP {me}; sleep 0.15; kill -CONT {me}"))
        .status()
        .expect("sh");
    assert!(status.success());
    std::thread::sleep(std::time::Duration::from_millis(50));
    let p = watch.between(from, std::time::Instant::now());
    // Generous: the stop reaches the process within the shell's start-up.
    assert!(p.total_s > 0.08 && p.longest_s > 0.08, "{p:?}");
    assert!(p.share() > 0.0 && p.share() <= 1.0, "{p:?}");
    // And a quiet stretch shows (almost) nothing.
    let from = std::time::Instant::now();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let q = watch.between(from, std::time::Instant::now());
    assert!(q.total_s < 0.1, "{q:?}");
}
