//! libFuzzer's entry for `pact_fuzz_targets::user_code`: the input layout and the
//! invariants checked are documented there (crates/pact-fuzz-targets/src/user_code.rs).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pact_fuzz_targets::user_code::run(data));
