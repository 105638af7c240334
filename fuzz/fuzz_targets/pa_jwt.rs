//! libFuzzer's entry for `pact_fuzz_targets::pa_jwt`: the input layout and the
//! invariants checked are documented there (crates/pact-fuzz-targets/src/pa_jwt.rs).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pact_fuzz_targets::pa_jwt::run(data));
