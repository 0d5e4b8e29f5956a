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

/// The triple this program was built for (`--target-name` overrides it). Cargo's `TARGET` is
/// not given to examples, so it is rebuilt from the `cfg` of the build.
fn triple() -> String {
    let arch = std::env::consts::ARCH;
    if cfg!(target_os = "wasi") {
        format!("{arch}-wasip1")
    } else if cfg!(all(target_os = "linux", target_env = "musl")) {
        format!("{arch}-unknown-linux-musl")
    } else if cfg!(target_os = "linux") {
        format!("{arch}-unknown-linux-gnu")
    } else if cfg!(target_os = "macos") {
        format!("{arch}-apple-darwin")
    } else {
        format!("{arch}-{}", std::env::consts::OS)
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let triple = match args.as_slice() {
        [] => triple(),
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
