//! The I/O shell around the sans-IO link model: one dedicated scheduler thread per direction moves IP
//! packets from one TUN device to the other, asking [`LinkModel`] when each packet is due and releasing
//! it then, with microsecond precision.
//!
//! Why not tokio: its timers have a 1 ms granularity, coarser than a 1500-byte packet at 100 Mbit/s
//! (120 µs). Each direction instead runs a plain thread that sleeps in `ppoll(2)` (a high-resolution
//! timeout, with the thread's timer slack cut from 50 µs to 1 ns) until shortly before the next release,
//! then spins the last few microseconds. It never spins while idle: with nothing queued it blocks in
//! `ppoll` on the ingress TUN and a stop eventfd.
//!
//! Every release is timed against its schedule; the lateness distribution, the delivered rate while
//! backlogged and the drops by cause form the [`FidelityReport`] that every quiclab result carries.

use std::collections::VecDeque;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use hdrhistogram::Histogram;
use quiclab_link::{Departure, DirectionConfig, LinkModel, ModelSummary, Nanos, Verdict};
use serde::Serialize;

use crate::packet_log::{LogEvent, LogWriter};
use crate::process;
use crate::stats::{Distribution, distribution_us};
use crate::topology::{Lab, Side};

/// Largest packet the TUN can hand us (MTU 1500 plus headroom for a larger configured MTU).
const BUF_SIZE: usize = 65_536;
/// At most this many packets are read in one go before due packets are released again.
const READ_BURST: usize = 32;

/// Which way a packet travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// client → server
    Uplink,
    /// server → client
    Downlink,
}

impl Direction {
    pub fn label(self) -> &'static str {
        match self {
            Direction::Uplink => "up",
            Direction::Downlink => "down",
        }
    }
}

/// How the shell schedules.
#[derive(Debug, Clone)]
pub struct SchedulerOptions {
    /// Sleep until this long before a release, then spin. Covers the kernel's wake-up latency.
    pub spin: Duration,
    /// Run the scheduler threads under SCHED_FIFO so that the stacks under test (on the same two cores)
    /// cannot delay a release. Falls back to normal scheduling (and says so) when refused.
    pub realtime: bool,
}

impl Default for SchedulerOptions {
    fn default() -> Self {
        SchedulerOptions {
            spin: Duration::from_micros(20),
            realtime: true,
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
}

/// Fidelity figures of one direction.
#[derive(Debug, Clone, Serialize)]
pub struct DirectionFidelity {
    pub direction: Direction,
    /// The model's view: counters (offered, forwarded, dropped by cause), queue and sojourn distributions.
    pub model: ModelSummary,
    /// Packets and bytes actually written to the egress TUN.
    pub delivered_packets: u64,
    pub delivered_bytes: u64,
    /// Packets still queued in the emulator when it stopped (neither delivered nor dropped).
    pub in_flight_at_stop: u64,
    /// How late each release was versus its computed time.
    pub lateness_us: Distribution,
    /// IP-layer rate delivered while the queue was backlogged (back-to-back releases), measured from the
    /// actual release times; `None` when the link was never backlogged.
    pub backlogged_rate_bps: Option<f64>,
    /// Bytes and time over which `backlogged_rate_bps` was measured.
    pub backlogged_bytes: u64,
    pub backlogged_seconds: f64,
    /// Writes to the egress TUN that failed (the packet is lost and counted here).
    pub write_errors: u64,
    /// CPU seconds this direction's scheduler thread used.
    pub cpu_seconds: f64,
    /// Whether the thread ran under SCHED_FIFO.
    pub realtime: bool,
}

/// The evidence of the emulator's own fidelity that goes with every result.
#[derive(Debug, Clone, Serialize)]
pub struct FidelityReport {
    pub uplink: DirectionFidelity,
    pub downlink: DirectionFidelity,
    /// Lateness over both directions.
    pub lateness_us: Distribution,
    /// Emulator CPU (both scheduler threads) as a fraction of one core over the run.
    pub cpu_core_fraction: f64,
    pub wall_seconds: f64,
    /// Log events dropped because the log writer could not keep up (the log is then incomplete).
    pub log_events_dropped: u64,
}

/// A running emulator.
pub struct Emulator {
    stop_fd: Arc<OwnedFd>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<Result<DirectionRun>>>,
    logger: Option<JoinHandle<Result<u64>>>,
    epoch: Instant,
}

struct DirectionRun {
    fidelity: DirectionFidelity,
    lateness: Histogram<u64>,
    log_dropped: u64,
}

impl Emulator {
    /// Starts both scheduler threads between the lab's TUN devices.
    pub fn start(lab: &Lab, config: EmulatorConfig) -> Result<Emulator> {
        let epoch = Instant::now();
        // SAFETY: eventfd(2) with valid flags; the result is checked before use.
        let raw = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if raw < 0 {
            return Err(std::io::Error::last_os_error()).context("eventfd");
        }
        // SAFETY: `raw` is a fresh fd we own.
        let stop_fd = Arc::new(unsafe { OwnedFd::from_raw_fd(raw) });
        let stop = Arc::new(AtomicBool::new(false));

        let (log_tx, logger) = match &config.log {
            Some(path) => {
                let (tx, rx) = std::sync::mpsc::sync_channel::<LogEvent>(1 << 16);
                let writer = LogWriter::create(path, epoch, &config.log_header)?;
                let handle = std::thread::Builder::new()
                    .name("ql-log".into())
                    .spawn(move || write_log(writer, rx))?;
                (Some(tx), Some(handle))
            }
            None => (None, None),
        };

        let mut threads = Vec::new();
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
            let ingress = dup_fd(lab.tun(from).as_raw_fd())?;
            let egress = dup_fd(lab.tun(to).as_raw_fd())?;
            let shell = DirectionShell {
                direction,
                model,
                ingress,
                egress,
                stop_fd: stop_fd.clone(),
                stop: stop.clone(),
                epoch,
                options: config.scheduler.clone(),
                log: log_tx.clone(),
            };
            threads.push(
                std::thread::Builder::new()
                    .name(format!("ql-{}", direction.label()))
                    .spawn(move || shell.run())?,
            );
        }
        drop(log_tx);
        Ok(Emulator {
            stop_fd,
            stop,
            threads,
            logger,
            epoch,
        })
    }

    /// Time since the emulator started (its clock's epoch).
    pub fn elapsed(&self) -> Duration {
        self.epoch.elapsed()
    }

    /// Stops both threads and returns the fidelity report.
    pub fn stop(mut self) -> Result<FidelityReport> {
        self.signal_stop();
        let mut runs = Vec::new();
        for t in self.threads.drain(..) {
            runs.push(
                t.join()
                    .map_err(|_| anyhow::anyhow!("an emulator thread panicked"))??,
            );
        }
        let log_written = match self.logger.take() {
            Some(h) => Some(
                h.join()
                    .map_err(|_| anyhow::anyhow!("the log writer panicked"))??,
            ),
            None => None,
        };
        let _ = log_written;
        let wall = self.epoch.elapsed().as_secs_f64();
        let mut all = new_histogram();
        let mut log_dropped = 0;
        for r in &runs {
            all.add(&r.lateness).ok();
            log_dropped += r.log_dropped;
        }
        let mut runs = runs.into_iter();
        let up = runs.next().context("uplink thread result")?.fidelity;
        let down = runs.next().context("downlink thread result")?.fidelity;
        let cpu = up.cpu_seconds + down.cpu_seconds;
        Ok(FidelityReport {
            lateness_us: distribution_us(&all),
            cpu_core_fraction: if wall > 0.0 { cpu / wall } else { 0.0 },
            wall_seconds: wall,
            log_events_dropped: log_dropped,
            uplink: up,
            downlink: down,
        })
    }

    fn signal_stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        let one: u64 = 1;
        // SAFETY: writing 8 bytes to our eventfd.
        unsafe {
            libc::write(
                self.stop_fd.as_raw_fd(),
                &one as *const u64 as *const libc::c_void,
                8,
            )
        };
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        if !self.threads.is_empty() {
            self.signal_stop();
            for t in self.threads.drain(..) {
                let _ = t.join();
            }
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

fn dup_fd(fd: RawFd) -> Result<OwnedFd> {
    // SAFETY: F_DUPFD_CLOEXEC on a valid fd returns a new fd we own.
    let new = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    if new < 0 {
        return Err(std::io::Error::last_os_error()).context("dup of a TUN fd");
    }
    // SAFETY: `new` is a fresh fd.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}

fn new_histogram() -> Histogram<u64> {
    // Nanoseconds from 1 ns to 100 s, 3 significant digits.
    Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("valid histogram bounds")
}

/// One queued packet waiting for its release time.
struct Queued {
    deliver_at: Nanos,
    arrival: Nanos,
    backlogged: bool,
    len: usize,
    buf: Box<[u8]>,
}

struct DirectionShell {
    direction: Direction,
    model: LinkModel,
    ingress: OwnedFd,
    egress: OwnedFd,
    stop_fd: Arc<OwnedFd>,
    stop: Arc<AtomicBool>,
    epoch: Instant,
    options: SchedulerOptions,
    log: Option<SyncSender<LogEvent>>,
}

impl DirectionShell {
    fn now(&self) -> Nanos {
        self.epoch.elapsed().as_nanos() as Nanos
    }

    fn run(mut self) -> Result<DirectionRun> {
        let tid = process::current_tid();
        let cpu_start = process::thread_cpu_seconds(tid).unwrap_or(0.0);
        // The default timer slack (50 µs) would let the kernel defer our wake-ups by that much.
        // SAFETY: prctl with PR_SET_TIMERSLACK takes a plain integer.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
        let realtime = self.options.realtime && set_realtime();

        let mut queue: VecDeque<Queued> = VecDeque::new();
        let mut pool: Vec<Box<[u8]>> = Vec::new();
        let mut lateness = new_histogram();
        let mut delivered_packets = 0u64;
        let mut delivered_bytes = 0u64;
        let mut write_errors = 0u64;
        let mut log_dropped = 0u64;
        let mut last_release: Option<Nanos> = None;
        let mut backlogged_bytes = 0u64;
        let mut backlogged_ns = 0u64;
        let spin_ns = self.options.spin.as_nanos() as Nanos;
        let ingress = self.ingress.as_raw_fd();
        let egress = self.egress.as_raw_fd();

        let mut emit = |log: &Option<SyncSender<LogEvent>>, ev: LogEvent| {
            if let Some(tx) = log
                && let Err(TrySendError::Full(_)) = tx.try_send(ev)
            {
                log_dropped += 1;
            }
        };

        while !self.stop.load(Ordering::Relaxed) {
            // 1. Release every packet that is due.
            while let Some(front) = queue.front() {
                let now = self.now();
                if front.deliver_at > now {
                    break;
                }
                let p = queue.pop_front().expect("front exists");
                // SAFETY: writing `len` initialised bytes of our buffer to our TUN fd.
                let n =
                    unsafe { libc::write(egress, p.buf.as_ptr() as *const libc::c_void, p.len) };
                let late = now - p.deliver_at;
                lateness.record(late.max(1)).ok();
                if n < 0 {
                    write_errors += 1;
                } else {
                    delivered_packets += 1;
                    delivered_bytes += p.len as u64;
                    if p.backlogged
                        && let Some(prev) = last_release
                    {
                        backlogged_bytes += p.len as u64;
                        backlogged_ns += now - prev;
                    }
                    last_release = Some(now);
                    emit(
                        &self.log,
                        LogEvent::Delivered {
                            t: now,
                            direction: self.direction,
                            bytes: p.len as u32,
                            one_way: now - p.arrival,
                            lateness: late,
                        },
                    );
                }
                pool.push(p.buf);
            }

            // 2. Take in what has arrived (a bounded burst, so releases stay on time under load).
            let mut read_any = 0;
            while read_any < READ_BURST {
                let mut buf = pool
                    .pop()
                    .unwrap_or_else(|| vec![0u8; BUF_SIZE].into_boxed_slice());
                // SAFETY: reading into our own buffer of BUF_SIZE bytes.
                let n =
                    unsafe { libc::read(ingress, buf.as_mut_ptr() as *mut libc::c_void, BUF_SIZE) };
                if n <= 0 {
                    pool.push(buf);
                    let err = std::io::Error::last_os_error();
                    if n < 0
                        && err.kind() != std::io::ErrorKind::WouldBlock
                        && err.kind() != std::io::ErrorKind::Interrupted
                    {
                        bail!(
                            "{} link: reading the TUN device: {err}",
                            self.direction.label()
                        );
                    }
                    break;
                }
                read_any += 1;
                let arrival = self.now();
                let len = n as usize;
                emit(
                    &self.log,
                    LogEvent::Arrival {
                        t: arrival,
                        direction: self.direction,
                        bytes: len as u32,
                    },
                );
                match self.model.on_arrival(arrival, len as u32) {
                    Verdict::Forward(Departure {
                        deliver_at,
                        backlogged,
                        ..
                    }) => queue.push_back(Queued {
                        deliver_at,
                        arrival,
                        backlogged,
                        len,
                        buf,
                    }),
                    Verdict::DroppedQueue => {
                        emit(
                            &self.log,
                            LogEvent::DroppedQueue {
                                t: arrival,
                                direction: self.direction,
                                bytes: len as u32,
                            },
                        );
                        pool.push(buf);
                    }
                    Verdict::DroppedRandom => {
                        emit(
                            &self.log,
                            LogEvent::Lost {
                                t: arrival,
                                direction: self.direction,
                                bytes: len as u32,
                            },
                        );
                        pool.push(buf);
                    }
                }
            }
            if read_any == READ_BURST {
                continue;
            }

            // 3. Wait: sleep until just before the next release (or until a packet arrives), spin
            //    the rest.
            let timeout = queue
                .front()
                .map(|p| p.deliver_at.saturating_sub(self.now()));
            match timeout {
                Some(0) => continue,
                Some(t) if t <= spin_ns => {
                    std::hint::spin_loop();
                    continue;
                }
                Some(t) => wait_readable(ingress, self.stop_fd.as_raw_fd(), Some(t - spin_ns)),
                None => wait_readable(ingress, self.stop_fd.as_raw_fd(), None),
            }
        }

        let cpu_end = process::thread_cpu_seconds(tid).unwrap_or(cpu_start);
        let fidelity = DirectionFidelity {
            direction: self.direction,
            model: self.model.summary(),
            delivered_packets,
            delivered_bytes,
            in_flight_at_stop: queue.len() as u64,
            lateness_us: distribution_us(&lateness),
            backlogged_rate_bps: (backlogged_ns > 0)
                .then(|| backlogged_bytes as f64 * 8.0 * 1e9 / backlogged_ns as f64),
            backlogged_bytes,
            backlogged_seconds: backlogged_ns as f64 / 1e9,
            write_errors,
            cpu_seconds: cpu_end - cpu_start,
            realtime,
        };
        Ok(DirectionRun {
            fidelity,
            lateness,
            log_dropped,
        })
    }
}

/// Blocks until `fd` is readable, the stop eventfd fires, or `timeout_ns` passes.
fn wait_readable(fd: RawFd, stop_fd: RawFd, timeout_ns: Option<Nanos>) {
    let mut fds = [
        libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: stop_fd,
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    let ts = timeout_ns.map(|ns| libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    });
    let ts_ptr = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: two valid pollfds; ts_ptr is null or points to a live timespec.
    unsafe { libc::ppoll(fds.as_mut_ptr(), 2, ts_ptr, std::ptr::null()) };
}

/// Moves the calling thread to SCHED_FIFO (priority 50). Returns whether it worked.
fn set_realtime() -> bool {
    let param = libc::sched_param { sched_priority: 50 };
    // SAFETY: pthread_setschedparam on the current thread with a valid policy and parameter.
    unsafe { libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &param) == 0 }
}
