//! Socket options the stacks set on the kernel's TCP.

use std::os::fd::AsRawFd;

use anyhow::{Result, bail};

/// Sets the congestion control of a TCP socket. This kernel's default is BBR: quiclab never
/// inherits it, every socket it opens says which one it uses.
pub fn set_tcp_congestion(socket: &impl AsRawFd, name: &str) -> Result<()> {
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
        bail!(
            "setting TCP congestion control {name:?}: {} (see net.ipv4.tcp_available_congestion_control)",
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}
