//! The loader's scheduler in virtual time: a tiny discrete-event network (handshake and response
//! delays, no sockets) drives the plan and checks its rules after every action.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::path::Path;
use std::time::Duration;

use quiclab_page::schedule::{H1_CONNECTIONS_PER_ORIGIN, ScheduleError};
use quiclab_page::{Action, ConnId, LoadConfig, LoadPlan, Protocol, builtin, load_dir};

const MS: Duration = Duration::from_millis(1);

/// A fake network: connection set-up takes `handshake`, a response `rtt + bytes / rate`.
struct Net {
    handshake: Duration,
    rtt: Duration,
    bytes_per_ms: u64,
}

const NET: Net = Net {
    handshake: Duration::from_millis(100),
    rtt: Duration::from_millis(50),
    bytes_per_ms: 375, // 3 Mbit/s
};

enum Event {
    Ready(ConnId),
    Complete(ConnId, String),
}

/// What a run observed.
#[derive(Debug, Default)]
struct Stats {
    opened: usize,
    max_live: usize,
    max_in_flight_total: usize,
    requests: usize,
    done: usize,
    end: Duration,
}

/// Runs a load of `bodies` (URL path → body; missing paths answer with an empty body, like a 404)
/// and checks the scheduler's rules after every action.
fn run(config: LoadConfig, bodies: &HashMap<String, Vec<u8>>) -> (LoadPlan, Stats) {
    let protocol = config.protocol;
    let max_streams = config.max_streams;
    let mut plan = LoadPlan::new(config).expect("valid config");
    let mut stats = Stats::default();
    let mut queue: BinaryHeap<Reverse<(Duration, u64)>> = BinaryHeap::new();
    let mut events: HashMap<u64, Event> = HashMap::new();
    let mut seq = 0u64;
    let mut ready: HashMap<ConnId, bool> = HashMap::new();
    let mut in_flight: HashMap<ConnId, usize> = HashMap::new();
    let mut now = Duration::ZERO;

    assert!(plan.object_discovered(now, "/index.html", None));
    loop {
        while let Some(action) = plan.poll_action(now) {
            match action {
                Action::OpenConnection(conn) => {
                    stats.opened += 1;
                    assert!(ready.insert(conn, false).is_none(), "{conn} opened twice");
                    seq += 1;
                    events.insert(seq, Event::Ready(conn));
                    queue.push(Reverse((now + NET.handshake, seq)));
                }
                Action::SendRequest { conn, path } => {
                    stats.requests += 1;
                    assert_eq!(
                        ready.get(&conn),
                        Some(&true),
                        "request on {conn} before it is ready"
                    );
                    let n = in_flight.entry(conn).or_default();
                    *n += 1;
                    if protocol == Protocol::H1 {
                        assert_eq!(*n, 1, "h1: more than one request in flight on {conn}");
                    }
                    let size = bodies.get(&path).map_or(0, Vec::len) as u64;
                    seq += 1;
                    events.insert(seq, Event::Complete(conn, path));
                    queue.push(Reverse((
                        now + NET.rtt + MS * (size / NET.bytes_per_ms) as u32,
                        seq,
                    )));
                }
                Action::Done => stats.done += 1,
            }
            let live = plan.live_connections();
            stats.max_live = stats.max_live.max(live);
            match protocol {
                Protocol::H1 => assert!(live <= H1_CONNECTIONS_PER_ORIGIN, "{live} h1 connections"),
                Protocol::H2 | Protocol::H3 => {
                    assert!(plan.connections().len() <= 1, "multiplexed uses one")
                }
            }
            let total: usize = in_flight.values().sum();
            stats.max_in_flight_total = stats.max_in_flight_total.max(total);
            if let Some(m) = max_streams
                && protocol != Protocol::H1
            {
                assert!(total <= m, "{total} streams in flight, max {m}");
            }
            for (conn, n) in &in_flight {
                assert_eq!(
                    plan.in_flight(*conn),
                    *n,
                    "plan and network agree on {conn}"
                );
            }
        }
        let Some(Reverse((at, id))) = queue.pop() else {
            break;
        };
        now = at;
        match events.remove(&id).expect("event") {
            Event::Ready(conn) => {
                ready.insert(conn, true);
                plan.connection_ready(now, conn).expect("ready");
            }
            Event::Complete(conn, path) => {
                *in_flight.get_mut(&conn).expect("in flight") -= 1;
                let body = bodies.get(&path).cloned().unwrap_or_default();
                plan.response_complete(now, conn, &path, &body)
                    .expect("complete");
            }
        }
    }
    stats.end = now;
    (plan, stats)
}

fn builtin_bodies(name: &str) -> HashMap<String, Vec<u8>> {
    builtin(name)
        .expect("built in")
        .generate()
        .into_iter()
        .collect()
}

fn dir_bodies(dir: &Path) -> HashMap<String, Vec<u8>> {
    let page = load_dir(dir).expect("fixture loads");
    page.objects()
        .iter()
        .map(|o| (o.path.clone(), page.read(&o.path).expect("readable")))
        .collect()
}

fn config(protocol: Protocol, max_streams: Option<usize>) -> LoadConfig {
    LoadConfig {
        max_streams,
        ..LoadConfig::new(protocol)
    }
}

#[test]
fn h1_never_exceeds_six_connections_on_the_large_page() {
    let bodies = builtin_bodies("carlucci-large");
    let (plan, stats) = run(config(Protocol::H1, None), &bodies);
    assert_eq!(stats.done, 1, "Done exactly once");
    assert!(plan.is_done());
    assert_eq!(plan.objects().len(), 218);
    assert_eq!(stats.requests, 218, "each object requested once");
    assert_eq!(stats.opened, 6, "six connections, opened on demand");
    assert_eq!(stats.max_live, 6);
    assert_eq!(stats.max_in_flight_total, 6);
    for o in plan.objects() {
        assert!(o.completed_at.is_some(), "{}", o.path);
        assert!(o.requested_at >= Some(o.discovered_at));
    }
    // Every connection carried requests; the first request on each waited for its handshake.
    assert!(plan.connections().iter().all(|c| c.requests > 0));
    assert_eq!(
        plan.objects()
            .iter()
            .filter(|o| o.first_on_connection)
            .count(),
        6
    );
    assert_eq!(plan.page_load_time(), Some(stats.end));
}

#[test]
fn h2_and_h3_use_one_connection_and_send_everything_at_once() {
    for protocol in [Protocol::H2, Protocol::H3] {
        let bodies = builtin_bodies("carlucci-large");
        let (plan, stats) = run(config(protocol, None), &bodies);
        assert_eq!(stats.done, 1);
        assert_eq!(stats.opened, 1, "{protocol:?}");
        assert_eq!(plan.connections().len(), 1);
        assert_eq!(stats.requests, 218);
        // All 217 images in flight together once index.html is parsed.
        assert_eq!(stats.max_in_flight_total, 217, "{protocol:?}");
        let index_done = plan
            .object("/index.html")
            .and_then(|o| o.completed_at)
            .expect("index");
        for o in plan.objects().iter().skip(1) {
            assert_eq!(
                o.requested_at,
                Some(index_done),
                "{} sent as soon as discovered",
                o.path
            );
        }
    }
}

#[test]
fn max_streams_is_respected() {
    for (protocol, m) in [(Protocol::H3, 6), (Protocol::H2, 1), (Protocol::H3, 100)] {
        let bodies = builtin_bodies("carlucci-medium");
        let (plan, stats) = run(config(protocol, Some(m)), &bodies);
        assert!(plan.is_done());
        assert_eq!(
            stats.max_in_flight_total,
            m.min(47),
            "{protocol:?} max_streams {m}"
        );
        assert_eq!(stats.opened, 1);
    }
    // h1 ignores max_streams: its concurrency is its connections.
    let (_, stats) = run(
        config(Protocol::H1, Some(2)),
        &builtin_bodies("carlucci-small"),
    );
    assert_eq!(stats.max_live, 6);
    assert_eq!(
        LoadPlan::new(config(Protocol::H3, Some(0))).map(|_| ()),
        Err(ScheduleError::ZeroMaxStreams)
    );
}

#[test]
fn chain_is_requested_in_order() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/chain");
    let bodies = dir_bodies(&dir);
    for protocol in [Protocol::H1, Protocol::H2, Protocol::H3] {
        let (plan, stats) = run(config(protocol, None), &bodies);
        assert_eq!(stats.done, 1, "{protocol:?}");
        assert_eq!(
            plan.objects().len(),
            bodies.len(),
            "{protocol:?}: every object found"
        );
        let at = |path: &str| {
            plan.object(path)
                .unwrap_or_else(|| panic!("{path} discovered"))
        };
        for (parent, child) in [
            ("/index.html", "/css/site.css"),
            ("/css/site.css", "/css/fonts.css"),
            ("/css/site.css", "/img/bg.png"),
            ("/css/fonts.css", "/fonts/lab.woff2"),
        ] {
            let (p, c) = (at(parent), at(child));
            assert_eq!(c.parent.as_deref(), Some(parent));
            assert!(
                c.requested_at >= p.completed_at,
                "{protocol:?}: {child} requested before {parent} arrived"
            );
            assert_eq!(c.discovered_at, p.completed_at.expect("done"));
        }
        // The chain's depth shows in the load time: four round trips of documents at least.
        assert!(plan.page_load_time().expect("done") >= NET.handshake + NET.rtt * 4);
    }
}

#[test]
fn h1_opens_connections_only_for_waiting_requests() {
    let mut plan = LoadPlan::new(LoadConfig::new(Protocol::H1)).expect("valid");
    let t = Duration::ZERO;
    plan.object_discovered(t, "/index.html", None);
    assert_eq!(
        plan.drain_actions(t),
        vec![Action::OpenConnection(ConnId(0))]
    );
    // One request waiting, one connection coming for it: nothing more to do.
    assert_eq!(plan.poll_action(t), None);
    plan.connection_ready(100 * MS, ConnId(0)).expect("ready");
    assert_eq!(
        plan.drain_actions(100 * MS),
        vec![Action::SendRequest {
            conn: ConnId(0),
            path: "/index.html".into()
        }]
    );
    // Two images: the idle connection is reused for the first, one new connection for the second.
    plan.response_complete(
        150 * MS,
        ConnId(0),
        "/index.html",
        b"<img src=a.png><img src=b.png>",
    )
    .expect("complete");
    assert_eq!(
        plan.drain_actions(150 * MS),
        vec![
            Action::SendRequest {
                conn: ConnId(0),
                path: "/a.png".into()
            },
            Action::OpenConnection(ConnId(1)),
        ]
    );
    // a.png arrives before connection 1 is ready: b.png goes on the idle connection 0 (reuse first)…
    plan.response_complete(200 * MS, ConnId(0), "/a.png", b"")
        .expect("complete");
    assert_eq!(
        plan.drain_actions(200 * MS),
        vec![Action::SendRequest {
            conn: ConnId(0),
            path: "/b.png".into()
        }]
    );
    // …and connection 1 stays idle when it comes up.
    plan.connection_ready(250 * MS, ConnId(1)).expect("ready");
    assert_eq!(plan.drain_actions(250 * MS), vec![]);
    plan.response_complete(260 * MS, ConnId(0), "/b.png", b"")
        .expect("complete");
    assert_eq!(plan.drain_actions(260 * MS), vec![Action::Done]);
    assert_eq!(plan.poll_action(300 * MS), None, "Done is reported once");
    assert_eq!(plan.page_load_time(), Some(260 * MS));
    // HAR's split of the time before each request.
    let q = |path: &str| plan.queueing(path).map(|q| (q.blocked, q.handshake));
    assert_eq!(q("/index.html"), Some((Duration::ZERO, 100 * MS)));
    assert_eq!(q("/a.png"), Some((Duration::ZERO, Duration::ZERO)));
    assert_eq!(q("/b.png"), Some((50 * MS, Duration::ZERO)));
    assert_eq!(q("/nope.png"), None);
}

#[test]
fn render_blocking_objects_go_first() {
    // One connection, so the order of requests is the priority order.
    let mut cfg = LoadConfig::new(Protocol::H1);
    cfg.h1_connections_per_origin = 1;
    let mut plan = LoadPlan::new(cfg).expect("valid");
    let t = Duration::ZERO;
    plan.object_discovered(t, "/index.html", None);
    plan.drain_actions(t);
    plan.connection_ready(t, ConnId(0)).expect("ready");
    plan.drain_actions(t);
    let html = br#"<img src=a.png><script src=app.js></script><img src=b.png><link rel=stylesheet href=s.css>"#;
    plan.response_complete(t, ConnId(0), "/index.html", html)
        .expect("complete");
    let mut order = Vec::new();
    loop {
        match plan.poll_action(t) {
            Some(Action::SendRequest { conn, path }) => {
                order.push(path.clone());
                plan.response_complete(t, conn, &path, b"")
                    .expect("complete");
            }
            Some(Action::Done) | None => break,
            Some(other) => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(order, vec!["/s.css", "/app.js", "/a.png", "/b.png"]);
}

#[test]
fn closed_connections_requeue_their_requests() {
    let mut plan = LoadPlan::new(LoadConfig::new(Protocol::H2)).expect("valid");
    let t = Duration::ZERO;
    plan.object_discovered(t, "/index.html", None);
    plan.drain_actions(t);
    plan.connection_ready(t, ConnId(0)).expect("ready");
    plan.drain_actions(t);
    plan.response_complete(
        t,
        ConnId(0),
        "/index.html",
        b"<img src=a.png><img src=b.png>",
    )
    .expect("complete");
    assert_eq!(plan.drain_actions(t).len(), 2);
    plan.connection_closed(10 * MS, ConnId(0)).expect("closed");
    assert_eq!(plan.waiting(), 2);
    assert_eq!(
        plan.drain_actions(10 * MS),
        vec![Action::OpenConnection(ConnId(1))]
    );
    plan.connection_ready(20 * MS, ConnId(1)).expect("ready");
    let actions = plan.drain_actions(20 * MS);
    assert_eq!(actions.len(), 2);
    assert!(actions.iter().all(|a| matches!(
        a,
        Action::SendRequest {
            conn: ConnId(1),
            ..
        }
    )));
    assert_eq!(plan.object("/a.png").map(|o| o.retries), Some(1));
    assert_eq!(
        plan.connection_closed(30 * MS, ConnId(0)),
        Err(ScheduleError::AlreadyClosed(ConnId(0)))
    );
}

#[test]
fn events_that_do_not_fit_are_errors() {
    let mut plan = LoadPlan::new(LoadConfig::new(Protocol::H1)).expect("valid");
    let t = Duration::ZERO;
    assert_eq!(
        plan.poll_action(t),
        None,
        "nothing discovered: not done either"
    );
    plan.object_discovered(t, "/index.html", None);
    assert!(
        !plan.object_discovered(t, "/index.html", None),
        "a path is loaded once"
    );
    plan.drain_actions(t);
    assert_eq!(
        plan.connection_ready(t, ConnId(7)),
        Err(ScheduleError::UnknownConnection(ConnId(7)))
    );
    plan.connection_ready(t, ConnId(0)).expect("ready");
    assert_eq!(
        plan.connection_ready(t, ConnId(0)),
        Err(ScheduleError::NotConnecting {
            conn: ConnId(0),
            state: "ready"
        })
    );
    let err = plan
        .response_complete(t, ConnId(0), "/index.html", b"")
        .expect_err("not sent yet");
    assert!(err.to_string().contains("/index.html"), "{err}");
    plan.drain_actions(t);
    assert!(plan.response_complete(t, ConnId(0), "/other", b"").is_err());
    assert!(
        plan.response_complete(t, ConnId(0), "/index.html", b"")
            .is_ok()
    );
    assert!("h4".parse::<Protocol>().is_err());
    assert_eq!("HTTP/3".parse::<Protocol>().ok(), Some(Protocol::H3));
    assert_eq!(Protocol::H2.har_version(), "h2");
}
