//! A run waits out a storm of pauses — made by quiclab's own noise process, as `bench noise`
//! makes them — instead of running into it, and the noise leaves nothing stopped behind; a run
//! its user detached (`nohup`: SIGHUP ignored) is not ended by a hang-up.

mod common;

use std::process::Stdio;

use common::*;

#[test]
fn a_run_waits_out_a_storm_of_pauses_and_the_noise_leaves_nothing_stopped() {
    if !root_or_skip("a_run_waits_out_a_storm_of_pauses_and_the_noise_leaves_nothing_stopped") {
        return;
    }
    let dir = temp_dir("storm");
    let scenario = write(
        &dir,
        "storm.toml",
        "name = \"storm\"\nrepetitions = 1\n[workload]\nkind = \"bulk\"\nsize = \"100kB\"\n\
         [link]\nrate = \"10mbit\"\nrtt = \"20ms\"\n[grid]\nprotocol = [\"h3\"]\n",
    );
    // The run starts stopped (its shell stops itself before it becomes quiclab), so that the
    // storm is on before the run's first look at the host; the noise's first pause ends with a
    // SIGCONT, which lets it go.
    let run = std::process::Command::new("sh")
        .arg("-c")
        .arg(r#"kill -STOP $$; exec "$0" run "$1" --out "$2""#)
        .arg(env!("CARGO_BIN_EXE_quiclab"))
        .arg(&scenario)
        .arg(dir.join("out"))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the shell to stop itself.
    let stat = format!("/proc/{}/stat", run.id());
    let t = std::time::Instant::now();
    while !std::fs::read_to_string(&stat).is_ok_and(|s| {
        s.rsplit(')')
            .next()
            .is_some_and(|r| r.trim_start().starts_with('T'))
    }) {
        assert!(
            t.elapsed().as_secs() < 10,
            "the run's shell did not stop itself"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // A 4 s storm of 40 ms pauses every 100 ms, then a long calm.
    let noise = format!(
        r#"{{"pauses":{{"target":{},"pattern":{{"pause_ms":40.0,"every_ms":100.0,"storm_s":4.0,"calm_s":600.0}}}}}}"#,
        run.id()
    );
    let mut injector = quiclab()
        .args(["bench", "inject-noise", &noise])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let out = run.wait_with_output().unwrap();
    drop(injector.stdin.take());
    let injected = injector.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_success(&out);
    assert!(injected.status.success(), "{injected:?}");
    let report: serde_json::Value = serde_json::from_slice(&injected.stdout).unwrap();
    assert!(report["pauses"].as_u64().unwrap() >= 10, "{report}");
    // It read the host, found it paused, waited, and ran once the storm was over: unflagged.
    assert!(
        err.contains("host noisy (the lab was paused") && err.contains("waited out host noise"),
        "{err}"
    );
    assert!(
        err.contains("1 of 1 run(s) stored") && err.contains("0 still flagged;"),
        "{err}"
    );
    // Nothing of quiclab's is left stopped.
    let stopped: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter(|s| {
            s.contains("(quiclab)")
                && s.rsplit(')')
                    .next()
                    .is_some_and(|r| r.trim_start().starts_with('T'))
        })
        .collect();
    assert!(stopped.is_empty(), "{stopped:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_run_started_with_sighup_ignored_survives_a_hangup() {
    if !root_or_skip("a_run_started_with_sighup_ignored_survives_a_hangup") {
        return;
    }
    let dir = temp_dir("nohup");
    let scenario = write(
        &dir,
        "nohup.toml",
        "name = \"nohup\"\nrepetitions = 2\n[workload]\nkind = \"bulk\"\nsize = \"500kB\"\n\
         [link]\nrate = \"10mbit\"\nrtt = \"20ms\"\n[grid]\nprotocol = [\"h3\"]\n",
    );
    // As `nohup` starts it: SIGHUP ignored, which exec keeps.
    let run = std::process::Command::new("sh")
        .arg("-c")
        .arg(r#"trap '' HUP; exec "$0" run "$1" --out "$2""#)
        .arg(env!("CARGO_BIN_EXE_quiclab"))
        .arg(&scenario)
        .arg(dir.join("out"))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_secs(2));
    // SAFETY: signalling the child this test started.
    unsafe { libc::kill(run.id() as i32, libc::SIGHUP) };
    let out = run.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_success(&out);
    assert!(
        !err.contains("interrupted") && err.contains("2 of 2 run(s) stored"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
