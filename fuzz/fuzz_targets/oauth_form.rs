//! libFuzzer's entry for `pact_fuzz_targets::oauth_form`: the input layout and the
//! invariants checked are documented there (crates/pact-fuzz-targets/src/oauth_form.rs).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pact_fuzz_targets::oauth_form::run(data));
