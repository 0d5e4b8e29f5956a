//! A deterministic, vectorisable `exp` for the kernels' softmax.
//!
//! `libm::expf` is portable but branchy, so a loop over it never vectorises. [`exp`] is a
//! branch-free Cephes-style evaluation built only from IEEE `+`, `-`, `*`, comparisons and bit
//! moves, each exactly rounded, so it returns the same bits on x86_64 (scalar, SSE2 or AVX2),
//! wasm32 and thumbv7em, and LLVM turns a loop over it into vector code. Rust never fuses
//! `a * b + c`, so the vector width cannot change a result.
//!
//! Method: `x = n·ln 2 + r` with `n = round(x·log2 e)` (the 1.5·2²³ rounding trick) and
//! `|r| ≤ ln 2 / 2` (ln 2 split in two for an exact `n·ln2_hi`); `e^r` by a degree-7
//! polynomial; `2^n` built from its exponent bits.
//!
//! Accuracy (tested in `tests/kernels_exp_ops.rs` against f64 `exp` on a sweep of 2·10⁶ points
//! and densely around 0): relative error at most [`EXP_MAX_REL_ERROR`] (2 ulp; measured
//! 8.1·10⁻⁸, about 1.4 ulp) for every `x` whose result is a normal f32, i.e. `x` in
//! `[EXP_MIN_ARG, EXP_MAX_ARG]` = `[-87.3365, 88.7228]`. Outside that range: `x < EXP_MIN_ARG`
//! (including `-inf`) gives `+0.0` (results that would be subnormal are flushed to zero),
//! `x > EXP_MAX_ARG` (including `+inf`) gives
//! `+inf`, and NaN gives the canonical quiet NaN.

/// Below this the result is no longer a normal f32: [`exp`] returns `0.0`.
pub const EXP_MIN_ARG: f32 = -87.336_5;
/// Above this the result overflows: [`exp`] returns `+inf`.
pub const EXP_MAX_ARG: f32 = 88.722_83;
/// The largest relative error of [`exp`] against f64 `exp` over `[EXP_MIN_ARG, EXP_MAX_ARG]`,
/// (2 ulp; the test sweep measures 8.1·10⁻⁸).
pub const EXP_MAX_REL_ERROR: f64 = 1.2e-7;

const LOG2_E: f32 = core::f32::consts::LOG2_E;
// ln 2 = LN2_HI + LN2_LO; LN2_HI has few enough mantissa bits that `n * LN2_HI` is exact.
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;
// 1.5 · 2²³: adding it rounds a float in (-2²², 2²²) to an integer in the low mantissa bits.
const ROUND_MAGIC: f32 = 12_582_912.0;

/// `e^x` in f32, deterministic across targets and vector widths. Accuracy: see
/// [`EXP_MAX_REL_ERROR`]; range: [`EXP_MIN_ARG`] to [`EXP_MAX_ARG`] (below it `0`, above it
/// `+inf`; NaN stays NaN).
///
/// ```
/// use skainet_schedule::exp;
/// assert_eq!(exp(0.0), 1.0);
/// assert_eq!(exp(f32::NEG_INFINITY), 0.0);
/// assert!((exp(1.0) - core::f32::consts::E).abs() < 1e-6);
/// ```
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    // Clamp first so every intermediate below stays finite; the special cases are selected
    // at the end (comparisons and selects vectorise, branches would not).
    let xc = x.clamp(EXP_MIN_ARG, EXP_MAX_ARG);
    let t = xc * LOG2_E + ROUND_MAGIC;
    let n = (t.to_bits() as i32).wrapping_sub(ROUND_MAGIC.to_bits() as i32);
    let nf = t - ROUND_MAGIC;
    let r = (xc - nf * LN2_HI) - nf * LN2_LO;
    let mut p = 1.987_569_1e-4_f32;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 0.166_666_65;
    p = p * r + 0.5;
    let er = (p * (r * r) + r) + 1.0;
    // e^x = e^r · 2^n, with 2^n split in two factors so n = 128 (x near EXP_MAX_ARG) and
    // n = -126 stay representable.
    let half = n >> 1;
    let scale_a = f32::from_bits(((half + 127) as u32) << 23);
    let scale_b = f32::from_bits(((n - half + 127) as u32) << 23);
    let y = (er * scale_a) * scale_b;
    if x.is_nan() {
        f32::NAN
    } else if x < EXP_MIN_ARG {
        0.0
    } else if x > EXP_MAX_ARG {
        f32::INFINITY
    } else {
        y
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;

    #[test]
    fn special_values() {
        assert_eq!(exp(0.0).to_bits(), 1.0f32.to_bits());
        assert_eq!(exp(f32::NEG_INFINITY).to_bits(), 0.0f32.to_bits());
        assert_eq!(exp(-1000.0).to_bits(), 0.0f32.to_bits());
        assert_eq!(exp(f32::INFINITY), f32::INFINITY);
        assert_eq!(exp(100.0), f32::INFINITY);
        assert_eq!(exp(f32::NAN).to_bits(), f32::NAN.to_bits());
    }
}
