//! The kernel's socket-diagnostics netlink messages (`NETLINK_SOCK_DIAG`, `inet_diag`), for TCP:
//! a dump request, and the decoding of its answer into each socket's ports, state, `tcp_info` and
//! congestion control name.
//!
//! Why: another program's TCP sockets (Caddy's, quic-go's net/http) cannot be asked with
//! `getsockopt(TCP_INFO)` — only their owner holds the descriptor. `ss -ti` reads the same state
//! through this interface; quiclab reads it itself, every few milliseconds, from a socket opened
//! in the server's namespace (the shell does the I/O; the bytes are built and read here).
//!
//! Layout: `include/uapi/linux/netlink.h`, `sock_diag.h`, `inet_diag.h`. Multi-byte fields are in
//! native byte order except the ports and addresses of `inet_diag_sockid`, which are in network
//! byte order. Messages and attributes are aligned to 4 bytes.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use quiclab_proto::ProtoError;
use quiclab_proto::tcp_info::TcpInfo;

/// A socket-diagnostics netlink socket. It answers for the network namespace of the thread that
/// opens it. A dump that never ends must not hang its reader: each receive waits at most 1 s.
pub fn open() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2); the descriptor is checked, then owned at once.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            libc::NETLINK_SOCK_DIAG,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let timeout = libc::timeval {
        tv_sec: 1,
        tv_usec: 0,
    };
    // SAFETY: setsockopt with a timeval of the size passed.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            &timeout as *const libc::timeval as *const libc::c_void,
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

/// Every TCP socket of `family` in a data-carrying state, as one dump through `fd` (from
/// [`open`]); `buf` holds one receive.
pub fn dump(fd: &OwnedFd, family: Family, seq: u32, buf: &mut [u8]) -> io::Result<Vec<DiagSocket>> {
    let request = tcp_dump_request(family, seq);
    // SAFETY: send(2) from a buffer of the length passed.
    let sent = unsafe {
        libc::send(
            fd.as_raw_fd(),
            request.as_ptr() as *const libc::c_void,
            request.len(),
            0,
        )
    };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut sockets = Vec::new();
    loop {
        // SAFETY: recv(2) into a buffer of the length passed.
        let n = unsafe {
            libc::recv(
                fd.as_raw_fd(),
                buf.as_mut_ptr() as *mut libc::c_void,
                buf.len(),
                0,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let part = parse_dump(&buf[..n as usize], seq)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
        sockets.extend(part.sockets);
        if part.done || n == 0 {
            return Ok(sockets);
        }
    }
}

/// `SOCK_DIAG_BY_FAMILY`: the request (and answer) message type.
pub const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_DUMP: u16 = 0x300;
const NLMSG_HDRLEN: usize = 16;
const INET_DIAG_REQ_V2_LEN: usize = 56;
const INET_DIAG_MSG_LEN: usize = 72;
const IPPROTO_TCP: u8 = 6;
/// `INET_DIAG_INFO`: the attribute carrying `struct tcp_info`.
const INET_DIAG_INFO: u16 = 2;
/// `INET_DIAG_CONG`: the attribute carrying the congestion control's name.
const INET_DIAG_CONG: u16 = 4;

/// TCP states whose sockets carry data, as the kernel numbers them (`TCP_ESTABLISHED` = 1, …):
/// established, and the closing states a sender passes through while its last bytes are in
/// flight (FIN_WAIT1, FIN_WAIT2, CLOSE_WAIT, LAST_ACK, CLOSING).
const DATA_STATES: [u8; 6] = [1, 4, 5, 8, 9, 11];

/// Address family of a dump: the kernel answers one family per request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    V4,
    V6,
}

impl Family {
    fn number(self) -> u8 {
        match self {
            Family::V4 => 2,  // AF_INET
            Family::V6 => 10, // AF_INET6
        }
    }
}

/// A request for every TCP socket of `family` in the namespace in a data-carrying state, with
/// its `tcp_info` and congestion control name.
pub fn tcp_dump_request(family: Family, seq: u32) -> Vec<u8> {
    let len = NLMSG_HDRLEN + INET_DIAG_REQ_V2_LEN;
    let mut b = Vec::with_capacity(len);
    b.extend_from_slice(&(len as u32).to_ne_bytes());
    b.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    b.extend_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    b.extend_from_slice(&seq.to_ne_bytes());
    b.extend_from_slice(&0u32.to_ne_bytes()); // pid: the kernel's
    b.push(family.number());
    b.push(IPPROTO_TCP);
    // idiag_ext: bit (attribute - 1) asks for that attribute.
    b.push((1u8 << (INET_DIAG_INFO - 1)) | (1u8 << (INET_DIAG_CONG - 1)));
    b.push(0); // pad
    let states: u32 = DATA_STATES.iter().map(|s| 1u32 << s).sum();
    b.extend_from_slice(&states.to_ne_bytes());
    // inet_diag_sockid: all zero (a dump ignores it).
    b.resize(len, 0);
    b
}

/// One TCP socket of a dump's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct DiagSocket {
    pub family: Family,
    /// The kernel's TCP state number (1 = established).
    pub state: u8,
    pub local_port: u16,
    pub peer_port: u16,
    /// The socket's inode: stable for its life, it tells connections apart.
    pub inode: u32,
    /// Absent when the kernel sent no `INET_DIAG_INFO` (it always does for a full socket).
    pub info: Option<TcpInfo>,
    /// The congestion control's name (`cubic`, `bbr`, …), when sent.
    pub congestion: Option<String>,
}

/// What one buffer of a dump's answer holds: its sockets, and whether the dump ended in it.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct DumpPart {
    pub sockets: Vec<DiagSocket>,
    pub done: bool,
}

fn bad(detail: String) -> ProtoError {
    ProtoError::SockDiag { detail }
}

fn u16_ne(b: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes([b[at], b[at + 1]])
}

fn u32_ne(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// Decodes one `recv` buffer of a dump's answer (messages for `seq` only; others are skipped).
/// A netlink error message is an error naming the kernel's errno.
pub fn parse_dump(buf: &[u8], seq: u32) -> Result<DumpPart, ProtoError> {
    let mut part = DumpPart::default();
    let mut at = 0;
    while at + NLMSG_HDRLEN <= buf.len() {
        let len = u32_ne(buf, at) as usize;
        if len < NLMSG_HDRLEN || at + len > buf.len() {
            return Err(bad(format!(
                "message of length {len} at byte {at} of {}",
                buf.len()
            )));
        }
        let kind = u16_ne(buf, at + 4);
        let msg_seq = u32_ne(buf, at + 8);
        let body = &buf[at + NLMSG_HDRLEN..at + len];
        at += align4(len);
        if msg_seq != seq {
            continue;
        }
        match kind {
            NLMSG_DONE => {
                part.done = true;
                break;
            }
            NLMSG_ERROR => {
                let errno = if body.len() >= 4 {
                    -(u32_ne(body, 0) as i32)
                } else {
                    0
                };
                return Err(bad(format!("the kernel answered with error {errno}")));
            }
            SOCK_DIAG_BY_FAMILY => part.sockets.push(parse_socket(body)?),
            _ => {}
        }
    }
    Ok(part)
}

fn parse_socket(body: &[u8]) -> Result<DiagSocket, ProtoError> {
    if body.len() < INET_DIAG_MSG_LEN {
        return Err(bad(format!(
            "inet_diag_msg of {} bytes (needs {INET_DIAG_MSG_LEN})",
            body.len()
        )));
    }
    let family = match body[0] {
        2 => Family::V4,
        10 => Family::V6,
        f => return Err(bad(format!("address family {f}"))),
    };
    let mut socket = DiagSocket {
        family,
        state: body[1],
        local_port: u16::from_be_bytes([body[4], body[5]]),
        peer_port: u16::from_be_bytes([body[6], body[7]]),
        inode: u32_ne(body, 68),
        info: None,
        congestion: None,
    };
    let mut at = INET_DIAG_MSG_LEN;
    while at + 4 <= body.len() {
        let len = u16_ne(body, at) as usize;
        let kind = u16_ne(body, at + 2);
        if len < 4 || at + len > body.len() {
            return Err(bad(format!(
                "attribute of length {len} at byte {at} of {}",
                body.len()
            )));
        }
        let payload = &body[at + 4..at + len];
        match kind {
            INET_DIAG_INFO => socket.info = Some(TcpInfo::decode(payload)?),
            INET_DIAG_CONG => {
                let name = payload.split(|&c| c == 0).next().unwrap_or_default();
                socket.congestion = Some(String::from_utf8_lossy(name).into_owned());
            }
            _ => {}
        }
        at += align4(len);
    }
    Ok(socket)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(kind: u16, seq: u32, body: &[u8]) -> Vec<u8> {
        let len = NLMSG_HDRLEN + body.len();
        let mut b = Vec::new();
        b.extend_from_slice(&(len as u32).to_ne_bytes());
        b.extend_from_slice(&kind.to_ne_bytes());
        b.extend_from_slice(&2u16.to_ne_bytes()); // NLM_F_MULTI
        b.extend_from_slice(&seq.to_ne_bytes());
        b.extend_from_slice(&0u32.to_ne_bytes());
        b.extend_from_slice(body);
        b.resize(align4(b.len()), 0);
        b
    }

    fn attribute(kind: u16, payload: &[u8]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&((4 + payload.len()) as u16).to_ne_bytes());
        b.extend_from_slice(&kind.to_ne_bytes());
        b.extend_from_slice(payload);
        b.resize(align4(b.len()), 0);
        b
    }

    fn socket_body(local: u16, peer: u16, inode: u32, cwnd: u32, cc: &str) -> Vec<u8> {
        let mut b = vec![0u8; INET_DIAG_MSG_LEN];
        b[0] = 2;
        b[1] = 1;
        b[4..6].copy_from_slice(&local.to_be_bytes());
        b[6..8].copy_from_slice(&peer.to_be_bytes());
        b[68..72].copy_from_slice(&inode.to_ne_bytes());
        let mut info = vec![0u8; 232];
        info[0] = 1; // state
        info[16..20].copy_from_slice(&1448u32.to_ne_bytes()); // snd_mss
        info[80..84].copy_from_slice(&cwnd.to_ne_bytes()); // snd_cwnd
        b.extend(attribute(INET_DIAG_INFO, &info));
        let mut name = cc.as_bytes().to_vec();
        name.push(0);
        b.extend(attribute(INET_DIAG_CONG, &name));
        b
    }

    #[test]
    fn the_request_asks_a_dump_of_tcp_with_info_and_congestion() {
        let r = tcp_dump_request(Family::V6, 7);
        assert_eq!(r.len(), 72);
        assert_eq!(u32_ne(&r, 0), 72);
        assert_eq!(u16_ne(&r, 4), SOCK_DIAG_BY_FAMILY);
        assert_eq!(u16_ne(&r, 6), 0x301);
        assert_eq!(u32_ne(&r, 8), 7);
        assert_eq!(r[16], 10);
        assert_eq!(r[17], 6);
        assert_eq!(r[18], 0b1010);
        let states = u32_ne(&r, 20);
        assert_eq!(states & (1 << 1), 1 << 1, "established");
        assert_eq!(states & (1 << 10), 0, "not listening sockets");
        assert_eq!(states & (1 << 6), 0, "not TIME_WAIT (no tcp_info)");
    }

    #[test]
    fn an_answer_gives_ports_inode_window_and_congestion_control() {
        let mut buf = message(
            SOCK_DIAG_BY_FAMILY,
            7,
            &socket_body(443, 40000, 99, 10, "cubic"),
        );
        buf.extend(message(
            SOCK_DIAG_BY_FAMILY,
            7,
            &socket_body(443, 40002, 100, 32, "bbr"),
        ));
        buf.extend(message(NLMSG_DONE, 7, &0i32.to_ne_bytes()));
        let part = parse_dump(&buf, 7).unwrap();
        assert!(part.done);
        assert_eq!(part.sockets.len(), 2);
        let s = &part.sockets[1];
        assert_eq!((s.local_port, s.peer_port, s.inode), (443, 40002, 100));
        assert_eq!(s.congestion.as_deref(), Some("bbr"));
        let info = s.info.as_ref().unwrap();
        assert_eq!(info.snd_cwnd, 32);
        assert_eq!(info.cwnd_bytes(), 32 * 1448);
    }

    #[test]
    fn a_part_without_done_asks_for_more_and_other_sequences_are_skipped() {
        let mut buf = message(SOCK_DIAG_BY_FAMILY, 6, &socket_body(443, 1, 1, 1, "cubic"));
        buf.extend(message(
            SOCK_DIAG_BY_FAMILY,
            7,
            &socket_body(443, 2, 2, 2, "cubic"),
        ));
        let part = parse_dump(&buf, 7).unwrap();
        assert!(!part.done);
        assert_eq!(part.sockets.len(), 1);
        assert_eq!(part.sockets[0].peer_port, 2);
    }

    #[test]
    fn errors_and_truncation_are_errors_not_panics() {
        let err = message(NLMSG_ERROR, 7, &(-1i32).to_ne_bytes());
        let e = parse_dump(&err, 7).unwrap_err().to_string();
        assert!(e.contains("error 1"), "{e}");
        let mut buf = message(SOCK_DIAG_BY_FAMILY, 7, &socket_body(443, 2, 2, 2, "cubic"));
        buf.truncate(buf.len() - 8);
        assert!(
            matches!(parse_dump(&buf, 7), Err(ProtoError::SockDiag { .. })),
            "a truncated answer is a malformed kernel answer, not a configuration error"
        );
        let short = message(SOCK_DIAG_BY_FAMILY, 7, &[2u8; 20]);
        assert!(parse_dump(&short, 7).is_err());
        // A header claiming more than the buffer holds.
        let mut lying = message(NLMSG_DONE, 7, &[0u8; 4]);
        lying[0..4].copy_from_slice(&1000u32.to_ne_bytes());
        assert!(parse_dump(&lying, 7).is_err());
        // Every prefix of a good answer decodes or errs, never panics.
        let good = message(SOCK_DIAG_BY_FAMILY, 7, &socket_body(443, 2, 2, 2, "cubic"));
        for n in 0..good.len() {
            let _ = parse_dump(&good[..n], 7);
        }
    }
}
