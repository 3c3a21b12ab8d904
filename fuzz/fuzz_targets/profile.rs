#![no_main]
// cargo +nightly fuzz run profile (docs/fuzzing.md): the target and its invariants are
// quiclab_fuzzing::profile, shared with the stable replay test.
libfuzzer_sys::fuzz_target!(|data: &[u8]| quiclab_fuzzing::profile(data));
