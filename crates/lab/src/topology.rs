//! A lab instance: two network namespaces (client, server), one TUN device in each, addresses for IPv4
//! and IPv6, and the bookkeeping that lets a crashed lab be cleaned up later (`quiclab clean`).
//!
//! ```text
//!   ql-<pid>-<n>-client                                    ql-<pid>-<n>-server
//!   100.64.0.1  fd00:71ab::1                               100.64.0.2  fd00:71ab::2
//!   [apps] ── ql0 (TUN) ══ fd ══ quiclab emulator ══ fd ══ ql0 (TUN) ── [apps]
//!                          uplink model →  ← downlink model
//! ```
//! Nothing is configured in the host's namespace. The addresses are the same in every lab: each lab
//! has namespaces of its own, so several labs never see each other's addresses.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use crate::netns::{self, NetNs};
use crate::process;

/// Prefix of every namespace quiclab creates; `quiclab clean` only ever touches names with it.
pub const NAMESPACE_PREFIX: &str = "ql-";
/// Where live labs record their namespaces and child PIDs (tmpfs: gone after a reboot, like namespaces).
pub const STATE_DIR: &str = "/run/quiclab";
/// Name of the TUN device in both namespaces.
pub const TUN_NAME: &str = "ql0";
/// The MTU of a lab's links (Ethernet's): what QUIC's `quic_mtu` is checked against.
pub const LINK_MTU: u16 = quiclab_proto::options::LAB_LINK_MTU;

pub const CLIENT_V4: Ipv4Addr = Ipv4Addr::new(100, 64, 0, 1);
pub const SERVER_V4: Ipv4Addr = Ipv4Addr::new(100, 64, 0, 2);
pub const CLIENT_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x71ab, 0, 0, 0, 0, 0, 1);
pub const SERVER_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x71ab, 0, 0, 0, 0, 0, 2);

/// The most address epochs (networks after the first) a lab gives its client.
pub const MAX_SWITCH_EPOCHS: usize = quiclab_link::switch::MAX_SWITCHES;

/// The client's addresses in network-switch epoch `k` (0: the lab's usual ones; then
/// 100.64.0.(16+k) and fd00:71ab::1:k, which nothing else in a lab uses).
pub fn client_addresses(epoch: usize) -> (Ipv4Addr, Ipv6Addr) {
    if epoch == 0 {
        return (CLIENT_V4, CLIENT_V6);
    }
    let k = epoch.min(MAX_SWITCH_EPOCHS) as u16;
    (
        Ipv4Addr::new(100, 64, 0, 16 + k as u8),
        Ipv6Addr::new(0xfd00, 0x71ab, 0, 0, 0, 0, 1, k),
    )
}

/// Which end of the link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    Client,
    Server,
}

/// How to build a lab.
#[derive(Debug, Clone)]
pub struct LabOptions {
    /// Default TCP congestion control requested for both namespaces. The kernel may refuse it (a
    /// namespace may only pick from the host's tcp_allowed_congestion_control); `Lab::tcp_default_cc`
    /// says what is in force, and quiclab's own tools always set it per socket.
    pub tcp_congestion_control: String,
    /// TUN transmit queue length. The default (500) can overflow when a sender bursts faster than the
    /// emulator reads; 10 000 makes the TUN itself never the bottleneck.
    pub tun_txqueuelen: u32,
    pub mtu: u16,
    /// Pin the emulator to one CPU and steer each TUN's receive processing (RPS) to the others.
    /// A TUN write runs the receiving kernel's stack synchronously in the writer; with RPS that work
    /// moves to the receiver's side of the machine and the emulator's writes return quickly, which
    /// cuts release lateness at high rates (see docs/link.md).
    pub steer_receive: bool,
    /// TUN offload: the devices are opened with `IFF_VNET_HDR` and TSO/USO enabled, so the
    /// kernels hand over and accept super-packets of up to 64 kB (the emulator splits them into
    /// MTU packets for the model and coalesces its releases; see docs/link.md).
    pub offload: bool,
    /// Join the namespaces with a plain veth pair instead of TUN devices and the emulator: no
    /// shaping at all, to measure what the stacks do without the emulator in the path.
    pub direct_veth: bool,
    /// The kernels' TCP asks for ECN (`net.ipv4.tcp_ecn = 1`) instead of only answering it
    /// (2, the kernel's default): with a queue discipline that marks (`--ecn`).
    pub tcp_ecn: bool,
    /// The kernels' TCP restarts from its initial window after an idle period longer than the
    /// RTO (`net.ipv4.tcp_slow_start_after_idle`, the kernel's default 1): set either way.
    pub tcp_slow_start_after_idle: bool,
    /// RACK loss detection (`net.ipv4.tcp_recovery` 1, the kernel's default) or, false, 0:
    /// duplicate ACKs and the tail-loss probe only, as before Linux 4.4.
    pub tcp_rack: bool,
    /// `net.ipv4.tcp_rmem` / `tcp_wmem` in both namespaces (min, default, max); None: the
    /// kernel's own for a new namespace.
    pub tcp_rmem: Option<[u64; 3]>,
    pub tcp_wmem: Option<[u64; 3]>,
    /// The share of one core the client's and the server's processes may use (see
    /// [`crate::cpu_limit`]); None: no limit.
    pub client_cpu: Option<f64>,
    pub server_cpu: Option<f64>,
}

impl Default for LabOptions {
    fn default() -> Self {
        LabOptions {
            tcp_congestion_control: "cubic".into(),
            tun_txqueuelen: 10_000,
            mtu: LINK_MTU,
            steer_receive: false,
            offload: false,
            direct_veth: false,
            tcp_ecn: false,
            tcp_slow_start_after_idle: true,
            tcp_rack: true,
            tcp_rmem: None,
            tcp_wmem: None,
            client_cpu: None,
            server_cpu: None,
        }
    }
}

/// What a crashed lab left behind, as recorded in `STATE_DIR/<id>.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LabRecord {
    pub id: String,
    pub owner_pid: i32,
    /// Start time of the owner (field 22 of /proc/PID/stat), so a reused PID is not mistaken for it.
    pub owner_start: u64,
    pub namespaces: Vec<String>,
    /// (pid, start time) of every process the lab started.
    pub children: Vec<(i32, u64)>,
    /// The control groups of its CPU limits (directories), removed with it.
    #[serde(default)]
    pub cgroups: Vec<PathBuf>,
}

/// A running lab. Dropping it tears everything down.
pub struct Lab {
    pub id: String,
    client: Option<NetNs>,
    server: Option<NetNs>,
    client_tun: Option<Arc<tun_rs::SyncDevice>>,
    server_tun: Option<Arc<tun_rs::SyncDevice>>,
    record: Mutex<LabRecord>,
    children: Mutex<Vec<Child>>,
    /// The client's and the server's CPU limits (`client-cpu`, `server-cpu`): every command of
    /// that side joins its group.
    cpu_groups: [Option<crate::cpu_limit::CpuGroup>; 2],
    pub setup_time: Duration,
    /// The TCP congestion control a socket in this lab gets unless it chooses one (see
    /// [`LabOptions::tcp_congestion_control`]; may differ from the request, see `build`).
    pub tcp_default_cc: String,
    /// The congestion control each side's routes give its connections (client, server), once
    /// [`Lab::route_congestion_control`] set one.
    route_cc: Mutex<[Option<String>; 2]>,
    /// The CPU the emulator should run on when receive steering is on (None: anywhere).
    pub emulator_cpu: Option<usize>,
    /// The TUN devices' MTU.
    pub mtu: u16,
    /// Where the lab's TLS and QUIC stacks log their secrets (`SSLKEYLOGFILE` of every command
    /// it starts), for a capture's Decryption Secrets Block; None: nowhere.
    pub key_log: Option<PathBuf>,
    /// Syscall profile runs: the client and server processes run under `strace -f -c`, which
    /// writes NAME.strace into this directory (see `quiclab_workload::syscalls`).
    pub syscall_trace: Option<PathBuf>,
}

static NEXT_LAB: AtomicU32 = AtomicU32::new(0);

impl Lab {
    /// Creates the namespaces and TUN devices. Needs root and `/dev/net/tun`.
    pub fn create(opts: &LabOptions) -> Result<Lab> {
        check_privileges()?;
        let Some(_setup) = crate::registry::setup_guard() else {
            bail!("quiclab is shutting down (interrupted): no new lab");
        };
        let started = Instant::now();
        let pid = std::process::id() as i32;
        let id = format!(
            "{NAMESPACE_PREFIX}{pid}-{}",
            NEXT_LAB.fetch_add(1, Ordering::Relaxed)
        );
        let record = LabRecord {
            id: id.clone(),
            owner_pid: pid,
            owner_start: process::start_time(pid).unwrap_or(0),
            namespaces: vec![format!("{id}-client"), format!("{id}-server")],
            children: Vec::new(),
            cgroups: Vec::new(),
        };
        // Record first, so that a crash half-way through set-up is still cleaned up by `quiclab clean`.
        write_record(&record)?;
        crate::registry::register(&record);
        let mut lab = Lab {
            id,
            client: None,
            server: None,
            client_tun: None,
            server_tun: None,
            record: Mutex::new(record),
            children: Mutex::new(Vec::new()),
            cpu_groups: [None, None],
            setup_time: Duration::ZERO,
            tcp_default_cc: String::new(),
            route_cc: Mutex::new([None, None]),
            emulator_cpu: None,
            mtu: opts.mtu,
            key_log: None,
            syscall_trace: None,
        };
        lab.build(opts)?;
        lab.setup_time = started.elapsed();
        Ok(lab)
    }

    fn build(&mut self, opts: &LabOptions) -> Result<()> {
        let names = self.record.lock().unwrap().namespaces.clone();
        self.limit_cpu(opts)?;
        let steering = if opts.steer_receive {
            steering_plan()
        } else {
            None
        };
        self.emulator_cpu = steering.as_ref().map(|(cpu, _)| *cpu);
        for (i, name) in names.iter().enumerate() {
            let ns = NetNs::create(name)?;
            let (v4, v6) = if i == 0 {
                (CLIENT_V4, CLIENT_V6)
            } else {
                (SERVER_V4, SERVER_V6)
            };
            let tun = ns.run(|| -> Result<(Option<Arc<tun_rs::SyncDevice>>, String)> {
                // Before the TUN exists, so it inherits them: no router solicitations, no SLAAC, no
                // DAD, no link-local address — nothing crosses the emulated link that the user didn't send.
                for key in ["all", "default"] {
                    netns::write_sysctl(&format!("net.ipv6.conf.{key}.accept_ra"), "0")?;
                    netns::write_sysctl(&format!("net.ipv6.conf.{key}.autoconf"), "0")?;
                    netns::write_sysctl(&format!("net.ipv6.conf.{key}.accept_dad"), "0")?;
                    netns::write_sysctl(&format!("net.ipv6.conf.{key}.dad_transmits"), "0")?;
                    netns::write_sysctl(&format!("net.ipv6.conf.{key}.router_solicitations"), "0")?;
                    netns::write_sysctl(&format!("net.ipv6.conf.{key}.addr_gen_mode"), "1")?;
                }
                // The kernel lets a namespace other than the host's choose its default only among
                // net.ipv4.tcp_allowed_congestion_control (a host-wide setting quiclab does not
                // touch). When refused, the default stays the host's; quiclab's own clients and
                // servers set their congestion control per socket regardless.
                let default_cc = match netns::write_sysctl(
                    "net.ipv4.tcp_congestion_control",
                    &opts.tcp_congestion_control,
                ) {
                    Ok(()) => opts.tcp_congestion_control.clone(),
                    Err(_) => std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control")
                        .map(|s| s.trim().to_string())
                        .unwrap_or_else(|_| "unknown".into()),
                };
                // Every lab is fresh: no cached ssthresh/RTT from an earlier connection.
                netns::write_sysctl("net.ipv4.tcp_no_metrics_save", "1")?;
                // Set either way, so a lab never depends on what a namespace inherits.
                netns::write_sysctl("net.ipv4.tcp_ecn", if opts.tcp_ecn { "1" } else { "2" })?;
                netns::write_sysctl(
                    "net.ipv4.tcp_slow_start_after_idle",
                    if opts.tcp_slow_start_after_idle {
                        "1"
                    } else {
                        "0"
                    },
                )?;
                netns::write_sysctl(
                    "net.ipv4.tcp_recovery",
                    if opts.tcp_rack { "1" } else { "0" },
                )?;
                for (key, value) in [("tcp_rmem", opts.tcp_rmem), ("tcp_wmem", opts.tcp_wmem)] {
                    if let Some([min, default, max]) = value {
                        netns::write_sysctl(
                            &format!("net.ipv4.{key}"),
                            &format!("{min} {default} {max}"),
                        )?;
                    }
                }
                // A network switch adds the new address beside the old one (same /24) and then
                // removes the old: without this the kernel would remove the new one with it.
                netns::write_sysctl("net.ipv4.conf.all.promote_secondaries", "1")?;
                if opts.direct_veth {
                    return Ok((None, default_cc));
                }
                let dev = tun_rs::DeviceBuilder::new()
                    .name(TUN_NAME)
                    .mtu(opts.mtu)
                    .tx_queue_len(opts.tun_txqueuelen)
                    .offload(opts.offload)
                    .enable(false)
                    .build_sync()
                    .context("creating the TUN device (needs /dev/net/tun and CAP_NET_ADMIN)")?;
                dev.set_nonblocking(true)?;
                if opts.offload && !dev.tcp_gso() {
                    bail!("the kernel did not enable TUN offload (IFF_VNET_HDR with TSO)");
                }
                Ok((Some(Arc::new(dev)), default_cc))
            })??;
            let (tun, default_cc) = tun;
            self.tcp_default_cc = default_cc;
            if opts.direct_veth {
                if i == 1 {
                    // Created directly inside the two namespaces: it never exists in the host's.
                    netns::run_ip(&[
                        "link", "add", TUN_NAME, "netns", &names[0], "type", "veth", "peer",
                        "name", TUN_NAME, "netns", &names[1],
                    ])?;
                    for (n, (a4, a6)) in names
                        .iter()
                        .zip([(CLIENT_V4, CLIENT_V6), (SERVER_V4, SERVER_V6)])
                    {
                        configure_addresses(n, a4, a6)?;
                    }
                }
            } else {
                configure_addresses(name, v4, v6)?;
            }
            if let Some((_, mask)) = steering.as_ref().filter(|_| !opts.direct_veth) {
                // sysfs shows a namespace's devices only to a mount made inside it: `ip netns exec`
                // makes one.
                let out = Command::new("ip")
                    .args(["netns", "exec", name, "sh", "-c"])
                    .arg(format!(
                        "echo {mask} > /sys/class/net/{TUN_NAME}/queues/rx-0/rps_cpus"
                    ))
                    .output()?;
                if !out.status.success() {
                    bail!(
                        "steering the receive processing of {name}/{TUN_NAME} (RPS): {}",
                        String::from_utf8_lossy(&out.stderr).trim()
                    );
                }
            }
            if i == 0 {
                self.client = Some(ns);
                self.client_tun = tun;
            } else {
                self.server = Some(ns);
                self.server_tun = tun;
            }
        }
        Ok(())
    }

    /// Moves the client from the addresses of epoch `from` to those of `to` (a network switch):
    /// adds the new ones, then removes the old. The emulator's gate already drops the old
    /// addresses' packets; removing them makes the namespace agree and new sockets use the new
    /// source.
    pub fn switch_client_addresses(&self, from: usize, to: usize) -> Result<()> {
        if to > MAX_SWITCH_EPOCHS {
            bail!("a lab gives its client at most {MAX_SWITCH_EPOCHS} network switches");
        }
        let ns = &self.record.lock().unwrap().namespaces[0];
        switch_addresses(ns, from, to)
    }

    /// Gives every TCP connection over `side`'s link the congestion control `cc`, through the
    /// namespace's own routes (`congctl`, which iproute2 sets per route and the kernel applies to
    /// each connection on the route, opened or accepted). For a program whose sockets quiclab
    /// does not own (Caddy, curl) on a host whose `net.ipv4.tcp_allowed_congestion_control`
    /// keeps a namespace from choosing `cc` as its default: the routes are the lab's, the host
    /// is not touched. It overrides a socket's own choice, so it is for runs whose TCP on that
    /// side is one program with one algorithm (never quiclab's flows of mixed algorithms).
    pub fn route_congestion_control(&self, side: Side, cc: &str) -> Result<()> {
        if cc.is_empty() || !cc.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            bail!("{cc:?} is not a congestion control's name");
        }
        let ns = self.namespace(side).name().to_string();
        let mut commands = Vec::new();
        for family in ["-4", "-6"] {
            let out = Command::new("ip")
                .args(["-n", &ns, family, "route", "show", "dev", TUN_NAME])
                .output()
                .context("running `ip` (iproute2)")?;
            if !out.status.success() {
                bail!(
                    "reading {ns}'s routes: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                );
            }
            for line in String::from_utf8_lossy(&out.stdout).lines() {
                commands.push(format!(
                    "route replace {} dev {TUN_NAME} congctl {cc}",
                    route_keys(line)
                ));
            }
        }
        if commands.is_empty() {
            bail!("{ns} has no route over {TUN_NAME} to set a congestion control on");
        }
        netns::run_ip_batch(&ns, &commands)?;
        self.route_cc.lock().unwrap_or_else(|p| p.into_inner())[side as usize] = Some(cc.into());
        Ok(())
    }

    /// The TCP congestion control a connection on `side` gets unless its program chooses one:
    /// the routes' (see [`Lab::route_congestion_control`]) or else the namespace's default.
    pub fn tcp_cc(&self, side: Side) -> String {
        self.route_cc.lock().unwrap_or_else(|p| p.into_inner())[side as usize]
            .clone()
            .unwrap_or_else(|| self.tcp_default_cc.clone())
    }

    pub fn namespace(&self, side: Side) -> &NetNs {
        match side {
            Side::Client => self.client.as_ref(),
            Side::Server => self.server.as_ref(),
        }
        .expect("lab is built")
    }

    /// The TUN devices, for the emulator. They stay owned by the lab.
    pub fn tun(&self, side: Side) -> &Arc<tun_rs::SyncDevice> {
        match side {
            Side::Client => self.client_tun.as_ref(),
            Side::Server => self.server_tun.as_ref(),
        }
        .expect("lab is built")
    }

    /// The kernel's packet counters of a side's TUN device: (received, sent). A device receives
    /// what the emulator writes into it (one per write, a coalesced GSO packet counting once) and
    /// sends what the emulator reads from it.
    pub fn tun_packet_counters(&self, side: Side) -> Result<(u64, u64)> {
        let ns = self.namespace(side).name().to_string();
        let out = Command::new("ip")
            .args(["-n", &ns, "-s", "-j", "link", "show", TUN_NAME])
            .output()
            .context("running `ip -s link show`")?;
        if !out.status.success() {
            bail!(
                "`ip -n {ns} -s link show {TUN_NAME}`: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)?;
        let stats = &v[0]["stats64"];
        match (
            stats["rx"]["packets"].as_u64(),
            stats["tx"]["packets"].as_u64(),
        ) {
            (Some(rx), Some(tx)) => Ok((rx, tx)),
            _ => bail!("`ip -s -j link show` gave no packet counters"),
        }
    }

    pub fn address_v4(&self, side: Side) -> Ipv4Addr {
        match side {
            Side::Client => CLIENT_V4,
            Side::Server => SERVER_V4,
        }
    }

    pub fn address_v6(&self, side: Side) -> Ipv6Addr {
        match side {
            Side::Client => CLIENT_V6,
            Side::Server => SERVER_V6,
        }
    }

    /// A command that runs `sh -c SCRIPT` in the given namespace, with QUICLAB_SERVER/QUICLAB_SERVER6 set.
    pub fn shell_command(&self, side: Side, script: &str) -> Command {
        let mut cmd = self.command(side, "/bin/sh");
        cmd.arg("-c").arg(script);
        cmd
    }

    /// A command for `program` inside the namespace of `side`, with the lab's environment and
    /// the side's CPU limit, in a process group of its own.
    pub fn command(&self, side: Side, program: &str) -> Command {
        self.limited(side, self.with_env(self.namespace(side).command(program)))
    }

    /// A command that keeps quiclab's process group and so the terminal (`quiclab shell`'s CMD).
    pub fn foreground_command(&self, side: Side, program: &str) -> Command {
        self.limited(
            side,
            self.with_env(self.namespace(side).foreground_command(program)),
        )
    }

    /// The control groups capping each side's CPU, created before anything runs in the lab and
    /// recorded first so `quiclab clean` finds them after a crash.
    fn limit_cpu(&mut self, opts: &LabOptions) -> Result<()> {
        for (i, (side, share)) in [("client", opts.client_cpu), ("server", opts.server_cpu)]
            .into_iter()
            .enumerate()
        {
            let Some(share) = share else { continue };
            let name = format!("{}-{side}", self.id);
            let group = crate::cpu_limit::CpuGroup::create(&name, share)
                .with_context(|| format!("limiting the {side}'s CPU ({side}-cpu)"))?;
            let mut rec = self.record.lock().unwrap();
            rec.cgroups.push(group.dir().to_path_buf());
            write_record(&rec)?;
            self.cpu_groups[i] = Some(group);
        }
        Ok(())
    }

    /// The share of one core `side`'s processes are limited to, if any.
    pub fn cpu_limit(&self, side: Side) -> Option<f64> {
        self.cpu_groups[side as usize].as_ref().map(|g| g.share)
    }

    fn limited(&self, side: Side, mut cmd: Command) -> Command {
        if let Some(group) = &self.cpu_groups[side as usize] {
            crate::os::join_cgroup_before_exec(&mut cmd, group.procs_fd());
        }
        cmd
    }

    fn with_env(&self, mut cmd: Command) -> Command {
        cmd.env("QUICLAB_SERVER", SERVER_V4.to_string())
            .env("QUICLAB_SERVER6", SERVER_V6.to_string())
            .env("QUICLAB_CLIENT", CLIENT_V4.to_string())
            .env("QUICLAB_CLIENT6", CLIENT_V6.to_string())
            .env("QUICLAB_LAB", &self.id);
        // rustls (quiclab's stacks) and Chromium both append their secrets to SSLKEYLOGFILE;
        // without a capture no command inherits the variable from quiclab's environment.
        match &self.key_log {
            Some(path) => cmd.env("SSLKEYLOGFILE", path),
            None => cmd.env_remove("SSLKEYLOGFILE"),
        };
        cmd
    }

    /// Starts a command built with [`Lab::command`] and records its PID so it is ended with the lab
    /// (or by `quiclab clean` if this process dies). Returns the PID.
    pub fn spawn(&self, mut cmd: Command) -> Result<u32> {
        let child = cmd
            .spawn()
            .with_context(|| format!("starting {:?}", cmd.get_program()))?;
        let pid = child.id();
        // The child is ours from here on: teardown ends it even when its record could not be
        // written (the error is returned after it is tracked).
        self.children.lock().unwrap().push(child);
        let mut rec = self.record.lock().unwrap();
        rec.children
            .push((pid as i32, process::start_time(pid as i32).unwrap_or(0)));
        crate::registry::register(&rec);
        write_record(&rec).with_context(|| {
            format!(
                "recording child {pid} of lab {} (it is still ended at teardown)",
                rec.id
            )
        })?;
        Ok(pid)
    }

    /// Waits for a child started with [`Lab::spawn`]; `None` on timeout.
    pub fn wait_child(
        &self,
        pid: u32,
        timeout: Option<Duration>,
    ) -> Result<Option<std::process::ExitStatus>> {
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            {
                let mut children = self.children.lock().unwrap();
                let child = children
                    .iter_mut()
                    .find(|c| c.id() == pid)
                    .context("no such child")?;
                if let Some(status) = child.try_wait()? {
                    return Ok(Some(status));
                }
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(None);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Sends a signal to a child's process group.
    pub fn signal_child(&self, pid: u32, signal: i32) {
        process::signal_group(pid as i32, signal);
    }

    /// Ends the lab's processes (SIGTERM to each group, SIGKILL after a grace period), then anything
    /// still inside its namespaces, then removes the namespaces and the record.
    pub fn teardown(&mut self) -> Result<()> {
        let mut children = std::mem::take(&mut *self.children.lock().unwrap());
        process::terminate_children(&mut children, Duration::from_millis(1500));
        self.client_tun = None;
        self.server_tun = None;
        let mut errors = Vec::new();
        for ns in [self.client.take(), self.server.take()]
            .into_iter()
            .flatten()
        {
            if let Ok(inode) = ns.inode() {
                process::kill_namespace_processes(inode);
            }
            if let Err(e) = ns.delete() {
                errors.push(e.to_string());
            }
        }
        // A namespace that failed half-way through set-up has no NetNs value: delete by name.
        let rec = self.record.lock().unwrap().clone();
        for name in &rec.namespaces {
            if let Err(e) = netns::delete_named(name) {
                errors.push(e.to_string());
            }
        }
        // The groups empty once their processes are gone (ended above, with the namespaces').
        for group in self.cpu_groups.iter_mut().filter_map(Option::take) {
            if let Err(e) = group.remove() {
                errors.push(format!("{e:#}"));
            }
        }
        let _ = std::fs::remove_file(record_path(&rec.id));
        crate::registry::unregister(&rec.id);
        if !errors.is_empty() {
            bail!("tearing down lab {}: {}", rec.id, errors.join("; "));
        }
        Ok(())
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        // The key log is the lab's own (it holds secrets: it does not outlive the lab).
        if let Some(p) = &self.key_log {
            let _ = std::fs::remove_file(p);
        }
        if let Err(e) = self.teardown() {
            eprintln!("quiclab: {e:#}");
        }
    }
}

/// Brings up `lo` and `ql0` in a namespace and gives `ql0` its addresses (one `ip` process).
/// The `ip` commands of a switch in namespace `ns` (see [`Lab::switch_client_addresses`]).
pub(crate) fn switch_addresses(ns: &str, from: usize, to: usize) -> Result<()> {
    let (old4, old6) = client_addresses(from);
    let (new4, new6) = client_addresses(to);
    netns::run_ip_batch(
        ns,
        &[
            format!("addr add {new4}/24 dev {TUN_NAME}"),
            format!("addr add {new6}/64 dev {TUN_NAME} nodad"),
            format!("addr del {old4}/24 dev {TUN_NAME}"),
            format!("addr del {old6}/64 dev {TUN_NAME}"),
        ],
    )
}

/// A route as `ip route show dev X` prints it, without the state words `ip route replace` does
/// not take (`linkdown`, `dead`, offload marks) and without an earlier `congctl`.
fn route_keys(line: &str) -> String {
    let mut out = Vec::new();
    let mut words = line.split_whitespace();
    while let Some(w) = words.next() {
        match w {
            "linkdown" | "dead" | "offload" | "trap" | "rt_offload" | "rt_trap"
            | "rt_offload_failed" => {}
            "congctl" => {
                // `congctl [lock] NAME`
                if words.next() == Some("lock") {
                    words.next();
                }
            }
            _ => out.push(w),
        }
    }
    out.join(" ")
}

fn configure_addresses(ns: &str, v4: Ipv4Addr, v6: Ipv6Addr) -> Result<()> {
    netns::run_ip_batch(
        ns,
        &[
            "link set lo up".to_string(),
            format!("link set {TUN_NAME} up"),
            format!("addr add {v4}/24 dev {TUN_NAME}"),
            format!("addr add {v6}/64 dev {TUN_NAME} nodad"),
        ],
    )
}

/// Which CPU the emulator takes and the RPS mask (hex, comma-grouped as sysfs wants) of the other
/// CPUs this process may use; None when it may use only one.
fn steering_plan() -> Option<(usize, String)> {
    let allowed = crate::os::allowed_cpus()?;
    let (&emulator, others) = allowed.split_first()?;
    if others.is_empty() {
        return None;
    }
    Some((emulator, rps_mask(others)))
}

/// `cpus` as the hex bitmap sysfs expects: 32-bit groups, most significant first, comma-separated.
pub fn rps_mask(cpus: &[usize]) -> String {
    let top = cpus.iter().max().copied().unwrap_or(0) / 32;
    let mut groups = vec![0u32; top + 1];
    for &c in cpus {
        groups[c / 32] |= 1 << (c % 32);
    }
    let mut parts: Vec<String> = groups.iter().rev().map(|g| format!("{g:08x}")).collect();
    parts[0] = format!("{:x}", groups[top]);
    parts.join(",")
}

/// Refuses early, with what is needed, when the lab cannot be built.
pub fn check_privileges() -> Result<()> {
    if !nix::unistd::geteuid().is_root() {
        bail!(
            "quiclab needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) to create network namespaces and TUN devices; run it with sudo"
        );
    }
    if !std::path::Path::new("/dev/net/tun").exists() {
        bail!(
            "/dev/net/tun is missing: load the tun module (`modprobe tun`) or, in a container, pass the device through (--device /dev/net/tun)"
        );
    }
    Ok(())
}

fn record_path(id: &str) -> PathBuf {
    PathBuf::from(STATE_DIR).join(format!("{id}.json"))
}

fn write_record(rec: &LabRecord) -> Result<()> {
    std::fs::create_dir_all(STATE_DIR).with_context(|| format!("creating {STATE_DIR}"))?;
    let path = record_path(&rec.id);
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(rec)?)?;
    std::fs::rename(&tmp, &path)?;
    Ok(())
}

/// What `quiclab clean` did.
#[derive(Debug, Default, Serialize)]
pub struct CleanReport {
    pub labs: Vec<String>,
    pub namespaces: Vec<String>,
    pub processes: Vec<i32>,
    pub skipped_live: Vec<String>,
    /// Temporary work directories (`quiclab-KIND-PID-…`) of processes that no longer exist.
    #[serde(default)]
    pub work_dirs: Vec<std::path::PathBuf>,
    /// Pinned binaries (`.quiclab-pinned-PID` beside the executable) of such processes.
    #[serde(default)]
    pub pinned: Vec<std::path::PathBuf>,
    /// Control groups of CPU limits (`client-cpu`, `server-cpu`) of such labs.
    #[serde(default)]
    pub cgroups: Vec<std::path::PathBuf>,
}

/// What `quiclab clean` prints.
impl std::fmt::Display for CleanReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "removed {} lab(s), {} namespace(s), {} process(es), {} work directory(ies), {} \
             pinned binary(ies), {} control group(s)",
            self.labs.len(),
            self.namespaces.len(),
            self.processes.len(),
            self.work_dirs.len(),
            self.pinned.len(),
            self.cgroups.len()
        )?;
        if !self.skipped_live.is_empty() {
            write!(
                f,
                "; left {} belonging to running quiclab processes alone",
                self.skipped_live.len()
            )?;
        }
        for ns in &self.namespaces {
            write!(f, "\n  namespace {ns}")?;
        }
        Ok(())
    }
}

/// Removes what labs whose owner died left behind: their recorded processes (verified by start time),
/// any process inside their namespaces, the namespaces and the records. Labs whose owner is alive are
/// left alone. Namespaces named `ql-<pid>-…` without a record are removed when `<pid>` is not alive.
pub fn clean_stale() -> Result<CleanReport> {
    check_privileges()?;
    let mut report = CleanReport::default();
    let mut recorded = std::collections::HashSet::new();
    if let Ok(dir) = std::fs::read_dir(STATE_DIR) {
        for entry in dir.flatten() {
            let path = entry.path();
            if path.extension().and_then(|e| e.to_str()) != Some("json") {
                continue;
            }
            let Ok(rec) = std::fs::read(&path)
                .map_err(anyhow::Error::from)
                .and_then(|b| Ok(serde_json::from_slice::<LabRecord>(&b)?))
            else {
                let _ = std::fs::remove_file(&path);
                continue;
            };
            recorded.extend(rec.namespaces.iter().cloned());
            if process::is_alive(rec.owner_pid, rec.owner_start) {
                report.skipped_live.push(rec.id.clone());
                continue;
            }
            for &(pid, start) in &rec.children {
                if process::is_alive(pid, start) {
                    process::signal_group(pid, libc::SIGKILL);
                    process::signal(pid, libc::SIGKILL);
                    report.processes.push(pid);
                }
            }
            for name in &rec.namespaces {
                clean_namespace(name, &mut report);
            }
            for dir in &rec.cgroups {
                if crate::cpu_limit::remove_group(dir).is_ok() {
                    report.cgroups.push(dir.clone());
                }
            }
            let _ = std::fs::remove_file(&path);
            report.labs.push(rec.id);
        }
    }
    for name in netns::list_names() {
        if !name.starts_with(NAMESPACE_PREFIX) || recorded.contains(&name) {
            continue;
        }
        let owner = name[NAMESPACE_PREFIX.len()..]
            .split('-')
            .next()
            .and_then(|p| p.parse::<i32>().ok());
        match owner {
            Some(pid) if process::pid_exists(pid) => report.skipped_live.push(name),
            _ => clean_namespace(&name, &mut report),
        }
    }
    // Control groups of labs whose owner is gone (a crash before the record was written).
    for dir in crate::cpu_limit::lab_groups(NAMESPACE_PREFIX) {
        let name = dir
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let owner = name[NAMESPACE_PREFIX.len()..]
            .split('-')
            .next()
            .and_then(|p| p.parse::<i32>().ok());
        if owner.is_some_and(|pid| !process::pid_exists(pid))
            && crate::cpu_limit::remove_group(&dir).is_ok()
        {
            report.cgroups.push(dir);
        }
    }
    // Processes a lab started that outlived it: a lab's teardown deleted the namespaces' names,
    // but a child that escaped its end (its owner killed mid-teardown) keeps an unnamed
    // namespace alive. They carry their lab's id in QUICLAB_LAB.
    let live: std::collections::HashSet<&str> =
        report.skipped_live.iter().map(String::as_str).collect();
    for pid in orphaned_lab_processes(&live) {
        process::signal_group(pid, libc::SIGKILL);
        process::signal(pid, libc::SIGKILL);
        report.processes.push(pid);
    }
    // What dead processes left on disk: their temporary work directories and pinned binaries.
    report.work_dirs = quiclab_outputs::remove_stale_scratch();
    report.pinned = quiclab_outputs::remove_stale_pins();
    Ok(report)
}

/// Processes started by a lab whose owner is dead: `QUICLAB_LAB=ql-<owner pid>-<n>` in their
/// environment (set on every command a lab starts), the owner's PID no longer alive, the lab not
/// among `live`, and running outside this process's network namespace (a lab command always
/// runs inside one of its lab's). Only what quiclab started matches all four.
pub fn orphaned_lab_processes(live: &std::collections::HashSet<&str>) -> Vec<i32> {
    use std::os::unix::fs::MetadataExt;
    let me = std::process::id() as i32;
    let Ok(host) = std::fs::metadata("/proc/self/ns/net").map(|m| m.ino()) else {
        return Vec::new();
    };
    let Ok(proc_dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for pid in proc_dir
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&p| p != me)
    {
        let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        let Some(lab) = environ
            .split(|&b| b == 0)
            .find_map(|kv| kv.strip_prefix(b"QUICLAB_LAB="))
            .and_then(|v| std::str::from_utf8(v).ok())
        else {
            continue;
        };
        let Some(owner) = lab
            .strip_prefix(NAMESPACE_PREFIX)
            .and_then(|rest| rest.split('-').next())
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        let outside =
            std::fs::metadata(format!("/proc/{pid}/ns/net")).is_ok_and(|m| m.ino() != host);
        if outside && !live.contains(lab) && !process::pid_exists(owner) {
            found.push(pid);
        }
    }
    found
}

fn clean_namespace(name: &str, report: &mut CleanReport) {
    if let Ok(ns) = NetNs::open(name) {
        if let Ok(inode) = ns.inode() {
            report
                .processes
                .extend(process::kill_namespace_processes(inode));
        }
        if ns.delete().is_ok() {
            report.namespaces.push(name.to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::rps_mask;

    #[test]
    fn routes_are_read_back_without_their_state_words() {
        assert_eq!(
            super::route_keys("100.64.0.0/24 proto kernel scope link src 100.64.0.2 linkdown"),
            "100.64.0.0/24 proto kernel scope link src 100.64.0.2"
        );
        assert_eq!(
            super::route_keys("fd00::/64 proto kernel metric 256 congctl lock cubic pref medium"),
            "fd00::/64 proto kernel metric 256 pref medium"
        );
    }

    #[test]
    fn rps_masks_are_sysfs_bitmaps() {
        assert_eq!(rps_mask(&[1]), "2");
        assert_eq!(rps_mask(&[1, 2, 3]), "e");
        assert_eq!(rps_mask(&[0, 33]), "2,00000001");
    }
}
