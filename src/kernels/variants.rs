//! The inner loops of `loops/`, compiled more than once, registered, and chosen at run time
//! through a [`KernelRegistry`]. This file only compiles and registers.
//!
//! Every variant runs the *same* generic source (the attention unit, the packed product's tile,
//! the few-row product) on a different backend: `portable` (plain Rust, every target, priority 0), `sse2`
//! (x86_64's baseline vectors, priority 5) and `avx2` (x86_64 with `std`, priority 10,
//! available when the CPU reports AVX2). The backends implement the same lane-wise IEEE
//! primitives and the same fixed fold (see `simd.rs`), so every variant returns the same bits
//! in the portable precision mode; only the speed differs. The native mode's loops are
//! compiled alongside (`PerMode`): on `avx2` with a detected FMA they fuse each multiply-add,
//! elsewhere they are the portable loops. Each call looks its variant up ([`selected_kernels`]), so the
//! registry really decides what runs.

use super::loops::attend::wide::Narrow;
use super::loops::attend::{attend_head, Head};
use super::loops::gemm::{gemm_tile, GemmTile, Vectors};
use super::loops::matvec::{skinny, Skinny};
use super::loops::qdot::{exact_native, exact_portable, q8_portable, Q8Fn, QExactFn};
use super::loops::simd::{MulAdd, Native, Scalar, Simd, Unfused};
use crate::registry::{KernelProvider, KernelRegistry};
use crate::sync::{Arc, Once};

type AttendFn = fn(&Head<'_>, &mut [f32], &mut [f32]);
type GemmFn = fn(&GemmTile<'_>, &mut [f32], usize, &mut [f32]);
type SkinnyFn = fn(&Skinny<'_>, &mut [f32]);

/// One inner loop compiled for each precision mode; `KernelConfig` picks one.
#[derive(Clone, Copy)]
pub(crate) struct PerMode<F> {
    pub portable: F,
    pub native: F,
}

/// One compilation of the CPU inner loops: attention per (batch, head), a packed product's
/// output tile (matmul, linear and conv2d), and a few-row product's column range. Providers of
/// [`cpu_kernels`].
pub struct CpuKernels {
    name: &'static str,
    priority: i32,
    available: fn() -> bool,
    pub(crate) attend: PerMode<AttendFn>,
    pub(crate) gemm: PerMode<GemmFn>,
    pub(crate) skinny: PerMode<SkinnyFn>,
    pub(crate) qexact: PerMode<QExactFn>,
    /// The q8 mode's loop: one for both precisions (its arithmetic has no fused form).
    pub(crate) q8: Q8Fn,
}

impl core::fmt::Debug for CpuKernels {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("CpuKernels")
            .field("name", &self.name)
            .field("priority", &self.priority)
            .finish_non_exhaustive()
    }
}

impl KernelProvider for CpuKernels {
    fn name(&self) -> &str {
        self.name
    }

    fn priority(&self) -> i32 {
        self.priority
    }

    fn is_available(&self) -> bool {
        (self.available)()
    }
}

fn always() -> bool {
    true
}

/// One attention unit on a backend that needs no detection token, in mode `M`.
fn attend_on<S: Simd + Default, M: MulAdd + Default>(
    h: &Head<'_>,
    out: &mut [f32],
    scratch: &mut [f32],
) {
    attend_head(S::default(), M::default(), Narrow, h, out, scratch)
}

/// Attention on backend `S` in both precision modes.
fn attend_modes<S: Simd + Default>() -> PerMode<AttendFn> {
    PerMode {
        portable: attend_on::<S, Unfused>,
        native: attend_on::<S, Native>,
    }
}

/// A packed product's tile on a backend that needs no detection token, in mode `M`.
fn gemm_on<S: Simd + Default, M: MulAdd + Default>(
    t: &GemmTile<'_>,
    out: &mut [f32],
    ldc: usize,
    pack: &mut [f32],
) {
    gemm_tile(
        Vectors {
            s: S::default(),
            mode: M::default(),
        },
        t,
        out,
        ldc,
        pack,
    )
}

/// A few-row product's column range on a backend that needs no detection token, in mode `M`.
fn skinny_on<S: Simd + Default, M: MulAdd + Default>(p: &Skinny<'_>, out: &mut [f32]) {
    skinny(S::default(), M::default(), p, out)
}

/// Exact mode's quantized product in plain Rust, in both precision modes.
const QEXACT_PORTABLE: PerMode<QExactFn> = PerMode {
    portable: exact_portable,
    native: exact_native,
};

/// The packed product of backend `S` in both precision modes.
fn gemm_modes<S: Simd + Default>() -> PerMode<GemmFn> {
    PerMode {
        portable: gemm_on::<S, Unfused>,
        native: gemm_on::<S, Native>,
    }
}

/// The few-row product of backend `S` in both precision modes.
fn skinny_modes<S: Simd + Default>() -> PerMode<SkinnyFn> {
    PerMode {
        portable: skinny_on::<S, Unfused>,
        native: skinny_on::<S, Native>,
    }
}

impl CpuKernels {
    /// The plain-Rust variant (the reference every other variant is bit-identical to);
    /// available everywhere.
    pub fn portable() -> Self {
        Self {
            name: "portable",
            priority: 0,
            available: always,
            attend: attend_modes::<Scalar>(),
            gemm: gemm_modes::<Scalar>(),
            skinny: skinny_modes::<Scalar>(),
            qexact: QEXACT_PORTABLE,
            q8: q8_portable,
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    //! The vector backends of x86_64. SSE2 is part of the baseline; the AVX2 entry points
    //! compile the same source with AVX2 enabled and run it only with a detected [`Avx2`]
    //! token, falling back to SSE2 otherwise, so calling one is always sound.
    use super::*;
    use crate::kernels::loops::simd::Sse2;

    pub(super) fn sse2() -> CpuKernels {
        CpuKernels {
            name: "sse2",
            priority: 5,
            available: always,
            attend: attend_modes::<Sse2>(),
            gemm: gemm_modes::<Sse2>(),
            skinny: skinny_modes::<Sse2>(),
            qexact: QEXACT_PORTABLE,
            q8: q8_portable,
        }
    }

    #[cfg(feature = "std")]
    mod avx2 {
        use super::*;
        use crate::kernels::loops::attend::wide::Avx512Attend;
        use crate::kernels::loops::gemm_avx512::{Avx512, Step};
        use crate::kernels::loops::qdot::{Q8Rows, QRows};
        use crate::kernels::loops::simd::{Avx2, Avx2Fma};
        use crate::kernels::loops::{qdot8_x86, qdot_x86};
        use core::ops::Range;

        fn has_avx2() -> bool {
            Avx2::detect().is_some()
        }

        #[target_feature(enable = "avx2")]
        unsafe fn attend_avx2(s: Avx2, h: &Head<'_>, out: &mut [f32], scratch: &mut [f32]) {
            attend_head(s, Unfused, Narrow, h, out, scratch);
        }

        #[target_feature(enable = "avx2,fma")]
        unsafe fn attend_fma(s: Avx2Fma, h: &Head<'_>, out: &mut [f32], scratch: &mut [f32]) {
            attend_head(s, Native, Narrow, h, out, scratch);
        }

        #[target_feature(enable = "avx2")]
        unsafe fn attend_avx2_wide(
            s: Avx2,
            wide: Avx512Attend,
            h: &Head<'_>,
            out: &mut [f32],
            scratch: &mut [f32],
        ) {
            attend_head(s, Unfused, wide, h, out, scratch);
        }

        #[target_feature(enable = "avx2,fma")]
        unsafe fn attend_fma_wide(
            s: Avx2Fma,
            wide: Avx512Attend,
            h: &Head<'_>,
            out: &mut [f32],
            scratch: &mut [f32],
        ) {
            attend_head(s, Native, wide, h, out, scratch);
        }

        /// Attention with the AVX-512 block kernel, else as `avx2`.
        fn attend_avx512_portable(h: &Head<'_>, out: &mut [f32], scratch: &mut [f32]) {
            match (Avx2::detect(), Avx512Attend::detect(Step::Unfused)) {
                // SAFETY: the AVX2 token exists, so the CPU supports AVX2 — the one
                // requirement of the `target_feature` function; its body is safe code.
                (Some(s), Some(wide)) => unsafe { attend_avx2_wide(s, wide, h, out, scratch) },
                _ => attend_portable(h, out, scratch),
            }
        }

        /// Fused, with the AVX-512 block kernel where the CPU has both, else as `avx2`.
        fn attend_avx512_native(h: &Head<'_>, out: &mut [f32], scratch: &mut [f32]) {
            match (Avx2Fma::detect(), Avx512Attend::detect(Step::Fused)) {
                // SAFETY: the token exists, so the CPU supports AVX2 and FMA — the
                // requirements of the `target_feature` function; its body is safe code.
                (Some(s), Some(wide)) => unsafe { attend_fma_wide(s, wide, h, out, scratch) },
                _ => attend_native(h, out, scratch),
            }
        }

        #[target_feature(enable = "avx2")]
        unsafe fn gemm_avx2(
            s: Avx2,
            t: &GemmTile<'_>,
            out: &mut [f32],
            ldc: usize,
            pack: &mut [f32],
        ) {
            gemm_tile(Vectors { s, mode: Unfused }, t, out, ldc, pack);
        }

        #[target_feature(enable = "avx2,fma")]
        unsafe fn gemm_fma(
            s: Avx2Fma,
            t: &GemmTile<'_>,
            out: &mut [f32],
            ldc: usize,
            pack: &mut [f32],
        ) {
            gemm_tile(Vectors { s, mode: Native }, t, out, ldc, pack);
        }

        #[target_feature(enable = "avx2")]
        unsafe fn skinny_avx2(s: Avx2, p: &Skinny<'_>, out: &mut [f32]) {
            skinny(s, Unfused, p, out);
        }

        #[target_feature(enable = "avx2,fma")]
        unsafe fn skinny_fma(s: Avx2Fma, p: &Skinny<'_>, out: &mut [f32]) {
            skinny(s, Native, p, out);
        }

        fn attend_portable(h: &Head<'_>, out: &mut [f32], scratch: &mut [f32]) {
            match Avx2::detect() {
                // SAFETY: the token exists, so the CPU supports AVX2 — the one requirement of
                // a `target_feature(enable = "avx2")` function; its body is safe code.
                Some(s) => unsafe { attend_avx2(s, h, out, scratch) },
                None => attend_on::<Sse2, Unfused>(h, out, scratch),
            }
        }

        /// Fused where the CPU has FMA; an AVX2 CPU without it is native as SSE2 is.
        fn attend_native(h: &Head<'_>, out: &mut [f32], scratch: &mut [f32]) {
            match Avx2Fma::detect() {
                // SAFETY: the token exists, so the CPU supports AVX2 and FMA — the
                // requirements of the `target_feature` function; its body is safe code.
                Some(s) => unsafe { attend_fma(s, h, out, scratch) },
                None => attend_on::<Sse2, Native>(h, out, scratch),
            }
        }

        fn gemm_portable(t: &GemmTile<'_>, out: &mut [f32], ldc: usize, pack: &mut [f32]) {
            match Avx2::detect() {
                // SAFETY: the token exists, so the CPU supports AVX2 — the one requirement of
                // the `target_feature` function; its body is safe code.
                Some(s) => unsafe { gemm_avx2(s, t, out, ldc, pack) },
                None => gemm_on::<Sse2, Unfused>(t, out, ldc, pack),
            }
        }

        /// Fused where the CPU has FMA; an AVX2 CPU without it is native as SSE2 is.
        fn gemm_native(t: &GemmTile<'_>, out: &mut [f32], ldc: usize, pack: &mut [f32]) {
            match Avx2Fma::detect() {
                // SAFETY: the token exists, so the CPU supports AVX2 and FMA — the
                // requirements of the `target_feature` function; its body is safe code.
                Some(s) => unsafe { gemm_fma(s, t, out, ldc, pack) },
                None => gemm_on::<Sse2, Native>(t, out, ldc, pack),
            }
        }

        fn skinny_portable(p: &Skinny<'_>, out: &mut [f32]) {
            match Avx2::detect() {
                // SAFETY: the token exists, so the CPU supports AVX2; the body is safe code.
                Some(s) => unsafe { skinny_avx2(s, p, out) },
                None => skinny_on::<Sse2, Unfused>(p, out),
            }
        }

        fn skinny_native(p: &Skinny<'_>, out: &mut [f32]) {
            match Avx2Fma::detect() {
                // SAFETY: the token exists, so the CPU supports AVX2 and FMA; the body is
                // safe code.
                Some(s) => unsafe { skinny_fma(s, p, out) },
                None => skinny_on::<Sse2, Native>(p, out),
            }
        }

        fn qexact_avx2(r: &QRows<'_>, cols: Range<usize>, out: &mut [f32]) {
            match Avx2::detect() {
                // SAFETY: the token exists, so the CPU supports AVX2, and F16C was detected.
                Some(_) if qdot_x86::supported() => unsafe { qdot_x86::exact_avx2(r, cols, out) },
                _ => exact_portable(r, cols, out),
            }
        }

        fn qexact_avx2_native(r: &QRows<'_>, cols: Range<usize>, out: &mut [f32]) {
            match Avx2Fma::detect() {
                // SAFETY: the token exists, so the CPU supports AVX2 and FMA; F16C was
                // detected.
                Some(_) if qdot_x86::supported() => unsafe {
                    qdot_x86::exact_avx2_fma(r, cols, out)
                },
                _ => exact_native(r, cols, out),
            }
        }

        fn q8_avx2(r: &Q8Rows<'_>, cols: Range<usize>, out: &mut [f32]) {
            if qdot8_x86::supported() {
                // SAFETY: the CPU supports AVX2 and F16C.
                unsafe { qdot8_x86::q8_avx2(r, cols, out) }
            } else {
                q8_portable(r, cols, out)
            }
        }

        fn q8_avx512(r: &Q8Rows<'_>, cols: Range<usize>, out: &mut [f32]) {
            if qdot8_x86::supported_avx512() {
                // SAFETY: the CPU supports AVX2, F16C and AVX-512 F, BW, VL and VNNI.
                unsafe { qdot8_x86::q8_avx512(r, cols, out) }
            } else {
                q8_avx2(r, cols, out)
            }
        }

        fn qexact_avx512(r: &QRows<'_>, cols: Range<usize>, out: &mut [f32]) {
            match (Avx2::detect(), Avx512::detect(Step::Unfused)) {
                // SAFETY: both tokens exist, so the CPU supports AVX2 and AVX-512F; F16C was
                // detected.
                (Some(_), Some(_)) if qdot_x86::supported() => unsafe {
                    qdot_x86::exact_avx512(r, cols, out)
                },
                _ => qexact_avx2(r, cols, out),
            }
        }

        fn qexact_avx512_native(r: &QRows<'_>, cols: Range<usize>, out: &mut [f32]) {
            match (Avx2Fma::detect(), Avx512::detect(Step::Fused)) {
                // SAFETY: both tokens exist, so the CPU supports AVX2, FMA and AVX-512F; F16C
                // was detected.
                (Some(_), Some(_)) if qdot_x86::supported() => unsafe {
                    qdot_x86::exact_avx512_fma(r, cols, out)
                },
                _ => qexact_avx2_native(r, cols, out),
            }
        }

        fn has_avx512() -> bool {
            has_avx2() && Avx512::detect(Step::Unfused).is_some()
        }

        fn gemm_avx512_portable(t: &GemmTile<'_>, out: &mut [f32], ldc: usize, pack: &mut [f32]) {
            match Avx512::detect(Step::Unfused) {
                Some(kernel) => gemm_tile(kernel, t, out, ldc, pack),
                None => gemm_portable(t, out, ldc, pack),
            }
        }

        fn gemm_avx512_native(t: &GemmTile<'_>, out: &mut [f32], ldc: usize, pack: &mut [f32]) {
            match Avx512::detect(Step::Fused) {
                Some(kernel) => gemm_tile(kernel, t, out, ldc, pack),
                None => gemm_native(t, out, ldc, pack),
            }
        }

        /// The AVX2 variant with the packed product's and the attention's AVX-512
        /// micro-kernels.
        pub(in crate::kernels::variants) fn avx512() -> CpuKernels {
            CpuKernels {
                name: "avx512",
                priority: 20,
                available: has_avx512,
                attend: PerMode {
                    portable: attend_avx512_portable,
                    native: attend_avx512_native,
                },
                gemm: PerMode {
                    portable: gemm_avx512_portable,
                    native: gemm_avx512_native,
                },
                qexact: PerMode {
                    portable: qexact_avx512,
                    native: qexact_avx512_native,
                },
                q8: q8_avx512,
                ..avx2()
            }
        }

        pub(in crate::kernels::variants) fn avx2() -> CpuKernels {
            CpuKernels {
                name: "avx2",
                priority: 10,
                available: has_avx2,
                attend: PerMode {
                    portable: attend_portable,
                    native: attend_native,
                },
                gemm: PerMode {
                    portable: gemm_portable,
                    native: gemm_native,
                },
                skinny: PerMode {
                    portable: skinny_portable,
                    native: skinny_native,
                },
                qexact: PerMode {
                    portable: qexact_avx2,
                    native: qexact_avx2_native,
                },
                q8: q8_avx2,
            }
        }
    }

    #[cfg(feature = "std")]
    pub(super) use avx2::{avx2, avx512};
}

#[cfg(target_arch = "aarch64")]
mod aarch64 {
    //! The vector backend of aarch64. NEON is part of the baseline, so the variant is always
    //! available and needs no detection. Attention's native mode fuses (`NeonFma`); the
    //! products' native mode is still the unfused arithmetic (NEON's fused multiply-add is not
    //! wired in there yet).
    use super::*;
    use crate::kernels::loops::simd::{Neon, NeonFma};

    pub(super) fn neon() -> CpuKernels {
        CpuKernels {
            name: "neon",
            priority: 5,
            available: always,
            attend: PerMode {
                portable: attend_on::<Neon, Unfused>,
                native: attend_on::<NeonFma, Native>,
            },
            gemm: gemm_modes::<Neon>(),
            skinny: skinny_modes::<Neon>(),
            qexact: QEXACT_PORTABLE,
            q8: q8_portable,
        }
    }
}

static REGISTRY: Once<KernelRegistry<CpuKernels>> = Once::new();

/// The registry of CPU kernel variants, filled on first use with `portable` (priority 0) and,
/// on x86_64, `sse2` (priority 5) and, with `std`, `avx2` (priority 10, available when the CPU
/// has AVX2) and `avx512` (priority 20: `avx2` with the AVX-512 micro-kernels of the packed
/// product and the attention, available when the CPU has AVX-512F too); on aarch64, `neon`
/// (priority 5, always available).
///
/// ```
/// # #[cfg(not(feature = "loom"))] { // loom primitives only work inside a model
/// use skainet_schedule::prelude::*;
/// use skainet_schedule::cpu_kernels;
/// assert!(cpu_kernels().find("portable").is_some());
/// # }
/// ```
pub fn cpu_kernels() -> &'static KernelRegistry<CpuKernels> {
    REGISTRY.call_once(|| {
        let registry = KernelRegistry::new();
        registry.register(Arc::new(CpuKernels::portable()));
        #[cfg(target_arch = "x86_64")]
        registry.register(Arc::new(x86::sse2()));
        #[cfg(all(target_arch = "x86_64", feature = "std"))]
        registry.register(Arc::new(x86::avx2()));
        #[cfg(target_arch = "aarch64")]
        registry.register(Arc::new(aarch64::neon()));
        #[cfg(all(target_arch = "x86_64", feature = "std"))]
        registry.register(Arc::new(x86::avx512()));
        registry
    })
}

/// The variant the kernels run now: the highest-priority available provider of
/// [`cpu_kernels`].
pub fn selected_kernels() -> Arc<CpuKernels> {
    cpu_kernels()
        .best_available()
        .unwrap_or_else(|| Arc::new(CpuKernels::portable()))
}
