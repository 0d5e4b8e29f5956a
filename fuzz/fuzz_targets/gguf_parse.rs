//! `cargo fuzz run gguf_parse`: see `check_gguf_parse` in `fuzz/checks.rs` for what must hold.
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::check_gguf_parse(data));
