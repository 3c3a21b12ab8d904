#![no_main]
// cargo +nightly fuzz run fec_decoder (docs/fuzzing.md): the target and its invariants are
// quiclab_fuzzing::fec_decoder, shared with the stable replay test.
libfuzzer_sys::fuzz_target!(|data: &[u8]| quiclab_fuzzing::fec_decoder(data));
