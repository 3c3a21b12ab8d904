//! A video run as data: the players, the ABR rule, the content as played, the player's settings
//! — built from the parameters once ([`build`], reading a content file through the reader the
//! shell passes) — and its result assembled from the client's report ([`VideoRun::assemble`],
//! pure).

use std::time::Duration;

use quiclab_link::input::ReadText;
use quiclab_link::spec::LinkSpec;
use quiclab_proto::options::{Protocol, StackOptions};
use quiclab_video::{AbrKind, Content, PlayerConfig, PlayerMix, SeekCheck, SegmentRecord};
use serde::{Deserialize, Serialize};

use crate::TimeSeries;
use crate::fec::FecResult;
use crate::fidelity::{AppliedSwitch, FidelityReport};
use crate::implementation::{Client, Server};
use crate::keys as k;
use crate::params::Params;
use crate::records::{FecLog, VideoReport};
use crate::switch::Timeline;
use crate::video::*;

use super::SwitchBehaviour;

/// What the video client reports: one report per player (each with its error, if any).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VideoClientReport {
    /// CLOCK_MONOTONIC of the start (ns): the players' clocks count from here.
    pub origin_ns: u64,
    pub players: Vec<VideoReport>,
    pub cpu_s: f64,
    /// The same split into user and system time.
    #[serde(default)]
    pub cpu_split: Option<crate::endpoint::CpuSplit>,
}

/// One video run (the video client receives it as it is).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VideoRun {
    pub mix: PlayerMix,
    pub abr: AbrKind,
    /// The content as played (already cut to the run's duration).
    pub content: Content,
    /// How the content was named (`bbb`, or a file).
    pub content_source: String,
    pub player: PlayerConfig,
    pub stack: StackOptions,
    pub ipv6: bool,
    /// Give up this long after the start (None: from the media to play, see [`VideoRun::limit`]).
    pub timeout: Option<Duration>,
    /// How the players answer network switches (used when the link has a switch schedule).
    pub switching: SwitchBehaviour,
    /// The program that serves the segments: quiclab's own, or another implementation serving
    /// them as files of the segments' sizes.
    pub server: Server,
    /// The player: quiclab's own, or AStream (the seed's player) as the reference.
    #[serde(default = "quiclab_client")]
    pub client: Client,
}

fn quiclab_client() -> Client {
    Client::Quiclab
}

/// The option names [`VideoRun::build`] blames, as scenario keys.
pub type OptionError = (&'static str, String);

impl VideoRun {
    /// The players, content and player settings of `p` (the video keys); an error names the
    /// key (`content`, `duration`, `connections`, `parallel`, …) and what is allowed.
    pub fn build(p: &Params, read: ReadText) -> Result<VideoRun, OptionError> {
        let mut mix = p.players().cloned().ok_or((
            "players",
            "a video run needs players, e.g. players = \"h3\"".to_string(),
        ))?;
        let abr = p.abr().unwrap_or(AbrKind::Basic);
        let live = p.bool(&k::LIVE);
        let source = p
            .text(&k::CONTENT)
            .unwrap_or(if live { "bbb-2s" } else { "bbb" })
            .to_string();
        let mut content = Content::builtin_or_load(&source, read).map_err(|e| ("content", e.0))?;
        if let Some(d) = p.duration(&k::VIDEO_DURATION) {
            let s = d.as_secs_f64();
            if s < content.segment_s() {
                return Err((
                    "duration",
                    format!(
                        "{s} s: shorter than one segment ({:.3} s)",
                        content.segment_s()
                    ),
                ));
            }
            content = content.truncated((s * 1e3).round() as u64);
        }
        let mut player = PlayerConfig::seed(live);
        if let Some(b) = p.duration(&k::BUFFER) {
            player.buffer_cap_s = b.as_secs_f64();
        }
        if let Some(policy) = p.seek_policy() {
            player.seek_policy = policy;
        }
        if let Some(check) = p.seek_check() {
            player.seek_check = check;
        }
        if let Some(poll) = p.duration(&k::POLL) {
            player.poll_s = poll.as_secs_f64();
        }
        if let Some(s) = p.seeks() {
            player.seeks = s.to_vec();
        }
        if player.seek_check == SeekCheck::AfterDownload && player.seeks.is_empty() {
            // A setting that changes nothing would read as a run with it.
            return Err((
                "seek_check",
                "after-download says when a seek is seen; this run has no seeks: give seek, or \
                 leave seek_check out"
                    .into(),
            ));
        }
        let connections = p.count(&k::CONNECTIONS).map(|n| n as u32);
        let parallel = p.count(&k::PARALLEL).map(|n| n as u32);
        let has_h1 = mix.players.iter().any(|p| p.proto == Protocol::H1);
        let has_multiplexed = mix.players.iter().any(|p| p.proto != Protocol::H1);
        if let Some(k) = connections {
            if has_multiplexed {
                return Err((
                    "connections",
                    format!(
                        "{k}: connections applies to h1 players (K TCP connections, one Range part \
                         each); h2 and h3 split a segment with parallel requests on one connection: \
                         use parallel"
                    ),
                ));
            }
            set_parts(&mut mix, k).map_err(|e| ("connections", e))?;
        }
        if let Some(k) = parallel {
            if has_h1 {
                return Err((
                    "parallel",
                    format!(
                        "{k}: parallel applies to h2 and h3 players (K Range requests at once on \
                         one connection); h1 has one request per connection: use connections"
                    ),
                ));
            }
            set_parts(&mut mix, k).map_err(|e| ("parallel", e))?;
        }
        let run = VideoRun {
            mix,
            abr,
            content,
            content_source: source,
            player,
            stack: StackOptions::default(),
            ipv6: false,
            timeout: None,
            switching: SwitchBehaviour::default(),
            server: Server::Quiclab,
            client: Client::Quiclab,
        };
        run.validate()?;
        Ok(run)
    }

    /// What the run is compared as: the player mix (`h1/4+h3`).
    pub fn contender(&self) -> String {
        self.mix.label()
    }

    /// A rough duration (an estimate): playback runs in real time; start-up and each seek add
    /// about a segment's download.
    pub fn estimate_s(&self) -> f64 {
        self.media_to_play_s() + (1 + self.player.seeks.len()) as f64 * 1.5 + 1.0
    }

    /// Media the player will play (s): the content less what the seeks skip.
    pub fn media_to_play_s(&self) -> f64 {
        let mut pos = 0.0;
        let mut played = 0.0;
        for s in &self.player.seeks {
            played += (s.at_s - pos).max(0.0);
            pos = s.to_s;
        }
        played + (self.content.duration_s() - pos).max(0.0)
    }

    /// Refuses what cannot run; the messages name the option.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        self.player.validate(&self.content).map_err(|e| {
            let key = if e.starts_with("a buffer") {
                "buffer"
            } else {
                "seek"
            };
            (key, e)
        })?;
        if self.content.segments() == 0 {
            return Err(("content", "the content has no segments".into()));
        }
        for (i, p) in self.mix.players.iter().enumerate() {
            self.switching
                .on_switch
                .check(p.proto)
                .map_err(|e| ("on_switch", format!("player {} {}: {e}", i + 1, p.label())))?;
        }
        // A whole-transfer limit of TCP segment fetches; without a TCP player it would do nothing.
        if let Some(t) = self.switching.transfer_timeout
            && self.mix.players.iter().all(|p| p.proto == Protocol::H3)
        {
            return Err((
                "transfer_timeout",
                format!(
                    "{} s: the whole-transfer timeout applies to TCP players (h1, h2), and {} has none",
                    t.as_secs_f64(),
                    self.mix.label()
                ),
            ));
        }
        if self.server != Server::Quiclab {
            let def = self.server.def();
            if let Some(p) = self
                .mix
                .players
                .iter()
                .find(|p| !def.protocols.contains(&p.proto))
            {
                return Err((
                    "server",
                    format!(
                        "{} serves {} only; player {} is {}",
                        def.name,
                        def.protocols
                            .iter()
                            .map(|p| p.as_str())
                            .collect::<Vec<_>>()
                            .join(" and "),
                        p.label(),
                        p.proto
                    ),
                ));
            }
        }
        if self.client == Client::Astream {
            self.validate_astream()?;
        }
        // FEC applies to the h3 players; without one it would silently do nothing.
        if self.stack.fec.is_some() && !self.mix.players.iter().any(|p| p.proto == Protocol::H3) {
            return Err((
                "fec",
                format!(
                    "FEC is quiclab's XOR FEC under QUIC and applies to h3 players, but {} has none",
                    self.mix.label()
                ),
            ));
        }
        Ok(())
    }

    /// What AStream can run: one player over h1 with whole segments, from quiclab's server (which
    /// speaks AStream's MPD), without seeks (upstream AStream has none).
    fn validate_astream(&self) -> Result<(), (&'static str, String)> {
        let refuse = |key: &'static str, why: &str| Err((key, format!("client astream: {why}")));
        match self.mix.players.as_slice() {
            [p] if p.proto == Protocol::H1 && p.parts == 1 => {}
            [p] if p.proto == Protocol::H1 => {
                return refuse(
                    "connections",
                    "AStream fetches whole segments over one connection at a time",
                );
            }
            _ => {
                return refuse(
                    "players",
                    "AStream is one player over HTTP/1.1 (players = \"h1\")",
                );
            }
        }
        if self.server != Server::Quiclab {
            return refuse("server", "AStream's MPD is served by quiclab's own server");
        }
        if !self.player.seeks.is_empty() {
            return refuse("seek", "AStream (upstream) has no seeks");
        }
        quiclab_video::astream::check(&self.content).map_err(|e| ("content", e))
    }

    /// The time limit: the media to play, plus half of it and a minute for start-up, stalls and
    /// seeks. A player still playing then has stalled for long: the run fails with its partial
    /// metrics kept.
    pub fn limit(&self) -> Duration {
        if let Some(t) = self.timeout {
            return t;
        }
        Duration::from_secs_f64(self.media_to_play_s() * 1.5 + 60.0)
    }
}

impl VideoRun {
    /// Each player's outcome of each network switch; player 1's are the result's `switches`.
    /// The switch instants also go into the time series (`network_switch`).
    pub fn add_switch_outcomes(
        &self,
        result: &mut VideoResult,
        client: &VideoClientReport,
        schedule: &quiclab_link::switch::SwitchSchedule,
        applied: &[AppliedSwitch],
        epoch_ns: u64,
    ) {
        let t0 = client.origin_ns.saturating_sub(epoch_ns) as f64 / 1e9;
        for (p, r) in result.players.iter_mut().zip(&client.players) {
            let Some(log) = &r.switching else { continue };
            // Each request as the player saw it: from the request to the segment's arrival.
            let segments: Vec<(f64, f64, u64)> = r
                .segments
                .iter()
                .map(|s| (t0 + s.request_s, t0 + s.request_s + s.download_s, s.bytes))
                .collect();
            let complete = r.error.is_none();
            let timeline = Timeline::of_player(log, &segments, complete);
            p.network_switches = Some(crate::switch::outcomes(schedule, applied, &timeline));
            // A player that never recovered names the switch it died at: the first one after
            // its last byte.
            if let Some(e) = p.error.as_mut().map(|e| e.text_mut()) {
                let last_byte = log.progress.last().map_or(0.0, |b| b.0);
                if let Some(sw) = schedule
                    .switches()
                    .iter()
                    .find(|s| s.at as f64 / 1e9 >= last_byte - crate::switch::DIED_TOLERANCE_S)
                {
                    e.push_str(&format!(
                        "; no byte since the switch {} → {} at {:.1} s",
                        sw.from,
                        sw.to,
                        sw.at as f64 / 1e9
                    ));
                }
            }
            p.connections = Some(log.connections.clone());
            p.migrations = Some(log.migrations.clone());
        }
        result.on_switch = Some(self.switching.on_switch.to_string());
        let first = result
            .players
            .first()
            .and_then(|p| p.network_switches.clone())
            .unwrap_or_default();
        result.network_switches = Some(first);
        // Switch instants as a 0/1 step series; the report marks them across the figures.
        let end = result
            .series
            .iter()
            .flat_map(|s| s.points.last().map(|p| p.0))
            .fold(0.0, f64::max);
        result.series.push(crate::switch::switch_marks(
            schedule.switches().iter().map(|sw| sw.at as f64 / 1e9),
            end,
        ));
    }

    pub fn assemble(
        &self,
        client: &VideoClientReport,
        fec_log: Option<&FecLog>,
        fidelity: Option<FidelityReport>,
        spec: &LinkSpec,
        server_cpu: f64,
        epoch_ns: u64,
    ) -> VideoResult {
        let players: Vec<PlayerResult> = self
            .mix
            .players
            .iter()
            .zip(&client.players)
            .enumerate()
            .map(|(i, (p, r))| {
                let mut pr = player_result(i, p, r);
                if let Some(log) = fec_log.filter(|_| p.proto == Protocol::H3) {
                    // The server's counters for every connection this player opened.
                    let in_cwnd = self.stack.fec.is_some_and(|f| f.in_cwnd);
                    pr.fec = Some(FecResult::of(
                        in_cwnd,
                        log.peer_ports(&r.local_ports),
                        r.fec,
                    ));
                }
                pr
            })
            .collect();
        let fec = FecResult::sum(players.iter().filter_map(|p| p.fec.as_ref()));
        let t0 = client.origin_ns.saturating_sub(epoch_ns) as f64 / 1e9;
        let series = players
            .iter()
            .zip(&client.players)
            .flat_map(|(p, r)| series_of(&p.label, r, t0))
            .collect();
        let bitrates: Vec<f64> = players
            .iter()
            .filter_map(|p| p.metrics.avg_bitrate_mbps)
            .collect();
        let several = players.len() >= 2 && bitrates.len() == players.len();
        let jain_bitrate = several.then(|| quiclab_flows::jain(&bitrates)).flatten();
        let bitrate_ratio_first_rest = several.then(|| {
            let rest = bitrates[1..].iter().sum::<f64>() / (bitrates.len() - 1) as f64;
            bitrates[0] / rest
        });
        let first = players.first();
        let m = first.map(|p| p.metrics.clone());
        VideoResult {
            proto: first.map_or(String::new(), |p| p.proto.clone()),
            parts: first.map_or(1, |p| p.parts),
            abr: self.abr.name().into(),
            mix: self.mix.label(),
            content: self.content_source.clone(),
            live: self.player.live,
            segment_s: self.content.segment_s(),
            buffer_s: self.player.buffer_cap_s,
            duration_s: self.content.duration_s(),
            seek_policy: self.player.seek_policy.name().into(),
            avg_bitrate_mbps: m.as_ref().and_then(|m| m.avg_bitrate_mbps),
            played_bitrate_mbps: m.as_ref().and_then(|m| m.played_bitrate_mbps),
            rebuffer_rate: m.as_ref().and_then(|m| m.rebuffer_rate),
            rebuffer_rate_with_seeks: m.as_ref().and_then(|m| m.rebuffer_rate_with_seeks),
            rebuffer_s: m.as_ref().map_or(0.0, |m| m.rebuffer_s),
            stalls: m.as_ref().map_or(0, |m| m.stalls),
            startup_s: m.as_ref().and_then(|m| m.startup_s),
            seek_waits_s: m.as_ref().map_or(Vec::new(), |m| m.seek_waits_s.clone()),
            mean_seek_wait_s: first.and_then(|p| p.mean_seek_wait_s),
            bitrate_switches: m.as_ref().map_or(0, |m| m.bitrate_switches),
            network_switches: None,
            on_switch: None,
            fec,
            segments: m.as_ref().map_or(0, |m| m.segments),
            jain_bitrate,
            bitrate_ratio_first_rest,
            players,
            cpu_client_s: client.cpu_s,
            cpu_server_s: server_cpu,
            link: spec.describe(),
            fidelity,
            // Set by the caller, who started the server.
            server: None,
            client: None,
            endpoints: None,
            series,
        }
    }
}

/// Gives every player of `mix` K parts (a player spec's own `/K` must agree).
fn set_parts(mix: &mut PlayerMix, k: u32) -> Result<(), String> {
    for p in &mut mix.players {
        if p.parts != 1 && p.parts != k {
            return Err(format!(
                "{k}: the player {} names its own K ({})",
                p.label(),
                p.parts
            ));
        }
        *p = quiclab_video::PlayerSpec {
            cc: p.cc,
            ..quiclab_video::PlayerSpec::new(p.proto, k)?
        };
    }
    Ok(())
}

fn player_result(i: usize, p: &quiclab_video::PlayerSpec, r: &VideoReport) -> PlayerResult {
    let waits = &r.metrics.seek_waits_s;
    PlayerResult {
        index: i + 1,
        label: format!("{} {}", i + 1, p.label()),
        proto: p.proto.to_string(),
        parts: p.parts,
        metrics: r.metrics.clone(),
        mean_seek_wait_s: (!waits.is_empty())
            .then(|| waits.iter().sum::<f64>() / waits.len() as f64),
        local_ports: r.local_ports.clone(),
        connected_s: r.connected_s,
        segment_log: r.segments.clone(),
        events: r.events.clone(),
        error: r.error.clone(),
        network_switches: None,
        connections: None,
        migrations: None,
        fec: None,
    }
}

/// A player's series on the emulator's clock: buffer level, chosen bitrate and throughput per
/// segment, and the three kinds of playback interruption as 0/1 steps (`startup`, `stall`,
/// `seek_wait`), which the report draws as shaded spans rather than panels.
fn series_of(label: &str, r: &VideoReport, t0: f64) -> Vec<TimeSeries> {
    let kept: Vec<&SegmentRecord> = r.segments.iter().filter(|s| !s.discarded).collect();
    let mut bitrate = Vec::new();
    for s in &kept {
        let t = t0 + s.request_s + s.download_s;
        if let Some(&(_, last)) = bitrate.last() {
            bitrate.push((t, last));
        }
        bitrate.push((t, s.bitrate_bps as f64 / 1e6));
    }
    // The player starts interrupted (startup); each event opens or closes one interruption.
    let mut startup = vec![(t0, 1.0)];
    let mut stall = vec![(t0, 0.0)];
    let mut seek_wait = vec![(t0, 0.0)];
    for e in &r.events {
        let t = t0 + e.t_s;
        let (steps, from, to) = match e.kind.as_str() {
            "start" => (&mut startup, 1.0, 0.0),
            "stall" => (&mut stall, 0.0, 1.0),
            "resume" => (&mut stall, 1.0, 0.0),
            "seek" => (&mut seek_wait, 0.0, 1.0),
            "seek_done" => (&mut seek_wait, 1.0, 0.0),
            _ => continue,
        };
        steps.push((t, from));
        steps.push((t, to));
    }
    let end = r.buffer_points.last().map_or(t0, |&(t, _)| t0 + t);
    for steps in [&mut startup, &mut stall, &mut seek_wait] {
        let last = steps.last().map_or(0.0, |p| p.1);
        steps.push((end, last));
    }
    let mut out = vec![
        TimeSeries {
            name: format!("buffer_s@{label}"),
            unit: "s".into(),
            points: r.buffer_points.iter().map(|&(t, b)| (t0 + t, b)).collect(),
        },
        TimeSeries {
            name: format!("bitrate_mbps@{label}"),
            unit: "Mbit/s".into(),
            points: bitrate,
        },
        TimeSeries {
            name: format!("segment_throughput_mbps@{label}"),
            unit: "Mbit/s".into(),
            points: kept
                .iter()
                .map(|s| (t0 + s.request_s + s.download_s, s.throughput_mbps))
                .collect(),
        },
    ];
    for (name, points) in [
        ("startup", startup),
        ("stall", stall),
        ("seek_wait", seek_wait),
    ] {
        out.push(TimeSeries {
            name: format!("{name}@{label}"),
            unit: String::new(),
            points,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::WorkloadResult;
    use std::collections::BTreeMap;

    /// A run and its client's report as `quiclab video --proto h3 --proto h1 --duration 12s
    /// --rate 5mbit --rtt 40ms --keep DIR` recorded them (DIR/video.config.json's `run`,
    /// DIR/video.json): assembled without a lab, the result is what that command printed.
    #[test]
    fn assembly_from_a_recorded_report() {
        let run: VideoRun =
            serde_json::from_str(include_str!("../../testdata/video-run-h3-h1-12s.json")).unwrap();
        let client: VideoClientReport =
            serde_json::from_str(include_str!("../../testdata/video-report-h3-h1-12s.json"))
                .unwrap();
        let spec = LinkSpec::default();
        // The emulator's epoch 1 s before the players' start.
        let epoch_ns = client.origin_ns - 1_000_000_000;
        let r = run.assemble(&client, None, None, &spec, 0.25, epoch_ns);
        assert_eq!(r.players.len(), 2);
        assert_eq!(r.mix, "h3+h1");
        // What the command printed for player 1: 3 segments, 0.088 Mbit/s, startup 0.16 s.
        assert_eq!((r.segments, r.stalls), (3, 0));
        let bitrate = r.avg_bitrate_mbps.unwrap();
        assert!((bitrate - 0.087504).abs() < 1e-9, "{bitrate}");
        assert!((r.startup_s.unwrap() - 0.163324022).abs() < 1e-9);
        // Both players fetched the same levels: a fair split, no effect.
        let values: BTreeMap<_, _> = r.metric_values().into_iter().collect();
        assert_eq!(values["jain_bitrate"], Some(1.0));
        assert_eq!(values["bitrate_ratio_first_rest"], Some(1.0));
        assert_eq!(values["cpu_server_s"], Some(0.25));
        // Without switches and FEC their metrics are unknown, never 0.
        assert_eq!(values["mean_interruption_s"], None);
        assert_eq!(values["fec_rebuilt"], None);
        assert!(r.failure().is_none());
        // Series are on the emulator's clock: the players started 1 s into it.
        let first = r.series.iter().flat_map(|s| &s.points).map(|p| p.0);
        assert!(first.fold(f64::INFINITY, f64::min) >= 1.0);
    }
}
