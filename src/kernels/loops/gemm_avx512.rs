//! The AVX-512 micro-kernel of the packed product: `12 × 32` (two 16-lane registers a row),
//! so 24 accumulators, two B vectors, a broadcast and two products fill 29 of the 32 `zmm`
//! registers.
//!
//! Written as inline assembly: the AVX-512 intrinsics and `target_feature(enable = "avx512f")`
//! are newer than the crate's minimum Rust version, while `asm!` is not. Each element's steps
//! are those of [`Vectors`](super::gemm::Vectors) — `vmulps` then `vaddps` (two roundings), or
//! one `vfmadd231ps` — in the same increasing inner index, so the bits are those of the 8-lane
//! backends in either mode; only 16 lanes run at once.

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
        let ldc_bytes = ldc * core::mem::size_of::<f32>();
        // Registers: `rsi` walks A, `rdx` walks B, `rdi` is C's first row, `r8` walks its rows
        // `r9` bytes apart, `rcx` counts the depth down.
        match self.step {
            // SAFETY: the token exists only where AVX-512F was detected. The assembly reads
            // `kc·12` values from `a` and `kc·32` from `b`, and reads and writes `c[i·ldc..][..32]`
            // for `i < 12` — all inside the slices just taken. It touches no other memory and
            // no stack; every vector register it uses is call-clobbered (`clobber_abi`), so the
            // compiler keeps nothing there across it.
            Step::Fused => unsafe {
                core::arch::asm!(
                "mov r8, rdi",
                "vmovups zmm0, [r8]", "vmovups zmm1, [r8 + 64]", "add r8, r9",
                "vmovups zmm2, [r8]", "vmovups zmm3, [r8 + 64]", "add r8, r9",
                "vmovups zmm4, [r8]", "vmovups zmm5, [r8 + 64]", "add r8, r9",
                "vmovups zmm6, [r8]", "vmovups zmm7, [r8 + 64]", "add r8, r9",
                "vmovups zmm8, [r8]", "vmovups zmm9, [r8 + 64]", "add r8, r9",
                "vmovups zmm10, [r8]", "vmovups zmm11, [r8 + 64]", "add r8, r9",
                "vmovups zmm12, [r8]", "vmovups zmm13, [r8 + 64]", "add r8, r9",
                "vmovups zmm14, [r8]", "vmovups zmm15, [r8 + 64]", "add r8, r9",
                "vmovups zmm16, [r8]", "vmovups zmm17, [r8 + 64]", "add r8, r9",
                "vmovups zmm18, [r8]", "vmovups zmm19, [r8 + 64]", "add r8, r9",
                "vmovups zmm20, [r8]", "vmovups zmm21, [r8 + 64]", "add r8, r9",
                "vmovups zmm22, [r8]", "vmovups zmm23, [r8 + 64]", "add r8, r9",
                "2:",
                "vmovups zmm24, [rdx]", "vmovups zmm25, [rdx + 64]",
                "vbroadcastss zmm26, dword ptr [rsi + 0]", "vfmadd231ps zmm0, zmm24, zmm26", "vfmadd231ps zmm1, zmm25, zmm26",
                "vbroadcastss zmm26, dword ptr [rsi + 4]", "vfmadd231ps zmm2, zmm24, zmm26", "vfmadd231ps zmm3, zmm25, zmm26",
                "vbroadcastss zmm26, dword ptr [rsi + 8]", "vfmadd231ps zmm4, zmm24, zmm26", "vfmadd231ps zmm5, zmm25, zmm26",
                "vbroadcastss zmm26, dword ptr [rsi + 12]", "vfmadd231ps zmm6, zmm24, zmm26", "vfmadd231ps zmm7, zmm25, zmm26",
                "vbroadcastss zmm26, dword ptr [rsi + 16]", "vfmadd231ps zmm8, zmm24, zmm26", "vfmadd231ps zmm9, zmm25, zmm26",
                "vbroadcastss zmm26, dword ptr [rsi + 20]", "vfmadd231ps zmm10, zmm24, zmm26", "vfmadd231ps zmm11, zmm25, zmm26",
                "vbroadcastss zmm26, dword ptr [rsi + 24]", "vfmadd231ps zmm12, zmm24, zmm26", "vfmadd231ps zmm13, zmm25, zmm26",
                "vbroadcastss zmm26, dword ptr [rsi + 28]", "vfmadd231ps zmm14, zmm24, zmm26", "vfmadd231ps zmm15, zmm25, zmm26",
                "vbroadcastss zmm26, dword ptr [rsi + 32]", "vfmadd231ps zmm16, zmm24, zmm26", "vfmadd231ps zmm17, zmm25, zmm26",
                "vbroadcastss zmm26, dword ptr [rsi + 36]", "vfmadd231ps zmm18, zmm24, zmm26", "vfmadd231ps zmm19, zmm25, zmm26",
                "vbroadcastss zmm26, dword ptr [rsi + 40]", "vfmadd231ps zmm20, zmm24, zmm26", "vfmadd231ps zmm21, zmm25, zmm26",
                "vbroadcastss zmm26, dword ptr [rsi + 44]", "vfmadd231ps zmm22, zmm24, zmm26", "vfmadd231ps zmm23, zmm25, zmm26",
                "add rsi, 48", "add rdx, 128", "dec rcx", "jnz 2b",
                "mov r8, rdi",
                "vmovups [r8], zmm0", "vmovups [r8 + 64], zmm1", "add r8, r9",
                "vmovups [r8], zmm2", "vmovups [r8 + 64], zmm3", "add r8, r9",
                "vmovups [r8], zmm4", "vmovups [r8 + 64], zmm5", "add r8, r9",
                "vmovups [r8], zmm6", "vmovups [r8 + 64], zmm7", "add r8, r9",
                "vmovups [r8], zmm8", "vmovups [r8 + 64], zmm9", "add r8, r9",
                "vmovups [r8], zmm10", "vmovups [r8 + 64], zmm11", "add r8, r9",
                "vmovups [r8], zmm12", "vmovups [r8 + 64], zmm13", "add r8, r9",
                "vmovups [r8], zmm14", "vmovups [r8 + 64], zmm15", "add r8, r9",
                "vmovups [r8], zmm16", "vmovups [r8 + 64], zmm17", "add r8, r9",
                "vmovups [r8], zmm18", "vmovups [r8 + 64], zmm19", "add r8, r9",
                "vmovups [r8], zmm20", "vmovups [r8 + 64], zmm21", "add r8, r9",
                "vmovups [r8], zmm22", "vmovups [r8 + 64], zmm23", "add r8, r9",
                "vzeroupper",
                        inout("rsi") a.as_ptr() => _,
                        inout("rdx") b.as_ptr() => _,
                        in("rdi") c.as_mut_ptr(),
                        out("r8") _,
                        in("r9") ldc_bytes,
                        inout("rcx") kc => _,
                        clobber_abi("C"),
                        options(nostack),
                    )
            },
            // SAFETY: as above; the loop differs only in its arithmetic.
            Step::Unfused => unsafe {
                core::arch::asm!(
                "mov r8, rdi",
                "vmovups zmm0, [r8]", "vmovups zmm1, [r8 + 64]", "add r8, r9",
                "vmovups zmm2, [r8]", "vmovups zmm3, [r8 + 64]", "add r8, r9",
                "vmovups zmm4, [r8]", "vmovups zmm5, [r8 + 64]", "add r8, r9",
                "vmovups zmm6, [r8]", "vmovups zmm7, [r8 + 64]", "add r8, r9",
                "vmovups zmm8, [r8]", "vmovups zmm9, [r8 + 64]", "add r8, r9",
                "vmovups zmm10, [r8]", "vmovups zmm11, [r8 + 64]", "add r8, r9",
                "vmovups zmm12, [r8]", "vmovups zmm13, [r8 + 64]", "add r8, r9",
                "vmovups zmm14, [r8]", "vmovups zmm15, [r8 + 64]", "add r8, r9",
                "vmovups zmm16, [r8]", "vmovups zmm17, [r8 + 64]", "add r8, r9",
                "vmovups zmm18, [r8]", "vmovups zmm19, [r8 + 64]", "add r8, r9",
                "vmovups zmm20, [r8]", "vmovups zmm21, [r8 + 64]", "add r8, r9",
                "vmovups zmm22, [r8]", "vmovups zmm23, [r8 + 64]", "add r8, r9",
                "2:",
                "vmovups zmm24, [rdx]", "vmovups zmm25, [rdx + 64]",
                "vbroadcastss zmm26, dword ptr [rsi + 0]", "vmulps zmm27, zmm24, zmm26", "vaddps zmm0, zmm0, zmm27", "vmulps zmm28, zmm25, zmm26", "vaddps zmm1, zmm1, zmm28",
                "vbroadcastss zmm26, dword ptr [rsi + 4]", "vmulps zmm27, zmm24, zmm26", "vaddps zmm2, zmm2, zmm27", "vmulps zmm28, zmm25, zmm26", "vaddps zmm3, zmm3, zmm28",
                "vbroadcastss zmm26, dword ptr [rsi + 8]", "vmulps zmm27, zmm24, zmm26", "vaddps zmm4, zmm4, zmm27", "vmulps zmm28, zmm25, zmm26", "vaddps zmm5, zmm5, zmm28",
                "vbroadcastss zmm26, dword ptr [rsi + 12]", "vmulps zmm27, zmm24, zmm26", "vaddps zmm6, zmm6, zmm27", "vmulps zmm28, zmm25, zmm26", "vaddps zmm7, zmm7, zmm28",
                "vbroadcastss zmm26, dword ptr [rsi + 16]", "vmulps zmm27, zmm24, zmm26", "vaddps zmm8, zmm8, zmm27", "vmulps zmm28, zmm25, zmm26", "vaddps zmm9, zmm9, zmm28",
                "vbroadcastss zmm26, dword ptr [rsi + 20]", "vmulps zmm27, zmm24, zmm26", "vaddps zmm10, zmm10, zmm27", "vmulps zmm28, zmm25, zmm26", "vaddps zmm11, zmm11, zmm28",
                "vbroadcastss zmm26, dword ptr [rsi + 24]", "vmulps zmm27, zmm24, zmm26", "vaddps zmm12, zmm12, zmm27", "vmulps zmm28, zmm25, zmm26", "vaddps zmm13, zmm13, zmm28",
                "vbroadcastss zmm26, dword ptr [rsi + 28]", "vmulps zmm27, zmm24, zmm26", "vaddps zmm14, zmm14, zmm27", "vmulps zmm28, zmm25, zmm26", "vaddps zmm15, zmm15, zmm28",
                "vbroadcastss zmm26, dword ptr [rsi + 32]", "vmulps zmm27, zmm24, zmm26", "vaddps zmm16, zmm16, zmm27", "vmulps zmm28, zmm25, zmm26", "vaddps zmm17, zmm17, zmm28",
                "vbroadcastss zmm26, dword ptr [rsi + 36]", "vmulps zmm27, zmm24, zmm26", "vaddps zmm18, zmm18, zmm27", "vmulps zmm28, zmm25, zmm26", "vaddps zmm19, zmm19, zmm28",
                "vbroadcastss zmm26, dword ptr [rsi + 40]", "vmulps zmm27, zmm24, zmm26", "vaddps zmm20, zmm20, zmm27", "vmulps zmm28, zmm25, zmm26", "vaddps zmm21, zmm21, zmm28",
                "vbroadcastss zmm26, dword ptr [rsi + 44]", "vmulps zmm27, zmm24, zmm26", "vaddps zmm22, zmm22, zmm27", "vmulps zmm28, zmm25, zmm26", "vaddps zmm23, zmm23, zmm28",
                "add rsi, 48", "add rdx, 128", "dec rcx", "jnz 2b",
                "mov r8, rdi",
                "vmovups [r8], zmm0", "vmovups [r8 + 64], zmm1", "add r8, r9",
                "vmovups [r8], zmm2", "vmovups [r8 + 64], zmm3", "add r8, r9",
                "vmovups [r8], zmm4", "vmovups [r8 + 64], zmm5", "add r8, r9",
                "vmovups [r8], zmm6", "vmovups [r8 + 64], zmm7", "add r8, r9",
                "vmovups [r8], zmm8", "vmovups [r8 + 64], zmm9", "add r8, r9",
                "vmovups [r8], zmm10", "vmovups [r8 + 64], zmm11", "add r8, r9",
                "vmovups [r8], zmm12", "vmovups [r8 + 64], zmm13", "add r8, r9",
                "vmovups [r8], zmm14", "vmovups [r8 + 64], zmm15", "add r8, r9",
                "vmovups [r8], zmm16", "vmovups [r8 + 64], zmm17", "add r8, r9",
                "vmovups [r8], zmm18", "vmovups [r8 + 64], zmm19", "add r8, r9",
                "vmovups [r8], zmm20", "vmovups [r8 + 64], zmm21", "add r8, r9",
                "vmovups [r8], zmm22", "vmovups [r8 + 64], zmm23", "add r8, r9",
                "vzeroupper",
                        inout("rsi") a.as_ptr() => _,
                        inout("rdx") b.as_ptr() => _,
                        in("rdi") c.as_mut_ptr(),
                        out("r8") _,
                        in("r9") ldc_bytes,
                        inout("rcx") kc => _,
                        clobber_abi("C"),
                        options(nostack),
                    )
            },
        }
    }
}
