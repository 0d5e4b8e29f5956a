//! [`decode_row`]: a row of any format to f32, and the block trait the kernels decode through.

use super::blocks::{
    BlockQ4_0, BlockQ4_1, BlockQ4_K, BlockQ5_0, BlockQ5_1, BlockQ5_K, BlockQ6_K, BlockQ8_0,
};
use super::error::{row_bytes, QuantError};
use super::format::GgmlType;
use super::half::{bf16_to_f32, f16_to_f32};

/// Decodes the row `bytes` of `out.len()` values of type `ty` into `out`, exactly as ggml's
/// `dequantize_row_*` (and `gguf.quants.dequantize`): the definition every faster decode of
/// this crate matches bit for bit. F32 rows are copied, F16 and BF16 rows widened exactly.
///
/// ```
/// use skainet_schedule::quant::{decode_row, BlockQ4_1, GgmlType};
/// let block = BlockQ4_1 { d: 0x3c00, m: 0xbc00, qs: [0x21; 16] }; // d = 1, m = -1
/// let mut out = [0.0f32; 32];
/// decode_row(GgmlType::Q4_1, &block.to_le_bytes(), &mut out).unwrap();
/// assert_eq!(out[0], 0.0); // 1·1 − 1
/// assert_eq!(out[16], 1.0); // 1·2 − 1
/// ```
///
/// # Errors
///
/// [`QuantError::PartialBlock`] when `out.len()` is not a whole number of blocks,
/// [`QuantError::TooLarge`] when its bytes overflow `usize`, [`QuantError::ByteLength`] when
/// `bytes` is not exactly that row. Nothing is written then.
pub fn decode_row(ty: GgmlType, bytes: &[u8], out: &mut [f32]) -> Result<(), QuantError> {
    let values = out.len();
    let expected = row_bytes(ty, values)?;
    if bytes.len() != expected {
        return Err(QuantError::ByteLength {
            ty,
            values,
            expected,
            got: bytes.len(),
        });
    }
    block_decoder(ty)(bytes, out);
    Ok(())
}

/// The decode of whole blocks of `ty` (one value per block for the float types): the
/// function writes `out.len()` values from `bytes`, which must hold exactly their blocks (a
/// shorter `bytes` leaves the values it lacks as they are).
pub(crate) fn block_decoder(ty: GgmlType) -> fn(&[u8], &mut [f32]) {
    match ty {
        GgmlType::F32 => decode_f32s,
        GgmlType::F16 => decode_f16s,
        GgmlType::BF16 => decode_bf16s,
        GgmlType::Q8_0 => decode_blocks::<BlockQ8_0>,
        GgmlType::Q4_0 => decode_blocks::<BlockQ4_0>,
        GgmlType::Q4_1 => decode_blocks::<BlockQ4_1>,
        GgmlType::Q5_0 => decode_blocks::<BlockQ5_0>,
        GgmlType::Q5_1 => decode_blocks::<BlockQ5_1>,
        GgmlType::Q4_K => decode_blocks::<BlockQ4_K>,
        GgmlType::Q5_K => decode_blocks::<BlockQ5_K>,
        GgmlType::Q6_K => decode_blocks::<BlockQ6_K>,
    }
}

fn decode_f32s(bytes: &[u8], out: &mut [f32]) {
    for (o, b) in out.iter_mut().zip(bytes.chunks_exact(4)) {
        *o = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    }
}

fn decode_f16s(bytes: &[u8], out: &mut [f32]) {
    for (o, b) in out.iter_mut().zip(bytes.chunks_exact(2)) {
        *o = f16_to_f32(u16::from_le_bytes([b[0], b[1]]));
    }
}

fn decode_bf16s(bytes: &[u8], out: &mut [f32]) {
    for (o, b) in out.iter_mut().zip(bytes.chunks_exact(2)) {
        *o = bf16_to_f32(u16::from_le_bytes([b[0], b[1]]));
    }
}

/// Decodes whole blocks: `bytes` holds `out.len() / B::LEN` blocks (checked by the caller).
#[inline]
pub(crate) fn decode_blocks<B: Block>(bytes: &[u8], out: &mut [f32]) {
    for (b, o) in bytes
        .chunks_exact(B::BYTES)
        .zip(out.chunks_exact_mut(B::LEN))
    {
        B::read(b).decode_into(o);
    }
}

/// A weight block format, for code generic over the formats (the kernels' decode and dot
/// loops). Each impl delegates to the block's own `from_le_bytes` and `decode`.
pub(crate) trait Block: Copy {
    /// Values per block.
    const LEN: usize;
    /// Bytes per block.
    const BYTES: usize;
    /// The block stored in `bytes` (`bytes.len() == BYTES`, as `chunks_exact` hands it; any
    /// other length reads as an all-zero block, which no caller produces).
    fn read(bytes: &[u8]) -> Self;
    /// Writes the block's `LEN` values to `out[..LEN]` (`out` at least that long; a shorter
    /// one is left as it is, which no caller produces).
    fn decode_into(&self, out: &mut [f32]);
}

macro_rules! impl_block {
    ($block:ident, $len:literal, $bytes:literal) => {
        impl Block for $block {
            const LEN: usize = $len;
            const BYTES: usize = $bytes;

            #[inline(always)]
            fn read(bytes: &[u8]) -> Self {
                match bytes.first_chunk::<$bytes>() {
                    Some(b) => Self::from_le_bytes(b),
                    None => Self::from_le_bytes(&[0; $bytes]),
                }
            }

            #[inline(always)]
            fn decode_into(&self, out: &mut [f32]) {
                if let Some(o) = out.first_chunk_mut::<$len>() {
                    self.decode(o);
                }
            }
        }
    };
}

impl_block!(BlockQ8_0, 32, 34);
impl_block!(BlockQ4_0, 32, 18);
impl_block!(BlockQ4_1, 32, 20);
impl_block!(BlockQ5_0, 32, 22);
impl_block!(BlockQ5_1, 32, 24);
impl_block!(BlockQ4_K, 256, 144);
impl_block!(BlockQ5_K, 256, 176);
impl_block!(BlockQ6_K, 256, 210);

#[cfg(test)]
mod tests {
    use super::*;

    fn decoded(ty: GgmlType, bytes: &[u8], values: usize) -> alloc::vec::Vec<f32> {
        let mut out = alloc::vec![0.0; values];
        decode_row(ty, bytes, &mut out).unwrap();
        out
    }

    #[test]
    fn block_trait_geometry_is_the_types() {
        fn check<B: Block>(ty: GgmlType) {
            assert_eq!(B::LEN, ty.block_len());
            assert_eq!(B::BYTES, ty.block_bytes());
        }
        check::<BlockQ8_0>(GgmlType::Q8_0);
        check::<BlockQ4_0>(GgmlType::Q4_0);
        check::<BlockQ4_1>(GgmlType::Q4_1);
        check::<BlockQ5_0>(GgmlType::Q5_0);
        check::<BlockQ5_1>(GgmlType::Q5_1);
        check::<BlockQ4_K>(GgmlType::Q4_K);
        check::<BlockQ5_K>(GgmlType::Q5_K);
        check::<BlockQ6_K>(GgmlType::Q6_K);
    }

    #[test]
    fn q4_0_offsets_nibbles_by_eight_low_half_first() {
        let b = BlockQ4_0 {
            d: 0x4000, // 2
            qs: core::array::from_fn(|j| (j as u8) | 0xf0),
        };
        let out = decoded(GgmlType::Q4_0, &b.to_le_bytes(), 32);
        assert_eq!(out[0], -16.0);
        assert_eq!(out[15], 14.0);
        assert_eq!(out[16], 14.0);
    }

    #[test]
    fn q5_0_and_q5_1_take_the_fifth_bit_from_qh() {
        let b = BlockQ5_0 {
            d: 0x3c00,
            qh: 0x8001_0001u32.to_le_bytes(), // values 0, 16 and 31
            qs: [0; 16],
        };
        let out = decoded(GgmlType::Q5_0, &b.to_le_bytes(), 32);
        assert_eq!((out[0], out[1], out[16], out[31]), (0.0, -16.0, 0.0, 0.0));
        let b = BlockQ5_1 {
            d: 0x3c00,
            m: 0x3c00,
            qh: 0x8000_0002u32.to_le_bytes(),
            qs: [0xff; 16],
        };
        let out = decoded(GgmlType::Q5_1, &b.to_le_bytes(), 32);
        assert_eq!((out[0], out[1], out[16], out[31]), (16.0, 32.0, 16.0, 32.0));
    }

    #[test]
    fn q4_k_uses_the_packed_scales_and_minima() {
        let mut scales = [0u8; 12];
        scales[0] = 2; // scale 0
        scales[4] = 1; // min 0
        scales[8] = 0x53; // scale 4 low = 3, min 4 low = 5
        scales[0] |= 0x40; // scale 4 high bits = 1 -> 16 + 3 = 19
        let b = BlockQ4_K {
            d: 0x3c00,
            dmin: 0x4000, // 2
            scales,
            qs: [0x31; 128],
        };
        let out = decoded(GgmlType::Q4_K, &b.to_le_bytes(), 256);
        assert_eq!(out[0], 0.0); // sub-block 0: (1·2)·1 − 2·1
        assert_eq!(out[32].to_bits(), 0); // sub-block 1: (1·0)·3 − 2·0
        assert_eq!(out[128], 9.0); // sub-block 4: (1·19)·1 − 2·5
        assert_eq!(out[160].to_bits(), 0); // sub-block 5: 0·3 − 0
    }

    #[test]
    fn q6_k_scales_each_sixteen_with_a_signed_scale() {
        let mut b = BlockQ6_K {
            ql: [0; 128],
            qh: [0; 64],
            scales: [0; 16],
            d: 0x3c00,
        };
        b.scales[0] = -1;
        b.scales[15] = 3;
        b.ql[127] = 0xf0; // value 128 + 96 + 31 = 255: high nibble 15
        b.qh[63] = 0xc0; // and top bits 3: q = 63
        let out = decoded(GgmlType::Q6_K, &b.to_le_bytes(), 256);
        assert_eq!(out[0], 32.0);
        assert_eq!(out[255], 93.0);
        assert_eq!(out[16].to_bits(), 0x8000_0000); // scale 0: 0·(−32)
    }

    #[test]
    fn float_rows_decode_little_endian() {
        let out = decoded(GgmlType::F32, &[0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0], 2);
        assert_eq!(out, [1.0, -2.0]);
        let out = decoded(GgmlType::F16, &[0x00, 0x3c, 0x01, 0x00], 2);
        // 2^-24, the smallest f16 subnormal, spelled in bits: miri perturbs `powi`.
        assert_eq!(out, [1.0, f32::from_bits(0x3380_0000)]);
        let out = decoded(GgmlType::BF16, &[0x80, 0x3f], 1);
        assert_eq!(out, [1.0]);
    }

    #[test]
    fn decode_row_rejects_partial_blocks_wrong_lengths_and_overflow() {
        let mut out = [0.0f32; 33];
        assert_eq!(
            decode_row(GgmlType::Q8_0, &[0; 34], &mut out),
            Err(QuantError::PartialBlock {
                ty: GgmlType::Q8_0,
                values: 33
            })
        );
        let mut out = [0.0f32; 32];
        let err = decode_row(GgmlType::Q8_0, &[0; 33], &mut out).unwrap_err();
        assert_eq!(
            err,
            QuantError::ByteLength {
                ty: GgmlType::Q8_0,
                values: 32,
                expected: 34,
                got: 33
            }
        );
        assert_eq!(
            alloc::string::ToString::to_string(&err),
            "q8_0: a row of 32 values takes 34 bytes, got 33"
        );
        assert_eq!(
            super::super::error::row_bytes(GgmlType::F32, usize::MAX / 2),
            Err(QuantError::TooLarge {
                ty: GgmlType::F32,
                values: usize::MAX / 2
            })
        );
    }
}
