//! Thin wrappers of the socket options quiclab sets and reads on the kernel's TCP. The one place in
//! this crate that makes system calls: each acts on a socket its caller owns and does no I/O of its
//! own, so both the lab's probes and the protocol stacks share it.

use std::os::fd::AsRawFd;

use quiclab_proto::ProtoError;
use quiclab_proto::tcp_info::{TCP_INFO_MAX_LEN, TcpInfo};

fn os_error(option: &'static str, value: &str) -> ProtoError {
    ProtoError::SocketOption {
        option,
        value: value.to_string(),
        error: std::io::Error::last_os_error().to_string(),
    }
}

/// Sets the congestion control of a TCP socket. This kernel's default is BBR: quiclab never
/// inherits it, every socket it opens says which one it uses.
pub fn set_tcp_congestion(socket: &impl AsRawFd, name: &str) -> Result<(), ProtoError> {
    // SAFETY: setsockopt with a byte buffer of the given length.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_ptr() as *const libc::c_void,
            name.len() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(os_error("setting TCP congestion control", name));
    }
    Ok(())
}

/// `UDP_GRO` of include/uapi/linux/udp.h (not in every libc build's constants).
const UDP_GRO: libc::c_int = 104;

/// Turns UDP receive offload (GRO: the kernel hands over several datagrams of one flow merged)
/// on or off for a UDP socket.
pub fn set_udp_gro(socket: &impl AsRawFd, on: bool) -> Result<(), ProtoError> {
    let value: libc::c_int = on.into();
    // SAFETY: setsockopt with an int of its size.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_UDP,
            UDP_GRO,
            &value as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(os_error("setting UDP GRO", if on { "on" } else { "off" }));
    }
    Ok(())
}

/// Whether UDP receive offload is on for a UDP socket.
pub fn udp_gro(socket: &impl AsRawFd) -> Result<bool, ProtoError> {
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt into an int of its size.
    let rc = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::SOL_UDP,
            UDP_GRO,
            &mut value as *mut libc::c_int as *mut libc::c_void,
            &mut len,
        )
    };
    if rc != 0 {
        return Err(os_error("reading UDP GRO", ""));
    }
    Ok(value != 0)
}

/// Reads back the congestion control of a TCP socket.
pub fn tcp_congestion(socket: &impl AsRawFd) -> Result<String, ProtoError> {
    let mut buf = [0u8; 16];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: getsockopt into a 16-byte buffer with its length.
    let rc = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            buf.as_mut_ptr() as *mut libc::c_void,
            &mut len,
        )
    };
    if rc != 0 {
        return Err(os_error("reading TCP congestion control", ""));
    }
    Ok(String::from_utf8_lossy(&buf[..len as usize])
        .trim_end_matches('\0')
        .to_string())
}

/// getsockopt(TCP_INFO) on a TCP socket, decoded.
pub fn tcp_info(fd: std::os::fd::RawFd) -> Option<TcpInfo> {
    let mut buf = [0u8; TCP_INFO_MAX_LEN];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: getsockopt into our buffer with its length.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            buf.as_mut_ptr() as *mut libc::c_void,
            &mut len,
        )
    };
    if rc != 0 {
        return None;
    }
    TcpInfo::decode(&buf[..len as usize]).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn congestion_control_is_set_and_read_back_per_socket() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        set_tcp_congestion(&c, "reno").unwrap();
        assert_eq!(tcp_congestion(&c).unwrap(), "reno");
        let e = set_tcp_congestion(&c, "no-such-cc")
            .unwrap_err()
            .to_string();
        assert!(e.contains("no-such-cc"), "{e}");
        assert!(tcp_info(std::os::fd::AsRawFd::as_raw_fd(&c)).is_some());
    }

    #[test]
    fn udp_receive_offload_is_turned_on_and_off_per_socket() {
        let u = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        set_udp_gro(&u, true).unwrap();
        assert!(udp_gro(&u).unwrap());
        set_udp_gro(&u, false).unwrap();
        assert!(!udp_gro(&u).unwrap());
    }
}
