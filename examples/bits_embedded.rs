//! The cross-target check's fixed calls (`examples/bits/suite.rs`) on a microcontroller: real
//! grouped-query attention, matmul and conv2d by the `no_std` core on a Cortex-M4F.
//!
//! On `target_os = "none"` this is a `#![no_std]`, `#![no_main]` program for
//! `thumbv7em-none-eabihf` on `cortex-m-rt` (vector table, reset handler, FPU enable, and
//! `link.x`, with `examples/bits/memory.x` for QEMU's `mps2-an386` board). It prints
//! `target thumbv7em-none-eabihf <variant> <hash>` (and its `quant` line) over semihosting and exits QEMU with status 0
//! (1 on any error). `scripts/check_targets.sh` builds and runs it:
//!
//! ```text
//! cargo rustc --release --example bits_embedded --no-default-features \
//!     --target thumbv7em-none-eabihf -- -C link-arg=-Tlink.x -C link-arg=-L<repo>/examples/bits
//! qemu-system-arm -M mps2-an386 -nographic -semihosting-config enable=on,target=native \
//!     -kernel target/thumbv7em-none-eabihf/release/examples/bits_embedded
//! ```
//!
//! On a hosted target it is an ordinary program printing the same line for this target, so
//! `cargo test` builds it too.
#![cfg_attr(target_os = "none", no_std, no_main)]

extern crate alloc;

use alloc::string::String;

use skainet_schedule::prelude::*;
use skainet_schedule::{cpu_kernels, KernelConfig};

#[path = "bits/suite.rs"]
mod suite;

/// One line per available variant (`Err` names the variant that failed).
fn lines(triple: &str) -> Result<String, String> {
    let mut out = String::new();
    for variant in cpu_kernels()
        .providers()
        .iter()
        .filter(|p| p.is_available())
    {
        let config = KernelConfig::new(variant.clone());
        let failed = |e| alloc::format!("bits: variant {} failed: {e}\n", variant.name());
        let hash = suite::run(&config).map_err(failed)?;
        out.push_str(&suite::line(triple, variant.name(), hash));
        out.push('\n');
        let quant = suite::run_quant(&config).map_err(failed)?;
        out.push_str(&suite::quant_line(triple, variant.name(), quant));
        out.push('\n');
    }
    Ok(out)
}

#[cfg(target_os = "none")]
#[path = "common/bump.rs"]
mod bump;

#[cfg(target_os = "none")]
mod bare_metal {
    /// ARM semihosting: `bkpt 0xAB` with the operation in r0 and its argument in r1; QEMU
    /// answers it with `-semihosting-config enable=on`.
    mod semihosting {
        const SYS_WRITE0: u32 = 0x04;
        const SYS_EXIT: u32 = 0x18;
        const ADP_STOPPED_APPLICATION_EXIT: usize = 0x20026;
        const ADP_STOPPED_RUN_TIME_ERROR_UNKNOWN: usize = 0x20023;

        /// # Safety
        /// `arg` is what operation `op` expects (for the two used here: a pointer to a
        /// NUL-terminated string, or a reason code).
        unsafe fn call(op: u32, arg: usize) -> usize {
            let ret: usize;
            // SAFETY: the caller passes an argument valid for `op`; the debugger (QEMU) only
            // reads memory through it and writes r0.
            unsafe {
                core::arch::asm!("bkpt 0xAB", inout("r0") op as usize => ret, in("r1") arg,
                    options(nostack, preserves_flags));
            }
            ret
        }

        /// Writes `text` to the host's stdout (NUL bytes in it end the output early).
        pub(super) fn print(text: &str) {
            let mut z = alloc::vec::Vec::new();
            if z.try_reserve_exact(text.len() + 1).is_err() {
                return;
            }
            z.extend_from_slice(text.as_bytes());
            z.push(0);
            // SAFETY: `z` is NUL-terminated and lives across the call.
            unsafe { call(SYS_WRITE0, z.as_ptr() as usize) };
        }

        /// Ends the emulation: status 0 if `ok`, 1 otherwise.
        pub(super) fn exit(ok: bool) -> ! {
            let reason = if ok {
                ADP_STOPPED_APPLICATION_EXIT
            } else {
                ADP_STOPPED_RUN_TIME_ERROR_UNKNOWN
            };
            // SAFETY: SYS_EXIT on 32-bit ARM takes the reason code itself in r1.
            unsafe { call(SYS_EXIT, reason) };
            // Only reached without a debugger attached.
            loop {
                core::hint::spin_loop();
            }
        }
    }

    #[panic_handler]
    fn panic(_info: &core::panic::PanicInfo<'_>) -> ! {
        semihosting::print("bits_embedded: panic\n");
        semihosting::exit(false)
    }

    #[cortex_m_rt::entry]
    fn main() -> ! {
        match super::lines("thumbv7em-none-eabihf") {
            Ok(text) => {
                semihosting::print(&text);
                semihosting::exit(true)
            }
            Err(message) => {
                semihosting::print(&message);
                semihosting::exit(false)
            }
        }
    }
}

#[cfg(not(target_os = "none"))]
fn main() -> std::process::ExitCode {
    let triple = format!("{}-{}", std::env::consts::ARCH, std::env::consts::OS);
    match lines(&triple) {
        Ok(text) => {
            print!("{text}");
            std::process::ExitCode::SUCCESS
        }
        Err(message) => {
            eprint!("{message}");
            std::process::ExitCode::FAILURE
        }
    }
}
