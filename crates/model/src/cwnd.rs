//! cwnd.csv as read back: the congestion samples a server writes (quiclab-stacks writes them;
//! the runner and the flows workload read them). Pure text parsing.

/// One row of cwnd.csv as read back (the columns its readers use).
#[derive(Debug, Clone, PartialEq)]
pub struct CwndSample {
    pub t_mono_ns: u64,
    /// The connection's number within its process.
    pub conn: String,
    pub cwnd_bytes: f64,
    /// Bytes the connection had sent (None: not reported).
    pub bytes_sent: Option<f64>,
    /// The client's port (None: not reported).
    pub peer_port: Option<u16>,
}

/// The samples of a cwnd.csv text, columns found by the header's names; a row without a time or a
/// window is skipped, and a text without those columns has no samples.
pub fn read_samples(csv: &str) -> Vec<CwndSample> {
    let mut lines = csv.lines();
    let Some(header) = lines.next() else {
        return Vec::new();
    };
    let header: Vec<&str> = header.split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name);
    let (Some(t_col), Some(cwnd_col)) = (col("t_mono_ns"), col("cwnd_bytes")) else {
        return Vec::new();
    };
    let (conn_col, sent_col, port_col) = (col("conn"), col("bytes_sent"), col("peer_port"));
    lines
        .filter_map(|line| {
            let f: Vec<&str> = line.split(',').collect();
            let get = |c: Option<usize>| c.and_then(|i| f.get(i)).copied();
            Some(CwndSample {
                t_mono_ns: get(Some(t_col))?.parse().ok()?,
                cwnd_bytes: get(Some(cwnd_col))?.parse().ok()?,
                conn: get(conn_col).unwrap_or_default().to_string(),
                bytes_sent: get(sent_col).and_then(|v| v.parse().ok()),
                peer_port: get(port_col).and_then(|v| v.parse().ok()),
            })
        })
        .collect()
}
