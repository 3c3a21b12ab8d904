//! What every workload needs around its own logic: a work directory that is removed on every path
//! unless kept, the lab certificate, `quiclab serve` started in the server namespace, and client
//! processes in the client namespace that hand back a typed report.
//!
//! A child process is told what to do by one serialised [`ChildConfig`] (a file in the work
//! directory) and answers with one JSON report on stdout. Its exit code says how it ended: 0 with a
//! report, [`EXIT_TIMED_OUT`] when it gave up at its time limit, anything else a failure whose
//! reason is its stderr. Nothing is decided by matching error text.

pub use quiclab_model::RunError;
use quiclab_model::endpoint::EndpointReadings;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use quiclab_lab::{FidelityReport, Lab, LinkSpec, RunningLab, Side};
use quiclab_link::LinkOptions;
use quiclab_stacks::tls::LabCertificate;
use serde::de::DeserializeOwned;

use crate::child::{ChildConfig, ServeConfig};

/// The exit code of a child that gave up because its time limit passed.
pub const EXIT_TIMED_OUT: i32 = 3;

/// A workload's directory for certificates, configurations, reports and traces: the directory the
/// user asked to keep (`--keep DIR`, a traced run's directory), or a temporary one that is removed
/// when this value is dropped — on success, error and panic alike.
pub struct WorkDir {
    path: PathBuf,
    /// The temporary directory (removed on drop); None when kept.
    temporary: Option<quiclab_outputs::ScratchDir>,
}

impl WorkDir {
    /// `keep`, claimed for quiclab (new, empty or quiclab's own: a directory of the user's files is
    /// refused, never written into), or a fresh temporary directory with a random name.
    pub fn new(keep: Option<&Path>, workload: &str) -> Result<WorkDir> {
        match keep {
            Some(dir) => Ok(WorkDir {
                path: claim_keep_dir(dir)?,
                temporary: None,
            }),
            None => {
                // A random name (not the lab id): nobody can prepare it in advance, and a leftover
                // of a dead process is never taken for this run's.
                // Named with this process's id: `quiclab clean` removes a dead process's.
                let temp = quiclab_outputs::ScratchDir::new(workload)
                    .context("creating a temporary work directory")?;
                Ok(WorkDir {
                    path: temp.path().to_path_buf(),
                    temporary: Some(temp),
                })
            }
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    pub fn is_kept(&self) -> bool {
        self.temporary.is_none()
    }
}

/// Claims a `--keep` directory (see `quiclab_outputs::claim_dir`).
pub fn claim_keep_dir(dir: &Path) -> Result<PathBuf> {
    Ok(quiclab_outputs::claim_dir(dir, "--keep")?)
}

/// A fresh lab for a workload, with its emulator running; with `keep`, the directory is claimed
/// and the link's packet log goes to `keep/link.log`.
pub fn start_lab(
    options: &LinkOptions,
    spec: &LinkSpec,
    keep: Option<&Path>,
    capture: Option<quiclab_lab::capture::CaptureConfig>,
) -> Result<RunningLab> {
    if let Some(d) = keep {
        claim_keep_dir(d)?;
    }
    RunningLab::start_for(options, spec, keep.map(|d| d.join("link.log")), capture)
}

/// Runs `run` once in a fresh lab (the commands' single runs; the runner keeps its own loop).
/// [`run_once`] for a command's flags: `--keep DIR`, and `--pcap FILE` (replaced only with
/// `--force`) as a capture.
pub fn run_for_command<W: crate::Workload>(
    run: &W,
    (options, spec): (&LinkOptions, &LinkSpec),
    keep: Option<&Path>,
    (pcap, force): (Option<&Path>, bool),
) -> anyhow::Result<crate::Outcome<W::Output>> {
    let capture = quiclab_lab::capture::CaptureConfig::for_flag(pcap, force)?;
    run_once(run, options, spec, keep, capture)
}

pub fn run_once<W: crate::Workload>(
    run: &W,
    options: &LinkOptions,
    spec: &LinkSpec,
    keep: Option<&Path>,
    capture: Option<quiclab_lab::capture::CaptureConfig>,
) -> anyhow::Result<crate::Outcome<W::Output>> {
    let mut running = start_lab(options, spec, keep, capture)?;
    let out = run.run(&mut running, keep)?;
    drop(running);
    Ok(out)
}

/// A lab certificate for the server's addresses, saved as `cert.pem`/`key.pem` in `work`.
pub fn write_certificate(lab: &Lab, work: &WorkDir) -> Result<()> {
    let cert = LabCertificate::generate(&[
        lab.address_v4(Side::Server).into(),
        lab.address_v6(Side::Server).into(),
    ])?;
    cert.save(work.path())?;
    Ok(())
}

/// A [`ServeConfig`] for the lab's server with the certificate of [`write_certificate`], listening
/// on both of the server's addresses, port 443.
pub fn serve_config(
    lab: &Lab,
    work: &WorkDir,
    stack: quiclab_proto::options::StackOptions,
) -> ServeConfig {
    ServeConfig {
        cert: work.join("cert.pem"),
        key: work.join("key.pem"),
        dir: None,
        addresses: vec![
            lab.address_v4(Side::Server).into(),
            lab.address_v6(Side::Server).into(),
        ],
        port: 443,
        ready_file: Some(work.join("ready")),
        cwnd_log: None,
        qlog_dir: None,
        // With FEC the server's counters (what it sent) are read back after it stops.
        fec_log: stack.fec.map(|_| work.join("fec.json")),
        stack,
        extra_ports: Vec::new(),
        videos: Vec::new(),
        plain_http_port: None,
    }
}

/// Writes `config` beside the other files of `work` and returns a command (not yet started) that
/// runs it as `quiclab child FILE` in `side`'s namespace.
fn child_command(
    lab: &Lab,
    side: Side,
    work: &WorkDir,
    name: &str,
    config: &ChildConfig,
) -> Result<std::process::Command> {
    let file = work.join(&format!("{name}.config.json"));
    quiclab_outputs::write_in_claimed(&file, &serde_json::to_vec_pretty(config)?)
        .with_context(|| format!("writing {}", file.display()))?;
    let exe = exe::path()?;
    let exe = exe.to_str().context("executable path")?;
    let mut cmd = match &lab.syscall_trace {
        // A syscall profile run: strace counts every call of every thread, into NAME.strace.
        Some(dir) => {
            let mut cmd = lab.command(side, "strace");
            cmd.args(["-f", "-c", "-U", crate::syscalls::STRACE_COLUMNS, "-o"])
                .arg(dir.join(format!("{name}.strace")))
                .arg(exe);
            cmd
        }
        None => lab.command(side, exe),
    };
    cmd.arg("child").arg(&file);
    Ok(cmd)
}

/// Starts `quiclab serve` with `config` in the server namespace and waits until every listener is
/// up (its ready file exists). Returns its PID.
pub fn start_server(lab: &Lab, work: &WorkDir, config: ServeConfig) -> Result<u32> {
    let ready = config
        .ready_file
        .clone()
        .unwrap_or_else(|| work.join("ready"));
    let _ = std::fs::remove_file(&ready);
    let config = ServeConfig {
        ready_file: Some(ready.clone()),
        ..config
    };
    let mut serve = child_command(
        lab,
        Side::Server,
        work,
        "serve",
        &ChildConfig::Serve(config),
    )?;
    serve.stderr(quiclab_outputs::create_in_claimed(
        &work.join("serve.stderr"),
    )?);
    let pid = lab.spawn(serve)?;
    let t = Instant::now();
    while !ready.exists() {
        if let Some(status) = lab.wait_child(pid, Some(Duration::ZERO))? {
            bail!(
                "the server exited before it was ready ({status}): {}",
                std::fs::read_to_string(work.join("serve.stderr"))
                    .unwrap_or_default()
                    .trim()
            );
        }
        if t.elapsed() > Duration::from_secs(10) {
            bail!("the server was not ready within 10 s");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(pid)
}

/// What a measured exchange leaves once its client child has ended: the client's report (or why
/// it failed), what the lab read of both ends and the emulator's fidelity report (None without
/// one).
pub struct ClientEnd<R> {
    pub client: Result<R, RunError>,
    /// Both endpoints' namespace counters and the server's CPU time when the client had ended
    /// (the client's CPU comes with its report: [`EndpointReadings::with_client_cpu`]).
    pub endpoints: EndpointReadings,
    pub fidelity: Option<FidelityReport>,
}

/// Runs the client child as [`run_client`] does, then reads the server's CPU time and stops the
/// emulator — in that order, so that neither includes the other's teardown. The client's failure
/// is returned in [`ClientEnd::client`] after the emulator stopped, so its fidelity is kept.
pub fn run_client_to_end<R: DeserializeOwned>(
    running: &mut RunningLab,
    work: &WorkDir,
    name: &str,
    config: &ChildConfig,
    limit: Duration,
    grace: Duration,
    server_pid: u32,
) -> Result<ClientEnd<R>, RunError> {
    let client = run_client::<R>(&running.lab, work, name, config, limit, grace);
    let endpoints = quiclab_lab::counters::endpoints(&running.lab, server_pid as i32);
    let fidelity = if running.emulated() {
        Some(running.stop_emulator()?)
    } else {
        None
    };
    Ok(ClientEnd {
        client,
        endpoints: endpoints.with_emulator(fidelity.as_ref()),
        fidelity,
    })
}

/// Runs a client child (`config`) in the client namespace: it writes `name.json` (its report) and
/// `name.stderr` into `work`. The child gives up itself at `limit`; `grace` covers its start-up
/// and exit. A report that does not match `R` fails the run with the reason — never a default.
pub fn run_client<R: DeserializeOwned>(
    lab: &Lab,
    work: &WorkDir,
    name: &str,
    config: &ChildConfig,
    limit: Duration,
    grace: Duration,
) -> Result<R, RunError> {
    let mut cmd = child_command(lab, Side::Client, work, name, config)?;
    let out_file = work.join(&format!("{name}.json"));
    let err_file = work.join(&format!("{name}.stderr"));
    cmd.stdout(quiclab_outputs::create_in_claimed(&out_file).map_err(anyhow::Error::from)?);
    cmd.stderr(quiclab_outputs::create_in_claimed(&err_file).map_err(anyhow::Error::from)?);
    let pid = lab.spawn(cmd)?;
    let status = lab.wait_child(pid, Some(limit + grace))?;
    let stderr = std::fs::read_to_string(&err_file).unwrap_or_default();
    let stderr = stderr
        .trim()
        .trim_start_matches("quiclab: error: ")
        .to_string();
    let Some(status) = status else {
        return Err(RunError::Timeout {
            limit,
            detail: format!("the {name} did not exit"),
        });
    };
    match status.code() {
        Some(0) => {
            let text = std::fs::read_to_string(&out_file).map_err(|e| {
                RunError::Failed(format!("the {name}'s report {}: {e}", out_file.display()))
            })?;
            parse_report(&text).map_err(|e| RunError::Failed(format!("the {name}'s report: {e}")))
        }
        Some(EXIT_TIMED_OUT) => Err(RunError::Timeout {
            limit,
            detail: format!("the {name} gave up: {stderr}"),
        }),
        _ => Err(RunError::Failed(format!(
            "the {name} failed ({status}): {stderr}"
        ))),
    }
}

/// Reads a child's report strictly: missing or mistyped fields are an error naming them.
pub fn parse_report<R: DeserializeOwned>(text: &str) -> Result<R, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("empty (the client printed nothing)".into());
    }
    serde_json::from_str(text).map_err(|e| {
        let shown: String = text.chars().take(300).collect();
        format!("does not match the expected schema ({e}): {shown}")
    })
}

/// The executable that lab processes (`quiclab child …`) are started from.
///
/// A long `quiclab run` outlives a `cargo build` that replaces its binary: `current_exe()` then
/// names a deleted file and every later run would fail to start its server. [`exe::pin`] keeps the
/// running binary's inode alive under a hard link beside it, so every run of a grid uses the same
/// binary, whatever happens to the original path meanwhile.
pub mod exe {
    use std::path::PathBuf;
    use std::sync::OnceLock;

    static PINNED: OnceLock<PathBuf> = OnceLock::new();

    const PREFIX: &str = quiclab_outputs::PINNED_PREFIX;

    /// Pins the current executable (best effort: without a pin, [`path`] is `current_exe()`).
    pub fn pin() {
        let Ok(exe) = std::fs::read_link("/proc/self/exe") else {
            return;
        };
        let Some(dir) = exe.parent() else { return };
        // Links left by runners that died (SIGKILL) go first. Only quiclab's own names.
        quiclab_outputs::remove_stale_pins();
        let link = dir.join(format!("{PREFIX}{}", std::process::id()));
        let _ = std::fs::remove_file(&link);
        // /proc/self/exe as the source: it is the inode we run, even if the path was replaced.
        if std::fs::hard_link("/proc/self/exe", &link).is_ok()
            || std::fs::hard_link(&exe, &link).is_ok()
        {
            let _ = PINNED.set(link);
        }
    }

    /// Removes the pin (at the end of a run).
    pub fn unpin() {
        if let Some(p) = PINNED.get() {
            let _ = std::fs::remove_file(p);
        }
    }

    /// The executable to start lab processes from.
    pub fn path() -> std::io::Result<PathBuf> {
        match PINNED.get() {
            Some(p) if p.exists() => Ok(p.clone()),
            _ => std::env::current_exe(),
        }
    }
}

/// The server's FEC counters, summed and per peer (written every 100 ms while it ran; see
/// `ServeConfig::fec_log`).
pub fn server_fec(work: &WorkDir) -> Option<quiclab_stacks::fec_socket::FecLog> {
    quiclab_stacks::fec_socket::read_fec_log(&work.join("fec.json"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Debug)]
    struct Report {
        #[allow(dead_code)]
        bytes: u64,
    }

    #[test]
    fn reports_are_read_strictly() {
        assert!(parse_report::<Report>("{\"bytes\": 3}").is_ok());
        let e = parse_report::<Report>("{\"byte\": 3}").unwrap_err();
        assert!(e.contains("missing field `bytes`"), "{e}");
        let e = parse_report::<Report>("{\"bytes\": \"3\"}").unwrap_err();
        assert!(e.contains("invalid type"), "{e}");
        assert!(parse_report::<Report>("  ").unwrap_err().contains("empty"));
    }

    #[test]
    fn errors_say_timeout_or_reason() {
        let t = RunError::Timeout {
            limit: Duration::from_millis(1500),
            detail: "the fetch gave up".into(),
        };
        assert_eq!(
            t.to_string(),
            "did not finish within its time limit of 1.5 s: the fetch gave up"
        );
        let f: RunError = anyhow::anyhow!("inner").context("outer").into();
        assert_eq!(f.to_string(), "outer: inner");
    }
}
