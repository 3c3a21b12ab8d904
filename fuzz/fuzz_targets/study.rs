#![no_main]
// cargo +nightly fuzz run study (docs/fuzzing.md): the target and its invariants are
// quiclab_fuzzing::study, shared with the stable replay test.
libfuzzer_sys::fuzz_target!(|data: &[u8]| quiclab_fuzzing::study(data));
