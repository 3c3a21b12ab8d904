//! `flows`: N flows sharing the one emulated bottleneck (seed 000 S1/S2, seed 002). One server
//! process (a port per distinct stack configuration), one client process running every flow on one
//! clock. The run is quiclab-model's ([`FlowsRun`]: built, sent to the client child as it is,
//! read by stacks' flow client); its result is assembled there too ([`FlowsRun::assemble`]). This
//! module starts the processes and collects what they report.

pub use quiclab_model::flows::*;
pub use quiclab_model::run::flows::*;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use quiclab_lab::{LinkSpec, RunningLab, Side};

use crate::child::{ChildConfig, FlowsClientConfig};
use crate::harness::{self, RunError, WorkDir};
use crate::{Outcome, TimeSeries, Workload};

impl Workload for FlowsRun {
    type Output = FlowsResult;

    fn name(&self) -> &'static str {
        "flows"
    }

    fn contender(&self) -> String {
        FlowsRun::contender(self)
    }

    fn estimate_seconds(&self, spec: &LinkSpec) -> f64 {
        FlowsRun::estimate_seconds(self, spec)
    }

    fn time_limit(&self, spec: &LinkSpec) -> Duration {
        self.limit(spec)
    }

    fn run(
        &self,
        running: &mut RunningLab,
        keep: Option<&Path>,
    ) -> Result<Outcome<FlowsResult>, RunError> {
        self.validate()
            .map_err(|(k, e)| RunError::Failed(format!("{k}: {e}")))?;
        let spec = running.spec.clone();
        // CLOCK_MONOTONIC at the emulator's t = 0: the time base of every series.
        let epoch_ns = quiclab_stacks::cwnd::monotonic_ns().saturating_sub(running.clock());
        let work = WorkDir::new(keep, "flows")?;
        let lab = &running.lab;
        harness::write_certificate(lab, &work)?;
        let (ports, port_of_flow) = self.layout();
        let mut serve = harness::serve_config(lab, &work, ports[0].1);
        serve.extra_ports = ports[1..].to_vec();
        // The server samples every connection's window (every 5 ms): the flows' cwnd variation is a
        // metric of every run, and a kept run's series.
        serve.cwnd_log = Some(work.join("cwnd.csv"));
        let server_pid = harness::start_server(lab, &work, serve)?;
        let server_ip: IpAddr = if self.ipv6 {
            lab.address_v6(Side::Server).into()
        } else {
            lab.address_v4(Side::Server).into()
        };
        let limit = self.limit(&spec);
        // The run itself goes to the client: each flow's server port is the one thing the lab adds.
        let config = ChildConfig::FlowsClient(FlowsClientConfig {
            cert: work.join("cert.pem"),
            run: self.clone(),
            servers: port_of_flow
                .iter()
                .map(|&port| SocketAddr::new(server_ip, port))
                .collect(),
            timeout_ms: limit.as_millis() as u64,
        });
        let end = harness::run_client_to_end::<FlowsClientReport>(
            running,
            &work,
            "flows",
            &config,
            limit,
            Duration::from_secs(10),
            server_pid,
        )?;
        let (server_cpu, fidelity) = (end.endpoints.server_cpu_s(), end.fidelity);
        let client = end.client?;
        let endpoints = end
            .endpoints
            .with_client_cpu(client.cpu_s, client.cpu_split);
        let cwnd_csv = std::fs::read_to_string(work.join("cwnd.csv")).ok();
        let fec_log = self
            .stack
            .fec
            .map(|_| harness::server_fec(&work).unwrap_or_default());
        let mut result = self.assemble(
            &client,
            fec_log.as_ref(),
            fidelity.clone(),
            &spec,
            server_ip,
            server_cpu,
            epoch_ns,
            cwnd_csv.as_deref(),
        );
        result.set_endpoints(&endpoints);
        Ok(Outcome { result, fidelity })
    }

    fn time_series(&self, out: &Outcome<FlowsResult>) -> Vec<TimeSeries> {
        out.result.series.clone()
    }
}
