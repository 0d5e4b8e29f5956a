//! The ggml type ids a model file names, and the block geometry of each.

use core::fmt;

/// A tensor element type as ggml numbers it (`enum ggml_type`), restricted to the formats this
/// crate reads: plain floats and the block formats of llama.cpp's common presets.
// ggml's own names (`Q4_K`, not `Q4K`): the ones a reader of a model card searches for.
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GgmlType {
    /// IEEE single precision, one value per "block".
    F32,
    /// IEEE half precision.
    F16,
    /// bfloat16: the upper half of an f32.
    BF16,
    /// 32 values: an f16 scale and 32 signed bytes.
    Q8_0,
    /// 32 values: an f16 scale and 32 4-bit values offset by 8.
    Q4_0,
    /// 32 values: f16 scale and minimum, 32 4-bit values.
    Q4_1,
    /// 32 values: an f16 scale, 32 high bits and 32 low nibbles, offset by 16.
    Q5_0,
    /// 32 values: f16 scale and minimum, 32 high bits and 32 low nibbles.
    Q5_1,
    /// 256 values: f16 super-scale and super-minimum, 8 sub-blocks with 6-bit scales and minima,
    /// 4-bit values.
    Q4_K,
    /// 256 values: as `Q4_K` with a fifth bit per value.
    Q5_K,
    /// 256 values: 16 sub-blocks with 8-bit scales, 6-bit values offset by 32, an f16
    /// super-scale.
    Q6_K,
}

/// A ggml type id this crate does not read (another quantization, or no type at all).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnknownGgmlType(pub u32);

impl fmt::Display for UnknownGgmlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ggml type {} is not one this crate reads", self.0)
    }
}

impl core::error::Error for UnknownGgmlType {}

impl GgmlType {
    /// Every type this crate reads, in ggml id order.
    pub const ALL: [GgmlType; 11] = [
        GgmlType::F32,
        GgmlType::F16,
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q5_1,
        GgmlType::Q8_0,
        GgmlType::Q4_K,
        GgmlType::Q5_K,
        GgmlType::Q6_K,
        GgmlType::BF16,
    ];

    /// The type's ggml id, as a GGUF tensor info stores it.
    pub const fn id(self) -> u32 {
        match self {
            GgmlType::F32 => 0,
            GgmlType::F16 => 1,
            GgmlType::Q4_0 => 2,
            GgmlType::Q4_1 => 3,
            GgmlType::Q5_0 => 6,
            GgmlType::Q5_1 => 7,
            GgmlType::Q8_0 => 8,
            GgmlType::Q4_K => 12,
            GgmlType::Q5_K => 13,
            GgmlType::Q6_K => 14,
            GgmlType::BF16 => 30,
        }
    }

    /// The type with ggml id `id`.
    pub const fn from_id(id: u32) -> Result<GgmlType, UnknownGgmlType> {
        Ok(match id {
            0 => GgmlType::F32,
            1 => GgmlType::F16,
            2 => GgmlType::Q4_0,
            3 => GgmlType::Q4_1,
            6 => GgmlType::Q5_0,
            7 => GgmlType::Q5_1,
            8 => GgmlType::Q8_0,
            12 => GgmlType::Q4_K,
            13 => GgmlType::Q5_K,
            14 => GgmlType::Q6_K,
            30 => GgmlType::BF16,
            _ => return Err(UnknownGgmlType(id)),
        })
    }

    /// ggml's name of the type (`"q4_1"`, `"f32"`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            GgmlType::F32 => "f32",
            GgmlType::F16 => "f16",
            GgmlType::BF16 => "bf16",
            GgmlType::Q8_0 => "q8_0",
            GgmlType::Q4_0 => "q4_0",
            GgmlType::Q4_1 => "q4_1",
            GgmlType::Q5_0 => "q5_0",
            GgmlType::Q5_1 => "q5_1",
            GgmlType::Q4_K => "q4_K",
            GgmlType::Q5_K => "q5_K",
            GgmlType::Q6_K => "q6_K",
        }
    }

    /// Values per block: 1 for the plain floats, 32 or 256 for the block formats. A row's length
    /// must be a multiple of it.
    pub const fn block_len(self) -> usize {
        match self {
            GgmlType::F32 | GgmlType::F16 | GgmlType::BF16 => 1,
            GgmlType::Q8_0 | GgmlType::Q4_0 | GgmlType::Q4_1 | GgmlType::Q5_0 | GgmlType::Q5_1 => {
                32
            }
            GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K => 256,
        }
    }

    /// Bytes per block.
    pub const fn block_bytes(self) -> usize {
        match self {
            GgmlType::F32 => 4,
            GgmlType::F16 | GgmlType::BF16 => 2,
            GgmlType::Q8_0 => 2 + 32,
            GgmlType::Q4_0 => 2 + 16,
            GgmlType::Q4_1 => 2 + 2 + 16,
            GgmlType::Q5_0 => 2 + 4 + 16,
            GgmlType::Q5_1 => 2 + 2 + 4 + 16,
            GgmlType::Q4_K => 2 + 2 + 12 + 128,
            GgmlType::Q5_K => 2 + 2 + 12 + 32 + 128,
            GgmlType::Q6_K => 128 + 64 + 16 + 2,
        }
    }

    /// Bytes of a row of `len` values, or `None` when `len` is not a whole number of blocks or
    /// the size overflows `usize`.
    pub const fn row_bytes(self, len: usize) -> Option<usize> {
        if !len.is_multiple_of(self.block_len()) {
            return None;
        }
        (len / self.block_len()).checked_mul(self.block_bytes())
    }
}

impl fmt::Display for GgmlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_block_sizes_are_ggml_s() {
        let sizes: [(u32, usize, usize); 11] = [
            (0, 1, 4),
            (1, 1, 2),
            (2, 32, 18),
            (3, 32, 20),
            (6, 32, 22),
            (7, 32, 24),
            (8, 32, 34),
            (12, 256, 144),
            (13, 256, 176),
            (14, 256, 210),
            (30, 1, 2),
        ];
        for (t, (id, len, bytes)) in GgmlType::ALL.iter().zip(sizes) {
            assert_eq!(t.id(), id);
            assert_eq!(GgmlType::from_id(id), Ok(*t));
            assert_eq!((t.block_len(), t.block_bytes()), (len, bytes), "{t}");
        }
        assert_eq!(GgmlType::from_id(9), Err(UnknownGgmlType(9)));
        assert_eq!(GgmlType::from_id(u32::MAX), Err(UnknownGgmlType(u32::MAX)));
    }

    #[test]
    fn row_bytes_rejects_partial_blocks_and_overflow() {
        assert_eq!(GgmlType::Q4_1.row_bytes(576), Some(18 * 20));
        assert_eq!(GgmlType::Q4_K.row_bytes(576), None);
        assert_eq!(GgmlType::F32.row_bytes(usize::MAX), None);
        assert_eq!(GgmlType::Q6_K.row_bytes(1536), Some(6 * 210));
    }
}
