//! Reading an endpoint's network-namespace counters ([`NamespaceCounters`]) out of the kernel:
//! `/proc/thread-self/net/{snmp,netstat,snmp6}` from a thread inside the namespace, which is how
//! /proc shows a namespace other than the reader's own.

use anyhow::{Context, Result};
pub use quiclab_model::endpoint::NamespaceCounters;
use quiclab_model::endpoint::{CpuSplit, EndpointReading, EndpointReadings};

use crate::topology::{Lab, Side};

/// The counters of one side's namespace now (they start at zero when the lab creates it).
pub fn read(lab: &Lab, side: Side) -> Result<NamespaceCounters> {
    let (snmp, netstat, snmp6) = lab.namespace(side).run(|| {
        (
            std::fs::read_to_string("/proc/thread-self/net/snmp"),
            std::fs::read_to_string("/proc/thread-self/net/netstat"),
            // Absent when IPv6 is off in the kernel: IPv4's counters are then all there is.
            std::fs::read_to_string("/proc/thread-self/net/snmp6").ok(),
        )
    })?;
    let snmp = snmp.context("reading /proc/thread-self/net/snmp in a lab namespace")?;
    let netstat = netstat.context("reading /proc/thread-self/net/netstat in a lab namespace")?;
    NamespaceCounters::parse(&snmp, &netstat, snmp6.as_deref()).map_err(anyhow::Error::msg)
}

/// What the lab measures of both endpoints at a run's end: each namespace's counters (or why
/// they could not be read), the server's CPU time and its split, and each side's CPU limit. The
/// client's CPU time comes with its report ([`EndpointReading::set_cpu`]).
pub fn endpoints(lab: &Lab, server_pid: i32) -> EndpointReadings {
    let read = |side| read(lab, side).map_err(|e| format!("{e:#}"));
    let server_cpu = crate::process::process_cpu_seconds(server_pid).unwrap_or(f64::NAN);
    let split = crate::process::process_cpu_user_system(server_pid).map(CpuSplit::from);
    let mut readings = EndpointReadings {
        client: EndpointReading::new(f64::NAN, None, read(Side::Client)),
        server: EndpointReading::new(server_cpu, split, read(Side::Server)),
    };
    readings.client.cpu_limit_cores = lab.cpu_limit(Side::Client);
    readings.server.cpu_limit_cores = lab.cpu_limit(Side::Server);
    readings
}
