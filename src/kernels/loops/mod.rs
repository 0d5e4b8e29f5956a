//! The inner loops: everything a kernel computes per unit, in a fixed order, and nothing about
//! how units are scheduled or which compiled variant runs.
//!
//! * [`simd`] — the lane contract and its backends (plain Rust, SSE2, AVX2, NEON);
//! * [`lanes`] — the fixed-order dot products, sums and accumulations built on it;
//! * [`exp`] — the deterministic, vectorisable exponential of the softmax;
//! * [`attend`] — one (batch, head) of attention;
//! * [`gemm`] — a packed, register-blocked output tile of a matrix product (`gemm_avx512`: its
//!   AVX-512 micro-kernel), of matmul, linear and conv2d; [`conv`] — a convolution's input
//!   packed as that product's operand;
//! * [`matvec`] — a column range of a product with few rows (a decode step's matvec);
//! * [`qdot`] — the dot products over quantized weight rows: q8 mode (integer, llama.cpp's
//!   combination) and exact mode (decoded a block at a time, in lanes); `qdot_x86` —
//!   exact mode decoded straight into AVX2 or AVX-512 registers; `qdot8_x86` — q8 mode's
//!   integer dots in AVX2 and AVX-512 VNNI, `qdot8k_x86` — its K-quant dots in AVX2;
//! * [`norm`], [`rope`], [`gate`] — one row of the decoder ops: RMS normalisation, rotary
//!   position embedding, the SiLU gate (plain fixed-order loops, the same bits on every
//!   backend, so they need no compiled variants).
//!
//! The entry points (`kernels/{sdpa,matmul,conv}.rs`) validate, allocate and open the region;
//! `kernels/variants.rs` compiles these loops once per backend and registers the results.

pub(crate) mod attend;
pub(crate) mod conv;
pub(crate) mod exp;
pub(crate) mod gate;
pub(crate) mod gemm;
#[cfg(all(target_arch = "x86_64", feature = "std"))]
pub(crate) mod gemm_avx512;
pub(crate) mod lanes;
pub(crate) mod matvec;
pub(crate) mod norm;
pub(crate) mod panel;
pub(crate) mod qdot;
#[cfg(all(target_arch = "x86_64", feature = "std"))]
pub(crate) mod qdot8_x86;
#[cfg(all(target_arch = "x86_64", feature = "std"))]
pub(crate) mod qdot8k_x86;
#[cfg(all(target_arch = "x86_64", feature = "std"))]
pub(crate) mod qdot_x86;
pub(crate) mod rope;
pub(crate) mod simd;
