//! The fuzz targets of quiclab's parsers: every parser that takes bytes from outside — the
//! kernel (TUN frames), the network (FEC datagrams, packets' flow keys, HTTP Range headers) or a
//! user's files (traces, profiles, contents, scenarios). Each target feeds one input through the
//! parser and checks what must hold for *any* input: no panic, and the parser's own invariants
//! (segments no longer than the MTU with valid checksums, at most a window of open FEC groups, a
//! range inside the body, …). A target that found a crash keeps its input in
//! `fuzz/regressions/TARGET/`, replayed by this crate's tests with the corpus in
//! `fuzz/corpus/TARGET/`.
//!
//! Two ways to run them (docs/fuzzing.md): `cargo test -p quiclab-fuzzing` (stable: the corpus,
//! the regressions and a few seconds of random and mutated inputs per target, in CI), and
//! `cargo +nightly fuzz run TARGET` from `fuzz/` (libFuzzer, coverage-guided, as long as you like).

/// A fuzz target: one input through one parser, panicking when an invariant breaks.
pub type Target = fn(&[u8]);

/// Every target, by the name `cargo fuzz run` knows it.
pub const TARGETS: &[(&str, Target)] = &[
    ("tun_frame", tun_frame),
    ("fec_decoder", fec_decoder),
    ("flow_key", flow_key),
    ("trace", trace),
    ("profile", profile),
    ("content", content),
    ("scenario", scenario),
    ("study", study),
    ("range", range),
];

/// A TUN frame (virtio-net header + packet) read by an offload lane: refused and counted, or
/// accepted as segments that are whole IP packets no longer than the MTU whose transport
/// checksums are valid once the receiving kernel completes them.
pub fn tun_frame(data: &[u8]) {
    use quiclab_link::wire::offload::{FrameReader, LARGE};
    const MTU: usize = 1500;
    if data.len() > LARGE {
        return;
    }
    let mut reader = FrameReader::new(MTU);
    let mut buf = reader.buffer();
    buf[..data.len()].copy_from_slice(data);
    let before = reader.figures().dropped_unsplittable;
    let Some(frame) = reader.accept(buf, data.len()) else {
        assert_eq!(reader.figures().dropped_unsplittable, before + 1);
        return;
    };
    let n = frame.segments();
    assert!(n >= 1);
    for i in 0..n {
        let len = frame.segment_len(i);
        assert!(len <= MTU, "segment {i}: {len} bytes");
        // What the kernel does with each written segment: complete a partial checksum.
        let mut one = frame.run_frame(i, i);
        let mut out = [vec![0u8; MTU + 64]];
        let mut sizes = [0usize];
        let got = quiclab_link::wire::offload::split_frame(&mut one, &mut out, &mut sizes, 0)
            .expect("a segment of an accepted frame is itself a valid frame");
        assert_eq!(got, 1);
        assert_eq!(sizes[0], len);
        let p = &out[0][..sizes[0]];
        assert!(ip_length_matches(p), "segment {i}: IP length field");
    }
    // Runs of several segments split back into the same packets.
    if n > 1 {
        let mut all = frame.run_frame(0, n - 1);
        let mut out: Vec<Vec<u8>> = (0..n).map(|_| vec![0u8; MTU + 64]).collect();
        let mut sizes = vec![0usize; n];
        let got = quiclab_link::wire::offload::split_frame(&mut all, &mut out, &mut sizes, 0)
            .expect("a run of an accepted frame splits");
        assert_eq!(got, n);
        for (i, s) in sizes.iter().enumerate() {
            assert_eq!(*s, frame.segment_len(i));
        }
    }
    reader.recycle(frame);
}

fn ip_length_matches(p: &[u8]) -> bool {
    match p.first().map(|b| b >> 4) {
        Some(4) => p.len() >= 20 && u16::from_be_bytes([p[2], p[3]]) as usize == p.len(),
        Some(6) => p.len() >= 40 && u16::from_be_bytes([p[4], p[5]]) as usize + 40 == p.len(),
        _ => false,
    }
}

/// A stream of datagrams (length-prefixed: one byte of length, then the bytes) into one FEC
/// decoder: never a panic, never more open groups than the window, a payload range inside its
/// datagram, and counters that add up.
pub fn fec_decoder(data: &[u8]) {
    let n = 2 + data.first().copied().unwrap_or(0) as usize % 63;
    let mut dec = quiclab_fec::Decoder::new(n).expect("2..=64");
    let mut rest = data.get(1..).unwrap_or(&[]);
    let mut datagrams = 0u64;
    while let Some((&len, tail)) = rest.split_first() {
        let len = (len as usize).min(tail.len());
        let (d, tail) = tail.split_at(len);
        rest = tail;
        datagrams += 1;
        let out = dec.decode(d);
        if let Some(r) = out.payload {
            assert!(r.start <= r.end && r.end <= d.len());
        }
        assert!(dec.open_groups() <= quiclab_fec::MAX_OPEN_GROUPS);
    }
    dec.finish();
    let c = dec.counters;
    // (`malformed` also counts a corrupt group found while rebuilding, so it is not in the sum.)
    assert!(c.data_received + c.parity_received <= datagrams);
    assert!(c.duplicates <= c.data_received);
}

/// A packet's flow key and addresses: never a panic; a key's addresses are the packet's.
pub fn flow_key(data: &[u8]) {
    let key = quiclab_link::FlowKey::of_packet(data);
    let addresses = quiclab_link::FlowKey::addresses_of_packet(data);
    if key.is_some() {
        assert!(addresses.is_some(), "a flow key without addresses");
    }
}

/// A Mahimahi delivery trace: an error or a trace; never a panic.
pub fn trace(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data)
        && let Ok(t) = quiclab_link::DeliveryTrace::parse(text, "fuzz.trace")
    {
        // A trace that parsed is one the model accepts or refuses with an error.
        let _ = t.name();
    }
}

/// A link profile, as TOML and as CSV: an error or a profile with at least one step.
pub fn profile(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for p in [
        quiclab_link::profile::parse_toml(text, "fuzz.toml"),
        quiclab_link::profile::parse_csv(text, "fuzz.csv"),
    ]
    .into_iter()
    .flatten()
    {
        assert!(!p.steps.is_empty(), "a profile without steps");
    }
}

/// A Sabre movie file: an error or a content whose sizes and durations are within the stated
/// bounds, so that every product the player takes of them fits.
pub fn content(data: &[u8]) {
    use quiclab_video::content::{Content, MAX_CONTENT_MS, MAX_SEGMENT_BYTES};
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(c) = Content::from_sabre_json("fuzz.json", "fuzz", text) {
        assert!(c.duration_ms <= MAX_CONTENT_MS && c.segments() > 0);
        for r in 0..c.levels() {
            for s in 0..c.segments() {
                let size = c.size(r, s).expect("inside the content");
                assert!(size <= MAX_SEGMENT_BYTES);
            }
        }
        let cut = c.truncated(c.duration_ms / 2 + 1);
        assert!(cut.segments() <= c.segments());
    }
}

/// A study file: an error naming the file, or findings whose rules can be applied — unique,
/// non-empty ids, finite numbers, two different sides of a comparison, a level in (0, 0.5), a
/// minimum n of at least 1 — and whose check against a scenario errs naming the file or passes.
pub fn study(data: &[u8]) {
    use quiclab_verdict::findings::{Judged, parse, validate};
    use quiclab_verdict::judge::Claim;
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let study = match parse(text, "fuzz.toml") {
        Ok(s) => s,
        Err(e) => {
            assert!(e.contains("fuzz.toml"), "an error that names no file: {e}");
            return;
        }
    };
    assert!(!study.name.trim().is_empty() && !study.findings.is_empty());
    let mut ids = std::collections::BTreeSet::new();
    for f in &study.findings {
        assert!(
            !f.id.is_empty() && ids.insert(f.id.clone()),
            "id {:?}",
            f.id
        );
        let Judged::Run {
            claim,
            rule,
            seed_value,
            ..
        } = &f.judged
        else {
            continue;
        };
        assert!(
            rule.min_n >= 1
                && rule.alpha > 0.0
                && rule.alpha < 0.5
                && (0.0..1.0).contains(&rule.min_effect),
            "{rule:?}"
        );
        assert!(seed_value.is_none_or(f64::is_finite));
        match claim {
            Claim::Better { a, b, .. } => assert_ne!(a, b),
            Claim::Ratio {
                a,
                b,
                value,
                tolerance,
                ..
            } => {
                assert_ne!(a, b);
                assert!(value.is_finite() && *value > 0.0 && *tolerance > 0.0 && *tolerance < 1.0);
            }
            Claim::Approx {
                value, tolerance, ..
            } => {
                assert!(value.is_finite() && *value > 0.0 && *tolerance > 0.0 && *tolerance < 1.0);
            }
            Claim::AtLeast { value } | Claim::AtMost { value } => assert!(value.is_finite()),
            Claim::RatioAtLeast { a, b, value, .. } | Claim::RatioAtMost { a, b, value, .. } => {
                assert_ne!(a, b);
                assert!(value.is_finite() && *value > 0.0);
            }
            Claim::WinsShare { at_least, .. } => assert!(*at_least > 0.0 && *at_least <= 1.0),
            Claim::NoBestEverywhere { .. } => {}
        }
    }
    // Checked against one small scenario whatever a finding names (scenarios are fuzzed apart).
    const SCENARIO: &str = "name = \"s\"\nrepetitions = 5\n[workload]\nkind = \"page\"\n\
                            [grid]\nprotocol = [\"h1\", \"h3\"]\nloss = [\"0%\", \"2%\"]\n";
    if let Err(e) = validate(
        &study,
        "fuzz.toml",
        |_| Some((SCENARIO.to_string(), "s.toml".to_string())),
        |_, m| {
            (m == "plt_ms").then(|| {
                quiclab_experiment::metric::MetricDef::completion_time("plt_ms", "PLT", "ms")
            })
        },
    ) {
        assert!(e.contains("fuzz.toml"), "an error that names no file: {e}");
    }
}

/// A scenario file: an error naming the file, or a scenario; never a panic.
pub fn scenario(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(e) = quiclab_experiment::scenario::parse(text, "fuzz.toml") {
        assert!(
            e.to_string().contains("fuzz.toml"),
            "an error that names no file: {e}"
        );
    }
}

/// An HTTP Range header against a body length (the first 8 bytes): an error, none, or a range
/// inside the body.
pub fn range(data: &[u8]) {
    let (len, header) = match data.split_first_chunk::<8>() {
        Some((l, h)) => (u64::from_le_bytes(*l) % (1 << 40), h),
        None => (0, data),
    };
    let Ok(header) = std::str::from_utf8(header) else {
        return;
    };
    if let Ok(Some((first, last))) = quiclab_proto::range::parse_range(header, len) {
        assert!(
            first <= last && last < len,
            "{header:?} on {len}: {first}-{last}"
        );
    }
    let _ = quiclab_proto::range::parse_bytes_path(header);
}
