//! The I/O shell around the sans-IO link model: one dedicated scheduler thread serves both directions
//! (two lanes in one event loop, see `Scheduler`), moving IP packets from one TUN device to the
//! other, asking [`LinkModel`] when each packet is due and releasing it then, with microsecond
//! precision. A second thread, only with a packet log, writes the log.
//!
//! Why not tokio: its timers have a 1 ms granularity, coarser than a 1500-byte packet at 100 Mbit/s
//! (120 µs). The scheduler is a plain thread that sleeps in `ppoll(2)` (a high-resolution timeout,
//! with the thread's timer slack cut from 50 µs to 1 ns) until a learnt margin before the next
//! release (the machine's observed wake-up delay plus headroom, see `WakeMargin`; at least `spin`),
//! then spins the rest, within a spin budget of a tenth of wall time. It never spins while idle:
//! with nothing queued it blocks in `ppoll` on both ingress TUNs and a stop eventfd.
//!
//! Every release is timed against its schedule; the lateness distribution, the delivered rate while
//! backlogged and the drops by cause form the [`FidelityReport`] that every quiclab result carries.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use hdrhistogram::Histogram;
use quiclab_link::lane::{Arrived, Batching, Decision, DropCause, Headers};
use quiclab_link::switch::AddressGate;
use quiclab_link::wake::{Wake, WakeConfig, WakeState, next_wake};
use quiclab_link::{DirectionConfig, LinkModel, Nanos};
use serde::{Deserialize, Serialize};

pub use quiclab_model::fidelity::{DirectionFidelity, FidelityReport, PhaseLateness, SojournMs};

use crate::capture::{CaptureConfig, CaptureWriter, Captured, Fate};
use crate::offload::{Frame, OffloadIo};
use crate::os;
use crate::packet_log::{LogEvent, LogWriter};
use crate::process;
use crate::stats::distribution_us;
use crate::topology::{Lab, Side};

/// Largest packet the TUN can hand us (MTU 1500 plus headroom for a larger configured MTU).
const BUF_SIZE: usize = 65_536;
/// At most this many packets are read in one go before due packets are released again.
const READ_BURST: usize = 32;
/// Most packets in one batch (an offload lane's GSO packet carries at most 64 kB anyway; a plain
/// lane goes back to reading after this many writes).
const MAX_BATCH: usize = 128;
/// While the scheduler loop runs without sleeping, the ingress devices are polled this often: an
/// arrival is timestamped at most this late (plus the loop's own pass).
const POLL_INTERVAL: Nanos = 5_000;
/// SCHED_FIFO priority of the scheduler thread (`SchedulerOptions::realtime`).
const REALTIME_PRIORITY: i32 = 50;
/// Phases a caller can mark (`Emulator::begin_phase`); later marks fold into the last.
const MAX_PHASES: usize = 16;
/// Releases later than this count as "late" in `late_share` (the per-packet fidelity target).
pub const LATE_THRESHOLD_NS: Nanos = 100_000;

pub use quiclab_link::wire::log::Direction;

/// How the shell schedules.
#[derive(Debug, Clone)]
pub struct SchedulerOptions {
    /// Sleep until this long before a release, then spin. Covers the kernel's wake-up latency.
    pub spin: Duration,
    /// Release, together with a packet that is due, the packets due within this window after it
    /// (0 = every packet at its own time). Trades bounded earliness for fewer wake-ups of the
    /// receiving stack, like a NIC's interrupt coalescing; earliness is reported.
    pub batch_window: Duration,
    /// Within `APPROACH` (2 ms) of a release, sleep at most this long at a time (0 = sleep
    /// straight to the release; see `nap_timeout`).
    pub nap: Duration,
    /// With TUN offload (the lab's devices have it): segments due within this window after a due
    /// one are written together, each run of consecutive segments of one super-packet as one GSO
    /// packet (zero: each segment is written on its own). Ignored without offload.
    pub offload_window: Duration,
    /// Run the scheduler threads under SCHED_FIFO so that the stacks under test (on the same two cores)
    /// cannot delay a release. Falls back to normal scheduling (and says so) when refused.
    pub realtime: bool,
}

impl SchedulerOptions {
    /// The scheduler the host keys of `options` ask for (`--spin`, `--nap`, …).
    pub fn of(options: &quiclab_link::LinkOptions) -> SchedulerOptions {
        SchedulerOptions {
            spin: Duration::from_nanos(options.spin),
            batch_window: Duration::from_nanos(options.batch_window),
            realtime: options.realtime,
            nap: Duration::from_nanos(options.nap),
            offload_window: Duration::from_nanos(options.offload_window),
        }
    }
}

impl Default for SchedulerOptions {
    fn default() -> Self {
        SchedulerOptions {
            spin: Duration::from_micros(10),
            batch_window: Duration::ZERO,
            realtime: true,
            nap: Duration::from_nanos(quiclab_link::wake::NAP),
            offload_window: Duration::from_nanos(quiclab_link::options::DEFAULT_OFFLOAD_WINDOW),
        }
    }
}

/// Everything the emulator needs besides the lab.
pub struct EmulatorConfig {
    pub uplink: DirectionConfig,
    pub downlink: DirectionConfig,
    pub scheduler: SchedulerOptions,
    /// Per-packet event log (see docs/link.md for the format).
    pub log: Option<PathBuf>,
    /// Lines for the log's header (the link's description).
    pub log_header: Vec<String>,
    /// Network switches: only the current network's client address crosses (see
    /// `quiclab_link::switch::AddressGate`).
    pub gate: Option<AddressGate>,
    /// A pcapng capture of every packet arriving at the bottleneck (see `crate::capture`).
    pub capture: Option<CaptureConfig>,
}

/// Share of a lateness histogram (ns) above [`LATE_THRESHOLD_NS`].
pub fn late_share(h: &Histogram<u64>) -> f64 {
    if h.is_empty() {
        return 0.0;
    }
    let on_time = h.count_between(0, LATE_THRESHOLD_NS);
    1.0 - on_time as f64 / h.len() as f64
}

/// A running emulator.
pub struct Emulator {
    stop_fd: Arc<OwnedFd>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<SchedulerRun>>>,
    /// Uplink, downlink.
    live: Vec<Arc<LiveCounters>>,
    logger: Option<JoinHandle<Result<u64>>>,
    /// The capture writer thread; it hands the writer back to be finished with the run's keys.
    capturer: Option<JoinHandle<Result<CaptureWriter>>>,
    clock: os::Clock,
    /// The current phase (index into `phase_names`), read by the scheduler at each release.
    phase: Arc<AtomicUsize>,
    phase_names: std::sync::Mutex<Vec<String>>,
}

impl Emulator {
    /// Starts the scheduler thread (and the log writer) between the lab's TUN devices.
    pub fn start(lab: &Lab, config: EmulatorConfig) -> Result<Emulator> {
        let clock = os::Clock::start();
        let stop_fd = Arc::new(os::eventfd().context("eventfd")?);
        let stop = Arc::new(AtomicBool::new(false));
        let phase = Arc::new(AtomicUsize::new(0));

        let (log_tx, logger) = match &config.log {
            Some(path) => {
                let (tx, rx) = std::sync::mpsc::sync_channel::<LogEvent>(1 << 16);
                let writer = LogWriter::create(path, &clock, &config.log_header)?;
                let handle = std::thread::Builder::new()
                    .name("ql-log".into())
                    .spawn(move || write_log(writer, rx))?;
                (Some(tx), Some(handle))
            }
            None => (None, None),
        };
        let (capture_tx, capturer) = match &config.capture {
            Some(c) => {
                // Real timestamps: the Unix time of the emulator's epoch.
                let unix_ns = clock.epoch_unix_ns() as u64;
                let mut writer = CaptureWriter::create(c, unix_ns)?;
                let (tx, rx) = std::sync::mpsc::sync_channel::<Captured>(1 << 14);
                let handle = std::thread::Builder::new()
                    .name("ql-capture".into())
                    .spawn(move || {
                        for p in rx {
                            writer.write(&p)?;
                        }
                        Ok(writer)
                    })?;
                (Some(tx), Some(handle))
            }
            None => (None, None),
        };

        let mut lanes = Vec::new();
        let mut live = Vec::new();
        for (direction, dir_cfg, from, to) in [
            (Direction::Uplink, config.uplink, Side::Client, Side::Server),
            (
                Direction::Downlink,
                config.downlink,
                Side::Server,
                Side::Client,
            ),
        ] {
            let model = LinkModel::new(dir_cfg)
                .map_err(|e| anyhow::anyhow!("{} link: {e}", direction.label()))?;
            let (ingress, egress) = (lab.tun(from), lab.tun(to));
            let io = if ingress.tcp_gso() && egress.tcp_gso() {
                LaneIo::Offload(Box::new(OffloadIo::new(
                    ingress.clone(),
                    egress.clone(),
                    lab.mtu,
                    config.scheduler.offload_window.as_nanos() as Nanos,
                )))
            } else {
                LaneIo::Plain {
                    ingress: os::dup_cloexec(ingress.as_raw_fd()).context("dup of a TUN fd")?,
                    egress: os::dup_cloexec(egress.as_raw_fd()).context("dup of a TUN fd")?,
                }
            };
            let counters = Arc::new(LiveCounters::default());
            live.push(counters.clone());
            lanes.push(LaneState::new(
                direction,
                model,
                io,
                counters,
                config.gate.clone(),
            ));
        }
        let [up, down]: [LaneState; 2] = lanes.try_into().ok().expect("two lanes");
        let scheduler = Scheduler {
            lanes: [up, down],
            shared: Shared {
                clock,
                pool: Vec::new(),
                log: log_tx,
                log_dropped: 0,
                capture: capture_tx,
                capture_dropped: 0,
                batch_ns: config.scheduler.batch_window.as_nanos() as Nanos,
                phase: phase.clone(),
                phase_lateness: Vec::new(),
            },
            stop_fd: stop_fd.clone(),
            stop: stop.clone(),
            options: config.scheduler.clone(),
            pin_cpu: lab.emulator_cpu,
        };
        let thread = std::thread::Builder::new()
            .name("ql-scheduler".into())
            .spawn(move || scheduler.run())?;
        Ok(Emulator {
            stop_fd,
            stop,
            thread: Some(thread),
            live,
            logger,
            capturer,
            clock,
            phase,
            phase_names: std::sync::Mutex::new(vec!["start".into()]),
        })
    }

    /// Marks the start of a phase: releases from now on are also counted in its own lateness
    /// figures (`FidelityReport::phases`). Releases before the first mark belong to "start".
    pub fn begin_phase(&self, name: &str) {
        let mut names = self.phase_names.lock().unwrap_or_else(|e| e.into_inner());
        if names.len() < MAX_PHASES {
            names.push(name.to_string());
        } else if let Some(last) = names.last_mut() {
            last.push('+');
            last.push_str(name);
        }
        self.phase.store(names.len() - 1, Ordering::Relaxed);
    }

    /// The instant of the emulator clock's 0 (traces, profiles and switch schedules start here).
    pub fn epoch(&self) -> Instant {
        self.clock.epoch()
    }

    /// Time since the emulator started (its clock's epoch).
    pub fn elapsed(&self) -> Duration {
        Duration::from_nanos(self.clock.now())
    }

    /// The live counters of (uplink, downlink), readable while the emulator runs.
    pub fn snapshot(&self) -> (LaneSnapshot, LaneSnapshot) {
        (self.live[0].snapshot(), self.live[1].snapshot())
    }

    /// Stops the scheduler thread and returns the fidelity report (a capture is finished without
    /// secrets: see [`Emulator::stop_capturing`]).
    pub fn stop(self) -> Result<FidelityReport> {
        let (mut report, capture) = self.stop_capturing()?;
        if let Some((writer, dropped)) = capture {
            report.capture = Some(writer.finish(None, "quiclab", dropped)?);
        }
        Ok(report)
    }

    /// Stops the scheduler thread; returns the fidelity report and, with a capture, its writer
    /// (to be finished with the run's secrets) and the packets it missed.
    pub fn stop_capturing(mut self) -> Result<(FidelityReport, Option<(CaptureWriter, u64)>)> {
        self.signal_stop();
        let run = self
            .thread
            .take()
            .context("emulator already stopped")?
            .join()
            .map_err(|_| anyhow::anyhow!("the emulator thread panicked"))??;
        if let Some(h) = self.logger.take() {
            h.join()
                .map_err(|_| anyhow::anyhow!("the log writer panicked"))??;
        }
        let capture = match self.capturer.take() {
            Some(h) => Some((
                h.join()
                    .map_err(|_| anyhow::anyhow!("the capture writer panicked"))??,
                run.capture_dropped,
            )),
            None => None,
        };
        let wall = self.clock.now() as f64 / 1e9;
        let cpu = run.uplink.cpu_seconds;
        let names = self
            .phase_names
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let phases = if names.len() > 1 {
            names
                .into_iter()
                .enumerate()
                .filter_map(|(i, name)| {
                    let h = run.phase_lateness.get(i).filter(|h| !h.is_empty())?;
                    Some(PhaseLateness {
                        name,
                        lateness_us: distribution_us(h),
                        late_share: late_share(h),
                    })
                })
                .collect()
        } else {
            Vec::new()
        };
        let report = FidelityReport {
            late_share: late_share(&run.lateness),
            phases,
            lateness_us: distribution_us(&run.lateness),
            cpu_core_fraction: if wall > 0.0 { cpu / wall } else { 0.0 },
            wall_seconds: wall,
            log_events_dropped: run.log_dropped,
            uplink: run.uplink,
            downlink: run.downlink,
            capture: None,
        };
        Ok((report, capture))
    }

    fn signal_stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        os::eventfd_signal(&self.stop_fd);
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        if let Some(t) = self.thread.take() {
            self.signal_stop();
            let _ = t.join();
        }
        // A capture of a run that ended without `stop`: its packets are still worth a file
        // (without secrets), and its side file must not be left behind.
        if let Some(h) = self.capturer.take()
            && let Ok(Ok(writer)) = h.join()
        {
            let _ = writer.finish(
                None,
                "quiclab; the run ended before the emulator was stopped",
                0,
            );
        }
    }
}

fn write_log(mut writer: LogWriter, rx: Receiver<LogEvent>) -> Result<u64> {
    let mut n = 0;
    for ev in rx {
        writer.write(&ev)?;
        n += 1;
    }
    writer.finish()?;
    Ok(n)
}

fn new_histogram() -> Histogram<u64> {
    // Nanoseconds from 1 ns to 100 s, 3 significant digits.
    Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("valid histogram bounds")
}

/// A packet scheduled for release, its bytes held by the lane.
type Queued = quiclab_link::lane::Release<Held>;

/// Where a queued packet's bytes are.
enum Held {
    /// A plain lane's packet: `buf[..len]`.
    Owned(Vec<u8>),
    /// An offload lane's packet: segment `index` of a frame read from the TUN (shared by the
    /// frame's segments until the last has left).
    Segment { frame: Arc<Frame>, index: usize },
}

/// A copy of a held packet's bytes (a segment's with its own headers), for the capture.
fn packet_bytes(held: &Held, len: usize) -> Vec<u8> {
    match held {
        Held::Owned(buf) => buf[..len].to_vec(),
        Held::Segment { frame, index } => frame
            .run_frame(*index, *index)
            .split_off(crate::offload::PACKET_OFFSET),
    }
}

/// A packet's headers (a segment's are its frame's), for flow keys and addresses.
fn headers(held: &Held, len: usize) -> &[u8] {
    match held {
        Held::Owned(buf) => &buf[..len],
        Held::Segment { frame, .. } => frame.packet(),
    }
}

/// Returns a packet's buffer to the pool it came from (a frame's, once its last segment has left).
fn recycle(io: &mut LaneIo, shared: &mut Shared, held: Held) {
    match (held, io) {
        (Held::Owned(buf), _) => shared.pool.push(buf),
        (Held::Segment { frame, .. }, LaneIo::Offload(o)) => {
            if let Ok(frame) = Arc::try_unwrap(frame) {
                o.recycle(frame);
            }
        }
        (Held::Segment { .. }, LaneIo::Plain { .. }) => {}
    }
}

/// How a lane talks to its TUN devices.
enum LaneIo {
    /// One packet per read and per write.
    Plain { ingress: OwnedFd, egress: OwnedFd },
    /// Super-packets split on reading, releases coalesced on writing (`crate::offload`).
    Offload(Box<OffloadIo>),
}

/// Counters of one direction that other threads can read while the emulator runs (to measure one
/// phase of an experiment: take a snapshot before and after).
#[derive(Debug, Default)]
struct LiveCounters {
    delivered_packets: AtomicU64,
    delivered_bytes: AtomicU64,
    backlogged_bytes: AtomicU64,
    backlogged_ns: AtomicU64,
}

/// A reading of one direction's live counters.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct LaneSnapshot {
    pub delivered_packets: u64,
    pub delivered_bytes: u64,
    pub backlogged_bytes: u64,
    pub backlogged_ns: u64,
}

impl LaneSnapshot {
    /// Delivered rate while backlogged between two snapshots (None if never backlogged).
    pub fn backlogged_rate_since(&self, earlier: &LaneSnapshot) -> Option<f64> {
        let ns = self.backlogged_ns.saturating_sub(earlier.backlogged_ns);
        let bytes = self
            .backlogged_bytes
            .saturating_sub(earlier.backlogged_bytes);
        (ns > 0).then(|| bytes as f64 * 8.0 * 1e9 / ns as f64)
    }
}

impl LiveCounters {
    fn snapshot(&self) -> LaneSnapshot {
        LaneSnapshot {
            delivered_packets: self.delivered_packets.load(Ordering::Relaxed),
            delivered_bytes: self.delivered_bytes.load(Ordering::Relaxed),
            backlogged_bytes: self.backlogged_bytes.load(Ordering::Relaxed),
            backlogged_ns: self.backlogged_ns.load(Ordering::Relaxed),
        }
    }
}

/// One direction inside the scheduler thread: its model, its TUN fds, its queue and its figures.
struct LaneState {
    direction: Direction,
    /// The link model, the packets a queue discipline holds and the release queue (sans-IO).
    link: quiclab_link::lane::Lane<Held>,
    io: LaneIo,
    lateness: Histogram<u64>,
    earliness: Histogram<u64>,
    delivered_packets: u64,
    delivered_bytes: u64,
    write_errors: u64,
    /// The largest UDP payload that arrived (see `DirectionFidelity::largest_udp_payload`).
    largest_udp_payload: Option<u64>,
    last_release: Option<Nanos>,
    backlogged_bytes: u64,
    backlogged_ns: u64,
    live: Arc<LiveCounters>,
    /// The batch being written and (offload) its write results, kept between releases (no
    /// allocation per batch).
    batch: Vec<Queued>,
    written: Vec<bool>,
    /// Marks the discipline asked for that could not be written (a segment of an offload frame
    /// shares its headers; the lab keeps offload off when ECN is on, so this stays 0).
    marks_not_applied: u64,
}

/// Shared by both lanes: buffers, the clock, the log.
struct Shared {
    clock: os::Clock,
    /// Buffers of the plain lanes (an offload lane keeps its own, of its own size).
    pool: Vec<Vec<u8>>,
    log: Option<SyncSender<LogEvent>>,
    log_dropped: u64,
    capture: Option<SyncSender<Captured>>,
    /// Packets the capture writer could not take (its queue was full).
    capture_dropped: u64,
    /// Batch window in ns (see `SchedulerOptions::batch_window`).
    batch_ns: Nanos,
    /// The caller's current phase and the lateness of each phase's releases.
    phase: Arc<AtomicUsize>,
    phase_lateness: Vec<Histogram<u64>>,
}

impl Shared {
    fn record_phase_lateness(&mut self, late: Nanos) {
        let i = self.phase.load(Ordering::Relaxed).min(MAX_PHASES - 1);
        while self.phase_lateness.len() <= i {
            self.phase_lateness.push(new_histogram());
        }
        self.phase_lateness[i].record(late).ok();
    }

    fn now(&self) -> Nanos {
        self.clock.now()
    }

    /// Hands a packet to the capture, if there is one (never waiting for it).
    fn capture(
        &mut self,
        t: Nanos,
        direction: Direction,
        fate: Fate,
        packet: impl FnOnce() -> Vec<u8>,
    ) {
        if let Some(tx) = &self.capture
            && let Err(TrySendError::Full(_)) = tx.try_send(Captured {
                t,
                direction,
                fate,
                data: packet(),
            })
        {
            self.capture_dropped += 1;
        }
    }

    fn emit(&mut self, ev: LogEvent) {
        if let Some(tx) = &self.log
            && let Err(TrySendError::Full(_)) = tx.try_send(ev)
        {
            self.log_dropped += 1;
        }
    }
}

impl LaneState {
    fn new(
        direction: Direction,
        model: LinkModel,
        io: LaneIo,
        live: Arc<LiveCounters>,
        gate: Option<AddressGate>,
    ) -> LaneState {
        LaneState {
            direction,
            link: quiclab_link::lane::Lane::new(model).with_gate(gate),
            io,
            lateness: new_histogram(),
            earliness: new_histogram(),
            delivered_packets: 0,
            delivered_bytes: 0,
            write_errors: 0,
            largest_udp_payload: None,
            last_release: None,
            backlogged_bytes: 0,
            backlogged_ns: 0,
            live,
            batch: Vec::new(),
            written: Vec::new(),
            marks_not_applied: 0,
        }
    }

    /// Runs the link's queue discipline up to `now`: what it schedules may be marked (and is
    /// captured, at ingress, as it arrived), what it drops is captured, logged and recycled.
    fn settle(&mut self, shared: &mut Shared, now: Nanos) {
        let direction = self.direction;
        let (io, marks_not_applied) = (&mut self.io, &mut self.marks_not_applied);
        self.link.settle(now, |decision| match decision {
            Decision::Scheduled(r) => {
                shared.capture(r.arrival, direction, Fate::Forwarded, || {
                    packet_bytes(&r.packet, r.len)
                });
                if r.marked {
                    let applied = match &mut r.packet {
                        Held::Owned(buf) => quiclab_link::wire::mark_ce(&mut buf[..r.len]),
                        Held::Segment { .. } => false,
                    };
                    if !applied {
                        *marks_not_applied += 1;
                    }
                }
            }
            Decision::Dropped {
                at,
                arrival,
                len,
                packet,
            } => {
                shared.capture(arrival, direction, Fate::DroppedQueue, || {
                    packet_bytes(&packet, len)
                });
                shared.emit(LogEvent::DroppedAtDequeue {
                    t: at,
                    direction,
                    bytes: len as u32,
                });
                recycle(io, shared, packet);
            }
        });
    }

    fn ingress_fd(&self) -> RawFd {
        match &self.io {
            LaneIo::Plain { ingress, .. } => ingress.as_raw_fd(),
            LaneIo::Offload(o) => o.ingress_fd(),
        }
    }

    fn recycle(&mut self, shared: &mut Shared, held: Held) {
        recycle(&mut self.io, shared, held);
    }

    /// Writes every packet that is due to the egress TUN, timing each write against its schedule.
    /// Returns how many packets it wrote. What goes in a batch is the link lane's rule
    /// (`quiclab_link::lane::Lane::take_batch`): a plain lane's batch window, an offload lane's
    /// coalescing window. `companion`: the other direction is releasing now; an offload lane then
    /// also sends what falls in its coalescing window, so that both directions share one wake-up.
    fn release_due(&mut self, shared: &mut Shared, companion: bool) -> usize {
        let (window, offload) = match &self.io {
            LaneIo::Plain { .. } => (shared.batch_ns, false),
            LaneIo::Offload(o) => (o.window_ns(), true),
        };
        let batching = Batching {
            window,
            max: MAX_BATCH,
        };
        let mut batch = std::mem::take(&mut self.batch);
        let mut written = std::mem::take(&mut self.written);
        let mut released = 0;
        // A companion's release takes what is due within the window now, once.
        let mut early = if offload && companion { window } else { 0 };
        loop {
            let now = shared.now();
            let direction = self.direction;
            let taken = self
                .link
                .take_batch(now, early, batching, &mut batch, |r, _| {
                    shared.emit(LogEvent::DroppedSwitch {
                        t: now,
                        direction,
                        bytes: r.len as u32,
                    });
                    recycle(&mut self.io, shared, r.packet);
                });
            if !taken {
                break;
            }
            early = 0;
            match &mut self.io {
                LaneIo::Plain { egress, .. } => {
                    let fd = egress.as_raw_fd();
                    for p in batch.drain(..) {
                        let now = shared.now();
                        let ok = os::write(fd, &headers(&p.packet, p.len)[..p.len]);
                        self.account_release(shared, now, &p, ok);
                        self.recycle(shared, p.packet);
                        released += 1;
                    }
                }
                LaneIo::Offload(o) => {
                    let refs: Vec<(&Frame, usize)> = batch
                        .iter()
                        .map(|p| match &p.packet {
                            Held::Segment { frame, index } => (&**frame, *index),
                            Held::Owned(_) => unreachable!("an offload lane queues segments"),
                        })
                        .collect();
                    o.write(&refs, &mut written);
                    released += batch.len();
                    for (p, ok) in batch.drain(..).zip(written.drain(..)) {
                        self.account_release(shared, now, &p, ok);
                        self.recycle(shared, p.packet);
                    }
                }
            }
        }
        self.batch = batch;
        self.written = written;
        released
    }

    /// Timing, counters and the log of one packet released at `now` (`ok`: the write succeeded).
    fn account_release(&mut self, shared: &mut Shared, now: Nanos, p: &Queued, ok: bool) {
        let late = now.saturating_sub(p.deliver_at);
        if p.deliver_at > now {
            self.earliness.record(p.deliver_at - now).ok();
        } else {
            self.lateness.record(late.max(1)).ok();
            shared.record_phase_lateness(late.max(1));
        }
        if !ok {
            self.write_errors += 1;
            return;
        }
        self.delivered_packets += 1;
        self.delivered_bytes += p.len as u64;
        // A release the batch or offload window sent early counts at its scheduled time: the
        // window's earliness is by design (reported as `early_us`), and over a paced sender's
        // short backlogs — a few packets each — it would read as a rate above the configured one
        // (QUIC at 300 Mbit/s: +5 to +27 %). A late release counts at its real time, so a
        // shortfall of the shell still shows.
        let effective = now.max(p.deliver_at);
        if p.backlogged
            && let Some(prev) = self.last_release
        {
            self.backlogged_bytes += p.len as u64;
            self.backlogged_ns += effective.saturating_sub(prev);
        }
        self.last_release = Some(effective);
        self.publish();
        shared.emit(LogEvent::Delivered {
            t: now,
            direction: self.direction,
            bytes: p.len as u32,
            one_way: now.saturating_sub(p.arrival),
            lateness: late,
        });
    }

    /// Reads up to `READ_BURST` frames from the ingress TUN into the model (a super-packet is one
    /// frame of several packets). Returns how many frames.
    fn take_arrivals(&mut self, shared: &mut Shared) -> Result<usize> {
        let mut count = 0;
        while count < READ_BURST {
            match &mut self.io {
                LaneIo::Plain { ingress, .. } => {
                    let mut buf = shared.pool.pop().unwrap_or_else(|| vec![0u8; BUF_SIZE]);
                    let n = match os::read(ingress.as_raw_fd(), &mut buf[..BUF_SIZE]) {
                        Ok(n) if n > 0 => n,
                        Ok(_) => {
                            shared.pool.push(buf);
                            break;
                        }
                        Err(err) => {
                            shared.pool.push(buf);
                            if err.kind() != std::io::ErrorKind::WouldBlock
                                && err.kind() != std::io::ErrorKind::Interrupted
                            {
                                bail!(
                                    "{} link: reading the TUN device: {err}",
                                    self.direction.label()
                                );
                            }
                            break;
                        }
                    };
                    count += 1;
                    let arrival = shared.now();
                    self.admit(shared, arrival, Held::Owned(buf), n as usize);
                }
                LaneIo::Offload(o) => {
                    let got = o.read().with_context(|| {
                        format!("{} link: reading the TUN device", self.direction.label())
                    })?;
                    let Some(frame) = got else { break };
                    count += 1;
                    // Unsplittable: dropped and counted by the reader.
                    let Some(frame) = frame else { continue };
                    // The packets of one super-packet arrived together.
                    let arrival = shared.now();
                    let frame = Arc::new(frame);
                    for index in 0..frame.segments() {
                        let len = frame.segment_len(index);
                        let held = Held::Segment {
                            frame: frame.clone(),
                            index,
                        };
                        self.admit(shared, arrival, held, len);
                    }
                }
            }
        }
        Ok(count)
    }

    /// One arrived packet (`len` bytes, held in `held`) through the link model.
    fn admit(&mut self, shared: &mut Shared, arrival: Nanos, held: Held, len: usize) {
        let (direction, bytes) = (self.direction, len as u32);
        shared.emit(LogEvent::Arrival {
            t: arrival,
            direction,
            bytes,
        });
        let packet = match &held {
            Held::Owned(buf) => &buf[..len],
            Held::Segment { frame, .. } => frame.packet(),
        };
        if let Some(n) = quiclab_link::FlowKey::udp_payload_len(packet, len) {
            let n = n as u64;
            self.largest_udp_payload = Some(self.largest_udp_payload.map_or(n, |m| m.max(n)));
        }
        let headers = Headers::of(packet);
        match self.link.arrive(arrival, held, len, headers) {
            Arrived::Scheduled(r) => {
                shared.capture(arrival, direction, Fate::Forwarded, || {
                    packet_bytes(&r.packet, len)
                });
            }
            // Its fate is decided at dequeue, and captured then; an idle bottleneck takes it now.
            Arrived::Held => self.settle(shared, arrival),
            Arrived::Dropped { packet, cause } => {
                let (fate, event) = match cause {
                    DropCause::Switch(_) => (
                        Fate::DroppedSwitch,
                        LogEvent::DroppedSwitch {
                            t: arrival,
                            direction,
                            bytes,
                        },
                    ),
                    DropCause::Random => (
                        Fate::Lost,
                        LogEvent::Lost {
                            t: arrival,
                            direction,
                            bytes,
                        },
                    ),
                    DropCause::Queue | DropCause::Discipline => (
                        Fate::DroppedQueue,
                        LogEvent::DroppedQueue {
                            t: arrival,
                            direction,
                            bytes,
                        },
                    ),
                };
                shared.capture(arrival, direction, fate, || packet_bytes(&packet, len));
                shared.emit(event);
                self.recycle(shared, packet);
            }
        }
    }

    fn publish(&self) {
        let l = &self.live;
        l.delivered_packets
            .store(self.delivered_packets, Ordering::Relaxed);
        l.delivered_bytes
            .store(self.delivered_bytes, Ordering::Relaxed);
        l.backlogged_bytes
            .store(self.backlogged_bytes, Ordering::Relaxed);
        l.backlogged_ns.store(self.backlogged_ns, Ordering::Relaxed);
    }

    fn next_due(&self) -> Option<Nanos> {
        self.link.next_due()
    }

    fn fidelity(self, cpu_seconds: f64, realtime: bool) -> (DirectionFidelity, Histogram<u64>) {
        let model = self.link.model().summary();
        let switch = self.link.switch_drops();
        let f = DirectionFidelity {
            direction: self.direction,
            sojourn_ms: SojournMs::of(&model.queueing_delay_us),
            marks_not_applied: self.marks_not_applied,
            model,
            delivered_packets: self.delivered_packets,
            delivered_bytes: self.delivered_bytes,
            in_flight_at_stop: self.link.in_flight() as u64,
            lateness_us: distribution_us(&self.lateness),
            early_us: distribution_us(&self.earliness),
            backlogged_rate_bps: (self.backlogged_ns > 0)
                .then(|| self.backlogged_bytes as f64 * 8.0 * 1e9 / self.backlogged_ns as f64),
            backlogged_bytes: self.backlogged_bytes,
            backlogged_seconds: self.backlogged_ns as f64 / 1e9,
            write_errors: self.write_errors,
            dropped_stale_address_packets: switch.packets,
            dropped_stale_address_bytes: switch.bytes,
            dropped_not_yet_valid_address_packets: switch.not_yet_valid_packets,
            cpu_seconds,
            realtime,
            offload: match &self.io {
                LaneIo::Offload(o) => Some(o.figures()),
                LaneIo::Plain { .. } => None,
            },
            largest_udp_payload: self.largest_udp_payload,
        };
        (f, self.lateness)
    }
}

/// The scheduler thread: both lanes, one event loop (as Mahimahi does). One thread rather than one
/// per direction because every TUN write runs the receiving kernel's stack in the writer's context
/// (a data packet's write produces the ACK the other lane must read): in one loop the ACK is picked
/// up without waking a second, idle CPU — a costly VM exit on a guest that idles in HLT.
struct Scheduler {
    lanes: [LaneState; 2],
    shared: Shared,
    stop_fd: Arc<OwnedFd>,
    stop: Arc<AtomicBool>,
    options: SchedulerOptions,
    /// Where the lab steered receive processing away from (see `LabOptions::steer_receive`).
    pin_cpu: Option<usize>,
}

struct SchedulerRun {
    uplink: DirectionFidelity,
    downlink: DirectionFidelity,
    lateness: Histogram<u64>,
    phase_lateness: Vec<Histogram<u64>>,
    log_dropped: u64,
    capture_dropped: u64,
}

impl Scheduler {
    /// The loop: release what is due, take in what arrived, then do what the wake policy says
    /// (`quiclab_link::wake::next_wake`: run again, spin a pass, sleep, or block).
    fn run(mut self) -> Result<SchedulerRun> {
        let tid = process::current_tid();
        // Unknown is not zero: a CPU time that cannot be read makes the figure NaN (null in JSON,
        // left out of the metrics), never 0.
        let cpu_start = process::thread_cpu_seconds(tid).unwrap_or(f64::NAN);
        os::minimal_timer_slack();
        let realtime = self.options.realtime && os::set_realtime(REALTIME_PRIORITY);
        if let Some(cpu) = self.pin_cpu {
            os::pin_to_cpu(cpu);
        }
        let mut poller = os::Poller::new([
            self.lanes[0].ingress_fd(),
            self.lanes[1].ingress_fd(),
            self.stop_fd.as_raw_fd(),
        ]);
        // Which ingress devices may have packets waiting: a lane is read only while flagged (a read
        // that finds nothing clears its flag). Flags are set by a poll, and by a release into the
        // other direction (whose receiving stack may answer at once). Without this every pass of
        // the loop cost one failed read per device: at 1 Gbit/s, ~150 000 wasted syscalls a second.
        let mut readable = [true; 2];
        let mut last_poll = self.shared.now();
        let config = WakeConfig {
            spin: self.options.spin.as_nanos() as Nanos,
            nap: self.options.nap.as_nanos() as Nanos,
        };
        let mut policy = WakeState::new(config, self.shared.now(), os::thread_cpu_ns());
        while !self.stop.load(Ordering::Relaxed) {
            self.release(&mut readable);
            // While the loop runs without sleeping (releasing, spinning), the devices are polled
            // every `POLL_INTERVAL`, which bounds how late an arrival is timestamped.
            let now = self.shared.now();
            if now.saturating_sub(last_poll) >= POLL_INTERVAL {
                poller.poll(Some(0), &mut readable);
                last_poll = now;
            }
            if self.take_arrivals(&mut readable)? {
                continue;
            }
            let next = self.lanes.iter().filter_map(|l| l.link.next_wake()).min();
            let now = self.shared.now();
            policy.advance(now, os::thread_cpu_ns);
            let wake = next_wake(&policy, now, next);
            policy.commit(wake, now);
            match wake {
                Wake::Now => {}
                Wake::Spin => std::hint::spin_loop(),
                Wake::Sleep(timeout) => {
                    let ready = poller.poll(Some(timeout), &mut readable);
                    last_poll = self.shared.now();
                    if ready == 0 {
                        // Woken by the timer: how late, on this machine, right now?
                        policy.woke_by_timer(last_poll.saturating_sub(now + timeout));
                    }
                }
                Wake::Block => {
                    poller.poll(None, &mut readable);
                    last_poll = self.shared.now();
                }
            }
        }
        let cpu = process::thread_cpu_seconds(tid).map_or(f64::NAN, |c| c - cpu_start);
        Ok(self.finish(cpu, realtime))
    }

    /// Runs the queue disciplines up to now (their dequeues are decided in virtual time), then
    /// releases what is due in both directions (with offload, each direction's due packets take
    /// the other's within its window along: one wake-up for both). A release flags the other
    /// direction's device: its receiving stack may answer at once.
    fn release(&mut self, readable: &mut [bool; 2]) {
        let now = self.shared.now();
        for lane in self.lanes.iter_mut() {
            lane.settle(&mut self.shared, now);
        }
        let due = self
            .lanes
            .each_ref()
            .map(|l| l.next_due().is_some_and(|d| d <= now));
        for (i, lane) in self.lanes.iter_mut().enumerate() {
            if lane.release_due(&mut self.shared, due[1 - i]) > 0 {
                readable[1 - i] = true;
            }
        }
    }

    /// Takes in what has arrived on the flagged devices, in bounded bursts (so releases stay on
    /// time under load). Returns whether a device gave a whole burst (more may be waiting).
    fn take_arrivals(&mut self, readable: &mut [bool; 2]) -> Result<bool> {
        let mut saturated = false;
        for (i, lane) in self.lanes.iter_mut().enumerate() {
            if !readable[i] {
                continue;
            }
            if lane.take_arrivals(&mut self.shared)? == READ_BURST {
                saturated = true;
            } else {
                readable[i] = false;
            }
        }
        Ok(saturated)
    }

    /// The run's figures; the thread's CPU time (`cpu`, s) is shared by both directions, and each
    /// reports the whole.
    fn finish(mut self, cpu: f64, realtime: bool) -> SchedulerRun {
        let phase_lateness = std::mem::take(&mut self.shared.phase_lateness);
        let [up, down] = self.lanes;
        let (uplink, up_late) = up.fidelity(cpu, realtime);
        let (downlink, down_late) = down.fidelity(cpu, realtime);
        let mut lateness = up_late;
        lateness.add(&down_late).ok();
        SchedulerRun {
            uplink,
            downlink,
            lateness,
            phase_lateness,
            log_dropped: self.shared.log_dropped,
            capture_dropped: self.shared.capture_dropped,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn late_share_counts_releases_over_100_us() {
        let mut h = new_histogram();
        assert_eq!(late_share(&h), 0.0);
        for late in [
            1_000, 50_000, 99_000, 100_000, 150_000, 2_000_000, 10, 10, 10, 10,
        ] {
            h.record(late).unwrap();
        }
        // 150 µs and 2 ms are late; exactly 100 µs is not.
        assert!((late_share(&h) - 0.2).abs() < 1e-9, "{}", late_share(&h));
    }
}
