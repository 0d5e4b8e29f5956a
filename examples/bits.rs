//! Prints `target <triple> <variant> <hash>` for every variant of the CPU kernels available on
//! this machine: the hash of every output bit of a fixed set of calls (`examples/bits/suite.rs`),
//! and `quant <triple> <variant> <hash>` for its quantized products.
//! `scripts/check_targets.sh` runs it natively, under `qemu-aarch64` and under a WASI runtime,
//! next to the bare-metal `bits_embedded`, and fails unless every hash is the same.
//!
//! ```text
//! cargo run --release --example bits [-- --target-name <triple>]
//! ```

extern crate alloc;

use std::process::ExitCode;

use skainet_schedule::prelude::*;
use skainet_schedule::{cpu_kernels, KernelConfig};

#[path = "bits/suite.rs"]
mod suite;

#[path = "bits/triple.rs"]
mod triple;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let triple = match args.as_slice() {
        [] => triple::triple(),
        [flag, name] if flag == "--target-name" => name.clone(),
        _ => {
            eprintln!("usage: bits [--target-name <triple>]; got {args:?}");
            return ExitCode::FAILURE;
        }
    };
    let providers = cpu_kernels().providers();
    for variant in providers.iter().filter(|p| p.is_available()) {
        let config = KernelConfig::new(variant.clone());
        match suite::run(&config).and_then(|h| Ok((h, suite::run_quant(&config)?))) {
            Ok((hash, quant)) => {
                println!("{}", suite::line(&triple, variant.name(), hash));
                println!("{}", suite::quant_line(&triple, variant.name(), quant));
            }
            Err(e) => {
                eprintln!("bits: variant {} failed: {e}", variant.name());
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}
