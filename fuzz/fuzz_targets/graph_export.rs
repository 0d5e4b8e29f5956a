//! `cargo fuzz run graph_export`: see `check_graph_export` in `fuzz/checks.rs` for what must hold.
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::check_graph_export(data));
