//! Proof that the `no_std` core links for a bare-metal target.
//!
//! ```text
//! cargo build --example nostd_smoke --no-default-features --target thumbv7em-none-eabihf
//! ```
//!
//! On `target_os = "none"` this is a `#![no_std]`, `#![no_main]` program with a bump allocator
//! and a panic handler, whose entry point runs a `Sequential` region, a registry lookup and
//! grouped-query causal attention under `Sequential`. On
//! a hosted target it is an ordinary program that runs the same code, so `cargo test` builds it
//! too.
#![cfg_attr(target_os = "none", no_std, no_main)]

extern crate alloc;

use alloc::sync::Arc;
use core::sync::atomic::{AtomicUsize, Ordering};

use skainet_schedule::KernelDispatch;
use skainet_schedule::Tensor;
use skainet_schedule::{scaled_dot_product_attention, SdpaOptions};
use skainet_schedule::{Schedule, ScheduleExt, Sequential};

/// Runs a region and a registry lookup; returns a checksum the caller can test.
fn smoke() -> usize {
    let sum = AtomicUsize::new(0);
    Sequential.for_range(10, 1, &|start, end| {
        sum.fetch_add((start..end).sum::<usize>(), Ordering::Relaxed);
    });

    let dispatch: KernelDispatch<fn(usize) -> usize> = KernelDispatch::new();
    dispatch.ensure_installed(|d| {
        d.register("double", Arc::new((|x| x * 2) as fn(usize) -> usize));
    });
    let double = dispatch.get("double").map(|k| *k).unwrap_or(|_| 0);

    let mut out = [0usize; 4];
    let written = Sequential.for_chunks_mut("smoke", &mut out, 1, 1, &|units, chunk| {
        for (k, x) in chunk.iter_mut().enumerate() {
            *x = units.start + k;
        }
    });
    let filled: usize = if written.is_ok() { out.iter().sum() } else { 0 };

    double(sum.load(Ordering::Relaxed)) + filled + attention_checksum() // 90 + 6 + 4
}

/// Two query heads over one K/V head, causal: returns how many outputs are finite (4 of 4).
fn attention_checksum() -> usize {
    let q = Tensor::from_fn(alloc::vec![1, 2, 1, 2], |i| i as f32 * 0.25);
    let kv = Tensor::from_fn(alloc::vec![1, 1, 2, 2], |i| 1.0 - i as f32 * 0.5);
    let (Ok(q), Ok(kv)) = (q, kv) else { return 0 };
    let options = SdpaOptions {
        scale: None,
        causal: true,
    };
    match scaled_dot_product_attention(&q, &kv, &kv, None, &options, &Sequential) {
        Ok(out) => out.data().iter().filter(|x| x.is_finite()).count(),
        Err(_) => 0,
    }
}

#[cfg(target_os = "none")]
#[path = "common/bump.rs"]
mod bump;

#[cfg(target_os = "none")]
mod bare_metal {
    #[panic_handler]
    fn panic(_info: &core::panic::PanicInfo<'_>) -> ! {
        loop {}
    }

    /// The entry point the linker looks for.
    #[no_mangle]
    pub extern "C" fn _start() -> ! {
        let checksum = super::smoke();
        // Keep the result observable so the work is not optimised away.
        core::hint::black_box(checksum);
        loop {}
    }
}

#[cfg(not(target_os = "none"))]
fn main() {
    assert_eq!(smoke(), 100);
    println!("nostd_smoke: ok (checksum 100)");
}
