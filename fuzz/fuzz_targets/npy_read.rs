//! `cargo fuzz run npy_read`: see `check_npy_read` in `fuzz/checks.rs` for what must hold.
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::check_npy_read(data));
