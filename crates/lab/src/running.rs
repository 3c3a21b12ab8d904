//! A lab with its emulator running: what every command that measures something starts from.

use std::path::PathBuf;

use anyhow::Result;

use crate::capture::CaptureConfig;
use crate::emulator::{Emulator, EmulatorConfig, FidelityReport, LaneSnapshot, SchedulerOptions};
use crate::link_spec::LinkSpec;
use crate::switcher::{AppliedSwitch, Switcher};
use crate::topology::{Lab, LabOptions};
use crate::topology::{Side, client_addresses};
use quiclab_link::LinkOptions;
use quiclab_link::switch::AddressGate;

pub struct RunningLab {
    // Field order matters: the emulator (which holds duplicates of the TUN fds) stops before the lab
    // tears its namespaces down.
    emulator: Option<Emulator>,
    /// Carries out the link's network switches (client addresses), if it has any.
    switcher: Option<Switcher>,
    pub lab: Lab,
    pub spec: LinkSpec,
}

impl RunningLab {
    /// A fresh lab with its emulator running for `spec`, with the lab and scheduler settings of
    /// `options` (the LINK OPTIONS of a command or a scenario run) and an optional packet log.
    pub fn start_for(
        options: &LinkOptions,
        spec: &LinkSpec,
        log: Option<PathBuf>,
        capture: Option<CaptureConfig>,
    ) -> Result<RunningLab> {
        let lab = LabOptions {
            tcp_congestion_control: options.tcp_cc.clone(),
            steer_receive: options.steering.resolve(spec.wants_receive_steering()),
            // A CE mark rewrites one packet's header: offload's segments share theirs.
            offload: options.offload.resolve(spec.wants_offload()) && !spec.ecn(),
            tcp_ecn: spec.ecn(),
            tcp_slow_start_after_idle: options.tcp_slow_start_after_idle,
            tcp_rack: options.tcp_rack,
            tcp_rmem: options.tcp_rmem,
            tcp_wmem: options.tcp_wmem,
            client_cpu: options.client_cpu,
            server_cpu: options.server_cpu,
            ..Default::default()
        };
        let scheduler = SchedulerOptions::of(options);
        RunningLab::start(spec, &lab, scheduler, log, capture)
    }

    /// With `capture`, every command of the lab logs its TLS/QUIC secrets to a key log of the
    /// lab's own (under `STATE_DIR`), embedded in the capture when the emulator stops.
    pub fn start(
        spec: &LinkSpec,
        options: &LabOptions,
        scheduler: SchedulerOptions,
        log: Option<PathBuf>,
        capture: Option<CaptureConfig>,
    ) -> Result<RunningLab> {
        let mut lab = Lab::create(options)?;
        if capture.is_some() {
            let path = PathBuf::from(crate::topology::STATE_DIR).join(format!("{}.keylog", lab.id));
            // Created empty and ours: the stacks append to it.
            quiclab_outputs::create_in_claimed(&path)?;
            lab.key_log = Some(path);
        }
        let (uplink, downlink) = spec.direction_configs(0);
        let desc = spec.describe();
        let mut log_header = vec![
            format!("lab: {}", lab.id),
            format!("uplink: {}", desc.uplink),
            format!("downlink: {}", desc.downlink),
            format!("seed: {}", desc.seed),
            format!("tun_compensation_us: {}", desc.tun_compensation_us),
        ];
        let gate = spec.switch.as_ref().map(|schedule| {
            for sw in schedule.switches() {
                log_header.push(format!(
                    "switch: t_us={} epoch={} from={} to={}",
                    sw.at / 1000,
                    sw.epoch,
                    sw.from,
                    sw.to
                ));
            }
            AddressGate::new(schedule, |k| {
                let (v4, v6) = client_addresses(k);
                vec![v4.into(), v6.into()]
            })
        });
        let emulator = Emulator::start(
            &lab,
            EmulatorConfig {
                uplink,
                downlink,
                scheduler,
                log,
                log_header,
                gate,
                capture,
            },
        )?;
        let switcher = match &spec.switch {
            Some(schedule) => Some(Switcher::start(
                lab.namespace(Side::Client).name().to_string(),
                schedule,
                emulator.epoch(),
            )?),
            None => None,
        };
        Ok(RunningLab {
            emulator: Some(emulator),
            switcher,
            lab,
            spec: spec.clone(),
        })
    }

    /// The emulator clock (traces and profiles start at 0), in ns.
    pub fn clock(&self) -> u64 {
        self.emulator
            .as_ref()
            .map_or(0, |e| e.elapsed().as_nanos() as u64)
    }

    /// Marks the start of a phase of the emulator's lateness figures (see
    /// `Emulator::begin_phase`); nothing without an emulator.
    pub fn begin_phase(&self, name: &str) {
        if let Some(e) = &self.emulator {
            e.begin_phase(name);
        }
    }

    /// The emulator's live counters of (uplink, downlink).
    pub fn snapshot(&self) -> (LaneSnapshot, LaneSnapshot) {
        self.emulator
            .as_ref()
            .map(|e| e.snapshot())
            .unwrap_or_default()
    }

    /// A lab whose namespaces are joined by a plain veth pair: no emulator (see
    /// `LabOptions::direct_veth`).
    pub fn start_direct(options: &LabOptions) -> Result<RunningLab> {
        let options = LabOptions {
            direct_veth: true,
            steer_receive: false,
            ..options.clone()
        };
        Ok(RunningLab {
            emulator: None,
            switcher: None,
            lab: Lab::create(&options)?,
            spec: LinkSpec::default(),
        })
    }

    /// Whether packets cross the emulator (false for a direct veth lab).
    pub fn emulated(&self) -> bool {
        self.emulator.is_some()
    }

    /// Stops carrying out network switches and returns those made (empty without a schedule).
    pub fn stop_switches(&mut self) -> Vec<AppliedSwitch> {
        self.switcher.take().map(Switcher::stop).unwrap_or_default()
    }

    /// Stops the emulator and returns its fidelity report; the lab (namespaces) stays until dropped.
    pub fn stop_emulator(&mut self) -> Result<FidelityReport> {
        let (mut report, capture) = match self.emulator.take() {
            Some(e) => e.stop_capturing()?,
            None => anyhow::bail!("the emulator was already stopped"),
        };
        if let Some((writer, dropped)) = capture {
            let keys = self
                .lab
                .key_log
                .as_ref()
                .and_then(|p| std::fs::read(p).ok());
            let desc = self.spec.describe();
            let comment = format!(
                "quiclab lab {}; uplink: {}; downlink: {}; seed {}",
                self.lab.id, desc.uplink, desc.downlink, desc.seed
            );
            report.capture = Some(writer.finish(keys.as_deref(), &comment, dropped)?);
        }
        // With offload, the kernels' own counts of the emulator's writes: how many segments each
        // coalesced write carried (the emulator itself cannot see tun-rs's coalescing).
        for (d, to) in [
            (&mut report.uplink, crate::topology::Side::Server),
            (&mut report.downlink, crate::topology::Side::Client),
        ] {
            if let Some(o) = d.offload.as_mut()
                && let Ok((writes, _)) = self.lab.tun_packet_counters(to)
            {
                o.kernel_writes = Some(writes);
                o.segments_per_write =
                    (writes > 0).then(|| d.delivered_packets as f64 / writes as f64);
            }
        }
        Ok(report)
    }
}

impl Drop for RunningLab {
    /// A run that ended without stopping its emulator (an error on the way) still finishes its
    /// capture with the secrets the lab logged, before the lab and its key log go.
    fn drop(&mut self) {
        if self.emulator.is_some() {
            let _ = self.stop_emulator();
        }
    }
}
