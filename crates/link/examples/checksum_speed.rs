//! How fast `wire::virtio::checksum` sums (it replaced tun-rs's SIMD one in the model): GB/s of
//! both over a 64 kB super-packet, the most the offload path sums per read.
//! `cargo run --release -p quiclab-link --example checksum_speed`

use std::hint::black_box;
use std::time::Instant;

fn main() {
    let buf: Vec<u8> = (0..65_536u32)
        .map(|i| i.wrapping_mul(2_654_435_761) as u8)
        .collect();
    let rounds = 50_000;
    for (name, f) in [
        (
            "quiclab wire::virtio",
            quiclab_link::wire::virtio::checksum as fn(&[u8], u64) -> u16,
        ),
        ("tun-rs (SIMD)", tun_rs::checksum as fn(&[u8], u64) -> u16),
    ] {
        assert_eq!(f(&buf, 0), tun_rs::checksum(&buf, 0));
        let t = Instant::now();
        let mut acc = 0u64;
        for _ in 0..rounds {
            acc += u64::from(f(black_box(&buf), 0));
        }
        let s = t.elapsed().as_secs_f64();
        black_box(acc);
        println!(
            "{name:<22} {:.1} GB/s ({:.2} µs per 64 kB)",
            buf.len() as f64 * rounds as f64 / s / 1e9,
            s / rounds as f64 * 1e6
        );
    }
}
