//! libFuzzer's entry for `pact_fuzz_targets::a2a_message`: the input layout and the
//! invariants checked are documented there (crates/pact-fuzz-targets/src/a2a_message.rs).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pact_fuzz_targets::a2a_message::run(data));
