#![no_main]
// cargo +nightly fuzz run tun_frame (docs/fuzzing.md): the target and its invariants are
// quiclab_fuzzing::tun_frame, shared with the stable replay test.
libfuzzer_sys::fuzz_target!(|data: &[u8]| quiclab_fuzzing::tun_frame(data));
