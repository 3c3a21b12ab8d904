//! When a server that writes no ready file is ready: its namespace has its sockets. A process's
//! `/proc/PID/net/{tcp,tcp6,udp,udp6}` list the sockets of the network namespace it runs in, so
//! reading them needs neither a probe packet (which would be traffic the run did not ask for) nor
//! entering the namespace.

use std::path::Path;

/// What must be bound before a server is ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sockets {
    pub port: u16,
    /// A TCP listener (HTTP/1.1 and HTTP/2).
    pub tcp: bool,
    /// A UDP socket (HTTP/3).
    pub udp: bool,
}

/// Whether process `pid`'s namespace has the sockets `want` asks for.
pub fn ready(pid: u32, want: Sockets) -> bool {
    let dir = Path::new("/proc").join(pid.to_string()).join("net");
    let has = |files: [&str; 2], state: &str| {
        files.iter().any(|f| {
            std::fs::read_to_string(dir.join(f)).is_ok_and(|t| table_has(&t, want.port, state))
        })
    };
    (!want.tcp || has(["tcp", "tcp6"], TCP_LISTEN))
        && (!want.udp || has(["udp", "udp6"], UDP_BOUND))
}

/// `st` of a listening TCP socket.
const TCP_LISTEN: &str = "0A";
/// `st` of a UDP socket (TCP_CLOSE: bound, unconnected).
const UDP_BOUND: &str = "07";

/// Whether a `/proc/net/{tcp,udp}[6]` table has a socket on local port `port` in state `state`.
pub fn table_has(table: &str, port: u16, state: &str) -> bool {
    let port = format!("{port:04X}");
    table.lines().skip(1).any(|line| {
        let mut fields = line.split_whitespace();
        let local = fields.nth(1).unwrap_or("");
        let st = fields.nth(1).unwrap_or("");
        local.rsplit(':').next() == Some(port.as_str()) && st == state
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0200000A:01BB 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 12345 1 0000000000000000 100 0 0 10 0
   1: 0200000A:D431 0100000A:01BB 01 00000000:00000000 00:00000000 00000000     0        0 12346 1 0000000000000000 100 0 0 10 0
";
    const UDP6: &str = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops
  10: 000000000000000000000000000000FD:01BB 00000000000000000000000000000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 2222 2 0000000000000000 0
";

    #[test]
    fn sockets_are_read_from_the_namespace_tables() {
        assert!(table_has(TCP, 443, TCP_LISTEN));
        assert!(
            !table_has(TCP, 54321, TCP_LISTEN),
            "a connected socket is no listener"
        );
        assert!(!table_has(TCP, 8443, TCP_LISTEN));
        assert!(table_has(UDP6, 443, UDP_BOUND));
        assert!(!table_has("", 443, UDP_BOUND));
    }

    #[test]
    fn this_process_is_not_a_server() {
        let want = Sockets {
            port: 1,
            tcp: true,
            udp: false,
        };
        assert!(!ready(std::process::id(), want));
    }
}
