//! `quiclab serve`, `quiclab fetch` and `quiclab bulk`: flags in, text or JSON out. The work is
//! quiclab-workload's (`child::serve`, `child::fetch`, the `bulk` workload).

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Result, bail};
use clap::Args;
use quiclab_lab::LinkSpec;
use quiclab_link::LinkOptions;
use quiclab_proto::options::{Protocol, QuicCongestion, StackOptions, TcpCongestion, TlsVersion};
use quiclab_workload::WorkloadSpec;
use quiclab_workload::bulk::BulkRun;
use quiclab_workload::child::{FetchConfig, ServeConfig};

use crate::link_args as kinds;
use crate::workload_args::{WorkloadArgs, execute};

#[derive(Args, Debug, Clone)]
pub struct StackArgs {
    /// TLS version for HTTP/1.1 and HTTP/2 (QUIC always uses TLS 1.3)
    #[arg(long, value_name = "1.2|1.3")]
    pub tls: Option<TlsVersion>,
    /// TCP congestion control, set per socket on both ends
    #[arg(long, default_value = "cubic", value_name = "cubic|reno|bbr")]
    pub tcp_cc: TcpCongestion,
    /// QUIC congestion control on both ends
    #[arg(
        long,
        default_value = "cubic",
        value_name = "cubic|newreno|bbr|gquic-cubic"
    )]
    pub quic_cc: QuicCongestion,
    /// Initial congestion window of QUIC, in packets (TCP's is the kernel's 10)
    #[arg(long, default_value_t = 10)]
    pub initial_window: u64,
    /// Connections emulated by gquic-cubic (N; β = (N−1+0.7)/N)
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..))]
    pub gquic_n: u32,
    /// XOR FEC under QUIC with N data datagrams per parity (2–64); both ends must use it.
    /// Partial groups are flushed after 5 ms (the RTT is not known here)
    #[arg(long, value_name = "N", value_parser = quiclab_model::params::fec_group)]
    pub fec: Option<u8>,
}

impl StackArgs {
    fn options(&self) -> StackOptions {
        StackOptions {
            tls: self.tls,
            tcp_cc: self.tcp_cc,
            quic_cc: self.quic_cc,
            initial_window_packets: self.initial_window,
            gquic_n: self.gquic_n,
            fec: self
                .fec
                .map(|n| quiclab_proto::options::FecSettings::for_rtt(n, 0)),
            ..StackOptions::default()
        }
    }
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    #[arg(long)]
    pub cert: PathBuf,
    #[arg(long)]
    pub key: PathBuf,
    /// Serve the files of this directory (and always /bytes/<N>)
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Addresses to listen on (default: $QUICLAB_SERVER and $QUICLAB_SERVER6)
    #[arg(long = "addr")]
    pub addrs: Vec<IpAddr>,
    #[arg(long, default_value_t = 443)]
    pub port: u16,
    /// Create this file once every listener is up
    #[arg(long)]
    pub ready_file: Option<PathBuf>,
    /// Sample every connection's congestion state (TCP_INFO / QUIC path stats) into this CSV
    #[arg(long, value_name = "FILE")]
    pub cwnd_log: Option<PathBuf>,
    /// Write a qlog of every QUIC connection into this directory
    #[arg(long, value_name = "DIR")]
    pub qlog_dir: Option<PathBuf>,
    /// Replace the files --ready-file and --cwnd-log name if they exist (never through a symlink)
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub stack: StackArgs,
}

#[derive(Args, Debug)]
pub struct FetchArgs {
    /// h1 (HTTP/1.1, TLS, TCP), h2 (HTTP/2, TLS, TCP) or h3 (HTTP/3, QUIC)
    #[arg(long)]
    pub proto: Protocol,
    /// The lab certificate to trust (and nothing else)
    #[arg(long)]
    pub cert: PathBuf,
    /// Server address (default: $QUICLAB_SERVER, port 443)
    #[arg(long)]
    pub server: Option<SocketAddr>,
    /// Obtain a session ticket on a first connection, then measure a resumed second one
    #[arg(long)]
    pub resume: bool,
    /// Like --resume, and send the request in 0-RTT (h3)
    #[arg(long = "0rtt")]
    pub zero_rtt: bool,
    /// Check /bytes/<N> bodies byte by byte
    #[arg(long)]
    pub verify: bool,
    /// Write a qlog of each QUIC connection into this directory
    #[arg(long, value_name = "DIR")]
    pub qlog_dir: Option<PathBuf>,
    /// Give up after this long
    #[arg(long, default_value = "120s", value_parser = quiclab_model::params::duration)]
    pub timeout: Duration,
    /// Print one JSON object
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub stack: StackArgs,
    /// Paths to request, e.g. /bytes/1000000
    #[arg(required = true)]
    pub paths: Vec<String>,
}

pub fn serve(args: ServeArgs) -> Result<i32> {
    let config = ServeConfig {
        cert: args.cert,
        key: args.key,
        dir: args.dir,
        addresses: quiclab_workload::child::lab_addresses(&args.addrs)?,
        port: args.port,
        ready_file: args.ready_file,
        cwnd_log: args.cwnd_log,
        qlog_dir: args.qlog_dir,
        fec_log: None,
        stack: args.stack.options(),
        extra_ports: Vec::new(),
        videos: quiclab_video::content::builtin_contents(),
        plain_http_port: None,
    };
    quiclab_workload::child::check_serve_outputs(&config, args.force)?;
    quiclab_workload::child::serve(&config)?;
    Ok(0)
}

pub fn fetch(args: FetchArgs) -> Result<i32> {
    let server = match args.server {
        Some(s) => s,
        None => SocketAddr::new(quiclab_workload::child::lab_addresses(&[])?[0], 443),
    };
    if let Some(d) = &args.qlog_dir {
        quiclab_outputs::claim_dir(d, "--qlog-dir")?;
    }
    let out = quiclab_workload::child::fetch(&FetchConfig {
        proto: args.proto,
        cert: args.cert.clone(),
        server,
        paths: args.paths.clone(),
        resume: args.resume,
        zero_rtt: args.zero_rtt,
        verify: args.verify,
        qlog_dir: args.qlog_dir.clone(),
        timeout_ms: args.timeout.as_millis() as u64,
        stack: args.stack.options(),
    })?;
    crate::emit(args.json, &out, || out.report.text(server))?;
    Ok(i32::from(out.any_unverified()))
}

pub type BulkArgs = WorkloadArgs<kinds::Bulk>;

/// The bulk run the flags ask for.
pub fn bulk_run(args: &BulkArgs) -> Result<(LinkOptions, LinkSpec, BulkRun)> {
    let (options, spec, WorkloadSpec::Bulk(run)) = args.prepare()? else {
        bail!("internal: bulk parameters built another workload");
    };
    Ok((options, spec, run))
}

pub fn bulk(args: BulkArgs) -> Result<i32> {
    let (options, spec, mut run) = bulk_run(&args)?;
    // The command line keeps qlogs with --keep (the runner does not: they are large).
    run.qlog = true;
    execute("bulk", &run, (&options, &spec), &args.run, |_| Ok(()))
}

/// `quiclab syscalls`: one bulk download with the client and the server under `strace -f -c`.
#[derive(Args, Debug)]
pub struct SyscallsArgs {
    #[command(flatten)]
    pub bulk: BulkArgs,
    /// Rows per process in the table
    #[arg(long, default_value_t = 10)]
    pub top: usize,
}

/// The system calls of one bulk download, per process (seed 002's QUIC profiling).
pub fn syscalls(args: SyscallsArgs) -> Result<i32> {
    let (options, spec, run) = bulk_run(&args.bulk)?;
    let keep = args.bulk.run.keep.as_deref();
    let profile = quiclab_workload::syscalls::trace_bulk(&run, &options, &spec, keep)?;
    crate::emit(args.bulk.run.json, &profile, || profile.text(args.top)).map(|_| 0)
}
