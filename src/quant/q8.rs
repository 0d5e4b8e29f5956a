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
    if x.is_nan() || !(-2_147_483_648.0..2_147_483_648.0).contains(&x) {
        i32::MIN
    } else {
        x as i32
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
    (d, core::array::from_fn(|j| cvtps2dq(rint(x[j] * id))))
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
    for (b, x) in out.iter_mut().zip(x.chunks_exact(32)) {
        let Some(x) = x.first_chunk::<32>() else {
            continue;
        };
        let (d, q) = q8_avx(x);
        b.d = f32_to_f16(d);
        b.qs = q.map(saturate);
    }
    Ok(())
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
    Ok(())
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
    Ok(())
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
