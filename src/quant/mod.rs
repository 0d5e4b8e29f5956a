//! Quantized block formats as ggml defines them (`ggml-common.h`), `no_std`.
//!
//! A tensor of one of these types is a sequence of blocks; each block holds
//! [`GgmlType::block_len`] values in [`GgmlType::block_bytes`] bytes, little-endian, scales in
//! IEEE half precision. The portable decode of each format is its definition: every faster path
//! must give the same bits.
//!
//! * [`GgmlType`] — the type ids and block geometry;
//! * one `#[repr(C)]` struct per block format ([`BlockQ8_0`], [`BlockQ4_0`], [`BlockQ4_1`],
//!   [`BlockQ5_0`], [`BlockQ5_1`], [`BlockQ4_K`], [`BlockQ5_K`], [`BlockQ6_K`]), read from and
//!   written to its bytes, with its exact decode; [`decode_row`] for a whole row of any type;
//! * [`f16_to_f32`], [`bf16_to_f32`], [`f32_to_f16`] — the 16-bit floats, exactly;
//! * the activation quantizers of the q8 mode: [`quantize_row_q8_0`], [`quantize_row_q8_1`],
//!   [`quantize_row_q8_K`] into [`BlockQ8_0`], [`BlockQ8_1`], [`BlockQ8_K`], as llama.cpp's
//!   x86_64 CPU build runs them.
//!
//! The products over quantized weights are kernels: `quant_linear` and `quant_embedding` at the
//! crate root.
//!
//! # The q8 activation quantizers
//!
//! A product over quantized weights in llama.cpp first quantizes its f32 activations into the
//! weights' `vec_dot_type`: [`BlockQ8_0`] for `Q4_0`, `Q5_0` and `Q8_0` weights, [`BlockQ8_1`]
//! for `Q4_1` and `Q5_1`, [`BlockQ8_K`] for the K-quants. Which code quantizes them depends on
//! the build; the crate follows what an x86_64 build with AVX or AVX2 (every x86_64 CPU of
//! the last decade, and what `GGML_NATIVE` builds there) runs — `quantize_row_q8_0` and
//! `quantize_row_q8_1` of `ggml-cpu/arch/x86/quants.c`, `quantize_row_q8_K_ref` for Q8_K —
//! emulated exactly in portable Rust:
//!
//! * **Q8_0 / Q8_1** (the AVX path, not the reference one): `amax` is the largest `|x|` of the
//!   32 (taken with `maxps`' rule, `if a > b { a } else { b }`, in the AVX reduction's order,
//!   which only matters for NaNs); `d = amax / 127` is stored as an f16 (rounded to nearest
//!   even, as `vcvtps2ph`); `id = 127 / amax` (`0` when `amax` is `0`), and each quant is
//!   `x · id` rounded to nearest **even** (`_mm256_round_ps(.., _MM_ROUND_NEAREST)`), converted
//!   as `cvtps2dq` does (NaN or out of range: `i32::MIN`) and saturated to `i8` (the `packs`
//!   steps). llama.cpp's reference `quantize_row_q8_0_ref` differs in two ways: it rounds half
//!   away from zero (`roundf`) and multiplies by `1 / d` rather than `127 / amax`. For Q8_1,
//!   `s = d · Σq` (the f32 `d`, the sum of the unsaturated integers) is stored as an f16.
//! * **Q8_K** (the reference, which x86 builds call too): `max` is the first value of the
//!   largest magnitude, `iscale = -127 / max`, each quant `min(127, nearest_int(iscale·x))`
//!   with ggml's `nearest_int` (the `x + 1.5·2^23` rounding trick, to nearest even), the 16
//!   sums of 16 quants kept as `i16`, and `d = 1 / iscale` as an f32. An all-zero block (no
//!   nonzero `|x|`) is `d = 0`, all quants and sums zero (ggml leaves its sums unwritten; they
//!   are multiplied by `d = 0`).

mod blocks;
mod decode;
mod error;
mod format;
mod half;
mod q8;

#[cfg(all(target_arch = "x86_64", feature = "std"))]
pub(crate) use blocks::k_scales_widened;
pub use blocks::{
    scale_min_k4, BlockQ4_0, BlockQ4_1, BlockQ4_K, BlockQ5_0, BlockQ5_1, BlockQ5_K, BlockQ6_K,
    BlockQ8_0,
};
pub use decode::decode_row;
pub use error::QuantError;
pub use format::{GgmlType, UnknownGgmlType};
pub use half::{bf16_to_f32, f16_to_f32, f32_to_f16};
pub use q8::{quantize_row_q8_0, quantize_row_q8_1, quantize_row_q8_K, BlockQ8_1, BlockQ8_K};

pub(crate) use decode::{block_decoder, Block};
pub(crate) use error::row_bytes;
