//! `quiclab shell`: a command in the client namespace of a fresh lab, like Mahimahi's nested shells.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Result, bail};
use clap::Args;
use quiclab_lab::Side;

use crate::link_args::{HostFlags, LinkFlags, SwitchFlags};
use crate::signals;

#[derive(Args, Debug)]
pub struct ShellArgs {
    #[command(flatten)]
    pub link: LinkFlags,

    #[command(flatten)]
    pub host: HostFlags,

    #[command(flatten)]
    pub switch: SwitchFlags,

    /// Shell command to run in the server namespace (started first, stopped after CMD ends)
    #[arg(long, value_name = "CMD")]
    pub server_cmd: Option<String>,

    /// How long to give --server-cmd to start listening before CMD starts
    #[arg(long, default_value = "300ms", value_name = "DURATION",
          value_parser = crate::link_args::duration)]
    pub server_wait: u64,

    /// Write the per-packet event log here (format: docs/link.md) and print a summary
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,

    /// Print the summary even without --log
    #[arg(long)]
    pub summary: bool,

    /// Write the emulator's fidelity report (JSON) here
    #[arg(long, value_name = "FILE")]
    pub fidelity_json: Option<PathBuf>,

    /// Capture every packet crossing the link into this pcapng file, with the TLS/QUIC secrets of
    /// the commands that honour SSLKEYLOGFILE embedded (Wireshark decrypts from the one file)
    #[arg(long, value_name = "FILE")]
    pub pcap: Option<PathBuf>,

    /// Replace files that --log, --fidelity-json or --pcap name if they exist (never through a
    /// symlink)
    #[arg(long)]
    pub force: bool,

    /// The command to run in the client namespace (QUICLAB_SERVER/QUICLAB_SERVER6 hold the server's addresses)
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

pub fn run(args: ShellArgs) -> Result<i32> {
    let params = crate::link_args::params(
        quiclab_model::WorkloadKind::Bulk,
        &[&args.link, &args.host, &args.switch],
    )?;
    let spec = crate::link_args::link_spec(&params)?;
    let options = params.link;
    if let Some(log) = &args.log {
        quiclab_outputs::check_user_file(log, "--log", args.force)?;
    }
    if let Some(f) = &args.fidelity_json {
        quiclab_outputs::check_user_file(f, "--fidelity-json", args.force)?;
    }
    let capture = quiclab_lab::capture::CaptureConfig::for_flag(args.pcap.as_deref(), args.force)?;
    let mut running =
        quiclab_lab::RunningLab::start_for(&options, &spec, args.log.clone(), capture)?;
    let lab = &running.lab;
    if lab.tcp_default_cc != options.tcp_cc {
        eprintln!(
            "quiclab: note: TCP in this lab defaults to {} (the host limits a namespace's default to \
             net.ipv4.tcp_allowed_congestion_control); a program gets {} by setting TCP_CONGESTION per socket",
            lab.tcp_default_cc, options.tcp_cc
        );
    }

    if let Some(server) = &args.server_cmd {
        let mut server_cmd = lab.shell_command(Side::Server, server);
        // The server's output goes to stderr: `quiclab shell … -- cmd | parser` reads the
        // command's output alone.
        server_cmd.stdout(std::process::Stdio::from(
            std::os::fd::AsFd::as_fd(&std::io::stderr()).try_clone_to_owned()?,
        ));
        let pid = lab.spawn(server_cmd)?;
        std::thread::sleep(Duration::from_nanos(args.server_wait));
        if let Some(status) = lab.wait_child(pid, Some(Duration::ZERO))? {
            bail!("--server-cmd exited before the client command started ({status})");
        }
    }

    let mut cmd = lab.foreground_command(Side::Client, &args.command[0]);
    cmd.args(&args.command[1..]);
    let pid = lab.spawn(cmd)?;
    signals::set_foreground(Some(pid));
    let status = lab.wait_child(pid, None)?.expect("no timeout");
    signals::set_foreground(None);

    let switches = running.stop_switches();
    let fidelity = running.stop_emulator()?;
    for s in &switches {
        eprintln!(
            "switch {}: {} → {} at {:.3} s (addresses changed at {:.3} s){}",
            s.epoch,
            s.from,
            s.to,
            s.at_s,
            s.applied_s,
            s.error
                .as_ref()
                .map(|e| format!("; the namespace could not follow: {e}"))
                .unwrap_or_default()
        );
    }
    if args.log.is_some() || args.summary {
        eprintln!("{}", fidelity.summary(&spec.describe()));
        if let Some(log) = &args.log {
            eprintln!("packet log: {}", log.display());
        }
    }
    if let Some(c) = &fidelity.capture {
        eprintln!("{}", capture_line(c));
    }
    if let Some(path) = &args.fidelity_json {
        let doc = serde_json::json!({
            "link": spec.describe(),
            "switches": switches,
            "fidelity": fidelity,
        });
        quiclab_outputs::write_in_claimed(path, serde_json::to_string_pretty(&doc)?.as_bytes())?;
    }
    drop(running);
    use std::os::unix::process::ExitStatusExt;
    Ok(status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)))
}

/// One line about a run's capture: where, how much, what it can decrypt with.
pub fn capture_line(c: &quiclab_lab::capture::CaptureSummary) -> String {
    let mut line = format!(
        "capture: {} ({} packets, {} bytes; {})",
        c.path.display(),
        c.packets,
        c.bytes,
        if c.secrets > 0 {
            format!("{} secret(s) embedded", c.secrets)
        } else {
            "no secrets: nothing in the lab logged TLS keys".to_string()
        }
    );
    if c.over_cap > 0 {
        line.push_str(&format!(
            "; {} packet(s) past the size cap not captured",
            c.over_cap
        ));
    }
    if c.dropped_by_writer > 0 {
        line.push_str(&format!(
            "; {} packet(s) missed: the writer fell behind",
            c.dropped_by_writer
        ));
    }
    line
}
