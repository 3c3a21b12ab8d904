//! What the writers write, the runner's readers read: the emulator's packet log (quiclab-lab) and
//! the server's congestion samples (quiclab-stacks) through `quiclab_runner::series`, on one time
//! axis (seconds since the emulator started).

use std::time::Duration;

use quiclab_lab::emulator::Direction;
use quiclab_lab::packet_log::epoch_monotonic_ns as log_epoch_monotonic_ns;
use quiclab_lab::packet_log::{LogEvent, LogWriter};
use quiclab_runner::series::{cwnd_series, queue_series};

fn temp(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("quiclab-series-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

const MS: u64 = 1_000_000;

#[test]
fn the_packet_log_writer_and_the_queue_reader_agree() {
    let dir = temp("log");
    let path = dir.join("link.log");
    let mut w = LogWriter::create(
        &path,
        &quiclab_lab::os::Clock::start(),
        &["downlink: test".to_string()],
    )
    .unwrap();
    let down = Direction::Downlink;
    // Two 1500-byte packets arrive at 1 ms and 2 ms; a third is dropped at the queue; an uplink
    // packet is ignored. Propagation delay 25 ms; the first waits 1.2 ms, the second 1.7 ms.
    for ev in [
        LogEvent::Arrival {
            t: MS,
            direction: down,
            bytes: 1500,
        },
        LogEvent::Arrival {
            t: 2 * MS,
            direction: down,
            bytes: 1500,
        },
        LogEvent::Arrival {
            t: 2 * MS + 10_000,
            direction: down,
            bytes: 1500,
        },
        LogEvent::DroppedQueue {
            t: 2 * MS + 10_000,
            direction: down,
            bytes: 1500,
        },
        LogEvent::Arrival {
            t: 3 * MS,
            direction: Direction::Uplink,
            bytes: 52,
        },
        LogEvent::Delivered {
            t: 27 * MS + 200_000,
            direction: down,
            bytes: 1500,
            one_way: 26 * MS + 200_000,
            lateness: 3_000,
        },
        LogEvent::Delivered {
            t: 28 * MS + 700_000,
            direction: down,
            bytes: 1500,
            one_way: 26 * MS + 700_000,
            lateness: 1_000,
        },
    ] {
        w.write(&ev).unwrap();
    }
    w.finish().unwrap();
    let text = std::fs::read_to_string(&path).unwrap();

    // The monotonic epoch lies just before now.
    let epoch_mono = log_epoch_monotonic_ns(&text).expect("epoch line");
    let now = quiclab_stacks::cwnd::monotonic_ns();
    assert!(
        epoch_mono <= now && now - epoch_mono < 10_000_000_000,
        "{epoch_mono} vs {now}"
    );

    let series = queue_series("k", &text, 25_000.0);
    let delay = series
        .iter()
        .find(|s| s.name == "queue_delay_ms")
        .expect("delay series");
    assert_eq!(delay.points.len(), 2);
    let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
    assert!(
        close(delay.points[0].0, 0.0272) && close(delay.points[0].1, 1.2),
        "{:?}",
        delay.points
    );
    assert!(close(delay.points[1].1, 1.7), "{:?}", delay.points);
    let queue = series
        .iter()
        .find(|s| s.name == "queue_bytes")
        .expect("queue series");
    // +1500 at 1 ms, +1500 at 2 ms (the dropped one never entered), −1500 at 2.2 ms, −1500 at 3.7 ms.
    let values: Vec<f64> = queue.points.iter().map(|p| p.1).collect();
    assert_eq!(values, [1500.0, 3000.0, 1500.0, 0.0], "{:?}", queue.points);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_cwnd_writer_and_the_cwnd_reader_agree() {
    use std::os::fd::AsRawFd;
    let dir = temp("cwnd");
    let path = dir.join("cwnd.csv");
    let epoch = quiclab_stacks::cwnd::monotonic_ns();
    let log = quiclab_stacks::cwnd::CwndLog::create(&path).unwrap();
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let small = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (_small_peer, _) = l.accept().unwrap();
    let mut busy = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (mut b, _) = l.accept().unwrap();
    // The connection that sent the most bytes is the measured one.
    use std::io::{Read, Write};
    let reader = std::thread::spawn(move || {
        // Until the writer shuts its side down.
        let mut buf = vec![0u8; 1 << 16];
        while b.read(&mut buf).unwrap() > 0 {}
    });
    let (c_small, c_busy) = (log.connection_id(), log.connection_id());
    for _ in 0..3 {
        log.sample_tcp(c_small, 1, small.as_raw_fd());
        busy.write_all(&vec![7u8; 1 << 18]).unwrap();
        log.sample_tcp(c_busy, 2, busy.as_raw_fd());
        std::thread::sleep(Duration::from_millis(2));
    }
    log.sample_tcp(c_busy, 2, busy.as_raw_fd());
    busy.shutdown(std::net::Shutdown::Write).unwrap();
    reader.join().unwrap();
    log.flush();
    let csv = std::fs::read_to_string(&path).unwrap();
    let s = cwnd_series("k", &csv, epoch).expect("a cwnd series");
    // Of two connections the busiest is drawn, and its label says so.
    assert!(
        s.name.starts_with("cwnd_bytes@connection ") && s.name.ends_with(", the busiest of 2"),
        "{}",
        s.name
    );
    assert_eq!(s.points.len(), 4, "the busy connection's 4 samples: {csv}");
    for (t, cwnd) in &s.points {
        assert!(*t >= 0.0 && *t < 10.0, "time on the emulator's axis: {t}");
        assert!(*cwnd > 0.0, "{cwnd}");
    }
    assert!(s.points.windows(2).all(|w| w[0].0 <= w[1].0));
    let _ = std::fs::remove_dir_all(&dir);
}
