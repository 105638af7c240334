//! libFuzzer's entry for `pact_fuzz_targets::delegation_token`: the input layout and the
//! invariants checked are documented there (crates/pact-fuzz-targets/src/delegation_token.rs).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pact_fuzz_targets::delegation_token::run(data));
