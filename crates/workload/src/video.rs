//! `video`: DASH players through the emulated bottleneck (seed 004). The run is quiclab-model's
//! ([`VideoRun`], built and assembled there); this module starts the server and the client child
//! and collects what they report.

pub use quiclab_model::run::video::*;
pub use quiclab_model::video::*;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use quiclab_lab::{LinkSpec, RunningLab, Side};
use quiclab_proto::options::Protocol;

use crate::child::{ChildConfig, VideoClientConfig};
use crate::harness::{self, RunError, WorkDir};
use crate::{Outcome, TimeSeries, Workload};
use quiclab_model::implementation::{Client, ImplementationRecord, Server};
use quiclab_model::records::StopReason;

impl Workload for VideoRun {
    type Output = VideoResult;

    fn name(&self) -> &'static str {
        "video"
    }

    fn contender(&self) -> String {
        VideoRun::contender(self)
    }

    fn estimate_seconds(&self, _spec: &LinkSpec) -> f64 {
        self.estimate_s()
    }

    fn time_limit(&self, _spec: &LinkSpec) -> Duration {
        self.limit()
    }

    fn run(
        &self,
        running: &mut RunningLab,
        keep: Option<&Path>,
    ) -> Result<Outcome<VideoResult>, RunError> {
        self.validate()
            .map_err(|(k, e)| RunError::Failed(format!("{k}: {e}")))?;
        if self.client == Client::Astream {
            return run_astream(self, running, keep);
        }
        let spec = running.spec.clone();
        let epoch_ns = quiclab_stacks::cwnd::monotonic_ns().saturating_sub(running.clock());
        let work = WorkDir::new(keep, "video")?;
        let lab = &running.lab;
        harness::write_certificate(lab, &work)?;
        let server_ip: IpAddr = if self.ipv6 {
            lab.address_v6(Side::Server).into()
        } else {
            lab.address_v4(Side::Server).into()
        };
        // Another server's kernel TCP (its TCP players' connections): sampled from the kernel.
        let tcp_player = self.mix.players.iter().find(|p| p.proto != Protocol::H3);
        let (server_pid, server_record, tcp_sampler) =
            start_video_server(self, running, &work, server_ip, tcp_player)?;
        let limit = self.limit();
        let schedule = spec.switch.clone();
        let switching = schedule
            .as_ref()
            .map(|sch| crate::bulk::switch_plan(&self.switching, running, sch, self.ipv6));
        let config = ChildConfig::VideoClient(VideoClientConfig {
            cert: work.join("cert.pem"),
            run: self.clone(),
            server: SocketAddr::new(server_ip, 443),
            timeout_ms: limit.as_millis() as u64,
            switching,
        });
        let end = harness::run_client_to_end::<VideoClientReport>(
            running,
            &work,
            "video",
            &config,
            limit,
            Duration::from_secs(10),
            server_pid,
        )?;
        let applied = if schedule.is_some() {
            running.stop_switches()
        } else {
            Vec::new()
        };
        let (server_cpu, fidelity) = (end.endpoints.server_cpu_s(), end.fidelity);
        let client = end.client?;
        let endpoints = end
            .endpoints
            .with_client_cpu(client.cpu_s, client.cpu_split);
        if let (Some(sampler), Some(p)) = (tcp_sampler, tcp_player) {
            sampler
                .finish()
                .check(self.server, self.stack.cc_name(p.proto))?;
        }
        if work.is_kept() {
            keep_segments(&work, &client)?;
        }
        let fec_log = self
            .stack
            .fec
            .map(|_| harness::server_fec(&work).unwrap_or_default());
        let mut result = self.assemble(
            &client,
            fec_log.as_ref(),
            fidelity.clone(),
            &spec,
            server_cpu,
            epoch_ns,
        );
        result.server = Some(server_record);
        result.set_endpoints(&endpoints);
        if let Some(schedule) = &schedule {
            self.add_switch_outcomes(&mut result, &client, schedule, &applied, epoch_ns);
        }
        Ok(Outcome { result, fidelity })
    }

    fn time_series(&self, out: &Outcome<VideoResult>) -> Vec<TimeSeries> {
        out.result.series.clone()
    }
}

/// AStream (the seed's player) plays the content from quiclab's own server, over plain HTTP/1.1
/// in the client namespace; its logs become the run's player report. Its version, local changes
/// and configuration are the run's `client` record.
fn run_astream(
    run: &VideoRun,
    running: &mut RunningLab,
    keep: Option<&Path>,
) -> Result<Outcome<VideoResult>, RunError> {
    let failed = |e: anyhow::Error| RunError::Failed(format!("{e:#}"));
    let astream = quiclab_peers::astream::find().map_err(failed)?;
    let spec = running.spec.clone();
    let epoch_ns = quiclab_stacks::cwnd::monotonic_ns().saturating_sub(running.clock());
    let work = WorkDir::new(keep, "video")?;
    let lab = &running.lab;
    harness::write_certificate(lab, &work)?;
    let server_ip: IpAddr = if run.ipv6 {
        lab.address_v6(Side::Server).into()
    } else {
        lab.address_v4(Side::Server).into()
    };
    let tcp_cc = run.stack.cc_name(Protocol::H1);
    // AStream's sockets take the client namespace's congestion control.
    crate::peer::ensure_namespace_cc(lab, Side::Client, tcp_cc, "AStream")?;
    let mut serve = harness::serve_config(lab, &work, run.stack);
    serve.videos = vec![run.content.clone()];
    serve.plain_http_port = Some(quiclab_peers::astream::HTTP_PORT);
    let server_pid = harness::start_server(lab, &work, serve)?;
    let player_dir = quiclab_outputs::claim_subdir(work.path(), "astream", "astream")
        .map_err(anyhow::Error::from)?;
    let url = format!(
        "http://{}{}",
        SocketAddr::new(server_ip, quiclab_peers::astream::HTTP_PORT),
        quiclab_video::astream::mpd_path(&run.content)
    );
    let (program, args, env) = quiclab_peers::astream::command(&astream, &url, run.abr);
    let limit = run.limit();
    let config = ChildConfig::Exec(crate::child::ExecConfig {
        program,
        args,
        env,
        stdout: work.join("astream.stdout"),
        timeout_ms: limit.as_millis() as u64,
        cwd: Some(player_dir.clone()),
    });
    // AStream logs wall-clock times; the report counts from here on both clocks.
    let origin_ns = quiclab_stacks::cwnd::monotonic_ns();
    let origin_epoch_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let end: harness::ClientEnd<crate::child::ExecReport> = harness::run_client_to_end(
        running,
        &work,
        "client",
        &config,
        limit,
        Duration::from_secs(10),
        server_pid,
    )?;
    let exec = end.client?;
    let endpoints = end.endpoints.with_client_cpu(exec.cpu_s, exec.cpu_split);
    let stderr = std::fs::read_to_string(work.join("client.stderr")).unwrap_or_default();
    let tail = |t: &str| {
        let t = t.trim();
        let n = t.chars().count();
        t.chars().skip(n.saturating_sub(600)).collect::<String>()
    };
    let playback = quiclab_peers::astream::read(&player_dir, &run.content, origin_epoch_s);
    let error = if exec.timed_out {
        Some(StopReason::TimedOut {
            limit_s: limit.as_secs_f64(),
            detail: "AStream did not finish".into(),
        })
    } else if exec.exit_code != Some(0) {
        Some(StopReason::Failed {
            reason: format!(
                "AStream failed (exit {:?}, signal {:?}): {}",
                exec.exit_code,
                exec.signal,
                tail(&stderr)
            ),
        })
    } else {
        None
    };
    let playback = match (playback, &error) {
        (Ok(p), _) => p,
        (Err(e), None) => {
            return Err(RunError::Failed(format!(
                "AStream exited 0 but its logs do not read: {e}"
            )));
        }
        (Err(_), Some(StopReason::TimedOut { .. })) => {
            return Err(RunError::Timeout {
                limit,
                detail: "AStream did not finish and left no readable log".into(),
            });
        }
        (Err(e), Some(StopReason::Failed { reason })) => {
            return Err(RunError::Failed(format!("{reason}; its logs: {e}")));
        }
    };
    let report = VideoClientReport {
        origin_ns,
        players: vec![quiclab_model::records::VideoReport {
            metrics: playback.metrics,
            segments: playback.segments,
            events: playback.events,
            buffer_points: playback.buffer_points,
            local_ports: Vec::new(),
            connected_s: None,
            error,
            switching: None,
            fec: None,
        }],
        cpu_s: exec.cpu_s,
        cpu_split: exec.cpu_split,
    };
    let mut result = run.assemble(
        &report,
        None,
        end.fidelity.clone(),
        &spec,
        endpoints.server_cpu_s(),
        epoch_ns,
    );
    result.server = Some(crate::peer::quiclab_record(tcp_cc));
    result.client = Some(quiclab_peers::astream::record(&astream, tcp_cc));
    // AStream fetches over HTTP/1.1 (TCP).
    result.set_endpoints(&endpoints);
    Ok(Outcome {
        result,
        fidelity: end.fidelity,
    })
}

/// Another implementation serving the content: every segment of every representation as a
/// file of its size (sparse: the players count bytes, they do not read them), from the run's
/// own work directory.
fn start_other_server(
    run: &VideoRun,
    running: &RunningLab,
    work: &WorkDir,
    address: IpAddr,
) -> Result<(u32, ImplementationRecord), RunError> {
    let lab = &running.lab;
    let failed = |e: anyhow::Error| RunError::Failed(format!("{e:#}"));
    let site = quiclab_peers::content::Site::create(work.path(), "www").map_err(failed)?;
    for rep in 0..run.content.levels() {
        for n in 0..run.content.segments() {
            let size = run.content.size(rep, n).unwrap_or(0);
            site.add_sized_file(&run.content.path(rep, n), size)
                .map_err(failed)?;
        }
    }
    let h3 = run.mix.players.iter().find(|p| p.proto == Protocol::H3);
    let tcp = run.mix.players.iter().find(|p| p.proto != Protocol::H3);
    // Caddy takes the namespace's TCP congestion control; the others set their own.
    if let (Some(p), Server::Caddy) = (tcp, run.server) {
        crate::peer::ensure_namespace_cc(
            lab,
            quiclab_lab::Side::Server,
            run.stack.cc_name(p.proto),
            "Caddy",
        )?;
    }
    let started = crate::peer::start_server(
        lab,
        work,
        &crate::peer::ServerChoice {
            server: run.server,
            address,
            root: &site.root,
            quic_cc: h3.map(|p| run.stack.cc_name(p.proto)),
            tcp_cc: tcp.map_or("cubic", |p| run.stack.cc_name(p.proto)),
            qlog: work.is_kept(),
        },
    )?;
    Ok((started.pid, started.record))
}

/// The server: quiclab's own serving the content, or another implementation (its kernel TCP
/// sampled, for the TCP players' connections). Returns its PID, its record and the sampler.
fn start_video_server(
    run: &VideoRun,
    running: &RunningLab,
    work: &WorkDir,
    server_ip: IpAddr,
    tcp_player: Option<&quiclab_video::PlayerSpec>,
) -> Result<
    (
        u32,
        ImplementationRecord,
        Option<crate::peer_tcp::PeerTcpSampler>,
    ),
    RunError,
> {
    let lab = &running.lab;
    Ok(if run.server == Server::Quiclab {
        let mut serve = harness::serve_config(lab, work, run.stack);
        serve.videos = vec![run.content.clone()];
        if work.is_kept() {
            serve.cwnd_log = Some(work.join("cwnd.csv"));
        }
        let pid = harness::start_server(lab, work, serve)?;
        let cc = run
            .mix
            .players
            .iter()
            .map(|p| run.stack.cc_name(p.proto))
            .collect::<Vec<_>>()
            .join(", ");
        (pid, crate::peer::quiclab_record(&cc), None)
    } else {
        let (pid, record) = start_other_server(run, running, work, server_ip)?;
        let sampler = match tcp_player {
            Some(p) => crate::peer_tcp::sample_other_server(lab, work, run.server, p.proto)?,
            None => None,
        };
        (pid, record, sampler)
    })
}

/// A kept run's segment log (segments.json): part of its data, so one that cannot be written
/// fails the run.
fn keep_segments(work: &WorkDir, client: &VideoClientReport) -> Result<(), RunError> {
    // A kept run's files are part of its data: one that cannot be written fails the run.
    let segments = serde_json::to_vec_pretty(
        &client
            .players
            .iter()
            .map(|p| &p.segments)
            .collect::<Vec<_>>(),
    )
    .map_err(anyhow::Error::from)?;
    quiclab_outputs::write_in_claimed(&work.join("segments.json"), &segments)
        .map_err(anyhow::Error::from)?;
    Ok(())
}
