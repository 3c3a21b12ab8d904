#![no_main]
// cargo +nightly fuzz run flow_key (docs/fuzzing.md): the target and its invariants are
// quiclab_fuzzing::flow_key, shared with the stable replay test.
libfuzzer_sys::fuzz_target!(|data: &[u8]| quiclab_fuzzing::flow_key(data));
