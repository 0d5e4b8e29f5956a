//! Quantized block formats as ggml defines them (`ggml-common.h`), `no_std`.
//!
//! A tensor of one of these types is a sequence of blocks; each block holds
//! [`GgmlType::block_len`] values in [`GgmlType::block_bytes`] bytes, little-endian, scales in
//! IEEE half precision. The portable decode of each format is its definition: every faster path
//! must give the same bits.

mod format;

pub use format::{GgmlType, UnknownGgmlType};
