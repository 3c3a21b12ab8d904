//! `bulk`: one download of `size` bytes over one connection (h1, h2 or h3), with resumption and
//! 0-RTT on request. The seed studies' download-time and handshake measurements.

pub use quiclab_model::bulk::*;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use quiclab_lab::{LinkSpec, RunningLab, Side};
use quiclab_proto::options::Protocol;

use crate::child::{
    ChildConfig, FetchChildReport, FetchConfig, SwitchFetchConfig, SwitchFetchReport,
};
use crate::fec::FecResult;
use crate::harness::{self, RunError, WorkDir};
use crate::{Outcome, Workload};
use quiclab_model::endpoint::EndpointReadings;
use quiclab_model::implementation::{Client, Implementations, Server};
use quiclab_stacks::switching::SwitchPlan;

pub use quiclab_model::run::SwitchBehaviour;

/// What the client of a run in `running` (whose link follows `schedule`) is told: its
/// address in each epoch (IPv6 ones with `ipv6`), the switch instants, this behaviour.
pub fn switch_plan(
    behaviour: &SwitchBehaviour,
    running: &RunningLab,
    schedule: &quiclab_link::switch::SwitchSchedule,
    ipv6: bool,
) -> SwitchPlan {
    let switches = schedule.switches();
    SwitchPlan {
        on_switch: behaviour.on_switch,
        stall_timeout: behaviour.stall_timeout,
        migrate_delay: behaviour.migrate_delay,
        transfer_timeout: behaviour.transfer_timeout,
        epoch_ns: quiclab_stacks::cwnd::monotonic_ns().saturating_sub(running.clock()),
        switch_at_ns: switches.iter().map(|s| s.at).collect(),
        addresses: (0..=switches.len())
            .map(|k| {
                let (v4, v6) = quiclab_lab::topology::client_addresses(k);
                if ipv6 { v6.into() } else { v4.into() }
            })
            .collect(),
    }
}

pub use quiclab_model::run::{default_timeout, transfer_estimate_seconds};

pub use quiclab_model::run::bulk::BulkRun;
use quiclab_model::run::bulk::Measured;

impl Workload for BulkRun {
    type Output = BulkResult;

    fn name(&self) -> &'static str {
        "bulk"
    }

    fn contender(&self) -> String {
        self.proto.to_string()
    }

    fn time_series(&self, out: &Outcome<BulkResult>) -> Vec<crate::TimeSeries> {
        out.result
            .network_switches
            .as_deref()
            .map(|sw| {
                // total_ms counts from the first connection's opening (emulator clock).
                let opened = out
                    .result
                    .connections
                    .as_ref()
                    .and_then(|c| c.first())
                    .map_or(0.0, |c| c.opened_s);
                let end = opened + out.result.total_ms / 1e3;
                vec![crate::switch::switch_marks(sw.iter().map(|s| s.at_s), end)]
            })
            .unwrap_or_default()
    }

    fn estimate_seconds(&self, spec: &LinkSpec) -> f64 {
        transfer_estimate_seconds(self.size as f64, spec)
    }

    fn time_limit(&self, spec: &LinkSpec) -> Duration {
        self.timeout
            .unwrap_or_else(|| default_timeout(self.size, spec))
    }

    fn run(
        &self,
        running: &mut RunningLab,
        keep: Option<&Path>,
    ) -> Result<Outcome<BulkResult>, RunError> {
        let spec = running.spec.clone();
        let work = WorkDir::new(keep, "bulk")?;
        let lab = &running.lab;
        harness::write_certificate(lab, &work)?;
        if self.server != Server::Quiclab || self.client != Client::Quiclab {
            return run_with_others(self, running, work);
        }
        let mut serve = harness::serve_config(lab, &work, self.stack);
        if work.is_kept() {
            serve.cwnd_log = Some(work.join("cwnd.csv"));
            if self.qlog {
                serve.qlog_dir = Some(work.path().to_path_buf());
            }
        }
        let server_pid = harness::start_server(lab, &work, serve)?;

        let server_ip: IpAddr = if self.ipv6 {
            lab.address_v6(Side::Server).into()
        } else {
            lab.address_v4(Side::Server).into()
        };
        let timeout = self.time_limit(&spec);
        if spec.switch.is_some() {
            if self.stack.fec.is_some() {
                // The client across switches builds its own QUIC endpoints, without FEC so far.
                return Err(RunError::Failed(
                    "FEC across network switches is not built yet: drop --fec or --switch".into(),
                ));
            }
            let server = SocketAddr::new(server_ip, 443);
            return run_across_switches(self, running, work, server, server_pid, timeout);
        }
        let qlog_dir = (work.is_kept() && self.qlog).then(|| work.path().to_path_buf());
        let end = fetch_with_own_client(
            self,
            running,
            &work,
            SocketAddr::new(server_ip, 443),
            format!("/bytes/{}", self.size),
            qlog_dir,
            timeout,
            server_pid,
        )?;
        let fidelity = end.fidelity;
        let client = end.client?;
        let mut endpoints = end
            .endpoints
            .with_client_cpu(client.cpu_s, client.cpu_split);
        endpoints.client.quic = client.report.quic;
        // The server's FEC counters, which it writes beside the run (with FEC only).
        let server_fec = self
            .stack
            .fec
            .and_then(|_| harness::server_fec(&work).map(|l| l.total));
        let measured = Measured {
            spec: &spec,
            fidelity: fidelity.clone(),
            endpoints,
            implementations: own_implementations(self),
        };
        let result = own_result(self, &client, server_fec, &measured)?;
        Ok(Outcome { result, fidelity })
    }
}

/// Another server's congestion window from its qlog, into the kept run's directory: cwnd.csv on
/// the monotonic clock (as quiclab's own server writes it, so the report draws it) when the qlog
/// says when it started (quic-go), else server-cwnd.csv in ms from the connection's start
/// (ngtcp2 0.12's qlog has no absolute time).
fn write_server_cwnd(work: &WorkDir, qlog_dir: &Path) {
    let Some(timeline) = quiclab_peers::qlog::files(qlog_dir)
        .first()
        .and_then(|f| std::fs::read_to_string(f).ok())
        .map(|t| quiclab_peers::qlog::read(&t))
    else {
        return;
    };
    if timeline.cwnd.is_empty() {
        return;
    }
    // Both clocks read together: realtime − monotonic, to put the qlog's wall-clock start on
    // the monotonic clock.
    let mono = quiclab_stacks::cwnd::monotonic_ns() as i128;
    let real = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128);
    let (name, text) = match timeline.cwnd_monotonic_ns(real - mono) {
        Some(samples) => (
            "cwnd.csv",
            samples.iter().fold(
                String::from("t_mono_ns,conn,transport,cwnd_bytes\n"),
                |mut s, (t, w)| {
                    s.push_str(&format!("{t},0,quic,{w}\n"));
                    s
                },
            ),
        ),
        None => (
            "server-cwnd.csv",
            timeline.cwnd.iter().fold(
                String::from("ms_since_connection_start,cwnd_bytes\n"),
                |mut s, (ms, w)| {
                    s.push_str(&format!("{ms},{w}\n"));
                    s
                },
            ),
        ),
    };
    // A kept run's extra file: one that cannot be written leaves the measurement as it is.
    let _ = quiclab_outputs::write_in_claimed(&work.join(name), text.as_bytes());
}

/// One download of `path` by quiclab's own client (the fetch child), whichever server
/// answers; waits for the client, then stops the emulator.
#[allow(clippy::too_many_arguments)]
fn fetch_with_own_client(
    run: &BulkRun,
    running: &mut RunningLab,
    work: &WorkDir,
    server: SocketAddr,
    path: String,
    qlog_dir: Option<PathBuf>,
    timeout: Duration,
    server_pid: u32,
) -> Result<harness::ClientEnd<FetchChildReport>, RunError> {
    let fetch = ChildConfig::Fetch(FetchConfig {
        proto: run.proto,
        cert: work.join("cert.pem"),
        server,
        paths: vec![path],
        resume: run.resume,
        zero_rtt: run.zero_rtt,
        verify: true,
        qlog_dir,
        timeout_ms: timeout.as_millis() as u64,
        stack: run.stack,
    });
    harness::run_client_to_end::<FetchChildReport>(
        running,
        work,
        "fetch",
        &fetch,
        timeout,
        Duration::from_secs(5),
        server_pid,
    )
}

/// quiclab's own stacks on both ends, as the result records them.
fn own_implementations(run: &BulkRun) -> Implementations {
    let own = crate::peer::quiclab_record(run.stack.cc_name(run.proto));
    Implementations {
        server: own.clone(),
        client: own,
    }
}

/// The download with another implementation on either end (quiclab-peers): its server in
/// the server namespace, its client through `quiclab child` in the client namespace.
fn run_with_others(
    run: &BulkRun,
    running: &mut RunningLab,
    work: WorkDir,
) -> Result<Outcome<BulkResult>, RunError> {
    let spec = running.spec.clone();
    if spec.switch.is_some() {
        return Err(RunError::Failed(
            "network switches are answered by quiclab's own client and server".into(),
        ));
    }
    let lab = &running.lab;
    let cc = run.stack.cc_name(run.proto);
    let tcp = run.proto != Protocol::H3;
    let server_ip: IpAddr = if run.ipv6 {
        lab.address_v6(Side::Server).into()
    } else {
        lab.address_v4(Side::Server).into()
    };
    let site = quiclab_peers::content::Site::create(work.path(), "www")
        .map_err(|e| RunError::Failed(format!("{e:#}")))?;
    let path = site
        .add_pattern_object(run.size)
        .map_err(|e| RunError::Failed(format!("{e:#}")))?;
    // Caddy and curl take the namespace's TCP congestion control; the quic-go peer and
    // ngtcp2 set their own.
    if tcp && run.server == Server::Caddy {
        crate::peer::ensure_namespace_cc(lab, quiclab_lab::Side::Server, cc, "Caddy")?;
    }
    if tcp && run.client == Client::Curl {
        crate::peer::ensure_namespace_cc(lab, quiclab_lab::Side::Client, cc, "curl")?;
    }
    let (server_pid, server_record, server_qlog) = if run.server == Server::Quiclab {
        let mut serve = harness::serve_config(lab, &work, run.stack);
        if work.is_kept() {
            serve.cwnd_log = Some(work.join("cwnd.csv"));
        }
        let pid = harness::start_server(lab, &work, serve)?;
        (pid, crate::peer::quiclab_record(cc), None)
    } else {
        let started = crate::peer::start_server(
            lab,
            &work,
            &crate::peer::ServerChoice {
                server: run.server,
                address: server_ip,
                root: &site.root,
                quic_cc: (!tcp).then_some(cc),
                tcp_cc: cc,
                qlog: work.is_kept(),
            },
        )?;
        (started.pid, started.record, started.qlog_dir)
    };
    let tcp_sampler = crate::peer_tcp::sample_other_server(lab, &work, run.server, run.proto)?;
    let timeout = run.time_limit(&spec);
    let server = SocketAddr::new(server_ip, 443);
    let (fetch, client_record, endpoints, fidelity) =
        fetch_with_any_client(run, running, &work, (server, &path), timeout, server_pid)?;
    if let Some(sampler) = tcp_sampler {
        sampler.finish().check(run.server, cc)?;
    }
    let result = run.result_of(
        &fetch,
        &Measured {
            spec: &spec,
            fidelity: fidelity.clone(),
            endpoints,
            implementations: Implementations {
                server: server_record,
                client: client_record,
            },
        },
    );
    // The server's qlog, when kept: its congestion window over time, for the report.
    if let Some(dir) = server_qlog {
        write_server_cwnd(&work, &dir);
    }
    Ok(Outcome { result, fidelity })
}

/// The download over a link with a switch schedule: a client that lives through the
/// switches (`run.switching`), the outcome of each.
fn run_across_switches(
    run: &BulkRun,
    running: &mut RunningLab,
    work: WorkDir,
    server: SocketAddr,
    server_pid: u32,
    timeout: Duration,
) -> Result<Outcome<BulkResult>, RunError> {
    let spec = running.spec.clone();
    let schedule = spec.switch.clone().expect("called with a schedule");
    let plan = switch_plan(&run.switching, running, &schedule, run.ipv6);
    let config = ChildConfig::SwitchFetch(SwitchFetchConfig {
        cert: work.join("cert.pem"),
        run: run.clone(),
        server,
        plan,
        timeout_ms: timeout.as_millis() as u64,
    });
    let end = harness::run_client_to_end::<SwitchFetchReport>(
        running,
        &work,
        "fetch",
        &config,
        timeout,
        Duration::from_secs(5),
        server_pid,
    )?;
    let applied = running.stop_switches();
    let fidelity = end.fidelity;
    let client = end.client?;
    let endpoints = end
        .endpoints
        .with_client_cpu(client.cpu_s, client.cpu_split);
    let result = run.result_across_switches(
        &client.report,
        (&schedule, &applied),
        &Measured {
            spec: &spec,
            fidelity: fidelity.clone(),
            endpoints,
            implementations: own_implementations(run),
        },
    );
    Ok(Outcome { result, fidelity })
}

/// The result of a download by quiclab's own client: its report, the server's FEC counters (with
/// FEC) and what the lab measured. Pure: tested on a recorded report. It is the record every
/// client's download gives ([`BulkRun::result_of`]) with what only quiclab's client tells.
fn own_result(
    run: &BulkRun,
    client: &crate::child::FetchChildReport,
    server_fec: Option<quiclab_model::records::FecCounters>,
    m: &Measured<'_>,
) -> Result<BulkResult, RunError> {
    let mut r = run.result_of(&own_fetch_record(&client.report)?, m);
    let (c, req) = (&client.report.connection, &client.report.requests[0]);
    // Timed from the request, not the handshake's end: a 0-RTT request leaves before the
    // handshake ends.
    let transfer_s = (req.last_byte_ms - req.request_sent_ms).max(1e-9) / 1e3;
    let goodput = req.bytes as f64 * 8.0 / transfer_s;
    r.goodput_mbps = goodput / 1e6;
    r.goodput_utilization = m.spec.downlink.mean_rate_bps().map(|rate| goodput / rate);
    r.zero_rtt = c.zero_rtt_accepted;
    r.alt_svc = req.alt_svc.clone();
    r.path = if m.fidelity.is_some() {
        "emulator"
    } else {
        "veth"
    }
    .into();
    r.fec = run
        .stack
        .fec
        .map(|f| FecResult::of(f.in_cwnd, server_fec, client.report.fec));
    Ok(r)
}

/// quiclab's own client's report in the terms every client's download is recorded in.
fn own_fetch_record(
    report: &quiclab_stacks::client::FetchReport,
) -> Result<quiclab_model::records::ExternalFetch, RunError> {
    let Some(req) = report.requests.first() else {
        return Err(RunError::Failed("the fetch's report has no request".into()));
    };
    let c = &report.connection;
    Ok(quiclab_model::records::ExternalFetch {
        negotiated: Some(c.protocol.clone()),
        tls_version: Some(c.tls_version.clone()),
        connect_ms: c.tcp_connect_ms,
        handshake_ms: Some(c.handshake_ms),
        ttfb_ms: Some(req.first_byte_ms),
        total_ms: req.last_byte_ms,
        bytes: req.bytes,
        verified: req.verified,
        resumed: c.resumed,
        cwnd: Vec::new(),
        unmeasured: Default::default(),
    })
}

/// A download in quiclab's terms, with the client's record, both endpoints' readings (CPU time,
/// counters) and the emulator's report.
type Fetched = (
    quiclab_model::records::ExternalFetch,
    quiclab_model::implementation::ImplementationRecord,
    EndpointReadings,
    Option<quiclab_lab::FidelityReport>,
);

/// The download by the run's client — quiclab's own, Chromium's fetch() or another program — in
/// quiclab's terms, with the client's record, its and the server's CPU time and the emulator's
/// report.
fn fetch_with_any_client(
    run: &BulkRun,
    running: &mut RunningLab,
    work: &WorkDir,
    (server, path): (SocketAddr, &str),
    timeout: Duration,
    server_pid: u32,
) -> Result<Fetched, RunError> {
    let cc = run.stack.cc_name(run.proto);
    Ok(if run.client == Client::Quiclab {
        let end = fetch_with_own_client(
            run,
            running,
            work,
            server,
            path.to_string(),
            None,
            timeout,
            server_pid,
        )?;
        let client = end.client?;
        let mut endpoints = end
            .endpoints
            .with_client_cpu(client.cpu_s, client.cpu_split);
        endpoints.client.quic = client.report.quic;
        (
            own_fetch_record(&client.report)?,
            crate::peer::quiclab_record(cc),
            endpoints,
            end.fidelity,
        )
    } else if run.client == Client::Chromium {
        fetch_with_chromium(run, running, work, (server, path), timeout, server_pid)?
    } else {
        let key_log = running.lab.key_log.clone();
        let setup = quiclab_peers::client::FetchSetup {
            work: work.path(),
            proto: run.proto,
            server,
            path,
            size: run.size,
            ca: &work.join("cert.pem"),
            tcp_cc: cc,
            keylog: key_log.as_deref(),
            timeout,
        };
        let other = crate::peer::run_client(running, work, run.client, &setup, server_pid)?;
        (other.fetch?, other.record, other.endpoints, other.fidelity)
    })
}

/// The download as a fetch() in headless Chromium (see [`fetch_with_any_client`]).
fn fetch_with_chromium(
    run: &BulkRun,
    running: &mut RunningLab,
    work: &WorkDir,
    (server, path): (SocketAddr, &str),
    timeout: Duration,
    server_pid: u32,
) -> Result<Fetched, RunError> {
    let config = ChildConfig::ChromiumFetch(crate::child::ChromiumFetchConfig {
        cert: work.join("cert.pem"),
        run: run.clone(),
        server,
        path: path.to_string(),
        timeout_ms: timeout.as_millis() as u64,
    });
    let namespace_cc = running.lab.tcp_default_cc.clone();
    // Chromium needs a few seconds to start on top of the download.
    let end = harness::run_client_to_end::<crate::child::ChromiumFetchReport>(
        running,
        work,
        "chromium-fetch",
        &config,
        timeout,
        Duration::from_secs(20),
        server_pid,
    )?;
    let report = end.client?;
    let endpoints = end
        .endpoints
        .with_client_cpu(report.cpu_s, report.cpu_split);
    Ok((
        crate::peer::chromium_fetch_result(&report.fetch, run.proto)?,
        crate::peer::chromium_record(
            Some(&report.fetch.browser_version),
            run.proto,
            &namespace_cc,
        ),
        endpoints,
        end.fidelity,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use quiclab_model::WorkloadResult;
    use quiclab_model::endpoint::EndpointReading;

    /// quiclab's own client's report as `quiclab bulk --proto h3 --size 2MB --rate 20mbit --rtt
    /// 40ms --keep DIR` recorded it (DIR/fetch.json), assembled without a lab: the figures that
    /// command printed (handshake 43.7 ms, ttfb 85.9 ms, total 1009.2 ms, goodput 16.574 Mbit/s).
    #[test]
    fn assembly_from_a_recorded_report() {
        let client: crate::child::FetchChildReport =
            serde_json::from_str(include_str!("../testdata/fetch-report-h3-2MB.json")).unwrap();
        let run = BulkRun::new(Protocol::H3, 2_000_000);
        let spec = LinkSpec::default();
        let measured = Measured {
            spec: &spec,
            fidelity: None,
            endpoints: EndpointReadings {
                client: EndpointReading::new(client.cpu_s, client.cpu_split, Err("no lab".into())),
                server: EndpointReading::new(0.2, None, Err("no lab".into())),
            },
            implementations: own_implementations(&run),
        };
        let r = own_result(&run, &client, None, &measured).unwrap();
        let near = |a: f64, b: f64, tol: f64| (a - b).abs() < tol;
        assert!(near(r.handshake_ms, 43.7, 0.05), "{}", r.handshake_ms);
        assert!(near(r.ttfb_ms, 85.9, 0.05), "{}", r.ttfb_ms);
        assert!(near(r.total_ms, 1009.2, 0.05), "{}", r.total_ms);
        assert!(near(r.goodput_mbps, 16.574, 0.0005), "{}", r.goodput_mbps);
        assert_eq!((r.bytes, r.verified), (2_000_000, Some(true)));
        // QUIC has no TCP connect; without the emulator the loss ratio is unknown: None, never 0.
        let values: std::collections::BTreeMap<_, _> = r.metric_values().into_iter().collect();
        assert_eq!(values["connect_ms"], None);
        assert_eq!(values["loss_ratio"], None);
        assert_eq!(values["cpu_server_s"], Some(0.2));
        assert!(r.failure().is_none());
        // The same report through the record other servers' downloads are assembled from: the
        // same download, timed from the handshake's end rather than the request.
        let other = run.result_of(&own_fetch_record(&client.report).unwrap(), &measured);
        assert_eq!((other.total_ms, other.bytes), (r.total_ms, r.bytes));
        assert!(near(other.goodput_mbps, r.goodput_mbps, 0.01));
        // A report without its request is a failed run, not an empty one.
        let mut empty = client.clone();
        empty.report.requests.clear();
        assert!(own_result(&run, &empty, None, &measured).is_err());
        assert!(own_fetch_record(&empty.report).is_err());
    }
}
