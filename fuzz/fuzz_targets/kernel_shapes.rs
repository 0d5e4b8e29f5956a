//! `cargo fuzz run kernel_shapes`: see `check_kernel_shapes` in `fuzz/checks.rs` for what must hold.
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::check_kernel_shapes(data));
