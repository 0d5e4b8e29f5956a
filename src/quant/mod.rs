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

mod blocks;
mod decode;
mod error;
mod format;
mod half;
mod q8;

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
