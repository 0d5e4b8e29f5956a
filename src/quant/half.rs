//! The 16-bit floats of the block formats, converted exactly, without a dependency.
//!
//! Widening ([`f16_to_f32`], [`bf16_to_f32`]) is exact for every bit pattern. A NaN keeps its
//! sign and payload; widening an IEEE half sets the quiet bit of a signalling one, as x86's
//! `vcvtph2ps`, aarch64's `fcvt` and ggml's own conversions do (numpy's software conversion
//! keeps it signalling: the one place the fixtures differ, see `tests/quant_decode.rs`).
//! bfloat16 is the upper half of an f32, so its widening is a shift and changes no bit.

/// The f32 of the IEEE half-precision bits `bits`: exact for every pattern (subnormals
/// normalised; infinities kept; a NaN keeps its sign and payload, quieted).
///
/// ```
/// use skainet_schedule::quant::f16_to_f32;
/// assert_eq!(f16_to_f32(0x3c00), 1.0);
/// assert_eq!(f16_to_f32(0xc000), -2.0);
/// assert_eq!(f16_to_f32(0x0001), 2f32.powi(-24)); // the smallest subnormal
/// assert_eq!(f16_to_f32(0x7c00), f32::INFINITY);
/// assert_eq!(f16_to_f32(0x7c01).to_bits(), 0x7fc0_2000); // a signalling NaN, quieted
/// ```
#[inline]
pub const fn f16_to_f32(bits: u16) -> f32 {
    let sign = ((bits & 0x8000) as u32) << 16;
    let exp = ((bits >> 10) & 0x1f) as u32;
    let man = (bits & 0x03ff) as u32;
    let out = match exp {
        0 if man == 0 => sign,
        0 => {
            // 0.man × 2^-14: shift the leading one up to bit 10 and lower the exponent as much.
            let shift = man.leading_zeros() - 21;
            sign | ((113 - shift) << 23) | (((man << shift) & 0x03ff) << 13)
        }
        0x1f if man == 0 => sign | 0x7f80_0000,
        0x1f => sign | 0x7fc0_0000 | (man << 13),
        _ => sign | ((exp + 112) << 23) | (man << 13),
    };
    f32::from_bits(out)
}

/// The f32 of the bfloat16 bits `bits`: the same sign, exponent and leading mantissa bits,
/// exact for every pattern (a NaN is kept as it is).
///
/// ```
/// use skainet_schedule::quant::bf16_to_f32;
/// assert_eq!(bf16_to_f32(0x3f80), 1.0);
/// assert_eq!(bf16_to_f32(0x7f81).to_bits(), 0x7f81_0000);
/// ```
#[inline]
pub const fn bf16_to_f32(bits: u16) -> f32 {
    f32::from_bits((bits as u32) << 16)
}

/// The IEEE half nearest to `x`, ties to even (`vcvtps2ph` with rounding mode 0, what
/// llama.cpp's x86 build uses to store the scales of quantized activations): values beyond the
/// largest half become infinities, tiny ones subnormals or signed zeros; a NaN keeps its sign
/// and the top of its payload, quieted.
///
/// ```
/// use skainet_schedule::quant::f32_to_f16;
/// assert_eq!(f32_to_f16(1.0), 0x3c00);
/// assert_eq!(f32_to_f16(65520.0), 0x7c00); // halfway to the next power: rounds to inf
/// assert_eq!(f32_to_f16(1.0 + 2f32.powi(-11)), 0x3c00); // a tie, to even
/// assert_eq!(f32_to_f16(2f32.powi(-25)), 0x0000); // half the smallest subnormal: to even
/// ```
#[inline]
pub const fn f32_to_f16(x: f32) -> u16 {
    let bits = x.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exp = (bits >> 23) & 0xff;
    let man = bits & 0x007f_ffff;
    if exp == 0xff {
        return if man == 0 {
            sign | 0x7c00
        } else {
            sign | 0x7e00 | (man >> 13) as u16
        };
    }
    if exp > 142 {
        return sign | 0x7c00;
    }
    if exp >= 113 {
        // A normal half; a carry out of the mantissa raises the exponent (up to infinity).
        let h = ((exp - 112) << 10) | (man >> 13);
        let rest = man & 0x1fff;
        let up = rest > 0x1000 || (rest == 0x1000 && h & 1 == 1);
        return sign | (h + up as u32) as u16;
    }
    if exp < 102 {
        // Below half the smallest subnormal (f32 subnormals included).
        return sign;
    }
    // A subnormal half: (1.man × 2^(exp-127)) / 2^-24, rounded.
    let full = man | 0x0080_0000;
    let shift = 126 - exp;
    let h = full >> shift;
    let rest = full & ((1 << shift) - 1);
    let half = 1 << (shift - 1);
    let up = rest > half || (rest == half && h & 1 == 1);
    sign | (h + up as u32) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_widening_covers_each_class() {
        assert_eq!(f16_to_f32(0x0000).to_bits(), 0x0000_0000);
        assert_eq!(f16_to_f32(0x8000).to_bits(), 0x8000_0000);
        assert_eq!(f16_to_f32(0x03ff).to_bits(), 0x387f_c000); // largest subnormal
        assert_eq!(f16_to_f32(0x0400).to_bits(), 0x3880_0000); // smallest normal, 2^-14
        assert_eq!(f16_to_f32(0x7bff), 65504.0);
        assert_eq!(f16_to_f32(0xfc00), f32::NEG_INFINITY);
        assert_eq!(f16_to_f32(0xfe00).to_bits(), 0xffc0_0000);
        assert_eq!(f16_to_f32(0x7dff).to_bits(), 0x7fff_e000);
    }

    #[test]
    fn f16_narrowing_round_trips_every_non_nan_half() {
        for h in 0..=u16::MAX {
            let x = f16_to_f32(h);
            if x.is_nan() {
                assert_eq!(f32_to_f16(x), h | 0x0200, "{h:#06x}");
            } else {
                assert_eq!(f32_to_f16(x), h, "{h:#06x}");
            }
        }
    }

    #[test]
    fn f16_narrowing_rounds_ties_to_even_at_every_scale() {
        // Halfway between two subnormals, and between two normals. Powers of two are spelled
        // in bits: `powi` is not exact under miri, which perturbs it on purpose.
        let pow2 = |e: i32| f32::from_bits(((127 + e) as u32) << 23);
        assert_eq!(f32_to_f16(1.5 * pow2(-24)), 0x0002);
        assert_eq!(f32_to_f16(2.5 * pow2(-24)), 0x0002);
        assert_eq!(f32_to_f16(2.5000002 * pow2(-24)), 0x0003);
        assert_eq!(f32_to_f16(1.0 + 3.0 * pow2(-11)), 0x3c02);
        assert_eq!(f32_to_f16(65519.996), 0x7bff);
        assert_eq!(f32_to_f16(-1e-30), 0x8000);
        assert_eq!(f32_to_f16(f32::from_bits(1)), 0x0000);
        assert_eq!(f32_to_f16(f32::from_bits(0x7f80_0001)), 0x7e00);
        assert_eq!(f32_to_f16(f32::from_bits(0xffc0_2000)), 0xfe01);
    }
}
