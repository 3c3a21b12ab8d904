//! A minimal Chrome DevTools Protocol client over `--remote-debugging-pipe`: Chromium reads
//! NUL-terminated JSON commands on fd 3 and writes NUL-terminated JSON responses and events on fd 4.
//! Flat sessions (`Target.attachToTarget` with `flatten: true`) multiplex page sessions on the same
//! pipe through `sessionId`.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Value, json};

/// An event Chromium sent.
pub struct Event {
    pub session_id: Option<String>,
    pub method: String,
    pub params: Value,
}

/// A running Chromium and its DevTools pipe. Dropping it kills Chromium's process group.
pub struct Session {
    child: Child,
    reaped: bool,
    to_browser: File,
    from_browser: Receiver<Value>,
    events: VecDeque<Event>,
    next_id: u64,
}

/// A pipe end duplicated to fd 10 or above, so that mapping it onto fd 3 or 4 in the child can
/// never overwrite the other end being mapped.
fn high_fd(fd: &OwnedFd) -> Result<OwnedFd> {
    // SAFETY: fcntl on a valid descriptor; the new one is owned by the returned OwnedFd.
    let new = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 10) };
    if new < 0 {
        return Err(std::io::Error::last_os_error()).context("duplicating a pipe descriptor");
    }
    // SAFETY: `new` is a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}

/// A close-on-exec pipe: (read end, write end).
fn pipe() -> Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: pipe2 writes two descriptors into the array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error()).context("creating the DevTools pipe");
    }
    // SAFETY: both descriptors are fresh and owned from here on.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

impl Session {
    /// Spawns `cmd` (whose command line has `--remote-debugging-pipe`) as the leader of a new
    /// process group, with the command pipe on its fd 3 and the response pipe on its fd 4.
    pub fn start(mut cmd: Command, deadline: Instant) -> Result<Session> {
        let (cmd_read, cmd_write) = pipe()?;
        let (resp_read, resp_write) = pipe()?;
        let child_in = high_fd(&cmd_read)?;
        let child_out = high_fd(&resp_write)?;
        drop((cmd_read, resp_write));
        let (fd_in, fd_out) = (child_in.as_raw_fd(), child_out.as_raw_fd());
        cmd.process_group(0);
        // SAFETY: only dup2 (async-signal-safe) between fork and exec. dup2 clears close-on-exec
        // on the targets, so Chromium inherits exactly fds 3 and 4 of these pipes.
        unsafe {
            cmd.pre_exec(move || {
                if libc::dup2(fd_in, 3) < 0 || libc::dup2(fd_out, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .with_context(|| format!("starting {:?}", cmd.get_program()))?;
        drop((child_in, child_out));
        let (tx, rx) = channel();
        let reader = File::from(resp_read);
        std::thread::Builder::new()
            .name("cdp-reader".into())
            .spawn(move || {
                let mut r = BufReader::with_capacity(1 << 16, reader);
                let mut buf = Vec::new();
                loop {
                    buf.clear();
                    match r.read_until(0, &mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(_) => {}
                    }
                    if buf.last() == Some(&0) {
                        buf.pop();
                    }
                    // A message that is not JSON is dropped; the caller times out on what it lacks.
                    if let Ok(v) = serde_json::from_slice::<Value>(&buf)
                        && tx.send(v).is_err()
                    {
                        return;
                    }
                }
            })
            .context("starting the DevTools reader thread")?;
        let mut s = Session {
            child,
            reaped: false,
            to_browser: File::from(cmd_write),
            from_browser: rx,
            events: VecDeque::new(),
            next_id: 0,
        };
        // The first answer proves the pipe works.
        s.call(None, "Browser.getVersion", json!({}), deadline)
            .context("Chromium did not answer on the DevTools pipe")?;
        Ok(s)
    }

    fn receive(&mut self, deadline: Instant) -> Result<Value> {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.from_browser.recv_timeout(left) {
            Ok(v) => Ok(v),
            Err(RecvTimeoutError::Timeout) => bail!("timed out waiting for Chromium"),
            Err(RecvTimeoutError::Disconnected) => {
                // Give an exiting Chromium a moment, so the message can say it exited.
                let until = Instant::now() + Duration::from_millis(500);
                while !self.exited() && Instant::now() < until {
                    std::thread::sleep(Duration::from_millis(20));
                }
                let state = if self.exited() {
                    "it exited"
                } else {
                    "it still runs"
                };
                bail!("Chromium closed the DevTools pipe ({state})")
            }
        }
    }

    /// Sends a command (to the browser, or to a page session) and waits for its result, keeping
    /// the events that arrive meanwhile.
    pub fn call(
        &mut self,
        session: Option<&str>,
        method: &str,
        params: Value,
        deadline: Instant,
    ) -> Result<Value> {
        self.next_id += 1;
        let id = self.next_id;
        let mut msg = json!({ "id": id, "method": method, "params": params });
        if let Some(s) = session {
            msg["sessionId"] = json!(s);
        }
        let mut bytes = serde_json::to_vec(&msg).context("encoding a CDP command")?;
        bytes.push(0);
        self.to_browser
            .write_all(&bytes)
            .with_context(|| format!("sending {method} to Chromium"))?;
        loop {
            let v = self
                .receive(deadline)
                .with_context(|| format!("waiting for the answer to {method}"))?;
            if v["id"].as_u64() == Some(id) {
                if let Some(err) = v.get("error") {
                    return Err(anyhow!("{method} failed: {err}"));
                }
                return Ok(v["result"].clone());
            }
            if let Some(m) = v["method"].as_str() {
                self.events.push_back(Event {
                    session_id: v["sessionId"].as_str().map(str::to_string),
                    method: m.to_string(),
                    params: v["params"].clone(),
                });
            }
        }
    }

    /// Waits for the first event (already received or to come) that `want` accepts; earlier
    /// events are dropped.
    pub fn wait_event(
        &mut self,
        deadline: Instant,
        want: impl Fn(&Event) -> bool,
    ) -> Result<Event> {
        while let Some(ev) = self.events.pop_front() {
            if want(&ev) {
                return Ok(ev);
            }
        }
        loop {
            let v = self.receive(deadline)?;
            if let Some(m) = v["method"].as_str() {
                let ev = Event {
                    session_id: v["sessionId"].as_str().map(str::to_string),
                    method: m.to_string(),
                    params: v["params"].clone(),
                };
                if want(&ev) {
                    return Ok(ev);
                }
            }
        }
    }

    /// Asks Chromium to close, gives it a moment, then kills its process group.
    pub fn close(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(2);
        self.next_id += 1;
        let msg = json!({ "id": self.next_id, "method": "Browser.close", "params": {} });
        if let Ok(mut bytes) = serde_json::to_vec(&msg) {
            bytes.push(0);
            if self.to_browser.write_all(&bytes).is_ok() {
                while Instant::now() < deadline && !self.exited() {
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }
        self.kill();
    }

    /// Whether the leader has exited (without reaping it, so its PID — the group's id — cannot be
    /// reused before the group is killed).
    fn exited(&self) -> bool {
        if self.reaped {
            return true;
        }
        // SAFETY: waitid with WNOWAIT only inspects our own child.
        unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let r = libc::waitid(
                libc::P_PID,
                self.child.id(),
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            );
            r == 0 && info.si_pid() != 0
        }
    }

    /// SIGKILL to the whole process group led by the child (by its PID), then reap the leader.
    fn kill(&mut self) {
        if self.reaped {
            return;
        }
        let pgid = self.child.id() as libc::pid_t;
        // SAFETY: the group was created for this child (process_group(0)) and its leader is not yet
        // reaped, so the id still names that group.
        unsafe {
            libc::killpg(pgid, libc::SIGKILL);
        }
        let _ = self.child.wait();
        self.reaped = true;
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.kill();
    }
}
