//! `quiclab shell`'s lab: a command in the client namespace of a fresh lab, like Mahimahi's nested
//! shells, with an optional server command in the server's namespace.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Result, bail};

use crate::capture::CaptureConfig;
use crate::switcher::AppliedSwitch;
use crate::{FidelityReport, LinkOptions, LinkSpec, RunningLab, Side, guard};

/// Refuses, before any lab, an output file of `quiclab shell` that exists (`--log`,
/// `--fidelity-json`; replaced only with `force`), and gives the capture `--pcap` asks for.
pub fn check_outputs(
    log: Option<&std::path::Path>,
    fidelity_json: Option<&std::path::Path>,
    pcap: Option<&std::path::Path>,
    force: bool,
) -> anyhow::Result<Option<crate::capture::CaptureConfig>> {
    for (file, flag) in [(log, "--log"), (fidelity_json, "--fidelity-json")] {
        if let Some(f) = file {
            quiclab_outputs::check_user_file(f, flag, force)?;
        }
    }
    crate::capture::CaptureConfig::for_flag(pcap, force)
}

/// What to run, and where its evidence goes.
pub struct ShellRun<'a> {
    pub options: &'a LinkOptions,
    pub spec: &'a LinkSpec,
    /// A shell command for the server namespace, started first and stopped after the client's.
    pub server_cmd: Option<&'a str>,
    /// How long the server command gets to start listening.
    pub server_wait: Duration,
    /// The per-packet log.
    pub log: Option<PathBuf>,
    pub capture: Option<CaptureConfig>,
    /// The command (and its arguments) for the client namespace, in the foreground.
    pub command: &'a [String],
}

/// How it went: the command's exit status (128 + signal when a signal ended it), the switches the
/// lab made and the emulator's fidelity report.
pub struct ShellOutcome {
    pub status: i32,
    pub switches: Vec<AppliedSwitch>,
    pub fidelity: FidelityReport,
}

impl ShellOutcome {
    /// What `quiclab shell` says on stderr after the command: the switches made, the emulator's
    /// fidelity summary (with `--log` or `--summary`) and the packet log's path, the capture.
    pub fn report_lines(
        &self,
        log: Option<&std::path::Path>,
        summary: bool,
        spec: &LinkSpec,
    ) -> Vec<String> {
        let mut out: Vec<String> = self.switches.iter().map(|s| s.to_string()).collect();
        if log.is_some() || summary {
            out.push(self.fidelity.summary(&spec.describe()).to_string());
            out.extend(log.map(|l| format!("packet log: {}", l.display())));
        }
        out.extend(self.fidelity.capture.iter().map(|c| c.to_string()));
        out
    }

    /// `--fidelity-json`: the link, the switches and the emulator's report, in one file (checked
    /// before the lab started).
    pub fn write_fidelity_json(&self, path: &std::path::Path, spec: &LinkSpec) -> Result<()> {
        let doc = serde_json::json!({
            "link": spec.describe(),
            "switches": self.switches,
            "fidelity": self.fidelity,
        });
        quiclab_outputs::write_in_claimed(path, serde_json::to_string_pretty(&doc)?.as_bytes())?;
        Ok(())
    }
}

/// Runs the command in a fresh lab; notes (the namespace's TCP default) go to stderr.
pub fn run(r: ShellRun<'_>) -> Result<ShellOutcome> {
    let mut running = RunningLab::start_for(r.options, r.spec, r.log, r.capture)?;
    let lab = &running.lab;
    if lab.tcp_default_cc != r.options.tcp_cc {
        eprintln!(
            "quiclab: note: TCP in this lab defaults to {} (the host limits a namespace's default to \
             net.ipv4.tcp_allowed_congestion_control); a program gets {} by setting TCP_CONGESTION per socket",
            lab.tcp_default_cc, r.options.tcp_cc
        );
    }
    if let Some(server) = r.server_cmd {
        let mut server_cmd = lab.shell_command(Side::Server, server);
        // The server's output goes to stderr: `quiclab shell … -- cmd | parser` reads the
        // command's output alone.
        server_cmd.stdout(std::process::Stdio::from(
            std::os::fd::AsFd::as_fd(&std::io::stderr()).try_clone_to_owned()?,
        ));
        let pid = lab.spawn(server_cmd)?;
        std::thread::sleep(r.server_wait);
        if let Some(status) = lab.wait_child(pid, Some(Duration::ZERO))? {
            bail!("--server-cmd exited before the client command started ({status})");
        }
    }
    let Some((program, args)) = r.command.split_first() else {
        bail!("no command to run in the client namespace");
    };
    let mut cmd = lab.foreground_command(Side::Client, program);
    cmd.args(args);
    let pid = lab.spawn(cmd)?;
    guard::set_foreground(Some(pid));
    let status = lab.wait_child(pid, None)?;
    guard::set_foreground(None);
    let Some(status) = status else {
        bail!("internal: a wait without a time limit returned without the command's status");
    };
    let switches = running.stop_switches();
    let fidelity = running.stop_emulator()?;
    drop(running);
    use std::os::unix::process::ExitStatusExt;
    Ok(ShellOutcome {
        status: status
            .code()
            .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)),
        switches,
        fidelity,
    })
}
