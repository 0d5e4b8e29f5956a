//! Exact mode's dot products over quantized weight rows on x86_64 vectors: the weight decoded
//! a block at a time straight into registers (never to memory), then multiplied into the
//! activations in the portable order of `qdot.rs`.
//!
//! The order of every output is [`exact_dots`](super::qdot::exact_dots)' (value `p` to vector
//! `(p / 8) % 4`, lane `p % 8`; the vectors joined `(v0 + v1) + (v2 + v3)` and folded in the lane
//! contract's tree), and each decoded value is the block's own `decode` — the same integer,
//! converted, then the same one or two roundings with the same scales (f16 scales widened by
//! `vcvtph2ps`, which gives [`f16_to_f32`](crate::quant::f16_to_f32)'s bits, hence F16C beside
//! every backend here). So the portable mode returns the portable bits; only where the loop runs
//! changes:
//!
//! * [`Wide16`] on AVX2: sixteen values as two 8-lane registers;
//! * [`Wide16`] on AVX-512F: sixteen values as one 16-lane register, which holds vectors
//!   `(0, 1)` or `(2, 3)` of a group of 32 side by side, so the lane-wise steps are the same
//!   and only the join at the end first adds a register's halves.
//!
//! The native mode fuses each multiply-add of the dot (`vfmadd231ps`) as the 8-lane native
//! backends do; the decode itself is never fused.

use core::arch::x86_64::*;
use core::ops::Range;

use super::qdot::QRows;
use super::simd::{Avx2, Avx2Fma, Native, Unfused, LANES};
use crate::quant::{
    BlockQ4_0, BlockQ4_1, BlockQ4_K, BlockQ5_0, BlockQ5_1, BlockQ5_K, BlockQ6_K, BlockQ8_0,
    GgmlType,
};

/// Sixteen i32 or f32 lanes on one backend: what a decoder produces per half of a group of
/// 32 values. Every method is `#[inline(always)]` and may only run inside a function compiled
/// with the backend's target features, on a CPU that has them.
pub(crate) trait Wide16: Copy {
    /// Sixteen i32 lanes.
    type I: Copy;
    /// Sixteen f32 lanes.
    type F: Copy;
    /// `b[0..16]` zero-extended.
    unsafe fn u8s(b: &[u8; 16]) -> Self::I;
    /// `b[0..16]` sign-extended.
    unsafe fn i8s(b: &[u8; 16]) -> Self::I;
    /// Lane-wise `a & mask`.
    unsafe fn and(a: Self::I, mask: i32) -> Self::I;
    /// Lane-wise logical `a >> n`.
    unsafe fn shr(a: Self::I, n: u32) -> Self::I;
    /// Lane-wise `a << n`.
    unsafe fn shl(a: Self::I, n: u32) -> Self::I;
    /// Lane-wise `a | b`.
    unsafe fn or(a: Self::I, b: Self::I) -> Self::I;
    /// Lane-wise `a - c`.
    unsafe fn sub(a: Self::I, c: i32) -> Self::I;
    /// `(bits >> (first + lane)) & 1`, lane by lane.
    unsafe fn bit(bits: u32, first: u32) -> Self::I;
    /// Lane-wise conversion to f32 (exact: the quants are small).
    unsafe fn float(a: Self::I) -> Self::F;
    /// Lane-wise `a * s`.
    unsafe fn scale(a: Self::F, s: f32) -> Self::F;
    /// Lane-wise `a + s`.
    unsafe fn offset(a: Self::F, s: f32) -> Self::F;
    /// Lane-wise `a - s`.
    unsafe fn minus(a: Self::F, s: f32) -> Self::F;
    /// All lanes `+0.0`.
    unsafe fn zero() -> Self::F;
    /// `x[0..16]`.
    unsafe fn load(x: &[f32; 16]) -> Self::F;
    /// The sixteen little-endian f32 at `b`.
    unsafe fn f32s(b: &[u8; 64]) -> Self::F;
    /// The sixteen little-endian halves at `b`, widened by `vcvtph2ps` (F16C; exact, a NaN
    /// quieted: [`f16_to_f32`](crate::quant::f16_to_f32)'s bits).
    unsafe fn f16s(b: &[u8; 32]) -> Self::F;
    /// The sixteen little-endian bfloat16 at `b`, widened (`bits << 16`, exact).
    unsafe fn bf16s(b: &[u8; 32]) -> Self::F;
    /// The step of the dot: `acc + x·w`, two roundings, or one when `FUSED`.
    unsafe fn step<const FUSED: bool>(acc: Self::F, x: Self::F, w: Self::F) -> Self::F;
    /// The two 8-lane vectors the register holds, added: `v0 + v1`.
    unsafe fn join(a: Self::F) -> __m256;
    /// What [`look4`](Self::look4) needs of a block (or sub-block) whose 4-bit quants decode to
    /// `float(q - BIAS)·d`, then `+ m` (`OFF` 1), `- m` (`OFF` -1) or nothing (`OFF` 0).
    type Tab: Copy;
    /// The decoding of [`Tab`](Self::Tab) for the scales `d` and `m`.
    unsafe fn table4<const BIAS: i32, const OFF: i8>(d: f32, m: f32) -> Self::Tab;
    /// Sixteen 4-bit quants decoded: lane by lane, the value of `q & 15` (the bits above are
    /// not read), each step rounded alone, as the formats' portable `decode`s compute it.
    unsafe fn look4<const BIAS: i32, const OFF: i8>(t: Self::Tab, q: Self::I) -> Self::F;
}

/// The AVX2 backend (sixteen values in two registers).
#[derive(Clone, Copy)]
pub(crate) struct Avx2x2;

/// The AVX-512F backend (sixteen values in one register).
#[derive(Clone, Copy)]
pub(crate) struct Avx512x1;

impl Wide16 for Avx2x2 {
    type I = (__m256i, __m256i);
    type F = (__m256, __m256);

    #[inline(always)]
    unsafe fn u8s(b: &[u8; 16]) -> Self::I {
        // SAFETY (this impl's loads): `b` holds the 16 bytes the one 16-byte load reads.
        let p = b.as_ptr() as *const __m128i;
        unsafe {
            let v = _mm_loadu_si128(p);
            (
                _mm256_cvtepu8_epi32(v),
                _mm256_cvtepu8_epi32(_mm_srli_si128::<8>(v)),
            )
        }
    }

    #[inline(always)]
    unsafe fn i8s(b: &[u8; 16]) -> Self::I {
        let p = b.as_ptr() as *const __m128i;
        // SAFETY: `b` holds 16 bytes.
        unsafe {
            let v = _mm_loadu_si128(p);
            (
                _mm256_cvtepi8_epi32(v),
                _mm256_cvtepi8_epi32(_mm_srli_si128::<8>(v)),
            )
        }
    }

    #[inline(always)]
    unsafe fn and(a: Self::I, mask: i32) -> Self::I {
        // SAFETY: register-only; the caller runs with AVX2.
        unsafe {
            let m = _mm256_set1_epi32(mask);
            (_mm256_and_si256(a.0, m), _mm256_and_si256(a.1, m))
        }
    }

    #[inline(always)]
    unsafe fn shr(a: Self::I, n: u32) -> Self::I {
        // SAFETY: register-only; the caller runs with AVX2.
        unsafe {
            let n = _mm_cvtsi32_si128(n as i32);
            (_mm256_srl_epi32(a.0, n), _mm256_srl_epi32(a.1, n))
        }
    }

    #[inline(always)]
    unsafe fn shl(a: Self::I, n: u32) -> Self::I {
        // SAFETY: register-only; the caller runs with AVX2.
        unsafe {
            let n = _mm_cvtsi32_si128(n as i32);
            (_mm256_sll_epi32(a.0, n), _mm256_sll_epi32(a.1, n))
        }
    }

    #[inline(always)]
    unsafe fn or(a: Self::I, b: Self::I) -> Self::I {
        // SAFETY: register-only; the caller runs with AVX2.
        unsafe { (_mm256_or_si256(a.0, b.0), _mm256_or_si256(a.1, b.1)) }
    }

    #[inline(always)]
    unsafe fn sub(a: Self::I, c: i32) -> Self::I {
        // SAFETY: register-only; the caller runs with AVX2.
        unsafe {
            let c = _mm256_set1_epi32(c);
            (_mm256_sub_epi32(a.0, c), _mm256_sub_epi32(a.1, c))
        }
    }

    #[inline(always)]
    unsafe fn bit(bits: u32, first: u32) -> Self::I {
        // SAFETY: register-only; the caller runs with AVX2.
        unsafe {
            let b = _mm256_set1_epi32(bits as i32);
            let one = _mm256_set1_epi32(1);
            let f = _mm256_set1_epi32(first as i32);
            let lo = _mm256_add_epi32(f, _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
            let hi = _mm256_add_epi32(lo, _mm256_set1_epi32(8));
            (
                _mm256_and_si256(_mm256_srlv_epi32(b, lo), one),
                _mm256_and_si256(_mm256_srlv_epi32(b, hi), one),
            )
        }
    }

    #[inline(always)]
    unsafe fn float(a: Self::I) -> Self::F {
        // SAFETY: register-only; the caller runs with AVX2.
        unsafe { (_mm256_cvtepi32_ps(a.0), _mm256_cvtepi32_ps(a.1)) }
    }

    #[inline(always)]
    unsafe fn scale(a: Self::F, s: f32) -> Self::F {
        // SAFETY: register-only; the caller runs with AVX2.
        unsafe {
            let s = _mm256_set1_ps(s);
            (_mm256_mul_ps(a.0, s), _mm256_mul_ps(a.1, s))
        }
    }

    #[inline(always)]
    unsafe fn offset(a: Self::F, s: f32) -> Self::F {
        // SAFETY: register-only; the caller runs with AVX2.
        unsafe {
            let s = _mm256_set1_ps(s);
            (_mm256_add_ps(a.0, s), _mm256_add_ps(a.1, s))
        }
    }

    #[inline(always)]
    unsafe fn minus(a: Self::F, s: f32) -> Self::F {
        // SAFETY: register-only; the caller runs with AVX2.
        unsafe {
            let s = _mm256_set1_ps(s);
            (_mm256_sub_ps(a.0, s), _mm256_sub_ps(a.1, s))
        }
    }

    #[inline(always)]
    unsafe fn zero() -> Self::F {
        // SAFETY: register-only; the caller runs with AVX2.
        unsafe { (_mm256_setzero_ps(), _mm256_setzero_ps()) }
    }

    #[inline(always)]
    unsafe fn load(x: &[f32; 16]) -> Self::F {
        // SAFETY: `x` holds 16 values; the two loads read 8 each.
        unsafe {
            (
                _mm256_loadu_ps(x.as_ptr()),
                _mm256_loadu_ps(x.as_ptr().add(8)),
            )
        }
    }

    #[inline(always)]
    unsafe fn f32s(b: &[u8; 64]) -> Self::F {
        let p = b.as_ptr() as *const f32;
        // SAFETY: `b` holds 64 bytes; the two unaligned loads read 32 each.
        unsafe { (_mm256_loadu_ps(p), _mm256_loadu_ps(p.add(8))) }
    }

    #[inline(always)]
    unsafe fn f16s(b: &[u8; 32]) -> Self::F {
        let p = b.as_ptr() as *const __m128i;
        // SAFETY: `b` holds 32 bytes; the two loads read 16 each; F16C per the caller.
        unsafe {
            (
                _mm256_cvtph_ps(_mm_loadu_si128(p)),
                _mm256_cvtph_ps(_mm_loadu_si128(p.add(1))),
            )
        }
    }

    #[inline(always)]
    unsafe fn bf16s(b: &[u8; 32]) -> Self::F {
        let p = b.as_ptr() as *const __m128i;
        // SAFETY: `b` holds 32 bytes; the two loads read 16 each; AVX2 per the caller.
        unsafe {
            (
                bf16_widen(_mm_loadu_si128(p)),
                bf16_widen(_mm_loadu_si128(p.add(1))),
            )
        }
    }

    #[inline(always)]
    unsafe fn step<const FUSED: bool>(acc: Self::F, x: Self::F, w: Self::F) -> Self::F {
        // SAFETY: register-only; the caller runs with AVX2, and with FMA when `FUSED`.
        unsafe {
            if FUSED {
                (
                    _mm256_fmadd_ps(x.0, w.0, acc.0),
                    _mm256_fmadd_ps(x.1, w.1, acc.1),
                )
            } else {
                (
                    _mm256_add_ps(acc.0, _mm256_mul_ps(x.0, w.0)),
                    _mm256_add_ps(acc.1, _mm256_mul_ps(x.1, w.1)),
                )
            }
        }
    }

    #[inline(always)]
    unsafe fn join(a: Self::F) -> __m256 {
        // SAFETY: register-only; the caller runs with AVX2.
        unsafe { _mm256_add_ps(a.0, a.1) }
    }

    /// AVX2 decodes each lane (an eight-entry permute cannot hold sixteen values).
    type Tab = (f32, f32);

    #[inline(always)]
    unsafe fn table4<const BIAS: i32, const OFF: i8>(d: f32, m: f32) -> Self::Tab {
        (d, m)
    }

    #[inline(always)]
    unsafe fn look4<const BIAS: i32, const OFF: i8>((d, m): Self::Tab, q: Self::I) -> Self::F {
        // SAFETY: register-only; the caller runs with AVX2.
        unsafe { decode4::<Self, BIAS, OFF>(q, d, m) }
    }
}

/// Sixteen 4-bit quants decoded lane by lane: `float((q & 15) - BIAS)·d`, then `± m`.
#[inline(always)]
unsafe fn decode4<W: Wide16, const BIAS: i32, const OFF: i8>(q: W::I, d: f32, m: f32) -> W::F {
    // SAFETY: register-only; the caller runs with `W`'s features.
    unsafe {
        let mut q = W::and(q, 0x0f);
        if BIAS != 0 {
            q = W::sub(q, BIAS);
        }
        let v = W::scale(W::float(q), d);
        match OFF {
            1 => W::offset(v, m),
            -1 => W::minus(v, m),
            _ => v,
        }
    }
}

/// Eight bfloat16 widened (a function, not a closure: a closure does not inherit its
/// caller's target features). The caller runs with AVX2.
#[inline(always)]
unsafe fn bf16_widen(v: __m128i) -> __m256 {
    // SAFETY: register-only; AVX2 per the caller.
    unsafe { _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(v))) }
}

impl Wide16 for Avx512x1 {
    type I = __m512i;
    type F = __m512;

    #[inline(always)]
    unsafe fn u8s(b: &[u8; 16]) -> Self::I {
        // SAFETY (this impl's loads): `b` holds the 16 bytes the load reads.
        unsafe { _mm512_cvtepu8_epi32(_mm_loadu_si128(b.as_ptr() as *const __m128i)) }
    }

    #[inline(always)]
    unsafe fn i8s(b: &[u8; 16]) -> Self::I {
        // SAFETY: `b` holds the 16 bytes the load reads.
        unsafe { _mm512_cvtepi8_epi32(_mm_loadu_si128(b.as_ptr() as *const __m128i)) }
    }

    #[inline(always)]
    unsafe fn and(a: Self::I, mask: i32) -> Self::I {
        // SAFETY: register-only; the caller runs with AVX-512F.
        unsafe { _mm512_and_si512(a, _mm512_set1_epi32(mask)) }
    }

    #[inline(always)]
    unsafe fn shr(a: Self::I, n: u32) -> Self::I {
        // SAFETY: register-only; the caller runs with AVX-512F.
        unsafe { _mm512_srl_epi32(a, _mm_cvtsi32_si128(n as i32)) }
    }

    #[inline(always)]
    unsafe fn shl(a: Self::I, n: u32) -> Self::I {
        // SAFETY: register-only; the caller runs with AVX-512F.
        unsafe { _mm512_sll_epi32(a, _mm_cvtsi32_si128(n as i32)) }
    }

    #[inline(always)]
    unsafe fn or(a: Self::I, b: Self::I) -> Self::I {
        // SAFETY: register-only; the caller runs with AVX-512F.
        unsafe { _mm512_or_si512(a, b) }
    }

    #[inline(always)]
    unsafe fn sub(a: Self::I, c: i32) -> Self::I {
        // SAFETY: register-only; the caller runs with AVX-512F.
        unsafe { _mm512_sub_epi32(a, _mm512_set1_epi32(c)) }
    }

    #[inline(always)]
    unsafe fn bit(bits: u32, first: u32) -> Self::I {
        // SAFETY: register-only; the caller runs with AVX-512F.
        unsafe {
            let lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
            let shifts = _mm512_add_epi32(_mm512_set1_epi32(first as i32), lanes);
            _mm512_and_si512(
                _mm512_srlv_epi32(_mm512_set1_epi32(bits as i32), shifts),
                _mm512_set1_epi32(1),
            )
        }
    }

    #[inline(always)]
    unsafe fn float(a: Self::I) -> Self::F {
        // SAFETY: register-only; the caller runs with AVX-512F.
        unsafe { _mm512_cvtepi32_ps(a) }
    }

    #[inline(always)]
    unsafe fn scale(a: Self::F, s: f32) -> Self::F {
        // SAFETY: register-only; the caller runs with AVX-512F.
        unsafe { _mm512_mul_ps(a, _mm512_set1_ps(s)) }
    }

    #[inline(always)]
    unsafe fn offset(a: Self::F, s: f32) -> Self::F {
        // SAFETY: register-only; the caller runs with AVX-512F.
        unsafe { _mm512_add_ps(a, _mm512_set1_ps(s)) }
    }

    #[inline(always)]
    unsafe fn minus(a: Self::F, s: f32) -> Self::F {
        // SAFETY: register-only; the caller runs with AVX-512F.
        unsafe { _mm512_sub_ps(a, _mm512_set1_ps(s)) }
    }

    #[inline(always)]
    unsafe fn zero() -> Self::F {
        // SAFETY: register-only; the caller runs with AVX-512F.
        unsafe { _mm512_setzero_ps() }
    }

    #[inline(always)]
    unsafe fn load(x: &[f32; 16]) -> Self::F {
        // SAFETY: `x` holds the 16 values the load reads.
        unsafe { _mm512_loadu_ps(x.as_ptr()) }
    }

    #[inline(always)]
    unsafe fn f32s(b: &[u8; 64]) -> Self::F {
        // SAFETY: `b` holds the 64 bytes the unaligned load reads.
        unsafe { _mm512_loadu_ps(b.as_ptr() as *const f32) }
    }

    #[inline(always)]
    unsafe fn f16s(b: &[u8; 32]) -> Self::F {
        // SAFETY: `b` holds the 32 bytes the load reads; AVX-512F per the caller.
        unsafe { _mm512_cvtph_ps(_mm256_loadu_si256(b.as_ptr() as *const __m256i)) }
    }

    #[inline(always)]
    unsafe fn bf16s(b: &[u8; 32]) -> Self::F {
        // SAFETY: `b` holds the 32 bytes the load reads; AVX-512F per the caller.
        unsafe {
            let v = _mm512_cvtepu16_epi32(_mm256_loadu_si256(b.as_ptr() as *const __m256i));
            _mm512_castsi512_ps(_mm512_slli_epi32::<16>(v))
        }
    }

    #[inline(always)]
    unsafe fn step<const FUSED: bool>(acc: Self::F, x: Self::F, w: Self::F) -> Self::F {
        // SAFETY: register-only; the caller runs with AVX-512F (which has the fused form).
        unsafe {
            if FUSED {
                _mm512_fmadd_ps(x, w, acc)
            } else {
                _mm512_add_ps(acc, _mm512_mul_ps(x, w))
            }
        }
    }

    #[inline(always)]
    unsafe fn join(a: Self::F) -> __m256 {
        // SAFETY: register-only; the caller runs with AVX-512F.
        unsafe {
            _mm256_add_ps(
                _mm512_castps512_ps256(a),
                _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(a))),
            )
        }
    }

    /// The sixteen values themselves, lane `q` holding quant `q`'s: decoded once per block
    /// by the same steps as a lane (`float(q - BIAS)` is exact), then looked up by `vpermps`,
    /// which reads only an index's low four bits.
    type Tab = __m512;

    #[inline(always)]
    unsafe fn table4<const BIAS: i32, const OFF: i8>(d: f32, m: f32) -> Self::Tab {
        // SAFETY: register-only; the caller runs with AVX-512F.
        unsafe {
            let q = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
            decode4::<Self, BIAS, OFF>(q, d, m)
        }
    }

    #[inline(always)]
    unsafe fn look4<const BIAS: i32, const OFF: i8>(t: Self::Tab, q: Self::I) -> Self::F {
        // SAFETY: register-only; the caller runs with AVX-512F.
        unsafe { _mm512_permutexvar_ps(q, t) }
    }
}

/// A weight block format decoded sixteen values at a time, exactly as its portable `decode`.
pub(crate) trait WideBlock {
    /// Values per block.
    const LEN: usize;
    /// Bytes per block.
    const BYTES: usize;
    /// What a block's decode needs once (its scales, widened).
    type Scales: Copy;
    /// The scales of block `b` (`b.len() == BYTES`), widened by `vcvtph2ps`.
    ///
    /// # Safety
    ///
    /// Only inside a function compiled with F16C, on a CPU that has it.
    unsafe fn scales(b: &[u8]) -> Self::Scales;
    /// Values `32·c .. 32·c + 32` of block `b`, as two halves of sixteen.
    unsafe fn group<W: Wide16>(b: &[u8], s: &Self::Scales, c: usize) -> (W::F, W::F);
}

#[inline(always)]
fn at<const N: usize>(b: &[u8], from: usize) -> &[u8; N] {
    b[from..from + N].try_into().unwrap_or(&[0; N])
}

/// The half at `b[from..from + 2]` widened by `vcvtph2ps`: exact for every pattern and a NaN
/// quieted, so the bits of [`f16_to_f32`](crate::quant::f16_to_f32) in one instruction instead of its integer steps
/// (which were more of the loop's work than the block's own decode). The caller runs with
/// F16C.
#[inline(always)]
unsafe fn half_at(b: &[u8], from: usize) -> f32 {
    let bits = u16::from_le_bytes(*at(b, from));
    // SAFETY: register-only; the caller runs with F16C.
    unsafe { _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(bits as i32))) }
}

/// The two halves at `b[from..from + 4]`, widened together as [`half_at`] widens one.
#[inline(always)]
unsafe fn halves_at(b: &[u8], from: usize) -> (f32, f32) {
    let bits = u32::from_le_bytes(*at(b, from));
    // SAFETY: register-only; the caller runs with F16C.
    unsafe {
        let v = _mm_cvtph_ps(_mm_cvtsi32_si128(bits as i32));
        (_mm_cvtss_f32(v), _mm_cvtss_f32(_mm_movehdup_ps(v)))
    }
}

/// `Q8_0`: `q · d`.
pub(crate) struct Q8_0;
/// `Q4_0`: `(q - 8) · d`.
pub(crate) struct Q4_0;
/// `Q4_1`: `q · d + m`.
pub(crate) struct Q4_1;
/// `Q5_0`: `(q - 16) · d`.
pub(crate) struct Q5_0;
/// `Q5_1`: `q · d + m`.
pub(crate) struct Q5_1;
/// `Q4_K`: `d·sc · q - dmin·m`.
pub(crate) struct Q4K;
/// `Q5_K`: `d·sc · q - dmin·m`.
pub(crate) struct Q5K;
/// `Q6_K`: `d·sc · (q - 32)`.
pub(crate) struct Q6K;
/// `F32` rows of whole groups of 32, read as blocks of 32: the values themselves.
pub(crate) struct F32;
/// `F16` rows of whole groups of 32: each half widened.
pub(crate) struct F16;
/// `BF16` rows of whole groups of 32: each bfloat16 widened.
pub(crate) struct BF16;

/// A float type's `WideBlock`: 32 values of `$bytes` bytes each, no scales, each half of
/// sixteen widened by `Wide16::$widen` (the same for every float type: one macro).
macro_rules! float_block {
    ($ty:ident, $bytes:literal, $widen:ident) => {
        impl WideBlock for $ty {
            const LEN: usize = 32;
            const BYTES: usize = 32 * $bytes;
            type Scales = ();
            #[inline(always)]
            unsafe fn scales(_: &[u8]) {}
            #[inline(always)]
            unsafe fn group<W: Wide16>(b: &[u8], _: &(), _: usize) -> (W::F, W::F) {
                // SAFETY: the caller runs with `W`'s features (and F16C).
                unsafe { (W::$widen(at(b, 0)), W::$widen(at(b, 16 * $bytes))) }
            }
        }
    };
}
float_block!(F32, 4, f32s);
float_block!(F16, 2, f16s);
float_block!(BF16, 2, bf16s);

impl WideBlock for Q8_0 {
    const LEN: usize = BlockQ8_0::LEN;
    const BYTES: usize = BlockQ8_0::BYTES;
    type Scales = f32;
    #[inline(always)]
    unsafe fn scales(b: &[u8]) -> f32 {
        // SAFETY: the caller runs with F16C.
        unsafe { half_at(b, 0) }
    }
    #[inline(always)]
    unsafe fn group<W: Wide16>(b: &[u8], &d: &f32, _: usize) -> (W::F, W::F) {
        // SAFETY: the caller runs with `W`'s features.
        unsafe {
            let lo = W::i8s(at(b, 2));
            let hi = W::i8s(at(b, 18));
            (W::scale(W::float(lo), d), W::scale(W::float(hi), d))
        }
    }
}

impl WideBlock for Q4_0 {
    const LEN: usize = BlockQ4_0::LEN;
    const BYTES: usize = BlockQ4_0::BYTES;
    type Scales = f32;
    #[inline(always)]
    unsafe fn scales(b: &[u8]) -> f32 {
        // SAFETY: the caller runs with F16C.
        unsafe { half_at(b, 0) }
    }
    #[inline(always)]
    unsafe fn group<W: Wide16>(b: &[u8], &d: &f32, _: usize) -> (W::F, W::F) {
        // SAFETY: the caller runs with `W`'s features.
        unsafe {
            let t = W::table4::<8, 0>(d, 0.0);
            let q = W::u8s(at(b, 2));
            (W::look4::<8, 0>(t, q), W::look4::<8, 0>(t, W::shr(q, 4)))
        }
    }
}

impl WideBlock for Q4_1 {
    const LEN: usize = BlockQ4_1::LEN;
    const BYTES: usize = BlockQ4_1::BYTES;
    type Scales = (f32, f32);
    #[inline(always)]
    unsafe fn scales(b: &[u8]) -> (f32, f32) {
        // SAFETY: the caller runs with F16C.
        unsafe { halves_at(b, 0) }
    }
    #[inline(always)]
    unsafe fn group<W: Wide16>(b: &[u8], &(d, m): &(f32, f32), _: usize) -> (W::F, W::F) {
        // SAFETY: the caller runs with `W`'s features.
        unsafe {
            let t = W::table4::<0, 1>(d, m);
            let q = W::u8s(at(b, 4));
            (W::look4::<0, 1>(t, q), W::look4::<0, 1>(t, W::shr(q, 4)))
        }
    }
}

/// A 32-value block's five-bit quants: the low nibbles of `qs` then the high ones, each with
/// bit `value` of `qh` as its fifth.
#[inline(always)]
unsafe fn fives<W: Wide16>(qs: &[u8; 16], qh: u32) -> (W::I, W::I) {
    // SAFETY: the caller runs with `W`'s features.
    unsafe {
        let q = W::u8s(qs);
        (
            W::or(W::and(q, 0x0f), W::shl(W::bit(qh, 0), 4)),
            W::or(W::shr(q, 4), W::shl(W::bit(qh, 16), 4)),
        )
    }
}

impl WideBlock for Q5_0 {
    const LEN: usize = BlockQ5_0::LEN;
    const BYTES: usize = BlockQ5_0::BYTES;
    type Scales = (f32, u32);
    #[inline(always)]
    unsafe fn scales(b: &[u8]) -> (f32, u32) {
        // SAFETY: the caller runs with F16C.
        (unsafe { half_at(b, 0) }, u32::from_le_bytes(*at(b, 2)))
    }
    #[inline(always)]
    unsafe fn group<W: Wide16>(b: &[u8], &(d, qh): &(f32, u32), _: usize) -> (W::F, W::F) {
        // SAFETY: the caller runs with `W`'s features.
        unsafe {
            let (lo, hi) = fives::<W>(at(b, 6), qh);
            (
                W::scale(W::float(W::sub(lo, 16)), d),
                W::scale(W::float(W::sub(hi, 16)), d),
            )
        }
    }
}

impl WideBlock for Q5_1 {
    const LEN: usize = BlockQ5_1::LEN;
    const BYTES: usize = BlockQ5_1::BYTES;
    type Scales = (f32, f32, u32);
    #[inline(always)]
    unsafe fn scales(b: &[u8]) -> (f32, f32, u32) {
        // SAFETY: the caller runs with F16C.
        let (d, m) = unsafe { halves_at(b, 0) };
        (d, m, u32::from_le_bytes(*at(b, 4)))
    }
    #[inline(always)]
    unsafe fn group<W: Wide16>(b: &[u8], &(d, m, qh): &(f32, f32, u32), _: usize) -> (W::F, W::F) {
        // SAFETY: the caller runs with `W`'s features.
        unsafe {
            let (lo, hi) = fives::<W>(at(b, 8), qh);
            (
                W::offset(W::scale(W::float(lo), d), m),
                W::offset(W::scale(W::float(hi), d), m),
            )
        }
    }
}

/// A `Q4_K`/`Q5_K` block's eight sub-block scales and minima, as its `decode` widens them.
/// The caller runs with F16C.
#[inline(always)]
unsafe fn k_scales(b: &[u8]) -> ([f32; 8], [f32; 8]) {
    // SAFETY: the caller runs with F16C.
    let (d, dmin) = unsafe { halves_at(b, 0) };
    crate::quant::k_scales_widened(d, dmin, at::<12>(b, 4))
}

/// Group `c` of a K-quant block's 4-bit quants in `qs` (128 bytes): bytes `32·(c/2)..` of it,
/// their low nibbles for even `c`, high for odd, in each lane's bits `0..4` (the bits above
/// not cleared: [`Wide16::look4`] does not read them).
#[inline(always)]
unsafe fn k_nibbles<W: Wide16>(qs: &[u8], c: usize) -> (W::I, W::I) {
    let from = (c / 2) * 32;
    let shift = 4 * (c % 2) as u32;
    // SAFETY: the caller runs with `W`'s features.
    unsafe {
        (
            W::shr(W::u8s(at(qs, from)), shift),
            W::shr(W::u8s(at(qs, from + 16)), shift),
        )
    }
}

impl WideBlock for Q4K {
    const LEN: usize = BlockQ4_K::LEN;
    const BYTES: usize = BlockQ4_K::BYTES;
    type Scales = ([f32; 8], [f32; 8]);
    #[inline(always)]
    unsafe fn scales(b: &[u8]) -> Self::Scales {
        // SAFETY: the caller runs with F16C.
        unsafe { k_scales(b) }
    }
    #[inline(always)]
    unsafe fn group<W: Wide16>(b: &[u8], (ds, ms): &Self::Scales, c: usize) -> (W::F, W::F) {
        // SAFETY: the caller runs with `W`'s features.
        unsafe {
            let (lo, hi) = k_nibbles::<W>(&b[16..], c);
            let t = W::table4::<0, -1>(ds[c], ms[c]);
            (W::look4::<0, -1>(t, lo), W::look4::<0, -1>(t, hi))
        }
    }
}

impl WideBlock for Q5K {
    const LEN: usize = BlockQ5_K::LEN;
    const BYTES: usize = BlockQ5_K::BYTES;
    type Scales = ([f32; 8], [f32; 8]);
    #[inline(always)]
    unsafe fn scales(b: &[u8]) -> Self::Scales {
        // SAFETY: the caller runs with F16C.
        unsafe { k_scales(b) }
    }
    #[inline(always)]
    unsafe fn group<W: Wide16>(b: &[u8], (ds, ms): &Self::Scales, c: usize) -> (W::F, W::F) {
        // SAFETY: the caller runs with `W`'s features.
        unsafe {
            let (lo, hi) = k_nibbles::<W>(&b[48..], c);
            let (lo, hi) = (W::and(lo, 0x0f), W::and(hi, 0x0f));
            let c32 = c as u32;
            let (lo, hi) = (
                W::or(lo, k_fifth::<W>(b, 16, c32)),
                W::or(hi, k_fifth::<W>(b, 32, c32)),
            );
            let (d, m) = (ds[c], ms[c]);
            (
                W::minus(W::scale(W::float(lo), d), m),
                W::minus(W::scale(W::float(hi), d), m),
            )
        }
    }
}

impl WideBlock for Q6K {
    const LEN: usize = BlockQ6_K::LEN;
    const BYTES: usize = BlockQ6_K::BYTES;
    type Scales = f32;
    #[inline(always)]
    unsafe fn scales(b: &[u8]) -> f32 {
        // SAFETY: the caller runs with F16C.
        unsafe { half_at(b, 208) }
    }
    #[inline(always)]
    unsafe fn group<W: Wide16>(b: &[u8], &d: &f32, c: usize) -> (W::F, W::F) {
        // Group c: half h = c / 4 of the block; within it, quarter s = c % 4 takes the low
        // (s < 2) or high nibbles of ql bytes 64h + 32(s % 2) .., and bits 2s, 2s + 1 of qh
        // bytes 32h ..; two scales of sixteen values each.
        let (h, s) = (c / 4, c % 4);
        let ql = 64 * h + 32 * (s % 2);
        let qh = 128 + 32 * h;
        let nib = 4 * (s / 2) as u32;
        let top = 2 * s as u32;
        let sc = |i: usize| d * (b[192 + i] as i8) as f32;
        // SAFETY: the caller runs with `W`'s features.
        unsafe {
            (
                W::scale(q6_sixteen::<W>(b, ql, qh, nib, top), sc(2 * c)),
                W::scale(
                    q6_sixteen::<W>(b, ql + 16, qh + 16, nib, top),
                    sc(2 * c + 1),
                ),
            )
        }
    }
}

// The helpers below are functions, not closures inside the decoders: a closure does not
// inherit its caller's target features, so the intrinsics in one stay calls (a Q6_K head
// decoded at a fifth of its speed that way).

/// Bit `c` of the sixteen `Q5_K` high-bit bytes at `b[from..]`, as each value's fifth bit.
#[inline(always)]
unsafe fn k_fifth<W: Wide16>(b: &[u8], from: usize, c: u32) -> W::I {
    // SAFETY: the caller runs with `W`'s features.
    unsafe { W::shl(W::and(W::shr(W::u8s(at(b, from)), c), 1), 4) }
}

/// Sixteen `Q6_K` quants, `q - 32`, as f32: the nibble at shift `nib` of the `ql` bytes from
/// `ql` and the two bits at shift `top` of the `qh` bytes from `qh`.
#[inline(always)]
unsafe fn q6_sixteen<W: Wide16>(b: &[u8], ql: usize, qh: usize, nib: u32, top: u32) -> W::F {
    // SAFETY: the caller runs with `W`'s features.
    unsafe {
        let low = W::and(W::shr(W::u8s(at(b, ql)), nib), 0x0f);
        let high = W::shl(W::and(W::shr(W::u8s(at(b, qh)), top), 3), 4);
        W::float(W::sub(W::or(low, high), 32))
    }
}

/// The f32 fold of the lane contract: `((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7))`.
#[inline(always)]
unsafe fn fold(v: __m256) -> f32 {
    let mut l = [0.0f32; LANES];
    // SAFETY: `l` holds the 8 values the store writes.
    unsafe { _mm256_storeu_ps(l.as_mut_ptr(), v) };
    ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]))
}

/// The dots of `G` activation rows (`xs`, each `k` values) with one weight row `w` of
/// `B`-blocks, into `out[..G]`: each block decoded once per group of 32 into registers and
/// multiplied into every row.
#[inline(always)]
unsafe fn dots<W: Wide16, B: WideBlock, const G: usize, const FUSED: bool>(
    xs: &[&[f32]],
    w: &[u8],
    out: &mut [f32],
) {
    let xs: &[&[f32]; G] = match xs.try_into() {
        Ok(xs) => xs,
        Err(_) => return,
    };
    // Each row's groups of 32 values, walked beside the blocks: no index to check per group.
    let mut groups: [core::slice::Iter<'_, [f32; 32]>; G] =
        xs.map(|x| x.as_chunks::<32>().0.iter());
    let whole = w.len() / B::BYTES * (B::LEN / 32);
    if groups.iter().any(|g| g.len() < whole) {
        return; // `quant_linear` checked the shapes: never
    }
    // SAFETY (the block): the caller runs with `W`'s features and F16C; every load is of an
    // array reference.
    unsafe {
        let mut acc = [[W::zero(); 2]; G];
        for block in w.chunks_exact(B::BYTES) {
            let scales = B::scales(block);
            for c in 0..B::LEN / 32 {
                let (lo, hi) = B::group::<W>(block, &scales, c);
                for (a, g) in acc.iter_mut().zip(&mut groups) {
                    // SAFETY: every row has `whole` groups (checked above), one per group of
                    // a block, and this is the row's group `b·LEN/32 + c < whole`.
                    let x = g.next().unwrap_unchecked();
                    let (x0, x1) = x.split_at(16);
                    let (x0, x1) = (
                        x0.try_into().unwrap_or(&[0.0; 16]),
                        x1.try_into().unwrap_or(&[0.0; 16]),
                    );
                    a[0] = W::step::<FUSED>(a[0], W::load(x0), lo);
                    a[1] = W::step::<FUSED>(a[1], W::load(x1), hi);
                }
            }
        }
        for (o, a) in out.iter_mut().zip(&acc) {
            *o = fold(_mm256_add_ps(W::join(a[0]), W::join(a[1])));
        }
    }
}

/// The columns `cols` of `r`'s product (out: column-major, `xs.len()` values a column), for
/// block format `B`, `G` rows of `xs` at a time.
#[inline(always)]
unsafe fn columns<W: Wide16, B: WideBlock, const G: usize, const FUSED: bool>(
    r: &QRows<'_>,
    cols: Range<usize>,
    out: &mut [f32],
) {
    // `quant_linear` checked the shapes; operands that do not fit `B` would only read short.
    let whole_blocks = r.k.is_multiple_of(B::LEN) && r.row_bytes == (r.k / B::LEN) * B::BYTES;
    debug_assert!(whole_blocks && r.xs.iter().all(|x| x.len() == r.k));
    if !whole_blocks {
        return;
    }
    let m = r.xs.len();
    for (j, column) in cols.zip(out.chunks_exact_mut(m)) {
        let w = r.row(j);
        let mut xs = r.xs.chunks_exact(G);
        let mut outs = column.chunks_exact_mut(G);
        for (x, o) in (&mut xs).zip(&mut outs) {
            // SAFETY: the caller runs with `W`'s features.
            unsafe { dots::<W, B, G, FUSED>(x, w, o) };
        }
        for (x, o) in xs.remainder().iter().zip(outs.into_remainder()) {
            // SAFETY: as above.
            unsafe {
                dots::<W, B, 1, FUSED>(core::slice::from_ref(x), w, core::slice::from_mut(o))
            };
        }
    }
}

/// Every block format on backend `W`; the float types too when their rows are whole groups of
/// 32 (read 32 values at a time, the groups' order is the same), else (a row that ends
/// ragged) through the generic [`exact_dots`](super::qdot::exact_dots) on AVX2.
#[inline(always)]
unsafe fn by_type<W: Wide16, const G: usize, const FUSED: bool>(
    r: &QRows<'_>,
    cols: Range<usize>,
    out: &mut [f32],
) {
    // SAFETY: the caller runs with `W`'s features (which include AVX2).
    unsafe {
        match r.ty {
            GgmlType::Q8_0 => columns::<W, Q8_0, G, FUSED>(r, cols, out),
            GgmlType::Q4_0 => columns::<W, Q4_0, G, FUSED>(r, cols, out),
            GgmlType::Q4_1 => columns::<W, Q4_1, G, FUSED>(r, cols, out),
            GgmlType::Q5_0 => columns::<W, Q5_0, G, FUSED>(r, cols, out),
            GgmlType::Q5_1 => columns::<W, Q5_1, G, FUSED>(r, cols, out),
            GgmlType::Q4_K => columns::<W, Q4K, G, FUSED>(r, cols, out),
            GgmlType::Q5_K => columns::<W, Q5K, G, FUSED>(r, cols, out),
            GgmlType::Q6_K => columns::<W, Q6K, G, FUSED>(r, cols, out),
            GgmlType::F32 if r.k.is_multiple_of(32) => columns::<W, F32, G, FUSED>(r, cols, out),
            GgmlType::F16 if r.k.is_multiple_of(32) => columns::<W, F16, G, FUSED>(r, cols, out),
            GgmlType::BF16 if r.k.is_multiple_of(32) => columns::<W, BF16, G, FUSED>(r, cols, out),
            GgmlType::F32 | GgmlType::F16 | GgmlType::BF16 => match (FUSED, Avx2Fma::detect()) {
                (true, Some(s)) => super::qdot::exact_columns(s, Native, r, cols, out),
                _ => match Avx2::detect() {
                    Some(s) => super::qdot::exact_columns(s, Unfused, r, cols, out),
                    None => super::qdot::exact_columns(super::simd::Scalar, Unfused, r, cols, out),
                },
            },
        }
    }
}

/// Whether this CPU has F16C, which every exact-mode loop here widens its scales with
/// (every AVX2 CPU made has it; the variants check it all the same).
pub(crate) fn supported() -> bool {
    std::is_x86_feature_detected!("f16c")
}

/// Exact mode's columns on AVX2, two rows at a time, unfused (the portable bits).
///
/// # Safety
///
/// The CPU must support AVX2 and F16C ([`supported`]).
#[target_feature(enable = "avx2,f16c")]
pub(crate) unsafe fn exact_avx2(r: &QRows<'_>, cols: Range<usize>, out: &mut [f32]) {
    // SAFETY: AVX2 is enabled here and the caller checked the CPU has it.
    unsafe { by_type::<Avx2x2, 2, false>(r, cols, out) }
}

/// [`exact_avx2`] with each multiply-add of the dot fused (the native mode).
///
/// # Safety
///
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn exact_avx2_fma(r: &QRows<'_>, cols: Range<usize>, out: &mut [f32]) {
    // SAFETY: AVX2 and FMA are enabled here and the caller checked the CPU has them.
    unsafe { by_type::<Avx2x2, 2, true>(r, cols, out) }
}

/// Exact mode's columns on AVX-512F, four rows at a time, unfused (the portable bits).
///
/// # Safety
///
/// The CPU must support AVX2, F16C and AVX-512F.
#[target_feature(enable = "avx2,f16c,avx512f")]
pub(crate) unsafe fn exact_avx512(r: &QRows<'_>, cols: Range<usize>, out: &mut [f32]) {
    // SAFETY: the features are enabled here and the caller checked the CPU has them.
    unsafe { by_type::<Avx512x1, 4, false>(r, cols, out) }
}

/// [`exact_avx512`] with each multiply-add of the dot fused (the native mode).
///
/// # Safety
///
/// The CPU must support AVX2, FMA, F16C and AVX-512F.
#[target_feature(enable = "avx2,fma,f16c,avx512f")]
pub(crate) unsafe fn exact_avx512_fma(r: &QRows<'_>, cols: Range<usize>, out: &mut [f32]) {
    // SAFETY: the features are enabled here and the caller checked the CPU has them.
    unsafe { by_type::<Avx512x1, 4, true>(r, cols, out) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::f32_to_f16;

    /// `rows` rows of `k` values of `ty`: pseudo-random bytes with every f16 scale set to a
    /// moderate value of either sign (no infinity, no NaN).
    fn weight(ty: GgmlType, rows: usize, k: usize) -> Vec<u8> {
        let mut state = 0x9e37_79b9u32 ^ ty.id();
        let mut next = move || {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            state >> 8
        };
        let len = rows * ty.row_bytes(k).unwrap();
        let mut bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        let fields: &[usize] = match ty {
            GgmlType::Q8_0 | GgmlType::Q4_0 | GgmlType::Q5_0 => &[0],
            GgmlType::Q6_K => &[208],
            _ => &[0, 2],
        };
        for block in bytes.chunks_exact_mut(ty.block_bytes()) {
            for &at in fields {
                let v = (next() as f32 / (1u32 << 24) as f32 - 0.5) * 0.1;
                block[at..at + 2].copy_from_slice(&f32_to_f16(v).to_le_bytes());
            }
        }
        bytes
    }

    // Small enough for miri, which runs it in CI's build with AVX2 enabled: three activation
    // rows (a pair and a single), three weight rows, two blocks each.
    #[test]
    fn avx2_decoders_give_the_portable_bits_for_every_block_format() {
        if Avx2::detect().is_none() {
            return; // nothing to compare on this CPU; the portable loop is the only one
        }
        let quantized = [
            GgmlType::Q8_0,
            GgmlType::Q4_0,
            GgmlType::Q4_1,
            GgmlType::Q5_0,
            GgmlType::Q5_1,
            GgmlType::Q4_K,
            GgmlType::Q5_K,
            GgmlType::Q6_K,
        ];
        for ty in quantized {
            let (n, k) = (3, 2 * ty.block_len());
            let w = weight(ty, n, k);
            let x: Vec<Vec<f32>> = (0..3)
                .map(|r| {
                    (0..k)
                        .map(|i| ((i * 7 + r * 13) % 29) as f32 / 8.0 - 1.5)
                        .collect()
                })
                .collect();
            let xs: Vec<&[f32]> = x.iter().map(|r| r.as_slice()).collect();
            let rows = QRows {
                ty,
                xs: &xs,
                w: &w,
                row_bytes: ty.row_bytes(k).unwrap(),
                k,
            };
            let mut want = [0.0f32; 9];
            super::super::qdot::exact_portable(&rows, 0..n, &mut want);
            let mut got = [0.0f32; 9];
            // SAFETY: `Avx2::detect` found AVX2 on this CPU.
            unsafe { exact_avx2(&rows, 0..n, &mut got) };
            assert_eq!(got.map(f32::to_bits), want.map(f32::to_bits), "{ty}");
            assert!(
                want.iter().all(|v| v.is_finite() && *v != 0.0),
                "{ty}: {want:?}"
            );
        }
    }

    // The float types as blocks of 32, in CI's miri build with AVX2 too: two activation rows,
    // three weight rows of two groups, values of both signs (a NaN or an infinity would hide
    // a wrong lane).
    #[test]
    fn avx2_float_rows_of_whole_groups_give_the_portable_bits() {
        if Avx2::detect().is_none() {
            return;
        }
        let (n, k) = (3, 64);
        let values: Vec<f32> = (0..n * k)
            .map(|i| ((i * 11 + 5) % 37) as f32 / 16.0 - 1.125)
            .collect();
        let f32s: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let f16s: Vec<u8> = values
            .iter()
            .flat_map(|&v| f32_to_f16(v).to_le_bytes())
            .collect();
        let bf16s: Vec<u8> = values
            .iter()
            .flat_map(|v| ((v.to_bits() >> 16) as u16).to_le_bytes())
            .collect();
        let x: Vec<Vec<f32>> = (0..2)
            .map(|r| {
                (0..k)
                    .map(|i| ((i * 5 + r * 3) % 23) as f32 / 8.0 - 1.25)
                    .collect()
            })
            .collect();
        let xs: Vec<&[f32]> = x.iter().map(|r| r.as_slice()).collect();
        for (ty, w) in [
            (GgmlType::F32, &f32s),
            (GgmlType::F16, &f16s),
            (GgmlType::BF16, &bf16s),
        ] {
            let rows = QRows {
                ty,
                xs: &xs,
                w,
                row_bytes: ty.row_bytes(k).unwrap(),
                k,
            };
            let mut want = [0.0f32; 6];
            super::super::qdot::exact_portable(&rows, 0..n, &mut want);
            let mut got = [0.0f32; 6];
            // SAFETY: `Avx2::detect` found AVX2 on this CPU.
            unsafe { exact_avx2(&rows, 0..n, &mut got) };
            assert_eq!(got.map(f32::to_bits), want.map(f32::to_bits), "{ty}");
            assert!(want.iter().all(|v| v.is_finite() && *v != 0.0), "{ty}");
        }
    }
}
