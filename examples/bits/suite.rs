//! The fixed calls of the cross-target check (`scripts/check_targets.sh`), shared by the hosted
//! program (`examples/bits.rs`) and the bare-metal one (`examples/bits_embedded.rs`), so it uses
//! only `alloc` and the crate.
//!
//! Grouped-query causal attention with an additive mask and one fully masked row (2 batches,
//! 4 query heads over 2 K/V heads, 5 queries, 9 keys, head dimension 13: a four-row block, a
//! lone row and a ragged lane tail in both the dot products and the softmax), a 7×13 · 13×5
//! matmul, and a strided, padded conv2d with bias — every call under `Sequential` with the
//! given variant. The result is a 64-bit FNV-1a hash of the little-endian bytes of every output
//! value's bits, in that order, so two runs agree exactly when every output bit does.
//!
//! A second hash ([`run_quant`]) covers the quantized products: `quant_linear` of 3 rows by a
//! 5 × 256 weight in every block format, in both activation modes, and `quant_embedding`.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use skainet_schedule::quant::{f32_to_f16, GgmlType};
use skainet_schedule::{
    conv2d_with, matmul_with, quant_embedding_with, quant_linear_with,
    scaled_dot_product_attention_with, Activations, Conv2dOptions, KernelConfig, KernelError,
    QMatrix, SdpaOptions, Sequential, Tensor,
};

/// The query row of the attention call whose every key the mask removes.
pub const FULLY_MASKED_ROW: usize = 2;

/// Deterministic values in `[-1, 1)`, exact in f32 on every target (a 32-bit LCG).
fn values(len: usize, seed: u32) -> Vec<f32> {
    let mut x = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    (0..len)
        .map(|_| {
            x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (x >> 8) as f32 / (1u32 << 23) as f32 - 1.0
        })
        .collect()
}

fn tensor(shape: &[usize], seed: u32) -> Result<Tensor, KernelError> {
    let len = shape.iter().product();
    Ok(Tensor::new(shape.to_vec(), values(len, seed))?)
}

/// 64-bit FNV-1a.
struct Fnv(u64);

impl Fnv {
    fn write(&mut self, xs: &[f32]) {
        for x in xs {
            for byte in x.to_bits().to_le_bytes() {
                self.0 = (self.0 ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3);
            }
        }
    }
}

/// Runs the fixed calls with `config`'s variant; returns the hash of every output bit.
pub fn run(config: &KernelConfig) -> Result<u64, KernelError> {
    let mut hash = Fnv(0xcbf2_9ce4_8422_2325);

    let (b, h, kv, sq, sk, hd) = (2, 4, 2, 5, 9, 13);
    let q = tensor(&[b, h, sq, hd], 1)?;
    let k = tensor(&[b, kv, sk, hd], 2)?;
    let v = tensor(&[b, kv, sk, hd], 3)?;
    let bias = values(sq * sk, 4);
    let mask = Tensor::from_fn(alloc::vec![sq, sk], |i| {
        if i / sk == FULLY_MASKED_ROW || i % 7 == 3 {
            f32::NEG_INFINITY
        } else {
            bias[i] * 0.5
        }
    })?;
    let causal = SdpaOptions {
        scale: None,
        causal: true,
    };
    let attention = scaled_dot_product_attention_with(
        config,
        &q,
        &k,
        &v,
        Some(mask.view()),
        &causal,
        &Sequential,
    )?;
    hash.write(attention.data());

    let a = tensor(&[7, 13], 5)?;
    let w = tensor(&[13, 5], 6)?;
    hash.write(matmul_with(config, &a, &w, &Sequential)?.data());

    let input = tensor(&[2, 3, 7, 6], 7)?;
    let weight = tensor(&[4, 3, 3, 2], 8)?;
    let conv_bias = tensor(&[4], 9)?;
    let options = Conv2dOptions {
        stride: [2, 1],
        padding: [1, 1],
    };
    let conv = conv2d_with(
        config,
        &input,
        &weight,
        Some(&conv_bias),
        &options,
        &Sequential,
    )?;
    hash.write(conv.data());

    Ok(hash.0)
}

/// The line the check compares: `target <triple> <variant> <hash as 16 hex digits>`.
pub fn line(triple: &str, variant: &str, hash: u64) -> String {
    format!("target {triple} {variant} {hash:016x}")
}

/// The formats of [`run_quant`]: every block format llama.cpp's common presets write.
const FORMATS: [GgmlType; 11] = [
    GgmlType::F32,
    GgmlType::F16,
    GgmlType::BF16,
    GgmlType::Q8_0,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
];

/// `rows × cols` deterministic values of `ty`: quants from the LCG, every f16 scale (and each
/// float value) of moderate size, so that no value is infinite or NaN (whose payloads a target
/// may change).
fn weight(ty: GgmlType, rows: usize, cols: usize, seed: u32) -> Result<Vec<u8>, KernelError> {
    // Whole blocks for every format here: 256 values of any of them.
    let len = rows * ty.row_bytes(cols).unwrap_or(0);
    let raw = values(len + len / ty.block_bytes() * 2, seed);
    let mut raw = raw.iter();
    let mut next = move || raw.next().copied().unwrap_or(0.0);
    let mut bytes: Vec<u8> = (0..len).map(|_| (next() * 127.0) as i8 as u8).collect();
    // Where each block keeps its f16 scale (and minimum).
    let scales: &[usize] = match ty {
        GgmlType::Q8_0 | GgmlType::Q4_0 | GgmlType::Q5_0 => &[0],
        GgmlType::Q4_1 | GgmlType::Q5_1 | GgmlType::Q4_K | GgmlType::Q5_K => &[0, 2],
        GgmlType::Q6_K => &[208],
        _ => &[],
    };
    for block in bytes.chunks_exact_mut(ty.block_bytes()) {
        match ty {
            GgmlType::F32 => block.copy_from_slice(&next().to_le_bytes()),
            GgmlType::F16 => block.copy_from_slice(&f32_to_f16(next()).to_le_bytes()),
            GgmlType::BF16 => {
                block.copy_from_slice(&((next().to_bits() >> 16) as u16).to_le_bytes())
            }
            _ => {
                for &at in scales {
                    block[at..at + 2].copy_from_slice(&f32_to_f16(next() * 0.05).to_le_bytes());
                }
            }
        }
    }
    Ok(bytes)
}

/// The quantized products with `config`'s variant (its portable precision); the hash of every
/// output bit.
pub fn run_quant(config: &KernelConfig) -> Result<u64, KernelError> {
    let mut hash = Fnv(0xcbf2_9ce4_8422_2325);
    let (rows, cols) = (5, 256);
    let x = tensor(&[3, cols], 10)?;
    for (i, &ty) in FORMATS.iter().enumerate() {
        let bytes = weight(ty, rows, cols, 11 + i as u32)?;
        let w = QMatrix::new(ty, rows, cols, &bytes)?;
        for mode in [Activations::Exact, Activations::Q8] {
            hash.write(quant_linear_with(config, &x, &w, mode, &Sequential)?.data());
        }
        hash.write(quant_embedding_with(config, &[4, 0, 2], &w, &Sequential)?.data());
    }
    Ok(hash.0)
}

/// The quantized products' line: `quant <triple> <variant> <hash as 16 hex digits>`.
pub fn quant_line(triple: &str, variant: &str, hash: u64) -> String {
    format!("quant {triple} {variant} {hash:016x}")
}
