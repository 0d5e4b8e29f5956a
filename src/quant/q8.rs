//! The activation quantizers of the q8 mode (the rules are in the `quant` module's docs).

use super::blocks::BlockQ8_0;
use super::error::QuantError;
use super::half::f32_to_f16;

/// `Q8_1`: 32 signed-byte quants `q` of values `d·q`, and `s = d·Σq`, both f16 (the
/// activations of `Q4_1` and `Q5_1` weights; llama.cpp stores `d` and `s` as one `half2`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct BlockQ8_1 {
    /// The scale, IEEE half bits.
    pub d: u16,
    /// `d` times the sum of the quants, IEEE half bits.
    pub s: u16,
    /// The 32 quants.
    pub qs: [i8; 32],
}
const _: () = assert!(core::mem::size_of::<BlockQ8_1>() == 36);

/// `Q8_K`: 256 signed-byte quants of values `d·q` with an f32 scale, and the sums of each 16
/// quants (the activations of the K-quant weights).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockQ8_K {
    /// The scale.
    pub d: f32,
    /// The 256 quants.
    pub qs: [i8; 256],
    /// `bsums[j]` is the sum of `qs[16·j..16·j + 16]`.
    pub bsums: [i16; 16],
}
const _: () = assert!(core::mem::size_of::<BlockQ8_K>() == 292);

impl BlockQ8_1 {
    /// Values per block.
    pub const LEN: usize = 32;
}

impl BlockQ8_K {
    /// Values per block.
    pub const LEN: usize = 256;
    /// The all-zero block (what an all-zero input quantizes to).
    pub const ZERO: Self = Self {
        d: 0.0,
        qs: [0; 256],
        bsums: [0; 16],
    };
}

impl Default for BlockQ8_K {
    /// [`BlockQ8_K::ZERO`].
    fn default() -> Self {
        Self::ZERO
    }
}

/// `if a > b { a } else { b }`: x86's `maxps`/`maxss` (the second operand when either is NaN).
#[inline(always)]
fn maxps(a: f32, b: f32) -> f32 {
    if a > b {
        a
    } else {
        b
    }
}

/// The largest `|x|` of 32 values, reduced as the AVX code reduces it: four vectors of eight
/// lane-wise, then the two halves, then pairs, then the last two.
#[inline(always)]
fn amax_avx(x: &[f32; 32]) -> f32 {
    let abs = |v: f32| f32::from_bits(v.to_bits() & 0x7fff_ffff);
    let m: [f32; 8] = core::array::from_fn(|l| {
        let mut m = abs(x[l]);
        m = maxps(m, abs(x[8 + l]));
        m = maxps(m, abs(x[16 + l]));
        maxps(m, abs(x[24 + l]))
    });
    let m4: [f32; 4] = core::array::from_fn(|l| maxps(m[4 + l], m[l]));
    let m2 = [maxps(m4[0], m4[2]), maxps(m4[1], m4[3])];
    maxps(m2[0], m2[1])
}

/// `cvtps2dq` of a value already rounded: the integer, or `i32::MIN` for NaN or out of range.
#[inline(always)]
fn cvtps2dq(x: f32) -> i32 {
    // One comparison pair, false for NaN: the loop over a block vectorises.
    if (-2_147_483_648.0..2_147_483_648.0).contains(&x) {
        x as i32
    } else {
        i32::MIN
    }
}

/// `x` rounded to an integer, ties to even (`roundps` with the default rounding), exactly as
/// `libm::rintf` but as plain float arithmetic the compiler can vectorise: below `2^23` the
/// sum with `±2^23` has an ulp of one, so the sum's rounding is `x`'s; from `2^23` on (and for
/// NaN) `x` is its own rounding. A zero's sign may differ, which [`cvtps2dq`] does not see.
#[inline(always)]
fn rint(x: f32) -> f32 {
    const TWO_23: f32 = 8_388_608.0;
    let magic = f32::from_bits(TWO_23.to_bits() | (x.to_bits() & 0x8000_0000));
    if f32::from_bits(x.to_bits() & 0x7fff_ffff) < TWO_23 {
        (x + magic) - magic
    } else {
        x
    }
}

/// One 32-value block the AVX way: `(d as f32, quants before saturation)`.
#[inline(always)]
fn q8_avx(x: &[f32; 32]) -> (f32, [i32; 32]) {
    let amax = amax_avx(x);
    let d = amax / 127.0;
    let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
    // A loop, not `array::from_fn`: the closure would stay a call per value.
    let mut q = [0i32; 32];
    for (q, &x) in q.iter_mut().zip(x) {
        *q = cvtps2dq(rint(x * id));
    }
    (d, q)
}

#[inline(always)]
fn saturate(q: i32) -> i8 {
    q.clamp(i8::MIN as i32, i8::MAX as i32) as i8
}

fn check_len(
    format: &'static str,
    values: usize,
    blocks: usize,
    len: usize,
) -> Result<(), QuantError> {
    if blocks.checked_mul(len) == Some(values) {
        Ok(())
    } else {
        Err(QuantError::ActivationLength {
            format,
            values,
            blocks,
        })
    }
}

/// Quantizes `x` into `out.len()` [`BlockQ8_0`] blocks as llama.cpp's x86_64 AVX build does
/// (see [the q8 rules](crate::quant#the-q8-activation-quantizers) for the exact rule).
///
/// ```
/// use skainet_schedule::quant::{f16_to_f32, quantize_row_q8_0, BlockQ8_0};
/// let mut x = [0.0f32; 32];
/// x[0] = 127.0;
/// x[1] = -63.5; // a tie: to even
/// x[2] = 0.5;   // a tie: to even
/// let mut out = [BlockQ8_0::default()];
/// quantize_row_q8_0(&x, &mut out).unwrap();
/// assert_eq!(f16_to_f32(out[0].d), 1.0);
/// assert_eq!(&out[0].qs[..3], &[127, -64, 0]);
/// ```
///
/// # Errors
///
/// [`QuantError::ActivationLength`] when `x` is not `32 · out.len()` values; nothing is
/// written then.
pub fn quantize_row_q8_0(x: &[f32], out: &mut [BlockQ8_0]) -> Result<(), QuantError> {
    check_len("q8_0", x.len(), out.len(), 32)?;
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, all `q8_0_avx2` needs.
        unsafe { q8_0_avx2(x, out) };
        return Ok(());
    }
    q8_0_blocks(x, out);
    Ok(())
}

/// One block in AVX2, the instructions of llama.cpp's AVX code that [`q8_avx`] emulates:
/// `(d, the saturated quants, Σ quants before saturation)`.
#[cfg(all(feature = "std", target_arch = "x86_64"))]
#[inline(always)]
unsafe fn q8_block_avx2(x: &[f32; 32]) -> (f32, [i8; 32], i32) {
    use core::arch::x86_64::*;
    // SAFETY: AVX2 per the caller; the loads read `x`'s 32 values and the store writes `q`'s
    // 32 bytes.
    unsafe {
        let p = x.as_ptr();
        // No closures (`array::map`): they would not inline the intrinsics.
        let v = [
            _mm256_loadu_ps(p),
            _mm256_loadu_ps(p.add(8)),
            _mm256_loadu_ps(p.add(16)),
            _mm256_loadu_ps(p.add(24)),
        ];
        let sign = _mm256_set1_ps(-0.0);
        let mut m = _mm256_andnot_ps(sign, v[0]);
        for &v in &v[1..] {
            m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v));
        }
        let m4 = _mm_max_ps(_mm256_extractf128_ps::<1>(m), _mm256_castps256_ps128(m));
        let m2 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        let amax = _mm_cvtss_f32(_mm_max_ss(m2, _mm_movehdup_ps(m2)));
        let d = amax / 127.0;
        let id = _mm256_set1_ps(if amax != 0.0 { 127.0 / amax } else { 0.0 });
        const NEAREST: i32 = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
        let mut i = [_mm256_setzero_si256(); 4];
        for (i, &v) in i.iter_mut().zip(&v) {
            *i = _mm256_cvtps_epi32(_mm256_round_ps::<NEAREST>(_mm256_mul_ps(v, id)));
        }
        let sum = _mm256_add_epi32(_mm256_add_epi32(i[0], i[1]), _mm256_add_epi32(i[2], i[3]));
        let sum = _mm_add_epi32(
            _mm256_castsi256_si128(sum),
            _mm256_extracti128_si256::<1>(sum),
        );
        let sum = _mm_add_epi32(sum, _mm_shuffle_epi32::<0b01_00_11_10>(sum));
        let sum = _mm_add_epi32(sum, _mm_shuffle_epi32::<0b10_11_00_01>(sum));
        // Packing saturates; it interleaves the 128-bit halves, which the permute undoes.
        let q = _mm256_packs_epi16(
            _mm256_packs_epi32(i[0], i[1]),
            _mm256_packs_epi32(i[2], i[3]),
        );
        let q = _mm256_permutevar8x32_epi32(q, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        let mut out = [0i8; 32];
        _mm256_storeu_si256(out.as_mut_ptr() as *mut __m256i, q);
        (d, out, _mm_cvtsi128_si32(sum))
    }
}

/// [`quantize_row_q8_0`]'s blocks in AVX2.
#[cfg(all(feature = "std", target_arch = "x86_64"))]
#[target_feature(enable = "avx2")]
unsafe fn q8_0_avx2(x: &[f32], out: &mut [BlockQ8_0]) {
    for (b, x) in out.iter_mut().zip(x.chunks_exact(32)) {
        let Some(x) = x.first_chunk::<32>() else {
            continue;
        };
        // SAFETY: this function runs with AVX2.
        let (d, q, _) = unsafe { q8_block_avx2(x) };
        b.d = f32_to_f16(d);
        b.qs = q;
    }
}

/// [`quantize_row_q8_1`]'s blocks in AVX2.
#[cfg(all(feature = "std", target_arch = "x86_64"))]
#[target_feature(enable = "avx2")]
unsafe fn q8_1_avx2(x: &[f32], out: &mut [BlockQ8_1]) {
    for (b, x) in out.iter_mut().zip(x.chunks_exact(32)) {
        let Some(x) = x.first_chunk::<32>() else {
            continue;
        };
        // SAFETY: this function runs with AVX2.
        let (d, q, sum) = unsafe { q8_block_avx2(x) };
        b.d = f32_to_f16(d);
        b.s = f32_to_f16(d * sum as f32);
        b.qs = q;
    }
}

#[inline(always)]
fn q8_0_blocks(x: &[f32], out: &mut [BlockQ8_0]) {
    for (b, x) in out.iter_mut().zip(x.chunks_exact(32)) {
        let Some(x) = x.first_chunk::<32>() else {
            continue;
        };
        let (d, q) = q8_avx(x);
        b.d = f32_to_f16(d);
        b.qs = q.map(saturate);
    }
}

/// Quantizes `x` into `out.len()` [`BlockQ8_1`] blocks as llama.cpp's x86_64 AVX build does:
/// the quants and `d` as [`quantize_row_q8_0`], and `s = d · Σq` (see [the q8 rules](crate::quant#the-q8-activation-quantizers)).
///
/// ```
/// use skainet_schedule::quant::{f16_to_f32, quantize_row_q8_1, BlockQ8_1};
/// let x = [1.0f32; 32];
/// let mut out = [BlockQ8_1::default()];
/// quantize_row_q8_1(&x, &mut out).unwrap();
/// assert_eq!(out[0].qs, [127; 32]);
/// assert_eq!(f16_to_f32(out[0].s), 32.0); // (1/127)·(32·127), rounded to a half
/// ```
///
/// # Errors
///
/// As [`quantize_row_q8_0`].
pub fn quantize_row_q8_1(x: &[f32], out: &mut [BlockQ8_1]) -> Result<(), QuantError> {
    check_len("q8_1", x.len(), out.len(), 32)?;
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, all `q8_1_avx2` needs.
        unsafe { q8_1_avx2(x, out) };
        return Ok(());
    }
    q8_1_blocks(x, out);
    Ok(())
}

#[inline(always)]
fn q8_1_blocks(x: &[f32], out: &mut [BlockQ8_1]) {
    for (b, x) in out.iter_mut().zip(x.chunks_exact(32)) {
        let Some(x) = x.first_chunk::<32>() else {
            continue;
        };
        let (d, q) = q8_avx(x);
        let sum = q.iter().fold(0i32, |s, &q| s.wrapping_add(q));
        b.d = f32_to_f16(d);
        b.s = f32_to_f16(d * sum as f32);
        b.qs = q.map(saturate);
    }
}

/// ggml's `nearest_int`: `x` rounded to nearest even through the f32 addition of
/// `1.5·2^23` (exact for `|x| < 2^22`; other values give what ggml's gives).
#[inline(always)]
fn nearest_int(x: f32) -> i32 {
    let v = x + 12_582_912.0;
    (v.to_bits() & 0x007f_ffff) as i32 - 0x0040_0000
}

/// Quantizes `x` into `out.len()` [`BlockQ8_K`] blocks as llama.cpp's `quantize_row_q8_K_ref`
/// (what its x86_64 build calls; see [the q8 rules](crate::quant#the-q8-activation-quantizers)).
///
/// ```
/// use skainet_schedule::quant::{quantize_row_q8_K, BlockQ8_K};
/// let mut x = [0.0f32; 256];
/// x[0] = -2.0; // the largest magnitude, negative: iscale = 63.5
/// x[1] = 1.0;
/// let mut out = [BlockQ8_K::ZERO];
/// quantize_row_q8_K(&x, &mut out).unwrap();
/// assert_eq!((out[0].qs[0], out[0].qs[1]), (-127, 64)); // 63.5 rounds to even
/// assert_eq!(out[0].bsums[0], -63);
/// assert_eq!(out[0].d, 1.0 / (127.0 / 2.0));
/// ```
///
/// # Errors
///
/// [`QuantError::ActivationLength`] when `x` is not `256 · out.len()` values; nothing is
/// written then.
#[allow(non_snake_case)] // ggml's name for the format
pub fn quantize_row_q8_K(x: &[f32], out: &mut [BlockQ8_K]) -> Result<(), QuantError> {
    check_len("q8_K", x.len(), out.len(), 256)?;
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, all `q8_k_avx2` needs.
        unsafe { q8_k_avx2(x, out) };
        return Ok(());
    }
    q8_k_blocks(x, out);
    Ok(())
}

/// [`quantize_row_q8_K`]'s blocks, one value at a time: the definition [`q8_k_avx2`] is
/// tested against.
fn q8_k_blocks(x: &[f32], out: &mut [BlockQ8_K]) {
    for (b, x) in out.iter_mut().zip(x.chunks_exact(256)) {
        let mut max = 0.0f32;
        let mut amax = 0.0f32;
        for &v in x {
            let a = f32::from_bits(v.to_bits() & 0x7fff_ffff);
            if a > amax {
                amax = a;
                max = v;
            }
        }
        if amax == 0.0 {
            *b = BlockQ8_K::ZERO;
            continue;
        }
        let iscale = -127.0 / max;
        for (q, &v) in b.qs.iter_mut().zip(x) {
            *q = nearest_int(iscale * v).min(127) as i8;
        }
        for (s, q) in b.bsums.iter_mut().zip(b.qs.chunks_exact(16)) {
            *s = q.iter().map(|&q| q as i32).sum::<i32>() as i16;
        }
        b.d = 1.0 / iscale;
    }
}

/// [`quantize_row_q8_K`]'s blocks in AVX2, eight values at a time by the same IEEE operations
/// (the largest magnitude, NaNs passed over, then its first value; `nearest_int` by the same
/// addition; `as i8` as a byte's truncation, not a saturating pack), so the same bits.
#[cfg(all(feature = "std", target_arch = "x86_64"))]
#[target_feature(enable = "avx2")]
unsafe fn q8_k_avx2(x: &[f32], out: &mut [BlockQ8_K]) {
    use core::arch::x86_64::*;
    for (b, x) in out.iter_mut().zip(x.chunks_exact(256)) {
        let Some(x) = x.first_chunk::<256>() else {
            continue;
        };
        let p = x.as_ptr();
        // SAFETY: the loads read `x`'s 256 values and the stores write `b.qs`'s 256 bytes; the
        // rest is register-only with AVX2.
        unsafe {
            let abs = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fff_ffff));
            // No closure for the magnitudes: it would not inherit AVX2, and its load would be
            // a call.
            // `vmaxps` keeps its second operand where the first is NaN, as `a > amax` does.
            let mut m = _mm256_setzero_ps();
            for i in 0..32 {
                m = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(p.add(8 * i)), abs), m);
            }
            let m4 = _mm_max_ps(_mm256_extractf128_ps::<1>(m), _mm256_castps256_ps128(m));
            let m2 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
            let amax = _mm_cvtss_f32(_mm_max_ss(m2, _mm_movehdup_ps(m2)));
            if amax == 0.0 {
                *b = BlockQ8_K::ZERO;
                continue;
            }
            // The first value of that magnitude (`a > amax` keeps the first).
            let target = _mm256_set1_ps(amax);
            let mut max = amax;
            for i in 0..32 {
                let magnitude = _mm256_and_ps(_mm256_loadu_ps(p.add(8 * i)), abs);
                let hit = _mm256_cmp_ps::<_CMP_EQ_OQ>(magnitude, target);
                let mask = _mm256_movemask_ps(hit) as u32;
                if mask != 0 {
                    max = x[8 * i + mask.trailing_zeros() as usize];
                    break;
                }
            }
            let iscale = -127.0 / max;
            let (scale, magic) = (_mm256_set1_ps(iscale), _mm256_set1_ps(12_582_912.0));
            let (mantissa, half) = (
                _mm256_set1_epi32(0x007f_ffff),
                _mm256_set1_epi32(0x0040_0000),
            );
            let top = _mm256_set1_epi32(127);
            // The low byte of each i32, four to each 128-bit half, then the halves' together.
            let low = _mm256_setr_epi8(
                0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 8, 12, -1, -1,
                -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
            );
            let q = b.qs.as_mut_ptr();
            for i in 0..32 {
                let t = _mm256_add_ps(_mm256_mul_ps(scale, _mm256_loadu_ps(p.add(8 * i))), magic);
                let v = _mm256_sub_epi32(_mm256_and_si256(_mm256_castps_si256(t), mantissa), half);
                let v = _mm256_shuffle_epi8(_mm256_min_epi32(v, top), low);
                let v = _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(0, 4, 1, 1, 1, 1, 1, 1));
                _mm_storel_epi64(q.add(8 * i) as *mut __m128i, _mm256_castsi256_si128(v));
            }
            for (s, q) in b.bsums.iter_mut().zip(b.qs.chunks_exact(16)) {
                let w = _mm256_cvtepi8_epi16(_mm_loadu_si128(q.as_ptr() as *const __m128i));
                let w = _mm256_madd_epi16(w, _mm256_set1_epi16(1));
                let w = _mm_add_epi32(_mm256_castsi256_si128(w), _mm256_extracti128_si256::<1>(w));
                let w = _mm_add_epi32(w, _mm_shuffle_epi32::<0b01_00_11_10>(w));
                let w = _mm_add_epi32(w, _mm_shuffle_epi32::<0b10_11_00_01>(w));
                *s = _mm_cvtsi128_si32(w) as i16;
            }
            b.d = 1.0 / iscale;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::f16_to_f32;

    #[test]
    fn q8_0_rounds_ties_to_even_with_127_over_amax() {
        // amax 0.3: x·(127/0.3) is exactly -124.5 (-> -124, to even), while x·(1/d) is
        // -124.50001 (-> -125, what the reference's roundf and 1/d give); the next one is
        // -125.49999 here (-> -125) and exactly -125.5 through 1/d (-> -126).
        let mut x = [0.0f32; 32];
        x[0] = f32::from_bits(0x3e99_999a); // 0.3
        x[1] = f32::from_bits(0xbe96_938e); // -0.2940945
        x[2] = f32::from_bits(0xbe97_c92c); // -0.2964567
        let mut out = [BlockQ8_0::default()];
        quantize_row_q8_0(&x, &mut out).unwrap();
        assert_eq!(&out[0].qs[..3], &[127, -124, -125]);
        assert_eq!(out[0].d, f32_to_f16(0.3 / 127.0));
        // Exact ties: amax 127 gives id 1, so 2.5 -> 2 and -3.5 -> -4 (roundf: 3 and -4).
        x = [0.0; 32];
        x[0] = 127.0;
        x[1] = 2.5;
        x[2] = -3.5;
        quantize_row_q8_0(&x, &mut out).unwrap();
        assert_eq!(&out[0].qs[..3], &[127, 2, -4]);
    }

    #[test]
    fn q8_0_of_zeros_is_zero_and_of_nan_or_inf_saturates_low() {
        let mut out = [BlockQ8_0::default(); 2];
        let mut x = [0.0f32; 64];
        x[33] = f32::INFINITY;
        x[34] = 1.0;
        quantize_row_q8_0(&x, &mut out).unwrap();
        assert_eq!(out[0], BlockQ8_0::default());
        // amax inf: d inf, id 0; inf·0 is NaN -> i32::MIN -> -128; 1·0 -> 0.
        assert_eq!(out[1].d, 0x7c00);
        assert_eq!(&out[1].qs[..3], &[0, -128, 0]);
    }

    #[test]
    fn rint_is_libm_rintf_on_every_integer_result() {
        // Ties, near-ties and the ends of each range, both signs, then a sweep of bit patterns.
        let special = [
            0.5f32,
            1.5,
            2.5,
            0.49999997,
            126.5,
            127.5,
            4_194_303.5,
            4_194_304.5,
            8_388_607.5,
            8_388_608.0,
            16_777_215.0,
            1.0e30,
            f32::MAX,
            f32::INFINITY,
            1.0e-45,
            0.0,
        ];
        let n: u32 = if cfg!(miri) { 1 << 10 } else { 1 << 16 };
        let sweep = (0..n).map(|i| f32::from_bits(i.wrapping_mul(65_521) << 1));
        for x in special.into_iter().chain(sweep) {
            for x in [x, -x] {
                let (got, want) = (rint(x), libm::rintf(x));
                assert!(
                    got == want || (got.is_nan() && want.is_nan()),
                    "{x:e}: {got:e} vs {want:e}"
                );
                assert_eq!(cvtps2dq(got), cvtps2dq(want), "{x:e}");
            }
        }
    }

    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    #[test]
    fn the_avx2_quantizers_give_the_blocks_of_the_portable_ones() {
        if !std::is_x86_feature_detected!("avx2") {
            return;
        }
        // Blocks of every kind of value: random bit patterns (NaN, infinities, subnormals and
        // huge values among them), then small normal values, then blocks of ties.
        let mut state = 12_345u32;
        let mut x: Vec<f32> = (0..64 * 32)
            .map(|_| {
                state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                f32::from_bits(state)
            })
            .collect();
        x.extend((0..64 * 32).map(|i| ((i * 7919 % 2001) as f32 - 1000.0) / 77.0));
        x.extend((0..8 * 32).map(|i| (i % 64) as f32 - 31.5));
        let blocks = x.len() / 32;
        let (mut want0, mut got0) = (vec![BlockQ8_0::default(); blocks], vec![]);
        got0.resize(blocks, BlockQ8_0::default());
        q8_0_blocks(&x, &mut want0);
        // SAFETY: the CPU has AVX2, as checked.
        unsafe { q8_0_avx2(&x, &mut got0) };
        assert_eq!(got0, want0);
        let (mut want1, mut got1) = (vec![BlockQ8_1::default(); blocks], vec![]);
        got1.resize(blocks, BlockQ8_1::default());
        q8_1_blocks(&x, &mut want1);
        // SAFETY: as above.
        unsafe { q8_1_avx2(&x, &mut got1) };
        assert_eq!(got1, want1);
        // The public functions take the AVX2 build here; nothing was left at its default.
        let mut public = vec![BlockQ8_1::default(); blocks];
        quantize_row_q8_1(&x, &mut public).unwrap();
        assert_eq!(public, want1);
        assert!(want1.iter().filter(|b| b.qs.contains(&-128)).count() > 0);
        // Q8_K: the same values (17 blocks of 256), then a block of zeros, one whose largest
        // magnitude comes first with either sign, and one with a NaN.
        x.extend([0.0f32; 256]);
        x.extend((0..256).map(|i| match i {
            9 => -2.5,
            40 => 2.5,
            _ => (i as f32 - 128.0) / 100.0,
        }));
        // A NaN after the largest magnitude, in the same lane of the next eight.
        x.extend((0..256).map(|i| match i {
            0 => 5.0,
            8 => f32::NAN,
            _ => 1.0 / (i as f32 + 1.0),
        }));
        let blocks = x.len() / 256;
        let (mut want, mut got) = (vec![BlockQ8_K::ZERO; blocks], vec![BlockQ8_K::ZERO; blocks]);
        q8_k_blocks(&x, &mut want);
        // SAFETY: as above.
        unsafe { q8_k_avx2(&x, &mut got) };
        for (i, (got, want)) in got.iter().zip(&want).enumerate() {
            assert_eq!(got.d.to_bits(), want.d.to_bits(), "block {i}");
            for j in 0..16 {
                // A NaN's quant comes from its payload, which miri picks at random for each
                // operation (the hardware propagates it): there, only groups without one.
                let group = 256 * i + 16 * j..256 * i + 16 * j + 16;
                if cfg!(miri) && x[group].iter().any(|v| v.is_nan()) {
                    continue;
                }
                let at = 16 * j..16 * j + 16;
                assert_eq!(
                    (&got.qs[at.clone()], got.bsums[j]),
                    (&want.qs[at], want.bsums[j]),
                    "block {i}, group {j}"
                );
            }
        }
        // The first of the two largest magnitudes sets the scale's sign.
        let last = &want[blocks - 2];
        assert_eq!((last.qs[9], last.qs[40]), (-127, 127));
        // NaNs, which the search for the largest magnitude passes over, are among the values.
        assert!(x.iter().any(|v| v.is_nan()));
    }

    #[test]
    fn q8_1_sums_the_quants_times_the_f32_scale() {
        let x: [f32; 32] = core::array::from_fn(|j| j as f32 - 10.0);
        let mut out = [BlockQ8_1::default()];
        quantize_row_q8_1(&x, &mut out).unwrap();
        let d = 21.0f32 / 127.0;
        let q: [i32; 32] = core::array::from_fn(|j| libm::rintf(x[j] * (127.0 / 21.0)) as i32);
        assert_eq!(out[0].qs, q.map(|q| q as i8));
        assert_eq!(out[0].qs[31], 127);
        assert_eq!(out[0].qs[0], -60); // -10 · 6.047619 = -60.476
        let sum: i32 = q.iter().sum();
        assert_eq!(f16_to_f32(out[0].s), f16_to_f32(f32_to_f16(d * sum as f32)));
        assert_eq!(out[0].d, f32_to_f16(d));
    }

    #[test]
    fn q8_k_scales_by_the_signed_maximum_and_sums_sixteens() {
        let mut x = [0.0f32; 256];
        x[5] = 3.0;
        x[17] = -3.0; // same magnitude, later: not the maximum
        x[200] = 1.5;
        let mut out = [BlockQ8_K::ZERO];
        quantize_row_q8_K(&x, &mut out).unwrap();
        let b = &out[0];
        // iscale = -127/3 = -42.333332: x[5] -> -127, x[17] -> 127, x[200] -> -63.5 -> -64.
        assert_eq!((b.qs[5], b.qs[17], b.qs[200]), (-127, 127, -64));
        assert_eq!((b.bsums[0], b.bsums[1], b.bsums[12]), (-127, 127, -64));
        assert_eq!(b.d.to_bits(), (1.0f32 / (-127.0f32 / 3.0)).to_bits());
    }

    #[test]
    fn quantizers_reject_lengths_that_are_not_their_blocks() {
        let mut b0 = [BlockQ8_0::default(); 2];
        assert_eq!(
            quantize_row_q8_0(&[0.0; 63], &mut b0),
            Err(QuantError::ActivationLength {
                format: "q8_0",
                values: 63,
                blocks: 2
            })
        );
        let mut b1 = [BlockQ8_1::default()];
        assert_eq!(
            quantize_row_q8_1(&[0.0; 64], &mut b1),
            Err(QuantError::ActivationLength {
                format: "q8_1",
                values: 64,
                blocks: 1
            })
        );
        let mut bk = [BlockQ8_K::ZERO];
        let err = quantize_row_q8_K(&[0.0; 255], &mut bk).unwrap_err();
        assert_eq!(
            alloc::string::ToString::to_string(&err),
            "q8_K: 255 values are not the values of 1 blocks"
        );
    }
}
