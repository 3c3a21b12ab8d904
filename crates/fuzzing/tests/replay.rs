//! Every fuzz target on stable, as CI runs it: the committed corpus (`fuzz/corpus/TARGET/`), the
//! inputs that once crashed (`fuzz/regressions/TARGET/`), then `QUICLAB_FUZZ_SECONDS` (default
//! 2) of random and mutated inputs per target. The coverage-guided runs are `cargo +nightly fuzz
//! run TARGET` (docs/fuzzing.md); this keeps what they found from coming back.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

fn files(dir: &Path) -> Vec<Vec<u8>> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    paths.sort();
    paths
        .iter()
        .filter(|p| p.is_file())
        // `.keep` and other dot files hold the directories in git; they are no inputs.
        .filter(|p| {
            !p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        })
        .map(|p| std::fs::read(p).unwrap())
        .collect()
}

/// One of a few mutations libFuzzer also makes: flip, set, insert, delete, splice.
fn mutate(rng: &mut rand::rngs::SmallRng, input: &[u8], other: &[u8]) -> Vec<u8> {
    let mut v = input.to_vec();
    for _ in 0..rng.random_range(1..=8) {
        match rng.random_range(0..6) {
            0 if !v.is_empty() => {
                let i = rng.random_range(0..v.len());
                v[i] ^= 1 << rng.random_range(0..8);
            }
            1 if !v.is_empty() => {
                let i = rng.random_range(0..v.len());
                v[i] = [0, 0xff, 0x7f, 0x80, 1][rng.random_range(0..5)];
            }
            2 => {
                let i = rng.random_range(0..=v.len());
                v.insert(i, rng.random());
            }
            3 if !v.is_empty() => {
                let i = rng.random_range(0..v.len());
                let n = rng.random_range(1..=(v.len() - i).min(64));
                v.drain(i..i + n);
            }
            4 if !other.is_empty() => {
                let i = rng.random_range(0..=v.len());
                let a = rng.random_range(0..other.len());
                let b = rng.random_range(a..=other.len().min(a + 256));
                v.splice(i..i, other[a..b].iter().copied());
            }
            _ => {
                let n = rng.random_range(0..64);
                v.extend((0..n).map(|_| rng.random::<u8>()));
            }
        }
    }
    v
}

#[test]
fn every_target_survives_its_corpus_regressions_and_random_inputs() {
    let seconds: f64 = std::env::var("QUICLAB_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2.0);
    let mut report = Vec::new();
    for (name, target) in quiclab_fuzzing::TARGETS {
        let corpus = files(&fuzz_dir().join("corpus").join(name));
        let regressions = files(&fuzz_dir().join("regressions").join(name));
        assert!(
            !corpus.is_empty(),
            "fuzz/corpus/{name}/ is empty: a target without a corpus checks little"
        );
        for input in corpus.iter().chain(&regressions) {
            target(input);
        }
        let mut rng = rand::rngs::SmallRng::seed_from_u64(0x5eed ^ name.len() as u64);
        let deadline = Instant::now() + Duration::from_secs_f64(seconds);
        let mut runs = 0u64;
        while Instant::now() < deadline {
            let base = &corpus[rng.random_range(0..corpus.len())];
            let other = &corpus[rng.random_range(0..corpus.len())];
            let input = if rng.random_range(0..8) == 0 {
                (0..rng.random_range(0..512))
                    .map(|_| rng.random())
                    .collect()
            } else {
                mutate(&mut rng, base, other)
            };
            target(&input);
            runs += 1;
        }
        report.push(format!(
            "{name}: {} corpus + {} regression inputs, {runs} random/mutated",
            corpus.len(),
            regressions.len()
        ));
    }
    eprintln!("{}", report.join("\n"));
}
