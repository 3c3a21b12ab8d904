//! Root-only integration tests: real namespaces, real TUN devices, real kernel stacks.
//! Tolerances are wide enough for a busy 2-core CI machine; the strict targets live in
//! `quiclab bench link`.

use std::time::Duration;

use quiclab_lab::{Lab, LinkSpec, RunningLab, SchedulerOptions, Side, netns, probe};
use quiclab_link::{LossSpec, QueueLimit, RateSpec};

fn root_or_skip(test: &str) -> bool {
    quiclab_testkit::can_build_labs_or_skip(test)
}

fn spec(rate_bps: Option<u64>, rtt_ms: f64, loss: f64) -> LinkSpec {
    let mut s = LinkSpec {
        seed: 3,
        tun_compensation: 60_000,
        ..Default::default()
    };
    for d in [&mut s.uplink, &mut s.downlink] {
        if let Some(bps) = rate_bps {
            d.rate = RateSpec::Constant { bps };
            d.queue = QueueLimit::Bdp(1.0);
        } else {
            d.queue = QueueLimit::Unlimited;
        }
        d.delay = (rtt_ms * 1e6 / 2.0) as u64;
        if loss > 0.0 {
            d.loss = LossSpec::Bernoulli(loss);
        }
    }
    s
}

fn start(s: &LinkSpec) -> RunningLab {
    RunningLab::start(
        s,
        &Default::default(),
        SchedulerOptions::default(),
        None,
        None,
    )
    .expect("lab starts")
}

/// Runs a timing check (up to 3 attempts); on a host whose hypervisor steals much CPU it is reported
/// as skipped instead (see `quiclab_testkit::timing`).
fn timing(name: &str, check: impl FnMut() -> Result<(), String>) {
    quiclab_testkit::timing(name, 3, check)
}

use quiclab_testkit::ensure;

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s[s.len() / 2]
}

#[test]
fn rtt_through_an_idle_link_matches_the_configured_delay() {
    if !root_or_skip("rtt") {
        return;
    }
    timing("rtt", || {
        let mut lab = start(&spec(None, 40.0, 0.0));
        let r = probe::udp_echo(&lab.lab, false, 100, Duration::from_millis(5), 64)
            .map_err(|e| e.to_string())?;
        let f = lab.stop_emulator().map_err(|e| e.to_string())?;
        assert_eq!(f.uplink.model.counters.dropped_random_packets, 0);
        ensure(r.received >= 95, || {
            format!("only {} of 100 echoes came back", r.received)
        })?;
        let m = median(&r.rtt_ms);
        ensure((m - 40.0).abs() < 2.0, || {
            format!("median RTT {m:.3} ms, configured 40 ms")
        })
    });
}

#[test]
fn ipv6_reaches_the_server_through_the_emulator() {
    if !root_or_skip("ipv6") {
        return;
    }
    timing("ipv6", || {
        let mut lab = start(&spec(Some(50_000_000), 10.0, 0.0));
        let r = probe::udp_echo(&lab.lab, true, 60, Duration::from_millis(5), 64)
            .map_err(|e| e.to_string())?;
        let f = lab.stop_emulator().map_err(|e| e.to_string())?;
        // The echoes crossed the emulator (it counted them), not some other path.
        assert!(f.uplink.delivered_packets >= r.received as u64);
        assert!(f.downlink.delivered_packets >= r.received as u64);
        ensure(r.received >= 55, || {
            format!("IPv6 echoes: {} of 60", r.received)
        })?;
        let m = median(&r.rtt_ms);
        ensure((m - 10.0).abs() < 2.0, || {
            format!("IPv6 median RTT {m:.3} ms")
        })
    });
}

#[test]
fn tcp_fills_a_10mbit_link_at_its_rate() {
    if !root_or_skip("rate") {
        return;
    }
    timing("rate", || {
        let mut lab = start(&spec(Some(10_000_000), 20.0, 0.0));
        let bulk = probe::tcp_bulk_download(&lab.lab, false, Duration::from_secs(3), "cubic")
            .map_err(|e| e.to_string())?;
        let f = lab.stop_emulator().map_err(|e| e.to_string())?;
        assert_eq!(bulk.congestion_control, "cubic");
        let rate = f
            .downlink
            .backlogged_rate_bps
            .ok_or("queue never backlogged")?;
        ensure((rate - 10e6).abs() / 10e6 < 0.05, || {
            format!("delivered {rate:.0} bit/s while backlogged, configured 10 Mbit/s")
        })?;
        // Goodput is below the IP rate (headers) but not far below once the pipe is full.
        ensure(bulk.goodput_bps > 7.5e6 && bulk.goodput_bps < 10e6, || {
            format!("goodput {:.0}", bulk.goodput_bps)
        })
    });
}

#[test]
fn bernoulli_loss_is_measured_close_to_its_configuration() {
    if !root_or_skip("loss") {
        return;
    }
    let p = 0.05;
    let mut lab = start(&spec(Some(100_000_000), 2.0, p));
    let n = 10_000;
    let r = probe::paced_udp(&lab.lab, Side::Client, false, n, 100, 20e6).unwrap();
    let f = lab.stop_emulator().unwrap();
    // 99.99 % binomial interval (z = 3.89): a correct emulator fails this once in 10 000 runs.
    let half = 3.89 * (p * (1.0 - p) / n as f64).sqrt();
    assert!(
        (r.loss - p).abs() < half,
        "measured loss {:.4}, configured {p}, allowed ±{half:.4}",
        r.loss
    );
    // What the receiver missed is what the emulator says it dropped plus what the kernel counted as
    // dropped outside it (a receive-buffer overflow in a CPU-steal burst, once seen in CI: 497 missed,
    // 496 dropped by the link). The host's share must stay a sliver or the probe measures the host.
    let c = &f.uplink.model.counters;
    let link_drops = c.dropped_random_packets + c.dropped_queue_packets + c.dropped_aqm_packets;
    assert_eq!(
        r.sent - r.received,
        link_drops + r.host_dropped,
        "missed = link drops ({} random, {} queue, {} AQM) + host drops ({})",
        c.dropped_random_packets,
        c.dropped_queue_packets,
        c.dropped_aqm_packets,
        r.host_dropped
    );
    assert!(
        r.host_dropped * 200 <= n,
        "the host dropped {} of {n} datagrams",
        r.host_dropped
    );
}

#[test]
fn two_labs_run_at_once_and_teardown_leaves_nothing() {
    if !root_or_skip("two labs") {
        return;
    }
    let a = start(&spec(None, 4.0, 0.0));
    let b = start(&spec(None, 30.0, 0.0));
    assert_ne!(a.lab.id, b.lab.id);
    timing("two labs", || {
        let (ra, rb) = std::thread::scope(|s| {
            let ta = s.spawn(|| probe::udp_echo(&a.lab, false, 20, Duration::from_millis(5), 64));
            let rb = probe::udp_echo(&b.lab, false, 20, Duration::from_millis(5), 64);
            (ta.join().unwrap().unwrap(), rb.unwrap())
        });
        // Each lab has its own delay: their packets never cross.
        let (ma, mb) = (median(&ra.rtt_ms), median(&rb.rtt_ms));
        ensure((ma - 4.0).abs() < 2.0 && (mb - 30.0).abs() < 2.0, || {
            format!("medians {ma:.3} ms (4 ms lab) and {mb:.3} ms (30 ms lab)")
        })
    });
    let names: Vec<String> = [&a, &b]
        .iter()
        .flat_map(|l| [Side::Client, Side::Server].map(|s| l.lab.namespace(s).name().to_string()))
        .collect();
    for n in &names {
        assert!(netns::list_names().contains(n), "{n} exists while running");
    }
    // A process started in the lab is ended with it.
    let pid = a
        .lab
        .spawn(a.lab.shell_command(Side::Server, "sleep 60"))
        .unwrap();
    drop(a);
    drop(b);
    let left = netns::list_names();
    for n in &names {
        assert!(!left.contains(n), "{n} left behind after teardown");
    }
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists()
            || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .map(|s| s.contains(") Z "))
                .unwrap_or(true),
        "child {pid} survived teardown"
    );
}

#[test]
fn lab_has_loopback_addresses_and_the_configured_tcp_congestion_control() {
    if !root_or_skip("lab config") {
        return;
    }
    let lab = Lab::create(&Default::default()).unwrap();
    let out = lab
        .command(Side::Client, "ip")
        .args(["-o", "addr", "show"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("100.64.0.1/24"), "{text}");
    assert!(text.contains("fd00:71ab::1/64"), "{text}");
    assert!(text.contains("lo"), "{text}");
    let cc = lab
        .command(Side::Server, "cat")
        .arg("/proc/sys/net/ipv4/tcp_congestion_control")
        .output()
        .unwrap();
    // /proc/sys/net follows the reader's namespace; the lab reports what is really in force there
    // (cubic when the host allows namespaces to choose it, else the host's default).
    assert_eq!(
        String::from_utf8_lossy(&cc.stdout).trim(),
        lab.tcp_default_cc
    );
}

#[test]
fn a_direct_veth_lab_connects_the_namespaces_without_an_emulator() {
    if !root_or_skip("direct veth") {
        return;
    }
    let mut lab = RunningLab::start_direct(&Default::default()).unwrap();
    assert!(!lab.emulated());
    assert!(lab.stop_emulator().is_err(), "there is no emulator to stop");
    for ipv6 in [false, true] {
        let r = probe::udp_echo(&lab.lab, ipv6, 20, Duration::from_millis(2), 64).unwrap();
        assert_eq!(r.received, 20, "ipv6 = {ipv6}");
        // No emulated delay: well under a millisecond on any machine that is not stalled.
        assert!(median(&r.rtt_ms) < 5.0, "{:?}", r.rtt_ms);
    }
    let names: Vec<String> = [Side::Client, Side::Server]
        .map(|s| lab.lab.namespace(s).name().to_string())
        .to_vec();
    drop(lab);
    let left = netns::list_names();
    assert!(
        names.iter().all(|n| !left.contains(n)),
        "left behind: {names:?}"
    );
}

/// The client's addresses on its TUN device, as `ip` lists them.
fn client_addresses_listed(lab: &RunningLab) -> String {
    let out = std::process::Command::new("ip")
        .args([
            "-n",
            lab.lab.namespace(Side::Client).name(),
            "-o",
            "addr",
            "show",
            "dev",
        ])
        .arg("ql0")
        .output()
        .expect("ip runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_network_switch_moves_the_client_address_and_the_old_one_stops_crossing() {
    if !root_or_skip("switch") {
        return;
    }
    use std::net::{IpAddr, SocketAddr};
    let mut options = quiclab_link::LinkOptions::default();
    options.set("switch", "wifi@0s,lte@1500ms").unwrap();
    let spec = options
        .to_spec(&quiclab_outputs::input::read_input)
        .unwrap();
    let mut lab = start(&spec);
    let (old4, _) = quiclab_lab::topology::client_addresses(0);
    let (new4, new6) = quiclab_lab::topology::client_addresses(1);
    assert_eq!(new4.to_string(), "100.64.0.17");
    let server_addr = SocketAddr::new(IpAddr::V4(lab.lab.address_v4(Side::Server)), 9);
    let server = probe::udp_in(&lab.lab, Side::Server, server_addr).unwrap();
    server
        .set_read_timeout(Some(Duration::from_millis(1500)))
        .unwrap();
    let listed = client_addresses_listed(&lab);
    assert!(listed.contains("100.64.0.1/24"), "{listed}");
    // Before the switch: the client's packets come from its first address.
    let before = probe::udp_in(&lab.lab, Side::Client, SocketAddr::new(old4.into(), 0)).unwrap();
    before.send_to(b"before", server_addr).unwrap();
    let mut buf = [0u8; 64];
    let (n, from) = server
        .recv_from(&mut buf)
        .expect("the packet before the switch arrives");
    assert_eq!(&buf[..n], b"before");
    assert_eq!(from.ip(), IpAddr::V4(old4));
    let client_old = from;
    // After the switch (1.5 s; the switcher needs a few ms more): the new addresses only.
    while lab.clock() < 2_000_000_000 {
        std::thread::sleep(Duration::from_millis(50));
    }
    let listed = client_addresses_listed(&lab);
    assert!(listed.contains("100.64.0.17/24"), "{listed}");
    assert!(listed.contains(&format!("{new6}/64")), "{listed}");
    assert!(
        !listed.contains("100.64.0.1/24"),
        "old IPv4 address still there: {listed}"
    );
    assert!(
        !listed.contains("fd00:71ab::1/64"),
        "old IPv6 address still there: {listed}"
    );
    // The server answering the old address reaches nobody: the emulator drops it (a switch).
    for _ in 0..3 {
        server.send_to(b"to the old address", client_old).unwrap();
    }
    // A new socket of the client sends from the new address, and it crosses.
    let after = probe::udp_in(
        &lab.lab,
        Side::Client,
        SocketAddr::new(IpAddr::V4("0.0.0.0".parse().unwrap()), 0),
    )
    .unwrap();
    after.send_to(b"after", server_addr).unwrap();
    let (n, from) = server
        .recv_from(&mut buf)
        .expect("the packet after the switch arrives");
    assert_eq!(&buf[..n], b"after");
    assert_eq!(from.ip(), IpAddr::V4(new4));
    std::thread::sleep(Duration::from_millis(200));
    let switches = lab.stop_switches();
    let f = lab.stop_emulator().unwrap();
    assert_eq!(switches.len(), 1);
    let s = &switches[0];
    assert_eq!(
        (s.from.as_str(), s.to.as_str(), s.epoch),
        ("wifi", "lte", 1)
    );
    assert!(s.error.is_none(), "{:?}", s.error);
    assert!(
        s.applied_s >= 1.5 && s.applied_s < 1.9,
        "switch applied at {} s",
        s.applied_s
    );
    assert!(
        f.downlink.dropped_stale_address_packets >= 3,
        "stale drops: {}",
        f.downlink.dropped_stale_address_packets
    );
}

/// The congestion control the kernel runs for `socket` (TCP_CONGESTION).
fn congestion_of(socket: &impl std::os::fd::AsRawFd) -> String {
    let mut name = [0u8; 16];
    let mut len = name.len() as libc::socklen_t;
    // SAFETY: getsockopt into a buffer of the length we pass.
    let r = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_mut_ptr().cast(),
            &mut len,
        )
    };
    assert_eq!(r, 0, "getsockopt(TCP_CONGESTION)");
    String::from_utf8_lossy(&name[..len as usize])
        .trim_end_matches('\0')
        .to_string()
}

/// A program that does not choose its TCP congestion control (Caddy, curl) gets the run's
/// through the lab's routes on any host: checked with an algorithm the namespace's default is
/// not — where the host allows namespaces only some (`tcp_allowed_congestion_control`), one it
/// does not allow — on connections accepted on the server side, while the client side keeps
/// the namespace's default.
#[test]
fn a_route_gives_connections_the_congestion_control_the_namespace_cannot_default_to() {
    if !root_or_skip("route_congctl") {
        return;
    }
    let lab = start(&spec(None, 10.0, 0.0));
    let read = |k: &str| std::fs::read_to_string(format!("/proc/sys/net/ipv4/{k}")).unwrap();
    let (available, allowed) = (
        read("tcp_available_congestion_control"),
        read("tcp_allowed_congestion_control"),
    );
    let default = lab.lab.tcp_default_cc.clone();
    let others: Vec<&str> = available
        .split_whitespace()
        .filter(|a| *a != default)
        .collect();
    let wanted = others
        .iter()
        .find(|a| !allowed.split_whitespace().any(|x| x == **a))
        .or(others.first())
        .expect("the kernel offers a second congestion control")
        .to_string();
    lab.lab
        .route_congestion_control(Side::Server, &wanted)
        .unwrap();
    let server = lab.lab.address_v4(Side::Server);
    let listener = lab
        .lab
        .namespace(Side::Server)
        .run(|| std::net::TcpListener::bind((server, 5001)))
        .unwrap()
        .unwrap();
    let client = lab
        .lab
        .namespace(Side::Client)
        .run(|| std::net::TcpStream::connect((server, 5001)))
        .unwrap()
        .unwrap();
    let (accepted, _) = listener.accept().unwrap();
    assert_eq!(
        congestion_of(&accepted),
        wanted,
        "the namespace defaults to {default}; allowed: {allowed}"
    );
    assert_eq!(congestion_of(&client), default);
}

/// `tcp-slow-start-after-idle` and `tcp-rack` (issue 59) reach both namespaces' kernels, either
/// way: the lab sets them rather than inheriting the host's.
#[test]
fn tcp_slow_start_after_idle_is_set_in_both_namespaces_either_way() {
    if !root_or_skip("tcp-slow-start-after-idle") {
        return;
    }
    let read = |lab: &RunningLab, side: Side, sysctl: &'static str| {
        lab.lab
            .namespace(side)
            .run(move || std::fs::read_to_string(format!("/proc/sys/net/ipv4/{sysctl}")))
            .expect("runs in the namespace")
            .expect("the sysctl reads")
            .trim()
            .to_string()
    };
    for (value, expected) in [("false", "0"), ("true", "1")] {
        let mut options = quiclab_link::LinkOptions::default();
        options.set("tcp-slow-start-after-idle", value).unwrap();
        options.set("tcp-rack", value).unwrap();
        let lab = RunningLab::start_for(&options, &spec(None, 10.0, 0.0), None, None)
            .expect("lab starts");
        for side in [Side::Client, Side::Server] {
            for sysctl in ["tcp_slow_start_after_idle", "tcp_recovery"] {
                assert_eq!(
                    read(&lab, side, sysctl),
                    expected,
                    "{value}: {side:?} {sysctl}"
                );
            }
        }
    }
    let e = quiclab_link::LinkOptions::default()
        .set("tcp-slow-start-after-idle", "0")
        .unwrap_err();
    assert!(e.contains("true or false"), "{e}");
}

/// `tcp-rmem` and `tcp-wmem` (issue 59) reach both namespaces' kernels as written.
#[test]
fn tcp_buffer_sysctls_are_set_in_both_namespaces() {
    if !root_or_skip("tcp-rmem") {
        return;
    }
    let mut options = quiclab_link::LinkOptions::default();
    options.set("tcp-rmem", "4096 87380 6291456").unwrap();
    options.set("tcp-wmem", "4096,16384,1048576").unwrap();
    let lab =
        RunningLab::start_for(&options, &spec(None, 10.0, 0.0), None, None).expect("lab starts");
    for side in [Side::Client, Side::Server] {
        let (r, w) = lab
            .lab
            .namespace(side)
            .run(|| {
                (
                    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_rmem"),
                    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_wmem"),
                )
            })
            .expect("runs in the namespace");
        let words = |s: std::io::Result<String>| {
            s.expect("reads")
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(words(r), "4096 87380 6291456", "{side:?}");
        assert_eq!(words(w), "4096 16384 1048576", "{side:?}");
    }
    for bad in ["4096 87380", "4096 87380 100", "a b c", "0 1 2000"] {
        let e = quiclab_link::options::tcp_buffers(bad).unwrap_err();
        assert!(e.contains("MIN DEFAULT MAX"), "{bad}: {e}");
    }
}

/// CPU time (user + system) a process has used, from /proc/PID/stat (clock ticks of 1/100 s).
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("reads its stat");
    // The fields after the command's closing parenthesis: utime and stime are the 12th and 13th.
    let after = &stat[stat.rfind(')').expect("stat has a command") + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    ticks as f64 / 100.0
}

/// `client-cpu` and `server-cpu` (issue 59): a busy loop started in a side's namespace uses about
/// the share of one core its side is limited to, one in the unlimited side far more; the groups
/// are gone with the lab.
#[test]
fn a_sides_cpu_limit_caps_what_its_processes_use() {
    if !root_or_skip("client-cpu") {
        return;
    }
    let mut options = quiclab_link::LinkOptions::default();
    options.set("client-cpu", "20%").unwrap();
    let lab =
        RunningLab::start_for(&options, &spec(None, 10.0, 0.0), None, None).expect("lab starts");
    assert_eq!(lab.lab.cpu_limit(Side::Client), Some(0.2));
    assert_eq!(lab.lab.cpu_limit(Side::Server), None);
    let busy = |side| {
        lab.lab
            .spawn(lab.lab.shell_command(side, "while :; do :; done"))
            .expect("starts a busy loop")
    };
    let (limited, free) = (busy(Side::Client), busy(Side::Server));
    let (a0, b0) = (cpu_seconds(limited), cpu_seconds(free));
    let wall = std::time::Instant::now();
    std::thread::sleep(Duration::from_secs(2));
    let (a, b) = (cpu_seconds(limited) - a0, cpu_seconds(free) - b0);
    let secs = wall.elapsed().as_secs_f64();
    let (share_limited, share_free) = (a / secs, b / secs);
    eprintln!("limited to 20 %: {share_limited:.3} of a core; unlimited: {share_free:.3}");
    // 20 % of a core, give or take the ticks' granularity and a busy host.
    assert!(
        (0.12..=0.28).contains(&share_limited),
        "limited to 20 %, it used {share_limited:.3} of a core"
    );
    assert!(
        share_free > 0.4,
        "unlimited, it used {share_free:.3} of a core (the host is too busy to tell)"
    );
    let groups: Vec<_> = quiclab_lab::cpu_limit::lab_groups(&lab.lab.id);
    assert_eq!(groups.len(), 1, "{groups:?}");
    drop(lab);
    for g in &groups {
        assert!(!g.exists(), "{} outlived its lab", g.display());
    }
}
