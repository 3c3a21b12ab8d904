#![no_main]
// cargo +nightly fuzz run scenario (docs/fuzzing.md): the target and its invariants are
// quiclab_fuzzing::scenario, shared with the stable replay test.
libfuzzer_sys::fuzz_target!(|data: &[u8]| quiclab_fuzzing::scenario(data));
