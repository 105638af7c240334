//! libFuzzer's entry for `pact_fuzz_targets::authz_details`: the input layout and the
//! invariants checked are documented there (crates/pact-fuzz-targets/src/authz_details.rs).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pact_fuzz_targets::authz_details::run(data));
