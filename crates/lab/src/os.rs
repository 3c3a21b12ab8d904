//! Every system call the lab makes through `libc` and every clock the emulator reads, in one place
//! (as quinn-udp is to quinn): the rest of the lab calls these safe wrappers. Each `unsafe` block
//! states why it is sound; each wrapper says what a failure means to its caller.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use quiclab_link::Nanos;

/// The emulator's clock: nanoseconds since its epoch (the lab's `t = 0`).
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    epoch: Instant,
}

impl Clock {
    /// A clock whose epoch is now.
    pub fn start() -> Clock {
        Clock {
            epoch: Instant::now(),
        }
    }

    pub fn epoch(&self) -> Instant {
        self.epoch
    }

    /// Nanoseconds since the epoch.
    pub fn now(&self) -> Nanos {
        self.epoch.elapsed().as_nanos() as Nanos
    }

    /// The Unix time of the epoch, ns (real timestamps for captures and logs).
    pub fn epoch_unix_ns(&self) -> u128 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos()
            .saturating_sub(self.epoch.elapsed().as_nanos())
    }

    /// CLOCK_MONOTONIC at the epoch, ns: the clock congestion samples (cwnd.csv) are stamped with.
    pub fn epoch_monotonic_ns(&self) -> u128 {
        monotonic_ns().saturating_sub(self.epoch.elapsed().as_nanos())
    }
}

fn timespec_ns(ts: &libc::timespec) -> u128 {
    ts.tv_sec as u128 * 1_000_000_000 + ts.tv_nsec as u128
}

/// CLOCK_MONOTONIC now, ns.
pub fn monotonic_ns() -> u128 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    timespec_ns(&ts)
}

/// CPU time of the calling thread (CLOCK_THREAD_CPUTIME_ID), ns.
pub fn thread_cpu_ns() -> Nanos {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into our timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    timespec_ns(&ts) as Nanos
}

/// CPU seconds of a running process from its kernel CPU clock (None when the clock cannot be had).
pub fn process_cpu_clock_seconds(pid: i32) -> Option<f64> {
    let mut clock: libc::clockid_t = 0;
    // SAFETY: clock_getcpuclockid writes one clockid_t into `clock`; clock_gettime one timespec.
    unsafe {
        if libc::clock_getcpuclockid(pid, &mut clock) != 0 {
            return None;
        }
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        (libc::clock_gettime(clock, &mut ts) == 0).then(|| timespec_ns(&ts) as f64 / 1e9)
    }
}

/// A non-blocking, close-on-exec eventfd (the emulator's stop signal).
pub fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: eventfd(2) with valid flags; the result is checked before use.
    let raw = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a fresh fd we own.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// Adds one to an eventfd's counter (wakes whoever polls it).
pub fn eventfd_signal(fd: &OwnedFd) {
    let one: u64 = 1;
    // SAFETY: writing 8 bytes from a live u64 to our eventfd.
    unsafe { libc::write(fd.as_raw_fd(), &one as *const u64 as *const libc::c_void, 8) };
}

/// A close-on-exec duplicate of `fd`.
pub fn dup_cloexec(fd: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: F_DUPFD_CLOEXEC on a valid fd returns a new fd we own.
    let new = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    if new < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `new` is a fresh fd.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}

/// One `read(2)` into `buf`: Ok(0) at end of file, `WouldBlock` when nothing waits.
pub fn read(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: reading into our own buffer of its length.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len()) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// One `write(2)` of `bytes`; whether it succeeded.
pub fn write(fd: RawFd, bytes: &[u8]) -> bool {
    // SAFETY: writing `bytes.len()` initialised bytes of a live slice.
    let n = unsafe { libc::write(fd, bytes.as_ptr() as *const libc::c_void, bytes.len()) };
    n >= 0
}

/// One `writev(2)` of a head and a payload as one packet.
pub fn write2(fd: RawFd, head: &[u8], payload: &[u8]) -> io::Result<()> {
    let iov = [
        libc::iovec {
            iov_base: head.as_ptr() as *mut libc::c_void,
            iov_len: head.len(),
        },
        libc::iovec {
            iov_base: payload.as_ptr() as *mut libc::c_void,
            iov_len: payload.len(),
        },
    ];
    // SAFETY: both iovecs point into live slices of their stated lengths; the kernel only reads
    // them.
    let n = unsafe { libc::writev(fd, iov.as_ptr(), 2) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Cuts the calling thread's timer slack to 1 ns: the default 50 µs would let the kernel defer
/// its wake-ups by that much.
pub fn minimal_timer_slack() {
    // SAFETY: prctl with PR_SET_TIMERSLACK takes a plain integer.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
}

/// Moves the calling thread to SCHED_FIFO at `priority`. Returns whether it worked.
pub fn set_realtime(priority: i32) -> bool {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: pthread_setschedparam on the current thread with a valid policy and parameter.
    unsafe { libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &param) == 0 }
}

/// Pins the calling thread to one CPU (best effort).
pub fn pin_to_cpu(cpu: usize) {
    // SAFETY: sched_setaffinity on the calling thread with a zeroed, then filled, cpu_set_t.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// The CPUs the calling thread may run on (None when they cannot be read).
pub fn allowed_cpus() -> Option<Vec<usize>> {
    // SAFETY: sched_getaffinity fills a zeroed set for the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return None;
        }
        Some(
            (0..libc::CPU_SETSIZE as usize)
                .filter(|&c| libc::CPU_ISSET(c, &set))
                .collect(),
        )
    }
}

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`), the unit of /proc's utime and stime.
pub fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_CLK_TCK) as f64 }
}

/// Sends `sig` to `pid` (a negative PID: its process group). Callers pass only PIDs they started.
pub fn kill(pid: i32, sig: i32) {
    // SAFETY: plain kill(2); it touches no memory of ours.
    unsafe { libc::kill(pid, sig) };
}

/// Whether `sig`'s disposition is SIG_IGN (read without changing it).
pub fn signal_ignored(sig: i32) -> bool {
    // SAFETY: sigaction with a null new action only reads the current one into `old`.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(sig, std::ptr::null(), &mut old) == 0 && old.sa_sigaction == libc::SIG_IGN
    }
}

/// Makes `cmd`'s child enter the network namespace `ns_fd` before exec (and lead a process group
/// of its own with `own_group`). `ns_fd` must stay open until the child has started.
pub fn enter_netns_before_exec(cmd: &mut Command, ns_fd: RawFd, own_group: bool) {
    // SAFETY: the closure runs in the forked child before exec and only makes async-signal-safe
    // system calls (setns, setpgid) on an fd the parent keeps open.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setns(ns_fd, libc::CLONE_NEWNET) != 0 {
                return Err(io::Error::last_os_error());
            }
            if own_group && libc::setpgid(0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Makes `cmd`'s child join the control group whose `cgroup.procs` is open as `procs_fd` before
/// exec (writing "0" moves the writer), so it and everything it starts run under the group's CPU
/// limit from their first instruction. `procs_fd` must stay open until the child has started.
pub fn join_cgroup_before_exec(cmd: &mut Command, procs_fd: RawFd) {
    // SAFETY: the closure runs in the forked child before exec and only calls write(2), which is
    // async-signal-safe, on an fd the parent keeps open.
    unsafe {
        cmd.pre_exec(move || {
            let me = b"0";
            if libc::write(procs_fd, me.as_ptr().cast(), me.len()) != me.len() as isize {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Waits on both ingress devices and the stop eventfd: `epoll` with a nanosecond timeout
/// (`epoll_pwait2`, Linux 5.11), so the wait queues are registered once rather than on every
/// call as `ppoll` does (at 1 Gbit/s the loop waits ~40 000 times a second); `ppoll(2)` where
/// epoll_pwait2 is missing.
pub struct Poller {
    fds: [libc::pollfd; 3],
    epoll: Option<OwnedFd>,
}

impl Poller {
    pub fn new(fds: [RawFd; 3]) -> Poller {
        let pollfds = fds.map(|fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        });
        Poller {
            fds: pollfds,
            epoll: Self::epoll(&fds),
        }
    }

    /// An epoll instance watching `fds` (event data: the index), if the kernel has epoll_pwait2.
    fn epoll(fds: &[RawFd; 3]) -> Option<OwnedFd> {
        // SAFETY: epoll_create1 with a valid flag; the fd is owned at once.
        let raw = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if raw < 0 {
            return None;
        }
        // SAFETY: a fresh fd we own.
        let epoll = unsafe { OwnedFd::from_raw_fd(raw) };
        for (i, &fd) in fds.iter().enumerate() {
            let mut ev = libc::epoll_event {
                events: libc::EPOLLIN as u32,
                u64: i as u64,
            };
            // SAFETY: valid epoll fd, fd and event.
            if unsafe { libc::epoll_ctl(raw, libc::EPOLL_CTL_ADD, fd, &mut ev) } < 0 {
                return None;
            }
        }
        // Probe for epoll_pwait2 with a zero timeout.
        let zero = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; 3];
        (Self::pwait2(&epoll, &zero, &mut events) >= 0).then_some(epoll)
    }

    /// One epoll_pwait2(2): how many events it wrote into `events` (< 0: an error).
    fn pwait2(
        epoll: &OwnedFd,
        ts: *const libc::timespec,
        events: &mut [libc::epoll_event; 3],
    ) -> i32 {
        // SAFETY: valid epoll fd, event array of its length, `ts` null or live, no sigmask.
        unsafe {
            libc::syscall(
                libc::SYS_epoll_pwait2,
                epoll.as_raw_fd(),
                events.as_mut_ptr(),
                3,
                ts,
                std::ptr::null::<libc::sigset_t>(),
                8,
            ) as i32
        }
    }

    /// Blocks until a device (or the stop eventfd) is readable or `timeout_ns` passes (`Some(0)`:
    /// just look). Flags the readable devices in `readable` (never clears a flag: a flag is
    /// cleared by the read that finds nothing). Returns how many fds are readable (0 = timeout).
    pub fn poll(&mut self, timeout_ns: Option<Nanos>, readable: &mut [bool; 2]) -> i32 {
        let ts = timeout_ns.map(|ns| libc::timespec {
            tv_sec: (ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (ns % 1_000_000_000) as libc::c_long,
        });
        let ts_ptr = ts
            .as_ref()
            .map_or(std::ptr::null(), |t| t as *const libc::timespec);
        if let Some(epoll) = &self.epoll {
            let mut events = [libc::epoll_event { events: 0, u64: 0 }; 3];
            let n = Self::pwait2(epoll, ts_ptr, &mut events);
            for ev in events.iter().take(n.max(0) as usize) {
                if let Some(flag) = readable.get_mut(ev.u64 as usize) {
                    *flag = true;
                }
            }
            return n;
        }
        // SAFETY: valid pollfds of our own array; ts_ptr is null or points to a live timespec.
        let n = unsafe {
            libc::ppoll(
                self.fds.as_mut_ptr(),
                self.fds.len() as libc::nfds_t,
                ts_ptr,
                std::ptr::null(),
            )
        };
        if n > 0 {
            for (flag, pfd) in readable.iter_mut().zip(&self.fds) {
                // An error or hang-up is "readable" too: the read reports it.
                *flag |= pfd.revents != 0;
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_eventfd_wakes_the_poller_and_a_timeout_ends_it() {
        let stop = eventfd().unwrap();
        let a = eventfd().unwrap();
        let b = eventfd().unwrap();
        let mut poller = Poller::new([a.as_raw_fd(), b.as_raw_fd(), stop.as_raw_fd()]);
        let mut readable = [false; 2];
        assert_eq!(poller.poll(Some(1_000_000), &mut readable), 0);
        assert_eq!(readable, [false, false]);
        eventfd_signal(&b);
        assert_eq!(poller.poll(Some(1_000_000), &mut readable), 1);
        assert_eq!(readable, [false, true], "the second device is flagged");
    }

    #[test]
    fn clocks_move_forward() {
        let clock = Clock::start();
        let (t0, c0) = (clock.now(), thread_cpu_ns());
        let mut x = 0u64;
        for i in 0..1_000_000u64 {
            x = x.wrapping_add(std::hint::black_box(i));
        }
        std::hint::black_box(x);
        assert!(clock.now() > t0);
        assert!(thread_cpu_ns() > c0);
        assert!(clock.epoch_monotonic_ns() <= monotonic_ns());
    }
}
