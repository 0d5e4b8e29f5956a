//! The AVX-512 micro-kernel of the packed product: `12 × 32` (two 16-lane registers a row),
//! so 24 accumulators, two B vectors, a broadcast and two products fill 29 of the 32 `zmm`
//! registers.
//!
//! Each element's steps are those of [`Vectors`](super::gemm::Vectors) — `vmulps` then
//! `vaddps` (two roundings), or one `vfmadd231ps` — in the same increasing inner index, so the
//! bits are those of the 8-lane backends in either mode; only 16 lanes run at once. Written
//! with `core::arch` intrinsics over fixed-size arrays the compiler keeps in registers (every
//! index is a constant once the loops over rows unroll).

#[cfg(target_arch = "x86_64")]
use core::arch::x86_64::{
    __m512, _mm512_add_ps, _mm512_fmadd_ps, _mm512_loadu_ps, _mm512_mul_ps, _mm512_set1_ps,
    _mm512_setzero_ps, _mm512_storeu_ps,
};

use super::gemm::MicroKernel;

/// Which step the kernel's loop runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// `vmulps` then `vaddps`: the portable mode.
    Unfused,
    /// `vfmadd231ps`: the native mode.
    Fused,
}

/// The kernel; a value exists only where the CPU reports AVX-512F.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Avx512 {
    step: Step,
}

impl Avx512 {
    /// The kernel running `step`, if this CPU supports AVX-512F.
    #[inline(always)]
    pub(crate) fn detect(step: Step) -> Option<Self> {
        std::is_x86_feature_detected!("avx512f").then_some(Self { step })
    }
}

const MR: usize = 12;
const NR: usize = 32;

impl MicroKernel for Avx512 {
    const MR: usize = MR;
    const NR: usize = NR;
    // A 32-column panel of B (24 KiB) and a 12-row one of A (9 KiB) fit L1 (48 KiB here).
    const KC: usize = 192;

    #[inline(always)]
    fn run(self, a: &[f32], b: &[f32], c: &mut [f32], ldc: usize) {
        let kc = a.len() / MR;
        if kc == 0 {
            return;
        }
        // The loop reads exactly these panels and writes these twelve rows.
        let a = &a[..kc * MR];
        let b = &b[..kc * NR];
        let c = &mut c[..(MR - 1) * ldc + NR];
        match self.step {
            // SAFETY: the token exists only where AVX-512F was detected, and the slices just
            // taken hold `kc·12`, `kc·32` and `11·ldc + 32` values, as `tile` needs.
            Step::Fused => unsafe { tile::<true>(a, b, c, ldc, kc) },
            // SAFETY: as above.
            Step::Unfused => unsafe { tile::<false>(a, b, c, ldc, kc) },
        }
    }
}

/// `c[i·ldc..][..32] += Σ_p a[p·12 + i] · b[p·32..][..32]` for `i < 12`, `p < kc`, in
/// increasing `p`: fused (`FUSED`) or a product then a sum.
///
/// # Safety
///
/// The CPU has AVX-512F; `a` holds `kc·12` values, `b` `kc·32` and `c` `11·ldc + 32`.
#[target_feature(enable = "avx512f")]
unsafe fn tile<const FUSED: bool>(a: &[f32], b: &[f32], c: &mut [f32], ldc: usize, kc: usize) {
    debug_assert!(a.len() >= kc * MR && b.len() >= kc * NR && c.len() > (MR - 1) * ldc + NR - 1);
    let (a, b, c) = (a.as_ptr(), b.as_ptr(), c.as_mut_ptr());
    let mut acc: [__m512; 2 * MR] = [_mm512_setzero_ps(); 2 * MR];
    for i in 0..MR {
        // SAFETY: row `i < 12` of C: its 32 values lie inside `c` (the caller's length).
        unsafe {
            acc[2 * i] = _mm512_loadu_ps(c.add(i * ldc));
            acc[2 * i + 1] = _mm512_loadu_ps(c.add(i * ldc + 16));
        }
    }
    for p in 0..kc {
        // SAFETY: `p < kc`: B's 32 values and A's 12 values of step `p` are inside the panels.
        let (b0, b1) = unsafe {
            (
                _mm512_loadu_ps(b.add(p * NR)),
                _mm512_loadu_ps(b.add(p * NR + 16)),
            )
        };
        for i in 0..MR {
            // SAFETY: as above.
            let x = _mm512_set1_ps(unsafe { *a.add(p * MR + i) });
            if FUSED {
                acc[2 * i] = _mm512_fmadd_ps(b0, x, acc[2 * i]);
                acc[2 * i + 1] = _mm512_fmadd_ps(b1, x, acc[2 * i + 1]);
            } else {
                acc[2 * i] = _mm512_add_ps(acc[2 * i], _mm512_mul_ps(b0, x));
                acc[2 * i + 1] = _mm512_add_ps(acc[2 * i + 1], _mm512_mul_ps(b1, x));
            }
        }
    }
    for i in 0..MR {
        // SAFETY: as for the loads.
        unsafe {
            _mm512_storeu_ps(c.add(i * ldc), acc[2 * i]);
            _mm512_storeu_ps(c.add(i * ldc + 16), acc[2 * i + 1]);
        }
    }
}
