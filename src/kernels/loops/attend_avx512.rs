//! The AVX-512 micro-kernel of the attention: `c[4 × 64] += Σ_k a[k, r] · b[k, 0..64]` in 16
//! accumulators of 16 lanes, the step of both the score phase (queries against a transposed
//! key tile) and the weighted sum (weights against value rows).
//!
//! Written as inline assembly: the AVX-512 intrinsics and `target_feature(enable = "avx512f")`
//! are newer than the crate's minimum Rust version, while `asm!` is not. Each element is the
//! chain of the 8-lane kernels (`scores_block`, `weigh_rows` in `lanes.rs`): its steps in
//! increasing `k`, each `vmulps` then `vaddps` (two roundings) or one `vfmadd231ps`, so the
//! bits are those of every other backend in the same mode; only 64 columns run at once.

#[cfg(all(target_arch = "x86_64", feature = "std"))]
use super::super::gemm_avx512::Step;

/// A block kernel for the attention's two products; [`Narrow`] has none.
pub(crate) trait Wide: Copy {
    /// `c[r·c_row + x] += Σ_{k < depth} a[k·a_step + r·a_row] · b[k·b_step + x]` for `r < 4`,
    /// `x < 64`, in increasing `k`, rounding as `step`. Returns `false`, having done nothing,
    /// where it has no such kernel or the slices are too short for those positions.
    #[allow(clippy::too_many_arguments)]
    fn block_4x64(
        self,
        a: &[f32],
        a_step: usize,
        a_row: usize,
        b: &[f32],
        b_step: usize,
        depth: usize,
        c: &mut [f32],
        c_row: usize,
    ) -> bool;
}

/// No wide kernel: every block runs on the 8-lane backend.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Narrow;

impl Wide for Narrow {
    #[inline(always)]
    fn block_4x64(
        self,
        _: &[f32],
        _: usize,
        _: usize,
        _: &[f32],
        _: usize,
        _: usize,
        _: &mut [f32],
        _: usize,
    ) -> bool {
        false
    }
}

/// The AVX-512 kernel; a value exists only where the CPU reports AVX-512F.
#[cfg(all(target_arch = "x86_64", feature = "std"))]
#[derive(Debug, Clone, Copy)]
pub(crate) struct Avx512Attend {
    step: Step,
}

#[cfg(all(target_arch = "x86_64", feature = "std"))]
impl Avx512Attend {
    /// The kernel running `step`, if this CPU supports AVX-512F.
    #[inline(always)]
    pub(crate) fn detect(step: Step) -> Option<Self> {
        std::is_x86_feature_detected!("avx512f").then_some(Self { step })
    }
}

#[cfg(all(target_arch = "x86_64", feature = "std"))]
/// The largest index `+ 1` that `len` positions `step` apart, starting `rows` of `row` apart, with
/// `width` values each, reach: `None` on overflow.
fn reach(len: usize, step: usize, row: usize, width: usize) -> Option<usize> {
    (len - 1)
        .checked_mul(step)?
        .checked_add(row.checked_mul(3)?)?
        .checked_add(width)
}

#[cfg(all(target_arch = "x86_64", feature = "std"))]
impl Wide for Avx512Attend {
    #[inline(always)]
    fn block_4x64(
        self,
        a: &[f32],
        a_step: usize,
        a_row: usize,
        b: &[f32],
        b_step: usize,
        depth: usize,
        c: &mut [f32],
        c_row: usize,
    ) -> bool {
        if depth == 0 {
            return true;
        }
        let fits = reach(depth, a_step, a_row, 1).is_some_and(|n| n <= a.len())
            && reach(depth, b_step, 0, 64).is_some_and(|n| n <= b.len())
            && reach(1, 0, c_row, 64).is_some_and(|n| n <= c.len())
            // Byte offsets fit an address register.
            && [a_step, a_row, b_step, c_row]
                .iter()
                .all(|&s| s.checked_mul(12).is_some_and(|n| n <= isize::MAX as usize));
        if !fits {
            return false;
        }
        match self.step {
            // SAFETY: the token exists only where AVX-512F was detected. The assembly reads
            // `a[k·a_step + r·a_row]` and `b[k·b_step..][..64]` for `k < depth`, `r < 4`, and
            // reads and writes `c[r·c_row..][..64]` — all inside the slices, as just checked.
            // It touches no other memory and no stack; every vector register it uses is
            // call-clobbered (`clobber_abi`).
            Step::Fused => unsafe {
                core::arch::asm!(
                    "mov r8, {c}",
                    "vmovups zmm0, [r8]", "vmovups zmm1, [r8 + 64]", "vmovups zmm2, [r8 + 128]", "vmovups zmm3, [r8 + 192]", "add r8, {cs}",
                    "vmovups zmm4, [r8]", "vmovups zmm5, [r8 + 64]", "vmovups zmm6, [r8 + 128]", "vmovups zmm7, [r8 + 192]", "add r8, {cs}",
                    "vmovups zmm8, [r8]", "vmovups zmm9, [r8 + 64]", "vmovups zmm10, [r8 + 128]", "vmovups zmm11, [r8 + 192]", "add r8, {cs}",
                    "vmovups zmm12, [r8]", "vmovups zmm13, [r8 + 64]", "vmovups zmm14, [r8 + 128]", "vmovups zmm15, [r8 + 192]", "add r8, {cs}",
                    "2:",
                    "vmovups zmm16, [rdx]", "vmovups zmm17, [rdx + 64]", "vmovups zmm18, [rdx + 128]", "vmovups zmm19, [rdx + 192]",
                    "vbroadcastss zmm20, dword ptr [rsi]",
                    "vfmadd231ps zmm0, zmm16, zmm20", "vfmadd231ps zmm1, zmm17, zmm20", "vfmadd231ps zmm2, zmm18, zmm20", "vfmadd231ps zmm3, zmm19, zmm20",
                    "vbroadcastss zmm20, dword ptr [rsi + {ar}]",
                    "vfmadd231ps zmm4, zmm16, zmm20", "vfmadd231ps zmm5, zmm17, zmm20", "vfmadd231ps zmm6, zmm18, zmm20", "vfmadd231ps zmm7, zmm19, zmm20",
                    "vbroadcastss zmm20, dword ptr [rsi + {ar}*2]",
                    "vfmadd231ps zmm8, zmm16, zmm20", "vfmadd231ps zmm9, zmm17, zmm20", "vfmadd231ps zmm10, zmm18, zmm20", "vfmadd231ps zmm11, zmm19, zmm20",
                    "vbroadcastss zmm20, dword ptr [rsi + {ar3}]",
                    "vfmadd231ps zmm12, zmm16, zmm20", "vfmadd231ps zmm13, zmm17, zmm20", "vfmadd231ps zmm14, zmm18, zmm20", "vfmadd231ps zmm15, zmm19, zmm20",
                    "add rsi, {astep}", "add rdx, {bstep}", "dec rcx", "jnz 2b",
                    "mov r8, {c}",
                    "vmovups [r8], zmm0", "vmovups [r8 + 64], zmm1", "vmovups [r8 + 128], zmm2", "vmovups [r8 + 192], zmm3", "add r8, {cs}",
                    "vmovups [r8], zmm4", "vmovups [r8 + 64], zmm5", "vmovups [r8 + 128], zmm6", "vmovups [r8 + 192], zmm7", "add r8, {cs}",
                    "vmovups [r8], zmm8", "vmovups [r8 + 64], zmm9", "vmovups [r8 + 128], zmm10", "vmovups [r8 + 192], zmm11", "add r8, {cs}",
                    "vmovups [r8], zmm12", "vmovups [r8 + 64], zmm13", "vmovups [r8 + 128], zmm14", "vmovups [r8 + 192], zmm15", "add r8, {cs}",
                    "vzeroupper",
                    inout("rsi") a.as_ptr() => _,
                    inout("rdx") b.as_ptr() => _,
                    c = in(reg) c.as_mut_ptr(),
                    out("r8") _,
                    inout("rcx") depth => _,
                    ar = in(reg) a_row * 4,
                    ar3 = in(reg) a_row * 12,
                    astep = in(reg) a_step * 4,
                    bstep = in(reg) b_step * 4,
                    cs = in(reg) c_row * 4,
                    clobber_abi("C"),
                    options(nostack),
                )
            },
            // SAFETY: as above; the loop differs only in its arithmetic.
            Step::Unfused => unsafe {
                core::arch::asm!(
                    "mov r8, {c}",
                    "vmovups zmm0, [r8]", "vmovups zmm1, [r8 + 64]", "vmovups zmm2, [r8 + 128]", "vmovups zmm3, [r8 + 192]", "add r8, {cs}",
                    "vmovups zmm4, [r8]", "vmovups zmm5, [r8 + 64]", "vmovups zmm6, [r8 + 128]", "vmovups zmm7, [r8 + 192]", "add r8, {cs}",
                    "vmovups zmm8, [r8]", "vmovups zmm9, [r8 + 64]", "vmovups zmm10, [r8 + 128]", "vmovups zmm11, [r8 + 192]", "add r8, {cs}",
                    "vmovups zmm12, [r8]", "vmovups zmm13, [r8 + 64]", "vmovups zmm14, [r8 + 128]", "vmovups zmm15, [r8 + 192]", "add r8, {cs}",
                    "2:",
                    "vmovups zmm16, [rdx]", "vmovups zmm17, [rdx + 64]", "vmovups zmm18, [rdx + 128]", "vmovups zmm19, [rdx + 192]",
                    "vbroadcastss zmm20, dword ptr [rsi]",
                    "vmulps zmm21, zmm16, zmm20", "vaddps zmm0, zmm0, zmm21", "vmulps zmm22, zmm17, zmm20", "vaddps zmm1, zmm1, zmm22", "vmulps zmm23, zmm18, zmm20", "vaddps zmm2, zmm2, zmm23", "vmulps zmm24, zmm19, zmm20", "vaddps zmm3, zmm3, zmm24",
                    "vbroadcastss zmm20, dword ptr [rsi + {ar}]",
                    "vmulps zmm21, zmm16, zmm20", "vaddps zmm4, zmm4, zmm21", "vmulps zmm22, zmm17, zmm20", "vaddps zmm5, zmm5, zmm22", "vmulps zmm23, zmm18, zmm20", "vaddps zmm6, zmm6, zmm23", "vmulps zmm24, zmm19, zmm20", "vaddps zmm7, zmm7, zmm24",
                    "vbroadcastss zmm20, dword ptr [rsi + {ar}*2]",
                    "vmulps zmm21, zmm16, zmm20", "vaddps zmm8, zmm8, zmm21", "vmulps zmm22, zmm17, zmm20", "vaddps zmm9, zmm9, zmm22", "vmulps zmm23, zmm18, zmm20", "vaddps zmm10, zmm10, zmm23", "vmulps zmm24, zmm19, zmm20", "vaddps zmm11, zmm11, zmm24",
                    "vbroadcastss zmm20, dword ptr [rsi + {ar3}]",
                    "vmulps zmm21, zmm16, zmm20", "vaddps zmm12, zmm12, zmm21", "vmulps zmm22, zmm17, zmm20", "vaddps zmm13, zmm13, zmm22", "vmulps zmm23, zmm18, zmm20", "vaddps zmm14, zmm14, zmm23", "vmulps zmm24, zmm19, zmm20", "vaddps zmm15, zmm15, zmm24",
                    "add rsi, {astep}", "add rdx, {bstep}", "dec rcx", "jnz 2b",
                    "mov r8, {c}",
                    "vmovups [r8], zmm0", "vmovups [r8 + 64], zmm1", "vmovups [r8 + 128], zmm2", "vmovups [r8 + 192], zmm3", "add r8, {cs}",
                    "vmovups [r8], zmm4", "vmovups [r8 + 64], zmm5", "vmovups [r8 + 128], zmm6", "vmovups [r8 + 192], zmm7", "add r8, {cs}",
                    "vmovups [r8], zmm8", "vmovups [r8 + 64], zmm9", "vmovups [r8 + 128], zmm10", "vmovups [r8 + 192], zmm11", "add r8, {cs}",
                    "vmovups [r8], zmm12", "vmovups [r8 + 64], zmm13", "vmovups [r8 + 128], zmm14", "vmovups [r8 + 192], zmm15", "add r8, {cs}",
                    "vzeroupper",
                    inout("rsi") a.as_ptr() => _,
                    inout("rdx") b.as_ptr() => _,
                    c = in(reg) c.as_mut_ptr(),
                    out("r8") _,
                    inout("rcx") depth => _,
                    ar = in(reg) a_row * 4,
                    ar3 = in(reg) a_row * 12,
                    astep = in(reg) a_step * 4,
                    bstep = in(reg) b_step * 4,
                    cs = in(reg) c_row * 4,
                    clobber_abi("C"),
                    options(nostack),
                )
            },
        }
        true
    }
}
