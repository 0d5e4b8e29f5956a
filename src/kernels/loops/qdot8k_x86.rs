//! The q8 mode's K-quant dots (`Q4_K`, `Q6_K` against `Q8_K`) on AVX2, with the portable bits.
//!
//! The portable order (`qdot.rs`) keeps eight integer lanes per block, value `e` in lane
//! `e % 8`, each term `scale · q · a`, then steps eight float lanes `lanes[l] += (dw·da)·ints[l]`
//! and (`Q4_K`) a scalar `sum −= (dminw·da)·Σ bsums·min`. The lanes' integers are exact in any
//! order, so here sixteen values at a time multiply in i16 (`vpmullw`: `|q·a| ≤ 32·128`) and
//! `vpmaddwd` by `[scale, 0]` and `[0, scale]` splits the products of even and odd values into
//! i32 (value `2m` of a piece of sixteen lands in lane `2·(m % 4)`, value `2m + 1` beside it);
//! the two 128-bit halves added at the block's end give the eight lanes. The float lanes are one
//! vector stepped with the portable operations in the portable order, and the row ends as the
//! portable row does. One weight row at a time; `Q5_K` still takes the portable loop.

use core::arch::x86_64::*;
use core::ops::Range;

use super::qdot::{k_mins_sum, k_scales_mins, Q8Rows};
use crate::quant::{f16_to_f32, BlockQ8_K};

/// A K-quant format on this path. Its methods may only run inside a function compiled with
/// AVX2, on a CPU that has it.
pub(crate) trait KQuant {
    /// Bytes per block.
    const BYTES: usize;
    /// Whether the format has minima (`sum −= (dminw·da)·Σ bsums·min` per block).
    const MINS: bool;
    /// The block's eight integer lanes against the activation block `a`, and (`Q4_K`) its
    /// `Σ bsums·min`; `b` is one block.
    unsafe fn ints(b: &[u8], a: &BlockQ8_K) -> (__m256i, i32);
    /// The block's `(dw, dminw)` scales, widened.
    fn scales(b: &[u8]) -> (f32, f32);
}

/// `acc_even`, `acc_odd` plus the products of sixteen i16 quants `q` and the sixteen
/// activations at `a`, times `scale`, split by even and odd value.
#[inline(always)]
unsafe fn piece(q: __m256i, a: *const i8, scale: i32, acc: &mut [__m256i; 2]) {
    // SAFETY: `a` begins sixteen readable bytes (the callers pass a place in a block's quants);
    // the rest is register-only with AVX2 per the caller.
    unsafe {
        let a = _mm256_cvtepi8_epi16(_mm_loadu_si128(a as *const __m128i));
        let p = _mm256_mullo_epi16(q, a);
        let s = scale & 0xffff;
        acc[0] = _mm256_add_epi32(acc[0], _mm256_madd_epi16(p, _mm256_set1_epi32(s)));
        acc[1] = _mm256_add_epi32(acc[1], _mm256_madd_epi16(p, _mm256_set1_epi32(s << 16)));
    }
}

/// The eight lanes `[i0, …, i7]` of the even and odd accumulators of [`piece`].
#[inline(always)]
unsafe fn lanes(acc: [__m256i; 2]) -> __m256i {
    // SAFETY: register-only; AVX2 per the caller.
    unsafe {
        let half =
            |v: __m256i| _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
        // [i0, i2, i4, i6] and [i1, i3, i5, i7].
        let (even, odd) = (half(acc[0]), half(acc[1]));
        _mm256_set_m128i(_mm_unpackhi_epi32(even, odd), _mm_unpacklo_epi32(even, odd))
    }
}

/// `Q4_K`: `d`, `dmin`, twelve bytes of 6-bit scales and minima, 128 bytes of nibbles.
pub(crate) struct Q4K;

impl KQuant for Q4K {
    const BYTES: usize = crate::quant::BlockQ4_K::BYTES;
    const MINS: bool = true;
    #[inline(always)]
    unsafe fn ints(b: &[u8], a: &BlockQ8_K) -> (__m256i, i32) {
        debug_assert!(b.len() >= Self::BYTES);
        let (sc, mn) = k_scales_mins(b[4..16].try_into().unwrap_or(&[0; 12]));
        let mins = k_mins_sum(a, &mn);
        // SAFETY: `b` is a block (its 128 quant bytes from 16), `a`'s quants are 256 bytes; the
        // rest is register-only with AVX2 per the caller.
        unsafe {
            let mut acc = [_mm256_setzero_si256(); 2];
            let m = _mm256_set1_epi8(0x0f);
            for c in 0..4 {
                let bytes = _mm256_loadu_si256(b.as_ptr().add(16 + 32 * c) as *const __m256i);
                // Sub-block 2c is the low nibbles of these 32 bytes, 2c + 1 the high ones.
                let subs = [
                    _mm256_and_si256(bytes, m),
                    _mm256_and_si256(_mm256_srli_epi16::<4>(bytes), m),
                ];
                for (h, v) in subs.into_iter().enumerate() {
                    let sb = 2 * c + h;
                    let s = sc[sb] as i32;
                    let at = a.qs.as_ptr().add(32 * sb);
                    piece(
                        _mm256_cvtepu8_epi16(_mm256_castsi256_si128(v)),
                        at,
                        s,
                        &mut acc,
                    );
                    let hi = _mm256_extracti128_si256::<1>(v);
                    piece(_mm256_cvtepu8_epi16(hi), at.add(16), s, &mut acc);
                }
            }
            (lanes(acc), mins)
        }
    }
    fn scales(b: &[u8]) -> (f32, f32) {
        let h = |at: usize| f16_to_f32(u16::from_le_bytes([b[at], b[at + 1]]));
        (h(0), h(2))
    }
}

/// `Q6_K`: 128 bytes of low nibbles, 64 of high bit pairs, sixteen i8 scales, `d`.
pub(crate) struct Q6K;

impl KQuant for Q6K {
    const BYTES: usize = crate::quant::BlockQ6_K::BYTES;
    const MINS: bool = false;
    #[inline(always)]
    unsafe fn ints(b: &[u8], a: &BlockQ8_K) -> (__m256i, i32) {
        debug_assert!(b.len() >= Self::BYTES);
        // SAFETY: `b` is a block (`ql` at 0, `qh` at 128, the scales at 192), `a`'s quants are
        // 256 bytes; the rest is register-only with AVX2 per the caller.
        unsafe {
            let mut acc = [_mm256_setzero_si256(); 2];
            let p = b.as_ptr();
            let (low, two) = (_mm256_set1_epi8(0x0f), _mm256_set1_epi8(0x30));
            for h in 0..2 {
                let ql0 = _mm256_loadu_si256(p.add(64 * h) as *const __m256i);
                let ql1 = _mm256_loadu_si256(p.add(64 * h + 32) as *const __m256i);
                let qh = _mm256_loadu_si256(p.add(128 + 32 * h) as *const __m256i);
                // Values 128h + 32k + l for k = 0..4 (the high bit pairs of qh[l] in order).
                let v = [
                    _mm256_or_si256(
                        _mm256_and_si256(ql0, low),
                        _mm256_and_si256(_mm256_slli_epi16::<4>(qh), two),
                    ),
                    _mm256_or_si256(
                        _mm256_and_si256(ql1, low),
                        _mm256_and_si256(_mm256_slli_epi16::<2>(qh), two),
                    ),
                    _mm256_or_si256(
                        _mm256_and_si256(_mm256_srli_epi16::<4>(ql0), low),
                        _mm256_and_si256(qh, two),
                    ),
                    _mm256_or_si256(
                        _mm256_and_si256(_mm256_srli_epi16::<4>(ql1), low),
                        _mm256_and_si256(_mm256_srli_epi16::<2>(qh), two),
                    ),
                ];
                for (k, v) in v.into_iter().enumerate() {
                    let v = _mm256_sub_epi8(v, _mm256_set1_epi8(32));
                    let first = 128 * h + 32 * k;
                    let at = a.qs.as_ptr().add(first);
                    let s0 = b[192 + first / 16] as i8 as i32;
                    let s1 = b[192 + first / 16 + 1] as i8 as i32;
                    let lo = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(v));
                    piece(lo, at, s0, &mut acc);
                    let hi = _mm256_cvtepi8_epi16(_mm256_extracti128_si256::<1>(v));
                    piece(hi, at.add(16), s1, &mut acc);
                }
            }
            (lanes(acc), 0)
        }
    }
    fn scales(b: &[u8]) -> (f32, f32) {
        (f16_to_f32(u16::from_le_bytes([b[208], b[209]])), 0.0)
    }
}

/// One weight row `w` (whole blocks) against one activation row `a`, as the portable row.
#[inline(always)]
unsafe fn row<K: KQuant>(w: &[u8], a: &[BlockQ8_K]) -> f32 {
    let mut sum = 0.0f32;
    // SAFETY (the block): AVX2 per the caller; `wb` is one block; register-only otherwise.
    unsafe {
        let mut lanes = _mm256_setzero_ps();
        for (wb, ab) in w.chunks_exact(K::BYTES).zip(a) {
            let (ints, mins) = K::ints(wb, ab);
            let (d, dmin) = K::scales(wb);
            let dd = _mm256_set1_ps(d * ab.d);
            lanes = _mm256_add_ps(lanes, _mm256_mul_ps(dd, _mm256_cvtepi32_ps(ints)));
            if K::MINS {
                sum -= (dmin * ab.d) * mins as f32;
            }
        }
        let mut l = [0.0f32; 8];
        _mm256_storeu_ps(l.as_mut_ptr(), lanes);
        for l in l {
            sum += l;
        }
    }
    sum
}

/// The columns `cols` of `r` (format `K`, activations `acts`) into `out`, column-major.
///
/// # Safety
///
/// The CPU must support AVX2.
#[inline(always)]
pub(crate) unsafe fn columns<K: KQuant>(
    r: &Q8Rows<'_>,
    acts: &[BlockQ8_K],
    cols: Range<usize>,
    out: &mut [f32],
) {
    let (m, blocks) = (r.m, r.blocks);
    for (j, column) in cols.zip(out.chunks_exact_mut(m.max(1))) {
        let w = r.row(j);
        for (g, o) in column.iter_mut().enumerate() {
            let a = &acts[g * blocks..(g + 1) * blocks];
            // SAFETY: AVX2 per the caller.
            *o = unsafe { row::<K>(w, a) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::loops::qdot::{q8_portable, Q8Acts, Q8Side};
    use crate::quant::{f32_to_f16, quantize_row_q8_K, GgmlType};

    /// Bytes from a small linear congruential generator.
    fn noise(len: usize, seed: u32) -> Vec<u8> {
        let mut state = seed.wrapping_mul(2_654_435_761).wrapping_add(7);
        (0..len)
            .map(|_| {
                state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (state >> 24) as u8
            })
            .collect()
    }

    #[test]
    fn avx2_k_quant_dots_give_the_portable_bits() {
        if !std::is_x86_feature_detected!("avx2") {
            return;
        }
        let (blocks, m, n) = (2, 2, 3);
        let x: Vec<f32> = noise(m * blocks * 256, 1)
            .iter()
            .map(|&b| (b as f32 - 127.5) / 37.0)
            .collect();
        let mut acts = vec![BlockQ8_K::ZERO; m * blocks];
        quantize_row_q8_K(&x, &mut acts).unwrap();
        let side: Vec<Q8Side> = acts.iter().map(Q8Side::of).collect();
        for ty in [GgmlType::Q4_K, GgmlType::Q6_K] {
            let row_bytes = blocks * ty.block_bytes();
            // Random bytes (so Q6_K's i8 scales take both signs), the f16 scales set to
            // moderate values of either sign.
            let mut w = noise(n * row_bytes, ty.id());
            for b in w.chunks_exact_mut(ty.block_bytes()) {
                let at: &[usize] = if ty == GgmlType::Q4_K {
                    &[0, 2]
                } else {
                    &[208]
                };
                for &at in at {
                    let v = (b[at] as f32 - 127.5) / 900.0;
                    b[at..at + 2].copy_from_slice(&f32_to_f16(v).to_le_bytes());
                }
            }
            let r = Q8Rows {
                acts: if ty == GgmlType::Q4_K {
                    Q8Acts::Q4K(&acts)
                } else {
                    Q8Acts::Q6K(&acts)
                },
                side: &side,
                w: &w,
                row_bytes,
                blocks,
                m,
            };
            let mut want = vec![0.0f32; n * m];
            q8_portable(&r, 0..n, &mut want);
            let mut got = vec![f32::NAN; n * m];
            // SAFETY: the CPU has AVX2, as checked.
            unsafe {
                if ty == GgmlType::Q4_K {
                    columns::<Q4K>(&r, &acts, 0..n, &mut got)
                } else {
                    columns::<Q6K>(&r, &acts, 0..n, &mut got)
                }
            };
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&want), "{ty}");
            assert!(want.iter().all(|v| v.is_finite() && *v != 0.0), "{ty}");
        }
    }
}
