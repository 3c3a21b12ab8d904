//! quiclab's own measurement probes, run across a lab's emulated link: a UDP echo for RTT, a kernel-TCP
//! bulk transfer (congestion control set per socket) for rate, and a paced UDP stream for loss.
//!
//! The sockets are created on short-lived threads inside the namespaces (see [`crate::netns`]) and then
//! used from ordinary threads of this process: a socket keeps the namespace it was created in.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde::Serialize;

use crate::topology::{Lab, Side};

fn server_addr(lab: &Lab, ipv6: bool, port: u16) -> SocketAddr {
    if ipv6 {
        SocketAddr::new(IpAddr::V6(lab.address_v6(Side::Server)), port)
    } else {
        SocketAddr::new(IpAddr::V4(lab.address_v4(Side::Server)), port)
    }
}

fn client_addr(lab: &Lab, ipv6: bool, port: u16) -> SocketAddr {
    if ipv6 {
        SocketAddr::new(IpAddr::V6(lab.address_v6(Side::Client)), port)
    } else {
        SocketAddr::new(IpAddr::V4(lab.address_v4(Side::Client)), port)
    }
}

/// A UDP socket bound to `addr` inside the namespace of `side` (the socket stays in it).
pub fn udp_in(lab: &Lab, side: Side, addr: SocketAddr) -> Result<UdpSocket> {
    lab.namespace(side)
        .run(move || UdpSocket::bind(addr))?
        .with_context(|| format!("binding UDP {addr} in the {side:?} namespace"))
}

/// Round-trip times measured by the UDP echo probe.
#[derive(Debug, Clone, Serialize)]
pub struct RttSamples {
    pub sent: usize,
    pub received: usize,
    /// RTT of each answered probe, in milliseconds, in send order.
    pub rtt_ms: Vec<f64>,
}

/// Sends `count` UDP probes of `payload` bytes from client to server, one every `interval`, each echoed
/// back by the server, and returns the RTTs of those answered.
pub fn udp_echo(
    lab: &Lab,
    ipv6: bool,
    count: usize,
    interval: Duration,
    payload: usize,
) -> Result<RttSamples> {
    let payload = payload.max(12);
    let server = udp_in(lab, Side::Server, server_addr(lab, ipv6, 7))?;
    let client = udp_in(lab, Side::Client, client_addr(lab, ipv6, 0))?;
    client.connect(server_addr(lab, ipv6, 7))?;
    server.set_read_timeout(Some(Duration::from_millis(50)))?;
    let stop = Arc::new(AtomicBool::new(false));
    let echo = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 2048];
            while !stop.load(Ordering::Relaxed) {
                if let Ok((n, from)) = server.recv_from(&mut buf) {
                    let _ = server.send_to(&buf[..n], from);
                }
            }
        })
    };
    let epoch = Instant::now();
    let mut sent_at = vec![None::<f64>; count];
    let mut rtt = vec![None::<f64>; count];
    let receiver = client.try_clone()?;
    receiver.set_read_timeout(Some(Duration::from_millis(5)))?;
    let mut buf = vec![0u8; payload];
    let mut rbuf = [0u8; 2048];
    let mut next_send = Instant::now();
    let mut i = 0;
    let mut last_activity = Instant::now();
    loop {
        if i < count && Instant::now() >= next_send {
            buf[..8].copy_from_slice(&(i as u64).to_be_bytes());
            sent_at[i] = Some(epoch.elapsed().as_secs_f64());
            client.send(&buf)?;
            i += 1;
            next_send += interval;
            last_activity = Instant::now();
        }
        let wait = next_send
            .saturating_duration_since(Instant::now())
            .clamp(Duration::from_micros(100), Duration::from_millis(5));
        receiver.set_read_timeout(Some(wait))?;
        if let Ok(n) = receiver.recv(&mut rbuf)
            && n >= 8
        {
            let now = epoch.elapsed().as_secs_f64();
            let seq = u64::from_be_bytes(rbuf[..8].try_into().expect("8 bytes")) as usize;
            if let Some(Some(t)) = sent_at.get(seq)
                && rtt[seq].is_none()
            {
                rtt[seq] = Some((now - t) * 1000.0);
                last_activity = Instant::now();
            }
        }
        let answered = rtt.iter().filter(|r| r.is_some()).count();
        if i >= count && (answered == count || last_activity.elapsed() > Duration::from_secs(3)) {
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let _ = echo.join();
    let rtt_ms: Vec<f64> = rtt.into_iter().flatten().collect();
    Ok(RttSamples {
        sent: count,
        received: rtt_ms.len(),
        rtt_ms,
    })
}

/// Result of a bulk TCP transfer.
#[derive(Debug, Clone, Serialize)]
pub struct BulkResult {
    pub bytes: u64,
    pub seconds: f64,
    pub goodput_bps: f64,
    pub congestion_control: String,
    /// False when the transfer was cut at the deadline (the sender's data had not all arrived).
    pub complete: bool,
}

/// Per-socket TCP congestion control (shared with the protocol stacks).
pub fn set_tcp_congestion(socket: &impl AsRawFd, cc: &str) -> Result<()> {
    Ok(quiclab_sockets::sockopt::set_tcp_congestion(socket, cc)?)
}

/// Reads back a TCP socket's congestion control.
pub fn tcp_congestion(socket: &impl AsRawFd) -> Result<String> {
    Ok(quiclab_sockets::sockopt::tcp_congestion(socket)?)
}

/// Server → client (downlink) kernel-TCP transfer for `duration`, with congestion control `cc` on both
/// sockets. Goodput is measured at the receiver.
pub fn tcp_bulk_download(
    lab: &Lab,
    ipv6: bool,
    duration: Duration,
    cc: &str,
) -> Result<BulkResult> {
    let addr = server_addr(lab, ipv6, 5201);
    let listener = lab
        .namespace(Side::Server)
        .run(move || TcpListener::bind(addr))?
        .with_context(|| format!("listening on {addr}"))?;
    let cc_owned = cc.to_string();
    // Both ends stop at a deadline: under heavy or bursty loss TCP may back off for seconds, and a
    // probe must report what got through rather than hang or fail.
    let deadline = Instant::now() + duration + Duration::from_secs(10);
    let sender = std::thread::spawn(move || -> Result<()> {
        listener.set_nonblocking(false)?;
        let (mut conn, _) = listener.accept()?;
        set_tcp_congestion(&conn, &cc_owned)?;
        conn.set_write_timeout(Some(Duration::from_millis(200)))?;
        let chunk = vec![0x5au8; 64 * 1024];
        let end = Instant::now() + duration;
        while Instant::now() < end {
            match conn.write(&chunk) {
                Ok(_) => {}
                Err(e)
                    if e.kind() == std::io::ErrorKind::WouldBlock
                        || e.kind() == std::io::ErrorKind::TimedOut => {}
                Err(_) => break,
            }
        }
        let _ = conn.shutdown(std::net::Shutdown::Write);
        // Keep the socket until the receiver is done (or the deadline), so the data in flight
        // is not reset.
        let mut sink = [0u8; 64];
        conn.set_read_timeout(Some(Duration::from_millis(200)))?;
        while Instant::now() < deadline {
            match conn.read(&mut sink) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e)
                    if e.kind() == std::io::ErrorKind::WouldBlock
                        || e.kind() == std::io::ErrorKind::TimedOut => {}
                Err(_) => break,
            }
        }
        Ok(())
    });
    let cc_client = cc.to_string();
    let stream = lab
        .namespace(Side::Client)
        .run(move || -> Result<TcpStream> {
            let socket = socket2::Socket::new(
                socket2::Domain::for_address(addr),
                socket2::Type::STREAM,
                Some(socket2::Protocol::TCP),
            )?;
            set_tcp_congestion(&socket, &cc_client)?;
            socket.connect_timeout(&addr.into(), Duration::from_secs(10))?;
            Ok(socket.into())
        })?
        .with_context(|| format!("connecting to {addr}"))?;
    let mut stream = stream;
    stream.set_read_timeout(Some(Duration::from_millis(200)))?;
    let congestion_control = tcp_congestion(&stream)?;
    let start = Instant::now();
    let mut bytes = 0u64;
    let mut buf = vec![0u8; 256 * 1024];
    let mut complete = false;
    while Instant::now() < deadline {
        match stream.read(&mut buf) {
            Ok(0) => {
                complete = true;
                break;
            }
            Ok(n) => bytes += n as u64,
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(e) => return Err(e).context("reading the bulk transfer"),
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    drop(stream);
    sender
        .join()
        .map_err(|_| anyhow::anyhow!("bulk sender panicked"))??;
    Ok(BulkResult {
        bytes,
        seconds,
        goodput_bps: bytes as f64 * 8.0 / seconds,
        congestion_control,
        complete,
    })
}

/// Result of a paced UDP stream in one direction.
#[derive(Debug, Clone, Serialize)]
pub struct LossResult {
    pub sent: u64,
    pub received: u64,
    pub loss: f64,
    /// Packets the kernel counted as dropped outside the emulator while the stream ran: UDP receive
    /// buffer overflows and interface drops in either namespace. They are part of `loss` (the probe sees
    /// only what arrived) but not the link's doing; non-zero means the host, not the link, lost some
    /// (a CPU-steal burst longer than the receive buffer lasts). Anything else on the namespaces'
    /// interfaces during the stream (another probe, in calibration) is counted too.
    pub host_dropped: u64,
    /// Datagrams that arrived after one sent later than them (overtaken: reordered).
    pub reordered: u64,
}

/// Drops the kernel counts inside one namespace: UDP `RcvbufErrors` plus every interface's receive and
/// transmit drops. Read from `/proc/thread-self/net`, which shows the network namespace of the thread
/// reading it (a namespace thread, see [`crate::netns`]).
fn kernel_drops(lab: &Lab, side: Side) -> Result<u64> {
    let (snmp, dev) = lab.namespace(side).run(|| {
        (
            std::fs::read_to_string("/proc/thread-self/net/snmp"),
            std::fs::read_to_string("/proc/thread-self/net/dev"),
        )
    })?;
    let (snmp, dev) = (
        snmp.context("reading /proc/thread-self/net/snmp in a lab namespace")?,
        dev.context("reading /proc/thread-self/net/dev in a lab namespace")?,
    );
    Ok(udp_rcvbuf_errors(&snmp)? + interface_drops(&dev))
}

/// `RcvbufErrors` of the `Udp:` table of `/proc/net/snmp` (a header line of names, then one of values).
fn udp_rcvbuf_errors(snmp: &str) -> Result<u64> {
    let mut udp = snmp.lines().filter(|l| l.starts_with("Udp: "));
    let (names, values) = (udp.next(), udp.next());
    let (Some(names), Some(values)) = (names, values) else {
        anyhow::bail!("/proc/net/snmp has no Udp table");
    };
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .find(|(n, _)| *n == "RcvbufErrors")
        .and_then(|(_, v)| v.parse().ok())
        .context("/proc/net/snmp's Udp table has no RcvbufErrors")
}

/// Sum of every interface's receive and transmit `drop` columns of `/proc/net/dev` (columns 4 and 12
/// after the interface name).
fn interface_drops(dev: &str) -> u64 {
    dev.lines()
        .skip(2)
        .filter_map(|l| l.split_once(':'))
        .map(|(_, cols)| {
            let c: Vec<u64> = cols
                .split_whitespace()
                .filter_map(|v| v.parse().ok())
                .collect();
            c.get(3).copied().unwrap_or(0) + c.get(11).copied().unwrap_or(0)
        })
        .sum()
}

/// Sends `count` UDP datagrams of `payload` bytes at `rate_bps` (IP-layer rate) from `from` to the
/// other side and counts how many distinct ones arrive.
pub fn paced_udp(
    lab: &Lab,
    from: Side,
    ipv6: bool,
    count: u64,
    payload: usize,
    rate_bps: f64,
) -> Result<LossResult> {
    let to = match from {
        Side::Client => Side::Server,
        Side::Server => Side::Client,
    };
    let (src, dst) = match from {
        Side::Client => (client_addr(lab, ipv6, 0), server_addr(lab, ipv6, 9000)),
        Side::Server => (server_addr(lab, ipv6, 0), client_addr(lab, ipv6, 9000)),
    };
    let receiver = udp_in(lab, to, dst)?;
    let sender = udp_in(lab, from, src)?;
    // A large receive buffer: losses must come from the link, not from our own socket. As root the
    // buffer is forced past `net.core.rmem_max` (212 kB by default: ≈ 10 ms of this stream, shorter
    // than this VM's CPU-steal bursts); otherwise it is the most the host allows.
    if nix::sys::socket::setsockopt(
        &receiver,
        nix::sys::socket::sockopt::RcvBufForce,
        &(8 << 20),
    )
    .is_err()
    {
        socket2::SockRef::from(&receiver).set_recv_buffer_size(8 << 20)?;
    }
    let drops_before = kernel_drops(lab, from)? + kernel_drops(lab, to)?;
    receiver.set_read_timeout(Some(Duration::from_millis(20)))?;
    let payload = payload.max(8);
    let header = if ipv6 { 48 } else { 28 };
    let interval = Duration::from_secs_f64((payload + header) as f64 * 8.0 / rate_bps);
    let done = Arc::new(AtomicBool::new(false));
    let counter = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut seen = vec![false; count as usize];
            let (mut received, mut reordered) = (0u64, 0u64);
            let mut highest: Option<u64> = None;
            let mut buf = [0u8; 2048];
            let mut quiet_since: Option<Instant> = None;
            loop {
                match receiver.recv(&mut buf) {
                    Ok(n) if n >= 8 => {
                        let seq = u64::from_be_bytes(buf[..8].try_into().expect("8 bytes"));
                        if let Some(s) = seen.get_mut(seq as usize)
                            && !*s
                        {
                            *s = true;
                            received += 1;
                            if highest.is_some_and(|h| seq < h) {
                                reordered += 1;
                            }
                            highest = highest.max(Some(seq));
                        }
                        quiet_since = None;
                    }
                    _ => {
                        if done.load(Ordering::Relaxed) {
                            let q = *quiet_since.get_or_insert_with(Instant::now);
                            if q.elapsed() > Duration::from_millis(1500) || received == count {
                                break;
                            }
                        }
                    }
                }
                if received == count && done.load(Ordering::Relaxed) {
                    break;
                }
            }
            (received, reordered)
        })
    };
    let mut buf = vec![0u8; payload];
    let start = Instant::now();
    for seq in 0..count {
        let due = start + interval.mul_f64(seq as f64);
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
        buf[..8].copy_from_slice(&seq.to_be_bytes());
        sender.send_to(&buf, dst)?;
    }
    done.store(true, Ordering::Relaxed);
    let (received, reordered) = counter
        .join()
        .map_err(|_| anyhow::anyhow!("UDP counter panicked"))?;
    let drops_after = kernel_drops(lab, from)? + kernel_drops(lab, to)?;
    Ok(LossResult {
        sent: count,
        received,
        loss: 1.0 - received as f64 / count as f64,
        host_dropped: drops_after.saturating_sub(drops_before),
        reordered,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rcvbuf_errors_are_read_from_the_udp_table_by_name() {
        let snmp = "Ip: Forwarding DefaultTTL\nIp: 1 64\n\
            Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors\n\
            Udp: 10 0 3 9 2 0\n\
            UdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors\n\
            UdpLite: 0 0 0 0 7 0\n";
        assert_eq!(udp_rcvbuf_errors(snmp).unwrap(), 2);
        assert!(udp_rcvbuf_errors("Ip: a\nIp: 1\n").is_err());
    }

    #[test]
    fn interface_drops_sum_receive_and_transmit_drop_columns() {
        let dev = "Inter-|   Receive                                                |  Transmit\n \
            face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    \
            lo:     100       2    0    1    0     0          0         0      100       2    0    0    0     0       0          0\n\
            tun0: 5000      50    0    0    0     0          0         0     6000      60    0    4    0     0       0          0\n";
        assert_eq!(interface_drops(dev), 5);
    }
}
