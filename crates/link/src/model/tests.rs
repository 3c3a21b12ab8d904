//! Virtual-time tests of the link model. Every expected time is computed by hand from the
//! semantics in the module documentation.

use super::*;
use crate::profile::ProfileStep;

const MS: Nanos = NANOS_PER_MS;
const US: Nanos = crate::NANOS_PER_US;
const S: Nanos = NANOS_PER_SEC;

fn config(rate: RateSpec) -> DirectionConfig {
    DirectionConfig {
        rate,
        delay: 0,
        loss: LossSpec::None,
        queue: QueueLimit::Unlimited,
        base_rtt: 0,
        seed: 1,
        start: 0,
        delay_compensation: 0,
        discipline: Default::default(),
        variation: Default::default(),
    }
}

fn constant(bps: u64) -> RateSpec {
    RateSpec::Constant { bps }
}

fn model(cfg: DirectionConfig) -> LinkModel {
    LinkModel::new(cfg).expect("valid configuration")
}

#[track_caller]
fn forward(verdict: Disposition) -> Departure {
    match verdict {
        Disposition::Forward(departure) => departure,
        other => panic!("expected Forward, got {other:?}"),
    }
}

fn trace(text: &str) -> Arc<DeliveryTrace> {
    Arc::new(DeliveryTrace::parse(text, "test.trace").expect("valid trace"))
}

fn profile(steps: Vec<ProfileStep>, repeat: bool) -> Arc<Profile> {
    Arc::new(Profile {
        name: "test".into(),
        steps,
        repeat,
    })
}

fn step(duration: Nanos, rate_bps: Option<u64>, delay: Nanos, loss: f64) -> ProfileStep {
    ProfileStep {
        duration,
        rate_bps,
        delay,
        loss,
    }
}

/// (service_start, service_end) of a forwarded packet.
#[track_caller]
fn service(verdict: Disposition) -> (Nanos, Nanos) {
    let departure = forward(verdict);
    (departure.service_start, departure.service_end)
}

// ---------------------------------------------------------------- constant rate

#[test]
fn constant_rate_back_to_back_is_exact() {
    let mut link = model(config(constant(10_000_000)));
    let mut last_end = 0;
    for i in 0..1000u64 {
        let departure = forward(link.on_arrival(0, 1500));
        // 1500 B at 10 Mbit/s = 1.2 ms.
        assert_eq!(departure.service_start, i * 1_200_000, "packet {i}");
        assert_eq!(departure.service_end, (i + 1) * 1_200_000, "packet {i}");
        assert_eq!(departure.deliver_at, departure.service_end, "no delay");
        assert_eq!(departure.backlogged, i > 0, "packet {i}");
        last_end = departure.service_end;
    }
    assert_eq!(last_end, 1_200 * MS);
}

#[test]
fn three_mbit_is_four_ms_per_packet() {
    let mut link = model(config(constant(3_000_000)));
    assert_eq!(service(link.on_arrival(0, 1500)), (0, 4 * MS));
    assert_eq!(service(link.on_arrival(0, 1500)), (4 * MS, 8 * MS));
}

#[test]
fn constant_rate_has_no_cumulative_drift() {
    // 1500 B at 7 Mbit/s = 1 714 285.714… ns: not a whole number of nanoseconds.
    let rate: u128 = 7_000_000;
    let mut link = model(config(constant(7_000_000)));
    let mut last_end = 0;
    for i in 1..=1000u128 {
        let departure = forward(link.on_arrival(0, 1500));
        let exact_numerator = i * 12_000 * u128::from(S);
        let exact_ceil = exact_numerator.div_ceil(rate) as Nanos;
        assert_eq!(departure.service_end, exact_ceil, "packet {i}");
        last_end = departure.service_end;
    }
    // 1000 packets take exactly 1.714285714285… s; the reported end is within 1 ns.
    let exact = 1000.0 * 12_000.0 / 7e6 * 1e9;
    assert!(
        (last_end as f64 - exact).abs() < 1.0,
        "{last_end} vs {exact}"
    );
}

#[test]
fn idle_gaps_and_backlogged_flag() {
    let mut link = model(config(constant(10_000_000)));
    let a = forward(link.on_arrival(0, 1500));
    assert_eq!(
        (a.service_start, a.service_end, a.backlogged),
        (0, 1_200 * US, false)
    );
    // Arrives after the link went idle: starts at once, not backlogged.
    let b = forward(link.on_arrival(5 * MS, 1500));
    assert_eq!(
        (b.service_start, b.service_end, b.backlogged),
        (5 * MS, 6_200 * US, false)
    );
    // Arrives while b is being served: waits for it, back to back.
    let c = forward(link.on_arrival(5_500 * US, 1500));
    assert_eq!(
        (c.service_start, c.service_end, c.backlogged),
        (6_200 * US, 7_400 * US, true)
    );
    // Arrives exactly as c finishes: no idle gap.
    let d = forward(link.on_arrival(7_400 * US, 1500));
    assert_eq!(
        (d.service_start, d.service_end, d.backlogged),
        (7_400 * US, 8_600 * US, true)
    );
    // One nanosecond of idleness breaks the backlog.
    let e = forward(link.on_arrival(8_600 * US + 1, 1500));
    assert_eq!((e.service_start, e.backlogged), (8_600 * US + 1, false));
}

#[test]
fn backlogged_flag_with_fractional_service_times() {
    // At 7 Mbit/s the first packet ends at 1 714 285.714 ns (reported 1 714 286).
    let mut link = model(config(constant(7_000_000)));
    forward(link.on_arrival(0, 1500));
    let queued = forward(link.on_arrival(1_714_285, 1500));
    assert!(queued.backlogged);
    assert_eq!(queued.service_start, 1_714_286);
    assert_eq!(queued.service_end, 3_428_572);

    let mut link = model(config(constant(7_000_000)));
    forward(link.on_arrival(0, 1500));
    let after_idle = forward(link.on_arrival(1_714_286, 1500));
    assert!(!after_idle.backlogged);
    assert_eq!(after_idle.service_start, 1_714_286);
    assert_eq!(after_idle.service_end, 3_428_572);
}

#[test]
fn delay_compensation_is_subtracted_and_saturates_at_zero() {
    // 10 Mbit/s: 1500 B take 1.2 ms; delay 25 ms minus 63 µs of compensation.
    let mut cfg = config(constant(10_000_000));
    cfg.delay = 25 * MS;
    cfg.delay_compensation = 63 * US;
    let d = forward(model(cfg.clone()).on_arrival(0, 1500));
    assert_eq!(d.deliver_at, 1200 * US + 25 * MS - 63 * US);
    // Compensation larger than the delay: delivered as soon as serialised, never earlier.
    cfg.delay = 10 * US;
    let d = forward(model(cfg).on_arrival(0, 1500));
    assert_eq!(d.deliver_at, 1200 * US);
}

#[test]
fn delay_is_added_after_serialisation() {
    let mut cfg = config(constant(10_000_000));
    cfg.delay = 25 * MS;
    let mut link = model(cfg);
    assert_eq!(forward(link.on_arrival(0, 1500)).deliver_at, 26_200 * US);
    assert_eq!(forward(link.on_arrival(0, 1500)).deliver_at, 27_400 * US);
    assert_eq!(
        forward(link.on_arrival(100 * MS, 1500)).deliver_at,
        126_200 * US
    );
}

#[test]
fn unlimited_rate_is_delay_only() {
    let mut cfg = config(RateSpec::Unlimited);
    cfg.delay = 30 * MS;
    cfg.queue = QueueLimit::Bytes(0);
    let mut link = model(cfg);
    for _ in 0..5 {
        let departure = forward(link.on_arrival(7 * MS, 1500));
        assert_eq!(departure.service_start, 7 * MS);
        assert_eq!(departure.service_end, 7 * MS);
        assert_eq!(departure.deliver_at, 37 * MS);
        assert!(!departure.backlogged);
    }
    assert_eq!(link.counters().dropped_queue_packets, 0);
    assert_eq!(link.counters().max_queue_bytes, 0);
    assert_eq!(link.summary().rate, "unlimited");
}

#[test]
fn time_going_backwards_is_clamped_not_a_panic() {
    let mut link = model(config(constant(10_000_000)));
    forward(link.on_arrival(10 * MS, 1500));
    let departure = forward(link.on_arrival(5 * MS, 1500));
    assert_eq!(departure.service_start, 11_200 * US);
    assert_eq!(link.summary().queueing_delay_us.max, 1200.0);
}

// ---------------------------------------------------------------- queue

#[test]
fn byte_limit_admits_one_in_service_plus_what_fits() {
    let mut cfg = config(constant(10_000_000));
    cfg.queue = QueueLimit::Bytes(30_000);
    let mut link = model(cfg);
    let verdicts: Vec<Disposition> = (0..100).map(|_| link.on_arrival(0, 1500)).collect();
    let forwarded = verdicts
        .iter()
        .filter(|v| matches!(v, Disposition::Forward(_)))
        .count();
    // 1 in service + 30 000 / 1500 = 20 waiting.
    assert_eq!(forwarded, 21);
    assert!(
        verdicts[..21]
            .iter()
            .all(|v| matches!(v, Disposition::Forward(_)))
    );
    assert!(
        verdicts[21..]
            .iter()
            .all(|v| *v == Disposition::DroppedQueue)
    );
    let counters = link.counters().clone();
    assert_eq!(
        counters,
        Counters {
            offered_packets: 100,
            offered_bytes: 150_000,
            forwarded_packets: 21,
            forwarded_bytes: 31_500,
            dropped_random_packets: 0,
            dropped_random_bytes: 0,
            dropped_queue_packets: 79,
            dropped_queue_bytes: 118_500,
            max_queue_bytes: 30_000,
            max_queue_packets: 20,
            ..Counters::default()
        }
    );
    assert_eq!(counters.loss_ratio(), 0.79);

    // When the second packet enters service (1.2 ms) one slot frees up, and only one.
    let refill = forward(link.on_arrival(1_200 * US, 1500));
    assert_eq!(refill.service_start, 21 * 1_200 * US);
    assert_eq!(link.on_arrival(1_200 * US, 1500), Disposition::DroppedQueue);
    // Just before the third packet starts, the queue is still full.
    assert_eq!(
        link.on_arrival(2_400 * US - 1, 1500),
        Disposition::DroppedQueue
    );
}

#[test]
fn packet_limit_counts_waiting_packets() {
    let mut cfg = config(constant(10_000_000));
    cfg.queue = QueueLimit::Packets(5);
    let mut link = model(cfg);
    let forwarded = (0..10)
        .filter(|_| matches!(link.on_arrival(0, 100), Disposition::Forward(_)))
        .count();
    assert_eq!(forwarded, 6);
    assert_eq!(link.counters().dropped_queue_packets, 4);
    assert_eq!(link.counters().max_queue_packets, 5);
    assert_eq!(link.queue_limit_packets(), Some(5));
    assert_eq!(link.queue_limit_bytes(), None);
}

#[test]
fn zero_byte_queue_is_bufferless() {
    let mut cfg = config(constant(10_000_000));
    cfg.queue = QueueLimit::Bytes(0);
    let mut link = model(cfg);
    assert!(matches!(link.on_arrival(0, 1500), Disposition::Forward(_)));
    assert_eq!(link.on_arrival(0, 1500), Disposition::DroppedQueue);
    assert_eq!(
        link.on_arrival(1_200 * US - 1, 1500),
        Disposition::DroppedQueue
    );
    // The link is idle again exactly when the first packet has left.
    assert_eq!(
        service(link.on_arrival(1_200 * US, 1500)),
        (1_200 * US, 2_400 * US)
    );
}

#[test]
fn idle_link_never_tail_drops() {
    let mut cfg = config(constant(10_000_000));
    cfg.queue = QueueLimit::Bytes(1000);
    let mut link = model(cfg);
    // Larger than the whole queue, but the link is idle: straight into service.
    assert!(matches!(link.on_arrival(0, 1500), Disposition::Forward(_)));
    assert_eq!(link.on_arrival(100 * US, 1500), Disposition::DroppedQueue);
    assert_eq!(
        service(link.on_arrival(200 * US, 900)),
        (1_200 * US, 1_920 * US)
    );
    assert_eq!(link.on_arrival(300 * US, 101), Disposition::DroppedQueue);
    assert!(matches!(
        link.on_arrival(300 * US, 100),
        Disposition::Forward(_)
    ));
    assert_eq!(link.counters().max_queue_bytes, 1000);
}

#[test]
fn random_drops_consume_no_capacity() {
    let mut cfg = config(constant(10_000_000));
    cfg.loss = LossSpec::Bernoulli(0.5);
    cfg.queue = QueueLimit::Packets(1000);
    let mut link = model(cfg);
    let mut slot = 0;
    for _ in 0..200 {
        match link.on_arrival(0, 1500) {
            Disposition::Forward(departure) => {
                assert_eq!(departure.service_start, slot * 1_200 * US);
                slot += 1;
            }
            Disposition::DroppedRandom => {}
            other => panic!("the queue is large enough: {other:?}"),
        }
    }
    let counters = link.counters();
    assert_eq!(counters.forwarded_packets, slot);
    assert_eq!(counters.dropped_random_packets, 200 - slot);
    assert_eq!(counters.dropped_random_bytes, (200 - slot) * 1500);
    assert_eq!(counters.max_queue_packets, slot - 1);
}

// ---------------------------------------------------------------- bdp

fn resolved_limit(
    rate: RateSpec,
    queue: QueueLimit,
    base_rtt: Nanos,
) -> Result<Option<u64>, ModelError> {
    let mut cfg = config(rate);
    cfg.queue = queue;
    cfg.base_rtt = base_rtt;
    LinkModel::new(cfg).map(|link| link.queue_limit_bytes())
}

#[test]
fn bdp_resolves_with_the_mean_rate() {
    assert_eq!(
        resolved_limit(constant(10_000_000), QueueLimit::Bdp(1.0), 50 * MS),
        Ok(Some(62_500))
    );
    assert_eq!(
        resolved_limit(constant(10_000_000), QueueLimit::Bdp(0.5), 50 * MS),
        Ok(Some(31_250))
    );
    assert_eq!(
        resolved_limit(constant(10_000_000), QueueLimit::Bdp(2.0), 50 * MS),
        Ok(Some(125_000))
    );
    // One opportunity per ms = 12 Mbit/s; × 50 ms = 75 000 B.
    assert_eq!(
        resolved_limit(RateSpec::Trace(trace("1\n")), QueueLimit::Bdp(1.0), 50 * MS),
        Ok(Some(75_000))
    );
    // NP2b mean rate 3.0625 Mbit/s × 100 ms / 8 = 38 281.25 B.
    let np2b = Arc::new(crate::profile::builtin("np2b-typical").unwrap());
    assert_eq!(
        resolved_limit(RateSpec::Profile(np2b), QueueLimit::Bdp(1.0), 100 * MS),
        Ok(Some(38_281))
    );
    assert_eq!(
        resolved_limit(constant(10_000_000), QueueLimit::Bytes(1234), 0),
        Ok(Some(1234))
    );
    assert_eq!(
        resolved_limit(constant(10_000_000), QueueLimit::Unlimited, 0),
        Ok(None)
    );
}

#[test]
fn bdp_errors() {
    let error = resolved_limit(RateSpec::Unlimited, QueueLimit::Bdp(1.0), 50 * MS).unwrap_err();
    assert_eq!(error, ModelError::BdpWithUnlimitedRate);
    assert!(
        error.to_string().starts_with("a queue in bdp needs a rate"),
        "{error}"
    );

    let with_unlimited_step = profile(
        vec![step(S, Some(1_000_000), 0, 0.0), step(S, None, 0, 0.0)],
        true,
    );
    let error = resolved_limit(
        RateSpec::Profile(with_unlimited_step),
        QueueLimit::Bdp(1.0),
        50 * MS,
    )
    .unwrap_err();
    assert!(
        matches!(error, ModelError::BdpWithUnlimitedProfile { .. }),
        "{error}"
    );
    assert!(
        error
            .to_string()
            .contains("profile test has unlimited steps"),
        "{error}"
    );

    let error = resolved_limit(constant(10_000_000), QueueLimit::Bdp(1.0), 0).unwrap_err();
    assert!(error.to_string().contains("resolves to 0 bytes"), "{error}");
    assert!(error.to_string().contains("rate 10mbit"), "{error}");

    let error =
        resolved_limit(constant(10_000_000), QueueLimit::Bdp(f64::NAN), 50 * MS).unwrap_err();
    assert!(matches!(error, ModelError::InvalidBdp(_)), "{error}");
    let error = resolved_limit(constant(10_000_000), QueueLimit::Bdp(-1.0), 50 * MS).unwrap_err();
    assert!(matches!(error, ModelError::InvalidBdp(_)), "{error}");
}

#[test]
fn invalid_configurations_are_errors() {
    assert_eq!(
        LinkModel::new(config(constant(0))).unwrap_err(),
        ModelError::ZeroRate
    );

    let error = LinkModel::new(config(RateSpec::Profile(profile(vec![], true)))).unwrap_err();
    assert!(error.to_string().contains("no steps"), "{error}");
    let error = LinkModel::new(config(RateSpec::Profile(profile(
        vec![step(0, None, 0, 0.0)],
        true,
    ))))
    .unwrap_err();
    assert!(error.to_string().contains("duration of 0"), "{error}");

    let mut cfg = config(constant(1_000_000));
    cfg.loss = LossSpec::Bernoulli(1.5);
    let error = LinkModel::new(cfg).unwrap_err();
    assert!(error.to_string().contains("within [0, 1]"), "{error}");
}

// ---------------------------------------------------------------- profile

#[test]
fn profile_serialisation_integrates_across_a_rate_change() {
    let steps = vec![
        step(S, Some(1_000_000), 0, 0.0),
        step(S, Some(2_000_000), 0, 0.0),
    ];
    let mut link = model(config(RateSpec::Profile(profile(steps, true))));
    // 12 000 bits from 994 ms: 6 ms at 1 Mbit/s (6000 bits), then 6000 bits at 2 Mbit/s = 3 ms.
    assert_eq!(
        service(link.on_arrival(994 * MS, 1500)),
        (994 * MS, 1003 * MS)
    );
    // Entirely in the 2 Mbit/s step.
    let second = forward(link.on_arrival(994 * MS, 1500));
    assert_eq!(
        (second.service_start, second.service_end),
        (1003 * MS, 1009 * MS)
    );
    assert!(second.backlogged);
    // Wrapping into the next cycle: 3 ms at 2 Mbit/s then 6 ms at 1 Mbit/s.
    assert_eq!(
        service(link.on_arrival(1_997 * MS, 1500)),
        (1_997 * MS, 2_006 * MS)
    );
    // Many cycles later the pattern is the same.
    assert_eq!(
        service(link.on_arrival(100 * S + 10 * MS, 1500)),
        (100 * S + 10 * MS, 100 * S + 22 * MS)
    );
}

#[test]
fn profile_serialisation_with_fractional_rates_is_exact() {
    // 7 Mbit/s then 3 Mbit/s; start 1 µs before the change: 7 bits, then 11 993 bits at
    // 3 Mbit/s = 3 997 666.67 ns.
    let steps = vec![
        step(S, Some(7_000_000), 0, 0.0),
        step(S, Some(3_000_000), 0, 0.0),
    ];
    let mut link = model(config(RateSpec::Profile(profile(steps, true))));
    assert_eq!(
        service(link.on_arrival(S - US, 1500)),
        (S - US, S + 3_997_667)
    );
    // The next packet starts at the exact (fractional) end: 3 997 666.67 + 4 000 000.
    assert_eq!(
        service(link.on_arrival(S - US, 1500)),
        (S + 3_997_667, S + 7_997_667)
    );
}

#[test]
fn profile_without_repeat_holds_the_last_step() {
    let steps = vec![
        step(S, Some(1_000_000), 0, 0.0),
        step(S, Some(2_000_000), 0, 0.0),
    ];
    let mut link = model(config(RateSpec::Profile(profile(steps, false))));
    assert_eq!(
        service(link.on_arrival(1_997 * MS, 1500)),
        (1_997 * MS, 2_003 * MS)
    );
    assert_eq!(
        service(link.on_arrival(50 * S, 1500)),
        (50 * S, 50 * S + 6 * MS)
    );
}

#[test]
fn profile_unlimited_step_drains_instantly() {
    let steps = vec![step(S, Some(1_000_000), 0, 0.0), step(S, None, 0, 0.0)];
    let mut link = model(config(RateSpec::Profile(profile(steps, true))));
    // 3 ms at 1 Mbit/s sends 3000 of 12 000 bits; the rest goes at the boundary.
    assert_eq!(service(link.on_arrival(997 * MS, 1500)), (997 * MS, S));
    assert_eq!(service(link.on_arrival(998 * MS, 1500)), (S, S));
    assert_eq!(
        service(link.on_arrival(1_500 * MS, 1500)),
        (1_500 * MS, 1_500 * MS)
    );
}

#[test]
fn profile_start_offsets_the_steps() {
    let steps = vec![
        step(S, Some(1_000_000), 0, 0.0),
        step(S, Some(2_000_000), 0, 0.0),
    ];
    let mut cfg = config(RateSpec::Profile(profile(steps, true)));
    cfg.start = 10 * S;
    let mut link = model(cfg);
    // Before the start the first step applies.
    assert_eq!(
        service(link.on_arrival(5 * S, 1500)),
        (5 * S, 5 * S + 12 * MS)
    );
    assert_eq!(
        service(link.on_arrival(10 * S + 994 * MS, 1500)),
        (10 * S + 994 * MS, 11 * S + 3 * MS)
    );
}

#[test]
fn profile_delay_drop_keeps_fifo() {
    // 12 Mbit/s: 1500 B take 1 ms. Delay falls from 100 ms to 10 ms at 1 s.
    let steps = vec![
        step(S, Some(12_000_000), 100 * MS, 0.0),
        step(S, Some(12_000_000), 10 * MS, 0.0),
    ];
    let mut cfg = config(RateSpec::Profile(profile(steps, true)));
    cfg.delay = 999 * S; // ignored: the profile's delay applies
    let mut link = model(cfg);
    let a = forward(link.on_arrival(998 * MS, 1500));
    assert_eq!((a.service_end, a.deliver_at), (999 * MS, 1_099 * MS));
    // Ends exactly at the boundary, so the new 10 ms delay applies, but it may not
    // overtake a: it is delivered together with it.
    let b = forward(link.on_arrival(998 * MS, 1500));
    assert_eq!((b.service_end, b.deliver_at), (S, 1_099 * MS));
    let c = forward(link.on_arrival(1_500 * MS, 1500));
    assert_eq!((c.service_end, c.deliver_at), (1_501 * MS, 1_511 * MS));
    assert_eq!(link.summary().delay, "per profile step (mean 55ms)");
}

#[test]
fn profile_loss_applies_per_step_at_arrival() {
    let steps = vec![
        step(S, Some(1_000_000_000), 0, 0.0),
        step(S, Some(1_000_000_000), 0, 1.0),
    ];
    let mut cfg = config(RateSpec::Profile(profile(steps, true)));
    cfg.loss = LossSpec::Bernoulli(1.0); // ignored: the profile's loss applies
    let mut link = model(cfg);
    for ms in 0..1000 {
        assert!(
            matches!(link.on_arrival(ms * MS, 100), Disposition::Forward(_)),
            "{ms} ms"
        );
    }
    for ms in 1000..2000 {
        assert_eq!(
            link.on_arrival(ms * MS, 100),
            Disposition::DroppedRandom,
            "{ms} ms"
        );
    }
    assert!(matches!(
        link.on_arrival(2 * S, 100),
        Disposition::Forward(_)
    ));
}

// ---------------------------------------------------------------- trace

/// One opportunity every 10 ms (10, 20, 30, 40, then 50, 60, … as the trace repeats).
const EVERY_10MS: &str = "10\n20\n30\n40\n";

#[test]
fn trace_small_packets_share_an_opportunity() {
    let mut link = model(config(RateSpec::Trace(trace(EVERY_10MS))));
    assert_eq!(service(link.on_arrival(0, 500)), (10 * MS, 10 * MS));
    assert_eq!(service(link.on_arrival(0, 500)), (10 * MS, 10 * MS));
    assert_eq!(service(link.on_arrival(0, 500)), (10 * MS, 10 * MS));
    // 1500 bytes of the 10 ms opportunity are used up.
    assert_eq!(service(link.on_arrival(0, 500)), (20 * MS, 20 * MS));
}

#[test]
fn trace_large_packets_span_opportunities() {
    let mut link = model(config(RateSpec::Trace(trace(EVERY_10MS))));
    assert_eq!(service(link.on_arrival(0, 2000)), (10 * MS, 20 * MS));
    // 1000 bytes of the 20 ms opportunity are left, and this packet is queued by then.
    let shared = forward(link.on_arrival(15 * MS, 1000));
    assert_eq!(
        (shared.service_start, shared.service_end),
        (20 * MS, 20 * MS)
    );
    assert!(shared.backlogged);
    // Nothing left of the 20 ms opportunity.
    assert_eq!(service(link.on_arrival(20 * MS, 100)), (30 * MS, 30 * MS));
    // A 4000-byte packet needs three opportunities (1400 left at 30 ms, then 40, 50).
    assert_eq!(service(link.on_arrival(21 * MS, 4000)), (30 * MS, 50 * MS));
}

#[test]
fn trace_leftover_credit_is_wasted_when_the_queue_empties() {
    let mut link = model(config(RateSpec::Trace(trace(EVERY_10MS))));
    assert_eq!(service(link.on_arrival(0, 500)), (10 * MS, 10 * MS));
    let late = forward(link.on_arrival(11 * MS, 500));
    assert_eq!((late.service_start, late.service_end), (20 * MS, 20 * MS));
    assert!(!late.backlogged);
    // Opportunities at 30 and 40 ms pass with an empty queue and are lost.
    assert_eq!(service(link.on_arrival(41 * MS, 1500)), (50 * MS, 50 * MS));
}

#[test]
fn trace_arrival_at_the_opportunity_time_can_use_it() {
    let mut link = model(config(RateSpec::Trace(trace(EVERY_10MS))));
    assert_eq!(service(link.on_arrival(10 * MS, 500)), (10 * MS, 10 * MS));
    assert_eq!(service(link.on_arrival(10 * MS, 500)), (10 * MS, 10 * MS));
    assert_eq!(
        service(link.on_arrival(10 * MS + 1, 500)),
        (20 * MS, 20 * MS)
    );
}

#[test]
fn trace_wraps_around_with_its_period() {
    // Cycle k: opportunities at 5k and 5k + 5 ms, so two at every multiple of 5 ms after 0.
    let mut link = model(config(RateSpec::Trace(trace("0\n5\n"))));
    assert_eq!(service(link.on_arrival(0, 1500)), (0, 0));
    assert_eq!(service(link.on_arrival(MS, 1500)), (5 * MS, 5 * MS));
    assert_eq!(service(link.on_arrival(MS, 1500)), (5 * MS, 5 * MS));
    assert_eq!(service(link.on_arrival(MS, 1500)), (10 * MS, 10 * MS));
    // Long idle periods are skipped arithmetically.
    assert_eq!(
        service(link.on_arrival(S + 1, 1500)),
        (S + 5 * MS, S + 5 * MS)
    );
    let far = 1_000_000 * S;
    assert_eq!(service(link.on_arrival(far, 1500)), (far, far));
    assert_eq!(service(link.on_arrival(far, 1500)), (far, far));
    assert_eq!(
        service(link.on_arrival(far, 1500)),
        (far + 5 * MS, far + 5 * MS)
    );
}

#[test]
fn trace_with_several_opportunities_in_one_ms() {
    // 5, 5, 5, 10, then 15, 15, 15, 20, …
    let mut link = model(config(RateSpec::Trace(trace("5\n5\n5\n10\n"))));
    let ends: Vec<Nanos> = (0..9)
        .map(|_| service(link.on_arrival(0, 1500)).1)
        .collect();
    assert_eq!(ends, [5, 5, 5, 10, 15, 15, 15, 20, 25].map(|ms| ms * MS));
}

#[test]
fn trace_saturated_throughput_matches_the_mean_rate() {
    // Opportunities at 0, then 2 per 5 ms: packet n ends at ceil(n / 2) × 5 ms.
    let mut link = model(config(RateSpec::Trace(trace("0\n5\n"))));
    for n in 0..10_000u64 {
        let end = service(link.on_arrival(0, 1500)).1;
        assert_eq!(end, n.div_ceil(2) * 5 * MS, "packet {n}");
    }
}

#[test]
fn trace_starts_at_the_configured_start() {
    let mut cfg = config(RateSpec::Trace(trace(EVERY_10MS)));
    cfg.start = 100 * MS;
    let mut link = model(cfg);
    assert_eq!(service(link.on_arrival(0, 1500)), (110 * MS, 110 * MS));
    assert_eq!(
        service(link.on_arrival(125 * MS, 1500)),
        (130 * MS, 130 * MS)
    );
}

#[test]
fn trace_queue_counts_packets_waiting_for_an_opportunity() {
    let mut cfg = config(RateSpec::Trace(trace(EVERY_10MS)));
    cfg.queue = QueueLimit::Packets(2);
    let mut link = model(cfg);
    let verdicts: Vec<Disposition> = (0..5).map(|_| link.on_arrival(0, 1500)).collect();
    assert!(matches!(verdicts[0], Disposition::Forward(_)));
    assert!(matches!(verdicts[1], Disposition::Forward(_)));
    assert_eq!(verdicts[2..], [Disposition::DroppedQueue; 3]);
    assert_eq!(link.counters().max_queue_packets, 2);
    // At 10 ms the first packet is served, freeing a slot.
    assert_eq!(service(link.on_arrival(10 * MS, 1500)), (30 * MS, 30 * MS));
}

#[test]
fn trace_idle_link_admits_a_packet_larger_than_the_queue() {
    let mut cfg = config(RateSpec::Trace(trace(EVERY_10MS)));
    cfg.queue = QueueLimit::Bytes(1000);
    let mut link = model(cfg);
    assert_eq!(service(link.on_arrival(0, 1500)), (10 * MS, 10 * MS));
    assert_eq!(link.on_arrival(MS, 1500), Disposition::DroppedQueue);
}

// ---------------------------------------------------------------- loss

fn verdicts_with_seed(loss: LossSpec, seed: u64, packets: u64) -> Vec<Disposition> {
    let mut cfg = config(constant(1_000_000_000));
    cfg.loss = loss;
    cfg.seed = seed;
    let mut link = model(cfg);
    (0..packets)
        .map(|i| link.on_arrival(i * MS, 1500))
        .collect()
}

#[test]
fn same_seed_same_drops_different_seed_different_drops() {
    let spec = LossSpec::Bernoulli(0.1);
    assert_eq!(
        verdicts_with_seed(spec, 7, 2000),
        verdicts_with_seed(spec, 7, 2000)
    );
    assert_ne!(
        verdicts_with_seed(spec, 7, 2000),
        verdicts_with_seed(spec, 8, 2000)
    );
}

#[test]
fn bernoulli_loss_rate_is_within_the_99_percent_interval() {
    let n = 100_000u64;
    let p = 0.02;
    let dropped = verdicts_with_seed(LossSpec::Bernoulli(p), 2024, n)
        .iter()
        .filter(|v| **v == Disposition::DroppedRandom)
        .count() as f64;
    let expected = n as f64 * p;
    let half_width = 2.576 * (n as f64 * p * (1.0 - p)).sqrt();
    assert!(
        (dropped - expected).abs() <= half_width,
        "{dropped} vs {expected} ± {half_width}"
    );
}

#[test]
fn gilbert_elliott_loss_matches_its_stationary_mean() {
    let spec = LossSpec::GilbertElliott {
        p: 0.01,
        r: 0.3,
        loss_good: 0.0,
        loss_bad: 1.0,
    };
    let n = 400_000u64;
    let dropped = verdicts_with_seed(spec, 5, n)
        .iter()
        .filter(|v| **v == Disposition::DroppedRandom)
        .count() as f64;
    let measured = dropped / n as f64;
    let expected = 0.01 / 0.31 * 1.0;
    assert!(
        (measured - expected).abs() < 0.08 * expected,
        "{measured} vs {expected}"
    );
}

// ---------------------------------------------------------------- summary

#[test]
fn summary_reports_limits_descriptions_and_distributions() {
    let mut cfg = config(constant(10_000_000));
    cfg.queue = QueueLimit::Bytes(30_000);
    cfg.delay = 25 * MS;
    let mut link = model(cfg);
    for _ in 0..100 {
        link.on_arrival(0, 1500);
    }
    let summary = link.summary();
    assert_eq!(summary.rate, "10mbit");
    assert_eq!(summary.delay, "25ms");
    assert_eq!(summary.loss, "none");
    assert_eq!(summary.queue_limit_bytes, Some(30_000));
    assert_eq!(summary.queue_limit_packets, None);
    assert_eq!(&summary.counters, link.counters());
    assert_eq!(summary.loss_ratio, 0.79);
    // 21 forwarded packets waited 0, 1.2, …, 24 ms and finished 1.2 ms later.
    assert_eq!(summary.queueing_delay_us.count, 21);
    assert!(
        (summary.queueing_delay_us.mean - 12_000.0).abs() < 15.0,
        "{:?}",
        summary.queueing_delay_us
    );
    assert!((summary.queueing_delay_us.max - 24_000.0).abs() <= 24.0);
    assert!((summary.sojourn_us.max - 25_200.0).abs() <= 26.0);
    assert_eq!(summary.sojourn_us.count, 21);
    // All 100 reached the queue; the 79 dropped ones saw it full.
    assert_eq!(summary.queue_occupancy_bytes.count, 100);
    assert!((summary.queue_occupancy_bytes.max - 30_000.0).abs() <= 30.0);
    assert!((summary.queue_occupancy_bytes.p50 - 30_000.0).abs() <= 30.0);

    let trace_link = model(config(RateSpec::Trace(trace("0\n5\n"))));
    assert_eq!(trace_link.summary().rate, "trace test.trace (mean 4.8mbit)");
    let np2b = Arc::new(crate::profile::builtin("np2b-typical").unwrap());
    let profile_link = model(config(RateSpec::Profile(np2b)));
    assert_eq!(profile_link.summary().rate, "profile np2b-typical");
    assert_eq!(
        profile_link.summary().delay,
        "per profile step (mean 70.5ms)"
    );

    let mut cfg = config(constant(1_000_000));
    cfg.loss = LossSpec::GilbertElliott {
        p: 0.01,
        r: 0.3,
        loss_good: 0.0,
        loss_bad: 1.0,
    };
    assert_eq!(model(cfg).summary().loss, "ge:p=1%,r=30%,bad=100%,good=0%");

    fn assert_serialize<T: Serialize>(_: &T) {}
    assert_serialize(&summary);
}

#[test]
fn nothing_offered_means_zero_loss_ratio() {
    let link = model(config(constant(1_000_000)));
    assert_eq!(link.counters().loss_ratio(), 0.0);
    assert_eq!(link.summary().queueing_delay_us.count, 0);
}

// ---- Queue disciplines decided at dequeue (issue 27) ----

fn with_discipline(rate: RateSpec, queue: QueueLimit, name: &str, ecn: bool) -> LinkModel {
    model(DirectionConfig {
        queue,
        delay: 10 * MS,
        discipline: crate::aqm::DisciplineSpec::parse(name)
            .unwrap()
            .with_ecn(ecn),
        ..config(rate)
    })
}

/// Offers `(time, bytes)` arrivals with ids 0, 1, … and settles everything up to `until`:
/// (id → departure) of the forwarded ones, and the ids dropped.
fn run_held(
    m: &mut LinkModel,
    arrivals: &[(Nanos, u32, Option<FlowKey>, bool)],
    until: Nanos,
) -> (Vec<(u64, Departure, bool)>, Vec<u64>) {
    let (mut forwarded, mut dropped) = (Vec::new(), Vec::new());
    let drain =
        |m: &mut LinkModel, forwarded: &mut Vec<(u64, Departure, bool)>, dropped: &mut Vec<u64>| {
            while let Some(s) = m.take_settled() {
                match s {
                    Settled::Forward {
                        id,
                        departure,
                        marked,
                    } => forwarded.push((id, departure, marked)),
                    Settled::DroppedAqm { id, .. } | Settled::DroppedOverflow { id, .. } => {
                        dropped.push(id)
                    }
                }
            }
        };
    for (i, &(t, bytes, key, ect)) in arrivals.iter().enumerate() {
        // What the I/O shell does: run the bottleneck up to each arrival, then offer it.
        while let Some(at) = m.next_dequeue_at().filter(|&at| at <= t) {
            m.advance(at);
        }
        match m.offer(t, i as u64, bytes, key, ect) {
            Disposition::Held => {}
            Disposition::DroppedQueue | Disposition::DroppedAqm | Disposition::DroppedRandom => {
                dropped.push(i as u64)
            }
            // Tail drop decides at arrival.
            Disposition::Forward(d) => forwarded.push((i as u64, d, false)),
        }
        drain(m, &mut forwarded, &mut dropped);
    }
    m.advance(until);
    drain(m, &mut forwarded, &mut dropped);
    (forwarded, dropped)
}

#[test]
fn codel_below_its_target_departs_exactly_like_tail_drop() {
    // Random arrivals at ~45 % load: queues form but never for 100 ms above 5 ms, so CoDel
    // never drops, and each packet's schedule is tail drop's, nanosecond for nanosecond.
    let mut droptail = model(DirectionConfig {
        delay: 10 * MS,
        queue: QueueLimit::Bytes(100_000),
        ..config(constant(10_000_000))
    });
    let mut codel = with_discipline(
        constant(10_000_000),
        QueueLimit::Bytes(100_000),
        "codel",
        false,
    );
    let mut rng = 12345u64;
    let mut t = 0;
    let mut arrivals = Vec::new();
    for _ in 0..5000 {
        rng = rng
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        t += 1_500 * US + (rng >> 33) % (1_400 * US);
        arrivals.push((t, 1000 + ((rng >> 20) % 500) as u32, None, false));
    }
    let expected: Vec<Departure> = arrivals
        .iter()
        .map(|&(t, b, _, _)| forward(droptail.on_arrival(t, b)))
        .collect();
    let (got, dropped) = run_held(&mut codel, &arrivals, t + 10 * S);
    assert!(dropped.is_empty());
    assert_eq!(got.len(), expected.len());
    for (id, departure, marked) in got {
        assert!(!marked);
        assert_eq!(departure, expected[id as usize], "packet {id}");
    }
    assert_eq!(codel.summary().discipline, "codel");
    assert_eq!(codel.held_packets(), 0);
}

/// An unresponsive 15 Mbit/s stream into 10 Mbit/s for `secs` seconds through a deep (1 MB)
/// buffer: the sojourn times of the packets forwarded in the last half.
fn overload(name: &str, ecn: bool, secs: u64) -> (LinkModel, Vec<Nanos>) {
    let mut m = with_discipline(
        constant(10_000_000),
        QueueLimit::Bytes(1_000_000),
        name,
        ecn,
    );
    let gap = 1500 * 8 * S / 15_000_000;
    let arrivals: Vec<_> = (0..secs * S / gap)
        .map(|i| (i * gap, 1500u32, None, ecn))
        .collect();
    let (forwarded, _) = run_held(&mut m, &arrivals, secs * S + 10 * S);
    let sojourns = forwarded
        .iter()
        .filter(|(id, ..)| arrivals[*id as usize].0 > secs * S / 2)
        .map(|(id, d, _)| d.service_start - arrivals[*id as usize].0)
        .collect();
    (m, sojourns)
}

fn median(mut v: Vec<Nanos>) -> Nanos {
    v.sort_unstable();
    v[v.len() / 2]
}

#[test]
fn codel_drains_a_standing_queue_that_tail_drop_keeps() {
    // 1 s at 15 Mbit/s into 10 Mbit/s builds half a second of queue; then 9.5 Mbit/s, which
    // tail drop can drain only at 0.5 Mbit/s (10 s). CoDel drops until the queue is back near
    // its 5 ms target. (Against a source that never slows down CoDel cannot hold its target —
    // its control law needs about 8 s of drops to match a 50 % overload; it is built for
    // responsive flows.)
    let standing = |name: &str| {
        let mut m = with_discipline(
            constant(10_000_000),
            QueueLimit::Bytes(1_000_000),
            name,
            false,
        );
        let mut arrivals = Vec::new();
        let (mut t, end) = (0, 10 * S);
        while t < end {
            arrivals.push((t, 1500u32, None, false));
            let rate = if t < S { 15_000_000 } else { 9_500_000 };
            t += 1500 * 8 * S / rate;
        }
        let (forwarded, _) = run_held(&mut m, &arrivals, end + 10 * S);
        let late: Vec<Nanos> = forwarded
            .iter()
            .filter(|(id, ..)| arrivals[*id as usize].0 > 6 * S)
            .map(|(id, d, _)| d.service_start - arrivals[*id as usize].0)
            .collect();
        (m, median(late))
    };
    let (_, tail) = standing("droptail");
    let (codel, held) = standing("codel");
    assert!(tail > 100 * MS, "tail drop: {} ms", tail / MS);
    assert!(held < 15 * MS, "codel: {} ms", held / MS);
    let c = codel.counters();
    assert!(
        c.dropped_aqm_packets > 0 && c.dropped_queue_packets == 0,
        "{c:?}"
    );
    assert_eq!(c.marked_packets, 0);
    let aqm = codel.summary().aqm.unwrap();
    assert_eq!(aqm.aqm_drops, c.dropped_aqm_packets);
    assert_eq!(aqm.dequeued, c.forwarded_packets);
}

#[test]
fn pie_holds_about_its_15_ms_target_and_with_ecn_marks_instead_of_dropping() {
    let (pie, sojourns) = overload("pie", false, 20);
    let m = median(sojourns);
    assert!(
        (5 * MS..40 * MS).contains(&m),
        "median sojourn {} ms",
        m / MS
    );
    assert!(pie.counters().dropped_aqm_packets > 0);
    // With ECN every packet is ECN-capable: PIE marks (it drops only past its 10 % mark limit,
    // RFC 8033 §5.1, which a 50 % overload exceeds).
    let (pie_ecn, _) = overload("pie", true, 5);
    let c = pie_ecn.counters();
    assert!(c.marked_packets > 0, "{c:?}");
    assert_eq!(pie_ecn.summary().discipline, "pie+ecn");
}

#[test]
fn fq_codel_keeps_a_thin_flow_out_of_a_fat_flows_queue() {
    use std::net::SocketAddr;
    let key = |port: u16| {
        let a: SocketAddr = format!("10.0.0.1:{port}").parse().unwrap();
        let b: SocketAddr = "10.0.0.2:443".parse().unwrap();
        Some(FlowKey::new(crate::flow::Transport::Udp, a, b))
    };
    let (fat, thin) = (key(1000), key(2000));
    for name in ["droptail", "fq-codel"] {
        let mut m = with_discipline(
            constant(10_000_000),
            QueueLimit::Bytes(300_000),
            name,
            false,
        );
        // The fat flow: 12 Mbit/s of 1500 B; the thin one: 100 B every 10 ms.
        let mut arrivals = Vec::new();
        let gap = 1500 * 8 * S / 12_000_000;
        for i in 0..(10 * S / gap) {
            arrivals.push((i * gap, 1500u32, fat, false));
        }
        for i in 0..1000 {
            arrivals.push((i * 10 * MS + 7 * US, 100u32, thin, false));
        }
        arrivals.sort_by_key(|a| a.0);
        let (forwarded, _) = run_held(&mut m, &arrivals, 20 * S);
        let thin_sojourns: Vec<Nanos> = forwarded
            .iter()
            .filter(|(id, ..)| arrivals[*id as usize].2 == thin && arrivals[*id as usize].0 > 2 * S)
            .map(|(id, d, _)| d.service_start - arrivals[*id as usize].0)
            .collect();
        let p = median(thin_sojourns);
        if name == "droptail" {
            assert!(p > 100 * MS, "tail drop: thin flow waits {} ms", p / MS);
        } else {
            // Its packets are served as a new (sparse) flow's: at most a packet's time.
            assert!(p < 3 * MS, "fq-codel: thin flow waits {} µs", p / US);
        }
    }
}

#[test]
fn a_trace_link_serves_a_disciplines_packets_at_its_opportunities() {
    // Opportunities at 1, 2, 3 … 10 ms (1500 B each), period 10 ms.
    let text: String = (1..=10).map(|i| format!("{i}\n")).collect();
    let mut m = with_discipline(
        RateSpec::Trace(trace(&text)),
        QueueLimit::Unlimited,
        "codel",
        false,
    );
    let arrivals: Vec<_> = (0..5)
        .map(|i| (i * 100 * US, 1500u32, None, false))
        .collect();
    let (forwarded, dropped) = run_held(&mut m, &arrivals, S);
    assert!(dropped.is_empty());
    let starts: Vec<Nanos> = forwarded.iter().map(|(_, d, _)| d.service_start).collect();
    assert_eq!(starts, vec![MS, 2 * MS, 3 * MS, 4 * MS, 5 * MS]);
}

#[test]
fn a_discipline_with_bad_parameters_or_no_rate_is_refused() {
    let bad = crate::aqm::DisciplineSpec::Codel(crate::aqm::CodelParams {
        target: 200 * MS,
        ..Default::default()
    });
    let err = LinkModel::new(DirectionConfig {
        discipline: bad,
        ..config(constant(10_000_000))
    })
    .unwrap_err();
    assert!(err.to_string().contains("codel"), "{err}");
    let mut o = crate::LinkOptions::default();
    o.set("queue-discipline", "codel").unwrap();
    assert!(
        o.to_spec(&crate::input::fs)
            .unwrap_err()
            .contains("no rate")
    );
    assert!(
        o.set("queue-discipline", "red")
            .unwrap_err()
            .contains("fq-codel")
    );
    assert!(o.set("ecn", "maybe").is_err());
    o.set("rate", "10mbit").unwrap();
    o.set("rtt", "50ms").unwrap();
    o.set("ecn", "true").unwrap();
    o.set("down-queue-discipline", "pie").unwrap();
    let spec = o.to_spec(&crate::input::fs).unwrap();
    assert_eq!(spec.uplink.discipline.label(), "codel+ecn");
    assert_eq!(spec.downlink.discipline.label(), "pie+ecn");
    assert!(spec.ecn());
}
