//! The loader's decisions, without sockets or a clock: which connections to open and which request
//! to send on which connection, as a browser would (Chromium's socket pool for HTTP/1.1, one
//! multiplexed connection for HTTP/2 and HTTP/3).
//!
//! The I/O shell feeds events in — [`LoadPlan::object_discovered`] for the root document,
//! [`LoadPlan::connection_ready`] when a handshake completes, [`LoadPlan::response_complete`] when a
//! body has fully arrived (HTML and CSS bodies are parsed here for further objects),
//! [`LoadPlan::connection_closed`] — each with the current time since navigation start, and drains
//! [`LoadPlan::poll_action`] after each event until it returns `None`. The plan records per object
//! when it was discovered, requested and completed, and on which connection.
//!
//! Rules:
//! - HTTP/1.1: at most `h1_connections_per_origin` (6, Chromium's and the seed papers' limit)
//!   connections, one request in flight per connection (no pipelining), idle ready connections are
//!   reused first (lowest id), and a new connection is opened only when more requests wait than
//!   connections are being opened, i.e. when a waiting request would otherwise have no connection
//!   coming for it (Chromium starts one connect job per waiting request, up to the limit).
//! - HTTP/2 and HTTP/3: one connection; every waiting request is sent as soon as it is ready, at most
//!   `max_streams` in flight when set (the server's stream limit is the shell's business).
//! - Waiting requests are served by priority, then discovery order: documents, style sheets and fonts
//!   first (render-blocking, Chromium's "Highest"), then scripts, then images and the rest.
//! - Only the page's origin is modelled (discovery drops other origins), so "per origin" is "in total".

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::discover::{Origin, discover_body};
use crate::kind::ObjectKind;

/// Chromium's (and the seed papers' browsers') limit of HTTP/1.1 connections per origin.
pub const H1_CONNECTIONS_PER_ORIGIN: usize = 6;

/// The HTTP version a page is loaded with: quiclab's one protocol type.
pub use quiclab_proto::options::Protocol;

/// A connection, numbered from 0 in the order the plan opens them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ConnId(pub u64);

impl std::fmt::Display for ConnId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Errors of events that do not fit the plan's state (a bug in the shell), and of configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// `max_streams` of zero would never send anything.
    #[error("max_streams must be at least 1 (or unset for no limit), got 0")]
    ZeroMaxStreams,
    /// Zero HTTP/1.1 connections would never send anything.
    #[error("h1_connections_per_origin must be at least 1, got 0")]
    ZeroConnections,
    /// An event named a connection the plan never opened.
    #[error("connection {0} was never opened by the plan")]
    UnknownConnection(ConnId),
    /// `connection_ready` for a connection that is not being opened.
    #[error("connection {conn} became ready but it is {state}, not connecting")]
    NotConnecting {
        /// The connection.
        conn: ConnId,
        /// Its state: `ready` or `closed`.
        state: &'static str,
    },
    /// `connection_closed` twice.
    #[error("connection {0} is already closed")]
    AlreadyClosed(ConnId),
    /// `response_complete` for a request that is not in flight on that connection.
    #[error("response for {path} on connection {conn}, but no such request is in flight there")]
    NotInFlight {
        /// The connection.
        conn: ConnId,
        /// The URL path.
        path: String,
    },
}

/// How a load proceeds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadConfig {
    /// The HTTP version.
    pub protocol: Protocol,
    /// For HTTP/2 and HTTP/3: the most requests in flight at once (`None`: no limit). Ignored for
    /// HTTP/1.1, whose concurrency is its number of connections.
    pub max_streams: Option<usize>,
    /// For HTTP/1.1: the most connections (6 by default).
    pub h1_connections_per_origin: usize,
    /// The page's origin, so that absolute same-origin URLs in HTML and CSS are followed.
    pub origin: Option<Origin>,
}

impl LoadConfig {
    /// A configuration with the defaults: no stream limit, 6 HTTP/1.1 connections, no origin.
    pub fn new(protocol: Protocol) -> LoadConfig {
        LoadConfig {
            protocol,
            max_streams: None,
            h1_connections_per_origin: H1_CONNECTIONS_PER_ORIGIN,
            origin: None,
        }
    }
}

/// What the shell should do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Open a connection (TCP+TLS or QUIC) with this id; report [`LoadPlan::connection_ready`].
    OpenConnection(ConnId),
    /// Send a GET for `path` on `conn`; report [`LoadPlan::response_complete`].
    SendRequest {
        /// The connection, ready and (for HTTP/1.1) idle.
        conn: ConnId,
        /// The URL path.
        path: String,
    },
    /// Every discovered object has arrived: the page is loaded. Returned once.
    Done,
}

/// What the plan knows about one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectRecord {
    /// URL path.
    pub path: String,
    /// Its role (decides parsing and priority).
    pub kind: ObjectKind,
    /// The document that referenced it; `None` for the root.
    pub parent: Option<String>,
    /// When it was discovered (its request became wanted): the start of HAR "blocked".
    pub discovered_at: Duration,
    /// When its (last) request was handed to the shell.
    pub requested_at: Option<Duration>,
    /// When its response completed.
    pub completed_at: Option<Duration>,
    /// The connection of its (last) request.
    pub conn: Option<ConnId>,
    /// Whether it was the first request on its connection (it waited for that connection's
    /// handshakes, which HAR books as its "connect"/"ssl" time).
    pub first_on_connection: bool,
    /// How many times it was requested again because its connection closed before the response.
    pub retries: u32,
}

/// How long a request waited before it was sent, split the way HAR books it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Queueing {
    /// Waiting for a connection or a stream slot (HAR `blocked`): discovery to request, minus
    /// `handshake`.
    pub blocked: Duration,
    /// For the first request on a connection: the part of the connection's set-up it waited for
    /// (from the later of its discovery and the connection's opening, to the connection's
    /// readiness). The shell splits it into HAR `connect` and `ssl` with its own measurements.
    /// Zero on a reused connection.
    pub handshake: Duration,
}

/// What the plan knows about one connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnRecord {
    /// Its id.
    pub id: ConnId,
    /// When the plan asked for it.
    pub opened_at: Duration,
    /// When it became ready.
    pub ready_at: Option<Duration>,
    /// When it closed.
    pub closed_at: Option<Duration>,
    /// Requests sent on it.
    pub requests: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ObjState {
    Waiting,
    InFlight(ConnId),
    Complete,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ConnState {
    Connecting,
    Ready,
    Closed,
}

impl ConnState {
    fn name(self) -> &'static str {
        match self {
            ConnState::Connecting => "connecting",
            ConnState::Ready => "ready",
            ConnState::Closed => "closed",
        }
    }
}

#[derive(Debug, Clone)]
struct Conn {
    record: ConnRecord,
    state: ConnState,
    in_flight: usize,
}

/// The loader's state machine for one page load.
#[derive(Debug, Clone)]
pub struct LoadPlan {
    config: LoadConfig,
    objects: Vec<ObjectRecord>,
    states: Vec<ObjState>,
    by_path: HashMap<String, usize>,
    /// Waiting requests as (priority, object index): the smallest goes first.
    waiting: BTreeSet<(u8, usize)>,
    conns: Vec<Conn>,
    done_reported: bool,
}

/// Lower is sooner. Render-blocking resources first, as Chromium does.
fn priority(kind: ObjectKind) -> u8 {
    match kind {
        ObjectKind::Html | ObjectKind::Stylesheet | ObjectKind::Font => 0,
        ObjectKind::Script => 1,
        ObjectKind::Image | ObjectKind::Other => 2,
    }
}

impl LoadPlan {
    /// A plan with nothing discovered yet; start it with `object_discovered(t, "/index.html", None)`.
    pub fn new(config: LoadConfig) -> Result<LoadPlan, ScheduleError> {
        if config.max_streams == Some(0) {
            return Err(ScheduleError::ZeroMaxStreams);
        }
        if config.h1_connections_per_origin == 0 {
            return Err(ScheduleError::ZeroConnections);
        }
        Ok(LoadPlan {
            config,
            objects: Vec::new(),
            states: Vec::new(),
            by_path: HashMap::new(),
            waiting: BTreeSet::new(),
            conns: Vec::new(),
            done_reported: false,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &LoadConfig {
        &self.config
    }

    /// An object to load, referenced by `parent` (`None` for the root document). Its kind comes from
    /// its path. Returns whether it was new (a path is loaded once).
    pub fn object_discovered(&mut self, now: Duration, path: &str, parent: Option<&str>) -> bool {
        let kind = if parent.is_none() {
            ObjectKind::Html
        } else {
            ObjectKind::from_path(path)
        };
        self.discover(now, path, kind, parent)
    }

    /// Like [`LoadPlan::object_discovered`] with the kind given (e.g. a `<link rel=stylesheet>` to
    /// `style.php`).
    pub fn discover(
        &mut self,
        now: Duration,
        path: &str,
        kind: ObjectKind,
        parent: Option<&str>,
    ) -> bool {
        if self.by_path.contains_key(path) {
            return false;
        }
        let index = self.objects.len();
        self.objects.push(ObjectRecord {
            path: path.to_string(),
            kind,
            parent: parent.map(str::to_string),
            discovered_at: now,
            requested_at: None,
            completed_at: None,
            conn: None,
            first_on_connection: false,
            retries: 0,
        });
        self.states.push(ObjState::Waiting);
        self.by_path.insert(path.to_string(), index);
        self.waiting.insert((priority(kind), index));
        true
    }

    /// A connection finished its handshakes.
    pub fn connection_ready(&mut self, now: Duration, conn: ConnId) -> Result<(), ScheduleError> {
        let c = self.conn_mut(conn)?;
        if c.state != ConnState::Connecting {
            return Err(ScheduleError::NotConnecting {
                conn,
                state: c.state.name(),
            });
        }
        c.state = ConnState::Ready;
        c.record.ready_at = Some(now);
        Ok(())
    }

    /// A connection closed (or failed). Requests in flight on it wait again and are re-sent on
    /// another connection (counted in [`ObjectRecord::retries`]).
    pub fn connection_closed(&mut self, now: Duration, conn: ConnId) -> Result<(), ScheduleError> {
        let c = self.conn_mut(conn)?;
        if c.state == ConnState::Closed {
            return Err(ScheduleError::AlreadyClosed(conn));
        }
        c.state = ConnState::Closed;
        c.record.closed_at = Some(now);
        c.in_flight = 0;
        for (i, state) in self.states.iter_mut().enumerate() {
            if *state == ObjState::InFlight(conn) {
                *state = ObjState::Waiting;
                self.objects[i].retries += 1;
                self.waiting.insert((priority(self.objects[i].kind), i));
            }
        }
        Ok(())
    }

    /// The response for `path` on `conn` has fully arrived. HTML and CSS bodies are parsed and the
    /// objects they reference are discovered (at `now`, with `path` as their parent).
    pub fn response_complete(
        &mut self,
        now: Duration,
        conn: ConnId,
        path: &str,
        body: &[u8],
    ) -> Result<(), ScheduleError> {
        let not_in_flight = || ScheduleError::NotInFlight {
            conn,
            path: path.to_string(),
        };
        let index = *self.by_path.get(path).ok_or_else(not_in_flight)?;
        if self.states[index] != ObjState::InFlight(conn) {
            return Err(not_in_flight());
        }
        self.states[index] = ObjState::Complete;
        self.objects[index].completed_at = Some(now);
        let c = self.conn_mut(conn)?;
        c.in_flight = c.in_flight.saturating_sub(1);

        let kind = self.objects[index].kind;
        if kind.is_parsed() {
            for r in discover_body(path, kind, body, self.config.origin.as_ref()) {
                self.discover(now, &r.path, r.kind, Some(path));
            }
        }
        Ok(())
    }

    /// The next thing to do, or `None` until the next event. Call until `None` after every event.
    pub fn poll_action(&mut self, now: Duration) -> Option<Action> {
        if self.done_reported {
            return None;
        }
        if !self.waiting.is_empty() {
            let action = if self.config.protocol.is_multiplexed() {
                self.poll_multiplexed(now)
            } else {
                self.poll_h1(now)
            };
            if action.is_some() {
                return action;
            }
        }
        if !self.objects.is_empty() && self.states.iter().all(|s| *s == ObjState::Complete) {
            self.done_reported = true;
            return Some(Action::Done);
        }
        None
    }

    /// Every action available now, in order (convenience over [`LoadPlan::poll_action`]).
    pub fn drain_actions(&mut self, now: Duration) -> Vec<Action> {
        std::iter::from_fn(|| self.poll_action(now)).collect()
    }

    fn poll_h1(&mut self, now: Duration) -> Option<Action> {
        // Reuse an idle connection first: no handshake to pay.
        if let Some(conn) = self
            .conns
            .iter()
            .find(|c| c.state == ConnState::Ready && c.in_flight == 0)
            .map(|c| c.record.id)
        {
            return self.send_next(now, conn);
        }
        let connecting = self
            .conns
            .iter()
            .filter(|c| c.state == ConnState::Connecting)
            .count();
        let live = self
            .conns
            .iter()
            .filter(|c| c.state != ConnState::Closed)
            .count();
        if self.waiting.len() > connecting && live < self.config.h1_connections_per_origin {
            return Some(self.open(now));
        }
        None
    }

    fn poll_multiplexed(&mut self, now: Duration) -> Option<Action> {
        let live = self
            .conns
            .iter()
            .rev()
            .find(|c| c.state != ConnState::Closed);
        match live {
            None => Some(self.open(now)),
            Some(c)
                if c.state == ConnState::Ready
                    && self.config.max_streams.is_none_or(|m| c.in_flight < m) =>
            {
                let conn = c.record.id;
                self.send_next(now, conn)
            }
            Some(_) => None,
        }
    }

    fn open(&mut self, now: Duration) -> Action {
        let id = ConnId(self.conns.len() as u64);
        self.conns.push(Conn {
            record: ConnRecord {
                id,
                opened_at: now,
                ready_at: None,
                closed_at: None,
                requests: 0,
            },
            state: ConnState::Connecting,
            in_flight: 0,
        });
        Action::OpenConnection(id)
    }

    fn send_next(&mut self, now: Duration, conn: ConnId) -> Option<Action> {
        let (_, index) = self.waiting.pop_first()?;
        let c = &mut self.conns[conn.0 as usize];
        c.in_flight += 1;
        c.record.requests += 1;
        let first = c.record.requests == 1;
        let record = &mut self.objects[index];
        record.requested_at = Some(now);
        record.conn = Some(conn);
        record.first_on_connection = first;
        self.states[index] = ObjState::InFlight(conn);
        Some(Action::SendRequest {
            conn,
            path: record.path.clone(),
        })
    }

    fn conn_mut(&mut self, conn: ConnId) -> Result<&mut Conn, ScheduleError> {
        usize::try_from(conn.0)
            .ok()
            .and_then(|i| self.conns.get_mut(i))
            .ok_or(ScheduleError::UnknownConnection(conn))
    }

    /// Whether every discovered object has arrived.
    pub fn is_done(&self) -> bool {
        !self.objects.is_empty() && self.states.iter().all(|s| *s == ObjState::Complete)
    }

    /// The page load time: when the last object arrived, once all have.
    pub fn page_load_time(&self) -> Option<Duration> {
        if !self.is_done() {
            return None;
        }
        self.objects.iter().filter_map(|o| o.completed_at).max()
    }

    /// How long the request for `path` waited before it was sent; `None` if it was not sent.
    pub fn queueing(&self, path: &str) -> Option<Queueing> {
        let o = self.object(path)?;
        let requested = o.requested_at?;
        let waited = requested.saturating_sub(o.discovered_at);
        let handshake = match (o.first_on_connection, o.conn) {
            (true, Some(conn)) => {
                let c = &self.conns.get(usize::try_from(conn.0).ok()?)?.record;
                let from = o.discovered_at.max(c.opened_at);
                c.ready_at
                    .map_or(Duration::ZERO, |ready| ready.saturating_sub(from))
            }
            _ => Duration::ZERO,
        };
        let handshake = handshake.min(waited);
        Some(Queueing {
            blocked: waited - handshake,
            handshake,
        })
    }

    /// Every object in discovery order.
    pub fn objects(&self) -> &[ObjectRecord] {
        &self.objects
    }

    /// The record of one object.
    pub fn object(&self, path: &str) -> Option<&ObjectRecord> {
        self.by_path.get(path).map(|&i| &self.objects[i])
    }

    /// Every connection in the order opened.
    pub fn connections(&self) -> Vec<&ConnRecord> {
        self.conns.iter().map(|c| &c.record).collect()
    }

    /// Connections not closed (connecting or ready).
    pub fn live_connections(&self) -> usize {
        self.conns
            .iter()
            .filter(|c| c.state != ConnState::Closed)
            .count()
    }

    /// Requests in flight on a connection (0 for unknown ones).
    pub fn in_flight(&self, conn: ConnId) -> usize {
        usize::try_from(conn.0)
            .ok()
            .and_then(|i| self.conns.get(i))
            .map_or(0, |c| c.in_flight)
    }

    /// Requests discovered but not yet sent.
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }
}
